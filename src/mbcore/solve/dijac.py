"""Semi-analytic Jacobian of the DI / CS right-hand side: the NumPy
reference of ``mbcore._ext._dynamics.CompiledRHS.c_jac``.

State ``y = [q; qd; W]``, ``f = [qd; qdd; W']`` with (mbcore's sign, reaction =
+Phi_q^T lam; Nikravesh (1988), §13.3, algorithms DI-4 and CS-1)

    M qdd = Q + Phi_q^T lam,   Phi_q qdd = g,   g = gamma - 2 alpha (Phi_q qd - nu)
                                                      - beta^2 Phi,
    W' = P_nc + lam . (Phi_q qd).

Differentiating at the current (q, qd, qdd, lam):

    M dqdd - Phi_q^T dlam = K dq + C dqd + d(Phi_q^T lam)/dq dq
    Phi_q dqdd            = d(g - Phi_q qdd)/dq dq + dg/dqd dqd

(qdd, lam held fixed inside the derivatives), so ``dqdd/d(q, qd)`` is one solve of
the augmented (KKT) system with 2n right-hand sides — the factorisation of the
evaluation itself.  K = dQ/dq and C = dQ/dqd are exact
(:meth:`mbcore.System.force_jacobians`); the constraint-Hessian terms are forward
differences of constraint quantities alone (``Phi_q^T lam`` and ``g - Phi_q qdd``
in q, ``gamma`` in qd; CS: ``dg/dqd = dgamma/dqd - 2 alpha Phi_q`` exactly), one
constraint-kernel evaluation per column, no force evaluation, no new
factorisation.  The W row: ``dW'/dy = dP_nc/dy + dlam/dy . (Phi_q qd) +
lam . d(Phi_q qd)/dy`` with ``d(Phi_q qd)/dqd = Phi_q`` exact and forward
differences of the power ``P_nc`` alone (force kernels only) and of
``Phi_q qd`` in q.  Step of every difference: 1e-7 (1 + |x_j|) (as
``dae_common.constraint_fd``).  The Jacobian is

    [[0, I, 0], [dqdd/dq, dqdd/dqd, 0], [dW'/dq, dW'/dqd, 0]].

The Newton matrix ``I - c f_y`` of bdf (Nikravesh (1988), §12.4) needs it; DI is
algorithm DI-4 of Nikravesh (1988), §13.3.
"""
from __future__ import annotations

import numpy as np

__all__ = ["di_jacobian", "FD_STEP"]

#: relative step of the constraint and power differences
FD_STEP = 1e-7


def _dense(A):
    return A.toarray() if hasattr(A, "toarray") else np.asarray(A)


def di_jacobian(system, t: float, y: np.ndarray, alpha: float = 0.0,
                beta: float = 0.0) -> np.ndarray:
    """df/dy (2n + 1 square) of the DI (alpha = beta = 0) or CS right-hand side of a
    planar System with a diagonal mass matrix at (t, y = [q; qd; W]) by the formula
    of the module docstring (NumPy reference of ``CompiledRHS.c_jac``)."""
    if system.mass_diag is None:
        raise ValueError("di_jacobian: planar bodies (a diagonal mass matrix) only")
    n, m = system.n, system.m
    N = 2 * n + 1
    y = np.asarray(y, dtype=float)
    q = np.array(y[:n])
    qd = np.array(y[n:2 * n])
    Mv = np.asarray(system.mass_diag, dtype=float)
    stab = alpha != 0.0 or beta != 0.0

    def g_of(qq, vv):
        """(Phi_q, g) at (qq, vv)."""
        P = np.array(system.jacobian_dense(qq, t), dtype=float).reshape(m, n)
        g = np.array(system.gamma(qq, vv, t), dtype=float).reshape(m)
        if stab and m:
            g = g - 2.0 * alpha * (P @ vv - system.nu(qq, t)) - beta * beta * system.phi(qq, t)
        return P, g

    def pnc(qq, vv):
        return system.nonconservative_power(qq, vv, t, compiled=True)

    P0, g0 = g_of(q, qd)
    Q0 = np.array(system.forces(q, qd, t), dtype=float)
    # qdd, lam of the evaluation: [M, -P^T; P, 0] [qdd; lam] = [Q; g]
    A = np.zeros((n + m, n + m))
    A[:n, :n] = np.diag(Mv)
    A[:n, n:] = -P0.T
    A[n:, :n] = P0
    sol = np.linalg.solve(A, np.concatenate([Q0, g0]))
    qdd, lam = sol[:n], sol[n:]
    K, C = system.force_jacobians(q, qd, t)
    R = np.zeros((n + m, 2 * n))
    R[:n, :n] = _dense(K)
    R[:n, n:] = _dense(C)
    w = np.zeros(2 * n)                  # dP_nc/dy + lam . d(Phi_q qd)/dy
    w0 = pnc(q, qd)
    jqd0 = P0 @ qd
    c0 = float(lam @ jqd0)
    b0 = P0.T @ lam
    r0 = g0 - P0 @ qdd
    raw0 = np.array(system.gamma(q, qd, t), dtype=float).reshape(m)
    for j in range(n):
        d = FD_STEP * (1.0 + abs(q[j]))
        qp = q.copy()
        qp[j] = q[j] + d
        d = qp[j] - q[j]
        Pp, gp = g_of(qp, qd)
        R[:n, j] += (Pp.T @ lam - b0) / d
        R[n:, j] = (gp - Pp @ qdd - r0) / d
        w[j] = (pnc(qp, qd) - w0 + float(lam @ (Pp @ qd)) - c0) / d
    for j in range(n):
        d = FD_STEP * (1.0 + abs(qd[j]))
        vp = qd.copy()
        vp[j] = qd[j] + d
        d = vp[j] - qd[j]
        gr = np.array(system.gamma(q, vp, t), dtype=float).reshape(m)
        R[n:, n + j] = (gr - raw0) / d
        if stab and m:
            R[n:, n + j] -= 2.0 * alpha * P0[:, j]
        w[n + j] = (pnc(q, vp) - w0) / d + (b0[j] if m else 0.0)
    X = np.linalg.solve(A, R)            # [dqdd; dlam] per column of (q, qd)
    Jf = np.zeros((N, N))
    Jf[:n, n:2 * n] = np.eye(n)
    Jf[n:2 * n, :2 * n] = X[:n]
    Jf[2 * n, :2 * n] = w + (jqd0 @ X[n:] if m else 0.0)
    return Jf
