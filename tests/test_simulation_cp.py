"""``Simulation`` with coordinate partitioning (``formulation: cp``) re-partitions
internally as the dynamic analysis does (docs/embedding.md): at the end of an
integrator step where Phi_u has degraded or the test at a call's end found a much
better partition, and when an evaluation finds the partition unusable
(``RepartitionRequest``: a restart from the last accepted step).  The caller sees one continuous simulation, equal to
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


def test_one_call_across_the_dead_point_repartitions_at_a_step_end():
    """One advance_to over the dead point: the partition changes inside the call, at
    the end of the integrator step where Phi_u had degraded (not at the call's
    start or end, and not from an interpolated state), as in the run with that
    output step; the same motion."""
    st = _settings(t_end=1.0, output_step=0.5)
    ref = mbcore.run(free_slider_crank(), settings=st)
    rep = [(round(e.t, 9), e.message) for e in ref.events if e.kind == "repartition"]
    # (the dependent coordinate's error gain grows toward the dead point at t ~ 0.45;
    # CP switches once it has grown 1.5x and a partition 1.5x better exists)
    assert len(rep) == 1 and 0.3 < rep[0][0] < 0.5 and "gain grew" in rep[0][1]
    sim, got = _simulate(st, ref.t)
    assert _partition_events(sim.events) == rep
    want = _reference(ref)
    np.testing.assert_allclose(got[:, :2], want[:, :2], rtol=0, atol=Q_TOL)
    np.testing.assert_allclose(got[:, 2:], want[:, 2:], rtol=0, atol=QD_TOL)


def _failing_once(monkeypatch, after: float, fired: list):
    """CP's evaluation raises the re-partition request once, at the first evaluation
    after ``after`` (an unusable partition inside a step)."""
    from mbplugins.formulations.partitioning import CP, RepartitionRequest
    split = CP.split

    def failing(self, y, t=None):
        tt = self._t if t is None else t
        if not fired and tt > after:
            fired.append(float(tt))
            raise RepartitionRequest("test: an unusable partition")
        return split(self, y, t)
    monkeypatch.setattr(CP, "split", failing)


@pytest.mark.parametrize("sim_too", [False, True])
def test_a_failing_evaluation_restarts_at_the_last_accepted_step(monkeypatch, sim_too):
    """An evaluation inside a step finds the partition unusable: the run (and the
    simulation) take a new partition at the last accepted step — between two output
    times, before the failing evaluation — and record no output twice; the motion
    is that of an undisturbed run (the same equations, other steps)."""
    st = _settings(t_end=1.0, output_step=0.1, loop="python", kernels="numpy")
    ref = mbcore.run(free_slider_crank(), settings=st)
    fired: list = []
    _failing_once(monkeypatch, 0.25, fired)
    res = mbcore.run(free_slider_crank(), settings=st)
    rep = [(round(e.t, 9), e.message) for e in res.events if e.kind == "repartition"]
    assert rep[0][1].startswith("test: an unusable partition")
    t_r = rep[0][0]
    assert 0.2 < t_r <= fired[0] and not np.any(np.isclose(res.t, t_r, atol=1e-9, rtol=0))
    np.testing.assert_allclose(res.t, ref.t, rtol=0, atol=1e-12)     # no row twice
    np.testing.assert_allclose(_reference(res)[:, :2], _reference(ref)[:, :2], rtol=0,
                               atol=Q_TOL)
    if sim_too:
        fired.clear()
        sim, got = _simulate(st, ref.t)
        assert _partition_events(sim.events)[:1] == rep[:1]
        np.testing.assert_allclose(got[:, :2], _reference(ref)[:, :2], rtol=0, atol=Q_TOL)


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

