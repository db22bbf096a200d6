"""Scalable benchmark models and the equations-of-motion cost measurement.

* :func:`chain` — a planar pendulum chain of N links joined by revolutes, link 0
  pinned to the ground, released from rest horizontally under gravity.
* :func:`tree` — a binary tree of links (the tree counterpart of the chain).
* :func:`a02` — the IFToMM A02 N-four-bar (singular twice per revolution) and its
  exact one-degree-of-freedom motion :func:`a02_reference`.
* :func:`stiff_chain` — N point masses hanging from the ground on stiff ``tsda``
  springs (k large: the highest spring frequency makes explicit integrators take
  tiny steps).
* :func:`bench_chain_eom` — seconds per ``AccelerationSolver.solve`` for chains of
  N links, with the fitted exponent of the cost in N (target: ≤ 1.05).

All models are built through the public API (:class:`mbcore.Model` ``add_*``).
"""
from __future__ import annotations

import math
import statistics
import time

import numpy as np

import mbcore


def chain(n_links: int, *, length: float = 1.0, mass: float = 1.0, gravity: float = 9.81,
          name: str | None = None) -> mbcore.Model:
    """Planar pendulum chain: ``n_links`` uniform slender links of ``length`` and
    ``mass`` (centroidal inertia m L^2/12) joined end to end by revolutes, link 0
    pinned to the ground at the origin; initially horizontal along +x and at rest,
    gravity (0, -g).  2 N constraint equations, 3 N coordinates."""
    m = mbcore.Model(name or f"chain{n_links}")
    m.set_gravity(0.0, -gravity)
    inertia = mass * length ** 2 / 12.0
    h = 0.5 * length
    for k in range(n_links):
        m.add_body(f"L{k}", mass=mass, inertia=inertia, position=((k + 0.5) * length, 0.0),
                   angle=0.0)
        m.add_joint("revolute", f"J{k}", body_i="ground" if k == 0 else f"L{k - 1}",
                    body_j=f"L{k}", point_i=(0.0, 0.0) if k == 0 else (h, 0.0),
                    point_j=(-h, 0.0))
    m.settings.update({"analysis": "dynamic", "formulation": "di", "integrator": "dopri5",
                       "rtol": 1e-6, "atol": 1e-8, "t_end": 1.0, "output_step": 0.01})
    return m


def tree(depth: int, *, length: float = 1.0, mass: float = 1.0,
         gravity: float = 9.81) -> mbcore.Model:
    """Binary tree of links: a root link pinned to the ground, every link carrying two
    children pinned at its far end (2^depth - 1 links), spread out in a fan and at
    rest under gravity.  A topology whose Schur complement needs a
    minimum-degree ordering (a band ordering fills in)."""
    m = mbcore.Model(f"tree{depth}")
    m.set_gravity(0.0, -gravity)
    inertia = mass * length ** 2 / 12.0
    h = 0.5 * length
    # breadth-first numbering: node k has children 2k+1, 2k+2
    n = 2 ** depth - 1
    tip = {-1: np.zeros(2)}
    for k in range(n):
        parent = (k - 1) // 2 if k else -1
        level = int(math.floor(math.log2(k + 1)))
        pos_in_level = k + 1 - 2 ** level
        ang = -0.5 * math.pi + (pos_in_level + 0.5) / 2 ** level * math.pi - 0.5 * math.pi
        ang = 0.3 * ang                          # a fan around straight down
        e = np.array([math.cos(ang), math.sin(ang)])
        start = tip[parent]
        centre = start + h * e
        tip[k] = start + length * e
        m.add_body(f"T{k}", mass=mass, inertia=inertia, position=tuple(centre), angle=ang)
        if parent < 0:
            m.add_joint("revolute", f"R{k}", body_i="ground", body_j=f"T{k}",
                        point_i=tuple(start), point_j=(-h, 0.0))
        else:
            m.add_joint("revolute", f"R{k}", body_i=f"T{parent}", body_j=f"T{k}",
                        point_i=(h, 0.0), point_j=(-h, 0.0))
    return m


def stiff_chain(n: int, *, k: float = 1.0e6, mass: float = 1.0, spacing: float = 1.0,
                damping: float = 0.0, gravity: float = 9.81) -> mbcore.Model:
    """N point masses (small inertia) hanging in a vertical line from the ground,
    each joined to the one above (mass 0 to the ground at the origin) by a ``tsda``
    spring of stiffness ``k`` and free length ``spacing``; released from the
    unstretched configuration.  The highest natural frequency grows like
    sqrt(k/m)·2, so explicit integrators are limited by stability, not accuracy."""
    m = mbcore.Model(f"stiff_chain{n}")
    m.set_gravity(0.0, -gravity)
    for i in range(n):
        m.add_body(f"M{i}", mass=mass, inertia=1e-2 * mass,
                   position=(0.0, -(i + 1) * spacing))
        m.add_force("tsda", f"S{i}", body_i="ground" if i == 0 else f"M{i - 1}",
                    body_j=f"M{i}", point_i=(0.0, 0.0), point_j=(0.0, 0.0), stiffness=k,
                    damping=damping, free_length=spacing)
    m.settings.update({"analysis": "dynamic", "formulation": "di", "integrator": "dopri5",
                       "rtol": 1e-6, "atol": 1e-8, "t_end": 0.1, "output_step": 0.01})
    return m


def stiff_pendulum(k: float = 1.0e6, c: float = 2.0e3) -> mbcore.Model:
    """A pendulum rod carrying a bob on a very stiff, damped spring along a
    translational joint (k = 1e6): explicit integrators are limited by stability,
    stiff methods by accuracy.  Used by tests/test_partitioning.py and
    tests/test_stiff.py."""
    m = mbcore.Model("stiff_pendulum")
    m.set_gravity(0, -9.81)
    m.add_body("rod", mass=1.0, inertia=1 / 12, position=(0.5, 0.0))
    m.add_joint("revolute", "pivot", body_i="ground", body_j="rod", point_i=(0, 0),
                point_j=(-0.5, 0))
    m.add_body("bob", mass=0.5, inertia=0.01, position=(1.1, 0.0))
    m.add_joint("translational", "slide", body_i="rod", body_j="bob", point_i=(0.5, 0))
    m.add_force("tsda", "k", body_i="rod", body_j="bob", point_i=(0.5, 0),
                stiffness=k, damping=c, free_length=0.6)
    return m


def a02(n: int = 40, *, t_end: float = 20.0, rtol: float = 1e-6,
        formulation: str = "penalty") -> mbcore.Model:
    """IFToMM benchmark A02, the N-four-bar: ``n`` parallelogram windows, 2 n + 1
    uniform rods of 1 m and 1 kg (inertia 1/12 about the centre).  Cranks
    ``crank0..crank{n}`` pinned to the ground at (i, 0) and vertical, couplers
    ``coupler0..coupler{n-1}`` horizontal at y = 1 joining the crank tips
    (joints ``O{i}`` ground-crank, ``A{i}`` crank{i}-coupler{i}, ``B{i}``
    coupler{i}-crank{i+1}); gravity -9.81 y; point B0 (the tip of crank0) starts at
    +1 m/s in x (all cranks at -1 rad/s, couplers translating).  Every horizontal
    passage (twice per revolution) is a singular configuration: the Jacobian loses
    n ranks.  3 (2 n + 1) coordinates, 2 (n + 1) + 4 n constraint rows, 1 DOF.
    Exact motion: :func:`a02_reference`."""
    m = mbcore.Model(f"a02_{n}")
    m.set_gravity(0.0, -9.81)
    w0 = -1.0
    for k in range(n + 1):
        m.add_body(f"crank{k}", mass=1.0, inertia=1.0 / 12.0, position=(float(k), 0.5),
                   angle=0.5 * math.pi, velocity=(-w0 * 0.5, 0.0), angular_velocity=w0)
    for k in range(n):
        m.add_body(f"coupler{k}", mass=1.0, inertia=1.0 / 12.0, position=(k + 0.5, 1.0),
                   angle=0.0, velocity=(-w0, 0.0))
    for k in range(n + 1):
        m.add_joint("revolute", f"O{k}", body_i="ground", body_j=f"crank{k}",
                    point_i=(float(k), 0.0), point_j=(-0.5, 0.0))
    for k in range(n):
        m.add_joint("revolute", f"A{k}", body_i=f"crank{k}", body_j=f"coupler{k}",
                    point_i=(0.5, 0.0), point_j=(-0.5, 0.0))
        m.add_joint("revolute", f"B{k}", body_i=f"coupler{k}", body_j=f"crank{k + 1}",
                    point_i=(0.5, 0.0), point_j=(0.5, 0.0))
    m.settings.update({"analysis": "dynamic", "formulation": formulation,
                       "integrator": "dopri5", "rtol": rtol, "atol": rtol * 1e-2,
                       "t_end": t_end, "output_step": 0.01})
    return m


def a02_reference(n: int = 40, t_end: float = 20.0):
    """The exact motion of :func:`a02`: every crank turns by the same angle theta
    (the couplers translate), a one-degree-of-freedom system with ``T = T_c
    theta'^2``, ``T_c = (n + 1)/6 + n/2`` (cranks about their pivots, m L^2 / 3 / 2;
    couplers translating at speed theta'), ``V = V_c sin(theta)``, ``V_c = 9.81 ((n +
    1)/2 + n)``, so ``theta'' = -V_c cos(theta) / (2 T_c)``, theta(0) = pi/2,
    theta'(0) = -1.  Returns ``B0(t) -> (x, y)`` (the tip of crank0, (cos theta, sin
    theta)) from DOP853 at rtol = atol = 1e-13; energy conservation ``T_c theta'^2 +
    V_c sin(theta) = T_c + V_c`` holds along it to ~1e-12 (checked by the benchmark)."""
    from scipy.integrate import solve_ivp
    Tc = (n + 1) / 6.0 + n / 2.0
    Vc = 9.81 * ((n + 1) / 2.0 + n)

    def f(t, y):
        return [y[1], -Vc * math.cos(y[0]) / (2.0 * Tc)]
    sol = solve_ivp(f, (0.0, t_end), [0.5 * math.pi, -1.0], method="DOP853", rtol=1e-13,
                    atol=1e-13, dense_output=True)

    def b0(t):
        th = sol.sol(np.asarray(t, dtype=float))[0]
        return np.cos(th), np.sin(th)
    b0.energy_error = lambda t: float(np.max(np.abs(
        Tc * sol.sol(t)[1] ** 2 + Vc * np.sin(sol.sol(t)[0]) - (Tc + Vc)))) / (Tc + Vc)
    b0.theta = lambda t: sol.sol(np.asarray(t, dtype=float))[0]
    return b0


def chain_state(system, seed: int = 0, length: float = 1.0):
    """A consistent state of a :func:`chain` system (links of ``length``): links at
    ``0.3 sin(k)``-like pseudo-random angles with random angular rates, positions and
    velocities computed from the joint equations (so gamma is the true one)."""
    nb = system.nb
    rng = np.random.default_rng(seed)
    phi = np.cumsum(rng.uniform(-0.4, 0.4, nb))
    w = rng.uniform(-1.0, 1.0, nb)
    c, s = np.cos(phi), np.sin(phi)
    # link k: tip_k = tip_{k-1} + L e_k; centre = tip_{k-1} + L/2 e_k
    L = length
    tipx = np.concatenate([[0.0], np.cumsum(L * c)])
    tipy = np.concatenate([[0.0], np.cumsum(L * s)])
    vx_tip = np.concatenate([[0.0], np.cumsum(-L * w * s)])
    vy_tip = np.concatenate([[0.0], np.cumsum(L * w * c)])
    q = np.zeros(system.n)
    qd = np.zeros(system.n)
    q[0::3] = tipx[:-1] + 0.5 * L * c
    q[1::3] = tipy[:-1] + 0.5 * L * s
    q[2::3] = phi
    qd[0::3] = vx_tip[:-1] - 0.5 * L * w * s
    qd[1::3] = vy_tip[:-1] + 0.5 * L * w * c
    qd[2::3] = w
    return q, qd


def spatial_chain(n_links: int, *, length: float = 1.0, mass: float = 1.0,
                  gravity: float = 9.81) -> mbcore.Model:
    """Spatial pendulum chain: ``n_links`` slender rods (J' = diag(m L^2/1200,
    m L^2/12, m L^2/12)) joined end to end by spherical joints, rod 0 on a ball
    joint at the origin; initially along +x at rest, gravity -z.  3 N joint rows and
    N normalisation rows, 7 N coordinates."""
    m = mbcore.Model(f"spatial_chain{n_links}")
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -gravity)
    jt = mass * length ** 2 / 12.0
    h = 0.5 * length
    for k in range(n_links):
        m.add_body(f"L{k}", mass=mass, inertia=[jt / 100.0, jt, jt],
                   position=((k + 0.5) * length, 0.0, 0.0))
        m.add_joint("spherical", f"J{k}", body_i="ground" if k == 0 else f"L{k - 1}",
                    body_j=f"L{k}", point_i=(0.0, 0.0, 0.0) if k == 0 else (h, 0.0, 0.0),
                    point_j=(-h, 0.0, 0.0))
    m.settings.update({"analysis": "dynamic", "formulation": "di", "integrator": "dopri5",
                       "rtol": 1e-6, "atol": 1e-8, "t_end": 1.0, "output_step": 0.01})
    return m


def spatial_chain_state(system, seed: int = 0):
    """A consistent state of a :func:`spatial_chain`: random orientations and angular
    velocities, positions and velocities from the joints (rod k's tip is rod k+1's
    base); pdot = G(p)^T omega / 2."""
    from mbcore.elements.rotations import A as Amat, G as Gmat, normalize
    nb = system.nb
    rng = np.random.default_rng(seed)
    p = normalize(np.array([1.0, 0.0, 0.0, 0.0]) + 0.3 * rng.normal(size=(nb, 4)))
    w = rng.uniform(-1.0, 1.0, (nb, 3))
    ex = np.einsum("bij,j->bi", Amat(p), [0.5, 0.0, 0.0])     # half rod, global
    q = np.zeros(system.n)
    qd = np.zeros(system.n)
    base, vbase = np.zeros(3), np.zeros(3)
    for k in range(nb):
        o = 7 * k
        q[o:o + 3] = base + ex[k]
        qd[o:o + 3] = vbase + np.cross(w[k], ex[k])
        q[o + 3:o + 7] = p[k]
        qd[o + 3:o + 7] = 0.5 * Gmat(p[k]).T @ w[k]
        base = base + 2.0 * ex[k]
        vbase = vbase + 2.0 * np.cross(w[k], ex[k])
    return q, qd


def median_time(fn, number: int, repeat: int) -> float:
    """Median seconds per call over ``repeat`` batches of ``number`` calls (after one
    warm-up call); also used by benchmarks/run.py."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - t0) / number)
    return statistics.median(samples)


def fit_exponent(ns, times) -> float:
    """Least-squares slope of log(time) against log(N)."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(times, float)),
                            1)[0])


def bench_chain_eom(ns=(10, 100, 1000, 10000), repeat: int = 5, *,
                    kernels: str = "compiled", jacobian: str = "auto",
                    budget: float = 0.2, spatial: bool = False) -> dict:
    """Seconds per equations-of-motion evaluation (``AccelerationSolver.solve``:
    forces + Jacobian + gamma + the linear solve) of :func:`chain` for each N, the
    median of ``repeat`` batches (each batch ~``budget`` seconds), and the fitted
    exponent of the cost in N over all given N.  Returns::

        {"n": [...], "seconds": [...], "us_per_link": [...], "exponent": float,
         "jacobian": ["sparse"|"dense", ...], "kernels": kernels}
    """
    from mbcore.solve.dynamics import AccelerationSolver
    out = {"n": [], "seconds": [], "us_per_link": [], "jacobian": [], "kernels": kernels,
           "repeat": repeat}
    for n in ns:
        build, state = (spatial_chain, spatial_chain_state) if spatial else (chain,
                                                                            chain_state)
        system = build(int(n)).compile(kernels=kernels, jacobian=jacobian)
        solver = AccelerationSolver(system)
        q, qd = state(system)

        def f():
            solver.solve(q, qd, 0.1)

        t0 = time.perf_counter()
        f()
        one = max(time.perf_counter() - t0, 1e-7)
        number = max(1, int(budget / one))
        sec = median_time(f, number, repeat)
        out["n"].append(int(n))
        out["seconds"].append(sec)
        out["us_per_link"].append(sec / n * 1e6)
        out["jacobian"].append("dense" if system.dense else "sparse")
    out["exponent"] = fit_exponent(out["n"], out["seconds"]) if len(ns) > 1 else None
    return out


def bench_chain_simulation(n_links: int, *, kernels: str = "compiled", t_end: float = 1.0,
                           rtol: float = 1e-6) -> dict:
    """Wall time of a ``t_end``-second dynamic simulation of :func:`chain`
    (dopri5, DI formulation, rtol as given) through :func:`mbcore.run`."""
    model = chain(n_links)
    t0 = time.perf_counter()
    res = mbcore.run(model, kernels=kernels, settings={
        "t_end": t_end, "rtol": rtol, "atol": rtol * 1e-2, "output_step": t_end / 10,
        "integrator": "dopri5", "formulation": "di"})
    wall = time.perf_counter() - t0
    integ = np.asarray(res["integrator"])[-1]     # step size, order, steps, rejected, nfev
    return {"n": n_links, "seconds": wall, "seconds_per_simulated_second": wall / t_end,
            "steps": int(integ[2]), "rejected": int(integ[3]), "nfev": int(integ[4]),
            "us_per_evaluation": wall / max(int(integ[4]), 1) * 1e6,
            "jacobian": "dense" if res.system.dense else "sparse"}


if __name__ == "__main__":  # pragma: no cover
    import json
    import sys
    ns = [int(a) for a in sys.argv[1:]] or [10, 100, 1000, 10000]
    print(json.dumps(bench_chain_eom(ns), indent=1))
