"""Fixed-step implicit one-step methods solved by modified Newton: backward
(implicit) Euler and the trapezoidal rule — the θ-method
``y_n+1 = y_n + h[(1−θ) f_n + θ f(t_n+1, y_n+1)]`` with θ = 1 and θ = 1/2.

References:  (backward Euler = AM1 = BDF1, TAM 674 (2003), lecture of 10 March;
Nikravesh (1988), Tables 12.2/12.3), §2.6 (trapezoid = AM2, A-stable), §2.9 (Newton with
``I − hθ f_y``, Jacobian/LU reuse).  Backward Euler is L-stable and damps
oscillations numerically; the trapezoidal rule is A-stable, conserves the
amplitude of undamped oscillations, but does not damp stiff components.

Newton: predictor ``y_n + h f_n``, iteration matrix ``I − hθJ`` factorised once
and reused while h is unchanged; the Jacobian is re-evaluated only when the
iteration fails to converge (rate ≥ 1 or ``newton_maxiter`` reached) and the
attempt is repeated once; a second failure is a :class:`NewtonFailure` naming
the time (a fixed-step method does not shrink its step).  Converged when the
last correction is below ``newton_atol + newton_rtol·|y|`` (RMS).
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.integrate.base import (FIXED_STEP_OPTIONS, NEWTON_OPTIONS, Integrator,
                                   NewtonFailure)
from mbcore.integrate.common import (HermiteDenseOutput, LinearDenseOutput, difference_floor,
                                    rms_norm)

__all__ = ["ThetaMethod", "ImplicitEuler", "Trapezoid"]


class ThetaMethod(Integrator):
    """θ-method with a fixed step (options ``step`` and the Newton options)."""

    implicit = True
    theta: float = 1.0
    options = {**FIXED_STEP_OPTIONS, **NEWTON_OPTIONS}
    #: the method's state between steps (exact resume, Integrator rule 11): grid,
    #: derivative at t, Newton Jacobian and its LU
    state_fields = ("_h", "_t_start", "_i", "_f", "_J", "_jac_current", "_lu", "_c_lu")
    #: the end derivative and dense output of a concrete method, read by the compiled
    #: loop: 'difference' ((y_n+1 − y_n)/h, linear interpolation: ImplicitEuler) or
    #: 'evaluated' (f(t_n+1, y_n+1), cubic Hermite: Trapezoid)
    END_DERIVATIVE: str | None = None

    @classmethod
    def compiled_loop_kind(cls):
        """'theta': :mod:`mbcore.integrate.fastloop` runs this method (no Jacobian given: the
        compiled right-hand side's ``c_jac``, forward differences or the
        semi-analytic DI/CS Jacobian) in compiled code (``mbcore._ext._steploop.run_theta``,
        the same steps, Newton iterations, Jacobians and LU factorisations) unless a
        subclass changes the step, the Newton iteration, the end derivative or the
        dense output."""
        same = all(getattr(cls, m) is getattr(ThetaMethod, m) for m in (
            "_step_impl", "_restart_impl", "_solve", "_newton", "jac", "lu_factor", "lu_solve"))
        pair = {"difference": ImplicitEuler, "evaluated": Trapezoid}.get(cls.END_DERIVATIVE)
        same = (same and pair is not None and cls._end_derivative is pair._end_derivative
                and cls._dense_output_impl is pair._dense_output_impl)
        return "theta" if same else None

    def loop_start(self) -> dict:
        """Where ``run_theta`` starts: ``f`` at the start of the grid, ``t_start``,
        the step index ``i`` and the step ``h``."""
        return {"f": self._f, "t_start": float(self._t_start), "i": int(self._i),
                "h": float(self._h)}

    def restore_loop_history(self, h) -> dict:
        """``run_theta``'s checkpoint history (``f``, ``t_start``, ``i``, ``h``; the
        loop's Jacobian ``J`` and ``c_lu`` returned as ``J0``, ``c_lu0``)."""
        self._f = np.array(h["f"], dtype=float)
        self._t_start = float(h["t_start"])
        self._i = int(h["i"])
        self._h = float(h["h"])
        if h.get("J") is None:
            return {}
        return {"J0": np.ascontiguousarray(h["J"], dtype=float).ravel(),
                "c_lu0": float(h["c_lu"])}

    def _restart_impl(self) -> None:
        self._h = self.opts["step"]
        self._t_start = self.t
        self._i = 0
        self._J = None
        self._jac_current = False
        self._lu = None
        self._c_lu = None
        self._I = np.eye(self.n)
        self._y_old = self._f_old = None
        self._f = self.fun(self.t, self.y).copy() if self.status == "running" else None

    def _solve(self, t_new, y_n, base, y0, c):
        """Modified Newton for y = base + c f(t_new, y); returns (ok, y, iters)."""
        o = self.opts
        scale = o["newton_atol"] + o["newton_rtol"] * np.abs(y_n)
        y = y0.copy()
        norm_old = None
        for it in range(1, o["newton_maxiter"] + 1):
            f = self.fun(t_new, y)
            dy = self.lu_solve(self._lu, base + c * f - y)
            y += dy
            norm = rms_norm(dy / scale)
            if not norm < math.inf:              # singular matrix or overflow
                return False, y, it
            if norm <= 1.0:
                return True, y, it
            if norm_old is not None and norm >= norm_old:
                return False, y, it
            norm_old = norm
        return False, y, o["newton_maxiter"]

    def _newton(self, t_new, y_n, base, y_pred, c, h) -> np.ndarray:
        """y_new of ``y = base + c f(t_new, y)`` by :meth:`_solve` from ``y_pred``, with
        the kept Jacobian and LU (refactorised when c changes by more than 1e-6
        relative); a failure with an old Jacobian re-evaluates it and retries once, a
        failure with a fresh one raises :class:`NewtonFailure` (shared by ``am``)."""
        for attempt in (0, 1):
            if self._J is None:
                self._J = self.jac(t_new, y_pred, None,
                                   difference_floor(y_pred, ((0, y_pred.size),)))
                self._jac_current = True
                self._lu = None
            if self._lu is None or abs(c - self._c_lu) > 1e-6 * abs(self._c_lu):
                self._lu = self.lu_factor(self._I - c * self._J)
                self._c_lu = c
            ok, y_new, iters = self._solve(t_new, y_n, base, y_pred, c)
            self._newton_iterations(iters)
            if ok:
                self._jac_current = self._jac_constant is not None
                return y_new
            self._reject_newton()
            if attempt == 1 or self._jac_current:
                break
            self._J = None          # stale: re-evaluate and retry once
        raise NewtonFailure(
            f"{self.name}: the Newton iteration did not converge in "
            f"{self.opts['newton_maxiter']} iterations with step {abs(h):.3e} "
            f"(fresh Jacobian); reduce 'step' or loosen 'newton_rtol'", t_new)

    def _step_impl(self):
        t, y_n, f_n = self.t, self.y, self._f
        self._i += 1
        t_new = self._t_start + self._i * self.direction * self._h
        if self.direction * (t_new - self.t_bound) > -1e-9 * self._h:
            t_new = self.t_bound
        h = t_new - t
        if abs(h) < self._min_step(t):
            self._step_too_small(h, "remaining interval")
        theta = self.theta
        c = h * theta
        base = y_n + (h * (1.0 - theta)) * f_n if theta != 1.0 else y_n
        y_pred = y_n + h * f_n
        y_new = self._newton(t_new, y_n, base, y_pred, c, h)
        self._y_old, self._f_old = y_n, f_n
        self.t, self.y = t_new, y_new
        self._f = self._end_derivative(t_new, y_n, y_new, f_n, h)
        return True, None

    def _end_derivative(self, t_new, y_n, y_new, f_n, h):
        raise NotImplementedError  # pragma: no cover


class ImplicitEuler(ThetaMethod):
    name = "implicit_euler"
    description = ("backward (implicit) Euler, order 1, fixed step, Newton; A- and "
                   "L-stable (TAM 674 (2003), lecture of 10 March)")
    order = 1
    theta = 1.0
    END_DERIVATIVE = "difference"

    def _end_derivative(self, t_new, y_n, y_new, f_n, h):
        # the derivative the method used: (y_n+1 − y_n)/h = f(t_n+1, y_n+1) at convergence
        return (y_new - y_n) / h

    def _dense_output_impl(self):
        return LinearDenseOutput(self.t_old, self.t, self._y_old, self.y)


class Trapezoid(ThetaMethod):
    name = "trapezoid"
    description = ("trapezoidal rule (AM2), order 2, fixed step, Newton; A-stable "
                   "(Nikravesh (1988), Table 12.2)")
    order = 2
    theta = 0.5
    END_DERIVATIVE = "evaluated"

    def _end_derivative(self, t_new, y_n, y_new, f_n, h):
        # evaluated (one call per step): reconstructing it as 2(y_n+1−y_n)/h − f_n
        # would carry an undamped (−1)^n error mode on stiff problems
        return self.fun(t_new, y_new).copy()

    def _dense_output_impl(self):
        return HermiteDenseOutput(self.t_old, self.t, self._y_old, self._f_old,
                                  self.y, self._f)
