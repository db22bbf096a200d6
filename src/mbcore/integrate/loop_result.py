"""What a compiled integration loop hands back (:mod:`mbcore.integrate.fastloop`,
:mod:`mbcore.integrate.multistep_loop`, :mod:`mbcore.integrate.simulation_loop`): its result, the error
of an exhausted step budget, and the signal that hands a run over to the Python
driver."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from .base import EPS, Statistics
from .errors import StepBudgetError, StepSizeError, step_budget_error

__all__ = ["LoopStatus", "LoopResult", "LoopFallback", "budget_error", "step_too_small"]


class LoopStatus(IntEnum):
    """The status every compiled integration loop returns (``LOOP_STATUS`` of the
    extension module ``_steploop``, ext/_loop_status.pxi)."""

    DONE = 0                 #: reached the end time
    STOPPED = 1              #: the output call-back asked to stop
    EVALUATION_FAILED = 2    #: an evaluation failed: the Python driver takes over
    STEP_TOO_SMALL = 3       #: the step fell below the round-off limit
    STOP_CONDITION = 4       #: a stop condition is met in the next step
    BUDGET = 5               #: the step budget between outputs ran out


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


def step_too_small(h: float, t: float, remaining: bool = False) -> StepSizeError:
    """The StepSizeError of status STEP_TOO_SMALL (the message of
    ``Integrator._step_too_small``); ``remaining``: a fixed-step method's last,
    shortened step."""
    min_step = 10.0 * EPS * max(abs(t), 1e-300)
    why = " (remaining interval)" if remaining else ""
    return StepSizeError(
        f"step size {abs(h):.3e} fell below the round-off limit {min_step:.3e}{why}; "
        f"the problem may be stiff or singular here, or the tolerance too tight", t)


class LoopFallback(Exception):
    """A compiled loop cannot go on at time ``t`` (e.g. an evaluation failed): the
    Python driver takes over from there and names the error if there is one."""

    def __init__(self, t: float):
        super().__init__(t)
        self.t = t
