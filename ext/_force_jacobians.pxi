# The compiled force Jacobians K = dQ/dq, C = dQ/dqd per element, included by
# _forces.pyx: the kernels' ``jacobian`` functions write each element's (nl x nl)
# blocks, nl = bodies x coordinates per body, row-major in the order of the element's
# body blocks; the System scatters them (ground and padding columns dropped).  NumPy
# references: the ``force_jacobian`` methods of the types (equal to 1e-12:
# tests/test_force_jacobians.py).

cdef class ForceJacobianEvaluator:
    """K and C blocks of every element of the groups whose kernel has a Jacobian
    function, written into caller-owned buffers (no allocation per evaluation, no
    Python per element).  Attributes: src/mbcore/_ext/_forces.pxd
    (``c_jacobians`` is called from C by ``_dynamics.CompiledRHS.c_jac``)."""

    def __cinit__(self, Py_ssize_t n, list groups not None):
        cdef Py_ssize_t k, nc
        cdef FGroup* G
        _need_dim("n", n)
        self.n = n
        self.need_fv = 0
        self.ng = len(groups)
        self._keep = []
        self.failed_group = -1
        self.failed_element = -1
        self.groups = <FGroup*> malloc(max(self.ng, 1) * sizeof(FGroup))
        self.boff_out = <Py_ssize_t*> malloc(max(self.ng, 1) * sizeof(Py_ssize_t))
        self.nl = <Py_ssize_t*> malloc(max(self.ng, 1) * sizeof(Py_ssize_t))
        self.qx = <double*> malloc((n + 10) * sizeof(double))
        self.qdx = <double*> malloc((n + 10) * sizeof(double))
        if (self.groups == NULL or self.boff_out == NULL or self.nl == NULL
                or self.qx == NULL or self.qdx == NULL):
            raise MemoryError()
        memset(self.qx, 0, (n + 10) * sizeof(double))
        memset(self.qdx, 0, (n + 10) * sizeof(double))
        self.qx[n + 6] = 1.0
        self.size = 0
        for k in range(self.ng):
            g = groups[k]
            # par is the group's own array (shared state, as forces): no copy
            G = &self.groups[k]
            self.need_fv = max(self.need_fv, _fill_group(G, g, self._keep, n))
            if G.ext.jacobian == NULL:
                raise ValueError(f"force kernel {g['kernel']!r} has no Jacobian")
            nc = 7 if G.ext.body_kind == MBCORE_BODY_SPATIAL else 3
            self.nl[k] = G.nb * nc
            self.boff_out[k] = self.size
            self.size += G.ne * G.nb * nc * G.nb * nc

    def __dealloc__(self):
        free(self.groups)
        free(self.boff_out)
        free(self.nl)
        free(self.qx)
        free(self.qdx)

    def offsets(self):
        """(first entry, block width nl) of each group in the K / C buffers."""
        return [(self.boff_out[k], self.nl[k]) for k in range(self.ng)]

    def jacobians(self, const double[::1] q not None, const double[::1] qd not None,
                  const double[:, ::1] fv, double[::1] K not None, double[::1] C not None,
                  double t=0.0):
        """K, C (``size`` entries each) := the element blocks of every group at time
        t.  Returns True, or False with ``failed_group``/``failed_element`` set."""
        if q.shape[0] != self.n or qd.shape[0] != self.n:
            raise ValueError(f"q and qd must have {self.n} entries")
        if K.shape[0] != self.size or C.shape[0] != self.size:
            raise ValueError(f"K and C must have {self.size} entries")
        _need_fv(fv, self.need_fv)
        if self.size == 0:
            return True
        cdef const double* fp = NULL if fv is None or fv.shape[0] == 0 else &fv[0, 0]
        cdef Py_ssize_t bad
        with nogil:
            bad = self.c_jacobians(&q[0], &qd[0], t, fp, &K[0], &C[0])
        return bad < 0

    cdef Py_ssize_t c_jacobians(self, const double* q, const double* qd, double t,
                                const double* fv, double* K, double* C) noexcept nogil:
        """K, C (``size`` entries each, caller-owned) := the element blocks of every
        group at (q, qd, t) (n entries each), ``fv`` the function values.  Returns -1,
        or the failing group (``failed_group``/``failed_element`` set)."""
        cdef Py_ssize_t g, e, nl2, bad = -1
        cdef FGroup* G
        cdef double* Kp
        cdef double* Cp
        if self.size == 0:
            return -1
        if self.n:
            memcpy(self.qx, q, self.n * sizeof(double))
            memcpy(self.qdx, qd, self.n * sizeof(double))
        memset(K, 0, self.size * sizeof(double))
        memset(C, 0, self.size * sizeof(double))
        for g in range(self.ng):
            G = &self.groups[g]
            nl2 = self.nl[g] * self.nl[g]
            # the kernel writes the whole group's blocks
            bad = _external_jacobians(G, self.qx, self.qdx, t, fv,
                                      K + self.boff_out[g], C + self.boff_out[g])
            if bad >= 0:
                self.failed_group = g
                self.failed_element = bad
                return g
        return -1
