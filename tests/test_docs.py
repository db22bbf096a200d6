"""Docs stay current: every built-in type and parameter is documented, and the
README's test command is the one CI runs."""
from __future__ import annotations

from pathlib import Path

import pytest

from mbcore.plugins import PluginManager

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.quick


def test_every_builtin_constraint_type_and_parameter_is_documented():
    doc = (ROOT / "docs" / "model-format.md").read_text()
    reg = PluginManager().registry
    for name in reg.names("constraint"):
        if reg.provider("constraint", name).plugin != "builtin":
            continue
        assert f"### {name} " in doc, name
        section = doc.split(f"### {name} ", 1)[1].split("\n### ", 1)[0]
        for key in reg.get("constraint", name).params:
            assert f"`{key}`" in section, f"{name}.{key} undocumented"


def test_every_builtin_force_type_and_parameter_is_documented():
    doc = (ROOT / "docs" / "model-format.md").read_text()
    reg = PluginManager().registry
    for name in reg.names("force"):
        assert f"### {name} " in doc, name
        section = doc.split(f"### {name} ", 1)[1].split("\n### ", 1)[0]
        for key in reg.get("force", name).params:
            assert f"`{key}`" in section, f"{name}.{key} undocumented"


def test_every_kinematic_setting_is_documented():
    doc = (ROOT / "docs" / "model-format.md").read_text()
    cls = PluginManager().registry.get("analysis", "kinematic")
    for key in cls.settings_schema:
        assert f"| `{key}` |" in doc, key


def test_every_analysis_and_its_settings_are_documented():
    doc = (ROOT / "docs" / "analyses.md").read_text()
    reg = PluginManager().registry
    for name in reg.names("analysis"):
        assert f"## {name} " in doc, name
        section = doc.split(f"## {name} ", 1)[1].split("\n## ", 1)[0]
        if name == "kinetostatic":
            continue        # "Settings as kinematic"
        for key in reg.get("analysis", name).settings_schema:
            assert f"| `{key}` |" in section, f"{name}: setting {key} undocumented"


def test_readme_opens_with_two_commands_and_ci_runs_the_test_command():
    lines = (ROOT / "README.md").read_text().splitlines()
    block = lines[lines.index("```bash") + 1: lines.index("```bash") + 3]
    assert block[0].startswith("pip install . && mbcore run examples/")
    assert "pytest" in block[1]
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = block[1].replace("pip install", "python -m pip install -q")
    assert test_cmd in ci


def test_plot_gallery_page_shows_every_generated_figure_with_its_call():
    """docs/plotting.md's gallery names each figure the docs build draws
    (docs/_ext/mbcore_plots.py) and the call that draws it."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("mbcore_plots",
                                                  ROOT / "docs" / "_ext" / "mbcore_plots.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    doc = (ROOT / "docs" / "plotting.md").read_text()
    assert "mbcore_plots" in (ROOT / "docs" / "conf.py").read_text()
    for name, (run, shown, _draw) in mod.FIGURES.items():
        assert run in mod.RUNS, name
        assert f"(_generated/plots/{name})" in doc, name
        assert f"`{shown}`" in doc, name
