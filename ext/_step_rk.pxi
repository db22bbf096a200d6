# Explicit Runge-Kutta stepper of the step loop (included by _steploop.pyx).

cdef inline void _combine(const double* c, const double* K, Py_ssize_t s, Py_ssize_t N,
                          double* out, Py_ssize_t cnt) noexcept nogil:
    """``out[i] = sum_k c[k] K[k N + i]`` for k = 0 .. s-1 and i < cnt (stage k's
    values at ``K + k N``), summed in that order from 0.0 for every i (the terms and
    order of the Python integrators' stage sums), one pass over each stage: the
    passes over i vectorise."""
    cdef Py_ssize_t i, k
    cdef double ck
    cdef const double* Kk
    ck = c[0]
    for i in range(cnt):
        out[i] = 0.0 + ck * K[i]
    for k in range(1, s):
        ck = c[k]
        Kk = K + k * N
        for i in range(cnt):
            out[i] = out[i] + ck * Kk[i]


DEF RK_CHUNK = 512


cdef inline void _stage_state(const double* c, const double* K, Py_ssize_t s,
                              Py_ssize_t N, const double* y, double h, double* acc,
                              double* out) noexcept nogil:
    """``acc = sum_k c[k] K[k N + .]`` as :func:`_combine` and ``out = y + h acc``,
    over blocks of RK_CHUNK entries (each block's partial sums stay in L1 instead of
    s passes over the whole state): the same terms in the same order per entry."""
    cdef Py_ssize_t i0, i1
    cdef Py_ssize_t i
    for i0 in range(0, N, RK_CHUNK):
        i1 = i0 + RK_CHUNK if i0 + RK_CHUNK < N else N
        _combine(c, K + i0, s, N, acc + i0, i1 - i0)
        for i in range(i0, i1):
            out[i] = y[i] + h * acc[i]


cdef inline void _stage_state_part(const double* c, const double* E, const double* K,
                                   Py_ssize_t s, Py_ssize_t N, const double* y, double h,
                                   double* acc, double* out,
                                   double* part) noexcept nogil:
    """:func:`_stage_state` for the last state (weights ``c``) and, from the same
    blocks of K, ``part = sum_k<s E[k] K[k N + .]``: the error sum without its last
    term (the evaluation at ``out``), in :func:`_combine`'s order."""
    cdef Py_ssize_t i0, i1
    cdef Py_ssize_t i
    for i0 in range(0, N, RK_CHUNK):
        i1 = i0 + RK_CHUNK if i0 + RK_CHUNK < N else N
        _combine(c, K + i0, s, N, acc + i0, i1 - i0)
        for i in range(i0, i1):
            out[i] = y[i] + h * acc[i]
        _combine(E, K + i0, s, N, part + i0, i1 - i0)


cdef inline double _error_rms_last(double e_last, const double* K_last, Py_ssize_t N,
                                   const double* y, const double* ynew, double h,
                                   double atol, double rtol, double* acc,
                                   double* scale) noexcept nogil:
    """The embedded error estimate's RMS norm with the error sum's terms but the last in
    ``scale`` (:func:`_stage_state_part`): ``acc = h (scale + e_last K_last)`` — the
    last step of :func:`_combine` —, ``scale = atol + rtol max(|y|, |ynew|)`` and
    ``sqrt(mean((acc / scale)^2))`` by blocks of RK_CHUNK entries (the sum of squares
    in entry order)."""
    cdef Py_ssize_t i0, i1, i
    cdef double tot = 0.0, r
    for i0 in range(0, N, RK_CHUNK):
        i1 = i0 + RK_CHUNK if i0 + RK_CHUNK < N else N
        for i in range(i0, i1):
            acc[i] = h * (scale[i] + e_last * K_last[i])
            scale[i] = atol + rtol * (fabs(y[i]) if fabs(y[i]) > fabs(ynew[i])
                                      else fabs(ynew[i]))
        for i in range(i0, i1):
            r = acc[i] / scale[i]
            tot += r * r
    return sqrt(tot / N) if N else 0.0


cdef class RKStepper(Stepper):
    """An explicit Runge-Kutta method (:func:`run_rk`): a fixed step on the grid
    ``g0 + i h`` with cubic Hermite dense output, or an embedded FSAL pair with the
    controller of ``mbcore.integrate.rk.EmbeddedRK``; a post-step projection of the
    right-hand side (``f.post_step``) after every accepted step."""
    cdef Py_ssize_t s, ac, deg, nx, axc, dc
    cdef double* A
    cdef double* B
    cdef double* C
    cdef double* E
    cdef double* E3
    cdef double* P
    cdef double* AX
    cdef double* CX
    cdef double* DX
    cdef bint adaptive, hairer, extra, proj, save_top
    cdef double rtol, atol, max_step, safety, min_factor, max_factor, exponent
    cdef int order
    cdef double* K           # (s + 1) x N stage derivatives, K[0] = f(t, y)
    cdef double* ynew
    cdef double* ytmp
    cdef double* scale
    cdef double* work
    cdef double* Qd          # deg x N dense-output coefficients
    cdef double* KX          # nx x N extra stages (DOP853 dense output)
    cdef double* F7          # 7 x N DOP853 dense-output coefficients
    cdef double* yp          # the projected end state
    cdef double tnew, h, h_abs, hfix, hatt, hprop, g0, nfev_top
    cdef long istep, nsteps_top, nrej_top
    cdef bint projected, dense_ready, qd_ready

    cdef int attempt(self, double next_out) except -1:
        cdef Py_ssize_t N = self.N, s = self.s, ac = self.ac, i, k, st
        cdef double* K = self.K
        cdef double* y = self.y
        cdef double* ytmp = self.ytmp
        cdef double* ynew = self.ynew
        cdef double* A = self.A
        cdef double* B = self.B
        cdef double* E = self.E
        cdef double* E3 = self.E3
        cdef double* acc = self.work
        cdef double t = self.t, t1 = self.t1, tnew, h, err, factor, a, sk, min_step
        cdef double e5, e3, r5, r3, rtol = self.rtol, atol = self.atol
        cdef bint rejected = False
        # the loop at the step's start (a checkpoint redoes the step from it)
        self.hprop = self.h_abs
        self.nsteps_top = self.nsteps
        self.nrej_top = self.nrej
        self.nfev_top = self.nfev()
        if self.save_top:
            self.f.c_save()
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        if self.adaptive:               # as EmbeddedRK._step_impl
            if self.h_abs > self.max_step:
                self.h_abs = self.max_step
            if self.h_abs < min_step:
                self.h_abs = min_step
        while True:
            if self.adaptive:
                if self.h_abs < min_step:
                    self.h = self.h_abs
                    return LOOP_STEP_TOO_SMALL
                self.hatt = self.h_abs
                tnew = t + self.h_abs
                if tnew > t1 or fabs(t1 - tnew) < min_step:
                    tnew = t1
                self.h_abs = fabs(tnew - t)
            else:
                self.istep += 1
                tnew = self.g0 + self.istep * self.hfix
                if tnew - t1 > -1e-9 * self.hfix:
                    tnew = t1
                if tnew - t < min_step:
                    self.h = tnew - t
                    return LOOP_STEP_TOO_SMALL
            h = tnew - t
            self.h = h
            self.tnew = tnew
            for st in range(1, s):
                _stage_state(&A[st * ac], K, st, N, y, h, acc, ytmp)
                if self.f.c_eval(t + self.C[st] * h, ytmp, &K[st * N]):
                    return LOOP_EVAL_FAILED
            if self.adaptive and not self.hairer:
                # the error sum's first s terms from the same blocks (in scale)
                _stage_state_part(B, E, K, s, N, y, h, acc, ynew, self.scale)
            else:
                _stage_state(B, K, s, N, y, h, acc, ynew)
            if self.f.c_eval(tnew, ynew, &K[s * N]):
                return LOOP_EVAL_FAILED
            if not self.adaptive:
                break
            if self.hairer:             # DOP853._error_norm
                e5 = 0.0
                e3 = 0.0
                for i in range(N):
                    sk = atol + rtol * (fabs(y[i]) if fabs(y[i]) > fabs(ynew[i])
                                        else fabs(ynew[i]))
                    r5 = 0.0
                    r3 = 0.0
                    for k in range(s + 1):
                        r5 += E[k] * K[k * N + i]
                        r3 += E3[k] * K[k * N + i]
                    r5 /= sk
                    r3 /= sk
                    e5 += r5 * r5
                    e3 += r3 * r3
                if e5 == 0.0 and e3 == 0.0:
                    err = 0.0
                else:
                    err = fabs(h) * e5 / sqrt((e5 + 0.01 * e3) * N)
            else:
                err = _error_rms_last(E[s], &K[s * N], N, y, ynew, h, atol, rtol, acc,
                                      self.scale)
            if err <= 1.0:
                if err == 0.0:
                    factor = self.max_factor
                else:
                    factor = self.safety * err ** self.exponent
                    if factor > self.max_factor:
                        factor = self.max_factor
                if rejected and factor > 1.0:
                    factor = 1.0
                self.h_abs *= factor
                break
            self.nrej += 1
            factor = self.safety * err ** self.exponent
            if factor < self.min_factor:
                factor = self.min_factor
            self.h_abs *= factor
            rejected = True
        self.t_end = self.tnew
        return 0

    cdef int accept(self, bint due) except -1:
        """The post-step projection (the Python driver's ``post_step``)."""
        cdef int pcode
        self.nsteps += 1
        self.projected = False
        self.dense_ready = False
        self.qd_ready = False
        self.y_end = self.ynew
        if self.proj:
            memcpy(self.yp, self.ynew, self.N * sizeof(double))
            pcode = self.f.c_post_step(self.tnew, self.yp, True)
            if pcode < 0:
                self.nsteps -= 1
                return LOOP_EVAL_FAILED
            self.projected = pcode == 1
            if self.projected:
                self.y_end = self.yp
        return 0

    cdef void save_end(self, double[::1] ystep) noexcept:
        cdef Py_ssize_t N = self.N, i
        for i in range(N):
            ystep[i] = self.y_end[i]
        ystep[N] = self.tnew
        if ystep.shape[0] > N + 1:
            ystep[N + 1] = self.h_abs       # the controller's next step (embedded)
        if ystep.shape[0] >= 4 * N + 5:
            # the whole step (mbcore.analysis.simulation: continue without evaluating
            # f again, or redo the step for its dense output): start time, the
            # attempt's step size before the clip to t1, grid index, start state, f
            # at the start and at the end (FSAL)
            ystep[N + 2] = self.t
            ystep[N + 3] = self.hatt
            ystep[N + 4] = self.istep
            for i in range(N):
                ystep[N + 5 + i] = self.y[i]
                ystep[2 * N + 5 + i] = self.K[i]
                ystep[3 * N + 5 + i] = self.K[self.s * N + i]
        if ystep.shape[0] >= 4 * N + 10:
            # the loop at the step's start (exact resume: the step redone)
            ystep[4 * N + 5] = self.hprop
            ystep[4 * N + 6] = self.g0
            ystep[4 * N + 7] = self.nsteps_top
            ystep[4 * N + 8] = self.nrej_top
            ystep[4 * N + 9] = self.nfev_top

    cdef int dense(self, double tt, double* out) except -1:
        cdef Py_ssize_t N = self.N, s = self.s, nx = self.nx, i, j, k
        cdef double* K = self.K
        cdef double* KX = self.KX
        cdef double* F7 = self.F7
        cdef double* y = self.y
        cdef double* ytmp = self.ytmp
        cdef double t = self.t, h = self.h, a, b, sk, th, h00, h10, h01, h11
        if self.extra:                  # y_old + s(F0 + (1-s)(F1 + s(F2 + ...)))
            if not self.dense_ready:    # DOP853._dense_output_impl, once per step
                for j in range(nx):
                    for i in range(N):
                        a = 0.0
                        for k in range(s + 1 + j):
                            a += self.AX[j * self.axc + k] * (K[k * N + i] if k <= s
                                                              else KX[(k - s - 1) * N + i])
                        ytmp[i] = y[i] + h * a
                    if self.f.c_eval(t + self.CX[j] * h, ytmp, &KX[j * N]):
                        return LOOP_EVAL_FAILED
                for i in range(N):
                    a = self.ynew[i] - y[i]
                    F7[i] = a
                    F7[N + i] = h * K[i] - a
                    F7[2 * N + i] = 2.0 * a - h * (K[s * N + i] + K[i])
                    for j in range(4):
                        b = 0.0
                        for k in range(s + 1 + nx):
                            b += self.DX[j * self.dc + k] * (K[k * N + i] if k <= s
                                                             else KX[(k - s - 1) * N + i])
                        F7[(3 + j) * N + i] = h * b
                self.dense_ready = True
            th = (tt - t) / h
            for i in range(N):
                a = 0.0
                for j in range(6, -1, -1):
                    a += F7[j * N + i]
                    a *= th if (6 - j) % 2 == 0 else (1.0 - th)
                out[i] = y[i] + a
        elif self.adaptive:
            if not self.qd_ready:
                for j in range(self.deg):
                    for i in range(N):
                        a = 0.0
                        for k in range(s + 1):
                            a += K[k * N + i] * self.P[k * self.deg + j]
                        self.Qd[j * N + i] = h * a
                self.qd_ready = True
            th = (tt - t) / h
            for i in range(N):
                a = 0.0
                sk = 1.0
                for j in range(self.deg):
                    sk *= th
                    a += self.Qd[j * N + i] * sk
                out[i] = y[i] + a
        else:                           # cubic Hermite (y, K0) -> (ynew, K[s])
            th = (tt - t) / h
            h00 = (1.0 + 2.0 * th) * (1.0 - th) * (1.0 - th)
            h10 = th * (1.0 - th) * (1.0 - th)
            h01 = th * th * (3.0 - 2.0 * th)
            h11 = th * th * (th - 1.0)
            for i in range(N):
                out[i] = (h00 * y[i] + h10 * h * K[i] + h01 * self.ynew[i]
                          + h11 * h * K[s * N + i])
        return 0

    cdef int replace_end(self, object r) except -1:
        """A new end state (``on_commit``): continued from as from a projection (f
        evaluated there, the same step size; fixed steps: a new grid)."""
        cdef double[::1] v = np.ascontiguousarray(r, dtype=np.float64)
        if v.shape[0] != self.N:
            raise ValueError(f"on_commit returned {v.shape[0]} entries, the state has "
                             f"{self.N}")
        memcpy(self.yp, &v[0], self.N * sizeof(double))
        self.y_end = self.yp
        self.projected = True
        return 0

    cdef int commit(self, bint final) except -1:
        """Continue from the step's end: FSAL, or from the projected state its
        derivative and the same step size (EmbeddedRK.resume) or a new grid from
        there (FixedStepRK.restart)."""
        cdef Py_ssize_t N = self.N
        self.t = self.tnew
        memcpy(self.y, self.y_end, N * sizeof(double))
        self.y_end = self.y
        if final:
            return 0
        if self.projected:
            if self.t < self.t1:
                if not self.adaptive:
                    self.g0 = self.tnew
                    self.istep = 0
                if self.f.c_eval(self.t, self.y, self.K):
                    return LOOP_EVAL_FAILED
        else:
            memcpy(self.K, &self.K[self.s * N], N * sizeof(double))
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        if code == LOOP_DONE:
            stats[0] = self.h_abs
            stats[2] = self.nsteps
            stats[3] = self.nrej
            stats[4] = self.nfev()
        elif code == LOOP_BUDGET:
            _stats(stats, self.h_abs, self.order, self.nsteps, self.nrej, self.nfev())
        else:
            _stats(stats, self.h, self.order, self.nsteps, self.nrej, self.nfev())

    cdef double h_next(self) noexcept:
        return self.h_abs


def run_rk(CompiledODE f not None, double[:, ::1] A not None, double[::1] B not None,
           double[::1] C not None, double[::1] E not None, double[:, ::1] P not None,
           bint adaptive, double t0, double t1, double[::1] y0 not None,
           double[::1] f0 not None, double[::1] t_out not None, Py_ssize_t i_out,
           double h_abs, double rtol, double atol, double max_step, double safety,
           double min_factor, double max_factor, double exponent, int order,
           object on_output, double[::1] stats not None, long nfev_start=0,
           const idx_t[::1] stop_idx=None, const double[::1] stop_val=None,
           const double[::1] stop_sign=None, const double[::1] E3=None,
           const double[:, ::1] A_extra=None, const double[::1] C_extra=None,
           const double[:, ::1] D=None, object grid0=None, long istep0=0,
           double[::1] ystep=None, long max_steps=0, object on_commit=None):
    """Integrate ``y' = f(t, y)`` (the compiled right-hand side) from (t0, y0) to t1
    by an explicit Runge-Kutta method (:class:`RKStepper`), calling
    ``on_output(t, y)`` at the output times ``t_out[i_out:]``.

    ``adaptive``: an embedded FSAL pair (A, B, C; error weights E over the s + 1
    stages; dense output y_old + h sum_i K_i sum_j P[i, j] s^(j+1)), the controller
    of ``mbcore.integrate.rk.EmbeddedRK`` (local extrapolation, RMS norm of
    ``h E.K / (atol + rtol max(|y|, |y_new|))``, factor ``safety err^exponent``
    clipped to [min_factor, max_factor], no increase right after a rejection).
    Else a fixed step ``h_abs`` on the grid ``t0 + i h`` (RUNGK4 semantics, last
    step shortened to t1) with cubic Hermite dense output, as
    ``mbcore.integrate.rk.FixedStepRK``.  ``f0`` = f(t0, y0).  ``grid0``, ``istep0``
    (fixed steps, resume from a checkpoint): continue the grid ``grid0 + i h`` of an
    earlier run after its step ``istep0`` (t0 must be that grid point).  ``ystep``
    (N + 1 floats): before the outputs of a step, its end state and time (a
    checkpoint's exact integrator state); ``ystep[N + 1]`` (if present): the next
    step size of an embedded pair; with 4 N + 5 floats also the whole step (start
    time, attempted step, grid index, start state, f at its start and end); with 4 N
    + 10 floats also the state of the loop at the step's start (the controller's
    step proposal, the grid origin, and the steps, rejected steps and evaluations
    counted so far; and ``f.c_save()`` keeps the right-hand side's own state there):
    an exact resume redoes that step from it (mbcore.analysis.checkpoint).

    ``stats`` (5 floats, updated before every output): last step, order, steps,
    rejected steps, evaluations (counted from this call; evaluations start at
    ``nfev_start``, those spent before it).  Returns ``(code, t, y, i_out, h_abs)``
    (module docstring).

    Hairer's DOP853 form (``mbcore.integrate.rk.EmbeddedRK`` with ``E3``; the
    built-in ``dop853``): ``E3`` given -> the error
    ``|h| e5 / sqrt((e5 + 0.01 e3) N)`` with ``e5 = |E.K / scale|^2``, ``e3 = |E3.K /
    scale|^2``; ``A_extra`` (3 x (s+4)), ``C_extra``, ``D`` (4 x (s+4)) given -> the
    7th-order continuous extension (three extra evaluations in the steps with
    outputs) instead of ``P``.

    Post-step projection: when ``f.post_step`` is set (the penalty formulation with
    projections on), every accepted step end is projected in C (``c_post_step``) as the Python
    driver's ``post_step`` does: outputs exactly at the step end and the next step
    start from the projected state, outputs inside the step use the step's dense
    output, the derivative is re-evaluated there and the controller keeps its step
    size (``EmbeddedRK.resume``; fixed steps restart their grid there,
    ``FixedStepRK.restart``).  A failing projection returns code 2 from the step's
    start.  ``on_commit(t, y)``: called at every step's end after its outputs; a
    returned state (a change of coordinates: a new partition of ``cp``) is continued
    from in the same way."""
    cdef Py_ssize_t N = y0.shape[0], s = B.shape[0], ks
    cdef Py_ssize_t nout = t_out.shape[0], deg = P.shape[1] if adaptive else 0
    cdef Py_ssize_t nstop = 0 if stop_idx is None else stop_idx.shape[0]
    cdef bint extra = D is not None
    cdef Py_ssize_t nx = A_extra.shape[0] if extra else 0
    if E3 is not None and E3.shape[0] != s + 1:
        raise ValueError("run_rk: E3 has the wrong size")
    if extra and (C_extra is None or C_extra.shape[0] != nx or A_extra.shape[1] < s + 1 + nx
                  or D.shape[0] != 4 or D.shape[1] < s + 1 + nx):
        raise ValueError("run_rk: extra dense-output stages have the wrong size")
    if N < 2 * f.n + 1:
        raise ValueError("run_rk: y0 must hold [q; qd; W]")
    if getattr(f, "dae", False) or N != getattr(f, "size", N):
        raise ValueError("run_rk: a DAE right-hand side (CompiledGGL) is stepped by "
                         "run_bdf with its mass matrix, or y0 has the wrong size")
    if f0.shape[0] != N:
        raise ValueError(f"run_rk: f0 has {f0.shape[0]} entries, y0 {N}")
    if stats.shape[0] < 5:
        raise ValueError("run_rk: stats needs 5 entries")
    if C.shape[0] != s or A.shape[0] < s or A.shape[1] < s:
        raise ValueError(f"run_rk: the tableau A ({A.shape[0]} x {A.shape[1]}), B ({s}) "
                         f"and C ({C.shape[0]}) do not match")
    if adaptive and (E.shape[0] != s + 1 or P.shape[0] != s + 1):
        raise ValueError(f"run_rk: E and P need s + 1 = {s + 1} rows")
    if not 0 <= i_out <= nout:
        raise ValueError(f"run_rk: i_out = {i_out} is outside [0, {nout}]")
    if not (isfinite(t0) and t1 == t1):     # t1 = +-inf: open-ended (mbcore.Simulation)
        raise ValueError(f"run_rk: t0 = {t0} must be finite and t1 = {t1} a number")
    if not (isfinite(h_abs) and h_abs > 0.0):
        raise ValueError(f"run_rk: h_abs = {h_abs} must be a positive finite step")
    if adaptive and not (isfinite(rtol) and isfinite(atol) and rtol >= 0.0 and atol >= 0.0
                         and rtol + atol > 0.0 and max_step > 0.0):
        raise ValueError(f"run_rk: rtol = {rtol}, atol = {atol} must be finite, >= 0 and "
                         f"not both 0, max_step = {max_step} > 0")
    if nstop and (stop_val is None or stop_sign is None or stop_val.shape[0] != nstop
                  or stop_sign.shape[0] != nstop):
        raise ValueError("run_rk: stop arrays have different lengths")
    for ks in range(nstop):
        if not 0 <= stop_idx[ks] < N:
            raise ValueError("run_rk: stop index out of range")
    if max_steps < 0:
        raise ValueError(f"run_rk: max_steps = {max_steps} must be >= 0 (0: no budget)")
    cdef RKStepper st = RKStepper.__new__(RKStepper)
    st.setup(f, t0, y0, t1, nfev_start)
    st.s = s
    st.ac = A.shape[1]
    st.deg = deg
    st.nx = nx
    st.A = st.buf(0, np.asarray(A))
    st.B = st.buf(0, np.asarray(B))
    st.C = st.buf(0, np.asarray(C))
    st.E = st.buf(0, np.asarray(E))
    st.P = st.buf(0, np.asarray(P))
    st.adaptive = adaptive
    st.hairer = E3 is not None
    st.E3 = st.buf(0, np.asarray(E3)) if st.hairer else st.E
    st.extra = extra
    if extra:
        st.axc = A_extra.shape[1]
        st.dc = D.shape[1]
        st.AX = st.buf(0, np.asarray(A_extra))
        st.CX = st.buf(0, np.asarray(C_extra))
        st.DX = st.buf(0, np.asarray(D))
    st.rtol = rtol
    st.atol = atol
    st.max_step = max_step
    st.safety = safety
    st.min_factor = min_factor
    st.max_factor = max_factor
    st.exponent = exponent
    st.order = order
    st.proj = f.post_step
    st.save_top = ystep is not None and ystep.shape[0] >= 4 * N + 10
    st.K = st.buf((s + 1) * N)
    memcpy(st.K, &f0[0], N * sizeof(double))
    st.ynew = st.buf(N)
    st.ytmp = st.buf(N)
    st.scale = st.buf(N)
    st.work = st.buf(N)
    st.Qd = st.buf((deg if deg > 1 else 1) * N)
    st.KX = st.buf(nx * N)
    st.F7 = st.buf(7 * N if extra else 1)
    st.yp = st.buf(N)
    st.y_trial = st.ynew
    st.h = h_abs
    st.h_abs = h_abs
    st.hfix = h_abs
    st.hatt = h_abs
    st.hprop = h_abs
    st.g0 = t0 if grid0 is None else grid0
    st.istep = istep0
    return _run(st, t1, t_out, i_out, on_output, stats, stop_idx, stop_val, stop_sign,
                ystep, None, max_steps, on_commit)
