# θ-method stepper of the step loop (included by _steploop.pyx): implicit Euler and
# trapezoid, fixed step, modified Newton, f.c_jac, LU.

cdef class ThetaStepper(Stepper):
    """``ThetaMethod`` (:func:`run_theta`): the grid ``t_start + i h_step``, the end
    derivative ``fn`` of the last step, the Newton Jacobian and its LU."""
    cdef double t_start, h_step, theta, h, tnew, t_old, c_lu, newton_rtol, newton_atol
    cdef long i_step, i_top, nsteps_top, nrej_top
    cdef int order, maxiter
    cdef bint evaluated, jac_valid, jac_current, lu_valid
    cdef object J_arr, fn_arr, Jsnap_arr
    cdef double* J
    cdef double* LU
    cdef int* ipiv
    cdef double* fn
    cdef double* y_old
    cdef double* f_old
    cdef double* ypred
    cdef double* ynew
    cdef double* base
    cdef double* scale
    cdef double* fd_floor
    cdef double* dy
    cdef double* fb
    cdef double* jwork
    cdef double* tmp
    cdef double[::1] counters
    # checkpoints: the state at the step's start (y and fn change only when the step
    # is accepted; J is kept before it is re-evaluated inside the step)
    cdef bint ck, jv_top, lu_top, J_kept
    cdef double* Jsnap
    cdef double clu_top, nfev_top

    cdef void factor_lu(self, double c) noexcept:
        """I - c J, factored by dgetrf."""
        cdef Py_ssize_t N = self.N, i, j
        cdef int nn = <int>N, info = 0
        for j in range(N):
            for i in range(N):
                self.LU[j * N + i] = (1.0 if i == j else 0.0) - c * self.J[j * N + i]
        dgetrf(&nn, &nn, self.LU, &nn, self.ipiv, &info)

    cdef int attempt(self, double next_out) except -1:
        """ThetaMethod._step_impl up to the solution of the step."""
        cdef Py_ssize_t N = self.N, i
        cdef int info = 0, one = 1, nn = <int>N, it, iters, tries
        cdef int maxiter = self.maxiter
        cdef double t = self.t, tnew, h, c, norm, norm_old = 0.0, theta = self.theta
        cdef char trans = b'N'
        cdef bint ok, have_old
        cdef double* y = self.y
        cdef double* fn = self.fn
        cdef double* ynew = self.ynew
        cdef double* dy = self.dy
        cdef double* fb = self.fb
        if self.ck:
            self.i_top, self.jv_top, self.J_kept, self.lu_top, self.clu_top = \
                self.i_step, self.jac_valid, False, self.lu_valid, self.c_lu
            self.nsteps_top, self.nrej_top, self.nfev_top = self.nsteps, self.nrej, self.nfev()
            self.f.c_save()             # the right-hand side's own state (warm start)
        self.i_step += 1
        tnew = self.t_start + (<double>self.i_step) * self.h_step
        if tnew - self.t1 > -1e-9 * self.h_step:
            tnew = self.t1
        h = tnew - t
        self.h = h
        self.tnew = tnew
        if fabs(h) < 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300):
            return LOOP_STEP_TOO_SMALL
        c = h * theta
        for i in range(N):
            if theta != 1.0:
                self.base[i] = y[i] + (h * (1.0 - theta)) * fn[i]
            else:
                self.base[i] = y[i]
            self.ypred[i] = y[i] + h * fn[i]
            self.scale[i] = self.newton_atol + self.newton_rtol * fabs(y[i])
        ok = False
        for tries in range(2):
            if not self.jac_valid:
                if self.ck and self.jv_top and not self.J_kept:
                    memcpy(self.Jsnap, self.J, N * N * sizeof(double))
                    self.J_kept = True
                _difference_floor(self.ypred, 0, N, self.fd_floor)
                if _jacobian(self.f, tnew, self.ypred, self.fd_floor, self.J, self.jwork, N,
                             self.counters, &self.nfev0):
                    return LOOP_EVAL_FAILED
                self.jac_valid = True
                self.jac_current = True
                self.lu_valid = False
            if not self.lu_valid or fabs(c - self.c_lu) > 1e-6 * fabs(self.c_lu):
                self.factor_lu(c)
                self.counters[C_LU] += 1.0
                self.lu_valid = True
                self.c_lu = c
            # ---- modified Newton (ThetaMethod._solve) -------------------------------
            for i in range(N):
                ynew[i] = self.ypred[i]
            have_old = False
            iters = maxiter
            for it in range(1, maxiter + 1):
                if self.f.c_eval(tnew, ynew, fb):
                    return LOOP_EVAL_FAILED
                for i in range(N):
                    dy[i] = self.base[i] + c * fb[i] - ynew[i]
                dgetrs(&trans, &nn, &one, self.LU, &nn, self.ipiv, dy, &nn, &info)
                self.counters[C_SOLVE] += 1.0
                for i in range(N):
                    ynew[i] += dy[i]
                norm = _rms_div(1.0, dy, self.scale, N, self.tmp)
                if not norm < INFINITY:            # singular matrix or overflow
                    iters = it
                    break
                if norm <= 1.0:
                    ok = True
                    iters = it
                    break
                if have_old and norm >= norm_old:
                    iters = it
                    break
                norm_old = norm
                have_old = True
            self.counters[C_NITER] += iters
            if ok:
                break
            self.nrej += 1
            self.counters[C_NEWTON] += 1.0
            if tries == 1 or self.jac_current:
                # NewtonFailure: the Python driver redoes this step and raises it
                return LOOP_EVAL_FAILED
            self.jac_valid = False                 # stale: re-evaluate, retry once
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        hist.update(t=self.t, y=np.array(self.y_arr), f=np.array(self.fn_arr),
                    t_start=self.t_start, i=self.i_top, h=self.h_step,
                    J=(np.array(self.Jsnap_arr) if self.J_kept else np.array(self.J_arr))
                    if self.jv_top else None, c_lu=self.clu_top if self.lu_top else 0.0,
                    counts=np.array([self.nsteps_top, self.nrej_top, self.nfev_top],
                                    dtype=float))
        return 0

    cdef int accept(self, bint due) except -1:
        """The end derivative; the step is taken."""
        cdef Py_ssize_t N = self.N, i
        cdef double h = self.h
        if self.evaluated:
            if self.f.c_eval(self.tnew, self.ynew, self.fb):
                return LOOP_EVAL_FAILED
        self.jac_current = False
        for i in range(N):
            self.y_old[i] = self.y[i]
            self.f_old[i] = self.fn[i]
            self.fn[i] = self.fb[i] if self.evaluated else (self.ynew[i] - self.y[i]) / h
            self.y[i] = self.ynew[i]
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), self.order)
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_step

    cdef int dense(self, double tt, double* out) except -1:
        """Linear (implicit Euler) or cubic Hermite (trapezoid) interpolation."""
        cdef Py_ssize_t N = self.N, i
        cdef double hd = self.t - self.t_old, s, s2, s3, h00, h10, h01, h11
        s = (tt - self.t_old) / hd
        if self.evaluated:
            s2 = s * s
            s3 = s2 * s
            h00 = 2 * s3 - 3 * s2 + 1
            h10 = s3 - 2 * s2 + s
            h01 = -2 * s3 + 3 * s2
            h11 = s3 - s2
            for i in range(N):
                out[i] = h00 * self.y_old[i] + h10 * (hd * self.f_old[i]) \
                    + h01 * self.y[i] + h11 * (hd * self.fn[i])
        else:
            for i in range(N):
                out[i] = self.y_old[i] + s * (self.y[i] - self.y_old[i])
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``ThetaMethod.restart`` (``_restart_impl``: a new grid
        from t, f there, no Jacobian nor LU), loaded from that object's
        ``loop_start()``."""
        cdef Py_ssize_t N = self.N
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        cdef double[::1] f0 = np.ascontiguousarray(s0["f"], dtype=np.float64)
        _size("run_theta: restart f", f0.shape[0], N)
        memcpy(self.fn, &f0[0], N * sizeof(double))
        self.t_start = float(s0["t_start"])
        self.i_step = int(s0["i"])
        self.h_step = float(s0["h"])
        self.jac_valid = False
        self.jac_current = False
        self.lu_valid = False
        self.c_lu = 0.0
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), self.order, self.nsteps, self.nrej,
                   self.nfev())
        else:
            _stats(stats, fabs(self.h), self.order, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h


def run_theta(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
              double[::1] f0 not None, double t_start, long i_step, double h_step,
              double theta, int order, bint evaluated, int maxiter, double newton_rtol,
              double newton_atol, double[::1] t_out not None, Py_ssize_t i_out,
              object on_output, double[::1] stats not None, double[::1] counters not None,
              long nfev_start=0, const idx_t[::1] stop_idx=None,
              const double[::1] stop_val=None, const double[::1] stop_sign=None,
              double[::1] ystep=None, dict hist=None, const double[::1] J0=None,
              double c_lu0=0.0, long max_steps=0, object on_commit=None,
              object restart=None):
    """Integrate from (t0, y0) to t1 > t0 by ``ThetaMethod`` (:class:`ThetaStepper`;
    Jacobian ``f.c_jac``: forward differences as ``Integrator.jac``/``num_jac`` with
    the floor 1e-8, or the right-hand side's semi-analytic one, see
    :func:`_jacobian`) from its state after ``_restart_impl`` or an accepted step:
    ``f0`` = f(t0, y0) (the method's end derivative), the grid ``t_start + i h_step``
    with ``i_step`` steps taken, no Jacobian nor LU yet.  ``evaluated``: the end
    derivative is f(t_n+1, y_n+1) and the dense output cubic Hermite (``Trapezoid``);
    else (y_n+1 − y_n)/h and linear interpolation (``ImplicitEuler``).  A Newton
    failure with a fresh Jacobian returns code 2 (the Python driver redoes the step
    and raises ``NewtonFailure``).  Checkpoints: before the outputs of a step
    ``ystep`` (N + 2 floats) receives its end state, time and ``h_step``, ``hist`` (a
    dict) the state at that step's start, from which the step is redone: ``t``,
    ``y``, ``f`` (the derivative there), ``t_start``, ``i``, ``h``, ``J``
    (column-major copy, None if to be re-evaluated), ``c_lu`` (0: no LU) and
    ``counts`` (steps, rejected steps, evaluations before it); ``J0``, ``c_lu0``: start
    from such a Jacobian and its LU (refactored, uncounted).  ``on_commit``,
    ``restart``: a change of coordinates at step ends, the method restarted there (as
    :func:`run_abm`'s: a new grid from there).  Returns ``(code, t, y,
    i_out, h)`` (module docstring; code 3: the remaining interval is below the
    round-off limit).  Refused (ValueError naming the argument): the checks of
    :func:`_check_common`, f0 of the wrong size or non-finite, maxiter < 1, h_step
    not positive and finite, theta outside [0, 1], newton_rtol / newton_atol not
    finite and >= 0, a grid point ``t_start + i_step h_step`` more than two steps
    from t0 (else the loop would step towards it: a hang), J0 of the wrong size."""
    cdef Py_ssize_t N = y0.shape[0], i
    _check_common("run_theta", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps)
    _size("run_theta: f0", f0.shape[0], N)
    _all_finite("run_theta: f0", f0)
    _index("run_theta: maxiter", maxiter, 1, 1 << 30)
    _positive("run_theta: h_step", h_step)
    _in_range("run_theta: theta", theta, 0.0, 1.0)
    _in_range("run_theta: newton_rtol", newton_rtol, 0.0, 1e300)
    _in_range("run_theta: newton_atol", newton_atol, 0.0, 1e300)
    if not fabs(t_start + (<double>i_step) * h_step - t0) <= 2.0 * h_step + 1e-9 * fabs(t0):
        raise ValueError(f"run_theta: the grid point t_start + i_step h_step = {t_start} + "
                         f"{i_step} * {h_step} is not within two steps of t0 = {t0}")
    if J0 is not None:
        _size("run_theta: J0", J0.shape[0], N * N)
    cdef ThetaStepper st = ThetaStepper.__new__(ThetaStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    st.t_start = t_start
    st.i_step = i_step
    st.i_top = i_step
    st.h_step = h_step
    st.theta = theta
    st.order = order
    st.evaluated = evaluated
    st.maxiter = maxiter
    st.newton_rtol = newton_rtol
    st.newton_atol = newton_atol
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.counters = counters
    st.J_arr = np.zeros(N * N)                    # column-major
    cdef double[::1] Jv = st.J_arr
    st.J = &Jv[0]
    st.LU = st.buf(N * N)                         # column-major
    ipiv = np.zeros(N, dtype=np.intc)
    st.keep.append(ipiv)
    cdef int[::1] ipivv = ipiv
    st.ipiv = &ipivv[0]
    st.fn_arr = np.array(f0, dtype=np.float64)
    cdef double[::1] fnv = st.fn_arr
    st.fn = &fnv[0]
    st.y_old = st.buf(N)
    st.f_old = st.buf(N)
    st.ypred = st.buf(N)
    st.ynew = st.buf(N)
    st.base = st.buf(N)
    st.scale = st.buf(N)
    st.fd_floor = st.buf(0, np.full(N, 1e-8))
    st.dy = st.buf(N)
    st.fb = st.buf(N)
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
        if c_lu0 != 0.0:
            st.factor_lu(c_lu0)
            st.lu_valid = True
            st.c_lu = c_lu0
    _commit_args("run_theta", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
