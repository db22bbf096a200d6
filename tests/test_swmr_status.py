"""A reader of a growing result file learns how the run ended: ``Result.refresh()``
sees ``finished`` / ``failed`` / ``interrupted`` (SWMR refreshes datasets, not
attributes), and ``mbcore info --follow`` stops when the recorded writer is gone."""
from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from mbcore.analysis.checkpoint import follow
from mbcore.results.result import Result

#: a writer process: HDF5Reporter, one row flushed, then (on a line of stdin) a
#: second row and finish(status, reason, stats); it prints "ready" and "done"
WRITER = textwrap.dedent("""
    import sys
    import numpy as np
    from mbcore.results.reporting import Channel, RunInfo
    from mbplugins.reporters.hdf5 import HDF5Reporter
    path, status = sys.argv[1], sys.argv[2]
    rep = HDF5Reporter(path, flush_seconds=0.0)
    rep.start(RunInfo("dynamic", [Channel("q", ["a.x", "a.y"])]))
    rep.record(0.0, {"q": np.array([1.0, 2.0])})
    rep.flush()
    print("ready", flush=True)
    sys.stdin.readline()
    rep.record(0.5, {"q": np.array([3.0, 4.0])})
    rep.finish(status, "" if status == "finished" else "why: " + status, {"steps": 7})
    print("done", flush=True)
""")


def _writer(tmp_path, status):
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    out = tmp_path / f"{status}.h5"
    p = subprocess.Popen([sys.executable, str(script), str(out), status],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p, out


@pytest.mark.parametrize("status", ["finished", "failed", "interrupted"])
def test_refresh_sees_how_the_run_ended(tmp_path, status):
    p, out = _writer(tmp_path, status)
    try:
        with Result(out) as res:             # opened while the writer holds the file
            assert res.swmr and res.status == "running" and len(res) == 1
            p.stdin.write("go\n")
            p.stdin.flush()
            assert p.stdout.readline().strip() == "done"
            assert res.refresh() == 2
            assert res.status == status
            assert res.reason == ("" if status == "finished" else "why: " + status)
            assert res.stats == {"steps": 7} and res.finished
            assert np.array_equal(res["q"], [[1.0, 2.0], [3.0, 4.0]])
    finally:
        p.stdin.close()
        p.wait(timeout=60)


def _model_file(tmp_path, examples, t_end):
    text = (examples / "fourbar_dap.yaml").read_text()
    text = text.replace("integrator: dopri5", "integrator: rk4\n  step: 1.0e-4")
    p = tmp_path / "m.yaml"
    p.write_text(text.replace("t_end: 5.0", f"t_end: {t_end}"))
    return p


def _run_process(model, out):
    return subprocess.Popen([sys.executable, "-m", "mbcore.cli", "run", str(model), "-o",
                             str(out), "-q"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def _open_live(out, p, limit=60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        try:
            res = Result(out)
        except (OSError, ValueError):
            time.sleep(0.02)
            continue
        if len(res):
            return res
        res.close()
        time.sleep(0.02)
    raise AssertionError(f"the writer's file never showed a row ({p.poll()=})")


def test_refresh_follows_a_run_to_its_end(tmp_path, examples):
    """A reader that only calls refresh() sees every row and the status finished."""
    out = tmp_path / "run.h5"
    p = _run_process(_model_file(tmp_path, examples, t_end=2.0), out)
    try:
        with _open_live(out, p) as res:
            t0 = time.monotonic()
            while res.status == "running" and time.monotonic() - t0 < 120:
                res.refresh()
                time.sleep(0.05)
            assert p.wait(timeout=60) == 0
            assert res.status == "finished", (res.status, p.stderr.read())
            assert len(res) == 201 and res.t[-1] == pytest.approx(2.0)
            assert "wall_time" in res.stats and res.finished
            assert np.all(np.isfinite(res["q"]))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_refresh_of_a_file_without_the_status_dataset(tmp_path, examples):
    """Files written before the /status dataset existed still open and refresh."""
    from mbcore import Model, run
    out = tmp_path / "old.h5"
    run(Model.from_file(examples / "fourbar_kap.yaml"), output=out)
    with h5py.File(out, "r+") as f:
        del f["status"]
    with Result(out) as res:
        n = len(res)
        assert res.refresh() == n and res.status == "finished"


# ------------------------------------------------------------------ info --follow
@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_follow_stops_when_the_writer_was_killed(tmp_path, examples, reaped):
    if not reaped and not Path("/proc/self/stat").exists():
        pytest.skip("a zombie is told from /proc/<pid>/stat (Linux)")
    out = tmp_path / "k.h5"
    p = _run_process(_model_file(tmp_path, examples, t_end=1000.0), out)
    try:
        _open_live(out, p).close()
    finally:
        p.send_signal(signal.SIGKILL)
        if reaped:
            p.wait()
    try:
        lines: list[str] = []
        t0 = time.monotonic()
        n = follow(out, interval=0.05, idle=30.0, out=lines.append)
        took = time.monotonic() - t0
    finally:
        p.wait()
    assert took < 10.0, lines              # not the 30 s idle timeout
    assert n > 0 and "running" in lines[0]
    last = lines[-1]
    assert f"pid {p.pid}" in last and "stopping" in last, lines
    assert ("has exited" if not reaped else "no longer exists") in last, lines


def test_follow_stops_when_the_pid_belongs_to_another_process(tmp_path, examples):
    """The file names a live pid, but of a process started after the writer."""
    from mbcore import Model, run
    from mbcore.results.result import process_start
    out = tmp_path / "reused.h5"
    run(Model.from_file(examples / "fourbar_kap.yaml"), output=out)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        start = process_start(other.pid)
        if not start:
            pytest.skip("no /proc: the process start time cannot be read here")
        with h5py.File(out, "r+") as f:
            f.attrs["status"] = "running"
            f.attrs["writer"] = f"{platform.node()}:{other.pid}"
            f.attrs["writer_start"] = str(int(start) - 1)     # the writer started earlier
        lines: list[str] = []
        t0 = time.monotonic()
        follow(out, interval=0.05, idle=30.0, out=lines.append)
        assert time.monotonic() - t0 < 10.0, lines
        assert "another process" in lines[-1], lines
    finally:
        other.kill()
        other.wait()


def test_writer_gone():
    from mbcore.results.result import process_start, writer_gone
    me = f"{platform.node()}:{os.getpid()}"
    assert writer_gone(me, process_start(os.getpid())) == ""
    assert writer_gone(me) == ""
    assert writer_gone(f"another-{platform.node()}:{os.getpid()}") == ""   # other host
    assert writer_gone("") == "" and writer_gone("garbage") == ""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()                                   # reaped: the pid no longer exists
    gone = writer_gone(f"{platform.node()}:{p.pid}")
    assert f"pid {p.pid}" in gone


def test_follow_on_another_host_falls_back_to_the_idle_timeout(tmp_path, examples):
    from mbcore import Model, run
    out = tmp_path / "remote.h5"
    run(Model.from_file(examples / "fourbar_kap.yaml"), output=out)
    with h5py.File(out, "r+") as f:
        f.attrs["status"] = "running"
        f.attrs["writer"] = f"elsewhere-{platform.node()}:1"
    lines: list[str] = []
    follow(out, interval=0.05, idle=0.3, out=lines.append)
    assert "no new rows for 0.3 s" in lines[-1], lines
