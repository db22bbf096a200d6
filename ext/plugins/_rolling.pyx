# cython: language_level=3
"""Compiled kernels of the rolling-contact types (``mbplugins._ext._rolling``),
reaching the core through the compiled plugin tier (``mbcore_plugin.h``, ABI v2,
direct layout) exactly as a third-party kernel does.

The NumPy reference of each type, its packed parameters and the derivation of
every row are in ``mbplugins.rolling.spatial`` (RollingDisc: a thin disc or torus on
a fixed plane; Neimark & Fufaev (1972), Ch. II) and ``mbplugins.rolling.planar``
(PlanarRollingDisc: a disc on a fixed line); these kernels compute the same numbers
from the same ``par``.  Each element has one position-level row (the contact height)
and velocity-level rows (no slip), so the kernels declare ``holonomic`` 0 and write
0 into the velocity rows of phi.  Spatial Jacobian entries are in the
Euler-parameter form ``[Phi_r, 2 Phi_pi' L(p)]`` and gamma is gamma# at
``omega' = 2 L(p) pdot``.  No allocation: fixed-size C arrays only.
"""
from libc.math cimport sin, cos, sqrt
from cpython.pycapsule cimport PyCapsule_New
from mbcore.plugin cimport (mbcore_constraint_kernel, mbcore_constraint_group,
                            mbcore_index, MBCORE_ABI_VERSION, MBCORE_BODY_SPATIAL,
                            MBCORE_BODY_PLANAR, MBCORE_CONSTRAINT_CAPSULE,
                            MBCORE_SCATTER_DIRECT)

include "_euler_rotation.pxi"

#: the wheel's axis normal to the plane below this nu (== mbplugins.rolling.spatial.NU_MIN)
cdef double NU_MIN = 1e-8


cdef inline void _cross(const double* a, const double* b, double* c) noexcept nogil:
    c[0] = a[1] * b[2] - a[2] * b[1]
    c[1] = a[2] * b[0] - a[0] * b[2]
    c[2] = a[0] * b[1] - a[1] * b[0]


cdef inline double _dot(const double* a, const double* b) noexcept nogil:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


cdef inline void _mv(const double* A, const double* x, double* y) noexcept nogil:
    y[0] = A[0] * x[0] + A[1] * x[1] + A[2] * x[2]
    y[1] = A[3] * x[0] + A[4] * x[1] + A[5] * x[2]
    y[2] = A[6] * x[0] + A[7] * x[1] + A[8] * x[2]


cdef inline void _mtv(const double* A, const double* x, double* y) noexcept nogil:
    y[0] = A[0] * x[0] + A[3] * x[1] + A[6] * x[2]
    y[1] = A[1] * x[0] + A[4] * x[1] + A[7] * x[2]
    y[2] = A[2] * x[0] + A[5] * x[1] + A[8] * x[2]


# ================================================================ spatial disc
# par = [s'(3), a'(3), R, rho, k(3), h]
ctypedef struct Disc:
    double p[4]
    double A[9]
    double s[3]               # A s'
    double a[3]               # A a'
    double k[3]
    double sigma, nu, R, rho, h
    double d[3]
    double el[3]
    double et[3]
    double u[3]               # contact point - r
    double w[3]               # centre


cdef inline bint _disc(const double* q, Py_ssize_t o, const double* par, Disc* D) noexcept nogil:
    """Load the geometry; False where the axis is normal to the plane."""
    cdef double e0 = q[o + 3], e1 = q[o + 4], e2 = q[o + 5], e3 = q[o + 6]
    cdef double x[3]
    cdef int i
    D.p[0] = e0; D.p[1] = e1; D.p[2] = e2; D.p[3] = e3
    _ep_A(e0, e1, e2, e3, D.A)
    _mv(D.A, par, D.s)
    _mv(D.A, par + 3, D.a)
    D.R = par[6]
    D.rho = par[7]
    D.k[0] = par[8]; D.k[1] = par[9]; D.k[2] = par[10]
    D.h = par[11]
    D.sigma = _dot(D.a, D.k)
    _cross(D.a, D.k, x)
    D.nu = sqrt(_dot(x, x))                 # |a x k|: accurate for a steep lean
    if not D.nu > NU_MIN:
        return False
    for i in range(3):
        D.d[i] = (D.k[i] - D.sigma * D.a[i]) / D.nu
        D.el[i] = x[i] / D.nu
    _cross(D.k, D.el, D.et)
    for i in range(3):
        D.u[i] = D.s[i] - D.R * D.d[i] - D.rho * D.k[i]
        D.w[i] = q[o + i] + D.s[i]
    return True


cdef mbcore_index _disc_phi(const mbcore_constraint_group* G, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    cdef Disc D
    cdef Py_ssize_t e, r
    cdef const double* par = G.par
    for e in range(G.ne):
        if not _disc(q, G.boff[e], par + e * G.npar, &D):
            return e
        r = G.row[e]
        out[r] = _dot(D.k, D.w) - D.R * D.nu - D.rho - D.h
        out[r + 1] = 0.0
        out[r + 2] = 0.0
    return -1


cdef mbcore_index _disc_jac(const mbcore_constraint_group* G, const double* q, double t,
                            const double* fv, double* J) noexcept nogil:
    cdef Disc D
    cdef Py_ssize_t e, i
    cdef const Py_ssize_t* jp
    cdef const double* E
    cdef double x[3]
    cdef double y[3]
    cdef double e0, e1, e2, e3
    for e in range(G.ne):
        if not _disc(q, G.boff[e], G.par + e * G.npar, &D):
            return e
        e0 = D.p[0]; e1 = D.p[1]; e2 = D.p[2]; e3 = D.p[3]
        for i in range(3):
            if i == 0:
                E = &D.k[0]
            elif i == 1:
                E = &D.el[0]
            else:
                E = &D.et[0]
            jp = G.jpos + e * G.njac + i * 7
            _cross(D.u, E, x)
            _mtv(D.A, x, y)                    # Phi_pi' = (A^T (u x E))^T
            J[jp[0]] = E[0]; J[jp[1]] = E[1]; J[jp[2]] = E[2]
            # 2 Phi_pi' L(p); L columns: (-e1,-e2,-e3), (e0,-e3,e2), (e3,e0,-e1), (-e2,e1,e0)
            J[jp[3]] = 2.0 * (y[0] * (-e1) + y[1] * (-e2) + y[2] * (-e3))
            J[jp[4]] = 2.0 * (y[0] * e0 + y[1] * (-e3) + y[2] * e2)
            J[jp[5]] = 2.0 * (y[0] * e3 + y[1] * e0 + y[2] * (-e1))
            J[jp[6]] = 2.0 * (y[0] * (-e2) + y[1] * e1 + y[2] * e0)
    return -1


cdef mbcore_index _zero_nu(const mbcore_constraint_group* G, const double* q, double t,
                           const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, i
    for e in range(G.ne):
        for i in range(G.m):
            out[G.row[e] + i] = 0.0
    return -1


cdef mbcore_index _disc_gamma(const mbcore_constraint_group* G, const double* q,
                              const double* qd, double t, const double* fv,
                              double* out) noexcept nogil:
    cdef Disc D
    cdef Py_ssize_t e, i, o, r
    cdef double e0, e1, e2, e3, p0, p1, p2, p3, sd, c
    cdef double wl[3]
    cdef double om[3]
    cdef double adot[3]
    cdef double ddot[3]
    cdef double udot[3]
    cdef double wu[3]
    cdef double vc[3]
    cdef double eld[3]
    cdef double etd[3]
    cdef double x[3]
    for e in range(G.ne):
        o = G.boff[e]
        if not _disc(q, o, G.par + e * G.npar, &D):
            return e
        e0 = D.p[0]; e1 = D.p[1]; e2 = D.p[2]; e3 = D.p[3]
        p0 = qd[o + 3]; p1 = qd[o + 4]; p2 = qd[o + 5]; p3 = qd[o + 6]
        # omega' = 2 L(p) pdot; L(p) = [[-e1, e0, e3, -e2], [-e2, -e3, e0, e1], [-e3, e2, -e1, e0]]
        wl[0] = 2.0 * (-e1 * p0 + e0 * p1 + e3 * p2 - e2 * p3)
        wl[1] = 2.0 * (-e2 * p0 - e3 * p1 + e0 * p2 + e1 * p3)
        wl[2] = 2.0 * (-e3 * p0 + e2 * p1 - e1 * p2 + e0 * p3)
        _mv(D.A, wl, om)
        _cross(om, D.a, adot)
        sd = _dot(D.k, adot)
        c = D.sigma * sd / (D.nu * D.nu)
        for i in range(3):       # ddot = ndot / nu + sigma sigmadot d / nu^2
            ddot[i] = (-sd * D.a[i] - D.sigma * adot[i]) / D.nu + c * D.d[i]
        _cross(om, D.s, udot)
        for i in range(3):
            udot[i] = udot[i] - D.R * ddot[i]
        _cross(om, udot, wu)
        _cross(om, D.u, vc)
        for i in range(3):
            vc[i] = vc[i] + qd[o + i]
        _cross(adot, D.k, x)
        for i in range(3):
            eld[i] = x[i] / D.nu + c * D.el[i]
        _cross(D.k, eld, etd)
        r = G.row[e]
        out[r] = -_dot(D.k, wu)
        out[r + 1] = -_dot(eld, vc) - _dot(D.el, wu)
        out[r + 2] = -_dot(etd, vc) - _dot(D.et, wu)
    return -1


# ================================================================ planar disc
# par = [s'(2), R, t(2), h]; n = R_90 t
cdef inline void _pdisc_centre(const double* q, Py_ssize_t o, const double* par,
                               double* sx, double* sy) noexcept nogil:
    """A s' (the centre relative to the body origin)."""
    cdef double co = cos(q[o + 2]), si = sin(q[o + 2])
    sx[0] = co * par[0] - si * par[1]
    sy[0] = si * par[0] + co * par[1]


cdef mbcore_index _pdisc_phi(const mbcore_constraint_group* G, const double* q, double t,
                             const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, o, r
    cdef const double* par
    cdef double sx, sy, nx, ny
    for e in range(G.ne):
        par = G.par + e * G.npar
        o = G.boff[e]
        _pdisc_centre(q, o, par, &sx, &sy)
        nx = -par[4]; ny = par[3]
        r = G.row[e]
        out[r] = nx * (q[o] + sx) + ny * (q[o + 1] + sy) - par[2] - par[5]
        out[r + 1] = 0.0
    return -1


cdef mbcore_index _pdisc_jac(const mbcore_constraint_group* G, const double* q, double t,
                             const double* fv, double* J) noexcept nogil:
    cdef Py_ssize_t e, o
    cdef const Py_ssize_t* jp
    cdef const double* par
    cdef double co, si, ux, uy, nx, ny, tx, ty
    for e in range(G.ne):
        par = G.par + e * G.npar
        o = G.boff[e]
        co = cos(q[o + 2]); si = sin(q[o + 2])
        tx = par[3]; ty = par[4]
        nx = -ty; ny = tx
        ux = co * par[0] - si * par[1] - par[2] * nx
        uy = si * par[0] + co * par[1] - par[2] * ny
        jp = G.jpos + e * G.njac
        # rows E . v_c: [E^T, E . R_90 u], R_90 u = (-uy, ux)
        J[jp[0]] = nx; J[jp[1]] = ny; J[jp[2]] = -nx * uy + ny * ux
        J[jp[3]] = tx; J[jp[4]] = ty; J[jp[5]] = -tx * uy + ty * ux
    return -1


cdef mbcore_index _pdisc_gamma(const mbcore_constraint_group* G, const double* q,
                               const double* qd, double t, const double* fv,
                               double* out) noexcept nogil:
    cdef Py_ssize_t e, o, r
    cdef const double* par
    cdef double sx, sy, w2
    for e in range(G.ne):
        par = G.par + e * G.npar
        o = G.boff[e]
        _pdisc_centre(q, o, par, &sx, &sy)
        w2 = qd[o + 2] * qd[o + 2]
        r = G.row[e]
        out[r] = w2 * (-par[4] * sx + par[3] * sy)
        out[r + 1] = w2 * (par[3] * sx + par[4] * sy)
    return -1


# ================================================================ capsules
cdef mbcore_constraint_kernel _KERNELS[2]


cdef object _capsule(int k, const char* name, int kind, int m, int npar):
    _KERNELS[k].abi_version = MBCORE_ABI_VERSION
    _KERNELS[k].name = name
    _KERNELS[k].body_kind = kind
    _KERNELS[k].n_equations = m
    _KERNELS[k].n_bodies = 1
    _KERNELS[k].n_par = npar
    _KERNELS[k].n_fun = 0
    _KERNELS[k].holonomic = 0          # mixed: the contact height is position level
    _KERNELS[k].scatter = MBCORE_SCATTER_DIRECT
    _KERNELS[k].n_extra = 0
    _KERNELS[k].stateful = 0
    return PyCapsule_New(&_KERNELS[k], MBCORE_CONSTRAINT_CAPSULE, NULL)


_KERNELS[0].phi = _disc_phi
_KERNELS[0].jacobian = _disc_jac
_KERNELS[0].nu = _zero_nu
_KERNELS[0].gamma = _disc_gamma
_KERNELS[0].reason = (b"the wheel's axis is normal to the plane (the disc lies flat): "
                      b"the contact point is undefined")
SPATIAL_DISC = _capsule(0, b"rolling_disc", MBCORE_BODY_SPATIAL, 3, 12)

_KERNELS[1].phi = _pdisc_phi
_KERNELS[1].jacobian = _pdisc_jac
_KERNELS[1].nu = _zero_nu
_KERNELS[1].gamma = _pdisc_gamma
_KERNELS[1].reason = NULL
PLANAR_DISC = _capsule(1, b"planar_rolling_disc", MBCORE_BODY_PLANAR, 2, 6)
