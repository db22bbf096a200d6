# cython: language_level=3
"""Dense LU factor/solve through LAPACK (scipy.linalg.cython_lapack), no Python
round trip per call.  The matrix arrives row-major (C order), which LAPACK sees as
its transpose: ``dgetrf`` factors A^T, and solves with A use ``trans='T'``.
Reference path: ``scipy.linalg.lu_factor`` / ``lu_solve`` (mbcore.solve.linalg)."""
from libc.math cimport fabs, sqrt
from libc.string cimport memcpy
include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

import numpy as np

include "_schur.pxi"
include "_bounds.pxi"


cdef class DenseLU:
    """LU factors of a square n x n matrix with partial pivoting (Nikravesh (1988), §3.3, Alg LU-I)."""

    cdef public Py_ssize_t n
    cdef double[::1] lu
    cdef int[::1] ipiv
    cdef public double pivot_ratio
    cdef public int info

    def __cinit__(self, Py_ssize_t n):
        _need_dim("n", n)
        self.n = n
        self.lu = np.zeros(max(n * n, 1))
        self.ipiv = np.zeros(max(n, 1), dtype=np.intc)
        self.pivot_ratio = 0.0
        self.info = 0

    def factor(self, const double[::1] a not None):
        """Factor the row-major matrix in ``a`` (first n*n entries).  Returns LAPACK's
        info (> 0: exactly zero pivot).  ``pivot_ratio`` = min|u_kk| / max|u_kk|."""
        cdef int n = <int> self.n, info = 0, k
        cdef double d, dmin, dmax
        _need("a", a.shape[0], self.n * self.n)
        if n == 0:
            self.info = 0
            self.pivot_ratio = 1.0
            return 0
        memcpy(&self.lu[0], &a[0], n * n * sizeof(double))
        dgetrf(&n, &n, &self.lu[0], &n, &self.ipiv[0], &info)
        dmin = 1e308
        dmax = 0.0
        for k in range(n):
            d = fabs(self.lu[k * n + k])
            if d < dmin:
                dmin = d
            if d > dmax:
                dmax = d
        self.pivot_ratio = dmin / dmax if dmax > 0 else 0.0
        self.info = info
        return info

    def solve(self, double[::1] b not None, bint transposed=False):
        """Overwrite b with A^-1 b (or A^-T b when transposed) using the factors."""
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'N' if transposed else b'T'
        _need("b", b.shape[0], self.n)
        if n == 0:
            return
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], &b[0], &n, &info)


cdef class SchurSolver:
    """Accelerations and multipliers of a constrained system with a diagonal mass
    matrix, by the Schur complement of the augmented system (Nikravesh (1988), §9.4,
    Probs. 10.9-10.10):

        B = Phi_q M^-1 Phi_q^T  (SPD),   B lam = gamma - Phi_q M^-1 Q,
        qdd = M^-1 (Q + Phi_q^T lam)

    which is the solution of ``[M, -Phi_q^T; Phi_q, 0] [qdd; lam] = [Q; gamma]``
    (the Nikravesh (1988), Ch. 9 sign convention); ``dense_schur`` of ``_schur.pxi`` (the same
    routine as the compiled right-hand side).
    """

    cdef public Py_ssize_t n, m
    cdef double[::1] B
    cdef double[::1] C
    cdef public int info

    def __cinit__(self, Py_ssize_t n, Py_ssize_t m):
        _need_dim("n", n)
        _need_dim("m", m)
        self.n = n
        self.m = m
        self.B = np.zeros(max(m * m, 1))
        self.C = np.zeros(max(m * n, 1))
        self.info = 0

    def solve(self, const double[::1] jac not None, const double[::1] minv not None,
              const double[::1] Q not None, const double[::1] gamma not None,
              double[::1] qdd not None, double[::1] lam not None):
        """``jac``: row-major dense Phi_q (first m*n entries).  Returns 0, or m + 1
        when B is (nearly) singular (dependent constraint rows)."""
        cdef Py_ssize_t n = self.n, m = self.m, j
        cdef int info = 0
        if qdd.shape[0] != n or lam.shape[0] != m or Q.shape[0] != n or minv.shape[0] != n \
                or gamma.shape[0] != m:
            raise ValueError("SchurSolver.solve: array sizes do not match (n, m)")
        _need("jac", jac.shape[0], m * n)
        if m == 0:
            for j in range(n):
                qdd[j] = Q[j] * minv[j]
            self.info = 0
            return 0
        info = dense_schur(n, m, &jac[0], &minv[0], &Q[0], &gamma[0], &self.C[0],
                           &self.B[0], &qdd[0], &lam[0])
        if info:
            self.info = m + 1
            return m + 1
        self.info = 0
        return 0
