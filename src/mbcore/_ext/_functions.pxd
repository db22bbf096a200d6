# C-level interface of mbcore._ext._functions (cimported by _dynamics).
cdef struct ErrInfo:
    Py_ssize_t index
    int code
    int op
    double value


cdef class Evaluator:
    cdef readonly Py_ssize_t size
    cdef object _keep, _on_error
    cdef const int* kinds
    cdef const Py_ssize_t* foff
    cdef const Py_ssize_t* fcnt
    cdef const Py_ssize_t* ioff
    cdef const Py_ssize_t* icnt
    cdef const double* fdata
    cdef const int* idata
    cdef Py_ssize_t* cache
    cdef double* stack

    cdef int run(self, double t, double* out, ErrInfo* err) noexcept nogil
