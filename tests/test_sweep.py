"""Parameter sweeps (issue 17, item 2): key paths, value specs, the metric grammar,
local processes vs a Dask LocalCluster (identical results), failed cases, resume,
the index files and ``mbcore sweep`` (docs/sweeps.md)."""
from __future__ import annotations

import csv
import math
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import yaml

import mbcore
from mbcore.cli import main
from mbcore.errors import ModelError
from mbcore.studies import (ColumnError, MetricError, Study, StudyMismatchError,
                            parse_metric, parse_spec, resolve, sweep)
from mbcore.studies.index import read_index

# the four-bar of examples/fourbar_spring_modes.yaml, dynamic, 0.2 s
FOURBAR = yaml.safe_load("""
name: fourbar-spring
gravity: [0, -9.81]
settings: {analysis: dynamic, t_end: 0.2, output_step: 0.02, integrator: dopri5,
           rtol: 1.0e-8, atol: 1.0e-10}
bodies:
  - {name: crank,    mass: 2.0, inertia: 0.6666666666666666, position: [0.5, 0.8], angle: 1.047}
  - {name: coupler,  mass: 4.0, inertia: 5.333333333333333,  position: [2.6, 2.6], angle: 0.5}
  - {name: follower, mass: 4.0, inertia: 5.333333333333333,  position: [3.5, 1.8], angle: 1.0}
points:
  - {name: P, body: coupler, at: [0.5, 1.5]}
joints:
  - {name: O2, type: revolute, body_i: ground,   body_j: crank,    point_i: [0, 0],   point_j: [-1, 0]}
  - {name: A,  type: revolute, body_i: crank,    body_j: coupler,  point_i: [1, 0],   point_j: [-2, 0]}
  - {name: B,  type: revolute, body_i: coupler,  body_j: follower, point_i: [2, 0],   point_j: [2, 0]}
  - {name: O4, type: revolute, body_i: follower, body_j: ground,   point_i: [-2, 0],  point_j: [2.5, 0]}
forces:
  - {name: spring, type: tsda, body_i: ground, body_j: coupler, point_i: [0.0, 5.0],
     point_j: [0.5, 1.5], stiffness: 400.0, damping: 15.0, free_length: 2.0}
  - {name: pivot, type: rsda, body_i: ground, body_j: crank, stiffness: 20.0, damping: 2.0,
     free_angle: 1.0}
""")

METRICS = {"peak_reaction": "max(abs(reactions/O2.i.fx))",
           "final_phi": "last(q/crank.phi)",
           "phi_mid": "at(q/crank.phi, 0.1)",
           "rms_rate": "rms(qd/crank.phi) * 2"}

#: 5 stiffnesses x 4 dampings = 20 cases
GRID = {"forces.spring.stiffness": "200:600:5", "forces.spring.damping": [0.0, 5.0, 10.0, 20.0]}


def _model_file(tmp_path: Path, data=FOURBAR) -> Path:
    p = tmp_path / "fourbar.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


# --------------------------------------------------------------------- specs, paths
def test_specs():
    assert parse_spec("1:3:3") == (1.0, 2.0, 3.0)
    assert np.allclose(parse_spec("1e3:1e5:3:log"), [1e3, 1e4, 1e5], rtol=1e-14, atol=0)
    assert parse_spec("1,2.5,rk4,true") == (1, 2.5, "rk4", True)
    assert parse_spec(np.array([1.0, 2.0])) == (1.0, 2.0)
    for bad, word in [("1:2", "a:b:n"), ("1:2:x", "integer"), ("a:2:3", "not a number"),
                      ("0:1:3:log", "non-zero"), ("1:2:0", ">= 1"), ("1,,2", "empty")]:
        with pytest.raises(ModelError, match=word) as exc:
            parse_spec(bad, "forces.spring.k")
        assert exc.value.path == "forces.spring.k"


def test_paths_resolve_and_errors_name_the_path():
    d = mbcore.Model.from_dict(FOURBAR).to_dict()
    c, k, canon = resolve(d, "forces.spring.stiffness")
    assert c[k] == 400.0 and canon == "forces.spring.stiffness"
    c, k, canon = resolve(d, "bodies.crank.position[1]")
    assert c[k] == 0.8
    c, k, _ = resolve(d, "settings.t_end")
    assert c[k] == 0.2
    c, k, _ = resolve(d, "forces.spring.actuator")      # optional key, absent: allowed
    assert k == "actuator" and "actuator" not in c
    cases = [("force.spring.stiffness", "did you mean 'forces'"),
             ("forces.sprng.stiffness", "no entry named 'sprng'.*'spring'"),
             ("forces.spring.stifness", "no key 'stifness'.*'stiffness'"),
             ("bodies.crank.mas", "'mass'"),
             ("settings.t_ed", "'t_end'"),
             ("parameters.L", "no key 'parameters'"),
             ("bodies.crank", "is a mapping, not a value"),
             ("bodies.crank.position[5]", "out of range"),
             ("bodies.crank.mass.x", "is a value")]
    for path, pattern in cases:
        with pytest.raises(ModelError, match=pattern) as exc:
            resolve(d, path)
        assert exc.value.path == path
    with pytest.raises(ModelError, match="forces.sprng.k"):
        sweep(FOURBAR, {"forces.sprng.k": "1:2:2"}, out_dir="/nonexistent-never-made")


def test_metric_grammar_errors_are_named():
    cases = [("q/crank.phi", "is a series, not a number"),
             ("maxx(q/crank.phi)", "unknown function 'maxx'.*'max'"),
             ("max(2)", "reduces a series"),
             ("at(q/crank.phi)", "takes 2 arguments"),
             ("last(q/crank.phi", "expected '\\)'"),
             ("last(q/crank.phi) $ 2", "unexpected character '\\$'"),
             ("window(q/crank.phi, 1)", "takes 3 arguments"),
             ("", "empty expression")]
    for text, pattern in cases:
        with pytest.raises(MetricError, match=pattern) as exc:
            parse_metric("m1", text)
        assert exc.value.path == "metrics.m1"
    with pytest.raises(MetricError, match="column of the index"):
        parse_metric("status", "last(t)")
    with pytest.raises(MetricError, match="metrics.bad name"):
        parse_metric("bad name", "last(t)")
    with pytest.raises(MetricError, match="defined twice"):
        mbcore.studies.parse_metrics(["a=last(t)", "a=first(t)"])


def test_metric_values():
    res = mbcore.run(mbcore.Model.from_dict(FOURBAR))
    phi, t = res["q/crank.phi"], res.t
    fx = res["reactions/O2.i.fx"]

    def ev(text):
        return parse_metric("m", text)(res)
    assert ev("max(abs(reactions/O2.i.fx))") == np.max(np.abs(fx))
    assert ev("last(q/crank.phi) - first(q/crank.phi)") == phi[-1] - phi[0]
    assert ev("at(q/crank.phi, 0.05)") == pytest.approx(np.interp(0.05, t, phi), abs=0)
    keep = (t >= 0.1) & (t <= 0.2)
    assert ev("mean(window(q/crank.phi, 0.1, 0.2))") == np.mean(phi[keep])
    assert ev("integral(q/crank.phi)") == pytest.approx(np.trapezoid(phi, t), rel=1e-15)
    assert ev("argmax(abs(reactions/O2.i.fx))") == t[np.argmax(np.abs(fx))]
    assert ev("rms(\"q/crank.phi\") ** 2 / 2") == pytest.approx(np.mean(phi * phi) / 2,
                                                                rel=1e-15)
    assert ev("max(max(q/crank.phi, 1.2))") == max(np.max(phi), 1.2)
    assert ev("-min(-q/crank.phi)") == np.max(phi)
    with pytest.raises(ColumnError, match="crank.ph.*did you mean"):
        ev("last(q/crank.ph)")
    with pytest.raises(MetricError, match="outside the result"):
        ev("at(q/crank.phi, 5)")


# --------------------------------------------------------------- local vs Dask
@pytest.fixture(scope="module")
def dask_cluster():
    distributed = pytest.importorskip("distributed",
                                      reason="dask.distributed is not installed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    client = distributed.Client(cluster)
    yield cluster, client
    client.close()
    cluster.close()


def _series(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        out = {"t": f["t"][()]}
        for name in f["series"]:
            out[name] = f["series"][name][()]
    return out


def test_local_processes_and_dask_give_identical_results(tmp_path, dask_cluster):
    _, client = dask_cluster
    local = sweep(FOURBAR, GRID, metrics=METRICS, out_dir=tmp_path / "local", workers=2)
    dask = sweep(FOURBAR, GRID, metrics=METRICS, out_dir=tmp_path / "dask", client=client)
    assert len(local) == len(dask) == 20
    assert [c.status for c in local] == ["ok"] * 20, local.summary()
    assert [c.status for c in dask] == ["ok"] * 20, dask.summary()
    _, rows_l = read_index(tmp_path / "local")
    _, rows_d = read_index(tmp_path / "dask")
    for a, b in zip(rows_l, rows_d, strict=True):
        assert a.params == b.params and a.key == b.key and a.file == b.file
        assert a.metrics == b.metrics                           # bit-identical
    # the parameters reached the cases: the metrics differ between cases and equal
    # the reductions recomputed from each case's file
    finals = [r.metrics["final_phi"] for r in rows_l]
    assert len(set(finals)) == 20
    for r in rows_l:
        sl = _series(tmp_path / "local" / r.file)
        sd = _series(tmp_path / "dask" / r.file)
        assert sl.keys() == sd.keys()
        for k in sl:
            assert np.array_equal(sl[k], sd[k]), (r.case, k)
        with mbcore.Result(tmp_path / "local" / r.file) as res:
            assert r.metrics["peak_reaction"] == np.max(np.abs(res["reactions/O2.i.fx"]))
            assert r.metrics["final_phi"] == res["q/crank.phi"][-1]
            assert res.model_text and "stiffness" in res.model_text
        with h5py.File(tmp_path / "local" / r.file) as f:
            assert f.attrs["sweep_key"] == r.key
    # case 6 = stiffness 300 (index 1), damping 10 (index 2): last parameter fastest
    assert rows_l[6].params == {"forces.spring.stiffness": 300.0,
                                "forces.spring.damping": 10.0}
    with mbcore.Result(tmp_path / "local" / rows_l[6].file) as res:
        model = mbcore.Model.from_text(res.model_text, res.model_format)
    spring = [e for e in model.elements["forces"] if e.name == "spring"][0]
    assert spring.raw["stiffness"] == 300.0 and spring.raw["damping"] == 10.0


def test_dask_by_scheduler_address(tmp_path, dask_cluster):
    cluster, _ = dask_cluster
    st = sweep(FOURBAR, {"forces.spring.stiffness": "300,500"}, metrics=METRICS,
               out_dir=tmp_path / "s", scheduler=cluster.scheduler_address)
    ref = sweep(FOURBAR, {"forces.spring.stiffness": "300,500"}, metrics=METRICS,
                out_dir=tmp_path / "r", workers=0)
    assert [c.status for c in st] == ["ok", "ok"]
    assert [c.metrics for c in st] == [c.metrics for c in ref]


# --------------------------------------------------------------- failures, resume
LOCKUP = yaml.safe_load((Path(__file__).resolve().parents[1] / "examples" /
                         "fourbar_lockup.yaml").read_text())


def test_failed_cases_are_recorded_and_the_rest_finish(tmp_path):
    # damping -1: invalid (before the run); the fast drive locks the four-bar up at
    # t = 0.92 s (midway); the others finish
    st = sweep(FOURBAR, {"forces.spring.damping": "0,-1,5"}, metrics=METRICS,
               out_dir=tmp_path / "a", workers=2)
    assert [c.status for c in st] == ["ok", "failed", "ok"]
    assert "damping" in st[1].error and "must be >= 0" in st[1].error
    assert math.isnan(st[1].metrics["peak_reaction"])
    assert not (tmp_path / "a" / st[1].file).exists()
    speeds = ["0.5235987755982988 + 0.5*t", "0.5235987755982988 + t"]
    lk = sweep(LOCKUP, {"drivers.drive.function": speeds}, metrics={"end": "last(t)"},
               out_dir=tmp_path / "b", workers=0, settings={"t_end": 1.2})
    assert [c.status for c in lk] == ["ok", "failed"]
    assert lk[0].metrics["end"] == pytest.approx(1.2)
    assert "t = 0.9" in lk[1].error
    with mbcore.Result(tmp_path / "b" / lk[1].file) as res:     # rows before lock-up
        assert res.status == "failed" and 0.8 < res.t[-1] < 0.93
    with open(tmp_path / "b" / "index.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["status"] for r in rows] == ["ok", "failed"]
    assert rows[1]["error"] == lk[1].error and rows[1]["drivers.drive.function"] == speeds[1]


def _count_runs(monkeypatch) -> list:
    import mbcore.analysis.runner
    calls = []
    real = mbcore.analysis.runner.run

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(mbcore.analysis.runner, "run", counting)
    return calls


def test_resume_skips_finished_cases(tmp_path, monkeypatch):
    calls = _count_runs(monkeypatch)
    params = {"forces.spring.stiffness": "300,400", "forces.spring.damping": "-1,5"}
    out = tmp_path / "st"
    first = sweep(FOURBAR, params, metrics=METRICS, out_dir=out, workers=0)
    assert len(calls) == 2 and first.ran == 4     # cases 0, 2 fail before running
    assert [c.status for c in first] == ["failed", "ok", "failed", "ok"]
    mtimes = {p: p.stat().st_mtime_ns for p in out.glob("case_*.h5")}
    again = sweep(FOURBAR, params, metrics=METRICS, out_dir=out, workers=0)
    assert len(calls) == 2 and again.ran == 2 and again.skipped == 2   # failed retried
    assert [c.metrics for c in again.ok] == [c.metrics for c in first.ok]
    assert {p: p.stat().st_mtime_ns for p in out.glob("case_*.h5")} == mtimes
    kept = sweep(FOURBAR, params, metrics=METRICS, out_dir=out, workers=0,
                 retry_failed=False)
    assert len(calls) == 2 and kept.ran == 0 and kept.failed[0].error == first[0].error
    # a removed file, and a file of another run, are run again
    (out / "case_0001.h5").unlink()
    other = sweep(FOURBAR, params, metrics=METRICS, out_dir=out, workers=0,
                  retry_failed=False)
    assert len(calls) == 3 and [c.ran for c in other] == [False, True, False, False]
    assert other[1].metrics == first[1].metrics
    # another metric set: recomputed from the files, nothing runs
    more = sweep(FOURBAR, params, metrics={"end_t": "last(t)"}, out_dir=out, workers=0,
                 retry_failed=False)
    assert len(calls) == 3 and more[3].metrics == {"end_t": 0.2}
    # the case files are the record: without the index, the finished cases are kept
    (out / "index.h5").unlink()
    (out / "index.csv").unlink()
    lost = sweep(FOURBAR, params, metrics=METRICS, out_dir=out, workers=0)
    assert len(calls) == 3 and lost.ran == 2 and lost[3].metrics == first[3].metrics
        # a changed model (or parameter set) is refused; --no-resume starts afresh
    changed = yaml.safe_load(yaml.safe_dump(FOURBAR))
    changed["bodies"][0]["mass"] = 2.5
    with pytest.raises(StudyMismatchError, match="model"):
        sweep(changed, params, out_dir=out, workers=0)
    with pytest.raises(StudyMismatchError, match="parameters"):
        sweep(FOURBAR, {"forces.spring.stiffness": "300,400,500"}, out_dir=out, workers=0)
    fresh = sweep(FOURBAR, {"forces.spring.stiffness": "300"}, out_dir=out, workers=0,
                  resume=False)
    assert len(calls) == 4 and fresh.ran == 1
    assert sorted(p.name for p in out.glob("case_*.h5")) == ["case_0000.h5"]


def test_study_load_and_pandas(tmp_path):
    st = sweep(FOURBAR, {"bodies.crank.mass": "1:2:3", "settings.t_end": "0.1:0.2:3"},
               mode="zip", metrics={"end": "last(t)"}, out_dir=tmp_path, workers=0)
    assert [c.metrics["end"] for c in st] == pytest.approx([0.1, 0.15, 0.2])
    back = Study.load(tmp_path)
    assert back.parameters == ["bodies.crank.mass", "settings.t_end"]
    assert [c.row() for c in back] == [{**c.row()} for c in st]
    pd = pytest.importorskip("pandas")
    df = st.to_pandas()
    assert isinstance(df, pd.DataFrame) and list(df.index) == [0, 1, 2]
    assert list(df["bodies.crank.mass"]) == [1.0, 1.5, 2.0]
    with pytest.raises(ModelError, match="different numbers of values"):
        sweep(FOURBAR, {"bodies.crank.mass": "1:2:3", "settings.t_end": "1,2"},
              mode="zip", out_dir=tmp_path / "z", workers=0)


def test_unknown_metric_column_stops_the_sweep(tmp_path):
    with pytest.raises(ColumnError, match="reactions/O3.i.fx.*did you mean"):
        sweep(FOURBAR, {"forces.spring.stiffness": "300,400"}, out_dir=tmp_path,
              metrics={"bad": "max(reactions/O3.i.fx)"}, workers=0)


# ------------------------------------------------------------------------------ CLI
def test_cli_sweep(tmp_path, capsys):
    model = _model_file(tmp_path)
    args = ["sweep", str(model), "--param", "forces.spring.stiffness=300:500:2",
            "--param", "forces.spring.damping=5,-1", "--metric",
            "peak=max(abs(reactions/O2.i.fx))", "--workers", "0", "--t-end", "0.1"]
    assert main(args) == 1                         # one case failed
    out = capsys.readouterr().out
    assert "4 cases" in out and "2 ok, 2 failed" in out and "must be >= 0" in out
    index = tmp_path / "fourbar_sweep" / "index.csv"
    with open(index, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0])[:5] == ["case", "forces.spring.stiffness", "forces.spring.damping",
                                 "file", "status"]
    assert [r["status"] for r in rows] == ["ok", "failed", "ok", "failed"]
    assert float(rows[0]["peak"]) > 0 and rows[1]["peak"] == "nan"
    assert main(args + ["-q"]) == 1 and capsys.readouterr().out == ""
    assert main(["sweep", str(model), "--param", "forces.spring.stifness=1,2",
                 "-o", str(tmp_path / "x")]) == 2
    assert "forces.spring.stifness" in capsys.readouterr().err
    assert main(["sweep", str(model), "--param", "forces.spring.stiffness=1,2",
                 "--metric", "m=q/crank.phi", "-o", str(tmp_path / "y")]) == 2
    assert "metrics.m" in capsys.readouterr().err
    assert main(["sweep", str(model), "--param", "forces.spring.stiffness=300",
                 "-o", str(tmp_path / "z"), "--workers", "0", "-q"]) == 0
    assert os.path.exists(tmp_path / "z" / "index.h5")
