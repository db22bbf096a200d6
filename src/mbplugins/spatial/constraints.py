"""Built-in spatial constraint types (Nikravesh (1988), Ch. 7): joints, composite joints,
absolute constraints and drivers between Euler-parameter bodies.

Every class is the type's schema, its packing and the NumPy *reference*
implementation of the angular-velocity form of :class:`SpatialConstraintType`
(the ω′ body form of Nikravesh (1988), §11.4.2, Eq. 11.48, Table 11.1), vectorised over a group of elements:

* ``phi``        (ne, m)
* ``jacobian_v`` (ne, m, nb, 6): columns ``[Phi_r, Phi_pi']`` acting on ``[rdot, omega']``
* ``gamma_v``    (ne, m): ``gamma#`` (Nikravesh (1988), Eq. 11.48; the same number for
  the ω and ω′ forms)
* ``nu``         (ne, m): ``cdot`` of drivers, 0 otherwise.

The Euler-parameter Jacobian (projected variant P, ``Phi_p = 2 Phi_pi' L``) and its
gamma come from the base class.

How the rows are built.  Every row is an algebraic expression (dot and cross
products, differences) of *body vectors* ``a = A_k a'`` and *body points*
``r_k + A_k s'``.  Each such quantity is carried as a small "jet" with, for a
group, its value ``v``, its ω′-Jacobian ``J`` (ne, ..., nb, 6), its rate ``d`` and
the quadratic velocity term ``h`` of its second derivative
(``d²X/dt² = J vdot + h``).  For a body vector (Nikravesh (1988), Eqs. 6.101-6.102)::

    v = A a',  J = [0, -A ã'],  d = A (ω̃' a'),  h = A (ω̃' ω̃' a')     (h = â#)

a point adds ``r`` (J: ``I`` in the r columns, d: ``rdot``, no h), and products
follow the product rule, e.g. for ``U·W``: ``J = Wᵀ J_U + Uᵀ J_W`` and
``h = Wᵀ Û + Uᵀ Ŵ + 2 U̇ᵀ Ẇ``.  ``gamma# = -h`` (+ the driver terms), which is
exactly the γ# of the basic constraints of Nikravesh (1988), §7.1, Table 11.1
(re-derived; n1: ``-(a_jᵀâ_i + a_iᵀâ_j + 2ȧ_iᵀȧ_j)``, s:
``ŝ_j - ŝ_i``, ss: ``-2dᵀd̂ - 2ḋᵀḋ`` ...).  The relative-orientation rows (ep,
Eq. 7.12) and the atan2 angle (not in the book) have jets of their own (see
``_relative_ep`` and ``_atan2``).

Parameters are in body-fixed coordinates of the body frames; points and axes of
body j default to the body-j coordinates of the body-i ones in the initial
configuration (``ctx.pose``), as the planar revolute's ``point_j`` does.

Compiled kernels: every type names one (``kernel = "spatial_..."``) in
``mbplugins._ext._spatial_constraints`` (ext/plugins/_spatial_constraints.pyx, through
the compiled plugin tier: ``c_kernel``): the same jets in C, from the
same packed parameters and time-function jets, equal to these references to
1e-12 (tests/test_spatial_compiled.py).  A plugin subclass that changes the rows
must set ``kernel = None`` (or its own kernel).
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.elements.base import SpatialConstraintType
from mbcore.errors import ModelError
from mbcore.elements.functions import parse_function
from mbcore.elements.schema import Param

TWO_PI = 2.0 * math.pi
COORD3 = {"x": 0, "y": 1, "z": 2}
_I3 = np.eye(3)


# vectorised helpers and jets: mbplugins.spatial.kinematics (shared with the
# composite joints and the force elements)
from .kinematics import (mtv as _mtv, cross as _cross, rotate as _rotate, Kin as _Kin, body_vector as _body_vector, body_point as _body_point, sub as _sub, lin as _lin, shift as _shift, vdot as _vdot, vcross as _vcross, component as _component, atan2 as _atan2, relative_ep as _relative_ep, stack as _stack, v3 as _v3, unit as _unit, perp_pair as _perp_pair, map_point as _map_point, joint_points as _joint_points, map_dir as _map_dir, global_point as _global_point, q_from_A as _q_from_A, length_default as _length_default)



# =====================================================================================
# base class
# =====================================================================================
class _SpatialBase(SpatialConstraintType):
    """Rows from ``_rows(par, K, f)`` (a list of jets); drivers add
    ``_drive(par, f) -> (c, cdot, cddot)`` (each (ne, m)): ``Phi = rows - c``,
    ``nu = cdot``, ``gamma# = -h + cddot`` (any ``Phi0(q) - c(t)``: Nikravesh (1988),
    §3.2.2, §7.2.4)."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    body_kind = "spatial"
    kernel = None             # set by every concrete type, with its c_kernel
    bodies = ("body_i", "body_j")

    def _rows(self, par, K, f):  # pragma: no cover - abstract
        raise NotImplementedError

    def _drive(self, par, f):
        return None

    def phi(self, par, qb, t, f):
        out = _stack(self._rows(par, _Kin(qb), f), "v")
        dr = self._drive(par, f)
        return out if dr is None else out - dr[0]

    def jacobian_v(self, par, qb, t, f):
        return _stack(self._rows(par, _Kin(qb, jac=True), f), "J")

    def nu(self, par, qb, t, f):
        dr = self._drive(par, f)
        if dr is None:
            return np.zeros((par.shape[0], self.equations))
        return np.array(dr[1], dtype=float)

    def gamma_v(self, par, qb, vb, t, f):
        g = -_stack(self._rows(par, _Kin(qb, vb), f), "h")
        dr = self._drive(par, f)
        return g if dr is None else g + dr[2]

    # -- reactions -------------------------------------------------------------------
    def _joint_reaction(self, par, qb, t, f, lam, s_i, E, moments=True, gen=None):
        """Reaction on body i (``+Phi_qᵀ lam``, docs/conventions.md): the force and the
        moment about the joint point ``P_i`` (body-i coordinates ``s_i`` (ne, 3)),
        in the joint frame whose axes are the columns of ``E`` (ne, 3, 3), given in
        body-i components (Nikravesh (1988), §8.4.3, §11.3).

        ``gen`` (ne, nb, 7): the generalised reactions ``Phi_qᵀ lam`` in the
        System's ``[r, p]`` columns (:attr:`reaction_local_gen`) instead of this
        type's ω′ Jacobian.  With ``Phi_p = 2 Phi_pi' L(p)`` and ``L Lᵀ = pᵀp I``
        (Nikravesh (1988), Eqs. 6.39, 7.45), the body-fixed moment is
        ``n' = Phi_pi'ᵀ lam = L(p) n* / (2 pᵀp)`` with ``n* = Phi_pᵀ lam``: exact
        also where p has drifted off the unit sphere."""
        if gen is None:
            J = self.jacobian_v(par, qb, t, f)
            F = np.einsum("em,emc->ec", lam, J[:, :, 0, :3])   # global force on i
            n = np.einsum("em,emc->ec", lam, J[:, :, 0, 3:])   # body-i moment about r_i
        else:
            F = gen[:, 0, :3]
            n = _moment_body(qb[:, 0, 3:7], gen[:, 0, 3:7])
        Fl = _rotate(qb[:, 0, 3:7], F, transpose=True)
        if not moments:
            return _mtv(E, Fl)
        nP = n - _cross(s_i, Fl)
        return _mtv(E[:, None], np.stack([Fl, nP], 1)).reshape(-1, 6)


def _moment_body(p, ns):
    """``L(p) n* / (2 pᵀp)`` (ne, 3): the body-fixed moment of the Euler-parameter
    generalised force ``n*`` (ne, 4) (Nikravesh (1988), Eq. 6.39 for L; the inverse
    of ``n* = 2 L(p)ᵀ n'`` for any scale of p)."""
    e0, e1, e2, e3 = p[:, 0], p[:, 1], p[:, 2], p[:, 3]
    m0, m1, m2, m3 = ns[:, 0], ns[:, 1], ns[:, 2], ns[:, 3]
    out = np.empty((p.shape[0], 3))
    out[:, 0] = -e1 * m0 + e0 * m1 + e3 * m2 - e2 * m3
    out[:, 1] = -e2 * m0 - e3 * m1 + e0 * m2 + e1 * m3
    out[:, 2] = -e3 * m0 + e2 * m1 - e1 * m2 + e0 * m3
    out *= (0.5 / (e0 * e0 + e1 * e1 + e2 * e2 + e3 * e3))[:, None]
    return out


# =====================================================================================
# relative joint coordinates (the ``joints`` result channel, docs/results.md)
# =====================================================================================
def _dot3(a, b):
    """a·b over the last axis of 3-vectors, component by component (each row's
    value the same whatever the number of rows)."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _mv3(A, V, transpose=False):
    """``A v`` (``Aᵀ v``) of (ne, 3, 3) matrices and (ne, m, 3) vectors, component
    by component (each row's value the same whatever the number of rows)."""
    out = np.empty(V.shape)
    for i in range(3):
        a = A[:, :, i] if transpose else A[:, i, :]
        out[..., i] = (a[:, None, 0] * V[..., 0] + a[:, None, 1] * V[..., 1]
                       + a[:, None, 2] * V[..., 2])
    return out


class _Relative:
    """Poses and velocities of an element's bodies for its relative coordinates,
    with few array operations per group (the ``joints`` channel evaluates a group
    per output row on the row-by-row paths): the rotation matrices of the unit
    Euler parameters, ``A = (2e0² - 1) I + 2 e eᵀ + 2 e0 ẽ`` (Nikravesh (1988),
    Eq. 6.19), and the body angular velocities ``ω' = 2 L(p) ṗ = 2 (e0 ė - ė0 e
    - e × ė)`` (Nikravesh (1988), Eq. 6.107)."""

    def __init__(self, qb, qdb):
        p = qb[..., 3:7]
        p = p / np.sqrt(p[..., 0] * p[..., 0] + _dot3(p[..., 1:], p[..., 1:]))[..., None]
        e0, e = p[..., 0], p[..., 1:]
        A = 2.0 * e[..., :, None] * e[..., None, :]
        c = 2.0 * e0[..., None] * e
        dg = 2.0 * e0 * e0 - 1.0
        A[..., 0, 0] += dg
        A[..., 1, 1] += dg
        A[..., 2, 2] += dg
        A[..., 0, 1] -= c[..., 2]
        A[..., 0, 2] += c[..., 1]
        A[..., 1, 0] += c[..., 2]
        A[..., 1, 2] -= c[..., 0]
        A[..., 2, 0] -= c[..., 1]
        A[..., 2, 1] += c[..., 0]
        ed = qdb[..., 4:7]
        self.w = 2.0 * (e0[..., None] * ed - qdb[..., 3:4] * e - _cross(e, ed))
        self.p, self.A, self.r, self.rd = p, A, qb[..., :3], qdb[..., :3]

    def vectors(self, k, V):
        """``(A_k v', A_k (ω̃'_k v'))`` (ne, m, 3) of m body-k vectors with local
        components V (ne, m, 3) (Nikravesh (1988), Eqs. 6.62-6.63)."""
        A = self.A[:, k]
        W = _cross(np.broadcast_to(self.w[:, k, None, :], V.shape), V)
        return _mv3(A, V), _mv3(A, W)

    def points(self, k, G, Gd):
        """A point ``r_k + A_k s'`` and its rate from the rotated offset (ne, 3)."""
        return G + self.r[:, k], Gd + self.rd[:, k]


def _angle(F, Fd, G, Gd, T, Td):
    """``theta = atan2(G·T, F·T)`` (principal value) of the vector T in the frame
    (F, G), and its rate ``(x ẏ - y ẋ)/(x² + y²)``."""
    x, y = _dot3(F, T), _dot3(G, T)
    xd, yd = _dot3(Fd, T) + _dot3(F, Td), _dot3(Gd, T) + _dot3(G, Td)
    return np.arctan2(y, x), (x * yd - y * xd) / (x * x + y * y)


def _along(U, Ud, Pi, Pid, Pj, Pjd):
    """``Uᵀ(P_j - P_i)`` and its rate."""
    d, dd = Pj - Pi, Pjd - Pid
    return _dot3(U, d), _dot3(Ud, d) + _dot3(U, dd)


def _mapped(qb0, a, frm, to):
    """Body-``to`` components of the body-``frm`` vector a' (ne, 3) in the initial
    configuration ``qb0``: ``A_toᵀ A_frm a'``."""
    return _rotate(qb0[:, to, 3:7], _rotate(qb0[:, frm, 3:7], a), transpose=True)


def _normal_part(a, u):
    """The unit part of a (ne, 3) normal to the unit u (ne, 3)."""
    v = a - _dot3(a, u)[:, None] * u
    return v / np.maximum(np.sqrt(_dot3(v, v)), 1e-300)[:, None]


def _axis_reference(par, qb0):
    """``f_j``: the joint frame's f_i carried into body j in the initial
    configuration (normal to the body-j axis ``par[:, 6:9]``), the zero of the
    angle about the axis."""
    return _normal_part(_mapped(qb0, par[:, 9:12], 0, 1), par[:, 6:9])


def _axis_relative(par, qb, qdb, ref, disp):
    """The angle of body j about the axis u_i = f_i × g_i relative to body i (zero
    where f_j = ref lies along f_i) and, with ``disp``, the displacements of the
    joint points along f_i, g_i and u_i, with their rates: (angle, rate, [(s, sd)
    along f_i, g_i, u_i])."""
    R = _Relative(qb, qdb)
    n = par.shape[0]
    V0 = np.empty((n, 4 if disp else 2, 3))
    V0[:, 0], V0[:, 1] = par[:, 9:12], par[:, 12:15]
    V1 = ref[:, None, :] if not disp else np.stack([ref, par[:, 3:6]], 1)
    if disp:
        V0[:, 2], V0[:, 3] = par[:, 0:3], _cross(par[:, 9:12], par[:, 12:15])
    G0, G0d = R.vectors(0, V0)
    G1, G1d = R.vectors(1, V1)
    th, thd = _angle(G0[:, 0], G0d[:, 0], G0[:, 1], G0d[:, 1], G1[:, 0], G1d[:, 0])
    if not disp:
        return th, thd, None
    (Pi, Pid), (Pj, Pjd) = R.points(0, G0[:, 2], G0d[:, 2]), R.points(1, G1[:, 1], G1d[:, 1])
    return th, thd, [_along(G0[:, k], G0d[:, k], Pi, Pid, Pj, Pjd) for k in (0, 1, 3)]


_BODY_I = Param("body", "first body (i)")
_BODY_J = Param("body", "second body (j)")


def _point_i(doc="joint point, body i coordinates"):
    return Param("vec3", doc, on="body_i", unit="length")


def _point_j(doc="the same point in body j coordinates (default: from the initial "
                 "configuration)"):
    return Param("vec3", doc, required=False, on="body_j", unit="length")


def _axis_j(doc="the axis in body j components (default: axis_i in the initial "
                "configuration)"):
    return Param("axis3", doc, required=False)


# =====================================================================================
# 1. spherical
# =====================================================================================
class Spherical(_SpatialBase):
    """Spherical (ball) joint ``Phi = r_i + A_i s'_i - r_j - A_j s'_j = 0``
    (Nikravesh (1988), Eq. 7.7): 3 rows, 3 relative DOF.

    ``Phi_r = [I, -I]``, ``Phi_pi' = [-A_i s̃'_i, A_j s̃'_j]``, ``gamma# = ŝ_j - ŝ_i``.
    par = ``[s'_i (3), s'_j (3)]``."""

    name = "spherical"
    kernel = "spatial_spherical"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:SPHERICAL"
    description = "ball joint: a point of body i coincides with a point of body j"
    equations = 3
    params = {"body_i": _BODY_I, "body_j": _BODY_J, "point_i": _point_i(),
              "point_j": _point_j()}
    n_par = 6
    labels = ("x", "y", "z")
    local_labels = ("fx", "fy", "fz")
    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True
    #: Phi_r = [I, -I]: row k touches coordinate k of each body's r
    r_columns = ((0,), (1,), (2,))

    def pack(self, spec, ctx):
        si, sj = _joint_points(spec, ctx)
        return [*si, *sj], []

    def _rows(self, par, K, f):
        return [_sub(_body_point(K, 0, par[:, 0:3]), _body_point(K, 1, par[:, 3:6]))]

    relative_labels = ("p0", "p1", "p2", "p3", "wx", "wy", "wz")

    def relative(self, par, qb, qdb, ref):
        """The relative Euler parameters ``p_ij = conj(p_i) ⊗ p_j`` with ``A(p_ij) =
        A_iᵀ A_j`` (Nikravesh (1988), §6.5; continuous along a run as p_i, p_j are)
        and the relative angular velocity of body j in body-i axes, ``A_iᵀ A_j ω'_j -
        ω'_i``."""
        R = _Relative(qb, qdb)
        pi, pj = R.p[:, 0], R.p[:, 1]
        out = np.empty((par.shape[0], 7))
        out[:, 0] = pi[:, 0] * pj[:, 0] + _dot3(pi[:, 1:], pj[:, 1:])
        out[:, 1:4] = pi[:, 0:1] * pj[:, 1:] - pj[:, 0:1] * pi[:, 1:] - _cross(pi[:, 1:],
                                                                               pj[:, 1:])
        wj = _mv3(R.A[:, 1], R.w[:, 1, None, :])
        out[:, 4:7] = _mv3(R.A[:, 0], wj, transpose=True)[:, 0] - R.w[:, 0]
        return out

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """The joint force on body i in body-i axes (the reaction on body j is
        opposite; a ball joint transmits no moment about its centre)."""
        E = np.broadcast_to(_I3, (par.shape[0], 3, 3))
        return self._joint_reaction(par, qb, t, f, lam, par[:, 0:3], E, moments=False,
                                    gen=gen)


# =====================================================================================
# 2. universal
# =====================================================================================
class Universal(_SpatialBase):
    """Universal (Hooke) joint: s(P) + n1(a_i, a_j) with the two cross-bar axes
    ``a_i`` on body i and ``a_j`` on body j (Nikravesh (1988), Eq. 7.8): 4 rows, 2
    relative DOF.  par = ``[s'_i, s'_j, a'_i, a'_j]``."""

    name = "universal"
    kernel = "spatial_universal"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:UNIVERSAL"
    description = "Hooke joint: common point and perpendicular cross-bar axes"
    equations = 4
    params = {"body_i": _BODY_I, "body_j": _BODY_J, "point_i": _point_i(),
              "point_j": _point_j(),
              "axis_i": Param("axis3", "cross-bar axis on body i (body i components)"),
              "axis_j": Param("axis3", "cross-bar axis on body j (body j components), "
                                       "perpendicular to axis_i")}
    n_par = 12
    labels = ("x", "y", "z", "n")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")
    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True

    def pack(self, spec, ctx):
        si, sj = _joint_points(spec, ctx)
        return [*si, *sj, *_unit(spec["axis_i"], f"{ctx.path}.axis_i"),
                *_unit(spec["axis_j"], f"{ctx.path}.axis_j")], []

    def _rows(self, par, K, f):
        s = _sub(_body_point(K, 0, par[:, 0:3]), _body_point(K, 1, par[:, 3:6]))
        return [s, _vdot(_body_vector(K, 0, par[:, 6:9]), _body_vector(K, 1, par[:, 9:12]))]

    relative_labels = ("angle_i", "angle_j", "angle_i_rate", "angle_j_rate")
    relative_angles = (0, 1)

    def relative_reference(self, par, qb0):
        """``b'`` = axis_j in body-i components and ``v'`` = axis_i in body-j
        components in the initial configuration (normal to axis_i, axis_j)."""
        ai, aj = par[:, 6:9], par[:, 9:12]
        return np.concatenate([_normal_part(_mapped(qb0, aj, 1, 0), ai),
                               _normal_part(_mapped(qb0, ai, 0, 1), aj)], -1)

    def relative(self, par, qb, qdb, ref):
        """The two cross-bar angles relative to the initial configuration: ``angle_i``
        the rotation of the cross (and body j) about axis_i relative to body i,
        ``angle_j`` that of body j about axis_j relative to the cross, each
        right-handed, so that ``A_iᵀA_j = Rot(a_i, angle_i) Rot(b, angle_j)
        (A_iᵀA_j)_0`` with b = axis_j in body-i axes initially (Nikravesh (1988),
        §7.2 universal joint); and their rates."""
        R = _Relative(qb, qdb)
        ai, aj, b, v = par[:, 6:9], par[:, 9:12], ref[:, 0:3], ref[:, 3:6]
        G0, G0d = R.vectors(0, np.stack([b, _cross(ai, b), ai], 1))
        G1, G1d = R.vectors(1, np.stack([v, _cross(aj, v), aj], 1))
        t1, t1d = _angle(G0[:, 0], G0d[:, 0], G0[:, 1], G0d[:, 1], G1[:, 2], G1d[:, 2])
        t2, t2d = _angle(G1[:, 0], G1d[:, 0], G1[:, 1], G1d[:, 1], G0[:, 2], G0d[:, 2])
        return np.stack([t1, -t2, t1d, -t2d], -1)

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """Force and moment (about the joint point) on body i in the cross frame:
        x = axis_i, z = axis_i × axis_j (normal to both cross bars), y = z × x;
        ``nx = ny = 0`` (the joint turns freely about both bars), ``nz`` is the
        moment the cross transmits."""
        e1 = par[:, 6:9]
        aj = _rotate(qb[:, 0, 3:7], _rotate(qb[:, 1, 3:7], par[:, 9:12]),
                     transpose=True)                   # a_j in body-i components
        e3 = _cross(e1, aj)
        e3 /= np.maximum(np.sqrt(np.sum(e3 * e3, axis=1, keepdims=True)), 1e-300)
        E = np.stack([e1, _cross(e3, e1), e3], -1)
        return self._joint_reaction(par, qb, t, f, lam, par[:, 0:3], E, gen=gen)


# =====================================================================================
# 3-5. revolute, cylindrical, translational (no row selection: 2 x n1)
# =====================================================================================
class _AxisJoint(_SpatialBase):
    """Common packing of the axis joints: par = ``[s'_i, s'_j, u'_j, f'_i, g'_i, ...]``
    with ``(f_i, g_i, u_i)`` a right-handed orthonormal triad on body i (u_i =
    axis_i) and ``u_j`` the axis on body j."""

    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True

    def _pack_axis(self, spec, ctx):
        si, sj = _joint_points(spec, ctx)
        ui = _unit(spec["axis_i"], f"{ctx.path}.axis_i")
        uj = spec.get("axis_j")
        uj = _map_dir(ctx, spec["body_i"], ui, spec["body_j"]) if uj is None else _v3(uj)
        uj = _unit(uj, f"{ctx.path}.axis_j")
        fi, gi = _perp_pair(ui)
        return [*si, *sj, *uj, *fi, *gi]

    def _parallel_rows(self, par, K):
        """n1(f_i, u_j), n1(g_i, u_j): u_j ∥ u_i without row selection
        (Nikravesh (1988), Prob. 7.17)."""
        uj = _body_vector(K, 1, par[:, 6:9])
        return [_vdot(_body_vector(K, 0, par[:, 9:12]), uj),
                _vdot(_body_vector(K, 0, par[:, 12:15]), uj)]

    def _frame(self, par):
        fi, gi = par[:, 9:12], par[:, 12:15]
        return np.stack([fi, gi, _cross(fi, gi)], -1)

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """Force and moment (about the joint point ``P_i``) on body i in the joint
        frame ``x = f_i, y = g_i, z = axis_i`` (body-i axes ⊥ / along the axis)."""
        return self._joint_reaction(par, qb, t, f, lam, par[:, 0:3], self._frame(par),
                                    gen=gen)


_AXIS_PARAMS = {
    "body_i": _BODY_I, "body_j": _BODY_J,
    "point_i": _point_i("a point of the joint axis, body i coordinates"),
    "point_j": _point_j("the same point in body j coordinates (default: from the "
                        "initial configuration)"),
    "axis_i": Param("axis3", "joint axis, body i components"),
    "axis_j": _axis_j(),
}


class Revolute(_AxisJoint):
    """Revolute joint: s(P) + n1(f_i, u_j) + n1(g_i, u_j), ``f_i, g_i ⊥ u_i``
    (without row selection, Nikravesh (1988), Prob. 7.17): 5 rows, 1 relative DOF.
    par = ``[s'_i, s'_j, u'_j, f'_i, g'_i]``."""

    name = "revolute"
    kernel = "spatial_revolute"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:REVOLUTE"
    description = "hinge: common point and common axis"
    equations = 5
    params = dict(_AXIS_PARAMS)
    n_par = 15
    labels = ("x", "y", "z", "f", "g")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")

    def pack(self, spec, ctx):
        return self._pack_axis(spec, ctx), []

    def _rows(self, par, K, f):
        s = _sub(_body_point(K, 0, par[:, 0:3]), _body_point(K, 1, par[:, 3:6]))
        return [s, *self._parallel_rows(par, K)]

    relative_labels = ("angle", "angle_rate")
    relative_angles = (0,)

    def relative_reference(self, par, qb0):
        """``f'_j``: f_i carried into body j in the initial configuration."""
        return _axis_reference(par, qb0)

    def relative(self, par, qb, qdb, ref):
        """The rotation angle of body j about axis_i relative to body i, right-handed,
        zero in the initial configuration, and its rate (Nikravesh (1988), §7.2
        revolute joint; the rotation driver's atan2 angle)."""
        th, thd, _ = _axis_relative(par, qb, qdb, ref, False)
        return np.stack([th, thd], -1)


class Cylindrical(_AxisJoint):
    """Cylindrical joint: n1(f_i, u_j), n1(g_i, u_j) (axes parallel) and
    n2(f_i, d), n2(g_i, d) with ``d = P_j - P_i`` (P_j on the axis of body i)
    (Nikravesh (1988), Eq. 7.13 without row selection): 4 rows, 2 relative DOF.
    par = ``[s'_i, s'_j, u'_j, f'_i, g'_i]``."""

    name = "cylindrical"
    kernel = "spatial_cylindrical"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:CYLINDRICAL"
    description = "common axis: rotation about and translation along it"
    equations = 4
    params = dict(_AXIS_PARAMS)
    n_par = 15
    labels = ("f", "g", "df", "dg")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")

    def pack(self, spec, ctx):
        return self._pack_axis(spec, ctx), []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        return [*self._parallel_rows(par, K),
                _vdot(_body_vector(K, 0, par[:, 9:12]), d),
                _vdot(_body_vector(K, 0, par[:, 12:15]), d)]

    relative_labels = ("angle", "disp", "angle_rate", "disp_rate")
    relative_angles = (0,)

    def relative_reference(self, par, qb0):
        """``f'_j``: f_i carried into body j in the initial configuration."""
        return _axis_reference(par, qb0)

    def relative(self, par, qb, qdb, ref):
        """The revolute's angle (zero in the initial configuration) and the
        displacement ``u_iᵀ(P_j - P_i)`` of the joint points along axis_i (zero where
        they coincide), with their rates (Nikravesh (1988), §7.2 cylindrical joint)."""
        th, thd, d = _axis_relative(par, qb, qdb, ref, True)
        return np.stack([th, d[2][0], thd, d[2][1]], -1)


class Translational(_AxisJoint):
    """Translational (prismatic) joint: the cylindrical rows + n1(f_i, h_j), ``h_j``
    a body-j vector perpendicular to ``f_i`` and to the axis in the initial
    configuration (g_i mapped into body j) (Nikravesh (1988), Eq. 7.15): 5 rows, 1
    relative DOF.  par = ``[s'_i, s'_j, u'_j, f'_i, g'_i, h'_j]``."""

    name = "translational"
    kernel = "spatial_translational"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:TRANSLATIONAL"
    description = "prismatic joint: sliding along a common axis, no relative rotation"
    equations = 5
    params = dict(_AXIS_PARAMS)
    n_par = 18
    labels = ("f", "g", "df", "dg", "rot")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")

    def pack(self, spec, ctx):
        par = self._pack_axis(spec, ctx)
        uj, gi = np.array(par[6:9]), np.array(par[12:15])
        hj = _map_dir(ctx, spec["body_i"], gi, spec["body_j"])
        hj = _unit(hj - (hj @ uj) * uj, f"{ctx.path}.axis_j",
                   "normal of the joint frame (axis_j is far from parallel to axis_i in "
                   "the initial configuration: omit it or correct the orientations)")
        return par + list(hj), []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        fi = _body_vector(K, 0, par[:, 9:12])
        return [*self._parallel_rows(par, K), _vdot(fi, d),
                _vdot(_body_vector(K, 0, par[:, 12:15]), d),
                _vdot(fi, _body_vector(K, 1, par[:, 15:18]))]

    relative_labels = ("disp", "disp_rate")

    def relative(self, par, qb, qdb, ref):
        """The displacement ``u_iᵀ(P_j - P_i)`` of the joint points along axis_i (zero
        where they coincide) and its rate (Nikravesh (1988), §7.2 translational
        joint)."""
        R = _Relative(qb, qdb)
        G0, G0d = R.vectors(0, np.stack([par[:, 0:3], _cross(par[:, 9:12], par[:, 12:15])], 1))
        G1, G1d = R.vectors(1, par[:, None, 3:6])
        (Pi, Pid), (Pj, Pjd) = R.points(0, G0[:, 0], G0d[:, 0]), R.points(1, G1[:, 0], G1d[:, 0])
        s, sd = _along(G0[:, 1], G0d[:, 1], Pi, Pid, Pj, Pjd)
        return np.stack([s, sd], -1)


class Planar(_AxisJoint):
    """Planar joint: body j slides and turns in a plane of body i — the plane normals
    parallel, n1(f_i, u_j), n1(g_i, u_j), and the point P_j in the plane through P_i,
    n2(u_i, d) with ``d = P_j - P_i`` (Nikravesh (1988), §7.2 lower pairs; the rows of the
    cylindrical joint with the in-plane pair replaced): 3 rows, 3 relative DOF.
    par = ``[s'_i, s'_j, u'_j, f'_i, g'_i, u'_i]`` (``axis_i``: the plane normal)."""

    name = "planar"
    kernel = "spatial_planar"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:PLANAR"
    description = "plane joint: body j moves in a plane of body i (2 slides, 1 turn)"
    equations = 3
    params = dict(_AXIS_PARAMS, axis_i=Param("axis3", "plane normal, body i components"),
                  axis_j=_axis_j("the normal in body j components (default: axis_i in "
                                 "the initial configuration)"))
    n_par = 18
    labels = ("f", "g", "d")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")

    def pack(self, spec, ctx):
        par = self._pack_axis(spec, ctx)
        return par + list(np.cross(par[9:12], par[12:15])), []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        return [*self._parallel_rows(par, K), _vdot(_body_vector(K, 0, par[:, 15:18]), d)]

    relative_labels = ("disp_f", "disp_g", "angle", "disp_f_rate", "disp_g_rate",
                       "angle_rate")
    relative_angles = (2,)

    def relative_reference(self, par, qb0):
        """``f'_j``: f_i carried into body j in the initial configuration."""
        return _axis_reference(par, qb0)

    def relative(self, par, qb, qdb, ref):
        """The in-plane displacements ``f_iᵀ(P_j - P_i)``, ``g_iᵀ(P_j - P_i)`` along the
        joint frame's axes f_i, g_i (⊥ the normal axis_i) and the rotation angle
        about the normal as the revolute's, with their rates."""
        th, thd, d = _axis_relative(par, qb, qdb, ref, True)
        return np.stack([d[0][0], d[1][0], th, d[0][1], d[1][1], thd], -1)


# =====================================================================================
# 6. spherical-spherical (distance) and 10. distance driver
# =====================================================================================
class _DistanceBase(_SpatialBase):
    """``Phi = dᵀd - l(t)²``, ``d = r_j + A_j s'_j - r_i - A_i s'_i``
    (Nikravesh (1988), Eqs. 7.19-7.20): ``Phi_r = [-2dᵀ, 2dᵀ]``,
    ``Phi_pi' = [2dᵀA_i s̃'_i, -2dᵀA_j s̃'_j]``, ``nu = 2 l l'``,
    ``gamma# = -2dᵀd̂ - 2ḋᵀḋ + 2(l'² + l l'')``.  Needs l > 0 (the Jacobian
    vanishes with d).  par = ``[s'_i, s'_j]``; one time function l(t)."""

    equations = 1
    n_par = 6
    n_fun = 1
    labels = ("d",)
    local_labels = ("tension",)

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        return [_vdot(d, d)]

    def _drive(self, par, f):
        L, Ld, Ldd = f[:, 0, 0], f[:, 0, 1], f[:, 0, 2]
        return (L * L)[:, None], (2.0 * L * Ld)[:, None], (2.0 * (Ld * Ld + L * Ldd))[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``tension`` = ``-2 lam |d|``: positive when the link pulls the two
        points towards each other (the force on body i is ``-2 lam d``)."""
        K = _Kin(qb)
        d = _body_point(K, 1, par[:, 3:6]).v - _body_point(K, 0, par[:, 0:3]).v
        return (-2.0 * lam[:, 0] * np.linalg.norm(d, axis=1))[:, None]


_DIST_PARAMS = {
    "body_i": _BODY_I, "body_j": _BODY_J,
    "point_i": Param("vec3", "end point on body i, body i coordinates",
                     default=(0.0, 0.0, 0.0), on="body_i", unit="length"),
    "point_j": Param("vec3", "end point on body j, body j coordinates",
                     default=(0.0, 0.0, 0.0), on="body_j", unit="length"),
}


class Distance(_DistanceBase):
    """Spherical-spherical composite joint / massless link of constant length
    (Nikravesh (1988), §7.2.3, Fig. 7.9): ``|P_j - P_i| = l``, written ``dᵀd - l² = 0``.
    ``length`` defaults to the distance in the initial configuration."""

    name = "distance"
    kernel = "spatial_distance"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:DISTANCE"
    description = "massless link with ball joints at both ends (constant distance)"
    params = {**_DIST_PARAMS,
              "length": Param("number", "link length l > 0 (default: the distance in "
                                        "the initial configuration)",
                              required=False, positive=True, unit="length")}

    def pack(self, spec, ctx):
        si, sj = _v3(spec.get("point_i")), _v3(spec.get("point_j"))
        L = _length_default(ctx, spec, si, sj)
        return [*si, *sj], [parse_function(L, f"{ctx.path}.length")]


class SphericalSpherical(Distance):
    """The ``distance`` type under its book name (spherical-spherical, Fig 7.9)."""

    name = "spherical_spherical"


class DistanceDriver(_DistanceBase):
    """Distance driver ``dᵀd - l(t)² = 0`` (Nikravesh (1988), Eqs. 7.19-7.20 with a
    length l(t)): a linear actuator between
    two body points; l(t) must stay positive."""

    name = "distance_driver"
    kernel = "spatial_distance"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:DISTANCE"
    description = "drive the distance between two body points as a function of time"
    category = "driver"
    params = {**_DIST_PARAMS,
              "function": Param("function", "l(t) > 0: number, polynomial, harmonic, "
                                            "table or expression")}

    def pack(self, spec, ctx):
        si, sj = _v3(spec.get("point_i")), _v3(spec.get("point_j"))
        return [*si, *sj], [spec["function"]]


# =====================================================================================
# 7. spherical-revolute, 8. revolute-revolute composite joints
# =====================================================================================
class SphericalRevolute(_SpatialBase):
    """Spherical-revolute composite joint (Nikravesh (1988), Eq. 7.21, Fig. 7.10): a
    massless link from the ball centre ``P_i`` on body i to the point ``P_j`` of the
    revolute axis ``u_j`` of body j, perpendicular to that axis::

        Phi1 = dᵀd - l² ,   Phi2 = u_jᵀ d      (d = P_j - P_i)

    2 rows.  ``length`` defaults to the initial distance.
    par = ``[s'_i, s'_j, u'_j, l]``."""

    name = "spherical_revolute"
    kernel = "spatial_spherical_revolute"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:SPHERICAL_REVOLUTE"
    description = "massless link: ball joint on body i, revolute (axis_j) on body j"
    equations = 2
    params = {
        "body_i": Param("body", "body with the ball joint"),
        "body_j": Param("body", "body with the revolute joint"),
        "point_i": Param("vec3", "ball centre, body i coordinates",
                         default=(0.0, 0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec3", "point of the revolute axis where the link is attached, "
                                 "body j coordinates", default=(0.0, 0.0, 0.0), on="body_j",
                         unit="length"),
        "axis_j": Param("axis3", "revolute axis, body j components"),
        "length": Param("number", "link length l > 0 (default: the initial distance)",
                        required=False, positive=True, unit="length"),
    }
    n_par = 10
    labels = ("d", "n")
    local_labels = ("tension",)

    def pack(self, spec, ctx):
        si, sj = _v3(spec.get("point_i")), _v3(spec.get("point_j"))
        L = _length_default(ctx, spec, si, sj)
        return [*si, *sj, *_unit(spec["axis_j"], f"{ctx.path}.axis_j"), L], []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        return [_shift(_vdot(d, d), par[:, 9] ** 2), _vdot(_body_vector(K, 1, par[:, 6:9]), d)]

    def reaction_local(self, par, qb, t, f, lam):
        """``tension`` of the link from the ss row: ``-2 lam_1 |d|`` (the n2 row
        carries the moment the link's revolute end cannot take)."""
        K = _Kin(qb)
        d = _body_point(K, 1, par[:, 3:6]).v - _body_point(K, 0, par[:, 0:3]).v
        return (-2.0 * lam[:, 0] * np.linalg.norm(d, axis=1))[:, None]


class RevoluteRevolute(_SpatialBase):
    """Revolute-revolute composite joint (Nikravesh (1988), Eqs. 7.22-7.25, Fig. 7.11): a
    massless link from ``P_i`` on the axis ``u_i`` of body i to ``P_j`` on the axis
    ``u_j`` of body j, perpendicular to both axes::

        Phi1 = dᵀd - l²,  Phi2 = u_iᵀd,  Phi3 = u_jᵀd,
        Phi4 = sin(b0) u_iᵀu_j - cos(b0) dᵀ(u_i × u_j)/l

    ``b0`` is the angle from u_i to u_j about d in the initial configuration; with
    the first three rows holding, ``Phi4 = sin(b0 - b)``, regular at every angle: it
    is the n1 row of Eq. 7.22 for perpendicular axes (b0 = ±90°) and the p1 row along
    d of Eq. 7.23 for parallel axes (b0 = 0).  4 rows, 2 relative DOF.
    par = ``[s'_i, s'_j, u'_i, u'_j, l, sin b0, cos b0 / l]``."""

    name = "revolute_revolute"
    kernel = "spatial_revolute_revolute"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:REVOLUTE_REVOLUTE"
    description = "massless link with revolute joints at both ends"
    equations = 4
    params = {
        "body_i": _BODY_I, "body_j": _BODY_J,
        "point_i": Param("vec3", "link end on the axis of body i, body i coordinates",
                         default=(0.0, 0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec3", "link end on the axis of body j, body j coordinates",
                         default=(0.0, 0.0, 0.0), on="body_j", unit="length"),
        "axis_i": Param("axis3", "revolute axis on body i, body i components"),
        "axis_j": Param("axis3", "revolute axis on body j, body j components"),
        "length": Param("number", "link length l > 0 (default: the initial distance)",
                        required=False, positive=True, unit="length"),
    }
    n_par = 15
    labels = ("d", "ni", "nj", "angle")

    def pack(self, spec, ctx):
        si, sj = _v3(spec.get("point_i")), _v3(spec.get("point_j"))
        L = _length_default(ctx, spec, si, sj)
        ui = _unit(spec["axis_i"], f"{ctx.path}.axis_i")
        uj = _unit(spec["axis_j"], f"{ctx.path}.axis_j")
        d = _global_point(ctx, spec["body_j"], sj) - _global_point(ctx, spec["body_i"], si)
        dn = d / max(np.linalg.norm(d), 1e-300)
        _, Ai = ctx.pose(spec["body_i"])
        _, Aj = ctx.pose(spec["body_j"])
        a, b = Ai @ ui, Aj @ uj
        a, b = a - (a @ dn) * dn, b - (b @ dn) * dn
        if not (np.linalg.norm(a) > 1e-6 and np.linalg.norm(b) > 1e-6):
            raise ModelError(f"{ctx.path}.axis_i", "an axis is parallel to the link "
                             "(point_i -> point_j) in the initial configuration")
        b0 = math.atan2(dn @ np.cross(a, b), a @ b)
        return [*si, *sj, *ui, *uj, L, math.sin(b0), math.cos(b0) / L], []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        ui, uj = _body_vector(K, 0, par[:, 6:9]), _body_vector(K, 1, par[:, 9:12])
        ang = _lin((par[:, 13], _vdot(ui, uj)), (-par[:, 14], _vdot(d, _vcross(ui, uj))))
        return [_shift(_vdot(d, d), par[:, 12] ** 2), _vdot(ui, d), _vdot(uj, d), ang]


# =====================================================================================
# 9. point coordinate, 11. angle driver
# =====================================================================================
class PointCoordinate(_SpatialBase):
    """Component k (x, y or z) of a body point equal to C(t) (Nikravesh (1988), Eqs.
    7.27-7.32; as a driver with C(t), §7.2.4)::

        Phi = e_kᵀ (r_i + A_i s') - C(t):  Phi_r = e_kᵀ, Phi_pi' = -e_kᵀ A_i s̃',
        nu = C',  gamma# = -e_kᵀ ŝ + C''

    ``function`` defaults to the initial value (a constraint holding it).
    par = ``[k, s']``; one time function."""

    name = "point_coordinate"
    kernel = "spatial_point_coordinate"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:POINT_COORDINATE"
    description = "x, y or z of a body point held constant or driven as C(t)"
    category = "constraint"
    equations = 1
    bodies = ("body",)
    params = {
        "body": Param("body", "the body"),
        "coordinate": Param("choice", "x, y or z (global)", choices=("x", "y", "z")),
        "point": Param("vec3", "body point, body coordinates (default: origin)",
                       default=(0.0, 0.0, 0.0), on="body", unit="length"),
        "function": Param("function", "C(t): number, polynomial, harmonic, table or "
                                      "expression (default: the initial value)",
                          required=False),
    }
    n_par = 4
    n_fun = 1
    labels = ("c",)
    local_labels = ("effort",)

    def pack(self, spec, ctx):
        k = COORD3[spec["coordinate"]]
        s = _v3(spec.get("point"))
        fn = spec.get("function")
        if fn is None:
            fn = parse_function(float(_global_point(ctx, spec["body"], s)[k]),
                                f"{ctx.path}.function")
        return [float(k), *s], [fn]

    def _rows(self, par, K, f):
        return [_component(_body_point(K, 0, par[:, 1:4]), par[:, 0].astype(int))]

    def _drive(self, par, f):
        return f[:, 0, 0:1], f[:, 0, 1:2], f[:, 0, 2:3]

    def reaction_local(self, par, qb, t, f, lam):
        """``effort`` = ``lam``: the force along the global axis applied at the point."""
        return lam[:, 0:1].copy()


class AngleDriver(_SpatialBase):
    """Angle c(t) between two body directions (Nikravesh (1988), Prob. 7.24 steering)::

        Phi = a_iᵀa_j - cos c(t)   (unit a_i, a_j),   nu = -sin(c) c',
        gamma# = gamma_n1 - cos(c) c'² - sin(c) c''

    Only |c| is determined, and the row is singular at c = 0 and π (use
    ``rotation_driver`` for a relative rotation about an axis).
    par = ``[a'_i, a'_j]``; one time function c(t) (radians)."""

    name = "angle_driver"
    kernel = "spatial_angle_driver"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:ANGLE_DRIVER"
    description = "drive the angle between a body-i and a body-j direction"
    category = "driver"
    equations = 1
    params = {"body_i": _BODY_I, "body_j": _BODY_J,
              "vector_i": Param("axis3", "direction on body i, body i components"),
              "vector_j": Param("axis3", "direction on body j, body j components"),
              "function": Param("function", "the angle c(t) in radians")}
    n_par = 6
    n_fun = 1
    labels = ("c",)
    local_labels = ("effort",)

    def pack(self, spec, ctx):
        return [*_unit(spec["vector_i"], f"{ctx.path}.vector_i"),
                *_unit(spec["vector_j"], f"{ctx.path}.vector_j")], [spec["function"]]

    def _rows(self, par, K, f):
        return [_vdot(_body_vector(K, 0, par[:, 0:3]), _body_vector(K, 1, par[:, 3:6]))]

    def _drive(self, par, f):
        c, cd, cdd = f[:, 0, 0], f[:, 0, 1], f[:, 0, 2]
        co, si = np.cos(c), np.sin(c)
        return co[:, None], (-si * cd)[:, None], (-co * cd * cd - si * cdd)[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``effort`` = ``lam`` (the row's multiplier)."""
        return lam[:, 0:1].copy()


# =====================================================================================
# 12. rotation driver (atan2 form with continuous tracking)
# =====================================================================================
class RotationDriver(_SpatialBase):
    """Relative rotation about a revolute axis ``theta(q) = c(t)`` in an atan2 form
    (derived from the definition; the book's Eq. 7.18 gives only ``cos(theta/2)``)::

        x = f_iᵀf_j,  y = g_iᵀf_j,  theta = atan2(y, x) + 2 pi n,   Phi = theta - c(t)
        theta_q = (x y_q - y x_q)/rho²   (on a healthy revolute: -u_iᵀ, +u_iᵀ)
        gamma# = -[(x ŷ - y x̂)/rho² - 2 thetadot (x xdot + y ydot)/rho²] + c''

    ``u_i`` = axis_i (body i), ``f_i ⊥ u_i`` (reference_i), ``g_i = u_i × f_i``,
    ``f_j`` a body-j direction ⊥ the axis (reference_j; default: reference_i in the
    initial configuration, so theta = 0 there).  theta increases for body j turning
    positively about u_i relative to body i.

    Continuous tracking (any number of turns): the last tracked angle is state
    carried per element in the packed parameters (``par[:, 9]``); ``phi`` picks
    the branch of atan2 nearest to it and stores the new value (in place).  It is
    correct while successive evaluations of ``phi`` differ by less than pi in theta
    (true for integration steps, Newton iterations and finite differences).  The
    initial branch is the one nearest c(0), so a driver starting at, e.g., 4 pi
    needs no full turns at assembly.  Jacobian, nu and gamma do not depend on the
    branch.  par = ``[f'_i, g'_i, f'_j, theta_tracked]``; one time function c(t).

    The compiled kernel (``spatial_rotation_driver``) does the same update on the
    same memory: the System hands the compiled evaluator its group's own par array
    (never a copy; the evaluator checks), so the compiled and NumPy paths of one
    System share one tracking state."""

    name = "rotation_driver"
    kernel = "spatial_rotation_driver"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:ROTATION_DRIVER"
    description = "drive the relative rotation angle of two bodies about an axis"
    category = "driver"
    equations = 1
    params = {
        "body_i": _BODY_I, "body_j": _BODY_J,
        "axis_i": Param("axis3", "rotation axis, body i components"),
        "reference_i": Param("axis3", "body-i direction from which theta is measured "
                                      "(projected ⊥ axis_i; default: any)", required=False),
        "reference_j": Param("axis3", "body-j direction whose angle is theta (default: "
                                      "reference_i in the initial configuration)",
                             required=False),
        "function": Param("function", "theta = c(t) in radians (a number holds it)"),
    }
    n_par = 10
    n_fun = 1
    labels = ("theta",)
    local_labels = ("torque",)
    TRACK = 9

    def pack(self, spec, ctx):
        p = ctx.path
        bi, bj = spec["body_i"], spec["body_j"]
        ui = _unit(spec["axis_i"], f"{p}.axis_i")
        ref = spec.get("reference_i")
        if ref is None:
            fi, _ = _perp_pair(ui)
        else:
            ref = np.asarray(ref, float)
            fi = _unit(ref - (ref @ ui) * ui, f"{p}.reference_i",
                       "reference direction not parallel to axis_i")
        gi = np.cross(ui, fi)
        uj = _map_dir(ctx, bi, ui, bj)
        ref = spec.get("reference_j")
        ref = _map_dir(ctx, bi, fi, bj) if ref is None else np.asarray(ref, float)
        fj = _unit(ref - (ref @ uj) * uj, f"{p}.reference_j",
                   "reference direction not parallel to the axis")
        _, Ai = ctx.pose(bi)
        _, Aj = ctx.pose(bj)
        fjg = Aj @ fj
        th = math.atan2(float((Ai @ gi) @ fjg), float((Ai @ fi) @ fjg))
        fn = spec["function"]
        try:
            c0 = float(np.asarray(fn.jet(0.0), dtype=float).ravel()[0])
        except (ValueError, ArithmeticError, ModelError):
            c0 = math.nan          # no value at t = 0 (e.g. a table starting later)
        if np.isfinite(c0):        # start on the branch nearest c(0)
            th += TWO_PI * round((c0 - th) / TWO_PI)
        return [*fi, *gi, *fj, th], [fn]

    def _angle_jet(self, par, K):
        fj = _body_vector(K, 1, par[:, 6:9])
        return _atan2(_vdot(_body_vector(K, 0, par[:, 3:6]), fj),
                      _vdot(_body_vector(K, 0, par[:, 0:3]), fj))

    def angle(self, par, qb):
        """The tracked relative angle theta (ne,), updating the tracking state
        ``par[:, 9]`` in place."""
        raw = self._angle_jet(par, _Kin(qb)).v
        ref = par[:, self.TRACK]
        th = raw + TWO_PI * np.round((ref - raw) / TWO_PI)
        par[:, self.TRACK] = th
        return th

    def phi(self, par, qb, t, f):
        return (self.angle(par, qb) - f[:, 0, 0])[:, None]

    def _rows(self, par, K, f):
        return [self._angle_jet(par, K)]

    def _drive(self, par, f):
        return f[:, 0, 0:1], f[:, 0, 1:2], f[:, 0, 2:3]

    def reaction_local(self, par, qb, t, f, lam):
        """``torque`` = ``lam``: on a healthy revolute the moment ``lam u_i`` acts on
        body j and ``-lam u_i`` on body i (the driving torque)."""
        return lam[:, 0:1].copy()


# =====================================================================================
# 13. fixed (lock to ground or to another body)
# =====================================================================================
class Fixed(_SpatialBase):
    """Body i rigidly attached to body j (default: the ground): s(P) + ep,3 rows
    with the relative orientation of the initial configuration (Nikravesh (1988),
    Eq. 7.12 with all three rows, Prob. 7.11; the book has no spatial ground element)::

        Phi[0:3] = r_i + A_i s'_i - r_j - A_j s'_j
        Phi[3:6] = vec(conj(q0) ⊗ conj(p_j) ⊗ p_i),   A(q0) = A_jᵀA_i initially

    6 rows, 0 relative DOF.  par = ``[s'_i, s'_j, q0]``."""

    name = "fixed"
    kernel = "spatial_fixed"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:FIXED"
    description = "weld body i to body j (default: the ground) in its initial pose"
    category = "constraint"
    equations = 6
    params = {
        "body_i": Param("body", "the fixed body"),
        "body_j": Param("body", "the body it is fixed to (default: ground)",
                        default="ground"),
        "point_i": Param("vec3", "weld point, body i coordinates (default: origin)",
                         default=(0.0, 0.0, 0.0), on="body_i", unit="length"),
        "point_j": _point_j(),
    }
    n_par = 10
    labels = ("x", "y", "z", "ex", "ey", "ez")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")
    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True

    def pack(self, spec, ctx):
        bi, bj = spec["body_i"], spec["body_j"]
        si = _v3(spec.get("point_i"))
        sj = spec.get("point_j")
        sj = _map_point(ctx, bi, si, bj) if sj is None else _v3(sj)
        _, Ai = ctx.pose(bi)
        _, Aj = ctx.pose(bj)
        return [*si, *sj, *_q_from_A(Aj.T @ Ai)], []

    def _rows(self, par, K, f):
        s = _sub(_body_point(K, 0, par[:, 0:3]), _body_point(K, 1, par[:, 3:6]))
        q0 = par[:, 6:10] / np.linalg.norm(par[:, 6:10], axis=1, keepdims=True)
        return [s, _relative_ep(K, q0)]

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """Force and moment (about the weld point) on body i in body-i axes."""
        E = np.broadcast_to(_I3, (par.shape[0], 3, 3))
        return self._joint_reaction(par, qb, t, f, lam, par[:, 0:3], E, gen=gen)


# =====================================================================================
# 14. primitives: perpendicular (n1) and parallel (p1 as 2 x n1)
# =====================================================================================
class Perpendicular(_SpatialBase):
    """n1: a body-i direction perpendicular to a body-j direction,
    ``Phi = a_iᵀ a_j`` (Nikravesh (1988), Eq. 7.3): ``Phi_pi'_i = -a_jᵀA_i ã'_i``,
    ``Phi_pi'_j = -a_iᵀA_j ã'_j``, ``gamma# = -(a_jᵀâ_i + a_iᵀâ_j + 2ȧ_iᵀȧ_j)``.
    par = ``[a'_i, a'_j]``."""

    name = "perpendicular"
    kernel = "spatial_perpendicular"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:PERPENDICULAR"
    description = "a body-i direction perpendicular to a body-j direction (n1)"
    category = "constraint"
    equations = 1
    params = {"body_i": _BODY_I, "body_j": _BODY_J,
              "vector_i": Param("axis3", "direction on body i, body i components"),
              "vector_j": Param("axis3", "direction on body j, body j components")}
    n_par = 6
    labels = ("n",)

    def pack(self, spec, ctx):
        return [*_unit(spec["vector_i"], f"{ctx.path}.vector_i"),
                *_unit(spec["vector_j"], f"{ctx.path}.vector_j")], []

    def _rows(self, par, K, f):
        return [_vdot(_body_vector(K, 0, par[:, 0:3]), _body_vector(K, 1, par[:, 3:6]))]


class Parallel(_SpatialBase):
    """p1 without row selection: a body-j direction ``a_j`` parallel to a body-i
    direction ``a_i`` through two n1 rows ``f_iᵀa_j = 0``, ``g_iᵀa_j = 0`` with
    ``f_i, g_i ⊥ a_i`` (as in Nikravesh (1988), Prob. 7.17; allows a_j = ±a_i).
    par = ``[f'_i, g'_i, a'_j]``."""

    name = "parallel"
    kernel = "spatial_parallel"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:PARALLEL"
    description = "a body-j direction parallel to a body-i direction (p1, 2 rows)"
    category = "constraint"
    equations = 2
    params = {"body_i": _BODY_I, "body_j": _BODY_J,
              "vector_i": Param("axis3", "direction on body i, body i components"),
              "vector_j": Param("axis3", "direction on body j, body j components "
                                         "(default: vector_i in the initial "
                                         "configuration)", required=False)}
    n_par = 9
    labels = ("f", "g")

    def pack(self, spec, ctx):
        ai = _unit(spec["vector_i"], f"{ctx.path}.vector_i")
        aj = spec.get("vector_j")
        aj = _map_dir(ctx, spec["body_i"], ai, spec["body_j"]) if aj is None else _v3(aj)
        fi, gi = _perp_pair(ai)
        return [*fi, *gi, *_unit(aj, f"{ctx.path}.vector_j")], []

    def _rows(self, par, K, f):
        aj = _body_vector(K, 1, par[:, 6:9])
        return [_vdot(_body_vector(K, 0, par[:, 0:3]), aj),
                _vdot(_body_vector(K, 0, par[:, 3:6]), aj)]


#: every spatial constraint type of this module (what the plugin hook will return)
CONSTRAINT_TYPES = [Spherical, Universal, Revolute, Cylindrical, Translational, Planar,
                    Distance, SphericalSpherical, SphericalRevolute, RevoluteRevolute,
                    PointCoordinate, DistanceDriver, AngleDriver, RotationDriver, Fixed,
                    Perpendicular, Parallel]
