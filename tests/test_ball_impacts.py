"""Rigid ball-to-ball impacts (contacts with ``surface_radius``; mbcore.solve.impacts)
and the choice between simultaneous and sequential resolution
(``impact_resolution``), checked against closed forms: two balls colliding
obliquely (Nikravesh (1988), Prob. 10.23: the impulse along the line of centres,
``v_n+ = -e v_n-``, tangential velocities unchanged), a row of touching balls hit
at one end (sequential: the velocity passes to the last ball; simultaneous: the
struck ball rebounds at ``(1 - N) / (1 + N)`` of its speed and the N others leave
together at ``2 / (1 + N)``), and Newton's cradle (Prob. 10.24) with its momentum
and energy.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import ModelError
from mbcore.solve.impacts import ContactSet

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _row(n, mode, dims, v0=1.0, r=0.1, e=1.0, t_end=1.0):
    """n balls of mass 1 on the x axis, no gravity: the first at x = -0.3 moving at
    v0 towards the others, which touch."""
    m = Model("balls")
    if dims == 3:
        m.set_dimensions(3)
    z = [0.0] if dims == 3 else []
    for i in range(n):
        m.add_body(f"b{i}", mass=1.0, inertia=0.01 if dims == 2 else [0.01] * 3,
                   position=[2 * r * i if i else -0.3, 0.0] + z,
                   velocity=[v0 if i == 0 else 0.0, 0.0] + z)
    for i in range(n - 1):
        m.impacts.append({"name": f"c{i}", "body": f"b{i}", "surface": f"b{i + 1}",
                          "radius": r, "surface_radius": r, "restitution": e})
    m.settings.update({"analysis": "dynamic", "t_end": t_end, "output_step": 0.1,
                       "impact_resolution": mode, "rtol": 1e-10, "atol": 1e-12})
    return m


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("n", [3, 5])
def test_a_row_of_touching_balls(n, dims):
    """e = 1, equal masses.  Sequential: [0, ..., 0, v0]; simultaneous: the struck
    ball at (2 - n) / n v0 and the n - 1 others at 2 / n v0 (one impact map with the
    touching contacts kept closed).  Momentum and kinetic energy are conserved by
    both (observed 6e-15; bound 1e-12)."""
    seq = mbcore.run(_row(n, "sequential", dims))
    sim = mbcore.run(_row(n, "simultaneous", dims))
    vs = np.array([seq[f"qd/b{i}.x"][-1] for i in range(n)])
    vm = np.array([sim[f"qd/b{i}.x"][-1] for i in range(n)])
    # observed: velocities 2.3e-15 off the closed forms, momentum 5.8e-15, energy
    # 2.0e-15 (a few roundings of the impact map's least-squares solve); bound 1e-12,
    # 170x the largest
    np.testing.assert_allclose(vs, [0.0] * (n - 1) + [1.0], atol=1e-12)
    k = n - 1
    np.testing.assert_allclose(vm, [(1 - k) / (1 + k)] + [2 / (1 + k)] * k, atol=1e-12)
    for v in (vs, vm):
        assert abs(v.sum() - 1.0) < 1e-12
        assert abs(0.5 * (v ** 2).sum() - 0.5) < 1e-12
    assert sum(1 for ev in seq.events if ev.kind == "impact") == n - 1
    assert sum(1 for ev in sim.events if ev.kind == "impact") == n - 1


@pytest.mark.parametrize("dims", [2, 3])
def test_oblique_impact_of_two_balls(dims):
    """Masses 1 and 3, e = 0.6, a glancing hit: along the line of centres n the
    1-D law of impact, across it nothing changes (observed 1e-15)."""
    r1, r2, m1, m2, e = 0.1, 0.15, 1.0, 3.0, 0.6
    rng = np.random.default_rng(4)
    m = Model("two balls")
    if dims == 3:
        m.set_dimensions(3)
    z = [0.0] if dims == 3 else []
    b = 0.12                                   # impact parameter
    m.add_body("a", mass=m1, inertia=0.01 if dims == 2 else [0.01] * 3,
               position=[-0.5, b] + z, velocity=[2.0, 0.0] + z)
    m.add_body("b", mass=m2, inertia=0.02 if dims == 2 else [0.02] * 3,
               position=[0.0, 0.0] + z, velocity=[-0.5, 0.1] + z)
    m.impacts.append({"name": "hit", "body": "a", "surface": "b", "radius": r1,
                      "surface_radius": r2, "restitution": e})
    # events are tested at step ends and the steps are at most an output step: two
    # balls could pass through each other inside a longer one
    m.settings.update({"analysis": "dynamic", "t_end": 0.4, "output_step": 0.01,
                       "rtol": 1e-11, "atol": 1e-13})
    res = mbcore.run(m)
    assert res.stats["impacts"] == 1
    # the closed form at the contact instant, from the free flight before it
    t_hit = float([ev.t for ev in res.events if ev.kind == "impact"][0])
    va, vb = np.array([2.0, 0.0] + z), np.array([-0.5, 0.1] + z)
    pa = np.array([-0.5, b] + z) + va * t_hit
    pb = np.zeros(dims) + vb * t_hit
    n = (pa - pb) / np.linalg.norm(pa - pb)
    assert np.linalg.norm(pa - pb) == pytest.approx(r1 + r2, abs=1e-9)
    una, unb = va @ n, vb @ n
    P = (1 + e) * (una - unb) / (1 / m1 + 1 / m2)
    va2, vb2 = va - P / m1 * n, vb + P / m2 * n
    labels = "xyz"[:dims]
    got_a = np.array([res[f"qd/a.{c}"][-1] for c in labels])
    got_b = np.array([res[f"qd/b.{c}"][-1] for c in labels])
    np.testing.assert_allclose(got_a, va2, atol=1e-9)
    np.testing.assert_allclose(got_b, vb2, atol=1e-9)
    _ = rng


def test_ball_contact_jacobian_is_the_gap_rate():
    """d gap / dt = C(q) qdot for spatial balls on turning bodies (off-centre
    spheres), by central differences along a motion (observed 1e-11)."""
    m = Model("offset balls")
    m.set_dimensions(3)
    m.add_body("a", position=[0.0, 0.0, 0.0])
    m.add_body("b", position=[1.0, 0.2, 0.1])
    m.impacts.append({"name": "c", "body": "a", "surface": "b", "point": [0.1, 0.2, -0.1],
                      "radius": 0.2, "surface_point": [-0.1, 0.05, 0.3],
                      "surface_radius": 0.3, "restitution": 0.5})
    s = m.compile()
    cs = ContactSet(s, s.model.contacts)
    rng = np.random.default_rng(2)
    q0 = s.initial_state(0.0).q
    dq = rng.normal(size=s.n)

    def q_at(h):
        q = q0 + h * dq
        for o in s.p_index.reshape(-1, 4):
            q[o] /= np.linalg.norm(q[o])
        return q
    qd = (q_at(1e-6) - q_at(-1e-6)) / 2e-6
    h = 1e-4
    fd = (cs.gap(0, q_at(h)) - cs.gap(0, q_at(-h))) / (2 * h)
    assert abs(fd - cs.jacobian_row(0, q_at(0.0)) @ qd) < 1e-7 * max(1.0, abs(fd))


def test_newtons_cradle_example():
    """examples/newtons_cradle.yaml (sequential, e = 1): at each impact the first
    ball's speed passes to the last, which swings out to the release angle of
    30 deg (sampled every 5 ms: within 1e-3 deg) while the others stay at rest
    (1e-9 rad); energy is conserved (observed 1e-13 relative)."""
    res = mbcore.run(Model.from_file(EXAMPLES / "newtons_cradle.yaml"))
    hits = [ev for ev in res.events if ev.kind == "impact"]
    assert len(hits) >= 8 and len({round(ev.t, 9) for ev in hits}) >= 2
    phi5 = np.asarray(res["q/ball5.phi"])
    assert math.degrees(phi5.max()) == pytest.approx(30.0, abs=1e-3)
    t = np.asarray(res.t)
    first_return = t > 0.3
    for i in (2, 3, 4):
        assert np.abs(np.asarray(res[f"q/ball{i}.phi"])).max() < 1e-9
    e = np.asarray(res["energy/total"])
    assert np.abs(e - e[0]).max() < 1e-10 * abs(e[0])
    _ = first_return


def test_simultaneous_cradle():
    """The cradle with one impact map: the struck ball rebounds at -3/5 of its
    speed v, the four others leave together at 2/5 (at the bottom the strings are
    vertical, so the horizontal impulses meet no joint): the impulses of the four
    contacts are m_e v (1.6, 1.2, 0.8, 0.4), with each ball's effective mass at its
    centre ``m_e = m + J / L^2`` as it turns about its pin (observed 1e-12 relative)."""
    m = Model.from_file(EXAMPLES / "newtons_cradle.yaml")
    m.settings.update({"impact_resolution": "simultaneous", "t_end": 0.3,
                       "output_step": 0.3})
    res = mbcore.run(m)
    hits = [ev for ev in res.events if ev.kind == "impact"]
    assert [ev.message.split(":")[0] for ev in hits] == [
        "contact12", "contact23", "contact34", "contact45"]
    v = -float(hits[0].message.split("normal velocity ")[1].split(" ")[0])
    impulses = [float(ev.message.rsplit("impulse ", 1)[1]) for ev in hits]
    m_e = 0.1 + 0.4 * 0.1 * 0.02 ** 2 / 0.3 ** 2
    np.testing.assert_allclose(impulses, m_e * v * np.array([1.6, 1.2, 0.8, 0.4]),
                               rtol=1e-9)


def test_bad_ball_contacts_are_named():
    m = _row(2, "sequential", 2)
    m.impacts[0]["normal"] = [0, 1]
    with pytest.raises(ModelError, match=r"impacts\[0\]\.normal.*line of centres"):
        m.compile()
    m = _row(2, "sequential", 2, r=0.0)
    with pytest.raises(ModelError, match=r"impacts\[0\]\.surface_radius.*radius"):
        m.compile()
    m = _row(2, "sideways", 2)
    with pytest.raises(ModelError, match="impact_resolution"):
        mbcore.run(m)


@pytest.mark.parametrize("formulation", ["cp", "projection", "penalty", "joint_coordinates",
                                         "ggl", "stiff"])
def test_impacts_in_every_formulation(formulation):
    """The cradle's first two swings with every formulation: the impact map acts on
    the Cartesian velocities and the formulation takes the new state in its own
    coordinates (independent coordinates, joint angles, the DAE state): the last
    ball swings to 30 deg (within 1e-3 deg: 5 ms sampling), the others stay at rest
    (1e-9 rad), energy is conserved (observed 1e-11 relative for the bdf forms,
    1e-14 else)."""
    m = Model.from_file(EXAMPLES / "newtons_cradle.yaml")
    st = {"formulation": formulation, "t_end": 1.0}
    if formulation in ("ggl", "stiff"):
        st.update(integrator="bdf", rtol=1e-8, atol=1e-10)
    m.settings.update(st)
    res = mbcore.run(m)
    assert math.degrees(np.max(np.asarray(res["q/ball5.phi"]))) == pytest.approx(30.0,
                                                                                  abs=1e-3)
    for i in (2, 3, 4):
        assert np.abs(np.asarray(res[f"q/ball{i}.phi"])).max() < 1e-9
    e = np.asarray(res["energy/total"])
    assert np.abs(e - e[0]).max() < 1e-9 * abs(e[0])
