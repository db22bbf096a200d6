"""Exact resume from a checkpoint inside a step that spans several outputs.

A checkpoint stores the integration loop's state at the start of the step that
produced its output (mbcore.analysis.checkpoint, ``state.step``); a resume redoes that step
and continues as the uninterrupted run.  Every integrator of the registry, the
compiled loops and the Python driver, and the formulations are checked: the file
of the interrupted and resumed run equals the uninterrupted run's bit for bit
(every recorded channel, the integrator statistics included; both runs in this
process, one code path).
"""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from mbcore import Model
from mbcore.analysis.checkpoint import read_checkpoint
from mbcore.integrate.multistep_loop import STEPLOOP_KINDS
from mbcore.analysis.runner import resume
from mbcore.integrate import integrate
from mbcore.plugins import registry
from mbcore.results.result import Result
from mbcore.analysis.runner import run

OUT = 0.002                       # output step: several outputs per integrator step
T_END = 0.24
FIXED_STEP = {"rk4": 0.0074, "euler": 0.0031, "heun": 0.0051, "midpoint": 0.0051,
              "implicit_euler": 0.0066, "trapezoid": 0.0066, "rk3": 0.0061, "rk2": 0.0051,
              "ab": 0.0051, "abm4": 0.0061, "taylor2": 0.0051, "verlet": 0.0041,
              "am": 0.0061, "genalpha": 0.0061, "hht": 0.0061, "rkmk4": 0.0074}


def _integrators():
    return sorted(registry().names("integrator"))


def _settings(integ, **extra):
    s = {"integrator": integ, "output_step": OUT, "t_end": T_END, "rtol": 1e-6,
         "atol": 1e-8}
    if integ in FIXED_STEP:
        s["step"] = FIXED_STEP[integ]
    if integ == "bs23":           # its steps are short: fewer at a looser tolerance
        s["rtol"], s["atol"] = 1e-4, 1e-6
    if integ == "genalpha_var":   # order 2, calibrated: longer steps at a looser one
        s["rtol"], s["atol"] = 1e-3, 1e-5
    s.update(extra)
    return s


def _model(examples, name="fourbar_dap.yaml"):
    return Model.from_file(examples / name)


def _rows(path):
    with Result(path) as r:
        return np.array(r.t), {c: np.array(r[c]) for c in r.channels}


def _inside_a_long_step(t, steps):
    """Index of a row whose step (the integrator channel's step count is the same
    on every row one step produced) also produced the next row."""
    for i in range(len(t) // 3, len(t) - 1):
        if steps[i] == steps[i + 1]:
            return i
    raise AssertionError("no step spans two outputs: make the output step smaller")


def _forget_checkpoints_after(out, t):
    """Make ``out`` look killed right after its checkpoint at ``t``."""
    with h5py.File(out, "r+") as f:
        g = f["checkpoint"]
        k = int(np.searchsorted(g["t"][:], t * (1 + 1e-12)))
        for ds in g.values():
            ds.resize((k,) + ds.shape[1:])
        f.attrs["status"] = "running"


def _check_exact_resume(tmp_path, model, settings, pick=_inside_a_long_step):
    ref = tmp_path / "ref.h5"
    run(model(), settings=settings, output=ref)
    t_ref, rows_ref = _rows(ref)
    i = pick(t_ref, rows_ref["integrator"][:, 2])
    part = tmp_path / "part.h5"
    run(model(), settings=settings, output=part, checkpoint_every=t_ref[i] - t_ref[0],
        checkpoint_seconds=1e9)
    _forget_checkpoints_after(part, t_ref[i])
    ck = read_checkpoint(part)
    assert ck.t == t_ref[i] and ck.n_rows == i + 1
    resume(part)
    t, rows = _rows(part)
    assert np.array_equal(t, t_ref)
    assert rows.keys() == rows_ref.keys()
    for c, v in rows_ref.items():
        assert np.array_equal(rows[c], v, equal_nan=True), \
            (c, np.nanmax(np.abs(rows[c] - v)))
    assert ck.step is not None and ck.step["t"] < t_ref[i]     # inside the step
    return ck


@pytest.mark.parametrize("integ", _integrators())
def test_compiled_loop_resumes_inside_a_step_bit_identically(tmp_path, examples, integ):
    ck = _check_exact_resume(tmp_path, lambda: _model(examples), _settings(integ))
    if registry().get("integrator", integ).compiled_loop_kind() is None:
        assert ck.step["loop"] == "python"      # no compiled twin
    else:
        assert ck.step["loop"] in ("rk",) + STEPLOOP_KINDS


@pytest.mark.parametrize("integ", _integrators())
def test_python_driver_resumes_inside_a_step_bit_identically(tmp_path, examples, integ):
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings(integ, loop="python"))
    assert ck.step["loop"] == "python"


@pytest.mark.parametrize("formulation, integ", [
    ("di", "dopri5"), ("cp", "dopri5"), ("cp", "bdf"), ("penalty", "dopri5"),
    ("penalty", "bdf"), ("projection", "dopri5"), ("projection", "abm"),
    ("joint_coordinates", "dop853"), ("ggl", "bdf"), ("stiff", "bdf"),
    ("cs", "genalpha_var"), ("di", "genalpha_var")])
def test_formulations_resume_inside_a_step_bit_identically(tmp_path, examples,
                                                          formulation, integ):
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings(integ, formulation=formulation))
    if integ == "genalpha_var":   # its compiled loop (run_genalpha_var): h_abs, hprev
        assert ck.step["loop"] == "genalpha" and ck.step["history"]["hprev"] > 0


@pytest.mark.parametrize("model, extra", [
    ("fourbar_dap.yaml", {"formulation": "cp", "loop": "python"}),      # warm start
    ("fourbar_dap.yaml", {"formulation": "joint_coordinates",
                          "formulation_options": {"loop_stabilization": "partitioning"}}),
    ("spatial_double_pendulum.yaml", {"formulation": "joint_coordinates"}),  # reference
    ("spatial_double_pendulum.yaml", {"formulation": "di_omega"}),
    ("spatial_bennett.yaml", {"analysis": "dynamic"})])     # redundant rows removed
def test_formulation_state_resumes_bit_identically(tmp_path, examples, model, extra):
    """Formulations with a state of their own (cp's Newton warm start and partition
    quality, the spatial joint-coordinate tree's reference orientation, the loops'
    partition) and the Python driver for spatial bodies and redundant constraints."""
    _check_exact_resume(tmp_path, lambda: _model(examples, model),
                        _settings("dopri5", **extra))


def _ball(e, h=1.0, r=0.1):
    m = Model("ball")
    m.set_gravity(0, -9.81)
    m.add_body("ball", mass=1.0, inertia=0.004, position=(0.0, h))
    m.add_impact("floor", "ball", restitution=e, radius=r)
    return m


def test_impacts_resume_bit_identically(tmp_path):
    """Events (contacts) on the Python driver, restarts after every impact: a
    checkpoint after the first impacts resumes as the uninterrupted run."""
    s = dict(_settings("dopri5", formulation="di"), analysis="dynamic", t_end=0.7)
    ck = _check_exact_resume(tmp_path, lambda: _ball(0.7), s,
                             pick=lambda t, steps: int(np.searchsorted(t, 0.55)))
    with Result(tmp_path / "ref.h5") as r:
        assert [e.t for e in r.events if e.kind == "impact"][0] < ck.t


@pytest.mark.parametrize("integ", ["dopri5", "rk4", "bdf", "abm"])
def test_finished_run_continued_to_a_later_t_end_is_bit_identical(tmp_path, examples,
                                                                 integ):
    """The last step of a finished run was shortened to its t_end; the resume redoes
    it in full, as the longer uninterrupted run took it."""
    s = _settings(integ)
    ref = tmp_path / "ref.h5"
    run(_model(examples), settings=s, output=ref)
    t_ref, rows_ref = _rows(ref)
    part = tmp_path / "part.h5"
    run(_model(examples), settings=dict(s, t_end=0.1), output=part)
    resume(part, t_end=T_END)
    t, rows = _rows(part)
    assert np.array_equal(t, t_ref)
    for c, v in rows_ref.items():
        assert np.array_equal(rows[c], v, equal_nan=True), c


def _oscillator(t, y):
    return np.array([y[1], -y[0] - 0.1 * y[1] ** 3])


@pytest.mark.parametrize("integ", _integrators())
def test_driver_continues_from_a_step_state_bit_identically(integ):
    """``integrate(step_state=...)`` hands out the state at the start of each step
    with outputs; ``integrate(state=...)`` from one of them redoes that step and
    gives the uninterrupted run's outputs (an event function keeps its counts)."""
    opts = {"step": 0.37} if integ in FIXED_STEP else {"rtol": 1e-5, "atol": 1e-8}
    t_out = np.linspace(0.0, 20.0, 401)
    states = []

    def record(state):
        states.append(state)

    def crossing(t, y):
        return y[0]
    ref = integrate(integ, _oscillator, (0.0, 20.0), [1.0, 0.0], t_out=t_out,
                    events=[crossing], step_state=record, **opts)
    pre = states[len(states) // 2]
    t0, y0 = pre["integrator"]["t"], pre["integrator"]["y"]
    k = int(np.searchsorted(t_out, t0, side="right"))
    got = integrate(integ, _oscillator, (t0, 20.0), y0, t_out=t_out[k:],
                    events=[crossing], state=pre, **opts)
    assert np.array_equal(got.t, ref.t[k:]) and np.array_equal(got.y, ref.y[k:])
    assert np.array_equal(got.t_events[0], ref.t_events[0][ref.t_events[0] > t0])
    assert got.stats.nsteps == ref.stats.nsteps - pre["counts"][0]


def test_state_fields_hold_for_subclasses_that_keep_the_step():
    """A subclass that replaces ``_step_impl`` without declaring its own
    ``state_fields`` has no state (its resume restarts the method)."""
    from mbplugins.integrators import DOPRI5

    class Tinkered(DOPRI5):
        def _step_impl(self):
            return super()._step_impl()

    class Declared(Tinkered):
        state_fields = DOPRI5.state_fields

    def make(cls):
        return cls(_oscillator, 0.0, [1.0, 0.0], 1.0)
    assert set(make(DOPRI5).get_state()) >= {"t", "y", "_f", "_h_abs"}
    assert make(Tinkered).get_state() is None
    assert make(Declared).get_state() is not None
    with pytest.raises(ValueError, match="state_fields"):
        make(Tinkered).set_state(make(DOPRI5).get_state())
