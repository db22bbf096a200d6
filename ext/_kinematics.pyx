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
from libc.math cimport fabs, isfinite
from libc.string cimport memcpy
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

import numpy as np


cdef class KinematicStepper:
    """Work buffers and the step routine for one System (n = m)."""

    cdef object ev
    cdef Py_ssize_t n
    cdef double[::1] phi, jdata, lu, b, nu, gam
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

    def step(self, double[::1] q, double[::1] qd, double[::1] qdd, double t,
             const double[:, ::1] fv, double tol, int maxit, double sing_tol):
        """Solve Phi(q, t) = 0 in place from the predicted q, then qd and qdd.
        Returns 0 (success), 1 (singular Jacobian during Newton), 2 (Newton did not
        converge / diverged), 3 (non-finite Phi), 4 (singular at the solution)."""
        cdef Py_ssize_t n = self.n, i
        cdef int it
        cdef double scale = 0.0, pn, a, dmax
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
        return 0

    def solve(self, double[::1] b, bint transposed=False):
        """b <- A^-1 b (or A^-T b) with the factors of the last Jacobian."""
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'N' if transposed else b'T'
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], &b[0], &n, &info)
