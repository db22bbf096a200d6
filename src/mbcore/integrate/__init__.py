"""Integrators for ``y' = f(t, y)``: the contract, shared helpers, events, driver.

The core is method-agnostic: every method (RK4, Dormand–Prince, Adams PECE,
BDF, ...) is a plugin class registered through the hook ``mbcore_integrators``
(the built-in ones live in ``mbplugins.integrators``).  The generic explicit
Runge–Kutta integrators :class:`FixedStepRK` and :class:`EmbeddedRK`
(:mod:`mbcore.integrate.rk`) are part of the core: a plugin subclasses them with
its tableau and gets the compiled loop.  See docs/integrators.md.

>>> from mbcore.integrate import integrate
>>> res = integrate("dopri5", lambda t, y: -y, (0, 1), [1.0], rtol=1e-8)  # doctest: +SKIP
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import (ADAPTIVE_OPTIONS, CALIBRATION_OPTIONS, FIXED_STEP_OPTIONS,
                       NEWTON_OPTIONS, IntegrationError,
                       Integrator, IntegratorOptionError, NewtonFailure, NonFiniteError,
                       Option, Statistics, StepBudgetError, StepSizeError,
                       calibrated_tolerances)
    from .common import (BackwardDifferenceDenseOutput, ConstantDenseOutput, DenseOutput,
                         HermiteDenseOutput, LinearDenseOutput, RKDenseOutput, num_jac,
                         rms_norm, select_initial_step, step_from_frequency)
    from .driver import IntegrationResult, integrate, resolve_integrator
    from .events import Event, EventRecord
    from .richardson import RichardsonEstimate, richardson
    from .rk import (EmbeddedRK, FixedStepRK, RKTwin, compiled_twin,
                     hermite_dense_coefficients)

#: name -> the submodule that defines it.  Imported on first access (PEP 562): the
#: compiled loop of a run needs only base, common, rk and loop_result, and the
#: driver and events modules cost ~2 ms of the first run of a process.
_WHERE = {
    **dict.fromkeys(("ADAPTIVE_OPTIONS", "CALIBRATION_OPTIONS", "FIXED_STEP_OPTIONS",
                     "NEWTON_OPTIONS", "IntegrationError", "Integrator",
                     "IntegratorOptionError", "NewtonFailure", "NonFiniteError", "Option",
                     "Statistics", "StepBudgetError", "StepSizeError",
                     "calibrated_tolerances"), "base"),
    **dict.fromkeys(("BackwardDifferenceDenseOutput", "ConstantDenseOutput", "DenseOutput",
                     "HermiteDenseOutput", "LinearDenseOutput", "RKDenseOutput", "num_jac",
                     "rms_norm", "select_initial_step", "step_from_frequency"), "common"),
    **dict.fromkeys(("IntegrationResult", "integrate", "resolve_integrator"), "driver"),
    **dict.fromkeys(("Event", "EventRecord"), "events"),
    **dict.fromkeys(("richardson", "RichardsonEstimate"), "richardson"),
    **dict.fromkeys(("EmbeddedRK", "FixedStepRK", "RKTwin", "compiled_twin",
                     "hermite_dense_coefficients"), "rk"),
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))


__all__ = [
    "Integrator", "Statistics", "Option", "FIXED_STEP_OPTIONS", "ADAPTIVE_OPTIONS",
    "NEWTON_OPTIONS", "CALIBRATION_OPTIONS", "calibrated_tolerances",
    "IntegrationError", "StepSizeError", "StepBudgetError", "NonFiniteError",
    "NewtonFailure",
    "IntegratorOptionError",
    "DenseOutput", "ConstantDenseOutput", "LinearDenseOutput", "HermiteDenseOutput",
    "RKDenseOutput", "BackwardDifferenceDenseOutput",
    "rms_norm", "select_initial_step", "num_jac", "step_from_frequency",
    "Event", "EventRecord", "IntegrationResult", "integrate", "resolve_integrator",
    "richardson", "RichardsonEstimate",
    "FixedStepRK", "EmbeddedRK", "RKTwin", "compiled_twin", "hermite_dense_coefficients",
]
