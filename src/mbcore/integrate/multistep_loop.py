"""The compiled integration loops of the multistep methods: ``abm``
(:class:`mbplugins.integrators.adams.AdamsPECE`) and ``bdf``
(:class:`mbplugins.integrators.bdf.BDF`) stepped in C by
``mbcore._ext._steploop.run_abm`` / ``run_bdf``, and the implicit one-step
θ-methods ``implicit_euler`` and ``trapezoid``
(:class:`mbplugins.integrators.implicit.ThetaMethod`) by ``run_theta``.

:mod:`mbcore.integrate.fastloop` dispatches here when the integrator class declares
``compiled_loop_kind() == "abm"``, ``"bdf"``, ``"theta"``, ``"sdirk"``, ``"radau"`` or
``"genalpha"`` (the second-order form of generalized-α: ``run_genalpha`` for ``genalpha``/``hht``,
``run_genalpha_var`` for the variable step ``genalpha_var``, whose ``loop_start()``
says ``variable``; ``run_genalpha`` also runs the index-3 ``stiff`` formulation:
multipliers, the velocity rows' mass and the analysis' DAE Jacobian call-back,
Arnold & Brüls (2007)).  As for the explicit Runge–Kutta
loop, the Python integrator object is built first (its ``_restart_impl`` evaluates
f(t0, y0), chooses the first step and resolves the calibrated tolerances); the
compiled loop continues from its state with the same formulas, so both loops take
the same steps, orders, Jacobians, LU factorisations and evaluations.  BDF runs here
at every order (1–6: ``max_order: 6`` included) in its ODE form (unit mass, the compiled right-hand side's Jacobian ``c_jac``: forward
differences column by column, or CompiledRHS's semi-analytic DI/CS one) and with its DAE options ``mass``, ``h_power`` and
``newton_system`` (the hook called from C as the Python driver calls it) and a
Jacobian call-back (the dynamic analysis' ``dae_jacobian``): the GGL form on
``mbplugins._ext._dae.CompiledGGL`` (Gear, Gupta & Leimkuhler (1985)).  A constant Jacobian and
per-component tolerances keep the Python driver.
The θ-methods likewise run without a given Jacobian and with scalar Newton
tolerances only.

:class:`mbcore.Simulation` runs these loops through
:class:`mbcore.integrate.simulation_loop.CompiledLoop`: one :func:`run_multistep` call
kept running across its ``advance_to`` calls (the output times written while the
loop waits in its output call-back; ``hist``/``history`` for its exact resumes;
``keep``: the integrator object kept and restarted at a restart, not built again).

``"sdirk"``: the 5-stage, order-4 SDIRK of Hairer & Wanner (1996), §IV.6, Table 6.5
(:class:`mbplugins.integrators.sdirk.SDIRK4`), stepped by ``run_sdirk`` from the
object's ``loop_start()`` (y' at the start, the first step, the Newton settings,
the mass diagonal) with the tableau and controller constants of its class: the same
stages, simplified Newton iterations, Jacobians (``c_jac``, or the analysis' DAE
Jacobian call-back of the ``ggl`` form), LUs, error estimates, steps and cubic
Hermite dense output.  Checkpoints: the state at the start of each step with
outputs (y, y', h_abs, the Jacobian and the h of its LU) goes into ``hist``; a
resume restores it (``SDIRK4.restore_loop_history``).

``"radau"``: Radau IIA of order 5 (:class:`mbplugins.integrators.radau.Radau5`;
Hairer & Wanner (1996), §IV.8, the algorithm of RADAU5), stepped by ``run_radau`` from
the object's ``loop_start()`` (f and the Jacobian at the start, the controller's
state, the last collocation increments, the DAE options ``mass`` and ``h_power``)
with the transformation, nodes, error weights and shifts of its class: the real
Newton matrix by dgetrf, the complex one by zgetrf, the same iterations, Jacobians
(``c_jac``, or the DAE forms' call-back; the start-up Jacobian of the analytic DI/CS
case is ``crhs.jacobian``, as the Python driver's), error estimates and predictive
steps.  Checkpoints: the state at the start of each step with outputs (f, J,
``jac_current``, the step, the controller's last step and error, Z, the h of the LU)
goes into ``hist``; a resume restores it (``Radau5.restore_loop_history``).

``"fixedgrid"``: the fixed-grid textbook methods of
:mod:`mbplugins.integrators.classical` — Adams–Bashforth 1–4 and the AB3/AM4 PECE pair
(RK4 starter; Nikravesh (1988), §12.3), the second-order Taylor method (Eqs.
12.11–12.12) and Störmer–Verlet, kick–drift–kick and drift–kick–drift
(Hairer, Lubich & Wanner (2006), §I.1.4, §VI.3) — and Adams–Moulton 1–4
(:class:`mbplugins.integrators.adams_moulton.AdamsMoulton`, §12.3.2, on the θ-methods'
modified Newton iteration: no given Jacobian, scalar Newton tolerances), stepped by
``run_fixedgrid`` from the object's ``loop_start()`` (grid, past derivatives,
weights) with the same formulas: the same steps, Newton iterations, Jacobians,
evaluations and cubic Hermite dense output.  Checkpoints as for the θ-methods: the
state at the start of each step with outputs (t, y, f, the past derivatives, the grid
``t_start``, ``i``, ``h`` and, for Adams–Moulton, the Jacobian and the LU's ``hβ_0``)
goes into ``hist``; a resume restores it into the object
(``_FixedGrid.restore_loop_history``) and the loop redoes that step bit for bit.

``"lie"``: the Lie-group method ``rkmk4``
(:class:`mbplugins.integrators.liegroup.RKMK4`: the classical RK4 in the Lie algebra,
Munthe-Kaas (1999); Hairer, Lubich & Wanner (2006), §IV.8.2), stepped by ``run_lie``
from the object's ``loop_start()`` (the grid, f at t, the quaternion indices and their
frame) with the same formulas in the same order: the quaternion exponential, the
commutator terms, the same steps, evaluations and dense output (the quaternions'
through the exponential of the Hermite interpolant in the algebra), bit for bit with
the Python driver (tests/test_rkmk4_loop.py).  Checkpoints and resume as for
``fixedgrid`` (the grid and f at the start of each step with outputs).
"""
from __future__ import annotations

import numpy as np

from .base import Statistics

__all__ = ["available", "run_multistep"]

#: Statistics fields accumulated by the compiled loops (``_steploop.COUNTERS``)
_COUNTED = ("nerror_test_failures", "nnewton_failures", "nfev_jac", "njev", "nlu",
            "nlu_solves", "nnewton_iter", "norder_changes")


def available() -> bool:
    """True when the extension module ``mbcore._ext._steploop`` is built."""
    try:
        from .._ext import _steploop
    except ImportError:
        return False
    return hasattr(_steploop, "run_abm")


#: every loop kind of ``mbcore._ext._steploop`` besides the Runge–Kutta loop ('fixed',
#: 'embedded'): the multistep, implicit one-step, generalized-α, fixed-grid and
#: Lie-group steppers (:func:`kinds`: those the built extension implements)
STEPLOOP_KINDS = ("abm", "bdf", "theta", "genalpha", "fixedgrid", "lie", "sdirk", "radau")


def kinds() -> tuple:
    """The loop kinds the built extension implements (``run_theta`` came later: an
    older build keeps the θ-methods on the Python driver)."""
    from .._ext import _steploop
    return ("abm", "bdf") + (("theta",) if hasattr(_steploop, "run_theta") else ()) \
        + (("genalpha",) if hasattr(_steploop, "run_genalpha") else ()) \
        + (("fixedgrid",) if hasattr(_steploop, "run_fixedgrid") else ()) \
        + (("lie",) if hasattr(_steploop, "run_lie") else ()) \
        + (("sdirk",) if hasattr(_steploop, "run_sdirk") else ()) \
        + (("radau",) if hasattr(_steploop, "run_radau") else ())


def _ode_form(kind: str, integ, start: dict) -> bool:
    """The integrator's options are those the compiled loop implements."""
    if integ.direction < 0:
        return False
    scalar = not (np.ndim(start.get("rtol", 0.0)) or np.ndim(start.get("atol", 0.0)))
    if kind == "bdf":   # mass, h_power, a Jacobian call-back, a hook: run_bdf's own
        # (orders above the compiled loop's limit would run in Python; run_bdf has 1-6)
        return (integ.constant_jacobian is None and scalar and start["max_order"]
                <= getattr(type(integ), "COMPILED_MAX_ORDER", start["max_order"]))
    if kind == "theta":
        o = integ.opts
        return (integ.constant_jacobian is None and not integ.has_jacobian
                and not np.ndim(o["newton_rtol"]) and not np.ndim(o["newton_atol"])
                and integ.status == "running")
    if kind == "genalpha":  # the second-order form (fixed step: also multipliers, a
        o = integ.opts      # mass and a Jacobian call-back, the stiff formulation)
        if start.get("variable"):   # genalpha_var: scalar tolerances, a newer build,
            from .._ext import _steploop     # unit mass, no multipliers nor call-back
            dae = getattr(_steploop, "GENALPHA_VAR_DAE", False)   # unless it has them
            if not (scalar and hasattr(_steploop, "run_genalpha_var")
                    and (dae or (not integ.has_jacobian and not start.get("multipliers")
                                 and o.get("jacobian_update") is None
                                 and bool(np.all(start.get("mass", 1.0) == 1.0))))):
                return False
        return (integ.constant_jacobian is None
                and bool(start.get("compiled"))
                and not np.ndim(o.get("newton_rtol") or 0.0)
                and integ.status == "running")
    if kind in ("sdirk", "radau"):  # mass (h_power) and a Jacobian call-back: theirs
        return integ.constant_jacobian is None and scalar and integ.status == "running"
    if kind == "fixedgrid":  # a live start state; 'am': as the θ-methods
        if start.get("method") == "am":
            o = integ.opts
            if (integ.constant_jacobian is not None or integ.has_jacobian
                    or np.ndim(o["newton_rtol"]) or np.ndim(o["newton_atol"])):
                return False
        return integ.status == "running" and start["hist"].shape[0] >= 1
    if kind == "lie":        # a live start state (f at t0)
        return integ.status == "running" and start["hist"].shape[0] == 1
    return scalar


def _statistics(st: Statistics, stats: np.ndarray, counters: np.ndarray) -> None:
    st.nsteps += int(stats[2])
    st.nrejected += int(stats[3])
    st.nfev = int(stats[4])
    for k, name in enumerate(_COUNTED):
        setattr(st, name, getattr(st, name) + int(counters[k]))
    from .._ext._steploop import ORDERS
    if st.nsteps:
        st.h_min = min(st.h_min, float(counters[8]))
        st.h_max = max(st.h_max, float(counters[9]))
    for k in range(counters.size - ORDERS):
        if counters[ORDERS + k]:
            st.orders[k] = st.orders.get(k, 0) + int(counters[ORDERS + k])


def run_multistep(kind: str, icls, form, t0: float, t1: float, y0: np.ndarray,
                  t_out: np.ndarray, options: dict, on_output, stats: np.ndarray,
                  python_fallback, stops=None, jac=None, ystep=None, hist=None,
                  history=None, max_steps: int = 0, rhs_state=None, on_commit=None,
                  keep: dict | None = None):
    """:func:`mbcore.integrate.fastloop.run_compiled` for ``kind`` 'abm', 'bdf', 'theta',
    'genalpha', 'fixedgrid', 'sdirk' or 'radau' (same arguments and result; ``jac``: a
    Jacobian call-back, 'bdf', 'sdirk', 'radau' and 'genalpha' only).
    Checkpoints: ``ystep`` (size + 2 floats) receives the end state of each step
    with outputs and ``hist`` (a dict) the loop's state at that step's start (its
    ``t``, ``y``, history and ``counts``); ``history`` (such a dict, from a
    checkpoint, taken at (t0, y0)) is restored into the integrator object (and the
    loop's Jacobian/LU) and the loop redoes that step, its evaluations counted from
    zero (the caller continues the stored counts).  A history without ``t`` (an
    older checkpoint: the state after the step) is restored the same way, counted
    from the start-up.  ``rhs_state``: the right-hand side's own state at (t0, y0)
    (``load_state``, after the integrator's start-up).
    ``on_commit(t, y) -> y_new | None``: a change of coordinates at every step's end
    before t1, after its outputs (the Python driver's): a new state restarts the
    method there as the driver does (``integ.restart(t, y_new)``: order 1, the first
    step chosen again), the loop continuing with the same outputs, statistics, step
    budget and checkpoints; the restart's evaluations count as the driver's.
    ``keep``: a dict in which the integrator object is kept between calls of one
    caller (:class:`mbcore.integrate.simulation_loop.CompiledLoop`): a later fresh
    start (no ``history``) restarts that object at (t0, y0) (``integ.restart``: the
    Python driver's restart, the same start-up formulas) instead of building and
    checking a new one; its start-up evaluations counted from zero as a new
    object's; ``keep["discard"]`` set (by ``on_output``) before it stops the loop:
    the result is dropped, its Statistics left empty (the counts are in ``stats``)."""
    from .._ext import _steploop as ms
    from .loop_result import (LoopFallback, LoopResult, LoopStatus, budget_error,
                              step_too_small)

    crhs = form.compiled
    buf = np.zeros(y0.size)

    def fun(t, y):                      # for the Python integrator's start-up only
        if crhs.eval(t, y, buf):
            raise LoopFallback(t)
        return buf

    if jac is not None and kind not in ("bdf", "genalpha", "sdirk", "radau"):
        return python_fallback(t0, y0, t_out, why="start")
    start_jac = jac
    if kind == "radau" and jac is None and getattr(crhs, "analytic_jac", False):
        def start_jac(t, y):            # radau's start-up Jacobian: the Python driver's
            J = np.empty((y.size, y.size))   # (the analysis' rhs_jacobian)
            if crhs.jacobian(t, np.ascontiguousarray(y, dtype=float), J):
                raise LoopFallback(t)
            return J
    integ = None if keep is None or history is not None else keep.get("integ")
    try:
        if integ is None:
            integ = icls(fun, t0, np.array(y0, dtype=float), t1, jac=start_jac,
                         **options)
        else:                           # the kept object (it passed _ode_form)
            integ.t_bound = float(t1)
            integ.stats.reset()         # in place: its counting function holds it
            integ.restart(t0, y0)
    except LoopFallback:
        return python_fallback(t0, y0, t_out, why="start")
    if keep is None or keep.get("integ") is not integ:
        if not _ode_form(kind, integ, integ.loop_start()):
            return python_fallback(t0, y0, t_out, why="start")
        if keep is not None and history is None:
            keep["integ"] = integ
    if rhs_state is not None:
        crhs.load_state(rhs_state)      # its warm start at the stored step
    extra = {}
    if history is not None and history.get("kind") == kind:
        extra = integ.restore_loop_history(history)
    s0 = integ.loop_start()             # the start state, passed explicitly
    st = Statistics()
    st.nfev = integ.stats.nfev
    if history is not None and history.get("t") is not None:
        st.nfev = 0                     # the stored counts continue (exact resume)
    t_out = np.ascontiguousarray(t_out, dtype=float)
    i0 = 0
    while i0 < t_out.size and t_out[i0] <= t0:
        if on_output(float(t_out[i0]), np.array(y0, dtype=float)) is True:
            return LoopResult(2, st, t0, np.array(y0))
        i0 += 1
    stops = np.zeros((0, 3)) if stops is None else np.asarray(stops, dtype=float)
    stop_args = (np.ascontiguousarray(stops[:, 0], dtype=np.intp),
                 np.ascontiguousarray(stops[:, 1]), np.ascontiguousarray(stops[:, 2]))
    counters = ms.new_counters()
    if hist is not None:
        hist["kind"] = kind
    y_start = np.array(y0, dtype=float)
    budget = int(max_steps or 0)
    restart = None
    # (a post-step gate of the right-hand side, e.g. di's drift projection, restarts
    # the method where it projected: the same call-back)
    if on_commit is not None or getattr(crhs, "post_step", False):
        def restart(t, y):          # the driver's integ.restart after new coordinates
            try:
                integ.restart(t, y)
            except LoopFallback:
                return None         # (the loop hands (t, y) to the Python driver)
            return integ.loop_start()
    commit = {"on_commit": on_commit, "restart": restart}
    if kind == "abm":
        code, t, y, i_out, h = ms.run_abm(
            crhs, float(t0), float(t1), y_start, np.ascontiguousarray(s0["phi"]),
            np.ascontiguousarray(s0["hs"], dtype=float), s0["h"], s0["h_last"], s0["k"],
            s0["neq"], s0["phase1"], s0["kmax"], float(s0["rtol"]), float(s0["atol"]),
            s0["max_step"], np.ascontiguousarray(icls.GAMMA, dtype=float),
            np.ascontiguousarray(icls.GAMMA_STAR_ABS, dtype=float),
            t_out, i0, on_output, stats, counters, st.nfev, *stop_args, ystep=ystep,
            hist=hist, max_steps=budget, **commit)
    elif kind == "bdf":
        o = integ.opts
        code, t, y, i_out, h = ms.run_bdf(
            crhs, float(t0), float(t1), y_start, np.ascontiguousarray(s0["D"]),
            s0["k"], s0["h_abs"], s0["n_equal"], s0["max_order"], s0["maxiter"],
            s0["newton_tol"], int(o["jac_max_age"]), float(o["refactor_ratio"]),
            float(s0["rtol"]), float(s0["atol"]), s0["max_step"],
            np.ascontiguousarray(icls.GAMMA, dtype=float),
            np.ascontiguousarray(icls.ERROR_CONST, dtype=float), float(icls.MIN_FACTOR),
            float(icls.MAX_FACTOR), float(icls.KEEP_BELOW), t_out, i0, on_output, stats,
            counters, st.nfev, *stop_args,
            mass=(None if s0["mass"] is None
                  else np.ascontiguousarray(s0["mass"], dtype=float)),
            jac=jac if integ.has_jacobian else None,
            h_power=(None if s0["h_power"] is None
                     else np.ascontiguousarray(s0["h_power"], dtype=float)),
            newton_system=s0["newton_system"], ystep=ystep, hist=hist, **extra,
            max_steps=budget, **commit)
    elif kind == "theta":
        o = integ.opts
        code, t, y, i_out, h = ms.run_theta(
            crhs, float(t0), float(t1), y_start, np.array(s0["f"], dtype=float),
            s0["t_start"], s0["i"], s0["h"], float(icls.theta),
            int(icls.order), icls.END_DERIVATIVE == "evaluated", int(o["newton_maxiter"]),
            float(o["newton_rtol"]), float(o["newton_atol"]), t_out, i0, on_output, stats,
            counters, st.nfev, *stop_args, ystep=ystep, hist=hist, **extra, max_steps=budget,
            **commit)
    elif kind == "genalpha" and s0.get("variable"):
        o = integ.opts
        a_m, a_f, g, b = s0["params"]
        code, t, y, i_out, h = ms.run_genalpha_var(
            crhs, float(t0), float(t1), y_start, int(s0["positions"]),
            np.array(s0["acc"], dtype=float), np.array(s0["a"], dtype=float),
            np.array(s0["f"], dtype=float), s0["h_abs"], s0["hprev"], a_m, a_f, g, b,
            int(o["newton_maxiter"]), float(s0["newton_rtol"]), float(s0["rtol"]),
            float(s0["atol"]), s0["max_step"], int(o["jac_max_age"] or 0),
            t_out, i0, on_output, stats, counters, st.nfev, *stop_args, ystep=ystep,
            hist=hist, **extra, max_steps=budget, **commit,
            **({} if not getattr(ms, "GENALPHA_VAR_DAE", False) else dict(
                multipliers=int(s0["multipliers"]), newton_atol=float(s0["newton_atol"]),
                mass=np.ascontiguousarray(s0["mass"], dtype=float),
                jac=jac if integ.has_jacobian else None,
                jacobian_update=o["jacobian_update"])))
    elif kind == "genalpha":
        o = integ.opts
        a_m, a_f, g, b = s0["params"]
        code, t, y, i_out, h = ms.run_genalpha(
            crhs, float(t0), float(t1), y_start, int(s0["positions"]),
            np.array(s0["acc"], dtype=float), np.array(s0["a"], dtype=float),
            np.array(s0["f"], dtype=float), s0["t_start"], s0["i"], s0["h"], a_m, a_f, g, b,
            int(o["newton_maxiter"]), float(s0["newton_rtol"]), int(o["jac_max_age"] or 0),
            t_out, i0, on_output, stats, counters, st.nfev, *stop_args, ystep=ystep,
            hist=hist, **extra, max_steps=budget, **commit,
            multipliers=int(s0["multipliers"]), newton_atol=float(s0["newton_atol"]),
            mass=np.ascontiguousarray(s0["mass"], dtype=float),
            jac=jac if integ.has_jacobian else None,
            jacobian_update=o["jacobian_update"])
    elif kind == "sdirk":
        code, t, y, i_out, h = ms.run_sdirk(
            crhs, float(t0), float(t1), y_start, np.array(s0["yp"], dtype=float),
            s0["h_abs"], s0["maxiter"], s0["newton_tol"], float(s0["rtol"]),
            float(s0["atol"]), s0["max_step"], np.ascontiguousarray(icls.A, dtype=float),
            np.ascontiguousarray(icls.C, dtype=float),
            np.ascontiguousarray(icls.B - icls.B_HAT, dtype=float), float(icls.GAMMA),
            float(icls.MIN_FACTOR), float(icls.MAX_FACTOR), float(icls.KEEP_BELOW),
            t_out, i0, on_output, stats, counters, st.nfev, *stop_args,
            mass=(None if s0["mass"] is None
                  else np.ascontiguousarray(s0["mass"], dtype=float)),
            jac=jac if integ.has_jacobian else None, ystep=ystep, hist=hist, **extra,
            max_steps=budget, **commit)
    elif kind == "radau":
        if history is None or history.get("t") is None:   # the start-up's Jacobian
            counters[2] += integ.stats.nfev_jac
            counters[3] += integ.stats.njev
        code, t, y, i_out, h = ms.run_radau(
            crhs, float(t0), float(t1), y_start, s0,
            np.ascontiguousarray(icls.T, dtype=float),
            np.ascontiguousarray(icls.TI, dtype=float),
            np.ascontiguousarray(icls.TI[1] + 1j * icls.TI[2]),
            np.ascontiguousarray(icls.P, dtype=float),
            np.ascontiguousarray(icls.C, dtype=float),
            np.ascontiguousarray(icls.E, dtype=float), float(icls.GAMMA), complex(icls.MU),
            float(icls.MIN_FACTOR), float(icls.MAX_FACTOR), float(icls.KEEP_BELOW),
            t_out, i0, on_output, stats, counters, st.nfev, *stop_args,
            jac=jac, ystep=ystep, hist=hist, **extra, max_steps=budget, **commit)
    elif kind == "fixedgrid":
        code, t, y, i_out, h = ms.run_fixedgrid(
            crhs, float(t0), float(t1), y_start, str(s0["method"]), s0, int(s0["order"]),
            np.ascontiguousarray(s0["beta"], dtype=float),
            np.ascontiguousarray(s0["corr"], dtype=float), int(s0["positions"]), t_out, i0,
            on_output, stats, counters, st.nfev, *stop_args, ystep=ystep, hist=hist,
            **extra, max_steps=budget, **commit,
            **({"maxiter": int(s0["maxiter"]), "newton_rtol": float(s0["newton_rtol"]),
                "newton_atol": float(s0["newton_atol"])} if s0["method"] == "am" else {}))
    elif kind == "lie":
        code, t, y, i_out, h = ms.run_lie(
            crhs, float(t0), float(t1), y_start, s0,
            np.ascontiguousarray(np.ravel(s0["quaternions"]), dtype=np.intp),
            bool(s0["body"]), t_out, i0, on_output, stats, counters, st.nfev, *stop_args,
            ystep=ystep, hist=hist, max_steps=budget, **commit)
    else:
        raise ValueError(f"no compiled multistep loop '{kind}'")
    code = LoopStatus(code)
    if code is LoopStatus.STOPPED and keep is not None and keep.get("discard"):
        return LoopResult(2, st, t, y)  # (a result its caller drops: ``stats`` only)
    _statistics(st, stats, counters)
    if code is LoopStatus.DONE:
        return LoopResult(0, st, t, y)
    if code is LoopStatus.STOPPED:
        return LoopResult(2, st, t, y)
    if code is LoopStatus.BUDGET:
        raise budget_error(budget, t, t0, t_out, i_out, h)
    if code is LoopStatus.STEP_TOO_SMALL:
        raise step_too_small(h, t, remaining=kind in ("theta", "fixedgrid", "lie") or (
            kind == "genalpha" and not s0.get("variable")))
    # EVALUATION_FAILED (or, for 'theta', Newton failed with a fresh Jacobian), or
    # STOP_CONDITION (met in the next step): the Python driver
    # takes over from the last accepted step (its multistep history starts again at
    # order 1) and raises the named error, or locates the stop
    res = python_fallback(t, y, t_out[i_out:], why=code.name.lower())
    rest = res.stats
    for k in ("nsteps", "nrejected", "nfev") + _COUNTED:
        setattr(rest, k, getattr(rest, k) + getattr(st, k))
    return res
