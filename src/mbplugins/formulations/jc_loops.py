"""Loop closure of the joint-coordinate formulation: the
rows that are not tree joints (cut joints, drivers, other constraints: ``Phi*``)
kept at the projection tolerance after every step, shared by the planar
(:mod:`.joint_coordinates`) and spatial (:mod:`.jc_spatial`) formulations.

``loop_stabilization`` (formulation option):

* ``baumgarte`` (default): Baumgarte terms in the acceleration equation of the cut
  rows (Nikravesh (1988), §13.4.2, Eq. 13.41; ``alpha``, ``beta``); nothing here.
* ``projection``: DI between steps (alpha = beta = 0); after every accepted step and
  at every output state theta is projected onto ``Phi*(theta, t) = 0`` by
  Gauss-Newton with minimum-norm steps in the joint-space metric W
  (coordinate projection, TAM 674 (2003), lecture of 7 April, carried into the tree's coordinates)::

      dnu = -W^-1 D^T (D W^-1 D^T)^-1 Phi*,   theta <- theta ⊕ dnu,

  ``D = Phi*_q B`` (the cut rows' Jacobian in nu, Eq. 13.41), ``W = H = B^T M B``
  (``mass_weighted``, default: unit-consistent, and the velocity step never
  increases the kinetic energy) or the identity; then nu onto ``D nu = nu*`` in
  one linear step.
* ``partitioning``: coordinate partitioning in joint coordinates (Nikravesh (1988), §13.4.2
  with §13.3.2, applied as a post-step correction: TAM 674 (2003), lecture of 2 April): independent nu chosen
  by QR with column pivoting of the column-scaled D (angular columns divided by a
  characteristic length, as ``cp``); after every step and at every output the
  dependent ones are solved by Newton with the independent ones fixed,
  ``D_u dnu_u = -Phi*``, and the dependent velocities from
  ``D_u nu_u = nu* - D_v nu_v``.  The integrator still carries all of theta (the
  correction is the partitioned projection of §4.4(b)); the partition is re-chosen
  like ``cp``'s: an evaluation whose ``D_u`` has degraded (pivot ratio below
  ``1e-2 / repartition_factor`` of the partition's best) or whose Newton fails
  asks the analysis to restart from the last output with a fresh partition, and an
  output where a fresh partition is ``repartition_factor`` times better does the
  same (``partition`` / ``repartition`` events, ``stats.restarts``).

Planar models on the compiled backend run the correction after every step in C
(``mbplugins._ext._jc.CompiledJCLoops.c_post_step``, whose reference are
:meth:`LoopClosure._project` / :meth:`LoopClosure._partition` here); the partition
choice, the test for a better one at outputs and the errors stay here.

``theta ⊕ dnu`` is ``theta + dnu`` except for the Euler parameters e of ball
joints and floating bases (spatial), whose nu is the relative angular velocity w
in the parent's axes (``edot = 1/2 G(e)^T w = 1/2 [0; w] ⊗ e``): they are rotated
by the rotation vector, ``e <- exp(dw) ⊗ e`` with ``exp(dw) = [cos(|dw|/2);
sin(|dw|/2) dw/|dw|]``, and renormalised, so ``d/ds Phi*(theta ⊕ s dnu) = D dnu``
at s = 0 (checked by finite differences in tests/test_joint_coordinates_loops.py).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as sla

from mbcore.errors import AnalysisError, ModelError
from mbcore.solve.formulation import RestartRequest
from mbcore.elements.rotations import quat_product
from mbcore.elements.schema import Param

from .partitioning import pivot_quality, pivoted_partition

MODES = ("baumgarte", "projection", "partitioning")

#: the loop settings of ``joint_coordinates`` (merged into its settings table)
LOOP_SETTINGS = {
    "loop_stabilization": Param(
        "choice", "how the cut-joint / driver rows are kept: 'baumgarte' (alpha, beta "
        "terms), 'projection' (DI + projection of theta and nu after every step) or "
        "'partitioning' (dependent joint coordinates by Newton after every step)",
        default="baumgarte", choices=MODES),
    "mass_weighted": Param("bool", "projection in the joint-space metric B^T M B (else "
                           "the identity)", default=True),
    "projection_tolerance": Param("number", "projection / partitioning: tolerance on "
                                  "|Phi*| of the cut rows (scaled by 1 + |q|)",
                                  default=1e-12, positive=True),
    "repartition_factor": Param("number", "partitioning: re-partition when a fresh "
                                "partition's pivot ratio is this many times better",
                                default=10.0, positive=True, unit="1"),
    "independent": Param("string", "partitioning: comma-separated initial independent "
                         "joint coordinates (names of nu entries: joints, or e.g. "
                         "'pin.wz'; default: automatic)", required=False),
}

#: the modes each option applies to (another mode with the option given: an error)
OPTION_MODES = {"mass_weighted": ("projection",),
                "projection_tolerance": ("projection", "partitioning"),
                "repartition_factor": ("partitioning",), "independent": ("partitioning",)}

#: Gauss-Newton / Newton iterations before giving up
ITERATIONS = 12


def cut_row_multipliers(solver, cho, D, c, f, J_rows, t, rows) -> np.ndarray:
    """Multipliers of the cut / driver rows (Nikravesh (1988), §13.4.2, Eq. 13.41): with the
    joint-space mass factor ``cho`` and ``D = Phi*_q B``, solve
    ``(D H^-1 D^T) lam = c - D H^-1 f``; a singular or ill-conditioned Schur matrix
    is the solver's named singular-Jacobian error for ``rows`` (``J_rows``: their
    Cartesian Jacobian)."""
    HiDt = sla.cho_solve(cho, D.T, check_finite=False)
    S = D @ HiDt
    try:
        lam = np.linalg.solve(S, c - D @ sla.cho_solve(cho, f, check_finite=False))
        if not np.all(np.isfinite(lam)) or np.linalg.cond(S) > 1e13:
            raise np.linalg.LinAlgError
    except np.linalg.LinAlgError:
        solver.raise_singular(J_rows, t, index=rows)
    return lam


def rotate(e: np.ndarray, w: np.ndarray) -> np.ndarray:
    """``exp(w) ⊗ e`` normalised: Euler parameters e turned by the rotation vector w
    (in the axes e maps into: ``edot = 1/2 [0; w] ⊗ e``)."""
    a = float(np.linalg.norm(w))
    h = 0.5 * a
    r = np.concatenate([[np.cos(h)], (np.sin(h) / a) * w if a > 0 else 0.5 * w])
    out = quat_product(r, e / np.linalg.norm(e))
    return out / np.linalg.norm(out)


class LoopClosure:
    """Mixin of the planar and spatial joint-coordinate formulations (module
    docstring).  The formulation provides ``system``, ``tree`` (with
    ``nu_labels()``: (name, angular) per nu), ``extra``, ``settings``,
    :meth:`_closure` and :meth:`_retract`, and calls :meth:`_loops_setup` at the
    end of ``__init__`` and :meth:`_loops_initialize` in ``initialize``."""

    #: set by :meth:`_loops_setup`
    loop_mode: str = "baumgarte"

    # -- provided by the formulation ----------------------------------------------
    def _closure(self, theta: np.ndarray, t: float, metric: bool):
        """(q, D, H) at theta: Cartesian positions, ``D = Phi*_q B`` (cut rows x nv)
        and ``H = B^T M B`` (None unless ``metric``)."""
        raise NotImplementedError

    def _retract(self, theta: np.ndarray, dnu: np.ndarray) -> np.ndarray:
        """``theta ⊕ dnu`` (a new array; module docstring)."""
        raise NotImplementedError

    # -- set-up ----------------------------------------------------------------------
    def _loops_setup(self, nq: int, nv: int, given: dict[str, Any]) -> None:
        """Read the loop settings (``given``: the settings as passed, to reject
        Baumgarte terms with another mode); the Baumgarte terms are off (DI between
        steps) in projection / partitioning mode."""
        mode = self.settings["loop_stabilization"]
        self.loop_mode = mode
        self._nq, self._nv = nq, nv
        self._want = None
        for k, modes in OPTION_MODES.items():
            if given.get(k) is not None and mode not in modes:
                raise ModelError(f"settings.{k}", f"used with loop_stabilization: "
                                 f"{' or '.join(modes)}, not {mode}")
        if mode == "baumgarte":
            return
        for k in ("alpha", "beta"):
            if given.get(k) not in (None, 0, 0.0):
                how = "projected" if mode == "projection" else "solved"
                raise ModelError(f"settings.{k}", f"Baumgarte terms are not used with "
                                 f"loop_stabilization: {mode} (the cut rows are {how} "
                                 f"after every step); leave it out")
        self.alpha = self.beta = 0.0
        s = self.system
        ex = self.extra
        if not len(ex):
            return                     # a tree: nothing to close (no-op)
        if mode == "partitioning" and not bool(np.all(s.holonomic[ex])):
            raise ModelError("settings.loop_stabilization", "partitioning needs "
                             "position-level cut rows; this model has velocity-level "
                             "(nonholonomic) constraints: use 'projection' or 'baumgarte'")
        self._hol = np.asarray(s.holonomic[ex], dtype=bool)
        labels = self.tree.nu_labels()
        self._labels = [n for n, _ in labels]
        bodies = getattr(s.model, "bodies", [])
        lengths = [max(float(np.max(np.abs(b.position))), 1e-3) for b in bodies]
        length = float(np.median(lengths)) if lengths else 1.0
        self._col_scale = np.array([length if ang else 1.0 for _, ang in labels])
        #: the dynamic analysis projects after every step and at outputs when the
        #: formulation has ``project`` (instance attributes: absent in baumgarte mode
        #: and for trees, so those runs are unchanged)
        self.project = self._project_loops
        self.projections = 0
        if mode == "partitioning":
            self.independent_names = self._independent_names
            self.coordinate_labels = self._coordinate_labels
            self.partitions = 0
            self.u = self.v = None

    def use_independent_rows(self, rows, q=None, t=None):
        """Redundant constraints (the analysis found ``len(rows)`` independent rows at
        (q, t)): the tree's rows hold identically in joint coordinates, so the
        dependent rows are dropped among the cut / driver rows — those beyond the
        rank of ``Phi*_q`` on the tree's motions (its product with a basis of the
        null space of the tree rows' Jacobian, rank-revealing QR; Nikravesh (1988),
        §3.1.5 and §13.4.2).  A set that already keeps every tree row (a resume) is
        taken as it is.  Returns the rows kept (the analysis checks the others at
        every output)."""
        from mbcore.solve.linalg import rank_revealing
        s = self.system
        rows = np.asarray(rows, dtype=np.intp)
        cut = np.asarray(self.tree.extra_rows, dtype=np.intp)
        tree_rows = np.setdiff1d(np.arange(s.m), cut)
        if np.all(np.isin(tree_rows, rows)):
            kept_cut = np.intersect1d(cut, rows)
        else:
            J = s.jacobian_dense(q, t)
            N = sla.null_space(J[tree_rows]) if len(tree_rows) else np.eye(s.n)
            _, ind, _, _ = rank_revealing(J[cut] @ N)
            kept_cut = np.sort(cut[ind])
        self.extra = kept_cut
        if hasattr(self, "_hol"):
            self._hol = np.asarray(s.holonomic[kept_cut], dtype=bool)
        kept = np.sort(np.concatenate([tree_rows, kept_cut]))
        self.solver.set_rows(kept)        # recorded by checkpoints
        return kept

    def _loops_initialize(self, y: np.ndarray, t: float) -> None:
        """Partitioning: choose the independent joint coordinates at a consistent
        state (start and every restart)."""
        if self.loop_mode != "partitioning" or not len(self.extra):
            return
        _, D, _ = self._closure(y[:self._nq], t, False)
        first = self.u is None
        self.u, self.v, _ = pivoted_partition(D, self._col_scale)
        self.best_ratio = pivot_quality(D, self.u, self._col_scale)
        if self.best_ratio < 1e-12:
            raise AnalysisError(f"joint_coordinates: partitioning needs independent cut "
                                f"rows, but D = Phi*_q B ({D.shape[0]} x {D.shape[1]}) has "
                                f"rank {np.linalg.matrix_rank(D)} here (redundant loop "
                                f"equations or a singular configuration); use "
                                f"loop_stabilization: projection", t)
        if first and self.settings.get("independent"):
            self._user_partition(D)
        self.ratio = pivot_quality(D, self.u, self._col_scale)
        self.partitions += 1
        self._want = None

    def _user_partition(self, D: np.ndarray) -> None:
        """The initial independent joint coordinates named in ``independent``."""
        names = [c.strip() for c in self.settings["independent"].split(",") if c.strip()]
        idx = []
        for c in names:
            if c not in self._labels:
                raise ModelError("settings.independent", f"unknown joint coordinate '{c}' "
                                 f"(joint coordinates: {', '.join(self._labels)})")
            idx.append(self._labels.index(c))
        k = self._nv - len(self.extra)
        if len(set(idx)) != k:
            raise ModelError("settings.independent", f"expected {k} independent joint "
                                                     f"coordinate(s), got {len(set(idx))}")
        v = np.array(sorted(set(idx)), dtype=np.intp)
        u = np.setdiff1d(np.arange(self._nv), v)
        if np.linalg.matrix_rank(D[:, u]) < len(u):
            raise ModelError("settings.independent", f"D_u is singular with independent "
                             f"joint coordinates {', '.join(names)}")
        self.u, self.v = u, v

    def _coordinate_labels(self) -> list[str]:
        """Names of the nu entries (the partition's indices refer to them)."""
        return list(self._labels)

    def _independent_names(self) -> list[str]:
        return [self._labels[k] for k in self.v]

    def wants_repartition(self):
        w, self._want = self._want, None
        return w

    def resume_state(self):
        """Partitioning: the partition's reference quality (its re-partition
        threshold) and last quality (an exact resume, mbcore.analysis.checkpoint)."""
        if self.loop_mode != "partitioning" or not len(self.extra):
            return {}
        return {"best_ratio": float(self.best_ratio), "ratio": float(self.ratio),
                "want": self._want, "partitions": int(self.partitions)}

    def set_resume_state(self, state):
        if "best_ratio" in state:
            self.best_ratio = float(state["best_ratio"])
            self.ratio = float(state["ratio"])
            self._want = state["want"]
            self.partitions = int(state["partitions"])

    # -- the correction after a step ---------------------------------------------------
    def _project_loops(self, t: float, y: np.ndarray, count: bool = True):
        """The corrected state (a new array) or None when nothing changed: after every
        accepted step and, ``count`` False, at every output state."""
        nq, nv = self._nq, self._nv
        theta = np.array(y[:nq], dtype=float)
        nu = np.array(y[nq:nq + nv], dtype=float)
        if self.loop_mode == "projection":
            out = self._project(t, theta, nu)
        else:
            out = self._partition(t, theta, nu, output=not count)
        if out is None:
            return None
        self.projections += int(count)
        yn = np.array(y, dtype=float)
        yn[:nq], yn[nq:nq + nv] = out
        return yn

    def _tolerance(self, q: np.ndarray) -> float:
        return self.settings["projection_tolerance"] * (
            1.0 + (float(np.max(np.abs(q))) if q.size else 0.0))

    def _project(self, t, theta, nu):
        """Gauss-Newton with minimum-norm steps in the metric W, then one linear
        velocity step (module docstring)."""
        s, ex, hol = self.system, self.extra, self._hol
        weighted = self.settings["mass_weighted"]
        changed = False
        tol = None
        for it in range(ITERATIONS + 1):
            q, D, H = self._closure(theta, t, weighted)
            if tol is None:
                tol = self._tolerance(q)
            phi = s.phi(q, t)[ex][hol]
            err = float(np.max(np.abs(phi))) if phi.size else 0.0
            if err <= tol:
                break
            if it == ITERATIONS or not np.isfinite(err):
                raise AnalysisError(f"joint_coordinates: the projection of the cut rows "
                                    f"did not converge at t = {t:.9g} (|Phi*| = "
                                    f"{err:.3g} > {tol:.3g})", t)
            theta = self._retract(theta, self._min_norm(D[hol], H, phi))
            changed = True
        r = D @ nu - s.nu(q, t)[ex]
        if changed or (r.size and float(np.max(np.abs(r))) > tol):
            nu = nu + self._min_norm(D, H, r)
            changed = True
        return (theta, nu) if changed else None

    @staticmethod
    def _min_norm(D: np.ndarray, H: np.ndarray | None, r: np.ndarray) -> np.ndarray:
        """``-W^-1 D^T (D W^-1 D^T)^-1 r`` (W = H, or I when H is None); least squares
        for the small matrix (redundant rows)."""
        if H is None:
            WiDt = D.T
        else:
            try:
                WiDt = sla.cho_solve(sla.cho_factor(H, check_finite=False), D.T,
                                     check_finite=False)
            except np.linalg.LinAlgError:
                raise AnalysisError("joint_coordinates: the joint-space mass matrix of the "
                                    "projection is singular (a massless body in the tree?); "
                                    "use mass_weighted: false") from None
        return -WiDt @ np.linalg.lstsq(D @ WiDt, r, rcond=1e-12)[0]

    def _partition(self, t, theta, nu, output=False):
        """Newton on the dependent joint coordinates with the independent ones fixed,
        then the dependent velocities (module docstring; Nikravesh (1988), §13.3.2–13.3.3; TAM 674 (2003), lectures of 31 March and 2 April).  A
        failure or a degraded ``D_u`` asks the analysis for a new partition
        (:class:`RestartRequest`); at outputs, the ``cp`` hysteresis test."""
        s, ex, u, v = self.system, self.extra, self.u, self.v
        changed = False
        tol = None
        for it in range(ITERATIONS + 1):
            q, D, _ = self._closure(theta, t, False)
            if tol is None:
                tol = self._tolerance(q)
            phi = s.phi(q, t)[ex]
            err = float(np.max(np.abs(phi)))
            if err <= tol:
                break
            if it == ITERATIONS or not np.isfinite(err):
                raise RestartRequest(f"Newton for the dependent joint coordinates did not "
                                     f"converge at t = {t:.9g} (|Phi*| = {err:.3g} > "
                                     f"{tol:.3g})")
            try:
                lu = sla.lu_factor(D[:, u], check_finite=False)
            except (ValueError, np.linalg.LinAlgError):
                raise RestartRequest(f"D_u is singular at t = {t:.9g} (|Phi*| = "
                                     f"{err:.3g})") from None
            dnu = np.zeros(self._nv)
            dnu[u] = -sla.lu_solve(lu, phi, check_finite=False)
            theta = self._retract(theta, dnu)
            changed = True
        lu = sla.lu_factor(D[:, u], check_finite=False)
        ratio = pivot_quality(D, u, self._col_scale, lu[0])
        factor = self.settings["repartition_factor"]
        if ratio * factor < self.best_ratio * 1e-2 or ratio < 1e-12:
            raise RestartRequest(f"D_u is nearly singular at t = {t:.9g} (pivot ratio "
                                 f"{ratio:.3g})")
        self.ratio = ratio
        r = D @ nu - s.nu(q, t)[ex]
        if changed or float(np.max(np.abs(r))) > tol:
            nu = nu.copy()
            nu[u] = sla.lu_solve(lu, s.nu(q, t)[ex] - D[:, v] @ nu[v], check_finite=False)
            changed = True
        if output:                  # hysteresis: a much better partition exists
            u2, v2, _ = pivoted_partition(D, self._col_scale)
            best = pivot_quality(D, u2, self._col_scale)
            if list(v2) != list(v) and best > factor * ratio:
                self._want = (f"a better partition exists (pivot ratio {ratio:.3g} -> "
                              f"{best:.3g})")
        return (theta, nu) if changed else None
