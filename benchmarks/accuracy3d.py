"""Accuracy of every formulation on spatial problems: one command, JSON on stdout.

    python benchmarks/accuracy3d.py [--quick] [--table] [--formulations di,cs,...]
                                    [--problems heavy_top,...] [--rtols 1e-6,1e-10]
                                    [--integrators bs23,dop853,...]
                                    [--cap SECONDS] [--from RESULTS.json]
                                    [--merge BASE.json]

For every problem of ``benchmarks/accuracy_problems.py`` × every built-in formulation
× integrator (``dopri5``; ``bdf`` for ``ggl`` and ``stiff``, the DAE forms, which
refuse an explicit integrator by name: "formulation 'ggl' is a DAE: it needs an
integrator with a mass matrix (bdf)") × rtol (1e-6 and 1e-10; ``atol = rtol / 100``) one
``mbcore.run`` (dynamic analysis, the problem's time span and output step) runs in a
forked child process with a wall-clock cap (60 s; 10 s with ``--quick``), so a
hanging cell becomes ``timeout``.

**Error of a cell** (one definition for every cell): each problem compares groups
of output quantities (e.g. the heavy top's centre of mass in m and its body angular
velocity in rad/s) with its reference at every output time;
``e_g = max_{t,k} |y - y_ref| / (atol + rtol * S_g)`` with ``S_g = max_{t,k} |y_ref|``
the group's scale, and the cell's error is ``max_g e_g``: the global error in units
of the requested tolerance applied to the quantity's own scale.  ``ok``: error
≤ 10 (the README's promise: within 10× the requested tolerance); ``inaccurate``:
finished with a larger error and no warning; ``warned``: finished with a larger error
and the run said so (a warning event, e.g. di's constraint drift above ten times the
tolerance); ``refused``: a ``ModelError`` before integrating (the
formulation names why it does not apply); ``failed``: any other exception (class and
message); ``timeout``: over the cap.  Per cell: status, error, the largest absolute
error per group, wall time of ``mbcore.run`` (model compile included), steps, nfev.

``--integrators``: these integrators instead of dopri5 for the ODE formulations (the
DAE forms keep bdf): the contract for every formulation × integrator pair.
``--quick``: rtol 1e-6 only, 10 s cap.  ``--summary`` prints one row per formulation
× integrator pair (counts by status, the cells that are not ok).  ``--table`` prints the markdown table of
docs/benchmarks.md instead of JSON; ``--from FILE`` renders the table (or JSON) of a
saved run without running anything (``benchmarks/accuracy3d_baseline.json``: the run
of docs/benchmarks.md).  ``--merge BASE.json``: the output is BASE with this run's
cells (or those of ``--from``) in place of its cells of the same problem,
formulation, integrator and rtol (new ones appended), the run's date, commit, cap and
cell count listed under ``meta.merged`` — re-measuring a few cells of a saved table.
"""
from __future__ import annotations

import argparse
import datetime
import json
import multiprocessing as mp
import os
import platform
import subprocess
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from accuracy_problems import PROBLEMS, normalized_error

import mbcore

RTOLS = [1e-6, 1e-10]
BOUND = 10.0
DAE = ("ggl", "stiff")


def formulations() -> list[str]:
    from mbcore.plugins.manager import get_plugin_manager
    return list(get_plugin_manager().registry.names("formulation"))


def integrators_for(formulation: str, integrators=None) -> list[str]:
    """dopri5 (or ``integrators``), or bdf for the DAE forms ggl and stiff
    (docs/analyses.md: their integrator; both refuse explicit methods with a named
    reason)."""
    return ["bdf"] if formulation in DAE else list(integrators or ["dopri5"])


def _cell(problem: str, formulation: str, integrator: str, rtol: float,
          options: dict | None = None) -> dict:
    """One cell: the run's error in units of the tolerance, status and cost
    (``options``: the formulation's settings, ``formulation_options``)."""
    p = PROBLEMS[problem]
    atol = rtol / 100.0
    out = {"problem": problem, "formulation": formulation, "integrator": integrator,
           "rtol": rtol, "atol": atol}
    settings = {"t_end": p.t_end, "output_step": p.output_step,
                "formulation": formulation, "integrator": integrator,
                "rtol": rtol, "atol": atol}
    if options:
        settings["formulation_options"] = dict(options)
    t0 = time.perf_counter()
    try:
        res = mbcore.run(p.build(), analysis="dynamic", settings=settings)
    except mbcore.ModelError as exc:
        out.update(status="refused", message=f"{type(exc).__name__}: {exc}",
                   wall=time.perf_counter() - t0)
        return out
    except Exception as exc:                   # noqa: BLE001 - every failure is a result
        out.update(status="failed", message=f"{type(exc).__name__}: {exc}",
                   wall=time.perf_counter() - t0)
        return out
    wall = time.perf_counter() - t0
    st = res.stats
    out.update(wall=wall, steps=st.get("integrator_nsteps"), nfev=st.get("integrator_nfev"),
               loop=st.get("loop"))
    if st.get("drift_projections"):
        out["drift_projections"] = st["drift_projections"]
    try:
        t = np.asarray(res.t)
        ref = p.reference(t)
        err, absd = normalized_error(p.measure(res), ref, rtol, atol)
    except Exception as exc:                   # noqa: BLE001
        out.update(status="failed", message=f"measure: {type(exc).__name__}: {exc}")
        return out
    warned = [e.message for e in getattr(res, "events", []) if e.kind == "warning"]
    out.update(error=err if np.isfinite(err) else None,
               abs_error={g: (v if np.isfinite(v) else None) for g, v in absd.items()},
               status="ok" if err <= BOUND else ("warned" if warned else "inaccurate"))
    if warned:
        out["warnings"] = warned
    if not np.isfinite(err):
        out.update(status="failed", message="non-finite output")
    return out


def _child(conn, args):
    try:
        conn.send(_cell(*args))
    except BaseException as exc:               # noqa: BLE001
        conn.send({"status": "failed", "message": f"{type(exc).__name__}: {exc}",
                   "traceback": traceback.format_exc(limit=3)})
    finally:
        conn.close()


def run_cell(problem, formulation, integrator, rtol, cap: float) -> dict:
    """One cell in a forked child with a wall-clock cap."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, (problem, formulation, integrator, rtol)))
    t0 = time.perf_counter()
    proc.start()
    send.close()
    res = None
    if recv.poll(cap):
        try:
            res = recv.recv()
        except EOFError:
            res = None
    proc.join(1.0)
    if proc.is_alive():
        proc.kill()
        proc.join()
    if res is None:
        elapsed = time.perf_counter() - t0
        status = "timeout" if elapsed >= cap else "failed"
        res = {"status": status,
               "message": (f"no result within {cap:g} s" if status == "timeout" else
                           f"child exited with code {proc.exitcode}"), "wall": elapsed}
    res.update(problem=problem, formulation=formulation, integrator=integrator, rtol=rtol,
               atol=rtol / 100.0)
    return res


def _commit() -> str:
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        return subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except Exception:                          # noqa: BLE001
        return "unknown"


def run_all(problems, forms, rtols, cap, progress=True, integrators=None) -> dict:
    commit = _commit()                         # the code that runs, not the one after
    # references first (tight runs are cached in this process and inherited by the
    # forked cells), so no cell pays for them
    for pn in problems:
        p = PROBLEMS[pn]
        n = round(p.t_end / p.output_step) + 1
        p.reference(np.linspace(0.0, p.t_end, n))
    cells = []
    for pn in problems:
        for rtol in rtols:
            for f in forms:
                for integ in integrators_for(f, integrators):
                    c = run_cell(pn, f, integ, rtol, cap)
                    cells.append(c)
                    if progress:
                        e = c.get("error")
                        print(f"{pn:12s} {f:18s} {integ:7s} {rtol:7.0e} {c['status']:10s} "
                              f"err={'-' if e is None else f'{e:.3g}'} "
                              f"wall={c.get('wall', 0):.2f}s "
                              f"{c.get('message', '')[:100]}", file=sys.stderr, flush=True)
    return {"meta": {"date": datetime.date.today().isoformat(), "commit": commit,
                     "mbcore": mbcore.__version__, "python": platform.python_version(),
                     "machine": platform.machine(), "cap_seconds": cap, "bound": BOUND,
                     "error": "max over groups g of max_{t,k} |y - y_ref| / "
                              "(atol + rtol * max|y_ref|_g); ok when <= 10",
                     "problems": {pn: {"title": PROBLEMS[pn].title,
                                       "source": PROBLEMS[pn].source,
                                       "t_end": PROBLEMS[pn].t_end,
                                       "units": PROBLEMS[pn].units}
                                  for pn in problems}},
            "cells": cells}


# ------------------------------------------------------------------ table
MARK = {"ok": "", "inaccurate": "✗ ", "warned": "⚠ ", "refused": "refused", "failed": "failed",
        "timeout": "timeout"}


def _fmt(c: dict) -> str:
    s = c["status"]
    if s in ("ok", "inaccurate", "warned"):
        return f"{MARK[s]}{c['error']:.2g} · {c['wall']:.2f} s"
    if s == "timeout":
        return f"timeout (>{c.get('wall', 0):.0f} s)"
    return f"{s} [{c['note']}]"


def table(data: dict) -> str:
    cells = data["cells"]
    cols = []
    for c in cells:
        k = (c["formulation"], c["integrator"])
        if k not in cols:
            cols.append(k)
    notes: dict[str, int] = {}
    for c in cells:
        if c["status"] in ("refused", "failed"):
            msg = c.get("message", "").split("\n")[0][:240]
            c["note"] = notes.setdefault(msg, len(notes) + 1)
    head = "| problem | rtol | " + " | ".join(
        f + ("" if i == "dopri5" else f" ({i})") for f, i in cols) + " |"
    lines = [head, "|" + "---|" * (len(cols) + 2)]
    rows: dict = {}
    for c in cells:
        rows.setdefault((c["problem"], c["rtol"]), {})[(c["formulation"], c["integrator"])] = c
    for (pn, rtol), row in rows.items():
        lines.append(f"| {pn} | {rtol:.0e} | " + " | ".join(
            _fmt(row[k]) if k in row else "" for k in cols) + " |")
    counts: dict[str, int] = {}
    for c in cells:
        counts[c["status"]] = counts.get(c["status"], 0) + 1
    m = data["meta"]
    lines.append("")
    lines.append("Cells: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
                 + f" (commit {m['commit']}, {m['date']}, cap {m['cap_seconds']:g} s per "
                   "cell; error in units of the requested tolerance, then wall time)")
    if notes:
        lines.append("")
        for msg, k in notes.items():
            lines.append(f"{k}. {msg}")
    return "\n".join(lines)


def summary(data: dict) -> str:
    """Per formulation × integrator pair: the cells by status, the largest error of
    the finished ones, and every cell that is neither ok nor refused (markdown)."""
    pairs: dict = {}
    for c in data["cells"]:
        pairs.setdefault((c["formulation"], c["integrator"]), []).append(c)
    lines = ["| formulation | integrator | ok | inaccurate | warned | refused | failed "
             "| timeout | largest error | not ok (problem rtol: error or status) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (f, i), cells in pairs.items():
        n = {k: sum(c["status"] == k for c in cells)
             for k in ("ok", "inaccurate", "warned", "refused", "failed", "timeout")}
        errs = [c["error"] for c in cells if c.get("error") is not None]
        bad = [f"{c['problem']} {c['rtol']:.0e}: "
               + (f"{c['error']:.3g}" if c["status"] == "inaccurate" else
                  f"{c['error']:.3g} (warned)" if c["status"] == "warned" else c["status"])
               for c in cells if c["status"] not in ("ok", "refused")]
        head = (f"| {f} | {i} | {n['ok']} | {n['inaccurate']} | {n['warned']} | "
                f"{n['refused']} | {n['failed']} | {n['timeout']} | ")
        lines.append(head + (f"{max(errs):.3g}" if errs else "-") + f" | {'; '.join(bad)} |")
    return "\n".join(lines)


def merge(base: dict, run: dict) -> dict:
    """``base`` with the cells of ``run`` in place of its cells of the same problem,
    formulation, integrator and rtol (new ones appended); ``meta.merged`` lists the
    run's date, commit, cap and cell count."""
    def key(c):
        return c["problem"], c["formulation"], c["integrator"], float(c["rtol"])
    new = {key(c): c for c in run["cells"]}
    cells = [new.pop(key(c), c) for c in base["cells"]]
    cells.extend(new.values())
    m = run["meta"]
    meta = dict(base["meta"])
    meta["merged"] = list(meta.get("merged", [])) + [
        {"date": m["date"], "commit": m["commit"], "cap_seconds": m["cap_seconds"],
         "cells": len(run["cells"])}]
    return {"meta": meta, "cells": cells}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--summary", action="store_true")
    ap.add_argument("--formulations")
    ap.add_argument("--problems")
    ap.add_argument("--rtols")
    ap.add_argument("--cap", type=float)
    ap.add_argument("--integrators")
    ap.add_argument("--from", dest="src")
    ap.add_argument("--merge", metavar="BASE.json")
    a = ap.parse_args(argv)
    if a.src:
        with open(a.src) as fh:
            data = json.load(fh)
    else:
        forms = a.formulations.split(",") if a.formulations else formulations()
        probs = a.problems.split(",") if a.problems else list(PROBLEMS)
        for pn in probs:
            if pn not in PROBLEMS:
                ap.error(f"--problems: unknown problem {pn!r} (known: {', '.join(PROBLEMS)})")
        rtols = ([float(x) for x in a.rtols.split(",")] if a.rtols else
                 [1e-6] if a.quick else RTOLS)
        cap = a.cap or (10.0 if a.quick else 60.0)
        data = run_all(probs, forms, rtols, cap,
                       integrators=a.integrators.split(",") if a.integrators else None)
    if a.merge:
        with open(a.merge) as fh:
            data = merge(json.load(fh), data)
    if a.summary:
        print(summary(data))
    elif a.table:
        print(table(data))
    else:
        print(json.dumps(data, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
