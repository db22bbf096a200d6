"""A check shared by the tests of the formulations that project in C (penalty,
projection): a run on the compiled loop against the same run on the Python driver."""
from __future__ import annotations

import numpy as np


def assert_compiled_run_matches_python(a, b) -> None:
    """``a`` ran on the compiled loop, ``b`` on the Python driver: the same projections
    (more than 10), evaluations, steps and rejections, and outputs within 1e-10 of
    each channel's scale (the same steps; the projections' solves differ at
    round-off)."""
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    assert a.stats["projections"] == b.stats["projections"] > 10
    for k in ("integrator_nfev", "integrator_nsteps", "integrator_nrejected"):
        assert a.stats[k] == b.stats[k], k
    assert len(a) == len(b)
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0,
                                   atol=1e-10 * (1.0 + np.max(np.abs(b[ch]))), err_msg=ch)


def spy_loop(monkeypatch, *names: str) -> list:
    """Wrap the compiled loops ``mbcore._ext._steploop.<name>`` so that every call's
    return code and time are appended to the returned list (``(code, t)``)."""
    from mbcore._ext import _steploop as ms
    calls: list = []
    for name in names:
        def wrapped(*args, _f=getattr(ms, name), **kw):
            res = _f(*args, **kw)
            calls.append((res[0], res[1]))
            return res
        monkeypatch.setattr(ms, name, wrapped)
    return calls


def assert_checkpointed_run_equals_python(model, settings: dict, out, loop: str) -> None:
    """A run writing checkpoints (every 0.05 s of model time) into ``out`` names the
    compiled ``loop`` in its checkpoint and records the Python driver's q, qd, qdd
    and evaluation count bit for bit."""
    import mbcore
    from mbcore.analysis.checkpoint import read_checkpoint
    from mbcore.analysis.runner import run
    from mbcore.results.result import Result
    run(model, settings=settings, output=out, checkpoint_every=0.05, checkpoint_seconds=1e9)
    ref = mbcore.run(model, settings={**settings, "loop": "python"})
    assert read_checkpoint(out).step["loop"] == loop
    with Result(out) as r:
        for ch in ("q", "qd", "qdd"):
            np.testing.assert_array_equal(np.asarray(r[ch]), np.asarray(ref[ch]),
                                          err_msg=f"{loop} {ch}")
        assert r.stats["integrator_nfev"] == ref.stats["integrator_nfev"]


def assert_failing_evaluation_handed_over(model, settings: dict, calls: list,
                                          t_tol: float = 0.0) -> None:
    """``model`` drives a torque ``sqrt(0.3 - t)``, which fails after t = 0.3: the
    compiled loop (spied into ``calls`` by :func:`spy_loop`) stops at the last
    accepted step before it (code 2), the Python driver raises the named error in
    the next step (``settings["step"]`` long), at the time of the Python loop's error
    (within ``t_tol``; 0: the same step, the same stage time)."""
    import mbcore
    import pytest
    from mbcore.elements.functions import FunctionDomainError
    h = settings["step"]
    with pytest.raises(FunctionDomainError, match="sqrt") as exc:
        mbcore.run(model, settings=settings)
    code, t_handover = calls[-1][:2]
    assert code == 2 and 0.3 - h < t_handover < 0.3 < exc.value.t < 0.3 + h
    with pytest.raises(FunctionDomainError, match="sqrt") as ref:
        mbcore.run(model, settings={**settings, "loop": "python"})
    assert abs(ref.value.t - exc.value.t) <= t_tol
