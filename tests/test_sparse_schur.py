"""The sparse Schur-complement equations of motion (mbcore.solve.sparse_schur): the
compiled kernel equals the NumPy/SciPy reference, both equal the dense solution of
the augmented system, orderings, linear fill, singular Jacobians, redundant rows,
and the wiring into AccelerationSolver and the dynamic analysis."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import mbcore
from mbcore import Model
from mbcore.solve.dynamics import AccelerationSolver
from mbcore.errors import SingularJacobianError
from mbcore.solve.sparse_schur import (SchurTopology, SparseSchurReference, for_system,
                                 make_solver)
from mbcore.system import compiled_available

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from models import bench_chain_eom, chain, chain_state, stiff_chain, tree  # noqa: E402

needs_compiled = pytest.mark.skipif(not compiled_available(), reason="compiled kernels "
                                    "not built")
BACKENDS = ["numpy", pytest.param("compiled", marks=needs_compiled)]


def random_state(system, seed=1):
    rng = np.random.default_rng(seed)
    q = system.initial_state().q + 0.05 * rng.standard_normal(system.n)
    return q, rng.standard_normal(system.n)


def eom_inputs(system, q, qd, t=0.2):
    J = system.jacobian(q, t)
    J = J.toarray() if sp.issparse(J) else J.copy()
    return (J, system.forces(q, qd, t).copy(), system.gamma(q, qd, t).copy(),
            1.0 / system.mass_diag)


def dense_solution(system, J, Q, gam):
    n, m = system.n, system.m
    A = np.block([[np.diag(system.mass_diag), -J.T], [J, np.zeros((m, m))]])
    x = np.linalg.solve(A, np.concatenate([Q, gam]))
    return x[:n], x[n:]


def solve_with(solver, system, Q, gam, minv):
    qdd, lam = np.zeros(system.n), np.full(system.m, np.nan)
    info = solver.solve(system._jdata, minv, Q, gam, qdd, lam)
    return info, qdd, lam


def rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def loop_model():
    """The KAP four-bar: a closed loop (B couples every joint of the loop)."""
    root = Path(__file__).resolve().parents[1]
    return Model.from_file(root / "examples" / "fourbar_kap.yaml")


MODELS = {"chain": lambda: chain(25), "tree": lambda: tree(4), "loop": loop_model}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_sparse_schur_matches_dense_augmented_solution(name, backend):
    s = MODELS[name]().compile(kernels=backend, jacobian="sparse")
    q, qd = random_state(s)
    J, Q, gam, minv = eom_inputs(s, q, qd)
    info, qdd, lam = solve_with(for_system(s), s, Q, gam, minv)
    assert info == 0
    qdd_ref, lam_ref = dense_solution(s, J, Q, gam)
    assert rel(qdd, qdd_ref) < 1e-11 and rel(lam, lam_ref) < 1e-11
    # the equations of motion hold
    scale = max(np.abs(J.T @ lam).max(), np.abs(Q).max(), 1.0)
    assert np.abs(s.mass_diag * qdd - J.T @ lam - Q).max() < 1e-11 * scale
    assert np.abs(J @ qdd - gam).max() < 1e-10 * max(np.abs(gam).max(), 1.0)


@needs_compiled
@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("ordering", ["auto", "mmd", "rcm", "natural"])
def test_compiled_equals_reference(name, ordering):
    s = MODELS[name]().compile(kernels="compiled", jacobian="sparse")
    q, qd = random_state(s, seed=7)
    _, Q, gam, minv = eom_inputs(s, q, qd)
    topo = SchurTopology(s._indptr, s._csr_cols, s.n, ordering=ordering)
    a = solve_with(make_solver(topo, "compiled"), s, Q, gam, minv)
    b = solve_with(make_solver(topo, "numpy"), s, Q, gam, minv)
    assert a[0] == 0 and b[0] == 0
    # the same LDL^T in C and in NumPy, rounded in a different order: ~eps cond(S)
    # with cond(S) <= 950 here, 2e-13 (observed <= 1.1e-14)
    assert rel(a[1], b[1]) < 1e-11 and rel(a[2], b[2]) < 1e-11
    # and the pivots (D of LDL^T in the same order) agree
    assert rel(_pivots(topo, s, Q, gam, minv, "compiled"),
               _pivots(topo, s, Q, gam, minv, "numpy")) < 1e-11


def _pivots(topo, s, Q, gam, minv, backend):
    solver = make_solver(topo, backend)
    solve_with(solver, s, Q, gam, minv)
    return solver.diagonal()


def test_orderings_and_fill_are_linear():
    """Trees and chains factor without fill beyond B's pattern with the chosen
    ordering, and nnz(L) grows linearly with the number of bodies."""
    for model in (chain(40), tree(6)):
        s = model.compile(kernels="numpy", jacobian="sparse")
        topo = SchurTopology(s._indptr, s._csr_cols, s.n)
        strict_upper = len(topo.Bi) - topo.m
        assert topo.nnz_L == strict_upper, topo.describe()
    s_tree = tree(6).compile(kernels="numpy", jacobian="sparse")
    nat = SchurTopology(s_tree._indptr, s_tree._csr_cols, s_tree.n, ordering="natural")
    auto = SchurTopology(s_tree._indptr, s_tree._csr_cols, s_tree.n)
    assert auto.flops < nat.flops / 5     # breadth-first numbering of a tree fills in
    counts = []
    for n_links in (200, 400, 800):
        s = chain(n_links).compile(kernels="numpy", jacobian="sparse")
        topo = SchurTopology(s._indptr, s._csr_cols, s.n)
        counts.append((topo.nnz_L, len(topo.ta)))
    for (l1, t1), (l2, t2) in zip(counts[:-1], counts[1:], strict=True):
        assert 1.9 < l2 / l1 < 2.1 and 1.9 < t2 / t1 < 2.1


@pytest.mark.parametrize("backend", BACKENDS)
def test_topology_is_shared_per_system(backend):
    """The symbolic analysis is computed once per System, rows and ordering; every
    solver keeps its own numeric buffers, so two solvers of one System give the same
    answer independently."""
    s = chain(12).compile(kernels=backend, jacobian="sparse")
    a, b = for_system(s), for_system(s)
    assert a is not b and a.topology is b.topology
    assert for_system(s, rows=np.arange(s.m - 1)).topology is not a.topology
    assert for_system(s, ordering="natural").topology is not a.topology
    other = chain(12).compile(kernels=backend, jacobian="sparse")
    assert for_system(other).topology is not a.topology
    q, qd = random_state(s)
    J, Q, gam, minv = eom_inputs(s, q, qd)
    ia, qa, la = solve_with(a, s, Q, gam, minv)
    ib, qb, lb = solve_with(b, s, 2.0 * Q, gam, minv)
    ia2, qa2, la2 = solve_with(a, s, Q, gam, minv)
    assert ia == ib == ia2 == 0
    assert np.array_equal(qa, qa2) and np.array_equal(la, la2)
    assert not np.array_equal(qa, qb)


TOPOLOGY_ARRAYS = ("perm", "pinv", "Bp", "Bi", "bdiag", "tp", "ta", "tb", "parent", "Lp",
                   "rp", "jpos", "jcol", "rowid")


def _assert_same_topology(indptr, indices, n, **kw):
    """The compiled symbolic phase equals the NumPy reference exactly; returns the
    compiled topology."""
    a = SchurTopology(indptr, indices, n, symbolic="numpy", **kw)
    b = SchurTopology(indptr, indices, n, symbolic="compiled", **kw)
    assert a.symbolic == "numpy" and b.symbolic == "compiled"
    for name in TOPOLOGY_ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert (a.ordering, a.candidates, a.nnz_L, a.flops) == \
        (b.ordering, b.candidates, b.nnz_L, b.flops)
    assert (a.pattern != b.pattern).nnz == 0
    return b


@needs_compiled
@pytest.mark.parametrize("ordering", ["auto", "mmd", "rcm", "natural", "given"])
def test_compiled_symbolic_analysis_equals_reference(ordering):
    """The compiled symbolic phase (B's pattern, permuted upper triangle, product map)
    gives exactly the reference's integer arrays: every product in the same entry and
    the same order, so the numeric phase sums the same terms in the same order —
    planar chains, trees, a closed loop, a spatial chain with and without the
    transformed columns' vanishing entries, and a subset of the rows."""
    from models import spatial_chain
    from mbcore.system.mass import SpatialMass
    rng = np.random.default_rng(3)
    for model in (chain(30), tree(4), loop_model(), spatial_chain(6)):
        s = model.compile(kernels="compiled", jacobian="sparse")
        indptr, indices = s.csr_pattern()
        order = rng.permutation(s.m) if ordering == "given" else ordering
        assert _assert_same_topology(indptr, indices, s.n, ordering=order).nnz_L > 0
        rows = np.sort(rng.choice(s.m, s.m - 2, replace=False))
        sub = rng.permutation(len(rows)) if ordering == "given" else ordering
        b = _assert_same_topology(indptr, indices, s.n, rows=rows, ordering=sub)
        assert b.m == len(rows)
        if s.nb and len(list(s.rigid_spatial)):
            keep, _ = SpatialMass(s).nonzero_entries()
            b = _assert_same_topology(indptr, indices, s.n, ordering=order, entries=keep)
            assert b.symbolic == "compiled"


@needs_compiled
def test_compiled_symbolic_analysis_on_random_patterns():
    """Random CSR patterns (rows with unsorted columns, empty rows, a subset of the
    entries): the compiled and reference symbolic phases agree exactly."""
    rng = np.random.default_rng(0)
    for trial in range(40):
        m, n = int(rng.integers(1, 30)), int(rng.integers(1, 50))
        A = sp.random(m, n, density=rng.uniform(0.02, 0.3), random_state=trial,
                      format="csr")
        indices = A.indices.copy()
        if trial % 4 == 0:
            for r in range(m):
                rng.shuffle(indices[A.indptr[r]:A.indptr[r + 1]])
        entries = None
        if trial % 3 == 0 and A.nnz:
            entries = np.sort(rng.choice(A.nnz, A.nnz // 2, replace=False))
        for ordering in ("auto", "mmd", "rcm", "natural"):
            b = _assert_same_topology(A.indptr, indices, n, ordering=ordering,
                                      entries=entries)
            assert b.symbolic == "compiled" and b.m == m


@needs_compiled
def test_compiled_symbolic_kernels_reject_bad_input():
    from mbcore._ext._sparse import schur_pattern, schur_products, schur_upper
    rp = np.array([0, 2, 3], dtype=np.intp)
    jcol = np.array([0, 2, 1], dtype=np.intp)
    with pytest.raises(ValueError, match="jcol"):
        schur_pattern(2, 2, rp, jcol)
    ip, ind = schur_pattern(2, 3, rp, jcol)
    with pytest.raises(ValueError, match="permutation"):
        schur_upper(2, ip, ind, np.array([0, 0], dtype=np.intp))
    Bp, Bi, _ = schur_upper(2, ip, ind, np.array([0, 1], dtype=np.intp))
    # a pattern that does not hold every product's entry is refused
    rp2 = np.array([0, 1, 2], dtype=np.intp)
    jcol2 = np.array([0, 0], dtype=np.intp)
    with pytest.raises(ValueError, match="lacks an entry"):
        schur_products(2, 3, rp2, jcol2, np.array([0, 1], dtype=np.intp), Bp, Bi)
    with pytest.raises(ValueError, match="symbolic"):
        SchurTopology(ip, ind, 3, symbolic="fortran")


@needs_compiled
def test_compiled_b_values_sum_the_product_map_in_order():
    """The compiled kernel's B values (entries grouped by their runs' lengths, the
    spatial joints' two-run entries apart) are the product map's sums taken term by
    term in the map's order (here in Python floats): a spatial chain in transformed
    columns (entries of one, two and eight-term runs) and a planar chain.  Bound:
    1e-14 relative to the sum of |terms| (a contracted multiply-add, -march=native
    builds, changes a term by <= 1 ulp; observed 0)."""
    from models import spatial_chain
    from mbcore.system.mass import SpatialMass
    for model, spatial in ((spatial_chain(6), True), (chain(8), False)):
        s = model.compile(kernels="compiled", jacobian="sparse")
        keep = SpatialMass(s).nonzero_entries()[0] if spatial else None
        topo = SchurTopology(*s.csr_pattern(), s.n, entries=keep)
        solver = make_solver(topo, "compiled")
        rng = np.random.default_rng(5)
        jdata = rng.standard_normal(len(s._jdata))
        minv = rng.uniform(0.5, 2.0, s.n)
        qdd, lam = np.zeros(s.n), np.zeros(s.m)
        solver.solve(jdata, minv, np.zeros(s.n), np.zeros(s.m), qdd, lam)
        got = solver.kernel.b_values()
        jv = [float(x) for x in jdata[topo.jpos]]
        cj = [jv[p] * float(minv[topo.jcol[p]]) for p in range(len(jv))]
        for p in range(len(topo.Bi)):
            acc, size = 0.0, 0.0
            for t in range(topo.tp[p], topo.tp[p + 1]):
                acc += cj[topo.ta[t]] * jv[topo.tb[t]]
                size += abs(cj[topo.ta[t]] * jv[topo.tb[t]])
            assert abs(got[p] - acc) <= 1e-14 * size, (p, got[p], acc)


def test_topology_rejects_bad_ordering():
    s = chain(5).compile(kernels="numpy", jacobian="sparse")
    with pytest.raises(ValueError, match="permutation"):
        SchurTopology(s._indptr, s._csr_cols, s.n, ordering=[0, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    with pytest.raises(ValueError, match="ordering"):
        SchurTopology(s._indptr, s._csr_cols, s.n, ordering="amd")


def doubled_pendulum(n_links=4, extra=True) -> Model:
    """A chain whose first pin is given twice (J12 duplicates J0): redundant rows."""
    m = chain(n_links)
    if extra:
        m.add_joint("revolute", "J0bis", body_i="ground", body_j="L0", point_i=(0.0, 0.0),
                    point_j=(-0.5, 0.0))
    return m


@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_pivot_is_reported(backend):
    s = doubled_pendulum().compile(kernels=backend, jacobian="sparse")
    q, qd = chain_state(s)
    _, Q, gam, minv = eom_inputs(s, q, qd)
    solver = for_system(s)
    info, _, _ = solve_with(solver, s, Q, gam, minv)
    assert info > 0
    names = s.constraint_names
    assert names[solver.failed_row] in ("J0.x", "J0.y", "J0bis.x", "J0bis.y")
    with pytest.raises(SingularJacobianError) as exc:
        AccelerationSolver(s).solve(q, qd, 0.2)
    assert set(exc.value.constraints) >= {"J0.x", "J0bis.x"} or \
        set(exc.value.constraints) >= {"J0.y", "J0bis.y"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_redundant_rows_and_least_squares_on_sparse_systems(backend):
    sd = doubled_pendulum().compile(kernels=backend, jacobian="dense")
    ss = doubled_pendulum().compile(kernels=backend, jacobian="sparse")
    q, qd = chain_state(ss)
    rows = [r for r, name in enumerate(ss.constraint_names) if not name.startswith("J0bis")]
    out = []
    for s in (sd, ss):
        a = AccelerationSolver(s)
        a.set_rows(rows)
        qdd, lam = a.solve(q, qd, 0.2)
        out.append((qdd.copy(), lam.copy()))
        b = AccelerationSolver(s)
        b.rank_deficiency = "least_squares"
        qdd2, _ = b.solve(q, qd, 0.2)
        assert b.rank_deficient_events == 1
        np.testing.assert_allclose(qdd2, qdd, rtol=1e-8, atol=1e-8)
    assert rel(out[1][0], out[0][0]) < 1e-11 and rel(out[1][1], out[0][1]) < 1e-11
    assert np.all(out[1][1][len(rows):] == 0.0)
    # the sparse solver of the independent rows: qdd of the plain chain
    s0 = chain(4).compile(kernels=backend, jacobian="sparse")
    qdd0, _ = AccelerationSolver(s0).solve(q, qd, 0.2)
    assert rel(out[1][0], qdd0) < 1e-11


@pytest.mark.parametrize("backend", BACKENDS)
def test_acceleration_solver_dense_and_sparse_agree(backend):
    for model in (chain(12), tree(3)):
        sd = model.compile(kernels=backend, jacobian="dense")
        ss = model.compile(kernels=backend, jacobian="sparse")
        q, qd = random_state(sd, seed=3)
        a = [x.copy() for x in AccelerationSolver(sd).solve(q, qd, 0.1)]
        solver = AccelerationSolver(ss)
        assert solver._sparse is not None and solver._sparse.backend == backend
        b = solver.solve(q, qd, 0.1)
        assert rel(b[0], a[0]) < 1e-11 and rel(b[1], a[1]) < 1e-11


def test_unconstrained_sparse_system():
    s = stiff_chain(30).compile(kernels="numpy", jacobian="sparse")
    assert s.m == 0 and not s.dense
    st = s.initial_state()
    st.q[1::3] -= 0.01                            # stretch every spring
    for backend in ["numpy"] + (["compiled"] if compiled_available() else []):
        s = stiff_chain(30).compile(kernels=backend, jacobian="sparse")
        qdd, lam = AccelerationSolver(s).solve(st.q, st.qd, 0.0)
        assert lam.shape == (0,)
        np.testing.assert_allclose(qdd, s.forces(st.q, st.qd, 0.0) / s.mass_diag, rtol=1e-14)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_run_sparse_equals_dense(backend):
    model = chain(6)
    settings = {"t_end": 0.2, "output_step": 0.05, "rtol": 1e-9, "atol": 1e-11}
    a = mbcore.run(model, kernels=backend, jacobian="dense", settings=settings)
    b = mbcore.run(model, kernels=backend, jacobian="sparse", settings=settings)
    assert a.system.dense and not b.system.dense
    for ch in ("q", "qd", "qdd", "lam"):
        np.testing.assert_allclose(b[ch], a[ch], rtol=1e-7, atol=1e-7 * np.abs(a[ch]).max())
    # the chain falls: energy is conserved by the DI run to the tolerance
    T = [a.system.kinetic_energy(qd) + a.system.potential_energy(q)
         for q, qd in zip(a["q"], a["qd"], strict=True)]
    assert np.ptp(T) < 1e-6 * max(abs(T[0]), 1.0)


def test_chain_model_and_benchmark_function():
    s = chain(8).compile(kernels="numpy")
    q, qd = chain_state(s)
    assert np.abs(s.phi(q, 0.0)).max() < 1e-12
    assert np.abs(s.jacobian_dense(q, 0.0) @ qd).max() < 1e-12
    r = bench_chain_eom((3, 30), repeat=1, kernels="numpy", budget=0.01)
    assert r["n"] == [3, 30] and len(r["seconds"]) == 2 and all(t > 0 for t in r["seconds"])
    assert np.isfinite(r["exponent"])


def test_reference_reports_zero_pivot():
    """Exactly dependent rows: SuperLU meets a zero pivot or the relative test fails."""
    s = doubled_pendulum(2).compile(kernels="numpy", jacobian="sparse")
    q, qd = chain_state(s)
    _, Q, gam, minv = eom_inputs(s, q, qd)
    solver = SparseSchurReference(SchurTopology(s._indptr, s._csr_cols, s.n))
    assert solve_with(solver, s, Q, gam, minv)[0] > 0
