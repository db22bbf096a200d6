# cython: language_level=3
"""Dense LU factor/solve through LAPACK (scipy.linalg.cython_lapack), no Python
round trip per call.  The matrix arrives row-major (C order), which LAPACK sees as
its transpose: ``dgetrf`` factors A^T, and solves with A use ``trans='T'``.
Reference path: ``scipy.linalg.lu_factor`` / ``lu_solve`` (mbcore.linalg)."""
from libc.math cimport fabs
from libc.string cimport memcpy
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

import numpy as np


cdef class DenseLU:
    """LU factors of a square n x n matrix with partial pivoting (004 §3.3, Alg LU-I)."""

    cdef public Py_ssize_t n
    cdef double[::1] lu
    cdef int[::1] ipiv
    cdef public double pivot_ratio
    cdef public int info

    def __cinit__(self, Py_ssize_t n):
        self.n = n
        self.lu = np.zeros(max(n * n, 1))
        self.ipiv = np.zeros(max(n, 1), dtype=np.intc)
        self.pivot_ratio = 0.0
        self.info = 0

    def factor(self, const double[::1] a):
        """Factor the row-major matrix in ``a`` (first n*n entries).  Returns LAPACK's
        info (> 0: exactly zero pivot).  ``pivot_ratio`` = min|u_kk| / max|u_kk|."""
        cdef int n = <int> self.n, info = 0, k
        cdef double d, dmin, dmax
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

    def solve(self, double[::1] b, bint transposed=False):
        """Overwrite b with A^-1 b (or A^-T b when transposed) using the factors."""
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'N' if transposed else b'T'
        if n == 0:
            return
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], &b[0], &n, &info)
