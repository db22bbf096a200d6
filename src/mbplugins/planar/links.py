"""Planar link and slot joints (Nikravesh (1988), §4.2.2, Prob. 10.27; DADS-2D kinematics report, §2.4).

* ``distance`` — revolute-revolute joint / massless link of constant length (C6;
  Nikravesh (1988), §4.2.2, Eqs. 4.13-4.14), and ``distance_driver`` — the same with a length L(t)
  (D4; Nikravesh (1988), Prob. 10.27).  Both use the squared form ``Phi = d^T d - L^2``.
* ``revolute_translational`` — a pin of body j sliding in a straight slot of body i
  (C7; Nikravesh (1988), Eqs. 4.15-4.16).
* ``translational_002`` — the translational joint in the form of the DADS-2D
  kinematics report (§2.4, Eqs. 2.4.4-2.4.5), for reproducing that report only.

Every class holds the type's schema, its packing and the NumPy reference
implementation vectorised over a group (shapes: :mod:`mbcore.elements`); the
compiled kernel of the same name in ``mbcore._ext._planar`` computes the same
numbers from the same packed parameters.  All formulas were re-derived from the
constraint definitions (the scanned book is unreliable for formulas) and were checked
numerically.
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.elements.base import ConstraintType, PackContext, Sketch, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.functions import parse_function
from mbcore.elements.schema import Param

from ._common import axis_geometry, cross, dot, moment_about, rot1, unit_vector


# =====================================================================================
# C6 / D4: revolute-revolute joint (massless link) and distance driver
# =====================================================================================
class _DistanceBase(ConstraintType):
    """``d = r_i^P - r_j^P = r_i + A_i s'_i - r_j - A_j s'_j``,
    ``Phi = d^T d - L(t)^2`` (Nikravesh (1988), Eqs. 4.13-4.14,
    Prob. 10.27).

    Derivation (re-done from the definition): ``dPhi/dt = 2 d^T ddot - 2 L L'``
    with ``ddot = rd_i + w_i R S_i - rd_j - w_j R S_j``, so the Jacobian is
    ``[2 d^T, 2 d^T R S_i | -2 d^T, -2 d^T R S_j]`` and ``nu = 2 L L'``; the
    second derivative gives ``gamma = -2 ddot^T ddot + 2 d^T (w_i^2 S_i -
    w_j^2 S_j) + 2 (L'^2 + L L'')``.

    Why the squared form: it is smooth everywhere, including
    ``d = 0``, and needs no square root.  ``|d| - L`` would have a better scaled
    multiplier (directly the link force) but is not differentiable at ``d = 0``.
    Consequences: the row has units of length², its Jacobian scales with ``2L``
    (it vanishes when the points coincide, so L must stay away from 0), and the
    multiplier is a force per length: the link force is ``T = -2 lam |d|``.

    par = ``[s'_ix, s'_iy, s'_jx, s'_jy]``; one time function L(t) (a constant for
    ``distance``).  Shared compiled kernel ``distance``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    equations = 1
    bodies = ("body_i", "body_j")
    n_par = 4
    n_fun = 1
    kernel = "distance"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:DISTANCE"
    local_labels = ("tension",)

    @staticmethod
    def _points(spec):
        return tuple(spec.get("point_i") or (0.0, 0.0)), tuple(spec.get("point_j") or (0.0, 0.0))

    @staticmethod
    def _geom(par, qb):
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        Sj = rot(qb[:, 1, 2], par[:, 2:4])
        d = qb[:, 0, :2] + Si - qb[:, 1, :2] - Sj
        return Si, Sj, d

    def phi(self, par, qb, t, f):
        Si, Sj, d = self._geom(par, qb)
        L = f[:, 0, 0]
        return (dot(d, d) - L * L)[:, None]

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        Si, Sj, d = self._geom(par, qb)
        jac = np.zeros((ne, 1, 2, 3))
        jac[:, 0, 0, :2] = 2.0 * d
        jac[:, 0, 0, 2] = 2.0 * dot(d, perp(Si))
        jac[:, 0, 1, :2] = -2.0 * d
        jac[:, 0, 1, 2] = -2.0 * dot(d, perp(Sj))
        return jac

    def nu(self, par, qb, t, f):
        return (2.0 * f[:, 0, 0] * f[:, 0, 1])[:, None]

    def gamma(self, par, qb, qdb, t, f):
        Si, Sj, d = self._geom(par, qb)
        wi, wj = qdb[:, 0, 2:3], qdb[:, 1, 2:3]
        dd = qdb[:, 0, :2] + wi * perp(Si) - qdb[:, 1, :2] - wj * perp(Sj)
        L, Ld, Ldd = f[:, 0, 0], f[:, 0, 1], f[:, 0, 2]
        g = (-2.0 * dot(dd, dd) + 2.0 * dot(d, wi ** 2 * Si - wj ** 2 * Sj)
             + 2.0 * (Ld * Ld + L * Ldd))
        return g[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``tension``: the link force, positive when the link pulls ``P_i`` and
        ``P_j`` towards each other: ``T = -2 lam |d|`` (Nikravesh (1988), §8.4.3, §9.3: the reaction is
        ``2 lam d`` on body i at ``P_i`` and ``-2 lam d`` on body j at ``P_j``;
        equal to ``-2 lam L`` when the constraint holds)."""
        Si, Sj, d = self._geom(par, qb)
        return (-2.0 * lam[:, 0] * np.hypot(d[:, 0], d[:, 1]))[:, None]


class Distance(_DistanceBase):
    """Revolute-revolute joint / massless link: ``|r_i^P - r_j^P| = L``, written
    ``d^T d - L^2 = 0`` (C6; Nikravesh (1988), §4.2.2, Eqs. 4.13-4.14; see :class:`_DistanceBase`).
    ``length`` defaults to the distance of the two points in the initial
    configuration."""

    name = "distance"
    description = "massless link of constant length between two body points (rev-rev)"
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "link end on body i, body i coordinates",
                         default=(0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec2", "link end on body j, body j coordinates",
                         default=(0.0, 0.0), on="body_j", unit="length"),
        "length": Param("number", "link length L > 0 (default: the distance in the "
                                  "initial configuration)", required=False, positive=True,
                        unit="length"),
    }
    labels = ("d",)

    def pack(self, spec, ctx: PackContext):
        si, sj = self._points(spec)
        L = spec.get("length")
        if L is None:
            qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
            pi = qi[:2] + rot1(qi[2], si)
            pj = qj[:2] + rot1(qj[2], sj)
            L = float(np.hypot(*(pi - pj)))
            scale = max(1.0, float(np.abs(pi).max()), float(np.abs(pj).max()))
            if not L > 1e-12 * scale:
                raise ModelError(f"{ctx.path}.length",
                                 "the two points coincide in the initial configuration, so "
                                 "the length cannot default to their distance: give a "
                                 "positive length")
        return [si[0], si[1], sj[0], sj[1]], [parse_function(float(L), f"{ctx.path}.length")]


class DistanceDriver(_DistanceBase):
    """Distance driver ``|r_i^P - r_j^P| = L(t)``, written ``d^T d - L(t)^2 = 0``
    (D4; Nikravesh (1988), Prob. 10.27; a linear actuator between two body points).  L(t) must
    stay positive."""

    name = "distance_driver"
    description = "drive the distance between two body points as a function of time"
    category = "driver"
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "end point on body i, body i coordinates",
                         default=(0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec2", "end point on body j, body j coordinates",
                         default=(0.0, 0.0), on="body_j", unit="length"),
        "function": Param("function", "L(t) > 0: number, polynomial, harmonic, table or "
                                      "expression"),
    }
    labels = ("c",)

    def pack(self, spec, ctx: PackContext):
        si, sj = self._points(spec)
        return [si[0], si[1], sj[0], sj[1]], [spec["function"]]


# =====================================================================================
# the locking arcs of a Geneva wheel (sketch of a revolute-translational lock)
# =====================================================================================
def _pivot(ctx: PackContext, body: str) -> tuple[np.ndarray, np.ndarray] | None:
    """(global point, body point) of the first revolute joint between the ground and
    ``body`` (a ``point_j`` left to the joint: the body coordinates of the ground
    point in the initial configuration), or None."""
    ground = ctx.model.ground
    for el in ctx.model.constraint_elements():
        v = el.values or {}
        if el.type != "revolute" or {v.get("body_i"), v.get("body_j")} != {ground, body}:
            continue
        g, b = ("i", "j") if v["body_i"] == ground else ("j", "i")
        pg = np.asarray(v.get(f"point_{g}") or (0.0, 0.0), dtype=float)
        pb = v.get(f"point_{b}")
        if pb is None:
            q = ctx.initial(body)
            pb = rot(np.array(-q[2]), pg - q[:2])
        return pg, np.asarray(pb, dtype=float)
    return None


def locking_arcs(spec: dict, ctx: PackContext) -> list[Sketch]:
    """The concave locking arcs of a Geneva wheel whose dwell this joint models: a
    point of the wheel (``point_j`` of body j) held on a line of the ground (the line
    of centres), the wheel (body j) turning about a ground pivot, slots on it
    (revolute-translational joints of the wheel) engaged by the pin of a crank
    turning about a ground pivot on that line (the wheel of Nikravesh (1988),
    Prob. 5.37: slots a angle 2 beta apart, sin beta = p / d).  In the dwell the
    wheel's locking arc is concentric with the crank's axis and rides on its locking
    disc: here the arc of the pin circle (radius p, the pin's distance from the
    crank's pivot) about the point at the centre distance d from the wheel's pivot
    along the held point's direction, between the mouths of the two slots beside it
    (at sqrt(d² − p²) from the wheel's centre, at angles ± beta, beta = asin(p / d),
    where slot lines are tangent to the pin circle), and the same arc on the opposite
    side (a
    lock line holds either of two opposite arcs, as one slot line is two slots).  The
    model gives neither the pin's nor the locking disc's radius, so the arcs have no
    clearance.  Anything else (no such pivots, crank axis off the line, d <= p):
    no arcs."""
    ground = ctx.model.ground
    wheel = spec["body_j"]
    if wheel == ground:
        return []
    wp = _pivot(ctx, wheel)
    if wp is None:
        return []
    W, w0 = wp
    crank = None
    for el in ctx.model.constraint_elements():
        v = el.values or {}
        if el.type == "revolute_translational" and v.get("body_i") == wheel \
                and v.get("body_j") not in (ground, wheel, None):
            cp = _pivot(ctx, v["body_j"])
            if cp is not None:
                crank, (O, c0), pin = v["body_j"], cp, np.asarray(v["point_j"], dtype=float)
                break
    if crank is None:
        return []
    d = float(np.hypot(*(O - W)))
    p = float(np.hypot(*(pin - c0)))
    u = np.asarray(unit_vector(spec["axis"], f"{ctx.path}.axis"))
    si = np.asarray(spec["point_i"], dtype=float)
    held = np.asarray(spec["point_j"], dtype=float) - w0
    off = [abs(float(u[0] * (x - si)[1] - u[1] * (x - si)[0])) for x in (O, W)]
    if not d > p > 0.0 or max(off) > 1e-9 * d or not np.hypot(*held) > 0.0:
        return []
    beta = math.asin(p / d)                  # half the angle between the slots' mouths
    half = 0.5 * math.pi - beta              # the arc's half angle about its centre
    arcs = []
    for side in (1.0, -1.0):
        psi = math.atan2(side * held[1], side * held[0])
        c = w0 + d * np.array([math.cos(psi), math.sin(psi)])
        th = np.linspace(psi + math.pi - half, psi + math.pi + half, 49)
        arcs.append(Sketch(wheel, "curve", c + p * np.column_stack([np.cos(th), np.sin(th)]),
                           "lock"))
    return arcs


# =====================================================================================
# C7: revolute-translational joint (pin in a straight slot)
# =====================================================================================
class RevoluteTranslational(ConstraintType):
    """Revolute-translational joint: the pin ``P_j`` of body j stays on the line of
    body i through ``P_i`` with direction ``u = A_i u'`` (unit):
    ``Phi = n^T (r_j^P - r_i^P)``, ``n = R u`` (C7; Nikravesh (1988), §4.2.2, Eqs. 4.15-4.16).

    Roles: Nikravesh (1988), §4.2.2, Eqs. 4.15–4.16 puts the pin on body i and the line on body j; here
    (like ``translational``, whose first row this is) body i carries the line and
    body j the pin, i.e. the book's formulas with i and j exchanged.  With a unit
    ``u`` the row is the signed distance of the pin from the line.

    Derivation: with ``d = r_j + S_j - r_i - S_i`` and ``dn/dphi_i = R n = -u``:
    ``Phi_q = [-n^T, -u^T (r_j^P - r_i) | n^T, u^T S_j]``, ``nu = 0``,
    ``gamma = 2 w_i u^T (rd_j - rd_i) + w_i^2 n^T (r_j - r_i) + (w_i - w_j)^2 n^T S_j``
    (exact; identical to Nikravesh (1988), §4.2.2, Eqs. 4.15–4.16's ``w^2 n^T e + 2 w u^T edot + n^T (...)`` after
    the exchange).

    par = ``[u'_x, u'_y, s'_iPx, s'_iPy, s'_jPx, s'_jPy]``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "revolute_translational"
    description = "pin of body j sliding in a straight slot (line) of body i"
    equations = 1
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "body carrying the slot (line)"),
        "body_j": Param("body", "body carrying the pin"),
        "point_i": Param("vec2", "a point of the slot centre line, body i coordinates",
                         default=(0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec2", "pin centre, body j coordinates", default=(0.0, 0.0),
                         on="body_j", unit="length"),
        "axis": Param("vec2", "slot direction in body i coordinates (normalised)",
                      default=(1.0, 0.0)),
    }
    n_par = 6
    kernel = "revolute_translational"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:REVOLUTE_TRANSLATIONAL"
    labels = ("n",)
    local_labels = ("normal",)

    def check(self, spec, path):
        unit_vector(spec["axis"], f"{path}.axis")

    def pack(self, spec, ctx):
        ux, uy = unit_vector(spec["axis"], f"{ctx.path}.axis")
        si, sj = spec["point_i"], spec["point_j"]
        return [ux, uy, si[0], si[1], sj[0], sj[1]], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The slot: a groove along the line through ``point_i`` of body i, drawn
        over the travel of the pin (``point_j`` of body j) along it; on the ground,
        a guide line."""
        u = np.asarray(unit_vector(spec["axis"], f"{ctx.path}.axis"))
        si = np.asarray(spec["point_i"], dtype=float)
        kind = "segment" if spec["body_i"] == ctx.model.ground else "slot"
        return [Sketch(spec["body_i"], kind, np.array([si, si + u]),
                       "guide" if kind == "segment" else "slot",
                       follow=(spec["body_j"], tuple(map(float, spec["point_j"]))))] + \
            (locking_arcs(spec, ctx) if kind == "segment" else [])

    _geom = staticmethod(axis_geometry)

    def phi(self, par, qb, t, f):
        u, n, Si, Sj = self._geom(par, qb)
        d = qb[:, 1, :2] + Sj - qb[:, 0, :2] - Si
        return dot(n, d)[:, None]

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        u, n, Si, Sj = self._geom(par, qb)
        jac = np.zeros((ne, 1, 2, 3))
        jac[:, 0, 0, :2] = -n
        jac[:, 0, 0, 2] = -dot(u, qb[:, 1, :2] + Sj - qb[:, 0, :2])
        jac[:, 0, 1, :2] = n
        jac[:, 0, 1, 2] = dot(u, Sj)
        return jac

    def gamma(self, par, qb, qdb, t, f):
        u, n, Si, Sj = self._geom(par, qb)
        wi, wj = qdb[:, 0, 2], qdb[:, 1, 2]
        g = (2.0 * wi * dot(u, qdb[:, 1, :2] - qdb[:, 0, :2])
             + wi ** 2 * dot(n, qb[:, 1, :2] - qb[:, 0, :2])
             + (wi - wj) ** 2 * dot(n, Sj))
        return g[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``normal``: the force on body i (the slot) along the unit normal
        ``n = R A_i u'``, acting at the pin: ``-lam``.  Body j (the pin) receives
        ``+lam n`` at the pin (Nikravesh (1988), §8.4.3, §9.3, C7 with i/j exchanged)."""
        return -lam[:, 0:1].copy()


# =====================================================================================
# translational joint in the form of the DADS-2D kinematics report
# =====================================================================================
class Translational002(ConstraintType):
    """Translational joint in the form of the DADS-2D kinematics report (§2.4, Eqs.
    2.4.1, 2.4.4-2.4.5) — for reproducing that report only; prefer ``translational``.

    ``r_ij`` (body i) and ``r_ji`` (body j) go from each body origin to the line of
    translation, perpendicular to it.  With ``a_i = A_i r'_ij``, ``a_j = A_j r'_ji``,
    ``e = r_i - r_j``::

        Phi1 = (a_i + a_j)^T e + a_i^T a_i - a_j^T a_j   (= (a_i + a_j)^T (p_ij - p_ji),
                                                          p = foot points on the line)
        Phi2 = a_i x a_j = (R a_i)^T a_j                 (parallelism)

    Jacobian (``da/dphi = R a``; ``a^T a`` is constant):
    ``Phi1: [(a_i + a_j)^T, (R a_i)^T e | -(a_i + a_j)^T, (R a_j)^T e]``,
    ``Phi2: [0, -a_i^T a_j | 0, a_i^T a_j]``; ``nu = 0``;
    ``gamma1 = (w_i^2 a_i + w_j^2 a_j)^T e - 2 (w_i R a_i + w_j R a_j)^T (rd_i - rd_j)``,
    ``gamma2 = Phi2 (w_i - w_j)^2`` (Phi2 is a sine of phi_j - phi_i + const).

    Caveats (DADS-2D kinematics report, §2.4, Eqs. 2.4.1–2.4.5): singular when ``a_i + a_j = 0`` (origins at equal distances
    on opposite sides of the line: Phi1 vanishes identically) — rejected at
    compile time, naming ``r_ji``; Phi2 also admits a relative rotation by pi.

    par = ``[r'_ijx, r'_ijy, r'_jix, r'_jiy]``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "translational_002"
    #: r_ij, r_ji start at the body origins: refused on a body with ``center_of_mass``
    frame_fixed = {"r_ij": "body_i", "r_ji": "body_j"}
    description = "prismatic joint in the form of the DADS-2D kinematics report (for reproducing it)"
    equations = 2
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "r_ij": Param("vec2", "from the origin of body i to the line, perpendicular to "
                              "it (body i coordinates, non-zero)", on="body_i", unit="length"),
        "r_ji": Param("vec2", "from the origin of body j to the line, perpendicular to "
                              "it (body j coordinates, non-zero)", on="body_j", unit="length"),
    }
    n_par = 4
    kernel = "translational_002"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:TRANSLATIONAL_002"
    labels = ("n", "phi")
    local_labels = ("normal", "torque")

    def check(self, spec, path):
        for key in ("r_ij", "r_ji"):
            v = spec[key]
            if not math.hypot(*v) > 1e-12:
                raise ModelError(f"{path}.{key}", "must be a non-zero vector (from the body "
                                 "origin to the line, perpendicular to it): a body origin "
                                 "on the line cannot be described in the report's form")

    def pack(self, spec, ctx):
        rij, rji = spec["r_ij"], spec["r_ji"]
        qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
        ai, aj = rot1(qi[2], rij), rot1(qj[2], rji)
        ni, nj = math.hypot(*rij), math.hypot(*rji)
        # Singular iff a_i + a_j = 0 once assembled.  Assembly makes a_i, a_j
        # parallel (Phi2), so this happens iff |r_ij| = |r_ji| and the estimates
        # point them in opposite directions (e.g. the report's r_ij = -r_ji with equal body
        # angles; with a relative angle of pi the same data are regular).
        if abs(ni - nj) <= 1e-9 * max(ni, nj) and float(ai @ aj) < 0.0:
            raise ModelError(f"{ctx.path}.r_ji",
                             f"a_i + a_j = 0 in the initial configuration (r_ij = "
                             f"{list(rij)}, r_ji = {list(rji)}: equal lengths, opposite "
                             f"global directions): the report's translational form is singular "
                             f"here (Phi1 vanishes identically, DADS-2D kinematics report, §2.4, Eqs. 2.4.1–2.4.5); use "
                             f"type 'translational'")
        return [rij[0], rij[1], rji[0], rji[1]], []

    @staticmethod
    def _geom(par, qb):
        ai = rot(qb[:, 0, 2], par[:, 0:2])
        aj = rot(qb[:, 1, 2], par[:, 2:4])
        e = qb[:, 0, :2] - qb[:, 1, :2]
        return ai, aj, e

    def phi(self, par, qb, t, f):
        ai, aj, e = self._geom(par, qb)
        c = dot(par[:, 0:2], par[:, 0:2]) - dot(par[:, 2:4], par[:, 2:4])
        return np.stack([dot(ai + aj, e) + c, cross(ai, aj)], -1)

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        ai, aj, e = self._geom(par, qb)
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, :2] = ai + aj
        jac[:, 0, 0, 2] = dot(perp(ai), e)
        jac[:, 0, 1, :2] = -(ai + aj)
        jac[:, 0, 1, 2] = dot(perp(aj), e)
        jac[:, 1, 0, 2] = -dot(ai, aj)
        jac[:, 1, 1, 2] = dot(ai, aj)
        return jac

    def gamma(self, par, qb, qdb, t, f):
        ai, aj, e = self._geom(par, qb)
        wi, wj = qdb[:, 0, 2:3], qdb[:, 1, 2:3]
        ed = qdb[:, 0, :2] - qdb[:, 1, :2]
        g1 = dot(wi ** 2 * ai + wj ** 2 * aj, e) - 2.0 * dot(wi * perp(ai) + wj * perp(aj), ed)
        g2 = cross(ai, aj) * (wi[:, 0] - wj[:, 0]) ** 2
        return np.stack([g1, g2], -1)

    def reaction_local(self, par, qb, t, f, lam):
        """On body i: ``normal`` = the force along the unit normal ``a_i / |a_i|``
        (``lam1 (a_i + a_j)^T a_i / |a_i|``), ``torque`` = the moment about the
        foot point ``p_ji = r_j + a_j`` of body j on the line (for C4 the analogous
        point is ``P_j``).  Body j receives the opposite force and moment."""
        ai, aj, e = self._geom(par, qb)
        jac = self.jacobian(par, qb, t, f)
        g_i = np.einsum("emc,em->ec", jac[:, :, 0, :], lam)
        nhat = ai / np.hypot(ai[:, 0], ai[:, 1])[:, None]
        normal = dot(g_i[:, :2], nhat)
        torque = moment_about(g_i, qb[:, 0, :2], qb[:, 1, :2] + aj)
        return np.stack([normal, torque], -1)
