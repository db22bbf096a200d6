# The end of a post-step projection of the compiled right-hand sides that project
# (ext/_dynamics.pyx, ext/plugins/_penalty.pyx; included after _eval_status.pxi and
# the cimports of isfinite and memcpy).

cdef inline int store_projected(Py_ssize_t n, const double* q, const double* qd,
                                double* y) noexcept nogil:
    """The end of a post-step projection: y = [q; qd] (the first 2n entries) and 1,
    or -NOT_FINITE with y unchanged when an entry is not finite."""
    cdef Py_ssize_t i
    for i in range(n):
        if not (isfinite(q[i]) and isfinite(qd[i])):
            return -NOT_FINITE
    memcpy(y, q, n * sizeof(double))
    memcpy(y + n, qd, n * sizeof(double))
    return 1
