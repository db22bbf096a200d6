"""Exercise mechanisms of spec/planar.md §7 (004 Ch.5 problems) built as example
model files in ``examples/`` (gallery: docs/examples.md), each checked against a
property derived analytically: a traced curve, an exact geometric identity, a
velocity ratio, limit positions.  The sources print no numbers for these
problems; every expected value below is a closed form or an independent
computation written here from the geometry.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbcore import Model, run

H = 1e-3


def d1(f, t, h=H):
    return (f(t - 2 * h) - 8 * f(t - h) + 8 * f(t + h) - f(t + 2 * h)) / (12 * h)


def d2(f, t, h=H):
    return (-f(t - 2 * h) + 16 * f(t - h) - 30 * f(t) + 16 * f(t + h) - f(t + 2 * h)) \
        / (12 * h * h)


def circle_intersection(P, r1, Q, r2, side):
    """Intersection of the circles (P, r1) and (Q, r2) on the left (side = +1) or
    right (-1) of the direction P -> Q; P, Q arrays of shape (N, 2)."""
    d = Q - P
    L = np.hypot(d[:, 0], d[:, 1])
    a = (r1 ** 2 - r2 ** 2 + L ** 2) / (2 * L)
    h = np.sqrt(r1 ** 2 - a ** 2)
    u = d / L[:, None]
    n = np.stack([-u[:, 1], u[:, 0]], 1)
    return P + a[:, None] * u + side * h[:, None] * n


def point(res, name):
    return np.stack([res[f"points/{name}.x"], res[f"points/{name}.y"]], 1)


# ---------------------------------------------------------------------------------
# Elliptic trammel, 004 Prob 5.23
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("name, p", [("P1", 0.5), ("P2", 1.0), ("P3", 1.5), ("P4", 3.0)])
def test_elliptic_trammel_points_trace_ellipses(examples, name, p):
    """004 Prob 5.23: a point at distance p from K on the link KL (length 2) traces
    (x / (2 - p))^2 + (y / p)^2 = 1 (1e-12 over the revolution); its motion is
    x = -(2 - p) cos psi, y = p sin psi with psi = pi/4 + 2 pi t, so velocity and
    acceleration are checked against the exact derivatives (1e-9)."""
    res = run(Model.from_file(examples / "elliptic_trammel.yaml"))
    assert len(res.t) == 101
    x, y = res[f"points/{name}.x"], res[f"points/{name}.y"]
    a, b = abs(2 - p), p
    np.testing.assert_allclose((x / a) ** 2 + (y / b) ** 2, 1.0, rtol=0, atol=1e-12)
    psi, w = np.pi / 4 + 2 * np.pi * res.t, 2 * np.pi
    np.testing.assert_allclose(x, -(2 - p) * np.cos(psi), atol=1e-12)
    np.testing.assert_allclose(y, p * np.sin(psi), atol=1e-12)
    np.testing.assert_allclose(res[f"points/{name}.xd"], (2 - p) * w * np.sin(psi), atol=1e-9)
    np.testing.assert_allclose(res[f"points/{name}.yd"], p * w * np.cos(psi), atol=1e-9)
    np.testing.assert_allclose(res[f"points/{name}.xdd"], (2 - p) * w * w * np.cos(psi),
                               atol=1e-9)
    np.testing.assert_allclose(res[f"points/{name}.ydd"], -p * w * w * np.sin(psi), atol=1e-9)
    # the sliders stay in their guides
    assert np.abs(res["q/slider_K.y"]).max() < 1e-12 and np.abs(res["q/slider_L.x"]).max() < 1e-12


# ---------------------------------------------------------------------------------
# Geneva wheel (engaged phase), 004 Prob 5.37
# ---------------------------------------------------------------------------------
def test_geneva_wheel_engaged_phase(examples, backend):
    """004 Prob 5.37 (n = 6, p = 50, d = p / sin(pi/6) = 100), engaged phase only
    (mbcore has no switching constraint sets).  Closed form with the crank angle a:
    theta = atan2(p sin a, p cos a - d) and dtheta/da = p (p - d cos a) /
    (d^2 - 2 p d cos a + p^2).  Checked: the wheel angle (1e-10) and velocity ratio
    (1e-9) at every output; the wheel starts and stops with zero velocity (the
    crank is perpendicular to the slot at engagement, the design condition), it
    indexes by 2 pi / n, and the largest ratio, at a = 0, is p / (d - p) = 1."""
    res = run(Model.from_file(examples / "geneva_wheel.yaml"), kernels=backend)
    p, d, n = 50.0, 100.0, 6
    a = res["q/crank.phi"]
    wc = res["qd/crank.phi"]
    theta = res["q/wheel.phi"]
    ref = np.unwrap(np.arctan2(p * np.sin(a), p * np.cos(a) - d))
    ref += 2 * np.pi * round((theta[0] - ref[0]) / (2 * np.pi))
    np.testing.assert_allclose(theta, ref, atol=1e-10)
    ratio = p * (p - d * np.cos(a)) / (d * d - 2 * p * d * np.cos(a) + p * p)
    np.testing.assert_allclose(res["qd/wheel.phi"] / wc, ratio, atol=1e-9)
    assert a[0] == pytest.approx(-(np.pi / 2 - np.pi / n)) and a[-1] == pytest.approx(
        np.pi / 2 - np.pi / n)
    assert abs(res["qd/wheel.phi"][0]) < 1e-9 and abs(res["qd/wheel.phi"][-1]) < 1e-9
    assert theta[-1] - theta[0] == pytest.approx(-2 * np.pi / n, abs=1e-10)
    k0 = int(np.argmin(np.abs(a)))
    assert a[k0] == pytest.approx(0.0, abs=1e-12)
    assert res["qd/wheel.phi"][k0] / wc[k0] == pytest.approx(-p / (d - p), abs=1e-9)
    assert np.all(np.abs(res["qd/wheel.phi"] / wc) <= p / (d - p) + 1e-9)
    # the pin runs in the slot: it is on the wheel's radial line
    pin = point(res, "pin") - [d, 0.0]
    cross = pin[:, 0] * np.sin(theta) - pin[:, 1] * np.cos(theta)
    assert np.abs(cross).max() < 1e-9


# ---------------------------------------------------------------------------------
# Crank-rocker, 004 Prob 5.2
# ---------------------------------------------------------------------------------
A_, B_, C_, D_ = 0.8, 2.1, 1.6, 2.5      # crank, coupler, rocker, frame


def rocker_limits():
    """Limit positions (crank and coupler collinear: AC = b + a, b - a), by the
    cosine rule in triangle ACD: rocker angle at D from +x and the crank angle."""
    out = []
    for s, sign in ((B_ + A_, 1.0), (B_ - A_, -1.0)):
        gamma = math.acos((C_ ** 2 + D_ ** 2 - s ** 2) / (2 * C_ * D_))    # angle ADC
        psi = math.pi - gamma
        cx, cy = D_ + C_ * math.cos(psi), C_ * math.sin(psi)
        crank = math.atan2(sign * cy, sign * cx) % (2 * math.pi)
        out.append((psi, crank))
    return out


def test_crank_rocker_limit_positions_and_swing(examples, backend):
    """004 Prob 5.2 (a = 0.8, b = 2.1, c = 1.6, d = 2.5): the rocker's limit
    positions are where crank and coupler are collinear.  By the cosine rule the
    rocker angle (at D, from +x) is 92.866 deg (extended, AC = 2.9) and 152.873 deg
    (folded, AC = 1.3): a 60.007 deg swing (the spec: 92.87-152.87, 60.0), forbidden
    zones outside.  Run from the
    extended to the folded limit (crank angles from the same closed form): the
    rocker angle there equals the closed form and its velocity vanishes (1e-9);
    over a full revolution it never leaves the range (sampled every 1.8 deg)."""
    (psi1, th1), (psi2, th2) = rocker_limits()
    assert math.degrees(psi1) == pytest.approx(92.87, abs=5e-3)
    assert math.degrees(psi2) == pytest.approx(152.87, abs=5e-3)
    w = 2 * math.pi
    res = run(Model.from_file(examples / "crank_rocker.yaml"), kernels=backend,
              settings={"t_start": th1 / w, "t_end": th2 / w, "output_step": (th2 - th1) / w / 40})
    assert len(res.t) == 41
    for k, psi in ((0, psi1), (-1, psi2)):
        assert res["q/rocker.phi"][k] == pytest.approx(psi, abs=1e-9)
        assert abs(res["qd/rocker.phi"][k]) < 1e-9
        # crank and coupler collinear
        assert math.sin(res["q/coupler.phi"][k] - res["q/crank.phi"][k]) == pytest.approx(
            0.0, abs=1e-9)
    assert np.all(res["qd/rocker.phi"][1:-1] > 0)       # the rocker swings one way
    full = run(Model.from_file(examples / "crank_rocker.yaml"), kernels=backend)
    phi = full["q/rocker.phi"]
    assert phi.min() >= psi1 - 1e-9 and phi.max() <= psi2 + 1e-9
    assert phi.max() - phi.min() == pytest.approx(psi2 - psi1, abs=1e-3)
    # time ratio of the quick-return motion: (th2 - th1) / (2 pi - (th2 - th1)) > 1
    forward = (th2 - th1) % (2 * math.pi)
    assert forward / (2 * math.pi - forward) == pytest.approx(
        np.sum(full["qd/rocker.phi"][:-1] > 0) / np.sum(full["qd/rocker.phi"][:-1] < 0),
        rel=0.03)


# ---------------------------------------------------------------------------------
# Double crank, 004 Prob 5.1
# ---------------------------------------------------------------------------------
def test_double_crank_follower_turns_fully(examples):
    """004 Prob 5.1 (a = 2.1, b = 1.6, c = 2.6, d = 0.9, frame shortest): one crank
    revolution turns the follower exactly once in the same sense (accumulated
    angle + 2 pi, velocity never reverses).  The follower angle and the paths of B
    and C equal the closed form (C = intersection of the circles about B and D,
    1e-10); C's velocity and acceleration equal its derivatives (1e-7 relative)."""
    res = run(Model.from_file(examples / "double_crank.yaml"))
    phi = res["q/follower.phi"]
    assert phi[-1] - phi[0] == pytest.approx(2 * np.pi, abs=1e-9)
    assert np.all(res["qd/follower.phi"] > 0)

    def C(t):
        t = np.atleast_1d(t)
        B = 2.1 * np.stack([np.cos(2 * np.pi * t), np.sin(2 * np.pi * t)], 1)
        D = np.tile([0.9, 0.0], (len(t), 1))
        return circle_intersection(B, 1.6, D, 2.6, side=-1)
    t = res.t
    np.testing.assert_allclose(point(res, "B"), 2.1 * np.stack(
        [np.cos(2 * np.pi * t), np.sin(2 * np.pi * t)], 1), atol=1e-12)
    np.testing.assert_allclose(point(res, "C"), C(t), atol=1e-10)
    ang = np.arctan2(C(t)[:, 1], C(t)[:, 0] - 0.9)
    np.testing.assert_allclose(np.sin(phi - ang), 0, atol=1e-10)
    # 4th-order differences of step h: truncation h^4 C^(5) / 30 (1.6e-8 of |v| at
    # h = 1e-3: the follower's fast swing), rounding ~5 eps |C| / h^2 (1.6e-10 of |a|
    # at h = 2.5e-4); observed at h = 2.5e-4: 6e-11 and 2.5e-10, 1600x and 4000x
    # below the tolerances
    h = 2.5e-4
    v = np.stack([d1(lambda s: C(s)[:, j], t, h) for j in (0, 1)], 1)
    a = np.stack([d2(lambda s: C(s)[:, j], t, h) for j in (0, 1)], 1)
    np.testing.assert_allclose(np.stack([res["points/C.xd"], res["points/C.yd"]], 1), v,
                               atol=1e-7 * np.abs(v).max())
    np.testing.assert_allclose(np.stack([res["points/C.xdd"], res["points/C.ydd"]], 1), a,
                               atol=1e-6 * np.abs(a).max())


# ---------------------------------------------------------------------------------
# Pantograph, 004 Prob 5.27
# ---------------------------------------------------------------------------------
def test_pantograph_draws_a_scaled_copy(examples, backend):
    """004 Prob 5.27: O, D and T are collinear with OD = OT / 2 (parallelogram
    P1-B-P2-D, P1 and P2 the midpoints of OB and BT), so the drawing point's
    position, velocity and acceleration are half the tracing point's (1e-10, 1e-9,
    1e-8) while T follows the discretised outline: it passes every tabulated corner
    and edge midpoint of the square at t = k/8 (1e-10)."""
    res = run(Model.from_file(examples / "pantograph.yaml"), kernels=backend)
    assert len(res.t) == 101
    for c, tol in (("x", 1e-10), ("y", 1e-10), ("xd", 1e-9), ("yd", 1e-9),
                   ("xdd", 1e-8), ("ydd", 1e-8)):
        np.testing.assert_allclose(res[f"points/D.{c}"], 0.5 * res[f"points/T.{c}"],
                                   atol=tol, err_msg=c)
    corners = [(2.8, 1.2), (2.8, 1.8), (2.2, 1.8), (1.6, 1.8), (1.6, 1.2), (1.6, 0.6),
               (2.2, 0.6), (2.8, 0.6), (2.8, 1.2)]
    for k, (x, y) in enumerate(corners):
        i = int(np.argmin(abs(res.t - k / 8)))
        if abs(res.t[i] - k / 8) < 1e-12:
            assert res["points/T.x"][i] == pytest.approx(x, abs=1e-10)
            assert res["points/T.y"][i] == pytest.approx(y, abs=1e-10)
    # the drawn outline is the traced one, halved: same shape, half the perimeter
    T, D = point(res, "T"), point(res, "D")
    per = lambda P: np.sum(np.hypot(*np.diff(P, axis=0).T))  # noqa: E731
    assert per(D) == pytest.approx(0.5 * per(T), rel=1e-10)
    # the parallelogram: the links stay parallel to the arms
    np.testing.assert_allclose(np.sin(res["q/link_P1D.phi"] - res["q/arm_BT.phi"]), 0,
                               atol=1e-10)
    np.testing.assert_allclose(np.sin(res["q/link_P2D.phi"] - res["q/arm_OB.phi"]), 0,
                               atol=1e-10)


# ---------------------------------------------------------------------------------
# Peaucellier-Lipkin circle inversion, 004 Prob 5.31
# ---------------------------------------------------------------------------------
def test_peaucellier_inversion_draws_the_inverse_circle(examples, backend):
    """004 Prob 5.31 (a = 2.0, b = 1.6, c = 1.4, FE = 0.8): F, R, S collinear with
    FR * FS = a^2 - b^2 = 1.44 (1e-10), and S on the circle the problem states:
    centre O on line FE, beyond F, with FO = FE (a^2 - b^2) / (c^2 - FE^2) = 0.87273
    and radius r = c FO / FE = 1.52727 (1e-10).  S's velocity is tangent to that
    circle (1e-9)."""
    res = run(Model.from_file(examples / "peaucellier_inversion.yaml"), kernels=backend)
    a, b, c, fe = 2.0, 1.6, 1.4, 0.8
    fo = fe * (a * a - b * b) / (c * c - fe * fe)
    r = c * fo / fe
    assert fo == pytest.approx(0.87273, abs=1e-5) and r == pytest.approx(1.52727, abs=1e-5)
    O = np.array([fo, 0.0])                  # E = (-0.8, 0): O on the other side of F
    R, S = point(res, "R"), point(res, "S")
    np.testing.assert_allclose(np.hypot(*(S - O).T), r, atol=1e-10)
    np.testing.assert_allclose(np.hypot(*R.T) * np.hypot(*S.T), a * a - b * b, atol=1e-10)
    np.testing.assert_allclose(R[:, 0] * S[:, 1] - R[:, 1] * S[:, 0], 0.0, atol=1e-10)
    np.testing.assert_allclose(np.hypot(*(R - [-fe, 0.0]).T), c, atol=1e-10)
    vS = np.stack([res["points/S.xd"], res["points/S.yd"]], 1)
    np.testing.assert_allclose(np.sum((S - O) * vS, 1), 0.0, atol=1e-9)
    # R sweeps FR from c - FE = 0.6 up to about 1.02 (< sqrt(a^2 - b^2): no fold)
    FR = np.hypot(*R.T)
    assert FR.min() == pytest.approx(c - fe, abs=1e-10) and FR.max() < 1.2


# ---------------------------------------------------------------------------------
# Chebyshev lambda (approximate straight line)
# ---------------------------------------------------------------------------------
def test_chebyshev_lambda_approximate_straight_line(examples):
    """Chebyshev's lambda (frame 2, crank 1, rocker 2.5, coupler 5 with C in the
    middle).  Exact facts: C is equidistant from B, D and P, so BDP is a right
    angle (1e-10), and P passes through (4, 4), (2, 4), (0, 4) at crank angles
    90, 180, 270 deg (1e-10) with dy/dt = 0 at 180 deg.  The straight stretch: for
    crank angles 90-270 deg P runs monotonically from x = 4 to x = 0 and stays
    within the band |y - 4| <= delta, delta the largest deviation of the closed
    form (circle intersection, computed here) on a fine grid (~0.0094, 0.23 % of
    the stroke); mbcore's path equals the closed form to 1e-9."""
    res = run(Model.from_file(examples / "chebyshev_lambda.yaml"))
    t = res.t
    th = 2 * np.pi * t
    P, B = point(res, "P"), point(res, "B")
    Dp = np.array([2.0, 0.0])
    # positions within the Newton test 1e-10 (1 + |q|) move the dot product by up to
    # (|P - D| + |B - D|) times that (5.8e-9); observed 3.8e-12
    pos = 1e-10 * (1 + np.abs(res["q"]).max())
    arms = np.linalg.norm(P - Dp, axis=1).max() + np.linalg.norm(B - Dp, axis=1).max()
    np.testing.assert_allclose(np.sum((P - Dp) * (B - Dp), 1), 0.0, atol=arms * pos)
    np.testing.assert_allclose(np.hypot(*(P - B).T), 5.0, atol=1e-10)

    def closed(theta):
        Bc = np.stack([np.cos(theta), np.sin(theta)], 1)
        Cc = circle_intersection(Bc, 2.5, np.tile(Dp, (len(theta), 1)), 2.5, side=1)
        return 2 * Cc - Bc
    np.testing.assert_allclose(P, closed(th), atol=1e-9)
    for deg, x in ((90, 4.0), (180, 2.0), (270, 0.0)):
        k = int(np.argmin(abs(t - deg / 360)))
        assert t[k] == pytest.approx(deg / 360, abs=1e-12)
        assert P[k] == pytest.approx([x, 4.0], abs=1e-10)
    k = int(np.argmin(abs(t - 0.5)))
    assert abs(res["points/P.yd"][k]) < 1e-9
    fine = np.linspace(np.pi / 2, 3 * np.pi / 2, 20001)
    delta = np.abs(closed(fine)[:, 1] - 4.0).max()
    assert 0.005 < delta < 0.01
    s = (t >= 0.25 - 1e-12) & (t <= 0.75 + 1e-12)
    assert np.abs(P[s, 1] - 4.0).max() <= delta + 1e-9
    assert np.all(np.diff(P[s, 0]) < 0)
    assert np.all(res["points/P.xd"][s] < 0)
    # outside the stretch P leaves the line (the return stroke rises to y = 4.899)
    assert P[:, 1].max() == pytest.approx(math.sqrt(24), abs=1e-9)
