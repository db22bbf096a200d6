"""Spatial composite / primitive constraint types (mbplugins.spatial.composites;
spec/spatial.md §2.3-2.8): screw, revolute_cylindrical, point_on_line,
point_on_plane, relative_rotation_ep, orientation_lock.

The checkers of tests/test_spatial_constraints.py are reused: on vectorised groups
(4 elements, two of them attached to the ground) at random states with normalised
p, ``jacobian_v`` against finite differences along exact rotations, the
Euler-parameter ``jacobian()`` against finite differences along tangent
directions, ``jacobian_v v - nu`` against dPhi/dt and ``gamma_v`` / ``gamma()``
against d²Phi/dt² along smooth trajectories (drivers with time functions).  Then:
the spec formulas written out independently (Eq 7.18, ep,3), relative DOF at
assembled configurations, joint reactions, the screw's travel = pitch x tracked
angle over several turns, mutation tests, and end-to-end runs in a System with the
types registered at run time (when the built-in plugin does not provide them yet).
"""
from __future__ import annotations

import math
import re
import zlib

import numpy as np
import pytest
import test_spatial_constraints as T

import mbcore
from mbcore.elements.functions import parse_function
from mbcore.elements.rotations import A as Amat
from mbcore.elements.rotations import L as Lmat
from mbplugins.spatial import composites as SX
from mbplugins.spatial import constraints as SC
from mbplugins.spatial import kinematics as SKIN

GROUND = T.GROUND
TYPES = {cls.name: cls for cls in SX.COMPOSITE_TYPES}
NAMES = sorted(TYPES)
unit, rand_unit, rand_pose, qmul, qexp = T.unit, T.rand_unit, T.rand_pose, T.qmul, T.qexp


def _pt(rng):
    return tuple(rng.normal(size=3))


def _ax(rng):
    return tuple(rand_unit(rng))


def spec_for(name, rng, bi, bj, k):
    """A random valid element of type ``name`` (odd k: optional keys given)."""
    alt = k % 2 == 1
    s = {"body_i": bi, "body_j": bj}
    if name == "screw":
        s.update(point_i=_pt(rng), point_j=_pt(rng) if alt else None, axis_i=_ax(rng),
                 axis_j=_ax(rng) if alt else None, pitch=float(rng.uniform(-0.5, 0.5)))
    elif name == "revolute_cylindrical":
        s.update(point_i=_pt(rng), point_j=_pt(rng) if alt else None, axis_i=_ax(rng),
                 axis_j=_ax(rng))
    elif name == "point_on_line":
        s.update(point_i=_pt(rng), axis_i=_ax(rng), point_j=_pt(rng) if alt else None)
    elif name == "point_on_plane":
        s.update(point_i=_pt(rng), normal_i=_ax(rng), point_j=_pt(rng) if alt else None)
    elif name == "relative_rotation_ep":
        s.update(function=parse_function(T.DRIVE, "function"),
                 zero="initial" if alt else "parallel")
    elif name == "orientation_lock":
        pass
    else:  # pragma: no cover
        raise KeyError(name)
    return s


def make_group(name, seed, pairs=T.PAIRS):
    rng = np.random.default_rng(seed)
    ct = TYPES[name]()
    specs, poses = [], []
    for k, (bi, bj) in enumerate(pairs):
        specs.append(spec_for(name, rng, bi, bj, k))
        poses.append({"b1": rand_pose(rng), "b2": rand_pose(rng)})
    return ct, T.Group(ct, specs, poses), rng


# =====================================================================================
# catalogue, shapes
# =====================================================================================
def test_catalogue_metadata():
    names = [c.name for c in SX.COMPOSITE_TYPES]
    assert sorted(names) == ["orientation_lock", "point_on_line", "point_on_plane",
                             "relative_rotation_ep", "revolute_cylindrical", "screw"]
    assert not set(names) & {c.name for c in SC.CONSTRAINT_TYPES}
    for cls in SX.COMPOSITE_TYPES:
        ct = cls()
        assert cls.body_kind == "spatial" and cls.kernel == f"spatial_{cls.name}"
        assert cls.category in ("joint", "driver", "constraint")
        assert len(ct.equation_labels()) == cls.equations
        assert cls.description and cls.__doc__ and re.search(
            r"\b[A-Z][\w\-]+(?: \d+)?(?: et al\.)?,? \(\d{4}\)|derived here", cls.__doc__)
        for b in cls.bodies:
            assert cls.params[b].kind == "body"
    assert {c.name: c.equations for c in SX.COMPOSITE_TYPES} == {
        "screw": 5, "revolute_cylindrical": 3, "point_on_line": 2, "point_on_plane": 1,
        "relative_rotation_ep": 1, "orientation_lock": 3}


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_vectorisation(name):
    """Group results have the declared shapes and equal element-by-element results."""
    ct, G, rng = make_group(name, 11)
    q, qd, qdd, v, vd = T.Trajectory(rng, G.ground).state(0.2)
    f = G.f(0.2)
    m = ct.equations

    def evaluate(sl):
        return {"phi": ct.phi(G.par[sl].copy(), q[sl], 0.2, f[sl]),
                "jv": ct.jacobian_v(G.par[sl], q[sl], 0.2, f[sl]),
                "jq": ct.jacobian(G.par[sl], q[sl], 0.2, f[sl]),
                "nu": ct.nu(G.par[sl], q[sl], 0.2, f[sl]),
                "gv": ct.gamma_v(G.par[sl], q[sl], v[sl], 0.2, f[sl]),
                "gq": ct.gamma(G.par[sl], q[sl], qd[sl], 0.2, f[sl])}
    full = evaluate(slice(None))
    shapes = {"phi": (G.ne, m), "jv": (G.ne, m, G.nb, 6), "jq": (G.ne, m, G.nb, 7),
              "nu": (G.ne, m), "gv": (G.ne, m), "gq": (G.ne, m)}
    for k, a in full.items():
        assert a.shape == shapes[k], k
        assert np.all(np.isfinite(a)), k
    for e in range(G.ne):
        one = evaluate(slice(e, e + 1))
        for k in full:
            np.testing.assert_allclose(one[k][0], full[k][e], rtol=1e-13, atol=1e-13)
    assert np.all(full["jq"][..., :3] == full["jv"][..., :3])


# =====================================================================================
# derivatives against finite differences
# =====================================================================================
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [1, 2])
def test_jacobian_v_finite_differences(name, seed):
    ct, G, rng = make_group(name, seed)
    assert T.err_jacobian_v(ct, G, rng) < 1e-8


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [3, 4])
def test_euler_jacobian_finite_differences(name, seed):
    ct, G, rng = make_group(name, seed)
    # 4th-order differences (h = 2e-4) along the normalised path: truncation
    # h^4 |f^(5)| / 30, worst over the types 1.8e-9 (rotation_driver); 1e-6
    assert T.err_jacobian_ep(ct, G, rng) < 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [5, 6])
def test_velocity_equation_along_trajectories(name, seed):
    """Phi_v v - nu = dPhi/dt (the driver: nu = -Phi_t)."""
    ct, G, rng = make_group(name, seed)
    assert T.err_velocity(ct, G, rng) < 1e-8


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [7, 8])
def test_gamma_v_along_trajectories(name, seed):
    """d²Phi/dt² = Phi_v vdot - gamma#."""
    ct, G, rng = make_group(name, seed)
    assert T.err_gamma(ct, G, rng, form="v") < 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [9, 10])
def test_gamma_euler_along_trajectories(name, seed):
    """d²Phi/dt² = Phi_q qdd - gamma (Euler-parameter form)."""
    ct, G, rng = make_group(name, seed)
    # 4th-order second differences (h = 1e-3): truncation h^4 |f^(6)| / 90 and rounding
    # ~5 eps |Phi| / h^2, worst over the types 2e-8 (point_on_line); 1e-5
    assert T.err_gamma(ct, G, rng, form="q") < 1e-5


def test_screw_checks_across_the_atan2_cut():
    """Trajectories whose relative angle passes ±pi during the differences: the
    tracked phi stays smooth, so the FD checks still hold."""
    rng = np.random.default_rng(40)
    ct = SX.Screw()
    for _ in range(3):
        qi = rand_pose(rng)
        ui = rand_unit(rng)
        ug = Amat(qi[3:]) @ ui
        qj0 = rand_pose(rng)
        spec = {"body_i": "b1", "body_j": "b2", "point_i": _pt(rng), "point_j": None,
                "axis_i": tuple(ui), "axis_j": None, "pitch": 0.3}
        par, _ = ct.pack(spec, T.FakeCtx({"b1": qi, "b2": qj0}))
        assert abs(par[ct.TRACK]) < 1e-12
        pars = np.array([par])
        for th in np.linspace(0.0, math.pi, 9):      # turn body j half a turn
            qj = qj0.copy()
            qj[3:] = qmul(qexp(th * ug), qj0[3:])
            ct.angle(pars, np.array([[qi, qj]]))
        assert pars[0, ct.TRACK] == pytest.approx(math.pi, abs=1e-9)
        par = pars
        q = np.array([[qi, qj]])
        v = rng.normal(size=(1, 2, 6))
        f = np.zeros((1, 0, 3))
        Jv = np.einsum("embc,ebc->em", ct.jacobian_v(par, q, 0.0, f), v)
        z = np.zeros((1, 2), bool)
        fd = T.d1(lambda s: ct.phi(par, T.displace(q, v, s, z), 0.0, f), 2e-4)
        assert T.relerr(fd, Jv) < 1e-8


# =====================================================================================
# the spec formulas written out (independent of the jet machinery)
# =====================================================================================
def test_relative_rotation_ep_is_eq_7_18():
    """zero: parallel -> Phi = p_i'p_j - cos(th/2), Phi_pi'_i = -e_ij/2,
    Phi_pi'_j = e_ij/2 (e_ij = L_j p_i), nu = -sin(th/2) th'/2,
    gamma# = -2 pd_i'pd_j - cos(th/2) th'²/4 - sin(th/2) th''/2
             + (pd_i'pd_i + pd_j'pd_j) p_i'p_j   (spec §2.4)."""
    ct = SX.RelativeRotationEP()
    rng = np.random.default_rng(41)
    fn = parse_function("0.7 + 0.4*sin(2*t)", "function")
    spec = {"body_i": "b1", "body_j": "b2", "function": fn, "zero": "parallel"}
    par, fl = ct.pack(spec, T.FakeCtx({"b1": rand_pose(rng), "b2": rand_pose(rng)}))
    assert par == [1.0, 0.0, 0.0, 0.0]
    G = np.zeros((1, 2), bool)
    par = np.array([par])
    for t in (0.0, 0.3, 1.1):
        q, qd, qdd, v, vd = T.Trajectory(rng, G).state(t)
        f = T.jets([fl], t)
        th, thd, thdd = f[0, 0]
        pi, pj, pdi, pdj = q[0, 0, 3:], q[0, 1, 3:], qd[0, 0, 3:], qd[0, 1, 3:]
        eij = Lmat(pj) @ pi
        assert ct.phi(par, q, t, f)[0, 0] == pytest.approx(pi @ pj - math.cos(th / 2), abs=1e-14)
        J = ct.jacobian_v(par, q, t, f)[0, 0]
        np.testing.assert_allclose(J[0], np.r_[0, 0, 0, -0.5 * eij], atol=1e-14)
        np.testing.assert_allclose(J[1], np.r_[0, 0, 0, 0.5 * eij], atol=1e-14)
        assert ct.nu(par, q, t, f)[0, 0] == pytest.approx(-0.5 * math.sin(th / 2) * thd)
        g = (-2 * pdi @ pdj - 0.25 * math.cos(th / 2) * thd ** 2 - 0.5 * math.sin(th / 2) * thdd
             + (pdi @ pdi + pdj @ pdj) * (pi @ pj))
        assert ct.gamma_v(par, q, v, t, f)[0, 0] == pytest.approx(g, rel=1e-12, abs=1e-13)
        # Euler-parameter form: Phi_p = [p_j, p_i] up to the projection (spec §2.1 P)
        Jq = ct.jacobian(par, q, t, f)[0, 0]
        np.testing.assert_allclose(Jq[0, 3:], pj - (pj @ pi) * pi, atol=1e-14)
        np.testing.assert_allclose(Jq[1, 3:], pi - (pi @ pj) * pj, atol=1e-14)


def test_orientation_lock_is_ep3_and_the_rotation_rows_of_fixed():
    """Frames parallel initially: Phi = L_j p_i, Phi_pi'_i = ½(e0 I + ẽ),
    Phi_pi'_j = -½(e0 I - ẽ), gamma# = -2 L(pd_j) pd_i + (pd_i'pd_i + pd_j'pd_j) L_j p_i
    (spec §2.4, E = I); in general the same numbers as rows 3:6 of ``fixed``."""
    rng = np.random.default_rng(42)
    ct = SX.OrientationLock()
    G = np.zeros((1, 2), bool)
    q0 = rand_pose(rng)
    par, _ = ct.pack({"body_i": "b1", "body_j": "b2"}, T.FakeCtx({"b1": q0, "b2": q0}))
    np.testing.assert_allclose(np.abs(par), [1, 0, 0, 0], atol=1e-14)
    par = np.array([par])
    f = np.zeros((1, 0, 3))
    q, qd, qdd, v, vd = T.Trajectory(rng, G).state(0.4)
    pi, pj, pdi, pdj = q[0, 0, 3:], q[0, 1, 3:], qd[0, 0, 3:], qd[0, 1, 3:]
    e = Lmat(pj) @ pi
    e0 = pj @ pi
    s = np.sign(par[0, 0])
    np.testing.assert_allclose(ct.phi(par, q, 0.0, f)[0], s * e, atol=1e-14)
    sk = np.array([[0, -e[2], e[1]], [e[2], 0, -e[0]], [-e[1], e[0], 0]])
    J = ct.jacobian_v(par, q, 0.0, f)[0]
    np.testing.assert_allclose(J[:, 0, 3:], s * 0.5 * (e0 * np.eye(3) + sk), atol=1e-14)
    np.testing.assert_allclose(J[:, 1, 3:], -s * 0.5 * (e0 * np.eye(3) - sk), atol=1e-14)
    g = -2 * Lmat(pdj) @ pdi + (pdi @ pdi + pdj @ pdj) * e
    np.testing.assert_allclose(ct.gamma_v(par, q, v, 0.0, f)[0], s * g, atol=1e-12)
    # arbitrary initial relative orientation: the rotation rows of ``fixed``
    poses = {"b1": rand_pose(rng), "b2": rand_pose(rng)}
    lk, _ = ct.pack({"body_i": "b1", "body_j": "b2"}, T.FakeCtx(poses))
    fx, _ = SC.Fixed().pack({"body_i": "b1", "body_j": "b2", "point_i": (0, 0, 0),
                             "point_j": None}, T.FakeCtx(poses))
    lk, fx = np.array([lk]), np.array([fx])
    F = SC.Fixed()
    np.testing.assert_allclose(ct.phi(lk, q, 0, f), F.phi(fx, q, 0, f)[:, 3:], atol=1e-14)
    np.testing.assert_allclose(ct.jacobian_v(lk, q, 0, f), F.jacobian_v(fx, q, 0, f)[:, 3:],
                               atol=1e-14)
    np.testing.assert_allclose(ct.gamma_v(lk, q, v, 0, f), F.gamma_v(fx, q, v, 0, f)[:, 3:],
                               atol=1e-13)


def test_point_rows_are_n2_rows():
    """point_on_plane: Phi = n_i'd, Phi_r = [-n_i', n_i'],
    Phi_pi' = [-(d + s_i)' ñ_i A_i, -n_i' s̃_j A_j] (spec §2.3 n2, body form)."""
    rng = np.random.default_rng(43)
    ct = SX.PointOnPlane()
    G = np.zeros((1, 2), bool)
    spec = {"body_i": "b1", "body_j": "b2", "point_i": _pt(rng), "normal_i": _ax(rng),
            "point_j": _pt(rng)}
    par, _ = ct.pack(spec, T.FakeCtx({"b1": rand_pose(rng), "b2": rand_pose(rng)}))
    par = np.array([par])
    q = T.Trajectory(rng, G).state(0.1)[0]
    Ai, Aj = Amat(q[0, 0, 3:]), Amat(q[0, 1, 3:])
    si, sj, n = Ai @ par[0, 0:3], Aj @ par[0, 3:6], Ai @ par[0, 6:9]
    d = q[0, 1, :3] + sj - q[0, 0, :3] - si
    sk = lambda a: np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    f = np.zeros((1, 0, 3))
    # the same product summed in another order: a few eps of |n| |d| ~ 3 (obs. 4.4e-16)
    assert ct.phi(par, q, 0, f)[0, 0] == pytest.approx(n @ d, abs=1e-13)
    J = ct.jacobian_v(par, q, 0, f)[0, 0]
    np.testing.assert_allclose(J[0], np.r_[-n, -(d + si) @ sk(n) @ Ai], atol=1e-13)
    np.testing.assert_allclose(J[1], np.r_[n, -n @ sk(sj) @ Aj], atol=1e-13)


# =====================================================================================
# assembled configurations: relative DOF, reactions
# =====================================================================================
def assembled(name, rng, bi="b1", bj="b2", explicit=False):
    """An element that holds at the initial poses (explicit: point_j given, on the
    line / plane / axis, instead of defaulted)."""
    poses = {"b1": rand_pose(rng), "b2": rand_pose(rng)}
    ctx = T.FakeCtx(poses)
    ri, Ai = ctx.pose(bi)
    rj, Aj = ctx.pose(bj)
    s = {"body_i": bi, "body_j": bj}
    si, ai = rng.normal(size=3), rand_unit(rng)
    Pi, ag = ri + Ai @ si, Ai @ ai                   # global point and direction on i
    perp = unit(np.cross(ag, rng.normal(size=3)))

    def on_j(Pg):
        return tuple(Aj.T @ (Pg - rj)) if explicit else None
    if name == "screw":
        s.update(point_i=tuple(si), point_j=on_j(Pi + rng.normal() * ag), axis_i=tuple(ai),
                 axis_j=None, pitch=float(rng.uniform(-0.5, 0.5)))
    elif name == "revolute_cylindrical":
        s.update(point_i=tuple(si), point_j=on_j(Pi + rng.normal() * perp),
                 axis_i=tuple(ai), axis_j=tuple(Aj.T @ perp))
    elif name == "point_on_line":
        s.update(point_i=tuple(si), axis_i=tuple(ai), point_j=on_j(Pi + rng.normal() * ag))
    elif name == "point_on_plane":
        s.update(point_i=tuple(si), normal_i=tuple(ai), point_j=on_j(Pi + rng.normal() * perp))
    elif name == "orientation_lock":
        pass
    ct = TYPES[name]()
    par, fl = ct.pack(s, ctx)
    q = np.array([[ctx.initial(bi), ctx.initial(bj)]])
    return ct, np.array([par], float), q, T.jets([fl], 0.0), s, ctx


RELATIVE_DOF = {"screw": 1, "revolute_cylindrical": 3, "point_on_line": 4,
                "point_on_plane": 5, "orientation_lock": 3}


def _free_rank(J, bodies):
    free = [b for b, nm in enumerate(bodies) if nm != GROUND]
    Jf = np.concatenate([J[:, b, :] for b in free], axis=1)
    return np.linalg.matrix_rank(Jf, tol=1e-9 * max(1.0, np.abs(Jf).max()))


@pytest.mark.parametrize("name", sorted(RELATIVE_DOF))
@pytest.mark.parametrize("bodies", [("b1", "b2"), (GROUND, "b2"), ("b1", GROUND)])
def test_defaults_assemble_and_relative_dof(name, bodies):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{bodies}".encode()))
    for k in range(4):
        ct, par, q, f, spec, ctx = assembled(name, rng, *bodies, explicit=k % 2 == 1)
        assert np.abs(ct.phi(par.copy(), q, 0.0, f)).max() < 1e-12
        rank = _free_rank(ct.jacobian_v(par, q, 0.0, f)[0], bodies)
        assert rank == ct.equations              # independent rows when assembled
        assert 6 - rank == RELATIVE_DOF[name]    # relative DOF of the two bodies


def test_relative_rotation_ep_rank_and_singularity_at_zero():
    """Rank 1 at theta != 0; the Jacobian vanishes at theta = 0 (spec §2.4 caveat);
    only |theta| is determined: theta and -theta both satisfy the row."""
    rng = np.random.default_rng(44)
    ct = SX.RelativeRotationEP()
    for th in (0.0, 0.8, -0.8, 2.5):
        qi, u = rand_pose(rng), rand_unit(rng)
        qj = qi.copy()
        qj[:3] += rng.normal(size=3)
        qj[3:] = qmul(qi[3:], qexp(th * u))          # body j turned by th (body-i axis)
        for zero, ctxq in (("parallel", {"b1": qi, "b2": qi}), ("initial", None)):
            if zero == "initial":       # initial relative orientation: a random one
                q0 = rand_pose(rng)
                qi2 = q0.copy()
                qj2 = q0.copy()
                qj2[3:] = qmul(q0[3:], qexp(0.3 * rand_unit(rng)))
                ctxq = {"b1": qi2, "b2": qj2}
            spec = {"body_i": "b1", "body_j": "b2", "zero": zero,
                    "function": parse_function(abs(th), "f")}
            par, fl = ct.pack(spec, T.FakeCtx(ctxq))
            par = np.array([par])
            if zero == "initial":
                # rotate from the initial relative orientation: p_j = p_j0 ⊗ exp(th u)
                qa = np.array([[ctxq["b1"], np.r_[ctxq["b2"][:3],
                                                   qmul(ctxq["b2"][3:], qexp(th * u))]]])
            else:
                qa = np.array([[qi, qj]])
            f = T.jets([fl], 0.0)
            assert abs(ct.phi(par, qa, 0.0, f)[0, 0]) < 1e-12, (th, zero)
            rank = _free_rank(ct.jacobian_v(par, qa, 0.0, f)[0], ("b1", "b2"))
            assert rank == (0 if th == 0.0 else 1), (th, zero)


def test_reactions():
    rng = np.random.default_rng(45)
    # revolute_cylindrical: no force along the cylinder axis, no moment about either axis
    for k in range(4):
        ct, par, q, f, spec, ctx = assembled("revolute_cylindrical", rng, explicit=k % 2 == 1)
        lam = rng.normal(size=(1, 3))
        loc = ct.reaction_local(par, q, 0.0, f, lam)[0]
        assert loc.shape == (6,) and np.abs(loc).max() > 1e-3
        for c in ("fz", "nx", "nz"):
            assert abs(loc[ct.local_labels.index(c)]) < 1e-12, c
    # screw: the joint frame (f_i, g_i, u_i); torque about the axis = -pitch * axial force
    for k in range(4):
        ct, par, q, f, spec, ctx = assembled("screw", rng, explicit=k % 2 == 1)
        lam = rng.normal(size=(1, 5))
        loc = dict(zip(ct.local_labels, ct.reaction_local(par, q, 0.0, f, lam)[0],
                       strict=True))
        assert abs(loc["fz"]) > 1e-3
        assert loc["nz"] == pytest.approx(-spec["pitch"] * loc["fz"], abs=1e-12)
        assert loc["fz"] == pytest.approx(-lam[0, 4], abs=1e-12)
    # point_on_line / point_on_plane: the force on body i is Phi_r_i^T lam
    for name in ("point_on_line", "point_on_plane"):
        ct, par, q, f, spec, ctx = assembled(name, rng, explicit=True)
        lam = rng.normal(size=(1, ct.equations))
        F = lam[0] @ ct.jacobian_v(par, q, 0.0, f)[0, :, 0, :3]      # global
        loc = ct.reaction_local(par, q, 0.0, f, lam)[0]
        Ai = Amat(q[0, 0, 3:])
        if name == "point_on_line":
            E = np.stack([par[0, 6:9], par[0, 9:12]], -1)
            np.testing.assert_allclose(loc, E.T @ (Ai.T @ F), atol=1e-13)
            np.testing.assert_allclose(loc, -lam[0], atol=1e-13)
            assert abs((Ai @ np.cross(par[0, 6:9], par[0, 9:12])) @ F) < 1e-13
        else:
            np.testing.assert_allclose(F, loc[0] * (Ai @ par[0, 6:9]), atol=1e-13)
    # orientation lock: a pure moment, Phi_pi'_i^T lam in body-i axes
    ct, par, q, f, spec, ctx = assembled("orientation_lock", rng)
    lam = rng.normal(size=(1, 3))
    J = ct.jacobian_v(par, q, 0.0, f)[0]
    assert np.abs(J[:, :, :3]).max() == 0.0
    np.testing.assert_allclose(ct.reaction_local(par, q, 0.0, f, lam)[0], J[:, 0, 3:].T @ lam[0],
                               atol=1e-13)


# =====================================================================================
# screw: travel = pitch x tracked angle over several turns
# =====================================================================================
def test_screw_travel_is_pitch_times_tracked_angle_over_several_turns():
    rng = np.random.default_rng(46)
    ct = SX.Screw()
    pitches = (0.37, -0.12, 0.05)                   # right- and left-handed
    turns = 3.5
    pars, base = [], []
    for a in pitches:
        qi, ui, si = rand_pose(rng), rand_unit(rng), rng.normal(size=3)
        qj = rand_pose(rng)
        spec = {"body_i": "b1", "body_j": "b2", "point_i": tuple(si), "point_j": None,
                "axis_i": tuple(ui), "axis_j": None, "pitch": a}
        par, _ = ct.pack(spec, T.FakeCtx({"b1": qi, "b2": qj}))
        pars.append(par)
        base.append((qi, qj, ui, si))
    par = np.array(pars)
    f = np.zeros((len(pitches), 0, 3))
    np.testing.assert_allclose(par[:, ct.TRACK], par[:, 23], atol=0)

    def q_at(theta):
        """body j screwed by theta about / along the axis through P_i (global)."""
        q = np.zeros((len(pitches), 2, 7))
        for e, ((qi, qj, ui, si), a) in enumerate(zip(base, pitches, strict=True)):
            Ai = Amat(qi[3:])
            u, P = Ai @ ui, qi[:3] + Ai @ si
            R = Amat(qexp(theta[e] * u))
            q[e, 0] = qi
            q[e, 1, :3] = P + R @ (qj[:3] - P) + a * theta[e] * u
            q[e, 1, 3:] = qmul(qexp(theta[e] * u), qj[3:])
        return q
    ts = np.linspace(0.0, 1.0, 71)
    sign = np.array([1.0, -1.0, 1.0])
    theta0 = par[:, 23].copy()
    for t in ts:                                    # 3.5 turns (right, left, right)
        th = sign * turns * 2 * math.pi * t
        q = q_at(th)
        assert np.abs(ct.phi(par, q, 0.0, f)).max() < 1e-10
        np.testing.assert_allclose(par[:, ct.TRACK] - theta0, th, atol=1e-10)
    # at 3.5 turns: the angle is not wrapped and the axial travel is pitch x 7 pi
    np.testing.assert_allclose(par[:, ct.TRACK] - theta0, sign * 7 * math.pi, atol=1e-10)
    for e, ((qi, qj, ui, si), a) in enumerate(zip(base, pitches, strict=True)):
        u = Amat(qi[3:]) @ ui
        Pj0 = qj[:3] + Amat(qj[3:]) @ par[e, 3:6]
        Pj = q[e, 1, :3] + Amat(q[e, 1, 3:]) @ par[e, 3:6]
        assert u @ (Pj - Pj0) == pytest.approx(a * sign[e] * 7 * math.pi, abs=1e-10)
    # the same pose seen without the tracked turns violates the screw row
    fresh = par.copy()
    fresh[:, ct.TRACK] = theta0
    bad = ct.phi(fresh, q, 0.0, f)[:, 4]
    assert np.all(np.abs(bad) > 0.1 * np.abs(pitches))
    for t in ts[::-1]:                              # and back
        th = sign * turns * 2 * math.pi * t
        assert np.abs(ct.phi(par, q_at(th), 0.0, f)).max() < 1e-10
        np.testing.assert_allclose(ct.angle(par, q_at(th)) - theta0, th, atol=1e-10)


# =====================================================================================
# the checkers catch wrong signs (mutation tests)
# =====================================================================================
class _ScrewWrongPitchSign(SX.Screw):
    """Jacobian and gamma with the wrong sign of the pitch term (phi unchanged)."""

    def _rows(self, par, K, f):
        p = par.copy()
        p[:, 21] *= -1.0
        return super()._rows(p, K, f)


class _RevCylFlipJ(SX.RevoluteCylindrical):
    def jacobian_v(self, par, qb, t, f):
        J = super().jacobian_v(par, qb, t, f).copy()
        J[:, 1:, 1, 3:] *= -1.0            # wrong sign of the body-j omega' block of p2
        return J


class _EPWrongGamma(SX.RelativeRotationEP):
    def _drive(self, par, f):
        c, cd, cdd = super()._drive(par, f)
        th, thd = f[:, 0, 0], f[:, 0, 1]
        return c, cd, cdd + 0.5 * np.cos(0.5 * th)[:, None] * (thd * thd)[:, None]  # -¼ -> +¼


class _LockWrongSign(SX.OrientationLock):
    def gamma_v(self, par, qb, vb, t, f):
        K = SKIN.Kin(qb, vb)
        q0 = par[:, 0:4] / np.linalg.norm(par[:, 0:4], axis=1, keepdims=True)
        R = SKIN.relative_ep(K, q0)
        wi, wj = K.w[:, 0], K.w[:, 1]
        # the quadratic term with the ¼(|w_i|²+|w_j|²) vec(w) part of the wrong sign
        return -(R.h + 0.5 * (np.sum(wi * wi, -1) + np.sum(wj * wj, -1))[:, None] * R.v)


def test_checkers_detect_mutations():
    ct, G, rng = make_group("screw", 21)
    for check in (T.err_jacobian_v, T.err_jacobian_ep, T.err_velocity):
        assert check(ct, G, np.random.default_rng(0)) < 1e-8
        assert check(_ScrewWrongPitchSign(), G, np.random.default_rng(0)) > 1e-3, check
    assert T.err_gamma(ct, G, np.random.default_rng(1)) < 1e-6
    assert T.err_gamma(_ScrewWrongPitchSign(), G, np.random.default_rng(1)) > 1e-4

    ct, G, rng = make_group("revolute_cylindrical", 22)
    assert T.err_jacobian_v(ct, G, np.random.default_rng(2)) < 1e-8
    assert T.err_jacobian_v(_RevCylFlipJ(), G, np.random.default_rng(2)) > 1e-3
    assert T.err_jacobian_ep(_RevCylFlipJ(), G, np.random.default_rng(2)) > 1e-3

    ct, G, rng = make_group("relative_rotation_ep", 23)
    assert T.err_gamma(ct, G, np.random.default_rng(3)) < 1e-6
    assert T.err_gamma(_EPWrongGamma(), G, np.random.default_rng(3)) > 1e-4
    assert T.err_gamma(_EPWrongGamma(), G, np.random.default_rng(3), form="q") > 1e-4

    ct, G, rng = make_group("orientation_lock", 24)
    assert T.err_gamma(ct, G, np.random.default_rng(4)) < 1e-6
    assert T.err_gamma(_LockWrongSign(), G, np.random.default_rng(4)) > 1e-4


# =====================================================================================
# in a Model / System (registered at run time unless the built-in plugin has them)
# =====================================================================================
class _CompositesPlugin:
    @mbcore.hookimpl
    def mbcore_constraint_types(self):
        return list(SX.COMPOSITE_TYPES)


@pytest.fixture(scope="module")
def registered():
    from mbcore.plugins import get_plugin_manager, register, registry
    if registry().has("constraint", "screw", "spatial"):
        yield                                  # already provided (built-in plugin)
        return
    plugin = _CompositesPlugin()
    register(plugin, name="test_spatial_composites")
    try:
        yield
    finally:
        get_plugin_manager().unregister(name="test_spatial_composites")


MINIMAL = {
    "screw": dict(point_i=[0.1, 0.2, 0.3], axis_i=[0, 0, 1], pitch=0.05),
    "revolute_cylindrical": dict(point_i=[0.1, 0.2, 0.3], axis_i=[1, 0, 0],
                                 axis_j=[0, 0, 1]),
    "point_on_line": dict(point_i="P", axis_i=[0, 1, 1]),
    "point_on_plane": dict(point_i=[0.1, 0.2, 0.3], normal_i=[0, 0, 1]),
    "relative_rotation_ep": dict(function=0.4, zero="initial"),
    "orientation_lock": dict(body_i="b2"),
}
HOLDS = {"screw", "revolute_cylindrical", "point_on_line", "point_on_plane",
         "orientation_lock"}


@pytest.mark.parametrize("name", NAMES)
def test_every_type_validates_and_compiles_in_a_model(name, registered):
    from mbcore.model import Model
    m = Model()
    m.set_dimensions(3)
    m.add_body("b1", inertia=[1, 1, 1], position=[0.0, 0.0, 0.0])
    m.add_body("b2", inertia=[1, 1, 1], position=[1.0, 0.5, 0.2],
               orientation={"axis": [1, 0, 0], "angle": 40, "unit": "deg"})
    m.add_point("P", "b1", [0.3, 0.1, 0.0])
    spec = dict(MINIMAL[name])
    if "body_i" not in spec:
        spec.update(body_i="b1", body_j="b2")
    m.add_joint(name, **spec)
    system = m.compile(kernels="numpy")
    ct = TYPES[name]
    assert system.m == ct.equations + 2
    st = system.initial_state()
    phi = np.asarray(system.phi(st.q, 0.0))[:ct.equations]
    if name in HOLDS:
        assert np.abs(phi).max() < 1e-12
    else:   # zero: initial -> w0 = 1: Phi = 1 - cos(0.2), Jacobian 0 (theta = 0 caveat)
        assert phi[0] == pytest.approx(1 - math.cos(0.2), abs=1e-14)
    J = np.asarray(system.jacobian(st.q, 0.0))[:ct.equations]
    assert np.all(np.isfinite(J))
    if name in HOLDS:
        assert np.abs(J).max() > 0.1


def test_screw_driven_through_several_turns_in_a_system(registered):
    """A nut on a screw along the global z axis, turned by a rotation driver
    theta = 3t over 6 s (almost 3 turns): z = pitch * theta, p = rotation about z."""
    from mbcore.model import Model
    pitch = 0.02
    m = Model()
    m.set_dimensions(3)
    m.add_body("nut", mass=1, inertia=[1, 1, 1], position=[0.0, 0.0, 0.1])
    m.add_joint("screw", name="thread", body_i="ground", body_j="nut",
                point_i=[0, 0, 0.1], axis_i=[0, 0, 1], pitch=pitch)
    m.add_driver("rotation_driver", name="drive", body_i="ground", body_j="nut",
                 axis_i=[0, 0, 1], function={"polynomial": [0.0, 3.0]})
    res = mbcore.run(m, settings={"analysis": "kinematic", "t_end": 6.0,
                                  "output_step": 0.1})
    th = 3.0 * res.t
    assert th[-1] > 5.5 * math.pi
    np.testing.assert_allclose(res["q/nut.z"], 0.1 + pitch * th, atol=1e-10)
    np.testing.assert_allclose(res["q/nut.x"], 0.0, atol=1e-10)
    np.testing.assert_allclose(res["q/nut.y"], 0.0, atol=1e-10)
    p = np.stack([res[f"q/nut.p{k}"] for k in range(4)], -1)
    pe = np.stack([np.cos(th / 2), 0 * th, 0 * th, np.sin(th / 2)], -1)
    np.testing.assert_allclose(np.abs(np.sum(p * pe, -1)), 1.0, atol=1e-10)
    # velocity and acceleration level: zdot = pitch * thetadot, zddot = 0
    np.testing.assert_allclose(res["qd/nut.z"], 3.0 * pitch, atol=1e-9)
    np.testing.assert_allclose(res["qdd/nut.z"], 0.0, atol=1e-8)


def test_relative_rotation_ep_drives_a_crank_in_a_system(registered):
    """Eq 7.18 driver on a revolute crank: theta = 0.5 + t for t in [0, 2.5]
    (through theta = pi, never 0): p = ±[cos(theta/2), 0, 0, sin(theta/2)]; the sense
    of rotation is the one of the initial configuration (only |theta| is driven)."""
    from mbcore.model import Model
    m = Model()
    m.set_dimensions(3)
    m.add_body("crank", mass=1, inertia=[1, 1, 1], position=[0.0, 0.0, 0.0],
               orientation={"axis": [0, 0, 1], "angle": 0.5, "unit": "rad"})
    m.add_joint("revolute", name="pivot", body_i="ground", body_j="crank",
                point_i=[0, 0, 0], axis_i=[0, 0, 1])
    m.add_driver("relative_rotation_ep", name="drive", body_i="ground", body_j="crank",
                 function={"polynomial": [0.5, 1.0]})
    res = mbcore.run(m, settings={"analysis": "kinematic", "t_end": 2.5,
                                  "output_step": 0.05})
    th = 0.5 + res.t
    p = np.stack([res[f"q/crank.p{k}"] for k in range(4)], -1)
    pe = np.stack([np.cos(th / 2), 0 * th, 0 * th, np.sin(th / 2)], -1)
    np.testing.assert_allclose(np.abs(np.sum(p * pe, -1)), 1.0, atol=1e-9)
