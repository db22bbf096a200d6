"""The types by name in model runs: the example model, energy balance along a run
(dV/dt + T-dot = damper power), the peaks reporter, Python vs compiled bushing runs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import ModelError
from mbcore.results.reporting import Channel, RunInfo

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ring_and_bob.yaml"


def example(t_end=0.4, bushing=None, **settings):
    """The example model, shortened, without its reporters; ``bushing``: the type of
    every bushing (default: as in the file)."""
    text = EXAMPLE.read_text()
    if bushing is not None:
        text = text.replace("type: bushing_c,", "type: bushing,").replace(
            "type: bushing,", f"type: {bushing},")
    m = mbcore.Model.from_text(text, "yaml")
    m.settings.update({"t_end": t_end, **settings})
    m.settings.pop("reporters", None)
    return m


def test_example_runs_and_keeps_the_ring_on_its_circle():
    res = mbcore.run(example())
    q = res.series("q")
    labels = res.labels("q")
    x, y = q[:, labels.index("ring.x")], q[:, labels.index("ring.y")]
    np.testing.assert_allclose(np.hypot(x, y), 1.0, atol=1e-7)
    assert np.ptp(x) > 0.1                       # it moved along the circle
    assert res.labels("forces")[:6] == [f"tie.{k}" for k in
                                        ("dx", "dy", "angle", "fx", "fy", "torque")]


def test_energy_balance_along_a_run_with_dampers():
    """T + V - work_nc stays constant (mbcore integrates the bushings' power_nc and
    adds their energy to V); the dampers take energy out (work_nc < 0)."""
    res = mbcore.run(example(t_end=1.0))
    e = res.series("energy")
    lab = res.labels("energy")
    balance, work = e[:, lab.index("balance")], e[:, lab.index("work_nc")]
    assert work[-1] < -1e-3
    assert np.ptp(balance) < 1e-6 * abs(work[-1]) + 1e-9


def test_python_and_compiled_bushing_runs_agree():
    """The same model with every bushing of one type: whole runs agree to 1e-12
    (fixed-step rk4, so both take the same steps)."""
    runs = []
    for kind in ("bushing", "bushing_c"):
        m = example(t_end=0.3, bushing=kind, integrator="rk4", step=1e-3)
        assert f"type: {kind}," in m.source_text
        runs.append(mbcore.run(m))
    for ch in ("q", "qd", "forces"):
        np.testing.assert_allclose(runs[1].series(ch), runs[0].series(ch), rtol=0, atol=1e-12)


#: built-in joints and bushings only: with mbcore's compiled tier, a model whose
#: bushings are bushing_c stays on the compiled right-hand side and loop
PENDULUM = """
name: bushing_pendulum
gravity: [0.0, -9.81]
settings: {analysis: dynamic, t_end: 0.3, output_step: 0.01, formulation: di,
           integrator: rk4, step: 0.001}
bodies:
  - {name: arm, mass: 2.0, inertia: 0.05, position: [0.25, 0.0], angle: 0.0}
  - {name: bob, mass: 1.0, inertia: 0.01, position: [0.5, -0.1], angle: 0.3}
joints:
  - {name: pin, type: revolute, body_i: ground, body_j: arm, point_i: [0.0, 0.0],
     point_j: [-0.25, 0.0]}
forces:
  - {name: hanger, type: TYPE, body_i: arm, body_j: bob, point_i: [0.25, 0.0],
     point_j: [0.0, 0.1], kx: 300.0, ky: 500.0, k_phi: 4.0, cx: 1.5, cy: 2.5,
     c_phi: 0.05, angle_offset: 0.1}
  - {name: damper, type: TYPE, body_i: ground, body_j: arm, kx: 0.0, ky: 0.0,
     k_phi: 1.0, c_phi: 0.2}
"""


def compiled_tier() -> bool:
    """mbcore calls ``c_kernel`` capsules (its compiled plugin tier is installed)."""
    import importlib.util
    from mbcore.system import compiled_available
    return importlib.util.find_spec("mbcore.plugins.compiled") is not None and \
        compiled_available()


def test_python_and_compiled_bushing_runs_on_builtin_joints_agree():
    """Fixed-step runs of the same pendulum with bushing and with bushing_c agree to
    1e-12; with mbcore's compiled tier the bushing_c run is on the compiled loop."""
    runs = {k: mbcore.run(mbcore.Model.from_text(PENDULUM.replace("TYPE", k), "yaml"))
            for k in ("bushing", "bushing_c")}
    py, c = runs["bushing"], runs["bushing_c"]
    assert np.ptp(py.series("q")[:, 2]) > 0.05 and np.abs(py.series("forces")).max() > 1.0
    for ch in ("q", "qd", "forces", "energy"):
        np.testing.assert_allclose(c.series(ch), py.series(ch), rtol=0, atol=1e-12)
    assert py.stats["loop"] == "python"
    assert c.stats["loop"] == ("compiled" if compiled_tier() else "python")


def test_peaks_reporter_by_name_writes_the_peaks_of_a_run(tmp_path):
    out = tmp_path / "p.json"
    m = example()
    m.settings["reporters"] = [{"type": "peaks", "file": str(out), "channels": ["q", "forces"]}]
    res = mbcore.run(m)
    doc = json.loads(out.read_text())
    assert doc["status"] == "finished" and doc["rows"] == len(res.t)
    assert set(doc["channels"]) == {"q", "forces"}
    for ch in ("q", "forces"):
        s = np.abs(res.series(ch))
        for k, label in enumerate(res.labels(ch)):
            entry = doc["channels"][ch][label]
            assert entry["max_abs"] == pytest.approx(s[:, k].max(), rel=1e-15, abs=0)
            assert entry["t"] == res.t[int(np.argmax(s[:, k]))]


def test_peaks_options_are_validated_with_key_paths(tmp_path):
    m = example()
    m.settings["reporters"] = [{"type": "peaks", "file": str(tmp_path / "a.json"),
                                "chanels": ["q"]}]
    with pytest.raises(ModelError, match=r"settings\.reporters\[0\]\.chanels"):
        mbcore.run(m)
    m.settings["reporters"] = [{"type": "peeks", "file": "x.json"}]
    with pytest.raises(ModelError, match=r"settings\.reporters\[0\]\.type: .*'peaks'"):
        mbcore.run(m)
    m.settings["reporters"] = [{"type": "peaks", "file": str(tmp_path / "b.json"),
                                "channels": ["nope"]}]
    with pytest.raises(ModelError, match="unknown channel 'nope'"):
        mbcore.run(m)
    assert not (tmp_path / "b.json").exists()


def test_peaks_reporter_rows_one_by_one_and_in_blocks_agree(tmp_path):
    from mbcore_bushing.reporters import PeaksReporter
    info = RunInfo("dynamic", [Channel("a", ["a0", "a1"]), Channel("b", ["b0"])])
    rng = np.random.default_rng(0)
    t = np.linspace(0, 1, 50)
    rows = rng.normal(size=(50, 3))
    rows[7, 1] = np.nan
    docs = []
    for mode in ("record", "rows"):
        rep = PeaksReporter(tmp_path / f"{mode}.json", channels=["a"])
        rep.start(info)
        if mode == "record":
            for i in range(50):
                rep.record(t[i], {"a": rows[i, :2], "b": rows[i, 2:]})
        else:
            rep.record_rows(t[:20], rows[:20], (("a", 2), ("b", 1)))
            rep.record_rows(t[20:], rows[20:], (("a", 2), ("b", 1)))
        rep.finish("failed", "stopped")
        docs.append(json.loads((tmp_path / f"{mode}.json").read_text()))
    assert docs[0] == docs[1]
    a = docs[0]["channels"]["a"]
    assert list(docs[0]["channels"]) == ["a"] and docs[0]["status"] == "failed"
    finite = np.where(np.isfinite(rows[:, 1]), np.abs(rows[:, 1]), -1)
    assert a["a1"] == {"max_abs": finite.max(), "t": t[np.argmax(finite)], "nonfinite": 1}
    assert a["a0"]["max_abs"] == np.abs(rows[:, 0]).max()
