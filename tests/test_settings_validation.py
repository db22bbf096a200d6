"""Settings validation: ``mbcore validate`` runs the settings validation of ``mbcore
run`` (one code path, :func:`mbcore.analysis.resolve_settings`) without compiling or
running anything; every settings value is checked for its JSON type before it is used
(a wrong type is a ModelError naming the key path, never a raw TypeError from a
registry lookup); ``mbcore.run`` takes a Model, model data or a model file path."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

import mbcore
from mbcore.cli import main
from mbcore.errors import ModelError
from mbcore.model import Model


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def dynamic_data():
    return yaml.safe_load((EXAMPLES / "slider_crank_dynamic.yaml").read_text())


def _with_settings(data, **settings):
    d = copy.deepcopy(data)
    d["settings"].update(settings)
    return d


def _write(tmp_path, data, name="m.yaml"):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    return err[-1] if err else ""


# what ``mbcore run`` refused and ``mbcore validate`` passed, with the key path and a
# piece of the message
RUN_REJECTS = [
    ({"analysis": "dynamik"}, "settings.analysis", "did you mean 'dynamic'"),
    ({"t_end": -1}, "settings.t_end", "must be after t_start"),
    ({"output_step": 0}, "settings.output_step", "expected a positive number"),
    ({"integrator": "rk45"}, "settings.integrator", "did you mean 'rk4'"),
    ({"rtol": -1}, "settings.rtol", "expected a positive number"),
    ({"rtoll": 1e-6}, "settings.rtoll",
     "unknown key of the dynamic analysis (did you mean 'rtol'?)"),
    ({"bogus": 3}, "settings.bogus", "unknown key of the dynamic analysis (allowed: analysis"),
    ({"output_step": 1e-12}, "settings.output_step", "exceed the limit"),   # 1e13 rows
    ({"formulation": "ggl"}, "settings.integrator", "needs an integrator with a mass"),
    ({"formulation_options": {"omega": 3}}, "settings.formulation_options.omega",
     "unknown key of formulation 'di' (allowed: drift)"),
    ({"record": "q, lamb"}, "settings.record", "did you mean 'lam'"),
    # null: the default (kinematic) analysis, which says whose keys it knows
    ({"analysis": None}, "settings.formulation",
     "unknown key of the kinematic analysis (allowed: "),
    # wrong JSON types
    ({"analysis": [1]}, "settings.analysis", "expected a non-empty string, got a list"),
    ({"t_end": True}, "settings.t_end", "expected a number, got a boolean"),
    ({"kernels": [1]}, "settings.kernels", "expected one of 'compiled', 'numpy'"),
    ({"integrator": {"a": 1}}, "settings.integrator", "got a mapping"),
    ({"reporters": "x"}, "settings.reporters", "expected a list"),
    ({"formulation_options": [1]}, "settings.formulation_options", "expected a mapping"),
    ({"formulation": "cs", "formulation_options": {"alpha": [1]}},
     "settings.formulation_options.alpha", "expected a number, got a list"),
]


@pytest.mark.parametrize("settings, path, text", RUN_REJECTS,
                         ids=[f"{k}={v!r}" for s, _, _ in RUN_REJECTS
                              for k, v in list(s.items())[-1:]])
def test_validate_refuses_what_run_refuses_with_the_same_message(
        tmp_path, capsys, dynamic_data, settings, path, text):
    model = _write(tmp_path, _with_settings(dynamic_data, **settings))
    capsys.readouterr()
    assert main(["validate", str(model)]) == 2
    said = _error_line(capsys)
    assert said.startswith(f"mbcore: error: {path}: ") and text in said, said
    assert main(["run", "-q", str(model), "-o", str(tmp_path / "m.h5")]) == 2
    assert _error_line(capsys) == said          # one code path: the same message
    assert not (tmp_path / "m.h5").exists()     # nothing was computed
    assert main(["check", str(model)]) == 2
    assert _error_line(capsys) == said


def test_validate_checks_the_settings_without_compiling(tmp_path, capsys, monkeypatch,
                                                        dynamic_data):
    def no_compile(self, *a, **k):
        raise AssertionError("validate compiled the model")
    monkeypatch.setattr(Model, "compile", no_compile)
    good = _write(tmp_path, dynamic_data, "good.yaml")
    assert main(["validate", "-q", str(good)]) == 0
    bad = _write(tmp_path, _with_settings(dynamic_data, rtol=-1), "bad.yaml")
    assert main(["validate", str(bad)]) == 2
    assert "settings.rtol: expected a positive number" in _error_line(capsys)


def test_validate_for_another_analysis_as_run_dash_a(tmp_path, capsys, examples):
    kap = examples / "fourbar_kap.yaml"
    assert main(["validate", "-q", "-a", "static", str(kap)]) == 0
    assert main(["validate", "-a", "statics", str(kap)]) == 2
    assert "settings.analysis: unknown analysis type 'statics'; did you mean 'static'" \
        in _error_line(capsys)


@pytest.mark.parametrize("value", [[1], {"a": 1}, 0, False, ""])
def test_run_refuses_an_analysis_of_the_wrong_type(dynamic_data, value):
    """[1], {a: 1}: TypeError (unhashable) from the registry lookup; 0, false, "":
    the kinematic analysis was run silently."""
    model = Model.from_dict(_with_settings(dynamic_data, analysis=value, t_end=0.02))
    with pytest.raises(ModelError, match=r"^settings\.analysis: expected a non-empty "
                                         r"string, got "):
        mbcore.run(model)
    with pytest.raises(ModelError, match=r"^analysis: expected a non-empty string"):
        mbcore.run(Model.from_dict(dynamic_data), analysis=value)


def test_registry_lookup_of_a_name_of_the_wrong_type_is_false():
    from mbcore.plugins import registry
    reg = registry()
    for name in ([1], {"a": 1}, None, 3, True):
        assert reg.has("analysis", name) is False
        assert reg.has("constraint", name, "spatial") is False


def test_resolve_settings_is_the_runs_validation(dynamic_data):
    from mbcore.analysis import resolve_settings
    from mbcore.plugins import registry
    acls, aname, merged = resolve_settings(dynamic_data["settings"], registry(),
                                           overrides={"t_end": 0.5})
    assert aname == "dynamic" and acls.name == "dynamic" and merged["t_end"] == 0.5
    # another analysis keeps the model settings it knows only
    acls, aname, merged = resolve_settings(dynamic_data["settings"], registry(),
                                           analysis="kinematic")
    assert aname == "kinematic" and "rtol" not in merged and merged["t_end"] == 10.0
    with pytest.raises(ModelError, match=r"^settings: expected a mapping"):
        resolve_settings([1], registry())


# ------------------------------------------------------------------ mbcore.run(model)
def test_run_takes_model_data_and_a_path(examples):
    path = examples / "fourbar_kap.yaml"
    data = yaml.safe_load(path.read_text())
    ref = mbcore.run(Model.from_file(path), settings={"t_end": 0.1})
    by_data = mbcore.run(data, settings={"t_end": 0.1})
    by_path = mbcore.run(path, settings={"t_end": 0.1})
    by_str = mbcore.run(str(path), settings={"t_end": 0.1})
    for res in (by_data, by_path, by_str):
        # one code path (the same compiled kernels, one process): identical rows
        assert res.n_rows == ref.n_rows
        assert (res.series("q") == ref.series("q")).all()
    bad = copy.deepcopy(data)
    bad["bodies"][0]["mass"] = "heavy"
    with pytest.raises(ModelError, match=r"^bodies\[0\]\.mass: expected a number"):
        mbcore.run(bad)


@pytest.mark.parametrize("model", [42, None, [1, 2], b"name: x"])
def test_run_says_what_it_wants(model):
    with pytest.raises(TypeError, match=r"mbcore\.run: model must be a mbcore\.Model, a "
                                        r"mapping of model data .* or a model file path, "
                                        r"got "):
        mbcore.run(model)


# ------------------------------------------------------------------ the model's own keys
@pytest.mark.parametrize("where, value, message", [
    (("name",), [1], "name: expected a non-empty string, got a list of 1"),
    (("name",), True, "name: expected a non-empty string, got a boolean (True); YAML "
                      "reads unquoted yes/no/on/off/true/false as booleans and null/~ as "
                      "nothing: put the text in quotes"),
    (("description",), {"a": 1}, "description: expected a string, got a mapping"),
    (("units", "length"), [1], "units.length: expected a string, got a list of 1"),
    (("bodies", 0, "description"), 3,
     r"bodies[0].description: expected a string, got int (3)"),
])
def test_text_keys_of_the_wrong_type_are_refused(dynamic_data, where, value, message):
    """These were converted with str() (a list became the name '[1]')."""
    d = copy.deepcopy(dynamic_data)
    node = d
    for k in where[:-1]:
        node = node[k]
    node[where[-1]] = value
    with pytest.raises(ModelError) as e:
        Model.from_dict(d)
    assert str(e.value) == message
