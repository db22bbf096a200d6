"""Fixed-step explicit Runge–Kutta methods: Euler, Heun, explicit midpoint, RK4.

Each is a tableau on the core's :class:`mbcore.integrate.rk.FixedStepRK` (re-exported
here), which steps it in Python and declares its compiled twin.

References: Nikravesh (1988), §12.2–12.2.2 (Eqs. 12.10, 12.15–12.17, subroutine RUNGK4),
TAM 674 (2003), lectures of 3 March and 10 March;  (stability), §2.13 (choose
``step`` ≈ T_min/20, :func:`mbcore.integrate.step_from_frequency`).

RUNGK4 semantics kept here: the time of step ``i`` is recomputed as
``t0 + i·h`` (no accumulated round-off); the last step is shortened to end on
``t_bound``.  The derivative at the end of a step is the first stage of the next
one (the same value RUNGK4 computes), so a run of N steps costs ``s·N + 1``
evaluations and the dense output (cubic Hermite, O(h⁴)) costs nothing extra.
"""
from __future__ import annotations

import numpy as np

from mbcore.integrate.rk import FixedStepRK

__all__ = ["FixedStepRK", "Euler", "Heun", "Midpoint", "RK4"]


class Euler(FixedStepRK):
    name = "euler"
    description = ("forward Euler, order 1, fixed step (Nikravesh (1988), Eq. 12.10); "
                   "for teaching comparisons")
    order = 1
    A = np.array([[0.0]])
    B = np.array([1.0])
    C = np.array([0.0])


class Heun(FixedStepRK):
    name = "heun"
    description = ("Heun / modified trapezoidal RK2, order 2, fixed step "
                   "(Nikravesh (1988), Eq. 12.15)")
    order = 2
    A = np.array([[0.0, 0.0], [1.0, 0.0]])
    B = np.array([0.5, 0.5])
    C = np.array([0.0, 1.0])


class Midpoint(FixedStepRK):
    name = "midpoint"
    description = ("explicit midpoint / modified Euler–Cauchy RK2, order 2, fixed step "
                   "(Nikravesh (1988), Eq. 12.16)")
    order = 2
    A = np.array([[0.0, 0.0], [0.5, 0.0]])
    B = np.array([0.0, 1.0])
    C = np.array([0.0, 0.5])


class RK4(FixedStepRK):
    name = "rk4"
    description = ("classical Runge–Kutta, order 4, fixed step: the book's RUNGK4 "
                   "(Nikravesh (1988), Eq. 12.17, §12.2.2)")
    order = 4
    A = np.array([[0.0, 0.0, 0.0, 0.0],
                  [0.5, 0.0, 0.0, 0.0],
                  [0.0, 0.5, 0.0, 0.0],
                  [0.0, 0.0, 1.0, 0.0]])
    B = np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6])
    C = np.array([0.0, 0.5, 0.5, 1.0])
