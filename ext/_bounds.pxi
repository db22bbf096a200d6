# Shared by the kernel modules (included, not imported): argument checks done before
# any code without the GIL runs (issue 18, docs/reliability.md).  A wrong size or an
# index out of range is a ValueError naming the argument, never a write outside a
# buffer.


cdef object _extent(object a, Py_ssize_t lo, Py_ssize_t hi, str what):
    """max(a) + 1 (0 for an empty array) after checking lo <= a[i] < hi (hi < 0: no
    upper limit); ValueError naming ``what`` otherwise."""
    arr = np.asarray(a)
    if arr.size == 0:
        return 0
    mn = int(arr.min())
    mx = int(arr.max())
    if mn < lo or (hi >= 0 and mx >= hi):
        raise ValueError(f"{what}: index {mn if mn < lo else mx} is outside "
                         f"[{lo}, {hi if hi >= 0 else 'inf'})")
    return mx + 1


cdef int _need(str what, Py_ssize_t have, Py_ssize_t need) except -1:
    """ValueError unless ``have >= need`` (entries of argument ``what``)."""
    if have < need:
        raise ValueError(f"{what} has {have} entries, needs at least {need}")
    return 0


cdef int _need_fv(const double[:, ::1] fv, Py_ssize_t rows) except -1:
    """``fv`` (the time-function values, shape (k, 3)) has the ``rows`` rows that the
    packed function indices read."""
    if fv is None:
        if rows:
            raise ValueError(f"fv is None, needs shape ({rows}, 3)")
        return 0
    if rows and (fv.shape[0] < rows or fv.shape[1] < 3):
        raise ValueError(f"fv has shape ({fv.shape[0]}, {fv.shape[1]}), needs at least "
                         f"({rows}, 3)")
    return 0


cdef int _need_dim(str what, Py_ssize_t n) except -1:
    if n < 0:
        raise ValueError(f"{what} must be >= 0, got {n}")
    return 0
