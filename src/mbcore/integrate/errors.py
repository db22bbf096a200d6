"""Errors of the integrators (:mod:`mbcore.integrate`): every one an
:class:`~mbcore.errors.AnalysisError` naming the time, or, for options, a
:class:`~mbcore.errors.MbcoreError` naming the option."""
from __future__ import annotations

from ..errors import AnalysisError, MbcoreError

__all__ = ["IntegrationError", "StepSizeError", "StepBudgetError", "step_budget_error",
           "NonFiniteError", "NewtonFailure", "IntegratorOptionError"]


class IntegrationError(AnalysisError):
    """An integrator could not advance.  ``t`` is the time where it stopped; the
    message starts with ``"t = <time>: "``."""


class StepSizeError(IntegrationError):
    """The step size fell below the round-off limit at time ``t``."""


class StepBudgetError(IntegrationError):
    """The step budget (``max_steps`` steps between two outputs, as CVODE's
    ``mxstep``) ran out at time ``t``: a very fast or stiff motion for this
    integrator, never a run of astronomically many steps."""


def step_budget_error(max_steps: int, t: float, t_prev: float, t_next: float | None,
                      h: float) -> StepBudgetError:
    """The :class:`StepBudgetError` of a loop that took ``max_steps`` steps since the
    output (or start) at ``t_prev`` and is at ``t`` (step size ``h``) short of the
    next output ``t_next``."""
    nxt = "" if t_next is None else f" without reaching the next output at t = {t_next:.9g}"
    return StepBudgetError(
        f"{max_steps} steps since t = {t_prev:.9g}{nxt} (step size now {abs(h):.3e}): "
        f"the motion is too fast or the problem too stiff for this integrator at its "
        f"tolerances; check the model's values (velocities, inertias, stiffnesses), try a "
        f"stiff integrator (bdf), or raise settings.max_steps (0: no budget)", t)


class NonFiniteError(IntegrationError):
    """The right-hand side (or Jacobian, or an event function) returned NaN/inf at
    time ``t``: never continued silently."""


class NewtonFailure(IntegrationError):
    """A fixed-step implicit method's Newton iteration did not converge at ``t``
    (an adaptive method reduces its step instead)."""


class IntegratorOptionError(MbcoreError, ValueError):
    """An integrator option is unknown or invalid; ``option`` names it."""

    def __init__(self, integrator: str, option: str, reason: str):
        self.integrator = integrator
        self.option = option
        self.reason = reason
        super().__init__(f"integrator '{integrator}': option '{option}': {reason}")
