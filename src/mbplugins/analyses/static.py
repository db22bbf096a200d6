"""Static equilibrium (Nikravesh (1988), Ch. 14, DADS-2D kinematics report, Ch. 4).

With qd = qdd = 0: ``Phi(q) = 0`` and ``Phi_q^T lam + Q(q) = 0`` (Nikravesh (1988), Eqs. 14.1-14.2,
sign of docs/conventions.md).  Velocity-dependent forces (dampers) vanish.
Methods (``settings.method``):

* ``newton`` — Newton-Raphson on (q, lam) (Nikravesh (1988), §14.1, Eq. 14.3) with a line search;
  the stiffness ``(Phi_q^T lam + Q)_q`` by central differences.
* ``modified_newton`` — the same, keeping the factorised matrix while the residual
  falls fast enough (DADS-2D kinematics report, Ch. 4).
* ``partitioned`` — Newton on the k independent coordinates,
  ``f(v) = Q_v + H^T Q_u = 0`` with ``H = -Phi_u^-1 Phi_v`` (Nikravesh (1988), §14.1.1, Eqs. 14.4-14.7),
  the partition by QR with column pivoting of Phi_q.
* ``energy`` — minimisation of the potential energy over v (Nikravesh (1988), §14.2, Alg SE-1) by
  BFGS with the gradient ``dV/dv = -f(v)^T`` (Eq. 14.20); conservative loads only;
  finds stable equilibria only.
* ``joint_coordinates`` — minimisation of the potential energy over the joint
  coordinates of the model's kinematic tree (Nikravesh (1988), §14.4, Eq. 14.24; loops: penalty on
  the cut joints, Eq. 14.26, then Newton); conservative loads; stable equilibria.
* fictitious damping (dynamic relaxation, Nikravesh (1988), §14.3) is the dynamic analysis with
  damping, run until rest.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.optimize as opt

from mbcore.analysis.base import Analysis, element_channels
from mbcore.solve.assembly import assemble
from mbcore.elements.base import ForceType
from mbcore.errors import AnalysisError, ConvergenceError, ModelError
from mbcore.results.reporting import Channel
from mbcore.elements.schema import Param


class StaticAnalysis(Analysis):
    name = "static"
    description = "static equilibrium: Newton-Raphson, partitioned Newton or energy minimisation"
    settings_schema = {
        "t_start": Param("number", "time at which loads are evaluated", default=0.0,
                         unit="time"),
        "method": Param("choice", "solution method", default="newton",
                        choices=("newton", "modified_newton", "partitioned", "energy",
                                 "joint_coordinates", "given")),
        "assemble": Param("bool", "assemble the estimates first", default=True),
        "tolerance": Param("number", "residual tolerance (forces and Phi)", default=1e-10,
                           positive=True),
        "max_iterations": Param("number", "iterations", default=100, positive=True),
    }

    def channels(self):
        s = self.system
        ch = [Channel("q", list(s.coordinate_names), "equilibrium coordinates"),
              Channel("lam", list(s.constraint_names), "Lagrange multipliers"),
              Channel("reactions", list(s.reaction_labels), "element reactions")]
        ch += element_channels(s)
        ch.append(Channel("energy", ["potential"], "potential energy"))
        ch.append(Channel("solver", ["iterations", "force_residual", "phi_norm"],
                          "iterations and final residuals"))
        return ch

    # ---------------------------------------------------------------------------
    def run(self, record, event, progress=False):
        s, st = self.system, self.settings
        t = st["t_start"]
        self.t = t
        q0 = s.initial_state(t).q
        if s.m and st["assemble"]:
            rep = assemble(s, q0, np.zeros(s.n), t)
            q0 = rep.q
            event(t, "assembly", rep.summary())
        method = st["method"]
        if method in ("energy", "joint_coordinates"):
            self._check_conservative()
        solve = {"newton": self._newton, "modified_newton": self._newton,
                 "partitioned": self._partitioned, "energy": self._energy,
                 "joint_coordinates": self._joint_coordinates, "given": self._given}[method]
        q, lam, it = solve(q0.copy(), modified=(method == "modified_newton"))
        r, phi = self._residual(q, lam)
        fr = float(np.max(np.abs(r))) if r.size else 0.0
        pn = float(np.max(np.abs(phi))) if phi.size else 0.0
        self.stats = {"method": method, "iterations": it, "force_residual": fr,
                      "phi_norm": pn}
        self.q, self.lam = q, lam
        data = {"q": q, "lam": lam, "reactions": s.reactions(q, t, lam),
                "energy": np.array([s.potential_energy(q, t)]),
                "solver": np.array([it, fr, pn])}
        if s.local_reaction_labels:
            data["reactions_local"] = s.reactions_local(q, t, lam)
        if s.force_labels:
            data["forces"] = s.force_outputs(q, np.zeros(s.n), t)
        if s.point_names:
            data["points"] = s.point_kinematics(q, np.zeros(s.n), np.zeros(s.n)).ravel()
        if s.angular_labels:
            data["angular"] = np.zeros(len(s.angular_labels))
        record(t, data)

    # ---------------------------------------------------------------------------
    def _residual(self, q, lam):
        s = self.system
        Q = s.forces(q, np.zeros(s.n), self.t).copy()
        J = s.jacobian_dense(q, self.t)
        return Q + J.T @ lam, s.phi(q, self.t).copy()

    def _scale(self, q):
        s = self.system
        Q = s.forces(q, np.zeros(s.n), self.t)
        return (1.0 + float(np.max(np.abs(Q), initial=0.0)),      # no bodies: 1
                1.0 + float(np.max(np.abs(q), initial=0.0)))

    def _stiffness(self, q, lam):
        """K = d(Q + Phi_q^T lam)/dq by central differences (Eq. 14.3)."""
        n = self.system.n
        K = np.empty((n, n))
        for j in range(n):
            h = 1e-6 * max(1.0, abs(q[j]))
            e = np.zeros(n)
            e[j] = h
            K[:, j] = (self._residual(q + e, lam)[0] - self._residual(q - e, lam)[0]) / (2 * h)
        return K

    def _initial_lam(self, q):
        s = self.system
        Q = s.forces(q, np.zeros(s.n), self.t)
        J = s.jacobian_dense(q, self.t)
        return np.linalg.lstsq(J.T, -Q, rcond=None)[0] if s.m else np.zeros(0)

    def _newton(self, q, modified=False):
        s = self.system
        n, m = s.n, s.m
        lam = self._initial_lam(q)
        fs, qs = self._scale(q)
        tol, maxit = self.settings["tolerance"], int(self.settings["max_iterations"])
        lu = None
        prev = np.inf
        for it in range(maxit + 1):
            r, phi = self._residual(q, lam)
            F = np.concatenate([r, phi])
            norm = max(float(np.max(np.abs(r))) / fs if n else 0.0,
                       float(np.max(np.abs(phi))) / qs if m else 0.0)
            if norm <= tol:
                return q, lam, it
            if it == maxit:
                break
            if lu is None or not modified or norm > 0.25 * prev:
                J = s.jacobian_dense(q, self.t)
                A = np.block([[self._stiffness(q, lam), J.T], [J, np.zeros((m, m))]])
                lu = self._factor(A, q, it)
            prev = norm
            dz = sla.lu_solve(lu, -F, check_finite=False)
            if not np.all(np.isfinite(dz)):
                raise self._singular_error(A, it)
            # line search on the residual norm (damped Newton)
            step, F0 = 1.0, float(np.linalg.norm(F))
            for _ in range(30):
                qn, ln = q + step * dz[:n], lam + step * dz[n:]
                try:
                    rn, pn = self._residual(qn, ln)
                except AnalysisError:       # e.g. a spring of zero length: step back
                    step *= 0.5
                    continue
                if np.all(np.isfinite(rn)) and np.linalg.norm(np.concatenate([rn, pn])) < F0:
                    break
                step *= 0.5
            q, lam = qn, ln
        raise ConvergenceError(f"static equilibrium: Newton-Raphson did not converge in "
                               f"{maxit} iterations (scaled residual {norm:.3g})", self.t)

    def _factor(self, A: np.ndarray, q: np.ndarray, it: int):
        """LU of the Newton matrix; a ConvergenceError naming the coordinates of
        its null space when it is singular (or not finite)."""
        import warnings
        if not np.all(np.isfinite(A)):
            raise self._singular_error(A, it)
        with warnings.catch_warnings():
            warnings.simplefilter("error", sla.LinAlgWarning)
            try:
                return sla.lu_factor(A, check_finite=False)
            except (sla.LinAlgWarning, np.linalg.LinAlgError):
                raise self._singular_error(A, it) from None

    def _singular_error(self, A: np.ndarray, it: int) -> ConvergenceError:
        """The stiffness/constraint matrix of Newton iteration ``it`` is singular: no
        equilibrium near the estimate, or a motion that nothing resists (e.g. a
        slider loaded along its guide with no spring); names the coordinates of its
        null vector."""
        s = self.system
        names = list(s.coordinate_names)
        who = ""
        if np.all(np.isfinite(A)):
            v = np.linalg.svd(A)[2][-1][:s.n]
            big = np.abs(v) > 0.1 * np.max(np.abs(v)) if np.any(v) else np.zeros(0, bool)
            who = ", ".join(names[j] for j in np.nonzero(big)[0][:8])
        return ConvergenceError(
            f"static equilibrium: the stiffness matrix of Newton iteration {it} is "
            f"singular: no equilibrium near the estimates, or a motion nothing resists "
            f"(loads with no spring or constraint against them)"
            + (f"; coordinates involved: {who}" if who else ""), self.t)

    # -- partitioned methods (Nikravesh (1988), §14.1.1, §14.2) ---------------------------------
    def _partition(self, q, avoid=()):
        """Independent coordinates v: the k rows of a null-space basis T of the
        Jacobian (the admissible motions) that form its best-conditioned k x k block
        (QR with column pivoting of T^T); then Phi_u is regular (Phi_u T_u = -Phi_v
        T_v).  A coordinate that cannot move at q (T row ~ 0) is never independent;
        coordinates in ``avoid`` (a chart that failed, e.g. a coordinate along gravity,
        whose reduced force never vanishes) are taken only if nothing else serves."""
        s = self.system
        if s.m == 0:
            return np.zeros(0, dtype=int), np.arange(s.n)
        J = s.jacobian_dense(q, self.t)
        T = sla.null_space(J)
        k = s.n - s.m
        if T.shape[1] != k:              # rank deficient: the Jacobian's own pivots,
            r = s.n - T.shape[1]         # as many dependent coordinates as its rank
            _, _, piv = sla.qr(J, mode="economic", pivoting=True)   # (redundant rows)
            return np.sort(piv[:r]), np.sort(piv[r:])
        Tt = T.T.copy()
        if len(avoid):
            Tt[:, list(avoid)] *= 1e-3
        _, _, piv = sla.qr(Tt, mode="economic", pivoting=True)
        v = np.sort(piv[:k])
        return np.setdiff1d(np.arange(s.n), v), v

    def _quality(self, q, v):
        """Smallest singular value of the rows v of an orthonormal null-space basis
        (1: ideal independent coordinates; 0: Phi_u singular)."""
        T = sla.null_space(self.system.jacobian_dense(q, self.t))
        if T.shape[1] != len(v):
            return 0.0
        return float(np.linalg.svd(T[v], compute_uv=False)[-1])

    def _repartition(self, q, u, v, avoid=()):
        """A fresh partition when the current one has become 10x worse than the best
        at q (e.g. a coordinate along gravity is stationary at the equilibrium and
        cannot stay independent)."""
        if self.system.m == 0:
            return u, v
        u2, v2 = self._partition(q, avoid)
        if np.array_equal(v2, v):
            return u, v
        return (u2, v2) if 10.0 * self._quality(q, v) < self._quality(q, v2) else (u, v)

    def _solve_u(self, q, u):
        """Newton on Phi(u, v) = 0 for the dependent coordinates u (in place)."""
        s = self.system
        if s.m == 0:
            return True
        scale = 1.0 + float(np.max(np.abs(q), initial=0.0))
        for _ in range(30):
            phi = s.phi(q, self.t)
            if np.max(np.abs(phi)) <= 1e-13 * scale:
                return True
            J = s.jacobian_dense(q, self.t)
            try:
                q[u] -= _solve(J[:, u], phi)
            except np.linalg.LinAlgError:
                return False
            if not np.all(np.isfinite(q)):
                return False
        return bool(np.max(np.abs(s.phi(q, self.t))) <= 1e-10 * scale)

    def _reduced(self, q, u, v):
        """f(v) = Q_v + H^T Q_u with H = -Phi_u^-1 Phi_v, and lam = -Phi_u^-T Q_u."""
        s = self.system
        Q = s.forces(q, np.zeros(s.n), self.t).copy()
        J = s.jacobian_dense(q, self.t)
        lam = -_solve(J[:, u].T, Q[u]) if s.m else np.zeros(0)
        return Q[v] + J[:, v].T @ lam, lam

    def _partitioned(self, q, modified=False):
        """Partitioned Newton (Nikravesh (1988), §14.1.1) on null-space charts with switching; if
        that fails, once more from the estimate on the Jacobian's own pivot
        partition kept fixed (the classic choice, which reaches some equilibria the
        switching does not); the first error is reported when both fail."""
        try:
            return self._partitioned_charts(q.copy(), switching=True)
        except ConvergenceError as first:
            try:
                return self._partitioned_charts(q.copy(), switching=False)
            except (ConvergenceError, np.linalg.LinAlgError):
                raise first from None

    def _partitioned_charts(self, q, switching=True):
        if switching:
            u, v = self._partition(q)
        else:
            J = self.system.jacobian_dense(q, self.t)
            if self.system.m:
                _, _, piv = sla.qr(J, mode="economic", pivoting=True)
                u, v = np.sort(piv[:self.system.m]), np.sort(piv[self.system.m:])
            else:
                u, v = np.zeros(0, dtype=int), np.arange(self.system.n)
        tol, maxit = self.settings["tolerance"], int(self.settings["max_iterations"])
        fs = self._scale(q)[0]
        avoid: set[int] = set()
        for it in range(maxit + 1):
            if switching:                      # never back to a failed chart
                u, v = self._repartition(q, u, v, sorted(avoid))
            f, lam = self._reduced(q, u, v)
            if np.max(np.abs(f)) / fs <= tol if f.size else True:
                return q, lam, it
            dv = self._partitioned_step(q, u, v, f)
            qn = None
            if dv is not None:
                step = 1.0
                for _ in range(30):
                    qn = q.copy()
                    qn[v] += step * dv
                    if self._solve_u(qn, u) and self._decreases(qn, u, v, f):
                        break
                    step *= 0.5
                    qn = None
            if qn is None:
                # this chart cannot reach the equilibrium (singular reduced stiffness
                # or no descent): another set of independent coordinates
                avoid.update(int(j) for j in v)
                u2, v2 = self._partition(q, sorted(avoid)) if switching else (u, v)
                if np.array_equal(v2, v) or len(avoid) >= self.system.n:
                    raise ConvergenceError("static equilibrium (partitioned Newton): no "
                                           "step reduces the reduced forces from the "
                                           "current estimate in any coordinate "
                                           "partition (a stationary point of them, or a "
                                           "neutral direction): try method 'energy' or "
                                           "another estimate", self.t)
                u, v = u2, v2
                continue
            q = qn
        raise ConvergenceError(f"static equilibrium (partitioned Newton) did not converge in "
                               f"{maxit} iterations", self.t)

    def _partitioned_step(self, q, u, v, f):
        """Newton step dv of the reduced equations f(v) = 0, with df/dv by central
        differences re-solving u at every perturbation (Nikravesh (1988), Eq. 14.7); the
        least-squares step where df/dv is singular, None where that is zero."""
        D = np.empty((len(v), len(v)))
        for k, j in enumerate(v):
            h = 1e-6 * max(1.0, abs(q[j]))
            qp, qm = q.copy(), q.copy()
            qp[j] += h
            qm[j] -= h
            if not (self._solve_u(qp, u) and self._solve_u(qm, u)):
                raise ConvergenceError("static equilibrium: the dependent coordinates "
                                       "cannot be solved near the current estimate", self.t)
            D[:, k] = (self._reduced(qp, u, v)[0] - self._reduced(qm, u, v)[0]) / (2 * h)
        if not np.all(np.isfinite(D)):
            return None
        sv = np.linalg.svd(D, compute_uv=False)
        if sv[-1] > 1e-12 * max(sv[0], 1e-300):
            return np.linalg.solve(D, -f)
        # singular (e.g. a spring at its free length has no lateral stiffness yet):
        # the least-squares step; none at all means this chart cannot move f
        dv = np.linalg.lstsq(D, -f, rcond=1e-12)[0]
        return dv if np.any(dv != 0.0) else None

    def _decreases(self, q, u, v, f):
        """Line-search test; a trial point where a load cannot be evaluated (e.g. a
        spring of zero length) counts as a failed trial."""
        try:
            return bool(np.linalg.norm(self._reduced(q, u, v)[0]) < np.linalg.norm(f))
        except AnalysisError:
            return False

    def _check_conservative(self):
        """The energy method needs a potential for every load: gravity and springs
        have one; applied forces, torques and actuators do not."""
        s = self.system
        fv = s.functions_at(self.t)
        for fg in s.force_groups:
            bad = None
            if fg.ftype.name in ("force", "torque") or not hasattr(fg.ftype, "energy"):
                bad = fg.names[0]
            elif fg.ftype.name in ("tsda", "rsda"):
                nz = np.nonzero(fv[fg.fidx[:, 0], 0] != 0)[0]
                bad = fg.names[nz[0]] if len(nz) else None
            elif type(fg.ftype).energy is ForceType.energy:
                bad = fg.names[0]
            if bad:
                raise ModelError("settings.method", f"method 'energy' needs conservative "
                                 f"loads; '{bad}' ({fg.ftype.name}) has no potential: use "
                                 f"'newton' or 'partitioned'")

    def _joint_coordinates(self, q, modified=False):
        """Potential-energy minimisation over the joint coordinates of the model's
        tree (Nikravesh (1988), §14.4, :mod:`.jc_statics`); loops through their cut joints (penalty),
        then Newton-Raphson on (q, lam) to close them exactly."""
        from .jc_statics import minimise
        tol, maxit = self.settings["tolerance"], int(self.settings["max_iterations"])
        q, it = minimise(self.system, q, self.t, tol, maxit)
        if len(self.system.phi(q, self.t)) and \
                np.max(np.abs(self.system.phi(q, self.t))) > 1e-12 * (1 + np.abs(q).max()):
            q, lam, it2 = self._newton(q)
            return q, lam, it + it2
        return q, self._initial_lam(q), it

    def _given(self, q, modified=False):
        """The multipliers at the given configuration, without moving it: the
        structure / DAP STATIC case (Nikravesh (1988), §9.5, Eq. 9.57) — least squares
        ``Phi_q^T lam = -Q``; the residual says whether it is an equilibrium."""
        return q, self._initial_lam(q), 0

    def _energy(self, q, modified=False):
        """BFGS on V(v) over the independent coordinates; when it stalls where its
        partition has degraded, again from there with a fresh partition."""
        u, v = self._partition(q)
        if len(v) == 0:            # no degree of freedom: the assembly is the answer
            return q, self._reduced(q, u, v)[1], 0
        nit = 0
        avoid: set[int] = set()
        for attempt in range(4):
            q, lam, it, err = self._energy_once(q, u, v)
            nit += it
            if err is None:
                return q, lam, nit
            avoid.update(int(j) for j in v)          # a chart that cannot reach it
            u2, v2 = self._partition(q, sorted(avoid))
            if np.array_equal(v2, v) or len(v2) == 0:   # no other chart here
                break
            u, v = u2, v2
        raise err

    def _energy_once(self, q, u, v):
        s = self.system
        base = q.copy()
        n_eval = [0]

        def fun(x):
            n_eval[0] += 1
            qq = base.copy()
            qq[v] = x
            try:
                if not self._solve_u(qq, u):
                    raise AnalysisError("no assembly")
                f, _ = self._reduced(qq, u, v)
            except AnalysisError:
                return 1e300, np.zeros_like(x)     # infeasible: the line search backs off
            base[:] = qq                           # warm start the next u solve
            return s.potential_energy(qq, self.t), -f

        fs = self._scale(q)[0]
        res = opt.minimize(fun, q[v].copy(), jac=True, method="BFGS",
                           options={"gtol": self.settings["tolerance"] * fs,
                                    "maxiter": 50 * int(self.settings["max_iterations"])})
        qq = base.copy()
        qq[v] = res.x
        self._solve_u(qq, u)
        f, lam = self._reduced(qq, u, v)
        if np.max(np.abs(f)) > 1e3 * self.settings["tolerance"] * fs:
            return qq, lam, int(res.nit), ConvergenceError(
                f"static equilibrium by energy minimisation did not converge "
                f"({res.message}; |dV/dv| = {np.max(np.abs(f)):.3g})", self.t)
        return qq, lam, int(res.nit), None


def _solve(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A x = b; a non-square A (redundant constraint rows: Phi_u is m x r of rank r)
    by least squares, the minimum-norm solution -- for consistent redundant rows the
    reduced force Q_v + Phi_v^T lam does not depend on which lam solves it."""
    if A.shape[0] == A.shape[1]:
        return np.linalg.solve(A, b)
    return np.linalg.lstsq(A, b, rcond=None)[0]
