"""Störmer–Verlet on the IFToMM A01 simple pendulum over 2000 s: bounded energy error
(one command, JSON).

    python benchmarks/verlet_energy.py [--t-end 2000] [--step 0.01]

IFToMM benchmark problem A01 (the simple pendulum: a 1 kg point mass on a massless
rod of 1 m, pinned at the origin, released at rest from the horizontal, gravity
9.81 m/s², https://www.iftomm-multibody.org/benchmark/), as one body (inertia 1e-6
kg m² about its centre) on a revolute joint, integrated in joint coordinates (the
pendulum angle: a constant mass matrix and a conservative force, where Störmer–Verlet
is symplectic, Hairer, Lubich & Wanner (2006), §IX.8) by ``verlet`` (both forms) and,
at the same step and one evaluation per step against four, by ``rk4``.  The energy
error ``max |E(t) - E(0)|`` (E = T + V, no non-conservative work) over the first and
the last 100 s: bounded for Verlet (no drift), growing for rk4 (dissipative).  Prints
JSON, asserts nothing."""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

import mbcore


def a01() -> mbcore.Model:
    m = mbcore.Model("iftomm_a01")
    m.set_gravity(0.0, -9.81)
    m.add_body("bob", mass=1.0, inertia=1e-6, position=(1.0, 0.0))
    m.add_joint("revolute", "pin", body_i="ground", body_j="bob", point_i=(0.0, 0.0),
                point_j=(-1.0, 0.0))
    return m


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--t-end", type=float, default=2000.0)
    ap.add_argument("--step", type=float, default=0.01)
    a = ap.parse_args(argv)
    model = a01()
    rows = []
    window = 100.0
    for integ, extra in (("verlet", {}), ("verlet", {"form": "dkd"}), ("rk4", {})):
        settings = {"formulation": "joint_coordinates", "integrator": integ,
                    "step": a.step, "t_end": a.t_end, "output_step": 0.1}
        if extra:
            settings["integrator_options"] = extra
        t0 = time.perf_counter()
        res = mbcore.run(model, analysis="dynamic", settings=settings)
        wall = time.perf_counter() - t0
        t = np.asarray(res.t)
        e = np.asarray(res["energy"])[:, 2]          # total = kinetic + potential
        de = np.abs(e - e[0])
        first, last = de[t <= window], de[t >= t[-1] - window]
        rows.append({"integrator": integ, **extra, "step": a.step,
                     "nfev": res.stats.get("integrator_nfev"), "wall_s": wall,
                     "energy_error_first_100s": float(first.max()),
                     "energy_error_last_100s": float(last.max()),
                     "drift_last_over_first": float(last.max() / first.max())})
    out = {"benchmark": "verlet_energy_iftomm_a01", "t_end": a.t_end, "rows": rows}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
