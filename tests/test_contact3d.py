"""The spatial compliant contact ``spatial:contact`` (mbplugins.contact.spatial and its
compiled kernel ext/plugins/_contact.pyx):

1. without damping and friction its generalised force is -grad of its energy
   (central differences along random tangent directions), every shape;
2. the compiled kernel equals the NumPy reference to 1e-12 (forces and
   non-conservative power) on random states, every shape and model, ground and
   body surfaces, penetrating and separated elements;
3. Hertz impact of two free spheres: contact time, largest force and rebound
   speed from the 1-D law m_eff x'' = -k x^1.5;
4. a solid sphere launched sliding on a plane rolls at 5/7 v0 after 2 v0/(7 mu g);
5. a capsule at rest on the plane: its end forces carry m g by the lever rule;
6. Hunt & Crossley (1975) damping: restitution below 1, falling with the impact
   speed;
7. bad input is named by its key path.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.integrate import quad

import mbcore
from mbcore import Model
from mbcore.elements.rotations import normalize
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.system import compiled_available

G = 9.81
needs_compiled = pytest.mark.skipif(not compiled_available(),
                                    reason="compiled kernels not built")


def dynamic(model, t_end, step, backend="compiled", **kw):
    settings = {"analysis": "dynamic", "t_end": t_end, "output_step": step,
                "integrator": "dopri5", **kw}
    return mbcore.run(model, kernels=backend if compiled_available() else "numpy",
                      settings=settings)


# ------------------------------------------------------------------ random models
def mixed_model(seed=0, damping=5.0, friction=0.3):
    """Two bodies near the origin and contacts of every shape and model with the
    ground and with the other body (radii large enough to penetrate at most of the
    random states below, small enough to miss at some)."""
    rng = np.random.default_rng(seed)
    m = Model("contacts")
    m.set_dimensions(3)
    for b in ("a", "b"):
        m.add_body(b, mass=1.0, inertia=[0.1, 0.2, 0.3],
                   position=list(rng.normal(scale=0.05, size=3)))
    common = dict(stiffness=1e3, damping=damping, friction=friction)
    m.add_force("contact", "sp_hc", body="a", radius=0.12, point=[0.01, 0.02, 0.03],
                **common)
    m.add_force("contact", "sp_lin_on_b", body="a", surface="b", radius=0.15,
                point=[-0.05, 0.0, 0.02], surface_point=[0.0, 0.01, -0.02],
                normal=[0.2, -0.1, 1.0], damping_model="linear", friction_model="linear",
                exponent=1.0, **common)
    m.add_force("contact", "ss", body="a", surface="b", shape="sphere_sphere",
                radius=0.15, surface_radius=0.1, point=[0.1, 0.0, 0.0],
                surface_point=[0.0, 0.05, 0.0], damping_model="compression", **common)
    m.add_force("contact", "ss_ground", body="b", shape="sphere_sphere", radius=0.1,
                surface_radius=0.05, point=[0.0, 0.0, 0.05], exponent=1.2, **common)
    m.add_force("contact", "cap", body="b", shape="capsule_plane", radius=0.05,
                point=[-0.1, 0.0, 0.0], point_b=[0.1, 0.05, 0.0], normal=[0.1, 0.2, 1],
                surface_point=[0.0, 0.0, 0.02], damping_model="compression",
                friction_model="linear", **common)
    m.add_force("contact", "cap_on_a", body="b", surface="a", shape="capsule_plane",
                radius=0.08, point=[0.0, -0.1, 0.0], point_b=[0.05, 0.1, 0.02],
                normal=[0.0, 1.0, 1.0], **common)
    return m


def random_state(s, rng, scale=0.1):
    q = s.initial_state().q.copy()
    q[s._r_idx] += rng.normal(scale=scale, size=len(s._r_idx))
    for idx in s._p_idx:
        q[idx] = normalize(q[idx] + rng.normal(scale=0.3, size=4))
    qd = rng.normal(size=s.n)
    for idx in s._p_idx:              # tangent: p . pd = 0
        qd[idx] -= (q[idx] @ qd[idx]) * q[idx]
    return q, qd


def along(s, q, dq, h):
    x = q + h * dq
    for idx in s._p_idx:
        x[idx] = normalize(x[idx])
    return x


# ------------------------------------------------------------------ 1. -grad V
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_elastic_force_is_minus_grad_energy(seed):
    """c = 0, mu = 0: Q . dq = -dV along random tangent directions (Euler parameters
    renormalised), at states where every shape penetrates (ground and body surfaces).  Central differences
    with h = 1e-6: truncation h^2 |V'''| / 6 and rounding eps |V| / h; observed
    relative errors <= 4.2e-9, tolerance 1e-6 relative."""
    s = mixed_model(seed, damping=0.0, friction=0.0).compile(kernels="numpy")
    rng = np.random.default_rng(100 + seed)
    names = ("sp_hc", "sp_lin_on_b", "ss", "ss_ground", "cap", "cap_on_a")
    shapes = (("sp_hc", "sp_lin_on_b"), ("ss",), ("ss_ground",), ("cap", "cap_on_a"))
    for _ in range(200):                  # a state where every shape penetrates
        q, _ = random_state(s, rng)
        deep = [n for n in names if _output(s, n, "delta", q) > 0]
        if len(deep) >= 4 and all(set(sh) & set(deep) for sh in shapes):
            break
    assert len(deep) >= 4 and all(set(sh) & set(deep) for sh in shapes), deep
    Q = s.forces(q, np.zeros(s.n), 0.0).copy() - s._q_gravity
    for _ in range(4):
        _, dq = random_state(s, rng)
        h = 1e-6
        dV = (s.potential_energy(along(s, q, dq, h))
              - s.potential_energy(along(s, q, dq, -h))) / (2 * h)
        assert Q @ dq == pytest.approx(-dV, rel=1e-6, abs=1e-8)
    assert np.abs(Q).max() > 1.0                        # the test sees a force


@pytest.mark.parametrize("kernels", ["numpy", pytest.param("compiled", marks=needs_compiled)])
def test_power_balance_with_damping_and_friction(kernels):
    """Q . qd = -dV/dt + P_nc (power_nc: damping, clipping and friction) at random
    states of the mixed model, every shape and model (central difference of V
    along qd, h = 1e-6; observed <= 5.7e-10 relative, tolerance 1e-6)."""
    s = mixed_model(4).compile(kernels=kernels)
    rng = np.random.default_rng(44)
    for _ in range(6):
        q, qd = random_state(s, rng, scale=0.08)
        Q = s.forces(q, qd, 0.0).copy() - s._q_gravity
        h = 1e-6
        dV = (s.potential_energy(along(s, q, qd, h))
              - s.potential_energy(along(s, q, qd, -h))) / (2 * h)
        P = s.nonconservative_power(q, qd, 0.0, compiled=kernels == "compiled")
        assert Q @ qd == pytest.approx(-dV + P, rel=1e-6, abs=1e-6)


# ------------------------------------------------------------------ 2. compiled
@needs_compiled
@pytest.mark.parametrize("seed", [0, 5])
def test_compiled_kernel_equals_the_numpy_reference(seed):
    """System.forces and the non-conservative power of the compiled kernel equal
    the NumPy path to 1e-12 (relative to the largest force) on random states
    (observed <= 6.5e-16 relative for the forces, 5.7e-16 for the power: the
    same operations in the same order up to the summation order of three-term
    dot products).  The states cover contact and separation of every element."""
    sn = mixed_model(seed).compile(kernels="numpy")
    sc = mixed_model(seed).compile(kernels="compiled")
    rng = np.random.default_rng(seed)
    hit = set()
    for _ in range(40):
        q, qd = random_state(sn, rng, scale=0.08)
        a, b = sn.forces(q, qd, 0.3).copy(), sc.forces(q, qd, 0.3).copy()
        scale = np.abs(a).max()
        assert np.abs(a - b).max() <= 1e-12 * scale
        pa = sn.nonconservative_power(q, qd, 0.3)
        pb = sc.nonconservative_power(q, qd, 0.3, compiled=True)     # the kernel's P
        assert pa == pytest.approx(pb, rel=1e-12, abs=1e-12 * scale)
        assert pa <= 1e-9                   # damping and friction only dissipate
        # which elements penetrate here (delta > 0 of either end)
        for name in ("sp_hc", "sp_lin_on_b", "ss", "ss_ground", "cap", "cap_on_a"):
            hit.add((name, bool(_output(sn, name, "delta", q) > 0)))
    # the states exercised both contact and separation of every element
    assert len(hit) == 12, sorted(hit)


def _output(s, name, label, q, qd=None):
    """Output ``label`` of force element ``name`` at (q, qd)."""
    out = s.force_outputs(q, np.zeros(s.n) if qd is None else qd, 0.0)
    return out[s.force_labels.index(f"{name}.{label}")]


# ------------------------------------------------------------------ 3. Hertz impact
def test_hertz_impact_of_two_free_spheres():
    """Two free spheres (m1 = 1, m2 = 2, R = 0.1, k = 1e6 N/m^1.5, no damping,
    friction or gravity) meet head-on at the relative speed v = 1: the overlap
    obeys m_eff x'' = -k x^1.5.  With x = X xi, t = T tau, X = (m_eff v^2/k)^(2/5),
    T = X / v it is xi'' = -xi^1.5, xi'(0) = 1, so (energy) xi_max = (5/4)^(2/5),
    delta_max = (5 m_eff v^2 / (4 k))^(2/5), F_max = k delta_max^1.5, and the contact
    lasts t_c = tau_c (m_eff^2 / (k^2 v))^(1/5), tau_c = 2 int_0^xi_max dxi /
    sqrt(1 - 0.8 xi^2.5) = 3.2181 (quadrature below; t_c = 2.9433 delta_max / v,
    the classical result for the impact of elastic spheres, Johnson (1985), Ch. 11).
    Measured from the normal-force channel sampled every 1e-6 s: t_c within 2
    samples (observed 1.2e-4 relative = 1.3 samples), F_max within 1e-6 relative
    (observed 9e-9), the relative rebound speed equals the approach speed within
    1e-8 (observed 8e-12) and the total energy is constant (observed 5e-11 J)."""
    tau_c = 2.0 * quad(lambda x: 1.0 / math.sqrt(1.0 - 0.8 * x ** 2.5), 0.0,
                       1.25 ** 0.4)[0]
    assert tau_c == pytest.approx(3.2181, abs=1e-4)
    assert tau_c / 1.25 ** 0.4 == pytest.approx(2.9433, abs=1e-4)
    m1, m2, k, v, R, gap, step = 1.0, 2.0, 1e6, 1.0, 0.1, 1e-4, 1e-6
    meff = m1 * m2 / (m1 + m2)
    m = Model("hertz")
    m.set_dimensions(3)
    m.add_body("a", mass=m1, inertia=[0.004] * 3, position=[-R - gap / 2, 0, 0],
               velocity=[v * m2 / (m1 + m2), 0, 0])
    m.add_body("b", mass=m2, inertia=[0.008] * 3, position=[R + gap / 2, 0, 0],
               velocity=[-v * m1 / (m1 + m2), 0, 0])
    m.add_force("contact", "hit", body="a", surface="b", shape="sphere_sphere",
                radius=R, surface_radius=R, stiffness=k)
    res = dynamic(m, 0.013, step, rtol=1e-10, atol=1e-12)
    F = res["forces/hit.normal_force"]
    on = np.nonzero(F > 0.0)[0]
    assert on[-1] < len(F) - 10                      # the spheres separated
    tc = res.t[on[-1]] - res.t[on[0]]
    tc_expected = tau_c * (meff ** 2 / (k ** 2 * v)) ** 0.2
    assert tc == pytest.approx(tc_expected, abs=2 * step)
    dmax = (5.0 * meff * v ** 2 / (4.0 * k)) ** 0.4
    assert F.max() == pytest.approx(k * dmax ** 1.5, rel=1e-6)
    assert res["forces/hit.delta"].max() == pytest.approx(dmax, rel=1e-6)
    v_after = res["qd/b.x"][-1] - res["qd/a.x"][-1]
    assert v_after == pytest.approx(v, rel=1e-8)
    assert np.ptp(res["energy/total"]) < 1e-8


# ------------------------------------------------------------------ 4. rolling
def test_sliding_sphere_starts_rolling_at_five_sevenths():
    """A solid sphere (m = 1, R = 0.1, J = 2 m R^2 / 5) launched at v0 = 1 without
    spin on the ground plane (mu = 0.2, v_eps = 1e-4, k = 1e8 N/m^1.5, resting at
    its static sink delta_s = (m g / k)^(2/3) = 2.1e-5): while it slips, friction
    mu m g decelerates it and spins it up; it rolls from t = 2 v0 / (7 mu g) at
    v = 5/7 v0 (lever arm R - delta_s: v = v0 m d^2 / (J + m d^2) deviates from
    5/7 v0 by 2/7 * 2 delta_s / R = 1.2e-4 relative).  Observed: speed at the end
    0.714199 (-1.2e-4 relative to 5/7, tolerance 3e-4; the exact lever-arm value
    within 1e-6); the slip speed falls below 10 v_eps at 0.1456 s (predicted
    t_roll - 10 v_eps / (3.5 mu g) = 0.14548, t_roll = 0.14562; tolerance 5e-4 s:
    sampling 1e-4 s and the tanh transition); while sliding the friction is
    mu f_n to 4e-16 (tanh(|v_t|/v_eps) = 1 far from rolling) and f_n = m g to
    1.1e-11; after rolling starts the slip speed stays below 5e-12."""
    mass, R, mu, v0, k, veps = 1.0, 0.1, 0.2, 1.0, 1e8, 1e-4
    ds = (mass * G / k) ** (2.0 / 3.0)
    m = Model("rolling sphere")
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G)
    J = 0.4 * mass * R ** 2
    m.add_body("ball", mass=mass, inertia=[J] * 3, position=[0.0, 0.0, R - ds],
               velocity=[v0, 0.0, 0.0])
    m.add_force("contact", "floor", body="ball", radius=R, stiffness=k, friction=mu,
                slip_velocity=veps)
    res = dynamic(m, 0.3, 1e-4, rtol=1e-9, atol=1e-12)
    t = res.t
    t_roll = 2.0 * v0 / (7.0 * mu * G)
    assert res["qd/ball.x"][-1] == pytest.approx(5.0 / 7.0 * v0, rel=3e-4)
    d = R - ds
    assert res["qd/ball.x"][-1] == pytest.approx(v0 * mass * d ** 2 / (J + mass * d ** 2),
                                                 rel=1e-6)
    slip = res["forces/floor.slip_speed"]
    t_stick = t[np.argmax(slip < 10 * veps)]
    assert t_stick == pytest.approx(t_roll - 10 * veps / (3.5 * mu * G), abs=5e-4)
    sliding = t < t_roll - 0.01
    np.testing.assert_allclose(res["forces/floor.friction_force"][sliding],
                               mu * res["forces/floor.normal_force"][sliding], rtol=1e-6)
    np.testing.assert_allclose(res["forces/floor.normal_force"][sliding], mass * G,
                               rtol=1e-3)
    assert np.all(slip[t > t_roll + 0.01] < veps)


# ------------------------------------------------------------------ 5. capsule
def test_capsule_at_rest_shares_its_weight_by_the_lever_rule():
    """A capsule (m = 2, R = 0.05, ends at x' = -0.3 and +0.1 from its centre of
    mass) dropped flat from 1 mm onto the plane with linear damping settles on its
    two end spheres: the end forces sum to m g and share it by the lever rule,
    F_a 0.3 = F_b 0.1 (F_a = m g / 4, F_b = 3 m g / 4).  The settled state is
    static up to the decay of the damped bounce (observed relative errors
    <= 3e-13; tolerance 1e-6)."""
    mass, R = 2.0, 0.05
    m = Model("capsule")
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G)
    m.add_body("cap", mass=mass, inertia=[0.002, 0.03, 0.03], position=[0.0, 0.0, R + 1e-3])
    m.add_force("contact", "floor", body="cap", shape="capsule_plane", radius=R,
                point=[-0.3, 0.0, 0.0], point_b=[0.1, 0.0, 0.0], stiffness=1e6,
                damping=300.0, damping_model="linear")
    res = dynamic(m, 1.0, 0.01, rtol=1e-9, atol=1e-12)
    fa, fb = res["forces/floor.normal_force_a"][-1], res["forces/floor.normal_force_b"][-1]
    assert fa + fb == pytest.approx(mass * G, rel=1e-6)
    # the total is the sum of the two end forces: observed equal bit for bit; bound
    # 1e-12, 1e4x the rounding of one addition
    assert res["forces/floor.normal_force"][-1] == pytest.approx(fa + fb, rel=1e-12)
    assert fa == pytest.approx(mass * G / 4.0, rel=1e-6)
    assert fb == pytest.approx(3.0 * mass * G / 4.0, rel=1e-6)
    # the deeper end is reported: b carries more, so it sinks more
    assert res["forces/floor.delta"][-1] == pytest.approx(
        (fb / 1e6) ** (1 / 1.5), rel=1e-6)


# ------------------------------------------------------------------ 6. restitution
def hunt_crossley_restitution(m, k, c, v0):
    """Restitution of the 1-D impact m x'' = -x^1.5 (k + c x') (Hunt & Crossley
    (1975) damping on a Hertz spring, x the penetration), integrated with scipy's
    solve_ivp to the end of contact (x = 0 again)."""
    from scipy.integrate import solve_ivp

    def rhs(t, y):
        x = max(y[0], 0.0)
        return [y[1], -max(x ** 1.5 * (k + c * y[1]), 0.0) / m]

    def out(t, y):
        return y[0]
    out.terminal, out.direction = True, -1
    sol = solve_ivp(rhs, (0.0, 1.0), [1e-300, v0], events=out, rtol=1e-12, atol=1e-15,
                    method="DOP853")
    return -sol.y_events[0][0][1] / v0


def test_hunt_crossley_restitution_falls_with_the_impact_speed():
    """A ball (m = 1, R = 0.1, k = 1e6 N/m^1.5, Hunt & Crossley (1975) damping
    c = 2e5: f_n = delta^1.5 (k + c delta_dot)) hits the plane at 0.5, 1 and 2 m/s
    without gravity: the restitution is below 1 and falls with the speed, and
    equals the restitution of the same 1-D law integrated by scipy (tolerance
    1e-6: both integrations at tight tolerances).  Observed 0.93748, 0.88219,
    0.78854 (scipy: the same to 3e-11; Hunt and Crossley's first-order
    1 - 2 c v0 / (3 k) gives 0.933, 0.867, 0.733)."""
    k, c = 1e6, 2e5
    cors = []
    for v0 in (0.5, 1.0, 2.0):
        m = Model("drop")
        m.set_dimensions(3)
        m.add_body("ball", mass=1.0, inertia=[0.004] * 3, position=[0.0, 0.0, 0.1001],
                   velocity=[0.0, 0.0, -v0])
        m.add_force("contact", "floor", body="ball", radius=0.1, stiffness=k, damping=c)
        res = dynamic(m, 0.03, 1e-4, rtol=1e-10, atol=1e-12)
        assert res["forces/floor.normal_force"][-1] == 0.0      # it left the plane
        e = res["qd/ball.z"][-1] / v0
        assert e == pytest.approx(hunt_crossley_restitution(1.0, k, c, v0), abs=1e-6)
        cors.append(e)
    assert all(e < 0.95 for e in cors)
    assert cors[0] > cors[1] > cors[2] + 0.05


# ------------------------------------------------------------------ 7. bad input
@pytest.mark.parametrize("params, key", [
    (dict(shape="sphere_sphere", surface_radius=0.1, normal=[0, 0, 1]), "normal"),
    (dict(shape="sphere_sphere"), "surface_radius"),
    (dict(surface_radius=0.1), "surface_radius"),
    (dict(shape="capsule_plane"), "point_b"),
    (dict(point_b=[0.1, 0, 0]), "point_b"),
    (dict(radius=-0.1), "radius"),
    (dict(shape="sphere_sphere", surface_radius=-0.1), "surface_radius"),
    (dict(stiffness=0.0), "stiffness"),
    (dict(exponent=0.5), "exponent"),
    (dict(slip_velocity=0.0), "slip_velocity"),
    (dict(friction=-1.0), "friction"),
    (dict(damping=-1.0), "damping"),
    (dict(shape="cube"), "shape"),
    (dict(normal=[0, 0, 0]), "normal"),
    (dict(damping_model="viscous"), "damping_model"),
])
def test_bad_input_is_named(params, key):
    """Each bad value is a ModelError whose path is the offending key."""
    m = Model("bad")
    m.set_dimensions(3)
    m.add_body("ball", mass=1.0, inertia=[0.004] * 3)
    m.add_force("contact", "floor", **{"body": "ball", "radius": 0.1, "stiffness": 1e5,
                                       **params})
    with pytest.raises(ModelError) as err:
        m.compile(kernels="numpy")
    assert err.value.path == f"forces[0].{key}", err.value


@pytest.mark.parametrize("kernels", ["numpy", pytest.param("compiled", marks=needs_compiled)])
def test_coincident_sphere_centres_are_an_error_naming_the_element(kernels):
    """sphere_sphere with coincident centres has no normal: both paths raise."""
    m = Model("coincident")
    m.set_dimensions(3)
    m.add_body("a", mass=1.0, inertia=[0.004] * 3)
    m.add_body("b", mass=1.0, inertia=[0.004] * 3)
    m.add_force("contact", "pair", body="a", surface="b", shape="sphere_sphere",
                radius=0.1, surface_radius=0.1, stiffness=1e5)
    s = m.compile(kernels=kernels)
    q = s.initial_state().q
    with pytest.raises(Exception) as err:
        s.forces(q, np.zeros(s.n), 0.0)
    assert "coincide" in str(err.value)


def test_example_spheres_on_plane():
    """examples/spheres_on_plane.yaml: ball 2, launched at 1 m/s without spin from
    rest on the plane, rolls at the end at v0 m d^2 / (J + m d^2) = 0.7119164
    (5/7 for d = R; d = R minus the static sink (m g / k)^(2/3) = 2.9e-4 m;
    observed 7e-10 relative, tolerance 1e-6: the integrator's rtol 1e-7); the
    falling ball 3 hits ball 1 (sphere_sphere force > 0); the energy balance
    T + V - W holds (observed drift 2.2e-7 J of 6.4 J; tolerance 1e-5 J)."""
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "examples" / "spheres_on_plane.yaml"
    res = mbcore.run(str(path), kernels="compiled" if compiled_available() else "numpy")
    R, k, mass = 0.05, 1e6, 0.5
    d = R - (mass * G / k) ** (2.0 / 3.0)
    J = 0.4 * mass * R ** 2
    assert res["qd/ball2.x"][-1] == pytest.approx(1.0 * mass * d ** 2 / (J + mass * d ** 2),
                                                  rel=1e-6)
    assert res["forces/ball3_on_ball1.normal_force"].max() > 10.0
    assert np.ptp(res["energy/balance"]) < 1e-5


def test_output_rows_in_blocks_equal_the_row_by_row_reference(monkeypatch):
    """rows_stacked: the outputs and energy of a block of output rows, evaluated
    in one call with the rows stacked as elements, equal the row-by-row
    evaluation (settings.output_rows block vs reference) on the example model:
    every channel within 1e-12 of its largest value (observed: bit for bit)."""
    from pathlib import Path

    import mbplugins.analyses.dynamic as dyn
    seen, orig = [], dyn._Run._row_block

    def spy(self):
        b = orig(self)
        seen.append(b is not None)
        return b
    monkeypatch.setattr(dyn._Run, "_row_block", spy)
    path = Path(__file__).resolve().parents[1] / "examples" / "spheres_on_plane.yaml"
    runs = [mbcore.run(str(path), analysis="dynamic", settings={
        "t_end": 0.4, "output_step": 0.005, "output_rows": mode}) for mode in
        ("block", "reference")]
    new, old = runs
    assert seen == [True, False]                  # the block path was taken
    assert new.channels == old.channels and len(new) == len(old) > 10
    for c in old.channels:
        got, ref = np.asarray(new[c]), np.asarray(old[c])
        scale = np.max(np.abs(ref), initial=0.0)
        assert np.max(np.abs(got - ref), initial=0.0) <= 1e-12 * scale, c
    assert np.max(np.asarray(old["forces"])) > 0.0            # contacts were active
