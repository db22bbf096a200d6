"""DI and CS formulations (spec/algorithms.md §4.1-4.2)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model
from mbcore.plugins import registry


def pendulum_fourbar(examples):
    d = yaml.safe_load((examples / "fourbar_kap.yaml").read_text())
    d.pop("drivers")
    d["gravity"] = [0, -9.81]
    for b, (m, J) in zip(d["bodies"], [(1, 0.3), (2.25, 2), (2, 1.35)], strict=True):
        b["mass"], b["inertia"] = m, J
    return Model.from_dict(d)


def test_di_and_cs_agree_on_a_consistent_state(examples, backend):
    """On the constraint manifold the Baumgarte terms vanish: same accelerations
    and multipliers.  The kinematic run's states are on it to its residuals, so CS
    adds the response to c = beta^2 |Phi| + 2 alpha |Phi_q qd - nu|, at most
    |K^-1| c (K the augmented matrix; observed <= 0.18 of that; c = 7e-9 at the
    assembled t = 0, 4e-14 elsewhere): the tolerance is 100x it."""
    s = pendulum_fourbar(examples).compile(kernels=backend)
    kin = mbcore.run(Model.from_file(examples / "fourbar_kap.yaml"))
    di = registry().get("formulation", "di")(s)
    cs = registry().get("formulation", "cs")(s, {"alpha": 10.0, "beta": 7.0})
    for k in (0, 7, 19):
        q, qd = kin["q"][k], kin["qd"][k]
        y = di.pack(q, qd)
        a = [x.copy() for x in di.outputs(0.0, y)]
        b = [x.copy() for x in cs.outputs(0.0, y)]
        J = s.jacobian_dense(q, 0.0)
        K = np.block([[np.diag(s.mass_diag), J.T], [J, np.zeros((s.m, s.m))]])
        c = (7.0 ** 2 * np.abs(s.phi(q, 0.0)).max()
             + 2 * 10.0 * np.abs(J @ qd - s.nu(q, 0.0)).max())
        bound = 100 * np.linalg.norm(np.linalg.inv(K), np.inf) * c
        # (+ the rounding of the two solves: 1e-12 of the scale, observed <= 7e-14)
        np.testing.assert_allclose(a[2], b[2], rtol=0,
                                   atol=bound + 1e-12 * (1 + np.abs(a[2]).max()))
        np.testing.assert_allclose(a[3], b[3], rtol=0,
                                   atol=bound + 1e-12 * (1 + np.abs(a[3]).max()))


def test_cs_violation_dynamics_are_the_baumgarte_equation(examples, backend):
    """Off the manifold, CS imposes Phi'' = -2 alpha Phi' - beta^2 Phi exactly:
    check Phi_q qdd - gamma = -2 alpha Phidot - beta^2 Phi at a perturbed state."""
    s = pendulum_fourbar(examples).compile(kernels=backend)
    cs = registry().get("formulation", "cs")(s, {"alpha": 3.0, "beta": 4.0})
    kin = mbcore.run(Model.from_file(examples / "fourbar_kap.yaml"))
    rng = np.random.default_rng(1)
    q = kin["q"][5] + 1e-3 * rng.normal(size=9)
    qd = kin["qd"][5] + 1e-2 * rng.normal(size=9)
    qq, qqd, qdd, lam = (x.copy() for x in cs.outputs(0.0, cs.pack(q, qd)))
    J = s.jacobian_dense(q, 0.0)
    phid = J @ qd - s.nu(q, 0.0)
    np.testing.assert_allclose(J @ qdd - s.gamma(q, qd, 0.0),
                               -2 * 3.0 * phid - 16.0 * s.phi(q, 0.0), atol=1e-10)


def test_cs_warns_when_alpha_beta_too_fast_for_the_step(examples):
    s = pendulum_fourbar(examples).compile()
    cs = registry().get("formulation", "cs")
    assert cs(s, {"alpha": 5, "beta": 5}).warnings(0.01) == []
    w = cs(s, {"alpha": 200, "beta": 200}).warnings(0.01)
    assert w and "too fast for the step" in w[0]
    with pytest.raises(mbcore.ModelError, match=r"settings\.alpha: must be >= 0"):
        cs(s, {"alpha": -1})


# -- every formulation x integrator combination that makes sense ------------------
ODE_FORMS = ["di", "cs", "cp", "projection"]
DAE_FORMS = ["ggl", "stiff"]                  # semi-explicit DAEs: bdf only
INTEGRATORS = {"dopri5": {"rtol": 1e-9, "atol": 1e-11}, "abm": {"rtol": 1e-9, "atol": 1e-11},
               "bdf": {"rtol": 1e-9, "atol": 1e-11}, "rk4": {"step": 1e-3},
               "implicit_euler": {"step": 1e-4}}
COMBOS = [(f, i) for f in ODE_FORMS for i in INTEGRATORS] + [(f, "bdf") for f in DAE_FORMS]
# the penalty ODE with its damped projections: adaptive explicit methods (bdf works
# but is slow: tests/test_singular.py, marked slow)
COMBOS += [("penalty", "dopri5"), ("penalty", "abm")]


def _model(examples, which):
    f = "fourbar_dap.yaml" if which == "fourbar" else "slider_crank_dynamic.yaml"
    return Model.from_file(examples / f)


@pytest.fixture(scope="module")
def references():
    from conftest import EXAMPLES
    return {w: mbcore.run(_model(EXAMPLES, w), settings={
        "formulation": "di", "integrator": "dopri5", "rtol": 1e-12, "atol": 1e-14,
        "t_end": 0.3, "output_step": 0.05}) for w in ("fourbar", "slider_crank")}


@pytest.mark.parametrize("which", ["fourbar", "slider_crank"])
@pytest.mark.parametrize("formulation, integrator", COMBOS)
def test_formulation_integrator_matrix(formulation, integrator, which, examples, references):
    ref = references[which]
    res = mbcore.run(_model(examples, which), settings={
        "formulation": formulation, "integrator": integrator, "t_end": 0.3,
        "output_step": 0.05, **INTEGRATORS[integrator]})
    assert res.stats["formulation"] == formulation and res.stats["integrator"] == integrator
    # implicit Euler is first order: h = 1e-4 over 0.3 s; the others' global errors at
    # rtol 1e-9 (rk4: h = 1e-3) over 0.3 s, observed <= 2.2e-7 (multistep)
    tol = 2e-3 if integrator == "implicit_euler" else 5e-5
    np.testing.assert_allclose(res["q"], ref["q"], rtol=0, atol=tol)
    if formulation in ("cp", "projection", "ggl", "stiff", "penalty"):  # constraints held
        assert np.max(res["violation/position"]) < 1e-9


@pytest.mark.parametrize("formulation", DAE_FORMS)
@pytest.mark.parametrize("integrator", [i for i in INTEGRATORS if i != "bdf"])
def test_dae_formulations_need_bdf(formulation, integrator, examples):
    with pytest.raises(mbcore.ModelError, match=rf"settings\.integrator: formulation "
                                                rf"'{formulation}' is a DAE: it needs .*\(bdf or radau\)"
                                                rf", not '{integrator}'"):
        mbcore.run(_model(examples, "fourbar"), settings={"formulation": formulation,
                                                          "integrator": integrator})


def test_stiff_rejects_settings_of_other_formulations(examples):
    with pytest.raises(mbcore.ModelError, match=r"settings\.alpha: not used by formulation "
                                                r"'stiff'"):
        mbcore.run(_model(examples, "fourbar"), settings={"formulation": "stiff",
                                                          "integrator": "bdf", "alpha": 5.0})
