# cython: language_level=3
"""Compiled integration loops of the multistep methods (``mbcore._ext._multistep``).

:func:`run_abm` is the variable-step, variable-order Adams PECE of Shampine and
Gordon (``mbplugins.integrators.adams.AdamsPECE``), :func:`run_bdf` the
variable-step, variable-order BDF with modified Newton iteration
(``mbplugins.integrators.bdf.BDF``, LAPACK LU; Newton Jacobian ``f.c_jac``: forward
differences column by column, or the semi-analytic DI/CS Jacobian of
``_dynamics.CompiledRHS``), :func:`run_theta` the fixed-step θ-methods implicit Euler and
trapezoid (``mbplugins.integrators.implicit.ThetaMethod``).  All step a compiled
right-hand side (:class:`CompiledODE`, ``y = [x;
xdot; W]``, evaluated through ``c_eval``) exactly as the Python integrators do:
same formulas, same order and step selection, same Jacobian and LU reuse, same
dense output, so both loops take the same steps and evaluations (tests keep the
trajectories equal to rounding).  The Python integrator object supplies the
starting state (first derivative, first step, tolerances after calibration);
the loop continues from it.

Return protocol (that of ``mbcore._ext._dynamics.run_rk``): ``(code, t, y, i_out,
h)`` with code 0 finished, 1 stopped (``on_output`` returned True), 2 the
right-hand side failed at a trial point (t, y = the last accepted state: the caller
continues on the Python driver, which raises the named error), 3 the step size
fell below the round-off limit (``h`` = that step), 4 a stop condition
``stop_sign[k] * (y[stop_idx[k]] - stop_val[k])`` falls through zero in the step
after (t, y), 5 the step budget: ``max_steps`` > 0 steps since the last output (or
the start) without reaching the next output time.  ``stats`` (5 floats, updated before every output and on return):
last step, order, steps, rejected attempts, evaluations (from ``nfev_start``).
``counters`` (:data:`NCOUNTERS` floats, accumulated): see :data:`COUNTERS`.
"""
from libc.math cimport fabs, sqrt, pow, INFINITY

from scipy.linalg.cython_blas cimport ddot, dgemv, dgemm
from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._sparse cimport idx_t

import numpy as np
from scipy.linalg.lapack import dgetrf as _py_dgetrf, dgetrs as _py_dgetrs

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


def new_counters():
    """A fresh counters buffer (h_min = inf, no accepted order yet)."""
    c = np.zeros(C_SIZE)
    c[C_HMIN] = np.inf
    c[C_LAST] = -1.0
    return c


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


include "_bounds.pxi"
include "_loop_status.pxi"


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


cdef inline bint _stop_met(const double* ynew, const idx_t[::1] stop_idx,
                           const double[::1] stop_val, const double[::1] stop_sign) noexcept:
    cdef Py_ssize_t ks, nstop = 0 if stop_idx is None else stop_idx.shape[0]
    for ks in range(nstop):
        if stop_sign[ks] * (ynew[stop_idx[ks]] - stop_val[ks]) <= 0.0:
            return True
    return False


# ----------------------------------------------------------------------------------
# Adams PECE (Shampine-Gordon STEP / INTRP)
# ----------------------------------------------------------------------------------
def run_abm(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
            double[:, ::1] phi0 not None, double[::1] hs0 not None, double h, double h_last,
            int k, long neq, bint phase1, int kmax, double rtol, double atol,
            double max_step, const double[::1] gamma not None,
            const double[::1] gstar_abs not None, double[::1] t_out not None,
            Py_ssize_t i_out, object on_output, double[::1] stats not None,
            double[::1] counters not None, long nfev_start=0,
            const idx_t[::1] stop_idx=None, const double[::1] stop_val=None,
            const double[::1] stop_sign=None, double[::1] ystep=None, dict hist=None,
            long max_steps=0):
    """Integrate from (t0, y0) to t1 > t0 by ``AdamsPECE`` from its state after
    ``_restart_impl`` or any accepted step: ``phi0`` = φ_1..φ_{kmax+2} (rows),
    ``hs0`` the past steps (most recent first), ``h`` the next step, ``h_last``,
    order ``k``, ``neq`` steps of the current size, ``phase1`` (start-up), internal
    tolerances ``rtol``/``atol``; ``gamma``/``gstar_abs`` = ``GAMMA``, ``|GAMMA_STAR|``
    (kmax + 3 values).  Dense output at ``t_out[i_out:]``: INTRP, as
    ``AdamsDenseOutput``.  Checkpoints: before the outputs of a step ``ystep`` (N + 2
    floats) receives its end state, time and next step, ``hist`` (a dict) the state
    above at that step's start, from which the step is redone (``t``, ``y``, ``phi``,
    ``hs`` copies, ``h``, ``h_last``, ``k``, ``neq``, ``phase1``, and ``counts``: steps,
    rejected steps, evaluations before it).
    Returns ``(code, t, y, i_out, h)`` (module docstring).  Refused (ValueError
    naming the argument): the checks of :func:`_check_common`, kmax < 1, k outside
    [1, kmax], phi0 not (kmax + 2, N), hs0, gamma, gstar_abs shorter than kmax + 2,
    kmax + 3, kmax + 3, non-finite phi0 or hs0, h not positive and finite, max_step
    not > 0, rtol / atol not finite, >= 0 and not both 0."""
    cdef Py_ssize_t N = y0.shape[0], K2 = kmax + 2, i, j, kk, m, lim
    cdef Py_ssize_t nout = t_out.shape[0]
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
    cdef double[:, ::1] phi = np.array(phi0, dtype=np.float64)
    cdef double[:, ::1] nphi = np.zeros((K2, N))
    cdef double[:, ::1] phis = np.zeros((K2, N))
    cdef double[:, ::1] swap
    cdef double[::1] hs = np.array(hs0[:K2], dtype=np.float64)
    cdef double[::1] y = np.array(y0, dtype=np.float64)
    cdef double[::1] p = np.zeros(N)
    cdef double[::1] ynew = np.zeros(N)
    cdef double[::1] fp = np.zeros(N)
    cdef double[::1] sstar = np.zeros(N)
    cdef double[::1] d1 = np.zeros(N)
    cdef double[::1] d2 = np.zeros(N)
    cdef double[::1] isc = np.zeros(N)
    cdef double[::1] tmp = np.zeros(N)
    cdef double[::1] psi_new = np.zeros(K2 + 1)
    cdef double[::1] psi_old = np.zeros(K2 + 1)
    cdef double[::1] alpha = np.zeros(K2 + 1)
    cdef double[::1] beta = np.zeros(K2 + 1)
    cdef double[::1] sigma = np.zeros(K2 + 1)
    cdef double[::1] g = np.zeros(K2 + 1)
    cdef double[::1] w = np.zeros(K2 + 1)
    cdef double[::1] psid = np.zeros(K2 + 1)
    cdef double[::1] G = np.zeros(K2 + 1)
    cdef double[::1] out
    cdef double t = t0, tnew = t0, t_old = t0, habs, nk, erk, err, erkm1, erkm2, erkp1, factor
    cdef double a, b, acc, c, hnext, r, min_step, tt, hi, term, ps, gam, eta, hstep
    cdef double nfev0 = f.nfev - nfev_start
    cdef long nsteps = 0, nrej = 0, ns, since = 0
    cdef int ifail, knew, k_next, k1, kstep = k
    cdef bint uniform
    # checkpoints: the scalars of the state at the step's start (its arrays phi, hs
    # and y change only when the step is accepted)
    cdef double h_top = h, nfev_top = 0.0
    cdef long neq_top = neq, nsteps_top = 0, nrej_top = 0
    cdef int k_top = k
    cdef bint phase1_top = phase1
    while t < t1:
        if max_steps > 0 and since >= max_steps:     # the step budget (code 5)
            _stats(stats, fabs(h), k, nsteps, nrej, f.nfev - nfev0)
            return LOOP_BUDGET, t, np.asarray(y), i_out, h
        # ---- one accepted step (AdamsPECE._step_impl) ------------------------------
        h_top, k_top, neq_top, phase1_top = h, k, neq, phase1
        nsteps_top, nrej_top, nfev_top = nsteps, nrej, f.nfev - nfev0
        if hist is not None:
            f.c_save()                  # the right-hand side's own state (warm start)
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        ifail = 0
        if fabs(h) > max_step:
            h = max_step
        while True:
            if fabs(h) < min_step:
                _stats(stats, fabs(h), k, nsteps, nrej, f.nfev - nfev0)
                return LOOP_STEP_TOO_SMALL, t, np.asarray(y), i_out, h
            tnew = t + h
            if tnew - t1 > 0 or fabs(t1 - tnew) < min_step:
                tnew = t1
                h = tnew - t
            if h != h_last:
                neq = 0
            ns = neq + 1
            # coefficients psi(n+1), beta, sigma, g (STEP block 1)
            k1 = k + 1
            uniform = neq >= k1 and h == h_last
            if uniform:
                for j in range(k1):
                    psi_new[j] = h * (j + 1.0)
                for j in range(k1 + 1):
                    beta[j] = 1.0
                    sigma[j] = 1.0
                    g[j] = gamma[j]
            else:
                acc = 0.0
                for j in range(k1):
                    acc = acc + hs[j]
                    psi_old[j] = acc
                psi_new[0] = h
                for j in range(1, k1):
                    psi_new[j] = h + psi_old[j - 1]
                for j in range(k1):
                    alpha[j] = h / psi_new[j]
                beta[0] = 1.0
                for j in range(1, k1):
                    beta[j] = beta[j - 1] * (psi_new[j - 1] / psi_old[j - 1])
                sigma[0] = 1.0
                for j in range(1, k1 + 1):
                    sigma[j] = sigma[j - 1] * (j * alpha[j - 1])
                for j in range(k1 + 1):
                    w[j] = 1.0 / (j + 1)
                g[0] = 1.0
                for i in range(1, k1 + 1):
                    for j in range(k1 + 1 - i):
                        w[j] = w[j] - alpha[i - 1] * w[j + 1]
                    g[i] = w[0]
            for kk in range(k1):
                for i in range(N):
                    phis[kk, i] = beta[kk] * phi[kk, i]
            # predict, evaluate
            _vecmat(&g[0], &phis[0, 0], k, N, &p[0])
            for i in range(N):
                p[i] = y[i] + h * p[i]
            if f.c_eval(tnew, &p[0], &fp[0]):
                _stats(stats, fabs(h), k, nsteps, nrej, f.nfev - nfev0)
                return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h
            for i in range(N):
                acc = phis[0, i]
                for kk in range(1, k):
                    acc = acc + phis[kk, i]
                sstar[i] = acc
                d1[i] = fp[i] - acc
                a = fabs(y[i])
                b = fabs(p[i])
                isc[i] = 1.0 / (atol + rtol * (a if a >= b else b))
            habs = fabs(h)
            nk = _rms_mul(&d1[0], &isc[0], N, &tmp[0])
            erk = habs * sigma[k] * gstar_abs[k] * nk
            err = habs * fabs(g[k - 1] - g[k]) * nk
            knew = k
            erkm1 = 0.0
            erkm2 = 0.0
            if k >= 2:
                for i in range(N):
                    d2[i] = d1[i] + phis[k - 1, i]                 # phi_k(n+1)
                erkm1 = habs * sigma[k - 1] * gstar_abs[k - 1] * _rms_mul(&d2[0], &isc[0], N, &tmp[0])
                if k >= 3:
                    for i in range(N):
                        d2[i] = d2[i] + phis[k - 2, i]             # phi_{k-1}(n+1)
                    erkm2 = habs * sigma[k - 2] * gstar_abs[k - 2] * \
                        _rms_mul(&d2[0], &isc[0], N, &tmp[0])
                    if (erkm1 if erkm1 >= erkm2 else erkm2) <= erk:
                        knew = k - 1
                elif erkm1 <= 0.5 * erk:
                    knew = k - 1
            if err <= 1.0:
                break
            # rejected: halve (three times), then order 1 and the optimal step
            nrej += 1
            counters[C_ERR] += 1.0
            phase1 = False
            ifail += 1
            factor = 0.5
            if ifail >= 3:
                knew = 1
                if ifail > 3 and erk > 2.0:
                    factor = sqrt(0.5 / erk)
            h *= factor
            k = knew
        # ---- correct, evaluate ---------------------------------------------------
        c = h * g[k]
        for i in range(N):
            ynew[i] = p[i] + c * d1[i]
        if f.c_eval(tnew, &ynew[0], &fp[0]):
            _stats(stats, fabs(h), k, nsteps, nrej, f.nfev - nfev0)
            return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h
        for i in range(N):
            a = fp[i] - sstar[i]                    # phi_{k+1}(n+1)
            b = a - phis[k, i]                      # phi_{k+2}(n+1)
            acc = phis[k - 1, i]
            nphi[k - 1, i] = acc + a
            for kk in range(k - 2, -1, -1):
                acc = acc + phis[kk, i]
                nphi[kk, i] = acc + a
            nphi[k, i] = a
            nphi[k + 1, i] = b
            for kk in range(k + 2, K2):
                nphi[kk, i] = 0.0
            d2[i] = b
        # ---- order for the next step (STEP block 4) -------------------------------
        erkp1 = 0.0
        if knew == k - 1 or k == kmax:
            phase1 = False
        if phase1:
            k_next = k + 1
            erk = 0.0
        elif knew == k - 1:
            k_next = k - 1
            erk = erkm1
        elif k + 1 > ns or k == kmax:
            k_next = k
        else:
            erkp1 = habs * gstar_abs[k + 1] * _rms_mul(&d2[0], &isc[0], N, &tmp[0])
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
        if phase1 or 0.5 >= erk * pow(2.0, k_next + 1):
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
        if fabs(hnext) > max_step:
            hnext = max_step
        # ---- stop conditions: met in this step -> the caller redoes it -------------
        if _stop_met(&ynew[0], stop_idx, stop_val, stop_sign):
            _stats(stats, fabs(h), k, nsteps, nrej, f.nfev - nfev0)
            return LOOP_STOP_CONDITION, t, np.asarray(y), i_out, h
        # ---- accept ----------------------------------------------------------------
        if hist is not None and i_out < nout and t_out[i_out] <= tnew:
            hist.update(t=t, y=np.array(y), phi=np.array(phi), hs=np.array(hs), h=h_top,
                        h_last=h_last, k=k_top, neq=neq_top,
                        phase1=1.0 if phase1_top else 0.0,
                        counts=np.array([nsteps_top, nrej_top, nfev_top], dtype=float))
        for j in range(k):
            psid[j] = psi_new[j]
        neq = neq + 1 if h == h_last else 1
        h_last = h
        for j in range(K2 - 1, 0, -1):
            hs[j] = hs[j - 1]
        hs[0] = h
        swap = phi
        phi = nphi
        nphi = swap
        kstep = k
        k = k_next
        hstep = h
        h = hnext
        t_old = t
        t = tnew
        for i in range(N):
            y[i] = ynew[i]
        nsteps += 1
        since += 1
        _accepted(counters, fabs(t - t_old), kstep)
        # ---- outputs in (t_old, t]: INTRP -------------------------------------------
        if i_out < nout and t_out[i_out] <= t:
            since = 0
            if ystep is not None and ystep.shape[0] >= N + 2:   # checkpoints
                for i in range(N):
                    ystep[i] = y[i]
                ystep[N] = t
                ystep[N + 1] = fabs(h)
            _stats(stats, fabs(t - t_old), kstep, nsteps, nrej, f.nfev - nfev0)
            while i_out < nout and t_out[i_out] <= t:
                tt = t_out[i_out]
                outa = np.empty(N)
                out = outa
                if tt == t:
                    for i in range(N):
                        out[i] = y[i]
                else:
                    hi = tt - t
                    m = kstep + 1
                    for j in range(m):
                        w[j] = 1.0 / (j + 1)
                    G[0] = 1.0
                    term = 0.0
                    for j in range(2, m + 1):
                        ps = psid[j - 2]
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
                            a += G[j] * phi[j, i]
                        out[i] = y[i] + hi * a
                i_out += 1
                if on_output(tt, outa) is True:
                    return LOOP_STOPPED, t, np.asarray(y), i_out, h
    _stats(stats, fabs(t - t_old), kstep, nsteps, nrej, f.nfev - nfev0)
    return LOOP_DONE, t, np.asarray(y), i_out, h


# ----------------------------------------------------------------------------------
# BDF (backward differences, modified Newton, f.c_jac or a call-back, LAPACK LU)
# ----------------------------------------------------------------------------------
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
    lu, piv, info = _py_dgetrf(M, overwrite_a=True)
    return lu, piv


def _hook_solve(hook, lu, double[::1] r, double c_lu, double stale):
    """bdf.py ``_newton`` with a hook: ``solution(lu_solve(lu, rhs(r, c_lu)), r, c_lu)``
    (times the stale-factor scaling); None when the hook raised."""
    rr = np.array(r)
    try:
        dy = hook.solution(_py_dgetrs(lu[0], lu[1], hook.rhs(rr, c_lu))[0], rr, c_lu)
        if stale != 1.0:
            dy *= stale
        dy = np.ascontiguousarray(dy, dtype=np.float64)
    except Exception:
        return None
    return dy if dy.shape == (r.shape[0],) else None


cdef int _cb_jacobian(object jac, double t, double[::1] ypred, double* J, Py_ssize_t N,
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
    dense planar system of compiled force elements: Nikravesh (1988), §13.3, algorithm DI-4, the
    semi-analytic DI/CS Jacobian of ``mbcore.solve.dijac``), its own Jacobian, whose
    evaluation is not counted (as a Jacobian call-back of the Python driver: the
    loop adds it to ``nfev0``).  ``work``: 3N doubles.  Returns the failing
    evaluation's status (0 = OK)."""
    cdef long before = f.nfev
    cdef int status
    counters[C_JEV] += 1.0
    status = f.c_jac(t, y, N, scale, J, work)
    if f.analytic_jac and N == 2 * f.n + 1:
        nfev0[0] += f.nfev - before
    else:
        counters[C_FEV_JAC] += f.nfev - before
    return status


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
            long max_steps=0):
    """Integrate from (t0, y0) to t1 > t0 by ``BDF`` from its state after
    ``_restart_impl``: differences ``D0`` (max_order + 3 rows), order ``k``,
    ``h_abs``, ``n_equal``; no Jacobian nor LU yet.  ``bdf_gamma``, ``err_const``:
    ``BDF_GAMMA``, ``BDF_ERROR_CONST``; ``min_factor``, ``max_factor``,
    ``keep_below``: the step-change limits.  Dense output at ``t_out[i_out:]``: the
    backward-difference polynomial of the step (``BackwardDifferenceDenseOutput``).

    DAE options of ``BDF`` (Nikravesh (1988), §12.4, §13.3.4): ``mass`` the diagonal of
    the constant mass matrix (zeros: algebraic components, index-2 scaling of their
    rows and columns in the Newton matrix, out of the error test and the Newton norm;
    their start-up is the Python object's ``_restart_impl``), ``h_power`` the power of
    |h| weighting each component's error (all components then count), ``jac`` a
    Jacobian call-back ``jac(t, y)`` (its evaluations of ``f`` are not counted, as the
    Python driver does not count them; else ``f.c_jac``: forward differences of ``f``,
    column by column, or the right-hand side's own Jacobian, see :func:`_jacobian`).  ``newton_system``: the hook object of ``BDF`` (``update``, ``matrix``,
    ``rhs``, ``solution``; bdf.py ``NewtonSystem``), called as the Python driver calls
    it, its matrix factored and solved by the same LAPACK calls.  A call-back or hook
    that raises or returns a wrong or non-finite matrix hands the step to the Python
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
    Returns ``(code, t, y, i_out, h_abs)`` (module docstring).  Refused (ValueError
    naming the argument): the checks of :func:`_check_common`, max_order outside
    [1, 5], k outside [1, max_order], D0 not (max_order + 3, N) or non-finite,
    bdf_gamma / err_const shorter than max_order + 1 / + 2, maxiter < 1,
    jac_max_age < 1, mass / h_power / J0 of the wrong size or non-finite, h_abs or
    newton_tol not positive and finite, max_step not > 0, rtol / atol, the
    step-change limits (0 < min_factor <= 1 <= max_factor, keep_below >= 1,
    refactor_ratio >= 0, all finite)."""
    cdef Py_ssize_t N = y0.shape[0], ND = max_order + 3, i, j, l
    cdef Py_ssize_t nout = t_out.shape[0]
    _check_common("run_bdf", f, t0, t1, y0, t_out, i_out, stats, counters, stop_idx,
                  stop_val, stop_sign, ystep, max_steps, dae_ok=mass is not None)
    _index("run_bdf: max_order", max_order, 1, 5)
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
    # the mass diagonal (ones: the ODE form), algebraic components and the components
    # of the error test and the Newton norm (bdf.py: _diff, _err_mask)
    cdef double[::1] mv = np.ones(N) if mass is None else np.array(mass, dtype=np.float64)
    cdef char[::1] alg = (np.asarray(mv) == 0.0).astype(np.int8)
    cdef bint alg_any = bool(np.any(np.asarray(mv) == 0.0))
    cdef bint hpow = h_power is not None
    cdef double[::1] hp = np.zeros(N) if h_power is None else np.array(h_power,
                                                                       dtype=np.float64)
    # |h|^p by NumPy's power (bdf.py's ``h_abs ** h_power``): its vectorised pow is
    # not libm's to the last bit, and the weights must be those of the Python driver
    hp_arr = np.asarray(hp)
    cdef double[::1] hwp = np.ones(N)
    hwp_arr = np.asarray(hwp)
    cdef Py_ssize_t[::1] eidx = (np.arange(N, dtype=np.intp) if hpow or not alg_any
                                 else np.flatnonzero(np.asarray(mv) != 0.0).astype(np.intp))
    cdef Py_ssize_t ne = eidx.shape[0]
    if ne == 0:
        raise ValueError("run_bdf: no component in the error test (all masses zero)")
    cdef bint use_cb = jac is not None
    cdef long nfev_cb
    cdef bint use_hook = newton_system is not None
    cdef list jkeep = [None]             # the call-back's Jacobian array (for the hook)
    hlu = None                           # the hook's LU factors (scipy's dgetrf)
    cdef double[::1] dyv
    mass_arr = np.asarray(mv)
    cdef double[:, ::1] D = np.array(D0, dtype=np.float64)
    cdef double[:, ::1] Dd = np.zeros((max_order + 1, N))     # dense output
    cdef double[::1] J = np.zeros(N * N)                       # column-major
    cdef double[::1] LU = np.zeros(N * N)                      # column-major
    cdef int[::1] ipiv = np.zeros(N, dtype=np.intc)
    cdef double[::1] y = np.array(y0, dtype=np.float64)
    cdef double[::1] ypred = np.zeros(N)
    cdef double[::1] ynew = np.zeros(N)
    cdef double[::1] scale = np.zeros(N)
    cdef double[::1] psi = np.zeros(N)
    cdef double[::1] d = np.zeros(N)
    cdef double[::1] dy = np.zeros(N)
    cdef double[::1] fb = np.zeros(N)
    cdef double[::1] jwork = np.zeros(3 * N)                   # the Jacobian's work
    cdef double[::1] rwork = np.zeros(3 * 36)
    cdef double* R = &rwork[0]
    cdef double* U = &rwork[36]
    cdef double* RU = &rwork[72]
    cdef double[::1] wbuf = np.zeros((max_order + 1) * N)
    cdef double* tmp = &wbuf[0]
    cdef double[::1] pd = np.zeros(max_order + 1)
    cdef double[::1] out
    cdef double t = t0, t_old = t0, tnew, h = 0.0, min_step, c, c_lu = 0.0, a, stale, ratio
    cdef double hw = 0.0
    cdef double dy_norm, dy_norm_old = 0.0, rate = 0.0, safety = 1.0, err = 0.0
    cdef double best_factor, fm, fac, sg, tt, hstep = 0.0
    cdef double nfev0 = f.nfev - nfev_start
    cdef long nsteps = 0, nrej = 0, jac_age = 0, since = 0
    cdef int info = 0, one = 1, nn = <int>N, it, n_iter = 0, best, kstep = k
    cdef char trans = b'N'
    cdef bint jac_valid = False, jac_current = False, lu_valid = False, converged, have_old
    cdef bint have_rate
    # checkpoints: the loop at the start of a step that may reach an output
    cdef bint ck = hist is not None, snap = False, snap_jv = False, snap_J = False
    cdef bint snap_lu = False
    cdef double[:, ::1] Dsnap = np.zeros((ND if ck else 1, N if ck else 1))
    cdef double[::1] ysnap = np.zeros(N if ck else 1)
    cdef double[::1] Jsnap = np.zeros(N * N if ck else 1)
    cdef double snap_t = t0, snap_h = 0.0, snap_clu = 0.0, snap_nfev = 0.0
    cdef long snap_k = k, snap_neq = 0, snap_age = 0, snap_steps = 0, snap_rej = 0
    if J0 is not None:                   # resume: the Jacobian (and LU) of a checkpoint
        for i in range(N * N):
            J[i] = J0[i]
        jac_valid = True
        jac_age = jac_age0
        if use_cb:                       # the call-back's array (row-major), for the hook
            jkeep[0] = np.array(np.asarray(J).reshape(N, N).T, order="C")
        if use_hook and c_lu0 > 0.0:     # the hook's matrix of that J and c
            hlu = _hook_factor(newton_system, jkeep[0] if use_cb else None, J, N,
                               mass_arr, c_lu0)
            if hlu is not None:
                lu_valid = True
                c_lu = c_lu0
        elif c_lu0 > 0.0:
            for j in range(N):
                for i in range(N):
                    if alg[i] or alg[j]:
                        LU[j * N + i] = -J[j * N + i]
                    else:
                        LU[j * N + i] = (mv[i] if i == j else 0.0) - c_lu0 * J[j * N + i]
            dgetrf(&nn, &nn, &LU[0], &nn, &ipiv[0], &info)
            lu_valid = True
            c_lu = c_lu0
    while t < t1:
        if max_steps > 0 and since >= max_steps:     # the step budget (code 5)
            _stats(stats, h_abs, k, nsteps, nrej, f.nfev - nfev0)
            return LOOP_BUDGET, t, np.asarray(y), i_out, h_abs
        min_step = 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        # checkpoints: every attempt of this step ends before t + 2 max(h_abs,
        # min_step) (attempts only shrink); keep the state if an output lies there
        snap = ck and i_out < nout and \
            t_out[i_out] <= t + 2.0 * (h_abs if h_abs > min_step else min_step)
        if snap:
            Dsnap[:, :] = D
            ysnap[:] = y
            snap_t, snap_h, snap_k, snap_neq = t, h_abs, k, n_equal
            snap_jv, snap_J, snap_age = jac_valid, False, jac_age
            snap_lu, snap_clu = lu_valid, c_lu
            snap_steps, snap_rej, snap_nfev = nsteps, nrej, f.nfev - nfev0
            f.c_save()
        if h_abs > max_step:
            _rescale(&D[0, 0], N, k, max_step / h_abs, R, U, RU, tmp)
            h_abs *= max_step / h_abs
            n_equal = 0
        elif h_abs < min_step:
            _rescale(&D[0, 0], N, k, min_step / h_abs, R, U, RU, tmp)
            h_abs *= min_step / h_abs
            n_equal = 0
        while True:
            if h_abs < min_step:
                _stats(stats, h_abs, k, nsteps, nrej, f.nfev - nfev0)
                return LOOP_STEP_TOO_SMALL, t, np.asarray(y), i_out, h_abs
            h = h_abs
            tnew = t + h
            if tnew - t1 > 0 or fabs(t1 - tnew) < min_step:
                fac = fabs(t1 - t) / h_abs
                _rescale(&D[0, 0], N, k, fac, R, U, RU, tmp)
                h_abs *= fac
                n_equal = 0
                tnew = t1
                h = tnew - t
            _vecmat(&bdf_gamma[1], &D[1, 0], k, N, &psi[0])
            for i in range(N):
                a = D[0, i]
                for j in range(1, k + 1):
                    a = a + D[j, i]
                ypred[i] = a
                scale[i] = atol + rtol * fabs(a)
                psi[i] = psi[i] / bdf_gamma[k]
            hw = fabs(h)                    # bdf.py's local h_abs (the |h|^p weights)
            if hpow:
                np.power(hw, hp_arr, out=hwp_arr)
                for i in range(N):
                    scale[i] = scale[i] / hwp[i]
            c = h / bdf_gamma[k]
            if not jac_valid:
                if snap and snap_jv and not snap_J:
                    Jsnap[:] = J
                    snap_J = True
                if use_cb:
                    nfev_cb = f.nfev
                    l = _cb_jacobian(jac, tnew, ypred, &J[0], N, counters, jkeep)
                    nfev0 += f.nfev - nfev_cb  # the call-back's evaluations: uncounted
                    if l:
                        _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                        return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                elif _jacobian(f, tnew, &ypred[0], &scale[0], &J[0], &jwork[0], N, counters,
                               &nfev0):
                    _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                jac_valid = True
                jac_current = True
                jac_age = 0
                lu_valid = False
            if use_hook:
                try:
                    l = 1 if newton_system.update(tnew, np.array(ypred)) else 0
                except Exception:
                    _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                if l:
                    lu_valid = False
            if use_hook and (not lu_valid or fabs(c / c_lu - 1.0) > refactor_ratio):
                hlu = _hook_factor(newton_system, jkeep[0] if use_cb else None, J, N,
                                   mass_arr, c)
                if hlu is None:
                    _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                counters[C_LU] += 1.0
                lu_valid = True
                c_lu = c
            elif not lu_valid or fabs(c / c_lu - 1.0) > refactor_ratio:
                # M - c J; algebraic rows / c and algebraic unknowns * c: -J there
                # (bdf.py _newton_matrix, index-2 scaling)
                for j in range(N):
                    for i in range(N):
                        if alg[i] or alg[j]:
                            LU[j * N + i] = -J[j * N + i]
                        else:
                            LU[j * N + i] = (mv[i] if i == j else 0.0) - c * J[j * N + i]
                dgetrf(&nn, &nn, &LU[0], &nn, &ipiv[0], &info)
                counters[C_LU] += 1.0
                lu_valid = True
                c_lu = c
            # ---- modified Newton for d (BDF._newton) --------------------------------
            for i in range(N):
                d[i] = 0.0
                ynew[i] = ypred[i]
            ratio = c_lu / c
            stale = 1.0 if ratio == 1.0 else 2.0 / (1.0 + ratio)
            have_old = False
            have_rate = False
            converged = False
            it = 0
            while it < maxiter:
                if f.c_eval(tnew, &ynew[0], &fb[0]):
                    _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                if use_hook:                    # the problem's own Newton system
                    for i in range(N):
                        dy[i] = c * fb[i] - mv[i] * (psi[i] + d[i])
                    dyh = _hook_solve(newton_system, hlu, dy, c_lu, stale)
                    counters[C_SOLVE] += 1.0
                    if dyh is None:
                        _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                        return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                    dyv = dyh
                    for i in range(N):
                        dy[i] = dyv[i]
                else:
                    for i in range(N):
                        if alg[i]:              # algebraic rows are divided by c
                            dy[i] = fb[i]
                        else:
                            dy[i] = c * fb[i] - mv[i] * (psi[i] + d[i])
                    dgetrs(&trans, &nn, &one, &LU[0], &nn, &ipiv[0], &dy[0], &nn, &info)
                    counters[C_SOLVE] += 1.0
                    if alg_any:                 # the algebraic unknowns were c * dy
                        for i in range(N):
                            if alg[i]:
                                dy[i] /= c_lu
                    if stale != 1.0:
                        for i in range(N):
                            dy[i] *= stale
                dy_norm = _rms_idx(1.0, &dy[0], &scale[0], &eidx[0], ne, tmp)
                if not dy_norm < INFINITY:        # singular M or overflow: a failure
                    break
                if have_old:
                    rate = dy_norm / dy_norm_old
                    have_rate = True
                    if rate >= 1 or pow(rate, maxiter - it) / (1 - rate) * dy_norm > newton_tol:
                        break
                for i in range(N):
                    ynew[i] += dy[i]
                    d[i] += dy[i]
                if dy_norm == 0.0 or (have_rate and rate / (1 - rate) * dy_norm < newton_tol):
                    converged = True
                    break
                dy_norm_old = dy_norm
                have_old = True
                it += 1
            if it == maxiter:
                it = maxiter - 1
            n_iter = it + 1
            counters[C_NITER] += n_iter
            if not converged:
                nrej += 1
                counters[C_NEWTON] += 1.0
                if not jac_current:
                    if snap and snap_jv and not snap_J:
                        Jsnap[:] = J
                        snap_J = True
                    if use_cb:
                        nfev_cb = f.nfev
                        l = _cb_jacobian(jac, tnew, ypred, &J[0], N, counters, jkeep)
                        nfev0 += f.nfev - nfev_cb
                        if l:
                            _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                            return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                    elif _jacobian(f, tnew, &ypred[0], &scale[0], &J[0], &jwork[0], N,
                                   counters, &nfev0):
                        _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
                        return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                    jac_valid = True
                    jac_current = True
                    jac_age = 0
                    lu_valid = False
                    continue
                _rescale(&D[0, 0], N, k, 0.5, R, U, RU, tmp)
                h_abs *= 0.5
                n_equal = 0
                continue
            safety = 0.9 * (2 * maxiter + 1) / (2 * maxiter + n_iter)
            for i in range(N):
                scale[i] = atol + rtol * fabs(ynew[i])
            if hpow:
                for i in range(N):
                    scale[i] = scale[i] / hwp[i]
            err = _rms_idx(err_const[k], &d[0], &scale[0], &eidx[0], ne, tmp)
            if err > 1.0:
                nrej += 1
                counters[C_ERR] += 1.0
                fac = safety * pow(err, -1.0 / (k + 1))
                if fac < min_factor:
                    fac = min_factor
                _rescale(&D[0, 0], N, k, fac, R, U, RU, tmp)
                h_abs *= fac
                n_equal = 0
                continue
            break
        # ---- stop conditions: met in this step -> the caller redoes it -------------
        if _stop_met(&ynew[0], stop_idx, stop_val, stop_sign):
            _stats(stats, h, k, nsteps, nrej, f.nfev - nfev0)
            return LOOP_STOP_CONDITION, t, np.asarray(y), i_out, h_abs
        # ---- accept -------------------------------------------------------------------
        n_equal += 1
        t_old = t
        t = tnew
        for i in range(N):
            y[i] = ynew[i]
            D[k + 2, i] = d[i] - D[k + 1, i]
            D[k + 1, i] = d[i]
            for j in range(k, -1, -1):
                D[j, i] += D[j + 1, i]
        kstep = k
        hstep = h
        if i_out < nout and t_out[i_out] <= t:
            for j in range(k + 1):
                for i in range(N):
                    Dd[j, i] = D[j, i]
        jac_current = False
        jac_age += 1
        if jac_age >= jac_max_age:
            jac_valid = False
        nsteps += 1
        since += 1
        _accepted(counters, fabs(t - t_old), kstep)
        if n_equal >= k + 1:
            # order k-1, k, k+1: the one allowing the largest step
            best = 0
            best_factor = _factor(err, k)
            if k > 1:
                fm = _factor(_rms_idx(err_const[k - 1], &D[k, 0], &scale[0], &eidx[0], ne, tmp),
                             k - 1)
                if fm > best_factor:
                    best = -1
                    best_factor = fm
            if k < max_order:
                fm = _factor(_rms_idx(err_const[k + 1], &D[k + 2, 0], &scale[0], &eidx[0], ne,
                                     tmp), k + 1)
                if fm > best_factor:
                    best = 1
                    best_factor = fm
            fac = safety * best_factor
            if fac > max_factor:
                fac = max_factor
            if not (best == 0 and 1.0 <= fac < keep_below):
                k += best
                _rescale(&D[0, 0], N, k, fac, R, U, RU, tmp)
                h_abs *= fac
                n_equal = 0
        # ---- outputs in (t_old, t]: backward-difference polynomial --------------------
        if i_out < nout and t_out[i_out] <= t:
            since = 0
            if ystep is not None and ystep.shape[0] >= N + 2:   # checkpoints
                for i in range(N):
                    ystep[i] = y[i]
                ystep[N] = t
                ystep[N + 1] = h_abs
            if ck and snap:
                hist.update(t=snap_t, y=np.array(ysnap), D=np.array(Dsnap), k=snap_k,
                            n_equal=snap_neq, h_abs=snap_h,
                            J=(np.array(Jsnap) if snap_J else np.array(J)) if snap_jv
                            else None, jac_age=snap_age, c_lu=snap_clu if snap_lu else 0.0,
                            counts=np.array([snap_steps, snap_rej, snap_nfev], dtype=float))
            elif ck:
                hist["t"] = None
            _stats(stats, fabs(t - t_old), kstep, nsteps, nrej, f.nfev - nfev0)
            while i_out < nout and t_out[i_out] <= t:
                tt = t_out[i_out]
                outa = np.empty(N)
                out = outa
                if tt == t:
                    for i in range(N):
                        out[i] = y[i]
                else:
                    sg = (tt - t) / hstep
                    a = 1.0
                    for j in range(kstep):
                        if j == 0:
                            a = (sg + j) / (j + 1)
                        else:
                            a = a * ((sg + j) / (j + 1))
                        pd[j] = a
                    for i in range(N):
                        a = 0.0
                        for j in range(kstep):
                            a += pd[j] * Dd[j + 1, i]
                        out[i] = Dd[0, i] + a
                i_out += 1
                if on_output(tt, outa) is True:
                    return LOOP_STOPPED, t, np.asarray(y), i_out, h_abs
    _stats(stats, fabs(t - t_old), kstep, nsteps, nrej, f.nfev - nfev0)
    return LOOP_DONE, t, np.asarray(y), i_out, h_abs


# ----------------------------------------------------------------------------------
# θ-method (implicit Euler, trapezoid): fixed step, modified Newton, f.c_jac, LU
# ----------------------------------------------------------------------------------
def run_theta(CompiledODE f not None, double t0, double t1, double[::1] y0 not None,
              double[::1] f0 not None, double t_start, long i_step, double h_step,
              double theta, int order, bint evaluated, int maxiter, double newton_rtol,
              double newton_atol, double[::1] t_out not None, Py_ssize_t i_out,
              object on_output, double[::1] stats not None, double[::1] counters not None,
              long nfev_start=0, const idx_t[::1] stop_idx=None,
              const double[::1] stop_val=None, const double[::1] stop_sign=None,
              double[::1] ystep=None, dict hist=None, const double[::1] J0=None,
              double c_lu0=0.0, long max_steps=0):
    """Integrate from (t0, y0) to t1 > t0 by ``ThetaMethod`` (Jacobian ``f.c_jac``:
    forward differences as ``Integrator.jac``/``num_jac`` with the floor 1e-8, or the
    right-hand side's semi-analytic one, see :func:`_jacobian`) from
    its state after ``_restart_impl`` or an accepted step: ``f0`` = f(t0, y0) (the
    method's end derivative), the grid ``t_start + i h_step`` with ``i_step`` steps
    taken, no Jacobian nor LU yet.  ``evaluated``: the end derivative is
    f(t_n+1, y_n+1) and the dense output cubic Hermite (``Trapezoid``); else
    (y_n+1 − y_n)/h and linear interpolation (``ImplicitEuler``).  A Newton failure
    with a fresh Jacobian returns code 2 (the Python driver redoes the step and
    raises ``NewtonFailure``).  Checkpoints: before the outputs of a step ``ystep``
    (N + 2 floats) receives its end state, time and ``h_step``, ``hist`` (a dict) the
    state at that step's start, from which the step is redone: ``t``, ``y``, ``f``
    (the derivative there), ``t_start``, ``i``, ``h``, ``J`` (column-major copy, None
    if to be re-evaluated), ``c_lu`` (0: no LU) and ``counts`` (steps, rejected
    steps, evaluations before it); ``J0``, ``c_lu0``: start from
    such a Jacobian and its LU (refactored, uncounted).  Returns ``(code, t, y,
    i_out, h)`` (module docstring; code 3: the remaining interval is below the
    round-off limit).  Refused (ValueError naming the argument): the checks of
    :func:`_check_common`, f0 of the wrong size or non-finite, maxiter < 1, h_step
    not positive and finite, theta outside [0, 1], newton_rtol / newton_atol not
    finite and >= 0, a grid point ``t_start + i_step h_step`` more than two steps
    from t0 (else the loop would step towards it: a hang), J0 of the wrong size."""
    cdef Py_ssize_t N = y0.shape[0], i, j
    cdef Py_ssize_t nout = t_out.shape[0]
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
    cdef double[::1] J = np.zeros(N * N)                       # column-major
    cdef double[::1] LU = np.zeros(N * N)                      # column-major
    cdef int[::1] ipiv = np.zeros(N, dtype=np.intc)
    cdef double[::1] y = np.array(y0, dtype=np.float64)
    cdef double[::1] fn = np.array(f0, dtype=np.float64)
    cdef double[::1] y_old = np.zeros(N)
    cdef double[::1] f_old = np.zeros(N)
    cdef double[::1] ypred = np.zeros(N)
    cdef double[::1] ynew = np.zeros(N)
    cdef double[::1] base = np.zeros(N)
    cdef double[::1] scale = np.zeros(N)
    cdef double[::1] fd_floor = np.full(N, 1e-8)
    cdef double[::1] dy = np.zeros(N)
    cdef double[::1] fb = np.zeros(N)
    cdef double[::1] jwork = np.zeros(3 * N)                   # the Jacobian's work
    cdef double[::1] tmp = np.zeros(N)
    cdef double[::1] out
    cdef double t = t0, t_old = t0, tnew, h = 0.0, c, c_lu = 0.0, norm, norm_old = 0.0
    cdef double s, s2, s3, h00, h10, h01, h11, hd, tt
    cdef double nfev0 = f.nfev - nfev_start
    cdef long nsteps = 0, nrej = 0, since = 0
    cdef int info = 0, one = 1, nn = <int>N, it, iters, attempt
    cdef char trans = b'N'
    cdef bint jac_valid = False, jac_current = False, lu_valid = False, ok, have_old
    # checkpoints: the state at the step's start (y and fn change only when the step
    # is accepted; J is kept before it is re-evaluated inside the step)
    cdef bint ck = hist is not None, jv_top = False, lu_top = False, J_kept = False
    cdef double[::1] Jsnap = np.zeros(N * N if ck else 1)
    cdef double clu_top = 0.0, nfev_top = 0.0
    cdef long i_top = i_step, nsteps_top = 0, nrej_top = 0
    if J0 is not None:                   # resume: the Jacobian (and LU) of a checkpoint
        for i in range(N * N):
            J[i] = J0[i]
        jac_valid = True
        if c_lu0 != 0.0:
            for j in range(N):
                for i in range(N):
                    LU[j * N + i] = (1.0 if i == j else 0.0) - c_lu0 * J[j * N + i]
            dgetrf(&nn, &nn, &LU[0], &nn, &ipiv[0], &info)
            lu_valid = True
            c_lu = c_lu0
    while t < t1:
        if max_steps > 0 and since >= max_steps:     # the step budget (code 5)
            _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
            return LOOP_BUDGET, t, np.asarray(y), i_out, h
        # ---- one step (ThetaMethod._step_impl) -------------------------------------
        if ck:
            i_top, jv_top, J_kept, lu_top, clu_top = i_step, jac_valid, False, lu_valid, c_lu
            nsteps_top, nrej_top, nfev_top = nsteps, nrej, f.nfev - nfev0
            f.c_save()                  # the right-hand side's own state (warm start)
        i_step += 1
        tnew = t_start + (<double>i_step) * h_step
        if tnew - t1 > -1e-9 * h_step:
            tnew = t1
        h = tnew - t
        if fabs(h) < 10.0 * EPS * (fabs(t) if fabs(t) > 1e-300 else 1e-300):
            _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
            return LOOP_STEP_TOO_SMALL, t, np.asarray(y), i_out, h
        c = h * theta
        for i in range(N):
            if theta != 1.0:
                base[i] = y[i] + (h * (1.0 - theta)) * fn[i]
            else:
                base[i] = y[i]
            ypred[i] = y[i] + h * fn[i]
            scale[i] = newton_atol + newton_rtol * fabs(y[i])
        ok = False
        for attempt in range(2):
            if not jac_valid:
                if ck and jv_top and not J_kept:
                    Jsnap[:] = J
                    J_kept = True
                if _jacobian(f, tnew, &ypred[0], &fd_floor[0], &J[0], &jwork[0], N,
                             counters, &nfev0):
                    _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h
                jac_valid = True
                jac_current = True
                lu_valid = False
            if not lu_valid or fabs(c - c_lu) > 1e-6 * fabs(c_lu):
                for j in range(N):
                    for i in range(N):
                        LU[j * N + i] = (1.0 if i == j else 0.0) - c * J[j * N + i]
                dgetrf(&nn, &nn, &LU[0], &nn, &ipiv[0], &info)
                counters[C_LU] += 1.0
                lu_valid = True
                c_lu = c
            # ---- modified Newton (ThetaMethod._solve) -------------------------------
            for i in range(N):
                ynew[i] = ypred[i]
            have_old = False
            iters = maxiter
            for it in range(1, maxiter + 1):
                if f.c_eval(tnew, &ynew[0], &fb[0]):
                    _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h
                for i in range(N):
                    dy[i] = base[i] + c * fb[i] - ynew[i]
                dgetrs(&trans, &nn, &one, &LU[0], &nn, &ipiv[0], &dy[0], &nn, &info)
                counters[C_SOLVE] += 1.0
                for i in range(N):
                    ynew[i] += dy[i]
                norm = _rms_div(1.0, &dy[0], &scale[0], N, &tmp[0])
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
            counters[C_NITER] += iters
            if ok:
                break
            nrej += 1
            counters[C_NEWTON] += 1.0
            if attempt == 1 or jac_current:
                # NewtonFailure: the Python driver redoes this step and raises it
                _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
                return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h
            jac_valid = False                      # stale: re-evaluate, retry once
        # ---- stop conditions: met in this step -> the caller redoes it -------------
        if _stop_met(&ynew[0], stop_idx, stop_val, stop_sign):
            _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
            return LOOP_STOP_CONDITION, t, np.asarray(y), i_out, h
        # ---- end derivative, accept -------------------------------------------------
        if ck and i_out < nout and t_out[i_out] <= tnew:
            hist.update(t=t, y=np.array(y), f=np.array(fn), t_start=t_start, i=i_top,
                        h=h_step, J=(np.array(Jsnap) if J_kept else np.array(J)) if jv_top
                        else None, c_lu=clu_top if lu_top else 0.0,
                        counts=np.array([nsteps_top, nrej_top, nfev_top], dtype=float))
        if evaluated:
            if f.c_eval(tnew, &ynew[0], &fb[0]):
                _stats(stats, fabs(h), order, nsteps, nrej, f.nfev - nfev0)
                return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h
        jac_current = False
        for i in range(N):
            y_old[i] = y[i]
            f_old[i] = fn[i]
            fn[i] = fb[i] if evaluated else (ynew[i] - y[i]) / h
            y[i] = ynew[i]
        t_old = t
        t = tnew
        nsteps += 1
        since += 1
        _accepted(counters, fabs(t - t_old), order)
        # ---- outputs in (t_old, t]: linear or cubic Hermite -------------------------
        if i_out < nout and t_out[i_out] <= t:
            since = 0
            if ystep is not None and ystep.shape[0] >= N + 2:   # checkpoints
                for i in range(N):
                    ystep[i] = y[i]
                ystep[N] = t
                ystep[N + 1] = h_step
            _stats(stats, fabs(t - t_old), order, nsteps, nrej, f.nfev - nfev0)
            hd = t - t_old
            while i_out < nout and t_out[i_out] <= t:
                tt = t_out[i_out]
                outa = np.empty(N)
                out = outa
                if tt == t:
                    for i in range(N):
                        out[i] = y[i]
                else:
                    s = (tt - t_old) / hd
                    if evaluated:
                        s2 = s * s
                        s3 = s2 * s
                        h00 = 2 * s3 - 3 * s2 + 1
                        h10 = s3 - 2 * s2 + s
                        h01 = -2 * s3 + 3 * s2
                        h11 = s3 - s2
                        for i in range(N):
                            out[i] = h00 * y_old[i] + h10 * (hd * f_old[i]) \
                                + h01 * y[i] + h11 * (hd * fn[i])
                    else:
                        for i in range(N):
                            out[i] = y_old[i] + s * (y[i] - y_old[i])
                i_out += 1
                if on_output(tt, outa) is True:
                    return LOOP_STOPPED, t, np.asarray(y), i_out, h
    _stats(stats, fabs(t - t_old), order, nsteps, nrej, f.nfev - nfev0)
    return LOOP_DONE, t, np.asarray(y), i_out, h
