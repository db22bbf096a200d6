"""Concurrency and long runs (issue 18 item 5): two simulations in two threads and
in two processes give the results of the same run alone, bit for bit; many
sequential runs in one process give identical results and do not grow the memory
(RSS, Python objects) or the open files.

The long loop is also a command whose figures go into docs/reliability.md::

    python tests/test_concurrency.py 1000
"""
from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model, Result

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
CHANNELS = ("q", "qd", "qdd", "lam", "energy")
#: a small dynamic run (fourbar_dap: 3 bodies, dopri5, checkpoints with a file)
SETTINGS = {"t_end": 0.05, "output_step": 0.01}


def _model() -> Model:
    return Model.from_file(EXAMPLES / "fourbar_dap.yaml")


def _arrays(res) -> dict:
    return {"t": np.array(res.t), **{c: np.array(res[c]) for c in CHANNELS}}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------------
# two at once
# --------------------------------------------------------------------------------
def test_two_threads_give_the_results_of_one(tmp_path):
    settings = {"t_end": 1.0}
    alone = _arrays(mbcore.run(_model(), settings=settings))
    barrier = threading.Barrier(2)
    out: dict = {}

    def work(k):
        model = _model()
        barrier.wait()
        res = mbcore.run(model, settings=settings, output=tmp_path / f"th{k}.h5")
        out[k] = _arrays(res)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert sorted(out) == [0, 1]
    for k in range(2):
        assert _same(out[k], alone), k
        with Result(tmp_path / f"th{k}.h5") as r:
            assert r.status == "finished" and _same(_arrays(r), alone)


def test_two_processes_give_the_results_of_one(tmp_path):
    model = EXAMPLES / "fourbar_dap.yaml"
    alone = _arrays(mbcore.run(_model(), settings={"t_end": 2.0}))
    procs = [subprocess.Popen([sys.executable, "-m", "mbcore.cli", "run", str(model), "-o",
                               str(tmp_path / f"p{k}.h5"), "-q", "--t-end", "2.0"],
                              stderr=subprocess.PIPE, text=True) for k in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    for k in range(2):
        with Result(tmp_path / f"p{k}.h5") as r:
            assert r.status == "finished" and _same(_arrays(r), alone), k


# --------------------------------------------------------------------------------
# many in a row
# --------------------------------------------------------------------------------
def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim() -> bool:
    """Give the allocator's free memory back to the system (glibc ``malloc_trim``):
    the RSS then counts memory in use, not the free blocks glibc keeps after HDF5's
    many small allocations (they reach a plateau, and are no leak)."""
    try:
        import ctypes
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0) or True)
    except (OSError, AttributeError):
        return False


def _open_files() -> int:
    return len(os.listdir("/proc/self/fd"))


def sequential_runs(n: int, warmup: int, directory: Path, trace: bool = False) -> dict:
    """``n`` x (a run with an HDF5 file + a run in memory) of the same model in this
    process; the figures at run ``warmup`` and at run ``n``: the resident memory
    (after ``gc.collect()`` and :func:`_trim`; untrimmed too) and the open files,
    or with ``trace`` the Python memory traced by tracemalloc (a separate pass:
    tracemalloc's own tables would count in the RSS); and whether every result
    equals the first.  The trimmed RSS is also recorded every ``n // 10`` runs
    (``rss_series_MiB``: a warm-up, then flat)."""
    directory = Path(directory)
    model = _model()
    first = None
    identical = True
    if trace:
        tracemalloc.start()
    at = {}
    every = max(1, n // 10)
    try:
        for i in range(1, n + 1):
            out = directory / "loop.h5"
            a = mbcore.run(model, settings=SETTINGS, output=out)
            b = mbcore.run(model, settings=SETTINGS)
            ra, rb = _arrays(a), _arrays(b)
            del a, b
            if first is None:
                first = ra
                with Result(out) as r:
                    identical = _same(_arrays(r), first)
            identical = identical and _same(ra, first) and _same(rb, first)
            if i in (warmup, n) or i % every == 0:
                gc.collect()
                if trace:
                    at[i] = {"traced": tracemalloc.get_traced_memory()[0]}
                    continue
                raw = _rss_bytes()
                _trim()
                at[i] = {"rss": _rss_bytes(), "raw": raw, "fds": _open_files()}
    finally:
        if trace:
            tracemalloc.stop()
    w, e = at[warmup], at[n]
    fig = {"runs": n, "warmup": warmup, "identical": bool(identical)}
    if trace:
        fig.update({"traced_KiB": [round(w["traced"] / 1024, 1), round(e["traced"] / 1024, 1)],
                    "traced_growth_KiB": round((e["traced"] - w["traced"]) / 1024, 1)})
    else:
        fig.update({"rss_MiB": [round(w["rss"] / 2**20, 2), round(e["rss"] / 2**20, 2)],
                    "rss_growth_KiB": round((e["rss"] - w["rss"]) / 1024, 1),
                    "rss_untrimmed_MiB": [round(w["raw"] / 2**20, 2),
                                          round(e["raw"] / 2**20, 2)],
                    "open_files": [w["fds"], e["fds"]],
                    "rss_series_MiB": {i: round(v["rss"] / 2**20, 2)
                                       for i, v in sorted(at.items())}})
    return fig


def loop_figures(n: int, warmup: int, directory: Path) -> dict:
    """Both passes of :func:`sequential_runs` (untraced, then traced)."""
    fig = sequential_runs(n, warmup, directory)
    traced = sequential_runs(n, warmup, directory, trace=True)
    fig["identical"] = fig["identical"] and traced["identical"]
    fig.update({k: v for k, v in traced.items() if k.startswith("traced")})
    return fig


def _check(fig: dict, per_run_kib: float) -> None:
    runs = fig["runs"] - fig["warmup"]
    assert fig["identical"], fig
    assert fig["open_files"][1] == fig["open_files"][0], fig
    # traced Python objects: nothing kept per run (a few KiB of interned noise)
    assert fig["traced_growth_KiB"] < 64 + 0.5 * runs, fig
    assert fig["rss_growth_KiB"] < 1024 + per_run_kib * runs, fig


def test_100_sequential_runs_do_not_grow(tmp_path):
    fig = loop_figures(100, 20, tmp_path)
    print("\nsequential runs:", json.dumps(fig))
    _check(fig, 4.0)


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("MBCORE_LONG_TESTS"),
                    reason="minutes long: MBCORE_LONG_TESTS=1 (or `python "
                           "tests/test_concurrency.py 1000`, docs/reliability.md)")
def test_1000_sequential_runs_do_not_grow(tmp_path):
    fig = loop_figures(1000, 100, tmp_path)
    print("\nsequential runs:", json.dumps(fig))
    _check(fig, 1.0)


def probe(variant: str, n: int, every: int, directory: Path) -> dict:
    """The trimmed RSS every ``every`` of ``n`` runs of one kind: ``h5`` (with an HDF5
    file), ``mem`` (in memory), ``both``; ``both_gc`` also releases HDF5's free lists
    (``H5garbage_collect``) before each figure (docs/reliability.md, Long runs)."""
    import ctypes
    import glob
    h5gc = None
    if variant.endswith("_gc"):
        import h5py
        libs = glob.glob(os.path.join(os.path.dirname(h5py.__file__), os.pardir,
                                      "h5py.libs", "libhdf5-*.so*"))
        h5gc = ctypes.CDLL(libs[0]).H5garbage_collect if libs else None
    model, series = _model(), {}
    for i in range(1, n + 1):
        if variant != "mem":
            mbcore.run(model, settings=SETTINGS, output=Path(directory) / "probe.h5")
        if variant != "h5":
            mbcore.run(model, settings=SETTINGS)
        if i % every == 0:
            gc.collect()
            if h5gc is not None:
                h5gc()
            _trim()
            series[i] = round(_rss_bytes() / 2**20, 3)
    return {"variant": variant, "runs": n, "rss_MiB": series}


if __name__ == "__main__":
    # python tests/test_concurrency.py [N]              the loop's figures
    # python tests/test_concurrency.py probe VARIANT N  the RSS of one kind of run
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        if len(sys.argv) > 1 and sys.argv[1] == "probe":
            n = int(sys.argv[3])
            print(json.dumps(probe(sys.argv[2], n, max(1, n // 15), Path(d))))
        else:
            n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
            print(json.dumps(loop_figures(n, max(1, n // 10), Path(d)), indent=1))
