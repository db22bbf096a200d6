"""Zero-crossing events located on each step's dense output.

An event is a scalar function ``g(t, y)``; it *occurs* where ``g`` changes sign
inside an accepted step ``(t_old, t]``.  ``direction`` filters the crossing
(+1: from negative to non-negative, -1: from positive to non-positive, 0:
both); ``terminal`` stops the integration at the event (``True`` = the first
occurrence, an integer ``k`` = the k-th occurrence).  The time is found with
Brent's method (``scipy.optimize.brentq``) on ``g(t, sol(t))`` where ``sol`` is
the step's dense output, to ``xtol`` in t; the state there is ``sol(t_event)``.

Rules worth knowing:

* a root exactly at the start ``t0`` is not reported; a root exactly at a step
  end is reported once (in the step that ends on it), not again when the next
  step leaves it;
* two sign changes inside one step cancel and are missed: limit ``max_step``
  when ``g`` oscillates faster than the solution;
* the event accuracy is that of ``xtol`` *and* of the dense output (which has
  the accuracy of the method).

Plain callables work too: their optional attributes ``terminal`` and
``direction`` are read like scipy's ``solve_ivp`` events.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import MbcoreError
from .base import NonFiniteError

__all__ = ["Event", "EventRecord", "as_event", "EventLocator"]

EPS = float(np.finfo(float).eps)


class Event:
    """A zero-crossing function ``g(t, y) -> float`` with its settings.

    Parameters
    ----------
    fun : callable ``g(t, y)`` returning a scalar.
    terminal : False (record only), True (stop at the first occurrence) or a
        positive integer ``k`` (stop at the k-th occurrence).
    direction : +1 (rising: g goes from < 0 to >= 0), -1 (falling), 0 (both).
    name : label used in results and error messages (default: the function's name).
    """

    __slots__ = ("fun", "terminal", "direction", "name")

    def __init__(self, fun: Callable[[float, np.ndarray], float], *,
                 terminal: bool | int = False, direction: int = 0, name: str | None = None):
        if not callable(fun):
            raise MbcoreError(f"event {name or fun!r}: the event function must be callable")
        self.fun = fun
        self.name = name or getattr(fun, "__name__", None) or repr(fun)
        if isinstance(terminal, (bool, np.bool_)):
            self.terminal = 1 if terminal else 0
        elif isinstance(terminal, (int, np.integer)) and terminal >= 1:
            self.terminal = int(terminal)
        else:
            raise MbcoreError(f"event '{self.name}': terminal must be True/False or a "
                              f"positive integer, got {terminal!r}")
        if direction not in (-1, 0, 1):
            raise MbcoreError(f"event '{self.name}': direction must be -1, 0 or +1, "
                              f"got {direction!r}")
        self.direction = int(direction)

    def __call__(self, t: float, y: np.ndarray) -> float:
        return self.fun(t, y)

    def __repr__(self) -> str:
        return (f"Event({self.name!r}, terminal={self.terminal}, "
                f"direction={self.direction:+d})")


def as_event(obj: Any) -> Event:
    """An :class:`Event` from an Event or a callable with optional ``terminal``
    and ``direction`` attributes (scipy style)."""
    if isinstance(obj, Event):
        return obj
    return Event(obj, terminal=getattr(obj, "terminal", False),
                 direction=int(np.sign(getattr(obj, "direction", 0))))


@dataclass(frozen=True)
class EventRecord:
    """One located event: which (index into the events given), when, the state."""

    index: int
    name: str
    t: float
    y: np.ndarray
    direction: int          #: +1 rising, -1 falling (of this occurrence)
    terminal: bool          #: this occurrence stopped the integration


class EventLocator:
    """Tracks the sign of every event function from step to step.

    ``start(t0, y0)`` once; then ``step(t_old, t, y, sol)`` per accepted step
    returns the occurrences inside ``(t_old, t]`` sorted in time, ending with the
    terminal one if any (later occurrences in that step are dropped).
    ``nevals`` counts evaluations of event functions.
    """

    def __init__(self, events, xtol: float | None = None):
        self.events = [as_event(e) for e in events]
        self.xtol = xtol
        self.counts = [0] * len(self.events)
        self.g_old = np.empty(len(self.events))
        self.nevals = 0

    def _g(self, k: int, t: float, y: np.ndarray) -> float:
        self.nevals += 1
        ev = self.events[k]
        try:
            v = float(ev.fun(t, y))
        except (TypeError, ValueError) as exc:
            raise MbcoreError(f"event '{ev.name}' at t = {t:.9g} must return a scalar: "
                              f"{exc}") from exc
        if not math.isfinite(v):
            raise NonFiniteError(f"event function '{ev.name}' returned {v}", t)
        return v

    def start(self, t0: float, y0: np.ndarray) -> None:
        for k in range(len(self.events)):
            self.g_old[k] = self._g(k, t0, y0)

    def _locate(self, k: int, t_old: float, t: float, g_t: float, sol) -> float:
        """Root of g_k(s, sol(s)) in (t_old, t] by Brent's method.  ``g_t`` is the
        value at ``t`` (computed from the accepted y).  The interpolant at
        ``t_old`` may differ from the accepted y_old by round-off (or, for
        multistep interpolants, by the local error); if it does not bracket the
        root, the crossing is placed at ``t_old``."""
        g_a = self._g(k, t_old, sol(t_old))
        if g_a == 0.0 or (g_a > 0) == (g_t > 0):
            return t_old
        xtol = self.xtol if self.xtol is not None else \
            4 * EPS * max(abs(t_old), abs(t), abs(t - t_old))

        def gk(s: float) -> float:
            if s == t:
                return g_t
            if s == t_old:
                return g_a
            return self._g(k, s, sol(s))

        lo, hi = (t_old, t) if t_old < t else (t, t_old)
        from scipy.optimize import brentq    # only when an event is located (import: ~0.1 s)
        return brentq(gk, lo, hi, xtol=xtol, rtol=4 * EPS, maxiter=200)

    def step(self, t_old: float, t: float, y: np.ndarray, dense) -> list[EventRecord]:
        """Occurrences in ``(t_old, t]``; ``dense()`` returns the step's dense
        output (called lazily, only when some event changed sign)."""
        if not self.events:
            return []
        g_new = np.array([self._g(k, t, y) for k in range(len(self.events))])
        g_old = self.g_old
        up = (g_old < 0) & (g_new >= 0)
        down = (g_old > 0) & (g_new <= 0)
        found: list[tuple[float, int, int]] = []
        sol = None
        fwd = 1.0 if t >= t_old else -1.0
        for k, ev in enumerate(self.events):
            if not (up[k] or down[k]):
                continue
            sign = 1 if up[k] else -1
            if ev.direction and ev.direction != sign:
                continue
            if g_new[k] == 0.0:
                t_root = t
            else:
                if sol is None:
                    sol = dense()
                t_root = self._locate(k, t_old, t, g_new[k], sol)
            found.append((fwd * t_root, k, sign))
        self.g_old = g_new
        if not found:
            return []
        found.sort()
        records: list[EventRecord] = []
        for key, k, sign in found:
            t_root = fwd * key
            ev = self.events[k]
            self.counts[k] += 1
            terminal = bool(ev.terminal) and self.counts[k] >= ev.terminal
            if t_root == t:
                y_root = np.array(y, dtype=float)
            else:
                if sol is None:
                    sol = dense()
                y_root = np.asarray(sol(t_root), dtype=float)
            records.append(EventRecord(k, ev.name, t_root, y_root, sign, terminal))
            if terminal:
                break
        return records
