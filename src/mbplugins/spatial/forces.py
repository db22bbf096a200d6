"""Built-in spatial force elements (Nikravesh (1988), §11.1, the spatial
counterparts of §9.2).

Body blocks ``qb`` (ne, nb, 7) = ``[r, p]``, ``qdb`` = ``[rdot, pdot]``.  Every type
computes its loads as in Nikravesh (1988), §11.1 — a force ``f`` (global) through the centre of
mass and a moment — and returns the generalised force of Formulation I per body,
``[f, n*]`` with ``n* = 2 G^T n = 2 L^T n'`` (Eqs. 11.1-11.2).  Its power is
``f . rdot + n* . pdot = f . rdot + omega . n``.

Spring-damper elements are written as laws on *scalar coordinates* of the
configuration (a length, an angle, the components of a relative displacement and
rotation): with a coordinate ``s(q)``, its angular-velocity Jacobian ``J_s``
(``sdot = J_s [rdot; omega']``, the jets of :mod:`.constraints`) and a law
``f = k (s - s0) + c sdot + f_a(t)``, the generalised force is ``-f J_s^T``.  The
spring part is then exactly ``-grad V`` of ``V = k (s - s0)^2 / 2`` whatever the
joints do, and the damper/actuator power is ``-(c sdot + f_a) sdot``.

Gravity is a model setting (``gravity: [gx, gy, gz]``), applied by the System.
These are the NumPy references; the compiled kernels (``c_kernel``: capsules of
``mbplugins._ext._spatial_forces``, through the compiled plugin tier) compute the same
numbers from the same packed parameters.
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.elements.base import ForceType, PackContext, velocity_blocks
from mbcore.errors import ElementEvaluationError, ModelError
from mbcore.elements.rotations import G as Gmat, L as Lmat, skew
from mbcore.elements.schema import Param

from . import constraints as C
from . import kinematics as SK
from ..planar import userforce as _uf

MIN_LENGTH = 1e-10
ZERO_LENGTH = ("the attachment points coincide (length < 1e-10): the spring-damper "
               "direction is undefined")
#: below this x^2 + y^2 (unit reference vectors) the RSDA angle is undefined
MIN_RHO2 = 1e-12
NO_ANGLE = ("the body-j reference direction is parallel to the rotation axis (the "
            "revolute joint is far from assembled): the angle is undefined")


# =====================================================================================
# helpers
# =====================================================================================
def _to_q(qb, gv):
    """Generalised force in v form ``[f, n']`` (ne, nb, 6) -> q form ``[f, 2 L^T n']``."""
    g = np.empty(gv.shape[:2] + (7,))
    g[..., :3] = gv[..., :3]
    g[..., 3:] = 2.0 * np.einsum("ebkl,ebk->ebl", Lmat(qb[..., 3:7]), gv[..., 3:])
    return g


def _loads(qb, f, n, k=0, nb=1):
    """``[f, 2 G^T n]`` on body ``k`` of ``nb`` from a global force (ne, 3) through
    the centre of mass and a global moment (ne, 3)."""
    g = np.zeros((qb.shape[0], nb, 7))
    g[:, k, :3] = f
    g[:, k, 3:] = 2.0 * np.einsum("ekl,ek->el", Gmat(qb[:, k, 3:7]), n)
    return g


def _sqrt_jet(S2: SK.Jet) -> SK.Jet:
    """``s = sqrt(S2)``: J = J2 / (2 s), d = d2 / (2 s) (no h: forces need none)."""
    s = np.sqrt(S2.v)
    return SK.Jet(s, None if S2.J is None else S2.J / (2.0 * s)[:, None, None],
                  None if S2.d is None else S2.d / (2.0 * s))


# -- derivatives for the force Jacobians (K = dg/dq, C = dg/dqd) -----------
# Exact derivatives of the expressions the forces evaluate, also off |p| = 1 (A(p)
# of Nikravesh (1988), Eq. 6.18 is the quadratic (2 e0^2 - 1) I + 2 e e^T + 2 e0 e~; G, L are
# linear in p).
def _sk(a):
    """a~ (..., 3) -> (..., 3, 3)."""
    z = np.zeros(a.shape[:-1])
    return np.stack([np.stack([z, -a[..., 2], a[..., 1]], -1),
                     np.stack([a[..., 2], z, -a[..., 0]], -1),
                     np.stack([-a[..., 1], a[..., 0], z], -1)], -2)


def _dA(p, a, transpose=False):
    """d(A(p) a)/dp (or d(A(p)^T a)/dp), (ne, 3, 4):
    ``[4 e0 a ± 2 e x a, 2 (e . a) I + 2 e a^T ∓ 2 e0 a~]``."""
    e0, e = p[:, 0], p[:, 1:4]
    sg = -1.0 if transpose else 1.0
    out = np.empty(p.shape[:1] + (3, 4))
    out[:, :, 0] = 4.0 * e0[:, None] * a + sg * 2.0 * np.cross(e, a)
    out[:, :, 1:] = (2.0 * np.einsum("ek,ek->e", e, a)[:, None, None] * np.eye(3)
                     + 2.0 * e[:, :, None] * a[:, None, :]
                     - sg * 2.0 * e0[:, None, None] * _sk(a))
    return out


_E4 = np.eye(4)


def _dM(M, x):
    """d(M(p) x)/dp for M = G or L (linear in p): column j is M(e_j) x, (ne, 3, 4)."""
    return np.einsum("jkl,el->ekj", M(_E4), x)


def _dMT(M, n):
    """d(M(p)^T n)/dp for M = G or L: column j is M(e_j)^T n, (ne, 4, 4)."""
    return np.einsum("jkl,ek->elj", M(_E4), n)


class SpatialForceType(ForceType):
    """Base of the spatial force types (body kind ``spatial``)."""
    #: the output methods treat every element independently and read time only
    #: through ``f``: evaluated for a block of output rows in one call
    rows_stacked = True

    body_kind = "spatial"


class _CoordinateLaw(SpatialForceType):
    #: single-coordinate laws: par columns of k, c and the free value (subclasses
    #: with several coordinates override _stiffness/_free/_laws/outputs)
    K_COL = C_COL = FREE_COL = 0

    """Spring-damper-actuator laws on scalar configuration coordinates (module
    docstring).  Subclasses give ``_coords(par, K)`` -> list of jets and
    ``_laws(par, s, sd, f)`` -> (spring, damper, actuator) forces, each (ne, k)."""

    def _kin(self, par, qb, qdb=None, jac=True):
        """The coordinates' jets (``jac``: with their Jacobians, which the outputs,
        the energy and the power do not need)."""
        K = SK.Kin(qb, None if qdb is None else velocity_blocks(qb, qdb), jac=jac)
        return K, self._coords(par, K)

    def _parts(self, par, qb, qdb, f, jac=True):
        K, jets = self._kin(par, qb, qdb, jac)
        s = np.stack([j.v for j in jets], -1)
        sd = np.stack([j.d for j in jets], -1)
        fs, fd, fa = self._laws(par, s, sd, f)
        return K, jets, s, sd, fs, fd, fa

    def force(self, par, qb, qdb, t, f):
        K, jets, s, sd, fs, fd, fa = self._parts(par, qb, qdb, f)
        ftot = fs + fd + fa
        gv = -sum(ftot[:, k, None, None] * j.J for k, j in enumerate(jets))
        return _to_q(qb, gv)

    def energy(self, par, qb, t, f):
        K, jets = self._kin(par, qb, jac=False)
        s = np.stack([j.v for j in jets], -1)
        return 0.5 * np.sum(self._stiffness(par) * (s - self._free(par)) ** 2, -1)

    def power_nc(self, par, qb, qdb, t, f):
        K, jets, s, sd, fs, fd, fa = self._parts(par, qb, qdb, f, jac=False)
        return -np.sum((fd + fa) * sd, -1)

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 2, 7, 2, 7) of ``Q = -sum_k f_k g_k`` (module docstring), with
        per coordinate ``s_k`` its q-form Jacobian row ``g_k = [J_r, 2 L^T J_pi']``
        (``sdot_k = g_k . qd``), its true gradient ``grad s_k`` and ``H_k = dg_k/dq``
        (:meth:`_coordinate_derivatives`)::

            K = -sum_k g_k (k_k grad s_k + c_k H_k^T qd)^T + f_k H_k
            C = -sum_k c_k g_k g_k^T

        (k_k, c_k: the laws' slopes)."""
        K_, jets, sv, sdv, fs, fd, fa = self._parts(par, qb, qdb, f)
        ftot = fs + fd + fa
        g, grad, H = self._coordinate_derivatives(par, qb)
        ks, cs = self._slopes(par)
        ne = par.shape[0]
        Hqd = np.einsum("ekab,ea->ekb", H, qdb.reshape(ne, 14))
        K = -np.einsum("eka,ekb->eab", g, ks[:, :, None] * grad + cs[:, :, None] * Hqd) \
            - np.einsum("ek,ekab->eab", ftot, H)
        Cm = -np.einsum("eka,ekb->eab", cs[:, :, None] * g, g)
        return K.reshape(ne, 2, 7, 2, 7), Cm.reshape(ne, 2, 7, 2, 7)

    def _slopes(self, par):
        """d(spring)/ds and d(damper)/dsdot per coordinate (ne, k): k and c."""
        return self._stiffness(par), par[:, self.C_COL:self.C_COL + 1]

    def _stiffness(self, par):
        return par[:, self.K_COL:self.K_COL + 1]

    def _free(self, par):
        return par[:, self.FREE_COL:self.FREE_COL + 1]

    def _laws(self, par, s, sd, f):
        """spring k (s - s0), damper c sdot, actuator f_a(t) (one time function)."""
        return (self._stiffness(par) * (s - self._free(par)),
                par[:, self.C_COL:self.C_COL + 1] * sd, f[:, 0, 0:1])

    def outputs(self, par, qb, qdb, t, f):
        K, jets, s, sd, fs, fd, fa = self._parts(par, qb, qdb, f, jac=False)
        return np.concatenate([s, sd, fs, fd, fa, fs + fd + fa], -1)


# =====================================================================================
# TSDA
# =====================================================================================
class SpatialTSDA(_CoordinateLaw):
    """Translational spring-damper-actuator between P_i and P_j (Nikravesh (1988), §9.2 carried over to space;
    Nikravesh (1988), Eqs. 9.13-9.25 in 3D)::

        l = r_j + A_j s'_j - r_i - A_i s'_i,  L = |l|,  Ldot = u . (rdot_j^P - rdot_i^P)
        f = k (L - L0) + c Ldot + f_a(t)     (tension positive)

    ``f u`` pulls body i towards j and ``-f u`` body j (with the moments of the
    attachment offsets).  par = ``[s'_i, s'_j, k, c, L0]``; one time function."""

    name = "tsda"
    description = "translational spring-damper-actuator between two body points"
    kernel = "spatial_tsda"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_forces.pyx)
    c_kernel = "mbplugins._ext._spatial_forces:TSDA"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec3", "attachment on body i (body coordinates)",
                         default=(0.0, 0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec3", "attachment on body j (body coordinates)",
                         default=(0.0, 0.0, 0.0), on="body_j", unit="length"),
        "stiffness": Param("number", "k", default=0.0, unit="force/length"),
        "damping": Param("number", "c", default=0.0, unit="force*time/length"),
        "free_length": Param("number", "L0 (default: the initial length)", required=False,
                             unit="length"),
        "actuator": Param("function", "f_a(t), positive = tension", default=0.0),
    }
    n_par = 9
    n_fun = 1
    K_COL, C_COL, FREE_COL = 6, 7, 8
    labels = ("length", "length_rate", "spring_force", "damper_force", "actuator_force",
              "force")

    def check(self, spec, path):
        for key in ("stiffness", "damping"):
            if spec[key] < 0:
                raise ModelError(f"{path}.{key}", "must be >= 0 (use the actuator for "
                                                  "active forces)")
        if spec.get("free_length") is not None and spec["free_length"] < 0:
            raise ModelError(f"{path}.free_length", "must be >= 0")

    def pack(self, spec, ctx: PackContext):
        si, sj = SK.v3(spec["point_i"]), SK.v3(spec["point_j"])
        L0 = spec.get("free_length")
        if L0 is None:
            L0 = float(np.linalg.norm(SK.global_point(ctx, spec["body_j"], sj)
                                      - SK.global_point(ctx, spec["body_i"], si)))
        return [*si, *sj, spec["stiffness"], spec["damping"], L0], [spec["actuator"]]

    def _coords(self, par, K):
        d = SK.sub(SK.body_point(K, 1, par[:, 3:6]), SK.body_point(K, 0, par[:, 0:3]))
        L2 = SK.vdot(d, d)
        short = L2.v < MIN_LENGTH ** 2
        if np.any(short):
            raise ElementEvaluationError(int(np.nonzero(short)[0][0]), ZERO_LENGTH)
        return [_sqrt_jet(L2)]

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 2, 7, 2, 7) of the spatial TSDA (Nikravesh (1988), §9.2 carried over to space) as the
        reference evaluates it: ``g_i = [F, 2 L_i^T (s'_i x A_i^T F)]``, ``g_j`` the
        negative with j's terms, ``F = f u``.  Columns ``[r_i, p_i, r_j, p_j]``::

            D = dl/dq = [-I, -d(A_i s'_i)/dp, I, d(A_j s'_j)/dp]
            v_P = rdot + A (w' x s'), w' = 2 L pdot:  V = d(ld)/dqd, E = d(ld)/dq
            dL/dq = u^T D;  dLdot/dq = ld^T P D / L + u^T E;  dLdot/dqd = u^T V
            dF/dq = u (k dL/dq + c dLdot/dq) + f P D / L;  dF/dqd = c u u^T V
            d n*_i = 2 d(L^T n')/dp + 2 L_i^T s'~_i (d(A_i^T F)/dp + A_i^T dF)

        with ``P = I - u u^T`` (k, c: the slopes of the laws)."""
        K_, jets, sv, sdv, fs, fd, fa = self._parts(par, qb, qdb, f)
        ne = par.shape[0]
        ftot = (fs + fd + fa)[:, 0]
        k, c = par[:, self.K_COL], par[:, self.C_COL]
        D = np.zeros((ne, 3, 14))
        V = np.zeros((ne, 3, 14))
        E = np.zeros((ne, 3, 14))
        l = np.zeros((ne, 3))
        ld = np.zeros((ne, 3))
        A, sp, Lm = [], [], []
        for b, sign in ((0, -1.0), (1, 1.0)):
            o = 7 * b
            p, pd, s1 = qb[:, b, 3:7], qdb[:, b, 3:7], par[:, 3 * b:3 * b + 3]
            Ab, Lb = SK.A(p), Lmat(p)
            wl = 2.0 * np.einsum("ekl,el->ek", Lb, pd)
            S = np.einsum("ekl,el->ek", Ab, s1)
            As = np.einsum("ekl,elj->ekj", Ab, _sk(s1))
            l += sign * (qb[:, b, :3] + S)
            ld += sign * (qdb[:, b, :3] + np.einsum("ekl,el->ek", Ab, np.cross(wl, s1)))
            D[:, :, o:o + 3] = sign * np.eye(3)
            D[:, :, o + 3:o + 7] = sign * _dA(p, s1)
            V[:, :, o:o + 3] = sign * np.eye(3)
            V[:, :, o + 3:o + 7] = -sign * 2.0 * np.einsum("ekl,elj->ekj", As, Lb)
            E[:, :, o + 3:o + 7] = sign * (_dA(p, np.cross(wl, s1)) - 2.0 * np.einsum(
                "ekl,elj->ekj", As, _dM(Lmat, pd)))
            A.append(Ab)
            sp.append(s1)
            Lm.append(Lb)
        L = np.linalg.norm(l, axis=1)
        u = l / L[:, None]
        P = np.eye(3) - u[:, :, None] * u[:, None, :]
        PD = np.einsum("ekl,elj->ekj", P, D) / L[:, None, None]
        dL = np.einsum("ek,ekj->ej", u, D)
        dLdq = np.einsum("ek,ekj->ej", ld, PD) + np.einsum("ek,ekj->ej", u, E)
        dLdd = np.einsum("ek,ekj->ej", u, V)
        dFq = u[:, :, None] * (k[:, None] * dL + c[:, None] * dLdq)[:, None, :] \
            + ftot[:, None, None] * PD
        dFd = (c[:, None, None] * u[:, :, None]) * dLdd[:, None, :]
        F = ftot[:, None] * u
        Kq = np.zeros((ne, 14, 14))
        Cq = np.zeros((ne, 14, 14))
        for b, sign in ((0, 1.0), (1, -1.0)):
            o = 7 * b
            Ab, s1, Lb = A[b], sp[b], Lm[b]
            ATF = np.einsum("elk,el->ek", Ab, F)
            nl = np.cross(s1, ATF)
            M = 2.0 * np.einsum("elk,elj->ekj", Lb, _sk(s1))          # 2 L^T s'~ (4 x 3)
            dATF = np.einsum("elk,elj->ekj", Ab, dFq)                  # A^T dF/dq
            dATF[:, :, o + 3:o + 7] += _dA(qb[:, b, 3:7], F, transpose=True)
            Kq[:, o:o + 3] = sign * dFq
            Kq[:, o + 3:o + 7] = sign * np.einsum("ekl,elj->ekj", M, dATF)
            Kq[:, o + 3:o + 7, o + 3:o + 7] += sign * 2.0 * _dMT(Lmat, nl)
            Cq[:, o:o + 3] = sign * dFd
            Cq[:, o + 3:o + 7] = sign * np.einsum("ekl,elj->ekj", M, np.einsum(
                "elk,elj->ekj", Ab, dFd))
        return Kq.reshape(ne, 2, 7, 2, 7), Cq.reshape(ne, 2, 7, 2, 7)



# =====================================================================================
# RSDA about a revolute axis
# =====================================================================================
class SpatialRSDA(_CoordinateLaw):
    """Rotational spring-damper-actuator about a revolute axis (Nikravesh (1988), §9.2 carried over to space;
    Nikravesh (1988), Eqs. 9.26-9.32 in 3D)::

        theta = atan2(g_i . f_j, f_i . f_j) (tracked through any number of turns)
        tau = k (theta - theta0) + c thetadot + tau_a(t)

    with the axis ``u_i`` and the reference directions of the rotation driver
    (:class:`.constraints.RotationDriver`: theta increases for body j turning
    positively about u_i relative to body i, theta = 0 in the initial
    configuration by default).  The generalised force is ``-tau theta_q^T``: on a
    healthy revolute ``+tau u_i`` on body i and ``-tau u_i`` on body j, and the
    exact gradient of ``k (theta - theta0)^2 / 2`` when the joint is violated.
    The tracked angle is state in ``par`` (as the rotation driver's).
    par = ``[f'_i, g'_i, f'_j, theta_tracked, k, c, theta0]``."""
    #: the output methods read the tracked angle kept in ``par``: one call per row
    rows_stacked = False

    name = "rsda"
    description = "rotational spring-damper-actuator about a revolute axis"
    kernel = "spatial_rsda"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_forces.pyx)
    c_kernel = "mbplugins._ext._spatial_forces:RSDA"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "axis_i": Param("axis3", "rotation axis, body i components"),
        "reference_i": Param("axis3", "body-i direction from which theta is measured "
                                      "(projected ⊥ axis_i; default: any)", required=False),
        "reference_j": Param("axis3", "body-j direction whose angle is theta (default: "
                                      "reference_i in the initial configuration)",
                             required=False),
        "stiffness": Param("number", "k", default=0.0, unit="force*length/angle"),
        "damping": Param("number", "c", default=0.0, unit="force*length*time/angle"),
        "free_angle": Param("number", "theta0 in radians", default=0.0, unit="angle"),
        "actuator": Param("function", "tau_a(t)", default=0.0),
    }
    n_par = 13
    n_fun = 1
    TRACK = 9
    K_COL, C_COL, FREE_COL = 10, 11, 12
    labels = ("angle", "angle_rate", "spring_torque", "damper_torque", "actuator_torque",
              "torque")

    def check(self, spec, path):
        for key in ("stiffness", "damping"):
            if spec[key] < 0:
                raise ModelError(f"{path}.{key}", "must be >= 0 (use the actuator for "
                                                  "active torques)")

    def pack(self, spec, ctx):
        drv = dict(spec)
        drv["function"] = _zero_function()
        par, _ = C.RotationDriver().pack(drv, ctx)
        return [*par, spec["stiffness"], spec["damping"], spec["free_angle"]], \
            [spec["actuator"]]

    def _coords(self, par, K):
        fj = SK.body_vector(K, 1, par[:, 6:9])
        y = SK.vdot(SK.body_vector(K, 0, par[:, 3:6]), fj)
        x = SK.vdot(SK.body_vector(K, 0, par[:, 0:3]), fj)
        bad = ~(x.v * x.v + y.v * y.v >= MIN_RHO2)
        if np.any(bad):
            raise ElementEvaluationError(int(np.nonzero(bad)[0][0]), NO_ANGLE)
        th = SK.atan2(y, x)
        ref = par[:, self.TRACK]
        th.v = th.v + C.TWO_PI * np.round((ref - th.v) / C.TWO_PI)
        par[:, self.TRACK] = th.v
        return [th]

    def _coordinate_derivatives(self, par, qb):
        """theta = atan2(y, x), x = f_i . f_j, y = g_i . f_j (:func:`_dot_ij`):
        ``g = (x g_y - y g_x)/rho^2``, ``grad = (x grad y - y grad x)/rho^2``,
        ``H = (g_y grad x^T - g_x grad y^T + x H_y - y H_x)/rho^2
        - 2 g (x grad x + y grad y)^T / rho^2``."""
        pi, pj = qb[:, 0, 3:7], qb[:, 1, 3:7]
        Ai, Aj, Li, Lj = SK.A(pi), SK.A(pj), Lmat(pi), Lmat(pj)
        fj = np.einsum("ekl,el->ek", Aj, par[:, 6:9])
        args = (par[:, 6:9], fj, pi, pj, Ai, Aj, Li, Lj)
        x, gx, dx, Hx = _dot_ij(par[:, 0:3], np.einsum("ekl,el->ek", Ai, par[:, 0:3]), *args)
        y, gy, dy, Hy = _dot_ij(par[:, 3:6], np.einsum("ekl,el->ek", Ai, par[:, 3:6]), *args)
        r2 = (x * x + y * y)[:, None]
        g = (x[:, None] * gy - y[:, None] * gx) / r2
        grad = (x[:, None] * dy - y[:, None] * dx) / r2
        H = (gy[:, :, None] * dx[:, None, :] - gx[:, :, None] * dy[:, None, :]
             + x[:, None, None] * Hy - y[:, None, None] * Hx) / r2[:, :, None] \
            - 2.0 * g[:, :, None] * (x[:, None] * dx + y[:, None] * dy)[:, None, :] \
            / r2[:, :, None]
        return g[:, None], grad[:, None], H[:, None]



def _dot_ij(par_ai, ai, fpj, fj, pi, pj, Ai, Aj, Li, Lj):
    """Derivatives of ``z = a_i . f_j`` (``a_i = A_i a'_i``, ``f_j = A_j f'_j``) in
    the columns ``[r_i, p_i, r_j, p_j]``: value, q-form row ``g`` (``2 L_i^T
    (a'_i x A_i^T f_j)``, ``2 L_j^T (f'_j x A_j^T a_i)``), true gradient and
    ``H = dg/dq``."""
    ne = pi.shape[0]
    val = np.einsum("ek,ek->e", ai, fj)
    dAi = _dA(pi, par_ai)
    dAj = _dA(pj, fpj)
    grad = np.zeros((ne, 14))
    grad[:, 3:7] = np.einsum("ekj,ek->ej", dAi, fj)
    grad[:, 10:14] = np.einsum("ekj,ek->ej", dAj, ai)
    ni = np.cross(par_ai, np.einsum("elk,el->ek", Ai, fj))
    nj = np.cross(fpj, np.einsum("elk,el->ek", Aj, ai))
    g = np.zeros((ne, 14))
    g[:, 3:7] = 2.0 * np.einsum("ekl,ek->el", Li, ni)
    g[:, 10:14] = 2.0 * np.einsum("ekl,ek->el", Lj, nj)
    Mi = 2.0 * np.einsum("ekl,ekm->elm", Li, _sk(par_ai))       # 2 L_i^T a'~ (4 x 3)
    Mj = 2.0 * np.einsum("ekl,ekm->elm", Lj, _sk(fpj))
    H = np.zeros((ne, 14, 14))
    H[:, 3:7, 3:7] = 2.0 * _dMT(Lmat, ni) + np.einsum("elm,emj->elj", Mi,
                                                      _dA(pi, fj, transpose=True))
    H[:, 3:7, 10:14] = np.einsum("elm,enm,enj->elj", Mi, Ai, dAj)
    H[:, 10:14, 10:14] = 2.0 * _dMT(Lmat, nj) + np.einsum("elm,emj->elj", Mj,
                                                          _dA(pj, ai, transpose=True))
    H[:, 10:14, 3:7] = np.einsum("elm,enm,enj->elj", Mj, Aj, dAi)
    return val, g, grad, H


def _zero_function():
    from mbcore.elements.functions import parse_function
    return parse_function(0.0, "function")


# =====================================================================================
# bushing: 6 linear springs and dampers between two body frames
# =====================================================================================
class Bushing(_CoordinateLaw):
    """Linear bushing between a frame on body i and one on body j (Nikravesh (1988), §9.2 carried over to space, the
    6-component generalisation of the TSDA and RSDA)::

        d_k     = e_k(i) . (P_j - P_i)                   (k = x, y, z; body-i axes)
        theta_k = -2 vec(conj(q0) ⊗ conj(p_j) ⊗ p_i)_k   (small relative rotation of j)
        f_k = k_k d_k + c_k ddot_k,   tau_k = kr_k theta_k + cr_k thetadot_k

    Both sets are functions of q, so the springs are exactly ``-grad V`` of
    ``V = sum k_k d_k^2 / 2 + kr_k theta_k^2 / 2`` (theta_k = the rotation angle
    about k for small rotations; ``2 sin(angle/2)`` times the axis in general).
    ``q0`` is the relative orientation of the initial configuration (no preload)
    and ``point_j`` defaults to the initial position of ``point_i``.
    par = ``[s'_i, s'_j, q0, k(3), c(3), kr(3), cr(3)]``."""

    name = "bushing"
    description = "linear 6-component spring-damper between two body frames"
    kernel = "spatial_bushing"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_forces.pyx)
    c_kernel = "mbplugins._ext._spatial_forces:BUSHING"
    bodies = ("body_i", "body_j")
    params = {
        "body_i": Param("body", "first body"),
        "body_j": Param("body", "second body"),
        "point_i": Param("vec3", "bushing centre on body i (body coordinates)",
                         default=(0.0, 0.0, 0.0), on="body_i", unit="length"),
        "point_j": Param("vec3", "the same point in body j coordinates (default: from "
                                 "the initial configuration)", required=False,
                         on="body_j", unit="length"),
        "stiffness": Param("vec3", "translational stiffness along body-i x, y, z",
                           default=(0.0, 0.0, 0.0), unit="force/length"),
        "damping": Param("vec3", "translational damping", default=(0.0, 0.0, 0.0),
                         unit="force*time/length"),
        "rotational_stiffness": Param("vec3", "rotational stiffness about body-i x, y, z",
                                      default=(0.0, 0.0, 0.0), unit="force*length/angle"),
        "rotational_damping": Param("vec3", "rotational damping", default=(0.0, 0.0, 0.0),
                                    unit="force*length*time/angle"),
    }
    n_par = 22
    n_fun = 0
    labels = ("dx", "dy", "dz", "rx", "ry", "rz", "fx", "fy", "fz", "tx", "ty", "tz")

    def check(self, spec, path):
        for key in ("stiffness", "damping", "rotational_stiffness", "rotational_damping"):
            if np.any(np.asarray(spec[key], float) < 0):
                raise ModelError(f"{path}.{key}", "must be >= 0")

    def pack(self, spec, ctx):
        bi, bj = spec["body_i"], spec["body_j"]
        si = SK.v3(spec["point_i"])
        sj = spec.get("point_j")
        sj = SK.map_point(ctx, bi, si, bj) if sj is None else SK.v3(sj)
        _, Ai = ctx.pose(bi)
        _, Aj = ctx.pose(bj)
        q0 = SK.q_from_A(Aj.T @ Ai)
        return [*si, *sj, *q0, *SK.v3(spec["stiffness"]), *SK.v3(spec["damping"]),
                *SK.v3(spec["rotational_stiffness"]), *SK.v3(spec["rotational_damping"])], []

    def _coords(self, par, K):
        d = SK.sub(SK.body_point(K, 1, par[:, 3:6]), SK.body_point(K, 0, par[:, 0:3]))
        ne = par.shape[0]
        out = []
        for k in range(3):
            e = np.zeros((ne, 3))
            e[:, k] = 1.0
            out.append(SK.vdot(SK.body_vector(K, 0, e), d))
        w = SK.relative_ep(K, par[:, 6:10])
        for k in range(3):
            wk = SK.component(w, np.full(ne, k))
            out.append(SK.Jet(-2.0 * wk.v, None if wk.J is None else -2.0 * wk.J,
                              None if wk.d is None else -2.0 * wk.d))
        return out

    def _slopes(self, par):
        return self._stiffness(par), np.concatenate([par[:, 13:16], par[:, 19:22]], -1)

    def _coordinate_derivatives(self, par, qb):
        """Rows g, true gradients and H = dg/dq of the six coordinates, as the
        reference's jets (and the kernel) define them:

        * ``d_c = u . l``, ``u = A_i e'_c``, ``l = P_j - P_i``: ``g = [-u, 2 L_i^T
          (e'_c x A_i^T l - s'_i x A_i^T u), u, 2 L_j^T (s'_j x A_j^T u)]``;
        * ``theta_c = -2 w_c``, ``w = conj(q0) ⊗ conj(p_j) ⊗ p_i``:
          ``g = [0, -2 L_i^T (w0 e_c + e_c x w), 0, 2 L_j^T A(q0) (w0 e_c - e_c x w)]``."""
        ne = par.shape[0]
        ri, rj = qb[:, 0, :3], qb[:, 1, :3]
        pi, pj = qb[:, 0, 3:7], qb[:, 1, 3:7]
        Ai, Aj, Li, Lj = SK.A(pi), SK.A(pj), Lmat(pi), Lmat(pj)
        si, sj = par[:, 0:3], par[:, 3:6]
        l = rj + np.einsum("ekl,el->ek", Aj, sj) - ri - np.einsum("ekl,el->ek", Ai, si)
        D = np.zeros((ne, 3, 14))
        D[:, :, 0:3] = -np.eye(3)
        D[:, :, 3:7] = -_dA(pi, si)
        D[:, :, 7:10] = np.eye(3)
        D[:, :, 10:14] = _dA(pj, sj)
        Msi = 2.0 * np.einsum("ekl,ekm->elm", Li, _sk(si))            # 2 L_i^T s'_i~
        Msj = 2.0 * np.einsum("ekl,ekm->elm", Lj, _sk(sj))
        g = np.zeros((ne, 6, 14))
        grad = np.zeros((ne, 6, 14))
        H = np.zeros((ne, 6, 14, 14))
        ATl = np.einsum("elk,el->ek", Ai, l)
        dATl = _dA(pi, l, transpose=True)
        for c in range(3):
            ec = np.zeros((ne, 3))
            ec[:, c] = 1.0
            u = Ai[:, :, c]
            du = _dA(pi, ec)                                           # d u / d p_i
            grad[:, c] = np.einsum("ek,ekj->ej", u, D)
            grad[:, c, 3:7] += np.einsum("ek,ekj->ej", l, du)
            ATu = np.einsum("elk,el->ek", Ai, u)
            ni = np.cross(ec, ATl) - np.cross(si, ATu)
            nj = np.cross(sj, np.einsum("elk,el->ek", Aj, u))
            g[:, c, 0:3] = -u
            g[:, c, 7:10] = u
            g[:, c, 3:7] = 2.0 * np.einsum("ekl,ek->el", Li, ni)
            g[:, c, 10:14] = 2.0 * np.einsum("ekl,ek->el", Lj, nj)
            H[:, c, 0:3, 3:7] = -du
            H[:, c, 7:10, 3:7] = du
            Mec = 2.0 * np.einsum("ekl,ekm->elm", Li, _sk(ec))         # 2 L_i^T e'_c~
            dni = np.einsum("elm,emj->elj", Mec, np.einsum("enm,enj->emj", Ai, D))
            dni[:, :, 3:7] += np.einsum("elm,emj->elj", Mec, dATl)
            dni[:, :, 3:7] -= np.einsum("elm,emj->elj", Msi, _dA(pi, u, transpose=True)
                                        + np.einsum("enm,enj->emj", Ai, du))
            H[:, c, 3:7] = dni
            H[:, c, 3:7, 3:7] += 2.0 * _dMT(Lmat, ni)
            H[:, c, 10:14, 10:14] = 2.0 * _dMT(Lmat, nj) + np.einsum(
                "elm,emj->elj", Msj, _dA(pj, u, transpose=True))
            H[:, c, 10:14, 3:7] = np.einsum("elm,enm,enj->elj", Msj, Aj, du)
        # rotations: w = conj(q0) ⊗ conj(p_j) ⊗ p_i, bilinear in (p_i, p_j)
        cq0 = SK.qconj(par[:, 6:10])
        w = SK.qmul(cq0, SK.qmul(SK.qconj(pj), pi))
        dW = np.zeros((ne, 4, 14))
        for j in range(4):
            e = np.zeros((ne, 4))
            e[:, j] = 1.0
            dW[:, :, 3 + j] = SK.qmul(cq0, SK.qmul(SK.qconj(pj), e))
            dW[:, :, 10 + j] = SK.qmul(cq0, SK.qmul(SK.qconj(e), pi))
        A0 = SK.A(par[:, 6:10])
        for c in range(3):
            k = 3 + c
            ec = np.zeros(3)
            ec[c] = 1.0
            ecx = _sk(ec)
            Ji = -(w[:, 0:1] * ec + np.cross(ec, w[:, 1:]))
            Jj = np.einsum("ekl,el->ek", A0, w[:, 0:1] * ec - np.cross(ec, w[:, 1:]))
            dJi = np.zeros((ne, 3, 4))                                   # dJi / dw
            dJi[:, :, 0] = -ec
            dJi[:, :, 1:] = -ecx
            dJj = np.zeros((ne, 3, 4))
            dJj[:, :, 0] = A0[:, :, c]
            dJj[:, :, 1:] = -np.einsum("ekl,lm->ekm", A0, ecx)
            g[:, k, 3:7] = 2.0 * np.einsum("ekl,ek->el", Li, Ji)
            g[:, k, 10:14] = 2.0 * np.einsum("ekl,ek->el", Lj, Jj)
            grad[:, k] = -2.0 * dW[:, 1 + c]
            H[:, k, 3:7] = 2.0 * np.einsum("ekl,ekm,emj->elj", Li, dJi, dW)
            H[:, k, 3:7, 3:7] += 2.0 * _dMT(Lmat, Ji)
            H[:, k, 10:14] = 2.0 * np.einsum("ekl,ekm,emj->elj", Lj, dJj, dW)
            H[:, k, 10:14, 10:14] += 2.0 * _dMT(Lmat, Jj)
        return g, grad, H

    def _stiffness(self, par):
        return np.concatenate([par[:, 10:13], par[:, 16:19]], -1)

    def _free(self, par):
        return 0.0

    def _laws(self, par, s, sd, f):
        k = self._stiffness(par)
        c = np.concatenate([par[:, 13:16], par[:, 19:22]], -1)
        return k * s, c * sd, np.zeros_like(s)

    def outputs(self, par, qb, qdb, t, f):
        K, jets, s, sd, fs, fd, fa = self._parts(par, qb, qdb, f, jac=False)
        return np.concatenate([s, fs + fd], -1)


# =====================================================================================
# point force, pure moment, drag
# =====================================================================================
class SpatialPointForce(SpatialForceType):
    """Force ``f(t)`` at a body point (Nikravesh (1988), Eqs. 11.5-11.7):
    ``n = s x f`` with ``s = A s'``; ``frame: body`` gives the components in body
    axes (a follower force, ``f = A f'``).  par = ``[s', frame]``."""

    name = "force"
    description = "force at a body point, components functions of time (global or body axes)"
    kernel = "spatial_force"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_forces.pyx)
    c_kernel = "mbplugins._ext._spatial_forces:FORCE"
    bodies = ("body",)
    params = {
        "body": Param("body", "the loaded body"),
        "point": Param("vec3", "point of application (body coordinates)",
                       default=(0.0, 0.0, 0.0), on="body", unit="length"),
        "fx": Param("function", "x component f_x(t)", default=0.0),
        "fy": Param("function", "y component f_y(t)", default=0.0),
        "fz": Param("function", "z component f_z(t)", default=0.0),
        "frame": Param("choice", "axes of the components", default="global",
                       choices=("global", "body")),
    }
    n_par = 4
    n_fun = 3
    labels = ("fx", "fy", "fz")

    def pack(self, spec, ctx):
        return [*SK.v3(spec["point"]), 1.0 if spec["frame"] == "body" else 0.0], \
            [spec["fx"], spec["fy"], spec["fz"]]

    def _f(self, par, qb, f):
        A = SK.A(qb[:, 0, 3:7])
        fl = f[:, :, 0]
        return np.where(par[:, 3:4] > 0.5, np.einsum("ekl,el->ek", A, fl), fl), A

    def force(self, par, qb, qdb, t, f):
        fg, A = self._f(par, qb, f)
        s = np.einsum("ekl,el->ek", A, par[:, 0:3])
        return _loads(qb, fg, np.cross(s, fg))

    def outputs(self, par, qb, qdb, t, f):
        return self._f(par, qb, f)[0]

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 1, 7, 1, 7) of ``g = [F, 2 G^T (A s' x F)]`` (Nikravesh (1988), §9.2 carried over to space point
        force): ``dn/dp = -F~ d(A s')/dp (+ s~ d(A f')/dp for body axes)``,
        ``K_pp = 2 d(G^T n)/dp + 2 G^T dn/dp``, ``K_rp = d(A f')/dp`` (body axes);
        C = 0."""
        F, A = self._f(par, qb, f)
        p = qb[:, 0, 3:7]
        S = np.einsum("ekl,el->ek", A, par[:, 0:3])
        n = np.cross(S, F)
        body = (par[:, 3] > 0.5)[:, None, None]
        dF = np.where(body, _dA(p, f[:, :, 0]), 0.0)
        dn = -np.einsum("ekl,elj->ekj", _sk(F), _dA(p, par[:, 0:3])) \
            + np.einsum("ekl,elj->ekj", _sk(S), dF)
        ne = par.shape[0]
        K = np.zeros((ne, 7, 7))
        K[:, :3, 3:] = dF
        K[:, 3:, 3:] = 2.0 * _dMT(Gmat, n) + 2.0 * np.einsum("ekl,ekj->elj", Gmat(p), dn)
        return K.reshape(ne, 1, 7, 1, 7), np.zeros((ne, 1, 7, 1, 7))


class SpatialTorque(SpatialForceType):
    """Pure moment ``n(t)`` on a body (Nikravesh (1988), §9.2 carried over to space "pure moment"), global or body
    components; with ``reaction_body`` the opposite moment acts on it (a relative
    actuator).  par = ``[frame]``."""

    name = "torque"
    description = "pure moment on a body (optionally reacting on a second body)"
    kernel = "spatial_torque"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_forces.pyx)
    c_kernel = "mbplugins._ext._spatial_forces:TORQUE"
    bodies = ("body", "reaction_body")
    params = {
        "body": Param("body", "the loaded body"),
        "reaction_body": Param("body", "body receiving -n (default: ground)",
                               default="ground"),
        "tx": Param("function", "x component n_x(t)", default=0.0),
        "ty": Param("function", "y component n_y(t)", default=0.0),
        "tz": Param("function", "z component n_z(t)", default=0.0),
        "frame": Param("choice", "axes of the components (body: of 'body')",
                       default="global", choices=("global", "body")),
    }
    n_par = 1
    n_fun = 3
    labels = ("tx", "ty", "tz")

    def pack(self, spec, ctx):
        return [1.0 if spec["frame"] == "body" else 0.0], [spec["tx"], spec["ty"], spec["tz"]]

    def _n(self, par, qb, f):
        nl = f[:, :, 0]
        A = SK.A(qb[:, 0, 3:7])
        return np.where(par[:, 0:1] > 0.5, np.einsum("ekl,el->ek", A, nl), nl)

    def force(self, par, qb, qdb, t, f):
        n = self._n(par, qb, f)
        z = np.zeros_like(n)
        return _loads(qb, z, n, 0, 2) + _loads(qb, z, -n, 1, 2)

    def outputs(self, par, qb, qdb, t, f):
        return self._n(par, qb, f)

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 2, 7, 2, 7) of ``g_i = [0, 2 G_i^T n]``, ``g_j = [0, -2 G_j^T n]``
        (Nikravesh (1988), §9.2 carried over to space pure moment), ``n`` global or ``A_i n'``: ``K_pipi = 2 d(G^T n)/dp
        + 2 G_i^T dn/dp_i``, ``K_pjpj = -2 d(G^T n)/dp``, ``K_pjpi = -2 G_j^T
        dn/dp_i``; C = 0."""
        n = self._n(par, qb, f)
        pi, pj = qb[:, 0, 3:7], qb[:, 1, 3:7]
        dn = np.where((par[:, 0] > 0.5)[:, None, None], _dA(pi, f[:, :, 0]), 0.0)
        ne = par.shape[0]
        K = np.zeros((ne, 2, 7, 2, 7))
        K[:, 0, 3:, 0, 3:] = 2.0 * _dMT(Gmat, n) + 2.0 * np.einsum("ekl,ekj->elj",
                                                                    Gmat(pi), dn)
        K[:, 1, 3:, 1, 3:] = -2.0 * _dMT(Gmat, n)
        K[:, 1, 3:, 0, 3:] = -2.0 * np.einsum("ekl,ekj->elj", Gmat(pj), dn)
        return K, np.zeros_like(K)


class SpatialDrag(SpatialForceType):
    """Aerodynamic (quadratic) and linear drag on a body point (Nikravesh (1988), Prob. 10.18 in
    3D): ``v = rdot + omega x s - v_wind``, ``f = -(0.5 c_d rho A |v| + c) v`` at the
    point.  Non-conservative (power ``f . v_P``).
    par = ``[s', 0.5 c_d rho A, c, wind]``."""

    name = "drag"
    description = "aerodynamic (quadratic) and linear drag on a body point"
    kernel = "spatial_drag"
    #: the C kernel, through the compiled plugin tier (ext/plugins/_spatial_forces.pyx)
    c_kernel = "mbplugins._ext._spatial_forces:DRAG"
    bodies = ("body",)
    params = {
        "body": Param("body", "the body"),
        "point": Param("vec3", "point where the drag acts (body coordinates)",
                       default=(0.0, 0.0, 0.0), on="body", unit="length"),
        "drag_coefficient": Param("number", "c_d (>= 0)", default=0.0),
        "density": Param("number", "fluid density rho (>= 0)", default=1.225,
                         unit="mass/length^3"),
        "area": Param("number", "reference area A (>= 0)", default=0.0, unit="length^2"),
        "linear": Param("number", "linear drag coefficient c (>= 0): adds -c v", default=0.0,
                        unit="force*time/length"),
        "wind": Param("vec3", "velocity of the fluid (global)", default=(0.0, 0.0, 0.0),
                      unit="length/time"),
    }
    n_par = 8
    n_fun = 0
    labels = ("speed", "force", "fx", "fy", "fz")

    def check(self, spec, path):
        for key in ("drag_coefficient", "density", "area", "linear"):
            if spec[key] < 0:
                raise ModelError(f"{path}.{key}", f"must be >= 0, got {spec[key]:g}")

    def pack(self, spec, ctx):
        kq = 0.5 * spec["drag_coefficient"] * spec["density"] * spec["area"]
        return [*SK.v3(spec["point"]), kq, spec["linear"], *SK.v3(spec["wind"])], []

    def _parts(self, par, qb, qdb):
        p, pd = qb[:, 0, 3:7], qdb[:, 0, 3:7]
        A = SK.A(p)
        s = np.einsum("ekl,el->ek", A, par[:, 0:3])
        w = 2.0 * np.einsum("ekl,el->ek", Gmat(p), pd)          # global omega
        v = qdb[:, 0, :3] + np.cross(w, s) - par[:, 5:8]
        speed = np.sqrt(np.einsum("ek,ek->e", v, v))
        fv = -(par[:, 3] * speed + par[:, 4])[:, None] * v
        return s, v, speed, fv

    def force(self, par, qb, qdb, t, f):
        s, v, speed, fv = self._parts(par, qb, qdb)
        return _loads(qb, fv, np.cross(s, fv))

    def outputs(self, par, qb, qdb, t, f):
        s, v, speed, fv = self._parts(par, qb, qdb)
        return np.concatenate([speed[:, None], np.linalg.norm(fv, axis=1)[:, None], fv], -1)

    def force_jacobian(self, par, qb, qdb, t, f):
        """K, C (ne, 1, 7, 1, 7) of ``g = [f_v, 2 G^T (s x f_v)]`` (Nikravesh (1988), Prob. 10.18 in
        3D) with ``v = rdot + w x s - v_wind``, ``w = 2 G pdot``::

            dv/drdot = I,  dv/dpdot = -2 s~ G,  dv/dp = -s~ d(2 G pdot)/dp + w~ d(A s')/dp
            F_v = -(kq |v| + c) I - kq v v^T / |v|   (0 at v = 0 for the second term)
            dn = -f_v~ ds + s~ F_v dv;  rows of n*: 2 d(G^T n)/dp + 2 G^T dn
        """
        s, v, speed, fv = self._parts(par, qb, qdb)
        p, pd = qb[:, 0, 3:7], qdb[:, 0, 3:7]
        Gp = Gmat(p)
        w = 2.0 * np.einsum("ekl,el->ek", Gp, pd)
        ds = _dA(p, par[:, 0:3])
        ss = _sk(s)
        ne = par.shape[0]
        inv = np.divide(1.0, speed, out=np.zeros_like(speed), where=speed > 0)
        Fv = -(par[:, 3] * speed + par[:, 4])[:, None, None] * np.eye(3) \
            - (par[:, 3] * inv)[:, None, None] * v[:, :, None] * v[:, None, :]
        dvq = np.zeros((ne, 3, 7))
        dvq[:, :, 3:] = -np.einsum("ekl,elj->ekj", ss, 2.0 * _dM(Gmat, pd)) \
            + np.einsum("ekl,elj->ekj", _sk(w), ds)
        dvd = np.zeros((ne, 3, 7))
        dvd[:, :, :3] = np.eye(3)
        dvd[:, :, 3:] = -2.0 * np.einsum("ekl,elj->ekj", ss, Gp)
        dfq = np.einsum("ekl,elj->ekj", Fv, dvq)
        dfd = np.einsum("ekl,elj->ekj", Fv, dvd)
        dnq = np.einsum("ekl,elj->ekj", ss, dfq)
        dnq[:, :, 3:] -= np.einsum("ekl,elj->ekj", _sk(fv), ds)
        dnd = np.einsum("ekl,elj->ekj", ss, dfd)
        n = np.cross(s, fv)
        K = np.zeros((ne, 7, 7))
        C = np.zeros((ne, 7, 7))
        K[:, :3] = dfq
        K[:, 3:] = 2.0 * np.einsum("ekl,ekj->elj", Gp, dnq)
        K[:, 3:, 3:] += 2.0 * _dMT(Gmat, n)
        C[:, :3] = dfd
        C[:, 3:] = 2.0 * np.einsum("ekl,ekj->elj", Gp, dnd)
        return K.reshape(ne, 1, 7, 1, 7), C.reshape(ne, 1, 7, 1, 7)


# =====================================================================================
# user force from Python
# =====================================================================================
class SpatialUserForce(SpatialForceType):
    """Force law given by a Python callable (DAP USRFRC in 3D): ``fn(t, q, qd,
    **parameters)`` with ``q``, ``qd`` the (2, 7) blocks ``[r, p]``, ``[rdot, pdot]``
    of body_i and body_j returns the loads ``[f, n]`` (global force through the
    centre of mass, global moment about it) on body_i — shape (6,) — or on both,
    (2, 6).  ``vectorized: true``: one call per group with (ne, 2, 7) blocks,
    returning (ne, 6) or (ne, 2, 6).  par = ``[handle]``."""
    #: a user expression may read ``t`` itself: one call per output row
    rows_stacked = False

    name = "user_force"
    description = "force law given by a Python callable (DAP USRFRC)"
    kernel = None
    bodies = ("body_i", "body_j")
    params = _uf.UserForce.params
    frame_fixed = _uf.UserForce.frame_fixed
    n_par = 1
    n_fun = 0
    labels = ("fx_i", "fy_i", "fz_i", "nx_i", "ny_i", "nz_i",
              "fx_j", "fy_j", "fz_j", "nx_j", "ny_j", "nz_j")

    def pack(self, spec, ctx):
        return _uf.UserForce.pack(self, spec, ctx)

    def _load_blocks(self, par, qb, qdb, t):
        return _uf.load_blocks(par, qb, qdb, t, 6)

    def force(self, par, qb, qdb, t, f):
        lb = self._load_blocks(par, qb, qdb, t)
        return _loads(qb, lb[:, 0, :3], lb[:, 0, 3:], 0, 2) + \
            _loads(qb, lb[:, 1, :3], lb[:, 1, 3:], 1, 2)

    def outputs(self, par, qb, qdb, t, f):
        return self._load_blocks(par, qb, qdb, t).reshape(par.shape[0], 12)


FORCE_TYPES = (SpatialTSDA, SpatialRSDA, Bushing, SpatialPointForce, SpatialTorque,
               SpatialDrag, SpatialUserForce)

del math, skew
