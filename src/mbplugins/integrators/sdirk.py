"""SDIRK of order 4 with an embedded order-3 formula, variable step: the 5-stage,
L-stable, stiffly accurate method with γ = 1/4 of Hairer & Wanner (1996), §IV.6,
Table 6.5 (the method of their code SDIRK4).

Each stage ``M Z_i = Σ_{j<i} a_ij K_j + γ h f(t_0 + c_i h, y_0 + Z_i)`` (``K_j = h f(Y_j)``)
is solved by simplified Newton with the one matrix ``M − γ h J`` for all five
stages; the stage derivatives are recovered from the converged increments,
``K_i = (M Z_i − Σ_{j<i} a_ij K_j)/γ`` (Hairer & Wanner (1996), §IV.8, so that Newton
errors are not amplified by a stiff f), and ``y_1 = y_0 + Z_5`` (stiffly accurate).

Error estimate ``err = (M − γ h J)⁻¹ Σ (b_i − b̂_i) K_i``: the difference with the
embedded order-3 weights b̂, filtered by the Newton matrix so that it stays bounded
on stiff components (derived here after the filtering of Radau IIA's estimate,
Hairer & Wanner (1996), §IV.8).  Step control ``h·min(5, max(0.2, 0.9 ‖err‖^(−1/4)))``;
h (and the LU) kept when the factor lies in [1, 1.2).

Newton (as ``radau``): the first stage starts from ``γ h y'_0``, the others from the
previous stage's increment (starting from ``K_i = K_(i−1)`` instead: on the index-1
Robertson DAE 22436 Newton failures in 6841 steps instead of 184 in 181); at least
two iterations per stage (unless a correction is exactly zero), converged when
``θ/(1−θ)‖ΔZ‖ < max(10 eps/rtol, min(0.03, sqrt(rtol)))``, divergence when θ ≥ 1
or the predicted final correction is too large.  The Jacobian is kept across steps
and re-evaluated when Newton fails with a stale one; a failure with a fresh one
halves h.

``mass``: a constant diagonal mass matrix (``M y' = f``, zeros: algebraic equations
of an index-1 DAE, left out of the error test and the Newton norm).  No ``h_power``
(the stage order 1 of SDIRK methods makes them a poor choice for index-2/3
problems: use ``radau`` or ``bdf``), so the multibody ``stiff`` formulation refuses it.

Dense output: cubic Hermite through ``(y_0, y'_0)``, ``(y_1, y'_1)`` with
``y'_1 = K_5/(h m)`` for the differential components (stiffly accurate: the last
stage is the step end) and the secant for the algebraic ones.
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.integrate.base import Option, int_range
from mbcore.integrate.common import HermiteDenseOutput, rms_norm

from .implicit_rk import IMPLICIT_RK_OPTIONS, ImplicitRK

__all__ = ["SDIRK4", "SDIRK_A", "SDIRK_B", "SDIRK_B_HAT", "SDIRK_C", "SDIRK_GAMMA"]

#: Hairer & Wanner (1996), §IV.6, Table 6.5
SDIRK_GAMMA = 0.25
SDIRK_A = np.array([
    [1 / 4, 0, 0, 0, 0],
    [1 / 2, 1 / 4, 0, 0, 0],
    [17 / 50, -1 / 25, 1 / 4, 0, 0],
    [371 / 1360, -137 / 2720, 15 / 544, 1 / 4, 0],
    [25 / 24, -49 / 48, 125 / 16, -85 / 12, 1 / 4]])
SDIRK_C = np.array([1 / 4, 3 / 4, 11 / 20, 1 / 2, 1.0])
SDIRK_B = SDIRK_A[4].copy()
SDIRK_B_HAT = np.array([59 / 48, -17 / 96, 225 / 32, -85 / 12, 0.0])

MIN_FACTOR = 0.2
MAX_FACTOR = 5.0
KEEP_BELOW = 1.2


class SDIRK4(ImplicitRK):
    """5-stage SDIRK, order 4 (embedded 3), L-stable, variable step."""

    name = "sdirk"
    description = ("SDIRK, 5 stages, order 4 with embedded order 3, gamma = 1/4, L-stable, "
                   "variable step (Hairer & Wanner (1996), §IV.6, Table 6.5)")
    order = 4
    #: the DAE formulations it integrates: index 2 (GGL); the index-3 'stiff' form
    #: needs the h-weighted error control (h_power) it does not have
    DAE_FORMULATIONS = ("ggl",)
    A = SDIRK_A
    B = SDIRK_B
    C = SDIRK_C
    #: the method's state between steps (exact resume, Integrator rule 11)
    state_fields = ("_h_abs", "_J", "_jac_current", "_lu", "_lu_h", "_yp", "_y_prev",
                    "_yp_prev")
    #: method data also read by the compiled loop (mbcore._ext._steploop.run_sdirk)
    GAMMA = SDIRK_GAMMA
    B_HAT = SDIRK_B_HAT
    MIN_FACTOR = MIN_FACTOR
    MAX_FACTOR = MAX_FACTOR
    KEEP_BELOW = KEEP_BELOW

    @classmethod
    def compiled_loop_kind(cls):
        """'sdirk': :mod:`mbcore.integrate.fastloop` runs this method in compiled code
        (``mbcore._ext._steploop.run_sdirk``, the same steps) unless a subclass changes
        the step or the tableau: the ODE form (the compiled right-hand side's
        ``c_jac``) and the option ``mass`` with a Jacobian call-back (the GGL form on
        ``mbplugins._ext._dae.CompiledGGL``); a constant Jacobian keeps the Python
        driver."""
        same = all(getattr(cls, m) is getattr(SDIRK4, m) for m in (
            "_step_impl", "_restart_impl", "_stages", "_norm", "_dense_output_impl",
            "jac", "lu_factor", "lu_solve", "A", "C", "B", "B_HAT", "GAMMA"))
        return "sdirk" if same else None

    def loop_start(self) -> dict:
        """Where ``run_sdirk`` starts: the derivative ``yp`` at (t, y), the step
        ``h_abs``, ``maxiter``, ``newton_tol``, ``rtol``, ``atol``, ``max_step`` and the
        mass diagonal ``mass`` (None: unit)."""
        return {"yp": self._yp, "h_abs": float(self._h_abs), "maxiter": int(self._maxiter),
                "newton_tol": float(self._newton_tol), "rtol": self._rtol,
                "atol": self._atol, "max_step": float(self._max_step),
                "mass": None if self._unit_mass else self._m}

    def restore_loop_history(self, h) -> dict:
        """``run_sdirk``'s checkpoint history (``yp``, ``h_abs``; and the loop's
        Jacobian ``J`` with the ``lu_h`` of its LU, returned as its arguments ``J0``,
        ``lu_h0``)."""
        yp = np.array(h["yp"], dtype=float)
        if yp.shape != (self.n,):
            raise ValueError(f"checkpoint history: derivative {yp.shape}, the integrator "
                             f"has ({self.n},)")
        self._yp = yp
        self._h_abs = float(h["h_abs"])
        if h.get("J") is None:
            return {}
        return {"J0": np.ascontiguousarray(h["J"], dtype=float).ravel(),
                "lu_h0": float(h["lu_h"])}

    options = {
        **IMPLICIT_RK_OPTIONS,
        "newton_maxiter": Option(7, "simplified Newton iterations per stage",
                                 int_range(2, 50)),
    }

    def _restart_impl(self) -> None:
        self._setup_implicit_rk()
        self._mask = slice(None) if self._diff.all() else self._diff
        self._J = None
        self._jac_current = False
        self._lu = None
        self._lu_h = None
        self._yp = None
        self._y_prev = None
        self._yp_prev = None
        self._h_abs = 0.0
        if self.status != "running":
            return
        f0 = self.fun(self.t, self.y)
        self._yp = f0 * self._minv              # y' (0 for algebraic components)
        self._h_abs = self._first_step(f0)

    def _norm(self, x, scale):
        k = self._mask
        return rms_norm(x[k] / scale[k])

    def _stages(self, t, y, h, scale):
        """All five stages; (converged, K, Z5, iterations, rate of the last stage)."""
        m = self._m
        gh = SDIRK_GAMMA * h
        tol = self._newton_tol
        maxiter = self._maxiter
        K = np.zeros((5, self.n))
        Z = gh * self._yp
        iters = 0
        rate = None
        for i in range(5):
            known = SDIRK_A[i, :i] @ K[:i] if i else np.zeros(self.n)
            ti = t + SDIRK_C[i] * h
            norm_old = None
            rate = None
            converged = False
            for k in range(maxiter):
                f = self.fun(ti, y + Z)
                r = known + gh * f - m * Z
                dZ = self.lu_solve(self._lu, r)
                norm = self._norm(dZ, scale)
                iters += 1
                if not norm < math.inf:
                    break
                if norm_old is not None:
                    rate = norm / norm_old
                    if rate >= 1 or rate ** (maxiter - k) / (1 - rate) * norm > tol:
                        break
                Z = Z + dZ
                if norm == 0.0 or (rate is not None and rate / (1 - rate) * norm < tol):
                    converged = True
                    break
                norm_old = norm
            if not converged:
                self._newton_iterations(iters)
                return False, None, None, rate
            K[i] = (m * Z - known) / SDIRK_GAMMA
        self._newton_iterations(iters)
        return True, K, Z, rate

    def _step_impl(self):
        t, y = self.t, self.y
        min_step = self._min_step(t)
        h_abs = min(max(self._h_abs, min_step), self._max_step)
        while True:
            t_new, clipped = self._trial_end(t, h_abs, min_step)
            h = t_new - t
            h_abs = abs(h)
            scale = self._atol + self._rtol * np.abs(y)
            if self._J is None:
                self._J = self.jac(t, y, None, scale)
                self._jac_current = True
                self._lu = None
            if self._lu is None or self._lu_h != h:
                self._lu = self.lu_factor(np.asfortranarray(
                    np.diag(self._m) - (SDIRK_GAMMA * h) * self._J))
                self._lu_h = h
            converged, K, Z, rate = self._stages(t, y, h, scale)
            if not converged:
                self._reject_newton()
                if not self._jac_current:
                    self._J = self.jac(t, y, None, scale)
                    self._jac_current = True
                    self._lu = None
                    continue
                h_abs *= 0.5
                continue
            y_new = y + Z
            err = self.lu_solve(self._lu, (SDIRK_B - SDIRK_B_HAT) @ K)
            scale = self._atol + self._rtol * np.maximum(np.abs(y), np.abs(y_new))
            err_norm = self._norm(err, scale)
            if err_norm > 1:
                self._reject_error_test()
                h_abs *= max(MIN_FACTOR, 0.9 * err_norm ** -0.25)
                continue
            break

        factor = MAX_FACTOR if err_norm == 0 else \
            min(MAX_FACTOR, max(MIN_FACTOR, 0.9 * err_norm ** -0.25))
        if 1.0 <= factor < KEEP_BELOW:
            factor = 1.0
        self._h_abs = h_abs * factor
        yp_new = np.where(self._diff, K[4] / h * self._minv, (y_new - y) / h)
        self._y_prev = y
        self._yp_prev = np.where(self._diff, self._yp, (y_new - y) / h)
        self._yp = np.where(self._diff, yp_new, 0.0)
        self.t = t_new
        self.y = y_new
        self._jac_current = self._jac_constant is not None
        return True, None

    def _dense_output_impl(self):
        y1 = self.y
        h = self.t - self.t_old
        yp1 = np.where(self._diff, self._yp, (y1 - self._y_prev) / h)
        return HermiteDenseOutput(self.t_old, self.t, self._y_prev, self._yp_prev, y1, yp1)
