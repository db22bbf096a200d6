# Fixed-grid textbook methods of the step loop (included by _steploop.pyx): the
# Adams-Bashforth methods of order 1-4, the AB3/AM4 PECE pair, the second-order
# Taylor method and Stormer-Verlet (kick-drift-kick and drift-kick-drift), as the
# Python integrators of mbplugins.integrators.classical step them, and Adams-Moulton
# of order 1-4 (mbplugins.integrators.adams_moulton) on the theta-methods' modified
# Newton iteration (ThetaStepper's Jacobian, LU and buffers).

cdef enum:
    FG_AB = 0           # AdamsBashforth (Nikravesh (1988), Sec. 12.3)
    FG_ABM4 = 1         # ABM4: AB3 predictor, AM4 corrector, PECE (Sec. 12.3.3-12.3.4)
    FG_TAYLOR2 = 2      # Taylor2 (Nikravesh (1988), Eqs. 12.11-12.12)
    FG_KDK = 3          # Verlet, kick-drift-kick (Hairer, Lubich & Wanner (2006), Sec. I.1.4)
    FG_DKD = 4          # Verlet, drift-kick-drift (Sec. VI.3)
    FG_AM = 5           # AdamsMoulton (Nikravesh (1988), Sec. 12.3.2; Hairer & Wanner
                        # (1996), Sec. IV.8 for the modified Newton iteration)

#: the methods of :func:`run_fixedgrid` by name (the Python integrators' loop_start)
FIXEDGRID_METHODS = {"ab": FG_AB, "abm4": FG_ABM4, "taylor2": FG_TAYLOR2, "kdk": FG_KDK,
                     "dkd": FG_DKD, "am": FG_AM}

cdef double FG_SQRT_EPS = sqrt(2.220446049250313e-16)   # math.sqrt(EPS), correctly rounded


cdef class FixedGridStepper(Stepper):
    """The fixed-grid methods of ``mbplugins.integrators.classical`` (``_FixedGrid``:
    the grid ``t_start + i h_step``, the last step shortened onto t1, ``f`` at each
    step end kept for the next step, cubic Hermite dense output through (y, f) at
    both ends of the step), :func:`run_fixedgrid`.  ``H`` holds the past derivatives
    newest first (``nh`` rows, row 0 the derivative at t: the Python object's
    ``_f`` and ``_hist``)."""
    cdef int method, order, k, nh
    cdef Py_ssize_t m
    cdef double t_start, h_step, h, tnew, t_old
    cdef long i_step
    cdef bint full
    cdef double* beta       # AB weights (k), or AB3's for abm4
    cdef double* corr       # AM4's weights (abm4)
    cdef double* H          # k x N past derivatives, row 0 = f(t, y)
    cdef double* y_old
    cdef double* f_old
    cdef double* ynew
    cdef double* fnew
    cdef double* z
    cdef double* K          # 3 x N: RK4 starter stages 2-4, abm4's f(p) in row 0
    cdef double[::1] counters
    # checkpoints: y, H and the grid change only when the step is accepted; the step
    # index and the evaluations are kept at the step's start
    cdef bint ck
    cdef long i_top
    cdef double nfev_top

    cdef int rk4(self, double t, double h) noexcept:
        """``_FixedGrid._rk4``: one classical RK4 step from (t, y) with f = H[0]
        into ``ynew`` (three evaluations; Nikravesh (1988), Eq. 12.17); 1 when an
        evaluation fails."""
        cdef Py_ssize_t N = self.N, i
        cdef double* y = self.y
        cdef double* K0 = self.H
        cdef double* K1 = self.K
        cdef double* K2 = self.K + N
        cdef double* K3 = self.K + 2 * N
        cdef double* z = self.z
        cdef double b0 = 1.0 / 6.0, b1 = 2.0 / 6.0, b2 = 2.0 / 6.0, b3 = 1.0 / 6.0
        for i in range(N):
            z[i] = y[i] + (h * 0.5) * K0[i]
        if self.f.c_eval(t + 0.5 * h, z, K1):
            return 1
        for i in range(N):
            z[i] = y[i] + (h * 0.5) * K1[i]
        if self.f.c_eval(t + 0.5 * h, z, K2):
            return 1
        for i in range(N):
            z[i] = y[i] + (h * 1.0) * K2[i]
        if self.f.c_eval(t + 1.0 * h, z, K3):
            return 1
        for i in range(N):
            self.ynew[i] = y[i] + h * (b0 * K0[i] + b1 * K1[i] + b2 * K2[i] + b3 * K3[i])
        return 0

    cdef int attempt(self, double next_out) except -1:
        """``_step_impl`` of the method up to the state at the step's end (the
        evaluation there follows in :meth:`accept`, Verlet's is part of the step)."""
        cdef Py_ssize_t N = self.N, m = self.m, i
        cdef int j
        cdef double t = self.t, tnew, h, half, c, d, td, sc, fm, a
        cdef double* y = self.y
        cdef double* fn = self.H
        cdef double* ynew = self.ynew
        cdef double* z = self.z
        cdef double* fb = self.fnew
        if self.ck:
            self.i_top, self.nfev_top = self.i_step, self.nfev()
            self.f.c_save()             # the right-hand side's own state (warm start)
        self.i_step += 1                                # _FixedGrid._next_time
        tnew = self.t_start + (<double>self.i_step) * self.h_step
        self.full = True
        if tnew - self.t1 > -1e-9 * self.h_step:
            self.full = tnew - self.t1 < 1e-9 * self.h_step
            tnew = self.t1
        if fabs(tnew - t) < 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300):
            self.h = tnew - t
            return LOOP_STEP_TOO_SMALL
        h = tnew - t
        self.h = h
        self.tnew = tnew
        if self.method == FG_AB:
            if self.full and self.nh >= self.k:
                for i in range(N):
                    ynew[i] = y[i]
                for j in range(self.k):
                    c = h * self.beta[j]
                    for i in range(N):
                        ynew[i] = ynew[i] + c * self.H[j * N + i]
            elif self.rk4(t, h):
                return LOOP_EVAL_FAILED
        elif self.method == FG_ABM4:
            if self.full and self.nh >= 3:
                for i in range(N):                      # P
                    z[i] = y[i] + h * (self.beta[0] * fn[i] + self.beta[1] * fn[N + i]
                                       + self.beta[2] * fn[2 * N + i])
                if self.f.c_eval(tnew, z, self.K):      # E
                    return LOOP_EVAL_FAILED
                for i in range(N):                      # C
                    ynew[i] = y[i] + h * (self.corr[0] * self.K[i] + self.corr[1] * fn[i]
                                          + self.corr[2] * fn[N + i]
                                          + self.corr[3] * fn[2 * N + i])
            elif self.rk4(t, h):
                return LOOP_EVAL_FAILED
        elif self.method == FG_TAYLOR2:                 # Taylor2.difference_step
            sc = fabs(t) if fabs(t) > 1.0 else 1.0
            fm = 0.0
            for i in range(N):
                a = fabs(y[i])
                if a > fm:
                    fm = a
            if fm > sc:
                sc = fm
            fm = 0.0
            for i in range(N):
                a = fabs(fn[i])
                if a > fm:
                    fm = a
            d = FG_SQRT_EPS * sc / (fm if fm > 1.0 else 1.0)
            td = t + d
            d = td - t                      # the representable time increment
            for i in range(N):
                z[i] = y[i] + d * fn[i]
            if self.f.c_eval(td, z, fb):
                return LOOP_EVAL_FAILED
            c = 0.5 * h * h
            for i in range(N):
                ynew[i] = y[i] + h * fn[i] + c * ((fb[i] - fn[i]) / d)
        elif self.method == FG_KDK:
            half = 0.5 * h
            for i in range(m):
                a = y[m + i] + half * fn[m + i]         # kick: v_1/2
                ynew[m + i] = a
                ynew[i] = y[i] + h * a                  # drift
                z[i] = ynew[i]
                z[m + i] = a + half * fn[m + i]         # velocity guess
            for i in range(2 * m, N):
                z[i] = y[i]
            if self.f.c_eval(tnew, z, fb):
                return LOOP_EVAL_FAILED
            for i in range(m):
                ynew[m + i] = ynew[m + i] + half * fb[m + i]    # kick
            for i in range(2 * m, N):
                ynew[i] = y[i] + half * (fn[i] + fb[i])
            for i in range(m):
                fb[i] = ynew[m + i]                     # q' = qd at the end
        else:                                           # FG_DKD
            half = 0.5 * h
            for i in range(m):
                z[i] = y[i] + half * y[m + i]           # drift
                z[m + i] = y[m + i] + half * fn[m + i]  # velocity guess
            for i in range(2 * m, N):
                z[i] = y[i]
            if self.f.c_eval(t + half, z, fb):
                return LOOP_EVAL_FAILED
            for i in range(m):
                ynew[m + i] = y[m + i] + h * fb[m + i]  # kick
                ynew[i] = z[i] + half * ynew[m + i]     # drift
            for i in range(2 * m, N):
                ynew[i] = y[i] + h * fb[i]
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        """The state at the step's start (checkpoints; the step is redone from it):
        ``t``, ``y``, ``f`` (the derivative there, H's row 0), ``hist`` (the ``nh``
        past derivatives, newest first), the grid ``t_start``, ``i``, ``h`` and
        ``counts`` (steps, rejected steps, evaluations before it)."""
        cdef Py_ssize_t N = self.N, nhN = self.nh * self.N
        hist.update(t=self.t, y=np.array(self.y_arr), f=np.array(<double[:N]> self.H),
                    hist=np.array(<double[:nhN]> self.H).reshape(self.nh, N),
                    t_start=self.t_start, i=self.i_top, h=self.h_step,
                    counts=np.array([self.nsteps, self.nrej, self.nfev_top], dtype=float))
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = self.h_step

    cdef int accept(self, bint due) except -1:
        """f at the step's end (Adams, Taylor), ``_FixedGrid._accept`` and the
        history ``((f_new,) + hist)[:k]`` (a shortened step: ``(f_new,)``)."""
        cdef Py_ssize_t N = self.N, m = self.m, i
        cdef int j, top
        if self.method == FG_AB or self.method == FG_ABM4 or self.method == FG_TAYLOR2:
            if self.f.c_eval(self.tnew, self.ynew, self.fnew):
                return LOOP_EVAL_FAILED
        memcpy(self.y_old, self.y, N * sizeof(double))
        if self.method == FG_DKD:        # the constant-acceleration path's slopes at t_n
            memcpy(self.f_old, self.fnew, N * sizeof(double))
            for i in range(m):
                self.f_old[i] = self.y[m + i]
                self.fnew[i] = self.ynew[m + i]
        else:
            memcpy(self.f_old, self.H, N * sizeof(double))
        if self.full:
            top = self.nh if self.nh < self.k - 1 else self.k - 1
            for j in range(top, 0, -1):
                memcpy(&self.H[j * N], &self.H[(j - 1) * N], N * sizeof(double))
            self.nh = top + 1
        else:
            self.nh = 1
        memcpy(self.H, self.fnew, N * sizeof(double))
        memcpy(self.y, self.ynew, N * sizeof(double))
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), self.order)
        return 0

    cdef int dense(self, double tt, double* out) except -1:
        """Cubic Hermite through (y_old, f_old) and (y, f) (``HermiteDenseOutput``,
        ``mbcore.integrate.common.hermite_basis``)."""
        cdef Py_ssize_t N = self.N, i
        cdef double hd = self.t - self.t_old, s, s2, s3, h00, h10, h01, h11
        s = (tt - self.t_old) / hd
        s2 = s * s
        s3 = s2 * s
        h00 = 2 * s3 - 3 * s2 + 1
        h10 = s3 - 2 * s2 + s
        h01 = -2 * s3 + 3 * s2
        h11 = s3 - s2
        for i in range(N):
            out[i] = h00 * self.y_old[i] + h10 * (hd * self.f_old[i]) \
                + h01 * self.y[i] + h11 * (hd * self.H[i])
        return 0

    cdef int load_start(self, object s0) except -1:
        """The grid and derivatives of the Python object's ``loop_start()``."""
        cdef Py_ssize_t N = self.N, i, j
        cdef double[:, ::1] H0 = np.ascontiguousarray(
            np.reshape(np.asarray(s0["hist"], dtype=np.float64), (-1, N)))
        if H0.shape[0] < 1 or H0.shape[0] > self.k:
            raise ValueError(f"run_fixedgrid: hist has {H0.shape[0]} rows, needs 1 to "
                             f"{self.k}")
        for j in range(H0.shape[0]):
            for i in range(N):
                if not isfinite(H0[j, i]):
                    raise ValueError("run_fixedgrid: hist has a non-finite entry")
                self.H[j * N + i] = H0[j, i]
        self.nh = <int>H0.shape[0]
        self.t_start = float(s0["t_start"])
        self.i_step = int(s0["i"])
        self.h_step = float(s0["h"])
        _positive("run_fixedgrid: h_step", self.h_step)
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``restart`` (``start_fixed_grid``: a new grid from t, f
        there, the history that one derivative), loaded from the restarted object's
        ``loop_start()``."""
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        self.load_start(s0)
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


cdef class AMStepper(ThetaStepper):
    """``AdamsMoulton`` (:func:`run_fixedgrid` with method 'am'): the grid of
    ``_FixedGrid``, RK4 starter steps while fewer than k - 1 past derivatives are
    known (and on a shortened step), then the AB_(k-1) predictor and the modified
    Newton iteration of the theta-methods for ``y = base + h beta_0 f(t_n+1, y)`` (the
    Jacobian ``c_jac`` at the predictor, LU of ``I - h beta_0 J`` reused while ``h
    beta_0`` is unchanged, the Jacobian refreshed and the step retried once after a
    failure), f evaluated at the step's end; cubic Hermite dense output (the
    ThetaStepper's, ``evaluated``)."""
    cdef int k, kp, nh
    cdef bint full
    cdef double* beta       # AM weights (k)
    cdef double* pred       # AB_(k-1) weights (kp = max(k - 1, 1))
    cdef double* H          # kp x N past derivatives, row 0 = f(t, y)
    cdef double* K          # 3 x N RK4 starter stages 2-4
    cdef double* z

    cdef int rk4(self, double t, double h) noexcept:
        """``_FixedGrid._rk4`` into ``ynew`` (as FixedGridStepper.rk4)."""
        cdef Py_ssize_t N = self.N, i
        cdef double* y = self.y
        cdef double* K0 = self.H
        cdef double* K1 = self.K
        cdef double* K2 = self.K + N
        cdef double* K3 = self.K + 2 * N
        cdef double* z = self.z
        cdef double b0 = 1.0 / 6.0, b1 = 2.0 / 6.0, b2 = 2.0 / 6.0, b3 = 1.0 / 6.0
        for i in range(N):
            z[i] = y[i] + (h * 0.5) * K0[i]
        if self.f.c_eval(t + 0.5 * h, z, K1):
            return 1
        for i in range(N):
            z[i] = y[i] + (h * 0.5) * K1[i]
        if self.f.c_eval(t + 0.5 * h, z, K2):
            return 1
        for i in range(N):
            z[i] = y[i] + (h * 1.0) * K2[i]
        if self.f.c_eval(t + 1.0 * h, z, K3):
            return 1
        for i in range(N):
            self.ynew[i] = y[i] + h * (b0 * K0[i] + b1 * K1[i] + b2 * K2[i] + b3 * K3[i])
        return 0

    cdef int attempt(self, double next_out) except -1:
        """``AdamsMoulton._step_impl`` / ``_implicit_step`` up to the step's end state."""
        cdef Py_ssize_t N = self.N, i
        cdef int info = 0, one = 1, nn = <int>N, it, iters, tries, j, npred
        cdef int maxiter = self.maxiter
        cdef double t = self.t, tnew, h, c, cj, norm, norm_old = 0.0
        cdef char trans = b'N'
        cdef bint ok, have_old
        cdef double* y = self.y
        cdef double* ynew = self.ynew
        cdef double* dy = self.dy
        cdef double* fb = self.fb
        if self.ck:                     # the step's start (ThetaStepper.attempt's)
            self.i_top, self.jv_top, self.J_kept, self.lu_top, self.clu_top = \
                self.i_step, self.jac_valid, False, self.lu_valid, self.c_lu
            self.nsteps_top, self.nrej_top, self.nfev_top = self.nsteps, self.nrej, self.nfev()
            self.f.c_save()
        self.i_step += 1                                # _FixedGrid._next_time
        tnew = self.t_start + (<double>self.i_step) * self.h_step
        self.full = True
        if tnew - self.t1 > -1e-9 * self.h_step:
            self.full = tnew - self.t1 < 1e-9 * self.h_step
            tnew = self.t1
        h = tnew - t
        self.h = h
        self.tnew = tnew
        if fabs(h) < 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300):
            return LOOP_STEP_TOO_SMALL
        if not (self.full and self.nh >= self.k - 1):   # starter or shortened step
            if self.rk4(t, h):
                return LOOP_EVAL_FAILED
            self.t_end = tnew
            return 0
        for i in range(N):
            self.base[i] = y[i]
            self.ypred[i] = y[i]
            self.scale[i] = self.newton_atol + self.newton_rtol * fabs(y[i])
        for j in range(self.k - 1):                     # zip(beta[1:], hist)
            cj = h * self.beta[j + 1]
            for i in range(N):
                self.base[i] = self.base[i] + cj * self.H[j * N + i]
        npred = self.kp if self.kp < self.nh else self.nh
        for j in range(npred):                          # zip(pred, hist)
            cj = h * self.pred[j]
            for i in range(N):
                self.ypred[i] = self.ypred[i] + cj * self.H[j * N + i]
        c = h * self.beta[0]
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
        self.jac_current = False
        self.t_end = tnew
        return 0

    cdef int accept(self, bint due) except -1:
        """f at the step's end, ``_accept`` and the history ``((f_new,) +
        hist)[:max(k - 1, 1)]`` (a shortened step: ``(f_new,)``)."""
        cdef Py_ssize_t N = self.N
        cdef int j, top
        if self.f.c_eval(self.tnew, self.ynew, self.fb):
            return LOOP_EVAL_FAILED
        memcpy(self.y_old, self.y, N * sizeof(double))
        memcpy(self.f_old, self.fn, N * sizeof(double))
        memcpy(self.fn, self.fb, N * sizeof(double))
        memcpy(self.y, self.ynew, N * sizeof(double))
        if self.full:
            top = self.nh if self.nh < self.kp - 1 else self.kp - 1
            for j in range(top, 0, -1):
                memcpy(&self.H[j * N], &self.H[(j - 1) * N], N * sizeof(double))
            self.nh = top + 1
        else:
            self.nh = 1
        memcpy(self.H, self.fb, N * sizeof(double))
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), self.order)
        return 0

    cdef int save_start(self, dict hist) except -1:
        """ThetaStepper.save_start's state at the step's start (``t``, ``y``, ``f``,
        the grid, the Jacobian ``J`` kept before a re-evaluation inside the step,
        ``c_lu``, ``counts``) and ``hist``, the past derivatives (newest first)."""
        cdef Py_ssize_t N = self.N, nhN = self.nh * self.N
        ThetaStepper.save_start(self, hist)
        hist["hist"] = np.array(<double[:nhN]> self.H).reshape(self.nh, N)
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates: the restart of ThetaStepper.replace_end (a new
        grid, f there, no Jacobian nor LU) and the history that one derivative."""
        cdef int code = ThetaStepper.replace_end(self, r)
        if code:
            return code
        memcpy(self.H, self.fn, self.N * sizeof(double))
        self.nh = 1
        return 0


cdef AMStepper _am_stepper(CompiledODE f, double t0, double[::1] y0, double t1,
                           long nfev_start, object start, int order, double[::1] beta,
                           double[::1] pred, int maxiter, double newton_rtol,
                           double newton_atol, double[::1] counters, bint ck,
                           const double[::1] J0, double c_lu0):
    """An AMStepper with the buffers of run_theta's ThetaStepper and the start state
    of the Python object's ``loop_start()`` (``f``, ``hist``, grid); ``ck``: keep the
    state at each step's start (checkpoints); ``J0``, ``c_lu0``: a checkpoint's
    Jacobian and its LU (run_theta's)."""
    cdef Py_ssize_t N = y0.shape[0], i, j
    _index("run_fixedgrid: beta.size", beta.shape[0], 1, 4)
    _size("run_fixedgrid: pred", pred.shape[0], beta.shape[0] - 1 if beta.shape[0] > 1 else 1)
    _index("run_fixedgrid: maxiter", maxiter, 1, 1 << 30)
    _in_range("run_fixedgrid: newton_rtol", newton_rtol, 0.0, 1e300)
    _in_range("run_fixedgrid: newton_atol", newton_atol, 0.0, 1e300)
    cdef AMStepper st = AMStepper.__new__(AMStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    st.k = <int>beta.shape[0]
    st.kp = <int>pred.shape[0]
    st.beta = st.buf(0, np.asarray(beta))
    st.pred = st.buf(0, np.asarray(pred))
    st.theta = 1.0
    st.order = order
    st.evaluated = True
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
    st.LU = st.buf(N * N)
    ipiv = np.zeros(N, dtype=np.intc)
    st.keep.append(ipiv)
    cdef int[::1] ipivv = ipiv
    st.ipiv = &ipivv[0]
    cdef double[:, ::1] H0 = np.ascontiguousarray(
        np.reshape(np.asarray(start["hist"], dtype=np.float64), (-1, N)))
    if H0.shape[0] < 1 or H0.shape[0] > st.kp:
        raise ValueError(f"run_fixedgrid: hist has {H0.shape[0]} rows, needs 1 to {st.kp}")
    _all_finite("run_fixedgrid: hist", np.asarray(H0))
    st.H = st.buf(st.kp * N)
    for j in range(H0.shape[0]):
        for i in range(N):
            st.H[j * N + i] = H0[j, i]
    st.nh = <int>H0.shape[0]
    st.fn_arr = np.array(H0[0], dtype=np.float64)
    cdef double[::1] fnv = st.fn_arr
    st.fn = &fnv[0]
    st.t_start = float(start["t_start"])
    st.i_step = int(start["i"])
    st.h_step = float(start["h"])
    _positive("run_fixedgrid: h_step", st.h_step)
    st.y_old = st.buf(N)
    st.f_old = st.buf(N)
    st.ypred = st.buf(N)
    st.ynew = st.buf(N)
    st.base = st.buf(N)
    st.scale = st.buf(N)
    st.fd_floor = st.buf(0, np.full(N, 1e-8))
    st.dy = st.buf(N)
    st.fb = st.buf(N)
    st.jwork = st.buf(3 * N)
    st.tmp = st.buf(N)
    st.K = st.buf(3 * N)
    st.z = st.buf(N)
    st.y_trial = st.ynew
    st.ck = ck
    st.i_top = st.i_step
    st.Jsnap_arr = np.zeros(N * N if ck else 1)
    cdef double[::1] jsv = st.Jsnap_arr
    st.Jsnap = &jsv[0]
    st.full = True
    if J0 is not None:                  # resume: the Jacobian (and LU) of a checkpoint
        _size("run_fixedgrid: J0", J0.shape[0], N * N)
        _all_finite("run_fixedgrid: J0", J0)
        for i in range(N * N):
            st.J[i] = J0[i]
        st.jac_valid = True
        if c_lu0 != 0.0:
            st.factor_lu(c_lu0)
            st.lu_valid = True
            st.c_lu = c_lu0
    return st


def run_fixedgrid(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
                  str method, object start, int order, double[::1] beta not None,
                  double[::1] corr not None, Py_ssize_t positions,
                  double[::1] t_out not None, Py_ssize_t i_out, object on_output,
                  double[::1] stats not None, double[::1] counters not None,
                  long nfev_start=0, const idx_t[::1] stop_idx=None,
                  const double[::1] stop_val=None, const double[::1] stop_sign=None,
                  long max_steps=0, object on_commit=None, object restart=None,
                  int maxiter=7, double newton_rtol=1e-3, double newton_atol=1e-6,
                  double[::1] ystep=None, dict hist=None, const double[::1] J0=None,
                  double c_lu0=0.0):
    """Integrate from (t0, y0) to t1 > t0 by a fixed-grid method of
    ``mbplugins.integrators.classical`` (:class:`FixedGridStepper`), from the Python
    object's state after its start-up: ``start`` its ``loop_start()`` (``hist``: the
    derivative at t0 and the past ones, newest first, one row each; the grid
    ``t_start + i h`` with ``i`` steps taken).  ``method``: 'ab' (Adams-Bashforth,
    weights ``beta``, k = beta.size <= 4 past derivatives; RK4 steps while fewer are
    known and on a shortened step), 'abm4' (AB3 predictor ``beta`` (3), AM4
    corrector ``corr`` (4), PECE), 'taylor2' (y'' by a forward difference of f along
    (1, f)), 'kdk' / 'dkd' (Stormer-Verlet for y = [q; v; w] with ``positions`` = m
    coordinates q), 'am' (Adams-Moulton, weights ``beta`` (k <= 4), the AB_(k-1)
    predictor ``corr`` (max(k - 1, 1) weights), Newton: ``maxiter``, ``newton_rtol``,
    ``newton_atol``; a Newton failure with a fresh Jacobian returns code 2, the Python
    driver redoes the step and raises ``NewtonFailure``).  ``order`` is the method's
    order (statistics).  Checkpoints (as :func:`run_theta`'s): before the outputs of
    a step ``ystep`` (N + 2 floats) receives its end state, time and ``h``, ``hist``
    (a dict) the state at that step's start, from which the step is redone: ``t``,
    ``y``, ``f`` (the derivative there), ``hist`` (the past derivatives, newest
    first: the ``hist`` of a ``start``), ``t_start``, ``i``, ``h``, ``counts`` (steps,
    rejected steps, evaluations before it) and, for 'am', ``J`` (column-major, None
    if to be re-evaluated) and ``c_lu`` (0: no LU); ``J0``, ``c_lu0`` ('am' only):
    start from such a Jacobian and its LU (refactored, uncounted).  ``on_commit``,
    ``restart``: a change of coordinates at step ends, the method restarted there (as
    :func:`run_theta`'s: a new grid from there).  Returns ``(code, t, y, i_out, h)``
    (module docstring; code 3: the remaining interval is below the round-off limit).
    Refused (ValueError naming the argument): the checks of :func:`_check_common`,
    an unknown method, beta / corr of the wrong size, positions outside [1, N/2] for
    Verlet, a start history of the wrong shape or non-finite, h not positive and
    finite, a grid point ``t_start + i h`` more than two steps from t0, ystep shorter
    than N + 2, J0 with a method other than 'am' or of the wrong size."""
    cdef Py_ssize_t N = y0.shape[0]
    _check_common("run_fixedgrid", f, t0, t1, y0, t_out, i_out, stats, counters,
                  stop_idx, stop_val, stop_sign, ystep, max_steps)
    if method not in FIXEDGRID_METHODS:
        raise ValueError(f"run_fixedgrid: method = {method!r} must be one of "
                         f"{sorted(FIXEDGRID_METHODS)}")
    cdef int code = FIXEDGRID_METHODS[method]
    cdef int k = 1
    cdef AMStepper am
    if code == FG_AM:
        am = _am_stepper(f, t0, y0, t1, nfev_start, start, order, beta, corr, maxiter,
                         newton_rtol, newton_atol, counters, hist is not None, J0, c_lu0)
        if not fabs(am.t_start + (<double>am.i_step) * am.h_step - t0) \
                <= 2.0 * am.h_step + 1e-9 * fabs(t0):
            raise ValueError(f"run_fixedgrid: the grid point t_start + i h = "
                             f"{am.t_start} + {am.i_step} * {am.h_step} is not within two "
                             f"steps of t0 = {t0}")
        _commit_args("run_fixedgrid", on_commit, restart)
        am.restart_cb = restart
        am.gate = bool(f.post_step) and restart is not None
        return _run(am, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                    ystep, hist, max_steps, on_commit)
    if J0 is not None:
        raise ValueError(f"run_fixedgrid: J0 is for method 'am', not {method!r}")
    if code == FG_AB:
        _index("run_fixedgrid: beta.size", beta.shape[0], 1, 4)
        k = <int>beta.shape[0]
    elif code == FG_ABM4:
        _size("run_fixedgrid: beta", beta.shape[0], 3)
        _size("run_fixedgrid: corr", corr.shape[0], 4)
        k = 3
    elif code == FG_KDK or code == FG_DKD:
        _index("run_fixedgrid: positions", positions, 1, N // 2)
    _all_finite("run_fixedgrid: beta", beta)
    _all_finite("run_fixedgrid: corr", corr)
    cdef FixedGridStepper st = FixedGridStepper.__new__(FixedGridStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    st.method = code
    st.order = order
    st.k = k
    st.m = positions
    st.beta = st.buf(0, np.asarray(beta))
    st.corr = st.buf(0, np.asarray(corr))
    st.H = st.buf(k * N)
    st.y_old = st.buf(N)
    st.f_old = st.buf(N)
    st.ynew = st.buf(N)
    st.fnew = st.buf(N)
    st.z = st.buf(N)
    st.K = st.buf(3 * N)
    st.counters = counters
    st.load_start(start)
    if not fabs(st.t_start + (<double>st.i_step) * st.h_step - t0) \
            <= 2.0 * st.h_step + 1e-9 * fabs(t0):
        raise ValueError(f"run_fixedgrid: the grid point t_start + i h = {st.t_start} + "
                         f"{st.i_step} * {st.h_step} is not within two steps of t0 = {t0}")
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.full = True
    st.y_trial = st.ynew
    st.ck = hist is not None
    st.i_top = st.i_step
    _commit_args("run_fixedgrid", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
