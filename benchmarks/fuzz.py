"""Fuzz campaign of model files (docs/reliability.md).

    python benchmarks/fuzz.py --cases 10000 --jobs 2 --seed 1 --report fuzz.json
    python benchmarks/fuzz.py --types --jobs 2 --report types.json   # every key x type

Each case (``benchmarks/fuzz_cases.py``: a mutated shipped example or a generated
model) is written to a file and goes through ``Model.from_file`` → the settings
validation of ``mbcore validate`` (recorded as a run only when it raises) → compile →
a short run of each analysis (kinematic, kinetostatic, static, dynamic; the model's
own ``settings.analysis`` without an override, as ``mbcore run MODEL`` runs it, and
as a fifth run ``own`` when it is none of those four; ``t_end`` cut to a few output
steps), in a worker process with a wall-clock limit
per case and a memory limit.  Outcome classes, per analysis run and per case (the
worst of its runs):

``valid``            the run finished and every recorded value is finite
``named_error``      an mbcore error naming the key path, or the element / the time
``unnamed_error``    an mbcore error that names nothing
``foreign_error``    an exception that is not an mbcore error (a bug)
``nan``              a "valid" run whose results hold NaN / inf (a bug)
``crash``            the worker died (segfault, abort)
``hang``             the case exceeded the wall-clock limit

The report (JSON on stdout and in ``--report``) has the counts, the counts of the
named errors by class, and the cases of every bad class (name, file text, message).

``--types``: instead of random cases, the exhaustive type-swap campaign
(``fuzz_cases.type_swap_case``): every key path of every shipped example (settings,
element fields, vector components) with a value of every other JSON type (null,
bool, int, float, string, list, mapping).  A value of the wrong type must end in an
mbcore error, never a foreign exception; the report also counts the load errors
that name the swapped key path (or a key that contains it; load or settings
validation) and lists a sample of those naming another key (often right: a
renamed body is unknown where it is used).
"""
from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import re
import sys
import tempfile
import time
import traceback
from collections import Counter
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any, Iterable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fuzz_cases import (ANALYSES, campaign_case, type_swap_case,  # noqa: E402
                        type_swap_count)

BAD = ("unnamed_error", "foreign_error", "nan", "crash", "hang")
ORDER = ("valid", "named_error") + BAD          # worst last
#: output rows of one fuzz run at most (t_end is cut to this many output steps)
FUZZ_ROWS = 3
#: the step budget of a fuzz run (settings.max_steps; the default is 100 000): a
#: spatial model on the NumPy reference path takes up to 7 ms per step
FUZZ_MAX_STEPS = 2_000
MEMORY_LIMIT = 2 << 30                          # bytes of address space per worker
#: columns where NaN is the documented "not computed" mark (docs/analyses.md)
NAN_ALLOWED = {"solver": ("pivot_ratio",)}


# ------------------------------------------------------------------ one case
def _num(x: Any) -> bool:
    try:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and \
            math.isfinite(float(x))
    except OverflowError:
        return False


def tame_settings(own: dict, analysis: str) -> dict:
    """Overrides that keep a run short when the model's own time settings are sane
    numbers (else they are left alone, for validation to catch): ``t_end`` cut to
    :data:`FUZZ_ROWS` output steps; fixed steps no smaller than 1/100 of that; the
    step budget ``max_steps`` at most :data:`FUZZ_MAX_STEPS`."""
    if analysis not in ("kinematic", "kinetostatic", "dynamic"):
        return {}                                   # static, modes: no output grid
    # a setting given as null takes its default, as an absent one
    t0, t1, h = (own.get(k) if own.get(k) is not None else default for k, default in
                 (("t_start", 0.0), ("t_end", 1.0), ("output_step", 0.01)))
    if not (_num(t0) and _num(t1) and _num(h)) or h <= 0 or t1 <= t0:
        return {}
    from mbcore.elements.limits import limits
    if (t1 - t0) / h > limits.max_output_rows:
        return {}                                   # must be refused by the limit
    over: dict[str, Any] = {"t_end": t0 + min(t1 - t0, FUZZ_ROWS * h)}
    if analysis == "dynamic":
        span = over["t_end"] - t0
        for key in ("step", "max_step"):
            v = own.get(key)
            if _num(v) and 0 < v < span / 100:
                over[key] = span / 100
        budget = own.get("max_steps")
        if budget is None or _num(budget) and (budget == 0 or budget > FUZZ_MAX_STEPS):
            over["max_steps"] = FUZZ_MAX_STEPS      # a shorter step budget
    return over


def _names(model) -> set[str]:
    names = {b.name for b in model.bodies} | {model.ground}
    for els in model.elements.values():
        names |= {e.name for e in els}
    return {n for n in names if isinstance(n, str) and n}


def classify_error(exc: BaseException, model, where: str = "") -> tuple[str, str]:
    """(outcome class, detail) of an exception raised by load / validate / run."""
    from mbcore.errors import AnalysisError, MbcoreError, ModelError
    msg = str(exc)
    kind = type(exc).__name__
    if not isinstance(exc, MbcoreError):
        tb = traceback.extract_tb(exc.__traceback__)
        where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else ""
        return "foreign_error", f"{kind} at {where}: {msg[:300]}"
    if isinstance(exc, ModelError):
        named = bool(exc.path) or bool(where and where in msg)
    else:
        named = isinstance(exc, AnalysisError) and exc.t is not None
        named = named or bool(re.search(r"settings\.|\w+\[\d+\]", msg))
        if model is not None and not named:
            named = any(n in msg for n in _names(model))
    return ("named_error" if named else "unnamed_error"), f"{kind}: {msg[:300]}"


def _finite(result) -> str:
    """'' if every recorded series is finite, else the first bad channel."""
    import numpy as np
    if not np.all(np.isfinite(result.t)):
        return "t"
    for name in result.channels:
        a = result.series(name)
        if a.dtype.kind != "f":
            continue
        ok = np.isfinite(a)
        labels = result.labels(name)
        for col in NAN_ALLOWED.get(name, ()):        # documented "not computed" marks
            if col in labels:
                ok[..., labels.index(col)] = True
        if not np.all(ok):
            return name
    return ""


def execute(case: dict, workdir: str) -> dict:
    """Run one case in this process: its outcome per analysis and overall."""
    import mbcore
    from mbcore.model import Model
    path = Path(workdir) / f"model.{case['fmt']}"
    (Path(workdir) / "current").write_text("load")
    path.write_bytes(case["data"])
    runs: dict[str, tuple[str, str]] = {}
    try:
        model = Model.from_file(path)
    except BaseException as exc:          # noqa: BLE001 - classified
        runs["load"] = classify_error(exc, None, str(path))
        return _summary(runs)
    (Path(workdir) / "current").write_text("validate")
    try:
        from mbcore.analysis import resolve_settings
    except ImportError:                   # older mbcore: no separate settings validation
        resolve_settings = None
    try:                                  # the settings as `mbcore validate` sees them
        if resolve_settings is not None:
            from mbcore.plugins import registry
            resolve_settings(model.settings, registry())
    except BaseException as exc:          # noqa: BLE001 - classified (recorded if raised)
        runs["validate"] = classify_error(exc, model)
    own = model.settings.get("analysis")
    own = "kinematic" if own is None else own
    # the model's own analysis runs as `mbcore run MODEL` runs it (no override: the
    # model's settings.analysis is looked up), the others with analysis=...
    plan = [(a, a != own) for a in ANALYSES]
    if not any(own == a for a in ANALYSES):
        plan.append(("own", False))
    for analysis, override in plan:
        (Path(workdir) / "current").write_text(analysis)      # read after a hang
        try:
            if override:
                res = mbcore.run(model, analysis=analysis,
                                 settings=tame_settings(model.settings, analysis))
            else:
                res = mbcore.run(model, settings=tame_settings(
                    model.settings, own if isinstance(own, str) else ""))
            bad = _finite(res)
            runs[analysis] = ("nan", f"non-finite values in '{bad}'") if bad else \
                ("valid", f"{res.n_rows} rows")
        except BaseException as exc:      # noqa: BLE001 - classified
            runs[analysis] = classify_error(exc, model)
    return _summary(runs)


def _summary(runs: dict[str, tuple[str, str]]) -> dict:
    worst = max((c for c, _ in runs.values()), key=ORDER.index)
    return {"outcome": worst, "runs": {a: list(v) for a, v in runs.items()}}


# ------------------------------------------------------------------ the worker pool
def _worker(conn, workdir: str) -> None:
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    except (ImportError, ValueError, OSError):  # pragma: no cover - no limits here
        pass
    import warnings
    warnings.simplefilter("ignore")
    while True:
        try:
            case = conn.recv()
        except EOFError:
            return
        if case is None:
            return
        conn.send(execute(case, workdir))


class CasePool:
    """Runs cases in ``jobs`` forked worker processes; a worker that dies is a
    ``crash``, one that exceeds ``timeout`` seconds is killed and is a ``hang``."""

    def __init__(self, jobs: int = 1, timeout: float = 30.0):
        import mbcore.plugins
        mbcore.plugins.get_plugin_manager()       # imported once, before fork
        import mbcore.analysis.runner
        mbcore.analysis.runner.versions()
        self.jobs, self.timeout = jobs, timeout
        self.ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else None)
        self.tmp = tempfile.TemporaryDirectory(prefix="mbcore-fuzz-")
        self.workers: list = [None] * jobs

    def _spawn(self, k: int):
        parent, child = self.ctx.Pipe()
        d = os.path.join(self.tmp.name, f"w{k}")
        os.makedirs(d, exist_ok=True)
        p = self.ctx.Process(target=_worker, args=(child, d), daemon=True)
        p.start()
        child.close()
        self.workers[k] = [p, parent, None, 0.0]      # process, conn, case, started
        return self.workers[k]

    def run(self, cases: Iterable[dict]) -> Iterator[tuple[dict, dict]]:
        it = iter(cases)
        pending = True
        while True:
            for k in range(self.jobs):
                w = self.workers[k] or self._spawn(k)
                if w[2] is None and pending:
                    case = next(it, None)
                    if case is None:
                        pending = False
                        continue
                    w[1].send(case)
                    w[2], w[3] = case, time.monotonic()
            busy = [w for w in self.workers if w is not None and w[2] is not None]
            if not busy:
                return
            deadline = min(w[3] for w in busy) + self.timeout
            ready = wait([w[1] for w in busy], timeout=max(0.0, deadline - time.monotonic()))
            now = time.monotonic()
            for k, w in enumerate(self.workers):
                if w is None or w[2] is None:
                    continue
                case = w[2]
                if w[1] in ready:
                    try:
                        out = w[1].recv()
                    except (EOFError, OSError):
                        w[0].join(5)
                        out = {"outcome": "crash", "runs": {"worker": [
                            "crash", f"worker exit code {w[0].exitcode}"]}}
                        self.workers[k] = None
                    else:
                        w[2] = None
                    yield case, out
                elif now - w[3] > self.timeout:
                    w[0].kill()
                    w[0].join(5)
                    self.workers[k] = None
                    yield case, {"outcome": "hang", "runs": {"worker": [
                        "hang", f"no answer in {self.timeout:g} s during "
                                f"{self._current(k)}"]}}

    def _current(self, k: int) -> str:
        """The analysis worker k was running (or 'load')."""
        try:
            return (Path(self.tmp.name) / f"w{k}" / "current").read_text() or "load"
        except OSError:
            return "load"

    def close(self) -> None:
        for w in self.workers:
            if w is not None:
                try:
                    w[1].send(None)
                except OSError:
                    pass
                w[0].join(5)
                if w[0].is_alive():
                    w[0].kill()
        self.tmp.cleanup()

    def __enter__(self) -> "CasePool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ------------------------------------------------------------------ the campaign
def names_path(detail: str, path: str) -> bool:
    """Whether the key path of an error (``ModelError: <path>: <message>``) is
    ``path``, a key that contains it (``bodies[0]`` for ``bodies[0].mass``) or a key
    inside it (``settings.a`` for ``settings``)."""
    parts = detail.split(": ", 2)
    if len(parts) < 3:
        return False
    where = parts[1]

    def within(inner: str, outer: str) -> bool:
        return inner == outer or inner.startswith(outer) and inner[len(outer)] in ".["
    return bool(where) and (within(path, where) or within(where, path))


def campaign(cases: int, jobs: int, seed: int, timeout: float, start: int = 0,
             progress: bool = False, types: bool = False) -> dict:
    counts: Counter = Counter()
    runs: Counter = Counter()
    named: Counter = Counter()
    swaps: Counter = Counter()
    elsewhere: list[str] = []
    bad: list[dict] = []
    t0 = time.perf_counter()
    if types:
        cases = max(0, min(cases, type_swap_count() - start))
        gen = (type_swap_case(i) for i in range(start, start + cases))
    else:
        gen = (campaign_case(seed, i) for i in range(start, start + cases))
    with CasePool(jobs, timeout) as pool:
        for n, (case, out) in enumerate(pool.run(gen), 1):
            counts[out["outcome"]] += 1
            for analysis, (cls, detail) in out["runs"].items():
                runs[cls] += 1
                if cls == "named_error":
                    named[detail.split(":", 1)[0]] += 1
            if types:
                load = out["runs"].get("load") or out["runs"].get("validate")
                if load is None:
                    swaps["loaded"] += 1
                elif names_path(load[1], case["path"]):
                    swaps["load_error_names_the_key"] += 1
                else:
                    swaps["load_error_names_another_key"] += 1
                    if len(elsewhere) < 40:
                        elsewhere.append(f"{case['name']}: {load[1][:160]}")
            if out["outcome"] in BAD:
                bad.append({"index": case["index"], "name": case["name"],
                            "outcome": out["outcome"], "runs": out["runs"],
                            "text": case["data"].decode("utf-8", "replace")[:20000]})
            if progress and n % 200 == 0:
                print(f"{n} cases, {dict(counts)}", file=sys.stderr, flush=True)
    return {"command": " ".join(["python", "benchmarks/fuzz.py"] + sys.argv[1:]),
            "seed": seed, "cases": cases, "jobs": jobs, "timeout_s": timeout,
            "wall_time_s": round(time.perf_counter() - t0, 1),
            "outcomes": {c: counts.get(c, 0) for c in ORDER},
            "runs": {c: runs.get(c, 0) for c in ORDER},
            "named_errors_by_class": dict(named.most_common()),
            **({"type_swaps": dict(swaps), "sample_named_elsewhere": elsewhere}
               if types else {}),
            "bad_cases": bad}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=None,
                    help="number of cases (default: 1000; with --types: all)")
    ap.add_argument("--types", action="store_true",
                    help="the exhaustive type-swap campaign over the shipped examples")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="index of the first case")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    ap.add_argument("--report", help="write the JSON report here too")
    ap.add_argument("--progress", action="store_true")
    args = ap.parse_args(argv)
    cases = args.cases if args.cases is not None else \
        (type_swap_count() if args.types else 1000)
    rep = campaign(cases, args.jobs, args.seed, args.timeout, args.start,
                   args.progress, types=args.types)
    text = json.dumps(rep, indent=1)
    if args.report:
        Path(args.report).write_text(text)
    summary = {k: v for k, v in rep.items() if k != "bad_cases"}
    summary["bad_cases"] = [f"{b['index']}: {b['outcome']}: {b['name'][:120]}"
                            for b in rep["bad_cases"]]
    print(json.dumps(summary, indent=1))
    return 1 if rep["bad_cases"] else 0


if __name__ == "__main__":
    sys.exit(main())
