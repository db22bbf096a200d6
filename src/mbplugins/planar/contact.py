"""Unilateral point(disc)-to-line contact with a penalty normal force and
regularised Coulomb friction (Nikravesh (1988), Probs. 10.21-10.24 bouncing
ball, 9.10-9.11 tyre, 10.29 brake pad, 10.31 tyre slip).

Geometry (body i = ``body``, the disc; body j = ``line_body``, default ground)::

    r_P = r_i + A_i s'_P                 disc centre / contact point of a point follower
    r_L = r_j + A_j l',   n = A_j n'      a point of the line and its unit normal
    d     = n . (r_P - r_L)               signed distance (positive on the normal's side)
    delta = radius - d                    penetration; no force when delta <= 0
    X     = r_P - d n                     contact point (projection of P on the line)
    v_rel = (rd_i + w_i R (X - r_i)) - (rd_j + w_j R (X - r_j))
    delta_dot = -n . v_rel,  t = (n_y, -n_x),  v_t = t . v_rel   (slip velocity)

Normal force ``f_n = max(0, k delta^e + f_d)`` with ``f_d`` by ``damping_model``:

* ``hunt_crossley`` (default): ``f_d = c delta^e delta_dot`` — continuous at impact
  (no force jump at delta = 0), restitution depends on the impact speed.
* ``compression``: ``f_d = c delta_dot`` while ``delta_dot > 0`` (approach), 0 in
  rebound — the two-branch damper of the bouncing ball (Nikravesh (1988), Prob. 10.21, 
  reading, an assumption); the force jumps to ``c v0`` at impact.
* ``linear``: ``f_d = c delta_dot`` in both phases (Kelvin-Voigt; e.g. the tyre of
  Nikravesh (1988), Prob. 10.31 with k = 175000, c = 7000), clipped.

Clipping at 0 means the contact never pulls.  Friction (on the disc, along t):
``f_t = -mu f_n sat(v_t / v_eps)`` with ``sat = tanh`` (``friction_model: tanh``) or
the linear ramp ``clip(., -1, 1)`` (``linear``).  The force ``f_n n + f_t t`` acts at
X on the disc and its opposite at X on the line body, so the normal force has no
moment about P and the friction produces the rolling moment ``(X - r_i) x f``.

Energy: the elastic part ``k delta^(e+1) / (e+1)`` (g = -grad V for it, any
point X on the normal through P gives that); non-conservative power
``-(f_n - k delta^e) delta_dot + f_t v_t`` (damping + clipping, and friction,
``<= 0`` except for the clipping, which only removes a pulling force).

par = ``[s'_x, s'_y, radius, l'_x, l'_y, n'_x, n'_y, k, c, e, mu, v_eps,
damping_model, friction_model]`` (models as codes 0, 1, 2 and 0, 1 in the order
above); the compiled kernel ``CONTACT`` of ``mbplugins._ext._planar_forces`` uses the same.

Force Jacobians (:meth:`Contact.force_jacobian`, kernel in
ext/plugins/_planar_forces.pyx): the law is piecewise smooth — it switches at ``delta =
0``, at ``delta_dot = 0`` (``compression``), at ``f_n = 0`` (clipping) and at
``|v_t| = v_eps`` (``linear`` friction) — and K, C are the exact derivatives of
the active branch (zero out of contact, in the clipped and in the saturated
ranges); at a switching point itself they are those of one side.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from mbcore.elements.base import ForceType, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.schema import Param
from mbcore.elements.units import looks_like_quantity, power_law_quantity

from ._common import cross, unit_vector

DAMPING_MODELS = ("hunt_crossley", "compression", "linear")


def perp_cols(a):
    """R a for derivative blocks (ne, 2, k)."""
    return np.stack([-a[:, 1], a[:, 0]], 1)


def _cross_cols(da, b):
    """d(a) x b for a derivative block da (ne, 2, k) and b (ne, 2)."""
    return da[:, 0] * b[:, 1:2] - da[:, 1] * b[:, 0:1]


def _cross_cols2(a, db):
    """a x d(b) for a (ne, 2) and a derivative block db (ne, 2, k)."""
    return a[:, 0:1] * db[:, 1] - a[:, 1:2] * db[:, 0]
FRICTION_MODELS = ("tanh", "linear")


class LawValue(float):
    """A coefficient of the contact law given with a unit: its value in the model's
    units, the ``text`` given and the ``power`` of length its unit is per (pickled and
    copied as a plain float)."""

    text: str
    power: float

    def __new__(cls, value: float, text: str, power: float) -> "LawValue":
        out = super().__new__(cls, value)
        out.text, out.power = text, power
        return out

    def __reduce__(self):
        return float, (float(self),)


class LawCoefficient(Param):
    """A coefficient of the contact law whose dimension depends on the exponent e
    and the damping model: ``numerator/length^p`` (the stiffness k of ``k delta^e``:
    force/length^e; the damping c of ``c delta^e delta_dot``: force*time/length^(e+1),
    of ``c delta_dot``: force*time/length).  A value with a unit converts by the power
    of length its unit has (``"2e5 N/m^1.5"``: p = 1.5,
    :func:`mbcore.elements.units.power_law_quantity`) and :func:`check_law` compares
    that power with the one of the element's exponent."""

    def __init__(self, numerator: str, doc: str, **kw: Any) -> None:
        super().__init__("number", doc, **kw)
        self.numerator = numerator

    def validate(self, value: Any, path: str, ctx: Any) -> Any:
        if not looks_like_quantity(value):
            return super().validate(value, path, ctx)
        v, power = power_law_quantity(value, self.numerator, path,
                                      getattr(ctx, "units", None))
        return LawValue(v, value, power)


def _law_power(spec, key: str) -> float:
    """The power of length in the dimension of ``key`` of the contact law."""
    if key == "stiffness":
        return spec["exponent"]
    return spec["exponent"] + 1.0 if spec.get("damping_model") == "hunt_crossley" else 1.0


def check_law(spec, path: str, nonnegative=("radius", "damping", "friction")) -> None:
    """The contact law's values: k > 0, e >= 1, v_eps > 0, the ``nonnegative`` keys
    (those given) >= 0, and a stiffness or damping given with a unit of the power of
    length that e and the damping model give it (:class:`LawCoefficient`); a
    ModelError names the key path."""
    if not spec["stiffness"] > 0:
        raise ModelError(f"{path}.stiffness", f"must be > 0, got {spec['stiffness']:g}")
    if not spec["exponent"] >= 1:
        raise ModelError(f"{path}.exponent", f"must be >= 1, got {spec['exponent']:g}")
    for key, top in (("stiffness", "force"), ("damping", "force*time")):
        v = spec.get(key)
        if isinstance(v, LawValue) and not math.isclose(v.power, _law_power(spec, key),
                                                        rel_tol=1e-12):
            want = _law_power(spec, key)
            why = (f"exponent {spec['exponent']:g}" if key == "stiffness" else
                   f"damping_model {spec.get('damping_model')}, exponent "
                   f"{spec['exponent']:g}")
            raise ModelError(f"{path}.{key}", f"{v.text!r} is {top}/length^{v.power:g}; "
                                              f"the contact law ({why}) needs "
                                              f"{top}/length^{want:g}")
    if not spec["slip_velocity"] > 0:
        raise ModelError(f"{path}.slip_velocity",
                         f"must be > 0, got {spec['slip_velocity']:g}")
    for key in nonnegative:
        if spec.get(key) is not None and spec[key] < 0:
            raise ModelError(f"{path}.{key}", f"must be >= 0, got {spec[key]:g}")


def law_params(exponent: float) -> dict:
    """The parameters of the contact law (stiffness, damping, friction), shared by
    the planar and the spatial contact types; ``exponent``: the default of e."""
    return {
        "stiffness": LawCoefficient("force", "k (> 0), force/length^e"),
        "exponent": Param("number", "e (>= 1): elastic force k delta^e (1.5: Hertz)",
                          default=exponent, unit="1"),
        "damping": LawCoefficient("force*time", "c (>= 0), see damping_model: "
                                  "force*time/length^(e+1) (hunt_crossley), else "
                                  "force*time/length", default=0.0),
        "damping_model": Param("choice", "hunt_crossley (c delta^e delta_dot), "
                                         "compression (c delta_dot while approaching) or "
                                         "linear (c delta_dot)",
                               default="hunt_crossley", choices=DAMPING_MODELS),
        "friction": Param("number", "Coulomb coefficient mu (>= 0)", default=0.0, unit="1"),
        "slip_velocity": Param("number", "regularisation velocity v_eps (> 0)",
                               default=1e-3, unit="length/time"),
        "friction_model": Param("choice", "tanh (mu f_n tanh(|v_t| / v_eps)) or linear "
                                          "(ramp saturating at |v_t| = v_eps)",
                                default="tanh", choices=FRICTION_MODELS),
    }


class Contact(ForceType):
    """Unilateral penalty contact of a body point (a disc of ``radius``) with a
    line fixed on another body or the ground, with Coulomb friction (F9)."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "contact"
    description = "unilateral point/disc-to-line penalty contact with regularised friction"
    bodies = ("body", "line_body")
    params = {
        "body": Param("body", "body carrying the contact point (the disc)"),
        "point": Param("vec2", "the point / disc centre (body coordinates)",
                       default=(0.0, 0.0), on="body", unit="length"),
        "radius": Param("number", "disc radius (>= 0; 0: a point)", default=0.0, unit="length"),
        "line_body": Param("body", "body carrying the line", default="ground"),
        "line_point": Param("vec2", "a point of the line (line_body coordinates)",
                            default=(0.0, 0.0), on="line_body", unit="length"),
        "normal": Param("vec2", "line normal towards the free side (line_body "
                                "coordinates; normalised)", default=(0.0, 1.0)),
        **law_params(1.0),
    }
    n_par = 14
    n_fun = 0
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "contact"
    c_kernel = "mbplugins._ext._planar_forces:CONTACT"
    labels = ("delta", "delta_rate", "normal_force", "slip_velocity", "friction_force")

    def check(self, spec, path):
        check_law(spec, path)
        unit_vector(spec["normal"], f"{path}.normal")

    def pack(self, spec, ctx):
        s, lp = spec["point"], spec["line_point"]
        nx, ny = unit_vector(spec["normal"], f"{ctx.path}.normal")
        return [s[0], s[1], spec["radius"], lp[0], lp[1], nx, ny, spec["stiffness"],
                spec["damping"], spec["exponent"], spec["friction"], spec["slip_velocity"],
                float(DAMPING_MODELS.index(spec["damping_model"])),
                float(FRICTION_MODELS.index(spec["friction_model"]))], []

    # ------------------------------------------------------------------ reference
    @staticmethod
    def _geometry(par, qb):
        S = rot(qb[:, 0, 2], par[:, 0:2])
        n = rot(qb[:, 1, 2], par[:, 5:7])
        rL = qb[:, 1, :2] + rot(qb[:, 1, 2], par[:, 3:5])
        d = np.sum(n * (qb[:, 0, :2] + S - rL), -1)
        return S, n, d, par[:, 2] - d

    def _parts(self, par, qb, qdb):
        S, n, d, delta = self._geometry(par, qb)
        Xi = S - d[:, None] * n                       # X - r_i
        Xj = qb[:, 0, :2] + Xi - qb[:, 1, :2]         # X - r_j
        vrel = ((qdb[:, 0, :2] + qdb[:, 0, 2:3] * np.stack([-Xi[:, 1], Xi[:, 0]], -1))
                - (qdb[:, 1, :2] + qdb[:, 1, 2:3] * np.stack([-Xj[:, 1], Xj[:, 0]], -1)))
        dd = -np.sum(n * vrel, -1)
        vt = n[:, 1] * vrel[:, 0] - n[:, 0] * vrel[:, 1]
        on = delta > 0.0
        pe = np.where(on, np.power(np.where(on, delta, 0.0), par[:, 9]), 0.0)
        fel = par[:, 7] * pe
        model = par[:, 12]
        fd = np.where(model < 0.5, par[:, 8] * pe * dd,
                      np.where(model < 1.5, np.where(dd > 0.0, par[:, 8] * dd, 0.0),
                               par[:, 8] * dd))
        fn = np.where(on, np.maximum(fel + fd, 0.0), 0.0)
        x = vt / par[:, 11]
        sat = np.where(par[:, 13] < 0.5, np.tanh(x), np.clip(x, -1.0, 1.0))
        ft = np.where(on, -par[:, 10] * fn * sat, 0.0)
        return Xi, Xj, n, delta, dd, vt, fel, fn, ft

    def force(self, par, qb, qdb, t, f):
        Xi, Xj, n, delta, dd, vt, fel, fn, ft = self._parts(par, qb, qdb)
        F = fn[:, None] * n + ft[:, None] * np.stack([n[:, 1], -n[:, 0]], -1)
        g = np.zeros((par.shape[0], 2, 3))
        g[:, 0, :2] = F
        g[:, 0, 2] = cross(Xi, F)
        g[:, 1, :2] = -F
        g[:, 1, 2] = -cross(Xj, F)
        return g

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 2, 3, 2, 3) of F9: forward-mode chain rule through the
        geometry and the law (module docstring), every quantity carried with its
        derivatives in the 12 columns ``[q_i, q_j, qd_i, qd_j]``::

            dS = [0, 0, R S | 0],  dn = [0 | 0, 0, R n],  dr_L = [0 | I, R (r_L - r_j)]
            dd = dn^T (r_i + S - r_L) + n^T (dr_i + dS - dr_L),  ddelta = -dd
            dX_i = dS - n dd - d dn,  dX_j = dr_i + dX_i - dr_j
            dv = [w_i R dX_i - w_j R dX_j | I, R X_i, -I, -R X_j]
            d(delta_dot) = -dn^T v - n^T dv,  dv_t = dt^T v + t^T dv
            dF = n df_n + f_n dn + t df_t + f_t dt,  d(X x F) = dX x F + X x dF
        """
        ne = par.shape[0]
        qi, qj = qb[:, 0], qb[:, 1]
        wi, wj = qdb[:, 0, 2], qdb[:, 1, 2]
        S = rot(qi[:, 2], par[:, 0:2])
        n = rot(qj[:, 2], par[:, 5:7])
        rL = qj[:, :2] + rot(qj[:, 2], par[:, 3:5])
        rp = qi[:, :2] + S - rL
        d = np.sum(n * rp, -1)
        delta = par[:, 2] - d
        on = delta > 0.0
        Z = np.zeros((ne, 2, 12))
        dri, drj, dS, dn, drL = Z.copy(), Z.copy(), Z.copy(), Z.copy(), Z.copy()
        dri[:, 0, 0] = dri[:, 1, 1] = 1.0
        drj[:, 0, 3] = drj[:, 1, 4] = 1.0
        dS[:, :, 2] = perp(S)
        dn[:, :, 5] = perp(n)
        drL[:, 0, 3] = drL[:, 1, 4] = 1.0
        drL[:, :, 5] = perp(rL - qj[:, :2])
        dd_ = np.einsum("erk,er->ek", dn, rp) + np.einsum("er,erk->ek", n, dri + dS - drL)
        ddelta = -dd_
        Xi = S - d[:, None] * n
        Xj = qi[:, :2] + Xi - qj[:, :2]
        dXi = dS - n[:, :, None] * dd_[:, None, :] - d[:, None, None] * dn
        dXj = dri + dXi - drj
        vrel = (qdb[:, 0, :2] + wi[:, None] * perp(Xi)) - (qdb[:, 1, :2] + wj[:, None] * perp(Xj))
        dv = wi[:, None, None] * perp_cols(dXi) - wj[:, None, None] * perp_cols(dXj)
        dv[:, 0, 6] = dv[:, 1, 7] = 1.0
        dv[:, :, 8] = perp(Xi)
        dv[:, 0, 9] = dv[:, 1, 10] = -1.0
        dv[:, :, 11] = -perp(Xj)
        dot_ = -np.sum(n * vrel, -1)
        ddot = -np.einsum("erk,er->ek", dn, vrel) - np.einsum("er,erk->ek", n, dv)
        tv = np.stack([n[:, 1], -n[:, 0]], -1)
        dt = np.stack([dn[:, 1], -dn[:, 0]], 1)
        vt = np.sum(tv * vrel, -1)
        dvt = np.einsum("erk,er->ek", dt, vrel) + np.einsum("er,erk->ek", tv, dv)
        e, k, c = par[:, 9], par[:, 7], par[:, 8]
        dp = np.where(on, delta, 1.0)
        pe = np.where(on, np.power(dp, e), 0.0)
        dpe = np.where(on, e * np.power(dp, e - 1.0), 0.0)[:, None] * ddelta
        model = par[:, 12]
        fel = k * pe
        fd = np.where(model < 0.5, c * pe * dot_,
                      np.where(model < 1.5, np.where(dot_ > 0.0, c * dot_, 0.0), c * dot_))
        dfd = np.where((model < 0.5)[:, None], c[:, None] * (dpe * dot_[:, None]
                                                             + pe[:, None] * ddot),
                       np.where(((model >= 1.5) | (dot_ > 0.0))[:, None],
                                c[:, None] * ddot, 0.0))
        act = on & (fel + fd > 0.0)
        fn = np.where(act, fel + fd, 0.0)
        dfn = np.where(act[:, None], k[:, None] * dpe + dfd, 0.0)
        x = vt / par[:, 11]
        lin = par[:, 13] >= 0.5
        th = np.tanh(x)
        sat = np.where(lin, np.clip(x, -1.0, 1.0), th)
        dsat = np.where(lin, np.where(np.abs(x) < 1.0, 1.0, 0.0), 1.0 - th * th)[:, None] \
            * dvt / par[:, 11:12]
        mu = par[:, 10]
        ft = np.where(on, -mu * fn * sat, 0.0)
        dft = np.where(on[:, None], -mu[:, None] * (dfn * sat[:, None] + fn[:, None] * dsat),
                       0.0)
        F = fn[:, None] * n + ft[:, None] * tv
        dF = (n[:, :, None] * dfn[:, None, :] + fn[:, None, None] * dn
              + tv[:, :, None] * dft[:, None, :] + ft[:, None, None] * dt)
        J = np.zeros((ne, 6, 12))
        J[:, 0:2] = dF
        J[:, 2] = _cross_cols(dXi, F) + _cross_cols2(Xi, dF)
        J[:, 3:5] = -dF
        J[:, 5] = -(_cross_cols(dXj, F) + _cross_cols2(Xj, dF))
        return (J[:, :, :6].reshape(ne, 2, 3, 2, 3), J[:, :, 6:].reshape(ne, 2, 3, 2, 3))

    def energy(self, par, qb, t, f):
        delta = self._geometry(par, qb)[3]
        dp = np.maximum(delta, 0.0)
        e1 = par[:, 9] + 1.0
        return np.where(delta > 0.0, par[:, 7] * np.power(dp, e1) / e1, 0.0)

    def outputs(self, par, qb, qdb, t, f):
        Xi, Xj, n, delta, dd, vt, fel, fn, ft = self._parts(par, qb, qdb)
        return np.stack([delta, dd, fn, vt, ft], -1)

    def power_nc(self, par, qb, qdb, t, f):
        """Damping (and clipping) power ``-(f_n - k delta^e) delta_dot`` plus the
        friction power ``f_t v_t`` (both zero without contact)."""
        Xi, Xj, n, delta, dd, vt, fel, fn, ft = self._parts(par, qb, qdb)
        return np.where(delta > 0.0, -(fn - fel) * dd + ft * vt, 0.0)
