"""Index-1 augmented Lagrangian (penalty) formulation with mass-orthogonal
projections (Bayo, Garcia de Jalon & Serna 1988; the ALI3-P family of the IFToMM
benchmark solutions, here with an explicit or BDF integrator).

State ``y = [q; qd]``.  At every evaluation the accelerations solve

    (M + a Phi_q^T Phi_q) qdd = Q + Phi_q^T (lam_k + a gamma_s)
    lam_{k+1} = lam_k - a (Phi_q qdd - gamma_s)        k = 0, 1, ...   lam_0 = 0

with ``gamma_s = gamma - 2 xi omega Phidot - omega^2 Phi`` (``Phidot = Phi_q qd - nu``,
Baumgarte terms: the violation dynamics ``Phi'' + 2 xi omega Phi' + omega^2 Phi = 0``
where the iteration has converged).  Each iterate satisfies Newton's law exactly,
``M qdd_k = Q + Phi_q^T lam_{k+1}`` (mbcore sign: reaction ``+Phi_q^T lam``), and the
iteration drives ``Phi_q qdd - gamma_s`` to zero by the factor
``1 / (1 + a sigma^2)`` per iteration along each singular direction ``sigma`` of
``Phi_q M^-1/2``: two or three iterations reach round-off at regular configurations
(the accelerations and multipliers of DI), while the leading matrix
``M + a Phi_q^T Phi_q`` stays positive definite at every configuration, also where
``Phi_q`` loses rank (the N-four-bar and the parallelogram when they flatten, the
slider-crank at its dead points).  There the directions with ``a sigma^2 << 1`` are
not enforced at that instant (the penalty regularises them) instead of making the
accelerations jump, so the motion stays on its branch.  The right-hand side is a
function of ``(t, y)`` only (lam starts from zero at every evaluation).

After every accepted step (``projection: true``) positions and velocities are
projected onto the constraints in the metric of M, with the same damped
(Levenberg-Marquardt) matrix: ``(M + a Phi_q^T Phi_q) dq = -a Phi_q^T Phi`` repeated,
``(M + a Phi_q^T Phi_q) dqd = -a Phi_q^T (Phi_q qd - nu)`` repeated; near a singular
configuration the damping keeps the correction on the current branch.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from mbcore.errors import AnalysisError, ModelError
from mbcore.formulation import Formulation
from mbcore.schema import Param

#: default penalty factor: this times the largest diagonal entry of M
ALPHA_SCALE = 1e7


class Penalty(Formulation):
    name = "penalty"
    description = ("augmented Lagrangian index-1 penalty formulation with iterated multipliers "
                   "and mass-orthogonal projections: passes singular configurations")
    settings_schema = {
        "alpha": Param("number", "penalty factor a of M + a Phi_q^T Phi_q (default 1e7 x the "
                       "largest diagonal entry of M)", required=False, positive=True),
        "xi": Param("number", "damping ratio of the constraint-violation dynamics",
                    default=1.0),
        "omega": Param("number", "natural frequency of the constraint-violation dynamics "
                       "(1/s)", default=20.0),
        "iterations": Param("number", "largest number of multiplier updates per evaluation",
                            default=10, positive=True),
        "tolerance": Param("number", "multiplier iterations stop when the relative change of "
                           "qdd or the relative acceleration-constraint residual is below this",
                           default=1e-12, positive=True),
        "projection": Param("bool", "project positions and velocities onto the constraints "
                            "after every step (and at outputs)", default=True),
        "singular_band": Param("number", "no projection where the smallest squared singular "
                               "value of Phi_q M^-1/2 is below this times the largest "
                               "(inside the band of a singular configuration; 0: always "
                               "project)", default=1e-8),
        "projection_tolerance": Param("number", "projection tolerance on |Phi| and |Phi_q qd "
                                      "- nu| (scaled by 1 + |q|, 1 + |qd|)", default=1e-9,
                                      positive=True),
    }

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        st = self.settings
        for k in ("xi", "omega", "singular_band"):
            if st[k] < 0:
                raise ModelError(f"settings.{k}", "must be >= 0")
        it = st["iterations"]
        if it != int(it) or it < 1:
            raise ModelError("settings.iterations", f"must be a positive integer, got {it:g}")
        self.iterations = int(it)
        #: spatial bodies: M(q) is not diagonal; ``md`` are the coordinate weights (for
        #: the penalty scale and the projections), the equations use
        #: ``M + alpha_p p p^T`` with the matching inertial forces (mbcore.mass)
        self.spatial = self.solver.spatial
        md = np.asarray(system.mass_diag if system.mass_diag is not None
                        else system.mass_weights, dtype=float)
        self.mass = md
        self.alpha = float(st["alpha"]) if st["alpha"] is not None else \
            ALPHA_SCALE * float(np.max(md) if md.size else 1.0)
        self.xi, self.omega = float(st["xi"]), float(st["omega"])
        self.tol = float(st["tolerance"])
        self._hol = np.asarray(system.holonomic, dtype=float) if system.m else np.zeros(0)
        self.qdd = np.zeros(self.n)
        self.lam = np.zeros(system.m)
        #: statistics: evaluations, multiplier iterations, evaluations that stopped at
        #: ``iterations`` (near singular configurations), projections
        self.evaluations = 0
        self.multiplier_iterations = 0
        self.unconverged_evaluations = 0
        self.projections = 0
        self.skipped_projections = 0
        self._minv = np.where(md > 0, 1.0 / np.where(md > 0, md, 1.0), 1.0)

    # -------------------------------------------------------------- linear algebra
    def _jacobian(self, q, t):
        """Phi_q at (q, t), evaluated *last* so that the System's Jacobian buffer
        holds it (the analysis reuses it for the power of the constraint forces)."""
        return self.system.jacobian(q, t)

    def _factor(self, J, M=None):
        """Factor P = M + a J^T J (positive definite for every configuration where
        the massless coordinates, if any, are constrained); ``M`` a dense mass matrix
        (spatial bodies) or None for the diagonal one."""
        a = self.alpha
        if sp.issparse(J):
            P = ((sp.diags(self.mass) if M is None else sp.csr_matrix(M))
                 + a * (J.T @ J)).tocsc()
            try:
                lu = spla.splu(P)
            except RuntimeError:
                raise AnalysisError("the penalty matrix M + alpha Phi_q^T Phi_q is singular: "
                                    "a massless coordinate is not constrained") from None
            return lu.solve
        P = a * (J.T @ J)
        if M is None:
            P[np.diag_indices_from(P)] += self.mass
        else:
            P += M
        try:
            cho = sla.cho_factor(P, check_finite=False)
        except np.linalg.LinAlgError:
            raise AnalysisError("the penalty matrix M + alpha Phi_q^T Phi_q is singular: "
                                "a massless coordinate is not constrained") from None
        return lambda b: sla.cho_solve(cho, b, check_finite=False)

    def accelerations(self, q, qd, t):
        """(qdd, lam) at (q, qd, t) by the augmented Lagrangian iteration; buffers."""
        s, a = self.system, self.alpha
        self.evaluations += 1
        Q = np.array(s.forces(q, qd, t), dtype=float)
        M = None
        if self.spatial is not None:
            self.spatial.update(q)
            self.spatial.inertial_forces(q, qd, Q)
            M = (self.spatial.matrix_regular(q) if s.dense
                 else self.spatial.matrix_regular_sparse(q))
        if s.m == 0:
            self.qdd[:] = Q / self.mass if M is None else np.linalg.solve(M, Q)
            return self.qdd, self.lam
        gam = np.array(s.gamma(q, qd, t), dtype=float)
        nu = np.array(s.nu(q, t), dtype=float)
        phi = np.array(s.phi(q, t), dtype=float) * self._hol
        J = self._jacobian(q, t)
        phid = J @ qd - nu
        gs = gam - 2.0 * self.xi * self.omega * phid - self.omega ** 2 * phi
        solve = self._factor(J, M)
        lam = np.zeros(s.m)
        qdd_prev = None
        absJ = abs(J)
        converged = False
        for k in range(self.iterations):
            qdd = solve(Q + J.T @ (lam + a * gs))
            r = J @ qdd - gs
            lam = lam - a * r                      # M qdd = Q + J^T lam holds exactly
            self.multiplier_iterations += 1
            scale = float(np.max(absJ @ np.abs(qdd))) + float(np.max(np.abs(gs))) + 1e-300
            if np.max(np.abs(r)) <= self.tol * scale:
                converged = True
                break
            if qdd_prev is not None and np.max(np.abs(qdd - qdd_prev)) <= \
                    self.tol * (1.0 + float(np.max(np.abs(qdd)))):
                converged = True
                break
            qdd_prev = qdd
        if not converged:
            self.unconverged_evaluations += 1
        self.qdd[:] = qdd
        self.lam[:] = lam
        return self.qdd, self.lam

    # --------------------------------------------------------- Formulation contract
    def compiled_stabilisation(self):
        return None

    def rhs(self, t, y):
        self.nfev += 1
        q, qd = self.split(y)
        self.q_cur, self.qd_cur = q, qd
        qdd, lam = self.accelerations(q, qd, t)
        self.solver.lam = lam            # power of the constraint forces (dynamic analysis)
        self._ydot[:self.n] = qd
        self._ydot[self.n:] = qdd
        return self._ydot

    def outputs(self, t, y):
        q, qd = self.split(y)
        qdd, lam = self.accelerations(q, qd, t)
        self.solver.lam = lam
        return q.copy(), qd.copy(), qdd.copy(), lam.copy()

    def project(self, t, y, count=True):
        """Mass-orthogonal, damped projection of positions then velocities onto the
        constraints; the projected state (a new array) or None when nothing changed
        (``projection: false``: always None)."""
        s, n, a = self.system, self.n, self.alpha
        if not self.settings["projection"] or s.m == 0:
            return None
        q = np.array(y[:n], dtype=float)
        qd = np.array(y[n:2 * n], dtype=float)
        ptol = self.settings["projection_tolerance"]
        tol = ptol * (1.0 + float(np.max(np.abs(q))))
        vtol = ptol * (1.0 + float(np.max(np.abs(qd))))
        hol = self._hol
        changed = False
        phi = np.array(s.phi(q, t)) * hol
        J = self._jacobian(q, t)
        if float(np.max(np.abs(phi))) <= tol and \
                float(np.max(np.abs(J @ qd - s.nu(q, t)))) <= vtol:
            return None
        if self._near_singular(J):
            self.skipped_projections += int(count)
            return None
        prev = math.inf
        for _ in range(20):
            err = float(np.max(np.abs(phi)))
            if err <= tol or err >= prev:      # converged, or damped steps stall
                break                          # (a rank-deficient direction)
            prev = err
            J = self._jacobian(q, t)
            q -= self._factor(J)(a * (J.T @ phi))
            changed = True
            phi = np.array(s.phi(q, t)) * hol
        J = self._jacobian(q, t)
        solve = None
        prev = math.inf
        for _ in range(20):
            r = J @ qd - s.nu(q, t)
            err = float(np.max(np.abs(r)))
            if err <= vtol or err >= prev:
                break
            prev = err
            solve = solve or self._factor(J)
            qd -= solve(a * (J.T @ r))
            changed = True
        if not changed:
            return None
        self.projections += int(count)
        out = np.array(y, dtype=float)
        out[:n], out[n:2 * n] = q, qd
        return out

    def _near_singular(self, J):
        """The configuration is inside the singular band: the smallest singular value
        of Phi_q M^-1/2 is below ``sqrt(singular_band)`` times the largest (the tangent
        space of the constraints is ill-defined there; projecting would rotate the
        velocity out of its branch and drain energy)."""
        band = self.settings["singular_band"]
        if band <= 0:
            return False
        Jd = J.toarray() if sp.issparse(J) else J
        if self.solver.rows is not None:          # redundant rows removed at assembly
            Jd = Jd[self.solver.rows]
        sv = np.linalg.svd(Jd * np.sqrt(self._minv), compute_uv=False)
        if not sv.size or sv[0] == 0.0:
            return True
        return bool(sv[-1] ** 2 < band * sv[0] ** 2)

    def warnings(self, step):
        """The violation dynamics (poles of magnitude ~ omega) must be resolved by a
        fixed step."""
        out = []
        xi, w = self.xi, self.omega
        pole = w * (xi + math.sqrt(xi * xi - 1.0)) if xi >= 1.0 else w
        if step and step * pole > 1.0:
            out.append(f"penalty xi = {self.xi:g}, omega = {self.omega:g}: the violation "
                       f"dynamics have a pole of magnitude {pole:.3g} 1/s, too fast for the "
                       f"step {step:g} s (h*|pole| = {step * pole:.2g} > 1); reduce omega or "
                       f"the step")
        return out
