# cython: language_level=3
"""Compiled kernels of the built-in spatial constraint types
(``mbplugins._ext._spatial_constraints``; Nikravesh (1988), Ch. 7, re-derived),
reaching the core through the compiled plugin tier (``mbcore_plugin.h``, ABI v2,
direct layout) exactly as a third-party kernel does: one
``mbcore.constraint_kernel`` capsule per type, named by the type's ``c_kernel``.

The NumPy reference of every type, and its packed parameters, is
``mbplugins.spatial.constraints`` / ``.composites`` (class docstrings); these
kernels compute the same numbers from the same ``par`` and time-function jets, in
the Euler-parameter form the System uses (mbcore.elements.SpatialConstraintType):

  phi                      (m)
  Jacobian entries         (m, nb, 7) = [Phi_r, 2 Phi_pi' L(p)]
  nu                       (m)        = c'(t) terms of drivers
  gamma                    (m)        = gamma# at omega' = 2 L(p) pdot

How: as in the reference, every row is an expression (dot, cross, difference,
atan2) of body vectors ``A_k a'`` and body points ``r_k + A_k s'``, each carried
as a *jet* on the stack: value, omega'-Jacobian (per body 6 columns [r, pi']), rate
and quadratic term h (d²X/dt² = J vdot + h; body vector: h = A (w~ w~ a')).
Products follow the product rule; gamma# = -h (+ driver terms).  Finally each
body's 6 columns become the 7 Euler-parameter columns: [J_r, 2 J_pi' L(p)].

Body blocks are read from the core's extended q: a spatial element's ground block
has the value [0, 0, 0, 1, 0, 0, 0] (zero velocity).  No allocation: fixed-size C
structs only.

The rotation driver keeps its tracked angle in par[9] of its element (the screw
joint in par[24]) and updates it in place in phi (like RotationDriver.phi and
Screw.phi of the reference): their capsules are ``stateful`` (ABI v2), so the core
hands them the System group's own par array (``state``), shared with the NumPy
path.
"""
from libc.math cimport sin, cos, fabs, atan2, sqrt, rint
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_New

include "_euler_rotation.pxi"
from mbcore.plugin cimport (mbcore_constraint_kernel, mbcore_constraint_group,
                            mbcore_index, MBCORE_ABI_VERSION, MBCORE_BODY_SPATIAL,
                            MBCORE_CONSTRAINT_CAPSULE, MBCORE_SCATTER_DIRECT)

# One group as the kernels below read it: the ABI's direct-layout group and the
# kernel's own kind (the ABI passes no kernel identity: each capsule's functions
# are trampolines that set it).  ``par`` is ``state`` for the stateful kernels.
ctypedef struct SGroup:
    int kind
    Py_ssize_t ne, nb, m, npar, nfun, njac
    const Py_ssize_t* boff
    const Py_ssize_t* row
    const double* par
    const Py_ssize_t* fidx
    const Py_ssize_t* jpos


cdef inline void _group(int kind, const mbcore_constraint_group* A, SGroup* G) noexcept nogil:
    G.kind = kind
    G.ne = A.ne
    G.nb = A.nb
    G.m = A.m
    G.npar = A.npar
    G.nfun = A.nfun
    G.njac = A.njac
    G.boff = <const Py_ssize_t*> A.boff
    G.row = <const Py_ssize_t*> A.row
    G.par = A.state if A.state != NULL else A.par
    G.fidx = <const Py_ssize_t*> A.fidx
    G.jpos = <const Py_ssize_t*> A.jpos

cdef enum:
    K_S_SPHERICAL = 100
    K_S_UNIVERSAL = 101
    K_S_REVOLUTE = 102
    K_S_CYLINDRICAL = 103
    K_S_TRANSLATIONAL = 104
    K_S_DISTANCE = 105        # distance, spherical_spherical, distance_driver
    K_S_SPH_REV = 106
    K_S_REV_REV = 107
    K_S_POINT_COORD = 108
    K_S_ANGLE_DRIVER = 109
    K_S_ROTATION_DRIVER = 110
    K_S_FIXED = 111
    K_S_PERPENDICULAR = 112
    K_S_PARALLEL = 113
    K_S_SCREW = 115           # mbplugins.spatial.composites
    K_S_REV_CYL = 116
    K_S_POINT_LINE = 117
    K_S_POINT_PLANE = 118
    K_S_REL_ROT_EP = 119
    K_S_ORIENT_LOCK = 120
    K_S_PLANAR = 121

cdef enum:
    SF_JAC = 1                # build Jacobians
    SF_VEL = 2                # build rates and quadratic terms (gamma)
    S_NJ = 12                 # omega'-Jacobian columns of a jet: 2 bodies x [r, pi']
    S_MAXROWS = 7             # 6 rows + scratch (the screw's angle and travel)

cdef double S_TWO_PI = 6.283185307179586      # == 2.0 * math.pi

#: kernel name -> (code, equations, bodies, n_par, n_fun): the spatial entries of KERNELS


ctypedef struct SBody:
    double r[3]
    double p[4]
    double A[9]               # A(p), explicit form Nikravesh (1988), Eq. 6.18, row-major
    double rd[3]
    double w[3]               # omega' = 2 L(p) pdot


ctypedef struct SCtx:
    SBody b[2]
    int flags


ctypedef struct SJ3:          # a 3-vector jet
    double v[3]
    double J[36]              # [component * 12 + body * 6 + column]
    double d[3]
    double h[3]


ctypedef struct SJ1:          # a scalar jet
    double v
    double J[12]              # [body * 6 + column]
    double d
    double h


# ---------------------------------------------------------------- loading
cdef inline void _s_body(SBody* B, const double* q, const double* qd, Py_ssize_t o,
                         int flags) noexcept nogil:
    cdef double e0 = q[o + 3], e1 = q[o + 4], e2 = q[o + 5], e3 = q[o + 6]
    cdef double p0, p1, p2, p3
    B.r[0] = q[o]; B.r[1] = q[o + 1]; B.r[2] = q[o + 2]
    B.p[0] = e0; B.p[1] = e1; B.p[2] = e2; B.p[3] = e3
    _ep_A(e0, e1, e2, e3, B.A)
    if flags & SF_VEL:
        B.rd[0] = qd[o]; B.rd[1] = qd[o + 1]; B.rd[2] = qd[o + 2]
        p0 = qd[o + 3]; p1 = qd[o + 4]; p2 = qd[o + 5]; p3 = qd[o + 6]
        # L(p) = [[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]]
        B.w[0] = 2.0 * (-e1 * p0 + e0 * p1 + e3 * p2 - e2 * p3)
        B.w[1] = 2.0 * (-e2 * p0 - e3 * p1 + e0 * p2 + e1 * p3)
        B.w[2] = 2.0 * (-e3 * p0 + e2 * p1 - e1 * p2 + e0 * p3)


cdef inline void _s_load(SCtx* K, SGroup* G, Py_ssize_t e, const double* q,
                         const double* qd) noexcept nogil:
    cdef Py_ssize_t b
    for b in range(G.nb):
        _s_body(&K.b[b], q, qd, G.boff[e * G.nb + b], K.flags)


# ---------------------------------------------------------------- jets
cdef inline void _cross(const double* a, const double* b, double* c) noexcept nogil:
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]


cdef inline void _mv3(const double* A, const double* x, double* y) noexcept nogil:
    y[0] = A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
    y[1] = A[3] * x[0] + A[4] * x[1] + A[5] * x[2]
    y[2] = A[6] * x[0] + A[7] * x[1] + A[8] * x[2]


cdef inline void _s_vec(const SCtx* K, int k, const double* a, SJ3* U) noexcept nogil:
    """U = A_k a' (body vector): J = [0, -A a'~], d = A (w' x a'), h = A (w' x (w' x a'))."""
    cdef const SBody* B = &K.b[k]
    cdef const double* A = B.A
    cdef double wa[3]
    cdef double wwa[3]
    cdef int i
    cdef Py_ssize_t c0 = k * 6 + 3
    _mv3(A, a, U.v)
    if K.flags & SF_JAC:
        memset(U.J, 0, 36 * sizeof(double))
        # a'~ = [[0, -a2, a1], [a2, 0, -a0], [-a1, a0, 0]];  J_pi' = -A a'~
        for i in range(3):
            U.J[i * S_NJ + c0] = -(A[3 * i + 1] * a[2] - A[3 * i + 2] * a[1])
            U.J[i * S_NJ + c0 + 1] = -(A[3 * i + 2] * a[0] - A[3 * i] * a[2])
            U.J[i * S_NJ + c0 + 2] = -(A[3 * i] * a[1] - A[3 * i + 1] * a[0])
    if K.flags & SF_VEL:
        _cross(B.w, a, wa)
        _mv3(A, wa, U.d)
        _cross(B.w, wa, wwa)
        _mv3(A, wwa, U.h)


cdef inline void _s_point(const SCtx* K, int k, const double* s, SJ3* P) noexcept nogil:
    """P = r_k + A_k s' (body point): the body vector plus I in the r columns, rdot."""
    cdef const SBody* B = &K.b[k]
    cdef int i
    _s_vec(K, k, s, P)
    for i in range(3):
        P.v[i] = P.v[i] + B.r[i]
    if K.flags & SF_JAC:
        for i in range(3):
            P.J[i * S_NJ + k * 6 + i] = 1.0
    if K.flags & SF_VEL:
        for i in range(3):
            P.d[i] = P.d[i] + B.rd[i]


cdef inline void _s_sub(const SCtx* K, const SJ3* U, const SJ3* W, SJ3* X) noexcept nogil:
    cdef int i
    for i in range(3):
        X.v[i] = U.v[i] - W.v[i]
    if K.flags & SF_JAC:
        for i in range(36):
            X.J[i] = U.J[i] - W.J[i]
    if K.flags & SF_VEL:
        for i in range(3):
            X.d[i] = U.d[i] - W.d[i]
            X.h[i] = U.h[i] - W.h[i]


cdef inline double _d3(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef inline void _s_dot(const SCtx* K, const SJ3* U, const SJ3* W, SJ1* X) noexcept nogil:
    """X = U.W: J = W^T J_U + U^T J_W, h = W^T U^ + U^T W^ + 2 Udot^T Wdot."""
    cdef int j
    X.v = _d3(U.v, W.v)
    if K.flags & SF_JAC:
        for j in range(S_NJ):
            X.J[j] = ((W.v[0] * U.J[j] + W.v[1] * U.J[S_NJ + j] + W.v[2] * U.J[2 * S_NJ + j])
                      + (U.v[0] * W.J[j] + U.v[1] * W.J[S_NJ + j]
                         + U.v[2] * W.J[2 * S_NJ + j]))
    if K.flags & SF_VEL:
        X.d = _d3(U.d, W.v) + _d3(U.v, W.d)
        X.h = _d3(U.h, W.v) + _d3(U.v, W.h) + 2.0 * _d3(U.d, W.d)


cdef inline void _s_cross(const SCtx* K, const SJ3* U, const SJ3* W, SJ3* X) noexcept nogil:
    """X = U x W: J = U~ J_W - W~ J_U, h = U^ x W + U x W^ + 2 Udot x Wdot."""
    cdef int j
    cdef double a[3]
    cdef double b[3]
    cdef double c[3]
    _cross(U.v, W.v, X.v)
    if K.flags & SF_JAC:
        for j in range(S_NJ):
            X.J[j] = ((U.v[1] * W.J[2 * S_NJ + j] - U.v[2] * W.J[S_NJ + j])
                      - (W.v[1] * U.J[2 * S_NJ + j] - W.v[2] * U.J[S_NJ + j]))
            X.J[S_NJ + j] = ((U.v[2] * W.J[j] - U.v[0] * W.J[2 * S_NJ + j])
                             - (W.v[2] * U.J[j] - W.v[0] * U.J[2 * S_NJ + j]))
            X.J[2 * S_NJ + j] = ((U.v[0] * W.J[S_NJ + j] - U.v[1] * W.J[j])
                                 - (W.v[0] * U.J[S_NJ + j] - W.v[1] * U.J[j]))
    if K.flags & SF_VEL:
        _cross(U.d, W.v, a)
        _cross(U.v, W.d, b)
        for j in range(3):
            X.d[j] = a[j] + b[j]
        _cross(U.h, W.v, a)
        _cross(U.v, W.h, b)
        _cross(U.d, W.d, c)
        for j in range(3):
            X.h[j] = a[j] + b[j] + 2.0 * c[j]


cdef inline void _s_comp(const SCtx* K, const SJ3* U, int i, SJ1* X) noexcept nogil:
    """Component i of a vector jet."""
    X.v = U.v[i]
    if K.flags & SF_JAC:
        memcpy(X.J, U.J + i * S_NJ, S_NJ * sizeof(double))
    if K.flags & SF_VEL:
        X.d = U.d[i]
        X.h = U.h[i]


cdef inline void _s_lin2(const SCtx* K, double c0, const SJ1* X0, double c1, const SJ1* X1,
                         SJ1* X) noexcept nogil:
    """X = c0 X0 + c1 X1."""
    cdef int j
    X.v = c0 * X0.v + c1 * X1.v
    if K.flags & SF_JAC:
        for j in range(S_NJ):
            X.J[j] = c0 * X0.J[j] + c1 * X1.J[j]
    if K.flags & SF_VEL:
        X.d = c0 * X0.d + c1 * X1.d
        X.h = c0 * X0.h + c1 * X1.h


cdef inline void _s_atan2(const SCtx* K, const SJ1* y, const SJ1* x, SJ1* X) noexcept nogil:
    """X = atan2(y, x) (principal value), Nikravesh (1988), §7.2.4, §7.3."""
    cdef double r2 = x.v * x.v + y.v * y.v
    cdef int j
    X.v = atan2(y.v, x.v)
    if K.flags & SF_JAC:
        for j in range(S_NJ):
            X.J[j] = (x.v * y.J[j] - y.v * x.J[j]) / r2
    if K.flags & SF_VEL:
        X.d = (x.v * y.d - y.v * x.d) / r2
        X.h = (x.v * y.h - y.v * x.h) / r2 - 2.0 * X.d * (x.v * x.d + y.v * y.d) / r2


cdef inline void _qmul(const double* a, const double* b, double* c) noexcept nogil:
    """c = a (x) b, scalar first (Nikravesh (1988), §6.5)."""
    cdef double x[3]
    c[0] = a[0] * b[0] - (a[1] * b[1] + a[2] * b[2] + a[3] * b[3])
    _cross(a + 1, b + 1, x)
    c[1] = a[0] * b[1] + b[0] * a[1] + x[0]
    c[2] = a[0] * b[2] + b[0] * a[2] + x[1]
    c[3] = a[0] * b[3] + b[0] * a[3] + x[2]


cdef inline void _s_relep(const SCtx* K, const double* q0, SJ3* X) noexcept nogil:
    """vec(conj(q0) (x) conj(p_j) (x) p_i) with its jets (reference: _relative_ep)."""
    cdef const double* pi = K.b[0].p
    cdef const double* pj = K.b[1].p
    cdef double cq0[4]
    cdef double cpj[4]
    cdef double t[4]
    cdef double w[4]
    cdef double u[4]
    cdef double v[4]
    cdef double bj[4]
    cdef double wi4[4]
    cdef double A0[9]
    cdef double Pi[9]
    cdef double Pj[9]
    cdef double S[9]
    cdef double e0 = q0[0], e1 = q0[1], e2 = q0[2], e3 = q0[3], w0, s2
    cdef const double* wi
    cdef const double* wj
    cdef int i, j
    cq0[0] = q0[0]; cq0[1] = -q0[1]; cq0[2] = -q0[2]; cq0[3] = -q0[3]
    cpj[0] = pj[0]; cpj[1] = -pj[1]; cpj[2] = -pj[2]; cpj[3] = -pj[3]
    _qmul(cpj, pi, t)
    _qmul(cq0, t, w)
    X.v[0] = w[1]; X.v[1] = w[2]; X.v[2] = w[3]
    if not (K.flags & (SF_JAC | SF_VEL)):
        return
    w0 = w[0]
    A0[0] = 2.0 * (e0 * e0 + e1 * e1 - 0.5)
    A0[1] = 2.0 * (e1 * e2 - e0 * e3)
    A0[2] = 2.0 * (e1 * e3 + e0 * e2)
    A0[3] = 2.0 * (e1 * e2 + e0 * e3)
    A0[4] = 2.0 * (e0 * e0 + e2 * e2 - 0.5)
    A0[5] = 2.0 * (e2 * e3 - e0 * e1)
    A0[6] = 2.0 * (e1 * e3 - e0 * e2)
    A0[7] = 2.0 * (e2 * e3 + e0 * e1)
    A0[8] = 2.0 * (e0 * e0 + e3 * e3 - 0.5)
    # Pi = 1/2 (w0 I + wv~);  Pj = -1/2 (w0 I - wv~) A0^T
    S[0] = w0; S[1] = -w[3]; S[2] = w[2]
    S[3] = w[3]; S[4] = w0; S[5] = -w[1]
    S[6] = -w[2]; S[7] = w[1]; S[8] = w0
    for i in range(9):
        Pi[i] = 0.5 * S[i]
    S[1] = -S[1]; S[2] = -S[2]; S[3] = -S[3]; S[5] = -S[5]; S[6] = -S[6]; S[7] = -S[7]
    for i in range(3):                  # (w0 I - wv~) A0^T
        for j in range(3):
            Pj[3 * i + j] = -0.5 * (S[3 * i] * A0[3 * j] + S[3 * i + 1] * A0[3 * j + 1]
                                    + S[3 * i + 2] * A0[3 * j + 2])
    if K.flags & SF_JAC:
        memset(X.J, 0, 36 * sizeof(double))
        for i in range(3):
            for j in range(3):
                X.J[i * S_NJ + 3 + j] = Pi[3 * i + j]
                X.J[i * S_NJ + 9 + j] = Pj[3 * i + j]
    if K.flags & SF_VEL:
        wi = K.b[0].w
        wj = K.b[1].w
        for i in range(3):
            X.d[i] = ((Pi[3 * i] * wi[0] + Pi[3 * i + 1] * wi[1] + Pi[3 * i + 2] * wi[2])
                      + (Pj[3 * i] * wj[0] + Pj[3 * i + 1] * wj[1] + Pj[3 * i + 2] * wj[2]))
        bj[0] = 0.0                     # [0, -A0^T w_j]
        for i in range(3):
            bj[1 + i] = -(A0[i] * wj[0] + A0[3 + i] * wj[1] + A0[6 + i] * wj[2])
        wi4[0] = 0.0; wi4[1] = wi[0]; wi4[2] = wi[1]; wi4[3] = wi[2]
        _qmul(bj, w, u)
        _qmul(u, wi4, v)
        s2 = -0.25 * (_d3(wi, wi) + _d3(wj, wj))
        for i in range(3):
            X.h[i] = s2 * w[1 + i] + 0.5 * v[1 + i]


cdef inline void _s_relep0(const SCtx* K, const double* q0, SJ1* X) noexcept nogil:
    """scal(conj(q0) (x) conj(p_j) (x) p_i) with its jets (reference:
    RelativeRotationEP._rows; q0 as packed, not normalised)."""
    cdef const double* pi = K.b[0].p
    cdef const double* pj = K.b[1].p
    cdef double cq0[4]
    cdef double cpj[4]
    cdef double t[4]
    cdef double w[4]
    cdef double u[4]
    cdef double v[4]
    cdef double bj[4]
    cdef double wi4[4]
    cdef double A0[9]
    cdef double Pi[3]
    cdef double Pj[3]
    cdef double e0 = q0[0], e1 = q0[1], e2 = q0[2], e3 = q0[3]
    cdef const double* wi
    cdef const double* wj
    cdef int i
    cq0[0] = q0[0]; cq0[1] = -q0[1]; cq0[2] = -q0[2]; cq0[3] = -q0[3]
    cpj[0] = pj[0]; cpj[1] = -pj[1]; cpj[2] = -pj[2]; cpj[3] = -pj[3]
    _qmul(cpj, pi, t)
    _qmul(cq0, t, w)
    X.v = w[0]
    if not (K.flags & (SF_JAC | SF_VEL)):
        return
    A0[0] = 2.0 * (e0 * e0 + e1 * e1 - 0.5)
    A0[1] = 2.0 * (e1 * e2 - e0 * e3)
    A0[2] = 2.0 * (e1 * e3 + e0 * e2)
    A0[3] = 2.0 * (e1 * e2 + e0 * e3)
    A0[4] = 2.0 * (e0 * e0 + e2 * e2 - 0.5)
    A0[5] = 2.0 * (e2 * e3 - e0 * e1)
    A0[6] = 2.0 * (e1 * e3 - e0 * e2)
    A0[7] = 2.0 * (e2 * e3 + e0 * e1)
    A0[8] = 2.0 * (e0 * e0 + e3 * e3 - 0.5)
    # Phi_pi'_i = -1/2 vec(w)^T;  Phi_pi'_j = 1/2 (A0 vec(w))^T
    _mv3(A0, w + 1, Pj)
    for i in range(3):
        Pi[i] = -0.5 * w[1 + i]
        Pj[i] = 0.5 * Pj[i]
    if K.flags & SF_JAC:
        memset(X.J, 0, S_NJ * sizeof(double))
        for i in range(3):
            X.J[3 + i] = Pi[i]
            X.J[9 + i] = Pj[i]
    if K.flags & SF_VEL:
        wi = K.b[0].w
        wj = K.b[1].w
        X.d = _d3(Pi, wi) + _d3(Pj, wj)
        bj[0] = 0.0                     # [0, -A0^T w_j]
        for i in range(3):
            bj[1 + i] = -(A0[i] * wj[0] + A0[3 + i] * wj[1] + A0[6 + i] * wj[2])
        wi4[0] = 0.0; wi4[1] = wi[0]; wi4[2] = wi[1]; wi4[3] = wi[2]
        _qmul(bj, w, u)
        _qmul(u, wi4, v)
        X.h = -0.25 * (_d3(wi, wi) + _d3(wj, wj)) * w[0] + 0.5 * v[0]


# ---------------------------------------------------------------- rows per type
cdef Py_ssize_t _s_rows(SGroup* G, Py_ssize_t e, const SCtx* K, SJ1* R) noexcept nogil:
    """The rows of element e (without driver terms) as scalar jets; returns m."""
    cdef const double* p = G.par + e * G.npar
    cdef SJ3 U, W, X, Y
    cdef SJ1 a, b
    cdef double q0[4]
    cdef double nq
    cdef int i, k = G.kind
    if k == K_S_SPHERICAL:          # [s'_i, s'_j]: P_i - P_j
        _s_point(K, 0, p, &U)
        _s_point(K, 1, p + 3, &W)
        _s_sub(K, &U, &W, &X)
        for i in range(3):
            _s_comp(K, &X, i, &R[i])
        return 3
    if k == K_S_UNIVERSAL:          # [s'_i, s'_j, a'_i, a'_j]: s, n1(a_i, a_j)
        _s_point(K, 0, p, &U)
        _s_point(K, 1, p + 3, &W)
        _s_sub(K, &U, &W, &X)
        for i in range(3):
            _s_comp(K, &X, i, &R[i])
        _s_vec(K, 0, p + 6, &U)
        _s_vec(K, 1, p + 9, &W)
        _s_dot(K, &U, &W, &R[3])
        return 4
    if k == K_S_REVOLUTE:           # [s'_i, s'_j, u'_j, f'_i, g'_i]: s, f_i.u_j, g_i.u_j
        _s_point(K, 0, p, &U)
        _s_point(K, 1, p + 3, &W)
        _s_sub(K, &U, &W, &X)
        for i in range(3):
            _s_comp(K, &X, i, &R[i])
        _s_vec(K, 1, p + 6, &Y)
        _s_vec(K, 0, p + 9, &U)
        _s_dot(K, &U, &Y, &R[3])
        _s_vec(K, 0, p + 12, &U)
        _s_dot(K, &U, &Y, &R[4])
        return 5
    if k == K_S_CYLINDRICAL or k == K_S_TRANSLATIONAL:
        # [s'_i, s'_j, u'_j, f'_i, g'_i(, h'_j)]: f_i.u_j, g_i.u_j, f_i.d, g_i.d(, f_i.h_j)
        _s_vec(K, 1, p + 6, &Y)
        _s_vec(K, 0, p + 9, &X)                    # f_i
        _s_dot(K, &X, &Y, &R[0])
        _s_vec(K, 0, p + 12, &U)                   # g_i
        _s_dot(K, &U, &Y, &R[1])
        _s_point(K, 1, p + 3, &W)
        _s_point(K, 0, p, &Y)
        _s_sub(K, &W, &Y, &W)                      # d = P_j - P_i
        _s_dot(K, &X, &W, &R[2])
        _s_dot(K, &U, &W, &R[3])
        if k == K_S_CYLINDRICAL:
            return 4
        _s_vec(K, 1, p + 15, &Y)
        _s_dot(K, &X, &Y, &R[4])
        return 5
    if k == K_S_PLANAR:
        # [s'_i, s'_j, u'_j, f'_i, g'_i, u'_i]: f_i.u_j, g_i.u_j, u_i.d
        _s_vec(K, 1, p + 6, &Y)
        _s_vec(K, 0, p + 9, &X)
        _s_dot(K, &X, &Y, &R[0])
        _s_vec(K, 0, p + 12, &U)
        _s_dot(K, &U, &Y, &R[1])
        _s_point(K, 1, p + 3, &W)
        _s_point(K, 0, p, &Y)
        _s_sub(K, &W, &Y, &W)                      # d = P_j - P_i
        _s_vec(K, 0, p + 15, &X)                   # u_i
        _s_dot(K, &X, &W, &R[2])
        return 3
    if k == K_S_DISTANCE:           # [s'_i, s'_j]: d.d (- L(t)^2 by the driver terms)
        _s_point(K, 1, p + 3, &U)
        _s_point(K, 0, p, &W)
        _s_sub(K, &U, &W, &X)
        _s_dot(K, &X, &X, &R[0])
        return 1
    if k == K_S_SPH_REV:            # [s'_i, s'_j, u'_j, l]: d.d - l^2, u_j.d
        _s_point(K, 1, p + 3, &U)
        _s_point(K, 0, p, &W)
        _s_sub(K, &U, &W, &X)
        _s_dot(K, &X, &X, &R[0])
        R[0].v = R[0].v - p[9] * p[9]
        _s_vec(K, 1, p + 6, &U)
        _s_dot(K, &U, &X, &R[1])
        return 2
    if k == K_S_REV_REV:
        # [s'_i, s'_j, u'_i, u'_j, l, sin b0, cos b0 / l]:
        # d.d - l^2, u_i.d, u_j.d, sin b0 u_i.u_j - (cos b0 / l) d.(u_i x u_j)
        _s_point(K, 1, p + 3, &U)
        _s_point(K, 0, p, &W)
        _s_sub(K, &U, &W, &X)                      # d
        _s_dot(K, &X, &X, &R[0])
        R[0].v = R[0].v - p[12] * p[12]
        _s_vec(K, 0, p + 6, &U)                    # u_i
        _s_vec(K, 1, p + 9, &W)                    # u_j
        _s_dot(K, &U, &X, &R[1])
        _s_dot(K, &W, &X, &R[2])
        _s_dot(K, &U, &W, &a)
        _s_cross(K, &U, &W, &Y)
        _s_dot(K, &X, &Y, &b)
        _s_lin2(K, p[13], &a, -p[14], &b, &R[3])
        return 4
    if k == K_S_POINT_COORD:        # [k, s']: e_k . (r + A s')
        _s_point(K, 0, p + 1, &U)
        _s_comp(K, &U, <int> p[0], &R[0])
        return 1
    if k == K_S_ANGLE_DRIVER or k == K_S_PERPENDICULAR:   # [a'_i, a'_j]: a_i.a_j
        _s_vec(K, 0, p, &U)
        _s_vec(K, 1, p + 3, &W)
        _s_dot(K, &U, &W, &R[0])
        return 1
    if k == K_S_PARALLEL:           # [f'_i, g'_i, a'_j]: f_i.a_j, g_i.a_j
        _s_vec(K, 1, p + 6, &Y)
        _s_vec(K, 0, p, &U)
        _s_dot(K, &U, &Y, &R[0])
        _s_vec(K, 0, p + 3, &U)
        _s_dot(K, &U, &Y, &R[1])
        return 2
    if k == K_S_ROTATION_DRIVER:    # [f'_i, g'_i, f'_j, theta]: atan2(g_i.f_j, f_i.f_j)
        _s_vec(K, 1, p + 6, &Y)
        _s_vec(K, 0, p + 3, &U)
        _s_dot(K, &U, &Y, &a)
        _s_vec(K, 0, p, &U)
        _s_dot(K, &U, &Y, &b)
        _s_atan2(K, &a, &b, &R[0])
        return 1
    if k == K_S_FIXED:              # [s'_i, s'_j, q0]: P_i - P_j, vec(q0* (x) p_j* (x) p_i)
        _s_point(K, 0, p, &U)
        _s_point(K, 1, p + 3, &W)
        _s_sub(K, &U, &W, &X)
        for i in range(3):
            _s_comp(K, &X, i, &R[i])
        nq = sqrt(p[6] * p[6] + p[7] * p[7] + p[8] * p[8] + p[9] * p[9])
        for i in range(4):
            q0[i] = p[6 + i] / nq
        _s_relep(K, q0, &X)
        for i in range(3):
            _s_comp(K, &X, i, &R[3 + i])
        return 6
    if k == K_S_SCREW:
        # [s'_i, s'_j, u'_j, f'_i, g'_i, u'_i, f'_j, a, delta0, theta0, theta]:
        # the cylindrical rows, u_i.d - a atan2(g_i.f_j, f_i.f_j) (the tracked angle
        # and the constants by _phi_spatial); scratch: R[5] = u_i.d, R[6] = the
        # principal-value angle
        _s_vec(K, 1, p + 6, &Y)
        _s_vec(K, 0, p + 9, &X)                    # f_i
        _s_dot(K, &X, &Y, &R[0])
        _s_vec(K, 0, p + 12, &U)                   # g_i
        _s_dot(K, &U, &Y, &R[1])
        _s_point(K, 1, p + 3, &W)
        _s_point(K, 0, p, &Y)
        _s_sub(K, &W, &Y, &W)                      # d = P_j - P_i
        _s_dot(K, &X, &W, &R[2])
        _s_dot(K, &U, &W, &R[3])
        _s_vec(K, 0, p + 15, &Y)                   # u_i
        _s_dot(K, &Y, &W, &R[5])
        _s_vec(K, 1, p + 18, &Y)                   # f_j
        _s_dot(K, &U, &Y, &a)
        _s_dot(K, &X, &Y, &b)
        _s_atan2(K, &a, &b, &R[6])
        _s_lin2(K, 1.0, &R[5], -p[21], &R[6], &R[4])
        return 5
    if k == K_S_REV_CYL:            # [s'_i, s'_j, u'_i, u'_j, f'_j, g'_j]: u_i.u_j, f_j.d, g_j.d
        _s_vec(K, 0, p + 6, &U)
        _s_vec(K, 1, p + 9, &W)
        _s_dot(K, &U, &W, &R[0])
        _s_point(K, 1, p + 3, &W)
        _s_point(K, 0, p, &Y)
        _s_sub(K, &W, &Y, &X)                      # d = P_j - P_i
        _s_vec(K, 1, p + 12, &U)
        _s_dot(K, &U, &X, &R[1])
        _s_vec(K, 1, p + 15, &U)
        _s_dot(K, &U, &X, &R[2])
        return 3
    if k == K_S_POINT_LINE or k == K_S_POINT_PLANE:
        # [s'_i, s'_j, f'_i(, g'_i)]: f_i.d(, g_i.d);  point on plane: f'_i = n'_i
        _s_point(K, 1, p + 3, &W)
        _s_point(K, 0, p, &Y)
        _s_sub(K, &W, &Y, &X)                      # d = P_j - P_i
        _s_vec(K, 0, p + 6, &U)
        _s_dot(K, &U, &X, &R[0])
        if k == K_S_POINT_PLANE:
            return 1
        _s_vec(K, 0, p + 9, &U)
        _s_dot(K, &U, &X, &R[1])
        return 2
    if k == K_S_REL_ROT_EP:         # [q0]: scal(q0* (x) p_j* (x) p_i) (- cos(c/2) by the driver terms)
        _s_relep0(K, p, &R[0])
        return 1
    if k == K_S_ORIENT_LOCK:        # [q0]: vec(q0* (x) p_j* (x) p_i), q0 normalised
        nq = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2] + p[3] * p[3])
        for i in range(4):
            q0[i] = p[i] / nq
        _s_relep(K, q0, &X)
        for i in range(3):
            _s_comp(K, &X, i, &R[i])
        return 3
    return 0


# ---------------------------------------------------------------- stages
cdef inline void _phi_spatial(SGroup* G, const double* q, const double* fv, double* out) noexcept nogil:
    cdef SCtx K
    cdef SJ1 R[S_MAXROWS]
    cdef Py_ssize_t e, r, k, m, o
    cdef const double* f
    cdef double* p
    cdef double th
    K.flags = 0
    for e in range(G.ne):
        r = G.row[e]
        _s_load(&K, G, e, q, NULL)
        m = _s_rows(G, e, &K, R)
        for k in range(m):
            out[r + k] = R[k].v
        if G.kind == K_S_SCREW:
            # tracked angle as for the rotation driver (Screw.phi), stored in par[24]
            p = (<double*> G.par) + e * G.npar
            th = R[6].v + S_TWO_PI * rint((p[24] - R[6].v) / S_TWO_PI)
            p[24] = th
            out[r + 4] = R[5].v - p[22] - p[21] * (th - p[23])
            continue
        if G.nfun == 0:
            continue
        f = fv + 3 * G.fidx[e * G.nfun]
        if G.kind == K_S_DISTANCE:
            out[r] = out[r] - f[0] * f[0]
        elif G.kind == K_S_POINT_COORD:
            out[r] = out[r] - f[0]
        elif G.kind == K_S_ANGLE_DRIVER:
            out[r] = out[r] - cos(f[0])
        elif G.kind == K_S_REL_ROT_EP:
            out[r] = out[r] - cos(0.5 * f[0])
        elif G.kind == K_S_ROTATION_DRIVER:
            # continuous tracking: the branch nearest the last tracked angle, stored
            # in place (par is the System group's array, shared with the NumPy path)
            p = (<double*> G.par) + e * G.npar
            th = R[0].v + S_TWO_PI * rint((p[9] - R[0].v) / S_TWO_PI)
            p[9] = th
            out[r] = th - f[0]


cdef inline void _jac_spatial(SGroup* G, const double* q, double* J) noexcept nogil:
    # entry order per element: (row, body, coordinate) -> jpos[e*njac + r*nb*7 + b*7 + c]
    cdef SCtx K
    cdef SJ1 R[S_MAXROWS]
    cdef Py_ssize_t e, k, m, b, c, o, nb7 = G.nb * 7
    cdef const Py_ssize_t* jp
    cdef const Py_ssize_t* jr
    cdef const double* t
    cdef const double* pp
    cdef double e0, e1, e2, e3
    K.flags = SF_JAC
    for e in range(G.ne):
        jp = G.jpos + e * G.njac
        _s_load(&K, G, e, q, NULL)
        m = _s_rows(G, e, &K, R)
        for k in range(m):
            for b in range(G.nb):
                jr = jp + k * nb7 + b * 7
                t = R[k].J + b * 6
                J[jr[0]] = t[0]; J[jr[1]] = t[1]; J[jr[2]] = t[2]
                pp = K.b[b].p
                e0 = pp[0]; e1 = pp[1]; e2 = pp[2]; e3 = pp[3]
                # 2 J_pi' L(p); L columns: (-e1,-e2,-e3), (e0,-e3,e2), (e3,e0,-e1), (-e2,e1,e0)
                J[jr[3]] = 2.0 * (t[3] * (-e1) + t[4] * (-e2) + t[5] * (-e3))
                J[jr[4]] = 2.0 * (t[3] * e0 + t[4] * (-e3) + t[5] * e2)
                J[jr[5]] = 2.0 * (t[3] * e3 + t[4] * e0 + t[5] * (-e1))
                J[jr[6]] = 2.0 * (t[3] * (-e2) + t[4] * e1 + t[5] * e0)


cdef inline void _nu_spatial(SGroup* G, const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, r, k
    cdef const double* f
    for e in range(G.ne):
        r = G.row[e]
        if G.nfun == 0:
            for k in range(G.m):
                out[r + k] = 0.0
            continue
        f = fv + 3 * G.fidx[e * G.nfun]
        if G.kind == K_S_DISTANCE:               # -Phi_t of d.d - L^2
            out[r] = 2.0 * f[0] * f[1]
        elif G.kind == K_S_ANGLE_DRIVER:         # of a_i.a_j - cos c
            out[r] = -sin(f[0]) * f[1]
        elif G.kind == K_S_REL_ROT_EP:           # of w0 - cos(c/2)
            out[r] = -0.5 * sin(0.5 * f[0]) * f[1]
        else:                                    # point coordinate, rotation driver
            out[r] = f[1]


cdef inline void _gamma_spatial(SGroup* G, const double* q, const double* qd, const double* fv,
                         double* out) noexcept nogil:
    cdef SCtx K
    cdef SJ1 R[S_MAXROWS]
    cdef Py_ssize_t e, r, k, m, o
    cdef const double* f
    cdef double co, si
    K.flags = SF_VEL
    for e in range(G.ne):
        r = G.row[e]
        _s_load(&K, G, e, q, qd)
        m = _s_rows(G, e, &K, R)
        for k in range(m):
            out[r + k] = -R[k].h
        if G.nfun == 0:
            continue
        f = fv + 3 * G.fidx[e * G.nfun]
        if G.kind == K_S_DISTANCE:
            out[r] = out[r] + 2.0 * (f[1] * f[1] + f[0] * f[2])
        elif G.kind == K_S_ANGLE_DRIVER:
            co = cos(f[0]); si = sin(f[0])
            out[r] = out[r] + (-co * f[1] * f[1] - si * f[2])
        elif G.kind == K_S_REL_ROT_EP:
            co = cos(0.5 * f[0]); si = sin(0.5 * f[0])
            out[r] = out[r] + (-0.25 * co * f[1] * f[1] - 0.5 * si * f[2])
        else:
            out[r] = out[r] + f[2]


# ---------------------------------------------------------------- spherical joint
# The spherical joint's Jacobian and gamma without jets: the same expressions in the
# same order as _s_rows (P_i - P_j of two body points), so the same numbers, with
# no 36-entry jet arrays to clear, subtract and copy (Nikravesh (1988), §7.2.1:
# Phi = r_i + A_i s'_i - r_j - A_j s'_j; Phi_pi' = -A s'~; gamma# = -(A_i w'_i~ w'_i~
# s'_i - A_j w'_j~ w'_j~ s'_j)).

cdef inline void _sph_jac(SGroup* G, const double* q, double* J) noexcept nogil:
    cdef SBody B
    cdef Py_ssize_t e, i, k, c
    cdef const Py_ssize_t* jp
    cdef const Py_ssize_t* jr
    cdef const double* a
    cdef double t[6]
    # A(p) and the point in locals: the stores into J (through the index map) would
    # otherwise reload them after every store
    cdef double Al[9]
    cdef double al[3]
    cdef Py_ssize_t j0, j1, j2, j3, j4, j5, j6
    cdef double u0, u1, u2, e0, e1, e2, e3
    for e in range(G.ne):
        jp = G.jpos + e * G.njac
        for k in range(2):
            _s_body(&B, q, NULL, G.boff[e * 2 + k], 0)
            a = G.par + e * G.npar + 3 * k
            for c in range(9):
                Al[c] = B.A[c]
            al[0] = a[0]; al[1] = a[1]; al[2] = a[2]
            e0 = B.p[0]; e1 = B.p[1]; e2 = B.p[2]; e3 = B.p[3]
            for i in range(3):
                # the jet of P_k: J_r = I, J_pi' = -A a'~; of the row: +- that
                u0 = -(Al[3 * i + 1] * al[2] - Al[3 * i + 2] * al[1])
                u1 = -(Al[3 * i + 2] * al[0] - Al[3 * i] * al[2])
                u2 = -(Al[3 * i] * al[1] - Al[3 * i + 1] * al[0])
                for c in range(3):
                    t[c] = (1.0 if c == i else 0.0) if k == 0 else \
                        0.0 - (1.0 if c == i else 0.0)
                if k == 0:
                    t[3] = u0 - 0.0; t[4] = u1 - 0.0; t[5] = u2 - 0.0
                else:
                    t[3] = 0.0 - u0; t[4] = 0.0 - u1; t[5] = 0.0 - u2
                jr = jp + i * 14 + k * 7
                j0 = jr[0]; j1 = jr[1]; j2 = jr[2]; j3 = jr[3]
                j4 = jr[4]; j5 = jr[5]; j6 = jr[6]
                J[j0] = t[0]; J[j1] = t[1]; J[j2] = t[2]
                J[j3] = 2.0 * (t[3] * (-e1) + t[4] * (-e2) + t[5] * (-e3))
                J[j4] = 2.0 * (t[3] * e0 + t[4] * (-e3) + t[5] * e2)
                J[j5] = 2.0 * (t[3] * e3 + t[4] * e0 + t[5] * (-e1))
                J[j6] = 2.0 * (t[3] * (-e2) + t[4] * e1 + t[5] * e0)


cdef inline void _sph_gamma(SGroup* G, const double* q, const double* qd,
                            double* out) noexcept nogil:
    cdef SBody B
    cdef Py_ssize_t e, k, r
    cdef const double* a
    cdef double wa[3]
    cdef double wwa[3]
    cdef double h[6]
    for e in range(G.ne):
        for k in range(2):
            _s_body(&B, q, qd, G.boff[e * 2 + k], SF_VEL)
            a = G.par + e * G.npar + 3 * k
            _cross(B.w, a, wa)
            _cross(B.w, wa, wwa)
            _mv3(B.A, wwa, h + 3 * k)
        r = G.row[e]
        out[r] = -(h[0] - h[3])
        out[r + 1] = -(h[1] - h[4])
        out[r + 2] = -(h[2] - h[5])


# --------------------------------------------------------------------------------
# the capsules: one trampoline per type and stage
# --------------------------------------------------------------------------------

cdef mbcore_index _spherical_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPHERICAL, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _spherical_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPHERICAL, A, &G)
    _sph_jac(&G, q, J)
    return -1


cdef mbcore_index _spherical_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPHERICAL, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _spherical_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPHERICAL, A, &G)
    _sph_gamma(&G, q, qd, out)
    return -1


cdef mbcore_index _universal_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_UNIVERSAL, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _universal_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_UNIVERSAL, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _universal_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_UNIVERSAL, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _universal_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_UNIVERSAL, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _revolute_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REVOLUTE, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _revolute_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_REVOLUTE, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _revolute_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REVOLUTE, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _revolute_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REVOLUTE, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _cylindrical_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_CYLINDRICAL, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _cylindrical_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_CYLINDRICAL, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _cylindrical_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_CYLINDRICAL, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _cylindrical_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_CYLINDRICAL, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _translational_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_TRANSLATIONAL, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _translational_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_TRANSLATIONAL, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _translational_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_TRANSLATIONAL, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _translational_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_TRANSLATIONAL, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _planar_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PLANAR, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _planar_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_PLANAR, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _planar_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PLANAR, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _planar_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PLANAR, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _distance_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_DISTANCE, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _distance_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_DISTANCE, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _distance_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_DISTANCE, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _distance_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_DISTANCE, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _spherical_revolute_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPH_REV, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _spherical_revolute_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPH_REV, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _spherical_revolute_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPH_REV, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _spherical_revolute_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SPH_REV, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _revolute_revolute_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_REV, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _revolute_revolute_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_REV, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _revolute_revolute_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_REV, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _revolute_revolute_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_REV, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _point_coordinate_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_COORD, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _point_coordinate_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_COORD, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _point_coordinate_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_COORD, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _point_coordinate_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_COORD, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _angle_driver_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ANGLE_DRIVER, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _angle_driver_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_ANGLE_DRIVER, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _angle_driver_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ANGLE_DRIVER, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _angle_driver_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ANGLE_DRIVER, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _rotation_driver_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ROTATION_DRIVER, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _rotation_driver_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_ROTATION_DRIVER, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _rotation_driver_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ROTATION_DRIVER, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _rotation_driver_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ROTATION_DRIVER, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _fixed_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_FIXED, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _fixed_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_FIXED, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _fixed_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_FIXED, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _fixed_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_FIXED, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _perpendicular_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PERPENDICULAR, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _perpendicular_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_PERPENDICULAR, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _perpendicular_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PERPENDICULAR, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _perpendicular_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PERPENDICULAR, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _parallel_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PARALLEL, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _parallel_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_PARALLEL, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _parallel_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PARALLEL, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _parallel_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_PARALLEL, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _screw_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SCREW, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _screw_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_SCREW, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _screw_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SCREW, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _screw_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_SCREW, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _revolute_cylindrical_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_CYL, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _revolute_cylindrical_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_CYL, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _revolute_cylindrical_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_CYL, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _revolute_cylindrical_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REV_CYL, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _point_on_line_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_LINE, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _point_on_line_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_LINE, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _point_on_line_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_LINE, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _point_on_line_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_LINE, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _point_on_plane_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_PLANE, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _point_on_plane_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_PLANE, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _point_on_plane_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_PLANE, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _point_on_plane_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_POINT_PLANE, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _relative_rotation_ep_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REL_ROT_EP, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _relative_rotation_ep_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_REL_ROT_EP, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _relative_rotation_ep_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REL_ROT_EP, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _relative_rotation_ep_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_REL_ROT_EP, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _orientation_lock_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ORIENT_LOCK, A, &G)
    _phi_spatial(&G, q, fv, out)
    return -1


cdef mbcore_index _orientation_lock_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef SGroup G
    _group(K_S_ORIENT_LOCK, A, &G)
    _jac_spatial(&G, q, J)
    return -1


cdef mbcore_index _orientation_lock_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ORIENT_LOCK, A, &G)
    _nu_spatial(&G, fv, out)
    return -1


cdef mbcore_index _orientation_lock_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef SGroup G
    _group(K_S_ORIENT_LOCK, A, &G)
    _gamma_spatial(&G, q, qd, fv, out)
    return -1


cdef mbcore_constraint_kernel _KERNELS[21]


cdef object _capsule(int k, const char* name, int m, int nb, int npar, int nfun,
                     int stateful):
    _KERNELS[k].abi_version = MBCORE_ABI_VERSION
    _KERNELS[k].name = name
    _KERNELS[k].body_kind = MBCORE_BODY_SPATIAL
    _KERNELS[k].n_equations = m
    _KERNELS[k].n_bodies = nb
    _KERNELS[k].n_par = npar
    _KERNELS[k].n_fun = nfun
    _KERNELS[k].holonomic = 1
    _KERNELS[k].reason = NULL
    _KERNELS[k].scatter = MBCORE_SCATTER_DIRECT
    _KERNELS[k].n_extra = 0
    _KERNELS[k].stateful = stateful
    return PyCapsule_New(&_KERNELS[k], MBCORE_CONSTRAINT_CAPSULE, NULL)


_KERNELS[0].phi = _spherical_phi
_KERNELS[0].jacobian = _spherical_jac
_KERNELS[0].nu = _spherical_nu
_KERNELS[0].gamma = _spherical_gamma
SPHERICAL = _capsule(0, b"spatial_spherical", 3, 2, 6, 0, 0)

_KERNELS[1].phi = _universal_phi
_KERNELS[1].jacobian = _universal_jac
_KERNELS[1].nu = _universal_nu
_KERNELS[1].gamma = _universal_gamma
UNIVERSAL = _capsule(1, b"spatial_universal", 4, 2, 12, 0, 0)

_KERNELS[2].phi = _revolute_phi
_KERNELS[2].jacobian = _revolute_jac
_KERNELS[2].nu = _revolute_nu
_KERNELS[2].gamma = _revolute_gamma
REVOLUTE = _capsule(2, b"spatial_revolute", 5, 2, 15, 0, 0)

_KERNELS[3].phi = _cylindrical_phi
_KERNELS[3].jacobian = _cylindrical_jac
_KERNELS[3].nu = _cylindrical_nu
_KERNELS[3].gamma = _cylindrical_gamma
CYLINDRICAL = _capsule(3, b"spatial_cylindrical", 4, 2, 15, 0, 0)

_KERNELS[4].phi = _translational_phi
_KERNELS[4].jacobian = _translational_jac
_KERNELS[4].nu = _translational_nu
_KERNELS[4].gamma = _translational_gamma
TRANSLATIONAL = _capsule(4, b"spatial_translational", 5, 2, 18, 0, 0)

_KERNELS[5].phi = _planar_phi
_KERNELS[5].jacobian = _planar_jac
_KERNELS[5].nu = _planar_nu
_KERNELS[5].gamma = _planar_gamma
PLANAR = _capsule(5, b"spatial_planar", 3, 2, 18, 0, 0)

_KERNELS[6].phi = _distance_phi
_KERNELS[6].jacobian = _distance_jac
_KERNELS[6].nu = _distance_nu
_KERNELS[6].gamma = _distance_gamma
DISTANCE = _capsule(6, b"spatial_distance", 1, 2, 6, 1, 0)

_KERNELS[7].phi = _spherical_revolute_phi
_KERNELS[7].jacobian = _spherical_revolute_jac
_KERNELS[7].nu = _spherical_revolute_nu
_KERNELS[7].gamma = _spherical_revolute_gamma
SPHERICAL_REVOLUTE = _capsule(7, b"spatial_spherical_revolute", 2, 2, 10, 0, 0)

_KERNELS[8].phi = _revolute_revolute_phi
_KERNELS[8].jacobian = _revolute_revolute_jac
_KERNELS[8].nu = _revolute_revolute_nu
_KERNELS[8].gamma = _revolute_revolute_gamma
REVOLUTE_REVOLUTE = _capsule(8, b"spatial_revolute_revolute", 4, 2, 15, 0, 0)

_KERNELS[9].phi = _point_coordinate_phi
_KERNELS[9].jacobian = _point_coordinate_jac
_KERNELS[9].nu = _point_coordinate_nu
_KERNELS[9].gamma = _point_coordinate_gamma
POINT_COORDINATE = _capsule(9, b"spatial_point_coordinate", 1, 1, 4, 1, 0)

_KERNELS[10].phi = _angle_driver_phi
_KERNELS[10].jacobian = _angle_driver_jac
_KERNELS[10].nu = _angle_driver_nu
_KERNELS[10].gamma = _angle_driver_gamma
ANGLE_DRIVER = _capsule(10, b"spatial_angle_driver", 1, 2, 6, 1, 0)

_KERNELS[11].phi = _rotation_driver_phi
_KERNELS[11].jacobian = _rotation_driver_jac
_KERNELS[11].nu = _rotation_driver_nu
_KERNELS[11].gamma = _rotation_driver_gamma
ROTATION_DRIVER = _capsule(11, b"spatial_rotation_driver", 1, 2, 10, 1, 1)

_KERNELS[12].phi = _fixed_phi
_KERNELS[12].jacobian = _fixed_jac
_KERNELS[12].nu = _fixed_nu
_KERNELS[12].gamma = _fixed_gamma
FIXED = _capsule(12, b"spatial_fixed", 6, 2, 10, 0, 0)

_KERNELS[13].phi = _perpendicular_phi
_KERNELS[13].jacobian = _perpendicular_jac
_KERNELS[13].nu = _perpendicular_nu
_KERNELS[13].gamma = _perpendicular_gamma
PERPENDICULAR = _capsule(13, b"spatial_perpendicular", 1, 2, 6, 0, 0)

_KERNELS[14].phi = _parallel_phi
_KERNELS[14].jacobian = _parallel_jac
_KERNELS[14].nu = _parallel_nu
_KERNELS[14].gamma = _parallel_gamma
PARALLEL = _capsule(14, b"spatial_parallel", 2, 2, 9, 0, 0)

_KERNELS[15].phi = _screw_phi
_KERNELS[15].jacobian = _screw_jac
_KERNELS[15].nu = _screw_nu
_KERNELS[15].gamma = _screw_gamma
SCREW = _capsule(15, b"spatial_screw", 5, 2, 25, 0, 1)

_KERNELS[16].phi = _revolute_cylindrical_phi
_KERNELS[16].jacobian = _revolute_cylindrical_jac
_KERNELS[16].nu = _revolute_cylindrical_nu
_KERNELS[16].gamma = _revolute_cylindrical_gamma
REVOLUTE_CYLINDRICAL = _capsule(16, b"spatial_revolute_cylindrical", 3, 2, 18, 0, 0)

_KERNELS[17].phi = _point_on_line_phi
_KERNELS[17].jacobian = _point_on_line_jac
_KERNELS[17].nu = _point_on_line_nu
_KERNELS[17].gamma = _point_on_line_gamma
POINT_ON_LINE = _capsule(17, b"spatial_point_on_line", 2, 2, 12, 0, 0)

_KERNELS[18].phi = _point_on_plane_phi
_KERNELS[18].jacobian = _point_on_plane_jac
_KERNELS[18].nu = _point_on_plane_nu
_KERNELS[18].gamma = _point_on_plane_gamma
POINT_ON_PLANE = _capsule(18, b"spatial_point_on_plane", 1, 2, 9, 0, 0)

_KERNELS[19].phi = _relative_rotation_ep_phi
_KERNELS[19].jacobian = _relative_rotation_ep_jac
_KERNELS[19].nu = _relative_rotation_ep_nu
_KERNELS[19].gamma = _relative_rotation_ep_gamma
RELATIVE_ROTATION_EP = _capsule(19, b"spatial_relative_rotation_ep", 1, 2, 4, 1, 0)

_KERNELS[20].phi = _orientation_lock_phi
_KERNELS[20].jacobian = _orientation_lock_jac
_KERNELS[20].nu = _orientation_lock_nu
_KERNELS[20].gamma = _orientation_lock_gamma
ORIENTATION_LOCK = _capsule(20, b"spatial_orientation_lock", 3, 2, 4, 0, 0)
