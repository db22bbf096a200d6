"""Coordinate partitioning with automatic re-partitioning (CP-2; Nikravesh (1988), §13.3.2-13.3.3,
Nikravesh (1988), App. C).

The coordinates are split into m dependent ``u`` and k independent ``v`` by QR with
column pivoting of the Jacobian (rotational columns scaled by a characteristic
length, so the choice does not depend on units).  Only ``y = [v; vd]`` is
integrated; at every evaluation ``Phi(u, v, t) = 0`` is solved for u by
Newton-Raphson and ``Phi_u ud = nu - Phi_v vd`` for the dependent velocities, so
the position and velocity constraints hold to the Newton tolerance everywhere.
When Phi_u degrades (its pivot ratio falls well below that of a fresh partition)
or Newton fails, the formulation asks the analysis to re-partition and restart.

Singular configurations (Nikravesh (1988), §13.3.2–13.3.3).    Where the Jacobian
itself loses rank (a change-point or bifurcation, e.g. the flat N-four-bar of IFToMM
A02) every square Phi_u is singular: no partition can pass, and which branch Newton
lands on after the point depends on the step sizes and on rounding.  CP therefore
watches the rank-revealing ratio mu = |R_kk| / |R_11| of the column-scaled Jacobian
(pivoted QR, computed at every output anyway for the hysteresis test).  When mu is
below ``singular_ratio`` times its value at the start and falling, the parabola
through mu^2 at the last three outputs predicts the passage (mu is proportional to
the distance from a simple singular point, so mu^2 has a zero minimum there; a near
miss has a positive one and is not stopped); an evaluation at or past the predicted
time, or an output predicting it within the next output interval, stops the
analysis with a named error at the last output on the branch.  The stop is decided from output states, not from where the integrator's
stages happen to fall, so it is the same on every machine and at every tolerance.
Use the penalty formulation to pass such configurations.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from mbcore.solve.nonholonomic import refuse_velocity_rows
from mbcore.errors import AnalysisError, ModelError
from mbcore.solve.formulation import Formulation, RestartRequest
from mbcore.elements.schema import Param

from .rows import RowSubset


def pivoted_partition(J: np.ndarray, col_scale: np.ndarray):
    """Dependent columns u = the first m pivot columns of QR with column pivoting of
    the column-scaled m x n J, independent v = the rest (both sorted),
    and the rank ratio mu = |R_mm| / |R_11|.  Shared by ``cp`` and the
    joint-coordinate loops."""
    m = J.shape[0]
    _, R, piv = sla.qr(J / col_scale, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    mu = float(d[-1] / d[0]) if d.size and d[0] > 0 else 0.0
    return np.sort(piv[:m]), np.sort(piv[m:]), mu


def lu_partition(J: np.ndarray, col_scale: np.ndarray | None = None, full: bool = False):
    """The book's partition rules (Nikravesh (1988), §13.3.3): Gaussian elimination of
    the m x n J (columns divided by ``col_scale`` when given) with, at step i, the
    largest |a_ij| (j >= i) of row i as pivot (the row-wise column search of
    subroutine LU, §3.3.3-3.3.5: ties keep the earlier column), or with ``full``
    pivoting, the largest entry of the remaining submatrix, rows and columns swapped
    (App. C).  Returns (u, v, order): the first m pivot columns (sorted), the others
    (sorted) and the column order of the elimination; RepartitionRequest when a
    pivot vanishes (a redundant row)."""
    A = np.array(J if col_scale is None else J / col_scale, dtype=float)
    m, n = A.shape
    cols, rows = list(range(n)), list(range(m))
    big = float(np.max(np.abs(A))) if A.size else 0.0
    for i in range(m):
        if full:
            sub = np.abs(A[np.ix_(rows[i:], cols[i:])])
            r, c = np.unravel_index(int(np.argmax(sub)), sub.shape)
            rows[i], rows[i + r] = rows[i + r], rows[i]
        else:
            c = int(np.argmax(np.abs(A[rows[i], cols[i:]])))
        cols[i], cols[i + c] = cols[i + c], cols[i]
        piv = A[rows[i], cols[i]]
        if not abs(piv) > 1e-12 * big:
            raise RepartitionRequest(f"the elimination for a partition met a zero pivot "
                                     f"in row {i + 1} (redundant constraint rows?)")
        for r in rows[i + 1:]:
            A[r] -= (A[r, cols[i]] / piv) * A[rows[i]]
    return np.sort(cols[:m]), np.sort(cols[m:]), cols


def column_scale(system) -> tuple[float, np.ndarray]:
    """A characteristic length of the model (median distance of the bodies' initial
    positions from the origin, at least 1e-3) and the Jacobian column scale of
    :func:`pivoted_partition`: that length on rotational columns (d/dphi ~ length),
    1 elsewhere.  Shared by ``cp`` and the ``modes`` analysis."""
    lengths = [max(abs(b.position[0]), abs(b.position[1]), 1e-3) for b in system.model.bodies]
    length = float(np.median(lengths)) if lengths else 1.0
    scale = np.ones(system.n)
    rot = [j for j, c in enumerate(system.coordinate_names[:system.n_body])
           if c.endswith(".phi")]
    scale[rot] = length
    return length, scale


def pivot_quality(J: np.ndarray, u: np.ndarray, col_scale: np.ndarray,
                  lu: np.ndarray | None = None) -> float:
    """Smallest LU pivot of the column-scaled ``J[:, u]`` relative to the largest entry
    of the column-scaled J (Nikravesh (1988), §13.3.2, and mbcore's re-partition trigger): 0 when
    ``J[:, u]`` is singular, comparable between partitions (a pivot ratio of Phi_u
    alone is 1 for any 1 x 1 Phi_u, which would never ask for a re-partition of a
    pendulum whose dependent coordinate stops moving).  ``lu``: the LU factor of
    ``J[:, u]`` if already computed.  Shared by ``cp`` and the joint-coordinate loops."""
    cs = col_scale[u]
    if lu is None:
        try:
            lu = sla.lu_factor(J[:, u], check_finite=False)[0]
        except (ValueError, np.linalg.LinAlgError):
            return 0.0
    dg = np.abs(np.diag(lu)) / cs
    big = float(np.max(np.abs(J) / col_scale)) if J.size else 0.0
    return float(dg.min() / big) if dg.size and big > 0 else 0.0


#: Newton for the dependent coordinates aims at this fraction of its tolerance and
#: accepts the tolerance only where it stalls at round-off (CP.split; the compiled
#: twin the same)
POLISH = 1e-2

#: at a step end where CP looks for a new partition, one at least this many times
#: better than the current one is taken
SWITCH_GAIN = 2.0

#: CP looks for a new partition at a step end where the amplification of the
#: current one (:func:`amplification`) has grown this many times since the partition
#: started (or since the last look) ...
AMP_LOOK = 1.5

#: ... and takes a partition whose amplification is at least this many times smaller
AMP_GAIN = 1.5


def amplification(J: np.ndarray, u: np.ndarray, v: np.ndarray, col_scale: np.ndarray,
                  lu=None) -> float:
    """``max_ij |(Phi_u^-1 Phi_v)_ij| s_vj / s_ui`` (s: the column scales): how much an
    error of the independent coordinates (and velocities) grows in the dependent ones,
    ``du = -Phi_u^-1 Phi_v dv`` (Nikravesh (1988), §13.3.2).  The integrator controls
    the error of v only, so CP keeps this gain small by re-partitioning where it grows
    (a spinning body's Euler parameters pass through zero long before Phi_u's pivot
    ratio shows it).  ``lu``: scipy's LU factors of ``J[:, u]`` if already computed;
    inf when ``J[:, u]`` is singular."""
    try:
        if lu is None:
            lu = sla.lu_factor(J[:, u], check_finite=False)
        C = sla.lu_solve(lu, J[:, v], check_finite=False)
    except (ValueError, np.linalg.LinAlgError):
        return float("inf")
    a = float(np.max(np.abs(C) * (col_scale[v][None, :] / col_scale[u][:, None]),
                     initial=0.0))
    return a if np.isfinite(a) else float("inf")


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
                                    positive=True, unit="1"),
        "singular_ratio": Param("number", "stop before a configuration where the Jacobian "
                                "loses rank (every Phi_u singular) when the rank ratio of "
                                "the scaled Jacobian falls below this fraction of its "
                                "initial value toward zero; 0 disables the guard",
                                default=0.1, unit="1"),
        "independent": Param("string", "comma-separated initial independent coordinates "
                                       "(default: automatic)", required=False),
        "partition_rule": Param("choice", "how a partition is chosen: 'qr' (QR with column "
                                "pivoting of the column-scaled Jacobian: independent of "
                                "units), 'lu_rows' (the book's Gaussian elimination with "
                                "the row-wise column search) or 'lu_full' (full pivoting, "
                                "App. C); the book's rules act on the Jacobian as it is, "
                                "so they depend on the units", default="qr",
                                choices=("qr", "lu_rows", "lu_full")),
        "repartition": Param("bool", "change the partition during the run (CP-2); false: "
                             "keep the first one (CP-1) and stop with a named error where "
                             "it fails", default=True),
        "repartition_every": Param("count", "also take a fresh partition every this many "
                                   "accepted steps (the book's conservative trigger; 0: "
                                   "off)", default=0),
        "predictor": Param("choice", "starting guess of Newton for the dependent "
                           "coordinates: 'linear' (Phi_u du = -Phi_v dv from the last "
                           "converged point) or 'taylor' (the book's u + h ud + h^2 udd / 2 "
                           "from the last accepted step's end; NumPy path)",
                           default="linear", choices=("linear", "taylor")),
        "repartition_on_newton": Param("bool", "also re-partition where the number of "
                                       "Newton iterations per step has risen at two "
                                       "successive steps (the book's trigger; NumPy path)",
                                       default=False),
    }

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        refuse_velocity_rows(system, "settings.formulation", "coordinate partitioning",
                             "use di, cs, projection, penalty or joint_coordinates")
        self.tol = self.settings["newton_tolerance"]
        self.factor = self.settings["repartition_factor"]
        #: the tolerances given to the integrator are the requested ones times this:
        #: the dependent velocities carry the independent ones' errors amplified by
        #: up to the re-partition factor (Phi_u's pivot ratio is kept within it of
        #: the best), so CP asks for that much less (heavy top of Brüls & Cardona,
        #: rtol 1e-8: 11x the tolerance in the angular velocity without it, 4.6x with
        #: it)
        self.tolerance_factor = 1.0 / max(self.factor, 1.0)
        self.u = self.v = None
        #: the independent constraint rows when some are redundant (None: all rows;
        #: :meth:`use_independent_rows`)
        self.rows = None
        #: the System as the partition sees it (all rows, or a RowSubset)
        self._rsys = system
        self.partitions = 0
        self.length, self._col_scale = column_scale(system)
        self._q = None
        self._prev = None
        self._want = None
        self._taylor = None            # (t, u, ud, udd) at the last accepted step's end
        self._newton = [0, []]         # Newton iterations: this step's most, per step
        self._last = None              # (t, y, q, qd, qdd) of the last evaluation
        self._taylor_on = self.settings["predictor"] == "taylor"
        #: step_end looks for a new partition where the amplification exceeds this
        self._amp_below = np.inf
        if system.m == 0:
            raise ModelError("settings.formulation", "cp partitions the coordinates by the "
                             "constraint Jacobian, and the model has no constraints: use "
                             "di or cs")
        self.singular_ratio = float(self.settings["singular_ratio"])
        if not 0.0 <= self.singular_ratio < 1.0:
            raise ModelError("settings.singular_ratio", f"must be in [0, 1), got "
                                                       f"{self.singular_ratio!r}")
        self._mu_hist: list = []       # (t, mu) at the last three outputs
        self._mu0 = None               # mu at the first output
        self._t_singular = np.inf      # predicted time of a rank loss
        self._stop_pending = False
        #: the right-hand side in C (``mbplugins._ext._cp.CompiledCP``: Newton for u,
        #: velocities, DI accelerations) where the System allows; :meth:`rhs` below
        #: is its NumPy reference (and raises the named errors when it fails)
        self.compiled = self._compiled_cp()
        self._ready = False

    def _compiled_cp(self, rows=None):
        """``CompiledCP`` of the System where it applies (with ``rows``: on those
        constraint rows only), else None."""
        s = self.system
        kernels = s.compiled_kernels()
        st = self.settings
        m = s.m if rows is None else len(rows)
        if (kernels is None or st["predictor"] != "linear" or st["repartition_on_newton"]
                or not s.dense or self.solver.augmented
                or (s.mass_diag is not None and np.any(np.asarray(s.mass_diag) <= 0))
                or not 0 < m < s.n):                              # no constraints: NumPy
            return None
        try:
            from mbplugins._ext._cp import CompiledCP
        except ImportError:                  # pragma: no cover - an old build
            return None
        kw = {} if rows is None else {"rows": np.ascontiguousarray(rows, dtype=np.intp)}
        return CompiledCP(*kernels.args, self.solver.minv,
                          np.ascontiguousarray(self._col_scale, dtype=float), self.tol,
                          self.factor, spatial=self.solver.spatial, **kw)

    #: use_independent_rows builds the compiled right-hand side on the kept rows
    compiled_follows_rows = True

    def compiled_ready(self) -> bool:
        return self.compiled is not None and self._ready

    def use_independent_rows(self, rows, q=None, t=None) -> None:
        """Partition with these constraint rows only: the independent ones of a
        redundant set (the analysis finds them once, rank-revealing, and checks the
        others at every output; Nikravesh (1988), App. C).  An over-constrained loop
        that still moves (Bennett, Bricard: m >= n equations of rank < n) then has
        n - rank independent coordinates.  The accelerations use the same rows, and
        so does the compiled right-hand side (``CompiledCP(rows=...)``; its NumPy
        reference: :meth:`split` / :meth:`rhs` on the :class:`.rows.RowSubset`)."""
        rows = np.asarray(rows, dtype=np.intp)
        if len(rows) >= self.system.n:
            raise ModelError("settings.formulation",
                             f"coordinate partitioning needs at least one degree of "
                             f"freedom: the constraints have rank {len(rows)} for "
                             f"{self.system.n} coordinates")
        self.rows = rows
        self.solver.set_rows(rows)
        self._rsys = RowSubset(self.system, rows)
        self.v = None                        # a new partition at initialize
        self.compiled = self._compiled_cp(rows)
        self._ready = False                  # set_partition at initialize

    @property
    def m_rows(self) -> int:
        """The number of constraint rows the partition uses."""
        return self._rsys.m

    def _jacobian(self, q, t):
        return self._rsys.jacobian_dense(q, t)

    def _phi(self, q, t):
        return self._rsys.phi(q, t)

    def _nu(self, q, t):
        return self._rsys.nu(q, t)

    # -- partition ---------------------------------------------------------------
    def choose(self, q, t):
        """Dependent = the first m pivot columns of QR with column pivoting of the
        (column-scaled) Jacobian; returns (u, v, quality of Phi_u, rank ratio mu of
        the Jacobian |R_mm| / |R_11|)."""
        return self._choose_from(self._jacobian(q, t))

    def _choose_from(self, J):
        u, v, mu = pivoted_partition(J, self._col_scale)
        rule = self.settings["partition_rule"]
        if rule != "qr":                    # the book's rules (mu: the rank watch's)
            u, v, _ = lu_partition(J, full=rule == "lu_full")
        return u, v, self._quality(J, u), mu

    def _quality(self, J, u, lu=None):
        """:func:`pivot_quality` of Phi_u with this formulation's column scales."""
        return pivot_quality(J, u, self._col_scale, lu)

    def initialize(self, q, qd, t):
        if self.m_rows >= self.system.n:
            raise ModelError("settings.formulation", "coordinate partitioning needs at "
                             "least one degree of freedom (m < n, or redundant equations "
                             "of lower rank)")
        old = None if self.v is None else list(self.v)
        self.u, self.v, self.best_ratio, _ = self.choose(q, t)
        if old is None and self.settings.get("independent"):
            self._user_partition(q, t)
        self.partitions += 1
        self._check_below = self.best_ratio    # step_end looks again below this / factor
        self._amp_below = AMP_LOOK * amplification(self._jacobian(q, t), self.u, self.v,
                                                   self._col_scale)
        self._steps = 0                         # accepted steps (repartition_every)
        self._q = q.copy()
        self._qd = qd.copy()
        self._prev = None                # J and LU of the last converged point
        self._want = None
        self._taylor = None
        self._newton = [0, []]
        self._last = None
        self.k = len(self.v)
        self._ydot = np.zeros(2 * self.k)
        if self.compiled is not None:
            self.compiled.set_partition(np.ascontiguousarray(self.u, dtype=np.intp),
                                        np.ascontiguousarray(self.v, dtype=np.intp),
                                        float(self.best_ratio),
                                        np.ascontiguousarray(q, dtype=float))
            self.compiled.t_singular = self._t_singular
            self._ready = True
        return np.concatenate([q[self.v], qd[self.v]]), old

    def _user_partition(self, q, t):
        s = self.system
        names = [c.strip() for c in self.settings["independent"].split(",") if c.strip()]
        idx = []
        for c in names:
            if c not in s.coordinate_names:
                raise ModelError("settings.independent", f"unknown coordinate '{c}'")
            idx.append(s.coordinate_names.index(c))
        m = self.m_rows
        if len(idx) != s.n - m:
            raise ModelError("settings.independent", f"expected {s.n - m} independent "
                                                     f"coordinate(s), got {len(idx)}")
        v = np.sort(np.array(idx))
        u = np.setdiff1d(np.arange(s.n), v)
        J = self._jacobian(q, t)
        if np.linalg.matrix_rank(J[:, u]) < m:
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
        prev = self._prev
        self._prev = None
        if self._taylor is not None:
            # the book's predictor (Nikravesh (1988), §13.3.2): a Taylor expansion of
            # the dependent coordinates about the last accepted step's end
            tc, uc, udc, uddc = self._taylor
            tau = t - tc
            q[self.u] = uc + tau * (udc + 0.5 * tau * uddc)
        elif prev is not None:
            # first-order predictor from the last converged point: Phi_u du = -Phi_v dv
            J0, lu0 = prev
            q[self.u] += sla.lu_solve(lu0, -(J0[:, self.v] @ (y[:self.k] - q[self.v])),
                                      check_finite=False)
        q[self.v] = y[:self.k]
        scale = 1.0 + float(np.max(np.abs(q), initial=0.0))
        prev = np.inf
        for it in range(13):
            phi = self._phi(q, t)
            pmax = float(np.max(np.abs(phi)))
            # converged: POLISH times within the tolerance, or within it where the
            # iteration stalls at round-off (the residual no longer halves).
            # Stopping anywhere within the tolerance leaves the dependent coordinates
            # biased by up to it, which the accelerations amplify (heavy top at
            # 150 rad/s, rtol 1e-10: angular velocity off by 8.9e-8 at t = 0.35 s)
            if pmax <= self.tol * scale and (pmax <= POLISH * self.tol * scale
                                             or pmax > 0.5 * prev or it == 12):
                self._newton[0] = max(self._newton[0], it)
                break
            if it == 12:
                raise RepartitionRequest(f"Newton for the dependent coordinates did not "
                                         f"converge (|Phi| = {pmax:.3g})")
            prev = pmax
            J = self._jacobian(q, t)
            try:
                lu = sla.lu_factor(J[:, self.u], check_finite=False)
            except (ValueError, np.linalg.LinAlgError):
                raise RepartitionRequest("Phi_u is singular") from None
            q[self.u] -= sla.lu_solve(lu, phi, check_finite=False)
            if not np.all(np.isfinite(q)):
                raise RepartitionRequest("Newton for the dependent coordinates diverged")
        J = self._jacobian(q, t)
        Ju = J[:, self.u]
        lu, piv = sla.lu_factor(Ju, check_finite=False)
        ratio = self._quality(J, self.u, lu)
        if ratio * self.factor < self.best_ratio * 1e-2 or ratio < 1e-12:
            raise RepartitionRequest(f"Phi_u is nearly singular (pivot ratio {ratio:.3g})")
        self._prev = (J.copy(), (lu.copy(), piv.copy()))
        qd = np.zeros(s.n)
        qd[self.v] = y[self.k:]
        rhs = self._nu(q, t) - J[:, self.v] @ qd[self.v]
        qd[self.u] = sla.lu_solve((lu, piv), rhs, check_finite=False)
        self._q = q
        self.ratio = ratio
        return q, qd

    def rhs(self, t, y):
        self.nfev += 1
        self._t = t
        try:
            q, qd = self.split(y, t)
        except RepartitionRequest as exc:
            if self.settings["repartition"]:
                raise
            raise AnalysisError(f"formulation 'cp' cannot continue with its partition "
                                f"(independent coordinates "
                                f"{', '.join(self.independent_names())}): {exc.reason}; "
                                f"re-partitioning is off "
                                f"(settings.formulation_options.repartition)", t) from None
        self.q_cur, self.qd_cur = q, qd
        qdd, _ = self.solver.solve(q, qd, t)
        if self._taylor_on:
            self._last = (t, np.array(y[:2 * self.k]), q.copy(), qd.copy(), qdd.copy())
        self._ydot[:self.k] = y[self.k:]
        self._ydot[self.k:] = qdd[self.v]
        return self._ydot

    def outputs(self, t, y):
        self._t = t
        done = False
        if self.compiled_ready():
            c = self.compiled
            buf = np.zeros(2 * self.k + 1)
            ok = c.eval(t, np.ascontiguousarray(y[:2 * self.k], dtype=float), buf) == 0
            c.nfev -= 1                      # an output, not an integration cost
            if ok:                           # the same numbers as split + solve
                q, qd = np.array(c.q), np.array(c.qd)
                qdd, lam = np.array(c.qdd_view), np.array(c.lam_view)
                self.ratio = float(c.ratio)
                if self.rows is None:
                    self.solver.lam[:] = lam
                else:                        # the removed rows carry no load
                    self.solver.lam[:] = 0.0
                    self.solver.lam[self.rows] = lam
                    lam = np.array(self.solver.lam)
                done = True
            self._q = np.array(c.q)          # Newton's warm start
            self._prev = None
        if not done:                         # NumPy path (raises the named errors)
            q, qd = self.split(y, t)
            qdd, lam = self.solver.solve(q, qd, t)
        # hysteresis: ask for a new partition when a fresh one is much better
        _, v_new, best, mu = self.choose(q, t)
        self._watch_rank(t, mu)
        if list(v_new) != list(self.v) and best > self.factor * self.ratio:
            self._want = (f"a better partition exists (pivot ratio {self.ratio:.3g} -> "
                          f"{best:.3g})")
        return q, qd, qdd, lam

    def step_end(self, t, y):
        """At an accepted step's end, after its outputs (the dynamic analysis'
        commit): None, or ``(reason, q, qd)`` when the partition should change here —
        the test at an output found a much better one, or Phi_u's pivot ratio at the
        last evaluation fell ``repartition_factor`` below that of the partition's
        start (or of the last look) and a fresh partition is that much better.  The
        new partition starts from this exact state (Nikravesh (1988), §13.3.3):
        restarting from an output instead would start from a dense-output
        interpolant and repeat the steps since."""
        if self._taylor_on:
            self._keep_taylor(t, y)
        rising = self._newton_rising()
        if not self.settings["repartition"]:
            self._want = None
            return None
        if rising is not None:               # the book's trigger on Newton's effort
            q, qd = self._state_at(t, y)
            _, v_new, _, _ = self.choose(q, t)
            if list(v_new) != list(self.v):
                self._want = None
                return f"Newton's iterations rose ({rising})", q, qd
        want = self._want
        every = self.settings["repartition_every"]
        if every:
            self._steps += 1
            if self._steps >= every:         # the book's periodic trigger
                self._steps = 0
                q, qd = self._state_at(t, y)
                _, v_new, _, _ = self.choose(q, t)
                self._want = None
                if list(v_new) != list(self.v):
                    return f"periodic re-partition (every {every} steps)", q, qd
                return None
        if want is None:
            got = self._amplification_look(t, y)
            if got is not None:
                return got
        if want is None:
            c = self.compiled
            ratio = float(c.ratio) if self.compiled_ready() else getattr(self, "ratio", None)
            if ratio is None or ratio * self.factor >= self._check_below:
                return None
        q, qd = self._state_at(t, y)
        J = self._jacobian(q, t)
        ratio = self._quality(J, self.u)
        u_new, v_new, best, _ = self._choose_from(J)
        self._want = None
        # (the look itself has the hysteresis: Phi_u degraded by the factor, or a
        # partition that much better at an output; here any clearly better one is
        # taken, so that Phi_u stays within the factor of the best: the dependent
        # velocities' errors grow with 1 / its pivot ratio)
        if list(v_new) == list(self.v) or best <= SWITCH_GAIN * ratio:
            self._check_below = ratio      # look again when it degrades another factor
            return None
        return (want or f"Phi_u degraded (pivot ratio {ratio:.3g} -> {best:.3g})"), q, qd

    def current_amplification(self) -> float:
        """:func:`amplification` at the last evaluation's converged configuration
        (the compiled object's or the NumPy path's LU and Phi_v); -1 before one."""
        if self.compiled_ready():
            return float(self.compiled.amplification())
        if self._prev is not None:
            J0, lu0 = self._prev
            return amplification(J0, self.u, self.v, self._col_scale, lu0)
        return -1.0

    def _amplification_look(self, t, y):
        """The amplification trigger of :meth:`step_end`: where the gain of the
        current partition (:func:`amplification`, at the step's last evaluation) has
        grown :data:`AMP_LOOK` times, the state at the step's end is partitioned again
        and the new partition taken when its gain is :data:`AMP_GAIN` times smaller.
        ``(reason, q, qd)``, else None."""
        a = self.current_amplification()
        if not a > self._amp_below:
            return None
        q, qd = self._state_at(t, y)
        J = self._jacobian(q, t)
        a = amplification(J, self.u, self.v, self._col_scale)
        u_new, v_new, _, _ = self._choose_from(J)
        if list(v_new) != list(self.v):
            a_new = amplification(J, u_new, v_new, self._col_scale)
            if a_new * AMP_GAIN <= a:
                return (f"the dependent coordinates' error gain grew (|Phi_u^-1 Phi_v| "
                        f"{a:.3g} -> {a_new:.3g})"), q, qd
        self._amp_below = AMP_LOOK * a          # look again when it grows that much more
        return None

    def _keep_taylor(self, t, y):
        """The book's predictor data at an accepted step's end: (t, u, ud, udd), from
        the step's last evaluation where it was at this state (FSAL methods), else
        from an evaluation here."""
        last = self._last
        k2 = 2 * self.k
        if last is not None and last[0] == t and np.array_equal(last[1], y[:k2]):
            _, _, q, qd, qdd = last
        else:
            q, qd = self.split(np.asarray(y, dtype=float), t)
            qdd = self.solver.solve(q, qd, t)[0]
        u = self.u
        self._taylor = (float(t), np.array(q[u]), np.array(qd[u]), np.array(qdd[u]))

    def _newton_rising(self):
        """None, or a description of the Newton iteration counts per step when they
        rose at two successive steps (``repartition_on_newton``; the book's trigger,
        Nikravesh (1988), §13.3.3)."""
        counts = self._newton[1]
        counts.append(self._newton[0])
        self._newton[0] = 0
        del counts[:-3]
        if (self.settings["repartition_on_newton"] and len(counts) == 3
                and counts[0] < counts[1] < counts[2]):
            got = " -> ".join(str(c) for c in counts)
            counts.clear()
            return got
        return None

    def _state_at(self, t, y):
        """(q, qd) of the state y at t with the current partition (copies)."""
        if self.compiled_ready():
            c = self.compiled
            buf = np.zeros(2 * self.k + 1)
            ok = c.eval(t, np.ascontiguousarray(y[:2 * self.k], dtype=float), buf) == 0
            c.nfev -= 1                      # not an integration cost
            if ok:
                return np.array(c.q), np.array(c.qd)
            self._q = np.array(c.q)
            self._prev = None
        q, qd = self.split(np.asarray(y, dtype=float), t)
        return np.array(q), np.array(qd)

    def _watch_rank(self, t, mu):
        """Watch the rank ratio mu of the scaled Jacobian at the outputs (module
        docstring).  A rank loss ahead is confirmed by the parabola through mu^2 at
        the last three outputs (mu^2 = b^2 (t - t*)^2 near a simple singular point,
        a positive minimum for a near miss): its minimum must lie ahead and be
        below (mu / 10)^2, and mu must be below ``singular_ratio`` times its value
        at the first output.  Then an evaluation at or past t* stops the run, and
        an output with t* before the next output stops it after being recorded."""
        hist = self._mu_hist
        if hist and t <= hist[-1][0]:          # a restart at an earlier output
            while hist and hist[-1][0] >= t:
                hist.pop()
        hist.append((t, mu))
        del hist[:-3]
        if self._mu0 is None:
            self._mu0 = mu
        self._t_singular = np.inf
        if self.compiled is not None:
            self.compiled.t_singular = np.inf
        if self.singular_ratio <= 0.0 or len(hist) < 3:
            return
        (t1, m1), (t2, m2), (t3, m3) = hist
        if not (m3 < self.singular_ratio * self._mu0 and m3 < m2 < m1):
            return
        a, b, c = np.polyfit([t1 - t3, t2 - t3, 0.0], [m1 * m1, m2 * m2, m3 * m3], 2)
        if not a > 0.0:
            return
        ts = -b / (2.0 * a)                    # relative to t3
        cmin = c - b * b / (4.0 * a)
        if ts <= 0.0 or cmin > (0.1 * m3) ** 2:
            return
        self._t_singular = t3 + ts
        if self.compiled is not None:
            self.compiled.t_singular = self._t_singular
        if ts <= t3 - t2:
            self._stop_pending = True          # raised once this output is recorded

    def explain_failure(self) -> None:
        """The partition cannot continue even after re-partitioning: when the rank
        watch foresaw a singular configuration ahead (module docstring), raise its
        named error instead of the last Newton failure."""
        if np.isfinite(self._t_singular) and self._mu_hist:
            self._stop_singular()

    def _stop_singular(self):
        t, mu = self._mu_hist[-1]
        raise AnalysisError(
            f"formulation 'cp' cannot continue: the constraint Jacobian becomes singular "
            f"near t = {self._t_singular:.6g} (its rank ratio fell to {mu:.3g} at "
            f"t = {t:.6g}, the last output on the branch): every square Phi_u is "
            f"singular there, so no coordinate partition can pass on a determined "
            f"branch; use formulation: penalty to pass singular configurations, or "
            f"settings.formulation_options.singular_ratio: 0 to try", t)

    def resume_state(self):
        """Newton's warm start and predictor, the partition's reference quality and
        the rank watch (an exact resume, mbcore.analysis.checkpoint)."""
        prev = None
        if self._prev is not None:
            J0, (lu0, piv0) = self._prev
            prev = (np.array(J0), (np.array(lu0), np.array(piv0)))
        hist = np.array(self._mu_hist, dtype=float).reshape(-1, 2)
        return {"q": None if self._q is None else np.array(self._q), "prev": prev,
                "t": getattr(self, "_t", None), "ratio": getattr(self, "ratio", None),
                "best_ratio": float(self.best_ratio), "want": self._want,
                "mu_hist": hist, "mu0": self._mu0, "t_singular": float(self._t_singular),
                "stop_pending": bool(self._stop_pending), "partitions": int(self.partitions),
                "check_below": float(self._check_below),
                "amp_below": float(self._amp_below),
                "taylor": self._taylor, "newton": [self._newton[0], list(self._newton[1])]}

    def set_resume_state(self, state):
        self._q = None if state["q"] is None else np.array(state["q"], dtype=float)
        prev = state["prev"]
        self._prev = None if prev is None else (np.array(prev[0]), (np.array(prev[1][0]),
                                                                  np.array(prev[1][1])))
        if state["t"] is not None:
            self._t = float(state["t"])
        if state["ratio"] is not None:
            self.ratio = float(state["ratio"])
        self.best_ratio = float(state["best_ratio"])
        self._want = state["want"]
        self._mu_hist = [(float(t), float(mu)) for t, mu in state["mu_hist"]]
        self._mu0 = None if state["mu0"] is None else float(state["mu0"])
        self._t_singular = float(state["t_singular"])
        self._stop_pending = bool(state["stop_pending"])
        self.partitions = int(state["partitions"])
        self._check_below = float(state.get("check_below", self.best_ratio))
        self._amp_below = float(state.get("amp_below", self._amp_below))
        tay = state.get("taylor")
        self._taylor = None if tay is None else (float(tay[0]), *(np.array(a, dtype=float)
                                                                   for a in tay[1:]))
        newton = state.get("newton", [0, []])
        self._newton = [int(newton[0]), [int(c) for c in newton[1]]]
        if self.compiled is not None:
            self.compiled.best_ratio = self.best_ratio
            self.compiled.t_singular = self._t_singular

    def wants_repartition(self):
        if self._stop_pending:
            self._stop_pending = False
            self._stop_singular()
        return self._want
