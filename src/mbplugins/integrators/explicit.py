"""Fixed-step explicit Runge–Kutta methods: Euler, Heun, explicit midpoint, RK4.

References: 004 §12.2–12.2.2 (Eqs. 12.10, 12.15–12.17, subroutine RUNGK4),
001 l.112–125; spec/algorithms.md §2.1–2.3, §2.11 (stability), §2.13 (choose
``step`` ≈ T_min/20, :func:`mbcore.integrate.step_from_frequency`).

RUNGK4 semantics kept here: the time of step ``i`` is recomputed as
``t0 + i·h`` (no accumulated round-off); the last step is shortened to end on
``t_bound``.  The derivative at the end of a step is the first stage of the next
one (the same value RUNGK4 computes), so a run of N steps costs ``s·N + 1``
evaluations and the dense output (cubic Hermite, O(h⁴)) costs nothing extra.
"""
from __future__ import annotations

import numpy as np

from mbcore.integrate.base import FIXED_STEP_OPTIONS, Integrator
from mbcore.integrate.common import HermiteDenseOutput

__all__ = ["FixedStepRK", "Euler", "Heun", "Midpoint", "RK4"]


class FixedStepRK(Integrator):
    """Explicit Runge–Kutta method with a fixed step, given by its Butcher
    tableau ``A`` (s×s, strictly lower), ``B`` (s) and ``C`` (s) — plain arrays a
    compiled loop can reuse.  Option: ``step``."""

    A: np.ndarray = np.zeros((1, 1))
    B: np.ndarray = np.ones(1)
    C: np.ndarray = np.zeros(1)
    options = FIXED_STEP_OPTIONS

    @classmethod
    def compiled_loop_kind(cls):
        """'fixed' unless a subclass changes the step."""
        return "fixed" if cls._step_impl is FixedStepRK._step_impl else None

    def _restart_impl(self) -> None:
        s = self.B.size
        self._K = np.empty((s, self.n))
        self._h = self.opts["step"]
        self._t_start = self.t
        self._i = 0
        self._y_old = None
        self._f_old = None
        self._f = self.fun(self.t, self.y).copy() if self.status == "running" else None

    def _step_impl(self):
        t = self.t
        y = self.y
        self._i += 1
        hd = self.direction * self._h
        t_new = self._t_start + self._i * hd
        if self.direction * (t_new - self.t_bound) > -1e-9 * self._h:
            t_new = self.t_bound          # last (possibly shortened) step
        h = t_new - t
        if abs(h) < self._min_step(t):
            self._step_too_small(h, "remaining interval")
        A, C, K, fun = self.A, self.C, self._K, self.fun
        K[0] = self._f
        for s in range(1, self.B.size):
            K[s] = fun(t + C[s] * h, y + h * (A[s, :s] @ K[:s]))
        y_new = y + h * (self.B @ K)
        self._y_old, self._f_old = y, self._f
        self.t = t_new
        self.y = y_new
        self._f = fun(t_new, y_new).copy()
        return True, None

    def _dense_output_impl(self):
        return HermiteDenseOutput(self.t_old, self.t, self._y_old, self._f_old,
                                  self.y, self._f)


class Euler(FixedStepRK):
    name = "euler"
    description = ("forward Euler, order 1, fixed step (004 Eq. 12.10; spec §2.1); "
                   "for teaching comparisons")
    order = 1
    A = np.array([[0.0]])
    B = np.array([1.0])
    C = np.array([0.0])


class Heun(FixedStepRK):
    name = "heun"
    description = ("Heun / modified trapezoidal RK2, order 2, fixed step "
                   "(004 Eq. 12.15; spec §2.2)")
    order = 2
    A = np.array([[0.0, 0.0], [1.0, 0.0]])
    B = np.array([0.5, 0.5])
    C = np.array([0.0, 1.0])


class Midpoint(FixedStepRK):
    name = "midpoint"
    description = ("explicit midpoint / modified Euler–Cauchy RK2, order 2, fixed step "
                   "(004 Eq. 12.16; spec §2.2)")
    order = 2
    A = np.array([[0.0, 0.0], [0.5, 0.0]])
    B = np.array([0.0, 1.0])
    C = np.array([0.0, 0.5])


class RK4(FixedStepRK):
    name = "rk4"
    description = ("classical Runge–Kutta, order 4, fixed step: the book's RUNGK4 "
                   "(004 Eq. 12.17, §12.2.2; spec §2.3)")
    order = 4
    A = np.array([[0.0, 0.0, 0.0, 0.0],
                  [0.5, 0.0, 0.0, 0.0],
                  [0.0, 0.5, 0.0, 0.0],
                  [0.0, 0.0, 1.0, 0.0]])
    B = np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6])
    C = np.array([0.0, 0.5, 0.5, 1.0])
