# cython: language_level=3
"""Compiled kernels of the built-in spatial force elements
(``mbplugins._ext._spatial_forces``; Nikravesh (1988), §11.1, §9.2 carried over to
space), reaching the core through the compiled plugin tier (``mbcore_plugin.h``)
exactly as a third-party kernel does: one ``mbcore.force_kernel`` capsule per type
(``TSDA``, ``FORCE``, ``TORQUE``, ``DRAG``, ``RSDA``, ``BUSHING``), named by the
type's ``c_kernel``, each with the forces, the power of their non-conservative part
and the analytic Jacobian blocks K = dQ/dq, C = dQ/dqd per element.  NumPy
references: mbplugins.spatial.forces (same packed parameters, same formulas:
body-frame moments n' -> n* = 2 L^T n' for the coordinate laws, global moments n ->
n* = 2 G^T n for point loads), equal to 1e-12 (tests/test_spatial_forces.py,
tests/test_force_jacobians.py).  Body blocks [x, y, z, e0, e1, e2, e3]; the ground
block (r = 0, p = (1, 0, 0, 0)) sits after q in the core's extended buffers.

The RSDA keeps its tracked rotation angle in par[9] of its element and updates it in
place (as its NumPy reference does): its capsule is ``stateful`` (ABI v2), so the
core hands it the System group's own par array (``state``).
"""
from libc.math cimport sin, cos, sqrt, pow, tanh, atan2, round
from libc.string cimport memset
from cpython.pycapsule cimport PyCapsule_New
from mbcore.plugin cimport (mbcore_force_kernel, mbcore_force_group, mbcore_index,
                            MBCORE_ABI_VERSION, MBCORE_BODY_SPATIAL, MBCORE_FORCE_CAPSULE)

include "_euler_rotation.pxi"

cdef enum:
    S_TSDA = 10
    S_FORCE = 11
    S_TORQUE = 12
    S_DRAG = 13
    S_RSDA = 14
    S_BUSHING = 15

#: TSDA lengths below this have no direction (same value as the reference)
cdef double MIN_LENGTH = 1e-10
cdef double TWO_PI = 6.283185307179586

# One group as the kernels below read it: the ABI's group and the kernel's own kind
# (the ABI passes no kernel identity: each capsule's functions are trampolines that
# set it).  ``par`` is ``state`` for the stateful kernel (the RSDA).
ctypedef struct FGroup:
    int kind
    Py_ssize_t ne, nb, npar, nfun
    const Py_ssize_t* boff
    const double* par
    const Py_ssize_t* fidx


cdef inline void _group(int kind, const mbcore_force_group* A, FGroup* G) noexcept nogil:
    G.kind = kind
    G.ne = A.ne
    G.nb = A.nb
    G.npar = A.npar
    G.nfun = A.nfun
    G.boff = <const Py_ssize_t*> A.boff
    G.par = A.state if A.state != NULL else A.par
    G.fidx = <const Py_ssize_t*> A.fidx


cdef inline void _sA(const double* p, double* A) noexcept nogil:
    """A(p), explicit form Nikravesh (1988), Eq. 6.18 (row-major)."""
    cdef double e0 = p[0], e1 = p[1], e2 = p[2], e3 = p[3]
    _ep_A(e0, e1, e2, e3, A)


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


# ----------------------------------------------------------------------------------
# the capsules: one trampoline per type and function
# ----------------------------------------------------------------------------------
cdef inline mbcore_index _forces(int kind, const mbcore_force_group* A, const double* q,
                                 const double* qd, const double* fv, double* Q,
                                 double* P) noexcept nogil:
    """Q += the forces of every element, P[0] += their non-conservative power (P may
    be NULL); -1, or the element that cannot be evaluated."""
    cdef FGroup G
    cdef Py_ssize_t e
    cdef double pw = 0.0
    _group(kind, A, &G)
    for e in range(G.ne):
        if _spatial_element(&G, e, q, qd, fv, Q, &pw) >= 0:
            return e
    if P != NULL:
        P[0] += pw
    return -1


cdef inline mbcore_index _jacobians(int kind, const mbcore_force_group* A,
                                    const double* q, const double* qd, const double* fv,
                                    double* K, double* C) noexcept nogil:
    """The (nl x nl) K, C blocks of every element (zeroed by the core)."""
    cdef FGroup G
    cdef Py_ssize_t e, bad, nl2 = A.nb * 7
    nl2 = nl2 * nl2
    _group(kind, A, &G)
    for e in range(G.ne):
        bad = _spatial_jacobian(&G, e, q, qd, fv, K + e * nl2, C + e * nl2)
        if bad >= 0:
            return bad
    return -1



cdef mbcore_index _tsda_f(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _forces(S_TSDA, A, q, qd, fv, Q, P)


cdef mbcore_index _tsda_j(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(S_TSDA, A, q, qd, fv, K, C)


cdef mbcore_index _force_f(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _forces(S_FORCE, A, q, qd, fv, Q, P)


cdef mbcore_index _force_j(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(S_FORCE, A, q, qd, fv, K, C)


cdef mbcore_index _torque_f(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _forces(S_TORQUE, A, q, qd, fv, Q, P)


cdef mbcore_index _torque_j(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(S_TORQUE, A, q, qd, fv, K, C)


cdef mbcore_index _drag_f(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _forces(S_DRAG, A, q, qd, fv, Q, P)


cdef mbcore_index _drag_j(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(S_DRAG, A, q, qd, fv, K, C)


cdef mbcore_index _rsda_f(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _forces(S_RSDA, A, q, qd, fv, Q, P)


cdef mbcore_index _rsda_j(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(S_RSDA, A, q, qd, fv, K, C)


cdef mbcore_index _bushing_f(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* Q, double* P) noexcept nogil:
    return _forces(S_BUSHING, A, q, qd, fv, Q, P)


cdef mbcore_index _bushing_j(const mbcore_force_group* A, const double* q, const double* qd,
        double t, const double* fv, double* K, double* C) noexcept nogil:
    return _jacobians(S_BUSHING, A, q, qd, fv, K, C)


cdef mbcore_force_kernel _KERNELS[6]
cdef const char* _TSDA_REASON = (b"the attachment points coincide (length < 1e-10): the "
                                 b"spring-damper direction is undefined")
cdef const char* _RSDA_REASON = (b"the body-j reference direction is parallel to the "
                                 b"rotation axis (the revolute joint is far from "
                                 b"assembled): the angle is undefined")


cdef object _capsule(int k, const char* name, int nb, int npar, int nfun, int stateful,
                     const char* reason):
    _KERNELS[k].abi_version = MBCORE_ABI_VERSION
    _KERNELS[k].name = name
    _KERNELS[k].body_kind = MBCORE_BODY_SPATIAL
    _KERNELS[k].n_bodies = nb
    _KERNELS[k].n_par = npar
    _KERNELS[k].n_fun = nfun
    _KERNELS[k].reason = reason
    _KERNELS[k].stateful = stateful
    return PyCapsule_New(&_KERNELS[k], MBCORE_FORCE_CAPSULE, NULL)


_KERNELS[0].force = _tsda_f
_KERNELS[0].jacobian = _tsda_j
TSDA = _capsule(0, b"spatial_tsda", 2, 9, 1, 0, _TSDA_REASON)

_KERNELS[1].force = _force_f
_KERNELS[1].jacobian = _force_j
FORCE = _capsule(1, b"spatial_force", 1, 4, 3, 0, NULL)

_KERNELS[2].force = _torque_f
_KERNELS[2].jacobian = _torque_j
TORQUE = _capsule(2, b"spatial_torque", 2, 1, 3, 0, NULL)

_KERNELS[3].force = _drag_f
_KERNELS[3].jacobian = _drag_j
DRAG = _capsule(3, b"spatial_drag", 1, 8, 0, 0, NULL)

_KERNELS[4].force = _rsda_f
_KERNELS[4].jacobian = _rsda_j
RSDA = _capsule(4, b"spatial_rsda", 2, 13, 1, 1, _RSDA_REASON)

_KERNELS[5].force = _bushing_f
_KERNELS[5].jacobian = _bushing_j
BUSHING = _capsule(5, b"spatial_bushing", 2, 22, 0, 0, NULL)
