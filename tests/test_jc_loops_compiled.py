"""The compiled right-hand side of planar joint coordinates closed by cut rows
(``mbplugins._ext._jc.CompiledJCLoops``; Nikravesh (1988), §13.4.2) against its
NumPy reference (the composite path of
``mbplugins.formulations.jc_planar.PlanarJointCoordinates`` on a System with NumPy
kernels).

* one evaluation: ``[thetadot; thetaddot; W']``, the Cartesian q, qd, qdd and the
  multipliers (of the cut rows, and the outputs' of every row) equal the reference
  to 2e-11 of the largest entry (observed <= 1.5e-13 on the slider-crank, 1.5e-14 on
  Andrews' squeezer, also with OPENBLAS_CORETYPE=Sandybridge, at states off the loop
  closure with joint rates up to 1e3: a margin of > 100), on Andrews' squeezer, the
  four-bar and the slider-crank, with Baumgarte terms and without (the projection
  mode: alpha = beta = 0);
* the dynamic analysis runs it in the compiled integration loop; the same steps and
  outputs as the Python driver on the same right-hand side (1e-10; observed 3e-13)
  and the NumPy backend (1e-8), the energy balance closes, and Andrews' squeezer
  follows the Cartesian ``di`` trajectory at rtol 1e-10 (1e-8 of the largest entry:
  100 times the integration tolerance; observed 4e-14 ... 1e-12);
* redundant cut rows: the kept independent ones are compiled; the trajectory of a
  triple parallelogram (one redundant row) follows ``di`` (1e-6 at rtol 1e-9;
  observed 2e-12);
* the correction after every step of ``loop_stabilization: projection`` /
  ``partitioning`` in C (``c_post_step``) equals ``LoopClosure._project`` /
  ``_partition`` (1e-10; observed 3e-13), the compiled loop takes the Python
  driver's steps and corrections with it, and a failing correction ends in the
  reference's named error or a new partition;
* what cannot be compiled keeps the Python path with its reason
  (``compiled_reason``): a force element without a compiled kernel, a floating base,
  the NumPy backend; bad construction arguments are ValueErrors naming them.
"""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model

from conftest import EXAMPLES

pytest.importorskip("mbplugins._ext._jc")
from mbplugins._ext import _jc
from mbplugins.formulations.joint_coordinates import JointCoordinates

#: one evaluation, compiled vs NumPy (relative to the largest entry; observed 1.5e-13)
RHS_BOUND = 2e-11
LOOPED = ("andrews_squeezer", "fourbar_dap", "slider_crank_dynamic")


def model(name):
    return Model.from_file(EXAMPLES / f"{name}.yaml")


def _q0(m):
    return np.array([[*b.position, b.angle] for b in m.bodies], dtype=float).ravel()


def _pair(m, settings=None):
    sc, sn = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    return (JointCoordinates(sc, dict(settings or {})),
            JointCoordinates(sn, dict(settings or {})))


@pytest.mark.parametrize("mode", ["baumgarte", "projection"])
@pytest.mark.parametrize("name", LOOPED)
def test_compiled_right_hand_side_equals_numpy_reference(name, mode):
    m = model(name)
    A, B = _pair(m, {"loop_stabilization": mode})
    assert isinstance(A.compiled, _jc.CompiledJCLoops) and A.compiled_reason is None
    assert B.compiled is None and "NumPy" in B.compiled_reason
    assert len(A.extra) and A.compiled.ne == len(A.extra)
    assert A.compiled.n == A.dof and not A.compiled.cartesian
    if mode != "baumgarte":             # the Baumgarte terms are off there
        assert A.compiled.alpha == 0.0 and A.compiled.beta == 0.0
    else:
        assert A.compiled.alpha == A.settings["alpha"] > 0.0
    th0 = A.pack(_q0(m), np.zeros(len(_q0(m))))[:A.dof]
    rng = np.random.default_rng(3)
    out = np.zeros(2 * A.dof + 1)
    for t in (0.0, 0.013):
        for rate in (1.0, 30.0, 1000.0):
            y = np.concatenate([th0 + 0.01 * rng.normal(size=A.dof),
                                rate * rng.normal(size=A.dof), [0.0]])
            assert A.compiled.eval(t, y, out) == 0
            ref = B.rhs(t, y[:-1]).copy()
            P = B.work_rate(t)
            assert P != 0.0                # the cut rows do work off the closure
            scale = np.abs(ref).max()
            np.testing.assert_allclose(out[:-1], ref, rtol=0, atol=RHS_BOUND * scale)
            assert abs(out[-1] - P) <= RHS_BOUND * abs(P)
            np.testing.assert_allclose(A.compiled.q_view, B.q_cur, rtol=0,
                                       atol=RHS_BOUND * (1 + np.abs(B.q_cur).max()))
            np.testing.assert_allclose(A.compiled.qd_view, B.qd_cur, rtol=0,
                                       atol=RHS_BOUND * np.abs(B.qd_cur).max())
            lam_ref = B.solver.lam[B.extra]
            np.testing.assert_allclose(A.compiled.lam_view, lam_ref, rtol=0,
                                       atol=RHS_BOUND * np.abs(lam_ref).max())
            # the Python rhs of the compiled formulation: the same C call, with the
            # multipliers of the cut rows for the work channel
            np.testing.assert_array_equal(A.rhs(t, y[:-1]), out[:-1])
            assert A.work_rate(t) == out[-1]
            np.testing.assert_array_equal(A.solver.lam[A.extra], A.compiled.lam_view)
            # the outputs from the compiled evaluation (not counted as evaluations)
            nfev = A.compiled.nfev
            q, qd, qdd, lam = A.outputs(t, y[:-1])
            qr, qdr, qddr, lamr = B.outputs(t, y[:-1])
            assert A.compiled.nfev == nfev
            for a, b in ((q, qr), (qd, qdr), (qdd, qddr), (lam, lamr)):
                np.testing.assert_allclose(a, b, rtol=0,
                                           atol=RHS_BOUND * (1 + np.abs(b).max()))


def test_columns_of_the_acceleration_map_equal_the_recursion():
    """``jc_planar_columns`` (a0 and B of qddot = B thetaddot + a0) against the NumPy
    acceleration recursion, including a translational joint (the slider-crank): the
    same operations in C and NumPy, within 1e-13 of the largest entry (observed
    <= 1.2e-16)."""
    for name in LOOPED:
        m = model(name)
        A, B = _pair(m)
        rng = np.random.default_rng(5)
        th = A.pack(_q0(m), np.zeros(len(_q0(m))))[:A.dof] + 0.1 * rng.normal(size=A.dof)
        thd = 10.0 * rng.normal(size=A.dof)
        q = B.tree.positions(th)
        qd = B.tree.velocities(q, thd)
        a0, Bc = np.zeros(len(q)), np.zeros((A.dof, len(q)))
        _jc.jc_planar_columns(A._jk, A._jp, A._jc, A._jsp, A._jsc, A._ju, q, qd, th, thd,
                              a0, Bc)
        ref_B = B.tree.accelerations(q, 0 * qd, th, 0 * thd, np.eye(A.dof))
        ref_a0 = B.tree.accelerations(q, qd, th, thd, np.zeros((1, A.dof)))[0]
        np.testing.assert_allclose(Bc, ref_B, rtol=0, atol=1e-13 * np.abs(ref_B).max())
        np.testing.assert_allclose(a0, ref_a0, rtol=0, atol=1e-13 * np.abs(ref_a0).max())
        assert np.abs(a0).max() > 0


def _three_runs(m, st, t_end):
    """The compiled loop (checked to run CompiledJCLoops), the Python driver on the
    same compiled kernels, and the NumPy kernels over the first third."""
    a, calls = _spy_run(m, st)
    assert a.stats["loop"] == "compiled" and calls == ["CompiledJCLoops"]
    b = mbcore.run(m, analysis="dynamic", settings={**st, "loop": "python"})
    c = mbcore.run(m, analysis="dynamic", settings={**st, "t_end": t_end / 3},
                   kernels="numpy")
    return a, b, c


def _spy_run(m, settings, ne=None, **kw):
    import mbplugins.analyses.dynamic as dyn
    from mbcore.integrate.fastloop import run_compiled as real
    calls = []

    def spy(kind, icls, form, *a, **k):
        calls.append(type(form.compiled).__name__)
        if ne is not None:
            ne.append(form.compiled.ne)
        return real(kind, icls, form, *a, **k)
    dyn.run_compiled, saved = spy, dyn.run_compiled
    try:
        res = mbcore.run(m, analysis="dynamic", settings=settings, **kw)
    finally:
        dyn.run_compiled = saved
    return res, calls


@pytest.mark.parametrize("name", ["andrews_squeezer", "slider_crank_dynamic"])
def test_compiled_loop_runs_closed_loops(name):
    m = model(name)
    t_end = 0.03 if name == "andrews_squeezer" else 0.3
    st = {"formulation": "joint_coordinates", "t_end": t_end, "output_step": t_end / 6,
          "rtol": 1e-8, "atol": 1e-10, "integrator": "dopri5",
          "record": "q, qd, qdd, lam, energy"}
    a, b, c = _three_runs(m, st, t_end)
    assert b.stats["loop"] == "python" and c.stats["loop"] == "python"
    for k in ("integrator_nsteps", "integrator_nrejected", "integrator_nfev"):
        assert a.stats[k] == b.stats[k], k
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        sc = 1 + np.abs(b[ch]).max()
        np.testing.assert_allclose(a[ch], b[ch], rtol=0, atol=1e-10 * sc, err_msg=ch)
        np.testing.assert_allclose(a[ch][:3], c[ch], rtol=0, atol=1e-8 * sc, err_msg=ch)
    E = a["energy"]
    if name == "andrews_squeezer":      # the spring and the drive torque did work
        assert abs(E[-1, 3]) > 1e-3 * np.abs(E[:, :3]).max()
    assert np.ptp(E[:, 4]) < 1e-7 * np.abs(E[:, :4]).max()   # T + V - W constant


def test_andrews_squeezer_follows_the_cartesian_trajectory():
    m = model("andrews_squeezer")
    st = {"t_end": 0.03, "output_step": 0.005, "rtol": 1e-10, "atol": 1e-12,
          "integrator": "dop853", "record": "q, qd, qdd, lam"}
    a = mbcore.run(m, analysis="dynamic", settings={**st, "formulation":
                                                    "joint_coordinates"})
    d = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "di"})
    assert a.stats["loop"] == "compiled"
    assert abs(a["q"][-1]).max() > 10          # beta turned 15.8 rad
    for ch in ("q", "qd", "qdd", "lam"):
        np.testing.assert_allclose(a[ch], d[ch], rtol=0,
                                   atol=1e-8 * np.abs(d[ch]).max(), err_msg=ch)


def triple_parallelogram():
    """Three equal cranks pinned to the ground and to one coupler: one of the four cut
    rows (two cut joints) is redundant (Nikravesh (1988), §3.1.5)."""
    m = Model("triple_parallelogram")
    m.set_gravity(0, -9.81)
    a = 1.0                                      # the cranks' angle at the start
    m.add_body("coupler", mass=2.0, inertia=0.4, position=(1.0 + np.cos(a), np.sin(a)))
    for k, x in enumerate((0.0, 1.0, 2.0)):
        m.add_body(f"crank{k}", mass=1.0, inertia=0.1,
                   position=(x + 0.5 * np.cos(a), 0.5 * np.sin(a)), angle=a)
        m.add_joint("revolute", f"G{k}", body_i="ground", body_j=f"crank{k}",
                    point_i=(x, 0.0), point_j=(-0.5, 0.0))
        m.add_joint("revolute", f"C{k}", body_i=f"crank{k}", body_j="coupler",
                    point_i=(0.5, 0.0), point_j=(x - 1.0, 0.0))
    m.add_force("tsda", "spring", body_i="ground", body_j="coupler",
                point_i=(3.0, 1.0), point_j=(1.0, 0.0), stiffness=40.0, damping=0.5,
                free_length=1.0)
    return m


def test_redundant_cut_rows_compile_the_independent_ones():
    m = triple_parallelogram()
    st = {"t_end": 0.5, "output_step": 0.05, "rtol": 1e-9, "atol": 1e-11,
          "integrator": "dopri5", "record": "q, qd"}
    ne = []
    a, calls = _spy_run(m, {**st, "formulation": "joint_coordinates"}, ne=ne)
    d = mbcore.run(m, analysis="dynamic", settings={**st, "formulation": "di"})
    assert a.stats["loop"] == "compiled" and calls == ["CompiledJCLoops"]
    # the four cut rows (two cut joints), three of them kept (and compiled)
    assert len(JointCoordinates(m.compile(), {}).extra) == 4
    assert ne == [3]
    assert np.ptp(a["q"][:, 0]) > 0.1           # it swings
    for ch in ("q", "qd"):
        np.testing.assert_allclose(a[ch], d[ch], rtol=0,
                                   atol=1e-6 * np.abs(d[ch]).max(), err_msg=ch)


def test_what_cannot_be_compiled_keeps_the_python_path_with_its_reason():
    from python_tier import python_tsda_plugins
    pm = python_tsda_plugins()
    m = model("fourbar_dap")
    m.add_force("py_tsda", "pull", body_i="ground", body_j=m.bodies[1].name,
                point_i=(0.0, 1.0), point_j=(0.0, 0.0), stiffness=5.0, free_length=0.2)
    s = m.compile(kernels="compiled", plugins=pm)
    form = JointCoordinates(s, {})
    assert form.compiled is None and "py_tsda" in form.compiled_reason
    st = {"formulation": "joint_coordinates", "t_end": 0.05, "output_step": 0.025}
    res = mbcore.run(m, analysis="dynamic", settings=st, plugins=pm)
    assert res.stats["loop"] == "python"
    # a floating base closed by a cut joint
    f = Model("floating")
    f.add_body("a", mass=1.0, inertia=0.1, position=(0.0, 0.0))
    f.add_body("b", mass=1.0, inertia=0.1, position=(1.0, 0.0))
    f.add_joint("revolute", "ab", body_i="a", body_j="b", point_i=(0.5, 0.0),
                point_j=(-0.5, 0.0))
    f.add_joint("revolute", "ba", body_i="b", body_j="a", point_i=(0.5, 0.0),
                point_j=(1.5, 0.0))
    form = JointCoordinates(f.compile(kernels="compiled"), {})
    assert form.compiled is None and "floating base" in form.compiled_reason


def test_construction_refuses_bad_arguments():
    m = model("fourbar_dap")
    s = m.compile(kernels="compiled")
    A = JointCoordinates(s, {})
    k = s.compiled_kernels()
    table = (A._jk, A._jp, A._jc, A._jsp, A._jsc, A._ju, A._jang, A.mass)
    args = (k.constraints, k.forces, k.functions, k.n, k.m, k.jacobian_data,
            k.constant_forces)
    ok = _jc.CompiledJCLoops(*table, *args, A.extra, 5.0, 5.0)
    assert ok.ne == len(A.extra)
    with pytest.raises(ValueError, match="cut"):
        _jc.CompiledJCLoops(*table, *args, np.array([k.m]), 5.0, 5.0)
    with pytest.raises(ValueError, match="alpha"):
        _jc.CompiledJCLoops(*table, *args, A.extra, -1.0, 5.0)
    with pytest.raises(ValueError, match="beta"):
        _jc.CompiledJCLoops(*table, *args, A.extra, 1.0, float("nan"))
    with pytest.raises(ValueError, match="indptr and indices"):
        _jc.CompiledJCLoops(*table, *args, A.extra, 1.0, 1.0,
                            indptr=np.arange(k.m + 1))
    with pytest.raises(ValueError, match="tree order"):
        _jc.CompiledJCLoops(A._jk, A._jp[::-1].copy(), A._jc[::-1].copy(), *table[3:],
                            *args, A.extra, 5.0, 5.0)
    other = model("andrews_squeezer").compile(kernels="compiled").compiled_kernels()
    with pytest.raises(ValueError, match="another system"):
        _jc.CompiledJCLoops(*table, other.constraints, *args[1:], A.extra, 5.0, 5.0)


# ---------------------------------------------------------------------------------
# the correction after every step in C (loop_stabilization projection / partitioning)
# ---------------------------------------------------------------------------------
#: corrected state, compiled vs NumPy (relative to the largest entry of theta / nu)
CORRECTION_BOUND = 1e-10


@pytest.mark.parametrize("mode, weighted", [("projection", True), ("projection", False),
                                            ("partitioning", True)])
@pytest.mark.parametrize("name", LOOPED)
def test_compiled_correction_equals_the_python_one(name, mode, weighted):
    """``c_post_step`` (through ``post_step_at``) against ``LoopClosure._project`` /
    ``_partition`` of the NumPy formulation, from perturbed states: the same
    corrected theta and nu (1e-10 of the largest entry; observed <= 3e-13, also
    with OPENBLAS_CORETYPE=Sandybridge), on the loop closure, the independent joint
    coordinates untouched by partitioning."""
    m = model(name)
    opts = {"loop_stabilization": mode}
    if mode == "projection":
        opts["mass_weighted"] = weighted
    A, B = _pair(m, opts)
    c = A.compiled
    assert c.post_step and c.mode == (1 if mode == "projection" else 2)
    start = mbcore.run(m, analysis="dynamic", settings={
        "formulation": "joint_coordinates", "t_end": 0.01, "output_step": 0.01,
        "record": "q, qd"})                  # an assembled state in motion
    q0, qd0 = start["q"][-1], start["qd"][-1]
    y0, _ = A.initialize(q0, qd0, 0.0)
    B.initialize(q0, qd0, 0.0)
    if mode == "partitioning":
        np.testing.assert_array_equal(A.u, B.u)
    rng = np.random.default_rng(11)
    for trial in range(4):
        y = y0.copy()
        y[:A.dof] += 1e-3 * rng.normal(size=A.dof)
        y[A.dof:] = 10.0 * rng.normal(size=A.dof)
        ref = B.project(0.0, y.copy(), count=True)
        yc = np.concatenate([y, [0.0]])
        code = c.post_step_at(0.0, yc)
        assert code == 1 and ref is not None
        for a, b in ((yc[:A.dof], ref[:A.dof]), (yc[A.dof:-1], ref[A.dof:])):
            np.testing.assert_allclose(a, b, rtol=0,
                                       atol=CORRECTION_BOUND * np.abs(b).max())
        if mode == "partitioning":
            np.testing.assert_array_equal(yc[A.v], y[A.v])       # independent kept
            assert c.ratio == pytest.approx(B.ratio, rel=1e-10)
        # on the closure: a second correction changes nothing
        assert c.post_step_at(0.0, yc) == 0
        phi = B.system.phi(A.split(yc[:-1])[0], 0.0)[B.extra]
        assert np.abs(phi).max() <= 1e-11
    assert c.take_projections() == 4 and c.take_projections() == 0


@pytest.mark.parametrize("mode", ["projection", "partitioning"])
@pytest.mark.parametrize("name", ["andrews_squeezer", "fourbar_dap"])
def test_compiled_loop_runs_the_correction(name, mode):
    """The corrected runs on the compiled loop: the same steps, corrections and
    outputs as the Python driver (1e-10) and the NumPy backend (1e-8)."""
    m = model(name)
    t_end = 0.03 if name == "andrews_squeezer" else 0.5
    st = {"formulation": "joint_coordinates", "t_end": t_end, "output_step": t_end / 6,
          "rtol": 1e-6, "atol": 1e-8, "integrator": "dopri5",
          "formulation_options": {"loop_stabilization": mode},
          "record": "q, qd, qdd, lam, violation"}
    a, b, c = _three_runs(m, st, t_end)
    assert b.stats["loop"] == "python"
    for k in ("integrator_nsteps", "integrator_nrejected", "integrator_nfev",
              "projections"):
        assert a.stats[k] == b.stats[k], k
    assert a.stats["projections"] > 3
    for ch in ("q", "qd", "qdd", "lam"):
        sc = 1 + np.abs(b[ch]).max()
        np.testing.assert_allclose(a[ch], b[ch], rtol=0, atol=1e-10 * sc, err_msg=ch)
        np.testing.assert_allclose(a[ch][:3], c[ch], rtol=0, atol=1e-8 * sc, err_msg=ch)
    assert np.abs(a["violation"][:, 0]).max() <= 1e-10


def test_a_failing_correction_raises_the_named_error_on_the_python_driver():
    """An unreachable tolerance: the compiled correction fails, the Python driver redoes
    the step and raises the reference's error; a degraded partition asks for a new one
    (``repartition`` restarts) as on the Python driver."""
    from mbcore.errors import AnalysisError
    m = model("fourbar_dap")
    st = {"formulation": "joint_coordinates", "t_end": 0.05, "output_step": 0.01}
    for mode in ("projection", "partitioning"):
        with pytest.raises(AnalysisError, match=r"did not converge at t = .*\|Phi\*\| = "):
            mbcore.run(m, settings={**st, "formulation_options": {
                "loop_stabilization": mode, "projection_tolerance": 1e-22}})
    # the four-bar's crank passes where a fixed partition degrades
    st = {**st, "t_end": 2.0, "output_step": 0.05, "rtol": 1e-8, "atol": 1e-10,
          "formulation_options": {"loop_stabilization": "partitioning"}}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled"
    assert a.stats["restarts"] == b.stats["restarts"]
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-9 * np.abs(b["q"]).max())


def test_a_singular_evaluation_raises_the_named_error_of_the_python_path():
    """The triple parallelogram's kept cut rows lose rank where the cranks pass the
    horizontal: the compiled evaluation reports it, the Python driver takes over from
    the last step and raises the reference's singular-Jacobian error naming the rows,
    as the Python driver alone does."""
    from mbcore.errors import SingularJacobianError
    m = triple_parallelogram()
    st = {"formulation": "joint_coordinates", "t_end": 1.0, "output_step": 0.25,
          "rtol": 1e-9, "atol": 1e-11, "integrator": "dopri5"}
    errors = []
    for loop in ("auto", "python"):
        with pytest.raises(SingularJacobianError, match=r"equations involved: C") as e:
            mbcore.run(m, analysis="dynamic", settings={**st, "loop": loop})
        errors.append(str(e.value))
    # the same error; the time of the failing evaluation within the same step (the
    # Python driver redoes the step from its start with its own first trial step)
    assert errors[0].split(":", 1)[1] == errors[1].split(":", 1)[1]
    t = [float(x.split(":")[0].split("=")[1]) for x in errors]
    assert abs(t[0] - t[1]) < 1e-3
