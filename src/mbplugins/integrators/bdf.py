"""Variable-order (1–5, or 1–6 on request), variable-step BDF (Gear's method) with
Newton iteration.

References: Nikravesh (1988), §12.4 (Eqs. 12.22–12.24, Table 12.3); TAM 674 (2003),
lecture of 12 March.  Design after the quasi-constant-step codes: Gear (1971), DIFSUB;
Byrne & Hindmarsh (1975), EPISODE; Hindmarsh (1983), LSODE, and
Brown, Byrne & Hindmarsh (1989), VODE, for the Jacobian/LU reuse policy; Shampine & Reichelt (1997),
ode15s, for the backward-difference formulation (docs/references.md).

Formulation (backward differences on a uniform grid):
``Σ_{j=1..k} (1/j) ∇^j y_n+1 = h f_n+1``.  With ``D[j] = ∇^j y_n`` the
predictor is ``y_pred = Σ_{j=0..k} D[j]`` and the corrector solves for
``d = y_n+1 − y_pred`` (= ∇^{k+1} y_n+1)

    d − c f(t_n+1, y_pred + d) + ψ = 0,   c = h/γ_k,  ψ = (1/γ_k) Σ_{j=1..k} γ_j D[j],

``γ_j = Σ_{i≤j} 1/i``, by modified Newton with ``M = I − c J``.  Local error
estimate ``d/(k+1)`` (ode15s's conservative constant).  A step-size
change by a factor r re-interpolates the differences (``D ← (R(r)U)ᵀ D``).

Newton and Jacobian policy (Nikravesh (1988), §12.4; Jacobian handling is mbcore's choice):

* the Jacobian (user ``jac`` or forward differences) is kept across steps and
  re-evaluated when the iteration fails with a stale one, or when it is
  ``jac_max_age`` steps old (VODE's MSBJ);
* the LU factors of M are kept while ``|c/c_LU − 1| ≤ refactor_ratio`` (0.3,
  LSODE's CCMAX); with stale factors the correction is scaled by
  ``2/(1 + c_LU/c)`` (DASSL);
* convergence: rate ρ = ‖Δ_l‖/‖Δ_{l−1}‖ (so at least two iterations, unless the
  first correction is exactly zero; accepting after one iteration with the rate
  of the previous step, as VODE does, let Newton errors pollute the high-order
  differences and caused cascades of rejections on Robertson), converged when ρ/(1−ρ)·‖Δ‖ < tol with
  ``tol = max(10 eps/rtol, min(0.03, sqrt(rtol)))`` (raw control; calibrated:
  ``max(10 eps/rtol_int, 0.03)``); divergence when ρ ≥ 1 or
  the predicted final error exceeds tol within ``newton_maxiter``;
* failure with a fresh Jacobian halves the step.

DAE hooks (``mass``, ``h_power``, ``newton_system``; docs/integrators.md "DAEs"):
with ``mass`` alone the algebraic components (zero mass) get the index-2 scaling
of the Newton matrix and stay out of the error test; ``h_power`` weights each
component's error by ``|h|^p`` in the error test and the Newton norm instead
(RADAU5's treatment of higher-index variables: p = index − 1); ``newton_system``
lets the problem solve the Newton equations ``(diag(mass) − cJ) Δ = r`` its own
way (a reduced, rescaled system: the stiff multibody formulation).  Without
them nothing changes.

Order/step selection: after k+1 steps of constant size compare the error
estimates of orders k−1 (``D[k]/k``), k, k+1 (``∇^{k+2}y/(k+2)``) and take the
order allowing the largest step, changing it by at most one; factors are
limited to [0.2, 10] with the safety ``0.9 (2m+1)/(2m+n_iter)``; a factor in
[1, 1.2) with no order change keeps h (and the factors).
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.integrate.base import (ADAPTIVE_OPTIONS, CALIBRATION_OPTIONS, EPS, Integrator,
                                   Option, calibrated_tolerances, fraction, int_range,
                                   positive_or_none)
from mbcore.integrate.errors import IntegratorOptionError
from mbcore.integrate.common import (BackwardDifferenceDenseOutput, rms_norm,
                                     select_initial_step)

__all__ = ["BDF", "BDF_GAMMA", "BDF_ERROR_CONST", "NewtonSystem", "rescale_matrix",
           "mass_vector", "power_vector", "newton_system_hook"]

#: highest order allowed (``max_order: 6`` on request); BDF6 is zero-stable but only
#: A(α)-stable with α ≈ 17.8° (BDF7 is not zero-stable): Hairer & Wanner (1996), §V.2
MAX_ORDER = 6
#: highest order by default (BDF1–5: A(α) with α ≥ 51.8°)
DEFAULT_MAX_ORDER = 5
#: highest order the compiled loop (``run_bdf``) implements: all of them, BDF6 included
COMPILED_MAX_ORDER = 6
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
KEEP_BELOW = 1.2

#: γ_k = Σ_{i≤k} 1/i (γ_0 = 0); the leading coefficient b_{-1} of BDF_k is 1/γ_k
BDF_GAMMA = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, MAX_ORDER + 1))))
#: error constants used: 1/(k+1), k = 0..MAX_ORDER+1 (the estimate of order k+1 at
#: the order selection needs one beyond MAX_ORDER)
BDF_ERROR_CONST = 1.0 / np.arange(1, MAX_ORDER + 3)


def _mass_vector(value, n: int = 0):
    """Option check: None or a 1-D array of n finite non-negative numbers."""
    if value is None:
        return None
    v = np.asarray(value, dtype=float).reshape(-1)
    if (n and v.size != n) or not np.all(np.isfinite(v)) or np.any(v < 0):
        raise ValueError(f"expected {n} finite numbers >= 0, got {v.size} values")
    return v


def _power_vector(value, n: int = 0):
    """Option check: None or n integers in 0..3 (power of |h| per component)."""
    if value is None:
        return None
    try:
        v = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"expected {n} integers in 0..3, got {value!r}") from None
    if (n and v.size != n) or not np.all(np.isfinite(v)) or np.any(v != np.round(v)) \
            or np.any(v < 0) or np.any(v > 3):
        raise ValueError(f"expected {n} integers in 0..3 (the power of |h| weighting each "
                         f"component's error), got {v.size} values")
    return v


class NewtonSystem:
    """Hook (``newton_system`` option): solve bdf's Newton equations

        (diag(mass) − c J) Δ = r,      r = c f(t, y) − mass·(ψ + d),

    exactly but in the problem's own unknowns — e.g. after eliminating some of
    them and rescaling others so that the matrix stays well conditioned as
    h → 0 where the plain matrix does not (index-3 DAEs: cond ∝ h⁻³).  bdf
    factors ``matrix(J, mass, c)`` with its own LU (counted, reused while c
    changes by less than ``refactor_ratio`` and J is not re-evaluated: a stale
    ``c`` is passed to ``rhs``/``solution``, which must then solve the system of
    that ``c``) and, at every iteration, computes
    ``Δ = solution(lu_solve(rhs(r, c)), r, c)``.  ``J`` is the last Jacobian passed
    to ``matrix``.  Before every step attempt bdf calls ``update(t, y_pred)``; a
    True return has the matrix re-factored (the hook refreshed cheap, exact parts
    of J that a stale Jacobian would get wrong: an index-3 constraint Jacobian
    enters the matrix unscaled, so a few steps' drift already stalls Newton).
    The default (no hook) is bdf's own full system with the index-2 scaling of
    the algebraic components.
    """

    def update(self, t: float, y: np.ndarray) -> bool:
        return False

    def matrix(self, J: np.ndarray, mass: np.ndarray, c: float) -> np.ndarray:
        raise NotImplementedError

    def rhs(self, r: np.ndarray, c: float) -> np.ndarray:
        raise NotImplementedError

    def solution(self, x: np.ndarray, r: np.ndarray, c: float) -> np.ndarray:
        raise NotImplementedError


def _newton_system(value, n: int = 0):
    """Option check: None or an object with update/matrix/rhs/solution methods."""
    if value is None:
        return None
    missing = [k for k in ("matrix", "rhs", "solution", "update")
               if not callable(getattr(value, k, None))]
    if missing:
        raise ValueError(f"expected a NewtonSystem (methods matrix, rhs, solution, update), "
                         f"{type(value).__name__} lacks {', '.join(missing)}")
    return value


#: the option checks of the DAE options, shared by the methods that take them (radau,
#: sdirk, the generalized-α methods)
mass_vector, power_vector, newton_system_hook = _mass_vector, _power_vector, _newton_system


def _factor(err: float, order: int) -> float:
    return math.inf if err == 0.0 else err ** (-1.0 / (order + 1))


def _rmat(order: int, factor: float) -> np.ndarray:
    """R(order, factor): maps backward differences at spacing h to those of the
    same polynomial at spacing factor·h (with U = R(order, 1))."""
    i = np.arange(1, order + 1)[:, None]
    j = np.arange(1, order + 1)
    M = np.zeros((order + 1, order + 1))
    M[1:, 1:] = (i - 1 - factor * j) / i
    M[0] = 1.0
    return np.cumprod(M, axis=0)


def rescale_matrix(order: int, factor: float) -> np.ndarray:
    """Matrix ``T`` with ``D_new[:order+1] = T @ D[:order+1]`` for a step change
    h → factor·h (exact for polynomials of degree ≤ order)."""
    return (_rmat(order, factor) @ _rmat(order, 1.0)).T


class BDF(Integrator):
    """Variable-order, variable-step BDF with modified Newton iteration."""

    name = "bdf"
    description = ("Gear/BDF, variable step and order 1–5 (6 with max_order 6), Newton "
                   "with Jacobian and LU reuse (Nikravesh (1988), §12.4)")
    order = 1
    adaptive = True
    implicit = True
    variable_order = True
    #: internal rtol = TOL_SCALE × rtol^TOL_EXPONENT when ``calibrate``: BDF does not
    #: propagate a higher-order value, so its global error grows like
    #: (steps) × tol ∝ tol^(k/(k+1)); the exponent (k+1)/k = 1.2 of order 5 restores
    #: proportionality (RADAU5 transforms its tolerance the same way, with 2/3 for its
    #: order-3 estimate).  Non-stiff problems run at order 5 (≥ 85 % of the steps on
    #: all five sweep problems), so one exponent serves; the constant 0.005 is set by
    #: the worst sweep problem, Kepler over 3 orbits (max 4.8 × tol; 0.1 gave 88 ×).
    #: docs/integrators.md "Tolerance calibration".
    TOL_SCALE = 0.005
    TOL_EXPONENT = 1.2
    #: a DAE (zero mass entries): the smallest internal rtol, and the smallest ratio
    #: of the internal to the requested atol, where Newton on the constraint rows
    #: still converges above round-off; the smallest rtol whose global error stays
    #: within 10x (the dynamic analysis refuses a DAE formulation below it)
    DAE_TOL_FLOOR = 1e-13
    DAE_ATOL_FACTOR = 1e-3
    DAE_RTOL_MIN = 1e-9
    #: the method's state between steps (exact resume, Integrator rule 11): the
    #: differences, order, step, and the Newton Jacobian with its age and LU
    state_fields = ("_D", "_k", "_n_equal", "_h_abs", "_J", "_jac_current", "_jac_age",
                    "_lu", "_c_lu")
    #: method data also read by the compiled loop (mbcore._ext._steploop.run_bdf)
    GAMMA = BDF_GAMMA
    ERROR_CONST = BDF_ERROR_CONST
    MIN_FACTOR = MIN_FACTOR
    MAX_FACTOR = MAX_FACTOR
    KEEP_BELOW = KEEP_BELOW
    COMPILED_MAX_ORDER = COMPILED_MAX_ORDER

    @classmethod
    def compiled_loop_kind(cls):
        """'bdf': :mod:`mbcore.integrate.fastloop` runs this method in compiled code
        (``mbcore._ext._steploop.run_bdf``, the same steps) unless a subclass
        changes the step: the ODE form (the compiled right-hand side's ``c_jac``:
        forward differences, or the semi-analytic DI/CS Jacobian, which the dynamic
        analysis then also hands to this driver as ``jac``) and the DAE
        options ``mass``, ``h_power`` and ``newton_system`` (the hook called back from
        C) with a Jacobian call-back (the GGL form on ``mbplugins._ext._dae.CompiledGGL``, spec
        §2.9/§4.6); a constant Jacobian keeps the Python driver."""
        same = all(getattr(cls, m) is getattr(BDF, m) for m in (
            "_step_impl", "_restart_impl", "_newton", "_rescale", "_newton_matrix",
            "_weighted", "_dense_output_impl", "jac", "lu_factor", "lu_solve"))
        return "bdf" if same else None
    options = {
        **ADAPTIVE_OPTIONS, **CALIBRATION_OPTIONS,
        "max_order": Option(DEFAULT_MAX_ORDER, "highest BDF order (1–6; 1–2 are "
                            "A-stable, 6 only A(17.8°)-stable: non-stiff or mildly stiff "
                            "problems at tight tolerances)", int_range(1, MAX_ORDER)),
        "newton_maxiter": Option(4, "Newton iterations per attempt", int_range(1, 50)),
        "newton_tol": Option(None, "Newton convergence tolerance in the weighted norm; "
                             "default max(10 eps/rtol, min(0.03, sqrt(rtol))), "
                             "0.03 when calibrated",
                             positive_or_none),
        "jac_max_age": Option(50, "re-evaluate the Jacobian after this many steps",
                              int_range(1, 10**9)),
        "refactor_ratio": Option(0.3, "refactor M = I - cJ when c changed by more than "
                                 "this fraction", fraction),
        "mass": Option(None, "diagonal of a constant mass matrix for M y' = f(t, y) "
                       "(semi-explicit DAE: zeros mark algebraic equations, which are "
                       "excluded from the error test)", _mass_vector),
        "h_power": Option(None, "per component p in 0..3: its error is weighted by |h|^p "
                          "in the error test and the Newton norm (DAEs: RADAU5 uses "
                          "p = index - 1) and no component is left out of them",
                          _power_vector),
        "newton_system": Option(None, "hook: a NewtonSystem solving the Newton equations "
                                "(diag(mass) - cJ) d = r its own way (reduced, rescaled "
                                "index-3 system of the 'stiff' formulation)", _newton_system),
    }

    def loop_start(self) -> dict:
        """Where ``run_bdf`` starts: the differences ``D``, order ``k``, ``h_abs``,
        ``n_equal``, the resolved ``max_order``, ``maxiter``, ``newton_tol``, ``rtol``,
        ``atol``, ``max_step``, and the DAE options ``mass`` (None: unit),
        ``h_power`` and ``newton_system``."""
        return {"D": self._D, "k": int(self._k), "h_abs": float(self._h_abs),
                "n_equal": int(self._n_equal), "max_order": int(self._max_order),
                "maxiter": int(self._maxiter), "newton_tol": float(self._newton_tol),
                "rtol": self._rtol, "atol": self._atol, "max_step": float(self._max_step),
                "mass": None if bool(np.all(self._m == 1.0)) else self._m,
                "h_power": self._hpow, "newton_system": self._hook}

    def restore_loop_history(self, h) -> dict:
        """``run_bdf``'s checkpoint history (``D``, ``k``, ``n_equal``, ``h_abs``; and
        the loop's Jacobian ``J`` with ``jac_age``, ``c_lu``, returned as its
        arguments ``J0``, ``jac_age0``, ``c_lu0``)."""
        D = np.array(h["D"], dtype=float)
        if D.shape != self._D.shape:
            raise ValueError(f"checkpoint history: differences {D.shape}, the integrator "
                             f"has {self._D.shape}")
        self._D = D
        self._k = int(h["k"])
        self._n_equal = int(h["n_equal"])
        self._h_abs = float(h["h_abs"])
        if h.get("J") is None:
            return {}
        return {"J0": np.ascontiguousarray(h["J"], dtype=float).ravel(),
                "jac_age0": int(h["jac_age"]), "c_lu0": float(h["c_lu"])}

    def _restart_impl(self) -> None:
        o = self.opts
        n = self.n
        # a semi-explicit DAE (zero mass entries: the GGL and stiff forms) is calibrated
        # as an ODE within two round-off limits of the constraint rows of its Newton
        # system (docs/integrators.md "Tolerance calibration"): the internal rtol is at
        # least DAE_TOL_FLOOR and the internal atol at least DAE_ATOL_FACTOR x atol
        dae = o.get("mass") is not None and bool(np.any(np.asarray(o["mass"]) == 0))
        self._calibrated = bool(o["calibrate"])
        self._rtol, self._atol = calibrated_tolerances(
            o["rtol"], o["atol"], self.TOL_SCALE, self.TOL_EXPONENT,
            o["calibrate"], floor=self.DAE_TOL_FLOOR if dae else 10 * EPS)
        if dae and self._calibrated:
            a_min = self.DAE_ATOL_FACTOR * np.asarray(o["atol"], dtype=float)
            a_int = np.maximum(self._atol, a_min)
            self._atol = float(a_int) if a_int.ndim == 0 else a_int
        self._max_step = o["max_step"]
        self._max_order = o["max_order"]
        self._maxiter = o["newton_maxiter"]
        # Newton tolerance, in the weighted norm of the (internal) tolerances: scipy's
        # / ode15s's max(10 eps/rtol, min(0.03, sqrt(rtol))) for the raw control; with
        # the calibration the error test is already ≥ 200 × tighter than the user's
        # tolerance, and sqrt(internal rtol) asked Newton for corrections below the
        # round-off of the residual (stiff chain, rtol 1e-7, exact Jacobian: 873 Newton
        # failures, corrections stalling at 1e-3 of the error-test unit), so the
        # calibrated control leaves Newton the fraction 0.03 (LSODE: 0.5/(q+2) ≥ 0.07)
        rtol_min = float(np.min(self._rtol))
        frac = 0.03 if self._calibrated else min(0.03, float(np.min(o["rtol"])) ** 0.5)
        self._newton_tol = o["newton_tol"] if o["newton_tol"] is not None else \
            max(10 * EPS / rtol_min, frac)
        mass = o.get("mass")
        self._m = np.ones(n) if mass is None else np.asarray(mass, float)
        self._I = np.diag(self._m)
        self._diff = self._m != 0          # differential components (error test)
        self._hook = o.get("newton_system")
        # |h|^p weights of higher-index DAE components in every norm (RADAU5)
        self._hpow = o.get("h_power")
        # differences ∇^0..∇^(k+2) for k ≤ max_order: max_order + 3 rows (what the
        # compiled loop expects; a fixed 8 rows made it refuse max_order < 5)
        self._D = np.zeros((self._max_order + 3, n))
        self._k = 1
        self.order = 1
        self._n_equal = 0
        self._J = None
        self._jac_current = False
        self._jac_age = 0
        self._lu = None
        self._c_lu = 0.0
        self.newton_rate = None
        self._dense = None
        if self.status != "running":
            return
        f0 = self.fun(self.t, self.y).copy()
        if o["first_step"] is not None:
            h_abs = o["first_step"]
        else:
            h_abs = select_initial_step(self.fun, self.t, self.y, f0, self.direction, 1,
                                        self._rtol, self._atol, self.t_bound, self._max_step)
        self._h_abs = h_abs
        self._D[0] = self.y
        # M y' = f: y' = f / m for differential components; algebraic ones start flat
        yp = np.where(self._diff, f0 / np.where(self._diff, self._m, 1.0), 0.0)
        self._D[1] = yp * self.direction * h_abs

    def _newton_matrix(self, c: float) -> np.ndarray:
        """``M - c J``; for a DAE the algebraic rows (m_i = 0) are divided by c and
        the algebraic unknowns are solved as ``c * dy``, so that the matrix stays
        well conditioned as h -> 0 (index-2 scaling, Hairer-Wanner VII.3).  A
        ``newton_system`` hook supplies its own (reduced) matrix instead."""
        if self._hook is not None:
            return np.array(self._hook.matrix(self._J, self._m, c), dtype=np.float64,
                            order="F")
        A = self._I - c * self._J
        alg = ~self._diff
        if alg.any():
            A[alg] = -self._J[alg]           # rows of the algebraic equations / c
            A[:, alg] = -self._J[:, alg]     # columns of the algebraic unknowns * 1/c
        return A

    @property
    def _err_mask(self):
        """Components in the error test: the differential ones, or all with ``h_power``."""
        return self._diff if self._hpow is None else slice(None)

    def _weighted(self, scale: np.ndarray, h_abs: float) -> np.ndarray:
        """Error scale of a step of size h_abs: with ``h_power`` each component's scale
        is divided by |h|^p, i.e. its error weighted by |h|^p (RADAU5's SCAL/HHFAC for
        index-2 and index-3 variables; Hairer & Wanner, Solving ODEs II, VII.8);
        else unchanged."""
        if self._hpow is None:
            return scale
        return scale / h_abs ** self._hpow

    def _rescale(self, factor: float) -> None:
        k = self._k
        self._D[:k + 1] = rescale_matrix(k, factor) @ self._D[:k + 1]
        self._h_abs *= factor
        self._n_equal = 0

    def _newton(self, t_new, y_pred, c, psi, scale):
        """Modified Newton for d; returns (converged, n_iter, y, d)."""
        d = np.zeros(self.n)
        y = y_pred.copy()
        tol = self._newton_tol
        maxiter = self._maxiter
        lu = self._lu
        ratio = self._c_lu / c
        stale_scale = 1.0 if ratio == 1.0 else 2.0 / (1.0 + ratio)
        dy_norm_old = None
        rate = None
        converged = False
        k = 0
        m = self._m
        alg = ~self._diff
        dm = self._diff
        hook = self._hook
        for k in range(maxiter):
            f = self.fun(t_new, y)
            r = c * f - m * (psi + d)
            if hook is not None:     # the problem's own (reduced) Newton system
                dy = hook.solution(self.lu_solve(lu, hook.rhs(r, self._c_lu)), r, self._c_lu)
            else:
                if alg.any():        # algebraic rows are divided by c (see _newton_matrix)
                    r[alg] = f[alg]
                dy = self.lu_solve(lu, r)
                if alg.any():        # the algebraic unknowns were solved as c * dy
                    dy[alg] /= self._c_lu
            if stale_scale != 1.0:
                dy *= stale_scale
            # index-2 algebraic unknowns converge with the differential ones; their
            # corrections are O(1) as h -> 0 and stay out of the norm (as in DAE codes);
            # with ``h_power`` every component counts, ``scale`` carries the h weights
            if self._hpow is not None:
                dy_norm = rms_norm(dy / scale)
            else:
                dy_norm = rms_norm(dy[dm] / scale[dm]) if alg.any() else rms_norm(dy / scale)
            if not dy_norm < math.inf:            # singular M or overflow: a failure
                break
            if dy_norm_old is not None:
                rate = dy_norm / dy_norm_old
                if rate >= 1 or rate ** (maxiter - k) / (1 - rate) * dy_norm > tol:
                    # stagnation at round-off: the last correction was already below
                    # 100 eps |y| in the error norm, so the iterate is as converged as
                    # the arithmetic allows (DASSL's test; a stiff spring of 8e5 N/m
                    # at rtol 1e-6 stalls at 3e-8 error units, rate 1.03)
                    if self._noise_converged(dy_norm_old, y, scale, dm, alg):
                        converged = True
                    break
            y += dy
            d += dy
            if dy_norm == 0.0 or (rate is not None and rate / (1 - rate) * dy_norm < tol):
                converged = True
                break
            dy_norm_old = dy_norm
        self._newton_iterations(k + 1)
        self.newton_rate = rate
        return converged, k + 1, y, d

    def _noise_converged(self, dy_norm_old, y, scale, dm, alg) -> bool:
        """The Newton correction ``dy_norm_old`` (error norm) is at the round-off level
        of ``y``: ``<= 100 eps ||y / scale||`` over the components of the norm."""
        if self._hpow is not None or not alg.any():
            ynorm = rms_norm(y / scale)
        else:
            ynorm = rms_norm(y[dm] / scale[dm])
        return dy_norm_old <= 100.0 * EPS * ynorm

    def _step_impl(self):
        t = self.t
        D = self._D
        rtol, atol = self._rtol, self._atol
        min_step = self._min_step(t)
        if self._h_abs > self._max_step:
            self._rescale(self._max_step / self._h_abs)
        elif self._h_abs < min_step:
            self._rescale(min_step / self._h_abs)
        while True:
            h_abs = self._h_abs
            t_new, clipped = self._trial_end(t, h_abs, min_step)
            h = self.direction * h_abs
            if clipped:
                self._rescale(abs(self.t_bound - t) / h_abs)
                h = t_new - t
                h_abs = abs(h)
            k = self._k
            y_pred = D[:k + 1].sum(axis=0)
            scale = self._weighted(atol + rtol * np.abs(y_pred), h_abs)
            psi = (BDF_GAMMA[1:k + 1] @ D[1:k + 1]) / BDF_GAMMA[k]
            c = h / BDF_GAMMA[k]
            if self._J is None:
                self._J = self.jac(t_new, y_pred, None, scale)
                self._jac_current = True
                self._jac_age = 0
                self._lu = None
            if self._hook is not None and self._hook.update(t_new, y_pred):
                self._lu = None
            if self._lu is None or abs(c / self._c_lu - 1.0) > self.opts["refactor_ratio"]:
                self._lu = self.lu_factor(self._newton_matrix(c))
                self._c_lu = c
            converged, n_iter, y_new, d = self._newton(t_new, y_pred, c, psi, scale)
            if not converged:
                self._reject_newton()
                if not self._jac_current:
                    self._J = self.jac(t_new, y_pred, None, scale)
                    self._jac_current = True
                    self._jac_age = 0
                    self._lu = None
                    continue
                self._rescale(0.5)
                continue
            safety = 0.9 * (2 * self._maxiter + 1) / (2 * self._maxiter + n_iter)
            scale = self._weighted(atol + rtol * np.abs(y_new), h_abs)
            dm = self._err_mask
            err = rms_norm(BDF_ERROR_CONST[k] * d[dm] / scale[dm])
            if err > 1.0:
                self._reject_error_test()
                self._rescale(max(MIN_FACTOR, safety * err ** (-1.0 / (k + 1))))
                continue
            break

        # accept
        self._n_equal += 1
        self.t = t_new
        self.y = y_new
        D[k + 2] = d - D[k + 1]
        D[k + 1] = d
        for i in range(k, -1, -1):
            D[i] += D[i + 1]
        self._dense = (h, D[:k + 1].copy())
        self.order = k
        self._jac_current = self._jac_constant is not None   # a constant J is never stale
        self._jac_age += 1
        if self._jac_age >= self.opts["jac_max_age"]:
            self._J = None

        if self._n_equal < k + 1:
            return True, None
        # order k-1, k, k+1: the one allowing the largest step (factor = err^(-1/(q+1)))
        best, best_factor = 0, _factor(err, k)
        dm = self._err_mask
        if k > 1:
            f_m = _factor(rms_norm(BDF_ERROR_CONST[k - 1] * D[k][dm] / scale[dm]), k - 1)
            if f_m > best_factor:
                best, best_factor = -1, f_m
        if k < self._max_order:
            f_p = _factor(rms_norm(BDF_ERROR_CONST[k + 1] * D[k + 2][dm] / scale[dm]), k + 1)
            if f_p > best_factor:
                best, best_factor = 1, f_p
        factor = min(MAX_FACTOR, safety * best_factor)
        if best == 0 and 1.0 <= factor < KEEP_BELOW:
            return True, None
        self._k = k + best
        self._rescale(factor)
        return True, None

    def correct(self, t: float, y) -> None:
        """Continue from a slightly corrected value at the current point (a
        projection onto the constraint manifold after a step): the history's
        polynomial is translated by the correction — its backward differences, the
        step size and the order are kept, as the BDF formula's coefficients sum to
        zero — instead of a :meth:`restart` at order 1 with a small step after
        every projected step."""
        y = np.array(y, dtype=np.float64)
        if y.shape != (self.n,) or not np.all(np.isfinite(y)) or t != self.t:
            raise IntegratorOptionError(self._label, "y", f"a correction needs {self.n} "
                                        f"finite values at the current t")
        self._D[0] = y
        self.y = y

    def _dense_output_impl(self):
        h, Dk = self._dense
        return BackwardDifferenceDenseOutput(self.t_old, self.t, h, Dk)
