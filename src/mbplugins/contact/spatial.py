"""Compliant spatial contact of spheres and capsules with a plane or a sphere, with
a penalty normal force and regularised Coulomb friction: ``spatial:contact``, the
3-D counterpart of the planar ``contact`` (:mod:`mbplugins.planar.contact`).

One element is one pair: body i = ``body`` (the sphere or capsule), body j =
``surface`` (default the ground).  Body blocks ``qb`` (ne, 2, 7) = ``[r, p]``.

Geometry of one contact pair (a sphere of ``radius`` R centred at ``point`` s')::

    P = r_i + A_i s'                       sphere centre
    sphere_plane:  L = r_j + A_j l',  n = A_j n'    (a plane point and its unit normal)
                   d = n . (P - L),  delta = R - d,  X = P - d n   (X on the plane)
    sphere_sphere: S = r_j + A_j l'  (centre of the body-j sphere of radius R_j)
                   n = (P - S) / |P - S|  (from j to i),  delta = R + R_j - |P - S|
                   X = S + (R_j - delta / 2) n   (midway in the overlap)
    v_rel = (rdot_i + w_i x (X - r_i)) - (rdot_j + w_j x (X - r_j))   (global w)
    delta_dot = -n . v_rel,   v_t = v_rel - (n . v_rel) n             (slip velocity)

``capsule_plane`` (the segment from ``point`` to ``point_b`` swept by a sphere of
``radius``) is two ``sphere_plane`` pairs, one per end sphere, whose forces are
summed.  This is exact for a capsule on a plane: the signed distance of a point
of the segment to the plane is affine along the segment, so its minimum (the
deepest point) is at an end, and when both ends touch equally (the capsule lying
flat) the distributed contact is represented by its two end resultants.

Normal force ``f_n = max(0, k delta^e + f_d)`` with ``f_d`` by ``damping_model`` as
the planar type: ``hunt_crossley`` (default, Hunt & Crossley (1975)) ``c delta^e
delta_dot``; ``compression`` ``c delta_dot`` while approaching, 0 in rebound;
``linear`` ``c delta_dot``.  No force when ``delta <= 0``.  Friction::

    f_t = -mu f_n sat(|v_t| / v_eps) v_t / |v_t|

with ``sat = tanh`` (``friction_model: tanh``) or ``min(., 1)`` (``linear``),
evaluated as ``-mu f_n (sat(x) / x) v_t / v_eps`` with ``x = |v_t| / v_eps`` and
``sat(x) / x`` by its series ``1 - x^2/3 + 2 x^4/15`` (tanh) or 1 (linear) for
``x < 1e-4``: no division by zero, the limit ``-mu f_n v_t / v_eps`` at ``v_t = 0``.
The force ``F = f_n n + f_t`` acts at X on body i and ``-F`` at X on body j; the
generalised forces are ``[F, 2 G_i^T ((X - r_i) x F)]`` and ``[-F, -2 G_j^T ((X - r_j)
x F)]`` (Nikravesh (1988), Eqs. 11.1-11.7).

Energy: the elastic part ``k delta^(e+1) / (e+1)`` (summed over the two ends of a
capsule): the elastic force is exactly its ``-grad`` since ``delta_dot = -n .
v_rel`` is the time derivative of delta for both geometries (the normal through
X passes through the sphere centres).  Non-conservative power ``-(f_n - k
delta^e) delta_dot + f_t . v_t`` (damping, clipping and friction).

Outputs (``labels``): ``delta`` (penetration; negative: the gap), ``delta_rate``,
``normal_force``, ``slip_speed`` (``|v_t|``), ``friction_force`` (``|f_t|``),
``normal_force_a``, ``normal_force_b`` (the normal forces of the end spheres at
``point`` and ``point_b``).  For a capsule ``delta``, ``delta_rate`` and
``slip_speed`` are those of the deeper end (end a on a tie), ``normal_force`` and
``friction_force`` the sums over both ends; for the sphere shapes
``normal_force_a`` is ``normal_force`` and ``normal_force_b`` is 0.

par = ``[s'_a(3), s'_b(3), R, l'(3), n'(3), R_j, k, c, e, mu, v_eps,
damping_model, friction_model, shape]`` (models as codes 0, 1, 2 / 0, 1 and
shapes 0 sphere_plane, 1 sphere_sphere, 2 capsule_plane in the orders below); the
compiled kernel ``CONTACT`` of ``mbplugins._ext._contact`` uses the same.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.rotations import G as Gmat
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.elements.schema import Param

from ..planar.contact import DAMPING_MODELS, FRICTION_MODELS, check_law, law_params
from ..spatial import kinematics as SK
from ..spatial.forces import SpatialForceType

SHAPES = ("sphere_plane", "sphere_sphere", "capsule_plane")

#: sphere centres closer than this have no contact normal (sphere_sphere)
MIN_DISTANCE = 1e-12
COINCIDENT = ("the sphere centres coincide (distance < 1e-12): the contact normal is "
              "undefined")
#: below this x = |v_t| / v_eps, sat(x) / x is evaluated by its series
SMALL_SLIP = 1e-4

# packed parameter columns
SA, SB, RAD, LP, NP, RJ = slice(0, 3), slice(3, 6), 6, slice(7, 10), slice(10, 13), 13
K, C, E, MU, VEPS, DM, FM, SHAPE = 14, 15, 16, 17, 18, 19, 20, 21


def _mv(A, x):
    return np.einsum("ekl,el->ek", A, x)


class SpatialContact(SpatialForceType):
    """Compliant sphere/capsule contact with a plane or a sphere on another body
    (or the ground), with regularised Coulomb friction (module docstring)."""
    #: outputs and energy treat every element independently and never read time:
    #: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "contact"
    description = ("compliant sphere-plane, sphere-sphere and capsule-plane contact "
                   "with regularised Coulomb friction")
    kernel = "spatial_contact"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_contact.pyx)
    c_kernel = "mbplugins._ext._contact:CONTACT"
    bodies = ("body", "surface")
    params = {
        "body": Param("body", "body carrying the sphere or capsule"),
        "surface": Param("body", "body carrying the plane or the other sphere",
                         default="ground"),
        "shape": Param("choice", "sphere_plane, sphere_sphere or capsule_plane",
                       default="sphere_plane", choices=SHAPES),
        "point": Param("vec3", "sphere centre / first capsule end (body coordinates)",
                       default=(0.0, 0.0, 0.0), on="body", unit="length"),
        "point_b": Param("vec3", "second capsule end (capsule_plane only)",
                         required=False, on="body", unit="length"),
        "radius": Param("number", "sphere / capsule radius R (>= 0)", default=0.0,
                        unit="length"),
        "surface_point": Param("vec3", "a point of the plane / the centre of the "
                                       "surface sphere (surface coordinates)",
                               default=(0.0, 0.0, 0.0), on="surface", unit="length"),
        "surface_radius": Param("number", "radius of the surface sphere (sphere_sphere "
                                          "only, >= 0)", required=False, unit="length"),
        "normal": Param("axis3", "plane normal towards the free side (surface "
                                 "coordinates; plane shapes only; default [0, 0, 1])",
                        required=False),
        **law_params(1.5),
    }
    n_par = 22
    n_fun = 0
    labels = ("delta", "delta_rate", "normal_force", "slip_speed", "friction_force",
              "normal_force_a", "normal_force_b")

    def check(self, spec, path):
        check_law(spec, path, ("radius", "damping", "friction", "surface_radius"))
        shape = spec["shape"]
        if shape == "sphere_sphere":
            if spec.get("normal") is not None:
                raise ModelError(f"{path}.normal", "not used by shape sphere_sphere (the "
                                                   "normal joins the sphere centres)")
            if spec.get("surface_radius") is None:
                raise ModelError(f"{path}.surface_radius",
                                 "required key is missing (shape sphere_sphere)")
        elif spec.get("surface_radius") is not None:
            raise ModelError(f"{path}.surface_radius", f"only for shape sphere_sphere, "
                                                       f"not {shape}")
        if shape == "capsule_plane":
            if spec.get("point_b") is None:
                raise ModelError(f"{path}.point_b",
                                 "required key is missing (shape capsule_plane)")
        elif spec.get("point_b") is not None:
            raise ModelError(f"{path}.point_b", f"only for shape capsule_plane, not {shape}")

    def pack(self, spec, ctx):
        sa = SK.v3(spec["point"])
        sb = SK.v3(spec["point_b"]) if spec.get("point_b") is not None else sa
        nrm = spec.get("normal")
        nrm = (0.0, 0.0, 1.0) if nrm is None else nrm
        rj = spec.get("surface_radius")
        return [*sa, *sb, spec["radius"], *SK.v3(spec["surface_point"]), *nrm,
                0.0 if rj is None else rj, spec["stiffness"], spec["damping"],
                spec["exponent"], spec["friction"], spec["slip_velocity"],
                float(DAMPING_MODELS.index(spec["damping_model"])),
                float(FRICTION_MODELS.index(spec["friction_model"])),
                float(SHAPES.index(spec["shape"]))], []

    # ------------------------------------------------------------------ reference
    @staticmethod
    def _geometry(par, qb, s):
        """(P, n, X, delta) of the pair whose sphere is centred at s' = ``s``."""
        ri, rj = qb[:, 0, :3], qb[:, 1, :3]
        Ai, Aj = SK.A(qb[:, 0, 3:7]), SK.A(qb[:, 1, 3:7])
        P = ri + _mv(Ai, s)
        L = rj + _mv(Aj, par[:, LP])
        sph = np.abs(par[:, SHAPE] - 1.0) < 0.5
        # plane
        n_pl = _mv(Aj, par[:, NP])
        d = np.einsum("ek,ek->e", n_pl, P - L)
        # sphere-sphere
        dv = P - L
        dist = np.sqrt(np.einsum("ek,ek->e", dv, dv))
        bad = sph & ~(dist >= MIN_DISTANCE)
        if np.any(bad):
            raise ElementEvaluationError(int(np.nonzero(bad)[0][0]), COINCIDENT)
        n_sp = dv / np.where(sph, dist, 1.0)[:, None]
        n = np.where(sph[:, None], n_sp, n_pl)
        delta = np.where(sph, par[:, RAD] + par[:, RJ] - dist, par[:, RAD] - d)
        X = np.where(sph[:, None], L + (par[:, RJ] - 0.5 * delta)[:, None] * n_sp,
                     P - d[:, None] * n_pl)
        return n, X, delta

    def _pair(self, par, qb, qdb, s):
        """Everything of one contact pair: (Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft)
        with Xi = X - r_i, Xj = X - r_j."""
        n, X, delta = self._geometry(par, qb, s)
        Xi, Xj = X - qb[:, 0, :3], X - qb[:, 1, :3]
        wi = 2.0 * _mv(Gmat(qb[:, 0, 3:7]), qdb[:, 0, 3:7])
        wj = 2.0 * _mv(Gmat(qb[:, 1, 3:7]), qdb[:, 1, 3:7])
        vrel = (qdb[:, 0, :3] + np.cross(wi, Xi)) - (qdb[:, 1, :3] + np.cross(wj, Xj))
        vn = np.einsum("ek,ek->e", n, vrel)
        dd = -vn
        vt = vrel - vn[:, None] * n
        speed = np.sqrt(np.einsum("ek,ek->e", vt, vt))
        on = delta > 0.0
        pe = np.where(on, np.power(np.where(on, delta, 0.0), par[:, E]), 0.0)
        fel = par[:, K] * pe
        model, c = par[:, DM], par[:, C]
        fd = np.where(model < 0.5, c * pe * dd,
                      np.where(model < 1.5, np.where(dd > 0.0, c * dd, 0.0), c * dd))
        fn = np.where(on, np.maximum(fel + fd, 0.0), 0.0)
        x = speed / par[:, VEPS]
        small = x < SMALL_SLIP
        xs = np.where(small, 1.0, x)
        x2 = x * x
        ratio = np.where(par[:, FM] < 0.5,
                         np.where(small, 1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0,
                                  np.tanh(xs) / xs),
                         np.where(x <= 1.0, 1.0, 1.0 / xs))
        ft = (-par[:, MU] * fn * ratio / par[:, VEPS])[:, None] * vt
        return Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft

    def _pairs(self, par, qb, qdb):
        """The pairs of end a (every element) and end b (capsules; None if no
        capsule), end b masked to zero force on the other shapes."""
        a = self._pair(par, qb, qdb, par[:, SA])
        cap = par[:, SHAPE] > 1.5
        if not np.any(cap):
            return a, None, cap
        b = self._pair(par, qb, qdb, par[:, SB])
        return a, b, cap

    @staticmethod
    def _loads(qb, Xi, Xj, F):
        g = np.zeros((qb.shape[0], 2, 7))
        g[:, 0, :3] = F
        g[:, 0, 3:] = 2.0 * np.einsum("ekl,ek->el", Gmat(qb[:, 0, 3:7]), np.cross(Xi, F))
        g[:, 1, :3] = -F
        g[:, 1, 3:] = -2.0 * np.einsum("ekl,ek->el", Gmat(qb[:, 1, 3:7]), np.cross(Xj, F))
        return g

    def force(self, par, qb, qdb, t, f):
        a, b, cap = self._pairs(par, qb, qdb)
        Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft = a
        g = self._loads(qb, Xi, Xj, fn[:, None] * n + ft)
        if b is not None:
            Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft = b
            F = np.where(cap[:, None], fn[:, None] * n + ft, 0.0)
            g += self._loads(qb, Xi, Xj, F)
        return g

    def energy(self, par, qb, t, f):
        e1 = par[:, E] + 1.0
        out = np.zeros(par.shape[0])
        cap = par[:, SHAPE] > 1.5
        for s, use in ((par[:, SA], np.ones_like(cap)), (par[:, SB], cap)):
            if not np.any(use):
                continue
            delta = self._geometry(par, qb, s)[2]
            on = use & (delta > 0.0)
            out += np.where(on, par[:, K] * np.power(np.where(on, delta, 0.0), e1) / e1, 0.0)
        return out

    def outputs(self, par, qb, qdb, t, f):
        a, b, cap = self._pairs(par, qb, qdb)
        delta, dd, speed, fn = a[3], a[4], a[6], a[8]
        fa = fn
        ftm = np.sqrt(np.einsum("ek,ek->e", a[9], a[9]))
        fb = np.zeros_like(fn)
        if b is not None:
            deeper_b = cap & (b[3] > a[3])
            delta = np.where(deeper_b, b[3], delta)
            dd = np.where(deeper_b, b[4], dd)
            speed = np.where(deeper_b, b[6], speed)
            fb = np.where(cap, b[8], 0.0)
            ftm = ftm + np.where(cap, np.sqrt(np.einsum("ek,ek->e", b[9], b[9])), 0.0)
        return np.stack([delta, dd, fa + fb, speed, ftm, fa, fb], -1)

    def power_nc(self, par, qb, qdb, t, f):
        """Damping (and clipping) power ``-(f_n - k delta^e) delta_dot`` plus the
        friction power ``f_t . v_t`` of every pair (zero without contact)."""
        a, b, cap = self._pairs(par, qb, qdb)

        def pw(pair):
            Xi, Xj, n, delta, dd, vt, speed, fel, fn, ft = pair
            return np.where(delta > 0.0, -(fn - fel) * dd + np.einsum("ek,ek->e", ft, vt),
                            0.0)
        out = pw(a)
        if b is not None:
            out = out + np.where(cap, pw(b), 0.0)
        return out


FORCE_TYPES = [SpatialContact]
