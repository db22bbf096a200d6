"""Safe inputs (issue 18): model files are data.

No ``eval``/``exec``/``pickle``/unsafe YAML anywhere in the sources; driver and stop
expressions only through the safe parser; table files resolved relative to the model
file and refused outside its directory unless allowed; sizes bounded by
``mbcore.elements.limits`` (a table of 10^8 points, a chain of 10^7 bodies, an output grid of
10^12 rows are a ModelError naming the key, not a machine out of memory).
"""
from __future__ import annotations

import ast
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import ModelError
from mbcore.elements.functions import Table, parse_function
from mbcore.elements.limits import limits, override
from mbcore.model import Model

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted((ROOT / "src").rglob("*.py")) + sorted((ROOT / "ext").glob("*.p*"))


# ------------------------------------------------------------------ no code from data
def _dangerous_calls(text: str) -> list[str]:
    """Calls of eval / exec / compile / pickle.load(s) / marshal.loads and yaml.load
    without a safe loader in Python source text."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else (
            f"{getattr(f.value, 'id', '?')}.{f.attr}" if isinstance(f, ast.Attribute) else "")
        if name in ("eval", "exec", "compile", "__import__", "pickle.load", "pickle.loads",
                    "marshal.loads", "yaml.unsafe_load", "yaml.full_load"):
            found.append(f"{name} (line {node.lineno})")
        if name == "yaml.load":
            loader = [k for k in node.keywords if k.arg == "Loader"]
            if not loader:
                found.append(f"yaml.load without Loader (line {node.lineno})")
    return found


def test_no_eval_exec_pickle_or_unsafe_yaml_in_the_sources():
    bad = {}
    for p in SOURCES:
        if p.suffix != ".py":
            continue
        calls = _dangerous_calls(p.read_text(encoding="utf-8"))
        if calls:
            bad[str(p.relative_to(ROOT))] = calls
    assert not bad, bad
    for p in SOURCES:             # Cython sources: a plain text scan
        if p.suffix in (".pyx", ".pxi"):
            text = p.read_text(encoding="utf-8")
            hits = [ln for ln in text.splitlines() if not ln.lstrip().startswith("#")
                    and re.search(r"(?<![\w.])(eval|exec)\(|pickle\.load|yaml\.load", ln)
                    and "def eval(" not in ln]
            assert not hits, (p.name, hits)


def test_the_scanner_finds_what_it_looks_for():
    text = "import yaml, pickle\nx = eval('1')\ny = yaml.load(s)\nz = pickle.loads(b)\n"
    assert len(_dangerous_calls(text)) == 3
    assert _dangerous_calls("yaml.load(s, Loader=yaml.SafeLoader)\nf.eval(t)\n") == []


def test_the_model_loader_is_a_safe_loader():
    import yaml
    from mbcore.model.model import _yaml_loader
    assert issubclass(_yaml_loader(), getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or \
        issubclass(_yaml_loader(), yaml.SafeLoader)


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "open('/etc/passwd')", "t.__class__",
    "(lambda: 1)()", "[x for x in (1,)]", "globals()", "t if t else 0"])
def test_driver_expressions_go_through_the_safe_parser(text):
    with pytest.raises(ModelError) as e:
        parse_function(text, "drivers[0].function")
    assert "drivers[0].function" in str(e.value)


def test_stop_conditions_are_parsed_not_evaluated(tmp_path):
    m = Model.from_file(ROOT / "examples" / "slider_crank_dynamic.yaml")
    with pytest.raises(ModelError) as e:
        mbcore.run(m, analysis="dynamic", settings={
            "t_end": 0.02, "stop_when": "__import__('os').system('touch x') > 0"})
    assert "stop_when" in str(e.value)
    assert not (Path.cwd() / "x").exists()


# ------------------------------------------------------------------ table files
def _driver_model(table: dict) -> str:
    return f"""
name: tablefile
settings: {{analysis: kinematic, t_end: 0.5, output_step: 0.25}}
bodies:
  - {{name: slider, position: [0, 0]}}
joints:
  - {{name: rail, type: translational, body_i: slider, body_j: ground, point_i: [0, 0],
     point_j: [0, 0], axis: [1, 0]}}
drivers:
  - {{name: d, type: absolute_driver, body: slider, coordinate: x,
     function: {{table: {table}}}}}
"""


def _table_dict(**kw) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in kw.items()) + "}"


def test_table_file_relative_to_the_model(tmp_path):
    d = tmp_path / "model"
    (d / "data").mkdir(parents=True)
    (d / "data" / "x.csv").write_text("# t, x\n0, 0\n0.5, 1\n1.0, 4  # end\n")
    (d / "m.yaml").write_text(_driver_model(_table_dict(file="data/x.csv")))
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)                      # not the model's directory
        m = Model.from_file(d / "m.yaml")
    finally:
        os.chdir(cwd)
    res = mbcore.run(m)
    x = res.series("q")[:, 0]
    ref = Table([0, 0.5, 1.0], [0, 1, 4])
    assert np.allclose(x, [ref(0.0), ref(0.25), ref(0.5)], atol=1e-9)


@pytest.mark.parametrize("name", ["../outside.csv", "ABS", "link/outside.csv"])
def test_table_file_outside_the_model_directory_is_refused(tmp_path, name):
    d = tmp_path / "model"
    d.mkdir()
    out = tmp_path / "outside.csv"
    out.write_text("0 0\n1 1\n")
    (d / "link").symlink_to(tmp_path)           # a symbolic link leading out
    name = str(out) if name == "ABS" else name
    (d / "m.yaml").write_text(_driver_model(_table_dict(file=f"'{name}'")))
    with pytest.raises(ModelError) as e:
        Model.from_file(d / "m.yaml")
    assert e.value.path == "drivers[0].function.table.file"
    assert "outside the model's directory" in str(e.value)
    m = Model.from_file(d / "m.yaml", allow_external_data=True)      # allowed
    assert m.elements["drivers"][0].values["function"](0.5) == pytest.approx(0.5)
    with override(allow_external_data=True):
        Model.from_file(d / "m.yaml")


def test_table_file_errors_name_the_key_and_line(tmp_path):
    (tmp_path / "bad.csv").write_text("0 0\n1 one\n")
    (tmp_path / "m.yaml").write_text(_driver_model(_table_dict(file="bad.csv")))
    with pytest.raises(ModelError, match=r"table.file: bad.csv, line 2: not a number"):
        Model.from_file(tmp_path / "m.yaml")
    (tmp_path / "m.yaml").write_text(_driver_model(_table_dict(file="missing.csv")))
    with pytest.raises(ModelError, match="cannot read table file 'missing.csv'"):
        Model.from_file(tmp_path / "m.yaml")
    (tmp_path / "m.yaml").write_text(_driver_model(_table_dict(file="bad.csv", t=[0, 1])))
    with pytest.raises(ModelError, match=r"table\.t: unknown key"):
        Model.from_file(tmp_path / "m.yaml")


# ------------------------------------------------------------------ sizes
def test_a_table_of_1e8_points_is_refused_before_allocation():
    t0 = time.perf_counter()
    with pytest.raises(ModelError) as e:
        parse_function({"table": {"t": range(10 ** 8), "y": range(10 ** 8)}},
                       "drivers[2].function")
    assert e.value.path == "drivers[2].function.table.t"
    assert "100,000,000 table points exceed the limit" in str(e.value)
    assert time.perf_counter() - t0 < 5.0


def test_a_huge_table_file_is_refused_by_its_size(tmp_path):
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:                  # a sparse file: no disk used
        fh.truncate(4 * (limits.max_table_points + 10))
    (tmp_path / "m.yaml").write_text(_driver_model(_table_dict(file="big.csv")))
    with pytest.raises(ModelError, match="exceed the limit"):
        Model.from_file(tmp_path / "m.yaml")


def test_a_chain_of_1e7_bodies_is_refused():
    body = {"name": "b", "mass": 1.0}
    with pytest.raises(ModelError) as e:
        Model.from_dict({"bodies": [body] * 10 ** 7})
    assert e.value.path == "bodies" and "10,000,000 bodies exceed" in str(e.value)
    with override(max_bodies=3):
        with pytest.raises(ModelError, match="4 bodies exceed the limit of 3"):
            Model.from_dict({"bodies": [dict(body, name=f"b{k}") for k in range(4)]})
        Model.from_dict({"bodies": [dict(body, name=f"b{k}") for k in range(3)]})
    assert limits.max_bodies == 1_000_000          # restored


def test_a_huge_output_grid_is_refused():
    m = Model.from_file(ROOT / "examples" / "fourbar_kap.yaml")
    for analysis in ("kinematic", "dynamic"):
        with pytest.raises(ModelError) as e:
            mbcore.run(m, analysis=analysis, settings={"t_end": 1e9, "output_step": 1e-3})
        assert e.value.path == "settings.output_step"
        assert "output rows" in str(e.value)
    with override(max_output_rows=10):
        with pytest.raises(ModelError, match="41 output rows"):
            mbcore.run(m, settings={"t_end": 1.0, "output_step": 0.025})
        assert mbcore.run(m, settings={"t_end": 0.2, "output_step": 0.025}).n_rows == 9


def test_a_huge_model_file_is_refused(tmp_path):
    with override(max_file_bytes=100):
        with pytest.raises(ModelError, match="more than the limit of 100"):
            Model.from_file(ROOT / "examples" / "fourbar_kap.yaml")


def test_limits_configure_and_environment(monkeypatch):
    from mbcore.elements import limits as L
    with pytest.raises(TypeError, match="unknown limit"):
        L.configure(max_nothing=3)
    monkeypatch.setenv("MBCORE_MAX_BODIES", "12")
    monkeypatch.setattr(L, "limits", L.Limits())
    L._from_environment()
    assert L.limits.max_bodies == 12


def test_cli_flag_allows_external_data(tmp_path, capsys):
    from mbcore.cli import main
    d = tmp_path / "model"
    d.mkdir()
    (tmp_path / "outside.csv").write_text("0 0\n1 1\n")
    (d / "m.yaml").write_text(_driver_model(_table_dict(file="../outside.csv")))
    try:
        assert main(["check", str(d / "m.yaml")]) != 0
        assert "outside the model's directory" in capsys.readouterr().err
        assert main(["check", "--allow-external-data", str(d / "m.yaml")]) == 0
    finally:
        from mbcore.elements.limits import configure
        configure(allow_external_data=False)
