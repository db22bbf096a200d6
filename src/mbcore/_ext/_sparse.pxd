# C-level interface of mbcore._ext._sparse (cimported by _dynamics).
cimport numpy as cnp

ctypedef cnp.intp_t idx_t


cdef class SparseSchur:
    cdef public Py_ssize_t n, m, m_full
    cdef readonly Py_ssize_t need_jdata  # entries of jdata that jpos reads
    cdef readonly bint jdirect           # jpos[p] == p: J's used entries are jdata[:nnz]
    cdef idx_t[::1] rp, jpos, jcol, rowid
    cdef idx_t[::1] perm
    cdef idx_t[::1] Bp, Bi, bdiag, tp
    cdef int[::1] ta, tb
    cdef idx_t[::1] ktp                  # the products as runs of consecutive entries:
    cdef int[::1] kta, ktb, ktl          # B[p] = sum over runs ktp[p]..ktp[p + 1]
    cdef idx_t[::1] sgp                  # entries of one run of length L (L < 17),
    cdef int[::1] sge, sga, sgb          # grouped by L: entry, cj and jv offsets;
    cdef int[::1] dde, dda, ddb          # entries of two runs of length 3: entry,
                                         # cj and jv offsets of both runs;
    cdef int[::1] mre                    # the others (several runs, longer ones)
    cdef double[::1] Bx, jv, cj
    cdef double[::1] rq                  # per used row: (J M^-1 Q)_i
    cdef idx_t[::1] cptr                 # J by columns (rows ascending): entry cent[t],
    cdef int[::1] cent, crid             # its multiplier's row crid[t] (for J^T lam)
    cdef idx_t[::1] parent, Lp, Lnz, Li, flag, pattern
    cdef idx_t[::1] rptr, rpat, rpos     # row patterns of L (precomputed)
    cdef idx_t[::1] rsi, rsq             # each row's columns ascending, Lx places
    cdef double[::1] Lx, D, Dinv, Y, w, u
    cdef public double pivot_tol
    cdef public int info
    cdef public Py_ssize_t failed_row

    cdef int _solve(self, const double[::1] jdata, const double[::1] minv,
                    const double[::1] Q, const double[::1] gamma, double[::1] qdd,
                    double[::1] lam) noexcept nogil
    cdef int _solve_used(self, const double* jv, const double* mv, const double* Qp,
                         const double* gamma, double* qx, double* lx, const double* vel,
                         double* power) noexcept nogil


# the numeric kernels of B = J M^-1 J^T and its LDL^T, shared with CompiledPenalty
cdef void schur_values(Py_ssize_t nb, const idx_t* ktp, const int* kta, const int* ktb,
                       const int* ktl, const double* cj, const double* jv,
                       double* Bx) noexcept nogil
cdef int ldl_numeric(Py_ssize_t m, const idx_t* Bp, const idx_t* Bi, const double* Bx,
                     const idx_t* rptr, const idx_t* rpat, const idx_t* rpos,
                     const idx_t* Lp, const idx_t* Li, double* Lx, double* D, double* Dinv,
                     double* Y, double shift, double tol) noexcept nogil
