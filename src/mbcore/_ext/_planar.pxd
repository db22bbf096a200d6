# C-level interface of mbcore._ext._planar (cimported by _dynamics).
ctypedef struct Group:
    int kind                    # kernel code (>= 100: spatial, see ext/_spatial.pxi)
    Py_ssize_t ne, nb, m, npar, nfun, njac, nx
    Py_ssize_t ncol             # Jacobian columns per body: 3 (planar), 7 (spatial)
    const Py_ssize_t* boff
    const Py_ssize_t* xoff      # (ne, nx) offsets of artificial coordinates in q
    const Py_ssize_t* row
    const double* par           # the System group's own array (the rotation driver
                                # writes its tracked angle there)
    const Py_ssize_t* fidx
    const Py_ssize_t* jpos


cdef class PlanarEvaluator:
    cdef Group* groups
    cdef Py_ssize_t ng
    cdef Py_ssize_t n
    cdef double* qx             # extended q: n + 10 (planar ground at n, spatial at n + 3)
    cdef double* qdx
    cdef list _keep

    cdef _set(self, Py_ssize_t k, dict g)
    cdef int _load(self, const double[::1] q) except -1
    cdef void c_phi(self, const double* fv, double* out) noexcept nogil
    cdef void c_jacobian(self, double* data) noexcept nogil
    cdef void c_nu(self, const double* fv, double* out) noexcept nogil
    cdef void c_gamma(self, const double* fv, double* out) noexcept nogil
