"""Stabilised index-2 (Gear-Gupta-Leimkuhler) form of the multibody DAE, for BDF
(Nikravesh (1988), §13.3.4 "stiff method"):

    q' = v + Phi_q^T mu            0 = Phi(q, t)
    M v' = Q(q, v, t) + Phi_q^T lam     0 = Phi_q v - nu

State ``y = [q, v, lam, mu]`` with the constant mass ``diag(1, M, 0, 0)``: a
semi-explicit DAE that the ``bdf`` integrator solves directly (Newton on the whole
state, algebraic components out of the error test).  Both the position and the
velocity constraints hold to the Newton tolerance at every step without any
projection; ``mu`` is zero for the exact solution.

Models of compiled elements (planar: dense or sparse Jacobian; spatial: dense)
evaluate ``f`` (and the work rate of the dynamic analysis) in one C call,
``mbplugins._ext._dae.CompiledGGL``; bdf then runs on the compiled loop
(``_steploop.run_bdf`` with its DAE options, the Jacobian through
:meth:`GGL.jacobian`).  :meth:`GGL.rhs` is its NumPy reference.

The Newton matrix :meth:`GGL.jacobian` is analytic in its velocity rows: ``K``, ``C``
of the forces (Nikravesh (1988), §9.2; spatial Euler-parameter form, Eqs.
11.1-11.7) and, for spatial bodies, the derivatives of the inertial terms and of the
mass solve (:mod:`.velocity_jacobian`); the constraint terms are differences of the
constraint rows alone.  :func:`jacobian_fd` keeps the former differences of f.
"""
from __future__ import annotations

import numpy as np

from mbcore.solve.nonholonomic import refuse_velocity_rows
from mbcore.errors import ModelError
from mbcore.solve.formulation import Formulation

from .dae_common import (compiled_constraint_fd, compiled_dae_rhs, compiled_f, consistent_start,
                         constraint_fd, dense, rhs_columns, true_rows, why_not_compiled)
from .velocity_jacobian import velocity_blocks
from .rows import RowSubset, full_multipliers


class GGL(Formulation):
    name = "ggl"
    description = ("stabilised index-2 DAE (Gear-Gupta-Leimkuhler) solved directly by BDF: "
                   "constraints hold at every step without projection")
    full_state = False
    needs_mass = True                    # the integrator must accept a mass matrix

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        refuse_velocity_rows(system, "settings.formulation", "the GGL form",
                             "use di, cs, projection, penalty or joint_coordinates")
        #: spatial bodies: unit mass on v and M^-1 inside f (AccelerationSolver.mass_solve)
        self.spatial = system.mass_diag is None
        if self.solver.spatial is not None:
            self.solver.spatial.refuse_massless("formulation 'ggl' (M^-1 inside its "
                                                "right-hand side)")
        #: the constraint rows in the DAE (None: all; :meth:`use_independent_rows`)
        self.rows = None
        self._size_rows(system.m)
        self.compiled = compiled_dae_rhs(system, self.spatial)
        #: why the compiled right-hand side does not apply (None when it does)
        self.compiled_reason = None if self.compiled is not None else \
            why_not_compiled(system, self.spatial)

    def _size_rows(self, m: int) -> None:
        n = self.system.n
        self.m = m
        self._f = np.zeros(2 * n + 2 * m)
        self.state_mass = np.concatenate([np.ones(n), np.ones(n) if self.spatial
                                          else self.system.mass_diag, np.zeros(2 * m)])

    #: use_independent_rows builds the compiled right-hand side on the kept rows
    compiled_follows_rows = True

    def compiled_ready(self) -> bool:
        return self.compiled is not None

    def use_independent_rows(self, rows, q=None, t=None) -> None:
        """Keep only these constraint rows (the independent ones of a redundant set,
        found once by the analysis, which checks the others at every output): the
        DAE then has as many multipliers as independent equations, so its Newton
        matrix stays regular (Nikravesh (1988), App. C).  The NumPy right-hand side, on
        the System seen through those rows (:class:`.rows.RowSubset`), and the compiled
        one on the same rows."""
        self.rows = np.asarray(rows, dtype=np.intp)
        self.solver.set_rows(self.rows)
        self.system = RowSubset(self.system, self.rows)
        self._size_rows(len(self.rows))
        # the compiled right-hand side on those rows (its NumPy reference: rhs on the
        # RowSubset)
        self.compiled = compiled_dae_rhs(self.system, self.spatial, rows=self.rows)
        self.compiled_reason = None if self.compiled is not None else \
            why_not_compiled(self.system.base_system, self.spatial)

    @property
    def size(self) -> int:
        return 2 * self.n + 2 * self.m

    def initialize(self, q, qd, t):
        """Consistent starting values: (q, qd) on the constraints to round-off
        (:func:`.dae_common.consistent_start`), lam from the augmented system, mu = 0."""
        q, qd = consistent_start(self.system, q, qd, t)
        qdd, lam = self.solver.solve(q, qd, t)
        lam = lam if self.rows is None else lam[self.rows]
        return np.concatenate([q, qd, lam, np.zeros(self.m)]), None

    def split(self, y):
        n = self.n
        return y[:n], y[n:2 * n]

    def rhs(self, t, y):
        """f(t, y) of ``diag(1, M, 0, 0) y' = f``."""
        self.nfev += 1
        s, n, m = self.system, self.n, self.m
        q, v = y[:n], y[n:2 * n]
        lam, mu = y[2 * n:2 * n + m], y[2 * n + m:]
        J = s.jacobian_dense(q, t) if not s.dense else s.jacobian(q, t)
        f = self._f
        f[:n] = v + J.T @ mu
        if self.spatial:
            self.solver.mass_solve(q, v, s.forces(q, v, t) + J.T @ lam, f[n:2 * n])
        else:
            f[n:2 * n] = s.forces(q, v, t) + J.T @ lam
        f[2 * n:2 * n + m] = s.phi(q, t)
        f[2 * n + m:] = J @ v - s.nu(q, t)
        self.q_cur, self.qd_cur = q, v
        # for the power of the constraint forces
        self.solver.lam[:] = full_multipliers(lam, s)
        return f

    def jacobian(self, t, y):
        """df/dy.  Exact ``Phi_q`` blocks and unit block, ``J_qq = d(Phi_q^T mu)/dq``
        and the velocity-constraint rows ``d(Phi_q v - nu)/dq`` by forward differences
        of those constraint quantities alone (:func:`.dae_common.constraint_fd`).
        Planar bodies: ``J_vq = K + d(Phi_q^T lam)/dq``, ``J_vv = C`` (K, C from
        :meth:`mbcore.System.force_jacobians`: analytic per built-in force type,
        Nikravesh (1988), §9.2).  Spatial bodies (the accelerations a = M^-1 (Q +
        Phi_q^T lam - b* - ...) inside f): ``J_vq = M^-1 (K + d(Phi_q^T lam)/dq - Dq)``,
        ``J_vv = M^-1 (C - Dv)``, ``J_vlam = M^-1 Phi_q^T`` with the inertial terms'
        derivatives Dq, Dv (:func:`.velocity_jacobian.velocity_blocks`; Nikravesh
        (1988), Eqs. 11.1-11.7, 11.22-11.32) and the Phi rows the true gradient of
        Phi (:func:`.dae_common.true_rows`)."""
        s, n, m = self.system, self.n, self.m
        N = 2 * n + 2 * m
        J = np.zeros((N, N))
        q, v = y[:n], y[n:2 * n]
        lam, mu = y[2 * n:2 * n + m], y[2 * n + m:N]
        K, C = s.force_jacobians(q, v, t)
        c = self.compiled if self.spatial else None
        if c is not None:                # the constraint differences in one C call
            P = c.true_rows(t, np.ascontiguousarray(q, dtype=float))
            (Hl, Hm), W = compiled_constraint_fd(self, q, t, (lam, mu), v=v)
        else:
            (Hl, Hm), W = constraint_fd(s, q, t, (lam, mu), v=v)
        Phq = np.array(s.jacobian_dense(q, t), dtype=float)
        J[:n, :n] = Hm
        J[:n, n:2 * n] = np.eye(n)
        J[:n, 2 * n + m:] = Phq.T
        J[2 * n + m:, :n] = W
        J[2 * n + m:, n:2 * n] = Phq
        if not self.spatial:
            J[n:2 * n, :n] = dense(K) + Hl
            J[n:2 * n, n:2 * n] = dense(C)
            J[n:2 * n, 2 * n:2 * n + m] = Phq.T
            J[2 * n:2 * n + m, :n] = Phq
            self.rhs(t, y)               # leave the buffers at y
            return J
        J[2 * n:2 * n + m, :n] = P if c is not None else true_rows(s, q, t, Phq)
        # the accelerations at y (this leaves the buffers at y)
        a = (compiled_f(self) if c is not None else self.rhs)(
            t, np.ascontiguousarray(y[:N], dtype=float))[n:2 * n].copy()
        (J[n:2 * n, :n], J[n:2 * n, n:2 * n],
         J[n:2 * n, 2 * n:2 * n + m]) = velocity_blocks(self.solver.spatial, q, v, a,
                                                        dense(K) + Hl, dense(C), Phq.T, c)
        return J

    def outputs(self, t, y):
        n = self.n
        q, v = y[:n], y[n:2 * n]
        qdd, lam = self.solver.solve(q, v, t)
        return q, v, qdd, lam

    def output_positions(self, t, y):
        """(q, v) of :meth:`outputs`, without the solve for qdd and lam."""
        n = self.n
        return np.array(y[:n], dtype=float), np.array(y[n:2 * n], dtype=float)


def jacobian_fd(self, t, y):
    """The former ``GGL.jacobian``: forward differences of the whole right-hand side
    in q and v (2n columns; spatial, on the compiled right-hand side: one C call per
    column), exact lam and mu columns; kept for tests and the benchmark of the
    analytic Newton matrices."""
    s, n, m = self.system, self.n, self.m
    N = 2 * n + 2 * m
    J = np.zeros((N, N))
    Phq = s.jacobian_dense(y[:n], t)
    if self.spatial and self.compiled is not None:
        # the lam columns by the same differences (f is linear in lam: exact up to
        # rounding)
        rhs_columns(self, t, np.ascontiguousarray(y[:N], dtype=float), J, 2 * n + m,
                    compiled_f(self))
    elif self.spatial:
        rhs_columns(self, t, y, J, 2 * n)
        J[n:2 * n, 2 * n:2 * n + m] = self.solver.spatial.solve_columns(y[:n], Phq.T)
    else:
        rhs_columns(self, t, y, J, 2 * n)
        J[n:2 * n, 2 * n:2 * n + m] = Phq.T
    J[:n, 2 * n + m:] = s.jacobian_dense(y[:n], t).T
    self.rhs(t, y)
    return J
