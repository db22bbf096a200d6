"""Reporter plugins by type name: ``settings.reporters`` of a model file
(:func:`mbcore.results.reporting.reporters_from_settings`, used by :func:`mbcore.run`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import ModelError
from mbcore.plugins import PluginManager
from mbcore.results.reporting import Reporter, reporters_from_settings
from mbcore.elements.schema import Param

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.quick


class Collect(Reporter):
    """Keeps the t of every row and the sum of every q row; declares its options."""

    name = "collect"
    params = {"tag": Param("string", "a label"),
              "scale": Param("number", "factor", default=1.0)}
    instances: list["Collect"] = []

    def __init__(self, tag, scale):
        self.tag, self.scale = tag, scale
        self.t: list[float] = []
        self.sums: list[float] = []
        self.status = ""
        Collect.instances.append(self)

    def start(self, info):
        self.channels = [c.name for c in info.channels]

    def record(self, t, data):
        self.t.append(t)
        self.sums.append(self.scale * float(np.sum(data["q"])))

    def finish(self, status, reason="", stats=None):
        self.status = status


class Plain(Reporter):
    """No ``params``: the options go to the constructor as they are."""

    name = "plain"

    def __init__(self, every=1):
        self.every = every

    def start(self, info):
        pass

    def record(self, t, data):
        pass

    def finish(self, status, reason="", stats=None):
        pass


class Extra:
    @mbcore.hookimpl
    def mbcore_reporters(self):
        return [Collect, Plain]


@pytest.fixture
def pm():
    pm = PluginManager()
    pm.register(Extra(), name="extra-reporters")
    Collect.instances.clear()
    return pm


def test_names_and_mappings_make_reporters_with_validated_options(pm):
    reps = reporters_from_settings(pm.registry, ["plain", {"type": "collect", "tag": "a"},
                                                 {"type": "plain", "every": 3}])
    assert [type(r) for r in reps] == [Plain, Collect, Plain]
    assert (reps[1].tag, reps[1].scale) == ("a", 1.0) and reps[2].every == 3
    assert reporters_from_settings(pm.registry, None) == []


@pytest.mark.parametrize("entries, where", [
    ([{"type": "colect", "tag": "a"}], r"settings\.reporters\[0\]\.type: unknown reporter "
                                       r"type 'colect'; did you mean 'collect'"),
    (["memory", "nope"], r"settings\.reporters\[1\]: unknown reporter type 'nope'"),
    ([{"tag": "a"}], r"settings\.reporters\[0\]\.type: required key is missing"),
    ([{"type": "collect"}], r"settings\.reporters\[0\]\.tag: required key is missing"),
    ([{"type": "collect", "tag": "a", "scal": 2}], r"settings\.reporters\[0\]\.scal: "
                                                   r"unknown key \(did you mean 'scale'"),
    ([{"type": "collect", "tag": "a", "scale": "x"}], r"settings\.reporters\[0\]\.scale: "
                                                      r"expected a number"),
    ([{"type": "plain", "evry": 2}], r"settings\.reporters\[0\]: reporter 'plain': .*evry"),
    ({"type": "plain"}, r"settings\.reporters: expected a list"),
])
def test_bad_entries_are_model_errors_with_key_paths(pm, entries, where):
    with pytest.raises(ModelError, match=where):
        reporters_from_settings(pm.registry, entries)


def test_run_feeds_the_named_reporters_and_keeps_them_for_another_analysis(pm):
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_kap.yaml")
    model.settings["reporters"] = [{"type": "collect", "tag": "x", "scale": 2.0}]
    res = mbcore.run(model, plugins=pm)
    (rep,) = Collect.instances
    assert rep.status == "finished" and rep.t == list(res.t)
    np.testing.assert_allclose(rep.sums, 2.0 * res.series("q").sum(1), rtol=1e-15)
    assert "q" in rep.channels
    res2 = mbcore.run(model, analysis="kinetostatic", plugins=pm)
    assert len(Collect.instances) == 2 and Collect.instances[1].t == list(res2.t)


def test_a_bad_reporter_entry_fails_before_anything_runs(pm, tmp_path):
    model = mbcore.Model.from_file(ROOT / "examples" / "fourbar_kap.yaml")
    model.settings["reporters"] = ["collect"]
    out = tmp_path / "r.h5"
    with pytest.raises(ModelError, match=r"settings\.reporters\[0\]\.tag"):
        mbcore.run(model, plugins=pm, output=out)
    assert not out.exists()
