# cython: language_level=3
"""The compiled constraint evaluator (``mbcore._ext._planar``).

One :class:`PlanarEvaluator` per System holds the packed arrays of every group
whose constraint type has a compiled kernel, and assembles phi, the Jacobian
values, nu and gamma of all of them in one call, without Python-level loops over
elements and without allocation.  It knows no constraint type: every kernel is a
``mbcore.constraint_kernel`` capsule (include/mbcore_plugin.h) named by its type's
``c_kernel`` — the built-in types' capsules live in ``mbplugins._ext``
(``_planar_constraints``, ``_spatial_constraints``), a third party's in its own
extension module — validated by :mod:`mbcore.plugins.compiled`.  The one kernel of
the core itself is the Euler-parameter normalization of spatial bodies
(:data:`EULER_NORMALIZATION`, the body kind's constraint p^T p - 1 = 0, Nikravesh
(1988), Eqs. 6.23, 7.33).

Two layouts (``scatter`` of the capsule): direct (ABI v2, the built-ins) — the
kernel writes its rows into the evaluator's vectors at ``row`` and its Jacobian
entries into the data array at ``jpos`` (artificial coordinates at ``xoff``);
blocks (ABI v1) — the kernel writes (ne, m) rows and (ne, m, nb, nc) blocks into
per-group scratch allocated here once, scattered by ``row`` / ``jpos``
(``_constraint_plugins.pxi``).  The stages receive the time ``t`` and return -1 or
the group whose kernel refused an element.

Array conventions (see mbcore.elements): q is copied into an extended buffer of
length n + 10, like the System's: the planar ground's block (0, 0, 0) at n, the
spatial ground's (0, 0, 0, 1, 0, 0, 0) at n + 3 (the System passes every ground
body at offset n; ``_set`` moves spatial ones to n + 3).  Jacobian entries of
ground columns are written to slots of their own after the matrix data (``jpos``
says where); a body has 3 (planar) or 7 (spatial) columns.
"""
from libc.math cimport sin, cos, fabs, isfinite, floor
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport (PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid,
                                PyCapsule_GetName, PyCapsule_CheckExact)
from mbcore.plugin cimport (mbcore_constraint_kernel, mbcore_constraint_group,
                            mbcore_index, mbcore_constraint_fn,
                            mbcore_constraint_jacobian_fn, mbcore_constraint_gamma_fn,
                            MBCORE_ABI_VERSION, MBCORE_ABI_MIN_VERSION,
                            MBCORE_BODY_PLANAR, MBCORE_BODY_SPATIAL,
                            MBCORE_CONSTRAINT_CAPSULE, MBCORE_SCATTER_BLOCKS,
                            MBCORE_SCATTER_DIRECT)

include "_lapack.pxi"   # dgetrf, dpotrf, ... of SciPy, bound on first use

import numpy as np

# the stages (block-layout groups and the self-test capsules)
cdef enum:
    ST_PHI = 0
    ST_JACOBIAN = 1
    ST_NU = 2
    ST_GAMMA = 3

cdef class PlanarEvaluator:
    """Assembles phi, Jacobian, nu and gamma of all compiled groups of a System."""

    def __cinit__(self, Py_ssize_t n, list groups not None, on_failure=None):
        cdef Py_ssize_t k
        _need_dim("n", n)
        self.n = n
        self.need_out = self.need_data = self.need_fv = 0
        self.ng = len(groups)
        self._keep = []
        self.failed_group = -1
        self.failed_element = -1
        self.on_failure = on_failure
        self.groups = <Group*> malloc(max(self.ng, 1) * sizeof(Group))
        self.qx = <double*> malloc((n + 10) * sizeof(double))
        self.qdx = <double*> malloc((n + 10) * sizeof(double))
        if self.groups == NULL or self.qx == NULL or self.qdx == NULL:
            raise MemoryError()
        memset(self.qx, 0, (n + 10) * sizeof(double))
        memset(self.qdx, 0, (n + 10) * sizeof(double))
        self.qx[n + 6] = 1.0           # spatial ground: r = 0, p = (1, 0, 0, 0) at n + 3
        for k in range(self.ng):
            self._set(k, groups[k])

    cdef _set(self, Py_ssize_t k, dict g):
        capsule = g.get("capsule")
        if capsule is None:
            raise ValueError(f"group {k} ({g.get('kernel')!r}) has no kernel capsule: "
                             f"the evaluator runs compiled kernels of the plugin tier "
                             f"only (ConstraintType.c_kernel)")
        cdef const mbcore_constraint_kernel* K = _constraint_kernel_ptr(capsule)
        cdef bint v2 = K.abi_version >= 2
        cdef bint direct = v2 and K.scatter == MBCORE_SCATTER_DIRECT
        cdef bint stateful = v2 and K.stateful != 0
        spatial = K.body_kind == MBCORE_BODY_SPATIAL
        m, nb, npar, nfun = K.n_equations, K.n_bodies, K.n_par, K.n_fun
        nx = K.n_extra if direct else 0
        name = g.get("kernel", "?")
        self._keep.append(capsule)
        ncol = 7 if spatial else 3
        if g.get("kind", "planar") != ("spatial" if spatial else "planar"):
            raise ValueError(f"kernel {name!r} is for "
                             f"{'spatial' if spatial else 'planar'} bodies, the group's "
                             f"are {g.get('kind', 'planar')}")
        boff = np.ascontiguousarray(g["boff"], dtype=np.intp)
        _extent(boff, 0, self.n + 4, "boff")      # bodies, or a ground block
        if spatial:            # the spatial ground block is at n + 3 (module docstring)
            boff = np.where(boff >= self.n, self.n + 3, boff).astype(np.intp)
        xoff = np.ascontiguousarray(g.get("xoff", np.zeros((0, 0), np.intp)), dtype=np.intp)
        if xoff.size == 0:
            xoff = np.zeros((len(g["row"]), 0), np.intp)
        row = np.ascontiguousarray(g["row"], dtype=np.intp)
        par = np.ascontiguousarray(g["par"], dtype=np.float64)
        if stateful and par.size and not (
                isinstance(g["par"], np.ndarray) and np.shares_memory(par, g["par"])):
            # the kernel writes tracking state into par (rotation driver): it must be
            # the System group's own array, so that both paths share that state
            raise ValueError(f"kernel {name!r} updates its parameters in place: "
                             f"pass the group's C-contiguous float64 par array itself")
        fidx = np.ascontiguousarray(g["fidx"], dtype=np.intp)
        jpos = np.ascontiguousarray(g["jpos"], dtype=np.intp)
        ne = row.shape[0]
        if (boff.size != ne * nb or par.size != ne * npar or fidx.size != ne * nfun
                or jpos.size != ne * m * (nb * ncol + nx) or xoff.size != ne * nx):
            raise ValueError(f"kernel {name!r}: packed arrays have wrong sizes")
        if ne:      # indices: checked here, trusted by the stages (no GIL)
            self.need_out = max(self.need_out, _extent(row, 0, -1, "row") - 1 + m)
            self.need_data = max(self.need_data, _extent(jpos, 0, -1, "jpos"))
            self.need_fv = max(self.need_fv, _extent(fidx, 0, -1, "fidx"))
            _extent(xoff, 0, self.n, "xoff")
        # a block-layout group's scratch: (ne, m) rows and (ne, m, nb, ncol) blocks
        rows = np.zeros(0 if direct else ne * m)
        jblk = np.zeros(0 if direct else ne * m * nb * ncol)
        self._keep.extend([boff, row, par, fidx, jpos, xoff, rows, jblk])
        cdef Group* G = &self.groups[k]
        G.direct = direct
        G.ne = ne
        G.nb = nb
        G.m = m
        G.npar = npar
        G.nfun = nfun
        G.njac = m * (nb * ncol + nx)  # body entries (r, b, c), then extra entries (r, x)
        G.nx = nx
        G.ncol = ncol
        G.xoff = <const Py_ssize_t*> _ptr_i(xoff)
        G.boff = <const Py_ssize_t*> _ptr_i(boff)
        G.row = <const Py_ssize_t*> _ptr_i(row)
        G.par = <const double*> _ptr_d(par)
        G.fidx = <const Py_ssize_t*> _ptr_i(fidx)
        G.jpos = <const Py_ssize_t*> _ptr_i(jpos)
        G.ext = K
        G.rows = <double*> _ptr_d(rows)
        G.jblk = <double*> _ptr_d(jblk)
        # the kernel's view of the group, built once (ABI: the members of its version)
        G.abi.ne = ne
        G.abi.m = m
        G.abi.nb = nb
        G.abi.npar = npar
        G.abi.nfun = nfun
        G.abi.boff = <const mbcore_index*> G.boff
        G.abi.par = G.par
        G.abi.fidx = <const mbcore_index*> G.fidx
        G.abi.row = <const mbcore_index*> G.row
        G.abi.jpos = <const mbcore_index*> G.jpos
        G.abi.njac = G.njac
        G.abi.nc = ncol
        G.abi.nx = nx
        G.abi.xoff = <const mbcore_index*> G.xoff
        G.abi.state = <double*> G.par if stateful else NULL

    def __dealloc__(self):
        free(self.groups)
        free(self.qx)
        free(self.qdx)

    cdef int _load(self, const double[::1] q) except -1:
        if q.shape[0] != self.n:
            raise ValueError(f"q has {q.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qx, &q[0], self.n * sizeof(double))
        return 0

    # -- C-level stages (q already in self.qx, qd in self.qdx) --------------------
    cdef Py_ssize_t c_phi(self, double t, const double* fv, double* out) noexcept nogil:
        cdef Py_ssize_t g, e
        cdef Group* G
        for g in range(self.ng):
            G = &self.groups[g]
            if G.direct:
                e = G.ext.phi(&G.abi, self.qx, t, fv, out)
            else:
                e = _block_rows(G, ST_PHI, self.qx, self.qdx, t, fv, out)
            if e >= 0:
                return _failed(self, g, e)
        return -1

    cdef Py_ssize_t c_jacobian(self, double t, const double* fv, double* data) noexcept nogil:
        cdef Py_ssize_t g, e
        cdef Group* G
        for g in range(self.ng):
            G = &self.groups[g]
            if G.direct:
                e = G.ext.jacobian(&G.abi, self.qx, t, fv, data)
            else:
                e = _block_jacobian(G, self.qx, t, fv, data)
            if e >= 0:
                return _failed(self, g, e)
        return -1

    cdef Py_ssize_t c_nu(self, double t, const double* fv, double* out) noexcept nogil:
        cdef Py_ssize_t g, e
        cdef Group* G
        for g in range(self.ng):
            G = &self.groups[g]
            if G.direct:
                e = _direct_nu(G, self.qx, t, fv, out)
            else:
                e = _block_rows(G, ST_NU, self.qx, self.qdx, t, fv, out)
            if e >= 0:
                return _failed(self, g, e)
        return -1

    cdef Py_ssize_t c_gamma(self, double t, const double* fv, double* out) noexcept nogil:
        cdef Py_ssize_t g, e
        cdef Group* G
        for g in range(self.ng):
            G = &self.groups[g]
            if G.direct:
                e = G.ext.gamma(&G.abi, self.qx, self.qdx, t, fv, out)
            else:
                e = _block_rows(G, ST_GAMMA, self.qx, self.qdx, t, fv, out)
            if e >= 0:
                return _failed(self, g, e)
        return -1

    cdef int _check(self, const double[:, ::1] fv, double[::1] out,
                    double[::1] data) except -1:
        """The buffers of a call reach every packed index (ValueError otherwise)."""
        _need_fv(fv, self.need_fv)
        if out is not None:
            _need("out", out.shape[0], self.need_out)
        if data is not None:
            _need("data", data.shape[0], self.need_data)
        return 0

    def phi(self, const double[::1] q not None, double t, const double[:, ::1] fv,
            double[::1] out not None):
        """out[rows] = Phi(q, t) for every compiled group."""
        self._check(fv, out, None)
        self._load(q)
        if self.c_phi(t, _fptr(fv), &out[0]) >= 0:
            _raise_failed(self, t)

    def jacobian(self, const double[::1] q not None, double t, const double[:, ::1] fv,
                 double[::1] data not None):
        """data[jpos] = Jacobian entries (dense or CSR positions; last = trash)."""
        self._check(fv, None, data)
        self._load(q)
        if self.c_jacobian(t, _fptr(fv), &data[0]) >= 0:
            _raise_failed(self, t)

    def nu(self, const double[::1] q not None, double t, const double[:, ::1] fv,
           double[::1] out not None):
        """out[rows] = nu = -Phi_t."""
        self._check(fv, out, None)
        self._load(q)
        if self.c_nu(t, _fptr(fv), &out[0]) >= 0:
            _raise_failed(self, t)

    def gamma(self, const double[::1] q not None, const double[::1] qd not None, double t,
              const double[:, ::1] fv, double[::1] out not None):
        """out[rows] = gamma = -(Phi_q qd)_q qd - 2 Phi_qt qd - Phi_tt."""
        self._check(fv, out, None)
        self._load(q)
        if qd.shape[0] != self.n:
            raise ValueError(f"qd has {qd.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        if self.c_gamma(t, _fptr(fv), &out[0]) >= 0:
            _raise_failed(self, t)

    def repeat_stages(self, const double[::1] q not None, const double[::1] qd not None,
                      double t, const double[:, ::1] fv, double[::1] out not None,
                      double[::1] data not None, Py_ssize_t count):
        """phi, Jacobian, nu and gamma at (q, qd, t), ``count`` times in C without
        the GIL (benchmarks/run.py: the per-stage cost of the groups without
        Python's).  ``out`` receives the rows of each stage in turn.  Returns -1, or
        the failing group."""
        cdef Py_ssize_t k, bad = -1
        self._check(fv, out, data)
        _need_dim("count", count)
        self._load(q)
        if qd.shape[0] != self.n:
            raise ValueError(f"qd has {qd.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        cdef const double* fp = _fptr(fv)
        with nogil:
            for k in range(count):
                bad = self.c_phi(t, fp, &out[0])
                if bad < 0:
                    bad = self.c_jacobian(t, fp, &data[0])
                if bad < 0:
                    bad = self.c_nu(t, fp, &out[0])
                if bad < 0:
                    bad = self.c_gamma(t, fp, &out[0])
                if bad >= 0:
                    break
        return bad


cdef inline const double* _fptr(const double[:, ::1] fv):
    if fv is None or fv.shape[0] == 0:
        return NULL
    return &fv[0, 0]


include "_pointers.pxi"
include "_bounds.pxi"
include "_constraint_plugins.pxi"
include "_euler_normalization.pxi"


# --------------------------------------------------------------------------------
# compiled kinematic step (Nikravesh (1988), §3.2.2 Alg K-II; reference: mbplugins.analyses.kinematic)
# --------------------------------------------------------------------------------
cdef class KinematicStepper:
    """Work buffers and the step routine for one System (n = m)."""

    cdef PlanarEvaluator ev
    cdef Py_ssize_t n
    cdef double[::1] phi, jdata, lu, b, nu, gam, qpred
    cdef int[::1] ipiv
    cdef public double pivot_ratio
    cdef public int iterations
    cdef public double phi_norm

    def __cinit__(self, PlanarEvaluator evaluator not None, Py_ssize_t n,
                  double[::1] jdata not None):
        _need_dim("n", n)
        if n > evaluator.n or evaluator.need_out > n:
            raise ValueError(f"n = {n} does not match the evaluator (n = {evaluator.n}, "
                             f"{evaluator.need_out} rows)")
        _need("jdata", jdata.shape[0], max(n * n, evaluator.need_data, 1))
        self.ev = evaluator
        self.n = n
        self.phi = np.zeros(max(n, 1))
        self.nu = np.zeros(max(n, 1))
        self.gam = np.zeros(max(n, 1))
        self.jdata = jdata                 # the System's Jacobian buffer (row-major n x n, + ground slots)
        self.lu = np.zeros(max(n * n, 1))
        self.b = np.zeros(max(n, 1))
        self.ipiv = np.zeros(max(n, 1), dtype=np.intc)
        self.qpred = np.zeros(max(n, 1))

    cdef int _factor(self, double sing_tol):
        cdef int n = <int> self.n, info = 0, k
        cdef double d, dmin = 1e308, dmax = 0.0
        memcpy(&self.lu[0], &self.jdata[0], n * n * sizeof(double))
        dgetrf(&n, &n, &self.lu[0], &n, &self.ipiv[0], &info)
        for k in range(n):
            d = fabs(self.lu[k * n + k])
            if d < dmin:
                dmin = d
            if d > dmax:
                dmax = d
        self.pivot_ratio = dmin / dmax if dmax > 0 else 0.0
        if info != 0 or self.pivot_ratio < sing_tol:
            return 1
        return 0

    cdef void _solve(self, double* x):
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'T'             # row-major data is A^T for LAPACK
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], x, &n, &info)

    def predicted(self):
        """The predicted configuration of the last step (for diagnostics)."""
        return np.array(self.qpred[:self.n])

    def step(self, double[::1] q not None, double[::1] qd not None,
             double[::1] qdd not None, double t, const double[:, ::1] fv, double tol,
             int maxit, double sing_tol, double h=0.0):
        """From the previous (q, qd, qdd) predict ``q + h qd + h^2/2 qdd`` (h = 0:
        start from q), solve Phi(q, t) = 0 in place, then qd and qdd in place.
        Returns 0 (success), 1 (singular Jacobian during Newton), 2 (Newton did not
        converge / diverged), 3 (non-finite Phi), 4 (singular at the solution),
        5 (non-finite velocity or acceleration), 6 (a plugin's constraint kernel
        refused an element: the evaluator's failed_group / failed_element)."""
        cdef Py_ssize_t n = self.n, i
        cdef int it
        cdef double scale = 0.0, pn, a, dmax
        if q.shape[0] != n or qd.shape[0] != n or qdd.shape[0] != n:
            raise ValueError(f"q, qd and qdd must have {n} entries (got {q.shape[0]}, "
                             f"{qd.shape[0]}, {qdd.shape[0]})")
        _need_fv(fv, self.ev.need_fv)
        _need_dim("maxit", maxit)
        if h != 0.0:
            for i in range(n):
                q[i] += h * qd[i] + 0.5 * h * h * qdd[i]
        for i in range(n):
            self.qpred[i] = q[i]
        cdef const double* fp = NULL if fv.shape[0] == 0 else &fv[0, 0]
        cdef double* qx = self.ev.qx
        for i in range(n):
            if fabs(q[i]) > scale:
                scale = fabs(q[i])
        scale += 1.0
        self.iterations = 0
        for it in range(maxit + 1):
            for i in range(n):
                qx[i] = q[i]
            if self.ev.c_phi(t, fp, &self.phi[0]) >= 0:
                return 6
            pn = 0.0
            for i in range(n):
                a = fabs(self.phi[i])
                if not isfinite(a):
                    self.phi_norm = a
                    return 3
                if a > pn:
                    pn = a
            self.phi_norm = pn
            self.iterations = it
            if pn <= tol * scale:
                break
            if it == maxit:
                return 2
            if self.ev.c_jacobian(t, fp, &self.jdata[0]) >= 0:
                return 6
            if self._factor(sing_tol):
                return 1
            for i in range(n):
                self.b[i] = -self.phi[i]
            self._solve(&self.b[0])
            dmax = 0.0
            for i in range(n):
                if not isfinite(self.b[i]):
                    return 2
                if fabs(self.b[i]) > dmax:
                    dmax = fabs(self.b[i])
            if dmax > 1e6 * scale:
                return 2
            for i in range(n):
                q[i] += self.b[i]
        # velocities and accelerations with the Jacobian at the converged q
        for i in range(n):
            qx[i] = q[i]
        if self.ev.c_jacobian(t, fp, &self.jdata[0]) >= 0:
            return 6
        if self._factor(sing_tol):
            return 4
        if self.ev.c_nu(t, fp, &self.nu[0]) >= 0:
            return 6
        for i in range(n):
            qd[i] = self.nu[i]
        self._solve(&qd[0])
        for i in range(n):
            self.ev.qdx[i] = qd[i]
        if self.ev.c_gamma(t, fp, &self.gam[0]) >= 0:
            return 6
        for i in range(n):
            qdd[i] = self.gam[i]
        self._solve(&qdd[0])
        for i in range(n):
            if not isfinite(qdd[i]) or not isfinite(qd[i]):
                return 5
        return 0

    def solve(self, double[::1] b, bint transposed=False):
        """b <- A^-1 b (or A^-T b) with the factors of the last Jacobian."""
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'N' if transposed else b'T'
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], &b[0], &n, &info)


