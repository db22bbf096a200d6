# cython: language_level=3
"""Compiled right-hand side of the equations of motion (``mbcore._ext._dynamics``).

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

It applies to systems whose elements all have compiled kernels (dense Jacobian, or
sparse with the compiled sparse Schur kernel), without massless coordinates;
anything else keeps the Python path.  ``rows`` (the independent constraint rows of
a redundant set, Nikravesh (1988), App. C): Phi_q, gamma (and the Baumgarte terms)
are evaluated whole and only the kept rows enter the Schur solve; the removed rows'
multipliers are zero (NumPy reference: ``AccelerationSolver`` with ``set_rows``).  A non-zero status (singular B, a time function or force element
that cannot be evaluated, a non-finite result) makes the caller repeat the
evaluation on the Python path, which raises the named error (or applies the
least-squares multipliers).

:class:`CompiledODE` is the base the compiled step loop (``mbcore._ext._steploop``)
steps (``c_eval``; ``c_jac``, the
Newton Jacobian of the bdf / θ loops: forward differences by default, the
semi-analytic DI/CS Jacobian for ``CompiledRHS`` of dense planar systems of compiled
force elements — NumPy reference ``mbcore.solve.dijac``; ``c_post_step``, a
projection after every accepted step when ``post_step`` is set: ``CompiledRHS``
of the projection formulation, :meth:`CompiledRHS.enable_projection`).  The compiled
twins of the plugin formulations derive from it in the plugins' own extension
modules (``mbplugins._ext``: ``_penalty``, ``_dae``, ``_jc``, ``_cp``,
``_jcspatial``).
"""
from libc.math cimport fabs, isfinite, sqrt, INFINITY
from libc.string cimport memcpy, memset

include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

from mbcore._ext._planar cimport PlanarEvaluator
from mbcore._ext._forces cimport ForceEvaluator, ForceJacobianEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo
from mbcore._ext._sparse cimport SparseSchur, idx_t

import numpy as np

include "_schur.pxi"
include "_bounds.pxi"
include "_eval_status.pxi"
include "_projected.pxi"
include "_spatial_mass.pxi"
include "_subnormals.pxi"

cdef inline double _pj_maxabs(const double* v, Py_ssize_t k) noexcept nogil:
    """max |v_i|, infinite when an entry is NaN (the tolerance test then fails, as
    NumPy's max propagates the NaN)."""
    cdef double a = 0.0, d
    cdef Py_ssize_t i
    for i in range(k):
        d = fabs(v[i])
        if d > a:
            a = d
        elif d != d:
            return INFINITY
    return a


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

    cdef int c_post_step(self, double t, double* y, bint count) noexcept nogil:
        """After an accepted step (``post_step`` set): project ``y`` in place; 0
        nothing changed, 1 changed, -status when an evaluation failed (y unchanged).
        None here."""
        return 0

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
    gravity forces, ``minv`` the inverse of the diagonal mass matrix.  ``rows``: the
    constraint rows the solve keeps (distinct rows of the System's m; default all):
    the multipliers of the others are zero (``lam_view`` has all m); sparse: the
    ``sparse_solver`` must be built on the same rows (``m`` = their number, ``m_full``
    the System's).  The semi-analytic Jacobian (:meth:`enable_jacobian`) is refused
    on a subset of rows."""

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
    # sparse: J's used entries in the solver's order (spatial: J T's, built straight
    # from the Jacobian data: direct entries dst <- src, pairs' used columns cpair)
    # and the velocities in the solver's columns (the power lam . (Phi_q qd))
    cdef idx_t[::1] ux_dst, ux_src, ux_pair
    cdef double[::1] jused, vhat
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
    cdef double[::1] out_ydot           # output_row's scratch derivative
    # the rows bound by bind_output_rows (output_row_at)
    cdef double[:, ::1] ob_Y, ob_S, ob_qdd, ob_lam, ob_jac, ob_phi, ob_nu, ob_fv
    cdef double[::1] ob_T, ob_stat
    cdef Py_ssize_t ob_cap
    cdef object ob_owner
    cdef bint ob_eval, ob_has_jac, ob_has_phi, ob_has_nu, ob_has_fv
    # the kept constraint rows (a proper subset: ``subset``; dense: J's and gamma's
    # rows gathered into jk / gk, the Schur solve's multipliers in lk)
    cdef idx_t[::1] rows
    cdef readonly Py_ssize_t m_kept
    cdef readonly bint subset
    cdef double[::1] jk, gk, lk
    # the post-step projection (enable_projection): weights W^-1, the tolerance
    # factor, work (positions, velocities, Phi, the residual, multipliers,
    # corrections, a zero force)
    cdef readonly bint projects
    cdef readonly long projections
    cdef double proj_tol
    cdef bint pj_absolute
    cdef double[::1] mv_phi       # max_violation's Phi
    cdef double[::1] pj_winv, pj_q, pj_qd, pj_phi, pj_r, pj_x, pj_dq, pj_zero

    def __cinit__(self, PlanarEvaluator evaluator not None, ForceEvaluator force_evaluator,
                  Evaluator functions, Py_ssize_t n, Py_ssize_t m, double[::1] jdata not None,
                  double[::1] qgrav not None, double[::1] minv not None, double alpha=0.0,
                  double beta=0.0, SparseSchur sparse_solver=None,
                  idx_t[::1] indptr=None, idx_t[::1] indices=None, spatial=None,
                  rows=None):
        r = _kept_rows(rows, m, "CompiledRHS")
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
                    or sparse_solver.m != r.shape[0] \
                    or jdata.shape[0] < indices.shape[0]:
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
        self.mv_phi = np.zeros(max(m, 1))
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
        self.out_ydot = np.zeros(2 * n + 1)
        self.nfev = 0
        self.status = 0
        self.nsp = 0
        if spatial is not None:
            # the spatial mass blocks: own copies (minv: the diagonal part, the p
            # columns are overwritten by D at every evaluation)
            (self.nsp, self.sp_pidx, self.sp_pos, self.sp_bod, self.sp_J, self.sp_V,
             self.sp_lam, self.sp_alpha, self.sp_E, self.minv) = spatial_blocks(
                spatial, n, jdata.shape[0], "CompiledRHS")
            self.jhat = np.zeros(jdata.shape[0])
        if self.sparse and self.nsp:
            self._used_map()
        self.vhat = np.zeros(max(n, 1))
        self.rows = r if r.shape[0] else np.zeros(1, dtype=np.intp)
        self.m_kept = r.shape[0]
        self.subset = self.m_kept < m
        if self.subset and self.sparse:
            used = np.asarray(sparse_solver.rowid)
            if not np.array_equal(np.sort(used), np.sort(r)):
                raise ValueError("CompiledRHS: the sparse solver uses other rows than "
                                 "rows")
        dense_sub = self.subset and not self.sparse
        self.jk = np.zeros(max(self.m_kept * n, 1) if dense_sub else 1)
        self.gk = np.zeros(max(self.m_kept, 1) if dense_sub else 1)
        self.lk = np.zeros(max(self.m_kept, 1) if dense_sub else 1)
        self.projects = False
        self.projections = 0

    @property
    def handles_post_step(self):
        """The compiled loops run the post-step projection in C (``c_post_step``):
        True once :meth:`enable_projection` succeeded."""
        return self.projects

    def enable_projection(self, double[::1] winv not None, double tolerance,
                          bint absolute=False):
        """Project after every accepted step (``post_step``; TAM 674 (2003), lecture
        of 7 April): positions onto ``Phi(q, t) = 0`` by up to 10 Gauss-Newton
        steps ``dq = -W^-1 Phi_q^T (Phi_q W^-1 Phi_q^T)^-1 Phi``, then velocities
        onto ``Phi_q qd = nu`` in one linear step, with the weights ``winv`` (W^-1,
        positive) and the tolerance ``tolerance (1 + max|q|)`` on |Phi| and on the
        velocity residual (``absolute``: ``tolerance`` itself, and the velocities
        are projected only with the positions: a step whose position violations
        are within it is left alone, a gate on the drift of the direct
        integration).  Spatial bodies: in the System's Euler-parameter columns
        (the Jacobian data, not the transformed one).  The linear solves are the
        dense Schur solve with minv = W^-1, Q = 0 (Nikravesh (1988), Prob. 10.9).
        NumPy reference: ``mbplugins.formulations.projection.Projection.project``
        (least squares).  Dense Jacobians on every row only: returns False (not
        enabled) for a sparse solve, a subset of the rows or no constraints."""
        cdef Py_ssize_t n = self.n
        if self.sparse or self.subset or self.m == 0:
            return False
        w = np.ascontiguousarray(winv, dtype=float)
        if w.shape[0] != n or not np.all(np.isfinite(w)) or not np.all(w > 0):
            raise ValueError(f"CompiledRHS.enable_projection: winv needs {n} positive "
                             f"finite weights")
        if not tolerance > 0:
            raise ValueError("CompiledRHS.enable_projection: the tolerance must be "
                             "positive")
        self.pj_winv = w.copy()
        self.proj_tol = tolerance
        self.pj_absolute = absolute
        self.pj_q = np.zeros(n)
        self.pj_qd = np.zeros(n)
        self.pj_dq = np.zeros(n)
        self.pj_zero = np.zeros(n)
        self.pj_phi = np.zeros(self.m)
        self.pj_r = np.zeros(self.m)
        self.pj_x = np.zeros(self.m)
        self.projects = True
        self.post_step = True
        return True

    def max_violation(self, double t, double[::1] y not None):
        """``max |Phi(q, t)|`` at ``q = y[0:n]``, evaluated in C (the drift gate's test
        where the gate itself is not in C, e.g. a sparse Jacobian; NumPy reference:
        ``System.phi``); infinite when an evaluation fails (the caller's Python path
        then names the error)."""
        cdef Py_ssize_t n = self.n
        if y.shape[0] < n:
            raise ValueError(f"y needs {n} entries")
        if self.m == 0:
            return 0.0
        memcpy(self.ev.qx, &y[0], n * sizeof(double))
        if self.nf and self.fn.run(t, self.fvp, &self.err) != 0:
            return INFINITY
        if self.ev.c_phi(t, self.fvp, &self.mv_phi[0]) >= 0:
            return INFINITY
        return _pj_maxabs(&self.mv_phi[0], self.m)

    def take_projections(self):
        """The projections counted since the last call (reset to zero)."""
        k = self.projections
        self.projections = 0
        return k

    def post_step_at(self, double t, double[::1] y not None, bint count=True):
        """:meth:`c_post_step` from Python (y projected in place): 1 changed, 0 not,
        -status on failure (y unchanged)."""
        if y.shape[0] < 2 * self.n:
            raise ValueError(f"y needs {2 * self.n} entries")
        return self.c_post_step(t, &y[0], count)

    cdef int c_pj_step(self, const double* J, const double* b, double* z) noexcept nogil:
        """One minimum-norm correction of the projection: ``z -= W^-1 J^T (J W^-1
        J^T)^-1 b`` (the dense Schur kernel with M^-1 = W^-1 and Q = 0); SINGULAR
        (status set, z unchanged) when ``J W^-1 J^T`` is singular, else 0."""
        cdef Py_ssize_t i
        cdef double* dq = &self.pj_dq[0]
        if dense_schur(self.n, self.m, J, &self.pj_winv[0], &self.pj_zero[0], b,
                       &self.C[0], &self.B[0], dq, &self.pj_x[0]):
            self.status = SINGULAR
            return SINGULAR
        for i in range(self.n):
            z[i] -= dq[i]
        return 0

    cdef int c_post_step(self, double t, double* y, bint count) noexcept nogil:
        """The projection of :meth:`enable_projection` on y[0:2n] in place: 0 nothing
        changed (or projection off), 1 projected, -status when an evaluation or solve
        failed or the positions did not converge in 10 iterations (y unchanged;
        the Python path then repeats the step and names the error)."""
        if not self.projects:
            return 0
        cdef Py_ssize_t n = self.n, m = self.m, i, it
        cdef double* q = &self.pj_q[0]
        cdef double* qd = &self.pj_qd[0]
        cdef double* phi = &self.pj_phi[0]
        cdef double* r = &self.pj_r[0]
        cdef double* J = &self.jdata[0]
        cdef double tol, acc
        cdef bint changed = False
        memcpy(q, y, n * sizeof(double))
        memcpy(qd, y + n, n * sizeof(double))
        tol = 0.0
        if self.pj_absolute:
            tol = self.proj_tol
        else:
            for i in range(n):
                if fabs(q[i]) > tol:
                    tol = fabs(q[i])
            tol = self.proj_tol * (1.0 + tol)
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = FUNCTION_FAILED
                return -FUNCTION_FAILED
        memcpy(self.ev.qx, q, n * sizeof(double))
        memcpy(self.ev.qdx, qd, n * sizeof(double))
        if self.ev.c_phi(t, self.fvp, phi) >= 0:
            self.status = CONSTRAINT_FAILED
            return -CONSTRAINT_FAILED
        for it in range(10):
            if _pj_maxabs(phi, m) <= tol:
                break
            if self.ev.c_jacobian(t, self.fvp, J) >= 0:
                self.status = CONSTRAINT_FAILED
                return -CONSTRAINT_FAILED
            if self.c_pj_step(J, phi, q):
                return -SINGULAR
            changed = True
            memcpy(self.ev.qx, q, n * sizeof(double))
            if self.ev.c_phi(t, self.fvp, phi) >= 0:
                self.status = CONSTRAINT_FAILED
                return -CONSTRAINT_FAILED
        if not (_pj_maxabs(phi, m) <= tol):
            self.status = NEWTON_FAILED
            return -NEWTON_FAILED
        if self.pj_absolute and not changed:
            return 0                      # the gate: velocities move with the positions
        # velocities: r = Phi_q qd - nu at the final q
        if self.ev.c_jacobian(t, self.fvp, J) >= 0 or self.ev.c_nu(t, self.fvp, r) >= 0:
            self.status = CONSTRAINT_FAILED
            return -CONSTRAINT_FAILED
        for i in range(m):
            acc = 0.0
            for it in range(n):
                acc += J[i * n + it] * qd[it]
            r[i] = acc - r[i]
        if changed or not (_pj_maxabs(r, m) <= tol):
            if self.c_pj_step(J, r, qd):
                return -SINGULAR
            changed = True
        if not changed:
            return 0
        if store_projected(n, q, qd, y) < 0:
            self.status = NOT_FINITE
            return -NOT_FINITE
        if count:
            self.projections += 1
        return 1

    @property
    def kept_rows(self):
        """The constraint rows the solve uses (a copy): all, or those given as
        ``rows``."""
        return np.array(self.rows)[:self.m_kept]

    def _used_map(self):
        """The map from the Jacobian data to the solver's used entries of J T
        (``_spatial_jacobian_used``)."""
        jpos = np.asarray(self.sp.jpos)
        jlen = self.jdata.shape[0]
        inv = np.full(jlen, -1, dtype=np.intp)
        inv[jpos] = np.arange(len(jpos), dtype=np.intp)
        pos = np.asarray(self.sp_pos).reshape(-1)
        self.ux_pair = np.concatenate([inv[pos], [0]]).astype(np.intp)
        isp = np.zeros(jlen, dtype=bool)
        isp[pos] = True
        direct = np.nonzero(~isp[jpos])[0]
        self.ux_dst = np.concatenate([direct, [0]]).astype(np.intp)
        self.ux_src = np.concatenate([jpos[direct], [0]]).astype(np.intp)
        self.jused = np.zeros(max(len(jpos), 1))

    # ------------------------------------------------------------------ C level
    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        """ydot[0:2n+1] = [qd; qdd; W'] at (t, y[0:2n]).  Returns a status code.
        Evaluated with subnormal numbers flushed to zero (``_subnormals.pxi``)."""
        cdef unsigned int mode = mbcore_flush_subnormals()
        cdef int status = self.c_eval_flushed(t, y, ydot)
        mbcore_restore_fp_mode(mode)
        return status

    cdef int c_eval_flushed(self, double t, const double* y, double* ydot) noexcept nogil:
        """:meth:`c_eval` in the caller's floating-point mode."""
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
        if self.sparse:
            # J's used entries (spatial: of J T, built from the Jacobian data) and
            # the power lam . (Phi_q qd) = (J T)^T lam . T^-1 qd while forming J^T lam
            if self.nsp:
                _spatial_forward(self.nsp, &self.sp_pidx[0, 0], &self.sp_J[0, 0, 0],
                                 &self.sp_V[0, 0, 0], &self.sp_lam[0, 0],
                                 &self.sp_alpha[0], &self.sp_E[0, 0], &self.minv[0], q,
                                 qd, Q)
                _spatial_jacobian_used(self.sp_pos.shape[0], &self.sp_pos[0, 0],
                                       &self.sp_bod[0], &self.sp_E[0, 0], J,
                                       self.ux_dst.shape[0] - 1, &self.ux_dst[0],
                                       &self.ux_src[0], &self.ux_pair[0],
                                       &self.jused[0])
                _spatial_velocity(self.nsp, &self.sp_pidx[0, 0], &self.sp_E[0, 0], qd,
                                  n, &self.vhat[0])
                i = self.sp._solve_used(&self.jused[0], &self.minv[0], Q, gam, qdd, lam,
                                        &self.vhat[0], &acc)
            elif self.sp.jdirect:
                i = self.sp._solve_used(J, &self.minv[0], Q, gam, qdd, lam, qd, &acc)
            else:
                i = self.sp._solve(self.jdata, self.minv, self.Q, self.gam, self.qdd,
                                   self.lam)
                acc = 0.0
                for j in range(m):
                    acc += lam[j] * self.c_jrow_dot(j, qd)
            if i:
                self.status = SINGULAR
                return SINGULAR
            P += acc
            if self.nsp:
                self.c_spatial_back(qdd)
        else:
            if self.nsp:
                self.c_spatial(q, qd, Q)
                J = &self.jhat[0]
            if self.subset:
                return self.c_eval_rows(J, Q, qd, P, ydot)
            if self.c_schur(J, Q, gam, qdd, lam):
                self.status = SINGULAR
                return SINGULAR
            if self.nsp:
                self.c_spatial_back(qdd)
            # W' = P_nc + lam . (Phi_q qd)
            for i in range(m):
                P += lam[i] * self.c_jrow_dot(i, qd)
        return self.c_finish(qd, qdd, P, ydot)

    cdef inline int c_finish(self, const double* qd, const double* qdd, double P,
                             double* ydot) noexcept nogil:
        """The end of an evaluation: ``ydot = [qd; qdd; P]`` (P: the work rate), OK, or
        NOT_FINITE at the first acceleration that is not finite."""
        cdef Py_ssize_t n = self.n, i
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

    cdef int c_eval_rows(self, const double* J, const double* Q, const double* qd,
                         double P, double* ydot) noexcept nogil:
        """The dense solve of :meth:`c_eval_flushed` on the kept rows: J's (spatial:
        the transformed J's) and gamma's kept rows gathered, the Schur complement of
        those rows, lam scattered to every row (zero on the removed ones, which carry
        no load; Nikravesh (1988), App. C) and ``W' = P_nc + lam . (Phi_q qd)`` over
        the kept rows."""
        cdef Py_ssize_t n = self.n, mk = self.m_kept, i, r
        cdef double* jk = &self.jk[0]
        cdef double* gk = &self.gk[0]
        cdef double* lk = &self.lk[0]
        cdef double* lam = &self.lam[0]
        cdef double* qdd = &self.qdd[0]
        for i in range(mk):
            r = self.rows[i]
            memcpy(jk + i * n, J + r * n, n * sizeof(double))
            gk[i] = self.gam[r]
        if dense_schur(n, mk, jk, &self.minv[0], Q, gk, &self.C[0], &self.B[0], qdd, lk):
            self.status = SINGULAR
            return SINGULAR
        if self.nsp:
            self.c_spatial_back(qdd)
        memset(lam, 0, self.m * sizeof(double))
        for i in range(mk):
            r = self.rows[i]
            lam[r] = lk[i]
            P += lk[i] * self.c_jrow_dot(r, qd)
        return self.c_finish(qd, qdd, P, ydot)

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
        CompiledRHS), and so does a subset of the constraint rows (``rows``).  Returns
        True when enabled."""
        cdef Py_ssize_t n = self.n, m = self.m, size
        if self.sparse or self.nsp or self.subset:
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
        _spatial_forward(self.nsp, &self.sp_pidx[0, 0], &self.sp_J[0, 0, 0],
                         &self.sp_V[0, 0, 0], &self.sp_lam[0, 0], &self.sp_alpha[0],
                         &self.sp_E[0, 0], &self.minv[0], q, qd, Q)
        _spatial_jacobian(self.sp_pos.shape[0], &self.sp_pos[0, 0], &self.sp_bod[0],
                          &self.sp_E[0, 0], &self.jdata[0], &self.jhat[0],
                          self.jhat.shape[0])

    cdef void c_spatial_back(self, double* qdd) noexcept nogil:
        """qdd_p = E qdd^_p."""
        _spatial_back(self.nsp, &self.sp_pidx[0, 0], &self.sp_E[0, 0], qdd)

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

    def output_row(self, double t, const double[::1] y not None, Py_ssize_t i,
                   double[:, ::1] qdd_rows not None, double[:, ::1] lam_rows not None,
                   double[:, ::1] jac_rows=None, double[:, ::1] phi_rows=None,
                   double[:, ::1] nu_rows=None, double[:, ::1] fv_rows=None):
        """What an output row needs from an evaluation at its state (t, y), in one
        call (the dynamic analysis' blocks of rows, ``mbcore.system.output_rows``):
        into row ``i`` of the arrays, qdd and lam of the evaluation :meth:`eval`
        makes (Nikravesh (1988), Eqs. 9.49-9.55), Phi_q's values (``jac_rows``:
        the System's Jacobian buffer, dense or CSR data, then its ground entries),
        Phi and nu (Eqs. 3.12-3.14, the violation channel) and the jets of the time
        functions (``fv_rows``, flattened); a ``None`` array is skipped.  Not
        counted in ``nfev`` (an output, not an integration cost).  NumPy reference:
        ``eval`` + ``qdd_view``/``lam_view`` + ``System.jacobian_values``,
        ``System.phi``, ``System.nu``, ``System.functions_at``.  Returns the status
        (0 = OK; else the caller repeats the row on the Python path, which names
        the error or applies least-squares multipliers)."""
        cdef Py_ssize_t n = self.n, m = self.m, nj = self.jdata.shape[0], k
        if y.shape[0] < 2 * n:
            raise ValueError(f"y needs {2 * n} entries")
        _need("qdd_rows (columns)", qdd_rows.shape[1], n)
        _need("lam_rows (columns)", lam_rows.shape[1], m)
        if i < 0 or i >= qdd_rows.shape[0] or i >= lam_rows.shape[0]:
            raise ValueError(f"row {i} is outside the arrays")
        for what, arr, w in (("jac_rows", jac_rows, nj), ("phi_rows", phi_rows, m),
                             ("nu_rows", nu_rows, m), ("fv_rows", fv_rows, 3 * self.nf)):
            if arr is not None:
                _need(f"{what} (columns)", arr.shape[1], w)
                if i >= arr.shape[0]:
                    raise ValueError(f"row {i} is outside {what}")
        cdef int status
        with nogil:
            status = self.c_eval(t, &y[0], &self.out_ydot[0])
            self.nfev -= 1
            if status == 0 and m and self.stabilise:
                # Baumgarte's terms: c_eval evaluated Phi and nu at this state
                if phi_rows is not None:
                    memcpy(&phi_rows[i, 0], &self.phi[0], m * sizeof(double))
                if nu_rows is not None:
                    memcpy(&nu_rows[i, 0], &self.nu[0], m * sizeof(double))
            elif status == 0 and m and (phi_rows is not None or nu_rows is not None):
                # (c_eval loaded q into the evaluator's extended buffer)
                if (phi_rows is not None and self.ev.c_phi(t, self.fvp, &phi_rows[i, 0]) >= 0) \
                        or (nu_rows is not None
                            and self.ev.c_nu(t, self.fvp, &nu_rows[i, 0]) >= 0):
                    status = CONSTRAINT_FAILED
                    self.status = status
        if status:
            return status
        memcpy(&qdd_rows[i, 0], &self.qdd[0], n * sizeof(double))
        if m:
            memcpy(&lam_rows[i, 0], &self.lam[0], m * sizeof(double))
        if jac_rows is not None and nj:
            memcpy(&jac_rows[i, 0], &self.jdata[0], nj * sizeof(double))
        if fv_rows is not None and self.nf:
            memcpy(&fv_rows[i, 0], self.fvp, 3 * self.nf * sizeof(double))
        return 0

    def bind_output_rows(self, object owner, double[:, ::1] Y not None,
                         double[::1] T not None,
                         double[:, ::1] S not None, double[::1] stats not None,
                         double[:, ::1] qdd_rows=None, double[:, ::1] lam_rows=None,
                         double[:, ::1] jac_rows=None, double[:, ::1] phi_rows=None,
                         double[:, ::1] nu_rows=None, double[:, ::1] fv_rows=None):
        """Bind the arrays of ``owner``'s block of output rows once, for
        :meth:`output_row_at`:
        ``Y`` (rows, len(y)), ``T`` (rows,), ``S`` (rows, len(stats)) receive each
        row's state, time and a copy of the loop statistics ``stats``; with
        ``qdd_rows`` and ``lam_rows`` also the evaluation of :meth:`output_row` into
        the same rows of the other arrays (``None``: skipped; ``qdd_rows`` None: no
        evaluation).  The shapes are checked here, not at every row; a later
        binding (another owner) replaces this one."""
        cdef Py_ssize_t cap = Y.shape[0], m = self.m
        _need("Y (columns)", Y.shape[1], 2 * self.n)
        _need("S (columns)", S.shape[1], stats.shape[0])
        cap = min(cap, T.shape[0], S.shape[0])
        self.ob_eval = qdd_rows is not None
        if self.ob_eval:
            if lam_rows is None:
                raise ValueError("lam_rows is needed with qdd_rows")
            _need("qdd_rows (columns)", qdd_rows.shape[1], self.n)
            _need("lam_rows (columns)", lam_rows.shape[1], m)
            cap = min(cap, qdd_rows.shape[0], lam_rows.shape[0])
            for what, arr, w in (("jac_rows", jac_rows, self.jdata.shape[0]),
                                 ("phi_rows", phi_rows, m), ("nu_rows", nu_rows, m),
                                 ("fv_rows", fv_rows, 3 * self.nf)):
                if arr is not None:
                    _need(f"{what} (columns)", arr.shape[1], w)
                    cap = min(cap, arr.shape[0])
            self.ob_qdd, self.ob_lam = qdd_rows, lam_rows
        self.ob_has_jac = self.ob_eval and jac_rows is not None
        self.ob_has_phi = self.ob_eval and phi_rows is not None
        self.ob_has_nu = self.ob_eval and nu_rows is not None
        self.ob_has_fv = self.ob_eval and fv_rows is not None
        if self.ob_has_jac:
            self.ob_jac = jac_rows
        if self.ob_has_phi:
            self.ob_phi = phi_rows
        if self.ob_has_nu:
            self.ob_nu = nu_rows
        if self.ob_has_fv:
            self.ob_fv = fv_rows
        self.ob_Y, self.ob_T, self.ob_S, self.ob_stat = Y, T, S, stats
        self.ob_cap = cap
        self.ob_owner = owner

    def output_row_at(self, object owner, double t, const double[::1] y not None,
                      Py_ssize_t i):
        """Row ``i`` of the arrays bound by :meth:`bind_output_rows`: (t, y) and the
        loop statistics copied, then (with ``qdd_rows``) what :meth:`output_row`
        evaluates at the row's state (Nikravesh (1988), Eqs. 9.49-9.55) into the same
        row.  NumPy reference: the copies ``Y[i] = y``, ``T[i] = t``, ``S[i] = stats``
        and :meth:`output_row`.  Returns the status of the evaluation (0 = OK; else
        the caller repeats the row's evaluation on the Python path; -1: the rows
        bound are not ``owner``'s, nothing is written: bind them again)."""
        cdef Py_ssize_t n = self.n, m = self.m, nj, N
        if owner is not self.ob_owner or self.ob_cap == 0:
            return -1
        if i < 0 or i >= self.ob_cap:
            raise ValueError(f"row {i} is outside the bound rows")
        N = self.ob_Y.shape[1]
        if y.shape[0] != N:
            raise ValueError(f"y has {y.shape[0]} entries, the rows {N}")
        cdef int status = 0
        with nogil:
            memcpy(&self.ob_Y[i, 0], &y[0], N * sizeof(double))
            self.ob_T[i] = t
            memcpy(&self.ob_S[i, 0], &self.ob_stat[0], self.ob_stat.shape[0] * sizeof(double))
            if self.ob_eval:
                status = self.c_eval(t, &y[0], &self.out_ydot[0])
                self.nfev -= 1
                if status == 0 and m and self.stabilise:
                    # Baumgarte's terms: c_eval evaluated Phi and nu at this state
                    if self.ob_has_phi:
                        memcpy(&self.ob_phi[i, 0], &self.phi[0], m * sizeof(double))
                    if self.ob_has_nu:
                        memcpy(&self.ob_nu[i, 0], &self.nu[0], m * sizeof(double))
                elif status == 0 and m and (self.ob_has_phi or self.ob_has_nu):
                    # (c_eval loaded q into the evaluator's extended buffer)
                    if (self.ob_has_phi
                            and self.ev.c_phi(t, self.fvp, &self.ob_phi[i, 0]) >= 0) \
                            or (self.ob_has_nu
                                and self.ev.c_nu(t, self.fvp, &self.ob_nu[i, 0]) >= 0):
                        status = CONSTRAINT_FAILED
                        self.status = status
                if status == 0:
                    memcpy(&self.ob_qdd[i, 0], &self.qdd[0], n * sizeof(double))
                    if m:
                        memcpy(&self.ob_lam[i, 0], &self.lam[0], m * sizeof(double))
                    nj = self.jdata.shape[0]
                    if self.ob_has_jac and nj:
                        memcpy(&self.ob_jac[i, 0], &self.jdata[0], nj * sizeof(double))
                    if self.ob_has_fv and self.nf:
                        memcpy(&self.ob_fv[i, 0], self.fvp, 3 * self.nf * sizeof(double))
        return status

    @property
    def lam_view(self):
        """The multipliers of the last evaluation (a view of the work buffer)."""
        return np.asarray(self.lam)[:self.m]

    @property
    def qdd_view(self):
        return np.asarray(self.qdd)[:self.n]
