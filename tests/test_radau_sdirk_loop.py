"""``sdirk`` on the compiled loop (``mbcore._ext._steploop.run_sdirk``): the 5-stage,
order-4, L-stable SDIRK of Hairer & Wanner (1996), §IV.6, Table 6.5 with the Python
class's simplified Newton iteration, Jacobian and LU reuse, error estimate and step
controller.  The Python driver (``loop: python``) is the reference: the same steps,
Jacobians, LUs and evaluations on a planar and a spatial model and on the GGL DAE
form (the mass matrix and the analysis' DAE Jacobian call-back); checkpoints resume
exactly; a failing evaluation hands the run to the Python driver."""
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


def _runs(examples, case, **extra):
    name, formulation = CASES[case]
    st = {"integrator": "sdirk", "t_end": 1.0, "output_step": 0.05, "rtol": 1e-6,
          "atol": 1e-8, **extra}
    if formulation:
        st["formulation"] = formulation
    return [mbcore.run(Model.from_file(examples / name), settings={**st, "loop": loop})
            for loop in ("auto", "python")]


@pytest.mark.parametrize("case", sorted(CASES))
def test_sdirk_compiled_loop_takes_the_python_drivers_steps_bit_for_bit(examples, case):
    """The same stages, Newton iterations, Jacobians (forward differences or the
    semi-analytic DI/CS Jacobian of ``c_jac``; the GGL form's call-back), LU
    factorisations, error estimates and step sizes: every count, the integrator
    channel (step, order, steps, rejections, evaluations at every output) and every
    output equal bit for bit (the same formulas and BLAS/LAPACK calls in one
    process; the dense output is the same cubic Hermite polynomial)."""
    a, b = _runs(examples, case)
    assert [a.stats["loop"], b.stats["loop"]] == ["compiled", "python"]
    assert a.status == b.status == "finished"
    for k in COUNTS:
        assert a.stats[f"integrator_{k}"] == b.stats[f"integrator_{k}"], k
    assert a.stats["integrator_nlu"] > 0 and a.stats["integrator_nsteps"] > 10
    assert np.array_equal(np.asarray(a["integrator"]), np.asarray(b["integrator"]))
    for ch in ("q", "qd", "qdd"):
        assert np.array_equal(np.asarray(a[ch]), np.asarray(b[ch])), ch


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


def test_sdirk_compiled_loop_kind_and_dispatch(examples):
    """``SDIRK4.compiled_loop_kind()`` is 'sdirk' and the loop takes the ODE form and
    the GGL DAE form (its Jacobian call-back); a subclass that changes the step or the
    tableau keeps the Python driver."""
    from mbcore.integrate.fastloop import compiled_loop_for
    from mbcore.plugins import registry
    from mbplugins.integrators.sdirk import SDIRK4

    class MyStep(SDIRK4):
        name = "sdirk_mine"

        def _step_impl(self):
            return super()._step_impl()

    class MyTableau(SDIRK4):
        name = "sdirk_tableau"
        C = SDIRK4.C.copy()

    assert SDIRK4.compiled_loop_kind() == "sdirk"
    assert MyStep.compiled_loop_kind() is None and MyTableau.compiled_loop_kind() is None
    m = Model.from_file(examples / "fourbar_dap.yaml")
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    assert compiled_loop_for(SDIRK4, form) == "sdirk"
    assert compiled_loop_for(SDIRK4, form, post_step=lambda t, y: None) is None
    assert compiled_loop_for(MyStep, form) is None


def test_sdirk_checkpointed_run_resumes_bit_identically(tmp_path, examples):
    """A run with checkpoints stays on the compiled loop (the step record names the
    loop 'sdirk' and holds y' at the step's start, its step size and the Newton
    Jacobian with the h of its LU), and a resume from a checkpoint inside a step that
    spans several outputs writes the uninterrupted run's file bit for bit."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    ck = _check_exact_resume(tmp_path, lambda: _model(examples), _settings("sdirk"))
    assert ck.step["loop"] == "sdirk"
    h = ck.step["history"]
    assert h["kind"] == "sdirk" and h["t"] == ck.step["t"] and h["h_abs"] > 0
    n = np.asarray(h["yp"]).size
    assert h["J"] is not None and np.asarray(h["J"]).size == n * n and h["lu_h"] > 0


def test_sdirk_ggl_checkpointed_run_resumes_bit_identically(tmp_path, examples):
    """The same on the GGL DAE form (mass matrix, the DAE Jacobian call-back)."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings("sdirk", formulation="ggl"))
    assert ck.step["loop"] == "sdirk"


@pytest.mark.parametrize("formulation", ["di", "ggl"])
def test_sdirk_loop_hands_a_failing_run_to_the_python_driver(examples, monkeypatch,
                                                             formulation):
    """A torque sqrt(0.3 - t) cannot be evaluated after t = 0.3: the compiled loop
    stops at the failing evaluation (code 2, the last accepted step before 0.3) and
    the Python driver continues from there and raises the named error, as the
    Python loop does (the ODE and the GGL form)."""
    from mbcore._ext import _steploop as ms
    from mbcore.elements.functions import FunctionDomainError
    real, codes = ms.run_sdirk, []
    monkeypatch.setattr(ms, "run_sdirk",
                        lambda *a, **kw: codes.append(real(*a, **kw)) or codes[-1])
    m = Model.from_file(examples / "fourbar_dap.yaml")
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    t_fail = {}
    for loop in ("auto", "python"):
        with pytest.raises(FunctionDomainError, match="sqrt") as exc:
            mbcore.run(m, settings={"formulation": formulation, "t_end": 1.0,
                                    "output_step": 0.05, "rtol": 1e-8, "atol": 1e-10,
                                    "integrator": "sdirk", "loop": loop})
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
