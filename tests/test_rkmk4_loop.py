"""The Lie-group integrator ``rkmk4`` on the compiled step loop.

``rkmk4`` (:class:`mbplugins.integrators.liegroup.RKMK4`, Munthe-Kaas (1999); Hairer,
Lubich & Wanner (2006), §IV.8.2) with ``di_omega`` runs on
``mbcore._ext._steploop.run_lie`` (ext/_step_lie.pxi, loop kind 'lie'): the four
stages in the Lie algebra, the quaternion exponential and the commutator terms with the
same formulas in the same order as the NumPy driver, so the trajectories are identical
(bitwise: one process, the same arithmetic, libm's sin/cos being NumPy's here),
outputs between step ends included (the exponential of the Hermite interpolant in the
algebra), and so are the evaluation counts.  Checked on the heavy top
(examples/spatial_heavy_top.yaml), the heavy top of Brüls & Cardona (2010)
(benchmarks/accuracy_problems.py), a spatial mechanism with constraints
(examples/spatial_slider_crank_dynamic.yaml) and, without quaternions, a planar
four-bar on ``di``; a checkpoint resumes exactly on the compiled loop; a failing
evaluation hands the run over to the Python driver; a stop condition is located by
it.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available
from test_fixed_loops import _assert_identical, _pair, _rezero_work
from loop_checks import (assert_checkpointed_run_equals_python,  # noqa: E402
                         assert_failing_evaluation_handed_over, spy_loop)

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

EX = Path(__file__).resolve().parent.parent / "examples"


def _bc_top():
    sys.path.insert(0, str(EX.parent / "benchmarks"))
    from accuracy_problems import heavy_top_model
    return heavy_top_model()


def _spy(monkeypatch):
    """Record the return codes and times of ``run_lie``."""
    return spy_loop(monkeypatch, "run_lie")


CASES = {
    # outputs every 0.0125 s between step ends of 7e-4 (dense output), the last step
    # shortened onto t_end
    "disc": (lambda: Model.from_file(EX / "spatial_heavy_top.yaml"),
             {"formulation": "di_omega", "t_end": 0.3, "step": 7e-4,
              "output_step": 0.0125}, 429),
    "bruls_cardona": (_bc_top, {"analysis": "dynamic", "formulation": "di_omega",
                                "t_end": 0.3, "step": 7e-4, "output_step": 0.0125}, 429),
    "slider_crank": (lambda: Model.from_file(EX / "spatial_slider_crank_dynamic.yaml"),
                     {"formulation": "di_omega", "t_end": 0.3, "step": 7e-4,
                      "output_step": 0.0125}, 429),
    "fourbar_di": (lambda: Model.from_file(EX / "fourbar_dap.yaml"),
                   {"formulation": "di", "t_end": 0.3, "step": 7e-4,
                    "output_step": 0.0125}, 429),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_lie_loop_equals_the_python_driver(monkeypatch, case):
    """run_lie takes the Python driver's steps bit for bit (q, qd, qdd, counts)."""
    make, st, nsteps = CASES[case]
    calls = _spy(monkeypatch)
    a, b = _pair(make(), integrator="rkmk4", **st)
    assert calls and calls[0][0] == 0                  # the compiled path ran to t_end
    _assert_identical(a, b)
    assert a.stats["integrator_nsteps"] == nsteps
    assert a.stats["integrator_nfev"] == 4 * nsteps + 1
    if case in ("disc", "bruls_cardona"):             # unit quaternions by exp
        p = np.asarray(a["q"])[:, 3:7]
        # |p| - 1 at round-off, no normalisation (bound 429 steps x 4 eps = 3.8e-13;
        # observed 6.7e-16 on both tops)
        assert np.abs(np.linalg.norm(p, axis=1) - 1).max() < 429 * 4 * np.finfo(float).eps


def test_outputs_on_step_ends(monkeypatch):
    """Outputs on step ends (h = 2^-10, outputs every 2^-6: the end states
    themselves) on the heavy top."""
    make, st, _ = CASES["disc"]
    calls = _spy(monkeypatch)
    a, b = _pair(make(), integrator="rkmk4", formulation="di_omega", t_end=0.25,
                 step=2.0 ** -10, output_step=2.0 ** -6)
    _assert_identical(a, b)
    assert calls and calls[0][0] == 0


@pytest.mark.parametrize("frame", ["body", "space"])
def test_the_loop_reads_the_layout_and_restarts_as_the_python_driver(frame):
    """run_compiled against the Python driver (``integrate``) on the compiled
    right-hand side of di_omega (the heavy top), the integrator's layout given
    explicitly: the frame is read from the Python object ('space' reads the same
    derivative as ṗ = ½ (0, ω) ⊗ p, equally valid: another method of order 4, the
    same on both loops), and a
    change of coordinates (``on_commit``) restarts the grid in both: the same commits,
    steps and evaluations, identical outputs."""
    from mbcore.integrate import integrate
    from mbcore.integrate.fastloop import compiled_loop_for, run_compiled
    from mbcore.plugins import registry
    from mbplugins.integrators.liegroup import QuaternionLayout
    sysm = Model.from_file(EX / "spatial_heavy_top.yaml").compile(kernels="compiled")
    form = registry().get("formulation", "di_omega")(sysm, {})
    st0 = sysm.initial_state(0.0)
    y0 = np.concatenate([form.pack(st0.q, st0.qd), [0.0]])
    icls = registry().get("integrator", "rkmk4")
    kind = compiled_loop_for(icls, form)
    assert kind == "lie"
    buf = np.zeros(y0.size)
    t_out = np.linspace(0.0, 0.2, 21)
    opts = {"step": 7e-4, "lie_group": QuaternionLayout(form.p_idx, frame=frame)}
    logs, outs = ([], []), []

    def fun(t, y):                          # the compiled right-hand side, from Python
        assert form.compiled.eval(t, y, buf) == 0
        return buf

    def no_handover(t, y, o, why=None):
        raise AssertionError(f"handed to the Python driver at t = {t}")

    ref = integrate(icls, fun, (0.0, 0.2), y0, t_out=t_out,
                    on_commit=_rezero_work(0.05, logs[0]), **opts)
    res = run_compiled(kind, icls, form, 0.0, 0.2, y0, t_out, dict(opts),
                       lambda t, y: outs.append(np.array(y)), np.zeros(5), no_handover,
                       on_commit=_rezero_work(0.05, logs[1]))
    assert res.status == 0 and len(logs[1]) == 3 and logs[1] == logs[0]
    np.testing.assert_array_equal(np.array(outs), ref.y)
    np.testing.assert_array_equal(res.y_final, ref.y_final)
    for k in ("nsteps", "nfev"):
        assert getattr(res.stats, k) == getattr(ref.stats, k), k
    if frame == "space":        # another method: not the body-frame trajectory
        body = integrate(icls, fun, (0.0, 0.2), y0, t_out=t_out, step=7e-4,
                         on_commit=_rezero_work(0.05, []),
                         lie_group=QuaternionLayout(form.p_idx))
        # the two order-4 methods differ by their local errors (observed 1.0e-7)
        assert np.abs(body.y[:, 3:7] - ref.y[:, 3:7]).max() > 1e-9


def test_checkpointed_run_stays_compiled_and_resumes_bit_identically(tmp_path):
    """A run written with checkpoints stays on run_lie (its checkpoints hold the loop's
    state at the start of the step with outputs: t, y, f, the grid), and a resume
    from a checkpoint inside a step that spans several outputs writes the
    uninterrupted run's file bit for bit."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_resume_exact import _check_exact_resume
    ck = _check_exact_resume(
        tmp_path, lambda: Model.from_file(EX / "spatial_heavy_top.yaml"),
        {"formulation": "di_omega", "integrator": "rkmk4", "step": 0.0074,
         "output_step": 0.002, "t_end": 0.24})
    assert ck.step["loop"] == "lie"
    h = ck.step["history"]
    assert h["kind"] == "lie" and h["h"] == 0.0074 and h["t"] == ck.step["t"]
    assert np.asarray(h["hist"]).shape[0] == 1


def test_checkpointed_run_equals_the_python_driver(tmp_path):
    """The compiled loop writing checkpoints takes the Python driver's steps."""
    m = Model.from_file(EX / "spatial_slider_crank_dynamic.yaml")
    st = {"analysis": "dynamic", "formulation": "di_omega", "integrator": "rkmk4",
          "step": 0.0051, "t_end": 0.24, "output_step": 0.002}
    assert_checkpointed_run_equals_python(m, st, tmp_path / "ck.h5", "lie")


def test_a_failing_evaluation_hands_over_to_the_python_driver(monkeypatch):
    """sqrt(0.3 - t) fails after t = 0.3: run_lie stops at the last accepted step
    (code 2) and the Python driver raises the named error in the next step, as the
    Python loop does."""
    calls = _spy(monkeypatch)
    m = Model.from_file(EX / "fourbar_dap.yaml")
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "integrator": "rkmk4",
          "step": 1.3e-3}
    assert_failing_evaluation_handed_over(m, st, calls)


def test_a_stop_condition_is_located_by_the_python_driver(monkeypatch):
    """The step in which the condition is met is handed to the Python driver (code 4),
    which redoes it from its start (a new grid there) and locates the crossing: the
    outputs before it are the compiled steps' (identical), the stop time agrees with
    the Python run's to the step's local error (observed 0 s: the handed-over step
    is the Python run's own step; bound 1e-9 s)."""
    calls = _spy(monkeypatch)
    m = Model.from_file(EX / "fourbar_dap.yaml")
    name0 = m.bodies[0].name
    a, b = _pair(m, integrator="rkmk4", step=1e-3, t_end=3.0, output_step=0.05,
                 stop_when=f"{name0}.phi < 0.5")
    assert calls[-1][0] == 4
    ta = [e for e in a.events if e[1] == "stop"][0][0]
    tb = [e for e in b.events if e[1] == "stop"][0][0]
    assert 0.0 < ta < 3.0 and abs(ta - tb) < 1e-9
    assert len(a) == len(b)
    np.testing.assert_array_equal(np.asarray(a["q"])[:-1], np.asarray(b["q"])[:-1])


def test_a_subclass_that_changes_the_step_keeps_the_python_driver():
    from mbcore.integrate.fastloop import compiled_loop_for
    from mbcore.plugins import registry
    from mbplugins.integrators.liegroup import RKMK4

    class NoCommutator(RKMK4):
        def _bracket(self, a, b):
            return 0.0 * a

    assert RKMK4.compiled_loop_kind() == "lie"
    assert NoCommutator.compiled_loop_kind() is None
    sysm = Model.from_file(EX / "spatial_heavy_top.yaml").compile(kernels="compiled")
    form = registry().get("formulation", "di_omega")(sysm, {})
    assert compiled_loop_for(RKMK4, form) == "lie"
    assert compiled_loop_for(NoCommutator, form) is None


def test_run_lie_refuses_bad_arguments():
    """Quaternion indices out of range, repeated or not in fours, a start history
    of the wrong shape: ValueError naming the argument, before any step."""
    from mbcore._ext import _steploop as ms
    from mbcore.plugins import registry
    sysm = Model.from_file(EX / "spatial_heavy_top.yaml").compile(kernels="compiled")
    form = registry().get("formulation", "di_omega")(sysm, {})
    crhs = form.compiled
    st0 = sysm.initial_state(0.0)
    y0 = np.concatenate([form.pack(st0.q, st0.qd), [0.0]])
    f0 = np.zeros(y0.size)
    assert crhs.eval(0.0, y0, f0) == 0
    start = {"hist": f0[None, :], "t_start": 0.0, "i": 0, "h": 1e-3}

    def call(q, start=start):
        return ms.run_lie(crhs, 0.0, 0.01, y0, start, np.asarray(q, dtype=np.intp), True,
                          np.array([0.01]), 0, lambda t, y: None, np.zeros(5),
                          ms.new_counters())
    assert call([3, 4, 5, 6])[0] == 0
    for bad, msg in (([3, 4, 5], "multiple of 4"), ([3, 4, 5, 99], "quaternions"),
                     ([3, 4, 5, 5], "repeated")):
        with pytest.raises(ValueError, match=msg):
            call(bad)
    with pytest.raises(ValueError, match="hist"):
        call([3, 4, 5, 6], {**start, "hist": np.zeros((2, y0.size))})
    with pytest.raises(ValueError, match="h_step"):
        call([3, 4, 5, 6], {**start, "h": -1.0})


def test_the_step_budget_on_the_lie_loop():
    """max_steps between outputs: the same StepBudgetError on both loops."""
    from mbcore.integrate.base import StepBudgetError
    make, _, _ = CASES["disc"]
    st = {"formulation": "di_omega", "integrator": "rkmk4", "step": 1e-4, "t_end": 0.2,
          "output_step": 0.05, "max_steps": 100}
    for loop in ("auto", "python"):
        with pytest.raises(StepBudgetError, match="100"):
            mbcore.run(make(), settings={**st, "loop": loop})
