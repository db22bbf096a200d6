"""Streaming in bounded memory: a run with an HDF5 output keeps no copy of its rows
(the returned result reads the file lazily) and what the runner needs of the rows
(last time, the first non-finite value) comes from a bounded summary."""
from __future__ import annotations

import tracemalloc

import h5py
import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import AnalysisError
from mbcore.results.reporting import Channel, Row, RunInfo
from mbcore.results.result import MemoryResult, Result, ResultFileError


def _dynamic(examples, t_end, step=1e-3):
    m = Model.from_file(examples / "fourbar_dap.yaml")
    return m, {"t_end": t_end, "output_step": step, "integrator": "rk4", "step": step}


def test_a_run_with_output_returns_the_file_read_lazily(tmp_path, examples):
    m, s = _dynamic(examples, 0.5)
    out = tmp_path / "r.h5"
    res = mbcore.run(m, settings=s, output=out)
    ref = mbcore.run(m, settings=s)                        # in memory, same process
    assert isinstance(res, Result) and isinstance(ref, MemoryResult)
    assert res.path == out and res.status == "finished" and res.system is not None
    with h5py.File(out, "r+") as f:           # the result holds no handle on the file
        f.attrs["note"] = "marked while the result is alive"
    # the same read API, the same numbers (one code path, one process: bitwise)
    assert res.channels == ref.channels and len(res) == len(ref) == 501
    assert np.array_equal(res.t, ref.t)
    for name in ref.channels:
        assert np.array_equal(res[name], ref[name]), name
        assert res.labels(name) == ref.labels(name)
    assert np.array_equal(res["crank.phi"], ref["crank.phi"])
    assert res.events == ref.events and res.settings == ref.settings
    assert res.columns() == ref.columns()
    assert res.at(0.25) == ref.at(0.25)
    sub, subref = res.between(0.1, 0.2), ref.between(0.1, 0.2)
    assert np.array_equal(sub["q"], subref["q"])
    assert set(res.stats) == set(ref.stats)
    again = Result(out, keep_open=False)
    again.close()
    with pytest.raises(ValueError, match="closed"):
        again.series("qdd")                     # not read before close()


def test_a_file_replaced_by_another_run_is_refused(tmp_path, examples):
    m, s = _dynamic(examples, 0.1)
    out = tmp_path / "r.h5"
    res = mbcore.run(m, settings=s, output=out)
    mbcore.run(Model.from_file(examples / "fourbar_kap.yaml"), output=out)
    with pytest.raises(ResultFileError, match="changed since"):
        res.series("q")


def _peak_during_run(m, s, out) -> int:
    """Peak of the Python allocations (NumPy buffers included) of one run above
    what was allocated before it."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        mbcore.run(m, settings=s, output=out)
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_the_runner_keeps_no_rows_in_memory(tmp_path, examples):
    """Peak Python allocation of a run with output at 2 000 and at 20 000 rows.  The
    18 000 extra rows hold 18 000 x 53 float64 = 7.6 MB of data (an in-memory copy
    grown by doubling peaks at ~2x that); the bound 1.5 MB is a fifth of one copy,
    and ~5x what the streaming path varies by here (block buffers are allocated
    once, whatever the number of rows)."""
    m, s = _dynamic(examples, 2.0)
    mbcore.run(m, settings=dict(s, t_end=0.1), output=tmp_path / "warm.h5")   # imports
    small = _peak_during_run(m, s, tmp_path / "a.h5")
    big = _peak_during_run(m, dict(s, t_end=20.0), tmp_path / "b.h5")
    with Result(tmp_path / "b.h5") as res:
        assert len(res) == 20001
        width = sum(res.width(c) for c in res.channels)
    assert 18000 * width * 8 > 5 * 1.5e6                # the bound is far below a copy
    assert big - small < 1.5e6, (small, big)


def _far_point_model(examples) -> Model:
    text = (examples / "fourbar_kap.yaml").read_text()
    text = text.replace("{name: P, body: coupler, at: [0.5, 1.5]}",
                        "{name: P, body: coupler, at: [1.7e+308, 1.7e+308]}")
    return Model.from_text(text, "yaml", path="far.yaml")


@pytest.mark.parametrize("output", [False, True], ids=["memory", "hdf5"])
def test_a_non_finite_value_is_an_error_naming_it(tmp_path, examples, output):
    out = tmp_path / "nan.h5" if output else None
    with pytest.raises(AnalysisError) as e:
        mbcore.run(_far_point_model(examples), settings={"t_end": 0.05}, output=out)
    assert "'points' is not finite at 'P." in str(e.value) and e.value.t == 0.0
    res = mbcore.run(_far_point_model(examples), settings={"t_end": 0.05}, output=out,
                     raise_errors=False)
    assert res.status == "failed" and "not finite" in res.reason
    assert res.n_rows == 3                                  # the rows are kept
    if output:
        with Result(out) as f:
            assert f.status == "failed" and len(f) == 3


def _info(labels=("a", "b"), solver=False) -> RunInfo:
    chans = [Channel("q", list(labels))]
    if solver:
        chans.append(Channel("solver", ["newton_iterations", "pivot_ratio"]))
    return RunInfo("kinematic", chans)


def test_run_summary_keeps_the_earliest_non_finite_value():
    from mbcore.results.run_summary import RunSummary
    s = RunSummary()
    s.start(_info())
    s.record(0.0, {"q": np.array([1.0, 2.0])})
    s.record(0.1, {"q": np.array([1.0, np.inf])})       # pending in the block
    rows = np.array([[np.nan, 1.0], [1.0, 1.0]])
    s.record_rows(np.array([0.2, 0.3]), rows, (("q", 2),))
    s.finish("finished")
    assert s.n_rows == 4 and s.last_t == 0.3
    assert s.first_non_finite == (0.1, "q", "b", np.inf)
    err = s.error()
    assert isinstance(err, AnalysisError) and err.t == 0.1 and "'q' is not finite at 'b'" \
        in str(err)


def test_run_summary_allows_the_documented_nan_columns_and_checks_full_blocks():
    from mbcore.results.run_summary import RunSummary
    s = RunSummary()
    s.start(_info(solver=True))
    row = Row(_info(solver=True).channels)
    row["solver"][:] = [3.0, np.nan]                 # pivot_ratio: NaN = not computed
    n = 3 * s.block_rows + 1
    for i in range(n):
        row["q"][:] = [i, i]
        s.record(i * 0.1, row)
    s.finish("finished")
    assert s.error() is None and s.n_rows == n
    s = RunSummary()
    s.start(_info())
    for i in range(2 * s.block_rows):                      # found when its block is checked
        s.record(float(i), {"q": np.array([1.0, np.nan if i == s.block_rows + 3 else 0.0])})
    assert s.first_non_finite is not None and s.first_non_finite[0] == s.block_rows + 3


def test_run_result_of_a_file_its_writer_could_not_mark(tmp_path):
    """The HDF5 library failed a write: the file says 'running' with the rows flushed
    before; the run's result says what happened."""
    from mbcore.results.result import run_result
    from mbplugins.reporters.hdf5 import HDF5Reporter
    out = tmp_path / "broken.h5"
    rep = HDF5Reporter(out, swmr=False)
    info = _info()
    rep.start(info)
    rep.record(0.0, {"q": np.array([1.0, 2.0])})
    rep.flush()
    res = run_result(out, info, "failed", "ResultWriteError: the disk is full", {"steps": 1})
    assert res.status == "failed" and res.reason.endswith("disk is full")
    assert len(res) == 1 and res.stats == {"steps": 1}
    rep.finish("finished")
    gone = run_result(tmp_path / "missing.h5", info, "failed", "boom", {})
    assert isinstance(gone, MemoryResult) and gone.status == "failed" and len(gone) == 0
    assert "cannot be read" in gone.reason
