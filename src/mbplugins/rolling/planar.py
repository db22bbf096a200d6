"""Planar disc rolling without slip on a fixed line (Nikravesh (1988), §3.5.3 for
rolling as a constraint; Prob. 4.24(b) for the velocity level).

The line holds the point ``p0`` and has the unit direction ``t``; its normal
``n = R_90 t`` points to the side the disc is on, and ``h = n . p0``.  With the disc's
centre ``w = r + A s'`` and ``u = A s' - R n`` (the contact point relative to the body
origin), the rows are

    normal      Phi = n . w - R - h              (position level)
    tangential  t . v_c = 0                      (velocity level: no slip)

with ``v_c = rdot + phidot R_90 u``.  Both are ``E . v_c`` with ``E = n, t`` (the
normal row because ``n . R_90 (R n) = 0``): Jacobian ``[E^T, E . R_90 u]`` and
``gamma = phidot^2 E . (A s')`` (``d/dt R_90 u = -phidot A s'`` with n fixed).  The
integrable form ``x + R phi = c`` of a centred disc on a straight line is the
special case; the velocity form also serves a disc whose centre is off its body
origin.  The reaction ``+Phi_q^T lam`` is the force ``lam_0 n + lam_1 t`` on the
disc at its contact point.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.base import ConstraintType, perp, rot
from mbcore.elements.schema import Param
from mbcore.errors import ModelError


def _geometry(par, qb):
    s = rot(qb[:, 0, 2], par[:, 0:2])            # A s'
    R, tl = par[:, 2], par[:, 3:5]
    n = perp(tl)
    u = s - R[:, None] * n
    return s, R, tl, n, u


class PlanarRollingDisc(ConstraintType):
    """A disc rolling without slip on a fixed line: contact height (position
    level) and no slip (velocity level), module docstring.

    par = ``[s'(2), R, t(2), h]``: the centre in body coordinates, the radius, the
    line's unit direction and offset ``h = n . p0``."""

    name = "rolling_disc"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_rolling.pyx)
    c_kernel = "mbplugins._ext._rolling:PLANAR_DISC"
    description = "disc rolling without slip on a fixed line (contact height + no slip)"
    category = "constraint"
    rows_stacked = True
    holonomic = (True, False)
    equations = 2
    bodies = ("body",)
    params = {
        "body": Param("body", "the disc"),
        "radius": Param("number", "R: disc radius", positive=True, unit="length"),
        "center": Param("vec2", "the disc's centre, body coordinates (default: the "
                                "body origin)", default=(0.0, 0.0), on="body", unit="length"),
        "line_point": Param("vec2", "a point of the line, global coordinates",
                            default=(0.0, 0.0), unit="length"),
        "line_direction": Param("vec2", "the line's direction, global; the disc is on "
                                        "its left", default=(1.0, 0.0)),
    }
    n_par = 6
    labels = ("normal", "tangential")
    local_labels = ("normal", "tangential")

    def check(self, spec, path):
        if np.hypot(*spec["line_direction"]) < 1e-12:
            raise ModelError(f"{path}.line_direction", "must be a non-zero vector")

    def pack(self, spec, ctx):
        tl = np.asarray(spec["line_direction"], dtype=float)
        tl = tl / np.hypot(*tl)
        n = perp(tl)
        h = float(np.dot(n, np.asarray(spec["line_point"], dtype=float)))
        return [*map(float, spec["center"]), float(spec["radius"]), *tl, h], []

    def phi(self, par, qb, t, f):
        s, R, tl, n, u = _geometry(par, qb)
        out = np.zeros((par.shape[0], 2))
        out[:, 0] = np.sum(n * (qb[:, 0, 0:2] + s), -1) - R - par[:, 5]
        return out

    def jacobian(self, par, qb, t, f):
        s, R, tl, n, u = _geometry(par, qb)
        pu = perp(u)
        J = np.empty((par.shape[0], 2, 1, 3))
        J[:, 0, 0, 0:2] = n
        J[:, 0, 0, 2] = np.sum(n * pu, -1)
        J[:, 1, 0, 0:2] = tl
        J[:, 1, 0, 2] = np.sum(tl * pu, -1)
        return J

    def nu(self, par, qb, t, f):
        return np.zeros((par.shape[0], 2))

    def gamma(self, par, qb, qdb, t, f):
        s, R, tl, n, u = _geometry(par, qb)
        w2 = qdb[:, 0, 2] ** 2
        return np.stack([w2 * np.sum(n * s, -1), w2 * np.sum(tl * s, -1)], axis=1)

    def reaction_local(self, par, qb, t, f, lam):
        """``normal``, ``tangential``: the contact force on the disc
        (``+Phi_q^T lam``) along ``n`` and ``t``, which are ``lam`` itself."""
        return lam.copy()


PLANAR_ROLLING_TYPES = [PlanarRollingDisc]
