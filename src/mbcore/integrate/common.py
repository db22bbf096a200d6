"""Helpers shared by integrators: error norms, first-step selection, finite-
difference Jacobians, step size from the highest frequency, dense-output classes.

Dense outputs return time-major arrays like the rest of mbcore: ``sol(t)`` is
``(n,)`` for a scalar ``t`` and ``(m, n)`` for ``m`` times.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["rms_norm", "hermite_basis", "select_initial_step", "num_jac",
           "step_from_frequency", "DenseOutput", "ConstantDenseOutput", "LinearDenseOutput",
           "HermiteDenseOutput", "RKDenseOutput", "BackwardDifferenceDenseOutput"]

EPS = float(np.finfo(float).eps)


#: above this length OpenBLAS splits a dot product over its threads, whose start
#: costs up to tens of ms when the other cores are busy: einsum's own loop instead
_DOT_MAX = 10_000


def rms_norm(x: np.ndarray) -> float:
    """Root-mean-square norm ``sqrt(mean(x**2))`` (Hairer, Nørsett & Wanner (1993), §II.4)."""
    if x.size > _DOT_MAX:
        return math.sqrt(float(np.einsum("i,i->", x, x)) / x.size)
    return math.sqrt(float(x.dot(x)) / x.size)


def select_initial_step(fun, t0: float, y0: np.ndarray, f0: np.ndarray, direction: float,
                        order: int, rtol, atol, t_bound: float,
                        max_step: float = math.inf) -> float:
    """Initial step size |h0| (Hairer, Nørsett & Wanner (1993), §II.4,
    "starting step size"): balance h·|f| against the solution scale, then
    ``h^(order+1)·max(|f|, |f'|) = 0.01`` with one trial Euler step.  Costs one
    evaluation of ``fun``.  (Nikravesh (1988), §10.4 gives T_min/20 when
    the highest frequency is known: :func:`step_from_frequency`.)"""
    interval = abs(t_bound - t0)
    if interval == 0:
        return 0.0
    scale = atol + np.abs(y0) * rtol
    with np.errstate(over="ignore"):    # a norm out of range is inf: refused below
        d0 = rms_norm(y0 / scale)
        d1 = rms_norm(f0 / scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, interval, max_step)
    if not h0 > 0.0:          # |f(t0, y0)| so large that the trial step underflows
        from .errors import StepSizeError
        raise StepSizeError(f"no initial step size: |f(t0, y0)| / (atol + rtol |y0|) = "
                            f"{d1:.3g} is too large (the state or its derivative is "
                            f"out of range)", t0)
    y1 = y0 + direction * h0 * f0
    f1 = fun(t0 + direction * h0, y1)
    d2 = rms_norm((f1 - f0) / scale) / h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (order + 1))
    return min(100 * h0, h1, interval, max_step)


#: difference floor of a component relative to the largest of its block (below)
DIFFERENCE_FLOOR = 1e-3


def difference_floor(y: np.ndarray, blocks) -> np.ndarray:
    """Per-component floor of the forward-difference increments of :func:`num_jac`
    for integrators without tolerances to take it from: ``max(1e-8, 1e-3 max_block
    |y_i|)`` over the component's block (``blocks``: (start, stop) pairs covering y,
    e.g. positions, velocities, the rest).  A coordinate that is exactly 0 (a slider
    at its origin) is then perturbed like its neighbours, not by sqrt(eps) 1e-8
    (1.5e-16: the difference would be pure round-off, and Newton's matrix wrong in
    that column)."""
    floor = np.empty(y.size)
    for a, b in blocks:
        big = float(np.abs(y[a:b]).max()) if b > a else 0.0
        floor[a:b] = max(1e-8, DIFFERENCE_FLOOR * big)
    return floor


def num_jac(fun, t: float, y: np.ndarray, f: np.ndarray,
            scale: np.ndarray | None = None) -> np.ndarray:
    """Forward-difference Jacobian, one column per evaluation (the column
    perturbation of Nikravesh (1988), Eq. 14.7; increment ``sqrt(eps)·max(|y_j|, scale_j)`` as in
    DASSL).  ``f = fun(t, y)`` must be given; costs ``n`` evaluations."""
    n = y.size
    J = np.empty((n, n))
    floor = np.full(n, 1e-8) if scale is None else np.maximum(scale, 1e-300)
    delta = math.sqrt(EPS) * np.maximum(np.abs(y), floor)
    yp = y.copy()
    for j in range(n):
        yj = y[j]
        yp[j] = yj + delta[j]
        dj = yp[j] - yj                      # exactly representable increment
        J[:, j] = (fun(t, yp) - f) / dj
        yp[j] = yj
    return J


def step_from_frequency(omega_max: float, points_per_period: int = 20) -> float:
    """Fixed step ``Δt = T_min / 20`` with ``T_min = 2π/ω_max`` (Nikravesh (1988), §10.4);
    ``hω = 2π/20 ≈ 0.31`` lies far inside RK4's stability limit 2.83."""
    if not omega_max > 0:
        raise ValueError(f"omega_max must be > 0, got {omega_max!r}")
    return 2 * math.pi / omega_max / points_per_period


# ----------------------------------------------------------------------------------
# dense output
# ----------------------------------------------------------------------------------
class DenseOutput:
    """Interpolant over one step ``[t_old, t]``.

    ``sol(t)`` returns ``(n,)`` for a scalar ``t``, ``(m, n)`` for an array of
    ``m`` times.  Subclasses implement ``_call_impl(s)`` for a 1-D array of
    normalised positions ``s = (t - t_old)/h`` and return ``(m, n)``.
    Evaluating outside the step extrapolates (allowed, less accurate).
    """

    __slots__ = ("t_old", "t", "t_min", "t_max", "h")

    def __init__(self, t_old: float, t: float):
        self.t_old = t_old
        self.t = t
        self.h = t - t_old
        self.t_min = min(t, t_old)
        self.t_max = max(t, t_old)

    def __call__(self, t):
        t = np.asarray(t, dtype=float)
        if t.ndim > 1:
            raise ValueError("t must be a scalar or a 1-D array")
        s = (np.atleast_1d(t) - self.t_old) / self.h if self.h != 0 else np.zeros(t.size)
        y = self._call_impl(s)
        return y[0] if t.ndim == 0 else y

    def _call_impl(self, s: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


class ConstantDenseOutput(DenseOutput):
    """The constant ``y`` (a zero-length step)."""

    __slots__ = ("y",)

    def __init__(self, t_old, t, y):
        super().__init__(t_old, t)
        self.y = np.array(y, dtype=float)

    def _call_impl(self, s):
        return np.tile(self.y, (s.size, 1))


class LinearDenseOutput(DenseOutput):
    """Linear interpolation between ``y_old`` and ``y`` (order 1 methods)."""

    __slots__ = ("y_old", "y")

    def __init__(self, t_old, t, y_old, y):
        super().__init__(t_old, t)
        self.y_old = y_old
        self.y = y

    def _call_impl(self, s):
        return self.y_old + s[:, None] * (self.y - self.y_old)


class HermiteDenseOutput(DenseOutput):
    """Cubic Hermite interpolation through ``(y_old, f_old)`` and ``(y, f)``:
    local interpolation error O(h^4), enough for methods of order <= 3 and, at
    output times, for RK4 (used by the fixed-step methods)."""

    __slots__ = ("y_old", "y", "f_old", "f")

    def __init__(self, t_old, t, y_old, f_old, y, f):
        super().__init__(t_old, t)
        self.y_old, self.f_old, self.y, self.f = y_old, f_old, y, f

    def _call_impl(self, s):
        h00, h10, h01, h11 = hermite_basis(s[:, None])
        h = self.h
        return h00 * self.y_old + h10 * (h * self.f_old) + h01 * self.y + h11 * (h * self.f)


def hermite_basis(s):
    """The cubic Hermite basis ``(h00, h10, h01, h11)`` at the step fraction(s) ``s``:
    ``y(s) = h00 y0 + h10 h f0 + h01 y1 + h11 h f1``."""
    s2 = s * s
    s3 = s2 * s
    return 2 * s3 - 3 * s2 + 1, s3 - 2 * s2 + s, -2 * s3 + 3 * s2, s3 - s2


class RKDenseOutput(DenseOutput):
    """Continuous Runge–Kutta extension ``y_old + h·K^T·(P·[s, s², ...])``.

    ``K`` is the ``(stages, n)`` array of stage derivatives and ``P`` the
    ``(stages, degree)`` coefficient matrix of the method (so that
    ``b_i(s) = Σ_j P[i, j] s^(j+1)``)."""

    __slots__ = ("y_old", "Q", "degree")

    def __init__(self, t_old, t, y_old, K, P):
        super().__init__(t_old, t)
        self.y_old = y_old
        self.Q = (self.h * K.T) @ P       # (n, degree), owns its memory
        self.degree = P.shape[1]

    def _call_impl(self, s):
        p = np.cumprod(np.tile(s[:, None], (1, self.degree)), axis=1)   # s, s², ...
        return self.y_old + p @ self.Q.T


class BackwardDifferenceDenseOutput(DenseOutput):
    """Newton backward-difference polynomial on a uniform grid (BDF):

    ``y(t + σh) = Σ_{j=0..k} ∇^j y_n · σ(σ+1)…(σ+j-1)/j!``  with ``σ = (t - t_n)/h``,

    ``D[j] = ∇^j y_n`` at ``t_n = t`` (the end of the step), spacing ``h``."""

    __slots__ = ("D", "order")

    def __init__(self, t_old, t, h, D):
        super().__init__(t_old, t)
        self.h = h                # grid spacing (equals t - t_old after acceptance)
        self.D = D
        self.order = D.shape[0] - 1

    def __call__(self, t):
        t = np.asarray(t, dtype=float)
        if t.ndim > 1:
            raise ValueError("t must be a scalar or a 1-D array")
        sigma = (np.atleast_1d(t) - self.t) / self.h
        k = self.order
        if k == 0:
            y = np.tile(self.D[0], (sigma.size, 1))
        else:
            j = np.arange(k)
            p = np.cumprod((sigma[:, None] + j) / (j + 1), axis=1)   # (m, k)
            y = self.D[0] + p @ self.D[1:]
        return y[0] if t.ndim == 0 else y
