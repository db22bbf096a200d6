"""Global error estimate of a fixed-step method by step halving (Richardson
extrapolation; TAM 674 (2003), lecture of 3 March; Hairer, Nørsett & Wanner (1993),
§II.4).

For a method of order p the global error behaves like ``e(h) ≈ C(t) h^p``, so two runs
with steps h and h/2 give, per coordinate and output time,

    e(h/2) = y_exact − y_h/2 ≈ (y_h/2 − y_h) / (2^p − 1),

and ``y_h/2 + e(h/2)`` is the extrapolated value (one order higher).  The estimate is
good where both runs are in the asymptotic range (``(y_h/2 − y_h)`` shrinks by 2^p when
h is halved again).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .driver import IntegrationResult, integrate
from .errors import IntegratorOptionError

__all__ = ["RichardsonEstimate", "richardson"]


@dataclass(frozen=True)
class RichardsonEstimate:
    """The run at h/2 (``fine``), the run at h (``coarse``), the order ``p`` used,
    ``error``: the estimated global error of ``fine.y`` as the correction
    ``y_exact − y_h/2`` (same shape as ``fine.y``), and ``extrapolated`` =
    ``fine.y + error``."""

    fine: IntegrationResult
    coarse: IntegrationResult
    order: int
    error: np.ndarray
    extrapolated: np.ndarray

    @property
    def t(self) -> np.ndarray:
        return self.fine.t


def richardson(method: Any, fun: Callable, t_span, y0, step: float, *,
               t_out=None, p: int | None = None, **options: Any) -> RichardsonEstimate:
    """Estimate the global error of the fixed-step ``method`` run with step ``step/2``
    from the runs with ``step`` and ``step/2`` (module docstring).

    ``t_out``: the output times (default: every step end of the coarse run, which the
    fine run also reaches).  ``p``: the order of the method (default: the order of the fine
    run's accepted steps, ``stats.orders``; named ``p`` so that an integrator option
    ``order``, e.g. of ``ab``, passes through).  Other keywords go to
    :func:`~mbcore.integrate.integrate` for both runs."""
    if "rtol" in options or "atol" in options:
        raise IntegratorOptionError(str(method), "step", "richardson needs a fixed-step "
                                    "method (a step, no rtol/atol)")
    coarse = integrate(method, fun, t_span, y0, step=step, t_out=t_out, **options)
    if t_out is None:
        t_out = coarse.t
    fine = integrate(method, fun, t_span, y0, step=step / 2.0, t_out=t_out, **options)
    if coarse.t.shape != fine.t.shape or not np.array_equal(coarse.t, fine.t):
        raise IntegratorOptionError(str(method), "t_out", "the two runs ended at "
                                    "different times (a terminal event?)")
    if p is None:
        orders = fine.stats.orders
        p = max(orders, key=orders.get) if orders else 1
    if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 1:
        raise IntegratorOptionError(str(method), "p", f"must be a positive integer, "
                                    f"got {p!r}")
    error = (fine.y - coarse.y) / (2.0 ** p - 1.0)
    return RichardsonEstimate(fine, coarse, int(p), error, fine.y + error)
