# cython: language_level=3
"""Compiled assembly kernels for the built-in planar constraint types.

One :class:`PlanarEvaluator` per System holds raw pointers to the packed group
arrays (built once by ``mbcore.system``) and assembles phi, the Jacobian values,
nu and gamma for every compiled group in one call, without Python-level loops
over elements and without allocation.  The formulas are those of
spec/planar.md §1 (C1-C9, D1-D5); each has a NumPy reference implementation in
``mbplugins.planar`` (``constraints``, ``links``, ``gears``, ``drivers``) with
identical packed parameters.

Array conventions (see mbcore.elements): q is copied into an extended buffer of
length n + 3 whose last three entries are the ground's (0, 0, 0); Jacobian
entries of ground columns are written to slots of their own after the matrix
data (``jpos`` says where).
"""
from libc.math cimport sin, cos
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset

import numpy as np

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

#: kernel name -> (code, equations, bodies, n_par, n_fun)
KERNELS = {
    "fixed": (K_FIXED, 3, 1, 3, 0),
    "absolute": (K_ABSOLUTE, 1, 1, 3, 1),
    "relative": (K_RELATIVE, 1, 2, 1, 1),
    "revolute": (K_REVOLUTE, 2, 2, 4, 0),
    "translational": (K_TRANSLATIONAL, 2, 2, 7, 0),
    "distance": (K_DISTANCE, 1, 2, 4, 1),
    "revolute_translational": (K_REVTRANS, 1, 2, 6, 0),
    "translational_002": (K_TRANS002, 2, 2, 4, 0),
    "gear": (K_GEAR, 1, 3, 3, 0),
    "rack_pinion": (K_RACK, 1, 2, 8, 0),
    "point_driver": (K_POINTDIR, 1, 1, 4, 1),
}

ctypedef struct Group:
    int kind
    Py_ssize_t ne, nb, m, npar, nfun, njac
    const Py_ssize_t* boff
    const Py_ssize_t* row
    const double* par
    const Py_ssize_t* fidx
    const Py_ssize_t* jpos


cdef class PlanarEvaluator:
    """Assembles phi, Jacobian, nu and gamma of all compiled groups of a System."""

    cdef Group* groups
    cdef Py_ssize_t ng
    cdef Py_ssize_t n
    cdef double* qx
    cdef double* qdx
    cdef list _keep

    def __cinit__(self, Py_ssize_t n, list groups):
        cdef Py_ssize_t k
        self.n = n
        self.ng = len(groups)
        self._keep = []
        self.groups = <Group*> malloc(max(self.ng, 1) * sizeof(Group))
        self.qx = <double*> malloc((n + 3) * sizeof(double))
        self.qdx = <double*> malloc((n + 3) * sizeof(double))
        if self.groups == NULL or self.qx == NULL or self.qdx == NULL:
            raise MemoryError()
        memset(self.qx, 0, (n + 3) * sizeof(double))
        memset(self.qdx, 0, (n + 3) * sizeof(double))
        for k in range(self.ng):
            self._set(k, groups[k])

    cdef _set(self, Py_ssize_t k, dict g):
        code, m, nb, npar, nfun = KERNELS[g["kernel"]]
        boff = np.ascontiguousarray(g["boff"], dtype=np.intp)
        row = np.ascontiguousarray(g["row"], dtype=np.intp)
        par = np.ascontiguousarray(g["par"], dtype=np.float64)
        fidx = np.ascontiguousarray(g["fidx"], dtype=np.intp)
        jpos = np.ascontiguousarray(g["jpos"], dtype=np.intp)
        ne = row.shape[0]
        if (boff.size != ne * nb or par.size != ne * npar or fidx.size != ne * nfun
                or jpos.size != ne * m * nb * 3):
            raise ValueError(f"kernel {g['kernel']!r}: packed arrays have wrong sizes")
        self._keep.extend([boff, row, par, fidx, jpos])
        cdef Group* G = &self.groups[k]
        G.kind = code
        G.ne = ne
        G.nb = nb
        G.m = m
        G.npar = npar
        G.nfun = nfun
        G.njac = m * nb * 3
        G.boff = <const Py_ssize_t*> _ptr_i(boff)
        G.row = <const Py_ssize_t*> _ptr_i(row)
        G.par = <const double*> _ptr_d(par)
        G.fidx = <const Py_ssize_t*> _ptr_i(fidx)
        G.jpos = <const Py_ssize_t*> _ptr_i(jpos)

    def __dealloc__(self):
        free(self.groups)
        free(self.qx)
        free(self.qdx)

    cdef inline int _load(self, const double[::1] q) except -1:
        if q.shape[0] != self.n:
            raise ValueError(f"q has {q.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qx, &q[0], self.n * sizeof(double))
        return 0

    def phi(self, const double[::1] q, double t, const double[:, ::1] fv, double[::1] out):
        """out[rows] = Phi(q, t) for every compiled group."""
        cdef Py_ssize_t g
        self._load(q)
        for g in range(self.ng):
            _phi(&self.groups[g], self.qx, _fptr(fv), &out[0])

    def jacobian(self, const double[::1] q, double t, const double[:, ::1] fv,
                 double[::1] data):
        """data[jpos] = Jacobian entries (dense or CSR positions; last = trash)."""
        cdef Py_ssize_t g
        self._load(q)
        for g in range(self.ng):
            _jac(&self.groups[g], self.qx, &data[0])

    def nu(self, const double[::1] q, double t, const double[:, ::1] fv, double[::1] out):
        """out[rows] = nu = -Phi_t."""
        cdef Py_ssize_t g
        for g in range(self.ng):
            _nu(&self.groups[g], _fptr(fv), &out[0])

    def gamma(self, const double[::1] q, const double[::1] qd, double t,
              const double[:, ::1] fv, double[::1] out):
        """out[rows] = gamma = -(Phi_q qd)_q qd - 2 Phi_qt qd - Phi_tt."""
        cdef Py_ssize_t g
        self._load(q)
        if qd.shape[0] != self.n:
            raise ValueError(f"qd has {qd.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        for g in range(self.ng):
            _gamma(&self.groups[g], self.qx, self.qdx, _fptr(fv), &out[0])


cdef inline const double* _fptr(const double[:, ::1] fv):
    if fv.shape[0] == 0:
        return NULL
    return &fv[0, 0]


# pointers for empty arrays (never dereferenced) point into these module-level
# arrays, which live as long as the module
_EMPTY_D = np.zeros(1)
_EMPTY_I = np.zeros(1, dtype=np.intp)


cdef size_t _ptr_d(object a):
    """Address of the first element of a C-contiguous float64 array kept alive by
    the caller (``self._keep``)."""
    cdef double[::1] v = a.reshape(-1) if a.size else _EMPTY_D
    return <size_t> &v[0]


cdef size_t _ptr_i(object a):
    cdef Py_ssize_t[::1] v = a.reshape(-1) if a.size else _EMPTY_I
    return <size_t> &v[0]


# --------------------------------------------------------------------------------
# per-type kernels
# --------------------------------------------------------------------------------
cdef void _phi(Group* G, const double* q, const double* fv, double* out) noexcept nogil:
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


cdef void _jac(Group* G, const double* q, double* J) noexcept nogil:
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


cdef void _nu(Group* G, const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, r
    for e in range(G.ne):
        r = G.row[e]
        if G.kind == K_ABSOLUTE or G.kind == K_RELATIVE:
            out[r] = fv[3 * G.fidx[e] + 1]
        elif G.kind == K_FIXED:
            out[r] = 0.0; out[r + 1] = 0.0; out[r + 2] = 0.0
        else:   # revolute, translational: scleronomic
            out[r] = 0.0; out[r + 1] = 0.0


cdef void _gamma(Group* G, const double* q, const double* qd, const double* fv,
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
