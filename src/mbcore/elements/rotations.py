"""Rotation toolkit for spatial bodies with Euler parameters (Nikravesh (1988),
Ch. 6, App. A-B; docs/references.md).

Euler parameters ``p = [e0, e1, e2, e3]`` (scalar first).  Every function is
vectorised over leading axes: ``p`` of shape ``(..., 4)`` gives ``(..., 3, 3)``
matrices etc.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import numpy as np

if TYPE_CHECKING:       # numpy.typing costs ~0.5 ms of the first spatial run
    from numpy.typing import ArrayLike



def skew(a: np.ndarray) -> np.ndarray:
    """ã with ã b = a × b (Nikravesh (1988), Eq. 2.43); a (..., 3) -> (..., 3, 3)."""
    a = np.asarray(a, dtype=float)
    out = np.zeros(a.shape + (3,))
    out[..., 0, 1] = -a[..., 2]
    out[..., 0, 2] = a[..., 1]
    out[..., 1, 0] = a[..., 2]
    out[..., 1, 2] = -a[..., 0]
    out[..., 2, 0] = -a[..., 1]
    out[..., 2, 1] = a[..., 0]
    return out


def G(p: np.ndarray) -> np.ndarray:
    """G(p) = [-e, ẽ + e0 I] (Nikravesh (1988), Eq. 6.38); ω = 2 G ṗ.  (..., 4) -> (..., 3, 4)."""
    p = np.asarray(p, dtype=float)
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return np.stack([np.stack([-e1, e0, -e3, e2], -1),
                     np.stack([-e2, e3, e0, -e1], -1),
                     np.stack([-e3, -e2, e1, e0], -1)], -2)


def L(p: np.ndarray) -> np.ndarray:
    """L(p) = [-e, -ẽ + e0 I] (Nikravesh (1988), Eq. 6.39); ω' = 2 L ṗ.  (..., 4) -> (..., 3, 4)."""
    p = np.asarray(p, dtype=float)
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return np.stack([np.stack([-e1, e0, e3, -e2], -1),
                     np.stack([-e2, -e3, e0, e1], -1),
                     np.stack([-e3, e2, -e1, e0], -1)], -2)


def A(p: np.ndarray) -> np.ndarray:
    """Transformation matrix A(p) from the explicit form Nikravesh (1988), Eq. 6.18/6.19
    (s = A s'); (..., 4) -> (..., 3, 3)."""
    p = np.asarray(p, dtype=float)
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return 2.0 * np.stack([
        np.stack([e0 * e0 + e1 * e1 - 0.5, e1 * e2 - e0 * e3, e1 * e3 + e0 * e2], -1),
        np.stack([e1 * e2 + e0 * e3, e0 * e0 + e2 * e2 - 0.5, e2 * e3 - e0 * e1], -1),
        np.stack([e1 * e3 - e0 * e2, e2 * e3 + e0 * e1, e0 * e0 + e3 * e3 - 0.5], -1)], -2)


# ---------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------
def _f(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _mv(M: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Matrix-vector product over leading axes."""
    return np.einsum("...ij,...j->...i", M, v)


def _T(M: np.ndarray) -> np.ndarray:
    return np.swapaxes(M, -1, -2)


def _mat3(rows: Sequence[Sequence[np.ndarray]]) -> np.ndarray:
    """Stack a nested 3x3 list of (broadcastable) arrays into (..., 3, 3)."""
    cols = [np.broadcast_arrays(*r) for r in rows]
    return np.stack([np.stack(r, -1) for r in cols], -2)


# ---------------------------------------------------------------------------------
# 4x4 operators and derivatives of A a' (Nikravesh (1988), §6.2.1)
# ---------------------------------------------------------------------------------
def aplus(a: ArrayLike) -> np.ndarray:
    """a⁺ = [[0, −aᵀ], [a, ã]] (Nikravesh (1988), Eq. 6.64); Gᵀa = a⁺ p.  (..., 3) -> (..., 4, 4)."""
    a = _f(a)
    out = np.zeros(a.shape[:-1] + (4, 4))
    out[..., 0, 1:] = -a
    out[..., 1:, 0] = a
    out[..., 1:, 1:] = skew(a)
    return out


def aminus(a: ArrayLike) -> np.ndarray:
    """a⁻ = [[0, −aᵀ], [a, −ã]] (Nikravesh (1988), Eq. 6.65); Lᵀa = a⁻ p.  (..., 3) -> (..., 4, 4)."""
    a = _f(a)
    out = np.zeros(a.shape[:-1] + (4, 4))
    out[..., 0, 1:] = -a
    out[..., 1:, 0] = a
    out[..., 1:, 1:] = -skew(a)
    return out


def Bm(p: ArrayLike, a: ArrayLike) -> np.ndarray:
    """Modified block 2 G(p) a'⁻ = ∂(G Lᵀ a')/∂p (Nikravesh (1988), Eq. 7.34); (..., 3, 4)."""
    return 2.0 * (G(p) @ aminus(a))


def Bf(p: ArrayLike, a: ArrayLike) -> np.ndarray:
    """Full block ∂(A a')/∂p = 2 G a'⁻ + 2 a' pᵀ with A from Eq. 6.18 (Nikravesh (1988), Eq. 6.86);
    (..., 3, 4)."""
    p, a = _f(p), _f(a)
    return Bm(p, a) + 2.0 * a[..., :, None] * p[..., None, :]


# ---------------------------------------------------------------------------------
# Angular velocity and acceleration (Nikravesh (1988), §6.3)
# ---------------------------------------------------------------------------------
def omega_from_pdot(p: ArrayLike, pd: ArrayLike) -> np.ndarray:
    """Global ω = 2 G ṗ (Nikravesh (1988), Eq. 6.104)."""
    return 2.0 * _mv(G(p), _f(pd))


def omega_body_from_pdot(p: ArrayLike, pd: ArrayLike) -> np.ndarray:
    """Body ω' = 2 L ṗ (Nikravesh (1988), Eq. 6.107)."""
    return 2.0 * _mv(L(p), _f(pd))


def pdot_from_omega(p: ArrayLike, w: ArrayLike) -> np.ndarray:
    """ṗ = ½ Gᵀ ω (Nikravesh (1988), Eq. 6.106)."""
    return 0.5 * _mv(_T(G(p)), _f(w))


def pdot_from_omega_body(p: ArrayLike, wb: ArrayLike) -> np.ndarray:
    """ṗ = ½ Lᵀ ω' (Nikravesh (1988), Eq. 6.109)."""
    return 0.5 * _mv(_T(L(p)), _f(wb))


def pddot_from_omegadot(p: ArrayLike, w: ArrayLike, wd: ArrayLike) -> np.ndarray:
    """p̈ = ½ Gᵀ ω̇ − ¼ (ωᵀω) p (Nikravesh (1988), Eq. 6.112)."""
    p, w = _f(p), _f(w)
    return 0.5 * _mv(_T(G(p)), _f(wd)) - 0.25 * np.sum(w * w, -1)[..., None] * p


def pddot_from_omegadot_body(p: ArrayLike, wb: ArrayLike, wbd: ArrayLike) -> np.ndarray:
    """p̈ = ½ Lᵀ ω̇' − ¼ (ω'ᵀω') p (Nikravesh (1988), Eq. 6.113)."""
    p, wb = _f(p), _f(wb)
    return 0.5 * _mv(_T(L(p)), _f(wbd)) - 0.25 * np.sum(wb * wb, -1)[..., None] * p


def Adot(p: ArrayLike, pd: ArrayLike) -> np.ndarray:
    """Ȧ = 2 Ġ Lᵀ = 2 G(ṗ) L(p)ᵀ (Nikravesh (1988), Eq. 6.56); (..., 3, 3)."""
    return 2.0 * (G(pd) @ _T(L(p)))


# ---------------------------------------------------------------------------------
# Quaternion algebra and relative parameters (Nikravesh (1988), §6.5; TAM 674 (2003),
# lecture of 28 April)
# ---------------------------------------------------------------------------------
def quat_product(p: ArrayLike, q: ArrayLike) -> np.ndarray:
    """p ⊗ q = [p0q0 − p·q; p0 q + q0 p + p × q]; A(p ⊗ q) = A(p) A(q) (TAM 674 (2003),
    lecture of 28 April)."""
    p, q = _f(p), _f(q)
    p0, pv, q0, qv = p[..., :1], p[..., 1:], q[..., :1], q[..., 1:]
    s = p0 * q0 - np.sum(pv * qv, -1, keepdims=True)
    v = p0 * qv + q0 * pv + np.cross(pv, qv)
    return np.concatenate([s, v], -1)


def quat_conj(p: ArrayLike) -> np.ndarray:
    """conj(p) = [e0; −e] (the inverse rotation)."""
    p = _f(p)
    return np.concatenate([p[..., :1], -p[..., 1:]], -1)


def Lstar(p: ArrayLike) -> np.ndarray:
    """L*(p) = [pᵀ; L(p)] (4×4, orthogonal; Nikravesh (1988), Eq. 6.122)."""
    p = _f(p)
    return np.concatenate([p[..., None, :], L(p)], -2)


def relative(p_i: ArrayLike, p_j: ArrayLike) -> np.ndarray:
    """p_ij = L*_j p_i = conj(p_j) ⊗ p_i, with A(p_ij) = A_jᵀ A_i (Nikravesh (1988), §6.5,
    Eqs. 6.116-6.122)."""
    return _mv(Lstar(p_j), _f(p_i))


# ---------------------------------------------------------------------------------
# Normalisation, A -> p, axis-angle (Nikravesh (1988), §6.1.4, §13.2.1, Prob. 6.19)
# ---------------------------------------------------------------------------------
def normalize(p: ArrayLike) -> np.ndarray:
    """p / ‖p‖ (Nikravesh (1988), Eqs. 13.8-13.11).  Raises ValueError for p = 0."""
    p = _f(p)
    n = np.linalg.norm(p, axis=-1, keepdims=True)
    if np.any(n == 0.0) or not np.all(np.isfinite(n)):
        raise ValueError("cannot normalise Euler parameters of zero or non-finite length")
    return p / n


def _fix_sign(p: np.ndarray, p_ref: ArrayLike | None) -> np.ndarray:
    """e0 ≥ 0, or pᵀp_ref > 0 when a reference is given (sign continuity: p and −p are
    the same orientation, Nikravesh (1988), Prob. 6.9)."""
    if p_ref is None:
        flip = p[..., 0] < 0.0
    else:
        flip = np.sum(p * _f(p_ref), -1) < 0.0
    return np.where(flip[..., None], -p, p)


def p_from_A(A_: ArrayLike, p_ref: ArrayLike | None = None) -> np.ndarray:
    """Euler parameters from a rotation matrix (Nikravesh (1988), Eqs. 6.24-6.28), robust
    branch: pivot on the largest of e0², e1², e2², e3².  Result unit length, e0 ≥ 0,
    or with pᵀp_ref > 0 when ``p_ref`` is given.  (..., 3, 3) -> (..., 4)."""
    a = _f(A_)
    tr = a[..., 0, 0] + a[..., 1, 1] + a[..., 2, 2]
    P = np.empty(a.shape[:-2] + (4, 4))          # P = 4 p pᵀ (Eqs. 6.24-6.28)
    P[..., 0, 0] = 1.0 + tr
    P[..., 1, 1] = 1.0 + 2.0 * a[..., 0, 0] - tr
    P[..., 2, 2] = 1.0 + 2.0 * a[..., 1, 1] - tr
    P[..., 3, 3] = 1.0 + 2.0 * a[..., 2, 2] - tr
    P[..., 0, 1] = P[..., 1, 0] = a[..., 2, 1] - a[..., 1, 2]
    P[..., 0, 2] = P[..., 2, 0] = a[..., 0, 2] - a[..., 2, 0]
    P[..., 0, 3] = P[..., 3, 0] = a[..., 1, 0] - a[..., 0, 1]
    P[..., 1, 2] = P[..., 2, 1] = a[..., 1, 0] + a[..., 0, 1]
    P[..., 1, 3] = P[..., 3, 1] = a[..., 2, 0] + a[..., 0, 2]
    P[..., 2, 3] = P[..., 3, 2] = a[..., 2, 1] + a[..., 1, 2]
    k = np.argmax(np.diagonal(P, axis1=-2, axis2=-1), axis=-1)
    row = np.take_along_axis(P, k[..., None, None], axis=-2)[..., 0, :]   # = 4 e_k p
    return _fix_sign(normalize(row), p_ref)


def axis_angle_to_p(axis: ArrayLike, angle: ArrayLike) -> np.ndarray:
    """p = [cos(φ/2); u sin(φ/2)] with u = axis/‖axis‖ (Nikravesh (1988), Eq. 6.15).
    Raises ValueError for a zero axis."""
    axis, angle = _f(axis), _f(angle)
    n = np.linalg.norm(axis, axis=-1, keepdims=True)
    if np.any(n == 0.0):
        raise ValueError("rotation axis has zero length")
    h = 0.5 * angle[..., None]
    u = axis / n
    v = np.sin(h) * u
    return np.concatenate([np.broadcast_to(np.cos(h), v.shape[:-1] + (1,)), v], -1)


def p_to_axis_angle(p: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(u, φ) with φ = 2 atan2(‖e‖, e0) ∈ [0, π] (sign of p chosen with e0 ≥ 0) and
    u = e/‖e‖; u = [1, 0, 0] for φ = 0 (Nikravesh (1988), Eq. 6.15, Prob. 6.19)."""
    p = _fix_sign(_f(p), None)
    e = p[..., 1:]
    n = np.linalg.norm(e, axis=-1)
    phi = 2.0 * np.arctan2(n, p[..., 0])
    safe = np.where(n > 0.0, n, 1.0)[..., None]
    u = np.where((n > 0.0)[..., None], e / safe, np.array([1.0, 0.0, 0.0]))
    return u, phi


# ---------------------------------------------------------------------------------
# Euler angles 3-1-3 (Nikravesh (1988), App. A.1, App. B) and Bryant angles 1-2-3
# (App. A.2, Probs. 6.17-6.18).
# Angles are passed and returned as arrays (..., 3): [ψ, θ, σ] resp. [φ1, φ2, φ3].
# ---------------------------------------------------------------------------------
_SINGULAR_TOL = 1e-12   # |sin θ| resp. |cos φ2| below which the angles are singular


def _angles(angles: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a = _f(angles)
    if a.shape[-1:] != (3,):
        raise ValueError(f"expected angles of shape (..., 3), got {a.shape}")
    return a[..., 0], a[..., 1], a[..., 2]


def euler313_to_A(angles: ArrayLike) -> np.ndarray:
    """A = Rz(ψ) Rx(θ) Rz(σ) from [ψ, θ, σ] (Nikravesh (1988), Eq. A.1)."""
    psi, th, sig = _angles(angles)
    cp, sp, ct, st, cs, ss = np.cos(psi), np.sin(psi), np.cos(th), np.sin(th), \
        np.cos(sig), np.sin(sig)
    return _mat3([[cp * cs - sp * ct * ss, -cp * ss - sp * ct * cs, sp * st],
                  [sp * cs + cp * ct * ss, -sp * ss + cp * ct * cs, -cp * st],
                  [st * ss, st * cs, ct]])


def A_to_euler313(A_: ArrayLike) -> np.ndarray:
    """[ψ, θ, σ] with θ ∈ [0, π], ψ, σ ∈ (−π, π] (Nikravesh (1988), Eq. A.2 with atan2).
    Singular case sin θ = 0: σ = 0 and ψ = atan2(a21, a11).  ψ is taken from
    A Rz(σ)ᵀ = Rz(ψ) Rx(θ), which stays accurate near the singularity."""
    a = _f(A_)
    st = np.hypot(a[..., 0, 2], a[..., 1, 2])
    th = np.arctan2(st, a[..., 2, 2])
    sig = np.where(st > _SINGULAR_TOL, np.arctan2(a[..., 2, 0], a[..., 2, 1]), 0.0)
    cs, ss = np.cos(sig), np.sin(sig)
    psi = np.arctan2(a[..., 1, 0] * cs - a[..., 1, 1] * ss, a[..., 0, 0] * cs - a[..., 0, 1] * ss)
    return np.stack([psi, th, sig], -1)


def euler313_to_p(angles: ArrayLike) -> np.ndarray:
    """Euler parameters from [ψ, θ, σ] (Nikravesh (1988), App. B.1, Eqs. B.1-B.4)."""
    psi, th, sig = _angles(angles)
    ch, sh = np.cos(0.5 * th), np.sin(0.5 * th)
    s, d = 0.5 * (psi + sig), 0.5 * (psi - sig)
    return np.stack(np.broadcast_arrays(ch * np.cos(s), sh * np.cos(d), sh * np.sin(d),
                                        ch * np.sin(s)), -1)


def p_to_euler313(p: ArrayLike) -> np.ndarray:
    """[ψ, θ, σ] from Euler parameters (Nikravesh (1988), App. B.2, Eqs. B.5-B.11 with
    atan2); singular case as in :func:`A_to_euler313`."""
    return A_to_euler313(A(normalize(p)))


def bryant123_to_A(angles: ArrayLike) -> np.ndarray:
    """A = Rx(φ1) Ry(φ2) Rz(φ3) from [φ1, φ2, φ3] (Nikravesh (1988), Eq. A.5)."""
    f1, f2, f3 = _angles(angles)
    c1, s1, c2, s2, c3, s3 = np.cos(f1), np.sin(f1), np.cos(f2), np.sin(f2), \
        np.cos(f3), np.sin(f3)
    return _mat3([[c2 * c3, -c2 * s3, s2],
                  [c1 * s3 + s1 * s2 * c3, c1 * c3 - s1 * s2 * s3, -s1 * c2],
                  [s1 * s3 - c1 * s2 * c3, s1 * c3 + c1 * s2 * s3, c1 * c2]])


def A_to_bryant123(A_: ArrayLike) -> np.ndarray:
    """[φ1, φ2, φ3] with φ2 ∈ [−π/2, π/2] (Nikravesh (1988), Eq. A.6 with atan2).
    Singular case cos φ2 = 0: φ3 = 0 and φ1 = atan2(a32, a22); φ1 is taken from
    A Rz(φ3)ᵀ = Rx(φ1) Ry(φ2), which stays accurate near the singularity."""
    a = _f(A_)
    c2 = np.hypot(a[..., 0, 0], a[..., 0, 1])
    f2 = np.arctan2(a[..., 0, 2], c2)
    f3 = np.where(c2 > _SINGULAR_TOL, np.arctan2(-a[..., 0, 1], a[..., 0, 0]), 0.0)
    c3, s3 = np.cos(f3), np.sin(f3)
    f1 = np.arctan2(a[..., 2, 0] * s3 + a[..., 2, 1] * c3, a[..., 1, 0] * s3 + a[..., 1, 1] * c3)
    return np.stack([f1, f2, f3], -1)


def bryant123_to_p(angles: ArrayLike) -> np.ndarray:
    """Euler parameters from [φ1, φ2, φ3] (Nikravesh (1988), Prob. 6.17, in closed form)."""
    f1, f2, f3 = _angles(angles)
    c1, c2, c3 = np.cos(0.5 * f1), np.cos(0.5 * f2), np.cos(0.5 * f3)
    s1, s2, s3 = np.sin(0.5 * f1), np.sin(0.5 * f2), np.sin(0.5 * f3)
    return np.stack([c1 * c2 * c3 - s1 * s2 * s3, s1 * c2 * c3 + c1 * s2 * s3,
                     c1 * s2 * c3 - s1 * c2 * s3, c1 * c2 * s3 + s1 * s2 * c3], -1)


def p_to_bryant123(p: ArrayLike) -> np.ndarray:
    """[φ1, φ2, φ3] from Euler parameters (Nikravesh (1988), Prob. 6.18); singular case
    as in :func:`A_to_bryant123`."""
    return A_to_bryant123(A(normalize(p)))


def euler313_rates_to_omega_body(angles: ArrayLike) -> np.ndarray:
    """Matrix of Nikravesh (1988), Eq. A.3: ω' = M [ψ̇, θ̇, σ̇]; (..., 3, 3)."""
    _, th, sig = _angles(angles)
    st, ct, ss, cs = np.sin(th), np.cos(th), np.sin(sig), np.cos(sig)
    z, o = np.zeros_like(th), np.ones_like(th)
    return _mat3([[st * ss, cs, z], [st * cs, -ss, z], [ct, z, o]])


def euler313_rates_to_omega(angles: ArrayLike) -> np.ndarray:
    """Global ω = M [ψ̇, θ̇, σ̇] (the global form of Nikravesh (1988), Eq. A.3); (..., 3, 3)."""
    psi, th, _ = _angles(angles)
    sp, cp, st, ct = np.sin(psi), np.cos(psi), np.sin(th), np.cos(th)
    z, o = np.zeros_like(th), np.ones_like(th)
    return _mat3([[z, cp, sp * st], [z, sp, -cp * st], [o, z, ct]])


def bryant123_rates_to_omega_body(angles: ArrayLike) -> np.ndarray:
    """Matrix of Nikravesh (1988), Eq. A.7: ω' = M [φ̇1, φ̇2, φ̇3]; (..., 3, 3)."""
    _, f2, f3 = _angles(angles)
    c2, s2, c3, s3 = np.cos(f2), np.sin(f2), np.cos(f3), np.sin(f3)
    z, o = np.zeros_like(f2), np.ones_like(f2)
    return _mat3([[c2 * c3, s3, z], [-c2 * s3, c3, z], [s2, z, o]])


def bryant123_rates_to_omega(angles: ArrayLike) -> np.ndarray:
    """Global ω = M [φ̇1, φ̇2, φ̇3] (ω = A ω' with Nikravesh (1988), Eq. A.7); (..., 3, 3)."""
    f1, f2, _ = _angles(angles)
    c1, s1, c2, s2 = np.cos(f1), np.sin(f1), np.cos(f2), np.sin(f2)
    z, o = np.zeros_like(f1), np.ones_like(f1)
    return _mat3([[o, z, s2], [z, c1, -s1 * c2], [z, s1, c1 * c2]])


# ---------------------------------------------------------------------------------
# A from measured points (Nikravesh (1988), §6.1.5, Eqs. 6.30-6.33)
# ---------------------------------------------------------------------------------
class PointsError(ValueError):
    """Bad points for :func:`A_from_points`; ``which`` is ``"x_axis_point"`` or
    ``"xy_plane_point"`` (the point to blame)."""

    def __init__(self, which: str, message: str):
        self.which = which
        super().__init__(message)


_COLLINEAR_TOL = 1e-9    # sine of the angle between a and b below which they are parallel


def A_from_points(r: ArrayLike, rA: ArrayLike, rB: ArrayLike) -> np.ndarray:
    """A = [u_ξ, u_η, u_ζ] from the origin r, a point rA on ξ and a point rB in the
    ξη plane (on η's side): u_ξ = a/‖a‖, u_ζ = ã b/‖ã b‖, u_η = ũ_ζ u_ξ (orthogonalised;
    Nikravesh (1988), Eqs. 6.30-6.33).  Raises :class:`PointsError` (a ValueError) for
    coincident or collinear points.  (..., 3) -> (..., 3, 3)."""
    r, rA, rB = _f(r), _f(rA), _f(rB)
    a, b = rA - r, rB - r
    scale = np.maximum(1.0, np.maximum(np.abs(r).max(-1), np.maximum(np.abs(rA).max(-1),
                                                                     np.abs(rB).max(-1))))
    na, nb = np.linalg.norm(a, axis=-1), np.linalg.norm(b, axis=-1)
    if np.any(na <= 1e-12 * scale):
        raise PointsError("x_axis_point", "the point on the x axis coincides with the origin")
    if np.any(nb <= 1e-12 * scale):
        raise PointsError("xy_plane_point", "the point in the xy plane coincides with the origin")
    c = np.cross(a, b)
    nc = np.linalg.norm(c, axis=-1)
    if np.any(nc <= _COLLINEAR_TOL * na * nb):
        raise PointsError("xy_plane_point", "the three points are collinear (the point in the "
                                            "xy plane lies on the x axis)")
    ux = a / na[..., None]
    uz = c / nc[..., None]
    uy = np.cross(uz, ux)
    return np.stack([ux, uy, uz], -1)
