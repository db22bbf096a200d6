"""Equations of motion at a state: 004 Examples 9.1-9.4 and the DAP four-bar
(spec/planar.md §3, §6.7, §6.8).  Sign convention: docs/conventions.md — our
reactions (+Phi_q^T lam) equal DAP's printed physical reactions directly."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model
from mbcore.solve.dynamics import AccelerationSolver


def dap_fourbar(examples):
    d = yaml.safe_load((examples / "fourbar_kap.yaml").read_text())
    d.pop("drivers")
    d["gravity"] = [0, -9.81]
    for b, (m, J) in zip(d["bodies"], [(1, 0.3), (2.25, 2), (2, 1.35)], strict=True):
        b["mass"], b["inertia"] = m, J
    return Model.from_dict(d)


def test_dap_fourbar_accelerations_and_reactions(examples, backend):
    """004 §10.3.1: released from rest at the KAP t = 0 configuration as printed to
    3 decimals (not re-assembled); printed t = 0 results (spec §6.8)."""
    sysm = dap_fourbar(examples).compile(kernels=backend)
    q = np.array([.5, .866, 1.047, 2.824, 2.553, .423, 3.574, 1.687, 1.004])
    qdd, lam = AccelerationSolver(sysm).solve(q, np.zeros(9), 0.0)
    np.testing.assert_allclose(qdd, [2.544, -1.470, -2.938, 5.183, -3.149, -.115,
                                     2.639, -1.679, -1.564], atol=1.5e-3)
    r = dict(zip(sysm.reaction_labels, sysm.reactions(q, 0.0, lam), strict=True))
    printed = {  # joint: (body i triple, body j triple) as printed by DAP (physical)
        "O2": ((-7.242, -15.387, 0), (7.242, 15.387, -1.425)),
        "A": ((-4.698, -7.046, .543), (4.698, 7.046, -8.994)),
        "B": ((6.964, 7.941, 8.764), (-6.964, -7.941, 3.223)),
        "O4": ((12.242, 24.202, -5.334), (-12.242, -24.202, -60.504)),
    }
    for joint, (fi, fj) in printed.items():
        for side, ref in (("i", fi), ("j", fj)):
            got = [r[f"{joint}.{side}.{c}"] for c in ("fx", "fy", "n")]
            np.testing.assert_allclose(got, ref, atol=2e-3, err_msg=f"{joint}.{side}")


def test_example_9_4_two_bodies_revolute(backend):
    """004 Example 9.4 (spec §6.7): printed qdd and lam = (6.915, -0.413); the
    state violates the constraints slightly and is solved as given."""
    m = Model("ex 9.4")
    m.set_gravity(0, -9.81)
    m.add_body("i", mass=1.2, inertia=2.5, position=(1.58, 1.59), angle=0.6)
    m.add_body("j", mass=2.0, inertia=4.0, position=(3.4, 1.96), angle=0.2)
    m.add_joint("revolute", "R", body_i="i", body_j="j", point_i=(0.9, 0.7),
                point_j=(-1.3, 1.0))
    m.add_force("force", "Fi", body="i", fx=-10)
    m.add_force("force", "Fj", body="j", fx=10)
    sysm = m.compile(kernels=backend)
    q = np.array([1.58, 1.59, 0.6, 3.4, 1.96, 0.2])
    qd = np.array([1.1, 0.2, -0.02, 1.14, 0.24, 0.03])
    np.testing.assert_allclose(sysm.jacobian_dense(q, 0), [[1, 0, -1.086, -1, 0, 0.722],
                                                           [0, 1, 0.348, 0, -1, 1.473]],
                               atol=1e-3)
    qdd, lam = AccelerationSolver(sysm).solve(q, qd, 0.0)
    np.testing.assert_allclose(qdd, [-2.571, -10.154, -3.061, 1.543, -9.604, 1.096],
                               atol=1.5e-3)
    np.testing.assert_allclose(lam, [6.915, -0.413], atol=1.5e-3)


def test_example_9_1_point_force_and_moment(backend):
    """Example 9.1: m = 2, f = (1.2, 0.5) at s' = (-0.2, 0.3), phi = 30 deg, a
    clockwise moment 0.6: g = (1.2, -19.12, -0.95) (spec §3 F2)."""
    m = Model("ex 9.1")
    m.set_gravity(0, -9.81)
    m.add_body("b", mass=2.0, inertia=1.0, angle=np.deg2rad(30))
    m.add_force("force", "f", body="b", point=(-0.2, 0.3), fx=1.2, fy=0.5)
    m.add_force("torque", "n", body="b", torque=-0.6)
    sysm = m.compile(kernels=backend)
    Q = sysm.forces(np.array([0, 0, np.deg2rad(30)]), np.zeros(3), 0.0)
    np.testing.assert_allclose(Q, [1.2, -19.12, -0.95], atol=5e-3)


def test_example_9_2_tsda_forces_and_accelerations(backend):
    """004 Example 9.2 (spec §3 F5): L = 0.129, f = -3.558, g_1, g_2, accelerations."""
    m = Model("ex 9.2")
    m.set_gravity(0, -9.81)
    m.add_body("b1", mass=0.2, inertia=0.03)
    m.add_body("b2", mass=0.15, inertia=0.02)
    m.add_force("tsda", "s", body_i="b1", body_j="b2", point_i=(0.15, 0), point_j=(0, 0.1),
                stiffness=50, free_length=0.2)
    sysm = m.compile(kernels=backend)
    q = np.array([-.1, .2, .785, .1, .1, .262])
    Q = sysm.forces(q, np.zeros(6), 0.0)
    np.testing.assert_allclose(Q, [-1.878, 1.060, .520, 1.878, -4.494, -.103], atol=1e-3)
    out = dict(zip(sysm.force_labels, sysm.force_outputs(q, np.zeros(6), 0.0), strict=True))
    assert out["s.length"] == pytest.approx(0.129, abs=5e-4)
    assert out["s.spring_force"] == pytest.approx(-3.558, abs=1e-3)
    qdd, lam = AccelerationSolver(sysm).solve(q, np.zeros(6), 0.0)
    np.testing.assert_allclose(qdd, [-9.389, 5.302, 17.326, 12.518, -29.959, -5.154],
                               atol=2e-3)


def test_example_9_3_tsda_with_damper(backend):
    """004 Example 9.3 (spec §3 F5; bodies 2, 3, 4 of the book): printed l, Ldot,
    f(s), f(d) and the generalised forces."""
    m = Model("ex 9.3")
    m.set_gravity(0, -9.81)
    for name, mass in (("b2", 3.0), ("b3", 0.7), ("b4", 2.4)):
        m.add_body(name, mass=mass)
    m.add_force("tsda", "s", body_i="b2", body_j="b4", point_i=(.3, .2), point_j=(-.1, .1),
                stiffness=100, damping=25, free_length=0.9)
    sysm = m.compile(kernels=backend)
    q = np.array([.4, .1, 1.3, 0, 0, 0, -.35, .2, 5.6])
    qd = np.array([.8, -.6, -.3, 0, 0, 0, -.5, .45, -.1])
    np.testing.assert_allclose(sysm.forces(q, qd, 0.0),
                               [-6.285, -30.412, 2.263, 0, -6.867, 0, 6.285, -22.562, -.898],
                               atol=1e-3)
    out = dict(zip(sysm.force_labels, sysm.force_outputs(q, qd, 0.0), strict=True))
    assert out["s.length"] == pytest.approx(0.660, abs=5e-4)
    assert out["s.length_rate"] == pytest.approx(1.215, abs=5e-4)
    assert out["s.spring_force"] == pytest.approx(-24.012, abs=1e-3)
    assert out["s.damper_force"] == pytest.approx(30.373, abs=1e-3)


def test_tsda_forces_are_minus_gradient_and_power(backend):
    """Conservative part: g = -dV/dq (finite differences); the damper's power is
    -c Ldot^2 (spec §3 F5, F6)."""
    rng = np.random.default_rng(3)
    m = Model("springs")
    m.add_body("a", position=(0.1, 0.2), angle=0.3)
    m.add_body("b", position=(1.5, -0.4), angle=-0.2)
    m.add_force("tsda", "s", body_i="a", body_j="b", point_i=(0.2, 0.1), point_j=(-0.3, 0.2),
                stiffness=120.0, free_length=0.7)
    m.add_force("rsda", "r", body_i="a", body_j="b", stiffness=40.0, free_angle=0.1)
    m.add_force("tsda", "g", body_i="ground", body_j="a", point_i=(0.0, 1.0),
                stiffness=30.0, free_length=0.5)
    sysm = m.compile(kernels=backend)
    for _ in range(5):
        q = rng.normal(size=6)
        Q = sysm.forces(q, np.zeros(6), 0.0).copy()
        h = 1e-6
        grad = np.array([(sysm.potential_energy(q + h * e) - sysm.potential_energy(q - h * e))
                         / (2 * h) for e in np.eye(6)])
        np.testing.assert_allclose(Q, -grad, rtol=1e-6, atol=1e-6)
    m2 = Model("damper")
    m2.add_body("a", position=(1.0, 0.0))
    m2.add_force("tsda", "d", body_i="ground", body_j="a", point_j=(0.1, 0.0), damping=7.0)
    s2 = m2.compile(kernels=backend)
    q, qd = np.array([1.0, 0.3, 0.4]), rng.normal(size=3)
    Q = s2.forces(q, qd, 0.0)
    out = dict(zip(s2.force_labels, s2.force_outputs(q, qd, 0.0), strict=True))
    assert Q @ qd == pytest.approx(-7.0 * out["d.length_rate"] ** 2, rel=1e-12)


def test_zero_length_spring_names_the_element(backend):
    m = Model("bad spring")
    m.add_body("a", position=(0.0, 0.0))
    m.add_force("tsda", "spring7", body_i="ground", body_j="a", stiffness=10.0,
                free_length=1.0)
    sysm = m.compile(kernels=backend)
    with pytest.raises(mbcore.AnalysisError, match=r"t = 0.5: force element 'spring7' "
                                                   r"\(forces\[0\], tsda\).*coincide"):
        sysm.forces(np.zeros(3), np.zeros(3), 0.5)


def test_compiled_forces_equal_reference():
    from mbcore.system import compiled_available
    if not compiled_available():
        pytest.skip("compiled kernels not built")
    rng = np.random.default_rng(5)
    m = Model("forces")
    for k in range(3):
        m.add_body(f"b{k}", position=rng.normal(size=2), angle=rng.normal(), mass=1 + k)
    m.set_gravity(0.3, -9.81)
    m.add_force("tsda", "s1", body_i="b0", body_j="b1", point_i=(0.2, 0.1), point_j=(-0.3, 0),
                stiffness=50, damping=3, actuator="2*sin(t)")
    m.add_force("tsda", "s2", body_i="ground", body_j="b2", point_i=(1, 1), stiffness=10,
                damping=1, free_length=0.4)
    m.add_force("rsda", "r1", body_i="b1", body_j="b2", stiffness=5, damping=0.5,
                actuator={"polynomial": [0.1, 0.2]})
    m.add_force("force", "f1", body="b0", point=(0.3, -0.2), fx="cos(t)", fy=2.0, frame="body")
    m.add_force("force", "f2", body="b2", fx=-1.0, fy="t**2")
    m.add_force("torque", "n1", body="b1", torque="0.5*t")
    m.add_force("torque", "n2", body="b2", reaction_body="b0", torque=1.5)
    a, b = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    for _ in range(30):
        q, qd, t = rng.normal(size=9), rng.normal(size=9), float(rng.uniform(0, 3))
        np.testing.assert_allclose(a.forces(q, qd, t), b.forces(q, qd, t), rtol=1e-12,
                                   atol=1e-12)


def test_acceleration_solvers_agree(examples):
    """Compiled Schur/Cholesky, SciPy reference and sparse augmented SuperLU give
    the same accelerations and multipliers (and satisfy both block equations)."""
    model = dap_fourbar(examples)
    model.add_force("tsda", "spring", body_i="ground", body_j="coupler", point_i=(1, 3),
                    stiffness=30, damping=2, free_length=1.0)
    rng = np.random.default_rng(9)
    solvers = []
    for kernels, jac in (("compiled", "dense"), ("numpy", "dense"), ("numpy", "sparse")):
        s = model.compile(kernels=kernels, jacobian=jac)
        solvers.append((s, AccelerationSolver(s)))
    for _ in range(10):
        q, qd, t = rng.normal(size=9), rng.normal(size=9), 0.3
        res = [tuple(x.copy() for x in sv.solve(q, qd, t)) for _, sv in solvers]
        for qdd, lam in res[1:]:
            np.testing.assert_allclose(qdd, res[0][0], rtol=1e-9, atol=1e-9)
            np.testing.assert_allclose(lam, res[0][1], rtol=1e-9, atol=1e-9)
        s = solvers[1][0]
        qdd, lam = res[0]
        J = s.jacobian_dense(q, t)
        np.testing.assert_allclose(s.mass_diag * qdd - J.T @ lam, s.forces(q, qd, t),
                                   atol=1e-9)
        np.testing.assert_allclose(J @ qdd, s.gamma(q, qd, t), atol=1e-9)


def test_compiled_schur_equals_reference_on_assembled_states(examples):
    from mbcore.system import compiled_available
    if not compiled_available():
        pytest.skip("compiled kernels not built")
    model = dap_fourbar(examples)
    sa = AccelerationSolver(model.compile(kernels="compiled"))
    sb = AccelerationSolver(model.compile(kernels="numpy"))
    res = mbcore.run(Model.from_file(examples / "fourbar_kap.yaml"))
    for k in range(0, 41, 2):
        q, qd = res["q"][k], res["qd"][k]
        for x, y in zip(sa.solve(q, qd, 0.1), sb.solve(q, qd, 0.1), strict=True):
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-12 * (1 + np.abs(y).max()))


def test_power_balance_dT_plus_dV_equals_nonconservative_power(backend):
    """Along any motion of an unconstrained system, d(T+V)/dt = P_nc with
    qdd = M^-1 Q (checks potential energies, power_nc and the force signs)."""
    m = Model("power")
    m.set_gravity(0.5, -9.81)
    m.add_body("a", position=(0.1, 0.2), angle=0.3, mass=2, inertia=0.4)
    m.add_body("b", position=(1.5, -0.4), angle=-0.2, mass=1.5, inertia=0.2)
    m.add_force("tsda", "s", body_i="a", body_j="b", point_i=(0.2, 0.1), point_j=(-0.3, 0.2),
                stiffness=120.0, damping=3.0, free_length=0.7, actuator="sin(t)")
    m.add_force("rsda", "r", body_i="ground", body_j="b", stiffness=40.0, damping=2.0,
                actuator=0.3)
    m.add_force("force", "f", body="a", point=(0.1, 0.0), fx="t", fy=1.0, frame="body")
    m.add_force("torque", "n", body="b", reaction_body="a", torque=0.7)
    s = m.compile(kernels=backend)
    rng = np.random.default_rng(2)
    for _ in range(5):
        q, qd, t = rng.normal(size=6), rng.normal(size=6), float(rng.uniform(0, 2))
        qdd = s.forces(q, qd, t) / s.mass_diag
        h = 1e-6
        E = lambda tau: (s.kinetic_energy(qd + tau * qdd)
                         + s.potential_energy(q + tau * qd + 0.5 * tau ** 2 * qdd, t + tau))
        dE = (E(h) - E(-h)) / (2 * h)
        # central difference: rounding eps (|T| + |V|) / h dominates (truncation
        # h^2/6 E''' ~ 1e-12 E'''); observed <= 2x that bound; 200x it.  A wrong
        # force sign changes P_nc by O(1).
        bound = np.finfo(float).eps * (abs(s.kinetic_energy(qd))
                                       + abs(s.potential_energy(q, t))) / h
        assert dE == pytest.approx(s.nonconservative_power(q, qd, t), rel=0,
                                   abs=200 * bound)
