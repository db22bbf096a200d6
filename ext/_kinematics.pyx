# cython: language_level=3
"""Compiled kinematic helpers: point kinematics (reference:
``mbcore.system.System.point_kinematics`` on the NumPy path).  The compiled
kinematic step lives in ``mbcore._ext._planar.KinematicStepper``, beside the
kernels it calls at C level.
"""
from libc.math cimport cos, sin

import numpy as np

include "_bounds.pxi"


cdef int _check_points(const double[::1] q, const double[::1] qd, const double[::1] qdd,
                       const Py_ssize_t[::1] off, const double[:, ::1] loc,
                       double[:, ::1] out, Py_ssize_t dim, Py_ssize_t block) except -1:
    """Sizes and body offsets of a point-kinematics call (before any loop)."""
    cdef Py_ssize_t n = q.shape[0], k = off.shape[0]
    if qd.shape[0] != n or qdd.shape[0] != n:
        raise ValueError(f"qd and qdd must have {n} entries like q (got {qd.shape[0]}, "
                         f"{qdd.shape[0]})")
    if loc.shape[0] != k or loc.shape[1] < dim:
        raise ValueError(f"loc must have shape ({k}, {dim}), got ({loc.shape[0]}, "
                         f"{loc.shape[1]})")
    if out.shape[0] != k or out.shape[1] != 3 * dim:
        raise ValueError(f"out must have shape ({k}, {3 * dim}), got ({out.shape[0]}, "
                         f"{out.shape[1]})")
    offs = np.asarray(off)
    inside = offs[offs < n]        # >= n: the ground
    _extent(offs, 0, -1, "off")
    _extent(inside, 0, max(n - block + 1, 0), "off")
    return 0


def point_kinematics(const double[::1] q not None, const double[::1] qd not None,
                     const double[::1] qdd not None, const Py_ssize_t[::1] off not None,
                     const double[:, ::1] loc not None, double[:, ::1] out not None):
    """Position, velocity and acceleration of body points (Nikravesh (1988), §4.1):
    ``r + S``, ``rd + w R S``, ``rdd + wd R S - w^2 S`` with ``S = A(phi) s'``; rows
    ``x, y, xd, yd, xdd, ydd``.  Offsets >= len(q) denote the ground (all zero).
    Reference: ``System.point_kinematics`` on the NumPy path."""
    cdef Py_ssize_t k, o, n = q.shape[0]
    cdef double c, s, Sx, Sy, x, y, xd, yd, w, xdd, ydd, a, phi
    _check_points(q, qd, qdd, off, loc, out, 2, 3)
    for k in range(off.shape[0]):
        o = off[k]
        if o >= n:
            x = y = xd = yd = w = xdd = ydd = a = phi = 0.0
        else:
            x = q[o]; y = q[o + 1]; phi = q[o + 2]
            xd = qd[o]; yd = qd[o + 1]; w = qd[o + 2]
            xdd = qdd[o]; ydd = qdd[o + 1]; a = qdd[o + 2]
        c = cos(phi); s = sin(phi)
        Sx = c * loc[k, 0] - s * loc[k, 1]
        Sy = s * loc[k, 0] + c * loc[k, 1]
        out[k, 0] = x + Sx
        out[k, 1] = y + Sy
        out[k, 2] = xd - w * Sy
        out[k, 3] = yd + w * Sx
        out[k, 4] = xdd - a * Sy - w * w * Sx
        out[k, 5] = ydd + a * Sx - w * w * Sy


# --- spatial bodies (Euler parameters) --------------------
cdef inline void _Lt(const double* p, const double* s, double* u) noexcept nogil:
    """u = L(p)^T s' (4): [-e.s', e0 s' + e x s'] (Nikravesh (1988), Eq. 6.39)."""
    u[0] = -(p[1] * s[0] + p[2] * s[1] + p[3] * s[2])
    u[1] = p[0] * s[0] + p[2] * s[2] - p[3] * s[1]
    u[2] = p[0] * s[1] + p[3] * s[0] - p[1] * s[2]
    u[3] = p[0] * s[2] + p[1] * s[1] - p[2] * s[0]


cdef inline void _Gadd(const double* x, const double* u, double c,
                       double* out) noexcept nogil:
    """out += c G(x) u, G(x) u = -x_v u0 + x_v x u_v + x0 u_v (Nikravesh (1988), Eq. 6.38)."""
    out[0] += c * (-x[1] * u[0] + x[0] * u[1] - x[3] * u[2] + x[2] * u[3])
    out[1] += c * (-x[2] * u[0] + x[3] * u[1] + x[0] * u[2] - x[1] * u[3])
    out[2] += c * (-x[3] * u[0] - x[2] * u[1] + x[1] * u[2] + x[0] * u[3])


cdef inline void _point_spatial(const double* q, const double* qd, const double* qdd,
                                Py_ssize_t n, Py_ssize_t o, const double* s,
                                double* row) noexcept nogil:
    """One point's row of :func:`point_kinematics_spatial` (body offset ``o`` in q,
    local coordinates ``s``; ``o >= n``: the ground)."""
    cdef Py_ssize_t j
    cdef double u[4]
    cdef double ud[4]
    cdef double p[4]
    cdef double pd[4]
    cdef double pdd[4]
    for j in range(9):
        row[j] = 0.0
    if o >= n:                         # a point of the ground
        for j in range(3):
            row[j] = s[j]
        return
    for j in range(4):
        p[j] = q[o + 3 + j]
        pd[j] = qd[o + 3 + j]
        pdd[j] = qdd[o + 3 + j]
    for j in range(3):
        row[j] = q[o + j]
        row[3 + j] = qd[o + j]
        row[6 + j] = qdd[o + j]
    _Lt(p, s, u)
    _Lt(pd, s, ud)
    _Gadd(p, u, 1.0, row)
    _Gadd(pd, u, 2.0, row + 3)
    _Gadd(pdd, u, 2.0, row + 6)
    _Gadd(pd, ud, 2.0, row + 6)


cdef inline void _angular(const double* q, const double* qd, const double* qdd,
                          const Py_ssize_t* pidx, double* row) noexcept nogil:
    """One body's row of :func:`angular_kinematics` (``pidx``: its 4 indices of p)."""
    cdef Py_ssize_t j
    cdef double p[4]
    cdef double pd[4]
    cdef double pdd[4]
    for j in range(4):
        p[j] = q[pidx[j]]
        pd[j] = qd[pidx[j]]
        pdd[j] = qdd[pidx[j]]
    for j in range(6):
        row[j] = 0.0
    _Gadd(p, pd, 2.0, row)
    _Gadd(p, pdd, 2.0, row + 3)


def point_kinematics_spatial(const double[::1] q not None, const double[::1] qd not None,
                             const double[::1] qdd not None,
                             const Py_ssize_t[::1] off not None,
                             const double[:, ::1] loc not None, double[:, ::1] out not None):
    """Points of spatial bodies, rows ``x, y, z, xd, yd, zd, xdd, ydd, zdd``:
    ``r + A s'``, ``rd + Adot s'``, ``rdd + Addot s'`` with ``A = G L^T``,
    ``Adot = 2 G(pd) L^T``, ``Addot = 2 G(pdd) L^T + 2 G(pd) L(pd)^T`` (Nikravesh (1988), Eqs. 
    6.62-6.63, 6.102).  Offsets >= len(q) denote the ground (r = 0, p = (1, 0, 0,
    0)).  Reference: ``System._point_kinematics_spatial`` on the NumPy path."""
    cdef Py_ssize_t k, n = q.shape[0]
    _check_points(q, qd, qdd, off, loc, out, 3, 7)
    for k in range(off.shape[0]):
        if off[k] < n and off[k] + 7 > n:
            raise ValueError("point_kinematics_spatial: body offset out of range")
    with nogil:
        for k in range(off.shape[0]):
            _point_spatial(&q[0], &qd[0], &qdd[0], n, off[k], &loc[k, 0], &out[k, 0])


def angular_kinematics(const double[::1] q not None, const double[::1] qd not None,
                       const double[::1] qdd not None, const Py_ssize_t[:, ::1] pidx not None,
                       double[:, ::1] out not None):
    """Angular velocity and acceleration of spatial bodies in global axes, rows
    ``wx, wy, wz, wxd, wyd, wzd``: ``omega = 2 G(p) pd``, ``omegadot = 2 G(p) pdd``
    (Nikravesh (1988), Eqs. 6.96, 6.107).  ``pidx`` (nb, 4): the indices of each body's p in q.
    Reference: ``System.angular_kinematics`` on the NumPy path."""
    cdef Py_ssize_t k, j, n = q.shape[0]
    if out.shape[0] != pidx.shape[0] or out.shape[1] != 6 or pidx.shape[1] != 4 \
            or qd.shape[0] != n or qdd.shape[0] != n:
        raise ValueError("angular_kinematics: out (nb, 6), pidx (nb, 4), qd and qdd (as "
                         "q) have inconsistent sizes")
    for k in range(pidx.shape[0]):
        for j in range(4):
            if pidx[k, j] < 0 or pidx[k, j] >= n:
                raise ValueError(f"angular_kinematics: pidx[{k}, {j}] = {pidx[k, j]} "
                                 f"is outside [0, {n})")
    with nogil:
        for k in range(pidx.shape[0]):
            _angular(&q[0], &qd[0], &qdd[0], &pidx[k, 0], &out[k, 0])


# --- blocks of rows (the dynamic analysis' output rows) --------------------------------
cdef int _check_rows(const double[:, :] Q, const double[:, :] QD, const double[:, :] QDD,
                     double[:, ::1] out, Py_ssize_t width) except -1:
    """Rows of states (R, >= n), each row's entries adjacent, and ``out`` (R, width)."""
    cdef Py_ssize_t R = Q.shape[0]
    if QD.shape[0] != R or QDD.shape[0] != R or out.shape[0] != R:
        raise ValueError(f"Q, QD, QDD and out must have the same rows (got {R}, "
                         f"{QD.shape[0]}, {QDD.shape[0]}, {out.shape[0]})")
    if QD.shape[1] != Q.shape[1] or QDD.shape[1] != Q.shape[1]:
        raise ValueError(f"QD and QDD must have {Q.shape[1]} columns like Q (got "
                         f"{QD.shape[1]}, {QDD.shape[1]})")
    if out.shape[1] != width:
        raise ValueError(f"out must have {width} columns, got {out.shape[1]}")
    if Q.shape[1] == 0:
        raise ValueError("Q has no coordinates")
    if Q.shape[1] > 1 and (Q.strides[1] != sizeof(double) or QD.strides[1] != sizeof(double)
                           or QDD.strides[1] != sizeof(double)):
        raise ValueError("Q, QD and QDD: the entries of a row must be adjacent")
    return 0


def point_kinematics_spatial_rows(const double[:, :] Q not None,
                                  const double[:, :] QD not None,
                                  const double[:, :] QDD not None,
                                  const Py_ssize_t[::1] off not None,
                                  const double[:, ::1] loc not None,
                                  double[:, ::1] out not None):
    """:func:`point_kinematics_spatial` of each row of ``Q``, ``QD``, ``QDD`` (R, n):
    ``out`` (R, 9 k), row i the flattened (k, 9) of state i (the same arithmetic).
    Reference: ``System.point_kinematics_rows`` on the NumPy path."""
    cdef Py_ssize_t R = Q.shape[0], n = Q.shape[1], k, i, npt = off.shape[0]
    _check_rows(Q, QD, QDD, out, 9 * npt)
    if loc.shape[0] != npt or loc.shape[1] < 3:
        raise ValueError(f"loc must have shape ({npt}, 3), got ({loc.shape[0]}, "
                         f"{loc.shape[1]})")
    for k in range(npt):
        if off[k] < 0 or (off[k] < n and off[k] + 7 > n):
            raise ValueError("point_kinematics_spatial_rows: body offset out of range")
    if R == 0 or npt == 0:
        return
    with nogil:
        for i in range(R):
            for k in range(npt):
                _point_spatial(&Q[i, 0], &QD[i, 0], &QDD[i, 0], n, off[k], &loc[k, 0],
                               &out[i, 9 * k])


def angular_kinematics_rows(const double[:, :] Q not None, const double[:, :] QD not None,
                            const double[:, :] QDD not None,
                            const Py_ssize_t[:, ::1] pidx not None,
                            double[:, ::1] out not None):
    """:func:`angular_kinematics` of each row of ``Q``, ``QD``, ``QDD`` (R, n):
    ``out`` (R, 6 nb), row i the flattened (nb, 6) of state i (the same arithmetic).
    Reference: ``System.angular_kinematics_rows`` on the NumPy path."""
    cdef Py_ssize_t R = Q.shape[0], n = Q.shape[1], k, i, j, nb = pidx.shape[0]
    _check_rows(Q, QD, QDD, out, 6 * nb)
    if pidx.shape[1] != 4:
        raise ValueError("angular_kinematics_rows: pidx must be (nb, 4)")
    for k in range(nb):
        for j in range(4):
            if pidx[k, j] < 0 or pidx[k, j] >= n:
                raise ValueError(f"angular_kinematics_rows: pidx[{k}, {j}] = "
                                 f"{pidx[k, j]} is outside [0, {n})")
    if R == 0 or nb == 0:
        return
    with nogil:
        for i in range(R):
            for k in range(nb):
                _angular(&Q[i, 0], &QD[i, 0], &QDD[i, 0], &pidx[k, 0], &out[i, 6 * k])
