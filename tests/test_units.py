"""Units: the model's unit system (``units:``), quantities with units converted on
load (docs/model-format.md, "Units") and the units of the output series
(docs/results.md)."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from mbcore.elements.units import UnitSystem, unit_system
from mbcore.errors import ModelError
from mbcore.model.model import Model

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

SLIDER = """
name: slider
units: {UNITS}
gravity: [0, 0]
settings: {{analysis: dynamic, t_end: 0.1, output_step: 0.05}}
bodies:
  - {{name: block, mass: {MASS}, inertia: 1, position: [{X}, 0], angle: {ANGLE},
     velocity: [0, 0], angular_velocity: {OMEGA}}}
joints:
  - {{name: guide, type: translational, body_i: ground, body_j: block,
     point_i: [0, 0], point_j: [0, 0], axis: [1, 0]}}
forces:
  - {{name: spring, type: tsda, body_i: ground, body_j: block, point_i: [0, 0],
     point_j: [0, 0], stiffness: {K}, damping: {C}, free_length: {L0}}}
"""


def slider(units="{length: m}", mass="1", x="0.5", angle="0", omega="0", k="100",
           c="0", l0="0.25") -> Model:
    return Model.from_text(SLIDER.format(UNITS=units, MASS=mass, X=x, ANGLE=angle,
                                         OMEGA=omega, K=k, C=c, L0=l0))


# ------------------------------------------------------------- (a) the unit system
def test_defaults_are_si_and_missing_keys_take_them():
    u = unit_system({})
    assert [u.unit(d) for d in ("length", "angle", "time", "mass", "force")] == \
        ["m", "rad", "s", "kg", "N"]
    assert unit_system({"length": "mm"}).unit("force") == "mN"      # kg mm / s^2
    assert unit_system({"length": "mm"}).unit("force*length") == "mm*mN"


def test_the_lbf_example_is_consistent_and_its_force_is_lbf():
    m = Model.from_file(EXAMPLES / "fourbar_002_equilibrium.yaml")
    assert m.units["mass"] == "lbf s^2/in"
    u = m.unit_system
    assert u.unit("force") == "lbf"
    assert u.unit("force*length") == "lbf*in"
    # 1 lbf s^2/in = 175.1268 kg (the slug per inch): 386.088 in/s^2 x 1 lbf s^2/in = 386.088 lbf
    assert u.convert("1 kg", "mass", "x") == pytest.approx(1 / 175.12683524647636, rel=1e-12)


def test_every_example_loads_with_its_units():
    for path in sorted(EXAMPLES.glob("*.yaml")):
        Model.from_file(path)


@pytest.mark.parametrize("units, match", [
    ({"length": "kg"}, r"^units\.length: 'kg' is a mass; expected length$"),
    ({"angle": "mm"}, r"^units\.angle: 'mm' is a length; expected angle$"),
    ({"length": "meterz"}, r"^units\.length: unknown unit 'meterz' in 'meterz' \(did you "
                           r"mean 'meter'\?\)$"),
    ({"lenght": "m"}, r"^units\.lenght: unknown key of the units \(did you mean "
                      r"'length'\?\)$"),
    ({"length": "mm", "mass": "kg", "force": "N"}, r"^units\.force: force 'N' and mass 'kg' "
                                                   r"do not agree .* is 1000 force units"),
    ({"length": "in", "mass": "kg", "force": "lbf"}, r"^units\.force: "),
])
def test_bad_units_blocks_are_refused_by_key(units, match):
    with pytest.raises(ModelError, match=match):
        Model.from_dict({"units": units, "bodies": []})


def test_a_consistent_force_and_mass_pair_is_accepted():
    u = unit_system({"length": "in", "mass": "lbf*s^2/in", "force": "lbf"})
    assert u.unit("force") == "lbf"
    assert unit_system({"length": "mm", "mass": "t", "force": "N"}).unit("force") == "N"


# ------------------------------------------------- (b) quantities with units on load
def test_body_quantities_convert_to_the_models_units():
    m = slider(units="{length: mm}", mass='"2000 g"', x='"1 m"', angle='"30 deg"',
               omega='"60 rpm"')
    b = m.bodies[0]
    assert b.mass == 2.0
    assert b.position == (1000.0, 0.0)                 # a mm model gets "1 m" as 1000
    assert b.angle == math.radians(30.0)
    assert b.angular_velocity == 2.0 * math.pi          # 60 rpm = 2 pi rad/s
    plain = slider(units="{length: mm}", x="1000")
    assert plain.bodies[0].position == (1000.0, 0.0)   # plain numbers are not converted


def test_element_parameters_convert_by_their_declared_dimension():
    m = slider(k='"2 kN/m"', c='"3 N*s/mm"', l0='"10 mm"')
    v = m.elements["forces"][0].values
    assert v["stiffness"] == 2000.0
    assert v["damping"] == 3000.0
    assert v["free_length"] == 0.01
    mm = slider(units="{length: mm}", k='"2 kN/m"', l0='"10 mm"')
    v = mm.elements["forces"][0].values
    assert v["free_length"] == 10.0
    assert v["stiffness"] == pytest.approx(2000.0, rel=1e-15)   # 2 kN/m = 2000 mN/mm
    deg = slider(units="{length: m, angle: deg}", angle='"0.5 rad"')
    assert deg.bodies[0].angle == pytest.approx(math.degrees(0.5), rel=1e-15)


def test_vector_entries_gravity_and_points_take_units():
    m = Model.from_text(textwrap.dedent("""
        units: {length: mm}
        gravity: [0, "-9.81 m/s^2"]
        bodies: [{name: a, position: ["1 cm", 2]}]
        points: [{name: P, body: a, at: ["0.5 m", "3 mm"]}]
    """))
    assert m.gravity == (0.0, -9810.0)
    assert m.bodies[0].position == (10.0, 2.0)
    assert m.points[0].at == (500.0, 3.0)


def test_settings_times_take_units():
    from mbcore.analysis.runner import run
    m = slider(units="{length: m, time: s}")
    m.settings.update(t_end="100 ms", output_step="50 ms")
    res = run(m)
    assert list(res.t) == pytest.approx([0.0, 0.05, 0.1], abs=1e-15)


@pytest.mark.parametrize("kw, match", [
    (dict(k='"2 kg"'), r"^forces\[0\]\.stiffness: '2 kg' is a mass; expected force/length$"),
    (dict(x='"30 deg"'), r"^bodies\[0\]\.position\[0\]: '30 deg' is an angle; expected "
                         r"length$"),
    (dict(angle='"10 mm"'), r"^bodies\[0\]\.angle: '10 mm' is a length; expected angle$"),
    (dict(omega='"10 m/s"'), r"^bodies\[0\]\.angular_velocity: '10 m/s' is of dimension "
                             r"length/time; expected angle/time$"),
    (dict(l0='"3 furlongz"'), r"^forces\[0\]\.free_length: unknown unit 'furlongz'"),
    (dict(mass='"2 kg m"'), r"^bodies\[0\]\.mass: '2 kg m' is of dimension "),
])
def test_dimension_mismatch_and_unknown_units_name_the_key(kw, match):
    with pytest.raises(ModelError, match=match):
        slider(**kw)


def test_a_unit_where_no_dimension_is_declared_is_refused():
    text = SLIDER.format(UNITS="{}", MASS=1, X=0, ANGLE=0, OMEGA=0, K=1, C=0, L0=1) + \
        "impacts: []\n"
    data = Model.from_text(text).to_dict()
    data["joints"][0]["axis"] = ["1 m", 0]          # a direction: no dimension declared
    with pytest.raises(ModelError, match=r"^joints\[0\]\.axis\[0\]: expected a plain number, "
                                         r"got a string \('1 m'\): this key declares no "
                                         r"dimension"):
        Model.from_dict(data)


def test_python_api_takes_quantities_in_the_models_units():
    m = Model("api", units={"length": "mm"})
    b = m.add_body("a", mass="3 kg", position=["2 m", "1 cm"], angle="90 deg")
    assert (b.mass, b.position, b.angle) == (3.0, (2000.0, 10.0), math.pi / 2)
    m.set_gravity(0, "-1 m/s^2")
    assert m.gravity == (0.0, -1000.0)
    assert isinstance(m.unit_system, UnitSystem)
