"""Radau IIA of order 5 (3 stages), variable step, for stiff ODEs and DAEs
``M y' = f(t, y)`` with a constant diagonal mass matrix.

References: Hairer & Wanner (1996), §IV.5 (Table 5.6: the method, a collocation
method at the Radau points, order 5, stage order 3, L-stable, stiffly accurate),
§IV.8 (the implementation of their code RADAU5: the transformed Newton system, the
error estimate, the step controller), §VI.1 and §VII.8 (DAEs: ``M`` singular, the
|h|^p weights of higher-index variables).  Written for mbcore after the structure
of RADAU5 (and of scipy's ``Radau``); no code is shared.

The collocation equations for the stage increments ``Z_i = Y_i − y_0``

    M Z_i = h Σ_j a_ij f(t_0 + c_j h, y_0 + Z_j),   i = 1..3,

are solved by a simplified Newton iteration on ``W = (T⁻¹ ⊗ I) Z``, where
``T⁻¹ A⁻¹ T = diag(γ, [[α, β], [−β, α]])`` (A⁻¹ has one real eigenvalue γ and a
complex pair α ± iβ): each iteration solves one real system with ``γ/h M − J``
and one complex one with ``(α − iβ)/h M − J`` (n×n each, not 3n×3n).  ``T``
is computed here from the eigenvectors of A⁻¹ (any basis with that block form
serves).  Convergence: rate θ = ‖ΔW_k‖/‖ΔW_k−1‖, at least two iterations (unless a
correction is exactly zero), converged when θ/(1−θ)‖ΔW‖ < κ with
``κ = max(10 eps/rtol, min(0.03, sqrt(rtol)))``, divergence when θ ≥ 1 or the
predicted final correction exceeds κ within ``newton_maxiter``.  Starting values:
the previous step's collocation polynomial extrapolated (zero at the first step).

Error estimate (Hairer & Wanner (1996), §IV.8, Eq. 8.20):
``err = (γ/h M − J)⁻¹ [f(t_0, y_0) + M Σ e_i Z_i / h]`` — the difference with an
embedded order-3 formula, filtered by the real Newton matrix so that it stays
bounded for stiff components; at the first step and after a rejection, when
``‖err‖ > 1``, a second try ``(γ/h M − J)⁻¹ [f(t_0, y_0 + err) + M Σ e_i Z_i / h]``.

Step control: Gustafsson's predictive controller (RADAU5's default),
``h_new = h · min(1, (h/h_old)(‖err_old‖/‖err‖)^(1/4)) ‖err‖^(−1/4)``, times the
safety ``0.9 (2k_max + 1)/(2k_max + k)`` (k Newton iterations), factors in
[0.2, 10]; after a rejection ``h · max(0.2, safety ‖err‖^(−1/4))``.

Jacobian and LU reuse (RADAU5): after an accepted step the Jacobian is kept when
Newton converged fast (at most two iterations or rate ≤ 1e-3); the two matrices are
factorised again only when h changes, and h is kept when the proposed factor lies
in [1, 1.2) and the Jacobian is kept.  A Newton failure with a stale Jacobian
re-evaluates it; with a fresh one it halves h.

Tolerances are used as given (scipy's ``Radau``; RADAU5's transformation
``rtol' = 0.1 rtol^(2/3)`` would loosen every rtol below 1e-3, while the measured
global errors already stay below rtol: docs/integrators.md "radau").

DAE options (as for ``bdf``; docs/integrators.md "DAEs"): ``mass`` the diagonal of M
(zeros: algebraic equations, which stay out of the error test and the Newton norm
unless ``h_power`` is given); ``h_power`` weights component i's error by |h|^p_i in
the error test and the Newton norm (RADAU5's treatment of index-2 and index-3
variables, p = index − 1); ``newton_system`` is accepted so that the multibody
``stiff`` formulation can pass its reduced real Newton system, but it is not used:
Radau's complex system does not fit that real hook, so radau solves the full
systems ``γ/h M − J`` and ``(α − iβ)/h M − J`` (the Jacobian of the problem, e.g.
the formulation's analytic one).
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.integrate.base import Option, int_range
from mbcore.integrate.common import RKDenseOutput, rms_norm

from .bdf import mass_vector
from .bdf import newton_system_hook as _newton_system
from .bdf import power_vector as _power_vector
from .implicit_rk import IMPLICIT_RK_OPTIONS, ImplicitRK

__all__ = ["Radau5", "RADAU_A", "RADAU_B", "RADAU_C", "RADAU_E"]

S6 = math.sqrt(6.0)
#: nodes: the zeros of the Radau polynomial (Hairer & Wanner (1996), Table 5.6)
RADAU_C = np.array([(4 - S6) / 10, (4 + S6) / 10, 1.0])
#: Butcher matrix (Hairer & Wanner (1996), Table 5.6); stiffly accurate: b = last row
RADAU_A = np.array([
    [(88 - 7 * S6) / 360, (296 - 169 * S6) / 1800, (-2 + 3 * S6) / 225],
    [(296 + 169 * S6) / 1800, (88 + 7 * S6) / 360, (-2 - 3 * S6) / 225],
    [(16 - S6) / 36, (16 + S6) / 36, 1 / 9]])
RADAU_B = RADAU_A[2].copy()
#: error-estimate weights of the stage increments (Hairer & Wanner (1996), §IV.8:
#: RADAU5's DD1, DD2, DD3)
RADAU_E = np.array([-13 - 7 * S6, -13 + 7 * S6, -1.0]) / 3


def _transformation(A: np.ndarray):
    """(γ, μ, T, T⁻¹) with ``A⁻¹ T = T diag(γ, [[α, β], [−β, α]])`` and
    ``μ = α − iβ`` the shift of the complex system (derived here from the
    eigenvectors of A⁻¹; see the module docstring)."""
    Ainv = np.linalg.inv(A)
    w, V = np.linalg.eig(Ainv)
    real = int(np.argmin(np.abs(w.imag)))
    cplx = int(np.argmax(w.imag))                 # α + iβ with β > 0
    v1 = V[:, real].real
    v = V[:, cplx]
    T = np.column_stack([v1 / v1[2], v.real, v.imag])
    gamma = float(w[real].real)
    mu = complex(w[cplx].real, -w[cplx].imag)
    return gamma, mu, T, np.linalg.inv(T)


RADAU_GAMMA, RADAU_MU, RADAU_T, RADAU_TI = _transformation(RADAU_A)
#: collocation polynomial u(s) = Σ_k q_k s^k, k = 1..3, through u(c_i) = Z_i:
#: q = V⁻¹ Z with V_ik = c_i^k; as RKDenseOutput's P (Z = h K): P = V⁻ᵀ
RADAU_P = np.linalg.inv(RADAU_C[:, None] ** np.arange(1, 4)).T

MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
KEEP_BELOW = 1.2


class Radau5(ImplicitRK):
    """Radau IIA, order 5, variable step (RADAU5's algorithm)."""

    name = "radau"
    description = ("Radau IIA, 3 stages, order 5, L-stable, variable step; stiff ODEs and "
                   "DAEs M y' = f (Hairer & Wanner (1996), §IV.8, RADAU5)")
    order = 5
    A = RADAU_A
    B = RADAU_B
    C = RADAU_C
    E = RADAU_E
    #: the method's state between steps (exact resume, Integrator rule 11)
    state_fields = ("_h_abs", "_h_abs_old", "_err_old", "_f", "_J", "_jac_current",
                    "_lu_real", "_lu_complex", "_lu_h", "_Z", "_h_last", "_y_prev",
                    "_rejected_first")

    @classmethod
    def compiled_loop_kind(cls):
        """'radau': :mod:`mbcore.integrate.fastloop` runs this method in compiled code
        (``mbcore._ext._steploop.run_radau``, the same steps) unless a subclass changes
        the step or the method data: the ODE form (the compiled right-hand side's
        ``c_jac``) and the DAE options ``mass`` and ``h_power`` with a Jacobian
        call-back (the ``ggl`` and ``stiff`` forms; ``newton_system`` is not used by
        radau); a constant Jacobian keeps the Python driver."""
        same = all(getattr(cls, m) is getattr(Radau5, m) for m in (
            "_step_impl", "_restart_impl", "_collocation", "_factor", "_scale", "_norm",
            "_dense_output_impl", "jac", "lu_factor", "lu_solve", "C", "E", "T", "TI",
            "P", "GAMMA", "MU"))
        return "radau" if same else None

    #: method data also read by the compiled loop: the shifts of the real and complex
    #: Newton matrices, the transformation of A⁻¹ and its inverse, the collocation
    #: polynomial, the step-change limits
    GAMMA, MU, T, TI, P = RADAU_GAMMA, RADAU_MU, RADAU_T, RADAU_TI, RADAU_P
    MIN_FACTOR, MAX_FACTOR, KEEP_BELOW = MIN_FACTOR, MAX_FACTOR, KEEP_BELOW

    def loop_start(self) -> dict:
        """Where ``run_radau`` starts: f and the Jacobian ``J`` at (t, y) with
        ``jac_current``, the step ``h_abs``, the controller's ``h_abs_old`` and
        ``err_old`` (None: none yet), the last collocation increments ``Z`` (None:
        none) with their step ``h_last``, ``rejected_first``, ``maxiter``,
        ``newton_tol``, ``rtol``, ``atol``, ``max_step``, ``mass`` (None: unit) and
        ``h_power``."""
        return {"f": self._f, "J": self._J, "jac_current": bool(self._jac_current),
                "h_abs": float(self._h_abs), "h_abs_old": self._h_abs_old,
                "err_old": self._err_old, "Z": self._Z, "h_last": float(self._h_last),
                "rejected_first": bool(self._rejected_first),
                "maxiter": int(self._maxiter), "newton_tol": float(self._newton_tol),
                "rtol": self._rtol, "atol": self._atol, "max_step": float(self._max_step),
                "mass": None if self._unit_mass else self._m, "h_power": self._hpow}

    def restore_loop_history(self, h) -> dict:
        """``run_radau``'s checkpoint history into this object (``f``, ``J``,
        ``jac_current``, ``h_abs``, ``h_abs_old``, ``err_old``, ``Z``, ``h_last``,
        ``rejected_first``); returns the h of the loop's LU (``lu_h0``, 0: none)."""
        f = np.array(h["f"], dtype=float)
        J = np.array(h["J"], dtype=float)
        if f.shape != (self.n,) or J.shape != (self.n, self.n):
            raise ValueError(f"checkpoint history: f {f.shape}, J {J.shape}, the "
                             f"integrator has {self.n} components")
        self._f, self._J = f, J
        self._jac_current = bool(h["jac_current"])
        self._h_abs = float(h["h_abs"])
        self._h_abs_old = None if h["h_abs_old"] is None else float(h["h_abs_old"])
        self._err_old = None if h["err_old"] is None else float(h["err_old"])
        self._Z = None if h["Z"] is None else np.array(h["Z"], dtype=float)
        self._h_last = float(h["h_last"])
        self._rejected_first = bool(h["rejected_first"])
        return {"lu_h0": float(h["lu_h"])}

    options = {
        **IMPLICIT_RK_OPTIONS,
        "newton_maxiter": Option(7, "simplified Newton iterations per attempt (RADAU5's "
                                 "NIT)", int_range(2, 50)),
        "mass": Option(None, "diagonal of a constant mass matrix for M y' = f(t, y) "
                       "(semi-explicit DAE: zeros mark algebraic equations, which are "
                       "excluded from the error test unless h_power is given)",
                       mass_vector),
        "h_power": Option(None, "per component p in 0..3: its error is weighted by |h|^p "
                          "in the error test and the Newton norm (RADAU5's index-2/3 "
                          "variables: p = index - 1) and no component is left out of them",
                          _power_vector),
        "newton_system": Option(None, "accepted for the 'stiff' formulation and not used: "
                                "radau solves its real and complex Newton systems in full",
                                _newton_system),
    }

    # ---------------------------------------------------------------------------
    def _restart_impl(self) -> None:
        o = self.opts
        self._setup_implicit_rk()
        self._hpow = o.get("h_power")
        # components in the error test and the Newton norm: all with h_power, else the
        # differential ones (as bdf)
        self._mask = slice(None) if (self._hpow is not None or self._diff.all()) \
            else self._diff
        self._J = None
        self._jac_current = False
        self._lu_real = None
        self._lu_complex = None
        self._lu_h = None
        self._Z = None
        self._y_prev = None
        self._h_last = 0.0
        self._h_abs_old = None
        self._err_old = None
        self._rejected_first = True       # the first step: the second error try
        self._f = None
        self._h_abs = 0.0
        self.newton_rate = None
        if self.status != "running":
            return
        self._f = self.fun(self.t, self.y).copy()
        self._h_abs = self._first_step(self._f)
        self._J = self.jac(self.t, self.y, self._f, self._atol + self._rtol * np.abs(self.y))
        self._jac_current = True

    # ---------------------------------------------------------------------------
    def _scale(self, y0, y1, h_abs):
        """atol + rtol max(|y0|, |y1|), divided by |h|^p with ``h_power``."""
        s = self._atol + self._rtol * np.maximum(np.abs(y0), np.abs(y1))
        return s if self._hpow is None else s / h_abs ** self._hpow

    def _norm(self, x, scale):
        k = self._mask
        return rms_norm(x[k] / scale[k])

    def _factor(self, h):
        m = self._m
        J = self._J
        Mr = (RADAU_GAMMA / h) * np.diag(m) - J
        Mc = (RADAU_MU / h) * np.diag(m).astype(complex) - J
        self._lu_real = self.lu_factor(np.asfortranarray(Mr))
        self._lu_complex = self.lu_factor(np.asfortranarray(Mc))

    def _collocation(self, t, y, h, Z0, scale):
        """Simplified Newton for the stage increments; (converged, k, Z, rate)."""
        m = self._m
        W = RADAU_TI @ Z0
        Z = Z0
        F = np.empty((3, self.n))
        ch = h * RADAU_C
        gr = RADAU_GAMMA / h
        mc = RADAU_MU / h
        ti_r = RADAU_TI[0]
        ti_c = RADAU_TI[1] + 1j * RADAU_TI[2]
        tol = self._newton_tol
        maxiter = self._maxiter
        norm_old = None
        rate = None
        converged = False
        dW = np.empty((3, self.n))
        k = 0
        for k in range(maxiter):
            for i in range(3):
                F[i] = self.fun(t + ch[i], y + Z[i])
            r_real = ti_r @ F - gr * m * W[0]
            r_cplx = ti_c @ F - mc * m * (W[1] + 1j * W[2])
            d_real = self.lu_solve(self._lu_real, r_real)
            d_cplx = self.lu_solve(self._lu_complex, r_cplx)
            dW[0] = d_real
            dW[1] = d_cplx.real
            dW[2] = d_cplx.imag
            norm = math.sqrt((self._norm(dW[0], scale) ** 2 + self._norm(dW[1], scale) ** 2
                              + self._norm(dW[2], scale) ** 2) / 3)
            if not norm < math.inf:              # singular matrix or overflow
                break
            if norm_old is not None:
                rate = norm / norm_old
                if rate >= 1 or rate ** (maxiter - k) / (1 - rate) * norm > tol:
                    break
            W = W + dW
            Z = RADAU_T @ W
            if norm == 0.0 or (rate is not None and rate / (1 - rate) * norm < tol):
                converged = True
                break
            norm_old = norm
        self._newton_iterations(k + 1)
        return converged, k + 1, Z, rate

    def _step_impl(self):
        t, y = self.t, self.y
        min_step = self._min_step(t)
        h_abs = min(max(self._h_abs, min_step), self._max_step)
        if h_abs != self._h_abs:
            self._lu_real = None
        rejected = self._rejected_first
        while True:
            t_new, clipped = self._trial_end(t, h_abs, min_step)
            h = t_new - t
            h_abs = abs(h)
            if clipped:
                self._lu_real = None
            if self._Z is None:
                Z0 = np.zeros((3, self.n))
            else:   # the last collocation polynomial, extrapolated
                s = 1.0 + h * RADAU_C / self._h_last
                Z0 = (s[:, None] ** np.arange(1, 4)) @ (RADAU_P.T @ self._Z)
                Z0 = Z0 - self._Z[2]
            scale = self._scale(y, y, h_abs)
            if self._lu_real is None or self._lu_h != h:
                self._factor(h)
                self._lu_h = h
            converged, n_iter, Z, rate = self._collocation(t, y, h, Z0, scale)
            if not converged:
                self._reject_newton()
                if not self._jac_current:
                    self._J = self.jac(t, y, self._f, scale)
                    self._jac_current = True
                    self._lu_real = None
                    continue
                h_abs *= 0.5
                self._lu_real = None
                rejected = True
                continue
            y_new = y + Z[2]
            ZE = (RADAU_E @ Z) / h
            mZE = ZE if self._unit_mass else self._m * ZE
            err = self.lu_solve(self._lu_real, self._f + mZE)
            scale = self._scale(y, y_new, h_abs)
            err_norm = self._norm(err, scale)
            safety = 0.9 * (2 * self._maxiter + 1) / (2 * self._maxiter + n_iter)
            if rejected and err_norm > 1:        # the second try (RADAU5)
                err = self.lu_solve(self._lu_real, self.fun(t, y + err) + mZE)
                err_norm = self._norm(err, scale)
            if err_norm > 1:
                self._reject_error_test()
                h_abs *= max(MIN_FACTOR, safety * err_norm ** -0.25)
                self._lu_real = None
                rejected = True
                continue
            break

        # accepted
        self.newton_rate = rate
        recompute_jac = self._jac_constant is None and n_iter > 2 and \
            (rate is None or rate > 1e-3)
        if self._err_old is None or self._h_abs_old is None or err_norm == 0:
            multiplier = 1.0
        else:
            multiplier = h_abs / self._h_abs_old * (self._err_old / err_norm) ** 0.25
        with np.errstate(divide="ignore"):
            factor = min(1.0, multiplier) * (err_norm ** -0.25 if err_norm > 0 else math.inf)
        factor = min(MAX_FACTOR, safety * factor)
        if not recompute_jac and 1.0 <= factor < KEEP_BELOW:
            factor = 1.0
        self._h_abs_old = h_abs
        self._err_old = err_norm
        self._h_abs = h_abs * factor
        if factor != 1.0:
            self._lu_real = None
        self._rejected_first = False
        self._Z = Z
        self._h_last = h
        self._y_prev = y
        self.t = t_new
        self.y = y_new
        self._f = self.fun(t_new, y_new).copy()
        if recompute_jac:
            self._J = self.jac(t_new, y_new, self._f, scale)
            self._jac_current = True
            self._lu_real = None
        else:
            self._jac_current = self._jac_constant is not None
        return True, None

    def _dense_output_impl(self):
        h = self._h_last
        return RKDenseOutput(self.t_old, self.t, self._y_prev, self._Z / h, RADAU_P)
