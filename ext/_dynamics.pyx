# cython: language_level=3
"""Compiled right-hand side of the equations of motion and compiled integration
loops (``mbcore._ext._dynamics``).

:class:`CompiledRHS` evaluates, in one C call and without allocation, the state
derivative of the dynamic analysis ``y = [q; qd; W]``:

    qdd, lam  from  [M, -Phi_q^T; Phi_q, 0] [qdd; lam] = [Q; gamma + gamma_s]
    W'        =  P_nc + lam . (Phi_q qd)

(Nikravesh (1988), Eqs. 9.49-9.55 with the Ch.9 sign, docs/conventions.md), where ``gamma_s =
-2 alpha Phidot - beta^2 Phi`` is the Baumgarte term of the CS formulation (Nikravesh
(1988), §10.1, §13.3.1; zero for DI) and ``W`` the work of the
non-conservative and constraint forces (the energy balance channel).  The stages
are the compiled kernels of ``_functions`` (time functions), ``_planar``
(Jacobian, gamma, phi, nu) and ``_forces`` (applied forces and their
non-conservative power); the linear system is solved by the Schur complement
``B = Phi_q M^-1 Phi_q^T`` (M diagonal) with an unblocked Cholesky for small m and
LAPACK ``dpotrf`` above.  The NumPy reference of the same function is the
Python path of ``mbcore.solve.formulation.Formulation.rhs`` (+ the work rate computed
by the dynamic analysis); tests keep them equal to 1e-12.

It applies to dense systems whose elements all have compiled kernels, without
massless coordinates or removed (redundant) rows; anything else keeps the
Python path.  A non-zero status (singular B, a time function or force element
that cannot be evaluated, a non-finite result) makes the caller repeat the
evaluation on the Python path, which raises the named error (or applies the
least-squares multipliers).

:class:`CompiledODE` is the base the compiled loops step (``c_eval``; ``c_jac``, the
Newton Jacobian of the bdf / θ loops: forward differences by default, the
semi-analytic DI/CS Jacobian for ``CompiledRHS`` of dense planar systems of compiled
force elements — NumPy reference ``mbcore.solve.dijac``);
:class:`CompiledJC` is the right-hand side of the joint-coordinate formulation of a
planar tree (``y = [theta; thetadot; W]``: forward recursion, compiled forces,
articulated-body solver; ``jc_planar_kinematics`` / ``jc_planar_aba`` expose the
recursions to Python).

:class:`CompiledGGL` is the right-hand side ``diag(1, M, 0, 0) y' = f`` of the GGL
(stabilised index-2) DAE form of a planar system (Nikravesh (1988), §13.3.4) for the
compiled BDF loop with its ``mass`` option (``_multistep.run_bdf``); NumPy reference:
``mbplugins.formulations.ggl.GGL.rhs``.  :class:`CompiledStiff` (derived from it,
sharing its stages) is that of the index-3 ``stiff`` form (``y = [q; s; lam; W]``);
NumPy reference: ``mbplugins.formulations.stiff.Stiff.rhs``.

:class:`CompiledPenalty` is the right-hand side of the penalty (augmented Lagrangian)
formulation and its post-step projections (``c_project``), dense or sparse (the
symbolic analysis of the System's ``SparseSchur``); :func:`run_rk` projects after
every accepted step when it steps one.  NumPy reference: the Python path of
``mbplugins.formulations.penalty``.
"""
from libc.math cimport fabs, isfinite, sqrt, INFINITY
from libc.string cimport memcpy, memset

from scipy.linalg.cython_lapack cimport dpotrf, dpotrs

from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator, ForceJacobianEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport SparseSchur, idx_t

import numpy as np

include "_schur.pxi"
include "_bounds.pxi"
include "_loop_status.pxi"

cdef inline void _Lmat(const double* p, double* L) noexcept nogil:
    """L(p) (3x4 row-major, Nikravesh (1988), Eq. 6.39): [-e, -e~ + e0 I]."""
    L[0] = -p[1]; L[1] = p[0]; L[2] = p[3]; L[3] = -p[2]
    L[4] = -p[2]; L[5] = -p[3]; L[6] = p[0]; L[7] = p[1]
    L[8] = -p[3]; L[9] = p[2]; L[10] = -p[1]; L[11] = p[0]


#: evaluation status codes
cdef enum:
    OK = 0
    SINGULAR = 1
    FUNCTION_FAILED = 2
    FORCE_FAILED = 3
    NOT_FINITE = 4
    CONSTRAINT_FAILED = 8     # a plugin's constraint kernel refused an element (as _cp)

STATUS = {OK: "ok", SINGULAR: "singular", FUNCTION_FAILED: "function failed",
          FORCE_FAILED: "force element failed", NOT_FINITE: "not finite",
          CONSTRAINT_FAILED: "constraint element failed"}


cdef class CompiledODE:
    """Base of the compiled right-hand sides the compiled loop (:func:`run_rk`) steps:
    ``ydot = f(t, y)`` with ``y = [x (n); xdot (n); W]`` — a state of 2n numbers and
    the work ``W`` of the non-conservative and constraint forces (the energy
    channel), ``ydot = [xdot; xddot; W']``.  Subclasses implement :meth:`c_eval`
    (C level, without the GIL; returns a status code, 0 = OK, and sets
    ``status``) and count their evaluations in ``nfev``.  ``cartesian``: the state is
    the System's ``[q; qd]`` (its ``qdd_view``/``lam_view`` are then the last
    evaluation's accelerations and multipliers)."""

    # attributes n, nfev, status, cartesian: declared in src/mbcore/_ext/_dynamics.pxd
    # (so that other extension modules derive compiled right-hand sides from it)

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        self.status = NOT_FINITE
        return NOT_FINITE

    cdef void c_save(self) noexcept nogil:
        """Keep the state that the next evaluations depend on (a warm start), read by
        :meth:`saved_state`: the compiled loops call it at the start of a step when
        they record checkpoints.  None here (the result of an evaluation depends on
        its arguments only); ``CompiledCP`` keeps its Newton warm start."""
        pass

    def saved_state(self):
        """The state kept by the last :meth:`c_save` (a dict of arrays), or None."""
        return None

    def warm_state(self):
        """The state the next evaluation starts from (a dict of arrays), or None."""
        return None

    def load_state(self, state):
        """Continue from ``state`` (of :meth:`saved_state` / :meth:`warm_state`)."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state between evaluations")

    cdef int c_jac(self, double t, const double* y, Py_ssize_t N, const double* scale,
                   double* J, double* work) noexcept nogil:
        """J (N x N, column-major) = df/dy at (t, y[:N]), the Newton Jacobian of the
        compiled bdf and θ loops (Nikravesh (1988), §12.4).  Default: forward
        differences of :meth:`c_eval`, column by column (``Integrator.jac`` /
        ``num_jac``: f0 = f(t, y), increment sqrt(eps) max(|y_j|, scale_j); N + 1
        evaluations, counted in ``nfev``).  ``work``: 3N doubles (f0 on return in
        its first N).  Subclasses with ``analytic_jac`` override it.  Returns the
        failing evaluation's status (0 = OK)."""
        cdef Py_ssize_t i, j
        cdef double yj, dj, fl, ay
        cdef double sq_eps = sqrt(2.220446049250313e-16)
        cdef double* f0 = work
        cdef double* fb = work + N
        cdef double* yp = work + 2 * N
        cdef int status = self.c_eval(t, y, f0)
        if status:
            return status
        for i in range(N):
            yp[i] = y[i]
        for j in range(N):
            yj = y[j]
            fl = scale[j] if scale[j] > 1e-300 else 1e-300
            ay = fabs(yj)
            yp[j] = yj + sq_eps * (ay if ay >= fl else fl)
            dj = yp[j] - yj
            status = self.c_eval(t, yp, fb)
            if status:
                return status
            for i in range(N):
                J[j * N + i] = (fb[i] - f0[i]) / dj
            yp[j] = yj
        return 0

    def eval(self, double t, const double[::1] y not None, double[::1] ydot not None):
        """ydot[:2n+1] = f(t, y[:2n]); returns the status (0 = OK)."""
        if y.shape[0] < 2 * self.n or ydot.shape[0] < 2 * self.n + 1:
            raise ValueError(f"y needs {2 * self.n} and ydot {2 * self.n + 1} entries")
        return self.c_eval(t, &y[0], &ydot[0])

    def jacobian(self, double t, const double[::1] y not None, double[:, ::1] out not None,
                 const double[::1] scale=None):
        """out (N x N, C order, N = its size) = df/dy at (t, y[:N]) by :meth:`c_jac`
        (the same matrix the compiled bdf / θ loops use: the Python drivers' ``jac``
        call-back on the compiled right-hand side, so both loops take the same
        steps).  ``scale``: the difference floor of the default (1e-8).  Returns
        the status (0 = OK; else ``out`` is incomplete)."""
        cdef Py_ssize_t N = out.shape[0], i, j
        if out.shape[1] != N or y.shape[0] < N or N < 2 * self.n + 1 \
                or (scale is not None and scale.shape[0] < N):
            raise ValueError(f"jacobian: out must be square with N >= {2 * self.n + 1} "
                             f"rows and y, scale N entries")
        cdef double[::1] Jc = np.empty(N * N)
        cdef double[::1] work = np.empty(3 * N)
        cdef double[::1] sc = np.full(N, 1e-8) if scale is None else scale
        cdef int status = self.c_jac(t, &y[0], N, &sc[0], &Jc[0], &work[0])
        if status:
            return status
        for i in range(N):
            for j in range(N):
                out[i, j] = Jc[j * N + i]
        return 0

    def timeit_jacobian(self, double t, const double[::1] y, long repeat):
        """Seconds per :meth:`c_jac` (N = 2n + 1) over ``repeat`` calls at one state,
        called from C as the compiled bdf / θ loops call it (benchmarks)."""
        import time
        cdef Py_ssize_t N = 2 * self.n + 1
        cdef double[::1] J = np.zeros(N * N)
        cdef double[::1] work = np.zeros(3 * N)
        cdef double[::1] sc = np.full(N, 1e-8)
        cdef long k
        if y.shape[0] < N:
            raise ValueError(f"y needs {N} entries")
        cdef double t0 = time.perf_counter()
        for k in range(repeat):
            self.c_jac(t, &y[0], N, &sc[0], &J[0], &work[0])
        return (time.perf_counter() - t0) / repeat

    def timeit(self, double t, const double[::1] y, long repeat):
        """Seconds per evaluation over ``repeat`` evaluations at one state, called
        from C as the compiled loop calls it (benchmarks)."""
        import time
        cdef double[::1] out = np.zeros(2 * self.n + 1)
        cdef long k
        if y.shape[0] < 2 * self.n:
            raise ValueError(f"y needs {2 * self.n} entries")
        cdef double t0 = time.perf_counter()
        for k in range(repeat):
            self.c_eval(t, &y[0], &out[0])
        return (time.perf_counter() - t0) / repeat


cdef class CompiledRHS(CompiledODE):
    """``CompiledRHS(evaluator, force_evaluator, functions, n, m, jdata, qgrav,
    minv, alpha=0, beta=0)``.  ``functions`` is the compiled time-function
    evaluator (or None when the system has none), ``jdata`` the System's Jacobian
    buffer (dense row-major, m*n entries then the ground slots), ``qgrav`` the
    gravity forces, ``minv`` the inverse of the diagonal mass matrix."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t m, nf
    cdef double[::1] fv, jdata, gam, phi, nu, Q, qgrav, minv, B, C, lam, qdd
    cdef double* fvp
    cdef public double alpha, beta
    cdef readonly bint stabilise
    cdef readonly double power
    cdef ErrInfo err
    cdef SparseSchur sp
    cdef idx_t[::1] indptr, indices
    cdef readonly bint sparse
    # spatial bodies (Formulation I in transformed columns, mbcore.system.mass)
    cdef readonly Py_ssize_t nsp
    cdef idx_t[:, ::1] sp_pidx, sp_pos
    cdef idx_t[::1] sp_bod
    cdef double[:, :, ::1] sp_J, sp_V
    cdef double[:, ::1] sp_lam, sp_E
    cdef double[::1] sp_alpha, jhat
    # the semi-analytic Jacobian (c_jac; enable_jacobian): force-Jacobian kernels,
    # their scatter map (block entry -> row-major n x n index, -1 dropped) and work
    cdef ForceJacobianEvaluator fj
    cdef idx_t[::1] fj_pos
    # the force elements (group, element) and, per coordinate, those on its body (CSR)
    cdef Py_ssize_t nel
    cdef idx_t[::1] el_g, el_e, el_ptr, el_idx
    cdef double[::1] jw_pw0
    cdef double[::1] jw_J0, jw_lam0, jw_qdd0, jw_g0, jw_r0, jw_raw0, jw_jqd0, jw_b0
    cdef double[::1] jw_K, jw_Cf, jw_Kb, jw_Cb, jw_R, jw_w, jw_qp

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m, double[::1] jdata not None,
                  double[::1] qgrav not None, double[::1] minv not None, double alpha=0.0,
                  double beta=0.0, SparseSchur sparse_solver=None,
                  idx_t[::1] indptr=None, idx_t[::1] indices=None, spatial=None):
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledRHS: the evaluators belong to another system")
        nfun = 0 if functions is None else functions.size
        if evaluator.need_out > max(m, 1) or evaluator.need_data > jdata.shape[0] or \
                evaluator.need_fv > nfun or (force_evaluator is not None
                                             and force_evaluator.need_fv > nfun):
            raise ValueError(f"CompiledRHS: the evaluators reach {evaluator.need_out} rows, "
                             f"{evaluator.need_data} jdata entries and "
                             f"{evaluator.need_fv} functions; m = {m}, jdata has "
                             f"{jdata.shape[0]}, there are {nfun} functions")
        self.sparse = sparse_solver is not None
        if self.sparse:
            if indptr is None or indices is None or indptr.shape[0] != m + 1 \
                    or sparse_solver.n != n or sparse_solver.m_full != m \
                    or sparse_solver.m != m or jdata.shape[0] < indices.shape[0]:
                raise ValueError("CompiledRHS: sparse solver / CSR pattern do not match")
            self.sp = sparse_solver
            self.indptr = indptr
            self.indices = indices
        elif jdata.shape[0] < m * n:
            raise ValueError("CompiledRHS: buffer sizes do not match (n, m)")
        if qgrav.shape[0] != n or minv.shape[0] != n:
            raise ValueError("CompiledRHS: buffer sizes do not match (n, m)")
        self.ev = evaluator
        self.fe = force_evaluator
        self.fn = functions
        self.n = n
        self.cartesian = True
        self.m = m
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata = jdata
        self.gam = np.zeros(max(m, 1))
        self.phi = np.zeros(max(m, 1))
        self.nu = np.zeros(max(m, 1))
        self.Q = np.zeros(max(n, 1))
        self.qgrav = qgrav
        self.minv = minv
        self.B = np.zeros(1 if self.sparse else max(m * m, 1))
        self.C = np.zeros(1 if self.sparse else max(m * n, 1))
        self.lam = np.zeros(max(m, 1))
        self.qdd = np.zeros(max(n, 1))
        self.alpha = alpha
        self.beta = beta
        self.stabilise = alpha != 0.0 or beta != 0.0
        self.nfev = 0
        self.status = 0
        self.nsp = 0
        if spatial is not None:
            # the spatial mass blocks: own copies (minv: the diagonal part, the p
            # columns are overwritten by D at every evaluation)
            self.nsp = spatial.nb
            self.sp_pidx = np.ascontiguousarray(spatial.p_idx, dtype=np.intp)
            self.sp_pos = np.ascontiguousarray(spatial.pos, dtype=np.intp).reshape(-1, 4)
            self.sp_bod = np.ascontiguousarray(spatial.bod, dtype=np.intp)
            self.sp_J = np.ascontiguousarray(spatial.inertia, dtype=np.float64)
            self.sp_V = np.ascontiguousarray(spatial.V, dtype=np.float64)
            self.sp_lam = np.ascontiguousarray(spatial.lam, dtype=np.float64)
            self.sp_alpha = np.ascontiguousarray(spatial.alpha, dtype=np.float64)
            self.sp_E = np.zeros((max(self.nsp, 1), 16))
            self.minv = np.array(spatial.minv, dtype=np.float64)
            self.jhat = np.zeros(jdata.shape[0])
            if self.sp_pidx.shape[0] != self.nsp or self.minv.shape[0] != n or (
                    self.sp_pos.shape[0] and (np.max(self.sp_pos) >= jdata.shape[0]
                                              or np.max(self.sp_bod) >= self.nsp)) or \
                    np.max(self.sp_pidx) >= n or np.min(self.sp_pidx) < 0:
                raise ValueError("CompiledRHS: spatial mass blocks do not match the system")

    # ------------------------------------------------------------------ C level
    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2n+1] = [qd; qdd; W'] at (t, y[0:2n]).  Returns a status code."""
        cdef Py_ssize_t n = self.n, m = self.m, i, j
        cdef const double* q = y
        cdef const double* qd = y + n
        cdef double* J = &self.jdata[0]
        cdef double* gam = &self.gam[0]
        cdef double* lam = &self.lam[0]
        cdef double* qdd = &self.qdd[0]
        cdef double* Q = &self.Q[0]
        cdef double acc, P = 0.0, a2, b2
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        memcpy(self.ev.qx, q, n * sizeof(double))
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, J) >= 0 or self.ev.c_gamma(t, self.fvp, gam) >= 0 \
                or (self.stabilise and (self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0
                                        or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0)):
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        if self.stabilise:
            a2 = 2.0 * self.alpha
            b2 = self.beta * self.beta
            for i in range(m):
                acc = -self.nu[i] + self.c_jrow_dot(i, qd)
                gam[i] -= a2 * acc + b2 * self.phi[i]
        memcpy(Q, &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, qd, t, self.fvp, Q, &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        if self.nsp:
            self.c_spatial(q, qd, Q)
            J = &self.jhat[0]
        if self.sparse:
            if self.sp._solve(self.jhat if self.nsp else self.jdata, self.minv, self.Q,
                              self.gam, self.qdd, self.lam):
                self.status = SINGULAR
                return SINGULAR
        elif self.c_schur(J, Q, gam, qdd, lam):
            self.status = SINGULAR
            return SINGULAR
        if self.nsp:
            self.c_spatial_back(qdd)
        # W' = P_nc + lam . (Phi_q qd)
        for i in range(m):
            P += lam[i] * self.c_jrow_dot(i, qd)
        for i in range(n):
            ydot[i] = qd[i]
            ydot[n + i] = qdd[i]
            if not isfinite(qdd[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[2 * n] = P
        self.power = P
        self.status = OK
        return OK

    def enable_jacobian(self, ForceJacobianEvaluator force_jacobians, idx_t[::1] pos,
                        list body_offsets=None):
        """Switch :meth:`c_jac` to the semi-analytic DI/CS Jacobian (
        NumPy reference ``mbcore.solve.dijac.di_jacobian``).  ``force_jacobians``: the
        System's compiled K/C kernels of every force group (None: no force
        elements), ``pos``: each block entry's row-major index in the n x n K / C
        (-1: ground, dropped), ``body_offsets``: per compiled force group (the order
        of the ForceEvaluator) its (ne, nb) body offsets into q (n: the ground).  Dense planar systems only: the sparse Schur kernel
        keeps no reusable factor for many right-hand sides and the spatial bodies'
        transformed mass blocks (Formulation I) depend on q, so those keep forward
        differences (as do Systems with Python force types, which have no
        CompiledRHS).  Returns True when enabled."""
        cdef Py_ssize_t n = self.n, m = self.m, size
        if self.sparse or self.nsp:
            return False
        if (force_jacobians is None) != (self.fe is None):
            raise ValueError("CompiledRHS.enable_jacobian: the force Jacobians belong to "
                             "another system")
        size = 0 if force_jacobians is None else force_jacobians.size
        if force_jacobians is not None and force_jacobians.n != n:
            raise ValueError("CompiledRHS.enable_jacobian: the force Jacobians belong to "
                             "another system")
        if pos.shape[0] != size or (size and (np.max(pos) >= n * n or np.min(pos) < -1)):
            raise ValueError("CompiledRHS.enable_jacobian: the scatter map does not match")
        ng = 0 if self.fe is None else self.fe.ng
        if body_offsets is None or len(body_offsets) != ng:
            raise ValueError("CompiledRHS.enable_jacobian: body offsets of every force group "
                             "needed")
        eg, ee, per = [], [], [[] for _ in range(n)]
        for g, boff in enumerate(body_offsets):
            boff = np.asarray(boff, dtype=np.intp)
            if boff.ndim != 2 or boff.shape[0] != self.fe.groups[g].ne \
                    or boff.shape[1] != self.fe.groups[g].nb:
                raise ValueError("CompiledRHS.enable_jacobian: body offsets do not match "
                                 "the force groups")
            for e in range(boff.shape[0]):
                cols = sorted({int(b) + c for b in boff[e] if 0 <= b < n for c in range(3)})
                if cols and max(cols) >= n:
                    raise ValueError("CompiledRHS.enable_jacobian: a body offset is out "
                                     "of range")
                for c in cols:
                    per[c].append(len(eg))
                eg.append(g)
                ee.append(e)
        self.nel = len(eg)
        self.el_g = np.array(eg + [0], dtype=np.intp)
        self.el_e = np.array(ee + [0], dtype=np.intp)
        self.el_ptr = np.concatenate([[0], np.cumsum([len(x) for x in per])]).astype(np.intp)
        self.el_idx = np.array(sum(per, []) + [0], dtype=np.intp)
        self.jw_pw0 = np.zeros(max(self.nel, 1))
        self.fj = force_jacobians
        self.fj_pos = np.array(pos, dtype=np.intp) if size else np.full(1, -1, dtype=np.intp)
        self.jw_J0 = np.zeros(max(m * n, 1))
        self.jw_lam0 = np.zeros(max(m, 1))
        self.jw_qdd0 = np.zeros(n)
        self.jw_g0 = np.zeros(max(m, 1))
        self.jw_r0 = np.zeros(max(m, 1))
        self.jw_raw0 = np.zeros(max(m, 1))
        self.jw_jqd0 = np.zeros(max(m, 1))
        self.jw_b0 = np.zeros(n)
        self.jw_K = np.zeros(n * n)
        self.jw_Cf = np.zeros(n * n)
        self.jw_Kb = np.zeros(max(size, 1))
        self.jw_Cb = np.zeros(max(size, 1))
        self.jw_R = np.zeros(2 * n * (n + m))
        self.jw_w = np.zeros(2 * n)
        self.jw_qp = np.zeros(n)
        self.analytic_jac = True
        return True

    def disable_jacobian(self, bint disable=True):
        """Back to forward differences of :meth:`c_eval` (benchmarks, tests);
        ``disable=False`` switches an enabled semi-analytic Jacobian on again."""
        self.analytic_jac = not disable and self.jw_R is not None

    cdef int c_jac(self, double t, const double* y, Py_ssize_t N, const double* scale,
                   double* J, double* work) noexcept nogil:
        """Semi-analytic df/dy of ``[qd; qdd; W']`` (module ``mbcore.solve.dijac``;
        Nikravesh (1988), §13.3, §13.3.1, §12.4): one evaluation at y (its Schur factor is reused), K and C
        from the compiled force-Jacobian kernels, forward differences of the
        constraint kernels alone (2n columns: Phi_q^T lam, g - Phi_q qdd in q,
        gamma in qd) and of the power of the force elements on the perturbed
        coordinate's body alone (the W row), the KKT solve with 2n right-hand sides.  The last evaluation's buffers (Phi_q, lam, qdd) are
        left at y.  Without :meth:`enable_jacobian` (or for another N): forward
        differences (:meth:`CompiledODE.c_jac`)."""
        if not self.analytic_jac or N != 2 * self.n + 1:
            return CompiledODE.c_jac(self, t, y, N, scale, J, work)
        cdef Py_ssize_t n = self.n, m = self.m, nm = self.n + self.m, i, j, k, p
        cdef const double* q = y
        cdef const double* qd = y + n
        cdef double* Jd = &self.jdata[0]
        cdef double* gam = &self.gam[0]
        cdef double* J0 = &self.jw_J0[0]
        cdef double* lam0 = &self.jw_lam0[0]
        cdef double* qdd0 = &self.jw_qdd0[0]
        cdef double* g0 = &self.jw_g0[0]
        cdef double* r0 = &self.jw_r0[0]
        cdef double* raw0 = &self.jw_raw0[0]
        cdef double* jqd0 = &self.jw_jqd0[0]
        cdef double* b0 = &self.jw_b0[0]
        cdef double* K = &self.jw_K[0]
        cdef double* Cf = &self.jw_Cf[0]
        cdef double* R = &self.jw_R[0]
        cdef double* w = &self.jw_w[0]
        cdef double* qp = &self.jw_qp[0]
        cdef double* col
        cdef double* Bf = &self.B[0]
        cdef double* Cm = &self.C[0]
        cdef double* minv = &self.minv[0]
        cdef double xj, d, acc, jv, a2 = 2.0 * self.alpha, b2 = self.beta * self.beta
        cdef double Pp, pe, c0 = 0.0, cl
        cdef int status, mm = <int>m, nrhs = <int>(2 * n), ldb = <int>nm, info = 0
        cdef char uplo = b'U'
        status = self.c_eval(t, y, work)
        if status:
            return status
        # ---- the evaluation at y: Phi_q, lam, qdd, g (the Schur factor stays in B)
        memcpy(J0, Jd, m * n * sizeof(double))
        memcpy(lam0, &self.lam[0], m * sizeof(double))
        memcpy(qdd0, &self.qdd[0], n * sizeof(double))
        memcpy(g0, gam, m * sizeof(double))
        for i in range(m):
            acc = 0.0
            cl = 0.0
            for j in range(n):
                acc += J0[i * n + j] * qdd0[j]
                cl += J0[i * n + j] * qd[j]
            r0[i] = g0[i] - acc
            jqd0[i] = cl
            c0 += lam0[i] * cl
        for j in range(n):
            acc = 0.0
            for i in range(m):
                acc += J0[i * n + j] * lam0[i]
            b0[j] = acc
        if self.fe is not None:             # each element's power at y
            self.fe.c_load(q, qd)
            for k in range(self.nel):
                if self.fe.c_element_power(self.el_g[k], self.el_e[k], t, self.fvp,
                                           &self.jw_pw0[k]) >= 0:
                    self.status = FORCE_FAILED
                    return FORCE_FAILED
        # ---- K = dQ/dq, C = dQ/dqd (compiled kernels), scattered into R's columns
        memset(K, 0, n * n * sizeof(double))
        memset(Cf, 0, n * n * sizeof(double))
        if self.fj is not None:
            if self.fj.c_jacobians(q, qd, t, self.fvp, &self.jw_Kb[0],
                                   &self.jw_Cb[0]) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
            for k in range(self.fj.size):
                p = self.fj_pos[k]
                if p >= 0:
                    K[p] += self.jw_Kb[k]
                    Cf[p] += self.jw_Cb[k]
        for j in range(n):
            col = R + j * nm
            for i in range(n):
                col[i] = K[i * n + j]
            col = R + (n + j) * nm
            for i in range(n):
                col[i] = Cf[i * n + j]
        # ---- q columns: d(Phi_q^T lam)/dq, d(g - Phi_q qdd)/dq, the W row
        memcpy(qp, q, n * sizeof(double))
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        for j in range(n):
            xj = q[j]
            d = 1e-7 * (1.0 + fabs(xj))
            qp[j] = xj + d
            d = qp[j] - xj
            col = R + j * nm
            cl = 0.0
            if m:
                memcpy(self.ev.qx, qp, n * sizeof(double))
                if self.ev.c_jacobian(t, self.fvp, Jd) >= 0 \
                        or self.ev.c_gamma(t, self.fvp, gam) >= 0 \
                        or (self.stabilise and (
                            self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0
                            or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0)):
                    memcpy(self.ev.qx, q, n * sizeof(double))
                    self.status = CONSTRAINT_FAILED
                    return CONSTRAINT_FAILED
                if self.stabilise:
                    for i in range(m):
                        acc = -self.nu[i] + self.c_jrow_dot(i, qd)
                        gam[i] -= a2 * acc + b2 * self.phi[i]
                for k in range(n):
                    acc = 0.0
                    for i in range(m):
                        acc += Jd[i * n + k] * lam0[i]
                    col[k] += (acc - b0[k]) / d
                for i in range(m):
                    acc = 0.0
                    jv = 0.0
                    for k in range(n):
                        acc += Jd[i * n + k] * qdd0[k]
                        jv += Jd[i * n + k] * qd[k]
                    col[n + i] = ((gam[i] - acc) - r0[i]) / d
                    cl += lam0[i] * jv
            Pp = 0.0                        # the power of the elements on q_j's body
            if self.fe is not None:
                self.fe.qx[j] = qp[j]
                for p in range(self.el_ptr[j], self.el_ptr[j + 1]):
                    k = self.el_idx[p]
                    if self.fe.c_element_power(self.el_g[k], self.el_e[k], t, self.fvp,
                                               &pe) >= 0:
                        self.status = FORCE_FAILED
                        return FORCE_FAILED
                    Pp += pe - self.jw_pw0[k]
                self.fe.qx[j] = xj
            w[j] = ((Pp + cl) - c0) / d
            qp[j] = xj
        # ---- qd columns: dgamma/dqd (CS: - 2 alpha Phi_q exactly), the W row
        memcpy(self.ev.qx, q, n * sizeof(double))
        if m and self.ev.c_gamma(t, self.fvp, raw0) >= 0:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        memcpy(qp, qd, n * sizeof(double))
        for j in range(n):
            xj = qd[j]
            d = 1e-7 * (1.0 + fabs(xj))
            qp[j] = xj + d
            d = qp[j] - xj
            col = R + (n + j) * nm
            if m:
                memcpy(self.ev.qdx, qp, n * sizeof(double))
                if self.ev.c_gamma(t, self.fvp, gam) >= 0:
                    memcpy(self.ev.qdx, qd, n * sizeof(double))
                    self.status = CONSTRAINT_FAILED
                    return CONSTRAINT_FAILED
                for i in range(m):
                    col[n + i] = (gam[i] - raw0[i]) / d
                    if self.stabilise:
                        col[n + i] -= a2 * J0[i * n + j]
            Pp = 0.0
            if self.fe is not None:
                self.fe.qdx[j] = qp[j]
                for p in range(self.el_ptr[j], self.el_ptr[j + 1]):
                    k = self.el_idx[p]
                    if self.fe.c_element_power(self.el_g[k], self.el_e[k], t, self.fvp,
                                               &pe) >= 0:
                        self.status = FORCE_FAILED
                        return FORCE_FAILED
                    Pp += pe - self.jw_pw0[k]
                self.fe.qdx[j] = xj
            w[n + j] = Pp / d + b0[j]
            qp[j] = xj
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        # ---- KKT solve, 2n right-hand sides: B dlam = r2 - C r1 (C = Phi_q M^-1,
        # B = L L^T of the evaluation), dqdd = M^-1 (r1 + Phi_q^T dlam)
        if m:
            for k in range(2 * n):
                col = R + k * nm
                for i in range(m):
                    acc = 0.0
                    for j in range(n):
                        acc += Cm[i * n + j] * col[j]
                    col[n + i] -= acc
            if m > SCHUR_SMALL_M:
                dpotrs(&uplo, &mm, &nrhs, Bf, &mm, R + n, &ldb, &info)
            else:
                for k in range(2 * n):
                    col = R + k * nm + n
                    for i in range(m):                    # L z = r
                        acc = col[i]
                        for p in range(i):
                            acc -= Bf[i * m + p] * col[p]
                        col[i] = acc / Bf[i * m + i]
                    for i in range(m - 1, -1, -1):        # L^T x = z
                        acc = col[i]
                        for p in range(i + 1, m):
                            acc -= Bf[p * m + i] * col[p]
                        col[i] = acc / Bf[i * m + i]
        # ---- assemble [[0, I, 0], [dqdd/dq, dqdd/dqd, 0], [dW'/dq, dW'/dqd, 0]]
        memset(J, 0, N * N * sizeof(double))
        for k in range(2 * n):
            col = R + k * nm
            acc = w[k]
            for i in range(m):
                acc += jqd0[i] * col[n + i]
            J[k * N + 2 * n] = acc
            for j in range(n):
                acc = col[j]
                for i in range(m):
                    acc += J0[i * n + j] * col[n + i]
                J[k * N + n + j] = minv[j] * acc
                if not isfinite(J[k * N + n + j]):
                    self.status = NOT_FINITE
                    return NOT_FINITE
        for j in range(n):
            J[(n + j) * N + j] = 1.0
        # ---- leave the buffers at y
        memcpy(Jd, J0, m * n * sizeof(double))
        memcpy(&self.lam[0], lam0, m * sizeof(double))
        memcpy(&self.qdd[0], qdd0, n * sizeof(double))
        memcpy(gam, g0, m * sizeof(double))
        memcpy(self.ev.qx, q, n * sizeof(double))
        self.status = OK
        return OK

    cdef void c_spatial(self, const double* q, const double* qd, double* Q) noexcept nogil:
        """Formulation I made regular, in transformed columns (mbcore.system.mass.SpatialMass:
        update, inertial_forces, transform_forces, transform_jacobian): E and D per
        body, Q_p -= b* + alpha p pd.pd then Q_p <- E^T Q_p, minv_p <- D, and
        jhat = J with the p columns of every (row, body) pair times E."""
        cdef Py_ssize_t b, j, k, l, c
        cdef double p[4]
        cdef double pd[4]
        cdef double Lp[12]
        cdef double Ld[12]
        cdef double w[3]
        cdef double Jw[3]
        cdef double x[4]
        cdef double s2, pdpd, acc
        cdef double* E
        cdef double* jh = &self.jhat[0]
        cdef const double* jd = &self.jdata[0]
        for b in range(self.nsp):
            for j in range(4):
                p[j] = q[self.sp_pidx[b, j]]
                pd[j] = qd[self.sp_pidx[b, j]]
            _Lmat(p, Lp)
            _Lmat(pd, Ld)
            s2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]
            s2 = s2 * s2
            E = &self.sp_E[b, 0]
            for j in range(4):                      # E = [L^T V, p]
                for l in range(3):
                    acc = 0.0
                    for k in range(3):
                        acc += Lp[4 * k + j] * self.sp_V[b, k, l]
                    E[4 * j + l] = acc
                E[4 * j + 3] = p[j]
            for l in range(3):
                self.minv[self.sp_pidx[b, l]] = 1.0 / (4.0 * s2 * self.sp_lam[b, l])
            self.minv[self.sp_pidx[b, 3]] = 1.0 / (self.sp_alpha[b] * s2)
            # inertial forces: b* = 4 L(pd)^T J' omega', omega' = 2 L(p) pd
            for k in range(3):
                acc = 0.0
                for j in range(4):
                    acc += Lp[4 * k + j] * pd[j]
                w[k] = 2.0 * acc
            for k in range(3):
                Jw[k] = (self.sp_J[b, k, 0] * w[0] + self.sp_J[b, k, 1] * w[1]
                         + self.sp_J[b, k, 2] * w[2])
            pdpd = pd[0] * pd[0] + pd[1] * pd[1] + pd[2] * pd[2] + pd[3] * pd[3]
            for j in range(4):
                acc = 4.0 * (Ld[j] * Jw[0] + Ld[4 + j] * Jw[1] + Ld[8 + j] * Jw[2])
                x[j] = Q[self.sp_pidx[b, j]] - (acc + self.sp_alpha[b] * pdpd * p[j])
            for l in range(4):                      # Q^_p = E^T Q_p
                acc = 0.0
                for j in range(4):
                    acc += E[4 * j + l] * x[j]
                Q[self.sp_pidx[b, l]] = acc
        memcpy(jh, jd, self.jhat.shape[0] * sizeof(double))
        for c in range(self.sp_pos.shape[0]):
            E = &self.sp_E[self.sp_bod[c], 0]
            for j in range(4):
                x[j] = jd[self.sp_pos[c, j]]
            for l in range(4):
                acc = 0.0
                for j in range(4):
                    acc += x[j] * E[4 * j + l]
                jh[self.sp_pos[c, l]] = acc

    cdef void c_spatial_back(self, double* qdd) noexcept nogil:
        """qdd_p = E qdd^_p."""
        cdef Py_ssize_t b, j, l
        cdef double x[4]
        cdef double acc
        cdef double* E
        for b in range(self.nsp):
            E = &self.sp_E[b, 0]
            for l in range(4):
                x[l] = qdd[self.sp_pidx[b, l]]
            for j in range(4):
                acc = 0.0
                for l in range(4):
                    acc += E[4 * j + l] * x[l]
                qdd[self.sp_pidx[b, j]] = acc

    cdef inline double c_jrow_dot(self, Py_ssize_t i, const double* v) noexcept nogil:
        """(Phi_q v)_i from the dense row-major or CSR Jacobian data."""
        cdef Py_ssize_t j, p, n = self.n
        cdef double acc = 0.0
        cdef const double* J = &self.jdata[0]
        if self.sparse:
            for p in range(self.indptr[i], self.indptr[i + 1]):
                acc += J[p] * v[self.indices[p]]
        else:
            for j in range(n):
                acc += J[i * n + j] * v[j]
        return acc

    cdef int c_schur(self, const double* J, const double* Q, const double* gam,
                     double* qdd, double* lam) noexcept nogil:
        """lam, qdd of the dense Schur complement system (``dense_schur``)."""
        return dense_schur(self.n, self.m, J, &self.minv[0], Q, gam, &self.C[0],
                           &self.B[0], qdd, lam)

    # ------------------------------------------------------------- Python level
    # eval(t, y, ydot) -> status and timeit(t, y, repeat): CompiledODE

    @property
    def lam_view(self):
        """The multipliers of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.lam)[:self.m]

    @property
    def qdd_view(self):
        return np.asarray(self.qdd)[:self.n]


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

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  idx_t[::1] indptr=None, idx_t[::1] indices=None):
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledGGL: the evaluators belong to another system")
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


# ----------------------------------------------------------------------------------
# the penalty (augmented Lagrangian) formulation: right-hand side and projections
# (NumPy reference: mbplugins.formulations.penalty.Penalty, Python path)
# ----------------------------------------------------------------------------------
cdef inline double _maxabs(const double* v, Py_ssize_t k) noexcept nogil:
    cdef Py_ssize_t i
    cdef double r = 0.0, a
    for i in range(k):
        a = fabs(v[i])
        if a > r or a != a:             # NaN propagates (as np.max)
            r = a
    return r


cdef double _tridiag_max(Py_ssize_t k, const double* a, const double* b) noexcept nogil:
    """The largest eigenvalue of the symmetric tridiagonal matrix (diagonal a[0:k],
    off-diagonal b[0:k-1]) by bisection on Sturm counts."""
    cdef Py_ssize_t i, it
    cdef double lo = a[0], hi, x, d, r, cnt
    hi = a[0] + (fabs(b[0]) if k > 1 else 0.0)
    for i in range(k):
        if a[i] > lo:
            lo = a[i]
        r = a[i]
        if i > 0:
            r += fabs(b[i - 1])
        if i < k - 1:
            r += fabs(b[i])
        if r > hi:
            hi = r
    for it in range(200):
        x = 0.5 * (lo + hi)
        if not (lo < x < hi):
            break
        # number of eigenvalues below x: negative pivots of T - x I
        cnt = 0
        d = a[0] - x
        if d < 0.0:
            cnt += 1
        for i in range(1, k):
            if d == 0.0:
                d = 1e-300
            d = a[i] - x - b[i - 1] * b[i - 1] / d
            if d < 0.0:
                cnt += 1
        if cnt >= k:
            hi = x
        else:
            lo = x
    return hi


cdef class CompiledPenalty(CompiledODE):
    """``CompiledPenalty(evaluator, force_evaluator, functions, n, m, jdata, qgrav,
    mass, holonomic, alpha, xi, omega, iterations, tolerance, projection,
    singular_band, projection_tolerance, sparse_solver=None)``: the right-hand side
    ``y = [q; qd; W] -> [qd; qdd; W']`` and the post-step projections of the penalty
    formulation (``mbplugins.formulations.penalty``) for planar systems with a positive
    diagonal mass matrix, in C without allocation.

    The augmented Lagrangian iteration ``(M + a J^T J) qdd_k = Q + J^T (lam_k + a
    gs)``, ``lam_{k+1} = lam_k - a (J qdd_k - gs)`` is evaluated in its Schur form
    (the same iterates: with ``lam_{k+1}`` as unknown, ``M qdd_k = Q + J^T lam_{k+1}``
    and ``J qdd_k = gs + (lam_k - lam_{k+1}) / a``):

        (B + I/a) lam_{k+1} = gs + lam_k / a - J M^-1 Q,   B = J M^-1 J^T
        qdd_k = M^-1 (Q + J^T lam_{k+1})

    ``B + I/a`` is positive definite at every configuration (also where J loses
    rank) and its factor serves every iteration; the projections use the same
    matrix: ``dq = -M^-1 J^T (B + I/a)^-1 Phi`` (= ``-(M + a J^T J)^-1 a J^T Phi``).
    Dense Jacobians: B assembled and factored by Cholesky (unblocked up to 40 rows,
    LAPACK above); sparse: the symbolic analysis of the System's ``SparseSchur``
    (pattern of B, fill-reducing ordering, elimination tree, product map) with this
    object's own numeric buffers (LDL^T along the elimination tree).

    The singular band of the projection (the smallest eigenvalue of B below
    ``singular_band`` times the largest, i.e. of the squared singular values of ``J
    M^-1/2``) is decided without an eigenvalue decomposition: by Sylvester's law of
    inertia ``lambda_min(B) <= tau`` iff the LDL^T of ``B - tau I`` has a
    non-positive pivot; ``tau`` from bounds of ``lambda_max`` (the largest diagonal
    entry, the largest Gershgorin row sum) and, only when these two disagree,
    ``lambda_max`` by Lanczos with full reorthogonalisation."""

    cdef PlanarEvaluator ev
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t m, nf
    cdef double[::1] fv, jdata, gam, phi, nu, Q, qgrav, minv, hol, lam, qdd, qddp, gs
    cdef double[::1] cvec, jqd, r, x, pq, pqd, rs
    cdef double* fvp
    cdef ErrInfo err
    cdef readonly double alpha, xi, omega, tolerance, singular_band, projection_tolerance
    cdef readonly int iterations
    cdef readonly bint sparse, projects, jv_alias
    cdef readonly double power
    #: the compiled loop runs this object's post step (``c_project``) itself
    handles_post_step = True
    #: statistics (as the Python path's): evaluations, multiplier iterations,
    #: evaluations that stopped at ``iterations``, projections and those skipped in
    #: the singular band (counted when asked), Lanczos runs of the band test
    cdef readonly long evaluations, multiplier_iterations, unconverged_evaluations
    cdef readonly long projections, skipped_projections, lanczos_runs
    # dense: C = J M^-1 (m n), B (m m), its factor L (m m)
    cdef double[::1] C, B, L
    # sparse: the symbolic analysis of S; own numeric buffers
    cdef SparseSchur S
    cdef const idx_t* s_rp
    cdef const idx_t* s_jpos
    cdef const idx_t* s_jcol
    cdef const idx_t* s_perm
    cdef const idx_t* s_Bp
    cdef const idx_t* s_Bi
    cdef const idx_t* s_bdiag
    cdef const idx_t* s_tp
    cdef const idx_t* s_parent
    cdef const idx_t* s_Lp
    cdef const int* s_ta
    cdef const int* s_tb
    cdef Py_ssize_t s_nj, s_nb
    cdef double[::1] jv, cj, Bx, Lx, D, Y, w, dq
    cdef idx_t[::1] Li, rptr, rpat, rpos
    # Lanczos (band test)
    cdef Py_ssize_t kmax
    cdef double[:, ::1] V
    cdef double[::1] la, lb, lw

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m,
                  double[::1] jdata not None, double[::1] qgrav not None,
                  double[::1] mass not None, double[::1] holonomic not None,
                  double alpha, double xi, double omega, int iterations,
                  double tolerance, bint projection, double singular_band,
                  double projection_tolerance, SparseSchur sparse_solver=None):
        cdef Py_ssize_t i, nj
        cdef SparseSchur S
        if evaluator.n != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledPenalty: the evaluators belong to another system")
        if qgrav.shape[0] != n or mass.shape[0] != n or holonomic.shape[0] != m:
            raise ValueError("CompiledPenalty: buffer sizes do not match (n, m)")
        if m > n:
            raise ValueError("CompiledPenalty: more constraint rows than coordinates")
        for i in range(n):
            if not (mass[i] > 0.0 and isfinite(mass[i])):
                raise ValueError("CompiledPenalty: the mass matrix needs positive entries")
        if not (alpha > 0.0 and isfinite(alpha)) or iterations < 1 or xi < 0.0 \
                or omega < 0.0 or singular_band < 0.0 or not (tolerance > 0.0) \
                or not (projection_tolerance > 0.0):
            raise ValueError("CompiledPenalty: invalid settings")
        self.sparse = sparse_solver is not None
        if self.sparse:
            S = sparse_solver
            if m == 0:
                raise ValueError("CompiledPenalty: a sparse solver needs constraint rows")
            nj = S.jpos.shape[0]
            if S.n != n or S.m_full != m or S.m != m or S.rp.shape[0] != m + 1 \
                    or S.Bp.shape[0] != m + 1 or S.Lp.shape[0] != m + 1 \
                    or S.perm.shape[0] != m or S.parent.shape[0] != m \
                    or S.bdiag.shape[0] != m or S.tp.shape[0] != S.Bi.shape[0] + 1:
                raise ValueError("CompiledPenalty: sparse solver does not match (n, m)")
            for i in range(m):
                if S.rowid[i] != i or not (0 <= S.perm[i] < m) \
                        or not (-1 <= S.parent[i] < m) \
                        or not (0 <= S.bdiag[i] < S.Bi.shape[0]):
                    raise ValueError("CompiledPenalty: sparse solver rows or ordering "
                                     "out of range")
            if S.rp[m] != nj or nj > jdata.shape[0]:
                raise ValueError("CompiledPenalty: sparse pattern does not match")
            for i in range(nj):
                if not (0 <= S.jpos[i] < jdata.shape[0]) or not (0 <= S.jcol[i] < n):
                    raise ValueError("CompiledPenalty: Jacobian positions out of range")
            for i in range(S.Bi.shape[0]):
                if not (0 <= S.Bi[i] < m):
                    raise ValueError("CompiledPenalty: pattern of B out of range")
            for i in range(S.ta.shape[0]):
                if not (0 <= S.ta[i] < nj and 0 <= S.tb[i] < nj):
                    raise ValueError("CompiledPenalty: product map out of range")
            if S.tp[S.Bi.shape[0]] != S.ta.shape[0] or S.tb.shape[0] != S.ta.shape[0] \
                    or S.tp[0] != 0 or S.rp[0] != 0:
                raise ValueError("CompiledPenalty: product map does not match")
            for i in range(S.Bi.shape[0]):
                if S.tp[i] > S.tp[i + 1]:
                    raise ValueError("CompiledPenalty: product map does not match")
            for i in range(m):
                if S.rp[i] > S.rp[i + 1]:
                    raise ValueError("CompiledPenalty: sparse pattern does not match")
            self.S = S
            self.s_nj = nj
            self.s_nb = S.Bi.shape[0]
            self.s_rp, self.s_jpos, self.s_jcol = &S.rp[0], &S.jpos[0], &S.jcol[0]
            self.s_perm, self.s_Bp, self.s_Bi = &S.perm[0], &S.Bp[0], &S.Bi[0]
            self.s_bdiag, self.s_tp, self.s_parent = &S.bdiag[0], &S.tp[0], &S.parent[0]
            self.s_Lp, self.s_ta, self.s_tb = &S.Lp[0], &S.ta[0], &S.tb[0]
            # the used entries in the order of the System's buffer (all rows used,
            # CSR in order): jv is the buffer itself, no copy per evaluation
            self.jv_alias = nj > 0 and bool(np.array_equal(np.asarray(S.jpos),
                                                           np.arange(nj)))
            self.jv = jdata if self.jv_alias else np.zeros(max(nj, 1))
            self.cj = np.zeros(max(nj, 1))
            self.Bx = np.zeros(max(S.Bi.shape[0], 1))
            self.Lx = np.zeros(max(S.Lp[m], 1))
            self._symbolic(S, m)
            self.D = np.zeros(max(m, 1))
            self.Y = np.zeros(max(m, 1))
            self.w = np.zeros(max(m, 1))
            self.C = np.zeros(1)
            self.B = np.zeros(1)
            self.L = np.zeros(1)
        else:
            if jdata.shape[0] < m * n:
                raise ValueError("CompiledPenalty: buffer sizes do not match (n, m)")
            self.C = np.zeros(max(m * n, 1))
            self.B = np.zeros(max(m * m, 1))
            self.L = np.zeros(max(m * m, 1))
            self.jv, self.cj, self.Bx, self.Lx = (np.zeros(1), np.zeros(1), np.zeros(1),
                                                  np.zeros(1))
            self.D, self.Y, self.w = np.zeros(1), np.zeros(1), np.zeros(max(m, 1))
            self.Li, self.rptr, self.rpat, self.rpos = (np.zeros(1, dtype=np.intp)
                                                        for _ in range(4))
        self.ev = evaluator
        self.fe = force_evaluator
        self.fn = functions
        self.n = n
        self.m = m
        self.cartesian = True
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.jdata = jdata
        self.qgrav = qgrav
        self.minv = 1.0 / np.asarray(mass, dtype=np.float64)
        self.hol = np.array(holonomic, dtype=np.float64)
        k = max(m, 1)
        self.gam, self.phi, self.nu, self.lam = (np.zeros(k), np.zeros(k), np.zeros(k),
                                                 np.zeros(k))
        self.gs, self.cvec, self.jqd, self.r, self.x, self.rs = (
            np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k), np.zeros(k))
        self.Q, self.qdd, self.qddp = np.zeros(max(n, 1)), np.zeros(max(n, 1)), \
            np.zeros(max(n, 1))
        self.pq, self.pqd, self.dq = np.zeros(max(n, 1)), np.zeros(max(n, 1)), \
            np.zeros(max(n, 1))
        self.kmax = min(m, 80)
        self.V = np.zeros((max(self.kmax + 1, 1), k))
        self.la, self.lb, self.lw = np.zeros(self.kmax + 1), np.zeros(self.kmax + 1), \
            np.zeros(k)
        self.alpha, self.xi, self.omega = alpha, xi, omega
        self.iterations = iterations
        self.tolerance = tolerance
        self.projects = projection
        self.singular_band = singular_band
        self.projection_tolerance = projection_tolerance
        self.nfev = 0
        self.status = OK

    def _symbolic(self, SparseSchur S, Py_ssize_t m):
        """The row patterns of L (the elimination-tree reach of every row, in the
        order the up-looking factorisation visits them), the position of every
        entry in L's columns and L's row indices: fixed by the pattern of B."""
        cdef Py_ssize_t k, p, i, ln, top, t = 0, nl = S.Lp[m]
        cdef idx_t[::1] flag = np.full(m, -1, dtype=np.intp)
        cdef idx_t[::1] lnz = np.zeros(m, dtype=np.intp)
        cdef idx_t[::1] pattern = np.zeros(m, dtype=np.intp)
        self.Li = np.zeros(max(nl, 1), dtype=np.intp)
        self.rptr = np.zeros(m + 1, dtype=np.intp)
        self.rpat = np.zeros(max(nl, 1), dtype=np.intp)
        self.rpos = np.zeros(max(nl, 1), dtype=np.intp)
        for k in range(m):
            if not (0 <= S.Bp[k] <= S.Bp[k + 1] <= S.Bi.shape[0]) \
                    or not (0 <= S.Lp[k] <= S.Lp[k + 1] <= nl):
                raise ValueError("CompiledPenalty: pattern of B or L out of range")
            top = m
            flag[k] = k
            for p in range(S.Bp[k], S.Bp[k + 1]):
                i = S.Bi[p]
                if i > k:
                    raise ValueError("CompiledPenalty: B is not an upper triangle")
                ln = 0
                while True:
                    if not (0 <= i <= k) or ln >= m:
                        raise ValueError("CompiledPenalty: elimination tree out of range")
                    if flag[i] == k:
                        break
                    pattern[ln] = i
                    ln += 1
                    flag[i] = k
                    i = S.parent[i]
                while ln > 0:
                    top -= 1
                    ln -= 1
                    pattern[top] = pattern[ln]
            while top < m:
                i = pattern[top]
                top += 1
                if t >= nl or S.Lp[i] + lnz[i] >= S.Lp[i + 1]:
                    raise ValueError("CompiledPenalty: column counts of L do not match")
                self.rpat[t] = i
                self.rpos[t] = S.Lp[i] + lnz[i]
                self.Li[S.Lp[i] + lnz[i]] = k
                lnz[i] += 1
                t += 1
            self.rptr[k + 1] = t
        if t != nl:
            raise ValueError("CompiledPenalty: column counts of L do not match")

    # ------------------------------------------------------------ linear algebra
    cdef int c_load(self, double t, const double* q) noexcept nogil:
        """J at (q, t) into the System's buffer (and the sparse entries' copies jv,
        cj = J M^-1).  Returns OK, or CONSTRAINT_FAILED (a plugin kernel refused an
        element)."""
        cdef Py_ssize_t p
        memcpy(self.ev.qx, q, self.n * sizeof(double))
        if self.ev.c_jacobian(t, self.fvp, &self.jdata[0]) >= 0:
            return CONSTRAINT_FAILED
        cdef double* jv = &self.jv[0]
        cdef double* cj = &self.cj[0]
        cdef const double* jd = &self.jdata[0]
        cdef const double* minv = &self.minv[0]
        if self.sparse:
            if self.jv_alias:
                for p in range(self.s_nj):
                    cj[p] = jv[p] * minv[self.s_jcol[p]]
            else:
                for p in range(self.s_nj):
                    jv[p] = jd[self.s_jpos[p]]
                    cj[p] = jv[p] * minv[self.s_jcol[p]]
        return OK

    cdef void c_jv(self, const double* v, double* out) noexcept nogil:
        """out = J v (m)."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double acc
        cdef const double* J = &self.jdata[0]
        cdef const double* jv = &self.jv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        if self.sparse:
            for i in range(self.m):
                acc = 0.0
                for p in range(rp[i], rp[i + 1]):
                    acc += jv[p] * v[jc[p]]
                out[i] = acc
            return
        for i in range(self.m):
            acc = 0.0
            for j in range(n):
                acc += J[i * n + j] * v[j]
            out[i] = acc

    cdef void c_jv2(self, const double* v, const double* u, double* out,
                    double* outu) noexcept nogil:
        """out = J v, outu = J u in one pass."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double acc, accu, a
        cdef const double* J = &self.jdata[0]
        cdef const double* jv = &self.jv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        for i in range(self.m):
            acc = 0.0
            accu = 0.0
            if self.sparse:
                for p in range(rp[i], rp[i + 1]):
                    a = jv[p]
                    acc += a * v[jc[p]]
                    accu += a * u[jc[p]]
            else:
                for j in range(n):
                    a = J[i * n + j]
                    acc += a * v[j]
                    accu += a * u[j]
            out[i] = acc
            outu[i] = accu

    cdef double c_absjv(self, const double* v) noexcept nogil:
        """max_i sum_j |J_ij| |v_j|."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double acc, best = 0.0
        cdef const double* J = &self.jdata[0]
        cdef const double* jv = &self.jv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        for i in range(self.m):
            acc = 0.0
            if self.sparse:
                for p in range(rp[i], rp[i + 1]):
                    acc += fabs(jv[p]) * fabs(v[jc[p]])
            else:
                for j in range(n):
                    acc += fabs(J[i * n + j]) * fabs(v[j])
            if acc > best or acc != acc:
                best = acc
        return best

    cdef void c_minv_jt(self, const double* base, const double* lam,
                        double* out) noexcept nogil:
        """out = M^-1 (base + J^T lam) (base NULL: 0)."""
        cdef Py_ssize_t i, j, p, n = self.n
        cdef double li
        cdef const double* J = &self.jdata[0]
        cdef const double* jv = &self.jv[0]
        cdef const double* minv = &self.minv[0]
        cdef const idx_t* rp = self.s_rp
        cdef const idx_t* jc = self.s_jcol
        for j in range(n):
            out[j] = base[j] if base != NULL else 0.0
        for i in range(self.m):
            li = lam[i]
            if self.sparse:
                for p in range(rp[i], rp[i + 1]):
                    out[jc[p]] += jv[p] * li
            else:
                for j in range(n):
                    out[j] += J[i * n + j] * li
        for j in range(n):
            out[j] *= minv[j]

    cdef void c_assemble(self) noexcept nogil:
        """B = J M^-1 J^T for the J loaded (dense: full m x m; sparse: the permuted
        upper triangle by the product map)."""
        cdef Py_ssize_t i, j, k, p, t, n = self.n, m = self.m
        cdef double acc
        cdef const double* J = &self.jdata[0]
        cdef double* C = &self.C[0]
        cdef double* B = &self.B[0]
        cdef const double* minv = &self.minv[0]
        cdef const double* jv = &self.jv[0]
        cdef const double* cj = &self.cj[0]
        cdef double* Bx = &self.Bx[0]
        cdef const idx_t* tp = self.s_tp
        cdef const int* ta = self.s_ta
        cdef const int* tb = self.s_tb
        if self.sparse:
            for p in range(self.s_nb):
                acc = 0.0
                for t in range(tp[p], tp[p + 1]):
                    acc += cj[ta[t]] * jv[tb[t]]
                Bx[p] = acc
            return
        for i in range(m):
            for j in range(n):
                C[i * n + j] = J[i * n + j] * minv[j]
        for i in range(m):
            for k in range(i, m):
                acc = 0.0
                for j in range(n):
                    acc += C[i * n + j] * J[k * n + j]
                B[i * m + k] = acc
                B[k * m + i] = acc

    cdef Py_ssize_t c_factor(self, double shift) noexcept nogil:
        """Factor B + shift I (Cholesky / LDL^T).  0, or k + 1 when the k-th pivot is
        not positive (also NaN): then B + shift I is not positive definite
        (Sylvester)."""
        cdef Py_ssize_t m = self.m, i, j, k, p, p2, top, ln
        cdef double d, acc, yi, lki
        cdef double* L = &self.L[0]
        cdef int mm = <int> m, info = 0
        cdef char uplo = b'U'
        if m == 0:
            return 0
        if not self.sparse:
            memcpy(L, &self.B[0], m * m * sizeof(double))
            for i in range(m):
                L[i * m + i] += shift
            if m > SCHUR_SMALL_M:
                dpotrf(&uplo, &mm, L, &mm, &info)
                if info != 0:
                    return info if info > 0 else 1
                for i in range(m):
                    if not (L[i * m + i] > 0.0):
                        return i + 1
                return 0
            for j in range(m):           # L L^T, lower triangle row-major
                d = L[j * m + j]
                for k in range(j):
                    d -= L[j * m + k] * L[j * m + k]
                if not (d > 0.0):
                    return j + 1
                d = sqrt(d)
                L[j * m + j] = d
                for i in range(j + 1, m):
                    acc = L[i * m + j]
                    for k in range(j):
                        acc -= L[i * m + k] * L[j * m + k]
                    L[i * m + j] = acc / d
            return 0
        # sparse: up-looking LDL^T (the algorithm of SparseSchur._solve) with the row
        # patterns of L precomputed at construction (rpat: the columns i of row k in
        # the order of the elimination-tree reach, rpos: where L[k, i] goes)
        cdef const idx_t* Bp = self.s_Bp
        cdef const idx_t* Bi = self.s_Bi
        cdef const idx_t* Lp = self.s_Lp
        cdef const idx_t* rptr = &self.rptr[0]
        cdef const idx_t* rpat = &self.rpat[0]
        cdef const idx_t* rpos = &self.rpos[0]
        cdef const double* Bx = &self.Bx[0]
        cdef const idx_t* Li = &self.Li[0]
        cdef double* Lx = &self.Lx[0]
        cdef double* D = &self.D[0]
        cdef double* Y = &self.Y[0]
        cdef Py_ssize_t t
        for k in range(m):
            for p in range(Bp[k], Bp[k + 1]):
                Y[Bi[p]] += Bx[p]
            D[k] = Y[k] + shift
            Y[k] = 0.0
            for t in range(rptr[k], rptr[k + 1]):
                i = rpat[t]
                yi = Y[i]
                Y[i] = 0.0
                p2 = rpos[t]
                for p in range(Lp[i], p2):
                    Y[Li[p]] -= Lx[p] * yi
                lki = yi / D[i]
                D[k] -= lki * yi
                Lx[p2] = lki
            if not (D[k] > 0.0):
                return k + 1
        return 0

    cdef void c_solve(self, double* b) noexcept nogil:
        """b <- (B + shift I)^-1 b with the last (successful) factor."""
        cdef Py_ssize_t m = self.m, i, k, p
        cdef double acc, yi
        cdef double* L = &self.L[0]
        cdef int mm = <int> m, nrhs = 1, info = 0
        cdef char uplo = b'U'
        cdef double* w = &self.w[0]
        if m == 0:
            return
        if not self.sparse:
            if m > SCHUR_SMALL_M:
                dpotrs(&uplo, &mm, &nrhs, L, &mm, b, &mm, &info)
                return
            for i in range(m):
                acc = b[i]
                for k in range(i):
                    acc -= L[i * m + k] * b[k]
                b[i] = acc / L[i * m + i]
            for i in range(m - 1, -1, -1):
                acc = b[i]
                for k in range(i + 1, m):
                    acc -= L[k * m + i] * b[k]
                b[i] = acc / L[i * m + i]
            return
        cdef const idx_t* perm = self.s_perm
        cdef const idx_t* Lp = self.s_Lp
        cdef const idx_t* Li = &self.Li[0]
        cdef const double* Lx = &self.Lx[0]
        cdef const double* D = &self.D[0]
        for k in range(m):
            w[k] = b[perm[k]]
        for k in range(m):
            yi = w[k]
            for p in range(Lp[k], Lp[k + 1]):
                w[Li[p]] -= Lx[p] * yi
        for k in range(m):
            w[k] /= D[k]
        for k in range(m - 1, -1, -1):
            acc = w[k]
            for p in range(Lp[k], Lp[k + 1]):
                acc -= Lx[p] * w[Li[p]]
            w[k] = acc
        for k in range(m):
            b[perm[k]] = w[k]

    cdef void c_bmul(self, const double* v, double* out) noexcept nogil:
        """out = B v (the assembled B; sparse: in the permuted order of Bx)."""
        cdef Py_ssize_t m = self.m, i, k, p
        cdef double acc
        if not self.sparse:
            for i in range(m):
                acc = 0.0
                for k in range(m):
                    acc += self.B[i * m + k] * v[k]
                out[i] = acc
            return
        for i in range(m):
            out[i] = 0.0
        for k in range(m):
            for p in range(self.s_Bp[k], self.s_Bp[k + 1]):
                i = self.s_Bi[p]
                out[i] += self.Bx[p] * v[k]
                if i != k:
                    out[k] += self.Bx[p] * v[i]

    cdef double c_lambda_max(self) noexcept nogil:
        """The largest eigenvalue of the assembled B: Lanczos with full
        reorthogonalisation from a fixed pseudo-random start, until the largest
        Ritz value is stationary (to 1e-14) twice or the Krylov space is exhausted."""
        cdef Py_ssize_t m = self.m, j, i, l, kk = 0
        cdef double nrm = 0.0, a, b, th = 0.0, thp = -1.0, c
        cdef int still = 0
        cdef unsigned long long s = 88172645463325252ULL
        cdef double* w = &self.lw[0]
        self.lanczos_runs += 1
        for i in range(m):                       # xorshift: no symmetry of the model
            s ^= s << 13
            s ^= s >> 7
            s ^= s << 17
            self.V[0, i] = <double> (s >> 11) / 9007199254740992.0 - 0.5
            nrm += self.V[0, i] * self.V[0, i]
        nrm = sqrt(nrm)
        for i in range(m):
            self.V[0, i] /= nrm
        for j in range(self.kmax):
            self.c_bmul(&self.V[j, 0], w)
            a = 0.0
            for i in range(m):
                a += self.V[j, i] * w[i]
            self.la[j] = a
            for l in range(j + 1):               # full reorthogonalisation (twice)
                c = 0.0
                for i in range(m):
                    c += self.V[l, i] * w[i]
                for i in range(m):
                    w[i] -= c * self.V[l, i]
            for l in range(j + 1):
                c = 0.0
                for i in range(m):
                    c += self.V[l, i] * w[i]
                for i in range(m):
                    w[i] -= c * self.V[l, i]
            b = 0.0
            for i in range(m):
                b += w[i] * w[i]
            b = sqrt(b)
            self.lb[j] = b
            kk = j + 1
            th = _tridiag_max(kk, &self.la[0], &self.lb[0])
            if fabs(th - thp) <= 1e-14 * fabs(th):
                still += 1
            else:
                still = 0
            if still >= 2 or b <= 1e-14 * fabs(th) or kk == m or j + 1 >= self.kmax:
                break
            thp = th
            for i in range(m):
                self.V[j + 1, i] = w[i] / b
        return th

    cdef bint c_near_singular(self) noexcept nogil:
        """The loaded configuration is in the singular band: lambda_min(B) < band
        lambda_max(B) (the Python path: the singular values of J M^-1/2).  Needs B
        assembled; leaves a factor of B - tau I behind."""
        cdef Py_ssize_t m = self.m, i, k, p
        cdef double band = self.singular_band, lo = 0.0, hi = 0.0, v
        cdef double* rs = &self.rs[0]
        if band <= 0.0 or m == 0:
            return False
        # bounds of lambda_max: the largest diagonal entry <= it <= the largest
        # Gershgorin row sum
        if not self.sparse:
            for i in range(m):
                v = 0.0
                for k in range(m):
                    v += fabs(self.B[i * m + k])
                if v > hi:
                    hi = v
                if self.B[i * m + i] > lo:
                    lo = self.B[i * m + i]
        else:
            for i in range(m):
                rs[i] = 0.0
            for k in range(m):
                for p in range(self.s_Bp[k], self.s_Bp[k + 1]):
                    i = self.s_Bi[p]
                    rs[k] += fabs(self.Bx[p])
                    if i != k:
                        rs[i] += fabs(self.Bx[p])
                if self.Bx[self.s_bdiag[k]] > lo:
                    lo = self.Bx[self.s_bdiag[k]]
            for i in range(m):
                if rs[i] > hi:
                    hi = rs[i]
        if not (hi > 0.0):
            return True                      # J = 0 (or not finite)
        if self.c_factor(-band * hi) == 0:
            return False                     # lambda_min > band hi >= band lambda_max
        if self.c_factor(-band * lo) != 0:
            return True                      # lambda_min <= band lo <= band lambda_max
        return self.c_factor(-band * self.c_lambda_max()) != 0

    # ------------------------------------------------------------------ C level
    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2n+1] = [qd; qdd; W'] at (t, y[0:2n]).  Returns a status code."""
        cdef Py_ssize_t n = self.n, m = self.m, i, k
        cdef const double* q = y
        cdef const double* qd = y + n
        cdef double* Q = &self.Q[0]
        cdef double* qdd = &self.qdd[0]
        cdef double* qddp = &self.qddp[0]
        cdef double* lam = &self.lam[0]
        cdef double* gs = &self.gs[0]
        cdef double* x = &self.x[0]
        cdef double* r = &self.r[0]
        cdef double P = 0.0, a = self.alpha, ia = 1.0 / self.alpha, c2, w2, scale = 1.0, d
        cdef double rmax, gmax
        cdef double tol = self.tolerance
        cdef bint converged = False
        self.nfev += 1
        self.evaluations += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        if self.c_load(t, q) != OK:
            self.status = CONSTRAINT_FAILED
            return CONSTRAINT_FAILED
        memcpy(Q, &self.qgrav[0], n * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(q, qd, t, self.fvp, Q, &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        if m == 0:
            for i in range(n):
                qdd[i] = Q[i] * self.minv[i]
        else:
            if self.ev.c_gamma(t, self.fvp, &self.gam[0]) >= 0 \
                    or self.ev.c_phi(t, self.fvp, &self.phi[0]) >= 0 \
                    or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0:
                self.status = CONSTRAINT_FAILED
                return CONSTRAINT_FAILED
            c2 = 2.0 * self.xi * self.omega
            w2 = self.omega * self.omega
            for i in range(n):
                qddp[i] = Q[i] * self.minv[i]
            self.c_jv2(qd, qddp, &self.jqd[0], &self.cvec[0])    # J qd, J M^-1 Q
            for i in range(m):
                gs[i] = (self.gam[i] - c2 * (self.jqd[i] - self.nu[i])
                         - w2 * (self.phi[i] * self.hol[i]))
            self.c_assemble()
            if self.c_factor(ia) != 0:
                self.status = SINGULAR
                return SINGULAR
            for i in range(m):
                lam[i] = 0.0
            gmax = _maxabs(gs, m)
            for k in range(self.iterations):
                for i in range(m):
                    x[i] = gs[i] + lam[i] * ia - self.cvec[i]
                self.c_solve(x)
                self.c_minv_jt(Q, x, qdd)
                # J qdd - gs = (lam_k - lam_{k+1}) / a (the solved equation): no pass
                # over J; the scale of the test from the first iterate
                rmax = 0.0
                for i in range(m):
                    d = (lam[i] - x[i]) * ia
                    if fabs(d) > rmax or d != d:
                        rmax = fabs(d)
                    lam[i] = x[i]
                self.multiplier_iterations += 1
                if k == 0:
                    scale = self.c_absjv(qdd) + gmax + 1e-300
                if rmax <= tol * scale:
                    converged = True
                    break
                if k > 0:
                    d = 0.0
                    for i in range(n):
                        if fabs(qdd[i] - qddp[i]) > d:
                            d = fabs(qdd[i] - qddp[i])
                    if d <= tol * (1.0 + _maxabs(qdd, n)):
                        converged = True
                        break
                memcpy(qddp, qdd, n * sizeof(double))
            if not converged:
                self.unconverged_evaluations += 1
            for i in range(m):
                P += lam[i] * self.jqd[i]
        for i in range(n):
            ydot[i] = qd[i]
            ydot[n + i] = qdd[i]
            if not isfinite(qdd[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[2 * n] = P
        self.power = P
        self.status = OK
        return OK

    cdef int c_project(self, double t, double* y, bint count) noexcept nogil:
        """Project y[0:n] (positions) then y[n:2n] (velocities) onto the constraints
        in place (the Python path's ``project``): 0 nothing changed (within the
        tolerance, in the singular band, or projection off), 1 projected, -status
        when an evaluation failed (y is then unchanged)."""
        cdef Py_ssize_t n = self.n, m = self.m, i, it
        cdef double* q = &self.pq[0]
        cdef double* qd = &self.pqd[0]
        cdef double* phi = &self.phi[0]
        cdef double* r = &self.r[0]
        cdef double* x = &self.x[0]
        cdef double* dq = &self.dq[0]
        cdef double tol, vtol, err, prev, ia = 1.0 / self.alpha
        cdef bint changed = False, factored, assembled
        if not self.projects or m == 0:
            return 0
        memcpy(q, y, n * sizeof(double))
        memcpy(qd, y + n, n * sizeof(double))
        tol = self.projection_tolerance * (1.0 + _maxabs(q, n))
        vtol = self.projection_tolerance * (1.0 + _maxabs(qd, n))
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return -FUNCTION_FAILED
        if self.c_load(t, q) != OK or self.ev.c_phi(t, self.fvp, phi) >= 0 \
                or self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0:
            self.status = CONSTRAINT_FAILED
            return -CONSTRAINT_FAILED
        for i in range(m):
            phi[i] *= self.hol[i]
        self.c_jv(qd, r)
        for i in range(m):
            r[i] -= self.nu[i]
        if _maxabs(phi, m) <= tol and _maxabs(r, m) <= vtol:
            return 0
        self.c_assemble()
        assembled = True                   # B belongs to the loaded J
        if self.c_near_singular():
            if count:
                self.skipped_projections += 1
            return 0
        prev = INFINITY
        for it in range(20):
            err = _maxabs(phi, m)
            if err <= tol or err >= prev:
                break
            prev = err
            if not assembled:
                self.c_assemble()
            if self.c_factor(ia) != 0:
                self.status = SINGULAR
                return -SINGULAR
            memcpy(x, phi, m * sizeof(double))
            self.c_solve(x)
            self.c_minv_jt(NULL, x, dq)
            for i in range(n):
                q[i] -= dq[i]
            changed = True
            if self.c_load(t, q) != OK or self.ev.c_phi(t, self.fvp, phi) >= 0:
                self.status = CONSTRAINT_FAILED
                return -CONSTRAINT_FAILED
            assembled = False
            for i in range(m):
                phi[i] *= self.hol[i]
        # velocities at the final q (J loaded there)
        if self.ev.c_nu(t, self.fvp, &self.nu[0]) >= 0:
            self.status = CONSTRAINT_FAILED
            return -CONSTRAINT_FAILED
        prev = INFINITY
        factored = False
        for it in range(20):
            self.c_jv(qd, r)
            for i in range(m):
                r[i] -= self.nu[i]
            err = _maxabs(r, m)
            if err <= vtol or err >= prev:
                break
            prev = err
            if not factored:
                if not assembled:
                    self.c_assemble()
                    assembled = True
                if self.c_factor(ia) != 0:
                    self.status = SINGULAR
                    return -SINGULAR
                factored = True
            memcpy(x, r, m * sizeof(double))
            self.c_solve(x)
            self.c_minv_jt(NULL, x, dq)
            for i in range(n):
                qd[i] -= dq[i]
            changed = True
        if not changed:
            return 0
        for i in range(n):
            if not (isfinite(q[i]) and isfinite(qd[i])):
                self.status = NOT_FINITE
                return -NOT_FINITE
        memcpy(y, q, n * sizeof(double))
        memcpy(y + n, qd, n * sizeof(double))
        if count:
            self.projections += 1
        return 1

    # ------------------------------------------------------------- Python level
    def project(self, double t, const double[::1] y, double[::1] out, bint count=True):
        """out[:2n] = the projected y[:2n] (the rest of out untouched); returns 1 when
        projected, 0 when nothing changed (out = y), -status on failure."""
        cdef Py_ssize_t n = self.n
        cdef int code
        if y.shape[0] < 2 * n or out.shape[0] < 2 * n:
            raise ValueError(f"y and out need {2 * n} entries")
        memcpy(&out[0], &y[0], 2 * n * sizeof(double))
        with nogil:
            code = self.c_project(t, &out[0], count)
        if code < 0:
            memcpy(&out[0], &y[0], 2 * n * sizeof(double))
        return code

    def near_singular(self, double t, const double[::1] q):
        """The singular-band test of the projection at (q, t) (Python path:
        ``Penalty._near_singular``)."""
        if q.shape[0] < self.n:
            raise ValueError(f"q needs {self.n} entries")
        if self.m == 0:
            return False
        cdef int code = 0
        with nogil:
            if self.nf:
                code = self.fn.run(t, self.fvp, &self.err)
            if code == 0:
                code = self.c_load(t, &q[0])
            if code == 0:
                self.c_assemble()
        if code != 0:
            raise RuntimeError(f"CompiledPenalty.near_singular: the evaluation at t = {t:g} "
                               f"failed (use the Python path for the named error)")
        return bool(self.c_near_singular())

    @property
    def lam_view(self):
        """The multipliers of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.lam)[:self.m]

    @property
    def qdd_view(self):
        return np.asarray(self.qdd)[:self.n]


# ----------------------------------------------------------------------------------
# compiled explicit Runge-Kutta loops (fixed step and embedded pairs)
# ----------------------------------------------------------------------------------
cdef double _rms(const double* v, const double* scale, Py_ssize_t N) noexcept nogil:
    cdef Py_ssize_t i
    cdef double acc = 0.0, r
    for i in range(N):
        r = v[i] / scale[i]
        acc += r * r
    return sqrt(acc / N) if N else 0.0


cdef inline void _stats(double[::1] stats, double h, int order, long nsteps, long nrej,
                        double nfev) noexcept:
    stats[0] = h
    stats[1] = order
    stats[2] = nsteps
    stats[3] = nrej
    stats[4] = nfev


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
           double[::1] ystep=None, long max_steps=0):
    """Integrate ``y' = f(t, y)`` (the compiled right-hand side) from (t0, y0) to t1
    by an explicit Runge-Kutta method, calling ``on_output(t, y)`` at the output
    times ``t_out[i_out:]``.

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
    ``nfev_start``, those spent before it).  Returns ``(code, t,
    y, i_out, h_abs)``: code 0 finished, 1 stopped (on_output returned True), 2 the
    right-hand side failed at a trial point (t, y = the last accepted state: the
    caller continues on the Python path, which raises the named error), 3 the step
    size fell below the round-off limit, 4 a stop condition ``stop_sign[k] *
    (y[stop_idx[k]] - stop_val[k])`` falls through zero in the step after (t, y)
    (the caller locates it), 5 ``max_steps`` > 0 steps were taken since the last
    output (or the start) without reaching the next output time (the step budget,
    ``settings.max_steps``).  Outputs beyond t are not emitted in cases 2-5.

    Hairer's DOP853 form (``mbcore.integrate.rk.EmbeddedRK`` with ``E3``; the
    built-in ``dop853``): ``E3`` given -> the error
    ``|h| e5 / sqrt((e5 + 0.01 e3) N)`` with ``e5 = |E.K / scale|^2``, ``e3 = |E3.K /
    scale|^2``; ``A_extra`` (3 x (s+4)), ``C_extra``, ``D`` (4 x (s+4)) given -> the
    7th-order continuous extension (three extra evaluations in the steps with
    outputs) instead of ``P``.

    Post-step projection: when ``f`` is a :class:`CompiledPenalty` with projections
    on, every accepted step end is projected in C (``c_project``) as the Python
    driver's ``post_step`` does: outputs exactly at the step end and the next step
    start from the projected state, outputs inside the step use the step's dense
    output, the derivative is re-evaluated there and the controller keeps its step
    size (``EmbeddedRK.resume``; fixed steps restart their grid there,
    ``FixedStepRK.restart``).  A failing projection returns code 2 from the step's
    start."""
    cdef Py_ssize_t N = y0.shape[0], s = B.shape[0], i, j, k, st
    cdef Py_ssize_t nout = t_out.shape[0], deg = P.shape[1] if adaptive else 0
    cdef double[:, ::1] K = np.zeros((s + 1, N))
    cdef double[::1] y = np.array(y0, dtype=np.float64)
    cdef double[::1] ynew = np.zeros(N)
    cdef double[::1] yold = np.zeros(N)
    cdef double[::1] fold = np.zeros(N)
    cdef double[::1] ytmp = np.zeros(N)
    cdef double[::1] scale = np.zeros(N)
    cdef double[::1] work = np.zeros(N)
    cdef double[:, ::1] Qd = np.zeros((max(deg, 1), N))
    cdef double[::1] out
    cdef double t = t0, tnew, h, err, factor, a, b, sk, tt, th, h00, h10, h01, h11
    cdef double nfev0 = f.nfev - nfev_start
    cdef long nsteps = 0, nrej = 0, istep = istep0, since = 0
    cdef double g0 = t0 if grid0 is None else grid0
    cdef bint rejected, exact
    cdef double eps = 2.220446049250313e-16
    cdef double hfix = h_abs, min_step, hatt = h_abs
    cdef Py_ssize_t nstop = 0 if stop_idx is None else stop_idx.shape[0], ks
    cdef bint hairer = E3 is not None, dense_ready
    cdef bint extra = D is not None
    cdef Py_ssize_t nx = A_extra.shape[0] if extra else 0
    cdef double e5, e3, r5, r3
    cdef double hprop = h_abs, nfev_top = 0.0      # the loop at the step's start
    cdef long nsteps_top = 0, nrej_top = 0
    cdef bint save_top = ystep is not None and ystep.shape[0] >= 4 * N + 10
    cdef double[:, ::1] KX = np.zeros((nx, N)) if extra else np.zeros((1, 1))
    cdef double[:, ::1] F7 = np.zeros((7, N)) if extra else np.zeros((1, 1))
    cdef CompiledPenalty proj = None
    cdef double[::1] yp = np.zeros(N)
    cdef bint projected = False
    cdef int pcode
    if isinstance(f, CompiledPenalty) and (<CompiledPenalty> f).projects:
        proj = <CompiledPenalty> f
    if hairer and E3.shape[0] != s + 1:
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
    for i in range(N):
        K[0, i] = f0[i]
    if max_steps < 0:
        raise ValueError(f"run_rk: max_steps = {max_steps} must be >= 0 (0: no budget)")
    while t < t1:
        if max_steps > 0 and since >= max_steps:     # the step budget (code 5)
            _stats(stats, h_abs, order, nsteps, nrej, f.nfev - nfev0)
            return LOOP_BUDGET, t, np.asarray(y), i_out, h_abs
        # ---- one accepted step from (t, y) with derivative K[0] ------------------
        hprop = h_abs
        nsteps_top = nsteps
        nrej_top = nrej
        nfev_top = f.nfev - nfev0
        if save_top:
            f.c_save()
        rejected = False
        min_step = 10.0 * eps * (fabs(t) if fabs(t) > 1e-300 else 1e-300)
        if adaptive:                    # as EmbeddedRK._step_impl
            if h_abs > max_step:
                h_abs = max_step
            if h_abs < min_step:
                h_abs = min_step
        while True:
            if adaptive:
                if h_abs < min_step:
                    _stats(stats, h_abs, order, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_STEP_TOO_SMALL, t, np.asarray(y), i_out, h_abs
                hatt = h_abs
                tnew = t + h_abs
                if tnew > t1 or fabs(t1 - tnew) < min_step:
                    tnew = t1
                h_abs = fabs(tnew - t)
            else:
                istep += 1
                tnew = g0 + istep * hfix
                if tnew - t1 > -1e-9 * hfix:
                    tnew = t1
                if tnew - t < min_step:
                    _stats(stats, tnew - t, order, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_STEP_TOO_SMALL, t, np.asarray(y), i_out, h_abs
            h = tnew - t
            for st in range(1, s):
                for i in range(N):
                    a = 0.0
                    for k in range(st):
                        a += A[st, k] * K[k, i]
                    ytmp[i] = y[i] + h * a
                if f.c_eval(t + C[st] * h, &ytmp[0], &K[st, 0]):
                    _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
            for i in range(N):
                a = 0.0
                for k in range(s):
                    a += B[k] * K[k, i]
                ynew[i] = y[i] + h * a
            if f.c_eval(tnew, &ynew[0], &K[s, 0]):
                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
            if not adaptive:
                break
            if hairer:                  # DOP853._error_norm
                e5 = 0.0
                e3 = 0.0
                for i in range(N):
                    sk = atol + rtol * (fabs(y[i]) if fabs(y[i]) > fabs(ynew[i])
                                        else fabs(ynew[i]))
                    r5 = 0.0
                    r3 = 0.0
                    for k in range(s + 1):
                        r5 += E[k] * K[k, i]
                        r3 += E3[k] * K[k, i]
                    r5 /= sk
                    r3 /= sk
                    e5 += r5 * r5
                    e3 += r3 * r3
                if e5 == 0.0 and e3 == 0.0:
                    err = 0.0
                else:
                    err = fabs(h) * e5 / sqrt((e5 + 0.01 * e3) * N)
            else:
                for i in range(N):
                    a = 0.0
                    for k in range(s + 1):
                        a += E[k] * K[k, i]
                    work[i] = h * a
                    scale[i] = atol + rtol * (fabs(y[i]) if fabs(y[i]) > fabs(ynew[i])
                                              else fabs(ynew[i]))
                err = _rms(&work[0], &scale[0], N)
            if err <= 1.0:
                if err == 0.0:
                    factor = max_factor
                else:
                    factor = safety * err ** exponent
                    if factor > max_factor:
                        factor = max_factor
                if rejected and factor > 1.0:
                    factor = 1.0
                h_abs *= factor
                break
            nrej += 1
            factor = safety * err ** exponent
            if factor < min_factor:
                factor = min_factor
            h_abs *= factor
            rejected = True
        # ---- stop conditions: met in this step -> the caller redoes it ------------
        for ks in range(nstop):
            if stop_sign[ks] * (ynew[stop_idx[ks]] - stop_val[ks]) <= 0.0:
                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                return LOOP_STOP_CONDITION, t, np.asarray(y), i_out, h_abs
        nsteps += 1
        # ---- post-step projection (the Python driver's post_step) ----------------
        projected = False
        if proj is not None:
            for i in range(N):
                yp[i] = ynew[i]
            pcode = proj.c_project(tnew, &yp[0], True)
            if pcode < 0:
                nsteps -= 1
                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
            projected = pcode == 1
        # ---- outputs in (t, tnew] ------------------------------------------------
        dense_ready = False
        since += 1
        if i_out < nout and t_out[i_out] <= tnew:
            since = 0
            stats[0] = h
            stats[1] = order
            stats[2] = nsteps
            stats[3] = nrej
            stats[4] = f.nfev - nfev0
            if ystep is not None:
                for i in range(N):
                    ystep[i] = yp[i] if projected else ynew[i]
                ystep[N] = tnew
                if ystep.shape[0] > N + 1:
                    ystep[N + 1] = h_abs       # the controller's next step (embedded)
                if ystep.shape[0] >= 4 * N + 5:
                    # the whole step (mbcore.analysis.simulation: continue without evaluating
                    # f again, or redo the step for its dense output): start time,
                    # the attempt's step size before the clip to t1, grid index,
                    # start state, f at the start and at the end (FSAL)
                    ystep[N + 2] = t
                    ystep[N + 3] = hatt
                    ystep[N + 4] = istep
                    for i in range(N):
                        ystep[N + 5 + i] = y[i]
                        ystep[2 * N + 5 + i] = K[0, i]
                        ystep[3 * N + 5 + i] = K[s, i]
                if ystep.shape[0] >= 4 * N + 10:
                    # the loop at the step's start (exact resume: the step redone)
                    ystep[4 * N + 5] = hprop
                    ystep[4 * N + 6] = g0
                    ystep[4 * N + 7] = nsteps_top
                    ystep[4 * N + 8] = nrej_top
                    ystep[4 * N + 9] = nfev_top
            if adaptive and not extra:
                for j in range(deg):
                    for i in range(N):
                        a = 0.0
                        for k in range(s + 1):
                            a += K[k, i] * P[k, j]
                        Qd[j, i] = h * a
            while i_out < nout and t_out[i_out] <= tnew:
                tt = t_out[i_out]
                outa = np.empty(N)
                out = outa
                if tt == tnew:
                    for i in range(N):
                        out[i] = yp[i] if projected else ynew[i]
                elif extra:                 # y_old + s(F0 + (1-s)(F1 + s(F2 + ...)))
                    if not dense_ready:     # DOP853._dense_output_impl, once per step
                        for j in range(nx):
                            for i in range(N):
                                a = 0.0
                                for k in range(s + 1 + j):
                                    a += A_extra[j, k] * (K[k, i] if k <= s else KX[k - s - 1, i])
                                ytmp[i] = y[i] + h * a
                            if f.c_eval(t + C_extra[j] * h, &ytmp[0], &KX[j, 0]):
                                _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                                return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
                        for i in range(N):
                            a = ynew[i] - y[i]
                            F7[0, i] = a
                            F7[1, i] = h * K[0, i] - a
                            F7[2, i] = 2.0 * a - h * (K[s, i] + K[0, i])
                            for j in range(4):
                                b = 0.0
                                for k in range(s + 1 + nx):
                                    b += D[j, k] * (K[k, i] if k <= s else KX[k - s - 1, i])
                                F7[3 + j, i] = h * b
                        dense_ready = True
                    th = (tt - t) / h
                    for i in range(N):
                        a = 0.0
                        for j in range(6, -1, -1):
                            a += F7[j, i]
                            a *= th if (6 - j) % 2 == 0 else (1.0 - th)
                        out[i] = y[i] + a
                elif adaptive:
                    th = (tt - t) / h
                    for i in range(N):
                        a = 0.0
                        sk = 1.0
                        for j in range(deg):
                            sk *= th
                            a += Qd[j, i] * sk
                        out[i] = y[i] + a
                else:                       # cubic Hermite (y, K0) -> (ynew, K[s])
                    th = (tt - t) / h
                    h00 = (1.0 + 2.0 * th) * (1.0 - th) * (1.0 - th)
                    h10 = th * (1.0 - th) * (1.0 - th)
                    h01 = th * th * (3.0 - 2.0 * th)
                    h11 = th * th * (th - 1.0)
                    for i in range(N):
                        out[i] = (h00 * y[i] + h10 * h * K[0, i] + h01 * ynew[i]
                                  + h11 * h * K[s, i])
                i_out += 1
                if on_output(tt, outa) is True:
                    t = tnew
                    for i in range(N):
                        y[i] = yp[i] if projected else ynew[i]
                    return LOOP_STOPPED, t, np.asarray(y), i_out, h_abs
        t = tnew
        if projected:
            # continue from the projected state: its derivative, the same step size
            # (EmbeddedRK.resume) or a new grid from here (FixedStepRK.restart)
            for i in range(N):
                y[i] = yp[i]
            if t < t1:
                if not adaptive:
                    g0 = tnew
                    istep = 0
                if f.c_eval(t, &y[0], &K[0, 0]):
                    _stats(stats, h, order, nsteps, nrej, f.nfev - nfev0)
                    return LOOP_EVAL_FAILED, t, np.asarray(y), i_out, h_abs
        else:
            for i in range(N):
                y[i] = ynew[i]
                K[0, i] = K[s, i]
    stats[0] = h_abs
    stats[2] = nsteps
    stats[3] = nrej
    stats[4] = f.nfev - nfev0
    return LOOP_DONE, t, np.asarray(y), i_out, h_abs


# ----------------------------------------------------------------------------------
# joint coordinates: planar tree recursions and the articulated-body solver
# (NumPy references: mbplugins.formulations.joint_coordinates.PlanarTree.positions /
# velocities and articulated_body)
#
# Joints are in tree order (a joint's parent body is the child of an earlier joint or
# the ground, parent -1); kind 0 = revolute (theta = phi_child - phi_parent), 1 =
# translational (theta = the slide along the axis u of the parent).  sp, sc, u: (dof,
# 2) row-major; cs: (cos, sin) of every body angle; the ABA work buffer is (nb + dof)
# rows of 16: body row b = the articulated inertia (symmetric: a00 a01 a02 a11 a12
# a22) and bias (3); joint row nb + k = [x0, x1, S0, S1, S2, c0, c1] (qdd_child = X
# qdd_parent + S thetadd + c with X = [[1, 0, x0], [0, 1, x1], [0, 0, 1]]), replaced
# by the outward-pass factors in _jc_aba.
# ----------------------------------------------------------------------------------
from libc.math cimport sin, cos


cdef inline void _jc_row(int kind, double Spx, double Spy, double Scx, double Scy,
                         double Ux, double Uy, double wp, double wc, double thd,
                         double* J) noexcept nogil:
    """X, S, c of one joint: Sp = A_parent (sp + theta u) (translational) or A_parent
    sp, Sc = A_child sc, U = A_parent u, wp / wc the parent's / child's angular
    velocity."""
    J[0] = -Spy + Scy
    J[1] = Spx - Scx
    if kind == 0:
        J[2] = Scy; J[3] = -Scx; J[4] = 1.0
        J[5] = -wp * wp * Spx + wc * wc * Scx
        J[6] = -wp * wp * Spy + wc * wc * Scy
    else:
        J[2] = Ux; J[3] = Uy; J[4] = 0.0
        J[5] = 2.0 * wp * thd * (-Uy) - wp * wp * Spx + wc * wc * Scx
        J[6] = 2.0 * wp * thd * Ux - wp * wp * Spy + wc * wc * Scy


cdef void _jc_kinematics(Py_ssize_t dof, const int* kind, const idx_t* parent,
                         const idx_t* child, const double* sp, const double* sc,
                         const double* u, const double* angle, const double* theta,
                         const double* thetad, double* q, double* qd, double* cs,
                         double* rows) noexcept nogil:
    """q, qd (3 per body) and cs (cos, sin per body) from theta, thetad (forward
    recursion 13.36-13.37): one sine and cosine per joint, the parent's taken from cs.
    ``rows`` (NULL: not wanted): the joint rows of the ABA work buffer (16 apart),
    filled from the same intermediate results."""
    cdef Py_ssize_t k, p, c, cb
    cdef double php, ca, sa, cc, sn, wx, wy, Spx, Spy, Scx, Scy, wp, vx, vy
    cdef double rpx, rpy, Ux = 0.0, Uy = 0.0, phic, wc
    for k in range(dof):
        p = parent[k]
        cb = child[k]
        c = 3 * cb
        if p >= 0:
            php = q[3 * p + 2]; rpx = q[3 * p]; rpy = q[3 * p + 1]
            vx = qd[3 * p]; vy = qd[3 * p + 1]; wp = qd[3 * p + 2]
            ca = cs[2 * p]; sa = cs[2 * p + 1]
        else:
            php = 0.0; rpx = 0.0; rpy = 0.0; vx = 0.0; vy = 0.0; wp = 0.0
            ca = 1.0; sa = 0.0
        if kind[k] == 0:
            phic = php + theta[k]
            wx = sp[2 * k]; wy = sp[2 * k + 1]
        else:
            phic = php - angle[k]
            wx = sp[2 * k] + theta[k] * u[2 * k]
            wy = sp[2 * k + 1] + theta[k] * u[2 * k + 1]
        q[c + 2] = phic
        cc = cos(phic); sn = sin(phic)
        cs[2 * cb] = cc; cs[2 * cb + 1] = sn
        Spx = ca * wx - sa * wy; Spy = sa * wx + ca * wy
        Scx = cc * sc[2 * k] - sn * sc[2 * k + 1]; Scy = sn * sc[2 * k] + cc * sc[2 * k + 1]
        q[c] = rpx + Spx - Scx
        q[c + 1] = rpy + Spy - Scy
        if kind[k] == 0:
            wc = wp + thetad[k]
            qd[c + 2] = wc
            qd[c] = vx - wp * Spy + wc * Scy
            qd[c + 1] = vy + wp * Spx - wc * Scx
        else:
            Ux = ca * u[2 * k] - sa * u[2 * k + 1]; Uy = sa * u[2 * k] + ca * u[2 * k + 1]
            wc = wp
            qd[c + 2] = wc
            qd[c] = vx - wp * Spy + thetad[k] * Ux + wc * Scy
            qd[c + 1] = vy + wp * Spx + thetad[k] * Uy - wc * Scx
        if rows != NULL:
            _jc_row(kind[k], Spx, Spy, Scx, Scy, Ux, Uy, wp, wc, thetad[k], rows + 16 * k)


cdef void _jc_rows(Py_ssize_t dof, const int* kind, const idx_t* parent,
                   const idx_t* child, const double* sp, const double* sc, const double* u,
                   const double* q, const double* qd, const double* cs, const double* theta,
                   const double* thetad, double* rows) noexcept nogil:
    """The joint rows of the ABA work buffer at a Cartesian state (q, qd; cs = cos,
    sin of the body angles)."""
    cdef Py_ssize_t k, p, b
    cdef double ca, sa, cc, sn, wp, wc, Wx, Wy, Spx, Spy, Scx, Scy, Ux = 0.0, Uy = 0.0
    for k in range(dof):
        p = parent[k]
        b = child[k]
        if p >= 0:
            ca = cs[2 * p]; sa = cs[2 * p + 1]; wp = qd[3 * p + 2]
        else:
            ca = 1.0; sa = 0.0; wp = 0.0
        cc = cs[2 * b]; sn = cs[2 * b + 1]; wc = qd[3 * b + 2]
        Scx = cc * sc[2 * k] - sn * sc[2 * k + 1]; Scy = sn * sc[2 * k] + cc * sc[2 * k + 1]
        if kind[k] == 0:
            Wx = sp[2 * k]; Wy = sp[2 * k + 1]
        else:
            Wx = sp[2 * k] + theta[k] * u[2 * k]; Wy = sp[2 * k + 1] + theta[k] * u[2 * k + 1]
            Ux = ca * u[2 * k] - sa * u[2 * k + 1]; Uy = sa * u[2 * k] + ca * u[2 * k + 1]
        Spx = ca * Wx - sa * Wy; Spy = sa * Wx + ca * Wy
        _jc_row(kind[k], Spx, Spy, Scx, Scy, Ux, Uy, wp, wc, thetad[k], rows + 16 * k)


cdef void _jc_aba(Py_ssize_t dof, Py_ssize_t nb, const idx_t* parent, const idx_t* child,
                  const double* mass, const double* Q, double* work, double* thdd,
                  double* qdd) noexcept nogil:
    """The articulated-body recursion (``articulated_body``) once the joint rows of
    ``work`` hold X, S, c.  Inward: the articulated inertia I and bias p of every
    subtree (``I = M + sum X^T Ia X``, ``Ia = I - U U^T / D``, ``p = -Q + sum X^T
    pa``, ``pa = Ia c + p - U (S.p) / D``), written as ``X^T Ia X = X^T I X - V V^T /
    D`` and ``X^T pa = X^T (I c + p) - V g`` with ``V = X^T U``, ``g = (U.c + S.p) /
    D`` so that one multiply follows the division on the serial path of a chain.
    Outward: ``thetadd = -(U.(X qdd_parent + c) + S.p) / D = -h.qdd_parent - g`` with
    ``h = V / D``, and ``qdd_child = F qdd_parent + f`` (``F = X - S h^T``, ``f = c - S
    g``: one 3x3 product per joint on the serial path), kept in the joint row in
    place of X, S, c: [h, g, F (row-major), f]."""
    cdef Py_ssize_t k, b, p
    cdef double* A
    cdef double* P
    cdef double* J
    cdef const double* ap
    cdef double S0, S1, S2, U0, U1, U2, V2, iD, g, x0, x1, c0, c1, D1, D2, D3
    cdef double X02, X12, X22, r0, r1, r2, h0, h1, h2, a0, a1, a2
    for b in range(nb):
        A = work + 16 * b
        A[0] = mass[3 * b]; A[1] = 0.0; A[2] = 0.0
        A[3] = mass[3 * b + 1]; A[4] = 0.0; A[5] = mass[3 * b + 2]
        A[6] = -Q[3 * b]; A[7] = -Q[3 * b + 1]; A[8] = -Q[3 * b + 2]
    for k in range(dof - 1, -1, -1):
        b = child[k]
        p = parent[k]
        A = work + 16 * b
        J = work + 16 * (nb + k)
        x0 = J[0]; x1 = J[1]
        S0 = J[2]; S1 = J[3]; S2 = J[4]
        c0 = J[5]; c1 = J[6]
        U0 = A[0] * S0 + A[1] * S1 + A[2] * S2
        U1 = A[1] * S0 + A[3] * S1 + A[4] * S2
        U2 = A[2] * S0 + A[4] * S1 + A[5] * S2
        # D = S^T I S from I directly (a shorter dependency chain than S.U)
        D1 = A[0] * (S0 * S0) + A[1] * (2.0 * S0 * S1)
        D2 = A[3] * (S1 * S1) + A[2] * (2.0 * S0 * S2)
        D3 = A[5] * (S2 * S2) + A[4] * (2.0 * S1 * S2)
        iD = 1.0 / ((D1 + D2) + D3)
        V2 = U2 + x0 * U0 + x1 * U1
        g = ((U0 * c0 + U1 * c1) + (S0 * A[6] + S1 * A[7] + S2 * A[8])) * iD
        # the outward map qdd_child = F qdd_parent + f, F = X - S h^T, f = c - S g
        # (replaces x, S, c in the joint row: [h0, h1, h2, g, F (9), f (3)])
        h0 = U0 * iD; h1 = U1 * iD; h2 = V2 * iD
        J[0] = h0; J[1] = h1; J[2] = h2; J[3] = g
        J[4] = 1.0 - S0 * h0; J[5] = -S0 * h1; J[6] = x0 - S0 * h2
        J[7] = -S1 * h0; J[8] = 1.0 - S1 * h1; J[9] = x1 - S1 * h2
        J[10] = -S2 * h0; J[11] = -S2 * h1; J[12] = 1.0 - S2 * h2
        J[13] = c0 - S0 * g; J[14] = c1 - S1 * g; J[15] = -S2 * g
        if p < 0:
            continue
        X02 = A[2] + x0 * A[0] + x1 * A[1]
        X12 = A[4] + x0 * A[1] + x1 * A[3]
        X22 = A[5] + x0 * A[2] + x1 * A[4] + x0 * X02 + x1 * X12
        r0 = A[0] * c0 + A[1] * c1 + A[6]
        r1 = A[1] * c0 + A[3] * c1 + A[7]
        r2 = A[2] * c0 + A[4] * c1 + A[8]
        P = work + 16 * p
        P[0] = (P[0] + A[0]) - (U0 * U0) * iD
        P[1] = (P[1] + A[1]) - (U0 * U1) * iD
        P[2] = (P[2] + X02) - (U0 * V2) * iD
        P[3] = (P[3] + A[3]) - (U1 * U1) * iD
        P[4] = (P[4] + X12) - (U1 * V2) * iD
        P[5] = (P[5] + X22) - (V2 * V2) * iD
        P[6] = (P[6] + r0) - U0 * g
        P[7] = (P[7] + r1) - U1 * g
        P[8] = (P[8] + (r2 + x0 * r0 + x1 * r1)) - V2 * g
    for k in range(dof):
        b = child[k]
        p = parent[k]
        J = work + 16 * (nb + k)
        if p >= 0:
            ap = qdd + 3 * p
            a0 = ap[0]; a1 = ap[1]; a2 = ap[2]
            qdd[3 * b] = (J[4] * a0 + J[5] * a1) + (J[6] * a2 + J[13])
            qdd[3 * b + 1] = (J[7] * a0 + J[8] * a1) + (J[9] * a2 + J[14])
            qdd[3 * b + 2] = (J[10] * a0 + J[11] * a1) + (J[12] * a2 + J[15])
            thdd[k] = -(J[0] * a0 + J[1] * a1 + J[2] * a2) - J[3]
        else:
            qdd[3 * b] = J[13]
            qdd[3 * b + 1] = J[14]
            qdd[3 * b + 2] = J[15]
            thdd[k] = -J[3]


cdef _jc_check(const int[::1] kind, const idx_t[::1] parent, const idx_t[::1] child,
               const double[:, ::1] sp, const double[:, ::1] sc, const double[:, ::1] u,
               Py_ssize_t nb, str where, bint strict):
    """Sizes and body indices of a joint table (``strict``: a tree in order reaching
    every body once: each parent is the ground or an earlier joint's child)."""
    cdef Py_ssize_t dof = kind.shape[0], k
    if (parent.shape[0] != dof or child.shape[0] != dof or sp.shape[0] != dof
            or sc.shape[0] != dof or u.shape[0] != dof or sp.shape[1] != 2
            or sc.shape[1] != 2 or u.shape[1] != 2):
        raise ValueError(f"{where}: array sizes do not match")
    for k in range(dof):
        if not (0 <= child[k] < nb) or not (-1 <= parent[k] < nb) or kind[k] not in (0, 1):
            raise ValueError(f"{where}: body index or joint kind out of range")
    if strict:
        if dof != nb:
            raise ValueError(f"{where}: a tree of {nb} bodies needs {nb} joints, not {dof}")
        seen = np.zeros(nb, dtype=bool)
        for k in range(dof):
            if parent[k] >= 0 and not seen[parent[k]]:
                raise ValueError(f"{where}: joint {k}: its parent body is not reached by "
                                 f"an earlier joint (joints must be in tree order)")
            if seen[child[k]]:
                raise ValueError(f"{where}: body {child[k]} is reached by two joints")
            seen[child[k]] = True


def jc_planar_kinematics(const int[::1] kind, const idx_t[::1] parent,
                         const idx_t[::1] child, const double[:, ::1] sp,
                         const double[:, ::1] sc, const double[:, ::1] u,
                         const double[::1] angle, const double[::1] theta,
                         const double[::1] thetad, double[::1] q, double[::1] qd):
    """q, qd (3 per body) of a planar tree from the joint coordinates, joints in
    tree order (parent -1: the ground)."""
    cdef Py_ssize_t dof = kind.shape[0], nb = q.shape[0] // 3
    if (angle.shape[0] != dof or theta.shape[0] != dof or thetad.shape[0] != dof
            or q.shape[0] != qd.shape[0]):
        raise ValueError("jc_planar_kinematics: array sizes do not match")
    _jc_check(kind, parent, child, sp, sc, u, nb, "jc_planar_kinematics", False)
    if dof == 0:
        return
    cdef double[::1] cs = np.zeros(2 * nb)
    with nogil:
        _jc_kinematics(dof, &kind[0], &parent[0], &child[0], &sp[0, 0], &sc[0, 0],
                       &u[0, 0], &angle[0], &theta[0], &thetad[0], &q[0], &qd[0], &cs[0],
                       NULL)


def jc_planar_aba(const int[::1] kind, const idx_t[::1] parent, const idx_t[::1] child,
                  const double[:, ::1] sp, const double[:, ::1] sc, const double[:, ::1] u,
                  const double[::1] mass, const double[::1] q, const double[::1] qd,
                  const double[::1] theta, const double[::1] thetad, const double[::1] Q,
                  double[::1] thdd, double[::1] qdd, double[:, ::1] work):
    """The articulated-body recursion of ``articulated_body`` in C: thdd (dof), qdd
    (3 nb).  ``work``: (nb + dof, 16) scratch (the articulated inertia and bias per
    body; X, S, c and the outward-pass factors per joint)."""
    cdef Py_ssize_t dof = kind.shape[0], nb = q.shape[0] // 3, b
    if (work.shape[0] < nb + dof or work.shape[1] != 16 or thdd.shape[0] != dof
            or qdd.shape[0] != 3 * nb or mass.shape[0] != 3 * nb or Q.shape[0] != 3 * nb
            or qd.shape[0] != 3 * nb or theta.shape[0] != dof or thetad.shape[0] != dof):
        raise ValueError("jc_planar_aba: array sizes do not match (work: nb + dof rows "
                         "of 16)")
    _jc_check(kind, parent, child, sp, sc, u, nb, "jc_planar_aba", False)
    if dof == 0:
        return
    cdef double[::1] cs = np.zeros(2 * nb)
    with nogil:
        for b in range(nb):
            cs[2 * b] = cos(q[3 * b + 2])
            cs[2 * b + 1] = sin(q[3 * b + 2])
        _jc_rows(dof, &kind[0], &parent[0], &child[0], &sp[0, 0], &sc[0, 0], &u[0, 0],
                 &q[0], &qd[0], &cs[0], &theta[0], &thetad[0], &work[nb, 0])
        _jc_aba(dof, nb, &parent[0], &child[0], &mass[0], &Q[0], &work[0, 0], &thdd[0],
                &qdd[0])


cdef class CompiledJC(CompiledODE):
    """``CompiledJC(kind, parent, child, sp, sc, u, angle, mass, qgrav,
    force_evaluator=None, functions=None)``: the right-hand side of the
    joint-coordinate formulation of a planar tree without cut rows
    (``mbplugins.formulations.joint_coordinates``), ``y = [theta; thetadot; W]`` ->
    ``[thetadot; thetaddot; P_nc]`` in one C call: the forward recursion (Cartesian q,
    qd), the applied forces (gravity ``qgrav`` + the compiled force elements, with
    the time functions they read), the articulated-body solver.  The tree joints do
    no work, so ``W' = P_nc`` (the power of the non-conservative forces).  The joint
    table is that of ``jc_planar_kinematics`` (tree order, every body reached once);
    ``mass``: the diagonal mass matrix (3 per body)."""

    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t dof, nb, nf
    cdef int[::1] kind
    cdef idx_t[::1] parent, child
    cdef double[:, ::1] sp, sc, u, work
    cdef double[::1] angle, mass, qgrav, fv, q, qd, Q, qdd, thdd, cs
    cdef double* fvp
    cdef ErrInfo err
    cdef readonly double power

    def __cinit__(self, kind, parent, child, sp, sc, u, angle, mass, qgrav,
                  ForceEvaluator force_evaluator=None, Evaluator functions=None):
        self.kind = np.array(kind, dtype=np.intc).reshape(-1)
        self.parent = np.array(parent, dtype=np.intp).reshape(-1)
        self.child = np.array(child, dtype=np.intp).reshape(-1)
        self.sp = np.array(sp, dtype=np.float64).reshape(-1, 2)
        self.sc = np.array(sc, dtype=np.float64).reshape(-1, 2)
        self.u = np.array(u, dtype=np.float64).reshape(-1, 2)
        self.angle = np.array(angle, dtype=np.float64).reshape(-1)
        self.mass = np.array(mass, dtype=np.float64).reshape(-1)
        self.qgrav = np.array(qgrav, dtype=np.float64).reshape(-1)
        dof = self.kind.shape[0]
        nb = self.mass.shape[0] // 3
        if dof == 0 or self.mass.shape[0] != 3 * nb or self.qgrav.shape[0] != 3 * nb \
                or self.angle.shape[0] != dof:
            raise ValueError("CompiledJC: array sizes do not match (dof joints, 3 nb "
                             "masses and gravity forces)")
        _jc_check(self.kind, self.parent, self.child, self.sp, self.sc, self.u, nb,
                  "CompiledJC", True)
        if not np.all(np.asarray(self.mass) > 0.0):
            raise ValueError("CompiledJC: every body needs a positive mass and inertia")
        _check_forces("CompiledJC", force_evaluator, 3 * nb,
                      0 if functions is None else functions.size)
        if not (np.all(np.isfinite(self.sp)) and np.all(np.isfinite(self.sc))
                and np.all(np.isfinite(self.u)) and np.all(np.isfinite(self.angle))
                and np.all(np.isfinite(self.mass)) and np.all(np.isfinite(self.qgrav))):
            raise ValueError("CompiledJC: sp, sc, u, angle, mass and qgrav must be finite")
        self.fe = force_evaluator
        self.fn = functions
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.n = dof
        self.dof = dof
        self.nb = nb
        self.cartesian = False
        self.q = np.zeros(3 * nb)
        self.qd = np.zeros(3 * nb)
        self.Q = np.zeros(3 * nb)
        self.qdd = np.zeros(3 * nb)
        self.thdd = np.zeros(dof)
        self.cs = np.zeros(2 * nb)
        self.work = np.zeros((nb + dof, 16))
        self.nfev = 0
        self.status = OK

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2 dof+1] = [thetadot; thetaddot; P_nc] at (t, y[0:2 dof])."""
        cdef Py_ssize_t dof = self.dof, nb = self.nb, i
        cdef double P = 0.0
        cdef double* thdd = &self.thdd[0]
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return FUNCTION_FAILED
        _jc_kinematics(dof, &self.kind[0], &self.parent[0], &self.child[0], &self.sp[0, 0],
                       &self.sc[0, 0], &self.u[0, 0], &self.angle[0], y, y + dof,
                       &self.q[0], &self.qd[0], &self.cs[0], &self.work[nb, 0])
        memcpy(&self.Q[0], &self.qgrav[0], 3 * nb * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(&self.q[0], &self.qd[0], t, self.fvp, &self.Q[0],
                                &P) >= 0:
                self.status = FORCE_FAILED
                return FORCE_FAILED
        _jc_aba(dof, nb, &self.parent[0], &self.child[0], &self.mass[0], &self.Q[0],
                &self.work[0, 0], thdd, &self.qdd[0])
        for i in range(dof):
            ydot[i] = y[dof + i]
            ydot[dof + i] = thdd[i]
            if not isfinite(thdd[i]):
                self.status = NOT_FINITE
                return NOT_FINITE
        ydot[2 * dof] = P
        self.power = P
        self.status = OK
        return OK

    @property
    def q_view(self):
        """Cartesian q of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.q)

    @property
    def qd_view(self):
        return np.asarray(self.qd)

    @property
    def qdd_view(self):
        """Cartesian qdd of the last evaluation."""
        return np.asarray(self.qdd)

    @property
    def Q_view(self):
        """The applied forces (gravity + force elements) of the last evaluation."""
        return np.asarray(self.Q)
