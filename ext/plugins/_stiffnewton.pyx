# cython: language_level=3, boundscheck=False, wraparound=False
"""The reduced, rescaled Newton system of the stiff DAE method in compiled code
(``mbcore._ext._stiffnewton``).

:class:`ReducedNewtonC` is bdf's ``newton_system`` hook of the ``stiff`` formulation
for planar models (constant diagonal mass): the methods ``update``, ``matrix``,
``rhs`` and ``solution`` of :class:`mbplugins.formulations.stiff.ReducedNewton` (its
NumPy reference) with the same arithmetic bit for bit — elementwise expressions in
NumPy's order without fused multiply-add, the two matrix-vector products by NumPy's
own ``matmul`` (into preallocated buffers), the 1×1 solve of the analysis' work
component as the division LAPACK's ``dgesv`` makes — so the Python driver and the
compiled bdf loop (``_steploop.run_bdf``, which calls the hook back) take the same
steps with either object.  No allocation per call except the returned arrays.
"""
import numpy as np

cdef extern from *:
    """
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC optimize ("fp-contract=off")
    #elif defined(__clang__)
    #pragma clang fp contract(off)
    #endif
    """


cdef class ReducedNewtonC:
    """``ReducedNewtonC(n, m, phi_q)``: the hook for the state ``[q (n), s (n), lam (m),
    extra...]`` (``phi_q(q, t)``: the exact Phi_q, evaluated at every step's
    predictor).  See :class:`mbplugins.formulations.stiff.ReducedNewton`."""

    cdef readonly Py_ssize_t n, m
    cdef object _phi_q
    cdef double[::1] P            # Phi_q (m x n, row-major) at the last update
    cdef bint have_P
    cdef double[:, ::1] A         # the reduced matrix
    cdef double[:, ::1] Ms        # M - c Ks
    cdef double[::1] tn, te       # matmul outputs (n), (extra)
    cdef object A_arr, Ms_arr, tn_arr, te_arr
    cdef object _J                # the Jacobian of the last matrix (extra rows)
    cdef double[::1] me           # extra masses
    cdef Py_ssize_t ne

    def __cinit__(self, Py_ssize_t n, Py_ssize_t m, phi_q=None):
        if n < 1 or m < 0:
            raise ValueError("ReducedNewtonC: n >= 1 and m >= 0 needed")
        self.n, self.m = n, m
        self._phi_q = phi_q
        self.P = np.zeros(max(m * n, 1))
        self.have_P = False
        self.A_arr = np.zeros((n + m, n + m))
        self.A = self.A_arr
        self.Ms_arr = np.zeros((n, n))
        self.Ms = self.Ms_arr
        self.tn_arr = np.zeros(n)
        self.tn = self.tn_arr
        self.te_arr = np.zeros(1)
        self.te = self.te_arr
        self.me = np.zeros(1)
        self.ne = 0
        self._J = None

    def update(self, t, y):
        """Phi_q at the predictor (True: the matrix must be re-factored); False
        without ``phi_q``."""
        if self._phi_q is None:
            return False
        cdef Py_ssize_t n = self.n, m = self.m, i, j
        cdef double[:, :] Pn = np.asarray(self._phi_q(y[:n], t), dtype=np.float64)
        if Pn.shape[0] != m or Pn.shape[1] != n:
            raise ValueError(f"ReducedNewtonC: phi_q returned shape "
                             f"({Pn.shape[0]}, {Pn.shape[1]}), not ({m}, {n})")
        for i in range(m):
            for j in range(n):
                self.P[i * n + j] = Pn[i, j]
        self.have_P = True
        return True

    def matrix(self, J, mass, double c):
        """``[[M - c Ks - c^2 Kq, -Phi_q^T], [Phi_q, 0]]`` (the returned array is a
        buffer of this object, overwritten by the next call: bdf copies it)."""
        cdef Py_ssize_t n = self.n, m = self.m, L = 2 * n + m, i, j, N
        cdef double[:, :] Jv = J
        cdef const double[:] mv = np.asarray(mass, dtype=np.float64)
        N = Jv.shape[0]
        if Jv.shape[1] != N or N < L or mv.shape[0] != N:
            raise ValueError(f"ReducedNewtonC: J ({Jv.shape[0]}, {Jv.shape[1]}) and mass "
                             f"({mv.shape[0]}) do not match the state (>= {L})")
        self._J = J
        self.ne = N - L
        if self.me.shape[0] < max(self.ne, 1):
            self.me = np.zeros(self.ne)
            self.te_arr = np.zeros(self.ne)
            self.te = self.te_arr
        for i in range(self.ne):
            self.me[i] = mv[L + i]
        cdef double[:, ::1] A = self.A
        cdef double[:, ::1] Ms = self.Ms
        cdef double mij, cc = c * c
        for i in range(n):
            for j in range(n):
                mij = mv[n + i] if i == j else 0.0
                Ms[i, j] = mij - c * Jv[n + i, n + j]                  # M - c Ks
                A[i, j] = (mij - c * Jv[n + i, n + j]) - cc * Jv[n + i, j]
        for i in range(m):
            for j in range(n):
                if self.have_P:
                    A[j, n + i] = -self.P[i * n + j]                   # -Phi_q^T
                    A[n + i, j] = self.P[i * n + j]                    # Phi_q
                else:
                    A[j, n + i] = -Jv[n + j, 2 * n + i]
                    A[n + i, j] = Jv[2 * n + i, j]
            for j in range(m):
                A[n + i, n + j] = 0.0
        return self.A_arr

    def rhs(self, r, double c):
        """``[c r_s + (M - c Ks) r_q, -r_lam / c]``."""
        cdef Py_ssize_t n = self.n, m = self.m, i
        cdef const double[:] rv = r
        if rv.shape[0] < 2 * n + m:
            raise ValueError("ReducedNewtonC: r has the wrong size")
        np.matmul(self.Ms_arr, r[:n], out=self.tn_arr)
        out_arr = np.empty(n + m)
        cdef double[::1] out = out_arr
        for i in range(n):
            out[i] = c * rv[n + i] + self.tn[i]
        for i in range(m):
            out[n + i] = -rv[2 * n + i] / c
        return out_arr

    def solution(self, x, r, double c):
        """d from the reduced solution x: ``dq = x_q``, ``ds = (dq - r_q)/c``,
        ``dlam = x_lam / c^2``; extra components by forward substitution."""
        cdef Py_ssize_t n = self.n, m = self.m, L = 2 * n + m, i, k
        cdef const double[:] xv = x
        cdef const double[:] rv = r
        cdef Py_ssize_t N = rv.shape[0]
        if N != L + self.ne or xv.shape[0] != n + m:
            raise ValueError("ReducedNewtonC: x or r has the wrong size")
        d_arr = np.empty(N)
        cdef double[::1] d = d_arr
        cdef double cc = c * c
        for i in range(n):
            d[i] = xv[i]
            d[n + i] = (xv[i] - rv[i]) / c
        for i in range(m):
            d[2 * n + i] = xv[n + i] / cc
        if N > L:                   # extra components: lower block triangular
            J = self._J
            if self.ne == 1:
                np.matmul(J[L:, :L], d_arr[:L], out=self.te_arr)
                k = L
                # np.linalg.solve of the 1x1 system: b / a (dgesv's division)
                d[k] = (rv[k] + c * self.te[0]) / (self.me[0] - c * J[k, k])
            else:
                A = np.diag(np.asarray(self.me)[:self.ne]) - c * J[L:, L:]
                d_arr[L:] = np.linalg.solve(A, r[L:] + c * (J[L:, :L] @ d_arr[:L]))
        return d_arr
