"""Fault injection (issue 18 item 3): every fault stops the run with an error that
names the time (and the element, where there is one); the HDF5 file keeps every
row computed (flushed, for the faults that kill or starve the writer) and says why
it stopped (root attributes ``status`` and ``reason``, docs/results.md).

:data:`CASES` is the table of docs/reliability.md ("Fault injection"):
:func:`test_reliability_doc_lists_every_case` keeps the two identical, and
:func:`test_every_case_has_its_test` checks that each row names a test that exists.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model, Result, hookimpl
from mbcore.cli import main
from mbcore.errors import (AnalysisError, AssemblyError, ConvergenceError, LockupError,
                           ModelError, SingularJacobianError)
from mbcore.integrate.base import NewtonFailure, StepBudgetError, StepSizeError
from mbcore.plugins.errors import PluginElementError
from mbplugins.planar import userforce
from mbplugins.reporters.memory import MemoryReporter
from test_swmr import _model_file, _start

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"


@dataclass(frozen=True)
class FaultCase:
    fault: str       # what is injected
    error: str       # the error raised and what its message names
    status: str      # the file's status and what it holds
    test: str        # test that checks it (module::function)


_HERE = "test_fault_injection.py"
CASES = [
    FaultCase("Initial assembly impossible (kinematic; a frame longer than the other "
              "three links)", "`AssemblyError`: `t = 0`, the constraints with the largest "
              "residuals", "`failed`, 0 rows", f"{_HERE}::test_assembly_failure"),
    FaultCase("Kinematic Newton failure: lock-up four-bar (examples/fourbar_lockup.yaml)",
              "`LockupError`: `t = 0.93`, the equations involved (`drive.c`...)",
              "`failed`, every row before t", f"{_HERE}::test_kinematic_lockup"),
    FaultCase("Static Newton failure: no equilibrium (a slider loaded along its guide)",
              "`ConvergenceError`: `t = 0`, the coordinates of the singular stiffness "
              "(`sl.x`)", "`failed`, 0 rows", f"{_HERE}::test_static_without_equilibrium"),
    FaultCase("Implicit integrator's Newton failure (implicit_euler / trapezoid, fixed "
              "step; Python and compiled loops)", "`NewtonFailure`: the time, the "
              "integrator, the step", "`failed`, every row before t",
              f"{_HERE}::test_implicit_newton_failure"),
    FaultCase("Singular Jacobian mid-run (examples/nfourbar_2.yaml, DI, t = 0.714)",
              "`SingularJacobianError`: the time, the dependent equations (`O0.x`...)",
              "`failed`, every row before t", f"{_HERE}::test_singular_jacobian_mid_run"),
    FaultCase("Singular mass matrix (a body of mass and inertia 1e-300)",
              "`SingularJacobianError`: `t = 0`, the light coordinates (`blob.x`...)",
              "`failed`, 0 rows", f"{_HERE}::test_singular_mass_matrix"),
    FaultCase("Step-size underflow (a force 1/(1 - t)^2; dopri5, Python and compiled "
              "loops)", "`StepSizeError`: `t = 1`, the step and the round-off limit",
              "`failed`, every row before t", f"{_HERE}::test_step_size_underflow"),
    FaultCase("Step budget exhausted (the same force, `max_steps: 100`; dopri5, Python "
              "and compiled loops)", "`StepBudgetError`: the time, the steps since the "
              "last output, the next output, the step size, `settings.max_steps`",
              "`failed`, every row before t", f"{_HERE}::test_step_budget_exhausted"),
    FaultCase("Function leaves its domain (driver `sqrt(0.5 - t)`)",
              "`FunctionDomainError`: `t = 0.5`, the key path `drivers[0].function`",
              "`failed`, every row before t", f"{_HERE}::test_function_domain"),
    FaultCase("User force (`user_force`) returns NaN", "`AnalysisError`: the time, the "
              "element `'uf' (forces[0], user_force)`", "`failed`, every row before t",
              f"{_HERE}::test_user_force_faults"),
    FaultCase("User force raises", "`AnalysisError`: the time, the element, the "
              "exception (`ZeroDivisionError`)", "`failed`, every row before t",
              f"{_HERE}::test_user_force_faults"),
    FaultCase("A third-party plugin's force type raises",
              "`PluginElementError`: the time, the plugin and its version, the type, the "
              "method, the element", "`failed`, every row before t",
              f"{_HERE}::test_third_party_plugin_raises"),
    FaultCase("Output directory missing / output path is a directory / read-only "
              "directory", "`ModelError` `output: ...` naming the path (CLI exit 2); "
              "nothing computed", "no file", f"{_HERE}::test_unwritable_output"),
    FaultCase("Disk full: the file-size limit (RLIMIT_FSIZE) is reached during the run",
              "`ResultWriteError`: the time, the file, the limit (CLI exit 1)",
              "`failed` and why; every row flushed before", f"{_HERE}::test_disk_full"),
    FaultCase("Disk full inside an HDF5 write (the space check bypassed)",
              "`ResultWriteError`: the time, the file, `[Errno 27] File too large` "
              "(CLI exit 1, no crash)", "`running` (as if killed); every row flushed "
              "before", f"{_HERE}::test_disk_full_inside_hdf5"),
    FaultCase("SIGTERM during `mbcore run`", "exit 130",
              "`interrupted`, reason `interrupted after t = ... (SIGTERM)`; every row; a "
              "checkpoint", f"{_HERE}::test_signals_during_a_run"),
    FaultCase("SIGINT (Ctrl-C) during `mbcore run`", "exit 130",
              "`interrupted`, reason `interrupted after t = ... (SIGINT / Ctrl-C)`; every "
              "row; a checkpoint", f"{_HERE}::test_signals_during_a_run"),
    FaultCase("SIGKILL during `mbcore run` (10 random moments; 60 with `-m slow`)",
              "(none: the process is gone)", "`running`; readable; every flushed row equal "
              "to an uninterrupted run's", "test_swmr.py::test_kill9_ten_times"),
]


def render_table(cases=CASES) -> str:
    """The Markdown table of docs/reliability.md."""
    lines = ["| Fault | Error (what it names) | File status and rows | Test |",
             "|---|---|---|---|"]
    for c in cases:
        lines.append(f"| {c.fault} | {c.error} | {c.status} | `{c.test}` |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------
def test_reliability_doc_lists_every_case():
    text = DOC.read_text()
    start, end = "<!-- fault-table:start -->", "<!-- fault-table:end -->"
    assert start in text and end in text
    table = text.split(start, 1)[1].split(end, 1)[0].strip()
    assert table == render_table(), ("docs/reliability.md's fault table differs from "
                                     "tests/test_fault_injection.py CASES:\n"
                                     + render_table())


def test_every_case_has_its_test():
    here = Path(__file__).parent
    for c in CASES:
        module, _, func = c.test.partition("::")
        assert f"def {func}(" in (here / module).read_text(), c.test


def test_results_doc_documents_status_and_reason():
    text = (ROOT / "docs" / "results.md").read_text()
    row = next(ln for ln in text.splitlines() if ln.startswith("| `status` |"))
    for word in ("running", "finished", "failed", "interrupted", "killed", "disk"):
        assert word in row, word
    assert any(ln.startswith("| `reason` |") and "interrupted" in ln
               for ln in text.splitlines())


# --------------------------------------------------------------------------------
# in-process faults: the error, and the file holds exactly the rows computed
# --------------------------------------------------------------------------------
def _fail(model, tmp_path, err_type, settings=None, **kw):
    """Run ``model`` expecting ``err_type``; check the message starts with the time,
    the file says ``failed`` with that error as the reason and holds every row the
    run computed (a second, in-memory reporter of the same run)."""
    out = tmp_path / "fault.h5"
    mem = MemoryReporter()
    with pytest.raises(err_type) as exc:
        mbcore.run(model, settings=settings, output=out, reporters=[mem], **kw)
    e = exc.value
    assert e.t is not None and str(e).startswith(f"t = {e.t:.9g}: "), str(e)
    computed = mem.result()
    with Result(out) as r:
        assert r.status == "failed"
        assert r.reason == f"{type(e).__name__}: {e}"
        assert np.array_equal(r.t, computed.t)
        assert np.array_equal(r["q"], computed["q"])
        if len(r):
            assert r.t[-1] <= e.t
    return e, computed


def _pendulum(w: float = 0.0, free: bool = False) -> Model:
    m = Model("pendulum")
    m.set_gravity(0.0, -9.81)
    m.add_body("bar", mass=1.0, inertia=0.1, position=(0.5, 0.0), angular_velocity=w)
    if not free:
        m.add_joint("revolute", "pin", body_i="ground", body_j="bar", point_i=(0, 0),
                    point_j=(-0.5, 0))
    return m


DYN = {"analysis": "dynamic", "output_step": 0.01}


def test_assembly_failure(tmp_path, examples):
    model = Model.from_file(examples / "fourbar_kap.yaml")
    model.elements["joints"][3].raw["point_j"] = [12.0, 0.0]
    e, computed = _fail(model, tmp_path, AssemblyError)
    assert e.t == 0.0 and e.constraints and "largest residuals" in str(e)
    assert len(computed) == 0


def test_kinematic_lockup(tmp_path, examples):
    e, computed = _fail(Model.from_file(examples / "fourbar_lockup.yaml"), tmp_path,
                        LockupError)
    assert 0.92 < e.t <= 0.93 and "drive.c" in e.constraints
    assert len(computed) == round(e.t / 0.01)           # every output before t


def test_static_without_equilibrium(tmp_path, recwarn):
    m = Model("slider")
    m.set_gravity(-9.81, 0.0)
    m.add_body("sl", mass=1.0, inertia=0.1, position=(0.5, 0.0))
    m.add_joint("translational", "slide", body_i="ground", body_j="sl")
    e, computed = _fail(m, tmp_path, ConvergenceError, {"analysis": "static"})
    assert "singular" in str(e) and "coordinates involved: sl.x" in str(e)
    assert "nan" not in str(e) and len(computed) == 0
    assert not [w for w in recwarn if "singular" in str(w.message).lower()]


@pytest.mark.parametrize("loop", ["python", "auto"])
@pytest.mark.parametrize("integrator,t_fail", [("implicit_euler", 0.3), ("trapezoid", 0.55)])
def test_implicit_newton_failure(tmp_path, integrator, t_fail, loop):
    m = _pendulum()
    m.add_force("torque", "T", body="bar", torque="100*t")
    e, computed = _fail(m, tmp_path, NewtonFailure,
                        {**DYN, "t_end": 2.0, "integrator": integrator, "step": 0.05,
                         "output_step": 0.05, "loop": loop})
    assert e.t == pytest.approx(t_fail) and f"{integrator}: the Newton iteration" in str(e)
    assert len(computed) == round(t_fail / 0.05)


def test_singular_jacobian_mid_run(tmp_path, examples):
    e, computed = _fail(Model.from_file(examples / "nfourbar_2.yaml"), tmp_path,
                        SingularJacobianError,
                        {"formulation": "di", "t_end": 1.0})
    assert 0.7 < e.t < 0.72 and "O0.x" in e.constraints
    assert len(computed) == 72 and computed.t[-1] == pytest.approx(0.71)


def test_singular_mass_matrix(tmp_path):
    m = _pendulum()
    m.add_body("blob", mass=1e-300, inertia=1e-300, position=(1.5, 0.0))
    m.add_joint("revolute", "pin2", body_i="bar", body_j="blob", point_i=(0.5, 0),
                point_j=(-0.5, 0))
    e, computed = _fail(m, tmp_path, SingularJacobianError, {**DYN, "t_end": 1.0})
    assert e.t == 0.0 and "mass matrix is nearly singular" in str(e)
    assert "blob.x, blob.y, blob.phi" in str(e) and "bar." not in str(e).split("nearly")[1]


@pytest.mark.parametrize("loop", ["python", "auto"])
def test_step_size_underflow(tmp_path, loop):
    m = _pendulum(free=True)
    m.add_force("force", "F", body="bar", fx="1/(1 - t)**2")
    e, computed = _fail(m, tmp_path, StepSizeError,
                        {**DYN, "t_end": 2.0, "output_step": 0.1, "loop": loop})
    assert 1.0 - 1e-9 < e.t <= 1.0 and "fell below the round-off limit" in str(e)
    assert len(computed) == 10                           # t = 0 ... 0.9


@pytest.mark.parametrize("loop", ["python", "auto"])
def test_step_budget_exhausted(tmp_path, loop):
    m = _pendulum(free=True)
    m.add_force("force", "F", body="bar", fx="1/(1 - t)**2")
    e, computed = _fail(m, tmp_path, StepBudgetError,
                        {**DYN, "t_end": 2.0, "output_step": 0.1, "loop": loop,
                         "max_steps": 100})
    t_last = float(computed.t[-1])
    assert 0.5 < e.t < 1.0 and t_last < e.t <= t_last + 0.1 + 1e-12
    assert f"100 steps since t = {t_last:.9g} without reaching the next output at " \
           f"t = {t_last + 0.1:.9g}" in str(e) and "settings.max_steps" in str(e)
    assert len(computed) == round(t_last / 0.1) + 1       # every output before t


def test_function_domain(tmp_path, examples):
    model = Model.from_file(examples / "fourbar_kap.yaml")
    model.elements["drivers"][0].raw["function"] = "sqrt(0.5 - t)"
    e, computed = _fail(model, tmp_path, AnalysisError)
    assert e.t == 0.5 and "drivers[0].function: sqrt(x) needs x > 0" in str(e)
    assert computed.t[-1] < 0.5 and len(computed) == 20


def _nan_force(t, q, qd):
    return np.array([np.nan if t > 0.3 else 0.0, 0.0, 0.0])


def _raising_force(t, q, qd):
    if t > 0.3:
        return 1.0 / 0.0
    return np.zeros(3)


@pytest.mark.parametrize("fn,what", [(_nan_force, "returned a non-finite force"),
                                     (_raising_force, "raised ZeroDivisionError")])
def test_user_force_faults(tmp_path, fn, what):
    m = _pendulum()
    m.add_force("user_force", "uf", body_i="bar", callable=userforce.user_function(fn))
    e, computed = _fail(m, tmp_path, AnalysisError, {**DYN, "t_end": 1.0})
    assert 0.3 < e.t < 0.31
    assert "force element 'uf' (forces[0], user_force)" in str(e) and what in str(e)
    # every output before the failed (adaptive) step: t = 0 ... 0.29
    assert 0.29 - 1e-9 <= computed.t[-1] < e.t and len(computed) == 30


def test_third_party_plugin_raises(tmp_path):
    from mbcore.plugins import PluginManager
    from mbplugins.planar.forces import Torque

    class BrokenTorque(Torque):
        name = "broken_torque"
        kernel = None                      # the Python method is what runs

        def force(self, par, qb, qdb, t, f):
            if t > 0.3:
                raise KeyError("mode")
            return super().force(par, qb, qdb, t, f)

    class Acme:
        __version__ = "0.7"

        @hookimpl
        def mbcore_force_types(self):
            return [BrokenTorque]

    pm = PluginManager()
    pm.register(Acme(), name="acme")
    m = _pendulum()
    m.add_force("broken_torque", "T", body="bar", torque="1")
    e, computed = _fail(m, tmp_path, PluginElementError, {**DYN, "t_end": 1.0},
                        plugins=pm)
    assert "plugin acme (0.7): force type 'broken_torque'.force() raised KeyError" in str(e)
    assert "element 'T' (forces[0])" in str(e) and 0.3 < e.t < 0.31
    assert (e.plugin, e.elements, e.method) == ("acme (0.7)", ["T"], "force")
    assert 0.29 - 1e-9 <= computed.t[-1] < e.t and len(computed) == 30


def _read_only_dir(tmp_path) -> Path:
    """A directory where no file can be created (as root, permissions do not stop
    writes: /sys, a sysfs directory, refuses new files)."""
    if os.geteuid() != 0:
        d = tmp_path / "ro"
        d.mkdir()
        d.chmod(0o555)
        return d
    d = Path("/sys")
    try:
        os.close(os.open(d / "mbcore-probe.h5", os.O_CREAT | os.O_WRONLY))
    except OSError:
        return d
    pytest.skip("no read-only directory available")


def test_unwritable_output(tmp_path, examples, capsys):
    model = str(examples / "fourbar_kap.yaml")
    ro = _read_only_dir(tmp_path)
    for out, why in ((tmp_path / "missing" / "x.h5", "does not exist"),
                     (tmp_path, "the path is a directory"),
                     (ro / "x.h5", "Permission denied")):
        with pytest.raises(ModelError, match=r"^output: ") as exc:
            mbcore.run(Model.from_file(model), output=out)
        assert why in str(exc.value) and str(out.parent if why == "does not exist"
                                             else out) in str(exc.value)
        assert main(["run", model, "-o", str(out), "-q"]) == 2
        err = capsys.readouterr().err
        assert "mbcore: error: output: " in err and why in err and "Traceback" not in err
        assert out.is_dir() or not out.exists()
    assert not list(tmp_path.glob(".*.tmp"))            # no half-created file left


# --------------------------------------------------------------------------------
# faults of a running `mbcore run` process: disk full, signals
# --------------------------------------------------------------------------------
_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # write() fails with EFBIG instead
lim = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (lim, lim))
if sys.argv[2] == "raw":                           # let HDF5 itself hit the limit
    import mbplugins.reporters.hdf5 as h
    h.space_shortage = lambda path, nbytes: ""
from mbcore.cli import main
sys.argv = ["mbcore"] + sys.argv[3:]
sys.exit(main())
"""


def _reference_rows(tmp_path, model, t_last):
    """The uninterrupted run (rk4, fixed step) up to ``t_last``."""
    ref = tmp_path / "ref.h5"
    assert main(["run", str(model), "-o", str(ref), "-q", "--t-end",
                 repr(round(t_last + 0.005, 3))]) == 0
    with Result(ref) as r:
        return np.array(r.t), np.array(r["q"])


def _check_rows_are_the_runs(tmp_path, model, out):
    with Result(out) as r:
        t, q = np.array(r.t), np.array(r["q"])
    assert len(t) > 10
    t_ref, q_ref = _reference_rows(tmp_path, model, float(t[-1]))
    assert np.array_equal(t, t_ref[:len(t)]) and np.array_equal(q, q_ref[:len(t)])
    return t


def _limited_run(tmp_path, examples, mode, limit):
    model = _model_file(tmp_path, examples, t_end=100.0, step=1e-3)
    out = tmp_path / "full.h5"
    env = dict(os.environ, MBCORE_CHECKPOINT_SECONDS="0.05")
    p = subprocess.run([sys.executable, "-c", _LIMITED, str(limit), mode, "run",
                        str(model), "-o", str(out), "-q"], env=env, capture_output=True,
                       text=True, timeout=300)
    return model, out, p


def test_disk_full(tmp_path, examples):
    model, out, p = _limited_run(tmp_path, examples, "check", 3_000_000)
    assert p.returncode == 1, p.stderr
    assert "Traceback" not in p.stderr
    assert "mbcore: run failed: t = " in p.stderr and "file-size limit" in p.stderr
    with Result(out) as r:
        assert r.status == "failed" and "ResultWriteError" in r.reason
        assert f"cannot write the result file '{out}'" in r.reason
        assert "file-size limit is reached (RLIMIT_FSIZE 3000000 bytes" in r.reason
        t_fail = float(r.reason.split("t = ")[1].split(":")[0])
    t = _check_rows_are_the_runs(tmp_path, model, out)
    assert t[-1] <= t_fail < 100.0
    assert out.stat().st_size <= 3_000_000


@pytest.mark.parametrize("limit", [1_500_000, 2_300_000, 3_000_000, 3_700_000])
def test_disk_full_inside_hdf5(tmp_path, examples, limit):
    """Different limits make different writes fail (a series chunk, /t, metadata)."""
    model, out, p = _limited_run(tmp_path, examples, "raw", limit)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])     # not a crash
    assert "mbcore: run failed: t = " in p.stderr
    assert "[Errno 27] File too large" in p.stderr
    assert "Traceback" not in p.stderr.split("mbcore: run failed")[0]
    with Result(out) as r:
        assert r.status == "running"         # could not be updated: as if killed
    _check_rows_are_the_runs(tmp_path, model, out)


def _wait_for_rows(out, proc, n=20, timeout=60.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout and proc.poll() is None:
        try:
            with Result(out) as r:
                if len(r) >= n:
                    return
        except Exception:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no {n} rows in {out}: {proc.poll()}")


@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "SIGTERM"),
                                      (signal.SIGINT, "SIGINT / Ctrl-C")])
def test_signals_during_a_run(tmp_path, examples, sig, name):
    model = _model_file(tmp_path, examples, t_end=100.0, step=1e-3)
    out = tmp_path / "sig.h5"
    p = _start(model, out)
    try:
        _wait_for_rows(out, p)
        p.send_signal(sig)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, p.stderr.read()
    with Result(out) as r:
        assert r.status == "interrupted"
        assert r.reason == f"interrupted after t = {r.t[-1]:.9g} ({name})"
    with mbcore.Result(out) as r, __import__("h5py").File(out, "r") as f:
        # resumable from the last row: a row and its checkpoint state are recorded
        # with the signals held (mbcore.analysis.interrupts)
        assert f["checkpoint/t"][-1] == r.t[-1]
    _check_rows_are_the_runs(tmp_path, model, out)


def test_an_hdf5_write_error_is_worded_as_python_words_it():
    """HDF5 names the system error in its own words, which differ between its write
    paths ('file too large' / 'File too large'): the reason is worded once."""
    from mbplugins.reporters.hdf5 import hdf5_reason
    import os
    exc = OSError("Can't write data (file write failed: time = Mon, filename = 'x.h5', "
                  "file descriptor = 5, errno = 27, error message = 'file too large', "
                  "buf = 0x1, total write size = 8)")
    assert hdf5_reason(exc) == f"[Errno 27] {os.strerror(27)}" == "[Errno 27] File too large"
    assert hdf5_reason(ValueError("bad\nmore")) == "ValueError: bad"
