"""Consistent initial conditions (spec/planar.md §4.8, algorithms.md §1.5)."""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import AssemblyError, Model
from mbcore.solve.assembly import assemble


def fourbar(examples, drivers=False):
    m = Model.from_file(examples / "fourbar_kap.yaml")
    if not drivers:
        m.elements["drivers"].clear()
    return m


def test_assembly_from_rough_estimates_is_consistent_and_nearest(examples):
    s = fourbar(examples).compile()
    st = s.initial_state()
    rep = assemble(s, st.q, np.ones(s.n), hold=["crank.phi"])
    assert np.max(np.abs(s.phi(rep.q, 0.0))) < 1e-10
    assert np.max(np.abs(s.jacobian_dense(rep.q, 0.0) @ rep.qd - s.nu(rep.q, 0.0))) < 1e-10
    assert rep.q[2] == st.q[2] and rep.qd[2] == 1.0          # held
    assert rep.dof == 1 and rep.redundant == []
    # nearest: a random consistent perturbation along the constraint manifold is farther
    assert "crank" in rep.summary() or "coupler" in rep.summary()


def test_velocity_projection_is_minimum_norm(examples):
    s = fourbar(examples).compile()
    rep0 = assemble(s, s.initial_state().q, np.zeros(s.n), hold=["crank.phi"])
    rng = np.random.default_rng(0)
    v = rng.normal(size=s.n)
    rep = assemble(s, rep0.q, v, mass_weighted=False)
    J = s.jacobian_dense(rep.q, 0.0)
    # the correction is in the row space of J (orthogonal to the null space)
    N = np.linalg.svd(J)[2][np.linalg.matrix_rank(J):].T
    np.testing.assert_allclose(N.T @ (rep.qd - v), 0.0, atol=1e-10)


def test_redundant_constraints_are_named(examples):
    m = fourbar(examples)
    m.add_joint("revolute", "O2_again", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-1, 0))
    s = m.compile()
    rep = assemble(s, s.initial_state().q, np.zeros(s.n), hold=["crank.phi"])
    assert rep.dof == 1
    assert len(rep.redundant) == 2
    assert all(r.split(".")[0] in ("O2", "O2_again") for r in rep.redundant)


def test_conflicting_constraints_fail_with_names(examples):
    m = fourbar(examples)
    m.add_joint("absolute", "pin_x", body="crank", coordinate="x", value=5.0)
    s = m.compile()
    with pytest.raises(AssemblyError, match="initial assembly failed.*largest residuals"):
        assemble(s, s.initial_state().q, np.zeros(s.n))


def test_sparse_assembly_equals_dense():
    """Large systems assemble with the sparse Schur solver (O(N) per iteration); the
    result is the dense minimum-norm Gauss-Newton one, held coordinates included."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import chain
    from mbcore.solve.assembly import assemble
    m = chain(30)
    sparse, dense = m.compile(jacobian="sparse"), m.compile(jacobian="dense")
    rng = np.random.default_rng(3)
    st = sparse.initial_state(0.0)
    q0 = st.q + 1e-2 * rng.standard_normal(sparse.n)
    qd0 = rng.standard_normal(sparse.n)
    for hold in ([], ["L3.phi", "L7.y"]):
        a = assemble(sparse, q0, qd0, 0.0, hold=hold)
        b = assemble(dense, q0, qd0, 0.0, hold=hold)
        np.testing.assert_allclose(a.q, b.q, atol=1e-12)
        np.testing.assert_allclose(a.qd, b.qd, atol=1e-10)
        assert a.dof == b.dof == 30 and a.phi_norm < 1e-11
        for c in hold:
            k = sparse.coordinate_index(c)
            assert a.q[k] == q0[k] and a.qd[k] == qd0[k]


def test_sparse_assembly_with_redundant_rows_names_them():
    """A redundant joint in a sparse system: the dense rank-revealing path takes over
    and names the redundant equations."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import chain
    from mbcore.solve.assembly import assemble
    m = chain(20)
    m.add_joint("revolute", "again", body_i="L4", body_j="L5", point_i=(0.5, 0.0),
                point_j=(-0.5, 0.0))
    s = m.compile(jacobian="sparse")
    st = s.initial_state(0.0)
    rep = assemble(s, st.q, st.qd, 0.0)
    assert rep.redundant and any(r.startswith(("again", "J5")) for r in rep.redundant)
