# Spatial bodies in the Euler-parameter form (Formulation I made regular), in
# transformed columns: the compiled twin of mbcore.system.mass.SpatialMass (update,
# inertial_forces, transform_forces, transform_jacobian, back), shared by the
# compiled right-hand sides (included; needs idx_t).  Nikravesh (1988), §11.2-11.4.

def spatial_blocks(spatial, Py_ssize_t n, Py_ssize_t jlen, str who):
    """Own copies of the blocks of ``spatial`` (``mbcore.system.mass.SpatialMass``) for
    a compiled right-hand side of a System with n coordinates and jlen Jacobian data
    entries, checked once: ``(nb, p_idx, pos, bod, inertia, V, lam, alpha, E, minv)``
    (``minv``: the translations' 1/m; the p entries are overwritten by D at every
    evaluation).  ValueError naming ``who`` when they do not fit (or a moment is not
    positive: thin rods have no compiled path)."""
    import numpy as np
    nb = spatial.nb
    pidx = np.ascontiguousarray(spatial.p_idx, dtype=np.intp)
    pos = np.ascontiguousarray(spatial.pos, dtype=np.intp).reshape(-1, 4)
    bod = np.ascontiguousarray(spatial.bod, dtype=np.intp)
    lam = np.ascontiguousarray(spatial.lam, dtype=np.float64)
    alpha = np.ascontiguousarray(spatial.alpha, dtype=np.float64)
    minv = np.array(spatial.minv, dtype=np.float64)
    if pidx.shape[0] != nb or minv.shape[0] != n \
            or (pos.shape[0] and (pos.max() >= jlen or pos.min() < 0 or bod.max() >= nb)) \
            or (nb and (pidx.max() >= n or pidx.min() < 0)) \
            or not bool(np.all(lam > 0)) or not bool(np.all(alpha > 0)):
        raise ValueError(f"{who}: spatial mass blocks do not match the system")
    return (nb, pidx, pos, bod, np.ascontiguousarray(spatial.inertia, dtype=np.float64),
            np.ascontiguousarray(spatial.V, dtype=np.float64), lam, alpha,
            np.zeros((max(nb, 1), 16)), minv)


cdef inline void _Lmat(const double* p, double* L) noexcept nogil:
    """L(p) (3x4 row-major, Nikravesh (1988), Eq. 6.39): [-e, -e~ + e0 I]."""
    L[0] = -p[1]; L[1] = p[0]; L[2] = p[3]; L[3] = -p[2]
    L[4] = -p[2]; L[5] = -p[3]; L[6] = p[0]; L[7] = p[1]
    L[8] = -p[3]; L[9] = p[2]; L[10] = -p[1]; L[11] = p[0]


cdef void _spatial_forward(Py_ssize_t nsp, const idx_t* pidx, const double* sJ,
                           const double* sV, const double* slam, const double* salpha,
                           double* sE, double* minv, const double* q, const double* qd,
                           double* Q) noexcept nogil:
    """Per body b (``pidx[4b:4b+4]`` its p columns; ``sJ``, ``sV`` 3x3, ``slam`` 3
    principal moments, ``salpha`` the regularisation weight): E = [L^T V, p] into
    ``sE[16b:]``, ``minv`` of its p columns <- D, and Q_p <- E^T (Q_p - b* - alpha p
    pd.pd) with b* = 4 L(pd)^T J' omega', omega' = 2 L(p) pd."""
    cdef Py_ssize_t b, j, k, l
    cdef double p[4]
    cdef double pd[4]
    cdef double Lp[12]
    cdef double Ld[12]
    cdef double w[3]
    cdef double Jw[3]
    cdef double x[4]
    cdef double s2, pdpd, acc
    cdef double* E
    cdef const double* J
    cdef const double* V
    for b in range(nsp):
        for j in range(4):
            p[j] = q[pidx[4 * b + j]]
            pd[j] = qd[pidx[4 * b + j]]
        _Lmat(p, Lp)
        _Lmat(pd, Ld)
        s2 = p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3]
        s2 = s2 * s2
        E = sE + 16 * b
        J = sJ + 9 * b
        V = sV + 9 * b
        for j in range(4):                      # E = [L^T V, p]
            for l in range(3):
                acc = 0.0
                for k in range(3):
                    acc += Lp[4 * k + j] * V[3 * k + l]
                E[4 * j + l] = acc
            E[4 * j + 3] = p[j]
        for l in range(3):
            minv[pidx[4 * b + l]] = 1.0 / (4.0 * s2 * slam[3 * b + l])
        minv[pidx[4 * b + 3]] = 1.0 / (salpha[b] * s2)
        for k in range(3):
            acc = 0.0
            for j in range(4):
                acc += Lp[4 * k + j] * pd[j]
            w[k] = 2.0 * acc
        for k in range(3):
            Jw[k] = J[3 * k] * w[0] + J[3 * k + 1] * w[1] + J[3 * k + 2] * w[2]
        pdpd = pd[0] * pd[0] + pd[1] * pd[1] + pd[2] * pd[2] + pd[3] * pd[3]
        for j in range(4):
            acc = 4.0 * (Ld[j] * Jw[0] + Ld[4 + j] * Jw[1] + Ld[8 + j] * Jw[2])
            x[j] = Q[pidx[4 * b + j]] - (acc + salpha[b] * pdpd * p[j])
        for l in range(4):                      # Q^_p = E^T Q_p
            acc = 0.0
            for j in range(4):
                acc += E[4 * j + l] * x[j]
            Q[pidx[4 * b + l]] = acc


cdef void _spatial_jacobian(Py_ssize_t npos, const idx_t* pos, const idx_t* bod,
                            const double* sE, const double* jd, double* jh,
                            Py_ssize_t nj) noexcept nogil:
    """jh = the Jacobian data jd (nj entries) with the p columns of every (row, body)
    pair (``pos[4c:4c+4]`` their data positions, ``bod[c]`` the body) times E."""
    cdef Py_ssize_t c, j, l
    cdef double x[4]
    cdef double acc
    cdef const double* E
    memcpy(jh, jd, nj * sizeof(double))
    for c in range(npos):
        E = sE + 16 * bod[c]
        for j in range(4):
            x[j] = jd[pos[4 * c + j]]
        for l in range(4):
            acc = 0.0
            for j in range(4):
                acc += x[j] * E[4 * j + l]
            jh[pos[4 * c + l]] = acc


cdef void _spatial_back(Py_ssize_t nsp, const idx_t* pidx, const double* sE,
                        double* qdd) noexcept nogil:
    """qdd_p = E qdd^_p per body."""
    cdef Py_ssize_t b, j, l
    cdef double x[4]
    cdef double acc
    cdef const double* E
    for b in range(nsp):
        E = sE + 16 * b
        for l in range(4):
            x[l] = qdd[pidx[4 * b + l]]
        for j in range(4):
            acc = 0.0
            for l in range(4):
                acc += E[4 * j + l] * x[l]
            qdd[pidx[4 * b + j]] = acc


cdef void _spatial_jacobian_used(Py_ssize_t npos, const idx_t* pos, const idx_t* bod,
                                 const double* sE, const double* jd, Py_ssize_t nd,
                                 const idx_t* dst, const idx_t* src, const idx_t* cpair,
                                 double* jv) noexcept nogil:
    """The used entries of J T (a sparse Schur topology's order) straight from the
    Jacobian data jd: ``jv[dst[k]] = jd[src[k]]`` outside the p columns, and for every
    (row, body) pair c the transformed p columns l that are used (``cpair[4c + l]``
    their place in jv, -1 not used) — the same products and sums as
    :func:`_spatial_jacobian`."""
    cdef Py_ssize_t c, j, l, k
    cdef double x[4]
    cdef double acc
    cdef const double* E
    for k in range(nd):
        jv[dst[k]] = jd[src[k]]
    for c in range(npos):
        E = sE + 16 * bod[c]
        for j in range(4):
            x[j] = jd[pos[4 * c + j]]
        for l in range(4):
            k = cpair[4 * c + l]
            if k >= 0:
                acc = 0.0
                for j in range(4):
                    acc += x[j] * E[4 * j + l]
                jv[k] = acc


cdef void _spatial_velocity(Py_ssize_t nsp, const idx_t* pidx, const double* sE,
                            const double* qd, Py_ssize_t n, double* vh) noexcept nogil:
    """vh = T^-1 qd: qd outside the p columns, E^T pd / (p^T p) on them (E^T E =
    (p^T p) I, module docstring of mbcore.system.mass)."""
    cdef Py_ssize_t b, j, l
    cdef double pd[4]
    cdef double s, acc
    cdef const double* E
    memcpy(vh, qd, n * sizeof(double))
    for b in range(nsp):
        E = sE + 16 * b
        s = 0.0
        for j in range(4):
            pd[j] = qd[pidx[4 * b + j]]
            s += E[4 * j + 3] * E[4 * j + 3]
        for l in range(4):
            acc = 0.0
            for j in range(4):
                acc += E[4 * j + l] * pd[j]
            vh[pidx[4 * b + l]] = acc / s
