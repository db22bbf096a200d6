"""Constraint equations removed as redundant, checked at every solved point.

When the constraint Jacobian is rank deficient at the start of a run (a joint given
twice, an overconstrained spatial loop), the analyses solve with its independent
rows only, chosen by a rank-revealing QR at that configuration (Nikravesh (1988),
§3.1.5, §3.3 and Prob. 5.16).  Rank judged
at one configuration says nothing about later ones: two drivers that agree at t = 0
only (a link turned by phi = t and held at x = 0.5 by a second driver) give
dependent rows there and conflicting ones after.  So the removed rows are kept and
checked wherever the analysis has solved the kept ones, at the three levels of the
kinematic equations (ibid., Eqs 3.18, 3.14, 3.16):
``res = Phi``, ``Phi_q qd - nu`` and ``Phi_q qdd - gamma``.

The test quantity of a removed row r is its residual less the combination of the
kept rows' residuals it is made of,

    e_r = res_r - C_r res_k,     J_r = C_r J_k  (least squares, at a configuration),

because a redundant row satisfies ``Phi_r = C_r Phi_k + O(|Phi_k|^2)`` near the
constraint manifold: where ``C_r`` was computed, ``e_r`` does not depend on the
error of the solution at all (at the velocity level ``e_r = -(nu_r - C_r nu_k)``
exactly), so an inconsistency of the equations shows whatever the kept rows'
accuracy.  Bound, per row and level (``M``: the size of the terms of a residual,
``|J_r| (1 + max |q|)``, ``|J| |qd| + |nu|``, ``|J| |qdd| + |gamma|``; ``tol``: the
analysis' relative tolerance, at least :data:`TOL_FLOOR` of the level):

    |e_r| <= SAFETY (M_r + |C_r| M_k) [tol + d (1 + sum |C_r|) rho]

``rho`` is the largest relative residual ``max |res_k| / max M_k`` of the kept rows
at this level and the ones below it (the kept rows hold only to the accuracy of
the analysis: drift of the direct integration, penalty, projection tolerances; a
position drift makes velocity and acceleration errors of the same relative
size), and ``d`` is 0 at the configuration of ``C`` (the removal) and 1 elsewhere,
where ``C`` has changed along the motion.  A row over the bound at a stale ``C`` is
tested again with ``C`` at the current configuration before
:class:`~mbcore.errors.ConflictingConstraintsError` is raised.  A real conflict
grows with the motion to an O(1) relative error; the bound is ``SAFETY`` times the
rounding and solution error of the analysis.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import ConflictingConstraintsError

#: the margin of the bound over the error estimate (module docstring)
SAFETY = 1e3
#: the smallest relative tolerance per level (positions, velocities, accelerations).
#: Positions and velocities: the resolution of the rank decision that removed the
#: rows (``mbcore.solve.linalg.rank_revealing``: a row whose independent part is below 1e-9
#: of the largest is dependent).  Accelerations: a position error ``dq`` of the
#: solution enters the acceleration equations of a removed row multiplied by about
#: ``|qd|^2 / L^2`` (``L`` the mechanism's lengths), more near a singular
#: configuration, which the bound does not model: measured up to 1.7e-7 of ``M``
#: (the Bennett linkage in joint coordinates, output step 0.01, Newton tolerance
#: 1e-12); the floor 1e-6 keeps the bound (1e-3 of ``M``) 6000 times above that
#: and still far below a conflict, which is O(1) of ``M`` where it starts
TOL_FLOOR = (1e-9, 1e-9, 1e-6)

#: the kept rows are chosen again where their rank ratio (QR of their Jacobian)
#: fell this many times below its value where they were chosen: the redundant set
#: moved (a row that was dependent at the start becomes independent along the
#: motion, as in the Bricard mechanism, and the kept rows turn dependent)
RESELECT_FACTOR = 10.0

_LEVELS = ("positions (Phi)", "velocities (Phi_q qd - nu)",
           "accelerations (Phi_q qdd - gamma)")


class RemovedRows:
    """The rows of ``system`` outside ``kept``, removed as redundant at ``t_removed``
    at the configuration ``q``: :meth:`check` at every solved point."""

    def __init__(self, system, kept: Sequence[int], q: np.ndarray, t: float,
                 tol: float, t_removed: float | None = None):
        self.system = system
        self.kept = np.asarray(kept, dtype=np.intp)
        self.removed = np.setdiff1d(np.arange(system.m), self.kept)
        self.t_removed = float(t if t_removed is None else t_removed)
        self.tol = [max(float(tol), f) for f in TOL_FLOOR]
        names = system.constraint_names
        self.names = [names[r] for r in self.removed]
        hol = np.asarray(system.holonomic, dtype=bool)
        self._hol_r = hol[self.removed]
        #: the largest |e| / bound of the checks that passed (<= 1)
        self.worst = 0.0
        #: the time at which C is exact (d = 0): the removal, else None
        self._exact_at = self.t_removed if float(t) == self.t_removed else None
        self._coefficients(q, t)

    def _coefficients(self, q: np.ndarray, t: float) -> None:
        J = np.asarray(self.system.jacobian_dense(q, t), dtype=float)
        C = np.linalg.lstsq(J[self.kept].T, J[self.removed].T, rcond=None)[0].T
        self.C = C.reshape(len(self.removed), len(self.kept))
        self._Cabs = np.abs(self.C)
        self._c1 = 1.0 + self._Cabs.sum(axis=1)
        if not hasattr(self, "ratio0"):
            #: the kept rows' rank ratio where they were chosen (:meth:`degraded`)
            self.ratio0 = self._kept_ratio(J)

    def _kept_ratio(self, J: np.ndarray) -> float:
        """|R_kk| / |R_11| of the pivoted QR of the kept rows' Jacobian (transposed):
        how far they are from dependent."""
        from .linalg import rank_revealing
        return rank_revealing(J[self.kept])[3] if len(self.kept) else 1.0

    def degraded(self, t: float, q: np.ndarray) -> str | None:
        """A reason when the kept rows have come :data:`RESELECT_FACTOR` times closer
        to dependent than where they were chosen (the analysis then chooses the
        independent rows again at this configuration), else None."""
        r = self._kept_ratio(np.asarray(self.system.jacobian_dense(q, t), dtype=float))
        if r * RESELECT_FACTOR < self.ratio0:
            return (f"the kept constraint rows became nearly dependent at t = {t:.9g} "
                    f"(rank ratio {self.ratio0:.3g} -> {r:.3g})")
        return None

    def look_again_below(self, t: float, q: np.ndarray) -> None:
        """A fresh choice was the same rows: :meth:`degraded` compares with their
        ratio here from now on."""
        self.ratio0 = self._kept_ratio(np.asarray(self.system.jacobian_dense(q, t),
                                                  dtype=float))

    # ------------------------------------------------------------------------------
    def check(self, t: float, q: np.ndarray, qd: np.ndarray | None = None,
              qdd: np.ndarray | None = None) -> None:
        """Raise :class:`ConflictingConstraintsError` when a removed row does not hold
        at the solved point (q, qd, qdd) at time t (module docstring).  ``qd`` /
        ``qdd`` None: that level is not checked."""
        levels = self._levels(t, q, qd, qdd)
        t = float(t)
        exact = t == self._exact_at
        worst = self._worst(levels, 0.0 if exact else 1.0)
        if worst[0] > 1.0 and not exact:
            # C of another configuration: test again with C here before failing
            self._coefficients(q, t)
            self._exact_at = None
            worst = self._worst(levels, 1.0)
        if worst[0] <= 1.0:
            self.worst = max(self.worst, worst[0])
            return
        _, r, lev, e, bound = worst
        self._raise(t, r, lev, e, bound)

    def _levels(self, t, q, qd, qdd):
        """(res, M) per level: the residuals of every row and the size of their terms."""
        s = self.system
        q = np.asarray(q, dtype=float)
        J = s.jacobian(q, t).copy()          # the System's buffer: kept here
        aJ = abs(J)
        out = []
        rows1 = np.asarray(aJ.sum(axis=1), dtype=float).ravel()
        phi = np.where(s.holonomic, np.asarray(s.phi(q, t), dtype=float), 0.0)
        qs = 1.0 + (float(np.max(np.abs(q))) if q.size else 0.0)
        out.append((phi, rows1 * qs))
        if qd is not None:
            qd = np.asarray(qd, dtype=float)
            nu = np.array(s.nu(q, t), dtype=float)
            out.append((np.asarray(J @ qd).ravel() - nu,
                        np.asarray(aJ @ np.abs(qd)).ravel() + np.abs(nu)))
            if qdd is not None:
                qdd = np.asarray(qdd, dtype=float)
                gam = np.array(s.gamma(q, qd, t), dtype=float)
                out.append((np.asarray(J @ qdd).ravel() - gam,
                            np.asarray(aJ @ np.abs(qdd)).ravel() + np.abs(gam)))
        return out

    def _worst(self, levels, d: float):
        """(|e| / bound, row, level, e, bound) of the row and level with the largest
        ratio (at most 1: every removed row holds)."""
        r_, k_ = self.removed, self.kept
        worst = (0.0, 0, 0, 0.0, 0.0)
        rho = 0.0                    # relative residual of the kept rows, this level
        for lev, (res, M) in enumerate(levels):        # and the ones below it
            rk, Mk = res[k_], M[k_]
            e = res[r_] - self.C @ rk
            if lev == 0:
                e = np.where(self._hol_r, e, 0.0)     # velocity-level rows: no Phi
            big = float(np.max(np.abs(rk))) if rk.size else 0.0
            if big > 0.0:
                size = float(np.max(Mk))
                rho = max(rho, big / size if size > 0.0 else np.inf)
            bound = SAFETY * (M[r_] + self._Cabs @ Mk) * (self.tol[lev] + d * self._c1 * rho)
            ratio = np.abs(e) / np.maximum(bound, 1e-300)
            if ratio.size:
                i = int(np.argmax(ratio))
                if ratio[i] > worst[0]:
                    worst = (float(ratio[i]), i, lev, float(e[i]), float(bound[i]))
        return worst

    def _raise(self, t, i, lev, e, bound):
        kn = self.system.constraint_names
        c = self._Cabs[i]
        parts = [kn[self.kept[j]] for j in np.argsort(-c)[:6]
                 if c.size and c[j] > 1e-8 * c.max()]
        name = self.names[i]
        raise ConflictingConstraintsError(
            f"constraint '{name}' (removed as redundant at t = {self.t_removed:.9g}) is "
            f"violated by {abs(e):.3g} in its {_LEVELS[lev]} at t = {t:.9g} (allowed "
            f"{bound:.3g}): the constraints conflict, or the equations it depended on "
            f"({', '.join(parts) or 'none'}) alone let the motion leave it (another "
            f"assembly branch); remove or correct the conflicting constraint, or take "
            f"smaller output steps", t, [name] + parts)
