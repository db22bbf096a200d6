"""The ``joints`` result channel (docs/results.md): relative joint coordinates and
their rates from each joint type's ``relative`` method, checked against analytic
motions (a driven crank), the bodies' own coordinates (a slider, planar angles),
direct computations from the Euler parameters (spherical joints, the bicycle's
steer, the universal joint's two-angle decomposition), finite differences of the
recorded angles, the unwrapping over many turns, the block-wise evaluation of the
compiled loop's rows and the selection by ``settings.record``."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.analysis.joint_channels import JointChannel
from mbcore.elements.rotations import A as Amat, G as Gmat, quat_conj, quat_product
from mbcore.errors import ModelError

EX = Path(__file__).resolve().parents[1] / "examples"


def model(name: str) -> Model:
    return Model.from_file(EX / f"{name}.yaml")


@pytest.fixture(scope="module")
def crank():
    """The spatial slider-crank (kinematic): the crank driven by c(t) = 0.3 + 2 t
    from its initial orientation at 0.3 rad, 3 s (6 rad: the angle passes pi)."""
    return mbcore.run(model("spatial_slider_crank"))


def _rot(u: np.ndarray, th: np.ndarray) -> np.ndarray:
    """Rotation matrices about the unit axis u by the angles th (Rodrigues)."""
    K = np.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])
    th = np.asarray(th)[:, None, None]
    return np.eye(3) + np.sin(th) * K + (1.0 - np.cos(th)) * (K @ K)


def _body_q(res, body: str) -> np.ndarray:
    return np.stack([res[f"{body}.{c}"] for c in ("p0", "p1", "p2", "p3")], -1)


def _body_qd(res, body: str) -> np.ndarray:
    cols = [res.labels("q").index(f"{body}.{c}") for c in ("p0", "p1", "p2", "p3")]
    return res["qd"][:, cols]


def test_labels_in_element_order(crank):
    assert crank.labels("joints") == [
        "pivot.angle", "pivot.angle_rate",
        "pin.p0", "pin.p1", "pin.p2", "pin.p3", "pin.wx", "pin.wy", "pin.wz",
        "hooke.angle_i", "hooke.angle_j", "hooke.angle_i_rate", "hooke.angle_j_rate",
        "guide.disp", "guide.disp_rate"]


def test_revolute_angle_of_a_driven_crank(crank):
    """pivot.angle = c(t) - c(0) = 2 t (zero at the initial configuration, unwrapped
    past pi up to 6 rad), its rate 2."""
    t = crank.t
    assert crank["pivot.angle"][-1] > 5.9                   # past +-pi: unwrapped
    # the driver holds the angle to the Newton tolerance: observed 1.5e-10 (angle),
    # 2.8e-14 (rate)
    np.testing.assert_allclose(crank["pivot.angle"], 2.0 * t, rtol=0, atol=2e-8)
    # rate: observed 2.8e-14, bound 5e-12 (178x margin)
    np.testing.assert_allclose(crank["pivot.angle_rate"], 2.0, rtol=0, atol=5e-12)


def test_rates_are_the_derivatives_of_the_recorded_coordinates(crank):
    """Central differences of each angle / displacement along the recorded
    trajectory (h = 0.01) against the recorded rates: O(h^2) apart."""
    t = crank.t
    h = t[1] - t[0]
    for name in ("pivot.angle", "hooke.angle_i", "hooke.angle_j", "guide.disp"):
        x, xd = crank[name], crank[f"{name}_rate"]
        fd = (x[2:] - x[:-2]) / (2.0 * h)
        scale = 1.0 + np.max(np.abs(xd))
        # observed at most 2.1e-5 (hooke.angle_i) relative to the scale; a wrong
        # sign or factor of a rate term is O(1)
        np.testing.assert_allclose(fd, xd[1:-1], rtol=0, atol=2e-3 * scale, err_msg=name)


def test_translational_displacement_is_the_slider_position(crank):
    """guide: axis x through (0, 0.05, 0.1) on the ground, slider origin on it:
    disp = slider.x, disp_rate = its velocity."""
    # observed 0 and 0 (the same sums); bound 1e-13 on values ≤ 0.5 m: > 100x the
    # rounding of a few sums of that size (≤ 1e-16 each)
    np.testing.assert_allclose(crank["guide.disp"], crank["slider.x"], rtol=0, atol=1e-13)
    ix = crank.labels("qd").index("slider.x")
    # observed 0 (the same sums); bound 1e-12 on velocities of O(1) m/s, > 100x
    # their rounding
    np.testing.assert_allclose(crank["guide.disp_rate"], crank["qd"][:, ix],
                               rtol=0, atol=1e-12)


def test_spherical_relative_rotation_from_the_euler_parameters(crank):
    """pin: the Euler parameters of A_crank^T A_coupler and the coupler's angular
    velocity relative to the crank in crank axes, computed directly."""
    pi, pj = _body_q(crank, "crank"), _body_q(crank, "coupler")
    prel = quat_product(quat_conj(pi), pj)
    got = np.stack([crank[f"pin.{c}"] for c in ("p0", "p1", "p2", "p3")], -1)
    # the same numbers by other formulas (the channel's from unit parameters):
    # observed 2.6e-14: bound 5e-12, 190x margin
    np.testing.assert_allclose(got, prel, rtol=0, atol=5e-12)
    # A(p) of the recorded (Newton-converged, not exactly unit) parameters against
    # A of the channel's product of unit ones: observed 1.0e-13
    np.testing.assert_allclose(np.einsum("rij,rjk->rik", np.swapaxes(Amat(pi), 1, 2),
                                         Amat(pj)), Amat(got), rtol=0, atol=1e-11)
    wi = 2.0 * np.einsum("rkl,rl->rk", Gmat(pi), _body_qd(crank, "crank"))
    wj = 2.0 * np.einsum("rkl,rl->rk", Gmat(pj), _body_qd(crank, "coupler"))
    wrel = np.einsum("rji,rj->ri", Amat(pi), wj - wi)
    got = np.stack([crank[f"pin.{c}"] for c in ("wx", "wy", "wz")], -1)
    np.testing.assert_allclose(got, wrel, rtol=0, atol=2e-11)   # observed 1.1e-13


def test_universal_angles_decompose_the_relative_rotation(crank):
    """hooke: A_rel A_rel0^T = Rot(a_i, angle_i) Rot(b, angle_j) with a_i = z of the
    coupler, b = the slider's y in coupler axes initially (the two-axis
    decomposition that defines the angles)."""
    q0 = model("spatial_slider_crank").compile(kernels="numpy").initial_state().q
    names = crank.labels("q")
    o_c, o_s = names.index("coupler.p0"), names.index("slider.p0")
    pc0, ps0 = q0[o_c:o_c + 4], q0[o_s:o_s + 4]
    Arel0 = Amat(pc0).T @ Amat(ps0)
    pc, ps = _body_q(crank, "coupler"), _body_q(crank, "slider")
    Arel = np.einsum("rji,rjk->rik", Amat(pc), Amat(ps))
    ai = np.array([0.0, 0.0, 1.0])
    b = Arel0 @ np.array([0.0, 1.0, 0.0])
    b -= (b @ ai) * ai
    b /= np.linalg.norm(b)
    R = _rot(ai, crank["hooke.angle_i"]) @ _rot(b, crank["hooke.angle_j"])
    assert np.max(np.abs(crank["hooke.angle_i"])) > 0.1       # a real motion
    # observed 5.2e-14; angle_j of the opposite sign: 0.075
    np.testing.assert_allclose(R, Arel @ Arel0.T, rtol=0, atol=1e-11)


def test_bicycle_steer_from_the_euler_parameters():
    """Whipple bicycle with a lean-rate perturbation: steer.angle is the rotation of
    the fork relative to the rear frame about the steer axis, 2 atan2(e·u, e0) of
    their relative Euler parameters (identity initially); the wheels' hub angles
    grow past many turns (unwrapped) at the spin rates."""
    d = model("whipple_bicycle").to_dict()
    d["bodies"][0]["angular_velocity"] = [0.5, 0.0, 0.0]
    res = mbcore.run(Model.from_dict(d), settings={"t_end": 1.0, "output_step": 0.01})
    pr, pf = _body_q(res, "rear"), _body_q(res, "fork")
    prel = quat_product(quat_conj(pr), pf)
    u = np.array([0.30901699437495, 0.0, -0.95105651629515])
    u /= np.linalg.norm(u)
    direct = 2.0 * np.arctan2(prel[:, 1:] @ u, prel[:, 0])
    steer = res["steer.angle"]
    assert np.max(np.abs(steer)) > 0.01
    # observed 4.5e-17; the opposite sign: 0.062
    np.testing.assert_allclose(steer, direct, rtol=0, atol=1e-9)
    assert res["rear_hub.angle"][-1] > 4 * np.pi                 # > two turns, unwrapped
    np.testing.assert_allclose(np.diff(res["rear_hub.angle"]) / 0.01,
                               0.5 * (res["rear_hub.angle_rate"][1:]
                                      + res["rear_hub.angle_rate"][:-1]),
                               rtol=1e-4)                        # observed 2.6e-7


def test_planar_revolute_and_translational():
    """Planar slider-crank: each revolute's angle phi_j - phi_i with its rate, and the
    translational 'slide' (body_i the slider, axis x, body_j the ground, both points
    at the origins): disp = u^T (r_ground - r_slider) = -slider.x, its rate
    -slider.xd."""
    res = mbcore.run(model("slider_crank"))
    spec = {el["name"]: el for el in model("slider_crank").to_dict()["joints"]}
    qn = res.labels("q")

    def col(ch, body, c):
        return res[ch][:, qn.index(f"{body}.{c}")] if f"{body}.{c}" in qn else 0.0
    for name in ("A", "B", "C"):
        bi, bj = spec[name]["body_i"], spec[name]["body_j"]
        assert np.array_equal(res[f"{name}.angle"], col("q", bj, "phi") - col("q", bi, "phi"))
        assert np.array_equal(res[f"{name}.angle_rate"],
                              col("qd", bj, "phi") - col("qd", bi, "phi"))
    assert np.ptp(res["slide.disp"]) > 100.0
    # the slider's angle is held at 0 by the joint: observed 0 and 0
    np.testing.assert_allclose(res["slide.disp"], -res["slider.x"], rtol=0, atol=1e-9)
    np.testing.assert_allclose(res["slide.disp_rate"], -col("qd", "slider", "x"),
                               rtol=0, atol=1e-9)


def _dynamic(loop: str, record=None):
    d = model("spatial_double_pendulum").to_dict()
    d["settings"].update(t_end=1.0, output_step=0.005, loop=loop)
    if record is not None:
        d["settings"]["record"] = record
    return mbcore.run(Model.from_dict(d))


@pytest.mark.parametrize("loop", ["auto", "python"])
def test_dynamic_rows_equal_one_evaluation_of_all_rows(loop):
    """The compiled loop's rows come in blocks, the Python driver's one at a time:
    either way the channel equals one evaluation of all recorded rows, bit for bit
    (row-wise formulas, unwrapping by exact whole turns); and the spherical
    joints' relative parameters match the bodies' Euler parameters."""
    res = _dynamic(loop)
    s = Model.from_dict(_dynamic_model()).compile()
    again = JointChannel(s).rows(res["q"], res["qd"], res.t)
    assert np.array_equal(res["joints"], again)
    p1, p2 = _body_q(res, "bar1"), _body_q(res, "bar2")
    got = np.stack([res[f"elbow.{c}"] for c in ("p0", "p1", "p2", "p3")], -1)
    np.testing.assert_allclose(got, quat_product(quat_conj(p1), p2), rtol=0,
                               atol=1e-11)                       # observed 5.5e-14
    got = np.stack([res[f"shoulder.{c}"] for c in ("p0", "p1", "p2", "p3")], -1)
    np.testing.assert_allclose(got, p1 / np.linalg.norm(p1, axis=1)[:, None], rtol=0,
                               atol=1e-13)                       # observed 2.2e-16


def _dynamic_model() -> dict:
    return model("spatial_double_pendulum").to_dict()


def test_unwrapping_is_exact_whole_turns_in_any_blocks():
    """A revolute turning 10 rad/s for 3 s (30 rad): evaluated in blocks of 7 rows,
    in one block and row by row, the values are the same bits and the unwrapped
    angle follows the principal one by whole turns."""
    crank = model("spatial_slider_crank").to_dict()
    crank["drivers"][0]["function"] = {"polynomial": [0.3, 10.0]}
    crank["settings"].update(output_step=0.02)
    res = mbcore.run(Model.from_dict(crank))
    s = Model.from_dict(crank).compile()
    Q, QD, T = res["q"], res["qd"], res.t
    whole = JointChannel(s).rows(Q, QD, T)
    jc = JointChannel(s)
    blocks = np.concatenate([jc.rows(Q[k:k + 7], QD[k:k + 7], T[k:k + 7])
                             for k in range(0, len(T), 7)])
    jc = JointChannel(s)
    single = np.concatenate([jc.rows(Q[k:k + 1], QD[k:k + 1], T[k:k + 1])
                             for k in range(len(T))])
    assert np.array_equal(whole, blocks) and np.array_equal(whole, single)
    assert np.array_equal(whole, res["joints"])
    ang = res["pivot.angle"]
    np.testing.assert_allclose(ang, 10.0 * T, rtol=0, atol=2e-8)   # observed 1.6e-10
    turns = (ang - np.arctan2(np.sin(ang), np.cos(ang))) / (2 * np.pi)
    np.testing.assert_allclose(turns, np.round(turns), rtol=0, atol=1e-9)  # observed 0
    assert np.round(turns[-1]) == 5


def test_a_block_evaluated_again_from_its_start_starts_from_the_same_state():
    """After a failing row the compiled loop's block is evaluated again from its
    start (row by row): the unwrapping restarts from the state before the block."""
    crank = model("spatial_slider_crank").to_dict()
    crank["drivers"][0]["function"] = {"polynomial": [0.3, 10.0]}
    res = mbcore.run(Model.from_dict(crank), settings={"t_end": 1.0, "output_step": 0.05})
    s = Model.from_dict(crank).compile()
    Q, QD, T = res["q"], res["qd"], res.t
    jc = JointChannel(s)
    jc.rows(Q[:8], QD[:8], T[:8])
    jc.rows(Q[8:], QD[8:], T[8:])                # the block, then again row by row
    again = np.concatenate([jc.rows(Q[k:k + 1], QD[k:k + 1], T[k:k + 1])
                            for k in range(8, len(T))])
    assert np.array_equal(again, JointChannel(s).rows(Q, QD, T)[8:])


def test_selected_by_record():
    """settings.record picks the channel; a misspelt name is refused with a hint."""
    res = _dynamic("auto", record="q, joints")
    assert list(res.channels) == ["q", "joints"]
    assert res.labels("joints")[:4] == ["shoulder.p0", "shoulder.p1", "shoulder.p2",
                                        "shoulder.p3"]
    res = _dynamic("auto", record="q")
    assert "joints" not in res.channels
    with pytest.raises(ModelError, match="did you mean 'joints'"):
        _dynamic("auto", record="q, joint")


def test_types_without_relative_coordinates_add_no_channel():
    """A model of joints without relative coordinates (a point on a line driven by
    point_coordinate only) records no joints channel."""
    d = {"name": "free", "dimensions": 3,
         "bodies": [{"name": "b", "mass": 1.0, "inertia": [1.0, 1.0, 1.0]}],
         "settings": {"analysis": "dynamic", "t_end": 0.1, "output_step": 0.05}}
    res = mbcore.run(Model.from_dict(d))
    assert "joints" not in res.channels


def test_kinematic_paths_agree():
    """The kinematic analysis in joint coordinates and the kinetostatic analysis
    record the same channel as the Cartesian kinematic analysis (the same rows to
    the Newton tolerance)."""
    m = model("spatial_slider_crank")
    a = mbcore.run(m, settings={"t_end": 1.0})
    b = mbcore.run(m, settings={"t_end": 1.0, "coordinates": "joint"})
    c = mbcore.run(m, analysis="kinetostatic", settings={"t_end": 1.0})
    assert b.labels("joints") == a.labels("joints")
    # the positions of two Newton solutions: observed 2.3e-10
    np.testing.assert_allclose(b["joints"], a["joints"], rtol=0, atol=5e-8)
    assert np.array_equal(c["joints"], a["joints"])
    # the kinematic analysis hands its rows over in blocks (BlockRecorder): the
    # values of one evaluation of all rows, bit for bit
    s = m.compile()
    assert np.array_equal(a["joints"], JointChannel(s).rows(a["q"], a["qd"], a.t))


@pytest.mark.parametrize("tname", ["revolute", "cylindrical", "translational", "planar"])
def test_axis_joints_on_a_prescribed_motion(tname):
    """Body j turned by theta about the joint axis (z of body i, tilted body i) and
    moved by (a, b, s) along the joint frame (f_i, g_i, u_i) = (x, y, z) of body i,
    with rates: each axis joint reports its part of (theta, a, b, s) and rates."""
    from mbplugins.spatial import constraints as C
    ct = {"revolute": C.Revolute, "cylindrical": C.Cylindrical,
          "translational": C.Translational, "planar": C.Planar}[tname]()
    rng = np.random.default_rng(3)
    n = 40
    th = rng.uniform(-3.0, 3.0, n)
    thd = rng.uniform(-2.0, 2.0, n)
    abs_, abs_d = rng.uniform(-1, 1, (n, 3)), rng.uniform(-1, 1, (n, 3))
    pi = np.array([np.cos(0.35), np.sin(0.35) * 0.6, np.sin(0.35) * 0.8, 0.0])
    Ai = Amat(pi)
    si, sj = np.array([0.1, -0.2, 0.3]), np.array([-0.05, 0.15, 0.2])
    ri = np.array([0.5, 0.2, -0.1])
    pj = quat_product(pi, np.stack([np.cos(th / 2), 0 * th, 0 * th, np.sin(th / 2)], -1))
    pjd = quat_product(pi, np.stack([-np.sin(th / 2), 0 * th, 0 * th, np.cos(th / 2)], -1)) \
        * (thd / 2)[:, None]
    Aj = Amat(pj)
    # P_j - P_i = A_i (a, b, s): r_j = r_i + A_i s_i + A_i abs - A_j s_j
    rj = ri + Ai @ si + abs_ @ Ai.T - np.einsum("nij,j->ni", Aj, sj)
    wj = np.array([0.0, 0.0, 1.0]) * thd[:, None]                 # in body-i axes
    rjd = abs_d @ Ai.T - np.cross(wj @ Ai.T, np.einsum("nij,j->ni", Aj, sj))
    qb = np.zeros((n, 2, 7))
    qdb = np.zeros((n, 2, 7))
    qb[:, 0, :3], qb[:, 0, 3:] = ri, pi
    qb[:, 1, :3], qb[:, 1, 3:] = rj, pj
    qdb[:, 1, :3], qdb[:, 1, 3:] = rjd, pjd
    fi, gi, u = np.eye(3)
    par = [*si, *sj, *u, *fi, *gi]
    if tname == "translational":
        par += [*gi]
    if tname == "planar":
        par += [*u]
    par = np.tile(par, (n, 1))
    qb0 = np.zeros((n, 2, 7))
    qb0[:, :, 3:] = pi                       # the initial configuration: theta = 0
    ref = ct.relative_reference(par, qb0)
    got = ct.relative(par, qb, qdb, ref)
    want = {"angle": th, "angle_rate": thd, "disp": abs_[:, 2], "disp_rate": abs_d[:, 2],
            "disp_f": abs_[:, 0], "disp_f_rate": abs_d[:, 0],
            "disp_g": abs_[:, 1], "disp_g_rate": abs_d[:, 1]}
    assert got.shape == (n, len(ct.relative_labels))
    for k, lab in enumerate(ct.relative_labels):
        # the same motion by other formulas: observed 6.7e-16 (angles), 2.2e-16;
        # bound 1e-13 (149x)
        np.testing.assert_allclose(got[:, k], want[lab], rtol=0, atol=1e-13, err_msg=lab)


def test_resume_continues_the_whole_turns(tmp_path):
    """A run resumed from its checkpoint continues the unwrapping (the count of
    whole turns is part of the checkpoint state): the bicycle's wheels, past two
    turns at the checkpoint, record the same bits as one uninterrupted run."""
    from mbcore.analysis.checkpoint import read_checkpoint
    from mbcore.analysis.runner import resume, run
    from mbcore.results.result import Result
    m = model("whipple_bicycle")
    st = {"t_end": 1.2, "output_step": 0.02, "record": "q, qd, joints"}
    run(m, settings=st, output=tmp_path / "ref.h5")
    run(m, settings=dict(st, t_end=0.8), output=tmp_path / "part.h5")
    assert read_checkpoint(tmp_path / "part.h5").state["joints"]["turns"]
    resume(tmp_path / "part.h5", t_end=1.2)
    with Result(tmp_path / "ref.h5") as a, Result(tmp_path / "part.h5") as b:
        assert np.array_equal(a.t, b.t)
        assert np.array_equal(a["q"], b["q"])
        assert a["rear_hub.angle"][-1] > 6 * np.pi             # three turns and more
        assert np.array_equal(a["joints"], b["joints"])
