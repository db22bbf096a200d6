# Adams PECE stepper of the step loop (included by _steploop.pyx): Shampine and
# Gordon's STEP / INTRP.

cdef inline double _rms_mul(const double* v, const double* w, Py_ssize_t N,
                            double* tmp) noexcept nogil:
    """rms_norm(v * w) (``math.sqrt(x.dot(x) / x.size)``)."""
    cdef Py_ssize_t i
    cdef int n = <int>N
    for i in range(N):
        tmp[i] = v[i] * w[i]
    return sqrt(ddot(&n, tmp, &ONE, tmp, &ONE) / N)


cdef inline double _rms_div(double c, const double* v, const double* s,
                            Py_ssize_t N, double* tmp) noexcept nogil:
    """rms_norm(c * v / s)."""
    cdef Py_ssize_t i
    cdef int n = <int>N
    for i in range(N):
        tmp[i] = (c * v[i]) / s[i]
    return sqrt(ddot(&n, tmp, &ONE, tmp, &ONE) / N)


cdef inline void _vecmat(const double* x, const double* A, Py_ssize_t rows, Py_ssize_t N,
                         double* out) noexcept nogil:
    """out = x @ A for A (rows x N, C order), as NumPy's matmul calls BLAS."""
    cdef int n = <int>N, r = <int>rows
    cdef char tr = b'N'
    dgemv(&tr, &n, &r, &D_ONE, <double*>A, &n, <double*>x, &ONE, &D_ZERO, out, &ONE)


cdef class AdamsStepper(Stepper):
    """``AdamsPECE`` (:func:`run_abm`): the modified divided differences ``phi``
    (kmax + 2 rows), the past steps ``hs``, the next step ``h``, order ``k``."""
    cdef Py_ssize_t K2
    cdef int k, kmax, kstep, k_next, k_top
    cdef long neq, neq_top, nsteps_top, nrej_top
    cdef bint phase1, phase1_top, ck
    cdef double h, h_last, hnext, tnew, t_old, h_top, nfev_top
    cdef double rtol, atol, max_step
    cdef double* gamma
    cdef double* gstar_abs
    cdef object phi_a, nphi_a, hs_a
    cdef double* phi
    cdef double* nphi
    cdef double* phis
    cdef double* hs
    cdef double* p
    cdef double* ynew
    cdef double* fp
    cdef double* sstar
    cdef double* d1
    cdef double* d2
    cdef double* isc
    cdef double* tmp
    cdef double* psi_new
    cdef double* psi_old
    cdef double* alpha
    cdef double* beta
    cdef double* sigma
    cdef double* g
    cdef double* w
    cdef double* psid
    cdef double* G
    cdef double[::1] counters

    cdef int attempt(self, double next_out) except -1:
        """AdamsPECE._step_impl up to the choice of the next order and step."""
        cdef Py_ssize_t N = self.N, i, j, kk
        cdef double* phis = self.phis
        cdef double* phi = self.phi
        cdef double* d1 = self.d1
        cdef double* d2 = self.d2
        cdef double* isc = self.isc
        cdef double* y = self.y
        cdef double* p = self.p
        cdef double* fp = self.fp
        cdef double* beta = self.beta
        cdef double* sigma = self.sigma
        cdef double* g = self.g
        cdef double* gstar_abs = self.gstar_abs
        cdef double t = self.t, t1 = self.t1, tnew, h, habs, nk, erk, err, erkm1, erkm2
        cdef double erkp1, factor, a, b, acc, c, hnext, r, min_step
        cdef long ns
        cdef int ifail, knew, k_next, k1, k
        cdef bint uniform
        # the scalars of the state at the step's start (its arrays phi, hs and y
        # change only when the step is accepted)
        self.h_top, self.k_top, self.neq_top, self.phase1_top = \
            self.h, self.k, self.neq, self.phase1
        self.nsteps_top, self.nrej_top, self.nfev_top = self.nsteps, self.nrej, self.nfev()
        if self.ck:
            self.f.c_save()             # the right-hand side's own state (warm start)
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        ifail = 0
        if fabs(self.h) > self.max_step:
            self.h = self.max_step
        while True:
            h = self.h
            k = self.k
            if fabs(h) < min_step:
                return LOOP_STEP_TOO_SMALL
            tnew = t + h
            if tnew - t1 > 0 or fabs(t1 - tnew) < min_step:
                tnew = t1
                h = tnew - t
                self.h = h
            self.tnew = tnew
            if h != self.h_last:
                self.neq = 0
            ns = self.neq + 1
            # coefficients psi(n+1), beta, sigma, g (STEP block 1)
            k1 = k + 1
            uniform = self.neq >= k1 and h == self.h_last
            if uniform:
                for j in range(k1):
                    self.psi_new[j] = h * (j + 1.0)
                for j in range(k1 + 1):
                    beta[j] = 1.0
                    sigma[j] = 1.0
                    g[j] = self.gamma[j]
            else:
                acc = 0.0
                for j in range(k1):
                    acc = acc + self.hs[j]
                    self.psi_old[j] = acc
                self.psi_new[0] = h
                for j in range(1, k1):
                    self.psi_new[j] = h + self.psi_old[j - 1]
                for j in range(k1):
                    self.alpha[j] = h / self.psi_new[j]
                beta[0] = 1.0
                for j in range(1, k1):
                    beta[j] = beta[j - 1] * (self.psi_new[j - 1] / self.psi_old[j - 1])
                sigma[0] = 1.0
                for j in range(1, k1 + 1):
                    sigma[j] = sigma[j - 1] * (j * self.alpha[j - 1])
                for j in range(k1 + 1):
                    self.w[j] = 1.0 / (j + 1)
                g[0] = 1.0
                for i in range(1, k1 + 1):
                    for j in range(k1 + 1 - i):
                        self.w[j] = self.w[j] - self.alpha[i - 1] * self.w[j + 1]
                    g[i] = self.w[0]
            for kk in range(k1):
                for i in range(N):
                    phis[kk * N + i] = beta[kk] * phi[kk * N + i]
            # predict, evaluate
            _vecmat(g, phis, k, N, p)
            for i in range(N):
                p[i] = y[i] + h * p[i]
            if self.f.c_eval(tnew, p, fp):
                return LOOP_EVAL_FAILED
            for i in range(N):
                acc = phis[i]
                for kk in range(1, k):
                    acc = acc + phis[kk * N + i]
                self.sstar[i] = acc
                d1[i] = fp[i] - acc
                a = fabs(y[i])
                b = fabs(p[i])
                isc[i] = 1.0 / (self.atol + self.rtol * (a if a >= b else b))
            habs = fabs(h)
            nk = _rms_mul(d1, isc, N, self.tmp)
            erk = habs * sigma[k] * gstar_abs[k] * nk
            err = habs * fabs(g[k - 1] - g[k]) * nk
            knew = k
            erkm1 = 0.0
            erkm2 = 0.0
            if k >= 2:
                for i in range(N):
                    d2[i] = d1[i] + phis[(k - 1) * N + i]         # phi_k(n+1)
                erkm1 = habs * sigma[k - 1] * gstar_abs[k - 1] * _rms_mul(d2, isc, N, self.tmp)
                if k >= 3:
                    for i in range(N):
                        d2[i] = d2[i] + phis[(k - 2) * N + i]     # phi_{k-1}(n+1)
                    erkm2 = habs * sigma[k - 2] * gstar_abs[k - 2] * \
                        _rms_mul(d2, isc, N, self.tmp)
                    if (erkm1 if erkm1 >= erkm2 else erkm2) <= erk:
                        knew = k - 1
                elif erkm1 <= 0.5 * erk:
                    knew = k - 1
            if err <= 1.0:
                break
            # rejected: halve (three times), then order 1 and the optimal step
            self.nrej += 1
            self.counters[C_ERR] += 1.0
            self.phase1 = False
            ifail += 1
            factor = 0.5
            if ifail >= 3:
                knew = 1
                if ifail > 3 and erk > 2.0:
                    factor = sqrt(0.5 / erk)
            self.h = h * factor
            self.k = knew
        # ---- correct, evaluate -------------------------------------------------------
        c = h * g[k]
        for i in range(N):
            self.ynew[i] = p[i] + c * d1[i]
        if self.f.c_eval(tnew, self.ynew, fp):
            return LOOP_EVAL_FAILED
        cdef double* nphi = self.nphi
        for i in range(N):
            a = fp[i] - self.sstar[i]               # phi_{k+1}(n+1)
            b = a - phis[k * N + i]                 # phi_{k+2}(n+1)
            acc = phis[(k - 1) * N + i]
            nphi[(k - 1) * N + i] = acc + a
            for kk in range(k - 2, -1, -1):
                acc = acc + phis[kk * N + i]
                nphi[kk * N + i] = acc + a
            nphi[k * N + i] = a
            nphi[(k + 1) * N + i] = b
            for kk in range(k + 2, self.K2):
                nphi[kk * N + i] = 0.0
            d2[i] = b
        # ---- order for the next step (STEP block 4) ---------------------------------
        erkp1 = 0.0
        if knew == k - 1 or k == self.kmax:
            self.phase1 = False
        if self.phase1:
            k_next = k + 1
            erk = 0.0
        elif knew == k - 1:
            k_next = k - 1
            erk = erkm1
        elif k + 1 > ns or k == self.kmax:
            k_next = k
        else:
            erkp1 = habs * gstar_abs[k + 1] * _rms_mul(d2, isc, N, self.tmp)
            k_next = k
            if k == 1:
                if erkp1 < 0.5 * erk:
                    k_next = 2
                    erk = erkp1
            elif erkm1 <= (erk if erk <= erkp1 else erkp1):
                k_next = k - 1
                erk = erkm1
            elif erkp1 < erk:
                k_next = k + 1
                erk = erkp1
        # step size for the next step
        if self.phase1 or 0.5 >= erk * pow(2.0, k_next + 1):
            hnext = 2.0 * h
        elif 0.5 >= erk:
            hnext = h
        else:
            r = pow(0.5 / erk, 1.0 / (k_next + 1))
            if r > 0.9:
                r = 0.9
            if r < 0.5:
                r = 0.5
            hnext = h * r
        if fabs(hnext) > self.max_step:
            hnext = self.max_step
        self.k_next = k_next
        self.hnext = hnext
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        hist.update(t=self.t, y=np.array(self.y_arr), phi=np.array(self.phi_a),
                    hs=np.array(self.hs_a), h=self.h_top, h_last=self.h_last, k=self.k_top,
                    neq=self.neq_top, phase1=1.0 if self.phase1_top else 0.0,
                    counts=np.array([self.nsteps_top, self.nrej_top, self.nfev_top],
                                    dtype=float))
        return 0

    cdef int accept(self, bint due) except -1:
        cdef Py_ssize_t j
        cdef double h = self.h
        cdef double* swap
        for j in range(self.k):
            self.psid[j] = self.psi_new[j]
        self.neq = self.neq + 1 if h == self.h_last else 1
        self.h_last = h
        for j in range(self.K2 - 1, 0, -1):
            self.hs[j] = self.hs[j - 1]
        self.hs[0] = h
        swap = self.phi
        self.phi = self.nphi
        self.nphi = swap
        self.phi_a, self.nphi_a = self.nphi_a, self.phi_a
        self.kstep = self.k
        self.k = self.k_next
        self.h = self.hnext
        self.t_old = self.t
        self.t = self.tnew
        memcpy(self.y, self.ynew, self.N * sizeof(double))
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), self.kstep)
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        if ystep.shape[0] >= N + 2:
            for i in range(N):
                ystep[i] = self.y[i]
            ystep[N] = self.t
            ystep[N + 1] = fabs(self.h)

    cdef int dense(self, double tt, double* out) except -1:
        """INTRP (``AdamsDenseOutput``) in the step just taken."""
        cdef Py_ssize_t N = self.N, i, j, kk, m, lim
        cdef double* w = self.w
        cdef double* G = self.G
        cdef double hi = tt - self.t, term, ps, gam, eta, a
        m = self.kstep + 1
        for j in range(m):
            w[j] = 1.0 / (j + 1)
        G[0] = 1.0
        term = 0.0
        for j in range(2, m + 1):
            ps = self.psid[j - 2]
            gam = (hi + term) / ps
            eta = hi / ps
            lim = m + 1 - j
            for kk in range(lim):
                w[kk] = gam * w[kk] - eta * w[kk + 1]
            G[j - 1] = w[0]
            term = ps
        for i in range(N):
            a = 0.0
            for j in range(m):
                a += G[j] * self.phi[j * N + i]
            out[i] = self.y[i] + hi * a
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as
        the Python driver's ``AdamsPECE.restart`` (``_restart_impl``: phi_1 = f, the
        other differences zero, order 1, start-up phase, the first step of
        ``select_initial_step``), loaded from that object's ``loop_start()``."""
        cdef Py_ssize_t N = self.N, K2 = self.K2, i
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        cdef double[:, ::1] phi = np.ascontiguousarray(s0["phi"], dtype=np.float64)
        cdef double[::1] hs = np.ascontiguousarray(s0["hs"], dtype=np.float64)
        _shape2("run_abm: restart phi", phi.shape[0], phi.shape[1], K2, N)
        _need("run_abm: restart hs", hs.shape[0], K2)
        memcpy(self.phi, &phi[0, 0], K2 * N * sizeof(double))
        for i in range(K2):
            self.hs[i] = hs[i]
        self.h = float(s0["h"])
        self.h_last = float(s0["h_last"])
        self.k = int(s0["k"])
        self.neq = int(s0["neq"])
        self.phase1 = bool(s0["phase1"])
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), self.kstep, self.nsteps, self.nrej,
                   self.nfev())
        else:
            _stats(stats, fabs(self.h), self.k, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h


def run_abm(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
            double[:, ::1] phi0 not None, double[::1] hs0 not None, double h, double h_last,
            int k, long neq, bint phase1, int kmax, double rtol, double atol,
            double max_step, const double[::1] gamma not None,
            const double[::1] gstar_abs not None, double[::1] t_out not None,
            Py_ssize_t i_out, object on_output, double[::1] stats not None,
            double[::1] counters not None, long nfev_start=0,
            const idx_t[::1] stop_idx=None, const double[::1] stop_val=None,
            const double[::1] stop_sign=None, double[::1] ystep=None, dict hist=None,
            long max_steps=0, object on_commit=None, object restart=None):
    """Integrate from (t0, y0) to t1 > t0 by ``AdamsPECE`` (:class:`AdamsStepper`)
    from its state after ``_restart_impl`` or any accepted step: ``phi0`` =
    φ_1..φ_{kmax+2} (rows), ``hs0`` the past steps (most recent first), ``h`` the next
    step, ``h_last``, order ``k``, ``neq`` steps of the current size, ``phase1``
    (start-up), internal tolerances ``rtol``/``atol``; ``gamma``/``gstar_abs`` =
    ``GAMMA``, ``|GAMMA_STAR|`` (kmax + 3 values).  Dense output at ``t_out[i_out:]``:
    INTRP, as ``AdamsDenseOutput``.  Checkpoints: before the outputs of a step
    ``ystep`` (N + 2 floats) receives its end state, time and next step, ``hist`` (a
    dict) the state above at that step's start, from which the step is redone
    (``t``, ``y``, ``phi``, ``hs`` copies, ``h``, ``h_last``, ``k``, ``neq``,
    ``phase1``, and ``counts``: steps, rejected steps, evaluations before it).
    ``on_commit(t, y) -> y_new | None`` (with ``restart``): called at every step's end
    before t1 after its outputs (:func:`_run`); a new state restarts the method
    there from ``restart(t, y_new)`` — the Python integrator's ``loop_start()`` after
    its ``restart(t, y_new)``, or None when f failed there (code 2 from (t, y_new)).
    Returns ``(code, t, y, i_out, h)`` (module docstring).  Refused (ValueError
    naming the argument): the checks of :func:`_check_common`, kmax < 1, k outside
    [1, kmax], phi0 not (kmax + 2, N), hs0, gamma, gstar_abs shorter than kmax + 2,
    kmax + 3, kmax + 3, non-finite phi0 or hs0, h not positive and finite, max_step
    not > 0, rtol / atol not finite, >= 0 and not both 0."""
    cdef Py_ssize_t N = y0.shape[0], K2 = kmax + 2
    _check_common("run_abm", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps)
    _index("run_abm: kmax", kmax, 1, 1 << 20)
    _index("run_abm: order k", k, 1, kmax)
    _shape2("run_abm: phi0", phi0.shape[0], phi0.shape[1], K2, N)
    _need("run_abm: hs0", hs0.shape[0], K2)
    _need("run_abm: gamma", gamma.shape[0], kmax + 3)
    _need("run_abm: gstar_abs", gstar_abs.shape[0], kmax + 3)
    _all_finite("run_abm: phi0", phi0)
    _all_finite("run_abm: hs0", hs0[:K2])
    _positive("run_abm: h", h)
    _positive("run_abm: max_step", max_step, True)
    _tolerances("run_abm", rtol, atol)
    cdef AdamsStepper st = AdamsStepper.__new__(AdamsStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    st.K2 = K2
    st.kmax = kmax
    st.k = k
    st.kstep = k
    st.h = h
    st.h_last = h_last
    st.neq = neq
    st.phase1 = phase1
    st.rtol = rtol
    st.atol = atol
    st.max_step = max_step
    st.t_old = t0
    st.tnew = t0
    st.ck = hist is not None
    st.counters = counters
    st.gamma = st.buf(0, np.asarray(gamma))
    st.gstar_abs = st.buf(0, np.asarray(gstar_abs))
    st.phi_a = np.array(phi0, dtype=np.float64)
    st.nphi_a = np.zeros((K2, N))
    st.hs_a = np.array(hs0[:K2], dtype=np.float64)
    cdef double[:, ::1] pv = st.phi_a
    cdef double[:, ::1] npv = st.nphi_a
    cdef double[::1] hv = st.hs_a
    st.phi = &pv[0, 0]
    st.nphi = &npv[0, 0]
    st.hs = &hv[0]
    st.phis = st.buf(K2 * N)
    st.p = st.buf(N)
    st.ynew = st.buf(N)
    st.fp = st.buf(N)
    st.sstar = st.buf(N)
    st.d1 = st.buf(N)
    st.d2 = st.buf(N)
    st.isc = st.buf(N)
    st.tmp = st.buf(N)
    st.psi_new = st.buf(K2 + 1)
    st.psi_old = st.buf(K2 + 1)
    st.alpha = st.buf(K2 + 1)
    st.beta = st.buf(K2 + 1)
    st.sigma = st.buf(K2 + 1)
    st.g = st.buf(K2 + 1)
    st.w = st.buf(K2 + 1)
    st.psid = st.buf(K2 + 1)
    st.G = st.buf(K2 + 1)
    st.y_trial = st.ynew
    _commit_args("run_abm", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
