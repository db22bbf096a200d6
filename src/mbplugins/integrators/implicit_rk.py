"""What the implicit Runge–Kutta methods ``radau`` and ``sdirk`` share: the
tolerances, RADAU5's Newton tolerance, a constant diagonal mass matrix for
``M y' = f`` (zeros mark the algebraic equations of a DAE) and the first step.

The Newton tolerance ``max(10 eps/rtol, min(0.03, sqrt(rtol)))`` and the handling of
``M`` follow Hairer & Wanner (1996), §IV.8 (the code RADAU5).
"""
from __future__ import annotations

import numpy as np

from mbcore.integrate.base import ADAPTIVE_OPTIONS, EPS, Integrator, Option, int_range
from mbcore.integrate.common import select_initial_step

from .bdf import mass_vector

__all__ = ["ImplicitRK", "IMPLICIT_RK_OPTIONS"]

#: the options both methods have
IMPLICIT_RK_OPTIONS = {
    **ADAPTIVE_OPTIONS,
    "newton_maxiter": Option(7, "simplified Newton iterations per attempt",
                             int_range(2, 50)),
    "mass": Option(None, "diagonal of a constant mass matrix for M y' = f(t, y) "
                   "(semi-explicit DAE: zeros mark algebraic equations, which are "
                   "excluded from the error test and the Newton norm)", mass_vector),
}


class ImplicitRK(Integrator):
    """Base of the variable-step implicit Runge–Kutta methods (not a method itself)."""

    adaptive = True
    implicit = True
    variable_order = False

    def _setup_implicit_rk(self) -> None:
        """Tolerances, Newton settings and the mass vector from the options."""
        o = self.opts
        self._rtol, self._atol = o["rtol"], o["atol"]
        self._max_step = o["max_step"]
        self._maxiter = o["newton_maxiter"]
        rtol_min = float(np.min(self._rtol))
        self._newton_tol = max(10 * EPS / rtol_min, min(0.03, rtol_min ** 0.5))
        mass = o.get("mass")
        self._unit_mass = mass is None
        self._m = np.ones(self.n) if mass is None else np.asarray(mass, dtype=float)
        self._diff = self._m != 0
        #: M⁻¹ on the differential components, 0 on the algebraic ones
        self._minv = np.where(self._diff, 1.0 / np.where(self._diff, self._m, 1.0), 0.0)

    def _first_step(self, f0: np.ndarray, order: int = 3) -> float:
        """The option ``first_step``, else the step chosen for ``y' = M⁻¹ f`` (algebraic
        components held) from ``f0 = f(t, y)``."""
        o = self.opts
        if o["first_step"] is not None:
            return o["first_step"]
        fun = self.fun
        if not self._unit_mass:
            minv = self._minv

            def fun(t, y):
                return self.fun(t, y) * minv
        return select_initial_step(fun, self.t, self.y, f0 * self._minv, self.direction,
                                   order, self._rtol, self._atol, self.t_bound,
                                   self._max_step)
