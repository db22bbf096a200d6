"""The drift gate of the direct integration: ``drift: project``.

The index-1 equations (DI, and CS whose Baumgarte terms only damp the violations;
Nikravesh (1988), §13.1 and §13.3.1) let the position violations grow with the
integration error, so a long run with a low-order or many-step method leaves the
constraint manifold by more than the tolerance asked for.  With ``drift:
project`` (the default) a step at whose end ``max |Phi|`` exceeds the run's bound
``atol + rtol L`` (:func:`mbcore.solve.drift.drift_bound`; plus the violation of
the start when that is larger: a start off the constraints is the user's choice)
is followed by the projection of the positions and velocities onto the
constraints in the metric of the mass matrix (:mod:`.projector`; TAM 674 (2003),
lecture of 7 April).  Steps within the bound are left alone, so a run that holds
its constraints is unchanged.  ``drift: warn`` integrates without it; the dynamic
analysis then warns where the violation passes ten times the bound.

Where the compiled right-hand side carries the gate (``CompiledRHS.enable_projection``
with an absolute tolerance: a dense Jacobian, every row used and holonomic) the
compiled loops apply it in C after each accepted step (the multistep and θ methods
then restart from the projected state, as after a new coordinate partition);
elsewhere (sparse Jacobians, kept rows, the Python driver) the analysis calls
:meth:`DriftProjection.step_end` at every step's end, which tests in C where it can
(``CompiledRHS.max_violation``); a sparse model tests four times per output
interval (:meth:`DriftProjection.set_output_step`).
"""
from __future__ import annotations

import math

import numpy as np

from mbcore.elements.schema import Param
from mbcore.solve.drift import drift_bound

from .projector import project_state

DRIFT = Param("choice", "constraint drift: 'project' onto the constraints where the "
              "position violation passes the run's tolerance (atol + rtol L), or "
              "'warn' (integrate without; a warning past ten times it)",
              default="project", choices=("project", "warn"))


class DriftProjection:
    """Mixin of DI and CS (module docstring).  Counts its projections in
    :attr:`drift_projections`."""

    def _drift_setup(self) -> None:
        s = self.system
        md = s.mass_diag if s.mass_diag is not None else s.mass_weights
        self._winv = np.where(md > 0, 1.0 / np.where(md > 0, md, 1.0), 1.0)
        self._base = None            # atol + rtol L (set_tolerances)
        self._gate = None            # the bound of this run (initialize)
        self._python_projections = 0
        self._c_test = False         # step_end's test by CompiledRHS.max_violation
        self._tau = None             # sparse: the test's time grid (set_output_step)
        self._cell = None            # ... the cell of the last test

    @property
    def drift_gate(self) -> float | None:
        """The position violation past which a step is projected, or None (off)."""
        return self._gate

    @property
    def drift_projections(self) -> int:
        """Projections of the drift gate so far, on either path."""
        c = self.compiled
        return self._python_projections + (int(c.projections)
                                           if getattr(c, "projects", False) else 0)

    @property
    def step_end_in_compiled_loop(self) -> bool:
        """The compiled loops apply the gate themselves (no :meth:`step_end`
        call-back needed there)."""
        return bool(getattr(self.compiled, "projects", False)) and self.compiled_ready()

    def set_tolerances(self, rtol, atol) -> None:
        super().set_tolerances(rtol, atol)
        if (self.settings["drift"] != "project" or rtol is None or atol is None
                or not self.system.m):
            self._base = None        # off, or a fixed step (no tolerance to keep)
        else:
            self._base = drift_bound(self.system, rtol, atol)

    def set_output_step(self, output_step: float) -> None:
        """A sparse model tests the gate at the first step end in each quarter of an
        output interval (a grid of times from t = 0, so a resumed run tests where
        the uninterrupted one did): its Phi costs a fair part of an evaluation, and
        the drift grows smoothly.  Dense models test after every step."""
        self._tau = (output_step / 4.0 if not self.system.dense and output_step > 0
                     else None)

    def initialize(self, q, qd, t):
        y, info = super().initialize(q, qd, t)
        if self._tau is not None:
            self._cell = math.floor(t / self._tau)    # tested there (resume)
        if self._base is not None and self._gate is None:
            phi = self.system.phi(np.asarray(q, dtype=float), t)[self.system.holonomic]
            phi0 = float(np.max(np.abs(phi))) if phi.size else 0.0
            self._gate = self._base + (phi0 if phi0 > self._base else 0.0)
            self._enable_gate()
        return y, info

    def compiled_on_rows(self, rows) -> None:
        c = self.compiled
        if getattr(c, "projects", False):
            self._python_projections += int(c.take_projections())
        super().compiled_on_rows(rows)
        self._enable_gate()

    def _enable_gate(self) -> None:
        """The gate in C where the compiled right-hand side takes it; else the test
        of :meth:`step_end` in C where it can evaluate Phi (every row holonomic)."""
        c, s = self.compiled, self.system
        every = bool(np.all(s.holonomic))
        self._c_test = (c is not None and hasattr(c, "max_violation") and every
                        and s.m > 0 and self.solver.rows is None)
        if (self._gate is None or c is None or not hasattr(c, "enable_projection")
                or not every or self.solver.rows is not None):
            return
        c.enable_projection(np.ascontiguousarray(self._winv), float(self._gate), True)

    def step_end(self, t, y):
        """At an accepted step's end (the analysis' commit): None within the gate,
        else ``(None, q, qd)``, the state projected onto the constraints (no new
        coordinates: the analysis records no restart of the formulation)."""
        gate = self._gate
        if gate is None:
            return None
        if self._tau is not None:
            cell = math.floor(t / self._tau)
            if cell == self._cell:
                return None
            self._cell = cell
        s, n = self.system, self.n
        q = y[:n]
        if self._c_test:                     # the test in C (CompiledRHS.max_violation)
            if self.compiled.max_violation(t, y) <= gate:
                return None
        else:                                # the rows used (switching: the engaged)
            rows = self.solver.rows
            hol = np.asarray(s.holonomic, bool)
            phi = s.phi(q, t)[hol if rows is None else rows[hol[rows]]]
            if not phi.size or float(np.max(np.abs(phi))) <= gate:
                return None
        q, qd = np.array(q, dtype=float), np.array(y[n:2 * n], dtype=float)
        project_state(s, q, qd, t, self._winv, gate, rows=self.solver.rows)
        self._python_projections += 1
        return None, q, qd
