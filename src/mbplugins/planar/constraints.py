"""Built-in planar constraint types (Nikravesh (1988), §4.2.1, §4.2.7–4.2.8, Prob. 5.14) and the
registry of all built-in planar types (:data:`CONSTRAINT_TYPES`, returned by the
plugin hook), including those of :mod:`.links` (C5-C7, D4), :mod:`.gears` (C8, C9)
and :mod:`.drivers` (D5).

Each class is the type's schema, its packing, and the NumPy *reference*
implementation of phi / Jacobian / nu / gamma, vectorised over a group of
elements, plus its joint-local reaction components (``reaction_local``; the
convention reaction = +Phi_q^T lam of docs/conventions.md).  The compiled kernels of
the same name in ``mbcore._ext._planar`` compute the same numbers from the same
packed parameters.  Reference documentation: docs/constraints.md.
"""
from __future__ import annotations

import numpy as np

from mbcore.elements.base import ConstraintType, PackContext, Sketch, perp, rot
from mbcore.errors import ModelError
from mbcore.elements.functions import parse_function
from mbcore.elements.schema import Param

from ._common import axis_geometry

COORD = {"x": 0, "y": 1, "phi": 2}


class Fixed(ConstraintType):
    """Body fixed to ground: ``x = x0, y = y0, phi = phi0`` (C1 x3, Nikravesh (1988), Eqs. 4.31-4.33).

    The values default to the body's initial estimates (as KAP's INGRND does).
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "fixed"
    description = "fix a body's x, y and phi (ground it)"
    equations = 3
    bodies = ("body",)
    params = {
        "body": Param("body", "the body to fix"),
        "position": Param("vec2", "x, y held (default: initial position)", required=False,
                          unit="length"),
        "angle": Param("number", "phi held (default: initial angle)", required=False,
                       unit="angle"),
    }
    n_par = 3
    kernel = "fixed"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:FIXED"
    labels = ("x", "y", "phi")
    local_labels = ("fx", "fy", "n")
    category = "constraint"

    def frame_shift(self, spec, shift, ctx: PackContext):
        """A held position or angle of a body with ``center_of_mass`` s_C is the
        reference frame's: the centroid's is ``r + A(phi) s_C``."""
        s = shift(spec["body"])
        if s is None or (spec.get("position") is None and spec.get("angle") is None):
            return {}
        q0 = ctx.initial(spec["body"])
        r = np.array(spec["position"] if spec.get("position") is not None else q0[:2])
        phi = spec["angle"] if spec.get("angle") is not None else q0[2]
        return {"position": [float(x) for x in r + rot(np.float64(phi), s)]}

    def pack(self, spec, ctx: PackContext):
        q0 = ctx.initial(spec["body"])
        if spec.get("position") is not None:
            q0[:2] = spec["position"]
        if spec.get("angle") is not None:
            q0[2] = spec["angle"]
        return list(q0), []

    def phi(self, par, qb, t, f):
        return qb[:, 0, :] - par

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        jac = np.zeros((ne, 3, 1, 3))
        jac[:, [0, 1, 2], 0, [0, 1, 2]] = 1.0
        return jac

    def gamma(self, par, qb, qdb, t, f):
        return np.zeros((par.shape[0], 3))

    def reaction_local(self, par, qb, t, f, lam):
        """The force (global x, y) and moment on the body at its origin: ``lam``."""
        return lam.copy()


class _AbsoluteBase(ConstraintType):
    """x, y of a body point, or phi of a body, equal to c(t) (C1/C2, D1/D2).

    ``Phi = x_i + S_x - c(t)`` / ``y_i + S_y - c(t)`` / ``phi_i - c(t)`` with
    ``S = A_i s'`` (Nikravesh (1988), Eqs. 4.31-4.40).
    par = ``[k, s'_x, s'_y]``; one time function.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    equations = 1
    bodies = ("body",)
    n_par = 3
    n_fun = 1
    kernel = "absolute"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:ABSOLUTE"
    local_labels = ("effort",)

    def check(self, spec, path):
        if spec["coordinate"] == "phi" and spec.get("point") not in (None, (0.0, 0.0)):
            raise ModelError(f"{path}.point", "a point has no meaning for coordinate 'phi'")

    def frame_shift(self, spec, shift, ctx: PackContext):
        """x or y of the point (default: the reference frame's origin) moves to
        s' - s_C on a body with ``center_of_mass``; phi has no point."""
        s = shift(spec["body"])
        if s is None or spec["coordinate"] == "phi":
            return {}
        return {"point": [float(x) for x in np.asarray(spec.get("point") or (0.0, 0.0)) - s]}

    def _par(self, spec):
        s = spec.get("point") or (0.0, 0.0)
        return [float(COORD[spec["coordinate"]]), float(s[0]), float(s[1])]

    def equation_labels(self):
        return ("c",)

    def phi(self, par, qb, t, f):
        k = par[:, 0].astype(int)
        S = rot(qb[:, 0, 2], par[:, 1:3])
        val = qb[:, 0, :][np.arange(len(k)), k]
        val = val + np.where(k == 0, S[:, 0], 0.0) + np.where(k == 1, S[:, 1], 0.0)
        return (val - f[:, 0, 0])[:, None]

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        k = par[:, 0].astype(int)
        S = rot(qb[:, 0, 2], par[:, 1:3])
        jac = np.zeros((ne, 1, 1, 3))
        jac[np.arange(ne), 0, 0, k] = 1.0
        jac[:, 0, 0, 2] += np.where(k == 0, -S[:, 1], 0.0) + np.where(k == 1, S[:, 0], 0.0)
        return jac

    def nu(self, par, qb, t, f):
        return f[:, 0, 1][:, None].copy()

    def gamma(self, par, qb, qdb, t, f):
        k = par[:, 0].astype(int)
        S = rot(qb[:, 0, 2], par[:, 1:3])
        w2 = qdb[:, 0, 2] ** 2
        g = f[:, 0, 2] + np.where(k == 0, w2 * S[:, 0], 0.0) + np.where(k == 1, w2 * S[:, 1], 0.0)
        return g[:, None]

    def reaction_local(self, par, qb, t, f, lam):
        """``effort`` = ``lam``: the force along global x (or y) applied at the point,
        or the moment (coordinate phi) applied to the body — for a driver the
        actuator effort needed to impose c(t) (Nikravesh (1988), §8.4.3, §9.3, C1/C2/D1/D2)."""
        return lam[:, 0:1].copy()


class Absolute(_AbsoluteBase):
    """Absolute coordinate constraint: one of x, y (of a body point) or phi held at
    a constant value (default: its initial value) — C1, C2."""

    name = "absolute"
    description = "hold x, y (of a point) or phi of a body at a constant"
    category = "constraint"
    params = {
        "body": Param("body", "the constrained body"),
        "coordinate": Param("choice", "x, y or phi", choices=("x", "y", "phi")),
        "point": Param("vec2", "body-fixed point for x / y (default: origin)",
                       required=False, on="body", unit="length"),
        "value": Param("number", "the constant (default: the initial value)", required=False),
    }

    def pack(self, spec, ctx: PackContext):
        par = self._par(spec)
        value = spec.get("value")
        if value is None:
            q0 = ctx.initial(spec["body"])
            k = int(par[0])
            s = rot(np.array(q0[2]), np.array(par[1:3]))
            value = float(q0[k] + (s[k] if k < 2 else 0.0))
        return par, [parse_function(value, f"{ctx.path}.value")]


class AbsoluteDriver(_AbsoluteBase):
    """Absolute driver: x, y (of a body point) or phi of a body = c(t) — D1, D2
    (Nikravesh (1988), Eqs. 4.36-4.40; KAP DRVR)."""

    name = "absolute_driver"
    description = "drive x, y (of a point) or phi of a body as a function of time"
    category = "driver"
    params = {
        "body": Param("body", "the driven body"),
        "coordinate": Param("choice", "x, y or phi", choices=("x", "y", "phi")),
        "point": Param("vec2", "body-fixed point for x / y (default: origin)",
                       required=False, on="body", unit="length"),
        "function": Param("function", "c(t): number, polynomial, harmonic, table or expression"),
    }

    def pack(self, spec, ctx: PackContext):
        return self._par(spec), [spec["function"]]


class RelativeDriver(ConstraintType):
    """Relative driver ``q_i[k] - q_j[k] - c(t) = 0`` for k = phi (default), x or y
    (Nikravesh (1988), Prob. 5.14).  With a constant c it holds a relative
    angle (Eq. 9.59)."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "relative_driver"
    description = "drive phi_i - phi_j (or x_i - x_j, y_i - y_j) as a function of time"
    category = "driver"
    equations = 1
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "coordinate": Param("choice", "phi (default), x or y", default="phi",
                            choices=("x", "y", "phi")),
        "function": Param("function", "c(t)"),
    }
    n_par = 1
    n_fun = 1
    kernel = "relative"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:RELATIVE"
    labels = ("c",)
    local_labels = ("effort",)

    def frame_shift(self, spec, shift, ctx: PackContext):
        """x or y of the centroids: refused on a body with ``center_of_mass``."""
        if spec.get("coordinate", "phi") != "phi":
            for key in self.bodies:
                if spec.get(key) is not None and shift(spec[key]) is not None:
                    raise ModelError(f"{ctx.path}.coordinate", f"relative_driver of "
                                     f"{spec['coordinate']} drives the centroid of body "
                                     f"'{spec[key]}', whose reference frame is not at its "
                                     f"centre of mass (center_of_mass): use a "
                                     f"point_driver or distance_driver on its points")
        return {}

    def pack(self, spec, ctx):
        return [float(COORD[spec["coordinate"]])], [spec["function"]]

    def phi(self, par, qb, t, f):
        k = par[:, 0].astype(int)
        e = np.arange(len(k))
        return (qb[e, 0, k] - qb[e, 1, k] - f[:, 0, 0])[:, None]

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        k = par[:, 0].astype(int)
        jac = np.zeros((ne, 1, 2, 3))
        jac[np.arange(ne), 0, 0, k] = 1.0
        jac[np.arange(ne), 0, 1, k] = -1.0
        return jac

    def nu(self, par, qb, t, f):
        return f[:, 0, 1][:, None].copy()

    def gamma(self, par, qb, qdb, t, f):
        return f[:, 0, 2][:, None].copy()

    def reaction_local(self, par, qb, t, f, lam):
        """``effort`` = ``lam``: the moment (coordinate phi) or the force along
        global x / y at the origin applied to body i; body j receives ``-lam``
        (Nikravesh (1988), §8.4.3, §9.3, D3: the relative actuator torque / force)."""
        return lam[:, 0:1].copy()


class Revolute(ConstraintType):
    """Revolute joint ``r_i + A_i s'_i - r_j - A_j s'_j = 0`` (C3; Nikravesh (1988), Eqs. 4.7-4.9,
    Tables 4.2/4.3).  ``point_j`` defaults to the body-j coordinates of
    ``point_i`` in the initial configuration."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "revolute"
    description = "pin joint between two bodies"
    equations = 2
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec2", "joint centre in body i coordinates", on="body_i",
                         unit="length"),
        "point_j": Param("vec2", "joint centre in body j coordinates (default: from the "
                                 "initial configuration)", required=False, on="body_j",
                         unit="length"),
    }
    n_par = 4
    kernel = "revolute"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:REVOLUTE"
    labels = ("x", "y")
    local_labels = ("fx_i", "fy_i")

    def pack(self, spec, ctx):
        si = spec["point_i"]
        sj = spec.get("point_j")
        if sj is None:
            qi, qj = ctx.initial(spec["body_i"]), ctx.initial(spec["body_j"])
            p = qi[:2] + rot(np.array(qi[2]), np.array(si))
            sj = rot(np.array(-qj[2]), p - qj[:2])
        return [si[0], si[1], sj[0], sj[1]], []

    def phi(self, par, qb, t, f):
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        Sj = rot(qb[:, 1, 2], par[:, 2:4])
        return qb[:, 0, :2] + Si - qb[:, 1, :2] - Sj

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        Sj = rot(qb[:, 1, 2], par[:, 2:4])
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, 0] = jac[:, 1, 0, 1] = 1.0
        jac[:, 0, 1, 0] = jac[:, 1, 1, 1] = -1.0
        jac[:, :, 0, 2] = perp(Si)
        jac[:, :, 1, 2] = -perp(Sj)
        return jac

    def gamma(self, par, qb, qdb, t, f):
        Si = rot(qb[:, 0, 2], par[:, 0:2])
        Sj = rot(qb[:, 1, 2], par[:, 2:4])
        return qdb[:, 0, 2:3] ** 2 * Si - qdb[:, 1, 2:3] ** 2 * Sj

    def reaction_local(self, par, qb, t, f, lam):
        """The joint force on body i (applied at the joint centre) in body-i axes:
        ``A_i^T lam`` (Nikravesh (1988), Eqs. 9.34-9.39: the force on body i is ``lam``,
        on body j ``-lam``, in global components)."""
        return rot(-qb[:, 0, 2], lam)

    relative_labels = ("angle", "angle_rate")

    def relative(self, par, qb, qdb, ref):
        """The relative angle ``phi_j - phi_i`` (continuous, as the body angles are;
        Nikravesh (1988), §4.2.1 revolute joint) and its rate ``omega_j - omega_i``."""
        return np.stack([qb[:, 1, 2] - qb[:, 0, 2], qdb[:, 1, 2] - qdb[:, 0, 2]], -1)


class Translational(ConstraintType):
    """Translational (prismatic) joint, the book's form (Nikravesh (1988), Eqs. 4.10-4.12).

    ``Phi1 = n^T (r_j^P - r_i^P)`` with ``u = A_i u'`` the unit sliding axis on body
    i and ``n = R u``; ``Phi2 = phi_i - phi_j - angle``.  gamma1 is the exact form
    of Nikravesh (1988), §4.2.1, Eqs. 4.10–4.12 (Table 4.3 / KAP omit the ``(w_i - w_j)^2`` term).
    par = ``[u'_x, u'_y, s'_iPx, s'_iPy, s'_jPx, s'_jPy, angle]``.
    """
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    name = "translational"
    description = "prismatic (sliding) joint between two bodies"
    equations = 2
    params = {
        "body_i": Param("body", "body carrying the sliding axis"),
        "body_j": Param("body", "sliding body"),
        "point_i": Param("vec2", "a point of the axis, body i coordinates",
                         default=(0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec2", "a point of the axis, body j coordinates",
                         default=(0.0, 0.0), on="body_j", unit="length"),
        "axis": Param("vec2", "axis direction in body i coordinates (normalised)",
                      default=(1.0, 0.0)),
        "angle": Param("number", "phi_i - phi_j held (default: from the initial angles)",
                       required=False, unit="angle"),
    }
    n_par = 7
    kernel = "translational"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_planar_constraints.pyx)
    c_kernel = "mbplugins._ext._planar_constraints:TRANSLATIONAL"
    labels = ("n", "phi")
    local_labels = ("normal", "torque")

    def check(self, spec, path):
        ax = spec["axis"]
        if np.hypot(*ax) < 1e-12:
            raise ModelError(f"{path}.axis", "axis must be a non-zero vector")

    def pack(self, spec, ctx):
        ax = np.asarray(spec["axis"], float)
        ax = ax / np.hypot(*ax)
        angle = spec.get("angle")
        if angle is None:
            angle = ctx.initial(spec["body_i"])[2] - ctx.initial(spec["body_j"])[2]
        si, sj = spec["point_i"], spec["point_j"]
        return [ax[0], ax[1], si[0], si[1], sj[0], sj[1], float(angle)], []

    def sketch(self, spec, ctx: PackContext) -> list[Sketch]:
        """The guide: the sliding axis through ``point_i`` on body i, drawn over the
        travel of ``point_j`` along it.  When body j is the ground the guide is
        drawn fixed on the ground (the same line in the initial configuration, the
        relative angle being constant) and body i's point travels along it."""
        u = np.asarray(spec["axis"], float) / np.hypot(*spec["axis"])
        bi, bj = spec["body_i"], spec["body_j"]
        si, sj = (np.asarray(spec[k], float) for k in ("point_i", "point_j"))
        if bj == ctx.model.ground and bi != ctx.model.ground:
            qi = ctx.initial(bi)
            p = qi[:2] + rot(np.array(qi[2]), si)
            return [Sketch(bj, "segment", np.array([p, p + rot(np.array(qi[2]), u)]),
                           "guide", follow=(bi, tuple(si)))]
        return [Sketch(bi, "segment", np.array([si, si + u]), "guide",
                       follow=(bj, tuple(sj)))]

    _geom = staticmethod(axis_geometry)

    def phi(self, par, qb, t, f):
        u, n, Si, Sj = self._geom(par, qb)
        d = qb[:, 1, :2] + Sj - qb[:, 0, :2] - Si
        return np.stack([np.sum(n * d, -1), qb[:, 0, 2] - qb[:, 1, 2] - par[:, 6]], -1)

    def jacobian(self, par, qb, t, f):
        ne = par.shape[0]
        u, n, Si, Sj = self._geom(par, qb)
        jac = np.zeros((ne, 2, 2, 3))
        jac[:, 0, 0, :2] = -n
        jac[:, 0, 0, 2] = -np.sum(u * (qb[:, 1, :2] + Sj - qb[:, 0, :2]), -1)
        jac[:, 0, 1, :2] = n
        jac[:, 0, 1, 2] = np.sum(u * Sj, -1)
        jac[:, 1, 0, 2] = 1.0
        jac[:, 1, 1, 2] = -1.0
        return jac

    def gamma(self, par, qb, qdb, t, f):
        u, n, Si, Sj = self._geom(par, qb)
        wi, wj = qdb[:, 0, 2], qdb[:, 1, 2]
        g1 = (2.0 * wi * np.sum(u * (qdb[:, 1, :2] - qdb[:, 0, :2]), -1)
              + wi ** 2 * np.sum(n * (qb[:, 1, :2] - qb[:, 0, :2]), -1)
              + (wi - wj) ** 2 * np.sum(n * Sj, -1))
        return np.stack([g1, np.zeros_like(g1)], -1)

    def reaction_local(self, par, qb, t, f, lam):
        """On body i: ``normal`` = the force along the unit normal ``n = R A_i u'``,
        ``-lam1``, with its line of action through ``P_j``; ``torque`` = the couple,
        ``+lam2`` (= the moment about ``P_j``).  Body j receives the opposite force
        and couple (Nikravesh (1988), Eqs. 9.46-9.48)."""
        return np.stack([-lam[:, 0], lam[:, 1]], -1)

    relative_labels = ("disp", "disp_rate")

    def relative(self, par, qb, qdb, ref):
        """The displacement ``u^T (r_j^P - r_i^P)`` of the points along the sliding axis
        ``u = A_i u'`` (zero where they coincide; Nikravesh (1988), §4.2.1
        translational joint) and its rate ``omega_i n^T d + u^T d-dot`` (``n = R u``,
        ``d-dot = rdot_j + omega_j R S_j - rdot_i - omega_i R S_i``, Eq. 4.3)."""
        u, n, Si, Sj = self._geom(par, qb)
        d = qb[:, 1, :2] + Sj - qb[:, 0, :2] - Si
        wi, wj = qdb[:, 0, 2:3], qdb[:, 1, 2:3]
        dd = qdb[:, 1, :2] + wj * perp(Sj) - qdb[:, 0, :2] - wi * perp(Si)
        return np.stack([np.sum(u * d, -1),
                         wi[:, 0] * np.sum(n * d, -1) + np.sum(u * dd, -1)], -1)


# The types of the other planar modules, and ``CONSTRAINT_TYPES`` (every built-in
# planar constraint type), are imported on first access (PEP 562): a model of
# revolutes and drivers does not import the cams, gears... (start-up).
_ELSEWHERE = {"PointDriver": "drivers", "CAM_TYPES": "cams", "NONHOLONOMIC_TYPES": "nonholonomic",
              "Gear": "gears", "RackPinion": "gears", "Distance": "links",
              "DistanceDriver": "links", "RevoluteTranslational": "links",
              "Translational002": "links"}


def __getattr__(name):
    import importlib
    if name == "CONSTRAINT_TYPES":
        g = __getattr__
        value = [Fixed, Absolute, AbsoluteDriver, RelativeDriver, Revolute, Translational,
                 g("Distance"), g("DistanceDriver"), g("RevoluteTranslational"),
                 g("Translational002"), g("Gear"), g("RackPinion"), g("PointDriver"),
                 *g("CAM_TYPES"), *g("NONHOLONOMIC_TYPES")]
    elif name in _ELSEWHERE:
        value = getattr(importlib.import_module(f".{_ELSEWHERE[name]}", __package__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
