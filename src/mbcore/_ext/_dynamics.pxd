# cython: language_level=3
"""C-level interface of mbcore._ext._dynamics: the base of the compiled right-hand
sides that the compiled step loop (``mbcore._ext._steploop``) steps.  Other extension
modules derive from it (``cdef class X(CompiledODE)``) and implement ``c_eval``
(and, with ``post_step`` set, ``c_post_step``)."""


cdef class CompiledODE:
    cdef readonly Py_ssize_t n          # y = [x (n); xdot (n); W]
    cdef public long nfev
    cdef readonly int status
    cdef readonly bint cartesian        # x = the System's q (outputs from its buffers)
    cdef readonly bint analytic_jac     # c_jac is not forward differences of c_eval
    cdef readonly bint post_step        # the loops call c_post_step after each step

    cdef int c_eval(self, double t, const double* y, double* ydot) noexcept nogil
    cdef void c_save(self) noexcept nogil
    cdef int c_post_step(self, double t, double* y, bint count) noexcept nogil
    cdef int c_jac(self, double t, const double* y, Py_ssize_t N, const double* scale,
                   double* J, double* work) noexcept nogil
