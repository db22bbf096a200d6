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


def point_kinematics_spatial(const double[::1] q not None, const double[::1] qd not None,
                             const double[::1] qdd not None,
                             const Py_ssize_t[::1] off not None,
                             const double[:, ::1] loc not None, double[:, ::1] out not None):
    """Points of spatial bodies, rows ``x, y, z, xd, yd, zd, xdd, ydd, zdd``:
    ``r + A s'``, ``rd + Adot s'``, ``rdd + Addot s'`` with ``A = G L^T``,
    ``Adot = 2 G(pd) L^T``, ``Addot = 2 G(pdd) L^T + 2 G(pd) L(pd)^T`` (Nikravesh (1988), Eqs. 
    6.62-6.63, 6.102).  Offsets >= len(q) denote the ground (r = 0, p = (1, 0, 0,
    0)).  Reference: ``System._point_kinematics_spatial`` on the NumPy path."""
    cdef Py_ssize_t k, j, o, n = q.shape[0]
    cdef double u[4]
    cdef double ud[4]
    cdef double p[4]
    cdef double pd[4]
    cdef double pdd[4]
    cdef double* row
    _check_points(q, qd, qdd, off, loc, out, 3, 7)
    for k in range(off.shape[0]):
        if off[k] < n and off[k] + 7 > n:
            raise ValueError("point_kinematics_spatial: body offset out of range")
    with nogil:
        for k in range(off.shape[0]):
            o = off[k]
            row = &out[k, 0]
            for j in range(9):
                row[j] = 0.0
            if o >= n:                         # a point of the ground
                for j in range(3):
                    row[j] = loc[k, j]
                continue
            for j in range(4):
                p[j] = q[o + 3 + j]
                pd[j] = qd[o + 3 + j]
                pdd[j] = qdd[o + 3 + j]
            for j in range(3):
                row[j] = q[o + j]
                row[3 + j] = qd[o + j]
                row[6 + j] = qdd[o + j]
            _Lt(p, &loc[k, 0], u)
            _Lt(pd, &loc[k, 0], ud)
            _Gadd(p, u, 1.0, row)
            _Gadd(pd, u, 2.0, row + 3)
            _Gadd(pdd, u, 2.0, row + 6)
            _Gadd(pd, ud, 2.0, row + 6)


def angular_kinematics(const double[::1] q not None, const double[::1] qd not None,
                       const double[::1] qdd not None, const Py_ssize_t[:, ::1] pidx not None,
                       double[:, ::1] out not None):
    """Angular velocity and acceleration of spatial bodies in global axes, rows
    ``wx, wy, wz, wxd, wyd, wzd``: ``omega = 2 G(p) pd``, ``omegadot = 2 G(p) pdd``
    (Nikravesh (1988), Eqs. 6.96, 6.107).  ``pidx`` (nb, 4): the indices of each body's p in q.
    Reference: ``System.angular_kinematics`` on the NumPy path."""
    cdef Py_ssize_t k, j, n = q.shape[0]
    cdef double p[4]
    cdef double pd[4]
    cdef double pdd[4]
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
            for j in range(4):
                p[j] = q[pidx[k, j]]
                pd[j] = qd[pidx[k, j]]
                pdd[j] = qdd[pidx[k, j]]
            for j in range(6):
                out[k, j] = 0.0
            _Gadd(p, pd, 2.0, &out[k, 0])
            _Gadd(p, pdd, 2.0, &out[k, 3])
