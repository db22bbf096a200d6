# cython: language_level=3
"""Compiled kernel of ``spatial:sphere_group`` (``mbplugins._ext._sphere_group``):
many spheres colliding with each other and with the planes of a surface body, one
element on a variable body list (``ForceType.body_list``), through the compiled
plugin tier like any third-party kernel (one ``mbcore.force_kernel`` capsule
``SPHERE_GROUP``: forces and non-conservative power, no analytic Jacobian).

Broad phase: a uniform grid of cell size h >= the largest sphere diameter, hashed
(spatial hashing, Ericson (2005), ch. 7; the hash of Teschner et al. (2003)) and
filled by a counting sort, so that building it and finding the pairs costs O(N)
for spheres of bounded density: two overlapping spheres are less than h apart, so
their cells differ by at most one in each axis; sphere i looks at the 27 cells
around its own and keeps the j > i whose cell is exactly that one (a hash
collision never adds a pair) and whose centres are closer than R_i + R_j.  Narrow
phase and law: ``_pair`` of ext/plugins/_contact_law.pxi, the function of
``spatial:contact`` (shape sphere_sphere, body i the sphere of lower list index;
sphere_plane against every plane).  NumPy reference: mbplugins.contact.spheres
(equal to 1e-12, tests/test_sphere_group.py).

Work memory: one buffer per thread (thread-local), grown when a larger group is
evaluated, never freed or allocated per evaluation; the kernel keeps no pointers
to mbcore's arrays across calls.
"""
import numpy as np
from libc.math cimport floor
from libc.stdlib cimport realloc
from libc.stdint cimport int64_t, uint64_t
from cpython.pycapsule cimport PyCapsule_New
from mbcore.plugin cimport (mbcore_force_kernel, mbcore_force_group, mbcore_index,
                            MBCORE_ABI_VERSION, MBCORE_BODY_SPATIAL, MBCORE_FORCE_CAPSULE)

include "_contact_law.pxi"   # the law of spatial:contact: _pair and the rotation helpers

cdef extern from *:
    """
    #if defined(_MSC_VER)
    #define MB_SG_TLS __declspec(thread)
    #else
    #define MB_SG_TLS __thread
    #endif
    static MB_SG_TLS char *mb_sg_buf = NULL;
    static MB_SG_TLS size_t mb_sg_cap = 0;
    """
    char* mb_sg_buf
    size_t mb_sg_cap

#: packed head (n_par): law k, c, e, mu, v_eps, damping model, friction model; the
#: cell size h, the number of planes, the number of spheres; then 6 floats per plane
#: (a point and the unit normal, surface coordinates), then one radius per sphere
cdef enum:
    HEAD = 10
#: cell coordinates are clamped to +-2^40 (far-away spheres share the border cells:
#: still exact, the narrow test decides)
cdef double CELL_LIMIT = 1099511627776.0


cdef struct Grid:
    Py_ssize_t n, nh               # spheres, hash buckets (a power of two)
    double h                       # cell size
    double* x                      # (n, 3) centres
    int64_t* c                     # (n, 3) cells
    Py_ssize_t* order              # (n) spheres sorted by bucket
    Py_ssize_t* start              # (nh + 1) first entry of each bucket in order
    Py_ssize_t* bucket             # (n) bucket of each sphere
    Py_ssize_t* cand               # (n) candidates of one sphere
    double* A                      # (n, 9) rotation matrices
    double* w                      # (n, 3) angular velocities


cdef inline Py_ssize_t _hash(int64_t x, int64_t y, int64_t z, Py_ssize_t mask) noexcept nogil:
    cdef uint64_t k = ((<uint64_t> x) * 73856093ULL) ^ ((<uint64_t> y) * 19349663ULL) \
        ^ ((<uint64_t> z) * 83492791ULL)
    return <Py_ssize_t> (k & <uint64_t> mask)


cdef inline int64_t _cell(double v, double h) noexcept nogil:
    cdef double u = floor(v / h)
    if not (u >= -CELL_LIMIT):              # also NaN
        u = -CELL_LIMIT
    elif u > CELL_LIMIT:
        u = CELL_LIMIT
    return <int64_t> u


cdef int _grid_memory(Grid* g, Py_ssize_t n) noexcept nogil:
    """Carve the thread's work buffer for n spheres (grown if needed); 0, or -1 if
    it cannot be allocated."""
    global mb_sg_buf, mb_sg_cap
    cdef Py_ssize_t nh = 16
    while nh < 2 * n:
        nh *= 2
    cdef size_t need = 8 * <size_t> (3 * n + 3 * n + n + (nh + 1) + n + n + 9 * n + 3 * n)
    cdef char* p
    if need > mb_sg_cap:
        p = <char*> realloc(mb_sg_buf, need)
        if p == NULL:
            return -1
        mb_sg_buf = p
        mb_sg_cap = need
    p = mb_sg_buf
    g.n = n
    g.nh = nh
    g.x = <double*> p; p += 8 * 3 * n
    g.c = <int64_t*> p; p += 8 * 3 * n
    g.order = <Py_ssize_t*> p; p += 8 * n
    g.start = <Py_ssize_t*> p; p += 8 * (nh + 1)
    g.bucket = <Py_ssize_t*> p; p += 8 * n
    g.cand = <Py_ssize_t*> p; p += 8 * n
    g.A = <double*> p; p += 8 * 9 * n
    g.w = <double*> p
    return 0


cdef void _grid_build(Grid* g) noexcept nogil:
    """Cells of the centres g.x, and the spheres sorted by bucket (counting sort)."""
    cdef Py_ssize_t i, k, b, mask = g.nh - 1
    for b in range(g.nh + 1):
        g.start[b] = 0
    for i in range(g.n):
        for k in range(3):
            g.c[3 * i + k] = _cell(g.x[3 * i + k], g.h)
        b = _hash(g.c[3 * i], g.c[3 * i + 1], g.c[3 * i + 2], mask)
        g.bucket[i] = b
        g.start[b + 1] += 1
    for b in range(g.nh):
        g.start[b + 1] += g.start[b]
    for i in range(g.n):                     # stable: within a bucket by index
        b = g.bucket[i]
        g.order[g.start[b]] = i
        g.start[b] += 1
    for b in range(g.nh, 0, -1):
        g.start[b] = g.start[b - 1]
    g.start[0] = 0


cdef Py_ssize_t _candidates(const Grid* g, Py_ssize_t i, const double* R) noexcept nogil:
    """g.cand := the spheres j > i in the 27 cells around sphere i's whose centres
    are closer than (R_i + R_j) (1 + 1e-12) (the narrow phase decides exactly);
    returns their number."""
    cdef Py_ssize_t nc = 0, b, s, j, mask = g.nh - 1
    cdef int64_t cx, cy, cz
    cdef int dx, dy, dz
    cdef double d0, d1, d2, rr
    for dx in range(-1, 2):
        cx = g.c[3 * i] + dx
        for dy in range(-1, 2):
            cy = g.c[3 * i + 1] + dy
            for dz in range(-1, 2):
                cz = g.c[3 * i + 2] + dz
                b = _hash(cx, cy, cz, mask)
                for s in range(g.start[b], g.start[b + 1]):
                    j = g.order[s]
                    if j <= i or g.c[3 * j] != cx or g.c[3 * j + 1] != cy \
                            or g.c[3 * j + 2] != cz:
                        continue
                    d0 = g.x[3 * j] - g.x[3 * i]
                    d1 = g.x[3 * j + 1] - g.x[3 * i + 1]
                    d2 = g.x[3 * j + 2] - g.x[3 * i + 2]
                    rr = R[i] + R[j]
                    if d0 * d0 + d1 * d1 + d2 * d2 < rr * rr * (1.0 + 1e-12):
                        g.cand[nc] = j
                        nc += 1
    return nc


cdef mbcore_index _group_f(const mbcore_force_group* G, const double* q,
                           const double* qd, double t, const double* fv, double* Q,
                           double* P) noexcept nogil:
    """Q += the forces of every sphere-plane and sphere-sphere contact of each
    element, P[0] += their non-conservative power; -1, or the element that failed
    (coincident sphere centres, or no work memory)."""
    cdef Py_ssize_t e, i, j, k, a, npl, n, bs, bi, bj, nc
    cdef const double* par
    cdef const double* R
    cdef double p22[22]
    cdef double As[9]
    cdef double ws[3]
    cdef double pw = 0.0
    cdef Grid g
    for e in range(G.ne):
        par = G.par + e * G.npar
        npl = <Py_ssize_t> par[8]
        n = <Py_ssize_t> par[9]
        if n != G.nb - 1 or G.npar != HEAD + 6 * npl + n:
            return e
        R = par + HEAD + 6 * npl
        bs = G.boff[e * G.nb]
        if _grid_memory(&g, n) != 0:
            return e
        g.h = par[7]
        for i in range(n):
            bi = G.boff[e * G.nb + 1 + i]
            for k in range(3):
                g.x[3 * i + k] = q[bi + k]
            _sA(q + bi + 3, g.A + 9 * i)
            _sGw(q + bi + 3, qd + bi + 3, g.w + 3 * i)
        _sA(q + bs + 3, As)
        _sGw(q + bs + 3, qd + bs + 3, ws)
        # the pair parameters of spatial:contact: s'_a = s'_b = 0, law, shape
        for k in range(22):
            p22[k] = 0.0
        for k in range(7):
            p22[14 + k] = par[k]
        # spheres on the planes (shape sphere_plane, body j the surface)
        p22[21] = 0.0
        p22[13] = 0.0
        for a in range(npl):
            for k in range(6):
                p22[7 + k] = par[HEAD + 6 * a + k]
            for i in range(n):
                bi = G.boff[e * G.nb + 1 + i]
                p22[6] = R[i]
                _pair(p22, p22, q, qd, bi, bs, g.A + 9 * i, As, g.w + 3 * i, ws, Q, &pw)
        # sphere pairs (shape sphere_sphere, body i the lower index)
        _grid_build(&g)
        p22[21] = 1.0
        for k in range(6):
            p22[7 + k] = 0.0
        for i in range(n):
            nc = _candidates(&g, i, R)
            if nc == 0:
                continue
            bi = G.boff[e * G.nb + 1 + i]
            p22[6] = R[i]
            for k in range(nc):
                j = g.cand[k]
                bj = G.boff[e * G.nb + 1 + j]
                p22[13] = R[j]
                if _pair(p22, p22, q, qd, bi, bj, g.A + 9 * i, g.A + 9 * j, g.w + 3 * i,
                         g.w + 3 * j, Q, &pw):
                    return e
    if P != NULL:
        P[0] += pw
    return -1


def pairs(centres, radii, double cell):
    """The sphere pairs (i < j, rows sorted) whose centres are closer than R_i +
    R_j, found by the kernel's broad phase (tests: against brute force).
    ``centres`` (n, 3), ``radii`` (n,), ``cell`` the cell size h."""
    cdef double[:, ::1] x = np.ascontiguousarray(centres, dtype=np.float64)
    cdef double[::1] r = np.ascontiguousarray(radii, dtype=np.float64)
    cdef Py_ssize_t n = x.shape[0], i, j, k, nc
    cdef Grid g
    cdef double d0, d1, d2
    if r.shape[0] != n or x.shape[1] != 3:
        raise ValueError("centres (n, 3) and radii (n,) expected")
    out = []
    if n == 0:
        return np.zeros((0, 2), dtype=np.intp)
    if _grid_memory(&g, n) != 0:
        raise MemoryError("sphere_group: work buffer")
    g.h = cell
    for i in range(n):
        for k in range(3):
            g.x[3 * i + k] = x[i, k]
    _grid_build(&g)
    for i in range(n):
        nc = _candidates(&g, i, &r[0])
        for k in range(nc):
            j = g.cand[k]
            d0 = x[i, 0] - x[j, 0]
            d1 = x[i, 1] - x[j, 1]
            d2 = x[i, 2] - x[j, 2]
            # the narrow test of _pair: delta = R_i + R_j - |P - S| > 0
            if r[i] + r[j] - sqrt(d0 * d0 + d1 * d1 + d2 * d2) > 0.0:
                out.append((i, j))
    res = np.array(out, dtype=np.intp).reshape(-1, 2)
    return res[np.lexsort((res[:, 1], res[:, 0]))]


cdef mbcore_force_kernel _KERNEL
cdef const char* _REASON = (b"two sphere centres coincide (distance < 1e-12): the contact "
                            b"normal is undefined (or the broad phase's work memory could "
                            b"not be allocated)")

_KERNEL.abi_version = MBCORE_ABI_VERSION
_KERNEL.name = b"spatial_sphere_group"
_KERNEL.body_kind = MBCORE_BODY_SPATIAL
_KERNEL.n_bodies = 1                      # the surface; the spheres: the body list
_KERNEL.n_par = HEAD
_KERNEL.n_fun = 0
_KERNEL.force = _group_f
_KERNEL.jacobian = NULL
_KERNEL.reason = _REASON
_KERNEL.stateful = 0
#: the ``spatial_sphere_group`` kernel (a ``mbcore.force_kernel`` capsule)
SPHERE_GROUP = PyCapsule_New(&_KERNEL, MBCORE_FORCE_CAPSULE, NULL)
