"""Measured convergence order of every fixed-step integrator in the registry.

    PYTHONPATH=src python benchmarks/integrator_orders.py [--json PATH]

Problem (smooth, nonlinear, conservative, closed form; usable by every method,
``verlet`` included since ``y = [q; q̇]``): ``q'' = 6q² − 8q³``, ``q(0) = 1``,
``q̇(0) = 0``, whose solution is ``q = 1/(1 + t²)``, ``q̇ = −2t/(1 + t²)²`` (the
Riccati solution of the order tests, written as a second-order equation).  For each
fixed-step method (discovered from the registry; each option variant below) the
global error on [0, T], T = 2 (the largest over the step ends, max norm: the error
at t = T alone can sit near a sign change of the error and give erratic slopes, e.g.
abm4 2.85 between two halvings) is measured for six steps ``h0/2^i``,
i = 0..5 (five halvings), ``h0`` by nominal order so that the errors stay far above
rounding; printed: the five slopes ``log2(e(h)/e(h/2))`` and the least-squares
slope of ``log e`` against ``log h`` (the fitted order).  Nothing is asserted (the
tests do that: tests/test_integrators_classical.py); the table in
docs/integrators.md ("Measured orders") is this script's output.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from mbcore.integrate import integrate
from mbcore.plugins import registry

T = 2.0
#: largest step by nominal order (the errors of the smallest step stay ≥ 1e-11)
FIRST_STEP = {1: 0.02, 2: 0.02, 3: 0.04, 4: 0.08}
#: a method's own largest step: abm4 is not yet asymptotic from 0.08 (slopes 2.85,
#: 3.62, ...: the AB3 predictor's error dominates there)
FIRST_STEP_OF = {"abm4": 0.02}
HALVINGS = 5
#: option variants of the methods with a parameter (others: their defaults)
VARIANTS: dict[str, list[dict]] = {
    "rk2": [{"a": 0.5}, {"a": 0.75}, {"a": 1.0}],
    "ab": [{"order": k} for k in (1, 2, 3, 4)],
    "am": [{"order": k} for k in (1, 2, 3, 4)],
    "verlet": [{"form": "kdk"}, {"form": "dkd"}],
}


def rhs(t: float, y: np.ndarray) -> np.ndarray:
    q = y[0]
    return np.array([y[1], 6.0 * q * q - 8.0 * q ** 3])


def exact(t: float) -> np.ndarray:
    s = 1.0 + t * t
    return np.array([1.0 / s, -2.0 * t / (s * s)])


def measure(name: str, options: dict, order: int) -> dict:
    h0 = FIRST_STEP_OF.get(name, FIRST_STEP[min(order, 4)])
    steps = h0 / 2.0 ** np.arange(HALVINGS + 1)
    err = []
    for h in steps:
        res = integrate(name, rhs, (0.0, T), [1.0, 0.0], step=float(h), **options)
        err.append(max(float(np.abs(y - exact(t)).max()) for t, y in zip(res.t, res.y)))
    err = np.array(err)
    slopes = np.log2(err[:-1] / err[1:])
    fitted = float(np.polyfit(np.log(steps), np.log(err), 1)[0])
    return {"method": name, "options": options, "nominal": order,
            "steps": steps.tolist(), "errors": err.tolist(),
            "slopes": [round(float(s), 3) for s in slopes], "fitted": round(fitted, 3)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", help="also write the JSON here")
    args = ap.parse_args(argv)
    reg = registry()
    rows, skipped = [], []
    for name in reg.names("integrator"):
        cls = reg.get("integrator", name)
        if cls.adaptive:
            continue
        for options in VARIANTS.get(name, [{}]):
            required = [k for k, o in cls.options.items()
                        if o.required and k != "step" and k not in options]
            if required:
                skipped.append({"method": name, "reason": f"needs {required}"})
                continue
            order = int(options.get("order", cls.order))
            rows.append(measure(name, options, order))
    out = {"problem": "q'' = 6q^2 - 8q^3, q(0) = 1, qd(0) = 0 (q = 1/(1 + t^2)), "
                      "largest error over the step ends in [0, 2]", "halvings": HALVINGS, "results": rows,
           "skipped": skipped}
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
