"""Regression tests, one per class of bug found by the model-file fuzzer (issue 18,
``benchmarks/fuzz.py``).  Each failed before its fix with a crash-like outcome (a
foreign exception, an unnamed error, a hang or an unbounded allocation)."""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import AnalysisError, MbcoreError, ModelError
from mbcore.integrate import StepBudgetError
from mbcore.elements.functions import parse_function
from mbcore.model import Model

ROOT = Path(__file__).resolve().parents[1]
FOURBAR = (ROOT / "examples" / "fourbar_kap.yaml").read_text()


def _load(text: str, fmt: str = "yaml") -> Model:
    return Model.from_text(text, fmt, path="case.yaml")


# ------------------------------------------------------------------ YAML / JSON parsing
@pytest.mark.parametrize("tag", [
    "!!python/object/apply:os.system ['true']", "!!python/name:os.system",
    "!!binary aGVsbG8=", "!!timestamp 2001-12-14", "!!set {a, b}", "!custom 3",
    "!!omap [a: 1]"])
def test_yaml_tags_are_refused_with_the_line(tag):
    with pytest.raises(ModelError) as e:
        _load(FOURBAR + f"\ndescription: {tag}\n")
    msg = str(e.value)
    assert "invalid YAML at line" in msg
    assert "is not allowed" in msg or "could not determine a constructor" in msg


def test_plain_data_tags_and_dates_stay_data():
    m = _load(FOURBAR.replace("name: KAP four-bar", "name: !!str 2001-12-14", 1))
    assert m.name == "2001-12-14"                    # a string, not a datetime


def test_alias_bomb_and_recursive_alias_are_refused_quickly():
    lol = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 9):
        prev = chr(96 + k)
        lol.append(f"{chr(97 + k)}: &{chr(97 + k)} [{', '.join(['*' + prev] * 9)}]")
    t0 = time.perf_counter()
    with pytest.raises(ModelError, match="alias bomb"):
        _load("\n".join(lol) + "\n" + FOURBAR)
    assert time.perf_counter() - t0 < 10
    with pytest.raises(ModelError, match="recursive alias"):
        _load(FOURBAR + "\ndescription: &r [1, *r]\n")
    ok = _load(FOURBAR.replace("point_i: [1, 0]", "point_i: &p [1, 0]", 1))   # plain reuse
    assert ok.name == "KAP four-bar"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_deep_nesting_is_refused(fmt):
    deep = "[" * 100_000 + "]" * 100_000
    text = FOURBAR + f"\ndescription: {deep}\n" if fmt == "yaml" else \
        '{"name": "x", "description": ' + deep + "}"
    with pytest.raises(ModelError, match="nested more than|maximum nesting depth"):
        _load(text, fmt)


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_integers_of_thousands_of_digits(fmt):
    digits = "9" * 5000
    text = FOURBAR + f"\nimpacts: [{digits}]\n" if fmt == "yaml" else \
        '{"name": "x", "gravity": [' + digits + ', 0]}'
    with pytest.raises(ModelError) as e:
        _load(text, fmt)
    assert "case.yaml" in str(e.value)


def test_numbers_too_large_for_a_float_name_the_key():
    text = FOURBAR.replace("t_end: 1.0", "t_end: " + "9" * 400)
    m = _load(text)
    with pytest.raises(ModelError) as e:
        mbcore.run(m)
    assert e.value.path == "settings.t_end" and "too large" in str(e.value)


def test_a_file_that_is_not_utf8(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_bytes(b"name: x\ndescription: \xff\xfe\n")
    with pytest.raises(ModelError, match="not UTF-8"):
        Model.from_file(p)


def test_error_messages_cut_huge_values():
    with pytest.raises(ModelError) as e:
        parse_function({"harmonic": "x" * 300_000}, "drivers[0].function")
    assert len(str(e.value)) < 400
    with pytest.raises(ModelError) as e:
        _load(FOURBAR.replace("function: {polynomial: [1.0472, 6.2832]}",
                              "function: " + "[" * 150 + "]" * 150))
    assert len(str(e.value)) < 400


# ------------------------------------------------------------------ settings / analyses
def test_unknown_kernels_setting_is_a_model_error():
    m = _load(FOURBAR.replace("analysis: kinematic", "analysis: kinematic\n  kernels: nope"))
    with pytest.raises(ModelError) as e:
        mbcore.run(m)
    assert e.value.path == "settings.kernels"


EMPTY = "name: empty\nsettings: {t_end: 0.02, output_step: 0.01}\n"


@pytest.mark.parametrize("analysis", ["kinematic", "kinetostatic", "static", "dynamic"])
def test_a_model_without_bodies_runs_or_says_why(analysis):
    m = _load(EMPTY)
    s = {"coordinates": "joint"} if analysis == "kinematic" else {}
    res = mbcore.run(m, analysis=analysis, settings=s)
    assert res.n_rows >= 1 and np.all(np.isfinite(res.t))


@pytest.mark.parametrize("formulation", ["di", "cs", "projection", "penalty"])
def test_formulations_on_a_model_without_constraints(formulation):
    text = EMPTY + "bodies: [{name: b, mass: 2}]\ngravity: [0, -9.81]\n"
    res = mbcore.run(_load(text), analysis="dynamic",
                     settings={"formulation": formulation})
    y = res.series("q")[:, 1]
    assert np.allclose(y, -0.5 * 9.81 * res.t ** 2, atol=1e-8)


def test_cp_without_constraints_is_a_model_error():
    text = EMPTY + "bodies: [{name: b}]\n"
    with pytest.raises(ModelError) as e:
        mbcore.run(_load(text), analysis="dynamic", settings={"formulation": "cp"})
    assert e.value.path == "settings.formulation"


@pytest.mark.parametrize("analysis", ["kinematic", "static", "dynamic"])
def test_a_point_at_1e308_names_the_joint(analysis):
    text = FOURBAR.replace("point_i: [2, 0]", "point_i: [1.7e+308, 1.7e+308]", 1)
    m = _load(text)
    with pytest.raises(AnalysisError) as e:
        mbcore.run(m, analysis=analysis, settings={} if analysis == "static" else
                   {"t_end": 0.05})
    assert "B" in str(e.value) and "not finite" in str(e.value) and e.value.t == 0.0



def test_a_null_parameter_takes_its_default():
    text = FOURBAR.replace("body_i: crank,    body_j: coupler", "body_i: null, "
                           "body_j: coupler", 1)
    with pytest.raises(ModelError, match=r"joints\[1\]\.body_i"):      # required: named
        _load(text)
    slide = ROOT / "examples" / "quick_return_1.yaml"
    raw = slide.read_text()
    assert "axis: [1, 0]" in raw or "axis:" in raw
    m = Model.from_file(slide)
    el = next(e for e in m.elements["joints"] if "axis" in e.raw)
    el.raw["axis"] = None                     # optional: the default (1, 0)
    m.validate()
    assert el.values["axis"] == (1.0, 0.0)


def test_a_rotation_axis_whose_norm_overflows():
    from mbcore.elements.orientation_spec import orientation_from_spec
    p = orientation_from_spec({"axis": [1e308, 1e308, 0], "angle": 90, "unit": "deg"},
                              "bodies[0].orientation")
    assert np.allclose(p, [np.cos(np.pi / 4), 0.5, 0.5, 0.0])


def test_an_initial_derivative_too_large_for_a_first_step():
    """|f| / atol overflows: the trial step underflowed to 0 and divided by it."""
    from mbcore.integrate.common import select_initial_step
    from mbcore.integrate.base import StepSizeError
    y0, f0 = np.ones(2), np.array([1e300, 1e300])
    with pytest.raises(StepSizeError) as e:
        select_initial_step(lambda t, y: f0, 0.0, y0, f0, 1.0, 5, 1e-8, 1e-10, 1.0)
    assert e.value.t == 0.0 and "initial step size" in str(e.value)
    assert select_initial_step(lambda t, y: f0 * 0 + 1, 0.0, y0, f0 * 0 + 1, 1.0, 5,
                               1e-8, 1e-10, 1.0) > 0


def test_non_finite_results_are_a_named_error_not_a_silent_nan():
    text = FOURBAR.replace("{name: P, body: coupler, at: [0.5, 1.5]}",
                           "{name: P, body: coupler, at: [1.7e+308, 1.7e+308]}")
    with pytest.raises(AnalysisError) as e:
        mbcore.run(_load(text), settings={"t_end": 0.05})
    assert "'points' is not finite at 'P." in str(e.value) and e.value.t == 0.0
    res = mbcore.run(_load(text), settings={"t_end": 0.05}, raise_errors=False)
    assert res.status == "failed" and res.n_rows == 3          # the rows are kept


@pytest.mark.parametrize("formulation", ["joint_coordinates"])
def test_tree_formulations_on_a_model_without_bodies(formulation):
    res = mbcore.run(_load(EMPTY), analysis="dynamic", settings={"formulation": formulation})
    assert res.n_rows == 3


def test_step_budget_right_after_a_projection_restart():
    """Seed-2 campaign, case 5242: the budget ran out in a step whose projected end
    state restarted the integrator (no last step left to report): a TypeError
    before, now the StepBudgetError at the pole of the driver 1/(t - 0.01)."""
    model = _load("""
name: generated
settings: {analysis: dynamic, t_end: 0.02, output_step: 0.025, integrator: dop853,
           formulation: projection, max_steps: 2000}
bodies:
- {name: b0, mass: 2.5, position: [-2.0, 1.0], inertia: 1.0, angle: 0.0}
- {name: b1, mass: 1.0e+6, position: [-2.0, -1.0], inertia: 0.01, angle: 0.0}
drivers:
- {name: d0, type: absolute_driver, body: b0, coordinate: phi, function: 1/(t-0.01)}
""")
    with pytest.raises(StepBudgetError, match="2000 steps since t = 0 ") as exc:
        mbcore.run(model)
    assert exc.value.t == pytest.approx(0.01, abs=1e-6)


def test_static_energy_method_on_an_overconstrained_model(examples):
    """Seed-2 campaign, cases 1786 and 9711: ``method: energy`` on the Bennett linkage
    (3 redundant joint equations, more equations than coordinates) solved a non-square
    Phi_u (numpy LinAlgError).  Driven: the assembled configuration with the
    multipliers of least squares, equal to Newton's; undriven under gravity: a named
    error, not numpy's."""
    model = Model.from_file(examples / "spatial_bennett.yaml")
    a = mbcore.run(model, analysis="static", settings={"method": "energy"})
    b = mbcore.run(model, analysis="static", settings={"method": "newton"})
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-10)
    # the reactions balance the loads: Phi_q^T lam = -Q (the redundant part of lam
    # is not unique; the generalised reactions are)
    np.testing.assert_allclose(a["reactions"], b["reactions"], atol=1e-8)
    d = model.to_dict()
    d.pop("drivers")
    d["gravity"] = [0.0, -9.81, -3.0]
    with pytest.raises(MbcoreError) as exc:
        mbcore.run(Model.from_dict(d), analysis="static", settings={"method": "energy"})
    assert exc.value.t == 0.0 and "energy minimisation" in str(exc.value)


def test_assembly_with_a_point_at_1e308_names_the_joint_not_lapack(examples, capfd):
    """Seed-3 campaign, case 650: a point at 1e308 whose Phi stays finite (the point's
    other body angle makes it cancel) made the assembly's least-squares SVD fail
    (numpy LinAlgError, and LAPACK printed "DLASCL ... illegal value")."""
    model = Model.from_file(examples / "nfourbar_2.yaml")
    model.elements["joints"][2].raw["point_j"] = [-0.5, 1e308]
    for analysis in ("static", "dynamic"):
        with pytest.raises(AnalysisError, match=r"O2\.[xy].*too large to solve") as exc:
            mbcore.run(model, analysis=analysis)
        assert exc.value.t == 0.0
    assert "DLASCL" not in capfd.readouterr().err


@pytest.mark.parametrize("integrator", ["bdf"])
def test_ggl_on_a_model_without_bodies(integrator):
    """Seed-3 campaign, case 16736: ggl with no bodies built its compiled right-hand
    side with n = 0 (ValueError from the extension)."""
    model = _load("name: empty\nsettings: {analysis: dynamic, t_end: 0.02, "
                  f"formulation: ggl, integrator: {integrator}}}\nbodies: []\n"
                  "gravity: [0.0, -9.81]\n")
    res = mbcore.run(model)
    assert res.n_rows == 3 and res["q"].shape == (3, 0)


def test_penalty_factorisation_failure_names_the_time(examples):
    """Seed-3 campaign, case 6258: a mass of 2e300 beside masses of 1 makes the
    penalty Schur matrix numerically indefinite: the error had no time."""
    d = Model.from_file(examples / "parallelogram_singular.yaml").to_dict()
    d["bodies"][2]["mass"] = 2.0e300
    with pytest.raises(AnalysisError, match="penalty matrix") as exc:
        mbcore.run(Model.from_dict(d), analysis="dynamic",
                   settings={"formulation": "penalty", "t_end": 0.03})
    assert exc.value.t is not None


def test_an_inertia_tensor_entry_near_1e308():
    """Seed-4 campaign, case 10000: an inertia tensor entry of 1.7e308 overflowed
    while symmetrising, and LAPACK's eigenvalues did not converge (numpy LinAlgError
    on loading the file).  The tensor is checked scaled: a huge moment is accepted
    like any other (two of them: a body's moments obey the triangle inequality), a
    NaN one is named."""
    from mbcore.model import inertia_tensor
    J = inertia_tensor([[1.7e308, 0, 0], [0, 1.7e308, 0], [0, 0, 3]], "bodies[0].inertia")
    assert J[1][1] == 1.7e308 and J[0][0] == 1.7e308
    with pytest.raises(ModelError, match=r"bodies\[0\]\.inertia"):
        inertia_tensor([[1, 0, 0], [0, -1.7e308, 0], [0, 0, 3]], "bodies[0].inertia")


def test_penalty_default_factor_overflow_names_the_mass(examples):
    """Seed-4 campaign, case 15662: an inertia of 1e308 made the default penalty
    factor 1e7 x max(M) infinite; the compiled kernel refused it ("invalid
    settings", a ValueError).  Now a ModelError naming the coordinate."""
    d = Model.from_file(examples / "nfourbar_2.yaml").to_dict()
    d["bodies"][1]["inertia"] = 1e308
    with pytest.raises(ModelError, match=r"settings\.alpha.*crank1\.phi"):
        mbcore.run(Model.from_dict(d), analysis="dynamic",
                   settings={"formulation": "penalty", "t_end": 0.02})
