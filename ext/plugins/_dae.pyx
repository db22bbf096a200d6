# cython: language_level=3
"""Compiled right-hand sides of the DAE formulations ``ggl`` and ``stiff``
(``mbplugins._ext._dae``).

:class:`CompiledGGL` is the right-hand side ``diag(1, M, 0, 0) y' = f`` of the GGL
(stabilised index-2) DAE form of a planar system (Nikravesh (1988), §13.3.4) — or,
with ``spatial`` (the System's ``mbcore.system.mass.SpatialMass``), of ``diag(1, 1,
0, 0) y' = f`` with the velocity rows ``M^-1 (Q + Phi_q^T lam)`` of the regular
Formulation I (dense Jacobians; the shared kernel of ext/_spatial_mass.pxi) — for the
compiled BDF loop with its ``mass`` option (``mbcore._ext._steploop.run_bdf``); NumPy
reference: ``mbplugins.formulations.ggl.GGL.rhs``.  :class:`CompiledStiff` (derived
from it, sharing its stages) is that of the index-3 ``stiff`` form
(``y = [q; s; lam; W]``); NumPy reference: ``mbplugins.formulations.stiff.Stiff.rhs``."""
from libc.math cimport fabs, isfinite
from libc.string cimport memcpy

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport idx_t

import numpy as np

include "_eval_status.pxi"
include "_spatial_mass.pxi"


# ----------------------------------------------------------------------------------
# the GGL (stabilised index-2) DAE form: f of diag(1, M, 0, 0) y' = f for bdf
# (NumPy reference: mbplugins.formulations.ggl.GGL.rhs + the dynamic analysis' work rate)
# ----------------------------------------------------------------------------------
cdef class CompiledGGL(CompiledODE):
    """``CompiledGGL(evaluator, force_evaluator, functions, n, m, jdata, qgrav,
    indptr=None, indices=None)``: the
    right-hand side of the Gear-Gupta-Leimkuhler form (Nikravesh (1988), §13.3.4, §12.4)
    of a planar system with a constant diagonal mass matrix, state
    ``y = [q (n); v (n); lam (m); mu (m); W]``:

        f = [v + Phi_q^T mu;  Q + Phi_q^T lam;  Phi;  Phi_q v - nu;  P_nc + lam . Phi_q v]

    (the mass matrix ``diag(1, M, 0, 0, 1)`` is bdf's ``mass`` option, so no linear
    system is solved here).  ``jdata``: the System's Jacobian buffer, dense row-major,
    or CSR data with the pattern ``indptr``/``indices`` (sparse Systems).  ``size`` =
    2n + 2m + 1; ``cartesian`` is False (outputs come from the formulation).  Status
    codes as :class:`CompiledRHS` (no SINGULAR)."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t m, nf, size
    cdef double[::1] fv, jdata, phi, nu, Q, qgrav, yp, fb
    cdef idx_t[::1] indptr, indices
    cdef readonly bint sparse
    cdef double* fvp
    cdef readonly double power
    cdef ErrInfo err
    #: a DAE right-hand side: only a loop with a mass matrix (bdf) can step it
    cdef readonly bint dae
    # spatial bodies (GGL): the velocity rows are M^-1 (Q + Phi_q^T lam) of the
    # regular Formulation I, in the transformed columns of mbcore.system.mass (own
    # copies of its blocks; minv's p entries <- D at every evaluation)
    cdef readonly Py_ssize_t nsp
    cdef idx_t[:, ::1] sp_pidx, sp_pos      # (sp_pos, sp_bod: the Jacobian's p columns,
    cdef idx_t[::1] sp_bod                  # not used here: J is not transformed)
    cdef double[:, :, ::1] sp_J, sp_V
    cdef double[:, ::1] sp_lam, sp_E
    cdef double[::1] sp_alpha, minv

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  idx_t[::1] indptr=None, idx_t[::1] indices=None, spatial=None):
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledGGL: the evaluators belong to another system")
        self.nsp = 0
        self.minv = np.zeros(1)
        if spatial is not None:
            (self.nsp, self.sp_pidx, self.sp_pos, self.sp_bod, self.sp_J, self.sp_V,
             self.sp_lam, self.sp_alpha, self.sp_E, self.minv) = spatial_blocks(
                spatial, n, jdata.shape[0], "CompiledGGL")
        self.sparse = indptr is not None
        if self.sparse:
            if indices is None or indptr.shape[0] != m + 1 or indptr[0] != 0 \
                    or indptr[m] > indices.shape[0] or indptr[m] > jdata.shape[0] \
                    or np.any(np.diff(indptr) < 0) or (indices.shape[0] and (
                        np.min(indices) < 0 or np.max(indices) >= n)):
                raise ValueError("CompiledGGL: the CSR pattern does not match (n, m)")
            self.indptr = indptr
            self.indices = indices
        elif jdata.shape[0] < m * n:
            raise ValueError("CompiledGGL: buffer sizes do not match (n, m)")
        if n < 1 or m < 0 or qgrav.shape[0] != n:
            raise ValueError("CompiledGGL: buffer sizes do not match (n, m)")
        self.ev = evaluator
        self.fe = force_evaluator
        self.fn = functions
        self.n = n
        self.m = m
        self.size = 2 * n + 2 * m + 1
        self.cartesian = False
        self.dae = True
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata = jdata
        self.phi = np.zeros(max(m, 1))
        self.nu = np.zeros(max(m, 1))
        self.Q = np.zeros(n)
        self.qgrav = qgrav
        self.yp = np.zeros(self.size)
        self.fb = np.zeros(self.size)
        self.nfev = 0
        self.status = 0

    cdef int _stage(self, double t, const double* q, const double* v, bint with_nu,
                    double* P) noexcept nogil:
        """The stages the DAE right-hand sides share (GGL, and :class:`CompiledStiff`):
        time functions, Phi_q (into ``jdata``), Phi, nu (``with_nu``), Q = gravity +
        forces (P += the non-conservative power).  Counts the evaluation; returns a
        status code (sets ``status`` on failure)."""
        cdef Py_ssize_t n = self.n
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        memcpy(self.ev.qx, q, n * sizeof(double))
        memcpy(self.ev.qdx, v, n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0 \
                or self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0 \
                or (with_nu and self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0):
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        memcpy(&self.Q[0], &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, v, t, self.fvp, &self.Q[0], P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        return OK

    cdef void _mass_solve(self, const double* q, const double* v, double* F) noexcept nogil:
        """Spatial bodies: F <- (M + alpha p p^T)^-1 (F - b* - alpha p v.v) in place
        (``mbcore.system.mass.SpatialMass.solve``)."""
        cdef Py_ssize_t j
        _spatial_forward(self.nsp, &self.sp_pidx[0, 0], &self.sp_J[0, 0, 0],
                         &self.sp_V[0, 0, 0], &self.sp_lam[0, 0], &self.sp_alpha[0],
                         &self.sp_E[0, 0], &self.minv[0], q, v, F)
        for j in range(self.n):
            F[j] *= self.minv[j]
        _spatial_back(self.nsp, &self.sp_pidx[0, 0], &self.sp_E[0, 0], F)

    cdef int _finish(self, const double* ydot, Py_ssize_t N) noexcept nogil:
        """Status of ydot[0:N]: NOT_FINITE on a NaN/inf entry, else OK."""
        cdef Py_ssize_t i
        for i in range(N):
            if not isfinite(ydot[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        self.status = OK
        return OK

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:size] = f(t, y[0:size - 1]).  Returns a status code."""
        cdef Py_ssize_t n = self.n, m = self.m, i, j, p
        cdef const double* q = y
        cdef const double* v = y + n
        cdef const double* lam = y + 2 * n
        cdef const double* mu = y + 2 * n + m
        cdef const double* J = &self.jdata[0]
        cdef const double* Ji
        cdef double* Q = &self.Q[0]
        cdef double* phi = &self.phi[0]
        cdef double* nu = &self.nu[0]
        cdef double P = 0.0, jv, li, mi, a
        cdef int status = self._stage(t, q, v, True, &P)
        if status:
            return status
        for j in range(n):
            ydot[j] = v[j]
            ydot[n + j] = Q[j]
        for i in range(m):
            li = lam[i]
            mi = mu[i]
            jv = 0.0
            if self.sparse:
                for p in range(self.indptr[i], self.indptr[i + 1]):
                    j = self.indices[p]
                    a = J[p]
                    ydot[j] += a * mi             # Phi_q^T mu
                    ydot[n + j] += a * li         # Phi_q^T lam
                    jv += a * v[j]
            else:
                Ji = J + i * n
                for j in range(n):
                    ydot[j] += Ji[j] * mi
                    ydot[n + j] += Ji[j] * li
                    jv += Ji[j] * v[j]
            ydot[2 * n + i] = phi[i]
            ydot[2 * n + m + i] = jv - nu[i]
            P += li * jv                          # W' = P_nc + lam . (Phi_q v)
        if self.nsp:
            self._mass_solve(q, v, ydot + n)
        ydot[2 * n + 2 * m] = P
        self.power = P
        return self._finish(ydot, 2 * n + 2 * m + 1)

    def eval(self, double t, const double[::1] y not None, double[::1] ydot not None):
        """ydot[:size] = f(t, y[:size - 1]); returns the status (0 = OK)."""
        if y.shape[0] < self.size - 1 or ydot.shape[0] < self.size:
            raise ValueError(f"y needs {self.size - 1} and ydot {self.size} entries")
        return self.c_eval(t, &y[0], &ydot[0])

    def work_row(self, double t, const double[::1] y, double[::1] out):
        """out[j] = dW'/dy_j, j < size - 1, by forward differences with the increment
        1e-7 (1 + |y_j|): the work row of the dynamic analysis' ``dae_jacobian`` (its
        NumPy reference, the same formula through Python calls), in one C call.
        Returns the status of a failing evaluation (0 = OK; then ``out`` is
        incomplete and the caller takes the Python path)."""
        cdef Py_ssize_t j, N = self.size - 1
        cdef double w0, d, yj
        cdef int status
        if y.shape[0] < N or out.shape[0] < N:
            raise ValueError(f"y and out need {N} entries")
        cdef double* yp = &self.yp[0]
        cdef double* fb = &self.fb[0]
        status = self.c_eval(t, &y[0], fb)
        if status:
            return status
        w0 = fb[N]
        memcpy(yp, &y[0], N * sizeof(double))
        for j in range(N):
            yj = y[j]
            d = 1e-7 * (1.0 + fabs(yj))
            yp[j] = yj + d
            status = self.c_eval(t, yp, fb)
            if status:
                return status
            out[j] = (fb[N] - w0) / d
            yp[j] = yj
        return 0

    def timeit(self, double t, const double[::1] y, long repeat):
        """Seconds per evaluation over ``repeat`` evaluations at one state (benchmarks)."""
        import time
        cdef double[::1] out = np.zeros(self.size)
        cdef long k
        if y.shape[0] < self.size - 1:
            raise ValueError(f"y needs {self.size - 1} entries")
        cdef double t0 = time.perf_counter()
        for k in range(repeat):
            self.c_eval(t, &y[0], &out[0])
        return (time.perf_counter() - t0) / repeat


# ----------------------------------------------------------------------------------
# the stiff (ADAMS-type, index-3) DAE form: f of diag(1, M, 0) y' = f for bdf
# (NumPy reference: mbplugins.formulations.stiff.Stiff.rhs + the dynamic analysis'
# work rate)
# ----------------------------------------------------------------------------------
cdef class CompiledStiff(CompiledGGL):
    """``CompiledStiff(...)`` (the arguments of :class:`CompiledGGL`): the right-hand
    side of the index-3 form of the stiff DAE method (Nikravesh (1988), §13.3.4, §12.4)
    of a planar system with a constant diagonal mass matrix, state
    ``y = [q (n); s (n); lam (m); W]``:

        f = [s;  Q + Phi_q^T lam;  Phi;  P_nc + lam . Phi_q s]

    (mass ``diag(1, M, 0, 1)``: bdf's ``mass`` option).  The stages (time functions,
    Phi_q, Phi, forces) and ``eval`` / ``work_row`` / ``timeit`` are CompiledGGL's;
    ``size`` = 2n + m + 1."""

    def __cinit__(self, *args, **kwargs):
        # CompiledGGL.__cinit__ (run first, same arguments) checked the sizes
        self.size = 2 * self.n + self.m + 1
        self.yp = np.zeros(self.size)
        self.fb = np.zeros(self.size)

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:size] = f(t, y[0:size - 1]).  Returns a status code."""
        cdef Py_ssize_t n = self.n, m = self.m, i, j, p
        cdef const double* q = y
        cdef const double* v = y + n
        cdef const double* lam = y + 2 * n
        cdef const double* J = &self.jdata[0]
        cdef const double* Ji
        cdef const double* Q = &self.Q[0]
        cdef const double* phi = &self.phi[0]
        cdef double P = 0.0, jv, li, a
        cdef int status = self._stage(t, q, v, False, &P)
        if status:
            return status
        for j in range(n):
            ydot[j] = v[j]
            ydot[n + j] = Q[j]
        for i in range(m):
            li = lam[i]
            jv = 0.0
            if self.sparse:
                for p in range(self.indptr[i], self.indptr[i + 1]):
                    j = self.indices[p]
                    a = J[p]
                    ydot[n + j] += a * li         # Phi_q^T lam
                    jv += a * v[j]
            else:
                Ji = J + i * n
                for j in range(n):
                    ydot[n + j] += Ji[j] * li
                    jv += Ji[j] * v[j]
            ydot[2 * n + i] = phi[i]
            P += li * jv                          # W' = P_nc + lam . (Phi_q s)
        ydot[2 * n + m] = P
        self.power = P
        return self._finish(ydot, 2 * n + m + 1)
