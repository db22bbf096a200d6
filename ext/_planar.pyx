# cython: language_level=3
"""Compiled assembly kernels for the built-in planar and spatial constraint types.

One :class:`PlanarEvaluator` per System holds raw pointers to the packed group
arrays (built once by ``mbcore.system``) and assembles phi, the Jacobian values,
nu and gamma for every compiled group in one call, without Python-level loops
over elements and without allocation.  The formulas are those of
Nikravesh (1988), Ch. 4 (re-derived); each has a NumPy reference implementation in
``mbplugins.planar`` (``constraints``, ``links``, ``gears``, ``drivers``, ``cams``)
with identical packed parameters.  The curve pairs (C10-C13) carry an artificial
coordinate theta each (``G.xoff``) and evaluate body-fixed curves packed as in
``mbplugins.planar.curves``.  The spatial types (Euler-parameter bodies,
Nikravesh (1988), Ch. 7; NumPy reference ``mbplugins.spatial.constraints``) have kernel
codes >= 100 and live in ``_spatial.pxi``.

A group whose dict carries ``capsule`` (a ``mbcore.constraint_kernel`` PyCapsule
validated by :mod:`mbcore.plugins.compiled`, include/mbcore_plugin.h ABI v1) is
of kind ``K_EXTERNAL``: the evaluator calls the plugin's function pointers with the
same extended buffers, into per-group scratch allocated here once, and scatters
the (ne, m) rows by ``row`` and the (ne, m, nb, nc) Jacobian blocks by ``jpos``
(``_constraint_plugins.pxi``).  The stages receive the time ``t`` for these
kernels and return -1 or the group whose kernel refused an element.

Array conventions (see mbcore.elements): q is copied into an extended buffer of
length n + 10, like ``System._qx``: the planar ground's block (0, 0, 0) at n, the
spatial ground's (0, 0, 0, 1, 0, 0, 0) at n + 3 (the System passes every ground
body at offset n; ``_set`` moves spatial ones to n + 3).  Jacobian entries of
ground columns are written to slots of their own after the matrix data (``jpos``
says where); a body has 3 (planar) or 7 (spatial) columns.
"""
from libc.math cimport sin, cos, fabs, isfinite, floor
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport (PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid,
                                PyCapsule_GetName, PyCapsule_CheckExact)
from mbcore.plugin cimport (mbcore_constraint_kernel, mbcore_constraint_group,
                            mbcore_index, mbcore_constraint_fn,
                            mbcore_constraint_jacobian_fn, mbcore_constraint_gamma_fn,
                            MBCORE_ABI_VERSION, MBCORE_BODY_PLANAR, MBCORE_BODY_SPATIAL,
                            MBCORE_CONSTRAINT_CAPSULE)

from scipy.linalg.cython_lapack cimport dgetrf, dgetrs

import numpy as np

include "_spatial.pxi"

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
    K_EXTERNAL = 1000         # a plugin's kernel (_constraint_plugins.pxi)

# the stages (external groups and the self-test capsules)
cdef enum:
    ST_PHI = 0
    ST_JACOBIAN = 1
    ST_NU = 2
    ST_GAMMA = 3

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

#: kernel name -> (code, equations, bodies, n_par, n_fun[, nx])
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
    "cam_point": (K_CAM_POINT, 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1),
    "cam_roller": (K_CAM_ROLLER, 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1),
    "cam_flat": (K_CAM_FLAT, 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1),
    "slot": (K_SLOT, 2, 2, CURVE_GEOM + CURVE_SIZE, 0, 1),
}
KERNELS.update(SPATIAL_KERNELS)

cdef class PlanarEvaluator:
    """Assembles phi, Jacobian, nu and gamma of all compiled groups of a System."""

    def __cinit__(self, Py_ssize_t n, list groups not None, on_failure=None):
        cdef Py_ssize_t k
        _need_dim("n", n)
        self.n = n
        self.need_out = self.need_data = self.need_fv = 0
        self.ng = len(groups)
        self._keep = []
        self.failed_group = -1
        self.failed_element = -1
        self.on_failure = on_failure
        self.groups = <Group*> malloc(max(self.ng, 1) * sizeof(Group))
        self.qx = <double*> malloc((n + 10) * sizeof(double))
        self.qdx = <double*> malloc((n + 10) * sizeof(double))
        if self.groups == NULL or self.qx == NULL or self.qdx == NULL:
            raise MemoryError()
        memset(self.qx, 0, (n + 10) * sizeof(double))
        memset(self.qdx, 0, (n + 10) * sizeof(double))
        self.qx[n + 6] = 1.0           # spatial ground: r = 0, p = (1, 0, 0, 0) at n + 3
        for k in range(self.ng):
            self._set(k, groups[k])

    cdef _set(self, Py_ssize_t k, dict g):
        cdef const mbcore_constraint_kernel* K = NULL
        capsule = g.get("capsule")
        if capsule is not None:       # the compiled plugin tier (_constraint_plugins.pxi)
            K = _constraint_kernel_ptr(capsule)
            spatial = K.body_kind == MBCORE_BODY_SPATIAL
            code, m, nb, npar, nfun, nx = (K_EXTERNAL, K.n_equations, K.n_bodies, K.n_par,
                                           K.n_fun, 0)
            self._keep.append(capsule)
            self.n_external += 1
        else:
            spec = KERNELS[g["kernel"]]
            code, m, nb, npar, nfun = spec[:5]
            nx = spec[5] if len(spec) > 5 else 0
            spatial = code >= K_SPATIAL
        ncol = 7 if spatial else 3
        if g.get("kind", "planar") != ("spatial" if spatial else "planar"):
            raise ValueError(f"kernel {g['kernel']!r} is for "
                             f"{'spatial' if spatial else 'planar'} bodies, the group's "
                             f"are {g.get('kind', 'planar')}")
        boff = np.ascontiguousarray(g["boff"], dtype=np.intp)
        _extent(boff, 0, self.n + 4, "boff")      # bodies, or a ground block
        if spatial:            # the spatial ground block is at n + 3 (module docstring)
            boff = np.where(boff >= self.n, self.n + 3, boff).astype(np.intp)
        xoff = np.ascontiguousarray(g.get("xoff", np.zeros((0, 0), np.intp)), dtype=np.intp)
        row = np.ascontiguousarray(g["row"], dtype=np.intp)
        par = np.ascontiguousarray(g["par"], dtype=np.float64)
        if code in _STATEFUL and par.size and not (
                isinstance(g["par"], np.ndarray) and np.shares_memory(par, g["par"])):
            # the kernel writes tracking state into par (rotation driver): it must be
            # the System group's own array, so that both paths share that state
            raise ValueError(f"kernel {g['kernel']!r} updates its parameters in place: "
                             f"pass the group's C-contiguous float64 par array itself")
        fidx = np.ascontiguousarray(g["fidx"], dtype=np.intp)
        jpos = np.ascontiguousarray(g["jpos"], dtype=np.intp)
        ne = row.shape[0]
        if (boff.size != ne * nb or par.size != ne * npar or fidx.size != ne * nfun
                or jpos.size != ne * m * (nb * ncol + nx) or xoff.size != ne * nx):
            raise ValueError(f"kernel {g['kernel']!r}: packed arrays have wrong sizes")
        if ne:      # indices: checked here, trusted by the stages (no GIL)
            self.need_out = max(self.need_out, _extent(row, 0, -1, "row") - 1 + m)
            self.need_data = max(self.need_data, _extent(jpos, 0, -1, "jpos"))
            self.need_fv = max(self.need_fv, _extent(fidx, 0, -1, "fidx"))
            _extent(xoff, 0, self.n, "xoff")
        # an external group's scratch: (ne, m) rows and (ne, m, nb, ncol) blocks
        rows = np.zeros(ne * m if K != NULL else 0)
        jblk = np.zeros(ne * m * nb * ncol if K != NULL else 0)
        self._keep.extend([boff, row, par, fidx, jpos, xoff, rows, jblk])
        cdef Group* G = &self.groups[k]
        G.kind = code
        G.ne = ne
        G.nb = nb
        G.m = m
        G.npar = npar
        G.nfun = nfun
        G.njac = m * (nb * ncol + nx)  # body entries (r, b, c), then extra entries (r, x)
        G.nx = nx
        G.ncol = ncol
        G.xoff = <const Py_ssize_t*> _ptr_i(xoff)
        G.boff = <const Py_ssize_t*> _ptr_i(boff)
        G.row = <const Py_ssize_t*> _ptr_i(row)
        G.par = <const double*> _ptr_d(par)
        G.fidx = <const Py_ssize_t*> _ptr_i(fidx)
        G.jpos = <const Py_ssize_t*> _ptr_i(jpos)
        G.ext = K
        G.rows = <double*> _ptr_d(rows)
        G.jblk = <double*> _ptr_d(jblk)

    def __dealloc__(self):
        free(self.groups)
        free(self.qx)
        free(self.qdx)

    cdef int _load(self, const double[::1] q) except -1:
        if q.shape[0] != self.n:
            raise ValueError(f"q has {q.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qx, &q[0], self.n * sizeof(double))
        return 0

    # -- C-level stages (q already in self.qx, qd in self.qdx) --------------------
    cdef Py_ssize_t c_phi(self, double t, const double* fv, double* out) noexcept nogil:
        cdef Py_ssize_t g, e
        for g in range(self.ng):
            if self.groups[g].kind == K_EXTERNAL:
                e = _ext_rows(&self.groups[g], ST_PHI, self.qx, self.qdx, t, fv, out)
                if e >= 0:
                    return _failed(self, g, e)
            else:
                _phi(&self.groups[g], self.qx, fv, out)
        return -1

    cdef Py_ssize_t c_jacobian(self, double t, const double* fv, double* data) noexcept nogil:
        cdef Py_ssize_t g, e
        for g in range(self.ng):
            if self.groups[g].kind == K_EXTERNAL:
                e = _ext_jacobian(&self.groups[g], self.qx, t, fv, data)
                if e >= 0:
                    return _failed(self, g, e)
            else:
                _jac(&self.groups[g], self.qx, data)
        return -1

    cdef Py_ssize_t c_nu(self, double t, const double* fv, double* out) noexcept nogil:
        cdef Py_ssize_t g, e
        for g in range(self.ng):
            if self.groups[g].kind == K_EXTERNAL:
                e = _ext_rows(&self.groups[g], ST_NU, self.qx, self.qdx, t, fv, out)
                if e >= 0:
                    return _failed(self, g, e)
            else:
                _nu(&self.groups[g], fv, out)
        return -1

    cdef Py_ssize_t c_gamma(self, double t, const double* fv, double* out) noexcept nogil:
        cdef Py_ssize_t g, e
        for g in range(self.ng):
            if self.groups[g].kind == K_EXTERNAL:
                e = _ext_rows(&self.groups[g], ST_GAMMA, self.qx, self.qdx, t, fv, out)
                if e >= 0:
                    return _failed(self, g, e)
            else:
                _gamma(&self.groups[g], self.qx, self.qdx, fv, out)
        return -1

    cdef int _check(self, const double[:, ::1] fv, double[::1] out,
                    double[::1] data) except -1:
        """The buffers of a call reach every packed index (ValueError otherwise)."""
        _need_fv(fv, self.need_fv)
        if out is not None:
            _need("out", out.shape[0], self.need_out)
        if data is not None:
            _need("data", data.shape[0], self.need_data)
        return 0

    def phi(self, const double[::1] q not None, double t, const double[:, ::1] fv,
            double[::1] out not None):
        """out[rows] = Phi(q, t) for every compiled group."""
        self._check(fv, out, None)
        self._load(q)
        if self.c_phi(t, _fptr(fv), &out[0]) >= 0:
            _raise_failed(self, t)

    def jacobian(self, const double[::1] q not None, double t, const double[:, ::1] fv,
                 double[::1] data not None):
        """data[jpos] = Jacobian entries (dense or CSR positions; last = trash)."""
        self._check(fv, None, data)
        self._load(q)
        if self.c_jacobian(t, _fptr(fv), &data[0]) >= 0:
            _raise_failed(self, t)

    def nu(self, const double[::1] q not None, double t, const double[:, ::1] fv,
           double[::1] out not None):
        """out[rows] = nu = -Phi_t (the built-in kernels do not read q; plugin kernels
        do)."""
        self._check(fv, out, None)
        if self.n_external:
            self._load(q)
        if self.c_nu(t, _fptr(fv), &out[0]) >= 0:
            _raise_failed(self, t)

    def gamma(self, const double[::1] q not None, const double[::1] qd not None, double t,
              const double[:, ::1] fv, double[::1] out not None):
        """out[rows] = gamma = -(Phi_q qd)_q qd - 2 Phi_qt qd - Phi_tt."""
        self._check(fv, out, None)
        self._load(q)
        if qd.shape[0] != self.n:
            raise ValueError(f"qd has {qd.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        if self.c_gamma(t, _fptr(fv), &out[0]) >= 0:
            _raise_failed(self, t)

    def repeat_stages(self, const double[::1] q not None, const double[::1] qd not None,
                      double t, const double[:, ::1] fv, double[::1] out not None,
                      double[::1] data not None, Py_ssize_t count):
        """phi, Jacobian, nu and gamma at (q, qd, t), ``count`` times in C without
        the GIL (benchmarks/run.py: the per-stage cost of the groups without
        Python's).  ``out`` receives the rows of each stage in turn.  Returns -1, or
        the failing group."""
        cdef Py_ssize_t k, bad = -1
        self._check(fv, out, data)
        _need_dim("count", count)
        self._load(q)
        if qd.shape[0] != self.n:
            raise ValueError(f"qd has {qd.shape[0]} entries, the system has {self.n} coordinates")
        if self.n:
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        cdef const double* fp = _fptr(fv)
        with nogil:
            for k in range(count):
                bad = self.c_phi(t, fp, &out[0])
                if bad < 0:
                    bad = self.c_jacobian(t, fp, &data[0])
                if bad < 0:
                    bad = self.c_nu(t, fp, &out[0])
                if bad < 0:
                    bad = self.c_gamma(t, fp, &out[0])
                if bad >= 0:
                    break
        return bad


cdef inline const double* _fptr(const double[:, ::1] fv):
    if fv is None or fv.shape[0] == 0:
        return NULL
    return &fv[0, 0]


include "_pointers.pxi"
include "_bounds.pxi"
include "_constraint_plugins.pxi"


# --------------------------------------------------------------------------------
# per-type kernels
# --------------------------------------------------------------------------------
cdef void _phi(Group* G, const double* q, const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, bi, bj, r, k
    cdef const double* p
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, ux, uy, nx, ny, dx, dy
    if G.kind >= K_SPATIAL:
        _phi_spatial(G, q, fv, out)
        return
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


cdef void _jac(Group* G, const double* q, double* J) noexcept nogil:
    # entry order per element: (row, body, coordinate) -> jpos[e*njac + r*nb*3 + b*3 + c]
    cdef Py_ssize_t e, bi, bj, k
    cdef const Py_ssize_t* jp
    cdef const double* p
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, ux, uy, nx, ny
    if G.kind >= K_SPATIAL:
        _jac_spatial(G, q, J)
        return
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


cdef void _nu(Group* G, const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, r, k
    cdef const double* f
    if G.kind >= K_SPATIAL:
        _nu_spatial(G, fv, out)
        return
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


cdef void _gamma(Group* G, const double* q, const double* qd, const double* fv,
                 double* out) noexcept nogil:
    cdef Py_ssize_t e, bi, bj, r, k
    cdef const double* p
    cdef double c, s, cj, sj, Sjx, Sjy, ux, uy, nx, ny, wi, wj, w2
    if G.kind >= K_SPATIAL:
        _gamma_spatial(G, q, qd, fv, out)
        return
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
# compiled kinematic step (Nikravesh (1988), §3.2.2 Alg K-II; reference: mbplugins.analyses.kinematic)
# --------------------------------------------------------------------------------
cdef class KinematicStepper:
    """Work buffers and the step routine for one System (n = m)."""

    cdef PlanarEvaluator ev
    cdef Py_ssize_t n
    cdef double[::1] phi, jdata, lu, b, nu, gam, qpred
    cdef int[::1] ipiv
    cdef public double pivot_ratio
    cdef public int iterations
    cdef public double phi_norm

    def __cinit__(self, PlanarEvaluator evaluator not None, Py_ssize_t n,
                  double[::1] jdata not None):
        _need_dim("n", n)
        if n > evaluator.n or evaluator.need_out > n:
            raise ValueError(f"n = {n} does not match the evaluator (n = {evaluator.n}, "
                             f"{evaluator.need_out} rows)")
        _need("jdata", jdata.shape[0], max(n * n, evaluator.need_data, 1))
        self.ev = evaluator
        self.n = n
        self.phi = np.zeros(max(n, 1))
        self.nu = np.zeros(max(n, 1))
        self.gam = np.zeros(max(n, 1))
        self.jdata = jdata                 # the System's Jacobian buffer (row-major n x n, + ground slots)
        self.lu = np.zeros(max(n * n, 1))
        self.b = np.zeros(max(n, 1))
        self.ipiv = np.zeros(max(n, 1), dtype=np.intc)
        self.qpred = np.zeros(max(n, 1))

    cdef int _factor(self, double sing_tol):
        cdef int n = <int> self.n, info = 0, k
        cdef double d, dmin = 1e308, dmax = 0.0
        memcpy(&self.lu[0], &self.jdata[0], n * n * sizeof(double))
        dgetrf(&n, &n, &self.lu[0], &n, &self.ipiv[0], &info)
        for k in range(n):
            d = fabs(self.lu[k * n + k])
            if d < dmin:
                dmin = d
            if d > dmax:
                dmax = d
        self.pivot_ratio = dmin / dmax if dmax > 0 else 0.0
        if info != 0 or self.pivot_ratio < sing_tol:
            return 1
        return 0

    cdef void _solve(self, double* x):
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'T'             # row-major data is A^T for LAPACK
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], x, &n, &info)

    def predicted(self):
        """The predicted configuration of the last step (for diagnostics)."""
        return np.array(self.qpred[:self.n])

    def step(self, double[::1] q not None, double[::1] qd not None,
             double[::1] qdd not None, double t, const double[:, ::1] fv, double tol,
             int maxit, double sing_tol, double h=0.0):
        """From the previous (q, qd, qdd) predict ``q + h qd + h^2/2 qdd`` (h = 0:
        start from q), solve Phi(q, t) = 0 in place, then qd and qdd in place.
        Returns 0 (success), 1 (singular Jacobian during Newton), 2 (Newton did not
        converge / diverged), 3 (non-finite Phi), 4 (singular at the solution),
        5 (non-finite velocity or acceleration), 6 (a plugin's constraint kernel
        refused an element: the evaluator's failed_group / failed_element)."""
        cdef Py_ssize_t n = self.n, i
        cdef int it
        cdef double scale = 0.0, pn, a, dmax
        if q.shape[0] != n or qd.shape[0] != n or qdd.shape[0] != n:
            raise ValueError(f"q, qd and qdd must have {n} entries (got {q.shape[0]}, "
                             f"{qd.shape[0]}, {qdd.shape[0]})")
        _need_fv(fv, self.ev.need_fv)
        _need_dim("maxit", maxit)
        if h != 0.0:
            for i in range(n):
                q[i] += h * qd[i] + 0.5 * h * h * qdd[i]
        for i in range(n):
            self.qpred[i] = q[i]
        cdef const double* fp = NULL if fv.shape[0] == 0 else &fv[0, 0]
        cdef double* qx = self.ev.qx
        for i in range(n):
            if fabs(q[i]) > scale:
                scale = fabs(q[i])
        scale += 1.0
        self.iterations = 0
        for it in range(maxit + 1):
            for i in range(n):
                qx[i] = q[i]
            if self.ev.c_phi(t, fp, &self.phi[0]) >= 0:
                return 6
            pn = 0.0
            for i in range(n):
                a = fabs(self.phi[i])
                if not isfinite(a):
                    self.phi_norm = a
                    return 3
                if a > pn:
                    pn = a
            self.phi_norm = pn
            self.iterations = it
            if pn <= tol * scale:
                break
            if it == maxit:
                return 2
            if self.ev.c_jacobian(t, fp, &self.jdata[0]) >= 0:
                return 6
            if self._factor(sing_tol):
                return 1
            for i in range(n):
                self.b[i] = -self.phi[i]
            self._solve(&self.b[0])
            dmax = 0.0
            for i in range(n):
                if not isfinite(self.b[i]):
                    return 2
                if fabs(self.b[i]) > dmax:
                    dmax = fabs(self.b[i])
            if dmax > 1e6 * scale:
                return 2
            for i in range(n):
                q[i] += self.b[i]
        # velocities and accelerations with the Jacobian at the converged q
        for i in range(n):
            qx[i] = q[i]
        if self.ev.c_jacobian(t, fp, &self.jdata[0]) >= 0:
            return 6
        if self._factor(sing_tol):
            return 4
        if self.ev.c_nu(t, fp, &self.nu[0]) >= 0:
            return 6
        for i in range(n):
            qd[i] = self.nu[i]
        self._solve(&qd[0])
        for i in range(n):
            self.ev.qdx[i] = qd[i]
        if self.ev.c_gamma(t, fp, &self.gam[0]) >= 0:
            return 6
        for i in range(n):
            qdd[i] = self.gam[i]
        self._solve(&qdd[0])
        for i in range(n):
            if not isfinite(qdd[i]) or not isfinite(qd[i]):
                return 5
        return 0

    def solve(self, double[::1] b, bint transposed=False):
        """b <- A^-1 b (or A^-T b) with the factors of the last Jacobian."""
        cdef int n = <int> self.n, nrhs = 1, info = 0
        cdef char trans = b'N' if transposed else b'T'
        dgetrs(&trans, &n, &nrhs, &self.lu[0], &n, &self.ipiv[0], &b[0], &n, &info)


