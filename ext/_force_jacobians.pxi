# Compiled force Jacobians K = dQ/dq, C = dQ/dqd per element (issue 14), included by
# _forces.pyx.  Each kernel writes the element's (nl x nl) blocks, nl = bodies x
# coordinates per body, row-major in the order of the element's body blocks; the
# System scatters them (ground and padding columns dropped).  NumPy references:
# the ``force_jacobian`` methods of mbplugins.planar.forces / mbplugins.spatial.forces
# (same formulas, equal to 1e-12: tests/test_force_jacobians.py).

#: kernel name -> True for the force kernels that have a compiled Jacobian
JAC_KERNELS = {"tsda": True, "rsda": True, "force": True, "torque": True, "drag": True,
               "damping": True}


cdef Py_ssize_t _spatial_jacobian(FGroup* G, Py_ssize_t e, const double* q,
                                  const double* qd, const double* fv, double* K,
                                  double* C) noexcept nogil:
    """K, C blocks of spatial element e (none compiled yet: see JAC_KERNELS)."""
    return -1


cdef Py_ssize_t _planar_jacobian(FGroup* G, Py_ssize_t e, const double* q,
                                 const double* qd, const double* fv, double* K,
                                 double* C) noexcept nogil:
    """K, C blocks (nl x nl, zeroed by the caller) of planar element e (spec/planar.md
    §3: F2, F3, F5, F6, F8, F10); returns -1, or e when it cannot be evaluated."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * G.nb], bj
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, lx, ly, L, ux, uy, Ld, f, fx, fy
    cdef double ldx, ldy, vx, vy, sp_, kq, inv, m0, F00, F01, F11, dFx, dFy
    cdef double D[12]          # dl/dq (2 x 6), row-major
    cdef double a[6]
    cdef double Lq[6]
    cdef double FV[6]
    cdef int k, l
    if G.kind == F_TSDA:
        # spec §3 F5: g = -D^T (f u); see TSDA.force_jacobian
        bj = G.boff[e * 2 + 1]
        c = cos(q[bi + 2]); s = sin(q[bi + 2])
        cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
        Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
        lx = q[bj] + Sjx - q[bi] - Six
        ly = q[bj + 1] + Sjy - q[bi + 1] - Siy
        L = sqrt(lx * lx + ly * ly)
        if not (L >= MIN_LENGTH):
            return e
        ux = lx / L; uy = ly / L
        for k in range(12):
            D[k] = 0.0
        D[0] = -1.0; D[7] = -1.0; D[2] = Siy; D[8] = -Six
        D[3] = 1.0; D[10] = 1.0; D[5] = -Sjy; D[11] = Sjx
        ldx = 0.0; ldy = 0.0
        for k in range(3):
            ldx += D[k] * qd[bi + k] + D[3 + k] * qd[bj + k]
            ldy += D[6 + k] * qd[bi + k] + D[9 + k] * qd[bj + k]
        Ld = ux * ldx + uy * ldy
        f = p[4] * (L - p[6]) + p[5] * Ld + fv[3 * G.fidx[e]]
        for k in range(6):
            a[k] = ux * D[k] + uy * D[6 + k]
            Lq[k] = (ldx * D[k] + ldy * D[6 + k] - Ld * a[k]) / L
        Lq[2] += qd[bi + 2] * (ux * Six + uy * Siy)
        Lq[5] -= qd[bj + 2] * (ux * Sjx + uy * Sjy)
        for k in range(6):
            for l in range(6):
                K[6 * k + l] = (-(f / L) * (D[k] * D[l] + D[6 + k] * D[6 + l] - a[k] * a[l])
                                - p[4] * a[k] * a[l] - p[5] * a[k] * Lq[l])
                C[6 * k + l] = -p[5] * a[k] * a[l]
        K[14] -= f * (Six * ux + Siy * uy)
        K[35] += f * (Sjx * ux + Sjy * uy)
    elif G.kind == F_RSDA:
        # spec §3 F6: phi block k [[-1, 1], [1, -1]], c likewise
        K[14] = -p[0]; K[17] = p[0]; K[32] = p[0]; K[35] = -p[0]
        C[14] = -p[1]; C[17] = p[1]; C[32] = p[1]; C[35] = -p[1]
    elif G.kind == F_FORCE:
        # spec §3 F2: global f: d(S x f)/dphi = -S . f; body f = A f': df/dphi = R f
        c = cos(q[bi + 2]); s = sin(q[bi + 2])
        fx = fv[3 * G.fidx[e * 2]]
        fy = fv[3 * G.fidx[e * 2 + 1]]
        if p[2] > 0.5:
            f = c * fx - s * fy
            fy = s * fx + c * fy
            fx = f
            K[2] = -fy
            K[5] = fx
        else:
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            K[8] = -(Six * fx + Siy * fy)
    elif G.kind == F_TORQUE:
        pass                             # spec §3 F3: n(t) only
    elif G.kind == F_DRAG:
        # spec §3 F8: F_v = -(kq |v| + c) I - kq v v^T / |v|, V = [I, R S]
        c = cos(q[bi + 2]); s = sin(q[bi + 2])
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
        vx = qd[bi] - qd[bi + 2] * Siy - p[4]
        vy = qd[bi + 1] + qd[bi + 2] * Six - p[5]
        sp_ = sqrt(vx * vx + vy * vy)
        kq = p[2]
        m0 = -(kq * sp_ + p[3])
        fx = m0 * vx; fy = m0 * vy
        inv = kq / sp_ if sp_ > 0.0 else 0.0
        F00 = m0 - inv * vx * vx; F01 = -inv * vx * vy; F11 = m0 - inv * vy * vy
        FV[0] = F00; FV[1] = F01; FV[2] = -F00 * Siy + F01 * Six
        FV[3] = F01; FV[4] = F11; FV[5] = -F01 * Siy + F11 * Six
        for k in range(3):
            C[k] = FV[k]
            C[3 + k] = FV[3 + k]
            C[6 + k] = Six * FV[3 + k] - Siy * FV[k]
        dFx = -qd[bi + 2] * (F00 * Six + F01 * Siy)
        dFy = -qd[bi + 2] * (F01 * Six + F11 * Siy)
        K[2] = dFx
        K[5] = dFy
        K[8] = -(Six * fx + Siy * fy) + Six * dFy - Siy * dFx
    elif G.kind == F_DAMPING:
        # spec §3 F10: C = -diag(d)
        C[0] = -p[0]; C[4] = -p[1]; C[8] = -p[2]
    return -1


cdef class ForceJacobianEvaluator:
    """K and C blocks of every element of the groups with a compiled Jacobian
    (:data:`JAC_KERNELS`), written into caller-owned buffers (no allocation per
    evaluation, no Python per element)."""

    cdef FGroup* groups
    cdef Py_ssize_t ng, n
    cdef Py_ssize_t* boff_out          # first entry of each group's blocks in K / C
    cdef Py_ssize_t* nl
    cdef double* qx
    cdef double* qdx
    cdef list _keep
    cdef public Py_ssize_t size, failed_group, failed_element

    def __cinit__(self, Py_ssize_t n, list groups):
        cdef Py_ssize_t k, ne, nb, npar, nfun, nc
        cdef FGroup* G
        self.n = n
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
            if g["kernel"] not in JAC_KERNELS:
                raise ValueError(f"force kernel {g['kernel']!r} has no compiled Jacobian")
            code, nb, npar, nfun = KERNELS[g["kernel"]]
            boff = np.ascontiguousarray(g["boff"], dtype=np.intp)
            par = g["par"]              # the group's own array (shared state, as forces)
            if not (isinstance(par, np.ndarray) and par.dtype == np.float64
                    and par.flags.c_contiguous):
                par = np.ascontiguousarray(par, dtype=np.float64)
            fidx = np.ascontiguousarray(g["fidx"], dtype=np.intp)
            ne = boff.shape[0]
            if boff.size != ne * nb or par.size != ne * npar or fidx.size != ne * nfun:
                raise ValueError(f"force kernel {g['kernel']!r}: packed arrays have wrong "
                                 f"sizes")
            self._keep.extend([boff, par, fidx])
            G = &self.groups[k]
            G.kind = code
            G.ne = ne
            G.nb = nb
            G.npar = npar
            G.nfun = nfun
            G.boff = <const Py_ssize_t*> _ptr_i(boff)
            G.par = <const double*> _ptr_d(par)
            G.fidx = <const Py_ssize_t*> _ptr_i(fidx)
            nc = 7 if code >= S_TSDA else 3
            self.nl[k] = nb * nc
            self.boff_out[k] = self.size
            self.size += ne * nb * nc * nb * nc

    def __dealloc__(self):
        free(self.groups)
        free(self.boff_out)
        free(self.nl)
        free(self.qx)
        free(self.qdx)

    def offsets(self):
        """(first entry, block width nl) of each group in the K / C buffers."""
        return [(self.boff_out[k], self.nl[k]) for k in range(self.ng)]

    def jacobians(self, const double[::1] q, const double[::1] qd,
                  const double[:, ::1] fv, double[::1] K, double[::1] C):
        """K, C (``size`` entries each) := the element blocks of every group.
        Returns True, or False with ``failed_group``/``failed_element`` set."""
        cdef Py_ssize_t g, e, nl2
        cdef FGroup* G
        cdef double* Kp
        cdef double* Cp
        if q.shape[0] != self.n or qd.shape[0] != self.n:
            raise ValueError(f"q and qd must have {self.n} entries")
        if K.shape[0] != self.size or C.shape[0] != self.size:
            raise ValueError(f"K and C must have {self.size} entries")
        if self.size == 0:
            return True
        if self.n:
            memcpy(self.qx, &q[0], self.n * sizeof(double))
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        cdef const double* fp = NULL if fv.shape[0] == 0 else &fv[0, 0]
        memset(&K[0], 0, self.size * sizeof(double))
        memset(&C[0], 0, self.size * sizeof(double))
        cdef Py_ssize_t bad = -1
        with nogil:
            for g in range(self.ng):
                G = &self.groups[g]
                nl2 = self.nl[g] * self.nl[g]
                for e in range(G.ne):
                    Kp = &K[0] + self.boff_out[g] + e * nl2
                    Cp = &C[0] + self.boff_out[g] + e * nl2
                    if G.kind >= S_TSDA:
                        bad = _spatial_jacobian(G, e, self.qx, self.qdx, fp, Kp, Cp)
                    else:
                        bad = _planar_jacobian(G, e, self.qx, self.qdx, fp, Kp, Cp)
                    if bad >= 0:
                        break
                if bad >= 0:
                    break
        if bad >= 0:
            self.failed_group = g
            self.failed_element = bad
            return False
        return True
