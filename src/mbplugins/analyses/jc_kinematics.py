"""Kinematic and kinetostatic analysis in joint coordinates (Nikravesh (1988),
§13.4, with the kinematic steps of §3.2.2 and §4.3 written in the tree's
coordinates).

The tree joints hold identically; only the other rows — the drivers and the cut
joints of loops, ``Phi*(q(theta), t) = 0`` — are solved, by Newton-Raphson in the
joint coordinates with ``D = Phi*_v B`` (square when the drivers control every
degree of freedom of the tree):

    D dx = -Phi*,   D nu = nu*,   D nudot = gamma* - Phi*_v a0

(``B``, ``a0``: the velocity transformation and the velocity terms of the
recursions, ``Phi*_v`` the rows in the tree's velocity coordinates).  Cartesian
q, qdot, qddot follow from the recursions.  Inverse dynamics: ``D^T lam* =
B^T (M vdot - F)`` gives the multipliers of the driver and cut rows (the driver
efforts) from the joint-space equations, the tree joints' multipliers as in the
dynamic formulation.
"""
from __future__ import annotations

import numpy as np

from mbcore.errors import LockupError, SingularJacobianError
from mbcore.solve.linalg import rank_revealing

from .jc_statics import JointChart


class JointKinematics:
    """One kinematic solve per output time in joint coordinates."""

    def __init__(self, system, q0, t0):
        self.system = s = system
        self.chart = JointChart(s, q0, t0)
        self.form = self.chart.form
        self.tree = self.chart.tree
        self.extra = self.chart.extra
        self.redundant = []
        self.removed = np.zeros(0, dtype=np.intp)      # rows of the redundant ones
        nv = self.chart.nv
        if len(self.extra) != nv:
            # the independent rows of D at the assembled configuration (redundant loop
            # equations, e.g. an overconstrained spatial loop, are dropped)
            _, Bx, _, _ = self.chart.state(np.zeros(nv))
            D = self._d(q0, Bx, t0)
            rank, ind, dep, _ = rank_revealing(D)
            if rank < nv or len(self.extra) < nv:
                raise SingularJacobianError(
                    f"kinematic analysis in joint coordinates needs as many independent "
                    f"driver / loop equations as joint velocities: {len(self.extra)} rows "
                    f"of rank {rank} for {nv} joint velocities", t0,
                    [s.constraint_names[r] for r in self.extra])
            self.removed = self.extra[np.sort(dep)]
            self.redundant = [s.constraint_names[r] for r in self.removed]
            self.extra = self.extra[np.sort(ind)]

    def _d(self, q, B, t):
        return self.chart.jv(q, self.extra) @ B

    def position(self, q_guess, t, tol, maxit):
        """Newton on Phi*(x) = 0 from the joint coordinates of q_guess (a point of the
        tree); returns (q, iterations, |Phi*|)."""
        s, ch = self.system, self.chart
        ch.t = t
        ch.recentre(q_guess)
        x = np.zeros(ch.nv)
        for it in range(maxit + 1):
            q, Bx, _, _ = ch.state(x)
            phi = s.phi(q, t)[self.extra]
            norm = float(np.max(np.abs(phi))) if phi.size else 0.0
            if norm <= tol * (1.0 + float(np.max(np.abs(q), initial=0.0))):
                self.theta_cur = ch.theta(x)     # continuous with the previous time
                return q, it, norm
            if it == maxit:
                break
            D = self._d(q, Bx, t)
            try:
                dx = np.linalg.solve(D, -phi)
            except np.linalg.LinAlgError:
                dx = None
            if dx is None or not np.all(np.isfinite(dx)) or np.linalg.cond(D) > 1e13:
                self._singular(D, t)
            x = x + dx
        raise LockupError(f"joint-coordinate kinematics: Newton-Raphson did not converge "
                          f"in {maxit} iterations (|Phi*| = {norm:.3g}): lock-up or a "
                          f"singular configuration", t)

    def _singular(self, D, t):
        names = [self.system.constraint_names[r] for r in self.extra]
        raise SingularJacobianError("the driver / loop equations are singular in joint "
                                    "coordinates (dead point or change point)", t, names)

    def velocities(self, q, t):
        """(qd, qdd, data for inverse dynamics) at the converged q."""
        s, ch, tr = self.system, self.chart, self.tree
        zero = np.zeros(s.n)
        th = self.theta_cur
        ex = self.extra
        if ch.spatial:
            thn = tr.normalised(th)
            qq, V, X, S, C = tr.outward(thn, np.zeros(tr.nv))
            B = tr.velocity_matrix(X, S)
        else:
            B = tr.accelerations(q, zero, th, np.zeros(ch.nv), np.eye(ch.nv)).T
        Jv = ch.jv(q, ex)
        D = Jv @ B
        try:
            nu = np.linalg.solve(D, s.nu(q, t)[ex])
        except np.linalg.LinAlgError:
            self._singular(D, t)
        if ch.spatial:
            qq, V, X, S, C = tr.outward(thn, nu)
            a0 = tr.bias(X, C).reshape(-1)
            qd = tr.cartesian_velocity(qq, V)
        else:
            qd = tr.velocities(q, nu)
            a0 = tr.accelerations(q, qd, th, nu, np.zeros((1, ch.nv)))[0]
            V = None
        nud = np.linalg.solve(D, s.gamma(q, qd, t)[ex] - Jv @ a0)
        vdot = B @ nud + a0
        if ch.spatial:
            qdd = tr.cartesian_acceleration(q, V, vdot.reshape(tr.nb, 6))
        else:
            qdd = vdot
        return qd, qdd, (B, D, V, vdot)

    def multipliers(self, q, qd, t, aux):
        """Cartesian multipliers: driver / cut rows from ``D^T lam* = B^T (M vdot -
        F)``, tree joints and normalisation rows as the dynamic formulation gives
        them."""
        s, ch, tr = self.system, self.chart, self.tree
        B, D, V, vdot = aux
        Q = s.forces(q, qd, t).copy()
        lam = np.zeros(s.m)
        if ch.spatial:
            F = tr.body_forces(q, V, Q)
            r = (np.einsum("bkl,bl->bk", tr.M, vdot.reshape(tr.nb, 6)) - F).reshape(-1)
            w = V[:, 3:]
            lam[tr.norm_rows] = -np.einsum("bk,bkl,bl->b", w, tr.inertia, w)
            rows = tr.joint_rows
        else:
            r = s.mass_diag * vdot - Q
            rows = tr.tree_rows
        lam_e = np.linalg.solve(D.T, B.T @ r)
        lam[self.extra] = lam_e
        if len(rows):
            Jr = ch.jv(q, rows)
            res = r - ch.jv(q, self.extra).T @ lam_e
            lam[rows] = np.linalg.lstsq(Jr.T, res, rcond=None)[0]
        return lam
