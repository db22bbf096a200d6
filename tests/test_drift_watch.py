"""Direct integration does not correct the constraint drift (Nikravesh (1988),
§13.1): the dynamic analysis warns, once, where the recorded position violation
first exceeds ten times the requested tolerance, and stays silent when it does not."""
import numpy as np
import pytest

import mbcore


def _double_pendulum() -> mbcore.Model:
    m = mbcore.Model("double pendulum")
    m.set_gravity(0, -9.81)
    m.add_body("a", mass=1.0, inertia=1.0 / 12, position=(0.5, 0.0))
    m.add_body("b", mass=1.0, inertia=1.0 / 12, position=(1.5, 0.0))
    m.add_joint("revolute", "pivot", body_i="ground", body_j="a", point_i=(0, 0),
                point_j=(-0.5, 0))
    m.add_joint("revolute", "elbow", body_i="a", body_j="b", point_i=(0.5, 0),
                point_j=(-0.5, 0))
    return m


def _run(formulation, integrator, **st):
    return mbcore.run(_double_pendulum(), analysis="dynamic", settings={
        "t_end": 3.0, "output_step": 0.01, "formulation": formulation,
        "integrator": integrator, **st})


def _warnings(res):
    return [e for e in res.events if e.kind == "warning" and "drift" in e.message]


def test_di_warns_once_where_the_drift_passes_ten_times_the_tolerance():
    # explicit Euler, h = 1e-3: the violation grows to 2.4e-2 (observed), three
    # orders of magnitude above the bound 10 (atol + rtol L) = 2.5e-5
    res = _run("di", "euler", step=1e-3, rtol=1e-6, atol=1e-6)
    w = _warnings(res)
    assert len(w) == 1
    phi = np.asarray(res["violation"])[:, 0]
    bound = 10 * (1e-6 + 1e-6 * 1.5)            # L = max |q(0)| = 1.5 m
    k = int(np.flatnonzero(phi > bound)[0])
    assert w[0].t == pytest.approx(res.t[k])
    assert "'di' does not correct the drift" in w[0].message and "projection" in w[0].message


def test_no_warning_within_the_tolerance_or_with_a_correcting_formulation():
    # dopri5 at rtol 1e-8: violation 1.9e-12 (observed) against the bound 1.5e-7
    res = _run("di", "dopri5", rtol=1e-8, atol=1e-10)
    assert np.max(np.asarray(res["violation"])[:, 0]) < 10 * (1e-10 + 1.5e-8)
    assert not _warnings(res)
    # the same drifting integration under projection: the violations are corrected
    assert not _warnings(_run("projection", "euler", step=1e-3, rtol=1e-6, atol=1e-6))


def test_no_watch_without_the_violation_channel():
    res = _run("di", "euler", step=1e-3, rtol=1e-6, atol=1e-6, record="q, qd")
    assert not _warnings(res)
