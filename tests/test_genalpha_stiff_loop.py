"""generalized-α (genalpha, hht) with the index-3 ``stiff`` formulation on the compiled
loop (``mbcore._ext._steploop.run_genalpha`` with multipliers, the velocity rows'
mass and the dynamic analysis' DAE Jacobian as a call-back): the Python driver
(``loop: python``) is the reference, bit for bit; checkpoints resume exactly.

Sources: Arnold & Brüls (2007) (the index-3 generalized-α method and the scaling of
its iteration matrix); Chung & Hulbert (1993); Hilber, Hughes & Taylor (1977)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.model.model import Model


def _governor():
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from accuracy_problems import governor_model
    return governor_model()


def _stiff_form(model):
    from mbcore.plugins import registry
    return registry().get("formulation", "stiff")(model.compile())


def _example(name):
    return lambda examples: Model.from_file(examples / name)


#: (model, step, t_end): the governor of IFToMM A05 (spatial, stiff springs, a short
#: span), the planar slider-crank, the spatial slider-crank
CASES = {"governor": (lambda examples: _governor(), 1e-3, 0.05),
         "planar_slider_crank": (_example("slider_crank_dynamic.yaml"), 2e-3, 0.3),
         "spatial_slider_crank": (_example("spatial_slider_crank_dynamic.yaml"), 2e-3, 0.3)}


def _runs(examples, case, name, **extra):
    build, h, t_end = CASES[case]
    st = {"analysis": "dynamic", "formulation": "stiff", "integrator": name, "step": h,
          "t_end": t_end, "output_step": 5 * h, **extra}
    return [mbcore.run(build(examples), settings={**st, "loop": loop})
            for loop in ("auto", "python")]


def assert_same_runs(a, b):
    """``a`` on the compiled loop and ``b`` on the Python driver, both finished:
    every channel and every count of the integrator identical."""
    assert [a.stats["loop"], b.stats["loop"]] == ["compiled", "python"]
    assert a.status == b.status == "finished"
    for ch in ("q", "qd", "qdd", "lam", "energy", "violation/position"):
        assert np.array_equal(np.asarray(a[ch]), np.asarray(b[ch]), equal_nan=True), ch
    for k in ("nsteps", "nrejected", "nfev", "njev", "nlu", "nlu_solves",
              "nnewton_iter", "nnewton_failures"):
        assert a.stats[f"integrator_{k}"] == b.stats[f"integrator_{k}"], k


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", ["genalpha", "hht"])
def test_stiff_compiled_loop_takes_the_python_drivers_steps_bit_for_bit(examples, case,
                                                                       name):
    """The compiled loop runs the same predictor, Newton iteration on (q'', lam) with
    the scaled (p + k) iteration matrix, Jacobian policy (the analysis' DAE Jacobian
    at the predictor, refreshed when Newton needs more than 4 iterations or fails;
    the formulation's fast blocks refreshed at every other step) and quadrature of
    the work as GeneralizedAlpha's Python driver: every channel and every count is
    identical (bitwise: the same formulas in one process; the rows row by row on
    both loops: the compiled loop's rows in blocks are compared with the row-by-row
    path in tests/test_output_blocks_dae.py)."""
    a, b = _runs(examples, case, name, output_rows="reference")
    assert_same_runs(a, b)
    # the fast blocks refreshed at every step that keeps the Jacobian: a new LU there
    assert a.stats["integrator_nlu"] >= a.stats["integrator_nsteps"]


def test_stiff_compiled_loop_keeps_the_constraints_at_every_step(examples):
    """The index-3 form on the compiled loop: positions on Phi = 0 to the Newton
    tolerance at every output (newton_atol 1e-13 relative to max(1, |q|); the
    governor's worst violation observed 4e-15 m on both loops)."""
    a, _ = _runs(examples, "governor", "genalpha")
    assert a.stats["loop"] == "compiled"
    # observed 4e-15 m: bound 1e-12, 250x margin
    assert np.max(np.abs(a["violation/position"])) < 1e-12


@pytest.mark.parametrize("name", ["genalpha", "hht"])
def test_stiff_checkpointed_run_resumes_bit_identically(tmp_path, examples, name):
    """A run with checkpoints stays on the compiled loop (the checkpoint's step record
    names the loop 'genalpha' and holds the accelerations, f, the grid and the DAE
    Jacobian), and a resume from a checkpoint inside a step that spans several
    outputs writes the uninterrupted run's file bit for bit."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings(name, formulation="stiff"))
    assert ck.step["loop"] == "genalpha"
    h = ck.step["history"]
    assert h["kind"] == "genalpha" and h["t"] == ck.step["t"]
    n = len(h["acc"])
    assert h["J"] is not None and np.asarray(h["J"]).size == np.asarray(h["f"]).size ** 2
    assert np.asarray(h["y"]).size > 2 * n           # [q, s, lam, W]: the multipliers


@pytest.mark.parametrize("blocks", ["compiled", "python"])
def test_stiff_compiled_loop_runs_no_python_newton_iteration(monkeypatch, blocks):
    """On the compiled loop the Newton iterations run in C: the Python driver's
    ``_solve_second`` is never called (on the Python loop once per step and
    attempt), the DAE Jacobian is called back only when a Jacobian is computed and
    ``jacobian_update`` once per step that keeps one: the NumPy
    ``update_newton_blocks`` with ``Stiff.newton_blocks = "python"``, never with the
    compiled refresh (``CompiledStiff.newton_blocks``, no Python per step)."""
    from mbplugins.formulations.stiff import Stiff
    monkeypatch.setattr(Stiff, "newton_blocks", blocks)
    from mbplugins.integrators.genalpha import GeneralizedAlpha
    calls = {"newton": 0, "jacobian": 0, "update": 0}
    for name, cls, key in (("_solve_second", GeneralizedAlpha, "newton"),
                           ("jacobian", Stiff, "jacobian"),
                           ("update_newton_blocks", Stiff, "update")):
        def counted(*a, _f=getattr(cls, name), _k=key, **kw):
            calls[_k] += 1
            return _f(*a, **kw)
        monkeypatch.setattr(cls, name, counted)
    st = {"formulation": "stiff", "integrator": "genalpha", "step": 1e-3, "t_end": 0.05,
          "output_step": 0.01}
    seen = {}
    for loop in ("auto", "python"):
        for k in calls:
            calls[k] = 0
        r = mbcore.run(_governor(), analysis="dynamic", settings={**st, "loop": loop})
        seen[loop] = (r.stats["loop"], dict(calls), r.stats["integrator_nsteps"],
                      r.stats["integrator_njev"])
    (lc, cc, nc, jc), (lp, cp, np_, jp) = seen["auto"], seen["python"]
    assert (lc, lp) == ("compiled", "python") and nc == np_ == 50 and jc == jp
    assert cc["newton"] == 0 and cp["newton"] >= np_
    assert cc["jacobian"] == cp["jacobian"] == jc
    # every step that keeps it (through C with the compiled refresh)
    assert cc["update"] == cp["update"] == (nc - jc if blocks == "python" else 0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_update_newton_blocks_equal_the_jacobians_blocks(examples, case):
    """``Stiff.update_newton_blocks`` (generalized-α's ``jacobian_update``) writes the
    velocity block, the reaction columns and the constraint rows of ``Stiff.jacobian``
    at the new state (bitwise: the same formulas) and leaves ``df_s/dq`` and the rest
    of an older Jacobian alone."""
    build, h, _ = CASES[case]
    r = mbcore.run(build(examples), settings={"analysis": "dynamic", "formulation": "stiff",
                                            "integrator": "genalpha", "step": h,
                                            "t_end": 4 * h, "output_step": 2 * h})
    form = _stiff_form(build(examples))
    n, m, L = form.n, form.m, form.size
    y0, _ = form.initialize(np.asarray(r["q"])[0], np.asarray(r["qd"])[0], 0.0)
    y1, _ = form.initialize(np.asarray(r["q"])[-1], np.asarray(r["qd"])[-1], 4 * h)
    old = np.zeros((L + 1, L + 1))
    old[:L, :L] = form.jacobian(0.0, y0)
    J = old.copy()
    form.update_newton_blocks(4 * h, np.concatenate([y1, [0.0]]), J)
    new = form.jacobian(4 * h, y1)
    fast = np.zeros((L + 1, L + 1), dtype=bool)
    fast[n:2 * n, n:L] = True
    fast[2 * n:L, :n] = True
    assert np.array_equal(J[:L, :L][fast[:L, :L]], new[fast[:L, :L]])
    assert np.array_equal(J[~fast], old[~fast])
    assert not np.array_equal(J[2 * n:L, :n], old[2 * n:L, :n])       # they moved


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_newton_blocks_equal_update_newton_blocks_bit_for_bit(examples, case):
    """``CompiledStiff.newton_blocks`` (the compiled ``jacobian_update``: Phi_q, the true
    gradient, C = dQ/dqd of the force-Jacobian kernels scattered in the System's order,
    the spatial mass solve) writes the same numbers as its NumPy reference
    ``Stiff.update_newton_blocks`` (the same formulas in the same order: bitwise) into
    an older Jacobian, and the formulation hands it to generalized-α by default."""
    build, h, _ = CASES[case]
    r = mbcore.run(build(examples), settings={"analysis": "dynamic", "formulation": "stiff",
                                            "integrator": "genalpha", "step": h,
                                            "t_end": 4 * h, "output_step": 2 * h})
    form = _stiff_form(build(examples))
    L = form.size
    hook = form.integrator_options(1)["jacobian_update"]
    assert getattr(hook, "__self__", None) is form.compiled       # the C hook
    y0, _ = form.initialize(np.asarray(r["q"])[0], np.asarray(r["qd"])[0], 0.0)
    y1, _ = form.initialize(np.asarray(r["q"])[-1], np.asarray(r["qd"])[-1], 4 * h)
    old = np.zeros((L + 1, L + 1))
    old[:L, :L] = form.jacobian(0.0, y0)
    y = np.concatenate([y1, [0.0]])
    a, b, f = old.copy(), old.copy(), np.asfortranarray(old)
    form.update_newton_blocks(4 * h, y, a)
    hook(4 * h, y, b)
    hook(4 * h, y, f)                # the loop's column-major buffer
    assert not np.array_equal(a, old)
    assert np.array_equal(a, b) and np.array_equal(a, f)


def test_compiled_newton_blocks_keep_the_trajectory_bit_for_bit(examples, monkeypatch):
    """The governor on the compiled loop with the compiled refresh and with the NumPy
    one (``Stiff.newton_blocks = "python"``): every channel and count identical."""
    from mbplugins.formulations.stiff import Stiff
    build, h, t_end = CASES["governor"]
    st = {"analysis": "dynamic", "formulation": "stiff", "integrator": "genalpha",
          "step": h, "t_end": t_end, "output_step": 5 * h}
    runs = []
    for blocks in ("compiled", "python"):
        monkeypatch.setattr(Stiff, "newton_blocks", blocks)
        runs.append(mbcore.run(build(examples), settings=st))
    a, b = runs
    assert a.stats["loop"] == b.stats["loop"] == "compiled"
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        assert np.array_equal(np.asarray(a[ch]), np.asarray(b[ch])), ch
    for k in ("nsteps", "njev", "nlu", "nnewton_iter"):
        assert a.stats[f"integrator_{k}"] == b.stats[f"integrator_{k}"], k
