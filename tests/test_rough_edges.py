"""The rough edges a new user hit (each with the behaviour it has now): duplicate keys,
YAML booleans where text is meant, ``record``/``hold`` as lists, messages without
NumPy reprs, ``mbcore types``, the top-level help, progress bars in logs, an output
file that holds a resumable run, the first checkpoints of a run, an unreachable Dask
scheduler, inertias no body can have, and the documented size limits."""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import h5py
import numpy as np
import pytest

import mbcore
from mbcore import Model, ModelError
from mbcore.cli import main
from mbcore.elements.schema import Param
from mbcore.model.model import inertia_tensor, parse_text

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------ duplicate keys
def test_duplicate_yaml_key_is_refused_with_both_lines():
    text = "name: a\nbodies:\n- name: b\n  mass: 1\n  mass: 100\n"
    with pytest.raises(ModelError) as exc:
        parse_text(text, "yaml", "m.yaml")
    msg = str(exc.value)
    assert "duplicate key 'mass'" in msg and "line 5" in msg and "line 4" in msg


def test_duplicate_json_key_is_refused():
    text = '{"name": "a", "bodies": [{"name": "b", "mass": 1, "mass": 100}]}'
    with pytest.raises(ModelError, match="duplicate key 'mass'"):
        parse_text(text, "json", "m.json")


def test_merge_key_may_be_overridden():
    """YAML's merge key brings defaults that the mapping may override."""
    text = "base: &b {mass: 1, inertia: 2}\nbodies:\n- <<: *b\n  name: c\n  mass: 3\n"
    data = parse_text(text, "yaml", "m.yaml")
    assert data["bodies"][0] == {"mass": 3, "inertia": 2, "name": "c"}


def test_yes_as_a_name_says_to_quote_it(examples):
    text = (examples / "slider_crank_dynamic.yaml").read_text()
    text = re.sub(r"(?m)^name: .*$", "name: yes", text)
    with pytest.raises(ModelError) as exc:
        Model.from_text(text, "yaml")
    assert "boolean" in str(exc.value) and "quotes" in str(exc.value)


# ------------------------------------------------------------------ record / hold lists
@pytest.mark.parametrize("spec", ["q, energy", ["q", "energy"]])
def test_record_as_string_or_list(examples, spec):
    res = mbcore.run(Model.from_file(examples / "slider_crank_dynamic.yaml"),
                     settings={"t_end": 0.05, "record": spec})
    assert set(res.channels) >= {"q", "energy"} and "qdd" not in res.channels


@pytest.mark.parametrize("bad, match", [([], "empty list"), ("q,,qd", "empty name"),
                                        (["q", 3], r"record\[1\]"),
                                        (["q", "qq"], "unknown channel 'qq'")])
def test_record_errors_are_named(examples, bad, match):
    with pytest.raises(ModelError, match=match):
        mbcore.run(Model.from_file(examples / "slider_crank_dynamic.yaml"),
                   settings={"t_end": 0.05, "record": bad})


def test_hold_as_a_list_equals_hold_as_text(examples):
    m = Model.from_file(examples / "slider_crank_dynamic.yaml")
    a = mbcore.run(m, settings={"t_end": 0.02, "hold": "crank.phi"})
    b = mbcore.run(m, settings={"t_end": 0.02, "hold": ["crank.phi"]})
    assert np.array_equal(a["q"], b["q"])


# ------------------------------------------------------------------ messages
def test_zero_axis_message_has_plain_numbers():
    with pytest.raises(ModelError) as exc:
        Param("axis3").validate([0, 0, 0], "joints[0].axis", None)
    assert str(exc.value).endswith("got [0, 0, 0]") and "np." not in str(exc.value)


# ------------------------------------------------------------------ mbcore types
def test_types_lists_a_types_parameters(capsys):
    assert main(["types", "tsda"]) == 0
    out = capsys.readouterr().out
    assert "force tsda" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    assert rows["body_i"][:2] == ["body", "required"]
    assert rows["stiffness"][:2] == ["number", "0"]


def test_types_json_agrees_with_the_schema(capsys):
    from mbcore.plugins.manager import registry
    assert main(["types", "spatial:revolute", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert len(got) == 1 and got[0]["kind"] == "constraint"
    cls = registry().get("constraint", "spatial:revolute")
    assert [p["name"] for p in got[0]["parameters"]] == list(cls.params)
    for p in got[0]["parameters"]:
        assert p["required"] == cls.params[p["name"]].is_required()


def test_types_integrator_options(capsys):
    assert main(["types", "rk2"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s+a\s+0\.75\s", out, re.M)


def test_types_unknown_suggests_the_closest(capsys):
    assert main(["types", "tdsa"]) == 2
    assert "did you mean tsda" in capsys.readouterr().err


def test_types_without_a_name_lists_kinds(capsys):
    assert main(["types", "--kind", "integrator"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("integrator:") and "  genalpha " in out
    assert "\nconstraint:" not in out and "\nforce:" not in out


def test_top_level_help_names_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("run", "info", "plot", "animate", "modes", "sweep", "error", "types",
                "validate", "check", "export", "plugins"):
        assert re.search(rf"^\s+{cmd}\s", out, re.M), cmd


# ------------------------------------------------------------------ progress bars
def test_no_bar_on_a_stderr_that_is_not_a_terminal(monkeypatch):
    from mbcore.results import progress as P
    monkeypatch.delenv("MBCORE_PROGRESS", raising=False)
    monkeypatch.setattr(P.sys.stderr, "isatty", lambda: False, raising=False)
    assert not P.bars_wanted(True)
    assert isinstance(P.progress_bar(total=10), P.NoBar)
    assert list(P.progress_bar(range(3))) == [0, 1, 2]       # still iterates
    monkeypatch.setenv("MBCORE_PROGRESS", "1")
    assert P.bars_wanted(True) and not P.bars_wanted(False)
    monkeypatch.setenv("MBCORE_PROGRESS", "0")
    monkeypatch.setattr(P.sys.stderr, "isatty", lambda: True, raising=False)
    assert not P.bars_wanted(True)


# ------------------------------------------------------------------ -o and resumable runs
def _small_run(examples, out, *extra):
    return main(["run", str(examples / "slider_crank_dynamic.yaml"), "-o", str(out),
                 "--t-end", "0.05", "-q", *extra])


def test_output_that_is_not_a_result_is_kept(tmp_path, examples, capsys):
    out = tmp_path / "notes.h5"
    out.write_text("my notes")
    assert _small_run(examples, out) == 2
    assert "not an HDF5 result" in capsys.readouterr().err
    assert out.read_text() == "my notes"
    assert _small_run(examples, out, "--overwrite") == 0
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "finished"


@pytest.mark.parametrize("status", ["interrupted", "running"])
def test_output_with_a_resumable_run_is_kept(tmp_path, examples, capsys, status):
    out = tmp_path / "run.h5"
    assert _small_run(examples, out) == 0
    with h5py.File(out, "r+") as f:
        assert f["checkpoint/t"].shape[0] >= 1
        f.attrs["status"] = status
    before = out.read_bytes()
    assert _small_run(examples, out) == 2
    err = capsys.readouterr().err
    assert f"'{status}'" in err and f"--resume {out}" in err and "--overwrite" in err
    assert out.read_bytes() == before
    assert _small_run(examples, out, "--overwrite") == 0


def test_finished_result_is_replaced(tmp_path, examples):
    out = tmp_path / "run.h5"
    assert _small_run(examples, out) == 0
    assert _small_run(examples, out) == 0


# ------------------------------------------------------------------ first checkpoints
def test_default_checkpoints_come_sooner_at_the_start(monkeypatch):
    """Default schedule: the first row, then after 1, 2, 4, 8, 16 s, then every 10 s
    of wall time (a fake clock; rows offered every 0.25 s)."""
    from mbcore.analysis import checkpoint as C
    clock = {"t": 100.0}
    monkeypatch.setattr(C.time, "monotonic", lambda: clock["t"])
    monkeypatch.delenv("MBCORE_CHECKPOINT_SECONDS", raising=False)

    class Rep:
        n_rows = n_events = 0
        stores_history = False

        def __init__(self):
            self.at = []

        def write_checkpoint(self, t, *a, **k):
            self.at.append(clock["t"] - 100.0)

    rep = Rep()
    ck = C.Checkpointer(rep)
    for i in range(int(40 / 0.25) + 1):
        clock["t"] = 100.0 + 0.25 * i
        ck.offer(C.Snapshot(t=float(i), y=np.zeros(1), q=None, qd=None, state=dict))
    assert rep.at == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 26.0, 36.0]
    rep2 = Rep()                        # an explicit interval is kept as given
    ck2 = C.Checkpointer(rep2, seconds=10.0)
    for i in range(int(40 / 0.25) + 1):
        clock["t"] = 100.0 + 0.25 * i
        ck2.offer(C.Snapshot(t=float(i), y=np.zeros(1), q=None, qd=None, state=dict))
    assert rep2.at == [0.0, 10.0, 20.0, 30.0, 40.0]


# ------------------------------------------------------------------ Dask scheduler
def test_unreachable_scheduler_is_a_named_error(monkeypatch):
    from mbcore.studies import executors as E
    seen = {}

    class Refusing:
        def __init__(self, address, timeout=None):
            seen["timeout"] = timeout
            raise OSError(f"Timed out trying to connect to {address} after {timeout} s")

    monkeypatch.delenv("MBCORE_DASK_CONNECT_TIMEOUT", raising=False)
    with pytest.raises(ModelError) as exc:
        E._connect(Refusing, "tcp://127.0.0.1:9")
    assert seen["timeout"] == E.CONNECT_TIMEOUT
    msg = str(exc.value)
    assert msg.startswith("scheduler:") and "tcp://127.0.0.1:9" in msg and "5 s" in msg
    monkeypatch.setenv("MBCORE_DASK_CONNECT_TIMEOUT", "0.5")
    with pytest.raises(ModelError, match="within 0.5 s"):
        E._connect(Refusing, "tcp://127.0.0.1:9")


# ------------------------------------------------------------------ inertia
@pytest.mark.parametrize("moments", [(1.0, 1.0, 3.0), (0.1, 0.2, 0.31)])
def test_inertia_beyond_the_triangle_inequality_is_refused(moments):
    with pytest.raises(ModelError, match="triangle inequality"):
        inertia_tensor(moments, "bodies[0].inertia")


@pytest.mark.parametrize("moments", [(1.0, 2.0, 3.0), (0.0, 1.0, 1.0), (2.0, 2.0, 2.0)])
def test_lamina_rod_and_sphere_inertias_are_accepted(moments):
    J = np.array(inertia_tensor(moments, "bodies[0].inertia"))
    assert np.array_equal(np.diag(J), moments)


# ------------------------------------------------------------------ documented limits
def test_documented_size_limits_are_the_code_defaults():
    from mbcore.elements.limits import Limits
    text = (ROOT / "docs" / "reliability.md").read_text()
    sentence = text[text.index("Sizes are bounded by"):][:400]
    d = Limits()
    assert f"10⁶ bodies" in sentence and d.max_bodies == 10 ** 6
    assert "4·10⁶" in sentence and d.max_elements == 4 * 10 ** 6
    assert "10⁶ points" in sentence and d.max_table_points == 10 ** 6
    assert "10⁷ output rows" in sentence and d.max_output_rows == 10 ** 7
    assert "512 MiB" in sentence and d.max_file_bytes == 512 * 2 ** 20


# ------------------------------------------------------------------ modes
def test_free_direction_is_a_rigid_mode_and_rounding_is_not_growth(tmp_path, capsys):
    """A cart on a free rail with a pendulum: one rigid-body mode (frequency 0) and
    the pendulum's ω² = m g l (M + m) / ((M + m)(J + m l²) − m² l²); the rounding
    left in the real part of its eigenvalue (≈ 1e-16) is neither growth nor damping."""
    M, m, J, l, g = 1.0, 0.5, 0.01, 1.0, 9.81
    model = Model.from_dict({
        "name": "cart pendulum", "gravity": [0, -g],
        "bodies": [{"name": "cart", "mass": M, "inertia": 0.1, "position": [0, 0]},
                   {"name": "bob", "mass": m, "inertia": J, "position": [0, -l]}],
        "joints": [{"name": "rail", "type": "translational", "body_i": "cart",
                    "body_j": "ground", "axis": [1, 0]},
                   {"name": "pin", "type": "revolute", "body_i": "cart", "body_j": "bob",
                    "point_i": [0, 0], "point_j": [0, l]}]})
    modes = mbcore.linearize(model).modes()
    assert modes.kind == ["rigid", "oscillatory"] and not modes.unstable.any()
    w2 = m * g * l * (M + m) / ((M + m) * (J + m * l ** 2) - m ** 2 * l ** 2)
    assert modes.omega[1] == pytest.approx(math.sqrt(w2), rel=1e-9)
    table = modes.table()
    assert "e-1" not in table.splitlines()[2].split("j")[0]   # no 1e-17 noise printed
