"""Built-in planar force elements (spec/planar.md §3: F2, F3, F5, F6, F8, F10; 004 §9.2).

The contact element (F9) is in :mod:`.contact`, the user force (F7, DAP USRFRC)
in :mod:`.userforce`.

Each class is the type's schema, its packing and the NumPy *reference*
implementation of its generalised force, vectorised over a group of elements; the
compiled kernels of the same name in ``mbcore._ext._forces`` compute the same
numbers from the same packed parameters.  Gravity is a model setting
(``gravity: [gx, gy]``), applied by the System to every body.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements import ForceType, PackContext, perp, rot
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.functions import parse_function
from mbcore.schema import Param, number

#: below this length a TSDA has no direction (spec §3 F5: DAP clamps at 1e-10)
MIN_LENGTH = 1e-10
ZERO_LENGTH = ("the attachment points coincide (length < 1e-10): the spring-damper "
               "direction is undefined")


def initial_length(spec, ctx: PackContext) -> float:
    """``free_length`` if given, else the distance of the attachment points in the
    initial configuration."""
    if spec.get("free_length") is not None:
        return float(spec["free_length"])
    si, sj = spec["point_i"], spec["point_j"]
    qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
    pi = qi[:2] + rot(np.array(qi[2]), np.array(si))
    pj = qj[:2] + rot(np.array(qj[2]), np.array(sj))
    return float(np.hypot(*(pj - pi)))


def _cross(a, b):
    """Planar cross product a x b = a_x b_y - a_y b_x."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


class TSDA(ForceType):
    """Translational spring-damper-actuator between P_i and P_j (F5; 004 Eqs
    9.13-9.25, DAP SPRNG):

    ``l = r_j^P - r_i^P``, ``L = |l|``, ``u = l / L``,
    ``Ldot = u . (rd_j^P - rd_i^P)``, ``f = k (L - L0) + c Ldot + f_a(t)``
    (positive = tension); ``g_i += [f u, S_i x f u]``, ``g_j -= [f u, S_j x f u]``.
    Potential ``k (L - L0)^2 / 2``.  par = ``[s'_i, s'_j, k, c, L0]``.
    """

    name = "tsda"
    description = "translational spring-damper-actuator between two body points"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "attachment on body i (body coordinates)",
                         default=(0.0, 0.0), on="body_i"),
        "point_j": Param("vec2", "attachment on body j (body coordinates)",
                         default=(0.0, 0.0), on="body_j"),
        "stiffness": Param("number", "k", default=0.0),
        "damping": Param("number", "c", default=0.0),
        "free_length": Param("number", "L0 (default: the initial length)", required=False),
        "actuator": Param("function", "f_a(t), positive = tension", default=0.0),
    }
    n_par = 7
    n_fun = 1
    kernel = "tsda"
    labels = ("length", "length_rate", "spring_force", "damper_force", "actuator_force",
              "force")
    conservative = False

    def check(self, spec, path):
        if spec["stiffness"] < 0 or spec["damping"] < 0:
            key = "stiffness" if spec["stiffness"] < 0 else "damping"
            raise ModelError(f"{path}.{key}", "must be >= 0 (use the actuator for "
                                              "active forces)")
        if spec.get("free_length") is not None and spec["free_length"] < 0:
            raise ModelError(f"{path}.free_length", "must be >= 0")

    def pack(self, spec, ctx: PackContext):
        si, sj = spec["point_i"], spec["point_j"]
        return [si[0], si[1], sj[0], sj[1], spec["stiffness"], spec["damping"],
                initial_length(spec, ctx)], [spec["actuator"]]

    _L0 = 6                           # index of the free length in par

    @staticmethod
    def _length(par, qb):
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        Sj = rot(qb[:, 1, 2], par[:, 2:4])
        l = qb[:, 1, :2] + Sj - qb[:, 0, :2] - Si
        return Si, Sj, l, np.hypot(l[:, 0], l[:, 1])

    def _line(self, par, qb, qdb):
        """Geometry of the line P_i P_j: S_i, S_j, unit u, length L and rate Ldot."""
        Si, Sj, l, L = self._length(par, qb)
        short = L < MIN_LENGTH
        if np.any(short):
            raise ElementEvaluationError(int(np.nonzero(short)[0][0]), ZERO_LENGTH)
        u = l / L[:, None]
        ld = (qdb[:, 1, :2] + qdb[:, 1, 2:3] * perp(Sj)
              - qdb[:, 0, :2] - qdb[:, 0, 2:3] * perp(Si))
        return Si, Sj, u, L, np.sum(u * ld, -1)

    def _laws(self, par, L, Ld, f):
        """Spring, damper and actuator forces (linear laws)."""
        return par[:, 4] * (L - par[:, 6]), par[:, 5] * Ld, f[:, 0, 0]

    def _forces(self, par, qb, qdb, f):
        Si, Sj, u, L, Ld = self._line(par, qb, qdb)
        return (Si, Sj, u, L, Ld) + tuple(self._laws(par, L, Ld, f))

    def force(self, par, qb, qdb, t, f):
        Si, Sj, u, L, Ld, fs, fd, fa = self._forces(par, qb, qdb, f)
        fu = (fs + fd + fa)[:, None] * u
        g = np.zeros((par.shape[0], 2, 3))
        g[:, 0, :2] = fu
        g[:, 0, 2] = _cross(Si, fu)
        g[:, 1, :2] = -fu
        g[:, 1, 2] = -_cross(Sj, fu)
        return g

    def energy(self, par, qb, t, f):
        L = self._length(par, qb)[3]
        return 0.5 * par[:, 4] * (L - par[:, 6]) ** 2

    def outputs(self, par, qb, qdb, t, f):
        Si, Sj, u, L, Ld, fs, fd, fa = self._forces(par, qb, qdb, f)
        return np.stack([L, Ld, fs, fd, fa, fs + fd + fa], -1)

    def power_nc(self, par, qb, qdb, t, f):
        """Damper and actuator power: a tension f does work -f Ldot on the bodies."""
        Si, Sj, u, L, Ld, fs, fd, fa = self._forces(par, qb, qdb, f)
        return -(fd + fa) * Ld


class RSDA(ForceType):
    """Rotational spring-damper-actuator between two bodies (F6; 004 Eqs 9.26-9.32):
    ``theta = phi_j - phi_i``, ``n = k (theta - theta0) + c thetadot + n_a(t)``;
    ``g_i += [0, 0, n]``, ``g_j += [0, 0, -n]``.  Potential ``k (theta - theta0)^2 / 2``.
    Angles accumulate (never wrapped).  par = ``[k, c, theta0]``."""

    name = "rsda"
    description = "rotational spring-damper-actuator between two bodies"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "stiffness": Param("number", "k", default=0.0),
        "damping": Param("number", "c", default=0.0),
        "free_angle": Param("number", "theta0 (default: the initial phi_j - phi_i)",
                            required=False),
        "actuator": Param("function", "n_a(t)", default=0.0),
    }
    n_par = 3
    n_fun = 1
    kernel = "rsda"
    labels = ("angle", "angle_rate", "spring_torque", "damper_torque", "actuator_torque",
              "torque")

    def check(self, spec, path):
        for key in ("stiffness", "damping"):
            if spec[key] < 0:
                raise ModelError(f"{path}.{key}", "must be >= 0")

    def pack(self, spec, ctx):
        th0 = spec.get("free_angle")
        if th0 is None:
            th0 = ctx.initial(spec["body_j"])[2] - ctx.initial(spec["body_i"])[2]
        return [spec["stiffness"], spec["damping"], float(th0)], [spec["actuator"]]

    def _parts(self, par, qb, qdb, f):
        th = qb[:, 1, 2] - qb[:, 0, 2]
        thd = qdb[:, 1, 2] - qdb[:, 0, 2]
        return th, thd, par[:, 0] * (th - par[:, 2]), par[:, 1] * thd, f[:, 0, 0]

    def force(self, par, qb, qdb, t, f):
        th, thd, ns, nd, na = self._parts(par, qb, qdb, f)
        g = np.zeros((par.shape[0], 2, 3))
        g[:, 0, 2] = ns + nd + na
        g[:, 1, 2] = -(ns + nd + na)
        return g

    def energy(self, par, qb, t, f):
        th = qb[:, 1, 2] - qb[:, 0, 2]
        return 0.5 * par[:, 0] * (th - par[:, 2]) ** 2

    def outputs(self, par, qb, qdb, t, f):
        th, thd, ns, nd, na = self._parts(par, qb, qdb, f)
        return np.stack([th, thd, ns, nd, na, ns + nd + na], -1)

    def power_nc(self, par, qb, qdb, t, f):
        th, thd, ns, nd, na = self._parts(par, qb, qdb, f)
        return -(nd + na) * thd


class PointForce(ForceType):
    """Force ``f(t) = [f_x(t), f_y(t)]`` at a body point (F2; 004 Eqs 9.10-9.11):
    ``g += [f, S x f]``.  ``frame: body`` gives the components in body axes
    (a follower force, ``f = A_i f'``, 004 Prob 9.1).  par = ``[s'_x, s'_y, frame]``."""

    name = "force"
    description = "force at a body point, components functions of time (global or body axes)"
    bodies = ("body",)
    params = {
        "body": Param("body", "the loaded body"),
        "point": Param("vec2", "point of application (body coordinates)",
                       default=(0.0, 0.0), on="body"),
        "fx": Param("function", "x component f_x(t)", default=0.0),
        "fy": Param("function", "y component f_y(t)", default=0.0),
        "frame": Param("choice", "axes of the components", default="global",
                       choices=("global", "body")),
    }
    n_par = 3
    n_fun = 2
    kernel = "force"
    labels = ("fx", "fy")

    def pack(self, spec, ctx):
        s = spec["point"]
        return [s[0], s[1], 1.0 if spec["frame"] == "body" else 0.0], [spec["fx"], spec["fy"]]

    def _f(self, par, qb, f):
        fl = f[:, :, 0]
        fg = np.where(par[:, 2:3] > 0.5, rot(qb[:, 0, 2], fl), fl)
        return fg

    def force(self, par, qb, qdb, t, f):
        fg = self._f(par, qb, f)
        S = rot(qb[:, 0, 2], par[:, 0:2])
        g = np.zeros((par.shape[0], 1, 3))
        g[:, 0, :2] = fg
        g[:, 0, 2] = _cross(S, fg)
        return g

    def outputs(self, par, qb, qdb, t, f):
        return self._f(par, qb, f)


class Torque(ForceType):
    """Pure moment ``n(t)`` on a body (F3; 004 Eq 9.12), counter-clockwise positive.
    With ``body_j`` given, the opposite moment acts on it (a relative actuator)."""

    name = "torque"
    description = "pure moment on a body (optionally reacting on a second body)"
    bodies = ("body", "reaction_body")
    params = {
        "body": Param("body", "the loaded body"),
        "reaction_body": Param("body", "body receiving -n (default: ground)", default="ground"),
        "torque": Param("function", "n(t), counter-clockwise positive"),
    }
    n_par = 0
    n_fun = 1
    kernel = "torque"
    labels = ("torque",)

    def pack(self, spec, ctx):
        return [], [spec["torque"]]

    def force(self, par, qb, qdb, t, f):
        g = np.zeros((f.shape[0], 2, 3))
        g[:, 0, 2] = f[:, 0, 0]
        g[:, 1, 2] = -f[:, 0, 0]
        return g

    def outputs(self, par, qb, qdb, t, f):
        return f[:, 0, 0:1].copy()


class Drag(ForceType):
    """Aerodynamic drag on a body point (F8; 004 Prob 10.18), with an optional
    linear (viscous) term:

    ``v = rd + w R S - v_wind`` (velocity of P relative to the air),
    ``f = -(0.5 c_d rho A |v| + c) v``;  ``g += [f, S x f]``.

    Quadratic magnitude ``c_d rho A |v|^2 / 2`` as in the book; the direction
    (opposite to v) is derived.  Entirely non-conservative (power ``f . v_P``).
    par = ``[s'_x, s'_y, 0.5 c_d rho A, c, wind_x, wind_y]``.
    """

    name = "drag"
    description = "aerodynamic (quadratic) and linear drag on a body point"
    bodies = ("body",)
    params = {
        "body": Param("body", "the body"),
        "point": Param("vec2", "point where the drag acts (body coordinates)",
                       default=(0.0, 0.0), on="body"),
        "drag_coefficient": Param("number", "c_d (>= 0)", default=0.0),
        "density": Param("number", "fluid density rho (>= 0)", default=1.225),
        "area": Param("number", "reference area A (>= 0)", default=0.0),
        "linear": Param("number", "linear drag coefficient c (>= 0): adds -c v", default=0.0),
        "wind": Param("vec2", "velocity of the fluid (global)", default=(0.0, 0.0)),
    }
    n_par = 6
    n_fun = 0
    kernel = "drag"
    labels = ("speed", "force", "fx", "fy")

    def check(self, spec, path):
        for key in ("drag_coefficient", "density", "area", "linear"):
            if spec[key] < 0:
                raise ModelError(f"{path}.{key}", f"must be >= 0, got {spec[key]:g}")

    def pack(self, spec, ctx):
        s, w = spec["point"], spec["wind"]
        kq = 0.5 * spec["drag_coefficient"] * spec["density"] * spec["area"]
        return [s[0], s[1], kq, spec["linear"], w[0], w[1]], []

    @staticmethod
    def _parts(par, qb, qdb):
        S = rot(qb[:, 0, 2], par[:, 0:2])
        v = qdb[:, 0, :2] + qdb[:, 0, 2:3] * perp(S) - par[:, 4:6]
        speed = np.hypot(v[:, 0], v[:, 1])
        f = -(par[:, 2] * speed + par[:, 3])[:, None] * v
        return S, speed, f

    def force(self, par, qb, qdb, t, f):
        S, speed, fv = self._parts(par, qb, qdb)
        g = np.zeros((par.shape[0], 1, 3))
        g[:, 0, :2] = fv
        g[:, 0, 2] = _cross(S, fv)
        return g

    def outputs(self, par, qb, qdb, t, f):
        S, speed, fv = self._parts(par, qb, qdb)
        return np.stack([speed, np.hypot(fv[:, 0], fv[:, 1]), fv[:, 0], fv[:, 1]], -1)


class _Coefficients(Param):
    """One non-negative number for all three coordinates, or ``[d_x, d_y, d_phi]``."""

    def validate(self, value, path, ctx):
        if isinstance(value, (list, tuple, np.ndarray)) and not isinstance(value, str):
            if len(value) != 3:
                raise ModelError(path, f"expected one number or 3 numbers [d_x, d_y, d_phi], "
                                       f"got a list of {len(value)}")
            return tuple(_nonneg(v, f"{path}[{k}]") for k, v in enumerate(value))
        return (_nonneg(value, path),) * 3


def _nonneg(value, path):
    v = number(value, path)
    if v < 0:
        raise ModelError(path, f"must be >= 0, got {v:g}")
    return v


class FictitiousDamping(ForceType):
    """Fictitious (numerical) damping of a body's coordinates (F10; 004 Eq 14.21,
    §14.3 dynamic relaxation): ``g = -D qd`` with ``D = diag(d_x, d_y, d_phi)``.
    It damps the absolute velocities (also rigid motions): use it to bring a
    model to rest at a static equilibrium, not as a physical damper.
    par = ``[d_x, d_y, d_phi]``."""

    name = "damping"
    description = "fictitious damping g = -D qd on a body (dynamic relaxation)"
    bodies = ("body",)
    params = {
        "body": Param("body", "the damped body"),
        "coefficients": _Coefficients("number", "d (all three) or [d_x, d_y, d_phi], >= 0"),
    }
    n_par = 3
    n_fun = 0
    kernel = "damping"
    labels = ("fx", "fy", "n")

    def pack(self, spec, ctx):
        return list(spec["coefficients"]), []

    def force(self, par, qb, qdb, t, f):
        return -(par * qdb[:, 0, :])[:, None, :]

    def outputs(self, par, qb, qdb, t, f):
        return -(par * qdb[:, 0, :])


from .contact import Contact  # noqa: E402  (after the helpers they share)
from .userforce import UserForce, register_user_function, user_function  # noqa: E402,F401

from .nonlinear import NonlinearTSDA  # noqa: E402

FORCE_TYPES = [TSDA, RSDA, PointForce, Torque, Drag, Contact, FictitiousDamping, UserForce,
               NonlinearTSDA]
