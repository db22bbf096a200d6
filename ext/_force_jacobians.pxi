# Compiled force Jacobians K = dQ/dq, C = dQ/dqd per element, included by
# _forces.pyx.  Each kernel writes the element's (nl x nl) blocks, nl = bodies x
# coordinates per body, row-major in the order of the element's body blocks; the
# System scatters them (ground and padding columns dropped).  NumPy references:
# the ``force_jacobian`` methods of mbplugins.planar.forces / mbplugins.spatial.forces
# (same formulas, equal to 1e-12: tests/test_force_jacobians.py).

#: kernel name -> True for the force kernels that have a compiled Jacobian
JAC_KERNELS = {"spatial_tsda": True, "spatial_force": True, "spatial_torque": True,
               "spatial_drag": True, "spatial_rsda": True, "spatial_bushing": True}

# -- derivatives of the spatial building blocks (exact also off |p| = 1) -------------
cdef inline void _jdA(const double* p, const double* a, bint transpose,
                      double* out) noexcept nogil:
    """out (3 x 4, row-major) = d(A(p) a)/dp, or d(A(p)^T a)/dp: ``[4 e0 a ± 2 e x a,
    2 (e . a) I + 2 e a^T ∓ 2 e0 a~]`` (A of Nikravesh (1988), Eq. 6.18 as _sA evaluates it)."""
    cdef double sg = -1.0 if transpose else 1.0
    cdef double ea = p[1] * a[0] + p[2] * a[1] + p[3] * a[2]
    cdef double ex[3]
    cdef int k, l
    _scross(p + 1, a, ex)
    for k in range(3):
        out[4 * k] = 4.0 * p[0] * a[k] + sg * 2.0 * ex[k]
        for l in range(3):
            out[4 * k + 1 + l] = 2.0 * p[1 + k] * a[l] + (2.0 * ea if k == l else 0.0)
    # -/+ 2 e0 a~  (a~ = [[0, -a2, a1], [a2, 0, -a0], [-a1, a0, 0]])
    out[2] += sg * 2.0 * p[0] * a[2]; out[3] -= sg * 2.0 * p[0] * a[1]
    out[5] -= sg * 2.0 * p[0] * a[2]; out[7] += sg * 2.0 * p[0] * a[0]
    out[9] += sg * 2.0 * p[0] * a[1]; out[10] -= sg * 2.0 * p[0] * a[0]


cdef inline void _jcol(const double* M, int ncol, int j, double* c) noexcept nogil:
    """Column j of a row-major 3 x ncol matrix."""
    c[0] = M[j]; c[1] = M[ncol + j]; c[2] = M[2 * ncol + j]


cdef inline void _jaddGT(const double* p, const double* n, bint useL, double sign,
                         double* K, int ld, int r0, int c0) noexcept nogil:
    """K[r0:r0+4, c0:c0+4] += sign * d(2 M(p)^T n)/dp (M = G or L, linear in p:
    column j is 2 M(e_j)^T n)."""
    cdef double e[4]
    cdef double t[4]
    cdef int j, r
    for j in range(4):
        e[0] = 0.0; e[1] = 0.0; e[2] = 0.0; e[3] = 0.0
        e[j] = 1.0
        t[0] = 0.0; t[1] = 0.0; t[2] = 0.0; t[3] = 0.0
        if useL:
            _sLTn(e, n, 1.0, t)
        else:
            _sGTn(e, n, t)
        for r in range(4):
            K[(r0 + r) * ld + c0 + j] += sign * t[r]


cdef inline void _jsetGTcol(const double* p, const double* x, bint useL, double sign,
                            double* K, int ld, int r0, int c) noexcept nogil:
    """K[r0:r0+4, c] += sign * 2 M(p)^T x (M = G or L)."""
    cdef double t[4]
    cdef int r
    t[0] = 0.0; t[1] = 0.0; t[2] = 0.0; t[3] = 0.0
    if useL:
        _sLTn(p, x, 1.0, t)
    else:
        _sGTn(p, x, t)
    for r in range(4):
        K[(r0 + r) * ld + c] += sign * t[r]


# -- coordinate laws (spatial rsda, bushing): K = -sum g (k grad + c H^T qd)^T + f H ---
cdef inline void _jzero(double* x, int n) noexcept nogil:
    cdef int k
    for k in range(n):
        x[k] = 0.0


cdef inline void _jcoord_add(const double* g, const double* grad, const double* H,
                             double f, double k, double c, const double* qdi,
                             const double* qdj, double* K, double* C) noexcept nogil:
    """K -= g (k grad + c H^T qd)^T + f H,  C -= c g g^T (14 x 14, columns [i, j])."""
    cdef double hq[14]
    cdef double qd14[14]
    cdef int a, b
    for a in range(7):
        qd14[a] = qdi[a]
        qd14[7 + a] = qdj[a]
    for b in range(14):
        hq[b] = 0.0
        for a in range(14):
            hq[b] += qd14[a] * H[14 * a + b]
    for a in range(14):
        for b in range(14):
            K[14 * a + b] -= g[a] * (k * grad[b] + c * hq[b]) + f * H[14 * a + b]
            C[14 * a + b] -= c * g[a] * g[b]


cdef void _jdot_ij(const double* ap, const double* ai, const double* fpj,
                   const double* fj, const double* pi, const double* pj, const double* Ai,
                   const double* Aj, double* val, double* g, double* grad,
                   double* H) noexcept nogil:
    """z = a_i . f_j (SpatialRSDA reference: mbplugins.spatial.forces._dot_ij): value,
    q-form row g, true gradient and H = dg/dq (zeroed here)."""
    cdef double dAi[12]
    cdef double dAj[12]
    cdef double dT[12]
    cdef double x[3]
    cdef double y[3]
    cdef double ni[3]
    cdef double nj[3]
    cdef double v[3]
    cdef int j, k
    _jzero(g, 14)
    _jzero(grad, 14)
    _jzero(H, 196)
    val[0] = ai[0] * fj[0] + ai[1] * fj[1] + ai[2] * fj[2]
    _jdA(pi, ap, False, dAi)
    _jdA(pj, fpj, False, dAj)
    for j in range(4):
        for k in range(3):
            grad[3 + j] += dAi[4 * k + j] * fj[k]
            grad[10 + j] += dAj[4 * k + j] * ai[k]
    _smtv(Ai, fj, x)
    _scross(ap, x, ni)
    _smtv(Aj, ai, x)
    _scross(fpj, x, nj)
    _sLTn(pi, ni, 1.0, g + 3)
    _sLTn(pj, nj, 1.0, g + 10)
    _jaddGT(pi, ni, True, 1.0, H, 14, 3, 3)
    _jaddGT(pj, nj, True, 1.0, H, 14, 10, 10)
    _jdA(pi, fj, True, dT)
    for j in range(4):
        _jcol(dT, 4, j, x)
        _scross(ap, x, v)
        _jsetGTcol(pi, v, True, 1.0, H, 14, 3, 3 + j)
        _jcol(dAj, 4, j, x)
        _smtv(Ai, x, y)
        _scross(ap, y, v)
        _jsetGTcol(pi, v, True, 1.0, H, 14, 3, 10 + j)
    _jdA(pj, ai, True, dT)
    for j in range(4):
        _jcol(dT, 4, j, x)
        _scross(fpj, x, v)
        _jsetGTcol(pj, v, True, 1.0, H, 14, 10, 10 + j)
        _jcol(dAi, 4, j, x)
        _smtv(Aj, x, y)
        _scross(fpj, y, v)
        _jsetGTcol(pj, v, True, 1.0, H, 14, 10, 3 + j)


cdef Py_ssize_t _rsda_jacobian(FGroup* G, Py_ssize_t e, const double* q, const double* qd,
                               const double* fv, double* K, double* C) noexcept nogil:
    """Spatial RSDA (SpatialRSDA._coordinate_derivatives): theta = atan2(y, x)."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * 2], bj = G.boff[e * 2 + 1]
    cdef const double* pi = q + bi + 3
    cdef const double* pj = q + bj + 3
    cdef double Ai[9]
    cdef double Aj[9]
    cdef double fi[3]
    cdef double gi[3]
    cdef double fj[3]
    cdef double gx[14]
    cdef double dx[14]
    cdef double Hx[196]
    cdef double gy[14]
    cdef double dy[14]
    cdef double Hy[196]
    cdef double x, y, r2, raw, th, sd, f
    cdef int a, b
    cdef double* par_rw
    _sA(pi, Ai)
    _sA(pj, Aj)
    _smv(Ai, p, fi)
    _smv(Ai, p + 3, gi)
    _smv(Aj, p + 6, fj)
    _jdot_ij(p, fi, p + 6, fj, pi, pj, Ai, Aj, &x, gx, dx, Hx)
    _jdot_ij(p + 3, gi, p + 6, fj, pi, pj, Ai, Aj, &y, gy, dy, Hy)
    r2 = x * x + y * y
    if not (r2 >= 1e-12):
        return e
    raw = atan2(y, x)
    th = raw + TWO_PI * round((p[9] - raw) / TWO_PI)
    par_rw = <double*> p
    par_rw[9] = th                      # the tracked angle, as the force kernel
    # H_theta into Hx, g_theta into gx, grad_theta into dx (in this order)
    for a in range(14):
        for b in range(14):
            Hx[14 * a + b] = ((gy[a] * dx[b] - gx[a] * dy[b] + x * Hy[14 * a + b]
                               - y * Hx[14 * a + b]) / r2)
    for a in range(14):
        gx[a] = (x * gy[a] - y * gx[a]) / r2
    for a in range(14):
        for b in range(14):
            Hx[14 * a + b] -= 2.0 * gx[a] * (x * dx[b] + y * dy[b]) / r2
    for a in range(14):
        dx[a] = (x * dy[a] - y * dx[a]) / r2
    sd = 0.0
    for a in range(7):
        sd += gx[a] * qd[bi + a] + gx[7 + a] * qd[bj + a]
    f = p[10] * (th - p[12]) + p[11] * sd + fv[3 * G.fidx[e]]
    _jcoord_add(gx, dx, Hx, f, p[10], p[11], qd + bi, qd + bj, K, C)
    return -1


cdef Py_ssize_t _bushing_jacobian(FGroup* G, Py_ssize_t e, const double* q,
                                  const double* qd, double* K, double* C) noexcept nogil:
    """Bushing (Bushing._coordinate_derivatives): d_c = u . l and theta_c = -2 w_c."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * 2], bj = G.boff[e * 2 + 1]
    cdef const double* pi = q + bi + 3
    cdef const double* pj = q + bj + 3
    cdef double Ai[9]
    cdef double Aj[9]
    cdef double A0[9]
    cdef double D[42]
    cdef double dS[12]
    cdef double du[12]
    cdef double dTl[12]
    cdef double dTu[12]
    cdef double dW[56]
    cdef double g[14]
    cdef double grad[14]
    cdef double H[196]
    cdef double l[3]
    cdef double u[3]
    cdef double ec[3]
    cdef double x[3]
    cdef double y[3]
    cdef double z[3]
    cdef double v[3]
    cdef double ni[3]
    cdef double nj[3]
    cdef double ATl[3]
    cdef double Ji[3]
    cdef double Jj[3]
    cdef double cq0[4]
    cdef double cpj[4]
    cdef double t4[4]
    cdef double t5[4]
    cdef double ev[4]
    cdef double w[4]
    cdef double val, sd, f
    cdef int c, j, k, b
    _sA(pi, Ai)
    _sA(pj, Aj)
    _jzero(D, 42)
    _smv(Aj, p + 3, x)
    _smv(Ai, p, y)
    for k in range(3):
        l[k] = q[bj + k] + x[k] - q[bi + k] - y[k]
        D[14 * k + k] = -1.0
        D[14 * k + 7 + k] = 1.0
    _jdA(pi, p, False, dS)
    for k in range(3):
        for j in range(4):
            D[14 * k + 3 + j] = -dS[4 * k + j]
    _jdA(pj, p + 3, False, dS)
    for k in range(3):
        for j in range(4):
            D[14 * k + 10 + j] = dS[4 * k + j]
    _smtv(Ai, l, ATl)
    _jdA(pi, l, True, dTl)
    for c in range(3):
        _jzero(g, 14)
        _jzero(grad, 14)
        _jzero(H, 196)
        ec[0] = 0.0; ec[1] = 0.0; ec[2] = 0.0
        ec[c] = 1.0
        u[0] = Ai[c]; u[1] = Ai[3 + c]; u[2] = Ai[6 + c]
        _jdA(pi, ec, False, du)
        _jdA(pi, u, True, dTu)
        val = u[0] * l[0] + u[1] * l[1] + u[2] * l[2]
        for b in range(14):
            grad[b] = u[0] * D[b] + u[1] * D[14 + b] + u[2] * D[28 + b]
        for j in range(4):
            grad[3 + j] += l[0] * du[j] + l[1] * du[4 + j] + l[2] * du[8 + j]
        _scross(ec, ATl, ni)
        _smtv(Ai, u, x)
        _scross(p, x, y)
        for k in range(3):
            ni[k] -= y[k]
        _smtv(Aj, u, x)
        _scross(p + 3, x, nj)
        for k in range(3):
            g[k] = -u[k]
            g[7 + k] = u[k]
        _sLTn(pi, ni, 1.0, g + 3)
        _sLTn(pj, nj, 1.0, g + 10)
        for j in range(4):
            for k in range(3):
                H[14 * k + 3 + j] = -du[4 * k + j]
                H[14 * (7 + k) + 3 + j] = du[4 * k + j]
        # rows of p_i: 2 L_i^T [e_c x (A_i^T dl) (+ e_c x dA^T l - s'_i x (dA^T u + A_i^T du))]
        for b in range(14):
            _jcol(D, 14, b, x)
            _smtv(Ai, x, y)
            _scross(ec, y, v)
            if 3 <= b < 7:
                _jcol(dTl, 4, b - 3, x)
                _scross(ec, x, y)
                _jcol(du, 4, b - 3, x)
                _smtv(Ai, x, z)
                _jcol(dTu, 4, b - 3, x)
                for k in range(3):
                    v[k] += y[k]
                    z[k] += x[k]
                _scross(p, z, y)
                for k in range(3):
                    v[k] -= y[k]
            _jsetGTcol(pi, v, True, 1.0, H, 14, 3, b)
        _jaddGT(pi, ni, True, 1.0, H, 14, 3, 3)
        _jaddGT(pj, nj, True, 1.0, H, 14, 10, 10)
        _jdA(pj, u, True, dTu)
        for j in range(4):
            _jcol(dTu, 4, j, x)
            _scross(p + 3, x, v)
            _jsetGTcol(pj, v, True, 1.0, H, 14, 10, 10 + j)
            _jcol(du, 4, j, x)
            _smtv(Aj, x, y)
            _scross(p + 3, y, v)
            _jsetGTcol(pj, v, True, 1.0, H, 14, 10, 3 + j)
        sd = 0.0
        for k in range(7):
            sd += g[k] * qd[bi + k] + g[7 + k] * qd[bj + k]
        f = p[10 + c] * val + p[13 + c] * sd
        _jcoord_add(g, grad, H, f, p[10 + c], p[13 + c], qd + bi, qd + bj, K, C)
    # rotations: w = conj(q0) ⊗ conj(p_j) ⊗ p_i
    cq0[0] = p[6]; cq0[1] = -p[7]; cq0[2] = -p[8]; cq0[3] = -p[9]
    cpj[0] = pj[0]; cpj[1] = -pj[1]; cpj[2] = -pj[2]; cpj[3] = -pj[3]
    _qmul4(cpj, pi, t4)
    _qmul4(cq0, t4, w)
    _jzero(dW, 56)
    for j in range(4):
        ev[0] = 0.0; ev[1] = 0.0; ev[2] = 0.0; ev[3] = 0.0
        ev[j] = 1.0
        _qmul4(cpj, ev, t4)
        _qmul4(cq0, t4, t5)
        for k in range(4):
            dW[14 * k + 3 + j] = t5[k]
        ev[1] = -ev[1]; ev[2] = -ev[2]; ev[3] = -ev[3]
        _qmul4(ev, pi, t4)
        _qmul4(cq0, t4, t5)
        for k in range(4):
            dW[14 * k + 10 + j] = t5[k]
    _sA(p + 6, A0)
    for c in range(3):
        _jzero(g, 14)
        _jzero(grad, 14)
        _jzero(H, 196)
        ec[0] = 0.0; ec[1] = 0.0; ec[2] = 0.0
        ec[c] = 1.0
        _scross(ec, w + 1, x)
        for k in range(3):
            Ji[k] = -(w[0] * ec[k] + x[k])
            y[k] = w[0] * ec[k] - x[k]
        _smv(A0, y, Jj)
        _sLTn(pi, Ji, 1.0, g + 3)
        _sLTn(pj, Jj, 1.0, g + 10)
        for b in range(14):
            grad[b] = -2.0 * dW[14 * (1 + c) + b]
        for b in range(14):
            if not (3 <= b < 7 or 10 <= b < 14):
                continue
            z[0] = dW[14 + b]; z[1] = dW[28 + b]; z[2] = dW[42 + b]
            _scross(ec, z, x)
            for k in range(3):
                v[k] = -(dW[b] * ec[k] + x[k])
                y[k] = dW[b] * ec[k] - x[k]
            _jsetGTcol(pi, v, True, 1.0, H, 14, 3, b)
            _smv(A0, y, v)
            _jsetGTcol(pj, v, True, 1.0, H, 14, 10, b)
        _jaddGT(pi, Ji, True, 1.0, H, 14, 3, 3)
        _jaddGT(pj, Jj, True, 1.0, H, 14, 10, 10)
        val = -2.0 * w[1 + c]
        sd = 0.0
        for k in range(7):
            sd += g[k] * qd[bi + k] + g[7 + k] * qd[bj + k]
        f = p[16 + c] * val + p[19 + c] * sd
        _jcoord_add(g, grad, H, f, p[16 + c], p[19 + c], qd + bi, qd + bj, K, C)
    return -1


cdef Py_ssize_t _spatial_jacobian(FGroup* G, Py_ssize_t e, const double* q,
                                  const double* qd, const double* fv, double* K,
                                  double* C) noexcept nogil:
    """K, C blocks (nl x nl, zeroed by the caller) of spatial element e: the
    formulas of the references' ``force_jacobian`` (mbplugins.spatial.forces;
    Nikravesh (1988), §9.2 carried over to space); returns -1, or e when it cannot be evaluated."""
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * G.nb], bj, bo
    cdef double A[9]
    cdef double dS[12]
    cdef double dF[12]
    cdef double x[3]
    cdef double F[3]
    cdef double S[3]
    cdef double n[3]
    cdef double a[3]
    cdef double b[3]
    cdef double c3[3]
    cdef double w[3]
    cdef double v[3]
    cdef double Fv[9]
    cdef double ev[4]
    cdef double D[42]
    cdef double V[42]
    cdef double E[42]
    cdef double PD[42]
    cdef double dFq[42]
    cdef double dFd[42]
    cdef double l[3]
    cdef double ld[3]
    cdef double u[3]
    cdef double ws[3]
    cdef double sp_, kq, m0, inv, L, Ld, f, sgn, dLk, dLdq, dLdd
    cdef int k, j, o, bb
    cdef bint body
    cdef const double* pp
    cdef const double* s1
    if G.kind == S_RSDA:
        return _rsda_jacobian(G, e, q, qd, fv, K, C)
    elif G.kind == S_BUSHING:
        return _bushing_jacobian(G, e, q, qd, K, C)
    elif G.kind == S_FORCE:
        # g = [F, 2 G^T (A s' x F)], F global or A f'
        pp = q + bi + 3
        _sA(pp, A)
        for k in range(3):
            x[k] = fv[3 * G.fidx[e * 3 + k]]
        body = p[3] > 0.5
        if body:
            _smv(A, x, F)
            _jdA(pp, x, False, dF)
        else:
            F[0] = x[0]; F[1] = x[1]; F[2] = x[2]
            for k in range(12):
                dF[k] = 0.0
        _smv(A, p, S)
        _scross(S, F, n)
        _jdA(pp, p, False, dS)
        for j in range(4):
            _jcol(dS, 4, j, a)
            _scross(a, F, b)                 # dS_j x F
            _jcol(dF, 4, j, a)
            _scross(S, a, c3)                # S x dF_j
            for k in range(3):
                b[k] += c3[k]
                K[7 * k + 3 + j] = dF[4 * k + j]
            _jsetGTcol(pp, b, False, 1.0, K, 7, 3, 3 + j)
        _jaddGT(pp, n, False, 1.0, K, 7, 3, 3)
    elif G.kind == S_TORQUE:
        # g_i = [0, 2 G_i^T n], g_j = [0, -2 G_j^T n], n global or A_i n'
        bj = G.boff[e * 2 + 1]
        pp = q + bi + 3
        for k in range(3):
            x[k] = fv[3 * G.fidx[e * 3 + k]]
        body = p[0] > 0.5
        if body:
            _sA(pp, A)
            _smv(A, x, n)
            _jdA(pp, x, False, dF)
        else:
            n[0] = x[0]; n[1] = x[1]; n[2] = x[2]
        _jaddGT(pp, n, False, 1.0, K, 14, 3, 3)
        _jaddGT(q + bj + 3, n, False, -1.0, K, 14, 10, 10)
        if body:
            for j in range(4):
                _jcol(dF, 4, j, a)
                _jsetGTcol(pp, a, False, 1.0, K, 14, 3, 3 + j)
                _jsetGTcol(q + bj + 3, a, False, -1.0, K, 14, 10, 3 + j)
    elif G.kind == S_DRAG:
        # g = [f_v, 2 G^T (s x f_v)], v = rdot + w x s - wind, w = 2 G pdot
        pp = q + bi + 3
        _sA(pp, A)
        _smv(A, p, S)
        _sGw(pp, qd + bi + 3, w)
        _scross(w, S, x)
        for k in range(3):
            v[k] = qd[bi + k] + x[k] - p[5 + k]
        sp_ = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        kq = p[3]
        m0 = -(kq * sp_ + p[4])
        inv = kq / sp_ if sp_ > 0.0 else 0.0
        for k in range(3):
            F[k] = m0 * v[k]
            for j in range(3):
                Fv[3 * k + j] = -inv * v[k] * v[j] + (m0 if k == j else 0.0)
        _scross(S, F, n)
        _jdA(pp, p, False, dS)
        # q columns (p only): dv_j = (2 G(e_j) pdot) x S + w x dS_j
        for j in range(4):
            ev[0] = 0.0; ev[1] = 0.0; ev[2] = 0.0; ev[3] = 0.0
            ev[j] = 1.0
            _sGw(ev, qd + bi + 3, a)
            _scross(a, S, b)
            _jcol(dS, 4, j, a)
            _scross(w, a, c3)
            for k in range(3):
                b[k] += c3[k]
            _smv(Fv, b, c3)                  # df_j
            for k in range(3):
                K[7 * k + 3 + j] = c3[k]
            _scross(S, c3, b)                # S x df_j - f x dS_j
            _scross(F, a, c3)
            for k in range(3):
                b[k] -= c3[k]
            _jsetGTcol(pp, b, False, 1.0, K, 7, 3, 3 + j)
        _jaddGT(pp, n, False, 1.0, K, 7, 3, 3)
        # qd columns: dv/drdot = I, dv/dpdot_j = (2 G e_j) x S
        for j in range(7):
            if j < 3:
                a[0] = 0.0; a[1] = 0.0; a[2] = 0.0
                a[j] = 1.0
            else:
                ev[0] = 0.0; ev[1] = 0.0; ev[2] = 0.0; ev[3] = 0.0
                ev[j - 3] = 1.0
                _sGw(pp, ev, b)
                _scross(b, S, a)
            _smv(Fv, a, c3)
            for k in range(3):
                C[7 * k + j] = c3[k]
            _scross(S, c3, b)
            _jsetGTcol(pp, b, False, 1.0, C, 7, 3, j)
    elif G.kind == S_TSDA:
        # see SpatialTSDA.force_jacobian; columns [r_i, p_i, r_j, p_j]
        bj = G.boff[e * 2 + 1]
        for k in range(42):
            D[k] = 0.0; V[k] = 0.0; E[k] = 0.0
        for k in range(3):
            l[k] = 0.0; ld[k] = 0.0
        for bb in range(2):
            bo = bi if bb == 0 else bj
            sgn = -1.0 if bb == 0 else 1.0
            o = 7 * bb
            pp = q + bo + 3
            s1 = p + 3 * bb
            _sA(pp, A)
            _sLw(pp, qd + bo + 3, w)
            _smv(A, s1, S)
            _scross(w, s1, ws)
            _smv(A, ws, x)
            for k in range(3):
                l[k] += sgn * (q[bo + k] + S[k])
                ld[k] += sgn * (qd[bo + k] + x[k])
                D[14 * k + o + k] = sgn
                V[14 * k + o + k] = sgn
            _jdA(pp, s1, False, dS)
            _jdA(pp, ws, False, dF)
            for j in range(4):
                ev[0] = 0.0; ev[1] = 0.0; ev[2] = 0.0; ev[3] = 0.0
                ev[j] = 1.0
                _sLw(pp, ev, a)                  # 2 L e_j
                _scross(a, s1, b)
                _smv(A, b, c3)                   # A (2 L e_j x s')
                _sLw(ev, qd + bo + 3, a)         # 2 L(e_j) pdot
                _scross(a, s1, b)
                _smv(A, b, n)                    # A (2 L(e_j) pdot x s')
                for k in range(3):
                    D[14 * k + o + 3 + j] = sgn * dS[4 * k + j]
                    V[14 * k + o + 3 + j] = sgn * c3[k]
                    E[14 * k + o + 3 + j] = sgn * (dF[4 * k + j] + n[k])
        L = sqrt(l[0] * l[0] + l[1] * l[1] + l[2] * l[2])
        if not (L >= MIN_LENGTH):
            return e
        for k in range(3):
            u[k] = l[k] / L
        Ld = u[0] * ld[0] + u[1] * ld[1] + u[2] * ld[2]
        f = p[6] * (L - p[8]) + p[7] * Ld + fv[3 * G.fidx[e]]
        for j in range(14):
            dLk = u[0] * D[j] + u[1] * D[14 + j] + u[2] * D[28 + j]
            for k in range(3):
                PD[14 * k + j] = (D[14 * k + j] - u[k] * dLk) / L
            dLdq = (ld[0] * PD[j] + ld[1] * PD[14 + j] + ld[2] * PD[28 + j]
                    + u[0] * E[j] + u[1] * E[14 + j] + u[2] * E[28 + j])
            dLdd = u[0] * V[j] + u[1] * V[14 + j] + u[2] * V[28 + j]
            for k in range(3):
                dFq[14 * k + j] = u[k] * (p[6] * dLk + p[7] * dLdq) + f * PD[14 * k + j]
                dFd[14 * k + j] = p[7] * u[k] * dLdd
        for k in range(3):
            F[k] = f * u[k]
        for bb in range(2):
            bo = bi if bb == 0 else bj
            sgn = 1.0 if bb == 0 else -1.0
            o = 7 * bb
            pp = q + bo + 3
            s1 = p + 3 * bb
            _sA(pp, A)
            _smtv(A, F, x)
            _scross(s1, x, n)                    # n' = s' x A^T F
            _jdA(pp, F, True, dF)                # d(A^T F)/dp
            for j in range(14):
                for k in range(3):
                    K[14 * (o + k) + j] = sgn * dFq[14 * k + j]
                    C[14 * (o + k) + j] = sgn * dFd[14 * k + j]
                _jcol(dFq, 14, j, a)
                _smtv(A, a, b)
                if o + 3 <= j < o + 7:
                    for k in range(3):
                        b[k] += dF[4 * k + j - o - 3]
                _scross(s1, b, c3)
                _jsetGTcol(pp, c3, True, sgn, K, 14, o + 3, j)
                _jcol(dFd, 14, j, a)
                _smtv(A, a, b)
                _scross(s1, b, c3)
                _jsetGTcol(pp, c3, True, sgn, C, 14, o + 3, j)
            _jaddGT(pp, n, True, sgn, K, 14, o + 3, o + 3)
    return -1


cdef class ForceJacobianEvaluator:
    """K and C blocks of every element of the groups with a compiled Jacobian
    (:data:`JAC_KERNELS`), written into caller-owned buffers (no allocation per
    evaluation, no Python per element).  Attributes: src/mbcore/_ext/_forces.pxd
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
            if g.get("capsule") is None and g["kernel"] not in JAC_KERNELS:
                raise ValueError(f"force kernel {g['kernel']!r} has no compiled Jacobian")
            # par is the group's own array (shared state, as forces): no copy
            G = &self.groups[k]
            self.need_fv = max(self.need_fv, _fill_group(G, g, self._keep, n))
            if G.kind == F_EXTERNAL:
                if G.ext.jacobian == NULL:
                    raise ValueError(f"force kernel {g['kernel']!r} has no Jacobian")
                nc = 7 if G.ext.body_kind == MBCORE_BODY_SPATIAL else 3
            else:
                nc = 7                   # the built-in kernels: spatial
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
            if G.kind == F_EXTERNAL:       # the plugin writes the whole group's blocks
                bad = _external_jacobians(G, self.qx, self.qdx, t, fv,
                                          K + self.boff_out[g], C + self.boff_out[g])
                if bad >= 0:
                    self.failed_group = g
                    self.failed_element = bad
                    return g
                continue
            for e in range(G.ne):
                Kp = K + self.boff_out[g] + e * nl2
                Cp = C + self.boff_out[g] + e * nl2
                bad = _spatial_jacobian(G, e, self.qx, self.qdx, fv, Kp, Cp)
                if bad >= 0:
                    self.failed_group = g
                    self.failed_element = bad
                    return g
        return -1
