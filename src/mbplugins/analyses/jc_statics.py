"""Joint-coordinate statics (Nikravesh (1988), §14.4): the potential energy
minimised over the joint coordinates of the model's kinematic tree.

Open trees: ``min V(s)`` with ``dV/ds = -g^T dq/ds`` (Eq. 14.24), ``dq/ds`` the
velocity transformation B of the joint-coordinate formulation (planar: the columns
of the acceleration recursion; spatial: the body velocities ``[rdot, omega']`` of
unit joint rates, with forces ``[F; n']``).  No constraint is violated: every
configuration the minimiser tries is assembled.

Closed loops: the cut joints' equations enter a penalty ``f = V + 1/2 w Phi*^T Phi*``
(Eq. 14.25-14.26) with w raised x10 until ``|Phi*|`` stops improving; the result is
then polished by Newton-Raphson on (q, lam) in Cartesian coordinates (Nikravesh (1988), §14.1), so
the loops close to the static tolerance (the penalty alone leaves an error ~1/w).

Rotations of spherical and free joints are varied by a rotation vector x about the
current relative orientation, ``e(x) = exp(x) ⊗ e_ref`` (the left Jacobian of SO(3)
maps the gradient in omega to the gradient in x exactly); the chart is re-centred
between minimiser runs.
"""
from __future__ import annotations

import numpy as np
import scipy.optimize as opt

from mbcore.errors import AnalysisError, ConvergenceError
from mbcore.elements.rotations import quat_product, skew


def _qexp(x):
    """Euler parameters of the rotation vector x."""
    a = float(np.linalg.norm(x))
    if a < 1e-300:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[np.cos(0.5 * a)], np.sin(0.5 * a) * x / a])


def _left_jacobian(x):
    """J_l(x): omega = J_l(x) xdot for R = exp(x~) (the space-frame rate)."""
    a = float(np.linalg.norm(x))
    X = skew(x)
    if a < 1e-8:
        return np.eye(3) + 0.5 * X
    return (np.eye(3) + (1.0 - np.cos(a)) / a ** 2 * X
            + (a - np.sin(a)) / a ** 3 * (X @ X))


class JointChart:
    """Joint coordinates of a System for statics: ``q(x)``, ``V``, ``dV/dx`` about a
    reference configuration; x has one number per joint velocity."""

    def __init__(self, system, q0, t, cut_joints=()):
        from mbplugins.formulations.joint_coordinates import JointCoordinates
        self.system = s = system
        self.t = t
        self.form = JointCoordinates(s, {"solver": "composite", "alpha": 0.0, "beta": 0.0,
                                         "cut_joints": tuple(cut_joints)})
        self.tree = self.form.tree
        self.spatial = not s.planar_only
        self.extra = self.form.extra
        self.nv = self.form.dof
        if self.spatial:
            self.tree.reference(np.asarray(q0, dtype=float))
        self.recentre(q0)

    def recentre(self, q):
        """Reference joint coordinates at the Cartesian q (on the tree)."""
        zero = np.zeros(len(q))
        th, _ = self.tree.joint_coordinates(np.asarray(q, dtype=float), zero)
        prev = getattr(self, "theta_ref", None)
        if self.spatial and prev is not None:
            # continuity with the previous reference: angles not wrapped, Euler
            # parameters of the same sign (the Cartesian p follow continuously)
            for j in self.tree.joints:
                if j.kind in ("revolute", "cylindrical", "universal", "planar"):
                    a0, na = (2, 1) if j.kind == "planar" else \
                        (0, 2 if j.kind == "universal" else 1)
                    a = slice(j.qo + a0, j.qo + a0 + na)
                    th[a] -= 2.0 * np.pi * np.round((th[a] - prev[a]) / (2.0 * np.pi))
                elif j.kind in ("spherical", "free"):
                    e = slice(j.qo + (3 if j.kind == "free" else 0), j.qo + j.nq)
                    if th[e] @ prev[e] < 0.0:
                        th[e] = -th[e]
        self.theta_ref = th

    def theta(self, x):
        th = self.theta_ref.copy()
        if not self.spatial:
            return th + x
        for j in self.tree.joints:
            xv = x[j.vo:j.vo + j.nv]
            o = th[j.qo:j.qo + j.nq]
            if j.kind == "spherical":
                o[:] = quat_product(_qexp(xv), o)
            elif j.kind == "free":
                o[0:3] += xv[0:3]
                o[3:7] = quat_product(_qexp(xv[3:6]), o[3:7])
            else:
                o += xv
        return th

    def state(self, x):
        """(q, dq/dx as a velocity map, generalized forces in that map)."""
        s, tr = self.system, self.tree
        th = self.theta(x)
        if not self.spatial:
            q = tr.positions(th)
            z = np.zeros(self.nv)
            B = tr.accelerations(q, np.zeros(s.n), th, z, np.eye(self.nv)).T
            Q = s.forces(q, np.zeros(s.n), self.t).copy()
            return q, B, Q, B
        q, V, X, S, C = tr.outward(tr.normalised(th), np.zeros(tr.nv))
        B = tr.velocity_matrix(X, S)
        Qc = s.forces(q, np.zeros(s.n), self.t).copy()
        Qv = tr.body_forces(q, V, Qc).reshape(-1)
        # chain rule of the rotation-vector charts: d(omega)/dx = J_l(x)
        Bx = B.copy()
        for j in tr.joints:
            o = j.vo + (3 if j.kind == "free" else 0)
            if j.kind in ("spherical", "free"):
                Bx[:, o:o + 3] = B[:, o:o + 3] @ _left_jacobian(x[o:o + 3])
        return q, Bx, Qv, B

    def jv(self, q, rows):
        """Velocity-form Jacobian rows (planar: Phi_q)."""
        J = self.system.jacobian_dense(q, self.t)[rows]
        return self.form.velocity_jacobian(J, q) if self.spatial else J

    def objective(self, x, w):
        """f = V + 1/2 w |Phi*|^2 and df/dx."""
        s = self.system
        q, Bx, Qv, _ = self.state(x)
        f = s.potential_energy(q, self.t)
        g = -(Bx.T @ Qv)
        if len(self.extra):
            phi = s.phi(q, self.t)[self.extra]
            f += 0.5 * w * float(phi @ phi)
            g += w * (self.jv(q, self.extra) @ Bx).T @ phi
        return f, g, q


def minimise(system, q0, t, tol, maxit, cut_joints=()):
    """The joint-coordinate equilibrium near q0 (on the tree): (q, iterations)."""
    chart = JointChart(system, q0, t, cut_joints)
    s = system
    fs = 1.0 + float(np.max(np.abs(s.forces(q0, np.zeros(s.n), t))))
    q = np.asarray(q0, dtype=float)
    w = 0.0
    if len(chart.extra):
        # a weight that makes a loop error of 1e-3 (length units) cost like the loads
        w = 1e6 * fs
    nit = 0
    last = None
    for attempt in range(8):
        chart.recentre(q)
        best = {}

        def fun(x):
            try:
                f, g, qq = chart.objective(x, w)
            except (AnalysisError, np.linalg.LinAlgError, ValueError):
                return 1e300, np.zeros_like(x)
            if not np.isfinite(f):
                return 1e300, np.zeros_like(x)
            best["q"] = qq
            return f, g

        res = opt.minimize(fun, np.zeros(chart.nv), jac=True, method="BFGS",
                           options={"gtol": tol * fs, "maxiter": 50 * maxit})
        nit += int(res.nit)
        _, g, q = chart.objective(res.x, w)
        if not len(chart.extra):
            if np.max(np.abs(g)) <= 1e3 * tol * fs:
                return q, nit
            if last is not None and np.max(np.abs(g)) >= 0.5 * last:
                break
            last = np.max(np.abs(g))
            continue
        phi = float(np.max(np.abs(s.phi(q, t)[chart.extra])))
        if phi < 1e-6 or (last is not None and phi > 0.5 * last):
            return q, nit                # close enough for the Newton polish
        last = phi
        w *= 10.0
    if len(chart.extra):
        return q, nit
    raise ConvergenceError(f"static equilibrium in joint coordinates did not converge "
                           f"(|dV/ds| = {np.max(np.abs(g)):.3g})", t)
