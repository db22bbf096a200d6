"""Planar gear pairs (Nikravesh (1988), §4.2.3: spur gears, rack and pinion).

Both are velocity-ratio constraints at the pitch point, integrated once; angles are
the accumulated body angles (never wrapped).  Neither enforces the
centre distance / contact: other joints (revolutes to a common body, a
translational guide) must keep the pitch circles / line tangent (Nikravesh (1988), §4.2.3).
Schema, packing and NumPy reference per class; compiled kernels ``gear`` and
``rack_pinion`` in ``mbcore._ext._planar`` use the same packed parameters.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.base import ConstraintType, PackContext, Sketch, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.schema import Param

from ._common import dot, rot1, unit_vector
from .curves import circle_points


def _gear_centre(ctx: PackContext, gear: str, carrier: str) -> np.ndarray:
    """Body coordinates (of ``gear``, possibly the ground) of the gear's centre: the
    point of its revolute joint to the carrier, else of its first revolute joint,
    else the body's origin (Nikravesh (1988), §4.2.3: the centres are held by other
    joints)."""
    from .constraints import Revolute
    found = None
    for el in ctx.model.elements["joints"]:
        ends = (el.values.get("body_i"), el.values.get("body_j"))
        if el.type != "revolute" or gear not in ends:
            continue
        par, _ = Revolute().pack(el.values, PackContext(ctx.model, el.path))
        point = np.asarray(par[0:2] if ends[0] == gear else par[2:4], dtype=float)
        if carrier in ends:
            return point
        if found is None:
            found = point
    return found if found is not None else np.zeros(2)


class Gear(ConstraintType):
    """Spur gear pair i-j with pitch radii ``rho_i, rho_j``, centres fixed on a
    carrier k (default: the ground, i.e. fixed centres) — C8; Nikravesh (1988), §4.2.3
    Eqs. 4.17-4.18, Prob. 4.21::

        Phi = rho_i [(phi_i - phi_i0) - (phi_k - phi_k0)]
              + s rho_j [(phi_j - phi_j0) - (phi_k - phi_k0)]

    ``s = +1`` for external gears (opposite senses), ``s = -1`` for an internal
    (ring) gear pair (same sense).  Derivation: in the carrier frame the pitch-point
    velocities ``rho_i (w_i - w_k)`` and ``rho_j (w_j - w_k)`` must be opposite
    (external) or equal (internal); integrating gives Phi.  With carrier = ground
    (``phi_k = 0``) it is Eq. 4.17.  Jacobian: ``rho_i`` at phi_i, ``s rho_j`` at
    phi_j, ``-(rho_i + s rho_j)`` at phi_k; ``nu = gamma = 0``.  The reference
    angles ``phi_i0, phi_j0, phi_k0`` are the bodies' initial estimates (the mesh
    phase at assembly).

    par = ``[c_i, c_j, c0]`` with ``c_i = rho_i``, ``c_j = s rho_j``,
    ``c0 = -(c_i phi_i0 + c_j phi_j0 - (c_i + c_j) phi_k0)``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "gear"
    description = "spur gear pair (external or internal), fixed centres or on a carrier"
    equations = 1
    bodies = ("body_i", "body_j", "carrier")
    params = {
        "body_i": Param("body", "first gear"),
        "body_j": Param("body", "second gear (the ring gear for kind: internal)"),
        "radius_i": Param("number", "pitch radius of gear i", positive=True, unit="length"),
        "radius_j": Param("number", "pitch radius of gear j", positive=True, unit="length"),
        "kind": Param("choice", "external (default) or internal", default="external",
                      choices=("external", "internal")),
        "carrier": Param("body", "body carrying both gear centres (default: the ground, "
                                 "fixed centres)", default="ground"),
    }
    n_par = 3
    kernel = "gear"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:GEAR"
    labels = ("mesh",)
    local_labels = ("force",)
    category = "joint"

    def check(self, spec, path):
        if spec["kind"] == "internal" and spec["radius_i"] == spec["radius_j"]:
            raise ModelError(f"{path}.radius_j", "an internal gear pair needs different "
                             "pitch radii (equal radii would make the gears coaxial)")

    def pack(self, spec, ctx: PackContext):
        ci = float(spec["radius_i"])
        cj = float(spec["radius_j"]) * (1.0 if spec["kind"] == "external" else -1.0)
        pi = ctx.initial(spec["body_i"])[2]
        pj = ctx.initial(spec["body_j"])[2]
        pk = ctx.initial(spec["carrier"])[2]
        return [ci, cj, -(ci * pi + cj * pj - (ci + cj) * pk)], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The pitch circles of both gears, about their centres (see
        :func:`_gear_centre`)."""
        return [Sketch(spec[b], "circle",
                       circle_points(_gear_centre(ctx, spec[b], spec["carrier"]),
                                     float(spec[r])), "pitch")
                for b, r in (("body_i", "radius_i"), ("body_j", "radius_j"))]

    def phi(self, par, qb, t, f):
        return (par[:, 0] * qb[:, 0, 2] + par[:, 1] * qb[:, 1, 2]
                - (par[:, 0] + par[:, 1]) * qb[:, 2, 2] + par[:, 2])[:, None]

    def jacobian(self, par, qb, t, f):
        jac = np.zeros((par.shape[0], 1, 3, 3))
        jac[:, 0, 0, 2] = par[:, 0]
        jac[:, 0, 1, 2] = par[:, 1]
        jac[:, 0, 2, 2] = -(par[:, 0] + par[:, 1])
        return jac

    def gamma(self, par, qb, qdb, t, f):
        return np.zeros((par.shape[0], 1))

    def reaction_local(self, par, qb, t, f, lam):
        """``force``: the tangential tooth force, ``lam``: the reaction moments are
        ``rho_i lam`` on gear i, ``s rho_j lam`` on gear j and ``-(rho_i + s rho_j)
        lam`` on the carrier (Nikravesh (1988), §8.4.3, §9.3), i.e. a tooth force ``lam`` at the pitch point
        turning gear i counter-clockwise when positive.  Its translational effect on
        the centres is not represented (the constraint has no x, y columns), so the
        bearing reactions omit it."""
        return lam[:, 0:1].copy()


class RackPinion(ConstraintType):
    """Rack and pinion, general planar form (C9; Nikravesh (1988), §4.2.3, Eqs. 4.19-4.20, Prob. 4.15; the
    general form derived here).

    Pinion i with centre ``C`` (``s'_C``) and pitch radius rho; rack j with pitch
    line through ``P`` (``s'_P``) and unit direction ``u = A_j u'``::

        Phi = u^T (r_i^C - r_j^P) + rho_s (phi_i - phi_j) - c0

    ``rho_s = +rho`` when the pinion lies on the left of ``u`` (the side of
    ``R u``; e.g. above a rack along +x), ``-rho`` on the right.  Derivation: no
    slip at the pitch point ``K = C - rho_s R u`` (tangential velocities of both
    bodies equal) gives ``d/dt [u^T e + rho_s (phi_i - phi_j)] = 0`` when ``R u . e
    = rho_s`` (pitch line tangent to the pitch circle); ``c0`` makes Phi vanish at
    the initial estimates.  With ``phi_j = 0, u' = [1, 0]`` it is Eq. 4.20 (4.19
    with the pinion centre fixed).

    Jacobian: ``[u^T, u^T R S_C + rho_s | -u^T, (R u)^T e - u^T R S_P - rho_s]``;
    ``nu = 0``; ``gamma = w_j^2 u^T e - 2 w_j (R u)^T edot + u^T (w_i^2 S_C -
    w_j^2 S_P)`` with ``edot = rd_i + w_i R S_C - rd_j - w_j R S_P``.

    par = ``[s'_Cx, s'_Cy, s'_Px, s'_Py, u'_x, u'_y, rho_s, c0]``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "rack_pinion"
    description = "rack and pinion (pinion i rolls without slip on the pitch line of rack j)"
    equations = 1
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "the pinion"),
        "body_j": Param("body", "the rack"),
        "radius": Param("number", "pitch radius of the pinion", positive=True, unit="length"),
        "point_i": Param("vec2", "pinion centre, body i coordinates", default=(0.0, 0.0),
                         on="body_i", unit="length"),
        "point_j": Param("vec2", "a point of the rack's pitch line, body j coordinates",
                         default=(0.0, 0.0), on="body_j", unit="length"),
        "axis": Param("vec2", "direction of the rack in body j coordinates (normalised)",
                      default=(1.0, 0.0)),
        "side": Param("choice", "side of the rack the pinion is on, looking along axis: "
                                "left (default) or right", default="left",
                      choices=("left", "right")),
    }
    n_par = 8
    kernel = "rack_pinion"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:RACK_PINION"
    labels = ("mesh",)
    local_labels = ("force",)

    def check(self, spec, path):
        unit_vector(spec["axis"], f"{path}.axis")

    def pack(self, spec, ctx: PackContext):
        ux, uy = unit_vector(spec["axis"], f"{ctx.path}.axis")
        rho = float(spec["radius"]) * (1.0 if spec["side"] == "left" else -1.0)
        sc, sp = spec["point_i"], spec["point_j"]
        qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
        u = rot1(qj[2], (ux, uy))
        e = qi[:2] + rot1(qi[2], sc) - qj[:2] - rot1(qj[2], sp)
        c0 = float(u @ e + rho * (qi[2] - qj[2]))
        return [sc[0], sc[1], sp[0], sp[1], ux, uy, rho, c0], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The pinion's pitch circle and the rack's pitch line (through ``point_j``
        along ``axis``, drawn over the travel of the pinion's centre, which is
        ``radius`` from it on the pinion's ``side``)."""
        u = np.asarray(unit_vector(spec["axis"], f"{ctx.path}.axis"))
        p = np.asarray(spec["point_j"], dtype=float)
        return [Sketch(spec["body_i"], "circle",
                       circle_points(spec["point_i"], float(spec["radius"])), "pitch"),
                Sketch(spec["body_j"], "segment", np.array([p, p + u]), "pitch",
                       follow=(spec["body_i"], tuple(map(float, spec["point_i"]))),
                       offset=float(spec["radius"]) * (1.0 if spec["side"] == "left" else -1.0))]

    @staticmethod
    def _geom(par, qb):
        SC = rot(qb[:, 0, 2], par[:, 0:2])
        SP = rot(qb[:, 1, 2], par[:, 2:4])
        u = rot(qb[:, 1, 2], par[:, 4:6])
        e = qb[:, 0, :2] + SC - qb[:, 1, :2] - SP
        return SC, SP, u, e

    def phi(self, par, qb, t, f):
        SC, SP, u, e = self._geom(par, qb)
        return (dot(u, e) + par[:, 6] * (qb[:, 0, 2] - qb[:, 1, 2]) - par[:, 7])[:, None]

    def jacobian(self, par, qb, t, f):
        SC, SP, u, e = self._geom(par, qb)
        jac = np.zeros((par.shape[0], 1, 2, 3))
        jac[:, 0, 0, :2] = u
        jac[:, 0, 0, 2] = dot(u, perp(SC)) + par[:, 6]
        jac[:, 0, 1, :2] = -u
        jac[:, 0, 1, 2] = dot(perp(u), e) - dot(u, perp(SP)) - par[:, 6]
        return jac

    def gamma(self, par, qb, qdb, t, f):
        SC, SP, u, e = self._geom(par, qb)
        wi, wj = qdb[:, 0, 2:3], qdb[:, 1, 2:3]
        ed = qdb[:, 0, :2] + wi * perp(SC) - qdb[:, 1, :2] - wj * perp(SP)
        w2j = wj[:, 0] ** 2
        g = (w2j * dot(u, e) - 2.0 * wj[:, 0] * dot(perp(u), ed)
             + dot(u, wi ** 2 * SC - wj ** 2 * SP))
        return g[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``force``: the tangential tooth force on the pinion along the rack
        direction ``u``, ``lam``.  The reaction ``Phi_q^T lam`` is exactly the force
        ``lam u`` on the pinion and ``-lam u`` on the rack, both at the pitch point
        ``K = r_i^C - rho_s R u`` (verified in the tests).  The separating (normal)
        tooth force is not represented."""
        return lam[:, 0:1].copy()
