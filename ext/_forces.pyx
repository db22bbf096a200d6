# cython: language_level=3
"""The compiled force evaluator (``mbcore._ext._forces``).

It knows no force type: every group's kernel is a ``mbcore.force_kernel`` capsule
of the compiled plugin tier (``mbcore_plugin.h``, ABI versions 1-2; docs/plugins.md
"Compiled tier") named by its type's ``c_kernel`` — the built-in types' in
``mbplugins._ext`` (``_planar_forces``, ``_spatial_forces``), a third party's in its
own extension module — validated by :mod:`mbcore.plugins.compiled`.

:class:`ForceEvaluator` accumulates the generalised forces of every compiled group
into Q in one call (one call of the kernel's ``force`` per group), without Python
per element and without allocation; :class:`ForceJacobianEvaluator` (ext/_force_jacobians.pxi)
collects the kernels' Jacobian blocks K = dQ/dq, C = dQ/dqd.  Conventions as in
``_planar``: body offsets index an extended coordinate buffer after q (the planar
ground's zeros, then the spatial ground block); forces on the ground land in
extra slots and are discarded.  :func:`builtin_capsule` copies a kernel capsule
(e.g. a built-in type's) into one of its own, with overridable declarations, and
provides two self-test kernels (tests and benchmarks of the tier).
"""
from libc.math cimport sin, cos, sqrt, pow, tanh, atan2, round
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy, memset
from cpython.pycapsule cimport (PyCapsule_New, PyCapsule_GetPointer, PyCapsule_IsValid,
                                PyCapsule_GetName, PyCapsule_CheckExact)
from mbcore.plugin cimport (mbcore_force_kernel, mbcore_force_group, mbcore_index,
                            mbcore_force_fn, mbcore_force_jacobian_fn, MBCORE_ABI_VERSION,
                            MBCORE_ABI_MIN_VERSION,
                            MBCORE_BODY_PLANAR, MBCORE_BODY_SPATIAL, MBCORE_FORCE_CAPSULE)

import numpy as np

#: the C ABI version this build implements (include/mbcore_plugin.h)
ABI_VERSION = MBCORE_ABI_VERSION
#: the oldest C ABI version this build still loads
ABI_MIN_VERSION = MBCORE_ABI_MIN_VERSION
#: the PyCapsule name of a force kernel
FORCE_CAPSULE = "mbcore.force_kernel"

include "_pointers.pxi"
include "_bounds.pxi"
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
        _abi_group(&G1, &G1.abi)
        if self.groups[g].abi.state != NULL:     # a stateful kernel: its own par, writable
            G1.abi.state = self.groups[g].abi.state + e * G1.npar
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
    return -1, or the index of a failing element."""
    return _external_forces(G, q, qd, t, fv, Q, P)

