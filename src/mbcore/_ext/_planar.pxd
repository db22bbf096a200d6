# C-level interface of mbcore._ext._planar (cimported by _dynamics, _cp).
from mbcore.plugin cimport mbcore_constraint_kernel, mbcore_constraint_group

ctypedef struct Group:
    bint direct                 # the kernel writes by row / jpos (ABI v2 direct layout);
                                # else (ne, m) rows and blocks into rows / jblk
    Py_ssize_t ne, nb, m, npar, nfun, njac, nx
    Py_ssize_t ncol             # Jacobian columns per body: 3 (planar), 7 (spatial)
    const Py_ssize_t* boff
    const Py_ssize_t* xoff      # (ne, nx) offsets of artificial coordinates in q
    const Py_ssize_t* row
    const double* par           # the System group's own array (the rotation driver
                                # writes its tracked angle there)
    const Py_ssize_t* fidx
    const Py_ssize_t* jpos
    const mbcore_constraint_kernel* ext   # the group's kernel (include/mbcore_plugin.h)
    mbcore_constraint_group abi # the kernel's view of the group (built once)
    double* rows                # block layout: (ne, m) scratch of phi / nu / gamma
    double* jblk                # block layout: (ne, m, nb, ncol) scratch of the Jacobian


cdef class PlanarEvaluator:
    cdef Group* groups
    cdef Py_ssize_t ng
    cdef readonly Py_ssize_t n   # coordinates (checked by the kernels that call it)
    cdef double* qx             # extended q: n + 10 (planar ground at n, spatial at n + 3)
    cdef double* qdx
    cdef list _keep
    # the last failing plugin group and its element (the stages return the group)
    cdef public Py_ssize_t failed_group, failed_element
    # on_failure(group, element, t): raises the named error of a failing plugin
    # element (System._constraint_failed); None: a generic RuntimeError
    cdef public object on_failure
    # entries the packed indices reach (checked against the buffers of every call):
    # rows of phi / nu / gamma, Jacobian data positions, rows of fv
    cdef public Py_ssize_t need_out, need_data, need_fv

    cdef _set(self, Py_ssize_t k, dict g)
    cdef int _load(self, const double[::1] q) except -1
    cdef int _check(self, const double[:, ::1] fv, double[::1] out,
                    double[::1] data) except -1
    # C-level stages (q in qx, qd in qdx): -1, or the group whose plugin kernel
    # refused an element (failed_group / failed_element)
    cdef Py_ssize_t c_phi(self, double t, const double* fv, double* out) noexcept nogil
    cdef Py_ssize_t c_jacobian(self, double t, const double* fv, double* data) noexcept nogil
    cdef Py_ssize_t c_nu(self, double t, const double* fv, double* out) noexcept nogil
    cdef Py_ssize_t c_gamma(self, double t, const double* fv, double* out) noexcept nogil
