"""Fuzzed model files (issue 18): the small budget of the default test run.

Generated and mutated model files (``benchmarks/fuzz_cases.py``) go through load →
validate → compile → a short run of every analysis in a worker process with a
wall-clock limit (``benchmarks/fuzz.py``).  Each must end as a valid run with finite
results or an mbcore error naming the key path / the element / the time: never a
crash, a hang, a foreign exception or a silent NaN.  The large campaign (>= 10 000
cases) is ``python benchmarks/fuzz.py --cases 10000 --jobs 2 --seed 1`` (docs/
reliability.md).  Both budgets are deterministic: a fixed seed, a derandomised
hypothesis profile without example database.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import fuzz  # noqa: E402
from fuzz_cases import DrawChooser, campaign_case, make_case  # noqa: E402

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                                reason="the worker pool forks")


@pytest.fixture(scope="module")
def pool():
    with fuzz.CasePool(jobs=1, timeout=20.0) as p:
        yield p


def _check(case, out):
    assert out["outcome"] not in fuzz.BAD, (
        f"{case['name']}: {out}\n--- model file ---\n"
        f"{case['data'][:3000].decode('utf-8', 'replace')}")


@settings(max_examples=250, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_hypothesis_model_files_end_in_a_run_or_a_named_error(pool, data):
    case = make_case(DrawChooser(data))
    (_, out), = list(pool.run([case]))
    _check(case, out)


def test_seeded_campaign_slice_has_no_bad_outcome():
    cases = [campaign_case(7, i) for i in range(300)]
    with fuzz.CasePool(jobs=2, timeout=20.0) as p:
        results = list(p.run(cases))
    assert len(results) == len(cases)
    for case, out in results:
        _check(case, out)
    kinds = {out["outcome"] for _, out in results}
    assert {"valid", "named_error"} <= kinds        # both kinds are reached


# ------------------------------------------------------------------ the harness itself
def test_classification_of_errors():
    from mbcore.errors import AnalysisError, ModelError
    assert fuzz.classify_error(ModelError("bodies[0].mass", "bad"), None)[0] == "named_error"
    assert fuzz.classify_error(ModelError("", "bad"), None)[0] == "unnamed_error"
    assert fuzz.classify_error(AnalysisError("x", t=0.5), None)[0] == "named_error"
    assert fuzz.classify_error(AnalysisError("something failed"), None)[0] == \
        "unnamed_error"
    assert fuzz.classify_error(KeyError("q"), None)[0] == "foreign_error"
    assert fuzz.classify_error(ZeroDivisionError(), None)[0] == "foreign_error"


def _abort(case, workdir):
    import faulthandler
    faulthandler.disable()          # no traceback dump from the child
    os.abort()


def _sleep(case, workdir):
    import time
    time.sleep(30)


@pytest.mark.parametrize("target, expected", [(_abort, "crash"), (_sleep, "hang")])
def test_pool_reports_crashes_and_hangs(monkeypatch, target, expected):
    monkeypatch.setattr(fuzz, "execute", target)     # inherited by the forked workers
    case = campaign_case(1, 0)
    with fuzz.CasePool(jobs=1, timeout=2.0) as p:
        (_, out), = list(p.run([case]))
    assert out["outcome"] == expected
    if expected == "hang":
        assert out["runs"]["worker"][1].endswith("during load")   # where it hung


def test_nan_results_are_caught():
    class R:
        t = __import__("numpy").array([0.0, 1.0])
        channels = ["q", "solver"]

        def series(self, name):
            import numpy as np
            return np.array([[0.0, np.nan], [1.0, 2.0]])

        def labels(self, name):
            return ["a", "pivot_ratio"] if name == "solver" else ["a", "b"]
    assert fuzz._finite(R()) == "q"            # NaN in q: a bug
    R.channels = ["solver"]
    assert fuzz._finite(R()) == ""             # NaN pivot_ratio: "not computed"
