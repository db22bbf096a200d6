"""Spatial force elements (spec/spatial.md §3.1-3.2): every conservative force is
-grad V (finite differences along tangent directions, |p| = 1 kept), and for every
type the power balance ``Q . qd = -dV/dt + P_nc`` holds; load conversion n* = 2 G^T n
(P11.6); compiled and NumPy paths agree."""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import Model
from mbcore.elements.rotations import A as Amat, G as Gmat, normalize

RNG = np.random.default_rng(7)


def register():
    from mbplugins.planar.userforce import register_user_function

    def pull(t, q, qd, k=2.0):
        # a linear spring of body_i's origin to body_j's, plus a moment on each
        d = q[1, :3] - q[0, :3]
        return np.array([[*(k * d), 0.1, -0.2, 0.3 * t], [*(-k * d), 0.0, 0.0, 0.0]])
    register_user_function("spatial_pull", pull)


def two_bodies(force_type, **params):
    m = Model()
    m.set_dimensions(3)
    m.add_body("a", mass=2.0, inertia=[0.3, 0.4, 0.5], position=[0.1, 0.2, 0.3],
               orientation={"axis": [1, 2, 3], "angle": 40, "unit": "deg"})
    m.add_body("b", mass=1.5, inertia=[0.2, 0.25, 0.15], position=[0.9, -0.3, 0.5],
               orientation={"axis": [-1, 0.5, 1], "angle": 70, "unit": "deg"})
    m.add_force(force_type, "el", **params)
    return m


CASES = {
    "tsda": dict(body_i="a", body_j="b", point_i=[0.1, 0.2, -0.1], point_j=[-0.2, 0.1, 0.3],
                 stiffness=50.0, damping=3.0, free_length=0.4, actuator="2*sin(t)"),
    "rsda": dict(body_i="a", body_j="b", axis_i=[0, 0, 1], stiffness=20.0, damping=1.5,
                 free_angle=0.3, actuator="0.5"),
    "bushing": dict(body_i="a", body_j="b", point_i=[0.4, -0.2, 0.1],
                    stiffness=[100, 200, 300], damping=[1, 2, 3],
                    rotational_stiffness=[10, 20, 30], rotational_damping=[0.1, 0.2, 0.3]),
    "force": dict(body="a", point=[0.3, -0.1, 0.2], fx="1+t", fy=-2.0, fz=0.5, frame="body"),
    "torque": dict(body="a", reaction_body="b", tx=0.3, ty="-t", tz=1.0, frame="body"),
    "drag": dict(body="b", point=[0.1, 0.0, 0.2], drag_coefficient=1.1, area=0.3,
                 linear=0.4, wind=[1.0, 0.5, 0.0]),
    "user_force": dict(body_i="a", body_j="b", callable="spatial_pull",
                       parameters={"k": 3.0}),
}


def random_state(system):
    q = system.initial_state().q.copy()
    q[system._r_idx] += RNG.normal(scale=0.1, size=len(system._r_idx))
    for idx in system._p_idx:
        q[idx] = normalize(q[idx] + RNG.normal(scale=0.2, size=4))
    qd = RNG.normal(size=system.n)
    for idx in system._p_idx:              # tangent: p . pd = 0
        qd[idx] -= (q[idx] @ qd[idx]) * q[idx]
    return q, qd


def along(system, q, dq, h):
    """q moved by h along the tangent direction dq, p renormalised."""
    x = q + h * dq
    for idx in system._p_idx:
        x[idx] = normalize(x[idx])
    return x


@pytest.mark.parametrize("kernels", ["numpy", "compiled"])
@pytest.mark.parametrize("ftype", sorted(CASES))
def test_power_balance(ftype, kernels):
    """Q . qd = -dV/dt + P_nc at random states (every force type; spec §3.2)."""
    register()
    s = two_bodies(ftype, **CASES[ftype]).compile(kernels=kernels)
    for _ in range(3):
        q, qd = random_state(s)
        t = 0.7
        Q = s.forces(q, qd, t).copy()
        h = 1e-6
        dV = (s.potential_energy(along(s, q, qd, h), t)
              - s.potential_energy(along(s, q, qd, -h), t)) / (2 * h)
        P = s.nonconservative_power(q, qd, t)
        # central difference of V (h = 1e-6): rounding eps |V| / h plus truncation
        # h^2 |V'''| / 6 (observed <= 1.4e-8 absolute, 1.4e-9 relative); 1e-6 relative
        assert Q @ qd == pytest.approx(-dV + P, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("ftype", ["tsda", "rsda", "bushing"])
def test_springs_are_minus_grad_V(ftype):
    """Springs alone (no damping, no actuator): Q . dq = -dV for every tangent dq,
    i.e. Q = -grad V in the ω' sense (n* = -(I - p p^T) dV/dp, spec §3.2)."""
    params = dict(CASES[ftype])
    for key in ("damping", "rotational_damping"):
        if key in params:
            params[key] = 0.0 if ftype != "bushing" else [0.0, 0.0, 0.0]
    params.pop("actuator", None)
    s = two_bodies(ftype, **params).compile(kernels="numpy")
    q, _ = random_state(s)
    Q = s.forces(q, np.zeros(s.n), 0.0).copy() - s._q_gravity
    for _ in range(4):
        _, dq = random_state(s)
        h = 1e-6
        dV = (s.potential_energy(along(s, q, dq, h)) - s.potential_energy(
            along(s, q, dq, -h))) / (2 * h)
        assert Q @ dq == pytest.approx(-dV, rel=1e-7, abs=1e-8)
    assert np.abs(Q).max() > 1e-3          # the test sees a force


def test_moment_conversion_p11_6():
    """spec/spatial.md §4.4 P11.6: body force f' = [3, -2, -1] at s' = [1, -1, 2] with
    p = [0.5, 0.7, -0.5, 0.1]: n' = [5, 7, 1], n* = [-0.2, 2.6, 6.6, 15.8]."""
    m = Model()
    m.set_dimensions(3)
    m.add_body("b", mass=1.0, orientation={"euler_parameters": [0.5, 0.7, -0.5, 0.1]})
    m.add_force("force", "f", body="b", point=[1, -1, 2], fx=3, fy=-2, fz=-1, frame="body")
    s = m.compile(kernels="numpy")
    q = s.initial_state().q
    Q = s.forces(q, np.zeros(s.n), 0.0)
    np.testing.assert_allclose(Q[3:7], [-0.2, 2.6, 6.6, 15.8], atol=1e-12)
    A = Amat(q[3:7])
    np.testing.assert_allclose(Q[:3], A @ [3, -2, -1], atol=1e-12)
    np.testing.assert_allclose(Q[:3], [3.4, -1.0, 1.2], atol=1e-12)
    n = 0.5 * Gmat(q[3:7]) @ Q[3:7]
    np.testing.assert_allclose(n, [-3.56, -3.80, 6.92], atol=1e-12)


def test_tsda_between_coincident_points_names_the_element():
    from mbcore.errors import AnalysisError
    s = two_bodies("tsda", body_i="a", body_j="b", stiffness=1.0).compile(kernels="numpy")
    q = s.initial_state().q.copy()
    q[7:10] = q[0:3]
    q[10:14] = q[3:7]
    with pytest.raises(AnalysisError, match="'el'.*coincide"):
        s.forces(q, np.zeros(s.n), 0.0)


def test_rsda_tracks_turns():
    """The RSDA angle follows body b through several turns about the axis."""
    m = Model()
    m.set_dimensions(3)
    m.add_body("b", mass=1.0)
    m.add_force("rsda", "r", body_i="ground", body_j="b", axis_i=[0, 0, 1], stiffness=1.0)
    s = m.compile(kernels="numpy")
    q = s.initial_state().q.copy()
    angles = np.linspace(0.0, 5 * np.pi, 60)
    out = []
    for a in angles:
        q[3:7] = [np.cos(a / 2), 0, 0, np.sin(a / 2)]
        out.append(s.force_outputs(q, np.zeros(s.n), 0.0)[0])
    np.testing.assert_allclose(out, angles, atol=1e-12)
    # spring torque -k theta about z on b: n* = 2 G^T n
    Q = s.forces(q, np.zeros(s.n), 0.0)
    n = 0.5 * Gmat(q[3:7]) @ Q[3:7]
    np.testing.assert_allclose(n, [0, 0, -angles[-1]], atol=1e-12)


@pytest.mark.parametrize("ftype", ["drag", "force"])
def test_point_loads_power_from_point_velocity(ftype):
    """A load at a body point P injects f . v_P, with v_P by finite differences of
    r + A s' along the motion (independent of the element's own velocity map)."""
    s = two_bodies(ftype, **CASES[ftype]).compile(kernels="numpy")
    q, qd = random_state(s)
    body = 0 if CASES[ftype]["body"] == "a" else 1
    o = 7 * body
    sp = np.asarray(CASES[ftype]["point"], float)

    def point(x):
        return x[o:o + 3] + Amat(x[o + 3:o + 7]) @ sp
    h = 1e-6
    vP = (point(along(s, q, qd, h)) - point(along(s, q, qd, -h))) / (2 * h)
    Q = s.forces(q, qd, 0.4).copy() - s._q_gravity
    f = Q[o:o + 3]
    assert Q @ qd == pytest.approx(f @ vP, rel=1e-7)
    if ftype == "drag":
        v = vP - np.asarray(CASES["drag"]["wind"])
        kq = 0.5 * 1.1 * 1.225 * 0.3
        np.testing.assert_allclose(f, -(kq * np.linalg.norm(v) + 0.4) * v, rtol=1e-7)


@pytest.mark.parametrize("ftype", ["tsda", "force", "torque", "drag", "rsda", "bushing"])
def test_compiled_kernels_equal_numpy(ftype):
    """The compiled spatial kernels (ext/_spatial_forces.pxi) equal the NumPy
    references to 1e-12: forces and non-conservative power, also off |p| = 1."""
    sc = two_bodies(ftype, **CASES[ftype]).compile(kernels="compiled")
    sn = two_bodies(ftype, **CASES[ftype]).compile(kernels="numpy")
    assert sc._force_evaluator is not None and not sc._py_force_groups
    for scale in (1.0, 1.02):
        q, qd = random_state(sn)
        q[sn._p_idx] *= scale
        for t in (0.0, 1.3):
            a = sc.forces(q, qd, t).copy()
            b = sn.forces(q, qd, t).copy()
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max())
            P = sc._force_evaluator.power_nc(q, qd, np.ascontiguousarray(
                sc.functions_at(t).reshape(-1, 3)))
            assert P == pytest.approx(sn.nonconservative_power(q, qd, t), rel=1e-12,
                                      abs=1e-12)


def test_spring_elements_on_point_masses_and_repeated_bodies():
    """tsda, bushing and rsda on a particle3 (no rotation: pose = identity) pack and
    agree between the paths, also when two elements of one group act on the same
    particle (the NumPy path must sum them, not keep one)."""
    m = Model()
    m.set_dimensions(3)
    m.add_body("a", mass=1.0, position=[0.0, 0.0, 0.5])
    m.add_body("b", mass=1.0, position=[2.0, 0.5, 0.0])
    m.add_particle("pt", mass=1.0, position=[1.0, 2.0, 3.0])
    m.add_force("tsda", "s1", body_i="a", body_j="pt", stiffness=7.0, free_length=1.0)
    m.add_force("tsda", "s2", body_i="pt", body_j="b", stiffness=5.0, free_length=0.5)
    m.add_force("bushing", "bu", body_i="ground", body_j="pt", stiffness=[1, 2, 3])
    m.add_force("rsda", "rs", body_i="a", body_j="pt", axis_i=[0, 0, 1], stiffness=1.0,
                free_angle=0.3)
    sc, sn = m.compile(kernels="compiled"), m.compile(kernels="numpy")
    q = sn.initial_state().q.copy()
    o = int(sn.body_offsets[2])
    np.testing.assert_allclose(q[o:o + 3], [1.0, 2.0, 3.0])
    q[o:o + 3] += [0.3, -0.2, 0.1]
    qd = RNG.normal(size=sn.n)
    for idx in sn._p_idx:
        qd[idx] -= (q[idx] @ qd[idx]) * q[idx]
    a, b = sc.forces(q, qd, 0.0).copy(), sn.forces(q, qd, 0.0).copy()
    np.testing.assert_allclose(a, b, atol=1e-12 * np.abs(b).max())
    # the particle's force: both springs (and the bushing) summed
    d1 = q[o:o + 3] - q[0:3]
    d2 = q[7:10] - q[o:o + 3]
    f1 = -7.0 * (np.linalg.norm(d1) - 1.0) * d1 / np.linalg.norm(d1)
    f2 = 5.0 * (np.linalg.norm(d2) - 0.5) * d2 / np.linalg.norm(d2)
    fb = -np.array([1.0, 2.0, 3.0]) * [0.3, -0.2, 0.1]
    np.testing.assert_allclose(b[o:o + 3], f1 + f2 + fb, atol=1e-12)


def test_rsda_with_an_undefined_angle_names_the_element():
    from mbcore.errors import AnalysisError
    checked = 0
    for kernels in ("numpy", "compiled"):
        s = two_bodies("rsda", body_i="a", body_j="b", axis_i=[0, 0, 1],
                       stiffness=1.0).compile(kernels=kernels)
        q = s.initial_state().q.copy()
        par = s.force_groups[0].par[0]
        # turn body b so that its reference direction f'_j points along the axis
        fj = par[6:9]
        from mbcore.elements.rotations import A as Am
        ai = Am(q[3:7]) @ [0, 0, 1]
        v = np.cross(fj, Am(q[3:7]).T @ ai)
        if np.linalg.norm(v) < 1e-12:
            continue
        ang = np.arccos(np.clip(fj @ (Am(q[3:7]).T @ ai), -1, 1))
        from mbcore.elements.rotations import axis_angle_to_p, quat_product
        # p_b such that A_b f'_j = a_i: rotate b by A_b = A_i R with R f'_j = e_z'
        R = axis_angle_to_p(v / np.linalg.norm(v), ang)
        q[10:14] = quat_product(q[3:7], R)
        with pytest.raises(AnalysisError, match="'el'.*parallel to the rotation axis"):
            s.forces(q, np.zeros(s.n), 0.0)
        checked += 1
    assert checked == 2
