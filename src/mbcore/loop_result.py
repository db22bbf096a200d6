"""What a compiled integration loop hands back (:mod:`mbcore.fastloop`,
:mod:`mbcore.multistep_loop`, :mod:`mbcore.simulation_loop`): its result, the error
of an exhausted step budget, and the signal that hands a run over to the Python
driver."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .integrate.base import Statistics
from .integrate.errors import StepBudgetError, step_budget_error

__all__ = ["LoopResult", "LoopFallback", "budget_error"]


@dataclass
class LoopResult:
    """The part of :class:`mbcore.integrate.driver.IntegrationResult` the dynamic
    analysis reads."""

    status: int
    stats: Statistics
    t_final: float
    y_final: np.ndarray
    events: list = field(default_factory=list)


def budget_error(max_steps: int, t: float, t0: float, t_out: np.ndarray, i_out: int,
                 h: float) -> StepBudgetError:
    """The StepBudgetError of a compiled loop's code 5 at (t, i_out), started at t0."""
    t_prev = max(float(t_out[i_out - 1]), t0) if i_out > 0 else t0
    t_next = float(t_out[i_out]) if i_out < t_out.size else None
    return step_budget_error(int(max_steps), t, t_prev, t_next, h)


class LoopFallback(Exception):
    """A compiled loop cannot go on at time ``t`` (e.g. an evaluation failed): the
    Python driver takes over from there and names the error if there is one."""

    def __init__(self, t: float):
        super().__init__(t)
        self.t = t
