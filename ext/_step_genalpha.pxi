# Generalized-α stepper of the step loop (included by _steploop.pyx): the second-order
# form of ``mbplugins.integrators.genalpha.GeneralizedAlpha`` (Chung & Hulbert (1993);
# Arnold & Brüls (2007)) for y = [q (p); qd (p); lam (k); extras] with q' = qd, the mass
# M_v on qd (diagonal) and k index-3 multipliers (the ``stiff`` formulation), fixed
# step, modified Newton on (q''_n+1, lam_n+1) stopped on the residuals, f.c_jac or a
# Jacobian call-back, LU of the (p + k) scaled iteration matrix.

#: solve_step: Newton failed with a fresh Jacobian (the fixed step hands the step to the
#: Python driver, which raises NewtonFailure; the variable step shrinks it)
cdef enum:
    GA_NEWTON_FAILED = 100


#: GeneralizedAlpha's NEWTON_STALL_ACCEPT
cdef double GA_STALL_ACCEPT = 100.0


cdef int _cb_update(object update, double t, object y, object J) except -1:
    """GeneralizedAlpha's ``jacobian_update(t, y, J)``: the fast blocks of the Jacobian
    refreshed in place (``J`` the loop's column-major buffer seen as an N x N array).
    Returns 1 when the call-back raised (the caller hands the step to the Python
    driver), else 0."""
    try:
        update(t, np.array(y), J)
    except Exception:
        return 1
    return 0


cdef class GenAlphaStepper(Stepper):
    """``GeneralizedAlpha`` (:func:`run_genalpha`): the grid ``t_start + i h_step``,
    the true and algorithmic accelerations ``acc``, ``a``, the right-hand side ``fn``
    at the last Newton iterate (its trailing rates: the quadratures), the Jacobian
    (N x N, column-major; ``f.c_jac`` or the call-back ``jac``) and the LU of the
    (p + k) x (p + k) iteration matrix (``k`` multipliers, ``mv`` the mass of the
    velocity rows, ``atol`` the constraints' residual tolerance)."""
    cdef Py_ssize_t p, k
    cdef double t_start, h_step, h, tnew, t_old, c_lu, a_m, a_f, g, b, rtol, atol
    cdef bint use_cb, use_upd
    cdef object jac, ynew_arr, upd, J_F
    cdef double* mv
    cdef long i_step, i_top, nsteps_top, nrej_top, max_age, jac_age, age_top
    cdef int maxiter
    cdef bint jac_valid, jac_current, lu_valid, ck, jv_top, lu_top, J_kept
    cdef object J_arr, Jsnap_arr, acc_arr, a_arr, fn_arr
    cdef double clu_top, nfev_top
    cdef double* J
    cdef double* Jsnap
    cdef double* LU
    cdef int* ipiv
    cdef double* acc
    cdef double* a
    cdef double* fn
    cdef double* acc_new
    cdef double* acc_old
    cdef double* fn_old
    cdef double* y_old
    cdef double* ynew
    cdef double* fb
    cdef double* x
    cdef double* fd_floor
    cdef double* jwork
    cdef double[::1] counters
    # checkpoints: acc, a and fn at the step's start
    cdef double* acc_top
    cdef double* a_top
    cdef double* fn_top

    cdef void factor_lu(self, double h) noexcept:
        """GeneralizedAlpha._matrix: ``[[M_v - β' h^2 J_vq - γ' h J_vv, -J_vlam],
        [J_lamq, 0]]`` ((p + k) square, column-major), factored by dgetrf."""
        cdef Py_ssize_t N = self.N, p = self.p, k = self.k, P = self.p + self.k, i, j
        cdef int pp = <int>P, info = 0
        cdef double r = (1.0 - self.a_f) / (1.0 - self.a_m)
        cdef double bb = self.b * r * h * h, gg = self.g * r * h
        for j in range(p):
            for i in range(p):
                self.LU[j * P + i] = -(bb * self.J[j * N + p + i]
                                       + gg * self.J[(p + j) * N + p + i])
            self.LU[j * P + j] += self.mv[j]
            for i in range(k):
                self.LU[j * P + p + i] = self.J[j * N + 2 * p + i]
        for j in range(k):
            for i in range(p):
                self.LU[(p + j) * P + i] = -self.J[(2 * p + j) * N + p + i]
            for i in range(k):
                self.LU[(p + j) * P + p + i] = 0.0
        dgetrf(&pp, &pp, self.LU, &pp, self.ipiv, &info)

    cdef int attempt(self, double next_out) except -1:
        """:meth:`attempt_flushed` with subnormal numbers flushed to zero
        (``_subnormals.pxi``: the decaying high-frequency parts of the algorithmic
        accelerations reach the subnormal range in long runs of a damped method, and
        arithmetic on them took twice the time per step on the stiff chain after
        2.5 s)."""
        cdef unsigned int mode = mbcore_flush_subnormals()
        try:
            return self.attempt_flushed()
        finally:
            mbcore_restore_fp_mode(mode)

    cdef void save_top(self) noexcept:
        """The state at the step's start for a checkpoint (``save_start``): the
        Jacobian's flags, the counts, the accelerations and f."""
        cdef Py_ssize_t N = self.N, p = self.p
        self.i_top, self.jv_top, self.J_kept, self.lu_top, self.clu_top = \
            self.i_step, self.jac_valid, False, self.lu_valid, self.c_lu
        self.age_top = self.jac_age
        self.nsteps_top, self.nrej_top, self.nfev_top = self.nsteps, self.nrej, self.nfev()
        memcpy(self.acc_top, self.acc, p * sizeof(double))
        memcpy(self.a_top, self.a, p * sizeof(double))
        memcpy(self.fn_top, self.fn, N * sizeof(double))

    cdef int attempt_flushed(self) except -1:
        """GeneralizedAlpha._step_impl up to the solution of the step (``_next_step``,
        then :meth:`solve_step`)."""
        cdef double t = self.t, tnew, h
        cdef int code
        if self.ck:
            self.save_top()
            self.f.c_save()
        self.i_step += 1
        tnew = self.t_start + (<double>self.i_step) * self.h_step
        if tnew - self.t1 > -1e-9 * self.h_step:
            tnew = self.t1
        h = tnew - t
        self.h = h
        self.tnew = tnew
        if fabs(h) < 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300):
            return LOOP_STEP_TOO_SMALL
        code = self.solve_step(tnew, h)
        if code == GA_NEWTON_FAILED:
            # NewtonFailure: the Python driver redoes this step and raises it
            return LOOP_EVAL_FAILED
        if code:
            return code
        self.t_end = tnew
        return 0

    cdef int solve_step(self, double tnew, double h) except -1:
        """One step of size h from (t, y) into ``ynew``, ``acc_new``, ``fb``
        (GeneralizedAlpha ``_predict``, ``_attempt``, ``_solve_second`` and the
        quadratures of ``_finish``): 0, LOOP_EVAL_FAILED (an evaluation failed) or
        GA_NEWTON_FAILED (Newton failed with a fresh Jacobian)."""
        cdef Py_ssize_t N = self.N, p = self.p, k = self.k, i
        cdef int info = 0, one = 1, pp = <int>(p + k), it, tries, iters
        cdef double r, bb, gg, an, rn, sa, sf, worst, worst_old = 0.0, phitol, ph, mb
        cdef double* mv = self.mv
        cdef long nfev_cb
        cdef int l
        cdef double a_m = self.a_m, a_f = self.a_f, g = self.g, b = self.b
        cdef char trans = b'N'
        cdef bint ok, have_old, stalled
        cdef double* y = self.y
        cdef double* ynew = self.ynew
        cdef double* fb = self.fb
        cdef double* x = self.x
        cdef double* accn = self.acc_new
        r = (1.0 - a_f) / (1.0 - a_m)
        bb = b * r * h * h
        gg = g * r * h
        # the predictor: q''_n+1 = q''_n (GeneralizedAlpha._predict)
        memcpy(ynew, y, N * sizeof(double))
        for i in range(p):
            an = ((1.0 - a_f) * self.acc[i] + a_f * self.acc[i] - a_m * self.a[i]) / (1.0 - a_m)
            ynew[i] += h * y[p + i] + (h * h) * ((0.5 - b) * self.a[i] + b * an)
            ynew[p + i] += h * ((1.0 - g) * self.a[i] + g * an)
        # the constraints' tolerance newton_atol max(1, |q|) at the predictor
        phitol = 1.0
        for i in range(p):
            if fabs(ynew[i]) > phitol:
                phitol = fabs(ynew[i])
        phitol = self.atol * phitol
        mb = -1.0 / bb
        ok = False
        for tries in range(2):
            if tries == 1:      # the retry starts from the predictor again (and its
                memcpy(ynew, y, N * sizeof(double))     # Jacobian is evaluated there)
                for i in range(p):
                    an = ((1.0 - a_f) * self.acc[i] + a_f * self.acc[i]
                          - a_m * self.a[i]) / (1.0 - a_m)
                    ynew[i] += h * y[p + i] + (h * h) * ((0.5 - b) * self.a[i] + b * an)
                    ynew[p + i] += h * ((1.0 - g) * self.a[i] + g * an)
            if not self.jac_valid or (self.max_age > 0 and self.jac_age >= self.max_age):
                if self.ck and self.jv_top and not self.J_kept:
                    memcpy(self.Jsnap, self.J, N * N * sizeof(double))
                    self.J_kept = True
                if self.use_cb:         # the analysis' DAE Jacobian (Integrator.jac)
                    nfev_cb = self.f.nfev
                    l = _cb_jacobian(self.jac, tnew, self.ynew_arr, self.J, N,
                                     self.counters)
                    self.nfev0 += self.f.nfev - nfev_cb  # its evaluations: uncounted
                    if l:
                        return LOOP_EVAL_FAILED
                else:
                    _difference_floor(ynew, p, N, self.fd_floor)
                    if _jacobian(self.f, tnew, ynew, self.fd_floor, self.J, self.jwork, N,
                                 self.counters, &self.nfev0):
                        return LOOP_EVAL_FAILED
                self.jac_valid = True
                self.jac_current = True
                self.jac_age = 0
                self.lu_valid = False
            elif self.use_upd:          # the fast blocks at the predictor, a new LU
                if self.ck and self.jv_top and not self.J_kept:
                    memcpy(self.Jsnap, self.J, N * N * sizeof(double))
                    self.J_kept = True
                nfev_cb = self.f.nfev
                l = _cb_update(self.upd, tnew, self.ynew_arr, self.J_F)
                self.nfev0 += self.f.nfev - nfev_cb      # its evaluations: uncounted
                if l:
                    return LOOP_EVAL_FAILED
                self.lu_valid = False
            # (within 1e-6 of the factored step: the same LU, as the Python driver)
            if not self.lu_valid or fabs(h - self.c_lu) > 1e-6 * fabs(h):
                self.factor_lu(h)
                self.counters[C_LU] += 1.0
                self.lu_valid = True
                self.c_lu = h
            # ---- Newton on q''_n+1, stopped on the residual (_solve_second) ----------
            memcpy(accn, self.acc, p * sizeof(double))
            have_old = False
            iters = 0
            for it in range(self.maxiter + 1):
                if self.f.c_eval(tnew, ynew, fb):
                    return LOOP_EVAL_FAILED
                sa = 0.0
                sf = 0.0
                rn = 0.0
                for i in range(p):
                    an = mv[i] * accn[i]
                    x[i] = fb[p + i] - an
                    if fabs(x[i]) > rn:
                        rn = fabs(x[i])
                    if fabs(an) > sa:
                        sa = fabs(an)
                    if fabs(fb[p + i]) > sf:
                        sf = fabs(fb[p + i])
                worst = (rn / (sa + sf + 1e-300)) / self.rtol
                if k:
                    ph = 0.0
                    for i in range(k):
                        if fabs(fb[2 * p + i]) > ph:
                            ph = fabs(fb[2 * p + i])
                    if ph / phitol > worst:
                        worst = ph / phitol
                iters = it
                if not worst < INFINITY:
                    break
                if worst <= 1.0:
                    ok = True
                    break
                stalled = have_old and it > 2 and worst >= worst_old
                if stalled and worst <= GA_STALL_ACCEPT:
                    ok = True           # at the round-off of f (_solve_second)
                    break
                if it == self.maxiter or stalled:
                    break
                worst_old = worst
                have_old = True
                for i in range(k):
                    x[p + i] = fb[2 * p + i] * mb
                dgetrs(&trans, &pp, &one, self.LU, &pp, self.ipiv, x, &pp, &info)
                self.counters[C_SOLVE] += 1.0
                for i in range(p):
                    accn[i] += x[i]
                    ynew[i] += bb * x[i]
                    ynew[p + i] += gg * x[i]
                for i in range(k):
                    ynew[2 * p + i] += x[p + i]
            self.counters[C_NITER] += iters
            if ok:
                self.jac_age += 1
                if iters > 4 and self.jac_age > 1:
                    self.jac_valid = False          # slow with an old Jacobian: refresh
                self.jac_current = False
                break
            if self.jac_current:
                return GA_NEWTON_FAILED
            self.nrej += 1
            self.counters[C_NEWTON] += 1.0
            self.jac_valid = False                  # stale: re-evaluate, retry once
        if not ok:
            return GA_NEWTON_FAILED
        # the quadratures of the trailing components (trapezoidal rule)
        for i in range(2 * p + k, N):
            ynew[i] = y[i] + (0.5 * h) * (self.fn[i] + fb[i])
        return 0

    cdef int save_start(self, dict hist) except -1:
        cdef Py_ssize_t N = self.N, p = self.p
        hist.update(t=self.t, y=np.array(self.y_arr),
                    acc=np.array(<double[:p]> self.acc_top),
                    a=np.array(<double[:p]> self.a_top),
                    f=np.array(<double[:N]> self.fn_top),
                    t_start=self.t_start, i=self.i_top, h=self.h_step, jac_age=self.age_top,
                    J=(np.array(self.Jsnap_arr) if self.J_kept else np.array(self.J_arr))
                    if self.jv_top else None, c_lu=self.clu_top if self.lu_top else 0.0,
                    counts=np.array([self.nsteps_top, self.nrej_top, self.nfev_top],
                                    dtype=float))
        return 0

    cdef int accept(self, bint due) except -1:
        """GeneralizedAlpha._finish: the algorithmic accelerations, the step taken."""
        cdef Py_ssize_t N = self.N, p = self.p, i
        cdef double a_m = self.a_m, a_f = self.a_f
        cdef unsigned int mode = mbcore_flush_subnormals()
        for i in range(p):
            self.acc_old[i] = self.acc[i]
            self.a[i] = ((1.0 - a_f) * self.acc_new[i] + a_f * self.acc[i]
                         - a_m * self.a[i]) / (1.0 - a_m)
            self.acc[i] = self.acc_new[i]
        mbcore_restore_fp_mode(mode)
        for i in range(N):
            self.y_old[i] = self.y[i]
            self.fn_old[i] = self.fn[i]
            self.fn[i] = self.fb[i]
            self.y[i] = self.ynew[i]
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), 2)
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_step

    cdef int dense(self, double tt, double* out) except -1:
        """Cubic Hermite with the slopes (qd, q'', trailing rates) at both ends."""
        cdef Py_ssize_t N = self.N, p = self.p, e0 = 2 * self.p + self.k, i
        cdef double hd = self.t - self.t_old, s, s2, s3, h00, h10, h01, h11, d0, d1
        s = (tt - self.t_old) / hd
        s2 = s * s
        s3 = s2 * s
        h00 = 2 * s3 - 3 * s2 + 1
        h10 = s3 - 2 * s2 + s
        h01 = -2 * s3 + 3 * s2
        h11 = s3 - s2
        for i in range(N):
            if i < p:
                d0 = self.y_old[p + i]
                d1 = self.y[p + i]
            elif i < 2 * p:
                d0 = self.acc_old[i - p]
                d1 = self.acc[i - p]
            elif i < e0:                # the multipliers: their difference quotient
                d0 = (self.y[i] - self.y_old[i]) / hd
                d1 = d0
            else:
                d0 = self.fn_old[i]
                d1 = self.fn[i]
            out[i] = h00 * self.y_old[i] + h10 * (hd * d0) + h01 * self.y[i] + h11 * (hd * d1)
        return 0

    cdef int load_start(self, object s0) except -1:
        """The Python integrator's ``loop_start()`` (a restart)."""
        cdef Py_ssize_t N = self.N, p = self.p
        cdef double[::1] acc = np.ascontiguousarray(s0["acc"], dtype=np.float64)
        cdef double[::1] a = np.ascontiguousarray(s0["a"], dtype=np.float64)
        cdef double[::1] f0 = np.ascontiguousarray(s0["f"], dtype=np.float64)
        _size("run_genalpha: restart acc", acc.shape[0], p)
        _size("run_genalpha: restart a", a.shape[0], p)
        _size("run_genalpha: restart f", f0.shape[0], N)
        memcpy(self.acc, &acc[0], p * sizeof(double))
        memcpy(self.a, &a[0], p * sizeof(double))
        memcpy(self.fn, &f0[0], N * sizeof(double))
        self.t_start = float(s0["t_start"])
        self.i_step = int(s0["i"])
        self.h_step = float(s0["h"])
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``GeneralizedAlpha.restart`` (a new grid from t, the
        accelerations from f there, no Jacobian nor LU)."""
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        self.load_start(s0)
        self.jac_valid = False
        self.jac_current = False
        self.lu_valid = False
        self.jac_age = 0
        self.c_lu = 0.0
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), 2, self.nsteps, self.nrej, self.nfev())
        else:
            _stats(stats, fabs(self.h), 2, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h


#: ``run_genalpha_var`` takes the index-3 ``stiff`` layout (multipliers, mass, call-backs)
GENALPHA_VAR_DAE = True


cdef class GenAlphaVarStepper(GenAlphaStepper):
    """``VariableGeneralizedAlpha`` (:func:`run_genalpha_var`): the step of
    :class:`GenAlphaStepper` (``solve_step``: predictor, Jacobian policy, Newton,
    quadratures; ``accept``, ``dense``) under the variable step's controller: the
    Milne-device error of the positions (only: with multipliers, the ``stiff``
    layout, they stay out of the norm) against the calibrated tolerances
    ``e_atol + e_rtol |q|``, the next step ``h_abs``, the last accepted step
    ``hprev`` (``has_hprev`` False after a start or restart) by which ``a - q''`` is
    rescaled, ``a0`` the algorithmic accelerations at the step's start; with
    multipliers the estimate projected onto the constraints' tangent space
    (:meth:`project`: ``PA``, ``pipiv``, ``prhs``)."""
    cdef double h_abs, h_abs_new, hprev, max_step, e_rtol, e_atol
    cdef double h_abs_top, hprev_top
    cdef bint has_hprev, hprev_top_set
    cdef double* a0
    cdef double* est
    cdef double* PA
    cdef double* prhs
    cdef int* pipiv

    cdef void project(self) noexcept:
        """VariableGeneralizedAlpha._project: ``est`` (p values) replaced by the
        first p components of the solution of ``[[M_v, -J_vlam], [J_lamq, 0]] x =
        [M_v est; 0]`` (column-major, dgetrf and dgetrs, counted as the Newton
        matrix' LU and solve) with the step's Jacobian ``J``, unless a component is
        not finite (a singular matrix: ``est`` kept)."""
        cdef Py_ssize_t N = self.N, p = self.p, k = self.k, P = self.p + self.k, i, j
        cdef int pp = <int>P, info = 0, one = 1
        cdef char trans = b'N'
        for j in range(p):
            for i in range(p):
                self.PA[j * P + i] = 0.0
            self.PA[j * P + j] = self.mv[j]
            for i in range(k):
                self.PA[j * P + p + i] = self.J[j * N + 2 * p + i]
        for j in range(k):
            for i in range(p):
                self.PA[(p + j) * P + i] = -self.J[(2 * p + j) * N + p + i]
            for i in range(k):
                self.PA[(p + j) * P + p + i] = 0.0
        dgetrf(&pp, &pp, self.PA, &pp, self.pipiv, &info)
        self.counters[C_LU] += 1.0
        for i in range(p):
            self.prhs[i] = self.mv[i] * self.est[i]
        for i in range(k):
            self.prhs[p + i] = 0.0
        dgetrs(&trans, &pp, &one, self.PA, &pp, self.pipiv, self.prhs, &pp, &info)
        self.counters[C_SOLVE] += 1.0
        for i in range(p):
            if not isfinite(self.prhs[i]):
                return
        memcpy(self.est, self.prhs, p * sizeof(double))

    cdef double error(self, double h) noexcept:
        """VariableGeneralizedAlpha._error (second-order form): the rms norm of
        ``cc/(1/6 - cc) (q_n+1 - (q_n + h v_n + h^2/2 q''_n))`` (with multipliers
        projected, :meth:`project`) over the tolerances."""
        cdef Py_ssize_t p = self.p, i
        cdef int n = <int>p
        cdef double cc = 1.0 / 6.0 - self.b + 0.5 * (self.g - 0.5)
        cdef double ratio = cc / (1.0 / 6.0 - cc)
        cdef double qp, ya, yb
        cdef double* y = self.y
        cdef double* ynew = self.ynew
        for i in range(p):
            qp = y[i] + h * y[p + i] + (0.5 * h * h) * self.acc[i]
            self.est[i] = ratio * (ynew[i] - qp)
        if self.k:
            self.project()
        for i in range(p):
            ya = fabs(y[i])
            yb = fabs(ynew[i])
            self.est[i] = self.est[i] / (self.e_atol + self.e_rtol * (ya if ya >= yb else yb))
        return sqrt(ddot(&n, self.est, &ONE, self.est, &ONE) / p)

    cdef int attempt_flushed(self) except -1:
        """VariableGeneralizedAlpha._step_impl up to ``_finish``: trial steps from
        ``min(h_abs, max_step)`` (``_trial_end``), ``a`` rescaled from ``a0`` by the
        step ratio (``_rescale``), :meth:`solve_step`; a Newton failure quarters the
        step (a fresh Jacobian next), an error above 1 shrinks it by
        ``max(0.2, 0.9 err^(-1/3))``; the next step (``h_abs_new``) grows by at most
        5, not at all after a rejection."""
        cdef Py_ssize_t p = self.p, i
        cdef double t = self.t, tnew, h = 0.0, h_abs, r, min_step, err = 0.0, fac, factor
        cdef bint rejected = False
        cdef int code
        if self.ck:
            self.save_top()
            self.h_abs_top = self.h_abs
            self.hprev_top = self.hprev
            self.hprev_top_set = self.has_hprev
            self.f.c_save()
        memcpy(self.a0, self.a, p * sizeof(double))
        h_abs = self.h_abs
        if self.max_step < h_abs:
            h_abs = self.max_step
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        while True:
            if h_abs < min_step:
                self.h = h_abs
                return LOOP_STEP_TOO_SMALL
            tnew = t + h_abs
            if tnew - self.t1 > 0 or fabs(self.t1 - tnew) < min_step:
                tnew = self.t1
            h = tnew - t
            self.h = h
            self.tnew = tnew
            r = fabs(h / self.hprev) if self.has_hprev else 1.0
            for i in range(p):
                self.a[i] = self.acc[i] + r * (self.a0[i] - self.acc[i])
            code = self.solve_step(tnew, h)
            if code == GA_NEWTON_FAILED:
                self.nrej += 1
                self.counters[C_NEWTON] += 1.0
                h_abs *= 0.25
                rejected = True
                self.jac_valid = False
                continue
            if code:
                return code
            err = self.error(h)
            if err <= 1.0:
                break
            self.nrej += 1
            self.counters[C_ERR] += 1.0
            fac = 0.9 * pow(err, -1.0 / 3.0)
            h_abs = fabs(h) * (fac if fac > 0.2 else 0.2)
            rejected = True
        if err == 0.0:
            factor = 5.0
        else:
            fac = 0.9 * pow(err, -1.0 / 3.0)
            fac = fac if fac > 0.2 else 0.2
            factor = fac if fac < 5.0 else 5.0
        if rejected:
            factor = factor if factor < 1.0 else 1.0
        self.h_abs_new = fabs(h) * factor
        self.t_end = tnew
        return 0

    cdef int accept(self, bint due) except -1:
        """VariableGeneralizedAlpha: ``_finish`` (GenAlphaStepper.accept), then the
        last step ``hprev`` and the next one ``h_abs``."""
        GenAlphaStepper.accept(self, due)
        self.hprev = self.h
        self.has_hprev = True
        self.h_abs = self.h_abs_new
        return 0

    cdef int save_start(self, dict hist) except -1:
        cdef Py_ssize_t N = self.N, p = self.p
        hist.update(t=self.t, y=np.array(self.y_arr),
                    acc=np.array(<double[:p]> self.acc_top),
                    a=np.array(<double[:p]> self.a_top),
                    f=np.array(<double[:N]> self.fn_top),
                    h_abs=self.h_abs_top,
                    hprev=self.hprev_top if self.hprev_top_set else None,
                    jac_age=self.age_top,
                    J=(np.array(self.Jsnap_arr) if self.J_kept else np.array(self.J_arr))
                    if self.jv_top else None, c_lu=self.clu_top if self.lu_top else 0.0,
                    counts=np.array([self.nsteps_top, self.nrej_top, self.nfev_top],
                                    dtype=float))
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_abs

    cdef int load_start(self, object s0) except -1:
        """The Python integrator's ``loop_start()`` (a restart: ``hprev`` None)."""
        cdef Py_ssize_t N = self.N, p = self.p
        cdef double[::1] acc = np.ascontiguousarray(s0["acc"], dtype=np.float64)
        cdef double[::1] a = np.ascontiguousarray(s0["a"], dtype=np.float64)
        cdef double[::1] f0 = np.ascontiguousarray(s0["f"], dtype=np.float64)
        _size("run_genalpha_var: restart acc", acc.shape[0], p)
        _size("run_genalpha_var: restart a", a.shape[0], p)
        _size("run_genalpha_var: restart f", f0.shape[0], N)
        memcpy(self.acc, &acc[0], p * sizeof(double))
        memcpy(self.a, &a[0], p * sizeof(double))
        memcpy(self.fn, &f0[0], N * sizeof(double))
        self.h_abs = float(s0["h_abs"])
        self.has_hprev = s0.get("hprev") is not None
        self.hprev = float(s0["hprev"]) if self.has_hprev else 0.0
        return 0

    cdef double h_next(self) noexcept:
        return self.h


cdef int _genalpha_setup(GenAlphaStepper st, CompiledODE f, double t0, double[::1] y0,
                         double t1, long nfev_start, Py_ssize_t p, double[::1] acc0,
                         double[::1] a0, double[::1] f0, double a_m, double a_f,
                         double gamma, double beta, int maxiter, double newton_rtol,
                         long max_age, long jac_age0, double[::1] counters, bint ck,
                         const double[::1] J0, double c_lu0, Py_ssize_t k=0,
                         const double[::1] mass=None, double newton_atol=0.0,
                         object jac=None, object jacobian_update=None) except -1:
    """The state and buffers :func:`run_genalpha` and :func:`run_genalpha_var` share
    (arguments checked by the caller): the accelerations, f, the parameters, Newton's
    settings, the Jacobian and LU (``J0`` and ``c_lu0``: those of a checkpoint), the
    ``k`` multipliers, the velocity rows' ``mass`` (None: 1), the constraints'
    tolerance ``newton_atol``, the Jacobian call-back ``jac`` (None: ``f.c_jac``) and
    ``jacobian_update`` (None: none)."""
    cdef Py_ssize_t N = y0.shape[0], i
    st.setup(f, t0, y0, t1, nfev_start)
    st.p = p
    st.k = k
    st.atol = newton_atol
    st.use_cb = jac is not None
    st.jac = jac
    st.mv = st.buf(0, np.ones(p) if mass is None else np.asarray(mass))
    st.a_m, st.a_f, st.g, st.b = a_m, a_f, gamma, beta
    st.maxiter = maxiter
    st.rtol = newton_rtol
    st.max_age = max_age
    st.jac_age = jac_age0
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.counters = counters
    st.J_arr = np.zeros(N * N)                    # column-major
    cdef double[::1] Jv = st.J_arr
    st.J = &Jv[0]
    st.J_F = st.J_arr.reshape((N, N), order="F")      # a view: the call-backs' J
    st.use_upd = jacobian_update is not None
    st.upd = jacobian_update
    st.LU = st.buf((p + k) * (p + k))
    ipiv = np.zeros(p + k, dtype=np.intc)
    st.keep.append(ipiv)
    cdef int[::1] ipivv = ipiv
    st.ipiv = &ipivv[0]
    st.acc = st.buf(0, acc0)
    st.a = st.buf(0, a0)
    st.fn = st.buf(0, f0)
    st.acc_new = st.buf(p)
    st.acc_old = st.buf(p)
    st.fn_old = st.buf(N)
    st.y_old = st.buf(N)
    st.ynew_arr = np.zeros(N)           # (a numpy array: the call-back's argument)
    st.keep.append(st.ynew_arr)
    cdef double[::1] ynv = st.ynew_arr
    st.ynew = &ynv[0]
    st.fb = st.buf(N)
    st.x = st.buf(p + k)
    st.fd_floor = st.buf(0, np.full(N, 1e-8))
    st.jwork = st.buf(3 * N)
    st.acc_top = st.buf(p)
    st.a_top = st.buf(p)
    st.fn_top = st.buf(N)
    st.y_trial = st.ynew
    st.ck = ck
    st.Jsnap_arr = np.zeros(N * N if st.ck else 1)
    cdef double[::1] jsv = st.Jsnap_arr
    st.Jsnap = &jsv[0]
    if J0 is not None:                  # resume: the Jacobian (and LU) of a checkpoint
        for i in range(N * N):
            st.J[i] = J0[i]
        st.jac_valid = True
        if c_lu0 != 0.0:
            st.factor_lu(c_lu0)
            st.lu_valid = True
            st.c_lu = c_lu0
    return 0


cdef int _genalpha_check(str who, Py_ssize_t N, Py_ssize_t positions, double[::1] acc0,
                         double[::1] a0, double[::1] f0, int maxiter, double a_m,
                         double a_f, double gamma, double beta, double newton_rtol,
                         const double[::1] J0, Py_ssize_t k=0,
                         const double[::1] mass=None, double newton_atol=1.0) except -1:
    """The arguments :func:`run_genalpha` and :func:`run_genalpha_var` share."""
    cdef Py_ssize_t i
    _index(f"{who}: positions", positions, 1, N // 2)
    _index(f"{who}: multipliers", k, 0, N - 2 * positions)
    if mass is not None:
        _size(f"{who}: mass", mass.shape[0], positions)
        for i in range(positions):
            if not (mass[i] > 0.0 and mass[i] < INFINITY):
                raise ValueError(f"{who}: mass[{i}] = {mass[i]} is not positive and finite")
    _positive(f"{who}: newton_atol", newton_atol)
    _size(f"{who}: acc0", acc0.shape[0], positions)
    _size(f"{who}: a0", a0.shape[0], positions)
    _size(f"{who}: f0", f0.shape[0], N)
    _all_finite(f"{who}: acc0", acc0)
    _all_finite(f"{who}: a0", a0)
    _all_finite(f"{who}: f0", f0)
    _index(f"{who}: maxiter", maxiter, 1, 1 << 30)
    _in_range(f"{who}: a_m", a_m, -1.0, 0.999999)
    _in_range(f"{who}: a_f", a_f, 0.0, 0.999999)
    _positive(f"{who}: gamma", gamma)
    _positive(f"{who}: beta", beta)
    _positive(f"{who}: newton_rtol", newton_rtol)
    if J0 is not None:
        _size(f"{who}: J0", J0.shape[0], N * N)
    return 0


def run_genalpha(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
                 Py_ssize_t positions, double[::1] acc0 not None, double[::1] a0 not None,
                 double[::1] f0 not None, double t_start, long i_step, double h_step,
                 double a_m, double a_f, double gamma, double beta, int maxiter,
                 double newton_rtol, long max_age, double[::1] t_out not None,
                 Py_ssize_t i_out, object on_output, double[::1] stats not None,
                 double[::1] counters not None, long nfev_start=0,
                 const idx_t[::1] stop_idx=None, const double[::1] stop_val=None,
                 const double[::1] stop_sign=None, double[::1] ystep=None,
                 dict hist=None, const double[::1] J0=None, double c_lu0=0.0,
                 long jac_age0=0, long max_steps=0, object on_commit=None,
                 object restart=None, Py_ssize_t multipliers=0,
                 const double[::1] mass=None, double newton_atol=1e-13, object jac=None,
                 object jacobian_update=None):
    """Integrate from (t0, y0) to t1 > t0 by the second-order form of
    ``GeneralizedAlpha`` (:class:`GenAlphaStepper`; the Jacobian ``f.c_jac`` as
    :func:`run_theta`'s, or the call-back ``jac(t, y)`` as :func:`run_bdf`'s, its
    evaluations of f not counted; ``multipliers`` index-3 multipliers after the
    velocities, their constraints stopped at ``newton_atol max(1, |q|)``; ``mass``
    the diagonal mass of the velocity rows, None: 1 — the ``stiff`` formulation's
    layout ``[q, s, lam, W]``; ``jacobian_update(t, y, J)``: GeneralizedAlpha's
    option, called at the predictor of every step that keeps an older Jacobian, then
    a new LU) from its state after
    ``_restart_impl`` or an accepted step: the true and algorithmic accelerations
    ``acc0``, ``a0`` (``positions`` values each), ``f0`` the right-hand side there, the
    grid ``t_start + i h_step`` with ``i_step`` steps taken, the parameters (α_m, α_f,
    γ, β), Newton's ``maxiter`` and residual tolerance ``newton_rtol``, ``max_age`` (0:
    the Jacobian kept until Newton fails or needs more than 4 iterations).  A Newton
    failure with a fresh Jacobian returns code 2 (the Python driver redoes the step and
    raises ``NewtonFailure``).  Checkpoints as :func:`run_theta`'s, ``hist`` with the
    accelerations (``acc``, ``a``), ``f`` and ``jac_age``; ``J0``, ``c_lu0``,
    ``jac_age0``: resume from them.  Returns ``(code, t, y, i_out, h)``.  Refused
    (ValueError naming the argument): the checks of :func:`_check_common`, positions
    outside [1, N/2], acc0 / a0 / f0 of the wrong size or non-finite, maxiter < 1,
    h_step not positive and finite, α_m, α_f outside [-1, 1) and [0, 1), γ, β not
    positive, newton_rtol not positive, a grid point more than two steps from t0, J0
    of the wrong size, multipliers outside [0, N - 2 positions], a mass of the wrong
    size or not positive, newton_atol not positive."""
    cdef Py_ssize_t N = y0.shape[0]
    _check_common("run_genalpha", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps, multipliers > 0)   # (stiff's f)
    _genalpha_check("run_genalpha", N, positions, acc0, a0, f0, maxiter, a_m, a_f, gamma,
                    beta, newton_rtol, J0, multipliers, mass, newton_atol)
    _positive("run_genalpha: h_step", h_step)
    if not fabs(t_start + (<double>i_step) * h_step - t0) <= 2.0 * h_step + 1e-9 * fabs(t0):
        raise ValueError(f"run_genalpha: the grid point t_start + i_step h_step = {t_start} "
                         f"+ {i_step} * {h_step} is not within two steps of t0 = {t0}")
    cdef GenAlphaStepper st = GenAlphaStepper.__new__(GenAlphaStepper)
    st.t_start = t_start
    st.i_step = i_step
    st.i_top = i_step
    st.h_step = h_step
    _genalpha_setup(st, f, t0, y0, t1, nfev_start, positions, acc0, a0, f0, a_m, a_f,
                    gamma, beta, maxiter, newton_rtol, max_age, jac_age0, counters,
                    hist is not None, J0, c_lu0, multipliers, mass, newton_atol, jac,
                    jacobian_update)
    _commit_args("run_genalpha", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)


def run_genalpha_var(CompiledODE f not None, double t0, double t1,
                     double[::1] y0 not None, Py_ssize_t positions,
                     double[::1] acc0 not None, double[::1] a0 not None,
                     double[::1] f0 not None, double h_abs, object hprev, double a_m,
                     double a_f, double gamma, double beta, int maxiter,
                     double newton_rtol, double rtol, double atol, double max_step,
                     long max_age, double[::1] t_out not None, Py_ssize_t i_out,
                     object on_output, double[::1] stats not None,
                     double[::1] counters not None, long nfev_start=0,
                     const idx_t[::1] stop_idx=None, const double[::1] stop_val=None,
                     const double[::1] stop_sign=None, double[::1] ystep=None,
                     dict hist=None, const double[::1] J0=None, double c_lu0=0.0,
                     long jac_age0=0, long max_steps=0, object on_commit=None,
                     object restart=None, Py_ssize_t multipliers=0,
                     const double[::1] mass=None, double newton_atol=1e-13,
                     object jac=None, object jacobian_update=None):
    """Integrate from (t0, y0) to t1 > t0 by the second-order form of
    ``VariableGeneralizedAlpha`` (:class:`GenAlphaVarStepper`; ``multipliers``,
    ``mass``, ``newton_atol``, ``jac`` and ``jacobian_update`` as :func:`run_genalpha`'s:
    the ``stiff`` formulation's layout, the error estimate on the positions only) from
    its state after ``_restart_impl`` or an accepted step: the
    accelerations ``acc0``, ``a0``, ``f0`` as :func:`run_genalpha`'s, the next step
    ``h_abs`` (at most ``max_step``), the last accepted step ``hprev`` (None: none
    since the start or a restart), the calibrated tolerances ``rtol``, ``atol`` of
    the error estimate (scalars), Newton's residual tolerance ``newton_rtol``; the
    parameters, ``maxiter``, ``max_age``, checkpoints (``hist`` with ``h_abs`` and
    ``hprev`` instead of the grid), resume and call-backs as :func:`run_genalpha`'s.
    A step that falls below the round-off limit returns code 3; Newton failures
    shrink the step.  Returns ``(code, t, y, i_out, h)``.  Refused (ValueError naming
    the argument): the checks of :func:`run_genalpha` (without the grid), h_abs or
    max_step not positive, hprev not positive, rtol and atol not finite, negative
    or both 0."""
    cdef Py_ssize_t N = y0.shape[0]
    _check_common("run_genalpha_var", f, t0, t1, y0, t_out, i_out, stats, counters,
                  stop_idx, stop_val, stop_sign, ystep, max_steps, multipliers > 0)
    _genalpha_check("run_genalpha_var", N, positions, acc0, a0, f0, maxiter, a_m, a_f,
                    gamma, beta, newton_rtol, J0, multipliers, mass, newton_atol)
    _positive("run_genalpha_var: h_abs", h_abs)
    _positive("run_genalpha_var: max_step", max_step, True)
    if hprev is not None:
        _positive("run_genalpha_var: hprev", float(hprev))
    _tolerances("run_genalpha_var", rtol, atol)
    cdef GenAlphaVarStepper st = GenAlphaVarStepper.__new__(GenAlphaVarStepper)
    _genalpha_setup(st, f, t0, y0, t1, nfev_start, positions, acc0, a0, f0, a_m, a_f,
                    gamma, beta, maxiter, newton_rtol, max_age, jac_age0, counters,
                    hist is not None, J0, c_lu0, multipliers, mass, newton_atol, jac,
                    jacobian_update)
    st.h_abs = h_abs
    st.h_abs_new = h_abs
    st.has_hprev = hprev is not None
    st.hprev = float(hprev) if st.has_hprev else 0.0
    st.max_step = max_step
    st.e_rtol = rtol
    st.e_atol = atol
    st.a0 = st.buf(positions)
    st.est = st.buf(positions)
    st.PA = st.buf((positions + multipliers) * (positions + multipliers)
                   if multipliers else 1)
    st.prhs = st.buf(positions + multipliers if multipliers else 1)
    pipiv = np.zeros(positions + multipliers if multipliers else 1, dtype=np.intc)
    st.keep.append(pipiv)
    cdef int[::1] pipivv = pipiv
    st.pipiv = &pipivv[0]
    _commit_args("run_genalpha_var", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
