"""Joint coordinates of spatial trees (spec/algorithms.md §4.7-4.8; the joint-coordinate
issue): revolute, translational, cylindrical, universal, spherical joints and a
floating base give the same motion and reactions as the Cartesian formulation; the
recursions against finite differences; composite == recursive; loops through cut
joints."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.elements.rotations import axis_angle_to_p

from conftest import EXAMPLES

ST = {"t_end": 0.5, "output_step": 0.1, "rtol": 1e-11, "atol": 1e-12}


def mixed_tree(reverse=False, damping=0.2):
    """Every joint kind in one tree (some given child-first), springs and a damper:
    ground -revolute(y)- arm -universal- link -cylindrical(x)- sleeve
    -spherical- bob; a slider on the arm (translational along the arm) and a puck on
    a plane of the arm (planar joint)."""
    m = Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -9.81)
    m.add_body("arm", mass=2.0, inertia=[0.01, 0.17, 0.17], position=(0.5, 0, 0),
               angular_velocity=(0, 0.8, 0))
    m.add_body("link", mass=1.0, inertia=[0.02, 0.08, 0.09], position=(1.5, 0, 0),
               angular_velocity=(0.3, 0.8, -0.6))
    m.add_body("sleeve", mass=0.5, inertia=[0.002, 0.01, 0.012], position=(2.3, 0, 0),
               angular_velocity=(2.0, 0.8, -0.6))
    m.add_body("bob", mass=0.7, inertia=[0.01, 0.02, 0.03], position=(2.6, 0.0, -0.4),
               orientation=axis_angle_to_p([1.0, 2.0, 0.5], 0.7).tolist(),
               angular_velocity=(1.0, -0.5, 0.3))
    m.add_body("slider", mass=0.3, inertia=[0.001, 0.002, 0.002], position=(0.4, 0, 0.1))
    m.add_body("puck", mass=0.4, inertia=[0.002, 0.003, 0.004], position=(0.7, 0.1, 0.05),
               velocity=(0.3, -0.5, 0.0), angular_velocity=(0.0, 0.8, 3.0))
    m.add_joint("revolute", "hinge", body_i="ground", body_j="arm", point_i=(0, 0, 0),
                axis_i=(0, 1, 0))
    if reverse:
        m.add_joint("universal", "cross", body_i="link", body_j="arm",
                    point_i=(-0.5, 0, 0), axis_i=(0, 1, 0), axis_j=(0, 0, 1))
    else:
        m.add_joint("universal", "cross", body_i="arm", body_j="link",
                    point_i=(0.5, 0, 0), axis_i=(0, 0, 1), axis_j=(0, 1, 0))
    m.add_joint("cylindrical", "shaft", body_i="link", body_j="sleeve",
                point_i=(0.5, 0, 0), axis_i=(1, 0, 0))
    if reverse:
        m.add_joint("spherical", "ball", body_i="bob", body_j="sleeve",
                    point_i=(0.0, 0.0, 0.4), point_j=(0.3, 0.0, 0.0))
        m.add_joint("translational", "rail", body_i="slider", body_j="arm",
                    point_i=(0, 0, 0), axis_i=(1, 0, 0))
    else:
        m.add_joint("spherical", "ball", body_i="sleeve", body_j="bob",
                    point_i=(0.3, 0.0, 0.0), point_j=(0.0, 0.0, 0.4))
        m.add_joint("translational", "rail", body_i="arm", body_j="slider",
                    point_i=(0, 0, 0), axis_i=(1, 0, 0))
    if reverse:
        m.add_joint("planar", "plate", body_i="puck", body_j="arm", point_i=(0, 0, 0),
                    axis_i=(0, 0, 1))
    else:
        m.add_joint("planar", "plate", body_i="arm", body_j="puck",
                    point_i=(0.2, 0.1, 0.05), axis_i=(0, 0, 1))
    m.add_force("tsda", "puck_spring", body_i="arm", body_j="puck", point_i=(0.0, 0, 0.05),
                point_j=(0.05, 0, 0), stiffness=25.0, damping=damping, free_length=0.5)
    m.add_force("tsda", "sleeve_spring", body_i="link", body_j="sleeve",
                point_i=(0.0, 0, 0), point_j=(0, 0, 0), stiffness=40.0, damping=damping,
                free_length=0.7)
    m.add_force("tsda", "slider_spring", body_i="ground", body_j="slider",
                point_i=(0.0, 0.0, 0.5), point_j=(0, 0, 0), stiffness=30.0, damping=damping,
                free_length=0.3)
    m.add_force("rsda", "hinge_spring", body_i="ground", body_j="arm", axis_i=(0, 1, 0),
                stiffness=5.0, damping=damping)
    return m


def floating_pair():
    """Two bodies joined by a ball joint, no joint to the ground (a floating base)."""
    m = Model()
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -9.81)
    m.add_body("a", mass=1.0, inertia=[0.01, 0.02, 0.03], position=(0, 0, 0),
               velocity=(0.5, 0, 2.0), angular_velocity=(1.0, 2.0, -3.0))
    m.add_body("b", mass=0.5, inertia=[0.02, 0.01, 0.015], position=(0.6, 0, 0),
               orientation=axis_angle_to_p([0, 1, 1], 0.4).tolist(),
               angular_velocity=(-1.0, 0.5, 0.7))
    m.add_joint("spherical", "ball", body_i="a", body_j="b", point_i=(0.3, 0, 0))
    m.add_force("tsda", "spring", body_i="a", body_j="b", point_i=(0, 0.1, 0),
                point_j=(0.1, 0.1, 0), stiffness=20.0, damping=0.1)
    return m


def run_both(m, st=ST, ref="di", **opts):
    st = {**st, "assemble": True}
    a = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": ref})
    b = mbcore.run(m, analysis="dynamic",
                   settings={**st, "formulation": "joint_coordinates",
                             "formulation_options": opts})
    return a, b


def assert_same(a, b, qtol=1e-8):
    np.testing.assert_allclose(b["q"], a["q"], atol=qtol)
    np.testing.assert_allclose(b["qd"], a["qd"], atol=qtol * 10)
    R = np.abs(a["reactions"]).max(initial=0.0)
    # two runs' errors at ST's tolerance (observed <= 1.2e-9 of the largest)
    np.testing.assert_allclose(b["reactions"], a["reactions"], rtol=0, atol=1e-6 * R)


@pytest.mark.parametrize("reverse", [False, True])
def test_every_joint_kind_agrees_with_cartesian(reverse):
    a, b = run_both(mixed_tree(reverse))
    assert_same(a, b)
    assert np.ptp(b["q/sleeve.x"]) > 1e-3 and np.ptp(b["q/slider.x"]) > 1e-3
    assert np.ptp(b["q/puck.y"]) > 1e-3
    assert b["violation/position"].max() < 1e-12            # the tree holds exactly
    bal = b["energy"][:, 4]
    assert np.ptp(bal) < 1e-8 * np.abs(b["energy"][:, :3]).max()


def test_floating_base_agrees_with_cartesian():
    a, b = run_both(floating_pair())
    assert_same(a, b)
    assert np.ptp(b["q/a.z"]) > 0.1                          # it flies


@pytest.mark.parametrize("name", ["spatial_double_pendulum", "spatial_heavy_top",
                                  "spatial_gyroscope", "spatial_torque_free",
                                  "spatial_slider_crank_dynamic"])
def test_spatial_examples_agree_with_cartesian(name):
    """Every spatial dynamic example that is a tree or a single loop (the slider-crank
    closes its loop through a cut joint, compared with CP)."""
    m = Model.from_file(EXAMPLES / f"{name}.yaml")
    st = {**ST, "t_end": 0.3}
    a, b = run_both(m, st, ref="cp" if name.endswith("crank_dynamic") else "di")
    assert_same(a, b)


@pytest.mark.parametrize("n", [1, 2, 5, 20, 100,
                               pytest.param(1000, marks=pytest.mark.slow)])
def test_spatial_chains_agree_with_cartesian(n):
    """Ball-jointed rod chains, N = 1 ... 1000 (the acceptance range; 1000 is slow:
    ~15 s), the last rod spinning out of the plane: the compiled articulated-body
    recursion against the Cartesian sparse path."""
    import sys
    sys.path.insert(0, str(EXAMPLES.parent / "benchmarks"))
    from models import spatial_chain
    m = spatial_chain(n)
    m.bodies[-1].angular_velocity = (0.0, 1.0, 2.0)         # out of its plane
    tol = 1e-10 if n >= 1000 else ST["rtol"]
    a, b = run_both(m, {**ST, "t_end": 0.3, "rtol": tol, "atol": tol / 10})
    assert_same(a, b)
    # the energy balance closes (sparse Jacobians from N = 100: the formulation's own
    # work rate)
    E = b["energy"]
    assert np.ptp(E[:, 4]) < 1e-7 * (1.0 + np.abs(E[:, :3]).max())
    assert b.stats["integrator_nfev"] > 0


def _tree(model, **kw):
    from mbplugins.formulations.jc_spatial import SpatialTree
    s = model.compile(kernels="numpy")
    return s, SpatialTree(s, **kw)


def test_recursions_against_finite_differences():
    """v of the outward pass = d(q)/dt of the positions (through pdot = 1/2 L^T w');
    vdot = X vdot_p + S nudot + c = d(v)/dt; theta, nu recovered from the Cartesian
    state; the tree's constraints hold exactly."""
    from mbcore.elements.rotations import L as Lmat
    s, tree = _tree(mixed_tree(True))
    tree.reference(_q0(s))
    rng = np.random.default_rng(3)
    th = tree.normalised(_random_theta(tree, rng))
    nu = rng.normal(size=tree.nv)
    nud = rng.normal(size=tree.nv)
    h = 1e-6

    def state(x):
        t = tree.normalised(th + x * tree.theta_dot(th, nu))
        v = nu + x * nud
        q, V, X, S, C = tree.outward(t, v)
        return q, V

    q, V, X, S, C = tree.outward(th, nu)
    qd = tree.cartesian_velocity(q, V)
    qp, Vp = state(h)
    qm, Vm = state(-h)
    np.testing.assert_allclose(qd, (qp - qm) / (2 * h), atol=1e-7)
    B = tree.velocity_matrix(X, S)
    np.testing.assert_allclose(B @ nu, V.reshape(-1), atol=1e-12)
    acc = B @ nud + tree.bias(X, C).reshape(-1)
    np.testing.assert_allclose(acc, ((Vp - Vm) / (2 * h)).reshape(-1), atol=1e-6)
    th2, nu2 = tree.joint_coordinates(q, qd)
    q2, V2, *_ = tree.outward(tree.normalised(th2), nu2)
    np.testing.assert_allclose(q2, q, atol=1e-12)
    np.testing.assert_allclose(V2, V, atol=1e-12)
    assert np.max(np.abs(s.phi(q, 0.0))) < 1e-12
    # Euler-parameter velocity of every body: |p| stays 1 and pdot ⊥ p
    p = q[tree.p_idx]
    assert np.max(np.abs(np.einsum("bk,bk->b", p, qd[tree.p_idx]))) < 1e-12
    del Lmat


def _q0(s):
    return s.initial_state().q


def _random_theta(tree, rng):
    th = rng.normal(size=tree.nq)
    for j in tree.joints:
        if j.kind in ("spherical", "free"):
            o = j.qo + (3 if j.kind == "free" else 0)
            th[o:o + 4] = [1.0, 0, 0, 0] + 0.4 * rng.normal(size=4)
    return th


def test_recursive_equals_composite():
    from mbplugins.formulations.jc_spatial import SpatialJointCoordinates
    s = mixed_tree().compile(kernels="numpy")
    fr = SpatialJointCoordinates(s, {"solver": "recursive"})
    fc = SpatialJointCoordinates(s, {"solver": "composite"})
    rng = np.random.default_rng(1)
    fr.tree.reference(_q0(s))
    fc.tree.reference(_q0(s))
    y = np.concatenate([fr.tree.normalised(_random_theta(fr.tree, rng)),
                        rng.normal(size=fr.nv)])
    a, b = fr.rhs(0.1, y).copy(), fc.rhs(0.1, y).copy()
    np.testing.assert_allclose(a, b, atol=1e-10 * np.abs(b).max())
    assert np.abs(b[fr.nq:]).max() > 1.0


def test_named_cut_joint_and_errors():
    """A joint named in ``cut_joints`` stays an algebraic equation (same motion);
    an unknown name is an error naming it."""
    m = Model.from_file(EXAMPLES / "spatial_double_pendulum.yaml")
    st = {**ST, "t_end": 0.2}
    a, b = run_both(m, st, cut_joints=["elbow"])
    assert_same(a, b)
    with pytest.raises(mbcore.errors.ModelError, match="nope"):
        run_both(m, st, cut_joints=["nope"])


@pytest.mark.parametrize("make", [mixed_tree, floating_pair])
def test_compiled_recursion_equals_numpy_reference(make):
    """ext/plugins/_jcspatial.pyx (outward pass, body forces, articulated-body recursion,
    thetadot) against the NumPy reference: the right-hand side to 1e-12 at a random
    state, and X, S, c of every joint."""
    from mbplugins.formulations.jc_spatial import SpatialJointCoordinates
    sc, sn = make().compile(kernels="compiled"), make().compile(kernels="numpy")
    fc = SpatialJointCoordinates(sc, {"solver": "recursive"})
    fn = SpatialJointCoordinates(sn, {"solver": "recursive"})
    for f in (fc, fn):
        f.tree.reference(_q0(sc))
    rng = np.random.default_rng(4)
    y = np.concatenate([_random_theta(fc.tree, rng), rng.normal(size=fc.nv)])
    a, b = fc.rhs(0.2, y).copy(), fn.rhs(0.2, y).copy()
    assert fc._k is not None and fn._k is None
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * np.abs(b).max())
    K = fc._k
    q, V, X, S, C = fn.tree.outward(fn.tree.normalised(y[:fn.nq]), y[fn.nq:])
    np.testing.assert_allclose(np.asarray(K.q), q, atol=1e-13)
    for k, j in enumerate(fn.tree.joints):
        np.testing.assert_allclose(np.asarray(K.X).reshape(-1, 6, 6)[k], X[k], atol=1e-13)
        np.testing.assert_allclose(np.asarray(K.S).reshape(-1, 6, 6)[k][:, :j.nv], S[k],
                                   atol=1e-13)
        np.testing.assert_allclose(np.asarray(K.C).reshape(-1, 6)[k], C[k],
                                   atol=1e-12 * (1 + np.abs(C[k]).max()))


def test_kernel_rejects_bad_trees():
    from mbplugins._ext._jcspatial import SpatialTreeKernel
    geo = np.zeros((2, 22))
    geo[:, 15] = 1.0
    args = dict(geo=geo, qo=np.array([0, 4], np.intp), vo=np.array([0, 3], np.intp),
                mass=np.ones(2), inertia=np.ones((2, 3, 3)))
    ok = dict(kind=np.array([4, 4], np.intc), parent=np.array([-1, 0], np.intp),
              child=np.array([0, 1], np.intp))
    SpatialTreeKernel(**ok, **args)
    with pytest.raises(ValueError, match="parent after child"):
        SpatialTreeKernel(ok["kind"], np.array([1, -1], np.intp), np.array([0, 1], np.intp),
                          **args)
    with pytest.raises(ValueError, match="unknown kind"):
        SpatialTreeKernel(np.array([4, 9], np.intc), ok["parent"], ok["child"], **args)
    with pytest.raises(ValueError, match="out of range"):
        SpatialTreeKernel(ok["kind"], ok["parent"], np.array([0, 5], np.intp), **args)


def test_spatial_tree_runs_on_the_compiled_loop():
    """``CompiledJCSpatial`` (the whole right-hand side in one C call) is stepped by the
    compiled loop: the same steps and outputs as the Python driver, energy balance
    closed from the compiled work rate."""
    st = {"t_end": 0.5, "output_step": 0.1, "rtol": 1e-10, "atol": 1e-11,
          "assemble": True, "formulation": "joint_coordinates"}
    a = mbcore.run(mixed_tree(), analysis="dynamic", settings={**st, "loop": "auto"})
    b = mbcore.run(mixed_tree(), analysis="dynamic", settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    assert a.stats["integrator_nfev"] == b.stats["integrator_nfev"]
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-12)
    np.testing.assert_allclose(a["energy"], b["energy"], atol=1e-10)
    assert np.ptp(a["energy"][:, 4]) < 1e-8 * np.abs(a["energy"][:, :3]).max()
