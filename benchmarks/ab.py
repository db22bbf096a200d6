"""A/B benchmark of this checkout against an older commit, interleaved.

    python benchmarks/ab.py --old <commit> [--groups dynamics,spatial_dynamics,...]
                            [--quick] [--rounds 5] [--json PATH]

The old commit is checked out once as a detached ``git worktree`` under a cache
directory (``$MBCORE_AB_CACHE``, default ``<tmp>/mbcore-ab/<commit hash>``) and its
compiled kernels are built in place (``python setup.py build_ext --inplace``); both
are reused by later calls for the same commit.  Then ``benchmarks/run.py --only
<group>`` runs in fresh interpreters, group by group, alternately with
``PYTHONPATH=<old>/src`` and ``PYTHONPATH=<new>/src`` (rounds A B A B ...: the load of
the shared machine drifts, interleaving spreads it over both sides).  Each side runs
its own checkout's ``benchmarks/run.py`` (``--bench new`` runs this checkout's on
both sides when the old one lacks a case); a group that a side's run.py does not know
is reported as missing on that side, not as an error.

Every timing figure of run.py's JSON (a key naming a time: ``*_us``, ``*_s``,
``*_s_per_simulated_s``, ``seconds*``, ``*_us_per_*``; not differences such as
``extra_*``, ratios, exponents or fractions, and not the settings ``simulated_s``,
``output_step`` ...) becomes one row ``case:key`` (list entries with a sibling ``n``
become ``key[n=N]``).  Per row: the median over the rounds on each side and
new/old; rows with new/old > 1 + ``--threshold`` (default 0.05) are flagged
``SLOWER``.  ``min/min`` (the fastest round of each side) is shown next to it: the
load of a shared machine only ever slows a round down, so a row flagged by the
medians whose min/min is near 1 is likely noise (run more rounds).  Counts (``nfev``, ``steps``, ``rhs_evaluations`` ...) that differ between
the two sides are listed too: the same model taking different steps is a change of
results, not of speed.  A table goes to stdout, then the JSON (also to ``--json``).
Exit code 0, or 1 when a row is flagged (``--no-fail`` keeps 0).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GROUPS = ("dynamics", "spatial_dynamics", "joint_coordinates", "overheads")
BUILT_MARK = ".mbcore-ab-built"

# keys that name a time (a duration; larger = slower)
_TIME_KEY = re.compile(r"(^|_)(us|s|seconds)($|_per_)|_s_per_simulated_s$"
                       r"|^seconds_per_simulated_second$")
# keys that look like times but are settings, differences or derived quantities
_NOT_TIME = re.compile(r"^(simulated_s|t_end|output_step|macro_step_s|step|tolerance_m)$"
                       r"|extra|ratio|exponent|fraction|share|_over_|per_s$|runs_s$")
_COUNT_KEY = re.compile(r"(^|_)(nfev|njev|nlu|steps|rhs_evaluations|output_rows|"
                        r"output_steps|iterations)$")


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def cache_dir() -> Path:
    return Path(os.environ.get("MBCORE_AB_CACHE")
                or Path(tempfile.gettempdir()) / "mbcore-ab")


def old_checkout(commit: str, *, python: str = sys.executable, log=print) -> Path:
    """A detached worktree of ``commit`` with its kernels built in place (cached)."""
    full = git("rev-parse", "--verify", f"{commit}^{{commit}}")
    path = cache_dir() / full[:12]
    if path.exists() and (path / ".git").exists():
        head = git("rev-parse", "HEAD", cwd=path)
        if head != full:
            raise SystemExit(f"ab: {path} is at {head[:12]}, not {full[:12]}: remove it "
                             f"(git worktree remove --force {path})")
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        log(f"ab: git worktree add --detach {path} {full[:12]}")
        git("worktree", "add", "--detach", str(path), full)
    mark = path / BUILT_MARK
    if not (mark.exists() and mark.read_text().strip() == full):
        log(f"ab: building the old kernels in {path} (python setup.py build_ext "
            f"--inplace; a few minutes)")
        t0 = time.perf_counter()
        r = subprocess.run([python, "setup.py", "build_ext", "--inplace"], cwd=path,
                           capture_output=True, text=True)
        if r.returncode:
            raise SystemExit(f"ab: the build of {full[:12]} failed:\n{r.stderr[-3000:]}")
        mark.write_text(full + "\n")
        log(f"ab: built in {time.perf_counter() - t0:.0f} s")
    return path


def groups_of(run_py: Path) -> set[str] | None:
    """The groups a run.py accepts (its ``--only`` choices), None if unreadable."""
    m = re.search(r'"--only".*?choices=\((.*?)\)', run_py.read_text(), re.S)
    return set(re.findall(r'"(\w+)"', m.group(1))) if m else None


def run_group(side_root: Path, bench_root: Path, group: str, quick: bool,
              repeat: int | None, python: str) -> tuple[dict | None, str]:
    """One run of ``bench_root/benchmarks/run.py --only group`` on ``side_root/src``."""
    env = {**os.environ, "PYTHONPATH": str(side_root / "src")}
    cmd = [python, str(bench_root / "benchmarks" / "run.py"), "--only", group]
    if quick:
        cmd.append("--quick")
    if repeat:
        cmd += ["--repeat", str(repeat)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=side_root)
    if r.returncode:
        return None, r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"
    try:
        return json.loads(r.stdout), ""
    except ValueError as exc:
        return None, f"unreadable JSON: {exc}"


def flatten(cases: dict) -> tuple[dict[str, float], dict[str, object]]:
    """(timings, counts) of one run.py report: ``case:key[...]`` -> value."""
    times: dict[str, float] = {}
    counts: dict[str, object] = {}

    def walk(prefix: str, d: dict, n_parent: list | None = None) -> None:
        n = d.get("n") if isinstance(d.get("n"), list) else n_parent
        for k, v in d.items():
            name = f"{prefix}:{k}" if ":" not in prefix else f"{prefix}.{k}"
            if isinstance(v, dict):
                walk(name, v, n)
                continue
            is_time = bool(_TIME_KEY.search(k)) and not _NOT_TIME.search(k)
            is_count = bool(_COUNT_KEY.search(k))
            if not (is_time or is_count):
                continue
            items = ([(f"{name}[n={a}]", b) for a, b in zip(n, v, strict=True)]
                     if isinstance(v, list) and n is not None and len(n) == len(v)
                     else [(name, v)] if not isinstance(v, list) else [])
            for key, val in items:
                if isinstance(val, bool) or not isinstance(val, (int, float)):
                    continue
                if is_time:
                    times[key] = float(val)
                else:
                    counts[key] = val
    for case, row in cases.items():
        if isinstance(row, dict):
            walk(case, row)
    return times, counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True, help="the old commit (hash, tag, branch)")
    p.add_argument("--groups", default=",".join(DEFAULT_GROUPS),
                   help="comma-separated run.py groups (default: %(default)s)")
    p.add_argument("--quick", action="store_true", help="run.py --quick")
    p.add_argument("--rounds", type=int, default=5, help="A/B rounds (default 5)")
    p.add_argument("--repeat", type=int, help="run.py --repeat (default: run.py's)")
    p.add_argument("--threshold", type=float, default=0.05,
                   help="flag new/old above 1 + this (default 0.05)")
    p.add_argument("--bench", choices=("own", "new"), default="own",
                   help="own: each side runs its own benchmarks/run.py; new: this "
                        "checkout's run.py on both sides")
    p.add_argument("--python", default=sys.executable, help="interpreter for both sides")
    p.add_argument("--json", metavar="PATH", help="also write the JSON here")
    p.add_argument("--no-fail", action="store_true", help="exit 0 even when flagged")
    args = p.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    old = old_checkout(args.old, python=args.python, log=log)
    sides = {"old": old, "new": ROOT}
    bench = {s: (root if args.bench == "own" else ROOT) for s, root in sides.items()}
    groups = [g.strip() for g in args.groups.split(",") if g.strip()]
    known = {s: groups_of(bench[s] / "benchmarks" / "run.py") for s in sides}
    samples: dict[str, dict[str, dict[str, list[float]]]] = {s: {} for s in sides}
    counts: dict[str, dict[str, dict[str, object]]] = {s: {} for s in sides}
    missing: dict[str, list[str]] = {s: [] for s in sides}
    errors: list[str] = []
    t_start = time.perf_counter()
    for group in groups:
        for s in sides:
            if known[s] is not None and group not in known[s]:
                missing[s].append(group)
        for rnd in range(args.rounds):
            # A B A B ...; the side that starts alternates with the round as well
            order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
            for s in order:
                if group in missing[s]:
                    continue
                t0 = time.perf_counter()
                rep, err = run_group(sides[s], bench[s], group, args.quick, args.repeat,
                                     args.python)
                log(f"ab: {group} round {rnd + 1}/{args.rounds} {s}: "
                    f"{time.perf_counter() - t0:.1f} s{' ERROR ' + err if err else ''}")
                if rep is None:
                    errors.append(f"{group} {s} round {rnd + 1}: {err}")
                    continue
                tm, ct = flatten(rep.get("cases", {}))
                for k, v in tm.items():
                    samples[s].setdefault(group, {}).setdefault(k, []).append(v)
                counts[s].setdefault(group, {}).update(ct)
    rows, count_diffs = [], []
    for group in groups:
        o, n = samples["old"].get(group, {}), samples["new"].get(group, {})
        for key in sorted(set(o) | set(n)):
            mo = statistics.median(o[key]) if key in o else None
            mn = statistics.median(n[key]) if key in n else None
            ratio = mn / mo if mo and mn is not None else None
            ratio_min = (min(n[key]) / min(o[key]) if key in o and key in n and min(o[key])
                         else None)
            rows.append({"group": group, "case": key, "old": mo, "new": mn,
                         "ratio": ratio, "ratio_min": ratio_min,
                         "old_rounds": o.get(key, []),
                         "new_rounds": n.get(key, []),
                         "slower": ratio is not None and ratio > 1 + args.threshold})
        co, cn = counts["old"].get(group, {}), counts["new"].get(group, {})
        for key in sorted(set(co) & set(cn)):
            if co[key] != cn[key]:
                count_diffs.append({"group": group, "case": key, "old": co[key],
                                    "new": cn[key]})
    flagged = [r for r in rows if r["slower"]]
    report = {"old": git("rev-parse", "HEAD", cwd=old), "new": git("rev-parse", "HEAD"),
              "new_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
              "groups": groups, "quick": args.quick, "rounds": args.rounds,
              "bench": args.bench, "threshold": args.threshold,
              "statistic": "median over rounds of run.py's per-case median",
              "seconds": round(time.perf_counter() - t_start, 1),
              "missing_groups": missing, "errors": errors, "rows": rows,
              "count_differences": count_diffs,
              "slower": [r["case"] for r in flagged]}
    w = max([len(r["case"]) for r in rows] + [4])
    print(f"{'case':{w}s} {'old':>11s} {'new':>11s} {'new/old':>8s} {'min/min':>8s}")
    for r in rows:
        f = (lambda x: f"{x:11.4g}" if x is not None else f"{'-':>11s}")
        g = (lambda x: f"{x:8.3f}" if x is not None else f"{'-':>8s}")
        print(f"{r['case']:{w}s} {f(r['old'])} {f(r['new'])} {g(r['ratio'])} "
              f"{g(r['ratio_min'])}"
              f"{'  SLOWER' if r['slower'] else ''}")
    for s, g in missing.items():
        if g:
            print(f"groups missing on the {s} side: {', '.join(g)}")
    for d in count_diffs:
        print(f"count differs: {d['case']}: old {d['old']} new {d['new']}")
    print(f"{len(flagged)} of {len(rows)} rows slower by more than "
          f"{100 * args.threshold:g} %; {len(errors)} failed runs")
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 1 if (flagged or errors) and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
