# Shared by _linalg (SchurSolver) and _dynamics (CompiledRHS); included, not
# imported.  Needs: from libc.math cimport fabs, sqrt; include "_lapack.pxi"
# (dpotrf, dpotrs).

#: above this many constraint rows the Cholesky factor is computed by LAPACK
cdef enum:
    SCHUR_SMALL_M = 40
    #: B's products skip the zero columns of each row of J M^-1 up to this many
    #: coordinates (the dense path's models; above, every column is multiplied)
    SCHUR_NZ_MAX = 512


cdef int dense_schur(Py_ssize_t n, Py_ssize_t m, const double* J, const double* minv,
                     const double* Q, const double* gam, double* C, double* B,
                     double* qdd, double* lam) noexcept nogil:
    """Accelerations and multipliers with a diagonal mass matrix by the Schur
    complement (Nikravesh (1988), Prob. 10.9-10.10):

        B = J M^-1 J^T,  B lam = gamma - J M^-1 Q,  qdd = M^-1 (Q + J^T lam)

    ``J`` row-major m x n, work arrays ``C`` (m n) and ``B`` (m m).  B = L L^T by an
    unblocked Cholesky for m <= SCHUR_SMALL_M (LAPACK's per-call overhead dominates
    small systems) and ``dpotrf`` above.  Returns 1 when B is (nearly) singular: the
    test of the NumPy reference, min pivot^2 < 1e-13 max diag B."""
    cdef Py_ssize_t i, j, k
    cdef double acc, bmax = 0.0, lmin = 1e308, d
    cdef int mm = <int> m, nrhs = 1, info = 0
    cdef char uplo = b'U'
    for i in range(m):
        acc = 0.0
        for j in range(n):
            C[i * n + j] = J[i * n + j] * minv[j]
            acc += C[i * n + j] * Q[j]
        lam[i] = gam[i] - acc
    cdef int nz[SCHUR_NZ_MAX]
    cdef Py_ssize_t cnt, t
    for i in range(m):
        if n <= SCHUR_NZ_MAX:
            # the columns where row i of C is not zero (a joint row touches its two
            # bodies' columns only): the same sums without the exact-zero products
            cnt = 0
            for j in range(n):
                if C[i * n + j] != 0.0:
                    nz[cnt] = <int> j
                    cnt += 1
            for k in range(i, m):
                acc = 0.0
                for t in range(cnt):
                    acc += C[i * n + nz[t]] * J[k * n + nz[t]]
                B[i * m + k] = acc
                B[k * m + i] = acc
        else:
            for k in range(i, m):
                acc = 0.0
                for j in range(n):
                    acc += C[i * n + j] * J[k * n + j]
                B[i * m + k] = acc
                B[k * m + i] = acc
        if B[i * m + i] > bmax:
            bmax = B[i * m + i]
    if m > SCHUR_SMALL_M:
        dpotrf(&uplo, &mm, B, &mm, &info)
        if info != 0:
            return 1
        for i in range(m):
            if fabs(B[i * m + i]) < lmin:
                lmin = fabs(B[i * m + i])
        if lmin * lmin < 1e-13 * bmax:
            return 1
        dpotrs(&uplo, &mm, &nrhs, B, &mm, lam, &mm, &info)
    elif m > 0:
        # B = L L^T in place (lower triangle, row-major), then two triangular solves
        for j in range(m):
            d = B[j * m + j]
            for k in range(j):
                d -= B[j * m + k] * B[j * m + k]
            if not (d > 0.0):
                return 1
            d = sqrt(d)
            if d < lmin:
                lmin = d
            B[j * m + j] = d
            for i in range(j + 1, m):
                acc = B[i * m + j]
                for k in range(j):
                    acc -= B[i * m + k] * B[j * m + k]
                B[i * m + j] = acc / d
        if lmin * lmin < 1e-13 * bmax:
            return 1
        for i in range(m):                    # L z = r
            acc = lam[i]
            for k in range(i):
                acc -= B[i * m + k] * lam[k]
            lam[i] = acc / B[i * m + i]
        for i in range(m - 1, -1, -1):        # L^T lam = z
            acc = lam[i]
            for k in range(i + 1, m):
                acc -= B[k * m + i] * lam[k]
            lam[i] = acc / B[i * m + i]
    for j in range(n):
        qdd[j] = Q[j]
    for i in range(m):
        for j in range(n):
            qdd[j] += J[i * n + j] * lam[i]
    for j in range(n):
        qdd[j] *= minv[j]
    return 0
