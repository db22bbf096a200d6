"""The MPRS benchmark bicycle (examples/whipple_bicycle.py; Meijaard et al. (2007)):
accuracy of the linearisation about straight running and wall time of nonlinear
runs; prints JSON.

``modes``: ``mbcore.linearize`` (about the steady motion, five cyclic coordinates)
of the nonlinear four-body model at the forward speeds of MPRS Table 2 (0 to 10 m/s
in steps of 0.5), the largest distance of its four non-rigid eigenvalues from those
of MPRS' linearised equations (``mprs_eigenvalues``: their Appendix A from the
Table 1 parameters, which reproduce Table 2), the weave and capsize speeds against
Table 2's 4.29238253634111 and 6.02426201538837 m/s, and the median time of one
linearisation.

``runs``: a 10 s nonlinear run at 5 m/s with a lean-rate perturbation of 0.05
rad/s at rtol 1e-8 for cs and di with dopri5 and dop853 on the compiled loop; the
median of ``--repeat`` runs of ``stats.wall_time`` (assembly, integration, output
rows; not the compile) and the seconds per simulated second.  cs takes 5-7x the
steps of di here: its step is set by the error test of the work integral (the
state behind ``energy/work_nc``), whose rate at the Runge-Kutta stages carries the
power of the Baumgarte terms (the stage states of the spinning wheels' Euler
parameters are off their norm by O(h^2)); with that state near 0 only ``atol``
bounds its error.

    python benchmarks/bicycle.py [--only modes|runs] [--repeat 3] [--atol 1e-10]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import mbcore  # noqa: E402
import whipple_bicycle as WB  # noqa: E402

T_END = 10.0
CYCLIC = WB.CYCLIC
WEAVE_SPEED = 4.29238253634111
CAPSIZE_SPEED = 6.02426201538837


def eigenvalues(v: float) -> np.ndarray:
    return WB.linear_eigenvalues(v)[0]


def modes(repeat: int) -> dict:
    from scipy.optimize import brentq
    speeds = np.arange(0.0, 10.01, 0.5)
    worst = 0.0
    for v in speeds:
        ev = eigenvalues(float(v))
        ref = WB.mprs_eigenvalues(float(v))
        if len(ev) != 4:
            raise SystemExit(f"v = {v}: {len(ev)} non-rigid eigenvalues")
        worst = max(worst, max(float(np.abs(ev - z).min()) for z in ref))

    def weave(v):
        return float(max(z.real for z in eigenvalues(v) if abs(z.imag) > 1e-6))

    def capsize(v):
        return float(max(z.real for z in eigenvalues(v) if abs(z.imag) <= 1e-6))
    vw = brentq(weave, 4.0, 4.6, xtol=1e-13)
    # the capsize eigenvalue meets the cyclic coordinates' zero eigenvalues at its
    # crossing: its branch interpolated from 0.02-0.08 m/s on either side
    v0 = brentq(capsize, 5.8, 6.3, xtol=2e-3)
    vs = v0 + np.array([-0.08, -0.05, -0.02, 0.02, 0.05, 0.08])
    poly = np.polynomial.Polynomial.fit(vs, [capsize(v) for v in vs], 5)
    vc = [r.real for r in poly.roots() if abs(r.imag) < 1e-12 and vs[0] < r.real < vs[-1]][0]
    times = []
    model = WB.bicycle(5.0)
    for _ in range(repeat):
        t0 = time.perf_counter()
        mbcore.linearize(model, settings={"about": "motion", "cyclic": CYCLIC})
        times.append(time.perf_counter() - t0)
    return {"speeds": len(speeds), "max_eigenvalue_error": worst,
            "weave_speed": vw, "weave_speed_error": abs(vw - WEAVE_SPEED),
            "capsize_speed": vc, "capsize_speed_error": abs(vc - CAPSIZE_SPEED),
            "linearize_seconds_median": statistics.median(times)}


def runs(repeat: int, rtol: float, atol: float, output_step: float, record: str) -> list:
    out = []
    for f in ("cs", "di"):
        for integ in ("dopri5", "dop853"):
            st = {"t_end": T_END, "output_step": output_step, "formulation": f,
                  "integrator": integ, "rtol": rtol, "atol": atol}
            if record:
                st["record"] = record
            walls = []
            for _ in range(repeat):
                res = mbcore.run(WB.bicycle(5.0, lean_rate=0.05), analysis="dynamic",
                                 settings=st)
                walls.append(res.stats["wall_time"])
            w = statistics.median(walls)
            s = res.stats
            out.append({"formulation": f, "integrator": integ, "loop": s["loop"],
                        "steps": s["integrator_nsteps"], "nfev": s["integrator_nfev"],
                        "wall_seconds_median": w, "seconds_per_simulated_second": w / T_END})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("modes", "runs"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--atol", type=float, default=1e-10)
    ap.add_argument("--output-step", type=float, default=0.01)
    ap.add_argument("--record", default="", help="channels of the runs (default: all)")
    a = ap.parse_args(argv)
    report = {"benchmark": "bicycle"}
    if a.only in (None, "modes"):
        report["modes"] = modes(a.repeat)
    if a.only in (None, "runs"):
        report["runs"] = {"t_end": T_END, "speed": 5.0, "lean_rate": 0.05, "rtol": a.rtol,
                          "atol": a.atol, "output_step": a.output_step,
                          "record": a.record or "all",
                          "results": runs(a.repeat, a.rtol, a.atol, a.output_step, a.record)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
