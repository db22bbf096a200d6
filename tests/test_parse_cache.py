"""The parsed-document cache of YAML model files (mbcore.model.parse_cache): a hit
gives exactly the document the parser gives (types, values, order, shared aliases)
without importing PyYAML; a changed text, parser setting or damaged entry is a miss;
a cache that cannot be written or is switched off only costs the parse."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mbcore.model import model as model_mod
from mbcore.model import parse_cache
from mbcore.errors import ModelError

EXAMPLES = Path(__file__).parents[1] / "examples"


def _same(a, b) -> bool:
    """Equal values of equal types, recursively (1, 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def _cached(path: Path):
    """(document, number of parses) of parse_cache.load as Model.from_text calls it."""
    text = path.read_text(encoding="utf-8")
    calls = []

    def counted(t):
        calls.append(t)
        return model_mod.parse_text(t, "yaml", str(path))
    data = parse_cache.load(str(path), text, model_mod.__file__, counted,
                            (model_mod.MAX_YAML_NODES, model_mod.MAX_NESTING,
                             tuple(sorted(model_mod.DATA_TAGS))))
    return data, len(calls)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("MBCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("MBCORE_MODEL_CACHE", raising=False)
    return tmp_path / "cache" / "models"


def test_a_hit_is_the_parsed_document_of_every_example(cache_dir):
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) > 10
    for path in files:
        ref = model_mod.parse_text(path.read_text(encoding="utf-8"), "yaml", str(path))
        miss, parsed = _cached(path)
        hit, parsed_again = _cached(path)
        assert (parsed, parsed_again) == (1, 0), path.name
        assert _same(miss, ref) and _same(hit, ref), path.name
    assert len(list(cache_dir.iterdir())) == len(files)


def test_documents_json_cannot_give_back_are_parsed_every_time(tmp_path, cache_dir):
    """An alias of a collection (one shared list) and keys that are not strings stay
    out of the cache: each load parses, and the document is the parser's."""
    path = tmp_path / "m.yaml"
    for text, check in (("a: &p [1, 2.0, true, null, '3']\nb: *p\n",
                         lambda d: d["a"] is d["b"] and d["a"] == [1, 2.0, True, None, "3"]),
                        ("1: one\n~: none\n", lambda d: list(d) == [1, None])):
        path.write_text(text)
        for _ in range(2):
            data, n = _cached(path)
            assert n == 1 and check(data), text
    assert not cache_dir.exists()
    path.write_text("a: &s 1.5\nb: *s\nc: {x: -0.0, y: .inf, z: .nan}\n")   # scalars
    for expect_parses in (1, 0):
        data, n = _cached(path)
        assert n == expect_parses
        assert data["a"] == data["b"] == 1.5 and str(data["c"]["x"]) == "-0.0"
        assert data["c"]["y"] == float("inf") and data["c"]["z"] != data["c"]["z"]


def test_a_changed_text_or_setting_is_parsed_again(tmp_path, cache_dir, monkeypatch):
    path = tmp_path / "m.yaml"
    path.write_text("a: [[[1]]]\n")
    assert _cached(path) == ({"a": [[[1]]]}, 1)
    assert _cached(path) == ({"a": [[[1]]]}, 0)
    path.write_text("a: [[[2]]]\n")
    assert _cached(path) == ({"a": [[[2]]]}, 1)
    with pytest.raises(ModelError) as first:           # parsed (and cached), not a model
        model_mod.Model.from_file(path)
    assert "nested" not in str(first.value)
    monkeypatch.setattr(model_mod, "MAX_NESTING", 2)      # a parser setting: a miss
    with pytest.raises(ModelError, match="nested more than 2 levels"):
        model_mod.Model.from_file(path)


def test_a_damaged_entry_or_an_unwritable_cache_only_costs_the_parse(tmp_path, cache_dir,
                                                                     monkeypatch):
    path = tmp_path / "m.yaml"
    path.write_text("a: 1\n")
    _cached(path)
    (entry,) = cache_dir.iterdir()
    entry.write_bytes(entry.read_bytes()[:7])              # truncated
    assert _cached(path) == ({"a": 1}, 1)
    assert _cached(path) == ({"a": 1}, 0)                  # rewritten
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("MBCORE_CACHE_DIR", str(blocker))   # not a directory
    assert _cached(path) == ({"a": 1}, 1)
    assert _cached(path) == ({"a": 1}, 1)


def test_switched_off(tmp_path, cache_dir, monkeypatch):
    monkeypatch.setenv("MBCORE_MODEL_CACHE", "0")
    path = tmp_path / "m.yaml"
    path.write_text("a: 1\n")
    assert _cached(path) == ({"a": 1}, 1)
    assert _cached(path) == ({"a": 1}, 1)
    assert not cache_dir.exists()


def test_a_hit_imports_no_yaml_and_runs_the_same(tmp_path):
    """Two processes load the same file: the second takes the cached document, does
    not import PyYAML and computes the same trajectory bit for bit."""
    env = {**os.environ, "MBCORE_CACHE_DIR": str(tmp_path)}
    env.pop("MBCORE_MODEL_CACHE", None)
    code = ("import json, sys, numpy as np, mbcore\n"
            f"m = mbcore.Model.from_file({str(EXAMPLES / 'slider_crank_dynamic.yaml')!r})\n"
            "r = mbcore.run(m, settings={'t_end': 0.05})\n"
            "print(json.dumps(['yaml' in sys.modules, np.asarray(r['q']).tolist()]))")
    runs = [json.loads(subprocess.run([sys.executable, "-c", code], env=env, check=True,
                                      capture_output=True, text=True, timeout=300)
                       .stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert [r[0] for r in runs] == [True, False]
    assert runs[0][1] == runs[1][1]
