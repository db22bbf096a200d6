# Shared by the kernel modules (included, not imported): raw addresses of the packed
# group arrays.  Pointers for empty arrays (never dereferenced) point into these
# module-level arrays, which live as long as the module.
_EMPTY_D = np.zeros(1)
_EMPTY_I = np.zeros(1, dtype=np.intp)


cdef size_t _ptr_d(object a):
    """Address of the first element of a C-contiguous float64 array kept alive by
    the caller (``self._keep``)."""
    cdef double[::1] v = a.reshape(-1) if a.size else _EMPTY_D
    return <size_t> &v[0]


cdef size_t _ptr_i(object a):
    cdef Py_ssize_t[::1] v = a.reshape(-1) if a.size else _EMPTY_I
    return <size_t> &v[0]
