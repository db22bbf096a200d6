# cython: language_level=3
"""Direct integration in the angular-velocity form in C (``mbplugins._ext._omega``):
the right-hand side of the ``di_omega`` formulation (Formulation III, Nikravesh
(1988), Eq. 11.49) for the compiled integration loop.

:class:`CompiledOmega` evaluates, in one C call and without allocation, for ``y =
[q (n); v (nv); W]`` (positions with Euler parameters; per spatial body ``v_b =
[rdot, omega']``, particles ``v = qdot``; the work channel):

1. p normalised per body, ``pdot = 1/2 L(p)^T omega'`` (Eq. 6.109);
2. the System's Jacobian, gamma and forces at (q, qdot) (compiled elements);
3. in the principal axes of every body (``J' = V diag(lambda) V^T``, ``omega'' =
   V^T omega'``) the mass matrix is diagonal: the velocity-form Jacobian ``B = [Phi_r,
   1/2 Phi_p L^T V]``, the forces ``[f; V^T (1/2 L n* - omega'~ J' omega')]``, and the
   accelerations and multipliers of the kinematic rows by the dense Schur
   complement (the normalisation rows are not constraints here);
4. ``omegadot' = V omegadot''``; the normalisation rows' multipliers the value
   Formulation I gives them (``-omega'^T J' omega'``); ``W' = P_nc + lam . (Phi_q
   qdot)``.

NumPy reference: ``mbplugins.formulations.omega.AngularVelocityDI.rhs`` (+ the
dynamic analysis' work rate); tests keep them equal to 1e-12.  Dense Jacobians of
compiled elements with independent rows; anything else keeps the Python path.
"""
from libc.math cimport fabs, isfinite, sqrt
from libc.string cimport memcpy

include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport idx_t

import numpy as np

include "_schur.pxi"
include "_eval_status.pxi"
include "_spatial_mass.pxi"


cdef class CompiledOmega(CompiledODE):
    """``CompiledOmega(evaluator, force_evaluator, functions, n, m, jdata, qgrav,
    p_idx, w_idx, lin, lin_v, lin_mass, inertia)``: ``p_idx`` (nb, 4) the Euler
    parameters of every spatial body in q, ``w_idx`` (nb, 3) its omega' in v, ``lin``
    / ``lin_v`` the other coordinates in q / v and ``lin_mass`` their masses,
    ``inertia`` (nb, 3, 3) the bodies' J' (positive definite)."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t m, mk, nb, nv, nq, nf, nlin
    #: the state's entries, nq + nv + 1 (n = (nq + nv) // 2 for the loops' checks)
    cdef readonly Py_ssize_t size
    cdef idx_t[:, ::1] p_idx, w_idx
    cdef idx_t[::1] lin, lin_v
    cdef double[:, :, ::1] J, V
    cdef double[:, ::1] lam_p
    cdef double[::1] minv, fv, jdata, qgrav, gam, lam, lam_full, Q, Qv, vd, qn, qd
    cdef double[::1] Jv, C, B
    cdef double* fvp
    cdef ErrInfo err
    cdef readonly double power

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  p_idx, w_idx, lin, lin_v, lin_mass, inertia):
        cdef Py_ssize_t nb, nv
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledOmega: the evaluators belong to another system")
        pi = np.ascontiguousarray(p_idx, dtype=np.intp).reshape(-1, 4)
        wi = np.ascontiguousarray(w_idx, dtype=np.intp).reshape(-1, 3)
        li = np.ascontiguousarray(lin, dtype=np.intp)
        lv = np.ascontiguousarray(lin_v, dtype=np.intp)
        lm = np.ascontiguousarray(lin_mass, dtype=np.float64)
        Jb = np.ascontiguousarray(inertia, dtype=np.float64).reshape(-1, 3, 3)
        nb = pi.shape[0]
        nv = li.shape[0] + 3 * nb
        if wi.shape[0] != nb or Jb.shape[0] != nb or lv.shape[0] != li.shape[0] \
                or lm.shape[0] != li.shape[0] or li.shape[0] + 4 * nb != n \
                or qgrav.shape[0] != n or m < nb or jdata.shape[0] < m * n:
            raise ValueError("CompiledOmega: sizes do not match (n, m, bodies)")
        if (nb and (pi.min() < 0 or pi.max() >= n or wi.min() < 0 or wi.max() >= nv)) \
                or (li.shape[0] and (li.min() < 0 or li.max() >= n or lv.min() < 0
                                     or lv.max() >= nv)):
            raise ValueError("CompiledOmega: indices out of range")
        if len(set(pi.ravel().tolist()) | set(li.tolist())) != n \
                or len(set(wi.ravel().tolist()) | set(lv.tolist())) != nv:
            raise ValueError("CompiledOmega: the coordinates are not a partition")
        if not bool(np.all(lm > 0)) or not bool(np.all(np.isfinite(lm))):
            raise ValueError("CompiledOmega: every mass must be positive")
        lam_p, V = np.linalg.eigh(Jb) if nb else (np.zeros((0, 3)), np.zeros((0, 3, 3)))
        if nb and not bool(np.all(lam_p > 0)):
            raise ValueError("CompiledOmega: every inertia must be positive definite")
        self.ev = evaluator
        self.fe = force_evaluator
        self.fn = functions
        self.nq = n
        self.nv = nv
        self.n = (n + nv) // 2          # run_rk's size check: 2 n + 1 <= size
        self.size = n + nv + 1
        self.m = m
        self.mk = m - nb                # the kinematic rows (normalisation rows last)
        self.nb = nb
        self.nlin = li.shape[0]
        self.cartesian = False
        self.p_idx, self.w_idx, self.lin, self.lin_v = pi, wi, li, lv
        self.J = Jb
        self.V = np.ascontiguousarray(V)
        self.lam_p = np.ascontiguousarray(lam_p)
        minv = np.zeros(max(nv, 1))
        minv[lv] = 1.0 / lm
        for b in range(nb):
            minv[wi[b]] = 1.0 / lam_p[b]
        self.minv = minv
        self.jdata = jdata
        self.qgrav = qgrav
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        k = max(m, 1)
        self.gam, self.lam, self.lam_full = np.zeros(k), np.zeros(k), np.zeros(k)
        self.Q, self.qn, self.qd = np.zeros(n), np.zeros(n), np.zeros(n)
        self.Qv, self.vd = np.zeros(max(nv, 1)), np.zeros(max(nv, 1))
        self.Jv = np.zeros(max(self.mk * nv, 1))
        self.C = np.zeros(max(self.mk * nv, 1))
        self.B = np.zeros(max(self.mk * self.mk, 1))
        self.nfev = 0
        self.status = OK

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[:nq+nv+1] = [qdot; vdot; W'] at (t, y[:nq+nv])."""
        cdef Py_ssize_t n = self.nq, nv = self.nv, mk = self.mk, i, j, k, l, b, r
        cdef const double* v = y + n
        cdef double* q = &self.qn[0]
        cdef double* qd = &self.qd[0]
        cdef double* Q = &self.Q[0]
        cdef double* Qv = &self.Qv[0]
        cdef double* vd = &self.vd[0]
        cdef double* Jd = &self.jdata[0]
        cdef double* Jv = &self.Jv[0]
        cdef double* lam = &self.lam[0]
        cdef double P = 0.0, s, acc
        cdef double p[4]
        cdef double Lp[12]
        cdef double w[3]
        cdef double Jw[3]
        cdef double x[3]
        cdef double G[12]                 # 1/2 L^T V (4 x 3, row-major)
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        memcpy(q, y, n * sizeof(double))
        for i in range(self.nlin):
            qd[self.lin[i]] = v[self.lin_v[i]]
        for b in range(self.nb):                 # normalise p, pdot = 1/2 L^T omega'
            s = 0.0
            for j in range(4):
                p[j] = y[self.p_idx[b, j]]
                s += p[j] * p[j]
            s = 1.0 / sqrt(s)
            for j in range(4):
                p[j] *= s
                q[self.p_idx[b, j]] = p[j]
            _Lmat(p, Lp)
            for j in range(4):
                acc = 0.0
                for k in range(3):
                    acc += Lp[4 * k + j] * v[self.w_idx[b, k]]
                qd[self.p_idx[b, j]] = 0.5 * acc
        memcpy(self.ev.qx, q, n * sizeof(double))
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, Jd) >= 0 \
                or self.ev.c_gamma(t, self.fvp, &self.gam[0]) >= 0:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        memcpy(Q, &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, qd, t, self.fvp, Q, &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        # forces and Jacobian in the velocity form, principal axes
        for i in range(self.nlin):
            Qv[self.lin_v[i]] = Q[self.lin[i]]
            for r in range(mk):
                Jv[r * nv + self.lin_v[i]] = Jd[r * n + self.lin[i]]
        for b in range(self.nb):
            for j in range(4):
                p[j] = q[self.p_idx[b, j]]
            _Lmat(p, Lp)
            for k in range(3):
                w[k] = v[self.w_idx[b, k]]
            for k in range(3):
                Jw[k] = self.J[b, k, 0] * w[0] + self.J[b, k, 1] * w[1] + self.J[b, k, 2] * w[2]
            # 1/2 L Q_p - omega' x J' omega'
            x[0] = w[1] * Jw[2] - w[2] * Jw[1]
            x[1] = w[2] * Jw[0] - w[0] * Jw[2]
            x[2] = w[0] * Jw[1] - w[1] * Jw[0]
            for k in range(3):
                acc = 0.0
                for j in range(4):
                    acc += Lp[4 * k + j] * Q[self.p_idx[b, j]]
                x[k] = 0.5 * acc - x[k]
            for l in range(3):                   # V^T x
                Qv[self.w_idx[b, l]] = (self.V[b, 0, l] * x[0] + self.V[b, 1, l] * x[1]
                                        + self.V[b, 2, l] * x[2])
            for j in range(4):                   # G = 1/2 L^T V
                for l in range(3):
                    G[3 * j + l] = 0.5 * (Lp[j] * self.V[b, 0, l] + Lp[4 + j] * self.V[b, 1, l]
                                          + Lp[8 + j] * self.V[b, 2, l])
            for r in range(mk):
                for l in range(3):
                    acc = 0.0
                    for j in range(4):
                        acc += Jd[r * n + self.p_idx[b, j]] * G[3 * j + l]
                    Jv[r * nv + self.w_idx[b, l]] = acc
            # the normalisation row's multiplier of Formulation I: -omega'^T J' omega'
            self.lam_full[mk + b] = -(w[0] * Jw[0] + w[1] * Jw[1] + w[2] * Jw[2])
        if mk:
            if dense_schur(nv, mk, Jv, &self.minv[0], Qv, &self.gam[0], &self.C[0],
                           &self.B[0], vd, lam):
                self.status = SINGULAR
                return SINGULAR
        else:
            for i in range(nv):
                vd[i] = self.minv[i] * Qv[i]
        for b in range(self.nb):                 # omegadot' = V omegadot''
            for k in range(3):
                x[k] = vd[self.w_idx[b, k]]
            for k in range(3):
                vd[self.w_idx[b, k]] = (self.V[b, k, 0] * x[0] + self.V[b, k, 1] * x[1]
                                        + self.V[b, k, 2] * x[2])
        for r in range(mk):                      # W' = P_nc + lam . (Phi_q qdot)
            self.lam_full[r] = lam[r]
            acc = 0.0
            for j in range(n):
                acc += Jd[r * n + j] * qd[j]
            P += lam[r] * acc
        for i in range(n):
            ydot[i] = qd[i]
        for i in range(nv):
            ydot[n + i] = vd[i]
            if not isfinite(vd[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[n + nv] = P
        self.power = P
        self.status = OK
        return OK

    def eval(self, double t, const double[::1] y not None, double[::1] ydot not None):
        """ydot[:nq+nv+1] = f(t, y[:nq+nv]); returns the status (0 = OK)."""
        if y.shape[0] < self.nq + self.nv or ydot.shape[0] < self.nq + self.nv + 1:
            raise ValueError(f"y needs {self.nq + self.nv} and ydot "
                             f"{self.nq + self.nv + 1} entries")
        return self.c_eval(t, &y[0], &ydot[0])

    def timeit(self, double t, const double[::1] y, long repeat):
        """Seconds per evaluation over ``repeat`` evaluations at one state, called
        from C as the compiled loop calls it (benchmarks)."""
        import time
        cdef double[::1] out = np.zeros(self.nq + self.nv + 1)
        cdef long k
        if y.shape[0] < self.nq + self.nv:
            raise ValueError(f"y needs {self.nq + self.nv} entries")
        cdef double t0 = time.perf_counter()
        for k in range(repeat):
            self.c_eval(t, &y[0], &out[0])
        return (time.perf_counter() - t0) / repeat

    @property
    def q_view(self):
        """The normalised positions of the last evaluation (a view)."""
        return np.asarray(self.qn)

    @property
    def qd_view(self):
        """qdot of the last evaluation (a view)."""
        return np.asarray(self.qd)

    @property
    def lam_view(self):
        """The multipliers of the last evaluation, every row (a view)."""
        return np.asarray(self.lam_full)[:self.m]

    @property
    def vd_view(self):
        return np.asarray(self.vd)[:self.nv]
