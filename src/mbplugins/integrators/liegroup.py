"""A Lie-group integrator: the classical RK4 in the Lie algebra (``rkmk4``).

The Runge–Kutta–Munthe-Kaas method (RKMK; Munthe-Kaas (1998);
Hairer, Lubich & Wanner (2006), §IV.8.2) integrates ``y' = ξ(y)·y`` on a Lie group
by an RK method applied to the algebra variable ``u`` of ``y(t) = exp(u(t))·y0``,
whose equation is ``u' = dexp⁻¹_u(ξ(exp(u)·y0))``.  With the classical RK4 and
``dexp⁻¹`` truncated to the commutator terms that matter for order 4,
Munthe-Kaas (1999) gives (``F_i`` the algebra velocities times h, ``[·,·]`` the
commutator)::

    F1 = h ξ(y0)
    F2 = h ξ(exp(F1/2)·y0)
    F3 = h ξ(exp(F2/2 − [F1, F2]/8)·y0)
    F4 = h ξ(exp(F3)·y0)
    y1 = exp((F1 + 2 F2 + 2 F3 + F4)/6 − [F1, F4]/12)·y0

Four evaluations per step (the last is the first stage of the next step), as RK4.

Here the group is a product ``S³ × … × S³ × Rᵐ``: the components of ``y`` that the
option ``lie_group`` names are unit quaternions (Euler parameters) ``p``, advanced by
the quaternion exponential, so |p| = 1 holds to round-off without normalisation
(the multiplication by a unit quaternion preserves the norm); every other component
is a translation (commutator zero) and is advanced additively, exactly as RK4.  The
integrator knows no multibody type: the problem describes its quaternions through
the protocol of :class:`QuaternionLayout` (docs/integrators.md, "rkmk4").  Without
``lie_group`` the method is the plain RK4.

Quaternions are scalar first, ``p = [e0, e1, e2, e3]``, with the product ``p ⊗ q``
of Hamilton (A(p ⊗ q) = A(p) A(q)).  For the body frame (``frame='body'``) the
derivative is ``ṗ = ½ p ⊗ (0, ω′) = ½ L(p)ᵀ ω′`` (Nikravesh (1988), Eq. 6.109) and
the flow acts from the right, ``p(t) = p0 ⊗ exp(θ(t))``; for the space frame
(``frame='space'``) ``ṗ = ½ (0, ω) ⊗ p = ½ G(p)ᵀ ω`` (Nikravesh (1988), Eq. 6.106)
and ``p(t) = exp(θ(t)) ⊗ p0``.  The exponential of a rotation vector θ is
``exp(θ) = [cos(|θ|/2), sin(|θ|/2) θ/|θ|]``; a right action is a left action of the
algebra with the opposite commutator, so the formulas above hold with
``[a, b] = a × b`` (space) or ``[a, b] = −a × b`` (body) (derived here from
``d/dt exp(θ) = exp(θ) ⊗ (0, dexp_{−θ}(θ̇))/2``).

Dense output: the linear components by the cubic Hermite interpolant of the fixed
step methods; each quaternion by ``p(s) = p0 ⊗ exp(θ(s))`` with θ(s) the cubic
Hermite interpolant of the algebra variable (θ(0) = 0, θ(1) = u, slopes h ω0 and
h dexp⁻¹(ω1) from the closed form of :func:`dexpinv`), so interpolated quaternions
are unit too.

Compiled twin: in the dynamic analysis (a compiled right-hand side, e.g. ``di_omega``)
the class runs on ``mbcore._ext._steploop.run_lie`` (ext/_step_lie.pxi; loop kind
'lie' of :mod:`mbcore.integrate.multistep_loop`), which reads the grid, f and the
layout from :meth:`RKMK4.loop_start` and repeats this module's formulas in NumPy's
order of operations (the product table's sums, ``np.sum`` of squares, libm's sin and
cos): the same steps and outputs bit for bit (tests/test_rkmk4_loop.py).  This
module is the reference; a subclass that changes what the loop repeats
(``RKMK4.LOOP_KEEPS``) keeps the Python driver.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from mbcore.elements.rotations import quat_conj
from mbcore.integrate.base import FIXED_STEP_OPTIONS, Option
from mbcore.integrate.common import DenseOutput, hermite_basis
from mbcore.integrate.errors import IntegratorOptionError
from mbplugins.spatial.kinematics import cross as _cross

from .classical import _FixedGrid

__all__ = ["RKMK4", "QuaternionLayout", "quat_mul", "quat_conj", "quat_exp", "quat_log",
           "dexpinv", "FRAMES"]

#: the two ways a quaternion's derivative can relate to an angular velocity
FRAMES = ("body", "space")
#: |p| of the initial quaternions must be 1 to this (the exponential keeps |p|)
UNIT_TOLERANCE = 1e-8


# ----------------------------------------------------------------------------------
# quaternion algebra (vectorised over leading axes; the cross product of the spatial
# kinematics, the conjugate of the core's rotations)
# ----------------------------------------------------------------------------------
def _product_table() -> np.ndarray:
    """``T[i, j, k]`` with ``(p ⊗ q)_i = Σ_jk T[i, j, k] p_j q_k`` (Hamilton's table)."""
    T = np.zeros((4, 4, 4))
    rows = ((0, 0, 0, 1), (0, 1, 1, -1), (0, 2, 2, -1), (0, 3, 3, -1),   # scalar part
            (1, 0, 1, 1), (1, 1, 0, 1), (1, 2, 3, 1), (1, 3, 2, -1),
            (2, 0, 2, 1), (2, 2, 0, 1), (2, 3, 1, 1), (2, 1, 3, -1),
            (3, 0, 3, 1), (3, 3, 0, 1), (3, 1, 2, 1), (3, 2, 1, -1))
    for i, j, k, sign in rows:
        T[i, j, k] = sign
    return T


#: Hamilton's product table, and the same with the first / second factor conjugated
_T = _product_table()
_CONJ = np.array([1.0, -1.0, -1.0, -1.0])
_T_CONJ_FIRST = _T * _CONJ[None, :, None]
_T_CONJ_SECOND = _T * _CONJ[None, None, :]


def quat_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hamilton product ``p ⊗ q = [p0 q0 − p·q; p0 q + q0 p + p × q]`` (Nikravesh
    (1988), §6.5) as one einsum with the product table: ~7x faster on short stacks
    than ``mbcore.elements.rotations.quat_product`` (the same product), which matters
    on the Python driver.  Its sums run over j in order (``(p ⊗ q)_1 =
    ((p0 q1 + p1 q0) + p2 q3) − p3 q2``, …), the order the compiled loop
    (ext/_step_lie.pxi) repeats."""
    return np.einsum("ijk,...j,...k->...i", _T, p, q)


def _conj_mul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``conj(p) ⊗ q``."""
    return np.einsum("ijk,...j,...k->...i", _T_CONJ_FIRST, p, q)


def _mul_conj(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``p ⊗ conj(q)``."""
    return np.einsum("ijk,...j,...k->...i", _T_CONJ_SECOND, p, q)


def quat_exp(theta: np.ndarray) -> np.ndarray:
    """The unit quaternion of the rotation vector θ:
    ``[cos(|θ|/2), sin(|θ|/2) θ/|θ|]`` (``sin(a)/a = 1 − a²/6 + a⁴/120`` below
    a = 1e-3: truncation < 1e-22, no cancellation).  (..., 3) -> (..., 4)."""
    theta = np.asarray(theta, dtype=float)
    n2 = np.sum(theta * theta, axis=-1)      # (θ0² + θ1²) + θ2², as the compiled loop
    a = 0.5 * np.sqrt(n2)
    small = a < 1e-3
    safe = np.where(small, 1.0, a)
    half_sinc = np.where(small, 0.5 - n2 / 48.0 * (1.0 - n2 / 80.0),
                         0.5 * np.sin(safe) / safe)
    out = np.empty(theta.shape[:-1] + (4,))
    out[..., 0] = np.cos(a)
    out[..., 1:] = half_sinc[..., None] * theta
    return out


def quat_log(p: np.ndarray) -> np.ndarray:
    """The rotation vector θ with ``quat_exp(θ) = p`` for a unit quaternion p,
    ``θ = 2 atan2(|v|, p0) v/|v|`` (|θ| < 2π; θ = 0 for p = [1, 0, 0, 0]; atan2
    keeps full relative precision for small |v|).  (..., 4) -> (..., 3)."""
    p = np.asarray(p, dtype=float)
    v = p[..., 1:]
    s = np.linalg.norm(v, axis=-1, keepdims=True)
    safe = np.where(s > 0.0, s, 1.0)
    factor = np.where(s > 0.0, 2.0 * np.arctan2(s, p[..., :1]) / safe,
                      2.0 / np.where(p[..., :1] != 0.0, p[..., :1], 1.0))
    return factor * v


def _dexpinv_c(x: np.ndarray) -> np.ndarray:
    """``c(x) = (1 − (x/2) cot(x/2))/x²`` of :func:`dexpinv` (Bernoulli series
    ``1/12 + x²/720 + x⁴/30240 + x⁶/1209600`` below x = 0.1, where the closed form
    cancels; the next term, x⁸/47900160, is < 2.1e-16 there)."""
    small = x < 0.1
    xs = np.where(small, 1.0, x)
    half = 0.5 * xs
    closed = (1.0 - half * np.cos(half) / np.sin(half)) / (xs * xs)
    x2 = x * x
    series = 1.0 / 12 + x2 * (1.0 / 720 + x2 * (1.0 / 30240 + x2 / 1209600))
    return np.where(small, series, closed)


def dexpinv(theta: np.ndarray, w: np.ndarray, frame: str = "body") -> np.ndarray:
    """θ̇ for an angular velocity w when ``p = p0 ⊗ exp(θ)`` (``frame='body'``, w = ω′
    in body axes) or ``p = exp(θ) ⊗ p0`` (``'space'``, w = ω):

        θ̇ = w ± ½ θ × w + c(|θ|) θ × (θ × w),   c(x) = (1 − (x/2) cot(x/2))/x²,

    with + for the body frame, − for the space frame: the closed form of the series
    ``Σ B_k/k! ad^k`` (Hairer, Lubich & Wanner (2006), §III.4, §IV.8) on
    so(3), where ad_θ w = θ × w (body: −θ × w).  (..., 3), (..., 3) -> (..., 3)."""
    theta = np.asarray(theta, dtype=float)
    w = np.asarray(w, dtype=float)
    sign = 0.5 if frame == "body" else -0.5
    x = np.linalg.norm(theta, axis=-1, keepdims=True)
    tw = _cross(theta, w)
    return w + sign * tw + _dexpinv_c(x) * _cross(theta, tw)


# ----------------------------------------------------------------------------------
# the protocol of the option ``lie_group``
# ----------------------------------------------------------------------------------
class QuaternionLayout:
    """The ``lie_group`` option of :class:`RKMK4`: which components of ``y`` are unit
    quaternions and in which frame their derivative is given.

    Protocol (any object with these attributes will do; this class is a ready one):

    * ``quaternions`` — integer array of shape (k, 4): row j holds the indices in
      ``y`` of the j-th unit quaternion ``[e0, e1, e2, e3]`` (scalar first);
    * ``frame`` (optional, default ``'body'``) — ``'body'``: the right-hand side gives
      ``ṗ = ½ p ⊗ (0, ω′) = ½ L(p)ᵀ ω′`` with ω′ the angular velocity in body axes
      (then ``p(t) = p ⊗ exp(θ)``); ``'space'``: ``ṗ = ½ (0, ω) ⊗ p = ½ G(p)ᵀ ω``
      (then ``p(t) = exp(θ) ⊗ p``).

    The integrator reads the angular velocity from the right-hand side at each stage,
    ``ω′ = 2 vec(conj(p) ⊗ ṗ)`` (``= 2 L(p) ṗ``) or ``ω = 2 vec(ṗ ⊗ conj(p))``; the
    component of ``ṗ`` along ``p`` (not tangent) is ignored.  ``y0`` must hold unit
    quaternions there (to 1e-8)."""

    __slots__ = ("quaternions", "frame")

    def __init__(self, quaternions, frame: str = "body"):
        self.quaternions = np.asarray(quaternions, dtype=np.intp).reshape(-1, 4)
        self.frame = frame

    def __repr__(self) -> str:
        return f"QuaternionLayout({self.quaternions.tolist()!r}, frame={self.frame!r})"


def _lie_group(value: Any, n: int = 0) -> tuple[np.ndarray, str] | None:
    """The checked layout: (indices (k, 4), frame)."""
    if value is None:
        return None
    if not hasattr(value, "quaternions"):
        raise ValueError(f"must have an attribute 'quaternions' (an integer array of shape "
                         f"(k, 4), see QuaternionLayout), got {value!r}")
    raw = np.asarray(value.quaternions)
    if raw.size and (raw.dtype.kind not in "iu"):
        raise ValueError(f"quaternions must be integer indices, got dtype {raw.dtype}")
    if raw.size % 4 or (raw.ndim != 2 and raw.size):
        raise ValueError(f"quaternions must have shape (k, 4), got {raw.shape}")
    idx = raw.astype(np.intp).reshape(-1, 4) if raw.size else np.zeros((0, 4), np.intp)
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise ValueError(f"quaternion indices must lie in [0, {n - 1}] (n = {n}), got "
                         f"{idx.min()}..{idx.max()}")
    if len(np.unique(idx)) != idx.size:
        raise ValueError("quaternion indices must be distinct")
    frame = getattr(value, "frame", "body")
    if frame not in FRAMES:
        raise ValueError(f"frame must be 'body' or 'space', got {frame!r}")
    return idx, frame


# ----------------------------------------------------------------------------------
# the integrator
# ----------------------------------------------------------------------------------
class RKMK4(_FixedGrid):
    """The classical RK4 in the Lie algebra (Munthe-Kaas (1999)); quaternion
    components by the exponential map, the others additively (module docstring)."""

    name = "rkmk4"
    description = ("Runge–Kutta–Munthe-Kaas RK4: classical RK4 in the Lie algebra, unit "
                   "quaternions advanced by the exponential map (|p| = 1 to round-off), "
                   "order 4, fixed step (Munthe-Kaas (1999); "
                   "Hairer, Lubich & Wanner (2006), §IV.8)")
    order = 4
    options = {**FIXED_STEP_OPTIONS,
               "lie_group": Option(None, "the unit quaternions of y: an object with "
                                   "'quaternions' (integer array (k, 4) of indices in y, "
                                   "scalar first) and optionally 'frame' ('body': "
                                   "pdot = 1/2 p*(0, omega'), the default; 'space': "
                                   "pdot = 1/2 (0, omega)*p), e.g. QuaternionLayout; "
                                   "None: plain RK4", _lie_group)}
    state_fields = ("_h", "_t_start", "_i", "_f")
    #: what the compiled twin ``run_lie`` (loop kind 'lie') implements: a subclass that
    #: changes any of these keeps the Python driver
    LOOP_KEEPS = ("_step_impl", "_dense_output_impl", "_restart_impl", "_omega",
                  "_algebra", "_act", "_bracket", "_next_time", "_accept",
                  "loop_start")

    @classmethod
    def compiled_loop_kind(cls) -> str | None:
        """'lie' when the class steps as RKMK4 (:mod:`mbcore.integrate.multistep_loop`
        then runs it on ``mbcore._ext._steploop.run_lie``: the same stages, formulas
        and order of the floating-point operations, the same dense output), else
        None."""
        same = all(getattr(cls, n) is _LOOP_TWIN.get(n) for n in RKMK4.LOOP_KEEPS)
        return "lie" if same else None

    def loop_start(self) -> dict:
        """Where ``run_lie`` starts: the grid and ``hist`` (f at t) of
        :meth:`_FixedGrid.loop_start`, the quaternion indices ``quaternions`` (k, 4)
        and ``body`` (the frame: True body, False space)."""
        return {**super().loop_start(), "method": "rkmk4",
                "quaternions": np.ascontiguousarray(self._q, dtype=np.intp),
                "body": bool(self._body)}

    def _restart_impl(self) -> None:
        lg = self.opts["lie_group"]
        idx, frame = (np.zeros((0, 4), np.intp), "body") if lg is None else lg
        self._q = idx
        self._body = frame == "body"
        # the commutator of the algebra as a left action: a x b (space), -a x b (body)
        self._bsign = -1.0 if self._body else 1.0
        lin = np.ones(self.n, bool)
        lin[idx.ravel()] = False
        self._lin = np.flatnonzero(lin)
        self._k = len(idx)
        if self._k:
            norm = np.linalg.norm(self.y[idx], axis=1)
            bad = np.abs(norm - 1.0) > UNIT_TOLERANCE
            if np.any(bad):
                j = int(np.flatnonzero(bad)[0])
                raise IntegratorOptionError(
                    self._label, "lie_group", f"quaternion {j} (y{idx[j].tolist()}) has "
                    f"norm {norm[j]:.17g}; the exponential map keeps |p|, so y0 must "
                    f"hold unit quaternions (to {UNIT_TOLERANCE:g})")
        super()._restart_impl()

    # -- the group: algebra velocities, commutator, action ------------------------------
    def _omega(self, p: np.ndarray, pd: np.ndarray) -> np.ndarray:
        """Angular velocities (k, 3) from the quaternions p and their derivative pd."""
        if self._body:
            return 2.0 * _conj_mul(p, pd)[:, 1:]
        return 2.0 * _mul_conj(pd, p)[:, 1:]

    def _algebra(self, y: np.ndarray, f: np.ndarray, h: float) -> tuple[np.ndarray,
                                                                        np.ndarray]:
        """h·ξ(y) as (linear part, rotation part (k, 3))."""
        lin = h * f[self._lin]
        if not self._k:
            return lin, np.zeros((0, 3))
        return lin, h * self._omega(y[self._q], f[self._q])

    def _act(self, y: np.ndarray, lin: np.ndarray, rot: np.ndarray) -> np.ndarray:
        """exp(u)·y: the linear components plus ``lin``, the quaternions by the
        exponential of ``rot`` from the right (body) or left (space)."""
        z = y.copy()
        z[self._lin] += lin
        if self._k:
            p = y[self._q]
            e = quat_exp(rot)
            z[self._q] = quat_mul(p, e) if self._body else quat_mul(e, p)
        return z

    def _bracket(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._bsign * _cross(a, b)

    # -- one step ----------------------------------------------------------------------
    def _step_impl(self):
        t, y, f = self.t, self.y, self._f
        t_new, _ = self._next_time()
        h = t_new - t
        fun = self.fun
        l1, r1 = self._algebra(y, f, h)                                  # F1
        l2, r2 = self._algebra(y2 := self._act(y, 0.5 * l1, 0.5 * r1),
                               fun(t + 0.5 * h, y2), h)                  # F2
        r3u = 0.5 * r2 - 0.125 * self._bracket(r1, r2)
        l3, r3 = self._algebra(y3 := self._act(y, 0.5 * l2, r3u),
                               fun(t + 0.5 * h, y3), h)                  # F3
        l4, r4 = self._algebra(y4 := self._act(y, l3, r3), fun(t_new, y4), h)   # F4
        lu = (l1 + 2.0 * (l2 + l3) + l4) / 6.0
        ru = (r1 + 2.0 * (r2 + r3) + r4) / 6.0 - self._bracket(r1, r4) / 12.0
        y_new = self._act(y, lu, ru)
        f_new = fun(t_new, y_new).copy()
        self._accept(t_new, y_new, f_new)
        self._u = ru
        return True, None

    def _dense_output_impl(self):
        return LieHermiteDenseOutput(self)


#: the methods of RKMK4 that run_lie repeats, as defined here (a class patched
#: later, e.g. a test's mutant, keeps the Python driver)
_LOOP_TWIN = {n: getattr(RKMK4, n) for n in RKMK4.LOOP_KEEPS}


class LieHermiteDenseOutput(DenseOutput):
    """Cubic Hermite interpolation of the linear components and, for each quaternion,
    ``p(s) = p0 ⊗ exp(θ(s))`` (body; ``exp(θ(s)) ⊗ p0`` space) with θ(s) the cubic
    Hermite interpolant of the algebra variable: θ(0) = 0, θ'(0) = h ω0,
    θ(1) = u, θ'(1) = h dexp⁻¹_u(ω1) (module docstring)."""

    __slots__ = ("y_old", "f_old", "y", "f", "q", "lin", "body", "p0", "u", "du0", "du1")

    def __init__(self, integ: RKMK4):
        super().__init__(integ.t_old, integ.t)
        # the integrator rebinds (never mutates) y and _f: no copies needed (rule 4)
        self.y_old, self.f_old, self.y, self.f = (integ._y_old, integ._f_old, integ.y,
                                                  integ._f)
        self.q, self.lin, self.body = integ._q, integ._lin, integ._body
        if len(self.q):
            h = self.h
            self.p0 = self.y_old[self.q]
            self.u = integ._u
            self.du0 = h * integ._omega(self.p0, self.f_old[self.q])
            w1 = integ._omega(self.y[self.q], self.f[self.q])
            self.du1 = h * dexpinv(self.u, w1, "body" if self.body else "space")

    def _call_impl(self, s):
        h00, h10, h01, h11 = hermite_basis(s[:, None])
        h = self.h
        out = h00 * self.y_old + h10 * (h * self.f_old) + h01 * self.y + h11 * (h * self.f)
        if len(self.q):
            hs = (h10[:, :, None], h01[:, :, None], h11[:, :, None])
            theta = hs[0] * self.du0 + hs[1] * self.u + hs[2] * self.du1      # (m, k, 3)
            e = quat_exp(theta)
            out[:, self.q] = quat_mul(self.p0, e) if self.body else quat_mul(e, self.p0)
        return out
