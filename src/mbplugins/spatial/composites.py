"""More spatial constraint types (Nikravesh (1988), §7.1, Table 7.1, §7.2.4, §7.3): the screw joint in its
regular form, the revolute-cylindrical composite joint, the point-on-line and
point-on-plane primitives, the Euler-parameter relative-rotation driver and the
orientation lock.

Built from the same row machinery as :mod:`mbplugins.spatial.constraints` (read
its module docstring): every row is an expression of body points and body vectors
carried as "jets" (value, ω′-Jacobian, rate, quadratic velocity term), so
``jacobian_v`` is the ω′ form of Table 11.1 and ``gamma_v`` is ``gamma#``; the
Euler-parameter Jacobian (variant P) and its gamma come from
:class:`mbcore.elements.SpatialConstraintType`.

Parameters are in body-fixed coordinates; points and axes of body j default to the
body-j coordinates of the body-i ones in the initial configuration, as in
``constraints.py``.  Compiled kernels: ``spatial_<name>`` in ext/plugins/_spatial_constraints.pyx (same
packed parameters; the screw's compiled phi updates the same tracked angle in the
System group's own par array).

``COMPOSITE_TYPES`` lists the types (for the plugin hook).
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.rotations import A as _A
from mbcore.elements.schema import Param

from .constraints import (TWO_PI, _AXIS_PARAMS, _BODY_I, _BODY_J, _I3, _AxisJoint,
                          _SpatialBase, _point_i, _point_j)
from .kinematics import (Jet as _Jet, joint_points as _joint_points, Kin as _Kin, atan2 as _atan2, body_point as _body_point, body_vector as _body_vector, dot as _dot, lin as _lin, map_dir as _map_dir, mv as _mv, mtv as _mtv, perp_pair as _perp_pair, pure as _pure, q_from_A as _q_from_A, qconj as _qconj, qmul as _qmul, relative_ep as _relative_ep, sub as _sub, unit as _unit, vdot as _vdot)

__all__ = ["Screw", "RevoluteCylindrical", "PointOnLine", "PointOnPlane",
           "RelativeRotationEP", "OrientationLock", "COMPOSITE_TYPES"]


def _unit_rows(v):
    """Row-wise normalisation of (ne, 3) vectors."""
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-300)


# =====================================================================================
# 1. screw joint (a regular form derived here; Nikravesh (1988), §7.2.2)
# =====================================================================================
class Screw(_AxisJoint):
    """Screw joint, a regular form derived here from the cylindrical joint of Nikravesh (1988), §7.2.2 (not the book's Eqs
    7.16-7.17, which are singular at d = 0 and θ = 0, π; re-derived here): the four
    cylindrical rows plus one row coupling the signed axial travel to the tracked
    relative angle::

        Phi[0:2] = f_iᵀu_j, g_iᵀu_j                (axes parallel, 2 x n1)
        Phi[2:4] = f_iᵀd,   g_iᵀd                  (P_j on the axis of body i, 2 x n2)
        Phi[4]   = u_iᵀd - delta0 - a (theta - theta0)

    with ``d = P_j - P_i``, ``(f_i, g_i, u_i)`` a right-handed orthonormal triad on
    body i (u_i = axis_i), ``a`` = ``pitch`` (axial travel per radian) and theta the
    relative angle of Nikravesh (1988), §7.2.4, §7.3, ``x = f_iᵀf_j``, ``y = g_iᵀf_j``,
    ``theta = atan2(y, x) + 2 pi n`` (``f_j`` = f_i in body j at assembly).  theta
    increases for body j turning positively about u_i relative to body i, so a
    positive pitch is a right-handed thread.  ``delta0``, ``theta0`` are the
    initial values (the row holds in the initial configuration).

    The angle is tracked continuously in the packed parameters exactly as
    ``rotation_driver`` does: ``phi`` takes the atan2 branch nearest to the last
    tracked value and stores it (``par[:, TRACK]``, in place); Jacobian and gamma
    do not depend on the branch.  The compiled kernel (``spatial_screw``) does the
    same update on the same memory (the System hands the evaluator its group's own
    par array).  5 rows, 1 relative DOF.
    par = ``[s'_i, s'_j, u'_j, f'_i, g'_i, u'_i, f'_j, a, delta0, theta0, theta]``."""
    #: the output methods read the tracked angle kept in ``par``: one call per row
    rows_stacked = False

    name = "screw"
    description = "screw joint: rotation about a common axis coupled to translation along it"
    kernel = "spatial_screw"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:SCREW"
    equations = 5
    params = {**_AXIS_PARAMS,
              "pitch": Param("number", "axial travel of body j along axis_i per radian of "
                                       "relative rotation (lead per turn / 2 pi; > 0: "
                                       "right-handed, < 0: left-handed)", unit="length/angle")}
    n_par = 25
    labels = ("f", "g", "df", "dg", "screw")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")
    TRACK = 24

    def pack(self, spec, ctx):
        bi, bj = spec["body_i"], spec["body_j"]
        par = self._pack_axis(spec, ctx)
        uj, fi, gi = (np.array(par[k:k + 3]) for k in (6, 9, 12))
        ui = np.cross(fi, gi)
        fj = _map_dir(ctx, bi, fi, bj)
        fj = _unit(fj - (fj @ uj) * uj, f"{ctx.path}.axis_j",
                   "axis_j not parallel to axis_i in the initial configuration")
        par = [*par, *ui, *fj, float(spec["pitch"]), 0.0, 0.0, 0.0]
        P = np.array([par], dtype=float)
        qb = np.array([[ctx.initial(bi), ctx.initial(bj)]], dtype=float)
        delta, theta = self._parts(P, _Kin(qb))[1:]
        par[22], par[23], par[24] = float(delta.v[0]), float(theta.v[0]), float(theta.v[0])
        return par, []

    def _parts(self, par, K):
        """(cylindrical rows, axial travel u_iᵀd, principal-value angle) jets."""
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        fi, gi = _body_vector(K, 0, par[:, 9:12]), _body_vector(K, 0, par[:, 12:15])
        cyl = [*self._parallel_rows(par, K), _vdot(fi, d), _vdot(gi, d)]
        delta = _vdot(_body_vector(K, 0, par[:, 15:18]), d)
        fj = _body_vector(K, 1, par[:, 18:21])
        return cyl, delta, _atan2(_vdot(gi, fj), _vdot(fi, fj))

    def angle(self, par, qb):
        """The tracked relative angle theta (ne,), updating ``par[:, TRACK]`` in place."""
        raw = self._parts(par, _Kin(qb))[2].v
        th = raw + TWO_PI * np.round((par[:, self.TRACK] - raw) / TWO_PI)
        par[:, self.TRACK] = th
        return th

    def phi(self, par, qb, t, f):
        cyl, delta, theta = self._parts(par, _Kin(qb))
        th = theta.v + TWO_PI * np.round((par[:, self.TRACK] - theta.v) / TWO_PI)
        par[:, self.TRACK] = th
        row = delta.v - par[:, 22] - par[:, 21] * (th - par[:, 23])
        return np.stack([r.v for r in cyl] + [row], axis=1)

    def _rows(self, par, K, f):
        cyl, delta, theta = self._parts(par, K)
        one = np.ones(par.shape[0])
        return [*cyl, _lin((one, delta), (-par[:, 21], theta))]


# =====================================================================================
# 2. revolute-cylindrical composite joint (Nikravesh (1988), §7.2.3, Eq. 7.26)
# =====================================================================================
class RevoluteCylindrical(_SpatialBase):
    """Revolute-cylindrical composite joint (Nikravesh (1988), Eq. 7.26, Fig. 7.12): a
    massless link turning about the axis ``u_i`` of body i (revolute) and sliding
    and turning on the axis ``u_j`` of body j (cylindrical), the two axes
    perpendicular and intersecting at ``P_i``::

        Phi[0]   = u_iᵀu_j                      (n1: axes perpendicular)
        Phi[1:3] = f_jᵀd, g_jᵀd                 (p2 on body j as 2 x n2, d = P_j - P_i)

    ``(f_j, g_j, u_j)`` a right-handed orthonormal triad on body j (no row
    selection).  P_i stays on the line of body j through P_j along u_j.
    3 rows, 3 relative DOF (rotation about u_i, rotation about and translation
    along u_j).  par = ``[s'_i, s'_j, u'_i, u'_j, f'_j, g'_j]``."""

    name = "revolute_cylindrical"
    description = ("massless link: revolute on body i, cylindrical on body j, axes "
                   "perpendicular and intersecting")
    kernel = "spatial_revolute_cylindrical"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:REVOLUTE_CYLINDRICAL"
    equations = 3
    params = {
        "body_i": Param("body", "body with the revolute axis"),
        "body_j": Param("body", "body with the cylinder axis"),
        "point_i": _point_i("intersection of the two axes (on the revolute axis), "
                            "body i coordinates"),
        "point_j": _point_j("a point of the cylinder axis, body j coordinates (default: "
                            "point_i in the initial configuration)"),
        "axis_i": Param("axis3", "revolute axis, body i components"),
        "axis_j": Param("axis3", "cylinder axis, body j components (perpendicular to "
                                 "axis_i in the assembled joint)"),
    }
    n_par = 18
    labels = ("n", "df", "dg")
    local_labels = ("fx", "fy", "fz", "nx", "ny", "nz")
    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True

    def pack(self, spec, ctx):
        si, sj = _joint_points(spec, ctx)
        ui = _unit(spec["axis_i"], f"{ctx.path}.axis_i")
        uj = _unit(spec["axis_j"], f"{ctx.path}.axis_j")
        fj, gj = _perp_pair(uj)
        return [*si, *sj, *ui, *uj, *fj, *gj], []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        ui, uj = _body_vector(K, 0, par[:, 6:9]), _body_vector(K, 1, par[:, 9:12])
        return [_vdot(ui, uj), _vdot(_body_vector(K, 1, par[:, 12:15]), d),
                _vdot(_body_vector(K, 1, par[:, 15:18]), d)]

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """Force and moment (about ``P_i``) on body i in the frame x = axis_i,
        z = the cylinder axis u_j (current, made ⊥ x), y = z × x: ``fz = 0`` (free
        sliding), ``nx = nz = 0`` (free rotation about both axes); ``ny`` is the
        moment the link transmits."""
        Ai, Aj = _A(qb[:, 0, 3:7]), _A(qb[:, 1, 3:7])
        e1 = par[:, 6:9]
        uj = _mtv(Ai, _mv(Aj, par[:, 9:12]))          # u_j in body-i components
        e2 = _unit_rows(np.cross(uj, e1))
        E = np.stack([e1, e2, np.cross(e1, e2)], -1)
        return self._joint_reaction(par, qb, t, f, lam, par[:, 0:3], E, gen=gen)


# =====================================================================================
# 3. primitives: point on a line, point on a plane
# =====================================================================================
class PointOnLine(_SpatialBase):
    """A body-j point on a line of body i: p2(u_i, d) without row selection as two
    n2 rows (Nikravesh (1988), Eq. 7.6)::

        Phi = [f_iᵀd, g_iᵀd],   d = P_j - P_i,   f_i, g_i ⊥ u_i

    ``P_i`` a point of the line, ``u_i`` its direction.  2 rows, 4 relative DOF
    (sliding along the line and any rotation).  par = ``[s'_i, s'_j, f'_i, g'_i]``."""

    name = "point_on_line"
    description = "a point of body j stays on a line of body i"
    category = "constraint"
    kernel = "spatial_point_on_line"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:POINT_ON_LINE"
    equations = 2
    params = {
        "body_i": Param("body", "body carrying the line (i)"),
        "body_j": Param("body", "body carrying the point (j)"),
        "point_i": _point_i("a point of the line, body i coordinates"),
        "axis_i": Param("axis3", "direction of the line, body i components"),
        "point_j": _point_j("the point of body j, body j coordinates (default: the body-j "
                            "point at point_i in the initial configuration)"),
    }
    n_par = 12
    labels = ("df", "dg")
    local_labels = ("fx", "fy")
    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True

    def pack(self, spec, ctx):
        si, sj = _joint_points(spec, ctx)
        fi, gi = _perp_pair(_unit(spec["axis_i"], f"{ctx.path}.axis_i"))
        return [*si, *sj, *fi, *gi], []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        return [_vdot(_body_vector(K, 0, par[:, 6:9]), d),
                _vdot(_body_vector(K, 0, par[:, 9:12]), d)]

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """The force on body i (body j gets the opposite one at its point), in
        body-i axes across the line: x = f_i, y = g_i (``-lam``); none acts along
        the line."""
        fi, gi = par[:, 6:9], par[:, 9:12]
        E = np.stack([fi, gi, np.cross(fi, gi)], -1)
        return self._joint_reaction(par, qb, t, f, lam, par[:, 0:3], E, moments=False,
                                    gen=gen)[:, :2]


class PointOnPlane(_SpatialBase):
    """A body-j point on a plane of body i: one n2 row (Nikravesh (1988), Eq. 7.4)::

        Phi = n_iᵀd,   d = P_j - P_i

    ``P_i`` a point of the plane, ``n_i`` its normal.  1 row, 5 relative DOF.
    par = ``[s'_i, s'_j, n'_i]``."""

    name = "point_on_plane"
    description = "a point of body j stays on a plane of body i"
    category = "constraint"
    kernel = "spatial_point_on_plane"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:POINT_ON_PLANE"
    equations = 1
    params = {
        "body_i": Param("body", "body carrying the plane (i)"),
        "body_j": Param("body", "body carrying the point (j)"),
        "point_i": _point_i("a point of the plane, body i coordinates"),
        "normal_i": Param("axis3", "normal of the plane, body i components"),
        "point_j": _point_j("the point of body j, body j coordinates (default: the body-j "
                            "point at point_i in the initial configuration)"),
    }
    n_par = 9
    labels = ("dn",)
    local_labels = ("fn",)

    def pack(self, spec, ctx):
        si, sj = _joint_points(spec, ctx)
        return [*si, *sj, *_unit(spec["normal_i"], f"{ctx.path}.normal_i")], []

    def _rows(self, par, K, f):
        d = _sub(_body_point(K, 1, par[:, 3:6]), _body_point(K, 0, par[:, 0:3]))
        return [_vdot(_body_vector(K, 0, par[:, 6:9]), d)]

    def reaction_local(self, par, qb, t, f, lam):
        """``fn`` = ``-lam``: the force on body i along the plane normal n_i (body j
        gets the opposite force at its point)."""
        return -lam[:, 0:1].copy()


# =====================================================================================
# 4. relative rotation driver through Euler parameters (Eq. 7.18)
# =====================================================================================
class RelativeRotationEP(_SpatialBase):
    """Relative rotation driver through Euler parameters (Nikravesh (1988), Eq. 7.18;
    §2.8 driver table)::

        Phi = w0 - cos(theta(t)/2),   w = conj(q0) ⊗ conj(p_j) ⊗ p_i
        Phi_pi'_i = -½ vec(w)ᵀ,   Phi_pi'_j = ½ (A(q0) vec(w))ᵀ
        nu = -½ sin(theta/2) theta',
        gamma# = -h - ¼ cos(theta/2) theta'² - ½ sin(theta/2) theta''
        h = -¼ (|ω'_i|² + |ω'_j|²) w0 + ½ scal([0, -A(q0)ᵀω'_j] ⊗ w ⊗ [0, ω'_i])

    With ``zero: parallel`` (default) q0 = 1 and this is the book's row
    ``p_iᵀp_j - cos(theta/2)`` (h = 2ṗ_iᵀṗ_j - (ṗ_iᵀṗ_i + ṗ_jᵀṗ_j) p_iᵀp_j); with
    ``zero: initial`` q0 = conj(p_j) ⊗ p_i of the initial configuration, i.e.
    theta = 0 at the initial relative orientation.  w0 is the cosine of half the
    relative rotation angle from the theta = 0 orientation, about whatever axis, so
    the row drives a rotation about a joint axis only together with a joint that
    keeps the relative rotation on that axis (revolute, ep,2).

    Caveats (Nikravesh (1988), §7.2.1, Eq. 7.12; §7.2.2, Eq. 7.18; re-derived here): only |theta| is determined (cos is even; the
    sense of rotation comes from the initial guess); at theta = 0 (mod 2 pi) the
    Jacobian vanishes (rank 0: the row cannot drive through or hold theta = 0 —
    use ``rotation_driver``); the sign of the Euler parameters matters
    (p_iᵀp_j = cos(theta/2) distinguishes theta from theta + 2 pi, period 4 pi).
    par = ``[q0]``; one time function theta(t) (radians)."""

    name = "relative_rotation_ep"
    description = ("drive the relative rotation angle through Euler parameters "
                   "(p_iᵀp_j = cos(theta/2))")
    category = "driver"
    kernel = "spatial_relative_rotation_ep"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:RELATIVE_ROTATION_EP"
    equations = 1
    params = {
        "body_i": _BODY_I, "body_j": _BODY_J,
        "function": Param("function", "the relative rotation angle theta(t) in radians"),
        "zero": Param("choice", "orientation where theta = 0: parallel (body frames "
                                "parallel, Eq. 7.18) or initial (the initial relative "
                                "orientation)", default="parallel",
                      choices=("parallel", "initial")),
    }
    n_par = 4
    n_fun = 1
    labels = ("theta",)
    local_labels = ("effort",)

    def pack(self, spec, ctx):
        q0 = np.array([1.0, 0.0, 0.0, 0.0])
        if spec.get("zero", "parallel") == "initial":
            # from the Euler parameters themselves (not via A): keeps the sign of w0
            pi = ctx.initial(spec["body_i"])[3:7]
            pj = ctx.initial(spec["body_j"])[3:7]
            q0 = _qmul(_qconj(pj / np.linalg.norm(pj)), pi / np.linalg.norm(pi))
        return [*q0], [spec["function"]]

    def _rows(self, par, K, f):
        q0 = par[:, 0:4]
        w = _qmul(_qconj(q0), _qmul(_qconj(K.p[:, 1]), K.p[:, 0]))
        w0, wv = w[:, 0], w[:, 1:]
        A0 = _A(q0)
        Pi, Pj = -0.5 * wv, 0.5 * _mv(A0, wv)
        J = d = h = None
        if K.jac:
            J = K.zeros_J()
            J[:, 0, 3:] = Pi
            J[:, 1, 3:] = Pj
        if K.vel:
            wi, wj = K.w[:, 0], K.w[:, 1]
            d = _dot(Pi, wi) + _dot(Pj, wj)
            h = (-0.25 * (_dot(wi, wi) + _dot(wj, wj)) * w0
                 + 0.5 * _qmul(_qmul(_pure(-_mtv(A0, wj)), w), _pure(wi))[:, 0])
        return [_Jet(w0, J, d, h)]

    def _drive(self, par, f):
        th, thd, thdd = f[:, 0, 0], f[:, 0, 1], f[:, 0, 2]
        c, s = np.cos(0.5 * th), np.sin(0.5 * th)
        return (c[:, None], (-0.5 * s * thd)[:, None],
                (-0.25 * c * thd * thd - 0.5 * s * thdd)[:, None])

    def reaction_local(self, par, qb, t, f, lam):
        """``effort`` = ``lam`` (the row's multiplier)."""
        return lam[:, 0:1].copy()


# =====================================================================================
# 5. orientation lock (ep,3 rows alone)
# =====================================================================================
class OrientationLock(_SpatialBase):
    """Relative orientation of body i and body j (default: the ground) kept at its
    initial value, positions free: the ep,3 rows of Nikravesh (1988), §7.2.1, Eq. 7.12; §7.2.2, Eq. 7.18 (E = I, Prob. 7.11)
    generalised to the initial relative orientation q0 (A(q0) = A_jᵀA_i)::

        Phi = vec(conj(q0) ⊗ conj(p_j) ⊗ p_i)
        Phi_pi'_i = ½ (w0 I + w̃),   Phi_pi'_j = -½ (w0 I - w̃) A(q0)ᵀ

    (``fixed`` without its three point rows.)  3 rows, 3 relative DOF (the
    translations); well conditioned near the locked state, no spurious solutions
    (w = ±1 only at the locked orientation).  par = ``[q0]``."""

    name = "orientation_lock"
    description = "keep the relative orientation of two bodies (translations free)"
    category = "constraint"
    kernel = "spatial_orientation_lock"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_constraints.pyx)
    c_kernel = "mbplugins._ext._spatial_constraints:ORIENTATION_LOCK"
    equations = 3
    params = {
        "body_i": Param("body", "the body whose orientation is locked"),
        "body_j": Param("body", "the reference body (default: ground)", default="ground"),
    }
    n_par = 4
    labels = ("ex", "ey", "ez")
    local_labels = ("nx", "ny", "nz")
    #: reaction_local also takes the generalised reactions the output rows have
    #: (``gen``) instead of evaluating the Jacobian again
    reaction_local_gen = True

    def pack(self, spec, ctx):
        _, Ai = ctx.pose(spec["body_i"])
        _, Aj = ctx.pose(spec["body_j"])
        return [*_q_from_A(Aj.T @ Ai)], []

    def _rows(self, par, K, f):
        q0 = par[:, 0:4] / np.linalg.norm(par[:, 0:4], axis=1, keepdims=True)
        return [_relative_ep(K, q0)]

    def reaction_local(self, par, qb, t, f, lam, gen=None):
        """The moment on body i in body-i axes (no force)."""
        ne = par.shape[0]
        E = np.broadcast_to(_I3, (ne, 3, 3))
        return self._joint_reaction(par, qb, t, f, lam, np.zeros((ne, 3)), E,
                                    gen=gen)[:, 3:]


#: the spatial constraint types of this module (for the plugin hook)
COMPOSITE_TYPES = [Screw, RevoluteCylindrical, PointOnLine, PointOnPlane,
                   RelativeRotationEP, OrientationLock]

