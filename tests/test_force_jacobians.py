"""Force Jacobians K = dQ/dq, C = dQ/dqd (issue 14, deliverable 3):
:meth:`mbcore.System.force_jacobians` for every built-in force type, planar
(spec/planar.md §3: F2, F3, F5, F6, F8, F9, F10 and the nonlinear F5 laws) and
spatial (spec/spatial.md §3.2, Euler-parameter form ``[f, 2 G^T n]``, also off
|p| = 1), against central differences of :meth:`System.forces`; the compiled
kernels against their NumPy references (1e-12); the forward-difference fallback
of Python force types; the ggl and stiff Newton matrices against differences of
their right-hand sides, and runs that do not change."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import AnalysisError
from mbcore.plugins import registry
from mbcore.system.system import issparse

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import models  # noqa: E402
from dae_checks import central_jacobian  # noqa: E402

RNG = np.random.default_rng(14)
BACKENDS = ("numpy", "compiled")


# ----------------------------------------------------------------------- models
def _planar_bodies(m, nb=3):
    m.set_gravity(0.0, -9.81)
    for i in range(nb):
        m.add_body(f"B{i}", mass=1.0 + i, inertia=0.1 + 0.05 * i,
                   position=(0.7 * i, 0.3 * i - 0.2), angle=0.2 * i + 0.1)


def _pull(t, q, qd, k=3.0):
    """A user force: a spring of the origins plus a velocity-dependent moment."""
    d = q[1, :2] - q[0, :2]
    return np.array([[*(k * d), 0.2 * qd[0, 2] * q[1, 2]], [*(-k * d), -0.1 * qd[1, 0]]])


PLANAR = {
    "tsda": [dict(body_i="ground", body_j="B0", point_i=(0.1, 0.2), point_j=(0.3, -0.1),
                  stiffness=100.0, damping=3.0, free_length=0.5, actuator="2 + sin(t)"),
             dict(body_i="B0", body_j="B1", point_i=(0.1, 0.0), point_j=(-0.2, 0.1),
                  stiffness=50.0, damping=1.0),
             dict(body_i="B1", body_j="B2", point_i=(0.0, 0.3), point_j=(0.2, 0.1),
                  stiffness=70.0, damping=2.0, free_length=0.1)],
    "tsda_nonlinear": [
        dict(body_i="B0", body_j="B2", point_i=(0.1, 0.1), point_j=(0.0, -0.2),
             spring={"polynomial": [0.5, 10.0, 0.0, 30.0]},
             damper={"table": {"x": [-2, -1, 0, 1, 2], "f": [-5, -2, 0, 3, 4]}},
             actuator=1.0),
        dict(body_i="ground", body_j="B1", point_j=(0.2, 0.0), free_length=0.3,
             spring={"table": {"x": [-1.0, 0.0, 0.5, 2.0], "f": [-20, 0, 8, 30]}})],
    "rsda": [dict(body_i="B0", body_j="B1", stiffness=10.0, damping=0.5, free_angle=0.1,
                  actuator=0.3),
             dict(body_i="ground", body_j="B2", stiffness=20.0, damping=0.7)],
    "force": [dict(body="B0", point=(0.2, 0.1), fx=1.0, fy="-2 + t"),
              dict(body="B1", point=(0.1, -0.3), fx=3.0, fy=0.5, frame="body"),
              dict(body="B2", point=(-0.2, 0.4), fx=-1.0, fy=2.0, frame="body")],
    "torque": [dict(body="B2", torque=1.5),
               dict(body="B0", reaction_body="B1", torque="-0.5 * t")],
    "drag": [dict(body="B0", point=(0.1, 0.2), drag_coefficient=1.0, area=0.5,
                  linear=0.3, wind=(1.0, 0.2)),
             dict(body="B2", point=(-0.1, 0.0), drag_coefficient=0.5, area=0.2)],
    "damping": [dict(body="B1", coefficients=[1.0, 2.0, 3.0]),
                dict(body="B2", coefficients=0.5)],
    "contact": [dict(body="B1", radius=1.0, stiffness=1e3, damping=1.0, friction=0.3,
                     damping_model="linear"),
                dict(body="B2", point=(0.1, 0.0), radius=1.2, line_body="B0",
                     normal=(0.2, 1.0), stiffness=5e2, exponent=1.5, damping=0.5,
                     friction=0.2, slip_velocity=0.5),
                dict(body="B0", point=(0.05, -0.1), radius=0.8, stiffness=8e2,
                     exponent=1.2, damping=2.0, damping_model="compression",
                     friction=0.4, friction_model="linear", slip_velocity=5.0)],
    "user_force": [dict(body_i="B0", body_j="B1", callable="fj_pull",
                        parameters={"k": 3.0}),
                   dict(body_i="B2", body_j="ground", callable="fj_pull")],
}

SPATIAL = {
    "tsda": [dict(body_i="a", body_j="b", point_i=[0.1, 0.2, -0.1], point_j=[-0.2, 0.1, 0.3],
                  stiffness=50.0, damping=3.0, free_length=0.4, actuator="2*sin(t) + 1"),
             dict(body_i="ground", body_j="a", point_i=[0.3, 0.0, 0.1],
                  point_j=[0.1, -0.2, 0.2], stiffness=30.0, damping=1.0)],
    "rsda": [dict(body_i="a", body_j="b", axis_i=[0, 0, 1], stiffness=20.0, damping=1.5,
                  free_angle=0.3, actuator="0.5"),
             dict(body_i="ground", body_j="b", axis_i=[1, 0, 0], stiffness=5.0,
                  damping=0.5)],
    "bushing": [dict(body_i="a", body_j="b", point_i=[0.4, -0.2, 0.1],
                     stiffness=[100, 200, 300], damping=[1, 2, 3],
                     rotational_stiffness=[10, 20, 30], rotational_damping=[0.1, 0.2, 0.3]),
                dict(body_i="ground", body_j="a", stiffness=[50, 60, 70], damping=[1, 1, 1],
                     rotational_stiffness=[5, 6, 7], rotational_damping=[0.1, 0.1, 0.1])],
    "force": [dict(body="a", point=[0.3, -0.1, 0.2], fx="1+t", fy=-2.0, fz=0.5,
                   frame="body"),
              dict(body="b", point=[-0.1, 0.2, 0.1], fx=0.5, fy=1.0, fz=-1.5)],
    "torque": [dict(body="a", reaction_body="b", tx=0.3, ty="-t", tz=1.0, frame="body"),
               dict(body="b", tx=-0.4, ty=0.2, tz=0.6)],
    "drag": [dict(body="b", point=[0.1, 0.0, 0.2], drag_coefficient=1.1, area=0.3,
                  linear=0.4, wind=[1.0, 0.5, 0.0]),
             dict(body="a", point=[-0.2, 0.1, 0.0], drag_coefficient=0.7, area=0.5)],
    "user_force": [dict(body_i="a", body_j="b", callable="fj_spatial_pull",
                        parameters={"k": 3.0})],
}


def _spatial_pull(t, q, qd, k=2.0):
    d = q[1, :3] - q[0, :3]
    return np.array([[*(k * d), 0.1, -0.2 * qd[0, 0], 0.3 * t],
                     [*(-k * d), 0.0, 0.0, q[0, 4]]])


def _register():
    from mbplugins.planar.userforce import register_user_function
    register_user_function("fj_pull", _pull)
    register_user_function("fj_spatial_pull", _spatial_pull)


def planar_model(ftype):
    _register()
    m = mbcore.Model(f"fj_{ftype}")
    _planar_bodies(m)
    for k, params in enumerate(PLANAR[ftype]):
        m.add_force(ftype, f"{ftype}{k}", **params)
    return m


def spatial_model(ftype):
    _register()
    m = mbcore.Model(f"fj3_{ftype}")
    m.set_dimensions(3)
    m.set_gravity(0.0, 0.0, -9.81)
    m.add_body("a", mass=2.0, inertia=[0.3, 0.4, 0.5], position=[0.1, 0.2, 0.3],
               orientation={"axis": [1, 2, 3], "angle": 40, "unit": "deg"})
    m.add_body("b", mass=1.5, inertia=[0.2, 0.25, 0.15], position=[0.9, -0.3, 0.5],
               orientation={"axis": [-1, 0.5, 1], "angle": 70, "unit": "deg"})
    for k, params in enumerate(SPATIAL[ftype]):
        m.add_force(ftype, f"{ftype}{k}", **params)
    return m


def random_state(s, dq=0.05):
    """Perturbed initial positions (spatial: |p| != 1) and random velocities
    (spatial: p . pdot != 0)."""
    q = s.initial_state().q + dq * RNG.standard_normal(s.n)
    return q, RNG.standard_normal(s.n)


def dense(A):
    return A.toarray() if issparse(A) else np.asarray(A)


def central(s, q, qd, t, h=1e-6):
    """dQ/dq and dQ/dqd by central differences of System.forces."""
    n = s.n
    K, C = np.zeros((n, n)), np.zeros((n, n))
    for j in range(n):
        for x, J, wrt_q in ((q, K, True), (qd, C, False)):
            d = h * (1.0 + abs(x[j]))
            xp, xm = x.copy(), x.copy()
            xp[j] += d
            xm[j] -= d
            fp = s.forces(xp, qd, t).copy() if wrt_q else s.forces(q, xp, t).copy()
            fm = s.forces(xm, qd, t).copy() if wrt_q else s.forces(q, xm, t).copy()
            J[:, j] = (fp - fm) / (2 * d)
    return K, C


def _check_against_differences(s, q, qd, t, rtol):
    K, C = (dense(x) for x in s.force_jacobians(q, qd, t))
    Kf, Cf = central(s, q, qd, t)
    for A, B in ((K, Kf), (C, Cf)):
        np.testing.assert_allclose(A, B, rtol=0, atol=rtol * max(1.0, np.abs(B).max()))
    return K, C


ANALYTIC_PLANAR = ("tsda", "tsda_nonlinear", "rsda", "force", "torque", "drag", "damping",
                   "contact")
ANALYTIC_SPATIAL = ("tsda", "rsda", "bushing", "force", "torque", "drag")


# ------------------------------------------------------------- per element type
@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("ftype", sorted(PLANAR))
def test_planar_force_jacobians_match_central_differences(ftype, kernels):
    """K and C of every planar type at random states with velocities (several
    elements, one on the ground) equal central differences of System.forces."""
    s = planar_model(ftype).compile(kernels=kernels)
    mode = s.force_jacobian_modes()[ftype]
    if ftype in ANALYTIC_PLANAR:
        assert mode == ("compiled" if kernels == "compiled" and ftype != "tsda_nonlinear"
                        else "reference")
    else:                                         # user_force: FD fallback
        assert mode == "fd"
    # analytic: the central differences' own error (observed <= 3e-9 relative; the
    # steep tanh friction of contact (v_eps = 1e-3) and forward differences (fd mode):
    # <= 6.4e-8): >= 300x
    rtol = 1e-6 if ftype in ANALYTIC_PLANAR and ftype != "contact" else 2e-5
    for k in range(3):
        q, qd = random_state(s)
        if ftype == "contact":         # keep both contacts in penetration
            q[s.coordinate_index("B1.y")] = -0.5 - 0.1 * k
        K, C = _check_against_differences(s, q, qd, 0.3 + 0.2 * k, rtol)
    if ftype not in ("torque",):
        assert np.abs(K).max() + np.abs(C).max() > 0


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("ftype", sorted(SPATIAL))
def test_spatial_force_jacobians_match_central_differences(ftype, kernels):
    """Euler-parameter form, off |p| = 1 and with p . pdot != 0 (the Jacobian of
    what System.forces returns)."""
    s = spatial_model(ftype).compile(kernels=kernels)
    mode = s.force_jacobian_modes()[ftype]
    if ftype in ANALYTIC_SPATIAL:
        assert mode == ("compiled" if kernels == "compiled" else "reference")
    else:
        assert mode == "fd"
    rtol = 1e-6 if ftype in ANALYTIC_SPATIAL else 2e-5        # as in the planar test
    for k in range(3):
        q, qd = random_state(s, dq=0.1)
        for idx in s._p_idx:
            assert abs(np.linalg.norm(q[idx]) - 1.0) > 1e-4
        _check_against_differences(s, q, qd, 0.2 + 0.3 * k, rtol)


@pytest.mark.parametrize("dim,ftype", [(2, t) for t in ANALYTIC_PLANAR if t != "tsda_nonlinear"]
                         + [(3, t) for t in ANALYTIC_SPATIAL])
def test_compiled_kernels_equal_numpy_references(dim, ftype):
    """Element blocks of the compiled kernels == the NumPy references to 1e-12, and
    the assembled K, C likewise."""
    m = planar_model(ftype) if dim == 2 else spatial_model(ftype)
    sc = m.compile(kernels="compiled")
    sn = m.compile(kernels="numpy")
    assert sc.force_jacobian_modes()[ftype] == "compiled"
    fg = next(g for g in sn.force_groups if g.ftype.name == ftype)
    from mbcore._ext import _forces
    from mbcore.plugins.compiled import load_force_kernel
    group = dict(kernel=fg.ftype.kernel or fg.ftype.name, boff=fg.boff, par=fg.par,
                 fidx=fg.fidx)
    if getattr(fg.ftype, "c_kernel", None) is not None:   # through the plugin tier
        group["capsule"] = load_force_kernel(fg.ftype).capsule
    ev = _forces.ForceJacobianEvaluator(sn.n, [group])
    for k in range(4):
        q, qd = random_state(sn, dq=0.1)
        t = 0.1 + 0.4 * k
        fv = sn.functions_at(t)
        Kb, Cb = np.zeros(ev.size), np.zeros(ev.size)
        assert ev.jacobians(q, qd, fv, Kb, Cb)
        sn._load(q)
        sn._load_qd(qd)
        Kr, Cr = fg.ftype.force_jacobian(fg.par, sn._qx[fg.gather], sn._qdx[fg.gather], t,
                                         fv[fg.fidx] if fg.ftype.n_fun else fg.fv0)
        for a, b in ((Kb, Kr), (Cb, Cr)):
            np.testing.assert_allclose(a, b.reshape(-1), rtol=0,
                                       atol=1e-12 * max(1.0, np.abs(b).max()))
        Kc, Cc = sc.force_jacobians(q, qd, t)
        Kn, Cn = sn.force_jacobians(q, qd, t)
        np.testing.assert_allclose(Kc, Kn, rtol=0, atol=1e-12 * max(1.0, np.abs(Kn).max()))
        np.testing.assert_allclose(Cc, Cn, rtol=0, atol=1e-12 * max(1.0, np.abs(Cn).max()))


def test_nonlinear_law_slopes():
    """Law.slope is the derivative of the continued law (inside and beyond the
    table; polynomials)."""
    from mbplugins.planar.nonlinear import parse_law
    for spec in ({"table": {"x": [-1.0, 0.0, 0.5, 2.0], "f": [-20, 0, 8, 30]}},
                 {"polynomial": [0.5, 10.0, 0.0, 30.0]}):
        law = parse_law(spec, "law")
        x = np.linspace(-3, 3, 41) + 1e-3
        h = 1e-6
        np.testing.assert_allclose(law.slope(x), (law(x + h) - law(x - h)) / (2 * h),
                                   rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------ System behaviour
@pytest.mark.parametrize("kernels", BACKENDS)
def test_sparse_systems_return_csr_equal_to_dense(kernels):
    _register()
    m = mbcore.Model("mixed")
    _planar_bodies(m, 4)
    for ftype in ("tsda", "rsda", "drag", "force", "user_force"):
        for k, params in enumerate(PLANAR[ftype]):
            m.add_force(ftype, f"{ftype}{k}", **params)
    sd = m.compile(kernels=kernels, jacobian="dense")
    ss = m.compile(kernels=kernels, jacobian="sparse")
    q, qd = random_state(sd)
    Kd, Cd = sd.force_jacobians(q, qd, 0.4)
    Ks, Cs = ss.force_jacobians(q, qd, 0.4)
    assert isinstance(Kd, np.ndarray) and issparse(Ks) and issparse(Cs)
    np.testing.assert_allclose(Ks.toarray(), Kd, rtol=0, atol=1e-12 * np.abs(Kd).max())
    np.testing.assert_allclose(Cs.toarray(), Cd, rtol=0, atol=1e-12 * np.abs(Cd).max())
    _check_against_differences(sd, q, qd, 0.4, 2e-6)


def test_user_force_fallback_is_forward_differences_of_its_own_forces():
    """The fallback differentiates only the Python group (no other force is
    evaluated): equal to the analytic sum when added to an analytic type."""
    s = planar_model("user_force").compile()
    assert s.force_jacobian_modes() == {"user_force": "fd"}
    calls = []
    fg = s.force_groups[0]
    fn = fg.force_fn
    fg.force_fn = lambda *a: (calls.append(1), fn(*a))[1]
    q, qd = random_state(s)
    s.force_jacobians(q, qd, 0.0)
    nb, nc = 2, 3
    assert len(calls) == 1 + 2 * nb * nc            # g0, then one call per column
    fg.force_fn = fn
    K, C = s.force_jacobians(q, qd, 0.0)
    # exact Jacobian of _pull: d(k d)/dq = k [-I, I] etc.
    Kf, Cf = central(s, q, qd, 0.0)
    np.testing.assert_allclose(K, Kf, atol=1e-6 * np.abs(Kf).max())
    np.testing.assert_allclose(C, Cf, atol=1e-6 * max(1, np.abs(Cf).max()))


@pytest.mark.parametrize("kernels", BACKENDS)
def test_zero_length_tsda_is_a_clear_error(kernels):
    m = mbcore.Model("zero")
    _planar_bodies(m, 2)
    m.add_force("tsda", "s", body_i="B0", body_j="B1", stiffness=1.0, free_length=1.0)
    s = m.compile(kernels=kernels)
    q = s.initial_state().q
    q[3:6] = q[0:3]
    with pytest.raises(AnalysisError, match="'s'.*coincide"):
        s.force_jacobians(q, np.zeros(s.n), 0.0)


@pytest.mark.parametrize("kernels", BACKENDS)
def test_rsda_with_an_undefined_angle_is_a_clear_error(kernels):
    """Body j's reference direction along the axis: the error names the element."""
    from mbcore.elements.rotations import A as Am, axis_angle_to_p, quat_product
    s = spatial_model("rsda").compile(kernels=kernels)
    q = s.initial_state().q.copy()
    par = s.force_groups[0].par[0]
    fj, ai = par[6:9], Am(q[3:7]) @ [0, 0, 1]
    v = np.cross(fj, Am(q[3:7]).T @ ai)
    ang = np.arccos(np.clip(fj @ (Am(q[3:7]).T @ ai), -1, 1))
    q[10:14] = quat_product(q[3:7], axis_angle_to_p(v / np.linalg.norm(v), ang))
    with pytest.raises(AnalysisError, match="'rsda0'.*parallel to the rotation axis"):
        s.force_jacobians(q, np.zeros(s.n), 0.0)


def test_no_force_elements():
    m = mbcore.Model("bare")
    m.set_gravity(0, -9.81)
    m.add_body("a", mass=1.0, inertia=1.0, position=(0, 0))
    for jac in ("dense", "sparse"):
        for kernels in BACKENDS:
            s = m.compile(kernels=kernels, jacobian=jac)
            K, C = s.force_jacobians(np.zeros(3), np.ones(3), 0.0)
            assert issparse(K) == (jac == "sparse") and K.shape == C.shape == (3, 3)
            assert not np.any(dense(K)) and not np.any(dense(C))


def test_particles_and_ground_blocks_are_dropped_or_folded():
    """Point masses (padded blocks) and ground-attached elements: K, C stay n x n
    and equal differences."""
    m = mbcore.Model("particles")
    m.set_gravity(0, -9.81)
    m.add_particle("P0", mass=1.0, position=(0.0, -1.0))
    m.add_particle("P1", mass=2.0, position=(0.5, -2.0))
    m.add_force("tsda", "s0", body_i="ground", body_j="P0", stiffness=100.0, damping=2.0,
                free_length=0.8)
    m.add_force("tsda", "s1", body_i="P0", body_j="P1", stiffness=50.0, damping=1.0)
    m.add_force("drag", "d", body="P1", drag_coefficient=1.0, area=0.3, linear=0.1)
    for kernels in BACKENDS:
        s = m.compile(kernels=kernels)
        q, qd = random_state(s)
        _check_against_differences(s, q, qd, 0.0, 1e-7)


def test_spatial_particles_and_repeated_bodies():
    """tsda, bushing and rsda on a particle3 (constant padded p: columns dropped) and
    two elements of a group on the same particle (blocks summed)."""
    m = mbcore.Model("p3")
    m.set_dimensions(3)
    m.add_body("a", mass=1.0, position=[0.0, 0.0, 0.5])
    m.add_body("b", mass=1.0, position=[2.0, 0.5, 0.0])
    m.add_particle("pt", mass=1.0, position=[1.0, 2.0, 3.0])
    m.add_force("tsda", "s1", body_i="a", body_j="pt", stiffness=7.0, damping=0.5,
                free_length=1.0)
    m.add_force("tsda", "s2", body_i="pt", body_j="b", stiffness=5.0, free_length=0.5)
    m.add_force("bushing", "bu", body_i="ground", body_j="pt", stiffness=[1, 2, 3],
                damping=[0.1, 0.2, 0.3])
    m.add_force("rsda", "rs", body_i="a", body_j="pt", axis_i=[0, 0, 1], stiffness=1.0,
                damping=0.2, free_angle=0.3)
    for kernels in BACKENDS:
        s = m.compile(kernels=kernels)
        q, qd = random_state(s, dq=0.05)
        # central differences of step 1e-6: rounding eps |Q| / h ~ 1e-9 relative
        # (observed 1.7e-9 here, with |Q| above the Jacobian's scale); 1e-6
        _check_against_differences(s, q, qd, 0.0, 1e-6)


# -------------------------------------------------------- ggl and stiff matrices


def _loaded_pendulum(k=1.0e6, c=2.0e3):
    """stiff_pendulum plus drag, an rsda and a follower force: constraints (lam,
    mu != 0) and every analytic planar force kind in one model."""
    m = models.stiff_pendulum(k, c)
    m.add_force("drag", "air", body="bob", drag_coefficient=1.0, area=0.2, linear=0.5)
    m.add_force("rsda", "hinge", body_i="ground", body_j="rod", stiffness=40.0,
                damping=2.0)
    m.add_force("force", "push", body="rod", point=(0.3, 0.0), fx=0.0, fy=2.0, frame="body")
    return m


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("fname", ["stiff", "ggl"])
@pytest.mark.parametrize("model", ["pendulum", "spatial"])
def test_dae_jacobians_match_differences_of_their_rhs(fname, kernels, model):
    """Block by block: every block of df/dy against central differences of the
    formulation's rhs (scaled by that block's size), at a perturbed state with
    non-zero multipliers (and mu for ggl)."""
    if model == "pendulum":
        m = _loaded_pendulum(1.0e3, 20.0)   # moderate k: differences accurate to ~1e-8
    else:
        m = spatial_model("tsda")          # spatial: differences of f kept (M^-1 inside)
        m.add_joint("spherical", "ball", body_i="ground", body_j="a", point_i=[0.1, 0.2, 0.5],
                    point_j=[0.0, 0.0, 0.2])
    s = m.compile(kernels=kernels)
    form = registry().get("formulation", fname)(s)
    st = s.initial_state()
    y, _ = form.initialize(st.q, st.qd, 0.0)
    y = y + 1e-2 * RNG.standard_normal(y.size)
    for idx in getattr(s, "_p_idx", []):      # the exact-gradient rows of stiff hold on
        y[idx] /= np.linalg.norm(y[idx])      # |p| = 1 (stiff._phi_rows)
    t = 0.05
    J = form.jacobian(t, y)
    Jf = central_jacobian(form, t, y, h=1e-6)
    n, N = s.n, y.size
    cuts = [0, n, 2 * n, N] if fname == "stiff" else [0, n, 2 * n, 2 * n + s.m, N]
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        for c, d in zip(cuts[:-1], cuts[1:], strict=True):
            blk, ref = J[a:b, c:d], Jf[a:b, c:d]
            scale = max(1.0, np.abs(ref).max()) if ref.size else 1.0
            # central differences (h = 1e-6 (1 + |y|)) of a right-hand side far larger
            # than the block: rounding eps |f| / h, observed 1.1e-7 of the scale
            np.testing.assert_allclose(blk, ref, rtol=0, atol=2e-5 * scale,
                                       err_msg=f"block rows {a}:{b}, columns {c}:{d}")
    np.testing.assert_allclose(form.rhs(t, y), form.rhs(t, y))   # buffers left at y


def test_stiff_parts_equal_the_old_differences():
    from mbplugins.formulations.stiff import _parts, _parts_fd
    s = _loaded_pendulum().compile()
    form = registry().get("formulation", "stiff")(s)
    st = s.initial_state()
    y, _ = form.initialize(st.q, st.qd, 0.0)
    n = s.n
    q, v, lam = y[:n], y[n:2 * n] + 0.3, y[2 * n:]
    new, old = _parts(s, q, v, lam, 0.1), _parts_fd(s, q, v, lam, 0.1)
    # the old parts are differences: their error, observed 6e-7 of the scale
    for a, b in zip(new, old, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-4 * max(1.0, np.abs(b).max()))


@pytest.mark.parametrize("fname", ["stiff", "ggl"])
@pytest.mark.parametrize("which", ["chain", "pendulum"])
def test_runs_unchanged_within_tolerance(fname, which, monkeypatch):
    """A stiff spring chain (k = 1e6) and the loaded pendulum with bdf: the analytic
    Newton matrices give the results of the old finite-difference ones within the
    integration tolerance (the Jacobian only steers Newton)."""
    m = models.stiff_chain(4) if which == "chain" else _loaded_pendulum()
    settings = {"analysis": "dynamic", "formulation": fname, "integrator": "bdf",
                "rtol": 1e-6, "atol": 1e-8, "t_end": 0.05 if which == "chain" else 0.3,
                "output_step": 0.01}
    new = mbcore.run(m, settings=settings)
    from mbplugins.analyses.dynamic import _Run
    from mbplugins.formulations import ggl as gglmod, stiff as stiffmod
    with monkeypatch.context() as mp:
        mp.setattr(stiffmod, "_parts", stiffmod._parts_fd)
        mp.setattr(gglmod.GGL, "jacobian", gglmod.jacobian_fd)
        mp.setattr(_Run, "_direct_work_row", lambda *args: False)
        old = mbcore.run(m, settings=settings)
    q_new, q_old = np.asarray(new["q"]), np.asarray(old["q"])
    scale = np.abs(q_old).max()
    assert np.abs(q_new - q_old).max() < 1e-4 * scale
    np.testing.assert_allclose(np.asarray(new["qd"]), np.asarray(old["qd"]),
                               atol=1e-3 * max(1.0, np.abs(np.asarray(old["qd"])).max()))


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("fname", ["stiff", "ggl"])
def test_direct_work_row_equals_differences_of_the_analysis_rhs(fname, kernels, monkeypatch):
    """The dynamic analysis' work row (dae_jacobian) from P_nc and Phi_q alone equals
    the forward differences of its whole rhs it replaces (planar, dense)."""
    from mbplugins.analyses.dynamic import _Run
    orig = _Run.dae_jacobian
    pairs = []

    def spy(self, t, y):
        a = orig(self, t, y).copy()
        with monkeypatch.context() as mp:
            mp.setattr(_Run, "_direct_work_row", lambda *args: False)
            b = orig(self, t, y).copy()
        pairs.append((a, b))
        return a

    monkeypatch.setattr(_Run, "dae_jacobian", spy)
    mbcore.run(_loaded_pendulum(1e3, 20.0), settings={
        "analysis": "dynamic", "formulation": fname, "integrator": "bdf", "t_end": 0.1,
        "kernels": kernels})
    assert pairs
    for a, b in pairs:
        np.testing.assert_array_equal(a[:-1], b[:-1])
        assert np.abs(a[-1]).max() > 0
        np.testing.assert_allclose(a[-1], b[-1], rtol=0, atol=1e-6 * np.abs(b[-1]).max())


def test_contact_branches():
    """Contact (F9) at many states: in and out of contact, approach and rebound
    (compression damping), linear friction inside its ramp and tanh friction;
    compiled == NumPy blocks, both == central differences of the active branch."""
    sc = planar_model("contact").compile(kernels="compiled")
    sn = planar_model("contact").compile(kernels="numpy")
    fg = sn.force_groups[0]
    seen = set()
    for k in range(24):
        q, qd = random_state(sn, dq=0.1)
        q[sn.coordinate_index("B1.y")] = -0.5 + 0.1 * (k % 3) if k % 4 else 2.5   # off
        out = fg.ftype.outputs(fg.par, np.concatenate([q, np.zeros(3)])[fg.gather],
                               np.concatenate([qd, np.zeros(3)])[fg.gather], 0.0, fg.fv0)
        for e, (delta, dd, fn, vt, ft) in enumerate(out):
            seen.add((e, bool(delta > 0), bool(dd > 0), bool(fn > 0)))
        Kc, Cc = sc.force_jacobians(q, qd, 0.0)
        Kn, Cn = sn.force_jacobians(q, qd, 0.0)
        np.testing.assert_allclose(Kc, Kn, rtol=0, atol=1e-12 * max(1.0, np.abs(Kn).max()))
        np.testing.assert_allclose(Cc, Cn, rtol=0, atol=1e-12 * max(1.0, np.abs(Cn).max()))
        Kf, Cf = central(sn, q, qd, 0.0)
        np.testing.assert_allclose(Kn, Kf, rtol=0, atol=2e-6 * max(1.0, np.abs(Kf).max()))
        np.testing.assert_allclose(Cn, Cf, rtol=0, atol=2e-6 * max(1.0, np.abs(Cf).max()))
    # element 0 in and out of contact; the compression damper (2) approaching and
    # rebounding
    assert {(0, False, False, False), (0, True, True, True), (2, True, True, True),
            (2, True, False, True)} <= seen, seen
