# Shared by the kernel modules (included, not imported): the BLAS and LAPACK routines
# of SciPy's OpenBLAS (``scipy.linalg.cython_blas`` / ``cython_lapack``), bound on
# first use.  A ``cimport`` of those modules would load them -- SciPy's package
# ``__init__`` and its OpenBLAS library -- when a kernel module is imported, although
# small systems never call them (the hand-written factorizations of _schur.pxi and
# the dense paths below a size threshold).  The wrappers below have the names and
# signatures of SciPy's declarations and call the very same functions (the pointers
# of the modules' ``__pyx_capi__`` capsules, as a cimport would), so the results are
# those of the cimport bit for bit.
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer

cdef extern from "Python.h":
    void Py_FatalError(const char *message) nogil

ctypedef void (*_dgetrf_t)(int *m, int *n, double *a, int *lda, int *ipiv,
                           int *info) noexcept nogil
ctypedef void (*_dgetrs_t)(char *trans, int *n, int *nrhs, double *a, int *lda, int *ipiv,
                           double *b, int *ldb, int *info) noexcept nogil
ctypedef void (*_dpotrf_t)(char *uplo, int *n, double *a, int *lda, int *info) noexcept nogil
ctypedef void (*_dpotrs_t)(char *uplo, int *n, int *nrhs, double *a, int *lda, double *b,
                           int *ldb, int *info) noexcept nogil
ctypedef double (*_ddot_t)(int *n, double *dx, int *incx, double *dy,
                           int *incy) noexcept nogil
ctypedef void (*_dgemv_t)(char *trans, int *m, int *n, double *alpha, double *a, int *lda,
                          double *x, int *incx, double *beta, double *y,
                          int *incy) noexcept nogil
ctypedef void (*_dgemm_t)(char *transa, char *transb, int *m, int *n, int *k, double *alpha,
                          double *a, int *lda, double *b, int *ldb, double *beta, double *c,
                          int *ldc) noexcept nogil

cdef _dgetrf_t _p_dgetrf = NULL
cdef _dgetrs_t _p_dgetrs = NULL
cdef _dpotrf_t _p_dpotrf = NULL
cdef _dpotrs_t _p_dpotrs = NULL
cdef _ddot_t _p_ddot = NULL
cdef _dgemv_t _p_dgemv = NULL
cdef _dgemm_t _p_dgemm = NULL
cdef bint _blas_lapack_bound = False


cdef void* _capi_pointer(dict capi, str name, int nargs) except NULL:
    """The C function ``name`` of a Cython module's ``__pyx_capi__``, its signature
    checked for the argument count of SciPy's declaration."""
    cdef object cap = capi[name]
    cdef const char* sig = PyCapsule_GetName(cap)
    cdef bytes text = b"" if sig == NULL else <bytes>sig
    if not text or text.count(b",") != nargs - 1:
        raise ImportError(f"SciPy's {name} has an unexpected C signature: {text!r}")
    return PyCapsule_GetPointer(cap, sig)


cdef void _bind_blas_lapack() noexcept with gil:
    """Bind the routines (once per module).  SciPy is a dependency of mbcore and
    ``mbcore._ext`` checks at import that these modules are installed, so a failure
    here means a broken SciPy: the process stops with the reason (a NULL routine would
    crash anyway)."""
    global _p_dgetrf, _p_dgetrs, _p_dpotrf, _p_dpotrs, _p_ddot, _p_dgemv, _p_dgemm
    global _blas_lapack_bound
    if _blas_lapack_bound:
        return
    try:
        from mbcore._ext import blas_lapack_capi
        blas, lapack = blas_lapack_capi()
        _p_dgetrf = <_dgetrf_t>_capi_pointer(lapack, "dgetrf", 6)
        _p_dgetrs = <_dgetrs_t>_capi_pointer(lapack, "dgetrs", 9)
        _p_dpotrf = <_dpotrf_t>_capi_pointer(lapack, "dpotrf", 5)
        _p_dpotrs = <_dpotrs_t>_capi_pointer(lapack, "dpotrs", 8)
        _p_ddot = <_ddot_t>_capi_pointer(blas, "ddot", 5)
        _p_dgemv = <_dgemv_t>_capi_pointer(blas, "dgemv", 11)
        _p_dgemm = <_dgemm_t>_capi_pointer(blas, "dgemm", 13)
    except BaseException as exc:
        reason = f"mbcore: SciPy's BLAS/LAPACK could not be loaded ({exc!r})".encode()
        Py_FatalError(reason)
    _blas_lapack_bound = True


cdef inline void dgetrf(int *m, int *n, double *a, int *lda, int *ipiv,
                        int *info) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    _p_dgetrf(m, n, a, lda, ipiv, info)


cdef inline void dgetrs(char *trans, int *n, int *nrhs, double *a, int *lda, int *ipiv,
                        double *b, int *ldb, int *info) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    _p_dgetrs(trans, n, nrhs, a, lda, ipiv, b, ldb, info)


cdef inline void dpotrf(char *uplo, int *n, double *a, int *lda, int *info) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    _p_dpotrf(uplo, n, a, lda, info)


cdef inline void dpotrs(char *uplo, int *n, int *nrhs, double *a, int *lda, double *b,
                        int *ldb, int *info) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    _p_dpotrs(uplo, n, nrhs, a, lda, b, ldb, info)


cdef inline double ddot(int *n, double *dx, int *incx, double *dy, int *incy) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    return _p_ddot(n, dx, incx, dy, incy)


cdef inline void dgemv(char *trans, int *m, int *n, double *alpha, double *a, int *lda,
                       double *x, int *incx, double *beta, double *y,
                       int *incy) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    _p_dgemv(trans, m, n, alpha, a, lda, x, incx, beta, y, incy)


cdef inline void dgemm(char *transa, char *transb, int *m, int *n, int *k, double *alpha,
                       double *a, int *lda, double *b, int *ldb, double *beta, double *c,
                       int *ldc) noexcept nogil:
    if not _blas_lapack_bound:
        _bind_blas_lapack()
    _p_dgemm(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
