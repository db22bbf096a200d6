"""benchmarks/golden.py: the classes and exit code of ``compare``, and a small
``record`` that compares bitwise-equal to itself."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import golden  # noqa: E402


def _compare(tmp_path, old: dict, new: dict, **kw) -> tuple[int, dict, str]:
    np.savez(tmp_path / "old.npz", **old)
    np.savez(tmp_path / "new.npz", **new)
    out = io.StringIO()
    code, summary = golden.compare(str(tmp_path / "old.npz"), str(tmp_path / "new.npz"),
                                   stream=out, **kw)
    return code, summary, out.getvalue()


def _base() -> dict:
    rng = np.random.default_rng(1)
    return {"c/t": np.linspace(0.0, 1.0, 11), "c/series/q": rng.normal(size=(11, 3)),
            "c/stats/integrator_nsteps": np.array(42),
            "c/stats/loop/text": np.array("compiled"),
            "c/series/nan": np.array([[1.0, np.nan], [np.inf, 2.0]])}


def test_identical_is_bitwise(tmp_path):
    code, summary, _ = _compare(tmp_path, _base(), _base())
    assert code == 0
    assert summary["classes"] == {"bitwise": 5}


def test_one_ulp_is_within_relative_tolerance(tmp_path):
    new = _base()
    new["c/series/q"] = np.nextafter(new["c/series/q"], np.inf)     # 1 ulp: ~2.2e-16 rel
    code, summary, text = _compare(tmp_path, _base(), new)
    assert code == 0
    assert summary["classes"] == {"bitwise": 4, "<=1e-14 relative": 1}
    assert "c/series/q  <=1e-14 relative" in text
    assert 0 < summary["max_rel_within_rtol"] <= 1e-14


def test_relative_to_the_column_not_the_element(tmp_path):
    # a value crossing zero: 1e-17 -> 2e-17 next to 1.0 in the same column is a
    # difference of 1e-17 relative to the column's scale, not 100 %
    old = {"c/series/v": np.array([[1.0], [1e-17]])}
    new = {"c/series/v": np.array([[1.0], [2e-17]])}
    code, summary, _ = _compare(tmp_path, old, new)
    assert code == 0 and summary["classes"] == {"<=1e-14 relative": 1}


@pytest.mark.parametrize("key, value", [
    ("c/series/q", lambda a: a * (1 + 1e-12)),                       # too large
    ("c/series/q", lambda a: a[:-1]),                                # shape
    ("c/stats/integrator_nsteps", lambda a: a + 1),                  # a count
    ("c/stats/loop/text", lambda a: np.array("python")),            # a text
    ("c/series/nan", lambda a: np.nan_to_num(a)),                    # NaN/inf moved
])
def test_differs(tmp_path, key, value):
    new = _base()
    new[key] = value(new[key])
    code, summary, text = _compare(tmp_path, _base(), new)
    assert code == 1
    assert summary["classes"].get("DIFFERS") == 1
    assert summary["differs"] == [key]
    assert f"{key}  DIFFERS" in text


def test_missing_key_fails_added_key_does_not(tmp_path):
    new = _base()
    del new["c/series/q"]
    code, summary, text = _compare(tmp_path, _base(), new)
    assert code == 1 and summary["classes"]["MISSING"] == 1
    assert "c/series/q  MISSING" in text
    new = {**_base(), "c/series/extra": np.zeros(3)}
    code, summary, _ = _compare(tmp_path, _base(), new)
    assert code == 0 and summary["classes"]["added"] == 1


def test_rtol_option(tmp_path):
    new = _base()
    new["c/series/q"] = new["c/series/q"] * (1 + 1e-12)
    assert _compare(tmp_path, _base(), new, rtol=1e-10)[0] == 0


def test_record_twice_is_bitwise_equal(tmp_path, capsys):
    """One small example recorded twice in this process: the same code path, the
    same bytes; its keys cover the series, labels, statistics and status."""
    case = "example/fourbar_kap"
    for name in ("a.npz", "b.npz"):
        meta = golden.record(str(tmp_path / name), only=[case])
        assert meta["cases"] == 1 and not meta["errors"]
    with np.load(tmp_path / "a.npz") as f:
        keys = set(f.files)
        assert json.loads(str(f[golden.META]))["cases"] == 1
    for k in (f"{case}/t", f"{case}/series/q", f"{case}/labels/q",
              f"{case}/stats/newton_iterations", f"{case}/status/text"):
        assert k in keys
    assert not any("wall_time" in k for k in keys)
    code, summary = golden.compare(str(tmp_path / "a.npz"), str(tmp_path / "b.npz"),
                                   stream=io.StringIO())
    assert code == 0
    assert summary["classes"] == {"bitwise": len(keys) - 1}      # all but the metadata


def test_cli_exit_code(tmp_path):
    new = _base()
    new["c/series/q"] = new["c/series/q"] + 1.0
    np.savez(tmp_path / "old.npz", **_base())
    np.savez(tmp_path / "new.npz", **new)
    assert golden.main(["compare", str(tmp_path / "old.npz"), str(tmp_path / "old.npz")]) == 0
    assert golden.main(["compare", str(tmp_path / "old.npz"), str(tmp_path / "new.npz")]) == 1
