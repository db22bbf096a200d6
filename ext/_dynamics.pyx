# cython: language_level=3
"""Compiled right-hand side of the equations of motion and compiled integration
loops (``mbcore._ext._dynamics``).

:class:`CompiledRHS` evaluates, in one C call and without allocation, the state
derivative of the dynamic analysis ``y = [q; qd; W]``:

    qdd, lam  from  [M, -Phi_q^T; Phi_q, 0] [qdd; lam] = [Q; gamma + gamma_s]
    W'        =  P_nc + lam . (Phi_q qd)

(004 Eqs 9.49-9.55 with the Ch.9 sign, docs/conventions.md), where ``gamma_s =
-2 alpha Phidot - beta^2 Phi`` is the Baumgarte term of the CS formulation (004
§10.1, spec/algorithms.md §4.2; zero for DI) and ``W`` the work of the
non-conservative and constraint forces (the energy balance channel).  The stages
are the compiled kernels of ``_functions`` (time functions), ``_planar``
(Jacobian, gamma, phi, nu) and ``_forces`` (applied forces and their
non-conservative power); the linear system is solved by the Schur complement
``B = Phi_q M^-1 Phi_q^T`` (M diagonal) with an unblocked Cholesky for small m and
LAPACK ``dpotrf`` above.  The NumPy reference of the same function is the
Python path of ``mbcore.formulation.Formulation.rhs`` (+ the work rate computed
by the dynamic analysis); tests keep them equal to 1e-12.

It applies to dense systems whose elements all have compiled kernels, without
massless coordinates or removed (redundant) rows; anything else keeps the
Python path.  A non-zero status (singular B, a time function or force element
that cannot be evaluated, a non-finite result) makes the caller repeat the
evaluation on the Python path, which raises the named error (or applies the
least-squares multipliers).
"""
from libc.math cimport fabs, isfinite, sqrt
from libc.string cimport memcpy, memset

from scipy.linalg.cython_lapack cimport dpotrf, dpotrs

from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport SparseSchur, idx_t

import numpy as np

include "_schur.pxi"

cdef inline void _Lmat(const double* p, double* L) noexcept nogil:
    """L(p) (3x4 row-major, 004 Eq 6.39): [-e, -e~ + e0 I]."""
    L[0] = -p[1]; L[1] = p[0]; L[2] = p[3]; L[3] = -p[2]
    L[4] = -p[2]; L[5] = -p[3]; L[6] = p[0]; L[7] = p[1]
    L[8] = -p[3]; L[9] = p[2]; L[10] = -p[1]; L[11] = p[0]


#: evaluation status codes
cdef enum:
    OK = 0
    SINGULAR = 1
    FUNCTION_FAILED = 2
    FORCE_FAILED = 3
    NOT_FINITE = 4

STATUS = {OK: "ok", SINGULAR: "singular", FUNCTION_FAILED: "function failed",
          FORCE_FAILED: "force element failed", NOT_FINITE: "not finite"}


cdef class CompiledRHS:
    """``CompiledRHS(evaluator, force_evaluator, functions, n, m, jdata, qgrav,
    minv, alpha=0, beta=0)``.  ``functions`` is the compiled time-function
    evaluator (or None when the system has none), ``jdata`` the System's Jacobian
    buffer (dense row-major, m*n entries then the ground slots), ``qgrav`` the
    gravity forces, ``minv`` the inverse of the diagonal mass matrix."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t n, m, nf
    cdef double[::1] fv, jdata, gam, phi, nu, Q, qgrav, minv, B, C, lam, qdd
    cdef double* fvp
    cdef public double alpha, beta
    cdef readonly bint stabilise
    cdef public long nfev
    cdef readonly int status
    cdef readonly double power
    cdef ErrInfo err
    cdef SparseSchur sp
    cdef idx_t[::1] indptr, indices
    cdef readonly bint sparse
    # spatial bodies (Formulation I in transformed columns, mbcore.mass)
    cdef readonly Py_ssize_t nsp
    cdef idx_t[:, ::1] sp_pidx, sp_pos
    cdef idx_t[::1] sp_bod
    cdef double[:, :, ::1] sp_J, sp_V
    cdef double[:, ::1] sp_lam, sp_E
    cdef double[::1] sp_alpha, jhat

    def __cinit__(self, PlanarEvaluator evaluator, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m, double[::1] jdata,
                  double[::1] qgrav, double[::1] minv, double alpha=0.0,
                  double beta=0.0, SparseSchur sparse_solver=None,
                  idx_t[::1] indptr=None, idx_t[::1] indices=None, spatial=None):
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledRHS: the evaluators belong to another system")
        self.sparse = sparse_solver is not None
        if self.sparse:
            if indptr is None or indices is None or indptr.shape[0] != m + 1 \
                    or sparse_solver.n != n or sparse_solver.m_full != m \
                    or sparse_solver.m != m or jdata.shape[0] < indices.shape[0]:
                raise ValueError("CompiledRHS: sparse solver / CSR pattern do not match")
            self.sp = sparse_solver
            self.indptr = indptr
            self.indices = indices
        elif jdata.shape[0] < m * n:
            raise ValueError("CompiledRHS: buffer sizes do not match (n, m)")
        if qgrav.shape[0] != n or minv.shape[0] != n:
            raise ValueError("CompiledRHS: buffer sizes do not match (n, m)")
        self.ev = evaluator
        self.fe = force_evaluator
        self.fn = functions
        self.n = n
        self.m = m
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata = jdata
        self.gam = np.zeros(max(m, 1))
        self.phi = np.zeros(max(m, 1))
        self.nu = np.zeros(max(m, 1))
        self.Q = np.zeros(max(n, 1))
        self.qgrav = qgrav
        self.minv = minv
        self.B = np.zeros(1 if self.sparse else max(m * m, 1))
        self.C = np.zeros(1 if self.sparse else max(m * n, 1))
        self.lam = np.zeros(max(m, 1))
        self.qdd = np.zeros(max(n, 1))
        self.alpha = alpha
        self.beta = beta
        self.stabilise = alpha != 0.0 or beta != 0.0
        self.nfev = 0
        self.status = 0
        self.nsp = 0
        if spatial is not None:
            # the spatial mass blocks: own copies (minv: the diagonal part, the p
            # columns are overwritten by D at every evaluation)
            self.nsp = spatial.nb
            self.sp_pidx = np.ascontiguousarray(spatial.p_idx, dtype=np.intp)
            self.sp_pos = np.ascontiguousarray(spatial.pos, dtype=np.intp).reshape(-1, 4)
            self.sp_bod = np.ascontiguousarray(spatial.bod, dtype=np.intp)
            self.sp_J = np.ascontiguousarray(spatial.inertia, dtype=np.float64)
            self.sp_V = np.ascontiguousarray(spatial.V, dtype=np.float64)
            self.sp_lam = np.ascontiguousarray(spatial.lam, dtype=np.float64)
            self.sp_alpha = np.ascontiguousarray(spatial.alpha, dtype=np.float64)
            self.sp_E = np.zeros((max(self.nsp, 1), 16))
            self.minv = np.array(spatial.minv, dtype=np.float64)
            self.jhat = np.zeros(jdata.shape[0])
            if self.sp_pidx.shape[0] != self.nsp or self.minv.shape[0] != n or (
                    self.sp_pos.shape[0] and (np.max(self.sp_pos) >= jdata.shape[0]
                                              or np.max(self.sp_bod) >= self.nsp)) or \
                    np.max(self.sp_pidx) >= n or np.min(self.sp_pidx) < 0:
                raise ValueError("CompiledRHS: spatial mass blocks do not match the system")

    # ------------------------------------------------------------------ C level
    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2n+1] = [qd; qdd; W'] at (t, y[0:2n]).  Returns a status code."""
        cdef Py_ssize_t n = self.n, m = self.m, i, j
        cdef const double* q = y
        cdef const double* qd = y + n
        cdef double* J = &self.jdata[0]
        cdef double* gam = &self.gam[0]
        cdef double* lam = &self.lam[0]
        cdef double* qdd = &self.qdd[0]
        cdef double* Q = &self.Q[0]
        cdef double acc, P = 0.0, a2, b2
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        memcpy(self.ev.qx, q, n * sizeof(double))
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        self.ev.c_jacobian(J)
        self.ev.c_gamma(self.fvp, gam)
        if self.stabilise:
            self.ev.c_phi(self.fvp, &self.phi[0])
            self.ev.c_nu(self.fvp, &self.nu[0])
            a2 = 2.0 * self.alpha
            b2 = self.beta * self.beta
            for i in range(m):
                acc = -self.nu[i] + self.c_jrow_dot(i, qd)
                gam[i] -= a2 * acc + b2 * self.phi[i]
        memcpy(Q, &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, qd, self.fvp, Q, &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        if self.nsp:
            self.c_spatial(q, qd, Q)
            J = &self.jhat[0]
        if self.sparse:
            if self.sp._solve(self.jhat if self.nsp else self.jdata, self.minv, self.Q,
                              self.gam, self.qdd, self.lam):
                self.status = SINGULAR
                return SINGULAR
        elif self.c_schur(J, Q, gam, qdd, lam):
            self.status = SINGULAR
            return SINGULAR
        if self.nsp:
            self.c_spatial_back(qdd)
        # W' = P_nc + lam . (Phi_q qd)
        for i in range(m):
            P += lam[i] * self.c_jrow_dot(i, qd)
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

    cdef void c_spatial(self, const double* q, const double* qd, double* Q) noexcept nogil:
        """Formulation I made regular, in transformed columns (mbcore.mass.SpatialMass:
        update, inertial_forces, transform_forces, transform_jacobian): E and D per
        body, Q_p -= b* + alpha p pd.pd then Q_p <- E^T Q_p, minv_p <- D, and
        jhat = J with the p columns of every (row, body) pair times E."""
        cdef Py_ssize_t b, j, k, l, c
        cdef double p[4]
        cdef double pd[4]
        cdef double Lp[12]
        cdef double Ld[12]
        cdef double w[3]
        cdef double Jw[3]
        cdef double x[4]
        cdef double s2, pdpd, acc
        cdef double* E
        cdef double* jh = &self.jhat[0]
        cdef const double* jd = &self.jdata[0]
        for b in range(self.nsp):
            for j in range(4):
                p[j] = q[self.sp_pidx[b, j]]
                pd[j] = qd[self.sp_pidx[b, j]]
            _Lmat(p, Lp)
            _Lmat(pd, Ld)
            s2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]
            s2 = s2 * s2
            E = &self.sp_E[b, 0]
            for j in range(4):                      # E = [L^T V, p]
                for l in range(3):
                    acc = 0.0
                    for k in range(3):
                        acc += Lp[4 * k + j] * self.sp_V[b, k, l]
                    E[4 * j + l] = acc
                E[4 * j + 3] = p[j]
            for l in range(3):
                self.minv[self.sp_pidx[b, l]] = 1.0 / (4.0 * s2 * self.sp_lam[b, l])
            self.minv[self.sp_pidx[b, 3]] = 1.0 / (self.sp_alpha[b] * s2)
            # inertial forces: b* = 4 L(pd)^T J' omega', omega' = 2 L(p) pd
            for k in range(3):
                acc = 0.0
                for j in range(4):
                    acc += Lp[4 * k + j] * pd[j]
                w[k] = 2.0 * acc
            for k in range(3):
                Jw[k] = (self.sp_J[b, k, 0] * w[0] + self.sp_J[b, k, 1] * w[1]
                         + self.sp_J[b, k, 2] * w[2])
            pdpd = pd[0] * pd[0] + pd[1] * pd[1] + pd[2] * pd[2] + pd[3] * pd[3]
            for j in range(4):
                acc = 4.0 * (Ld[j] * Jw[0] + Ld[4 + j] * Jw[1] + Ld[8 + j] * Jw[2])
                x[j] = Q[self.sp_pidx[b, j]] - (acc + self.sp_alpha[b] * pdpd * p[j])
            for l in range(4):                      # Q^_p = E^T Q_p
                acc = 0.0
                for j in range(4):
                    acc += E[4 * j + l] * x[j]
                Q[self.sp_pidx[b, l]] = acc
        memcpy(jh, jd, self.jhat.shape[0] * sizeof(double))
        for c in range(self.sp_pos.shape[0]):
            E = &self.sp_E[self.sp_bod[c], 0]
            for j in range(4):
                x[j] = jd[self.sp_pos[c, j]]
            for l in range(4):
                acc = 0.0
                for j in range(4):
                    acc += x[j] * E[4 * j + l]
                jh[self.sp_pos[c, l]] = acc

    cdef void c_spatial_back(self, double* qdd) noexcept nogil:
        """qdd_p = E qdd^_p."""
        cdef Py_ssize_t b, j, l
        cdef double x[4]
        cdef double acc
        cdef double* E
        for b in range(self.nsp):
            E = &self.sp_E[b, 0]
            for l in range(4):
                x[l] = qdd[self.sp_pidx[b, l]]
            for j in range(4):
                acc = 0.0
                for l in range(4):
                    acc += E[4 * j + l] * x[l]
                qdd[self.sp_pidx[b, j]] = acc

    cdef inline double c_jrow_dot(self, Py_ssize_t i, const double* v) noexcept nogil:
        """(Phi_q v)_i from the dense row-major or CSR Jacobian data."""
        cdef Py_ssize_t j, p, n = self.n
        cdef double acc = 0.0
        cdef const double* J = &self.jdata[0]
        if self.sparse:
            for p in range(self.indptr[i], self.indptr[i + 1]):
                acc += J[p] * v[self.indices[p]]
        else:
            for j in range(n):
                acc += J[i * n + j] * v[j]
        return acc

    cdef int c_schur(self, const double* J, const double* Q, const double* gam,
                     double* qdd, double* lam) noexcept nogil:
        """lam, qdd of the dense Schur complement system (``dense_schur``)."""
        return dense_schur(self.n, self.m, J, &self.minv[0], Q, gam, &self.C[0],
                           &self.B[0], qdd, lam)

    # ------------------------------------------------------------- Python level
    def eval(self, double t, const double[::1] y, double[::1] ydot):
        """ydot[:2n+1] = [qd; qdd; W'] at (t, y[:2n]); returns the status (0 = OK)."""
        if y.shape[0] < 2 * self.n or ydot.shape[0] < 2 * self.n + 1:
            raise ValueError(f"y needs {2 * self.n} and ydot {2 * self.n + 1} entries")
        return self.c_eval(t, &y[0], &ydot[0])

    def timeit(self, double t, const double[::1] y, long repeat):
        """Seconds per evaluation over ``repeat`` evaluations at one state, called
        from C as the compiled loop calls it (benchmarks)."""
        import time
        cdef double[::1] out = np.zeros(2 * self.n + 1)
        cdef long k
        if y.shape[0] < 2 * self.n:
            raise ValueError(f"y needs {2 * self.n} entries")
        cdef double t0 = time.perf_counter()
        for k in range(repeat):
            self.c_eval(t, &y[0], &out[0])
        return (time.perf_counter() - t0) / repeat

    @property
    def lam_view(self):
        """The multipliers of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.lam)[:self.m]

    @property
    def qdd_view(self):
        return np.asarray(self.qdd)[:self.n]


# ----------------------------------------------------------------------------------
# compiled explicit Runge-Kutta loops (fixed step and embedded pairs)
# ----------------------------------------------------------------------------------
cdef double _rms(const double* v, const double* scale, Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t i
    cdef double acc = 0.0, r
    for i in range(N):
        r = v[i] / scale[i]
        acc += r * r
    return sqrt(acc / N) if N else 0.0


cdef inline void _stats(double[::1] stats, double h, int order, long nsteps, long nrej,
                        double nfev) noexcept:
    stats[0] = h
    stats[1] = order
    stats[2] = nsteps
    stats[3] = nrej
    stats[4] = nfev


def run_rk(CompiledRHS f, double[:, ::1] A, double[::1] B, double[::1] C,
           double[::1] E, double[:, ::1] P, bint adaptive, double t0, double t1,
           double[::1] y0, double[::1] f0, double[::1] t_out, Py_ssize_t i_out,
           double h_abs, double rtol, double atol, double max_step, double safety,
           double min_factor, double max_factor, double exponent, int order,
           object on_output, double[::1] stats, long nfev_start=0,
           const idx_t[::1] stop_idx=None, const double[::1] stop_val=None,
           const double[::1] stop_sign=None, const double[::1] E3=None,
           const double[:, ::1] A_extra=None, const double[::1] C_extra=None,
           const double[:, ::1] D=None):
    """Integrate ``y' = f(t, y)`` (the compiled right-hand side) from (t0, y0) to t1
    by an explicit Runge-Kutta method, calling ``on_output(t, y)`` at the output
    times ``t_out[i_out:]``.

    ``adaptive``: an embedded FSAL pair (A, B, C; error weights E over the s + 1
    stages; dense output y_old + h sum_i K_i sum_j P[i, j] s^(j+1)), the controller
    of ``mbplugins.integrators.erk`` (local extrapolation, RMS norm of
    ``h E.K / (atol + rtol max(|y|, |y_new|))``, factor ``safety err^exponent``
    clipped to [min_factor, max_factor], no increase right after a rejection).
    Else a fixed step ``h_abs`` on the grid ``t0 + i h`` (RUNGK4 semantics, last
    step shortened to t1) with cubic Hermite dense output, as
    ``mbplugins.integrators.explicit``.  ``f0`` = f(t0, y0).

    ``stats`` (5 floats, updated before every output): last step, order, steps,
    rejected steps, evaluations (counted from this call; evaluations start at
    ``nfev_start``, those spent before it).  Returns ``(code, t,
    y, i_out, h_abs)``: code 0 finished, 1 stopped (on_output returned True), 2 the
    right-hand side failed at a trial point (t, y = the last accepted state: the
    caller continues on the Python path, which raises the named error), 3 the step
    size fell below the round-off limit, 4 a stop condition ``stop_sign[k] *
    (y[stop_idx[k]] - stop_val[k])`` falls through zero in the step after (t, y)
    (the caller locates it).  Outputs beyond t are not emitted in cases 2-4.

    Hairer's DOP853 (``mbplugins.integrators.erk.DOP853``): ``E3`` given -> the error
    ``|h| e5 / sqrt((e5 + 0.01 e3) N)`` with ``e5 = |E.K / scale|^2``, ``e3 = |E3.K /
    scale|^2``; ``A_extra`` (3 x (s+4)), ``C_extra``, ``D`` (4 x (s+4)) given -> the
    7th-order continuous extension (three extra evaluations in the steps with
    outputs) instead of ``P``."""
    cdef Py_ssize_t N = y0.shape[0], s = B.shape[0], i, j, k, st
    cdef Py_ssize_t nout = t_out.shape[0], deg = P.shape[1] if adaptive else 0
    cdef double[:, ::1] K = np.zeros((s + 1, N))
    cdef double[::1] y = np.array(y0, dtype=np.float64)
    cdef double[::1] ynew = np.zeros(N)
    cdef double[::1] yold = np.zeros(N)
    cdef double[::1] fold = np.zeros(N)
    cdef double[::1] ytmp = np.zeros(N)
    cdef double[::1] scale = np.zeros(N)
    cdef double[::1] work = np.zeros(N)
    cdef double[:, ::1] Qd = np.zeros((max(deg, 1), N))
    cdef double[::1] out
    cdef double t = t0, tnew, h, err, factor, a, b, sk, tt, th, h00, h10, h01, h11
    cdef double nfev0 = f.nfev - nfev_start
    cdef long nsteps = 0, nrej = 0, istep = 0
    cdef bint rejected, exact
    cdef double eps = 2.220446049250313e-16
    cdef double hfix = h_abs, min_step
    cdef Py_ssize_t nstop = 0 if stop_idx is None else stop_idx.shape[0], ks
    cdef bint hairer = E3 is not None, dense_ready
    cdef bint extra = D is not None
    cdef Py_ssize_t nx = A_extra.shape[0] if extra else 0
    cdef double e5, e3, r5, r3
    cdef double[:, ::1] KX = np.zeros((nx, N)) if extra else np.zeros((1, 1))
    cdef double[:, ::1] F7 = np.zeros((7, N)) if extra else np.zeros((1, 1))
    if hairer and E3.shape[0] != s + 1:
        raise ValueError("run_rk: E3 has the wrong size")
    if extra and (C_extra is None or C_extra.shape[0] != nx or A_extra.shape[1] < s + 1 + nx
                  or D.shape[0] != 4 or D.shape[1] < s + 1 + nx):
        raise ValueError("run_rk: extra dense-output stages have the wrong size")
    if N < 2 * f.n + 1:
        raise ValueError("run_rk: y0 must hold [q; qd; W]")
    if (f0.shape[0] != N or stats.shape[0] < 5 or C.shape[0] != s or A.shape[0] < s
            or A.shape[1] < s or (adaptive and (E.shape[0] != s + 1 or P.shape[0] != s + 1))):
        raise ValueError("run_rk: tableau, f0 or stats have the wrong size")
    if nstop and (stop_val is None or stop_sign is None or stop_val.shape[0] != nstop
                  or stop_sign.shape[0] != nstop):
        raise ValueError("run_rk: stop arrays have different lengths")
    for ks in range(nstop):
        if not 0 <= stop_idx[ks] < N:
            raise ValueError("run_rk: stop index out of range")
    for i in range(N):
        K[0, i] = f0[i]
    while t < t1:
        # ---- one accepted step from (t, y) with derivative K[0] ------------------
        rejected = False
        min_step = 10.0 * eps * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        if adaptive:                    # as EmbeddedRK._step_impl
            if h_abs > max_step:
                h_abs = max_step
            if h_abs < min_step:
                h_abs = min_step
        while True:
            if adaptive:
                if h_abs < min_step:
                    _stats(stats, h_abs, order, nsteps, nrej, f.nfev - nfev0)
                    return 3, t, np.asarray(y), i_out, h_abs
                tnew = t + h_abs
                if tnew > t1 or fabs(t1 - tnew) < min_step:
                    tnew = t1
                h_abs = fabs(tnew - t)
            else:
                istep += 1
                tnew = t0 + istep * hfix
                if tnew - t1 > -1e-9 * hfix:
                    tnew = t1
                if tnew - t < min_step:
                    _stats(stats, tnew - t, order, nsteps, nrej, f.nfev - nfev0)
                    return 3, t, np.asarray(y), i_out, h_abs
            h = tnew - t
            for st in range(1, s):
                for i in range(N):
                    a = 0.0
                    for k in range(st):
                        a += A[st, k] * K[k, i]
                    ytmp[i] = y[i] + h * a
                if f.c_eval(t + C[st] * h, &ytmp[0], &K[st, 0]):
                    _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                    return 2, t, np.asarray(y), i_out, h_abs
            for i in range(N):
                a = 0.0
                for k in range(s):
                    a += B[k] * K[k, i]
                ynew[i] = y[i] + h * a
            if f.c_eval(tnew, &ynew[0], &K[s, 0]):
                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                return 2, t, np.asarray(y), i_out, h_abs
            if not adaptive:
                break
            if hairer:                  # DOP853._error_norm
                e5 = 0.0
                e3 = 0.0
                for i in range(N):
                    sk = atol + rtol * (fabs(y[i]) if fabs(y[i]) > fabs(ynew[i])
                                        else fabs(ynew[i]))
                    r5 = 0.0
                    r3 = 0.0
                    for k in range(s + 1):
                        r5 += E[k] * K[k, i]
                        r3 += E3[k] * K[k, i]
                    r5 /= sk
                    r3 /= sk
                    e5 += r5 * r5
                    e3 += r3 * r3
                if e5 == 0.0 and e3 == 0.0:
                    err = 0.0
                else:
                    err = fabs(h) * e5 / sqrt((e5 + 0.01 * e3) * N)
            else:
                for i in range(N):
                    a = 0.0
                    for k in range(s + 1):
                        a += E[k] * K[k, i]
                    work[i] = h * a
                    scale[i] = atol + rtol * (fabs(y[i]) if fabs(y[i]) > fabs(ynew[i])
                                              else fabs(ynew[i]))
                err = _rms(&work[0], &scale[0], N)
            if err <= 1.0:
                if err == 0.0:
                    factor = max_factor
                else:
                    factor = safety * err ** exponent
                    if factor > max_factor:
                        factor = max_factor
                if rejected and factor > 1.0:
                    factor = 1.0
                h_abs *= factor
                break
            nrej += 1
            factor = safety * err ** exponent
            if factor < min_factor:
                factor = min_factor
            h_abs *= factor
            rejected = True
        # ---- stop conditions: met in this step -> the caller redoes it ------------
        for ks in range(nstop):
            if stop_sign[ks] * (ynew[stop_idx[ks]] - stop_val[ks]) <= 0.0:
                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                return 4, t, np.asarray(y), i_out, h_abs
        nsteps += 1
        # ---- outputs in (t, tnew] ------------------------------------------------
        dense_ready = False
        if i_out < nout and t_out[i_out] <= tnew:
            stats[0] = h
            stats[1] = order
            stats[2] = nsteps
            stats[3] = nrej
            stats[4] = f.nfev - nfev0
            if adaptive and not extra:
                for j in range(deg):
                    for i in range(N):
                        a = 0.0
                        for k in range(s + 1):
                            a += K[k, i] * P[k, j]
                        Qd[j, i] = h * a
            while i_out < nout and t_out[i_out] <= tnew:
                tt = t_out[i_out]
                outa = np.empty(N)
                out = outa
                if tt == tnew:
                    for i in range(N):
                        out[i] = ynew[i]
                elif extra:                 # y_old + s(F0 + (1-s)(F1 + s(F2 + ...)))
                    if not dense_ready:     # DOP853._dense_output_impl, once per step
                        for j in range(nx):
                            for i in range(N):
                                a = 0.0
                                for k in range(s + 1 + j):
                                    a += A_extra[j, k] * (K[k, i] if k <= s else KX[k - s - 1, i])
                                ytmp[i] = y[i] + h * a
                            if f.c_eval(t + C_extra[j] * h, &ytmp[0], &KX[j, 0]):
                                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                                return 2, t, np.asarray(y), i_out, h_abs
                        for i in range(N):
                            a = ynew[i] - y[i]
                            F7[0, i] = a
                            F7[1, i] = h * K[0, i] - a
                            F7[2, i] = 2.0 * a - h * (K[s, i] + K[0, i])
                            for j in range(4):
                                b = 0.0
                                for k in range(s + 1 + nx):
                                    b += D[j, k] * (K[k, i] if k <= s else KX[k - s - 1, i])
                                F7[3 + j, i] = h * b
                        dense_ready = True
                    th = (tt - t) / h
                    for i in range(N):
                        a = 0.0
                        for j in range(6, -1, -1):
                            a += F7[j, i]
                            a *= th if (6 - j) % 2 == 0 else (1.0 - th)
                        out[i] = y[i] + a
                elif adaptive:
                    th = (tt - t) / h
                    for i in range(N):
                        a = 0.0
                        sk = 1.0
                        for j in range(deg):
                            sk *= th
                            a += Qd[j, i] * sk
                        out[i] = y[i] + a
                else:                       # cubic Hermite (y, K0) -> (ynew, K[s])
                    th = (tt - t) / h
                    h00 = (1.0 + 2.0 * th) * (1.0 - th) * (1.0 - th)
                    h10 = th * (1.0 - th) * (1.0 - th)
                    h01 = th * th * (3.0 - 2.0 * th)
                    h11 = th * th * (th - 1.0)
                    for i in range(N):
                        out[i] = (h00 * y[i] + h10 * h * K[0, i] + h01 * ynew[i]
                                  + h11 * h * K[s, i])
                i_out += 1
                if on_output(tt, outa) is True:
                    t = tnew
                    for i in range(N):
                        y[i] = ynew[i]
                    return 1, t, np.asarray(y), i_out, h_abs
        t = tnew
        for i in range(N):
            y[i] = ynew[i]
            K[0, i] = K[s, i]
    stats[0] = h_abs
    stats[2] = nsteps
    stats[3] = nrej
    stats[4] = f.nfev - nfev0
    return 0, t, np.asarray(y), i_out, h_abs


# ----------------------------------------------------------------------------------
# joint coordinates: planar tree recursions and the articulated-body solver
# (NumPy references: mbplugins.formulations.joint_coordinates.PlanarTree.positions /
# velocities and articulated_body)
# ----------------------------------------------------------------------------------
from libc.math cimport sin, cos


def jc_planar_kinematics(const int[::1] kind, const idx_t[::1] parent,
                         const idx_t[::1] child, const double[:, ::1] sp,
                         const double[:, ::1] sc, const double[:, ::1] u,
                         const double[::1] angle, const double[::1] theta,
                         const double[::1] thetad, double[::1] q, double[::1] qd):
    """q, qd (3 per body) of a planar tree from the joint coordinates, joints in
    tree order (parent -1: the ground)."""
    cdef Py_ssize_t dof = kind.shape[0], k, p, c
    cdef double php, ca, sa, cc, sc_, wx, wy, Spx, Spy, Scx, Scy, wp, vx, vy, d
    cdef double rpx, rpy, Ux, Uy
    if (parent.shape[0] != dof or child.shape[0] != dof or sp.shape[0] != dof
            or sc.shape[0] != dof or u.shape[0] != dof or angle.shape[0] != dof
            or theta.shape[0] != dof or thetad.shape[0] != dof or q.shape[0] != qd.shape[0]):
        raise ValueError("jc_planar_kinematics: array sizes do not match")
    for k in range(dof):
        if child[k] < 0 or 3 * child[k] + 3 > q.shape[0] or parent[k] >= q.shape[0] // 3:
            raise ValueError("jc_planar_kinematics: body index out of range")
    with nogil:
        for k in range(dof):
            p = parent[k]
            c = 3 * child[k]
            if p >= 0:
                php = q[3 * p + 2]; rpx = q[3 * p]; rpy = q[3 * p + 1]
                vx = qd[3 * p]; vy = qd[3 * p + 1]; wp = qd[3 * p + 2]
            else:
                php = 0.0; rpx = 0.0; rpy = 0.0; vx = 0.0; vy = 0.0; wp = 0.0
            ca = cos(php); sa = sin(php)
            if kind[k] == 0:
                q[c + 2] = php + theta[k]
                wx = sp[k, 0]; wy = sp[k, 1]
            else:
                q[c + 2] = php - angle[k]
                wx = sp[k, 0] + theta[k] * u[k, 0]; wy = sp[k, 1] + theta[k] * u[k, 1]
            cc = cos(q[c + 2]); sc_ = sin(q[c + 2])
            Spx = ca * wx - sa * wy; Spy = sa * wx + ca * wy
            Scx = cc * sc[k, 0] - sc_ * sc[k, 1]; Scy = sc_ * sc[k, 0] + cc * sc[k, 1]
            q[c] = rpx + Spx - Scx
            q[c + 1] = rpy + Spy - Scy
            if kind[k] == 0:
                qd[c + 2] = wp + thetad[k]
                qd[c] = vx - wp * Spy + qd[c + 2] * Scy
                qd[c + 1] = vy + wp * Spx - qd[c + 2] * Scx
            else:
                Ux = ca * u[k, 0] - sa * u[k, 1]; Uy = sa * u[k, 0] + ca * u[k, 1]
                qd[c + 2] = wp
                qd[c] = vx - wp * Spy + thetad[k] * Ux + qd[c + 2] * Scy
                qd[c + 1] = vy + wp * Spx + thetad[k] * Uy - qd[c + 2] * Scx


def jc_planar_aba(const int[::1] kind, const idx_t[::1] parent, const idx_t[::1] child,
                  const double[:, ::1] sp, const double[:, ::1] sc, const double[:, ::1] u,
                  const double[::1] mass, const double[::1] q, const double[::1] qd,
                  const double[::1] theta, const double[::1] thetad, const double[::1] Q,
                  double[::1] thdd, double[::1] qdd, double[:, ::1] work):
    """The articulated-body recursion of ``articulated_body`` in C: thdd (dof), qdd
    (3 nb).  ``work``: (nb + dof, 16) scratch (IA 9 + pA 3 per body; X 9... per
    joint in the rows after nb)."""
    cdef Py_ssize_t dof = kind.shape[0], nb = q.shape[0] // 3, k, b, p, i, jj, kk
    cdef double ca, sa, cc, sc_, Spx, Spy, Scx, Scy, Wx, Wy, Ux, Uy, wp, wc
    cdef double S0, S1, S2, c0, c1, D, Sp_, acc
    cdef double U[3]
    cdef double T[9]
    cdef double Ia[9]
    cdef double pa[3]
    cdef double base[3]
    cdef double* IA
    cdef double* pA
    cdef double* J
    if (work.shape[0] < nb + dof or work.shape[1] < 16 or thdd.shape[0] != dof
            or qdd.shape[0] != 3 * nb or mass.shape[0] != 3 * nb or Q.shape[0] != 3 * nb
            or qd.shape[0] != 3 * nb or theta.shape[0] != dof or thetad.shape[0] != dof):
        raise ValueError("jc_planar_aba: array sizes do not match")
    for k in range(dof):
        if not (0 <= child[k] < nb) or parent[k] >= nb:
            raise ValueError("jc_planar_aba: body index out of range")
    with nogil:
        # per joint row nb + k: [X02, X12, S0, S1, S2, c0, c1, U0, U1, U2, D]
        for k in range(dof):
            p = parent[k]
            b = 3 * child[k]
            J = &work[nb + k, 0]
            if p >= 0:
                ca = cos(q[3 * p + 2]); sa = sin(q[3 * p + 2]); wp = qd[3 * p + 2]
            else:
                ca = 1.0; sa = 0.0; wp = 0.0
            cc = cos(q[b + 2]); sc_ = sin(q[b + 2]); wc = qd[b + 2]
            Scx = cc * sc[k, 0] - sc_ * sc[k, 1]; Scy = sc_ * sc[k, 0] + cc * sc[k, 1]
            if kind[k] == 0:
                Spx = ca * sp[k, 0] - sa * sp[k, 1]; Spy = sa * sp[k, 0] + ca * sp[k, 1]
                J[0] = -Spy + Scy; J[1] = Spx - Scx
                J[2] = Scy; J[3] = -Scx; J[4] = 1.0
                J[5] = -wp * wp * Spx + wc * wc * Scx
                J[6] = -wp * wp * Spy + wc * wc * Scy
            else:
                Wx = sp[k, 0] + theta[k] * u[k, 0]; Wy = sp[k, 1] + theta[k] * u[k, 1]
                Spx = ca * Wx - sa * Wy; Spy = sa * Wx + ca * Wy
                Ux = ca * u[k, 0] - sa * u[k, 1]; Uy = sa * u[k, 0] + ca * u[k, 1]
                J[0] = -Spy + Scy; J[1] = Spx - Scx
                J[2] = Ux; J[3] = Uy; J[4] = 0.0
                J[5] = 2.0 * wp * thetad[k] * (-Uy) - wp * wp * Spx + wc * wc * Scx
                J[6] = 2.0 * wp * thetad[k] * Ux - wp * wp * Spy + wc * wc * Scy
        for b in range(nb):
            IA = &work[b, 0]
            for i in range(9):
                IA[i] = 0.0
            IA[0] = mass[3 * b]; IA[4] = mass[3 * b + 1]; IA[8] = mass[3 * b + 2]
            IA[9] = -Q[3 * b]; IA[10] = -Q[3 * b + 1]; IA[11] = -Q[3 * b + 2]
        for k in range(dof - 1, -1, -1):
            b = child[k]
            p = parent[k]
            IA = &work[b, 0]
            pA = &work[b, 9]
            J = &work[nb + k, 0]
            for i in range(3):
                U[i] = IA[3 * i] * J[2] + IA[3 * i + 1] * J[3] + IA[3 * i + 2] * J[4]
            D = J[2] * U[0] + J[3] * U[1] + J[4] * U[2]
            J[7] = U[0]; J[8] = U[1]; J[9] = U[2]; J[10] = D
            if p < 0:
                continue
            for i in range(3):
                for jj in range(3):
                    Ia[3 * i + jj] = IA[3 * i + jj] - U[i] * U[jj] / D
            Sp_ = J[2] * pA[0] + J[3] * pA[1] + J[4] * pA[2]
            for i in range(3):            # pa = Ia c + pA - U (S.pA) / D  (c2 = 0)
                pa[i] = Ia[3 * i] * J[5] + Ia[3 * i + 1] * J[6] + pA[i] - U[i] * Sp_ / D
            # X = [[1, 0, x0], [0, 1, x1], [0, 0, 1]]; X^T Ia X and X^T pa
            for i in range(9):
                T[i] = Ia[i]
            # T = Ia X: column 2 += x0 col0 + x1 col1
            for i in range(3):
                T[3 * i + 2] = Ia[3 * i + 2] + J[0] * Ia[3 * i] + J[1] * Ia[3 * i + 1]
            # X^T T: row 2 += x0 row0 + x1 row1
            for jj in range(3):
                T[6 + jj] = T[6 + jj] + J[0] * T[jj] + J[1] * T[3 + jj]
            for i in range(9):
                work[p, i] += T[i]
            work[p, 9] += pa[0]
            work[p, 10] += pa[1]
            work[p, 11] += pa[2] + J[0] * pa[0] + J[1] * pa[1]
        for k in range(dof):
            b = child[k]
            p = parent[k]
            J = &work[nb + k, 0]
            pA = &work[b, 9]
            if p >= 0:
                base[0] = qdd[3 * p] + J[0] * qdd[3 * p + 2] + J[5]
                base[1] = qdd[3 * p + 1] + J[1] * qdd[3 * p + 2] + J[6]
                base[2] = qdd[3 * p + 2]
            else:
                base[0] = J[5]; base[1] = J[6]; base[2] = 0.0
            acc = -(J[7] * base[0] + J[8] * base[1] + J[9] * base[2]
                    + J[2] * pA[0] + J[3] * pA[1] + J[4] * pA[2]) / J[10]
            thdd[k] = acc
            qdd[3 * b] = base[0] + J[2] * acc
            qdd[3 * b + 1] = base[1] + J[3] * acc
            qdd[3 * b + 2] = base[2] + J[4] * acc
