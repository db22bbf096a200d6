"""The integration loop: advance an integrator, produce output at chosen times,
locate events, stop on terminal events, return a small result object.

Output times are independent of the internal steps: inside a step the values
come from the integrator's dense output, so an adaptive method takes the steps
its error control wants whatever ``t_out`` is (Hairer, Nørsett & Wanner (1993), §II.6).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import MbcoreError
from .base import (IntegrationError, Integrator, IntegratorOptionError, Statistics,
                   step_budget_error)
from .events import EventLocator, EventRecord

__all__ = ["integrate", "IntegrationResult", "resolve_integrator"]

#: result status codes (as scipy's solve_ivp, plus 2)
FAILED, FINISHED, TERMINAL_EVENT, STOPPED = -1, 0, 1, 2


@dataclass
class IntegrationResult:
    """What :func:`integrate` returns.

    ``t`` (m,) and ``y`` (m, n) are the output times and states (time-major, like
    mbcore's result files); ``events`` lists every located event in time order,
    ``t_events[k]``/``y_events[k]`` the occurrences of event ``k``.  ``status``:
    0 reached the end, 1 a terminal event, 2 stopped by ``on_output``, -1 failed
    (``error`` holds the exception; only when ``raise_on_failure=False``).
    ``t_final``/``y_final`` is where the integration stopped.
    """

    method: str
    t: np.ndarray
    y: np.ndarray
    t_final: float
    y_final: np.ndarray
    status: int
    message: str
    stats: Statistics
    events: list[EventRecord] = field(default_factory=list)
    t_events: list[np.ndarray] = field(default_factory=list)
    y_events: list[np.ndarray] = field(default_factory=list)
    nevent_evals: int = 0
    error: Exception | None = None

    @property
    def success(self) -> bool:
        return self.status >= 0

    def __repr__(self) -> str:
        return (f"IntegrationResult(method={self.method!r}, status={self.status}, "
                f"t_final={self.t_final:.9g}, outputs={len(self.t)}, "
                f"events={len(self.events)}, {self.stats})")


def resolve_integrator(method: str | type, registry=None) -> type:
    """The integrator class for ``method``: a subclass of :class:`Integrator`, or
    a name looked up in the plugin registry (hook ``mbcore_integrators``)."""
    if isinstance(method, type):
        if not issubclass(method, Integrator):
            raise MbcoreError(f"{method!r} is not a subclass of mbcore.integrate.Integrator")
        return method
    if not isinstance(method, str):
        raise MbcoreError(f"method must be an integrator name or class, got {method!r}")
    if registry is None:
        from ..plugins.manager import registry as default_registry
        registry = default_registry()
    try:
        return registry.get("integrator", method)
    except KeyError as exc:
        raise MbcoreError(exc.args[0]) from None


def _check_t_out(t_out, t0: float, tf: float, label: str) -> np.ndarray:
    arr = np.asarray(t_out, dtype=float)
    if arr.ndim != 1:
        raise IntegratorOptionError(label, "t_out", "must be a 1-D array of times")
    if arr.size and not np.all(np.isfinite(arr)):
        raise IntegratorOptionError(label, "t_out", "contains NaN/inf")
    lo, hi = min(t0, tf), max(t0, tf)
    if arr.size and (arr.min() < lo or arr.max() > hi):
        raise IntegratorOptionError(label, "t_out",
                                    f"times must lie within t_span [{t0}, {tf}]")
    d = np.diff(arr) * (1.0 if tf >= t0 else -1.0)
    if np.any(d < 0):
        raise IntegratorOptionError(label, "t_out", "times must be sorted in the "
                                    "direction of integration")
    return arr


def integrate(method: str | type, fun: Callable, t_span: Sequence[float], y0, *,
              t_out=None, events=(), on_output: Callable | None = None,
              jac=None, store: bool = True, max_steps: int | None = None,
              max_steps_per_output: int | None = None,
              post_step: Callable | None = None, on_step: Callable | None = None,
              on_commit: Callable | None = None, event_xtol: float | None = None, raise_on_failure: bool = True,
              registry=None, state: dict | None = None,
              step_state: Callable[[dict], None] | None = None,
              problem_state: tuple[Callable[[], Any], Callable[[Any], None]] | None = None,
              **options: Any) -> IntegrationResult:
    """Integrate ``y' = fun(t, y)`` over ``t_span = (t0, tf)`` from ``y0``.

    Parameters
    ----------
    method : integrator name (``"rk4"``, ``"dopri5"``, ``"bdf"``...) or class.
    fun : right-hand side ``fun(t, y) -> dy/dt`` (``y`` is 1-D float64; treat it
        as read-only).
    t_span : ``(t0, tf)``; ``tf < t0`` integrates backwards.
    y0 : initial state (1-D).
    t_out : output times (sorted, within ``t_span``), produced by dense output
        independently of the steps; default: ``t0`` and every step end.
    events : :class:`~mbcore.integrate.events.Event` objects or callables
        ``g(t, y)`` (with optional ``terminal``/``direction`` attributes).
    on_output : ``on_output(t, y)`` called for every output point in order
        (streaming to a reporter); returning ``True`` stops the integration
        (status 2).  ``y`` is a fresh array.
    jac : Jacobian for implicit methods: a callable ``jac(t, y)`` or a constant
        ``(n, n)`` array; default finite differences.  Ignored by explicit methods.
    store : keep the outputs in the result (False: stream through ``on_output``).
    on_step : ``on_step(integrator)`` called after every accepted step, before its
        outputs (step size, order and statistics for diagnostics).
    post_step : ``post_step(t, y) -> y_new | None`` called after every accepted step
        (not at a terminal event); a returned state replaces ``y`` (coordinate
        projection) and the integrator continues from it:
        ``resume(t, y)`` when the method has one (one-step methods keep their step
        size), else ``restart`` (multistep history is discarded).  Outputs exactly at the step end use the
        new state; outputs inside the step use the step's dense output.
    on_commit : ``on_commit(t, y) -> y_new | None`` called at every step's end
        after its outputs (not at a terminal event or a stop): a returned state is a
        change of coordinates there (a new partition of the independent
        coordinates), continued from as from ``post_step``'s.
    max_steps : fail after this many accepted steps.
    max_steps_per_output : the step budget between outputs (CVODE's ``mxstep``):
        fail with :class:`~mbcore.integrate.base.StepBudgetError` after this many
        accepted steps since the last output (or the start) without reaching the
        next one (with ``t_out``; ``None`` or 0: no budget).
    event_xtol : absolute time tolerance of event location (default: 4 eps |t|).
    raise_on_failure : raise the integrator's error (with ``.result`` attached,
        holding the outputs up to the failure) instead of returning status -1.
    registry : plugin registry to look names up in (default: the process one).
    state : continue exactly from a state of ``step_state`` (taken at ``t0``, ``y0``):
        the integrator's (:meth:`~mbcore.integrate.base.Integrator.set_state`) and
        the event functions' signs; the statistics count from zero.
    step_state : ``step_state(state)`` is called before the outputs of every step
        that has outputs, with the state at that step's start (the integrator's
        :meth:`~mbcore.integrate.base.Integrator.get_state`, the event functions'
        last values and counts, ``counts``: steps, rejected steps and evaluations
        before it), or not at all when the integrator declares no state: from it,
        ``state=`` redoes that step and continues as this run (checkpoints).
    problem_state : ``(get, set)``: the right-hand side's own state (a warm start)
        is ``get()`` at each step's start for ``step_state`` and put back by
        ``set(...)`` after the integrator's start-up when continuing from ``state``.
    **options : the method's options (``step`` / ``rtol``, ``atol``, ...).
    """
    cls = resolve_integrator(method, registry)
    try:
        t0, tf = (float(v) for v in t_span)
    except (TypeError, ValueError):
        raise IntegratorOptionError(cls.name, "t_span", f"must be (t0, tf), got {t_span!r}") \
            from None
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise IntegratorOptionError(cls.name, "max_steps", f"must be a positive integer, "
                                    f"got {max_steps!r}")
    if max_steps_per_output is not None and (not isinstance(max_steps_per_output, int)
                                             or max_steps_per_output < 0):
        raise IntegratorOptionError(cls.name, "max_steps_per_output", f"must be an integer "
                                    f">= 0, got {max_steps_per_output!r}")
    budget = max_steps_per_output or 0
    integ: Integrator = cls(fun, t0, y0, tf, jac=jac, **options)
    direction = integ.direction
    outs = _check_t_out(t_out, t0, tf, cls.name or cls.__name__) if t_out is not None else None

    ts: list[float] = []
    ys: list[np.ndarray] = []
    stop_requested = False

    def emit(t: float, y: np.ndarray) -> None:
        nonlocal stop_requested
        if store:
            ts.append(t)
            ys.append(y)
        if on_output is not None and on_output(t, y) is True:
            stop_requested = True

    locator = EventLocator(events, event_xtol)
    if state is not None:
        integ.set_state(state["integrator"])
        if problem_state is not None:
            problem_state[1](state.get("problem"))
        locator.g_old = np.array(state["g_old"], dtype=float)
        locator.counts = [int(c) for c in state["event_counts"]]
        if locator.g_old.shape != (len(locator.events),):
            raise IntegratorOptionError(cls.name, "state", "the event functions differ "
                                        "from those of the state")
    else:
        locator.start(integ.t, integ.y)
    found: list[EventRecord] = []
    # the state before each step (step_state), when the integrator declares it
    snapshots = step_state is not None and integ.get_state() is not None

    i_out = 0
    since, t_emit = 0, t0          # steps since the last output, and its time
    if outs is None:
        emit(integ.t, integ.y.copy())
    else:
        while i_out < outs.size and outs[i_out] == t0:
            emit(t0, integ.y.copy())
            i_out += 1

    status, message, error = FINISHED, "reached the end of t_span", None
    while integ.status == "running" and not stop_requested:
        if snapshots:
            st_ = integ.stats
            pre = {"integrator": integ.get_state(), "g_old": locator.g_old.copy(),
                   "event_counts": list(locator.counts),
                   "counts": [st_.nsteps, st_.nrejected, st_.nfev],
                   "problem": None if problem_state is None else problem_state[0]()}
        msg = integ.step()
        if msg is not None:
            status, message, error = FAILED, msg, integ.error
            break
        t_old, t_new = integ.t_old, integ.t
        y_new = integ.y
        sol = None
        if on_step is not None:
            on_step(integ)

        def dense():
            nonlocal sol
            if sol is None:
                sol = integ.dense_output()
            return sol

        t_stop = t_new
        terminal = False
        if locator.events:
            recs = locator.step(t_old, t_new, y_new, dense)
            if recs:
                found.extend(recs)
                if recs[-1].terminal:
                    terminal = True
                    t_stop = recs[-1].t
        y_post = None
        if post_step is not None and not terminal:
            y_post = post_step(t_new, y_new)
            if y_post is not None:
                y_new = np.array(y_post, dtype=float)
        if outs is None:
            if terminal:
                emit(t_stop, recs[-1].y.copy())
            else:
                emit(t_new, y_new.copy())
        else:
            j = i_out
            while j < outs.size and direction * (outs[j] - t_stop) <= 0:
                j += 1
            since += 1
            if j > i_out:
                if snapshots:
                    step_state(pre)
                since, t_emit = 0, float(outs[j - 1])
                tt = outs[i_out:j]
                exact = tt == t_new
                vals = None
                if not exact.all():
                    vals = dense()(tt)
                for m in range(j - i_out):
                    if stop_requested:
                        break
                    emit(float(tt[m]), y_new.copy() if exact[m] else vals[m])
                i_out = j
        if terminal:
            status, message = TERMINAL_EVENT, f"terminal event '{recs[-1].name}' at " \
                                              f"t = {t_stop:.9g}"
            break
        new_coordinates = False
        if on_commit is not None and not stop_requested and integ.status == "running":
            y_c = on_commit(t_new, y_new)
            if y_c is not None:
                y_new = y_post = np.array(y_c, dtype=float)
                new_coordinates = True
        if y_post is not None and integ.status == "running":
            # a post-step correction: multistep methods keep their history
            # (``correct``), one-step methods their step size (``resume``); new
            # coordinates (``on_commit``) and methods with neither restart
            correct = None if new_coordinates else getattr(integ, "correct", None)
            resume = getattr(integ, "resume", None)
            if correct is not None:
                correct(t_new, y_new)
            elif resume is not None:
                resume(t_new, y_new)
            else:
                integ.restart(t_new, y_new)
        if budget and since >= budget and integ.status == "running":
            error = step_budget_error(budget, integ.t, t_emit,
                                      float(outs[i_out]) if i_out < outs.size else None,
                                      t_new - t_old)
            status, message = FAILED, str(error)
            break
        if max_steps is not None and integ.stats.nsteps >= max_steps \
                and integ.status == "running":
            error = IntegrationError(f"max_steps = {max_steps} reached before t_bound = "
                                     f"{tf:.9g}", integ.t)
            status, message = FAILED, str(error)
            break
    if stop_requested and status == FINISHED and integ.status == "running":
        status, message = STOPPED, f"stopped by on_output at t = {ts[-1] if ts else integ.t:.9g}"

    if status == TERMINAL_EVENT:
        t_final, y_final = found[-1].t, found[-1].y.copy()
    else:
        t_final, y_final = integ.t, integ.y.copy()
    n_ev = len(locator.events)
    t_events = [np.array([r.t for r in found if r.index == k]) for k in range(n_ev)]
    y_events = [np.array([r.y for r in found if r.index == k]).reshape(-1, integ.n)
                for k in range(n_ev)]
    result = IntegrationResult(
        method=cls.name or cls.__name__,
        t=np.array(ts, dtype=float),
        y=np.array(ys, dtype=float).reshape(-1, integ.n),
        t_final=t_final, y_final=y_final, status=status, message=message,
        stats=integ.stats, events=found, t_events=t_events, y_events=y_events,
        nevent_evals=locator.nevals, error=error)
    if status == FAILED and raise_on_failure:
        err = error if error is not None else IntegrationError(message, integ.t)
        err.result = result
        raise err
    return result
