"""The compiled loops of the multistep methods (issue 14): ``abm`` (Adams PECE) and
``bdf`` (its ODE form: the right-hand side's ``c_jac``, LAPACK LU) stepped in C by
``mbcore._ext._steploop`` take the same steps, orders, Jacobians and evaluations
as the Python driver on the same compiled right-hand side; outputs agree to
rounding (the dense output of the compiled loop is the same polynomial)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available
from loop_checks import assert_failing_evaluation_handed_over, spy_loop  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")


def forced() -> Model:
    """Two bodies on revolutes, a harmonic relative driver, a damped spring with a
    time-function actuator, a time-dependent torque and viscous damping."""
    m = Model("forced")
    m.set_gravity(0.3, -9.81)
    m.add_body("a", position=(0.5, 0.0), angle=0.0, mass=2.0, inertia=0.2)
    m.add_body("b", position=(1.5, 0.0), angle=0.0, mass=1.5, inertia=0.15)
    m.add_body("c", position=(2.2, 0.4), angle=0.3, mass=1.0, inertia=0.1)
    m.add_joint("revolute", "O", body_i="ground", body_j="a", point_i=(0.0, 0.0),
                point_j=(-0.5, 0.0))
    m.add_joint("revolute", "A", body_i="a", body_j="b", point_i=(0.5, 0.0),
                point_j=(-0.5, 0.0))
    m.add_driver("relative_driver", "drive", body_i="b", body_j="c", coordinate="phi",
                 function={"harmonic": {"amplitude": 0.2, "frequency": 3.0, "phase": 0.4,
                                        "offset": 0.3}})
    m.add_force("tsda", "spring", body_i="ground", body_j="c", point_i=(2.0, 1.5),
                point_j=(0.1, 0.05), stiffness=120.0, damping=3.5, free_length=0.9,
                actuator={"polynomial": [1.0, -2.0, 0.5]})
    m.add_force("torque", "motor", body="a", torque={"polynomial": [0.3, 0.2]})
    m.add_force("damping", "visc", body="b", coefficients=[0.5, 0.7, 0.2])
    return m


def _model(examples, name):
    if name == "forced":
        return forced()
    return Model.from_file(examples / {"fourbar": "fourbar_dap.yaml",
                                       "slider_crank": "slider_crank_dynamic.yaml"}[name])


#: bit-identical trajectories hold where NumPy's and SciPy's BLAS round alike (the
#: loops make the same BLAS calls as the Python integrators; checked on the CI machine):
#: ``MBCORE_STRICT_BITWISE=1`` asserts that; by default the tests check what holds on
#: any BLAS — the same integration to rounding, amplified at most by order changes
STRICT = os.environ.get("MBCORE_STRICT_BITWISE") == "1"


@pytest.fixture(params=["analytic", "fd"])
def jacobian(request, monkeypatch):
    """The Newton Jacobian of the compiled bdf / θ loops and of the Python drivers on
    the compiled right-hand side: the semi-analytic DI/CS one (``CompiledRHS.c_jac``,
    the default for dense planar systems of compiled forces) or forward differences
    of the right-hand side (``enable_jacobian`` switched off)."""
    if request.param == "fd":
        import mbcore.solve.formulation as F
        monkeypatch.setattr(F, "_enable_jacobian", lambda system, crhs: False)
    return request.param


def _check_jacobian_counts(r, jacobian):
    """FD: f(y) and one evaluation per component of y = [q; qd; W] per Jacobian;
    analytic: none counted (a Jacobian call-back of the Python driver)."""
    n = r["q"].shape[1]
    assert r.stats["integrator_njev"] > 0
    expect = 0 if jacobian == "analytic" else r.stats["integrator_njev"] * (2 * n + 2)
    assert r.stats["integrator_nfev_jac"] == expect


def _close_counts(x, y, rel=0.02):
    return abs(x - y) <= max(2, rel * max(abs(x), abs(y)))


def _assert_same_run(a, b):
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    counters = [k for k in b.stats if k.startswith("integrator_n")]
    assert {"integrator_nfev", "integrator_nsteps", "integrator_norder_changes"} <= set(counters)
    if STRICT:
        assert {k: a.stats[k] for k in counters} == {k: b.stats[k] for k in counters}
    else:
        for k in ("integrator_nfev", "integrator_nsteps"):
            assert _close_counts(a.stats[k], b.stats[k]), (k, a.stats[k], b.stats[k])
    assert len(a) == len(b)
    tol = 1e-12 if STRICT else 1e-8
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        x, y = a[ch], b[ch]
        np.testing.assert_allclose(x, y, rtol=0, atol=tol * (1.0 + np.max(np.abs(y))),
                                   err_msg=ch)
    # step size, order, steps, rejections, evaluations before every output
    if STRICT:
        np.testing.assert_array_equal(a["integrator"], b["integrator"])


# abm is explicit (no Newton Jacobian): only the analytic variant, which is its one path
@pytest.mark.parametrize("integrator, jacobian", [("abm", "analytic"), ("bdf", "analytic"),
                                                  ("bdf", "fd")], indirect=["jacobian"])
@pytest.mark.parametrize("model", ["fourbar", "slider_crank", "forced"])
@pytest.mark.parametrize("rtol", [1e-5, 1e-9])
def test_compiled_multistep_loop_equals_python_driver(examples, integrator, model, rtol,
                                                       jacobian):
    m = _model(examples, model)
    t_end = 0.5 if model == "forced" else 1.0
    st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 20,
          "integrator": integrator, "formulation": "di", "rtol": rtol, "atol": 1e-2 * rtol}
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    b = mbcore.run(m, settings={**st, "loop": "python"})
    _assert_same_run(a, b)
    if integrator == "bdf":       # Jacobians and LU on the compiled loop
        assert a.stats["integrator_nlu"] > 0
        _check_jacobian_counts(a, jacobian)
        _check_jacobian_counts(b, jacobian)


@pytest.mark.parametrize("integrator", ["abm", "bdf"])
def test_compiled_multistep_loop_cs_and_newton_failures(integrator, jacobian):
    """CS on the free slider-crank, and the stiff pendulum whose BDF run rejects
    attempts for Newton failures (stale Jacobian refreshed, then step halved)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import stiff_pendulum
    m = stiff_pendulum()
    st = {"analysis": "dynamic", "t_end": 0.3, "output_step": 0.015, "integrator": integrator,
          "formulation": "cs", "alpha": 5.0, "beta": 5.0, "rtol": 1e-6, "atol": 1e-8}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    _assert_same_run(a, b)
    if integrator == "bdf":
        assert a.stats["integrator_nnewton_failures"] > 0
        _check_jacobian_counts(a, jacobian)


def test_multistep_loop_hands_a_failing_run_to_the_python_driver(examples, monkeypatch):
    """A torque sqrt(0.3 - t) cannot be evaluated after t = 0.3: the compiled loop
    stops at the failing evaluation (code 2, the last accepted step before 0.3) and
    the Python driver continues from there and raises the named error, as the
    Python loop does."""
    from mbcore.elements.functions import FunctionDomainError
    codes = spy_loop(monkeypatch, "run_abm", "run_bdf")
    m = Model.from_file(examples / "fourbar_dap.yaml")
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    for integrator in ("abm", "bdf"):
        st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "rtol": 1e-8,
              "atol": 1e-10, "integrator": integrator}
        with pytest.raises(FunctionDomainError, match="sqrt") as exc:
            mbcore.run(m, settings=st)
        code, t_handover = codes[-1]
        assert code == 2 and 0.25 < t_handover < 0.3 < exc.value.t < 0.31
        with pytest.raises(FunctionDomainError, match="sqrt") as ref:
            mbcore.run(m, settings={**st, "loop": "python"})
        assert 0.3 < ref.value.t < 0.31


@pytest.mark.parametrize("integrator", ["abm", "bdf"])
def test_multistep_loop_singular_start_and_least_squares(integrator):
    """A pendulum hung by two identical revolutes is singular from the start: the
    named error, or with least-squares multipliers a completed run equal to the
    Python loop's."""
    from mbcore.errors import SingularJacobianError
    m = Model("double")
    m.set_gravity(0.0, -9.81)
    m.add_body("a", position=(0.5, 0.0), mass=1.0, inertia=0.1)
    for k in (1, 2):
        m.add_joint("revolute", f"O{k}", body_i="ground", body_j="a", point_i=(0.0, 0.0),
                    point_j=(-0.5, 0.0))
    st = {"analysis": "dynamic", "t_end": 0.5, "output_step": 0.1, "formulation": "di",
          "assemble": False, "integrator": integrator}
    with pytest.raises(SingularJacobianError):
        mbcore.run(m, settings=st)
    st["rank_deficiency"] = "least_squares"
    r = mbcore.run(m, settings=st)
    p = mbcore.run(m, settings={**st, "loop": "python"})
    assert r.status == "finished" and len(r) == 6
    np.testing.assert_allclose(r["q"], p["q"], atol=1e-12)


@pytest.mark.parametrize("integrator", ["abm", "bdf"])
def test_stop_conditions_on_the_multistep_loop(examples, integrator):
    """stop_when is checked in C at every step end; the step where it is met is
    redone by the Python driver, which locates the crossing."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    name = m.bodies[0].name
    st = {"analysis": "dynamic", "t_end": 3.0, "output_step": 0.05, "rtol": 1e-9,
          "atol": 1e-11, "integrator": integrator, "stop_when": f"{name}.phi < 0.5"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    ta = [e for e in a.events if e[1] == "stop"][0][0]
    tb = [e for e in b.events if e[1] == "stop"][0][0]
    assert 0.0 < ta < 3.0 and abs(ta - tb) < 1e-9
    assert len(a) == len(b)
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-10)


def test_what_keeps_the_python_driver(examples):
    """Post-step projections and integrator subclasses that change the step stay on
    Python; ggl + bdf and stiff + bdf run on the compiled loop
    (tests/test_ggl_compiled.py, tests/test_stiff_compiled.py)."""
    from mbcore.integrate.fastloop import compiled_loop_for
    from mbcore.plugins import registry
    from mbplugins.integrators.adams import AdamsPECE
    from mbplugins.integrators.bdf import BDF
    m = Model.from_file(examples / "fourbar_dap.yaml")
    base = {"analysis": "dynamic", "t_end": 0.1, "output_step": 0.05}
    for form, integ in (("projection", "abm"),):
        r = mbcore.run(m, settings={**base, "formulation": form, "integrator": integ})
        assert r.stats["loop"] == "python", (form, integ)
    for form in ("ggl", "stiff"):
        r = mbcore.run(m, settings={**base, "formulation": form, "integrator": "bdf"})
        assert r.stats["loop"] == "compiled", form
    for integ in ("abm", "bdf"):
        r = mbcore.run(m, settings={**base, "formulation": "di", "integrator": integ})
        assert r.stats["loop"] == "compiled"
    assert AdamsPECE.compiled_loop_kind() == "abm" and BDF.compiled_loop_kind() == "bdf"

    class MyBDF(BDF):
        def _newton(self, *args):
            return super()._newton(*args)

    class MyABM(AdamsPECE):
        def _coefficients(self, h, k):
            return super()._coefficients(h, k)

    assert MyBDF.compiled_loop_kind() is None and MyABM.compiled_loop_kind() is None
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    assert compiled_loop_for(BDF, form) == "bdf"
    assert compiled_loop_for(BDF, form, post_step=lambda t, y: None) is None
    assert compiled_loop_for(MyBDF, form) is None


@pytest.mark.parametrize("integrator", ["abm", "bdf"])
def test_multistep_loop_with_batched_rows(examples, integrator):
    """``record: q, qd, energy, integrator`` on the compiled loop hands rows over in
    blocks; the values equal the Python driver's rows."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.01, "integrator": integrator,
          "formulation": "di", "rtol": 1e-7, "atol": 1e-9,
          "record": "q, qd, energy, integrator"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled"
    assert _close_counts(a.stats["integrator_nfev"], b.stats["integrator_nfev"])
    assert len(a) == len(b) == 101
    tol = 1e-12 if STRICT else 1e-8
    for ch in ("q", "qd", "energy"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0,
                                   atol=tol * (1.0 + np.max(np.abs(b[ch]))), err_msg=ch)
    if STRICT:
        np.testing.assert_array_equal(a["integrator"], b["integrator"])


# ----------------------------------------------------------------------------------
# the implicit one-step θ-methods (implicit_euler, trapezoid) on the compiled loop
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("integrator", ["implicit_euler", "trapezoid"])
@pytest.mark.parametrize("model", ["fourbar", "slider_crank", "forced"])
@pytest.mark.parametrize("step", [1.3e-3, 7e-3])
def test_compiled_theta_loop_equals_python_driver(examples, integrator, model, step,
                                                   jacobian):
    """Same steps, Newton iterations, Jacobians, LU factorisations and evaluations;
    outputs off the step grid (dense output: linear / cubic Hermite) and a shortened
    last step (the Newton matrix refactorised)."""
    m = _model(examples, model)
    t_end = 0.5 if model == "forced" else 1.0
    st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 20,
          "integrator": integrator, "formulation": "di", "step": step}
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    b = mbcore.run(m, settings={**st, "loop": "python"})
    _assert_same_run(a, b)
    assert a.stats["integrator_nlu"] > 1
    _check_jacobian_counts(a, jacobian)
    _check_jacobian_counts(b, jacobian)


@pytest.mark.parametrize("integrator", ["implicit_euler", "trapezoid"])
def test_compiled_theta_loop_cs_and_newton_failures(integrator, jacobian):
    """CS on the stiff pendulum; Newton failures with a stale Jacobian refresh it
    and retry the step, as in the Python driver."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import stiff_pendulum
    m = stiff_pendulum()
    st = {"analysis": "dynamic", "t_end": 0.3, "output_step": 0.015, "integrator": integrator,
          "formulation": "cs", "alpha": 5.0, "beta": 5.0,
          "step": {"implicit_euler": 1e-4, "trapezoid": 2e-4}[integrator]}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    _assert_same_run(a, b)
    assert a.stats["integrator_nnewton_failures"] > 0
    assert a.stats["integrator_njev"] == a.stats["integrator_nnewton_failures"] + 1


def test_theta_loop_hands_a_failing_run_to_the_python_driver(examples, monkeypatch):
    """A failing evaluation (sqrt(0.3 - t) after t = 0.3) and a Newton failure with
    a fresh Jacobian (a step far too large) stop the compiled loop at the last
    accepted step (code 2); the Python driver redoes the step and raises the named
    error at the same time as the Python loop."""
    from mbcore.integrate.base import NewtonFailure
    codes = spy_loop(monkeypatch, "run_theta")
    m = Model.from_file(examples / "fourbar_dap.yaml")
    for integrator in ("implicit_euler", "trapezoid"):
        st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "integrator": integrator,
              "step": 0.05}
        with pytest.raises(NewtonFailure, match="Newton iteration did not converge") as exc:
            mbcore.run(m, settings=st)
        code, t_handover = codes[-1]
        assert code == 2 and abs(exc.value.t - t_handover - 0.05) < 1e-12
        with pytest.raises(NewtonFailure) as ref:
            mbcore.run(m, settings={**st, "loop": "python"})
        assert ref.value.t == exc.value.t and str(ref.value) == str(exc.value)
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    for integrator in ("implicit_euler", "trapezoid"):
        st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "integrator": integrator,
              "step": 1.3e-3}
        assert_failing_evaluation_handed_over(m, st, codes)


@pytest.mark.parametrize("integrator", ["implicit_euler", "trapezoid"])
def test_stop_conditions_on_the_theta_loop(examples, integrator):
    m = Model.from_file(examples / "fourbar_dap.yaml")
    name = m.bodies[0].name
    st = {"analysis": "dynamic", "t_end": 3.0, "output_step": 0.05, "step": 1e-3,
          "integrator": integrator, "stop_when": f"{name}.phi < 0.5"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    ta = [e for e in a.events if e[1] == "stop"][0][0]
    tb = [e for e in b.events if e[1] == "stop"][0][0]
    assert 0.0 < ta < 3.0 and abs(ta - tb) < 1e-9
    assert len(a) == len(b)
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-10)


def test_what_keeps_the_theta_methods_on_python(examples):
    """Subclasses that change the step, the Newton iteration or the end derivative,
    the abstract θ-method, per-component Newton tolerances and projections keep the
    Python driver."""
    from mbcore.integrate.fastloop import compiled_loop_for
    from mbcore.plugins import registry
    from mbplugins.integrators.implicit import ImplicitEuler, ThetaMethod, Trapezoid
    assert ImplicitEuler.compiled_loop_kind() == "theta" == Trapezoid.compiled_loop_kind()
    assert ThetaMethod.compiled_loop_kind() is None

    class MySolve(ImplicitEuler):
        def _solve(self, *args):
            return super()._solve(*args)

    class Mixed(Trapezoid):                 # trapezoid's end derivative, linear output
        _dense_output_impl = ImplicitEuler._dense_output_impl

    class Theta07(ImplicitEuler):           # another θ with a declared end derivative
        theta = 0.7

    assert MySolve.compiled_loop_kind() is None and Mixed.compiled_loop_kind() is None
    assert Theta07.compiled_loop_kind() == "theta"
    m = Model.from_file(examples / "fourbar_dap.yaml")
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    assert compiled_loop_for(Trapezoid, form) == "theta"
    assert compiled_loop_for(Trapezoid, form, post_step=lambda t, y: None) is None
    assert compiled_loop_for(MySolve, form) is None
    base = {"analysis": "dynamic", "t_end": 0.1, "output_step": 0.05, "step": 1e-3}
    r = mbcore.run(m, settings={**base, "formulation": "projection",
                                "integrator": "implicit_euler"})
    assert r.stats["loop"] == "python"
    r = mbcore.run(m, settings={**base, "formulation": "di", "integrator": "trapezoid"})
    assert r.stats["loop"] == "compiled"


@pytest.mark.parametrize("integrator", ["implicit_euler", "trapezoid"])
def test_theta_loop_with_batched_rows(examples, integrator):
    m = Model.from_file(examples / "fourbar_dap.yaml")
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.01, "integrator": integrator,
          "formulation": "di", "step": 3e-3, "record": "q, qd, energy, integrator"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled"
    assert _close_counts(a.stats["integrator_nfev"], b.stats["integrator_nfev"])
    assert len(a) == len(b) == 101
    tol = 1e-12 if STRICT else 1e-8
    for ch in ("q", "qd", "energy"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0,
                                   atol=tol * (1.0 + np.max(np.abs(b[ch]))), err_msg=ch)
    if STRICT:
        np.testing.assert_array_equal(a["integrator"], b["integrator"])
