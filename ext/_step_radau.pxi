# Radau IIA stepper of the step loop (included by _steploop.pyx): order 5, 3 stages,
# RADAU5's transformed simplified Newton iteration with one real and one complex LU
# (Hairer & Wanner (1996), §IV.8), its error estimate and predictive controller.

from libc.math cimport fma

# the complex routines of SciPy's BLAS/LAPACK, bound on first use as _lapack.pxi binds
# the real ones (complex arrays as interleaved doubles: the same memory layout)
ctypedef void (*_zgetrf_t)(int *m, int *n, double *a, int *lda, int *ipiv,
                           int *info) noexcept nogil
ctypedef void (*_zgetrs_t)(char *trans, int *n, int *nrhs, double *a, int *lda, int *ipiv,
                           double *b, int *ldb, int *info) noexcept nogil
ctypedef void (*_zgemv_t)(char *trans, int *m, int *n, double *alpha, double *a, int *lda,
                          double *x, int *incx, double *beta, double *y,
                          int *incy) noexcept nogil
cdef _zgetrf_t _p_zgetrf = NULL
cdef _zgetrs_t _p_zgetrs = NULL
cdef _zgemv_t _p_zgemv = NULL


cdef int _bind_complex() except -1:
    """zgetrf, zgetrs (scipy.linalg.cython_lapack) and zgemv (cython_blas): the
    routines of the Python driver's ``lu_factor``/``lu_solve`` and of NumPy's complex
    matmul."""
    global _p_zgetrf, _p_zgetrs, _p_zgemv
    if _p_zgemv != NULL:
        return 0
    from mbcore._ext import blas_lapack_capi
    blas, lapack = blas_lapack_capi()
    _p_zgetrf = <_zgetrf_t>_capi_pointer(lapack, "zgetrf", 6)
    _p_zgetrs = <_zgetrs_t>_capi_pointer(lapack, "zgetrs", 9)
    _p_zgemv = <_zgemv_t>_capi_pointer(blas, "zgemv", 11)
    return 0


cdef inline void _matmul33(const double* A, bint trans, const double* B, Py_ssize_t N,
                           double* out) noexcept nogil:
    """out (3 x N) = A @ B for a C-order 3 x 3 ``A`` (``trans``: A is the transpose of
    that array, NumPy's ``P.T``) and B (3 x N, C order): the dgemm call of NumPy's
    matmul (row-major, seen column-major as out^T = B^T A^T)."""
    cdef int n = <int>N, three = 3
    cdef char tn = b'N', tt = b'T'
    dgemm(&tn, &tt if trans else &tn, &n, &three, &three, &D_ONE, <double*>B, &n,
          <double*>A, &three, &D_ZERO, out, &n)


cdef class RadauStepper(Stepper):
    """``Radau5`` (:func:`run_radau`): f and the Newton Jacobian at the step's start,
    the real LU of ``γ/h M − J`` and the complex one of ``μ/h M − J`` with their h,
    the last collocation increments ``Z`` and step, the controller's last step and
    error, the mass diagonal and the |h| powers of the error weights."""
    cdef Py_ssize_t ne
    cdef int maxiter, n_iter
    cdef double h, h_abs, h_acc, tnew, t_old, lu_h, newton_tol, gamma, mu_r, mu_i
    cdef double rtol, atol, max_step, min_factor, max_factor, keep_below
    cdef double h_abs_old, err_old, h_last, err_norm, rate, safety, hp_cached
    cdef bint has_old, has_Z, rejected_first, has_rate, unit_mass, hpow
    cdef bint use_cb, jac_current, lu_valid
    cdef double* Tm
    cdef double* TI
    cdef double* tic
    cdef double* P
    cdef double* Cn
    cdef double* E
    cdef double* mv
    cdef Py_ssize_t* eidx
    cdef double* fy
    cdef double* J
    cdef double* LUr
    cdef double* LUc
    cdef int* ipr
    cdef int* ipc
    cdef double* Z
    cdef double* Znew
    cdef double* W
    cdef double* X
    cdef double* F
    cdef double* Fc
    cdef double* G
    cdef double* rr
    cdef double* rc
    cdef double* yz
    cdef double* ynew
    cdef double* fnew
    cdef double* yprev
    cdef double* scale
    cdef double* ze
    cdef double* err
    cdef double* hwp
    cdef double* jwork
    cdef double* tmp
    cdef object J_arr, fy_arr, Z_arr, hp_arr, hwp_arr, jac
    cdef double[::1] counters
    # checkpoints: the state at the step's start (f, Z, y change only when a step is
    # accepted; J is kept before it is re-evaluated)
    cdef bint ck, J_kept, jc_top, lu_top, hasold_top, hasZ_top, rf_top
    cdef object Jsnap_arr
    cdef double* Jsnap
    cdef double h_top, luh_top, hold_top, eold_top, hlast_top, nfev_top
    cdef long nsteps_top, nrej_top

    cdef int weights(self, const double* y0, const double* y1, double h_abs) except -1:
        """Radau5._scale: atol + rtol max(|y0|, |y1|), divided by |h|^p (NumPy's
        power, as the Python driver) with ``h_power``."""
        cdef Py_ssize_t N = self.N, i
        cdef double a, b
        for i in range(N):
            a = fabs(y0[i])
            b = fabs(y1[i])
            self.scale[i] = self.atol + self.rtol * (a if a >= b else b)
        if self.hpow:
            if h_abs != self.hp_cached:
                np.power(h_abs, self.hp_arr, out=self.hwp_arr)
                self.hp_cached = h_abs
            for i in range(N):
                self.scale[i] = self.scale[i] / self.hwp[i]
        return 0

    cdef int new_jacobian(self, double t, const double* y, object y_arr) except -1:
        """``Integrator.jac(t, y, f, scale)`` with f known (1: the evaluation failed):
        the call-back, or ``f.c_jac``, whose own evaluation of f(t, y) is not counted
        (the Python driver passes f)."""
        cdef long before
        cdef int l
        cdef Py_ssize_t N = self.N
        if self.ck and not self.J_kept:
            memcpy(self.Jsnap, self.J, N * N * sizeof(double))
            self.J_kept = True
        if self.use_cb:
            before = self.f.nfev
            l = _cb_jacobian(self.jac, t, y_arr, self.J, N, self.counters)
            self.nfev0 += self.f.nfev - before
            if l:
                return 1
        else:
            before = self.f.nfev
            self.counters[C_JEV] += 1.0
            if self.f.c_jac(t, y, N, self.scale, self.J, self.jwork):
                return 1
            if self.f.analytic_jac and N == 2 * self.f.n + 1:
                self.nfev0 += self.f.nfev - before
            else:
                self.nfev0 += 1.0
                self.counters[C_FEV_JAC] += self.f.nfev - before - 1
        self.jac_current = True
        self.lu_valid = False
        return 0

    cdef void factor(self, double h) noexcept:
        """Radau5._factor: ``(γ/h) M − J`` by dgetrf and ``(μ/h) M − J`` by zgetrf,
        the complex entries as NumPy forms them (its complex product by fma)."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int nn = <int>N, info = 0
        cdef double gr = self.gamma / h, mr = self.mu_r / h, mi = self.mu_i / h
        cdef double dre, dim, m
        for j in range(N):
            for i in range(N):
                m = self.mv[i] if i == j else 0.0
                self.LUr[j * N + i] = gr * m - self.J[j * N + i]
                dre = fma(mr, m, -(mi * 0.0))
                dim = fma(mr, 0.0, mi * m)
                self.LUc[2 * (j * N + i)] = dre - self.J[j * N + i]
                self.LUc[2 * (j * N + i) + 1] = dim - 0.0
        dgetrf(&nn, &nn, self.LUr, &nn, self.ipr, &info)
        _p_zgetrf(&nn, &nn, self.LUc, &nn, self.ipc, &info)

    cdef int collocation(self, double t, double h, int* conv) except -1:
        """Radau5._collocation from Z0 (in ``self.Znew``): the simplified Newton
        iteration on W = T⁻¹ Z; ``conv[0]`` 1 when converged.  Returns a status."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int k, info = 0, one = 1, nn = <int>N, three = 3, maxiter = self.maxiter
        cdef double gr = self.gamma / h, mr = self.mu_r / h, mi = self.mu_i / h
        cdef double n0, n1, n2, norm, norm_old = 0.0, rate = 0.0, are, aim, bre, cre, cim
        cdef double w1, w2, pre, pim
        cdef double zc[4]
        cdef bint have_old = False, have_rate = False
        cdef char tn = b'N'
        cdef double* y = self.y
        cdef double* Z = self.Znew
        cdef double* W = self.W
        cdef double* F = self.F
        zc[0] = 1.0
        zc[1] = 0.0
        zc[2] = 0.0
        zc[3] = 0.0
        _matmul33(self.TI, False, Z, N, W)
        conv[0] = 0
        k = 0
        while k < maxiter:
            for i in range(3):
                for j in range(N):
                    self.yz[j] = y[j] + Z[i * N + j]
                if self.f.c_eval(t + h * self.Cn[i], self.yz, &F[i * N]):
                    self.counters[C_NITER] += k + 1
                    return LOOP_EVAL_FAILED
            _vecmat(self.TI, F, 3, N, self.G)          # ti_r @ F
            for j in range(3 * N):                       # F as complex (NumPy's cast)
                self.Fc[2 * j] = F[j]
                self.Fc[2 * j + 1] = 0.0
            _p_zgemv(&tn, &nn, &three, zc, self.Fc, &nn, self.tic, &one, &zc[2], self.rc,
                     &one)                               # ti_c @ F
            for j in range(N):
                self.rr[j] = self.G[j] - (gr * self.mv[j]) * W[j]
                are = fma(mr, self.mv[j], -(mi * 0.0))   # (mc * m)
                aim = fma(mr, 0.0, mi * self.mv[j])
                w1 = W[N + j]
                w2 = W[2 * N + j]
                bre = fma(0.0, w2, -(1.0 * 0.0))         # 1j * W[2]
                cre = w1 + bre                           # W[1] + 1j W[2]
                cim = 0.0 + fma(0.0, 0.0, 1.0 * w2)
                pre = fma(are, cre, -(aim * cim))
                pim = fma(are, cim, aim * cre)
                self.rc[2 * j] = self.rc[2 * j] - pre
                self.rc[2 * j + 1] = self.rc[2 * j + 1] - pim
            dgetrs(&tn, &nn, &one, self.LUr, &nn, self.ipr, self.rr, &nn, &info)
            _p_zgetrs(&tn, &nn, &one, self.LUc, &nn, self.ipc, self.rc, &nn, &info)
            self.counters[C_SOLVE] += 2.0
            for j in range(N):                           # dW: rows real, re, im
                self.X[j] = self.rr[j]
                self.X[N + j] = self.rc[2 * j]
                self.X[2 * N + j] = self.rc[2 * j + 1]
            n0 = _rms_idx(1.0, self.X, self.scale, self.eidx, self.ne, self.tmp)
            n1 = _rms_idx(1.0, &self.X[N], self.scale, self.eidx, self.ne, self.tmp)
            n2 = _rms_idx(1.0, &self.X[2 * N], self.scale, self.eidx, self.ne, self.tmp)
            norm = sqrt((pow(n0, 2.0) + pow(n1, 2.0) + pow(n2, 2.0)) / 3)
            if not norm < INFINITY:
                break
            if have_old:
                rate = norm / norm_old
                have_rate = True
                if rate >= 1 or pow(rate, maxiter - k) / (1 - rate) * norm > \
                        self.newton_tol:
                    break
            for j in range(3 * N):
                W[j] = W[j] + self.X[j]
            _matmul33(self.Tm, False, W, N, Z)
            if norm == 0.0 or (have_rate and rate / (1 - rate) * norm < self.newton_tol):
                conv[0] = 1
                break
            norm_old = norm
            have_old = True
            k += 1
        if k == maxiter:
            k = maxiter - 1
        self.n_iter = k + 1
        self.has_rate = have_rate
        self.rate = rate
        self.counters[C_NITER] += k + 1
        return 0

    cdef int attempt(self, double next_out) except -1:
        """Radau5._step_impl up to the accepted solution of the step."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int info = 0, one = 1, nn = <int>N, conv = 0, code
        cdef double t = self.t, t1 = self.t1, tnew, h, h_abs, min_step, en, fac
        cdef bint rejected
        cdef char tn = b'N'
        cdef double* y = self.y
        cdef double* Z = self.Znew
        cdef double s3[9]
        cdef double sv
        if self.ck:
            self.J_kept = False
            self.h_top, self.jc_top, self.lu_top, self.luh_top = \
                self.h_abs, self.jac_current, self.lu_valid, self.lu_h
            self.hasold_top, self.hold_top, self.eold_top = \
                self.has_old, self.h_abs_old, self.err_old
            self.hasZ_top, self.hlast_top, self.rf_top = \
                self.has_Z, self.h_last, self.rejected_first
            self.nsteps_top, self.nrej_top, self.nfev_top = self.nsteps, self.nrej, self.nfev()
            self.f.c_save()
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        h_abs = self.h_abs if self.h_abs > min_step else min_step
        if h_abs > self.max_step:
            h_abs = self.max_step
        if h_abs != self.h_abs:
            self.lu_valid = False
        rejected = self.rejected_first
        while True:
            if h_abs < min_step:
                self.h = h_abs
                return LOOP_STEP_TOO_SMALL
            tnew = t + h_abs
            if tnew - t1 > 0 or fabs(t1 - tnew) < min_step:
                tnew = t1
                self.lu_valid = False
            h = tnew - t
            h_abs = fabs(h)
            self.h = h
            self.tnew = tnew
            if not self.has_Z:
                for j in range(3 * N):
                    Z[j] = 0.0
            else:   # the last collocation polynomial, extrapolated
                for i in range(3):
                    sv = 1.0 + h * self.Cn[i] / self.h_last
                    for j in range(3):
                        s3[i * 3 + j] = pow(sv, <double>(j + 1))
                _matmul33(self.P, True, self.Z, N, self.X)      # P.T @ Z
                _matmul33(s3, False, self.X, N, Z)
                for i in range(3):
                    for j in range(N):
                        Z[i * N + j] = Z[i * N + j] - self.Z[2 * N + j]
            self.weights(y, y, h_abs)
            if not self.lu_valid or self.lu_h != h:
                self.factor(h)
                self.counters[C_LU] += 2.0
                self.lu_valid = True
                self.lu_h = h
            code = self.collocation(t, h, &conv)
            if code:
                return code
            if not conv:
                self.nrej += 1
                self.counters[C_NEWTON] += 1.0
                if not self.jac_current:
                    if self.new_jacobian(t, y, self.y_arr):
                        return LOOP_EVAL_FAILED
                    continue
                h_abs *= 0.5
                self.lu_valid = False
                rejected = True
                continue
            for j in range(N):
                self.ynew[j] = y[j] + Z[2 * N + j]
            _vecmat(self.E, Z, 3, N, self.ze)
            for j in range(N):
                self.ze[j] = self.ze[j] / h
                if not self.unit_mass:
                    self.ze[j] = self.mv[j] * self.ze[j]
                self.err[j] = self.fy[j] + self.ze[j]
            dgetrs(&tn, &nn, &one, self.LUr, &nn, self.ipr, self.err, &nn, &info)
            self.counters[C_SOLVE] += 1.0
            self.weights(y, self.ynew, h_abs)
            en = _rms_idx(1.0, self.err, self.scale, self.eidx, self.ne, self.tmp)
            self.safety = 0.9 * (2 * self.maxiter + 1) / (2 * self.maxiter + self.n_iter)
            if rejected and en > 1:                 # the second try (RADAU5)
                for j in range(N):
                    self.yz[j] = y[j] + self.err[j]
                if self.f.c_eval(t, self.yz, self.fnew):
                    return LOOP_EVAL_FAILED
                for j in range(N):
                    self.err[j] = self.fnew[j] + self.ze[j]
                dgetrs(&tn, &nn, &one, self.LUr, &nn, self.ipr, self.err, &nn, &info)
                self.counters[C_SOLVE] += 1.0
                en = _rms_idx(1.0, self.err, self.scale, self.eidx, self.ne, self.tmp)
            if en > 1:
                self.nrej += 1
                self.counters[C_ERR] += 1.0
                fac = self.safety * pow(en, -0.25)
                h_abs *= (fac if fac > self.min_factor else self.min_factor)
                self.lu_valid = False
                rejected = True
                continue
            break
        self.err_norm = en
        self.h_acc = h_abs
        if self.f.c_eval(tnew, self.ynew, self.fnew):    # f at the step's end
            return LOOP_EVAL_FAILED
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        cdef Py_ssize_t N = self.N
        hist.update(t=self.t, y=np.array(self.y_arr), f=np.array(self.fy_arr),
                    J=(np.array(self.Jsnap_arr) if self.J_kept else np.array(self.J_arr)
                       ).reshape(N, N).T.copy(),
                    jac_current=bool(self.jc_top), h_abs=self.h_top,
                    h_abs_old=self.hold_top if self.hasold_top else None,
                    err_old=self.eold_top if self.hasold_top else None,
                    Z=np.array(self.Z_arr).reshape(3, N) if self.hasZ_top else None,
                    h_last=self.hlast_top, rejected_first=bool(self.rf_top),
                    lu_h=self.luh_top if self.lu_top else 0.0,
                    counts=np.array([self.nsteps_top, self.nrej_top, self.nfev_top],
                                    dtype=float))
        return 0

    cdef int accept(self, bint due) except -1:
        """The step is taken (Radau5._step_impl after the error test): the predictive
        controller, the new step's f (evaluated in ``attempt``), the Jacobian renewed
        when Newton converged slowly."""
        cdef Py_ssize_t N = self.N
        cdef double en = self.err_norm, h_abs = self.h_acc, mult, fac
        cdef bint recompute = self.n_iter > 2 and (not self.has_rate or self.rate > 1e-3)
        if not self.has_old or en == 0:
            mult = 1.0
        else:
            mult = h_abs / self.h_abs_old * pow(self.err_old / en, 0.25)
        fac = (mult if mult < 1.0 else 1.0) * (pow(en, -0.25) if en > 0 else INFINITY)
        fac = self.safety * fac
        if not fac < self.max_factor:
            fac = self.max_factor
        if not recompute and 1.0 <= fac < self.keep_below:
            fac = 1.0
        self.h_abs_old = h_abs
        self.err_old = en
        self.has_old = True
        self.h_abs = h_abs * fac
        if fac != 1.0:
            self.lu_valid = False
        self.rejected_first = False
        memcpy(self.Z, self.Znew, 3 * N * sizeof(double))
        self.has_Z = True
        self.h_last = self.h
        memcpy(self.yprev, self.y, N * sizeof(double))
        memcpy(self.y, self.ynew, N * sizeof(double))
        memcpy(self.fy, self.fnew, N * sizeof(double))
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), 5)
        if recompute:
            if self.new_jacobian(self.t, self.y, self.y_arr):
                return LOOP_EVAL_FAILED
        else:
            self.jac_current = False
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_abs

    cdef int dense(self, double tt, double* out) except -1:
        """The collocation polynomial of the step (``RKDenseOutput`` with K = Z/h and
        RADAU_P): y_0 + Σ_c s^(c+1) Σ_k h (Z_k/h) P_kc, term by term."""
        cdef Py_ssize_t N = self.N, i, k, c
        cdef double hd = self.t - self.t_old, s, a, q, hl = self.h_last
        cdef double p[3]
        s = (tt - self.t_old) / hd
        p[0] = s
        p[1] = s * s
        p[2] = p[1] * s
        for i in range(N):
            a = 0.0
            for c in range(3):
                q = 0.0
                for k in range(3):
                    q += (hd * (self.Z[k * N + i] / hl)) * self.P[k * 3 + c]
                a += p[c] * q
            out[i] = self.yprev[i] + a
        return 0

    cdef int load(self, dict s0) except -1:
        """The start state of ``Radau5.loop_start()`` (run_radau, a restart)."""
        cdef Py_ssize_t N = self.N
        cdef double[::1] fv = np.ascontiguousarray(s0["f"], dtype=np.float64).reshape(-1)
        cdef double[::1] Jv = np.asfortranarray(s0["J"], dtype=np.float64).reshape(-1,
                                                                                   order="F")
        cdef double[::1] Zv
        _size("run_radau: f", fv.shape[0], N)
        _size("run_radau: J", Jv.shape[0], N * N)
        _all_finite("run_radau: f", fv)
        _all_finite("run_radau: J", Jv)
        memcpy(self.fy, &fv[0], N * sizeof(double))
        memcpy(self.J, &Jv[0], N * N * sizeof(double))
        self.jac_current = bool(s0["jac_current"])
        self.h_abs = float(s0["h_abs"])
        _positive("run_radau: h_abs", self.h_abs)
        self.has_old = s0["h_abs_old"] is not None and s0["err_old"] is not None
        self.h_abs_old = float(s0["h_abs_old"]) if self.has_old else 0.0
        self.err_old = float(s0["err_old"]) if self.has_old else 0.0
        self.has_Z = s0["Z"] is not None
        if self.has_Z:
            Zv = np.ascontiguousarray(s0["Z"], dtype=np.float64).reshape(-1)
            _size("run_radau: Z", Zv.shape[0], 3 * N)
            memcpy(self.Z, &Zv[0], 3 * N * sizeof(double))
        self.h_last = float(s0["h_last"])
        self.rejected_first = bool(s0["rejected_first"])
        self.lu_valid = False
        self.lu_h = 0.0
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``Radau5.restart`` (``_restart_impl``: f and J there, a new
        first step, no LU), loaded from that object's ``loop_start()``."""
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        self.load(s0)
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), 5, self.nsteps, self.nrej,
                   self.nfev())
        elif code == LOOP_BUDGET:
            _stats(stats, self.h_abs, 5, self.nsteps, self.nrej, self.nfev())
        else:
            _stats(stats, fabs(self.h), 5, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h_abs


def run_radau(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
              dict s0 not None, const double[:, ::1] T not None,
              const double[:, ::1] TI not None, const double complex[::1] ti_c not None,
              const double[:, ::1] P not None, const double[::1] C not None,
              const double[::1] E not None, double gamma, double complex mu,
              double min_factor, double max_factor, double keep_below,
              double[::1] t_out not None, Py_ssize_t i_out, object on_output,
              double[::1] stats not None, double[::1] counters not None,
              long nfev_start=0, const idx_t[::1] stop_idx=None,
              const double[::1] stop_val=None, const double[::1] stop_sign=None,
              object jac=None, double[::1] ystep=None, dict hist=None,
              double lu_h0=0.0, long max_steps=0, object on_commit=None,
              object restart=None):
    """Integrate from (t0, y0) to t1 > t0 by ``Radau5`` (:class:`RadauStepper`;
    Hairer & Wanner (1996), §IV.5 Table 5.6 and §IV.8, the algorithm of RADAU5) from
    its state ``s0`` (``Radau5.loop_start()``: f and J at (t0, y0) with
    ``jac_current``, ``h_abs``, the controller's ``h_abs_old``/``err_old`` and the last
    increments ``Z`` with ``h_last`` (None: none yet), ``rejected_first``,
    ``maxiter``, ``newton_tol``, ``rtol``, ``atol``, ``max_step``, ``mass`` (None:
    unit), ``h_power`` (None or the |h| powers of the error weights)).  ``T``,
    ``TI``: the transformation of A⁻¹ to diag(γ, [[α, β], [−β, α]]) and its inverse;
    ``ti_c`` = TI[1] + i TI[2]; ``P``: the collocation polynomial's coefficients
    (dense output, extrapolated start values); ``C``, ``E``: nodes and error weights;
    ``gamma``, ``mu`` = α − iβ: the shifts of the real and complex Newton matrices;
    ``min_factor``, ``max_factor``, ``keep_below``: the step-change limits.  The
    real system by dgetrf/dgetrs, the complex one by zgetrf/zgetrs, the complex
    right-hand side as NumPy forms it (zgemv, products by fma), so that the steps
    are the Python driver's.  ``jac``: a Jacobian call-back ``jac(t, y)`` (the DAE
    forms; else ``f.c_jac``, its evaluation of f(t, y) not counted, as the Python
    driver passes f).  A failing evaluation or call-back returns code 2 (the Python
    driver takes over).  Checkpoints: ``hist`` receives the state at the start of
    each step with outputs (the keys of ``s0`` with ``t``, ``y``, ``lu_h`` (0: no LU)
    and ``counts``), ``ystep`` its end; ``lu_h0`` > 0: the LU of that h is refactored
    at the start (uncounted).  Returns ``(code, t, y, i_out, h_abs)`` (module
    docstring).  Refused (ValueError naming the argument): the checks of
    :func:`_check_common`, f / J / Z / mass / h_power of the wrong size or
    non-finite, T / TI / P not 3 x 3, ti_c / C / E not 3, maxiter < 1, h_abs,
    newton_tol not positive, the step-change limits."""
    cdef Py_ssize_t N = y0.shape[0], i
    mass = s0.get("mass")
    hp = s0.get("h_power")
    _check_common("run_radau", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps,
                  dae_ok=mass is not None and bool(np.any(np.asarray(mass) == 0.0)))
    _shape2("run_radau: T", T.shape[0], T.shape[1], 3, 3)
    _shape2("run_radau: TI", TI.shape[0], TI.shape[1], 3, 3)
    _shape2("run_radau: P", P.shape[0], P.shape[1], 3, 3)
    _size("run_radau: ti_c", ti_c.shape[0], 3)
    _size("run_radau: C", C.shape[0], 3)
    _size("run_radau: E", E.shape[0], 3)
    _positive("run_radau: gamma", gamma)
    _in_range("run_radau: min_factor", min_factor, 1e-300, 1.0)
    _in_range("run_radau: max_factor", max_factor, 1.0, 1e300)
    _in_range("run_radau: keep_below", keep_below, 1.0, 1e300)
    cdef int maxiter = int(s0["maxiter"])
    _index("run_radau: maxiter", maxiter, 1, 1 << 30)
    cdef double newton_tol = float(s0["newton_tol"])
    _positive("run_radau: newton_tol", newton_tol)
    _positive("run_radau: max_step", float(s0["max_step"]), True)
    _tolerances("run_radau", float(s0["rtol"]), float(s0["atol"]))
    _bind_complex()
    cdef RadauStepper st = RadauStepper.__new__(RadauStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    mv = np.ones(N) if mass is None else np.array(mass, dtype=np.float64).reshape(-1)
    _size("run_radau: mass", mv.shape[0], N)
    _all_finite("run_radau: mass", mv)
    st.unit_mass = mass is None
    st.mv = st.buf(0, mv)
    st.hpow = hp is not None
    st.hp_arr = np.zeros(N) if hp is None else np.array(hp, dtype=np.float64).reshape(-1)
    _size("run_radau: h_power", st.hp_arr.shape[0], N)
    _all_finite("run_radau: h_power", st.hp_arr)
    st.hwp_arr = np.ones(N)
    cdef double[::1] hwpv = st.hwp_arr
    st.hwp = &hwpv[0]
    st.hp_cached = -1.0
    eidx = (np.arange(N, dtype=np.intp) if st.hpow or bool(np.all(mv != 0.0))
            else np.flatnonzero(mv != 0.0).astype(np.intp))
    st.ne = eidx.shape[0]
    if st.ne == 0:
        raise ValueError("run_radau: no component in the error test (all masses zero)")
    st.keep.append(eidx)
    cdef Py_ssize_t[::1] eidxv = eidx
    st.eidx = &eidxv[0]
    st.use_cb = jac is not None
    st.jac = jac
    st.counters = counters
    st.maxiter = maxiter
    st.newton_tol = newton_tol
    st.rtol = float(s0["rtol"])
    st.atol = float(s0["atol"])
    st.max_step = float(s0["max_step"])
    st.gamma = gamma
    st.mu_r = mu.real
    st.mu_i = mu.imag
    st.min_factor = min_factor
    st.max_factor = max_factor
    st.keep_below = keep_below
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.Tm = st.buf(0, np.asarray(T))
    st.TI = st.buf(0, np.asarray(TI))
    st.tic = st.buf(0, np.asarray(ti_c).view(np.float64))
    st.P = st.buf(0, np.asarray(P))
    st.Cn = st.buf(0, np.asarray(C))
    st.E = st.buf(0, np.asarray(E))
    st.fy_arr = np.zeros(N)
    cdef double[::1] fyv = st.fy_arr
    st.fy = &fyv[0]
    st.J_arr = np.zeros(N * N)                    # column-major
    cdef double[::1] Jv = st.J_arr
    st.J = &Jv[0]
    st.Z_arr = np.zeros(3 * N)
    cdef double[::1] Zv = st.Z_arr
    st.Z = &Zv[0]
    st.LUr = st.buf(N * N)
    st.LUc = st.buf(2 * N * N)
    ipr = np.zeros(N, dtype=np.intc)
    ipc = np.zeros(N, dtype=np.intc)
    st.keep.append(ipr)
    st.keep.append(ipc)
    cdef int[::1] iprv = ipr
    cdef int[::1] ipcv = ipc
    st.ipr = &iprv[0]
    st.ipc = &ipcv[0]
    st.Znew = st.buf(3 * N)
    st.W = st.buf(3 * N)
    st.X = st.buf(3 * N)
    st.F = st.buf(3 * N)
    st.Fc = st.buf(6 * N)
    st.G = st.buf(N)
    st.rr = st.buf(N)
    st.rc = st.buf(2 * N)
    st.yz = st.buf(N)
    st.ynew = st.buf(N)
    st.fnew = st.buf(N)
    st.yprev = st.buf(N)
    st.scale = st.buf(N)
    st.ze = st.buf(N)
    st.err = st.buf(N)
    st.jwork = st.buf(3 * N)
    st.tmp = st.buf(N)
    st.y_trial = st.ynew
    st.ck = hist is not None
    st.Jsnap_arr = np.zeros(N * N if st.ck else 1)
    cdef double[::1] jsv = st.Jsnap_arr
    st.Jsnap = &jsv[0]
    st.load(s0)
    if lu_h0 != 0.0:                    # resume: the LU of a checkpoint
        st.factor(lu_h0)
        st.lu_valid = True
        st.lu_h = lu_h0
    _commit_args("run_radau", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
