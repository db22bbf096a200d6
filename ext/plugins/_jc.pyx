# cython: language_level=3
"""Compiled joint-coordinate formulation of planar trees (``mbplugins._ext._jc``).

:class:`CompiledJC` is the right-hand side of the joint-coordinate formulation of a
planar tree (``y = [theta; thetadot; W]``: forward recursion, compiled forces,
articulated-body solver; Nikravesh (1988), §13.4); :class:`CompiledJCLoops` that of a
tree closed by cut rows (composite mass matrix ``B^T M B`` and the cut rows'
multipliers by their Schur complement, §13.4.2); ``jc_planar_kinematics`` /
``jc_planar_aba`` / ``jc_planar_columns`` expose the recursions to Python."""
from libc.math cimport isfinite, fabs, sqrt, INFINITY
from libc.string cimport memcpy, memset

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport idx_t

import numpy as np

include "_bounds.pxi"
include "_eval_status.pxi"


# ----------------------------------------------------------------------------------
# joint coordinates: planar tree recursions and the articulated-body solver
# (NumPy references: mbplugins.formulations.joint_coordinates.PlanarTree.positions /
# velocities and articulated_body)
#
# Joints are in tree order (a joint's parent body is the child of an earlier joint or
# the ground, parent -1); kind 0 = revolute (theta = phi_child - phi_parent), 1 =
# translational (theta = the slide along the axis u of the parent).  sp, sc, u: (dof,
# 2) row-major; cs: (cos, sin) of every body angle; the ABA work buffer is (nb + dof)
# rows of 16: body row b = the articulated inertia (symmetric: a00 a01 a02 a11 a12
# a22) and bias (3); joint row nb + k = [x0, x1, S0, S1, S2, c0, c1] (qdd_child = X
# qdd_parent + S thetadd + c with X = [[1, 0, x0], [0, 1, x1], [0, 0, 1]]), replaced
# by the outward-pass factors in _jc_aba.
# ----------------------------------------------------------------------------------
from libc.math cimport sin, cos


cdef inline void _jc_row(int kind, double Spx, double Spy, double Scx, double Scy,
                         double Ux, double Uy, double wp, double wc, double thd,
                         double* J) noexcept nogil:
    """X, S, c of one joint: Sp = A_parent (sp + theta u) (translational) or A_parent
    sp, Sc = A_child sc, U = A_parent u, wp / wc the parent's / child's angular
    velocity."""
    J[0] = -Spy + Scy
    J[1] = Spx - Scx
    if kind == 0:
        J[2] = Scy; J[3] = -Scx; J[4] = 1.0
        J[5] = -wp * wp * Spx + wc * wc * Scx
        J[6] = -wp * wp * Spy + wc * wc * Scy
    else:
        J[2] = Ux; J[3] = Uy; J[4] = 0.0
        J[5] = 2.0 * wp * thd * (-Uy) - wp * wp * Spx + wc * wc * Scx
        J[6] = 2.0 * wp * thd * Ux - wp * wp * Spy + wc * wc * Scy


cdef void _jc_kinematics(Py_ssize_t dof, const int* kind, const idx_t* parent,
                         const idx_t* child, const double* sp, const double* sc,
                         const double* u, const double* angle, const double* theta,
                         const double* thetad, double* q, double* qd, double* cs,
                         double* rows) noexcept nogil:
    """q, qd (3 per body) and cs (cos, sin per body) from theta, thetad (forward
    recursion 13.36-13.37): one sine and cosine per joint, the parent's taken from cs.
    ``rows`` (NULL: not wanted): the joint rows of the ABA work buffer (16 apart),
    filled from the same intermediate results."""
    cdef Py_ssize_t k, p, c, cb
    cdef double php, ca, sa, cc, sn, wx, wy, Spx, Spy, Scx, Scy, wp, vx, vy
    cdef double rpx, rpy, Ux = 0.0, Uy = 0.0, phic, wc
    for k in range(dof):
        p = parent[k]
        cb = child[k]
        c = 3 * cb
        if p >= 0:
            php = q[3 * p + 2]; rpx = q[3 * p]; rpy = q[3 * p + 1]
            vx = qd[3 * p]; vy = qd[3 * p + 1]; wp = qd[3 * p + 2]
            ca = cs[2 * p]; sa = cs[2 * p + 1]
        else:
            php = 0.0; rpx = 0.0; rpy = 0.0; vx = 0.0; vy = 0.0; wp = 0.0
            ca = 1.0; sa = 0.0
        if kind[k] == 0:
            phic = php + theta[k]
            wx = sp[2 * k]; wy = sp[2 * k + 1]
        else:
            phic = php - angle[k]
            wx = sp[2 * k] + theta[k] * u[2 * k]
            wy = sp[2 * k + 1] + theta[k] * u[2 * k + 1]
        q[c + 2] = phic
        cc = cos(phic); sn = sin(phic)
        cs[2 * cb] = cc; cs[2 * cb + 1] = sn
        Spx = ca * wx - sa * wy; Spy = sa * wx + ca * wy
        Scx = cc * sc[2 * k] - sn * sc[2 * k + 1]; Scy = sn * sc[2 * k] + cc * sc[2 * k + 1]
        q[c] = rpx + Spx - Scx
        q[c + 1] = rpy + Spy - Scy
        if kind[k] == 0:
            wc = wp + thetad[k]
            qd[c + 2] = wc
            qd[c] = vx - wp * Spy + wc * Scy
            qd[c + 1] = vy + wp * Spx - wc * Scx
        else:
            Ux = ca * u[2 * k] - sa * u[2 * k + 1]; Uy = sa * u[2 * k] + ca * u[2 * k + 1]
            wc = wp
            qd[c + 2] = wc
            qd[c] = vx - wp * Spy + thetad[k] * Ux + wc * Scy
            qd[c + 1] = vy + wp * Spx + thetad[k] * Uy - wc * Scx
        if rows != NULL:
            _jc_row(kind[k], Spx, Spy, Scx, Scy, Ux, Uy, wp, wc, thetad[k], rows + 16 * k)


cdef void _jc_rows(Py_ssize_t dof, const int* kind, const idx_t* parent,
                   const idx_t* child, const double* sp, const double* sc, const double* u,
                   const double* q, const double* qd, const double* cs, const double* theta,
                   const double* thetad, double* rows) noexcept nogil:
    """The joint rows of the ABA work buffer at a Cartesian state (q, qd; cs = cos,
    sin of the body angles)."""
    cdef Py_ssize_t k, p, b
    cdef double ca, sa, cc, sn, wp, wc, Wx, Wy, Spx, Spy, Scx, Scy, Ux = 0.0, Uy = 0.0
    for k in range(dof):
        p = parent[k]
        b = child[k]
        if p >= 0:
            ca = cs[2 * p]; sa = cs[2 * p + 1]; wp = qd[3 * p + 2]
        else:
            ca = 1.0; sa = 0.0; wp = 0.0
        cc = cs[2 * b]; sn = cs[2 * b + 1]; wc = qd[3 * b + 2]
        Scx = cc * sc[2 * k] - sn * sc[2 * k + 1]; Scy = sn * sc[2 * k] + cc * sc[2 * k + 1]
        if kind[k] == 0:
            Wx = sp[2 * k]; Wy = sp[2 * k + 1]
        else:
            Wx = sp[2 * k] + theta[k] * u[2 * k]; Wy = sp[2 * k + 1] + theta[k] * u[2 * k + 1]
            Ux = ca * u[2 * k] - sa * u[2 * k + 1]; Uy = sa * u[2 * k] + ca * u[2 * k + 1]
        Spx = ca * Wx - sa * Wy; Spy = sa * Wx + ca * Wy
        _jc_row(kind[k], Spx, Spy, Scx, Scy, Ux, Uy, wp, wc, thetad[k], rows + 16 * k)


cdef void _jc_aba(Py_ssize_t dof, Py_ssize_t nb, const idx_t* parent, const idx_t* child,
                  const double* mass, const double* Q, double* work, double* thdd,
                  double* qdd) noexcept nogil:
    """The articulated-body recursion (``articulated_body``) once the joint rows of
    ``work`` hold X, S, c.  Inward: the articulated inertia I and bias p of every
    subtree (``I = M + sum X^T Ia X``, ``Ia = I - U U^T / D``, ``p = -Q + sum X^T
    pa``, ``pa = Ia c + p - U (S.p) / D``), written as ``X^T Ia X = X^T I X - V V^T /
    D`` and ``X^T pa = X^T (I c + p) - V g`` with ``V = X^T U``, ``g = (U.c + S.p) /
    D`` so that one multiply follows the division on the serial path of a chain.
    Outward: ``thetadd = -(U.(X qdd_parent + c) + S.p) / D = -h.qdd_parent - g`` with
    ``h = V / D``, and ``qdd_child = F qdd_parent + f`` (``F = X - S h^T``, ``f = c - S
    g``: one 3x3 product per joint on the serial path), kept in the joint row in
    place of X, S, c: [h, g, F (row-major), f]."""
    cdef Py_ssize_t k, b, p
    cdef double* A
    cdef double* P
    cdef double* J
    cdef const double* ap
    cdef double S0, S1, S2, U0, U1, U2, V2, iD, g, x0, x1, c0, c1, D1, D2, D3
    cdef double X02, X12, X22, r0, r1, r2, h0, h1, h2, a0, a1, a2
    for b in range(nb):
        A = work + 16 * b
        A[0] = mass[3 * b]; A[1] = 0.0; A[2] = 0.0
        A[3] = mass[3 * b + 1]; A[4] = 0.0; A[5] = mass[3 * b + 2]
        A[6] = -Q[3 * b]; A[7] = -Q[3 * b + 1]; A[8] = -Q[3 * b + 2]
    for k in range(dof - 1, -1, -1):
        b = child[k]
        p = parent[k]
        A = work + 16 * b
        J = work + 16 * (nb + k)
        x0 = J[0]; x1 = J[1]
        S0 = J[2]; S1 = J[3]; S2 = J[4]
        c0 = J[5]; c1 = J[6]
        U0 = A[0] * S0 + A[1] * S1 + A[2] * S2
        U1 = A[1] * S0 + A[3] * S1 + A[4] * S2
        U2 = A[2] * S0 + A[4] * S1 + A[5] * S2
        # D = S^T I S from I directly (a shorter dependency chain than S.U)
        D1 = A[0] * (S0 * S0) + A[1] * (2.0 * S0 * S1)
        D2 = A[3] * (S1 * S1) + A[2] * (2.0 * S0 * S2)
        D3 = A[5] * (S2 * S2) + A[4] * (2.0 * S1 * S2)
        iD = 1.0 / ((D1 + D2) + D3)
        V2 = U2 + x0 * U0 + x1 * U1
        g = ((U0 * c0 + U1 * c1) + (S0 * A[6] + S1 * A[7] + S2 * A[8])) * iD
        # the outward map qdd_child = F qdd_parent + f, F = X - S h^T, f = c - S g
        # (replaces x, S, c in the joint row: [h0, h1, h2, g, F (9), f (3)])
        h0 = U0 * iD; h1 = U1 * iD; h2 = V2 * iD
        J[0] = h0; J[1] = h1; J[2] = h2; J[3] = g
        J[4] = 1.0 - S0 * h0; J[5] = -S0 * h1; J[6] = x0 - S0 * h2
        J[7] = -S1 * h0; J[8] = 1.0 - S1 * h1; J[9] = x1 - S1 * h2
        J[10] = -S2 * h0; J[11] = -S2 * h1; J[12] = 1.0 - S2 * h2
        J[13] = c0 - S0 * g; J[14] = c1 - S1 * g; J[15] = -S2 * g
        if p < 0:
            continue
        X02 = A[2] + x0 * A[0] + x1 * A[1]
        X12 = A[4] + x0 * A[1] + x1 * A[3]
        X22 = A[5] + x0 * A[2] + x1 * A[4] + x0 * X02 + x1 * X12
        r0 = A[0] * c0 + A[1] * c1 + A[6]
        r1 = A[1] * c0 + A[3] * c1 + A[7]
        r2 = A[2] * c0 + A[4] * c1 + A[8]
        P = work + 16 * p
        P[0] = (P[0] + A[0]) - (U0 * U0) * iD
        P[1] = (P[1] + A[1]) - (U0 * U1) * iD
        P[2] = (P[2] + X02) - (U0 * V2) * iD
        P[3] = (P[3] + A[3]) - (U1 * U1) * iD
        P[4] = (P[4] + X12) - (U1 * V2) * iD
        P[5] = (P[5] + X22) - (V2 * V2) * iD
        P[6] = (P[6] + r0) - U0 * g
        P[7] = (P[7] + r1) - U1 * g
        P[8] = (P[8] + (r2 + x0 * r0 + x1 * r1)) - V2 * g
    for k in range(dof):
        b = child[k]
        p = parent[k]
        J = work + 16 * (nb + k)
        if p >= 0:
            ap = qdd + 3 * p
            a0 = ap[0]; a1 = ap[1]; a2 = ap[2]
            qdd[3 * b] = (J[4] * a0 + J[5] * a1) + (J[6] * a2 + J[13])
            qdd[3 * b + 1] = (J[7] * a0 + J[8] * a1) + (J[9] * a2 + J[14])
            qdd[3 * b + 2] = (J[10] * a0 + J[11] * a1) + (J[12] * a2 + J[15])
            thdd[k] = -(J[0] * a0 + J[1] * a1 + J[2] * a2) - J[3]
        else:
            qdd[3 * b] = J[13]
            qdd[3 * b + 1] = J[14]
            qdd[3 * b + 2] = J[15]
            thdd[k] = -J[3]


cdef _jc_check(const int[::1] kind, const idx_t[::1] parent, const idx_t[::1] child,
               const double[:, ::1] sp, const double[:, ::1] sc, const double[:, ::1] u,
               Py_ssize_t nb, str where, bint strict):
    """Sizes and body indices of a joint table (``strict``: a tree in order reaching
    every body once: each parent is the ground or an earlier joint's child)."""
    cdef Py_ssize_t dof = kind.shape[0], k
    if (parent.shape[0] != dof or child.shape[0] != dof or sp.shape[0] != dof
            or sc.shape[0] != dof or u.shape[0] != dof or sp.shape[1] != 2
            or sc.shape[1] != 2 or u.shape[1] != 2):
        raise ValueError(f"{where}: array sizes do not match")
    for k in range(dof):
        if not (0 <= child[k] < nb) or not (-1 <= parent[k] < nb) or kind[k] not in (0, 1):
            raise ValueError(f"{where}: body index or joint kind out of range")
    if strict:
        if dof != nb:
            raise ValueError(f"{where}: a tree of {nb} bodies needs {nb} joints, not {dof}")
        seen = np.zeros(nb, dtype=bool)
        for k in range(dof):
            if parent[k] >= 0 and not seen[parent[k]]:
                raise ValueError(f"{where}: joint {k}: its parent body is not reached by "
                                 f"an earlier joint (joints must be in tree order)")
            if seen[child[k]]:
                raise ValueError(f"{where}: body {child[k]} is reached by two joints")
            seen[child[k]] = True


def jc_planar_kinematics(const int[::1] kind, const idx_t[::1] parent,
                         const idx_t[::1] child, const double[:, ::1] sp,
                         const double[:, ::1] sc, const double[:, ::1] u,
                         const double[::1] angle, const double[::1] theta,
                         const double[::1] thetad, double[::1] q, double[::1] qd):
    """q, qd (3 per body) of a planar tree from the joint coordinates, joints in
    tree order (parent -1: the ground)."""
    cdef Py_ssize_t dof = kind.shape[0], nb = q.shape[0] // 3
    if (angle.shape[0] != dof or theta.shape[0] != dof or thetad.shape[0] != dof
            or q.shape[0] != qd.shape[0]):
        raise ValueError("jc_planar_kinematics: array sizes do not match")
    _jc_check(kind, parent, child, sp, sc, u, nb, "jc_planar_kinematics", False)
    if dof == 0:
        return
    cdef double[::1] cs = np.zeros(2 * nb)
    with nogil:
        _jc_kinematics(dof, &kind[0], &parent[0], &child[0], &sp[0, 0], &sc[0, 0],
                       &u[0, 0], &angle[0], &theta[0], &thetad[0], &q[0], &qd[0], &cs[0],
                       NULL)


def jc_planar_aba(const int[::1] kind, const idx_t[::1] parent, const idx_t[::1] child,
                  const double[:, ::1] sp, const double[:, ::1] sc, const double[:, ::1] u,
                  const double[::1] mass, const double[::1] q, const double[::1] qd,
                  const double[::1] theta, const double[::1] thetad, const double[::1] Q,
                  double[::1] thdd, double[::1] qdd, double[:, ::1] work):
    """The articulated-body recursion of ``articulated_body`` in C: thdd (dof), qdd
    (3 nb).  ``work``: (nb + dof, 16) scratch (the articulated inertia and bias per
    body; X, S, c and the outward-pass factors per joint)."""
    cdef Py_ssize_t dof = kind.shape[0], nb = q.shape[0] // 3, b
    if (work.shape[0] < nb + dof or work.shape[1] != 16 or thdd.shape[0] != dof
            or qdd.shape[0] != 3 * nb or mass.shape[0] != 3 * nb or Q.shape[0] != 3 * nb
            or qd.shape[0] != 3 * nb or theta.shape[0] != dof or thetad.shape[0] != dof):
        raise ValueError("jc_planar_aba: array sizes do not match (work: nb + dof rows "
                         "of 16)")
    _jc_check(kind, parent, child, sp, sc, u, nb, "jc_planar_aba", False)
    if dof == 0:
        return
    cdef double[::1] cs = np.zeros(2 * nb)
    with nogil:
        for b in range(nb):
            cs[2 * b] = cos(q[3 * b + 2])
            cs[2 * b + 1] = sin(q[3 * b + 2])
        _jc_rows(dof, &kind[0], &parent[0], &child[0], &sp[0, 0], &sc[0, 0], &u[0, 0],
                 &q[0], &qd[0], &cs[0], &theta[0], &thetad[0], &work[nb, 0])
        _jc_aba(dof, nb, &parent[0], &child[0], &mass[0], &Q[0], &work[0, 0], &thdd[0],
                &qdd[0])


cdef class _PlanarTreeRHS(CompiledODE):
    """What the compiled joint-coordinate right-hand sides of planar trees share
    (:class:`CompiledJC`, :class:`CompiledJCLoops`): the joint table, masses and
    gravity forces checked once (:meth:`_tree_init`), the stage ``time functions ->
    forward recursion (Cartesian q, qd) -> applied forces`` (:meth:`_tree_stage`), the
    end ``[thetadot; thetaddot; W']`` (:meth:`_tree_finish`) and the views of the
    Cartesian buffers."""

    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t dof, nb, nf
    cdef int[::1] kind
    cdef idx_t[::1] parent, child
    cdef double[:, ::1] sp, sc, u
    cdef double[::1] angle, mass, qgrav, fv, q, qd, Q, qdd, thdd, cs
    cdef double* fvp
    cdef ErrInfo err
    cdef readonly double power

    def _tree_init(self, str who, kind, parent, child, sp, sc, u, angle, mass, qgrav,
                   ForceEvaluator force_evaluator, Evaluator functions):
        """The tree's arrays (copies), checked: sizes (dof joints, 3 nb masses and
        gravity forces), tree order (``_jc_check``), positive and finite masses,
        finite geometry; the Cartesian buffers.  ValueError naming ``who``."""
        self.kind = np.array(kind, dtype=np.intc).reshape(-1)
        self.parent = np.array(parent, dtype=np.intp).reshape(-1)
        self.child = np.array(child, dtype=np.intp).reshape(-1)
        self.sp = np.array(sp, dtype=np.float64).reshape(-1, 2)
        self.sc = np.array(sc, dtype=np.float64).reshape(-1, 2)
        self.u = np.array(u, dtype=np.float64).reshape(-1, 2)
        self.angle = np.array(angle, dtype=np.float64).reshape(-1)
        self.mass = np.array(mass, dtype=np.float64).reshape(-1)
        self.qgrav = np.array(qgrav, dtype=np.float64).reshape(-1)
        dof = self.kind.shape[0]
        nb = self.mass.shape[0] // 3
        if dof == 0 or self.mass.shape[0] != 3 * nb or self.qgrav.shape[0] != 3 * nb \
                or self.angle.shape[0] != dof:
            raise ValueError(f"{who}: array sizes do not match (dof joints, 3 nb "
                             "masses and gravity forces)")
        _jc_check(self.kind, self.parent, self.child, self.sp, self.sc, self.u, nb,
                  who, True)
        if not np.all(np.asarray(self.mass) > 0.0):
            raise ValueError(f"{who}: every body needs a positive mass and inertia")
        if not (np.all(np.isfinite(self.sp)) and np.all(np.isfinite(self.sc))
                and np.all(np.isfinite(self.u)) and np.all(np.isfinite(self.angle))
                and np.all(np.isfinite(self.mass)) and np.all(np.isfinite(self.qgrav))):
            raise ValueError(f"{who}: sp, sc, u, angle, mass and qgrav must be finite")
        self.fe = force_evaluator
        self.fn = functions
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.n = dof
        self.dof = dof
        self.nb = nb
        self.cartesian = False
        self.q = np.zeros(3 * nb)
        self.qd = np.zeros(3 * nb)
        self.Q = np.zeros(3 * nb)
        self.qdd = np.zeros(3 * nb)
        self.thdd = np.zeros(dof)
        self.cs = np.zeros(2 * nb)
        self.power = 0.0
        self.nfev = 0
        self.status = OK

    cdef int _tree_stage(self, double t, const double* y, double* rows,
                         double* P) noexcept nogil:
        """Counts the evaluation; time functions, the forward recursion (q, qd and the
        joint rows into ``rows``, dof x 16), Q = gravity + forces (P += their
        non-conservative power).  Returns a status code (and sets ``status``)."""
        cdef Py_ssize_t dof = self.dof
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        _jc_kinematics(dof, &self.kind[0], &self.parent[0], &self.child[0], &self.sp[0, 0],
                       &self.sc[0, 0], &self.u[0, 0], &self.angle[0], y, y + dof,
                       &self.q[0], &self.qd[0], &self.cs[0], rows)
        memcpy(&self.Q[0], &self.qgrav[0], 3 * self.nb * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(&self.q[0], &self.qd[0], t, self.fvp, &self.Q[0],
                                P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        return OK

    cdef int _tree_finish(self, const double* y, double* ydot, double P) noexcept nogil:
        """ydot = [thetadot; thetaddot (``thdd``); P]; NOT_FINITE on a non-finite
        thetaddot."""
        cdef Py_ssize_t dof = self.dof, i
        for i in range(dof):
            ydot[i] = y[dof + i]
            ydot[dof + i] = self.thdd[i]
            if not isfinite(self.thdd[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[2 * dof] = P
        self.power = P
        self.status = OK
        return OK

    @property
    def q_view(self):
        """Cartesian q of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.q)

    @property
    def qd_view(self):
        return np.asarray(self.qd)

    @property
    def qdd_view(self):
        """Cartesian qdd of the last evaluation."""
        return np.asarray(self.qdd)

    @property
    def Q_view(self):
        """The applied forces (gravity + force elements) of the last evaluation."""
        return np.asarray(self.Q)


cdef class CompiledJC(_PlanarTreeRHS):
    """``CompiledJC(kind, parent, child, sp, sc, u, angle, mass, qgrav,
    force_evaluator=None, functions=None)``: the right-hand side of the
    joint-coordinate formulation of a planar tree without cut rows
    (``mbplugins.formulations.joint_coordinates``), ``y = [theta; thetadot; W]`` ->
    ``[thetadot; thetaddot; P_nc]`` in one C call: the forward recursion (Cartesian q,
    qd), the applied forces (gravity ``qgrav`` + the compiled force elements, with
    the time functions they read), the articulated-body solver.  The tree joints do
    no work, so ``W' = P_nc`` (the power of the non-conservative forces).  The joint
    table is that of ``jc_planar_kinematics`` (tree order, every body reached once);
    ``mass``: the diagonal mass matrix (3 per body)."""

    cdef double[:, ::1] work

    def __cinit__(self, kind, parent, child, sp, sc, u, angle, mass, qgrav,
                  ForceEvaluator force_evaluator=None, Evaluator functions=None):
        self._tree_init("CompiledJC", kind, parent, child, sp, sc, u, angle, mass, qgrav,
                        force_evaluator, functions)
        _check_forces("CompiledJC", force_evaluator, 3 * self.nb,
                      0 if functions is None else functions.size)
        self.work = np.zeros((self.nb + self.dof, 16))

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2 dof+1] = [thetadot; thetaddot; P_nc] at (t, y[0:2 dof])."""
        cdef Py_ssize_t nb = self.nb
        cdef double P = 0.0
        cdef int status = self._tree_stage(t, y, &self.work[nb, 0], &P)
        if status:
            return status
        _jc_aba(self.dof, nb, &self.parent[0], &self.child[0], &self.mass[0], &self.Q[0],
                &self.work[0, 0], &self.thdd[0], &self.qdd[0])
        return self._tree_finish(y, ydot, P)


# ----------------------------------------------------------------------------------
# closed loops: the tree's composite mass matrix and the cut rows' multipliers
# (NumPy reference: PlanarJointCoordinates._solve of
# mbplugins.formulations.jc_planar, and cut_row_multipliers of .jc_loops)
# ----------------------------------------------------------------------------------
#: the Schur matrix ``D H^-1 D^T`` is singular for the NumPy reference when its
#: 2-norm condition number exceeds this (cut_row_multipliers)
cdef double COND_LIMIT = 1e13


cdef int _chol(Py_ssize_t n, double* A) noexcept nogil:
    """The Cholesky factor L of the symmetric positive definite A (n x n, row-major;
    its lower triangle is read) in place of that triangle, with ``1 / L_ii`` on the
    diagonal (Golub & Van Loan (2013), §4.2, the inner products contiguous in
    memory; a multiplication, not a division, on the serial path of the
    substitutions).  1 when a pivot is not positive (A is not positive definite to
    working precision), else 0.  Written out rather than a LAPACK call: for the few
    joint coordinates of a mechanism the call overhead of ``dpotrf`` / ``dpotrs`` is
    most of the work."""
    cdef Py_ssize_t i, j, k
    cdef double d, acc
    cdef double* Ai
    cdef double* Aj
    for j in range(n):
        Aj = A + j * n
        d = Aj[j]
        for k in range(j):
            d -= Aj[k] * Aj[k]
        if not d > 0.0:                     # (NaN too)
            return 1
        d = 1.0 / sqrt(d)
        Aj[j] = d
        for i in range(j + 1, n):
            Ai = A + i * n
            acc = Ai[j]
            for k in range(j):
                acc -= Ai[k] * Aj[k]
            Ai[j] = acc * d
    return 0


cdef void _chol_solve(Py_ssize_t n, const double* L, double* b) noexcept nogil:
    """b <- A^-1 b with A = L L^T of :func:`_chol` (forward, then back substitution)."""
    cdef Py_ssize_t i, k
    cdef double acc
    for i in range(n):
        acc = b[i]
        for k in range(i):
            acc -= L[i * n + k] * b[k]
        b[i] = acc * L[i * n + i]
    for i in range(n - 1, -1, -1):
        acc = b[i]
        for k in range(i + 1, n):
            acc -= L[k * n + i] * b[k]
        b[i] = acc * L[i * n + i]


cdef void _fwd(Py_ssize_t n, const double* L, double* b) noexcept nogil:
    """b <- L^-1 b (L of :func:`_chol`)."""
    cdef Py_ssize_t i, k
    cdef double acc
    for i in range(n):
        acc = b[i]
        for k in range(i):
            acc -= L[i * n + k] * b[k]
        b[i] = acc * L[i * n + i]


cdef void _bwd(Py_ssize_t n, const double* L, double* b) noexcept nogil:
    """b <- L^-T b (L of :func:`_chol`)."""
    cdef Py_ssize_t i, k
    cdef double acc
    for i in range(n - 1, -1, -1):
        acc = b[i]
        for k in range(i + 1, n):
            acc -= L[k * n + i] * b[k]
        b[i] = acc * L[i * n + i]


cdef int _lu(Py_ssize_t n, double* A, int* piv) noexcept nogil:
    """LU factorisation with partial pivoting of the n x n row-major A in place (the
    largest entry of the column as pivot, the first on ties, as LAPACK ``dgetrf``;
    Golub & Van Loan (2013), §3.4); ``piv[k]``: the row swapped with k.  1 on a
    zero (or NaN) pivot, else 0."""
    cdef Py_ssize_t i, j, k, p
    cdef double big, a, f
    for k in range(n):
        p = k
        big = fabs(A[k * n + k])
        for i in range(k + 1, n):
            a = fabs(A[i * n + k])
            if a > big:
                big = a
                p = i
        piv[k] = <int> p
        if not big > 0.0:
            return 1
        if p != k:
            for j in range(n):
                a = A[k * n + j]
                A[k * n + j] = A[p * n + j]
                A[p * n + j] = a
        f = 1.0 / A[k * n + k]
        for i in range(k + 1, n):
            a = A[i * n + k] * f
            A[i * n + k] = a
            for j in range(k + 1, n):
                A[i * n + j] -= a * A[k * n + j]
    return 0


cdef void _lu_solve(Py_ssize_t n, const double* A, const int* piv, double* b) noexcept nogil:
    """b <- (LU)^-1 b with the factors of :func:`_lu`."""
    cdef Py_ssize_t i, k
    cdef double acc
    for k in range(n):
        if piv[k] != k:
            acc = b[k]
            b[k] = b[piv[k]]
            b[piv[k]] = acc
    for i in range(n):
        acc = b[i]
        for k in range(i):
            acc -= A[i * n + k] * b[k]
        b[i] = acc
    for i in range(n - 1, -1, -1):
        acc = b[i]
        for k in range(i + 1, n):
            acc -= A[i * n + k] * b[k]
        b[i] = acc / A[i * n + i]


cdef int _spd_cond_ok(Py_ssize_t n, const double* S, const double* L, double limit,
                      double* work) noexcept nogil:
    """1 when the symmetric positive definite S (L: its factor of :func:`_chol`) has a
    2-norm condition number <= ``limit`` for certain: by ``tr(S)^n / det(S)`` (lam_max
    <= tr S, lam_min >= det S / tr(S)^(n - 1)), else by the exact ``cond_1 = ||S||_1
    ||S^-1||_1 >= cond_2`` (S^-1 column by column; ``work``: n doubles); else 0."""
    cdef Py_ssize_t e, x
    cdef double trace = 0.0, bound = 1.0, anorm = 0.0, inorm = 0.0, acc
    for e in range(n):
        trace += S[e * n + e]
    for e in range(n):
        bound *= trace * (L[e * n + e] * L[e * n + e])
    if bound <= limit:
        return 1
    for x in range(n):
        acc = 0.0
        for e in range(n):
            acc += fabs(S[e * n + x])
        if not acc <= anorm:
            anorm = acc
    for x in range(n):
        memset(work, 0, n * sizeof(double))
        work[x] = 1.0
        _chol_solve(n, L, work)
        acc = 0.0
        for e in range(n):
            acc += fabs(work[e])
        if not acc <= inorm:
            inorm = acc
    return 1 if anorm * inorm <= limit else 0


cdef void _jc_bias_and_columns(Py_ssize_t dof, Py_ssize_t n, const idx_t* parent,
                               const idx_t* child, const double* rows, double* a0,
                               double* B) noexcept nogil:
    """``qddot = B thetaddot + a0`` (Nikravesh (1988), Eq. 13.41) from the joint rows X,
    S, c of ``_jc_row``: ``a0`` by the acceleration recursion with ``thetaddot = 0``
    (``qdd_child = X qdd_parent + c``), column k of B (``B + k n``) by the recursion
    without velocity terms for the unit ``thetaddot_k`` (``qdd_child = X qdd_parent +
    S delta_jk``; only joint k and those after it in tree order reach the bodies of
    its subtree)."""
    cdef Py_ssize_t k, j, p, b
    cdef const double* J
    cdef double* Bk
    cdef double s0, s1, s2, x, y, w
    for k in range(dof):
        p = parent[k]
        b = child[k]
        J = rows + 16 * k
        if p >= 0:
            x = a0[3 * p]; y = a0[3 * p + 1]; w = a0[3 * p + 2]
        else:
            x = 0.0; y = 0.0; w = 0.0
        a0[3 * b] = x + J[0] * w + J[5]
        a0[3 * b + 1] = y + J[1] * w + J[6]
        a0[3 * b + 2] = w
    memset(B, 0, dof * n * sizeof(double))
    for k in range(dof):
        Bk = B + k * n
        for j in range(k, dof):
            p = parent[j]
            b = child[j]
            J = rows + 16 * j
            if j == k:
                s0 = J[2]; s1 = J[3]; s2 = J[4]
            else:
                s0 = 0.0; s1 = 0.0; s2 = 0.0
            if p >= 0:
                x = Bk[3 * p]; y = Bk[3 * p + 1]; w = Bk[3 * p + 2]
            else:
                x = 0.0; y = 0.0; w = 0.0
            Bk[3 * b] = x + J[0] * w + s0
            Bk[3 * b + 1] = y + J[1] * w + s1
            Bk[3 * b + 2] = w + s2


def jc_planar_columns(const int[::1] kind, const idx_t[::1] parent,
                      const idx_t[::1] child, const double[:, ::1] sp,
                      const double[:, ::1] sc, const double[:, ::1] u,
                      const double[::1] q, const double[::1] qd,
                      const double[::1] theta, const double[::1] thetad,
                      double[::1] a0, double[:, ::1] B):
    """``a0`` (3 nb) and ``B`` stored by columns (dof, 3 nb) of ``qddot = B thetaddot +
    a0`` at a Cartesian state of the tree (the joint table of
    ``jc_planar_kinematics``)."""
    cdef Py_ssize_t dof = kind.shape[0], nb = q.shape[0] // 3, b
    if (qd.shape[0] != 3 * nb or a0.shape[0] != 3 * nb or B.shape[0] != dof
            or B.shape[1] != 3 * nb or theta.shape[0] != dof or thetad.shape[0] != dof):
        raise ValueError("jc_planar_columns: array sizes do not match")
    _jc_check(kind, parent, child, sp, sc, u, nb, "jc_planar_columns", False)
    if dof == 0:
        return
    cdef double[::1] cs = np.zeros(2 * nb)
    cdef double[:, ::1] rows = np.zeros((dof, 16))
    with nogil:
        for b in range(nb):
            cs[2 * b] = cos(q[3 * b + 2])
            cs[2 * b + 1] = sin(q[3 * b + 2])
        _jc_rows(dof, &kind[0], &parent[0], &child[0], &sp[0, 0], &sc[0, 0], &u[0, 0],
                 &q[0], &qd[0], &cs[0], &theta[0], &thetad[0], &rows[0, 0])
        _jc_bias_and_columns(dof, 3 * nb, &parent[0], &child[0], &rows[0, 0], &a0[0],
                             &B[0, 0])


cdef class CompiledJCLoops(_PlanarTreeRHS):
    """``CompiledJCLoops(kind, parent, child, sp, sc, u, angle, mass, evaluator,
    force_evaluator, functions, n, m, jdata, qgrav, cut, alpha, beta, indptr=None,
    indices=None, correction="none", holonomic=None, weighted=True, tolerance=1e-12,
    col_scale=None, factor=10.0)``: the right-hand side of the joint-coordinate formulation of a
    planar tree closed by cut rows (cut joints, drivers, other constraints; Nikravesh
    (1988), §13.4.2), ``y = [theta; thetadot; W]`` -> ``[thetadot; thetaddot; W']``
    in one C call, the twin of the composite path of
    ``mbplugins.formulations.jc_planar.PlanarJointCoordinates``:

    1. the forward recursion (Cartesian q, qd; Eqs. 13.36-13.37) and the applied forces
       (gravity ``qgrav`` + the compiled force elements);
    2. ``qddot = B thetaddot + a0`` (Eq. 13.41) by the acceleration recursion, B column
       by column without velocity terms;
    3. ``H = B^T M B`` (Cholesky, :func:`_chol`) and ``f = B^T (Q - M a0)``;
    4. the cut rows ``cut`` of the System's compiled constraints (``evaluator``,
       its Jacobian in ``jdata``: dense row-major m x n, or the CSR data of
       ``indptr`` / ``indices``): ``D = Phi*_q B``, ``c = gamma* - Phi*_q a0 - 2 alpha
       Phidot* - beta^2 Phi*`` and the multipliers ``(D H^-1 D^T) lam* = c - D H^-1
       f`` (Cholesky: the Schur matrix is symmetric), then ``H thetaddot = f + D^T
       lam*``;
    5. ``W' = P_nc + lam* . (Phi*_q qd)`` (the tree joints do no work).

    ``correction`` ('none', 'projection' or 'partitioning'; the loop_stabilization
    of ``mbplugins.formulations.jc_loops``, whose ``LoopClosure._project`` /
    ``_partition`` are its reference): ``c_post_step`` corrects the state after every
    accepted step of the compiled loop (``post_step`` set; ``holonomic``: the
    position-level cut rows, ``weighted``: the metric H, ``tolerance``: on |Phi*|
    scaled by 1 + |q|; partitioning: ``col_scale`` of the pivot quality, ``factor``
    the re-partition factor and the partition from :meth:`set_partition`).  Where
    the reference would raise (no convergence, a singular matrix, a degraded
    partition) or a least-squares step could differ from the solve (a condition
    number above 1e12), a failure status: the Python driver redoes the step and
    raises the named error or asks for the new partition.

    A singular H, a Schur matrix whose 2-norm condition number is not certainly
    within the reference's limit 1e13 (:func:`_spd_cond_ok`: every case the
    reference refuses is refused, and at most those with ``cond_1 > 1e13 >=
    cond_2``), a failing element or a non-finite result is a
    status (the Python path then raises the named error or continues).  Refused at
    construction (ValueError naming the argument): the tree checks of
    :class:`CompiledJC`, evaluators of another system, cut rows out of range, a
    pattern that does not fit ``jdata``, alpha / beta negative or not finite."""

    cdef PlanarEvaluator ev
    cdef readonly Py_ssize_t ne, m, nq
    cdef readonly double alpha, beta
    cdef idx_t[::1] cut, indptr, indices, sub_ptr, sub_body
    cdef unsigned char[::1] anc
    cdef double[:, ::1] rows
    cdef double[::1] jdata
    cdef double[::1] a0, B, H, f, phi, nu, gam, W, Hif, S, S0, lam, Jqd, gwork
    # the correction after every step (loop_stabilization projection / partitioning)
    cdef readonly int mode
    cdef readonly bint weighted
    cdef readonly double tolerance, factor, ratio
    cdef public double best_ratio
    cdef readonly long projections
    cdef idx_t[::1] hol, dep, ind, allrows
    cdef double[::1] col_scale, th, nuv, pq, pqd, pcs, pa0, pB, pH, pD, pW, pS, pS0, pr
    cdef double[::1] dnu, pzero, pLU
    cdef double[:, ::1] prows
    cdef int[::1] ppiv
    cdef readonly Py_ssize_t nhol

    #: the compiled loops run its correction after every step (``c_post_step``) when
    #: ``post_step`` is set
    handles_post_step = True

    def __cinit__(self, kind, parent, child, sp, sc, u, angle, mass,
                  PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, qgrav, cut, double alpha, double beta,
                  indptr=None, indices=None, str correction="none", holonomic=None,
                  bint weighted=True, double tolerance=1e-12, col_scale=None,
                  double factor=10.0):
        self._tree_init("CompiledJCLoops", kind, parent, child, sp, sc, u, angle, mass,
                        qgrav, force_evaluator, functions)
        dof, nb = self.dof, self.nb
        if n != 3 * nb:
            raise ValueError("CompiledJCLoops: array sizes do not match (dof joints, 3 nb "
                             "= n masses and gravity forces)")
        _in_range("CompiledJCLoops: alpha", alpha, 0.0, 1e300)
        _in_range("CompiledJCLoops: beta", beta, 0.0, 1e300)
        _check_evaluators("CompiledJCLoops", evaluator, force_evaluator, functions, n, m,
                          jdata.shape[0])
        self.cut = np.array(cut, dtype=np.intp).reshape(-1)
        _extent(self.cut, 0, m, "CompiledJCLoops: cut")
        # the bodies of every joint's subtree (sub_ptr / sub_body) and anc[k, x]: joint
        # x's child is in joint k's subtree (the zero pattern of B and H)
        par = np.asarray(self.parent)
        chi = np.asarray(self.child)
        anc = np.zeros((dof, dof), dtype=np.uint8)
        joint_of = np.empty(nb, dtype=np.intp)
        joint_of[chi] = np.arange(dof)
        for x in range(dof):
            k = x
            while True:
                anc[k, x] = 1
                if par[k] < 0:
                    break
                k = joint_of[par[k]]
        self.anc = anc.ravel()
        self.sub_ptr = np.concatenate([[0], np.cumsum(anc.sum(axis=1))]).astype(np.intp)
        self.sub_body = np.concatenate([chi[np.flatnonzero(anc[k])] for k in range(dof)]
                                       ).astype(np.intp)
        if (indptr is None) != (indices is None):
            raise ValueError("CompiledJCLoops: indptr and indices go together (CSR "
                             "pattern) or are both None (dense)")
        if indptr is None:                  # dense row-major: row r at r n ... r n + n
            _need("CompiledJCLoops: jdata", jdata.shape[0], m * n)
            self.indptr = np.arange(m + 1, dtype=np.intp) * n
            self.indices = np.tile(np.arange(n, dtype=np.intp), max(m, 1))[:m * n].copy()
        else:
            self.indptr = np.array(indptr, dtype=np.intp).reshape(-1)
            self.indices = np.array(indices, dtype=np.intp).reshape(-1)
            _pointers("CompiledJCLoops: indptr", self.indptr, m, self.indices.shape[0])
            _extent(self.indices, 0, n, "CompiledJCLoops: indices")
            _need("CompiledJCLoops: jdata", jdata.shape[0], self.indices.shape[0])
        if self.indices.shape[0] == 0:
            self.indices = np.zeros(1, dtype=np.intp)
        self.ev = evaluator
        self.jdata = jdata
        self.alpha, self.beta = alpha, beta
        self.nq = n
        self.m = m
        self.ne = ne = self.cut.shape[0]
        self.a0 = np.zeros(n)
        self.f = np.zeros(dof)
        self.Hif = np.zeros(dof)
        self.rows = np.zeros((dof, 16))
        self.B = np.zeros(dof * n)
        self.H = np.zeros(dof * dof)
        k = max(ne, 1)
        self.phi = np.zeros(max(m, 1))
        self.nu = np.zeros(max(m, 1))
        self.gam = np.zeros(max(m, 1))
        self.W = np.zeros(k * dof)
        self.S = np.zeros(k * k)
        self.lam = np.zeros(k)
        self.Jqd = np.zeros(k)
        self.gwork = np.zeros(k)
        self.S0 = np.zeros(k * k)
        self._set_correction(correction, holonomic, weighted, tolerance, col_scale, factor)

    def _set_correction(self, str correction, holonomic, bint weighted, double tolerance,
                        col_scale, double factor):
        cdef Py_ssize_t dof = self.dof, ne = self.ne, n = self.nq, k = max(ne, 1)
        modes = {"none": 0, "projection": 1, "partitioning": 2}
        if correction not in modes:
            raise ValueError(f"CompiledJCLoops: correction must be one of "
                             f"{', '.join(modes)}, not {correction!r}")
        self.mode = modes[correction] if ne else 0
        self.post_step = self.mode != 0
        self.weighted = weighted
        _positive("CompiledJCLoops: tolerance", tolerance)
        _positive("CompiledJCLoops: factor", factor)
        self.tolerance, self.factor = tolerance, factor
        hol = np.ones(ne, dtype=bool) if holonomic is None else \
            np.array(holonomic, dtype=bool).reshape(-1)
        _size("CompiledJCLoops: holonomic", hol.shape[0], ne)
        if self.mode == 2 and not bool(np.all(hol)):
            raise ValueError("CompiledJCLoops: partitioning needs position-level cut rows")
        self.hol = np.flatnonzero(hol).astype(np.intp) if ne else np.zeros(1, np.intp)
        self.nhol = int(np.count_nonzero(hol))
        self.allrows = np.arange(k, dtype=np.intp)
        if self.hol.shape[0] == 0:
            self.hol = np.zeros(1, np.intp)
        cs = np.ones(dof) if col_scale is None else \
            np.array(col_scale, dtype=np.float64).reshape(-1)
        _size("CompiledJCLoops: col_scale", cs.shape[0], dof)
        if not (bool(np.all(cs > 0.0)) and bool(np.all(np.isfinite(cs)))):
            raise ValueError("CompiledJCLoops: col_scale must be positive and finite")
        self.col_scale = cs
        self.dep = np.arange(k, dtype=np.intp)
        self.ind = np.zeros(max(dof - ne, 1), dtype=np.intp)
        self.best_ratio = -1.0                # no partition yet
        self.ratio = 0.0
        self.projections = 0
        self.th = np.zeros(dof)
        self.nuv = np.zeros(dof)
        self.dnu = np.zeros(dof)
        self.pzero = np.zeros(dof)
        self.pq = np.zeros(n)
        self.pqd = np.zeros(n)
        self.pa0 = np.zeros(n)
        self.pcs = np.zeros(2 * self.nb)
        self.prows = np.zeros((dof, 16))
        self.pB = np.zeros(dof * n)
        self.pH = np.zeros(dof * dof)
        self.pD = np.zeros(k * dof)
        self.pW = np.zeros(k * dof)
        self.pS = np.zeros(k * k)
        self.pS0 = np.zeros(k * k)
        self.pLU = np.zeros(k * k)
        self.pr = np.zeros(k)
        self.ppiv = np.zeros(k, dtype=np.intc)

    def set_partition(self, u not None, v not None, double best_ratio):
        """The dependent (u: ne) and independent (v: dof - ne) joint coordinates of
        the partitioning correction and the pivot quality of the fresh partition
        (its re-partition threshold); each coordinate once."""
        uu = np.array(u, dtype=np.intp).reshape(-1)
        vv = np.array(v, dtype=np.intp).reshape(-1)
        if self.mode != 2:
            raise ValueError("CompiledJCLoops.set_partition: not a partitioning correction")
        if uu.shape[0] != self.ne or vv.shape[0] != self.dof - self.ne or \
                sorted(np.concatenate([uu, vv]).tolist()) != list(range(self.dof)):
            raise ValueError(f"CompiledJCLoops.set_partition: u ({uu.shape[0]}) and v "
                             f"({vv.shape[0]}) must split the {self.dof} joint "
                             f"coordinates, {self.ne} dependent")
        _in_range("CompiledJCLoops.set_partition: best_ratio", best_ratio, 0.0, 1e300)
        np.asarray(self.dep)[:self.ne] = uu
        if vv.shape[0]:
            np.asarray(self.ind)[:vv.shape[0]] = vv
        self.best_ratio = best_ratio

    @property
    def D_view(self):
        """``D = Phi*_q B`` (ne x dof, a copy) at the state of the last correction."""
        return np.asarray(self.pD[:self.ne * self.dof]).reshape(self.ne, self.dof).copy()

    def take_projections(self):
        """The corrections counted since the last call (then reset)."""
        k = self.projections
        self.projections = 0
        return k

    cdef int _closure(self, double t, bint metric) noexcept nogil:
        """At theta = ``th``: q (``pq``), B (``pB``), Phi, nu (all rows), the Jacobian,
        ``D = Phi*_q B`` (``pD``, ne x dof) and with ``metric`` the Cholesky factor of
        ``H = B^T M B`` (``pH``) — ``LoopClosure._closure``.  A status (0 = OK)."""
        cdef Py_ssize_t dof = self.dof, n = self.nq, ne = self.ne, e, r, x, i, k, j
        cdef double* B = &self.pB[0]
        cdef double* D = &self.pD[0]
        cdef double* H = &self.pH[0]
        cdef const double* J = &self.jdata[0]
        cdef const double* mass = &self.mass[0]
        cdef const idx_t* ip = &self.indptr[0]
        cdef const idx_t* ix = &self.indices[0]
        cdef double v, acc
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                return FUNCTION_FAILED
        _jc_kinematics(dof, &self.kind[0], &self.parent[0], &self.child[0], &self.sp[0, 0],
                       &self.sc[0, 0], &self.u[0, 0], &self.angle[0], &self.th[0],
                       &self.pzero[0], &self.pq[0], &self.pqd[0], &self.pcs[0],
                       &self.prows[0, 0])
        _jc_bias_and_columns(dof, n, &self.parent[0], &self.child[0], &self.prows[0, 0],
                             &self.pa0[0], B)
        memcpy(self.ev.qx, &self.pq[0], n * sizeof(double))
        memset(self.ev.qdx, 0, n * sizeof(double))
        if (self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0
                or self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0
                or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0):
            return CONSTRAINT_FAILED
        memset(D, 0, ne * dof * sizeof(double))
        for e in range(ne):
            r = self.cut[e]
            for x in range(ip[r], ip[r + 1]):
                v = J[x]
                if v == 0.0:
                    continue
                i = ix[x]
                for k in range(dof):
                    D[e * dof + k] += v * B[k * n + i]
        if metric:
            for k in range(dof):
                for j in range(k, dof):
                    acc = 0.0
                    for i in range(n):
                        acc += B[k * n + i] * mass[i] * B[j * n + i]
                    H[k * dof + j] = acc
                    H[j * dof + k] = acc
            if _chol(dof, H):
                return SINGULAR
        return 0

    cdef int _min_norm(self, const idx_t* rows, Py_ssize_t nr, const double* r,
                       double* out) noexcept nogil:
        """``out = -W^-1 D^T (D W^-1 D^T)^-1 r`` for the rows ``rows`` of D (W = H of
        :meth:`_closure`, or I unweighted) — ``LoopClosure._min_norm``, whose least
        squares (rcond 1e-12) is the solve where cond_2 <= 1e12: refused (SINGULAR)
        where that is not certain.  A status."""
        cdef Py_ssize_t dof = self.dof, e, x, k
        cdef double* W = &self.pW[0]
        cdef double* S = &self.pS[0]
        cdef double* S0 = &self.pS0[0]
        cdef double* z = &self.pr[0]
        cdef double acc
        for e in range(nr):
            memcpy(W + e * dof, &self.pD[rows[e] * dof], dof * sizeof(double))
            if self.weighted:
                _fwd(dof, &self.pH[0], W + e * dof)
        for e in range(nr):
            for x in range(e + 1):
                acc = 0.0
                for k in range(dof):
                    acc += W[e * dof + k] * W[x * dof + k]
                S[e * nr + x] = acc
                S[x * nr + e] = acc
            z[e] = r[e]
        memcpy(S0, S, nr * nr * sizeof(double))
        if _chol(nr, S) or not _spd_cond_ok(nr, S0, S, 1e12, &self.gwork[0]):
            return SINGULAR
        _chol_solve(nr, S, z)
        for k in range(dof):
            acc = 0.0
            for e in range(nr):
                acc -= W[e * dof + k] * z[e]
            out[k] = acc
        if self.weighted:
            _bwd(dof, &self.pH[0], out)
        return 0

    cdef double _scale_tol(self) noexcept nogil:
        cdef Py_ssize_t i
        cdef double big = 0.0
        for i in range(self.nq):
            if fabs(self.pq[i]) > big:
                big = fabs(self.pq[i])
        return self.tolerance * (1.0 + big)

    cdef int _project(self, double t, bint* changed) noexcept nogil:
        """Gauss-Newton with minimum-norm steps, then one velocity step
        (``LoopClosure._project``).  A status."""
        cdef Py_ssize_t dof = self.dof, ne = self.ne, e, k, it, nh = self.nhol
        cdef double tol = -1.0, err, acc
        cdef int st
        cdef double* rr = &self.pLU[0]           # scratch of ne entries
        for it in range(13):
            st = self._closure(t, self.weighted)
            if st:
                return st
            if tol < 0.0:
                tol = self._scale_tol()
            err = 0.0
            for e in range(nh):
                acc = self.phi[self.cut[self.hol[e]]]
                rr[e] = acc
                if not fabs(acc) <= err:
                    err = fabs(acc)
            if err <= tol:
                break
            if it == 12 or not isfinite(err):
                return NEWTON_FAILED
            st = self._min_norm(&self.hol[0], nh, rr, &self.dnu[0])
            if st:
                return st
            for k in range(dof):
                self.th[k] += self.dnu[k]
            changed[0] = True
        err = 0.0
        for e in range(ne):
            acc = -self.nu[self.cut[e]]
            for k in range(dof):
                acc += self.pD[e * dof + k] * self.nuv[k]
            rr[e] = acc
            if fabs(acc) > err:
                err = fabs(acc)
        if changed[0] or err > tol:
            st = self._min_norm(&self.allrows[0], ne, rr, &self.dnu[0])
            if st:
                return st
            for k in range(dof):
                self.nuv[k] += self.dnu[k]
            changed[0] = True
        return 0

    cdef int _dependent_lu(self) noexcept nogil:
        """LU of ``D[:, u]`` (``pLU``, ``ppiv``); 1 when singular."""
        cdef Py_ssize_t dof = self.dof, ne = self.ne, i, j
        for i in range(ne):
            for j in range(ne):
                self.pLU[i * ne + j] = self.pD[i * dof + self.dep[j]]
        return _lu(ne, &self.pLU[0], &self.ppiv[0])

    cdef int _partition(self, double t, bint* changed) noexcept nogil:
        """Newton on the dependent joint coordinates with the independent ones fixed,
        the pivot quality of ``D_u``, the dependent velocities
        (``LoopClosure._partition`` between outputs).  A status: NEWTON_FAILED /
        PARTITION_DEGRADED where the reference asks for a new partition."""
        cdef Py_ssize_t dof = self.dof, ne = self.ne, kk = dof - ne, e, k, j, it
        cdef double tol = -1.0, err, acc, big, dmin, d
        cdef int st
        cdef double* rr = &self.pr[0]
        for it in range(13):
            st = self._closure(t, False)
            if st:
                return st
            if tol < 0.0:
                tol = self._scale_tol()
            err = 0.0
            for e in range(ne):
                acc = self.phi[self.cut[e]]
                rr[e] = acc
                if not fabs(acc) <= err:
                    err = fabs(acc)
            if err <= tol:
                break
            if it == 12 or not isfinite(err):
                return NEWTON_FAILED
            if self._dependent_lu():
                return PARTITION_DEGRADED
            _lu_solve(ne, &self.pLU[0], &self.ppiv[0], rr)
            for e in range(ne):
                self.th[self.dep[e]] -= rr[e]
            changed[0] = True
        if self._dependent_lu():
            return PARTITION_DEGRADED
        # pivot quality (partitioning.pivot_quality): the smallest column-scaled pivot
        # of D_u over the largest column-scaled entry of D
        big = 0.0
        for e in range(ne):
            for k in range(dof):
                d = fabs(self.pD[e * dof + k]) / self.col_scale[k]
                if d > big:
                    big = d
        dmin = INFINITY
        for e in range(ne):
            d = fabs(self.pLU[e * ne + e]) / self.col_scale[self.dep[e]]
            if d < dmin:
                dmin = d
        self.ratio = dmin / big if big > 0.0 else 0.0
        if not (self.ratio * self.factor >= self.best_ratio * 1e-2
                and self.ratio >= 1e-12):
            return PARTITION_DEGRADED
        err = 0.0
        for e in range(ne):
            acc = -self.nu[self.cut[e]]
            for k in range(dof):
                acc += self.pD[e * dof + k] * self.nuv[k]
            if fabs(acc) > err:
                err = fabs(acc)
        if changed[0] or not err <= tol:
            for e in range(ne):
                acc = self.nu[self.cut[e]]
                for j in range(kk):
                    acc -= self.pD[e * dof + self.ind[j]] * self.nuv[self.ind[j]]
                rr[e] = acc
            _lu_solve(ne, &self.pLU[0], &self.ppiv[0], rr)
            for e in range(ne):
                self.nuv[self.dep[e]] = rr[e]
            changed[0] = True
        return 0

    cdef int c_post_step(self, double t, double* y, bint count) noexcept nogil:
        """The correction after an accepted step (``correction``): 1 when y[0:2 dof]
        changed, 0 when not, -status when it failed (y unchanged)."""
        cdef Py_ssize_t dof = self.dof
        cdef bint changed = False
        cdef int st
        if self.mode == 0:
            return 0
        if self.mode == 2 and self.best_ratio < 0.0:
            return -PARTITION_DEGRADED          # no partition given
        memcpy(&self.th[0], y, dof * sizeof(double))
        memcpy(&self.nuv[0], y + dof, dof * sizeof(double))
        st = self._project(t, &changed) if self.mode == 1 else self._partition(t, &changed)
        if st:
            return -st
        if not changed:
            return 0
        memcpy(y, &self.th[0], dof * sizeof(double))
        memcpy(y + dof, &self.nuv[0], dof * sizeof(double))
        if count:
            self.projections += 1
        return 1

    def post_step_at(self, double t, double[::1] y not None, bint count=True):
        """:meth:`c_post_step` from Python (y corrected in place): 1 changed, 0 not,
        -status failed."""
        if y.shape[0] < 2 * self.dof:
            raise ValueError(f"y needs {2 * self.dof} entries")
        return self.c_post_step(t, &y[0], count)

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2 dof+1] = [thetadot; thetaddot; W'] at (t, y[0:2 dof])."""
        cdef Py_ssize_t dof = self.dof, n = self.nq, ne = self.ne, i, k, e, r, x
        cdef double P = 0.0, acc, dq, da, v
        cdef double* q = &self.q[0]
        cdef double* qd = &self.qd[0]
        cdef double* a0 = &self.a0[0]
        cdef double* B = &self.B[0]
        cdef double* H = &self.H[0]
        cdef double* f = &self.f[0]
        cdef double* S = &self.S[0]
        cdef double* lam = &self.lam[0]
        cdef double* Si = &self.gwork[0]
        cdef double* S0 = &self.S0[0]
        cdef double* W = &self.W[0]
        cdef double* g = &self.Hif[0]
        cdef double* thdd = &self.thdd[0]
        cdef double* Q = &self.Q[0]
        cdef const double* mass = &self.mass[0]
        cdef const idx_t* sp_ = &self.sub_ptr[0]
        cdef const idx_t* sb = &self.sub_body[0]
        cdef const unsigned char* anc = &self.anc[0]
        cdef double* Bk
        cdef double* Bl
        cdef const double* J = &self.jdata[0]
        cdef const idx_t* ip = &self.indptr[0]
        cdef const idx_t* ix = &self.indices[0]
        cdef int status = self._tree_stage(t, y, &self.rows[0, 0], &P)
        if status:
            return status
        _jc_bias_and_columns(dof, n, &self.parent[0], &self.child[0], &self.rows[0, 0],
                             a0, B)
        # H = B^T M B (both triangles), f = B^T (Q - M a0): column k of B is zero
        # outside the bodies of joint k's subtree (sub_ptr / sub_body), and H[k, x]
        # (x after k) outside that of x, or wholly when x is not in k's subtree
        for k in range(dof):
            Bk = B + k * n
            acc = 0.0
            for x in range(sp_[k], sp_[k + 1]):
                i = 3 * sb[x]
                acc += ((Bk[i] * (Q[i] - mass[i] * a0[i])
                         + Bk[i + 1] * (Q[i + 1] - mass[i + 1] * a0[i + 1]))
                        + Bk[i + 2] * (Q[i + 2] - mass[i + 2] * a0[i + 2]))
            f[k] = acc
            for r in range(k, dof):
                acc = 0.0
                if anc[k * dof + r]:
                    Bl = B + r * n
                    for x in range(sp_[r], sp_[r + 1]):
                        i = 3 * sb[x]
                        acc += ((Bk[i] * mass[i] * Bl[i]
                                 + Bk[i + 1] * mass[i + 1] * Bl[i + 1])
                                + Bk[i + 2] * mass[i + 2] * Bl[i + 2])
                H[k * dof + r] = acc
                H[r * dof + k] = acc
        if _chol(dof, H):
            self.status = SINGULAR
            return SINGULAR
        if ne:
            memcpy(self.ev.qx, q, n * sizeof(double))
            memcpy(self.ev.qdx, qd, n * sizeof(double))
            if self.beta != 0.0:
                if self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0:
                    self.status = CONSTRAINT_FAILED
                    return CONSTRAINT_FAILED
            if (self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0
                    or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0
                    or self.ev.c_gamma(t, self.fvp, &self.gam[0]) >= 0):
                self.status = CONSTRAINT_FAILED
                return CONSTRAINT_FAILED
            # D = Phi*_q B (ne x dof, row-major: row e of D in W + e dof), Phi*_q qd
            # and c (in lam)
            memset(W, 0, ne * dof * sizeof(double))
            for e in range(ne):
                r = self.cut[e]
                dq = 0.0
                da = 0.0
                for x in range(ip[r], ip[r + 1]):
                    i = ix[x]
                    v = J[x]
                    if v == 0.0:
                        continue
                    dq += v * qd[i]
                    da += v * a0[i]
                    for k in range(dof):
                        W[e * dof + k] += v * B[k * n + i]
                self.Jqd[e] = dq
                acc = self.gam[r] - da - 2.0 * self.alpha * (dq - self.nu[r])
                if self.beta != 0.0:
                    acc -= self.beta * self.beta * self.phi[r]
                lam[e] = acc
            # with H = L L^T: W = L^-1 D^T (in place; row e of W: its column e), g =
            # L^-1 f; S = D H^-1 D^T = W^T W, c - D H^-1 f = c - W^T g
            for e in range(ne):
                _fwd(dof, H, W + e * dof)
            memcpy(g, f, dof * sizeof(double))
            _fwd(dof, H, g)
            for e in range(ne):
                for x in range(e + 1):
                    acc = 0.0
                    for k in range(dof):
                        acc += W[e * dof + k] * W[x * dof + k]
                    S[e * ne + x] = acc
                    S[x * ne + e] = acc
                acc = lam[e]
                for k in range(dof):
                    acc -= W[e * dof + k] * g[k]
                lam[e] = acc
            memcpy(S0, S, ne * ne * sizeof(double))
            if _chol(ne, S):
                self.status = SINGULAR
                return SINGULAR
            # the reference's test cond_2(S) > 1e13 (cut_row_multipliers): refused here
            # too, and where it is not certain that cond_2 <= 1e13
            if not _spd_cond_ok(ne, S0, S, COND_LIMIT, Si):
                self.status = SINGULAR
                return SINGULAR
            _chol_solve(ne, S, lam)
            for e in range(ne):
                if not isfinite(lam[e]):
                    self.status = NOT_FINITE
                    return NOT_FINITE
                P += lam[e] * self.Jqd[e]
            # thetaddot = H^-1 (f + D^T lam) = L^-T (g + W lam)
            for k in range(dof):
                acc = g[k]
                for e in range(ne):
                    acc += W[e * dof + k] * lam[e]
                thdd[k] = acc
            _bwd(dof, H, thdd)
        else:
            memcpy(thdd, f, dof * sizeof(double))
            _chol_solve(dof, H, thdd)
        for i in range(n):
            acc = a0[i]
            for k in range(dof):
                acc += B[k * n + i] * thdd[k]
            self.qdd[i] = acc
        return self._tree_finish(y, ydot, P)

    @property
    def lam_view(self):
        """The multipliers of the cut rows (in the order of ``cut``) of the last
        evaluation."""
        return np.asarray(self.lam[:self.ne])

    @property
    def cut_rows(self):
        return np.asarray(self.cut).copy()
