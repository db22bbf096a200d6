# cython: language_level=3
"""Compiled block kernels of the dynamic analysis' output rows (``mbcore._ext._output_rows``):
the sums over each row's Jacobian values that :mod:`mbcore.system.output_rows`
computes for a block of rows, in the same order term by term (so bit for bit the
NumPy reference there, ``System.violation_rows`` and ``System.generalised_rows`` on
the NumPy backend).
"""
from libc.math cimport fabs

import numpy as np

include "_bounds.pxi"


def violation_rows_dense(const double[:, :] QD not None, const double[:, ::1] JD not None,
                         const double[:, ::1] PHI not None, const double[:, ::1] NU not None,
                         const Py_ssize_t[:, ::1] pos not None,
                         const Py_ssize_t[:, ::1] col not None, double[:, ::1] out not None):
    """``out[i] = (max_k |Phi_k|, max_k |(Phi_q qd)_k - nu_k|)`` of each row ``i``
    (Nikravesh (1988), Eqs. 3.12-3.14) from its dense Jacobian values ``JD[i]``:
    ``(Phi_q qd)_k = sum_j JD[i, pos[j, k]] qd[col[j, k]]`` over the row's structural
    entries in index order (``col = n``: a padding entry, rate 0).  Reference: the
    dense branch of ``System.violation_rows``."""
    cdef Py_ssize_t R = QD.shape[0], n = QD.shape[1], m = PHI.shape[1], K = pos.shape[0]
    cdef Py_ssize_t i, j, k, c, p
    cdef double acc, v, big, bigv
    cdef const double* qd
    if JD.shape[0] != R or PHI.shape[0] != R or NU.shape[0] != R or out.shape[0] != R:
        raise ValueError(f"QD, JD, PHI, NU and out must have the same rows (got {R}, "
                         f"{JD.shape[0]}, {PHI.shape[0]}, {NU.shape[0]}, {out.shape[0]})")
    _need("NU (columns)", NU.shape[1], m)
    if out.shape[1] != 2 or col.shape[0] != K or pos.shape[1] != m or col.shape[1] != m:
        raise ValueError("violation_rows_dense: out (R, 2), pos and col (k, m)")
    if n > 1 and QD.strides[1] != sizeof(double):
        raise ValueError("QD: the entries of a row must be adjacent")
    if K and m:
        _extent(pos, 0, JD.shape[1], "pos")
        _extent(col, 0, n + 1, "col")
    if R == 0:
        return
    if m == 0 or K == 0:
        raise ValueError("violation_rows_dense: no constraint rows")
    with nogil:
        for i in range(R):
            qd = &QD[i, 0] if n else NULL
            big = 0.0
            bigv = 0.0
            for k in range(m):
                c = col[0, k]
                acc = JD[i, pos[0, k]] * (qd[c] if c < n else 0.0)
                for j in range(1, K):
                    c = col[j, k]
                    acc = acc + JD[i, pos[j, k]] * (qd[c] if c < n else 0.0)
                v = fabs(PHI[i, k])
                if v != v or v > big:           # (a NaN stays: np.max propagates it)
                    big = v
                v = fabs(acc - NU[i, k])
                if v != v or v > bigv:
                    bigv = v
            out[i, 0] = big
            out[i, 1] = bigv


def generalised_rows(const double[:, ::1] JD not None, const double[:, :] LAM not None,
                     const Py_ssize_t[:, :, :, ::1] jb not None,
                     const Py_ssize_t[:, ::1] lr not None, double[:, :, :, ::1] out not None):
    """``out[i, e, b, c] = sum_j JD[i, jb[e, j, b, c]] LAM[i, lr[e, j]]`` (one group's
    ``g_b = (Phi_k)_{q_b}^T lam_k`` of each row, Nikravesh (1988), Eq. 8.50), over
    the element's equations j in index order.  Reference: ``_generalised`` of
    :mod:`mbcore.system.output_rows`."""
    cdef Py_ssize_t R = JD.shape[0], ne = jb.shape[0], me = jb.shape[1]
    cdef Py_ssize_t nb = jb.shape[2], nc = jb.shape[3], i, e, j, b, c
    cdef double acc
    if LAM.shape[0] != R or out.shape[0] != R:
        raise ValueError(f"JD, LAM and out must have the same rows (got {R}, "
                         f"{LAM.shape[0]}, {out.shape[0]})")
    if lr.shape[0] != ne or lr.shape[1] != me or out.shape[1] != ne or out.shape[2] != nb \
            or out.shape[3] != nc:
        raise ValueError("generalised_rows: jb (ne, m, nb, ncol), lr (ne, m), out "
                         "(R, ne, nb, ncol)")
    if me == 0:
        raise ValueError("generalised_rows: elements without equations")
    if ne and nb and nc:
        _extent(jb, 0, JD.shape[1], "jb")
        _extent(lr, 0, LAM.shape[1], "lr")
    if R == 0:
        return
    with nogil:
        for i in range(R):
            for e in range(ne):
                for b in range(nb):
                    for c in range(nc):
                        acc = JD[i, jb[e, 0, b, c]] * LAM[i, lr[e, 0]]
                        for j in range(1, me):
                            acc = acc + JD[i, jb[e, j, b, c]] * LAM[i, lr[e, j]]
                        out[i, e, b, c] = acc
