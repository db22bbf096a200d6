"""HDF5 schema v1 and live (SWMR) reading (issue 15, deliverable 1); kill -9 safety."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from mbcore import Model
from mbcore.analysis.checkpoint import CheckpointError, read_checkpoint
from mbcore.analysis.runner import resume
from mbcore.cli import main
from mbcore.results.result import SCHEMA_VERSION, Result
from mbcore.analysis.runner import run


def _model_file(tmp_path, examples, t_end=30.0, step=1e-4):
    text = (examples / "fourbar_dap.yaml").read_text()
    text = text.replace("integrator: dopri5", f"integrator: rk4\n  step: {step}")
    p = tmp_path / "m.yaml"
    p.write_text(text.replace("t_end: 5.0", f"t_end: {t_end}"))
    return p


def _start(model, out, **env):
    e = dict(os.environ, MBCORE_CHECKPOINT_SECONDS="0.1", **env)
    return subprocess.Popen([sys.executable, "-m", "mbcore.cli", "run", str(model), "-o",
                             str(out), "-q"], env=e, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def test_schema_v1_layout(tmp_path, examples):
    out = tmp_path / "r.h5"
    run(Model.from_file(examples / "fourbar_dap.yaml"),
        settings={"t_end": 0.2, "integrator": "rk4", "step": 0.001}, output=out,
        compression="gzip")
    with h5py.File(out, "r") as f:        # closed cleanly: a plain reader opens it
        a = f.attrs
        assert a["schema"] == "mbcore-result" and a["schema_version"] == SCHEMA_VERSION == 1
        assert a["status"] == "finished" and a["n_rows"] == 21 == f["t"].shape[0]
        assert f["series/q"].compression == "gzip"
        assert list(f["labels/q"].asstr()[:3]) == ["crank.x", "crank.y", "crank.phi"]
        for name in ("model", "settings", "versions", "stats", "events/t", "events/kind",
                     "events/message", "checkpoint/t", "checkpoint/y", "checkpoint/state"):
            assert name in f, name
        assert "assembly" in list(f["events/kind"].asstr()[:])
        v = f["versions"].attrs
        assert v["host"] and "mbcore" in v["plugins"] and v["mbcore"]
        assert "crank" in f.attrs["metadata"] and "O2" in f.attrs["metadata"]
        assert f["checkpoint/t"][-1] == f["t"][-1]
        assert f["checkpoint/n_rows"][-1] == 21
        for ch in ("q", "qd", "qdd", "lam", "reactions", "energy", "violation", "integrator"):
            assert f["series"][ch].shape[0] == 21, ch


def test_reader_process_sees_rows_grow(tmp_path, examples):
    model = _model_file(tmp_path, examples)
    out = tmp_path / "live.h5"
    p = _start(model, out)
    sizes = []
    try:
        f = None
        t0 = time.monotonic()
        while f is None and time.monotonic() - t0 < 30:
            try:
                f = h5py.File(out, "r", libver="latest", swmr=True)
            except (OSError, FileNotFoundError):
                time.sleep(0.05)
        assert f is not None, "the writer's file never opened as an SWMR reader"
        with f:
            ds = f["t"]
            while len(set(sizes)) < 4 and time.monotonic() - t0 < 30 and p.poll() is None:
                ds.refresh()
                sizes.append(ds.shape[0])
                time.sleep(0.1)
            q = f["series/q"]
            q.refresh()
            n = ds.shape[0]
            assert np.all(np.diff(ds[:n]) > 0)
            assert np.all(np.isfinite(q[:n]))
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    assert sizes == sorted(sizes)
    assert len(set(sizes)) >= 4, sizes
    assert main(["info", str(out)]) == 0


def test_result_refresh_follows_a_running_file(tmp_path, examples):
    model = _model_file(tmp_path, examples)
    out = tmp_path / "live.h5"
    p = _start(model, out)
    try:
        t0 = time.monotonic()
        res = None
        while res is None and time.monotonic() - t0 < 30:
            try:
                res = Result(out)
            except Exception:
                time.sleep(0.05)
        assert res is not None
        with res:
            assert res.status == "running"
            n0 = len(res)
            while res.refresh() == n0 and time.monotonic() - t0 < 30:
                time.sleep(0.05)
            n1 = len(res)
            assert n1 > n0 and res["q"].shape == (n1, 9)
            assert np.all(np.diff(res.t) > 0)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    with Result(out) as res:
        assert res.status == "interrupted" and len(res) >= n1


def test_info_follow_prints_growth(tmp_path, examples, capsys):
    model = _model_file(tmp_path, examples, t_end=1.0)
    out = tmp_path / "f.h5"
    p = _start(model, out)
    t0 = time.monotonic()
    while not out.exists() and time.monotonic() - t0 < 30:
        time.sleep(0.05)
    time.sleep(0.3)
    assert main(["info", "--follow", str(out)]) == 0
    p.wait(timeout=60)
    lines = [x for x in capsys.readouterr().out.splitlines() if " rows, t = " in x]
    assert lines and "status finished" in lines[-1]


def _kill_runs(tmp_path, examples, n_files, window):
    """kill -9 a running `mbcore run` at random moments (seconds after its start);
    every file must open and hold rows equal to the uninterrupted run's."""
    rng = random.Random(15)
    model = _model_file(tmp_path, examples, t_end=100.0)
    files, statuses, rows = [], [], []
    k = 0
    while len(files) < n_files:
        assert k < 2 * n_files + 10, f"{k} runs, {len(files)} files: the writer does not start"
        out = tmp_path / f"k{k}.h5"
        k += 1
        p = _start(model, out)
        # the random moment counts from the file's creation, not the process start:
        # on a loaded machine the interpreter's start-up alone can outlast the window
        deadline = time.monotonic() + 120.0
        while not out.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(rng.uniform(*window))
        p.send_signal(signal.SIGKILL)
        p.wait()
        if not out.exists():
            continue                     # killed before the file was created
        files.append(out)
        with Result(out) as r:            # opens (as an SWMR reader if needed)
            statuses.append(r.status)
            rows.append((np.array(r.t), np.array(r["q"])))
        with h5py.File(out, "r", libver="latest", swmr=True) as f:
            n = f["t"].shape[0]
            assert n >= f.attrs["n_rows"]                 # every flushed row
            if f["checkpoint/t"].shape[0]:
                assert f["checkpoint/n_rows"][-1] <= n
    print(f"\nkill -9: {len(files)} files ({k - len(files)} kills before the file "
          f"existed): {statuses.count('running')} running, "
          f"{statuses.count('finished')} finished; rows {min(len(t) for t, _ in rows)}"
          f"..{max(len(t) for t, _ in rows)}")
    assert statuses.count("running") >= n_files // 2, statuses
    # the uninterrupted run as far as the longest killed one: the same rows
    t_max = max(float(t[-1]) if len(t) else 0.0 for t, _ in rows)
    ref = tmp_path / "ref.h5"
    assert main(["run", str(model), "-o", str(ref), "-q", "--t-end",
                 repr(round(t_max + 0.01, 2))]) == 0
    with Result(ref) as r:
        t_ref, q_ref = np.array(r.t), np.array(r["q"])
    for t, q in rows:
        n = len(t)
        assert np.array_equal(t, t_ref[:n]) and np.array_equal(q, q_ref[:n])
    return files, statuses, t_ref, q_ref


def test_kill9_ten_times(tmp_path, examples):
    # (the slow test_kill9_long kills 60 times)
    files, statuses, t_ref, q_ref = _kill_runs(tmp_path, examples, 10, (0.05, 1.9))
    # resume two killed files to the reference end: bit-identical (rk4, fixed step)
    t_end = float(t_ref[-1])
    done = 0
    for out, st in zip(files, statuses, strict=True):
        try:
            if st != "running" or read_checkpoint(out).t >= t_end:
                continue
        except CheckpointError:          # killed before its first checkpoint
            continue
        resume(out, t_end=t_end)
        with Result(out) as r:
            assert np.array_equal(r.t, t_ref) and np.array_equal(r["q"], q_ref)
        done += 1
        if done == 2:
            break
    assert done == 2


@pytest.mark.slow
def test_kill9_long(tmp_path, examples):
    """60 kills (the helper asserts that every file opens and holds the
    uninterrupted run's rows); every file is a finished or a running one."""
    files, statuses, t_ref, _ = _kill_runs(tmp_path, examples, 60, (0.0, 3.0))
    assert len(files) == 60 and len(t_ref) > 1
    assert set(statuses) <= {"running", "finished"}, statuses
