# Compiled kernels of the spatial force elements (Nikravesh (1988), §11.1, §9.2 carried over to space), included
# by _forces.pyx.  NumPy references: mbplugins.spatial.forces (same packed
# parameters, same formulas: body-frame moments n' -> n* = 2 L^T n' for the
# coordinate laws, global moments n -> n* = 2 G^T n for point loads), equal to
# 1e-12 (tests/test_spatial_forces.py).  Body blocks [x, y, z, e0, e1, e2, e3]; the
# ground block (r = 0, p = (1, 0, 0, 0)) sits at n + 3 of the extended buffers.

cdef inline void _sA(const double* p, double* A) noexcept nogil:
    """A(p), explicit form Nikravesh (1988), Eq. 6.18 (row-major)."""
    cdef double e0 = p[0], e1 = p[1], e2 = p[2], e3 = p[3]
    A[0] = 2.0 * (e0 * e0 + e1 * e1 - 0.5); A[1] = 2.0 * (e1 * e2 - e0 * e3)
    A[2] = 2.0 * (e1 * e3 + e0 * e2)
    A[3] = 2.0 * (e1 * e2 + e0 * e3); A[4] = 2.0 * (e0 * e0 + e2 * e2 - 0.5)
    A[5] = 2.0 * (e2 * e3 - e0 * e1)
    A[6] = 2.0 * (e1 * e3 - e0 * e2); A[7] = 2.0 * (e2 * e3 + e0 * e1)
    A[8] = 2.0 * (e0 * e0 + e3 * e3 - 0.5)


cdef inline void _sLw(const double* p, const double* pd, double* w) noexcept nogil:
    """omega' = 2 L(p) pd."""
    w[0] = 2.0 * (-p[1] * pd[0] + p[0] * pd[1] + p[3] * pd[2] - p[2] * pd[3])
    w[1] = 2.0 * (-p[2] * pd[0] - p[3] * pd[1] + p[0] * pd[2] + p[1] * pd[3])
    w[2] = 2.0 * (-p[3] * pd[0] + p[2] * pd[1] - p[1] * pd[2] + p[0] * pd[3])


cdef inline void _sGw(const double* p, const double* pd, double* w) noexcept nogil:
    """omega = 2 G(p) pd."""
    w[0] = 2.0 * (-p[1] * pd[0] + p[0] * pd[1] - p[3] * pd[2] + p[2] * pd[3])
    w[1] = 2.0 * (-p[2] * pd[0] + p[3] * pd[1] + p[0] * pd[2] - p[1] * pd[3])
    w[2] = 2.0 * (-p[3] * pd[0] - p[2] * pd[1] + p[1] * pd[2] + p[0] * pd[3])


cdef inline void _sLTn(const double* p, const double* n, double sign,
                       double* out) noexcept nogil:
    """out += sign * 2 L(p)^T n'."""
    out[0] += sign * 2.0 * (-p[1] * n[0] - p[2] * n[1] - p[3] * n[2])
    out[1] += sign * 2.0 * (p[0] * n[0] - p[3] * n[1] + p[2] * n[2])
    out[2] += sign * 2.0 * (p[3] * n[0] + p[0] * n[1] - p[1] * n[2])
    out[3] += sign * 2.0 * (-p[2] * n[0] + p[1] * n[1] + p[0] * n[2])


cdef inline void _sGTn(const double* p, const double* n, double* out) noexcept nogil:
    """out += 2 G(p)^T n."""
    out[0] += 2.0 * (-p[1] * n[0] - p[2] * n[1] - p[3] * n[2])
    out[1] += 2.0 * (p[0] * n[0] + p[3] * n[1] - p[2] * n[2])
    out[2] += 2.0 * (-p[3] * n[0] + p[0] * n[1] + p[1] * n[2])
    out[3] += 2.0 * (p[2] * n[0] - p[1] * n[1] + p[0] * n[2])


cdef inline void _smv(const double* A, const double* x, double* y) noexcept nogil:
    y[0] = A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
    y[1] = A[3] * x[0] + A[4] * x[1] + A[5] * x[2]
    y[2] = A[6] * x[0] + A[7] * x[1] + A[8] * x[2]


cdef inline void _smtv(const double* A, const double* x, double* y) noexcept nogil:
    y[0] = A[0] * x[0] + A[3] * x[1] + A[6] * x[2]
    y[1] = A[1] * x[0] + A[4] * x[1] + A[7] * x[2]
    y[2] = A[2] * x[0] + A[5] * x[1] + A[8] * x[2]


cdef inline void _scross(const double* a, const double* b, double* c) noexcept nogil:
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]


cdef inline double _sdot7(const double* g, const double* qd) noexcept nogil:
    cdef double acc = 0.0
    cdef int k
    for k in range(7):
        acc += g[k] * qd[k]
    return acc


cdef inline void _spoint_velocity(const double* q, const double* qd, const double* s,
                                  double* A, double* S, double* v) noexcept nogil:
    """A, S = A s' and v = rdot + A (omega' x s') of the body block at q."""
    cdef double w[3]
    cdef double ws[3]
    cdef double t[3]
    _sA(q + 3, A)
    _smv(A, s, S)
    _sLw(q + 3, qd + 3, w)
    _scross(w, s, ws)
    _smv(A, ws, t)
    v[0] = qd[0] + t[0]; v[1] = qd[1] + t[1]; v[2] = qd[2] + t[2]


cdef inline void _qmul4(const double* a, const double* b, double* c) noexcept nogil:
    """c = a ⊗ b (Euler-parameter product, scalar first)."""
    c[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3]
    c[1] = a[0] * b[1] + b[0] * a[1] + a[2] * b[3] - a[3] * b[2]
    c[2] = a[0] * b[2] + b[0] * a[2] + a[3] * b[1] - a[1] * b[3]
    c[3] = a[0] * b[3] + b[0] * a[3] + a[1] * b[2] - a[2] * b[1]


cdef inline void _add_coordinate(double ftot, const double* Ji, const double* Jj,
                                 double* gv) noexcept nogil:
    """gv (2 x 6: [f, n'] of bodies i, j) -= ftot * J (J: 12 numbers, [r, pi'] of i
    then j)."""
    cdef int k
    for k in range(6):
        gv[k] -= ftot * Ji[k]
        gv[6 + k] -= ftot * Jj[k]


cdef inline double _jdot(const double* Ji, const double* Jj, const double* rdi,
                         const double* wi, const double* rdj, const double* wj) noexcept nogil:
    """J . v with v = [rdot_i, omega'_i, rdot_j, omega'_j]."""
    return (Ji[0] * rdi[0] + Ji[1] * rdi[1] + Ji[2] * rdi[2]
            + Ji[3] * wi[0] + Ji[4] * wi[1] + Ji[5] * wi[2]
            + Jj[0] * rdj[0] + Jj[1] * rdj[1] + Jj[2] * rdj[2]
            + Jj[3] * wj[0] + Jj[4] * wj[1] + Jj[5] * wj[2])


cdef inline void _gv_to_q(const double* q, Py_ssize_t bi, Py_ssize_t bj, const double* gv,
                          double* Q) noexcept nogil:
    """Q += [f, 2 L^T n'] of bodies i and j from gv = [f_i, n'_i, f_j, n'_j]."""
    cdef int k
    for k in range(3):
        Q[bi + k] += gv[k]
        Q[bj + k] += gv[6 + k]
    _sLTn(q + bi + 3, gv + 3, 1.0, Q + bi + 3)
    _sLTn(q + bj + 3, gv + 9, 1.0, Q + bj + 3)


cdef Py_ssize_t _spatial_element(FGroup* G, Py_ssize_t e, const double* q,
                                 const double* qd, const double* fv, double* Q,
                                 double* pw) noexcept nogil:
    """One spatial element: adds its generalised force into Q and its
    non-conservative power into pw[0]; returns -1, or e when it cannot be
    evaluated."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * G.nb], bj, k
    cdef double Ai[9]
    cdef double Aj[9]
    cdef double Si[3]
    cdef double Sj[3]
    cdef double vi[3]
    cdef double vj[3]
    cdef double l[3]
    cdef double F[3]
    cdef double x[3]
    cdef double n[3]
    cdef double w[3]
    cdef double g[14]
    cdef double L, Ld, f, fs, sp_
    cdef double gv[12]
    cdef double Ji[6]
    cdef double Jj[6]
    cdef double wi[3]
    cdef double wj[3]
    cdef double u[3]
    cdef double a[3]
    cdef double fi[3]
    cdef double gi[3]
    cdef double fj[3]
    cdef double Jx[12]
    cdef double Jy[12]
    cdef double qa[4]
    cdef double qb[4]
    cdef double qc[4]
    cdef double wq[4]
    cdef double A0[9]
    cdef double P[9]
    cdef double xv, yv, r2, th, raw, sd
    cdef int c
    cdef double* par_rw
    for k in range(14):
        g[k] = 0.0
    for k in range(12):
        gv[k] = 0.0
    if G.kind == S_TSDA:
        # par = [s'_i, s'_j, k, c, L0]
        bj = G.boff[e * 2 + 1]
        _spoint_velocity(q + bi, qd + bi, p, Ai, Si, vi)
        _spoint_velocity(q + bj, qd + bj, p + 3, Aj, Sj, vj)
        for k in range(3):
            l[k] = q[bj + k] + Sj[k] - q[bi + k] - Si[k]
        L = sqrt(l[0] * l[0] + l[1] * l[1] + l[2] * l[2])
        if not (L >= MIN_LENGTH):
            return e
        for k in range(3):
            l[k] /= L
        Ld = l[0] * (vj[0] - vi[0]) + l[1] * (vj[1] - vi[1]) + l[2] * (vj[2] - vi[2])
        f = p[7] * Ld + fv[3 * G.fidx[e]]
        pw[0] -= f * Ld
        f += p[6] * (L - p[8])
        for k in range(3):
            F[k] = f * l[k]
            Q[bi + k] += F[k]
            Q[bj + k] -= F[k]
        _smtv(Ai, F, x)
        _scross(p, x, n)                       # n'_i = s'_i x (A_i^T F)
        _sLTn(q + bi + 3, n, 1.0, Q + bi + 3)
        _smtv(Aj, F, x)
        _scross(p + 3, x, n)                   # n'_j = -s'_j x (A_j^T F)
        _sLTn(q + bj + 3, n, -1.0, Q + bj + 3)
    elif G.kind == S_FORCE:
        # par = [s', frame]; f = (fx, fy, fz)(t), global or body axes
        _sA(q + bi + 3, Ai)
        for k in range(3):
            x[k] = fv[3 * G.fidx[e * 3 + k]]
        if p[3] > 0.5:
            _smv(Ai, x, F)
        else:
            F[0] = x[0]; F[1] = x[1]; F[2] = x[2]
        _smv(Ai, p, Si)
        _scross(Si, F, n)
        for k in range(3):
            g[k] = F[k]
        _sGTn(q + bi + 3, n, g + 3)
        pw[0] += _sdot7(g, qd + bi)
        for k in range(7):
            Q[bi + k] += g[k]
    elif G.kind == S_TORQUE:
        # par = [frame]; bodies (body, reaction_body)
        bj = G.boff[e * 2 + 1]
        for k in range(3):
            x[k] = fv[3 * G.fidx[e * 3 + k]]
        if p[0] > 0.5:
            _sA(q + bi + 3, Ai)
            _smv(Ai, x, n)
        else:
            n[0] = x[0]; n[1] = x[1]; n[2] = x[2]
        _sGTn(q + bi + 3, n, g + 3)
        for k in range(3):
            n[k] = -n[k]
        _sGTn(q + bj + 3, n, g + 10)
        pw[0] += _sdot7(g, qd + bi) + _sdot7(g + 7, qd + bj)
        for k in range(7):
            Q[bi + k] += g[k]
            Q[bj + k] += g[7 + k]
    elif G.kind == S_DRAG:
        # par = [s', 0.5 c_d rho A, c, wind]
        _sA(q + bi + 3, Ai)
        _smv(Ai, p, Si)
        _sGw(q + bi + 3, qd + bi + 3, w)
        _scross(w, Si, x)
        for k in range(3):
            vi[k] = qd[bi + k] + x[k] - p[5 + k]
        sp_ = sqrt(vi[0] * vi[0] + vi[1] * vi[1] + vi[2] * vi[2])
        fs = -(p[3] * sp_ + p[4])
        for k in range(3):
            F[k] = fs * vi[k]
            g[k] = F[k]
        _scross(Si, F, n)
        _sGTn(q + bi + 3, n, g + 3)
        pw[0] += _sdot7(g, qd + bi)
        for k in range(7):
            Q[bi + k] += g[k]
    elif G.kind == S_RSDA:
        # par = [f'_i, g'_i, f'_j, theta_tracked, k, c, theta0]; the tracked angle is
        # updated in place (the NumPy reference's state, shared memory)
        bj = G.boff[e * 2 + 1]
        _sA(q + bi + 3, Ai)
        _sA(q + bj + 3, Aj)
        _smv(Ai, p, fi)
        _smv(Ai, p + 3, gi)
        _smv(Aj, p + 6, fj)
        xv = fi[0] * fj[0] + fi[1] * fj[1] + fi[2] * fj[2]
        yv = gi[0] * fj[0] + gi[1] * fj[1] + gi[2] * fj[2]
        r2 = xv * xv + yv * yv
        if not (r2 >= 1e-12):           # MIN_RHO2 of the reference: angle undefined
            return e
        # omega'-Jacobians: x: [f'_i x A_i^T f_j] on i, [f'_j x A_j^T f_i] on j
        for k in range(12):
            Jx[k] = 0.0
            Jy[k] = 0.0
        _smtv(Ai, fj, a)
        _scross(p, a, Jx + 3)
        _scross(p + 3, a, Jy + 3)
        _smtv(Aj, fi, a)
        _scross(p + 6, a, Jx + 9)
        _smtv(Aj, gi, a)
        _scross(p + 6, a, Jy + 9)
        for k in range(12):
            Jx[k] = (xv * Jy[k] - yv * Jx[k]) / r2        # theta_q, in Jx
        raw = atan2(yv, xv)
        th = raw + TWO_PI * round((p[9] - raw) / TWO_PI)
        par_rw = <double*> p
        par_rw[9] = th
        _sLw(q + bi + 3, qd + bi + 3, wi)
        _sLw(q + bj + 3, qd + bj + 3, wj)
        sd = _jdot(Jx, Jx + 6, qd + bi, wi, qd + bj, wj)
        f = p[11] * sd + fv[3 * G.fidx[e]]
        pw[0] -= f * sd
        f += p[10] * (th - p[12])
        _add_coordinate(f, Jx, Jx + 6, gv)
        _gv_to_q(q, bi, bj, gv, Q)
    elif G.kind == S_BUSHING:
        # par = [s'_i, s'_j, q0, k(3), c(3), kr(3), cr(3)]
        bj = G.boff[e * 2 + 1]
        _spoint_velocity(q + bi, qd + bi, p, Ai, Si, vi)
        _spoint_velocity(q + bj, qd + bj, p + 3, Aj, Sj, vj)
        _sLw(q + bi + 3, qd + bi + 3, wi)
        _sLw(q + bj + 3, qd + bj + 3, wj)
        for k in range(3):
            l[k] = q[bj + k] + Sj[k] - q[bi + k] - Si[k]
        _smtv(Ai, l, a)                               # A_i^T d
        for c in range(3):
            # d_c = e_c(i) . d: e_c = column c of A_i
            u[0] = Ai[c]; u[1] = Ai[3 + c]; u[2] = Ai[6 + c]
            xv = u[0] * l[0] + u[1] * l[1] + u[2] * l[2]
            for k in range(3):
                Ji[k] = -u[k]
                Jj[k] = u[k]
            # body i: e'_c x (A_i^T d) (the axis) + e_c^T A_i s~'_i (the point)
            x[0] = 0.0; x[1] = 0.0; x[2] = 0.0
            x[c] = 1.0
            _scross(x, a, Ji + 3)
            _smtv(Ai, u, n)                          # A_i^T e_c = e'_c (up to |p|)
            _scross(p, n, F)                         # s'_i x (A_i^T e_c)
            for k in range(3):
                Ji[3 + k] -= F[k]
            _smtv(Aj, u, n)
            _scross(p + 3, n, F)                     # body j: -(s'_j x (A_j^T e_c)) . w
            for k in range(3):
                Jj[3 + k] = F[k]
            sd = _jdot(Ji, Jj, qd + bi, wi, qd + bj, wj)
            f = p[10 + c] * xv + p[13 + c] * sd
            pw[0] -= p[13 + c] * sd * sd
            _add_coordinate(f, Ji, Jj, gv)
        # relative rotation: w = conj(q0) ⊗ conj(p_j) ⊗ p_i, theta = -2 vec(w)
        qa[0] = q[bj + 3]; qa[1] = -q[bj + 4]; qa[2] = -q[bj + 5]; qa[3] = -q[bj + 6]
        _qmul4(qa, q + bi + 3, qb)
        qa[0] = p[6]; qa[1] = -p[7]; qa[2] = -p[8]; qa[3] = -p[9]
        _qmul4(qa, qb, wq)
        _sA(p + 6, A0)
        # Pi = 1/2 (w0 I + w~),  Pj = -1/2 (w0 I - w~) A0^T
        P[0] = wq[0]; P[1] = -wq[3]; P[2] = wq[2]
        P[3] = wq[3]; P[4] = wq[0]; P[5] = -wq[1]
        P[6] = -wq[2]; P[7] = wq[1]; P[8] = wq[0]
        for c in range(3):
            for k in range(6):
                Ji[k] = 0.0
                Jj[k] = 0.0
            for k in range(3):
                Ji[3 + k] = -2.0 * 0.5 * P[3 * c + k]
                # row c of -1/2 (w0 I - w~) A0^T: (w0 I - w~) = P^T
                Jj[3 + k] = 2.0 * 0.5 * (P[c] * A0[3 * k] + P[3 + c] * A0[3 * k + 1]
                                         + P[6 + c] * A0[3 * k + 2])
            xv = -2.0 * wq[1 + c]
            sd = _jdot(Ji, Jj, qd + bi, wi, qd + bj, wj)
            f = p[16 + c] * xv + p[19 + c] * sd
            pw[0] -= p[19 + c] * sd * sd
            _add_coordinate(f, Ji, Jj, gv)
        _gv_to_q(q, bi, bj, gv, Q)
    return -1

