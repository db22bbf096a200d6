# The constraint of the spatial body kind (included by _planar.pyx): the Euler-parameter
# normalization p^T p - 1 = 0 of every spatial body (Nikravesh (1988), Eqs. 6.23, 7.33;
# mbcore.elements.bodykinds), a direct-layout kernel of the compiled plugin tier like
# any element type's.  One equation, one body, the 7 Euler-parameter columns
# [r, p]: Jacobian [0, 0, 0, 2 p^T], nu = 0, gamma = -2 pdot^T pdot.

cdef mbcore_index _euler_phi(const mbcore_constraint_group* G, const double* q, double t,
                             const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e, o
    for e in range(G.ne):
        o = G.boff[e] + 3
        out[G.row[e]] = (q[o] * q[o] + q[o + 1] * q[o + 1] + q[o + 2] * q[o + 2]
                         + q[o + 3] * q[o + 3]) - 1.0
    return -1


cdef mbcore_index _euler_jac(const mbcore_constraint_group* G, const double* q, double t,
                             const double* fv, double* J) noexcept nogil:
    cdef Py_ssize_t e, o
    cdef const mbcore_index* jp
    for e in range(G.ne):
        jp = G.jpos + e * G.njac
        o = G.boff[e] + 3
        J[jp[0]] = 0.0; J[jp[1]] = 0.0; J[jp[2]] = 0.0
        J[jp[3]] = 2.0 * q[o]; J[jp[4]] = 2.0 * q[o + 1]
        J[jp[5]] = 2.0 * q[o + 2]; J[jp[6]] = 2.0 * q[o + 3]
    return -1


cdef mbcore_index _euler_nu(const mbcore_constraint_group* G, const double* q, double t,
                            const double* fv, double* out) noexcept nogil:
    cdef Py_ssize_t e
    for e in range(G.ne):
        out[G.row[e]] = 0.0
    return -1


cdef mbcore_index _euler_gamma(const mbcore_constraint_group* G, const double* q,
                               const double* qd, double t, const double* fv,
                               double* out) noexcept nogil:
    cdef Py_ssize_t e, o
    for e in range(G.ne):
        o = G.boff[e] + 3
        out[G.row[e]] = -2.0 * (qd[o] * qd[o] + qd[o + 1] * qd[o + 1] + qd[o + 2] * qd[o + 2]
                                + qd[o + 3] * qd[o + 3])
    return -1


cdef mbcore_constraint_kernel _EULER_KERNEL
_EULER_KERNEL.abi_version = MBCORE_ABI_VERSION
_EULER_KERNEL.name = b"euler_normalization"
_EULER_KERNEL.body_kind = MBCORE_BODY_SPATIAL
_EULER_KERNEL.n_equations = 1
_EULER_KERNEL.n_bodies = 1
_EULER_KERNEL.n_par = 0
_EULER_KERNEL.n_fun = 0
_EULER_KERNEL.holonomic = 1
_EULER_KERNEL.phi = _euler_phi
_EULER_KERNEL.jacobian = _euler_jac
_EULER_KERNEL.nu = _euler_nu
_EULER_KERNEL.gamma = _euler_gamma
_EULER_KERNEL.reason = NULL
_EULER_KERNEL.scatter = MBCORE_SCATTER_DIRECT
_EULER_KERNEL.n_extra = 0
_EULER_KERNEL.stateful = 0

#: the kernel of the spatial body kind's normalization constraint (its type's c_kernel)
EULER_NORMALIZATION = PyCapsule_New(&_EULER_KERNEL, MBCORE_CONSTRAINT_CAPSULE, NULL)
