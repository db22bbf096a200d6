"""Peak memory of a long run streaming to HDF5 (``python benchmarks/run.py --only
memory``; also ``python benchmarks/memory.py [--quick] [--rows N ...]``).

``mbcore run examples/platform.yaml -o FILE --step 0.001 --t-end T -q`` (every
channel recorded: the model's default) in a fresh process for 10⁴, 10⁵ and 10⁶
rows; its peak resident set size is read by a parent process that only starts it
(``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` after it ended).  A run that
streams in bounded memory has the same peak at 10⁶ rows as at 10⁴: the criterion is
``peak(10⁶) - peak(10⁴) <= 50 MB``.  Linux/macOS (``resource``); the 10⁶-row run
takes minutes, which is why the group runs only when asked.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "examples" / "platform.yaml"
#: output step of the measured runs (s): rows = t_end / STEP + 1
STEP = 0.001
#: the acceptance bound on the growth of the peak from the smallest to the largest run
LIMIT_MB = 50.0

#: runs in a fresh interpreter: mbcore run ..., then prints the child's peak RSS
_PARENT = r"""
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
wall = time.perf_counter() - t0
kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"rc": rc, "maxrss": kb, "wall_s": wall}))
"""


def peak_rss(rows: int, directory: Path) -> dict:
    """Peak RSS (MB) and wall time of ``mbcore run`` of the platform for ``rows``
    output rows (every channel)."""
    t_end = (rows - 1) * STEP
    out = directory / f"platform_{rows}.h5"
    cmd = [sys.executable, "-m", "mbcore.cli", "run", str(MODEL), "-o", str(out), "-q",
           "--t-end", repr(round(t_end, 9)), "--step", repr(STEP)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src")] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH")
                               else [])))
    res = subprocess.run([sys.executable, "-c", _PARENT, *cmd], env=env, check=True,
                         capture_output=True, text=True)
    got = json.loads(res.stdout.strip().splitlines()[-1])
    if got["rc"] != 0:
        raise RuntimeError(f"mbcore run failed ({got['rc']}): {' '.join(cmd)}")
    # ru_maxrss: KiB on Linux, bytes on macOS; reported in MB (10^6 bytes)
    scale = 1024 / 1e6 if sys.platform != "darwin" else 1 / 1e6
    size = out.stat().st_size
    out.unlink()
    return {"rows": rows, "t_end": t_end, "peak_rss_mb": got["maxrss"] * scale,
            "wall_s": got["wall_s"], "file_mb": size / 1e6}


def bench_memory(repeat: int = 1, quick: bool = False, sizes=None) -> dict:
    """The ``memory`` group of benchmarks/run.py: ``platform_streaming_memory``."""
    sizes = list(sizes or ((10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)))
    with tempfile.TemporaryDirectory(prefix="mbcore-memory-") as tmp:
        runs = [peak_rss(n, Path(tmp)) for n in sizes]
    base = runs[0]["peak_rss_mb"]
    growth = runs[-1]["peak_rss_mb"] - base
    per_row = growth * 1e6 / max(runs[-1]["rows"] - runs[0]["rows"], 1)
    row = {"model": "examples/platform.yaml (every channel)", "output_step": STEP,
           "runs": runs, "rows": [r["rows"] for r in runs],
           "peak_rss_mb": [round(r["peak_rss_mb"], 1) for r in runs],
           "wall_s": [round(r["wall_s"], 1) for r in runs],
           "growth_mb": growth, "bytes_per_row": per_row, "limit_mb": LIMIT_MB,
           "bounded": growth <= LIMIT_MB,
           "note": "peak RSS of `mbcore run -o FILE` in a fresh process; bounded: "
                   f"the peak of the largest run is within {LIMIT_MB:g} MB of the "
                   "smallest's"}
    return {"platform_streaming_memory": row}


def main(argv=None) -> int:
    import argparse
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10^4 and 10^5 rows only")
    p.add_argument("--rows", type=int, nargs="*", help="row counts to measure")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    out = bench_memory(quick=args.quick, sizes=args.rows)
    out["platform_streaming_memory"]["total_wall_s"] = time.perf_counter() - t0
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0 if out["platform_streaming_memory"]["bounded"] else 1


if __name__ == "__main__":
    sys.exit(main())
