"""Static equilibrium, four methods (004 Ch.14; spec/algorithms.md §5)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model

METHODS = ["newton", "modified_newton", "partitioned", "energy", "joint_coordinates"]


def platform(examples):
    m = Model.from_file(examples / "platform.yaml")
    m.settings = {"analysis": "static"}
    return m


def spring_fourbar(examples):
    d = yaml.safe_load((examples / "fourbar_kap.yaml").read_text())
    d.pop("drivers")
    d["gravity"] = [0, -9.81]
    d["settings"] = {"analysis": "static"}
    for b, (m, J) in zip(d["bodies"], [(1, 0.3), (2.25, 2), (2, 1.35)], strict=True):
        b["mass"], b["inertia"] = m, J
    d["forces"] = [{"name": "s", "type": "tsda", "body_i": "ground", "body_j": "coupler",
                    "point_i": [1.0, 5.0], "point_j": [0.5, 0.0], "stiffness": 60.0,
                    "free_length": 1.0}]
    return Model.from_dict(d)


def spring_pendulum_chain():
    """Two links hanging from a pin, a horizontal spring pulling the tip."""
    m = Model("chain")
    m.set_gravity(0, -9.81)
    m.add_body("l1", mass=1.0, inertia=0.1, position=(0.0, -0.5), angle=-1.5)
    m.add_body("l2", mass=0.5, inertia=0.05, position=(0.1, -1.5), angle=-1.4)
    m.add_joint("revolute", "p0", body_i="ground", body_j="l1", point_i=(0, 0),
                point_j=(-0.5, 0))
    m.add_joint("revolute", "p1", body_i="l1", body_j="l2", point_i=(0.5, 0),
                point_j=(-0.5, 0))
    m.add_force("tsda", "k", body_i="ground", body_j="l2", point_i=(2.0, -2.0),
                point_j=(0.5, 0), stiffness=20.0, free_length=0.5)
    m.settings = {"analysis": "static"}
    return m


@pytest.mark.parametrize("method", METHODS)
def test_platform_equilibrium(examples, method):
    """spec §6.9: the exact equilibrium of the consistent platform model is
    phi = -0.312, L = 0.5888, f(s) = -7.813."""
    res = mbcore.run(platform(examples), settings={"method": method})
    assert res["q/left_legs.phi"][0] == pytest.approx(-0.312, abs=5e-4)
    assert res["forces/spring.length"][0] == pytest.approx(0.5888, abs=5e-5)
    assert res["forces/spring.spring_force"][0] == pytest.approx(-7.813, abs=5e-4)


@pytest.mark.parametrize("make", [platform, spring_fourbar, lambda e: spring_pendulum_chain()])
def test_four_methods_agree(examples, make):
    results = {m: mbcore.run(make(examples), settings={"method": m}) for m in METHODS}
    q0 = results["newton"]["q"][0]
    for m, res in results.items():
        np.testing.assert_allclose(res["q"][0], q0, atol=1e-8, err_msg=m)
        np.testing.assert_allclose(res["lam"][0], results["newton"]["lam"][0],
                                   atol=1e-6 * (1 + np.abs(res["lam"][0]).max()), err_msg=m)
    # equilibrium: Phi_q^T lam + Q = 0 and Phi = 0
    s = results["newton"].system
    q, lam = q0, results["newton"]["lam"][0]
    np.testing.assert_allclose(s.jacobian_dense(q, 0).T @ lam + s.forces(q, 0 * q, 0), 0,
                               atol=1e-8)
    assert np.max(np.abs(s.phi(q, 0))) < 1e-10


def test_energy_method_refuses_nonconservative_loads():
    m = spring_pendulum_chain()
    m.add_force("force", "push", body="l2", fx=1.0)
    with pytest.raises(mbcore.ModelError, match="method 'energy' needs conservative loads"):
        mbcore.run(m, settings={"method": "energy"})
    res = mbcore.run(m, settings={"method": "newton"})
    assert res.status == "finished"


def test_static_balance_torques_of_a_two_link_arm(examples):
    """004 §9.6: with the joint angles locked by artificial constraints, their
    reactions are the actuator torques that hold the arm: shoulder
    g (m1 L1/2 + m2 (L1 + L2/2)), elbow g m2 L2/2 (counter-clockwise on the
    outer link, by the driver convention of docs/constraints.md)."""
    g, m1, m2, L1, L2 = 9.81, 3.0, 2.0, 1.0, 0.8
    for method in ("newton", "given"):
        res = mbcore.run(Model.from_file(examples / "arm_static_balance.yaml"),
                         settings={"method": method})
        tau_s = res["reactions/shoulder_lock.i.n"][0]
        tau_e = res["reactions/elbow_lock.i.n"][0]
        assert tau_s == pytest.approx(g * (m1 * L1 / 2 + m2 * (L1 + L2 / 2)), rel=1e-10)
        assert tau_e == pytest.approx(g * m2 * L2 / 2, rel=1e-10)
        assert res["solver/force_residual"][0] < 1e-9


@pytest.mark.parametrize("method", METHODS)
def test_unconstrained_static_equilibrium(method):
    m = Model("hanging")
    m.set_gravity(0, -9.81)
    m.add_body("b", mass=2.0, position=(0.0, -1.0))
    m.add_force("tsda", "k", body_i="ground", body_j="b", stiffness=100.0, free_length=1.0)
    m.add_force("rsda", "r", body_i="ground", body_j="b", stiffness=5.0, free_angle=0.0)
    res = mbcore.run(m, settings={"analysis": "static", "method": method})
    assert res["q/b.y"][0] == pytest.approx(-1.0 - 2 * 9.81 / 100.0, abs=1e-8)
