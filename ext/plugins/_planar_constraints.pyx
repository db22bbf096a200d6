# cython: language_level=3
"""Compiled kernels of the built-in planar constraint types
(``mbplugins._ext._planar_constraints``; Nikravesh (1988), Ch. 4, re-derived),
reaching the core through the compiled plugin tier (``mbcore_plugin.h``, ABI v2,
direct layout) exactly as a third-party kernel does: one
``mbcore.constraint_kernel`` capsule per type, named by the type's ``c_kernel``
(``FIXED``, ``ABSOLUTE``, ``RELATIVE``, ``REVOLUTE``, ``TRANSLATIONAL``,
``DISTANCE``, ``REVOLUTE_TRANSLATIONAL``, ``TRANSLATIONAL_002``, ``GEAR``,
``RACK_PINION``, ``POINT_DRIVER``, ``CAM_POINT``, ``CAM_ROLLER``, ``CAM_FLAT``,
``SLOT``).  Each writes phi, the Jacobian entries, nu and gamma of its elements
straight into the core's vectors and Jacobian data (``row``, ``jpos``); the curve
pairs carry an artificial coordinate theta each (``xoff``) and evaluate
body-fixed curves packed as in ``mbplugins.planar.curves``.  NumPy references with
identical packed parameters: the types in ``mbplugins.planar`` (``constraints``,
``links``, ``gears``, ``drivers``, ``cams``); tests keep both equal.

Conventions of the ABI: q is the core's extended coordinate buffer (the ground's
block of zeros after q); Jacobian entries of ground columns go to slots of their
own after the matrix data (``jpos`` says where); a body has 3 columns.
"""
from libc.math cimport sin, cos, fabs, floor, sqrt
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport PyCapsule_New
from mbcore.plugin cimport (mbcore_constraint_kernel, mbcore_constraint_group,
                            mbcore_index, MBCORE_ABI_VERSION, MBCORE_BODY_PLANAR,
                            MBCORE_CONSTRAINT_CAPSULE, MBCORE_SCATTER_DIRECT)

cdef enum:
    K_FIXED = 0
    K_ABSOLUTE = 1
    K_RELATIVE = 2
    K_REVOLUTE = 3
    K_TRANSLATIONAL = 4
    K_DISTANCE = 5
    K_REVTRANS = 6
    K_TRANS002 = 7
    K_GEAR = 8
    K_RACK = 9
    K_POINTDIR = 10
    K_CAM_POINT = 11
    K_CAM_ROLLER = 12
    K_CAM_FLAT = 13
    K_SLOT = 14

# packed curve blocks (keep in sync with mbplugins.planar.curves and .cams)
cdef enum:
    CURVE_SIZE = 2048
    CURVE_HEADER = 5
    CURVE_GEOM = 4        # type geometry floats before the curve block
    C_SERIES = 0
    C_POLAR_SPLINE = 1
    C_XY_SPLINE = 2

#: floats in a packed curve block (mbplugins.planar.curves.CURVE_SIZE)
CURVE_BLOCK = CURVE_SIZE

# One group as the kernels below read it: the ABI's direct-layout group and the
# kernel's own kind (the ABI passes no kernel identity: each capsule's functions
# are trampolines that set it).
ctypedef struct Group:
    int kind
    Py_ssize_t ne, nb, m, npar, nfun, njac, nx, ncol
    const Py_ssize_t* boff
    const Py_ssize_t* xoff
    const Py_ssize_t* row
    const double* par
    const Py_ssize_t* fidx
    const Py_ssize_t* jpos


cdef inline void _group(int kind, const mbcore_constraint_group* A, Group* G) noexcept nogil:
    G.kind = kind
    G.ne = A.ne
    G.nb = A.nb
    G.m = A.m
    G.npar = A.npar
    G.nfun = A.nfun
    G.njac = A.njac
    G.nx = A.nx
    G.ncol = A.nc
    G.boff = <const Py_ssize_t*> A.boff
    G.xoff = <const Py_ssize_t*> A.xoff
    G.row = <const Py_ssize_t*> A.row
    G.par = A.par
    G.fidx = <const Py_ssize_t*> A.fidx
    G.jpos = <const Py_ssize_t*> A.jpos

# --------------------------------------------------------------------------------
# per-type kernels
# --------------------------------------------------------------------------------
cdef inline void _phi(Group* G, const double* q, const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, bi, bj, r, k
    cdef const double* p
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, ux, uy, nx, ny, dx, dy
    for e in range(G.ne):
        r = G.row[e]
        p = G.par + e * G.npar
        bi = G.boff[e * G.nb]
        if G.kind == K_REVOLUTE:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            out[r] = q[bi] + c * p[0] - s * p[1] - q[bj] - cj * p[2] + sj * p[3]
            out[r + 1] = q[bi + 1] + s * p[0] + c * p[1] - q[bj + 1] - sj * p[2] - cj * p[3]
        elif G.kind == K_TRANSLATIONAL:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            ux = c * p[0] - s * p[1]; uy = s * p[0] + c * p[1]
            nx = -uy; ny = ux
            dx = q[bj] + cj * p[4] - sj * p[5] - q[bi] - (c * p[2] - s * p[3])
            dy = q[bj + 1] + sj * p[4] + cj * p[5] - q[bi + 1] - (s * p[2] + c * p[3])
            out[r] = nx * dx + ny * dy
            out[r + 1] = q[bi + 2] - q[bj + 2] - p[6]
        elif G.kind == K_ABSOLUTE:
            k = <Py_ssize_t> p[0]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            if k == 0:
                out[r] = q[bi] + c * p[1] - s * p[2] - fv[3 * G.fidx[e]]
            elif k == 1:
                out[r] = q[bi + 1] + s * p[1] + c * p[2] - fv[3 * G.fidx[e]]
            else:
                out[r] = q[bi + 2] - fv[3 * G.fidx[e]]
        elif G.kind == K_RELATIVE:
            k = <Py_ssize_t> p[0]
            bj = G.boff[e * 2 + 1]
            out[r] = q[bi + k] - q[bj + k] - fv[3 * G.fidx[e]]
        elif G.kind == K_FIXED:
            out[r] = q[bi] - p[0]
            out[r + 1] = q[bi + 1] - p[1]
            out[r + 2] = q[bi + 2] - p[2]
        elif G.kind >= K_CAM_POINT:
            _phi_curve(G, e, q, out)
        else:
            _phi_ext(G, e, q, fv, out)


cdef inline void _jac(Group* G, const double* q, double* J) noexcept nogil:
    # entry order per element: (row, body, coordinate) -> jpos[e*njac + r*nb*3 + b*3 + c]
    cdef Py_ssize_t e, bi, bj, k
    cdef const Py_ssize_t* jp
    cdef const double* p
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, ux, uy, nx, ny
    for e in range(G.ne):
        p = G.par + e * G.npar
        jp = G.jpos + e * G.njac
        bi = G.boff[e * G.nb]
        if G.kind == K_REVOLUTE:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
            # row 0: [1, 0, -Siy | -1, 0, Sjy]
            J[jp[0]] = 1.0; J[jp[1]] = 0.0; J[jp[2]] = -Siy
            J[jp[3]] = -1.0; J[jp[4]] = 0.0; J[jp[5]] = Sjy
            # row 1: [0, 1, Six | 0, -1, -Sjx]
            J[jp[6]] = 0.0; J[jp[7]] = 1.0; J[jp[8]] = Six
            J[jp[9]] = 0.0; J[jp[10]] = -1.0; J[jp[11]] = -Sjx
        elif G.kind == K_TRANSLATIONAL:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            ux = c * p[0] - s * p[1]; uy = s * p[0] + c * p[1]
            nx = -uy; ny = ux
            Sjx = cj * p[4] - sj * p[5]; Sjy = sj * p[4] + cj * p[5]
            J[jp[0]] = -nx; J[jp[1]] = -ny
            J[jp[2]] = -(ux * (q[bj] + Sjx - q[bi]) + uy * (q[bj + 1] + Sjy - q[bi + 1]))
            J[jp[3]] = nx; J[jp[4]] = ny
            J[jp[5]] = ux * Sjx + uy * Sjy
            J[jp[6]] = 0.0; J[jp[7]] = 0.0; J[jp[8]] = 1.0
            J[jp[9]] = 0.0; J[jp[10]] = 0.0; J[jp[11]] = -1.0
        elif G.kind == K_ABSOLUTE:
            k = <Py_ssize_t> p[0]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            if k == 0:
                J[jp[0]] = 1.0; J[jp[1]] = 0.0; J[jp[2]] = -(s * p[1] + c * p[2])
            elif k == 1:
                J[jp[0]] = 0.0; J[jp[1]] = 1.0; J[jp[2]] = c * p[1] - s * p[2]
            else:
                J[jp[0]] = 0.0; J[jp[1]] = 0.0; J[jp[2]] = 1.0
        elif G.kind == K_RELATIVE:
            k = <Py_ssize_t> p[0]
            J[jp[0]] = 0.0; J[jp[1]] = 0.0; J[jp[2]] = 0.0
            J[jp[3]] = 0.0; J[jp[4]] = 0.0; J[jp[5]] = 0.0
            J[jp[k]] = 1.0
            J[jp[3 + k]] = -1.0
        elif G.kind == K_FIXED:
            J[jp[0]] = 1.0; J[jp[1]] = 0.0; J[jp[2]] = 0.0
            J[jp[3]] = 0.0; J[jp[4]] = 1.0; J[jp[5]] = 0.0
            J[jp[6]] = 0.0; J[jp[7]] = 0.0; J[jp[8]] = 1.0
        elif G.kind >= K_CAM_POINT:
            _jac_curve(G, e, q, jp, J)
        else:
            _jac_ext(G, e, q, jp, J)


cdef inline void _nu(Group* G, const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, r, k
    cdef const double* f
    for e in range(G.ne):
        r = G.row[e]
        if G.kind == K_ABSOLUTE or G.kind == K_RELATIVE or G.kind == K_POINTDIR:
            out[r] = fv[3 * G.fidx[e] + 1]
        elif G.kind == K_DISTANCE:     # Phi = d.d - L(t)^2: nu = -Phi_t = 2 L L'
            f = fv + 3 * G.fidx[e]
            out[r] = 2.0 * f[0] * f[1]
        else:   # fixed, revolute, translational and the other scleronomic joints
            for k in range(G.m):
                out[r + k] = 0.0


cdef inline void _gamma(Group* G, const double* q, const double* qd, const double* fv,
                 double* out) noexcept nogil:
    cdef Py_ssize_t e, bi, bj, r, k
    cdef const double* p
    cdef double c, s, cj, sj, Sjx, Sjy, ux, uy, nx, ny, wi, wj, w2
    for e in range(G.ne):
        r = G.row[e]
        p = G.par + e * G.npar
        bi = G.boff[e * G.nb]
        if G.kind == K_REVOLUTE:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            wi = qd[bi + 2] * qd[bi + 2]
            wj = qd[bj + 2] * qd[bj + 2]
            out[r] = wi * (c * p[0] - s * p[1]) - wj * (cj * p[2] - sj * p[3])
            out[r + 1] = wi * (s * p[0] + c * p[1]) - wj * (sj * p[2] + cj * p[3])
        elif G.kind == K_TRANSLATIONAL:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            ux = c * p[0] - s * p[1]; uy = s * p[0] + c * p[1]
            nx = -uy; ny = ux
            Sjx = cj * p[4] - sj * p[5]; Sjy = sj * p[4] + cj * p[5]
            wi = qd[bi + 2]; wj = qd[bj + 2]
            out[r] = (2.0 * wi * (ux * (qd[bj] - qd[bi]) + uy * (qd[bj + 1] - qd[bi + 1]))
                      + wi * wi * (nx * (q[bj] - q[bi]) + ny * (q[bj + 1] - q[bi + 1]))
                      + (wi - wj) * (wi - wj) * (nx * Sjx + ny * Sjy))
            out[r + 1] = 0.0
        elif G.kind == K_ABSOLUTE:
            k = <Py_ssize_t> p[0]
            w2 = qd[bi + 2] * qd[bi + 2]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            if k == 0:
                out[r] = fv[3 * G.fidx[e] + 2] + w2 * (c * p[1] - s * p[2])
            elif k == 1:
                out[r] = fv[3 * G.fidx[e] + 2] + w2 * (s * p[1] + c * p[2])
            else:
                out[r] = fv[3 * G.fidx[e] + 2]
        elif G.kind == K_RELATIVE:
            out[r] = fv[3 * G.fidx[e] + 2]
        elif G.kind == K_FIXED:
            out[r] = 0.0; out[r + 1] = 0.0; out[r + 2] = 0.0
        elif G.kind >= K_CAM_POINT:
            _gamma_curve(G, e, q, qd, out)
        else:
            _gamma_ext(G, e, q, qd, fv, out)


# --------------------------------------------------------------------------------
# C5-C9, D4, D5 (Nikravesh (1988), §4.2.2–4.2.3, §4.2.8).  Packed parameters: see the docstrings of the
# NumPy reference classes in mbplugins.planar.links / gears / drivers.
#   distance             [s'_i(2), s'_j(2)]           f: L(t)
#   revolute_translational [u'(2), s'_i(2), s'_j(2)]  (body i: line, body j: pin)
#   translational_002    [r'_ij(2), r'_ji(2)]
#   gear                 [c_i, c_j, c0]   (c_k = -(c_i + c_j); bodies i, j, carrier)
#   rack_pinion          [s'_C(2), s'_P(2), u'(2), rho_s, c0]
#   point_driver         [u(2), s'(2)]                f: s(t)
# --------------------------------------------------------------------------------
cdef inline void _phi_ext(Group* G, Py_ssize_t e, const double* q, const double* fv,
                          double* out) noexcept nogil:
    cdef Py_ssize_t r = G.row[e]
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * G.nb]
    cdef Py_ssize_t bj, bk
    cdef double c, s, cj, sj, dx, dy, L, ux, uy, aix, aiy, ajx, ajy, ex, ey
    cdef double SCx, SCy, SPx, SPy, Sx, Sy
    c = cos(q[bi + 2]); s = sin(q[bi + 2])
    if G.kind == K_POINTDIR:
        Sx = c * p[2] - s * p[3]; Sy = s * p[2] + c * p[3]
        out[r] = p[0] * (q[bi] + Sx) + p[1] * (q[bi + 1] + Sy) - fv[3 * G.fidx[e]]
        return
    bj = G.boff[e * G.nb + 1]
    if G.kind == K_GEAR:
        bk = G.boff[e * G.nb + 2]
        out[r] = p[0] * q[bi + 2] + p[1] * q[bj + 2] - (p[0] + p[1]) * q[bk + 2] + p[2]
        return
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    if G.kind == K_DISTANCE:
        dx = q[bi] + (c * p[0] - s * p[1]) - q[bj] - (cj * p[2] - sj * p[3])
        dy = q[bi + 1] + (s * p[0] + c * p[1]) - q[bj + 1] - (sj * p[2] + cj * p[3])
        L = fv[3 * G.fidx[e]]
        out[r] = dx * dx + dy * dy - L * L
    elif G.kind == K_REVTRANS:
        ux = c * p[0] - s * p[1]; uy = s * p[0] + c * p[1]
        dx = q[bj] + (cj * p[4] - sj * p[5]) - q[bi] - (c * p[2] - s * p[3])
        dy = q[bj + 1] + (sj * p[4] + cj * p[5]) - q[bi + 1] - (s * p[2] + c * p[3])
        out[r] = -uy * dx + ux * dy
    elif G.kind == K_TRANS002:
        aix = c * p[0] - s * p[1]; aiy = s * p[0] + c * p[1]
        ajx = cj * p[2] - sj * p[3]; ajy = sj * p[2] + cj * p[3]
        ex = q[bi] - q[bj]; ey = q[bi + 1] - q[bj + 1]
        out[r] = ((aix + ajx) * ex + (aiy + ajy) * ey
                  + ((p[0] * p[0] + p[1] * p[1]) - (p[2] * p[2] + p[3] * p[3])))
        out[r + 1] = aix * ajy - aiy * ajx
    elif G.kind == K_RACK:
        SCx = c * p[0] - s * p[1]; SCy = s * p[0] + c * p[1]
        SPx = cj * p[2] - sj * p[3]; SPy = sj * p[2] + cj * p[3]
        ux = cj * p[4] - sj * p[5]; uy = sj * p[4] + cj * p[5]
        ex = q[bi] + SCx - q[bj] - SPx; ey = q[bi + 1] + SCy - q[bj + 1] - SPy
        out[r] = ux * ex + uy * ey + p[6] * (q[bi + 2] - q[bj + 2]) - p[7]


cdef inline void _jac_ext(Group* G, Py_ssize_t e, const double* q, const Py_ssize_t* jp,
                          double* J) noexcept nogil:
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * G.nb]
    cdef Py_ssize_t bj
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, dx, dy, ux, uy, aix, aiy, ajx, ajy
    cdef double ex, ey, dot
    c = cos(q[bi + 2]); s = sin(q[bi + 2])
    if G.kind == K_POINTDIR:
        Six = c * p[2] - s * p[3]; Siy = s * p[2] + c * p[3]
        J[jp[0]] = p[0]; J[jp[1]] = p[1]; J[jp[2]] = -p[0] * Siy + p[1] * Six
        return
    if G.kind == K_GEAR:       # row 0: [0, 0, c_i | 0, 0, c_j | 0, 0, -(c_i + c_j)]
        J[jp[0]] = 0.0; J[jp[1]] = 0.0; J[jp[2]] = p[0]
        J[jp[3]] = 0.0; J[jp[4]] = 0.0; J[jp[5]] = p[1]
        J[jp[6]] = 0.0; J[jp[7]] = 0.0; J[jp[8]] = -(p[0] + p[1])
        return
    bj = G.boff[e * G.nb + 1]
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    if G.kind == K_DISTANCE:   # [2 d | 2 d.R S_i | -2 d | -2 d.R S_j]
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
        Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
        dx = q[bi] + Six - q[bj] - Sjx
        dy = q[bi + 1] + Siy - q[bj + 1] - Sjy
        J[jp[0]] = 2.0 * dx; J[jp[1]] = 2.0 * dy
        J[jp[2]] = 2.0 * (-dx * Siy + dy * Six)
        J[jp[3]] = -2.0 * dx; J[jp[4]] = -2.0 * dy
        J[jp[5]] = -2.0 * (-dx * Sjy + dy * Sjx)
    elif G.kind == K_REVTRANS:  # as row 0 of the translational joint
        ux = c * p[0] - s * p[1]; uy = s * p[0] + c * p[1]
        Sjx = cj * p[4] - sj * p[5]; Sjy = sj * p[4] + cj * p[5]
        J[jp[0]] = uy; J[jp[1]] = -ux
        J[jp[2]] = -(ux * (q[bj] + Sjx - q[bi]) + uy * (q[bj + 1] + Sjy - q[bi + 1]))
        J[jp[3]] = -uy; J[jp[4]] = ux
        J[jp[5]] = ux * Sjx + uy * Sjy
    elif G.kind == K_TRANS002:
        aix = c * p[0] - s * p[1]; aiy = s * p[0] + c * p[1]
        ajx = cj * p[2] - sj * p[3]; ajy = sj * p[2] + cj * p[3]
        ex = q[bi] - q[bj]; ey = q[bi + 1] - q[bj + 1]
        J[jp[0]] = aix + ajx; J[jp[1]] = aiy + ajy
        J[jp[2]] = -aiy * ex + aix * ey
        J[jp[3]] = -(aix + ajx); J[jp[4]] = -(aiy + ajy)
        J[jp[5]] = -ajy * ex + ajx * ey
        dot = aix * ajx + aiy * ajy
        J[jp[6]] = 0.0; J[jp[7]] = 0.0; J[jp[8]] = -dot
        J[jp[9]] = 0.0; J[jp[10]] = 0.0; J[jp[11]] = dot
    elif G.kind == K_RACK:
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]          # S_C
        Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]      # S_P
        ux = cj * p[4] - sj * p[5]; uy = sj * p[4] + cj * p[5]
        ex = q[bi] + Six - q[bj] - Sjx; ey = q[bi + 1] + Siy - q[bj + 1] - Sjy
        J[jp[0]] = ux; J[jp[1]] = uy
        J[jp[2]] = (-ux * Siy + uy * Six) + p[6]
        J[jp[3]] = -ux; J[jp[4]] = -uy
        J[jp[5]] = (-uy * ex + ux * ey) - (-ux * Sjy + uy * Sjx) - p[6]


cdef inline void _gamma_ext(Group* G, Py_ssize_t e, const double* q, const double* qd,
                            const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t r = G.row[e]
    cdef const double* p = G.par + e * G.npar
    cdef const double* f
    cdef Py_ssize_t bi = G.boff[e * G.nb]
    cdef Py_ssize_t bj
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, dx, dy, ddx, ddy, wi, wj, ux, uy
    cdef double aix, aiy, ajx, ajy, ex, ey, edx, edy
    wi = qd[bi + 2]
    c = cos(q[bi + 2]); s = sin(q[bi + 2])
    if G.kind == K_POINTDIR:   # s'' + w^2 u.S
        Six = c * p[2] - s * p[3]; Siy = s * p[2] + c * p[3]
        out[r] = fv[3 * G.fidx[e] + 2] + wi * wi * (p[0] * Six + p[1] * Siy)
        return
    if G.kind == K_GEAR:
        out[r] = 0.0
        return
    bj = G.boff[e * G.nb + 1]
    wj = qd[bj + 2]
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    if G.kind == K_DISTANCE:
        # -2 dd.dd + 2 d.(w_i^2 S_i - w_j^2 S_j) + 2 (L'^2 + L L'')
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
        Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
        dx = q[bi] + Six - q[bj] - Sjx
        dy = q[bi + 1] + Siy - q[bj + 1] - Sjy
        ddx = qd[bi] - wi * Siy - qd[bj] + wj * Sjy
        ddy = qd[bi + 1] + wi * Six - qd[bj + 1] - wj * Sjx
        f = fv + 3 * G.fidx[e]
        out[r] = (-2.0 * (ddx * ddx + ddy * ddy)
                  + 2.0 * (dx * (wi * wi * Six - wj * wj * Sjx)
                           + dy * (wi * wi * Siy - wj * wj * Sjy))
                  + 2.0 * (f[1] * f[1] + f[0] * f[2]))
    elif G.kind == K_REVTRANS:  # exact gamma of the translational row 0
        ux = c * p[0] - s * p[1]; uy = s * p[0] + c * p[1]
        Sjx = cj * p[4] - sj * p[5]; Sjy = sj * p[4] + cj * p[5]
        out[r] = (2.0 * wi * (ux * (qd[bj] - qd[bi]) + uy * (qd[bj + 1] - qd[bi + 1]))
                  + wi * wi * (-uy * (q[bj] - q[bi]) + ux * (q[bj + 1] - q[bi + 1]))
                  + (wi - wj) * (wi - wj) * (-uy * Sjx + ux * Sjy))
    elif G.kind == K_TRANS002:
        aix = c * p[0] - s * p[1]; aiy = s * p[0] + c * p[1]
        ajx = cj * p[2] - sj * p[3]; ajy = sj * p[2] + cj * p[3]
        ex = q[bi] - q[bj]; ey = q[bi + 1] - q[bj + 1]
        edx = qd[bi] - qd[bj]; edy = qd[bi + 1] - qd[bj + 1]
        out[r] = ((wi * wi * aix + wj * wj * ajx) * ex + (wi * wi * aiy + wj * wj * ajy) * ey
                  - 2.0 * ((-wi * aiy - wj * ajy) * edx + (wi * aix + wj * ajx) * edy))
        out[r + 1] = (aix * ajy - aiy * ajx) * (wi - wj) * (wi - wj)
    elif G.kind == K_RACK:
        Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]          # S_C
        Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]      # S_P
        ux = cj * p[4] - sj * p[5]; uy = sj * p[4] + cj * p[5]
        ex = q[bi] + Six - q[bj] - Sjx; ey = q[bi + 1] + Siy - q[bj + 1] - Sjy
        edx = qd[bi] - wi * Siy - qd[bj] + wj * Sjy
        edy = qd[bi + 1] + wi * Six - qd[bj + 1] - wj * Sjx
        out[r] = (wj * wj * (ux * ex + uy * ey) - 2.0 * wj * (-uy * edx + ux * edy)
                  + ux * (wi * wi * Six - wj * wj * Sjx) + uy * (wi * wi * Siy - wj * wj * Sjy))


# --------------------------------------------------------------------------------
# C10-C13: curve pairs with an artificial coordinate theta (Nikravesh (1988),
# §4.2.4–4.2.6).  par = [geometry(4), curve block(CURVE_SIZE)], see the docstrings of
# mbplugins.planar.cams (types) and mbplugins.planar.curves (curve block); the
# operations mirror the NumPy reference (curves.evaluate / _series_jet /
# _spline_jet) so that both agree to rounding.
#   cam_point   [s'_jP(2), 0, 0]        curve on body i, follower point on j
#   cam_roller  [s'_jQ(2), rho, 0]      curve on body i, roller centre on j
#   cam_flat    [s'_jQ(2), n'(2)]       curve on body i, face on j (n' unit)
#   slot        [s'_iP(2), 0, 0]        pin on body i, curve on body j
# --------------------------------------------------------------------------------
cdef inline void _series_jet(const double* cv, double th, double* s) noexcept nogil:
    # s[0..3] = value and 1st-3rd derivatives of a polar series block
    cdef Py_ssize_t npoly = <Py_ssize_t> cv[1]
    cdef Py_ssize_t nh = <Py_ssize_t> cv[2]
    cdef const double* d = cv + CURVE_HEADER
    cdef Py_ssize_t k
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, a, b, ck, sk, kf
    k = npoly - 1
    while k >= 0:        # Horner with derivatives (s2, s3 accumulate s''/2, s'''/6)
        s3 = s3 * th + s2
        s2 = s2 * th + s1
        s1 = s1 * th + s0
        s0 = s0 * th + d[k]
        k -= 1
    s2 = 2.0 * s2
    s3 = 6.0 * s3
    for k in range(1, nh + 1):
        a = d[npoly + k - 1]
        b = d[npoly + nh + k - 1]
        ck = cos(k * th)
        sk = sin(k * th)
        kf = <double> k
        s0 = s0 + (a * ck + b * sk)
        s1 = s1 + kf * (b * ck - a * sk)
        s2 = s2 - kf * kf * (a * ck + b * sk)
        s3 = s3 + kf * kf * kf * (a * sk - b * ck)
    s[0] = s0; s[1] = s1; s[2] = s2; s[3] = s3


cdef inline void _spline_jet(const double* cv, double th, int which, double* y) noexcept nogil:
    # y[0..3] = value and derivatives of spline `which` (0: s or x, 1: y)
    cdef Py_ssize_t n = <Py_ssize_t> cv[1]
    cdef double per = cv[2]
    cdef const double* x = cv + CURVE_HEADER
    cdef double u = th, dd, dx, a3, a2, a1, a0
    cdef Py_ssize_t lo = 0, hi = n, mid
    cdef const double* c
    if per > 0.0:
        dd = th - x[0]
        u = x[0] + (dd - per * floor(dd / per))
    while hi - lo > 1:       # largest i <= n - 1 with x[i] <= u (0 below x[0])
        mid = (lo + hi) // 2
        if x[mid] <= u:
            lo = mid
        else:
            hi = mid
    dx = u - x[lo]
    c = cv + CURVE_HEADER + n + 1 + 4 * n * which + 4 * lo
    a3 = c[0]; a2 = c[1]; a1 = c[2]; a0 = c[3]
    y[0] = ((a3 * dx + a2) * dx + a1) * dx + a0
    y[1] = (3.0 * a3 * dx + 2.0 * a2) * dx + a1
    y[2] = 6.0 * a3 * dx + 2.0 * a2
    y[3] = 6.0 * a3


cdef inline void _curve_eval(const double* cv, double th, double* o) noexcept nogil:
    # o[0..7] = c', c'_th, c'_thth, c'_ththth (body coordinates, x then y)
    cdef double s[4]
    cdef double yy[4]
    cdef double co, si
    cdef int kind = <int> cv[0]
    if kind == C_XY_SPLINE:
        _spline_jet(cv, th, 0, s)
        _spline_jet(cv, th, 1, yy)
        o[0] = s[0] + cv[3]; o[1] = yy[0] + cv[4]
        o[2] = s[1]; o[3] = yy[1]
        o[4] = s[2]; o[5] = yy[2]
        o[6] = s[3]; o[7] = yy[3]
        return
    if kind == C_SERIES:
        _series_jet(cv, th, s)
    else:
        _spline_jet(cv, th, 0, s)
    co = cos(th); si = sin(th)
    o[0] = cv[3] + s[0] * co
    o[1] = cv[4] + s[0] * si
    o[2] = s[1] * co + s[0] * (-si)
    o[3] = s[1] * si + s[0] * co
    o[4] = (s[2] - s[0]) * co + (2.0 * s[1]) * (-si)
    o[5] = (s[2] - s[0]) * si + (2.0 * s[1]) * co
    o[6] = (s[3] - 3.0 * s[1]) * co + (3.0 * s[2] - s[0]) * (-si)
    o[7] = (s[3] - 3.0 * s[1]) * si + (3.0 * s[2] - s[0]) * co


cdef inline void _curve_global(const double* p, double th, double phi, double* v) noexcept nogil:
    # v[0..7] = c, g, h, kk: the body-frame curve quantities rotated by A(phi)
    cdef double o[8]
    cdef double c = cos(phi), s = sin(phi)
    cdef int k
    _curve_eval(p + CURVE_GEOM, th, o)
    for k in range(4):
        v[2 * k] = c * o[2 * k] - s * o[2 * k + 1]
        v[2 * k + 1] = s * o[2 * k] + c * o[2 * k + 1]


cdef inline void _phi_curve(Group* G, Py_ssize_t e, const double* q, double* out) noexcept nogil:
    cdef Py_ssize_t r = G.row[e]
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * 2], bj = G.boff[e * 2 + 1]
    cdef double th = q[G.xoff[e * G.nx]]
    cdef double v[8]
    cdef double ci, si, cj, sj, Sx, Sy, nx, ny, dx, dy
    ci = cos(q[bi + 2]); si = sin(q[bi + 2])
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    if G.kind == K_SLOT:
        _curve_global(p, th, q[bj + 2], v)
        Sx = ci * p[0] - si * p[1]; Sy = si * p[0] + ci * p[1]
        out[r] = q[bi] + Sx - q[bj] - v[0]
        out[r + 1] = q[bi + 1] + Sy - q[bj + 1] - v[1]
        return
    _curve_global(p, th, q[bi + 2], v)
    Sx = cj * p[0] - sj * p[1]; Sy = sj * p[0] + cj * p[1]
    if G.kind == K_CAM_POINT:
        out[r] = q[bi] + v[0] - q[bj] - Sx
        out[r + 1] = q[bi + 1] + v[1] - q[bj + 1] - Sy
    elif G.kind == K_CAM_ROLLER:
        dx = q[bj] + Sx - q[bi] - v[0]
        dy = q[bj + 1] + Sy - q[bi + 1] - v[1]
        out[r] = v[2] * dx + v[3] * dy
        out[r + 1] = (dx * dx + dy * dy) - p[2] * p[2]
    elif G.kind == K_CAM_FLAT:
        nx = cj * p[2] - sj * p[3]; ny = sj * p[2] + cj * p[3]
        dx = q[bi] + v[0] - q[bj] - Sx
        dy = q[bi + 1] + v[1] - q[bj + 1] - Sy
        out[r] = v[2] * nx + v[3] * ny
        out[r + 1] = dx * nx + dy * ny


cdef inline void _jac_curve(Group* G, Py_ssize_t e, const double* q, const Py_ssize_t* jp,
                            double* J) noexcept nogil:
    # body entries jp[0..11] = (row, body, coord); theta entries jp[12] (row 0), jp[13]
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * 2], bj = G.boff[e * 2 + 1]
    cdef double th = q[G.xoff[e * G.nx]]
    cdef double v[8]
    cdef double ci, si, cj, sj, Sx, Sy, nx, ny, dx, dy, cx, cy, gx, gy, hx, hy
    ci = cos(q[bi + 2]); si = sin(q[bi + 2])
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    if G.kind == K_SLOT:     # [I2, R S_i | -I2, -R c | -g]
        _curve_global(p, th, q[bj + 2], v)
        Sx = ci * p[0] - si * p[1]; Sy = si * p[0] + ci * p[1]
        J[jp[0]] = 1.0; J[jp[1]] = 0.0; J[jp[2]] = -Sy
        J[jp[3]] = -1.0; J[jp[4]] = 0.0; J[jp[5]] = v[1]
        J[jp[6]] = 0.0; J[jp[7]] = 1.0; J[jp[8]] = Sx
        J[jp[9]] = 0.0; J[jp[10]] = -1.0; J[jp[11]] = -v[0]
        J[jp[12]] = -v[2]; J[jp[13]] = -v[3]
        return
    _curve_global(p, th, q[bi + 2], v)
    cx = v[0]; cy = v[1]; gx = v[2]; gy = v[3]; hx = v[4]; hy = v[5]
    Sx = cj * p[0] - sj * p[1]; Sy = sj * p[0] + cj * p[1]
    if G.kind == K_CAM_POINT:    # [I2, R c | -I2, -R S_j | g]
        J[jp[0]] = 1.0; J[jp[1]] = 0.0; J[jp[2]] = -cy
        J[jp[3]] = -1.0; J[jp[4]] = 0.0; J[jp[5]] = Sy
        J[jp[6]] = 0.0; J[jp[7]] = 1.0; J[jp[8]] = cx
        J[jp[9]] = 0.0; J[jp[10]] = -1.0; J[jp[11]] = -Sx
        J[jp[12]] = gx; J[jp[13]] = gy
    elif G.kind == K_CAM_ROLLER:
        dx = q[bj] + Sx - q[bi] - cx
        dy = q[bj + 1] + Sy - q[bi + 1] - cy
        J[jp[0]] = -gx; J[jp[1]] = -gy
        J[jp[2]] = (-gy * dx + gx * dy) - (gx * (-cy) + gy * cx)
        J[jp[3]] = gx; J[jp[4]] = gy
        J[jp[5]] = gx * (-Sy) + gy * Sx
        J[jp[6]] = -2.0 * dx; J[jp[7]] = -2.0 * dy
        J[jp[8]] = -2.0 * (dx * (-cy) + dy * cx)
        J[jp[9]] = 2.0 * dx; J[jp[10]] = 2.0 * dy
        J[jp[11]] = 2.0 * (dx * (-Sy) + dy * Sx)
        J[jp[12]] = (hx * dx + hy * dy) - (gx * gx + gy * gy)
        J[jp[13]] = -2.0 * (dx * gx + dy * gy)
    elif G.kind == K_CAM_FLAT:
        nx = cj * p[2] - sj * p[3]; ny = sj * p[2] + cj * p[3]
        dx = q[bi] + cx - q[bj] - Sx
        dy = q[bi + 1] + cy - q[bj + 1] - Sy
        J[jp[0]] = 0.0; J[jp[1]] = 0.0
        J[jp[2]] = -gy * nx + gx * ny
        J[jp[3]] = 0.0; J[jp[4]] = 0.0
        J[jp[5]] = gx * (-ny) + gy * nx
        J[jp[6]] = nx; J[jp[7]] = ny
        J[jp[8]] = nx * (-cy) + ny * cx
        J[jp[9]] = -nx; J[jp[10]] = -ny
        J[jp[11]] = -(nx * (-Sy) + ny * Sx) + (dx * (-ny) + dy * nx)
        J[jp[12]] = hx * nx + hy * ny
        J[jp[13]] = nx * gx + ny * gy


cdef inline void _gamma_curve(Group* G, Py_ssize_t e, const double* q, const double* qd,
                              double* out) noexcept nogil:
    cdef Py_ssize_t r = G.row[e]
    cdef const double* p = G.par + e * G.npar
    cdef Py_ssize_t bi = G.boff[e * 2], bj = G.boff[e * 2 + 1]
    cdef Py_ssize_t xo = G.xoff[e * G.nx]
    cdef double th = q[xo], thd = qd[xo]
    cdef double v[8]
    cdef double ci, si, cj, sj, Sx, Sy, nx, ny, dx, dy, cx, cy, gx, gy, hx, hy, kx, ky
    cdef double wi = qd[bi + 2], wj = qd[bj + 2]
    cdef double ddx, ddy, gdx, gdy, d2x, d2y, g2x, g2y, ndx, ndy, w2
    ci = cos(q[bi + 2]); si = sin(q[bi + 2])
    cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
    if G.kind == K_SLOT:
        # w_i^2 S_i - w_j^2 c + 2 w_j thd R g + thd^2 h
        _curve_global(p, th, q[bj + 2], v)
        Sx = ci * p[0] - si * p[1]; Sy = si * p[0] + ci * p[1]
        out[r] = wi * wi * Sx - wj * wj * v[0] + 2.0 * wj * thd * (-v[3]) + thd * thd * v[4]
        out[r + 1] = wi * wi * Sy - wj * wj * v[1] + 2.0 * wj * thd * v[2] + thd * thd * v[5]
        return
    _curve_global(p, th, q[bi + 2], v)
    cx = v[0]; cy = v[1]; gx = v[2]; gy = v[3]; hx = v[4]; hy = v[5]; kx = v[6]; ky = v[7]
    Sx = cj * p[0] - sj * p[1]; Sy = sj * p[0] + cj * p[1]
    if G.kind == K_CAM_POINT:
        # w_i^2 c - 2 w_i thd R g - thd^2 h - w_j^2 S_j
        out[r] = wi * wi * cx - 2.0 * wi * thd * (-gy) - thd * thd * hx - wj * wj * Sx
        out[r + 1] = wi * wi * cy - 2.0 * wi * thd * gx - thd * thd * hy - wj * wj * Sy
        return
    # gdot = w_i R g + thd h;  g2q = -w_i^2 g + 2 w_i thd R h + thd^2 kk
    gdx = wi * (-gy) + thd * hx
    gdy = wi * gx + thd * hy
    g2x = -wi * wi * gx + 2.0 * wi * thd * (-hy) + thd * thd * kx
    g2y = -wi * wi * gy + 2.0 * wi * thd * hx + thd * thd * ky
    if G.kind == K_CAM_ROLLER:
        dx = q[bj] + Sx - q[bi] - cx
        dy = q[bj + 1] + Sy - q[bi + 1] - cy
        ddx = qd[bj] + wj * (-Sy) - qd[bi] - wi * (-cy) - thd * gx
        ddy = qd[bj + 1] + wj * Sx - qd[bi + 1] - wi * cx - thd * gy
        d2x = -wj * wj * Sx + wi * wi * cx - 2.0 * wi * thd * (-gy) - thd * thd * hx
        d2y = -wj * wj * Sy + wi * wi * cy - 2.0 * wi * thd * gx - thd * thd * hy
        out[r] = -((g2x * dx + g2y * dy) + 2.0 * (gdx * ddx + gdy * ddy)
                   + (gx * d2x + gy * d2y))
        out[r + 1] = -2.0 * (ddx * ddx + ddy * ddy) - 2.0 * (dx * d2x + dy * d2y)
    elif G.kind == K_CAM_FLAT:
        nx = cj * p[2] - sj * p[3]; ny = sj * p[2] + cj * p[3]
        dx = q[bi] + cx - q[bj] - Sx
        dy = q[bi + 1] + cy - q[bj + 1] - Sy
        ddx = qd[bi] + wi * (-cy) + thd * gx - qd[bj] - wj * (-Sy)
        ddy = qd[bi + 1] + wi * cx + thd * gy - qd[bj + 1] - wj * Sx
        ndx = wj * (-ny); ndy = wj * nx
        d2x = -wi * wi * cx + 2.0 * wi * thd * (-gy) + thd * thd * hx + wj * wj * Sx
        d2y = -wi * wi * cy + 2.0 * wi * thd * gx + thd * thd * hy + wj * wj * Sy
        w2 = wj * wj
        out[r] = -((g2x * nx + g2y * ny) + 2.0 * (gdx * ndx + gdy * ndy)
                   - w2 * (gx * nx + gy * ny))
        out[r + 1] = -((d2x * nx + d2y * ny) + 2.0 * (ddx * ndx + ddy * ndy)
                       - w2 * (dx * nx + dy * ny))


# --------------------------------------------------------------------------------
# the capsules: one trampoline per type and stage
# --------------------------------------------------------------------------------

cdef mbcore_index _fixed_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_FIXED, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _fixed_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_FIXED, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _fixed_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_FIXED, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _fixed_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_FIXED, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _absolute_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_ABSOLUTE, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _absolute_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_ABSOLUTE, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _absolute_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_ABSOLUTE, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _absolute_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_ABSOLUTE, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _relative_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_RELATIVE, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _relative_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_RELATIVE, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _relative_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_RELATIVE, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _relative_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_RELATIVE, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _revolute_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_REVOLUTE, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _revolute_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_REVOLUTE, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _revolute_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_REVOLUTE, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _revolute_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_REVOLUTE, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _translational_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_TRANSLATIONAL, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _translational_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_TRANSLATIONAL, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _translational_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_TRANSLATIONAL, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _translational_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_TRANSLATIONAL, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _distance_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_DISTANCE, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _distance_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_DISTANCE, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _distance_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_DISTANCE, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _distance_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_DISTANCE, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _revolute_translational_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_REVTRANS, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _revolute_translational_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_REVTRANS, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _revolute_translational_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_REVTRANS, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _revolute_translational_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_REVTRANS, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _translational_002_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_TRANS002, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _translational_002_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_TRANS002, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _translational_002_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_TRANS002, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _translational_002_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_TRANS002, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _gear_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_GEAR, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _gear_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_GEAR, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _gear_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_GEAR, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _gear_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_GEAR, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _rack_pinion_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_RACK, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _rack_pinion_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_RACK, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _rack_pinion_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_RACK, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _rack_pinion_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_RACK, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _point_driver_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_POINTDIR, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _point_driver_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_POINTDIR, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _point_driver_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_POINTDIR, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _point_driver_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_POINTDIR, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _cam_point_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_POINT, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _cam_point_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_CAM_POINT, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _cam_point_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_POINT, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _cam_point_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_POINT, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _cam_roller_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_ROLLER, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _cam_roller_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_CAM_ROLLER, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _cam_roller_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_ROLLER, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _cam_roller_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_ROLLER, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _cam_flat_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_FLAT, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _cam_flat_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_CAM_FLAT, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _cam_flat_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_FLAT, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _cam_flat_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_CAM_FLAT, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_index _slot_phi(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_SLOT, A, &G)
    _phi(&G, q, fv, out)
    return -1


cdef mbcore_index _slot_jac(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* J) noexcept nogil:
    cdef Group G
    _group(K_SLOT, A, &G)
    _jac(&G, q, J)
    return -1


cdef mbcore_index _slot_nu(const mbcore_constraint_group* A, const double* q, double t,
        const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_SLOT, A, &G)
    _nu(&G, fv, out)
    return -1


cdef mbcore_index _slot_gamma(const mbcore_constraint_group* A, const double* q,
        const double* qd, double t, const double* fv, double* out) noexcept nogil:
    cdef Group G
    _group(K_SLOT, A, &G)
    _gamma(&G, q, qd, fv, out)
    return -1


cdef mbcore_constraint_kernel _KERNELS[15]


cdef object _capsule(int k, const char* name, int m, int nb, int npar, int nfun, int nx):
    _KERNELS[k].abi_version = MBCORE_ABI_VERSION
    _KERNELS[k].name = name
    _KERNELS[k].body_kind = MBCORE_BODY_PLANAR
    _KERNELS[k].n_equations = m
    _KERNELS[k].n_bodies = nb
    _KERNELS[k].n_par = npar
    _KERNELS[k].n_fun = nfun
    _KERNELS[k].holonomic = 1
    _KERNELS[k].reason = NULL
    _KERNELS[k].scatter = MBCORE_SCATTER_DIRECT
    _KERNELS[k].n_extra = nx
    _KERNELS[k].stateful = 0
    return PyCapsule_New(&_KERNELS[k], MBCORE_CONSTRAINT_CAPSULE, NULL)


_KERNELS[0].phi = _fixed_phi
_KERNELS[0].jacobian = _fixed_jac
_KERNELS[0].nu = _fixed_nu
_KERNELS[0].gamma = _fixed_gamma
FIXED = _capsule(0, b"fixed", 3, 1, 3, 0, 0)

_KERNELS[1].phi = _absolute_phi
_KERNELS[1].jacobian = _absolute_jac
_KERNELS[1].nu = _absolute_nu
_KERNELS[1].gamma = _absolute_gamma
ABSOLUTE = _capsule(1, b"absolute", 1, 1, 3, 1, 0)

_KERNELS[2].phi = _relative_phi
_KERNELS[2].jacobian = _relative_jac
_KERNELS[2].nu = _relative_nu
_KERNELS[2].gamma = _relative_gamma
RELATIVE = _capsule(2, b"relative", 1, 2, 1, 1, 0)

_KERNELS[3].phi = _revolute_phi
_KERNELS[3].jacobian = _revolute_jac
_KERNELS[3].nu = _revolute_nu
_KERNELS[3].gamma = _revolute_gamma
REVOLUTE = _capsule(3, b"revolute", 2, 2, 4, 0, 0)

_KERNELS[4].phi = _translational_phi
_KERNELS[4].jacobian = _translational_jac
_KERNELS[4].nu = _translational_nu
_KERNELS[4].gamma = _translational_gamma
TRANSLATIONAL = _capsule(4, b"translational", 2, 2, 7, 0, 0)

_KERNELS[5].phi = _distance_phi
_KERNELS[5].jacobian = _distance_jac
_KERNELS[5].nu = _distance_nu
_KERNELS[5].gamma = _distance_gamma
DISTANCE = _capsule(5, b"distance", 1, 2, 4, 1, 0)

_KERNELS[6].phi = _revolute_translational_phi
_KERNELS[6].jacobian = _revolute_translational_jac
_KERNELS[6].nu = _revolute_translational_nu
_KERNELS[6].gamma = _revolute_translational_gamma
REVOLUTE_TRANSLATIONAL = _capsule(6, b"revolute_translational", 1, 2, 6, 0, 0)

_KERNELS[7].phi = _translational_002_phi
_KERNELS[7].jacobian = _translational_002_jac
_KERNELS[7].nu = _translational_002_nu
_KERNELS[7].gamma = _translational_002_gamma
TRANSLATIONAL_002 = _capsule(7, b"translational_002", 2, 2, 4, 0, 0)

_KERNELS[8].phi = _gear_phi
_KERNELS[8].jacobian = _gear_jac
_KERNELS[8].nu = _gear_nu
_KERNELS[8].gamma = _gear_gamma
GEAR = _capsule(8, b"gear", 1, 3, 3, 0, 0)

_KERNELS[9].phi = _rack_pinion_phi
_KERNELS[9].jacobian = _rack_pinion_jac
_KERNELS[9].nu = _rack_pinion_nu
_KERNELS[9].gamma = _rack_pinion_gamma
RACK_PINION = _capsule(9, b"rack_pinion", 1, 2, 8, 0, 0)

_KERNELS[10].phi = _point_driver_phi
_KERNELS[10].jacobian = _point_driver_jac
_KERNELS[10].nu = _point_driver_nu
_KERNELS[10].gamma = _point_driver_gamma
POINT_DRIVER = _capsule(10, b"point_driver", 1, 1, 4, 1, 0)

_KERNELS[11].phi = _cam_point_phi
_KERNELS[11].jacobian = _cam_point_jac
_KERNELS[11].nu = _cam_point_nu
_KERNELS[11].gamma = _cam_point_gamma
CAM_POINT = _capsule(11, b"cam_point", 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1)

_KERNELS[12].phi = _cam_roller_phi
_KERNELS[12].jacobian = _cam_roller_jac
_KERNELS[12].nu = _cam_roller_nu
_KERNELS[12].gamma = _cam_roller_gamma
CAM_ROLLER = _capsule(12, b"cam_roller", 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1)

_KERNELS[13].phi = _cam_flat_phi
_KERNELS[13].jacobian = _cam_flat_jac
_KERNELS[13].nu = _cam_flat_nu
_KERNELS[13].gamma = _cam_flat_gamma
CAM_FLAT = _capsule(13, b"cam_flat", 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1)

_KERNELS[14].phi = _slot_phi
_KERNELS[14].jacobian = _slot_jac
_KERNELS[14].nu = _slot_nu
_KERNELS[14].gamma = _slot_gamma
SLOT = _capsule(14, b"slot", 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1)
