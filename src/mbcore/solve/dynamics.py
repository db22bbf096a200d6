"""Equations of motion: accelerations and Lagrange multipliers at a state.

``[M, -Phi_q^T; Phi_q, 0] [qdd; lam] = [Q; gamma]`` (Nikravesh (1988), Eqs. 9.49-9.55, sign of
Nikravesh (1988), Ch. 9: the reaction is ``+Phi_q^T lam``; docs/conventions.md), solved by the
Schur complement ``B = Phi_q M^-1 Phi_q^T`` (Nikravesh (1988), Prob. 10.9-10.10) because M is
diagonal for centroidal planar frames: compiled (LAPACK dpotrf) or the SciPy
reference for dense Jacobians; sparse Jacobians use the sparse Schur solver of
:mod:`mbcore.solve.sparse_schur` (ordering and symbolic factorisation once per topology,
O(N) per call for chains and trees; docs/linear-solvers.md).  Massless artificial
coordinates (M singular) use SuperLU on the augmented matrix.
"""
from __future__ import annotations

import numpy as np

from ..errors import AnalysisError, SingularJacobianError
from ..system.system import issparse
from .linalg import _sla, dependent_rows


class AccelerationSolver:
    """Solves the equations of motion of a System at (q, qd, t)."""

    def __init__(self, system):
        self.system = system
        n, m = system.n, system.m
        #: spatial bodies (Formulation I): the solver works in transformed columns
        #: with a diagonal M^-1 (mbcore.system.mass)
        self.spatial = None
        if system.mass_diag is None:
            self._check_spatial_mass(system)
            from ..system.mass import SpatialMass
            self.spatial = SpatialMass(system)
            self.augmented = False
            self.minv = self.spatial.minv_hat
            # thin rods (zero inertia about their axes): M singular, the augmented
            # (KKT) solve in transformed columns, regular where the joints fix
            # every rod's spin
            self.augmented = self.spatial.has_massless
            self._Qs = np.zeros(n)
            self._jhat = np.zeros(len(system.jacobian_data))
            if system.dense:
                self._jhat_view = self._jhat[:m * n].reshape(m, n)
            else:
                import scipy.sparse as sp
                self._jhat_view = sp.csr_matrix((self._jhat[:system.nnz],
                                                 system.csr_pattern()[1].astype(np.int32),
                                                 system.csr_pattern()[0].astype(np.int32)),
                                                shape=(m, n), copy=False)
        else:
            nbody = system.n_body
            if np.any(system.mass_diag[:nbody] <= 0):
                k = int(np.nonzero(system.mass_diag[:nbody] <= 0)[0][0])
                body = system.coordinate_names[k].rsplit(".", 1)[0]
                raise AnalysisError(f"body '{body}' has zero mass or inertia: "
                                    f"the mass matrix is singular")
            # massless artificial coordinates (cams, slots): M is not invertible, solve
            # the augmented system instead of the Schur complement (curve pairs,
            # Nikravesh (1988), §4.2.5-4.2.6)
            self.augmented = bool(np.any(system.mass_diag == 0))
            self.minv = np.where(system.mass_diag > 0, 1.0 / np.where(
                system.mass_diag > 0, system.mass_diag, 1.0), 0.0)
        self.qdd = np.zeros(n)
        self.lam = np.zeros(m)
        self._compiled = None
        self.rows = None                 # independent rows when constraints are redundant
        #: "error": a rank-deficient Jacobian stops the run; "least_squares": pass
        #: through (singular configurations of consistent systems, e.g. the N-four-bar
        #: at its change points) with the minimum-norm multipliers
        self.rank_deficiency = "error"
        self.rank_deficient_events = 0
        if system.backend == "compiled" and system.dense and not self.augmented:
            from .._ext._linalg import SchurSolver
            self._compiled = SchurSolver(n, m)
        #: sparse Jacobians: sparse Schur complement (compiled or reference by backend)
        self._sparse_full = None
        self._sparse_rows = None
        #: spatial bodies: the solver of the transformed Jacobian, without the entries
        #: that vanish identically in transformed columns (SpatialMass.nonzero_entries:
        #: the normalisation rows decouple); the general one (``_sparse``) serves the
        #: untransformed Jacobian (assembly, penalty)
        self._sparse_hat = None
        self.sparse_entries_note = ""
        if not system.dense and not self.augmented:
            from .sparse_schur import for_system
            keep = None
            if self.spatial is not None:
                keep, self.sparse_entries_note = self.spatial.nonzero_entries()
            # the full pattern's solver only when something asks for it (its
            # symbolic analysis is a third of the set-up of a 1000-body chain)
            self._sparse_hat = for_system(system, entries=keep) if keep is not None \
                else self._sparse

    @property
    def _sparse(self):
        """The sparse Schur solver of the untransformed Jacobian's whole pattern
        (penalty, rows chosen by :meth:`set_rows`), built on first use; None for dense
        Jacobians and the augmented form."""
        if self._sparse_full is None and not self.system.dense and not self.augmented:
            from .sparse_schur import for_system
            self._sparse_full = for_system(self.system)
        return self._sparse_full

    @property
    def sparse_kernel(self):
        """The compiled sparse Schur solver of a sparse Jacobian, or None (dense
        Jacobian, or the reference backend)."""
        return getattr(self._sparse, "kernel", None)

    @property
    def transformed_sparse_kernel(self):
        """The compiled sparse Schur solver of the Jacobian the equations of motion
        use (spatial bodies: in transformed columns, only the entries that can be
        non-zero there), or None."""
        return getattr(self._sparse_hat, "kernel", None)

    @property
    def rows_sparse_kernel(self):
        """The compiled sparse Schur solver on the rows chosen by :meth:`set_rows`
        (the one :meth:`solve` uses there), or None (dense Jacobian, no rows chosen,
        or the reference backend)."""
        return getattr(self._sparse_rows, "kernel", None)

    def mass_solve(self, q, qd, F, out=None):
        """``M^-1 F`` (planar) or, for spatial bodies, the regular Formulation I
        equivalent ``(M + alpha p p^T)^-1 (F - b* - alpha p pd^T pd)`` (mbcore.system.mass):
        the accelerations produced by the total force F (applied + reactions)."""
        if out is None:
            out = np.empty(self.system.n)
        if self.spatial is None:
            np.multiply(self.minv, F, out=out)
            return out
        return self.spatial.solve(q, qd, F, out)

    @staticmethod
    def _check_spatial_mass(system) -> None:
        """Positive masses and a positive definite J' for every spatial body."""
        if system.n_extra:
            raise AnalysisError("the equations of motion of spatial models with "
                                "artificial coordinates are not available")
        for k, mass in enumerate(system.body_mass):
            if not mass > 0:
                raise AnalysisError(f"body '{system.body_names[k]}' has zero mass: "
                                    f"the mass matrix is singular")
        rigid = list(system.rigid_spatial)
        if not rigid:
            return
        evs = np.linalg.eigvalsh(np.asarray(system.body_inertia, dtype=float)
                                 .reshape(len(rigid), 3, 3))       # all bodies at once
        ok = (evs[:, 0] > 0) | ((evs[:, 0] >= -1e-12 * evs[:, 2]) & (evs[:, 1] > 0))
        if not ok.all():                                           # (thin rods are ok)
            j = int(np.nonzero(~ok)[0][0])
            raise AnalysisError(f"body '{system.body_names[rigid[j]]}': its inertia tensor "
                                f"is not positive definite (principal moments "
                                f"{', '.join(f'{x:.6g}' for x in evs[j])})")

    def set_rows(self, rows) -> None:
        """Use only these constraint rows (the independent ones of a redundant set,
        L-U with full pivoting, Nikravesh (1988), App. C); the multipliers of the others are zero."""
        s = self.system
        self.rows = None if rows is None else np.asarray(rows, dtype=np.intp)
        if self.rows is not None and self._compiled is not None:
            from .._ext._linalg import SchurSolver
            self._compiled = SchurSolver(s.n, len(self.rows))
            self._lam_a = np.zeros(len(self.rows))
        self._sparse_rows = None
        if self.rows is not None and self._sparse is not None:
            from .sparse_schur import for_system
            self._sparse_rows = for_system(s, rows=self.rows)

    def solve(self, q, qd, t, gamma_extra=None, force_extra=None):
        """(qdd, lam) — work buffers, valid until the next call.  ``gamma_extra``
        is added to gamma (Baumgarte stabilisation, CS formulation), ``force_extra``
        (n) to the generalised forces (inputs of a linearisation)."""
        s = self.system
        Q = s.forces(q, qd, t)
        if force_extra is not None:
            Q = Q + force_extra
        J = s.jacobian(q, t)
        gam = s.gamma(q, qd, t)
        if gamma_extra is not None:
            gam = gam + gamma_extra
        if self.spatial is None:
            return self._solve(J, s.jacobian_data, Q, gam, t)
        sm = self.spatial
        sm.update(q)
        Qs = self._Qs
        Qs[:] = Q
        sm.inertial_forces(q, qd, Qs)
        sm.transform_jacobian(s.jacobian_data, self._jhat)
        self._solve(self._jhat_view, self._jhat, sm.transform_forces(Qs), gam, t)
        sm.back(self.qdd)
        return self.qdd, self.lam

    def _solve(self, J, jdata, Q, gam, t):
        """The diagonal-mass solve (spatial bodies: in transformed columns)."""
        s = self.system
        if self.rows is not None:
            return self._solve_rows(J, gam, Q, t)
        if self._compiled is not None:
            info = self._compiled.solve(jdata, self.minv, Q, gam, self.qdd, self.lam)
            if info:
                return self._least_squares(J, gam, Q, t)
            return self.qdd, self.lam
        if s.dense and self.augmented:
            A = np.block([[np.diag(self._mass()), -J.T], [J, np.zeros((s.m, s.m))]])
            sla = _sla()
            try:
                import warnings
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    x = sla.solve(A, np.concatenate([Q, gam]), check_finite=False)
            except (np.linalg.LinAlgError, sla.LinAlgWarning):
                self._check_massless(J, t)
                self._singular(J, t)
            self.qdd[:] = x[:s.n]
            self.lam[:] = x[s.n:]
            return self.qdd, self.lam
        if s.dense:
            C = J * self.minv
            B = C @ J.T
            sla = _sla()
            try:
                cho = sla.cho_factor(B, check_finite=False)
            except np.linalg.LinAlgError:
                return self._least_squares(J, gam, Q, t)
            if s.m and np.min(np.abs(np.diag(cho[0]))) ** 2 < 1e-13 * np.max(np.diag(B)):
                return self._least_squares(J, gam, Q, t)
            self.lam[:] = sla.cho_solve(cho, gam - C @ Q, check_finite=False) if s.m else 0.0
            self.qdd[:] = self.minv * (Q + J.T @ self.lam)
            return self.qdd, self.lam
        if self._sparse_hat is not None:
            if self._sparse_hat.solve(jdata, self.minv, Q, gam, self.qdd, self.lam):
                return self._least_squares(J, gam, Q, t)
            return self.qdd, self.lam
        # sparse with massless coordinates: augmented matrix with SuperLU
        import scipy.sparse as sp
        import scipy.sparse.linalg as spla
        A = sp.bmat([[sp.diags(self._mass()), -J.T], [J, None]], format="csc")
        try:
            x = spla.splu(A).solve(np.concatenate([Q, gam]))
        except RuntimeError:
            self._check_massless(J.toarray(), t)
            self._singular(J.toarray(), t)
        self.qdd[:] = x[:s.n]
        self.lam[:] = x[s.n:]
        return self.qdd, self.lam

    def _least_squares(self, J, gam, Q, t):
        """B = J M^-1 J^T is singular: stop (default) or use the minimum-norm
        multipliers (``rank_deficiency = "least_squares"``)."""
        if self.rank_deficiency != "least_squares":
            self._singular(J, t)
        J = np.asarray(J.toarray() if issparse(J) else J)
        C = J * self.minv
        B = C @ J.T
        self.lam[:] = np.linalg.lstsq(B, gam - C @ Q, rcond=1e-10)[0]
        self.qdd[:] = self.minv * (Q + J.T @ self.lam)
        self.rank_deficient_events += 1
        return self.qdd, self.lam

    def _solve_rows(self, J, gam, Q, t):
        """The equations of motion with the independent rows only."""
        s, r = self.system, self.rows
        if self._sparse_rows is not None:
            if self._sparse_rows.solve(self._jhat if self.spatial is not None else s.jacobian_data,
                                       self.minv, Q, gam, self.qdd, self.lam):
                self._singular(J[r], t, index=r)
            return self.qdd, self.lam
        Ja = np.asarray(J.toarray() if issparse(J) else J)[r]
        ga = gam[r]
        if self._compiled is not None:
            info = self._compiled.solve(np.ascontiguousarray(Ja).reshape(-1), self.minv, Q,
                                        ga, self.qdd, self._lam_a)
            if info:
                self._singular(Ja, t)
            lam_a = self._lam_a
        else:
            A = np.block([[np.diag(self._mass()), -Ja.T], [Ja, np.zeros((len(r), len(r)))]])
            try:
                x = np.linalg.solve(A, np.concatenate([Q, ga]))
            except np.linalg.LinAlgError:
                self._check_massless(Ja, t)
                self._singular(Ja, t)
            self.qdd[:] = x[:s.n]
            lam_a = x[s.n:]
        self.lam[:] = 0.0
        self.lam[r] = lam_a
        return self.qdd, self.lam

    def _mass(self) -> np.ndarray:
        """The diagonal mass matrix of the solve (spatial bodies: transformed
        columns, 0 on the axes of thin rods)."""
        sm = self.spatial
        if sm is None:
            return self.system.mass_diag
        return sm.mass_hat if sm.has_massless else 1.0 / self.minv

    def _check_massless(self, J, t) -> None:
        """A singular augmented matrix with thin rods: when the transformed Jacobian's
        columns of the rods' axes are rank deficient, a rod's spin is not fixed by
        any joint (M is then not positive definite on the constraints' null space)
        -- raise that named error; else return."""
        sm = self.spatial
        if sm is None or not sm.has_massless:
            return
        J = np.asarray(J.toarray() if issparse(J) else J, dtype=float)
        cols = sm.massless_columns()
        Jz = J[:, cols]
        scale = max(1.0, float(np.max(np.abs(J)))) if J.size else 1.0
        _, sv, vt = np.linalg.svd(Jz, full_matrices=True)
        if len(sv) == len(cols) and sv[-1] > 1e-8 * scale:
            return                           # every rod's spin is fixed
        # the least constrained combination of spins (vt: k x k, its last row)
        body, axis = sm.massless_names()[int(np.argmax(np.abs(vt[-1])))]
        ax = ", ".join(f"{x:.3g}" for x in np.where(np.abs(axis) < 1e-12, 0.0, axis))
        raise AnalysisError(
            f"body '{body}' has zero inertia about its axis ({ax}) and no joint fixes its "
            f"rotation about that axis, so its spin is not determined: use a universal or "
            f"revolute joint instead of a spherical one at one of its ends, or give it a "
            f"positive inertia about that axis", t)

    def raise_singular(self, J, t, index=None):
        """Raise the named error of a rank-deficient Jacobian J at time t (the
        dependent constraints by name; ``index``: the rows J holds)."""
        self._singular(J, t, index)

    def _singular(self, J, t, index=None):
        names = self.system.constraint_names
        if issparse(J):
            rows = self._dependent_rows_sparse(J, index)
        else:
            rows = dependent_rows(np.asarray(J))
        if index is not None:           # J holds the rows ``index`` of the Jacobian
            rows = np.asarray(index)[rows]
        raise SingularJacobianError(
            "the equations of motion are singular: the constraint Jacobian is rank "
            "deficient (redundant constraints or a singular configuration); equations "
            f"involved: {', '.join(names[r] for r in rows)}{self._light_masses()}", t,
            [names[r] for r in rows])

    def _light_masses(self) -> str:
        """A note naming the coordinates whose mass (inertia) is below 1e-12 of the
        largest: a numerically singular mass matrix makes the same failure."""
        minv = np.asarray(getattr(self, "minv", np.zeros(0)), dtype=float)
        if not minv.size or not np.all(np.isfinite(minv)) or np.min(minv) <= 0.0:
            return ""
        light = np.nonzero(minv > 1e12 * np.min(minv))[0]
        if not len(light):
            return ""
        names = self.system.coordinate_names
        return ("; the mass matrix is nearly singular: the mass or inertia of "
                + ", ".join(names[j] for j in light[:8]) + " is below 1e-12 of the largest")

    def _dependent_rows_sparse(self, J, index=None, limit: int = 4_000_000):
        """Dependent rows of a sparse Jacobian: the SVD of the whole matrix when it is
        small, else of the rows around the failed pivot of the sparse Schur solver
        (its neighbours in B's graph, two levels), so that the error stays cheap."""
        import scipy.sparse as sp
        J = sp.csr_matrix(J)
        if J.shape[0] * J.shape[1] <= limit:
            return dependent_rows(J.toarray())
        solver = self._sparse_rows if self.rows is not None else self._sparse_hat
        r0 = solver.failed_row if solver is not None else -1
        if r0 >= 0 and index is not None:
            hit = np.nonzero(np.asarray(index) == r0)[0]
            r0 = int(hit[0]) if len(hit) else -1
        if r0 < 0 or r0 >= J.shape[0]:
            return np.array([], int)
        B = (J @ J.T).tocsr()
        near = {r0}
        for _ in range(2):
            near |= set(B[sorted(near)].indices.tolist())
        near = np.array(sorted(near))
        sub = J[near]
        cols = np.unique(sub.indices)
        return near[dependent_rows(sub[:, cols].toarray())]


def accelerations(system, q, qd, t: float = 0.0, *, solver: "AccelerationSolver | None" = None):
    """The accelerations and Lagrange multipliers of ``system`` at ``(t, q, qd)``: a
    :class:`mbcore.State` (copies) with ``qdd`` and ``lam`` from the equations of
    motion ``M qdd - Phi_q^T lam = Q``, ``Phi_q qdd = gamma`` (Nikravesh (1988),
    Eqs. 9.49-9.55; sign convention: docs/conventions.md).  The state need not be
    consistent (the equations are solved as they stand).  ``solver``: an
    :class:`AccelerationSolver` of this system to reuse (repeated calls)."""
    from ..system.state import State
    n = system.n
    vals = []
    for name, v in (("q", q), ("qd", qd)):
        a = np.asarray(v, dtype=float)
        if a.shape != (n,):
            raise AnalysisError(f"accelerations: {name} needs {n} values "
                                f"({', '.join(system.coordinate_names)}), got shape "
                                f"{a.shape}")
        bad = np.nonzero(~np.isfinite(a))[0]
        if bad.size:
            raise AnalysisError(f"accelerations: {name}[{system.coordinate_names[bad[0]]}] "
                                f"is {a[bad[0]]}")
        vals.append(a)
    t = float(t)
    if not np.isfinite(t):
        raise AnalysisError(f"accelerations: t is {t}")
    solver = AccelerationSolver(system) if solver is None else solver
    qdd, lam = solver.solve(vals[0], vals[1], t)
    return State(t, vals[0].copy(), vals[1].copy(), np.array(qdd), np.array(lam))
