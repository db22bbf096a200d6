"""Stiff differential-equation (DAE) method, ADAMS-type (000 §13.3.4, 004 §13.3.4;
spec/algorithms.md §4.6).

The constraints are kept as degenerate (algebraic) equations and the whole
index-3 system is integrated by a stiff BDF method with a Newton corrector
(004 Eqs 13.33-13.35), in mbcore's sign (reaction = +Phi_q^T lam)::

    M s' = Q(q, s, t) + Phi_q^T lam,    q' = s,    0 = Phi(q, t)

with unknowns ``(s, q, lam)`` and consistent starting values (``lam0`` from the
augmented system at t0, ``s0 = qd0``).  Positions satisfy ``Phi = 0`` to the
Newton tolerance at every step; the velocity constraint holds only to the
integration error, as the book describes.

Status: this module is the method (Newton systems and a fixed-step BDF-k driver);
it is not yet a ``formulation`` plugin, because the ``bdf`` integrator's Newton
solve applies the index-2 scaling to every algebraic component and cannot take
the index-3 rescaling below (a formulation-supplied Newton solve is needed there).

The Newton matrix of 13.31 in the unknowns ``(ds, dq, dlam)`` has a condition
number growing like ``h^-3``; :func:`reduced_newton_step` implements the reduced,
rescaled (n + m) system the spec derives (eliminate ``ds = dq/(hb) + r2``, scale
``dlam' = (hb)^2 dlam``), whose condition number stays O(1) as ``h -> 0``, and
:func:`full_newton_matrix` / :func:`reduced_newton_matrix` expose both matrices
(tests compare their iterates and condition numbers).  :func:`bdf_stiff_solve`
is the fixed-step BDF-k driver of §4.6 built on the reduced step.
"""
from __future__ import annotations

import numpy as np

from mbcore.errors import AnalysisError

#: BDF_k in the form  y_{n+1} = sum_j a_j y_{n+1-j} + h b y'_{n+1}  (004 Table 12.3)
BDF_COEFFS = {1: ((1.0,), 1.0),
              2: ((4 / 3, -1 / 3), 2 / 3),
              3: ((18 / 11, -9 / 11, 2 / 11), 6 / 11),
              4: ((48 / 25, -36 / 25, 16 / 25, -3 / 25), 12 / 25)}


# -- the Newton systems of spec §4.6 ---------------------------------------------
def _parts(system, q, s, lam, t, eps=1e-7):
    """M, g_q + (Phi_q^T lam)_q (forward differences), g_s, Phi_q at (q, s, lam)."""
    n = system.n
    M = np.diag(system.mass_diag)

    def force(qq, ss):
        return system.forces(qq, ss, t) + system.jacobian_dense(qq, t).T @ lam

    f0 = force(q, s).copy()
    Kq = np.zeros((n, n))
    Ks = np.zeros((n, n))
    for j in range(n):
        d = eps * (1.0 + abs(q[j]))
        qp = q.copy()
        qp[j] += d
        Kq[:, j] = (force(qp, s) - f0) / d
        d = eps * (1.0 + abs(s[j]))
        sp_ = s.copy()
        sp_[j] += d
        Ks[:, j] = (force(q, sp_) - f0) / d
    return M, Kq, Ks, system.jacobian_dense(q, t).copy()


def residuals(system, q, s, lam, t, sdot, qdot):
    """r1 = M s' - Q - Phi_q^T lam, r2 = q' - s, r3 = Phi (13.33-13.35)."""
    J = system.jacobian_dense(q, t)
    r1 = system.mass_diag * sdot - system.forces(q, s, t) - J.T @ lam
    return r1, qdot - s, system.phi(q, t).copy()


def full_newton_matrix(system, q, s, lam, t, hb):
    """The (2n + m) iteration matrix of 13.31 in the unknowns (ds, dq, dlam)."""
    n, m = system.n, system.m
    M, Kq, Ks, Jq = _parts(system, q, s, lam, t)
    A = np.zeros((2 * n + m, 2 * n + m))
    A[:n, :n] = M / hb - Ks
    A[:n, n:2 * n] = -Kq
    A[:n, 2 * n:] = -Jq.T
    A[n:2 * n, :n] = -np.eye(n)
    A[n:2 * n, n:2 * n] = np.eye(n) / hb
    A[2 * n:, n:2 * n] = Jq
    return A


def reduced_newton_matrix(system, q, s, lam, t, hb):
    """The reduced, rescaled (n + m) matrix of spec §4.6 in (dq, (hb)^2 dlam)."""
    n, m = system.n, system.m
    M, Kq, Ks, Jq = _parts(system, q, s, lam, t)
    A = np.zeros((n + m, n + m))
    A[:n, :n] = M - hb * Ks - hb ** 2 * Kq
    A[:n, n:] = -Jq.T
    A[n:, :n] = Jq
    return A, M, Ks


def reduced_newton_step(system, q, s, lam, t, hb, r1, r2, r3):
    """One Newton correction (ds, dq, dlam) through the reduced system: the same
    iterate as the full 13.31 system (spec §4.6, ✓num), with O(1) condition."""
    n = system.n
    A, M, Ks = reduced_newton_matrix(system, q, s, lam, t, hb)
    rhs = np.concatenate([-hb ** 2 * r1 - hb * (M - hb * Ks) @ r2, -r3])
    x = np.linalg.solve(A, rhs)
    dq = x[:n]
    dlam = x[n:] / hb ** 2
    ds = dq / hb + r2
    return ds, dq, dlam


def bdf_stiff_solve(system, q0, qd0, t0, t1, h, order=2, tol=1e-10, max_iter=10):
    """Fixed-step BDF-``order`` integration of 13.33-13.35 with the reduced Newton
    system (spec §4.6): returns (t, q, s, lam) arrays and the largest Newton
    iteration count.  Starting values from the augmented system at t0; the first
    steps use the lower orders (BDF1, BDF2, ...)."""
    from mbcore.dynamics import AccelerationSolver
    if order not in BDF_COEFFS:
        raise AnalysisError(f"BDF order {order} not available (1-4)", t0)
    n = system.n
    _, lam0 = AccelerationSolver(system).solve(q0, qd0, t0)
    nsteps = int(round((t1 - t0) / h))
    T = t0 + h * np.arange(nsteps + 1)
    Qs, Ss, Ls = [q0.copy()], [qd0.copy()], [lam0.copy()]
    most = 0
    for i in range(1, nsteps + 1):
        k = min(order, i)
        a, b = BDF_COEFFS[k]
        hb = h * b
        qh = sum(a[j] * Qs[-1 - j] for j in range(k))   # y = qh + hb y'
        sh = sum(a[j] * Ss[-1 - j] for j in range(k))
        q = 2 * Qs[-1] - Qs[-2] if i > 1 else Qs[-1] + h * Ss[-1]
        s = 2 * Ss[-1] - Ss[-2] if i > 1 else Ss[-1].copy()
        lam = Ls[-1].copy()
        t = T[i]
        for it in range(max_iter):
            r1, r2, r3 = residuals(system, q, s, lam, t, (s - sh) / hb, (q - qh) / hb)
            ds, dq, dl = reduced_newton_step(system, q, s, lam, t, hb, r1, r2, r3)
            q, s, lam = q + dq, s + ds, lam + dl
            if max(np.max(np.abs(dq)), hb * np.max(np.abs(ds))) < tol * (1 + np.max(np.abs(q))):
                break
        else:
            raise AnalysisError(f"stiff DAE method: Newton did not converge in {max_iter} "
                                f"iterations (h = {h:g})", t)
        most = max(most, it + 1)
        Qs.append(q)
        Ss.append(s)
        Ls.append(lam)
    return T, np.array(Qs), np.array(Ss), np.array(Ls), most
