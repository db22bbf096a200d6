"""Coordinate partitioning with automatic re-partitioning (CP-2; 000 §13.3.2-13.3.3,
004 App. C; spec/algorithms.md §4.3).

The coordinates are split into m dependent ``u`` and k independent ``v`` by QR with
column pivoting of the Jacobian (rotational columns scaled by a characteristic
length, so the choice does not depend on units).  Only ``y = [v; vd]`` is
integrated; at every evaluation ``Phi(u, v, t) = 0`` is solved for u by
Newton-Raphson and ``Phi_u ud = nu - Phi_v vd`` for the dependent velocities, so
the position and velocity constraints hold to the Newton tolerance everywhere.
When Phi_u degrades (its pivot ratio falls well below that of a fresh partition)
or Newton fails, the formulation asks the analysis to re-partition and restart.

Singular configurations (spec/algorithms.md §4.3, "limits").  Where the Jacobian
itself loses rank (a change-point or bifurcation, e.g. the flat N-four-bar of IFToMM
A02) every square Phi_u is singular: no partition can pass, and which branch Newton
lands on after the point depends on the step sizes and on rounding.  CP therefore
watches the rank-revealing ratio mu = |R_kk| / |R_11| of the column-scaled Jacobian
(pivoted QR, computed at every output anyway for the hysteresis test).  When mu is
below ``singular_ratio`` and falling, its zero is extrapolated linearly from the
last two outputs (mu is proportional to the distance from a simple singular point);
an evaluation at or past that time, or an output predicting it within the next
output interval, stops the analysis with a named error at the last output on the
branch.  The stop is decided from output states, not from where the integrator's
stages happen to fall, so it is the same on every machine and at every tolerance.
Use the penalty formulation to pass such configurations.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from mbcore.errors import AnalysisError, ModelError
from mbcore.formulation import Formulation, RestartRequest
from mbcore.schema import Param


class RepartitionRequest(RestartRequest):
    """Raised inside an evaluation when the partition can no longer be used."""


class CP(Formulation):
    name = "cp"
    full_state = False
    description = ("coordinate partitioning: integrate independent coordinates only, "
                   "automatic re-partitioning (constraints hold to Newton tolerance)")
    settings_schema = {
        "newton_tolerance": Param("number", "tolerance on |Phi| (scaled by 1 + |q|)",
                                  default=1e-12, positive=True),
        "repartition_factor": Param("number", "re-partition when the pivot ratio of Phi_u "
                                    "is this many times worse than the best", default=10.0,
                                    positive=True),
        "singular_ratio": Param("number", "stop before a configuration where the Jacobian "
                                "loses rank (every Phi_u singular) when the rank ratio of "
                                "the scaled Jacobian falls below this toward zero; 0 "
                                "disables the guard", default=0.02),
        "independent": Param("string", "comma-separated initial independent coordinates "
                                       "(default: automatic)", required=False),
    }

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        if not system.all_holonomic:
            raise ModelError("settings.formulation", "coordinate partitioning needs "
                             "position-level constraints; use di, cs or projection with "
                             "velocity-level (nonholonomic) constraints")
        if system.m >= system.n:
            raise ModelError("settings.formulation", "coordinate partitioning needs at least "
                             "one degree of freedom (m < n)")
        self.tol = self.settings["newton_tolerance"]
        self.factor = self.settings["repartition_factor"]
        self.u = self.v = None
        self.partitions = 0
        lengths = [max(abs(b.position[0]), abs(b.position[1]), 1e-3) for b in system.model.bodies]
        self.length = float(np.median(lengths)) if lengths else 1.0
        self._col_scale = np.ones(system.n)
        self._col_scale[2:3 * system.nb:3] = self.length      # d/dphi ~ length
        self._q = None
        self._want = None
        self.singular_ratio = float(self.settings["singular_ratio"])
        if not 0.0 <= self.singular_ratio < 1.0:
            raise ModelError("settings.singular_ratio", f"must be in [0, 1), got "
                                                       f"{self.singular_ratio!r}")
        self._mu_last = None           # (t, mu) at the last output
        self._t_singular = np.inf      # extrapolated time of a rank loss

    # -- partition ---------------------------------------------------------------
    def choose(self, q, t):
        """Dependent = the first m pivot columns of QR with column pivoting of the
        (column-scaled) Jacobian; returns (u, v, pivot ratio of Phi_u)."""
        s = self.system
        J = s.jacobian_dense(q, t)
        _, R, piv = sla.qr(J / self._col_scale, mode="economic", pivoting=True)
        d = np.abs(np.diag(R))
        u = np.sort(piv[:s.m])
        v = np.sort(piv[s.m:])
        return u, v, float(d[-1] / d[0]) if d.size and d[0] > 0 else 0.0

    def initialize(self, q, qd, t):
        old = None if self.v is None else list(self.v)
        self.u, self.v, self.best_ratio = self.choose(q, t)
        if old is None and self.settings.get("independent"):
            self._user_partition(q, t)
        self.partitions += 1
        self._q = q.copy()
        self._qd = qd.copy()
        self._want = None
        self.k = len(self.v)
        self._ydot = np.zeros(2 * self.k)
        return np.concatenate([q[self.v], qd[self.v]]), old

    def _user_partition(self, q, t):
        s = self.system
        names = [c.strip() for c in self.settings["independent"].split(",") if c.strip()]
        idx = []
        for c in names:
            if c not in s.coordinate_names:
                raise ModelError("settings.independent", f"unknown coordinate '{c}'")
            idx.append(s.coordinate_names.index(c))
        if len(idx) != s.n - s.m:
            raise ModelError("settings.independent", f"expected {s.n - s.m} independent "
                                                     f"coordinate(s), got {len(idx)}")
        v = np.sort(np.array(idx))
        u = np.setdiff1d(np.arange(s.n), v)
        J = s.jacobian_dense(q, t)
        if np.linalg.matrix_rank(J[:, u]) < s.m:
            raise ModelError("settings.independent", f"Phi_u is singular with independent "
                                                     f"coordinates {', '.join(names)}")
        self.u, self.v = u, v

    @property
    def size(self) -> int:
        return 2 * self.k

    def pack(self, q, qd):
        return np.concatenate([q[self.v], qd[self.v]])

    def independent_names(self):
        return [self.system.coordinate_names[j] for j in self.v]

    # -- evaluation --------------------------------------------------------------
    def split(self, y, t=None):
        s = self.system
        t = self._t if t is None else t
        if t >= self._t_singular:
            self._stop_singular()
        q = self._q.copy()
        q[self.v] = y[:self.k]
        scale = 1.0 + float(np.max(np.abs(q)))
        for it in range(13):
            phi = s.phi(q, t)
            if np.max(np.abs(phi)) <= self.tol * scale:
                break
            if it == 12:
                raise RepartitionRequest(f"Newton for the dependent coordinates did not "
                                         f"converge (|Phi| = {np.max(np.abs(phi)):.3g})")
            J = s.jacobian_dense(q, t)
            try:
                lu = sla.lu_factor(J[:, self.u], check_finite=False)
            except (ValueError, np.linalg.LinAlgError):
                raise RepartitionRequest("Phi_u is singular") from None
            q[self.u] -= sla.lu_solve(lu, phi, check_finite=False)
            if not np.all(np.isfinite(q)):
                raise RepartitionRequest("Newton for the dependent coordinates diverged")
        J = s.jacobian_dense(q, t)
        Ju = J[:, self.u]
        lu, piv = sla.lu_factor(Ju, check_finite=False)
        dg = np.abs(np.diag(lu))
        ratio = float(dg.min() / dg.max()) if dg.size and dg.max() > 0 else 0.0
        if ratio * self.factor < self.best_ratio * 1e-2 or ratio < 1e-12:
            raise RepartitionRequest(f"Phi_u is nearly singular (pivot ratio {ratio:.3g})")
        qd = np.zeros(s.n)
        qd[self.v] = y[self.k:]
        rhs = s.nu(q, t) - J[:, self.v] @ qd[self.v]
        qd[self.u] = sla.lu_solve((lu, piv), rhs, check_finite=False)
        self._q = q
        self.ratio = ratio
        return q, qd

    def rhs(self, t, y):
        self.nfev += 1
        self._t = t
        q, qd = self.split(y, t)
        self.q_cur, self.qd_cur = q, qd
        qdd, _ = self.solver.solve(q, qd, t)
        self._ydot[:self.k] = y[self.k:]
        self._ydot[self.k:] = qdd[self.v]
        return self._ydot

    def outputs(self, t, y):
        self._t = t
        q, qd = self.split(y, t)
        qdd, lam = self.solver.solve(q, qd, t)
        # hysteresis: ask for a new partition when a fresh one is much better
        _, v_new, best = self.choose(q, t)
        self._watch_rank(t, best)
        if list(v_new) != list(self.v) and best > self.factor * self.ratio:
            self._want = (f"a better partition exists (pivot ratio {self.ratio:.3g} -> "
                          f"{best:.3g})")
        return q, qd, qdd, lam

    def _watch_rank(self, t, mu):
        """Extrapolate the zero of the Jacobian's rank ratio from the last two outputs
        (module docstring); stop when it falls before the next output."""
        prev, self._mu_last = self._mu_last, (t, mu)
        if self.singular_ratio <= 0.0:
            return
        if mu <= 1e-3 * self.singular_ratio:
            self._t_singular = t
        elif prev is not None and t > prev[0] and mu < self.singular_ratio and mu < prev[1]:
            dt = t - prev[0]
            self._t_singular = t + mu * dt / (prev[1] - mu)
            if self._t_singular > t + dt:
                return
        else:
            self._t_singular = np.inf
            return
        self._stop_singular()

    def _stop_singular(self):
        t, mu = self._mu_last
        raise AnalysisError(
            f"formulation 'cp' cannot continue: the constraint Jacobian becomes singular "
            f"near t = {self._t_singular:.6g} (rank ratio {mu:.3g} at t = {t:.6g}, falling): "
            f"every square Phi_u is singular there, so no coordinate partition can pass "
            f"on a determined branch; use formulation: penalty to pass singular "
            f"configurations, or settings.formulation_options.singular_ratio: 0 to try", t)

    def wants_repartition(self):
        return self._want
