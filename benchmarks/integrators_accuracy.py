"""Tolerance sweep of the adaptive integrators: one command, JSON on stdout.

    python benchmarks/integrators_accuracy.py [--methods bs23,dopri5,...]
                                              [--problems osc,kepler] [--tols 1e-4,1e-6]
                                              [--table]
    python benchmarks/integrators_accuracy.py --stiff [--table]

For every adaptive method, problem with a known solution and tolerance ``tol``
(``rtol = atol = tol``) it reports ``ratio`` = global error / tol, where the
global error is the largest absolute error over 20 equally spaced output times
(dense output) and the end point, the evaluation count ``nfev`` and the accepted
and rejected steps.  ``--table`` prints the markdown table of docs/integrators.md
instead of JSON.

Problems (all with exact solutions):

* ``linexp``: linear 3×3, ``y(t) = expm(tA) y0``, t ∈ [0, 5];
* ``ex121``: Nikravesh (1988), Example 12.1, ``y' = -y²``, ``y = 1/(1+t)``, t ∈ [0, 5];
* ``ex122``: Nikravesh (1988), Example 12.2, damped two-mass chain (affine, solved by expm), t ∈ [0, 2];
* ``osc``: undamped harmonic oscillator, 10 periods, t ∈ [0, 20π];
* ``kepler``: Kepler orbit e = 0.5 (a = μ = 1, period 2π), 3 orbits, t ∈ [0, 6π],
  exact solution from Kepler's equation.

``--stiff``: work–precision on the stiff problems of tests/test_integrators_accuracy.py
(Robertson t ∈ [0, 10], Van der Pol μ = 1000 t ∈ [0, 5], the 10-mass stiff chain
t ∈ [0, 2]): for every method a sweep of requested rtol (atol keeps the problem's
atol/rtol), the achieved error ``max |y - ref| / (atol/rtol + |ref|)`` over 10
outputs against a tight Radau solution (the chain: expm), ``nfev``, and the cost at
equal achieved error 1e-5 … 1e-8 (log-log interpolation of nfev against the error;
a method more accurate than the target at its loosest tolerance costs its cheapest
run).  bdf without ``jac`` (finite-difference Jacobians counted in nfev).
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time

import numpy as np
from scipy.linalg import expm
from scipy.optimize import brentq

from mbcore.integrate import integrate

METHODS = ["bs23", "dopri5", "dop853", "abm", "bdf"]
TOLS = [1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10]

A_LIN = np.array([[-1.0, 1.0, 0.0], [0.0, -2.0, 1.0], [0.5, 0.0, -3.0]])
Y0_LIN = np.array([1.0, 2.0, -1.0])

def _ex122(t, y):
    x1, x2, v1, v2 = y
    a1 = -100 * (x1 - 1) + 100 * ((x2 - x1) - 1) - 40 * v1
    a2 = -100 * ((x2 - x1) - 1) + 100 * ((3 - x2) - 1) - 40 * v2
    return np.array([v1, v2, a1 / 4, a2 / 4])


def _ex122_exact(t):
    # y' = A y + b as the augmented linear system z = [y, 1]: z' = [[A, b], [0, 0]] z
    b = _ex122(0.0, np.zeros(4))
    M = np.zeros((5, 5))
    M[:4, :4] = np.array([_ex122(0.0, e) - b for e in np.eye(4)]).T   # affine: exact
    M[:4, 4] = b
    z0 = np.r_[1.0, 1.9, 0.0, 0.0, 1.0]
    return (expm(t * M) @ z0)[:4]


def _kepler(t, y):
    x, yy, vx, vy = y
    r3 = (x * x + yy * yy) ** 1.5
    return np.array([vx, vy, -x / r3, -yy / r3])


def kepler_exact(t, e=0.5):
    """a = 1, μ = 1 (period 2π), pericentre at t = 0 (Kepler's equation)."""
    E = brentq(lambda E: E - e * np.sin(E) - t, t - 1 - e, t + 1 + e, xtol=1e-15,
               rtol=4 * np.finfo(float).eps)
    Ed = 1 / (1 - e * np.cos(E))
    b = np.sqrt(1 - e * e)
    return np.array([np.cos(E) - e, b * np.sin(E), -np.sin(E) * Ed, b * np.cos(E) * Ed])


PROBLEMS = {
    # name: (fun, (t0, tf), y0, exact(t) -> (n,))
    "linexp": (lambda t, y: A_LIN @ y, (0.0, 5.0), Y0_LIN,
               lambda t: expm(t * A_LIN) @ Y0_LIN),
    "ex121": (lambda t, y: -y * y, (0.0, 5.0), np.array([1.0]),
              lambda t: np.array([1.0 / (1.0 + t)])),
    "ex122": (_ex122, (0.0, 2.0), np.array([1.0, 1.9, 0.0, 0.0]), _ex122_exact),
    "osc": (lambda t, y: np.array([y[1], -y[0]]), (0.0, 20 * np.pi), np.array([1.0, 0.0]),
            lambda t: np.array([np.cos(t), -np.sin(t)])),
    "kepler": (_kepler, (0.0, 6 * np.pi), kepler_exact(0.0), kepler_exact),
}


def sweep_point(method: str, problem: str, tol: float, **options) -> dict:
    fun, span, y0, exact = PROBLEMS[problem]
    t_out = np.linspace(span[0], span[1], 21)[1:]
    ref = np.array([exact(t) for t in t_out])
    t0 = time.perf_counter()
    res = integrate(method, fun, span, y0, t_out=t_out, rtol=tol, atol=tol, **options)
    wall = time.perf_counter() - t0
    err = float(np.abs(res.y - ref).max())
    st = res.stats
    return {"method": method, "problem": problem, "tol": tol, "error": err,
            "ratio": err / tol, "end_ratio": float(np.abs(res.y[-1] - ref[-1]).max()) / tol,
            "nfev": st.nfev, "nsteps": st.nsteps, "nrejected": st.nrejected,
            "wall_s": round(wall, 4)}


def run(methods=METHODS, problems=tuple(PROBLEMS), tols=TOLS) -> dict:
    rows = [sweep_point(m, p, tol) for m in methods for p in problems for tol in tols]
    summary = {}
    for m in methods:
        for p in problems:
            r = [x["ratio"] for x in rows if x["method"] == m and x["problem"] == p]
            summary.setdefault(m, {})[p] = round(max(r), 3)
    return {"benchmark": "integrators_accuracy", "python": sys.version.split()[0],
            "machine": platform.machine(), "tols": list(tols),
            "max_ratio": summary, "rows": rows}


def markdown(result: dict) -> str:
    tols = result["tols"]
    lines = ["| problem | method | " + " | ".join(f"{t:.0e}" for t in tols) + " | max |",
             "|---|---|" + "---|" * (len(tols) + 1)]
    rows = result["rows"]
    problems = list(dict.fromkeys(r["problem"] for r in rows))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for p in problems:
        for i, m in enumerate(methods):
            cells = []
            for t in tols:
                r = next(x for x in rows if x["method"] == m and x["problem"] == p
                         and x["tol"] == t)
                cells.append(f"{r['ratio']:.2g} ({r['nfev']})")
            lines.append(f"| {p if i == 0 else ''} | {m} | " + " | ".join(cells) +
                         f" | {result['max_ratio'][m][p]:.2g} |")
    return "\n".join(lines)


# -- stiff work–precision ----------------------------------------------------------
def _rober(t, y):
    y1, y2, y3 = y
    return np.array([-0.04 * y1 + 1e4 * y2 * y3, 0.04 * y1 - 1e4 * y2 * y3 - 3e7 * y2 * y2,
                     3e7 * y2 * y2])


def _vdp(t, y, mu=1000.0):
    return np.array([y[1], mu * (1 - y[0] ** 2) * y[1] - y[0]])


def chain_matrix(n=10, k_stiff=1e5, damping=0.05):
    """n unit masses in a row, springs alternately soft (1) and stiff (k_stiff),
    stiffness-proportional damping: eigenvalues from -0.02 to ≈ -1e4 (the stiff
    modes are overdamped, the soft ones oscillate).  Also used by
    tests/test_integrators_accuracy.py."""
    K = np.zeros((n, n))
    ks = np.ones(n)
    ks[::2] = k_stiff
    for i in range(n):
        K[i, i] += ks[i]
        if i > 0:
            K[i, i - 1] -= ks[i]
            K[i - 1, i] -= ks[i]
            K[i - 1, i - 1] += ks[i]
    return np.block([[np.zeros((n, n)), np.eye(n)], [-K, -damping * K]])


A_CHAIN = chain_matrix()
STIFF = {
    # name: fun, span, y0, atol/rtol
    "robertson": (_rober, (0.0, 10.0), np.array([1.0, 0.0, 0.0]), np.array([1e-2, 1e-6, 1e-2])),
    "vdp1000": (_vdp, (0.0, 5.0), np.array([2.0, 0.0]), 1e-2),
    "chain": (lambda t, y: A_CHAIN @ y, (0.0, 2.0),
              np.r_[np.linspace(0.01, 0.1, 10), np.zeros(10)], 1e-3),
}
STIFF_METHODS = ["bdf", "dopri5", "dop853", "bs23", "abm"]
STIFF_RTOLS = [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
STIFF_TARGETS = [1e-5, 1e-6, 1e-7, 1e-8]


def cost_at(pts, target):
    """nfev at achieved error ``target`` from [(error, nfev), ...] (see --stiff)."""
    errs = np.array([e for e, _ in pts])
    nfev = np.array([n for _, n in pts], dtype=float)
    if errs.min() > target:
        return float("inf")
    if errs.max() <= target:
        return float(nfev.min())
    o = np.argsort(errs)
    c = float(np.exp(np.interp(np.log(target), np.log(errs[o]), np.log(nfev[o]))))
    return min(c, float(nfev[errs <= target].min()))


def run_stiff(methods=STIFF_METHODS, rtols=STIFF_RTOLS, targets=STIFF_TARGETS) -> dict:
    from scipy.integrate import solve_ivp
    out = {}
    for name, (fun, span, y0, ratio) in STIFF.items():
        t_out = np.linspace(span[0], span[1], 11)[1:]
        if name == "chain":
            ref = np.array([expm(A_CHAIN * t) @ y0 for t in t_out])
        else:
            ref = solve_ivp(fun, span, y0, method="Radau", rtol=1e-12, atol=ratio * 1e-12,
                            t_eval=t_out).y.T
        pts = {}
        for m in methods:
            pts[m] = []
            for rtol in rtols:
                res = integrate(m, fun, span, y0, t_out=t_out, rtol=rtol, atol=ratio * rtol)
                err = float(np.max(np.abs(res.y - ref) / (ratio + np.abs(ref))))
                pts[m].append((err, res.stats.nfev))
        cost = {m: {f"{t:g}": cost_at(pts[m], t) for t in targets} for m in methods}
        out[name] = {"sweep": {m: [{"rtol": r, "error": e, "nfev": n}
                                   for r, (e, n) in zip(rtols, pts[m])] for m in methods},
                     "cost_at_error": cost}
    return {"benchmark": "integrators_work_precision", "python": sys.version.split()[0],
            "targets": list(targets), "problems": out}


def markdown_stiff(result: dict) -> str:
    targets = [f"{t:g}" for t in result["targets"]]
    lines = ["| problem | error | " + " | ".join(m for m in STIFF_METHODS) + " |",
             "|---|---|" + "---|" * len(STIFF_METHODS)]
    for name, r in result["problems"].items():
        c = r["cost_at_error"]
        for i, t in enumerate(targets):
            b = c["bdf"][t]
            cells = [f"{b:.0f}"]
            for m in STIFF_METHODS[1:]:
                x = c[m][t]
                cells.append("—" if not np.isfinite(x) else f"{x:.0f} ({x / b:.0f}×)")
            lines.append(f"| {name if i == 0 else ''} | {t} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--tols", default=",".join(f"{t:g}" for t in TOLS))
    ap.add_argument("--table", action="store_true", help="print a markdown table")
    ap.add_argument("--stiff", action="store_true",
                    help="work–precision of bdf against the explicit methods on stiff problems")
    a = ap.parse_args(argv)
    if a.stiff:
        result = run_stiff()
        print(markdown_stiff(result) if a.table else json.dumps(result, indent=1))
        return
    result = run(a.methods.split(","), a.problems.split(","),
                 [float(x) for x in a.tols.split(",")])
    if a.table:
        print(markdown(result))
    else:
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
