"""Wall time of the MPRS benchmark bicycle (examples/whipple_bicycle.py): a 10 s
nonlinear run at 5 m/s with a lean-rate perturbation of 0.05 rad/s, rtol 1e-8,
for cs and di with dopri5 and dop853; the median of 3 runs of ``stats.wall_time``
(the analysis: assembly, integration and output rows; not the model's compile) and
the seconds per simulated second.

cs takes 5-7x the steps of di here: its step is set by the error test of the work
integral (the state behind ``energy/work_nc``, integrated even when ``energy`` is
not recorded), whose rate at the Runge-Kutta stages, off the constraint manifold by
O(h^2) for the spinning wheels' Euler parameters, carries the power of the
Baumgarte terms, O(h^4) (di: round-off); with that state near 0 only ``atol``
bounds its error, so the steps scale as atol^(-1/5) without rejections.

    PYTHONPATH=src python benchmarks/bicycle.py [--atol 1e-10] [--output-step 0.01]
                                                [--record q,qd] [--repeat 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import mbcore  # noqa: E402
import whipple_bicycle as WB  # noqa: E402

T_END = 10.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--atol", type=float, default=1e-10)
    ap.add_argument("--rtol", type=float, default=1e-8)
    ap.add_argument("--output-step", type=float, default=0.01)
    ap.add_argument("--record", default="")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--formulations", default="cs,di")
    ap.add_argument("--integrators", default="dopri5,dop853")
    a = ap.parse_args(argv)
    print(f"10 s at 5 m/s, lean rate 0.05 rad/s, rtol {a.rtol:g}, atol {a.atol:g}, "
          f"output_step {a.output_step:g}, record {a.record or 'all'}")
    print(f"{'formulation':12s}{'integrator':11s}{'loop':10s}{'steps':>7s}{'nfev':>8s}"
          f"{'wall [s]':>10s}{'s per sim s':>13s}")
    for f in a.formulations.split(","):
        for integ in a.integrators.split(","):
            st = {"t_end": T_END, "output_step": a.output_step, "formulation": f,
                  "integrator": integ, "rtol": a.rtol, "atol": a.atol}
            if a.record:
                st["record"] = a.record
            walls = []
            for _ in range(a.repeat):
                res = mbcore.run(WB.bicycle(5.0, lean_rate=0.05), analysis="dynamic",
                                 settings=st)
                walls.append(res.stats["wall_time"])
            w = statistics.median(walls)
            s = res.stats
            print(f"{f:12s}{integ:11s}{s['loop']:10s}{s['integrator_nsteps']:7d}"
                  f"{s['integrator_nfev']:8d}{w:10.3f}{w / T_END:13.4f}")


if __name__ == "__main__":
    main()
