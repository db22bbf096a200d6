# Shared by the kernel modules (included, not imported): argument checks done before
# any code without the GIL runs (docs/reliability.md).  A wrong size or an
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


# ---- scalars (a NaN fails every comparison, so each test is written to refuse it)
from libc.math cimport isfinite as _b_isfinite


cdef int _positive(str what, double x, bint inf_ok=False) except -1:
    """ValueError unless ``x > 0`` and finite (``inf_ok``: +inf allowed too)."""
    if not (x > 0.0 and (inf_ok or _b_isfinite(x))):
        raise ValueError(f"{what} = {x} must be > 0" + ("" if inf_ok else " and finite"))
    return 0


cdef int _in_range(str what, double x, double lo, double hi) except -1:
    """ValueError unless ``lo <= x <= hi`` (finite bounds: x finite too)."""
    if not (lo <= x <= hi):
        raise ValueError(f"{what} = {x} is outside [{lo}, {hi}]")
    return 0


cdef int _tolerances(str who, double rtol, double atol) except -1:
    """An error test's tolerances: finite, >= 0 and not both 0."""
    if not (_b_isfinite(rtol) and _b_isfinite(atol) and rtol >= 0.0 and atol >= 0.0
            and rtol + atol > 0.0):
        raise ValueError(f"{who}: rtol = {rtol}, atol = {atol} must be finite, >= 0 and "
                         f"not both 0")
    return 0


cdef int _index(str what, Py_ssize_t i, Py_ssize_t lo, Py_ssize_t hi) except -1:
    """ValueError unless ``lo <= i <= hi`` (an index or a count)."""
    if not lo <= i <= hi:
        raise ValueError(f"{what} = {i} is outside [{lo}, {hi}]")
    return 0


# ---- arrays (O(size) at entry, never in a loop)
cdef int _all_finite(str what, object a) except -1:
    """ValueError when array ``a`` (None: nothing) holds a NaN or an infinity."""
    if a is not None and not bool(np.all(np.isfinite(np.asarray(a)))):
        raise ValueError(f"{what} has non-finite entries")
    return 0


cdef int _size(str what, Py_ssize_t have, Py_ssize_t need) except -1:
    """ValueError unless ``have == need`` (entries of argument ``what``)."""
    if have != need:
        raise ValueError(f"{what} has {have} entries, needs {need}")
    return 0


cdef int _shape2(str what, Py_ssize_t r, Py_ssize_t c, Py_ssize_t rows,
                 Py_ssize_t cols) except -1:
    if r != rows or c != cols:
        raise ValueError(f"{what} has shape ({r}, {c}), needs ({rows}, {cols})")
    return 0


cdef int _pointers(str what, object a, Py_ssize_t count, Py_ssize_t nnz) except -1:
    """A compressed-storage pointer array: ``count + 1`` entries, non-decreasing,
    from >= 0 to <= ``nnz`` (the entries it points into)."""
    p = np.asarray(a)
    if p.shape[0] != count + 1:
        raise ValueError(f"{what} has {p.shape[0]} entries, needs {count + 1}")
    if p[0] < 0 or p[count] > nnz or bool(np.any(np.diff(p) < 0)):
        raise ValueError(f"{what} must be non-decreasing within [0, {nnz}]")
    return 0


# ---- the evaluators a compiled right-hand side calls
cdef int _check_forces(str who, object fe, Py_ssize_t n, Py_ssize_t nfun) except -1:
    """A ForceEvaluator (or None) of a system of ``n`` coordinates whose function
    indices stay within the ``nfun`` time functions."""
    if fe is None:
        return 0
    if fe.n != n:
        raise ValueError(f"{who}: force_evaluator has n = {fe.n}, the system {n} (the "
                         f"force evaluator belongs to another system)")
    if fe.need_fv > nfun:
        raise ValueError(f"{who}: force_evaluator reads {fe.need_fv} time functions, "
                         f"functions has {nfun}")
    return 0


cdef int _check_evaluators(str who, object ev, object fe, object functions, Py_ssize_t n,
                           Py_ssize_t m, Py_ssize_t ndata) except -1:
    """The PlanarEvaluator ``ev`` writes at most ``m`` rows and ``ndata`` Jacobian
    entries of the system of ``n`` coordinates, and ``ev``/``fe`` read at most the
    rows of ``functions`` (the compiled time-function Evaluator, or None)."""
    cdef Py_ssize_t nfun = 0 if functions is None else functions.size
    if ev is None:
        raise TypeError(f"{who}: evaluator is None")
    if ev.n != n:
        raise ValueError(f"{who}: evaluator has n = {ev.n}, the system {n} (the "
                         f"evaluators belong to another system)")
    if ev.need_out > m:
        raise ValueError(f"{who}: evaluator writes {ev.need_out} constraint rows, m = {m}")
    if ev.need_data > ndata:
        raise ValueError(f"{who}: evaluator writes {ev.need_data} Jacobian entries, jdata "
                         f"has {ndata}")
    if ev.need_fv > nfun:
        raise ValueError(f"{who}: evaluator reads {ev.need_fv} time functions, functions "
                         f"has {nfun}")
    return _check_forces(who, fe, n, nfun)


cdef object _kept_rows(object rows, Py_ssize_t m, str who):
    """The constraint rows a compiled object solves with (``rows``; None: all m) as
    an intp array, after checking they are distinct rows 0 <= row < m; ValueError
    naming ``who`` otherwise."""
    if rows is None:
        return np.arange(max(m, 0), dtype=np.intp)
    r = np.ascontiguousarray(rows, dtype=np.intp)
    if r.ndim != 1 or (r.size and (r.min() < 0 or r.max() >= m)) \
            or np.unique(r).size != r.size:
        raise ValueError(f"{who}: rows must be distinct constraint rows "
                         f"(0 <= row < m = {m})")
    return r
