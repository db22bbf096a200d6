"""mbcore benchmarks: one command, JSON on stdout.

    python benchmarks/run.py [--quick] [--repeat N]

Each case is measured on the compiled path and on the NumPy reference path in the
same run; we report the median of ``repeat`` timings (the machines are shared and
noisy) and the ratio numpy/compiled.  Cases:

* ``fourbar_evaluation``: one kinematic evaluation of the KAP four-bar
  (004 §5.2.1) = time functions + phi + Jacobian + nu + gamma at a state.
* ``fourbar_newton_iteration``: phi + Jacobian + LU factor + solve.
* ``fourbar_kinematic_analysis``: a whole kinematic analysis, 1000 output times,
  in-memory results (output steps per second).
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
from mbcore.linalg import dense_lu

ROOT = Path(__file__).resolve().parents[1]


def _time(fn, number: int, repeat: int) -> float:
    """Median seconds per call over ``repeat`` batches of ``number`` calls."""
    fn()  # warm up
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def bench_fourbar(repeat: int, quick: bool) -> dict:
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_kap.yaml")
    out: dict = {}
    systems = {k: model.compile(kernels=k) for k in ("compiled", "numpy")}
    res = mbcore.run(model, kernels="compiled")
    q, qd = res["q"][5].copy(), res["qd"][5].copy()

    def evaluation(s):
        def f():
            s._ft = None          # force the time functions to be re-evaluated
            s.phi(q, 0.3)
            s.jacobian(q, 0.3)
            s.nu(q, 0.3)
            s.gamma(q, qd, 0.3)
        return f

    def newton(s):
        lu = dense_lu(s.n, s.backend)
        b = np.empty(s.n)

        def f():
            s._ft = None
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
    (004 §5.2.2), Peaucellier-Lipkin (002 §6.2), link-gear multiplier (002 §6.3)."""
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


def bench_dynamics(repeat: int, quick: bool) -> dict:
    """Wall time per simulated second (dynamic analysis, DI, dopri5 at rtol 1e-8),
    compiled vs NumPy, and right-hand-side evaluations."""
    out = {}
    t_end = 1.0 if quick else 10.0
    pend = mbcore.Model("pendulum")
    pend.set_gravity(0, -9.81)
    pend.add_body("rod", mass=1.0, inertia=1.0 / 12, position=(0.5, 0.0))
    pend.add_joint("revolute", "pivot", body_i="ground", body_j="rod", point_i=(0, 0),
                   point_j=(-0.5, 0))
    pend.settings = {"analysis": "dynamic"}
    models = {"pendulum": pend,
              "fourbar": mbcore.Model.from_file(ROOT / "examples" / "fourbar_dap.yaml")}
    settings = {"t_end": t_end, "output_step": 0.01, "formulation": "di", "rtol": 1e-8,
                "atol": 1e-10}
    for name, model in models.items():
        res = {}

        def go(k):
            res[k] = mbcore.run(model, settings=settings, kernels=k)
        tc = _time(lambda: go("compiled"), 1, max(1, repeat // 2))
        tn = _time(lambda: go("numpy"), 1, max(1, repeat // 2))
        E = res["compiled"]["energy/total"]
        scale = float(np.max(res["compiled"]["energy/kinetic"])) or 1.0
        out[f"{name}_dynamics"] = {
            "simulated_s": t_end, "compiled_s_per_simulated_s": tc / t_end,
            "numpy_s_per_simulated_s": tn / t_end, "ratio": tn / tc,
            "rhs_evaluations": int(res["compiled"].stats.get("integrator_nfev", 0)),
            "energy_drift_rel": float(np.max(np.abs(E - E[0])) / scale)}
    return out


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
        "note": "4 revolutes as one Python-only group; 3 stages (phi, jacobian, gamma)"}
    model = mbcore.Model.from_file(ROOT / "examples" / "slider_crank.yaml")
    settings = {"t_end": 5.3, "output_step": 0.01 if quick else 0.001}
    tmp = tempfile.mkdtemp()
    tm = _time(lambda: mbcore.run(model, settings=settings), 1, repeat)
    th = _time(lambda: mbcore.run(model, settings=settings, output=f"{tmp}/r.h5"), 1, repeat)
    out["hdf5_streaming_overhead"] = {
        "output_steps": int(round(5.3 / settings["output_step"])) + 1,
        "memory_only_s": tm, "with_hdf5_s": th, "overhead_fraction": (th - tm) / th}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer iterations (smoke run)")
    p.add_argument("--repeat", type=int, default=7, help="timing batches (median taken)")
    args = p.parse_args(argv)
    report = {
        "mbcore": mbcore.__version__, "python": platform.python_version(),
        "numpy": np.__version__, "machine": platform.machine(),
        "repeat": args.repeat, "statistic": "median",
        "cases": {**bench_fourbar(args.repeat, args.quick),
                  **bench_kinematics(args.repeat, args.quick),
                  **bench_dynamics(args.repeat, args.quick),
                  **bench_overheads(args.repeat, args.quick)},
    }
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
