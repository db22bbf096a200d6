"""mbcore benchmarks: one command, JSON on stdout.

    python benchmarks/run.py [--quick] [--repeat N]

Each case is measured on the compiled path and on the NumPy reference path in the
same run; we report the median of ``repeat`` timings (the machines are shared and
noisy) and the ratio numpy/compiled.  Cases:

* ``fourbar_evaluation``: one kinematic evaluation of the KAP four-bar
  (Nikravesh (1988), §5.2.1) = time functions + phi + Jacobian + nu + gamma at a state.
* ``fourbar_newton_iteration``: phi + Jacobian + LU factor + solve.
* ``fourbar_kinematic_analysis``: a whole kinematic analysis, 1000 output times,
  in-memory results (output steps per second).
* ``spatial_slider_crank_*`` (``--only spatial``): the spatial slider-crank
  (an invented end-to-end case), one evaluation and whole kinematic analyses.
* ``multistep_fourbar_*`` (``--only multistep``): abm, bdf, implicit_euler and
  trapezoid on the compiled loop, the fixed-grid textbook methods rk2, ab, abm4,
  taylor2, verlet and am (``_step0.001``), and the GGL and stiff DAE forms with bdf
  (``_ggl_``, ``_stiff_``) against the Python driver and the NumPy path,
  four-bar, 10 s; ``multistep_stiff_chain10_stiff_*``: the stiff spring chain of
  ``force_jacobians`` with the stiff form.
* ``heavy_top_*``, ``spatial_chain_*`` (``--only spatial_dynamics``): the heavy top on
  its steady precession (seconds per simulated second at a precession
  error, compiled vs NumPy right-hand side) and spatial chains of N = 10 ... 10000
  bodies on spherical joints (cost per right-hand side and per simulated second
  with the fitted exponent in N).
* ``startup_first_run*``, ``startup_first_dynamic_run*``, ``pendulum_rows_*``
  (``--only startup_rows``): the extra cost of the first ``mbcore.run`` in a fresh
  interpreter (four-bar, kinematic; planar and spatial slider-crank, dynamic) and
  the per-row cost of a 1 m pendulum, 10 s with 1001 output rows (batched rows vs
  the row-by-row path in the same process).
* ``joint_coordinates_chain_*`` (``--only joint_coordinates``): planar chains of N =
  10 ... 10000 links of 0.1 m, 1 kg slender bars — one right-hand side of the joint
  coordinates vs the Cartesian DI (exponent in N) and 1 s runs at a tip error <= 1e-6
  m (s per simulated s of the integration, evaluations, errors).
* ``a02_penalty_*`` (``--only penalty``): IFToMM A02, the N-four-bar (N = 40) through
  its flat singular configurations with the compiled penalty formulation: 20 s wall
  time at the B0 error (target: <= 0.5 s at <= 1e-3 m), one right-hand side and
  one projection against the NumPy reference path.
* ``force_jacobians_*`` (``--only force_jacobians``): the stiff spring chain
  with ``stiff`` and ``ggl`` on bdf, Jacobian cost and wall time before (forward
  differences of the whole force vector / rhs) and after (analytic force Jacobians),
  and ``System.force_jacobians`` compiled vs NumPy.
* ``compiled_plugin_tier_overhead``, ``compiled_plugin_tier_constraint_overhead``
  (``--only overheads``): the per-call cost of a compiled-tier force group
  and the per-stage cost of a compiled-tier constraint group (kernel capsules,
  ``c_kernel``) above the built-in group, and that models using them keep the
  compiled loop.
* ``dijac_*`` (``--only dijac``): the semi-analytic DI/CS Jacobian of the
  compiled bdf / θ loops against forward differences (stiff spring chain, four-bar;
  wall time before/after and the cost of one Jacobian).
* ``modes_fourbar_*`` (``--only modes``): ``mbcore.linearize`` of
  examples/fourbar_spring_modes.yaml (equilibrium, linearisation, modes) on a
  compiled System, analytic and numeric, compiled vs NumPy kernels, and the whole
  ``mbcore modes`` command in a fresh interpreter.
* ``sweep_fourbar_overhead`` (``--only sweep``): the overhead per case of
  ``mbcore.sweep`` over a plain loop of ``mbcore.run`` (both in-process), the sweep
  on 2 local processes and a resume that skips every case.
* ``simulation_fourbar_*`` (``--only simulation``): ``Simulation.advance_to``
  in a 1 kHz loop (four-bar, rk4 and dopri5): µs per macro step with unchanged
  inputs and with a torque changed every step, against ``mbcore.run`` per row.
* ``simulation_slider_*`` (``--only simulation``): the same loop on the planar
  slider-crank with genalpha (step 1 ms) and bdf: compiled loop against the Python
  driver (``loop: python``), ms per 1000 macro steps, medians of 3.
* ``*_output_rows`` (``--only output_rows``): the cost of one output row with every
  channel recorded on the compiled loop (platform, heavy top, spatial slider-crank),
  blocks of rows (compiled and Python per-row evaluation) against the row-by-row
  reference, and per channel.
* ``platform_streaming_memory`` (``--only memory``, only when named: minutes): peak
  RSS of ``mbcore run examples/platform.yaml -o FILE`` with every channel at 10⁴,
  10⁵ and 10⁶ rows (``--quick``: 10⁴, 10⁵), benchmarks/memory.py.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import mbcore
from mbcore.solve.linalg import dense_lu

ROOT = Path(__file__).resolve().parents[1]


sys.path.insert(0, str(ROOT / "benchmarks"))
from models import median_time as _time  # noqa: E402  (one timing helper)
from memory import bench_memory  # noqa: E402  (the memory group: benchmarks/memory.py)


def _ab_time(fa, fb, repeat: int, clock=time.perf_counter) -> tuple[float, float, float]:
    """Interleaved A/B timing (a, b, a, b, ...): medians of both and the median of
    the paired differences b - a (less sensitive to the machine's load drifting
    than two separate batches).  ``clock=time.thread_time``: CPU time of this
    thread (the time the shared machine gives to other processes not counted)."""
    fa()
    fb()
    ta, tb = [], []
    for _ in range(repeat):
        t0 = clock()
        fa()
        t1 = clock()
        fb()
        t2 = clock()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return (statistics.median(ta), statistics.median(tb),
            statistics.median(b - a for a, b in zip(ta, tb)))


def _function_reset(s):
    """A call that makes System ``s`` re-evaluate its time functions at the next stage
    (``s.data.invalidate``; a checkout before the System's model/data split: its
    ``_ft``)."""
    data = getattr(s, "data", None)
    if data is not None:
        return data.invalidate

    def reset():
        s._ft = None
    return reset


def _evaluation(s, q, qd, t):
    """One kinematic evaluation of System ``s``: time functions + phi + Jacobian +
    nu + gamma at (q, qd, t)."""
    reset = _function_reset(s)

    def f():
        reset()               # force the time functions to be re-evaluated
        s.phi(q, t)
        s.jacobian(q, t)
        s.nu(q, t)
        s.gamma(q, qd, t)
    return f


def bench_fourbar(repeat: int, quick: bool) -> dict:
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_kap.yaml")
    out: dict = {}
    systems = {k: model.compile(kernels=k) for k in ("compiled", "numpy")}
    res = mbcore.run(model, kernels="compiled")
    q, qd = res["q"][5].copy(), res["qd"][5].copy()

    def evaluation(s):
        return _evaluation(s, q, qd, 0.3)

    def newton(s):
        lu = dense_lu(s.n, s.backend)
        b = np.empty(s.n)

        reset = _function_reset(s)

        def f():
            reset()
            b[:] = s.phi(q, 0.3)
            s.jacobian(q, 0.3)
            lu.factor(s._jdata)
            lu.solve(b)
        return f

    n_eval = 2000 if quick else 20000
    for case, make, number in (("fourbar_evaluation", evaluation, n_eval),
                               ("fourbar_newton_iteration", newton, n_eval)):
        tc = _time(make(systems["compiled"]), number, repeat)
        tn = _time(make(systems["numpy"]), max(number // 20, 50), repeat)
        out[case] = {"compiled_per_s": 1.0 / tc, "numpy_per_s": 1.0 / tn,
                     "compiled_us": tc * 1e6, "numpy_us": tn * 1e6, "ratio": tn / tc}

    steps = 200 if quick else 1000
    settings = {"t_end": 1.0, "output_step": 1.0 / steps}
    tc = _time(lambda: mbcore.run(model, settings=settings, kernels="compiled"), 1, repeat)
    tn = _time(lambda: mbcore.run(model, settings=settings, kernels="numpy"), 1, repeat)
    out["fourbar_kinematic_analysis"] = {
        "output_steps": steps + 1, "compiled_steps_per_s": (steps + 1) / tc,
        "numpy_steps_per_s": (steps + 1) / tn, "ratio": tn / tc}
    return out


def bench_kinematics(repeat: int, quick: bool) -> dict:
    """Kinematic analysis output steps per second, compiled vs NumPy: slider-crank
    (Nikravesh (1988), §5.2.2), Peaucellier-Lipkin (DADS-2D kinematics report, §6.2), link-gear multiplier (DADS-2D kinematics report, §6.3)."""
    out = {}
    ex = ROOT / "examples"
    cases = {
        "slider_crank": (mbcore.Model.from_file(ex / "slider_crank.yaml"),
                         {"t_end": 5.3, "output_step": 0.1 if quick else 0.001}),
        "peaucellier": (mbcore.Model.from_file(ex / "peaucellier_002.yaml"),
                        {"t_end": 10.0, "output_step": 0.1 if quick else 0.001}),
        "link_gear_multiplier": (mbcore.Model.from_file(ex / "link_gear_multiplier.yaml"),
                                 {"t_end": 10.0, "output_step": 0.1 if quick else 0.001}),
    }
    for name, (model, settings) in cases.items():
        # thousands of output times: the steady throughput, not the set-up, is measured
        steps = int(round(settings["t_end"] / settings["output_step"])) + 1
        tc = _time(lambda: mbcore.run(model, settings=settings, kernels="compiled"), 1, repeat)
        tn = _time(lambda: mbcore.run(model, settings=settings, kernels="numpy"), 1,
                   max(3, repeat // 2))
        out[f"{name}_kinematic_analysis"] = {
            "output_steps": steps, "compiled_steps_per_s": steps / tc,
            "numpy_steps_per_s": steps / tn, "ratio": tn / tc}
    return out


def bench_spatial(repeat: int, quick: bool) -> dict:
    """The spatial slider-crank (revolute, spherical, universal
    and translational joints, the tracked rotation driver, 3 Euler-parameter
    bodies, n = m = 21), compiled kernels (ext/plugins/_spatial_constraints.pyx, KinematicStepper) vs
    the NumPy reference path in the same run:

    * ``spatial_slider_crank_evaluation``: time functions + phi + Jacobian + nu +
      gamma at a state;
    * ``spatial_slider_crank_kinematic_analysis``: the example as it is, 3 s
      (the crank turns past 2 pi), output steps per second; the named points and
      the angular channel are recorded at every step (compiled kernels, NumPy
      reference on the NumPy path);
    * ``spatial_slider_crank_no_points_kinematic_analysis``: the same without the
      named points (what the point channel costs the compiled path).
    """
    model = mbcore.Model.from_file(ROOT / "examples" / "spatial_slider_crank.yaml")
    out: dict = {}
    systems = {k: model.compile(kernels=k) for k in ("compiled", "numpy")}
    res = mbcore.run(model, kernels="compiled", settings={"t_end": 0.5})
    q, qd = res["q"][37].copy(), res["qd"][37].copy()

    def evaluation(s):
        return _evaluation(s, q, qd, 0.37)

    n_eval = 2000 if quick else 20000
    tc = _time(evaluation(systems["compiled"]), n_eval, repeat)
    tn = _time(evaluation(systems["numpy"]), max(n_eval // 200, 10), repeat)
    out["spatial_slider_crank_evaluation"] = {
        "compiled_per_s": 1.0 / tc, "numpy_per_s": 1.0 / tn, "compiled_us": tc * 1e6,
        "numpy_us": tn * 1e6, "ratio": tn / tc}

    data = model.to_dict()
    data.pop("points", None)
    no_points = mbcore.Model.from_dict(data)
    step = 0.01 if quick else 0.005
    settings = {"t_end": 3.0, "output_step": step}
    steps = int(round(3.0 / step)) + 1
    for name, mdl in (("spatial_slider_crank", model),
                      ("spatial_slider_crank_no_points", no_points)):
        tc = _time(lambda: mbcore.run(mdl, settings=settings, kernels="compiled"), 1, repeat)
        tn = _time(lambda: mbcore.run(mdl, settings=settings, kernels="numpy"), 1,
                   max(3, repeat // 2))
        out[f"{name}_kinematic_analysis"] = {
            "output_steps": steps, "compiled_steps_per_s": steps / tc,
            "numpy_steps_per_s": steps / tn, "compiled_us_per_step": tc / steps * 1e6,
            "numpy_us_per_step": tn / steps * 1e6, "ratio": tn / tc}
    return out


def _pendulum() -> "mbcore.Model":
    pend = mbcore.Model("pendulum")
    pend.set_gravity(0, -9.81)
    pend.add_body("rod", mass=1.0, inertia=1.0 / 12, position=(0.5, 0.0))
    pend.add_joint("revolute", "pivot", body_i="ground", body_j="rod", point_i=(0, 0),
                   point_j=(-0.5, 0))
    pend.settings = {"analysis": "dynamic"}
    return pend


def _peak_memory(fn) -> float:
    """Peak Python-heap allocation (MiB) during one call (tracemalloc: NumPy
    buffers included, the interpreter's baseline excluded)."""
    import tracemalloc
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


def _drift(res) -> float:
    """max |balance - balance(0)| / max(T): the energy error of a run (the balance
    T + V - W_nc is constant for exact solutions)."""
    bal = res["energy/balance"]
    scale = float(np.max(np.abs(res["energy/kinetic"]))) or 1.0
    return float(np.max(np.abs(bal - bal[0])) / scale)


def bench_rhs(repeat: int, quick: bool) -> dict:
    """One right-hand-side evaluation of the dynamic analysis (time functions,
    Jacobian, gamma, forces, Schur solve, work rate): compiled kernel as the
    compiled loop calls it, the same through one Python call, and the NumPy path."""
    from mbcore.plugins import registry
    out = {}
    ex = ROOT / "examples"
    models = {"pendulum": _pendulum(), "fourbar": mbcore.Model.from_file(ex / "fourbar_dap.yaml"),
              "slider_crank": mbcore.Model.from_file(ex / "slider_crank_dynamic.yaml")}
    for name, model in models.items():
        sc = model.compile(kernels="compiled")
        sn = model.compile(kernels="numpy")
        fc = registry().get("formulation", "di")(sc, {})
        fn = registry().get("formulation", "di")(sn, {})
        st = sc.initial_state(0.0)
        y = np.concatenate([st.q, st.qd, [0.0]])
        number = 20000 if quick else 200000
        tk = statistics.median(fc.compiled.timeit(0.1, y, number) for _ in range(repeat))
        tc = _time(lambda: fc.rhs(0.1, y[:-1]), number // 20, repeat)
        tn = _time(lambda: fn.rhs(0.1, y[:-1]), max(number // 2000, 50), repeat)
        out[f"{name}_rhs"] = {"n": sc.n, "m": sc.m, "compiled_kernel_us": tk * 1e6,
                              "compiled_python_call_us": tc * 1e6, "numpy_us": tn * 1e6,
                              "ratio": tn / tk, "ratio_python_call": tn / tc}
    return out


def dynamic_cases(quick: bool) -> dict:
    """name -> (model, settings, accuracy statement).  Tolerances are loose ones that
    keep the stated accuracy (the energy drift is measured and reported).  Each small
    model runs with every channel recorded every 0.1 s (``*_all_channels``) and with
    ``record: q, qd, energy`` (the lean long-run configuration)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import chain, stiff_chain
    ex = ROOT / "examples"
    t_end = 2.0 if quick else 10.0
    common = {"formulation": "di", "integrator": "dopri5", "output_step": 0.1,
              "rtol": 1e-3, "atol": 1e-5}
    lean = {"record": "q, qd, energy"}
    small = {"pendulum": _pendulum(), "fourbar": mbcore.Model.from_file(ex / "fourbar_dap.yaml"),
             "slider_crank": mbcore.Model.from_file(ex / "slider_crank_dynamic.yaml")}
    cases = {}
    for name, model in small.items():
        cases[name] = (model, {**common, **lean, "t_end": t_end}, "energy drift <= 5e-6")
        cases[f"{name}_all_channels"] = (model, {**common, "t_end": t_end},
                                         "energy drift <= 5e-6")
    for n in ((10, 100) if quick else (10, 100, 1000, 10000)):
        te = 1.0 if n <= 1000 else 0.1
        cases[f"chain_{n}"] = (chain(n), {**common, **lean, "t_end": te,
                                          "output_step": te / 10}, "energy drift <= 1e-5")
    cases["stiff_chain_10"] = (stiff_chain(10), {**common, **lean,
                                                 "t_end": 1.0 if not quick else 0.2,
                                                 "integrator": "bdf", "output_step": 0.01},
                               "bdf, rtol 1e-3")
    return cases


def bench_dynamics(repeat: int, quick: bool, numpy_limit: float = 20.0) -> dict:
    """Wall time per simulated second of whole dynamic analyses (mbcore.run, in-memory
    results), compiled vs NumPy path in the same run; right-hand-side evaluations,
    evaluations per second, energy drift and peak memory (compiled path).  The NumPy
    path is skipped where one run would exceed ``numpy_limit`` seconds
    (estimated from the compiled run and the per-evaluation ratio)."""
    out = {}
    for name, (model, settings, accuracy) in dynamic_cases(quick).items():
        res = {}

        def go(k):
            res[k] = mbcore.run(model, settings=settings, kernels=k)
        t_end = settings["t_end"]
        t0 = time.perf_counter()
        go("compiled")
        once = time.perf_counter() - t0
        reps = max(1, min(repeat, int(30.0 / max(once, 1e-3))))
        tc = _time(lambda: go("compiled"), 1, reps) if reps > 1 else once
        rc = res["compiled"]
        nfev = int(rc.stats.get("integrator_nfev", 0))
        row = {"simulated_s": t_end, "accuracy": accuracy, "rtol": settings["rtol"],
               "integrator": settings["integrator"], "output_step": settings["output_step"],
               "loop": rc.stats.get("loop"), "rhs_evaluations": nfev,
               "compiled_s_per_simulated_s": tc / t_end,
               "compiled_evaluations_per_s": nfev / tc,
               "energy_drift_rel": _drift(rc),
               "peak_memory_mib": _peak_memory(lambda: go("compiled"))}
        est = once * 150.0
        if est < numpy_limit:
            tn = _time(lambda: go("numpy"), 1, max(1, min(3, repeat // 2)))
            row.update({"numpy_s_per_simulated_s": tn / t_end, "ratio": tn / tc,
                        "numpy_energy_drift_rel": _drift(res["numpy"])})
        else:
            row["numpy"] = f"skipped (estimated > {numpy_limit:g} s)"
        out[f"{name}_dynamics"] = row
    chains = sorted((int(k.split("_")[1]), v) for k, v in out.items()
                    if k.startswith("chain_") and k.endswith("_dynamics"))
    if len(chains) > 1:
        ns = [n for n, _ in chains]
        out["chain_scaling"] = {
            "n": ns,
            "s_per_simulated_s_exponent": float(np.polyfit(
                np.log(ns), np.log([v["compiled_s_per_simulated_s"] for _, v in chains]), 1)[0]),
            "rhs_evaluations_exponent": float(np.polyfit(
                np.log(ns), np.log([v["rhs_evaluations"] / v["simulated_s"]
                                    for _, v in chains]), 1)[0]),
            "note": "time per simulated second grows faster than the per-evaluation "
                    "cost (chain_eom) because the adaptive step shrinks with N"}
    return out


def bench_integrators(repeat: int, quick: bool) -> dict:
    """Right-hand-side evaluations and wall time per simulated second of every
    integrator on the four-bar (DI, 2 s) and the stiff chain, compiled vs NumPy."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import stiff_chain
    out = {}
    fourbar = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")
    stiff = stiff_chain(5)
    cases = [("fourbar", fourbar, 0.5 if quick else 2.0,
              ["rk4", "heun", "bs23", "dopri5", "abm", "bdf", "implicit_euler", "trapezoid"]),
             ("stiff_chain_5", stiff, 0.05 if quick else 0.2,
              ["rk4", "dopri5", "bs23", "abm", "bdf", "implicit_euler"])]
    for name, model, t_end, methods in cases:
        for meth in methods:
            st = {"t_end": t_end, "output_step": t_end / 10, "integrator": meth,
                  "formulation": "di", "rtol": 1e-6, "atol": 1e-8, "step": 1e-3 if
                  name == "fourbar" else 2e-5}
            res = {}

            def go(k):
                res[k] = mbcore.run(model, settings=st, kernels=k)
            try:
                tc = _time(lambda: go("compiled"), 1, max(1, repeat // 3))
                tn = _time(lambda: go("numpy"), 1, 1)
            except Exception as exc:          # report, do not abort the suite
                out[f"{name}_{meth}"] = {"error": str(exc)[:200]}
                continue
            rc = res["compiled"]
            out[f"{name}_{meth}"] = {
                "simulated_s": t_end, "rhs_evaluations": int(rc.stats.get("integrator_nfev", 0)),
                "steps": int(rc.stats.get("integrator_nsteps", 0)), "loop": rc.stats.get("loop"),
                "compiled_s_per_simulated_s": tc / t_end, "numpy_s_per_simulated_s": tn / t_end,
                "ratio": tn / tc, "energy_drift_rel": _drift(rc)}
    return out


def _three_loops(model, st, row, t_end, repeat, quick) -> None:
    """Fill ``row`` with the run of ``st`` on the compiled loop, the Python driver
    (``loop: python``) and the NumPy path (``kernels: numpy``), all in this run:
    medians per simulated second, evaluations, loops and the ratios."""
    for label, extra, reps in (("compiled", {}, max(3, repeat)),
                               ("python_loop", {"loop": "python"}, 1 if quick else 3),
                               ("numpy", {"kernels": "numpy"}, 1)):
        walls = []
        for _ in range(reps):
            r = mbcore.run(model, settings={**st, **extra})
            walls.append(float(r.stats["wall_time"]))
        row[f"{label}_s_per_simulated_s"] = statistics.median(walls) / t_end
        row[f"{label}_nfev"] = int(r.stats["integrator_nfev"])
        row[f"{label}_loop"] = r.stats["loop"]
    row["nfev_equal"] = row["compiled_nfev"] == row["python_loop_nfev"]
    row["ratio_numpy"] = row["numpy_s_per_simulated_s"] / row["compiled_s_per_simulated_s"]
    row["ratio_python_loop"] = (row["python_loop_s_per_simulated_s"]
                                / row["compiled_s_per_simulated_s"])


def bench_multistep(repeat: int, quick: bool) -> dict:
    """The multistep methods on the compiled loop
    (ext/_steploop.pyx).  The four-bar (fourbar_dap, DI, 10 s, 10 output rows as in
    ``bench_integrators``: the loops, not the rows, are measured here),
    abm and bdf at rtol 1e-6 and 1e-8 (atol = rtol/100), implicit_euler and
    trapezoid with fixed steps 1e-3 and 2.5e-4, the fixed-grid textbook methods rk2,
    ab, abm4, taylor2, verlet and am with step 1e-3: wall time per simulated
    second (``stats['wall_time']``: integration and output rows; median of repeats)
    of the compiled loop, of the Python driver on the same compiled right-hand side
    (``loop: python``) and of the NumPy path (``kernels: numpy``, the Python driver),
    in the same run, with their evaluations (the two loops on the compiled right-hand
    side take the same steps: ``nfev_equal``).  ``multistep_fourbar_ggl_*``: the GGL
    DAE form with bdf (``mbplugins._ext._dae.CompiledGGL`` on ``run_bdf`` with the ``mass``
    option and the formulation's Jacobian through the analysis' call-back), rtol 1e-6
    and 1e-8; ``jacobian_share``: the fraction of the compiled run spent in that
    call-back (Python, the formulation's ``jacobian``).  ``multistep_fourbar_stiff_*``:
    the stiff (index-3) form the same way (``mbplugins._ext._dae.CompiledStiff``, plus ``h_power``
    and the reduced Newton hook ``_stiffnewton.ReducedNewtonC`` called back from C;
    ``newton_hook_share``: the fraction of the compiled run in the hook's
    update/matrix/rhs/solution, through a forwarding proxy;
    ``compiled_numpy_hook_s_per_simulated_s``: the compiled loop with the NumPy hook
    ``ReducedNewton`` instead), and
    ``multistep_stiff_chain10_stiff_rtol0.001`` the spring chain of
    :func:`bench_force_jacobians` (rtol 1e-3, 1 s, output every 0.01 s)."""
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")
    t_end = 2.0 if quick else 10.0
    for integ in ("abm", "bdf"):                         # imports, plugins
        mbcore.run(model, settings={"t_end": 0.1, "integrator": integ, "formulation": "di"})
    out = {}
    for integ in ("abm", "bdf"):
        for rtol in (1e-6, 1e-8):
            st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 10,
                  "integrator": integ, "formulation": "di", "rtol": rtol, "atol": 1e-2 * rtol}
            row = {"simulated_s": t_end, "integrator": integ, "rtol": rtol}
            _three_loops(model, st, row, t_end, repeat, quick)
            out[f"multistep_fourbar_{integ}_rtol{rtol:g}"] = row
    # the implicit one-step θ-methods (run_theta): fixed steps 1e-3 and 2.5e-4
    for integ in ("implicit_euler", "trapezoid"):
        mbcore.run(model, settings={"t_end": 0.1, "integrator": integ, "formulation": "di",
                                    "step": 1e-3})
        for step in (1e-3, 2.5e-4):
            st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 10,
                  "integrator": integ, "formulation": "di", "step": step}
            row = {"simulated_s": t_end, "integrator": integ, "step": step}
            _three_loops(model, st, row, t_end, repeat, quick)
            out[f"multistep_fourbar_{integ}_step{step:g}"] = row
    # the fixed-grid textbook methods: rk2 on run_rk (its per-run tableau), ab, abm4,
    # taylor2, verlet and am on run_fixedgrid; fixed step 1e-3
    for integ in ("rk2", "ab", "abm4", "taylor2", "verlet", "am"):
        st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 10,
              "integrator": integ, "formulation": "di", "step": 1e-3}
        mbcore.run(model, settings={**st, "t_end": 0.1})          # warm-up
        row = {"simulated_s": t_end, "integrator": integ, "step": 1e-3}
        _three_loops(model, st, row, t_end, repeat, quick)
        out[f"multistep_fourbar_{integ}_step0.001"] = row
    # the DAE forms on the compiled bdf loop: GGL (index 2) and stiff (index 3, its
    # reduced Newton hook called back from C); their Jacobian comes from the
    # formulation (a Python call-back), the stiff form's Newton system from its hook
    from mbplugins.analyses.dynamic import _Run
    from mbplugins.formulations.stiff import ReducedNewton, Stiff
    from models import stiff_chain
    chain = stiff_chain(10)
    chain_end = 0.2 if quick else 1.0
    cases = [(f"multistep_fourbar_{form}_rtol{rtol:g}", model, form, t_end,
              {"output_step": t_end / 10, "rtol": rtol, "atol": 1e-2 * rtol})
             for form in ("ggl", "stiff") for rtol in (1e-6, 1e-8)]
    # the spring chain of bench_force_jacobians (k = 1e6, n = 30, no constraints)
    cases.append(("multistep_stiff_chain10_stiff_rtol0.001", chain, "stiff", chain_end,
                  {"output_step": 0.01, "rtol": 1e-3, "atol": 1e-5,
                   "record": "q, qd, energy"}))
    for key, mdl, form, t_sim, extra_st in cases:
        st = {"analysis": "dynamic", "t_end": t_sim, "integrator": "bdf",
              "formulation": form, **extra_st}
        row = {"simulated_s": t_sim, "integrator": "bdf", "formulation": form,
               "rtol": extra_st["rtol"]}
        mbcore.run(mdl, settings={**st, "t_end": 0.1 * t_sim})      # warm-up
        for label, extra, reps in (("compiled", {}, max(3, repeat)),
                                   ("python_loop", {"loop": "python"}, 1 if quick else 3),
                                   ("numpy", {"kernels": "numpy"}, 1)):
            walls = []
            for _ in range(reps):
                r = mbcore.run(mdl, settings={**st, **extra})
                walls.append(float(r.stats["wall_time"]))
            row[f"{label}_s_per_simulated_s"] = statistics.median(walls) / t_sim
            row[f"{label}_nfev"] = int(r.stats["integrator_nfev"])
            row[f"{label}_njev"] = int(r.stats["integrator_njev"])
            row[f"{label}_nlu"] = int(r.stats["integrator_nlu"])
            row[f"{label}_loop"] = r.stats["loop"]
        row["nfev_equal"] = row["compiled_nfev"] == row["python_loop_nfev"]
        row["ratio_numpy"] = (row["numpy_s_per_simulated_s"]
                              / row["compiled_s_per_simulated_s"])
        row["ratio_python_loop"] = (row["python_loop_s_per_simulated_s"]
                                    / row["compiled_s_per_simulated_s"])
        # shares of the compiled run: the Jacobian call-back and the Newton hook
        # (ReducedNewtonC, called back from C: timed through a forwarding proxy)
        spent = {"jacobian": 0.0, "hook": 0.0}

        def timed(orig, what):
            def f(*args):
                t0 = time.perf_counter()
                try:
                    return orig(*args)
                finally:
                    spent[what] += time.perf_counter() - t0
            return f

        class Timed:
            def __init__(self, hook):
                for name in ("update", "matrix", "rhs", "solution"):
                    setattr(self, name, timed(getattr(hook, name), "hook"))
        orig_jac, orig_hook = _Run.dae_jacobian, Stiff._newton_system
        _Run.dae_jacobian = timed(orig_jac, "jacobian")
        Stiff._newton_system = lambda self: Timed(orig_hook(self))
        try:
            r = mbcore.run(mdl, settings=st)
        finally:
            _Run.dae_jacobian, Stiff._newton_system = orig_jac, orig_hook
        row["jacobian_share"] = spent["jacobian"] / float(r.stats["wall_time"])
        if form == "stiff":
            row["newton_hook_share"] = spent["hook"] / float(r.stats["wall_time"])
            # the compiled loop with the NumPy reference hook (ReducedNewton) instead
            Stiff._newton_system = lambda self: ReducedNewton(self.n, self.m,
                                                              self.system.jacobian_dense)
            try:
                walls = [float(mbcore.run(mdl, settings=st).stats["wall_time"])
                         for _ in range(max(3, repeat))]
            finally:
                Stiff._newton_system = orig_hook
            row["compiled_numpy_hook_s_per_simulated_s"] = statistics.median(walls) / t_sim
        out[key] = row
    return out


def bench_cp(repeat: int, quick: bool) -> dict:
    """Coordinate partitioning in C (ext/_cp.pyx) — CP vs DI
    at the same rtol on Andrews' squeezer (to 0.03 s, rtol 1e-10) and the four-bar
    (fourbar_dap, 2 s, rtol 1e-8), dopri5, both on the compiled loop; and the
    compiled CP vs its NumPy path (the Python driver, ``kernels: numpy``) in the
    same run; and the IFToMM A04 Bricard mechanism (2 s, rtol 1e-8: one redundant
    row, CompiledCP on the independent rows).  Wall = ``stats['wall_time']``
    (integration and outputs), median."""
    from accuracy_problems import bricard_model
    ex = ROOT / "examples"
    cases = {"andrews": ("andrews_squeezer.yaml", 0.03, 1e-10),
             "fourbar": ("fourbar_dap.yaml", 0.5 if quick else 2.0, 1e-8),
             "bricard": (bricard_model, 0.5 if quick else 2.0, 1e-8)}
    out = {}
    for key, (fname, t_end, rtol) in cases.items():
        model = fname() if callable(fname) else mbcore.Model.from_file(ex / fname)
        row = {"t_end": t_end, "rtol": rtol}
        for label, form, kernels in (("di", "di", "compiled"), ("cp", "cp", "compiled"),
                                     ("cp_numpy", "cp", "numpy")):
            st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 10,
                  "formulation": form, "rtol": rtol, "atol": rtol, "integrator": "dopri5",
                  "kernels": kernels}
            reps = 1 if kernels == "numpy" else max(3, repeat // 2)
            walls = []
            for _ in range(reps):
                r = mbcore.run(model, settings=st)
                walls.append(float(r.stats["wall_time"]))
            row[f"{label}_s"] = statistics.median(walls)
            row[f"{label}_nfev"] = int(r.stats["integrator_nfev"])
            row[f"{label}_loop"] = r.stats["loop"]
        row["cp_over_di"] = row["cp_s"] / row["di_s"]
        row["cp_numpy_over_compiled"] = row["cp_numpy_s"] / row["cp_s"]
        out[f"cp_{key}"] = row
    return out


def _a02_b0_error(res, ref) -> float:
    """Largest distance of point B0 (the tip of crank0) from the exact motion."""
    phi = res["q/crank0.phi"]
    x, y = ref(res.t)
    return float(np.max(np.hypot(res["q/crank0.x"] + 0.5 * np.cos(phi) - x,
                                 res["q/crank0.y"] + 0.5 * np.sin(phi) - y)))


def bench_penalty(repeat: int, quick: bool) -> dict:
    """The penalty formulation compiled: IFToMM A02, the N-four-bar with N =
    40 (81 rods, n = 243, m = 242, sparse), 20 s through 20 flat singular passages,
    dopri5, against its exact one-degree-of-freedom motion
    (``models.a02_reference``): wall time of ``mbcore.run`` (median of 3 after a
    warm-up run in the process; outputs every 0.1 s; with the process CPU time and the
    load average, the machines being shared) and the B0 error
    at the outputs, for the default settings (projections on; rtol 2e-2, and 1e-4)
    and with ``projection: false`` (rtol 2e-2: the Baumgarte terms alone hold the
    constraints).  One right-hand side and one projection of the
    compiled kernel (as the compiled loop calls them) against the NumPy reference
    path in the same run (regular state and 1e-3 rad from the flat configuration)."""
    import os
    from mbcore.plugins import registry
    from models import a02, a02_reference
    out = {}
    n_bars, t_end = 40, 20.0
    ref = a02_reference(n_bars, t_end)
    mbcore.run(a02(2, t_end=0.1))                        # imports, plugins
    cases = {"defaults": (2e-2, {}), "fast": (2e-2, {"projection": False}),
             "defaults_rtol_1e-4": (1e-4, {})}
    for name, (rtol, opts) in cases.items():
        model = a02(n_bars, t_end=t_end, rtol=rtol)
        st = {"output_step": 0.1, "record": "q, energy, violation"}
        if opts:
            st["formulation_options"] = opts
        walls, cpus = [], []
        for _ in range(1 if quick and name == "defaults_rtol_1e-4" else 3):
            t0, c0 = time.perf_counter(), time.process_time()
            res = mbcore.run(model, settings=st)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        E = res["energy"][:, 2]
        out[f"a02_penalty_{name}"] = {
            "n": res.system.n, "m": res.system.m, "simulated_s": t_end, "rtol": rtol,
            "formulation_options": opts or "defaults", "loop": res.stats["loop"],
            "wall_s": statistics.median(walls), "wall_runs_s": walls,
            "cpu_s": statistics.median(cpus),               # this process (shared machine)
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "b0_error_m": _a02_b0_error(res, ref),
            "steps": res.stats["integrator_nsteps"],
            "rhs_evaluations": res.stats["integrator_nfev"],
            "projections": res.stats.get("projections", 0),
            "max_position_violation": float(np.max(res["violation/position"])),
            "energy_drift_rel": float(np.max(np.abs(E - E[0])) / abs(E[0])),
            "target": "B0 error <= 1e-3 m in <= 0.5 s"}
    # one right-hand side and one projection: compiled kernel vs NumPy reference
    sysm = a02(n_bars).compile()
    form = registry().get("formulation", "penalty")(sysm)
    kern = form.compiled
    number = 200 if quick else 2000
    for label, theta in (("regular", 0.3), ("near_flat", 1e-3)):
        q, qd = np.zeros(sysm.n), np.zeros(sysm.n)
        c, s = np.cos(theta), np.sin(theta)
        for k in range(n_bars + 1):
            q[3 * k:3 * k + 3] = [k + 0.5 * c, 0.5 * s, theta]
            qd[3 * k:3 * k + 3] = [0.5 * s, -0.5 * c, -1.0]
        for k in range(n_bars):
            o = 3 * (n_bars + 1 + k)
            q[o:o + 3] = [k + 0.5 + c, s, 0.0]
            qd[o:o + 3] = [s, -c, 0.0]
        y = np.concatenate([q, qd, [0.0]])
        it0 = kern.multiplier_iterations
        kern.eval(0.1, y, np.zeros(2 * sysm.n + 1))
        iters = kern.multiplier_iterations - it0
        tk = statistics.median(kern.timeit(0.1, y, number) for _ in range(repeat))
        form.compiled = None
        tn = _time(lambda: form.rhs(0.1, y[:-1]), max(number // 100, 5), repeat)
        # a state off the constraints by 1e-6: one projection (positions, velocities)
        yp = y[:-1].copy()
        yp[:sysm.n] += 1e-6 * np.cos(np.arange(sysm.n))
        pn = _time(lambda: form.project(0.1, yp, count=False), max(number // 200, 3),
                   min(repeat, 3))
        form.compiled = kern
        buf = np.zeros(2 * sysm.n)
        pk = _time(lambda: kern.project(0.1, yp, buf, False), number // 10, repeat)
        out[f"a02_penalty_{label}_rhs"] = {
            "n": sysm.n, "m": sysm.m, "multiplier_iterations": iters,
            "compiled_kernel_us": tk * 1e6, "numpy_us": tn * 1e6, "ratio": tn / tk,
            "projection_compiled_us": pk * 1e6, "projection_numpy_us": pn * 1e6,
            "projection_ratio": pn / pk}
    return out


def bench_formulations(repeat: int, quick: bool) -> dict:
    """Wall time per simulated second and constraint violations of every formulation
    on the four-bar and the free slider-crank (compiled path, same run): dopri5 for
    the ODE forms, bdf for the DAE forms, rtol 1e-8."""
    ex = ROOT / "examples"
    models = {"fourbar": mbcore.Model.from_file(ex / "fourbar_dap.yaml"),
              "slider_crank": mbcore.Model.from_file(ex / "slider_crank_dynamic.yaml")}
    t_end = 1.0 if quick else 10.0
    out = {}
    for name, model in models.items():
        for form in ("di", "cs", "cp", "projection", "penalty", "ggl", "stiff"):
            st = {"t_end": t_end, "output_step": 0.1, "formulation": form, "rtol": 1e-8,
                  "atol": 1e-10, "integrator": "bdf" if form in ("ggl", "stiff") else "dopri5"}
            if form in ("ggl", "stiff") and not quick:
                st["t_end"] = 2.0              # implicit DAE methods: a shorter run
            res = {}

            def go():
                res["r"] = mbcore.run(model, settings=st)
            try:
                tc = _time(go, 1, max(1, repeat // 3))
            except Exception as exc:          # report, do not abort the suite
                out[f"{name}_{form}_formulation"] = {"error": str(exc)[:200]}
                continue
            r = res["r"]
            out[f"{name}_{form}_formulation"] = {
                "simulated_s": st["t_end"], "integrator": st["integrator"],
                "compiled_s_per_simulated_s": tc / st["t_end"],
                "rhs_evaluations": int(r.stats.get("integrator_nfev", 0)),
                "max_position_violation": float(np.max(r["violation/position"])),
                "max_velocity_violation": float(np.max(r["violation/velocity"])),
                "energy_drift_rel": _drift(r), "loop": r.stats.get("loop")}
    return out


def _precession_error(res, omega=0.4915462) -> float:
    """Largest |azimuth(t) - azimuth(0) - Omega t| of the top's centroid (rad)."""
    az = np.unwrap(np.arctan2(res["disc.y"], res["disc.x"]))
    return float(np.max(np.abs(az - az[0] - omega * res.t)))


def bench_spatial_dynamics(repeat: int, quick: bool) -> dict:
    """The heavy top (thin disc 1 kg, r = 0.1 m, tip 0.05 m from
    the centroid, tilt 30 deg, spin 200 rad/s, exact steady precession 0.4915462
    rad/s, 5 s) with several integrators and tolerances, its right-hand side compiled
    vs NumPy, and spatial chains on spherical joints."""
    from mbcore.plugins import registry
    from models import (bench_chain_eom, fit_exponent, spatial_chain,
                        spatial_chain_state)
    out = {}
    top = mbcore.Model.from_file(ROOT / "examples" / "spatial_heavy_top.yaml")
    # 100 output rows of q and qd (record: q, qd; the headline case); "_rows500":
    # every 0.01 s; "_all_channels": every channel every 0.01 s (per-row costs:
    # the performance issue)
    runs = [("dop853", 1e-6, "q, qd", 0.05), ("dop853", 1e-7, "q, qd", 0.05),
            ("dop853", 1e-8, "q, qd", 0.05), ("dopri5", 1e-7, "q, qd", 0.05),
            ("dopri5", 1e-8, "q, qd", 0.05), ("dop853", 1e-7, "q, qd", 0.01),
            ("dop853", 1e-7, None, 0.01)]
    for integ, rtol, record, ostep in runs:
        walls, res = [], None
        st = {"integrator": integ, "rtol": rtol, "atol": rtol, "output_step": ostep}
        if record:
            st["record"] = record
        for _ in range(max(3, repeat)):
            t0 = time.perf_counter()
            res = mbcore.run(top, settings=st)
            walls.append(time.perf_counter() - t0)
        tag = "" if ostep == 0.05 else ("_rows500" if record else "_all_channels")
        out[f"heavy_top_{integ}_rtol{rtol:g}{tag}"] = {
            "seconds_per_simulated_second": statistics.median(walls) / 5.0,
            "precession_error_rad": _precession_error(res),
            "relative_precession_error": _precession_error(res) / (0.4915462 * 5.0),
            "nfev": int(res.stats["integrator_nfev"]), "loop": res.stats["loop"]}
    # the angular-velocity form against DI at the same settings (same accuracy:
    # the precession error of both)
    both = {}
    for form in ("di", "di_omega"):
        st = {"formulation": form, "integrator": "dopri5", "rtol": 1e-8, "atol": 1e-8,
              "output_step": 0.05, "record": "q, qd"}
        walls = []
        for _ in range(max(3, repeat)):
            t0 = time.perf_counter()
            res = mbcore.run(top, settings=st)
            walls.append(time.perf_counter() - t0)
        both[form] = {"seconds_per_simulated_second": statistics.median(walls) / 5.0,
                      "precession_error_rad": _precession_error(res),
                      "nfev": int(res.stats["integrator_nfev"]), "loop": res.stats["loop"]}
    out["heavy_top_di_omega_vs_di"] = {
        **{f"{k}_{f}": v for f, d in both.items() for k, v in d.items()},
        "ratio": both["di_omega"]["seconds_per_simulated_second"]
        / both["di"]["seconds_per_simulated_second"],
        "target": "di_omega <= 1.5 x di at the same accuracy"}
    sc, sn = top.compile(kernels="compiled"), top.compile(kernels="numpy")
    fo = registry().get("formulation", "di_omega")(sc, {})
    fon = registry().get("formulation", "di_omega")(sn, {})
    st0 = sc.initial_state(0.0)
    yo = np.concatenate([fo.pack(st0.q, st0.qd), [0.0]])
    number = 20000 if quick else 200000
    tko = statistics.median(fo.compiled.timeit(0.1, yo, number) for _ in range(repeat))
    tno = _time(lambda: fon.rhs(0.1, yo[:-1]), 200, repeat)
    out["heavy_top_di_omega_rhs"] = {"compiled_kernel_us": tko * 1e6, "numpy_us": tno * 1e6,
                                     "ratio": tno / tko}
    fc = registry().get("formulation", "di")(sc, {})
    fn = registry().get("formulation", "di")(sn, {})
    st = sc.initial_state(0.0)
    y = np.concatenate([st.q, st.qd, [0.0]])
    number = 20000 if quick else 200000
    tk = statistics.median(fc.compiled.timeit(0.1, y, number) for _ in range(repeat))
    tn = _time(lambda: fn.rhs(0.1, y[:-1]), 200, repeat)
    out["heavy_top_rhs"] = {"compiled_kernel_us": tk * 1e6, "numpy_us": tn * 1e6,
                            "ratio": tn / tk}
    # spatial chains: one right-hand side (compiled kernel; sparse Schur above the
    # dense limit) and the Python-level solve, exponent in N
    ns = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    rhs = {"n": [], "us": [], "jacobian": []}
    for n in ns:
        s = spatial_chain(n).compile(kernels="compiled")
        f = registry().get("formulation", "di")(s, {})
        q, qd = spatial_chain_state(s)
        yy = np.concatenate([q, qd, [0.0]])
        k = max(3, int(2e5 / n))
        t_one = statistics.median(f.compiled.timeit(0.1, yy, k) for _ in range(repeat))
        rhs["n"].append(n)
        rhs["us"].append(t_one * 1e6)
        rhs["jacobian"].append("dense" if s.dense else "sparse")
    rhs["exponent"] = fit_exponent(rhs["n"], rhs["us"])
    out["spatial_chain_rhs"] = rhs
    out["spatial_chain_eom_python"] = bench_chain_eom(ns, repeat=max(3, repeat // 2),
                                                      spatial=True)
    # whole runs (compile, assembly, integration, 10 output rows) of 1 s (quick: 0.2 s);
    # the fixed cost of a run (the same run to t = 1e-4 s) and the marginal cost per
    # simulated second (the 1 s run less that fixed cost)
    sim = {"n": [], "seconds_per_simulated_second": [], "nfev": [], "compile_seconds": [],
           "us_per_evaluation_in_run": [], "setup_seconds": [],
           "marginal_seconds_per_simulated_second": []}
    t_end = 0.2 if quick else 1.0
    for n in ns[:3]:
        mdl = spatial_chain(n)
        t0 = time.perf_counter()
        mdl.compile()
        tc = time.perf_counter() - t0
        t0 = time.perf_counter()
        res = mbcore.run(mdl, settings={"t_end": t_end, "output_step": t_end / 10})
        wall = time.perf_counter() - t0
        sim["n"].append(n)
        sim["seconds_per_simulated_second"].append(wall / t_end)
        sim["nfev"].append(int(res.stats["integrator_nfev"]))
        sim["compile_seconds"].append(tc)
        sim["us_per_evaluation_in_run"].append(
            float(res.stats["wall_time"]) / max(1, sim["nfev"][-1]) * 1e6)
        mdl = spatial_chain(n)
        t0 = time.perf_counter()
        mbcore.run(mdl, settings={"t_end": 1e-4, "output_step": 1e-4})
        setup = time.perf_counter() - t0
        sim["setup_seconds"].append(setup)
        sim["marginal_seconds_per_simulated_second"].append((wall - setup) / t_end)
    sim["exponent"] = fit_exponent(sim["n"], sim["seconds_per_simulated_second"])
    out["spatial_chain_simulation"] = sim
    return out


def _chain_tip(q: np.ndarray, length: float) -> np.ndarray:
    """Free end of the last link of a :func:`models.chain` at coordinates q."""
    return np.array([q[-3] + 0.5 * length * np.cos(q[-1]),
                     q[-2] + 0.5 * length * np.sin(q[-1])])


def bench_joint_coordinates(repeat: int, quick: bool) -> dict:
    """Joint-coordinate issue: planar chains of N links of 0.1 m, 1 kg slender bars
    (benchmarks/models.py ``chain(n, length=0.1)``), revolute joints, released
    horizontal under gravity, 1 s.

    * ``joint_coordinates_chain_rhs``: one right-hand side as the compiled loop calls
      it — joint coordinates (``CompiledJC``: recursion, forces, articulated-body
      solver) vs Cartesian DI (``CompiledRHS``: Jacobian, gamma, forces, Schur
      solve) — µs, µs per link and the exponent fitted in N; the joint-coordinate
      right-hand side through one Python call too.
    * ``joint_coordinates_chain_runs``: dop853 runs (``record: q``, output every 0.1
      s) at the loosest rtol = atol of 1e-3, 1e-4, ... whose tip position (and every
      body centre) at t_end is within 1e-6 m of a joint-coordinate reference at rtol
      = atol = 1e-12: wall s per simulated s of the integration (``stats
      wall_time``: initial state, compiled loop, outputs; median of ``repeat``
      runs), the model compile + formulation set-up per run separately, evaluations
      and the errors.  Cartesian runs for N <= 1000 (N = 10 000: ~100 s per run)."""
    from mbcore.plugins import registry
    from models import chain, chain_state, fit_exponent
    from mbplugins.formulations.joint_coordinates import JointCoordinates
    L = 0.1
    ns = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    rhs = {"n": [], "joint_us": [], "joint_us_per_link": [], "joint_python_call_us": [],
           "cartesian_us": [], "cartesian_us_per_link": [], "cartesian_jacobian": [],
           "ratio": []}
    for n in ns:
        s = chain(n, length=L).compile(kernels="compiled")
        jc = JointCoordinates(s, {"solver": "recursive"})
        di = registry().get("formulation", "di")(s, {})
        q, qd = chain_state(s, length=L)
        y = np.concatenate([jc.pack(q, qd), [0.0]])
        yc = np.concatenate([q, qd, [0.0]])
        k = max(3, int(2e5 / n))
        tj = statistics.median(jc.compiled.timeit(0.1, y, k) for _ in range(repeat))
        tp = _time(lambda: jc.rhs(0.1, y[:-1]), max(3, k // 4), repeat)
        tc = statistics.median(di.compiled.timeit(0.1, yc, max(3, k // 4))
                               for _ in range(repeat))
        rhs["n"].append(n)
        rhs["joint_us"].append(tj * 1e6)
        rhs["joint_us_per_link"].append(tj * 1e6 / n)
        rhs["joint_python_call_us"].append(tp * 1e6)
        rhs["cartesian_us"].append(tc * 1e6)
        rhs["cartesian_us_per_link"].append(tc * 1e6 / n)
        rhs["cartesian_jacobian"].append("dense" if s.dense else "sparse")
        rhs["ratio"].append(tc / tj)
    rhs["joint_exponent"] = fit_exponent(rhs["n"], rhs["joint_us"])
    rhs["cartesian_exponent"] = fit_exponent(rhs["n"], rhs["cartesian_us"])

    t_end, tol, integ = 1.0, 1e-6, "dop853"
    base = {"t_end": t_end, "output_step": 0.1, "integrator": integ, "record": "q"}
    ladder = (1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10)

    def go(n, form, rtol):
        t0 = time.perf_counter()
        res = mbcore.run(chain(n, length=L), settings={**base, "formulation": form,
                                                       "rtol": rtol, "atol": rtol})
        total = time.perf_counter() - t0
        wall = float(res.stats["wall_time"])
        return res, wall, total - wall

    sim = {"n": [], "integrator": integ, "t_end": t_end, "tolerance_m": tol,
           "reference": f"joint coordinates, {integ} rtol = atol = 1e-12",
           "criterion": "tip and every body centre at t_end within tolerance_m of the "
                        "reference; the loosest rtol = atol of 1e-3, 1e-4, ...",
           "timing": "s_per_simulated_s: stats wall_time / t_end (initial state, "
                     "integration loop, 11 output rows); setup_s: model compile + "
                     "analysis/formulation set-up of the same run",
           "joint": {}, "cartesian": {}}
    keys = ("rtol", "s_per_simulated_s", "setup_s", "nfev", "us_per_evaluation",
            "tip_error_m", "max_position_error_m", "met", "loop")
    for key in ("joint", "cartesian"):
        sim[key] = {k: [] for k in keys}
    for n in ns:
        sim["n"].append(n)
        ref, _, _ = go(n, "joint_coordinates", 1e-12)
        qref = ref["q"][-1]
        for key, form in (("joint", "joint_coordinates"), ("cartesian", "di")):
            row = sim[key]
            if key == "cartesian" and n > 1000:
                for k in keys:
                    row[k].append(None)
                continue
            for rtol in ladder:
                res, wall, setup = go(n, form, rtol)
                qf = res["q"][-1]
                tip = float(np.max(np.abs(_chain_tip(qf, L) - _chain_tip(qref, L))))
                pos = float(max(np.max(np.abs(qf[0::3] - qref[0::3])),
                                np.max(np.abs(qf[1::3] - qref[1::3]))))
                if max(tip, pos) <= tol:
                    break
            walls, setups = [wall], [setup]
            for _ in range(max(0, min(repeat, int(60.0 / max(wall + setup, 1e-3))) - 1)):
                _, w, su = go(n, form, rtol)
                walls.append(w)
                setups.append(su)
            nfev = int(res.stats["integrator_nfev"])
            row["rtol"].append(rtol)
            row["s_per_simulated_s"].append(statistics.median(walls) / t_end)
            row["setup_s"].append(statistics.median(setups))
            row["nfev"].append(nfev)
            row["us_per_evaluation"].append(statistics.median(walls) / nfev * 1e6)
            row["tip_error_m"].append(tip)
            row["max_position_error_m"].append(pos)
            row["met"].append(max(tip, pos) <= tol)
            row["loop"].append(res.stats["loop"])
    for key in ("joint", "cartesian"):
        pts = [(n, v) for n, v in zip(sim["n"], sim[key]["s_per_simulated_s"]) if v]
        sim[key]["exponent"] = fit_exponent(*zip(*pts)) if len(pts) > 1 else None
    return {"joint_coordinates_chain_rhs": rhs, "joint_coordinates_chain_runs": sim,
            "joint_coordinates_spatial_chain_rhs": _bench_jc_spatial(repeat, quick)}


def bench_jc_loops(repeat: int, quick: bool) -> dict:
    """Planar joint coordinates closed by cut joints (``CompiledJCLoops``: forward
    recursion, compiled forces and cut-row constraints, composite ``B^T M B``, the
    cut rows' multipliers by their Schur complement; Nikravesh (1988), §13.4.2) on
    Andrews' squeezer (7 bodies, 3 cut joints) and the four-bar.

    * ``jc_loops_rhs``: one right-hand side as the compiled loop calls it (µs) vs its
      NumPy reference (the formulation's ``rhs`` on a System with NumPy kernels) and
      vs the Cartesian DI right-hand side (``CompiledRHS``), at the initial state.
    * ``jc_loops_runs``: dynamic runs, dopri5 at rtol 1e-6, atol 1e-8, outputs every
      t_end / 30 (all channels), Andrews' squeezer also with the correction after
      every step in C (``loop_stabilization`` projection, partitioning): wall s per
      simulated s (``stats wall_time / t_end``,
      median of ``repeat`` runs) on the compiled loop, on the NumPy reference (NumPy
      kernels, Python driver; fewer runs) and of Cartesian ``di`` (compiled loop), and
      the largest difference of q at t_end from a ``di`` run at rtol 1e-10."""
    from mbcore import Model
    from mbcore.plugins import registry
    from mbplugins.formulations.joint_coordinates import JointCoordinates
    ex = ROOT / "examples"
    cases = {"andrews_squeezer": 0.03, "fourbar_dap": 1.0}
    rhs = {"model": [], "dof": [], "cut_rows": [], "compiled_us": [],
           "compiled_python_call_us": [], "numpy_us": [], "cartesian_us": [],
           "numpy_vs_compiled": [], "cartesian_vs_compiled": []}
    for name in cases:
        m = Model.from_file(ex / f"{name}.yaml")
        sc, sn = m.compile(kernels="compiled"), m.compile(kernels="numpy")
        A, B = JointCoordinates(sc, {}), JointCoordinates(sn, {})
        q0 = np.array([[*b.position, b.angle] for b in m.bodies], dtype=float).ravel()
        qd0 = np.zeros_like(q0)
        y = np.concatenate([A.pack(q0, qd0), [0.0]])
        k = 2000 if quick else 20000
        tj = statistics.median(A.compiled.timeit(0.0, y, k) for _ in range(repeat))
        tp = _time(lambda: A.rhs(0.0, y[:-1]), max(3, k // 10), repeat)
        tn = _time(lambda: B.rhs(0.0, y[:-1]), max(3, k // 100), repeat)
        di = registry().get("formulation", "di")(sc, {})
        tc = statistics.median(di.compiled.timeit(0.0, np.concatenate([q0, qd0, [0.0]]),
                                                  k) for _ in range(repeat))
        rhs["model"].append(name)
        rhs["dof"].append(A.dof)
        rhs["cut_rows"].append(len(A.extra))
        rhs["compiled_us"].append(tj * 1e6)
        rhs["compiled_python_call_us"].append(tp * 1e6)
        rhs["numpy_us"].append(tn * 1e6)
        rhs["cartesian_us"].append(tc * 1e6)
        rhs["numpy_vs_compiled"].append(tn / tj)
        rhs["cartesian_vs_compiled"].append(tc / tj)
    runs = {"model": [], "loop_stabilization": [], "t_end": [],
            "settings": "dopri5, rtol 1e-6, atol 1e-8, output_step t_end / 30",
            "s_per_simulated_s": [], "loop": [], "nfev": [], "projections": [],
            "numpy_s_per_simulated_s": [], "numpy_vs_compiled": [],
            "di_s_per_simulated_s": [], "q_error_vs_di": []}
    modes = ("baumgarte", "projection", "partitioning")
    runs_of = [(name, t_end, mode) for name, t_end in cases.items()
               for mode in (modes if name == "andrews_squeezer" else modes[:1])]
    for name, t_end, mode in runs_of:
        st = {"t_end": t_end, "output_step": t_end / 30, "rtol": 1e-6, "atol": 1e-8,
              "integrator": "dopri5"}

        def go(form, kernels="compiled", **extra):
            r = mbcore.run(str(ex / f"{name}.yaml"), analysis="dynamic", kernels=kernels,
                           settings={**st, "formulation": form, **extra})
            return r, float(r.stats["wall_time"]) / t_end
        jc = {"formulation_options": {"loop_stabilization": mode}}
        got = [go("joint_coordinates", **jc) for _ in range(repeat)]
        res = got[-1][0]
        ref, _ = go("di", rtol=1e-10, atol=1e-12)
        nump = [go("joint_coordinates", kernels="numpy", **jc)[1]
                for _ in range(1 if quick else max(1, repeat // 3))]
        dis = [go("di")[1] for _ in range(repeat)]
        w = statistics.median(g[1] for g in got)
        runs["model"].append(name)
        runs["loop_stabilization"].append(mode)
        runs["projections"].append(int(res.stats.get("projections", 0)))
        runs["t_end"].append(t_end)
        runs["s_per_simulated_s"].append(w)
        runs["loop"].append(res.stats["loop"])
        runs["nfev"].append(int(res.stats["integrator_nfev"]))
        runs["numpy_s_per_simulated_s"].append(statistics.median(nump))
        runs["numpy_vs_compiled"].append(statistics.median(nump) / w)
        runs["di_s_per_simulated_s"].append(statistics.median(dis))
        runs["q_error_vs_di"].append(float(np.max(np.abs(res["q"][-1] - ref["q"][-1]))))
    return {"jc_loops_rhs": rhs, "jc_loops_runs": runs}


def _bench_jc_spatial(repeat: int, quick: bool) -> dict:
    """Spatial ball-jointed rod chains (benchmarks/models.py ``spatial_chain``): one
    right-hand side of ``joint_coordinates`` (compiled ext/plugins/_jcspatial.pyx recursion
    through the formulation's Python ``rhs``) vs its NumPy reference and vs the
    Cartesian DI right-hand side (``CompiledRHS``), in the same run."""
    from mbcore.plugins import registry
    from models import spatial_chain, spatial_chain_state, fit_exponent
    from mbplugins.formulations.jc_spatial import SpatialJointCoordinates
    ns = (10, 100, 1000)
    out = {"n": [], "joint_us": [], "joint_numpy_us": [], "cartesian_us": [],
           "compiled_vs_numpy": [], "cartesian_vs_joint": []}
    for n in ns:
        s = spatial_chain(n).compile(kernels="compiled")
        q, qd = spatial_chain_state(s)
        jc = SpatialJointCoordinates(s, {"solver": "recursive"})
        y, _ = jc.initialize(q, qd, 0.0)
        k = max(3, int(2e4 / n))
        tj = _time(lambda: jc.rhs(0.1, y), k, repeat)
        sn = spatial_chain(n).compile(kernels="numpy")
        jn = SpatialJointCoordinates(sn, {"solver": "recursive"})
        yn, _ = jn.initialize(q, qd, 0.0)
        tn = _time(lambda: jn.rhs(0.1, yn), max(2, k // 50), max(1, repeat // 2))
        di = registry().get("formulation", "di")(s, {})
        yc = np.concatenate([q, qd, [0.0]])
        tc = (statistics.median(di.compiled.timeit(0.1, yc, k) for _ in range(repeat))
              if di.compiled is not None else float("nan"))
        out["n"].append(n)
        out["joint_us"].append(tj * 1e6)
        out["joint_numpy_us"].append(tn * 1e6)
        out["cartesian_us"].append(tc * 1e6)
        out["compiled_vs_numpy"].append(tn / tj)
        out["cartesian_vs_joint"].append(tc / tj)
    out["joint_exponent"] = fit_exponent(out["n"], out["joint_us"])
    return out


def bench_chain_eom_cost(repeat: int, quick: bool) -> dict:
    """Cost of one equations-of-motion evaluation of a chain of N links and the fitted
    exponent in N (linear time: <= 1.05)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from models import bench_chain_eom
    ns = (10, 100, 1000) if quick else (10, 100, 1000, 10000)
    return {"chain_eom": bench_chain_eom(ns, repeat=max(3, repeat // 2))}


def bench_overheads(repeat: int, quick: bool) -> dict:
    """Cost of a Python-only plugin type above the built-in one (four-bar with its
    four revolutes as a Python type: one call per group and stage), and of
    streaming every output step to HDF5 (slider-crank kinematics)."""
    import tempfile

    from mbcore.plugins import PluginManager
    sys.path.insert(0, str(ROOT / "tests"))
    from test_plugins import ThirdParty  # a Python-only revolute, one element at a time

    out = {}
    pm = PluginManager()
    pm.register(ThirdParty(), name="thirdparty")
    import yaml
    data = yaml.safe_load((ROOT / "examples" / "fourbar_kap.yaml").read_text())
    sysb = mbcore.Model.from_dict(data, registry=pm.registry).compile(plugins=pm)
    for j in data["joints"]:
        j["type"] = "py_revolute"
    sysp = mbcore.Model.from_dict(data, registry=pm.registry).compile(plugins=pm)
    q = np.array([.5, .866, 1.047, 2.824, 2.553, .423, 3.574, 1.687, 1.004])
    qd = np.ones(9)

    def ev(s):
        def f():
            s.phi(q, 0.3)
            s.jacobian(q, 0.3)
            s.gamma(q, qd, 0.3)
        return f
    n = 500 if quick else 5000
    tb = _time(ev(sysb), n, repeat)
    tp = _time(ev(sysp), max(n // 10, 50), repeat)
    out["python_plugin_constraint_overhead"] = {
        "builtin_us": tb * 1e6, "python_type_us": tp * 1e6,
        "extra_us_per_stage_call": (tp - tb) * 1e6 / 3,
        "note": "4 revolutes as one Python-only group written one element at a time "
                "(the plugin's own arithmetic included); 3 stages (phi, jacobian, gamma)"}
    out.update(_framework_overhead(repeat, quick))
    out.update(_compiled_tier_overhead(repeat, quick))
    tmp = tempfile.mkdtemp()
    model = mbcore.Model.from_file(ROOT / "examples" / "slider_crank.yaml")
    settings = {"t_end": 5.3, "output_step": 0.01 if quick else 0.001}
    tm, th, dt = _ab_time(lambda: mbcore.run(model, settings=settings),
                          lambda: mbcore.run(model, settings=settings, output=f"{tmp}/r.h5"),
                          max(repeat, 5))
    out["hdf5_streaming_overhead_kinematic"] = {
        "output_steps": int(round(5.3 / settings["output_step"])) + 1,
        "memory_only_s": tm, "with_hdf5_s": th, "overhead_fraction": dt / (tm + dt)}
    fourbar = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")
    for label, step in (("every_step", 0.001), ("sparse", 0.1)):
        st = {"t_end": 2.0 if quick else 10.0, "output_step": step, "rtol": 1e-4,
              "atol": 1e-6, "formulation": "di"}
        tm, th, dt = _ab_time(lambda: mbcore.run(fourbar, settings=st),
                              lambda: mbcore.run(fourbar, settings=st, output=f"{tmp}/d.h5"),
                              max(repeat, 5))
        rows = int(round(st["t_end"] / step)) + 1
        out[f"hdf5_streaming_overhead_dynamic_{label}"] = {
            "output_rows": rows, "memory_only_s": tm, "with_hdf5_s": th,
            "overhead_fraction": dt / (tm + dt), "extra_us_per_row": dt / rows * 1e6}
    return out


def _framework_overhead(repeat: int, quick: bool) -> dict:
    """What the System adds around a Python-only element type (gather, call, shape
    check, scatter): a constraint type and a force type whose methods return
    preallocated zeros, against the same model with built-in elements only."""
    from mbcore import hookimpl
    from mbcore.elements import ConstraintType, ForceType
    from mbcore.plugins import PluginManager
    from mbcore.elements.schema import Param

    cache: dict = {}

    def zeros(shape):
        a = cache.get(shape)
        if a is None:
            a = cache[shape] = np.zeros(shape)
        return a

    class NullJoint(ConstraintType):
        name = "null_joint"
        equations = 2
        bodies = ("body_i", "body_j")
        params = {"body_i": Param("body"), "body_j": Param("body")}
        n_par = 0

        def pack(self, spec, ctx):
            return [], []

        def phi(self, par, qb, t, f):
            return zeros((len(par), 2))

        def jacobian(self, par, qb, t, f):
            return zeros((len(par), 2, 2, 3))

        def gamma(self, par, qb, qdb, t, f):
            return zeros((len(par), 2))

    class NullForce(ForceType):
        name = "null_force"
        bodies = ("body",)
        params = {"body": Param("body")}
        n_par = 0

        def pack(self, spec, ctx):
            return [], []

        def force(self, par, qb, qdb, t, f):
            return zeros((len(par), 1, 3))

    class Plug:
        @hookimpl
        def mbcore_constraint_types(self):
            return [NullJoint]

        @hookimpl
        def mbcore_force_types(self):
            return [NullForce]

    pm = PluginManager()
    pm.register(Plug(), name="null")
    m = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")
    base = m.compile(plugins=pm)
    d = m.to_dict()
    d["joints"].append({"name": "nj", "type": "null_joint", "body_i": d["bodies"][0]["name"],
                        "body_j": d["bodies"][1]["name"]})
    d.setdefault("forces", []).append({"name": "nf", "type": "null_force",
                                       "body": d["bodies"][0]["name"]})
    plug = mbcore.Model.from_dict(d, registry=pm.registry).compile(plugins=pm)
    q0, qd0 = base.initial_state(0.0).q, np.ones(base.n)
    n = 2000 if quick else 20000
    row = {}

    def batch(call, s):
        def f():
            for _ in range(n):
                call(s)
        return f
    for stage, call in (("phi", lambda s: s.phi(q0, 0.1)),
                        ("jacobian", lambda s: s.jacobian(q0, 0.1)),
                        ("gamma", lambda s: s.gamma(q0, qd0, 0.1)),
                        ("forces", lambda s: s.forces(q0, qd0, 0.1))):
        # interleaved batches (built-in, plugin, built-in, ...): the extra cost is the
        # median of the paired differences, robust to the shared machine's drift; in
        # CPU time of the thread, so that the time the machine gives to other
        # processes (which doubles wall-clock figures at a load of 4 on 2 cores)
        # does not count as cost
        tb, _, dt = _ab_time(batch(call, base), batch(call, plug), max(repeat, 5),
                             clock=time.thread_time)
        row[f"{stage}_builtin_us"] = tb / n * 1e6
        row[f"{stage}_extra_us"] = dt / n * 1e6
    row["extra_us_per_call"] = max(v for k, v in row.items() if k.endswith("_extra_us"))
    row["note"] = ("one Python-only constraint group and one force group whose methods "
                   "return preallocated zeros: the framework's cost per group and stage "
                   "(CPU time of the thread, interleaved batches)")
    return {"python_plugin_framework_overhead": row}


def _one_plugin(hook: str, types: list):
    """A PluginManager with one plugin, "capsules", whose ``hook`` returns ``types``."""
    from mbcore import hookimpl
    from mbcore.plugins import PluginManager
    pm = PluginManager()
    pm.register(type("Plug", (), {hook: hookimpl(lambda self: list(types))})(),
                name="capsules")
    return pm


def _compiled_tier_overhead(repeat: int, quick: bool) -> dict:
    """The compiled plugin tier (``ForceType.c_kernel``): per-call cost of
    one force group through a ``mbcore.force_kernel`` capsule above the same
    built-in group (the self-test capsule of the built-in TSDA kernel, evaluated
    ``count`` times in C by ``ForceEvaluator.repeat_forces``: no Python in the
    timing), the floor of the tier (an extra group whose kernel adds nothing), and
    whether a model with the capsule force stays on the compiled right-hand side and
    loop (four-bar with a spring, 2 s dopri5)."""
    from mbcore._ext._forces import builtin_capsule
    from mbcore.elements import ForceType
    from mbcore.plugins import registry
    from mbcore.elements.schema import Param
    from mbplugins._ext import _planar_forces
    from mbplugins.planar.forces import TSDA

    class CapsuleTSDA(TSDA):
        # a copy of the built-in kernel's struct (the built-in TSDA itself reaches
        # the evaluator through the tier since 0.2; before, through the core's switch)
        name, c_kernel = "capsule_tsda", builtin_capsule(_planar_forces.TSDA)

    class NullForce(ForceType):
        name, bodies, params = "null_capsule", ("body",), {"body": Param("body")}
        c_kernel = builtin_capsule("null")

        def pack(self, spec, ctx):
            return [], []

        def force(self, par, qb, qdb, t, f):
            return np.zeros((len(par), 1, 3))

    pm = _one_plugin("mbcore_force_types", [CapsuleTSDA, NullForce])
    d = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml").to_dict()
    spring = {"name": "spring", "body_i": "ground", "body_j": "coupler", "point_i": [2.0, 4.0],
              "point_j": [0.5, 1.5], "stiffness": 200.0, "damping": 5.0, "free_length": 1.0}

    def system(tsda, null=False):
        dd = {**d, "forces": [{**spring, "type": tsda}]}
        if null:
            dd["forces"].append({"name": "nil", "type": "null_capsule", "body": "crank"})
        m = mbcore.Model.from_dict(dd, registry=pm.registry)
        return m, m.compile(plugins=pm)

    (mb, sb), (mc, sc), (_, sn) = system("tsda"), system("capsule_tsda"), system("tsda", True)
    q, qd = sb.initial_state(0.0).q, np.ones(sb.n)
    fv, Q = sb.functions_at(0.3), np.zeros(sb.n)
    count = 20000 if quick else 200000

    def loop(s):
        return lambda: s._force_evaluator.repeat_forces(q, qd, 0.3, fv, Q, count)
    tb, tc, dc = _ab_time(loop(sb), loop(sc), max(repeat, 5))
    _, tn, dn = _ab_time(loop(sb), loop(sn), max(repeat, 5))
    form = registry().get("formulation", "di")(sc, {})
    st = {"analysis": "dynamic", "t_end": 2.0, "output_step": 0.01, "formulation": "di"}
    wb, wc, _ = _ab_time(lambda: mbcore.run(mb, plugins=pm, settings=st),
                         lambda: mbcore.run(mc, plugins=pm, settings=st), max(repeat // 2, 3))
    res = mbcore.run(mc, plugins=pm, settings=st)
    row = {"builtin_group_us": tb / count * 1e6, "capsule_group_us": tc / count * 1e6,
           "extra_us_per_call": dc / count * 1e6,
           "null_capsule_group_extra_us": dn / count * 1e6,
           "compiled_rhs": form.compiled is not None, "loop": res.stats["loop"],
           "run_builtin_s": wb, "run_capsule_s": wc,
           "note": "a TSDA group as the built-in type (its capsule in "
                   "mbplugins._ext._planar_forces) vs a copy of that kernel behind the C "
                   "ABI (mbcore_plugin.h), evaluations in C; four-bar DI, dopri5, 2 s"}
    return {"compiled_plugin_tier_overhead": row,
            "compiled_plugin_tier_constraint_overhead": _compiled_constraint_tier(repeat,
                                                                                  quick)}


def _compiled_constraint_tier(repeat: int, quick: bool) -> dict:
    """The constraint row of the compiled plugin tier (``ConstraintType.c_kernel``):
    the four-bar's four revolutes as the built-in group (its capsule's direct layout)
    vs the same kernel behind the block layout of ABI version 1 (self-test capsule:
    rows and blocks scattered by the core), phi + Jacobian + nu + gamma evaluated
    ``count`` times in C (``PlanarEvaluator.repeat_stages``), per stage; the floor of
    the tier (an extra capsule group whose kernel writes zeros); and whether the
    capsule model keeps the compiled right-hand side and loop (DI, dopri5, 2 s)."""
    from mbcore._ext._planar import builtin_constraint_capsule
    try:                              # the built-in kernels as capsules (C ABI v2)
        from mbplugins._ext._planar_constraints import REVOLUTE as revolute_kernel
    except ImportError:               # an older checkout (A/B): the core's own table
        revolute_kernel = "revolute"
    from mbcore.elements import ConstraintType
    from mbcore.plugins import registry
    from mbcore.elements.schema import Param
    from mbplugins.planar.constraints import Revolute

    class CapsuleRevolute(Revolute):
        name, kernel = "capsule_revolute", None
        c_kernel = builtin_constraint_capsule(revolute_kernel)

    class NullJoint(ConstraintType):
        name, equations, bodies = "null_capsule", 1, ("body",)
        params = {"body": Param("body")}
        c_kernel = builtin_constraint_capsule("null")

        def pack(self, spec, ctx):
            return [], []

    pm = _one_plugin("mbcore_constraint_types", [CapsuleRevolute, NullJoint])
    d = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml").to_dict()

    def system(revolute, null=False):
        dd = {**d, "joints": [{**j, "type": revolute} for j in d["joints"]]}
        if null:
            dd["joints"].append({"name": "nil", "type": "null_capsule", "body": "crank"})
        m = mbcore.Model.from_dict(dd, registry=pm.registry)
        return m, m.compile(plugins=pm)

    (mb, sb), (mc, sc), (_, sn) = (system("revolute"), system("capsule_revolute"),
                                   system("revolute", True))
    count = 20000 if quick else 200000

    def loop(s):
        q, qd = s.initial_state(0.0).q, np.ones(s.n)
        fv, out, data = s.functions_at(0.3), np.zeros(s.m), np.zeros_like(s._jdata)
        return lambda: s._evaluator.repeat_stages(q, qd, 0.3, fv, out, data, count)
    per = 4 * count                                   # four stages per repetition
    tb, tc, dc = _ab_time(loop(sb), loop(sc), max(repeat, 5))
    _, _, dn = _ab_time(loop(sb), loop(sn), max(repeat, 5))
    form = registry().get("formulation", "di")(sc, {})
    st = {"analysis": "dynamic", "t_end": 2.0, "output_step": 0.01, "formulation": "di"}
    wb, wc, _ = _ab_time(lambda: mbcore.run(mb, plugins=pm, settings=st),
                         lambda: mbcore.run(mc, plugins=pm, settings=st), max(repeat // 2, 3))
    res = mbcore.run(mc, plugins=pm, settings=st)
    return {"builtin_stage_us": tb / per * 1e6, "capsule_stage_us": tc / per * 1e6,
            "extra_us_per_stage": dc / per * 1e6,
            "null_capsule_group_extra_us_per_stage": dn / per * 1e6,
            "compiled_rhs": form.compiled is not None, "loop": res.stats["loop"],
            "run_builtin_s": wb, "run_capsule_s": wc,
            "note": "the four-bar's 4 revolutes as the built-in group vs the same kernel "
                    "behind the C ABI (mbcore_plugin.h), phi/Jacobian/nu/gamma in C, per "
                    "stage (medians); four-bar DI, dopri5, 2 s"}


_STARTUP_CODE = """
import json, sys, time
t0 = time.perf_counter()
import mbcore
t1, c1 = time.perf_counter(), time.thread_time()
path, settings = sys.argv[1], json.loads(sys.argv[2])
mbcore.run(mbcore.Model.from_file(path), settings=settings)
t2, c2 = time.perf_counter(), time.thread_time()
time.sleep(0.3)       # let the BLAS worker threads started by the first run go idle
t3, c3 = time.perf_counter(), time.thread_time()
mbcore.run(mbcore.Model.from_file(path), settings=settings)
t4, c4 = time.perf_counter(), time.thread_time()
mods = sys.modules
print(json.dumps({"import": t1 - t0, "first": t2 - t1, "second": t4 - t3,
                  "first_cpu": c2 - c1, "second_cpu": c4 - c3,
                  "heavy": [m for m in ("scipy.linalg", "scipy.sparse", "scipy.optimize",
                                        "scipy.integrate", "scipy.interpolate", "numpy.ma",
                                        "h5py", "importlib.metadata")
                            if m in mods]}))
"""

_ROWS_CODE = """
import json, statistics, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
import mbcore
from run import _pendulum
repeat = int(sys.argv[2])
model = _pendulum()
tmp = tempfile.mkdtemp()
import mbplugins.analyses.dynamic as dyn
batched = getattr(dyn._Run, "_row_block", None)    # None: a tree without batched rows
cases = {}
for record, rtol, h5, rows in [("q, qd", 1e-3, False, True), ("q, qd", 1e-2, False, True),
                               ("q, qd", 1e-3, False, False), ("q, qd", 1e-2, False, False),
                               ("q, qd", 1e-3, True, True), ("q, qd, energy", 1e-3, False, True),
                               ("q, qd, energy", 1e-3, False, False), (None, 1e-3, False, True)]:
    st = {"t_end": 10.0, "output_step": 0.01, "integrator": "dopri5", "formulation": "di",
          "rtol": rtol, "atol": rtol / 100}
    if record:
        st["record"] = record
    key = ((record or "all").replace(", ", "_") + f"_rtol{rtol:g}" + ("_hdf5" if h5 else "")
           + ("" if rows else "_row_by_row"))
    cases[key] = (st, {"output": tmp + "/p.h5"} if h5 else {}, rows)
times = {k: ([], [], []) for k in cases}
last = {}
for rep in range(repeat + 1):                 # interleaved; the first round warms up
    for key, (st, kw, rows) in cases.items():
        # row_by_row: the previous implementation (every row through _Run.output)
        if batched is not None:
            dyn._Run._row_block = batched if rows else (lambda self: None)
        t0 = time.perf_counter()
        res = mbcore.run(model, settings=st, **kw)
        t1 = time.perf_counter()
        model.compile()
        t2 = time.perf_counter()
        if rep:
            w, e, c = times[key]
            w.append(res.stats["wall_time"]); e.append(t1 - t0); c.append(t2 - t1)
        last[key] = res
out = {k: {"rows": len(last[k]), "rhs_evaluations": int(last[k].stats["integrator_nfev"]),
           "loop": last[k].stats["loop"], "wall_time": statistics.median(w),
           "end_to_end": statistics.median(e), "compile": statistics.median(c)}
       for k, (w, e, c) in times.items()}
print(json.dumps(out))
"""


def _fresh_python(code: str, args, env_extra: dict | None = None, drop=()) -> dict:
    """Run ``code`` in a fresh interpreter; its last stdout line is JSON."""
    import os
    import subprocess
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-c", code, *map(str, args)], env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"benchmark subprocess failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def bench_overheads_startup_rows(repeat: int, quick: bool, src: str | None = None) -> dict:
    """Start-up cost and output rows, each from fresh interpreters (medians).

    * ``startup_first_run``: ``import mbcore``, then the first and (0.3 s later:
      the BLAS worker threads the first run starts spin for a while, which slows a
      loaded 2-core machine) the second ``mbcore.run(Model.from_file(
      examples/fourbar_kap.yaml))`` (kinematic, 41 output times; load + run) in one
      process; the extra cost of the first = first - second (per process, median;
      wall clock, and CPU time of the main thread).  With the bytecode cache (a
      PYTHONPYCACHEPREFIX of the benchmark, warmed once: as installed packages
      run) and without it (PYTHONDONTWRITEBYTECODE=1: every module compiled from
      source, as in a checkout that may not write __pycache__).
    * ``startup_first_dynamic_run``, ``startup_first_dynamic_run_spatial``: the same
      with a dynamic run (DI, dopri5, on the compiled loop): the planar
      ``examples/slider_crank_dynamic.yaml`` to t_end = 1 s (101 output times) and
      the spatial ``examples/spatial_slider_crank_dynamic.yaml`` to t_end = 0.2 s
      (21 output times).
    * ``pendulum_rows_*``: the 1 m, 1 kg slender-bar pendulum released horizontal,
      10 s, output every 0.01 s (1001 rows), dopri5 on the compiled loop, DI, atol =
      rtol / 100: ``stats["wall_time"]`` (initial state, integration, rows) and the
      whole ``mbcore.run`` (+ model compile, RunInfo, reporters), each per simulated
      second.
    ``src``: another source tree to measure (its ``src`` directory put first on
    PYTHONPATH), e.g. the previous commit for a before/after.
    """
    import os
    import tempfile
    n = max(3, repeat if not quick else 3)
    ex = ROOT / "examples"
    cases = (("startup_first_run", ex / "fourbar_kap.yaml", None, "kinematic run"),
             ("startup_first_dynamic_run", ex / "slider_crank_dynamic.yaml", {"t_end": 1.0},
              "dynamic run (DI, dopri5, t_end = 1 s)"),
             ("startup_first_dynamic_run_spatial", ex / "spatial_slider_crank_dynamic.yaml",
              {"t_end": 0.2}, "dynamic run (cs, dopri5, t_end = 0.2 s)"))
    extra = {"PYTHONPATH": os.pathsep.join([str(Path(src) / "src")]
                                           + ([os.environ["PYTHONPATH"]]
                                              if os.environ.get("PYTHONPATH") else []))} \
        if src else {}
    out = {}
    pyc = tempfile.mkdtemp(prefix="mbcore-pyc-")
    variants = (("", {**extra, "PYTHONPYCACHEPREFIX": pyc}, ("PYTHONDONTWRITEBYTECODE",)),
                ("_no_bytecode_cache", {**extra, "PYTHONDONTWRITEBYTECODE": "1"},
                 ("PYTHONPYCACHEPREFIX",)))
    for name, path, settings, what in cases:
        args = [path, json.dumps(settings)]
        for suffix, env, drop in variants:
            if suffix == "":
                _fresh_python(_STARTUP_CODE, args, env, drop)     # warms the bytecode
            runs = [_fresh_python(_STARTUP_CODE, args, env, drop) for _ in range(n)]
            out[f"{name}{suffix}"] = {
                "processes": n,
                "import_mbcore_s": statistics.median(r["import"] for r in runs),
                "first_run_s": statistics.median(r["first"] for r in runs),
                "second_run_s": statistics.median(r["second"] for r in runs),
                "first_run_extra_s": statistics.median(r["first"] - r["second"]
                                                       for r in runs),
                "first_run_extra_cpu_s": statistics.median(r["first_cpu"] - r["second_cpu"]
                                                           for r in runs),
                "heavy_modules_after_run": runs[-1]["heavy"],
                "note": f"load + {what} of examples/{path.name}; extra = first - second "
                        f"in the same process (wall clock; _cpu: CPU time of the main "
                        f"thread); target <= 0.05 s"}
    rows = _fresh_python(_ROWS_CODE, [ROOT / "benchmarks", 5 if quick else max(21, repeat)],
                         {**extra, "PYTHONPYCACHEPREFIX": pyc}, ("PYTHONDONTWRITEBYTECODE",))
    for key, r in rows.items():
        if key.endswith("_row_by_row"):
            continue
        old = rows.get(key + "_row_by_row")
        out[f"pendulum_rows_{key}"] = {
            "simulated_s": 10.0, "rows": r["rows"], "rhs_evaluations": r["rhs_evaluations"],
            "loop": r["loop"],
            "wall_time_s_per_simulated_s": r["wall_time"] / 10.0,
            "end_to_end_s_per_simulated_s": r["end_to_end"] / 10.0,
            "end_to_end_minus_compile_s_per_simulated_s":
                (r["end_to_end"] - r["compile"]) / 10.0,
            "note": "target (record q, qd): <= 0.0004 s per simulated s"}
        if old is not None:     # the previous implementation, same process, interleaved
            out[f"pendulum_rows_{key}"].update(
                row_by_row_wall_time_s_per_simulated_s=old["wall_time"] / 10.0,
                ratio=old["wall_time"] / r["wall_time"])
    return out



def bench_force_jacobians(repeat: int, quick: bool) -> dict:
    """Analytic force Jacobians.  The stiff
    spring chain ``stiff_chain(10)`` (k = 1e6; n = 30, no constraints) with
    ``formulation: stiff`` and ``ggl`` + ``integrator: bdf`` (rtol 1e-3, atol 1e-5,
    1 s, output every 0.01 s, ``record: q, qd, energy``): seconds per Jacobian of the
    analysis (``dae_jacobian``: the formulation's df/dy and the work row) and the run's
    wall time, *before* (main's forward differences of the whole force vector / rhs,
    restored by monkeypatching in this process) and *after*, interleaved, median of
    ``max(3, repeat)``; and one ``System.force_jacobians`` compiled vs NumPy (chains of
    10 and 100 masses)."""
    import mbplugins.analyses.dynamic as dyn
    from mbplugins.formulations import ggl as gglmod, stiff as stiffmod
    from models import stiff_chain
    out = {}
    t_end = 0.2 if quick else 1.0
    model = stiff_chain(10)
    new = (stiffmod._parts, gglmod.GGL.jacobian, dyn._Run._direct_work_row)
    old = (stiffmod._parts_fd, gglmod.jacobian_fd, lambda *a: False)
    timing = {"n": 0, "t": 0.0}
    dae = dyn._Run.dae_jacobian

    def timed(self, t, y):
        t0 = time.perf_counter()
        r = dae(self, t, y)
        timing["t"] += time.perf_counter() - t0
        timing["n"] += 1
        return r

    def use(parts):
        stiffmod._parts, gglmod.GGL.jacobian, dyn._Run._direct_work_row = parts

    dyn._Run.dae_jacobian = timed
    try:
        for form in ("stiff", "ggl"):
            st = {"analysis": "dynamic", "formulation": form, "integrator": "bdf",
                  "rtol": 1e-3, "atol": 1e-5, "t_end": t_end, "output_step": 0.01,
                  "record": "q, qd, energy"}
            row = {"simulated_s": t_end, "n": 30}
            res = {"before": [], "after": []}
            for _ in range(max(3, repeat)):
                for label, parts in (("before", old), ("after", new)):
                    use(parts)
                    timing.update(n=0, t=0.0)
                    r = mbcore.run(model, settings=st)
                    res[label].append((float(r.stats["wall_time"]), timing["t"] / timing["n"],
                                       timing["n"], int(r.stats["integrator_nsteps"]),
                                       float(np.asarray(r["q"])[-1, -2])))
            for label, rows in res.items():
                row[f"{label}_wall_s"] = statistics.median(x[0] for x in rows)
                row[f"{label}_jacobian_ms"] = 1e3 * statistics.median(x[1] for x in rows)
                row[f"{label}_jacobians"] = rows[-1][2]
                row[f"{label}_steps"] = rows[-1][3]
                row[f"{label}_y_last"] = rows[-1][4]
            row["jacobian_speedup"] = row["before_jacobian_ms"] / row["after_jacobian_ms"]
            row["wall_speedup"] = row["before_wall_s"] / row["after_wall_s"]
            out[f"force_jacobians_stiff_chain10_{form}_bdf"] = row
    finally:
        use(new)
        dyn._Run.dae_jacobian = dae
    for N in (10, 100):
        m = stiff_chain(N)
        row = {"n": 3 * N}
        for kern in ("compiled", "numpy"):
            s = m.compile(kernels=kern)
            q = s.initial_state().q + 1e-3
            qd = np.full(s.n, 0.1)
            row[f"{kern}_force_jacobians_us"] = 1e6 * _time(
                lambda: s.force_jacobians(q, qd, 0.0), 20 if N > 10 else 200, max(3, repeat))
            row[f"{kern}_forces_us"] = 1e6 * _time(lambda: s.forces(q, qd, 0.0), 200,
                                                   max(3, repeat))
        row["ratio"] = row["numpy_force_jacobians_us"] / row["compiled_force_jacobians_us"]
        out[f"force_jacobians_kernel_chain{N}"] = row
    # spatial: 10 bodies in a row, each joined to the previous one (the first to the
    # ground) by a tsda, a bushing and an rsda, with drag on each: 40 elements
    m = mbcore.Model("spatial_force_chain")
    m.set_dimensions(3)
    for i in range(10):
        m.add_body(f"B{i}", mass=1.0, inertia=[0.1, 0.2, 0.3], position=[0.5 * (i + 1), 0, 0],
                   orientation={"axis": [1, 1, i], "angle": 10 * i, "unit": "deg"})
        prev = "ground" if i == 0 else f"B{i - 1}"
        m.add_force("tsda", f"S{i}", body_i=prev, body_j=f"B{i}", point_i=[0.1, 0, 0],
                    point_j=[-0.1, 0.05, 0], stiffness=1e3, damping=1.0)
        m.add_force("bushing", f"U{i}", body_i=prev, body_j=f"B{i}", stiffness=[1e3] * 3,
                    damping=[1.0] * 3, rotational_stiffness=[10.0] * 3,
                    rotational_damping=[0.1] * 3)
        m.add_force("rsda", f"R{i}", body_i=prev, body_j=f"B{i}", axis_i=[0, 0, 1],
                    stiffness=5.0, damping=0.1)
        m.add_force("drag", f"D{i}", body=f"B{i}", drag_coefficient=1.0, area=0.1)
    row = {"n": 70}
    for kern in ("compiled", "numpy"):
        s = m.compile(kernels=kern)
        q = s.initial_state().q + 1e-3
        qd = np.full(s.n, 0.1)
        row[f"{kern}_force_jacobians_us"] = 1e6 * _time(
            lambda: s.force_jacobians(q, qd, 0.0), 50, max(3, repeat))
        row[f"{kern}_forces_us"] = 1e6 * _time(lambda: s.forces(q, qd, 0.0), 200,
                                               max(3, repeat))
    row["ratio"] = row["numpy_force_jacobians_us"] / row["compiled_force_jacobians_us"]
    out["force_jacobians_kernel_spatial10"] = row
    return out


def bench_spatial_dae_jacobians(repeat: int, quick: bool) -> dict:
    """Newton matrices of ``ggl`` and ``stiff`` for spatial bodies: the analytic
    velocity rows (``GGL.jacobian`` / ``Stiff.jacobian``) against the former forward
    differences of the whole right-hand side (``jacobian_fd``, 2n evaluations of f),
    on the heavy top (n = 7) and IFToMM A05 (the governor of
    benchmarks/accuracy_problems.py, n = 28): µs per call at one state (median of
    ``max(5, repeat)`` batches, the two interleaved), compiled and NumPy kernels; and
    whole bdf runs (rtol 1e-6, atol 1e-8; heavy top 0.5 s, governor 1 s) with either
    Jacobian, interleaved: wall time, Jacobian calls, steps and the time inside the
    Jacobian per call (median of ``max(3, repeat)``)."""
    from accuracy_problems import governor_model
    from mbcore.plugins import registry
    from mbplugins.formulations import ggl as gglmod, stiff as stiffmod
    out = {}
    models = {"heavy_top": (lambda: mbcore.Model.from_file(
        ROOT / "examples" / "spatial_heavy_top.yaml"), 0.5),
        "governor": (governor_model, 1.0)}
    rng = np.random.default_rng(0)
    timing = {"n": 0, "t": 0.0}

    def timed(jac):
        def f(self, t, y):
            t0 = time.perf_counter()
            r = jac(self, t, y)
            timing["t"] += time.perf_counter() - t0
            timing["n"] += 1
            return r
        return f

    for name, (build, t_end) in models.items():
        for fname in ("ggl", "stiff"):
            cls = gglmod.GGL if fname == "ggl" else stiffmod.Stiff
            fd = gglmod.jacobian_fd if fname == "ggl" else stiffmod.jacobian_fd
            analytic = cls.jacobian
            row = {}
            for kern in ("compiled", "numpy"):
                s = build().compile(kernels=kern)
                form = registry().get("formulation", fname)(s, {})
                st = s.initial_state(0.0)
                y, _ = form.initialize(st.q, st.qd, 0.0)
                y = y + 1e-3 * rng.standard_normal(y.size)
                row["n"], row["m"] = s.n, form.m
                number = 200 if kern == "compiled" else 5
                ta, tb, _ = _ab_time(lambda: [analytic(form, 0.1, y) for _ in range(number)],
                                     lambda: [fd(form, 0.1, y) for _ in range(number)],
                                     max(5, repeat))
                row[f"{kern}_analytic_us"] = 1e6 * ta / number
                row[f"{kern}_differences_us"] = 1e6 * tb / number
                row[f"{kern}_speedup"] = tb / ta
            out[f"spatial_dae_jacobian_{name}_{fname}"] = row
            # whole runs (compiled kernels), the two Jacobians interleaved
            st = {"analysis": "dynamic", "formulation": fname, "integrator": "bdf",
                  "rtol": 1e-6, "atol": 1e-8, "t_end": 0.1 if quick else t_end,
                  "output_step": 0.01}
            res = {"analytic": [], "differences": []}
            try:
                for _ in range(max(3, repeat)):
                    for label, jac in (("analytic", analytic), ("differences", fd)):
                        cls.jacobian = timed(jac)
                        timing.update(n=0, t=0.0)
                        r = mbcore.run(build(), settings=st)
                        res[label].append((float(r.stats["wall_time"]),
                                           timing["t"] / max(timing["n"], 1), timing["n"],
                                           int(r.stats["integrator_nsteps"])))
            finally:
                cls.jacobian = analytic
            run = {"simulated_s": st["t_end"]}
            for label, rows in res.items():
                run[f"{label}_wall_s"] = statistics.median(x[0] for x in rows)
                run[f"{label}_jacobian_us"] = 1e6 * statistics.median(x[1] for x in rows)
                run[f"{label}_jacobians"] = rows[-1][2]
                run[f"{label}_steps"] = rows[-1][3]
            run["wall_speedup"] = run["differences_wall_s"] / run["analytic_wall_s"]
            out[f"spatial_dae_run_{name}_{fname}"] = run
    return out


def bench_dijac(repeat: int, quick: bool) -> dict:
    """The semi-analytic DI/CS Jacobian of the compiled
    right-hand side (``CompiledRHS.c_jac``) in the compiled bdf / θ loops, *before*
    (forward differences of the right-hand side, 2n + 2 evaluations: the compiled
    right-hand side built without ``enable_jacobian``, monkeypatched in this process)
    vs *after*, interleaved, medians of ``max(3, repeat)``.  The stiff spring chain
    ``stiff_chain(10)`` (k = 1e6), DI, bdf, rtol 1e-3, atol 1e-5, 1 s, output every
    0.01 s, ``record: q, qd, energy`` (also on the Python driver, ``loop: python``,
    whose Jacobian becomes one C call instead of 2n + 2 Python evaluations); the
    four-bar rows of ``bench_multistep`` (bdf,
    rtol 1e-6 / 1e-8, 10 s, 10 rows; implicit_euler, trapezoid at step 1e-3); and one
    Jacobian (``timeit_jacobian``, called from C) analytic vs FD in µs."""
    import mbcore.solve.formulation as F
    from models import stiff_chain
    orig = F._enable_jacobian
    off = (lambda system, crhs: False)
    out = {}
    fourbar = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")
    chain = stiff_chain(10)
    t4 = 2.0 if quick else 10.0
    cases = [("dijac_stiff_chain10_bdf", chain, {
        "formulation": "di", "integrator": "bdf", "rtol": 1e-3, "atol": 1e-5,
        "t_end": 0.2 if quick else 1.0, "output_step": 0.01, "record": "q, qd, energy"})]
    cases.append(("dijac_stiff_chain10_bdf_python_loop", chain, {**cases[0][2],
                                                                 "loop": "python"}))
    for rtol in (1e-6, 1e-8):
        cases.append((f"dijac_fourbar_bdf_rtol{rtol:g}", fourbar, {
            "formulation": "di", "integrator": "bdf", "rtol": rtol, "atol": 1e-2 * rtol,
            "t_end": t4, "output_step": t4 / 10}))
    for integ in ("implicit_euler", "trapezoid"):
        cases.append((f"dijac_fourbar_{integ}_step0.001", fourbar, {
            "formulation": "di", "integrator": integ, "step": 1e-3, "t_end": t4,
            "output_step": t4 / 10}))
    try:
        for key, model, st in cases:
            st = {"analysis": "dynamic", **st}
            row = {"simulated_s": st["t_end"]}
            res = {"before": [], "after": []}
            for _ in range(max(3, repeat)):
                for label, en in (("before", off), ("after", orig)):
                    F._enable_jacobian = en
                    r = mbcore.run(model, settings=st)
                    res[label].append((float(r.stats["wall_time"]), r))
            for label, rows in res.items():
                r = rows[-1][1]
                row[f"{label}_s_per_simulated_s"] = (statistics.median(x[0] for x in rows)
                                                    / st["t_end"])
                row[f"{label}_loop"] = r.stats["loop"]
                for k in ("nsteps", "nfev", "njev", "nfev_jac", "nlu"):
                    row[f"{label}_{k}"] = int(r.stats[f"integrator_{k}"])
                row[f"{label}_q_last"] = float(np.asarray(r["q"])[-1, -2])
            row["speedup"] = row["before_s_per_simulated_s"] / row["after_s_per_simulated_s"]
            out[key] = row
    finally:
        F._enable_jacobian = orig
    from mbcore.plugins import registry
    from mbcore.solve.assembly import assemble
    for name, model in (("stiff_chain10", chain), ("fourbar", fourbar)):
        s = model.compile(kernels="compiled")
        form = registry().get("formulation", "di")(s, {})
        st0 = s.initial_state(0.0)
        q, qd = st0.q, st0.qd
        if s.m:
            rep = assemble(s, q, qd, 0.0)
            q, qd = rep.q, rep.qd
        y = np.concatenate([q + 1e-4, qd + 0.1, [0.0]])
        c = form.compiled
        reps = 200 if quick else 2000
        row = {"n": s.n, "m": s.m}
        row["rhs_us"] = 1e6 * statistics.median(c.timeit(0.1, y, reps * 10)
                                                for _ in range(max(3, repeat)))
        ta, tf = [], []
        for _ in range(max(3, repeat)):
            c.disable_jacobian(False)
            ta.append(c.timeit_jacobian(0.1, y, reps))
            c.disable_jacobian(True)
            tf.append(c.timeit_jacobian(0.1, y, reps))
        c.disable_jacobian(False)
        row["analytic_jacobian_us"] = 1e6 * statistics.median(ta)
        row["fd_jacobian_us"] = 1e6 * statistics.median(tf)
        row["ratio"] = row["fd_jacobian_us"] / row["analytic_jacobian_us"]
        out[f"dijac_jacobian_cost_{name}"] = row
    return out


def bench_modes(repeat: int, quick: bool) -> dict:
    """Linearisation and modes of the four-bar with a spring-damper
    (``modes_fourbar_*``): one ``mbcore.linearize`` (static equilibrium from the
    estimates, chart, A/B/C/D, eigen-analysis) per kernel path and linearisation
    method, and ``mbcore modes`` from a fresh interpreter (wall time, start-up
    included)."""
    import subprocess
    path = ROOT / "examples" / "fourbar_spring_modes.yaml"
    model = mbcore.Model.from_file(path)
    out: dict = {}
    n = 3 if quick else 20
    for method in ("analytic", "numeric"):
        row = {}
        for kernels in ("compiled", "numpy"):
            s = model.compile(kernels=kernels)
            t = _time(lambda: mbcore.linearize(s, settings={"linearization": method}), n,
                      repeat)
            row[f"{kernels}_ms"] = t * 1e3
        row["ratio"] = row["numpy_ms"] / row["compiled_ms"]
        out[f"modes_fourbar_linearize_{method}"] = row
    walls = []
    for _ in range(max(3, repeat // 2)):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "mbcore.cli", "modes", str(path), "-q"],
                       check=True)
        walls.append(time.perf_counter() - t0)
    out["modes_fourbar_cli"] = {"wall_s": statistics.median(walls)}
    return out


def bench_sweep(repeat: int, quick: bool) -> dict:
    """``sweep_*``: the overhead per case of ``mbcore.sweep`` over
    a plain loop of ``mbcore.run(Model.from_dict(case), output=file)``: the four-bar
    with its spring-damper (examples/fourbar_spring_modes.yaml, dynamic, 0.2 s), a
    stiffness x damping grid, both in this process (``workers=0``) and interleaved;
    the sweep on 2 local processes (start-up included) and a resume that skips every
    case."""
    import copy
    import tempfile
    from mbcore.studies.params import case_model, expand, parameters_from
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_spring_modes.yaml")
    base = model.to_dict()
    base["settings"] = {"analysis": "dynamic", "t_end": 0.2, "output_step": 0.01}
    n_k, n_c = (4, 2) if quick else (5, 4)
    params = {"forces.spring.stiffness": f"300:500:{n_k}", "forces.spring.damping":
              f"5:20:{n_c}"}
    pars = parameters_from(params, base)
    cases = [case_model(base, pars, v) for v in expand(pars)]
    n = len(cases)
    metrics = {"peak": "max(abs(reactions/O2.i.fx))", "e": "last(energy/total)"}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        k = [0]

        def plain():
            k[0] += 1
            d = tmp / f"plain{k[0]}"
            d.mkdir()
            for i, c in enumerate(cases):
                mbcore.run(mbcore.Model.from_dict(copy.deepcopy(c)), output=d / f"c{i}.h5")

        def swept():
            k[0] += 1
            mbcore.sweep(base, params, metrics=metrics, out_dir=tmp / f"sweep{k[0]}",
                         workers=0)
        reps = max(3, repeat // 2) if not quick else 2
        t_plain, t_sweep, t_diff = _ab_time(plain, swept, reps)
        row = {"cases": n, "plain_run_ms_per_case": t_plain / n * 1e3,
               "sweep_in_process_ms_per_case": t_sweep / n * 1e3,
               "overhead_ms_per_case": t_diff / n * 1e3,
               "overhead_fraction": t_diff / t_plain}
        t0 = time.perf_counter()
        mbcore.sweep(base, params, metrics=metrics, out_dir=tmp / "procs", workers=2)
        row["sweep_2_processes_ms_per_case"] = (time.perf_counter() - t0) / n * 1e3
        t0 = time.perf_counter()
        st = mbcore.sweep(base, params, metrics=metrics, out_dir=tmp / "procs", workers=2)
        assert st.skipped == n
        row["resume_all_skipped_ms_per_case"] = (time.perf_counter() - t0) / n * 1e3
    row["note"] = ("overhead = median paired difference (sweep - plain loop), both "
                   "in-process: model dictionary copies, case keys, metrics, marking "
                   "the file, the index; 2 processes: wall time including the pool start")
    return {"sweep_fourbar_overhead": row}


def bench_simulation(repeat: int, quick: bool) -> dict:
    """``mbcore.Simulation.advance_to`` in a 1 kHz loop on the DAP four-bar
    (``simulation_fourbar_*``): µs per macro step of 1 ms over 1 s with rk4 (step
    1 ms) and dopri5 (rtol 1e-9), inputs unchanged (the integrator keeps its steps)
    and a torque changed every macro step (a restart each time), against one
    ``mbcore.run`` with the same 1 ms output grid (µs per output row)."""
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")
    t_end = 0.2 if quick else 1.0
    n = int(round(t_end / 1e-3))
    out: dict = {}
    for integ, extra in (("rk4", {"step": 1e-3}), ("dopri5", {})):
        s = {"integrator": integ, "t_end": t_end, "output_step": 1e-3, "record": "q,qd",
             **extra}

        def loop(change: bool) -> float:
            sim = mbcore.Simulation(model, s)
            t0 = time.perf_counter()
            for k in range(1, n + 1):
                if change:
                    sim["crank.torque"] = 0.1 * (k % 7)
                sim.advance_to(k * 1e-3)
                sim.outputs(["qd/crank.phi"])
            return (time.perf_counter() - t0) / n, sim.stats

        reps = max(3, repeat // 2)
        same = [loop(False) for _ in range(reps)]
        jump = [loop(True) for _ in range(reps)]
        runs = []
        for _ in range(reps):
            res = mbcore.run(model, analysis="dynamic", settings=s)
            runs.append(res.stats["wall_time"] / n)
        out[f"simulation_fourbar_{integ}"] = {
            "macro_step_s": 1e-3, "macro_steps": n,
            "advance_to_us": 1e6 * statistics.median(x[0] for x in same),
            "advance_to_input_jump_us": 1e6 * statistics.median(x[0] for x in jump),
            "run_us_per_row": 1e6 * statistics.median(runs),
            "steps": same[0][1]["steps"], "replay_steps": same[0][1]["replay_steps"],
            "steps_with_jumps": jump[0][1]["steps"], "loop": same[0][1]["loop"]}
    out.update(bench_simulation_loops(quick))
    return out


def bench_simulation_loops(quick: bool) -> dict:
    """``simulation_slider_{genalpha,bdf}``: 1000 calls ``advance_to(t + 1 ms)`` on the
    planar slider-crank (--quick: 200), the compiled multistep loop (one loop call
    kept running) against the Python driver (``loop: python``), inputs constant and
    a torque set every call (a restart each time: the kept integrator object
    restarted, that call run on the caller's thread); ms per 1000 calls, median of
    3, the compiled loop and the Python driver run alternately."""
    model = mbcore.Model.from_file(ROOT / "examples" / "slider_crank_dynamic.yaml")
    n = 200 if quick else 1000
    out: dict = {}
    for integ, extra in (("genalpha", {"step": 1e-3}), ("bdf", {})):
        row: dict = {"macro_step_s": 1e-3, "macro_steps": n}
        for change in (False, True):
            times: dict = {"auto": [], "python": []}
            for _ in range(3):
                for loop in ("auto", "python"):       # interleaved
                    sim = mbcore.Simulation(model, {"integrator": integ, "t_end": 1.0,
                                                    "loop": loop, **extra})
                    t0 = time.perf_counter()
                    for k in range(1, n + 1):
                        if change:
                            sim["crank.torque"] = 0.5 * (10.0 - sim["qd/crank.phi"])
                        sim.advance_to(k * 1e-3)
                    times[loop].append(time.perf_counter() - t0)
                    key = ("compiled" if loop == "auto" else "python") + (
                        "_input_set_ms" if change else "_ms")
                    row[key.replace("_ms", "_loop")] = sim.loop
            for loop, ts in times.items():
                key = ("compiled" if loop == "auto" else "python") + (
                    "_input_set_ms" if change else "_ms")
                row[key] = 1e3 * statistics.median(ts) * 1000 / n
        out[f"simulation_slider_{integ}"] = row
    return out


def bench_output_rows(repeat: int, quick: bool) -> dict:
    """The cost of one output row with every channel recorded (µs per row) on the
    compiled loop: ``(wall_time(2001 rows) - wall_time(11 rows)) / 1990`` of a 1 s
    dynamic run (``stats["wall_time"]``: without the model compile), median of
    ``repeat`` pairs, for ``settings.output_rows`` = ``block`` (the channels of a
    block of rows at once, each row's evaluation in one compiled call),
    ``block_python`` (the same, the per-row evaluation by Python calls) and
    ``reference`` (row by row), interleaved in the same run; and the same per
    channel (``record: <channel>``, 1001 rows, ``--quick``: fewer pairs) for block and
    reference.  Cases: examples/platform.yaml (planar, cs), spatial_heavy_top.yaml
    and spatial_slider_crank_dynamic.yaml (spatial, di)."""
    import statistics
    ex = ROOT / "examples"
    modes = ("block", "block_python", "reference")
    channels = ("q", "qd", "qdd", "lam", "reactions", "reactions_local", "forces",
                "points", "angular", "energy", "violation", "integrator")
    n_pairs = 3 if quick else max(5, repeat)

    def wall(path, rows, mode, record=None):
        st = {"t_end": 1.0, "output_step": 1.0 / (rows - 1), "output_rows": mode}
        if record:
            st["record"] = record
        return mbcore.run(path, analysis="dynamic", settings=st).stats["wall_time"]

    def per_row(path, mode, rows, record=None):
        return (wall(path, rows, mode, record) - wall(path, 11, mode, record)) \
            / (rows - 11) * 1e6

    out = {}
    for name in ("platform", "spatial_heavy_top", "spatial_slider_crank_dynamic"):
        path = ex / f"{name}.yaml"
        wall(path, 11, "block")                          # warm (imports, kernels)
        got = {m: [] for m in modes}
        for _ in range(n_pairs):
            for m in modes:
                got[m].append(per_row(path, m, 2001))
        row = {m + "_us_per_row": statistics.median(v) for m, v in got.items()}
        row["ratio_reference_over_block"] = (row["reference_us_per_row"]
                                             / row["block_us_per_row"])
        row["ratio_block_python_over_block"] = (row["block_python_us_per_row"]
                                                / row["block_us_per_row"])
        per_channel = {}
        for c in channels:
            pairs = {m: [] for m in ("block", "reference")}
            for _ in range(3 if quick else 5):
                for m in pairs:
                    pairs[m].append(per_row(path, m, 1001, c))
            per_channel[c] = {m: statistics.median(v) for m, v in pairs.items()}
        row["per_channel_us_per_row"] = per_channel
        row["note"] = ("every channel; per channel: record = that channel alone (the "
                       "q-only cost includes the loop's own cost per output)")
        out[f"{name}_output_rows"] = row
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    p.add_argument("--repeat", type=int, default=7, help="timing batches (median taken)")
    p.add_argument("--markdown", metavar="PATH",
                   help="also write the tables as markdown (benchmarks/BASELINE.md)")
    p.add_argument("--only", nargs="*", choices=("kinematics", "spatial", "spatial_dynamics",
                                                 "joint_coordinates", "jc_loops",
                                                 "rhs", "dynamics",
                                                 "chain", "integrators", "multistep",
                                                 "overheads",
                                                 "formulations", "cp", "startup_rows",
                                                 "penalty", "force_jacobians",
                                                 "spatial_dae_jacobians", "dijac",
                                                 "modes", "sweep", "simulation", "memory",
                                                 "output_rows"),
                   help="run only these groups (memory: only when named, it takes minutes)")
    args = p.parse_args(argv)
    report = {
        "mbcore": mbcore.__version__, "python": platform.python_version(),
        "numpy": np.__version__, "machine": platform.machine(),
        "repeat": args.repeat, "statistic": "median",
        "cases": {},
    }
    groups = {"kinematics": (bench_fourbar, bench_kinematics), "spatial": (bench_spatial,),
              "spatial_dynamics": (bench_spatial_dynamics,),
              "joint_coordinates": (bench_joint_coordinates,),
              "jc_loops": (bench_jc_loops,),
              "rhs": (bench_rhs,),
              "dynamics": (bench_dynamics,), "chain": (bench_chain_eom_cost,),
              "integrators": (bench_integrators,), "multistep": (bench_multistep,),
              "overheads": (bench_overheads,),
              "formulations": (bench_formulations,), "cp": (bench_cp,),
              "penalty": (bench_penalty,),
              "force_jacobians": (bench_force_jacobians,),
              "spatial_dae_jacobians": (bench_spatial_dae_jacobians,),
              "dijac": (bench_dijac,),
              "modes": (bench_modes,),
              "sweep": (bench_sweep,),
              "simulation": (bench_simulation,),
              "startup_rows": (bench_overheads_startup_rows,),
              "output_rows": (bench_output_rows,),
              "memory": (bench_memory,)}
    long_groups = ("memory",)            # run only when named in --only
    for key in (args.only or [g for g in groups if g not in long_groups]):
        for fn in groups[key]:
            report["cases"].update(fn(args.repeat, args.quick))
    json.dump(report, sys.stdout, indent=2)
    print()
    print(table(report), file=sys.stderr)
    if args.markdown:
        Path(args.markdown).write_text(markdown(report))
    return 0


def markdown(report: dict) -> str:
    """benchmarks/BASELINE.md: the machine, the date and one table per group."""
    import datetime
    import os
    lines = ["# Benchmark baseline", "",
             f"Generated by `python benchmarks/run.py --markdown benchmarks/BASELINE.md` on "
             f"{datetime.date.today().isoformat()}: mbcore {report['mbcore']}, Python "
             f"{report['python']}, NumPy {report['numpy']}, {report['machine']}, "
             f"{os.cpu_count()} cores (shared: absolute times are noisy, ratios come from "
             f"one run); median of {report['repeat']} batches.", ""]
    cases = report["cases"]
    groups = [
        ("Right-hand side (one evaluation, µs)", "_rhs",
         ["n", "m", "compiled_kernel_us", "compiled_python_call_us", "numpy_us", "ratio"]),
        ("Dynamic analyses (wall s per simulated s)", "_dynamics",
         ["simulated_s", "integrator", "rtol", "loop", "rhs_evaluations",
          "compiled_s_per_simulated_s", "numpy_s_per_simulated_s", "ratio",
          "energy_drift_rel", "peak_memory_mib"]),
        ("Formulations (compiled path)", "_formulation",
         ["simulated_s", "integrator", "compiled_s_per_simulated_s", "rhs_evaluations",
          "max_position_violation", "max_velocity_violation", "energy_drift_rel"]),
        ("Output rows, every channel (µs per row)", "_output_rows",
         ["block_us_per_row", "block_python_us_per_row", "reference_us_per_row",
          "ratio_reference_over_block", "ratio_block_python_over_block"]),
        ("Kinematic analyses", "_kinematic_analysis",
         ["output_steps", "compiled_steps_per_s", "numpy_steps_per_s", "ratio"]),
    ]
    for title, suffix, cols in groups:
        rows = {k: v for k, v in cases.items() if k.endswith(suffix)}
        if not rows:
            continue
        lines += [f"## {title}", "", "| case | " + " | ".join(cols) + " |",
                  "|---|" + "---|" * len(cols)]
        for k, v in rows.items():
            lines.append(f"| {k[:-len(suffix)]} | " + " | ".join(_fmt(v.get(c, "")) for c in cols)
                         + " |")
        lines.append("")
    rest = {k: v for k, v in cases.items()
            if not any(k.endswith(sfx) for _, sfx, _ in groups)}
    if rest:
        lines += ["## Other cases", ""]
        for k, v in rest.items():
            if isinstance(v, dict):
                items = ", ".join(f"{a} = {_fmt(b)}" for a, b in v.items()
                                  if not isinstance(b, (list, dict)) and a != "note")
                lines.append(f"- **{k}**: {items}")
        lines.append("")
    return "\n".join(lines)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3g}"
    return str(v)


def table(report: dict) -> str:
    """A readable summary of the JSON (stderr): one line per case."""
    keys = ("compiled_s_per_simulated_s", "numpy_s_per_simulated_s", "ratio",
            "rhs_evaluations", "energy_drift_rel", "max_position_violation",
            "compiled_kernel_us", "numpy_us",
            "compiled_steps_per_s", "exponent", "overhead_fraction",
            "extra_us_per_stage_call", "extra_us_per_call", "first_run_extra_s",
            "wall_time_s_per_simulated_s", "growth_mb", "block_us_per_row",
            "block_python_us_per_row", "reference_us_per_row")
    lines = []
    for name, row in report["cases"].items():
        if not isinstance(row, dict):
            continue
        parts = [f"{k}={row[k]:.4g}" if isinstance(row[k], float) else f"{k}={row[k]}"
                 for k in keys if k in row]
        lines.append(f"{name:34s} " + "  ".join(parts))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
