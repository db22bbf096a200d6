"""The step budget of the dynamic analysis (``settings.max_steps``, issue 18): at most
that many integrator steps between two outputs, as CVODE's ``mxstep``.  A run that
needs more ends with a StepBudgetError naming the time, on the compiled loops
(run_rk, run_abm, run_bdf, run_theta), on the Python driver and in a Simulation --
never a run of astronomically many steps (the fuzz campaign's former hangs)."""
from __future__ import annotations


import numpy as np
import pytest

import mbcore
from mbcore import Model, Result
from mbcore.errors import ModelError
from mbcore.integrate import StepBudgetError, integrate
from mbcore.integrate.base import IntegrationError


@pytest.fixture
def fourbar(examples):
    return Model.from_file(examples / "fourbar_dap.yaml")


def _run(model, **settings):
    s = dict(t_end=0.05, output_step=0.01)
    s.update(settings)
    return mbcore.run(model, analysis="dynamic", settings=s)


LOOPS = ["auto", "python"]


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("integrator", ["rk4", "implicit_euler", "trapezoid"])
def test_fixed_steps_fail_exactly_after_the_budget(fourbar, integrator, loop):
    """10 steps of 0.001 per output interval of 0.01: a budget of 10 passes, 9 stops
    at t = 0.009 (the 9th step end), on both loops."""
    res = _run(fourbar, integrator=integrator, step=0.001, max_steps=10, loop=loop)
    assert res.n_rows == 6 and res.stats["loop"] == ("compiled" if loop == "auto"
                                                      else "python")
    with pytest.raises(StepBudgetError, match=r"t = 0\.009: 9 steps since t = 0 without "
                       r"reaching the next output at t = 0\.01") as exc:
        _run(fourbar, integrator=integrator, step=0.001, max_steps=9, loop=loop)
    assert exc.value.t == pytest.approx(0.009, rel=1e-12, abs=0)
    assert "settings.max_steps" in str(exc.value)


@pytest.mark.parametrize("integrator", ["dopri5", "dop853", "abm", "bdf"])
def test_adaptive_methods_fail_at_the_same_time_on_both_loops(fourbar, integrator):
    """The compiled loops take the Python driver's steps: the budget runs out at the
    same step on both (at the same time to the rounding differences of the step
    sizes)."""
    full = _run(fourbar, integrator=integrator, rtol=1e-3, atol=1e-5, t_end=0.5,
                output_step=0.5, max_steps=0)
    steps = int(full.series("integrator")[-1, 2])
    assert steps >= 8
    budget = steps // 2
    times = {}
    for loop in LOOPS:
        with pytest.raises(StepBudgetError, match=f"{budget} steps since t = 0 ") as exc:
            _run(fourbar, integrator=integrator, rtol=1e-3, atol=1e-5, t_end=0.5,
                 output_step=0.5, max_steps=budget, loop=loop)
        times[loop] = exc.value.t
    assert 0 < times["auto"] < 0.5
    # the same steps; their sizes equal up to the rounding of the error estimate (a
    # sum with cancellation, in C and by BLAS: dop853's differs by 2.5e-8 relative);
    # one step more or less moves the time by h / t ~ 1e-2
    assert times["auto"] == pytest.approx(times["python"], rel=1e-5)
    # the full budget passes
    ok = _run(fourbar, integrator=integrator, rtol=1e-3, atol=1e-5, t_end=0.5,
              output_step=0.5, max_steps=steps)
    assert ok.n_rows == 2


def test_the_budget_counts_from_the_last_output(fourbar):
    """50 steps in all, 10 per interval: a budget of 10 passes although the run takes
    more steps than that."""
    res = _run(fourbar, integrator="rk4", step=0.001, max_steps=10)
    assert res.series("integrator")[-1, 2] == 50


def test_a_failed_run_keeps_its_rows_and_says_why(fourbar, tmp_path):
    out = tmp_path / "b.h5"
    with pytest.raises(StepBudgetError):
        mbcore.run(fourbar, analysis="dynamic", output=out,
                   settings=dict(t_end=0.05, output_step=0.01, integrator="rk4",
                                 step=0.0001, max_steps=50))
    with Result(out) as r:
        assert r.status == "failed"
        assert "StepBudgetError" in r.reason and "t = 0.005" in r.reason
        assert len(r) == 1 and r.t[0] == 0.0        # the row at t_start


def test_runaway_models_stop_with_the_default_budget(examples):
    """A fuzz case that ran into the wall-clock limit before the budget existed: a
    torque-free body spinning at 10^6 rad/s with tight tolerances (10^8 steps per
    output)."""
    m = Model.from_file(examples / "spatial_torque_free.yaml")
    assert m.settings.get("max_steps") is None          # the default applies
    with pytest.raises(StepBudgetError, match="100000 steps since t = 0 ") as exc:
        mbcore.run(_spin(m), analysis="dynamic", settings=dict(t_end=0.1))
    assert 0 < exc.value.t < 0.05


def _spin(model):
    d = model.to_dict()
    d["bodies"][0].pop("angular_velocity", None)
    d["bodies"][0]["angular_velocity_body"] = [0.1, 1e6, 0.0]
    return Model.from_dict(d)


@pytest.mark.parametrize("value", [-1, 1.5, "many", True, float("inf")])
def test_bad_budgets_name_the_key(fourbar, value):
    with pytest.raises(ModelError, match=r"settings\.max_steps"):
        _run(fourbar, max_steps=value)


def test_zero_means_no_budget_and_whole_floats_are_accepted(fourbar):
    a = _run(fourbar, integrator="rk4", step=0.001, max_steps=0)
    b = _run(fourbar, integrator="rk4", step=0.001, max_steps=1.0e3)
    assert np.array_equal(a.series("q"), b.series("q"))


def test_driver_budget_between_outputs():
    """``integrate(..., max_steps_per_output=N)``: the Python driver's budget."""
    def osc(t, y):
        return np.array([y[1], -y[0]])
    # (outputs at 0.1 k fall a rounding beyond or before grid points 0.01 i: at most
    # 11 steps per interval)
    res = integrate("rk4", osc, (0, 1), [1.0, 0.0], step=0.01, t_out=np.linspace(0, 1, 11),
                    max_steps_per_output=11)
    assert res.status == 0 and res.t.size == 11
    with pytest.raises(StepBudgetError) as exc:
        integrate("rk4", osc, (0, 1), [1.0, 0.0], step=0.01, t_out=[0.0, 0.5, 1.0],
                  max_steps_per_output=10)
    assert exc.value.t == pytest.approx(0.1) and isinstance(exc.value, IntegrationError)
    with pytest.raises(Exception, match="max_steps_per_output"):
        integrate("rk4", osc, (0, 1), [1.0, 0.0], step=0.01, max_steps_per_output=-2)


@pytest.mark.parametrize("integrator", ["rk4", "dopri5", "bdf"])
def test_simulation_advance_to_has_the_budget(fourbar, integrator):
    sim = mbcore.Simulation(fourbar, dict(integrator=integrator, step=0.001, max_steps=200,
                                          rtol=1e-10, atol=1e-12))
    sim.advance_to(0.01)                               # within the budget
    with pytest.raises(StepBudgetError, match=r"200 steps since t = 0\.01") as exc:
        sim.advance_to(100.0)
    assert 0.01 < exc.value.t < 100.0
    # the simulation is at the last accepted step, on the trajectory, and goes on
    t_stop = exc.value.t
    assert sim.t == t_stop
    ref = mbcore.Simulation(fourbar, dict(integrator=integrator, step=0.001,
                                          rtol=1e-10, atol=1e-12))
    ref.advance_to(t_stop)
    assert sim["q/crank.phi"] == pytest.approx(ref["q/crank.phi"], abs=1e-8)
    sim.advance_to(t_stop + 0.01)
    ref.advance_to(t_stop + 0.01)
    assert sim["q/crank.phi"] == pytest.approx(ref["q/crank.phi"], abs=1e-8)
