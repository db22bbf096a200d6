"""A change of coordinates at step ends (``on_commit``) on the compiled multistep and
θ loops (``abm``, ``bdf``, ``implicit_euler``, ``trapezoid``).

``on_commit(t, y) -> y_new | None`` is called at every accepted step's end after its
outputs; a new state restarts the method there (order 1, the first step chosen
again: ``Integrator.restart``), in the compiled loop exactly as in the Python driver
(:func:`mbcore.integrate.integrate`).  Coordinate partitioning (``cp``) takes its new
partitions this way (Nikravesh (1988), §13.3.3), so cp with these integrators runs
on the compiled loop; its accuracy is checked against the references of
benchmarks/accuracy_problems.py (Brüls & Cardona (2010) heavy top, a quadrature
independent of mbcore) and against the Python driver.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.integrate import integrate
from mbcore.integrate.fastloop import compiled_loop_for, run_compiled
from mbcore.plugins import registry
from mbcore.system import compiled_available

from conftest import EXAMPLES

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

METHODS = [("abm", {"rtol": 1e-7, "atol": 1e-9}), ("bdf", {"rtol": 1e-7, "atol": 1e-9}),
           ("trapezoid", {"step": 2e-3}), ("implicit_euler", {"step": 5e-4})]


def _di(name):
    """The DI form of an example on the compiled kernels and its start state."""
    m = Model.from_file(EXAMPLES / name)
    sysm = m.compile(kernels="compiled")
    form = registry().get("formulation", "di")(sysm, {})
    st0 = sysm.initial_state(0.0)
    return form, np.concatenate([st0.q, st0.qd, [0.0]])


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


@pytest.mark.parametrize("name", ["spatial_heavy_top.yaml",
                                  "spatial_slider_crank_dynamic.yaml"])
@pytest.mark.parametrize("method, opts", METHODS)
def test_compiled_loop_restarts_as_the_python_driver(name, method, opts):
    """The same right-hand side and call-back on both loops: the same step ends are
    committed, the same steps, rejections, evaluations, order changes and Jacobians
    follow, and the outputs agree to rounding (the dense output is the same
    polynomial evaluated per point instead of per step: observed <= 1.5e-16 of each
    component's scale, 0 with OPENBLAS_CORETYPE=Sandybridge, final states identical;
    bound 1e-13)."""
    form, y0 = _di(name)
    icls = registry().get("integrator", method)
    kind = compiled_loop_for(icls, form)
    assert kind in ("abm", "bdf", "theta")
    crhs = form.compiled
    buf = np.zeros(y0.size)

    def fun(t, y):
        assert crhs.eval(t, y, buf) == 0
        return buf

    t_out = np.linspace(0.0, 0.5, 51)
    log_ref, log = [], []
    ref = integrate(icls, fun, (0.0, 0.5), y0, t_out=t_out,
                    on_commit=_rezero_work(0.05, log_ref), **opts)
    outs = []

    def fallback(t, y, o, why=None):
        raise AssertionError(f"handed to the Python driver at t = {t}")

    res = run_compiled(kind, icls, form, 0.0, 0.5, y0, t_out, dict(opts),
                       lambda t, y: outs.append(np.array(y)), np.zeros(5), fallback,
                       on_commit=_rezero_work(0.05, log))
    assert res.status == 0 and len(log) == 9 and log == log_ref
    Y = np.array(outs)
    scale = 1.0 + np.abs(ref.y).max(axis=0)
    assert Y.shape == ref.y.shape
    assert np.max(np.abs(Y - ref.y) / scale) <= 1e-13
    np.testing.assert_allclose(res.y_final, ref.y_final, rtol=0, atol=1e-13 * scale.max())
    for k in ("nsteps", "nrejected", "nfev", "njev", "nlu", "norder_changes"):
        assert getattr(res.stats, k) == getattr(ref.stats, k), k
    # the restarts changed the run (a loop that ignored the new state would not
    # restart: another step sequence)
    plain = integrate(icls, fun, (0.0, 0.5), y0, t_out=t_out, **opts)
    assert plain.stats.nfev != ref.stats.nfev
    if method in ("abm", "bdf"):
        assert plain.stats.nsteps != ref.stats.nsteps


def _run_abm(form, y0, **kw):
    """``run_abm`` from the start of AdamsPECE on ``form``'s right-hand side to t = 0.1,
    outputs at 0.05 and 0.1."""
    from mbcore._ext import _steploop
    from mbplugins.integrators.adams import AdamsPECE
    crhs = form.compiled
    buf = np.zeros(y0.size)

    def fun(t, y):
        assert crhs.eval(t, y, buf) == 0
        return buf

    integ = AdamsPECE(fun, 0.0, y0, 0.1, rtol=1e-7, atol=1e-9)
    s0 = integ.loop_start()
    outs = []
    res = _steploop.run_abm(
        crhs, 0.0, 0.1, y0, np.ascontiguousarray(s0["phi"]),
        np.ascontiguousarray(s0["hs"], dtype=float), s0["h"], s0["h_last"], s0["k"],
        s0["neq"], s0["phase1"], s0["kmax"], float(s0["rtol"]), float(s0["atol"]),
        s0["max_step"], np.ascontiguousarray(AdamsPECE.GAMMA, dtype=float),
        np.ascontiguousarray(AdamsPECE.GAMMA_STAR_ABS, dtype=float),
        np.array([0.05, 0.1]), 0, lambda t, y: outs.append(t), np.zeros(5),
        _steploop.new_counters(), **kw)
    return res, outs


def test_restart_call_back_is_required_and_a_failing_restart_is_handed_over():
    """``run_abm`` (as ``run_bdf``, ``run_theta``) refuses an ``on_commit`` without the
    ``restart`` call-back that gives the restarted method's start state; a restart
    that cannot evaluate f at the new state (None) ends the loop with code 2 at the
    step's end in the new coordinates, after the step's outputs (the caller's Python
    driver continues from there and raises the named error)."""
    form, y0 = _di("spatial_heavy_top.yaml")
    with pytest.raises(ValueError, match="on_commit needs restart"):
        _run_abm(form, y0, on_commit=lambda t, y: None)
    at = []

    def on_commit(t, y):
        if t < 0.05:
            return None
        at.append(t)
        y_new = np.array(y)
        y_new[-1] = 7.0
        return y_new

    (code, t, y, i_out, h), outs = _run_abm(form, y0, on_commit=on_commit,
                                            restart=lambda t, y: None)
    assert code == 2 and len(at) == 1 and t == at[0] and y[-1] == 7.0
    assert outs == [0.05] and i_out == 1
    # the last step's end is not committed (as the Python driver: the run is over)
    (code, t, y, i_out, h), outs = _run_abm(
        form, y0, on_commit=lambda t, y: None if t < 0.1 else 1 / 0,
        restart=lambda t, y: None)
    assert code == 0 and t == 0.1 and outs == [0.05, 0.1]


def _problem_run(problem, integrator, rtol, loop="auto"):
    from accuracy_problems import PROBLEMS, normalized_error
    p = PROBLEMS[problem]
    atol = rtol / 100.0
    r = mbcore.run(p.build(), analysis="dynamic",
                   settings={"t_end": p.t_end, "output_step": p.output_step,
                             "formulation": "cp", "integrator": integrator, "rtol": rtol,
                             "atol": atol, "loop": loop})
    err, _ = normalized_error(p.measure(r), p.reference(np.asarray(r.t)), rtol, atol)
    return r, err


@pytest.mark.parametrize("integrator", ["bdf", "abm"])
def test_cp_heavy_top_runs_on_the_compiled_loop(integrator):
    """cp + bdf / abm on the heavy top (Brüls & Cardona (2010); reference: a DOP853
    quadrature at rtol 1e-13, benchmarks/accuracy_problems.py) run on the compiled
    loop, take new partitions at step ends and stay within 10x the requested
    tolerance (benchmarks/accuracy3d.py's error, in units of the tolerance: observed
    0.0037 (bdf), 0.0066 (abm); bound 10, the README's promise)."""
    r, err = _problem_run("heavy_top", integrator, 1e-6)
    assert r.stats["loop"] == "compiled"
    assert sum(e.kind == "repartition" for e in r.events) > 0
    assert err <= 10.0


@pytest.mark.parametrize("integrator", ["bdf", "abm"])
def test_cp_spatial_slider_crank_on_the_compiled_loop_equals_python_driver(integrator):
    """cp + bdf / abm on the spatial slider-crank: compiled loop and Python driver take
    the same new partitions and agree to far below the tolerance (the re-partitions
    and order choices hang on cp's Newton iterations, whose warm start follows the
    outputs' rounding: on the heavy top at rtol 1e-6 such rounding grew to 1e-10 of the
    scale; here observed <= 1.1e-15; bound 1e-9 = rtol / 100)."""
    m = Model.from_file(EXAMPLES / "spatial_slider_crank_dynamic.yaml")
    st = {"analysis": "dynamic", "t_end": 0.5, "output_step": 0.01, "formulation": "cp",
          "integrator": integrator, "rtol": 1e-7, "atol": 1e-9}
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    ra = [e.message for e in a.events if e.kind == "repartition"]
    rb = [e.message for e in b.events if e.kind == "repartition"]
    assert len(ra) > 0 and [x.split("(")[0] for x in ra] == [x.split("(")[0] for x in rb]
    assert len(a) == len(b)
    for ch in ("q", "qd"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0,
                                   atol=1e-9 * (1.0 + np.abs(b[ch]).max()), err_msg=ch)
    # the integrator channel counts the restarts' evaluations as the driver does
    assert a["integrator"][-1][4] == a.stats["integrator_nfev"]


@pytest.mark.parametrize("integrator", ["bdf", "abm"])
def test_resume_across_a_repartition_on_the_compiled_loop(tmp_path, integrator):
    """A checkpoint in a step after a new partition (taken at a step end on the
    compiled multistep loop): the resumed run's file equals the uninterrupted run's
    bit for bit (tests/test_resume_exact.py's check)."""
    from mbcore.results.result import Result
    from test_resume_exact import _check_exact_resume, _settings

    def model():
        return Model.from_file(EXAMPLES / "spatial_heavy_top.yaml")

    s = _settings(integrator, formulation="cp", t_end=0.02, output_step=1e-4)
    ref = tmp_path / "first.h5"
    mbcore.run(model(), settings=s, output=ref)
    with Result(ref) as r:
        t_rep = [e.t for e in r.events if e.kind == "repartition"]
    assert t_rep

    def after_repartition(t, steps):
        for i in range(len(t) - 1):
            if t[i] > t_rep[0] and steps[i] == steps[i + 1]:
                return i
        raise AssertionError("no step spans two outputs after the re-partition")

    ck = _check_exact_resume(tmp_path, model, s, pick=after_repartition)
    assert ck.step["loop"] == integrator and ck.step["t"] >= t_rep[0]
