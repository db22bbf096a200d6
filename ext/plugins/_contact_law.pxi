# The contact law of the spatial compliant contact (sphere-plane, sphere-sphere):
# Hertz's elastic force (Johnson (1985), Ch. 4), Hunt & Crossley (1975) damping,
# regularised Coulomb friction, and the loads of one pair in the Euler-parameter
# form (Nikravesh (1988), Eqs. 11.1-11.7).  Included by _contact.pyx
# (spatial:contact, one pair per element) and _sphere_group.pyx
# (spatial:sphere_group, the pairs its broad phase finds), so the law is written
# once.  NumPy reference: mbplugins.contact.spatial.
from libc.math cimport sqrt, pow, tanh

#: sphere centres closer than this have no contact normal (the reference's value)
cdef double MIN_DISTANCE = 1e-12
#: below this x = |v_t| / v_eps, sat(x) / x is evaluated by its series
cdef double SMALL_SLIP = 1e-4


cdef inline void _sA(const double* p, double* A) noexcept nogil:
    """A(p), explicit form Nikravesh (1988), Eq. 6.18 (row-major)."""
    cdef double e0 = p[0], e1 = p[1], e2 = p[2], e3 = p[3]
    A[0] = 2.0 * (e0 * e0 + e1 * e1 - 0.5); A[1] = 2.0 * (e1 * e2 - e0 * e3)
    A[2] = 2.0 * (e1 * e3 + e0 * e2)
    A[3] = 2.0 * (e1 * e2 + e0 * e3); A[4] = 2.0 * (e0 * e0 + e2 * e2 - 0.5)
    A[5] = 2.0 * (e2 * e3 - e0 * e1)
    A[6] = 2.0 * (e1 * e3 - e0 * e2); A[7] = 2.0 * (e2 * e3 + e0 * e1)
    A[8] = 2.0 * (e0 * e0 + e3 * e3 - 0.5)


cdef inline void _sGw(const double* p, const double* pd, double* w) noexcept nogil:
    """omega = 2 G(p) pd (global angular velocity)."""
    w[0] = 2.0 * (-p[1] * pd[0] + p[0] * pd[1] - p[3] * pd[2] + p[2] * pd[3])
    w[1] = 2.0 * (-p[2] * pd[0] + p[3] * pd[1] + p[0] * pd[2] - p[1] * pd[3])
    w[2] = 2.0 * (-p[3] * pd[0] - p[2] * pd[1] + p[1] * pd[2] + p[0] * pd[3])


cdef inline void _sGTn(const double* p, const double* n, double sign,
                       double* out) noexcept nogil:
    """out += sign * 2 G(p)^T n."""
    out[0] += sign * 2.0 * (-p[1] * n[0] - p[2] * n[1] - p[3] * n[2])
    out[1] += sign * 2.0 * (p[0] * n[0] + p[3] * n[1] - p[2] * n[2])
    out[2] += sign * 2.0 * (-p[3] * n[0] + p[0] * n[1] + p[1] * n[2])
    out[3] += sign * 2.0 * (p[2] * n[0] - p[1] * n[1] + p[0] * n[2])


cdef inline void _smv(const double* A, const double* x, double* y) noexcept nogil:
    y[0] = A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
    y[1] = A[3] * x[0] + A[4] * x[1] + A[5] * x[2]
    y[2] = A[6] * x[0] + A[7] * x[1] + A[8] * x[2]


cdef inline void _scross(const double* a, const double* b, double* c) noexcept nogil:
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]


cdef inline int _pair(const double* p, const double* s, const double* q,
                      const double* qd, Py_ssize_t bi, Py_ssize_t bj, const double* Ai,
                      const double* Aj, const double* wi, const double* wj, double* Q,
                      double* pw) noexcept nogil:
    """Adds the loads of the pair whose sphere is centred at s' = ``s`` on body i
    to Q (and its non-conservative power to pw); 1 if the normal is undefined.
    par = [s'_a, s'_b, R, l', n', R_j, k, c, e, mu, v_eps, damping model,
    friction model, shape]."""
    cdef double P[3]
    cdef double L[3]
    cdef double n[3]
    cdef double X[3]
    cdef double Xi[3]
    cdef double Xj[3]
    cdef double t[3]
    cdef double vr[3]
    cdef double vt[3]
    cdef double F[3]
    cdef double m[3]
    cdef double d, dist, delta, vn, dd, speed, pe, fel, fn, x, x2, ratio, fts
    cdef int k
    _smv(Ai, s, t)
    for k in range(3):
        P[k] = q[bi + k] + t[k]
    _smv(Aj, p + 7, t)
    for k in range(3):
        L[k] = q[bj + k] + t[k]
    if p[21] > 0.5 and p[21] < 1.5:
        # sphere_sphere: n from the body-j centre to the body-i centre
        for k in range(3):
            t[k] = P[k] - L[k]
        dist = sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2])
        if not (dist >= MIN_DISTANCE):
            return 1
        for k in range(3):
            n[k] = t[k] / dist
        delta = p[6] + p[13] - dist
        if not (delta > 0.0):
            return 0
        for k in range(3):
            X[k] = L[k] + (p[13] - 0.5 * delta) * n[k]
    else:
        # plane through L with normal n = A_j n'
        _smv(Aj, p + 10, n)
        d = n[0] * (P[0] - L[0]) + n[1] * (P[1] - L[1]) + n[2] * (P[2] - L[2])
        delta = p[6] - d
        if not (delta > 0.0):
            return 0
        for k in range(3):
            X[k] = P[k] - d * n[k]
    for k in range(3):
        Xi[k] = X[k] - q[bi + k]
        Xj[k] = X[k] - q[bj + k]
    # v_rel = (rdot_i + w_i x X_i) - (rdot_j + w_j x X_j)
    _scross(wi, Xi, t)
    _scross(wj, Xj, vr)
    for k in range(3):
        vr[k] = (qd[bi + k] + t[k]) - (qd[bj + k] + vr[k])
    vn = n[0] * vr[0] + n[1] * vr[1] + n[2] * vr[2]
    dd = -vn
    for k in range(3):
        vt[k] = vr[k] - vn * n[k]
    speed = sqrt(vt[0] * vt[0] + vt[1] * vt[1] + vt[2] * vt[2])
    pe = pow(delta, p[16])
    fel = p[14] * pe
    if p[19] < 0.5:
        fn = fel + p[15] * pe * dd
    elif p[19] < 1.5:
        fn = fel + (p[15] * dd if dd > 0.0 else 0.0)
    else:
        fn = fel + p[15] * dd
    if not (fn > 0.0):
        fn = 0.0
    x = speed / p[18]
    if p[20] < 0.5:
        if x < SMALL_SLIP:
            x2 = x * x
            ratio = 1.0 - x2 / 3.0 + 2.0 * x2 * x2 / 15.0
        else:
            ratio = tanh(x) / x
    else:
        ratio = 1.0 if x <= 1.0 else 1.0 / x
    fts = -p[17] * fn * ratio / p[18]
    for k in range(3):
        F[k] = fn * n[k] + fts * vt[k]
        Q[bi + k] += F[k]
        Q[bj + k] -= F[k]
    _scross(Xi, F, m)
    _sGTn(q + bi + 3, m, 1.0, Q + bi + 3)
    _scross(Xj, F, m)
    _sGTn(q + bj + 3, m, -1.0, Q + bj + 3)
    pw[0] += -(fn - fel) * dd + fts * (vt[0] * vt[0] + vt[1] * vt[1] + vt[2] * vt[2])
    return 0
