"""Force elements drag (F8), contact (F9), fictitious damping (F10) and the
user force (F7, DAP USRFRC) — spec/planar.md §3.

Compiled kernels equal the NumPy references to 1e-12; conservative parts are
-grad V; d(T + V)/dt = P_nc; closed-form dynamics: restitution of the bouncing
ball (004 Prob 10.21), Coulomb deceleration mu g and the rolling speed of a
sliding disc, terminal velocity under drag (004 Prob 10.18), dynamic relaxation of
the platform to its static equilibrium (004 §14.3)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

import mbcore
from mbcore import Model
from mbcore.errors import AnalysisError, ModelError
from mbplugins.planar.userforce import (register_user_function, unregister_user_function,
                                        user_function)

G = 9.81


def dynamic(model, backend, t_end, step, integrator="dopri5", **kw):
    settings = {"analysis": "dynamic", "t_end": t_end, "output_step": step,
                "integrator": integrator, **kw}
    return mbcore.run(model, kernels=backend, settings=settings)


# ---------------------------------------------------------------- a mixed model
def mixed_model(friction_model="tanh", damping_model="hunt_crossley", exponent=1.0):
    rng = np.random.default_rng(11)
    m = Model("mixed")
    m.set_gravity(0.4, -G)
    for k in range(3):
        m.add_body(f"b{k}", position=rng.normal(size=2), angle=rng.normal(), mass=1 + k,
                   inertia=0.2 + 0.1 * k)
    m.add_force("drag", "d1", body="b0", point=(0.3, -0.1), drag_coefficient=1.1,
                density=1.2, area=0.3, linear=0.4, wind=(0.5, -0.2))
    m.add_force("drag", "d2", body="b2", drag_coefficient=0.5, area=0.2)
    m.add_force("contact", "c1", body="b0", point=(0.1, 0.2), radius=1.0, stiffness=400.0,
                exponent=exponent, damping=7.0, damping_model=damping_model, friction=0.4,
                slip_velocity=0.05, friction_model=friction_model)
    m.add_force("contact", "c2", body="b1", radius=0.8, line_body="b2",
                line_point=(0.2, -0.3), normal=(1.0, 2.0), stiffness=300.0,
                exponent=exponent, damping=3.0, damping_model=damping_model, friction=0.3,
                slip_velocity=0.1, friction_model=friction_model)
    m.add_force("damping", "f1", body="b1", coefficients=[0.5, 0.7, 0.2])
    m.add_force("damping", "f2", body="b2", coefficients=1.5)
    return m


@pytest.mark.parametrize("damping_model", ["hunt_crossley", "compression", "linear"])
@pytest.mark.parametrize("friction_model", ["tanh", "linear"])
def test_compiled_forces_equal_reference(damping_model, friction_model):
    from mbcore.system import compiled_available
    if not compiled_available():
        pytest.skip("compiled kernels not built")
    m = mixed_model(friction_model, damping_model, exponent=1.5)
    a, b = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    assert all(fg.compiled for fg in a.force_groups)
    rng = np.random.default_rng(5)
    touching = 0
    for _ in range(40):
        q, qd, t = rng.normal(size=9), 2 * rng.normal(size=9), float(rng.uniform(0, 3))
        Qa, Qb = a.forces(q, qd, t).copy(), b.forces(q, qd, t).copy()
        # the same formulas in C and NumPy: 1e-12 of the force scale (entries where
        # large terms cancel carry the terms' rounding: observed 6e-16 of the scale,
        # 1.4e-14 of |Q_i|)
        np.testing.assert_allclose(Qa, Qb, rtol=1e-12, atol=1e-12 * (1 + np.abs(Qb).max()))
        out = dict(zip(b.force_labels, b.force_outputs(q, qd, t), strict=True))
        touching += (out["c1.normal_force"] > 0) + (out["c2.normal_force"] > 0)
    assert 20 < touching < 70          # both sides of the contact were exercised


def test_contact_outputs_and_separation(backend):
    """Outputs follow the definitions; no force, energy or power when separated."""
    m = Model("disc")
    m.add_body("disc", position=(0.3, 0.5), angle=0.2)
    m.add_force("contact", "c", body="disc", radius=0.2, stiffness=1e4, damping=10.0,
                damping_model="linear", friction=0.5, slip_velocity=0.01)
    s = m.compile(kernels=backend)
    q, qd = np.array([0.3, 0.5, 0.2]), np.array([1.0, -2.0, 3.0])
    assert np.all(s.forces(q, qd, 0.0) == 0.0)
    out = dict(zip(s.force_labels, s.force_outputs(q, qd, 0.0), strict=True))
    assert out["c.delta"] == pytest.approx(-0.3)
    assert out["c.normal_force"] == 0.0 and out["c.friction_force"] == 0.0
    assert s.potential_energy(q) == 0.0 and s.nonconservative_power(q, qd, 0.0) == 0.0
    # in contact: delta = 0.01, delta_dot = -ydot = 2, slip = xdot + w d = 1 + 3 * 0.19
    q = np.array([0.3, 0.19, 0.2])
    out = dict(zip(s.force_labels, s.force_outputs(q, qd, 0.0), strict=True))
    assert out["c.delta"] == pytest.approx(0.01)
    assert out["c.delta_rate"] == pytest.approx(2.0)
    assert out["c.slip_velocity"] == pytest.approx(1.0 + 3.0 * 0.19)
    fn = 1e4 * 0.01 + 10.0 * 2.0
    assert out["c.normal_force"] == pytest.approx(fn)
    assert out["c.friction_force"] == pytest.approx(-0.5 * fn * np.tanh(157.0))
    Q = s.forces(q, qd, 0.0)
    ft = out["c.friction_force"]
    np.testing.assert_allclose(Q, [ft, fn, 0.19 * ft], rtol=1e-12)   # (X - r) x f
    # a receding disc with a large damping force is never pulled (clipping)
    qd = np.array([0.0, 50.0, 0.0])
    assert np.all(s.forces(q, qd, 0.0) == 0.0)


# --------------------------------------------------------- -grad V and power balance
@pytest.mark.parametrize("exponent", [1.0, 1.5])
def test_contact_elastic_force_is_minus_gradient(backend, exponent):
    m = Model("springs")
    m.add_body("a", position=(0.1, 0.2), angle=0.3)
    m.add_body("b", position=(1.5, -0.4), angle=-0.2)
    m.add_force("contact", "ground", body="a", point=(0.2, 0.1), radius=1.0,
                stiffness=120.0, exponent=exponent, line_point=(0.3, 0.1),
                normal=(0.2, 1.0))
    m.add_force("contact", "on_b", body="a", radius=1.2, line_body="b",
                line_point=(0.1, -0.2), normal=(-1.0, 0.5), stiffness=80.0,
                exponent=exponent)
    s = m.compile(kernels=backend)
    rng = np.random.default_rng(3)
    active = 0
    for _ in range(12):
        q = rng.normal(size=6)
        Q = s.forces(q, np.zeros(6), 0.0).copy()
        h = 1e-6
        grad = np.array([(s.potential_energy(q + h * e) - s.potential_energy(q - h * e))
                         / (2 * h) for e in np.eye(6)])
        # central difference: rounding eps |V| / h (observed <= 1.2x it); 200x it
        bound = np.finfo(float).eps * abs(s.potential_energy(q)) / h
        np.testing.assert_allclose(Q, -grad, rtol=0, atol=200 * bound + 1e-300)
        active += np.any(Q != 0)
    assert active >= 6


@pytest.mark.parametrize("damping_model", ["hunt_crossley", "compression", "linear"])
def test_power_balance_dT_plus_dV_equals_nonconservative_power(backend, damping_model):
    m = mixed_model(damping_model=damping_model, exponent=1.5)
    register_user_function("test_more_pull", pull)
    m.add_force("user_force", "u", body_i="b1", body_j="b0", callable="test_more_pull",
                parameters={"k": 3.0, "c": 0.7})
    s = m.compile(kernels=backend)
    rng = np.random.default_rng(2)
    for _ in range(12):
        q, qd, t = rng.normal(size=9), rng.normal(size=9), float(rng.uniform(0, 2))
        qdd = s.forces(q, qd, t) / s.mass_diag
        h = 1e-6
        E = lambda tau: (s.kinetic_energy(qd + tau * qdd)
                         + s.potential_energy(q + tau * qd + 0.5 * tau ** 2 * qdd, t + tau))
        dE = (E(h) - E(-h)) / (2 * h)
        assert dE == pytest.approx(s.nonconservative_power(q, qd, t), rel=1e-6, abs=1e-6)


def test_dissipative_elements_never_inject_power(backend):
    """Drag (no wind), fictitious damping and contact friction/damping (compression,
    Hunt-Crossley) only dissipate."""
    m = mixed_model(damping_model="compression")
    m.elements["forces"][0].raw["wind"] = [0.0, 0.0]
    s = m.compile(kernels=backend)
    rng = np.random.default_rng(8)
    for _ in range(30):
        q, qd = rng.normal(size=9), rng.normal(size=9)
        assert s.nonconservative_power(q, qd, 0.0) <= 1e-12


# -------------------------------------------------------------- contact dynamics
def ball(damping_model="hunt_crossley", damping=0.0, k=1e5, h0=1.0, **kw):
    m = Model("bouncing ball")      # 004 Prob 10.21
    m.set_gravity(0, -G)
    m.add_body("ball", mass=1.0, inertia=0.004, position=(0.0, 0.1 + h0))
    m.add_force("contact", "ground", body="ball", radius=0.1, stiffness=k,
                damping=damping, damping_model=damping_model, **kw)
    return m


def first_bounce(res):
    """(apex height of the next flight, largest penetration)."""
    y = res["ball.y"]
    imp = int(np.argmin(y[: len(y) // 2 + 200]))
    return y[imp:].max() - 0.1, 0.1 - y.min()


def cor_compression(zeta):
    """Damping in compression only (linear spring, gravity neglected during the
    impact): x_max = v0/w exp(-zeta w t1), undamped rebound -> e = w x_max / v0."""
    s = np.sqrt(1 - zeta ** 2)
    return np.exp(-zeta / s * np.arctan2(s, zeta))


def cor_hunt_crossley(k, c, v0, m=1.0):
    """m v dv/(k + c v) = -delta d(delta): F(v1) = F(v0) with
    F(v) = v/c - k/c^2 ln(k + c v) (gravity neglected during the impact)."""
    F = lambda v: m * (v / c - k / c ** 2 * np.log(k + c * v))
    v1 = brentq(lambda v: F(v) - F(v0), -k / c * (1 - 1e-12), -1e-9)
    return -v1 / v0


def test_ball_bounces_elastically_without_damping(backend):
    res = dynamic(ball(), backend, 1.0, 1e-3)
    h1, pen = first_bounce(res)
    assert h1 == pytest.approx(1.0, abs=1e-4)
    # energy: k pen^2 / 2 = m g (h0 + pen) exactly at the deepest point
    k, mg = 1e5, G
    bound = (mg + np.sqrt(mg ** 2 + 2 * k * mg * 1.0)) / k
    assert 0.98 * bound < pen <= bound       # sampled every 1 ms: up to 1.3 % low
    E = res["energy/total"]
    assert np.ptp(E) < 1e-4 * E[0]


@pytest.mark.parametrize("model", ["compression", "hunt_crossley"])
def test_ball_restitution_matches_the_damping(backend, model):
    k, v0 = 1e5, np.sqrt(2 * G * 1.0)
    if model == "compression":
        zeta = 0.2
        c = 2 * zeta * np.sqrt(k)
        expected = cor_compression(zeta)
    else:
        c = 1.5 * k * 0.3 / v0             # Hunt-Crossley's c = 3 k (1 - e) / (2 v0)
        expected = cor_hunt_crossley(k, c, v0)
    res = dynamic(ball(model, c, k), backend, 1.0, 1e-3)
    h1, pen = first_bounce(res)
    cor = np.sqrt(h1 / 1.0)
    assert 0.7 < cor < 0.8
    assert cor == pytest.approx(expected, rel=5e-3)      # gravity during the impact
    bound = (G + np.sqrt(G ** 2 + 2 * k * G * 1.0)) / k  # undamped: an upper bound
    assert pen < bound
    assert np.all(res["forces/ground.normal_force"] >= 0.0)
    # the work of the damping is exactly the energy lost
    assert np.ptp(res["energy/balance"]) < 1e-4 * res["energy/total"][0]


def test_ball_at_rest_sinks_by_mg_over_k():
    """Static equilibrium on the ground line: delta = (m g / k)^(1/e)."""
    for e in (1.0, 1.5):
        m = ball(k=1e4, h0=-0.001, exponent=e)
        m.add_joint("absolute", "x", body="ball", coordinate="x")
        m.add_joint("absolute", "phi", body="ball", coordinate="phi")
        res = mbcore.run(m, settings={"analysis": "static"})
        assert res["forces/ground.delta"][0] == pytest.approx((G / 1e4) ** (1 / e),
                                                              rel=1e-9)


@pytest.mark.parametrize("friction_model", ["tanh", "linear"])
def test_friction_decelerates_a_sliding_disc_at_mu_g(backend, friction_model):
    """A disc (J = m r^2 / 2) launched without spin at v0 on the ground line:
    while slipping xdd = -mu g and the spin grows as w = -mu m g d t / J; rolling
    rolling starts at t = v0 / (mu g (1 + m d^2 / J)) with the speed
    v0 m d^2 / (J + m d^2) = 2 v0 / 3 (d = r - m g / k, the rolling radius)."""
    mu, v0, r, k, mass = 0.3, 2.0, 0.1, 1e6, 1.0
    J = mass * r ** 2 / 2
    d = r - mass * G / k
    m = Model("sliding disc")
    m.set_gravity(0, -G)
    m.add_body("disc", mass=mass, inertia=J, position=(0.0, d), velocity=(v0, 0.0))
    m.add_force("contact", "ground", body="disc", radius=r, stiffness=k, damping=2e3,
                damping_model="linear", friction=mu, slip_velocity=1e-3,
                friction_model=friction_model)
    res = dynamic(m, backend, 0.4, 0.01, rtol=1e-8, atol=1e-10)
    t, xd, w = res.t, res["qd/disc.x"], res["qd/disc.phi"]
    t_roll = v0 / (mu * G * (1 + mass * d ** 2 / J))
    slip = t < t_roll - 0.01
    np.testing.assert_allclose(res["qdd/disc.x"][slip][1:], -mu * G, rtol=1e-4)
    np.testing.assert_allclose(xd[slip], v0 - mu * G * t[slip], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(w[slip], -mu * mass * G * d * t[slip] / J, rtol=1e-4,
                               atol=1e-5)
    roll = t > t_roll + 0.03
    np.testing.assert_allclose(xd[roll], v0 * mass * d ** 2 / (J + mass * d ** 2),
                               rtol=1e-4)
    np.testing.assert_allclose(res["forces/ground.slip_velocity"][roll], 0.0, atol=1e-5)


# ---------------------------------------------------------------------- drag
def test_drag_terminal_velocity(backend):
    """004 Prob 10.18: falling from rest, v(t) = v_t tanh(g t / v_t) with
    v_t = sqrt(2 m g / (c_d rho A)); the linear term alone gives v_t = m g / c."""
    mass, cd, rho, A = 2.0, 0.8, 1.2, 0.25
    vt = np.sqrt(2 * mass * G / (cd * rho * A))
    m = Model("fall")
    m.set_gravity(0, -G)
    m.add_body("quad", mass=mass, position=(0, 100))
    m.add_body("lin", mass=mass, position=(5, 100))
    m.add_force("drag", "air", body="quad", drag_coefficient=cd, density=rho, area=A)
    m.add_force("drag", "visc", body="lin", linear=3.0, density=rho)
    res = dynamic(m, backend, 12.0, 0.1)
    t = res.t
    np.testing.assert_allclose(res["qd/quad.y"], -vt * np.tanh(G * t / vt), rtol=1e-6,
                               atol=1e-7)
    assert -res["qd/quad.y"][-1] == pytest.approx(vt, rel=1e-5)
    assert res["forces/air.speed"][-1] == pytest.approx(vt, rel=1e-5)
    assert res["forces/air.force"][-1] == pytest.approx(mass * G, rel=1e-5)
    vl = mass * G / 3.0
    np.testing.assert_allclose(res["qd/lin.y"], -vl * (1 - np.exp(-3.0 * t / mass)),
                               rtol=1e-6, atol=1e-7)


def test_drag_at_a_point_and_wind(backend):
    m = Model("drag")
    m.add_body("b", angle=0.5)
    m.add_force("drag", "d", body="b", point=(1.0, 0.0), drag_coefficient=2.0, density=1.0,
                area=0.5, wind=(1.0, 0.0))
    s = m.compile(kernels=backend)
    q, qd = np.array([0.0, 0.0, 0.5]), np.array([1.0, 0.0, 2.0])
    S = np.array([np.cos(0.5), np.sin(0.5)])
    v = qd[:2] + 2.0 * np.array([-S[1], S[0]]) - [1.0, 0.0]
    f = -0.5 * np.linalg.norm(v) * v
    np.testing.assert_allclose(s.forces(q, qd, 0.0), [f[0], f[1], S[0] * f[1] - S[1] * f[0]],
                               rtol=1e-12)


# ---------------------------------------------------------- fictitious damping
@pytest.mark.parametrize("coefficients", [10.0, [5.0, 5.0, 1.0]])
def test_fictitious_damping_brings_the_platform_to_static_equilibrium(examples, backend,
                                                                      coefficients):
    """004 §14.3: without its damper, the platform only comes to rest through the
    fictitious damping, at the equilibrium of the static analysis."""
    base = Model.from_file(examples / "platform.yaml")
    base.settings = {}
    static = mbcore.run(base, settings={"analysis": "static"})
    base.elements["forces"][0].raw["damping"] = 0.0
    m = Model.from_dict(base.to_dict())
    for b in ("left_legs", "platform", "right_legs"):
        m.add_force("damping", f"D_{b}", body=b, coefficients=coefficients)
    res = dynamic(m, backend, 5.0, 0.05)
    # the transient left at t = 5 s (decaying exponentially: 4.1e-8 with coefficients
    # [5, 5, 1], 8e-12 with 10; without the fictitious damping 0.5)
    np.testing.assert_allclose(res["q"][-1], static["q"][0], rtol=0, atol=1e-5)
    assert np.abs(res["qd"][-1]).max() < 1e-5
    assert np.ptp(res["energy/balance"]) < 1e-6 * res["energy/total"][0]
    d_y = coefficients if np.ndim(coefficients) == 0 else coefficients[1]
    assert res["forces/D_platform.fy"][0] == pytest.approx(-d_y * res["qd/platform.y"][0])


# ------------------------------------------------------------------ user force
def tsda_law(t, q, qd, k, c, L0, sxi=0.0, syi=0.0, sxj=0.0, syj=0.0):
    """A TSDA written as a user force (004 Eqs 9.13-9.25), one element."""
    Si = np.array([np.cos(q[0, 2]) * sxi - np.sin(q[0, 2]) * syi,
                   np.sin(q[0, 2]) * sxi + np.cos(q[0, 2]) * syi])
    Sj = np.array([np.cos(q[1, 2]) * sxj - np.sin(q[1, 2]) * syj,
                   np.sin(q[1, 2]) * sxj + np.cos(q[1, 2]) * syj])
    l = q[1, :2] + Sj - q[0, :2] - Si
    L = np.hypot(*l)
    u = l / L
    ld = qd[1, :2] + qd[1, 2] * np.array([-Sj[1], Sj[0]]) - qd[0, :2] \
        - qd[0, 2] * np.array([-Si[1], Si[0]])
    fu = (k * (L - L0) + c * (u @ ld)) * u
    return [[fu[0], fu[1], Si[0] * fu[1] - Si[1] * fu[0]],
            [-fu[0], -fu[1], -(Sj[0] * fu[1] - Sj[1] * fu[0])]]


def tsda_law_vectorized(t, q, qd, k, c, L0):
    l = q[:, 1, :2] - q[:, 0, :2]
    L = np.hypot(l[:, 0], l[:, 1])
    u = l / L[:, None]
    f = k * (L - L0) + c * np.sum(u * (qd[:, 1, :2] - qd[:, 0, :2]), -1)
    g = np.zeros(q.shape)
    g[:, 0, :2] = f[:, None] * u
    g[:, 1, :2] = -f[:, None] * u
    return g


def pull(t, q, qd, k, c):
    """A one-body force returned as [fx, fy, n] (body_i only)."""
    return [-k * q[0, 0] - c * qd[0, 0], -k * q[0, 1], 0.1 * np.sin(t)]


SPRING = dict(k=50.0, c=3.0, L0=0.8)


def spring_pair(kind, **extra):
    m = Model("pair")
    m.set_gravity(0, -G)
    m.add_body("a", position=(0.0, 0.0), angle=0.3, mass=1.0, inertia=0.1)
    m.add_body("b", position=(1.0, 0.2), angle=-0.2, mass=2.0, inertia=0.3,
               velocity=(0.0, 1.0), angular_velocity=2.0)
    m.add_force("tsda", "top", body_i="ground", body_j="a", point_j=(0.1, 0.0),
                stiffness=100.0, free_length=0.5)
    pi, pj = (0.2, 0.1), (-0.3, 0.2)
    if kind == "tsda":
        m.add_force("tsda", "s", body_i="a", body_j="b", point_i=pi, point_j=pj,
                    stiffness=SPRING["k"], damping=SPRING["c"], free_length=SPRING["L0"])
    else:
        params = dict(SPRING, sxi=pi[0], syi=pi[1], sxj=pj[0], syj=pj[1])
        m.add_force("user_force", "s", body_i="a", body_j="b", callable=kind,
                    parameters=params, **extra)
    return m


def test_user_force_equals_tsda(backend):
    ref = spring_pair("tsda").compile(kernels=backend)
    register_user_function("test_more_tsda", tsda_law)
    specs = [f"{__name__}:tsda_law", "test_more_tsda", user_function(tsda_law),
             user_function(lambda *a, **k: tsda_law(*a, **k))]
    systems = [spring_pair(spec).compile(kernels=backend) for spec in specs]
    rng = np.random.default_rng(4)
    for _ in range(10):
        q, qd, t = rng.normal(size=6), rng.normal(size=6), float(rng.uniform(0, 2))
        Q = ref.forces(q, qd, t).copy()
        for s in systems:
            np.testing.assert_allclose(s.forces(q, qd, t), Q, rtol=1e-12, atol=1e-12)
    out = dict(zip(systems[0].force_labels, systems[0].force_outputs(q, qd, t),
                   strict=True))
    assert [out[f"s.{c}"] for c in ("fx_j", "fy_j")] == pytest.approx(
        [-out["s.fx_i"], -out["s.fy_i"]])


@pytest.mark.parametrize("integrator", ["rk4", "dopri5"])
def test_user_force_run_equals_tsda_run(backend, integrator):
    """Same trajectory: to round-off with the fixed-step rk4; dopri5's step
    control may react to round-off differences, so to its tolerance there."""
    res = [dynamic(m, backend, 0.5, 0.01, integrator=integrator)
           for m in (spring_pair("tsda"), spring_pair(f"{__name__}:tsda_law"))]
    tol = 1e-12 if integrator == "rk4" else 1e-8
    np.testing.assert_allclose(res[1]["q"], res[0]["q"], rtol=0, atol=tol)
    np.testing.assert_allclose(res[1]["qd"], res[0]["qd"], rtol=0, atol=10 * tol)
    assert res[1]["q"][-1, 0] != res[1]["q"][0, 0]
    # the user force's work is all non-conservative work, and is accounted for
    # (up to the integrator's error on the work integral: rk4 with h = 0.01, 2.2e-5;
    # a truncation error, the same under every BLAS kernel)
    E = res[1]["energy/total"][0]
    assert np.ptp(res[1]["energy/balance"]) < (1e-5 if integrator == "rk4" else 1e-8) * E


def test_vectorized_user_force(backend):
    m = Model("vec")
    for k in range(4):
        m.add_body(f"b{k}", position=(k, 0.1 * k))
    m.add_force("tsda", "ref", body_i="b0", body_j="b1", stiffness=5.0, damping=1.0,
                free_length=0.7)
    for k in (1, 2):
        m.add_force("user_force", f"u{k}", body_i=f"b{k}", body_j=f"b{k + 1}",
                    callable=f"{__name__}:tsda_law_vectorized", vectorized=True,
                    parameters={"k": 5.0, "c": 1.0, "L0": 0.7})
    s = m.compile(kernels=backend)
    rng = np.random.default_rng(6)
    q, qd = rng.normal(size=12), rng.normal(size=12)
    Q = s.forces(q, qd, 0.0)
    ref = Model("ref")
    for k in range(4):
        ref.add_body(f"b{k}", position=(k, 0.1 * k))
    for k in range(3):
        ref.add_force("tsda", f"s{k}", body_i=f"b{k}", body_j=f"b{k + 1}", stiffness=5.0,
                      damping=1.0, free_length=0.7)
    np.testing.assert_allclose(Q, ref.compile(kernels=backend).forces(q, qd, 0.0),
                               rtol=1e-12, atol=1e-12)


def test_user_force_in_a_model_file_round_trip(tmp_path):
    m = spring_pair(user_function(tsda_law))
    assert m.to_dict()["forces"][1]["callable"] == f"{__name__}:tsda_law"
    m.save(tmp_path / "m.yaml")
    m2 = Model.from_file(tmp_path / "m.yaml")
    q = np.arange(6) * 0.1
    np.testing.assert_allclose(m2.compile().forces(q, q, 0.0), m.compile().forces(q, q, 0.0))


def raises_sometimes(t, q, qd):
    if t > 0.1:
        raise ValueError("no data beyond 0.1 s")
    return [0.0, 1.0, 0.0]


def wrong_shape(t, q, qd):
    return [1.0, 2.0]


NOT_CALLABLE = 3.0


def test_user_force_errors(backend):
    def model(spec, **kw):
        m = Model("u")
        m.add_body("b")
        m.add_force("user_force", "uf", body_i="b", callable=spec, **kw)
        return m

    cases = [
        ("no_such_module_xyz:f", r"forces\[0\]\.callable: module 'no_such_module_xyz' is not "
                                 r"imported: a model file may only name code"),
        (f"{__name__}:missing", r"forces\[0\]\.callable: module .* has no attribute"),
        (f"{__name__}:NOT_CALLABLE", r"forces\[0\]\.callable: .* is not callable"),
        ("never_registered", r"forces\[0\]\.callable: no user function registered"),
        ("os.path:", r"forces\[0\]\.callable: expected 'package.module:function'"),
    ]
    for spec, msg in cases:
        with pytest.raises(ModelError, match=msg):
            model(spec).compile(kernels=backend)
    # trusted model files may import their modules (opt-in)
    import os
    os.environ["MBCORE_ALLOW_IMPORTS"] = "1"
    try:
        with pytest.raises(ModelError, match=r"forces\[0\]\.callable: cannot import module"):
            model("no_such_module_xyz:f").compile(kernels=backend)
    finally:
        del os.environ["MBCORE_ALLOW_IMPORTS"]
    with pytest.raises(ModelError, match=r"callable: .*user_function\(fn\)"):
        model(tsda_law).compile(kernels=backend)
    with pytest.raises(ModelError, match=r"forces\[0\]\.parameters\.k: expected a finite"):
        model(f"{__name__}:pull", parameters={"k": "x"}).compile(kernels=backend)
    with pytest.raises(ModelError, match=r"forces\[0\]\.vectorized: expected true or false"):
        model(f"{__name__}:pull", vectorized="yes").compile(kernels=backend)
    s = model(f"{__name__}:raises_sometimes").compile(kernels=backend)
    assert s.forces(np.zeros(3), np.zeros(3), 0.0)[1] == 1.0
    with pytest.raises(AnalysisError, match=r"t = 0.2: force element 'uf' \(forces\[0\], "
                                            r"user_force\): user function .* raised "
                                            r"ValueError: no data beyond 0.1 s"):
        s.forces(np.zeros(3), np.zeros(3), 0.2)
    s = model(f"{__name__}:wrong_shape").compile(kernels=backend)
    with pytest.raises(AnalysisError, match=r"'uf'.*returned shape \(2,\), expected"):
        s.forces(np.zeros(3), np.zeros(3), 0.0)
    unregister_user_function("never_registered")


# ----------------------------------------------------------------- validation
@pytest.mark.parametrize("type_, params, match", [
    ("contact", {"body": "b"}, r"forces\[0\]\.stiffness: required key is missing"),
    ("contact", {"body": "b", "stiffness": 0.0}, r"forces\[0\]\.stiffness: must be > 0"),
    ("contact", {"body": "b", "stiffness": 1.0, "normal": [0, 0]},
     r"forces\[0\]\.normal: expected a non-zero direction"),
    ("contact", {"body": "b", "stiffness": 1.0, "exponent": 0.5},
     r"forces\[0\]\.exponent: must be >= 1"),
    ("contact", {"body": "b", "stiffness": 1.0, "radius": -1},
     r"forces\[0\]\.radius: must be >= 0"),
    ("contact", {"body": "b", "stiffness": 1.0, "slip_velocity": 0},
     r"forces\[0\]\.slip_velocity: must be > 0"),
    ("contact", {"body": "b", "stiffness": 1.0, "damping_model": "kelvin"},
     r"forces\[0\]\.damping_model: expected one of"),
    ("contact", {"body": "b", "stiffness": 1.0, "line_body": "nope"},
     r"forces\[0\]\.line_body: unknown body 'nope'"),
    ("drag", {"body": "b", "area": -0.1}, r"forces\[0\]\.area: must be >= 0"),
    ("drag", {"body": "b", "wind": [1]}, r"forces\[0\]\.wind: expected 2 numbers"),
    ("damping", {"body": "b"}, r"forces\[0\]\.coefficients: required key is missing"),
    ("damping", {"body": "b", "coefficients": [1, 2]},
     r"forces\[0\]\.coefficients: expected one number or 3 numbers"),
    ("damping", {"body": "b", "coefficients": [1, -2, 0]},
     r"forces\[0\]\.coefficients\[1\]: must be >= 0"),
    ("damping", {"body": "b", "coefficients": "x"},
     r"forces\[0\]\.coefficients: expected a number"),
])
def test_validation_names_the_key(type_, params, match):
    d = {"bodies": [{"name": "b"}], "forces": [{"type": type_, **params}]}
    with pytest.raises(ModelError, match=match):
        Model.from_dict(d)


def test_new_types_load_from_a_model_file():
    text = """
name: demo
gravity: [0, -9.81]
bodies: [{name: ball, position: [0, 0.5]}]
points: [{name: centre, body: ball, at: [0, 0]}]
forces:
  - {type: contact, body: ball, point: centre, radius: 0.1, stiffness: 10000.0,
     damping: 10, damping_model: compression, friction: 0.3, slip_velocity: 0.01}
  - {type: drag, body: ball, drag_coefficient: 0.47, area: 0.0314}
  - {type: damping, body: ball, coefficients: [0, 0, 0.1]}
"""
    m = Model.from_text(text)
    s = m.compile()
    assert [fg.ftype.name for fg in s.force_groups] == ["contact", "drag", "damping"]
    assert s.force_labels[:2] == ["contact1.delta", "contact1.delta_rate"]
