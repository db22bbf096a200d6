"""Projection of a state onto the constraints (TAM 674 (2003), lecture of 7 April).

Positions onto ``Phi(q, t) = 0`` by Gauss-Newton with minimum-norm steps
``dq = -W^-1 Phi_q^T (Phi_q W^-1 Phi_q^T)^-1 Phi`` (position-level rows only), then
velocities onto ``Phi_q qd = nu`` in one linear step in the same metric.  Dense
Jacobians solve in least squares (a redundant set of rows is allowed); sparse ones
factorise ``Phi_q W^-1 Phi_q^T`` by sparse LU and fall back to the dense least
squares where it is singular.  Used after every step by the projection
formulation, and by the drift projection of the direct integration where the
violations pass the run's tolerance.
"""
from __future__ import annotations

import numpy as np

from mbcore.errors import AnalysisError

#: Gauss-Newton iterations of the positions before the projection is refused
ITERATIONS = 10


def _correction(J, winv: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``W^-1 J^T (J W^-1 J^T)^+ b``."""
    if not isinstance(J, np.ndarray):          # sparse (scipy imported by the System)
        from scipy.sparse.linalg import splu
        JW = J.multiply(winv[None, :]).tocsr()
        try:
            x = splu((JW @ J.T).tocsc()).solve(b)
        except RuntimeError:                  # singular: a redundant set of rows
            x = None
        if x is not None and np.all(np.isfinite(x)):
            return JW.T @ x
        J = J.toarray()
    JW = J * winv
    return JW.T @ np.linalg.lstsq(JW @ J.T, b, rcond=1e-12)[0]


def project_state(system, q: np.ndarray, qd: np.ndarray, t: float, winv: np.ndarray,
                  tol: float, tol_velocity: float | None = None,
                  rows: np.ndarray | None = None) -> bool:
    """Project ``q`` and ``qd`` in place; True when either changed.  Positions move
    where ``max |Phi| > tol`` (position-level rows); velocities where the positions
    moved or ``max |Phi_q qd - nu| > tol_velocity`` (default ``tol``).  A projection
    that does not bring the violations within ``tol`` in :data:`ITERATIONS` steps
    raises :class:`~mbcore.errors.AnalysisError` at ``t``.  ``rows``: only these
    constraint rows (the engaged ones of a switching set); default all."""
    s = system
    tol_v = tol if tol_velocity is None else tol_velocity
    use = np.ones(s.m, bool)
    if rows is not None:
        use[:] = False
        use[np.asarray(rows, dtype=np.intp)] = True
    hol = np.asarray(s.holonomic, bool) & use
    phi = s.phi(q, t)[hol]
    changed = False
    for _ in range(ITERATIONS):
        if not phi.size or np.max(np.abs(phi)) <= tol:
            break
        q -= _correction(_jacobian(s, q, t, hol), winv, phi)
        changed = True
        phi = s.phi(q, t)[hol]
    if phi.size and np.max(np.abs(phi)) > tol:
        raise AnalysisError(f"coordinate projection did not converge (|Phi| = "
                            f"{np.max(np.abs(phi)):.3g})", t)
    J = _jacobian(s, q, t, None if rows is None else use)
    r = J @ qd - s.nu(q, t)[use]
    if changed or (r.size and np.max(np.abs(r)) > tol_v):
        qd -= _correction(J, winv, r)
        changed = True
    return changed


def _jacobian(s, q, t, rows):
    """Phi_q as a new array (dense) or a new sparse matrix, on ``rows`` (a mask)."""
    if s.dense:
        J = s.jacobian_dense(q, t)
        return J if rows is None else J[rows]
    from scipy import sparse
    J = sparse.csr_matrix(s.jacobian(q, t), copy=True)
    return J if rows is None else J[np.flatnonzero(rows)]
