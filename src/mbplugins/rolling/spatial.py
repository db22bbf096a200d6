"""Spatial wheel rolling without slip on a fixed plane: a thin disc (``tube_radius``
0) or a torus of radii ``R`` and ``rho`` (Neimark & Fufaev (1972), Ch. II: the
rolling disc).

Geometry, all in global axes: the plane has unit normal ``k`` and holds the point
``k h``; the wheel's centre is ``w = r + A s'`` and its axis ``a = A a'`` (unit).
With ``sigma = a.k`` and ``nu = sqrt(1 - sigma^2) = |a x k|`` the unit vector in the
wheel's plane from the contact point towards the centre's tube circle is
``d = (k - sigma a) / nu``, and the contact point is

    c = w - R d - rho k,         u = c - r = A s' - R d - rho k.

(``nu`` is computed as ``|a x k|``, accurate also for a steep lean.)  The frame at
the contact point is ``k`` (normal), ``e_l = (a x k) / nu``
(longitudinal: the direction of rolling) and ``e_t = k x e_l = (a - sigma k) / nu``
(lateral).  The rows are

    normal        Phi = k.w - R nu - rho - h                  (position level)
    longitudinal  e_l . v_c = 0                                (velocity level)
    lateral       e_t . v_c = 0                                (velocity level)

with ``v_c = rdot + omega x u`` the velocity of the wheel's material point at the
contact.  ``d/dt Phi = k . v_c`` identically, so every row is ``E . v_c`` with
``E`` one of ``k, e_l, e_t``: the Jacobian row on ``[rdot, omega']`` is
``[E^T, (A^T (u x E))^T]``, and ``gamma# = -Edot . v_c - E . (omega x udot)``
(the terms of ``d/dt (E . v_c)`` free of accelerations; ``Edot . v_c`` vanishes on
the constraint and is kept so that gamma is ``-Bdot v`` at any state), with

    udot = omega x A s' - R ddot,  ddot = ndot / nu + sigma sigmadot d / nu^2,
    ndot = -sigmadot a - sigma adot,  adot = omega x a,  sigmadot = k . adot,
    e_l dot = (adot x k) / nu + sigma sigmadot e_l / nu^2,  e_t dot = k x e_l dot.

The reaction ``+Phi_q^T lam`` is the force ``lam_0 k + lam_1 e_l + lam_2 e_t`` on
the wheel at its contact point: ``reaction_local`` reports it as the normal,
longitudinal and lateral contact forces.  The axis must not be normal to the plane
(``nu`` > 0: a disc lying flat has no contact point).
"""
from __future__ import annotations

import numpy as np

from mbcore.elements import SpatialConstraintType
from mbcore.elements.rotations import A as _A
from mbcore.elements.schema import Param
from mbcore.errors import ElementEvaluationError, ModelError

#: nu below this: the axis is (nearly) normal to the plane, no contact point
NU_MIN = 1e-8

REASON = ("the wheel's axis is normal to the plane (the disc lies flat): the "
          "contact point is undefined")


def _cross(a, b):
    return np.cross(a, b)


def _dot(a, b):
    return np.einsum("ek,ek->e", a, b)


class _Frame:
    """The contact geometry of a group at one configuration (and velocity)."""

    def __init__(self, par, qb, vb=None):
        p = qb[:, 0, 3:7]
        A = _A(p)
        self.A = A
        sl, al = par[:, 0:3], par[:, 3:6]
        R, rho, k = par[:, 6], par[:, 7], par[:, 8:11]
        self.R, self.rho, self.k, self.h = R, rho, k, par[:, 11]
        self.s = np.einsum("ekl,el->ek", A, sl)             # A s'
        a = np.einsum("ekl,el->ek", A, al)
        self.a = a
        sigma = _dot(a, k)
        axk = _cross(a, k)
        nu = np.sqrt(_dot(axk, axk))            # |a x k|: accurate for a steep lean
        bad = np.flatnonzero(~(nu > NU_MIN))
        if bad.size:
            raise ElementEvaluationError(int(bad[0]), REASON)
        self.sigma, self.nu = sigma, nu
        self.d = (k - sigma[:, None] * a) / nu[:, None]
        self.el = axk / nu[:, None]
        self.et = _cross(k, self.el)
        self.u = self.s - R[:, None] * self.d - rho[:, None] * k
        self.w = qb[:, 0, 0:3] + self.s
        if vb is None:
            return
        om = np.einsum("ekl,el->ek", A, vb[:, 0, 3:6])       # omega, global
        adot = _cross(om, a)
        sd = _dot(k, adot)
        ndot = -sd[:, None] * a - sigma[:, None] * adot
        ddot = ndot / nu[:, None] + (sigma * sd / nu ** 2)[:, None] * self.d
        self.udot = _cross(om, self.s) - R[:, None] * ddot
        self.eldot = (_cross(adot, k) / nu[:, None]
                      + (sigma * sd / nu ** 2)[:, None] * self.el)
        self.etdot = _cross(k, self.eldot)
        self.vc = vb[:, 0, 0:3] + _cross(om, self.u)
        self.om = om

    def directions(self):
        return (self.k, self.el, self.et)


class RollingDisc(SpatialConstraintType):
    """A wheel (thin disc or torus) rolling without slip on a fixed plane: the
    contact height at position level, no slip along and across the rolling
    direction at velocity level (module docstring; Neimark & Fufaev (1972)).

    par = ``[s'(3), a'(3), R, rho, k(3), h]``: the centre and axis in body
    coordinates, the radii, the plane's unit normal and offset ``h = k . p0``."""

    name = "rolling_disc"
    body_kind = "spatial"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_rolling.pyx)
    c_kernel = "mbplugins._ext._rolling:SPATIAL_DISC"
    description = ("wheel (thin disc or torus) rolling without slip on a fixed plane: "
                   "contact height + no-slip rows (nonholonomic)")
    category = "constraint"
    rows_stacked = True
    holonomic = (True, False, False)
    equations = 3
    bodies = ("body",)
    params = {
        "body": Param("body", "the wheel"),
        "radius": Param("number", "R: wheel radius (centre to the tread's centre "
                                  "circle)", positive=True, unit="length"),
        "axis": Param("axis3", "the wheel's spin axis, body coordinates"),
        "tube_radius": Param("number", "rho: radius of the tread's cross-section "
                                       "(torus); 0 for a thin disc", default=0.0,
                             unit="length"),
        "center": Param("vec3", "the wheel's centre, body coordinates (default: the "
                                "body origin)", default=(0.0, 0.0, 0.0), on="body",
                        unit="length"),
        "plane_point": Param("vec3", "a point of the plane, global coordinates",
                             default=(0.0, 0.0, 0.0), unit="length"),
        "plane_normal": Param("axis3", "the plane's normal, global (the side the wheel "
                                       "is on)", default=(0.0, 0.0, 1.0)),
    }
    n_par = 12
    labels = ("normal", "longitudinal", "lateral")
    local_labels = ("normal", "longitudinal", "lateral")

    def check(self, spec, path):
        rho = float(spec.get("tube_radius") or 0.0)
        if not rho >= 0.0:
            raise ModelError(f"{path}.tube_radius", f"must be >= 0, got {rho:g}")

    def pack(self, spec, ctx):
        k = np.asarray(spec["plane_normal"], dtype=float)
        h = float(np.dot(k, np.asarray(spec["plane_point"], dtype=float)))
        return [*map(float, spec["center"]), *map(float, spec["axis"]),
                float(spec["radius"]), float(spec.get("tube_radius") or 0.0),
                *map(float, k), h], []

    def phi(self, par, qb, t, f):
        F = _Frame(par, qb)
        out = np.zeros((par.shape[0], 3))
        out[:, 0] = _dot(F.k, F.w) - F.R * F.nu - F.rho - F.h
        return out

    def jacobian_v(self, par, qb, t, f):
        F = _Frame(par, qb)
        J = np.empty((par.shape[0], 3, 1, 6))
        for i, E in enumerate(F.directions()):
            J[:, i, 0, 0:3] = E
            J[:, i, 0, 3:6] = np.einsum("elk,el->ek", F.A, _cross(F.u, E))
        return J

    def nu(self, par, qb, t, f):
        return np.zeros((par.shape[0], 3))

    def gamma_v(self, par, qb, vb, t, f):
        F = _Frame(par, qb, vb)
        wu = _cross(F.om, F.udot)
        out = np.empty((par.shape[0], 3))
        out[:, 0] = -_dot(F.k, wu)
        out[:, 1] = -_dot(F.eldot, F.vc) - _dot(F.el, wu)
        out[:, 2] = -_dot(F.etdot, F.vc) - _dot(F.et, wu)
        return out

    def reaction_local(self, par, qb, t, f, lam):
        """``normal``, ``longitudinal``, ``lateral``: the contact force on the wheel
        (``+Phi_q^T lam``, docs/conventions.md) along ``k``, ``e_l`` and ``e_t``,
        which are ``lam`` itself (the rows are unit directions dotted with the
        contact point's velocity)."""
        return lam.copy()

    def contact_point(self, par, qb):
        """Global contact points (ne, 3) and the frames ``(k, e_l, e_t)``."""
        F = _Frame(par, qb)
        return qb[:, 0, 0:3] + F.u, F.directions()


ROLLING_TYPES = [RollingDisc]
