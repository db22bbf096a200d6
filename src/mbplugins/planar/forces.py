"""Built-in planar force elements (: F2, F3, F5, F6, F8, F10; Nikravesh (1988), §9.2).

The contact element (F9) is in :mod:`.contact`, the user force (F7, DAP USRFRC)
in :mod:`.userforce`.

Each class is the type's schema, its packing and the NumPy *reference*
implementation of its generalised force, vectorised over a group of elements; the
compiled kernels (``c_kernel``: capsules of ``mbplugins._ext._planar_forces``, through
the compiled plugin tier) compute the same numbers from the same packed parameters.  Gravity is a model setting
(``gravity: [gx, gy]``), applied by the System to every body.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.base import ForceType, PackContext, perp, rot
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.elements.schema import Param, number

#: below this length a TSDA has no direction (Nikravesh (1988), §9.2: DAP clamps at 1e-10)
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
    """Translational spring-damper-actuator between P_i and P_j (F5; Nikravesh (1988), Eqs. 
    9.13-9.25, DAP SPRNG):

    ``l = r_j^P - r_i^P``, ``L = |l|``, ``u = l / L``,
    ``Ldot = u . (rd_j^P - rd_i^P)``, ``f = k (L - L0) + c Ldot + f_a(t)``
    (positive = tension); ``g_i += [f u, S_i x f u]``, ``g_j -= [f u, S_j x f u]``.
    Potential ``k (L - L0)^2 / 2``.  par = ``[s'_i, s'_j, k, c, L0]``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "tsda"
    description = "translational spring-damper-actuator between two body points"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "attachment on body i (body coordinates)",
                         default=(0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec2", "attachment on body j (body coordinates)",
                         default=(0.0, 0.0), on="body_j", unit="length"),
        "stiffness": Param("number", "k", default=0.0, unit="force/length"),
        "damping": Param("number", "c", default=0.0, unit="force*time/length"),
        "free_length": Param("number", "L0 (default: the initial length)", required=False,
                             unit="length"),
        "actuator": Param("function", "f_a(t), positive = tension", default=0.0),
    }
    n_par = 7
    n_fun = 1
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "tsda"
    c_kernel = "mbplugins._ext._planar_forces:TSDA"
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

    def _slopes(self, par, L, Ld):
        """d f_s / dL and d f_d / dLdot (linear laws: k and c)."""
        return par[:, 4], par[:, 5]

    def force_jacobian(self, par, qb, qdb, t, f):
        """K = dg/dq, C = dg/dqd (ne, 2, 3, 2, 3) of F5 (Nikravesh (1988), §9.2),
        derived from ``g = -D^T (f u)`` with ``D = dl/dq = [-I, -R S_i, I, R S_j]``::

            dL/dq = a^T,  a = D^T u;   dLdot/dqd = a^T
            dLdot/dq = (D^T P ld)^T / L + u^T E,  P = I - u u^T,
                       E = d(ld)/dq: w_i S_i at phi_i, -w_j S_j at phi_j
            K = -(f/L) D^T P D - f_s' a a^T - f_d' a (dLdot/dq) - H,
                H = diag(S_i . f u at phi_i, -S_j . f u at phi_j)
            C = -f_d' a a^T
        """
        Si, Sj, u, L, Ld, fs, fd, fa = self._forces(par, qb, qdb, f)
        ks, kd = self._slopes(par, L, Ld)
        ne = par.shape[0]
        D = np.zeros((ne, 2, 6))
        D[:, 0, 0] = D[:, 1, 1] = -1.0
        D[:, 0, 3] = D[:, 1, 4] = 1.0
        D[:, :, 2] = -perp(Si)
        D[:, :, 5] = perp(Sj)
        ld = np.einsum("erk,ek->er", D, qdb.reshape(ne, 6))
        a = np.einsum("erk,er->ek", D, u)
        E = np.zeros((ne, 2, 6))
        E[:, :, 2] = qdb[:, 0, 2:3] * Si
        E[:, :, 5] = -qdb[:, 1, 2:3] * Sj
        ftot = fs + fd + fa
        DtD = np.einsum("erk,erl->ekl", D, D)
        Ldq = (np.einsum("erk,er->ek", D, ld) - Ld[:, None] * a) / L[:, None] \
            + np.einsum("erk,er->ek", E, u)
        aa = a[:, :, None] * a[:, None, :]
        K = -(ftot / L)[:, None, None] * (DtD - aa) - ks[:, None, None] * aa \
            - kd[:, None, None] * a[:, :, None] * Ldq[:, None, :]
        F = ftot[:, None] * u
        K[:, 2, 2] -= np.sum(Si * F, -1)
        K[:, 5, 5] += np.sum(Sj * F, -1)
        C = -kd[:, None, None] * aa
        return K.reshape(ne, 2, 3, 2, 3), C.reshape(ne, 2, 3, 2, 3)

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
    """Rotational spring-damper-actuator between two bodies (F6; Nikravesh (1988), Eqs. 9.26-9.32):
    ``theta = phi_j - phi_i``, ``n = k (theta - theta0) + c thetadot + n_a(t)``;
    ``g_i += [0, 0, n]``, ``g_j += [0, 0, -n]``.  Potential ``k (theta - theta0)^2 / 2``.
    Angles accumulate (never wrapped).  par = ``[k, c, theta0]``."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "rsda"
    description = "rotational spring-damper-actuator between two bodies"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "stiffness": Param("number", "k", default=0.0, unit="force*length/angle"),
        "damping": Param("number", "c", default=0.0, unit="force*length*time/angle"),
        "free_angle": Param("number", "theta0 (default: the initial phi_j - phi_i)",
                            required=False, unit="angle"),
        "actuator": Param("function", "n_a(t)", default=0.0),
    }
    n_par = 3
    n_fun = 1
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "rsda"
    c_kernel = "mbplugins._ext._planar_forces:RSDA"
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

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 2, 3, 2, 3) of F6 (Nikravesh (1988), §9.2): with
        ``n = k (phi_j - phi_i - theta0) + c (w_j - w_i) + n_a``, ``g_i,phi = n``,
        ``g_j,phi = -n``: the phi block of K is ``k [[-1, 1], [1, -1]]``, of C
        ``c [[-1, 1], [1, -1]]``."""
        ne = par.shape[0]
        K = np.zeros((ne, 2, 3, 2, 3))
        C = np.zeros((ne, 2, 3, 2, 3))
        sgn = np.array([[-1.0, 1.0], [1.0, -1.0]])
        K[:, :, 2, :, 2] = par[:, 0, None, None] * sgn
        C[:, :, 2, :, 2] = par[:, 1, None, None] * sgn
        return K, C

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
    """Force ``f(t) = [f_x(t), f_y(t)]`` at a body point (F2; Nikravesh (1988), Eqs. 9.10-9.11):
    ``g += [f, S x f]``.  ``frame: body`` gives the components in body axes
    (a follower force, ``f = A_i f'``, Nikravesh (1988), Prob. 9.1).  par = ``[s'_x, s'_y, frame]``."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "force"
    description = "force at a body point, components functions of time (global or body axes)"
    bodies = ("body",)
    params = {
        "body": Param("body", "the loaded body"),
        "point": Param("vec2", "point of application (body coordinates)",
                       default=(0.0, 0.0), on="body", unit="length"),
        "fx": Param("function", "x component f_x(t)", default=0.0),
        "fy": Param("function", "y component f_y(t)", default=0.0),
        "frame": Param("choice", "axes of the components", default="global",
                       choices=("global", "body")),
    }
    n_par = 3
    n_fun = 2
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "force"
    c_kernel = "mbplugins._ext._planar_forces:FORCE"
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

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 1, 3, 1, 3) of F2 (Nikravesh (1988), §9.2).  Global components:
        only ``d(S x f)/dphi = (R S) x f = -S . f``.  Body components (``f = A f'``):
        ``df/dphi = R f`` and ``d(S x f)/dphi = 0`` (S and f turn together).  C = 0."""
        fg = self._f(par, qb, f)
        S = rot(qb[:, 0, 2], par[:, 0:2])
        body = par[:, 2] > 0.5
        ne = par.shape[0]
        K = np.zeros((ne, 1, 3, 1, 3))
        K[:, 0, :2, 0, 2] = np.where(body[:, None], perp(fg), 0.0)
        K[:, 0, 2, 0, 2] = np.where(body, 0.0, -np.sum(S * fg, -1))
        return K, np.zeros_like(K)

    def outputs(self, par, qb, qdb, t, f):
        return self._f(par, qb, f)


class Torque(ForceType):
    """Pure moment ``n(t)`` on a body (F3; Nikravesh (1988), Eq. 9.12), counter-clockwise positive.
    With ``body_j`` given, the opposite moment acts on it (a relative actuator)."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

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
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "torque"
    c_kernel = "mbplugins._ext._planar_forces:TORQUE"
    labels = ("torque",)

    def pack(self, spec, ctx):
        return [], [spec["torque"]]

    def force(self, par, qb, qdb, t, f):
        g = np.zeros((f.shape[0], 2, 3))
        g[:, 0, 2] = f[:, 0, 0]
        g[:, 1, 2] = -f[:, 0, 0]
        return g

    def force_jacobian(self, par, qb, qdb, t, f):
        """F3 depends on t only: K = C = 0."""
        K = np.zeros((f.shape[0], 2, 3, 2, 3))
        return K, K.copy()

    def outputs(self, par, qb, qdb, t, f):
        return f[:, 0, 0:1].copy()


class Drag(ForceType):
    """Aerodynamic drag on a body point (F8; Nikravesh (1988), Prob. 10.18), with an optional
    linear (viscous) term:

    ``v = rd + w R S - v_wind`` (velocity of P relative to the air),
    ``f = -(0.5 c_d rho A |v| + c) v``;  ``g += [f, S x f]``.

    Quadratic magnitude ``c_d rho A |v|^2 / 2`` as in the book; the direction
    (opposite to v) is derived.  Entirely non-conservative (power ``f . v_P``).
    par = ``[s'_x, s'_y, 0.5 c_d rho A, c, wind_x, wind_y]``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "drag"
    description = "aerodynamic (quadratic) and linear drag on a body point"
    bodies = ("body",)
    params = {
        "body": Param("body", "the body"),
        "point": Param("vec2", "point where the drag acts (body coordinates)",
                       default=(0.0, 0.0), on="body", unit="length"),
        "drag_coefficient": Param("number", "c_d (>= 0)", default=0.0),
        "density": Param("number", "fluid density rho (>= 0)", default=1.225,
                         unit="mass/length^3"),
        "area": Param("number", "reference area A (>= 0)", default=0.0, unit="length^2"),
        "linear": Param("number", "linear drag coefficient c (>= 0): adds -c v", default=0.0,
                        unit="force*time/length"),
        "wind": Param("vec2", "velocity of the fluid (global)", default=(0.0, 0.0),
                      unit="length/time"),
    }
    n_par = 6
    n_fun = 0
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "drag"
    c_kernel = "mbplugins._ext._planar_forces:DRAG"
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

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 1, 3, 1, 3) of F8 (Nikravesh (1988), §9.2): with
        ``dv/dqd = V = [I, R S]``, ``dv/dphi = -w S`` and
        ``F_v = df/dv = -(kq |v| + c) I - kq v v^T / |v|`` (0 at v = 0)::

            C = [F_v V; S x (F_v V)]
            K[:, phi] = [F_v (-w S); -S . f + S x (F_v (-w S))]
        """
        S, speed, fv = self._parts(par, qb, qdb)
        ne = par.shape[0]
        v = qdb[:, 0, :2] + qdb[:, 0, 2:3] * perp(S) - par[:, 4:6]
        inv = np.divide(1.0, speed, out=np.zeros_like(speed), where=speed > 0)
        Fv = -(par[:, 2] * speed + par[:, 3])[:, None, None] * np.eye(2) \
            - (par[:, 2] * inv)[:, None, None] * v[:, :, None] * v[:, None, :]
        V = np.zeros((ne, 2, 3))
        V[:, 0, 0] = V[:, 1, 1] = 1.0
        V[:, :, 2] = perp(S)
        FV = np.einsum("ers,esk->erk", Fv, V)
        C = np.zeros((ne, 3, 3))
        C[:, :2] = FV
        C[:, 2] = S[:, 0:1] * FV[:, 1] - S[:, 1:2] * FV[:, 0]
        dF = np.einsum("ers,es->er", Fv, -qdb[:, 0, 2:3] * S)
        K = np.zeros((ne, 3, 3))
        K[:, :2, 2] = dF
        K[:, 2, 2] = -np.sum(S * fv, -1) + _cross(S, dF)
        return K.reshape(ne, 1, 3, 1, 3), C.reshape(ne, 1, 3, 1, 3)


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
    """Fictitious (numerical) damping of a body's coordinates (F10; Nikravesh (1988), Eq. 14.21,
    §14.3 dynamic relaxation): ``g = -D qd`` with ``D = diag(d_x, d_y, d_phi)``.
    It damps the absolute velocities (also rigid motions): use it to bring a
    model to rest at a static equilibrium, not as a physical damper.
    par = ``[d_x, d_y, d_phi]``."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "damping"
    #: damps the centroids' velocities: refused on a body with ``center_of_mass``
    frame_fixed = {"coefficients": "body"}
    description = "fictitious damping g = -D qd on a body (dynamic relaxation)"
    bodies = ("body",)
    params = {
        "body": Param("body", "the damped body"),
        "coefficients": _Coefficients("number", "d (all three) or [d_x, d_y, d_phi], >= 0"),
    }
    n_par = 3
    n_fun = 0
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_forces.pyx)
    kernel = "damping"
    c_kernel = "mbplugins._ext._planar_forces:DAMPING"
    labels = ("fx", "fy", "n")

    def pack(self, spec, ctx):
        return list(spec["coefficients"]), []

    def force(self, par, qb, qdb, t, f):
        return -(par * qdb[:, 0, :])[:, None, :]

    def force_jacobian(self, par, qb, qdb, t, f):
        """F10: K = 0, C = -diag(d_x, d_y, d_phi)."""
        ne = par.shape[0]
        K = np.zeros((ne, 1, 3, 1, 3))
        C = np.zeros((ne, 1, 3, 1, 3))
        for k in range(3):
            C[:, 0, k, 0, k] = -par[:, k]
        return K, C

    def outputs(self, par, qb, qdb, t, f):
        return -(par * qdb[:, 0, :])


from .contact import Contact  # noqa: E402  (after the helpers they share)
from .userforce import UserForce, register_user_function, user_function  # noqa: E402,F401


FORCE_TYPES = [TSDA, RSDA, PointForce, Torque, Drag, Contact, FictitiousDamping, UserForce]
