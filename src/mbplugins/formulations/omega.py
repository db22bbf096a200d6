"""Direct integration in the angular-velocity form (Formulation III; DI-3 / DI-4 with
Nikravesh (1988), Eq. 11.49).

State ``y = [q; v]``: the positions q as every formulation has them (Euler
parameters for spatial bodies) and per spatial body the velocities
``v_b = [rdot, omega']`` (6 numbers: omega' in body axes) instead of ``pdot``::

    pdot = 1/2 L(p)^T omega'                                  (6.109)
    [M, -B^T; B, 0] [vdot; lam] = [g - b; gamma#]             (11.49)
    M = diag(m I3, J'),  b = [0; omega'~ J' omega'],  g = [f; n'],  B = [Phi_r, Phi_pi']

``Phi_pi' = 1/2 Phi_p L^T`` (Table 11.1 from the Euler-parameter Jacobian, p unit),
``gamma#`` is the System's gamma (the same number), ``n' = 1/2 L n*``.
The normalisation rows are not constraints here (``pdot`` is tangent by
construction): p is normalised at every evaluation (Nikravesh (1988), §13.2.2) and its drift
|p| - 1 is reported in the ``violation`` channel like any constraint.  M is constant,
so ``M^-1`` is computed once.  Non-spatial coordinates (particles) keep ``v = qdot``.

Outputs are in the Euler-parameter coordinates of every other formulation: qd with
``pdot`` from omega', qdd with ``pddot = 1/2 L(pdot)^T omega' + 1/2 L(p)^T omegadot'``,
the multipliers of the kinematic rows and, for the normalisation rows, the value
Formulation I gives them (``-omega'^T J' omega'``).
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from mbcore.errors import ModelError
from mbcore.solve.formulation import Formulation
from mbcore.elements.rotations import L as Lmat, skew


class AngularVelocityDI(Formulation):
    corrects_drift = False
    name = "di_omega"
    description = ("direct integration with angular velocities of spatial bodies (DI-3, "
                   "Formulation III): y = [q; rdot, omega'], p normalised every evaluation")
    full_state = False

    def __init__(self, system, settings=None):
        if system.mass_diag is not None and not system.rigid_spatial:
            raise ModelError("settings.formulation", "di_omega is the angular-velocity form "
                                                     "of spatial bodies: use di for planar "
                                                     "models")
        super().__init__(system, settings)
        if self.solver.spatial is not None:
            self.solver.spatial.refuse_massless("formulation 'di_omega' (J'^-1 of every "
                                                "body)")
        s = system
        n = s.n
        self.p_idx = s.p_index                           # (nb, 4)
        self.nsp = len(self.p_idx)
        keep = np.ones(n, bool)
        keep[self.p_idx[:, 3]] = False         # 3 velocity numbers (p0..p2 slots) per 4 p
        #: velocity index of every kept coordinate (p0 slot -> omega'_x, ...)
        self.nv = int(keep.sum())
        vidx = np.cumsum(keep) - 1
        self.w_idx = vidx[self.p_idx[:, 0]][:, None] + np.arange(3)      # (nb, 3)
        self.lin = np.nonzero(~np.isin(np.arange(n), self.p_idx))[0]
        self.lin_v = vidx[self.lin]
        # constant M^-1 (block 3x3 for omega')
        Minv = np.zeros((self.nv, self.nv))
        r_mass = np.zeros(n)
        r_mass[s.r_index] = np.repeat(s.body_mass, 3)
        if n > s.n_body or np.any(r_mass[self.lin] <= 0):
            raise ModelError("settings.formulation", "di_omega needs a positive mass for "
                                                     "every coordinate")
        Minv[self.lin_v, self.lin_v] = 1.0 / r_mass[self.lin]
        self.inertia = s.body_inertia
        for b in range(self.nsp):
            w = self.w_idx[b]
            Minv[np.ix_(w, w)] = np.linalg.inv(self.inertia[b])
        self.Minv = Minv
        #: the kinematic rows (the normalisation rows come last, one per body)
        self.rows = np.arange(s.m - self.nsp)
        self._ydot = np.zeros(n + self.nv)
        self.lam_full = np.zeros(s.m)
        self._r_mass = r_mass
        #: the right-hand side in C (``mbplugins._ext._omega.CompiledOmega``) where the
        #: System allows; :meth:`accelerations` is its NumPy reference (and raises
        #: the named errors when it fails)
        self.compiled = self._compiled_omega()
        self._cbuf = np.zeros(n + self.nv + 1)

    def _compiled_omega(self):
        s = self.system
        kernels = s.compiled_kernels()
        if kernels is None or not s.dense:
            return None
        try:
            from mbplugins._ext._omega import CompiledOmega
        except ImportError:                  # pragma: no cover - an old build
            return None
        return CompiledOmega(*kernels.args, self.p_idx, self.w_idx, self.lin, self.lin_v,
                             self._r_mass[self.lin], self.inertia)

    def compiled_ready(self) -> bool:
        return self.compiled is not None and self.solver.rows is None

    def use_independent_rows(self, rows, q=None, t=None) -> None:
        """Solve with these constraint rows only: the independent ones of a redundant
        set, found once by the analysis (rank-revealing; the others are checked at
        every output).  The normalisation rows are not constraints here, so only
        the kinematic rows among them are kept."""
        s = self.system
        kin = np.array(sorted(int(r) for r in rows if r < s.m - self.nsp), dtype=np.intp)
        if len(kin) + self.nsp != len(rows):
            raise ModelError("settings.formulation", "di_omega: the redundant constraint "
                                                     "rows include an Euler-parameter "
                                                     "normalisation row; use di, cs or "
                                                     "projection")
        self.rows = kin
        self.solver.set_rows(rows)       # recorded by checkpoints (a resume restores it)

    # ------------------------------------------------------------ state maps
    @property
    def size(self) -> int:
        return self.n + self.nv

    def _normalised(self, q):
        q = np.array(q, dtype=float)
        p = q[self.p_idx]
        q[self.p_idx] = p / np.linalg.norm(p, axis=1)[:, None]
        return q

    def _qdot(self, q, v):
        """qdot from v (q normalised)."""
        qd = np.empty(self.n)
        qd[self.lin] = v[self.lin_v]
        qd[self.p_idx] = 0.5 * np.einsum("bkl,bk->bl", Lmat(q[self.p_idx]), v[self.w_idx])
        return qd

    def pack(self, q, qd):
        """y from (q, qdot): omega' = 2 L(p) pdot."""
        q = np.asarray(q, dtype=float)
        qd = np.asarray(qd, dtype=float)
        v = np.empty(self.nv)
        v[self.lin_v] = qd[self.lin]
        v[self.w_idx] = 2.0 * np.einsum("bkl,bl->bk", Lmat(q[self.p_idx]), qd[self.p_idx])
        return np.concatenate([q, v])

    def split(self, y):
        q = self._normalised(y[:self.n])
        return q, self._qdot(q, y[self.n:self.n + self.nv])

    def initialize(self, q, qd, t):
        return self.pack(q, qd), None

    def lie_group(self):
        """The unit quaternions of y for a Lie-group integrator (option ``lie_group``
        of ``rkmk4``, docs/integrators.md): the Euler parameters of every spatial body,
        with ``pdot = 1/2 L(p)^T omega'`` (Nikravesh (1988), Eq. 6.109): body frame."""
        from mbplugins.integrators.liegroup import QuaternionLayout
        return QuaternionLayout(self.p_idx, frame="body")

    # ------------------------------------------------------------ equations
    def accelerations(self, t, y):
        """(q, qdot, vdot, lam) at y (q normalised)."""
        s, n = self.system, self.n
        q = self._normalised(y[:n])
        v = y[n:n + self.nv]
        qd = self._qdot(q, v)
        Lp = Lmat(q[self.p_idx])
        w = v[self.w_idx]
        Q = s.forces(q, qd, t)
        Qv = np.empty(self.nv)
        Qv[self.lin_v] = Q[self.lin]
        Jw = np.einsum("bkl,bl->bk", self.inertia, w)
        Qv[self.w_idx] = 0.5 * np.einsum("bkl,bl->bk", Lp, Q[self.p_idx]) - np.cross(w, Jw)
        r = self.rows
        lam = self.lam_full
        lam[:] = 0.0
        if len(r):
            J = s.jacobian(q, t)
            J = np.asarray(J.toarray() if sp.issparse(J) else J)[r]
            gam = s.gamma(q, qd, t)[r]
            Jv = np.empty((len(r), self.nv))
            Jv[:, self.lin_v] = J[:, self.lin]
            Jv[:, self.w_idx] = 0.5 * np.einsum("rbl,bkl->rbk", J[:, self.p_idx], Lp)
            C = Jv @ self.Minv
            B = C @ Jv.T
            try:
                cho = sla.cho_factor(B, check_finite=False)
                if np.min(np.abs(np.diag(cho[0]))) ** 2 < 1e-13 * np.max(np.diag(B)):
                    raise np.linalg.LinAlgError
            except np.linalg.LinAlgError:
                self.solver.raise_singular(s.jacobian_dense(q, t)[r], t, index=r)
            lam[r] = sla.cho_solve(cho, gam - C @ Qv, check_finite=False)
            vd = self.Minv @ (Qv + Jv.T @ lam[r])
        else:
            vd = self.Minv @ Qv
        # the multiplier Formulation I gives the normalisation row 2 p^T:
        # p^T b* / 2 = -omega'^T J' omega' (= -2 T_rot, Nikravesh (1988), Eq. 11.13)
        lam[s.m - self.nsp:] = -np.einsum("bk,bk->b", w, Jw)
        s.jacobian(q, t)                 # leave Phi_q(q) in the System's buffer
        return q, qd, vd, lam

    def rhs(self, t, y):
        self.nfev += 1
        if self.compiled_ready():
            c = self.compiled
            if c.eval(t, np.ascontiguousarray(y[:self.size], dtype=float),
                      self._cbuf) == 0:                        # one C call
                self.q_cur, self.qd_cur = c.q_view, c.qd_view
                self.solver.lam[:] = c.lam_view
                self._ydot[:] = self._cbuf[:self.size]
                return self._ydot
            # a failure: the NumPy path below repeats it and raises the named error
        q, qd, vd, lam = self.accelerations(t, y)
        self.q_cur, self.qd_cur = q, qd
        self.solver.lam[:] = lam         # the power of the constraint forces
        n = self.n
        self._ydot[:n] = qd
        self._ydot[n:] = vd
        return self._ydot

    def outputs(self, t, y):
        q, qd, vd, lam = self.accelerations(t, y)
        n = self.n
        v = y[n:n + self.nv]
        qdd = np.empty(n)
        qdd[self.lin] = vd[self.lin_v]
        qdd[self.p_idx] = 0.5 * (np.einsum("bkl,bk->bl", Lmat(qd[self.p_idx]), v[self.w_idx])
                                 + np.einsum("bkl,bk->bl", Lmat(q[self.p_idx]),
                                             vd[self.w_idx]))
        self.solver.lam[:] = lam
        # the integrated positions (|p| drift visible in the violation channel)
        return np.array(y[:n], dtype=float), qd, qdd, lam.copy()


del skew
