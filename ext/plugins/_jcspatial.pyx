# cython: language_level=3
"""Joint coordinates of spatial trees in C (``mbcore._ext._jcspatial``): the outward
kinematic pass and the articulated-body recursion with 6-wide blocks.

NumPy reference: ``mbplugins.formulations.jc_spatial`` (``SpatialTree.outward``,
``SpatialTree.body_forces``, ``SpatialTree.theta_dot``, ``articulated_body_blocks``);
tests keep them equal to 1e-12.  Joint kinds: 0 revolute, 1 translational,
2 cylindrical, 3 universal, 4 spherical, 5 free (floating base).  Joints in tree
order (a parent before its children), parent -1 = the ground; 6 planar.
"""
from libc.math cimport sin, cos, sqrt
from libc.string cimport memset

import numpy as np

ctypedef Py_ssize_t idx_t

include "_bounds.pxi"

cdef int NV[7]
NV[:] = [1, 1, 2, 2, 3, 6, 3]
cdef int NQ[7]
NQ[:] = [1, 1, 2, 2, 4, 7, 3]


cdef inline void _qmul(const double* a, const double* b, double* o) noexcept nogil:
    """o = a ⊗ b (o may not alias a or b)."""
    o[0] = a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3]
    o[1] = a[0] * b[1] + b[0] * a[1] + a[2] * b[3] - a[3] * b[2]
    o[2] = a[0] * b[2] + b[0] * a[2] + a[3] * b[1] - a[1] * b[3]
    o[3] = a[0] * b[3] + b[0] * a[3] + a[1] * b[2] - a[2] * b[1]


cdef inline void _Amat(const double* p, double* A) noexcept nogil:
    """A(p) row-major (Nikravesh (1988), Eq. 6.19)."""
    cdef double e0 = p[0], e1 = p[1], e2 = p[2], e3 = p[3]
    A[0] = 2.0 * (e0 * e0 + e1 * e1) - 1.0
    A[1] = 2.0 * (e1 * e2 - e0 * e3)
    A[2] = 2.0 * (e1 * e3 + e0 * e2)
    A[3] = 2.0 * (e1 * e2 + e0 * e3)
    A[4] = 2.0 * (e0 * e0 + e2 * e2) - 1.0
    A[5] = 2.0 * (e2 * e3 - e0 * e1)
    A[6] = 2.0 * (e1 * e3 - e0 * e2)
    A[7] = 2.0 * (e2 * e3 + e0 * e1)
    A[8] = 2.0 * (e0 * e0 + e3 * e3) - 1.0


cdef inline void _mv3(const double* A, const double* x, double* o) noexcept nogil:
    o[0] = A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
    o[1] = A[3] * x[0] + A[4] * x[1] + A[5] * x[2]
    o[2] = A[6] * x[0] + A[7] * x[1] + A[8] * x[2]


cdef inline void _mtv3(const double* A, const double* x, double* o) noexcept nogil:
    o[0] = A[0] * x[0] + A[3] * x[1] + A[6] * x[2]
    o[1] = A[1] * x[0] + A[4] * x[1] + A[7] * x[2]
    o[2] = A[2] * x[0] + A[5] * x[1] + A[8] * x[2]


cdef inline void _cross(const double* a, const double* b, double* o) noexcept nogil:
    o[0] = a[1] * b[2] - a[2] * b[1]
    o[1] = a[2] * b[0] - a[0] * b[2]
    o[2] = a[0] * b[1] - a[1] * b[0]


cdef inline void _qaxis(const double* u, double th, double* e) noexcept nogil:
    cdef double s = sin(0.5 * th)
    e[0] = cos(0.5 * th)
    e[1] = s * u[0]
    e[2] = s * u[1]
    e[3] = s * u[2]


cdef inline void _unit4(const double* x, double* e) noexcept nogil:
    cdef double n = sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2] + x[3] * x[3])
    e[0] = x[0] / n
    e[1] = x[1] / n
    e[2] = x[2] / n
    e[3] = x[3] / n


cdef void c_outward(Py_ssize_t nj, const int* kind, const idx_t* parent,
                    const idx_t* child, const double* geo, const idx_t* qo,
                    const idx_t* vo, const double* theta, const double* nu, double* q,
                    double* V, double* X, double* S, double* C, double* body) noexcept nogil:
    """The outward pass (``SpatialTree.outward``).  ``geo`` per joint (22): sp 3, sc 3,
    u 3, ac 3, w 3, p0 4, (3 spare); q (7 per body), V (6 per body), X (36), S (36:
    6 x 6, the first nv columns), C (6) per joint; ``body`` (nb x 16): A 9, global
    omega 3 (scratch)."""
    cdef Py_ssize_t k, i, m, b, p, nv
    cdef const double* g
    cdef const double* th
    cdef const double* v
    cdef double e[4]
    cdef double e1[4]
    cdef double e2[4]
    cdef double t4[4]
    cdef double pc[4]
    cdef double d[3]
    cdef double Sw[18]
    cdef double Sd[18]
    cdef double bw[3]
    cdef double Ag[9]
    cdef double Ac[9]
    cdef double x3[3]
    cdef double a[3]
    cdef double bb[3]
    cdef double wrel[3]
    cdef double dd[3]
    cdef double wc[3]
    cdef double c2[3]
    cdef double cw[3]
    cdef double y3[3]
    cdef double z3[3]
    cdef double M1[9]
    cdef double M2[9]
    cdef double* Ap
    cdef double* rp
    cdef double* pp
    cdef double* wp
    cdef double* rdp
    cdef double* Xk
    cdef double* Sk
    cdef double* Ck
    cdef double I9[9]
    cdef double zero3[3]
    cdef double E0[4]
    for i in range(9):
        I9[i] = 0.0
    I9[0] = I9[4] = I9[8] = 1.0
    zero3[0] = zero3[1] = zero3[2] = 0.0
    E0[0] = 1.0
    E0[1] = E0[2] = E0[3] = 0.0
    for k in range(nj):
        g = geo + 22 * k
        th = theta + qo[k]
        v = nu + vo[k]
        nv = NV[kind[k]]
        for i in range(18):
            Sw[i] = 0.0
            Sd[i] = 0.0
        d[0] = d[1] = d[2] = 0.0
        bw[0] = bw[1] = bw[2] = 0.0
        # ---- joint model: e, d, Sw, Sd (3 x nv, row-major with stride 6), bw
        if kind[k] == 0:
            _qaxis(g + 6, th[0], e)
            Sw[0] = g[6]; Sw[6] = g[7]; Sw[12] = g[8]
        elif kind[k] == 1:
            e[0] = 1.0; e[1] = e[2] = e[3] = 0.0
            for i in range(3):
                d[i] = th[0] * g[6 + i]
                Sd[6 * i] = g[6 + i]
        elif kind[k] == 2:
            _qaxis(g + 6, th[0], e)
            for i in range(3):
                d[i] = th[1] * g[6 + i]
                Sw[6 * i] = g[6 + i]
                Sd[6 * i + 1] = g[6 + i]
        elif kind[k] == 3:
            _qaxis(g + 6, th[0], e1)
            _qaxis(g + 9, th[1], e2)
            # e = e1 ⊗ p0 ⊗ e2 ⊗ conj(p0)
            _qmul(e1, g + 15, t4)
            _qmul(t4, e2, pc)
            t4[0] = g[15]; t4[1] = -g[16]; t4[2] = -g[17]; t4[3] = -g[18]
            _qmul(pc, t4, e)
            _Amat(e1, M1)
            _mv3(M1, g + 12, c2)
            _cross(g + 6, c2, y3)
            for i in range(3):
                Sw[6 * i] = g[6 + i]
                Sw[6 * i + 1] = c2[i]
                bw[i] = v[0] * v[1] * y3[i]
        elif kind[k] == 4:
            _unit4(th, e)
            Sw[0] = Sw[7] = Sw[14] = 1.0
        elif kind[k] == 6:                 # planar: normal u (6:9), in-plane f, g
            _qaxis(g + 6, th[2], e)
            for i in range(3):
                d[i] = th[0] * g[9 + i] + th[1] * g[12 + i]
                Sd[6 * i] = g[9 + i]
                Sd[6 * i + 1] = g[12 + i]
                Sw[6 * i + 2] = g[6 + i]
        else:
            _unit4(th + 3, e)
            d[0] = th[0]; d[1] = th[1]; d[2] = th[2]
            Sd[0] = Sd[7] = Sd[14] = 1.0
            Sw[3] = Sw[10] = Sw[17] = 1.0
        # ---- parent pose
        p = parent[k]
        b = child[k]
        if p < 0:
            rp = zero3; pp = E0; Ap = I9; wp = zero3; rdp = zero3
        else:
            rp = q + 7 * p; pp = q + 7 * p + 3; Ap = body + 16 * p
            wp = body + 16 * p + 9; rdp = V + 6 * p
        _qmul(pp, e, t4)
        _qmul(t4, g + 15, pc)
        _Amat(pc, Ac)
        for i in range(9):
            body[16 * b + i] = Ac[i]
        for i in range(3):
            x3[i] = g[i] + d[i]
        _mv3(Ap, x3, a)
        _mv3(Ac, g + 3, bb)
        # w_rel = Ap Sw v, dd = Ap Sd v
        for i in range(3):
            y3[i] = 0.0
            z3[i] = 0.0
            for m in range(nv):
                y3[i] += Sw[6 * i + m] * v[m]
                z3[i] += Sd[6 * i + m] * v[m]
        _mv3(Ap, y3, wrel)
        _mv3(Ap, z3, dd)
        for i in range(3):
            wc[i] = wp[i] + wrel[i]
            body[16 * b + 9 + i] = wc[i]
            q[7 * b + i] = rp[i] + a[i] - bb[i]
        for i in range(4):
            q[7 * b + 3 + i] = pc[i]
        _cross(wp, a, y3)
        _cross(wc, bb, z3)
        for i in range(3):
            V[6 * b + i] = rdp[i] + y3[i] + dd[i] - z3[i]
        _mtv3(Ac, wc, V + 6 * b + 3)
        # ---- X = [[I, (B~ - a~) Ap], [0, Ac^T Ap]]
        Xk = X + 36 * k
        for i in range(36):
            Xk[i] = 0.0
        for i in range(6):
            Xk[7 * i] = 1.0
        # M1 = B~ - a~ (skew of bb - a)
        x3[0] = bb[0] - a[0]; x3[1] = bb[1] - a[1]; x3[2] = bb[2] - a[2]
        M1[0] = 0.0; M1[1] = -x3[2]; M1[2] = x3[1]
        M1[3] = x3[2]; M1[4] = 0.0; M1[5] = -x3[0]
        M1[6] = -x3[1]; M1[7] = x3[0]; M1[8] = 0.0
        for i in range(3):
            for m in range(3):
                Xk[6 * i + 3 + m] = (M1[3 * i] * Ap[m] + M1[3 * i + 1] * Ap[3 + m]
                                     + M1[3 * i + 2] * Ap[6 + m])
                Xk[6 * (3 + i) + 3 + m] = (Ac[i] * Ap[m] + Ac[3 + i] * Ap[3 + m]
                                           + Ac[6 + i] * Ap[6 + m])
        # ---- S = [[Ap Sd + B~ Ap Sw], [Ac^T Ap Sw]]
        Sk = S + 36 * k
        for i in range(36):
            Sk[i] = 0.0
        for m in range(nv):
            y3[0] = Sw[m]; y3[1] = Sw[6 + m]; y3[2] = Sw[12 + m]
            _mv3(Ap, y3, z3)                 # Ap Sw[:, m]
            _cross(bb, z3, cw)               # B~ Ap Sw
            y3[0] = Sd[m]; y3[1] = Sd[6 + m]; y3[2] = Sd[12 + m]
            _mv3(Ap, y3, c2)
            for i in range(3):
                Sk[6 * i + m] = c2[i] + cw[i]
            _mtv3(Ac, z3, y3)
            for i in range(3):
                Sk[6 * (3 + i) + m] = y3[i]
        # ---- C: cw = wp x w_rel + Ap bw
        _cross(wp, wrel, cw)
        _mv3(Ap, bw, y3)
        for i in range(3):
            cw[i] += y3[i]
        Ck = C + 6 * k
        _cross(wp, a, y3)
        _cross(wp, y3, z3)                   # wp x (wp x a)
        _cross(wp, dd, y3)                   # wp x dd
        for i in range(3):
            Ck[i] = z3[i] + 2.0 * y3[i]
        _cross(bb, cw, y3)
        _cross(wc, bb, z3)
        _cross(wc, z3, c2)                   # wc x (wc x bb)
        for i in range(3):
            Ck[i] += y3[i] - c2[i]
        _mtv3(Ac, cw, Ck + 3)


cdef void c_qdot(Py_ssize_t nb, const double* q, const double* V, double* qd) noexcept nogil:
    """qdot (7 per body): rdot, pdot = 1/2 L(p)^T omega' (``cartesian_velocity``)."""
    cdef Py_ssize_t b
    cdef const double* p
    cdef const double* w
    for b in range(nb):
        p = q + 7 * b + 3
        w = V + 6 * b + 3
        qd[7 * b] = V[6 * b]
        qd[7 * b + 1] = V[6 * b + 1]
        qd[7 * b + 2] = V[6 * b + 2]
        # L(p)^T w: L = [[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]]
        qd[7 * b + 3] = 0.5 * (-p[1] * w[0] - p[2] * w[1] - p[3] * w[2])
        qd[7 * b + 4] = 0.5 * (p[0] * w[0] - p[3] * w[1] + p[2] * w[2])
        qd[7 * b + 5] = 0.5 * (p[3] * w[0] + p[0] * w[1] - p[1] * w[2])
        qd[7 * b + 6] = 0.5 * (-p[2] * w[0] + p[1] * w[1] + p[0] * w[2])


cdef void c_body_forces(Py_ssize_t nb, const double* q, const double* V,
                        const double* Q, const double* inertia, double* F) noexcept nogil:
    """[F; n' - omega'~ J' omega'] per body, n' = 1/2 L(p) n* (``body_forces``)."""
    cdef Py_ssize_t b, i
    cdef const double* p
    cdef const double* w
    cdef const double* n
    cdef const double* J
    cdef double Jw[3]
    cdef double c[3]
    cdef double e0, e1, e2, e3
    for b in range(nb):
        p = q + 7 * b + 3
        w = V + 6 * b + 3
        n = Q + 7 * b + 3
        J = inertia + 9 * b
        F[6 * b] = Q[7 * b]
        F[6 * b + 1] = Q[7 * b + 1]
        F[6 * b + 2] = Q[7 * b + 2]
        e0 = p[0]; e1 = p[1]; e2 = p[2]; e3 = p[3]
        # L(p) = [[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]]
        _mv3(J, w, Jw)
        _cross(w, Jw, c)
        F[6 * b + 3] = 0.5 * (-e1 * n[0] + e0 * n[1] + e3 * n[2] - e2 * n[3]) - c[0]
        F[6 * b + 4] = 0.5 * (-e2 * n[0] - e3 * n[1] + e0 * n[2] + e1 * n[3]) - c[1]
        F[6 * b + 5] = 0.5 * (-e3 * n[0] + e2 * n[1] - e1 * n[2] + e0 * n[3]) - c[2]


cdef int c_aba(Py_ssize_t nj, Py_ssize_t nb, const int* kind, const idx_t* parent,
               const idx_t* child, const idx_t* vo, const double* mass,
               const double* inertia, const double* X, const double* S, const double* C,
               const double* F, double* acc, double* nud, double* IA, double* pA,
               double* U, double* W, double* Lf) noexcept nogil:
    """Articulated-body recursion with 6-wide blocks (``articulated_body_blocks``).
    Scratch: IA (nb x 36), pA (nb x 6), U, W, Lf (nj x 36).  Returns 1 if a joint's
    articulated inertia S^T IA S is not positive definite."""
    cdef Py_ssize_t k, b, p, i, j, m, nv
    cdef const double* Xk
    cdef const double* Sk
    cdef double* IAb
    cdef double* Uk
    cdef double* Wk
    cdef double* L
    cdef double Ia[36]
    cdef double T[36]
    cdef double pa[6]
    cdef double sp[6]
    cdef double base[6]
    cdef double x[6]
    cdef double s
    for b in range(nb):
        IAb = IA + 36 * b
        for i in range(36):
            IAb[i] = 0.0
        IAb[0] = IAb[7] = IAb[14] = mass[b]
        for i in range(3):
            for j in range(3):
                IAb[6 * (3 + i) + 3 + j] = inertia[9 * b + 3 * i + j]
        for i in range(6):
            pA[6 * b + i] = -F[6 * b + i]
    for k in range(nj - 1, -1, -1):
        b = child[k]
        p = parent[k]
        nv = NV[kind[k]]
        Xk = X + 36 * k
        Sk = S + 36 * k
        IAb = IA + 36 * b
        Uk = U + 36 * k
        Wk = W + 36 * k
        L = Lf + 36 * k
        # U = IA S (6 x nv, stride 6)
        for i in range(6):
            for m in range(nv):
                s = 0.0
                for j in range(6):
                    s += IAb[6 * i + j] * Sk[6 * j + m]
                Uk[6 * i + m] = s
        # D = S^T U (nv x nv) -> Cholesky L (stride 6)
        for i in range(nv):
            for m in range(nv):
                s = 0.0
                for j in range(6):
                    s += Sk[6 * j + i] * Uk[6 * j + m]
                L[6 * i + m] = s
        for j in range(nv):
            s = L[6 * j + j]
            for m in range(j):
                s -= L[6 * j + m] * L[6 * j + m]
            if not s > 0.0:
                return 1
            L[6 * j + j] = sqrt(s)
            for i in range(j + 1, nv):
                s = L[6 * i + j]
                for m in range(j):
                    s -= L[6 * i + m] * L[6 * j + m]
                L[6 * i + j] = s / L[6 * j + j]
        # W = D^-1 U^T (nv x 6, stride 6): solve L L^T W = U^T column by column
        for i in range(6):
            for m in range(nv):
                x[m] = Uk[6 * i + m]
            _cho_solve(L, nv, x)
            for m in range(nv):
                Wk[6 * m + i] = x[m]
        if p < 0:
            continue
        # Ia = IA - U W
        for i in range(6):
            for j in range(6):
                s = IAb[6 * i + j]
                for m in range(nv):
                    s -= Uk[6 * i + m] * Wk[6 * m + j]
                Ia[6 * i + j] = s
        # pa = Ia c + pA - W^T (S^T pA)
        for m in range(nv):
            s = 0.0
            for j in range(6):
                s += Sk[6 * j + m] * pA[6 * b + j]
            sp[m] = s
        for i in range(6):
            s = pA[6 * b + i]
            for j in range(6):
                s += Ia[6 * i + j] * C[6 * k + j]
            for m in range(nv):
                s -= Wk[6 * m + i] * sp[m]
            pa[i] = s
        # IA_p += X^T Ia X, pA_p += X^T pa with X = [[I, P], [0, R]] (P = X[0:3, 3:6],
        # R = X[3:6, 3:6]): T = Ia X = [Ia[:, :3], Ia[:, :3] P + Ia[:, 3:] R]
        for i in range(6):
            for j in range(3):
                T[6 * i + j] = Ia[6 * i + j]
                s = 0.0
                for m in range(3):
                    s += Ia[6 * i + m] * Xk[6 * m + 3 + j] \
                        + Ia[6 * i + 3 + m] * Xk[6 * (3 + m) + 3 + j]
                T[6 * i + 3 + j] = s
        # X^T T = [T[:3]; P^T T[:3] + R^T T[3:]]
        for j in range(6):
            for i in range(3):
                IA[36 * p + 6 * i + j] += T[6 * i + j]
                s = 0.0
                for m in range(3):
                    s += Xk[6 * m + 3 + i] * T[6 * m + j] \
                        + Xk[6 * (3 + m) + 3 + i] * T[6 * (3 + m) + j]
                IA[36 * p + 6 * (3 + i) + j] += s
        for i in range(3):
            pA[6 * p + i] += pa[i]
            s = 0.0
            for m in range(3):
                s += Xk[6 * m + 3 + i] * pa[m] + Xk[6 * (3 + m) + 3 + i] * pa[3 + m]
            pA[6 * p + 3 + i] += s
    for k in range(nj):
        b = child[k]
        p = parent[k]
        nv = NV[kind[k]]
        Xk = X + 36 * k
        Sk = S + 36 * k
        Wk = W + 36 * k
        L = Lf + 36 * k
        for i in range(6):
            base[i] = C[6 * k + i]
        if p >= 0:                     # X acc_p = [a + P alpha; R alpha]
            for i in range(3):
                s = acc[6 * p + i]
                for j in range(3):
                    s += Xk[6 * i + 3 + j] * acc[6 * p + 3 + j]
                base[i] += s
                s = 0.0
                for j in range(3):
                    s += Xk[6 * (3 + i) + 3 + j] * acc[6 * p + 3 + j]
                base[3 + i] += s
        # x = -(W base + D^-1 S^T pA)
        for m in range(nv):
            s = 0.0
            for j in range(6):
                s += Sk[6 * j + m] * pA[6 * b + j]
            x[m] = s
        _cho_solve(L, nv, x)
        for m in range(nv):
            s = 0.0
            for j in range(6):
                s += Wk[6 * m + j] * base[j]
            x[m] = -(x[m] + s)
            nud[vo[k] + m] = x[m]
        for i in range(6):
            s = base[i]
            for m in range(nv):
                s += Sk[6 * i + m] * x[m]
            acc[6 * b + i] = s
    return 0


cdef inline void _cho_solve(const double* L, Py_ssize_t n, double* x) noexcept nogil:
    cdef Py_ssize_t i, m
    cdef double s
    for i in range(n):
        s = x[i]
        for m in range(i):
            s -= L[6 * i + m] * x[m]
        x[i] = s / L[6 * i + i]
    for i in range(n - 1, -1, -1):
        s = x[i]
        for m in range(i + 1, n):
            s -= L[6 * m + i] * x[m]
        x[i] = s / L[6 * i + i]


cdef void c_theta_dot(Py_ssize_t nj, const int* kind, const idx_t* qo, const idx_t* vo,
                      const double* theta, const double* nu, double* out) noexcept nogil:
    """thetadot = N(theta) nu (``theta_dot``): edot = 1/2 G(e)^T w."""
    cdef Py_ssize_t k, i, o
    cdef double e[4]
    cdef const double* w
    cdef double* t
    for k in range(nj):
        t = out + qo[k]
        w = nu + vo[k]
        if kind[k] == 4 or kind[k] == 5:
            o = 0
            if kind[k] == 5:
                t[0] = w[0]; t[1] = w[1]; t[2] = w[2]
                o = 3
            _unit4(theta + qo[k] + o, e)
            w = w + o
            t = t + o
            # G^T w = [-e.w; e0 w - e x w]
            t[0] = -0.5 * (e[1] * w[0] + e[2] * w[1] + e[3] * w[2])
            t[1] = 0.5 * (e[0] * w[0] - (e[2] * w[2] - e[3] * w[1]))
            t[2] = 0.5 * (e[0] * w[1] - (e[3] * w[0] - e[1] * w[2]))
            t[3] = 0.5 * (e[0] * w[2] - (e[1] * w[1] - e[2] * w[0]))
        else:
            for i in range(NV[kind[k]]):
                t[i] = w[i]


cdef class SpatialTreeKernel:
    """The compiled recursions of one spatial tree (buffers owned; one call per
    stage, no allocation).  ``geo`` (nj, 22) as ``c_outward`` reads it."""

    cdef readonly Py_ssize_t nj, nb, nq, nv
    cdef int[::1] kind
    cdef idx_t[::1] parent, child, qo, vo
    cdef double[:, ::1] geo
    cdef double[::1] mass
    cdef double[:, :, ::1] inertia
    cdef public double[::1] q, qd, V, X, S, C, body, F, acc, nud, IA, pA, U, W, Lf, thd

    def __cinit__(self, int[::1] kind, idx_t[::1] parent, idx_t[::1] child,
                  double[:, ::1] geo, idx_t[::1] qo, idx_t[::1] vo, double[::1] mass,
                  double[:, :, ::1] inertia):
        cdef Py_ssize_t k, nq = 0, nv = 0
        self.nj = kind.shape[0]
        self.nb = mass.shape[0]
        if (parent.shape[0] != self.nj or child.shape[0] != self.nj or qo.shape[0] != self.nj
                or vo.shape[0] != self.nj or geo.shape[0] != self.nj or geo.shape[1] != 22
                or inertia.shape[0] != self.nb or inertia.shape[1] != 3
                or inertia.shape[2] != 3):
            raise ValueError("SpatialTreeKernel: array sizes do not match")
        seen = np.zeros(self.nb, dtype=bool)
        for k in range(self.nj):
            if not 0 <= kind[k] <= 6:
                raise ValueError(f"SpatialTreeKernel: joint {k}: unknown kind {kind[k]}")
            if not 0 <= child[k] < self.nb or parent[k] >= self.nb or parent[k] < -1:
                raise ValueError(f"SpatialTreeKernel: joint {k}: body index out of range")
            if parent[k] >= 0 and not seen[parent[k]]:
                raise ValueError(f"SpatialTreeKernel: joint {k}: parent after child")
            if seen[child[k]]:
                raise ValueError(f"SpatialTreeKernel: body {child[k]} reached twice")
            seen[child[k]] = True
            if qo[k] != nq or vo[k] != nv:
                raise ValueError(f"SpatialTreeKernel: joint {k}: offsets do not match")
            nq += NQ[kind[k]]
            nv += NV[kind[k]]
        if not seen.all():
            raise ValueError("SpatialTreeKernel: a body is not in the tree")
        self.nq, self.nv = nq, nv
        self.kind, self.parent, self.child, self.geo = kind, parent, child, geo
        self.qo, self.vo, self.mass, self.inertia = qo, vo, mass, inertia
        nj1, nb1 = max(self.nj, 1), max(self.nb, 1)
        self.q = np.zeros(7 * nb1)
        self.qd = np.zeros(7 * nb1)
        self.V = np.zeros(6 * nb1)
        self.X = np.zeros(36 * nj1)
        self.S = np.zeros(36 * nj1)
        self.C = np.zeros(6 * nj1)
        self.body = np.zeros(16 * nb1)
        self.F = np.zeros(6 * nb1)
        self.acc = np.zeros(6 * nb1)
        self.nud = np.zeros(max(nv, 1))
        self.IA = np.zeros(36 * nb1)
        self.pA = np.zeros(6 * nb1)
        self.U = np.zeros(36 * nj1)
        self.W = np.zeros(36 * nj1)
        self.Lf = np.zeros(36 * nj1)
        self.thd = np.zeros(max(nq, 1))

    def outward(self, const double[::1] theta, const double[::1] nu):
        """Fills q, qd, V, X, S, C from (theta, nu)."""
        if theta.shape[0] != self.nq or nu.shape[0] != self.nv:
            raise ValueError("SpatialTreeKernel.outward: theta / nu have the wrong size")
        if self.nj == 0:
            return
        with nogil:
            c_outward(self.nj, &self.kind[0], &self.parent[0], &self.child[0],
                      &self.geo[0, 0], &self.qo[0], &self.vo[0], &theta[0], &nu[0],
                      &self.q[0], &self.V[0], &self.X[0], &self.S[0], &self.C[0],
                      &self.body[0])
            c_qdot(self.nb, &self.q[0], &self.V[0], &self.qd[0])

    def body_forces(self, const double[::1] Q):
        """F from the System's forces Q at the last outward pass."""
        if Q.shape[0] != 7 * self.nb:
            raise ValueError("SpatialTreeKernel.body_forces: Q has the wrong size")
        with nogil:
            c_body_forces(self.nb, &self.q[0], &self.V[0], &Q[0], &self.inertia[0, 0, 0],
                          &self.F[0])

    def aba(self):
        """acc, nud from the last outward pass and body_forces; returns 0, or 1 when
        an articulated inertia is not positive definite."""
        cdef int r
        if self.nj == 0:
            return 0
        with nogil:
            r = c_aba(self.nj, self.nb, &self.kind[0], &self.parent[0], &self.child[0],
                      &self.vo[0], &self.mass[0], &self.inertia[0, 0, 0], &self.X[0],
                      &self.S[0], &self.C[0], &self.F[0], &self.acc[0], &self.nud[0],
                      &self.IA[0], &self.pA[0], &self.U[0], &self.W[0], &self.Lf[0])
        return r

    def theta_dot(self, const double[::1] theta, const double[::1] nu):
        if theta.shape[0] != self.nq or nu.shape[0] != self.nv:
            raise ValueError("SpatialTreeKernel.theta_dot: theta / nu have the wrong size")
        if self.nj == 0:
            return
        with nogil:
            c_theta_dot(self.nj, &self.kind[0], &self.qo[0], &self.vo[0], &theta[0],
                        &nu[0], &self.thd[0])


# ----------------------------------------------------------------------------------
# the whole right-hand side for the compiled integration loop
# ----------------------------------------------------------------------------------
from libc.math cimport isfinite
from libc.string cimport memcpy

from mbcore._ext._dynamics cimport CompiledODE
from mbcore._ext._forces cimport ForceEvaluator
from mbcore._ext._functions cimport Evaluator, ErrInfo

cdef enum:
    JS_OK = 0
    JS_SINGULAR = 1
    JS_FUNCTION_FAILED = 2
    JS_FORCE_FAILED = 3
    JS_NOT_FINITE = 4


cdef class CompiledJCSpatial(CompiledODE):
    """``CompiledJCSpatial(kernel, qgrav, force_evaluator, functions)``: the
    joint-coordinate right-hand side of a spatial tree without cut rows in one C
    call, ``y = [theta (nq); nu (nv); W]`` -> ``[thetadot; nudot; P_nc]`` (the tree
    joints do no work).  Stages: time functions, outward pass, qdot, gravity and the
    compiled force elements, body forces, articulated-body recursion, thetadot.
    NumPy reference: ``SpatialJointCoordinates.rhs`` on the NumPy backend (+ the
    work rate)."""

    cdef SpatialTreeKernel K
    cdef ForceEvaluator fe
    cdef Evaluator fn
    cdef readonly Py_ssize_t nq, nv, nf
    #: the state's entries, nq + nv + 1: the loops check y0 against it (n alone,
    #: (nq + nv) // 2, would let an odd nq + nv state pass one short)
    cdef readonly Py_ssize_t size
    cdef double[::1] qgrav, Q, fv
    cdef double* fvp
    cdef readonly double power
    cdef ErrInfo err

    def __cinit__(self, SpatialTreeKernel kernel not None, double[::1] qgrav not None,
                  ForceEvaluator force_evaluator, Evaluator functions):
        cdef Py_ssize_t n = 7 * kernel.nb
        if qgrav.shape[0] != n or (force_evaluator is not None and force_evaluator.n != n):
            raise ValueError("CompiledJCSpatial: gravity / force evaluator do not match "
                             "the tree's bodies")
        if kernel.nj == 0:
            raise ValueError("CompiledJCSpatial: an empty tree")
        _check_forces("CompiledJCSpatial", force_evaluator, n,
                      0 if functions is None else functions.size)
        if not bool(np.all(np.isfinite(qgrav))):
            raise ValueError("CompiledJCSpatial: qgrav must be finite")
        self.K = kernel
        self.fe = force_evaluator
        self.fn = functions
        self.nq, self.nv = kernel.nq, kernel.nv
        self.n = (self.nq + self.nv) // 2      # run_rk's size check: 2 n + 1 <= size
        self.size = self.nq + self.nv + 1
        self.cartesian = False
        self.qgrav = qgrav
        self.Q = np.zeros(n)
        self.nf = 0 if functions is None else functions.size
        self.fv = np.zeros(3 * max(self.nf, 1))
        self.fvp = &self.fv[0] if self.nf else NULL
        self.nfev = 0
        self.status = 0

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil:
        cdef Py_ssize_t nq = self.nq, nv = self.nv, i, nb = self.K.nb
        cdef double P = 0.0
        self.nfev += 1
        if self.nf:
            if self.fn.run(t, self.fvp, &self.err) != 0:
                self.status = JS_FUNCTION_FAILED
                return JS_FUNCTION_FAILED
        c_outward(self.K.nj, &self.K.kind[0], &self.K.parent[0], &self.K.child[0], &self.K.geo[0, 0], &self.K.qo[0],
                  &self.K.vo[0], y, y + nq, &self.K.q[0], &self.K.V[0], &self.K.X[0], &self.K.S[0], &self.K.C[0],
                  &self.K.body[0])
        c_qdot(nb, &self.K.q[0], &self.K.V[0], &self.K.qd[0])
        memcpy(&self.Q[0], &self.qgrav[0], 7 * nb * sizeof(double))
        if self.fe is not None:
            if self.fe.c_forces(&self.K.q[0], &self.K.qd[0], t, self.fvp, &self.Q[0], &P) >= 0:
                self.status = JS_FORCE_FAILED
                return JS_FORCE_FAILED
        c_body_forces(nb, &self.K.q[0], &self.K.V[0], &self.Q[0], &self.K.inertia[0, 0, 0], &self.K.F[0])
        if c_aba(self.K.nj, nb, &self.K.kind[0], &self.K.parent[0], &self.K.child[0], &self.K.vo[0], &self.K.mass[0],
                 &self.K.inertia[0, 0, 0], &self.K.X[0], &self.K.S[0], &self.K.C[0], &self.K.F[0], &self.K.acc[0],
                 &self.K.nud[0], &self.K.IA[0], &self.K.pA[0], &self.K.U[0], &self.K.W[0], &self.K.Lf[0]):
            self.status = JS_SINGULAR
            return JS_SINGULAR
        c_theta_dot(self.K.nj, &self.K.kind[0], &self.K.qo[0], &self.K.vo[0], y, y + nq, ydot)
        for i in range(nv):
            ydot[nq + i] = self.K.nud[i]
            if not isfinite(self.K.nud[i]):
                self.status = JS_NOT_FINITE
                return JS_NOT_FINITE
        ydot[nq + nv] = P
        self.power = P
        self.status = JS_OK
        return JS_OK

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
