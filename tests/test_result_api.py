"""Result API (issue 15, deliverable 3): named columns, time slicing, at(),
to_pandas / to_xarray, CSV, reading a file that is still being written."""
from __future__ import annotations

import io

import h5py
import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.results.reporting import Channel, RunInfo
from mbcore.results.result import MemoryResult, Result

pytestmark = pytest.mark.quick


@pytest.fixture(scope="module")
def dyn(tmp_path_factory):
    """A short dynamic run (energies, reactions, violations, integrator stats) kept in
    memory and in a file."""
    ex = __import__("conftest").EXAMPLES
    out = tmp_path_factory.mktemp("res") / "dyn.h5"
    mem = mbcore.run(Model.from_file(ex / "slider_crank_dynamic.yaml"), output=out,
                     settings={"t_end": 0.2, "output_step": 0.01})
    with Result(out) as f:
        f.load_all()
        yield mem, f


def _both(dyn):
    return [dyn[0], dyn[1]]


def test_every_column_has_a_name_that_reads_it_back(dyn):
    for res in _both(dyn):
        names = res.columns()
        assert len(names) == sum(res.width(c) for c in res.channels)
        k = 0
        for c in res.channels:
            block = res.series(c)
            for j in range(res.width(c)):
                name = names[k]
                assert name.split("/", 1)[0] == c
                np.testing.assert_array_equal(res.series(name), block[:, j])
                np.testing.assert_array_equal(res[name], block[:, j])
                k += 1
    mem, f = dyn
    assert mem.columns() == f.columns()
    for key in ("energy/kinetic", "energy/total", "violation/position",
                "integrator/step_size"):
        assert key in mem.columns()
    reac = [n for n in f.columns() if n.startswith("reactions/")]
    assert reac, f.channels
    np.testing.assert_array_equal(f.series(reac[0]),
                                  mem.series("reactions")[:, 0])
    np.testing.assert_array_equal(f.series("t"), f.t)
    with pytest.raises(KeyError, match="did you mean"):
        f.series("energy/kinetik")


def test_columns_of_selected_channels_and_unknown_channel(dyn):
    res = dyn[1]
    assert res.columns("q,energy") == res.columns(["q", "energy"])
    assert res.columns("energy") == [f"energy/{l}" for l in res.labels("energy")]
    with pytest.raises(KeyError, match="no such channel"):
        res.columns("q,enrgy")


def test_between_slices_rows_and_keeps_the_description(dyn):
    for res in _both(dyn):
        t = res.t
        t0, t1 = t[3], t[9]
        part = res.between(t0, t1)
        keep = (t >= t0) & (t <= t1)
        assert len(part) == keep.sum() == 7
        np.testing.assert_array_equal(part.t, t[keep])
        for c in res.channels:
            np.testing.assert_array_equal(part.series(c), res.series(c)[keep])
        assert part.status == res.status and part.analysis == res.analysis
        assert part.settings == res.settings
        # open ends, channel selection, bounds between rows
        assert len(res.between(None, t[2])) == 3
        assert len(res.between(t[-2])) == 2
        mid = res.between(0.5 * (t[1] + t[2]), 0.5 * (t[4] + t[5]), channels="energy")
        assert mid.channels == ["energy"]
        np.testing.assert_array_equal(mid.t, t[2:5])
        assert len(res.between(t[-1] + 1.0)) == 0
        with pytest.raises(ValueError, match="before"):
            res.between(1.0, 0.5)


def test_at_linear_and_nearest(dyn):
    res = dyn[1]
    t = res.t
    tm = t[4] + 0.25 * (t[5] - t[4])
    row = res.at(tm)
    assert row["t"] == tm
    q = res.series("q")
    # the same interpolation written another way: a few eps of |q| (relative to an
    # entry near 0 it was 2e-16 of 1e-14); bound 1e-13 of max|q|, > 100x the few eps
    np.testing.assert_allclose([row[n] for n in res.columns("q")],
                               0.75 * q[4] + 0.25 * q[5], rtol=0,
                               atol=1e-13 * np.abs(q[4:6]).max())
    near = res.at(tm, method="nearest", channels="q")
    assert near["t"] == t[4] and list(near) == ["t", *res.columns("q")]
    np.testing.assert_array_equal([near[n] for n in res.columns("q")], q[4])
    assert res.at(t[-1] + 5, method="nearest")["t"] == t[-1]
    exact = res.at(t[7])
    assert exact[res.columns("q")[0]] == q[7, 0]
    with pytest.raises(ValueError, match="outside"):
        res.at(t[-1] + 1.0)
    with pytest.raises(ValueError, match="method"):
        res.at(0.0, method="cubic")


def test_to_pandas_round_trip(dyn):
    pd = pytest.importorskip("pandas")
    for res in _both(dyn):
        df = res.to_pandas()
        assert df.index.name == "t"
        np.testing.assert_array_equal(df.index.to_numpy(), res.t)
        assert list(df.columns) == res.columns()
        for c in res.channels:
            np.testing.assert_array_equal(df[res.columns(c)].to_numpy(), res.series(c))
        mi = res.to_pandas("q,energy", multiindex=True)
        assert mi.columns.names == ["channel", "label"]
        np.testing.assert_array_equal(mi["energy"].to_numpy(), res.series("energy"))
        assert list(mi["energy"].columns) == res.labels("energy")
        sl = res.to_pandas("energy", t0=res.t[2], t1=res.t[5])
        np.testing.assert_array_equal(sl.to_numpy(), res.series("energy")[2:6])
        assert isinstance(df, pd.DataFrame)


def test_to_xarray(dyn):
    pytest.importorskip("xarray")
    res = dyn[0]
    ds = res.to_xarray("q,energy")
    np.testing.assert_array_equal(ds["t"].to_numpy(), res.t)
    np.testing.assert_array_equal(ds["energy"].to_numpy(), res.series("energy"))
    assert list(ds["energy_label"].to_numpy()) == res.labels("energy")


def test_missing_optional_extra_names_it(dyn, monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name in ("pandas", "xarray"):
            raise ImportError(f"No module named {name!r}")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", fake)
    import importlib
    monkeypatch.setattr(importlib, "import_module",
                        lambda n, *a: fake(n) if n in ("pandas", "xarray") else real(n))
    with pytest.raises(ImportError, match=r"mbcore\[pandas\]"):
        dyn[0].to_pandas()
    with pytest.raises(ImportError, match=r"mbcore\[xarray\]"):
        dyn[0].to_xarray()


def test_to_csv_round_trip(dyn, tmp_path):
    for res in _both(dyn):
        buf = io.StringIO()
        n = res.to_csv(buf, "q,energy", t0=res.t[1])
        lines = buf.getvalue().splitlines()
        assert lines[0].split(",") == res.headers("q,energy")
        data = np.loadtxt(lines[1:], delimiter=",", ndmin=2)
        assert n == len(data) == len(res) - 1
        np.testing.assert_array_equal(data[:, 0], res.t[1:])
        np.testing.assert_array_equal(
            data[:, 1:], np.hstack([res.series("q"), res.series("energy")])[1:])
    path = tmp_path / "all.csv"
    assert dyn[1].to_csv(path) == len(dyn[1])
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    assert data.shape == (len(dyn[1]), 1 + len(dyn[1].columns()))


def test_unlabelled_and_repeated_labels_get_index_names():
    info = RunInfo(analysis="x", channels=[Channel("a", ["u", "u", "w"]), Channel("b", [])])
    r = MemoryResult(info=info, t=np.arange(3.0),
                     series={"a": np.arange(9.0).reshape(3, 3), "b": np.empty((3, 0))})
    assert r.columns() == ["a/0", "a/1", "a/w"]
    np.testing.assert_array_equal(r.series("a/w"), [2.0, 5.0, 8.0])


def _write_growing(path, n_rows):
    from mbplugins.reporters.hdf5 import HDF5Reporter
    rep = HDF5Reporter(path, block_rows=4, flush_seconds=0.0)
    rep.start(RunInfo(analysis="test", channels=[Channel("q", ["a", "b"])]))
    for i in range(n_rows):
        rep.record(0.1 * i, {"q": np.array([i, -i], dtype=float)})
    rep.flush()
    return rep


def test_reading_a_file_being_written_and_refresh(tmp_path):
    path = tmp_path / "grow.h5"
    rep = _write_growing(path, 5)
    try:
        with Result(path, live=True) as res:
            assert res.status == "running"
            assert len(res) == 5
            np.testing.assert_array_equal(res["q/a"], np.arange(5.0))
            for i in range(5, 12):
                rep.record(0.1 * i, {"q": np.array([i, -i], dtype=float)})
            rep.flush()
            res.refresh()
            assert len(res) == 12
            np.testing.assert_array_equal(res.series("q/b"), -np.arange(12.0))
            part = res.between(0.45)
            np.testing.assert_array_equal(part["q/a"], np.arange(5.0, 12.0))
    finally:
        rep.finish("finished", "", {})
    with Result(path) as res:
        assert res.status == "finished" and len(res) == 12


def test_swmr_written_file_is_read_in_swmr_mode(tmp_path):
    """A file written in SWMR mode (root attribute ``swmr``, writer still running) is
    opened with swmr=True and its rows read."""
    path = tmp_path / "swmr.h5"
    w = h5py.File(path, "w", libver="latest")
    try:
        w.attrs.update({"schema": "mbcore-result", "layout_version": 1, "status": "running",
                        "analysis": "test", "swmr": True})
        w.attrs["channels"] = np.array(["q"], dtype=h5py.string_dtype())
        w.create_dataset("t", data=np.arange(3.0), maxshape=(None,), chunks=(16,))
        w.create_group("series").create_dataset("q", data=np.ones((3, 2)),
                                                maxshape=(None, 2), chunks=(16, 2))
        w.create_group("labels").create_dataset(
            "q", data=np.array(["a", "b"], dtype=h5py.string_dtype()))
        w.swmr_mode = True
        w.flush()
        with Result(path) as res:
            assert res.swmr is True
            assert res.status == "running" and len(res) == 3
            np.testing.assert_array_equal(res["q/b"], [1.0, 1.0, 1.0])
            w["t"].resize((5,))
            w["t"][3:] = [3.0, 4.0]
            w["series/q"].resize((5, 2))
            w["series/q"][3:] = 2.0
            w.flush()
            res.refresh()
            assert len(res) == 5
            np.testing.assert_array_equal(res["q/a"], [1, 1, 1, 2, 2])
    finally:
        w.close()
