"""The type-swap mutation of the model-file fuzzer (``benchmarks/fuzz_cases.py``): any
value at any key path (settings, element fields, vector components) replaced by a
value of every other JSON type (null, bool, int, float, string, list, mapping) must
end in a run or an mbcore error naming the key path, never a raw traceback.  The
exhaustive campaign over the shipped examples is ``python benchmarks/fuzz.py --types``
(docs/reliability.md); here: every swap of the settings of the dynamic slider-crank
and a small seeded sample of the rest (a few seconds)."""
from __future__ import annotations

import multiprocessing as mp
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fuzz  # noqa: E402
import fuzz_cases as F  # noqa: E402

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                                reason="the worker pool forks")

EX = F.ROOT / "examples"


def _settings_swaps(name: str) -> list[dict]:
    """Every swap of the settings subtree of example ``name``."""
    rows = [(src, path, t) for src, path, t in F._swap_table(tuple(F.EXAMPLE_FILES))
            if src.name == name and path[0] == "settings"]
    assert rows
    return [F.swap_type(*row) for row in rows]


def _run(cases):
    with fuzz.CasePool(jobs=1, timeout=30.0) as pool:
        results = list(pool.run(cases))
    assert len(results) == len(cases)
    bad = [f"{case['name']}: {out['runs']}" for case, out in results
           if out["outcome"] in fuzz.BAD]
    assert not bad, "\n".join(bad)
    return results


def test_every_type_of_every_setting_ends_in_a_run_or_a_named_error():
    cases = _settings_swaps("slider_crank_dynamic.yaml")
    assert {c["path"] for c in cases} >= {"settings", "settings.analysis",
                                          "settings.t_end", "settings.integrator"}
    results = _run(cases)
    for case, out in results:
        if case["path"] == "settings.analysis" and case["type"] != "null":
            # validate and the run of the model's own analysis name the key (null: the
            # default analysis; the other runs override the analysis)
            assert set(out["runs"]) == {"validate", "own", *fuzz.ANALYSES}
            for run in ("validate", "own"):
                cls, detail = out["runs"][run]
                assert cls == "named_error" and fuzz.names_path(
                    detail, "settings.analysis"), out


def test_seeded_sample_of_type_swaps_anywhere():
    ch = F.RandomChooser(20240)
    cases = [F.random_type_swap(ch) for _ in range(30)]
    kinds = {c["type"] for c in cases}
    assert kinds == set(F.JSON_TYPES)            # every JSON type is drawn
    _run(cases)


# ------------------------------------------------------------------ the harness itself
def test_json_types_tell_bool_from_int():
    assert [F.json_type(v) for v in F.JSON_TYPES.values()] == list(F.JSON_TYPES)
    assert F.json_type(True) == "bool" and F.json_type(1) == "int"


def test_value_of_type_gives_the_asked_type():
    ch = F.RandomChooser(3)
    for t in F.JSON_TYPES:
        for value in (None, True, 2, 0.5, "crank", [1.0, 2.0], {"a": 1}):
            assert F.json_type(F.value_of_type(t, value, ch)) == t
            assert F.json_type(F.value_of_type(t, value)) == t


def test_the_exhaustive_campaign_covers_every_key_with_every_other_type():
    import yaml
    src = EX / "fourbar_kap.yaml"
    data = yaml.safe_load(src.read_text())
    rows = [r for r in F._swap_table(tuple(F.EXAMPLE_FILES)) if r[0] == src]
    paths = [p for p in F._paths(data) if p]
    assert len(rows) == 6 * len(paths)             # 7 types less the value's own
    for path in paths:
        got = {t for _, p, t in rows if p == path}
        assert got == set(F.JSON_TYPES) - {F.json_type(F._get(data, path))}
    assert F.type_swap_count() == len(F._swap_table(tuple(F.EXAMPLE_FILES)))
    # a case is the example with one value replaced, at the path it names
    case = F.swap_type(src, ("settings", "analysis"), "list")
    assert case["path"] == "settings.analysis"
    assert yaml.safe_load(case["data"])["settings"]["analysis"] == [1]


def test_random_mutations_reach_every_type():
    seen = set()
    rng = random.Random(5)
    for _ in range(200):
        ch = F.RandomChooser(rng.randrange(10 ** 9))
        seen.add(F.json_type(F._change_type("crank", ch)))
    assert seen == set(F.JSON_TYPES) - {"string"}


def test_names_path():
    assert fuzz.names_path("ModelError: settings.analysis: expected", "settings.analysis")
    assert fuzz.names_path("ModelError: bodies[0]: expected", "bodies[0].mass")
    assert fuzz.names_path("ModelError: settings.a: unknown key", "settings")
    assert not fuzz.names_path("ModelError: bodies[10].x: bad", "bodies[1]")
    assert not fuzz.names_path("ModelError: settings.t_end_x: bad", "settings.t_end")
