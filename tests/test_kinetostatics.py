"""Inverse dynamics / kinetostatics (004 §9.7; spec/algorithms.md §6)."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model
from mbcore.solve.dynamics import AccelerationSolver


def massive_fourbar(examples, spring=True):
    d = yaml.safe_load((examples / "fourbar_kap.yaml").read_text())
    d["gravity"] = [0, -9.81]
    d["settings"]["analysis"] = "kinetostatic"
    for b, (m, J) in zip(d["bodies"], [(1, 0.3), (2.25, 2), (2, 1.35)], strict=True):
        b["mass"], b["inertia"] = m, J
    if spring:
        d["forces"] = [{"name": "spring", "type": "tsda", "body_i": "ground",
                        "body_j": "follower", "point_i": [4.0, 3.0], "point_j": [1.0, 0.0],
                        "stiffness": 40.0, "damping": 3.0, "free_length": 1.5}]
    return Model.from_dict(d)


def test_driver_torque_reproduces_the_motion_in_forward_dynamics(examples, backend):
    """The crank torque from inverse dynamics, applied as an external moment to the
    undriven mechanism, gives back the prescribed accelerations (spec §4.5), and
    the multipliers satisfy both block equations of motion."""
    model = massive_fourbar(examples)
    res = mbcore.run(model, kernels=backend)
    sysm = res.system
    free = massive_fourbar(examples)
    free.elements["drivers"].clear()
    for k in (0, 10, 23, 37):
        q, qd, qdd, lam = res["q"][k], res["qd"][k], res["qdd"][k], res["lam"][k]
        t = res.t[k]
        torque = float(lam[sysm.element_rows["crank_drive"]][0])   # moment +lam on crank
        # the driver row's reaction is the motor torque on the crank
        assert res["reactions/crank_drive.body.n"][k] == pytest.approx(torque, abs=1e-12)
        f = free.__class__.from_dict(free.to_dict())
        f.add_force("torque", "motor", body="crank", torque=torque)
        fs = f.compile(kernels=backend)
        qdd_f, _ = AccelerationSolver(fs).solve(q, qd, t)
        np.testing.assert_allclose(qdd_f, qdd, atol=1e-8 * (1 + np.abs(qdd).max()))
        J = sysm.jacobian_dense(q, t)
        np.testing.assert_allclose(sysm.mass_diag * qdd - J.T @ lam, sysm.forces(q, qd, t),
                                   atol=1e-9)


def test_quasi_static_torque_balances_gravity_by_virtual_work(examples):
    """Driven very slowly, the crank torque balances gravity and the spring: the
    work of the motor torque equals the rise of the potential energy,
    tau * dphi_crank = dV, along the motion."""
    model = massive_fourbar(examples)
    model.elements["drivers"][0].raw["function"] = {"polynomial": [1.0472, 1e-4]}
    model.settings.update(t_end=2000.0, output_step=100.0)
    res = mbcore.run(model)
    V = res["energy/potential"]
    tau = res["reactions/crank_drive.body.n"]
    dphi = np.diff(res["q/crank.phi"])
    work = 0.5 * (tau[1:] + tau[:-1]) * dphi
    # the trapezoid rule's own error over 100 s intervals is the bound (observed 3.5e-4
    # relative, the same under every BLAS kernel): a quadrature claim, not rounding
    np.testing.assert_allclose(work, np.diff(V), rtol=2e-3, atol=1e-6)


def test_kinetostatic_channels_written_to_hdf5(tmp_path, examples):
    out = tmp_path / "k.h5"
    mbcore.run(massive_fourbar(examples), output=out)
    with mbcore.Result(out) as res:
        assert res.status == "finished" and res.analysis == "kinetostatic"
        assert {"lam", "reactions", "forces", "energy"} <= set(res.channels)
        assert "O2.i.fx" in res.labels("reactions") and "spring.force" in res.labels("forces")


def test_local_reactions_channel_matches_system(examples):
    res = mbcore.run(massive_fourbar(examples))
    s = res.system
    k = 12
    loc = s.reactions_local(res["q"][k], res.t[k], res["lam"][k])
    np.testing.assert_allclose(res["reactions_local"][k], loc)
    # the revolute O2's force on the ground (body i) in ground axes equals its global force
    lab = s.local_reaction_labels
    assert res["reactions_local/O2.fx_i"][k] == pytest.approx(res["reactions/O2.i.fx"][k])
    assert res["reactions_local/crank_drive.effort"][k] == \
        pytest.approx(res["reactions/crank_drive.body.n"][k])
    assert len(lab) == len(set(lab))


def test_renamed_ground_is_the_default_body():
    m = Model("frame-named", ground="frame")
    m.add_body("a", position=(1, 0))
    m.add_joint("revolute", "pin", body_i="frame", body_j="a", point_i=(0, 0), point_j=(-1, 0))
    m.add_force("torque", "motor", body="a", torque=1.0)     # reaction_body defaults to ground
    s = m.compile()
    assert s.force_groups[0].boff[0, 1] == s.n              # the ground's slot
