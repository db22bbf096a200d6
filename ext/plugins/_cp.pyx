# cython: language_level=3
"""Coordinate partitioning in C (``mbcore._ext._cp``): the right-hand side of the CP
formulation (Nikravesh (1988), §13.3.2–13.3.3, CP-2) for the compiled integration loop.

:class:`CompiledCP` evaluates, in one C call and without allocation, for ``y = [v;
vd; W]`` (the independent coordinates and their rates, and the work channel):

1. Newton-Raphson on ``Phi(u, v, t) = 0`` for the dependent coordinates u from the
   last converged configuration moved by the first-order predictor ``Phi_u du =
   -Phi_v dv`` (its Jacobian and LU; LU of ``Phi_u`` by LAPACK ``dgetrf``, as
   ``scipy.linalg.lu_factor`` does);
2. the pivot quality of ``Phi_u`` at the converged point (column-scaled, relative to
   the largest scaled Jacobian entry) — a failure status when it has degraded, so
   that the Python path raises the re-partition request;
3. ``Phi_u ud = nu - Phi_v vd``;
4. the accelerations and multipliers of DI by the dense Schur complement (diagonal
   mass matrix) and ``W' = P_nc + lam . (Phi_q qd)``.

``rows``: the constraint rows the partition keeps (the independent ones of a
redundant set, Nikravesh (1988), App. C; default all): Phi, Phi_q, nu and gamma are
evaluated whole and only those rows used, so Phi_u is square and the multipliers are
those of the kept rows (the removed ones carry none).

NumPy reference: ``mbplugins.formulations.partitioning.CP.split`` / ``rhs`` (+ the
dynamic analysis' work rate; with ``rows``, on ``mbplugins.formulations.rows.RowSubset``
and the acceleration solver's rows); tests keep them equal to 1e-12.  Models of compiled
elements with a dense Jacobian: planar, or spatial (``spatial``: the System's
``mbcore.system.mass.SpatialMass``; the accelerations in its transformed columns, the
shared kernel of ext/_spatial_mass.pxi); anything else keeps the Python path.
"""
from libc.math cimport fabs, isfinite, sqrt, INFINITY
from libc.string cimport memcpy

include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo

import numpy as np

#: Newton aims at this fraction of its tolerance (partitioning.POLISH)
cdef double POLISH = 1e-2

include "_schur.pxi"
include "_bounds.pxi"

ctypedef Py_ssize_t idx_t

include "_eval_status.pxi"
include "_spatial_mass.pxi"


cdef class CompiledCP(CompiledODE):
    """``CompiledCP(evaluator, force_evaluator, functions, n, m, jdata, qgrav, minv,
    col_scale, tol, factor, spatial=None, rows=None)``; then :meth:`set_partition`
    before use.  ``jdata`` is the System's Jacobian buffer (dense row-major m*n, then
    the ground slots).  ``rows``: the distinct constraint rows kept (default all);
    the attribute ``m`` is their number, ``m_full`` the System's.
    Refused at construction (ValueError naming the argument): evaluators of
    another system, an evaluator writing more than m rows or more Jacobian entries
    than jdata holds, evaluators reading more time functions than ``functions``
    has, rows not distinct rows of the System, not 0 < (kept rows) < n, qgrav / minv / col_scale not n entries, minv not finite and >=
    0, col_scale not positive and finite, tol / factor not positive and finite."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t nq, m, m_full, nf
    cdef idx_t[::1] u, v
    # the kept constraint rows (rows[i] of the System's m_full) and whether they are
    # a proper subset (then phi/nu/gam/J are gathered from the full evaluations)
    cdef idx_t[::1] rows
    cdef readonly bint subset
    cdef double[::1] phif, nuf, gamf, jk, jhk
    cdef double[::1] fv, jdata, qgrav, minv, col_scale, phi, nu, gam, Q, C, B, lam
    cdef double[::1] Ju, rhs, qdd, Jv
    cdef public double[::1] q, qd
    cdef int[::1] ipiv
    cdef double* fvp
    cdef public double tol, factor, best_ratio, t_singular
    cdef readonly double ratio, power
    cdef readonly int iterations
    cdef readonly bint have_prev            # J and the LU of Phi_u at the last q
    cdef ErrInfo err
    # the warm start kept by c_save (checkpoints): q, Phi_v, the LU of Phi_u, have_prev
    cdef double[::1] s_q, s_Jv, s_Ju
    cdef int[::1] s_ipiv
    cdef bint s_have_prev, s_valid
    # spatial bodies: the accelerations in the transformed columns of
    # mbcore.system.mass (own copies of its blocks; minv's p entries <- D)
    cdef readonly Py_ssize_t nsp
    cdef idx_t[:, ::1] sp_pidx, sp_pos
    cdef idx_t[::1] sp_bod
    cdef double[:, :, ::1] sp_J, sp_V
    cdef double[:, ::1] sp_lam, sp_E
    cdef double[::1] sp_alpha, jhat

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  double[::1] minv not None, double[::1] col_scale not None,
                  double tol, double factor, spatial=None, rows=None):
        cdef Py_ssize_t mf = m
        r = _kept_rows(rows, mf, "CompiledCP")
        m = r.shape[0]
        if not 0 < m < n:
            raise ValueError(f"CompiledCP: needs 0 < m < n, got m = {m}, n = {n}")
        _need("CompiledCP: jdata", jdata.shape[0], mf * n)
        _check_evaluators("CompiledCP", evaluator, force_evaluator, functions, n, mf,
                          jdata.shape[0])
        _size("CompiledCP: qgrav", qgrav.shape[0], n)
        _size("CompiledCP: minv", minv.shape[0], n)
        _size("CompiledCP: col_scale", col_scale.shape[0], n)
        if not bool(np.all(np.asarray(minv) >= 0.0)) or not bool(np.all(np.isfinite(minv))):
            raise ValueError("CompiledCP: minv must be finite and >= 0")
        if not bool(np.all(np.asarray(col_scale) > 0.0)) \
                or not bool(np.all(np.isfinite(col_scale))):
            raise ValueError("CompiledCP: col_scale must be positive and finite")
        _positive("CompiledCP: tol", tol)
        _positive("CompiledCP: factor", factor)
        self.ev, self.fe, self.fn = evaluator, force_evaluator, functions
        self.nq, self.m, self.m_full = n, m, mf
        self.rows = r
        self.subset = m < mf
        self.phif = np.zeros(mf) if self.subset else np.zeros(1)
        self.nuf = np.zeros(mf) if self.subset else np.zeros(1)
        self.gamf = np.zeros(mf) if self.subset else np.zeros(1)
        self.jk = np.zeros(m * n) if self.subset else np.zeros(1)
        self.jhk = np.zeros(1)
        self.n = n - m                      # y = [v (k); vd (k); W]
        self.cartesian = False
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata, self.qgrav, self.minv = jdata, qgrav, minv
        self.col_scale = np.array(col_scale, dtype=np.float64)
        self.tol, self.factor = tol, factor
        self.best_ratio = 0.0
        self.t_singular = np.inf
        self.phi = np.zeros(m)
        self.nu = np.zeros(m)
        self.gam = np.zeros(m)
        self.lam = np.zeros(m)
        self.rhs = np.zeros(m)
        self.Q = np.zeros(n)
        self.qdd = np.zeros(n)
        self.C = np.zeros(m * n)
        self.B = np.zeros(m * m)
        self.Ju = np.zeros(m * m)
        self.Jv = np.zeros(m * (n - m))       # Phi_v at the last converged point
        self.ipiv = np.zeros(m, dtype=np.intc)
        self.q = np.zeros(n)
        self.qd = np.zeros(n)
        self.u = np.zeros(m, dtype=np.intp)
        self.v = np.zeros(n - m, dtype=np.intp)
        self.s_q = np.zeros(n)
        self.s_Jv = np.zeros(m * (n - m))
        self.s_Ju = np.zeros(m * m)
        self.s_ipiv = np.zeros(m, dtype=np.intc)
        self.s_have_prev = False
        self.s_valid = False
        self.nfev = 0
        self.status = 0
        self.nsp = 0
        self.jhat = np.zeros(1)
        if spatial is not None:
            (self.nsp, self.sp_pidx, self.sp_pos, self.sp_bod, self.sp_J, self.sp_V,
             self.sp_lam, self.sp_alpha, self.sp_E, self.minv) = spatial_blocks(
                spatial, n, jdata.shape[0], "CompiledCP")
            self.jhat = np.zeros(jdata.shape[0])
            if self.subset:
                self.jhk = np.zeros(m * n)

    def set_partition(self, idx_t[::1] u not None, idx_t[::1] v not None,
                      double best_ratio, const double[::1] q not None):
        """Dependent / independent coordinate indices, the pivot quality of the fresh
        partition and the configuration Newton starts from (u and v together: each
        coordinate once; best_ratio finite and >= 0)."""
        cdef Py_ssize_t i
        if u.shape[0] != self.m or v.shape[0] != self.n or q.shape[0] != self.nq:
            raise ValueError(f"CompiledCP.set_partition: sizes do not match: u has "
                             f"{u.shape[0]} entries (m = {self.m}), v {v.shape[0]} "
                             f"(n - m = {self.n}), q {q.shape[0]} (n = {self.nq})")
        _in_range("CompiledCP.set_partition: best_ratio", best_ratio, 0.0, 1e300)
        seen = np.zeros(self.nq, dtype=bool)
        for i in range(self.m):
            if not 0 <= u[i] < self.nq or seen[u[i]]:
                raise ValueError("CompiledCP.set_partition: bad dependent index")
            seen[u[i]] = True
        for i in range(self.n):
            if not 0 <= v[i] < self.nq or seen[v[i]]:
                raise ValueError("CompiledCP.set_partition: bad independent index")
            seen[v[i]] = True
        self.u[:] = u
        self.v[:] = v
        self.best_ratio = best_ratio
        self.q[:] = q
        self.have_prev = False

    # ------------------------------------------------------------------ warm start
    cdef void c_save(self) noexcept nogil:
        """Keep Newton's warm start (q, and Phi_v with the LU of Phi_u of the
        predictor) for :meth:`saved_state`."""
        memcpy(&self.s_q[0], &self.q[0], self.nq * sizeof(double))
        memcpy(&self.s_Jv[0], &self.Jv[0], self.m * self.n * sizeof(double))
        memcpy(&self.s_Ju[0], &self.Ju[0], self.m * self.m * sizeof(double))
        memcpy(&self.s_ipiv[0], &self.ipiv[0], self.m * sizeof(int))
        self.s_have_prev = self.have_prev
        self.s_valid = True

    def saved_state(self):
        """The warm start kept by the last ``c_save`` (copies), or None."""
        if not self.s_valid:
            return None
        return {"q": np.array(self.s_q), "Jv": np.array(self.s_Jv),
                "Ju": np.array(self.s_Ju), "ipiv": np.array(self.s_ipiv),
                "have_prev": bool(self.s_have_prev)}

    def warm_state(self):
        """The warm start the next evaluation uses (copies)."""
        return {"q": np.array(self.q), "Jv": np.array(self.Jv), "Ju": np.array(self.Ju),
                "ipiv": np.array(self.ipiv), "have_prev": bool(self.have_prev)}

    def load_state(self, state):
        """Continue from a warm start of :meth:`saved_state` / :meth:`warm_state`
        (ValueError naming the array of a wrong size)."""
        if not state:
            return
        for key, buf in (("q", self.q), ("Jv", self.Jv), ("Ju", self.Ju)):
            a = np.asarray(state[key], dtype=np.float64)
            if a.shape != (buf.shape[0],):
                raise ValueError(f"CompiledCP.load_state: {key} has shape {a.shape}, "
                                 f"expected ({buf.shape[0]},)")
            np.asarray(buf)[:] = a
        piv = np.asarray(state["ipiv"])
        if piv.shape != (self.m,):
            raise ValueError(f"CompiledCP.load_state: ipiv has shape {piv.shape}, "
                             f"expected ({self.m},)")
        np.asarray(self.ipiv)[:] = piv.astype(np.intc)
        self.have_prev = bool(state["have_prev"])

    def amplification(self):
        """``max_ij |(Phi_u^-1 Phi_v)_ij| s_vj / s_ui`` at the last converged
        configuration (its LU of Phi_u and its Phi_v; s: the column scales), the
        re-partition measure of ``mbplugins.formulations.partitioning.amplification``
        (its NumPy reference); -1 when no evaluation has converged since the
        partition was set."""
        cdef Py_ssize_t i, j, m = self.m, k = self.n
        cdef double a = 0.0, d
        if not self.have_prev:
            return -1.0
        for j in range(k):
            for i in range(m):
                self.rhs[i] = self.Jv[i * k + j]
            self._lu_solve(&self.rhs[0])
            for i in range(m):
                d = fabs(self.rhs[i]) * (self.col_scale[self.v[j]]
                                         / self.col_scale[self.u[i]])
                if not d <= a:                 # NaN propagates
                    a = d
        return a if isfinite(a) else np.inf

    # ------------------------------------------------------------------ C level
    cdef double* _kept(self, double* full, double* kept, Py_ssize_t width) noexcept nogil:
        """The kept rows of the row-major ``full`` (m_full x width): ``full`` itself
        when every row is kept, else gathered into ``kept`` (m x width)."""
        cdef Py_ssize_t i
        if not self.subset:
            return full
        for i in range(self.m):
            memcpy(kept + i * width, full + self.rows[i] * width, width * sizeof(double))
        return kept

    cdef int _lu(self, const double* J) noexcept nogil:
        """Ju (column-major) = J[:, u]; dgetrf.  Returns LAPACK's info."""
        cdef Py_ssize_t i, j, n = self.nq, m = self.m
        cdef int mm = <int> m, info = 0
        for j in range(m):
            for i in range(m):
                self.Ju[i + j * m] = J[i * n + self.u[j]]
        dgetrf(&mm, &mm, &self.Ju[0], &mm, &self.ipiv[0], &info)
        return info

    cdef void _lu_solve(self, double* b) noexcept nogil:
        cdef int mm = <int> self.m, nrhs = 1, info = 0
        cdef char tr = b'N'
        dgetrs(&tr, &mm, &nrhs, &self.Ju[0], &mm, &self.ipiv[0], b, &mm, &info)

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        cdef Py_ssize_t n = self.nq, m = self.m, k = self.n, i, j, it
        cdef double* q = &self.q[0]
        cdef double* qd = &self.qd[0]
        cdef double* J = &self.jdata[0]
        cdef double* Jh
        cdef double* phi = &self.phi[0]
        cdef double* phif = &self.phif[0] if self.subset else phi
        cdef double* gam = &self.gam[0]
        cdef double* rhs = &self.rhs[0]
        cdef double scale = 0.0, pmax, big, dmin, d, acc, P = 0.0, prev = INFINITY
        self.nfev += 1
        if t >= self.t_singular:
            self.status = SINGULAR_AHEAD
            return SINGULAR_AHEAD
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        if self.have_prev:
            # first-order predictor of u from the last converged point (its J and LU):
            # Phi_u du = -Phi_v dv
            for i in range(m):
                acc = 0.0
                for j in range(k):
                    acc -= self.Jv[i * k + j] * (y[j] - q[self.v[j]])
                self.rhs[i] = acc
            self._lu_solve(&self.rhs[0])
            for i in range(m):
                q[self.u[i]] += self.rhs[i]
        self.have_prev = False
        for i in range(k):
            q[self.v[i]] = y[i]
        for i in range(n):
            if fabs(q[i]) > scale:
                scale = fabs(q[i])
        scale = 1.0 + scale
        # ---- Newton on Phi(u, v) = 0 (CP.split)
        it = 0
        while True:
            memcpy(self.ev.qx, q, n * sizeof(double))
            if self.ev.c_phi(t, self.fvp, phif) >= 0:
                self.status = CONSTRAINT_FAILED
                return CONSTRAINT_FAILED
            self._kept(phif, phi, 1)
            pmax = 0.0
            for i in range(m):
                if not fabs(phi[i]) <= pmax:       # NaN propagates
                    pmax = fabs(phi[i])
            # converged: POLISH times within the tolerance, or within it where the
            # iteration stalls at round-off (CP.split)
            if pmax <= self.tol * scale and (pmax <= POLISH * self.tol * scale
                                             or pmax > 0.5 * prev or it == 12):
                break
            if it == 12 or not isfinite(pmax):
                self.status = NEWTON_FAILED
                return NEWTON_FAILED
            prev = pmax
            if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0:
                self.status = CONSTRAINT_FAILED
                return CONSTRAINT_FAILED
            J = self._kept(&self.jdata[0], &self.jk[0], n)
            if self._lu(J) != 0:
                self.status = NEWTON_FAILED
                return NEWTON_FAILED
            self._lu_solve(phi)
            for i in range(m):
                q[self.u[i]] -= phi[i]
                if not isfinite(q[self.u[i]]):
                    self.status = NEWTON_FAILED
                    return NEWTON_FAILED
            it += 1
        self.iterations = it
        # ---- the Jacobian at the converged point, its Phi_u and the pivot quality
        if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        J = self._kept(&self.jdata[0], &self.jk[0], n)
        if self._lu(J) != 0:
            self.status = PARTITION_DEGRADED
            return PARTITION_DEGRADED
        big = 0.0
        for i in range(m):
            for j in range(n):
                d = fabs(J[i * n + j]) / self.col_scale[j]
                if d > big:
                    big = d
        dmin = 1e308
        for j in range(m):
            d = fabs(self.Ju[j + j * m]) / self.col_scale[self.u[j]]
            if d < dmin:
                dmin = d
        self.ratio = dmin / big if big > 0.0 else 0.0
        if self.ratio * self.factor < self.best_ratio * 1e-2 or self.ratio < 1e-12:
            self.status = PARTITION_DEGRADED
            return PARTITION_DEGRADED
        for i in range(m):               # Phi_v and the LU at the converged q: the
            for j in range(k):           # predictor of the next evaluation
                self.Jv[i * k + j] = J[i * n + self.v[j]]
        self.have_prev = True
        # ---- velocities: Phi_u ud = nu - Phi_v vd
        for i in range(k):
            qd[self.v[i]] = y[k + i]
        if self.ev.c_nu(t, self.fvp, &self.nuf[0] if self.subset else rhs) >= 0:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        self._kept(&self.nuf[0], rhs, 1)
        for i in range(m):
            acc = self.rhs[i]
            for j in range(k):
                acc -= J[i * n + self.v[j]] * qd[self.v[j]]
            self.rhs[i] = acc
        self._lu_solve(&self.rhs[0])
        for i in range(m):
            qd[self.u[i]] = self.rhs[i]
        # ---- accelerations (DI, dense Schur complement)
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        if self.ev.c_gamma(t, self.fvp, &self.gamf[0] if self.subset else gam) >= 0:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        self._kept(&self.gamf[0], gam, 1)
        memcpy(&self.Q[0], &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, qd, t, self.fvp, &self.Q[0], &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        Jh = J
        if self.nsp:                     # transformed columns: Q^, J^, M^-1 = T D T^T
            _spatial_forward(self.nsp, &self.sp_pidx[0, 0], &self.sp_J[0, 0, 0],
                             &self.sp_V[0, 0, 0], &self.sp_lam[0, 0], &self.sp_alpha[0],
                             &self.sp_E[0, 0], &self.minv[0], q, qd, &self.Q[0])
            # (the transform of the whole Jacobian buffer: sp_pos are its positions)
            _spatial_jacobian(self.sp_pos.shape[0], &self.sp_pos[0, 0], &self.sp_bod[0],
                              &self.sp_E[0, 0], &self.jdata[0], &self.jhat[0],
                              self.jhat.shape[0])
            Jh = self._kept(&self.jhat[0], &self.jhk[0], n)
        if dense_schur(n, m, Jh, &self.minv[0], &self.Q[0], gam, &self.C[0],
                       &self.B[0], &self.qdd[0], &self.lam[0]):
            self.status = SINGULAR
            return SINGULAR
        if self.nsp:
            _spatial_back(self.nsp, &self.sp_pidx[0, 0], &self.sp_E[0, 0], &self.qdd[0])
        for i in range(m):
            acc = 0.0
            for j in range(n):
                acc += J[i * n + j] * qd[j]
            P += self.lam[i] * acc
        for i in range(k):
            ydot[i] = y[k + i]
            ydot[k + i] = self.qdd[self.v[i]]
            if not isfinite(ydot[k + i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[2 * k] = P
        self.power = P
        self.status = OK
        return OK

    # ------------------------------------------------------------------ Python level
    def eval(self, double t, const double[::1] y not None, double[::1] ydot not None):
        """ydot[:2k+1] = f(t, y[:2k]); returns the status (0 = OK)."""
        if y.shape[0] < 2 * self.n or ydot.shape[0] < 2 * self.n + 1:
            raise ValueError(f"y needs {2 * self.n} and ydot {2 * self.n + 1} entries")
        return self.c_eval(t, &y[0], &ydot[0])

    @property
    def kept_rows(self):
        """The constraint rows used (a copy): all, or those given as ``rows``."""
        return np.array(self.rows)

    @property
    def lam_view(self):
        return np.asarray(self.lam)

    @property
    def qdd_view(self):
        return np.asarray(self.qdd)
