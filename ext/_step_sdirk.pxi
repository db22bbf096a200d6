# SDIRK stepper of the step loop (included by _steploop.pyx): the 5-stage, order-4
# L-stable SDIRK of Hairer & Wanner (1996), §IV.6, Table 6.5, simplified Newton with
# one LU of M - γhJ per step size, f.c_jac or a Jacobian call-back.

cdef class SDIRKStepper(Stepper):
    """``SDIRK4`` (:func:`run_sdirk`): the step ``h_abs``, the derivative ``yp`` at
    the step's start (0 on the algebraic components), the Newton Jacobian ``J``
    (taken at the start of the step that needed it) and the LU of ``M − γhJ`` with
    its ``h``; the mass diagonal (zeros: algebraic components of an index-1 or GGL
    DAE, out of the error test and the Newton norm)."""
    cdef Py_ssize_t ne
    cdef int maxiter
    cdef double gamma, h, h_abs, tnew, t_old, lu_h, newton_tol
    cdef double rtol, atol, max_step, min_factor, max_factor, keep_below
    cdef double* A
    cdef double* C
    cdef double* bdiff
    cdef double* mv
    cdef double* minv
    cdef char* diff
    cdef Py_ssize_t* eidx
    cdef double* J
    cdef double* LU
    cdef int* ipiv
    cdef double* yp
    cdef double* y_prev
    cdef double* yp_prev
    cdef double* K
    cdef double* Z
    cdef double* known
    cdef double* yz
    cdef double* r
    cdef double* fb
    cdef double* ynew
    cdef double* scale
    cdef double* err
    cdef double* jwork
    cdef double* tmp
    cdef object J_arr, yp_arr, jac
    cdef bint use_cb, jac_valid, jac_current, lu_valid
    cdef double[::1] counters
    # checkpoints: the state at the step's start (y and yp change only when the
    # step is accepted; J is kept before it is re-evaluated inside the step)
    cdef bint ck, jv_top, lu_top, J_kept
    cdef object Jsnap_arr
    cdef double* Jsnap
    cdef double h_top, luh_top, nfev_top
    cdef long nsteps_top, nrej_top

    cdef int new_jacobian(self) except -1:
        """A fresh Newton Jacobian at the step's start (t, y) (1: the evaluation
        failed); SDIRK4._step_impl's ``self.jac(t, y, None, scale)``."""
        cdef long nfev_cb
        cdef int l
        cdef Py_ssize_t N = self.N
        if self.ck and self.jv_top and not self.J_kept:
            memcpy(self.Jsnap, self.J, N * N * sizeof(double))
            self.J_kept = True
        if self.use_cb:
            nfev_cb = self.f.nfev
            l = _cb_jacobian(self.jac, self.t, self.y_arr, self.J, N, self.counters)
            self.nfev0 += self.f.nfev - nfev_cb  # the call-back's evaluations: uncounted
            if l:
                return 1
        elif _jacobian(self.f, self.t, self.y, self.scale, self.J, self.jwork, N,
                       self.counters, &self.nfev0):
            return 1
        self.jac_valid = True
        self.jac_current = True
        self.lu_valid = False
        return 0

    cdef void factor_lu(self, double h) noexcept:
        """diag(M) − (γh) J (SDIRK4._step_impl), factored by dgetrf."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int nn = <int>N, info = 0
        cdef double gh = self.gamma * h
        for j in range(N):
            for i in range(N):
                self.LU[j * N + i] = (self.mv[i] if i == j else 0.0) - gh * self.J[j * N + i]
        dgetrf(&nn, &nn, self.LU, &nn, self.ipiv, &info)

    cdef int stages(self, double t, double h, int* converged) except -1:
        """SDIRK4._stages: the five stages by simplified Newton into K, Z (Z_5 on
        return); ``converged[0]`` 0 when a stage failed.  Returns a status."""
        cdef Py_ssize_t N = self.N, i, j, st
        cdef int it, iters = 0, info = 0, one = 1, nn = <int>N, maxiter = self.maxiter
        cdef double gh = self.gamma * h, ti, norm, norm_old = 0.0, rate = 0.0
        cdef bint have_old, have_rate, conv = False
        cdef char trans = b'N'
        cdef double* K = self.K
        cdef double* Z = self.Z
        cdef double* known = self.known
        cdef double* r = self.r
        cdef double* fb = self.fb
        cdef double* mv = self.mv
        cdef double* y = self.y
        for j in range(N):
            Z[j] = gh * self.yp[j]
        for st in range(5):
            if st:
                _vecmat(&self.A[st * 5], K, st, N, known)
            else:
                for j in range(N):
                    known[j] = 0.0
            ti = t + self.C[st] * h
            have_old = False
            have_rate = False
            conv = False
            for it in range(maxiter):
                for j in range(N):
                    self.yz[j] = y[j] + Z[j]
                if self.f.c_eval(ti, self.yz, fb):
                    self.counters[C_NITER] += iters
                    return LOOP_EVAL_FAILED
                for j in range(N):
                    r[j] = known[j] + gh * fb[j] - mv[j] * Z[j]
                dgetrs(&trans, &nn, &one, self.LU, &nn, self.ipiv, r, &nn, &info)
                self.counters[C_SOLVE] += 1.0
                norm = _rms_idx(1.0, r, self.scale, self.eidx, self.ne, self.tmp)
                iters += 1
                if not norm < INFINITY:
                    break
                if have_old:
                    rate = norm / norm_old
                    have_rate = True
                    if rate >= 1 or pow(rate, maxiter - it) / (1 - rate) * norm > \
                            self.newton_tol:
                        break
                for j in range(N):
                    Z[j] = Z[j] + r[j]
                if norm == 0.0 or (have_rate and rate / (1 - rate) * norm
                                   < self.newton_tol):
                    conv = True
                    break
                norm_old = norm
                have_old = True
            if not conv:
                self.counters[C_NITER] += iters
                converged[0] = 0
                return 0
            for j in range(N):
                K[st * N + j] = (mv[j] * Z[j] - known[j]) / self.gamma
        self.counters[C_NITER] += iters
        converged[0] = 1
        return 0

    cdef int attempt(self, double next_out) except -1:
        """SDIRK4._step_impl up to the accepted solution of the step."""
        cdef Py_ssize_t N = self.N, j
        cdef int info = 0, one = 1, nn = <int>N, conv = 0, code
        cdef double t = self.t, t1 = self.t1, tnew, h, h_abs, min_step, a, b, en, fac
        cdef char trans = b'N'
        cdef double* y = self.y
        cdef double* scale = self.scale
        if self.ck:
            self.h_top, self.jv_top, self.J_kept = self.h_abs, self.jac_valid, False
            self.lu_top, self.luh_top = self.lu_valid, self.lu_h
            self.nsteps_top, self.nrej_top, self.nfev_top = self.nsteps, self.nrej, self.nfev()
            self.f.c_save()             # the right-hand side's own state (warm start)
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        h_abs = self.h_abs if self.h_abs > min_step else min_step
        if h_abs > self.max_step:
            h_abs = self.max_step
        while True:
            if h_abs < min_step:
                self.h = h_abs
                return LOOP_STEP_TOO_SMALL
            tnew = t + h_abs
            if tnew - t1 > 0 or fabs(t1 - tnew) < min_step:
                tnew = t1
            h = tnew - t
            h_abs = fabs(h)
            self.h = h
            self.tnew = tnew
            for j in range(N):
                scale[j] = self.atol + self.rtol * fabs(y[j])
            if not self.jac_valid:
                if self.new_jacobian():
                    return LOOP_EVAL_FAILED
            if not self.lu_valid or self.lu_h != h:
                self.factor_lu(h)
                self.counters[C_LU] += 1.0
                self.lu_valid = True
                self.lu_h = h
            code = self.stages(t, h, &conv)
            if code:
                return code
            if not conv:
                self.nrej += 1
                self.counters[C_NEWTON] += 1.0
                if not self.jac_current:
                    if self.new_jacobian():
                        return LOOP_EVAL_FAILED
                    continue
                h_abs *= 0.5
                continue
            for j in range(N):
                self.ynew[j] = y[j] + self.Z[j]
            _vecmat(self.bdiff, self.K, 5, N, self.err)
            dgetrs(&trans, &nn, &one, self.LU, &nn, self.ipiv, self.err, &nn, &info)
            self.counters[C_SOLVE] += 1.0
            for j in range(N):
                a = fabs(y[j])
                b = fabs(self.ynew[j])
                scale[j] = self.atol + self.rtol * (a if a >= b else b)
            en = _rms_idx(1.0, self.err, scale, self.eidx, self.ne, self.tmp)
            if en > 1:
                self.nrej += 1
                self.counters[C_ERR] += 1.0
                fac = 0.9 * pow(en, -0.25)
                h_abs *= (fac if fac > self.min_factor else self.min_factor)
                continue
            break
        if en == 0:
            fac = self.max_factor
        else:
            fac = 0.9 * pow(en, -0.25)
            fac = fac if fac > self.min_factor else self.min_factor
            fac = fac if fac < self.max_factor else self.max_factor
        if 1.0 <= fac < self.keep_below:
            fac = 1.0
        self.h_abs = h_abs * fac
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        hist.update(t=self.t, y=np.array(self.y_arr), yp=np.array(self.yp_arr),
                    h_abs=self.h_top,
                    J=(np.array(self.Jsnap_arr) if self.J_kept else np.array(self.J_arr))
                    if self.jv_top else None, lu_h=self.luh_top if self.lu_top else 0.0,
                    counts=np.array([self.nsteps_top, self.nrej_top, self.nfev_top],
                                    dtype=float))
        return 0

    cdef int accept(self, bint due) except -1:
        """The step is taken (SDIRK4._step_impl after the error test): the end
        derivative K5/(h m) (stiffly accurate), the secant on algebraic components
        for the dense output."""
        cdef Py_ssize_t N = self.N, j
        cdef double h = self.h, sec
        cdef double* K5 = &self.K[4 * N]
        for j in range(N):
            sec = (self.ynew[j] - self.y[j]) / h
            if self.diff[j]:
                self.yp_prev[j] = self.yp[j]
                self.yp[j] = K5[j] / h * self.minv[j]
            else:
                self.yp_prev[j] = sec
                self.yp[j] = 0.0
            self.y_prev[j] = self.y[j]
            self.y[j] = self.ynew[j]
        self.jac_current = False
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), 4)
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_abs

    cdef int dense(self, double tt, double* out) except -1:
        """Cubic Hermite through (y_0, y'_0), (y_1, y'_1) (``HermiteDenseOutput``;
        the secant as y'_1 on the algebraic components)."""
        cdef Py_ssize_t N = self.N, i
        cdef double hd = self.t - self.t_old, s, s2, s3, h00, h10, h01, h11, yp1
        s = (tt - self.t_old) / hd
        s2 = s * s
        s3 = s2 * s
        h00 = 2 * s3 - 3 * s2 + 1
        h10 = s3 - 2 * s2 + s
        h01 = -2 * s3 + 3 * s2
        h11 = s3 - s2
        for i in range(N):
            yp1 = self.yp[i] if self.diff[i] else (self.y[i] - self.y_prev[i]) / hd
            out[i] = h00 * self.y_prev[i] + h10 * (hd * self.yp_prev[i]) \
                + h01 * self.y[i] + h11 * (hd * yp1)
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``SDIRK4.restart`` (``_restart_impl``: y' there, a new
        first step, no Jacobian nor LU), loaded from that object's ``loop_start()``."""
        cdef Py_ssize_t N = self.N
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        cdef double[::1] yp0 = np.ascontiguousarray(s0["yp"], dtype=np.float64)
        _size("run_sdirk: restart yp", yp0.shape[0], N)
        memcpy(self.yp, &yp0[0], N * sizeof(double))
        self.h_abs = float(s0["h_abs"])
        self.jac_valid = False
        self.jac_current = False
        self.lu_valid = False
        self.lu_h = 0.0
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), 4, self.nsteps, self.nrej,
                   self.nfev())
        elif code == LOOP_BUDGET:
            _stats(stats, self.h_abs, 4, self.nsteps, self.nrej, self.nfev())
        else:
            _stats(stats, fabs(self.h), 4, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h_abs


def run_sdirk(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
              double[::1] yp0 not None, double h_abs, int maxiter, double newton_tol,
              double rtol, double atol, double max_step, const double[:, ::1] A not None,
              const double[::1] C not None, const double[::1] bdiff not None,
              double gamma, double min_factor, double max_factor, double keep_below,
              double[::1] t_out not None, Py_ssize_t i_out, object on_output,
              double[::1] stats not None, double[::1] counters not None,
              long nfev_start=0, const idx_t[::1] stop_idx=None,
              const double[::1] stop_val=None, const double[::1] stop_sign=None,
              const double[::1] mass=None, object jac=None, double[::1] ystep=None,
              dict hist=None, const double[::1] J0=None, double lu_h0=0.0,
              long max_steps=0, object on_commit=None, object restart=None):
    """Integrate from (t0, y0) to t1 > t0 by ``SDIRK4`` (:class:`SDIRKStepper`;
    Hairer & Wanner (1996), §IV.6, Table 6.5) from its state after ``_restart_impl``:
    ``yp0`` the derivative M⁻¹f at (t0, y0) (0 on algebraic components), the first
    step ``h_abs``; no Jacobian nor LU yet.  ``A`` (5 x 5), ``C`` (5), ``gamma``: the
    tableau; ``bdiff``: b − b̂ (the embedded order-3 weights), whose combination of
    the stage increments, solved with the Newton matrix, is the error estimate;
    ``min_factor``, ``max_factor``, ``keep_below``: the step-change limits
    (factor 0.9 err^(−1/4)).  Newton: ``maxiter`` iterations per stage,
    ``newton_tol`` (RADAU5's tolerance of the Python object).  ``mass``: the diagonal
    of a constant mass matrix (zeros: algebraic components, out of the error test
    and the Newton norm; a DAE right-hand side needs it), ``jac`` a Jacobian
    call-back ``jac(t, y)`` (the GGL form's; else ``f.c_jac``, see :func:`_jacobian`).
    Dense output: cubic Hermite (``HermiteDenseOutput``).  A failing evaluation or
    call-back returns code 2 (the Python driver takes over and raises the named
    error).  Checkpoints: before the outputs of a step ``ystep`` (N + 2 floats)
    receives its end state, time and next ``h_abs``, ``hist`` (a dict) the state at
    that step's start, from which the step is redone: ``t``, ``y``, ``yp``,
    ``h_abs``, ``J`` (column-major copy, None if to be evaluated), ``lu_h`` (0: no LU)
    and ``counts`` (steps, rejected steps, evaluations before it); ``J0``, ``lu_h0``:
    start from such a Jacobian and its LU (refactored, uncounted).  ``on_commit``,
    ``restart``: a change of coordinates at step ends, the method restarted there.
    Returns ``(code, t, y, i_out, h_abs)`` (module docstring).  Refused (ValueError
    naming the argument): the checks of :func:`_check_common`, yp0 / mass / J0 of
    the wrong size or non-finite, A not 5 x 5, C / bdiff not 5, maxiter < 1, h_abs,
    newton_tol, gamma not positive and finite, max_step not > 0, rtol / atol, the
    step-change limits (0 < min_factor <= 1 <= max_factor, keep_below >= 1)."""
    cdef Py_ssize_t N = y0.shape[0], i
    _check_common("run_sdirk", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps,
                  dae_ok=mass is not None and bool(np.any(np.asarray(mass) == 0.0)))
    _size("run_sdirk: yp0", yp0.shape[0], N)
    _all_finite("run_sdirk: yp0", yp0)
    _shape2("run_sdirk: A", A.shape[0], A.shape[1], 5, 5)
    _size("run_sdirk: C", C.shape[0], 5)
    _size("run_sdirk: bdiff", bdiff.shape[0], 5)
    _all_finite("run_sdirk: A", A)
    _all_finite("run_sdirk: C", C)
    _all_finite("run_sdirk: bdiff", bdiff)
    _index("run_sdirk: maxiter", maxiter, 1, 1 << 30)
    if mass is not None:
        _size("run_sdirk: mass", mass.shape[0], N)
        _all_finite("run_sdirk: mass", mass)
    if J0 is not None:
        _size("run_sdirk: J0", J0.shape[0], N * N)
    _positive("run_sdirk: h_abs", h_abs)
    _positive("run_sdirk: newton_tol", newton_tol)
    _positive("run_sdirk: gamma", gamma)
    _positive("run_sdirk: max_step", max_step, True)
    _tolerances("run_sdirk", rtol, atol)
    _in_range("run_sdirk: min_factor", min_factor, 1e-300, 1.0)
    _in_range("run_sdirk: max_factor", max_factor, 1.0, 1e300)
    _in_range("run_sdirk: keep_below", keep_below, 1.0, 1e300)
    cdef SDIRKStepper st = SDIRKStepper.__new__(SDIRKStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    mv = np.ones(N) if mass is None else np.array(mass, dtype=np.float64)
    st.mv = st.buf(0, mv)
    dif = mv != 0.0
    # M⁻¹ on the differential components, 0 on the algebraic ones (ImplicitRK._minv)
    st.minv = st.buf(0, np.where(dif, 1.0 / np.where(dif, mv, 1.0), 0.0))
    difc = dif.astype(np.int8)
    st.keep.append(difc)
    cdef char[::1] difv = difc
    st.diff = &difv[0]
    eidx = (np.arange(N, dtype=np.intp) if bool(np.all(dif))
            else np.flatnonzero(dif).astype(np.intp))
    st.ne = eidx.shape[0]
    if st.ne == 0:
        raise ValueError("run_sdirk: no component in the error test (all masses zero)")
    st.keep.append(eidx)
    cdef Py_ssize_t[::1] eidxv = eidx
    st.eidx = &eidxv[0]
    st.use_cb = jac is not None
    st.jac = jac
    st.counters = counters
    st.maxiter = maxiter
    st.gamma = gamma
    st.h_abs = h_abs
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.lu_h = 0.0
    st.newton_tol = newton_tol
    st.rtol = rtol
    st.atol = atol
    st.max_step = max_step
    st.min_factor = min_factor
    st.max_factor = max_factor
    st.keep_below = keep_below
    st.A = st.buf(0, np.asarray(A))
    st.C = st.buf(0, np.asarray(C))
    st.bdiff = st.buf(0, np.asarray(bdiff))
    st.J_arr = np.zeros(N * N)                    # column-major
    cdef double[::1] Jv = st.J_arr
    st.J = &Jv[0]
    st.LU = st.buf(N * N)                         # column-major
    ipiv = np.zeros(N, dtype=np.intc)
    st.keep.append(ipiv)
    cdef int[::1] ipivv = ipiv
    st.ipiv = &ipivv[0]
    st.yp_arr = np.array(yp0, dtype=np.float64)
    cdef double[::1] ypv = st.yp_arr
    st.yp = &ypv[0]
    st.y_prev = st.buf(N)
    st.yp_prev = st.buf(N)
    st.K = st.buf(5 * N)
    st.Z = st.buf(N)
    st.known = st.buf(N)
    st.yz = st.buf(N)
    st.r = st.buf(N)
    st.fb = st.buf(N)
    st.ynew = st.buf(N)
    st.scale = st.buf(N)
    st.err = st.buf(N)
    st.jwork = st.buf(3 * N)                      # the Jacobian's work
    st.tmp = st.buf(N)
    st.y_trial = st.ynew
    st.ck = hist is not None
    st.Jsnap_arr = np.zeros(N * N if st.ck else 1)
    cdef double[::1] jsv = st.Jsnap_arr
    st.Jsnap = &jsv[0]
    if J0 is not None:                  # resume: the Jacobian (and LU) of a checkpoint
        for i in range(N * N):
            st.J[i] = J0[i]
        st.jac_valid = True
        if lu_h0 != 0.0:
            st.factor_lu(lu_h0)
            st.lu_valid = True
            st.lu_h = lu_h0
    _commit_args("run_sdirk", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
