"""The documentation site's generators (docs/_ext): the gallery's list is the
examples directory, and the model-file reference covers every registered type.
The Sphinx build itself (which runs every example) is a step of .ci/run."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_ext" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod            # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_every_example_has_a_gallery_entry():
    gallery = _load("mbcore_gallery")
    files = {p.name for p in gallery.example_files()}
    on_disk = {p.name for p in (ROOT / "examples").iterdir()
               if p.suffix in (".yaml", ".json")}
    assert files == on_disk
    assert set(gallery.EXPECTED_FAILURES) <= files


def test_reference_lists_every_registered_type_and_parameter(tmp_path):
    from mbcore.plugins import PluginManager
    ref = _load("mbcore_reference")
    ref.generate(tmp_path)
    for kind, name, _prov, cls in PluginManager().registry.rows():
        slug = ref.PAGES[kind][0]
        text = (tmp_path / f"{slug}.md").read_text()
        body_kind, _, short = name.rpartition(":")
        label = f"(ref-{kind}-{body_kind or 'planar'}-{short})=" \
            if kind in ("constraint", "force") else f"(ref-{kind}-{short})="
        assert label in text, (kind, name)
        section = text.split(label, 1)[1].split("\n(ref-", 1)[0]
        keys = getattr(cls, "params", None) or getattr(cls, "settings_schema", None) \
            or getattr(cls, "options", None) or {}
        for key in keys:
            assert f"| `{key}` |" in section, f"{kind} {name}: {key} missing"
