# cython: language_level=3
"""The compiled step loop (``mbcore._ext._steploop``): one loop, several steppers.

:func:`_run` is the only integration loop in C.  It owns what every method shares —
the step budget, the stop conditions, the output times with their checkpoints and
statistics, the output call-back and the status codes (``_loop_status.pxi``) — and
asks a :class:`Stepper` for the method's part through six calls per step:

    attempt(next_out)    one accepted step from (t, y) (error control, Newton,
                         rejections) into a trial end state ``y_trial``; or a status
    save_start(hist)     (an output is due in this step) the state at the step's
                         start, from which a checkpoint redoes it
    accept(due)          the step is taken: counters, projection, next step / order
    save_end(ystep)      (an output is due) the step's end for a checkpoint
    dense(tt, out)       the method's dense output inside the step
    replace_end(y)       (an ``on_commit`` call-back returned a new state) a change of
                         coordinates at the step's end, after its outputs: the
                         Runge-Kutta stepper continues from it as from a projection,
                         the multistep and θ steppers restart there (order 1, a new
                         first step: the Python integrator's ``restart``, called back)
    commit(final)        continue from the step's end

The steppers are the methods of the Python integrators, step for step and bit for bit
(same formulas, same order of the floating-point operations, same BLAS calls):

* :class:`RKStepper` — explicit Runge–Kutta, fixed step (cubic Hermite dense output)
  or an embedded FSAL pair with its controller (``mbcore.integrate.rk``; Hairer's
  DOP853 error and 7th-order dense output), :func:`run_rk`;
* :class:`AdamsStepper` — variable-step, variable-order Adams PECE of Shampine and
  Gordon (``mbplugins.integrators.adams.AdamsPECE``; STEP / INTRP), :func:`run_abm`;
* :class:`BDFStepper` — variable-step, variable-order BDF with modified Newton
  iteration and its DAE options (``mbplugins.integrators.bdf.BDF``), :func:`run_bdf`;
* :class:`ThetaStepper` — the fixed-step θ-methods implicit Euler and trapezoid
  (``mbplugins.integrators.implicit.ThetaMethod``), :func:`run_theta`;
* :class:`GenAlphaStepper` — the second-order form of generalized-α and HHT, fixed
  step (``mbplugins.integrators.genalpha.GeneralizedAlpha``), :func:`run_genalpha`;
  :class:`GenAlphaVarStepper` its variable step (Milne-device error of the positions,
  ``VariableGeneralizedAlpha``), :func:`run_genalpha_var`.
* :class:`FixedGridStepper` — the fixed-grid textbook methods Adams–Bashforth 1–4,
  the AB3/AM4 PECE pair, second-order Taylor and Störmer–Verlet
  (``mbplugins.integrators.classical``), :func:`run_fixedgrid`;
* :class:`LieStepper` — the Lie-group RK4 ``rkmk4`` (unit quaternions by the
  exponential map, ``mbplugins.integrators.liegroup.RKMK4``), :func:`run_lie`;
* :class:`SDIRKStepper` — the singly diagonally implicit RK method ``sdirk``
  (``mbplugins.integrators.sdirk``), :func:`run_sdirk`;
* :class:`RadauStepper` — Radau IIA of order 5 ``radau`` (ODE, ``ggl`` and ``stiff``
  forms; ``mbplugins.integrators.radau``), :func:`run_radau`.

A new method is a new ``Stepper`` subclass; the loop, its outputs and its checkpoints
are not repeated.  Each ``run_*`` function checks its arguments (ValueError naming
the argument, docs/reliability.md), builds its stepper from the Python integrator's
state (passed explicitly: start derivative, step, order, history) and calls
:func:`_run`.

Return protocol of every ``run_*``: ``(code, t, y, i_out, h)`` with code 0 finished,
1 stopped (``on_output`` returned True), 2 the right-hand side failed at a trial
point (t, y = the last accepted state: the caller continues on the Python driver,
which raises the named error), 3 the step size fell below the round-off limit, 4 a
stop condition ``stop_sign[k] * (y[stop_idx[k]] - stop_val[k])`` falls through zero
in the step after (t, y) (the caller locates it), 5 the step budget: ``max_steps``
> 0 steps since the last output (or the start) without reaching the next output
time.  Outputs beyond t are not emitted in cases 2-5.  ``stats`` (5 floats, updated
before every output and on return): last step, order, steps, rejected attempts,
evaluations (from ``nfev_start``).  ``counters`` (:data:`NCOUNTERS` floats,
accumulated by the multistep and implicit steppers): see :data:`COUNTERS`.
"""
from libc.math cimport fabs, sqrt, pow, isfinite, INFINITY, NAN
from libc.string cimport memcpy

include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._sparse cimport idx_t

import numpy as np

cdef object _py_lapack_module = None


cdef object _py_lapack():
    """scipy.linalg.lapack (the Newton matrices of a ``newton_system`` hook), imported
    on first use: importing scipy.linalg costs ~0.15 s of start-up time."""
    global _py_lapack_module
    if _py_lapack_module is None:
        from scipy.linalg import lapack
        _py_lapack_module = lapack
    return _py_lapack_module

# Bit-identical arithmetic with the Python integrators: every reduction that NumPy
# hands to BLAS there (``x.dot(x)`` of rms_norm -> ddot, ``g @ Phi`` -> dgemv, the
# step-change matrices -> dgemm) calls the same BLAS routine here with the same
# arguments (SciPy's and NumPy's OpenBLAS agree bit for bit, tests check the
# trajectories), reductions along rows are sequential as NumPy's, and elementwise
# expressions keep NumPy's order with no fused multiply-add (a multistep method of
# order 12 amplifies last-bit differences into different order choices).
cdef extern from *:
    """
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC optimize ("fp-contract=off")
    #elif defined(__clang__)
    #pragma clang fp contract(off)
    #endif
    """

cdef int ONE = 1
cdef double D_ONE = 1.0, D_ZERO = 0.0

cdef double EPS = 2.220446049250313e-16

#: the entries of ``counters`` (then h_min, h_max, the last accepted order and the
#: accepted steps per order 0 .. 12 at ORDERS + k)
COUNTERS = ("nerror_test_failures", "nnewton_failures", "nfev_jac", "njev", "nlu",
            "nlu_solves", "nnewton_iter", "norder_changes")
cdef enum:
    C_ERR = 0
    C_NEWTON = 1
    C_FEV_JAC = 2
    C_JEV = 3
    C_LU = 4
    C_SOLVE = 5
    C_NITER = 6
    C_ORDCH = 7
    C_HMIN = 8
    C_HMAX = 9
    C_LAST = 10
    C_ORDERS = 11
    C_ORDMAX = 12
    C_SIZE = 24
NCOUNTERS = C_SIZE
ORDERS = C_ORDERS

#: the output and reporting moments of the loop (the ``code`` of Stepper.report)
cdef enum:
    AT_OUTPUT = -1


def new_counters():
    """A fresh counters buffer (h_min = inf, no accepted order yet)."""
    c = np.zeros(C_SIZE)
    c[C_HMIN] = np.inf
    c[C_LAST] = -1.0
    return c


include "_bounds.pxi"
include "_subnormals.pxi"
include "_loop_status.pxi"


cdef inline void _stats(double[::1] stats, double h, int order, long nsteps, long nrej,
                        double nfev) noexcept:
    stats[0] = h
    stats[1] = order
    stats[2] = nsteps
    stats[3] = nrej
    stats[4] = nfev


cdef inline void _accepted(double[::1] counters, double h, int order) noexcept:
    """The bookkeeping of ``Integrator.step`` for one accepted step."""
    if h < counters[C_HMIN]:
        counters[C_HMIN] = h
    if h > counters[C_HMAX]:
        counters[C_HMAX] = h
    if 0 <= order <= C_ORDMAX:
        counters[C_ORDERS + order] += 1.0
    if counters[C_LAST] >= 0.0 and <double>order != counters[C_LAST]:
        counters[C_ORDCH] += 1.0
    counters[C_LAST] = order


cdef inline bint _stop_met(const double* ynew, const idx_t[::1] stop_idx,
                           const double[::1] stop_val, const double[::1] stop_sign) noexcept:
    cdef Py_ssize_t ks, nstop = 0 if stop_idx is None else stop_idx.shape[0]
    for ks in range(nstop):
        if stop_sign[ks] * (ynew[stop_idx[ks]] - stop_val[ks]) <= 0.0:
            return True
    return False


cdef int _check_common(str who, CompiledODE f, double t0, double t1, double[::1] y0,
                       double[::1] t_out, Py_ssize_t i_out, double[::1] stats,
                       double[::1] counters, const idx_t[::1] stop_idx,
                       const double[::1] stop_val, const double[::1] stop_sign,
                       double[::1] ystep, long max_steps, bint dae_ok=False) except -1:
    """The arguments every loop shares, checked before its first step (
    docs/reliability.md "Kernel boundaries"): the state's size against the
    right-hand side, a finite start, the output position, the statistics buffers,
    the stop conditions and the step budget."""
    cdef Py_ssize_t N = y0.shape[0], nstop = 0 if stop_idx is None else stop_idx.shape[0]
    if N < 2 * f.n + 1:
        raise ValueError(f"{who}: y0 has {N} entries, needs [q; qd; W] = {2 * f.n + 1}")
    if N != getattr(f, "size", N):      # a right-hand side of another state (GGL)
        raise ValueError(f"{who}: y0 has {N} entries, the right-hand side "
                         f"{getattr(f, 'size')}")
    if getattr(f, "dae", False) and not dae_ok:
        raise ValueError(f"{who}: a DAE right-hand side (CompiledGGL) needs run_bdf with "
                         f"its mass matrix")
    _all_finite(f"{who}: y0", y0)
    if not (_b_isfinite(t0) and t1 == t1):     # t1 = +inf: open-ended (Simulation)
        raise ValueError(f"{who}: t0 = {t0} must be finite and t1 = {t1} a number")
    if not t1 > t0:
        raise ValueError(f"{who}: integrates forwards only (t0 = {t0}, t1 = {t1})")
    _index(f"{who}: i_out", i_out, 0, t_out.shape[0])
    _need(f"{who}: stats", stats.shape[0], 5)
    if counters is not None:
        _need(f"{who}: counters", counters.shape[0], C_SIZE)
    if nstop and (stop_val is None or stop_sign is None or stop_val.shape[0] != nstop
                  or stop_sign.shape[0] != nstop):
        raise ValueError(f"{who}: stop arrays have different lengths (stop_idx "
                         f"{nstop}, stop_val and stop_sign must match)")
    if nstop:
        _extent(stop_idx, 0, N, f"{who}: stop_idx")
    if ystep is not None:
        _need(f"{who}: ystep", ystep.shape[0], N + 2)
    if max_steps < 0:
        raise ValueError(f"{who}: max_steps = {max_steps} must be >= 0 (0: no budget)")
    return 0


cdef int _commit_args(str who, object on_commit, object restart) except -1:
    """An ``on_commit`` call-back of a restarting stepper comes with its ``restart``."""
    if on_commit is not None and not callable(on_commit):
        raise ValueError(f"{who}: on_commit must be callable")
    if on_commit is not None and not callable(restart):
        raise ValueError(f"{who}: on_commit needs restart(t, y), the start state of the "
                         f"method restarted at a new end state")
    return 0


# ----------------------------------------------------------------------------------
# The stepper protocol
# ----------------------------------------------------------------------------------
cdef class Stepper:
    """One integration method inside :func:`_run` (module docstring).  Its state:
    the last accepted time ``t`` and state ``y`` (``y_arr`` the array returned to the
    caller), after ``attempt`` the trial end state ``y_trial`` (the stop conditions
    read it), after ``accept`` the step's end ``t_end``, ``y_end`` (outputs there are
    copies of it).  Buffers are allocated once, by :meth:`buf`."""
    cdef CompiledODE f
    cdef Py_ssize_t N
    cdef double t, t_end, t1, nfev0
    cdef long nsteps, nrej
    cdef list keep
    cdef object y_arr
    cdef object restart_cb          # restart(t, y) -> start state (replace_end)
    cdef bint gate                  # f's post-step gate at step ends, then a restart
    cdef double* y
    cdef double* y_trial
    cdef double* y_end

    cdef int setup(self, CompiledODE f, double t0, double[::1] y0, double t1,
                   long nfev_start) except -1:
        """The state every stepper has (the subclasses' ``init`` call it first)."""
        self.f = f
        self.N = y0.shape[0]
        self.t = t0
        self.t_end = t0
        self.t1 = t1
        self.nsteps = 0
        self.nrej = 0
        self.nfev0 = f.nfev - nfev_start
        self.keep = []
        self.restart_cb = None
        self.gate = False
        self.y_arr = np.array(y0, dtype=np.float64)
        cdef double[::1] yv = self.y_arr
        self.y = &yv[0]
        self.y_trial = self.y
        self.y_end = self.y
        return 0

    cdef double* buf(self, Py_ssize_t n, object init=None) except NULL:
        """A zeroed (or ``init``-filled) buffer of n doubles owned by the stepper."""
        a = np.zeros(n if n > 0 else 1) if init is None else \
            np.array(init, dtype=np.float64).reshape(-1)
        if a.shape[0] == 0:
            a = np.zeros(1)
        self.keep.append(a)
        cdef double[::1] v = a
        return &v[0]

    cdef inline double nfev(self) noexcept:
        return self.f.nfev - self.nfev0

    # -- the protocol: every stepper implements attempt, accept and dense (abstract
    # here); save_start, save_end, commit and report default to doing nothing --------
    cdef int attempt(self, double next_out) except -1:
        """Abstract: one accepted step into ``y_trial`` / ``t_end``, or a status."""
        raise NotImplementedError(f"{type(self).__name__} does not implement attempt")

    cdef int save_start(self, dict hist) except -1:
        return 0

    cdef int accept(self, bint due) except -1:
        """Abstract: take the step (counters, projection, next step and order)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement accept")

    cdef void save_end(self, double[::1] ystep) noexcept:
        return                  # default: no step state for checkpoints

    cdef int dense(self, double tt, double* out) except -1:
        """Abstract: the method's dense output at ``tt`` inside the step."""
        raise NotImplementedError(f"{type(self).__name__} does not implement dense")

    cdef int replace_end(self, object r) except -1:
        """Abstract: the step ends at the state ``r`` instead (the caller changed
        coordinates there, e.g. a new coordinate partition); continue from it
        (``RKStepper``: as from a projected state; the multistep and θ steppers: a
        restart, :meth:`restart_from`).  Called only with an ``on_commit`` call-back;
        returns 0 or a status (the restart's evaluation failed)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement replace_end")

    cdef object restart_from(self, object r):
        """The accepted step's end becomes the state ``r`` (the loop's (t, y), ``t`` the
        step's end) and the method restarts there as the Python driver restarts its
        integrator after a change of coordinates (``Integrator.restart``: history
        discarded, order 1, the first step chosen again): returns the start state of
        the ``restart(t, y)`` call-back (the Python integrator's ``loop_start()``
        after its ``restart``), or None when it could not evaluate the right-hand
        side there.  The steppers load it (``replace_end``); the order changes are
        counted from the restart (``Integrator.restart`` forgets the last order)."""
        cdef double[::1] v = np.ascontiguousarray(r, dtype=np.float64)
        if v.shape[0] != self.N:
            raise ValueError(f"on_commit returned {v.shape[0]} entries, the state has "
                             f"{self.N}")
        if self.restart_cb is None:
            raise ValueError(f"{type(self).__name__}: on_commit needs the restart "
                             f"call-back")
        memcpy(self.y, &v[0], self.N * sizeof(double))
        self.y_end = self.y
        return self.restart_cb(self.t, np.array(self.y_arr))

    cdef int commit(self, bint final) except -1:
        return 0

    cdef void report(self, double[::1] stats, int code) noexcept:
        return                  # default: no statistics

    cdef double h_next(self) noexcept:
        return 0.0


cdef tuple _run(Stepper s, double t1, double[::1] t_out, Py_ssize_t i_out,
                object on_output, double[::1] stats, const idx_t[::1] stop_idx,
                const double[::1] stop_val, const double[::1] stop_sign,
                double[::1] ystep, dict hist, long max_steps, object on_commit=None):
    """The step loop (module docstring): from the stepper's (t, y) to ``t1``, with
    outputs at ``t_out[i_out:]``.  ``on_commit(t, y)`` (optional) is called at every
    step's end before ``t1`` after its outputs, as the Python driver calls it (not
    after the last step, nor when ``on_output`` stopped the loop; ``y``: one buffer
    of the loop, refilled at every step: copy what you keep); a returned array
    replaces the end state (``Stepper.replace_end``).  Returns ``(code, t, y, i_out,
    h)``."""
    cdef Py_ssize_t N = s.N, nout = t_out.shape[0]
    cdef double[::1] cbuf
    commit_arr = None
    if on_commit is not None or s.gate:
        commit_arr = np.empty(N)
        cbuf = commit_arr
    cdef long since = 0
    cdef int code
    cdef bint due
    cdef double tt
    cdef double[::1] out
    while s.t < t1:
        if max_steps > 0 and since >= max_steps:     # the step budget
            s.report(stats, LOOP_BUDGET)
            return LOOP_BUDGET, s.t, s.y_arr, i_out, s.h_next()
        code = s.attempt(t_out[i_out] if i_out < nout else NAN)
        if code:
            s.report(stats, code)
            return code, s.t, s.y_arr, i_out, s.h_next()
        # stop conditions met in this step: the caller locates them and redoes it
        if _stop_met(s.y_trial, stop_idx, stop_val, stop_sign):
            s.report(stats, LOOP_STOP_CONDITION)
            return LOOP_STOP_CONDITION, s.t, s.y_arr, i_out, s.h_next()
        due = i_out < nout and t_out[i_out] <= s.t_end
        if due and hist is not None:
            s.save_start(hist)
        code = s.accept(due)
        if code:
            s.report(stats, code)
            return code, s.t, s.y_arr, i_out, s.h_next()
        since += 1
        if due:                                     # outputs in (t, t_end]
            since = 0
            if ystep is not None:
                s.save_end(ystep)
            s.report(stats, AT_OUTPUT)
            while i_out < nout and t_out[i_out] <= s.t_end:
                tt = t_out[i_out]
                outa = np.empty(N)
                out = outa
                if tt == s.t_end:
                    memcpy(&out[0], s.y_end, N * sizeof(double))
                else:
                    code = s.dense(tt, &out[0])
                    if code:
                        s.report(stats, code)
                        return code, s.t, s.y_arr, i_out, s.h_next()
                i_out += 1
                if on_output(tt, outa) is True:
                    s.commit(True)
                    return LOOP_STOPPED, s.t, s.y_arr, i_out, s.h_next()
        if s.gate and s.t_end < t1:
            # the right-hand side's post-step gate (a restarting method: a
            # projected end state restarts it, as a new state of on_commit does)
            memcpy(&cbuf[0], s.y_end, N * sizeof(double))
            code = s.f.c_post_step(s.t_end, &cbuf[0], True)
            if code < 0:
                s.report(stats, LOOP_EVAL_FAILED)
                return LOOP_EVAL_FAILED, s.t, s.y_arr, i_out, s.h_next()
            if code == 1:
                code = s.replace_end(commit_arr)
                if code:
                    s.report(stats, code)
                    return code, s.t, s.y_arr, i_out, s.h_next()
        if on_commit is not None and s.t_end < t1:
            memcpy(&cbuf[0], s.y_end, N * sizeof(double))
            r = on_commit(s.t_end, commit_arr)
            if r is not None:
                code = s.replace_end(r)
                if code:
                    s.report(stats, code)
                    return code, s.t, s.y_arr, i_out, s.h_next()
        code = s.commit(False)
        if code:
            s.report(stats, code)
            return code, s.t, s.y_arr, i_out, s.h_next()
    s.report(stats, LOOP_DONE)
    return LOOP_DONE, s.t, s.y_arr, i_out, s.h_next()


cdef void _difference_floor(const double* y, Py_ssize_t p, Py_ssize_t N,
                            double* floor) noexcept:
    """``mbcore.integrate.common.difference_floor`` with the blocks positions
    (``p`` of them), velocities, the rest: ``max(1e-8, 1e-3 max_block |y_i|)``;
    ``p = 0``: one block, all of y (the first-order methods)."""
    cdef Py_ssize_t blk, a, b, i
    cdef double big, fl
    for blk in range(3):
        a = 0 if blk == 0 else (p if blk == 1 else 2 * p)
        b = p if blk == 0 else (2 * p if blk == 1 else N)
        big = 0.0
        for i in range(a, b):
            if fabs(y[i]) > big:
                big = fabs(y[i])
        fl = 1e-3 * big
        if fl < 1e-8:
            fl = 1e-8
        for i in range(a, b):
            floor[i] = fl


include "_step_rk.pxi"
include "_step_adams.pxi"
include "_step_bdf.pxi"
include "_step_theta.pxi"
include "_step_genalpha.pxi"
include "_step_fixed.pxi"
include "_step_lie.pxi"

# the implicit Runge-Kutta steppers: SDIRKStepper (sdirk, run_sdirk) and RadauStepper
# (radau, run_radau), the Python integrators' methods as the steppers listed above
include "_step_sdirk.pxi"
include "_step_radau.pxi"
