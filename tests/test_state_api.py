"""The public state API: accelerations and multipliers at a given state
(``mbcore.accelerations``, ``Simulation.accelerations``), against a closed form, the
recorded run, and without disturbing the simulation."""
from __future__ import annotations

import math

import numpy as np
import pytest

import mbcore
from mbcore import Model

G, M, L = 9.81, 2.0, 0.8
J = M * L ** 2 / 12


def _pendulum():
    """A slender bar pinned to the ground at its left end, horizontal at t = 0."""
    return Model.from_dict({
        "name": "bar pendulum",
        "gravity": [0.0, -G],
        "settings": {"analysis": "dynamic", "t_end": 0.2, "output_step": 0.05,
                     "rtol": 1e-10, "atol": 1e-12},
        "bodies": [{"name": "bar", "mass": M, "inertia": J, "position": [L / 2, 0.0]}],
        "joints": [{"name": "pin", "type": "revolute", "body_i": "bar",
                    "body_j": "ground", "point_i": [-L / 2, 0.0], "point_j": [0.0, 0.0]}],
    })


def test_pendulum_accelerations_and_reaction_in_closed_form():
    """phi'' = -m g (L/2) cos(phi) / (J + m L²/4); at rest the pin carries
    m (g + y''), and a spinning bar adds the centripetal m (L/2) w² along it."""
    sysm = _pendulum().compile()
    for phi, w in ((0.0, 0.0), (0.7, 0.0), (0.7, 3.0)):
        c, s = math.cos(phi), math.sin(phi)
        q = np.array([L / 2 * c, L / 2 * s, phi])
        qd = np.array([-L / 2 * s * w, L / 2 * c * w, w])
        st = mbcore.accelerations(sysm, q, qd, 0.0)
        a = -M * G * (L / 2) * c / (J + M * L ** 2 / 4)
        # bounds: closed form vs a Schur solve of 3 unknowns, O(10 eps) relative
        # (observed ≤ 2.3e-16 relative, 5e-15 absolute): 1e-12 has a ≥ 2000× margin
        assert st.qdd[2] == pytest.approx(a, rel=1e-12)
        xdd = L / 2 * (-s * a - c * w ** 2)
        ydd = L / 2 * (c * a - s * w ** 2)
        assert st.qdd[:2] == pytest.approx([xdd, ydd], rel=1e-12, abs=1e-12 * G)
        reaction = sysm.jacobian_dense(q, 0.0).T @ st.lam      # + Phi_q^T lam
        np.testing.assert_allclose(reaction[:2], [M * xdd, M * (ydd + G)],
                                   rtol=1e-12, atol=1e-12 * M * G)
        assert st.t == 0.0 and np.array_equal(st.q, q) and np.array_equal(st.qd, qd)


def test_simulation_accelerations_equal_the_recorded_row_and_leave_the_state(examples):
    model = Model.from_file(examples / "slider_crank_dynamic.yaml")
    s = {"t_end": 0.1, "output_step": 0.05}
    sim = mbcore.Simulation(model, s)
    twin = mbcore.Simulation(model, s)
    sim.advance_to(0.05)
    twin.advance_to(0.05)
    before = sim.get_state()
    st = sim.accelerations()
    after = sim.get_state()
    assert np.array_equal(before.y, after.y) and before.t == after.t
    # same state, the run's own evaluation of qdd and lam: equal up to the rounding
    # of two solves (observed 0; bound 1e-10 of the largest entry, as below)
    rows = {c: sim[c] for c in sim.columns if c.startswith(("qdd/", "lam/"))}
    names = sim.system.coordinate_names
    qdd = np.array([rows[f"qdd/{n}"] for n in names])
    scale = np.abs(qdd).max()
    np.testing.assert_allclose(st.qdd, qdd, rtol=0, atol=1e-10 * scale)
    lam_names = [c for c in sim.columns if c.startswith("lam/")]
    lam = np.array([rows[c] for c in lam_names])
    np.testing.assert_allclose(st.lam, lam, rtol=0, atol=1e-10 * np.abs(lam).max())
    sim.advance_to(0.1)                 # the call changed nothing: bit for bit
    twin.advance_to(0.1)
    assert np.array_equal(sim.get_state().y, twin.get_state().y)


def test_simulation_accelerations_at_another_state(examples):
    model = Model.from_file(examples / "spatial_slider_crank_dynamic.yaml")
    sim = mbcore.Simulation(model, {"t_end": 0.1})
    ref = mbcore.run(model, settings={"t_end": 0.05, "output_step": 0.05, "rtol": 1e-10,
                                      "atol": 1e-12})
    q, qd, t = ref["q"][-1], ref["qd"][-1], float(ref["t"][-1])
    st = sim.accelerations(q, qd, t)
    assert sim.t == 0.0
    # bound: the recorded row and this call solve the same equations at the same
    # state by different paths (observed 3.2e-13 of the largest entry: 300× margin)
    np.testing.assert_allclose(st.qdd, ref["qdd"][-1], rtol=0,
                               atol=1e-10 * np.abs(ref["qdd"][-1]).max())


@pytest.mark.parametrize("q, qd, match", [
    ([1.0, 2.0], None, r"q needs 9 values \(crank.x"),
    (None, [0.0] * 8 + [math.nan], r"qd\[slider.phi\] is nan")])
def test_bad_state_is_named(examples, q, qd, match):
    sim = mbcore.Simulation(Model.from_file(examples / "slider_crank_dynamic.yaml"))
    with pytest.raises(mbcore.SimulationError, match=match):
        sim.accelerations(q, qd)
