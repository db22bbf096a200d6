"""Rotation toolkit (src/mbcore/rotations.py) against spec/spatial.md §1 and the
Chapter 6 worked examples / exercises of spec §4.1-4.2 (errata: spec §6)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from mbcore.elements import orientation_spec as OS
from mbcore.elements import rotations as R
from mbcore.errors import ModelError

pytestmark = pytest.mark.core     # mbcore only (passes with the stub plugin set)

DEG = math.pi / 180.0
I3 = np.eye(3)
N = 100


# ---------------------------------------------------------------------------------
# helpers (independent of the library where it matters)
# ---------------------------------------------------------------------------------
def unit_p(rng: np.random.Generator, n: int = N) -> np.ndarray:
    p = rng.normal(size=(n, 4))
    return p / np.linalg.norm(p, axis=-1, keepdims=True)


def axial(W: np.ndarray) -> np.ndarray:
    """w from a (nearly) skew-symmetric w~."""
    S = 0.5 * (W - np.swapaxes(W, -1, -2))
    return np.stack([S[..., 2, 1], S[..., 0, 2], S[..., 1, 0]], -1)


def Rx(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def Ry(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def Rz(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def d1(f, t, h=1e-4):
    """5-point central first derivative."""
    return (-f(t + 2 * h) + 8 * f(t + h) - 8 * f(t - h) + f(t - 2 * h)) / (12 * h)


def d2(f, t, h=1e-3):
    """5-point central second derivative."""
    return (-f(t + 2 * h) + 16 * f(t + h) - 30 * f(t) + 16 * f(t - h) - f(t - 2 * h)) / (12 * h * h)


def trajectories(seed: int, n: int = 30):
    """n smooth trajectories p(t) = u(t)/‖u(t)‖ evaluated at once: t -> (n, 4)."""
    r = np.random.default_rng(seed)
    a, b, c = r.normal(size=(3, n, 4))
    w = r.uniform(0.5, 2.0, size=(n, 4))

    def p(t):
        u = a + b * np.sin(w * t) + c * np.cos(0.7 * w * t + 0.3)
        return u / np.linalg.norm(u, axis=-1, keepdims=True)
    return p


def same_rotation(p, q, tol=1e-12):
    """p = ±q (rows)."""
    p, q = np.atleast_2d(p), np.atleast_2d(q)
    err = np.minimum(np.abs(p - q).max(-1), np.abs(p + q).max(-1))
    return float(err.max()) < tol


@pytest.fixture
def rng():
    return np.random.default_rng(20240611)


# ---------------------------------------------------------------------------------
# §1.2-1.4 identities at random unit p
# ---------------------------------------------------------------------------------
def test_identities_G_L_A(rng):
    p = unit_p(rng)
    A, G, L = R.A(p), R.G(p), R.L(p)
    T = lambda M: np.swapaxes(M, -1, -2)
    assert A.shape == (N, 3, 3) and G.shape == (N, 3, 4) and L.shape == (N, 3, 4)
    np.testing.assert_allclose(A, G @ T(L), atol=1e-14)                      # 6.49
    np.testing.assert_allclose(G @ T(G), np.broadcast_to(I3, A.shape), atol=1e-14)  # 6.42
    np.testing.assert_allclose(L @ T(L), np.broadcast_to(I3, A.shape), atol=1e-14)  # 6.43
    np.testing.assert_allclose(np.einsum("nij,nj->ni", G, p), 0, atol=1e-15)  # 6.40
    np.testing.assert_allclose(np.einsum("nij,nj->ni", L, p), 0, atol=1e-15)  # 6.41
    P = np.eye(4) - p[:, :, None] * p[:, None, :]
    np.testing.assert_allclose(T(G) @ G, P, atol=1e-14)                      # 6.45
    np.testing.assert_allclose(T(L) @ L, P, atol=1e-14)                      # 6.46
    # products of unit-size 3x3 / 4x4 factors: a few eps (observed <= 4.7e-16)
    np.testing.assert_allclose(T(A) @ A, np.broadcast_to(I3, A.shape), atol=1e-13)
    np.testing.assert_allclose(np.linalg.det(A), 1.0, atol=1e-14)
    np.testing.assert_allclose(R.A(-p), A, atol=0)                           # p and −p
    # the axis has the same components in both frames: Aᵀe = e
    np.testing.assert_allclose(np.einsum("nji,nj->ni", A, p[:, 1:]), p[:, 1:], atol=1e-14)
    # rotation formula 6.16 and the skew matrix
    s = rng.normal(size=(N, 3))
    e0, e = p[:, :1], p[:, 1:]
    rot = (2 * e0 ** 2 - 1) * s + 2 * e * np.sum(e * s, -1, keepdims=True) + 2 * e0 * np.cross(e, s)
    np.testing.assert_allclose(np.einsum("nij,nj->ni", A, s), rot, atol=1e-14)
    np.testing.assert_allclose(np.einsum("nij,nj->ni", R.skew(e), s), np.cross(e, s), atol=1e-15)
    # 6.88: s~ A = A s'~
    sg = np.einsum("nij,nj->ni", A, s)
    np.testing.assert_allclose(R.skew(sg) @ A, A @ R.skew(s), atol=1e-14)


def test_bilinear_identities(rng):
    x, y = rng.normal(size=(2, N, 4))
    T = lambda M: np.swapaxes(M, -1, -2)
    np.testing.assert_allclose(R.G(x) @ T(R.L(y)), R.G(y) @ T(R.L(x)), atol=1e-13)   # 6.55
    mv = lambda M, v: np.einsum("nij,nj->ni", M, v)
    np.testing.assert_allclose(mv(R.G(x), y), -mv(R.G(y), x), atol=1e-14)            # 6.51
    np.testing.assert_allclose(mv(R.L(x), y), -mv(R.L(y), x), atol=1e-14)            # 6.52


def test_4x4_operators_and_derivatives_of_A_a(rng):
    p = unit_p(rng)
    a = rng.normal(size=(N, 3))
    G, L, A = R.G(p), R.L(p), R.A(p)
    mv = lambda M, v: np.einsum("...ij,...j->...i", M, v)
    T = lambda M: np.swapaxes(M, -1, -2)
    outer = lambda u, v: u[..., :, None] * v[..., None, :]
    np.testing.assert_allclose(T(R.aplus(a)), -R.aplus(a), atol=0)          # 6.66
    np.testing.assert_allclose(T(R.aminus(a)), -R.aminus(a), atol=0)        # 6.67
    np.testing.assert_allclose(mv(T(G), a), mv(R.aplus(a), p), atol=1e-14)   # 6.68
    np.testing.assert_allclose(mv(T(L), a), mv(R.aminus(a), p), atol=1e-14)  # 6.69
    np.testing.assert_allclose(G @ R.aplus(a), R.skew(a) @ G + outer(a, p), atol=1e-14)   # 6.70
    np.testing.assert_allclose(L @ R.aminus(a), -R.skew(a) @ L + outer(a, p), atol=1e-14)  # 6.71
    Bm, Bf = R.Bm(p, a), R.Bf(p, a)
    assert Bm.shape == Bf.shape == (N, 3, 4)
    ag = mv(A, a)
    np.testing.assert_allclose(mv(Bm, p), 2 * ag, atol=1e-14)
    np.testing.assert_allclose(Bm, 2 * (outer(ag, p) - R.skew(ag) @ G), atol=1e-14)
    np.testing.assert_allclose(0.5 * Bm @ T(G), -R.skew(ag), atol=1e-13)   # obs. 3.3e-16
    # finite differences in p (no normalisation): full = A of Eq 6.18, modified = G Lᵀ
    h = 1e-6
    Jf = np.empty((N, 3, 4))
    Jm = np.empty((N, 3, 4))
    for c in range(4):
        dp = np.zeros(4)
        dp[c] = h
        Jf[:, :, c] = (mv(R.A(p + dp), a) - mv(R.A(p - dp), a)) / (2 * h)
        Gp, Lp, Gm, Lm = R.G(p + dp), R.L(p + dp), R.G(p - dp), R.L(p - dp)
        Jm[:, :, c] = (mv(Gp @ T(Lp), a) - mv(Gm @ T(Lm), a)) / (2 * h)
    # central differences (h = 1e-6): rounding eps / h ~ 2e-10 (observed 1.9e-10)
    np.testing.assert_allclose(Jf, Bf, atol=1e-7)     # 6.86
    np.testing.assert_allclose(Jm, Bm, atol=1e-7)     # 7.34
    # a single vector broadcasts against many p
    np.testing.assert_allclose(R.Bm(p, a[0]), 2 * G @ R.aminus(a[0]), atol=1e-15)


# ---------------------------------------------------------------------------------
# §1.3, §1.5 time-derivative identities along smooth trajectories
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [-0.7, 0.2, 1.3])
def test_velocity_identities_along_trajectories(t):
    pf = trajectories(7)
    p, pd = pf(t), d1(pf, t)
    A = R.A(p)
    Ad_fd = d1(lambda tt: R.A(pf(tt)), t)
    T = lambda M: np.swapaxes(M, -1, -2)
    # pd and Ad_fd are 4th-order differences (observed errors <= 3.6e-12 below)
    np.testing.assert_allclose(np.sum(p * pd, -1), 0, atol=1e-9)                    # 6.50
    np.testing.assert_allclose(R.Adot(p, pd), Ad_fd, atol=1e-9)                     # 6.56
    wb = R.omega_body_from_pdot(p, pd)
    w = R.omega_from_pdot(p, pd)
    np.testing.assert_allclose(wb, axial(T(A) @ Ad_fd), atol=1e-9)                  # 6.96
    np.testing.assert_allclose(w, axial(Ad_fd @ T(A)), atol=1e-9)                   # 6.94
    np.testing.assert_allclose(w, np.einsum("nij,nj->ni", A, wb), atol=1e-12)       # ω = A ω'
    np.testing.assert_allclose(R.pdot_from_omega_body(p, wb), pd, atol=1e-12)       # 6.109
    np.testing.assert_allclose(R.pdot_from_omega(p, w), pd, atol=1e-12)             # 6.106
    np.testing.assert_allclose(np.sum(pd * pd, -1), 0.25 * np.sum(w * w, -1), atol=1e-12)  # 6.114
    # Ġ ṗ = 0, ω̃' = 2 L L̇ᵀ (6.53, 6.58)
    np.testing.assert_allclose(np.einsum("nij,nj->ni", R.G(pd), pd), 0, atol=1e-14)
    np.testing.assert_allclose(R.skew(wb), 2 * R.L(p) @ T(R.L(pd)), atol=1e-9)


@pytest.mark.parametrize("t", [-0.4, 0.9])
def test_acceleration_identities_along_trajectories(t):
    pf = trajectories(11)
    p, pdd = pf(t), d2(pf, t)
    wbf = lambda tt: R.omega_body_from_pdot(pf(tt), d1(pf, tt, 1e-4))
    wf = lambda tt: R.omega_from_pdot(pf(tt), d1(pf, tt, 1e-4))
    wb, wbd = wbf(t), d1(wbf, t, 1e-3)
    w, wd = wf(t), d1(wf, t, 1e-3)
    np.testing.assert_allclose(R.pddot_from_omegadot_body(p, wb, wbd), pdd, atol=2e-6)  # 6.113
    np.testing.assert_allclose(R.pddot_from_omegadot(p, w, wd), pdd, atol=2e-6)         # 6.112
    np.testing.assert_allclose(wbd, 2 * np.einsum("nij,nj->ni", R.L(p), pdd), atol=2e-6)  # 6.111
    # Ä = 2 Ġ L̇ᵀ + 2 G L̈ᵀ (6.62-6.63)
    pd = d1(pf, t)
    T = lambda M: np.swapaxes(M, -1, -2)
    Add = d2(lambda tt: R.A(pf(tt)), t)
    np.testing.assert_allclose(Add, 2 * R.G(pd) @ T(R.L(pd)) + 2 * R.G(p) @ T(R.L(pdd)),
                               atol=1e-5)


# ---------------------------------------------------------------------------------
# §1.7 A -> p, normalisation, axis-angle
# ---------------------------------------------------------------------------------
def test_p_from_A_round_trip_random(rng):
    p = unit_p(rng)
    q = R.p_from_A(R.A(p))
    np.testing.assert_allclose(q, p * np.sign(p[:, :1]), atol=1e-14)
    assert np.all(q[:, 0] >= 0)
    # leading axes and a reference for the sign
    P = p[:60].reshape(3, 5, 4, 4)
    assert R.p_from_A(R.A(P)).shape == (3, 5, 4, 4)
    np.testing.assert_allclose(R.p_from_A(R.A(p), p_ref=-p), -p, atol=1e-14)
    np.testing.assert_allclose(R.p_from_A(R.A(p), p_ref=p), p, atol=1e-14)


@pytest.mark.parametrize("e0", [0.0, 1e-12, 1e-9, -1e-9, 1e-5, 0.01])
def test_p_from_A_at_and_near_half_turn(rng, e0):
    u = rng.normal(size=(N, 3))
    u /= np.linalg.norm(u, axis=-1, keepdims=True)
    p = np.concatenate([np.full((N, 1), e0), math.sqrt(1 - e0 * e0) * u], -1)
    q = R.p_from_A(R.A(p))
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-15)
    np.testing.assert_allclose(R.A(q), R.A(p), atol=1e-14)
    if e0 != 0.0:
        np.testing.assert_allclose(q, p * np.sign(e0), atol=1e-13)
    else:
        assert same_rotation(q, p, 1e-13)            # a few eps (observed 3.3e-16)
        np.testing.assert_allclose(q[:, 0], 0.0, atol=1e-15)
        np.testing.assert_allclose(R.p_from_A(R.A(p), p_ref=p), p, atol=1e-14)
    # rotation by π about the coordinate axes (Eq 6.34 with φ = π)
    for k in range(1, 4):
        pk = np.zeros(4)
        pk[k] = 1.0
        np.testing.assert_allclose(R.p_from_A(R.A(pk)), pk, atol=1e-15)


def test_p_from_A_slightly_non_orthogonal_gives_unit_p(rng):
    p = unit_p(rng)
    A = R.A(p) + 1e-7 * rng.normal(size=(N, 3, 3))
    q = R.p_from_A(A)
    np.testing.assert_allclose(np.linalg.norm(q, axis=-1), 1.0, atol=1e-15)
    assert same_rotation(q, p, 2e-5)            # observed 1.4e-7 for a perturbation 1e-7


def test_normalize(rng):
    p = 3.0 * unit_p(rng, 10)
    np.testing.assert_allclose(R.normalize(p), p / 3.0, atol=1e-15)
    with pytest.raises(ValueError):
        R.normalize(np.zeros(4))


def test_axis_angle(rng):
    u = rng.normal(size=(N, 3))
    phi = rng.uniform(-2 * np.pi, 2 * np.pi, size=N)
    p = R.axis_angle_to_p(u, phi)
    np.testing.assert_allclose(np.linalg.norm(p, axis=-1), 1.0, atol=1e-15)
    # rotation formula 6.14
    un = u / np.linalg.norm(u, axis=-1, keepdims=True)
    s = rng.normal(size=(N, 3))
    c, sn = np.cos(phi)[:, None], np.sin(phi)[:, None]
    rot = s * c + un * np.sum(un * s, -1, keepdims=True) * (1 - c) + np.cross(un, s) * sn
    np.testing.assert_allclose(np.einsum("nij,nj->ni", R.A(p), s), rot, atol=1e-13)
    # round trip: angle in [0, π], same rotation
    u2, phi2 = R.p_to_axis_angle(p)
    assert np.all((phi2 >= 0) & (phi2 <= np.pi))
    np.testing.assert_allclose(R.A(R.axis_angle_to_p(u2, phi2)), R.A(p), atol=1e-13)
    # Prob 6.19: cos φ = (tr A − 1)/2
    np.testing.assert_allclose(np.trace(R.A(p), axis1=1, axis2=2), 1 + 2 * np.cos(phi2), atol=1e-13)
    # special cases Eq 6.34
    a = 0.8
    c, s = math.cos(a / 2), math.sin(a / 2)
    np.testing.assert_allclose(R.axis_angle_to_p([1, 0, 0], a), [c, s, 0, 0])
    np.testing.assert_allclose(R.axis_angle_to_p([0, 2, 0], a), [c, 0, s, 0])
    np.testing.assert_allclose(R.axis_angle_to_p([0, 0, 5], a), [c, 0, 0, s])
    np.testing.assert_allclose(R.A(R.axis_angle_to_p([0, 0, 1], a)), Rz(a), atol=1e-15)
    u0, phi0 = R.p_to_axis_angle([1.0, 0, 0, 0])
    assert phi0 == 0.0 and np.allclose(u0, [1, 0, 0])
    with pytest.raises(ValueError):
        R.axis_angle_to_p([0, 0, 0], 1.0)


# ---------------------------------------------------------------------------------
# §1.8 Euler angles 3-1-3, §1.9 Bryant angles 1-2-3
# ---------------------------------------------------------------------------------
def test_euler313_round_trips(rng):
    ang = np.column_stack([rng.uniform(-np.pi, np.pi, N), rng.uniform(0.01, np.pi - 0.01, N),
                           rng.uniform(-np.pi, np.pi, N)])
    A = R.euler313_to_A(ang)
    for k in range(5):
        np.testing.assert_allclose(A[k], Rz(ang[k, 0]) @ Rx(ang[k, 1]) @ Rz(ang[k, 2]), atol=1e-15)
    p = R.euler313_to_p(ang)
    np.testing.assert_allclose(R.A(p), A, atol=1e-14)                               # B.1-B.4
    np.testing.assert_allclose(R.A_to_euler313(A), ang, atol=1e-10)                 # A.2
    np.testing.assert_allclose(R.p_to_euler313(p), ang, atol=1e-10)                 # B.5-B.7
    np.testing.assert_allclose(np.cos(ang[:, 1]), 2 * (p[:, 0] ** 2 + p[:, 3] ** 2) - 1, atol=1e-14)


@pytest.mark.parametrize("theta", [0.0, np.pi, 1e-13, 1e-9, np.pi - 1e-9, 1e-6])
def test_euler313_singular_and_near_singular(theta):
    for psi, sig in ((0.7, 0.2), (-2.0, 1.1), (3.0, -2.5)):
        A = R.euler313_to_A([psi, theta, sig])
        got = R.A_to_euler313(A)
        # below the singular tolerance 1e-12 the neglected angle moves A by up to
        # ~2e-12 (observed 1.9e-13); 100x that
        np.testing.assert_allclose(R.euler313_to_A(got), A, atol=2e-10)
        got_p = R.p_to_euler313(R.euler313_to_p([psi, theta, sig]))
        np.testing.assert_allclose(R.euler313_to_A(got_p), A, atol=2e-10)
        assert 0.0 <= got[1] <= np.pi
        if theta in (0.0, np.pi):
            assert got[2] == 0.0 and got_p[2] == 0.0     # σ := 0 at sin θ = 0
            np.testing.assert_allclose(got[1], theta, atol=1e-15)


def test_bryant123_round_trips(rng):
    ang = np.column_stack([rng.uniform(-np.pi, np.pi, N),
                           rng.uniform(-np.pi / 2 + 0.01, np.pi / 2 - 0.01, N),
                           rng.uniform(-np.pi, np.pi, N)])
    A = R.bryant123_to_A(ang)
    for k in range(5):
        np.testing.assert_allclose(A[k], Rx(ang[k, 0]) @ Ry(ang[k, 1]) @ Rz(ang[k, 2]), atol=1e-15)
    p = R.bryant123_to_p(ang)
    np.testing.assert_allclose(R.A(p), A, atol=1e-14)                               # Prob 6.17
    np.testing.assert_allclose(R.A_to_bryant123(A), ang, atol=1e-10)                # A.6
    np.testing.assert_allclose(R.p_to_bryant123(p), ang, atol=1e-10)                # Prob 6.18


@pytest.mark.parametrize("phi2", [np.pi / 2, -np.pi / 2, np.pi / 2 - 1e-13, -np.pi / 2 + 1e-9,
                                  np.pi / 2 - 1e-6])
def test_bryant123_singular_and_near_singular(phi2):
    for f1, f3 in ((0.7, 0.2), (-2.0, 1.1), (3.0, -2.5)):
        A = R.bryant123_to_A([f1, phi2, f3])
        got = R.A_to_bryant123(A)
        # as for 3-1-3: the singular tolerance 1e-12 (observed 1.9e-13), 100x it
        np.testing.assert_allclose(R.bryant123_to_A(got), A, atol=2e-10)
        got_p = R.p_to_bryant123(R.bryant123_to_p([f1, phi2, f3]))
        np.testing.assert_allclose(R.bryant123_to_A(got_p), A, atol=2e-10)
        assert abs(got[1]) <= np.pi / 2
        if abs(phi2) == np.pi / 2:
            assert got[2] == 0.0
            np.testing.assert_allclose(got[1], phi2, atol=1e-7)


@pytest.mark.parametrize("t", [-0.3, 0.8])
def test_angle_rate_matrices_vs_finite_differences(rng, t):
    a0, a1 = rng.normal(size=(2, 20, 3))
    angf = lambda tt: a0 + a1 * np.sin(tt)
    ang, angd = angf(t), a1 * np.cos(t)
    T = lambda M: np.swapaxes(M, -1, -2)
    mv = lambda M, v: np.einsum("nij,nj->ni", M, v)
    for to_A, body, glob in (
            (R.euler313_to_A, R.euler313_rates_to_omega_body, R.euler313_rates_to_omega),
            (R.bryant123_to_A, R.bryant123_rates_to_omega_body, R.bryant123_rates_to_omega)):
        A = to_A(ang)
        Ad = d1(lambda tt: to_A(angf(tt)), t)
        np.testing.assert_allclose(mv(body(ang), angd), axial(T(A) @ Ad), atol=1e-9)   # A.3 / A.7
        np.testing.assert_allclose(mv(glob(ang), angd), axial(Ad @ T(A)), atol=1e-9)
    # A.4: inverse of A.3 as printed
    st, ct, ss, cs = np.sin(ang[:, 1]), np.cos(ang[:, 1]), np.sin(ang[:, 2]), np.cos(ang[:, 2])
    z = np.zeros_like(st)
    A4 = np.stack([np.stack([ss, cs, z], -1), np.stack([cs * st, -ss * st, z], -1),
                   np.stack([-ss * ct, -cs * ct, st], -1)], -2) / st[:, None, None]
    np.testing.assert_allclose(A4 @ R.euler313_rates_to_omega_body(ang),
                               np.broadcast_to(I3, A4.shape), atol=1e-9)


# ---------------------------------------------------------------------------------
# §1.10 quaternion product, relative parameters
# ---------------------------------------------------------------------------------
def test_quaternion_product(rng):
    p, q, r = unit_p(rng), unit_p(rng), unit_p(rng)
    pq = R.quat_product(p, q)
    np.testing.assert_allclose(R.A(pq), R.A(p) @ R.A(q), atol=1e-14)
    np.testing.assert_allclose(pq, np.einsum("nij,nj->ni", np.concatenate(
        [p[:, :, None], np.swapaxes(R.L(p), 1, 2)], -1), q), atol=1e-14)     # [p, L(p)ᵀ] q
    np.testing.assert_allclose(R.quat_product(pq, r), R.quat_product(p, R.quat_product(q, r)),
                               atol=1e-14)
    np.testing.assert_allclose(R.quat_product(p, R.quat_conj(p)),
                               np.broadcast_to([1.0, 0, 0, 0], p.shape), atol=1e-15)
    np.testing.assert_allclose(R.quat_product(p[0], q),
                               R.quat_product(np.broadcast_to(p[0], q.shape), q))


def test_relative_parameters(rng):
    pi_, pj = unit_p(rng), unit_p(rng)
    pij = R.relative(pi_, pj)
    T = lambda M: np.swapaxes(M, -1, -2)
    np.testing.assert_allclose(R.A(pij), T(R.A(pj)) @ R.A(pi_), atol=1e-14)          # 6.116
    np.testing.assert_allclose(pij[:, 0], np.sum(pi_ * pj, -1), atol=1e-15)   # e0ij = p_jᵀp_i
    np.testing.assert_allclose(pij, R.quat_product(R.quat_conj(pj), pi_), atol=1e-14)
    Ls = R.Lstar(pj)
    assert Ls.shape == (N, 4, 4)
    np.testing.assert_allclose(T(Ls) @ Ls, np.broadcast_to(np.eye(4), Ls.shape), atol=1e-14)
    # Prob 6.32: p_i = [p_j, L_jᵀ] p_ij
    back = np.einsum("nij,nj->ni", np.concatenate([pj[:, :, None], T(R.L(pj))], -1), pij)
    np.testing.assert_allclose(back, pi_, atol=1e-14)
    # L_j L_iᵀ = e0ij I + ẽij
    np.testing.assert_allclose(R.L(pj) @ T(R.L(pi_)),
                               pij[:, :1, None] * I3 + R.skew(pij[:, 1:]), atol=1e-14)


# ---------------------------------------------------------------------------------
# §1.7 A from points
# ---------------------------------------------------------------------------------
def test_A_from_points(rng):
    p = unit_p(rng)
    A = R.A(p)
    r = rng.normal(size=(N, 3))
    rA = r + 2.5 * A[:, :, 0]
    rB = r + 0.7 * A[:, :, 0] + 1.3 * A[:, :, 1]       # in the ξη plane, η side
    np.testing.assert_allclose(R.A_from_points(r, rA, rB), A, atol=1e-14)
    # measured (non-orthogonal) data are orthogonalised
    M = R.A_from_points(r, rA, rB + 1e-3 * A[:, :, 0])
    np.testing.assert_allclose(np.swapaxes(M, 1, 2) @ M, np.broadcast_to(I3, M.shape),
                               atol=1e-13)                # a few eps (observed 1.7e-16)
    np.testing.assert_allclose(np.linalg.det(M), 1.0, atol=1e-14)
    with pytest.raises(ValueError, match="coincides"):
        R.A_from_points([1, 2, 3], [1, 2, 3], [0, 0, 0])
    with pytest.raises(ValueError, match="coincides"):
        R.A_from_points([1, 2, 3], [2, 2, 3], [1, 2, 3])
    with pytest.raises(ValueError, match="collinear"):
        R.A_from_points([0, 0, 0], [1, 1, 1], [-2, -2, -2])


# ---------------------------------------------------------------------------------
# Chapter 6 worked examples and exercises (spec §4.1, §4.2; errata spec §6)
# ---------------------------------------------------------------------------------
def test_example_6_1():
    A = np.array([[0.5449, -0.5549, 0.6285], [0.3111, 0.8299, 0.4629], [-0.7785, -0.0567, 0.6249]])
    assert np.trace(A) == pytest.approx(1.9997, abs=1e-4)
    p = R.p_from_A(A)
    np.testing.assert_allclose(p, [0.866, -0.15, 0.406, 0.25], atol=1e-3)
    np.testing.assert_allclose(p, [0.8660, -0.1500, 0.4062, 0.2500], atol=1e-4)


def test_example_6_2_half_turn():
    A = np.array([[-0.280, -0.600, -0.749], [-0.600, -0.500, 0.625], [-0.749, 0.625, -0.220]])
    assert np.trace(A) == pytest.approx(-1.0, abs=1e-12)
    p = R.p_from_A(A)
    assert p[0] == pytest.approx(0.0, abs=1e-6)
    assert same_rotation(p, [0, 0.6, -0.5, -0.624], 1e-3)           # book (sign arbitrary, §6.13)
    assert same_rotation(p, [0, 0.5997, -0.5004, -0.6245], 1e-4)    # largest-square pivot


def test_example_6_3_points_with_misprint_corrected():
    r, rA, rB = [-0.10, 0.30, 0.25], [0.977, 1.665, 2.916], [-0.573, 2.539, -0.709]
    a, b = np.subtract(rA, r), np.subtract(rB, r)
    assert a @ b == pytest.approx(-0.0099, abs=1e-4)
    assert np.linalg.norm(a) == pytest.approx(3.183, abs=1e-3)
    assert np.linalg.norm(b) == pytest.approx(2.481, abs=1e-3)
    A = R.A_from_points(r, rA, rB)
    np.testing.assert_allclose(A[:, 0], [0.338, 0.429, 0.838], atol=1e-3)       # u_ξ
    np.testing.assert_allclose(A[:, 1], [-0.191, 0.902, -0.387], atol=2e-3)  # u_η, orthogonalised
    np.testing.assert_allclose(A[:, 2], [-0.9216, -0.0289, 0.3871], atol=1e-3)  # u_ζ
    assert A[1, 2] == pytest.approx(-0.029, abs=1e-3)   # book misprints a23 = −0.293 (spec §6.2)
    p = R.p_from_A(A)
    np.testing.assert_allclose(p, [0.8105, -0.1103, -0.5426, 0.1911], atol=1e-3)   # corrected p
    assert abs(p[1] - (-0.029)) > 0.05                   # not the misprint's e1
    # the spec's recomputation without orthogonalisation (u_η = b/‖b‖) to 1e-4
    ux, uy = a / np.linalg.norm(a), b / np.linalg.norm(b)
    pr = R.p_from_A(np.column_stack([ux, uy, np.cross(ux, uy)]))
    np.testing.assert_allclose(pr, [0.8105, -0.1103, -0.5426, 0.1911], atol=1e-4)


def test_problems_6_3_to_6_5_frames_from_vectors():
    # P6.3 / 6.6b: ξ and η vectors
    A = R.A_from_points(np.zeros(3), [0.1107, 0.3924, 1.1286], [-1.9450, 1.5330, -0.3422])
    np.testing.assert_allclose(A, [[0.0923, -0.7780, -0.6215], [0.3270, 0.6132, -0.7191],
                                   [0.9405, -0.1369, 0.3110]], atol=1e-4)
    np.testing.assert_allclose(R.p_from_A(A), [0.710, 0.205, -0.550, 0.389], atol=1e-3)
    # P6.4 / 6.6c: ξ and ζ vectors (η = ζ × ξ)
    a, c = np.array([0.6438, 2.3930, -1.6909]), np.array([-0.7796, -0.2077, -0.5908])
    A = R.A_from_points(np.zeros(3), a, np.cross(c, a))
    np.testing.assert_allclose(A, [[0.2146, 0.5883, -0.7796], [0.7977, -0.5662, -0.2077],
                                   [-0.5636, -0.5773, -0.5908]], atol=1e-4)
    np.testing.assert_allclose(R.p_from_A(A), [0.120, -0.770, -0.450, 0.436], atol=1e-3)
    # P6.5 / 6.6d: ξ vector and a vector d in the ξη plane
    A = R.A_from_points(np.zeros(3), [-1.0, 1.2, 0.5], [1.3, -0.6, 0.8])
    np.testing.assert_allclose(A[:, 0], [-0.6097, 0.7317, 0.3049], atol=1e-4)
    np.testing.assert_allclose(A[:, 1], [0.5329, 0.0937, 0.8410], atol=1e-4)
    np.testing.assert_allclose(A[:, 2], [0.5867, 0.6752, -0.4470], atol=1e-4)
    np.testing.assert_allclose(R.p_from_A(A), [0.0961, 0.4312, 0.7332, 0.5170], atol=1e-4)


def test_problems_6_7_6_8_6_23_direction_cosines():
    Aa = np.array([[-0.4590, 0.8376, -0.2962], [0.4908, 0.5170, 0.7014], [0.7406, 0.1766, -0.6483]])
    np.testing.assert_allclose(R.p_from_A(Aa), [0.320, -0.410, -0.810, -0.271], atol=1e-3)
    np.testing.assert_allclose(R.p_from_A(Aa.T), [0.320, 0.410, 0.810, 0.271], atol=1e-3)
    A8 = np.array([[0.0319, -0.8506, 0.5249], [-0.8506, -0.2988, -0.4327],
                   [0.5249, -0.4327, -0.7330]])
    p = R.p_from_A(A8)
    assert p[0] == pytest.approx(0.0, abs=1e-2)
    assert same_rotation(p, [0, 0.7183, -0.5921, 0.3654], 1e-3)
    # P6.23: η and ζ measured, ξ = η × ζ; gives the matrix of Ex 6.1
    sD, sF = np.array([-1.1098, 1.6598, -0.1134]), np.array([0.6285, 0.4629, 0.6249])
    A = R.A_from_points(np.zeros(3), np.cross(sD / 2, sF), sD)
    np.testing.assert_allclose(A, [[0.5449, -0.5549, 0.6285], [0.3111, 0.8299, 0.4629],
                                   [-0.7785, -0.0567, 0.6249]], atol=2e-4)
    np.testing.assert_allclose(R.p_from_A(A), [0.866, -0.150, 0.406, 0.250], atol=1e-3)


def test_problems_6_10_to_6_12_euler_angles():
    np.testing.assert_allclose(R.euler313_to_p(np.array([40, 30, -25]) * DEG),
                               [0.9577, 0.2183, 0.1391, 0.1261], atol=1e-4)          # P6.10
    np.testing.assert_allclose(R.euler313_to_A(np.array([45, 45, 30]) * DEG) @ [2, 6, 8],
                               [0.0053, -1.7985, 10.0382], atol=1e-4)                 # P6.11
    np.testing.assert_allclose(R.euler313_to_A(np.array([30, 30, 60]) * DEG).T @ [3, 3, 1],
                               [3.3056, -2.8236, 0.3170], atol=1e-4)                  # P6.12


def test_problems_6_15_6_16_angular_velocity_from_euler_rates():
    ang = np.array([120, 30, 90]) * DEG                                               # P6.15
    np.testing.assert_allclose(R.euler313_rates_to_omega_body(ang) @ [2, 0, 125],
                               [1.0, 0.0, 126.7321], atol=1e-4)
    np.testing.assert_allclose(R.euler313_rates_to_omega(ang) @ [2, 0, 125],
                               [54.1266, 31.25, 110.2532], atol=1e-4)
    # (b): A.4 fails for θ = nπ — the rate matrix is singular there
    assert abs(np.linalg.det(R.euler313_rates_to_omega_body([0.3, 0.0, 0.4]))) < 1e-15
    ang = np.array([60, 30, 120]) * DEG                                               # P6.16
    wb = np.array([0.0, 2.0, 20.0])
    np.testing.assert_allclose(R.euler313_to_A(ang) @ wb, [8.5442, -6.9330, 16.8205], atol=1e-4)
    np.testing.assert_allclose(np.linalg.solve(R.euler313_rates_to_omega_body(ang), wb),
                               [-2.0, -1.7321, 21.7321], atol=1e-4)


def test_problems_6_20_to_6_22():
    p = R.axis_angle_to_p([2.0, -3.0, 2.0], 30 * DEG)                                  # P6.20
    np.testing.assert_allclose(p, [0.9659, 0.1255, -0.1883, 0.1255], atol=1e-4)
    np.testing.assert_allclose(R.A(p) @ [3, 4, 12], [-2.4540, 0.8557, 12.7376], atol=1e-4)
    ang = R.p_to_euler313(R.normalize([0.6533, 0.3827, 0.0, 0.6533]))                  # P6.21
    np.testing.assert_allclose(ang / DEG, [45, 45, 45], atol=1e-2)
    ang = R.p_to_euler313([0.8, 0.0, 0.0, 0.6])                                        # P6.22
    assert ang[1] == 0.0 and ang[2] == 0.0                  # θ = 0: singular, σ := 0
    assert ang[0] / DEG == pytest.approx(73.74, abs=1e-2)  # only ψ + σ is defined


# ---------------------------------------------------------------------------------
# orientation_from_spec / orientation_to_spec (model files)
# ---------------------------------------------------------------------------------
P_REF = R.normalize([0.8, -0.2, 0.5, 0.25])


@pytest.mark.parametrize("spec", [
    list(P_REF),
    tuple(P_REF),
    np.array(P_REF),
    {"euler_parameters": list(P_REF)},
    {"axis": list(R.p_to_axis_angle(P_REF)[0] * 3.0), "angle": float(R.p_to_axis_angle(P_REF)[1]),
     "unit": "rad"},
    {"axis": list(R.p_to_axis_angle(P_REF)[0]), "angle": float(R.p_to_axis_angle(P_REF)[1] / DEG),
     "unit": "deg"},
    {"euler_313": list(R.p_to_euler313(P_REF) / DEG), "unit": "deg"},
    {"euler_313": list(R.p_to_euler313(P_REF)), "unit": "rad"},
    {"bryant_123": list(R.p_to_bryant123(P_REF) / DEG), "unit": "deg"},
    {"bryant_123": list(R.p_to_bryant123(P_REF)), "unit": "rad"},
    {"matrix": R.A(P_REF).tolist()},
    {"matrix": np.round(R.A(P_REF), 7).tolist()},
    {"points": {"origin": [1.0, 2.0, 3.0],
                "x_axis_point": list(np.array([1.0, 2.0, 3.0]) + 2 * R.A(P_REF)[:, 0]),
                "xy_plane_point": list(np.array([1.0, 2.0, 3.0]) - R.A(P_REF)[:, 0]
                                       + 0.5 * R.A(P_REF)[:, 1])}},
], ids=["list", "tuple", "array", "euler_parameters", "axis-rad", "axis-deg", "313-deg", "313-rad",
        "123-deg", "123-rad", "matrix", "matrix-rounded", "points"])
def test_orientation_forms(spec):
    notes: list[str] = []
    p = OS.orientation_from_spec(spec, "bodies[0].orientation", notes=notes)
    assert isinstance(p, np.ndarray) and p.shape == (4,)
    assert np.linalg.norm(p) == pytest.approx(1.0, abs=1e-13)     # observed 2.2e-16
    # the matrix rounded to 7 decimals moves p by ~1e-8 (observed 1.4e-8)
    tol = 1e-5 if "matrix" in spec and spec["matrix"] != R.A(P_REF).tolist() else 1e-12
    np.testing.assert_allclose(p, P_REF, atol=tol)
    assert notes == []


def test_orientation_simple_values():
    qz = [math.sqrt(0.5), 0, 0, math.sqrt(0.5)]      # quarter turn about z
    for spec in ({"axis": [0, 0, 2], "angle": 90, "unit": "deg"},
                 {"euler_313": [90, 0, 0], "unit": "deg"},
                 {"euler_313": [0, 0, math.pi / 2], "unit": "rad"},
                 {"bryant_123": [0, 0, math.pi / 2], "unit": "rad"},
                 {"matrix": [[0, -1, 0], [1, 0, 0], [0, 0, 1]]},
                 {"points": {"origin": [5, 5, 5], "x_axis_point": [5, 7, 5],
                             "xy_plane_point": [3, 8, 5]}}):
        np.testing.assert_allclose(OS.orientation_from_spec(spec, "o"), qz, atol=1e-15)
    np.testing.assert_allclose(OS.orientation_from_spec([1, 0, 0, 0], "o"), [1, 0, 0, 0])
    # integers accepted, a half turn given as a matrix
    half_x = {"matrix": [[1, 0, 0], [0, -1, 0], [0, 0, -1]]}
    np.testing.assert_allclose(OS.orientation_from_spec(half_x, "o"), [0, 1, 0, 0], atol=1e-15)


def test_orientation_near_unit_normalised_with_note():
    notes: list[str] = []
    p = OS.orientation_from_spec([0.9999998, 0, 0, 0], "bodies[2].orientation", notes=notes)
    np.testing.assert_allclose(p, [1, 0, 0, 0], atol=0)
    assert notes == ["bodies[2].orientation: Euler parameters normalised (norm was 0.9999998)"]
    notes = []
    p = OS.orientation_from_spec({"euler_parameters": [0.6, 0.8000004, 0, 0]}, "b.orientation",
                                notes=notes)
    assert np.linalg.norm(p) == pytest.approx(1.0, abs=1e-15)
    assert len(notes) == 1
    assert notes[0].startswith("b.orientation.euler_parameters: Euler parameters normalised")
    # exact unit length (to 1e-12): no note; notes=None is accepted
    notes = []
    OS.orientation_from_spec(list(P_REF), "b", notes=notes)
    assert notes == []
    OS.orientation_from_spec([0.9999998, 0, 0, 0], "b", notes=None)


@pytest.mark.parametrize("spec, match", [
    ([1.2, 0, 0, 0], r"^o: .*far from unit length \(norm 1\.2\)"),
    ({"euler_parameters": [0, 0, 0, 0]}, r"^o\.euler_parameters: .*far from unit length"),
    ([1, 0, 0], r"^o: expected 4 numbers, got 3"),
    ([1, 0, "x", 0], r"^o\[2\]: expected a number"),
    ([1, 0, True, 0], r"^o\[2\]: expected a number"),
    ([float("nan"), 0, 0, 0], r"^o\[0\]: expected a finite number"),
    ({"euler_parameters": [1, 0, float("inf"), 0]},
     r"^o\.euler_parameters\[2\]: expected a finite"),
    ("identity", r"^o: expected 4 Euler parameters or a mapping"),
    (None, r"^o: expected 4 Euler parameters or a mapping"),
    (1.0, r"^o: expected 4 Euler parameters or a mapping"),
    ({}, r"^o: expected one of the keys"),
    ({"unit": "deg"}, r"^o: expected one of the keys"),
    ({"quaternion": [1, 0, 0, 0]}, r"^o\.quaternion: unknown key"),
    ({"axis": [0, 0, 1], "angle": 1, "unit": "rad", "euler_313": [0, 0, 0]},
     r"^o\.euler_313: give only one orientation form.*'axis' and 'euler_313'"),
    ({"matrix": np.eye(3).tolist(), "unit": "deg"}, r"^o\.unit: not used with 'matrix'"),
    ({"euler_313": [0, 0, 0], "angle": 3, "unit": "deg"}, r"^o\.angle: not used with 'euler_313'"),
    ({"axis": [0, 0, 1], "angle": 30}, r"^o\.unit: required: deg or rad"),
    ({"euler_313": [10, 20, 30]}, r"^o\.unit: required: deg or rad"),
    ({"bryant_123": [10, 20, 30]}, r"^o\.unit: required: deg or rad"),
    ({"bryant_123": [10, 20, 30], "unit": "degrees"}, r"^o\.unit: expected deg or rad"),
    ({"euler_313": [10, 20, 30], "unit": None}, r"^o\.unit: expected deg or rad"),
    ({"axis": [0, 0, 0], "angle": 30, "unit": "deg"}, r"^o\.axis: .*non-zero length"),
    ({"axis": [0, 0], "angle": 30, "unit": "deg"}, r"^o\.axis: expected 3 numbers, got 2"),
    ({"axis": [0, 0, 1], "unit": "deg"}, r"^o\.angle: required"),
    ({"axis": [0, 0, 1], "angle": "30", "unit": "deg"}, r"^o\.angle: expected a number"),
    ({"axis": [0, 0, 1], "angle": float("nan"), "unit": "deg"}, r"^o\.angle: expected a finite"),
    ({"euler_313": [10, 20], "unit": "deg"}, r"^o\.euler_313: expected 3 numbers, got 2"),
    ({"bryant_123": [10, 20, "a"], "unit": "deg"}, r"^o\.bryant_123\[2\]: expected a number"),
    ({"matrix": [[1, 0, 0], [0, 1, 0]]}, r"^o\.matrix: expected 3 rows"),
    ({"matrix": [[1, 0, 0], [0, 1, 0], [0, 0]]}, r"^o\.matrix\[2\]: expected 3 numbers, got 2"),
    ({"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, float("inf")]]},
     r"^o\.matrix\[2\]\[2\]: expected a finite"),
    ({"matrix": "eye"}, r"^o\.matrix: expected a list"),
    ({"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, -1]]}, r"^o\.matrix: a reflection"),
    ({"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, 1.01]]}, r"^o\.matrix: not orthonormal"),
    ({"matrix": [[0.7071, -0.7071, 0], [0.7071, 0.7071, 0], [0, 0, 1]]},
     r"^o\.matrix: not orthonormal"),
    ({"points": {"origin": [0, 0, 0], "x_axis_point": [0, 0, 0], "xy_plane_point": [0, 1, 0]}},
     r"^o\.points\.x_axis_point: .*coincides with the origin"),
    ({"points": {"origin": [1, 1, 1], "x_axis_point": [2, 1, 1], "xy_plane_point": [1, 1, 1]}},
     r"^o\.points\.xy_plane_point: .*coincides with the origin"),
    ({"points": {"origin": [0, 0, 0], "x_axis_point": [1, 0, 0], "xy_plane_point": [-3, 0, 0]}},
     r"^o\.points\.xy_plane_point: .*collinear"),
    ({"points": {"origin": [0, 0, 0], "x_axis_point": [1, 0, 0]}},
     r"^o\.points\.xy_plane_point: required key is missing"),
    ({"points": {"origin": [0, 0, 0], "x_axis_point": [1, 0, 0], "xy_plane_point": [0, 1, 0],
                 "z": [0, 0, 1]}}, r"^o\.points\.z: unknown key"),
    ({"points": {"origin": [0, 0], "x_axis_point": [1, 0, 0], "xy_plane_point": [0, 1, 0]}},
     r"^o\.points\.origin: expected 3 numbers, got 2"),
    ({"points": [[0, 0, 0], [1, 0, 0], [0, 1, 0]]}, r"^o\.points: expected a mapping"),
])
def test_orientation_errors(spec, match):
    with pytest.raises(ModelError, match=match) as exc:
        OS.orientation_from_spec(spec, "o")
    assert exc.value.path.startswith("o")


def test_orientation_error_path_is_the_key_path():
    with pytest.raises(ModelError) as exc:
        OS.orientation_from_spec({"euler_313": [1, 2, 3]}, "bodies[4].orientation")
    assert exc.value.path == "bodies[4].orientation.unit"
    with pytest.raises(ModelError) as exc:
        OS.orientation_from_spec({"matrix": [[1, 0, 0], [0, 1, 0], [0, 0, -1]]},
                                "bodies[1].orientation")
    assert exc.value.path == "bodies[1].orientation.matrix"


def test_orientation_to_spec_round_trip():
    d = OS.orientation_to_spec(np.array(P_REF))
    assert list(d) == ["euler_parameters"]
    assert all(type(x) is float for x in d["euler_parameters"])
    np.testing.assert_allclose(OS.orientation_from_spec(d, "o"), P_REF, atol=0)
    with pytest.raises(ValueError):
        OS.orientation_to_spec([1.0, 0.0, 0.0])
