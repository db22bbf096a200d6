"""Generalized-α methods: ``genalpha`` (Chung–Hulbert), ``hht`` (Hilber–Hughes–Taylor)
with a fixed step, and ``genalpha_var`` with a variable step.

**Second-order form** (option ``positions`` = p, optional ``multipliers`` = k; the
state ``y = [q (p), v (p), lam (k), e (rest)]`` of ``mass·y' = f(t, y)`` with
``f = [v, f_v, Phi, f_e]``, the mass diagonal ``[1, M_v, 0, 1]``): the index-3
equations of motion ``M_v q'' = f_v(t, q, q', lam)``, ``0 = Phi(t, q)`` are
integrated as in Arnold & Brüls (2007) (Chung & Hulbert (1993) for the ODE case
k = 0)::

    q_n+1 = q_n + h v_n + h^2 (1/2 - β) a_n + h^2 β a_n+1
    v_n+1 = v_n + h (1 - γ) a_n + h γ a_n+1
    (1 - α_m) a_n+1 + α_m a_n = (1 - α_f) q''_n+1 + α_f q''_n
    M_v q''_n+1 = f_v(t_n+1, q_n+1, v_n+1, lam_n+1),    Phi(t_n+1, q_n+1) = 0

with ``a`` the algorithmic accelerations and ``q''`` the true ones: the equations of
motion and the constraints hold exactly at every step end (positions on the
constraint manifold to the Newton tolerance).  Newton's unknowns are ``q''_n+1`` and
``lam_n+1``; with ``β' = β(1 - α_f)/(1 - α_m)``, ``γ' = γ(1 - α_f)/(1 - α_m)`` the
iteration matrix, the constraint rows divided by ``β' h^2`` (the scaling of
Arnold & Brüls (2007), §3 and Bottasso, Bauchau & Cardona (2007), which keeps its
condition number O(1) as h -> 0 where the unscaled one grows like h^-4), is::

    [ M_v - β' h^2 ∂f_v/∂q - γ' h ∂f_v/∂v    -∂f_v/∂lam ]
    [ ∂Phi/∂q                                  0          ]

from the problem's analytic Jacobian ``jac`` (the multibody formulations pass
theirs).  The trailing components ``e`` (e.g. the work integral of the dynamic
analysis) are quadratures, ``e' = f_e(t, q, v, lam)``, integrated by the
trapezoidal rule.

Parameters from the spectral radius at infinity ``rho_inf`` = ρ ∈ [0, 1]
(Chung & Hulbert (1993), Eqs. 25-27)::

    genalpha: α_m = (2ρ - 1)/(ρ + 1), α_f = ρ/(ρ + 1)
    hht:      α_m = 0,  α_f = (1 - ρ)/(1 + ρ),  ρ ∈ [1/2, 1]
              (Hilber, Hughes & Taylor (1977) with α = -α_f; the force average moved
              to the accelerations as in Arnold & Brüls (2007): identical on linear
              problems)
    γ = 1/2 + α_f - α_m,   β = (γ + 1/2)^2 / 4

second order, unconditionally stable on linear problems, ρ = 1: the trapezoidal
(average-acceleration Newmark) rule, no damping; ρ = 0: asymptotic annihilation.

**First-order form** (no ``positions``: any ODE ``y' = f(t, y)``): the
generalized-α method of Jansen, Whiting & Hulbert (2000), Eqs. 18-19, 25-26,
``y_n+1 = y_n + h ẏ_n + h γ (ẏ_n+1 - ẏ_n)``, ``ẏ_n+α_m = f(t_n+α_f, y_n+α_f)`` with
``α_m = (3 - ρ)/(2(1 + ρ))``, ``α_f = 1/(1 + ρ)``, ``γ = 1/2 + α_m - α_f`` (hht: α_m = 1).

**Variable step** (``genalpha_var``): the local error of the positions is estimated by
the Milne device from the explicit Taylor predictor ``q_n + h v_n + h^2/2 q''_n``
(error constant 1/6) and the corrector's constant ``1/6 - β + (γ - 1/2)/2``
(first-order form: the predictor ``y_n + h f_n + h^2/2 ẏ'`` with ``ẏ'`` the
difference of the last two derivatives, constants ``1/6 + r/4`` and ``δ^2/2 - 1/12``,
δ = α_f - α_m); the step follows ``h (0.9 / err)^(1/3)``, the state ``(q, v, a, q'')``
is carried unchanged through a step change (Géradin & Cardona (2001), §7.5).  With
multipliers (the index-3 ``stiff`` formulation) the estimate and its norm take the
positions only: the multipliers are algebraic (index 3) and stay out of the norm
(Hairer & Wanner (1996), §VII.3), the velocities enter through q only, and the
estimate is projected onto the tangent space of the constraints along the reactions'
directions ``M_v^-1 Phi_q^T`` (:meth:`VariableGeneralizedAlpha._project`: the
index-3 transient of the accelerations after a change of h is removed); the iteration
matrix and its constraint rows' scaling ``1/(β' h^2)`` follow every change of h (the
matrix is factored again), the fixed step's Jacobian call-back and ``jacobian_update``
hook unchanged.

**Compiled loops** (the dynamic analysis with ``di``/``cs``: the second-order form with
unit mass and no multipliers; all three also with ``stiff``: multipliers, the
mass ``M_v`` and the analysis' DAE Jacobian as a call-back, evaluated once per
Jacobian): ``genalpha``/``hht`` run in ``mbcore._ext._steploop.run_genalpha``,
``genalpha_var`` in ``run_genalpha_var`` (ext/_step_genalpha.pxi), both the formulas
of this module step for step (:meth:`GeneralizedAlpha.compiled_loop_kind`,
``loop_start``, ``restore_loop_history``; docs/integrators.md).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from mbcore.integrate.base import (ADAPTIVE_OPTIONS, CALIBRATION_OPTIONS, EPS,
                                   FIXED_STEP_OPTIONS, NEWTON_OPTIONS, calibrated_tolerances,
                                   Integrator, NewtonFailure, Option, fraction,
                                   int_range)
from mbcore.integrate.common import (HermiteDenseOutput, difference_floor, rms_norm,
                                    select_initial_step)
from mbcore.integrate.errors import IntegratorOptionError

from .bdf import mass_vector as _mass

__all__ = ["GeneralizedAlpha", "HHT", "VariableGeneralizedAlpha", "alpha_parameters"]


#: a Newton residual that stalls within this factor of its tolerance is accepted
NEWTON_STALL_ACCEPT = 100.0


def _rho(value: Any, n: int = 0) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number in [0, 1], got {value!r}") from None
    if not 0.0 <= v <= 1.0:
        raise ValueError(f"expected a number in [0, 1], got {v:g}")
    return v


def _count_or_none(value: Any, n: int = 0) -> int | None:
    if value is None:
        return None
    return int_range(0, 10 ** 9)(value, n)


def _callable_or_none(value: Any):
    if value is not None and not callable(value):
        raise ValueError(f"expected a callable (t, y, J) or None, got {value!r}")
    return value


def alpha_parameters(rho: float, kind: str = "genalpha", order: int = 2
                     ) -> tuple[float, float, float, float]:
    """(α_m, α_f, γ, β) of the generalized-α family for the spectral radius at
    infinity ``rho``: ``order`` 2 the second-order form (Chung & Hulbert (1993),
    Eqs. 25-27; ``kind`` 'hht': α_m = 0, Hilber, Hughes & Taylor (1977)), 1 the
    first-order form (Jansen, Whiting & Hulbert (2000), Eqs. 25-26; β unused, 0)."""
    if order == 1:
        a_f = 1.0 / (1.0 + rho)
        a_m = 1.0 if kind == "hht" else 0.5 * (3.0 - rho) / (1.0 + rho)
        return a_m, a_f, 0.5 + a_m - a_f, 0.0
    if kind == "hht":
        a_m, a_f = 0.0, (1.0 - rho) / (1.0 + rho)
    else:
        a_m, a_f = (2.0 * rho - 1.0) / (rho + 1.0), rho / (rho + 1.0)
    g = 0.5 + a_f - a_m
    return a_m, a_f, g, 0.25 * (g + 0.5) ** 2


#: Newton tolerances of the fixed-step methods (the second-order form stops on the
#: residuals: :meth:`GeneralizedAlpha._solve_second`)
NEWTON = {"newton_rtol": Option(None, "Newton stops when the residual of the equations "
                                "of motion is below this fraction of |M_v q''| + |f_v| "
                                "(second-order form; default 1e-8, with multipliers "
                                "1e-10; first-order form: the relative tolerance of the "
                                "corrections, default 1e-10)",
                                lambda v, n=0: None if v is None
                                else NEWTON_OPTIONS["newton_rtol"].check(v, n)),
          "newton_atol": Option(1e-13, "... and |Phi| below this times max(1, |q|) "
                                "(first-order form: the absolute tolerance of the "
                                "corrections)", NEWTON_OPTIONS["newton_atol"].check),
          "newton_maxiter": NEWTON_OPTIONS["newton_maxiter"]}

_COMMON = {
    "rho_inf": Option(0.8, "spectral radius at infinity ρ ∈ [0, 1] (1: no numerical "
                      "damping, the trapezoidal rule; 0: the highest frequencies "
                      "annihilated in one step)", _rho),
    "positions": Option(None, "p: y = [q (p); v (p); lam (multipliers); rest] with "
                        "q' = v: the second-order form (Arnold & Brüls (2007)); "
                        "default: the first-order form for any y' = f(t, y)",
                        _count_or_none),
    "multipliers": Option(0, "k: the Lagrange multipliers after q and v (index-3 "
                          "constraint rows of f, zero mass)", _count_or_none),
    "mass": Option(None, "diagonal of the mass matrix of mass·y' = f (second-order "
                   "form: 1 on q, M_v on v, 0 on lam, 1 on the rest)", _mass),
    "jac_max_age": Option(None, "steps a Jacobian is kept (modified Newton); default: "
                          "until the Newton iteration fails or needs more than 4 "
                          "iterations; 1: a fresh Jacobian every step",
                          lambda v, n=0: None if v is None else int_range(1, 10 ** 9)(v, n)),
    "jacobian_update": Option(None, "second-order form: a callable (t, y, J) that "
                              "refreshes in place, at the predictor of every step that "
                              "keeps an older Jacobian J, the blocks of J that change "
                              "fastest (the stiff formulation passes its velocity block, "
                              "constraint rows and reaction columns); the iteration "
                              "matrix is then factored again",
                              lambda v, n=0: _callable_or_none(v)),
}


class GeneralizedAlpha(Integrator):
    """Generalized-α, fixed step (module docstring)."""

    name = "genalpha"
    description = ("generalized-α (Chung & Hulbert (1993); index-3 constraints as in "
                   "Arnold & Brüls (2007)), order 2, fixed step, numerical damping "
                   "set by rho_inf")
    order = 2
    implicit = True
    KIND = "genalpha"
    #: the DAE formulations whose state has the layout of the second-order form
    DAE_FORMULATIONS = ("stiff",)
    #: the iteration matrix reads the rows of the equations of motion and of the
    #: constraints only; the trailing components (the work integral W) are
    #: quadratures, so the dynamic analysis does not compute their Jacobian row
    DAE_JACOBIAN_WORK_ROW = False
    options = {**FIXED_STEP_OPTIONS, **NEWTON, **_COMMON}
    #: the method's state between steps (exact resume, Integrator rule 11)
    state_fields = ("_h", "_t_start", "_i", "_acc", "_a", "_f", "_fprev", "_hprev",
                    "_J", "_lu", "_c_lu", "_jac_age", "_jac_current")

    @classmethod
    def compiled_loop_kind(cls):
        """'genalpha': :mod:`mbcore.integrate.multistep_loop` runs the second-order
        form with unit mass and no multipliers (the dynamic analysis' di and cs) in
        compiled code (``mbcore._ext._steploop.run_genalpha``: the same predictor,
        Newton iteration, Jacobian policy and quadratures) unless a subclass changes
        the step."""
        same = all(getattr(cls, m) is getattr(GeneralizedAlpha, m) for m in (
            "_step_impl", "_restart_impl", "_attempt", "_solve", "_solve_second",
            "_predict", "_finish", "_matrix", "jac", "lu_factor", "lu_solve",
            "_dense_output_impl"))
        return "genalpha" if same else None

    def loop_start(self) -> dict:
        """Where ``run_genalpha`` starts: the layout (``positions``, ``multipliers``,
        the velocity rows' ``mass``), the accelerations ``acc`` (true) and ``a``
        (algorithmic), ``f`` at the last iterate, the grid, the parameters and Newton's
        residual tolerances; ``compiled`` False when the compiled loop does not apply
        (the first-order form)."""
        second = self._second
        return {"compiled": bool(second), "positions": self._p if second else 0,
                "multipliers": self._k if second else 0,
                "mass": self._mv if second else None,
                "acc": self._acc, "a": self._a, "f": self._f, "t_start": float(self._t_start),
                "i": int(self._i), "h": float(self._h), "params": self._params,
                "jac_age": int(self._jac_age), "newton_rtol": self._newton_rtol(),
                "newton_atol": float(self.opts["newton_atol"])}

    def restore_loop_history(self, h) -> dict:
        """``run_genalpha``'s checkpoint history (``acc``, ``a``, ``f``, ``t_start``,
        ``i``, ``h``; the loop's Jacobian ``J``, ``c_lu`` and ``jac_age`` returned as
        ``J0``, ``c_lu0``, ``jac_age0``)."""
        self._acc = np.array(h["acc"], dtype=float)
        self._a = np.array(h["a"], dtype=float)
        self._f = np.array(h["f"], dtype=float)
        self._t_start = float(h["t_start"])
        self._i = int(h["i"])
        self._h = float(h["h"])
        return self._restore_loop_jacobian(h)

    def _restore_loop_jacobian(self, h) -> dict:
        """The Newton Jacobian's part of a checkpoint history: ``jac_age`` restored,
        the loop's ``J0``, ``c_lu0``, ``jac_age0`` returned."""
        self._jac_age = int(h.get("jac_age", 0))
        if h.get("J") is None:
            return {"jac_age0": 0}
        return {"J0": np.ascontiguousarray(h["J"], dtype=float).ravel(),
                "c_lu0": float(h["c_lu"]), "jac_age0": int(h.get("jac_age", 0))}

    # -- set-up -----------------------------------------------------------------------
    def _restart_impl(self) -> None:
        o = self.opts
        p = o["positions"]
        self._second = p is not None
        k = o["multipliers"] or 0
        if not self._second and k:
            raise IntegratorOptionError(self._label, "multipliers",
                                        "multipliers need the second-order form: give "
                                        "'positions'")
        if self._second and (p < 1 or 2 * p + k > self.n):
            raise IntegratorOptionError(self._label, "positions", f"y = [q (p); v (p); "
                                        f"lam ({k}); ...] needs 1 <= p and 2p + {k} <= "
                                        f"n = {self.n}, got p = {p}")
        mass = o["mass"]
        if mass is not None and mass.size != self.n:
            raise IntegratorOptionError(self._label, "mass", f"expected {self.n} values, "
                                        f"got {mass.size}")
        if not self._second and mass is not None and np.any(mass != 1.0):
            raise IntegratorOptionError(self._label, "mass", "a mass matrix needs the "
                                        "second-order form: give 'positions'")
        if self._second:
            self._p, self._k = p, k
            mv = np.ones(p) if mass is None else mass[p:2 * p]
            if np.any(mv <= 0):
                bad = int(np.flatnonzero(mv <= 0)[0])
                raise IntegratorOptionError(self._label, "mass", f"velocity row {bad} has "
                                            f"mass {mv[bad]:g}: the second-order form "
                                            f"needs M_v > 0")
            if mass is not None and (np.any(mass[:p] != 1.0) or np.any(mass[2 * p:2 * p + k])
                                     or np.any(mass[2 * p + k:] != 1.0)):
                raise IntegratorOptionError(self._label, "mass", "expected 1 on q, 0 on the "
                                            "multipliers and 1 on the trailing components")
            self._mv = mv
        self._params = alpha_parameters(o["rho_inf"], self.KIND, 2 if self._second else 1)
        if self.KIND == "hht" and o["rho_inf"] < 0.5:
            raise IntegratorOptionError(self._label, "rho_inf", f"HHT needs rho_inf in "
                                        f"[0.5, 1], got {o['rho_inf']:g}; use genalpha for "
                                        f"stronger damping")
        self._start_grid()
        self._J = None
        self._lu = None
        self._c_lu = None
        self._jac_age = 0
        self._jac_current = False
        self._fprev = None
        self._hprev = None
        self._y_old = self._d_old = None
        if self.status != "running":
            self._f = self._acc = self._a = None
            return
        f = self.fun(self.t, self.y).copy()
        self._f = f
        if self._second:
            p = self._p
            self._acc = f[p:2 * p] / self._mv        # the true accelerations q''
            self._check_kinematic_rows(f)
        else:
            self._acc = f.copy()                     # the first-order form: ẏ
        self._a = self._acc.copy()                   # algorithmic = true at a start

    def _start_grid(self) -> None:
        self._h = self.opts["step"]
        self._t_start = self.t
        self._i = 0

    def _check_kinematic_rows(self, f) -> None:
        """The second-order form needs f's q rows equal to v (``np.allclose``'s test,
        written out: it runs at every restart, e.g. an input changed at every step of
        a simulation)."""
        p = self._p
        v = self.y[p:2 * p]
        av = np.abs(v)
        atol = 1e-12 * max(1.0, float(av.max())) if p else 0.0
        if not bool(np.all(np.abs(f[:p] - v) <= atol + 1e-10 * av)):
            bad = int(np.argmax(np.abs(f[:p] - v)))
            raise IntegratorOptionError(
                self._label, "fun", f"the second-order form needs q' = v (positions = "
                f"{p}), but f[{bad}] = {f[bad]:.6g} differs from y[{p + bad}] = "
                f"{v[bad]:.6g}")

    def _next_step(self) -> tuple[float, float]:
        """(t_new, h) of the next step on the fixed grid."""
        self._i += 1
        t_new = self._t_start + self._i * self.direction * self._h
        if self.direction * (t_new - self.t_bound) > -1e-9 * self._h:
            t_new = self.t_bound
        h = t_new - self.t
        if abs(h) < self._min_step(self.t):
            self._step_too_small(h, "remaining interval")
        return t_new, h

    # -- Newton -----------------------------------------------------------------------
    def _newton_scale(self, y):
        return self.opts["newton_atol"] + self._newton_rtol() * np.abs(y)

    def _matrix(self, J, h):
        """The (scaled) iteration matrix of the unknowns (q'', lam) or ẏ."""
        a_m, a_f, g, b = self._params
        if not self._second:
            S = (-(a_f * g * h)) * J
            S[np.diag_indices_from(S)] += a_m
            return S
        p, k = self._p, self._k
        r = (1.0 - a_f) / (1.0 - a_m)
        bb, gg = b * r * h * h, g * r * h
        S = np.zeros((p + k, p + k))
        S[:p, :p] = -(bb * J[p:2 * p, :p] + gg * J[p:2 * p, p:2 * p])
        S[np.arange(p), np.arange(p)] += self._mv
        if k:
            S[:p, p:] = -J[p:2 * p, 2 * p:2 * p + k]
            S[p:, :p] = J[2 * p:2 * p + k, :p]
        return S

    def _solve(self, t, h, y_pred, scale):
        """Newton iterations from the predictor; returns (ok, y, acc, f, iters): acc the
        true accelerations q''_n+1 (first-order form: the algorithmic ẏ_n+1), f the
        right-hand side at the returned iterate; the trailing components of y are not
        yet advanced."""
        if self._second:
            return self._solve_second(t, h, y_pred)
        a_m, a_f, g, b = self._params
        y = y_pred.copy()
        z = self._acc.copy()                        # predictor: ẏ_n+1 = ẏ_n
        yn = self.y
        norm_old = None
        for it in range(1, self.opts["newton_maxiter"] + 1):
            ya = yn + a_f * (y - yn)
            f = self.fun(t - (1.0 - a_f) * h, ya)
            res = f - ((1.0 - a_m) * self._acc + a_m * z)
            dz = self.lu_solve(self._lu, res)
            z += dz
            y += (g * h) * dz
            norm = rms_norm((g * h) * dz / scale)
            if not norm < math.inf:
                return False, y, None, None, it
            rate = None if norm_old is None or norm_old == 0.0 else norm / norm_old
            if rate is not None and rate >= 1.0:
                return False, y, None, None, it
            if norm <= 1.0 or (rate is not None and rate / (1.0 - rate) * norm <= 1.0):
                return True, y, z, f.copy(), it
            norm_old = norm
        return False, y, None, None, self.opts["newton_maxiter"]

    def _residual_tolerances(self) -> tuple[float, float]:
        """(relative residual of the equations of motion, Phi tolerance relative to
        max(1, |q|)) at which Newton stops."""
        o = self.opts
        return self._newton_rtol(), o["newton_atol"]

    def _newton_rtol(self) -> float:
        """``newton_rtol`` or its default: 1e-8 (the round-off of stiff forces reaches
        1e-9 of the accelerations: the stiff chain), 1e-10 with multipliers (their
        error follows the residual; the slider-crank's keeps order 2 to h = 2.5e-4)."""
        r = self.opts["newton_rtol"]
        if r is not None:
            return r
        return 1e-10 if (not self._second or self._k) else 1e-8

    def _solve_second(self, t, h, y_pred):
        """Newton on (q''_n+1, lam_n+1), stopped on the residuals, not on the
        corrections: the equations of motion to ``newton_rtol`` relative to
        ``|M_v q''| + |f_v|`` and the constraints to ``newton_atol max(1, |q|)``.
        A residual that stops decreasing (after the third iteration) within
        :data:`NEWTON_STALL_ACCEPT` times these tolerances has reached the round-off
        of f (stiff forces cancelling in f: the governor of IFToMM A05 stalls at 1e-11
        to 2e-10 of the accelerations) and is accepted.  (A
        test on the position corrections, ``β' h^2`` times those of q'', weakens like
        h^2 and lets an error of q'' pass into v and lam; the velocities' corrections
        carry the round-off of Phi divided by β' h.)"""
        a_m, a_f, g, b = self._params
        p, k = self._p, self._k
        r = (1.0 - a_f) / (1.0 - a_m)
        bb, gg = b * r * h * h, g * r * h
        y = y_pred.copy()
        acc = self._acc.copy()                      # predictor: q''_n+1 = q''_n
        x = np.empty(p + k)
        mv = self._mv
        rtol, phitol = self._residual_tolerances()
        phitol *= max(1.0, float(np.abs(y[:p]).max()))
        worst_old = None
        for it in range(self.opts["newton_maxiter"] + 1):
            f = self.fun(t, y)
            fv = f[p:2 * p]
            np.subtract(fv, mv * acc, out=x[:p])
            rn = np.abs(x[:p]).max() / (np.abs(mv * acc).max() + np.abs(fv).max() + 1e-300)
            worst = rn / rtol
            if k:
                phi = f[2 * p:2 * p + k]
                worst = max(worst, np.abs(phi).max() / phitol)
            if not worst < math.inf:
                return False, y, None, None, it
            if worst <= 1.0:
                return True, y, acc, f.copy(), it
            stalled = worst_old is not None and it > 2 and worst >= worst_old
            if stalled and worst <= NEWTON_STALL_ACCEPT:
                return True, y, acc, f.copy(), it       # at the round-off of f: done
            if it == self.opts["newton_maxiter"] or stalled:
                return False, y, None, None, it
            worst_old = worst
            if k:
                np.multiply(phi, -1.0 / bb, out=x[p:])
            d = self.lu_solve(self._lu, x)
            dacc = d[:p]
            acc += dacc
            y[:p] += bb * dacc
            y[p:2 * p] += gg * dacc
            if k:
                y[2 * p:2 * p + k] += d[p:]
        return False, y, None, None, self.opts["newton_maxiter"]  # pragma: no cover

    def _predict(self, h):
        """The predictor of the step: positions and velocities with q''_n+1 = q''_n
        (second-order form) or ẏ_n+1 = ẏ_n."""
        a_m, a_f, g, b = self._params
        y = self.y.copy()
        if self._second:
            p = self._p
            a_new = ((1.0 - a_f) * self._acc + a_f * self._acc - a_m * self._a) / (1.0 - a_m)
            y[:p] += h * y[p:2 * p] + (h * h) * ((0.5 - b) * self._a + b * a_new)
            y[p:2 * p] += h * ((1.0 - g) * self._a + g * a_new)
        else:
            y += h * self._acc
        return y

    def _attempt(self, t_new, h):
        """One step of size h: (ok, y_new, acc_new, f); refreshes the iteration
        matrix when it is stale or fails."""
        y_pred = self._predict(h)
        scale = self._scale(y_pred)
        for attempt in (0, 1):
            max_age = self.opts["jac_max_age"]
            if self._J is None or (max_age is not None and self._jac_age >= max_age):
                self._J = self.jac(t_new, y_pred, None, self._difference_floor(y_pred))
                self._jac_current = True
                self._jac_age = 0
                self._lu = None
            elif (self.opts["jacobian_update"] is not None and self._second
                  and self._jac_constant is None):
                # the fast blocks at the predictor (module docstring), then a new LU
                self.opts["jacobian_update"](t_new, y_pred, self._J)
                self._lu = None
            # (a step within 1e-6 of the factored one keeps the LU, as the θ-methods:
            # the fixed grid's steps t_n+1 - t_n differ in their last bits where
            # t/h is large; the iteration matrix only steers Newton)
            if self._lu is None or abs(h - self._c_lu) > 1e-6 * abs(h):
                self._lu = self.lu_factor(self._matrix(self._J, h))
                self._c_lu = h
            ok, y, acc, f, iters = self._solve(t_new, h, y_pred, scale)
            self._newton_iterations(iters)
            self._J_step = self._J                  # the step's Jacobian (its error)
            if ok:
                self._jac_age += 1
                self._jac_current = False
                if iters > 4 and self._jac_age > 1 and self._jac_constant is None:
                    self._J = None                  # slow with an old Jacobian: refresh
                return True, y, acc, f
            if self._jac_current or self._jac_constant is not None:
                return False, y, None, None
            self._reject_newton()
            self._J = None                          # stale: re-evaluate and retry once
        return False, y, None, None  # pragma: no cover - the loop returns

    def _scale(self, y):
        return self._newton_scale(y)

    def _difference_floor(self, y):
        """Floors of the Jacobian's differences by block: positions, velocities, the
        rest (second-order form), else all of y (:func:`difference_floor`)."""
        n, p = y.size, self._p if self._second else 0
        blocks = ((0, p), (p, 2 * p), (2 * p, n)) if self._second else ((0, n),)
        return difference_floor(y, blocks)

    def _finish(self, t_new, h, y, acc, f) -> None:
        """Accept the step: algorithmic accelerations, quadratures (trapezoidal rule
        with the rates of the last Newton iterate), dense output data."""
        a_m, a_f, g, b = self._params
        y_old = self.y
        if self._second:
            p, k = self._p, self._k
            e0 = 2 * p + k
            if e0 < self.n:
                y[e0:] = y_old[e0:] + (0.5 * h) * (self._f[e0:] + f[e0:])
            d_old = np.empty(self.n)
            d_new = np.empty(self.n)
            d_old[:p], d_new[:p] = y_old[p:2 * p], y[p:2 * p]
            d_old[p:2 * p], d_new[p:2 * p] = self._acc, acc
            if k:
                d_old[2 * p:e0] = d_new[2 * p:e0] = (y[2 * p:e0] - y_old[2 * p:e0]) / h
            d_old[e0:], d_new[e0:] = self._f[e0:], f[e0:]
            self._y_old, self._d_old, self._d_new = y_old, d_old, d_new
            self._a = ((1.0 - a_f) * acc + a_f * self._acc - a_m * self._a) / (1.0 - a_m)
            self._acc = acc
        else:
            f = self.fun(t_new, y).copy()           # the true ẏ_n+1 (dense output, error)
            self._y_old, self._d_old, self._d_new = y_old, self._f, f
            self._acc = self._a = acc               # the algorithmic ẏ_n+1
        self._fprev, self._hprev = self._f, h
        self._f = f
        self.t, self.y = t_new, y

    # -- step ---------------------------------------------------------------------------
    def _step_impl(self):
        t_new, h = self._next_step()
        ok, y, acc, f = self._attempt(t_new, h)
        if not ok:
            raise NewtonFailure(
                f"{self.name}: the Newton iteration did not converge in "
                f"{self.opts['newton_maxiter']} iterations with step {abs(h):.3e} (fresh "
                f"Jacobian); reduce 'step' or loosen 'newton_rtol'", t_new)
        self._finish(t_new, h, y, acc, f)
        return True, None

    def _dense_output_impl(self):
        return HermiteDenseOutput(self.t_old, self.t, self._y_old, self._d_old,
                                  self.y, self._d_new)


class HHT(GeneralizedAlpha):
    """HHT-α, fixed step: generalized-α with α_m = 0 (module docstring)."""

    name = "hht"
    description = ("HHT-α (Hilber, Hughes & Taylor (1977)) in the generalized-α form of "
                   "Arnold & Brüls (2007), order 2, fixed step, rho_inf in [0.5, 1]")
    KIND = "hht"


class VariableGeneralizedAlpha(GeneralizedAlpha):
    """Generalized-α with a variable step (module docstring): ``rtol``/``atol``
    control the local error of the positions (second-order form, also with the
    index-3 multipliers of the ``stiff`` formulation, which stay out of the norm) or
    of y."""

    name = "genalpha_var"
    description = ("generalized-α (Chung & Hulbert (1993); Arnold & Brüls (2007)), "
                   "order 2, variable step by the Milne device on the positions")
    adaptive = True
    #: the index-3 ``stiff`` layout [q, s, lam] as the fixed step (positions-only error)
    DAE_FORMULATIONS = ("stiff",)
    options = {**ADAPTIVE_OPTIONS, **CALIBRATION_OPTIONS,
               "newton_maxiter": NEWTON_OPTIONS["newton_maxiter"],
               "newton_fraction": Option(0.01, "Newton stops when the correction is "
                                         "below this fraction of the error tolerance",
                                         fraction),
               **_COMMON}
    state_fields = ("_h_abs", "_acc", "_a", "_f", "_fprev", "_hprev", "_J", "_lu",
                    "_c_lu", "_jac_age", "_jac_current")

    @classmethod
    def compiled_loop_kind(cls):
        """'genalpha' (the loop family of :class:`GeneralizedAlpha`; ``loop_start``
        says ``variable``): :mod:`mbcore.integrate.multistep_loop` runs the
        second-order form with unit mass (the dynamic analysis' di and cs) in compiled
        code (``mbcore._ext._steploop.run_genalpha_var``: the same trial steps,
        rescaling, Newton iteration, Jacobian policy, error estimate and controller)
        unless a subclass changes the step; also with multipliers, the velocity
        rows' mass and the Jacobian call-back (the ``stiff`` formulation) when the
        build has them (``GENALPHA_VAR_DAE``)."""
        same = all(getattr(cls, m) is getattr(VariableGeneralizedAlpha, m) for m in (
            "_step_impl", "_restart_impl", "_start_grid", "_attempt", "_solve",
            "_solve_second", "_predict", "_finish", "_matrix", "_error", "_tol",
            "_rescale", "_project", "_residual_tolerances", "jac", "lu_factor",
            "lu_solve", "_dense_output_impl", "_trial_end", "_min_step"))
        return "genalpha" if same else None

    def loop_start(self) -> dict:
        """Where ``run_genalpha_var`` starts: the layout (``positions``,
        ``multipliers``, the velocity rows' ``mass``), the accelerations ``acc``
        and ``a``, ``f``, the next step ``h_abs``, the last accepted step ``hprev``
        (None after a start), the calibrated ``rtol``/``atol``, Newton's residual
        tolerances and ``max_step``; ``compiled`` False when the compiled loop does not
        apply (the first-order form)."""
        second = self._second
        return {"compiled": bool(second), "variable": True,
                "positions": self._p if second else 0,
                "multipliers": self._k if second else 0,
                "mass": self._mv if second else None,
                "newton_atol": self._residual_tolerances()[1],
                "acc": self._acc, "a": self._a,
                "f": self._f, "h_abs": float(self._h_abs),
                "hprev": None if self._hprev is None else float(self._hprev),
                "params": self._params, "jac_age": int(self._jac_age),
                "newton_rtol": self._residual_tolerances()[0], "rtol": self._rtol,
                "atol": self._atol, "max_step": float(self.opts["max_step"])}

    def restore_loop_history(self, h) -> dict:
        """``run_genalpha_var``'s checkpoint history (``acc``, ``a``, ``f``,
        ``h_abs``, ``hprev``; the Jacobian as :meth:`GeneralizedAlpha.restore_loop_history`)."""
        self._acc = np.array(h["acc"], dtype=float)
        self._a = np.array(h["a"], dtype=float)
        self._f = np.array(h["f"], dtype=float)
        self._h_abs = float(h["h_abs"])
        self._hprev = None if h.get("hprev") is None else float(h["hprev"])
        return self._restore_loop_jacobian(h)

    #: calibration (docs/integrators.md, "Tolerance calibration"): with the local
    #: error per step controlled, the global error of an order-2 method grows like
    #: 5 tol^(2/3) (measured on the oscillator and the pendulum, tol = 1e-3 to 1e-9);
    #: the controller works with (tol/5)^(3/2), which keeps it near tol
    CALIBRATION = (5.0 ** -1.5, 1.5)

    def _start_grid(self) -> None:
        o = self.opts
        self._rtol, self._atol = calibrated_tolerances(o["rtol"], o["atol"],
                                                       *self.CALIBRATION, o["calibrate"])
        if self.status != "running":
            self._h_abs = 0.0
            return
        if o["first_step"] is not None:
            self._h_abs = o["first_step"]
        else:
            f0 = self.fun(self.t, self.y).copy()
            self._h_abs = select_initial_step(self.fun, self.t, self.y, f0, self.direction,
                                              2, self._rtol, self._atol, self.t_bound,
                                              o["max_step"])

    def _residual_tolerances(self) -> tuple[float, float]:
        r = float(np.max(self._rtol)) * self.opts["newton_fraction"]
        return max(r, 1e-12), 1e-13

    def _tol(self, y_a, y_b):
        return self._atol + self._rtol * np.maximum(np.abs(y_a), np.abs(y_b))

    def _scale(self, y):
        # a fraction of the error tolerance, not below round-off
        ay = np.abs(y)
        return np.maximum((self._atol + self._rtol * ay) * self.opts["newton_fraction"],
                          100.0 * EPS * ay + 1e-300)

    def _error(self, h, y_new, acc):
        """The local error estimate, scaled (Milne device, module docstring)."""
        a_m, a_f, g, b = self._params
        y = self.y
        if self._second:
            p = self._p
            qp = y[:p] + h * y[p:2 * p] + (0.5 * h * h) * self._acc
            cc = 1.0 / 6.0 - b + 0.5 * (g - 0.5)
            # the positions only: with multipliers (the index-3 form) their rows are
            # algebraic and stay out of the norm (Hairer & Wanner (1996), §VII.3)
            est = (cc / (1.0 / 6.0 - cc)) * (y_new[:p] - qp)
            if self._k:
                est = self._project(est)
            tol = self._tol(y[:p], y_new[:p])
            tol = tol if np.ndim(tol) == 0 else tol[:p]
            return rms_norm(est / tol)
        if self._fprev is None:              # the first step: ẏ' by a difference
            eps = 1e-7 * max(1.0, abs(self.t))
            f1 = self.fun(self.t + eps * self.direction,
                          y + (eps * self.direction) * self._f)
            ddy = (f1 - self._f) / (eps * self.direction)
            ratio = 0.0
        else:
            ddy = (self._f - self._fprev) / self._hprev
            ratio = abs(self._hprev / h)
        yp = y + h * self._f + (0.5 * h * h) * ddy
        delta = a_f - a_m
        cp = 1.0 / 6.0 + ratio / 4.0
        cc = 0.5 * delta * delta - 1.0 / 12.0
        est = (cc / (cp - cc)) * (y_new - yp)
        return rms_norm(est / self._tol(y, y_new))

    def _project(self, est):
        """The positions' error estimate with multipliers (the index-3 form) projected
        onto the tangent space of the constraints along the reactions' directions:
        the first p components of the solution of ::

            [ M_v       -∂f_v/∂lam ] [x ]   [M_v est]
            [ ∂Phi/∂q    0         ] [mu] = [0      ]

        i.e. ``x = est - M_v^-1 G^T mu`` with ``G x = 0`` (G = ∂Phi/∂q from the
        step's Jacobian; the matrix LU-factored by dgetrf, counted as the Newton
        matrix' LU and solve).  Both q_n+1 and the exact solution satisfy Phi = 0, so
        the local error of q lies in the tangent space to leading order (derived
        here, mbcore's choice).  A change of h perturbs the accelerations of the
        index-3 form by a transient of the multipliers (second order for all
        components needs consistent starting values, Arnold & Brüls (2007)), i.e. by
        the reactions ``M_v^-1 G^T dlam``: it enters the Taylor predictor's
        ``h^2/2 q''_n`` along ``M_v^-1 G^T`` only and is removed, as is the
        predictor's normal curvature term; tangent vectors are unchanged.  Without
        it the estimate swung on alternate steps after each change of h and 10-16 %
        of the steps were rejected on the slider-crank (docs/integrators.md).  A
        projection that is not finite (a singular matrix) leaves ``est`` unchanged."""
        p, k = self._p, self._k
        J = self._J_step
        A = np.zeros((p + k, p + k))
        A[np.arange(p), np.arange(p)] = self._mv
        A[:p, p:] = -J[p:2 * p, 2 * p:2 * p + k]
        A[p:, :p] = J[2 * p:2 * p + k, :p]
        rhs = np.zeros(p + k)
        rhs[:p] = self._mv * est
        x = self.lu_solve(self.lu_factor(A), rhs)[:p]
        return x if np.all(np.isfinite(x)) else est

    def _rescale(self, a0, h) -> None:
        """The algorithmic accelerations for a step of size h after one of size
        ``_hprev``: ``a_n - q''_n`` is proportional to the step ((α_m - α_f) h times
        the third derivative), so it is scaled by the ratio of the steps (without it
        the estimate and the solution carry an O(h Δh) term at every change of step
        and the controller alternates between rejected and accepted steps)."""
        r = 1.0 if self._hprev is None else abs(h / self._hprev)
        if self._second:
            self._a = self._acc + r * (a0 - self._acc)
        else:
            self._a = self._acc = self._f + r * (a0 - self._f)

    def _step_impl(self):
        o = self.opts
        t = self.t
        h_abs = min(self._h_abs, o["max_step"])
        rejected = False
        a0 = self._a
        while True:
            t_new, _ = self._trial_end(t, h_abs, self._min_step(t))
            h = t_new - t
            self._rescale(a0, h)
            ok, y, acc, f = self._attempt(t_new, h)
            if not ok:
                self._reject_newton()
                h_abs *= 0.25
                rejected = True
                self._J = None
                continue
            err = self._error(h, y, acc)
            if err <= 1.0:
                break
            self._reject_error_test()
            h_abs = abs(h) * max(0.2, 0.9 * err ** (-1.0 / 3.0))
            rejected = True
        factor = 5.0 if err == 0.0 else min(5.0, max(0.2, 0.9 * err ** (-1.0 / 3.0)))
        if rejected:
            factor = min(1.0, factor)
        self._finish(t_new, h, y, acc, f)
        self._h_abs = abs(h) * factor
        return True, None
