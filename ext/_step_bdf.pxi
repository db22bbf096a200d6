# BDF stepper of the step loop (included by _steploop.pyx): backward differences,
# modified Newton, f.c_jac or a call-back, LAPACK LU.

cdef void _rescale(double* D, Py_ssize_t N, int k, double factor, double* R, double* U,
                   double* RU, double* tmp) noexcept nogil:
    """D[:k+1] = rescale_matrix(k, factor) @ D[:k+1] (= (R(k, factor) U)^T D), with
    the two dgemm calls of NumPy's matmul (``tmp``: (k+1) x N)."""
    cdef Py_ssize_t i, j, l, n1 = k + 1
    cdef int m1 = <int>n1, nn = <int>N
    cdef char tn = b'N', tt = b'T'
    for j in range(n1):
        R[j] = 1.0
        U[j] = 1.0
    for i in range(1, n1):
        R[i * n1] = 0.0
        U[i * n1] = 0.0
        for j in range(1, n1):
            R[i * n1 + j] = R[(i - 1) * n1 + j] * (((i - 1) - factor * j) / i)
            U[i * n1 + j] = U[(i - 1) * n1 + j] * (((i - 1) - 1.0 * j) / i)
    # RU = R @ U (row-major): column-major RU^T = U^T R^T
    dgemm(&tn, &tn, &m1, &m1, &m1, &D_ONE, U, &m1, R, &m1, &D_ZERO, RU, &m1)
    # (RU^T @ D)^T = D^T RU: column-major (N x n1) = row-major D_new
    dgemm(&tn, &tt, &nn, &m1, &m1, &D_ONE, D, &nn, RU, &m1, &D_ZERO, tmp, &nn)
    for l in range(n1 * N):
        D[l] = tmp[l]


cdef inline double _factor(double err, int order) noexcept nogil:
    return INFINITY if err == 0.0 else pow(err, -1.0 / (order + 1))


cdef inline double _rms_idx(double c, const double* v, const double* s,
                            const Py_ssize_t* idx, Py_ssize_t ne, double* tmp) noexcept nogil:
    """rms_norm(c * v[idx] / s[idx]) (NumPy's boolean-mask gather, then ``x.dot(x)``)."""
    cdef Py_ssize_t k
    cdef int n = <int>ne
    for k in range(ne):
        tmp[k] = (c * v[idx[k]]) / s[idx[k]]
    return sqrt(ddot(&n, tmp, &ONE, tmp, &ONE) / ne)


def _hook_factor(hook, J, double[::1] Jbuf, Py_ssize_t N, mass, double c):
    """bdf.py ``_newton_matrix`` and ``lu_factor`` with a ``newton_system`` hook: the
    LU factors (scipy's dgetrf, as the Python driver) of ``hook.matrix(J, mass, c)``;
    ``J`` the call-back's array, else a C-order copy of the column-major buffer.
    None when the hook raised (the caller hands the step over)."""
    if J is None:
        J = np.array(np.asarray(Jbuf).reshape(N, N).T, order="C")
    try:
        M = np.array(hook.matrix(J, mass, c), dtype=np.float64, order="F")
    except Exception:
        return None
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        return None
    lu, piv, info = _py_lapack().dgetrf(M, overwrite_a=True)
    return lu, piv


def _hook_solve(hook, lu, double[::1] r, double c_lu, double stale):
    """bdf.py ``_newton`` with a hook: ``solution(lu_solve(lu, rhs(r, c_lu)), r, c_lu)``
    (times the stale-factor scaling); None when the hook raised."""
    rr = np.array(r)
    try:
        dy = hook.solution(_py_lapack().dgetrs(lu[0], lu[1], hook.rhs(rr, c_lu))[0], rr, c_lu)
        if stale != 1.0:
            dy *= stale
        dy = np.ascontiguousarray(dy, dtype=np.float64)
    except Exception:
        return None
    return dy if dy.shape == (r.shape[0],) else None


cdef int _cb_jacobian(object jac, double t, object ypred, double* J, Py_ssize_t N,
                      double[::1] counters, list keep=None) except -1:
    """``Integrator.jac`` with a Jacobian call-back ``jac(t, y)`` (the dynamic analysis'
    ``dae_jacobian``): J (column-major) = jac(t, y_pred).  Returns 1 when the call-back
    raised or returned a wrong shape or non-finite values (the caller hands the step to
    the Python driver, which raises the named error), else 0."""
    cdef Py_ssize_t i, j
    cdef double[:, :] Jp
    counters[C_JEV] += 1.0
    try:
        A = jac(t, np.array(ypred))
        if hasattr(A, "toarray"):       # scipy.sparse
            A = A.toarray()
        A = np.asarray(A, dtype=np.float64)
    except Exception:
        return 1
    if A.ndim != 2 or A.shape[0] != N or A.shape[1] != N or not np.all(np.isfinite(A)):
        return 1
    if keep is not None:                # the array itself, for a newton_system hook
        keep[0] = A
    Jp = A
    for j in range(N):
        for i in range(N):
            J[j * N + i] = Jp[i, j]
    return 0


cdef int _jacobian(CompiledODE f, double t, const double* y, const double* scale,
                   double* J, double* work, Py_ssize_t N, double[::1] counters,
                   double* nfev0) noexcept:
    """``Integrator.jac`` without a user Jacobian: J (column-major) = ``f.c_jac`` —
    forward differences of ``c_eval`` (``num_jac``: f(t, y), then increment
    sqrt(eps) max(|y_j|, scale_j), one column per evaluation, counted in nfev and
    nfev_jac) or, for a right-hand side with ``analytic_jac`` (``CompiledRHS`` of a
    dense planar system of compiled force elements: Nikravesh (1988), §13.3, algorithm
    DI-4, the semi-analytic DI/CS Jacobian of ``mbcore.solve.dijac``), its own
    Jacobian, whose evaluation is not counted (as a Jacobian call-back of the Python
    driver: the loop adds it to ``nfev0``).  ``work``: 3N doubles.  Returns the
    failing evaluation's status (0 = OK)."""
    cdef long before = f.nfev
    cdef int status
    counters[C_JEV] += 1.0
    status = f.c_jac(t, y, N, scale, J, work)
    if f.analytic_jac and N == 2 * f.n + 1:
        nfev0[0] += f.nfev - before
    else:
        counters[C_FEV_JAC] += f.nfev - before
    return status


cdef class BDFStepper(Stepper):
    """``BDF`` (:func:`run_bdf`): the backward differences ``D`` (max_order + 3
    rows), order ``k``, step ``h_abs``, ``n_equal`` steps of that size, the Newton
    Jacobian ``J`` and its LU, the DAE options (mass diagonal, |h| powers of the
    error weights, a Jacobian call-back, a ``newton_system`` hook)."""
    cdef Py_ssize_t ND, ne
    cdef int k, kstep, max_order, maxiter
    cdef long n_equal, jac_age, jac_max_age
    cdef double h, h_abs, tnew, t_old, hstep, c_lu, newton_tol, refactor_ratio
    cdef double rtol, atol, max_step, min_factor, max_factor, keep_below
    cdef double err, safety
    cdef double* bdf_gamma
    cdef double* err_const
    cdef double* D
    cdef double* Dd
    cdef double* J
    cdef double* LU
    cdef int* ipiv
    cdef double* ypred
    cdef double* ynew
    cdef double* scale
    cdef double* psi
    cdef double* d
    cdef double* dy
    cdef double* fb
    cdef double* jwork
    cdef double* R
    cdef double* U
    cdef double* RU
    cdef double* tmp
    cdef double* pd
    cdef double* mv
    cdef double* hwp
    cdef char* alg
    cdef Py_ssize_t* eidx
    cdef object hp_arr, hwp_arr, mass_arr, J_arr, D_arr, jac, newton_system, hlu
    cdef object ypred_arr, dy_arr       # the arrays behind ypred, dy (Python call-backs)
    cdef list jkeep
    cdef bint alg_any, hpow, use_cb, use_hook
    cdef bint jac_valid, jac_current, lu_valid
    cdef double[::1] counters
    # checkpoints: the loop at the start of a step that may reach an output
    cdef bint ck, snap, snap_jv, snap_J, snap_lu
    cdef object Dsnap_arr, ysnap_arr, Jsnap_arr
    cdef double* Dsnap
    cdef double* ysnap
    cdef double* Jsnap
    cdef double snap_t, snap_h, snap_clu, snap_nfev
    cdef long snap_k, snap_neq, snap_age, snap_steps, snap_rej

    cdef int new_jacobian(self, double tnew) except -1:
        """A fresh Newton Jacobian at the prediction (1: the evaluation failed)."""
        cdef long nfev_cb
        cdef int l
        cdef Py_ssize_t N = self.N
        if self.snap and self.snap_jv and not self.snap_J:
            memcpy(self.Jsnap, self.J, N * N * sizeof(double))
            self.snap_J = True
        if self.use_cb:
            nfev_cb = self.f.nfev
            l = _cb_jacobian(self.jac, tnew, self.ypred_arr, self.J, N, self.counters,
                             self.jkeep)
            self.nfev0 += self.f.nfev - nfev_cb  # the call-back's evaluations: uncounted
            if l:
                return 1
        elif _jacobian(self.f, tnew, self.ypred, self.scale, self.J, self.jwork, N,
                       self.counters, &self.nfev0):
            return 1
        self.jac_valid = True
        self.jac_current = True
        self.jac_age = 0
        self.lu_valid = False
        return 0

    cdef void factor_lu(self, double c) noexcept:
        """M - c J; algebraic rows / c and algebraic unknowns * c: -J there
        (bdf.py _newton_matrix, index-2 scaling), factored by dgetrf."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int nn = <int>N, info = 0
        cdef double* J = self.J
        cdef double* LU = self.LU
        for j in range(N):
            for i in range(N):
                if self.alg[i] or self.alg[j]:
                    LU[j * N + i] = -J[j * N + i]
                else:
                    LU[j * N + i] = (self.mv[i] if i == j else 0.0) - c * J[j * N + i]
        dgetrf(&nn, &nn, LU, &nn, self.ipiv, &info)

    cdef int attempt(self, double next_out) except -1:
        """BDF._step_impl up to the accepted solution of the step."""
        cdef Py_ssize_t N = self.N, i, j, ne = self.ne
        cdef int k, it, n_iter, info = 0, one = 1, nn = <int>N, maxiter = self.maxiter, l
        cdef double t = self.t, t1 = self.t1, tnew, h, min_step, c, a, stale, ratio, fac
        cdef double hw, dy_norm, dy_norm_old = 0.0, rate = 0.0, err
        cdef char trans = b'N'
        cdef bint converged, have_old, have_rate
        cdef double* D = self.D
        cdef double* ynew = self.ynew
        cdef double* ypred = self.ypred
        cdef double* scale = self.scale
        cdef double* psi = self.psi
        cdef double* d = self.d
        cdef double* dy = self.dy
        cdef double* fb = self.fb
        cdef double* mv = self.mv
        cdef double[::1] dyv
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        # checkpoints: every attempt of this step ends before t + 2 max(h_abs,
        # min_step) (attempts only shrink); keep the state if an output lies there
        self.snap = self.ck and \
            next_out <= t + 2.0 * (self.h_abs if self.h_abs > min_step else min_step)
        if self.snap:
            memcpy(self.Dsnap, D, self.ND * N * sizeof(double))
            memcpy(self.ysnap, self.y, N * sizeof(double))
            self.snap_t, self.snap_h, self.snap_k, self.snap_neq = \
                t, self.h_abs, self.k, self.n_equal
            self.snap_jv, self.snap_J, self.snap_age = self.jac_valid, False, self.jac_age
            self.snap_lu, self.snap_clu = self.lu_valid, self.c_lu
            self.snap_steps, self.snap_rej, self.snap_nfev = self.nsteps, self.nrej, self.nfev()
            self.f.c_save()
        if self.h_abs > self.max_step:
            _rescale(D, N, self.k, self.max_step / self.h_abs, self.R, self.U, self.RU,
                     self.tmp)
            self.h_abs *= self.max_step / self.h_abs
            self.n_equal = 0
        elif self.h_abs < min_step:
            _rescale(D, N, self.k, min_step / self.h_abs, self.R, self.U, self.RU, self.tmp)
            self.h_abs *= min_step / self.h_abs
            self.n_equal = 0
        while True:
            k = self.k
            if self.h_abs < min_step:
                self.h = self.h_abs
                return LOOP_STEP_TOO_SMALL
            h = self.h_abs
            tnew = t + h
            if tnew - t1 > 0 or fabs(t1 - tnew) < min_step:
                fac = fabs(t1 - t) / self.h_abs
                _rescale(D, N, k, fac, self.R, self.U, self.RU, self.tmp)
                self.h_abs *= fac
                self.n_equal = 0
                tnew = t1
                h = tnew - t
            self.h = h
            self.tnew = tnew
            _vecmat(&self.bdf_gamma[1], &D[N], k, N, psi)
            for i in range(N):
                a = D[i]
                for j in range(1, k + 1):
                    a = a + D[j * N + i]
                ypred[i] = a
                scale[i] = self.atol + self.rtol * fabs(a)
                psi[i] = psi[i] / self.bdf_gamma[k]
            hw = fabs(h)                    # bdf.py's local h_abs (the |h|^p weights)
            if self.hpow:
                np.power(hw, self.hp_arr, out=self.hwp_arr)
                for i in range(N):
                    scale[i] = scale[i] / self.hwp[i]
            c = h / self.bdf_gamma[k]
            if not self.jac_valid:
                if self.new_jacobian(tnew):
                    return LOOP_EVAL_FAILED
            if self.use_hook:
                try:
                    l = 1 if self.newton_system.update(tnew, np.array(self.ypred_arr)) \
                        else 0
                except Exception:
                    return LOOP_EVAL_FAILED
                if l:
                    self.lu_valid = False
            if self.use_hook and (not self.lu_valid or fabs(c / self.c_lu - 1.0)
                                  > self.refactor_ratio):
                self.hlu = _hook_factor(self.newton_system,
                                        self.jkeep[0] if self.use_cb else None, self.J_arr,
                                        N, self.mass_arr, c)
                if self.hlu is None:
                    return LOOP_EVAL_FAILED
                self.counters[C_LU] += 1.0
                self.lu_valid = True
                self.c_lu = c
            elif not self.lu_valid or fabs(c / self.c_lu - 1.0) > self.refactor_ratio:
                self.factor_lu(c)
                self.counters[C_LU] += 1.0
                self.lu_valid = True
                self.c_lu = c
            # ---- modified Newton for d (BDF._newton) --------------------------------
            for i in range(N):
                d[i] = 0.0
                ynew[i] = ypred[i]
            ratio = self.c_lu / c
            stale = 1.0 if ratio == 1.0 else 2.0 / (1.0 + ratio)
            have_old = False
            have_rate = False
            converged = False
            it = 0
            while it < maxiter:
                if self.f.c_eval(tnew, ynew, fb):
                    return LOOP_EVAL_FAILED
                if self.use_hook:               # the problem's own Newton system
                    for i in range(N):
                        dy[i] = c * fb[i] - mv[i] * (psi[i] + d[i])
                    dyh = _hook_solve(self.newton_system, self.hlu, self.dy_arr,
                                      self.c_lu, stale)
                    self.counters[C_SOLVE] += 1.0
                    if dyh is None:
                        return LOOP_EVAL_FAILED
                    dyv = dyh
                    for i in range(N):
                        dy[i] = dyv[i]
                else:
                    for i in range(N):
                        if self.alg[i]:         # algebraic rows are divided by c
                            dy[i] = fb[i]
                        else:
                            dy[i] = c * fb[i] - mv[i] * (psi[i] + d[i])
                    dgetrs(&trans, &nn, &one, self.LU, &nn, self.ipiv, dy, &nn, &info)
                    self.counters[C_SOLVE] += 1.0
                    if self.alg_any:            # the algebraic unknowns were c * dy
                        for i in range(N):
                            if self.alg[i]:
                                dy[i] /= self.c_lu
                    if stale != 1.0:
                        for i in range(N):
                            dy[i] *= stale
                dy_norm = _rms_idx(1.0, dy, scale, self.eidx, ne, self.tmp)
                if not dy_norm < INFINITY:        # singular M or overflow: a failure
                    break
                if have_old:
                    rate = dy_norm / dy_norm_old
                    have_rate = True
                    if rate >= 1 or pow(rate, maxiter - it) / (1 - rate) * dy_norm > \
                            self.newton_tol:
                        # stagnation at round-off (BDF._noise_converged)
                        if dy_norm_old <= 100.0 * EPS * _rms_idx(1.0, ynew, scale,
                                                                 self.eidx, ne, self.tmp):
                            converged = True
                        break
                for i in range(N):
                    ynew[i] += dy[i]
                    d[i] += dy[i]
                if dy_norm == 0.0 or (have_rate and rate / (1 - rate) * dy_norm
                                      < self.newton_tol):
                    converged = True
                    break
                dy_norm_old = dy_norm
                have_old = True
                it += 1
            if it == maxiter:
                it = maxiter - 1
            n_iter = it + 1
            self.counters[C_NITER] += n_iter
            if not converged:
                self.nrej += 1
                self.counters[C_NEWTON] += 1.0
                if not self.jac_current:
                    if self.new_jacobian(tnew):
                        return LOOP_EVAL_FAILED
                    continue
                _rescale(D, N, k, 0.5, self.R, self.U, self.RU, self.tmp)
                self.h_abs *= 0.5
                self.n_equal = 0
                continue
            self.safety = 0.9 * (2 * maxiter + 1) / (2 * maxiter + n_iter)
            for i in range(N):
                scale[i] = self.atol + self.rtol * fabs(ynew[i])
            if self.hpow:
                for i in range(N):
                    scale[i] = scale[i] / self.hwp[i]
            err = _rms_idx(self.err_const[k], d, scale, self.eidx, ne, self.tmp)
            self.err = err
            if err > 1.0:
                self.nrej += 1
                self.counters[C_ERR] += 1.0
                fac = self.safety * pow(err, -1.0 / (k + 1))
                if fac < self.min_factor:
                    fac = self.min_factor
                _rescale(D, N, k, fac, self.R, self.U, self.RU, self.tmp)
                self.h_abs *= fac
                self.n_equal = 0
                continue
            break
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        cdef Py_ssize_t N = self.N
        if self.snap:
            hist.update(t=self.snap_t, y=np.array(self.ysnap_arr),
                        D=np.array(self.Dsnap_arr), k=self.snap_k,
                        n_equal=self.snap_neq, h_abs=self.snap_h,
                        J=(np.array(self.Jsnap_arr) if self.snap_J else np.array(self.J_arr))
                        if self.snap_jv else None, jac_age=self.snap_age,
                        c_lu=self.snap_clu if self.snap_lu else 0.0,
                        counts=np.array([self.snap_steps, self.snap_rej, self.snap_nfev],
                                        dtype=float))
        else:
            hist["t"] = None
        return 0

    cdef int accept(self, bint due) except -1:
        cdef Py_ssize_t N = self.N, i, j
        cdef int k = self.k, best
        cdef double best_factor, fm, fac
        cdef double* D = self.D
        self.n_equal += 1
        self.t_old = self.t
        self.t = self.tnew
        for i in range(N):
            self.y[i] = self.ynew[i]
            D[(k + 2) * N + i] = self.d[i] - D[(k + 1) * N + i]
            D[(k + 1) * N + i] = self.d[i]
            for j in range(k, -1, -1):
                D[j * N + i] += D[(j + 1) * N + i]
        self.kstep = k
        self.hstep = self.h
        if due:
            memcpy(self.Dd, D, (k + 1) * N * sizeof(double))
        self.jac_current = False
        self.jac_age += 1
        if self.jac_age >= self.jac_max_age:
            self.jac_valid = False
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), k)
        if self.n_equal >= k + 1:
            # order k-1, k, k+1: the one allowing the largest step
            best = 0
            best_factor = _factor(self.err, k)
            if k > 1:
                fm = _factor(_rms_idx(self.err_const[k - 1], &D[k * N], self.scale,
                                      self.eidx, self.ne, self.tmp), k - 1)
                if fm > best_factor:
                    best = -1
                    best_factor = fm
            if k < self.max_order:
                fm = _factor(_rms_idx(self.err_const[k + 1], &D[(k + 2) * N], self.scale,
                                      self.eidx, self.ne, self.tmp), k + 1)
                if fm > best_factor:
                    best = 1
                    best_factor = fm
            fac = self.safety * best_factor
            if fac > self.max_factor:
                fac = self.max_factor
            if not (best == 0 and 1.0 <= fac < self.keep_below):
                self.k = k + best
                _rescale(D, N, self.k, fac, self.R, self.U, self.RU, self.tmp)
                self.h_abs *= fac
                self.n_equal = 0
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_abs

    cdef int dense(self, double tt, double* out) except -1:
        """The backward-difference polynomial of the step just taken
        (``BackwardDifferenceDenseOutput``)."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int kstep = self.kstep
        cdef double sg = (tt - self.t) / self.hstep, a = 1.0
        cdef double* Dd = self.Dd
        cdef double* pd = self.pd
        for j in range(kstep):
            if j == 0:
                a = (sg + j) / (j + 1)
            else:
                a = a * ((sg + j) / (j + 1))
            pd[j] = a
        for i in range(N):
            a = 0.0
            for j in range(kstep):
                a += pd[j] * Dd[(j + 1) * N + i]
            out[i] = Dd[i] + a
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``BDF.restart`` (``_restart_impl``: D_0 = y, D_1 = h y',
        order 1, the first step of ``select_initial_step``, no Jacobian nor LU),
        loaded from that object's ``loop_start()``."""
        cdef Py_ssize_t N = self.N, ND = self.ND
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        cdef double[:, ::1] D = np.ascontiguousarray(s0["D"], dtype=np.float64)
        _shape2("run_bdf: restart D", D.shape[0], D.shape[1], ND, N)
        memcpy(self.D, &D[0, 0], ND * N * sizeof(double))
        self.k = int(s0["k"])
        self.h_abs = float(s0["h_abs"])
        self.n_equal = int(s0["n_equal"])
        self.jac_valid = False
        self.jac_current = False
        self.jac_age = 0
        self.lu_valid = False
        self.c_lu = 0.0
        self.hlu = None
        self.jkeep[0] = None
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), self.kstep, self.nsteps, self.nrej,
                   self.nfev())
        elif code == LOOP_BUDGET:
            _stats(stats, self.h_abs, self.k, self.nsteps, self.nrej, self.nfev())
        else:
            _stats(stats, self.h, self.k, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h_abs


def run_bdf(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
            double[:, ::1] D0 not None, int k, double h_abs, long n_equal, int max_order,
            int maxiter, double newton_tol, long jac_max_age, double refactor_ratio,
            double rtol, double atol, double max_step,
            const double[::1] bdf_gamma not None, const double[::1] err_const not None,
            double min_factor, double max_factor, double keep_below,
            double[::1] t_out not None, Py_ssize_t i_out, object on_output,
            double[::1] stats not None, double[::1] counters not None,
            long nfev_start=0, const idx_t[::1] stop_idx=None,
            const double[::1] stop_val=None, const double[::1] stop_sign=None,
            const double[::1] mass=None, object jac=None, const double[::1] h_power=None,
            object newton_system=None, double[::1] ystep=None, dict hist=None,
            const double[::1] J0=None, long jac_age0=0, double c_lu0=0.0,
            long max_steps=0, object on_commit=None, object restart=None):
    """Integrate from (t0, y0) to t1 > t0 by ``BDF`` (:class:`BDFStepper`) from its
    state after ``_restart_impl``: differences ``D0`` (max_order + 3 rows), order
    ``k``, ``h_abs``, ``n_equal``; no Jacobian nor LU yet.  ``bdf_gamma``,
    ``err_const``: ``BDF_GAMMA``, ``BDF_ERROR_CONST``; ``min_factor``, ``max_factor``,
    ``keep_below``: the step-change limits.  Dense output at ``t_out[i_out:]``: the
    backward-difference polynomial of the step (``BackwardDifferenceDenseOutput``).

    DAE options of ``BDF`` (Nikravesh (1988), §12.4, §13.3.4): ``mass`` the diagonal of
    the constant mass matrix (zeros: algebraic components, index-2 scaling of their
    rows and columns in the Newton matrix, out of the error test and the Newton norm;
    their start-up is the Python object's ``_restart_impl``), ``h_power`` the power of
    |h| weighting each component's error (all components then count), ``jac`` a
    Jacobian call-back ``jac(t, y)`` (its evaluations of ``f`` are not counted, as the
    Python driver does not count them; else ``f.c_jac``: forward differences of ``f``,
    column by column, or the right-hand side's own Jacobian, see :func:`_jacobian`).
    ``newton_system``: the hook object of ``BDF`` (``update``, ``matrix``, ``rhs``,
    ``solution``; bdf.py ``NewtonSystem``), called as the Python driver calls it, its
    matrix factored and solved by the same LAPACK calls.  A call-back or hook that
    raises or returns a wrong or non-finite matrix hands the step to the Python
    driver (code 2), which raises the named error.
    Checkpoints (exact resume): before the outputs of a step, ``ystep`` (N + 2
    floats) receives its end state, time and ``h_abs``, and ``hist`` (a dict) the
    state of the loop at that step's start, from which the step is redone: ``t``,
    ``y`` (copies), ``D`` (a copy), ``k``, ``n_equal``, ``h_abs``, ``J`` (a copy, None
    when it is to be re-evaluated), ``jac_age``, ``c_lu`` (0: no LU) and ``counts``
    (steps, rejected steps, evaluations counted before the step); ``t`` None: not
    available.  (A copy of D is kept at the start of each step that may reach an
    output, of J before it is re-evaluated in such a step.)
    ``J0``, ``jac_age0``, ``c_lu0``: start from such a state (column-major ``J0``; the
    LU of ``c_lu0`` > 0 is refactored from it, uncounted; with ``newton_system`` by
    the hook's ``matrix``, which its ``update`` at the next step may renew).
    ``on_commit``, ``restart``: a change of coordinates at step ends, the method
    restarted there (as :func:`run_abm`'s; the Jacobian and LU are discarded).
    Returns ``(code, t, y, i_out, h_abs)`` (module docstring).  Refused (ValueError
    naming the argument): the checks of :func:`_check_common`, max_order outside
    [1, 6], k outside [1, max_order], D0 not (max_order + 3, N) or non-finite,
    bdf_gamma / err_const shorter than max_order + 1 / + 2, maxiter < 1,
    jac_max_age < 1, mass / h_power / J0 of the wrong size or non-finite, h_abs or
    newton_tol not positive and finite, max_step not > 0, rtol / atol, the
    step-change limits (0 < min_factor <= 1 <= max_factor, keep_below >= 1,
    refactor_ratio >= 0, all finite)."""
    cdef Py_ssize_t N = y0.shape[0], ND = max_order + 3, i
    _check_common("run_bdf", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps, dae_ok=mass is not None)
    _index("run_bdf: max_order", max_order, 1, 6)
    _index("run_bdf: order k", k, 1, max_order)
    _shape2("run_bdf: D0", D0.shape[0], D0.shape[1], ND, N)
    _need("run_bdf: bdf_gamma", bdf_gamma.shape[0], max_order + 1)
    _need("run_bdf: err_const", err_const.shape[0], max_order + 2)
    _index("run_bdf: maxiter", maxiter, 1, 1 << 30)
    if jac_max_age < 1:
        raise ValueError(f"run_bdf: jac_max_age = {jac_max_age} must be >= 1")
    _all_finite("run_bdf: D0", D0)
    _all_finite("run_bdf: bdf_gamma", bdf_gamma[:max_order + 1])
    _all_finite("run_bdf: err_const", err_const[:max_order + 2])
    if mass is not None:
        _size("run_bdf: mass", mass.shape[0], N)
        _all_finite("run_bdf: mass", mass)
    if h_power is not None:
        _size("run_bdf: h_power", h_power.shape[0], N)
        _all_finite("run_bdf: h_power", h_power)
    if J0 is not None:
        _size("run_bdf: J0", J0.shape[0], N * N)
    _positive("run_bdf: h_abs", h_abs)
    _positive("run_bdf: newton_tol", newton_tol)
    _positive("run_bdf: max_step", max_step, True)
    _tolerances("run_bdf", rtol, atol)
    _in_range("run_bdf: min_factor", min_factor, 1e-300, 1.0)
    _in_range("run_bdf: max_factor", max_factor, 1.0, 1e300)
    _in_range("run_bdf: keep_below", keep_below, 1.0, 1e300)
    _in_range("run_bdf: refactor_ratio", refactor_ratio, 0.0, 1e300)
    cdef BDFStepper st = BDFStepper.__new__(BDFStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    # the mass diagonal (ones: the ODE form), algebraic components and the components
    # of the error test and the Newton norm (bdf.py: _diff, _err_mask)
    mv = np.ones(N) if mass is None else np.array(mass, dtype=np.float64)
    st.mass_arr = mv
    st.mv = st.buf(0, mv)
    alg = (mv == 0.0).astype(np.int8)
    st.keep.append(alg)
    cdef char[::1] algv = alg
    st.alg = &algv[0]
    st.alg_any = bool(np.any(mv == 0.0))
    st.hpow = h_power is not None
    # |h|^p by NumPy's power (bdf.py's ``h_abs ** h_power``): its vectorised pow is
    # not libm's to the last bit, and the weights must be those of the Python driver
    st.hp_arr = np.zeros(N) if h_power is None else np.array(h_power, dtype=np.float64)
    st.hwp_arr = np.ones(N)
    cdef double[::1] hwpv = st.hwp_arr
    st.hwp = &hwpv[0]
    eidx = (np.arange(N, dtype=np.intp) if st.hpow or not st.alg_any
            else np.flatnonzero(mv != 0.0).astype(np.intp))
    st.ne = eidx.shape[0]
    if st.ne == 0:
        raise ValueError("run_bdf: no component in the error test (all masses zero)")
    st.keep.append(eidx)
    cdef Py_ssize_t[::1] eidxv = eidx
    st.eidx = &eidxv[0]
    st.use_cb = jac is not None
    st.jac = jac
    st.use_hook = newton_system is not None
    st.newton_system = newton_system
    st.jkeep = [None]                   # the call-back's Jacobian array (for the hook)
    st.hlu = None                       # the hook's LU factors (scipy's dgetrf)
    st.counters = counters
    st.ND = ND
    st.k = k
    st.kstep = k
    st.max_order = max_order
    st.maxiter = maxiter
    st.n_equal = n_equal
    st.jac_max_age = jac_max_age
    st.h_abs = h_abs
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.hstep = 0.0
    st.newton_tol = newton_tol
    st.refactor_ratio = refactor_ratio
    st.rtol = rtol
    st.atol = atol
    st.max_step = max_step
    st.min_factor = min_factor
    st.max_factor = max_factor
    st.keep_below = keep_below
    st.safety = 1.0
    st.err = 0.0
    st.bdf_gamma = st.buf(0, np.asarray(bdf_gamma))
    st.err_const = st.buf(0, np.asarray(err_const))
    st.D_arr = np.array(D0, dtype=np.float64)
    cdef double[:, ::1] Dv = st.D_arr
    st.D = &Dv[0, 0]
    st.Dd = st.buf((max_order + 1) * N)
    st.J_arr = np.zeros(N * N)                    # column-major
    cdef double[::1] Jv = st.J_arr
    st.J = &Jv[0]
    st.LU = st.buf(N * N)                         # column-major
    ipiv = np.zeros(N, dtype=np.intc)
    st.keep.append(ipiv)
    cdef int[::1] ipivv = ipiv
    st.ipiv = &ipivv[0]
    st.ypred = st.buf(N)
    st.ypred_arr = st.keep[len(st.keep) - 1]
    st.ynew = st.buf(N)
    st.scale = st.buf(N)
    st.psi = st.buf(N)
    st.d = st.buf(N)
    st.dy = st.buf(N)
    st.dy_arr = st.keep[len(st.keep) - 1]
    st.fb = st.buf(N)
    st.jwork = st.buf(3 * N)                      # the Jacobian's work
    st.R = st.buf((max_order + 1) * (max_order + 1))   # R(k, factor), U: (k+1)^2
    st.U = st.buf((max_order + 1) * (max_order + 1))
    st.RU = st.buf((max_order + 1) * (max_order + 1))
    st.tmp = st.buf((max_order + 1) * N)
    st.pd = st.buf(max_order + 1)
    st.y_trial = st.ynew
    st.ck = hist is not None
    st.Dsnap_arr = np.zeros((ND if st.ck else 1, N if st.ck else 1))
    st.ysnap_arr = np.zeros(N if st.ck else 1)
    st.Jsnap_arr = np.zeros(N * N if st.ck else 1)
    cdef double[:, ::1] dsv = st.Dsnap_arr
    cdef double[::1] ysv = st.ysnap_arr
    cdef double[::1] jsv = st.Jsnap_arr
    st.Dsnap = &dsv[0, 0]
    st.ysnap = &ysv[0]
    st.Jsnap = &jsv[0]
    st.snap_t = t0
    st.snap_k = k
    if J0 is not None:                  # resume: the Jacobian (and LU) of a checkpoint
        for i in range(N * N):
            st.J[i] = J0[i]
        st.jac_valid = True
        st.jac_age = jac_age0
        if st.use_cb:                   # the call-back's array (row-major), for the hook
            st.jkeep[0] = np.array(st.J_arr.reshape(N, N).T, order="C")
        if st.use_hook and c_lu0 > 0.0:  # the hook's matrix of that J and c
            st.hlu = _hook_factor(newton_system, st.jkeep[0] if st.use_cb else None,
                                  st.J_arr, N, mv, c_lu0)
            if st.hlu is not None:
                st.lu_valid = True
                st.c_lu = c_lu0
        elif c_lu0 > 0.0:
            st.factor_lu(c_lu0)
            st.lu_valid = True
            st.c_lu = c_lu0
    _commit_args("run_bdf", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
