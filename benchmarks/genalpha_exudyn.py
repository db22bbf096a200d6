"""Generalized-α against Exudyn's on the stiff spring chain (one command, JSON).

    python benchmarks/genalpha_exudyn.py [--repeat 5] [--n 10] [--t-end 1.0]

The chain of ``benchmarks/models.py`` (``stiff_chain``: N point masses hanging from
the ground in a vertical line, each joined to the one above by a spring of k = 1e6,
released unstretched under gravity) is integrated for ``t_end`` by

* mbcore: ``formulation: di``, ``integrator: genalpha`` (Chung & Hulbert (1993),
  rho_inf 0.8), fixed step h, on the compiled loop (``loop: auto``) and on the Python
  driver (``loop: python``);
* Exudyn (``pip install exudyn``; skipped when missing): the same chain of
  ``NodePoint2D``/``ObjectMassPoint2D`` with ``ObjectConnectorSpringDamper`` and a
  gravity load, ``SolveDynamic`` with its default generalized-α solver, spectral
  radius 0.8, the same h, no output files.

Accuracy: the largest error of the masses' heights at ``t_end`` against mbcore's
``di`` + ``dop853`` at rtol 1e-12; wall time: the median of ``--repeat`` runs each
(model compilation and Exudyn's assembly excluded: ``stats['wall_time']`` of
``mbcore.run``, the analysis alone; Exudyn: ``SolveDynamic`` alone), and the cost per
step, the difference between runs of ``t_end`` and ``t_end``/10 over the difference
of their steps (the fixed start-up cost of either code taken out).

The variable step ``genalpha_var`` (rtol = atol = 1e-6) on the slider-crank
(examples/slider_crank_dynamic.yaml, ``di`` with ``drift: warn``, ``--var-t-end``
2 s): wall time on the compiled loop (``run_genalpha_var``) and on the Python driver,
interleaved, the ratio of the medians of ``--repeat`` runs each (``variable_step``;
``--only-variable`` runs this part alone).  Prints JSON, asserts
nothing."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import mbcore  # noqa: E402
from models import stiff_chain  # noqa: E402


def mbcore_run(model, h, t_end, loop="auto", integrator="genalpha", **extra):
    settings = {"formulation": "di", "integrator": integrator, "t_end": t_end,
                "output_step": t_end, "loop": loop, **extra}
    if integrator in ("genalpha", "hht"):
        settings["step"] = h
    res = mbcore.run(model, settings=settings)
    wall = float(res.stats["wall_time"])         # the analysis, not the compilation
    q = np.asarray(res["q"])[-1]
    return q[1::3], wall, res


def exudyn_run(n, h, t_end, k=1e6, m=1.0, spacing=1.0, g=9.81, rho=0.8):
    import exudyn as exu
    from exudyn.itemInterface import (LoadForceVector, MarkerBodyPosition,
                                      MarkerNodePosition, NodePoint2D, ObjectConnectorSpringDamper,
                                      ObjectGround, ObjectMassPoint2D)
    SC = exu.SystemContainer()
    mbs = SC.AddSystem()
    ground = mbs.AddObject(ObjectGround())
    prev = mbs.AddMarker(MarkerBodyPosition(bodyNumber=ground, localPosition=[0, 0, 0]))
    nodes = []
    for i in range(n):
        nd = mbs.AddNode(NodePoint2D(referenceCoordinates=[0, -(i + 1) * spacing],
                                     initialCoordinates=[0, 0], initialVelocities=[0, 0]))
        mbs.AddObject(ObjectMassPoint2D(mass=m, nodeNumber=nd))
        mk = mbs.AddMarker(MarkerNodePosition(nodeNumber=nd))
        mbs.AddObject(ObjectConnectorSpringDamper(markerNumbers=[prev, mk],
                                                  referenceLength=spacing, stiffness=k,
                                                  damping=0))
        mbs.AddLoad(LoadForceVector(markerNumber=mk, loadVector=[0, -m * g, 0]))
        prev = mk
        nodes.append(nd)
    mbs.Assemble()
    s = exu.SimulationSettings()
    s.timeIntegration.numberOfSteps = int(round(t_end / h))
    s.timeIntegration.endTime = t_end
    s.timeIntegration.generalizedAlpha.spectralRadius = rho
    s.timeIntegration.verboseMode = 0
    s.solutionSettings.writeSolutionToFile = False
    s.solutionSettings.writeInitialValues = False
    s.displayStatistics = False
    s.displayComputationTime = False
    t0 = time.perf_counter()
    mbs.SolveDynamic(s)
    wall = time.perf_counter() - t0
    y = np.array([mbs.GetNodeOutput(nd, exu.OutputVariableType.Position)[1] for nd in nodes])
    return y, wall


def variable_step_ratio(repeat: int, t_end: float, rtol: float = 1e-6) -> dict:
    """genalpha_var on the slider-crank (di): compiled loop against the Python driver,
    interleaved runs, medians of the analysis' wall time."""
    model = mbcore.Model.from_file(Path(__file__).resolve().parents[1] / "examples"
                                   / "slider_crank_dynamic.yaml")
    # (drift: warn — the drift gate's projection, in C on the compiled loop and in
    # NumPy on the Python driver, rounds differently: without it both loops take the
    # same steps bit for bit, so that the two times compare the same work)
    settings = {"formulation": "di", "integrator": "genalpha_var", "rtol": rtol,
                "atol": rtol, "t_end": t_end, "output_step": 0.01,
                "formulation_options": {"drift": "warn"}}
    walls = {"auto": [], "python": []}
    res = {}
    for _ in range(repeat):
        for loop in ("auto", "python"):
            r = mbcore.run(model, settings={**settings, "loop": loop})
            walls[loop].append(float(r.stats["wall_time"]))
            res[loop] = r
    same = all(np.array_equal(np.asarray(res["auto"][c]), np.asarray(res["python"][c]))
               for c in ("q", "qd", "integrator"))
    return {"model": "slider_crank_dynamic", "t_end": t_end, "rtol": rtol,
            "loop": res["auto"].stats["loop"],
            "nsteps": res["auto"].stats["integrator_nsteps"],
            "compiled_wall_s": statistics.median(walls["auto"]),
            "python_wall_s": statistics.median(walls["python"]),
            "python_over_compiled": statistics.median(walls["python"])
            / statistics.median(walls["auto"]), "bitwise_equal": same}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--n", type=int, default=10)
    ap.add_argument("--t-end", type=float, default=5.0)
    ap.add_argument("--steps", type=float, nargs="*", default=[2e-3, 1e-3, 5e-4, 2.5e-4])
    ap.add_argument("--var-t-end", type=float, default=2.0)
    ap.add_argument("--only-variable", action="store_true",
                    help="only the genalpha_var comparison")
    a = ap.parse_args(argv)
    if a.only_variable:
        out = {"benchmark": "genalpha_var_slider_crank", "repeat": a.repeat,
               "variable_step": variable_step_ratio(a.repeat, a.var_t_end)}
        print(json.dumps(out, indent=1))
        return out
    import warnings
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        import exudyn
        exu_version = exudyn.__version__
    except ImportError:
        exu_version = None
    model = stiff_chain(a.n)
    ref, _, _ = mbcore_run(model, None, a.t_end, integrator="dop853", rtol=1e-12, atol=1e-12)
    rows = []
    short = a.t_end / 10                            # for the cost per step
    for h in a.steps:
        row = {"h": h}
        steps = (a.t_end - short) / h
        mb, mb_short, ex, ex_short, ratios = [], [], [], [], []
        err_mb = err_ex = None
        res = None
        # interleaved (mbcore, Exudyn, mbcore short, Exudyn short) so that the load of
        # this shared machine hits both alike; ratios per round, then medians
        for _ in range(a.repeat):
            y, wall, res = mbcore_run(model, h, a.t_end)
            mb.append(wall)
            err_mb = float(np.abs(y - ref).max())
            mb_short.append(mbcore_run(model, h, short)[1])
            if exu_version is not None:
                y, wall = exudyn_run(a.n, h, a.t_end)
                ex.append(wall)
                err_ex = float(np.abs(y - ref).max())
                ex_short.append(exudyn_run(a.n, h, short)[1])
                ratios.append((ex[-1] - ex_short[-1]) / (mb[-1] - mb_short[-1]))
        row["mbcore_compiled"] = {"wall_s": statistics.median(mb), "error": err_mb,
                                  "loop": res.stats.get("loop"),
                                  "nsteps": res.stats.get("integrator_nsteps"),
                                  "nfev": res.stats.get("integrator_nfev"),
                                  "us_per_step": 1e6 * (statistics.median(mb)
                                                        - statistics.median(mb_short)) / steps}
        py = [mbcore_run(model, h, a.t_end, loop="python")[1]
              for _ in range(max(1, a.repeat // 3))]
        row["mbcore_python_wall_s"] = statistics.median(py)
        row["python_over_compiled"] = statistics.median(py) / statistics.median(mb)
        if exu_version is not None:
            row["exudyn"] = {"wall_s": statistics.median(ex), "error": err_ex,
                             "us_per_step": 1e6 * (statistics.median(ex)
                                                   - statistics.median(ex_short)) / steps}
            row["exudyn_over_mbcore_total"] = statistics.median(
                [e / m for e, m in zip(ex, mb)])
            row["exudyn_over_mbcore_per_step"] = statistics.median(ratios)
        rows.append(row)
    out = {"benchmark": "genalpha_stiff_chain", "n": a.n, "t_end": a.t_end,
           "rho_inf": 0.8, "exudyn": exu_version, "repeat": a.repeat, "rows": rows,
           "variable_step": variable_step_ratio(a.repeat, a.var_t_end)}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
