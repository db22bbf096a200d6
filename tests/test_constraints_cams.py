"""Curve pairs with an artificial coordinate theta (spec/planar.md C10-C13):
``cam_point``, ``cam_roller``, ``cam_flat``, ``slot`` and the curves they use
(:mod:`mbplugins.planar.curves`), on both backends.

* Jacobian (body blocks and the theta column) against 4th-order central differences
  of phi (relative <= 1e-7); nu = -Phi_t (= 0); gamma against the second time
  derivative of Phi(q(t)) along a random smooth trajectory including theta(t)
  (relative <= 1e-6); compiled kernels == NumPy reference (1e-12);
* curve derivatives (to 3rd order) against finite differences; spec §6.3 Example
  4.3 / 4.3a numbers; Table 4.1 as a periodic outline;
* mechanisms through ``mbcore.run`` against closed forms and equivalent models
  without theta (spec C14): eccentric circular cam + translating roller follower,
  flat-faced follower, pin in a circular slot, the Table 4.1 cam turning a full
  revolution with a point follower; one dynamic run (contact force normal to the
  curve, energy balance);
* validation errors name the key path.

Closed forms are differentiated numerically (no library formula in the reference).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbcore import Model, ModelError, run
from mbcore.system import compiled_available
from mbplugins.planar.curves import CURVE_SIZE, parse_curve

CAM_TYPES = {"cam_point", "cam_roller", "cam_flat", "slot"}
GEOM = 4
H = 1e-3

# Table 4.1 (004 line 4876; spec §6.3): cam outline, theta in degrees, s in cm
TABLE_41_DEG = [0, 30, 60, 70, 80, 90, 100, 110, 120, 150, 180, 225, 270, 315, 360]
TABLE_41_S = [3.70, 4.55, 6.80, 8.38, 10.65, 12.46, 11.10, 8.65, 7.04, 4.63, 3.80, 3.62,
              3.80, 3.62, 3.70]

SERIES = {"polar_series": {"polynomial": [1.0, 0.1, -0.02], "cosine": [0.1, 0.05],
                           "sine": [0.0, -0.04, 0.01]}, "center": [0.1, -0.2]}
TABLE = {"polar": {"theta": TABLE_41_DEG, "s": [x / 4.0 for x in TABLE_41_S],
                   "degrees": True}, "center": [0.05, 0.1]}
ARC = {"polar": {"theta": [-1.0, -0.3, 0.2, 0.9, 1.5], "s": [2.0, 2.1, 2.05, 1.9, 2.0],
                 "bc": "natural"}, "center": [0.3, 0.1]}
XY = {"xy": {"theta": [0, 1, 2, 3, 4], "x": [0, 1, 2.2, 2.9, 4.1],
             "y": [0, 0.5, 0.3, -0.2, 0.1]}}
CIRCLE = {"radius": 0.7, "center": [0.2, 0.0]}


def catalogue_model() -> Model:
    """Every curve pair twice (groups with ne > 1), ground on either side, every
    curve shape (series, periodic and open polar tables, xy table, circle)."""
    rng = np.random.default_rng(7)
    m = Model("cams")
    for k in range(4):
        m.add_body(f"b{k}", position=rng.normal(size=2), angle=rng.normal())
    m.add_joint("cam_point", "cp1", body_i="b0", body_j="b1", curve=SERIES, point_j=(0.2, 0.3),
                theta=0.4)
    m.add_joint("cam_point", "cp2", body_i="ground", body_j="b2", curve=TABLE, theta=-2.5)
    m.add_joint("cam_roller", "cr1", body_i="b1", body_j="b3", curve=TABLE, radius=0.3,
                point_j=(0.1, 0.2), theta=1.0)
    m.add_joint("cam_roller", "cr2", body_i="b2", body_j="ground", curve=SERIES, radius=0.5,
                theta=7.0)
    m.add_joint("cam_flat", "cf1", body_i="b3", body_j="b0", curve=ARC, normal=(0.3, 1.0),
                point_j=(0.5, 0.1), theta=0.3)
    m.add_joint("cam_flat", "cf2", body_i="b0", body_j="b2", curve=CIRCLE, normal=(0, -1),
                theta=2.0)
    m.add_joint("slot", "s1", body_i="b1", body_j="b2", curve=XY, point_i=(0.3, -0.1),
                theta=1.5)
    m.add_joint("slot", "s2", body_i="b3", body_j="ground", curve=ARC, theta=0.5)
    return m


@pytest.fixture(scope="module")
def model():
    return catalogue_model()


def _rel(a, b, *scales):
    """max |a - b| per row relative to the row's largest magnitude."""
    a, b = np.atleast_2d(a), np.atleast_2d(b)
    mags = [np.abs(np.atleast_2d(x)).max(axis=1) for x in (a, b, *scales)]
    return np.abs(a - b).max(axis=1) / np.maximum(np.max(mags, axis=0), 1e-300)


def _spline_knots(sysm):
    """(index of theta in q, breaks, period) of every element on a spline curve."""
    out = []
    for g in sysm.groups:
        for e in range(g.ne):
            b = g.par[e, GEOM:]
            if b[0] != 0:
                n = int(b[1])
                out.append((int(g.xoff[e, 0]), b[5:5 + n + 1].copy(), float(b[2])))
    return out


def _knot_distance(th, breaks, per):
    d = th - breaks
    if per > 0:
        d = (d + 0.5 * per) % per - 0.5 * per
    return float(np.min(np.abs(d)))


def _away_from_knots(sysm, q, margin=10 * H):
    """Move spline-curve thetas off the knots (finite differences need C3)."""
    q = q.copy()
    for k, br, per in _spline_knots(sysm):
        while _knot_distance(q[k], br, per) < margin:
            q[k] += 2.5 * margin
    return q


def test_every_curve_pair_is_exercised_and_compiled(model, backend):
    sysm = model.compile(kernels=backend)
    assert {g.ctype.name for g in sysm.groups} == CAM_TYPES
    assert all(g.ne == 2 and g.nx == 1 for g in sysm.groups)
    assert sysm.n == 12 + 8 and sysm.m == 16
    assert sysm.coordinate_names[12:] == [f"{e}.theta" for e in
                                          ("cp1", "cp2", "cr1", "cr2", "cf1", "cf2", "s1", "s2")]
    if backend == "compiled":
        assert all(g.compiled for g in sysm.groups)
        from mbcore._ext import _planar
        from mbplugins._ext import _planar_constraints as pc
        assert pc.CURVE_BLOCK == CURVE_SIZE
        for g in sysm.groups:        # direct-layout kernels with one artificial coordinate
            info = _planar.constraint_kernel_info(g.ckernel.capsule)
            assert (info["n_par"], info["n_fun"], info["n_extra"], info["direct"]) == (
                GEOM + CURVE_SIZE, 0, 1, True), g.ctype.name
    q0 = sysm.initial_state().q
    assert q0[12:].tolist() == [0.4, -2.5, 1.0, 7.0, 0.3, 2.0, 1.5, 0.5]   # given thetas


def test_jacobian_matches_finite_differences(model, backend):
    sysm = model.compile(kernels=backend)
    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(4):
        q = _away_from_knots(sysm, rng.normal(scale=1.5, size=sysm.n))
        J = sysm.jacobian_dense(q, 0.3)
        Jfd = np.empty_like(J)
        for k in range(sysm.n):
            e = np.zeros(sysm.n)
            e[k] = H
            f = [sysm.phi(q + c * e, 0.3).copy() for c in (-2, -1, 1, 2)]
            Jfd[:, k] = (f[0] - 8 * f[1] + 8 * f[2] - f[3]) / (12 * H)
        err = _rel(J, Jfd)
        worst = max(worst, err.max())
        bad = np.nonzero(err > 1e-7)[0]
        assert not len(bad), [sysm.constraint_names[r] for r in bad]
        # the theta column is non-zero in (and only in) the element's own rows
        for g in sysm.groups:
            for e, name in enumerate(g.names):
                col = J[:, g.xoff[e, 0]]
                rows = sysm.element_rows[name]
                assert np.abs(col[rows]).max() > 0
                assert not np.any(np.delete(col, np.arange(rows.start, rows.stop)))
    assert worst < 1e-7


def test_nu_is_zero_and_minus_phi_t(model, backend):
    sysm = model.compile(kernels=backend)
    q = np.random.default_rng(2).normal(size=sysm.n)
    assert not np.any(sysm.nu(q, 0.7))
    assert np.array_equal(sysm.phi(q, 0.7), sysm.phi(q, 1.9))


def _trajectory(n, rng):
    a, b, c, w = (rng.normal(size=n) for _ in range(4))
    return (lambda t: a + b * t + 0.5 * c * t ** 2 + 0.3 * np.sin(w * t),
            lambda t: b + c * t + 0.3 * w * np.cos(w * t),
            lambda t: c - 0.3 * w ** 2 * np.sin(w * t))


def test_gamma_is_second_time_derivative_along_trajectory(model, backend):
    sysm = model.compile(kernels=backend)
    q, qd, qdd = _trajectory(sysm.n, np.random.default_rng(3))
    knots = _spline_knots(sysm)
    checked = 0
    for t in np.linspace(0.1, 2.0, 40):
        q0, qa, qb = q(t), q(t - 3 * H), q(t + 3 * H)
        if any(_knot_distance(q0[k], br, per)
               < max(abs(qa[k] - q0[k]), abs(qb[k] - q0[k])) + 1e-4
               for k, br, per in knots):
            continue            # a knot (jump of the 3rd derivative) inside the stencil
        # 4th-order differences: truncation h^4 |Phi^(5,6)| and rounding ~5 eps |Phi| / h^2
        # (eps |Phi| / h) balance near h = H for the second derivative (observed 6.5e-8
        # relative) and h = H / 4 for the first (1.1e-10)
        P = [sysm.phi(q(t + c * H), t + c * H).copy() for c in (-2, -1, 0, 1, 2)]
        d2phi = (-P[0] + 16 * P[1] - 30 * P[2] + 16 * P[3] - P[4]) / (12 * H * H)
        h1 = H / 4
        P1 = [sysm.phi(q(t + c * h1), t + c * h1).copy() for c in (-2, -1, 0, 1, 2)]
        dphi = (P1[0] - 8 * P1[1] + 8 * P1[3] - P1[4]) / (12 * h1)
        J = sysm.jacobian_dense(q(t), t)
        gamma = sysm.gamma(q(t), qd(t), t).copy()
        lhs = J @ qdd(t) - gamma
        err = _rel(lhs[:, None], d2phi[:, None], (J @ qdd(t))[:, None], gamma[:, None])
        bad = np.nonzero(err > 1e-5)[0]
        assert not len(bad), [(sysm.constraint_names[r], err[r]) for r in bad]
        vel = J @ qd(t) - sysm.nu(q(t), t)
        assert _rel(vel[:, None], dphi[:, None], (J @ qd(t))[:, None]).max() < 1e-7
        checked += 1
    assert checked >= 5


@pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")
def test_compiled_equals_numpy_reference(model):
    a = model.compile(kernels="compiled")
    b = model.compile(kernels="numpy")
    rng = np.random.default_rng(4)
    states = [(rng.normal(scale=3, size=a.n), rng.normal(scale=3, size=a.n))
              for _ in range(20)]
    big = rng.normal(size=a.n)
    big[2:12:3] = rng.uniform(-60, 60, size=4)       # accumulated angles
    big[12:] = rng.uniform(-80, 80, size=8)           # many turns / far outside tables
    states += [(big, rng.normal(scale=5, size=a.n)), (np.zeros(a.n), np.zeros(a.n))]
    for q, qd in states:
        for name, fa, fb in (
                ("phi", a.phi(q, 0.0), b.phi(q, 0.0)),
                ("jacobian", a.jacobian_dense(q, 0.0), b.jacobian_dense(q, 0.0)),
                ("nu", a.nu(q, 0.0), b.nu(q, 0.0)),
                ("gamma", a.gamma(q, qd, 0.0), b.gamma(q, qd, 0.0))):
            np.testing.assert_allclose(fa, fb, rtol=1e-12, atol=1e-12, err_msg=name)


def test_sparsity(model, backend):
    """Blocks only in the columns of the element's bodies and of its own theta."""
    sysm = model.compile(kernels=backend)
    J = sysm.jacobian_dense(np.random.default_rng(5).normal(size=sysm.n), 0.5)
    for g in sysm.groups:
        for e, name in enumerate(g.names):
            cols = {int(o) + c for o in g.boff[e] if o < sysm.n for c in range(3)}
            cols.add(int(g.xoff[e, 0]))
            other = [k for k in range(sysm.n) if k not in cols]
            assert np.all(J[sysm.element_rows[name]][:, other] == 0.0), name


# ---------------------------------------------------------------------------------
# curves
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [SERIES, TABLE, ARC, XY, CIRCLE], ids=lambda s: next(iter(s)))
def test_curve_derivatives_match_finite_differences(spec):
    curve = parse_curve(spec, "curve")
    knots = curve.block[5:5 + int(curve.block[1]) + 1] if curve.block[0] else np.zeros(0)
    per = float(curve.block[2]) if curve.block[0] else 0.0
    h = 1e-4
    for th in np.linspace(-3.0, 9.0, 61):
        if len(knots) and _knot_distance(th, knots, per) < 5 * h:
            continue
        jets = [curve([th + c * h]) for c in (-2, -1, 1, 2)]
        for k in range(3):
            fd = (jets[0][k] - 8 * jets[1][k] + 8 * jets[2][k] - jets[3][k]) / (12 * h)
            ref = curve([th])[k + 1]
            assert np.abs(fd - ref).max() <= 1e-7 * max(1.0, np.abs(ref).max()), (th, k)


def test_example_4_3_spline():
    """004 Example 4.3 / 4.3a (spec §6.3).  The book's pieces are a C2 cubic spline
    through the 4 points but none of the usual end conditions gives them: they
    follow from the book's own end values s''(0.2) = -1.3856 and s''(0.5) = -7.153
    (computed from its printed pieces; the data are "a portion" of a longer table).
    With those end conditions the pieces and every printed number are reproduced;
    natural and not-a-knot end conditions are not (s'(0.26) = -1.807 / -1.849)."""
    data = {"theta": [0.2, 0.3, 0.4, 0.5], "s": [3.75, 3.57, 3.35, 3.10]}
    curve = parse_curve({"polar": {**data, "bc": [[2, -1.3856], [2, -7.153]]}}, "c")
    b = curve.block
    book = [[-6.538, 3.230, -2.173, 4.108], [6.538, -8.538, 1.358, 3.755],
            [-9.615, 10.846, -6.396, 4.788]]
    for i in range(3):   # piece i in powers of theta (the book's form)
        x0, local = b[5 + i], b[5 + 4 + 4 * i:5 + 4 + 4 * i + 4]
        glob = np.poly1d(local)(np.poly1d([1.0, -x0])).c
        np.testing.assert_allclose(glob, book[i], atol=0.025)
    s = [float(v[0]) for v in curve.s(0.3)]
    np.testing.assert_allclose(s[:3], [3.57, -2.000, -5.308], atol=1.5e-3)
    s = [float(v[0]) for v in curve.s(0.26)]
    np.testing.assert_allclose(s[:3], [3.646, -1.819, -3.739], atol=1.5e-3)
    c, g, _, _ = (v[0] for v in curve([0.26]))
    np.testing.assert_allclose([*c, *g], [3.523, 0.937, -2.695, 3.056], atol=1.5e-3)
    for bc, sd in (("natural", -1.807), ("not-a-knot", -1.849)):
        other = parse_curve({"polar": {**data, "bc": bc}}, "c")
        assert float(other.s(0.26)[1][0]) == pytest.approx(sd, abs=1e-3)


def test_table_4_1_periodic_outline():
    curve = parse_curve({"polar": {"theta": TABLE_41_DEG, "s": TABLE_41_S, "degrees": True}},
                        "c")
    assert curve.periodic and curve.block[2] == pytest.approx(2 * math.pi)
    th = np.radians(TABLE_41_DEG)
    np.testing.assert_allclose(curve.s(th)[0], TABLE_41_S, atol=1e-12)   # interpolates
    # C2 across the closing point, and whole turns repeat
    for k in range(3):
        assert curve.s(1e-9)[k][0] == pytest.approx(curve.s(2 * math.pi - 1e-9)[k][0],
                                                     abs=1e-6)
    x = np.linspace(-7.0, 7.0, 29)
    for k in range(4):
        np.testing.assert_allclose(curve(x + 2 * math.pi)[k], curve(x)[k], atol=1e-11)
        np.testing.assert_allclose(curve(x - 6 * math.pi)[k], curve(x)[k], atol=1e-10)
    from scipy.interpolate import CubicSpline
    ref = CubicSpline(th, TABLE_41_S, bc_type="periodic")
    for k in range(4):
        np.testing.assert_allclose(curve.s(x)[k], ref(x % (2 * math.pi), k), atol=1e-9)


def test_curve_block_layout():
    assert parse_curve(CIRCLE, "c").block.shape == (CURVE_SIZE,)
    assert parse_curve(CIRCLE, "c") == parse_curve(dict(CIRCLE), "d")
    assert parse_curve(CIRCLE, "c") != parse_curve({"radius": 0.7}, "c")
    c = parse_curve({"radius": 2.0}, "c")
    assert c.periodic and c.domain() == (-math.pi, math.pi)
    np.testing.assert_allclose(c([0.3])[0][0], 2.0 * np.array([math.cos(0.3), math.sin(0.3)]))
    assert not parse_curve(ARC, "c").periodic
    assert parse_curve(ARC, "c").domain() == (-1.0, 1.5)


def test_default_theta_is_the_nearest_curve_point(backend):
    """Without ``theta`` the estimate is the curve point nearest the follower (point,
    roller, pin) or the extreme point towards the face (flat) in the initial
    configuration."""
    m = Model("init")
    m.add_body("cam", position=(0.2, -0.1), angle=0.4)
    m.add_body("f", position=(0.5, 3.0), angle=0.3)
    curve = parse_curve(TABLE, "c")
    th = 1.1                      # put the follower points exactly at theta = 1.1
    A = np.array([[math.cos(0.4), -math.sin(0.4)], [math.sin(0.4), math.cos(0.4)]])
    c, g, _, _ = (v[0] for v in curve([th]))
    P = np.array([0.2, -0.1]) + A @ c
    N = A @ np.array([g[1], -g[0]]) / np.hypot(*g)           # outward normal
    Af = np.array([[math.cos(0.3), -math.sin(0.3)], [math.sin(0.3), math.cos(0.3)]])
    loc = lambda p: Af.T @ (p - np.array([0.5, 3.0]))        # noqa: E731
    m.add_joint("cam_point", "p", body_i="cam", body_j="f", curve=TABLE, point_j=loc(P))
    m.add_joint("cam_roller", "r", body_i="cam", body_j="f", curve=TABLE, radius=0.05,
                point_j=loc(P + 0.05 * N))
    m.add_joint("cam_flat", "fl", body_i="cam", body_j="f", curve=CIRCLE,
                normal=Af.T @ np.array([0.0, -1.0]), point_j=loc(np.array([0.0, 2.0])))
    m.add_driver("absolute_driver", "d", body="cam", coordinate="phi", function=0.4)
    m2 = Model("slot")
    m2.add_body("pin", position=P + np.array([0.3, 0.0]), angle=0.0)
    m2.add_body("cam", position=(0.2, -0.1), angle=0.4)
    m2.add_joint("slot", "s", body_i="pin", body_j="cam", curve=TABLE, point_i=(-0.3, 0.0))
    q = m.compile(kernels=backend).initial_state().q
    assert q[6] == pytest.approx(th, abs=1e-9)
    assert q[7] == pytest.approx(th, abs=1e-9)
    # the circle's top point faces the face above: theta = pi/2 - phi_cam
    assert q[8] == pytest.approx(math.pi / 2 - 0.4, abs=1e-9)
    assert m2.compile(kernels=backend).initial_state().q[6] == pytest.approx(th, abs=1e-9)


# ---------------------------------------------------------------------------------
# mechanisms through mbcore.run (kinematic analysis), closed forms
# ---------------------------------------------------------------------------------
def d1(f, t):
    return (f(t - 2 * H) - 8 * f(t - H) + 8 * f(t + H) - f(t + 2 * H)) / (12 * H)


def d2(f, t):
    return (-f(t - 2 * H) + 16 * f(t - H) - 30 * f(t) + 16 * f(t + H) - f(t + 2 * H)) / (12 * H * H)


def check_series(res, key, f, tol=1e-8, dtol=1e-7, ddtol=2e-6):
    """q, qd, qdd of coordinate ``key`` against closed-form f(t) and its derivatives."""
    t = res.t
    ref = np.array([f(x) for x in t])
    np.testing.assert_allclose(res[f"q:{key}"], ref, atol=tol * max(1.0, np.abs(ref).max()),
                               err_msg=f"q:{key}")
    v = np.array([d1(f, x) for x in t])
    np.testing.assert_allclose(res[f"qd:{key}"], v, atol=dtol * max(1.0, np.abs(v).max()),
                               err_msg=f"qd:{key}")
    a = np.array([d2(f, x) for x in t])
    np.testing.assert_allclose(res[f"qdd:{key}"], a, atol=ddtol * max(1.0, np.abs(a).max()),
                               err_msg=f"qdd:{key}")


E, RC, RR, W = 0.3, 1.0, 0.25, 2.0      # eccentricity, cam radius, roller radius, rad/s



def _cam_base(name, follower_y):
    """Cam turning about the ground origin at W, follower translating along global y."""
    m = Model(name)
    m.settings.update({"analysis": "kinematic", "t_end": 3.2, "output_step": 0.1})
    m.add_body("cam", position=(0.0, 0.0), angle=0.0)
    m.add_body("follower", position=(0.0, follower_y), angle=0.0)
    m.add_joint("revolute", "A", body_i="cam", body_j="ground", point_i=(0, 0), point_j=(0, 0))
    m.add_joint("translational", "T", body_i="ground", body_j="follower", axis=(0, 1))
    m.add_driver("absolute_driver", "drive", body="cam", coordinate="phi", function=f"{W}*t")
    return m


def test_eccentric_cam_roller_follower_closed_form_and_distance_model(backend):
    """Circular cam (radius RC, centre at e from the pivot) and a roller (RR) on a
    follower translating along the line through the pivot.  With the disc centre
    at e (cos phi, sin phi) and the roller centre at (0, y):
    (e cos phi)^2 + (y - e sin phi)^2 = (RC + RR)^2, so the lift is
    y = e sin phi + sqrt((RC + RR)^2 - (e cos phi)^2).  The same mechanism with a
    ``distance`` link between the centres (spec C14) gives the same motion."""
    lift = lambda t: E * math.sin(W * t) + math.sqrt((RC + RR) ** 2 -         # noqa: E731
                                                     (E * math.cos(W * t)) ** 2)
    m = _cam_base("roller", 1.3)
    m.add_joint("cam_roller", "roll", body_i="cam", body_j="follower", radius=RR,
                curve={"radius": RC, "center": [E, 0.0]})
    res = run(m, kernels=backend)
    assert len(res.t) == 33
    check_series(res, "follower.y", lift)
    # contact on the line of centres: theta = direction of the roller centre seen from
    # the disc centre, in cam axes
    th = res["q:roll.theta"]
    for t, x in zip(res.t, th, strict=True):
        phi = W * t
        rel = np.array([-E * math.cos(phi), lift(t) - E * math.sin(phi)])
        want = math.atan2(rel[1], rel[0]) - phi
        assert (x - want + math.pi) % (2 * math.pi) - math.pi == pytest.approx(0, abs=1e-9)
    ref = _cam_base("roller_c14", 1.3)
    ref.add_joint("distance", "link", body_i="cam", body_j="follower", point_i=(E, 0.0),
                  length=RC + RR)
    rr = run(ref, kernels=backend)
    for ch in ("q", "qd", "qdd"):
        np.testing.assert_allclose(res[f"{ch}:follower.y"], rr[f"{ch}:follower.y"],
                                   atol=1e-9, err_msg=ch)


def test_flat_faced_follower_on_circular_cam(backend):
    """Flat face (normal -y, at the follower origin) on the eccentric circle:
    lift y = e sin phi + R; the contact is the top of the disc, theta = pi/2 - phi.
    The same as the C14 model: ``revolute_translational`` keeping the disc centre
    at distance R from the face."""
    m = _cam_base("flat", 1.2)
    m.add_joint("cam_flat", "flat", body_i="cam", body_j="follower", normal=(0.0, -1.0),
                curve={"radius": RC, "center": [E, 0.0]})
    res = run(m, kernels=backend)
    check_series(res, "follower.y", lambda t: E * math.sin(W * t) + RC)
    np.testing.assert_allclose(res["q:flat.theta"], math.pi / 2 - W * res.t, atol=1e-9)
    # spec C14: the disc centre on the line offset from the face by RC towards the cam
    ref = _cam_base("flat_c14", 1.2)
    ref.add_joint("revolute_translational", "face", body_i="follower", body_j="cam",
                  point_i=(0.0, -RC), axis=(1.0, 0.0), point_j=(E, 0.0))
    rr = run(ref, kernels=backend)
    for ch in ("q", "qd", "qdd"):
        np.testing.assert_allclose(res[f"{ch}:follower.y"], rr[f"{ch}:follower.y"],
                                   atol=1e-9, err_msg=ch)


def test_pin_in_circular_slot_equals_revolute_and_link(backend):
    """A slider (pin at its origin, on the global x axis) driven by a crank with a
    circular slot of radius RS centred at C' = (a, 0) on the crank.  Equivalent: a
    massless link from the slot centre to the pin (``distance``, spec C14).  Closed
    form: C = a (cos phi, sin phi), x = C_x + sqrt(RS^2 - C_y^2)."""
    a, RS = 0.5, 1.0
    x_of = lambda t: a * math.cos(W * t) + math.sqrt(RS ** 2 - (a * math.sin(W * t)) ** 2)  # noqa

    def base(name):
        m = Model(name)
        m.settings.update({"analysis": "kinematic", "t_end": 3.2, "output_step": 0.1})
        m.add_body("crank", position=(0.0, 0.0), angle=0.0)
        m.add_body("slider", position=(1.4, 0.0), angle=0.0)
        m.add_joint("revolute", "O", body_i="crank", body_j="ground", point_i=(0, 0),
                    point_j=(0, 0))
        m.add_joint("translational", "T", body_i="ground", body_j="slider", axis=(1, 0))
        m.add_driver("absolute_driver", "drive", body="crank", coordinate="phi",
                     function=f"{W}*t")
        return m
    m = base("slot")
    m.add_joint("slot", "pin", body_i="slider", body_j="crank",
                curve={"polar_series": {"polynomial": [RS]}, "center": [a, 0.0]})
    res = run(m, kernels=backend)
    check_series(res, "slider.x", x_of)
    ref = base("link")
    ref.add_joint("distance", "link", body_i="crank", body_j="slider", point_i=(a, 0.0),
                  length=RS)
    rr = run(ref, kernels=backend)
    for ch in ("q", "qd", "qdd"):
        np.testing.assert_allclose(res[f"{ch}:slider.x"], rr[f"{ch}:slider.x"], atol=1e-9)
    # theta: direction of the pin seen from the slot centre, in crank axes
    for t, x, th in zip(res.t, res["q:slider.x"], res["q:pin.theta"], strict=True):
        C = a * np.array([math.cos(W * t), math.sin(W * t)])
        want = math.atan2(-C[1], x - C[0]) - W * t
        assert (th - want + math.pi) % (2 * math.pi) - math.pi == pytest.approx(0, abs=1e-9)


def test_table_4_1_cam_full_revolution_point_follower(backend):
    """004 Table 4.1 outline as a periodic spline, cam turning one full revolution
    about its polar centre; a point follower on the vertical line through the
    centre.  The contact is the outline point straight above the centre, theta =
    pi/2 - phi (accumulated: theta runs through a whole turn of the table), and the
    lift equals s(theta) there (the spline built independently with scipy)."""
    from scipy.interpolate import CubicSpline
    w = 2 * math.pi
    S = CubicSpline(np.radians(TABLE_41_DEG), TABLE_41_S, bc_type="periodic")
    m = Model("table41")
    m.settings.update({"analysis": "kinematic", "t_end": 1.0, "output_step": 0.01})
    m.add_body("cam", position=(0.0, 0.0), angle=0.0)
    m.add_body("follower", position=(0.0, 12.0), angle=0.0)
    m.add_joint("revolute", "A", body_i="cam", body_j="ground", point_i=(0, 0), point_j=(0, 0))
    m.add_joint("translational", "T", body_i="ground", body_j="follower", axis=(0, 1))
    m.add_joint("cam_point", "contact", body_i="cam", body_j="follower",
                curve={"polar": {"theta": TABLE_41_DEG, "s": TABLE_41_S, "degrees": True}})
    m.add_driver("absolute_driver", "drive", body="cam", coordinate="phi", function=f"{w}*t")
    res = run(m, kernels=backend)
    t = res.t
    assert len(t) == 101
    th = math.pi / 2 - w * t
    np.testing.assert_allclose(res["q:contact.theta"], th, atol=1e-9)
    np.testing.assert_allclose(res["qd:contact.theta"], -w, atol=1e-9)
    u = th % (2 * math.pi)
    np.testing.assert_allclose(res["q:follower.y"], S(u), atol=1e-9)
    np.testing.assert_allclose(res["qd:follower.y"], -w * S(u, 1), atol=1e-8)
    np.testing.assert_allclose(res["qdd:follower.y"], w * w * S(u, 2), atol=1e-6)
    assert res["q:follower.y"].max() == pytest.approx(12.46, abs=0.05)   # the nose at 90 deg
    np.testing.assert_allclose(res["q:follower.y"][[0, -1]], S(math.pi / 2), atol=1e-9)


# ---------------------------------------------------------------------------------
# dynamics: contact force normal to the curve, energy balance, local reactions
# ---------------------------------------------------------------------------------
DYN_CURVE = {"polar_series": {"polynomial": [1.0], "cosine": [0.15], "sine": [0.0, 0.05]}}


def _cam_dynamic_model(backend, assemble, y0=1.4, theta=None, omega0=12.0):
    m = Model("cam_dynamic")
    m.set_gravity(0.0, -9.81)
    # (the NumPy reference path costs ~2 ms per right-hand side: a shorter run)
    m.settings.update({"analysis": "dynamic", "integrator": "dopri5",
                       "t_end": 1.0 if backend == "compiled" else 0.3, "output_step": 0.02,
                       "assemble": assemble, "hold": "cam.phi"})
    m.add_body("cam", position=(0, 0), angle=0.0, mass=2.0, inertia=0.3,
               angular_velocity=omega0)
    m.add_body("follower", position=(0.0, y0), angle=0.0, mass=0.5, inertia=0.01)
    m.add_joint("revolute", "A", body_i="cam", body_j="ground", point_i=(0, 0), point_j=(0, 0))
    m.add_joint("translational", "T", body_i="ground", body_j="follower", axis=(0, 1))
    m.add_joint("cam_roller", "roll", body_i="cam", body_j="follower", curve=DYN_CURVE,
                radius=0.2, theta=theta)
    m.add_force("tsda", "spring", body_i="ground", body_j="follower", point_i=(0, 3.0),
                stiffness=60.0, free_length=3.0)
    return m


@pytest.mark.parametrize("assemble", ["no", "yes"])
def test_dynamic_cam_roller_with_spring(backend, assemble):
    """A free cam (series outline) driving a roller follower held on it by a
    compression spring, under gravity; no damping.  The massless theta row gives
    Phi_theta^T lam = 0 (frictionless contact force normal to the curve), the
    energy balance T + V - work is constant, the contact stays compressive, and the
    documented ``normal`` rebuilds the global reaction on the follower.

    ``assemble: no`` starts from rest at a consistent configuration (solved here; a
    theta rate cannot be given as an initial estimate); ``assemble: yes`` from rough
    estimates with the cam spinning (its angle and rate held during assembly)."""
    if assemble == "no":
        sysm = _cam_dynamic_model(backend, "no").compile(kernels="numpy")
        q = sysm.initial_state().q
        free = np.array([c != "cam.phi" for c in sysm.coordinate_names])
        for _ in range(30):      # Gauss-Newton for the consistent configuration
            dq, *_ = np.linalg.lstsq(sysm.jacobian_dense(q, 0.0)[:, free],
                                     -sysm.phi(q, 0.0), rcond=None)
            q[free] += dq
        # converged to rounding: eps |Phi_q| |q| ~ 1e-15 (observed 1.0e-16)
        assert np.abs(sysm.phi(q, 0.0)).max() < 1e-13
        m = _cam_dynamic_model(backend, "no", y0=q[4], theta=q[6], omega0=0.0)
    else:
        m = _cam_dynamic_model(backend, "yes")
    res = run(m, kernels=backend)
    sysm = res.system
    bal = res["energy/balance"]
    assert np.ptp(bal) < 1e-6 * np.abs(res["energy/total"]).max()
    if assemble == "yes":
        assert np.ptp(res["q:cam.phi"]) > (8.0 if backend == "compiled" else 2.5)  # it turns
    else:
        assert np.ptp(res["q:cam.phi"]) > (0.3 if backend == "compiled" else 0.05)
    assert res["violation/position"].max() < 1e-8
    it = sysm.coordinate_index("roll.theta")
    curve = parse_curve(DYN_CURVE, "c")
    lam_names = [f"lam:{c}" for c in sysm.constraint_names]
    normal = res["reactions_local:roll.normal"]
    assert normal.min() > 0.0                               # contact kept
    for k in range(0, len(res.t), 5):
        q = np.array([res[f"q:{c}"][k] for c in sysm.coordinate_names])
        lam = np.array([res[n][k] for n in lam_names])
        J = sysm.jacobian_dense(q, res.t[k])
        assert abs(J[:, it] @ lam) <= 1e-8 * np.abs(J).max() * np.abs(lam).max()
        # force on the follower = normal * (unit vector from the contact point to the
        # roller centre), normal to the cam outline there
        phi = q[2]
        A = np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])
        c, g, _, _ = (v[0] for v in curve([q[it]]))
        d = q[3:5] - A @ c
        F = np.array([res["reactions:roll.j.fx"][k], res["reactions:roll.j.fy"][k]])
        np.testing.assert_allclose(F, normal[k] * d / np.hypot(*d), rtol=1e-7,
                                   atol=1e-9 * abs(normal[k]))
        assert abs(F @ (A @ g)) <= 1e-7 * np.hypot(*F) * np.hypot(*g)


def test_local_reactions_of_point_flat_and_slot(backend):
    """Kinetostatic runs (lam from the equations of motion): the documented
    ``normal`` of cam_point / cam_flat / slot is the contact force along the curve
    normal, with the documented sign, and rebuilds the global reactions."""
    # flat-faced follower with a mass under gravity: the cam pushes it up
    m = _cam_base("flat_ks", 1.2)
    m.settings.update({"analysis": "kinetostatic", "t_end": 1.0})
    m.set_gravity(0.0, -9.81)
    m.add_joint("cam_flat", "flat", body_i="cam", body_j="follower", normal=(0.0, 1.0),
                curve={"radius": RC, "center": [E, 0.0]})
    res = run(m, kernels=backend)
    N = res["reactions_local:flat.normal"]
    assert N.min() > 0                                   # compression (normal given upwards)
    np.testing.assert_allclose(res["reactions:flat.j.fy"], N, rtol=1e-9)
    np.testing.assert_allclose(res["reactions:flat.j.fx"], 0.0, atol=1e-9 * N.max())
    # point follower on the Table 4.1 cam: force on the follower along the outward normal
    m = Model("point_ks")
    m.set_gravity(0.0, -9.81)
    m.settings.update({"analysis": "kinetostatic", "t_end": 0.5, "output_step": 0.05})
    m.add_body("cam", position=(0.0, 0.0), angle=0.0)
    m.add_body("follower", position=(0.0, 12.0), angle=0.0, mass=3.0)
    m.add_joint("revolute", "A", body_i="cam", body_j="ground", point_i=(0, 0), point_j=(0, 0))
    m.add_joint("translational", "T", body_i="ground", body_j="follower", axis=(0, 1))
    m.add_joint("cam_point", "contact", body_i="cam", body_j="follower",
                curve={"polar": {"theta": TABLE_41_DEG, "s": TABLE_41_S, "degrees": True}})
    # slow enough that the follower never leaves the nose (|y''| < g)
    m.add_driver("absolute_driver", "drive", body="cam", coordinate="phi", function="0.2*t")
    res = run(m, kernels=backend)
    curve = parse_curve({"polar": {"theta": TABLE_41_DEG, "s": TABLE_41_S, "degrees": True}},
                        "c")
    N = res["reactions_local:contact.normal"]
    for k in range(len(res.t)):
        phi, th = res["q:cam.phi"][k], res["q:contact.theta"][k]
        A = np.array([[math.cos(phi), -math.sin(phi)], [math.sin(phi), math.cos(phi)]])
        g = A @ curve([th])[1][0]
        out = np.array([g[1], -g[0]]) / np.hypot(*g)         # outward normal (-R g)
        F = np.array([res["reactions:contact.j.fx"][k], res["reactions:contact.j.fy"][k]])
        np.testing.assert_allclose(F, N[k] * out, atol=1e-9 * abs(N[k]))
    assert N.min() > 0
    # pin in a circular slot: force on the pin, positive away from the slot centre
    m = Model("slot_ks")
    m.set_gravity(0.0, -9.81)
    m.settings.update({"analysis": "kinetostatic", "t_end": 0.5, "output_step": 0.05})
    m.add_body("crank", position=(0.0, 0.0), angle=0.0)
    m.add_body("slider", position=(1.4, 0.0), angle=0.0, mass=2.0)
    m.add_joint("revolute", "O", body_i="crank", body_j="ground", point_i=(0, 0), point_j=(0, 0))
    m.add_joint("translational", "T", body_i="ground", body_j="slider", axis=(1, 0))
    m.add_joint("slot", "pin", body_i="slider", body_j="crank",
                curve={"radius": 1.0, "center": [0.5, 0.0]})
    m.add_driver("absolute_driver", "drive", body="crank", coordinate="phi", function="3*t")
    res = run(m, kernels=backend)
    N = res["reactions_local:pin.normal"]
    for k in range(len(res.t)):
        phi = res["q:crank.phi"][k]
        C = 0.5 * np.array([math.cos(phi), math.sin(phi)])
        e = np.array([res["q:slider.x"][k], 0.0]) - C
        F = np.array([res["reactions:pin.i.fx"][k], res["reactions:pin.i.fy"][k]])
        np.testing.assert_allclose(F, N[k] * e / np.hypot(*e), atol=1e-9 * max(1, abs(N[k])))
    # the slider decelerates / accelerates: the slot pushes both ways
    assert N.min() < 0 < N.max()


# ---------------------------------------------------------------------------------
# validation and model files
# ---------------------------------------------------------------------------------
def _compile(type_="cam_point", **params):
    m = Model("v")
    m.add_body("a", position=(0.0, 0.0))
    m.add_body("b", position=(0.0, 2.0))
    params.setdefault("curve", {"radius": 1.0})
    m.add_joint(type_, "x", body_i="a", body_j="b", **params)
    return m.compile(kernels="numpy")


POLAR = {"theta": [0.0, 0.5, 1.0], "s": [1.0, 1.2, 1.1]}


@pytest.mark.parametrize("params, path, msg", [
    (dict(curve=[1, 2]), "joints[0].curve", "mapping"),
    (dict(curve={"center": [0, 0]}), "joints[0].curve", "exactly one of"),
    (dict(curve={"radius": 1.0, "polar": POLAR}), "joints[0].curve", "exactly one of"),
    (dict(curve={"radius": -1.0}), "joints[0].curve.radius", "positive"),
    (dict(curve={"radius": 1.0, "centre": [0, 0]}), "joints[0].curve.centre",
     "did you mean 'center'"),
    (dict(curve={"radius": 1.0, "center": [0, 0, 1]}), "joints[0].curve.center", "2 numbers"),
    (dict(curve={"polar": {"theta": [0, 1, 2], "s": [1, 1]}}), "joints[0].curve.polar.s",
     "as many as theta"),
    (dict(curve={"polar": {"theta": [0, 1, 2]}}), "joints[0].curve.polar.s", "missing"),
    (dict(curve={"polar": {"theta": [0, 1, 1], "s": [1, 1, 1]}}),
     "joints[0].curve.polar.theta[2]", "increasing"),
    (dict(curve={"polar": {"theta": [0, 1, 2], "s": [1, 0, 1]}}),
     "joints[0].curve.polar.s[1]", "positive"),
    (dict(curve={"polar": {"theta": [0, 1, 2], "s": [1, "x", 1]}}),
     "joints[0].curve.polar.s[1]", "number"),
    (dict(curve={"polar": {**POLAR, "periodic": True}}), "joints[0].curve.polar.theta",
     "2 pi"),
    (dict(curve={"polar": {"theta": [0, 90, 180, 270, 360], "s": [1, 2, 1, 2, 1.5],
                           "degrees": True, "periodic": True}}),
     "joints[0].curve.polar.s[4]", "first value"),
    (dict(curve={"polar": {**POLAR, "bc": "parabolic"}}), "joints[0].curve.polar.bc",
     "not-a-knot"),
    (dict(curve={"polar": {**POLAR, "bc": [[3, 0.0], [1, 0.0]]}}),
     "joints[0].curve.polar.bc[0][0]", "order"),
    (dict(curve={"polar": {**POLAR, "periodic": "yes"}}), "joints[0].curve.polar.periodic",
     "true or false"),
    (dict(curve={"polar": {**POLAR, "thetas": [1]}}), "joints[0].curve.polar.thetas",
     "unknown key"),
    (dict(curve={"polar": {"theta": list(range(500)), "s": [1.0] * 500}}),
     "joints[0].curve.polar.theta", "at most"),
    (dict(curve={"polar_series": {}}), "joints[0].curve.polar_series", "at least one"),
    (dict(curve={"polar_series": {"cosine": [0.1, "a"]}}),
     "joints[0].curve.polar_series.cosine[1]", "number"),
    (dict(curve={"xy": {"theta": [0, 1, 2], "x": [0, 1, 2], "y": [0, 1]}}),
     "joints[0].curve.xy.y",
     "as many as theta"),
    (dict(curve={"xy": {"theta": [0, 1, 2], "x": [0, 1, 2], "y": [0, 1, 0],
                        "bc": [[1, 0], [1, 0]]}}), "joints[0].curve.xy.bc", "polar tables"),
])
def test_curve_validation_errors_name_the_key(params, path, msg):
    with pytest.raises(ModelError, match=msg) as exc:
        _compile(**params)
    assert exc.value.path == path


@pytest.mark.parametrize("type_, params, path, msg", [
    ("cam_roller", dict(radius=0.0), "joints[0].radius", "positive"),
    ("cam_roller", dict(), "joints[0].radius", "required"),
    ("cam_flat", dict(normal=(0.0, 0.0)), "joints[0].normal", "non-zero"),
    ("cam_flat", dict(), "joints[0].normal", "required"),
    ("slot", dict(curve=None), "joints[0].curve", "required"),
    ("cam_point", dict(theta="a"), "joints[0].theta", "number"),
])
def test_type_validation_errors_name_the_key(type_, params, path, msg):
    if params.get("curve", 0) is None:
        m = Model("v")
        m.add_body("a")
        m.add_joint(type_, "x", body_i="a", body_j="ground")
        with pytest.raises(ModelError, match=msg) as exc:
            m.compile(kernels="numpy")
    else:
        with pytest.raises(ModelError, match=msg) as exc:
            _compile(type_, **params)
    assert exc.value.path == path


def test_model_file_round_trip(tmp_path):
    text = """
name: cam file
bodies:
  - {name: cam}
  - {name: follower, position: [0, 5]}
points:
  - {name: tip, body: follower, at: [0, -0.5]}
joints:
  - {name: A, type: revolute, body_i: cam, body_j: ground, point_i: [0, 0], point_j: [0, 0]}
  - {name: T, type: translational, body_i: ground, body_j: follower, axis: [0, 1]}
  - name: contact
    type: cam_point
    body_i: cam
    body_j: follower
    point_j: tip
    curve:
      polar: {theta: [0, 90, 180, 270, 360], s: [4, 4.5, 4, 3.5, 4], degrees: true}
      center: [0, 0]
drivers:
  - {name: d, type: absolute_driver, body: cam, coordinate: phi, function: t}
"""
    m = Model.from_text(text)
    sysm = m.compile(kernels="numpy")
    assert sysm.coordinate_names[-1] == "contact.theta"
    assert sysm.constraint_names[4:6] == ["contact.x", "contact.y"]
    assert sysm.initial_state().q[-1] == pytest.approx(math.pi / 2, abs=1e-9)
    p = tmp_path / "cam.yaml"
    m.save(p)
    again = Model.from_file(p).compile(kernels="numpy")
    assert again.coordinate_names == sysm.coordinate_names
    par = [[g.par for g in s.groups if g.ctype.name == "cam_point"][0] for s in (sysm, again)]
    np.testing.assert_array_equal(par[0], par[1])
    # Python API: a parsed curve (numpy data) is stored as plain model-file data
    api = Model("api")
    api.add_body("cam")
    api.add_body("f", position=(0.0, 2.0))
    curve = parse_curve({"polar": {"theta": np.linspace(0, 2 * np.pi, 9), "s": np.ones(9)}},
                        "c")
    api.add_joint("cam_point", "p", body_i="cam", body_j="f", curve=curve)
    api.save(tmp_path / "api.json")
    loaded = Model.from_file(tmp_path / "api.json").compile(kernels="numpy")
    assert loaded.groups[0].par[0, GEOM:].tolist() == curve.block.tolist()
    bad = text.replace("degrees: true", "degrees: true, bc: natural, periodic: true")
    with pytest.raises(ModelError, match=r"joints\[2\]\.curve\.polar\.bc: a periodic table"):
        Model.from_text(bad).compile(kernels="numpy")
