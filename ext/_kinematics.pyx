# cython: language_level=3
"""Compiled kinematic step (004 §3.2.2 Alg K-II; KAP): Newton-Raphson positions with
one LU per iteration, then velocities and accelerations with the factors of the
Jacobian at the converged configuration — one call per output time.

The reference is the Python loop of ``mbplugins.analyses.kinematic`` (same
algorithm, same tests, same tolerances); this path is used for dense systems
whose constraint groups are all compiled and which need no row selection.
Evaluation goes through the System's ``PlanarEvaluator`` (``phi``, ``jacobian``,
``nu``, ``gamma``) and LAPACK ``dgetrf``/``dgetrs`` on a private copy.
"""
from libc.math cimport cos, fabs, isfinite, sin
from libc.string cimport memcpy
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

import numpy as np


cdef class KinematicStepper:
    """Work buffers and the step routine for one System (n = m)."""

    cdef object ev
    cdef Py_ssize_t n
    cdef double[::1] phi, jdata, lu, b, nu, gam, qpred
    cdef int[::1] ipiv
    cdef public double pivot_ratio
    cdef public int iterations
    cdef public double phi_norm

    def __cinit__(self, evaluator, Py_ssize_t n, double[::1] jdata):
        self.ev = evaluator
        self.n = n
        self.phi = np.zeros(max(n, 1))
        self.nu = np.zeros(max(n, 1))
        self.gam = np.zeros(max(n, 1))
        self.jdata = jdata                 # the System's Jacobian buffer (row-major n x n, + ground slots)
        self.lu = np.zeros(max(n * n, 1))
        self.b = np.zeros(max(n, 1))
        self.ipiv = np.zeros(max(n, 1), dtype=np.intc)
        self.qpred = np.zeros(max(n, 1))

    cdef int _factor(self, double sing_tol):
        cdef int n = <int> self.n, info = 0, k
        cdef double d, dmin = 1e308, dmax = 0.0
        memcpy(&self.lu[0], &self.jdata[0], n * n * sizeof(double))
        dgetrf(&n, &n, &self.lu[0], &n, &self.ipiv[0], &info)
        for k in range(n):
            d = fabs(self.lu[k * n + k])
            if d < dmin:
                dmin = d
            if d > dmax:
                dmax = d
        self.pivot_ratio = dmin / dmax if dmax > 0 else 0.0
        if info != 0 or self.pivot_ratio < sing_tol:
            return 1
        return 0

    cdef void _solve(self, double* x):
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'T'             # row-major data is A^T for LAPACK
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], x, &n, &info)

    def predicted(self):
        """The predicted configuration of the last step (for diagnostics)."""
        return np.array(self.qpred[:self.n])

    def step(self, double[::1] q, double[::1] qd, double[::1] qdd, double t,
             const double[:, ::1] fv, double tol, int maxit, double sing_tol,
             double h=0.0):
        """From the previous (q, qd, qdd) predict ``q + h qd + h^2/2 qdd`` (h = 0:
        start from q), solve Phi(q, t) = 0 in place, then qd and qdd in place.
        Returns 0 (success), 1 (singular Jacobian during Newton), 2 (Newton did not
        converge / diverged), 3 (non-finite Phi), 4 (singular at the solution),
        5 (non-finite velocity or acceleration)."""
        cdef Py_ssize_t n = self.n, i
        cdef int it
        cdef double scale = 0.0, pn, a, dmax
        if h != 0.0:
            for i in range(n):
                q[i] += h * qd[i] + 0.5 * h * h * qdd[i]
        for i in range(n):
            self.qpred[i] = q[i]
        for i in range(n):
            if fabs(q[i]) > scale:
                scale = fabs(q[i])
        scale += 1.0
        self.iterations = 0
        for it in range(maxit + 1):
            self.ev.phi(q, t, fv, self.phi)
            pn = 0.0
            for i in range(n):
                a = fabs(self.phi[i])
                if not isfinite(a):
                    self.phi_norm = a
                    return 3
                if a > pn:
                    pn = a
            self.phi_norm = pn
            self.iterations = it
            if pn <= tol * scale:
                break
            if it == maxit:
                return 2
            self.ev.jacobian(q, t, fv, self.jdata)
            if self._factor(sing_tol):
                return 1
            for i in range(n):
                self.b[i] = -self.phi[i]
            self._solve(&self.b[0])
            dmax = 0.0
            for i in range(n):
                if not isfinite(self.b[i]):
                    return 2
                if fabs(self.b[i]) > dmax:
                    dmax = fabs(self.b[i])
            if dmax > 1e6 * scale:
                return 2
            for i in range(n):
                q[i] += self.b[i]
        # velocities and accelerations with the Jacobian at the converged q
        self.ev.jacobian(q, t, fv, self.jdata)
        if self._factor(sing_tol):
            return 4
        self.ev.nu(q, t, fv, self.nu)
        for i in range(n):
            qd[i] = self.nu[i]
        self._solve(&qd[0])
        self.ev.gamma(q, qd, t, fv, self.gam)
        for i in range(n):
            qdd[i] = self.gam[i]
        self._solve(&qdd[0])
        for i in range(n):
            if not isfinite(qdd[i]) or not isfinite(qd[i]):
                return 5
        return 0

    def solve(self, double[::1] b, bint transposed=False):
        """b <- A^-1 b (or A^-T b) with the factors of the last Jacobian."""
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'N' if transposed else b'T'
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], &b[0], &n, &info)


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
