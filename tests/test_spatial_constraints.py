"""Spatial constraint types (mbplugins.spatial.constraints; spec/spatial.md §2).

Every type is checked on random configurations, vectorised groups (ne >= 3, some
elements attached to the ground):

* ``jacobian_v`` against finite differences of ``phi`` along exact rotations
  ``p ⊗ exp(s ω'/2)`` (body-frame angular velocity) and translations;
* the Euler-parameter ``jacobian()`` against finite differences along directions
  tangent to the unit sphere;
* ``jacobian_v v - nu`` against dPhi/dt along random smooth trajectories
  (``p(t) = u(t)/|u(t)|``), drivers with time-dependent functions;
* ``gamma_v`` and ``gamma()`` against d²Phi/dt² along the same trajectories;
* relative DOF of the joints at assembled configurations, pack defaults, joint
  reactions, continuous angle tracking of the rotation driver, and mutation tests
  showing that the checkers detect wrong Jacobians / gammas.
"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from mbcore.errors import ModelError
from mbcore.elements.functions import parse_function
from mbcore.elements.rotations import A as Amat, L as Lmat
from mbplugins.spatial import constraints as SC

GROUND = "ground"
GROUND_Q = np.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
DRIVE = "0.3 + 0.5*t + 0.2*sin(t)"


# =====================================================================================
# helpers
# =====================================================================================
def unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def rand_unit(rng, n=3):
    return unit(rng.normal(size=n))


def qmul(a, b):
    return np.concatenate([[a[0] * b[0] - a[1:] @ b[1:]],
                           a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:])])


def qexp(w):
    """Euler parameters of the rotation vector w."""
    a = float(np.linalg.norm(w))
    if a == 0.0:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[math.cos(a / 2)], math.sin(a / 2) * np.asarray(w) / a])


class FakeCtx:
    """What pack() reads: initial coordinates and poses of bodies."""

    def __init__(self, poses, path="joints[0]"):
        self.poses = dict(poses)
        self.path = path

    def initial(self, name):
        if name == GROUND:
            return GROUND_Q.copy()
        return np.array(self.poses[name], dtype=float)

    def pose(self, name):
        q = self.initial(name)
        return q[:3].copy(), Amat(q[3:7])


def rand_pose(rng):
    return np.concatenate([rng.normal(size=3), rand_unit(rng, 4)])


def jets(fns, t):
    """f (ne, n_fun, 3) of per-element function lists at t."""
    ne = len(fns)
    nf = len(fns[0]) if ne else 0
    out = np.zeros((ne, nf, 3))
    for e, fl in enumerate(fns):
        for k, fn in enumerate(fl):
            out[e, k] = fn.jet(t)
    return out


class Group:
    """A packed group: type instance, par (ne, n_par), per-element functions, ground mask."""

    def __init__(self, ct, specs, poses):
        self.ct = ct
        self.specs = specs
        pars, fns, gmask = [], [], []
        for k, (spec, pz) in enumerate(zip(specs, poses, strict=True)):
            par, fl = ct.pack(spec, FakeCtx(pz, f"joints[{k}]"))
            assert len(par) == ct.n_par and len(fl) == ct.n_fun
            pars.append(par)
            fns.append(list(fl))
            gmask.append([spec[b] == GROUND for b in ct.bodies])
        self.par = np.array(pars, dtype=float)
        self.fns = fns
        self.ground = np.array(gmask, dtype=bool)
        self.ne, self.nb = self.ground.shape

    def f(self, t):
        return jets(self.fns, t)


class Trajectory:
    """Smooth motion of every (element, body): r(t) trigonometric/polynomial,
    p(t) = u(t)/|u(t)|; ground blocks constant.  Exact r, p and their first and
    second derivatives, omega' = 2 L p', omega'dot = 2 L p''."""

    def __init__(self, rng, ground, scale=1.0):
        ne, nb = ground.shape
        self.ground = ground
        sh = (ne, nb)
        self.r0, self.r1, self.r2 = (rng.normal(size=sh + (3,)) for _ in range(3))
        self.wr, self.ph = rng.uniform(0.5, 2.0, sh + (3,)), rng.uniform(0, 6, sh + (3,))
        self.u0 = rng.normal(size=sh + (4,))
        self.u0 /= np.linalg.norm(self.u0, axis=-1, keepdims=True)
        self.u1 = 0.7 * scale * rng.normal(size=sh + (4,))
        self.u2 = 0.7 * scale * rng.normal(size=sh + (4,))
        self.wu, self.pu = rng.uniform(0.5, 2.0, sh + (4,)), rng.uniform(0, 6, sh + (4,))

    def _u(self, t):
        s = np.sin(self.wu * t + self.pu)
        c = np.cos(self.wu * t + self.pu)
        u = self.u0 + self.u1 * t + self.u2 * s
        ud = self.u1 + self.u2 * self.wu * c
        udd = -self.u2 * self.wu ** 2 * s
        return u, ud, udd

    def state(self, t):
        """q (ne, nb, 7), qd, qdd, v = [rd, w'], vd = [rdd, w'd]."""
        s = np.sin(self.wr * t + self.ph)
        c = np.cos(self.wr * t + self.ph)
        r = self.r0 + self.r1 * t + self.r2 * s
        rd = self.r1 + self.r2 * self.wr * c
        rdd = -self.r2 * self.wr ** 2 * s
        u, ud, udd = self._u(t)
        n = np.linalg.norm(u, axis=-1, keepdims=True)
        nd = np.sum(u * ud, -1, keepdims=True) / n
        ndd = (np.sum(ud * ud, -1, keepdims=True) + np.sum(u * udd, -1, keepdims=True)) / n \
            - nd ** 2 / n
        p = u / n
        pd = ud / n - u * nd / n ** 2
        pdd = udd / n - 2 * ud * nd / n ** 2 - u * ndd / n ** 2 + 2 * u * nd ** 2 / n ** 3
        q = np.concatenate([r, p], -1)
        qd = np.concatenate([rd, pd], -1)
        qdd = np.concatenate([rdd, pdd], -1)
        g = self.ground
        q[g], qd[g], qdd[g] = GROUND_Q, 0.0, 0.0
        L = Lmat(q[..., 3:7])
        v = np.concatenate([qd[..., :3], 2 * np.einsum("ebij,ebj->ebi", L, qd[..., 3:])], -1)
        vd = np.concatenate([qdd[..., :3], 2 * np.einsum("ebij,ebj->ebi", L, qdd[..., 3:])], -1)
        return q, qd, qdd, v, vd


def displace(q, v, s, ground):
    """q moved by s*v: r + s rd, p ⊗ exp(s w'/2) (body-frame rotation)."""
    out = q.copy()
    ne, nb = ground.shape
    for e in range(ne):
        for b in range(nb):
            if ground[e, b]:
                continue
            out[e, b, :3] = q[e, b, :3] + s * v[e, b, :3]
            out[e, b, 3:] = qmul(q[e, b, 3:], qexp(s * v[e, b, 3:]))
    return out


def d1(fun, h):
    return (-fun(2 * h) + 8 * fun(h) - 8 * fun(-h) + fun(-2 * h)) / (12 * h)


def d2(fun, h):
    return (-fun(2 * h) + 16 * fun(h) - 30 * fun(0.0) + 16 * fun(-h) - fun(-2 * h)) / (12 * h * h)


def relerr(a, b):
    return float(np.max(np.abs(a - b)) / max(1.0, float(np.max(np.abs(b)))))


# -------------------------------------------------------------------- the checkers
def err_jacobian_v(ct, G, rng, t=0.4):
    q = Trajectory(rng, G.ground).state(0.3)[0]
    v = rng.normal(size=(G.ne, G.nb, 6))
    v[G.ground] = 0.0
    f = G.f(t)
    Jv = np.einsum("embc,ebc->em", ct.jacobian_v(G.par, q, t, f), v)
    fd = d1(lambda s: ct.phi(G.par, displace(q, v, s, G.ground), t, f), 2e-4)
    return relerr(fd, Jv)


def err_jacobian_ep(ct, G, rng, t=0.4):
    q = Trajectory(rng, G.ground).state(0.7)[0]
    dq = rng.normal(size=(G.ne, G.nb, 7))
    p = q[..., 3:]
    dq[..., 3:] -= np.sum(dq[..., 3:] * p, -1, keepdims=True) * p     # tangent: p.dp = 0
    dq[G.ground] = 0.0
    f = G.f(t)

    def path(s):
        qs = q + s * dq
        qs[..., 3:] /= np.linalg.norm(qs[..., 3:], axis=-1, keepdims=True)
        return ct.phi(G.par, qs, t, f)
    J = ct.jacobian(G.par, q, t, f)
    assert J.shape == (G.ne, ct.equations, G.nb, 7)
    return relerr(d1(path, 2e-4), np.einsum("embc,ebc->em", J, dq))


def err_velocity(ct, G, rng, t0=0.35):
    tr = Trajectory(rng, G.ground)
    q, qd, qdd, v, vd = tr.state(t0)
    f = G.f(t0)
    lhs = np.einsum("embc,ebc->em", ct.jacobian_v(G.par, q, t0, f), v) - ct.nu(G.par, q, t0, f)
    fd = d1(lambda h: ct.phi(G.par, tr.state(t0 + h)[0], t0 + h, G.f(t0 + h)), 2e-4)
    return relerr(fd, lhs)


def err_gamma(ct, G, rng, t0=0.35, form="v"):
    tr = Trajectory(rng, G.ground)
    q, qd, qdd, v, vd = tr.state(t0)
    f = G.f(t0)
    if form == "v":
        rhs = (np.einsum("embc,ebc->em", ct.jacobian_v(G.par, q, t0, f), vd)
               - ct.gamma_v(G.par, q, v, t0, f))
    else:   # Euler-parameter form: Phi_q qdd - gamma
        rhs = (np.einsum("embc,ebc->em", ct.jacobian(G.par, q, t0, f), qdd)
               - ct.gamma(G.par, q, qd, t0, f))
    fd = d2(lambda h: ct.phi(G.par, tr.state(t0 + h)[0], t0 + h, G.f(t0 + h)), 1e-3)
    return relerr(fd, rhs)


# =====================================================================================
# random element descriptions per type
# =====================================================================================
def _pt(rng):
    return tuple(rng.normal(size=3))


def _ax(rng):
    return tuple(rand_unit(rng))


def _fn(rng, driver):
    return parse_function(DRIVE if driver else float(rng.uniform(0.5, 2.0)), "function")


def spec_for(name, rng, bi, bj, k):
    """A random valid element of type ``name`` between bi and bj (k: variant)."""
    alt = k % 2 == 1          # odd elements: give the optional keys explicitly
    s = {"body_i": bi, "body_j": bj}
    if name in ("spherical", "fixed"):
        s.update(point_i=_pt(rng), point_j=_pt(rng) if alt else None)
    elif name == "universal":
        s.update(point_i=_pt(rng), point_j=_pt(rng) if alt else None,
                 axis_i=_ax(rng), axis_j=_ax(rng))
    elif name in ("revolute", "cylindrical", "translational", "planar"):
        s.update(point_i=_pt(rng), point_j=_pt(rng) if alt else None,
                 axis_i=_ax(rng), axis_j=_ax(rng) if alt else None)
    elif name in ("distance", "spherical_spherical"):
        s.update(point_i=_pt(rng), point_j=_pt(rng),
                 length=float(rng.uniform(0.5, 2)) if alt else None)
    elif name == "distance_driver":
        s.update(point_i=_pt(rng), point_j=_pt(rng), function=_fn(rng, True))
    elif name == "spherical_revolute":
        s.update(point_i=_pt(rng), point_j=_pt(rng), axis_j=_ax(rng),
                 length=float(rng.uniform(0.5, 2)) if alt else None)
    elif name == "revolute_revolute":
        s.update(point_i=_pt(rng), point_j=_pt(rng), axis_i=_ax(rng), axis_j=_ax(rng),
                 length=float(rng.uniform(0.5, 2)) if alt else None)
    elif name == "point_coordinate":
        s = {"body": bi if bi != GROUND else bj, "coordinate": "xyz"[k % 3],
             "point": _pt(rng), "function": _fn(rng, True) if k % 3 != 2 else None}
    elif name == "angle_driver":
        s.update(vector_i=_ax(rng), vector_j=_ax(rng),
                 function=parse_function("1.2 + 0.5*t + 0.2*sin(t)", "function"))
    elif name == "rotation_driver":
        s.update(axis_i=_ax(rng), reference_i=_ax(rng) if alt else None,
                 reference_j=_ax(rng) if alt else None, function=_fn(rng, True))
    elif name == "perpendicular":
        s.update(vector_i=_ax(rng), vector_j=_ax(rng))
    elif name == "parallel":
        s.update(vector_i=_ax(rng), vector_j=_ax(rng) if alt else None)
    else:  # pragma: no cover
        raise KeyError(name)
    return s


TYPES = {cls.name: cls for cls in SC.CONSTRAINT_TYPES}
#: (body_i, body_j) of the elements of a test group: free-free twice, then ground
PAIRS = [("b1", "b2"), ("b1", "b2"), ("b1", GROUND), (GROUND, "b2")]


def make_group(name, seed, pairs=PAIRS):
    rng = np.random.default_rng(seed)
    ct = TYPES[name]()
    specs, poses = [], []
    for k, (bi, bj) in enumerate(pairs):
        if name == "fixed" and bi == GROUND:
            bi, bj = bj, GROUND
        specs.append(spec_for(name, rng, bi, bj, k))
        poses.append({"b1": rand_pose(rng), "b2": rand_pose(rng)})
    return ct, Group(ct, specs, poses), rng


NAMES = sorted(TYPES)


# =====================================================================================
# the catalogue
# =====================================================================================
def test_catalogue_metadata():
    names = [c.name for c in SC.CONSTRAINT_TYPES]
    assert len(set(names)) == len(names)
    for need in ("spherical", "universal", "revolute", "cylindrical", "translational",
                 "spherical_spherical", "distance", "spherical_revolute",
                 "revolute_revolute", "point_coordinate", "distance_driver",
                 "angle_driver", "rotation_driver", "fixed", "perpendicular", "parallel"):
        assert need in names
    for cls in SC.CONSTRAINT_TYPES:
        ct = cls()
        assert cls.body_kind == "spatial" and cls.kernel is not None
        assert cls.category in ("joint", "driver", "constraint")
        assert len(ct.equation_labels()) == cls.equations
        assert cls.description
        for b in cls.bodies:
            assert cls.params[b].kind == "body"


@pytest.mark.parametrize("name", NAMES)
def test_shapes_and_vectorisation(name):
    """Group results have the declared shapes and equal element-by-element results."""
    ct, G, rng = make_group(name, 11)
    tr = Trajectory(rng, G.ground)
    q, qd, qdd, v, vd = tr.state(0.2)
    f = G.f(0.2)
    m = ct.equations
    full = {"phi": ct.phi(G.par.copy(), q, 0.2, f),
            "jv": ct.jacobian_v(G.par, q, 0.2, f),
            "jq": ct.jacobian(G.par, q, 0.2, f),
            "nu": ct.nu(G.par, q, 0.2, f),
            "gv": ct.gamma_v(G.par, q, v, 0.2, f),
            "gq": ct.gamma(G.par, q, qd, 0.2, f)}
    shapes = {"phi": (G.ne, m), "jv": (G.ne, m, G.nb, 6), "jq": (G.ne, m, G.nb, 7),
              "nu": (G.ne, m), "gv": (G.ne, m), "gq": (G.ne, m)}
    for k, a in full.items():
        assert a.shape == shapes[k], k
        assert np.all(np.isfinite(a)), k
    for e in range(G.ne):
        sl = slice(e, e + 1)
        one = {"phi": ct.phi(G.par[sl].copy(), q[sl], 0.2, f[sl]),
               "jv": ct.jacobian_v(G.par[sl], q[sl], 0.2, f[sl]),
               "jq": ct.jacobian(G.par[sl], q[sl], 0.2, f[sl]),
               "nu": ct.nu(G.par[sl], q[sl], 0.2, f[sl]),
               "gv": ct.gamma_v(G.par[sl], q[sl], v[sl], 0.2, f[sl]),
               "gq": ct.gamma(G.par[sl], q[sl], qd[sl], 0.2, f[sl])}
        for k in full:
            np.testing.assert_allclose(one[k][0], full[k][e], rtol=1e-13, atol=1e-13)
    # the Euler-parameter Jacobian keeps the r columns of the omega' form
    assert np.all(full["jq"][..., :3] == full["jv"][..., :3])


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [1, 2])
def test_jacobian_v_finite_differences(name, seed):
    ct, G, rng = make_group(name, seed)
    assert err_jacobian_v(ct, G, rng) < 1e-8


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [3, 4])
def test_euler_jacobian_finite_differences(name, seed):
    ct, G, rng = make_group(name, seed)
    # 4th-order differences (h = 2e-4) along the normalised path: truncation
    # h^4 |f^(5)| / 30, worst over the types 1.8e-9 (rotation_driver); 1e-6
    assert err_jacobian_ep(ct, G, rng) < 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [5, 6])
def test_velocity_equation_along_trajectories(name, seed):
    """Phi_v v - nu = dPhi/dt (drivers: nu = c' terms)."""
    ct, G, rng = make_group(name, seed)
    assert err_velocity(ct, G, rng) < 1e-8


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [7, 8])
def test_gamma_v_along_trajectories(name, seed):
    """d²Phi/dt² = Phi_v vdot - gamma#."""
    ct, G, rng = make_group(name, seed)
    assert err_gamma(ct, G, rng, form="v") < 1e-6


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("seed", [9, 10])
def test_gamma_euler_along_trajectories(name, seed):
    """d²Phi/dt² = Phi_q qdd - gamma (Euler-parameter form, projected Jacobian)."""
    ct, G, rng = make_group(name, seed)
    # 4th-order second differences (h = 1e-3): truncation h^4 |f^(6)| / 90 and rounding
    # ~5 eps |Phi| / h^2, worst over the types 2e-8 (point_on_line); 1e-5
    assert err_gamma(ct, G, rng, form="q") < 1e-5


def test_euler_jacobian_is_projected():
    """Phi_p p = 0 (variant P of spec §2.1)."""
    ct, G, rng = make_group("revolute", 12)
    q = Trajectory(rng, G.ground).state(0.1)[0]
    J = ct.jacobian(G.par, q, 0.0, G.f(0.0))
    assert np.abs(np.einsum("embc,ebc->emb", J[..., 3:], q[..., 3:])).max() < 1e-13


# =====================================================================================
# the checkers can fail (mutation sensitivity)
# =====================================================================================
class _FlipJ(SC.Spherical):
    def jacobian_v(self, par, qb, t, f):
        J = super().jacobian_v(par, qb, t, f).copy()
        J[:, :, 1, 3:] *= -1.0            # wrong sign of the body-j omega' block
        return J


class _ScaleGamma(SC.Revolute):
    def gamma_v(self, par, qb, vb, t, f):
        g = super().gamma_v(par, qb, vb, t, f).copy()
        g[:, 3] *= 1.01                   # a 1 % error in one n1 row
        return g


class _NoDriverNu(SC.DistanceDriver):
    def nu(self, par, qb, t, f):
        return np.zeros((par.shape[0], 1))


class _LocalH(SC.Fixed):
    def gamma_v(self, par, qb, vb, t, f):
        g = super().gamma_v(par, qb, vb, t, f).copy()
        g[:, 3:] *= 0.5                   # wrong quadratic term of the ep rows
        return g


def test_checkers_detect_mutations():
    ct, G, rng = make_group("spherical", 21)
    assert err_jacobian_v(ct, G, np.random.default_rng(0)) < 1e-8
    bad = _FlipJ()
    assert err_jacobian_v(bad, G, np.random.default_rng(0)) > 1e-3
    assert err_jacobian_ep(bad, G, np.random.default_rng(0)) > 1e-3
    assert err_velocity(bad, G, np.random.default_rng(0)) > 1e-3

    ct, G, rng = make_group("revolute", 22)
    assert err_gamma(ct, G, np.random.default_rng(1)) < 1e-6
    assert err_gamma(_ScaleGamma(), G, np.random.default_rng(1)) > 1e-5
    assert err_gamma(_ScaleGamma(), G, np.random.default_rng(1), form="q") > 1e-5

    ct, G, rng = make_group("distance_driver", 23)
    assert err_velocity(_NoDriverNu(), G, np.random.default_rng(2)) > 1e-3

    ct, G, rng = make_group("fixed", 24)
    assert err_gamma(ct, G, np.random.default_rng(3)) < 1e-6
    assert err_gamma(_LocalH(), G, np.random.default_rng(3)) > 1e-4


# =====================================================================================
# assembled configurations: defaults, relative DOF, reactions
# =====================================================================================
def assembled(name, rng, bi="b1", bj="b2"):
    """An element whose pack defaults make it hold at the initial poses."""
    poses = {"b1": rand_pose(rng), "b2": rand_pose(rng)}
    ctx = FakeCtx(poses)
    s = {"body_i": bi, "body_j": bj}
    ri, Ai = ctx.pose(bi)
    rj, Aj = ctx.pose(bj)
    ai = rand_unit(rng)
    if name in ("spherical", "fixed"):
        s.update(point_i=_pt(rng), point_j=None)
    elif name == "universal":
        perp = unit(np.cross(ai, rng.normal(size=3)))
        s.update(point_i=_pt(rng), point_j=None, axis_i=tuple(ai),
                 axis_j=tuple(Aj.T @ Ai @ perp))
    elif name in ("revolute", "cylindrical", "translational", "planar"):
        s.update(point_i=_pt(rng), point_j=None, axis_i=tuple(ai), axis_j=None)
    elif name in ("spherical_spherical", "distance"):
        s.update(point_i=_pt(rng), point_j=_pt(rng), length=None)
    elif name == "spherical_revolute":
        sj = rng.normal(size=3)
        d = rj + Aj @ sj - (ri + Ai @ np.zeros(3))
        uj = unit(np.cross(d, rng.normal(size=3)))          # axis ⊥ link
        s.update(point_i=(0.0, 0.0, 0.0), point_j=tuple(sj), axis_j=tuple(Aj.T @ uj))
    elif name == "revolute_revolute":
        si, sj = rng.normal(size=3), rng.normal(size=3)
        d = rj + Aj @ sj - ri - Ai @ si
        ui = unit(np.cross(d, rng.normal(size=3)))
        uj = unit(np.cross(d, rng.normal(size=3)))
        s.update(point_i=tuple(si), point_j=tuple(sj), axis_i=tuple(Ai.T @ ui),
                 axis_j=tuple(Aj.T @ uj))
    elif name == "perpendicular":
        perp = unit(np.cross(ai, rng.normal(size=3)))
        s.update(vector_i=tuple(ai), vector_j=tuple(Aj.T @ Ai @ perp))
    elif name == "parallel":
        s.update(vector_i=tuple(ai), vector_j=None)
    ct = TYPES[name]()
    par, fl = ct.pack(s, ctx)
    q = np.array([[ctx.initial(bi), ctx.initial(bj)]])
    return ct, np.array([par], float), q, jets([fl], 0.0), s, ctx


RELATIVE_DOF = {"spherical": 3, "universal": 2, "revolute": 1, "cylindrical": 2, "planar": 3,
                "translational": 1, "fixed": 0, "spherical_spherical": 5,
                "spherical_revolute": 4, "revolute_revolute": 2, "perpendicular": 5,
                "parallel": 4}


@pytest.mark.parametrize("name", sorted(RELATIVE_DOF))
@pytest.mark.parametrize("bodies", [("b1", "b2"), (GROUND, "b2"), ("b1", GROUND)])
def test_defaults_assemble_and_relative_dof(name, bodies):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{bodies}".encode()))
    for _ in range(3):
        ct, par, q, f, spec, ctx = assembled(name, rng, *bodies)
        assert np.abs(ct.phi(par, q, 0.0, f)).max() < 1e-12
        J = ct.jacobian_v(par, q, 0.0, f)[0]
        free = [b for b, nm in enumerate(bodies) if nm != GROUND]
        Jf = np.concatenate([J[:, b, :] for b in free], axis=1)
        rank = np.linalg.matrix_rank(Jf, tol=1e-9 * max(1.0, np.abs(Jf).max()))
        assert rank == ct.equations        # independent rows at the assembled state
        assert 6 - rank == RELATIVE_DOF[name]      # relative DOF of the two bodies


def test_point_j_default_is_point_i_at_assembly():
    rng = np.random.default_rng(5)
    ct, par, q, f, spec, ctx = assembled("revolute", rng)
    ri, Ai = ctx.pose("b1")
    rj, Aj = ctx.pose("b2")
    np.testing.assert_allclose(rj + Aj @ par[0, 3:6], ri + Ai @ np.array(spec["point_i"]),
                               atol=1e-13)
    np.testing.assert_allclose(Aj @ par[0, 6:9], Ai @ np.array(spec["axis_i"]), atol=1e-13)


def test_length_and_value_defaults():
    rng = np.random.default_rng(6)
    poses = {"b1": rand_pose(rng), "b2": rand_pose(rng)}
    ctx = FakeCtx(poses)
    spec = {"body_i": "b1", "body_j": "b2", "point_i": (0.1, 0.2, 0.3),
            "point_j": (-0.2, 0.0, 0.4), "length": None}
    par, fl = SC.Distance().pack(spec, ctx)
    ri, Ai = ctx.pose("b1")
    rj, Aj = ctx.pose("b2")
    L = np.linalg.norm(rj + Aj @ np.array(spec["point_j"]) - ri - Ai @ np.array(spec["point_i"]))
    assert fl[0].jet(3.0) == pytest.approx((L, 0.0, 0.0))
    spec = {"body": "b2", "coordinate": "z", "point": (0.3, -0.1, 0.2), "function": None}
    par, fl = SC.PointCoordinate().pack(spec, ctx)
    z = (rj + Aj @ np.array(spec["point"]))[2]
    assert par[0] == 2 and fl[0].jet(1.0)[0] == pytest.approx(z)
    # coincident points cannot give a default length
    spec = {"body_i": "b1", "body_j": "b2", "point_i": (0.0, 0.0, 0.0),
            "point_j": (0.0, 0.0, 0.0), "length": None}
    with pytest.raises(ModelError, match="length"):
        SC.Distance().pack(spec, FakeCtx({"b1": poses["b1"], "b2": poses["b1"]}))


def test_joint_reactions_in_the_joint_frame():
    rng = np.random.default_rng(7)
    zero = {"revolute": ["nz"], "cylindrical": ["fz", "nz"], "translational": ["fz"],
            "universal": ["nx", "ny"]}
    for name, comps in zero.items():
        for _ in range(3):
            ct, par, q, f, spec, ctx = assembled(name, rng)
            lam = rng.normal(size=(1, ct.equations))
            loc = ct.reaction_local(par, q, 0.0, f, lam)
            assert loc.shape == (1, len(ct.local_labels))
            assert np.abs(loc).max() > 1e-3
            for c in comps:
                assert abs(loc[0, ct.local_labels.index(c)]) < 1e-12, (name, c)
    # spherical: the force on body i in body-i axes is A_i^T lam
    ct, par, q, f, spec, ctx = assembled("spherical", rng)
    lam = rng.normal(size=(1, 3))
    np.testing.assert_allclose(ct.reaction_local(par, q, 0.0, f, lam)[0],
                               Amat(q[0, 0, 3:]).T @ lam[0], atol=1e-13)
    # fixed: force = lam[0:3] (global) in body axes; the moment about the weld point
    # equals Phi_pi'^T lam of the ep rows only
    ct, par, q, f, spec, ctx = assembled("fixed", rng)
    lam = rng.normal(size=(1, 6))
    loc = ct.reaction_local(par, q, 0.0, f, lam)[0]
    np.testing.assert_allclose(loc[:3], Amat(q[0, 0, 3:]).T @ lam[0, :3], atol=1e-13)
    J = ct.jacobian_v(par, q, 0.0, f)[0]
    np.testing.assert_allclose(loc[3:], J[3:, 0, 3:].T @ lam[0, 3:], atol=1e-12)
    # distance: tension = -2 lam |d|
    ct, par, q, f, spec, ctx = assembled("spherical_spherical", rng)
    L = f[0, 0, 0]
    assert ct.reaction_local(par, q, 0.0, f, np.array([[-0.5]]))[0, 0] == pytest.approx(L)


def test_fixed_has_no_spurious_solution_at_half_turn():
    """ep rows: a relative half turn about any axis violates the lock (|Phi| = 1)."""
    rng = np.random.default_rng(8)
    ct, par, q, f, spec, ctx = assembled("fixed", rng, "b1", GROUND)
    q2 = q.copy()
    q2[0, 0, 3:] = qmul(q[0, 0, 3:], qexp(math.pi * rand_unit(rng)))
    q2[0, 0, :3] = q[0, 0, :3] + Amat(q[0, 0, 3:]) @ par[0, :3] \
        - Amat(q2[0, 0, 3:]) @ par[0, :3]          # keep the weld point in place
    phi = ct.phi(par, q2, 0.0, f)[0]
    assert np.abs(phi[:3]).max() < 1e-12
    assert np.linalg.norm(phi[3:]) == pytest.approx(1.0)


# =====================================================================================
# rotation driver: continuous tracking
# =====================================================================================
def _rotating_pair(rng, axis_sign=(1.0, -1.0), turns=3.5, n=60):
    """Two elements, body j turning about the (body-i) axis of a healthy revolute by
    theta(t) = sign * turns * 2 pi * t, t in [0, 1]."""
    ct = SC.RotationDriver()
    pars, fns, base, axes = [], [], [], []
    for k in range(len(axis_sign)):
        qi = rand_pose(rng)
        ui = rand_unit(rng)
        qj = qi.copy()
        qj[:3] += rng.normal(size=3)
        spec = {"body_i": "b1", "body_j": "b2", "axis_i": tuple(ui), "reference_i": None,
                "reference_j": None, "function": parse_function(0.0, "f")}
        par, fl = ct.pack(spec, FakeCtx({"b1": qi, "b2": qj}))
        pars.append(par)
        fns.append(fl)
        base.append((qi, qj))
        axes.append(ui)
    par = np.array(pars)
    ts = np.linspace(0.0, 1.0, n + 1)
    thetas = np.array([[s * turns * 2 * math.pi * t for s in axis_sign] for t in ts])

    def q_at(k):
        q = np.zeros((len(axis_sign), 2, 7))
        for e, ((qi, qj), ui) in enumerate(zip(base, axes, strict=True)):
            q[e, 0] = qi
            q[e, 1, :3] = qj[:3]
            # rotation by theta about the global axis A_i u_i: p_j = qexp(theta u) ⊗ p_j0
            ug = Amat(qi[3:]) @ ui
            q[e, 1, 3:] = qmul(qexp(thetas[k, e] * ug), qj[3:])
        return q
    return ct, par, fns, q_at, thetas, axes


def test_rotation_driver_tracks_several_turns():
    rng = np.random.default_rng(31)
    ct, par, fns, q_at, thetas, axes = _rotating_pair(rng)
    f = jets(fns, 0.0)
    assert np.abs(par[:, ct.TRACK]).max() < 1e-12
    for k in range(len(thetas)):
        phi = ct.phi(par, q_at(k), 0.0, f)[:, 0]
        np.testing.assert_allclose(phi, thetas[k], atol=1e-10)
    assert thetas[-1, 0] == pytest.approx(7 * math.pi)
    np.testing.assert_allclose(par[:, ct.TRACK], thetas[-1], atol=1e-10)
    # and back again
    for k in range(len(thetas) - 1, -1, -1):
        np.testing.assert_allclose(ct.angle(par, q_at(k)), thetas[k], atol=1e-10)


def test_rotation_driver_jacobian_on_a_healthy_revolute():
    """theta_q reduces to Phi_pi_i = -u_i^T, Phi_pi_j = +u_i^T (spec §2.8)."""
    rng = np.random.default_rng(32)
    ct, par, fns, q_at, thetas, axes = _rotating_pair(rng, turns=0.3)
    q = q_at(17)
    J = ct.jacobian_v(par, q, 0.0, jets(fns, 0.0))
    for e, ui in enumerate(axes):
        ug = Amat(q[e, 0, 3:]) @ ui
        np.testing.assert_allclose(J[e, 0, 0, 3:], -ui, atol=1e-12)
        np.testing.assert_allclose(J[e, 0, 1, 3:], Amat(q[e, 1, 3:]).T @ ug, atol=1e-12)
        np.testing.assert_allclose(J[e, 0, :, :3], 0.0, atol=1e-15)


def test_rotation_driver_initial_branch_follows_the_function():
    """A driver starting at c(0) = 4 pi + 0.2 needs no full turns at assembly."""
    rng = np.random.default_rng(33)
    qi, ui = rand_pose(rng), rand_unit(rng)
    qj = qi.copy()
    qj[3:] = qmul(qexp(0.2 * Amat(qi[3:]) @ ui), qi[3:])     # body j turned by 0.2
    ct = SC.RotationDriver()
    fn = parse_function("4*pi + 0.2 + t", "f")
    spec = {"body_i": "b1", "body_j": "b2", "axis_i": tuple(ui), "reference_i": None,
            "reference_j": None, "function": fn}
    ctx = FakeCtx({"b1": qi, "b2": qj})
    q = np.array([[qi, qj]])
    # reference_j defaults to reference_i at assembly: theta = 0 there, on the branch
    # nearest c(0): 4 pi
    par, fl = ct.pack(spec, ctx)
    assert ct.angle(np.array([par]), q)[0] == pytest.approx(4 * math.pi, abs=1e-12)
    # the same body-fixed reference on both bodies: theta = 0.2 (+ 4 pi): Phi = 0
    fi = tuple(par[0:3])
    par, fl = ct.pack({**spec, "reference_i": fi, "reference_j": fi}, ctx)
    assert par[ct.TRACK] == pytest.approx(4 * math.pi + 0.2, abs=1e-12)
    assert ct.phi(np.array([par]), q, 0.0, jets([fl], 0.0))[0, 0] == pytest.approx(0.0, abs=1e-12)


# =====================================================================================
# a real Model's PackContext (identity orientations: no orientation parser needed)
# =====================================================================================
def test_pack_with_a_model_context():
    from mbcore.elements import PackContext
    from mbcore.model import Model
    m = Model()
    m.set_dimensions(3)
    m.add_body("b1", mass=1, inertia=[1, 1, 1], position=[0.5, -0.2, 1.0])
    m.add_body("b2", mass=1, inertia=[1, 1, 1], position=[1.5, 0.3, 0.7])
    ctx = PackContext(m, "joints[0]")
    ct = SC.Revolute()
    spec = {"body_i": "b1", "body_j": "b2", "point_i": (1.0, 0.0, 0.0), "point_j": None,
            "axis_i": (0.0, 0.0, 1.0), "axis_j": None}
    par, _ = ct.pack(spec, ctx)
    np.testing.assert_allclose(par[3:6], [0.0, -0.5, 0.3], atol=1e-14)
    np.testing.assert_allclose(par[6:9], [0.0, 0.0, 1.0], atol=1e-14)
    q = np.array([[ctx.initial("b1"), ctx.initial("b2")]])
    assert np.abs(ct.phi(np.array([par]), q, 0.0, np.zeros((1, 0, 3)))).max() < 1e-14
    # fixed to the ground (the model's ground name)
    par, _ = SC.Fixed().pack({"body_i": "b2", "body_j": m.ground, "point_i": (0, 0, 0),
                              "point_j": None}, ctx)
    np.testing.assert_allclose(par[3:6], [1.5, 0.3, 0.7], atol=1e-14)
    np.testing.assert_allclose(par[6:10], [1, 0, 0, 0], atol=1e-14)


# =====================================================================================
# end to end: a System evaluates the group, the tracking state lives in its par
# =====================================================================================
def test_driven_crank_turns_through_several_revolutions_in_a_system():
    """A crank on a revolute to ground, rotation_driver theta = 2t over 6 s
    (about two turns): p = [cos(theta/2), 0, 0, sin(theta/2)] (up to sign)."""
    import mbcore
    from mbcore.model import Model
    from mbcore.plugins import registry
    # mbplugins registers the spatial types: a missing one is a failure, not a skip
    assert registry().has("constraint", "rotation_driver", "spatial")
    m = Model()
    m.set_dimensions(3)
    m.add_body("crank", mass=1, inertia=[1, 1, 1], position=[0.0, 0.0, 0.0])
    m.add_joint("revolute", name="pivot", body_i="ground", body_j="crank",
                point_i=[0, 0, 0], axis_i=[0, 0, 1])
    m.add_driver("rotation_driver", name="drive", body_i="ground", body_j="crank",
                 axis_i=[0, 0, 1], function={"polynomial": [0.0, 2.0]})
    res = mbcore.run(m, settings={"analysis": "kinematic", "t_end": 6.0,
                                  "output_step": 0.1})
    c = 2.0 * res.t
    assert c[-1] > 3.8 * math.pi
    p = np.stack([res[f"q/crank.p{k}"] for k in range(4)], -1)
    pe = np.stack([np.cos(c / 2), 0 * c, 0 * c, np.sin(c / 2)], -1)
    np.testing.assert_allclose(np.abs(np.sum(p * pe, -1)), 1.0, atol=1e-10)


MINIMAL = {
    "spherical": dict(point_i=[0.1, 0.2, 0.3]),
    "universal": dict(point_i=[0.1, 0.2, 0.3], axis_i=[1, 0, 0], axis_j=[0, 1, 0]),
    "revolute": dict(point_i=[0.1, 0.2, 0.3], axis_i=[0, 0, 2]),
    "cylindrical": dict(point_i=[0.1, 0.2, 0.3], axis_i=[0, 1, 1]),
    "translational": dict(point_i=[0.1, 0.2, 0.3], axis_i=[1, 0, 1]),
    "planar": dict(point_i=[0.1, 0.2, 0.3], axis_i=[0, 0, 1]),
    "distance": dict(point_i=[0.1, 0.2, 0.3]),
    "spherical_spherical": dict(point_j=[0.1, 0.2, 0.3]),
    "spherical_revolute": dict(point_i=[0.1, 0.2, 0.3], axis_j=[0, 0, 1]),
    "revolute_revolute": dict(point_i=[0.1, 0.2, 0.3], axis_i=[0, 0, 1], axis_j=[0, 0, 1]),
    "point_coordinate": dict(body="b1", coordinate="y", point="P"),
    "distance_driver": dict(function="1 + 0.1*t"),
    "angle_driver": dict(vector_i=[1, 0, 0], vector_j=[0, 1, 0], function=1.0),
    "rotation_driver": dict(axis_i=[0, 0, 1], function=0.0),
    "fixed": dict(body_i="b2"),
    "perpendicular": dict(vector_i=[1, 0, 0], vector_j=[0, 1, 0]),
    "parallel": dict(vector_i=[1, 0, 0]),
}
#: types whose defaults hold at the initial configuration of the model below
HOLDS = {"spherical", "universal", "revolute", "cylindrical", "translational", "planar",
         "distance",
         "spherical_spherical", "point_coordinate", "rotation_driver", "fixed",
         "perpendicular", "parallel"}


@pytest.mark.parametrize("name", NAMES)
def test_every_type_validates_and_compiles_in_a_model(name):
    """Model-file schema (vec3 / named points / axis3 / function / ground default)
    through validation, packing by a real PackContext and a System."""
    from mbcore.model import Model
    from mbcore.plugins import registry
    assert registry().has("constraint", name, "spatial"), f"{name!r} is not registered"
    m = Model()
    m.set_dimensions(3)
    m.add_body("b1", inertia=[1, 1, 1], position=[0.0, 0.0, 0.0])
    m.add_body("b2", inertia=[1, 1, 1], position=[1.0, 0.5, 0.2])
    m.add_point("P", "b1", [0.3, 0.1, 0.0])
    spec = dict(MINIMAL[name])
    if "body" not in spec and "body_i" not in spec:
        spec.update(body_i="b1", body_j="b2")
    m.add_joint(name, **spec)
    system = m.compile(kernels="numpy")
    ct = TYPES[name]
    assert system.m == ct.equations + 2                 # + two normalisation rows
    st = system.initial_state()
    phi = system.phi(st.q, 0.0)[:ct.equations]
    if name in HOLDS:
        assert np.abs(phi).max() < 1e-13          # rounding of |q| ~ 1 (observed 2.2e-16)
    J = np.asarray(system.jacobian(st.q, 0.0))[:ct.equations]
    assert np.all(np.isfinite(J)) and np.abs(J).max() > 0.1
