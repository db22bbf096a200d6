"""The fixed-grid textbook methods on the compiled step loop.

``rk2`` (a per-run tableau) runs on the Runge–Kutta loop's 'fixed' stepper, ``ab``
(orders 1–4), ``abm4``, ``taylor2``, ``verlet`` (kick–drift–kick and
drift–kick–drift) and ``am`` (Adams–Moulton 1–4, the θ-methods' modified Newton
iteration) on ``mbcore._ext._steploop.run_fixedgrid`` (ext/_step_fixed.pxi).
Each takes the Python driver's steps with the same formulas in the same order, so
the trajectories are identical (bitwise: one process, the same arithmetic), outputs
between step ends included (the same cubic Hermite dense output), and so are the
evaluation counts.  Runs with checkpoints stay on run_fixedgrid, and a resume from a
checkpoint inside a step writes the uninterrupted run's file bit for bit.
"""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available
from loop_checks import (assert_checkpointed_run_equals_python,  # noqa: E402
                         assert_failing_evaluation_handed_over, spy_loop)

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

#: (integrator, options) of the run_fixedgrid loop
GRID_METHODS = [("ab", {"order": 1}), ("ab", {"order": 2}), ("ab", {"order": 3}),
                ("ab", {"order": 4}), ("abm4", {}), ("taylor2", {}), ("verlet", {}),
                ("verlet", {"form": "dkd"})]
IDS = [f"{n}-{'-'.join(map(str, o.values()))}" if o else n for n, o in GRID_METHODS]


def _pair(model, **settings):
    """The same run on the compiled loop (``loop: auto``) and the Python driver."""
    runs = [mbcore.run(model, settings={**settings, "loop": loop})
            for loop in ("auto", "python")]
    assert [r.stats["loop"] for r in runs] == ["compiled", "python"]
    return runs


def _assert_identical(a, b, channels=("q", "qd", "qdd")):
    """The states identical; the energy rows, formed from them by the compiled output
    rows (compiled loop) or NumPy (Python driver), to rounding (observed 1.8e-16
    relative; bound 1e-13)."""
    assert len(a) == len(b)
    np.testing.assert_array_equal(np.asarray(a.t), np.asarray(b.t))
    for ch in channels:
        np.testing.assert_array_equal(np.asarray(a[ch]), np.asarray(b[ch]), err_msg=ch)
    e = np.asarray(b["energy"])
    np.testing.assert_allclose(np.asarray(a["energy"]), e, rtol=1e-13, atol=0)
    for k in ("integrator_nfev", "integrator_nsteps"):
        assert a.stats[k] == b.stats[k], k


# ----------------------------------------------------------------------------------
# rk2: the instance's tableau on the 'fixed' Runge–Kutta loop
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("a", [0.5, 0.75, 1.0])
def test_rk2_runs_on_the_fixed_loop_with_its_own_tableau(examples, a):
    """Outputs on step ends (h = 2^-10, outputs every 2^-6): identical.  Outputs
    between step ends: the RK loop's Hermite basis is written in another form
    than the Python one, so they agree to rounding (observed 8.9e-16 on q; bound
    1e-13, > 100x)."""
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    st = {"formulation": "di", "integrator": "rk2", "t_end": 0.3,
          "integrator_options": {"a": a}}
    _assert_identical(*_pair(m, **st, step=2.0 ** -10, output_step=2.0 ** -6))
    c, p = _pair(m, **st, step=1e-3, output_step=0.0125)
    assert c.stats["integrator_nfev"] == p.stats["integrator_nfev"] == 601
    assert np.abs(np.asarray(c["q"]) - np.asarray(p["q"])).max() < 1e-13
    # a different a is a different method: the loop does use the instance's tableau
    other = mbcore.run(m, settings={**st, "step": 1e-3, "output_step": 0.0125,
                                    "integrator_options": {"a": a + 0.125}})
    assert np.abs(np.asarray(other["q"]) - np.asarray(c["q"])).max() > 1e-9


def test_a_per_run_tableau_of_a_third_party_class(examples):
    """instance_twin: the class's twin when the object keeps its class's tableau,
    the object's own when it differs, None (Python driver) when it is not an
    explicit tableau."""
    from mbcore.integrate.loop_result import LoopFallback
    from mbcore.integrate.rk import compiled_twin, instance_twin
    from mbplugins.integrators.classical import RK2Family, RK3, rk2_tableau

    def fun(t, y):
        return -y

    rk3 = RK3(fun, 0.0, np.ones(2), 1.0, step=0.1)
    twin = compiled_twin(RK3, "fixed")
    assert instance_twin(rk3, twin) is twin
    rk3.B = np.array([0.25, 0.5, 0.25])                 # the object's own tableau
    own = instance_twin(rk3, twin)
    assert own is not twin and np.array_equal(own.B, rk3.B) and own.order == 3
    rk2 = RK2Family(fun, 0.0, np.ones(2), 1.0, step=0.1, a=0.5)
    with pytest.raises(LoopFallback):                   # no tableau of the class
        compiled_twin(RK2Family, "fixed")
    own = instance_twin(rk2)
    A, B, C = rk2_tableau(0.5)
    assert np.array_equal(own.A, A) and np.array_equal(own.B, B) and own.order == 2
    rk2.A = np.array([[0.0, 1.0], [1.0, 0.0]])          # implicit: refused
    assert instance_twin(rk2) is None
    rk2.A, rk2.C = A, np.zeros(3)                        # C of the wrong size
    assert instance_twin(rk2) is None


def test_rk2_in_a_simulation_keeps_the_python_driver(examples):
    """``mbcore.Simulation``'s step-by-step compiled loop reads the class's tableau
    only: rk2 (TABLEAU_PER_RUN) runs there on the Python driver, with its own ``a``."""
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    out = []
    for loop, a in (("auto", 0.5), ("python", 0.5), ("auto", 0.75)):
        sim = mbcore.Simulation(m, settings={
            "formulation": "di", "integrator": "rk2", "step": 1e-3, "t_end": 0.3,
            "output_step": 0.0125, "integrator_options": {"a": a}, "loop": loop})
        sim.advance_to(0.2)
        assert sim.loop == "python"
        out.append(np.array(sim.outputs(sim.columns[1:5])))
    np.testing.assert_array_equal(out[0], out[1])
    assert np.abs(out[0] - out[2]).max() > 1e-9          # a = 0.5 is not the class's


# ----------------------------------------------------------------------------------
# ab, abm4, taylor2, verlet on run_fixedgrid
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("model", ["slider_crank_dynamic.yaml",
                                   "spatial_slider_crank_dynamic.yaml"])
@pytest.mark.parametrize("name, opts", GRID_METHODS, ids=IDS)
def test_compiled_fixed_grid_loop_equals_the_python_driver(examples, model, name, opts):
    """h = 7e-4 over 0.3 s: outputs every 0.0125 s fall between step ends (dense
    output) and the last step is shortened onto t_end (the Adams history restarts,
    RK4 starter); q, qd, qdd, energy and the evaluation counts are identical."""
    m = Model.from_file(examples / model)
    a, b = _pair(m, formulation="di", integrator=name, step=7e-4, t_end=0.3,
                 output_step=0.0125, integrator_options=opts)
    _assert_identical(a, b)
    assert a.stats["integrator_nsteps"] == 429


@pytest.mark.parametrize("name, opts", GRID_METHODS[3:], ids=IDS[3:])
def test_fixed_grid_loop_cs_and_outputs_on_step_ends(examples, name, opts):
    """cs (Baumgarte terms) on the four-bar, outputs on step ends (h = 2^-10,
    outputs every 2^-6: the end states themselves)."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    a, b = _pair(m, formulation="cs", integrator=name, step=2.0 ** -10, t_end=0.5,
                 output_step=2.0 ** -6, integrator_options=opts)
    _assert_identical(a, b)


@pytest.mark.parametrize("name, opts", [("ab", {"order": 3}), ("taylor2", {}),
                                        ("verlet", {"form": "dkd"})])
def test_stop_conditions_on_the_fixed_grid_loop(examples, name, opts):
    """The step where the condition is met is handed to the Python driver, which
    restarts the method at the step's start (a new grid; Adams with an RK4 step,
    drift–kick–drift with f there instead of the midpoint's acceleration) and
    locates the crossing: the stop time agrees with the Python run's to that
    step's local error (observed differences: ab3 7.1e-9 s, taylor2 0, dkd 3.2e-11
    s; bounds 1e-6, 1e-9, 1e-8 s), the outputs before it are the compiled steps'
    (observed identical; bound 1e-9)."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    name0 = m.bodies[0].name
    a, b = _pair(m, integrator=name, step=1e-3, t_end=3.0, output_step=0.05,
                 stop_when=f"{name0}.phi < 0.5", integrator_options=opts)
    ta = [e for e in a.events if e[1] == "stop"][0][0]
    tb = [e for e in b.events if e[1] == "stop"][0][0]
    bound = {"ab": 1e-6, "taylor2": 1e-9, "verlet": 1e-8}[name]
    assert 0.0 < ta < 3.0 and abs(ta - tb) < bound
    assert len(a) == len(b)
    np.testing.assert_allclose(np.asarray(a["q"]), np.asarray(b["q"]), rtol=0, atol=1e-9)


@pytest.mark.parametrize("name, opts", [("ab", {}), ("abm4", {}), ("taylor2", {}),
                                        ("verlet", {})])
def test_a_failing_evaluation_hands_over_to_the_python_driver(examples, monkeypatch,
                                                             name, opts):
    """sqrt(0.3 - t) fails after t = 0.3: the compiled loop stops at the last accepted
    step (code 2) and the Python driver raises the named error in the next step,
    as the Python loop does."""
    codes = spy_loop(monkeypatch, "run_fixedgrid")
    m = Model.from_file(examples / "fourbar_dap.yaml")
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "integrator": name,
          "step": 1.3e-3, "integrator_options": opts}
    # the error times within 1e-12 (a stage time of the same step; the Python driver
    # takes up its own grid at the hand-over: observed 0.0 for all four; the bound
    # is 2e4 ulp of 0.3)
    assert_failing_evaluation_handed_over(m, st, codes, t_tol=1e-12)


def test_the_step_budget_on_the_fixed_grid_loop(examples):
    """max_steps between outputs: the same StepBudgetError on both loops."""
    from mbcore.integrate.base import StepBudgetError
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    st = {"formulation": "di", "integrator": "abm4", "step": 1e-4, "t_end": 0.2,
          "output_step": 0.05, "max_steps": 100}
    errs = []
    for loop in ("auto", "python"):
        with pytest.raises(StepBudgetError) as e:
            mbcore.run(m, settings={**st, "loop": loop})
        errs.append(e.value)
    assert "100" in str(errs[0]) and "100" in str(errs[1])


#: every method of run_fixedgrid, am included
ALL_GRID = GRID_METHODS + [("am", {"order": k}) for k in (1, 2, 3, 4)]
ALL_IDS = IDS + [f"am-{k}" for k in (1, 2, 3, 4)]


@pytest.mark.parametrize("name, opts", ALL_GRID, ids=ALL_IDS)
def test_checkpointed_run_stays_compiled_and_resumes_bit_identically(tmp_path, examples,
                                                                      name, opts):
    """A run written with checkpoints stays on run_fixedgrid (its checkpoints hold the
    loop's state at the start of the step with outputs: t, y, f, the past
    derivatives, the grid, am's Jacobian and LU), and a resume from a checkpoint
    inside a step that spans several outputs (the file made to look killed there)
    writes the uninterrupted run's file bit for bit (every channel, the statistics
    included)."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    st = _settings(name, integrator_options=opts)
    ck = _check_exact_resume(tmp_path, lambda: _model(examples), st)
    assert ck.step["loop"] == "fixedgrid"
    h = ck.step["history"]
    assert h["kind"] == "fixedgrid" and h["h"] == st["step"] and h["t"] == ck.step["t"]
    rows = {"ab": opts.get("order", 4), "abm4": 3, "am": max(opts.get("order", 4) - 1, 1)}
    assert np.asarray(h["hist"]).shape[0] == rows.get(name, 1)     # past derivatives
    assert (h.get("J") is not None) == (name == "am")


@pytest.mark.parametrize("name, opts", [("ab", {}), ("am", {"order": 3}),
                                        ("verlet", {"form": "dkd"})])
def test_checkpointed_fixed_grid_run_with_a_stateful_formulation(tmp_path, examples,
                                                                 name, opts):
    """cp (the Newton warm start of its compiled right-hand side, kept at every step's
    start by ``c_save``): the resume redoes the step from the kept state, bit for
    bit."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings(name, formulation="cp", integrator_options=opts))
    assert ck.step["loop"] == "fixedgrid"


def test_checkpointed_fixed_grid_run_equals_the_python_driver(examples, tmp_path):
    """The compiled loop writing checkpoints takes the Python driver's steps: the file
    equals the Python loop's run (states bitwise)."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    for name, opts in (("ab", {}), ("verlet", {"form": "dkd"}), ("am", {"order": 3})):
        st = {"analysis": "dynamic", "integrator": name, "step": 0.0051, "t_end": 0.24,
              "output_step": 0.002, "integrator_options": opts}
        assert_checkpointed_run_equals_python(m, st, tmp_path / f"ck-{name}.h5",
                                              "fixedgrid")


def _rezero_work(every, log):
    """A change of coordinates at the first step end past every multiple of
    ``every``: the work integral W (the state's last entry) counted from there."""
    nxt = [every]

    def on_commit(t, y):
        if t < nxt[0]:
            return None
        while nxt[0] <= t:
            nxt[0] += every
        log.append(t)
        y_new = np.array(y)
        y_new[-1] = 0.0
        return y_new
    return on_commit


@pytest.mark.parametrize("name, opts", GRID_METHODS[2:] + [("am", {"order": 2}),
                                                           ("am", {"order": 4})],
                         ids=IDS[2:] + ["am-2", "am-4"])
def test_a_change_of_coordinates_restarts_the_method_as_the_python_driver(examples,
                                                                          name, opts):
    """``on_commit`` returning a new state (as cp's new partitions do) restarts the
    method there in both loops (``Integrator.restart``: a new grid, Adams from RK4
    steps again): the same commits, steps and evaluations, identical outputs."""
    from mbcore.integrate import integrate
    from mbcore.integrate.fastloop import compiled_loop_for, run_compiled
    from mbcore.plugins import registry
    m = Model.from_file(examples / "spatial_slider_crank_dynamic.yaml")
    sysm = m.compile(kernels="compiled")
    form = registry().get("formulation", "di")(sysm, {})
    st0 = sysm.initial_state(0.0)
    y0 = np.concatenate([st0.q, st0.qd, [0.0]])
    icls = registry().get("integrator", name)
    kind = compiled_loop_for(icls, form)
    assert kind == "fixedgrid"
    crhs = form.compiled
    buf = np.zeros(y0.size)

    def fun(t, y):
        assert crhs.eval(t, y, buf) == 0
        return buf

    t_out = np.linspace(0.0, 0.3, 31)
    opts = {"step": 7e-4, **opts}
    log_ref, log, outs = [], [], []
    ref = integrate(icls, fun, (0.0, 0.3), y0, t_out=t_out,
                    on_commit=_rezero_work(0.05, log_ref), **opts)

    def fallback(t, y, o, why=None):
        raise AssertionError(f"handed to the Python driver at t = {t}")

    res = run_compiled(kind, icls, form, 0.0, 0.3, y0, t_out, dict(opts),
                       lambda t, y: outs.append(np.array(y)), np.zeros(5), fallback,
                       on_commit=_rezero_work(0.05, log))
    assert res.status == 0 and len(log) == 5 and log == log_ref
    np.testing.assert_array_equal(np.array(outs), ref.y)
    np.testing.assert_array_equal(res.y_final, ref.y_final)
    for k in ("nsteps", "nfev", "norder_changes"):
        assert getattr(res.stats, k) == getattr(ref.stats, k), k
    plain = integrate(icls, fun, (0.0, 0.3), y0, t_out=t_out, **opts)
    assert np.abs(plain.y[:, :-1] - ref.y[:, :-1]).max() > 0.0   # the restarts count


def test_what_keeps_the_fixed_grid_methods_on_python(examples):
    """Subclasses that change the step, the starter, the difference step, the
    Newton iteration or the dense output keep the Python driver."""
    from mbcore.integrate.fastloop import compiled_loop_for
    from mbcore.plugins import registry
    from mbplugins.integrators.adams_moulton import AdamsMoulton
    from mbplugins.integrators.classical import (ABM4, AdamsBashforth, RK2Family, Taylor2,
                                                 Verlet)
    for cls in (AdamsBashforth, ABM4, Taylor2, Verlet):
        assert cls.compiled_loop_kind() == "fixedgrid"
    assert RK2Family.compiled_loop_kind() == "fixed"
    assert AdamsMoulton.compiled_loop_kind() == "fixedgrid"

    class MyNewton(AdamsMoulton):
        def _solve(self, *args):
            return super()._solve(*args)
    assert MyNewton.compiled_loop_kind() is None

    class MyStarter(AdamsBashforth):
        def _rk4(self, t, y, f, h):
            return super()._rk4(t, y, f, h)

    class MyDelta(Taylor2):
        @staticmethod
        def difference_step(t, y, f):
            return 1e-6

    class MyDKD(Verlet):
        def _step_dkd(self):
            return super()._step_dkd()

    class Plain(ABM4):                       # the same method under another name
        name = "abm4_plain"

    for cls in (MyStarter, MyDelta, MyDKD):
        assert cls.compiled_loop_kind() is None, cls
    assert Plain.compiled_loop_kind() == "fixedgrid"
    m = Model.from_file(examples / "fourbar_dap.yaml")
    form = registry().get("formulation", "di")(m.compile(kernels="compiled"), {})
    assert compiled_loop_for(Verlet, form) == "fixedgrid"
    assert compiled_loop_for(Verlet, form, post_step=lambda t, y: None) is None
    assert compiled_loop_for(MyDelta, form) is None


def test_run_fixedgrid_refuses_bad_arguments(examples):
    """The kernel boundary: unknown method, weights of the wrong size, positions
    out of range, a start history of the wrong shape, a checkpoint Jacobian for a
    method without one or of the wrong size, a short ``ystep`` (ValueError naming
    them)."""
    from mbcore._ext import _steploop as ms
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    form = __import__("mbcore.plugins", fromlist=["registry"]).registry().get(
        "formulation", "di")(m.compile(kernels="compiled"), {})
    sysm_state = m.compile(kernels="compiled").initial_state(0.0)
    y0, _ = form.initialize(sysm_state.q, sysm_state.qd, 0.0)
    y0 = np.append(y0, 0.0)
    crhs = form.compiled
    N = y0.size
    f0 = np.zeros(N)
    crhs.eval(0.0, y0, f0)
    s0 = {"hist": f0[None, :], "t_start": 0.0, "i": 0, "h": 1e-3}
    base = dict(order=1, beta=np.ones(1), corr=np.zeros(1), positions=0,
                t_out=np.array([0.01]), i_out=0, on_output=lambda t, y: None,
                stats=np.zeros(5), counters=ms.new_counters())

    def call(method="ab", start=s0, **kw):
        return ms.run_fixedgrid(crhs, 0.0, 0.01, y0, method, start, **{**base, **kw})
    assert call()[0] == 0
    assert call(method="am", beta=np.ones(2) / 2, corr=np.ones(1))[0] == 0
    for kw, msg in ((dict(method="rk9"), "method"), (dict(beta=np.ones(5)), "beta"),
                    (dict(method="abm4", beta=np.ones(3)), "corr"),
                    (dict(method="kdk", positions=N), "positions"),
                    (dict(start={**s0, "hist": np.zeros((2, N))}), "hist"),
                    (dict(start={**s0, "h": -1.0}), "h_step"),
                    (dict(start={**s0, "i": 50}), "grid point"),
                    (dict(method="am", beta=np.ones(3), corr=np.ones(1)), "pred"),
                    (dict(method="am", maxiter=0), "maxiter"),
                    (dict(J0=np.zeros(N * N)), "J0"),
                    (dict(method="am", beta=np.ones(2) / 2, corr=np.ones(1),
                          J0=np.zeros(N)), "J0"),
                    (dict(ystep=np.zeros(N + 1)), "ystep")):
        with pytest.raises(ValueError, match=msg):
            call(**kw)


# ----------------------------------------------------------------------------------
# am: Adams–Moulton 1–4 with the modified Newton iteration of the θ-methods
# ----------------------------------------------------------------------------------
@pytest.fixture(params=["analytic", "fd"])
def jacobian(request, monkeypatch):
    """The Newton Jacobian of both loops: the semi-analytic DI one of the compiled
    right-hand side (planar, compiled forces) or forward differences."""
    if request.param == "fd":
        import mbcore.solve.formulation as F
        monkeypatch.setattr(F, "_enable_jacobian", lambda system, crhs: False)
    return request.param


AM_COUNTS = ("integrator_nfev", "integrator_nsteps", "integrator_njev", "integrator_nlu",
             "integrator_nnewton_iter", "integrator_nnewton_failures",
             "integrator_nrejected")


@pytest.mark.parametrize("model", ["slider_crank_dynamic.yaml",
                                   "spatial_slider_crank_dynamic.yaml"])
@pytest.mark.parametrize("order", [1, 2, 3, 4])
@pytest.mark.parametrize("step", [7e-4, 5e-3])
def test_compiled_adams_moulton_equals_the_python_driver(examples, model, order, step,
                                                         jacobian):
    """The same steps (RK4 starter, AB predictor, Newton iterations, Jacobians, LU
    factorisations) and evaluations, identical outputs between step ends and on the
    shortened last step."""
    m = Model.from_file(examples / model)
    a, b = _pair(m, formulation="di", integrator="am", step=step, t_end=0.3,
                 output_step=0.0125, integrator_options={"order": order})
    _assert_identical(a, b)
    for k in AM_COUNTS:
        assert a.stats[k] == b.stats[k], k
    assert a.stats["integrator_njev"] >= 1 and a.stats["integrator_nnewton_iter"] > 0


def test_adams_moulton_refreshes_a_stale_jacobian_as_the_python_driver(examples):
    """AM1 with h = 5e-3 on the slider-crank: a Newton failure with the stale Jacobian
    re-evaluates it and retries the step (observed: one failure), in both loops."""
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    a, b = _pair(m, formulation="di", integrator="am", step=5e-3, t_end=0.3,
                 output_step=0.0125, integrator_options={"order": 1})
    _assert_identical(a, b)
    assert a.stats["integrator_nnewton_failures"] == b.stats["integrator_nnewton_failures"] > 0
    assert a.stats["integrator_njev"] == a.stats["integrator_nnewton_failures"] + 1


def test_adams_moulton_newton_failure_hands_over_to_the_python_driver(examples,
                                                                     monkeypatch):
    """A step far too large (0.05 s on the four-bar): the Newton iteration fails with a
    fresh Jacobian, the compiled loop stops at the last accepted step (code 2) and
    the Python driver raises the NewtonFailure the Python loop raises."""
    from mbcore.integrate.base import NewtonFailure
    codes = spy_loop(monkeypatch, "run_fixedgrid")
    m = Model.from_file(examples / "fourbar_dap.yaml")
    st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "integrator": "am",
          "step": 0.05, "integrator_options": {"order": 2}}
    with pytest.raises(NewtonFailure, match="Newton iteration did not converge") as exc:
        mbcore.run(m, settings=st)
    code, t_handover = codes[-1]
    assert code == 2 and abs(exc.value.t - t_handover - 0.05) < 1e-12
    with pytest.raises(NewtonFailure) as ref:
        mbcore.run(m, settings={**st, "loop": "python"})
    assert ref.value.t == exc.value.t and str(ref.value) == str(exc.value)
