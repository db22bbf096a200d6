"""The remaining classical fixed-step methods of the book and the course.

* ``rk3`` — Kutta's third-order Runge–Kutta method, a tableau on
  :class:`~mbcore.integrate.rk.FixedStepRK` (so it also runs on the compiled loop);
* ``rk2`` — the second-order Runge–Kutta family of Nikravesh (1988), Eqs. 12.13–12.14,
  with the weight ``a`` of its second stage as option;
* ``ab`` — Adams–Bashforth of fixed order 1–4 (Nikravesh (1988), §12.3, Prob. 12.2),
  ``abm4`` — the AB3 predictor / AM4 corrector pair in PECE mode (Nikravesh (1988),
  §12.3.3–12.3.4), both started by RK4 steps;
* ``taylor2`` — the second-order Taylor method (Nikravesh (1988), Eqs. 12.11–12.12),
  ``y''`` by a finite-difference directional derivative of ``f``;
* ``verlet`` — Störmer–Verlet / leapfrog for ``y = [q; q̇; extra]``, in its velocity
  form, kick–drift–kick (the default), or its position form, drift–kick–drift (the
  course's "Euler2"; option ``form``) (TAM 674 (2003), lecture of 10 March;
  Hairer, Lubich & Wanner (2006), §I.1.4, §VI.3).

Every method here uses the step grid of the book's RUNGK4 (``t0 + i·h``, the last
step shortened onto ``t_bound``), evaluates ``f`` at each step end (the next step's
first stage, so nothing is evaluated twice) and gives cubic Hermite dense output
through ``(y, f)`` at both ends of a step.  All run on the compiled loop of the
dynamic analysis when its right-hand side is compiled (DI, CS on built-in elements),
taking the Python driver's steps bit for bit: ``rk3`` and ``rk2`` on the Runge–Kutta
loop (``run_rk``; rk2's tableau read from the constructed integrator,
:func:`mbcore.integrate.rk.instance_twin`), ``ab``, ``abm4``, ``taylor2`` and
``verlet`` (and ``am`` of :mod:`.adams_moulton`) on
``mbcore._ext._steploop.run_fixedgrid`` (``compiled_loop_kind() == "fixedgrid"``,
:mod:`mbcore.integrate.multistep_loop`; runs with checkpoints keep the Python
driver).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from mbcore.integrate.base import FIXED_STEP_OPTIONS, Integrator, Option, int_range
from mbcore.integrate.common import HermiteDenseOutput
from mbcore.integrate.errors import IntegratorOptionError
from mbcore.integrate.rk import FixedStepRK, start_fixed_grid

__all__ = ["RK3", "RK2Family", "AdamsBashforth", "ABM4", "Taylor2", "Verlet",
           "AB_COEFFICIENTS", "AM4_COEFFICIENTS", "rk2_tableau", "VERLET_FORMS"]

EPS = float(np.finfo(float).eps)
SQRT_EPS = math.sqrt(EPS)

#: Adams–Bashforth weights β_j of ``y_n+1 = y_n + h Σ_j β_j f_n-j`` (Lagrange form,
#: constant step; Nikravesh (1988), §12.3, Table 12.1), orders 1–4
AB_COEFFICIENTS: dict[int, np.ndarray] = {
    1: np.array([1.0]),
    2: np.array([3.0, -1.0]) / 2.0,
    3: np.array([23.0, -16.0, 5.0]) / 12.0,
    4: np.array([55.0, -59.0, 37.0, -9.0]) / 24.0,
}
#: Adams–Moulton of order 4: ``y_n+1 = y_n + h (9 f_n+1 + 19 f_n − 5 f_n-1 + f_n-2)/24``
#: (Nikravesh (1988), §12.3.2, Table 12.2)
AM4_COEFFICIENTS = np.array([9.0, 19.0, -5.0, 1.0]) / 24.0

#: classical RK4 (Nikravesh (1988), Eq. 12.17): the starter of the multistep methods
_RK4_A = ((), (0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
_RK4_B = np.array([1.0, 2.0, 2.0, 1.0]) / 6.0
_RK4_C = (0.0, 0.5, 0.5, 1.0)


# ----------------------------------------------------------------------------------
# Runge–Kutta
# ----------------------------------------------------------------------------------
class RK3(FixedStepRK):
    name = "rk3"
    description = ("Kutta's classical third-order Runge–Kutta method, 3 stages, fixed "
                   "step (Hairer, Nørsett & Wanner (1993), §II.1)")
    order = 3
    A = np.array([[0.0, 0.0, 0.0],
                  [0.5, 0.0, 0.0],
                  [-1.0, 2.0, 0.0]])
    B = np.array([1 / 6, 2 / 3, 1 / 6])
    C = np.array([0.0, 0.5, 1.0])


def rk2_tableau(a: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, B, C) of the second-order family with weight ``a`` on the second stage
    (Nikravesh (1988), Eqs. 12.13–12.14): ``k2 = f(t + h/(2a), y + h/(2a) k1)``,
    ``y_n+1 = y_n + h[(1 − a) k1 + a k2]`` (a = 1/2 Heun, the modified trapezoidal
    method, Eq. 12.15; a = 1 the midpoint, modified Euler–Cauchy method, Eq. 12.16;
    a = 3/4 Ralston's)."""
    c2 = 1.0 / (2.0 * a)
    return (np.array([[0.0, 0.0], [c2, 0.0]]), np.array([1.0 - a, a]),
            np.array([0.0, c2]))


def _rk2_parameter(value: Any, n: int = 0) -> float:
    if isinstance(value, bool):
        raise ValueError(f"must be a non-zero number, got {value!r}")
    try:
        a = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"must be a non-zero number, got {value!r}") from None
    if a == 0.0 or not np.isfinite(a):
        raise ValueError(f"must be a finite non-zero number (the weight of the second "
                         f"stage: 1/2 Heun, 1 midpoint, 3/4 Ralston), got {value!r}")
    return a


class RK2Family(FixedStepRK):
    """The second-order RK family with the weight ``a`` of its second stage as option.
    The tableau is the instance's (set by ``_restart_impl`` from ``a``); the compiled
    'fixed' loop reads it from the constructed integrator
    (:func:`mbcore.integrate.rk.instance_twin`), so ``rk2`` runs there like ``rk3``
    (``TABLEAU_PER_RUN``: a compiled loop that reads only the class, ``mbcore.Simulation``'s
    step-by-step one, keeps the Python driver)."""

    name = "rk2"
    description = ("second-order Runge–Kutta family with parameter a (a = 1/2 Heun, "
                   "1 midpoint, 3/4 Ralston), fixed step (Nikravesh (1988), Eqs. 12.13–12.14)")
    order = 2
    A, B, C = rk2_tableau(0.75)
    TABLEAU_PER_RUN = True
    options = {**FIXED_STEP_OPTIONS,
               "a": Option(0.75, "weight of the second stage, non-zero (1/2: Heun, 1: "
                           "midpoint, 3/4: Ralston, the default)", _rk2_parameter)}
    state_fields = FixedStepRK.state_fields

    def _restart_impl(self) -> None:
        self.A, self.B, self.C = rk2_tableau(self.opts["a"])
        super()._restart_impl()


# ----------------------------------------------------------------------------------
# a fixed step grid (RUNGK4 semantics) for the methods that are not a tableau
# ----------------------------------------------------------------------------------
#: what a fixed-grid class must keep of its method's class to keep its compiled twin
_GRID_METHODS = ("_restart_impl", "_step_impl", "_next_time", "_accept", "_rk4",
                 "_dense_output_impl", "loop_start")


class _FixedGrid(Integrator):
    """Step grid ``t0 + i·h`` (last step shortened onto ``t_bound``), ``f`` at each
    step end kept for the next step, cubic Hermite dense output.

    The compiled twin (``compiled_loop_kind() == "fixedgrid"``,
    :mod:`mbcore.integrate.multistep_loop`, ``mbcore._ext._steploop.run_fixedgrid``):
    the methods below that name a ``LOOP_METHOD`` and the class's own step (a subclass
    that changes the step, the grid, the starter or the dense output keeps the Python
    driver)."""

    options = FIXED_STEP_OPTIONS
    #: the compiled loop's method ('ab', 'abm4', 'taylor2', 'verlet'), None: none
    LOOP_METHOD: str | None = None
    #: extra methods a subclass must keep for the compiled twin
    LOOP_KEEPS: tuple[str, ...] = ()

    @classmethod
    def compiled_loop_kind(cls):
        """'fixedgrid' when the class steps as the built-in method it derives from
        (its ``LOOP_METHOD``; :mod:`mbcore.integrate.fastloop` then runs it in
        compiled code, the same steps, evaluations and dense output), else None."""
        owner = next((c for c in cls.__mro__ if "LOOP_METHOD" in vars(c)
                      and vars(c)["LOOP_METHOD"] is not None), None)
        if owner is None:
            return None
        same = all(getattr(cls, n) is getattr(owner, n)
                   for n in _GRID_METHODS + owner.LOOP_KEEPS)
        return "fixedgrid" if same else None

    def loop_start(self) -> dict:
        """Where ``run_fixedgrid`` starts: the method, ``hist`` (the derivative at t
        and the past ones, newest first), the grid ``t_start`` + ``i`` steps of ``h``,
        the weights and, for Verlet, the number of positions."""
        hist = getattr(self, "_hist", None) or (() if self._f is None else (self._f,))
        return {"method": self.LOOP_METHOD,
                "hist": np.array(hist, dtype=float).reshape(len(hist), self.n),
                "t_start": float(self._t_start), "i": int(self._i), "h": float(self._h),
                "order": int(self.order), "beta": np.zeros(1), "corr": np.zeros(1),
                "positions": 0}

    def restore_loop_history(self, h: Mapping[str, Any]) -> dict[str, Any]:
        """``run_fixedgrid``'s checkpoint history (the state at a step's start:
        ``hist``, the derivative there and the past ones, newest first; the grid
        ``t_start``, ``i``, ``h``) put into this object, whose :meth:`loop_start` then
        hands it to the loop.  ValueError when ``hist`` does not fit the method."""
        hist = np.array(h["hist"], dtype=float)
        if hist.ndim != 2 or hist.shape[1] != self.n or hist.shape[0] < 1:
            raise ValueError(f"checkpoint history: hist {hist.shape}, the integrator "
                             f"needs (rows, {self.n})")
        self._f = hist[0].copy()
        if hasattr(self, "_hist"):
            self._hist = tuple(row.copy() for row in hist)
        elif hist.shape[0] != 1:
            raise ValueError(f"checkpoint history: {hist.shape[0]} past derivatives, "
                             f"{self.name} keeps one")
        self._t_start = float(h["t_start"])
        self._i = int(h["i"])
        self._h = float(h["h"])
        return {}

    def _restart_impl(self) -> None:
        start_fixed_grid(self)

    def _next_time(self) -> tuple[float, bool]:
        """(t_new, full): the end of the next step and whether it has the full size."""
        self._i += 1
        hd = self.direction * self._h
        t_new = self._t_start + self._i * hd
        full = True
        if self.direction * (t_new - self.t_bound) > -1e-9 * self._h:
            full = self.direction * (t_new - self.t_bound) < 1e-9 * self._h
            t_new = self.t_bound
        if abs(t_new - self.t) < self._min_step(self.t):
            self._step_too_small(t_new - self.t, "remaining interval")
        return t_new, full

    def _accept(self, t_new: float, y_new: np.ndarray, f_new: np.ndarray) -> None:
        self._y_old, self._f_old = self.y, self._f
        self.t = t_new
        self.y = y_new
        self._f = f_new

    def _rk4(self, t: float, y: np.ndarray, f: np.ndarray, h: float) -> np.ndarray:
        """One classical RK4 step from ``(t, y)`` with ``f = f(t, y)`` (3 evaluations)."""
        K = [f]
        for a, c in zip(_RK4_A[1:], _RK4_C[1:]):
            z = y.copy()
            for aj, kj in zip(a, K):
                if aj:
                    z += (h * aj) * kj
            K.append(self.fun(t + c * h, z).copy())
        return y + h * (_RK4_B[0] * K[0] + _RK4_B[1] * K[1] + _RK4_B[2] * K[2]
                        + _RK4_B[3] * K[3])

    def _dense_output_impl(self):
        return HermiteDenseOutput(self.t_old, self.t, self._y_old, self._f_old,
                                  self.y, self._f)


# ----------------------------------------------------------------------------------
# Adams
# ----------------------------------------------------------------------------------
class AdamsBashforth(_FixedGrid):
    """Adams–Bashforth of fixed order k = 1–4 with a constant step.  The first k − 1
    steps (and a shortened last step) are classical RK4 steps (order 4 ≥ k, so the
    starter does not lower the order); then one evaluation per step."""

    name = "ab"
    description = ("Adams–Bashforth of fixed order 1–4, fixed step, started by RK4 "
                   "(Nikravesh (1988), §12.3, Prob. 12.2)")
    order = 4
    options = {**FIXED_STEP_OPTIONS,
               "order": Option(4, "order k of the Adams–Bashforth formula (1–4)",
                               int_range(1, 4))}
    #: step grid, derivative at t and the past derivatives (newest first)
    state_fields = ("_h", "_t_start", "_i", "_f", "_hist")
    LOOP_METHOD = "ab"

    def loop_start(self) -> dict:
        return {**super().loop_start(), "beta": np.array(self._beta, dtype=float)}

    def _restart_impl(self) -> None:
        super()._restart_impl()
        self.order = self.opts["order"]
        self._beta = AB_COEFFICIENTS[self.order]
        self._hist = () if self._f is None else (self._f,)

    def _step_impl(self):
        t, y = self.t, self.y
        t_new, full = self._next_time()
        h = t_new - t
        k = self._beta.size
        if full and len(self._hist) >= k:
            y_new = y.copy()
            for b, fj in zip(self._beta, self._hist):
                y_new += (h * b) * fj
        else:                                   # starter (or shortened last step)
            y_new = self._rk4(t, y, self._f, h)
        f_new = self.fun(t_new, y_new).copy()
        self._accept(t_new, y_new, f_new)
        # a shortened step breaks the equal spacing: the history restarts there
        self._hist = ((f_new,) + self._hist)[:k] if full else (f_new,)
        return True, None


class ABM4(_FixedGrid):
    """AB3 predictor and AM4 corrector in PECE mode, constant step: both formulas use
    ``f_n, f_n-1, f_n-2``; order 4, two evaluations per step.  The first two steps
    (and a shortened last step) are RK4 steps."""

    name = "abm4"
    description = ("Adams–Bashforth–Moulton PECE pair AB3 / AM4, order 4, fixed step, "
                   "started by RK4 (Nikravesh (1988), §12.3.3–12.3.4)")
    order = 4
    state_fields = ("_h", "_t_start", "_i", "_f", "_hist")
    AB = AB_COEFFICIENTS[3]
    AM = AM4_COEFFICIENTS
    LOOP_METHOD = "abm4"

    def loop_start(self) -> dict:
        return {**super().loop_start(), "beta": np.array(self.AB, dtype=float),
                "corr": np.array(self.AM, dtype=float)}

    def _restart_impl(self) -> None:
        super()._restart_impl()
        self._hist = () if self._f is None else (self._f,)

    def _step_impl(self):
        t, y = self.t, self.y
        t_new, full = self._next_time()
        h = t_new - t
        if full and len(self._hist) >= 3:
            f0, f1, f2 = self._hist
            p = y + h * (self.AB[0] * f0 + self.AB[1] * f1 + self.AB[2] * f2)   # P
            fp = self.fun(t_new, p)                                               # E
            am = self.AM
            y_new = y + h * (am[0] * fp + am[1] * f0 + am[2] * f1 + am[3] * f2)   # C
        else:
            y_new = self._rk4(t, y, self._f, h)
        f_new = self.fun(t_new, y_new).copy()                                     # E
        self._accept(t_new, y_new, f_new)
        self._hist = ((f_new,) + self._hist)[:3] if full else (f_new,)
        return True, None


# ----------------------------------------------------------------------------------
# Taylor
# ----------------------------------------------------------------------------------
class Taylor2(_FixedGrid):
    """``y_n+1 = y_n + h f + (h²/2) y''`` with ``y'' = ∂f/∂t + (∂f/∂y) f`` the
    derivative of ``f`` along ``(1, f)``, by one forward difference:
    ``y'' ≈ [f(t + δ, y + δ f) − f(t, y)]/δ``.  Two evaluations per step."""

    name = "taylor2"
    description = ("second-order Taylor method, fixed step, y'' by a forward difference "
                   "of f along (1, f) (Nikravesh (1988), Eqs. 12.11–12.12)")
    order = 2
    state_fields = ("_h", "_t_start", "_i", "_f")
    LOOP_METHOD = "taylor2"
    LOOP_KEEPS = ("difference_step",)

    @staticmethod
    def difference_step(t: float, y: np.ndarray, f: np.ndarray) -> float:
        """δ of the forward difference: the truncation error (∝ δ) and the rounding
        error of the difference (∝ eps/δ) balance at δ ≈ √eps relative to the
        arguments, so ``δ = √eps · max(1, |t|, ‖y‖∞) / max(1, ‖f‖∞)``: the largest
        change of an argument is √eps of its scale."""
        scale = max(1.0, abs(t), float(np.max(np.abs(y))))
        return SQRT_EPS * scale / max(1.0, float(np.max(np.abs(f))))

    def _step_impl(self):
        t, y, f = self.t, self.y, self._f
        t_new, _ = self._next_time()
        h = t_new - t
        d = self.difference_step(t, y, f)
        td = t + d
        d = td - t                                # the representable time increment
        ypp = (self.fun(td, y + d * f) - f) / d
        y_new = y + h * f + (0.5 * h * h) * ypp
        self._accept(t_new, y_new, self.fun(t_new, y_new).copy())
        return True, None


# ----------------------------------------------------------------------------------
# Störmer–Verlet
# ----------------------------------------------------------------------------------
def _positions(value: Any, n: int = 0) -> int | None:
    if value is None:
        return None
    return int_range(1, 10 ** 9)(value, n)


#: the two forms of Störmer–Verlet: kick–drift–kick (velocity Verlet) and
#: drift–kick–drift (position Verlet, "Euler2")
VERLET_FORMS = ("kdk", "dkd")


def _verlet_form(value: Any, n: int = 0) -> str:
    if value not in VERLET_FORMS:
        raise ValueError(f"must be 'kdk' (kick–drift–kick, velocity Verlet) or 'dkd' "
                         f"(drift–kick–drift, position Verlet, Euler2), got {value!r}")
    return value


class Verlet(_FixedGrid):
    """Störmer–Verlet for ``y = [q; v; w]``,
    ``q' = v``, ``v' = a(t, q, v)``, ``w' = g(t, q, v)`` (``m`` = ``positions``
    coordinates each, ``w`` the rest, e.g. the work integral of the dynamic analysis).
    ``form='kdk'`` (velocity Verlet, kick–drift–kick; the default):

        v_½ = v_n + (h/2) a_n,   q_n+1 = q_n + h v_½,
        ṽ = v_½ + (h/2) a_n                      (explicit velocity guess)
        [·, a_n+1, g_n+1] = f(t_n+1, q_n+1, ṽ)   (the one evaluation of the step)
        v_n+1 = v_½ + (h/2) a_n+1,   w_n+1 = w_n + (h/2)(g_n + g_n+1).

    ``form='dkd'`` (position Verlet, drift–kick–drift: the course's "Euler2", TAM 674
    (2003), lecture of 10 March; Hairer, Lubich & Wanner (2006), §VI.3):

        q_½ = q_n + (h/2) v_n,   ṽ = v_n + (h/2) a_prev     (a_prev: the last
                                                            evaluated acceleration)
        [·, a_½, g_½] = f(t_n + h/2, q_½, ṽ)      (the one evaluation of the step)
        v_n+1 = v_n + h a_½,   q_n+1 = q_½ + (h/2) v_n+1,   w_n+1 = w_n + h g_½,

    whose dense output is the constant-acceleration path of the step (the cubic
    Hermite interpolant with slopes ``[v, a_½, g_½]`` at both ends reproduces it).

    For ``a = a(t, q)`` the guess is not used and both are the symplectic
    Störmer–Verlet method (constant mass matrix and conservative forces: bounded
    energy error); otherwise they stay second order but are not symplectic."""

    name = "verlet"
    description = ("Störmer–Verlet / leapfrog (kick–drift–kick or drift–kick–drift) "
                   "for y = [q; qd], order 2, one evaluation per step (TAM 674 (2003), "
                   "lecture of 10 March; Hairer, Lubich & Wanner (2006), §I.1.4)")
    order = 2
    options = {**FIXED_STEP_OPTIONS,
               "positions": Option(None, "number m of position coordinates q: y = [q (m); "
                                   "qd (m); other components]; default n // 2",
                                   _positions),
               "form": Option("kdk", "'kdk': kick–drift–kick (velocity Verlet, f at the "
                              "step ends); 'dkd': drift–kick–drift (position Verlet, "
                              "Euler2, f at the step midpoints)", _verlet_form)}
    state_fields = ("_h", "_t_start", "_i", "_f")
    LOOP_METHOD = "verlet"
    LOOP_KEEPS = ("_step_dkd",)

    def loop_start(self) -> dict:
        return {**super().loop_start(), "method": self.opts["form"],
                "positions": int(self._m)}

    def _restart_impl(self) -> None:
        m = self.opts["positions"]
        m = self.n // 2 if m is None else m
        if m < 1 or 2 * m > self.n:
            raise IntegratorOptionError(self._label, "positions", f"y = [q; qd; ...] "
                                        f"needs 1 <= positions <= n/2 = {self.n / 2:g}, "
                                        f"got {m}")
        self._m = m
        super()._restart_impl()
        if self._f is not None:
            f, v = self._f[:m], self.y[m:2 * m]
            if not np.allclose(f, v, rtol=1e-10, atol=1e-12 * max(1.0, np.abs(v).max())):
                bad = int(np.argmax(np.abs(f - v)))
                raise IntegratorOptionError(
                    self._label, "fun", f"verlet needs y = [q; qd; ...] with q' = qd "
                    f"(positions = {m}), but f[{bad}] = {f[bad]:.6g} differs from "
                    f"y[{m + bad}] = {v[bad]:.6g}")

    def _step_impl(self):
        if self.opts["form"] == "dkd":
            return self._step_dkd()
        t, y, f = self.t, self.y, self._f
        m = self._m
        t_new, _ = self._next_time()
        h = t_new - t
        half = 0.5 * h
        q, v, w = y[:m], y[m:2 * m], y[2 * m:]
        a = f[m:2 * m]
        v_half = v + half * a                                  # kick
        q_new = q + h * v_half                                 # drift
        z = np.concatenate((q_new, v_half + half * a, w))      # velocity guess
        f_new = self.fun(t_new, z).copy()
        y_new = np.empty_like(y)
        y_new[:m] = q_new
        y_new[m:2 * m] = v_half + half * f_new[m:2 * m]        # kick
        y_new[2 * m:] = w + half * (f[2 * m:] + f_new[2 * m:])
        f_new[:m] = y_new[m:2 * m]                             # q' = qd at the end
        self._accept(t_new, y_new, f_new)
        return True, None

    def _step_dkd(self):
        """Drift–kick–drift; ``self._f`` holds the slopes ``[v, a, g]`` at t with
        the last evaluated acceleration (f(t0) at the start, then the midpoint's)."""
        t, y, f = self.t, self.y, self._f
        m = self._m
        t_new, _ = self._next_time()
        h = t_new - t
        half = 0.5 * h
        q, v, w = y[:m], y[m:2 * m], y[2 * m:]
        q_half = q + half * v                                  # drift
        z = np.concatenate((q_half, v + half * f[m:2 * m], w))  # velocity guess
        f_mid = self.fun(t + half, z).copy()
        y_new = np.empty_like(y)
        y_new[m:2 * m] = v + h * f_mid[m:2 * m]                # kick
        y_new[:m] = q_half + half * y_new[m:2 * m]             # drift
        y_new[2 * m:] = w + h * f_mid[2 * m:]
        f_old = f_mid.copy()
        f_old[:m] = v
        f_mid[:m] = y_new[m:2 * m]
        self._accept(t_new, y_new, f_mid)
        self._f_old = f_old           # slopes of the constant-acceleration path at t_n
        return True, None
