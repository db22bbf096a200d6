"""Results: HDF5Reporter -> Result, MemoryReporter -> MemoryResult, the file layout
of docs/results.md, crash safety (SIGKILL) and the label lookup rules."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import h5py
import numpy as np
import pytest

import mbplugins.reporters.hdf5 as hdf5mod
from mbcore.results.reporting import Channel, RunInfo
from mbcore.results.result import MemoryResult, Result, ResultFileError, ResultKeyError
from mbplugins.reporters.hdf5 import HDF5Reporter
from mbplugins.reporters.memory import MemoryReporter

SRC = str(Path(__file__).resolve().parents[1] / "src")

WIDTHS = {"q": 9, "qd": 9, "qdd": 9, "lam": 8}


def make_info(widths=WIDTHS, **kw) -> RunInfo:
    chans = []
    for name, w in widths.items():
        labels = [f"body{j // 3}.{'xyz'[j % 3]}" if name != "lam" else f"joint{j}.eq"
                  for j in range(w)]
        chans.append(Channel(name, labels, description=f"{name} series", unit=f"u_{name}"))
    defaults = dict(
        analysis="kinematic", channels=chans,
        model_text="name: démo\nbodies: []  # ünïcode ✓\n", model_format="yaml",
        model_name="démo",
        settings={"t_end": 2.0, "n_out": 25, "method": "newton", "tol": [1e-10, 1e-12],
                  "nested": {"a": 1, "b": None}, "flag": True, "arr": np.arange(3)},
        versions={"mbcore": "0.1.0"},
        metadata={"bodies": ["ground", "crank"], "units": {"length": "m"}},
    )
    defaults.update(kw)
    return RunInfo(**defaults)


def random_rows(n, widths=WIDTHS, seed=0):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.random(n))
    data = {k: rng.standard_normal((n, w)) for k, w in widths.items()}
    return t, data


def feed(rep, info, t, data, events=(), finish=("finished", "", None)):
    rep.start(info)
    work = {k: np.empty(v.shape[1]) for k, v in data.items()}
    for i in range(len(t)):
        for k in work:                      # reuse work buffers like an analysis does
            work[k][:] = data[k][i]
        rep.record(float(t[i]), work)
        for (ei, kind, msg) in events:
            if ei == i:
                rep.event(float(t[i]), kind, msg)
    if finish is not None:
        rep.finish(*finish)
    return rep


STATS = {"steps": 123, "newton_iterations": 456, "wall_time": 0.25, "max_residual": 1e-13,
         "per_step": [1, 2, 3]}
EVENTS = [(3, "warning", "near-singular Jacobian (cond 1e12)"),
          (10, "partition", "new independent coordinates: crank.phi → slider.x")]


def check_same(res, info, t, data, status="finished", reason=""):
    assert res.status == status
    assert res.reason == reason
    assert len(res) == len(t) == res.n_rows
    assert np.array_equal(res.t, t)
    assert res.channels == [c.name for c in info.channels]
    for c in info.channels:
        assert res.labels(c.name) == c.labels
        ch = res.channel(c.name)
        assert (ch.description, ch.unit) == (c.description, c.unit)
        s = res.series(c.name)
        assert s.dtype == np.float64 and s.shape == (len(t), c.width)
        assert np.array_equal(s, data[c.name])          # exact, bit for bit
        assert np.array_equal(res[c.name], data[c.name])
    assert res.model_text == info.model_text
    assert res.model_format == info.model_format
    assert res.model_name == info.model_name
    assert res.analysis == info.analysis
    assert res.settings == json.loads(json.dumps({**info.settings, "arr": [0, 1, 2]}))
    assert res.metadata == info.metadata
    assert res.versions["mbcore"] == "0.1.0"


# ----------------------------------------------------------------------- round trips
@pytest.mark.parametrize("block_rows", [1, 7, 256])
def test_hdf5_round_trip_exact(tmp_path, block_rows):
    info = make_info()
    t, data = random_rows(100)
    path = tmp_path / "run.h5"
    feed(HDF5Reporter(path, block_rows=block_rows), info, t, data, EVENTS,
         finish=("finished", "", STATS))
    with Result(path) as res:
        check_same(res, info, t, data)
        assert res.stats == STATS
        assert res.events == [(float(t[i]), k, m) for i, k, m in EVENTS]
        assert res.created and res.finished and res.created <= res.finished
        assert res.created.endswith("+00:00")
        assert {"numpy", "h5py", "hdf5", "python"} <= set(res.versions)


@pytest.mark.parametrize("planned", [5, 3000, 10_000])
def test_memory_expected_rows_is_a_hint_not_a_limit(planned):
    """``RunInfo.expected_rows`` below, at and above the rows recorded: every row kept."""
    info = make_info(expected_rows=planned)
    t, data = random_rows(3000, seed=2)
    rep = feed(MemoryReporter(initial_rows=16), info, t, data)
    check_same(rep.result(), info, t, data)


def test_dynamic_analysis_plans_its_output_grid(examples):
    import mbcore
    res = mbcore.run(examples / "slider_crank.yaml", analysis="dynamic",
                     settings={"t_end": 0.3, "output_step": 0.01})
    from mbcore.plugins.manager import registry
    system = mbcore.Model.from_file(examples / "slider_crank.yaml").compile()
    job = registry().get("analysis", "dynamic")(system, {"t_end": 0.3, "output_step": 0.01})
    assert len(res) <= job.expected_rows() <= len(res) + 3


def test_memory_round_trip_exact_and_same_api_as_hdf5(tmp_path):
    info = make_info()
    t, data = random_rows(3000, seed=1)            # > initial_rows: capacity doubles
    rep = feed(MemoryReporter(initial_rows=16), info, t, data, EVENTS,
               finish=("finished", "", STATS))
    mres = rep.result()
    assert isinstance(mres, MemoryResult) and rep.result() is mres
    check_same(mres, info, t, data)
    path = tmp_path / "run.h5"
    feed(HDF5Reporter(path), info, t, data, EVENTS, finish=("finished", "", STATS))
    with Result(path) as hres:
        for attr in ("status", "reason", "channels", "model_text", "model_name", "analysis",
                     "settings", "metadata", "stats", "events"):
            assert getattr(hres, attr) == getattr(mres, attr), attr
        assert np.array_equal(hres["body1.y"], mres["body1.y"])
        assert np.array_equal(hres["body1.y"], data["q"][:, 4])
    assert mres.stats == STATS and len(mres.events) == 2
    assert "kinematic" in mres.summary() and "(in memory)" in mres.summary()


@pytest.mark.parametrize("kind", ["memory", "hdf5", "plain"])
def test_record_rows_equals_record_row_by_row(tmp_path, kind):
    """Reporter rule 5: blocks of rows (``record_rows``, as the dynamic analysis hands
    them over from its compiled loop) give the result of one ``record`` per row —
    across the HDF5 write blocks and the memory reporter's growth, in blocks of
    uneven sizes; a reporter that knows only ``record`` gets one call per row."""
    from mbcore.results.reporting import Reporter, layout_of
    info = make_info()
    t, data = random_rows(100, seed=3)
    layout = layout_of(info.channels)
    block = np.concatenate([data[c.name] for c in info.channels], axis=1)

    class Plain(Reporter):        # record() only: the base class's record_rows
        def __init__(self):
            self.inner = MemoryReporter(initial_rows=4)

        def start(self, info):
            self.inner.start(info)

        def record(self, t, data):
            self.inner.record(t, data)

        def finish(self, *a):
            self.inner.finish(*a)

    new = {"memory": lambda: MemoryReporter(initial_rows=4),
           "hdf5": lambda: HDF5Reporter(tmp_path / "rows.h5", block_rows=7),
           "plain": Plain}[kind]
    rep = new()
    rep.start(info)
    edges = [0, 1, 2, 9, 10, 40, 41, 100]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        rep.record_rows(t[a:b], block[a:b], layout)
    rep.finish("finished", "", STATS)
    if kind == "hdf5":
        with Result(tmp_path / "rows.h5") as res:
            check_same(res, info, t, data)
    else:
        check_same((rep.inner if kind == "plain" else rep).result(), info, t, data)
    # a block in another layout (channels reordered) goes channel by channel
    rep = MemoryReporter()
    rep.start(info)
    rev = list(reversed(info.channels))
    rep.record_rows(t, np.concatenate([data[c.name] for c in rev], axis=1), layout_of(rev))
    rep.finish("finished")
    check_same(rep.result(), info, t, data)


def test_memory_snapshot_before_finish_and_failed():
    info = make_info()
    t, data = random_rows(10)
    rep = feed(MemoryReporter(initial_rows=4), info, t, data, finish=None)
    snap = rep.result()
    assert snap.status == "running" and len(snap) == 10
    assert np.array_equal(snap["q"], data["q"])
    rep.finish("failed", "lock-up at t = 1.5")
    res = rep.result()
    assert res.status == "failed" and res.reason == "lock-up at t = 1.5"
    assert np.array_equal(res["lam"], data["lam"])
    with pytest.raises(RuntimeError, match="after finish"):
        rep.record(1.0, {k: v[0] for k, v in data.items()})


def test_compression_and_width_zero_channel(tmp_path):
    widths = {"q": 3, "lam": 0}
    info = make_info(widths)
    t, data = random_rows(50, widths)
    path = tmp_path / "z.h5"
    feed(HDF5Reporter(path, block_rows=16, compression="gzip"), info, t, data)
    with Result(path) as res:
        assert res.series("lam").shape == (50, 0)
        assert np.array_equal(res["q"], data["q"])
        assert res.labels("lam") == []
    with h5py.File(path) as f:
        assert f["series/q"].compression == "gzip"
    mres = feed(MemoryReporter(), info, t, data).result()
    assert mres.series("lam").shape == (50, 0)


def test_arrays_are_read_only_and_cached(tmp_path):
    info = make_info()
    t, data = random_rows(5)
    path = tmp_path / "r.h5"
    feed(HDF5Reporter(path), info, t, data)
    with Result(path) as res:
        q = res["q"]
        assert res.series("q") is q
        with pytest.raises(ValueError):
            q[0, 0] = 1.0
        with pytest.raises(ValueError):
            res.t[0] = 1.0


# ---------------------------------------------------------------------- label lookup
def lookup_info():
    return RunInfo("kinematic", [
        Channel("q", ["crank.phi", "slider.x", "dup", "dup"]),
        Channel("qd", ["crank.phi", "slider.x", "only_qd", "both"]),
        Channel("qdd", ["crank.phi", "slider.x", "xx", "both"]),
        Channel("lam", ["rev1.x", "rev1.y", "a/b", "c:d"]),
    ])


def lookup_results(tmp_path):
    info = lookup_info()
    widths = {c.name: c.width for c in info.channels}
    t, data = random_rows(6, widths, seed=3)
    path = tmp_path / "l.h5"
    feed(HDF5Reporter(path), info, t, data)
    mem = feed(MemoryReporter(), info, t, data).result()
    return [Result(path), mem], t, data


def test_label_lookup_rules(tmp_path):
    results, t, data = lookup_results(tmp_path)
    for res in results:
        assert res["q"] is res.series("q")
        assert np.array_equal(res["t"], t)
        # bare label: the q column wins even if other channels have it
        assert np.array_equal(res["crank.phi"], data["q"][:, 0])
        assert np.array_equal(res["slider.x"], data["q"][:, 1])
        # bare label in no q column: unique match in any channel
        assert np.array_equal(res["only_qd"], data["qd"][:, 2])
        assert np.array_equal(res["rev1.y"], data["lam"][:, 1])
        # explicit channel/label, both separators
        assert np.array_equal(res["qd/crank.phi"], data["qd"][:, 0])
        assert np.array_equal(res["qdd:slider.x"], data["qdd"][:, 1])
        assert np.array_equal(res["qd/both"], data["qd"][:, 3])
        # labels that contain a separator still resolve
        assert np.array_equal(res["a/b"], data["lam"][:, 2])
        assert np.array_equal(res["c:d"], data["lam"][:, 3])
        assert np.array_equal(res["lam/a/b"], data["lam"][:, 2])
        assert res.locate("qdd/xx") == ("qdd", 2)
        # ambiguous across channels: names the channels
        with pytest.raises(KeyError) as ei:
            res["both"]
        assert "qd" in str(ei.value) and "qdd" in str(ei.value) and "ambiguous" in str(ei.value)
        # ambiguous inside one channel
        with pytest.raises(KeyError, match="ambiguous"):
            res["dup"]
        # unknown: close matches are suggested
        with pytest.raises(ResultKeyError) as ei:
            res["crank.ph"]
        assert "crank.phi" in str(ei.value)
        with pytest.raises(KeyError, match="qd/crank.phi"):
            res["qd/crank.pih"]
        with pytest.raises(KeyError, match="'qdd'"):
            res.series("qdx")
        with pytest.raises(KeyError):
            res.labels("nope")
        with pytest.raises(TypeError):
            res[0]
        assert "crank.phi" in res and "qd:only_qd" in res and "nothing" not in res
        with pytest.raises(TypeError):
            iter(res)
        res.close()


# --------------------------------------------------------------- blocks and flushing
def test_block_writes_and_time_flush(tmp_path, monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(hdf5mod, "_clock", lambda: clock[0])
    calls = []
    real_append = hdf5mod._append
    monkeypatch.setattr(hdf5mod, "_append",
                        lambda dsid, n0, rows: (calls.append((n0, rows.shape)),
                                                real_append(dsid, n0, rows)))
    info = make_info()
    t, data = random_rows(30)
    path = tmp_path / "b.h5"
    rep = HDF5Reporter(path, block_rows=10, flush_seconds=5.0)
    feed(rep, info, t[:25], {k: v[:25] for k, v in data.items()}, finish=None)

    def on_disk():       # what a killed process would leave: a byte copy of the file
        snap = tmp_path / "snap.h5"
        shutil.copyfile(path, snap)
        with h5py.File(snap, "r", libver="latest", swmr=True) as f:
            return (len(f["t"]), f.attrs["n_rows"], {k: f["series"][k].shape[0] for k in WIDTHS},
                    f.attrs["status"])

    # two full blocks written: one append per dataset (4 series + t) per block
    assert rep.blocks_written == 2
    assert len(calls) == 10 and {s[0] for _, s in calls} == {10}
    assert [n0 for n0, _ in calls] == [0] * 5 + [10] * 5
    assert on_disk() == (20, 20, dict.fromkeys(WIDTHS, 20), "running")
    # an in-process reader sees the written rows too
    with Result(path) as res:
        assert len(res) == 20 and res.status == "running"
        assert np.array_equal(res["q"], data["q"][:20])
    # wall time passes: the next record writes the partial block (6 rows) and flushes
    clock[0] += 5.0
    rep.record(float(t[25]), {k: v[25] for k, v in data.items()})
    assert rep.blocks_written == 3 and len(calls) == 15
    assert on_disk()[:2] == (26, 26)
    # an event alone also triggers the time flush
    rep.record(float(t[26]), {k: v[26] for k, v in data.items()})
    clock[0] += 5.0
    rep.event(float(t[26]), "warning", "w")
    assert on_disk()[:2] == (27, 27)
    rep.finish("finished")
    with Result(path) as res:
        assert len(res) == 27 and res.events == [(float(t[26]), "warning", "w")]
        assert np.array_equal(res["qdd"], data["qdd"][:27])


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    from mbcore.results.reporting import Channel, RunInfo
    from mbplugins.reporters.hdf5 import HDF5Reporter
    info = RunInfo("dynamic", [Channel("q", ["a", "b", "c"]), Channel("lam", ["l0", "l1"])],
                   model_text="m", model_name="killed")
    rep = HDF5Reporter(sys.argv[1], block_rows=10, flush_seconds=1e9)
    rep.start(info)
    for i in range(25):
        if i == 5:
            rep.event(0.1 * i, "warning", "before the kill")
        rep.record(0.1 * i, {"q": np.array([i, 2.0 * i, -i]), "lam": np.array([i + 0.5, 7.0])})
    print("ready", rep.blocks_written, flush=True)
    sys.stdin.readline()
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_killed_writer_leaves_readable_file(tmp_path):
    path = tmp_path / "killed.h5"
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as p:
        try:
            line = p.stdout.readline()
            assert line.split() == ["ready", "2"], p.stderr.read()
            # the writer is alive (SWMR mode): Result opens it as an SWMR reader
            with Result(path) as res:
                assert res.status == "running" and len(res) == 20
            with Result(path, live=True) as res:
                assert res.status == "running" and len(res) == 20
            p.stdin.write("go\n")
            p.stdin.flush()
            p.wait(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert p.returncode == -signal.SIGKILL
    i = np.arange(20.0)
    with h5py.File(path, "r", libver="latest", swmr=True) as f:   # plain h5py (SWMR)
        assert f.attrs["status"] == "running"
        assert f.attrs["n_rows"] == 20
        assert np.array_equal(f["t"][:], 0.1 * i)
        assert np.array_equal(f["series/q"][:], np.stack([i, 2 * i, -i], axis=1))
        assert f["series/lam"].shape == (20, 2)
        assert list(f["events/message"].asstr()[:]) == ["before the kill"]
    with Result(path) as res:
        assert res.status == "running" and res.reason == "" and res.stats == {}
        assert len(res) == 20 and res.model_name == "killed"
        assert np.array_equal(res["b"], 2 * i)
        assert np.array_equal(res["lam/l0"], i + 0.5)
        assert "running" in res.summary()


def test_failed_run_keeps_rows_and_reason(tmp_path):
    info = make_info()
    t, data = random_rows(37)
    path = tmp_path / "f.h5"
    rep = HDF5Reporter(path, block_rows=10)
    feed(rep, info, t, data, finish=None)
    # a bad record in the middle of the run: error, and no partial row is kept
    bad = {k: v[0] for k, v in data.items()}
    bad["qdd"] = np.zeros(3)
    with pytest.raises(ValueError, match="'qdd'.*9 values"):
        rep.record(99.0, bad)
    with pytest.raises(KeyError, match="'lam'"):
        rep.record(99.0, {"q": data["q"][0], "qd": data["qd"][0], "qdd": data["qdd"][0]})
    rep.finish("failed", "t = 1.25: mechanism locks up", {"steps": 37})
    with pytest.raises(RuntimeError, match="after finish"):
        rep.record(1.0, {k: v[0] for k, v in data.items()})
    with pytest.raises(RuntimeError, match="after finish"):
        rep.finish("failed")
    with Result(path) as res:
        check_same(res, info, t, data, status="failed", reason="t = 1.25: mechanism locks up")
        assert res.stats == {"steps": 37}
        s = res.summary()
        assert "failed: t = 1.25: mechanism locks up" in s and "rows:      37" in s


def test_context_manager_marks_failure(tmp_path):
    info = make_info({"q": 2})
    path = tmp_path / "cm.h5"
    with pytest.raises(ZeroDivisionError):
        with HDF5Reporter(path, block_rows=100) as rep:
            rep.start(info)
            rep.record(0.0, {"q": np.ones(2)})
            1 / 0
    with Result(path) as res:
        assert res.status == "failed" and "ZeroDivisionError" in res.reason and len(res) == 1


# ---------------------------------------------------------------- documented layout
def test_plain_h5py_reads_documented_layout(tmp_path):
    info = make_info()
    t, data = random_rows(40)
    path = tmp_path / "plain.h5"
    feed(HDF5Reporter(path, block_rows=16), info, t, data, EVENTS,
         finish=("finished", "", STATS))
    with h5py.File(path, "r") as f:
        a = f.attrs
        assert a["schema"] == "mbcore-result" and a["layout_version"] == 1
        assert a["status"] == "finished" and a["reason"] == ""
        assert a["analysis"] == "kinematic" and a["model_name"] == "démo"
        assert a["n_rows"] == 40
        assert list(a["channels"]) == ["q", "qd", "qdd", "lam"]
        assert json.loads(a["metadata"]) == info.metadata
        assert json.loads(a["stats"]) == STATS
        assert a["created"].endswith("+00:00") and a["finished"].endswith("+00:00")
        assert f["model"].asstr()[()] == info.model_text
        assert f["model"].attrs["format"] == "yaml" and f["model"].attrs["name"] == "démo"
        s = f["settings"].attrs
        assert s["t_end"] == 2.0 and s["n_out"] == 25 and s["method"] == "newton"
        assert json.loads(s["tol"]) == [1e-10, 1e-12] and bool(s["flag"]) is True
        assert json.loads(s["json"])["nested"] == {"a": 1, "b": None}
        assert f["versions"].attrs["mbcore"] == "0.1.0"
        assert f["stats"].attrs["steps"] == 123
        assert json.loads(f["stats"].attrs["json"]) == STATS
        tt = f["t"]
        assert tt.shape == (40,) and tt.maxshape == (None,) and tt.dtype == np.float64
        assert np.array_equal(tt[:], t)
        for c in info.channels:
            ds = f["series"][c.name]
            assert ds.shape == (40, c.width) and ds.maxshape == (None, c.width)
            assert ds.dtype == np.float64 and ds.chunks is not None
            assert ds.chunks[1] == c.width and 1 <= ds.chunks[0] * c.width * 8 <= 64 * 1024
            assert ds.attrs["description"] == c.description and ds.attrs["unit"] == c.unit
            assert list(f["labels"][c.name].asstr()[:]) == c.labels
            assert np.array_equal(ds[:], data[c.name])
        q = f["series/q"][:]
        col = list(f["labels/q"].asstr()[:]).index("body1.y")
        assert np.array_equal(q[:, col], data["q"][:, 4])
        ev = f["events"]
        assert list(ev["t"][:]) == [t[3], t[10]]
        assert list(ev["kind"].asstr()[:]) == ["warning", "partition"]
        assert ev["message"].asstr()[1] == EVENTS[1][2]


# -------------------------------------------------------------------------- errors
def test_clear_errors(tmp_path):
    missing_dir = tmp_path / "no" / "such" / "dir" / "run.h5"
    rep = HDF5Reporter(missing_dir)
    with pytest.raises(FileNotFoundError) as ei:
        rep.start(make_info())
    assert str(missing_dir) in str(ei.value) and "does not exist" in str(ei.value)
    rep.finish("failed", "could not start")          # tolerated after a failed start

    with pytest.raises(RuntimeError, match="before start"):
        HDF5Reporter(tmp_path / "x.h5").record(0.0, {})
    with pytest.raises(ValueError, match="block_rows"):
        HDF5Reporter(tmp_path / "x.h5", block_rows=0)
    with pytest.raises(ValueError, match="compression"):
        HDF5Reporter(tmp_path / "x.h5", compression="zstd-ultra")
    for bad in ("q/x", "t", "a:b"):
        with pytest.raises(ValueError, match="channel name"):
            HDF5Reporter(tmp_path / "x.h5").start(RunInfo("k", [Channel(bad, ["x"])]))
    with pytest.raises(ValueError, match="duplicate"):
        MemoryReporter().start(RunInfo("k", [Channel("q", ["x"]), Channel("q", ["y"])]))
    with pytest.raises(ValueError, match="status"):
        r = MemoryReporter()
        r.start(make_info())
        r.finish("done")

    with pytest.raises(FileNotFoundError, match="nope.h5"):
        Result(tmp_path / "nope.h5")
    text = tmp_path / "model.yaml"
    text.write_text("bodies: []\n")
    with pytest.raises(ResultFileError, match="model.yaml.*not an HDF5 file"):
        Result(text)
    other = tmp_path / "other.h5"
    with h5py.File(other, "w") as f:
        f["t"] = np.arange(3.0)
    with pytest.raises(ResultFileError, match="other.h5.*not an mbcore result"):
        Result(other)
    newer = tmp_path / "newer.h5"
    feed(HDF5Reporter(newer), make_info({"q": 1}), np.zeros(1), {"q": np.zeros((1, 1))})
    with h5py.File(newer, "r+") as f:
        f.attrs["layout_version"] = 99
    with pytest.raises(ResultFileError, match="newer"):
        Result(newer)


def test_summary_content(tmp_path):
    info = make_info()
    t, data = random_rows(12)
    path = tmp_path / "s.h5"
    feed(HDF5Reporter(path), info, t, data, EVENTS, finish=("finished", "", STATS))
    with Result(path) as res:
        s = res.summary()
    for needle in (str(path), "démo (yaml)", "kinematic", "finished", "rows:      12",
                   "q    width 9", "lam  width 8", "body0.x", "steps=123", "mbcore 0.1.0",
                   "1 warning, 1 partition"):
        assert needle in s, (needle, s)
