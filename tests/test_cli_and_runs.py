"""End to end: model file -> kinematic analysis -> HDF5 -> CLI, including a run that
locks up (the file keeps its rows and says why it failed)."""
from __future__ import annotations

import subprocess
import sys

import h5py
import numpy as np
import pytest

import mbcore
from mbcore import AssemblyError, LockupError, Model, SingularJacobianError
from mbcore.cli import main


def test_cli_run_writes_hdf5_readable_by_plain_h5py(tmp_path, examples, capsys):
    out = tmp_path / "kap.h5"
    assert main(["run", str(examples / "fourbar_kap.yaml"), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "status:    finished" in text and "rows:      41" in text
    with h5py.File(out, "r") as f:              # only the documented layout
        assert f.attrs["status"] == "finished"
        t = f["t"][:]
        labels = list(f["labels/q"].asstr()[:])
        q = f["series/q"][:]
        assert len(t) == 41 == q.shape[0]
        k = labels.index("crank.phi")
        np.testing.assert_allclose(q[:, k], 1.0472 + 6.2832 * t, atol=1e-9)
        assert "KAP four-bar" in f["model"].asstr()[()]
        assert f["versions"].attrs["mbcore"] == mbcore.__version__
    assert main(["info", str(out)]) == 0
    assert "KAP four-bar" in capsys.readouterr().out


def test_lockup_stops_with_time_and_keeps_rows(tmp_path, examples, backend):
    model = Model.from_file(examples / "fourbar_lockup.yaml")
    out = tmp_path / "lock.h5"
    with pytest.raises(LockupError) as exc:
        mbcore.run(model, output=out, kernels=backend)
    err = exc.value
    # limit position: cos(theta) = 0.125 -> theta = 1.4454 rad, t = theta - pi/6
    t_limit = np.arccos(0.125) - np.pi / 6
    assert t_limit < err.t <= t_limit + 0.011
    assert f"t = {err.t:.9g}" in str(err) and "lock-up" in str(err)
    assert "drive.c" in err.constraints
    with mbcore.Result(out) as res:
        assert res.status == "failed"
        assert "LockupError" in res.reason and "lock-up" in res.reason
        assert len(res) == int(round(err.t / 0.01))     # every row before the failure
        assert res.t[-1] < err.t
        # the rows recorded are assembled configurations: each met the Newton test
        # |Phi| <= tolerance (1 + |q|) (default 1e-10; observed 1.9e-10); 100x it
        bound = 100 * 1e-10 * (1 + np.abs(res["q"]).max())
        assert np.all(res["solver/phi_norm"] < bound)


def test_cli_failed_run_exit_code_and_message(tmp_path, examples, capsys):
    out = tmp_path / "lock.h5"
    assert main(["run", str(examples / "fourbar_lockup.yaml"), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert "run failed: t = 0.93" in err and str(out) in err


def test_cli_bad_model_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("bodies: [{name: a, position: [1, 2, 3]}]\n")
    assert main(["run", str(bad), "-o", str(tmp_path / "x.h5")]) == 2    # bad input
    err = capsys.readouterr().err
    assert "bodies[0].position: expected 2 numbers, got 3" in err
    assert "computed so far" not in err
    assert not (tmp_path / "x.h5").exists()


def test_cli_exit_codes_and_no_false_result_claims(tmp_path, examples, capsys):
    """0 done, 1 the run failed (rows kept), 2 bad input (nothing computed): an output
    path in a missing directory, a setting the analysis rejects, a validation error
    inside the run (no claim of results in a file that was not written)."""
    model = str(examples / "fourbar_kap.yaml")
    assert main(["run", model, "-o", str(tmp_path / "nodir" / "x.h5"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err and "computed so far" not in err
    assert main(["run", model, "-o", str(tmp_path / "ok.h5"), "-q"]) == 0
    bad = tmp_path / "bad_setting.yaml"
    bad.write_text((examples / "fourbar_kap.yaml").read_text().replace("t_end: 1.0",
                                                                         "t_end: -1.0"))
    code = main(["run", str(bad), "-o", str(tmp_path / "b.h5"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "t_end" in err and "computed so far" not in err


def test_cli_plugins_lists_types_with_plugin(capsys):
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    for name in ("revolute", "translational", "absolute", "fixed", "absolute_driver",
                 "relative_driver", "kinematic", "hdf5", "memory"):
        line = [ln for ln in out.splitlines() if f"  {name} " in ln]
        assert line and f"builtin (mbcore {mbcore.__version__})" in line[0], name


def test_console_script_entry_point(tmp_path, examples):
    out = tmp_path / "s.h5"
    r = subprocess.run([sys.executable, "-m", "mbcore.cli", "run",
                        str(examples / "slider_crank.yaml"), "-o", str(out), "-q"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with mbcore.Result(out) as res:
        assert res.status == "finished" and len(res) == 54


def test_underdriven_model_names_missing_dof(examples):
    m = Model.from_file(examples / "fourbar_kap.yaml")
    m.elements["drivers"].clear()
    with pytest.raises(mbcore.ModelError, match=r"1 degree\(s\) of freedom are not driven"):
        mbcore.run(m)


def test_singular_initial_configuration_names_equations():
    """A crank and coupler stretched in line with the driven slider at the dead
    centre: the Jacobian is singular at the solution itself."""
    m = Model("dead centre")
    m.add_body("crank", position=(0.5, 0.0), angle=0.0)
    m.add_body("rod", position=(2.0, 0.0), angle=0.0)
    m.add_body("slider", position=(3.0, 0.0))
    m.add_joint("revolute", "A", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-0.5, 0))
    m.add_joint("revolute", "B", body_i="crank", body_j="rod", point_i=(0.5, 0),
                point_j=(-1, 0))
    m.add_joint("revolute", "C", body_i="rod", body_j="slider", point_i=(1, 0),
                point_j=(0, 0))
    m.add_joint("translational", "S", body_i="ground", body_j="slider")
    m.add_driver("absolute_driver", "drive", body="slider", coordinate="x",
                 function="3 - t**2")
    with pytest.raises((SingularJacobianError, AssemblyError)) as exc:
        mbcore.run(m, settings={"t_end": 0.1, "output_step": 0.05})
    assert exc.value.t == 0.0
    assert "drive.c" in str(exc.value) or "S.n" in str(exc.value)


def test_impossible_assembly_names_residuals_and_keeps_file(tmp_path, examples):
    """A frame longer than the other three links together cannot be assembled."""
    model = Model.from_file(examples / "fourbar_kap.yaml")
    model.elements["joints"][3].raw["point_j"] = [12.0, 0.0]
    out = tmp_path / "x.h5"
    with pytest.raises(AssemblyError, match=r"t = 0: initial assembly failed: .*largest "
                                            r"residuals: .*(O4|A|B|O2)\.[xy]") as exc:
        mbcore.run(model, output=out)
    assert exc.value.constraints
    with mbcore.Result(out) as res:
        assert res.status == "failed" and len(res) == 0 and "AssemblyError" in res.reason


def test_assembly_event_reports_body_moves(examples):
    model = Model.from_file(examples / "fourbar_kap.yaml")
    res = mbcore.run(model)
    ev = [e for e in res.events if e.kind == "assembly"]
    assert len(ev) == 1
    est = np.array([[*b.position] for b in model.bodies])
    moved = np.hypot(*(res["q"][0].reshape(3, 3)[:, :2] - est).T)
    k = int(np.argmax(moved))
    assert model.bodies[k].name in ev[0].message and f"{moved[k]:.4g}" in ev[0].message
    assert res.stats["assembly_max_move"] == pytest.approx(moved[k])


def test_cli_check_describes_the_system(examples, capsys):
    assert main(["check", str(examples / "platform.yaml")]) == 0
    out = capsys.readouterr().out
    assert "n = 9 coordinates, m = 8 constraint equations" in out
    assert "constraint revolute" in out and "force      tsda" in out and "gravity" in out


@pytest.mark.parametrize("comp", ["gzip", "lzf"])
def test_run_compression_option(tmp_path, examples, comp):
    """``mbcore run --compression``: the series are compressed, the values the same
    as an uncompressed run's."""
    from mbcore.results.result import Result
    model = str(examples / "fourbar_kap.yaml")
    plain, packed = tmp_path / "plain.h5", tmp_path / "packed.h5"
    assert main(["run", model, "-o", str(plain), "-q", "--t-end", "0.5"]) == 0
    assert main(["run", model, "-o", str(packed), "-q", "--t-end", "0.5",
                 "--compression", comp]) == 0
    with h5py.File(packed, "r") as f:
        assert f["series/q"].compression == comp
    with h5py.File(plain, "r") as f:
        assert f["series/q"].compression is None
    with Result(plain) as a, Result(packed) as b:
        assert np.array_equal(a["q"], b["q"])


def test_closed_pipe_is_not_a_traceback(tmp_path, examples):
    """``mbcore export RESULT -o - | head -1`` (a reader that stops early): exit 141,
    no traceback, no 'Exception ignored' from the final flush."""
    out = tmp_path / "r.h5"
    assert main(["run", str(examples / "fourbar_kap.yaml"), "-o", str(out), "-q",
                 "--t-end", "2", "--step", "0.001"]) == 0      # MBs of CSV: > a pipe buffer
    code = "import sys; from mbcore.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.Popen([sys.executable, "-c", code, "export", str(out), "-o", "-", "-q"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.readline()                      # one line, then hang up
    p.stdout.close()
    err = p.stderr.read().decode()
    rc = p.wait(timeout=60)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert rc == 141
