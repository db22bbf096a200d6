"""Velocity-level (nonholonomic) driver: speed along a body-fixed direction
(Nikravesh (1988), Prob. 4.24(b)).

``u_i^T rd_i^P = v(t)`` with ``u_i = A_i u'`` a unit direction fixed in body i and P a
body point — a knife edge or a wheel that cannot slip sideways when ``v = 0`` along
the wheel axis.  Not integrable: there is no position equation (``holonomic =
False``; ``phi`` is 0), the velocity row is ``[u^T, u^T R S_P]`` and

    gamma = vdot - w (R u)^T (rd_i + w R S_P) + w^2 u^T S_P

(differentiating ``u^T (rd + w R S)`` with ``ud = w R u``, ``Sd = w R S``).  Usable in
dynamic analyses with the DI, CS and projection formulations; the kinematic
analysis (positions solved from the constraints) and coordinate partitioning
refuse it.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.base import ConstraintType, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.schema import Param


class BodySpeedDriver(ConstraintType):
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True
    name = "body_speed_driver"
    description = ("speed of a body point along a body-fixed direction = v(t) "
                   "(nonholonomic: knife edge, no side slip)")
    category = "driver"
    holonomic = False
    equations = 1
    bodies = ("body",)
    params = {
        "body": Param("body", "the body"),
        "direction": Param("vec2", "direction u' in body axes (normalised)"),
        "point": Param("vec2", "body point P (default: origin)", default=(0.0, 0.0),
                       on="body", unit="length"),
        "function": Param("function", "v(t), default 0 (no motion along u)", default=0.0),
    }
    n_par = 4
    n_fun = 1
    labels = ("v",)
    local_labels = ("force",)

    def check(self, spec, path):
        if np.hypot(*spec["direction"]) < 1e-12:
            raise ModelError(f"{path}.direction", "must be a non-zero vector")

    def pack(self, spec, ctx):
        u = np.asarray(spec["direction"], float)
        u = u / np.hypot(*u)
        s = spec["point"]
        return [u[0], u[1], s[0], s[1]], [spec["function"]]

    def phi(self, par, qb, t, f):
        return np.zeros((par.shape[0], 1))

    def jacobian(self, par, qb, t, f):
        u = rot(qb[:, 0, 2], par[:, 0:2])
        S = rot(qb[:, 0, 2], par[:, 2:4])
        J = np.zeros((par.shape[0], 1, 1, 3))
        J[:, 0, 0, :2] = u
        J[:, 0, 0, 2] = np.sum(u * perp(S), -1)
        return J

    def nu(self, par, qb, t, f):
        return f[:, 0, 0:1].copy()          # the velocity-level equation: u^T rd_P = v(t)

    def gamma(self, par, qb, qdb, t, f):
        u = rot(qb[:, 0, 2], par[:, 0:2])
        S = rot(qb[:, 0, 2], par[:, 2:4])
        w = qdb[:, 0, 2]
        vP = qdb[:, 0, :2] + w[:, None] * perp(S)
        g = f[:, 0, 1] - w * np.sum(perp(u) * vP, -1) + w * w * np.sum(u * S, -1)
        return g[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``force`` = lam: the force along u at P (the side force of a knife edge)."""
        return lam.copy()


NONHOLONOMIC_TYPES = [BodySpeedDriver]
