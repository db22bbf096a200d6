"""Spatial kinematics shared by the spatial element types (constraints, composite
joints, forces): vectorised quaternion helpers, jets of body points and vectors
(value, ω′-Jacobian, rate, quadratic velocity term; Nikravesh (1988), §7.3, §11.4)
and the geometry used when packing elements (points and directions mapped between
bodies, rotation matrices to Euler parameters)."""
from __future__ import annotations

import math

import numpy as np

from mbcore.elements.base import PackContext
from mbcore.errors import ModelError
from mbcore.elements.schema import format_vector
from mbcore.elements.rotations import A, skew

#: the 3 x 3 identity
I3 = np.eye(3)

__all__ = ["dot", "mv", "mtv", "cross", "rotate", "qmul", "qconj", "pure", "Kin", "Jet", "body_vector", "body_point", "sub", "lin", "shift", "vdot", "vcross", "component", "atan2", "relative_ep", "stack", "v3", "unit", "perp_pair", "map_point", "joint_points", "map_dir", "global_point", "q_from_A", "length_default"]


# =====================================================================================
# small vectorised helpers (private)
# =====================================================================================
def dot(a, b):
    return np.einsum("...i,...i->...", a, b)


def mv(M, x):
    """M x for stacks: (..., 3, 3) @ (..., 3)."""
    return np.einsum("...ij,...j->...i", M, x)


def mtv(M, x):
    """Mᵀ x for stacks."""
    return np.einsum("...ji,...j->...i", M, x)


def cross(a, b):
    """a × b for stacks of 3-vectors (..., 3), component by component (``np.cross``
    moves axes and costs several times more on short stacks)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    out = np.empty(np.broadcast_shapes(a.shape, b.shape))
    out[..., 0] = a1 * b2 - a2 * b1
    out[..., 1] = a2 * b0 - a0 * b2
    out[..., 2] = a0 * b1 - a1 * b0
    return out


def rotate(p, x, transpose=False):
    """``A(p) x`` (``A(p)ᵀ x`` with ``transpose``) for stacks, p (..., 4), x (..., 3),
    without forming A: ``A = (2e0² - 1) I + 2 e eᵀ + 2 e0 ẽ``, the explicit form of
    Nikravesh (1988), Eqs. 6.18-6.19 term by term (the same matrix for any scale of p)."""
    e0 = p[..., 0:1]
    e = p[..., 1:4]
    c = cross(e, x)
    out = (2.0 * e0 * e0 - 1.0) * x + (2.0 * np.sum(e * x, axis=-1, keepdims=True)) * e
    if transpose:
        out -= 2.0 * e0 * c
    else:
        out += 2.0 * e0 * c
    return out


def qmul(a, b):
    """Quaternion (Euler-parameter) product a ⊗ b, scalar first (TAM 674 (2003), lecture
    of 28 April; Nikravesh (1988), §6.5)."""
    a0, av = a[..., :1], a[..., 1:]
    b0, bv = b[..., :1], b[..., 1:]
    return np.concatenate([a0 * b0 - np.sum(av * bv, -1, keepdims=True),
                           a0 * bv + b0 * av + np.cross(av, bv)], -1)


def qconj(a):
    out = -np.asarray(a, dtype=float)
    out[..., 0] = -out[..., 0]
    return out


def pure(x):
    """The quaternion [0, x]."""
    return np.concatenate([np.zeros(x.shape[:-1] + (1,)), x], -1)


# =====================================================================================
# jets: value, ω′-Jacobian, rate, quadratic velocity term
# =====================================================================================
class Kin:
    """What the row builders read: body poses of a group, optionally velocities.

    ``jac``: build Jacobians; ``vb`` (ne, nb, 6) given: build rates and the
    quadratic terms (for gamma).  Ground blocks are ``[0,0,0,1,0,0,0]`` with zero
    velocity, which needs no special case."""

    def __init__(self, qb, vb=None, jac=False):
        qb = np.asarray(qb, dtype=float)
        self.ne, self.nb = qb.shape[0], qb.shape[1]
        self.r = qb[..., :3]
        self.p = qb[..., 3:7]
        self.A = A(self.p)                     # (ne, nb, 3, 3), explicit form 6.18
        self.jac = bool(jac)
        self.vel = vb is not None
        if self.vel:
            vb = np.asarray(vb, dtype=float)
            self.rd = vb[..., :3]
            self.w = vb[..., 3:6]               # omega' (body components)

    def zeros_J(self, *shape):
        return np.zeros((self.ne,) + shape + (self.nb, 6))


class Jet:
    """A scalar (``v`` (ne,)) or 3-vector (``v`` (ne, 3)) quantity with its
    Jacobian ``J`` (ne, [3,] nb, 6), rate ``d`` and quadratic term ``h`` (None when
    not requested)."""

    __slots__ = ("v", "J", "d", "h")

    def __init__(self, v, J=None, d=None, h=None):
        self.v, self.J, self.d, self.h = v, J, d, h


def body_vector(K: Kin, k: int, a) -> Jet:
    """``a = A_k a'`` for a body-fixed vector with local components ``a'`` (ne, 3)."""
    A = K.A[:, k]
    v = mv(A, a)
    J = d = h = None
    if K.jac:
        J = K.zeros_J(3)
        J[:, :, k, 3:] = -A @ skew(a)
    if K.vel:
        wa = np.cross(K.w[:, k], a)
        d = mv(A, wa)
        h = mv(A, np.cross(K.w[:, k], wa))
    return Jet(v, J, d, h)


def body_point(K: Kin, k: int, s) -> Jet:
    """``r_k + A_k s'`` for a body point with local coordinates ``s'`` (ne, 3)."""
    P = body_vector(K, k, s)
    P.v = P.v + K.r[:, k]
    if K.jac:
        P.J[:, :, k, :3] = I3
    if K.vel:
        P.d = P.d + K.rd[:, k]
    return P


def sub(U: Jet, W: Jet) -> Jet:
    return Jet(U.v - W.v,
                None if U.J is None else U.J - W.J,
                None if U.d is None else U.d - W.d,
                None if U.h is None else U.h - W.h)


def lin(*terms) -> Jet:
    """``sum c_k X_k`` with per-element coefficients ``c_k`` (ne,) of scalar jets."""
    c0, X0 = terms[0]
    out = Jet(c0 * X0.v,
               None if X0.J is None else c0[:, None, None] * X0.J,
               None if X0.d is None else c0 * X0.d,
               None if X0.h is None else c0 * X0.h)
    for c, X in terms[1:]:
        out.v = out.v + c * X.v
        if out.J is not None:
            out.J = out.J + c[:, None, None] * X.J
        if out.d is not None:
            out.d = out.d + c * X.d
            out.h = out.h + c * X.h
    return out


def shift(S: Jet, c) -> Jet:
    """A scalar jet minus a constant (per element)."""
    return Jet(S.v - c, S.J, S.d, S.h)


def vdot(U: Jet, W: Jet) -> Jet:
    """``U·W`` (the n1/n2 rows of Nikravesh (1988), §7.1.1: J = WᵀJ_U + UᵀJ_W,
    h = WᵀÛ + UᵀŴ + 2U̇ᵀẆ)."""
    v = dot(U.v, W.v)
    J = d = h = None
    if U.J is not None:
        J = np.einsum("ei,eibc->ebc", W.v, U.J) + np.einsum("ei,eibc->ebc", U.v, W.J)
    if U.d is not None:
        d = dot(U.d, W.v) + dot(U.v, W.d)
        h = dot(U.h, W.v) + dot(U.v, W.h) + 2.0 * dot(U.d, W.d)
    return Jet(v, J, d, h)


def vcross(U: Jet, W: Jet) -> Jet:
    """``U × W = Ũ W`` (the p1/p2 rows of Nikravesh (1988), §7.1.2: J = Ũ J_W - W̃ J_U,
    h = Û×W + U×Ŵ + 2U̇×Ẇ)."""
    v = np.cross(U.v, W.v)
    J = d = h = None
    if U.J is not None:
        J = (np.einsum("eij,ejbc->eibc", skew(U.v), W.J)
             - np.einsum("eij,ejbc->eibc", skew(W.v), U.J))
    if U.d is not None:
        d = np.cross(U.d, W.v) + np.cross(U.v, W.d)
        h = np.cross(U.h, W.v) + np.cross(U.v, W.h) + 2.0 * np.cross(U.d, W.d)
    return Jet(v, J, d, h)


def component(U: Jet, k) -> Jet:
    """Component ``k`` (ne,) ints of a vector jet."""
    e = np.arange(U.v.shape[0])
    return Jet(U.v[e, k], None if U.J is None else U.J[e, k],
                None if U.d is None else U.d[e, k], None if U.h is None else U.h[e, k])


def atan2(y: Jet, x: Jet) -> Jet:
    """``theta = atan2(y, x)`` (principal value) with (derived from the definition;
    the book has no atan2 angle)::

        theta_q = (x y_q - y x_q)/rho²,   thetadot = (x ydot - y xdot)/rho²,
        h = (x ŷ - y x̂)/rho² - 2 thetadot (x xdot + y ydot)/rho²
    """
    r2 = x.v * x.v + y.v * y.v
    J = d = h = None
    if x.J is not None:
        J = (x.v[:, None, None] * y.J - y.v[:, None, None] * x.J) / r2[:, None, None]
    if x.d is not None:
        d = (x.v * y.d - y.v * x.d) / r2
        h = (x.v * y.h - y.v * x.h) / r2 - 2.0 * d * (x.v * x.d + y.v * y.d) / r2
    return Jet(np.arctan2(y.v, x.v), J, d, h)


def relative_ep(K: Kin, q0) -> Jet:
    """ep,3 rows generalised to a reference relative orientation ``q0`` (ne, 4)
    (Nikravesh (1988), Eq. 7.12 with all three rows; relative parameters of §6.5)::

        w   = conj(q0) ⊗ conj(p_j) ⊗ p_i        (= [p_jᵀp_i; L_j p_i] for q0 = 1)
        Phi = vec(w) = 0  <=>  A_jᵀ A_i = A(q0)

    Body-frame perturbations ``p_k -> p_k ⊗ [1, δπ'_k/2]`` give::

        Phi_pi'_i =  ½ (w0 I + w̃)          Phi_pi'_j = -½ (w0 I - w̃) A(q0)ᵀ
        h = -¼ (|ω'_i|² + |ω'_j|²) vec(w) + ½ vec([0, -A(q0)ᵀω'_j] ⊗ w ⊗ [0, ω'_i])

    (with q0 = 1 these are the rows of Eq. 7.12, ``½E(e0ij I + ẽij)``, ``-½E(e0ij I - ẽij)``
    and ``gamma# = -2 L(ṗ_j)ṗ_i + (ṗ_iᵀṗ_i + ṗ_jᵀṗ_j) L_j p_i``).  Well conditioned
    near the assembled state (Jacobian ≈ ±½ I), no spurious solutions."""
    pi, pj = K.p[:, 0], K.p[:, 1]
    w = qmul(qconj(q0), qmul(qconj(pj), pi))
    w0, wv = w[:, 0], w[:, 1:]
    A0 = A(q0)
    J = d = h = None
    Pi = 0.5 * (w0[:, None, None] * I3 + skew(wv))
    Pj = -0.5 * (w0[:, None, None] * I3 - skew(wv)) @ np.swapaxes(A0, -1, -2)
    if K.jac:
        J = K.zeros_J(3)
        J[:, :, 0, 3:] = Pi
        J[:, :, 1, 3:] = Pj
    if K.vel:
        wi, wj = K.w[:, 0], K.w[:, 1]
        d = mv(Pi, wi) + mv(Pj, wj)
        bj = -mtv(A0, wj)
        h = (-0.25 * (dot(wi, wi) + dot(wj, wj))[:, None] * wv
             + 0.5 * qmul(qmul(pure(bj), w), pure(wi))[:, 1:])
    return Jet(wv, J, d, h)


def stack(rows, attr):
    parts = []
    for r in rows:
        x = getattr(r, attr)
        if attr == "J":
            parts.append(x[:, None] if x.ndim == 3 else x)
        else:
            parts.append(x[:, None] if x.ndim == 1 else x)
    return np.concatenate(parts, axis=1)


# =====================================================================================
# packing helpers (model time)
# =====================================================================================
def v3(value, default=(0.0, 0.0, 0.0)) -> np.ndarray:
    return np.asarray(default if value is None else value, dtype=float).reshape(3)


def unit(v, path: str, what: str = "direction") -> np.ndarray:
    v = np.asarray(v, dtype=float)
    n = float(np.linalg.norm(v))
    if not n > 1e-12:
        raise ModelError(path, f"expected a non-zero {what}, got {format_vector(v)}")
    return v / n


def perp_pair(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit ``f ⊥ u`` (from the coordinate axis least aligned with u) and
    ``g = u × f``: with u a right-handed orthonormal triad (f, g, u)."""
    e = np.zeros(3)
    e[int(np.argmin(np.abs(u)))] = 1.0
    f = e - (e @ u) * u
    f /= np.linalg.norm(f)
    return f, np.cross(u, f)


def map_point(ctx: PackContext, body_i: str, s_i, body_j: str) -> np.ndarray:
    """Body-j coordinates of the point with body-i coordinates ``s_i`` in the
    initial configuration: ``A_jᵀ (r_i + A_i s_i - r_j)``."""
    ri, Ai = ctx.pose(body_i)
    rj, Aj = ctx.pose(body_j)
    return Aj.T @ (ri + Ai @ np.asarray(s_i, float) - rj)


def joint_points(spec, ctx: PackContext) -> tuple[np.ndarray, np.ndarray]:
    """``point_i`` (body i) and ``point_j`` (body j; default: the body-j coordinates
    of point_i in the initial configuration) of a two-body element."""
    si = v3(spec["point_i"])
    sj = spec.get("point_j")
    return si, (map_point(ctx, spec["body_i"], si, spec["body_j"]) if sj is None
                else v3(sj))


def map_dir(ctx: PackContext, body_i: str, u_i, body_j: str) -> np.ndarray:
    """Body-j components of the body-i direction ``u_i`` (initial configuration)."""
    _, Ai = ctx.pose(body_i)
    _, Aj = ctx.pose(body_j)
    return Aj.T @ (Ai @ np.asarray(u_i, float))


def global_point(ctx, body, s):
    r, A = ctx.pose(body)
    return r + A @ np.asarray(s, float)


def q_from_A(A: np.ndarray) -> np.ndarray:
    """Euler parameters of a rotation matrix, largest-square pivot (Nikravesh (1988),
    Eqs. 6.24-6.28)."""
    tr = np.trace(A)
    sq = np.array([tr + 1.0, 1.0 + 2 * A[0, 0] - tr, 1.0 + 2 * A[1, 1] - tr,
                   1.0 + 2 * A[2, 2] - tr]) / 4.0
    k = int(np.argmax(sq))
    P = np.zeros((4, 4))
    P[0, 1], P[0, 2], P[0, 3] = A[2, 1] - A[1, 2], A[0, 2] - A[2, 0], A[1, 0] - A[0, 1]
    P[1, 2], P[1, 3], P[2, 3] = A[1, 0] + A[0, 1], A[2, 0] + A[0, 2], A[2, 1] + A[1, 2]
    P = P + P.T
    pk = math.sqrt(max(sq[k], 0.0))
    p = P[k] / (4.0 * pk)
    p[k] = pk
    return p / np.linalg.norm(p)


def length_default(ctx, spec, si, sj, key="length") -> float:
    L = spec.get(key)
    if L is None:
        d = global_point(ctx, spec["body_j"], sj) - global_point(ctx, spec["body_i"], si)
        L = float(np.linalg.norm(d))
        if not L > 1e-12 * max(1.0, float(np.abs(d).max())):
            raise ModelError(f"{ctx.path}.{key}",
                             "the two points coincide in the initial configuration, so the "
                             "length cannot default to their distance: give a positive "
                             "length (or use a spherical joint)")
    return float(L)
