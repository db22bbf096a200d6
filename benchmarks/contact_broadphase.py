"""Cost of many colliding spheres (``spatial:sphere_group``) against their number:
``python benchmarks/contact_broadphase.py`` prints JSON.

For N = 100, 300, 1000, 3000, 10000 spheres (R = 0.05 m) packed into a box (a
floor and four walls) on a jittered cubic lattice of spacing 0.095 m — the moment a
falling pile lands: every sphere overlaps its lattice neighbours, ~3 sphere pairs
and up to 3 planes in contact per sphere — with random velocities and spins, it
times (median of ``--repeat`` runs):

* ``forces_us``: one evaluation of the generalised forces (``System.forces``: the
  kernel's broad phase, narrow phase and law, gravity), compiled and, up to
  ``--numpy-max`` spheres, the NumPy reference (``ratio`` = NumPy / compiled);
* ``rhs_us``: one right-hand-side evaluation of the compiled dynamic analysis
  (formulation ``di``: forces, the Euler-parameter mass and normalisation rows,
  the sparse Schur solve), as the compiled integration loop calls it;
* ``separated_forces_us``: the same lattice spaced so that no two spheres touch
  (the broad phase and the sphere-plane tests alone);
* with ``--t-end T`` > 0, a compiled dopri5 run of T s of the landing pile
  (``run_us_per_step``, start-up included).

``exponent_*`` is the slope of log(cost) against log(N) fitted over all N (1 for
linear growth; N log N over this range would give ~1.15; the brute-force O(N^2)
pair search would give 2).  Measured on a 2-core machine (512 KB L2 per core):
the separated lattice grows exactly linearly; the landing pile's cost per sphere
grows ~1.4x from 1000 to 10000 spheres at a constant number of contacts per
sphere, as its working set (q, qd, Q: 1.7 MB at 10000) leaves the L2 cache.  The
whole run takes well under a minute.
Broad phase: a hashed uniform grid, Ericson (2005), ch. 7.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

import mbcore
from mbcore.plugins import registry

R = 0.05
SPACING = 0.095


def pile(n: int, seed: int = 0, spacing: float = SPACING) -> mbcore.Model:
    """n spheres on a jittered cubic lattice touching a floor and four walls
    (``spacing`` 0.095: neighbours overlap; 0.12: no two spheres touch)."""
    rng = np.random.default_rng(seed)
    side = int(np.ceil(n ** (1.0 / 3.0)))
    m = mbcore.Model(f"pile{n}")
    m.set_dimensions(3)
    m.gravity = (0.0, 0.0, -9.81)
    names = []
    for k in range(n):
        ijk = np.array([k % side, (k // side) % side, k // side ** 2])
        pos = R + spacing * ijk + rng.uniform(-0.003, 0.003, 3) - 0.004
        m.add_body(f"s{k}", mass=0.25, inertia=[2.5e-4] * 3, position=list(pos),
                   velocity=list(rng.normal(scale=0.5, size=3)),
                   angular_velocity=list(rng.normal(scale=5.0, size=3)))
        names.append(f"s{k}")
    wall = spacing * (side - 1) + 2 * R - 0.008
    planes = {"floor": {"normal": [0, 0, 1]},
              "x0": {"normal": [1, 0, 0]}, "x1": {"point": [wall, 0, 0], "normal": [-1, 0, 0]},
              "y0": {"normal": [0, 1, 0]}, "y1": {"point": [0, wall, 0], "normal": [0, -1, 0]}}
    m.add_force("sphere_group", "box", spheres=names, radius=R, planes=planes,
                stiffness=1e5, damping=3.75e4, friction=0.3, slip_velocity=0.01)
    return m


def _time(fn, number: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time of ``number`` calls (s)."""
    fn()
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return statistics.median(out)


def _slope(ns, ts) -> float:
    return float(np.polyfit(np.log(ns), np.log(ts), 1)[0])


def bench(n: int, repeat: int, numpy_max: int, t_end: float) -> dict:
    t0 = time.perf_counter()
    model = pile(n)
    sc = model.compile(kernels="compiled")
    compile_s = time.perf_counter() - t0
    st = sc.initial_state(0.0)
    q, qd = st.q.copy(), st.qd.copy()
    number = max(3, int(2e5 / n))
    out = {"n": n, "coordinates": sc.n, "compile_s": compile_s}
    out["forces_us"] = _time(lambda: sc.forces(q, qd, 0.0), number, repeat) * 1e6
    out["forces_us_per_sphere"] = out["forces_us"] / n
    o = sc.force_outputs(q, qd, 0.0)
    lab = dict(zip(sc.force_labels, o))
    out["sphere_contacts"] = int(lab["box.sphere_contacts"])
    out["plane_contacts"] = int(lab["box.plane_contacts"])
    # the same lattice with no sphere touching another: the broad phase and the
    # sphere-plane tests alone
    ss = pile(n, spacing=0.12).compile(kernels="compiled")
    s2 = ss.initial_state(0.0)
    out["separated_forces_us"] = _time(lambda: ss.forces(s2.q, s2.qd, 0.0), number,
                                       repeat) * 1e6
    fc = registry().get("formulation", "di")(sc, {})
    y = np.concatenate([q, qd, [0.0]])
    if getattr(fc, "compiled", None) is not None:
        out["rhs_us"] = statistics.median(fc.compiled.timeit(0.0, y, number)
                                          for _ in range(repeat)) * 1e6
    if n <= numpy_max:
        sn = model.compile(kernels="numpy")
        out["numpy_forces_us"] = _time(lambda: sn.forces(q, qd, 0.0), max(2, number // 50),
                                       repeat) * 1e6
        out["ratio"] = out["numpy_forces_us"] / out["forces_us"]
    if t_end > 0:
        t0 = time.perf_counter()
        res = mbcore.run(model, kernels="compiled", settings={
            "analysis": "dynamic", "t_end": t_end, "output_step": t_end,
            "integrator": "dopri5", "rtol": 1e-6, "atol": 1e-8})
        wall = time.perf_counter() - t0
        steps = float(res["integrator/steps"][-1])
        out["run_s"] = wall
        out["steps"] = steps
        out["run_us_per_step"] = wall / steps * 1e6 if steps else None
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,1000,3000,10000")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--numpy-max", type=int, default=1000,
                    help="time the NumPy reference up to this many spheres")
    ap.add_argument("--t-end", type=float, default=0.0,
                    help="simulated time of the timed run per size (0: none)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    t0 = time.perf_counter()
    rows = [bench(n, args.repeat, args.numpy_max, args.t_end) for n in sizes]
    ns = [r["n"] for r in rows]
    result = {"benchmark": "contact_broadphase", "machine": platform.machine(),
              "python": platform.python_version(), "sizes": rows,
              "exponent_forces": _slope(ns, [r["forces_us"] for r in rows])}
    result["exponent_separated_forces"] = _slope(ns, [r["separated_forces_us"] for r in rows])
    if all("rhs_us" in r for r in rows):
        result["exponent_rhs"] = _slope(ns, [r["rhs_us"] for r in rows])
    if all(r.get("run_us_per_step") for r in rows):
        result["exponent_step"] = _slope(ns, [r["run_us_per_step"] for r in rows])
    numpy_rows = [r for r in rows if "numpy_forces_us" in r]
    if len(numpy_rows) > 1:
        result["exponent_numpy_forces"] = _slope([r["n"] for r in numpy_rows],
                                                 [r["numpy_forces_us"] for r in numpy_rows])
    result["total_s"] = time.perf_counter() - t0
    print(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
