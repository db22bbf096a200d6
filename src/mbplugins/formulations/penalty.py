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

Where M is diagonal and positive (planar bodies and particles, no massless
coordinates) the same iterates are computed in their Schur form: with ``lam_{k+1}``
as the unknown (``M qdd_k = Q + Phi_q^T lam_{k+1}``, ``Phi_q qdd_k = gs + (lam_k -
lam_{k+1}) / a``),

    (B + I/a) lam_{k+1} = gs + lam_k / a - Phi_q M^-1 Q,    B = Phi_q M^-1 Phi_q^T
    qdd_k = M^-1 (Q + Phi_q^T lam_{k+1})

The residual of the stopping test, ``Phi_q qdd_k - gs``, is then ``(lam_k -
lam_{k+1}) / a`` (no product with Phi_q; its scale ``max_i sum_j |Phi_q,ij| |qdd_j| +
max |gs|`` is taken from the first iterate).
``B + I/a`` is positive definite at every configuration too, and no term carries the
factor a: the right-hand side of the n x n form, ``Q + Phi_q^T (lam + a gs)``, is ~a
times larger than the accelerations it produces, so that form loses ~eps a / m
(~1e-9 relative with the default a) where the Schur form keeps round-off (~1e-13 at
regular configurations).  Spatial bodies take the Schur form in the transformed
columns of mbcore.system.mass (``Phi_q^ = Phi_q T``, ``Q^ = T^T Q``, ``M^-1 = T D
T^T`` with D diagonal and positive; ``qdd = T qdd^``): with the n x n form the
heavy top of Brüls & Cardona and the other spatial problems of docs/benchmarks.md
did not reach rtol 1e-10 (the steps shrank to the noise of eps a), in the Schur form
their errors are within the tolerance.  Only models with massless coordinates use
the n x n form.

After every accepted step (``projection: true``) positions and velocities are
projected onto the constraints in the metric of M, with the same damped
(Levenberg-Marquardt) matrix: ``(M + a Phi_q^T Phi_q) dq = -a Phi_q^T Phi`` repeated,
``(M + a Phi_q^T Phi_q) dqd = -a Phi_q^T (Phi_q qd - nu)`` repeated; near a singular
configuration the damping keeps the correction on the current branch (Schur form:
``dq = -M^-1 Phi_q^T (B + I/a)^-1 Phi``, the same step).

Compiled kernel (``mbplugins._ext._penalty.CompiledPenalty``): the right-hand side and
the projections of the Schur form in C for systems of compiled elements (dense or
sparse Jacobian; the sparse path uses the symbolic analysis of the sparse Schur
solver and is O(N) per evaluation on chains), so that the compiled integration loop
runs the penalty formulation with its post-step projections
(``mbcore.integrate.fastloop``).  The Python path of this module is its NumPy reference,
selected at run time by ``formulation.compiled = None`` (or ``kernels: numpy``);
tests keep both equal to 1e-12.  The kernel decides the singular band without an
SVD (Sylvester's law of inertia on ``B - tau I``, see its docstring).
"""
from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from mbcore.errors import AnalysisError, ModelError
from mbcore.solve.formulation import Formulation
from mbcore.elements.schema import Param

#: default penalty factor: this times the largest diagonal entry of M
ALPHA_SCALE = 1e7

#: the projections' tolerance without one of the user's or a run's atol above it
PROJECTION_TOLERANCE = 1e-9


class Penalty(Formulation):
    name = "penalty"
    description = ("augmented Lagrangian index-1 penalty formulation with iterated multipliers "
                   "and mass-orthogonal projections: passes singular configurations")
    settings_schema = {
        "alpha": Param("number", "penalty factor a of M + a Phi_q^T Phi_q (default 1e7 x the "
                       "largest diagonal entry of M)", required=False, positive=True),
        "xi": Param("number", "damping ratio of the constraint-violation dynamics",
                    default=1.0, unit="1"),
        "omega": Param("number", "natural frequency of the constraint-violation dynamics",
                       default=20.0, unit="1/time"),
        "iterations": Param("number", "largest number of multiplier updates per evaluation",
                            default=10, positive=True),
        "tolerance": Param("number", "multiplier iterations stop when the relative change of "
                           "qdd or the relative acceleration-constraint residual is below this",
                           default=1e-12, positive=True, unit="1"),
        "projection": Param("bool", "project positions and velocities onto the constraints "
                            "after every step (and at outputs)", default=True),
        "singular_band": Param("number", "no projection where the smallest squared singular "
                               "value of Phi_q M^-1/2 is below this times the largest "
                               "(inside the band of a singular configuration; 0: always "
                               "project)", default=1e-8, unit="1"),
        "projection_tolerance": Param("number", "project where |Phi| or |Phi_q qd - nu| "
                                      "exceeds this (scaled by 1 + |q|, 1 + |qd|); default: "
                                      "the run's atol, at least 1e-9 (within it the "
                                      "Baumgarte terms hold the violations at the "
                                      "integration error)", required=False, positive=True),
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
        #: ``M + alpha_p p p^T`` with the matching inertial forces (mbcore.system.mass)
        self.spatial = self.solver.spatial
        if self.spatial is not None:
            self.spatial.refuse_massless("formulation 'penalty' (its Schur form)")
        md = np.asarray(system.mass_diag if system.mass_diag is not None
                        else system.mass_weights, dtype=float)
        self.mass = md
        self.alpha = float(st["alpha"]) if st["alpha"] is not None else \
            ALPHA_SCALE * float(np.max(md) if md.size else 1.0)
        if not math.isfinite(self.alpha):      # 1e7 x a mass or inertia near 1e308
            k = int(np.argmax(md))
            raise ModelError("settings.alpha", f"the default penalty factor {ALPHA_SCALE:g} x "
                             f"the largest mass entry ({md[k]:.6g}, at "
                             f"'{system.coordinate_names[k]}') overflows: check the masses "
                             f"and inertias, or give settings.alpha")
        self.xi, self.omega = float(st["xi"]), float(st["omega"])
        self.tol = float(st["tolerance"])
        self._hol = np.asarray(system.holonomic, dtype=float) if system.m else np.zeros(0)
        self.qdd = np.zeros(self.n)
        self.lam = np.zeros(system.m)
        #: statistics of the Python path (the properties without the underscore add
        #: the compiled kernel's): evaluations, multiplier iterations, evaluations
        #: that stopped at ``iterations`` (near singular configurations), projections
        self._evaluations = 0
        self._multiplier_iterations = 0
        self._unconverged_evaluations = 0
        self._projections = 0
        self._skipped_projections = 0
        self._minv = np.where(md > 0, 1.0 / np.where(md > 0, md, 1.0), 1.0)
        #: the Schur form of the iteration: M diagonal and positive, or spatial bodies
        #: in the transformed columns of mbcore.system.mass (J^ = J T, Q^ = T^T Q,
        #: M^-1 = T D T^T with D diagonal and positive); the projections' metric is
        #: the diagonal of coordinate weights in both
        self.schur = bool(md.size) and bool(np.all(md > 0))
        if self.spatial is not None:
            self._jhat = np.zeros(len(system.jacobian_data))
            m, n = system.m, system.n
            if system.dense:
                self._jhat_view = self._jhat[:m * n].reshape(m, n)
            else:
                indptr, indices = system.csr_pattern()
                self._jhat_view = sp.csr_matrix(
                    (self._jhat[:system.nnz], indices.astype(np.int32),
                     indptr.astype(np.int32)), shape=(m, n), copy=False)
        #: the projections' tolerance (``projection_tolerance``, or :meth:`set_tolerances`)
        self.projection_tolerance = float(st["projection_tolerance"] or PROJECTION_TOLERANCE)
        #: the compiled kernel (None: the Python path); ``compiled = None`` selects the
        #: NumPy reference at run time, ``kernel`` keeps the object for the statistics
        self.kernel = self._compiled_kernel()
        self.compiled = self.kernel
        self._ywork = np.zeros(2 * self.n + 1)
        self._last_compiled = False

    def set_tolerances(self, rtol, atol):
        """Without a ``projection_tolerance`` of the user's, project only where the
        violations exceed the run's atol: within it the Baumgarte terms hold them at
        the integration error, and a projection there only moves the state along
        the constraints' ill-conditioned directions (IFToMM A02 at rtol 1e-3: B0 off
        by 0.6 m with a projection to 1e-9 after almost every step, 4e-6 m
        without)."""
        if self.settings["projection_tolerance"] is not None or atol is None:
            return
        self.projection_tolerance = max(PROJECTION_TOLERANCE, float(atol))
        if self.kernel is not None:
            self.kernel.projection_tolerance = self.projection_tolerance

    def _compiled_kernel(self):
        """``CompiledPenalty`` of a System made only of compiled elements with a
        positive diagonal mass matrix (planar) or spatial bodies, else None."""
        s, solver = self.system, self.solver
        kernels = s.compiled_kernels()
        if not self.schur or kernels is None or solver.augmented or s.m > s.n:
            return None
        kw = {}
        if not s.dense:
            sparse = solver.sparse_kernel
            if sparse is None or not s.m:
                return None
            kw["sparse_solver"] = sparse
        try:
            from mbplugins._ext._penalty import CompiledPenalty
        except ImportError:              # pragma: no cover - an old build
            return None
        st = self.settings
        return CompiledPenalty(*kernels.args,
                               np.ascontiguousarray(self.mass, dtype=float),
                               np.ascontiguousarray(self._hol, dtype=float), self.alpha,
                               self.xi, self.omega, self.iterations, self.tol,
                               bool(st["projection"]), float(st["singular_band"]),
                               self.projection_tolerance, spatial=self.spatial,
                               **kw)

    def _stat(self, name):
        k = self.kernel
        return getattr(self, "_" + name) + (getattr(k, name) if k is not None else 0)

    evaluations = property(lambda self: self._stat("evaluations"))
    multiplier_iterations = property(lambda self: self._stat("multiplier_iterations"))
    unconverged_evaluations = property(lambda self: self._stat("unconverged_evaluations"))
    projections = property(lambda self: self._stat("projections"))
    skipped_projections = property(lambda self: self._stat("skipped_projections"))

    def _on_compiled(self) -> bool:
        return self.compiled is not None and self.solver.rows is None

    # -------------------------------------------------------------- linear algebra
    def _jacobian(self, q, t):
        """Phi_q at (q, t), evaluated *last* so that the System's Jacobian buffer
        holds it (the analysis reuses it for the power of the constraint forces)."""
        return self.system.jacobian(q, t)

    def _factor(self, J, t=None):
        """Factor P = M + a J^T J, M the diagonal mass (positive definite for every
        configuration where the massless coordinates, if any, are constrained)."""
        a = self.alpha
        if sp.issparse(J):
            P = (sp.diags(self.mass) + a * (J.T @ J)).tocsc()
            try:
                lu = spla.splu(P)
            except RuntimeError:
                raise AnalysisError("the penalty matrix M + alpha Phi_q^T Phi_q is singular: "
                                    "a massless coordinate is not constrained", t) from None
            return lu.solve
        P = a * (J.T @ J)
        P[np.diag_indices_from(P)] += self.mass
        try:
            cho = sla.cho_factor(P, check_finite=False)
        except np.linalg.LinAlgError:
            raise AnalysisError("the penalty matrix M + alpha Phi_q^T Phi_q is singular: "
                                "a massless coordinate is not constrained", t) from None
        return lambda b: sla.cho_solve(cho, b, check_finite=False)

    def _schur_factor(self, J, t=None, minv=None):
        """The solve of ``B + I/a`` (``B = J M^-1 J^T``, positive definite); ``minv``
        the diagonal M^-1 (default: the coordinate weights')."""
        m, ia = self.system.m, 1.0 / self.alpha
        minv = self._minv if minv is None else minv
        if sp.issparse(J):
            B = (J @ sp.diags(minv) @ J.T + ia * sp.identity(m)).tocsc()
            lu = spla.splu(B, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                           options={"SymmetricMode": True})
            return lu.solve
        B = (J * minv) @ J.T
        B[np.diag_indices_from(B)] += ia
        try:
            cho = sla.cho_factor(B, check_finite=False)
        except np.linalg.LinAlgError:            # not finite
            raise AnalysisError("the penalty matrix B + I/alpha is not positive "
                                "definite (non-finite state, or masses of very different "
                                "magnitude?)", t) from None
        return lambda b: sla.cho_solve(cho, b, check_finite=False)

    def accelerations(self, q, qd, t):
        """(qdd, lam) at (q, qd, t) by the augmented Lagrangian iteration; buffers."""
        s, a = self.system, self.alpha
        self._evaluations += 1
        Q = np.array(s.forces(q, qd, t), dtype=float)
        sm = self.spatial
        minv = self._minv
        if sm is not None:                  # transformed columns (mbcore.system.mass)
            sm.update(q)
            sm.inertial_forces(q, qd, Q)
            Q = np.array(sm.transform_forces(Q))
            minv = sm.minv_hat
        if s.m == 0:
            self.qdd[:] = Q * minv if sm is not None else Q / self.mass
            if sm is not None:
                sm.back(self.qdd)
            return self.qdd, self.lam
        gam = np.array(s.gamma(q, qd, t), dtype=float)
        nu = np.array(s.nu(q, t), dtype=float)
        phi = np.array(s.phi(q, t), dtype=float) * self._hol
        J = self._jacobian(q, t)
        phid = J @ qd - nu
        gs = gam - (2.0 * self.xi * self.omega) * phid - (self.omega * self.omega) * phi
        if sm is not None:
            sm.transform_jacobian(s.jacobian_data, self._jhat)
            J = self._jhat_view
        lam = np.zeros(s.m)
        qdd_prev = None
        absJ = abs(J)
        converged = False
        if self.schur:
            solve, ia = self._schur_factor(J, t, minv), 1.0 / a
            c = J @ (Q * minv)
        else:
            solve = self._factor(J, t)
        for k in range(self.iterations):
            if self.schur:                          # the same iterate, Schur form
                lam_new = solve(gs + lam * ia - c)
                qdd = minv * (Q + J.T @ lam_new)
                r = (lam - lam_new) * ia           # = J qdd - gs (the solved equation)
                lam = lam_new
            else:
                qdd = solve(Q + J.T @ (lam + a * gs))
                r = J @ qdd - gs
                lam = lam - a * r                  # M qdd = Q + J^T lam holds exactly
            self._multiplier_iterations += 1
            if k == 0 or not self.schur:            # (Schur form: from the first iterate)
                scale = float(np.max(absJ @ np.abs(qdd))) + float(np.max(np.abs(gs))) \
                    + 1e-300
            if np.max(np.abs(r)) <= self.tol * scale:
                converged = True
                break
            if qdd_prev is not None and np.max(np.abs(qdd - qdd_prev)) <= \
                    self.tol * (1.0 + float(np.max(np.abs(qdd)))):
                converged = True
                break
            qdd_prev = qdd
        if not converged:
            self._unconverged_evaluations += 1
        self.qdd[:] = qdd
        if sm is not None:
            sm.back(self.qdd)
        self.lam[:] = lam
        return self.qdd, self.lam

    # --------------------------------------------------------- Formulation contract
    def compiled_stabilisation(self):
        return None

    def rhs(self, t, y):
        self.nfev += 1
        q, qd = self.split(y)
        self.q_cur, self.qd_cur = q, qd
        if self._on_compiled() and self.compiled.eval(t, y, self._ywork) == 0:
            self._last_compiled = True
            self.solver.lam = self.compiled.lam_view
            self._ydot[:] = self._ywork[:2 * self.n]
            return self._ydot
        # (a failed compiled evaluation: the Python path raises the named error)
        self._last_compiled = False
        qdd, lam = self.accelerations(q, qd, t)
        self.solver.lam = lam            # power of the constraint forces (dynamic analysis)
        self._ydot[:self.n] = qd
        self._ydot[self.n:] = qdd
        return self._ydot

    def work_rate(self, t):
        """The rate of the work channel at the last :meth:`rhs`: the power of the
        non-conservative forces + ``lam . Phi_q qd`` (every iterate obeys ``M qdd =
        Q + Phi_q^T lam``; the Jacobian buffer holds Phi_q at that state)."""
        if self._last_compiled:
            return self.compiled.power
        s = self.system
        q, qd = self.q_cur, self.qd_cur
        J = s.last_jacobian
        return float(s.nonconservative_power(q, qd, t)) + float(self.lam @ (J @ qd))

    def outputs(self, t, y):
        q, qd = self.split(y)
        if self._on_compiled():
            c = self.compiled
            ok = c.eval(t, np.ascontiguousarray(y[:2 * self.n], dtype=float),
                        self._ywork) == 0
            c.nfev -= 1                  # an output, not an integration cost
            if ok:
                self.solver.lam = c.lam_view
                return (q.copy(), qd.copy(), c.qdd_view.copy(), c.lam_view.copy())
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
        if self._on_compiled():
            yc = np.ascontiguousarray(y, dtype=float)
            out = np.array(yc)
            code = self.compiled.project(t, yc, out, count)
            if code >= 0:
                return out if code == 1 else None
            # a failed evaluation: the Python path raises the named error
        q = np.array(y[:n], dtype=float)
        qd = np.array(y[n:2 * n], dtype=float)
        ptol = self.projection_tolerance
        tol = ptol * (1.0 + float(np.max(np.abs(q), initial=0.0)))
        vtol = ptol * (1.0 + float(np.max(np.abs(qd), initial=0.0)))
        hol = self._hol
        changed = False
        phi = np.array(s.phi(q, t)) * hol
        J = self._jacobian(q, t)
        if float(np.max(np.abs(phi))) <= tol and \
                float(np.max(np.abs(J @ qd - s.nu(q, t)))) <= vtol:
            return None
        if self._near_singular(J):
            self._skipped_projections += int(count)
            return None
        prev = math.inf
        for _ in range(20):
            err = float(np.max(np.abs(phi)))
            if err <= tol or err >= prev:      # converged, or damped steps stall
                break                          # (a rank-deficient direction)
            prev = err
            J = self._jacobian(q, t)
            if self.schur:                      # the same step, Schur form
                q -= self._minv * (J.T @ self._schur_factor(J, t)(phi))
            else:
                q -= self._factor(J, t=t)(a * (J.T @ phi))
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
            if self.schur:
                solve = solve or self._schur_factor(J, t)
                qd -= self._minv * (J.T @ solve(r))
            else:
                solve = solve or self._factor(J, t=t)
                qd -= solve(a * (J.T @ r))
            changed = True
        if not changed:
            return None
        self._projections += int(count)
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
