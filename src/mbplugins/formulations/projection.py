"""Coordinate projection (TAM 674 (2003), lecture of 7 April).

DI between steps; after every accepted step the positions are projected onto
``Phi(q, t) = 0`` by Gauss-Newton with minimum-norm steps
``dq = -W^-1 Phi_q^T (Phi_q W^-1 Phi_q^T)^-1 Phi`` and the velocities onto
``Phi_q qd = nu`` in one linear step, with ``W = M`` (mass-weighted: unit-consistent,
never increases the kinetic energy in the velocity step) or ``W = I`` (the source's
choice).  The violations are at tolerance after every step.

For a dense System of compiled elements whose rows are all holonomic the compiled
right-hand side does the same projection in C after every step of the compiled
Runge-Kutta loop (``CompiledRHS.enable_projection``: Cholesky of
``Phi_q W^-1 Phi_q^T`` instead of least squares; :meth:`project` is its NumPy
reference and still projects the output states).
"""
from __future__ import annotations

import numpy as np

from mbcore.solve.formulation import FollowsKeptRows, Formulation
from mbcore.elements.schema import Param

from .projector import project_state


class Projection(FollowsKeptRows, Formulation):
    name = "projection"
    description = ("direct integration with position and velocity projection onto the "
                   "constraints after every step (mass-weighted Gauss-Newton)")
    settings_schema = {
        "mass_weighted": Param("bool", "project in the metric of M (else the identity)",
                               default=True),
        "projection_tolerance": Param("number", "tolerance on |Phi| (scaled by 1 + |q|)",
                                      default=1e-12, positive=True),
    }

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        # spatial bodies: the positive coordinate weights (m, 4 tr(J')/3 for p)
        md = system.mass_diag if system.mass_diag is not None else system.mass_weights
        self.winv = (np.where(md > 0, 1.0 / np.where(md > 0, md, 1.0), 1.0)
                     if self.settings["mass_weighted"] else np.ones(system.n))
        #: projections of the Python path; the compiled right-hand side counts its own
        self._projections = 0
        self._enable_compiled_projection()

    @property
    def projections(self) -> int:
        """Projections after accepted steps, on either path."""
        c = self.compiled
        return self._projections + (int(c.projections) if getattr(c, "projects", False)
                                    else 0)

    def _enable_compiled_projection(self) -> None:
        """Give the compiled right-hand side the same projection in C after every
        accepted step (``CompiledRHS.enable_projection``: dense Schur solves instead
        of least squares) when it applies: a dense Jacobian, every constraint row
        used, all of them holonomic.  Else the Python driver calls :meth:`project`."""
        c, s = self.compiled, self.system
        if (c is None or not hasattr(c, "enable_projection") or s.m == 0
                or not bool(np.all(s.holonomic)) or self.solver.rows is not None):
            return
        c.enable_projection(np.ascontiguousarray(self.winv, dtype=float),
                            float(self.settings["projection_tolerance"]))

    def compiled_on_rows(self, rows) -> None:
        """The kept rows (Formulation.compiled_on_rows); the projections counted by
        the replaced compiled right-hand side are kept.  The compiled projection is
        not enabled on a subset of the rows (the Python path projects with all of
        them, in least squares)."""
        c = self.compiled
        if getattr(c, "projects", False):
            self._projections += int(c.take_projections())
        super().compiled_on_rows(rows)
        self._enable_compiled_projection()

    def project(self, t, y, count=True):
        """The projected state (a new array), or None when nothing changed.
        Applied after every step, and to output states (``count=False``)."""
        s, n = self.system, self.n
        if s.m == 0:
            return None
        q = y[:n].copy()
        qd = y[n:2 * n].copy()
        tol = self.settings["projection_tolerance"] * (1.0 + float(np.max(np.abs(q), initial=0.0)))
        if not project_state(s, q, qd, t, self.winv, tol):
            return None
        self._projections += int(count)
        out = y.copy()
        out[:n], out[n:2 * n] = q, qd
        return out
