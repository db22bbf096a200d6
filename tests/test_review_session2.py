"""Review of the compiled dynamics session (CompiledRHS, run_rk/fastloop, Row
recording, sparse assembly, Python-group stages).  Each test shows one suspected
bug; it fails on the current code and should pass once the bug is fixed."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")


def _pushed_body() -> Model:
    """A free body (m = 0 constraints) pushed by a steep time-dependent force: the
    embedded methods reject steps around t = 0.9."""
    m = Model("pushed")
    m.set_gravity(0.0, 0.0)
    m.add_body("a", position=(0.0, 0.0), mass=1.0, inertia=0.1)
    m.add_force("force", "push", body="a", fx="100*tanh(200*(t - 0.9))", fy=0.0)
    return m


# --------------------------------------------------------------------------------
# BUG 1 (ext/_dynamics.pyx run_rk, adaptive branch): when a trial step is clipped to
# t1 the compiled loop keeps the unclipped h_abs; the Python EmbeddedRK sets
# h_abs = |t_new - t| before the controller.  A rejected clipped step is then
# retried with the same (clipped) size several times: more rejections and
# evaluations than the Python driver, i.e. not "the same steps".
# --------------------------------------------------------------------------------
@pytest.mark.parametrize("integrator, t_end", [("dopri5", 0.865), ("dopri5", 0.88),
                                               ("bs23", 1.0)])
def test_bug1_clipped_last_step_rejection_same_steps(integrator, t_end):
    m = _pushed_body()
    st = {"analysis": "dynamic", "t_end": t_end, "output_step": 0.005,
          "integrator": integrator, "rtol": 1e-6, "atol": 1e-8, "formulation": "di"}
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    assert a.stats["integrator_nrejected"] == b.stats["integrator_nrejected"]
    assert a.stats["integrator_nfev"] == b.stats["integrator_nfev"]
    assert a.stats["integrator_nsteps"] == b.stats["integrator_nsteps"]
    np.testing.assert_array_equal(a["integrator"][:, 2:], b["integrator"][:, 2:])


# --------------------------------------------------------------------------------
# BUG 2 (ext/_dynamics.pyx run_rk + src/mbcore/fastloop.py run_compiled, code 2):
# ``stats`` is only written before outputs (and at the normal end), so when an
# evaluation fails after the last output the steps, rejections and evaluations
# since that output (including the failing one) are dropped from the statistics
# handed on with the Python fallback.
# --------------------------------------------------------------------------------
def test_bug2_fallback_statistics_count_every_step_and_evaluation():
    from mbcore.errors import AnalysisError
    from mbcore.integrate.fastloop import LoopResult, run_compiled
    from mbcore.integrate import integrate
    from mbcore.integrate.base import Statistics
    from mbcore.plugins import registry
    from mbplugins.integrators.erk import DOPRI5

    m = Model("failing")
    m.set_gravity(0.0, -9.81)
    m.add_body("a", position=(0.0, 0.0), mass=1.0, inertia=0.1)
    # the time function cannot be evaluated after t = 0.73 (sqrt of a negative number)
    m.add_force("force", "push", body="a", fx="sqrt(0.73 - t)", fy=0.0)
    sysm = m.compile(kernels="compiled")
    form = registry().get("formulation", "di")(sysm, {})
    crhs = form.compiled
    assert crhs is not None
    st0 = sysm.initial_state(0.0)
    y0 = np.concatenate([st0.q, st0.qd, [0.0]])
    t_out = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    opts = {"rtol": 1e-6, "atol": 1e-8}

    # reference: the Python integrator on the same function, up to the failure
    class Failed(AnalysisError):
        pass

    buf = np.zeros(y0.size)

    def fun(t, y):
        if crhs.eval(t, y, buf):
            raise Failed("failed", t)
        return buf

    ref = integrate(DOPRI5, fun, (0.0, 1.0), y0, t_out=t_out, store=False,
                    raise_on_failure=False, **opts)
    assert ref.status == -1

    crhs.nfev = 0
    handed = {}

    def fallback(t, y, outs, why=None):
        handed["t"] = t
        return LoopResult(-1, Statistics(), t, y)

    res = run_compiled("embedded", DOPRI5, form, 0.0, 1.0, y0, t_out, dict(opts),
                       lambda t, y: None, np.zeros(5), fallback)
    # the compiled part stopped at the same accepted step as the Python integrator
    assert handed["t"] == pytest.approx(ref.t_final, abs=1e-9)
    # ... and must hand on all of its statistics
    assert res.stats.nsteps == ref.stats.nsteps
    assert res.stats.nrejected == ref.stats.nrejected
    assert res.stats.nfev == ref.stats.nfev == crhs.nfev


# --------------------------------------------------------------------------------
# BUG 3 (src/mbplugins/analyses/dynamic.py run_integrator/python_loop): after the
# compiled loop hands a run to the Python driver, on_step writes
# istat[2:] = base + (Python counts) with ``base`` not including the compiled part:
# the "integrator" channel (cumulative steps / rejected / evaluations) drops back
# and its last row disagrees with stats["integrator_*"].
# --------------------------------------------------------------------------------
def test_bug3_integrator_channel_after_fallback_is_cumulative(examples):
    m = Model.from_file(examples / "parallelogram_singular.yaml")
    st = {"formulation": "di", "rank_deficiency": "least_squares", "t_end": 2.0,
          "integrator": "dopri5"}
    r = mbcore.run(m, settings=st)
    # the compiled loop handed the run to the Python driver (stats.loop says so)
    assert r.stats["loop"] == "compiled+python" and r.stats["rank_deficient_evaluations"] > 0
    assert 0.0 < r.stats["loop_handover_t"] < 2.0
    last = r["integrator"][-1]
    assert last[2] == r.stats["integrator_nsteps"]
    assert last[3] == r.stats["integrator_nrejected"]
    assert last[4] == r.stats["integrator_nfev"]
    # the same identity holds on the Python driver
    p = mbcore.run(m, settings={**st, "loop": "python"})
    assert p["integrator"][-1][2] == p.stats["integrator_nsteps"]
    assert p["integrator"][-1][4] == p.stats["integrator_nfev"]


# --------------------------------------------------------------------------------
# BUG 4 (ext/_dynamics.pyx run_rk, adaptive branch, start of a step): the Python
# EmbeddedRK raises a step below the round-off limit 10 eps |t| *up to* that limit
# at the start of a step (h_abs = max(h_abs, min_step)) and only fails when a
# rejection takes it below; the compiled loop fails at once (code 3).  A run the
# Python driver completes fails on the compiled loop.  Code 3 also raises a plain
# AnalysisError where the Python integrators raise StepSizeError.
# --------------------------------------------------------------------------------
def _resting_body(g=0.0) -> Model:
    m = Model("rest")
    m.set_gravity(0.0, g)
    m.add_body("a", position=(0.0, 0.0), mass=1.0, inertia=0.1)
    return m


def test_bug4_small_first_step_is_raised_to_the_round_off_limit():
    m = _resting_body()
    st = {"analysis": "dynamic", "t_start": 1e9, "t_end": 1e9 + 1.0, "output_step": 0.5,
          "integrator": "dopri5"}
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert b.status == "finished"
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    assert a.stats["loop"] == "compiled"
    assert a.status == "finished" and len(a) == len(b)
    assert a.stats["integrator_nfev"] == b.stats["integrator_nfev"]


def test_bug4_step_size_error_type_is_the_same_on_both_loops():
    from mbcore.integrate.base import StepSizeError
    m = _resting_body(-9.81)
    st = {"analysis": "dynamic", "t_start": 1e9, "t_end": 1e9 + 1e-3, "output_step": 1e-3,
          "integrator": "rk4", "step": 1e-9}
    with pytest.raises(StepSizeError):
        mbcore.run(m, settings={**st, "loop": "python"})
    with pytest.raises(StepSizeError):
        mbcore.run(m, settings={**st, "loop": "auto"})


# --------------------------------------------------------------------------------
# BUG 5 (ext/_dynamics.pyx run_rk / CompiledRHS.timeit; compiled with
# boundscheck=False): the sizes of f0, stats, C, E, P (run_rk) and y (timeit) are
# not checked; too short arrays are read (f0, y) or written (stats: 5 entries)
# out of bounds instead of raising.  (Only the read cases are exercised here.)
# --------------------------------------------------------------------------------
def test_bug5_run_rk_and_timeit_check_their_buffer_sizes():
    from mbcore._ext._steploop import run_rk
    from mbcore.plugins import registry
    from mbplugins.integrators.explicit import RK4

    sysm = _resting_body(-9.81).compile(kernels="compiled")
    form = registry().get("formulation", "di")(sysm, {})
    crhs = form.compiled
    y0 = np.zeros(2 * sysm.n + 1)
    A = np.ascontiguousarray(RK4.A, dtype=float)
    B = np.ascontiguousarray(RK4.B, dtype=float)
    C = np.ascontiguousarray(RK4.C, dtype=float)
    E = np.zeros(B.size + 1)
    P = np.zeros((B.size + 1, 1))
    with pytest.raises(ValueError):
        run_rk(crhs, A, B, C, E, P, False, 0.0, 0.1, y0, np.zeros(1),   # f0 too short
               np.array([0.1]), 0, 0.01, 0.0, 0.0, np.inf, 0.9, 0.2, 5.0, 0.0, 4,
               lambda t, y: None, np.zeros(5))
    with pytest.raises(ValueError):
        crhs.timeit(0.0, np.zeros(1), 1)                                  # y too short


# --------------------------------------------------------------------------------
# BUG 6 (src/mbplugins/formulations/baumgarte.py CS.compiled_stabilisation, with
# formulation.py rule 8): CS returns (alpha, beta) unconditionally, so a subclass of
# CS that overrides gamma_extra (or rhs) silently gets the compiled Baumgarte
# right-hand side and its override is ignored.
# --------------------------------------------------------------------------------
def test_bug6_cs_subclass_overriding_gamma_extra_keeps_the_python_path(examples):
    from mbplugins.formulations import CS

    class ScaledCS(CS):
        def gamma_extra(self, q, qd, t):
            return 2.0 * super().gamma_extra(q, qd, t)

    sysm = Model.from_file(examples / "fourbar_dap.yaml").compile(kernels="compiled")
    form = ScaledCS(sysm, {"alpha": 3.0, "beta": 4.0})
    st = sysm.initial_state(0.0)
    rng = np.random.default_rng(3)
    y = np.concatenate([st.q + 0.01 * rng.standard_normal(sysm.n),
                        rng.standard_normal(sysm.n)])
    got = form.rhs(0.3, y).copy()
    c, form.compiled = form.compiled, None
    try:
        want = form.rhs(0.3, y).copy()          # the Python path with the override
    finally:
        form.compiled = c
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9 * (1 + np.max(np.abs(want))))
