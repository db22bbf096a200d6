"""Curve pairs with an artificial coordinate theta (Nikravesh (1988), §4.2.5, Eqs. 4.26–4.27, §4.2.6, Eq. 4.30).

* ``cam_point``  — cam body i carries a curve, a follower point of body j stays on
  it (C10; Nikravesh (1988), §4.2.5, Eqs. 4.26-4.27);
* ``cam_roller`` — a roller (radius rho, centre Q on follower j) rolls/slides on
  the cam curve of body i (C11; Eq. 4.28);
* ``cam_flat``   — a flat-faced follower j (face through Q with normal n') touches
  the cam curve of body i (C12; Eq. 4.29);
* ``slot``       — a pin P of body i in a curved slot of body j (point-follower,
  C13; §4.2.6, Eq. 4.30).

Each element adds one coordinate, ``<element>.theta``, the curve parameter of the
contact point (massless; it follows the bodies' coordinates in q).  Curves:
:mod:`.curves` (``c'``, ``c'_th``, ``c'_thth``, ``c'_ththth`` in body coordinates).
Global curve quantities on the curve's body k: ``c = A_k c'``, ``g = A_k c'_th``,
``h = A_k c'_thth``, ``kk = A_k c'_ththth``; ``thd`` = theta-dot.  All Jacobians
and gammas are the machine-checked forms of Nikravesh (1988), §4.2.5, Eqs. 4.26–4.27, §4.2.6, Eq. 4.30 (re-derived
from the definitions; the scanned book is unreliable).  Contact is permanent (no
separation logic) and frictionless; the theta row of the equations of motion makes
the contact force normal to the curve (``Phi_theta^T lam = 0``).

Packed parameters (identical for the compiled kernels ``cam_point``, ``cam_roller``,
``cam_flat``, ``slot`` in ``mbcore._ext._planar``): ``par[0:4]`` the type's
geometry (see each class), ``par[4:4 + CURVE_SIZE]`` the curve block of
:mod:`.curves`.
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.elements.base import ConstraintType, PackContext, Sketch, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.schema import Param

from ._common import dot, rot1, unit_vector
from .curves import (CURVE_SIZE, CurveParam, circle_points, curve_points, evaluate,
                     nearest_theta, support_theta)

GEOM = 4                     # geometry floats before the curve block
N_PAR = GEOM + CURVE_SIZE


def _curve_global(par, qk, th):
    """c, g, h, kk (each (ne, 2)) of the curves of par on bodies qk (ne, 3)."""
    c0, c1, c2, c3 = evaluate(par[:, GEOM:], th)
    phi = qk[:, 2]
    return rot(phi, c0), rot(phi, c1), rot(phi, c2), rot(phi, c3)


def _sign(x):
    """+1 / -1 (0 counts as +1)."""
    return np.where(x < 0.0, -1.0, 1.0)


class _CurvePair(ConstraintType):
    """Common declarations of the curve pairs: 2 equations, one extra coordinate."""

    equations = 2
    bodies = ("body_i", "body_j")
    n_par = N_PAR
    n_fun = 0
    extra = ("theta",)
    local_labels = ("normal",)

    def initial_extra(self, spec, ctx: PackContext):
        if spec.get("theta") is not None:
            return [float(spec["theta"])]
        try:
            th = self._initial_theta(spec, ctx)
        except (FloatingPointError, ValueError, ZeroDivisionError):   # pragma: no cover
            th = float("nan")
        if not math.isfinite(th):   # pragma: no cover - the search always finds one
            raise ModelError(f"{ctx.path}.theta", "cannot find the contact point on the "
                                                  "curve in the initial configuration: "
                                                  "give theta")
        return [th]

    def nu(self, par, qb, t, f, *, qe=None):
        """Scleronomic: ``nu = 0``."""
        return np.zeros((par.shape[0], 2))

    #: the body parameter of the body that carries the curve
    curve_on = "body_i"

    def frame_shift(self, spec, shift, ctx: PackContext):
        """The points (default hook) and the curve's ``center`` moved by -s_C of the
        body that carries it (a reference frame away from the centroid)."""
        out = super().frame_shift(spec, shift, ctx)
        s = shift(spec[self.curve_on])
        if s is not None:
            data = spec["curve"].to_spec()
            data["center"] = [float(x) for x in np.asarray(spec["curve"].center) - s]
            out["curve"] = data
        return out

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The cam outline: the curve of body i over its parameter range."""
        return [Sketch(spec["body_i"], "curve", curve_points(spec["curve"]), "cam")]

    @staticmethod
    def _to_local(q, p):
        """Body coordinates (body at q = [x, y, phi]) of the global point p."""
        c, s = math.cos(q[2]), math.sin(q[2])
        d = np.asarray(p, float) - q[:2]
        return np.array([c * d[0] + s * d[1], -s * d[0] + c * d[1]])


# =====================================================================================
# C10: cam with a point follower
# =====================================================================================
class CamPoint(_CurvePair):
    """Point follower: the follower point ``P_j`` lies on the cam curve of body i
    (C10; Nikravesh (1988), Eqs. 4.26-4.27).

    ``Phi = r_i + c - r_j - S_j`` (2 rows); ``Phi_q = [I2, R c | -I2, -R S_j]``,
    ``Phi_theta = g``; ``nu = 0``;
    ``gamma = w_i^2 c - 2 w_i thd R g - thd^2 h - w_j^2 S_j``.

    par = ``[s'_jx, s'_jy, 0, 0, curve...]``.
    """

    name = "cam_point"
    description = "cam curve on body i with a point follower on body j (theta coordinate)"
    kernel = "cam_point"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:CAM_POINT"
    labels = ("x", "y")
    params = {
        "body_i": Param("body", "the cam (carries the curve)"),
        "body_j": Param("body", "the follower"),
        "curve": CurveParam("the cam outline, body i coordinates"),
        "point_j": Param("vec2", "follower point, body j coordinates", default=(0.0, 0.0),
                         on="body_j", unit="length"),
        "theta": Param("number", "initial estimate of the contact's curve parameter "
                                 "(default: the curve point nearest the follower point)",
                       required=False),
    }

    def pack(self, spec, ctx):
        sj = spec.get("point_j") or (0.0, 0.0)
        return [sj[0], sj[1], 0.0, 0.0, *spec["curve"].block], []

    def _initial_theta(self, spec, ctx):
        qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
        P = qj[:2] + rot1(qj[2], spec.get("point_j") or (0.0, 0.0))
        return nearest_theta(spec["curve"], self._to_local(qi, P))

    def phi(self, par, qb, t, f, *, qe):
        c, *_ = _curve_global(par, qb[:, 0], qe[:, 0])
        Sj = rot(qb[:, 1, 2], par[:, 0:2])
        return qb[:, 0, :2] + c - qb[:, 1, :2] - Sj

    def jacobian(self, par, qb, t, f, *, qe):
        ne = par.shape[0]
        c, g, _, _ = _curve_global(par, qb[:, 0], qe[:, 0])
        Sj = rot(qb[:, 1, 2], par[:, 0:2])
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, 0] = jac[:, 1, 0, 1] = 1.0
        jac[:, :, 0, 2] = perp(c)
        jac[:, 0, 1, 0] = jac[:, 1, 1, 1] = -1.0
        jac[:, :, 1, 2] = -perp(Sj)
        return jac, g[:, :, None].copy()

    def gamma(self, par, qb, qdb, t, f, *, qe, qde):
        c, g, h, _ = _curve_global(par, qb[:, 0], qe[:, 0])
        Sj = rot(qb[:, 1, 2], par[:, 0:2])
        wi, wj, thd = qdb[:, 0, 2:3], qdb[:, 1, 2:3], qde[:, 0:1]
        return wi ** 2 * c - 2.0 * wi * thd * perp(g) - thd ** 2 * h - wj ** 2 * Sj

    def reaction_local(self, par, qb, t, f, lam, qe=None):
        """``normal``: the contact force on the follower, ``abs(lam)``, positive when
        it presses the follower away from the cam (the force on the follower, ``-lam``
        at ``P_j``, points away from the curve's ``center``).  The cam receives
        ``+lam`` at the contact point.  ``lam`` is normal to the curve whenever it
        comes from the equations of motion (the theta row)."""
        Q = qb[:, 0, :2] + rot(qb[:, 0, 2], par[:, GEOM + 3:GEOM + 5])
        P = qb[:, 1, :2] + rot(qb[:, 1, 2], par[:, 0:2])
        mag = np.hypot(lam[:, 0], lam[:, 1])
        return (_sign(-dot(lam, P - Q)) * mag)[:, None]


# =====================================================================================
# C11: cam with a roller follower
# =====================================================================================
class CamRoller(_CurvePair):
    """Roller follower: a circle of radius rho centred at ``Q_j`` touches the cam
    curve of body i (C11; Nikravesh (1988), Eq. 4.28).

    ``d = r_j + S_Q - r_i - c`` (contact point to roller centre);
    ``Phi1 = g^T d`` (d normal to the outline), ``Phi2 = d^T d - rho^2``.
    Jacobian rows ``[x_i y_i | phi_i | x_j y_j | phi_j | theta]``::

        Phi1: -g^T | (R g)^T d - g^T R c | g^T | g^T R S_Q | h^T d - g^T g
        Phi2: -2 d^T | -2 d^T R c | 2 d^T | 2 d^T R S_Q | -2 d^T g

    ``nu = 0``; with ``ddot = rd_j + w_j R S_Q - rd_i - w_i R c - thd g``,
    ``gdot = w_i R g + thd h``, ``d2q = -w_j^2 S_Q + w_i^2 c - 2 w_i thd R g - thd^2 h``,
    ``g2q = -w_i^2 g + 2 w_i thd R h + thd^2 kk``:
    ``gamma1 = -(g2q^T d + 2 gdot^T ddot + g^T d2q)``,
    ``gamma2 = -2 ddot^T ddot - 2 d^T d2q``.

    par = ``[s'_Qx, s'_Qy, rho, 0, curve...]``.
    """

    name = "cam_roller"
    description = "cam curve on body i with a roller follower on body j (theta coordinate)"
    kernel = "cam_roller"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:CAM_ROLLER"
    labels = ("t", "d")
    params = {
        "body_i": Param("body", "the cam (carries the curve)"),
        "body_j": Param("body", "the follower"),
        "curve": CurveParam("the cam outline, body i coordinates"),
        "radius": Param("number", "roller radius rho > 0", positive=True, unit="length"),
        "point_j": Param("vec2", "roller centre, body j coordinates", default=(0.0, 0.0),
                         on="body_j", unit="length"),
        "theta": Param("number", "initial estimate of the contact's curve parameter "
                                 "(default: the curve point nearest the roller centre)",
                       required=False),
    }

    def pack(self, spec, ctx):
        sq = spec.get("point_j") or (0.0, 0.0)
        return [sq[0], sq[1], float(spec["radius"]), 0.0, *spec["curve"].block], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The cam outline and the roller (a circle of radius rho about ``point_j``)."""
        roller = circle_points(spec.get("point_j") or (0.0, 0.0), float(spec["radius"]))
        return [*super().sketch(spec, ctx), Sketch(spec["body_j"], "circle", roller, "roller")]

    def _initial_theta(self, spec, ctx):
        qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
        Q = qj[:2] + rot1(qj[2], spec.get("point_j") or (0.0, 0.0))
        return nearest_theta(spec["curve"], self._to_local(qi, Q))

    @staticmethod
    def _geom(par, qb, th):
        c, g, h, kk = _curve_global(par, qb[:, 0], th)
        SQ = rot(qb[:, 1, 2], par[:, 0:2])
        d = qb[:, 1, :2] + SQ - qb[:, 0, :2] - c
        return c, g, h, kk, SQ, d

    def phi(self, par, qb, t, f, *, qe):
        c, g, h, kk, SQ, d = self._geom(par, qb, qe[:, 0])
        return np.stack([dot(g, d), dot(d, d) - par[:, 2] ** 2], -1)

    def jacobian(self, par, qb, t, f, *, qe):
        ne = par.shape[0]
        c, g, h, kk, SQ, d = self._geom(par, qb, qe[:, 0])
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, :2] = -g
        jac[:, 0, 0, 2] = dot(perp(g), d) - dot(g, perp(c))
        jac[:, 0, 1, :2] = g
        jac[:, 0, 1, 2] = dot(g, perp(SQ))
        jac[:, 1, 0, :2] = -2.0 * d
        jac[:, 1, 0, 2] = -2.0 * dot(d, perp(c))
        jac[:, 1, 1, :2] = 2.0 * d
        jac[:, 1, 1, 2] = 2.0 * dot(d, perp(SQ))
        jx = np.stack([dot(h, d) - dot(g, g), -2.0 * dot(d, g)], -1)[:, :, None]
        return jac, jx

    def gamma(self, par, qb, qdb, t, f, *, qe, qde):
        c, g, h, kk, SQ, d = self._geom(par, qb, qe[:, 0])
        wi, wj, thd = qdb[:, 0, 2:3], qdb[:, 1, 2:3], qde[:, 0:1]
        dd = qdb[:, 1, :2] + wj * perp(SQ) - qdb[:, 0, :2] - wi * perp(c) - thd * g
        gd = wi * perp(g) + thd * h
        d2q = -wj ** 2 * SQ + wi ** 2 * c - 2.0 * wi * thd * perp(g) - thd ** 2 * h
        g2q = -wi ** 2 * g + 2.0 * wi * thd * perp(h) + thd ** 2 * kk
        g1 = -(dot(g2q, d) + 2.0 * dot(gd, dd) + dot(g, d2q))
        g2 = -2.0 * dot(dd, dd) - 2.0 * dot(d, d2q)
        return np.stack([g1, g2], -1)

    def reaction_local(self, par, qb, t, f, lam, qe=None):
        """``normal``: the contact force pressing the roller centre away from the
        contact point (positive = compression), ``2 rho lam2``.  The reaction on the
        follower is ``lam1 g + 2 lam2 d``; when assembled ``abs(d) = rho`` and
        ``g ⟂ d``, and the theta row of the equations of motion gives ``lam1 = 0``
        (``(h^T d - g^T g) lam1 = 0``), so this is the whole contact force."""
        return (2.0 * par[:, 2] * lam[:, 1])[:, None]


# =====================================================================================
# C12: cam with a flat-faced follower
# =====================================================================================
class CamFlat(_CurvePair):
    """Flat-faced follower: the face of body j (through ``Q_j``, unit normal
    ``n = A_j n'``) is tangent to the cam curve of body i (C12; Nikravesh (1988), Eq. 4.29).

    ``d = r_i + c - r_j - S_Q``; ``Phi1 = g^T n`` (cam tangent along the face),
    ``Phi2 = d^T n`` (contact point on the face).  Jacobian rows
    ``[x_i y_i | phi_i | x_j y_j | phi_j | theta]``::

        Phi1: 0 | (R g)^T n | 0 | g^T R n | h^T n
        Phi2: n^T | n^T R c | -n^T | -n^T R S_Q + d^T R n | n^T g

    ``nu = 0``; with ``ddot = rd_i + w_i R c + thd g - rd_j - w_j R S_Q``,
    ``ndot = w_j R n``, ``d2q = -w_i^2 c + 2 w_i thd R g + thd^2 h + w_j^2 S_Q`` and
    ``gdot``, ``g2q`` as in ``cam_roller``:
    ``gamma1 = -(g2q^T n + 2 gdot^T ndot - w_j^2 g^T n)``,
    ``gamma2 = -(d2q^T n + 2 ddot^T ndot - w_j^2 d^T n)``.

    par = ``[s'_Qx, s'_Qy, n'_x, n'_y, curve...]`` (n' unit).
    """

    name = "cam_flat"
    description = "cam curve on body i with a flat-faced follower on body j (theta coordinate)"
    kernel = "cam_flat"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:CAM_FLAT"
    labels = ("t", "n")
    params = {
        "body_i": Param("body", "the cam (carries the curve)"),
        "body_j": Param("body", "the follower"),
        "curve": CurveParam("the cam outline, body i coordinates"),
        "point_j": Param("vec2", "a point of the face, body j coordinates",
                         default=(0.0, 0.0), on="body_j", unit="length"),
        "normal": Param("vec2", "normal of the face, body j coordinates (normalised; "
                                "either sense)"),
        "theta": Param("number", "initial estimate of the contact's curve parameter "
                                 "(default: the curve point nearest the face, where its "
                                 "tangent is parallel to the face)", required=False),
    }

    def pack(self, spec, ctx):
        sq = spec.get("point_j") or (0.0, 0.0)
        n = unit_vector(spec["normal"], f"{ctx.path}.normal")
        return [sq[0], sq[1], n[0], n[1], *spec["curve"].block], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The cam outline and the follower's face: a segment through ``point_j``
        normal to ``normal``, as long as the cam is wide (its outline's diameter
        about the curve's centre), centred on ``point_j``."""
        cam = curve_points(spec["curve"])
        half = float(np.max(np.hypot(*(cam - np.asarray(spec["curve"].center)).T)))
        n = np.asarray(unit_vector(spec["normal"], f"{ctx.path}.normal"))
        q = np.asarray(spec.get("point_j") or (0.0, 0.0), dtype=float)
        face = np.array([q - half * perp(n), q + half * perp(n)])
        return [*super().sketch(spec, ctx), Sketch(spec["body_j"], "segment", face, "face")]

    def _initial_theta(self, spec, ctx):
        qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
        curve = spec["curve"]
        n = rot1(qj[2], unit_vector(spec["normal"], f"{ctx.path}.normal"))
        Qf = qj[:2] + rot1(qj[2], spec.get("point_j") or (0.0, 0.0))
        Qc = qi[:2] + rot1(qi[2], curve.center)
        sigma = 1.0 if n @ (Qc - Qf) >= 0.0 else -1.0
        u = -sigma * n                      # from the cam towards the face
        c, s = math.cos(qi[2]), math.sin(qi[2])
        return support_theta(curve, np.array([c * u[0] + s * u[1], -s * u[0] + c * u[1]]))

    @staticmethod
    def _geom(par, qb, th):
        c, g, h, kk = _curve_global(par, qb[:, 0], th)
        SQ = rot(qb[:, 1, 2], par[:, 0:2])
        n = rot(qb[:, 1, 2], par[:, 2:4])
        d = qb[:, 0, :2] + c - qb[:, 1, :2] - SQ
        return c, g, h, kk, SQ, n, d

    def phi(self, par, qb, t, f, *, qe):
        c, g, h, kk, SQ, n, d = self._geom(par, qb, qe[:, 0])
        return np.stack([dot(g, n), dot(d, n)], -1)

    def jacobian(self, par, qb, t, f, *, qe):
        ne = par.shape[0]
        c, g, h, kk, SQ, n, d = self._geom(par, qb, qe[:, 0])
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, 2] = dot(perp(g), n)
        jac[:, 0, 1, 2] = dot(g, perp(n))
        jac[:, 1, 0, :2] = n
        jac[:, 1, 0, 2] = dot(n, perp(c))
        jac[:, 1, 1, :2] = -n
        jac[:, 1, 1, 2] = -dot(n, perp(SQ)) + dot(d, perp(n))
        jx = np.stack([dot(h, n), dot(n, g)], -1)[:, :, None]
        return jac, jx

    def gamma(self, par, qb, qdb, t, f, *, qe, qde):
        c, g, h, kk, SQ, n, d = self._geom(par, qb, qe[:, 0])
        wi, wj, thd = qdb[:, 0, 2:3], qdb[:, 1, 2:3], qde[:, 0:1]
        dd = qdb[:, 0, :2] + wi * perp(c) + thd * g - qdb[:, 1, :2] - wj * perp(SQ)
        nd = wj * perp(n)
        d2q = -wi ** 2 * c + 2.0 * wi * thd * perp(g) + thd ** 2 * h + wj ** 2 * SQ
        gd = wi * perp(g) + thd * h
        g2q = -wi ** 2 * g + 2.0 * wi * thd * perp(h) + thd ** 2 * kk
        w2 = wj[:, 0] ** 2
        g1 = -(dot(g2q, n) + 2.0 * dot(gd, nd) - w2 * dot(g, n))
        g2 = -(dot(d2q, n) + 2.0 * dot(dd, nd) - w2 * dot(d, n))
        return np.stack([g1, g2], -1)

    def reaction_local(self, par, qb, t, f, lam, qe=None):
        """``normal``: the contact force pressing the face away from the cam
        (positive = compression), ``sigma lam2`` with ``sigma = +1`` when ``n``
        points from the face towards the cam's ``center`` (else -1).  The reaction
        on the follower is the force ``-lam2 n`` (plus the couple of ``lam1``, which
        the theta row of the equations of motion makes zero)."""
        Qc = qb[:, 0, :2] + rot(qb[:, 0, 2], par[:, GEOM + 3:GEOM + 5])
        Qf = qb[:, 1, :2] + rot(qb[:, 1, 2], par[:, 0:2])
        n = rot(qb[:, 1, 2], par[:, 2:4])
        return (_sign(dot(n, Qc - Qf)) * lam[:, 1])[:, None]


# =====================================================================================
# C13: point-follower (pin in a curved slot)
# =====================================================================================
class Slot(_CurvePair):
    """Pin in a curved slot: the pin ``P_i`` of body i lies on the slot's centre
    curve, fixed in body j (C13; Nikravesh (1988), §4.2.6, Eq. 4.30).

    ``Phi = r_i + S_i - r_j - c`` with ``c = A_j c'(theta)``;
    ``Phi_q = [I2, R S_i | -I2, -R c]``, ``Phi_theta = -g``; ``nu = 0``;
    ``gamma = w_i^2 S_i - w_j^2 c + 2 w_j thd R g + thd^2 h``.
    No end-of-slot stop is modelled.

    par = ``[s'_ix, s'_iy, 0, 0, curve...]`` (the curve is on body j).
    """

    name = "slot"
    description = "pin of body i in a curved slot of body j (theta coordinate)"
    curve_on = "body_j"
    kernel = "slot"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:SLOT"
    labels = ("x", "y")
    params = {
        "body_i": Param("body", "the body carrying the pin"),
        "body_j": Param("body", "the body carrying the slot (curve)"),
        "curve": CurveParam("the slot's centre line, body j coordinates"),
        "point_i": Param("vec2", "pin centre, body i coordinates", default=(0.0, 0.0),
                         on="body_i", unit="length"),
        "theta": Param("number", "initial estimate of the pin's curve parameter "
                                 "(default: the curve point nearest the pin)",
                       required=False),
    }

    def pack(self, spec, ctx):
        si = spec.get("point_i") or (0.0, 0.0)
        return [si[0], si[1], 0.0, 0.0, *spec["curve"].block], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The slot: a groove along the curve of body j over its parameter range."""
        return [Sketch(spec["body_j"], "slot", curve_points(spec["curve"]), "slot")]

    def _initial_theta(self, spec, ctx):
        qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
        P = qi[:2] + rot1(qi[2], spec.get("point_i") or (0.0, 0.0))
        return nearest_theta(spec["curve"], self._to_local(qj, P))

    def phi(self, par, qb, t, f, *, qe):
        c, *_ = _curve_global(par, qb[:, 1], qe[:, 0])
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        return qb[:, 0, :2] + Si - qb[:, 1, :2] - c

    def jacobian(self, par, qb, t, f, *, qe):
        ne = par.shape[0]
        c, g, _, _ = _curve_global(par, qb[:, 1], qe[:, 0])
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, 0] = jac[:, 1, 0, 1] = 1.0
        jac[:, :, 0, 2] = perp(Si)
        jac[:, 0, 1, 0] = jac[:, 1, 1, 1] = -1.0
        jac[:, :, 1, 2] = -perp(c)
        return jac, -g[:, :, None]

    def gamma(self, par, qb, qdb, t, f, *, qe, qde):
        c, g, h, _ = _curve_global(par, qb[:, 1], qe[:, 0])
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        wi, wj, thd = qdb[:, 0, 2:3], qdb[:, 1, 2:3], qde[:, 0:1]
        return wi ** 2 * Si - wj ** 2 * c + 2.0 * wj * thd * perp(g) + thd ** 2 * h

    def reaction_local(self, par, qb, t, f, lam, qe=None):
        """``normal``: the force of the slot on the pin, ``abs(lam)``, positive when
        it pushes the pin away from the curve's ``center`` (the pin body receives
        ``+lam`` at the pin, the slot body ``-lam`` at the contact)."""
        Q = qb[:, 1, :2] + rot(qb[:, 1, 2], par[:, GEOM + 3:GEOM + 5])
        P = qb[:, 0, :2] + rot(qb[:, 0, 2], par[:, 0:2])
        mag = np.hypot(lam[:, 0], lam[:, 1])
        return (_sign(dot(lam, P - Q)) * mag)[:, None]


CAM_TYPES = [CamPoint, CamRoller, CamFlat, Slot]
