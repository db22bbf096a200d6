"""``radau`` and ``sdirk`` on the compiled loop (``mbcore._ext._steploop.run_radau``,
``run_sdirk``): Radau IIA of order 5 with RADAU5's transformed simplified Newton
iteration (one real and one complex LU), error estimate and predictive controller
(Hairer & Wanner (1996), §IV.8), and the 5-stage, order-4, L-stable SDIRK of Hairer &
Wanner (1996), §IV.6, Table 6.5, each with the Python class's Newton iteration,
Jacobian and LU reuse, error estimate and step controller.  The Python driver
(``loop: python``) is the reference: the same steps, Jacobians, LUs and evaluations
on a planar and a spatial model and on the DAE forms (``ggl``; radau also ``stiff``:
the mass matrix, the |h| powers of the error weights and the analysis' DAE Jacobian
call-back); checkpoints resume exactly; a failing evaluation hands the run to the
Python driver."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

#: (model file, formulation): planar ODE, spatial ODE, planar index-2 GGL DAE
CASES = {"planar": ("platform.yaml", None),
         "spatial": ("spatial_double_pendulum.yaml", None),
         "ggl": ("slider_crank_dynamic.yaml", "ggl")}

COUNTS = ("nsteps", "nrejected", "nerror_test_failures", "nnewton_failures", "nfev",
          "nfev_jac", "njev", "nlu", "nlu_solves", "nnewton_iter")


def _runs(examples, case, integrator="sdirk", **extra):
    name, formulation = CASES[case]
    st = {"integrator": integrator, "t_end": 1.0, "output_step": 0.05, "rtol": 1e-6,
          "atol": 1e-8, **extra}
    if formulation:
        st["formulation"] = formulation
    return [mbcore.run(Model.from_file(examples / name), settings={**st, "loop": loop})
            for loop in ("auto", "python")]


def _assert_same_steps(a, b):
    """Compiled (a) and Python (b) runs took the same steps: every count and the
    integrator channel (step, order, steps, rejections, evaluations at every output)."""
    assert [a.stats["loop"], b.stats["loop"]] == ["compiled", "python"]
    assert a.status == b.status == "finished"
    for k in COUNTS:
        assert a.stats[f"integrator_{k}"] == b.stats[f"integrator_{k}"], k
    assert a.stats["integrator_nlu"] > 0 and a.stats["integrator_nsteps"] > 10
    assert np.array_equal(np.asarray(a["integrator"]), np.asarray(b["integrator"]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_sdirk_compiled_loop_takes_the_python_drivers_steps_bit_for_bit(examples, case):
    """The same stages, Newton iterations, Jacobians (forward differences or the
    semi-analytic DI/CS Jacobian of ``c_jac``; the GGL form's call-back), LU
    factorisations, error estimates and step sizes: every count, the integrator
    channel (step, order, steps, rejections, evaluations at every output) and every
    output equal bit for bit (the same formulas and BLAS/LAPACK calls in one
    process; the dense output is the same cubic Hermite polynomial)."""
    a, b = _runs(examples, case)
    _assert_same_steps(a, b)
    for ch in ("q", "qd", "qdd"):
        assert np.array_equal(np.asarray(a[ch]), np.asarray(b[ch])), ch


#: radau's cases: sdirk's and the index-3 'stiff' form (mass, h_power, the DAE Jacobian)
RADAU_CASES = {**CASES, "stiff": ("slider_crank_dynamic.yaml", "stiff"),
               "spatial_stiff": ("spatial_slider_crank_dynamic.yaml", "stiff")}


@pytest.mark.parametrize("case", sorted(RADAU_CASES))
def test_radau_compiled_loop_takes_the_python_drivers_steps(examples, case, monkeypatch):
    """The same collocation iterations (real and complex LU by LAPACK, the complex
    right-hand side formed as NumPy forms it), Jacobians, error estimates (with the
    second try) and predictive step sizes: every count and the integrator channel
    equal, the step ends (here the last row) bit for bit.  Outputs inside a step are
    the collocation polynomial, which the Python driver evaluates by BLAS products and
    the loop term by term: equal to the last bits (observed at most 1.04e-16
    relative to 1 + max|y|, on the GGL case; bound 1e-13)."""
    monkeypatch.setitem(CASES, case, RADAU_CASES[case])
    a, b = _runs(examples, case, "radau")
    _assert_same_steps(a, b)
    for ch in ("q", "qd"):
        x, y = np.asarray(a[ch]), np.asarray(b[ch])
        assert np.array_equal(x[-1], y[-1]), ch
        # observed <= 1.04e-16 relative; bound 1e-13
        assert np.abs(x - y).max() <= 1e-13 * (1.0 + np.abs(y).max()), ch


def test_sdirk_compiled_loop_runs_no_python_stage(examples, monkeypatch):
    """The compiled path is taken: SDIRK4's Python stages (``_stages``) are never
    called on the compiled loop (once per attempt on the Python loop), and the loop
    function ``run_sdirk`` is."""
    from mbcore._ext import _steploop as ms
    from mbplugins.integrators.sdirk import SDIRK4
    calls = {"stages": 0, "loop": 0}

    def stages(self, *a, _f=SDIRK4._stages):
        calls["stages"] += 1
        return _f(self, *a)

    def loop(*a, _f=ms.run_sdirk, **kw):
        calls["loop"] += 1
        return _f(*a, **kw)
    monkeypatch.setattr(ms, "run_sdirk", loop)
    monkeypatch.setattr(SDIRK4, "_stages", stages)
    seen = {}
    for mode in ("auto", "python"):
        calls.update(stages=0, loop=0)
        r = mbcore.run(Model.from_file(examples / "platform.yaml"),
                       settings={"integrator": "sdirk", "t_end": 0.2, "output_step": 0.05,
                                 "rtol": 1e-6, "atol": 1e-8, "loop": mode})
        seen[mode] = (r.stats["loop"], dict(calls), r.stats["integrator_nsteps"])
    assert seen["auto"][:2] == ("compiled", {"stages": 0, "loop": 1})
    assert seen["python"][0] == "python" and seen["python"][1]["loop"] == 0
    assert seen["python"][1]["stages"] >= seen["python"][2] > 0


def test_compiled_loop_kind_and_dispatch(examples):
    """``SDIRK4.compiled_loop_kind()`` is 'sdirk', ``Radau5``'s 'radau'; the loops take
    the ODE form and the DAE forms (a Jacobian call-back); a subclass that changes the
    step or the method data keeps the Python driver."""
    from mbcore.integrate.fastloop import compiled_loop_for
    from mbcore.plugins import registry
    from mbplugins.integrators.radau import Radau5
    from mbplugins.integrators.sdirk import SDIRK4

    class MyStep(SDIRK4):
        name = "sdirk_mine"

        def _step_impl(self):
            return super()._step_impl()

    class MyTableau(SDIRK4):
        name = "sdirk_tableau"
        C = SDIRK4.C.copy()

    class MyRadau(Radau5):
        name = "radau_mine"

        def _collocation(self, *a):
            return super()._collocation(*a)

    assert SDIRK4.compiled_loop_kind() == "sdirk" and Radau5.compiled_loop_kind() == "radau"
    assert MyStep.compiled_loop_kind() is None and MyTableau.compiled_loop_kind() is None
    assert MyRadau.compiled_loop_kind() is None
    m = Model.from_file(examples / "fourbar_dap.yaml")
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    assert compiled_loop_for(SDIRK4, form) == "sdirk"
    assert compiled_loop_for(Radau5, form, jac=lambda t, y: None) == "radau"
    assert compiled_loop_for(MyRadau, form) is None
    assert compiled_loop_for(SDIRK4, form, post_step=lambda t, y: None) is None
    assert compiled_loop_for(MyStep, form) is None


@pytest.mark.parametrize("integrator, formulation", [
    ("sdirk", "di"), ("sdirk", "ggl"), ("radau", "di"), ("radau", "ggl"),
    ("radau", "stiff")])
def test_checkpointed_run_resumes_bit_identically(tmp_path, examples, integrator,
                                                  formulation):
    """A run with checkpoints stays on the compiled loop (the step record names the
    loop and holds its state at the step's start: sdirk's y', step size and Newton
    Jacobian with the h of its LU; radau's f, Jacobian, controller state and last
    collocation increments), and a resume from a checkpoint inside a step that spans
    several outputs writes the uninterrupted run's file bit for bit."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings(integrator, formulation=formulation))
    assert ck.step["loop"] == integrator
    h = ck.step["history"]
    assert h["kind"] == integrator and h["t"] == ck.step["t"] and h["h_abs"] > 0
    n = np.asarray(h["yp" if integrator == "sdirk" else "f"]).size
    assert h["J"] is not None and np.asarray(h["J"]).size == n * n
    if integrator == "radau":
        assert np.asarray(h["Z"]).shape == (3, n) and h["err_old"] is not None


@pytest.mark.parametrize("integrator", ["sdirk", "radau"])
@pytest.mark.parametrize("formulation", ["di", "ggl"])
def test_loop_hands_a_failing_run_to_the_python_driver(examples, monkeypatch, formulation,
                                                       integrator):
    """A torque sqrt(0.3 - t) cannot be evaluated after t = 0.3: the compiled loop
    stops at the failing evaluation (code 2, the last accepted step before 0.3) and
    the Python driver continues from there and raises the named error, as the
    Python loop does (the ODE and the GGL form)."""
    from mbcore._ext import _steploop as ms
    from mbcore.elements.functions import FunctionDomainError
    real, codes = getattr(ms, f"run_{integrator}"), []
    monkeypatch.setattr(ms, f"run_{integrator}",
                        lambda *a, **kw: codes.append(real(*a, **kw)) or codes[-1])
    m = Model.from_file(examples / "fourbar_dap.yaml")
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    t_fail = {}
    for loop in ("auto", "python"):
        with pytest.raises(FunctionDomainError, match="sqrt") as exc:
            mbcore.run(m, settings={"formulation": formulation, "t_end": 1.0,
                                    "output_step": 0.05, "rtol": 1e-8, "atol": 1e-10,
                                    "integrator": integrator, "loop": loop})
        t_fail[loop] = exc.value.t
    assert len(codes) == 1
    code, t_handover = codes[0][:2]
    assert code == 2 and 0.25 < t_handover < 0.3 < t_fail["auto"] < 0.31
    assert 0.3 < t_fail["python"] < 0.31


def test_run_sdirk_refuses_bad_arguments_by_name(examples):
    """The loop's own argument checks (docs/reliability.md "Kernel boundaries"): a
    derivative of the wrong size, a tableau of the wrong shape, a non-positive step."""
    from mbcore._ext import _steploop as ms
    from mbplugins.integrators.sdirk import SDIRK4
    m = Model.from_file(examples / "fourbar_dap.yaml")
    from mbcore.plugins import registry
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    crhs = form.compiled
    y0 = np.zeros(form.size + 1)
    good = dict(yp0=np.zeros(y0.size), h_abs=1e-3, A=np.ascontiguousarray(SDIRK4.A),
                C=np.ascontiguousarray(SDIRK4.C),
                bdiff=np.ascontiguousarray(SDIRK4.B - SDIRK4.B_HAT))

    def call(**kw):
        a = {**good, **kw}
        return ms.run_sdirk(crhs, 0.0, 1.0, y0, a["yp0"], a["h_abs"], 7, 0.03, 1e-6, 1e-8,
                            np.inf, a["A"], a["C"], a["bdiff"], 0.25, 0.2, 5.0, 1.2,
                            np.array([1.0]), 0, None, np.zeros(5), ms.new_counters())
    for kw, word in (({"yp0": np.zeros(3)}, "yp0"), ({"A": np.eye(4)}, "A"),
                     ({"h_abs": 0.0}, "h_abs"), ({"C": np.zeros(4)}, "C")):
        with pytest.raises(ValueError, match=f"run_sdirk: {word}"):
            call(**kw)


def test_run_radau_refuses_bad_arguments_by_name(examples):
    """run_radau's own checks: a start state whose f or J has the wrong size, a
    transformation of the wrong shape, a step that is not positive."""
    from mbcore._ext import _steploop as ms
    from mbcore.plugins import registry
    from mbplugins.integrators.radau import Radau5
    m = Model.from_file(examples / "fourbar_dap.yaml")
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    n = form.size + 1
    s0 = {"f": np.zeros(n), "J": np.zeros((n, n)), "jac_current": True, "h_abs": 1e-3,
          "h_abs_old": None, "err_old": None, "Z": None, "h_last": 0.0,
          "rejected_first": True, "maxiter": 7, "newton_tol": 0.03, "rtol": 1e-6,
          "atol": 1e-8, "max_step": np.inf, "mass": None, "h_power": None}

    def call(T=Radau5.T, **kw):
        return ms.run_radau(form.compiled, 0.0, 1.0, np.zeros(n), {**s0, **kw},
                            np.ascontiguousarray(T), np.ascontiguousarray(Radau5.TI),
                            np.ascontiguousarray(Radau5.TI[1] + 1j * Radau5.TI[2]),
                            np.ascontiguousarray(Radau5.P), np.ascontiguousarray(Radau5.C),
                            np.ascontiguousarray(Radau5.E), float(Radau5.GAMMA),
                            complex(Radau5.MU), 0.2, 10.0, 1.2, np.array([1.0]), 0, None,
                            np.zeros(5), ms.new_counters())
    for kw, word in (({"f": np.zeros(3)}, "f"), ({"J": np.zeros((3, 3))}, "J"),
                     ({"T": np.eye(4)}, "T"), ({"h_abs": 0.0}, "h_abs")):
        with pytest.raises(ValueError, match=f"run_radau: {word}"):
            call(**kw)
