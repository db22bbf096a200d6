"""CLI conventions (issue 15, deliverable 5): validate, export, --help everywhere,
exit codes, --quiet / --verbose through logging."""
from __future__ import annotations

import io
import logging

import numpy as np
import pytest

from mbcore.cli import main
from mbcore.results.result import Result

SUBCOMMANDS = ["run", "info", "plugins", "check", "validate", "export"]


@pytest.fixture(scope="module")
def kap_h5(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "kap.h5"
    ex = __import__("conftest").EXAMPLES
    assert main(["run", str(ex / "fourbar_kap.yaml"), "-o", str(out), "-q"]) == 0
    return out


@pytest.mark.quick
@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_help_everywhere_with_examples(cmd, capsys):
    assert main([cmd, "--help"]) == 0
    text = capsys.readouterr().out
    assert f"usage: mbcore {cmd}" in text
    assert "examples:" in text and f"mbcore {cmd}" in text.split("examples:")[1]
    assert "--quiet" in text and "--verbose" in text


@pytest.mark.quick
def test_main_help_and_usage_errors(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in SUBCOMMANDS:
        assert cmd in out
    assert main(["no-such-command"]) == 2
    assert "invalid choice" in capsys.readouterr().err
    assert main(["export"]) == 2          # missing argument
    assert main([]) == 2


def test_validate_ok_and_quiet(examples, capsys):
    assert main(["validate", str(examples / "fourbar_kap.yaml")]) == 0
    assert "valid" in capsys.readouterr().out
    assert main(["validate", "-q", str(examples / "fourbar_kap.yaml")]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""
    assert main(["-q", "validate", str(examples / "fourbar_kap.yaml")]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""


def test_validate_bad_model_exit_2_names_key_path(examples, tmp_path, capsys):
    text = (examples / "fourbar_kap.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    # joint B refers to a body that does not exist
    assert "body_j: follower, point_i: [2, 0]" in text
    bad.write_text(text.replace("body_j: follower, point_i: [2, 0]",
                                "body_j: folower, point_i: [2, 0]", 1))
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mbcore: error: joints[2].body_j") and "folower" in err
    # an unknown key, a missing file, an unparsable file
    bad.write_text(text + "\nbogus_key: 1\n")
    assert main(["validate", str(bad)]) == 2
    assert "bogus_key" in capsys.readouterr().err
    assert main(["validate", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    bad.write_text("bodies: [\n")
    assert main(["validate", "-q", str(bad)]) == 2
    assert "mbcore: error" in capsys.readouterr().err


def _read_csv(text):
    lines = text.splitlines()
    return lines[0].split(","), np.loadtxt(lines[1:], delimiter=",", ndmin=2)


def test_export_csv_equals_the_result(kap_h5, tmp_path, capsys):
    out = tmp_path / "all.csv"
    assert main(["export", str(kap_h5), "-o", str(out)]) == 0
    assert "rows" in capsys.readouterr().err
    header, data = _read_csv(out.read_text())
    with Result(kap_h5) as res:
        assert header == res.headers()
        np.testing.assert_array_equal(data[:, 0], res.t)
        expect = np.hstack([res.series(c) for c in res.channels])
        np.testing.assert_array_equal(data[:, 1:], expect)


def test_export_stdout_channels_and_time_window(kap_h5, capsys):
    assert main(["export", str(kap_h5), "-o", "-", "--channels", "q,qd",
                 "--t0", "0.1", "--t1", "0.3"]) == 0
    cap = capsys.readouterr()
    header, data = _read_csv(cap.out)
    with Result(kap_h5) as res:
        assert header == res.headers("q,qd")
        keep = (res.t >= 0.1) & (res.t <= 0.3)
        assert keep.sum() == len(data) > 0
        np.testing.assert_array_equal(data[:, 1:], np.hstack([res["q"], res["qd"]])[keep])


def test_export_default_path_and_quiet(kap_h5, capsys):
    assert main(["export", "-q", str(kap_h5)]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""
    assert kap_h5.with_suffix(".csv").exists()


def test_export_bad_input_exit_2(kap_h5, tmp_path, capsys):
    assert main(["export", str(kap_h5), "--channels", "q,qdx", "-o", "-"]) == 2
    err = capsys.readouterr().err
    assert "--channels" in err and "qdx" in err
    assert main(["export", str(tmp_path / "none.h5")]) == 2
    assert "none.h5" in capsys.readouterr().err
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    assert main(["export", str(junk)]) == 2
    assert "not an HDF5 file" in capsys.readouterr().err
    assert main(["export", str(kap_h5), "--t0", "1", "--t1", "0.5"]) == 2
    assert main(["export", str(kap_h5), "-o", str(tmp_path / "no" / "x.csv")]) == 2
    assert main(["info", str(tmp_path / "none.h5")]) == 2


def test_run_quiet_prints_nothing_and_verbose_logs(examples, tmp_path, capsys):
    out = tmp_path / "r.h5"
    assert main(["run", str(examples / "fourbar_kap.yaml"), "-o", str(out), "--quiet"]) == 0
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err == ""
    assert main(["-v", "run", str(examples / "fourbar_kap.yaml"), "-o", str(out)]) == 0
    cap = capsys.readouterr()
    assert "INFO: running" in cap.err and str(out) in cap.err
    assert "status:    finished" in cap.out
    assert main(["export", "--verbose", str(out), "-o", str(tmp_path / "r.csv")]) == 0
    assert "INFO: wrote 41 rows" in capsys.readouterr().err


def test_library_warnings_go_through_logging(capsys):
    """The CLI routes library log records and warnings to stderr at the chosen level."""
    from mbcore.cli.export import configure_logging

    import warnings

    class A:
        verbose = 0
    with warnings.catch_warnings():      # pytest records warnings: let logging show them
        warnings.simplefilter("always")
        configure_logging(A())
        logging.getLogger("mbcore.something").info("hidden")
        logging.getLogger("mbplugins.x").warning("shown %d", 1)
        warnings.warn("a library warning")
        logging.captureWarnings(False)
    err = capsys.readouterr().err
    assert "hidden" not in err and "shown 1" in err and "a library warning" in err

    class Q:
        quiet = True
    configure_logging(Q())
    logging.getLogger("mbcore.x").warning("not shown")
    assert "not shown" not in capsys.readouterr().err
    logging.captureWarnings(False)
    configure_logging(A())


def test_export_of_a_file_being_written(tmp_path, capsys):
    from mbcore.results.reporting import Channel, RunInfo
    from mbplugins.reporters.hdf5 import HDF5Reporter
    path = tmp_path / "run.h5"
    rep = HDF5Reporter(path, block_rows=4, flush_seconds=0.0)
    rep.start(RunInfo(analysis="test", channels=[Channel("q", ["a", "b"])]))
    try:
        for i in range(6):
            rep.record(0.5 * i, {"q": np.array([i, 2.0 * i])})
        rep.flush()
        assert main(["export", str(path), "-o", "-"]) == 0
        cap = capsys.readouterr()
        assert "still being written" in cap.err
        header, data = _read_csv(cap.out)
        assert header == ["t", "q/a", "q/b"]
        np.testing.assert_array_equal(data, [[0.5 * i, i, 2.0 * i] for i in range(6)])
    finally:
        rep.finish("finished", "", {})


def test_csv_progress_bar_writes_the_same_text(kap_h5):
    with Result(kap_h5) as res:
        plain, chunked = io.StringIO(), io.StringIO()
        res.to_csv(plain)
        res.to_csv(chunked, progress=True, chunk_rows=7)   # several chunks, bar on stderr
        assert plain.getvalue() == chunked.getvalue()
        assert len(plain.getvalue().splitlines()) == len(res) + 1
