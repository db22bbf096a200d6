# The Lie-group Runge-Kutta method of the step loop (included by _steploop.pyx): the
# classical RK4 in the Lie algebra, RKMK4 (Munthe-Kaas (1999);
# Hairer, Lubich & Wanner (2006), Sec. IV.8.2), as mbplugins.integrators.liegroup.RKMK4
# steps it: unit
# quaternions advanced by the quaternion exponential, the other components additively,
# the commutator terms of the dexp^-1 correction, the grid and cubic Hermite dense
# output of the fixed-grid methods (the quaternions' by the exponential of the
# Hermite interpolant in the algebra).  Same formulas in the same order as the NumPy
# driver: quaternion products as liegroup.quat_mul sums them (over the first
# factor's components in order), squared norms (x0^2 + x1^2) + x2^2, libm's sin and
# cos (NumPy's float64 sin and cos on this platform: tests/test_rkmk4_loop.py).

from libc.math cimport sin, cos


cdef inline void _lie_qmul(const double* a, const double* b, double* out) noexcept nogil:
    """``a ⊗ b`` (Hamilton; ``liegroup.quat_mul``: the einsum over its product table
    sums over the first factor's index in order)."""
    out[0] = ((a[0] * b[0] - a[1] * b[1]) - a[2] * b[2]) - a[3] * b[3]
    out[1] = ((a[0] * b[1] + a[1] * b[0]) + a[2] * b[3]) - a[3] * b[2]
    out[2] = ((a[0] * b[2] - a[1] * b[3]) + a[2] * b[0]) + a[3] * b[1]
    out[3] = ((a[0] * b[3] + a[1] * b[2]) - a[2] * b[1]) + a[3] * b[0]


cdef inline void _lie_cross(const double* a, const double* b, double* out) noexcept nogil:
    """``a × b`` (``mbplugins.spatial.kinematics.cross``)."""
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


cdef inline double _lie_sq(const double* x) noexcept nogil:
    """``np.sum(x * x, axis=-1)`` of a 3-vector (sequential for short rows)."""
    cdef double s = x[0] * x[0] + x[1] * x[1]
    return s + x[2] * x[2]


cdef inline void _lie_exp(const double* th, double* e) noexcept nogil:
    """``liegroup.quat_exp``: ``[cos(|θ|/2), sin(|θ|/2) θ/|θ|]`` (the series of
    sin(a)/a below a = 1e-3)."""
    cdef double n2 = _lie_sq(th)
    cdef double a = 0.5 * sqrt(n2), hs
    if a < 1e-3:
        hs = 0.5 - n2 / 48.0 * (1.0 - n2 / 80.0)
    else:
        hs = 0.5 * sin(a) / a
    e[0] = cos(a)
    e[1] = hs * th[0]
    e[2] = hs * th[1]
    e[3] = hs * th[2]


cdef inline void _lie_omega(const double* p, const double* pd, bint body,
                            double* w) noexcept nogil:
    """``RKMK4._omega``: ``2 vec(conj(p) ⊗ ṗ)`` (body) or ``2 vec(ṗ ⊗ conj(p))``."""
    cdef double c[4]
    cdef double r[4]
    c[0] = p[0]
    c[1] = -p[1]
    c[2] = -p[2]
    c[3] = -p[3]
    if body:
        _lie_qmul(c, pd, r)
    else:
        _lie_qmul(pd, c, r)
    w[0] = 2.0 * r[1]
    w[1] = 2.0 * r[2]
    w[2] = 2.0 * r[3]


cdef inline double _lie_dexpinv_c(double x) noexcept nogil:
    """``liegroup._dexpinv_c``: ``(1 − (x/2) cot(x/2))/x²`` (Bernoulli series below
    x = 0.1)."""
    cdef double x2, half
    if x < 0.1:
        x2 = x * x
        return 1.0 / 12 + x2 * (1.0 / 720 + x2 * (1.0 / 30240 + x2 / 1209600))
    half = 0.5 * x
    return (1.0 - half * cos(half) / sin(half)) / (x * x)


cdef class LieStepper(Stepper):
    """``RKMK4`` (:func:`run_lie`): the grid of ``_FixedGrid`` (``t_start + i h``, the
    last step shortened onto t1), f at each step end kept as the next step's first
    stage, four stages in the algebra (``F_i`` = h ξ: ``h f`` of the ``nl`` additive
    components, ``h ω`` of the ``nq`` quaternions), the step ``exp(u)·y``; dense output
    ``LieHermiteDenseOutput``.  Buffers allocated once in :func:`run_lie`."""
    cdef Py_ssize_t nq, nl
    cdef idx_t* qi          # nq x 4 indices of the quaternions in y
    cdef idx_t* li          # nl indices of the additive components
    cdef bint body
    cdef double bsign       # the commutator [a, b] = bsign a x b
    cdef double t_start, h_step, h, tnew, t_old
    cdef long i_step
    cdef double* H          # f(t, y)
    cdef double* y_old
    cdef double* f_old
    cdef double* ynew
    cdef double* fnew
    cdef double* z          # a stage's state
    cdef double* fz         # its derivative
    cdef double* L          # 4 x nl: l1 .. l4
    cdef double* R          # 4 x nq x 3: r1 .. r4
    cdef double* U          # nq x 3: the step's algebra variable u (dense output)
    cdef double* lu         # nl: the step's additive increment
    cdef double* ru         # nq x 3: a stage's rotation argument
    cdef double[::1] counters
    cdef bint ck
    cdef long i_top
    cdef double nfev_top

    cdef void algebra(self, const double* y, const double* f, double h,
                      double* l, double* r) noexcept:
        """``RKMK4._algebra``: ``l = h f[lin]``, ``r = h ω(y[q], f[q])``."""
        cdef Py_ssize_t i, j
        cdef idx_t* q
        cdef double p[4]
        cdef double pd[4]
        cdef double w[3]
        for i in range(self.nl):
            l[i] = h * f[self.li[i]]
        for j in range(self.nq):
            q = self.qi + 4 * j
            for i in range(4):
                p[i] = y[q[i]]
                pd[i] = f[q[i]]
            _lie_omega(p, pd, self.body, w)
            for i in range(3):
                r[3 * j + i] = h * w[i]

    cdef void act(self, const double* l, double cl, const double* r, double cr,
                  double* z) noexcept:
        """``RKMK4._act(y, cl·l, cr·r)`` into z (cl, cr = 1: the arrays as they are):
        additive components plus the increment, quaternions by the exponential from
        the right (body) or the left (space)."""
        cdef Py_ssize_t i, j
        cdef const double* y = self.y
        cdef idx_t* q
        cdef double th[3]
        cdef double e[4]
        cdef double p[4]
        cdef double o[4]
        memcpy(z, y, self.N * sizeof(double))
        if cl == 1.0:
            for i in range(self.nl):
                z[self.li[i]] = y[self.li[i]] + l[i]
        else:
            for i in range(self.nl):
                z[self.li[i]] = y[self.li[i]] + cl * l[i]
        for j in range(self.nq):
            q = self.qi + 4 * j
            for i in range(3):
                th[i] = r[3 * j + i] if cr == 1.0 else cr * r[3 * j + i]
            _lie_exp(th, e)
            for i in range(4):
                p[i] = y[q[i]]
            if self.body:
                _lie_qmul(p, e, o)
            else:
                _lie_qmul(e, p, o)
            for i in range(4):
                z[q[i]] = o[i]

    cdef int attempt(self, double next_out) except -1:
        """``RKMK4._step_impl`` up to the state at the step's end (f there follows in
        :meth:`accept`)."""
        cdef Py_ssize_t nl = self.nl, n3 = 3 * self.nq, i, j
        cdef double t = self.t, tnew, h, bs = self.bsign
        cdef double* L1 = self.L
        cdef double* L2 = self.L + nl
        cdef double* L3 = self.L + 2 * nl
        cdef double* L4 = self.L + 3 * nl
        cdef double* R1 = self.R
        cdef double* R2 = self.R + n3
        cdef double* R3 = self.R + 2 * n3
        cdef double* R4 = self.R + 3 * n3
        cdef double c[3]
        if self.ck:
            self.i_top, self.nfev_top = self.i_step, self.nfev()
            self.f.c_save()             # the right-hand side's own state (warm start)
        self.i_step += 1                                # _FixedGrid._next_time
        tnew = self.t_start + (<double>self.i_step) * self.h_step
        if tnew - self.t1 > -1e-9 * self.h_step:
            tnew = self.t1
        if fabs(tnew - t) < 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300):
            self.h = tnew - t
            return LOOP_STEP_TOO_SMALL
        h = tnew - t
        self.h = h
        self.tnew = tnew
        self.algebra(self.y, self.H, h, L1, R1)                         # F1
        self.act(L1, 0.5, R1, 0.5, self.z)
        if self.f.c_eval(t + 0.5 * h, self.z, self.fz):
            return LOOP_EVAL_FAILED
        self.algebra(self.z, self.fz, h, L2, R2)                        # F2
        for j in range(self.nq):                    # 0.5 r2 - 0.125 [r1, r2]
            _lie_cross(R1 + 3 * j, R2 + 3 * j, c)
            for i in range(3):
                self.ru[3 * j + i] = 0.5 * R2[3 * j + i] - 0.125 * (bs * c[i])
        self.act(L2, 0.5, self.ru, 1.0, self.z)
        if self.f.c_eval(t + 0.5 * h, self.z, self.fz):
            return LOOP_EVAL_FAILED
        self.algebra(self.z, self.fz, h, L3, R3)                        # F3
        self.act(L3, 1.0, R3, 1.0, self.z)
        if self.f.c_eval(tnew, self.z, self.fz):
            return LOOP_EVAL_FAILED
        self.algebra(self.z, self.fz, h, L4, R4)                        # F4
        for i in range(nl):
            self.lu[i] = (L1[i] + 2.0 * (L2[i] + L3[i]) + L4[i]) / 6.0
        for j in range(self.nq):
            _lie_cross(R1 + 3 * j, R4 + 3 * j, c)
            for i in range(3):
                self.U[3 * j + i] = ((R1[3 * j + i] + 2.0 * (R2[3 * j + i] + R3[3 * j + i])
                                      + R4[3 * j + i]) / 6.0 - (bs * c[i]) / 12.0)
        self.act(self.lu, 1.0, self.U, 1.0, self.ynew)
        self.t_end = tnew
        return 0

    cdef int save_start(self, dict hist) except -1:
        """The state at the step's start (checkpoints; the step is redone from it):
        ``t``, ``y``, ``f`` (= ``hist``'s one row), the grid ``t_start``, ``i``, ``h``
        and ``counts`` (steps, rejected steps, evaluations before it) —
        FixedGridStepper's, restored by ``_FixedGrid.restore_loop_history``."""
        cdef Py_ssize_t N = self.N
        f = np.array(<double[:N]> self.H)
        hist.update(t=self.t, y=np.array(self.y_arr), f=f, hist=f.reshape(1, N),
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
        """f at the step's end and ``_FixedGrid._accept``."""
        cdef Py_ssize_t N = self.N
        if self.f.c_eval(self.tnew, self.ynew, self.fnew):
            return LOOP_EVAL_FAILED
        memcpy(self.y_old, self.y, N * sizeof(double))
        memcpy(self.f_old, self.H, N * sizeof(double))
        memcpy(self.H, self.fnew, N * sizeof(double))
        memcpy(self.y, self.ynew, N * sizeof(double))
        self.t_old = self.t
        self.t = self.tnew
        self.nsteps += 1
        _accepted(self.counters, fabs(self.t - self.t_old), 4)
        return 0

    cdef int dense(self, double tt, double* out) except -1:
        """``LieHermiteDenseOutput``: cubic Hermite through (y_old, f_old), (y, f);
        each quaternion ``p0 ⊗ exp(θ(s))`` (body; ``exp(θ(s)) ⊗ p0`` space) with
        θ(s) = h10 du0 + h01 u + h11 du1, du0 = h ω0, du1 = h dexp⁻¹_u(ω1)."""
        cdef Py_ssize_t N = self.N, i, j
        cdef double hd = self.t - self.t_old, s, s2, s3, h00, h10, h01, h11, x, cx
        cdef double sg = 0.5 if self.body else -0.5
        cdef idx_t* q
        cdef double p[4]
        cdef double pd[4]
        cdef double e[4]
        cdef double o[4]
        cdef double w0[3]
        cdef double w1[3]
        cdef double tw[3]
        cdef double ttw[3]
        cdef double th[3]
        cdef const double* u
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
        for j in range(self.nq):
            q = self.qi + 4 * j
            u = self.U + 3 * j
            for i in range(4):
                p[i] = self.y_old[q[i]]
                pd[i] = self.f_old[q[i]]
            _lie_omega(p, pd, self.body, w0)            # du0 = h w0
            for i in range(4):
                o[i] = self.y[q[i]]
                pd[i] = self.H[q[i]]
            _lie_omega(o, pd, self.body, w1)
            x = sqrt(_lie_sq(u))                        # dexpinv(u, w1)
            cx = _lie_dexpinv_c(x)
            _lie_cross(u, w1, tw)
            _lie_cross(u, tw, ttw)
            for i in range(3):
                th[i] = (h10 * (hd * w0[i]) + h01 * u[i]) \
                    + h11 * (hd * ((w1[i] + sg * tw[i]) + cx * ttw[i]))
            _lie_exp(th, e)
            if self.body:
                _lie_qmul(p, e, o)
            else:
                _lie_qmul(e, p, o)
            for i in range(4):
                out[q[i]] = o[i]
        return 0

    cdef int load_start(self, object s0) except -1:
        """The grid and the derivative of the Python object's ``loop_start()``."""
        cdef Py_ssize_t N = self.N, i
        cdef double[:, ::1] H0 = np.ascontiguousarray(
            np.reshape(np.asarray(s0["hist"], dtype=np.float64), (-1, N)))
        if H0.shape[0] != 1:
            raise ValueError(f"run_lie: hist has {H0.shape[0]} rows, needs 1 (f at t0)")
        _all_finite("run_lie: hist", np.asarray(H0))
        for i in range(N):
            self.H[i] = H0[0, i]
        self.t_start = float(s0["t_start"])
        self.i_step = int(s0["i"])
        self.h_step = float(s0["h"])
        _positive("run_lie: h_step", self.h_step)
        if not fabs(self.t_start + (<double>self.i_step) * self.h_step - self.t) \
                <= 2.0 * self.h_step + 1e-9 * fabs(self.t):
            raise ValueError(f"run_lie: the grid point t_start + i h = {self.t_start} + "
                             f"{self.i_step} * {self.h_step} is not within two steps of "
                             f"t0 = {self.t}")
        return 0

    cdef int replace_end(self, object r) except -1:
        """A change of coordinates at the step's end: the method restarts there as the
        Python driver's ``restart`` (``start_fixed_grid``: a new grid from t, f
        there), loaded from the restarted object's ``loop_start()``."""
        s0 = self.restart_from(r)
        if s0 is None:
            return LOOP_EVAL_FAILED
        self.load_start(s0)
        self.counters[C_LAST] = -1.0
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE or code == AT_OUTPUT:
            _stats(stats, fabs(self.t - self.t_old), 4, self.nsteps, self.nrej,
                   self.nfev())
        else:
            _stats(stats, fabs(self.h), 4, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h


def run_lie(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
            object start, const idx_t[::1] quaternions not None, bint body,
            double[::1] t_out not None, Py_ssize_t i_out, object on_output,
            double[::1] stats not None, double[::1] counters not None,
            long nfev_start=0, const idx_t[::1] stop_idx=None,
            const double[::1] stop_val=None, const double[::1] stop_sign=None,
            long max_steps=0, object on_commit=None, object restart=None,
            double[::1] ystep=None, dict hist=None):
    """Integrate from (t0, y0) to t1 > t0 by RKMK4 (``mbplugins.integrators.liegroup``,
    :class:`LieStepper`) from the Python object's state after its start-up: ``start``
    its ``loop_start()`` (``hist``: one row, f at t0; the grid ``t_start + i h`` with
    ``i`` steps taken), ``quaternions`` the flattened (k, 4) indices of the unit
    quaternions in y (scalar first), ``body`` the frame (True: ``ṗ = ½ p ⊗ (0, ω′)``,
    False: ``ṗ = ½ (0, ω) ⊗ p``).  Checkpoints as :func:`run_fixedgrid`'s: before the
    outputs of a step ``ystep`` (N + 2 floats) receives its end state, time and ``h``,
    ``hist`` (a dict) the state at that step's start (``t``, ``y``, ``f``, ``hist``,
    ``t_start``, ``i``, ``h``, ``counts``), from which the step is redone.
    ``on_commit``, ``restart``: a change of coordinates at step ends, the method
    restarted there (a new grid).  Returns ``(code, t, y, i_out, h)`` (module
    docstring).  Refused (ValueError naming the argument): the checks of
    :func:`_check_common`, quaternion indices not a multiple of 4, outside [0, N) or
    repeated, a start history of the wrong shape or non-finite, h not positive and
    finite, a grid point more than two steps from t0."""
    cdef Py_ssize_t N = y0.shape[0], nq, nl, i
    _check_common("run_lie", f, t0, t1, y0, t_out, i_out, stats, counters,
                  stop_idx, stop_val, stop_sign, ystep, max_steps)
    if quaternions.shape[0] % 4:
        raise ValueError(f"run_lie: quaternions has {quaternions.shape[0]} entries, "
                         f"needs a multiple of 4")
    _extent(quaternions, 0, N, "run_lie: quaternions")
    qa = np.array(quaternions, dtype=np.intp)
    if np.unique(qa).size != qa.size:
        raise ValueError("run_lie: quaternions has repeated indices")
    mask = np.ones(N, bool)
    mask[qa] = False
    la = np.flatnonzero(mask).astype(np.intp)
    nq = qa.size // 4
    nl = la.size
    cdef LieStepper st = LieStepper.__new__(LieStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    st.keep.extend([qa, la])
    cdef idx_t[::1] qv = qa if nq else np.zeros(1, dtype=np.intp)
    cdef idx_t[::1] lv = la if nl else np.zeros(1, dtype=np.intp)
    st.keep.extend([qv, lv])
    st.qi = &qv[0]
    st.li = &lv[0]
    st.nq = nq
    st.nl = nl
    st.body = body
    st.bsign = -1.0 if body else 1.0
    st.H = st.buf(N)
    st.y_old = st.buf(N)
    st.f_old = st.buf(N)
    st.ynew = st.buf(N)
    st.fnew = st.buf(N)
    st.z = st.buf(N)
    st.fz = st.buf(N)
    st.L = st.buf(4 * nl)
    st.R = st.buf(12 * nq)
    st.U = st.buf(3 * nq)
    st.lu = st.buf(nl)
    st.ru = st.buf(3 * nq)
    st.counters = counters
    st.load_start(start)
    st.h = 0.0
    st.tnew = t0
    st.t_old = t0
    st.y_trial = st.ynew
    st.ck = hist is not None
    st.i_top = st.i_step
    _commit_args("run_lie", on_commit, restart)
    st.restart_cb = restart
    st.gate = bool(f.post_step) and restart is not None   # (Stepper.gate)
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, hist, max_steps, on_commit)
