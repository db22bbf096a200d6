"""Joint-coordinate formulation, planar trees (spec/algorithms.md §4.7, §4.8; first
increment of the joint-coordinate issue): the same motion and reactions as the
Cartesian formulation, no drift, the recursions against finite differences, and the
named errors for what is not a tree yet."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import ModelError
from mbcore.plugins import registry

from conftest import EXAMPLES

ST = {"t_end": 0.6, "output_step": 0.1, "rtol": 1e-11, "atol": 1e-12}


def chain(n, reverse=False):
    m = Model()
    m.set_gravity(0.0, -9.81)
    for k in range(n):
        m.add_body(f"L{k}", mass=1.0 + 0.1 * k, inertia=1.0 / 12.0,
                   position=(k + 0.5, 0.0), angle=0.0)
        parent = "ground" if k == 0 else f"L{k - 1}"
        pi = (0.0, 0.0) if k == 0 else (0.5, 0.0)
        if reverse and k % 2:
            m.add_joint("revolute", f"J{k}", body_i=f"L{k}", body_j=parent,
                        point_i=(-0.5, 0.0), point_j=pi)
        else:
            m.add_joint("revolute", f"J{k}", body_i=parent, body_j=f"L{k}", point_i=pi,
                        point_j=(-0.5, 0.0))
    return m


def tree_with_slider():
    """A branching tree: a root link on the ground, two links pinned at its tip, a
    slider on the first of them pulled by a spring, a damped rotary spring."""
    m = Model()
    m.set_gravity(0.0, -9.81)
    m.add_body("root", mass=2.0, inertia=0.2, position=(0.5, 0.0))
    m.add_body("left", mass=1.0, inertia=0.1, position=(1.0, 0.5), angle=np.pi / 2)
    m.add_body("right", mass=1.5, inertia=0.12, position=(1.5, 0.0))
    m.add_body("slider", mass=0.5, inertia=0.01, position=(1.0, 0.8), angle=np.pi / 2)
    m.add_joint("revolute", "base", body_i="ground", body_j="root", point_i=(0, 0),
                point_j=(-0.5, 0))
    m.add_joint("revolute", "to_left", body_i="root", body_j="left", point_i=(0.5, 0),
                point_j=(-0.5, 0))
    m.add_joint("revolute", "to_right", body_i="root", body_j="right", point_i=(0.5, 0),
                point_j=(-0.5, 0))
    m.add_joint("translational", "slide", body_i="left", body_j="slider",
                point_i=(0.0, 0.0), point_j=(0.0, 0.0), axis=(1.0, 0.0))
    m.add_force("tsda", "spring", body_i="left", body_j="slider", point_i=(-0.5, 0.0),
                stiffness=50.0, damping=0.5, free_length=0.6)
    m.add_force("rsda", "hinge", body_i="root", body_j="right", stiffness=3.0,
                damping=0.1)
    for b in m.bodies:
        b.velocity = (0.0, 0.0)
    return m


@pytest.mark.parametrize("n,reverse", [(1, False), (2, False), (5, False), (1, True),
                                       (2, True), (5, True), (100, False), (1000, True)])
def test_pendulum_chains_agree_with_cartesian(n, reverse):
    """N = 1 ... 1000 (the acceptance range; half the joints given child-first in the
    reversed chains): motion to 1e-8, reactions to 1e-7 of the largest."""
    m = chain(n, reverse)
    st = ST if n < 100 else {**ST, "t_end": 0.3, "rtol": 1e-10, "atol": 1e-11}
    a = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "di"})
    b = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    np.testing.assert_allclose(b["qd"], a["qd"], atol=1e-8)
    R = np.abs(a["reactions"]).max()
    np.testing.assert_allclose(b["reactions"], a["reactions"], atol=1e-7 * R)
    # no drift: the tree holds the joints to the rounding of its position recursion,
    # one per joint: n eps (1 + |q|) (observed <= 0.1 of it); 20x it.  Integrated
    # Cartesian positions would drift by ~rtol |q|, far above.
    round_off = n * np.finfo(float).eps * (1 + np.abs(b["q"]).max())
    assert b["violation/position"].max() < 20 * round_off
    bal = b["energy"][:, 4]
    assert np.ptp(bal) < 1e-8 * np.abs(b["energy"][:, :3]).max()


def test_branching_tree_with_slider_and_springs():
    m = tree_with_slider()
    a = mbcore.run(m, analysis="dynamic", settings={**ST, "formulation": "di"})
    b = mbcore.run(m, analysis="dynamic", settings={**ST, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    np.testing.assert_allclose(b["qdd"], a["qdd"], atol=1e-7 * np.abs(a["qdd"]).max())
    np.testing.assert_allclose(b["reactions"], a["reactions"],
                               atol=1e-7 * np.abs(a["reactions"]).max())
    assert b["violation/position"].max() < 1e-13
    assert np.ptp(b["q/slider.x"]) > 1e-3                  # the slider moved


def test_recursions_against_finite_differences():
    """qdot of the velocity recursion = dq/dt of the position recursion, qddot of the
    acceleration recursion = d(qdot)/dt, and the joint coordinates recovered."""
    from mbplugins.formulations.joint_coordinates import PlanarTree
    s = tree_with_slider().compile(kernels="numpy")
    tree = PlanarTree(s)
    rng = np.random.default_rng(2)
    th = rng.normal(size=tree.dof)
    thd = rng.normal(size=tree.dof)
    thdd = rng.normal(size=tree.dof)
    h = 1e-6
    q = tree.positions(th)
    qd = tree.velocities(q, thd)
    fd = (tree.positions(th + h * thd) - tree.positions(th - h * thd)) / (2 * h)
    np.testing.assert_allclose(qd, fd, atol=1e-8)

    def vel(x):
        return tree.velocities(tree.positions(th + x * thd), thd + x * thdd)
    qdd = tree.accelerations(q, qd, th, thd, thdd[None, :])[0]
    np.testing.assert_allclose(qdd, (vel(h) - vel(-h)) / (2 * h), atol=1e-7)
    th2, thd2 = tree.joint_coordinates(q, qd)
    np.testing.assert_allclose(th2, th, atol=1e-12)
    np.testing.assert_allclose(thd2, thd, atol=1e-12)
    assert np.max(np.abs(s.phi(q, 0.0))) < 1e-12          # on the tree by construction


@pytest.mark.parametrize("name", ["fourbar_dap", "slider_crank_dynamic", "nfourbar_2"])
def test_closed_loops_through_cut_joints_agree_with_cp(examples, name):
    """The loop-closing joint (chosen by the spanning tree; a translational joint
    whose axis body is the far one is cut rather than reversed) stays an algebraic
    equation with its multipliers (Eq. 13.41): same motion and reactions as CP
    (the N-four-bar before its first singular position, 0.71 s)."""
    m = Model.from_file(examples / f"{name}.yaml")
    st = {"t_end": 0.5, "output_step": 0.05, "rtol": 1e-11, "atol": 1e-12}
    a = mbcore.run(m, settings={**st, "formulation": "cp"})
    b = mbcore.run(m, settings={**st, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    np.testing.assert_allclose(b["reactions"], a["reactions"],
                               atol=1e-7 * np.abs(a["reactions"]).max())
    assert b["violation/position"].max() < 1e-10


def test_driven_tree_and_unsupported_elements(examples):
    """A driver on a tree joint is an algebraic row like a cut joint (a driven
    pendulum matches DI); a body reached only through a reversed translational joint
    gets a floating base and the joint is cut (matches DI); the recursive solver
    refuses that model by name."""
    m = chain(2)
    m.add_driver("relative_driver", "motor", body_i="L0", body_j="L1",
                 function="0.3*sin(2*t)")
    st = {**ST, "assemble": True}
    a = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "di"})
    b = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    np.testing.assert_allclose(b["lam"], a["lam"], atol=1e-7 * np.abs(a["lam"]).max())
    r = Model()
    r.set_gravity(0.0, -9.81)
    r.add_body("s", mass=1.0, inertia=0.1, position=(1.0, 0.0), velocity=(0.5, 0.0))
    r.add_joint("translational", "slide", body_i="s", body_j="ground", axis=(1.0, 0.0))
    r.add_force("tsda", "spring", body_i="ground", body_j="s", point_i=(0.0, 0.0),
                stiffness=10.0, free_length=0.5)
    form = registry().get("formulation", "joint_coordinates")(r.compile())
    assert [j.kind for j in form.tree.joints] == ["free"]
    assert [j.name for j in form.tree.cut] == ["slide"]
    a = mbcore.run(r, analysis="dynamic", settings={**ST, "formulation": "di"})
    b = mbcore.run(r, analysis="dynamic", settings={**ST, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    np.testing.assert_allclose(b["lam"], a["lam"], atol=1e-7 * np.abs(a["lam"]).max())
    assert np.ptp(b["q/s.x"]) > 0.1
    with pytest.raises(ModelError, match="floating base"):
        registry().get("formulation", "joint_coordinates")(r.compile(),
                                                            {"solver": "recursive"})


def test_planar_floating_base_agrees_with_cartesian():
    """Two links pinned together, no joint to the ground: the first is a floating base
    (x, y, phi), the second hangs on it; thrown and spinning, with a rotary spring."""
    m = Model()
    m.set_gravity(0.0, -9.81)
    m.add_body("a", mass=1.0, inertia=0.1, position=(0, 0), velocity=(1.0, 3.0),
               angular_velocity=2.0)
    m.add_body("b", mass=0.5, inertia=0.05, position=(0.8, 0.0), angular_velocity=-1.0)
    m.add_joint("revolute", "pin", body_i="a", body_j="b", point_i=(0.4, 0),
                point_j=(-0.4, 0))
    m.add_force("rsda", "k", body_i="a", body_j="b", stiffness=3.0, damping=0.1)
    st = {**ST, "assemble": True}
    a = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "di"})
    b = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "joint_coordinates"})
    np.testing.assert_allclose(b["q"], a["q"], atol=1e-8)
    np.testing.assert_allclose(b["reactions"], a["reactions"],
                               atol=1e-7 * np.abs(a["reactions"]).max())
    assert np.ptp(b["energy"][:, 4]) < 1e-8 * np.abs(b["energy"][:, :3]).max()


@pytest.mark.parametrize("which", ["tree", "chain"])
def test_recursive_and_composite_solvers_agree(which):
    """The articulated-body recursion (O(N)) gives the accelerations of the dense
    composite B^T M B solve to 1e-10 at random states, and a whole run."""
    from mbplugins.formulations.joint_coordinates import JointCoordinates
    mdl = tree_with_slider() if which == "tree" else chain(12, reverse=True)
    s = mdl.compile(kernels="numpy")
    rec = JointCoordinates(s, {"solver": "recursive"})
    com = JointCoordinates(s, {"solver": "composite"})
    assert rec.recursive and not com.recursive
    rng = np.random.default_rng(4)
    for _ in range(3):
        y = np.concatenate([rng.normal(size=rec.dof), rng.normal(size=rec.dof)])
        a = com.rhs(0.2, y).copy()
        b = rec.rhs(0.2, y).copy()
        np.testing.assert_allclose(b, a, atol=1e-10 * (1 + np.abs(a).max()))
    st = {**ST, "t_end": 0.3, "formulation": "joint_coordinates"}
    r1 = mbcore.run(mdl, analysis="dynamic", settings={**st, "formulation_options":
                                                       {"solver": "recursive"}})
    r2 = mbcore.run(mdl, analysis="dynamic", settings={**st, "formulation_options":
                                                       {"solver": "composite"}})
    np.testing.assert_allclose(r1["q"], r2["q"], atol=1e-9)
    np.testing.assert_allclose(r1["reactions"], r2["reactions"],
                               atol=1e-8 * np.abs(r2["reactions"]).max())
    with pytest.raises(ModelError, match="settings.solver"):
        m = Model.from_file(EXAMPLES / "fourbar_dap.yaml")
        JointCoordinates(m.compile(), {"solver": "recursive"})


def test_compiled_recursion_equals_numpy_reference():
    """The compiled recursions (jc_planar_kinematics, jc_planar_aba) equal the NumPy
    reference to 1e-12, on a branching tree with a slider and on a chain."""
    from mbplugins.formulations.joint_coordinates import JointCoordinates
    for mdl in (tree_with_slider(), chain(15, reverse=True)):
        sc, sn = mdl.compile(kernels="compiled"), mdl.compile(kernels="numpy")
        A = JointCoordinates(sc, {"solver": "recursive"})
        B = JointCoordinates(sn, {"solver": "recursive"})
        assert A._ck is not None and B._ck is None
        rng = np.random.default_rng(6)
        for _ in range(3):
            y = np.concatenate([rng.normal(size=A.dof), rng.normal(size=A.dof)])
            a, b = A.rhs(0.2, y).copy(), B.rhs(0.2, y).copy()
            np.testing.assert_allclose(a, b, atol=1e-12 * (1 + np.abs(b).max()))
            np.testing.assert_allclose(A.q_cur, B.q_cur, atol=1e-12)
            np.testing.assert_allclose(A.qd_cur, B.qd_cur, atol=1e-12)


def _forced_chain(n=6):
    """A chain with a spring-damper-actuator to the ground (actuator a time function),
    a damped rotary spring with an actuator torque and a viscous damper: compiled
    force elements whose time functions the compiled right-hand side evaluates."""
    m = chain(n, reverse=True)
    m.add_force("tsda", "pull", body_i="ground", body_j=f"L{n - 1}", point_i=(n, 1.0),
                point_j=(0.5, 0.0), stiffness=20.0, damping=0.7, free_length=0.5,
                actuator="2*sin(3*t)")
    m.add_force("rsda", "hinge", body_i="L0", body_j="L1", stiffness=3.0, damping=0.2,
                actuator="0.5*cos(2*t)")
    m.add_force("damping", "visc", body="L2", coefficients=[0.5, 0.7, 0.2])
    return m


def test_compiled_jc_right_hand_side_equals_numpy_path():
    """CompiledJC (kinematics + compiled forces and time functions + articulated-body
    solver in one C call) gives [thetadot; thetaddot; P_nc] of the NumPy formulation
    (backend numpy: the NumPy recursions and force references) to 1e-12, on a chain
    with forces and on the branching tree with a slider; the Python-visible
    recursions too."""
    from mbplugins._ext import _jc as D
    from mbplugins.formulations.joint_coordinates import (JointCoordinates,
                                                          articulated_body)
    for mdl in (_forced_chain(), tree_with_slider()):
        sc, sn = mdl.compile(kernels="compiled"), mdl.compile(kernels="numpy")
        A = JointCoordinates(sc, {"solver": "recursive"})
        B = JointCoordinates(sn, {"solver": "recursive"})
        assert isinstance(A.compiled, D.CompiledJC) and B.compiled is None
        assert A.compiled.n == A.dof and not A.compiled.cartesian
        rng = np.random.default_rng(8)
        out = np.zeros(2 * A.dof + 1)
        for t in (0.0, 0.37, 1.3):
            y = np.concatenate([0.5 * rng.normal(size=A.dof), rng.normal(size=A.dof),
                                [rng.normal()]])
            assert A.compiled.eval(t, y, out) == 0
            ref = B.rhs(t, y[:-1]).copy()
            P = B.work_rate(t)
            assert P != 0.0
            scale = 1 + np.abs(ref).max()
            np.testing.assert_allclose(out[:-1], ref, rtol=0, atol=1e-12 * scale)
            assert abs(out[-1] - P) <= 1e-12 * (1 + abs(P))
            np.testing.assert_allclose(A.compiled.q_view, B.q_cur, rtol=0, atol=1e-12)
            np.testing.assert_allclose(A.compiled.qd_view, B.qd_cur, rtol=0, atol=1e-12)
            # the Python rhs of the compiled formulation: the same C call
            np.testing.assert_array_equal(A.rhs(t, y[:-1]), out[:-1])
            assert A.work_rate(t) == out[-1]
            # the Python-visible recursions against the NumPy reference
            th, thd = y[:A.dof], y[A.dof:-1]
            q, qd = np.zeros(sc.n), np.zeros(sc.n)
            D.jc_planar_kinematics(A._jk, A._jp, A._jc, A._jsp, A._jsc, A._ju, A._jang,
                                   th, thd, q, qd)
            np.testing.assert_allclose(q, B.tree.positions(th), rtol=0, atol=1e-12)
            np.testing.assert_allclose(qd, B.tree.velocities(q, thd), rtol=0, atol=1e-12)
            Q = sn.forces(q, qd, t).copy()
            thdd, qdd = np.zeros(A.dof), np.zeros(sc.n)
            D.jc_planar_aba(A._jk, A._jp, A._jc, A._jsp, A._jsc, A._ju, A.mass, q, qd, th,
                            thd, Q, thdd, qdd, np.zeros((sc.nb + A.dof, 16)))
            rt, rq = articulated_body(B.tree, B.mass, q, qd, th, thd, Q)
            np.testing.assert_allclose(thdd, rt, rtol=0, atol=1e-12 * (1 + np.abs(rt).max()))
            np.testing.assert_allclose(qdd, rq, rtol=0, atol=1e-12 * (1 + np.abs(rq).max()))
    with pytest.raises(ValueError, match="tree order"):
        D.CompiledJC(A._jk, A._jp[::-1].copy(), A._jc[::-1].copy(), A._jsp, A._jsc, A._ju,
                     A._jang, A.mass, sc._q_gravity)
    with pytest.raises(ValueError, match="force evaluator"):
        D.CompiledJC(A._jk, A._jp, A._jc, A._jsp, A._jsc, A._ju, A._jang, A.mass,
                     sc._q_gravity, _forced_chain(3).compile(kernels="compiled")
                     ._force_evaluator)


def test_compiled_loop_runs_joint_coordinates():
    """A planar tree with joint coordinates runs in the compiled integration loop
    (stats 'loop'; the compiled right-hand side counts the evaluations) with the
    outputs of the Python driver to 1e-10 and of the NumPy backend to 1e-8; the
    energy balance (work of the damper, actuators) closes; a Python force element
    keeps the Python path."""
    m = _forced_chain(5)
    st = {**ST, "t_end": 0.4, "formulation": "joint_coordinates",
          "record": "q, qd, qdd, lam, energy"}
    from mbcore.integrate.fastloop import run_compiled as real
    calls = []

    def spy(kind, icls, form, *a, **k):
        calls.append(type(form.compiled).__name__)
        return real(kind, icls, form, *a, **k)
    import mbplugins.analyses.dynamic as dyn
    dyn.run_compiled, saved = spy, dyn.run_compiled
    try:
        a = mbcore.run(m, analysis="dynamic", settings=st, kernels="compiled")
    finally:
        dyn.run_compiled = saved
    assert a.stats["loop"] == "compiled" and calls == ["CompiledJC"]
    b = mbcore.run(m, analysis="dynamic", settings={**st, "loop": "python"},
                   kernels="compiled")
    c = mbcore.run(m, analysis="dynamic", settings={**st, "t_end": 0.1}, kernels="numpy")
    assert b.stats["loop"] == "python" and c.stats["loop"] == "python"
    assert a.stats["integrator_nfev"] == b.stats["integrator_nfev"]
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        sc = 1 + np.abs(b[ch]).max()
        np.testing.assert_allclose(a[ch], b[ch], rtol=0, atol=1e-10 * sc, err_msg=ch)
        np.testing.assert_allclose(a[ch][:2], c[ch], rtol=0, atol=1e-8 * sc, err_msg=ch)
    E = a["energy"]
    assert abs(E[-1, 3]) > 1e-2                          # the forces did work
    assert np.ptp(E[:, 4]) < 1e-8 * np.abs(E[:, :4]).max()   # T + V - W constant
    # a (large, sparse-Jacobian) chain: the balance closes too (tree rows do no work)
    big = mbcore.run(chain(40), analysis="dynamic",
                     settings={**st, "t_end": 0.2, "record": "energy"})
    assert big.stats["loop"] == "compiled"
    Eb = big["energy"]
    assert np.ptp(Eb[:, 4]) < 1e-7 * np.abs(Eb[:, :3]).max()
    # ... and on the NumPy path (work_rate: P_nc, no Cartesian multipliers needed)
    nb = mbcore.run(chain(40), analysis="dynamic", kernels="numpy",
                    settings={**st, "t_end": 0.04, "output_step": 0.01, "rtol": 1e-6,
                              "atol": 1e-6, "record": "energy"})
    assert nb.stats["loop"] == "python"
    assert np.ptp(nb["energy"][:, 4]) < 1e-7 * np.abs(nb["energy"][:, :3]).max()
    # a Python-only force element: no CompiledJC, the Python driver, the same motion
    from python_tier import python_tsda_plugins
    from mbplugins.formulations.joint_coordinates import JointCoordinates
    pm = python_tsda_plugins()
    mp = _forced_chain(5)
    assert mp.elements["forces"][0].name == "pull"
    mp.elements["forces"][0].raw["type"] = "py_tsda"
    assert JointCoordinates(mp.compile(kernels="compiled", plugins=pm)).compiled is None
    d = mbcore.run(mp, analysis="dynamic", settings=st, kernels="compiled", plugins=pm)
    assert d.stats["loop"] == "python"
    for ch in ("q", "energy"):
        np.testing.assert_allclose(d[ch], a[ch], rtol=0,
                                   atol=1e-8 * (1 + np.abs(a[ch]).max()), err_msg=ch)


def test_outputs_skip_multipliers_not_recorded():
    """The tree joints' multipliers (least squares at every output) are computed only
    when lam, reactions or reactions_local are recorded; the recorded channels are
    the same either way."""
    m = chain(30)
    st = {**ST, "t_end": 0.2, "formulation": "joint_coordinates"}
    full = mbcore.run(m, analysis="dynamic", settings=st)
    lean = mbcore.run(m, analysis="dynamic", settings={**st, "record": "q, qd, energy"})
    for ch in ("q", "qd", "energy"):
        np.testing.assert_array_equal(lean[ch], full[ch])
    assert np.abs(full["lam"]).max() > 1.0
