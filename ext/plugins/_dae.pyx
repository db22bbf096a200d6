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
(``y = [q; s; lam; W]``, planar or spatial); NumPy reference:
``mbplugins.formulations.stiff.Stiff.rhs``."""
from libc.math cimport fabs, isfinite
from libc.string cimport memcpy

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator, ForceJacobianEvaluator
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
    or CSR data with the pattern ``indptr``/``indices`` (sparse Systems).  ``rows``:
    the constraint rows the DAE keeps (the independent ones of a redundant set; lam
    and mu have one entry per kept row; default all).  ``size`` =
    2n + 2m + 1; ``cartesian`` is False (outputs come from the formulation).  Status
    codes as :class:`CompiledRHS` (no SINGULAR).  For the Newton matrices of both DAE
    forms: :meth:`true_rows` (the exact derivative of Phi), :meth:`constraint_differences`
    (the constraint-only terms by differences, one C call) and, spatial bodies,
    :meth:`velocity_columns` (the analytic velocity rows' mass solve)."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    # m: the DAE's constraint rows (rows[i] of the System's m_full; all by default)
    cdef readonly Py_ssize_t m, m_full, nf, size
    cdef idx_t[::1] rows
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
    # spatial bodies: the radial coefficients a_b of the true gradient (nsp x m_full,
    # row-major), the Richardson differences' work rows (4 x m), a_b . lam (nsp), a
    # work vector (n) and the constraint differences' rows (m x n) and sums (2 x n)
    cdef double[::1] rad, rwork, rlam, zbuf, pbuf, gbuf

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  idx_t[::1] indptr=None, idx_t[::1] indices=None, spatial=None,
                  rows=None):
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
        self.m_full = m
        if rows is None:
            self.rows = np.arange(m, dtype=np.intp)
        else:
            r = np.ascontiguousarray(rows, dtype=np.intp)
            if r.ndim != 1 or (r.size and (r.min() < 0 or r.max() >= m)) \
                    or np.unique(r).size != r.size:
                raise ValueError("CompiledGGL: rows must be distinct constraint rows")
            self.rows = r
        self.m = m = self.rows.shape[0]
        self.size = 2 * n + 2 * m + 1
        self.cartesian = False
        self.dae = True
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata = jdata
        self.phi = np.zeros(max(self.m_full, 1))
        self.nu = np.zeros(max(self.m_full, 1))
        self.Q = np.zeros(n)
        self.qgrav = qgrav
        self.yp = np.zeros(self.size)
        self.fb = np.zeros(self.size)
        self.rad = np.zeros(max(self.nsp * self.m_full, 1))
        self.rwork = np.zeros(4 * max(self.m_full, 1))
        self.rlam = np.zeros(max(self.nsp, 1))
        self.zbuf = np.zeros(self.n)
        self.gbuf = np.zeros(3 * self.n)
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
        cdef Py_ssize_t r
        cdef int status = self._stage(t, q, v, True, &P)
        if status:
            return status
        for j in range(n):
            ydot[j] = v[j]
            ydot[n + j] = Q[j]
        for i in range(m):
            r = self.rows[i]
            li = lam[i]
            mi = mu[i]
            jv = 0.0
            if self.sparse:
                for p in range(self.indptr[r], self.indptr[r + 1]):
                    j = self.indices[p]
                    a = J[p]
                    ydot[j] += a * mi             # Phi_q^T mu
                    ydot[n + j] += a * li         # Phi_q^T lam
                    jv += a * v[j]
            else:
                Ji = J + r * n
                for j in range(n):
                    ydot[j] += Ji[j] * mi
                    ydot[n + j] += Ji[j] * li
                    jv += Ji[j] * v[j]
            ydot[2 * n + i] = phi[r]
            ydot[2 * n + m + i] = jv - nu[r]
            P += li * jv                          # W' = P_nc + lam . (Phi_q v)
        if self.nsp:
            self._mass_solve(q, v, ydot + n)
        ydot[2 * n + 2 * m] = P
        self.power = P
        return self._finish(ydot, 2 * n + 2 * m + 1)

    cdef int _radial(self, double t, const double* q) noexcept nogil:
        """``rad[b, :] = a_b``: the coefficients with which the true gradient of Phi
        differs from the projected Jacobian on the p columns of spatial body b,
        ``dPhi/dp_b = (Phi_q)_{p_b} + a_b p_b^T`` (the projected form, Nikravesh (1988),
        §7.3.1, has no component along p), from the derivative of Phi along p_b:
        central differences with h = 1e-3 and h/2 combined by Richardson
        extrapolation (exact for rows quartic in p_b up to rounding).  Needs the
        stages at (t, q) (``ev.qx`` = q, ``jdata`` = Phi_q); ``ev.qx`` is restored.
        NumPy reference: ``mbplugins.formulations.dae_common.radial_coefficients``."""
        cdef Py_ssize_t n = self.n, m = self.m_full, b, k, i, r
        cdef const idx_t* idx
        cdef double* qx = self.ev.qx
        cdef double* up = &self.rwork[0]
        cdef double* um = up + m
        cdef double* d0 = up + 2 * m
        cdef double* d1 = up + 3 * m
        cdef double* dr
        cdef double* arow
        cdef const double* J = &self.jdata[0]
        cdef double p[4]
        cdef double pp, hh, D, jp
        for b in range(self.nsp):
            idx = &self.sp_pidx[b, 0]
            pp = 0.0
            for k in range(4):
                p[k] = q[idx[k]]
                pp = pp + p[k] * p[k]
            for r in range(2):
                hh = 1e-3 if r == 0 else 0.5e-3
                dr = d0 if r == 0 else d1
                for k in range(4):
                    qx[idx[k]] = p[k] * (1.0 + hh)
                if self.ev.c_phi(t, self.fvp, up) >= 0:
                    return CONSTRAINT_FAILED
                for k in range(4):
                    qx[idx[k]] = p[k] * (1.0 - hh)
                if self.ev.c_phi(t, self.fvp, um) >= 0:
                    return CONSTRAINT_FAILED
                for i in range(m):
                    dr[i] = (up[i] - um[i]) / (2.0 * hh)
            for k in range(4):
                qx[idx[k]] = p[k]
            arow = &self.rad[b * m]
            for i in range(m):
                D = (4.0 * d1[i] - d0[i]) / 3.0
                jp = 0.0
                for k in range(4):
                    jp = jp + J[i * n + idx[k]] * p[k]
                arow[i] = (D - jp) / pp
        return OK

    cdef int _rows_at(self, double t, const double[::1] q) except -1:
        """The stages Phi_q and the radial coefficients at (t, q), for the Newton
        hook's methods; raises on a failing element."""
        cdef Py_ssize_t n = self.n
        if q.shape[0] < n:
            raise ValueError(f"q needs {n} entries")
        if self.nf and self.fn.run(t, self.fvp, &self.err) != 0:
            raise FloatingPointError("a time function failed")
        memcpy(self.ev.qx, &q[0], n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0 or self._radial(t, &q[0]):
            raise FloatingPointError("a constraint evaluation failed")
        return 0

    def true_rows(self, double t, const double[::1] q not None):
        """The exact derivative of Phi at (t, q), (m, n): ``Phi_q`` with ``a_b p_b^T``
        added on the p columns of every spatial body (the Newton rows of the stiff
        form, the Phi rows of both forms' Newton matrices; NumPy reference
        ``mbplugins.formulations.dae_common.true_rows``)."""
        cdef Py_ssize_t n = self.n, m = self.m, mf = self.m_full, b, i, k
        if self.sparse:
            raise ValueError("true_rows: a dense Jacobian is needed")
        self._rows_at(t, q)
        P = np.array(self.jdata[:mf * n]).reshape(mf, n)[np.asarray(self.rows)]
        cdef double[:, ::1] Pv = P
        cdef const idx_t* idx
        for b in range(self.nsp):
            idx = &self.sp_pidx[b, 0]
            for i in range(m):
                for k in range(4):
                    Pv[i, idx[k]] += self.rad[b * mf + self.rows[i]] * q[idx[k]]
        return P

    def radial_last(self):
        """(nsp, m) the coefficients ``a_b`` of the true gradient on the used rows, as
        the last evaluation left them (the stiff form's ``eval``, ``true_rows``): the
        stiff form's output multipliers without evaluating them again (NumPy
        reference ``mbplugins.formulations.dae_common.radial_coefficients``)."""
        cdef Py_ssize_t m = self.m, mf = self.m_full, b, i
        out = np.empty((self.nsp, m))
        cdef double[:, ::1] o = out
        for b in range(self.nsp):
            for i in range(m):
                o[b, i] = self.rad[b * mf + self.rows[i]]
        return out

    def constraint_differences(self, double t, const double[::1] q not None,
                               const double[::1] v, const double[:, ::1] L not None,
                               double[:, :, ::1] H not None, double[:, ::1] W,
                               bint radial=False, double eps=1e-7):
        """Forward differences in q of the constraint-only terms of the Newton
        matrices, one Phi_q (and with ``v`` one nu) per column, steps ``eps (1 + |q_j|)``:
        ``H[k] = d(P^T L[k])/dq`` (n x n) for the multipliers ``L`` (K x m) of the kept
        rows, and with ``v`` ``W = d(Phi_q v - nu)/dq`` (m x n).  P = Phi_q, or with
        ``radial`` the true gradient (:meth:`true_rows`: the radial terms
        ``p_b (a_b . l)`` on the p columns, differenced too).  Dense Jacobians.  NumPy
        reference: ``mbplugins.formulations.dae_common.constraint_fd``.  Leaves the
        stages (``jdata``, the radial coefficients) at q; raises on a failing
        element."""
        cdef Py_ssize_t n = self.n, m = self.m, mf = self.m_full, K = L.shape[0]
        cdef Py_ssize_t i, j, k, c, r, b, kk
        cdef double d, qj, li
        cdef bint with_v = v is not None
        cdef const double* J = &self.jdata[0]
        cdef double* qx = self.ev.qx
        if self.sparse:
            raise ValueError("constraint_differences: a dense Jacobian is needed")
        if q.shape[0] < n or L.shape[1] != m or K > 2 or H.shape[0] < K \
                or H.shape[1] != n or H.shape[2] != n or (with_v and (
                    v.shape[0] < n or W is None or W.shape[0] != m or W.shape[1] != n)):
            raise ValueError(f"constraint_differences: q, v need {n} entries, L the shape "
                             f"(K <= 2, {m}), H (K, {n}, {n}) and W ({m}, {n})")
        if radial and not self.nsp:
            radial = False
        if self.nf and self.fn.run(t, self.fvp, &self.err) != 0:
            raise FloatingPointError("a time function failed")
        if with_v:
            memcpy(self.ev.qdx, &v[0], n * sizeof(double))
        base = np.zeros((K + (1 if with_v else 0), max(n, m)))
        cdef double[:, ::1] b0 = base
        cdef double* g = &self.gbuf[0]
        # columns 0..n: the reference values at q (jj = -1), then each perturbed q_j
        for j in range(-1, n):
            memcpy(qx, &q[0], n * sizeof(double))
            d = 0.0
            if j >= 0:
                qj = q[j]
                d = eps * (1.0 + fabs(qj))
                qx[j] = qj + d
            if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0 \
                    or (with_v and self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0) \
                    or (radial and self._radial(t, qx)):
                memcpy(qx, &q[0], n * sizeof(double))
                raise FloatingPointError("a constraint evaluation failed")
            for k in range(K):
                for c in range(n):
                    g[c] = 0.0
                for i in range(m):
                    r = self.rows[i]
                    li = L[k, i]
                    if li != 0.0:
                        for c in range(n):
                            g[c] += J[r * n + c] * li
                if radial:
                    for b in range(self.nsp):
                        li = 0.0
                        for i in range(m):
                            li = li + self.rad[b * mf + self.rows[i]] * L[k, i]
                        for kk in range(4):
                            c = self.sp_pidx[b, kk]
                            g[c] += qx[c] * li
                if j < 0:
                    for c in range(n):
                        b0[k, c] = g[c]
                else:
                    for c in range(n):
                        H[k, c, j] = (g[c] - b0[k, c]) / d
            if with_v:
                for i in range(m):
                    r = self.rows[i]
                    li = 0.0
                    for c in range(n):
                        li = li + J[r * n + c] * v[c]
                    li = li - self.nu[r]
                    if j < 0:
                        b0[K, i] = li
                    else:
                        W[i, j] = (li - b0[K, i]) / d
        memcpy(qx, &q[0], n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0 \
                or (radial and self._radial(t, qx)):
            raise FloatingPointError("a constraint evaluation failed")
        return 0

    def velocity_columns(self, const double[::1] q not None, const double[::1] v not None,
                         const double[::1] a not None, double[:, ::1] X not None):
        """Spatial bodies, in place: ``X <- (M + alpha p p^T)^-1 (X - [Dq, Dv, 0])``,
        X (n x k, k >= 2n) holding ``[dF/dq, dF/dv, P^T]``: the velocity rows of the
        Newton matrix (da/dq, da/dv, da/dlam) of the accelerations ``a`` at (q, v), with
        the derivatives of the inertial terms on the p rows and columns of every body
        (``L_k = L(e_k)``, Nikravesh (1988), Eqs. 6.39, 11.22-11.32)::

            Dq[:, k] = 4 L_k^T J' L(p) a - 4 L(p)^T J' L(a) e_k - 8 L(v)^T J' L(v) e_k
                       + alpha (e_k (p.a + v.v) + p a_k)
            Dv[:, k] = 8 L_k^T J' L(p) v + 8 L(v)^T J' L(p) e_k + 2 alpha p v_k

        and the regular mass solve ``E D E^T`` per body (mbcore.system.mass).  NumPy
        reference: ``mbplugins.formulations.velocity_jacobian.velocity_blocks``."""
        cdef Py_ssize_t n = self.n, k = X.shape[1], b, i, j, l, c, r
        cdef double p[4]
        cdef double pd[4]
        cdef double pa[4]
        cdef double x[4]
        cdef double Lp[12]
        cdef double Ld[12]
        cdef double La[12]
        cdef double Lk[48]
        cdef double JLp[12]
        cdef double JLa[12]
        cdef double JLd[12]
        cdef double wa[3]
        cdef double wd[3]
        cdef double Dq[16]
        cdef double Dv[16]
        cdef double s2, al, dots, acc
        cdef double* E
        cdef const double* Jm
        cdef const double* V
        cdef const idx_t* idx
        if q.shape[0] < n or v.shape[0] < n or a.shape[0] < n or X.shape[0] != n \
                or k < 2 * n:
            raise ValueError(f"velocity_columns: q, v, a need {n} entries and X the "
                             f"shape ({n}, >= {2 * n})")
        for i in range(4):
            for j in range(4):
                x[j] = 1.0 if i == j else 0.0
            _Lmat(x, &Lk[12 * i])
        for b in range(self.nsp):
            idx = &self.sp_pidx[b, 0]
            for j in range(4):
                p[j] = q[idx[j]]
                pd[j] = v[idx[j]]
                pa[j] = a[idx[j]]
            _Lmat(p, Lp)
            _Lmat(pd, Ld)
            _Lmat(pa, La)
            Jm = &self.sp_J[b, 0, 0]
            V = &self.sp_V[b, 0, 0]
            al = self.sp_alpha[b]
            for j in range(3):                  # J' L(p), J' L(a), J' L(v)
                for l in range(4):
                    JLp[4 * j + l] = (Jm[3 * j] * Lp[l] + Jm[3 * j + 1] * Lp[4 + l]
                                      + Jm[3 * j + 2] * Lp[8 + l])
                    JLa[4 * j + l] = (Jm[3 * j] * La[l] + Jm[3 * j + 1] * La[4 + l]
                                      + Jm[3 * j + 2] * La[8 + l])
                    JLd[4 * j + l] = (Jm[3 * j] * Ld[l] + Jm[3 * j + 1] * Ld[4 + l]
                                      + Jm[3 * j + 2] * Ld[8 + l])
            for j in range(3):
                wa[j] = 0.0
                wd[j] = 0.0
                for l in range(4):
                    wa[j] += JLp[4 * j + l] * pa[l]
                    wd[j] += JLp[4 * j + l] * pd[l]
            dots = 0.0
            for j in range(4):
                dots += p[j] * pa[j] + pd[j] * pd[j]
            for i in range(4):
                for c in range(4):
                    acc = 0.0                   # L_c^T w (column c)
                    for j in range(3):
                        acc += Lk[12 * c + 4 * j + i] * wa[j]
                    Dq[4 * i + c] = 4.0 * acc
                    acc = 0.0
                    for j in range(3):
                        acc += Lk[12 * c + 4 * j + i] * wd[j]
                    Dv[4 * i + c] = 8.0 * acc
                    acc = 0.0
                    for j in range(3):
                        acc += Lp[4 * j + i] * JLa[4 * j + c]
                    Dq[4 * i + c] -= 4.0 * acc
                    acc = 0.0
                    for j in range(3):
                        acc += Ld[4 * j + i] * JLd[4 * j + c]
                    Dq[4 * i + c] -= 8.0 * acc
                    Dq[4 * i + c] += al * p[i] * pa[c]
                    acc = 0.0
                    for j in range(3):
                        acc += Ld[4 * j + i] * JLp[4 * j + c]
                    Dv[4 * i + c] += 8.0 * acc + 2.0 * al * p[i] * pd[c]
                Dq[5 * i] += al * dots
            for i in range(4):
                for c in range(4):
                    X[idx[i], idx[c]] -= Dq[4 * i + c]
                    X[idx[i], n + idx[c]] -= Dv[4 * i + c]
            # E = [L(p)^T V, p] and D of the regular mass solve
            s2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]
            s2 = s2 * s2
            E = &self.sp_E[b, 0]
            for j in range(4):
                for l in range(3):
                    acc = 0.0
                    for i in range(3):
                        acc += Lp[4 * i + j] * V[3 * i + l]
                    E[4 * j + l] = acc
                E[4 * j + 3] = p[j]
            for l in range(3):
                self.minv[idx[l]] = 1.0 / (4.0 * s2 * self.sp_lam[b, l])
            self.minv[idx[3]] = 1.0 / (al * s2)
        cdef double* keep = &self.gbuf[0]       # 1: a row of 1/m (not a p row)
        for r in range(n):
            keep[r] = 1.0
        for b in range(self.nsp):
            for j in range(4):
                keep[self.sp_pidx[b, j]] = 0.0
        for r in range(n):                      # the translations
            if keep[r] != 0.0:
                for c in range(k):
                    X[r, c] *= self.minv[r]
        for b in range(self.nsp):               # E D E^T on the p rows
            idx = &self.sp_pidx[b, 0]
            E = &self.sp_E[b, 0]
            for c in range(k):
                for l in range(4):
                    acc = 0.0
                    for j in range(4):
                        acc += E[4 * j + l] * X[idx[j], c]
                    x[l] = acc * self.minv[idx[l]]
                for j in range(4):
                    acc = 0.0
                    for l in range(4):
                        acc += E[4 * j + l] * x[l]
                    X[idx[j], c] = acc
        return 0

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

    (mass ``diag(1, M, 0, 1)``: bdf's ``mass`` option).  With ``spatial`` (dense
    Jacobians) the velocity rows are ``M^-1 (Q + P^T lam)`` of the regular Formulation I
    (mass ``diag(1, 1, 0, 1)``) with P the true derivative of Phi (:meth:`true_rows`;
    the projected Phi_q stalls the index-3 iteration), and :meth:`lam_columns` gives the
    Newton hook ``M^-1 P^T``.  The stages (time functions, Phi_q, Phi, forces) and
    ``eval`` / ``work_row`` / ``timeit`` are CompiledGGL's; ``size`` = 2n + m + 1."""

    def __cinit__(self, *args, **kwargs):
        # CompiledGGL.__cinit__ (run first, same arguments) checked the sizes
        self.size = 2 * self.n + self.m + 1
        self.yp = np.zeros(self.size)
        self.fb = np.zeros(self.size)
        if self.nsp and self.sparse:
            raise ValueError("CompiledStiff: spatial bodies need a dense Jacobian")

    # the Newton blocks of generalized-α (enable_newton_blocks / newton_blocks)
    cdef ForceJacobianEvaluator nb_fj
    cdef idx_t[::1] nb_pos
    cdef double[::1] nb_Kb, nb_Cb, nb_C, nb_P, nb_zero
    cdef object nb_X_arr
    cdef double[:, ::1] nb_X
    cdef readonly bint newton_blocks_ready

    def enable_newton_blocks(self, ForceJacobianEvaluator force_jacobians, idx_t[::1] pos):
        """Give :meth:`newton_blocks` the System's compiled force-Jacobian kernels
        (``force_jacobians``: None without force elements; ``pos``: each block entry's
        row-major index in the n x n C = dQ/dqd, -1 dropped: the System's
        ``force_jacobian_kernels``).  Its work arrays are allocated here, once."""
        cdef Py_ssize_t n = self.n, m = self.m
        cdef Py_ssize_t size = 0 if force_jacobians is None else force_jacobians.size
        if (force_jacobians is None) != (self.fe is None) or (
                force_jacobians is not None and force_jacobians.n != n):
            raise ValueError("CompiledStiff.enable_newton_blocks: the force Jacobians "
                             "belong to another system")
        if pos.shape[0] != size or (size and (np.max(pos) >= n * n or np.min(pos) < -1)):
            raise ValueError("CompiledStiff.enable_newton_blocks: the scatter map does "
                             "not match")
        self.nb_fj = force_jacobians
        self.nb_pos = np.array(pos, dtype=np.intp) if size else np.full(1, -1, dtype=np.intp)
        self.nb_Kb = np.zeros(max(size, 1))
        self.nb_Cb = np.zeros(max(size, 1))
        self.nb_C = np.zeros(n * n)
        self.nb_P = np.zeros(max(m * n, 1))
        self.nb_zero = np.zeros(n)
        self.nb_X_arr = np.zeros((n, 2 * n + m))
        self.nb_X = self.nb_X_arr
        self.newton_blocks_ready = True

    def newton_blocks(self, double t, const double[::1] y not None, double[:, :] J not None):
        """Generalized-α's ``jacobian_update(t, y, J)`` of the stiff form in one C call:
        the blocks ``df_s/ds``, ``df_s/dlam`` and the constraint rows of ``J`` (at least
        2n + m square, any strides) in place at ``y`` -- planar ``C``, ``Phi_q^T``,
        ``Phi_q``; spatial ``M^-1 (C - Dv)``, ``M^-1 P^T``, ``P`` (:meth:`true_rows`,
        :meth:`velocity_columns`), C = dQ/dqd of the compiled force-Jacobian kernels
        scattered in the order of ``mbcore.System.force_jacobians``.  NumPy reference,
        the same formulas in the same order (equal bit for bit):
        ``mbplugins.formulations.stiff.Stiff.update_newton_blocks``.  Raises
        FloatingPointError where an element fails (the loop then hands the step to the
        Python driver)."""
        cdef Py_ssize_t n = self.n, m = self.m, L = 2 * n + m, i, j, k, r, p
        cdef Py_ssize_t mf = self.m_full, b
        cdef double* C
        cdef double* P
        cdef const idx_t* idx
        if not self.newton_blocks_ready:
            raise ValueError("CompiledStiff.newton_blocks: call enable_newton_blocks first")
        if y.shape[0] < L or J.shape[0] < L or J.shape[1] < L:
            raise ValueError(f"newton_blocks: y needs {L} entries and J {L} x {L}")
        cdef const double* q = &y[0]
        cdef const double* v = &y[n]
        self._rows_at(t, y[:n])          # time functions, Phi_q, radial coefficients
        C = &self.nb_C[0]
        P = &self.nb_P[0]
        for i in range(n * n):
            C[i] = 0.0
        if self.nb_fj is not None:
            if self.nb_fj.c_jacobians(q, v, t, self.fvp, &self.nb_Kb[0],
                                      &self.nb_Cb[0]) >= 0:
                raise FloatingPointError("a force Jacobian failed")
            for k in range(self.nb_fj.size):
                p = self.nb_pos[k]
                if p >= 0:
                    C[p] += self.nb_Cb[k]
        for i in range(m * n):
            P[i] = 0.0
        for i in range(m):
            r = self.rows[i]
            if self.sparse:
                for p in range(self.indptr[r], self.indptr[r + 1]):
                    P[i * n + self.indices[p]] += self.jdata[p]
            else:
                for j in range(n):
                    P[i * n + j] = self.jdata[r * n + j]
        for b in range(self.nsp):        # the true gradient (true_rows)
            idx = &self.sp_pidx[b, 0]
            for i in range(m):
                for k in range(4):
                    P[i * n + idx[k]] += self.rad[b * mf + self.rows[i]] * q[idx[k]]
        cdef double[:, ::1] X = self.nb_X
        if self.nsp:
            for i in range(n):
                for j in range(n):
                    X[i, j] = 0.0
                    X[i, n + j] = C[i * n + j]
                for r in range(m):
                    X[i, 2 * n + r] = P[r * n + i]
            self.velocity_columns(y[:n], y[n:2 * n], self.nb_zero, X)
            for i in range(n):
                for j in range(n + m):
                    J[n + i, n + j] = X[i, n + j]
        else:
            for i in range(n):
                for j in range(n):
                    J[n + i, n + j] = C[i * n + j]
                for r in range(m):
                    J[n + i, 2 * n + r] = P[r * n + i]
        for r in range(m):
            for j in range(n):
                J[2 * n + r, j] = P[r * n + j]
        return None

    def lam_columns(self, const double[::1] q not None, const double[::1] v not None,
                    const double[:, ::1] P not None):
        """``(M + alpha p p^T)^-1 P^T``, (n, m): the lam columns of the velocity rows
        of spatial bodies (NumPy reference ``mbplugins.formulations.stiff._lam_columns``:
        the mass solve of each row minus that of zero)."""
        cdef Py_ssize_t n = self.n, m = self.m, i, j
        if q.shape[0] < n or v.shape[0] < n or P.shape[0] != m or P.shape[1] != n:
            raise ValueError(f"lam_columns: q, v need {n} entries and P the shape ({m}, {n})")
        out = np.zeros((n, m))
        cdef double[:, ::1] o = out
        cdef double* z = &self.zbuf[0]
        cdef double* c = &self.fb[0]
        for j in range(n):
            z[j] = 0.0
        self._mass_solve(&q[0], &v[0], z)
        for i in range(m):
            for j in range(n):
                c[j] = P[i, j]
            self._mass_solve(&q[0], &v[0], c)
            for j in range(n):
                o[j, i] = c[j] - z[j]
        return out

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
        cdef Py_ssize_t b, k, r, mf = self.m_full
        cdef int status = self._stage(t, q, v, False, &P)
        if status:
            return status
        for j in range(n):
            ydot[j] = v[j]
            ydot[n + j] = Q[j]
        for i in range(m):
            r = self.rows[i]
            li = lam[i]
            jv = 0.0
            if self.sparse:
                for p in range(self.indptr[r], self.indptr[r + 1]):
                    j = self.indices[p]
                    a = J[p]
                    ydot[n + j] += a * li         # Phi_q^T lam
                    jv += a * v[j]
            else:
                Ji = J + r * n
                for j in range(n):
                    ydot[n + j] += Ji[j] * li
                    jv += Ji[j] * v[j]
            ydot[2 * n + i] = phi[r]
            P += li * jv                          # W' = P_nc + lam . (Phi_q s)
        if self.nsp:
            # the true gradient's reactions p_b (a_b . lam) on the p columns, then
            # M^-1 (the NumPy reference: _phi_rows in Stiff.rhs)
            status = self._radial(t, q)
            if status:
                self.status = status
                return status
            for b in range(self.nsp):
                a = 0.0
                for i in range(m):
                    a = a + self.rad[b * mf + self.rows[i]] * lam[i]
                for k in range(4):
                    j = self.sp_pidx[b, k]
                    ydot[n + j] += q[j] * a
            self._mass_solve(q, v, ydot + n)
        ydot[2 * n + m] = P
        self.power = P
        return self._finish(ydot, 2 * n + m + 1)
