"""The compiled integration loop of the dynamic analysis.

When the right-hand side is compiled (:class:`mbcore.solve.formulation.Formulation`
``.compiled``: a model of built-in elements, DI or CS) and the integrator is an
explicit Runge–Kutta method whose integrator class declares a compiled twin
(``Integrator.compiled_loop_kind``: any subclass of the core's
:class:`mbcore.integrate.rk.FixedStepRK` or :class:`~mbcore.integrate.rk.EmbeddedRK`
that keeps their step — the built-in ``euler``/``heun``/``midpoint``/``rk4`` and
``bs23``/``dopri5``/``dop853`` and any third-party tableau; the twin's class
attributes: :func:`mbcore.integrate.rk.compiled_twin`),
the whole step loop runs in C (``mbcore._ext._steploop.run_rk``) and returns to
Python only at output times; so do the multistep methods ``abm`` and ``bdf`` (its
ODE form, and the GGL DAE form on ``mbplugins._ext._dae.CompiledGGL`` with the analysis'
Jacobian call-back), the implicit θ-methods ``implicit_euler`` and ``trapezoid``, the
generalized-α methods ``genalpha``, ``hht`` and ``genalpha_var`` (loop kind
'genalpha'; ``genalpha``/``hht`` also on the index-3 ``stiff`` DAE form with the
analysis' Jacobian call-back), the implicit Runge–Kutta methods ``sdirk`` (loop kind
'sdirk', ``run_sdirk``; also its ``ggl`` DAE form with the Jacobian call-back) and
``radau`` (loop kind 'radau', ``run_radau``; also the ``ggl`` and ``stiff`` DAE forms) in
``mbcore._ext._steploop`` (:mod:`mbcore.integrate.multistep_loop`), and the
fixed-grid textbook methods ``ab``, ``abm4``, ``taylor2``, ``verlet`` and ``am``
(``run_fixedgrid``, loop kind ``fixedgrid``), and the Lie-group method ``rkmk4``
(``run_lie``, loop kind ``lie``: unit quaternions by the exponential map).  A
fixed-step RK object whose tableau is its own rather than its class's (``rk2``'s option ``a``) runs on ``run_rk`` with
that tableau (:func:`mbcore.integrate.rk.instance_twin`).  Events
(impacts), post-step projection and the other DAE forms keep the Python driver
(:func:`mbcore.integrate.integrate`), except the projections of the penalty and
projection formulations, which run in C after every accepted step of ``run_rk``
(``CompiledPenalty.c_project``; ``CompiledRHS.c_post_step`` once
``enable_projection`` is set; each the formulation's ``project``; the compiled
object declares it by ``handles_post_step``), and stop conditions, checked in C.
The drift gate of di and cs (``enable_projection`` with an absolute tolerance: a
projection only where the violation passes it) runs in C after every accepted step
of every compiled loop; the multistep and θ loops restart from a projected state.

The method data (tableau, error weights, dense-output coefficients, controller
constants) and the effective tolerances and first step are read from the Python
integrator object itself, so both loops integrate the same way; tests keep their
trajectories equal to rounding.  A failing evaluation inside the compiled loop
(singular Jacobian, an element that cannot be evaluated) hands the rest of the
run to the Python driver from the last accepted step, which raises the named
error (or continues, e.g. with least-squares multipliers).
"""
from __future__ import annotations

import numpy as np

from .base import Statistics
from .multistep_loop import STEPLOOP_KINDS
from .rk import compiled_twin, instance_twin
from .loop_result import (LoopFallback, LoopResult, LoopStatus,  # noqa: F401
                          budget_error, step_too_small)

__all__ = ["compiled_loop_for", "run_compiled"]


def compiled_loop_for(icls, form, *, events=(), post_step=None, jac=None) -> str | None:
    """'fixed', 'embedded', 'abm', 'bdf', 'theta', 'genalpha', 'fixedgrid', 'sdirk' or
    'radau' when the
    compiled loop can run this
    integrator class on this formulation, else None.  A ``post_step`` (the
    formulation's projection) is accepted when the compiled object carries it in C
    itself (``handles_post_step``: ``CompiledPenalty``, whose ``projects`` says whether
    it projects at all, and ``CompiledRHS`` with ``enable_projection``; the multistep
    loops take none).  A Jacobian call-back ``jac``
    (the DAE forms) and a DAE right-hand side (``dae``: ``CompiledGGL``) are accepted
    by 'bdf', 'sdirk', 'radau' and 'genalpha' (whose fixed step runs the ``stiff`` form's
    layout; the variable step hands a call-back to the Python driver)."""
    if form.compiled is None or not form.compiled_ready() or events:
        return None
    if post_step is not None and not getattr(form.compiled, "handles_post_step", False):
        return None
    kind = getattr(icls, "compiled_loop_kind", None)
    kind = kind() if callable(kind) else None
    if (jac is not None or getattr(form.compiled, "dae", False)) and kind not in (
            "bdf", "genalpha", "sdirk", "radau"):
        return None
    if kind in STEPLOOP_KINDS:
        # multistep, implicit one-step and the fixed-grid textbook methods
        from .multistep_loop import available, kinds   # (mbcore.integrate.multistep_loop):
        return (kind if post_step is None and available() and kind in kinds()
                else None)                             # no post-step projection
    return kind if kind in ("fixed", "embedded") else None


def run_compiled(kind: str, icls, form, t0: float, t1: float, y0: np.ndarray,
                 t_out: np.ndarray, options: dict, on_output, stats: np.ndarray,
                 python_fallback, stops=None, jac=None, start=None,
                 ystep=None, hist=None, max_steps: int = 0,
                 on_commit=None) -> LoopResult:
    """Integrate the dynamic analysis' ``y = [q; qd; W]`` with the compiled loop.

    ``stats`` (5 floats) receives step size, order, steps, rejected, evaluations
    before each output (counted from this call); ``python_fallback(t, y, outs,
    why=...)`` continues on the Python driver and returns its result (``why``:
    ``"start"``, the compiled loop cannot start; ``"evaluation_failed"``;
    ``"stop_condition"``, a stop condition is met in the next step).  ``stops``: rows
    ``(j, value, sign)`` of terminal conditions ``sign (y_j - value)`` falling
    through 0, checked at every step end; the step in which one is met is handed to
    the Python driver (from its start), which locates the crossing with its event
    locator.  ``jac``: the Jacobian call-back of a DAE form ('bdf' only).
    ``start`` (resume from a checkpoint, :mod:`mbcore.analysis.checkpoint`): ``h_abs`` (the
    first step of an embedded pair), ``grid0`` and ``istep0`` (fixed steps continue
    the grid ``grid0 + i h`` after step ``istep0``); ``start["exact"]``: an embedded
    pair starts with exactly ``h_abs``; ``start["f0"]``: f(t0, y0) as stored (the
    evaluations then count from zero: the caller continues the stored counts);
    ``start["rhs_state"]``: the right-hand side's own state there (``load_state``,
    after the integrator's start-up).
    ``ystep`` (Runge-Kutta loop, size + 2 or 4 (size + 1) + 6 floats, the layout of
    ``run_rk``): receives, before the outputs of each step with outputs, its end
    state, time and next step size and, in the long form, the whole step and the
    loop's state at its start (from which an exact resume redoes the step).
    Multistep loops: ``hist`` (a dict) receives the state at the start of each step
    with outputs, and ``start["history"]`` (such a dict) restores it
    (:func:`mbcore.integrate.multistep_loop.run_multistep`).
    ``max_steps`` > 0: the step budget between outputs
    (:class:`~mbcore.integrate.base.StepBudgetError` when it runs out).
    ``on_commit(t, y) -> y_new | None``: a change of coordinates at every step's
    end before t1, after its outputs (the Python driver's): the Runge-Kutta loops
    continue from a new state as from a projection, the multistep and θ loops
    restart there as the driver restarts its integrator."""
    if kind in STEPLOOP_KINDS:
        from .multistep_loop import run_multistep
        return run_multistep(kind, icls, form, t0, t1, y0, t_out, options, on_output,
                             stats, python_fallback, stops, jac=jac, ystep=ystep,
                             hist=hist, history=(start or {}).get("history"),
                             max_steps=max_steps, rhs_state=(start or {}).get("rhs_state"),
                             on_commit=on_commit)
    from .._ext._steploop import run_rk

    crhs = form.compiled
    size = y0.size
    buf = np.zeros(size)

    def fun(t, y):                      # for the Python integrator's start-up only
        if crhs.eval(t, y, buf):
            raise LoopFallback(t)
        return buf

    try:
        integ = icls(fun, t0, np.array(y0, dtype=float), t1, **options)
    except LoopFallback:
        return python_fallback(t0, y0, t_out, why="start")
    if start and start.get("rhs_state") is not None:
        crhs.load_state(start["rhs_state"])   # its warm start at the stored step
    st = Statistics()
    st.nfev = integ.stats.nfev
    s0 = integ.loop_start()             # the start state, passed explicitly
    f0 = np.array(s0["f0"], dtype=float)
    if start and start.get("f0") is not None:     # an exact resume: the stored step
        f0 = np.array(start["f0"], dtype=float)
        st.nfev = 0
    if kind == "fixed":                    # the run's tableau (e.g. rk2's option a)
        twin = instance_twin(integ, None if getattr(icls, "TABLEAU_PER_RUN", False)
                             else compiled_twin(icls, kind))
        if twin is None:                   # not an explicit tableau: the Python driver
            return python_fallback(t0, y0, t_out, why="start")
    else:
        twin = compiled_twin(icls, kind)   # the class's tableau and controller
    if kind == "embedded":
        assert icls.compiled_loop_kind() == "embedded"
        h_abs, rtol, atol = s0["h_abs"], float(s0["rtol"]), float(s0["atol"])
        max_step = s0["max_step"]
        exponent = s0["exponent"]
        adaptive = True
    else:
        h_abs, rtol, atol, max_step, exponent = s0["h"], 0.0, 0.0, np.inf, 0.0
        adaptive = False
    grid = {}
    if start:
        if adaptive and start.get("h_abs"):
            h_abs = (float(start["h_abs"]) if start.get("exact")
                     else min(float(start["h_abs"]), max_step))
        elif not adaptive and start.get("grid0") is not None:
            grid = dict(grid0=float(start["grid0"]), istep0=int(start["istep0"]))
    if ystep is not None and ystep.size >= size + 2:
        grid["ystep"] = ystep
    t_out = np.ascontiguousarray(t_out, dtype=float)
    i0 = 0
    while i0 < t_out.size and t_out[i0] <= t0:
        if on_output(float(t_out[i0]), np.array(y0, dtype=float)) is True:
            return LoopResult(2, st, t0, np.array(y0))
        i0 += 1
    stops = np.zeros((0, 3)) if stops is None else np.asarray(stops, dtype=float)
    code, t, y, i_out, h_abs = run_rk(
        crhs, twin.A, twin.B, twin.C, twin.E, twin.P, adaptive, float(t0), float(t1),
        np.array(y0, dtype=float), f0, t_out, i0, h_abs, rtol, atol, max_step,
        *twin.controller, exponent, twin.order, on_output, stats, st.nfev,
        np.ascontiguousarray(stops[:, 0], dtype=np.intp),
        np.ascontiguousarray(stops[:, 1]), np.ascontiguousarray(stops[:, 2]),
        **twin.hairer, **grid, max_steps=int(max_steps or 0), on_commit=on_commit)
    st.nsteps += int(stats[2])
    st.nrejected += int(stats[3])
    st.nerror_test_failures += int(stats[3])
    st.nfev = int(stats[4])
    code = LoopStatus(code)
    if code is LoopStatus.DONE:
        return LoopResult(0, st, t, y)
    if code is LoopStatus.STOPPED:
        return LoopResult(2, st, t, y)
    if code is LoopStatus.BUDGET:
        raise budget_error(max_steps, t, t0, t_out, i_out, float(stats[0]))
    if code is LoopStatus.STEP_TOO_SMALL:
        raise step_too_small(float(stats[0]), t, remaining=kind == "fixed")
    # EVALUATION_FAILED, or STOP_CONDITION (met in the next step):
    # the Python driver takes over from the last accepted step
    res = python_fallback(t, y, t_out[i_out:], why=code.name.lower())
    rest = res.stats
    for k in ("nsteps", "nrejected", "nerror_test_failures", "nfev"):
        setattr(rest, k, getattr(rest, k) + getattr(st, k))
    return res
