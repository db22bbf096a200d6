"""Planar drivers beyond D1-D4 (Nikravesh (1988), Prob. 4.24(a)).

``point_driver``: the position of a body point along a fixed global direction is a
prescribed function of time (constant speed: ``s = s0 + v t``).  Schema, packing and
NumPy reference; compiled kernel ``point_driver`` in ``mbcore._ext._planar``.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.base import ConstraintType, PackContext, perp, rot
from mbcore.elements.schema import Param

from ._common import dot, unit_vector


class PointDriver(ConstraintType):
    """``Phi = u^T (r_i + A_i s') - s(t)`` with ``u`` a fixed unit global direction
    (Nikravesh (1988), Prob. 4.24(a), derived here; generalises D2, the x/y point driver, to any
    direction).

    Derivation: ``dPhi/dt = u^T (rd_i + w_i R S) - s'`` so ``Phi_q = [u^T, u^T R S]``
    and ``nu = s'``; ``d2/dt2 (u^T S) = u^T (alpha R S - w^2 S)`` gives
    ``gamma = s'' + w_i^2 u^T S``.  ``direction`` is normalised (a zero vector is an
    error).  par = ``[u_x, u_y, s'_x, s'_y]``; one time function s(t).
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "point_driver"
    description = "drive the position of a body point along a fixed global direction"
    category = "driver"
    equations = 1
    bodies = ("body",)
    params = {
        "body": Param("body", "the driven body"),
        "direction": Param("vec2", "global direction u (normalised; non-zero)"),
        "point": Param("vec2", "the driven point, body coordinates (default: origin)",
                       default=(0.0, 0.0), on="body", unit="length"),
        "function": Param("function", "s(t) = u . r^P: number, polynomial, harmonic, "
                                      "table or expression"),
    }
    n_par = 4
    n_fun = 1
    kernel = "point_driver"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:POINT_DRIVER"
    labels = ("c",)
    local_labels = ("effort",)

    def check(self, spec, path):
        unit_vector(spec["direction"], f"{path}.direction")

    def pack(self, spec, ctx: PackContext):
        ux, uy = unit_vector(spec["direction"], f"{ctx.path}.direction")
        s = spec["point"]
        return [ux, uy, s[0], s[1]], [spec["function"]]

    def phi(self, par, qb, t, f):
        S = rot(qb[:, 0, 2], par[:, 2:4])
        return (dot(par[:, 0:2], qb[:, 0, :2] + S) - f[:, 0, 0])[:, None]

    def jacobian(self, par, qb, t, f):
        S = rot(qb[:, 0, 2], par[:, 2:4])
        jac = np.zeros((par.shape[0], 1, 1, 3))
        jac[:, 0, 0, :2] = par[:, 0:2]
        jac[:, 0, 0, 2] = dot(par[:, 0:2], perp(S))
        return jac

    def nu(self, par, qb, t, f):
        return f[:, 0, 1][:, None].copy()

    def gamma(self, par, qb, qdb, t, f):
        S = rot(qb[:, 0, 2], par[:, 2:4])
        return (f[:, 0, 2] + qdb[:, 0, 2] ** 2 * dot(par[:, 0:2], S))[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``effort``: the driving force on the body along ``u`` at the point,
        ``lam`` (the reaction is ``lam u`` applied at ``P``)."""
        return lam[:, 0:1].copy()
