# cython: language_level=3
"""Compiled kernel of the spatial compliant contact ``spatial:contact``
(``mbplugins._ext._contact``), reaching the core through the compiled plugin tier
(``mbcore_plugin.h``) exactly as a third-party kernel does: one
``mbcore.force_kernel`` capsule ``CONTACT``, named by the type's ``c_kernel``, with
the forces and the power of their non-conservative part (no analytic Jacobian: the
core differences the compiled right-hand side).  NumPy reference and formulas:
mbplugins.contact.spatial (same packed parameters, same order of operations),
equal to 1e-12 (tests/test_contact3d.py).  Body blocks [x, y, z, e0, e1, e2, e3];
the ground block (r = 0, p = (1, 0, 0, 0)) sits after q in the core's extended
buffers.  Generalised forces in the Euler-parameter form [f, 2 G(p)^T n] with n the
global moment about the body origin (Nikravesh (1988), Eqs. 11.1-11.7).
"""
from cpython.pycapsule cimport PyCapsule_New
from mbcore.plugin cimport (mbcore_force_kernel, mbcore_force_group, mbcore_index,
                            MBCORE_ABI_VERSION, MBCORE_BODY_SPATIAL, MBCORE_FORCE_CAPSULE)

include "_contact_law.pxi"   # the law: _pair and the rotation helpers


cdef mbcore_index _contact_f(const mbcore_force_group* G, const double* q,
                             const double* qd, double t, const double* fv, double* Q,
                             double* P) noexcept nogil:
    """Q += the forces of every element, P[0] += their non-conservative power (P may
    be NULL); -1, or the element whose normal is undefined."""
    cdef Py_ssize_t e, bi, bj
    cdef const double* p
    cdef double Ai[9]
    cdef double Aj[9]
    cdef double wi[3]
    cdef double wj[3]
    cdef double pw = 0.0
    for e in range(G.ne):
        p = G.par + e * G.npar
        bi = G.boff[e * 2]
        bj = G.boff[e * 2 + 1]
        _sA(q + bi + 3, Ai)
        _sA(q + bj + 3, Aj)
        _sGw(q + bi + 3, qd + bi + 3, wi)
        _sGw(q + bj + 3, qd + bj + 3, wj)
        if _pair(p, p, q, qd, bi, bj, Ai, Aj, wi, wj, Q, &pw):
            return e
        if p[21] > 1.5:                   # capsule_plane: the second end sphere
            _pair(p, p + 3, q, qd, bi, bj, Ai, Aj, wi, wj, Q, &pw)
    if P != NULL:
        P[0] += pw
    return -1


cdef mbcore_force_kernel _KERNEL
cdef const char* _REASON = (b"the sphere centres coincide (distance < 1e-12): the "
                            b"contact normal is undefined")

_KERNEL.abi_version = MBCORE_ABI_VERSION
_KERNEL.name = b"spatial_contact"
_KERNEL.body_kind = MBCORE_BODY_SPATIAL
_KERNEL.n_bodies = 2
_KERNEL.n_par = 22
_KERNEL.n_fun = 0
_KERNEL.force = _contact_f
_KERNEL.jacobian = NULL
_KERNEL.reason = _REASON
_KERNEL.stateful = 0
#: the ``spatial_contact`` kernel (a ``mbcore.force_kernel`` capsule)
CONTACT = PyCapsule_New(&_KERNEL, MBCORE_FORCE_CAPSULE, NULL)
