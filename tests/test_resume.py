"""Checkpoints and exact resume: mbcore.analysis.checkpoint (the matrix of integrators, loops
and formulations resumed inside a step: tests/test_resume_exact.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from mbcore import Model
from mbcore.analysis.checkpoint import CheckpointError, read_checkpoint
from mbcore.analysis.runner import resume
from mbcore.cli import main
from mbcore.results.result import Result
from mbcore.analysis.runner import run

RK4 = {"integrator": "rk4", "step": 0.001, "output_step": 0.01}
CHANNELS = ("q", "qd", "qdd", "lam", "energy", "violation", "integrator")


def _model(examples):
    return Model.from_file(examples / "fourbar_dap.yaml")


def _series(path, names=CHANNELS):
    with Result(path) as r:
        return np.array(r.t), {c: np.array(r[c]) for c in names if c in r.channels}


def _reference(tmp_path, examples, settings, name="ref.h5"):
    out = tmp_path / name
    run(_model(examples), settings=settings, output=out)
    return _series(out)


@pytest.mark.parametrize("record", [None, "q, qd, energy"])     # row path, block path
def test_rk4_resume_of_finished_run_is_bit_identical(tmp_path, examples, record):
    s = dict(RK4, t_end=0.6, **({"record": record} if record else {}))
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=dict(s, t_end=0.3), output=out)
    ck = read_checkpoint(out)
    assert ck.t == pytest.approx(0.3) and ck.n_rows == 31
    resume(out, t_end=0.6)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    for c in ref:
        assert np.array_equal(got[c], ref[c]), c
    with Result(out) as r:
        assert r.status == "finished"
        assert [e.kind for e in r.events].count("resume") == 1
        assert r.settings["t_end"] == 0.6
    assert read_checkpoint(out).t == pytest.approx(0.6)


@pytest.mark.parametrize("integrator", ["dopri5", "bdf"])
def test_adaptive_resume_of_finished_run_is_bit_identical(tmp_path, examples, integrator):
    """The finished run's last step was shortened to its t_end: the resume redoes it
    from its start (its rows are recorded again), as the longer run took it."""
    s = {"integrator": integrator, "output_step": 0.01, "t_end": 0.6, "rtol": 1e-8,
         "atol": 1e-10}
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=dict(s, t_end=0.25), output=out)
    t_first, first = _series(out, ("q",))
    resume(out, t_end=0.6)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    for c in ref:
        assert np.array_equal(got[c], ref[c]), (c, np.max(np.abs(got[c] - ref[c])))
    with Result(out) as r:
        redone = [e for e in r.events if e.kind == "resume"][0].message
    t_start = float(redone.split("from t = ")[1].split(" ")[0])
    assert t_start < 0.25
    k = int(np.searchsorted(t_first, t_start, side="right"))
    assert np.array_equal(got["q"][:k], first["q"][:k])     # the rows before it are kept


def test_cp_resume_keeps_partition(tmp_path, examples):
    s = dict(RK4, t_end=0.4, formulation="cp")
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=dict(s, t_end=0.2), output=out)
    ck = read_checkpoint(out)
    assert ck.state["partition"] and len(ck.y) == 2 * len(ck.state["partition"]) + 1
    resume(out, t_end=0.4)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    for c in ref:                    # its Newton warm start is in the checkpoint too
        assert np.array_equal(got[c], ref[c]), c


@pytest.mark.parametrize("integ", ["rk4", "dopri5", "dop853"])
def test_killed_run_resumes_from_last_checkpoint_and_truncates(tmp_path, examples, integ):
    """A file whose rows go past its last checkpoint (SIGKILL): those rows are
    dropped and recomputed; the result equals the uninterrupted run bit for bit
    (the step that produced the checkpoint's output is redone from its start)."""
    s = dict(RK4, t_end=0.5) if integ == "rk4" else \
        {"integrator": integ, "output_step": 0.01, "t_end": 0.5, "rtol": 1e-8}
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=s, output=out, checkpoint_every=0.1,
        checkpoint_seconds=1e9)
    _forget_checkpoints_after(out, 0.2)
    ck = read_checkpoint(out)
    assert ck.t == pytest.approx(0.2) and ck.n_rows < 51
    assert ck.step["loop"] == "rk" and ck.step["t"] < ck.t and ck.step["h"] > 0
    resume(out)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    for c in ref:
        assert np.array_equal(got[c], ref[c]), c


def _forget_checkpoints_after(out, t):
    """Make ``out`` look killed right after its checkpoint at ``t``: later
    checkpoints dropped, status ``running``."""
    with h5py.File(out, "r+") as f:
        g = f["checkpoint"]
        k = int(np.searchsorted(g["t"][:], t + 1e-12))
        for ds in g.values():
            ds.resize((k,) + ds.shape[1:])
        f.attrs["status"] = "running"


MULTISTEP = [({"integrator": "bdf"}, "bdf"), ({"integrator": "abm"}, "abm"),
             ({"integrator": "implicit_euler", "step": 0.002}, "theta"),
             ({"integrator": "trapezoid", "step": 0.003}, "theta"),
             ({"integrator": "bdf", "formulation": "stiff"}, "bdf"),
             ({"integrator": "bdf", "formulation": "ggl"}, "bdf"),
             ({"integrator": "bdf", "record": "q, qd, energy"}, "bdf")]   # block path


@pytest.mark.parametrize("extra, kind", MULTISTEP)
def test_multistep_resume_from_mid_run_checkpoint_is_bit_identical(tmp_path, examples,
                                                                   extra, kind, monkeypatch):
    """A multistep run cut at a mid-run checkpoint (a killed file) resumes with the
    stored history (differences, order, step, Jacobian/LU): bit for bit the
    uninterrupted run."""
    if "record" in extra:            # block path: hand rows over (and checkpoint) often
        from mbplugins.analyses import dynamic
        monkeypatch.setattr(dynamic._RowBlock, "SECONDS", 0.0)
    s = dict({"output_step": 0.01, "t_end": 0.4, "rtol": 1e-8, "atol": 1e-10}, **extra)
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=s, output=out, checkpoint_every=0.1,
        checkpoint_seconds=1e9)
    _forget_checkpoints_after(out, 0.2)
    ck = read_checkpoint(out)
    assert ck.t == pytest.approx(0.2) and ck.n_rows < 41
    assert ck.step["loop"] == kind and ck.step["t"] < ck.t
    assert ck.step["history"]["kind"] == kind
    with Result(tmp_path / "ref.h5") as r:
        assert r.stats.get("loop", "compiled") == "compiled"
    resume(out)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    for c in ref:
        assert np.array_equal(got[c], ref[c]), (c, np.max(np.abs(got[c] - ref[c])))


def test_incomplete_history_is_an_error_naming_the_file(tmp_path, examples):
    out = tmp_path / "part.h5"
    run(_model(examples), settings={"integrator": "bdf", "output_step": 0.01,
                                    "t_end": 0.1}, output=out)
    with h5py.File(out, "r+") as f:
        f["checkpoint/history"].resize((f["checkpoint/history"].shape[0], 3))
    with pytest.raises(CheckpointError, match="part.h5.*integrator step state"):
        read_checkpoint(out)


def test_python_loop_multistep_resume_is_bit_identical(tmp_path, examples):
    """The Python driver (``loop: python``) stores the integrator object's state
    (``Integrator.get_state``: bdf's differences, order, Jacobian and LU) at the
    start of the step: the resumed run equals the uninterrupted one."""
    s = {"integrator": "bdf", "loop": "python", "output_step": 0.01, "t_end": 0.4,
         "rtol": 1e-8, "atol": 1e-10}
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=s, output=out, checkpoint_every=0.1,
        checkpoint_seconds=1e9)
    with h5py.File(out, "r+") as f:
        g = f["checkpoint"]
        k = int(np.searchsorted(g["t"][:], 0.2 + 1e-12))
        for ds in g.values():
            ds.resize((k,) + ds.shape[1:])
        f.attrs["status"] = "running"
    ck = read_checkpoint(out)
    assert ck.step["loop"] == "python" and "_D" in ck.step["driver"]["integrator"]
    resume(out)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    for c in ref:
        assert np.array_equal(got[c], ref[c]), c


def test_checkpoint_without_step_state_resumes_to_tolerance_with_a_note(tmp_path,
                                                                       examples):
    """A checkpoint without ``state.step`` (an older file) still resumes: the method
    restarts at the checkpoint's output, and an event says the result agrees to the
    tolerance.  Bound: each run's global error stays near the tolerance (the
    calibrated controller, docs/integrators.md), rtol 1e-8 of coordinates of size
    <= 4: both within ~4e-8 of the exact solution, so they differ by < 1e-7; 1e-6
    asserted (observed 5e-14)."""
    s = {"integrator": "dopri5", "output_step": 0.001, "t_end": 0.3, "rtol": 1e-8,
         "atol": 1e-10}
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "part.h5"
    run(_model(examples), settings=s, output=out, checkpoint_every=0.1,
        checkpoint_seconds=1e9)
    _forget_checkpoints_after(out, 0.2)
    with h5py.File(out, "r+") as f:              # as an older mbcore wrote it
        g = f["checkpoint"]
        k = g["t"].shape[0] - 1
        st = json.loads(g["state"][k])
        st.pop("step")
        g["state"][k] = json.dumps(st)
        del g["history"]
    assert read_checkpoint(out).step is None
    resume(out)
    t, got = _series(out)
    assert np.array_equal(t, t_ref)
    err = np.max(np.abs(got["q"] - ref["q"]))
    assert err < 1e-6, err
    with Result(out) as r:
        note = [e.message for e in r.events if e.kind == "resume"][0]
    assert "tolerance" in note


def _wait_for_checkpoint(path, proc, timeout=60.0, after=None):
    """Until the file has a checkpoint (``after``: one later than that time)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        assert proc.poll() is None, "run ended before its first checkpoint"
        try:
            with h5py.File(path, "r", libver="latest", swmr=True) as f:
                ts = f["checkpoint/t"]
                if ts.shape[0] > 0 and (after is None or ts[ts.shape[0] - 1] > after):
                    return
        except (OSError, KeyError):
            pass
        time.sleep(0.05)
    raise AssertionError("no checkpoint")


def test_sigterm_bdf_resumes_bit_identically(tmp_path, examples):
    """The final checkpoint of an interrupted bdf run holds its history: the resumed
    run equals an uninterrupted one to the same t_end."""
    model = tmp_path / "m.yaml"
    text = (examples / "fourbar_dap.yaml").read_text()
    text = text.replace("integrator: dopri5", "integrator: bdf")
    model.write_text(text.replace("t_end: 5.0", "t_end: 2000.0"))
    out = tmp_path / "m.h5"
    p = _cli(["run", str(model), "-o", str(out), "-q"], MBCORE_CHECKPOINT_SECONDS="0.2")
    _wait_for_checkpoint(out, p, after=0.0)          # one inside the run: a bdf step
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)
    assert p.returncode == 130, p.stderr.read()
    ck = read_checkpoint(out)
    assert ck.step["loop"] == "bdf" and ck.step["history"]["kind"] == "bdf"
    t_end = round(ck.t + 0.05, 2)
    assert main(["run", "--resume", str(out), "--t-end", str(t_end), "-q"]) == 0
    ref = tmp_path / "ref.h5"
    assert main(["run", str(model), "-o", str(ref), "-q", "--t-end", str(t_end)]) == 0
    t1, a = _series(out, ("q", "qd"))
    t2, b = _series(ref, ("q", "qd"))
    assert np.array_equal(t1, t2) and np.array_equal(a["q"], b["q"])
    assert np.array_equal(a["qd"], b["qd"])


def _cli(args, **env):
    e = dict(os.environ, **env)
    return subprocess.Popen([sys.executable, "-m", "mbcore.cli", *args], env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_interrupts_checkpoints_and_resumes(tmp_path, examples, sig):
    model = tmp_path / "m.yaml"
    text = (examples / "fourbar_dap.yaml").read_text()
    text = text.replace("integrator: dopri5", "integrator: rk4\n  step: 0.0001")
    model.write_text(text.replace("t_end: 5.0", "t_end: 30.0"))
    out = tmp_path / "m.h5"
    p = _cli(["run", str(model), "-o", str(out), "-q"], MBCORE_CHECKPOINT_SECONDS="0.2")
    _wait_for_checkpoint(out, p)
    p.send_signal(sig)
    p.wait(timeout=60)
    assert p.returncode == 130, p.stderr.read()
    with Result(out) as r:
        assert r.status == "interrupted", r.status
        n = len(r)
        t_last = float(r.t[-1])
    ck = read_checkpoint(out)
    assert ck.n_rows == n and ck.t == t_last          # the final checkpoint
    # resume a little further on the CLI; compare with an uninterrupted run
    t_end = round(t_last + 0.05, 2)
    assert main(["run", "--resume", str(out), "--t-end", str(t_end), "-q"]) == 0
    ref = tmp_path / "ref.h5"
    assert main(["run", str(model), "-o", str(ref), "-q", "--t-end", str(t_end)]) == 0
    t1, a = _series(out, ("q", "qd"))
    t2, b = _series(ref, ("q", "qd"))
    assert np.array_equal(t1, t2) and np.array_equal(a["q"], b["q"])
    assert np.array_equal(a["qd"], b["qd"])


def test_resume_errors_name_the_file(tmp_path, examples):
    kin = tmp_path / "kin.h5"
    run(Model.from_file(examples / "fourbar_kap.yaml"), output=kin)
    with pytest.raises(CheckpointError, match="kin.h5.*kinematic"):
        resume(kin)
    out = tmp_path / "d.h5"
    run(_model(examples), settings=dict(RK4, t_end=0.1), output=out)
    with pytest.raises(CheckpointError, match=r"d\.h5.*nothing to do"):
        resume(out)
    with pytest.raises(CheckpointError, match="differs"):
        resume(out, 0.2, model=Model.from_file(examples / "fourbar_kap.yaml"))
    with h5py.File(out, "r+") as f:
        f["versions"].attrs["mbcore"] = "0.0.1"
    with pytest.raises(CheckpointError, match="0.0.1"):
        resume(out, 0.2)
    with pytest.raises(CheckpointError, match="no such"):
        resume(tmp_path / "missing.h5")
    assert main(["run", "--resume", str(kin), "-q"]) == 2


def test_checkpoint_every_writes_each_checkpoint(tmp_path, examples, monkeypatch):
    """51 checkpoints at the requested simulated times (their cost is measured in
    benchmarks/run.py, never in a timed test)."""
    import mbcore.analysis.checkpoint as ckmod
    made = []
    real = ckmod.Checkpointer.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        made.append(self)
    monkeypatch.setattr(ckmod.Checkpointer, "__init__", init)
    out = tmp_path / "c.h5"
    run(_model(examples), settings=dict(RK4, t_end=0.5), output=out,
              checkpoint_every=0.01, checkpoint_seconds=1e9)
    assert made[0].count == 51
    with h5py.File(out, "r") as f:
        assert f["checkpoint/t"].shape == (51,)
        assert np.allclose(f["checkpoint/t"][:], np.linspace(0, 0.5, 51))


def test_run_with_resume_path(tmp_path, examples):
    s = dict(RK4, t_end=0.3)
    t_ref, ref = _reference(tmp_path, examples, s)
    out = tmp_path / "p.h5"
    run(_model(examples), settings=dict(s, t_end=0.1), output=out)
    part = run(None, resume=out, settings={"t_end": 0.3})
    # the rows from the start of the step that produced the checkpoint's (t = 0.1)
    assert len(part) == 21 and part.t[0] == pytest.approx(0.1)
    t, got = _series(out)
    assert np.array_equal(got["q"], ref["q"]) and np.array_equal(t, t_ref)
    from mbcore.errors import ModelError
    with pytest.raises(ModelError, match="t_end"):
        run(None, resume=out, settings={"t_end": 0.5, "step": 0.01})


def test_resume_refuses_a_file_still_being_written(tmp_path, examples):
    model = tmp_path / "m.yaml"
    text = (examples / "fourbar_dap.yaml").read_text()
    text = text.replace("integrator: dopri5", "integrator: rk4\n  step: 0.0001")
    model.write_text(text.replace("t_end: 5.0", "t_end: 30.0"))
    out = tmp_path / "m.h5"
    p = _cli(["run", str(model), "-o", str(out), "-q"], MBCORE_CHECKPOINT_SECONDS="0.1")
    try:
        _wait_for_checkpoint(out, p)
        with pytest.raises(CheckpointError, match="m.h5.*being written"):
            resume(out, 40.0)
    finally:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
    resume(out, read_checkpoint(out).t + 0.05)           # now it can


def test_cli_resume_without_quiet_prints_the_summary(tmp_path, examples, capsys):
    # the command mbcore prints after Ctrl-C has no -q: it must work as given
    out = tmp_path / "p.h5"
    run(_model(examples), settings=dict(RK4, t_end=0.1), output=out)
    capsys.readouterr()
    assert main(["run", "--resume", str(out), "--t-end", "0.2"]) == 0
    printed = capsys.readouterr().out
    assert "finished" in printed and "0.2" in printed
    with Result(out) as r:
        assert r.status == "finished" and r.t[-1] == pytest.approx(0.2)


def test_the_old_location_of_resume_still_works_with_a_warning(tmp_path, examples):
    import mbcore
    import mbcore.analysis.checkpoint as C
    with pytest.warns(DeprecationWarning, match="mbcore.resume"):
        old = C.resume
    assert old is mbcore.resume is resume


def test_checkpoint_state_keeps_complex_arrays_exactly():
    """An integrator's step state may hold complex arrays (Radau IIA's complex
    Newton system): both parts are stored, and every other dtype as before."""
    import numpy as np
    from mbcore.analysis.checkpoint import pack_state, unpack_state
    rng = np.random.default_rng(7)
    z = rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))
    state = {"z": z, "w": z[0].astype(np.complex64), "x": rng.standard_normal(5),
             "i": np.arange(4), "nested": ({"b": np.array([True, False])}, 2.5)}
    meta, flat = pack_state(state)
    back = unpack_state(meta, flat)
    assert back["z"].dtype == np.complex128 and np.array_equal(back["z"], z)
    assert back["w"].dtype == np.complex64 and np.array_equal(back["w"], state["w"])
    assert np.array_equal(back["x"], state["x"]) and back["i"].dtype == state["i"].dtype
    assert np.array_equal(back["nested"][0]["b"], [True, False])
    assert back["nested"][1] == 2.5
