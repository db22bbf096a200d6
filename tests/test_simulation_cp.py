"""``Simulation`` with coordinate partitioning (``formulation: cp``) re-partitions
internally as the dynamic analysis does (docs/embedding.md): at the end of a call
when a fresh partition is much better (the analysis' test at an output), and when
an evaluation finds the partition unusable (``RepartitionRequest``: a restart from
the last call's end).  The caller sees one continuous simulation, equal to
``mbcore.run`` with the call ends as output times."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from test_partitioning import free_slider_crank

#: dopri5 at the tolerances of tests/test_partitioning.py: CP there agrees with DI to
#: 1e-7 in q and 1e-6 in qd (the global error of the integration), which bounds the
#: difference of two integrations of the same motion that restart from the same
#: states with other step sizes (measured here: 2.4e-11 in q over 3 s)
TIGHT = {"rtol": 1e-11, "atol": 1e-13, "hold": "crank.phi"}
Q_TOL, QD_TOL = 1e-7, 1e-6


def _settings(**kw):
    return {"formulation": "cp", "independent": "slider.x", **TIGHT, **kw}


def _partition_events(events):
    return [(round(float(t), 9), msg) for t, kind, msg in events if kind == "repartition"]


def _simulate(settings, times, names=("q/crank.phi", "q/slider.x", "qd/crank.phi",
                                      "qd/slider.x")):
    sim = mbcore.Simulation(free_slider_crank(), settings)
    rows = [sim.outputs(list(names))]
    for t in times[1:]:
        sim.advance_to(float(t))
        rows.append(sim.outputs(list(names)))
    return sim, np.array(rows)


def _reference(res, names=("q/crank.phi", "q/slider.x", "qd/crank.phi", "qd/slider.x")):
    return np.column_stack([res[n] for n in names])


@pytest.mark.parametrize("loop", ["auto", "python"])
def test_cp_simulation_repartitions_at_a_dead_point_like_the_run(loop):
    """Calls every output step through the first dead point (the slider's x is a
    singular choice there): the same re-partition at the same time as the run, and
    the same motion.  Before, RepartitionRequest escaped from advance_to at t = 0.46."""
    st = _settings(t_end=1.0, output_step=0.01, loop=loop)
    ref = mbcore.run(free_slider_crank(), settings=st)
    rep = [(round(e.t, 9), e.message) for e in ref.events if e.kind == "repartition"]
    assert len(rep) >= 1 and "slider.x ->" in rep[0][1]
    sim, got = _simulate(st, ref.t)
    assert _partition_events(sim.events) == rep
    want = _reference(ref)
    np.testing.assert_allclose(got[:, :2], want[:, :2], rtol=0, atol=Q_TOL)
    np.testing.assert_allclose(got[:, 2:], want[:, 2:], rtol=0, atol=QD_TOL)
    # the constraints hold along the simulation as in the run (CP's Newton tolerance
    # 1e-12 scaled by 1 + |q|: the dependent coordinates are solved, not integrated)
    assert sim["violation/position"] <= 1e-10
    assert sim.stats["restarts"] >= 1


def test_one_call_across_the_dead_point_restarts_from_its_start():
    """One advance_to over the dead point: the partition fails inside the call, the
    simulation re-partitions at the call's start (the run's restart at its last
    output) and goes on; the same as a run with that output step."""
    st = _settings(t_end=1.0, output_step=0.5)
    ref = mbcore.run(free_slider_crank(), settings=st)
    rep = [(round(e.t, 9), e.message) for e in ref.events if e.kind == "repartition"]
    assert rep and rep[0][0] == 0.0 and "did not converge" in rep[0][1]
    sim, got = _simulate(st, ref.t)
    assert _partition_events(sim.events) == rep
    want = _reference(ref)
    np.testing.assert_allclose(got[:, :2], want[:, :2], rtol=0, atol=Q_TOL)
    np.testing.assert_allclose(got[:, 2:], want[:, 2:], rtol=0, atol=QD_TOL)


def test_cp_simulation_step_by_step_crosses_the_dead_point():
    """step() (one integrator step per call) through the dead point: no exception,
    the time increases, the constraints hold, the partition changed once."""
    st = _settings(t_end=0.6, integrator="rk4", step=1e-3)
    sim = mbcore.Simulation(free_slider_crank(), st)
    ts = [sim.t]
    for _ in range(700):                     # 600 steps of 1e-3 (and the restart)
        sim.step()
        ts.append(sim.t)
        if sim.t >= 0.6 - 1e-12:
            break
    assert sim.t >= 0.6 - 1e-12
    assert np.all(np.diff(ts) > 0)
    assert len(_partition_events(sim.events)) >= 1
    assert sim["violation/position"] <= 1e-10

