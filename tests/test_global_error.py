"""The global error estimate of a dynamic run (mbcore.analysis.global_error, ``mbcore
error``) against the true error, measured with a run at a far tighter tolerance."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import mbcore
from mbcore.analysis.global_error import estimate_global_error
from mbcore.cli.app import main


PLATFORM = os.path.join(os.path.dirname(__file__), "..", "examples", "platform.yaml")


@pytest.fixture(scope="module")
def platform():
    m = mbcore.Model.from_file(PLATFORM)
    ref = mbcore.run(m, settings={"integrator": "dop853", "rtol": 1e-12, "atol": 1e-14,
                                  "record": "q"})
    return m, np.array(ref["q"])


def _ratio(est, ref):
    true = np.max(np.abs(ref - est.q), axis=0)
    big = true > 1e-3 * true.max()          # coordinates whose error is above rounding
    return est.max_error[big] / true[big]


def test_richardson_estimate_of_a_fixed_step_run(platform):
    """rk4 at h = 0.01 on the platform: the step-halving estimate of the run's error
    is the true error (observed ratio 1.0000-1.0014 per coordinate; bound 3 %: the
    errors are truncation errors of 1e-7, far above rounding, and a wrong order in
    the factor 2^p / (2^p - 1) moves the ratio by 6 % or more)."""
    m, ref = platform
    est = estimate_global_error(m, {"integrator": "rk4", "step": 0.01})
    assert est.method == "richardson" and est.order == 4
    assert est.fine["step"] == 0.005
    r = _ratio(est, ref)
    assert r.size >= 6 and np.all(np.abs(r - 1.0) < 0.03), r


def test_tolerance_estimate_of_an_adaptive_run(platform):
    """dopri5 at rtol 1e-6: the estimate from the run at rtol/10 is the true error
    within a factor 2 (observed ratios 1.05-1.07)."""
    m, ref = platform
    est = estimate_global_error(m, {"integrator": "dopri5", "rtol": 1e-6, "atol": 1e-8})
    assert est.method == "tolerance" and est.fine["rtol"] == pytest.approx(1e-7)
    r = _ratio(est, ref)
    assert r.size >= 6 and np.all((r > 0.5) & (r < 2.0)), r


def test_cli(examples, capsys):
    path = str(examples / "platform.yaml")
    assert main(["error", path, "--integrator", "rk4", "--step", "0.01", "--t-end",
                 "0.5"]) == 0
    out = capsys.readouterr().out
    assert "step halving, order 4: steps 0.01 and 0.005" in out
    assert "platform.x" in out and "max |error|" in out
    assert main(["error", path, "--integrator", "rk4", "--step", "0.01", "--t-end", "0.5",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["order"] == 4 and d["max_error"]["platform.x"] > 0
    assert main(["error", path, "--integrator", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
