"""``point_on_circle``: a body point stays on a global circle of radius R(t).

With ``P = r + A s'`` the point, ``c`` the centre (global), ``d = P - c``,
``L = |d|``, ``u = d / L`` and ``S = A s'``::

    Phi   = L - R(t)                                       (1 equation)
    Phi_q = [u^T, u . (R S)] = [u_x, u_y, S x u]
    nu    = -Phi_t = R'(t)
    gamma = R''(t) + w^2 u . S - (|Pd|^2 - (u . Pd)^2) / L,   Pd = rd + w R S

(``Phi_q qdd = gamma`` follows from ``Ldd = u . Pdd + (|Pd|^2 - (u . Pd)^2) / L`` and
``Pdd = rdd + wd R S - w^2 S``.)  The radius is a time function (a constant by
default): a driven radius makes the constraint rheonomic, which is what ``nu`` is
for.  The multiplier is the radial reaction: the force on the body is ``+u lam``
(reaction = ``+Phi_q^T lam``, mbcore docs/conventions.md), reported as
``radial_force`` (positive outwards).

``par`` (4 floats): ``[s'_x, s'_y, c_x, c_y]``; one time function R(t).
"""
from __future__ import annotations

import numpy as np

from mbcore.elements import ConstraintType, PackContext, perp, rot
from mbcore.errors import ElementEvaluationError
from mbcore.elements.schema import Param

#: below this distance from the centre the radial direction is undefined
MIN_DISTANCE = 1e-10
AT_CENTRE = ("the point is at the circle's centre (distance < 1e-10): the radial "
             "direction is undefined")


class PointOnCircle(ConstraintType):
    """A body point on a fixed global circle (module docstring)."""

    name = "point_on_circle"
    description = "a body point stays on a global circle of radius R(t) about a fixed centre"
    category = "constraint"
    equations = 1
    bodies = ("body",)
    params = {
        "body": Param("body", "the constrained body"),
        "point": Param("vec2", "the point (body coordinates)", default=(0.0, 0.0),
                       on="body"),
        "centre": Param("vec2", "centre of the circle (global coordinates)",
                        default=(0.0, 0.0)),
        "radius": Param("function", "R(t), a number or a time function"),
    }
    n_par = 4
    n_fun = 1
    labels = ("radial",)
    local_labels = ("radial_force",)

    def pack(self, spec, ctx: PackContext):
        s, c = spec["point"], spec["centre"]
        return [s[0], s[1], c[0], c[1]], [spec["radius"]]

    @staticmethod
    def _radial(par, qb):
        """S = A s' (ne, 2), d = P - c (ne, 2), L = |d|, u = d / L."""
        S = rot(qb[:, 0, 2], par[:, 0:2])
        d = qb[:, 0, :2] + S - par[:, 2:4]
        L = np.hypot(d[:, 0], d[:, 1])
        short = L < MIN_DISTANCE
        if np.any(short):
            raise ElementEvaluationError(int(np.nonzero(short)[0][0]), AT_CENTRE)
        return S, d, L, d / L[:, None]

    def phi(self, par, qb, t, f):
        S = rot(qb[:, 0, 2], par[:, 0:2])
        d = qb[:, 0, :2] + S - par[:, 2:4]
        return (np.hypot(d[:, 0], d[:, 1]) - f[:, 0, 0])[:, None]

    def jacobian(self, par, qb, t, f):
        S, d, L, u = self._radial(par, qb)
        J = np.empty((par.shape[0], 1, 1, 3))
        J[:, 0, 0, :2] = u
        J[:, 0, 0, 2] = S[:, 0] * u[:, 1] - S[:, 1] * u[:, 0]
        return J

    def nu(self, par, qb, t, f):
        return f[:, 0, 1:2].copy()

    def gamma(self, par, qb, qdb, t, f):
        S, d, L, u = self._radial(par, qb)
        w = qdb[:, 0, 2]
        Pd = qdb[:, 0, :2] + w[:, None] * perp(S)
        uPd = np.sum(u * Pd, -1)
        g = f[:, 0, 2] + w ** 2 * np.sum(u * S, -1) - (np.sum(Pd * Pd, -1) - uPd ** 2) / L
        return g[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """The radial reaction on the body (positive outwards) = the multiplier."""
        return np.asarray(lam, dtype=float)[:, :1].copy()


class CompiledPointOnCircle(PointOnCircle):
    """``point_on_circle_c``: the constraint with a compiled kernel.

    Same schema, packing and Python reference methods (inherited); ``c_kernel``
    names the PyCapsule ``mbcore.constraint_kernel`` of :mod:`mbcore_bushing._kernel`
    that mbcore's compiled assembly, kinematic step, right-hand sides and loops
    call without Python (mbcore_plugin.h).  The package's tests keep it equal to
    the Python methods to 1e-12."""

    name = "point_on_circle_c"
    description = ("a body point on a global circle of radius R(t), compiled kernel "
                   "(C contract mbcore_plugin.h)")
    c_kernel = "mbcore_bushing._kernel:CIRCLE"
