"""Error against right-hand-side evaluations on two heavy tops: the Lie-group integrator
``rkmk4`` on ``di_omega`` against ``rk4`` on ``di_omega`` and on ``di`` (the same four
evaluations per step, so equal steps are equal cost) and ``dopri5`` (``di``) at
several tolerances.

    PYTHONPATH=src python benchmarks/liegroup_heavy_top.py [--t-end 1.0] [--quick]

Prints JSON; asserts nothing.  The tops:

* ``spatial_heavy_top`` (examples/spatial_heavy_top.yaml): a thin disc spinning at
  200 rad/s about its symmetry axis on its steady precession; reference a ``dop853``
  run on ``di`` at rtol = atol = 1e-12 (mbcore's own; the analytic steady precession
  of the file is known to ~1e-8 only, the rounding of its initial rates, and its
  distance from the reference is reported);
* ``bruls_cardona_top``: the heavy top of Brüls & Cardona (2010), §5.2
  (benchmarks/accuracy_problems.py), reference the quadrature of Euler's equations
  there (SciPy DOP853, rtol 1e-13, independent of mbcore).  Their accuracy and cost
  figures could not be consulted here; the comparison is with these references.

``--speed``: instead, the wall time of ``rkmk4`` on ``di_omega`` on the compiled loop
(``run_lie``) and on the Python driver (``loop: python``), the median of ``--repeat``
interleaved runs of each in this process (1 s, h = 1e-3: 1000 steps, 10 outputs),
for both tops, and of ``rk4`` on ``di_omega`` and on ``di`` on its compiled loop for
scale; and the compiled step loop's cost per step (runs of 1 s and 4 s with one
output each: the difference of the medians over 3000 steps).

Errors at t_end: ``orientation`` is the angle (rad) of the rotation between the
body's orientation and the reference's (the integrated p normalised), ``position`` the
distance (m) of the centres of mass, ``norm_drift`` the largest |(|p| − 1)| of the
integrated p at the output times.  ``seconds`` is the wall time of the run (every
integrator here on its compiled loop, rkmk4 on ``run_lie``).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import mbcore
from mbcore import Model
from mbplugins.integrators.liegroup import quat_conj, quat_log, quat_mul

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "examples" / "spatial_heavy_top.yaml"
sys.path.insert(0, str(HERE))
from accuracy_problems import heavy_top_model, heavy_top_quadrature  # noqa: E402
#: steady precession (examples/spatial_heavy_top.yaml): rate, tilt, spin
OMEGA, THETA, OMEGA3 = 0.4915462, np.radians(30.0), 200.0


def run(model, t_end, **settings):
    t0 = time.perf_counter()
    res = mbcore.run(model, settings={"analysis": "dynamic", "t_end": t_end,
                                      "output_step": t_end / 10, **settings})
    sec = time.perf_counter() - t0
    return res, sec


def end_state(res):
    q = np.asarray(res["q"])
    return q[-1, :3], q[-1, 3:7], float(np.abs(np.linalg.norm(q[:, 3:7], axis=1) - 1).max())


def angle(p, p_ref):
    """The rotation angle between two orientations (p normalised)."""
    p = p / np.linalg.norm(p)
    return float(np.linalg.norm(quat_log(quat_mul(quat_conj(p_ref), p))))


def analytic(t):
    """Steady precession: p(t) = qz(Omega t) ⊗ p0 ⊗ qz(psidot t),
    psidot = w3 − Omega cos θ."""
    def qz(a):
        return np.array([np.cos(a / 2), 0.0, 0.0, np.sin(a / 2)])
    p0 = np.array([np.cos(THETA / 2), np.sin(THETA / 2), 0.0, 0.0])
    psidot = OMEGA3 - OMEGA * np.cos(THETA)
    return quat_mul(quat_mul(qz(OMEGA * t), p0), qz(psidot * t))


def compare(model, T, r_ref, p_ref, steps, tols):
    cases = [("rkmk4", "di_omega", {"step": h}) for h in steps]
    cases += [("rk4", "di_omega", {"step": h}) for h in steps]
    cases += [("rk4", "di", {"step": h}) for h in steps]
    cases += [("dopri5", "di", {"rtol": tol, "atol": tol}) for tol in tols]
    out = []
    for integ, form, extra in cases:
        res, sec = run(model, T, formulation=form, integrator=integ, **extra)
        r, p, drift = end_state(res)
        out.append({"integrator": integ, "formulation": form, **extra,
                    "nfev": int(res["integrator/rhs_evaluations"][-1]),
                    "orientation": angle(p, p_ref),
                    "position": float(np.linalg.norm(r - r_ref)),
                    "norm_drift": drift, "seconds": round(sec, 3),
                    "loop": res.stats.get("loop")})
    return out


def speed(repeat):
    """Median wall times (s) of rkmk4 on di_omega, compiled loop and Python driver,
    and of rk4 on di (compiled), 1 s at h = 1e-3 (the runs' last states of the two
    rkmk4 loops must agree bit for bit)."""
    import statistics
    out = {}
    for name, make in (("spatial_heavy_top", lambda: Model.from_file(EXAMPLE)),
                       ("bruls_cardona_top", heavy_top_model)):
        model = make()
        cases = (("rkmk4_compiled", "di_omega", "rkmk4", "auto"),
                 ("rkmk4_python", "di_omega", "rkmk4", "python"),
                 ("rk4_di_omega_compiled", "di_omega", "rk4", "auto"),
                 ("rk4_di_compiled", "di", "rk4", "auto"))
        ts, last = {c[0]: [] for c in cases}, {}
        for _ in range(repeat):                 # interleaved
            for key, form, integ, loop in cases:
                res, sec = run(model, 1.0, formulation=form, integrator=integ, step=1e-3,
                               loop=loop)
                ts[key].append(sec)
                last[key] = np.asarray(res["q"])[-1]
        times = {k: statistics.median(v) for k, v in ts.items()}
        # the step loop alone: one output, 1 s and 4 s (the difference / 3000 steps)
        per = {}
        for key, form, integ, loop in cases:
            if loop == "python":
                continue
            tt = {1.0: [], 4.0: []}
            for _ in range(repeat):
                for T in tt:
                    tt[T].append(run(model, T, formulation=form, integrator=integ,
                                     step=1e-3, output_step=T)[1])
            per[key] = round((statistics.median(tt[4.0]) - statistics.median(tt[1.0]))
                             / 3000 * 1e6, 2)
        out[name] = {**{k: round(v, 4) for k, v in times.items()},
                     "speedup": round(times["rkmk4_python"] / times["rkmk4_compiled"], 1),
                     "loop_microseconds_per_step": per,
                     "identical": bool(np.array_equal(last["rkmk4_compiled"],
                                                      last["rkmk4_python"]))}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--t-end", type=float, default=1.0)
    ap.add_argument("--quick", action="store_true", help="two steps and two tolerances")
    ap.add_argument("--speed", action="store_true",
                    help="wall times of rkmk4, compiled loop against Python driver")
    ap.add_argument("--repeat", type=int, default=5, help="runs per median (--speed)")
    a = ap.parse_args(argv)
    if a.speed:
        print(json.dumps(speed(max(a.repeat, 3)), indent=1))
        return
    T = a.t_end
    steps = [4e-3, 2e-3, 1e-3, 5e-4, 2.5e-4]
    tols = [1e-5, 1e-6, 1e-7, 1e-8, 1e-9]
    if a.quick:
        steps, tols = steps[1:3], tols[1:3]
    out = {"t_end": T}
    # the disc of examples/spatial_heavy_top.yaml
    model = Model.from_file(EXAMPLE)
    ref, _ = run(model, T, formulation="di", integrator="dop853", rtol=1e-12, atol=1e-12)
    r_ref, p_ref, _ = end_state(ref)
    out["spatial_heavy_top"] = {
        "reference": {"integrator": "dop853", "formulation": "di", "rtol": 1e-12,
                      "nfev": int(ref["integrator/rhs_evaluations"][-1]),
                      "off_analytic_orientation": angle(p_ref, analytic(T))},
        "runs": compare(model, T, r_ref, p_ref, steps, tols)}
    # the heavy top of Brüls & Cardona (2010)
    quad = heavy_top_quadrature(np.array([0.0, T]))
    p_ref = quad["_p"][-1] / np.linalg.norm(quad["_p"][-1])
    out["bruls_cardona_top"] = {
        "reference": "SciPy DOP853 quadrature of Euler's equations, rtol 1e-13",
        "runs": compare(heavy_top_model(), T, quad["com"][-1], p_ref, steps, tols)}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
