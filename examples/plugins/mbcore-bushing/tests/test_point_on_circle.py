"""point_on_circle: Jacobian against finite differences, nu = -Phi_t, gamma against
the second time derivative along trajectories, reactions, the centre singularity;
point_on_circle_c: its compiled kernel equals the Python methods to 1e-12, and a
model using it stays on mbcore's compiled right-hand side and loop."""
from __future__ import annotations

import numpy as np
import pytest

from mbcore.errors import ElementEvaluationError
from mbcore_bushing.constraints import PointOnCircle
from mbcore_bushing.testing import compiled_constraint, fd_constraint_jacobian

PC = PointOnCircle()


def radius_jet(t):
    """R(t) = 1 + 0.2 sin(3 t) and its derivatives, as mbcore passes them: (c, c', c'')."""
    return np.array([1 + 0.2 * np.sin(3 * t), 0.6 * np.cos(3 * t), -1.8 * np.sin(3 * t)])


def elements(ne=6, seed=2):
    rng = np.random.default_rng(seed)
    par = np.concatenate([rng.uniform(-0.5, 0.5, (ne, 2)), rng.uniform(-1, 1, (ne, 2))], 1)
    q0 = rng.uniform(-1, 1, (ne, 1, 3))
    v = rng.uniform(-2, 2, (ne, 1, 3))
    a = rng.uniform(-3, 3, (ne, 1, 3))
    return par, q0, v, a


def jets(t, ne):
    return np.broadcast_to(radius_jet(t), (ne, 1, 3)).copy()


def trajectory(q0, v, a, t):
    """q(t) = q0 + v sin(t) + a t^2 / 2 and its first two derivatives."""
    return q0 + v * np.sin(t) + 0.5 * a * t ** 2, v * np.cos(t) + a * t, -v * np.sin(t) + a


def test_jacobian_matches_central_differences():
    par, q0, v, a = elements()
    f = jets(0.3, len(par))
    J = PC.jacobian(par, q0, 0.3, f)
    np.testing.assert_allclose(J, fd_constraint_jacobian(PC, par, q0, 0.3, f),
                               rtol=0, atol=1e-8)
    assert np.abs(J[..., 2]).max() > 0.05


def test_nu_is_minus_phi_t():
    par, q0, v, a = elements()
    t, h = 0.7, 1e-6
    dphi = (PC.phi(par, q0, t + h, jets(t + h, len(par)))
            - PC.phi(par, q0, t - h, jets(t - h, len(par)))) / (2 * h)
    np.testing.assert_allclose(PC.nu(par, q0, t, jets(t, len(par))), -dphi, atol=1e-8)
    assert np.abs(dphi).max() > 0.1


@pytest.mark.parametrize("t", [0.0, 0.4, 1.1])
def test_gamma_is_the_second_time_derivative_along_trajectories(t):
    """Phi_q qdd - gamma = d^2 Phi / dt^2 along q(t) (rheonomic radius included)."""
    par, q0, v, a = elements()
    ne, h = len(par), 1e-4
    phi = [PC.phi(par, trajectory(q0, v, a, s)[0], s, jets(s, ne)) for s in (t - h, t, t + h)]
    d2 = (phi[0] - 2 * phi[1] + phi[2]) / h ** 2
    q, qd, qdd = trajectory(q0, v, a, t)
    f = jets(t, ne)
    lhs = np.einsum("embc,ebc->em", PC.jacobian(par, q, t, f), qdd)
    g = PC.gamma(par, q, qd, t, f)
    np.testing.assert_allclose(lhs - g, d2, atol=2e-5 * max(1.0, np.abs(d2).max()))
    assert np.abs(g).max() > 0.1


def test_reaction_is_radial_and_local_reaction_is_the_multiplier():
    par, q0, v, a = elements()
    f = jets(0.0, len(par))
    lam = np.linspace(-2, 3, len(par))[:, None]
    J = PC.jacobian(par, q0, 0.0, f)
    force = J[:, 0, 0, :2] * lam                   # reaction = +Phi_q^T lam
    S, d, L, u = PC._radial(par, q0)
    np.testing.assert_allclose(np.sum(force * u, -1), lam[:, 0], atol=1e-14)
    np.testing.assert_allclose(PC.reaction_local(par, q0, 0.0, f, lam), lam, atol=0)


def test_point_at_the_centre_is_an_element_error():
    par, q0, v, a = elements(ne=3)
    par[1, :2] = 0.0
    par[1, 2:4] = q0[1, 0, :2]                     # centre = the body point
    with pytest.raises(ElementEvaluationError, match="centre") as err:
        PC.jacobian(par, q0, 0.0, jets(0.0, 3))
    assert err.value.index == 1


@pytest.mark.parametrize("t", [0.0, 0.9])
def test_compiled_kernel_equals_the_python_methods(t):
    """phi, Jacobian, nu and gamma of the CIRCLE capsule equal PointOnCircle's to
    1e-12 on random elements (a rheonomic radius), one of them on the ground."""
    from mbcore_bushing._kernel import CIRCLE
    par, q0, v, a = elements(ne=7, seed=5)
    q, qd, _ = trajectory(q0, v, a, t)
    f = jets(t, len(par))
    for ground in (None, np.array([[False]] * 6 + [[True]])):
        qb = q.copy()
        if ground is not None:
            qb[ground[:, 0]] = 0.0                 # what the kernel reads there
        qdb = qd.copy()
        if ground is not None:
            qdb[ground[:, 0]] = 0.0
        ref = {"phi": PC.phi(par, qb, t, f), "jacobian": PC.jacobian(par, qb, t, f),
               "nu": PC.nu(par, qb, t, f), "gamma": PC.gamma(par, qb, qdb, t, f)}
        for stage, want in ref.items():
            got = compiled_constraint(CIRCLE, stage, par, qb, qdb, t, f, n_fun=1,
                                      ground=ground)
            np.testing.assert_allclose(got, want, rtol=0,
                                       atol=1e-12 * max(1.0, np.abs(want).max()),
                                       err_msg=stage)
            assert np.abs(want).max() > 1e-3, stage


def test_compiled_kernel_refuses_the_centre():
    from mbcore_bushing._kernel import CIRCLE
    par, q0, v, a = elements(ne=3)
    par[1, :2] = 0.0
    par[1, 2:4] = q0[1, 0, :2]
    for stage in ("jacobian", "gamma"):
        with pytest.raises(RuntimeError, match="refused element 1"):
            compiled_constraint(CIRCLE, stage, par, q0, v, 0.0, jets(0.0, 3), n_fun=1)


RING = """
name: ring
gravity: [0.0, -9.81]
settings: {analysis: dynamic, t_end: 0.5, output_step: 0.01, formulation: di,
           integrator: rk4, step: 0.001}
bodies:
  - {name: ring, mass: 0.5, inertia: 0.01, position: [0.479425538604203, -0.8775825618903728],
     angle: 0.0, velocity: [0.5, 0.2], angular_velocity: 1.0}
joints:
  - {name: on_circle, type: TYPE, body: ring, point: [0.0, 0.0], centre: [0.0, 0.0],
     radius: "1 + 0.1*sin(3*t)"}
"""


def test_compiled_constraint_run_stays_compiled_and_equals_python():
    """A model whose only constraint is point_on_circle_c stays on mbcore's compiled
    right-hand side and loop; the run equals the point_on_circle run to 1e-12
    (fixed-step rk4: the same steps)."""
    import mbcore
    runs = {}
    for kind in ("point_on_circle", "point_on_circle_c"):
        runs[kind] = mbcore.run(mbcore.Model.from_text(RING.replace("TYPE", kind), "yaml"))
    assert runs["point_on_circle_c"].stats["loop"] == "compiled"
    assert runs["point_on_circle"].stats["loop"] == "python"
    for ch in ("q", "qd"):
        np.testing.assert_allclose(runs["point_on_circle_c"].series(ch),
                                   runs["point_on_circle"].series(ch), rtol=0, atol=1e-12)
    x = runs["point_on_circle_c"].series("q")[:, 0]
    assert np.ptp(x) > 0.05
