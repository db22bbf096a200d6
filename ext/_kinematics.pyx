# cython: language_level=3
"""Compiled kinematic helpers: point kinematics (reference:
``mbcore.system.System.point_kinematics`` on the NumPy path).  The compiled
kinematic step lives in ``mbcore._ext._planar.KinematicStepper``, beside the
kernels it calls at C level.
"""
from libc.math cimport cos, sin


def point_kinematics(const double[::1] q, const double[::1] qd, const double[::1] qdd,
                     const Py_ssize_t[::1] off, const double[:, ::1] loc, double[:, ::1] out):
    """Position, velocity and acceleration of body points (spec/planar.md §0.1):
    ``r + S``, ``rd + w R S``, ``rdd + wd R S - w^2 S`` with ``S = A(phi) s'``; rows
    ``x, y, xd, yd, xdd, ydd``.  Offsets >= len(q) denote the ground (all zero).
    Reference: ``System.point_kinematics`` on the NumPy path."""
    cdef Py_ssize_t k, o, n = q.shape[0]
    cdef double c, s, Sx, Sy, x, y, xd, yd, w, xdd, ydd, a, phi
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
