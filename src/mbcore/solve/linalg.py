"""Linear-algebra entry points: dense LU (compiled LAPACK or SciPy reference) and a
rank-revealing factorisation for degrees of freedom and redundancy diagnostics
(Nikravesh (1988), §3.3)."""
from __future__ import annotations

import numpy as np


def _sla():
    """scipy.linalg, imported on first use (its import costs ~0.1-0.2 s of
    start-up time)."""
    import scipy.linalg
    return scipy.linalg


class ReferenceLU:
    """Same interface as ``mbcore._ext._linalg.DenseLU``, on scipy.linalg."""

    def __init__(self, n: int):
        self.n = n
        self.pivot_ratio = 0.0
        self.info = 0
        self._lu = None

    def factor(self, a: np.ndarray) -> int:
        n = self.n
        A = np.asarray(a[: n * n]).reshape(n, n)
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # LinAlgWarning on exact singularity
            self._lu = _sla().lu_factor(A, check_finite=False)
        d = np.abs(np.diag(self._lu[0])) if n else np.ones(1)
        self.pivot_ratio = float(d.min() / d.max()) if d.max() > 0 else 0.0
        self.info = int(np.argmin(d) + 1) if d.min() == 0 else 0
        return self.info

    def solve(self, b: np.ndarray, transposed: bool = False) -> None:
        if self.n:
            b[:] = _sla().lu_solve(self._lu, b, trans=1 if transposed else 0, check_finite=False)


def dense_lu(n: int, backend: str):
    """LU factor/solve object of size n for ``backend`` "compiled" or "numpy"."""
    if backend == "compiled":
        from .._ext._linalg import DenseLU
        return DenseLU(n)
    return ReferenceLU(n)


def rank_revealing(jac: np.ndarray, rtol: float = 1e-9):
    """Rank of the Jacobian and which rows are dependent.

    QR with column pivoting of ``jac^T`` (redundant constraints, Nikravesh (1988),
    §3.1.5, Prob. 5.16): the pivot order
    lists the rows from most to least independent; rows beyond the numerical rank
    are redundant or conflicting.  Returns ``(rank, independent_rows,
    dependent_rows, sigma_min_rel)``.
    """
    m, n = jac.shape
    if m == 0:
        return 0, np.array([], int), np.array([], int), 1.0
    _, R, piv = _sla().qr(jac.T, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    scale = d[0] if d.size and d[0] > 0 else 1.0
    rank = int(np.sum(d > rtol * scale))
    return rank, np.sort(piv[:rank]), np.sort(piv[rank:]), float(d[-1] / scale) if d.size else 1.0


def _clear_rank(jac: np.ndarray, rtol: float) -> int | None:
    """The rank from NumPy's singular values when they leave no doubt: none within a
    factor 1e4 of the threshold ``rtol`` (relative to the largest), on a non-empty
    matrix of at most 200 rows and columns; None otherwise."""
    m, n = jac.shape
    if 0 < m <= 200 and 0 < n <= 200 and np.all(np.isfinite(jac)):
        s = np.linalg.svd(jac, compute_uv=False)
        if s[0] > 0:
            rel = s / s[0]
            if not np.any((rel > rtol * 1e-4) & (rel < rtol * 1e4)):
                return int(np.count_nonzero(rel > rtol))
    return None


def numerical_rank(jac: np.ndarray, rtol: float = 1e-9) -> int:
    """``rank_revealing(jac, rtol)[0]``, from NumPy's singular values when they leave
    no doubt (:func:`_clear_rank`).  Otherwise (a near-singular configuration, a
    large model) the pivoted QR itself decides.  Spares a small kinematic run the
    import of scipy.linalg (start-up time)."""
    m, n = jac.shape
    if m == 0 or n == 0:
        return 0
    rank = _clear_rank(jac, rtol)
    return rank if rank is not None else rank_revealing(jac, rtol)[0]


def rank_and_dependent_rows(jac: np.ndarray, rtol: float = 1e-9):
    """``(rank, dependent_rows)`` of :func:`rank_revealing`; a full row rank that
    NumPy's singular values leave no doubt about (:func:`_clear_rank`) spares the
    pivoted QR, and a small dynamic run the import of scipy.linalg."""
    m = jac.shape[0]
    if m == 0 or _clear_rank(jac, rtol) == m:
        return m, np.array([], int)
    rank, _, dependent, _ = rank_revealing(jac, rtol)
    return rank, dependent


def dependent_rows(jac: np.ndarray, rtol: float = 1e-8, weight: float = 0.05) -> np.ndarray:
    """Rows involved in a (near) dependency: those carrying weight > ``weight`` in
    the left singular vectors whose singular value is below ``rtol * sigma_max``
    (the smallest one if none is)."""
    if jac.size == 0:
        return np.array([], int)
    U, s, _ = np.linalg.svd(jac)
    small = np.nonzero(s < rtol * s[0])[0] if s[0] > 0 else np.arange(len(s))
    if len(small) == 0:
        small = np.array([len(s) - 1])
    if jac.shape[0] > len(s):          # more rows than columns: extra left null space
        small = np.concatenate([small, np.arange(len(s), jac.shape[0])])
    w = np.sqrt(np.sum(U[:, small] ** 2, axis=1))
    return np.nonzero(w > weight * w.max())[0]
