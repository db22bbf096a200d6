# C-level interface of mbcore._ext._forces (cimported by _dynamics, _cp, _jcspatial).
from mbcore.plugin cimport mbcore_force_kernel, mbcore_force_group

ctypedef struct FGroup:
    Py_ssize_t ne, nb, npar, nfun
    const Py_ssize_t* boff
    const double* par
    const Py_ssize_t* fidx
    const mbcore_force_kernel* ext    # the group's kernel (mbcore_plugin.h)
    mbcore_force_group abi            # the kernel's view of the group (built once)


cdef class ForceEvaluator:
    cdef FGroup* groups
    cdef Py_ssize_t ng
    cdef readonly Py_ssize_t n         # coordinates (checked by the kernels that call it)
    cdef public Py_ssize_t need_fv     # rows of fv the packed function indices read
    cdef double* qx
    cdef double* qdx
    cdef double* Qx
    cdef list _keep
    cdef public Py_ssize_t failed_group, failed_element

    cdef _set(self, Py_ssize_t k, dict g)
    cdef Py_ssize_t c_forces(self, const double* q, const double* qd, double t,
                             const double* fv, double* Q, double* P) noexcept nogil
    cdef void c_load(self, const double* q, const double* qd) noexcept nogil
    cdef Py_ssize_t c_element_power(self, Py_ssize_t g, Py_ssize_t e, double t,
                                    const double* fv, double* P) noexcept nogil


cdef class ForceJacobianEvaluator:
    cdef FGroup* groups
    cdef Py_ssize_t ng, n
    cdef Py_ssize_t* boff_out          # first entry of each group's blocks in K / C
    cdef Py_ssize_t* nl
    cdef double* qx
    cdef double* qdx
    cdef list _keep
    cdef public Py_ssize_t size, failed_group, failed_element
    cdef public Py_ssize_t need_fv

    cdef Py_ssize_t c_jacobians(self, const double* q, const double* qd, double t,
                                const double* fv, double* K, double* C) noexcept nogil
