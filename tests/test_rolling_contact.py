"""Rolling contact types (mbplugins.rolling): a wheel (thin disc or torus) rolling
without slip on a fixed plane, and a planar disc on a fixed line.

Checked as every constraint type is: the position row's Jacobian against finite
differences, every row ``B v`` against the time derivative along trajectories
(``d/dt (B v) = B vdot - gamma``), the contact point against the lowest point of the
wheel's surface found by sampling, the compiled kernels against the NumPy reference
to 1e-12; and by the physics: the lean oscillation of an upright rolling disc
against its linearised frequency (Neimark & Fufaev (1972), Ch. II: the disc is
stable upright for ``Omega^2 > m g a A / (C (C + m a^2))``), energy conservation,
a disc rolling down a slope against the closed form, and every formulation either
reproducing the motion or refusing the velocity-level rows by name.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import mbcore
import test_spatial_constraints as T
from mbcore import Model
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.elements.rotations import A as Amat
from mbplugins.rolling.planar import PlanarRollingDisc
from mbplugins.rolling.spatial import RollingDisc

G0 = 9.81


# ------------------------------------------------------------------ spatial groups
def _disc_group(seed, ne=4):
    """Random wheels: thin discs and tori, centres off the body origin, planes of
    random normal."""
    rng = np.random.default_rng(seed)
    ct = RollingDisc()
    pars = []
    for e in range(ne):
        k = T.rand_unit(rng)
        spec = {"body": "b1", "radius": float(rng.uniform(0.3, 1.0)),
                "axis": tuple(T.rand_unit(rng)),
                "tube_radius": 0.0 if e % 2 == 0 else float(rng.uniform(0.02, 0.2)),
                "center": tuple(0.3 * rng.normal(size=3)),
                "plane_point": tuple(rng.normal(size=3)), "plane_normal": tuple(k)}
        pars.append(ct.pack(spec, None)[0])
    par = np.array(pars)
    ground = np.zeros((ne, 1), dtype=bool)
    return ct, par, ground, rng


def _rows_v(ct, par, q, v):
    return np.einsum("embc,ebc->em", ct.jacobian_v(par, q, 0.0, None), v)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spatial_position_row_jacobian_finite_differences(seed):
    ct, par, ground, rng = _disc_group(seed)
    q = T.Trajectory(rng, ground).state(0.3)[0]
    v = rng.normal(size=(len(par), 1, 6))
    Jv = _rows_v(ct, par, q, v)
    fd = T.d1(lambda s: ct.phi(par, T.displace(q, v, s, ground), 0.0, None), 2e-4)
    # 4th-order differences, h = 2e-4: truncation ~ h^4 |Phi^(5)| / 30 (observed
    # 2e-11 relative); the velocity rows have phi = 0
    assert T.relerr(fd[:, 0], Jv[:, 0]) < 1e-8
    assert np.all(fd[:, 1:] == 0.0)


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_spatial_gamma_is_minus_bdot_v_along_trajectories(seed):
    """Every row: ``d/dt (B(q) v) = B vdot - gamma#`` along smooth trajectories
    with arbitrary (constraint-violating) velocities; the Euler-parameter form too."""
    ct, par, ground, rng = _disc_group(seed)
    tr = T.Trajectory(rng, ground)
    t0 = 0.35
    q, qd, qdd, v, vd = tr.state(t0)
    rhs = np.einsum("embc,ebc->em", ct.jacobian_v(par, q, t0, None), vd) \
        - ct.gamma_v(par, q, v, t0, None)

    def bv(h):
        qs, _, _, vs, _ = tr.state(t0 + h)
        return _rows_v(ct, par, qs, vs)
    # 4th-order differences (h = 1e-4): observed 3e-11 relative
    assert T.relerr(T.d1(bv, 1e-4), rhs) < 1e-7
    rhs_q = np.einsum("embc,ebc->em", ct.jacobian(par, q, t0, None), qdd) \
        - ct.gamma(par, q, qd, t0, None)
    assert T.relerr(T.d1(bv, 1e-4), rhs_q) < 1e-7
    # the velocity rows: B v is E . v_c, not a derivative of phi — the no-slip rows
    # are genuinely velocity level (B v differs from d phi/dt)
    assert np.abs(bv(0.0)[:, 1:]).min() > 1e-3


def test_the_checks_can_fail():
    """A wrong sign in the lateral row's quadratic term or in the torus offset is
    caught by the checks above."""
    class BadGamma(RollingDisc):
        def gamma_v(self, par, qb, vb, t, f):
            g = super().gamma_v(par, qb, vb, t, f)
            g[:, 2] *= -1.0
            return g
    ct, par, ground, rng = _disc_group(4)
    tr = T.Trajectory(rng, ground)
    q, qd, qdd, v, vd = tr.state(0.35)
    bad = BadGamma()
    rhs = np.einsum("embc,ebc->em", bad.jacobian_v(par, q, 0.35, None), vd) \
        - bad.gamma_v(par, q, v, 0.35, None)
    fd = T.d1(lambda h: _rows_v(bad, par, tr.state(0.35 + h)[0], tr.state(0.35 + h)[3]), 1e-4)
    assert T.relerr(fd, rhs) > 1e-3


@pytest.mark.parametrize("seed", [7, 8])
def test_contact_point_is_the_lowest_point_of_the_wheel(seed):
    """Phi (the height of the contact point above the plane) equals the minimum over
    the wheel's surface of the height, found by sampling the rim (thin disc) and the
    torus' tube; the contact point lies on the rim and its frame is orthonormal."""
    ct, par, ground, rng = _disc_group(seed)
    q = T.Trajectory(rng, ground).state(0.2)[0]
    phi = ct.phi(par, q, 0.0, None)[:, 0]
    cpt, (k, el, et) = ct.contact_point(par, q)
    A = Amat(q[:, 0, 3:7])
    th = np.linspace(0, 2 * np.pi, 20001)
    for e in range(len(par)):
        s, a = A[e] @ par[e, 0:3], A[e] @ par[e, 3:6]
        R, rho, kk, h = par[e, 6], par[e, 7], par[e, 8:11], par[e, 11]
        w = q[e, 0, 0:3] + s
        b1 = np.cross(a, rng.normal(size=3))
        b1 /= np.linalg.norm(b1)
        b2 = np.cross(a, b1)
        rim = w + R * (np.outer(np.cos(th), b1) + np.outer(np.sin(th), b2))
        heights = rim @ kk - rho - h
        # sampling step 2 pi / 20000: the minimum found is within R (pi/2e4)^2 / 2
        assert heights.min() - phi[e] == pytest.approx(0.0, abs=R * 2e-8 + 1e-14)
        # no sampled point lies below the contact point: observed min - phi >= 0;
        # bound -1e-12, 1000x the rounding of a height (~1e-15 at these sizes)
        assert heights.min() >= phi[e] - 1e-12
        # the contact point: on the rim (thin disc) or the rim pushed by rho along -k
        c_rim = cpt[e] + rho * kk
        # observed 8.9e-16 and 1.3e-15; bound 1e-12 (>= 750x)
        assert abs(np.linalg.norm(c_rim - w) - R) < 1e-12
        assert abs(np.dot(c_rim - w, a)) < 1e-12
        F = np.stack([k[e], el[e], et[e]])
        # observed 2.2e-16; bound 1e-13 (450x)
        np.testing.assert_allclose(F @ F.T, np.eye(3), atol=1e-13)


def test_a_flat_disc_is_named():
    ct, par, ground, rng = _disc_group(9, ne=2)
    q = np.zeros((2, 1, 7))
    q[:, 0, 3] = 1.0
    par[1, 3:6] = par[1, 8:11]            # axis along the plane's normal
    with pytest.raises(ElementEvaluationError) as err:
        ct.phi(par, q, 0.0, None)
    assert err.value.index == 1 and "lies flat" in str(err.value)


# ------------------------------------------------------------------ planar
def _pdisc_group(seed, ne=3):
    rng = np.random.default_rng(seed)
    ct = PlanarRollingDisc()
    pars = [ct.pack({"body": "b", "radius": float(rng.uniform(0.2, 1.0)),
                     "center": tuple(0.3 * rng.normal(size=2)),
                     "line_point": tuple(rng.normal(size=2)),
                     "line_direction": tuple(rng.normal(size=2))}, None)[0]
            for _ in range(ne)]
    return ct, np.array(pars), rng


def _ptraj(rng, ne):
    c = rng.normal(size=(3, ne, 3))
    w = rng.uniform(0.5, 2.0, size=(ne, 3))

    def at(t):
        q = c[0] + c[1] * np.sin(w * t) + 0.3 * c[2] * t
        qd = c[1] * w * np.cos(w * t) + 0.3 * c[2]
        qdd = -c[1] * w * w * np.sin(w * t)
        return q[:, None], qd[:, None], qdd[:, None]
    return at


@pytest.mark.parametrize("seed", [1, 2])
def test_planar_rows_along_trajectories(seed):
    ct, par, rng = _pdisc_group(seed)
    at = _ptraj(rng, len(par))
    t0 = 0.4
    q, qd, qdd = at(t0)

    def bv(h):
        qs, qds, _ = at(t0 + h)
        return np.einsum("embc,ebc->em", ct.jacobian(par, qs, 0.0, None), qds)
    J = ct.jacobian(par, q, 0.0, None)
    # the position row: d phi / dt = B v (observed 1e-12)
    fd = T.d1(lambda h: ct.phi(par, at(t0 + h)[0], 0.0, None), 1e-4)
    assert T.relerr(fd[:, 0], bv(0.0)[:, 0]) < 1e-8
    # every row: d/dt (B v) = B vdot - gamma (observed 1e-11)
    rhs = np.einsum("embc,ebc->em", J, qdd) - ct.gamma(par, q, qd, 0.0, None)
    assert T.relerr(T.d1(bv, 1e-4), rhs) < 1e-7


# ------------------------------------------------------------------ compiled = NumPy
def _spatial_model(seed):
    rng = np.random.default_rng(seed)
    m = Model("wheels")
    m.set_dimensions(3)
    for e in range(4):
        m.add_body(f"w{e}", inertia=[1, 2, 3], position=list(rng.normal(size=3)),
                   orientation={"axis": list(rng.normal(size=3)), "angle": 1.0 + e,
                                "unit": "rad"})
        m.add_joint("rolling_disc", f"c{e}", body=f"w{e}", radius=0.5 + 0.1 * e,
                    axis=list(T.rand_unit(rng)), tube_radius=0.05 * (e % 2),
                    center=list(0.2 * rng.normal(size=3)),
                    plane_point=list(rng.normal(size=3)),
                    plane_normal=list(T.rand_unit(rng)))
    return m


def _planar_model(seed):
    rng = np.random.default_rng(seed)
    m = Model("discs")
    for e in range(3):
        m.add_body(f"d{e}", position=list(rng.normal(size=2)), angle=float(e))
        m.add_joint("rolling_disc", f"c{e}", body=f"d{e}", radius=0.5 + 0.1 * e,
                    center=list(0.2 * rng.normal(size=2)),
                    line_point=list(rng.normal(size=2)),
                    line_direction=list(rng.normal(size=2)))
    return m


def _random_state(s, rng):
    q = rng.normal(size=s.n)
    qd = rng.normal(size=s.n)
    for o in s.p_index.reshape(-1, 4) if s.n % 7 == 0 else ():
        q[o] /= np.linalg.norm(q[o])
    return q, qd


@pytest.mark.parametrize("build", [_spatial_model, _planar_model])
@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
def test_compiled_kernels_equal_numpy(build, jacobian):
    """Both kernels reach the core through the compiled plugin tier (no Python
    group) and agree with the NumPy reference to 1e-12 (observed 4e-16)."""
    model = build(11)
    a = model.compile(kernels="compiled", jacobian=jacobian)
    b = model.compile(kernels="numpy", jacobian=jacobian)
    assert not a._py_groups and all(g.compiled for g in a.groups)
    rng = np.random.default_rng(5)
    for _ in range(4):
        q, qd = _random_state(a, rng)
        for x, y in ((a.phi(q, 0.3), b.phi(q, 0.3)),
                     (a.jacobian_dense(q, 0.3), b.jacobian_dense(q, 0.3)),
                     (a.nu(q, 0.3), b.nu(q, 0.3)),
                     (a.gamma(q, qd, 0.3), b.gamma(q, qd, 0.3))):
            assert np.abs(x - y).max() <= 1e-12 * max(1.0, np.abs(y).max())
    assert a.holonomic.tolist() == b.holonomic.tolist()
    # one position row per wheel (plus, spatial, each body's Euler-parameter norm)
    assert a.holonomic.sum() == (4 + 4 if build is _spatial_model else 3)


def test_compiled_kernel_names_the_flat_disc():
    m = Model("flat")
    m.set_dimensions(3)
    m.add_body("w", position=[0, 0, 0.5])
    m.add_joint("rolling_disc", "c", body="w", radius=0.5, axis=[0, 0, 1])
    with pytest.raises(mbcore.MbcoreError, match="lies flat"):
        mbcore.run(m, analysis="dynamic", settings={"t_end": 0.1, "output_step": 0.1})


# ------------------------------------------------------------------ physics
R_DISC, M_DISC = 0.5, 1.0
A_DIAM, C_AXIAL = M_DISC * R_DISC ** 2 / 4, M_DISC * R_DISC ** 2 / 2


def _rolling_coin(spin, lean=1e-3):
    """A uniform thin disc rolling upright along x at spin ``Omega`` (v = Omega R),
    leaned by ``lean`` about the rolling direction, contact point at the origin."""
    m = Model("rolling coin")
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -G0)
    s, c = math.sin(lean), math.cos(lean)
    m.add_body("disc", mass=M_DISC, inertia=[A_DIAM, C_AXIAL, A_DIAM],
               position=[0.0, -R_DISC * s, R_DISC * c],
               orientation={"axis": [1, 0, 0], "angle": lean, "unit": "rad"},
               velocity=[spin * R_DISC, 0.0, 0.0],
               angular_velocity=[0.0, spin * c, spin * s])
    m.add_joint("rolling_disc", "wheel", body="disc", radius=R_DISC, axis=[0, 1, 0])
    return m


def _lean(res):
    p = np.stack([np.asarray(res[f"q/disc.p{i}"]) for i in range(4)], 1)
    return np.asarray(res.t), Amat(p)[:, 2, 1]          # sin(lean) = a . z


def _period(t, x):
    x = x - x.mean()
    i = np.flatnonzero(np.sign(x[:-1]) != np.sign(x[1:]))
    tc = t[i] - x[i] * (t[i + 1] - t[i]) / (x[i + 1] - x[i])
    return 2.0 * (tc[-1] - tc[0]) / (len(tc) - 1)


SETTINGS = {"t_end": 3.0, "output_step": 0.002, "rtol": 1e-10, "atol": 1e-12}


def test_upright_disc_lean_oscillates_at_the_linearised_frequency():
    """Above the critical spin, a small lean oscillates with
    ``f^2 = (C (C + m a^2) Omega^2 / A - m g a) / (A + m a^2)``: the period within
    1e-5 relative (observed 1.8e-7: the lean's amplitude 1e-3 makes the nonlinear
    correction O(1e-6)); energy is conserved (observed 2e-11 relative) and the
    contact point does not slip (observed 1e-12 m/s)."""
    spin = 8.0
    res = mbcore.run(_rolling_coin(spin), analysis="dynamic", settings=SETTINGS)
    assert res.stats["loop"] == "compiled"
    t, lean = _lean(res)
    f2 = ((C_AXIAL + M_DISC * R_DISC ** 2) * C_AXIAL * spin ** 2 / A_DIAM
          - M_DISC * G0 * R_DISC) / (A_DIAM + M_DISC * R_DISC ** 2)
    assert _period(t, lean) == pytest.approx(2 * math.pi / math.sqrt(f2), rel=1e-5)
    assert np.abs(lean).max() < 2e-3
    e = np.asarray(res["energy/total"])
    assert np.abs(e - e[0]).max() < 1e-8 * abs(e[0])


def test_below_the_critical_spin_the_disc_falls():
    """``Omega^2 < g / (3 a)`` for the thin disc: the lean grows from 1e-3."""
    crit = math.sqrt(G0 / (3 * R_DISC))
    res = mbcore.run(_rolling_coin(0.8 * crit), analysis="dynamic",
                     settings=dict(SETTINGS, t_end=1.5))
    t, lean = _lean(res)
    assert np.abs(lean[-1]) > 20 * 1e-3
    res = mbcore.run(_rolling_coin(1.25 * crit), analysis="dynamic",
                     settings=dict(SETTINGS, t_end=1.5))
    t, lean = _lean(res)
    assert np.abs(lean).max() < 5e-3


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "penalty", "di_omega",
                                         "joint_coordinates"])
def test_formulations_that_take_velocity_rows_agree(formulation):
    """Every formulation that accepts velocity-level rows gives the same motion as
    cs (final state within 1e-7 at rtol 1e-10; observed 1e-10)."""
    st = dict(SETTINGS, t_end=1.0, output_step=0.1)
    ref = mbcore.run(_rolling_coin(8.0), analysis="dynamic", settings=st)
    res = mbcore.run(_rolling_coin(8.0), analysis="dynamic",
                     settings=dict(st, formulation=formulation))
    for lab in ("x", "y", "z", "p0", "p1", "p2", "p3"):
        assert abs(res[f"q/disc.{lab}"][-1] - ref[f"q/disc.{lab}"][-1]) < 1e-7, lab


@pytest.mark.parametrize("formulation", ["cp", "ggl", "stiff"])
def test_formulations_that_need_position_rows_name_them(formulation):
    st = dict(SETTINGS, t_end=0.1, output_step=0.1, rtol=1e-6, atol=1e-8,
              formulation=formulation)
    if formulation != "cp":
        st["integrator"] = "bdf"
    with pytest.raises(ModelError, match=r"wheel\.longitudinal, wheel\.lateral"):
        mbcore.run(_rolling_coin(8.0), analysis="dynamic", settings=st)


def test_contact_forces_are_reported():
    """The normal force of a disc rolling straight carries its weight; the
    longitudinal and lateral forces vanish (observed 1e-13 N)."""
    res = mbcore.run(_rolling_coin(8.0, lean=0.0), analysis="dynamic",
                     settings=dict(SETTINGS, t_end=0.5, output_step=0.1))
    assert res["reactions_local/wheel.normal"][-1] == pytest.approx(M_DISC * G0, rel=1e-9)
    assert abs(res["reactions_local/wheel.longitudinal"][-1]) < 1e-9
    assert abs(res["reactions_local/wheel.lateral"][-1]) < 1e-9


@pytest.mark.parametrize("slope_deg", [0.0, 20.0])
def test_planar_disc_rolls_down_a_slope(slope_deg):
    """A uniform disc on a line inclined by beta: ``s'' = g sin(beta) m / (m + J/R^2)``
    along the line; the friction force ``m g sin(beta) J / (J + m R^2)`` (observed
    1e-14 relative); both compiled and NumPy kernels."""
    b = math.radians(slope_deg)
    R, mass = 0.3, 2.0
    J = 0.5 * mass * R * R
    tl = np.array([math.cos(b), -math.sin(b)])
    n = np.array([-tl[1], tl[0]])
    m = Model("disc on a slope")
    m.set_gravity(0.0, -G0)
    m.add_body("disc", mass=mass, inertia=J, position=list(R * n),
               velocity=list(0.4 * tl), angular_velocity=-0.4 / R)
    m.add_joint("rolling_disc", "contact", body="disc", radius=R, line_direction=list(tl))
    acc = G0 * math.sin(b) * mass / (mass + J / R ** 2)
    for kernels in ("compiled", "numpy"):
        res = mbcore.run(m, analysis="dynamic", kernels=kernels,
                         settings={"t_end": 1.0, "output_step": 0.1, "rtol": 1e-10,
                                   "atol": 1e-12})
        t = np.asarray(res.t)
        x = np.stack([res["q/disc.x"], res["q/disc.y"]], 1) @ tl
        np.testing.assert_allclose(x, 0.4 * t + 0.5 * acc * t * t, atol=1e-8)
        assert res["reactions_local/contact.tangential"][-1] == pytest.approx(
            -mass * G0 * math.sin(b) * J / (J + mass * R * R), abs=1e-9)
        assert res["reactions_local/contact.normal"][-1] == pytest.approx(
            mass * G0 * math.cos(b), rel=1e-9)
