"""Variable-step, variable-order Adams–Bashforth–Moulton PECE (orders 1–12).

The method of Shampine & Gordon (1975), subroutine STEP: the book's recommended
reference code (Nikravesh (1988), §12.5, Prob. 12.7), and the algorithm behind
MATLAB's ode113 (TAM 674 (2003), lecture of 12 March).  Adams formulas and PECE:
Nikravesh (1988), §12.3.

At order k one step is

1. **P**  ``p = y_n + h Σ_{i=1..k} g_i φ*_i(n)``  (Adams–Bashforth of order k);
2. **E**  ``f_p = f(t_n+1, p)``;
3. error test on ``φ^p_{k+1}(n+1) = f_p − Σ φ*_i(n)`` (reject here, before the
   second evaluation);
4. **C**  ``y_n+1 = p + h g_{k+1} φ^p_{k+1}(n+1)``  (Adams–Moulton of order k+1);
5. **E**  ``f_n+1 = f(t_n+1, y_n+1)``; update the differences.

So "order k" is the pair AB_k / AM_{k+1} (TAM 674 (2003)'s Shampine–Gordon
pairing): the error is estimated for the order-k formula and the order-(k+1)
value is propagated (local extrapolation).  The coefficients are exact for
variable steps (modified divided differences φ_i, with ψ, α, β, σ, g computed
from the step history), so no interpolation of past values is needed when the
step changes.  With a constant step they reduce to the backward-difference
coefficients γ_j of Nikravesh (1988), §12.3–12.3.2 (g_i = γ_{i-1}).

Order and step selection follow STEP: estimates for orders k-2 … k+1
(``h σ |γ*_j| ‖φ_{j+1}‖``), lower the order when that decreases the error,
raise it after k+1 steps of constant size when the order-(k+1) estimate is
smaller; a start-up phase doubles the step and raises the order every step
from order 1 (the starting procedure of §2.7/§2.8: no RK starter is needed);
the step is doubled when the error is far below tolerance, kept when it is
below half of it, otherwise reduced by a factor in [0.5, 0.9]; after three
rejections in a row the order drops to 1.

Dense output: STEP's companion INTRP (the interpolating polynomial of the last
step's differences, order k+1).
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from mbcore.integrate.base import (ADAPTIVE_OPTIONS, CALIBRATION_OPTIONS, Integrator, Option,
                                   calibrated_tolerances, int_range)
from mbcore.integrate.errors import IntegratorOptionError
from mbcore.integrate.common import DenseOutput, rms_norm, select_initial_step

__all__ = ["AdamsPECE", "AdamsDenseOutput", "GAMMA", "GAMMA_STAR"]

KMAX = 12


def _gammas(n: int) -> tuple[list[Fraction], list[Fraction]]:
    """γ_j (AB, backward-difference form) and γ*_j (AM) for j = 0..n-1, exact:
    Σ_{i=0..j} γ_i/(j+1-i) = 1 and γ*_j = γ_j − γ_{j-1} (Nikravesh (1988), §12.3–12.3.2)."""
    g: list[Fraction] = []
    for j in range(n):
        g.append(Fraction(1) - sum((g[i] / (j + 1 - i) for i in range(j)), Fraction(0)))
    gs = [g[0]] + [g[j] - g[j - 1] for j in range(1, n)]
    return g, gs


_G, _GS = _gammas(KMAX + 3)
#: γ_j, j = 0..14 (1, 1/2, 5/12, 3/8, 251/720, ...)
GAMMA = np.array([float(x) for x in _G])
#: γ*_j, j = 0..14 (1, -1/2, -1/12, -1/24, -19/720, ...)
GAMMA_STAR = np.array([float(x) for x in _GS])
_GSTAR_ABS = np.abs(GAMMA_STAR)
_TWO = 2.0 ** np.arange(KMAX + 3)
_ARANGE = np.arange(KMAX + 3, dtype=float)
_ONES = np.ones(KMAX + 3)


class AdamsDenseOutput(DenseOutput):
    """Shampine–Gordon INTRP: the polynomial through the last k+1 derivative
    values, integrated from ``(t, y)`` backwards.  ``phi`` = φ_1..φ_{k+1}(n+1),
    ``psi`` = ψ_1..ψ_k(n+1) (signed)."""

    __slots__ = ("y", "phi", "psi")

    def __init__(self, t_old, t, y, phi, psi):
        super().__init__(t_old, t)
        self.y, self.phi, self.psi = y, phi, psi

    def __call__(self, t):
        t = np.asarray(t, dtype=float)
        if t.ndim > 1:
            raise ValueError("t must be a scalar or a 1-D array")
        hi = np.atleast_1d(t) - self.t                 # (m,)
        ki = self.phi.shape[0]                         # k + 1
        m = hi.size
        w = np.tile(1.0 / np.arange(1, ki + 1), (m, 1))
        G = np.ones((m, ki))
        term = 0.0
        for j in range(2, ki + 1):
            psi = self.psi[j - 2]
            gamma = ((hi + term) / psi)[:, None]
            eta = (hi / psi)[:, None]
            lim = ki + 1 - j
            w = gamma * w[:, :lim] - eta * w[:, 1:lim + 1]
            G[:, j - 1] = w[:, 0]
            term = psi
        y = self.y + hi[:, None] * (G @ self.phi)
        return y[0] if t.ndim == 0 else y


class AdamsPECE(Integrator):
    """Variable-order (1–12), variable-step Adams PECE of Shampine & Gordon.

    Options: ``rtol``, ``atol``, ``first_step``, ``max_step``, ``max_order``.
    ``order`` is k of the pair AB_k/AM_{k+1} used by the last accepted step.
    """

    name = "abm"
    description = ("Adams–Bashforth–Moulton PECE, variable step and order 1–12 "
                   "(Shampine–Gordon STEP; Nikravesh (1988), §12.3–12.5)")
    order = 1
    adaptive = True
    variable_order = True
    options = {**ADAPTIVE_OPTIONS, **CALIBRATION_OPTIONS,
               "max_order": Option(KMAX, "highest order k of the AB_k/AM_(k+1) pair "
                                   "(1–12)", int_range(1, KMAX))}
    #: internal tolerance = TOL_SCALE × user tolerance when ``calibrate``
    #: (docs/integrators.md "Tolerance calibration")
    TOL_SCALE = 0.003
    #: the method's state between steps (exact resume, Integrator rule 11)
    state_fields = ("_phi", "_k", "_phase1", "_neq", "_h_last", "_h", "_hs")
    #: γ_j and |γ*_j| (j = 0..KMAX+2), also read by the compiled loop
    GAMMA = GAMMA
    GAMMA_STAR_ABS = _GSTAR_ABS

    @classmethod
    def compiled_loop_kind(cls):
        """'abm': :mod:`mbcore.integrate.fastloop` runs this method in compiled code
        (``mbcore._ext._steploop.run_abm``, the same steps) unless a subclass
        changes the step."""
        same = (cls._step_impl is AdamsPECE._step_impl
                and cls._restart_impl is AdamsPECE._restart_impl
                and cls._coefficients is AdamsPECE._coefficients
                and cls._dense_output_impl is AdamsPECE._dense_output_impl)
        return "abm" if same else None

    def loop_start(self) -> dict:
        """The divided differences ``phi``, past steps ``hs``, step ``h``, ``h_last``,
        order ``k``, ``neq``, ``phase1``, ``kmax`` and the resolved ``rtol``, ``atol``
        and ``max_step``: where ``run_abm`` starts."""
        return {"phi": self._phi, "hs": self._hs, "h": float(self._h),
                "h_last": float(self._h_last), "k": int(self._k), "neq": int(self._neq),
                "phase1": bool(self._phase1), "kmax": int(self._kmax), "rtol": self._rtol,
                "atol": self._atol, "max_step": float(self._max_step)}

    def restore_loop_history(self, h) -> dict:
        """``run_abm``'s checkpoint history (``phi``, ``hs``, ``h``, ``h_last``, ``k``,
        ``neq``, ``phase1``)."""
        phi = np.array(h["phi"], dtype=float)
        if phi.shape != self._phi.shape:
            raise ValueError(f"checkpoint history: phi {phi.shape}, the integrator "
                             f"has {self._phi.shape}")
        self._phi = phi
        self._hs = np.array(h["hs"], dtype=float)
        self._h = float(h["h"])
        self._h_last = float(h["h_last"])
        self._k = int(h["k"])
        self._neq = int(h["neq"])
        self._phase1 = bool(h["phase1"])
        return {}

    def _restart_impl(self) -> None:
        n = self.n
        self._kmax = self.opts["max_order"]
        self._rtol, self._atol = calibrated_tolerances(
            self.opts["rtol"], self.opts["atol"], self.TOL_SCALE,
            calibrate=self.opts["calibrate"])
        self._max_step = self.opts["max_step"]
        self._phi = np.zeros((self._kmax + 2, n))     # φ_1 .. φ_{kmax+2} at t_n
        self._k = 1
        self.order = 1
        self._phase1 = True
        self._neq = 0              # consecutive accepted steps with the current h
        self._h_last = 0.0
        self._dense = None
        if self.status != "running":
            return
        f0 = self.fun(self.t, self.y)
        self._phi[0] = f0
        if self.opts["first_step"] is not None:
            h_abs = self.opts["first_step"]
        else:
            h_abs = select_initial_step(self.fun, self.t, self.y, self._phi[0].copy(),
                                        self.direction, 1, self._rtol, self._atol,
                                        self.t_bound, self._max_step)
        self._h = self.direction * h_abs
        # past steps (signed, most recent first); placeholders until history exists
        self._hs = np.full(self._kmax + 2, self._h)

    # -- coefficients ----------------------------------------------------------------
    def _coefficients(self, h: float, k: int):
        """ψ(n+1), α, β, σ, g for the step h at order k (STEP block 1)."""
        k1 = k + 1
        if self._neq >= k1 and h == self._h_last:
            # uniform history: the constant-step values (Nikravesh (1988), §12.3–12.3.2: g_i = γ_{i-1})
            return h * _ARANGE[1:k1 + 1], _ONES, _ONES, GAMMA
        psi_old = np.cumsum(self._hs[:k1])                     # ψ_j(n), j=1..k+1
        psi_new = h + np.concatenate(([0.0], psi_old[:k]))      # ψ_j(n+1)
        alpha = h / psi_new                                     # α_1..α_{k+1}
        beta = np.ones(k1)
        beta[1:] = np.cumprod(psi_new[:k] / psi_old[:k])        # β_1..β_{k+1}
        sigma = np.ones(k1 + 1)
        sigma[1:] = np.cumprod(np.arange(1, k1 + 1) * alpha)     # σ_1..σ_{k+2}
        w = 1.0 / np.arange(1, k1 + 2)                          # g_{1,q}, q = 1..k+2
        g = np.empty(k1 + 1)                                    # g_1..g_{k+2}
        g[0] = 1.0
        for i in range(1, k1 + 1):
            w = w[:-1] - alpha[i - 1] * w[1:]
            g[i] = w[0]
        return psi_new, beta, sigma, g

    # -- one step --------------------------------------------------------------------
    def _step_impl(self):
        t, y = self.t, self.y
        rtol, atol = self._rtol, self._atol
        kmax = self._kmax
        min_step = self._min_step(t)
        ifail = 0
        k = self._k
        h = self._h
        if abs(h) > self._max_step:
            h = self.direction * self._max_step
        while True:
            t_new, clipped = self._trial_end(t, abs(h), min_step)
            if clipped:
                h = t_new - t
            if h != self._h_last:
                self._neq = 0
            ns = self._neq + 1                 # steps of this size, this one included
            psi_new, beta, sigma, g = self._coefficients(h, k)
            phi = self._phi
            phistar = beta[:k + 1, None] * phi[:k + 1]          # φ*_1..φ*_{k+1}(n)
            p = y + h * (g[:k] @ phistar[:k])
            fp = self.fun(t_new, p)
            sum_star = phistar[:k].sum(axis=0)
            d_kp1 = fp - sum_star                                # φ^p_{k+1}(n+1)
            inv_scale = 1.0 / (atol + rtol * np.maximum(np.abs(y), np.abs(p)))
            habs = abs(h)
            nk = rms_norm(d_kp1 * inv_scale)
            erk = habs * sigma[k] * _GSTAR_ABS[k] * nk
            err = habs * abs(g[k - 1] - g[k]) * nk
            knew = k
            erkm1 = erkm2 = 0.0
            if k >= 2:
                d_k = d_kp1 + phistar[k - 1]
                erkm1 = habs * sigma[k - 1] * _GSTAR_ABS[k - 1] * rms_norm(d_k * inv_scale)
                if k >= 3:
                    d_km1 = d_k + phistar[k - 2]
                    erkm2 = habs * sigma[k - 2] * _GSTAR_ABS[k - 2] * \
                        rms_norm(d_km1 * inv_scale)
                    if max(erkm1, erkm2) <= erk:
                        knew = k - 1
                elif erkm1 <= 0.5 * erk:
                    knew = k - 1
            if err <= 1.0:
                break
            # rejected: halve (three times), then order 1 and the optimal step
            self._reject_error_test()
            self._phase1 = False
            ifail += 1
            factor = 0.5
            if ifail >= 3:
                knew = 1
                if ifail > 3 and erk > 2.0:
                    factor = math.sqrt(0.5 / erk)
            h *= factor
            k = knew

        # correct and evaluate
        y_new = p + h * g[k] * d_kp1
        f_new = self.fun(t_new, y_new)
        d_kp1 = f_new - sum_star                                 # φ_{k+1}(n+1)
        d_kp2 = d_kp1 - phistar[k]                               # φ_{k+2}(n+1)
        new_phi = np.empty_like(phi)
        new_phi[:k] = np.cumsum(phistar[k - 1::-1], axis=0)[::-1] + d_kp1
        new_phi[k] = d_kp1
        new_phi[k + 1] = d_kp2
        if k + 2 < new_phi.shape[0]:
            new_phi[k + 2:] = 0.0

        # order for the next step (STEP block 4)
        erkp1 = 0.0
        self.order = k
        if knew == k - 1 or k == kmax:
            self._phase1 = False
        if self._phase1:
            k_next = k + 1
            erk = 0.0
        elif knew == k - 1:
            k_next, erk = k - 1, erkm1
        elif k + 1 > ns or k == kmax:
            k_next = k
        else:
            erkp1 = habs * _GSTAR_ABS[k + 1] * rms_norm(d_kp2 * inv_scale)
            k_next = k
            if k == 1:
                if erkp1 < 0.5 * erk:
                    k_next, erk = 2, erkp1
            elif erkm1 <= min(erk, erkp1):
                k_next, erk = k - 1, erkm1
            elif erkp1 < erk:
                k_next, erk = k + 1, erkp1
        # step size for the next step
        if self._phase1 or 0.5 >= erk * _TWO[k_next + 1]:
            h_next = 2.0 * h
        elif 0.5 >= erk:
            h_next = h
        else:
            r = (0.5 / erk) ** (1.0 / (k_next + 1))
            h_next = h * max(0.5, min(0.9, r))
        if abs(h_next) > self._max_step:
            h_next = self.direction * self._max_step

        # accept (bookkeeping only here)
        self._dense = (new_phi[:k + 1].copy(), psi_new[:k].copy())
        self._neq = self._neq + 1 if h == self._h_last else 1
        self._h_last = h
        self._hs[1:] = self._hs[:-1]
        self._hs[0] = h
        self._phi = new_phi
        self._k = k_next
        self._h = h_next
        self.t = t_new
        self.y = y_new
        return True, None

    def correct(self, t: float, y) -> None:
        """Continue from a slightly corrected value at the current point (a
        projection onto the constraint manifold after a step): the Adams formulas
        advance y from it with the kept differences of f, step size and order,
        instead of a :meth:`restart` at order 1 after every projected step."""
        y = np.array(y, dtype=np.float64)
        if y.shape != (self.n,) or not np.all(np.isfinite(y)) or t != self.t:
            raise IntegratorOptionError(self._label, "y", f"a correction needs {self.n} "
                                        f"finite values at the current t")
        self.y = y

    def _dense_output_impl(self):
        phi, psi = self._dense
        return AdamsDenseOutput(self.t_old, self.t, self.y, phi, psi)
