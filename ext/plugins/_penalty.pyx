# cython: language_level=3
"""Compiled right-hand side of the penalty (augmented Lagrangian) formulation
(``mbplugins._ext._penalty``).

:class:`CompiledPenalty`: the right-hand side and its post-step projections
(``c_project``, run by the compiled loop as ``c_post_step``), dense or sparse (the
symbolic analysis of the System's ``SparseSchur``).  NumPy reference: the Python
path of ``mbplugins.formulations.penalty``."""
from libc.math cimport fabs, isfinite, sqrt, INFINITY
from libc.string cimport memcpy

include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport SparseSchur, idx_t, ldl_numeric, schur_values

import numpy as np

include "_schur.pxi"
include "_eval_status.pxi"
include "_projected.pxi"
include "_spatial_mass.pxi"


# ----------------------------------------------------------------------------------
# the penalty (augmented Lagrangian) formulation: right-hand side and projections
# (NumPy reference: mbplugins.formulations.penalty.Penalty, Python path)
# ----------------------------------------------------------------------------------
cdef inline double _maxabs(const double* v, Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t i
    cdef double r = 0.0, a
    for i in range(k):
        a = fabs(v[i])
        if a > r or a != a:             # NaN propagates (as np.max)
            r = a
    return r


cdef double _tridiag_max(Py_ssize_t k, const double* a, const double* b) noexcept nogil:
    """The largest eigenvalue of the symmetric tridiagonal matrix (diagonal a[0:k],
    off-diagonal b[0:k-1]) by bisection on Sturm counts."""
    cdef Py_ssize_t i, it
    cdef double lo = a[0], hi, x, d, r, cnt
    hi = a[0] + (fabs(b[0]) if k > 1 else 0.0)
    for i in range(k):
        if a[i] > lo:
            lo = a[i]
        r = a[i]
        if i > 0:
            r += fabs(b[i - 1])
        if i < k - 1:
            r += fabs(b[i])
        if r > hi:
            hi = r
    for it in range(200):
        x = 0.5 * (lo + hi)
        if not (lo < x < hi):
            break
        # number of eigenvalues below x: negative pivots of T - x I
        cnt = 0
        d = a[0] - x
        if d < 0.0:
            cnt += 1
        for i in range(1, k):
            if d == 0.0:
                d = 1e-300
            d = a[i] - x - b[i - 1] * b[i - 1] / d
            if d < 0.0:
                cnt += 1
        if cnt >= k:
            hi = x
        else:
            lo = x
    return hi


cdef class CompiledPenalty(CompiledODE):
    """``CompiledPenalty(evaluator, force_evaluator, functions, n, m, jdata, qgrav,
    mass, holonomic, alpha, xi, omega, iterations, tolerance, projection,
    singular_band, projection_tolerance, sparse_solver=None)``: the right-hand side
    ``y = [q; qd; W] -> [qd; qdd; W']`` and the post-step projections of the penalty
    formulation (``mbplugins.formulations.penalty``) for planar systems with a positive
    diagonal mass matrix, in C without allocation; with ``spatial`` (the System's
    ``mbcore.system.mass.SpatialMass``) for spatial bodies in its transformed columns
    (``J^ = J T``, ``Q^ = T^T Q``, ``M^-1 = T D T^T``, D diagonal: the iteration below
    with J^, D, Q^, then ``qdd = T qdd^``); ``mass`` is then the projections' diagonal
    metric (the coordinate weights).

    The augmented Lagrangian iteration ``(M + a J^T J) qdd_k = Q + J^T (lam_k + a
    gs)``, ``lam_{k+1} = lam_k - a (J qdd_k - gs)`` is evaluated in its Schur form
    (the same iterates: with ``lam_{k+1}`` as unknown, ``M qdd_k = Q + J^T lam_{k+1}``
    and ``J qdd_k = gs + (lam_k - lam_{k+1}) / a``):

        (B + I/a) lam_{k+1} = gs + lam_k / a - J M^-1 Q,   B = J M^-1 J^T
        qdd_k = M^-1 (Q + J^T lam_{k+1})

    ``B + I/a`` is positive definite at every configuration (also where J loses
    rank) and its factor serves every iteration; the projections use the same
    matrix: ``dq = -M^-1 J^T (B + I/a)^-1 Phi`` (= ``-(M + a J^T J)^-1 a J^T Phi``).
    Dense Jacobians: B assembled and factored by Cholesky (unblocked up to 40 rows,
    LAPACK above); sparse: the symbolic analysis of the System's ``SparseSchur``
    (pattern of B, fill-reducing ordering, elimination tree, product map) with this
    object's own numeric buffers (LDL^T along the elimination tree).

    The singular band of the projection (the smallest eigenvalue of B below
    ``singular_band`` times the largest, i.e. of the squared singular values of ``J
    M^-1/2``) is decided without an eigenvalue decomposition: by Sylvester's law of
    inertia ``lambda_min(B) <= tau`` iff the LDL^T of ``B - tau I`` has a
    non-positive pivot; ``tau`` from bounds of ``lambda_max`` (the largest diagonal
    entry, the largest Gershgorin row sum) and, only when these two disagree,
    ``lambda_max`` by Lanczos with full reorthogonalisation."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t m, nf
    cdef double[::1] fv, jdata, gam, phi, nu, Q, qgrav, minv, hol, lam, qdd, qddp, gs
    # the Jacobian data and diagonal M^-1 the linear algebra uses: the System's J and
    # the coordinate weights (projections, planar evaluations), or for spatial
    # bodies the transformed J^ = J T and D (evaluations; mbcore.system.mass)
    cdef double* ja
    cdef double* mi
    cdef readonly Py_ssize_t nsp
    cdef idx_t[:, ::1] sp_pidx, sp_pos
    cdef idx_t[::1] sp_bod
    cdef double[:, :, ::1] sp_J, sp_V
    cdef double[:, ::1] sp_lam, sp_E
    cdef double[::1] sp_alpha, jhat, minv_hat
    cdef double[::1] cvec, jqd, r, x, pq, pqd, rs
    cdef double* fvp
    cdef ErrInfo err
    cdef readonly double alpha, xi, omega, tolerance, singular_band
    cdef public double projection_tolerance
    cdef readonly int iterations
    cdef readonly bint sparse, projects, jv_alias
    cdef readonly double power
    #: the compiled loop runs this object's post step (``c_project``) itself
    handles_post_step = True
    #: statistics (as the Python path's): evaluations, multiplier iterations,
    #: evaluations that stopped at ``iterations``, projections and those skipped in
    #: the singular band (counted when asked), Lanczos runs of the band test
    cdef readonly long evaluations, multiplier_iterations, unconverged_evaluations
    cdef readonly long projections, skipped_projections, lanczos_runs
    # dense: C = J M^-1 (m n), B (m m), its factor L (m m)
    cdef double[::1] C, B, L
    # sparse: the symbolic analysis of S; own numeric buffers
    cdef SparseSchur S
    cdef const idx_t* s_rp
    cdef const idx_t* s_jpos
    cdef const idx_t* s_jcol
    cdef const idx_t* s_perm
    cdef const idx_t* s_Bp
    cdef const idx_t* s_Bi
    cdef const idx_t* s_bdiag
    cdef const idx_t* s_ktp
    cdef const idx_t* s_parent
    cdef const idx_t* s_Lp
    cdef const int* s_kta
    cdef const int* s_ktb
    cdef const int* s_ktl
    cdef Py_ssize_t s_nj, s_nb
    cdef double[::1] jv, cj, Bx, Lx, D, Y, w, dq
    cdef idx_t[::1] Li, rptr, rpat, rpos
    # Lanczos (band test)
    cdef Py_ssize_t kmax
    cdef double[:, ::1] V
    cdef double[::1] la, lb, lw

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  double[::1] mass not None, double[::1] holonomic not None,
                  double alpha, double xi, double omega, int iterations,
                  double tolerance, bint projection, double singular_band,
                  double projection_tolerance, SparseSchur sparse_solver=None,
                  spatial=None):
        cdef Py_ssize_t i, nj
        cdef SparseSchur S
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledPenalty: the evaluators belong to another system")
        if qgrav.shape[0] != n or mass.shape[0] != n or holonomic.shape[0] != m:
            raise ValueError("CompiledPenalty: buffer sizes do not match (n, m)")
        if m > n:
            raise ValueError("CompiledPenalty: more constraint rows than coordinates")
        for i in range(n):
            if not (mass[i] > 0.0 and isfinite(mass[i])):
                raise ValueError("CompiledPenalty: the mass matrix needs positive entries")
        if not (alpha > 0.0 and isfinite(alpha)) or iterations < 1 or xi < 0.0 \
                or omega < 0.0 or singular_band < 0.0 or not (tolerance > 0.0) \
                or not (projection_tolerance > 0.0):
            raise ValueError("CompiledPenalty: invalid settings")
        self.sparse = sparse_solver is not None
        if self.sparse:
            S = sparse_solver
            if m == 0:
                raise ValueError("CompiledPenalty: a sparse solver needs constraint rows")
            nj = S.jpos.shape[0]
            if S.n != n or S.m_full != m or S.m != m or S.rp.shape[0] != m + 1 \
                    or S.Bp.shape[0] != m + 1 or S.Lp.shape[0] != m + 1 \
                    or S.perm.shape[0] != m or S.parent.shape[0] != m \
                    or S.bdiag.shape[0] != m or S.tp.shape[0] != S.Bi.shape[0] + 1:
                raise ValueError("CompiledPenalty: sparse solver does not match (n, m)")
            for i in range(m):
                if S.rowid[i] != i or not (0 <= S.perm[i] < m) \
                        or not (-1 <= S.parent[i] < m) \
                        or not (0 <= S.bdiag[i] < S.Bi.shape[0]):
                    raise ValueError("CompiledPenalty: sparse solver rows or ordering "
                                     "out of range")
            if S.rp[m] != nj or nj > jdata.shape[0]:
                raise ValueError("CompiledPenalty: sparse pattern does not match")
            for i in range(nj):
                if not (0 <= S.jpos[i] < jdata.shape[0]) or not (0 <= S.jcol[i] < n):
                    raise ValueError("CompiledPenalty: Jacobian positions out of range")
            for i in range(S.Bi.shape[0]):
                if not (0 <= S.Bi[i] < m):
                    raise ValueError("CompiledPenalty: pattern of B out of range")
            for i in range(S.ta.shape[0]):
                if not (0 <= S.ta[i] < nj and 0 <= S.tb[i] < nj):
                    raise ValueError("CompiledPenalty: product map out of range")
            if S.tp[S.Bi.shape[0]] != S.ta.shape[0] or S.tb.shape[0] != S.ta.shape[0] \
                    or S.tp[0] != 0 or S.rp[0] != 0:
                raise ValueError("CompiledPenalty: product map does not match")
            for i in range(S.Bi.shape[0]):
                if S.tp[i] > S.tp[i + 1]:
                    raise ValueError("CompiledPenalty: product map does not match")
            for i in range(m):
                if S.rp[i] > S.rp[i + 1]:
                    raise ValueError("CompiledPenalty: sparse pattern does not match")
            self.S = S
            self.s_nj = nj
            self.s_nb = S.Bi.shape[0]
            self.s_rp, self.s_jpos, self.s_jcol = &S.rp[0], &S.jpos[0], &S.jcol[0]
            self.s_perm, self.s_Bp, self.s_Bi = &S.perm[0], &S.Bp[0], &S.Bi[0]
            self.s_bdiag, self.s_parent = &S.bdiag[0], &S.parent[0]
            self.s_Lp = &S.Lp[0]
            self.s_ktp, self.s_kta, self.s_ktb, self.s_ktl = (&S.ktp[0], &S.kta[0],
                                                              &S.ktb[0], &S.ktl[0])
            # the used entries in the order of the System's buffer (all rows used,
            # CSR in order): jv is the buffer itself, no copy per evaluation
            self.jv_alias = nj > 0 and spatial is None and bool(
                np.array_equal(np.asarray(S.jpos), np.arange(nj)))
            self.jv = jdata if self.jv_alias else np.zeros(max(nj, 1))
            self.cj = np.zeros(max(nj, 1))
            self.Bx = np.zeros(max(S.Bi.shape[0], 1))
            self.Lx = np.zeros(max(S.Lp[m], 1))
            # L's row patterns: the solver's own (fixed by the pattern of B,
            # SparseSchur._symbolic); the numeric buffers are this object's
            self.Li, self.rptr, self.rpat, self.rpos = S.Li, S.rptr, S.rpat, S.rpos
            self.D = np.zeros(max(m, 1))
            self.Y = np.zeros(max(m, 1))
            self.w = np.zeros(max(m, 1))
            self.C = np.zeros(1)
            self.B = np.zeros(1)
            self.L = np.zeros(1)
        else:
            if jdata.shape[0] < m * n:
                raise ValueError("CompiledPenalty: buffer sizes do not match (n, m)")
            self.C = np.zeros(max(m * n, 1))
            self.B = np.zeros(max(m * m, 1))
            self.L = np.zeros(max(m * m, 1))
            self.jv, self.cj, self.Bx, self.Lx = (np.zeros(1), np.zeros(1), np.zeros(1),
                                                  np.zeros(1))
            self.D, self.Y, self.w = np.zeros(1), np.zeros(1), np.zeros(max(m, 1))
            self.Li, self.rptr, self.rpat, self.rpos = (np.zeros(1, dtype=np.intp)
                                                        for _ in range(4))
        self.ev = evaluator
        self.fe = force_evaluator
        self.fn = functions
        self.n = n
        self.m = m
        self.cartesian = True
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata = jdata
        self.qgrav = qgrav
        self.minv = 1.0 / np.asarray(mass, dtype=np.float64)
        self.ja = &self.jdata[0]
        self.mi = &self.minv[0]
        self.nsp = 0
        self.jhat = self.minv_hat = np.zeros(1)
        if spatial is not None:
            # the spatial mass blocks (own copies; minv_hat: the translations' 1/m,
            # the p columns overwritten by D at every evaluation)
            (self.nsp, self.sp_pidx, self.sp_pos, self.sp_bod, self.sp_J, self.sp_V,
             self.sp_lam, self.sp_alpha, self.sp_E, self.minv_hat) = spatial_blocks(
                spatial, n, jdata.shape[0], "CompiledPenalty")
            self.jhat = np.zeros(jdata.shape[0])
        self.hol = np.array(holonomic, dtype=np.float64)
        k = max(m, 1)
        self.gam, self.phi, self.nu, self.lam = (np.zeros(k), np.zeros(k), np.zeros(k),
                                                 np.zeros(k))
        self.gs, self.cvec, self.jqd, self.r, self.x, self.rs = (
            np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k))
        self.Q, self.qdd, self.qddp = np.zeros(max(n, 1)), np.zeros(max(n, 1)), \
            np.zeros(max(n, 1))
        self.pq, self.pqd, self.dq = np.zeros(max(n, 1)), np.zeros(max(n, 1)), \
            np.zeros(max(n, 1))
        self.kmax = min(m, 80)
        self.V = np.zeros((max(self.kmax + 1, 1), k))
        self.la, self.lb, self.lw = np.zeros(self.kmax + 1), np.zeros(self.kmax + 1), \
            np.zeros(k)
        self.alpha, self.xi, self.omega = alpha, xi, omega
        self.iterations = iterations
        self.tolerance = tolerance
        self.projects = projection
        self.post_step = projection     # the compiled loop calls c_post_step
        self.singular_band = singular_band
        self.projection_tolerance = projection_tolerance
        self.nfev = 0
        self.status = OK

    # ------------------------------------------------------------ linear algebra
    cdef int c_load(self, double t, const double* q) noexcept nogil:
        """J at (q, t) into the System's buffer (and the sparse entries' copies jv,
        cj = J M^-1).  Returns OK, or CONSTRAINT_FAILED (a plugin kernel refused an
        element)."""
        cdef Py_ssize_t p
        memcpy(self.ev.qx, q, self.n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0:
            return CONSTRAINT_FAILED
        cdef double* jv = &self.jv[0]
        cdef double* cj = &self.cj[0]
        cdef const double* jd = &self.jdata[0]
        cdef const double* minv = &self.minv[0]
        self.ja = &self.jdata[0]
        self.mi = &self.minv[0]
        if self.sparse:
            if self.jv_alias:
                for p in range(self.s_nj):
                    cj[p] = jv[p] * minv[self.s_jcol[p]]
            else:
                for p in range(self.s_nj):
                    jv[p] = jd[self.s_jpos[p]]
                    cj[p] = jv[p] * minv[self.s_jcol[p]]
        return OK

    cdef void c_transform(self, const double* q, const double* qd,
                          double* Q) noexcept nogil:
        """Spatial bodies, after :meth:`c_load`: Q <- T^T (Q - inertial forces), and
        the linear algebra switched to J^ = J T and D (mbcore.system.mass)."""
        cdef Py_ssize_t p
        cdef double* jv = &self.jv[0]
        cdef double* cj = &self.cj[0]
        _spatial_forward(self.nsp, &self.sp_pidx[0, 0], &self.sp_J[0, 0, 0],
                         &self.sp_V[0, 0, 0], &self.sp_lam[0, 0], &self.sp_alpha[0],
                         &self.sp_E[0, 0], &self.minv_hat[0], q, qd, Q)
        _spatial_jacobian(self.sp_pos.shape[0], &self.sp_pos[0, 0], &self.sp_bod[0],
                          &self.sp_E[0, 0], &self.jdata[0], &self.jhat[0],
                          self.jhat.shape[0])
        self.ja = &self.jhat[0]
        self.mi = &self.minv_hat[0]
        if self.sparse:
            for p in range(self.s_nj):
                jv[p] = self.ja[self.s_jpos[p]]
                cj[p] = jv[p] * self.mi[self.s_jcol[p]]

    cdef void c_jv(self, const double* v, double* out) noexcept nogil:
        """out = J v (m)."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double acc
        cdef const double* J = self.ja
        cdef const double* jv = &self.jv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        if self.sparse:
            for i in range(self.m):
                acc = 0.0
                for p in range(rp[i], rp[i + 1]):
                    acc += jv[p] * v[jc[p]]
                out[i] = acc
            return
        for i in range(self.m):
            acc = 0.0
            for j in range(n):
                acc += J[i * n + j] * v[j]
            out[i] = acc

    cdef void c_jv2(self, const double* v, const double* u, double* out,
                    double* outu) noexcept nogil:
        """out = J v, outu = J u in one pass."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double acc, accu, a
        cdef const double* J = self.ja
        cdef const double* jv = &self.jv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        for i in range(self.m):
            acc = 0.0
            accu = 0.0
            if self.sparse:
                for p in range(rp[i], rp[i + 1]):
                    a = jv[p]
                    acc += a * v[jc[p]]
                    accu += a * u[jc[p]]
            else:
                for j in range(n):
                    a = J[i * n + j]
                    acc += a * v[j]
                    accu += a * u[j]
            out[i] = acc
            outu[i] = accu

    cdef double c_absjv(self, const double* v) noexcept nogil:
        """max_i sum_j |J_ij| |v_j|."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double acc, best = 0.0
        cdef const double* J = self.ja
        cdef const double* jv = &self.jv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        for i in range(self.m):
            acc = 0.0
            if self.sparse:
                for p in range(rp[i], rp[i + 1]):
                    acc += fabs(jv[p]) * fabs(v[jc[p]])
            else:
                for j in range(n):
                    acc += fabs(J[i * n + j]) * fabs(v[j])
            if acc > best or acc != acc:
                best = acc
        return best

    cdef void c_minv_jt(self, const double* base, const double* lam,
                        double* out) noexcept nogil:
        """out = M^-1 (base + J^T lam) (base NULL: 0)."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double li
        cdef const double* J = self.ja
        cdef const double* jv = &self.jv[0]
        cdef const double* minv = self.mi
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        for j in range(n):
            out[j] = base[j] if base != NULL else 0.0
        for i in range(self.m):
            li = lam[i]
            if self.sparse:
                for p in range(rp[i], rp[i + 1]):
                    out[jc[p]] += jv[p] * li
            else:
                for j in range(n):
                    out[j] += J[i * n + j] * li
        for j in range(n):
            out[j] *= minv[j]

    cdef void c_assemble(self) noexcept nogil:
        """B = J M^-1 J^T for the J loaded (dense: full m x m; sparse: the permuted
        upper triangle by the product map)."""
        cdef Py_ssize_t i, j, k, p, t, n = self.n, m = self.m
        cdef double acc
        cdef const double* J = self.ja
        cdef double* C = &self.C[0]
        cdef double* B = &self.B[0]
        cdef const double* minv = self.mi
        cdef const double* jv = &self.jv[0]
        cdef const double* cj = &self.cj[0]
        cdef double* Bx = &self.Bx[0]
        if self.sparse:
            # the solver's product map as runs (SparseSchur._runs)
            schur_values(self.s_nb, self.s_ktp, self.s_kta, self.s_ktb, self.s_ktl, cj,
                         jv, Bx)
            return
        for i in range(m):
            for j in range(n):
                C[i * n + j] = J[i * n + j] * minv[j]
        for i in range(m):
            for k in range(i, m):
                acc = 0.0
                for j in range(n):
                    acc += C[i * n + j] * J[k * n + j]
                B[i * m + k] = acc
                B[k * m + i] = acc

    cdef Py_ssize_t c_factor(self, double shift) noexcept nogil:
        """Factor B + shift I (Cholesky / LDL^T).  0, or k + 1 when the k-th pivot is
        not positive (also NaN): then B + shift I is not positive definite
        (Sylvester)."""
        cdef Py_ssize_t m = self.m, i, j, k, p, p2, top, ln
        cdef double d, acc, yi, lki
        cdef double* L = &self.L[0]
        cdef int mm = <int> m, info = 0
        cdef char uplo = b'U'
        if m == 0:
            return 0
        if not self.sparse:
            memcpy(L, &self.B[0], m * m * sizeof(double))
            for i in range(m):
                L[i * m + i] += shift
            if m > SCHUR_SMALL_M:
                dpotrf(&uplo, &mm, L, &mm, &info)
                if info != 0:
                    return info if info > 0 else 1
                for i in range(m):
                    if not (L[i * m + i] > 0.0):
                        return i + 1
                return 0
            for j in range(m):           # L L^T, lower triangle row-major
                d = L[j * m + j]
                for k in range(j):
                    d -= L[j * m + k] * L[j * m + k]
                if not (d > 0.0):
                    return j + 1
                d = sqrt(d)
                L[j * m + j] = d
                for i in range(j + 1, m):
                    acc = L[i * m + j]
                    for k in range(j):
                        acc -= L[i * m + k] * L[j * m + k]
                    L[i * m + j] = acc / d
            return 0
        # sparse: the up-looking LDL^T of SparseSchur (ldl_numeric) with its row
        # patterns of L, on this object's numeric buffers
        return ldl_numeric(m, self.s_Bp, self.s_Bi, &self.Bx[0], &self.rptr[0],
                           &self.rpat[0], &self.rpos[0], self.s_Lp, &self.Li[0],
                           &self.Lx[0], &self.D[0], NULL, &self.Y[0], shift, 0.0)

    cdef void c_solve(self, double* b) noexcept nogil:
        """b <- (B + shift I)^-1 b with the last (successful) factor."""
        cdef Py_ssize_t m = self.m, i, k, p
        cdef double acc, yi
        cdef double* L = &self.L[0]
        cdef int mm = <int> m, nrhs = 1, info = 0
        cdef char uplo = b'U'
        cdef double* w = &self.w[0]
        if m == 0:
            return
        if not self.sparse:
            if m > SCHUR_SMALL_M:
                dpotrs(&uplo, &mm, &nrhs, L, &mm, b, &mm, &info)
                return
            for i in range(m):
                acc = b[i]
                for k in range(i):
                    acc -= L[i * m + k] * b[k]
                b[i] = acc / L[i * m + i]
            for i in range(m - 1, -1, -1):
                acc = b[i]
                for k in range(i + 1, m):
                    acc -= L[k * m + i] * b[k]
                b[i] = acc / L[i * m + i]
            return
        cdef const idx_t* perm = self.s_perm
        cdef const idx_t* Lp = self.s_Lp
        cdef const idx_t* Li = &self.Li[0]
        cdef const double* Lx = &self.Lx[0]
        cdef const double* D = &self.D[0]
        for k in range(m):
            w[k] = b[perm[k]]
        for k in range(m):
            yi = w[k]
            for p in range(Lp[k], Lp[k + 1]):
                w[Li[p]] -= Lx[p] * yi
        for k in range(m):
            w[k] /= D[k]
        for k in range(m - 1, -1, -1):
            acc = w[k]
            for p in range(Lp[k], Lp[k + 1]):
                acc -= Lx[p] * w[Li[p]]
            w[k] = acc
        for k in range(m):
            b[perm[k]] = w[k]

    cdef void c_bmul(self, const double* v, double* out) noexcept nogil:
        """out = B v (the assembled B; sparse: in the permuted order of Bx)."""
        cdef Py_ssize_t m = self.m, i, k, p
        cdef double acc
        if not self.sparse:
            for i in range(m):
                acc = 0.0
                for k in range(m):
                    acc += self.B[i * m + k] * v[k]
                out[i] = acc
            return
        for i in range(m):
            out[i] = 0.0
        for k in range(m):
            for p in range(self.s_Bp[k], self.s_Bp[k + 1]):
                i = self.s_Bi[p]
                out[i] += self.Bx[p] * v[k]
                if i != k:
                    out[k] += self.Bx[p] * v[i]

    cdef double c_lambda_max(self) noexcept nogil:
        """The largest eigenvalue of the assembled B: Lanczos with full
        reorthogonalisation from a fixed pseudo-random start, until the largest
        Ritz value is stationary (to 1e-14) twice or the Krylov space is exhausted."""
        cdef Py_ssize_t m = self.m, j, i, l, kk = 0
        cdef double nrm = 0.0, a, b, th = 0.0, thp = -1.0, c
        cdef int still = 0
        cdef unsigned long long s = 88172645463325252ULL
        cdef double* w = &self.lw[0]
        self.lanczos_runs += 1
        for i in range(m):                       # xorshift: no symmetry of the model
            s ^= s << 13
            s ^= s >> 7
            s ^= s << 17
            self.V[0, i] = <double> (s >> 11) / 9007199254740992.0 - 0.5
            nrm += self.V[0, i] * self.V[0, i]
        nrm = sqrt(nrm)
        for i in range(m):
            self.V[0, i] /= nrm
        for j in range(self.kmax):
            self.c_bmul(&self.V[j, 0], w)
            a = 0.0
            for i in range(m):
                a += self.V[j, i] * w[i]
            self.la[j] = a
            for l in range(j + 1):               # full reorthogonalisation (twice)
                c = 0.0
                for i in range(m):
                    c += self.V[l, i] * w[i]
                for i in range(m):
                    w[i] -= c * self.V[l, i]
            for l in range(j + 1):
                c = 0.0
                for i in range(m):
                    c += self.V[l, i] * w[i]
                for i in range(m):
                    w[i] -= c * self.V[l, i]
            b = 0.0
            for i in range(m):
                b += w[i] * w[i]
            b = sqrt(b)
            self.lb[j] = b
            kk = j + 1
            th = _tridiag_max(kk, &self.la[0], &self.lb[0])
            if fabs(th - thp) <= 1e-14 * fabs(th):
                still += 1
            else:
                still = 0
            if still >= 2 or b <= 1e-14 * fabs(th) or kk == m or j + 1 >= self.kmax:
                break
            thp = th
            for i in range(m):
                self.V[j + 1, i] = w[i] / b
        return th

    cdef bint c_near_singular(self) noexcept nogil:
        """The loaded configuration is in the singular band: lambda_min(B) < band
        lambda_max(B) (the Python path: the singular values of J M^-1/2).  Needs B
        assembled; leaves a factor of B - tau I behind."""
        cdef Py_ssize_t m = self.m, i, k, p
        cdef double band = self.singular_band, lo = 0.0, hi = 0.0, v
        cdef double* rs = &self.rs[0]
        if band <= 0.0 or m == 0:
            return False
        # bounds of lambda_max: the largest diagonal entry <= it <= the largest
        # Gershgorin row sum
        if not self.sparse:
            for i in range(m):
                v = 0.0
                for k in range(m):
                    v += fabs(self.B[i * m + k])
                if v > hi:
                    hi = v
                if self.B[i * m + i] > lo:
                    lo = self.B[i * m + i]
        else:
            for i in range(m):
                rs[i] = 0.0
            for k in range(m):
                for p in range(self.s_Bp[k], self.s_Bp[k + 1]):
                    i = self.s_Bi[p]
                    rs[k] += fabs(self.Bx[p])
                    if i != k:
                        rs[i] += fabs(self.Bx[p])
                if self.Bx[self.s_bdiag[k]] > lo:
                    lo = self.Bx[self.s_bdiag[k]]
            for i in range(m):
                if rs[i] > hi:
                    hi = rs[i]
        if not (hi > 0.0):
            return True                      # J = 0 (or not finite)
        if self.c_factor(-band * hi) == 0:
            return False                     # lambda_min > band hi >= band lambda_max
        if self.c_factor(-band * lo) != 0:
            return True                      # lambda_min <= band lo <= band lambda_max
        return self.c_factor(-band * self.c_lambda_max()) != 0

    # ------------------------------------------------------------------ C level
    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2n+1] = [qd; qdd; W'] at (t, y[0:2n]).  Returns a status code."""
        cdef Py_ssize_t n = self.n, m = self.m, i, k
        cdef const double* q = y
        cdef const double* qd = y + n
        cdef double* Q = &self.Q[0]
        cdef double* qdd = &self.qdd[0]
        cdef double* qddp = &self.qddp[0]
        cdef double* lam = &self.lam[0]
        cdef double* gs = &self.gs[0]
        cdef double* x = &self.x[0]
        cdef double* r = &self.r[0]
        cdef double P = 0.0, a = self.alpha, ia = 1.0 / self.alpha, c2, w2, scale = 1.0, d
        cdef double rmax, gmax
        cdef double tol = self.tolerance
        cdef bint converged = False
        self.nfev += 1
        self.evaluations += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        if self.c_load(t, q) != OK:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        memcpy(Q, &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, qd, t, self.fvp, Q, &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        if m == 0:
            if self.nsp:
                self.c_transform(q, qd, Q)
            for i in range(n):
                qdd[i] = Q[i] * self.mi[i]
        else:
            if self.ev.c_gamma(t, self.fvp, &self.gam[0]) >= 0 \
                    or self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0 \
                    or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0:
                self.status = CONSTRAINT_FAILED
                return CONSTRAINT_FAILED
            c2 = 2.0 * self.xi * self.omega
            w2 = self.omega * self.omega
            if self.nsp:                     # J qd; then J^, Q^ and D
                self.c_jv(qd, &self.jqd[0])
                self.c_transform(q, qd, Q)
                for i in range(n):
                    qddp[i] = Q[i] * self.mi[i]
                self.c_jv(qddp, &self.cvec[0])                   # J^ D Q^
            else:
                for i in range(n):
                    qddp[i] = Q[i] * self.mi[i]
                self.c_jv2(qd, qddp, &self.jqd[0], &self.cvec[0])    # J qd, J M^-1 Q
            for i in range(m):
                gs[i] = (self.gam[i] - c2 * (self.jqd[i] - self.nu[i])
                         - w2 * (self.phi[i] * self.hol[i]))
            self.c_assemble()
            if self.c_factor(ia) != 0:
                self.status = SINGULAR
                return SINGULAR
            for i in range(m):
                lam[i] = 0.0
            gmax = _maxabs(gs, m)
            for k in range(self.iterations):
                for i in range(m):
                    x[i] = gs[i] + lam[i] * ia - self.cvec[i]
                self.c_solve(x)
                self.c_minv_jt(Q, x, qdd)
                # J qdd - gs = (lam_k - lam_{k+1}) / a (the solved equation): no pass
                # over J; the scale of the test from the first iterate
                rmax = 0.0
                for i in range(m):
                    d = (lam[i] - x[i]) * ia
                    if fabs(d) > rmax or d != d:
                        rmax = fabs(d)
                    lam[i] = x[i]
                self.multiplier_iterations += 1
                if k == 0:
                    scale = self.c_absjv(qdd) + gmax + 1e-300
                if rmax <= tol * scale:
                    converged = True
                    break
                if k > 0:
                    d = 0.0
                    for i in range(n):
                        if fabs(qdd[i] - qddp[i]) > d:
                            d = fabs(qdd[i] - qddp[i])
                    if d <= tol * (1.0 + _maxabs(qdd, n)):
                        converged = True
                        break
                memcpy(qddp, qdd, n * sizeof(double))
            if not converged:
                self.unconverged_evaluations += 1
            for i in range(m):
                P += lam[i] * self.jqd[i]
        if self.nsp:
            _spatial_back(self.nsp, &self.sp_pidx[0, 0], &self.sp_E[0, 0], qdd)
        for i in range(n):
            ydot[i] = qd[i]
            ydot[n + i] = qdd[i]
            if not isfinite(qdd[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[2 * n] = P
        self.power = P
        self.status = OK
        return OK

    cdef int c_post_step(self, double t, double* y, bint count) noexcept nogil:
        return self.c_project(t, y, count)

    cdef int c_project(self, double t, double* y, bint count) noexcept nogil:
        """Project y[0:n] (positions) then y[n:2n] (velocities) onto the constraints
        in place (the Python path's ``project``): 0 nothing changed (within the
        tolerance, in the singular band, or projection off), 1 projected, -status
        when an evaluation failed (y is then unchanged)."""
        cdef Py_ssize_t n = self.n, m = self.m, i, it
        cdef double* q = &self.pq[0]
        cdef double* qd = &self.pqd[0]
        cdef double* phi = &self.phi[0]
        cdef double* r = &self.r[0]
        cdef double* x = &self.x[0]
        cdef double* dq = &self.dq[0]
        cdef double tol, vtol, err, prev, ia = 1.0 / self.alpha
        cdef bint changed = False, factored, assembled
        if not self.projects or m == 0:
            return 0
        memcpy(q, y, n * sizeof(double))
        memcpy(qd, y + n, n * sizeof(double))
        tol = self.projection_tolerance * (1.0 + _maxabs(q, n))
        vtol = self.projection_tolerance * (1.0 + _maxabs(qd, n))
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return -FUNCTION_FAILED
        if self.c_load(t, q) != OK or self.ev.c_phi(t, self.fvp, phi) >= 0 \
                or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0:
            self.status = CONSTRAINT_FAILED
            return -CONSTRAINT_FAILED
        for i in range(m):
            phi[i] *= self.hol[i]
        self.c_jv(qd, r)
        for i in range(m):
            r[i] -= self.nu[i]
        if _maxabs(phi, m) <= tol and _maxabs(r, m) <= vtol:
            return 0
        self.c_assemble()
        assembled = True                   # B belongs to the loaded J
        if self.c_near_singular():
            if count:
                self.skipped_projections += 1
            return 0
        prev = INFINITY
        for it in range(20):
            err = _maxabs(phi, m)
            if err <= tol or err >= prev:
                break
            prev = err
            if not assembled:
                self.c_assemble()
            if self.c_factor(ia) != 0:
                self.status = SINGULAR
                return -SINGULAR
            memcpy(x, phi, m * sizeof(double))
            self.c_solve(x)
            self.c_minv_jt(NULL, x, dq)
            for i in range(n):
                q[i] -= dq[i]
            changed = True
            if self.c_load(t, q) != OK or self.ev.c_phi(t, self.fvp, phi) >= 0:
                self.status = CONSTRAINT_FAILED
                return -CONSTRAINT_FAILED
            assembled = False
            for i in range(m):
                phi[i] *= self.hol[i]
        # velocities at the final q (J loaded there)
        if self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0:
            self.status = CONSTRAINT_FAILED
            return -CONSTRAINT_FAILED
        prev = INFINITY
        factored = False
        for it in range(20):
            self.c_jv(qd, r)
            for i in range(m):
                r[i] -= self.nu[i]
            err = _maxabs(r, m)
            if err <= vtol or err >= prev:
                break
            prev = err
            if not factored:
                if not assembled:
                    self.c_assemble()
                    assembled = True
                if self.c_factor(ia) != 0:
                    self.status = SINGULAR
                    return -SINGULAR
                factored = True
            memcpy(x, r, m * sizeof(double))
            self.c_solve(x)
            self.c_minv_jt(NULL, x, dq)
            for i in range(n):
                qd[i] -= dq[i]
            changed = True
        if not changed:
            return 0
        if store_projected(n, q, qd, y) < 0:
            self.status = NOT_FINITE
            return -NOT_FINITE
        if count:
            self.projections += 1
        return 1

    # ------------------------------------------------------------- Python level
    def project(self, double t, const double[::1] y, double[::1] out, bint count=True):
        """out[:2n] = the projected y[:2n] (the rest of out untouched); returns 1 when
        projected, 0 when nothing changed (out = y), -status on failure."""
        cdef Py_ssize_t n = self.n
        cdef int code
        if y.shape[0] < 2 * n or out.shape[0] < 2 * n:
            raise ValueError(f"y and out need {2 * n} entries")
        memcpy(&out[0], &y[0], 2 * n * sizeof(double))
        with nogil:
            code = self.c_project(t, &out[0], count)
        if code < 0:
            memcpy(&out[0], &y[0], 2 * n * sizeof(double))
        return code

    def near_singular(self, double t, const double[::1] q):
        """The singular-band test of the projection at (q, t) (Python path:
        ``Penalty._near_singular``)."""
        if q.shape[0] < self.n:
            raise ValueError(f"q needs {self.n} entries")
        if self.m == 0:
            return False
        cdef int code = 0
        with nogil:
            if self.nf:
                code = self.fn.run(t, self.fvp, &self.err)
            if code == 0:
                code = self.c_load(t, &q[0])
            if code == 0:
                self.c_assemble()
        if code != 0:
            raise RuntimeError(f"CompiledPenalty.near_singular: the evaluation at t = {t:g} "
                               f"failed (use the Python path for the named error)")
        return bool(self.c_near_singular())

    @property
    def lam_view(self):
        """The multipliers of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.lam)[:self.m]

    @property
    def qdd_view(self):
        return np.asarray(self.qdd)[:self.n]
