# cython: language_level=3
"""Compiled force kernels for the built-in planar force elements (Nikravesh (1988),
§9.2: point force, torque, TSDA, RSDA, drag, point-line contact, fictitious
damping), and the external groups of the compiled plugin
tier (``mbcore_plugin.h``, ABI v1; docs/plugins.md "Compiled tier").

:class:`ForceEvaluator` accumulates the generalised forces of every compiled group
into Q in one call, without Python per element and without allocation.  The NumPy
references with identical packed parameters are in
``mbplugins.planar.forces``.  Conventions as in ``_planar``: body offsets index an
extended coordinate buffer whose last three entries are the ground's zeros;
forces on the ground land in three extra slots and are discarded.

A group whose dict carries ``capsule`` (a ``mbcore.force_kernel`` PyCapsule,
validated by :mod:`mbcore.plugins.compiled`) is of kind ``F_EXTERNAL``: its
``force`` / ``jacobian`` function pointers are called with the same extended
buffers (the ABI's conventions are this module's).  :func:`builtin_capsule`
wraps a built-in kernel in that ABI (self-tests and benchmarks of the tier).
"""
from libc.math cimport sin, cos, sqrt, pow, tanh, atan2, round
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport (PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid,
                                PyCapsule_GetName, PyCapsule_CheckExact)
from mbcore.plugin cimport (mbcore_force_kernel, mbcore_force_group, mbcore_index,
                            mbcore_force_fn, mbcore_force_jacobian_fn, MBCORE_ABI_VERSION,
                            MBCORE_BODY_PLANAR, MBCORE_BODY_SPATIAL, MBCORE_FORCE_CAPSULE)

import numpy as np

cdef enum:
    F_TSDA = 0
    F_RSDA = 1
    F_FORCE = 2
    F_TORQUE = 3
    F_DRAG = 4
    F_CONTACT = 5
    F_DAMPING = 6
    S_TSDA = 10
    S_FORCE = 11
    S_TORQUE = 12
    S_DRAG = 13
    S_RSDA = 14
    S_BUSHING = 15
    F_EXTERNAL = 100          # a plugin's kernel through mbcore_plugin.h (FGroup.ext)

#: the C ABI version this build implements (include/mbcore_plugin.h)
ABI_VERSION = MBCORE_ABI_VERSION
#: the PyCapsule name of a force kernel
FORCE_CAPSULE = "mbcore.force_kernel"

#: kernel name -> (code, bodies, n_par, n_fun)
KERNELS = {
    "tsda": (F_TSDA, 2, 7, 1),
    "rsda": (F_RSDA, 2, 3, 1),
    "force": (F_FORCE, 1, 3, 2),
    "torque": (F_TORQUE, 2, 0, 1),
    "drag": (F_DRAG, 1, 6, 0),
    "contact": (F_CONTACT, 2, 14, 0),
    "damping": (F_DAMPING, 1, 3, 0),
    "spatial_tsda": (S_TSDA, 2, 9, 1),
    "spatial_force": (S_FORCE, 1, 4, 3),
    "spatial_torque": (S_TORQUE, 2, 1, 3),
    "spatial_drag": (S_DRAG, 1, 8, 0),
    "spatial_rsda": (S_RSDA, 2, 13, 1),
    "spatial_bushing": (S_BUSHING, 2, 22, 0),
}

#: why a kernel refuses an element (reported by the System with the element's name)
REASONS = {
    "tsda": "the attachment points coincide (length < 1e-10): the spring-damper "
            "direction is undefined",
    "spatial_tsda": "the attachment points coincide (length < 1e-10): the spring-damper "
                    "direction is undefined",
    "spatial_rsda": "the body-j reference direction is parallel to the rotation axis (the "
                    "revolute joint is far from assembled): the angle is undefined",
}

#: TSDA lengths below this have no direction (same value as the reference)
cdef double MIN_LENGTH = 1e-10
cdef double TWO_PI = 6.283185307179586

include "_pointers.pxi"
include "_bounds.pxi"
include "_spatial_forces.pxi"
include "_force_jacobians.pxi"
include "_force_plugins.pxi"


cdef class ForceEvaluator:
    """Accumulates Q = sum of element forces for every compiled force group."""

    def __cinit__(self, Py_ssize_t n, list groups not None):
        cdef Py_ssize_t k
        _need_dim("n", n)
        self.n = n
        self.need_fv = 0
        self.ng = len(groups)
        self._keep = []
        self.failed_group = -1
        self.failed_element = -1
        self.groups = <FGroup*> malloc(max(self.ng, 1) * sizeof(FGroup))
        # after q: the planar ground block (3 zeros at n) and the spatial one
        # (r = 0, p = (1, 0, 0, 0) at n + 3)
        self.qx = <double*> malloc((n + 10) * sizeof(double))
        self.qdx = <double*> malloc((n + 10) * sizeof(double))
        self.Qx = <double*> malloc((n + 10) * sizeof(double))
        if self.groups == NULL or self.qx == NULL or self.qdx == NULL or self.Qx == NULL:
            raise MemoryError()
        memset(self.qx, 0, (n + 10) * sizeof(double))
        memset(self.qdx, 0, (n + 10) * sizeof(double))
        self.qx[n + 6] = 1.0
        for k in range(self.ng):
            self._set(k, groups[k])

    cdef _set(self, Py_ssize_t k, dict g):
        self.need_fv = max(self.need_fv, _fill_group(&self.groups[k], g, self._keep, self.n))

    def __dealloc__(self):
        free(self.groups)
        free(self.qx)
        free(self.qdx)
        free(self.Qx)

    def forces(self, const double[::1] q not None, const double[::1] qd not None, double t,
               const double[:, ::1] fv, double[::1] Q not None, bint accumulate=False):
        """Q (+)= generalised forces of all compiled groups.  Returns True, or False
        with ``failed_group``/``failed_element`` set when an element cannot be
        evaluated (a TSDA of zero length)."""
        cdef Py_ssize_t g, e
        if q.shape[0] != self.n or qd.shape[0] != self.n or Q.shape[0] != self.n:
            raise ValueError(f"q, qd and Q must have {self.n} entries")
        _need_fv(fv, self.need_fv)
        if self.n:
            memcpy(self.qx, &q[0], self.n * sizeof(double))
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
            if accumulate:
                memcpy(self.Qx, &Q[0], self.n * sizeof(double))
            else:
                memset(self.Qx, 0, self.n * sizeof(double))
        cdef const double* fp = NULL if fv is None or fv.shape[0] == 0 else &fv[0, 0]
        for g in range(self.ng):
            e = _accumulate(&self.groups[g], self.qx, self.qdx, t, fp, self.Qx, NULL)
            if e >= 0:
                self.failed_group = g
                self.failed_element = e
                return False
        if self.n:
            memcpy(&Q[0], self.Qx, self.n * sizeof(double))
        return True


    cdef Py_ssize_t c_forces(self, const double* q, const double* qd, double t,
                             const double* fv, double* Q, double* P) noexcept nogil:
        """Q (+)= forces of every compiled group at time t (Q has n entries; it is
        accumulated into), P[0] += power of their non-conservative parts (P may be
        NULL).  Returns -1, or the group index of a failing element
        (``failed_element`` is set)."""
        cdef Py_ssize_t g, e, n = self.n
        memcpy(self.qx, q, n * sizeof(double))
        memcpy(self.qdx, qd, n * sizeof(double))
        memcpy(self.Qx, Q, n * sizeof(double))
        for g in range(self.ng):
            e = _accumulate(&self.groups[g], self.qx, self.qdx, t, fv, self.Qx, P)
            if e >= 0:
                self.failed_group = g
                self.failed_element = e
                return g
        memcpy(Q, self.Qx, n * sizeof(double))
        return -1

    cdef void c_load(self, const double* q, const double* qd) noexcept nogil:
        """Load (q, qd) (n entries each) into the extended buffers for
        :meth:`c_element_power` (which then reads and may perturb ``qx``/``qdx``)."""
        memcpy(self.qx, q, self.n * sizeof(double))
        memcpy(self.qdx, qd, self.n * sizeof(double))
        memset(self.Qx, 0, (self.n + 10) * sizeof(double))

    cdef Py_ssize_t c_element_power(self, Py_ssize_t g, Py_ssize_t e, double t,
                                    const double* fv, double* P) noexcept nogil:
        """P[0] = the non-conservative power of element ``e`` of group ``g`` alone at
        the loaded ``qx``/``qdx`` (its forces land in the scratch ``Qx``): the W row
        of the semi-analytic DI/CS Jacobian (``_dynamics.CompiledRHS.c_jac``) differences
        only the elements on a perturbed coordinate's body.  Returns -1 or ``e`` when
        the element cannot be evaluated."""
        cdef FGroup G1 = self.groups[g]
        G1.ne = 1
        G1.boff = G1.boff + e * G1.nb
        G1.par = G1.par + e * G1.npar
        G1.fidx = G1.fidx + e * G1.nfun
        P[0] = 0.0
        if _accumulate(&G1, self.qx, self.qdx, t, fv, self.Qx, P) >= 0:
            return e
        return -1

    def power_nc(self, const double[::1] q not None, const double[::1] qd not None,
                 const double[:, ::1] fv, double t=0.0):
        """Power of the non-conservative parts of every compiled group at time t
        (the sum of the references' ``power_nc``); NaN when an element cannot be
        evaluated."""
        cdef double P = 0.0
        cdef Py_ssize_t g
        if q.shape[0] != self.n or qd.shape[0] != self.n:
            raise ValueError(f"q and qd must have {self.n} entries")
        _need_fv(fv, self.need_fv)
        if self.n:
            memset(self.Qx, 0, self.n * sizeof(double))
            memcpy(self.qx, &q[0], self.n * sizeof(double))
            memcpy(self.qdx, &qd[0], self.n * sizeof(double))
        cdef const double* fp = NULL if fv is None or fv.shape[0] == 0 else &fv[0, 0]
        for g in range(self.ng):
            if _accumulate(&self.groups[g], self.qx, self.qdx, t, fp, self.Qx, &P) >= 0:
                return float("nan")
        return P

    def repeat_forces(self, const double[::1] q not None, const double[::1] qd not None,
                      double t, const double[:, ::1] fv, double[::1] Q not None,
                      Py_ssize_t count):
        """Q := the forces, evaluated ``count`` times in C without the GIL
        (benchmarks/run.py: the per-call cost of a group without Python's).
        Returns -1, or the failing group."""
        cdef Py_ssize_t k, bad = -1
        if q.shape[0] != self.n or qd.shape[0] != self.n or Q.shape[0] != self.n:
            raise ValueError(f"q, qd and Q must have {self.n} entries")
        _need_fv(fv, self.need_fv)
        _need_dim("count", count)
        if self.n == 0:
            return -1
        cdef const double* fp = NULL if fv is None or fv.shape[0] == 0 else &fv[0, 0]
        with nogil:
            for k in range(count):
                memset(&Q[0], 0, self.n * sizeof(double))
                bad = self.c_forces(&q[0], &qd[0], t, fp, &Q[0], NULL)
                if bad >= 0:
                    break
        return bad


cdef Py_ssize_t _accumulate(FGroup* G, const double* q, const double* qd, double t,
                            const double* fv, double* Q, double* P) noexcept nogil:
    """Add the group's forces into Q and, when ``P`` is not NULL, the power of their
    non-conservative parts into ``P[0]`` (the ``power_nc`` of the references);
    return -1, or the index of a failing element.  ``t`` reaches only external
    kernels (the built-ins read their time functions from ``fv``)."""
    cdef Py_ssize_t e, bi, bj
    cdef const double* p
    cdef double c, s, cj, sj, Six, Siy, Sjx, Sjy, lx, ly, L, ux, uy, Ld, f, fx, fy, n
    cdef double vx, vy, nx, ny, d, delta, pe, fel, fn, ft, vt, dd, Xix, Xiy, Xjx, Xjy
    cdef double pw = 0.0
    if G.kind == F_EXTERNAL:
        return _external_forces(G, q, qd, t, fv, Q, P)
    if G.kind >= S_TSDA:
        for e in range(G.ne):
            if _spatial_element(G, e, q, qd, fv, Q, &pw) >= 0:
                return e
        if P != NULL:
            P[0] += pw
        return -1
    for e in range(G.ne):
        p = G.par + e * G.npar
        bi = G.boff[e * G.nb]
        if G.kind == F_TSDA:
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            Sjx = cj * p[2] - sj * p[3]; Sjy = sj * p[2] + cj * p[3]
            lx = q[bj] + Sjx - q[bi] - Six
            ly = q[bj + 1] + Sjy - q[bi + 1] - Siy
            L = sqrt(lx * lx + ly * ly)
            if not (L >= MIN_LENGTH):
                return e
            ux = lx / L; uy = ly / L
            # l_dot = rd_j + w_j R S_j - rd_i - w_i R S_i,  R S = (-S_y, S_x)
            Ld = (ux * (qd[bj] - qd[bj + 2] * Sjy - qd[bi] + qd[bi + 2] * Siy)
                  + uy * (qd[bj + 1] + qd[bj + 2] * Sjx - qd[bi + 1] - qd[bi + 2] * Six))
            f = p[5] * Ld + fv[3 * G.fidx[e]]
            pw -= f * Ld
            f += p[4] * (L - p[6])
            fx = f * ux; fy = f * uy
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Six * fy - Siy * fx
            Q[bj] -= fx; Q[bj + 1] -= fy; Q[bj + 2] -= Sjx * fy - Sjy * fx
        elif G.kind == F_RSDA:
            bj = G.boff[e * 2 + 1]
            d = qd[bj + 2] - qd[bi + 2]
            n = p[1] * d + fv[3 * G.fidx[e]]
            pw -= n * d
            n += p[0] * (q[bj + 2] - q[bi + 2] - p[2])
            Q[bi + 2] += n
            Q[bj + 2] -= n
        elif G.kind == F_FORCE:
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            fx = fv[3 * G.fidx[e * 2]]
            fy = fv[3 * G.fidx[e * 2 + 1]]
            if p[2] > 0.5:          # components in body axes: f = A f'
                f = c * fx - s * fy
                fy = s * fx + c * fy
                fx = f
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Six * fy - Siy * fx
            pw += fx * (qd[bi] - qd[bi + 2] * Siy) + fy * (qd[bi + 1] + qd[bi + 2] * Six)
        elif G.kind == F_TORQUE:
            bj = G.boff[e * 2 + 1]
            n = fv[3 * G.fidx[e]]
            Q[bi + 2] += n
            Q[bj + 2] -= n
            pw += n * (qd[bi + 2] - qd[bj + 2])
        elif G.kind == F_DRAG:
            # par = [s'_x, s'_y, 0.5 c_d rho A, c, wind_x, wind_y]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            vx = qd[bi] - qd[bi + 2] * Siy - p[4]
            vy = qd[bi + 1] + qd[bi + 2] * Six - p[5]
            f = -(p[2] * sqrt(vx * vx + vy * vy) + p[3])
            fx = f * vx; fy = f * vy
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Six * fy - Siy * fx
            pw += fx * (qd[bi] - qd[bi + 2] * Siy) + fy * (qd[bi + 1] + qd[bi + 2] * Six)
        elif G.kind == F_DAMPING:
            # par = [d_x, d_y, d_phi]
            Q[bi] -= p[0] * qd[bi]
            Q[bi + 1] -= p[1] * qd[bi + 1]
            Q[bi + 2] -= p[2] * qd[bi + 2]
            pw -= (p[0] * qd[bi] * qd[bi] + p[1] * qd[bi + 1] * qd[bi + 1]
                   + p[2] * qd[bi + 2] * qd[bi + 2])
        elif G.kind == F_CONTACT:
            # par = [s'_x, s'_y, radius, l'_x, l'_y, n'_x, n'_y, k, c, e, mu, v_eps,
            #        damping model (0 hunt_crossley, 1 compression, 2 linear),
            #        friction model (0 tanh, 1 linear)];  body i = disc, j = line body
            bj = G.boff[e * 2 + 1]
            c = cos(q[bi + 2]); s = sin(q[bi + 2])
            cj = cos(q[bj + 2]); sj = sin(q[bj + 2])
            Six = c * p[0] - s * p[1]; Siy = s * p[0] + c * p[1]
            nx = cj * p[5] - sj * p[6]; ny = sj * p[5] + cj * p[6]
            # d = n . (r_P - r_L)
            d = (nx * (q[bi] + Six - q[bj] - (cj * p[3] - sj * p[4]))
                 + ny * (q[bi + 1] + Siy - q[bj + 1] - (sj * p[3] + cj * p[4])))
            delta = p[2] - d
            if not (delta > 0.0):
                continue
            # contact point X = r_P - d n, relative to each body's origin
            Xix = Six - d * nx; Xiy = Siy - d * ny
            Xjx = q[bi] + Xix - q[bj]; Xjy = q[bi + 1] + Xiy - q[bj + 1]
            vx = (qd[bi] - qd[bi + 2] * Xiy) - (qd[bj] - qd[bj + 2] * Xjy)
            vy = (qd[bi + 1] + qd[bi + 2] * Xix) - (qd[bj + 1] + qd[bj + 2] * Xjx)
            dd = -(nx * vx + ny * vy)
            vt = ny * vx - nx * vy
            pe = pow(delta, p[9])
            fel = p[7] * pe
            if p[12] < 0.5:
                fn = fel + p[8] * pe * dd
            elif p[12] < 1.5:
                fn = fel + (p[8] * dd if dd > 0.0 else 0.0)
            else:
                fn = fel + p[8] * dd
            if fn < 0.0:
                fn = 0.0
            if p[13] < 0.5:
                ft = -p[10] * fn * tanh(vt / p[11])
            else:
                f = vt / p[11]
                if f > 1.0:
                    f = 1.0
                elif f < -1.0:
                    f = -1.0
                ft = -p[10] * fn * f
            # F = fn n + ft t with t = (n_y, -n_x)
            fx = fn * nx + ft * ny; fy = fn * ny - ft * nx
            Q[bi] += fx; Q[bi + 1] += fy; Q[bi + 2] += Xix * fy - Xiy * fx
            Q[bj] -= fx; Q[bj + 1] -= fy; Q[bj + 2] -= Xjx * fy - Xjy * fx
            pw += -(fn - fel) * dd + ft * vt
    if P != NULL:
        P[0] += pw
    return -1

