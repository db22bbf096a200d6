"""Joint coordinates of spatial trees (Nikravesh (1988), §13.4, JC-1, and
the velocity transformation of TAM 674 (2003), lectures of 10 to 26 February;
Nikravesh (1988), §11.5 for the angular-velocity form).

Every body of a spatial model (rigid, Euler parameters) is reached from the ground
through exactly one *tree joint*; bodies no joint connects to the ground get a
*floating base* (a free joint from the ground).  Each tree joint carries relative
coordinates ``theta`` (positions) and velocities ``nu``:

=============  ===========================  ==============  =========================
joint          theta                        nu              relative motion
=============  ===========================  ==============  =========================
planar         slides along f, g; angle     their rates     ``d = t1 f + t2 g``, u
revolute       angle about the axis         its rate        ``e = e(u, theta)``
translational  slide along the axis         its rate        ``d = theta u``
cylindrical    angle, slide                 rates           both
universal      angles about the two bars    rates           ``e(a_p, t1) p0 e(a_c, t2)``
spherical      Euler parameters e (4)       omega_rel (3)   ``e``, ``edot = 1/2 G(e)^T w``
free (base)    position x (3), e (4)        xdot, omega     both
=============  ===========================  ==============  =========================

with ``u``, ``a_p`` in the parent body's axes and ``a_c`` in the child's.  With the
parent pose ``(r_p, p_p)`` the child follows as

    p_c = p_p ⊗ e(theta) ⊗ p0,   r_c = r_p + A_p (s_p + d(theta)) - A_c s_c

(``p0``: the relative Euler parameters of the reference state, so theta = 0 there;
the quaternion product keeps the sign of p continuous, as the Cartesian integration
does).  Body velocities are ``v = [rdot; omega']`` (omega' in body axes, Nikravesh (1988), §11.5
Formulation III); every joint gives the linear map of the recursions

    v_c = X v_p + S nu,        vdot_c = X vdot_p + S nudot + c

(``X`` the transport from the parent, ``S`` the joint's motion, ``c`` the velocity
terms), from which both solvers follow: the composite ``B^T M B`` (B built from X,
S) and the articulated-body recursion (:func:`articulated_body_blocks`, O(N)).
Mass ``diag(m I3, J')`` per body; forces ``[F; n' - omega'~ J' omega']`` with
``n' = 1/2 L(p) n*`` from the System's Euler-parameter forces ``n*``.

Rows that are not tree joints (cut joints closing loops, drivers, other
constraints) are algebraic equations in the velocity form ``Jv = [Phi_r, 1/2 Phi_p
L^T]`` (as ``di_omega``), ``D = Jv B``; the normalisation rows hold identically.
They are stabilised by Baumgarte terms or (``loop_stabilization``) projected /
partitioned after every step (:mod:`.jc_loops`; the Euler parameters of ball joints
and floating bases move by rotation vectors there, :meth:`SpatialTree.retract`).
"""
from __future__ import annotations

import numpy as np

from mbcore.errors import ModelError
from mbcore.elements.rotations import A as Amat, G as Gmat, L as Lmat, quat_conj, \
    quat_product, skew

#: joint kinds -> (number of theta, number of nu)
SIZES = {"revolute": (1, 1), "translational": (1, 1), "cylindrical": (2, 2),
         "universal": (2, 2), "spherical": (4, 3), "free": (7, 6), "planar": (3, 3)}
_E0 = np.array([1.0, 0.0, 0.0, 0.0])


def _qaxis(u, th):
    """Euler parameters of the rotation by ``th`` about the unit axis u."""
    h = 0.5 * th
    return np.concatenate([[np.cos(h)], np.sin(h) * u])


def _angle_about(u, a, b):
    """The angle about u from a to b (a, b ⊥ u)."""
    return float(np.arctan2(np.cross(a, b) @ u, a @ b))


def _perp(u):
    k = int(np.argmin(np.abs(u)))
    e = np.zeros(3)
    e[k] = 1.0
    f = e - (e @ u) * u
    f /= np.linalg.norm(f)
    return f, np.cross(u, f)


class SJoint:
    """One tree joint seen from its parent body (``parent`` None: the ground)."""

    __slots__ = ("name", "kind", "parent", "child", "sp", "sc", "u", "f", "g", "ac",
                 "p0", "w", "qo", "nq", "vo", "nv", "rows", "index")

    def __init__(self):
        self.p0 = self.w = None

    def __repr__(self):  # pragma: no cover - debugging aid
        return f"SJoint({self.name}, {self.kind}, {self.parent}->{self.child})"


class SpatialTree:
    """Topology, coordinates and recursions of a spatial tree (module docstring)."""

    TYPES = ("revolute", "translational", "cylindrical", "universal", "spherical", "planar")
    width = 6

    def __init__(self, system, cut=()):
        s = system
        if s.planar_only or s.padded or s.n_extra or len(s.rigid_spatial) != s.nb:
            raise ModelError("settings.formulation", "joint_coordinates of spatial models "
                                                     "needs rigid spatial bodies only (no "
                                                     "particles)")
        self.system = s
        self.nb = nb = s.nb
        self.off = np.asarray(s.body_offsets, dtype=np.intp)
        body_of = {int(o): k for k, o in enumerate(self.off)}
        cut = set(cut)
        joints, named_cut = [], []
        for g in s.groups:
            name = g.ctype.name
            if name not in self.TYPES:
                continue
            for e in range(g.ne):
                j = SJoint()
                j.name, j.kind = g.names[e], name
                j.rows = np.arange(g.row[e], g.row[e] + g.ctype.equations)
                bi, bj = (int(x) for x in g.boff[e])
                j.parent = body_of.get(bi)
                j.child = body_of.get(bj)
                self._params(j, np.asarray(g.par[e], dtype=float))
                (named_cut if j.name in cut else joints).append(j)
        unknown = cut - {j.name for j in named_cut}
        if unknown:
            raise ModelError("settings.cut_joints", f"no tree joint named "
                                                    f"{', '.join(sorted(unknown))}")
        self.joints, self.cut = self._order(joints)
        self.cut += named_cut
        self.floating = [j.child for j in self.joints if j.kind == "free"]
        qo = vo = 0
        for k, j in enumerate(self.joints):
            j.index = k
            j.nq, j.nv = SIZES[j.kind]
            j.qo, j.vo = qo, vo
            qo += j.nq
            vo += j.nv
        self.nq, self.nv = qo, vo
        self.dof = vo
        #: normalisation rows (one per body, last) hold identically, like tree joints
        nsp = len(s.rigid_spatial)
        self.norm_rows = np.arange(s.m - nsp, s.m)
        rows = [j.rows for j in self.joints if j.kind != "free"]
        self.joint_rows = np.sort(np.concatenate(rows)) if rows else np.zeros(0, np.intp)
        self.tree_rows = np.sort(np.concatenate([self.joint_rows, self.norm_rows]))
        self.extra_rows = np.setdiff1d(np.arange(s.m), self.tree_rows)
        self.mass = np.asarray(s.body_mass, dtype=float)
        self.inertia = np.asarray(s.body_inertia, dtype=float).reshape(nb, 3, 3)
        #: the spatial inertia of each body about its centre, body axes (nb, 6, 6)
        self.M = np.zeros((nb, 6, 6))
        self.M[:, 0, 0] = self.M[:, 1, 1] = self.M[:, 2, 2] = self.mass
        self.M[:, 3:, 3:] = self.inertia
        self.r_idx = self.off[:, None] + np.arange(3)
        self.p_idx = self.off[:, None] + 3 + np.arange(4)
        self.referenced = False

    # ------------------------------------------------------------------ set-up
    @staticmethod
    def _params(j, par):
        """Joint geometry in the (body_i, body_j) order of the model (swapped when
        the tree runs the other way: :meth:`_swap`)."""
        j.sp, j.sc = par[0:3].copy(), par[3:6].copy()
        j.ac = None
        if j.kind == "universal":
            j.u, j.ac = par[6:9] / np.linalg.norm(par[6:9]), par[9:12] / np.linalg.norm(
                par[9:12])
            j.f, j.g = _perp(j.u)
        elif j.kind == "spherical":
            j.u = j.f = j.g = None
        else:
            j.f, j.g = par[9:12].copy(), par[12:15].copy()
            j.u = np.cross(j.f, j.g)
            j.ac = par[6:9].copy()          # the axis in body j (used when swapped)

    @staticmethod
    def _swap(j):
        j.parent, j.child = j.child, j.parent
        j.sp, j.sc = j.sc, j.sp
        if j.kind == "universal":
            j.u, j.ac = j.ac, j.u
            j.f, j.g = _perp(j.u)
        elif j.kind != "spherical":
            u = j.ac / np.linalg.norm(j.ac)
            j.ac = j.u
            j.u = u
            j.f, j.g = _perp(u)

    def _order(self, joints):
        """The spanning tree (``joint_coordinates.spanning_tree``); every spatial
        joint may be reversed; a body no joint reaches gets a floating base."""
        def swap(j):
            self._swap(j)
            return True

        def free(k):
            j = SJoint()
            j.name, j.kind = f"<floating {self.system.body_names[k]}>", "free"
            j.parent, j.child = None, k
            j.sp, j.sc = np.zeros(3), np.zeros(3)
            j.u = j.f = j.g = j.ac = None
            j.rows = np.zeros(0, np.intp)
            return j

        return spanning_tree(joints, self.nb, swap, free)

    def reference(self, q):
        """Fix theta = 0 at the Cartesian positions q (the relative Euler parameters
        p0 of every joint; the universal joint's bar direction)."""
        P = q[self.p_idx] / np.linalg.norm(q[self.p_idx], axis=1)[:, None]
        for j in self.joints:
            pp = _E0 if j.parent is None else P[j.parent]
            j.p0 = _E0.copy() if j.kind == "free" else quat_product(quat_conj(pp),
                                                                    P[j.child])
            if j.kind == "universal":
                j.w = Amat(j.p0) @ j.ac
                if abs(j.w @ j.u) > 1e-6:
                    raise ModelError("joints", f"universal joint '{j.name}': the cross "
                                               f"bars are not perpendicular in the initial "
                                               f"configuration")
        self.referenced = True

    KIND_CODES = {"revolute": 0, "translational": 1, "cylindrical": 2, "universal": 3,
                  "spherical": 4, "free": 5, "planar": 6}

    def geometry(self, out=None):
        """Joint data of the compiled kernels, (joints, 22): s_p, s_c, u (or a_p),
        a_c, w (universal) or u, f, g (planar), p0 (identity before
        :meth:`reference`).  ``out``: update that array in place."""
        js = self.joints
        geo = np.zeros((len(js), 22)) if out is None else out
        geo[:] = 0.0
        for k, j in enumerate(js):
            geo[k, 0:3], geo[k, 3:6] = j.sp, j.sc
            if j.kind == "planar":                 # normal u, in-plane axes f, g
                geo[k, 6:9], geo[k, 9:12], geo[k, 12:15] = j.u, j.f, j.g
            for o, x in ((6, j.u), (9, j.ac), (12, getattr(j, "w", None))):
                if x is not None and j.kind in ("revolute", "translational", "cylindrical",
                                                "universal"):
                    geo[k, o:o + 3] = x
            p0 = getattr(j, "p0", None)
            geo[k, 15:19] = _E0 if p0 is None else p0
        return geo

    def kernel(self, geo=None):
        """The compiled recursions (``mbplugins._ext._jcspatial.SpatialTreeKernel``) of
        this tree on ``geo`` (shared, not copied: :meth:`geometry` updates it after
        :meth:`reference`), or None without the extension."""
        try:
            from mbplugins._ext._jcspatial import SpatialTreeKernel
        except ImportError:                 # pragma: no cover - an old build
            return None
        js = self.joints
        return SpatialTreeKernel(
            np.array([self.KIND_CODES[j.kind] for j in js], dtype=np.intc),
            np.array([-1 if j.parent is None else j.parent for j in js], dtype=np.intp),
            np.array([j.child for j in js], dtype=np.intp),
            self.geometry() if geo is None else geo,
            np.array([j.qo for j in js], dtype=np.intp),
            np.array([j.vo for j in js], dtype=np.intp),
            np.ascontiguousarray(self.mass), np.ascontiguousarray(self.inertia))

    # ------------------------------------------------------------------ joint models
    def _motion(self, j, th, nu):
        """(e, d, Sw, Sd, bw) of joint j: relative Euler parameters (parent axes),
        offset of the child's joint point, motion subspaces (3 x nv) for the
        relative angular velocity and dd/dt, and the velocity term of the relative
        angular acceleration."""
        k = j.kind
        nv = j.nv
        Sw = np.zeros((3, nv))
        Sd = np.zeros((3, nv))
        bw = np.zeros(3)
        d = np.zeros(3)
        if k == "revolute":
            e = _qaxis(j.u, th[0])
            Sw[:, 0] = j.u
        elif k == "translational":
            e = _E0
            d = th[0] * j.u
            Sd[:, 0] = j.u
        elif k == "cylindrical":
            e = _qaxis(j.u, th[0])
            d = th[1] * j.u
            Sw[:, 0] = j.u
            Sd[:, 1] = j.u
        elif k == "universal":
            e1 = _qaxis(j.u, th[0])
            e = quat_product(quat_product(e1, j.p0), quat_product(_qaxis(j.ac, th[1]),
                                                                 quat_conj(j.p0)))
            c2 = Amat(e1) @ j.w
            Sw[:, 0] = j.u
            Sw[:, 1] = c2
            bw = nu[0] * nu[1] * np.cross(j.u, c2)
        elif k == "spherical":
            e = th / np.linalg.norm(th)
            Sw[:] = np.eye(3)
        elif k == "planar":
            e = _qaxis(j.u, th[2])
            d = th[0] * j.f + th[1] * j.g
            Sd[:, 0], Sd[:, 1] = j.f, j.g
            Sw[:, 2] = j.u
        else:                                   # free
            d = th[0:3]
            e = th[3:7] / np.linalg.norm(th[3:7])
            Sd[:, 0:3] = np.eye(3)
            Sw[:, 3:6] = np.eye(3)
        return e, d, Sw, Sd, bw

    def theta_dot(self, theta, nu):
        """thetadot = N(theta) nu (Euler parameters of spherical and free joints:
        ``edot = 1/2 G(e)^T omega_rel``)."""
        out = np.empty(self.nq)
        for j in self.joints:
            th = theta[j.qo:j.qo + j.nq]
            v = nu[j.vo:j.vo + j.nv]
            o = out[j.qo:j.qo + j.nq]
            if j.kind == "spherical":
                o[:] = 0.5 * Gmat(th / np.linalg.norm(th)).T @ v
            elif j.kind == "free":
                o[0:3] = v[0:3]
                e = th[3:7] / np.linalg.norm(th[3:7])
                o[3:7] = 0.5 * Gmat(e).T @ v[3:6]
            else:
                o[:] = v
        return out

    #: names of the nu entries of a joint with several (universal: the two bars)
    NU_SUFFIX = {"cylindrical": ((".angle", True), (".slide", False)),
                 "universal": ((".angle1", True), (".angle2", True)),
                 "spherical": ((".wx", True), (".wy", True), (".wz", True)),
                 "planar": ((".f", False), (".g", False), (".angle", True)),
                 "free": ((".x", False), (".y", False), (".z", False), (".wx", True),
                          (".wy", True), (".wz", True))}

    def nu_labels(self) -> list[tuple[str, bool]]:
        """(name, angular) of every entry of nu (names the partition of the loops;
        ``.wx`` ... : the relative angular velocity in the parent's axes)."""
        out = []
        for j in self.joints:
            if j.kind in self.NU_SUFFIX:
                out += [(j.name + sfx, ang) for sfx, ang in self.NU_SUFFIX[j.kind]]
            else:
                out.append((j.name, j.kind == "revolute"))
        return out

    def retract(self, theta, dnu):
        """``theta ⊕ dnu``: theta + dnu, but the Euler parameters of ball joints and
        floating bases turned by the rotation vector and renormalised
        (:func:`.jc_loops.rotate`); a joint with no increment keeps its numbers."""
        from .jc_loops import rotate
        th = np.array(theta, dtype=float)
        for j in self.joints:
            d = dnu[j.vo:j.vo + j.nv]
            if not np.any(d):
                continue
            o = j.qo
            if j.kind == "spherical":
                th[o:o + 4] = rotate(th[o:o + 4], d)
            elif j.kind == "free":
                th[o:o + 3] += d[:3]
                th[o + 3:o + 7] = rotate(th[o + 3:o + 7], d[3:])
            else:
                th[o:o + j.nq] += d
        return th

    def normalised(self, theta):
        th = np.array(theta, dtype=float)
        for j in self.joints:
            if j.kind == "spherical":
                e = th[j.qo:j.qo + 4]
                e /= np.linalg.norm(e)
            elif j.kind == "free":
                e = th[j.qo + 3:j.qo + 7]
                e /= np.linalg.norm(e)
        return th

    # ------------------------------------------------------------------ recursion
    def outward(self, theta, nu):
        """One outward pass: Cartesian q (7 per body), body velocities v (nb, 6:
        rdot, omega'), and per joint X (6x6), S (6 x nv), c (6)."""
        nb = self.nb
        R = np.zeros((nb, 3))
        P = np.zeros((nb, 4))
        Am = np.zeros((nb, 3, 3))
        W = np.zeros((nb, 3))                       # global omega
        V = np.zeros((nb, 6))
        X, S, C = [], [], []
        I3 = np.eye(3)
        for j in self.joints:
            th = theta[j.qo:j.qo + j.nq]
            nu_j = nu[j.vo:j.vo + j.nv]
            e, d, Sw, Sd, bw = self._motion(j, th, nu_j)
            if j.parent is None:
                rp, pp, Ap, wp, rdp = np.zeros(3), _E0, I3, np.zeros(3), np.zeros(3)
            else:
                i = j.parent
                rp, pp, Ap, wp, rdp = R[i], P[i], Am[i], W[i], V[i, :3]
            b = j.child
            pc = quat_product(quat_product(pp, e), j.p0)
            Ac = Amat(pc)
            a = Ap @ (j.sp + d)
            bb = Ac @ j.sc
            w_rel = Ap @ (Sw @ nu_j)
            dd = Ap @ (Sd @ nu_j)
            wc = wp + w_rel
            P[b], Am[b] = pc, Ac
            R[b] = rp + a - bb
            W[b] = wc
            V[b, :3] = rdp + np.cross(wp, a) + dd - np.cross(wc, bb)
            V[b, 3:] = Ac.T @ wc
            Xk = np.eye(6)
            Bt = skew(bb)
            Xk[:3, 3:] = (Bt - skew(a)) @ Ap
            Xk[3:, 3:] = Ac.T @ Ap
            ApSw = Ap @ Sw
            Sk = np.vstack([Ap @ Sd + Bt @ ApSw, Ac.T @ ApSw])
            cw = np.cross(wp, w_rel) + Ap @ bw
            ck = np.concatenate([np.cross(wp, np.cross(wp, a)) + 2.0 * np.cross(wp, dd)
                                 + Bt @ cw - np.cross(wc, np.cross(wc, bb)), Ac.T @ cw])
            X.append(Xk)
            S.append(Sk)
            C.append(ck)
        q = np.zeros(7 * nb)
        q[self.r_idx] = R
        q[self.p_idx] = P
        return q, V, X, S, C

    def cartesian_velocity(self, q, V):
        """qdot from body velocities (pdot = 1/2 L(p)^T omega')."""
        qd = np.zeros(7 * self.nb)
        qd[self.r_idx] = V[:, :3]
        qd[self.p_idx] = 0.5 * np.einsum("bkl,bk->bl", Lmat(q[self.p_idx]), V[:, 3:])
        return qd

    def cartesian_acceleration(self, q, V, Vd):
        """qddot from body accelerations (Nikravesh (1988), Eq. 6.113)."""
        qdd = np.zeros(7 * self.nb)
        qdd[self.r_idx] = Vd[:, :3]
        p = q[self.p_idx]
        w = V[:, 3:]
        qdd[self.p_idx] = (0.5 * np.einsum("bkl,bk->bl", Lmat(p), Vd[:, 3:])
                           - 0.25 * np.sum(w * w, 1)[:, None] * p)
        return qdd

    def body_forces(self, q, V, Q):
        """[F; n' - omega'~ J' omega'] per body (nb, 6) from the System's Q."""
        out = np.empty((self.nb, 6))
        out[:, :3] = Q[self.r_idx]
        w = V[:, 3:]
        Jw = np.einsum("bkl,bl->bk", self.inertia, w)
        out[:, 3:] = 0.5 * np.einsum("bkl,bl->bk", Lmat(q[self.p_idx]), Q[self.p_idx]) \
            - np.cross(w, Jw)
        return out

    def velocity_matrix(self, X, S):
        """B (6 nb x nv): body velocities = B nu (the velocity transformation)."""
        B = np.zeros((self.nb, 6, self.nv))
        for j, Xk, Sk in zip(self.joints, X, S):
            if j.parent is not None:
                B[j.child] = Xk @ B[j.parent]
            B[j.child][:, j.vo:j.vo + j.nv] += Sk
        return B.reshape(6 * self.nb, self.nv)

    def bias(self, X, C):
        """a0 (nb, 6): the body accelerations at nudot = 0."""
        a0 = np.zeros((self.nb, 6))
        for j, Xk, ck in zip(self.joints, X, C):
            a0[j.child] = ck if j.parent is None else Xk @ a0[j.parent] + ck
        return a0

    # ------------------------------------------------------------------ state
    def joint_coordinates(self, q, qd):
        """(theta, nu) of a Cartesian state consistent with the tree (sets the
        reference on first use)."""
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        if not self.referenced:
            self.reference(q)
        P = q[self.p_idx] / np.linalg.norm(q[self.p_idx], axis=1)[:, None]
        R = q[self.r_idx]
        Am = Amat(P)
        W = np.einsum("bkl,bl->bk", Gmat(P), qd[self.p_idx]) * 2.0      # global omega
        Rd = qd[self.r_idx]
        theta, nu = np.zeros(self.nq), np.zeros(self.nv)
        for j in self.joints:
            b = j.child
            if j.parent is None:
                rp, pp, Ap, wp, rdp = np.zeros(3), _E0, np.eye(3), np.zeros(3), np.zeros(3)
            else:
                i = j.parent
                rp, pp, Ap, wp, rdp = R[i], P[i], Am[i], W[i], Rd[i]
            Ac = Am[b]
            delta = R[b] + Ac @ j.sc - rp - Ap @ j.sp               # P_c - P_p (global)
            ddelta = (Rd[b] + np.cross(W[b], Ac @ j.sc) - rdp - np.cross(wp, Ap @ j.sp))
            d = Ap.T @ delta
            dd = Ap.T @ (ddelta - np.cross(wp, delta))
            w_rel = Ap.T @ (W[b] - wp)
            # relative rotation e with p_c = p_p ⊗ e ⊗ p0
            e = quat_product(quat_product(quat_conj(pp), P[b]), quat_conj(j.p0))
            th = theta[j.qo:j.qo + j.nq]
            v = nu[j.vo:j.vo + j.nv]
            k = j.kind
            if k in ("revolute", "cylindrical"):
                Rr = Amat(e)
                th[0] = _angle_about(j.u, j.f, Rr @ j.f)
                v[0] = j.u @ w_rel
                if k == "cylindrical":
                    th[1], v[1] = j.u @ d, j.u @ dd
            elif k == "translational":
                th[0], v[0] = j.u @ d, j.u @ dd
            elif k == "universal":
                Rrel = Amat(quat_product(e, j.p0))          # A_p^T A_c
                th[0] = _angle_about(j.u, j.w, Rrel @ j.ac)
                z = Amat(j.p0).T @ j.u
                th[1] = -_angle_about(j.ac, z, Rrel.T @ j.u)
                c2 = Amat(_qaxis(j.u, th[0])) @ j.w
                v[0], v[1] = j.u @ w_rel, c2 @ w_rel
            elif k == "spherical":
                th[:] = e if e[0] >= 0 else -e
                v[:] = w_rel
            elif k == "planar":
                th[0], th[1] = j.f @ d, j.g @ d
                th[2] = _angle_about(j.u, j.f, Amat(e) @ j.f)
                v[0], v[1], v[2] = j.f @ dd, j.g @ dd, j.u @ w_rel
            else:
                th[0:3], th[3:7] = d, e
                v[0:3], v[3:6] = dd, w_rel
        return theta, nu


def articulated_body_blocks(tree, M, X, S, C, F):
    """Body accelerations (nb, w) and nudot of a tree by the articulated-body
    recursion with blocks of width w (O(N); the generic form of
    ``joint_coordinates.articulated_body``): ``M`` (nb, w, w) body mass matrices,
    ``F`` (nb, w) applied + velocity forces, per joint X (w x w), S (w x nv), c."""
    nb, w = F.shape
    IA = np.array(M, dtype=float)
    pA = -np.array(F, dtype=float)
    U, Dinv = [None] * len(tree.joints), [None] * len(tree.joints)
    for j in reversed(tree.joints):
        k, b = j.index, j.child
        Sk = S[k]
        Uk = IA[b] @ Sk
        Dk = np.linalg.inv(Sk.T @ Uk)
        U[k], Dinv[k] = Uk, Dk
        if j.parent is None:
            continue
        Ia = IA[b] - Uk @ Dk @ Uk.T
        pa = Ia @ C[k] + pA[b] - Uk @ (Dk @ (Sk.T @ pA[b]))
        IA[j.parent] += X[k].T @ Ia @ X[k]
        pA[j.parent] += X[k].T @ pa
    acc = np.zeros((nb, w))
    nud = np.zeros(tree.nv)
    for j in tree.joints:
        k, b = j.index, j.child
        base = C[k] if j.parent is None else X[k] @ acc[j.parent] + C[k]
        x = -Dinv[k] @ (U[k].T @ base + S[k].T @ pA[b])
        nud[j.vo:j.vo + j.nv] = x
        acc[b] = base + S[k] @ x
    return acc, nud


# ------------------------------------------------------------------------------------
# the formulation
# ------------------------------------------------------------------------------------
import scipy.linalg as sla  # noqa: E402

from mbcore.errors import AnalysisError  # noqa: E402

from .jc_common import JointCoordinates, spanning_tree  # noqa: E402
from .jc_loops import cut_row_multipliers  # noqa: E402


class SpatialJointCoordinates(JointCoordinates, planar=False):
    """``joint_coordinates`` for spatial models (module docstring): state ``y = [theta;
    nu]``; outputs in the Euler-parameter coordinates of every other formulation."""

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        if self.solver.spatial is not None:
            self.solver.spatial.refuse_massless("formulation 'joint_coordinates' (the "
                                                "joint-space mass matrix of its tree)")
        for k in ("alpha", "beta"):
            if self.settings[k] < 0:
                raise ModelError(f"settings.{k}", "must be >= 0")
        self.alpha, self.beta = self.settings["alpha"], self.settings["beta"]
        self.tree = SpatialTree(system, self.settings.get("cut_joints") or ())
        tr = self.tree
        self.nq, self.nv, self.dof = tr.nq, tr.nv, tr.nv
        self.extra = tr.extra_rows
        choice = self.settings["solver"]
        if choice == "recursive" and len(self.extra):
            raise ModelError("settings.solver", "the recursive (articulated-body) solver "
                                                "handles trees; this model has cut joints "
                                                "or drivers: use 'composite' or 'auto'")
        self.recursive = choice == "recursive" or (
            choice == "auto" and not len(self.extra)
            and (system.backend == "compiled" or tr.nb > 10))
        self._ydot = np.zeros(self.nq + self.nv)
        #: the compiled recursions (ext/plugins/_jcspatial.pyx) on joint data shared with the
        #: tree (``_geo``: updated when the reference is fixed) and, for trees whose
        #: force elements are all compiled, the whole right-hand side in one C call
        #: for the compiled integration loop (``CompiledJCSpatial``)
        self._k = self._geo = None
        self._synced = False
        if self.recursive and system.backend == "compiled":
            self._geo = tr.geometry()
            self._k = tr.kernel(self._geo)
        self.compiled = self._compiled_jcs()
        self._cbuf = np.zeros(self.nq + self.nv + 1)
        self._from_compiled = False
        self._loops_setup(self.nq, self.nv, dict(settings or {}))

    def _compiled_jcs(self):
        s = self.system
        kernels = s.compiled_kernels(constraints=False)
        if self._k is None or len(self.extra) or kernels is None or not self.nv:
            return None
        try:
            from mbplugins._ext._jcspatial import CompiledJCSpatial
        except ImportError:                  # pragma: no cover - an old build
            return None
        return CompiledJCSpatial(self._k, kernels.constant_forces, kernels.forces,
                                 kernels.functions)

    def _sync(self):
        """Joint data of the compiled kernels after the reference is fixed."""
        if self._geo is not None and self.tree.referenced and not self._synced:
            self.tree.geometry(self._geo)
            self._synced = True

    def compiled_ready(self) -> bool:
        return self.compiled is not None and self._synced

    @property
    def size(self) -> int:
        return self.nq + self.nv

    def pack(self, q, qd):
        th, nu = self.tree.joint_coordinates(q, qd)
        return np.concatenate([th, nu])

    def split(self, y):
        tr = self.tree
        q, V, _, _, _ = tr.outward(tr.normalised(y[:self.nq]), y[self.nq:self.size])
        return q, tr.cartesian_velocity(q, V)

    def initialize(self, q, qd, t):
        q = np.asarray(q, dtype=float)
        if not self.tree.referenced:
            self.tree.reference(q)
        self._sync()
        y = self.pack(q, qd)
        qq, qqd = self.split(y)
        err = float(np.max(np.abs(qq - q))) if len(q) else 0.0
        errv = float(np.max(np.abs(qqd - qd))) if len(q) else 0.0
        if err > 1e-6 * (1.0 + np.max(np.abs(q), initial=0.0)) or \
                errv > 1e-6 * (1.0 + np.max(np.abs(qd), initial=0.0)):
            raise AnalysisError(f"joint_coordinates: the initial state is not on the tree "
                                f"(positions differ by {err:.3g}, velocities by "
                                f"{errv:.3g})", t)
        self._loops_initialize(y, t)
        return y, None

    def _closure(self, theta, t, metric):
        """(q, D, H) at theta (:meth:`LoopClosure._closure`): ``D = Jv B`` with the
        velocity-form rows of the cut rows, ``H = B^T diag(m I, J') B``."""
        tr = self.tree
        q, _, X, S, _ = tr.outward(tr.normalised(theta), np.zeros(self.nv))
        B = tr.velocity_matrix(X, S)
        D = self.velocity_jacobian(self.system.jacobian_dense(q, t)[self.extra], q) @ B
        return q, D, (self._joint_mass(B) if metric else None)

    def _joint_mass(self, B):
        """``H = B^T M B`` with the body blocks ``diag(m I, J')``."""
        tr = self.tree
        MB = np.einsum("bkl,blv->bkv", tr.M, B.reshape(tr.nb, 6, -1)).reshape(B.shape)
        return B.T @ MB

    def _retract(self, theta, dnu):
        return self.tree.retract(theta, dnu)

    # ------------------------------------------------------------------ equations
    def velocity_jacobian(self, J, q):
        """Velocity-form Jacobian rows ``[Phi_r, 1/2 Phi_p L^T]`` (rows, nb, 6)."""
        tr = self.tree
        out = np.empty((J.shape[0], tr.nb, 6))
        out[:, :, :3] = J[:, tr.r_idx]
        out[:, :, 3:] = 0.5 * np.einsum("rbl,bkl->rbk", J[:, tr.p_idx],
                                        Lmat(q[tr.p_idx]))
        return out.reshape(J.shape[0], 6 * tr.nb)

    def resume_state(self):
        """The tree's reference (theta = 0: each joint's relative Euler parameters
        p0 and a universal joint's bar direction, fixed at the run's start) and the
        loops' state: a resume re-initialises at another configuration, where the
        stored theta mean the same only with this reference."""
        state = super().resume_state()
        state["reference"] = [np.array(j.p0) for j in self.tree.joints]
        state["bars"] = [np.array(j.w) if j.kind == "universal" else None
                         for j in self.tree.joints]
        return state

    def set_resume_state(self, state):
        super().set_resume_state(state)
        joints = self.tree.joints
        if len(state["reference"]) != len(joints):
            raise AnalysisError(f"joint_coordinates: the checkpoint's reference has "
                                f"{len(state['reference'])} joints, the tree {len(joints)}")
        for j, p0, w in zip(joints, state["reference"], state["bars"], strict=True):
            j.p0 = np.array(p0, dtype=float)
            if w is not None:
                j.w = np.array(w, dtype=float)
        self.tree.referenced = True
        self._synced = False
        self._sync()

    def _kernel(self):
        """The compiled recursions once the reference is fixed, else None."""
        self._sync()
        return self._k if self._synced else None

    def _velocity_map(self, q):
        """T (7 nb x 6 nb, sparse): qdot = T v (pdot = 1/2 L(p)^T omega')."""
        import scipy.sparse as sp
        tr = self.tree
        nb = tr.nb
        b = np.arange(nb)
        rows_r = tr.r_idx.reshape(-1)
        cols_r = (6 * b[:, None] + np.arange(3)).reshape(-1)
        Lp = Lmat(q[tr.p_idx])                               # (nb, 3, 4)
        rows_p = np.broadcast_to(tr.p_idx[:, None, :], (nb, 3, 4)).reshape(-1)
        cols_p = np.broadcast_to((6 * b + 3)[:, None, None] + np.arange(3)[None, :, None],
                                 (nb, 3, 4)).reshape(-1)
        return sp.csr_matrix((np.concatenate([np.ones(3 * nb), 0.5 * Lp.reshape(-1)]),
                              (np.concatenate([rows_r, rows_p]),
                               np.concatenate([cols_r, cols_p]))),
                             shape=(7 * nb, 6 * nb))

    def _solve(self, t, y):
        s, tr, ex = self.system, self.tree, self.extra
        K = self._kernel()
        if K is not None:                    # compiled outward pass and recursion
            th = np.ascontiguousarray(y[:self.nq])
            nu = np.ascontiguousarray(y[self.nq:self.size])
            K.outward(th, nu)
            q = np.asarray(K.q)
            V = np.asarray(K.V).reshape(tr.nb, 6)
            qd = np.asarray(K.qd)
            Q = s.forces(q, qd, t)
            K.body_forces(np.ascontiguousarray(Q))
            if K.aba():
                raise AnalysisError("joint_coordinates: an articulated inertia is not "
                                    "positive definite (a massless body in the tree?)", t)
            return (q, qd, V, np.asarray(K.acc).reshape(tr.nb, 6), np.asarray(K.nud)[:tr.nv],
                    np.asarray(K.F).reshape(tr.nb, 6), np.zeros(0))
        th = tr.normalised(y[:self.nq])
        nu = y[self.nq:self.size]
        q, V, X, S, C = tr.outward(th, nu)
        qd = tr.cartesian_velocity(q, V)
        Q = s.forces(q, qd, t).copy()
        F = tr.body_forces(q, V, Q)
        if self.recursive:
            acc, nud = articulated_body_blocks(tr, tr.M, X, S, C, F)
            return q, qd, V, acc, nud, F, np.zeros(0)
        B = tr.velocity_matrix(X, S)
        a0 = tr.bias(X, C)
        H = self._joint_mass(B)
        f = B.T @ (F - np.einsum("bkl,bl->bk", tr.M, a0)).reshape(-1)
        try:
            cho = sla.cho_factor(H, check_finite=False)
        except np.linalg.LinAlgError:
            raise AnalysisError("joint_coordinates: the joint-space mass matrix is singular "
                                "(a massless body in the tree?)", t) from None
        lam_e = np.zeros(len(ex))
        if len(ex):
            Jq = s.jacobian_dense(q, t)[ex]
            Jv = self.velocity_jacobian(Jq, q)
            D = Jv @ B
            phid = Jq @ qd - s.nu(q, t)[ex]
            c = (s.gamma(q, qd, t)[ex] - Jv @ a0.reshape(-1) - 2.0 * self.alpha * phid
                 - self.beta ** 2 * s.phi(q, t)[ex])
            lam_e = cut_row_multipliers(self.solver, cho, D, c, f, Jq, t, ex)
            f = f + D.T @ lam_e
        nud = sla.cho_solve(cho, f, check_finite=False)
        acc = (B @ nud).reshape(tr.nb, 6) + a0
        return q, qd, V, acc, nud, F, lam_e

    def rhs(self, t, y):
        self.nfev += 1
        if self.compiled is not None and self._synced:
            if self.compiled.eval(t, np.ascontiguousarray(y[:self.size], dtype=float),
                                  self._cbuf) == 0:       # one C call
                K = self._k
                self.q_cur, self.qd_cur = np.asarray(K.q), np.asarray(K.qd)
                self.solver.lam[:] = 0.0
                self._from_compiled = True
                self._ydot[:] = self._cbuf[:self.size]
                return self._ydot
            # a failure: the NumPy path below repeats it and raises the named error
        self._from_compiled = False
        q, qd, V, acc, nud, F, lam_e = self._solve(t, y)
        self.q_cur, self.qd_cur = q, qd
        lam = self.solver.lam
        lam[:] = 0.0                     # tree rows do no work
        lam[self.extra] = lam_e
        self.system.jacobian(q, t)       # the System's buffer at q (work channel)
        tr = self.tree
        K = self._kernel()
        if K is not None:
            K.theta_dot(np.ascontiguousarray(y[:self.nq]),
                        np.ascontiguousarray(y[self.nq:self.size]))
            self._ydot[:self.nq] = K.thd[:self.nq]
        else:
            self._ydot[:self.nq] = tr.theta_dot(tr.normalised(y[:self.nq]),
                                                y[self.nq:self.size])
        self._ydot[self.nq:] = nud
        return self._ydot

    def outputs(self, t, y):
        """Cartesian q, qd, qdd; multipliers: the cut rows from the solve, the
        normalisation rows as Formulation I gives them (``-omega'^T J' omega'``), the
        tree joints from ``Jv_tree^T lam = M vdot - F - Jv_cut^T lam_cut`` (least
        squares, exact for the motion)."""
        q, qd, V, acc, nud, F, lam_e = self._solve(t, y)
        s, tr = self.system, self.tree
        lam = np.zeros(s.m)
        lam[self.extra] = lam_e
        w = V[:, 3:]
        lam[tr.norm_rows] = -np.einsum("bk,bkl,bl->b", w, tr.inertia, w)
        jr = tr.joint_rows
        if len(jr) and getattr(self, "multipliers_wanted", True):
            r = (np.einsum("bkl,bl->bk", tr.M, acc) - F).reshape(-1)
            if s.dense:
                J = s.jacobian_dense(q, t)
                if len(self.extra):
                    r = r - self.velocity_jacobian(J[self.extra], q).T @ lam_e
                lam[jr] = np.linalg.lstsq(self.velocity_jacobian(J[jr], q).T, r, rcond=None)[0]
            else:                            # O(N): (Jv Jv^T) lam = Jv r, Jv sparse
                import scipy.sparse.linalg as spla
                Jv = (s.jacobian(q, t).tocsr() @ self._velocity_map(q)).tocsr()
                if len(self.extra):
                    r = r - Jv[self.extra].T @ lam_e
                Jt = Jv[jr]
                lam[jr] = spla.spsolve((Jt @ Jt.T).tocsc(), Jt @ r)
        self.solver.lam[:] = lam
        s.jacobian(q, t)
        return q, qd, tr.cartesian_acceleration(q, V, acc), lam

    def warnings(self, step):
        from .baumgarte import CS
        return CS.warnings(self, step) if len(self.extra) and \
            self.loop_mode == "baumgarte" else []
