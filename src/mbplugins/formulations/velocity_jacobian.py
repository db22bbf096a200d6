"""The velocity rows of the Newton matrices of the DAE forms (``ggl``, ``stiff``) for
spatial bodies, analytically.

With Euler parameters the DAE forms carry unit mass on the velocities and the
accelerations inside f (Formulation I made regular, :mod:`mbcore.system.mass`):

    f_v = a = (M + alpha p p^T)^-1 (F - b* - alpha p pd^T pd),   F = Q(q, v, t) + P^T lam

(M = diag(m I3, 4 L^T J' L) per body, b* = 8 L(pd)^T J' L(p) pd: Nikravesh (1988),
Eqs. 11.22, 11.26-11.32; P the constraint rows of the form).  Differentiating
``(M + alpha p p^T) a + b* + alpha p pd^T pd = F`` at the state gives

    da/dq = (M + alpha p p^T)^-1 (K + d(P^T lam)/dq - Dq)
    da/dv = (M + alpha p p^T)^-1 (C - Dv)
    da/dlam = (M + alpha p p^T)^-1 P^T

with ``K = dQ/dq``, ``C = dQ/dv`` (:meth:`mbcore.System.force_jacobians`: analytic per
built-in force type in the Euler-parameter form ``[f, 2 G^T n]``, Nikravesh (1988),
Eqs. 11.1-11.7) and the 4 x 4 blocks ``Dq``, ``Dv`` of the inertial terms
(:meth:`mbcore.system.mass.SpatialMass.inertial_jacobians`, all bodies at once); the
constraint term ``d(P^T lam)/dq`` comes from the caller (differences of the
constraint rows alone: the constraint kernels have no Hessians)."""
from __future__ import annotations

import numpy as np

__all__ = ["velocity_blocks"]


def velocity_blocks(mass, q: np.ndarray, v: np.ndarray, a: np.ndarray, Fq: np.ndarray,
                    Fv: np.ndarray, PT: np.ndarray, compiled=None
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(da/dq, da/dv, da/dlam)`` of the accelerations ``a`` (the velocity rows of f at
    ``(q, v)``) from ``Fq = dF/dq`` and ``Fv = dF/dv`` (dense n x n) and the reaction
    columns ``PT`` (n x m) of ``F = Q + PT lam``; ``mass``: the System's
    :class:`mbcore.system.mass.SpatialMass` (module docstring).  One mass solve of
    ``[Fq - Dq, Fv - Dv, PT]`` (n x (2n + m)): NumPy (this function: the reference), or
    in one C call of a compiled DAE right-hand side (``compiled``:
    ``CompiledGGL.velocity_columns``, the same formulas)."""
    n = len(q)
    X = np.empty((n, 2 * n + PT.shape[1]))
    X[:, :n] = Fq
    X[:, n:2 * n] = Fv
    X[:, 2 * n:] = PT
    if compiled is not None:
        compiled.velocity_columns(np.ascontiguousarray(q, dtype=float),
                                  np.ascontiguousarray(v, dtype=float),
                                  np.ascontiguousarray(a, dtype=float), X)
        return X[:, :n], X[:, n:2 * n], X[:, 2 * n:]
    if mass.nb:
        Dq, Dv = mass.inertial_jacobians(q, v, a)
        r, c = mass.p_idx[:, :, None], mass.p_idx[:, None, :]
        X[r, c] -= Dq
        X[r, n + c] -= Dv
    X = mass.solve_columns(q, X)
    return X[:, :n], X[:, n:2 * n], X[:, 2 * n:]
