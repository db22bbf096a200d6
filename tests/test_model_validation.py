"""Model files are data: bad input is rejected with the key path, nothing runs."""
from __future__ import annotations

import copy
import json

import pytest
import yaml

from mbcore import Model, ModelError
from mbcore.errors import UnknownTypeError

pytestmark = pytest.mark.quick


@pytest.fixture
def data(examples):
    return yaml.safe_load((examples / "fourbar_kap.yaml").read_text())


def assert_rejected(data, match):
    with pytest.raises(ModelError, match=match) as exc:
        Model.from_dict(data)
    return exc.value


def test_valid_example_loads(data):
    m = Model.from_dict(data)
    assert [b.name for b in m.bodies] == ["crank", "coupler", "follower"]


def test_wrong_shape_names_key_path(data):
    data["joints"][3]["point_j"] = [2.5, 0, 1]
    e = assert_rejected(data, r"^joints\[3\]\.point_j: expected 2 numbers, got 3$")
    assert e.path == "joints[3].point_j"


def test_wrong_key_names_key_path_and_suggests(data):
    data["joints"][1]["piont_i"] = data["joints"][1].pop("point_i")
    assert_rejected(data, r"joints\[1\]\.piont_i: unknown key \(did you mean 'point_i'\?\)")
    data2 = yaml.safe_load("bodies: [{name: a, mass: 1, masss: 2}]")
    assert_rejected(data2, r"bodies\[0\]\.masss: unknown key")


def test_unknown_joint_type(data):
    data["joints"][2]["type"] = "revolut"
    with pytest.raises(UnknownTypeError, match=r"joints\[2\]\.type: unknown constraint "
                                               r"type 'revolut'; did you mean 'revolute'"):
        Model.from_dict(data)


def test_unknown_body_and_self_connection(data):
    d = copy.deepcopy(data)
    d["joints"][0]["body_j"] = "crankk"
    assert_rejected(d, r"joints\[0\]\.body_j: unknown body 'crankk' \(did you mean 'crank'\?\)")
    d = copy.deepcopy(data)
    d["joints"][0]["body_i"] = "crank"
    assert_rejected(d, r"joints\[0\]\.body_j: an element cannot connect body 'crank' to itself")


def test_missing_required_and_wrong_types(data):
    d = copy.deepcopy(data)
    del d["joints"][1]["point_i"]
    assert_rejected(d, r"joints\[1\]\.point_i: required key is missing")
    d = copy.deepcopy(data)
    d["bodies"][0]["mass"] = "heavy"
    assert_rejected(d, r"bodies\[0\]\.mass: expected a number, got a string \('heavy'\)")
    d = copy.deepcopy(data)
    d["bodies"][1]["mass"] = -1
    assert_rejected(d, r"bodies\[1\]\.mass: expected a positive number")
    d = copy.deepcopy(data)
    d["drivers"][0]["coordinate"] = "z"
    assert_rejected(d, r"drivers\[0\]\.coordinate: expected one of 'x', 'y', 'phi'")
    d = copy.deepcopy(data)
    d["bodies"][2]["name"] = "crank"
    assert_rejected(d, r"bodies\[2\]\.name: duplicate body name 'crank'")


@pytest.mark.parametrize("expr", [
    "__import__('os').system('touch /tmp/mbcore_pwned')",
    "open('/etc/passwd').read()",
    "system('ls')",
    "t.__class__",
    "(lambda: 1)()",
    "[x for x in ()]",
])
def test_driver_expression_is_never_executed(data, expr, tmp_path):
    data["drivers"][0]["function"] = expr
    e = assert_rejected(data, r"^drivers\[0\]\.function")
    assert "drivers[0].function" in str(e)


def test_not_whitelisted_function_call_is_named(data):
    data["drivers"][0]["function"] = "1.0472 + system(t)"
    assert_rejected(data, r"drivers\[0\]\.function.*'system'")


def test_expression_with_named_parameters(data):
    data["parameters"] = {"omega": 6.2832, "phi0": 1.0472}
    data["drivers"][0]["function"] = "phi0 + omega*t"
    m = Model.from_dict(data)
    assert m.parameters["omega"] == 6.2832
    data["drivers"][0]["function"] = "phi0 + omegaa*t"
    assert_rejected(data, r"drivers\[0\]\.function.*omegaa")


def test_json_and_yaml_files_and_syntax_errors(tmp_path, data):
    p = tmp_path / "m.json"
    p.write_text(json.dumps(data))
    assert Model.from_file(p).name == "KAP four-bar"
    bad = tmp_path / "bad.yaml"
    bad.write_text("bodies: [ {name: a, mass: 1}\n joints: ]")
    with pytest.raises(ModelError, match="invalid YAML at line"):
        Model.from_file(bad)
    with pytest.raises(ModelError, match="cannot read model file"):
        Model.from_file(tmp_path / "missing.yaml")
    # YAML tags that would construct Python objects are refused (safe_load)
    evil = tmp_path / "evil.yaml"
    evil.write_text("name: !!python/object/apply:os.system ['echo hi']\nbodies: []\n")
    with pytest.raises(ModelError, match="invalid YAML"):
        Model.from_file(evil)


def test_round_trip_python_api_to_dict(data):
    m = Model.from_dict(data)
    m2 = Model.from_dict(m.to_dict())
    assert m2.to_dict() == m.to_dict()


def test_python_api_validates_at_compile():
    m = Model("api")
    m.add_body("a", position=(1, 0))
    m.add_joint("revolute", "pin", body_i="ground", body_j="a", point_i=(0, 0, 0),
                point_j=(-1, 0))
    with pytest.raises(ModelError, match=r"joints\[0\]\.point_i: expected 2 numbers, got 3"):
        m.compile()


def test_named_points_in_elements():
    m = Model("pts")
    m.add_body("a", position=(1, 0))
    m.add_point("tip", "a", (0.5, 0))
    m.add_point("base", "ground", (0, 0))
    m.add_joint("revolute", "pin", body_i="ground", body_j="a", point_i="base",
                point_j=(-1, 0))
    m.compile()
    m.add_joint("revolute", "bad", body_i="ground", body_j="a", point_i="tip",
                point_j=(0, 0))
    with pytest.raises(ModelError, match=r"joints\[1\]\.point_i: point 'tip' lies on body "
                                         r"'a', not on 'ground'"):
        m.compile()


def test_element_on_ground_only_is_rejected(data):
    data["joints"][0]["body_j"] = "ground"
    assert_rejected(data, r"joints\[0\]\.body_i: the element acts only on the ground 'ground'")


def test_exponent_numbers_without_a_dot_are_numbers():
    """YAML 1.1 reads ``1e9`` as a string; model files read it as a number (YAML
    1.2), quoted it stays a string."""
    from mbcore.model import parse_text
    d = parse_text("t_end: 1e9\nrtol: 1e-3\nk: +2E5\nname: '1e9'\nn: 12\n", "yaml", "m")
    assert d == {"t_end": 1e9, "rtol": 1e-3, "k": 2e5, "name": "1e9", "n": 12}
    assert isinstance(d["t_end"], float) and isinstance(d["n"], int)
    m = Model.from_text("bodies: [{name: b, mass: 2e0, inertia: 1e-1}]\n"
                        "settings: {analysis: static, tolerance: 1e-9}\n")
    assert m.bodies[0].mass == 2.0 and m.settings["tolerance"] == 1e-9
