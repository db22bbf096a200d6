"""Switching constraint sets (mbcore.solve.switching): the Geneva wheel of Nikravesh
(1988), Prob. 5.37 through full cycles of dwell and indexing (kinematic,
kinetostatic and dynamic), a knee that locks with a plastic impact, the engagement
map itself, and the refusals."""
from __future__ import annotations

import copy
import os

import numpy as np
import pytest
import yaml

import mbcore
from mbcore.errors import ModelError

HERE = os.path.dirname(__file__)
GENEVA = os.path.join(HERE, "..", "examples", "geneva_full_cycle.yaml")
KNEE = os.path.join(HERE, "..", "examples", "knee_lock.yaml")
P, D = 50.0, 100.0                      # crank radius, centre distance (mm)


def _data(path):
    with open(path) as f:
        return yaml.safe_load(f)


def _switches(r):
    return [e for e in r.events if e.kind == "switch" and "switch '" in e.message]


def geneva_closed_form(a):
    """Wheel angle and rate (per unit crank rate) of the six-slot wheel at crank
    angles ``a`` (unwrapped, from 180 deg at the start): dwell at 210 deg less 60 deg
    per finished indexing; during indexing theta = atan2(p sin a, p cos a - d)
    (Nikravesh (1988), Prob. 5.37 geometry)."""
    am = np.mod(a + np.pi, 2 * np.pi) - np.pi          # from the line of centres
    done = np.floor((a - np.pi / 3) / (2 * np.pi))     # indexings finished
    engaged = np.abs(am) < np.pi / 3
    th_index = np.mod(np.arctan2(P * np.sin(am), P * np.cos(am) - D), 2 * np.pi)
    theta = np.where(engaged, th_index, np.radians(210.0)) - done * np.pi / 3
    rate = np.where(engaged, P * (P - D * np.cos(am)) / (D * D - 2 * P * D * np.cos(am)
                                                         + P * P), 0.0)
    return theta, rate, engaged


def test_geneva_kinematic_full_cycles():
    """Three crank revolutions at 1 rev/s: six switches at the crank angles -60 and
    +60 deg (mod 360), the slot and lock lines taken in turn by one_of, and the
    wheel's angle, rate and the dwell/index angles equal to the closed form."""
    r = mbcore.run(GENEVA)
    assert r.status == "finished"
    sw = _switches(r)
    times = np.array([e.t for e in sw])
    expect = np.array([1 / 3, 2 / 3, 4 / 3, 5 / 3, 7 / 3, 8 / 3])
    # located by Brent's method to xtol 1e-14 (1 + t) on Newton solutions converged
    # to 1e-13 (1 + |q|): observed 5e-15; bound 1e-11
    assert np.max(np.abs(times - expect)) < 1e-11
    picks = [e.message.split(", ")[1].split(" engaged")[0] for e in sw]
    assert picks == ["slot_a", "lock_b", "slot_b", "lock_c", "slot_c", "lock_a"]
    q, qd = r.series("q"), r.series("qd")
    theta, rate, engaged = geneva_closed_form(q[:, 2])
    # Newton tolerance 1e-13 (1 + |q|) ~ 1e-11 rad; observed 4e-14; bound 1e-9
    assert np.max(np.abs(q[:, 5] - theta)) < 1e-9
    assert np.max(np.abs(qd[:, 5] - 2 * np.pi * rate)) < 1e-9     # observed 2e-14
    # dwell: the wheel does not move; every indexing turns it by 2 beta = 60 deg
    assert np.max(np.abs(qd[~engaged, 5])) < 1e-9
    assert q[-1, 5] == pytest.approx(np.radians(210.0) - np.pi, abs=1e-9)
    # the indexing lasts 2 (pi/2 - beta) = 120 deg of crank rotation: a third of a turn
    assert np.diff(times)[0::2] == pytest.approx([1 / 3] * 3, abs=1e-11)


def test_geneva_kinetostatic_released_rows_carry_no_load():
    """Kinetostatics: a released element's multipliers are zero; the engaged lock
    holds the wheel (its multiplier non-zero only with a load: here the wheel at
    rest needs none) and the crank's driving torque is zero in the dwell (the crank
    turns at constant speed) but not while it drives the wheel."""
    d = _data(GENEVA)
    d["settings"]["analysis"] = "kinetostatic"
    d["settings"]["t_end"] = 1.0
    r = mbcore.run(mbcore.Model.from_dict(d))
    lam, cols = r.series("lam"), r.columns("lam")
    q = r.series("q")
    _, _, engaged = geneva_closed_form(q[:, 2])
    slot_a = [i for i, c in enumerate(cols) if c.startswith("lam/slot_a")]
    lock_a = [i for i, c in enumerate(cols) if c.startswith("lam/lock_a")]
    drive = [i for i, c in enumerate(cols) if c.startswith("lam/crank_drive")]
    t = r["t"]
    first = (t > 1 / 3 + 1e-9) & (t < 2 / 3 - 1e-9)      # slot_a engaged
    assert np.all(lam[~first][:, slot_a] == 0.0)
    assert np.all(lam[first][:, lock_a] == 0.0)
    assert np.max(np.abs(lam[first][:, slot_a])) > 1.0
    # the driving torque: zero in the dwell (to rounding of M qdd - Q ~ 1e-9 of the
    # indexing torque), the wheel's inertia reaction while indexing
    eff = np.abs(lam[:, drive[0]])
    assert np.max(eff[~engaged]) < 1e-9 * np.max(eff[engaged])


@pytest.mark.parametrize("formulation", ["di", "cs"])
def test_geneva_dynamic_free_crank(formulation):
    """No drive: the crank with a flywheel spins at 1 rev/s and drives the wheel.
    Engagement is consistent (no velocity jump), energy is conserved across the six
    switches, and in the dwell the crank has its initial speed again (the wheel is at
    rest), so a dwell lasts 240 deg / (360 deg/s)."""
    d = _data(GENEVA)
    d["drivers"] = []
    d["bodies"][0]["angular_velocity"] = 2 * np.pi
    d["settings"] = {"analysis": "dynamic", "t_end": 3.0, "output_step": 0.01,
                     "rtol": 1e-10, "atol": 1e-12, "integrator": "dop853",
                     "formulation": formulation}
    r = mbcore.run(mbcore.Model.from_dict(d))
    assert r.status == "finished"
    sw = _switches(r)
    assert len(sw) == 6
    jumps = [float(e.message.split("velocities jumped by ")[1].split(" ")[0]) for e in sw]
    # a consistent engagement: the jump is rounding of the constraint solution
    # (observed up to 1.8e-13 of velocities ~ 6); bound 1e-8
    assert max(jumps) < 1e-8
    E = r.series("energy")
    # the total energy (T + V; W = 0) at rtol 1e-10: observed 2.2e-13 relative
    assert np.ptp(E[:, 2]) < 1e-8 * E[0, 2]
    t = np.array([e.t for e in sw])
    dwell = t[1::2][:-1], t[2::2]
    assert dwell[1] - dwell[0] == pytest.approx([2 / 3, 2 / 3], abs=1e-7)
    assert t[0] == pytest.approx(1 / 3, abs=1e-9)     # the first dwell: constant speed
    # every indexing turns the wheel by 60 deg and it ends where the kinematic run does
    assert r.series("q")[-1, 5] == pytest.approx(np.radians(30.0), abs=1e-7)
    viol = r.series("violation")
    assert np.max(viol[:, 0]) < 1e-8


def _knee(gravity=True, t_end=1.0):
    d = _data(KNEE)
    d["settings"]["t_end"] = t_end
    if not gravity:
        d["gravity"] = [0.0, 0.0]
        d["bodies"][1]["angular_velocity"] = 3.0     # the shank swings forward
    return d


def _hip_momentum(q, qd, m=(5.0, 3.0), J=(0.4 ** 2 * 5 / 12, 0.4 ** 2 * 3 / 12)):
    """Angular momentum about the hip (the origin) of the two rods, per row."""
    H = 0.0
    for b in range(2):
        x, y = q[:, 3 * b], q[:, 3 * b + 1]
        vx, vy, w = qd[:, 3 * b], qd[:, 3 * b + 1], qd[:, 3 * b + 2]
        H = H + m[b] * (x * vy - y * vx) + J[b] * w
    return H


def test_knee_lock_plastic_impact_conserves_hip_momentum():
    """Without gravity the angular momentum about the fixed hip is conserved by the
    whole motion, the knee lock's plastic impact included (the impulse at the hip has
    no moment about it); after the lock the leg turns as one body at H / I_hip and
    the energy lost is T- - H^2 / (2 I_hip), booked in the work channel."""
    r = mbcore.run(mbcore.Model.from_dict(_knee(gravity=False)))
    sw = _switches(r)
    assert len(sw) == 1 and "knee_lock engaged" in sw[0].message
    t_lock = sw[0].t
    q, qd, t = r.series("q"), r.series("qd"), r["t"]
    H = _hip_momentum(q, qd)
    # conserved by the integration (rtol 1e-10) and by the impact map (exact to
    # rounding): observed 3e-12 relative; bound 1e-8
    assert np.ptp(H) < 1e-8 * abs(H[0])
    after = t > t_lock
    I_hip = 5.0 * (0.4 ** 2 / 12 + 0.2 ** 2) + 3.0 * (0.4 ** 2 / 12 + 0.6 ** 2)
    w = H[0] / I_hip
    assert np.max(np.abs(qd[after, 2] - w)) < 1e-8 * abs(w)
    assert np.max(np.abs(qd[after, 5] - w)) < 1e-8 * abs(w)
    assert np.max(np.abs(q[after, 5] - q[after, 2])) < 1e-9     # the knee stays straight
    E = r.series("energy")                # kinetic, potential, total, work_nc, balance
    T0 = E[0, 0]
    lost = T0 - 0.5 * I_hip * w * w
    assert lost > 0.1 * T0
    assert E[-1, 3] == pytest.approx(-lost, rel=1e-8)
    assert np.ptp(E[:, 4]) < 1e-8 * T0


def test_knee_lock_example_under_gravity():
    """The shipped example: the knee straightens and locks once, the energy balance
    T + V - W holds through the impact, the knee stays straight afterwards."""
    r = mbcore.run(KNEE)
    assert r.status == "finished"
    sw = _switches(r)
    assert len(sw) == 1
    E = r.series("energy")
    assert np.ptp(E[:, 4]) < 1e-8 * np.max(np.abs(E[:, 0]))
    assert E[-1, 3] < -0.5                  # the plastic impact lost energy
    q = r.series("q")
    after = r["t"] > sw[0].t
    assert np.max(np.abs(q[after, 5] - q[after, 2])) < 1e-9
    assert np.all(q[~after, 5] - q[~after, 2] < 1e-9)


def test_engage_state_is_the_plastic_impact_map():
    """The engagement map at a straight knee with arbitrary velocities: the engaged
    velocity equations hold, the velocity jump is M^-1 Phi_q^T Lam, the kinetic
    energy falls, and positions on the constraints do not move."""
    from mbcore.solve.switching import SwitchSet, engage_state
    from mbcore.system.mass import impact_mass
    d = _knee()
    d["bodies"][1]["angle"] = d["bodies"][0]["angle"]
    m = mbcore.Model.from_dict(d)
    s = m.compile()
    q = np.zeros(s.n)
    a = -0.9708
    q[:3] = [0.2 * np.cos(a), 0.2 * np.sin(a), a]
    q[3:] = [0.6 * np.cos(a), 0.6 * np.sin(a), a]
    rng = np.random.default_rng(3)
    qd = rng.normal(size=s.n)
    sw = SwitchSet(s, m.switching)
    sw.apply(0, q, 0.0)
    rows = sw.rows()
    assert len(rows) == s.m
    q1, qd1, move, lam = engage_state(s, q, qd, 0.0, rows)
    assert move < 1e-12
    J = s.jacobian_dense(q1, 0.0)
    assert np.max(np.abs(J @ qd1 - s.nu(q1, 0.0))) < 1e-12 * np.max(np.abs(qd))
    M = impact_mass(s, q1)
    assert np.allclose(M @ (qd1 - qd), J[rows].T @ lam, rtol=0, atol=1e-12)
    assert s.kinetic_energy(qd1, q1) < s.kinetic_energy(qd, q)


def test_refusals_and_errors():
    d = _data(GENEVA)
    bad = copy.deepcopy(d)
    bad["switching"]["switches"][0]["engage"] = [{"one_of": ["slot_a", "slot_x"]}]
    with pytest.raises(ModelError, match=r"switching.switches\[0\].engage\[0\].one_of\[1\]"):
        mbcore.Model.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["switching"]["switches"][0]["when"]["measure"] = {"crank.psi": 1.0}
    with pytest.raises(ModelError, match=r"unknown coordinate 'crank.psi'.*crank.phi"):
        mbcore.run(mbcore.Model.from_dict(bad))
    bad = copy.deepcopy(d)
    bad["switching"]["switches"][1]["release"] = ["lock_a"]
    with pytest.raises(ModelError, match="both engaged and released"):
        mbcore.Model.from_dict(bad)
    bad = copy.deepcopy(d)
    bad["switching"]["released"] = ["slot_b", "slot_c", "lock_b", "lock_c"]
    with pytest.raises(ModelError, match="7 engaged equations"):
        mbcore.run(mbcore.Model.from_dict(bad))
    with pytest.raises(ModelError, match="static analysis does not follow switching"):
        mbcore.run(GENEVA, settings={"analysis": "static"})
    k = _knee()
    k["settings"]["formulation"] = "projection"
    with pytest.raises(ModelError, match="formulation 'projection' does not follow"):
        mbcore.run(mbcore.Model.from_dict(k))
    with pytest.raises(ModelError, match="a Simulation does not follow switching"):
        mbcore.Simulation(mbcore.Model.from_dict(_knee()))


def _geneva_dynamic(t_end=3.0):
    d = _data(GENEVA)
    d["drivers"] = []
    d["bodies"][0]["angular_velocity"] = 2 * np.pi
    d["settings"] = {"analysis": "dynamic", "t_end": t_end, "output_step": 0.01,
                     "rtol": 1e-10, "atol": 1e-12, "integrator": "dop853",
                     "formulation": "di"}
    return mbcore.Model.from_dict(d)


def test_resume_keeps_the_engaged_set(tmp_path):
    """A run stopped in the second dwell and resumed from its file continues with
    the lock that was engaged and the guards' bands: the same later switches and
    the same final state as an uninterrupted run (to the integration tolerance)."""
    from mbcore.analysis.runner import resume
    out = tmp_path / "part.h5"
    part = mbcore.run(_geneva_dynamic(), output=out, settings={"t_end": 1.0})
    assert part.status == "finished" and len(_switches(part)) == 2
    res = resume(out, t_end=2.0)
    full = mbcore.run(_geneva_dynamic(2.0))
    t_res = [e.t for e in _switches(res) if e.t > 1.0]
    t_full = [e.t for e in _switches(full) if e.t > 1.0]
    assert len(t_res) == len(t_full) == 2
    assert "lock_b released, slot_b engaged" in _switches(res)[-2].message
    assert np.max(np.abs(np.array(t_res) - t_full)) < 1e-7
    assert np.max(np.abs(res.series("q")[-1] - full.series("q")[-1])) < 1e-6


def test_guard_bands_periodic_and_directions():
    """The guard's band bookkeeping: a periodic measure crossing c + k P upwards and
    downwards, with the direction filter; a crossing against the direction moves
    the band but does not switch."""
    from mbcore.solve.switching import SwitchSet
    m = mbcore.Model.from_file(GENEVA)
    s = m.compile()
    sw = SwitchSet(s, m.switching)
    q = np.zeros(s.n)
    c, P = -np.pi / 3, 2 * np.pi

    def at(phi):
        q[2] = phi
        return q

    sw.start(at(np.pi), 0.0)                   # band [c + 2 pi k, ...): k = 0 for 'enters'
    assert sw.band[0] == 0
    assert sw.gap(0, at(np.pi), 0.0) == pytest.approx(min(np.pi - c, c + P - np.pi))
    assert sw.crossed(0, at(5.0), 0.0) == 0    # inside (c + P = 5.236)
    assert sw.crossed(0, at(5.3), 0.0) == 1 and sw.band[0] == 1
    assert sw.fires(0, 1) and not sw.fires(0, -1)    # direction: rising
    assert sw.crossed(0, at(5.2), 0.0) == -1 and sw.band[0] == 0   # back: falling
    assert sw.crossed(0, at(c - 0.01), 0.0) == -1 and sw.band[0] == -1
    # a non-periodic guard on time
    d = _knee()
    d["switching"] = {"switches": [{"name": "brake_off", "release": ["knee_lock"],
                                    "when": {"measure": {"t": 1.0}, "crosses": 0.3,
                                             "direction": "falling"}}]}
    mk = mbcore.Model.from_dict(d)
    sk = SwitchSet(mk.compile(), mk.switching)
    qq = np.zeros(6)
    sk.start(qq, 0.0)
    assert sk.gap(0, qq, 0.1) == pytest.approx(0.2)
    assert sk.crossed(0, qq, 0.31) == 1 and not sk.fires(0, 1)


def test_release_on_time_in_a_dynamic_run():
    """A brake on the knee (the lock engaged from the start) released at t = 0.3 by
    a guard on time: the switch is at 0.3 to the event tolerance, the knee stays
    straight before it (the leg swings as one body) and bends after it; a release
    changes no velocity."""
    d = _knee(t_end=0.6)
    d["switching"] = {"switches": [{"name": "brake_off", "release": ["knee_lock"],
                                    "when": {"measure": {"t": 1.0}, "crosses": 0.3}}]}
    r = mbcore.run(mbcore.Model.from_dict(d))
    sw = _switches(r)
    assert len(sw) == 1 and "knee_lock released" in sw[0].message
    assert sw[0].t == pytest.approx(0.3, abs=1e-12)
    assert "velocities jumped by 0 (" in sw[0].message
    q, t = r.series("q"), r["t"]
    knee = q[:, 5] - q[:, 2]
    assert np.max(np.abs(knee[t <= 0.3])) < 1e-9
    assert np.max(np.abs(knee[t > 0.35])) > 1e-3
