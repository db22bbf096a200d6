"""Spatial bodies in transformed columns (mbcore.system.mass): the entries of J T
that vanish identically (the fourth column ``Phi_p p`` of constraints invariant to
the scale of p, and a normalisation row off its own column) are left out of the
sparse Schur solver's pattern; the solution is that of the full pattern, the
compiled kernel equals its NumPy reference, and a row that is not invariant keeps
its entries."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from mbcore.solve.dynamics import AccelerationSolver
from mbcore.solve.sparse_schur import SchurTopology, make_solver
from mbcore.system import compiled_available
from mbcore.system.mass import SpatialMass

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import spatial_chain, spatial_chain_state  # noqa: E402
from test_spatial_compiled import TYPE_NAMES, group_model  # noqa: E402

needs_compiled = pytest.mark.skipif(not compiled_available(), reason="compiled kernels "
                                    "not built")
BACKENDS = ["numpy", pytest.param("compiled", marks=needs_compiled)]


def rel(a, b):
    return np.abs(a - b).max() / max(np.abs(b).max(), 1e-300)


def transformed_inputs(s, q, qd, t=0.3):
    """(J T data, minv^, Q^, gamma) at (q, qd, t) as the equations of motion use them."""
    sm = SpatialMass(s)
    sm.update(q)
    jd = s.evaluate_jacobian_data(q, t)
    jhat = np.zeros(len(jd))
    sm.transform_jacobian(jd, jhat)
    Q = s.forces(q, qd, t).copy()
    sm.inertial_forces(q, qd, Q)
    return jhat, sm.minv_hat.copy(), sm.transform_forces(Q).copy(), s.gamma(q, qd, t).copy()


def solve(topo, backend, args, s):
    qdd, lam = np.zeros(s.n), np.full(s.m, np.nan)
    info = make_solver(topo, backend).solve(*args, qdd, lam)
    assert info == 0
    return qdd, lam


@pytest.mark.parametrize("backend", BACKENDS)
def test_normalisation_rows_decouple_on_the_chain(backend):
    nb = 12
    s = spatial_chain(nb).compile(kernels=backend, jacobian="sparse")
    keep, note = SpatialMass(s).nonzero_entries()
    rows, _ = s.jacobian_pattern()
    # per body its normalisation row's 6 other entries, per joint row the fourth
    # column of each of its bodies and the two translation columns Phi_r = [I, -I]
    # leaves at zero (the first joint: the ground and one body)
    assert len(rows) - len(keep) == 6 * nb + 3 * (2 * nb - 1) * 3, note
    indptr, indices = s.csr_pattern()
    full = SchurTopology(indptr, indices, s.n)
    cut = SchurTopology(indptr, indices, s.n, entries=keep)
    per_row = np.diff(cut.pattern.indptr)
    assert np.all(per_row[s.m_elements:] == 1)           # B: only the diagonal there
    assert np.all(np.diff(full.pattern.indptr)[s.m_elements:] > 1)
    assert cut.nnz_L < full.nnz_L and len(cut.ta) < len(full.ta)
    q, qd = spatial_chain_state(s, seed=3)
    args = transformed_inputs(s, q, qd)
    a, b = solve(full, backend, args, s), solve(cut, backend, args, s)
    # the dropped entries are rounding errors (|Phi_p p| ~ eps |Phi_p|): observed
    # <= 1e-15 relative, bound 1e-12
    assert rel(b[0], a[0]) < 1e-12 and rel(b[1], a[1]) < 1e-12


@needs_compiled
def test_compiled_equals_reference_on_the_reduced_pattern():
    s = spatial_chain(30).compile(kernels="compiled", jacobian="sparse")
    keep, _ = SpatialMass(s).nonzero_entries()
    indptr, indices = s.csr_pattern()
    cut = SchurTopology(indptr, indices, s.n, entries=keep)
    q, qd = spatial_chain_state(s, seed=5)
    args = transformed_inputs(s, q, qd)
    a, b = solve(cut, "compiled", args, s), solve(cut, "numpy", args, s)
    # the same LDL^T in a different rounding order: observed <= 1e-14, bound 1e-11
    assert rel(a[0], b[0]) < 1e-11 and rel(a[1], b[1]) < 1e-11


@pytest.mark.parametrize("tname", TYPE_NAMES)
def test_every_spatial_type_is_invariant_to_the_scale_of_p(tname):
    """Every built-in spatial constraint type has Phi_p p = 0: all its fourth
    transformed columns are dropped."""
    s = group_model(tname, seed=len(tname) * 7919).compile(kernels="numpy",
                                                           jacobian="sparse")
    sm = SpatialMass(s)
    keep, note = sm.nonzero_entries()
    rows, _ = s.jacobian_pattern()
    model_pairs = int(np.sum(rows[sm.pos[:, 0]] < s.m_elements))
    cls = next(g.ctype for g in s.groups if g.ctype.name == tname)
    declared = 0 if cls.r_columns is None else \
        model_pairs // cls.equations * sum(3 - len(c) for c in cls.r_columns)
    assert keep is not None
    assert len(rows) - len(keep) == model_pairs + 6 * sm.nb + declared, note


def test_a_row_not_invariant_keeps_its_entries():
    s = spatial_chain(5).compile(kernels="numpy", jacobian="sparse")
    sm = SpatialMass(s)
    keep0, _ = sm.nonzero_entries()
    rows, _ = s.jacobian_pattern()
    pair = int(np.nonzero(rows[sm.pos[:, 0]] == 4)[0][0])    # a joint row's pair
    evaluate = s.evaluate_jacobian_data

    def shifted(q, t):                    # Phi_p p != 0 on that pair
        jd = evaluate(q, t)
        jd[sm.pos[pair, 0]] += 0.5
        return jd

    s.evaluate_jacobian_data = shifted
    keep, _ = sm.nonzero_entries()
    assert sm.pos[pair, 3] in keep and sm.pos[pair, 3] not in keep0
    assert len(keep) == len(keep0) + 1


def test_dense_jacobian_keeps_the_general_path():
    s = spatial_chain(3).compile(kernels="numpy", jacobian="dense")
    keep, note = SpatialMass(s).nonzero_entries()
    assert keep is None and "dense" in note


@pytest.mark.parametrize("backend", BACKENDS)
def test_acceleration_solver_uses_the_reduced_pattern(backend):
    """The equations of motion (transformed columns) on the reduced pattern, the
    untransformed Jacobian's solver (assembly, penalty) on the full one; the
    accelerations equal the dense solution."""
    s = spatial_chain(8).compile(kernels=backend, jacobian="sparse")
    acc = AccelerationSolver(s)
    assert "vanish" in acc.sparse_entries_note
    if backend == "compiled":
        assert acc.transformed_sparse_kernel.nnz_L < acc.sparse_kernel.nnz_L
    q, qd = spatial_chain_state(s, seed=2)
    qdd, lam = (x.copy() for x in acc.solve(q, qd, 0.1))
    d = spatial_chain(8).compile(kernels=backend, jacobian="dense")
    qdd_d, lam_d = AccelerationSolver(d).solve(q, qd, 0.1)
    assert rel(qdd, qdd_d) < 1e-11 and rel(lam, lam_d) < 1e-11


def test_a_wrong_translation_declaration_is_caught(monkeypatch):
    """A type declaring the wrong translation columns: the entries that are not zero
    at the sample states stay (only true zeros are dropped)."""
    from mbplugins.spatial.constraints import Spherical
    s = spatial_chain(6).compile(kernels="numpy", jacobian="sparse")
    pairs = 3 * (2 * 6 - 1)                  # (joint row, body) pairs
    keep0, _ = SpatialMass(s).nonzero_entries()
    monkeypatch.setattr(Spherical, "r_columns", None)
    keep_none, _ = SpatialMass(s).nonzero_entries()
    assert len(keep_none) == len(keep0) + 2 * pairs
    # row k declared to touch column k + 1: of the two declared zeros only one is
    monkeypatch.setattr(Spherical, "r_columns", ((1,), (2,), (0,)))
    keep, _ = SpatialMass(s).nonzero_entries()
    assert set(keep0) <= set(keep) <= set(keep_none)
    assert len(keep) == len(keep_none) - pairs
