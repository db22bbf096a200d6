"""Point masses (``kind: particle``): a body kind with position coordinates only
(2 in planar models, 3 in spatial ones), so a point mass on a massless rod (IFToMM
A01) needs no tiny inertia.  Elements of the model's kind act on a particle as on
a body whose rotation is fixed (docs/model-format.md, mbcore.elements.bodykinds)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import mbcore
from mbcore.errors import ModelError

G = 9.81


def a01() -> mbcore.Model:
    """IFToMM A01: a 1 kg point mass on a 1 m massless rod, released horizontal."""
    m = mbcore.Model("A01")
    m.set_gravity(0.0, -G)
    m.add_particle("bob", mass=1.0, position=[1.0, 0.0])
    m.add_joint("distance", name="rod", body_i="ground", body_j="bob", point_i=[0, 0],
                point_j=[0, 0], length=1.0)
    m.add_point("tip", "bob", [0.0, 0.0])
    return m


def pendulum_exact(t):
    """theta(t) of the simple pendulum from horizontal (theta = angle of the rod)."""
    sol = solve_ivp(lambda t, y: [y[1], -G * math.cos(y[0])], (0.0, t[-1]), [0.0, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13, dense_output=True)
    return sol.sol(t)[0]


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "cp"])
def test_a01_point_mass_on_a_massless_rod(formulation, backend):
    res = mbcore.run(a01(), settings={"analysis": "dynamic",
                                      "t_end": 1.0 if backend == "numpy" or
                                      formulation == "cp" else 5.0,
                                      "formulation": formulation, "rtol": 1e-10,
                                      "atol": 1e-12}, kernels=backend)
    assert res.labels("q") == ["bob.x", "bob.y"]
    th = pendulum_exact(res.t)
    np.testing.assert_allclose(res["q/bob.x"], np.cos(th), atol=1e-6)
    np.testing.assert_allclose(res["q/bob.y"], np.sin(th), atol=1e-6)
    E = res["energy/total"]
    assert np.max(np.abs(E - E[0])) < 1e-7 * G
    np.testing.assert_allclose(res["points/tip.x"], res["q/bob.x"], atol=1e-14)
    # the rod tension: m (v^2 / L + g sin(-theta)) along the rod
    v2 = res["qd/bob.x"] ** 2 + res["qd/bob.y"] ** 2
    tension = v2 - G * res["q/bob.y"]
    np.testing.assert_allclose(res["reactions_local/rod.tension"], tension,
                               atol=1e-6 * (1 + np.max(np.abs(tension))))


def test_particle_pendulum_at_a_moderate_tolerance():
    """20 s at rtol 1e-8: the point mass stays within 1e-5 m of the exact pendulum
    (no rotational coordinate, no tiny inertia in the Schur complement)."""
    t_end = 20.0
    s = {"analysis": "dynamic", "t_end": t_end, "formulation": "di", "rtol": 1e-8,
         "atol": 1e-10}
    rp = mbcore.run(a01(), settings=s)
    th = pendulum_exact(rp.t)
    err_p = np.max(np.hypot(rp["q/bob.x"] - np.cos(th), rp["q/bob.y"] - np.sin(th)))
    assert err_p < 1e-5


def test_mixed_bodies_and_particles_compiled_equals_numpy():
    """A rigid crank carrying a point mass on a link, and a second point mass on a
    link from the first, pulled by a spring-damper:
    phi, Jacobian, nu, gamma and forces agree on both paths to 1e-12; the Jacobian
    has no phi column for particles."""
    m = mbcore.Model("mixed")
    m.set_gravity(0.0, -G)
    m.add_body("crank", mass=2.0, inertia=0.1, position=[0.5, 0.0])
    m.add_particle("p1", mass=0.5, position=[1.0, 0.8])
    m.add_particle("p2", mass=0.3, position=[2.0, 0.1])
    m.add_joint("revolute", body_i="ground", body_j="crank", point_i=[0, 0],
                point_j=[-0.5, 0])
    m.add_joint("distance", body_i="crank", body_j="p1", point_i=[0.5, 0], point_j=[0, 0])
    m.add_joint("distance", body_i="p1", body_j="p2", point_i=[0, 0], point_j=[0, 0])
    m.add_force("tsda", body_i="ground", body_j="p2", point_i=[3.0, 0.0],
                point_j=[0.0, 0.0], stiffness=20.0, damping=0.5, free_length=0.5)
    sc, sn = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    assert sn.coordinate_names == ["crank.x", "crank.y", "crank.phi", "p1.x", "p1.y",
                                   "p2.x", "p2.y"]
    rng = np.random.default_rng(4)
    for _ in range(4):
        q, qd = rng.normal(size=(2, sn.n))
        for f in ("phi", "nu"):
            np.testing.assert_allclose(getattr(sc, f)(q, 0.3), getattr(sn, f)(q, 0.3),
                                       atol=1e-12)
        np.testing.assert_allclose(sc.jacobian_dense(q, 0.3), sn.jacobian_dense(q, 0.3),
                                   atol=1e-12)
        np.testing.assert_allclose(sc.gamma(q, qd, 0.3), sn.gamma(q, qd, 0.3), atol=1e-12)
        np.testing.assert_allclose(sc.forces(q, qd, 0.3), sn.forces(q, qd, 0.3),
                                   atol=1e-12)
    # Jacobian against finite differences (particle columns included)
    q = rng.normal(size=sn.n)
    J = sn.jacobian_dense(q, 0.0)
    h = 1e-7
    Jfd = np.column_stack([(sn.phi(q + h * e, 0.0).copy() - sn.phi(q - h * e, 0.0)) / (2 * h)
                           for e in np.eye(sn.n)])
    np.testing.assert_allclose(J, Jfd, atol=1e-7)
    res = mbcore.run(m, settings={"analysis": "dynamic", "t_end": 2.0, "rtol": 1e-10,
                                  "atol": 1e-12, "formulation": "di"})
    bal = res["energy/balance"]
    assert np.max(np.abs(bal - bal[0])) < 1e-6


def test_spatial_particle_on_a_rod_with_driven_x_and_y():
    """A 3D particle on a 1 m rod from the origin, x and y prescribed: z follows
    z = -sqrt(1 - x^2 - y^2) with its derivatives; static equilibrium hangs down."""
    m = mbcore.Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G)
    m.add_particle("bob", mass=2.0, position=[0.1, 0.0, -0.99])
    m.add_joint("distance", name="rod", body_i="ground", body_j="bob", length=1.0)
    m.add_driver("point_coordinate", name="dx", body="bob", coordinate="x",
                 function="0.3*sin(2*t)")
    m.add_driver("point_coordinate", name="dy", body="bob", coordinate="y",
                 function="0.2*cos(3*t) - 0.2")
    res = mbcore.run(m, settings={"t_end": 2.0, "output_step": 0.01})
    assert res.labels("q") == ["bob.x", "bob.y", "bob.z"]
    t = res.t
    x, y = 0.3 * np.sin(2 * t), 0.2 * np.cos(3 * t) - 0.2
    xd, yd = 0.6 * np.cos(2 * t), -0.6 * np.sin(3 * t)
    z = -np.sqrt(1 - x * x - y * y)
    zd = -(x * xd + y * yd) / z
    np.testing.assert_allclose(res["q/bob.z"], z, atol=1e-10)
    np.testing.assert_allclose(res["qd/bob.z"], zd, atol=1e-9)
    # kinetostatic: the rod and the drivers carry m (a - g)
    kin = mbcore.run(m, settings={"analysis": "kinetostatic", "t_end": 1.0,
                                  "output_step": 0.05})
    F = sum(np.stack([kin[f"reactions/{e}.{c}"] for c in ("fx", "fy", "fz")], -1)
            for e in ("rod.j", "dx.body", "dy.body"))
    acc = np.stack([kin[f"qdd/bob.{c}"] for c in "xyz"], -1)
    np.testing.assert_allclose(F, 2.0 * (acc - np.array([0, 0, -G])), atol=1e-8)
    m2 = mbcore.Model.from_dict({k: v for k, v in m.to_dict().items() if k != "drivers"})
    st = mbcore.run(m2, settings={"analysis": "static"})
    np.testing.assert_allclose(st["q"][-1], [0.0, 0.0, -1.0], atol=1e-9)


def test_particle_model_files_and_errors():
    d = a01().to_dict()
    assert d["bodies"][0] == {"name": "bob", "kind": "particle", "mass": 1.0,
                              "position": [1.0, 0.0]}
    m = mbcore.Model.from_dict(d)
    assert m.compile().coordinate_names == ["bob.x", "bob.y"]
    bad = dict(d, bodies=[dict(d["bodies"][0], inertia=0.1)])
    with pytest.raises(ModelError, match=r"bodies\[0\]\.inertia.*particle"):
        mbcore.Model.from_dict(bad)
    bad = dict(d, bodies=[dict(d["bodies"][0], kind="point")])
    with pytest.raises(ModelError, match=r"bodies\[0\]\.kind"):
        mbcore.Model.from_dict(bad)
    bad = dict(d, bodies=[dict(d["bodies"][0], position=[1.0, 0.0, 0.0])])
    with pytest.raises(ModelError, match=r"bodies\[0\]\.position"):
        mbcore.Model.from_dict(bad)
