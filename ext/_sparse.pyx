# cython: language_level=3
"""Sparse Schur-complement equations of motion in linear time.

``[M, -J^T; J, 0] [qdd; lam] = [Q; gamma]`` with diagonal M (centroidal planar
frames) is solved through ``B = J M^-1 J^T`` (symmetric positive definite when J has
full row rank):

    B lam = gamma - J M^-1 Q,      qdd = M^-1 (Q + J^T lam)

Everything that depends only on the sparsity pattern is computed once per topology
by ``mbcore.solve.sparse_schur`` (pattern of B, fill-reducing ordering P, elimination tree,
column counts of L, and the *product map* that gives every entry of the permuted
upper triangle of B as a sum of ``J[a] minv[c] J[b]`` over J's CSR data).  The
numeric phase here allocates nothing and touches only structural non-zeros:

1. assemble B's values from J's data and minv through the product map;
2. up-looking sparse LDL^T of P B P^T along the elimination tree (the algorithm of
   T. A. Davis, "Algorithm 849: a concise sparse Cholesky factorization package",
   ACM TOMS 31(4), 2005), with the relative pivot test of the dense SchurSolver
   (``D_kk <= 1e-13 max diag B`` -> failure);
3. forward/diagonal/backward solves and the two sparse products with J.

Cost: O(nnz(J) + nnz(L) + flops(L)), i.e. O(N) for chains and trees of N bodies
with a fill-reducing ordering.
"""
from libc.math cimport fabs
from libc.string cimport memset

import numpy as np
cimport numpy as cnp

include "_bounds.pxi"


def etree_counts(Py_ssize_t m, const idx_t[::1] Bp, const idx_t[::1] Bi, double cap=-1.0):
    """Symbolic LDL^T of a symmetric matrix given by the upper triangle of its
    columns (``Bi[Bp[k]:Bp[k+1]]`` are row indices <= k of column k, the matrix being
    already permuted).  Returns ``(parent, lnz, flops)``: the elimination tree, the
    number of off-diagonal entries of every column of L and sum(lnz^2) (the numeric
    work); ``None`` as soon as the running nnz(L) exceeds ``cap`` (cap > 0) — used to
    reject a poor ordering cheaply."""
    if m < 0:
        raise ValueError(f"m must be >= 0, got {m}")
    if Bp is None or Bi is None or Bp.shape[0] < m + 1:
        raise ValueError(f"Bp must have m + 1 = {m + 1} entries")
    _pointers("Bp", np.asarray(Bp)[:m + 1], m, Bi.shape[0])
    _extent(np.asarray(Bi)[:Bp[m]], 0, m, "Bi")
    cdef idx_t[::1] parent = np.empty(max(m, 1), dtype=np.intp)
    cdef idx_t[::1] lnz = np.zeros(max(m, 1), dtype=np.intp)
    cdef idx_t[::1] flag = np.empty(max(m, 1), dtype=np.intp)
    cdef Py_ssize_t k, p, i
    cdef double total = 0.0, flops = 0.0
    for k in range(m):
        parent[k] = -1
        flag[k] = k
        for p in range(Bp[k], Bp[k + 1]):
            i = Bi[p]
            if i < k:
                while flag[i] != k:
                    if parent[i] == -1:
                        parent[i] = k
                    lnz[i] += 1
                    total += 1.0
                    flag[i] = k
                    i = parent[i]
        if cap > 0 and total > cap:
            return None
    for k in range(m):
        flops += <double> lnz[k] * <double> lnz[k]
    return np.asarray(parent)[:m].copy(), np.asarray(lnz)[:m].copy(), flops


cdef void _insertion_sort(idx_t* a, Py_ssize_t k) noexcept nogil:
    """Sort ``a[0:k]`` ascending in place (a few entries: insertion sort)."""
    cdef Py_ssize_t p, t
    cdef idx_t v
    for p in range(1, k):
        v = a[p]
        t = p - 1
        while t >= 0 and a[t] > v:
            a[t + 1] = a[t]
            t -= 1
        a[t + 1] = v


cdef void _column_starts(Py_ssize_t n, Py_ssize_t nz, const idx_t* jcol, idx_t* cptr,
                         idx_t* fill) noexcept nogil:
    """The start of each column's entries in a counting sort of ``nz`` entries by
    their columns ``jcol`` (``cptr``: n + 1 zeros in, the prefix sums out) and the
    fill pointers (``fill[c] = cptr[c]``)."""
    cdef Py_ssize_t p, c
    for p in range(nz):
        cptr[jcol[p] + 1] += 1
    for c in range(n):
        cptr[c + 1] += cptr[c]
        fill[c] = cptr[c]


def schur_pattern(Py_ssize_t m, Py_ssize_t n, const idx_t[::1] rp, const idx_t[::1] jcol):
    """The pattern of ``B = J J^T`` (J: m rows as CSR over the column indices ``jcol``
    at ``rp``; n columns): ``(indptr, indices)`` of its symmetric CSR, each row's
    columns ascending (rows with an entry carry their diagonal).  Row r's columns are
    the rows sharing a column with it.  O(products) with a marker array: the
    compiled twin of the sparse product in ``SchurTopology`` (the same pattern)."""
    _pointers("rp", np.asarray(rp)[:m + 1], m, jcol.shape[0])
    _extent(np.asarray(jcol)[:rp[m]], 0, n, "jcol")
    cdef Py_ssize_t nz = rp[m], r, p, t, c, r2, k
    cdef idx_t[::1] cptr = np.zeros(n + 1, dtype=np.intp)
    cdef idx_t[::1] crow = np.zeros(max(nz, 1), dtype=np.intp)
    cdef idx_t[::1] fill = np.zeros(n + 1, dtype=np.intp)
    cdef idx_t[::1] flag = np.full(max(m, 1), -1, dtype=np.intp)
    cdef idx_t[::1] indptr = np.zeros(m + 1, dtype=np.intp)
    # J by columns (rows ascending)
    _column_starts(n, nz, &jcol[0] if jcol.shape[0] else NULL, &cptr[0], &fill[0])
    for r in range(m):
        for p in range(rp[r], rp[r + 1]):
            c = jcol[p]
            crow[fill[c]] = r
            fill[c] += 1
    # counts, then the rows' columns
    cdef idx_t[::1] indices = np.zeros(1, dtype=np.intp)
    cdef int u
    for u in range(2):
        if u:
            indices = np.zeros(max(indptr[m], 1), dtype=np.intp)
            flag[:] = -1
        for r in range(m):
            k = indptr[r] if u else 0
            for p in range(rp[r], rp[r + 1]):
                c = jcol[p]
                for t in range(cptr[c], cptr[c + 1]):
                    r2 = crow[t]
                    if flag[r2] != r:
                        flag[r2] = r
                        if u:
                            indices[k] = r2
                        k += 1
            if not u:
                indptr[r + 1] = indptr[r] + k
                continue
            _insertion_sort(&indices[indptr[r]], k - indptr[r])   # ascending
    return np.asarray(indptr), np.asarray(indices)[:indptr[m]].copy()


def schur_upper(Py_ssize_t m, const idx_t[::1] indptr, const idx_t[::1] indices,
                const idx_t[::1] perm):
    """The permuted upper triangle by columns of a symmetric pattern (CSR ``indptr``,
    ``indices``, m rows): column k (= row ``perm[k]``) holds the permuted rows
    ``i = pinv[r] <= k`` of that row's columns, ascending, and always its diagonal.
    Returns ``(Bp, Bi, bdiag)`` (bdiag: the diagonal's position in Bi).  The compiled
    twin of ``SchurTopology._upper`` and of its key sort."""
    _pointers("indptr", np.asarray(indptr)[:m + 1], m, indices.shape[0])
    _extent(np.asarray(indices)[:indptr[m]], 0, m, "indices")
    _extent(perm, 0, m, "perm")
    if perm.shape[0] != m or (m and bool(np.any(np.bincount(np.asarray(perm),
                                                               minlength=m) != 1))):
        raise ValueError("perm is not a permutation of the rows")
    cdef Py_ssize_t k, p, i, j, r, cnt
    cdef idx_t tmp
    cdef idx_t[::1] pinv = np.empty(max(m, 1), dtype=np.intp)
    for k in range(m):
        pinv[perm[k]] = k
    cdef idx_t[::1] Bp = np.zeros(m + 1, dtype=np.intp)
    for k in range(m):
        r = perm[k]
        cnt = 1                                    # the diagonal
        for p in range(indptr[r], indptr[r + 1]):
            if pinv[indices[p]] < k:
                cnt += 1
        Bp[k + 1] = Bp[k] + cnt
    cdef idx_t[::1] Bi = np.zeros(max(Bp[m], 1), dtype=np.intp)
    cdef idx_t[::1] bdiag = np.zeros(max(m, 1), dtype=np.intp)
    for k in range(m):
        r = perm[k]
        j = Bp[k]
        for p in range(indptr[r], indptr[r + 1]):
            i = pinv[indices[p]]
            if i < k:
                Bi[j] = i
                j += 1
        Bi[j] = k
        _insertion_sort(&Bi[Bp[k]], Bp[k + 1] - Bp[k])   # the column (a few entries)
        bdiag[k] = Bp[k + 1] - 1
    return np.asarray(Bp), np.asarray(Bi)[:Bp[m]].copy(), np.asarray(bdiag)[:m].copy()


def schur_products(Py_ssize_t m, Py_ssize_t n, const idx_t[::1] rp,
                   const idx_t[::1] jcol, const idx_t[::1] perm, const idx_t[::1] Bp,
                   const idx_t[::1] Bi):
    """The product map of ``B = J M^-1 J^T`` on its permuted upper pattern (Bp, Bi
    from :func:`schur_upper`): for entry p of Bi the pairs of J's entry numbers
    ``(ta[t], tb[t])``, ``tp[p] <= t < tp[p + 1]``, whose products sum to it, in the
    order of the pairs enumerated column of J by column of J (entries of a column in
    row order, every a then every b) — the order of ``SchurTopology``'s stable key
    sort.  Returns ``(tp, ta, tb)`` (ta, tb int32)."""
    _pointers("rp", np.asarray(rp)[:m + 1], m, jcol.shape[0])
    _extent(np.asarray(jcol)[:rp[m]], 0, n, "jcol")
    _extent(perm, 0, m, "perm")
    _pointers("Bp", np.asarray(Bp)[:m + 1], m, Bi.shape[0])
    _extent(np.asarray(Bi)[:Bp[m]], 0, m, "Bi")
    if perm.shape[0] != m:
        raise ValueError("perm is not a permutation of the rows")
    cdef Py_ssize_t nz = rp[m], nb = Bp[m], r, p, t, u, c, a, b, pa, pb, e, lo, hi, mid
    if nz >= 2 ** 31:                                      # pragma: no cover
        raise ValueError("the Jacobian has too many non-zeros for 32-bit indices")
    cdef idx_t[::1] pinv = np.empty(max(m, 1), dtype=np.intp)
    for r in range(m):
        pinv[perm[r]] = r
    cdef idx_t[::1] erow = np.zeros(max(nz, 1), dtype=np.intp)
    for r in range(m):
        for p in range(rp[r], rp[r + 1]):
            erow[p] = r
    # J's entries by columns, in entry order (a counting sort: stable)
    cdef idx_t[::1] cptr = np.zeros(n + 1, dtype=np.intp)
    cdef idx_t[::1] fill = np.zeros(n + 1, dtype=np.intp)
    cdef idx_t[::1] cent = np.zeros(max(nz, 1), dtype=np.intp)
    _column_starts(n, nz, &jcol[0] if jcol.shape[0] else NULL, &cptr[0], &fill[0])
    for p in range(nz):
        c = jcol[p]
        cent[fill[c]] = p
        fill[c] += 1
    cdef idx_t[::1] tp = np.zeros(nb + 1, dtype=np.intp)
    cdef int[::1] ta = np.zeros(1, dtype=np.int32)
    cdef int[::1] tb = np.zeros(1, dtype=np.int32)
    for u in range(2):                                     # count, then fill
        for c in range(n):
            for a in range(cptr[c], cptr[c + 1]):
                pa = pinv[erow[cent[a]]]
                for b in range(cptr[c], cptr[c + 1]):
                    pb = pinv[erow[cent[b]]]
                    if pa > pb:
                        continue
                    lo = Bp[pb]
                    hi = Bp[pb + 1] - 1
                    while lo < hi:                         # Bi[lo] == pa
                        mid = (lo + hi) // 2
                        if Bi[mid] < pa:
                            lo = mid + 1
                        else:
                            hi = mid
                    if lo >= Bp[pb + 1] or Bi[lo] != pa:
                        raise ValueError("schur_products: (Bp, Bi) lacks an entry of "
                                         "the pattern")
                    if u == 0:
                        tp[lo + 1] += 1
                    else:
                        ta[fill[lo]] = <int> cent[a]
                        tb[fill[lo]] = <int> cent[b]
                        fill[lo] += 1
        if u == 0:
            for e in range(nb):
                tp[e + 1] += tp[e]
            fill = np.array(tp[:nb], dtype=np.intp) if nb else np.zeros(1, np.intp)
            ta = np.zeros(max(tp[nb], 1), dtype=np.int32)
            tb = np.zeros(max(tp[nb], 1), dtype=np.int32)
    return np.asarray(tp), np.asarray(ta)[:tp[nb]].copy(), np.asarray(tb)[:tp[nb]].copy()


cdef void schur_values(Py_ssize_t nb, const idx_t* ktp, const int* kta, const int* ktb,
                       const int* ktl, const double* cj, const double* jv,
                       double* Bx) noexcept nogil:
    """Bx[p] = sum over the runs ktp[p] <= t < ktp[p + 1] of cj[kta[t] + c] jv[ktb[t] + c],
    c < ktl[t]: the entries of B = J M^-1 J^T (cj = J M^-1, jv = J) from the product
    map as runs (``SparseSchur._runs``)."""
    cdef Py_ssize_t p, t, c
    cdef double acc
    cdef const double* ca
    cdef const double* cb
    for p in range(nb):
        acc = 0.0
        for t in range(ktp[p], ktp[p + 1]):
            ca = cj + kta[t]
            cb = jv + ktb[t]
            for c in range(ktl[t]):
                acc += ca[c] * cb[c]
        Bx[p] = acc


DEF MAXRUN = 16
DEF DUO = 3


cdef inline void _dots(const Py_ssize_t L, Py_ssize_t t0, Py_ssize_t t1, const int* sge,
                       const int* sga, const int* sgb, const double* cj, const double* jv,
                       double* Bx) noexcept nogil:
    """Bx[sge[t]] = sum_c<L cj[sga[t] + c] jv[sgb[t] + c] for t0 <= t < t1 (inlined
    with a constant L: no data-dependent loop exits)."""
    cdef Py_ssize_t t, c
    cdef double acc
    cdef const double* ca
    cdef const double* cb
    for t in range(t0, t1):
        ca = cj + sga[t]
        cb = jv + sgb[t]
        acc = 0.0
        for c in range(L):
            acc += ca[c] * cb[c]
        Bx[sge[t]] = acc


cdef inline void _dots2(const Py_ssize_t L, Py_ssize_t nd, const int* dde,
                        const int* dda, const int* ddb, const double* cj,
                        const double* jv, double* Bx) noexcept nogil:
    """Bx[dde[t]] = the two runs of length L (cj + dda[2t], jv + ddb[2t]; then cj +
    dda[2t + 1], jv + ddb[2t + 1]) summed in that order, for t < nd."""
    cdef Py_ssize_t t, c
    cdef double acc
    cdef const double* ca
    cdef const double* cb
    for t in range(nd):
        ca = cj + dda[2 * t]
        cb = jv + ddb[2 * t]
        acc = 0.0
        for c in range(L):
            acc += ca[c] * cb[c]
        ca = cj + dda[2 * t + 1]
        cb = jv + ddb[2 * t + 1]
        for c in range(L):
            acc += ca[c] * cb[c]
        Bx[dde[t]] = acc


cdef void schur_values_grouped(const idx_t* sgp, const int* sge, const int* sga,
                               const int* sgb, Py_ssize_t nd, const int* dde,
                               const int* dda, const int* ddb, Py_ssize_t nmr,
                               const int* mre, const idx_t* ktp, const int* kta,
                               const int* ktb, const int* ktl, const double* cj,
                               const double* jv, double* Bx) noexcept nogil:
    """:func:`schur_values` with the entries made of one run grouped by its length L
    (``SparseSchur._runs``: sgp[L]..sgp[L + 1]), each group with a fixed trip count,
    the entries made of two runs of length DUO (``dde``: the spatial joints' rows of
    one joint, coupled through the rotations of both bodies) with a fixed trip count
    too, the others (``mre``) as there: the same terms in the same order."""
    cdef Py_ssize_t L, e, t, c
    cdef double acc
    cdef const double* ca
    cdef const double* cb
    for L in range(1, MAXRUN + 1):
        if sgp[L + 1] == sgp[L]:
            continue
        # the run lengths of spatial models' joint blocks as literals: each call is
        # inlined with a constant trip count (unrolled); any other length generic
        if L == 1:
            _dots(1, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 3:
            _dots(3, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 4:
            _dots(4, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 6:
            _dots(6, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 7:
            _dots(7, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 8:
            _dots(8, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 12:
            _dots(12, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        elif L == 14:
            _dots(14, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
        else:
            _dots(L, sgp[L], sgp[L + 1], sge, sga, sgb, cj, jv, Bx)
    _dots2(DUO, nd, dde, dda, ddb, cj, jv, Bx)
    for e in range(nmr):
        acc = 0.0
        for t in range(ktp[mre[e]], ktp[mre[e] + 1]):
            ca = cj + kta[t]
            cb = jv + ktb[t]
            for c in range(ktl[t]):
                acc += ca[c] * cb[c]
        Bx[mre[e]] = acc


cdef inline double _ldl_row(Py_ssize_t k, const idx_t* Bp, const idx_t* Bi,
                            const double* Bx, const idx_t* rptr, const idx_t* rpat,
                            const idx_t* rpos, const idx_t* Lp, const idx_t* Li,
                            double* Lx, const double* D, const double* Dinv, double* Y,
                            double shift) noexcept nogil:
    """Row k of the up-looking LDL^T (:func:`ldl_numeric`): L's entries of the row
    into Lx, Y left zero; returns the pivot ``D[k]`` (not stored)."""
    cdef Py_ssize_t p, p2, t, i
    cdef double yi, lki, dk
    for p in range(Bp[k], Bp[k + 1]):
        Y[Bi[p]] += Bx[p]
    dk = Y[k] + shift                  # D[k] in a register (no store/load chain)
    Y[k] = 0.0
    for t in range(rptr[k], rptr[k + 1]):
        i = rpat[t]
        yi = Y[i]
        Y[i] = 0.0
        p2 = rpos[t]
        for p in range(Lp[i], p2):
            Y[Li[p]] -= Lx[p] * yi
        lki = yi * Dinv[i] if Dinv != NULL else yi / D[i]
        dk -= lki * yi
        Lx[p2] = lki
    return dk


cdef int ldl_numeric(Py_ssize_t m, const idx_t* Bp, const idx_t* Bi, const double* Bx,
                     const idx_t* rptr, const idx_t* rpat, const idx_t* rpos,
                     const idx_t* Lp, const idx_t* Li, double* Lx, double* D, double* Dinv,
                     double* Y, double shift, double tol) noexcept nogil:
    """Up-looking numeric LDL^T of B + shift I (B: the permuted upper triangle by
    columns, Bp/Bi/Bx) with the row patterns of L precomputed (rptr/rpat/rpos,
    ``SparseSchur._symbolic``; Li its row indices): Lx, D.  Y: a zero work vector of
    m entries, left zero.  Returns 0, or k + 1 when the k-th pivot is not above
    ``tol`` (or is NaN).
    ``Dinv``: NULL, or a buffer that receives ``1 / D`` and is then used for L's
    entries (a product with the pivot's reciprocal instead of a division, rounded
    once more: the equations of motion's solver; the penalty form divides)."""
    cdef Py_ssize_t k
    cdef double dk
    for k in range(m):
        dk = _ldl_row(k, Bp, Bi, Bx, rptr, rpat, rpos, Lp, Li, Lx, D, Dinv, Y, shift)
        D[k] = dk
        if not (dk > tol):                 # also catches NaN
            memset(Y, 0, m * sizeof(double))
            return <int> (k + 1)
        if Dinv != NULL:
            Dinv[k] = 1.0 / dk
    return 0


cdef int ldl_numeric_forward(Py_ssize_t m, const idx_t* Bp, const idx_t* Bi,
                             const double* Bx, const idx_t* rptr, const idx_t* rpat,
                             const idx_t* rpos, const idx_t* rsi, const idx_t* rsq,
                             const idx_t* Lp, const idx_t* Li, double* Lx, double* D,
                             double* Dinv, double* Y, double* w, double* u,
                             double tol) noexcept nogil:
    """:func:`ldl_numeric` (no shift, with ``Dinv``) and, row by row as L's rows are
    formed, the forward solve ``L z = w`` (w <- z) with ``u = z / D`` (times
    ``Dinv``): ``z_k = w_k - sum_i L_ki z_i`` over the row's columns i ascending
    (``rsi``, their places in Lx ``rsq``; ``SparseSchur._symbolic``) — the same
    terms in the same order as the column-oriented solve, which updates w_k column
    by column in ascending order.  Returns 0 or k + 1 as :func:`ldl_numeric`."""
    cdef Py_ssize_t k, t
    cdef double dk, acc
    for k in range(m):
        dk = _ldl_row(k, Bp, Bi, Bx, rptr, rpat, rpos, Lp, Li, Lx, D, Dinv, Y, 0.0)
        D[k] = dk
        if not (dk > tol):                 # also catches NaN
            memset(Y, 0, m * sizeof(double))
            return <int> (k + 1)
        Dinv[k] = 1.0 / dk
        acc = w[k]
        for t in range(rptr[k], rptr[k + 1]):
            acc -= Lx[rsq[t]] * w[rsi[t]]
        w[k] = acc
        u[k] = acc * Dinv[k]
    return 0


cdef class SparseSchur:
    """Compiled numeric phase of the sparse Schur-complement solver.  Built by
    :class:`mbcore.solve.sparse_schur.SparseSchurSolver` from a ``SchurTopology``; all
    buffers are allocated here, once."""

    # attributes (declared in src/mbcore/_ext/_sparse.pxd): J rows used (a subset
    # for redundant constraints) as CSR over positions in jdata (rp, jpos, jcol,
    # rowid); the ordering (permuted index k <-> used row perm[k]); the permuted B,
    # upper triangle by columns, and the product map (Bp, Bi, bdiag, tp, ta, tb, Bx,
    # jv, cj); L (strict lower, by columns), D, elimination tree and work arrays.

    def __cinit__(self, Py_ssize_t n, Py_ssize_t m_full, idx_t[::1] rp not None,
                  idx_t[::1] jpos not None, idx_t[::1] jcol not None,
                  idx_t[::1] rowid not None, idx_t[::1] perm not None,
                  idx_t[::1] Bp not None, idx_t[::1] Bi not None,
                  idx_t[::1] bdiag not None, idx_t[::1] tp not None, int[::1] ta not None,
                  int[::1] tb not None, idx_t[::1] parent not None, idx_t[::1] Lp not None,
                  double pivot_tol=1e-13):
        self._check(n, m_full, rp, jpos, jcol, rowid, perm, Bp, Bi, bdiag, tp, ta, tb,
                    parent, Lp, pivot_tol)
        cdef Py_ssize_t m = rowid.shape[0]
        self.need_jdata = _extent(jpos, 0, -1, "jpos")
        self.jdirect = bool(np.array_equal(np.asarray(jpos), np.arange(jpos.shape[0])))
        self.n = n
        self.m = m
        self.m_full = m_full
        self.rp, self.jpos, self.jcol, self.rowid = rp, jpos, jcol, rowid
        self.perm = perm
        self.Bp, self.Bi, self.bdiag = Bp, Bi, bdiag
        self.tp, self.ta, self.tb = tp, ta, tb
        self.jv = np.zeros(max(jpos.shape[0], 1))
        self.cj = np.zeros(max(jpos.shape[0], 1))
        self.parent, self.Lp = parent, Lp
        self.Bx = np.zeros(max(Bi.shape[0], 1))
        self.Lnz = np.zeros(max(m, 1), dtype=np.intp)
        self.Li = np.zeros(max(Lp[m], 1), dtype=np.intp)
        self.Lx = np.zeros(max(Lp[m], 1))
        self.flag = np.zeros(max(m, 1), dtype=np.intp)
        self.pattern = np.zeros(max(m, 1), dtype=np.intp)
        self.D = np.zeros(max(m, 1))
        self.Dinv = np.zeros(max(m, 1))
        self.Y = np.zeros(max(m, 1))
        self.w = np.zeros(max(m, 1))
        self.u = np.zeros(max(m, 1))
        self.rq = np.zeros(max(m, 1))
        # J by columns, each column's entries in row order (so J^T lam sums the
        # same terms in the same order as row by row): entry numbers and rows
        jc = np.asarray(jcol)
        order = np.argsort(jc, kind="stable")
        erow = np.repeat(np.arange(m, dtype=np.intp), np.diff(np.asarray(rp)[:m + 1]))
        cptr = np.zeros(n + 1, dtype=np.intp)
        cent = np.zeros(max(jc.shape[0], 1), dtype=np.intc)
        crid = np.zeros(max(jc.shape[0], 1), dtype=np.intc)
        if jc.shape[0]:
            if jc.shape[0] >= 2 ** 31 or m_full >= 2 ** 31:     # pragma: no cover
                raise ValueError("SparseSchur: too many non-zeros for 32-bit indices")
            np.cumsum(np.bincount(jc, minlength=n), out=cptr[1:])
            cent[:jc.shape[0]] = order
            crid[:jc.shape[0]] = np.asarray(rowid)[erow[order]]
        self.cptr, self.cent, self.crid = cptr, cent, crid
        self.pivot_tol = pivot_tol
        self.info = 0
        self.failed_row = -1
        self._symbolic()
        self._runs()

    def _runs(self):
        """The product map (tp, ta, tb) as runs: consecutive terms of one entry of B
        whose entry numbers both advance by one (a row pair's entries on the columns
        of one body: 3 (planar) or 7 (spatial) terms) become one run (kta, ktb, ktl),
        so the numeric phase reads one index pair per run and contiguous values — the
        same terms in the same order (bitwise the same sums)."""
        cdef Py_ssize_t nb = self.Bi.shape[0], p, t, r = 0
        cdef idx_t[::1] ktp = np.zeros(nb + 1, dtype=np.intp)
        cdef int[::1] kta = np.zeros(max(self.ta.shape[0], 1), dtype=np.intc)
        cdef int[::1] ktb = np.zeros(max(self.ta.shape[0], 1), dtype=np.intc)
        cdef int[::1] ktl = np.zeros(max(self.ta.shape[0], 1), dtype=np.intc)
        for p in range(nb):
            ktp[p] = r
            for t in range(self.tp[p], self.tp[p + 1]):
                if t > self.tp[p] and self.ta[t] == kta[r - 1] + ktl[r - 1] \
                        and self.tb[t] == ktb[r - 1] + ktl[r - 1]:
                    ktl[r - 1] += 1
                else:
                    kta[r] = self.ta[t]
                    ktb[r] = self.tb[t]
                    ktl[r] = 1
                    r += 1
        ktp[nb] = r
        self.ktp, self.kta, self.ktb, self.ktl = ktp, kta[:max(r, 1)], ktb[:max(r, 1)], \
            ktl[:max(r, 1)]
        # the entries of one run of length L <= MAXRUN grouped by L (in entry order),
        # the others apart
        kp = np.asarray(ktp)
        nr = np.diff(kp)
        lens = np.asarray(self.ktl)[np.minimum(kp[:-1], max(r - 1, 0))] if nb else \
            np.zeros(0, np.intc)
        single = (nr == 1) & (lens <= MAXRUN)
        ent = np.nonzero(single)[0]
        order = ent[np.argsort(lens[ent], kind="stable")]
        sgp = np.zeros(MAXRUN + 2, dtype=np.intp)
        np.cumsum(np.bincount(lens[ent], minlength=MAXRUN + 1)[:MAXRUN + 1], out=sgp[1:])
        first = kp[:-1][order]
        self.sgp = sgp
        self.sge = np.concatenate([order, [0]]).astype(np.intc)
        self.sga = np.concatenate([np.asarray(self.kta)[first], [0]]).astype(np.intc)
        self.sgb = np.concatenate([np.asarray(self.ktb)[first], [0]]).astype(np.intc)
        # the entries of exactly two runs, both of length DUO
        if nb:
            two = nr == 2
            second = np.minimum(kp[:-1] + 1, max(r - 1, 0))
            kl = np.asarray(self.ktl)
            two &= (lens == DUO) & (kl[second] == DUO)
        else:
            two = np.zeros(0, dtype=bool)
        duo = np.nonzero(two)[0]
        runs2 = np.stack([kp[:-1][duo], kp[:-1][duo] + 1], axis=1).reshape(-1)
        self.dde = np.concatenate([duo, [0]]).astype(np.intc)
        self.dda = np.concatenate([np.asarray(self.kta)[runs2], [0, 0]]).astype(np.intc)
        self.ddb = np.concatenate([np.asarray(self.ktb)[runs2], [0, 0]]).astype(np.intc)
        self.mre = np.concatenate([np.nonzero(~single & ~two)[0], [0]]).astype(np.intc)

    @property
    def n_runs(self):
        """Number of runs of the product map (see ``_runs``)."""
        return int(self.ktp[self.Bi.shape[0]])

    def _symbolic(self):
        """The row patterns of L, fixed by the pattern of B: for every row k the
        columns i of its elimination-tree reach in the order the up-looking
        factorisation visits them (rpat, rows at rptr), where L[k, i] goes in L's
        columns (rpos) and L's row indices (Li).  The numeric phase then does no
        tree walk (the same operations in the same order as with the walk)."""
        cdef Py_ssize_t m = self.m, k, p, i, ln, top, t = 0, nl = self.Lp[m]
        cdef idx_t[::1] flag = np.full(max(m, 1), -1, dtype=np.intp)
        cdef idx_t[::1] lnz = np.zeros(max(m, 1), dtype=np.intp)
        cdef idx_t[::1] pattern = np.zeros(max(m, 1), dtype=np.intp)
        self.rptr = np.zeros(m + 1, dtype=np.intp)
        self.rpat = np.zeros(max(nl, 1), dtype=np.intp)
        self.rpos = np.zeros(max(nl, 1), dtype=np.intp)
        for k in range(m):
            top = m
            flag[k] = k
            for p in range(self.Bp[k], self.Bp[k + 1]):
                i = self.Bi[p]
                ln = 0
                while flag[i] != k:
                    pattern[ln] = i
                    ln += 1
                    flag[i] = k
                    i = self.parent[i]
                while ln > 0:
                    top -= 1
                    ln -= 1
                    pattern[top] = pattern[ln]
            while top < m:
                i = pattern[top]
                top += 1
                if t >= nl or self.Lp[i] + lnz[i] >= self.Lp[i + 1]:
                    raise ValueError("SparseSchur: column counts of L do not match")
                self.rpat[t] = i
                self.rpos[t] = self.Lp[i] + lnz[i]
                self.Li[self.Lp[i] + lnz[i]] = k
                lnz[i] += 1
                t += 1
            self.rptr[k + 1] = t
        # every row's entries by ascending column (the forward solve's order)
        rp_ = np.asarray(self.rptr)
        rows = np.repeat(np.arange(m, dtype=np.intp), np.diff(rp_))
        cols = np.asarray(self.rpat)[:rp_[m]]
        srt = np.lexsort((cols, rows))
        self.rsi = np.concatenate([cols[srt], [0]]).astype(np.intp)
        self.rsq = np.concatenate([np.asarray(self.rpos)[:rp_[m]][srt], [0]]).astype(np.intp)

    @staticmethod
    def _check(Py_ssize_t n, Py_ssize_t m_full, rp, jpos, jcol, rowid, perm, Bp, Bi, bdiag,
               tp, ta, tb, parent, Lp, double pivot_tol):
        """The topology is one the numeric phase runs on without leaving its buffers
: every index in range, every pointer array non-decreasing within
        its entries, ``perm`` a permutation, Bi the upper triangle by columns, and
        ``parent``/``Lp`` exactly the elimination tree and (at least) the column
        counts of L that :func:`etree_counts` finds for (Bp, Bi) -- the up-looking
        factorisation walks that tree and writes L's columns at Lp.  O(nnz(J) +
        nnz(B) + products + nnz(L)), once per topology.  ValueError naming the
        argument."""
        cdef Py_ssize_t m = len(rowid), nj = len(jpos), nb = len(Bi)
        _need_dim("SparseSchur: n", n)
        _need_dim("SparseSchur: m_full", m_full)
        _size("SparseSchur: jcol", len(jcol), nj)
        _size("SparseSchur: perm", len(perm), m)
        _size("SparseSchur: parent", len(parent), m)
        _size("SparseSchur: bdiag", len(bdiag), m)
        _size("SparseSchur: ta", len(ta), len(tb))
        if not (pivot_tol >= 0.0 and _b_isfinite(pivot_tol)):
            raise ValueError(f"SparseSchur: pivot_tol = {pivot_tol} must be finite and >= 0")
        _extent(jpos, 0, -1, "SparseSchur: jpos")
        _extent(jcol, 0, n, "SparseSchur: jcol")
        _extent(rowid, 0, m_full, "SparseSchur: rowid")
        _extent(perm, 0, m, "SparseSchur: perm")
        if m and bool(np.any(np.bincount(np.asarray(perm), minlength=m) != 1)):
            raise ValueError("SparseSchur: perm is not a permutation of the used rows")
        _pointers("SparseSchur: rp", rp, m, nj)
        _pointers("SparseSchur: Bp", Bp, m, nb)
        _pointers("SparseSchur: tp", tp, nb, len(ta))
        _pointers("SparseSchur: Lp", Lp, m, max(int(np.asarray(Lp).max(initial=0)), 0))
        _extent(Bi, 0, m, "SparseSchur: Bi")
        _extent(bdiag, 0, nb, "SparseSchur: bdiag")
        _extent(ta, 0, nj, "SparseSchur: ta")
        _extent(tb, 0, nj, "SparseSchur: tb")
        col = np.repeat(np.arange(m, dtype=np.intp), np.diff(np.asarray(Bp)))
        if nb and bool(np.any(np.asarray(Bi) > col)):
            raise ValueError("SparseSchur: Bi holds a row below the diagonal (the upper "
                             "triangle by columns has rows <= column)")
        par, lnz, _ = etree_counts(m, Bp, Bi)
        if not np.array_equal(par, np.asarray(parent)):
            raise ValueError("SparseSchur: parent is not the elimination tree of (Bp, Bi)")
        if bool(np.any(np.diff(np.asarray(Lp)) < lnz)):
            raise ValueError("SparseSchur: Lp leaves fewer entries than the columns of L "
                             "need")
        return 0

    @property
    def nnz_L(self):
        return int(self.Lp[self.m])

    @property
    def nnz_B(self):
        return int(self.Bi.shape[0])

    def diagonal(self):
        """D of the last factorisation (permuted order), a copy."""
        return np.asarray(self.D)[:self.m].copy()

    def b_values(self):
        """B's values of the last solve (the permuted upper triangle, in the order of
        the topology's Bi), a copy."""
        return np.asarray(self.Bx)[:self.Bi.shape[0]].copy()

    def solve(self, const double[::1] jdata not None, const double[::1] minv not None,
              const double[::1] Q not None, const double[::1] gamma not None,
              double[::1] qdd not None, double[::1] lam not None):
        """Accelerations into ``qdd`` (length n) and multipliers into ``lam`` (length
        m_full; rows not used are set to zero).  ``jdata``: the System's Jacobian
        data buffer.  Returns 0, or k + 1 when the k-th pivot (permuted order) failed
        the relative test; then ``failed_row`` is that constraint row and qdd/lam are
        not valid."""
        if qdd.shape[0] != self.n or Q.shape[0] != self.n or minv.shape[0] != self.n \
                or lam.shape[0] != self.m_full or gamma.shape[0] != self.m_full:
            raise ValueError(f"SparseSchur.solve: qdd, Q, minv need n = {self.n}, lam, "
                             f"gamma m_full = {self.m_full} entries; got {qdd.shape[0]}, "
                             f"{Q.shape[0]}, {minv.shape[0]}, {lam.shape[0]}, "
                             f"{gamma.shape[0]} (array sizes do not match (n, m))")
        _need("SparseSchur.solve: jdata", jdata.shape[0], self.need_jdata)
        cdef int r
        with nogil:
            r = self._solve(jdata, minv, Q, gamma, qdd, lam)
        self.info = r
        return r

    cdef int _solve(self, const double[::1] jdata, const double[::1] minv,
                    const double[::1] Q, const double[::1] gamma, double[::1] qdd,
                    double[::1] lam) noexcept nogil:
        """:meth:`solve` without checks: J's used entries are jdata's first nnz
        (``jdirect``) or gathered into a contiguous copy first."""
        cdef Py_ssize_t p, nj = self.jpos.shape[0]
        cdef const idx_t* jpos = &self.jpos[0]
        cdef const double* jd = &jdata[0]
        cdef double* jw
        cdef double power
        if self.jdirect:
            return self._solve_used(jd, &minv[0], &Q[0], &gamma[0], &qdd[0], &lam[0],
                                    NULL, &power)
        jw = &self.jv[0]
        for p in range(nj):
            jw[p] = jd[jpos[p]]
        return self._solve_used(jw, &minv[0], &Q[0], &gamma[0], &qdd[0], &lam[0], NULL,
                                &power)

    cdef int _solve_used(self, const double* jv, const double* mv, const double* Qp,
                         const double* gamma, double* qx, double* lx, const double* vel,
                         double* power) noexcept nogil:
        """The numeric phase on J's used entries ``jv`` (in the topology's order: row
        by row, ``jpos``).  ``vel`` (optional, n entries): also ``power = (J^T lam) .
        vel`` (= lam . (J vel)), accumulated while forming J^T lam."""
        # raw pointers: the loops below store doubles, which (without strict
        # aliasing) would otherwise reload every memoryview's data pointer
        cdef Py_ssize_t n = self.n, m = self.m, i, k, p, c
        cdef double acc, bmax, yi, tol, x, P = 0.0
        cdef int r
        cdef const idx_t* jcol = &self.jcol[0]
        cdef const idx_t* rp = &self.rp[0]
        cdef const idx_t* perm = &self.perm[0]
        cdef const idx_t* rowid = &self.rowid[0]
        cdef const idx_t* bdiag = &self.bdiag[0]
        cdef const idx_t* Lp = &self.Lp[0]
        cdef const idx_t* Li = &self.Li[0]
        cdef const double* Lx = &self.Lx[0]
        cdef const double* Dinv = &self.Dinv[0]
        cdef const double* Bx = &self.Bx[0]
        cdef double* w = &self.w[0]
        cdef double* cj = &self.cj[0]
        cdef double* rq = &self.rq[0]
        cdef const idx_t* cptr = &self.cptr[0]
        cdef const int* cent = &self.cent[0]
        cdef const int* crid = &self.crid[0]
        # ---- 1. cj = J M^-1 and, row by row, rq = J M^-1 Q; B values (permuted
        #        upper triangle) as sums of cj[a] jv[b]
        for i in range(m):
            acc = 0.0
            for p in range(rp[i], rp[i + 1]):
                c = jcol[p]
                x = jv[p] * mv[c]
                cj[p] = x
                acc += x * Qp[c]
            rq[i] = acc
        schur_values_grouped(&self.sgp[0], &self.sge[0], &self.sga[0], &self.sgb[0],
                             self.dde.shape[0] - 1, &self.dde[0], &self.dda[0],
                             &self.ddb[0], self.mre.shape[0] - 1, &self.mre[0], &self.ktp[0],
                             &self.kta[0], &self.ktb[0], &self.ktl[0], cj, jv,
                             &self.Bx[0])
        bmax = 0.0
        for k in range(m):
            if Bx[bdiag[k]] > bmax:
                bmax = Bx[bdiag[k]]
        tol = self.pivot_tol * bmax
        # ---- 2. w = P (gamma - J M^-1 Q); numeric LDL^T (up-looking; the row
        #        patterns of L precomputed by _symbolic in the order of the
        #        elimination-tree reach) with L z = w row by row, u = z / D
        for k in range(m):
            i = perm[k]
            w[k] = gamma[rowid[i]] - rq[i]
        r = ldl_numeric_forward(m, &self.Bp[0], &self.Bi[0], &self.Bx[0], &self.rptr[0],
                                &self.rpat[0], &self.rpos[0], &self.rsi[0], &self.rsq[0],
                                &self.Lp[0], &self.Li[0], &self.Lx[0], &self.D[0],
                                &self.Dinv[0], &self.Y[0], &self.w[0], &self.u[0], tol)
        if r:
            self.failed_row = rowid[perm[r - 1]]
            return r
        self.failed_row = -1
        # ---- 3. L^T x = u
        w = &self.u[0]
        for k in range(m - 1, -1, -1):
            acc = w[k]
            for p in range(Lp[k], Lp[k + 1]):
                acc -= Lx[p] * w[Li[p]]
            w[k] = acc
        # ---- lam (zero on unused rows), qdd = M^-1 (Q + J^T lam)
        if m != self.m_full:
            for i in range(self.m_full):
                lx[i] = 0.0
        for k in range(m):
            lx[rowid[perm[k]]] = w[k]
        if vel == NULL:
            for c in range(n):             # by columns: no chain of stores to qdd
                acc = 0.0
                for p in range(cptr[c], cptr[c + 1]):
                    acc += jv[cent[p]] * lx[crid[p]]
                qx[c] = (Qp[c] + acc) * mv[c]
        else:
            for c in range(n):
                acc = 0.0
                for p in range(cptr[c], cptr[c + 1]):
                    acc += jv[cent[p]] * lx[crid[p]]
                qx[c] = (Qp[c] + acc) * mv[c]
                P += acc * vel[c]
        power[0] = P
        return 0
