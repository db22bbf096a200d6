"""Kinematic analysis of kinematically driven systems (Nikravesh (1988), §3.2.2 Alg K-II, §4.3,
KAP §5.1.2; DADS-2D kinematics report, Ch. 3).

Per output time: Newton-Raphson on ``Phi(q, t) = 0`` (drivers appended, square
system) with one LU per iteration, then ``Phi_q qd = nu`` and
``Phi_q qdd = gamma`` with the factors of the Jacobian at the converged q.
"""
from __future__ import annotations

import math
import os

import numpy as np

from mbcore.analysis.base import Analysis, element_channels
from mbcore.analysis.joint_channels import BlockRecorder, JointChannel, joint_channel
from mbcore.errors import (AnalysisError, AssemblyError, LockupError, ModelError,
                           SingularJacobianError)
from mbcore.solve.assembly import assemble
from mbcore.solve.linalg import dense_lu, dependent_rows, numerical_rank, rank_revealing
from mbcore.solve.redundancy import RemovedRows
from mbcore.results.reporting import Channel
from mbcore.elements.schema import Param
from mbcore.system.system import check_finite

from .progress import progress as _progress


class KinematicAnalysis(Analysis):
    #: dense Jacobians up to this many coordinates when ``jacobian: auto``: the
    #: compiled dense stepper beats the sparse LU per iteration up to n ~ 140
    #: (measured, docs/linear-solvers.md)
    dense_limit = 140
    name = "kinematic"
    handles_switching = True
    description = "positions, velocities and accelerations of a kinematically driven system"
    settings_schema = {
        "t_start": Param("number", "first output time", default=0.0, unit="time"),
        "t_end": Param("number", "last output time", default=1.0, unit="time"),
        "output_step": Param("number", "output interval", default=0.01, positive=True,
                             unit="time"),
        "tolerance": Param("number", "Newton tolerance on |Phi| (scaled by 1 + |q|)",
                           default=1e-10, positive=True),
        "max_iterations": Param("number", "Newton iterations per time", default=25,
                                positive=True),
        "singular_tolerance": Param("number", "LU pivot ratio treated as singular",
                                    default=1e-13, positive=True),
        "predictor": Param("choice", "initial guess at the next time",
                           default="taylor", choices=("taylor", "previous")),
        "coordinates": Param("choice", "solve in Cartesian coordinates, or in the joint "
                             "coordinates of the model's kinematic tree (drivers and cut "
                             "joints of loops as the equations)",
                             default="cartesian", choices=("cartesian", "joint")),
    }

    @classmethod
    def check_settings(cls, s, path):
        if s["t_end"] < s["t_start"]:
            raise ModelError(f"{path}.t_end", f"t_end ({s['t_end']:g}) is before t_start "
                                              f"({s['t_start']:g})")
        if s["max_iterations"] != int(s["max_iterations"]):
            raise ModelError(f"{path}.max_iterations", "expected an integer")

    # ----------------------------------------------------------------------
    def channels(self):
        sysm = self.system
        ch = [Channel("q", list(sysm.coordinate_names), "coordinates"),
              Channel("qd", list(sysm.coordinate_names), "velocities"),
              Channel("qdd", list(sysm.coordinate_names), "accelerations")]
        if sysm.point_names:
            labels = list(sysm.point_labels)
            ch.append(Channel("points", labels, "named points: position, velocity, "
                                                "acceleration"))
        if sysm.angular_labels:
            ch.append(Channel("angular", list(sysm.angular_labels), "angular velocity and "
                              "acceleration of each spatial body, global axes"))
        ch += joint_channel(sysm)
        ch.append(Channel("solver", ["newton_iterations", "phi_norm", "pivot_ratio"],
                          "Newton iterations, final |Phi|_inf and LU pivot ratio per time"))
        return ch

    def times(self) -> np.ndarray:
        s = self.settings
        t0, t1, h = s["t_start"], s["t_end"], s["output_step"]
        n = int(math.floor((t1 - t0) / h + 1e-9))
        return np.minimum(t0 + h * np.arange(n + 1), t1)

    # ----------------------------------------------------------------------
    def run(self, record, event, progress=False):
        sysm = self.system
        n, m = sysm.n, sysm.m
        s = self.settings
        self.switches = None
        if sysm.model.switching:             # switching constraint sets
            if s["coordinates"] == "joint":
                raise ModelError("settings.coordinates", "switching constraint sets are "
                                 "followed in Cartesian coordinates only (coordinates: "
                                 "cartesian)")
            from mbcore.solve.switching import SwitchSet
            self.switches = SwitchSet(sysm, sysm.model.switching)
        if s["coordinates"] == "joint":
            return self._run_joint(record, event, progress)
        self.removed_rows = None             # mbcore.solve.redundancy: checked at every time
        self.rows = self._select_rows(s["t_start"])
        lu = dense_lu(n, sysm.backend) if sysm.dense else None
        times = self.times()
        state = sysm.initial_state(times[0])
        q, qd, qdd = state.q.copy(), np.zeros(n), np.zeros(n)
        tol, maxit = s["tolerance"], int(s["max_iterations"])
        iters_total = 0
        points = bool(sysm.point_names)
        angular = bool(sysm.angular_labels)
        if joint_channel(sysm):             # the joints channel, in blocks of rows
            record = BlockRecorder(record, JointChannel(sysm))
        bar = _progress(len(times), progress)
        stepper, fast_lu, recorded = None, 0, 0
        self.stats = {"steps": 0, "newton_iterations": 0, "lu_factorizations": 0,
                      "dof_mechanism": None}
        try:
            # degrees of freedom of the mechanism without drivers (Nikravesh (1988), §3.1)
            kin_rows = [r for name, sl in sysm.element_rows.items()
                        if sysm.element_sections[name] == "joints"
                        for r in range(sl.start, sl.stop)]
            kin_rows += list(range(sysm.m_elements, sysm.m))   # Euler-parameter norms
            if self.switches is not None:                      # the engaged ones
                kin_rows = sorted(set(kin_rows) & set(self.rows.tolist()))
            J0 = sysm.jacobian_dense(q, times[0])
            rk = numerical_rank(J0[kin_rows]) if kin_rows else 0
            self.stats["dof_mechanism"] = n - rk
            ndrv = m - len(kin_rows)
            event(float(times[0]), "info", f"{n} coordinates, {len(kin_rows)} kinematic "
                  f"equations (rank {rk}): {n - rk} DOF, {ndrv} driver equations")
            prev_t = None
            stepper = self._stepper()
            fast = None
            taylor = s["predictor"] == "taylor"
            for k, t in enumerate(times):
                t = float(t)
                use_fast = stepper is not None and k > 0
                if prev_t is not None and taylor and not use_fast:
                    h = t - prev_t
                    q = q + h * qd + 0.5 * h * h * qdd
                if use_fast:
                    # compiled step: predictor + Newton + velocities + accelerations in
                    # one call; a failure is re-run on the reference path for diagnosis
                    if fast is None:          # persistent buffers, updated in place
                        fast = (q.copy(), qd.copy(), qdd.copy(), np.zeros(3), {})
                        q, qd, qdd = fast[0], fast[1], fast[2]
                    hh = t - prev_t if taylor else 0.0
                    status = stepper.step(q, qd, qdd, t, sysm.functions_at(t), tol, maxit,
                                          s["singular_tolerance"], hh)
                    if status == 0:
                        iters_total += stepper.iterations
                        fast_lu += stepper.iterations + 1
                        solver = fast[3]
                        solver[0], solver[1], solver[2] = (stepper.iterations,
                                                           stepper.phi_norm,
                                                           stepper.pivot_ratio)
                        data = fast[4]
                        data["q"], data["qd"], data["qdd"], data["solver"] = q, qd, qdd, solver
                        if points:
                            data["points"] = sysm.point_kinematics(q, qd, qdd).reshape(-1)
                        if angular:
                            data["angular"] = sysm.angular_kinematics(q, qd, qdd).ravel()
                        self._extra(t, q, qd, qdd, _StepperLU(stepper), None, data)
                        record(t, data)
                        recorded += 1
                        prev_t = t
                        bar.update(1)
                        continue
                    q = stepper.predicted()
                    qd, qdd = qd.copy(), qdd.copy()
                    fast = None
                it, phin, ratio = self._newton(q, t, lu, tol, maxit, assembly=k == 0)
                if k == 0:
                    event(t, "assembly", self._assembly_report(state.q, q))
                    if self.switches is not None:
                        self.switches.start(q, t)
                    elif self.rows is not None:
                        self._check_redundant_consistent(q, t, event)
                iters_total += it
                qd, qdd, ratio, J = self._rates(q, t, lu)
                check_finite("acceleration", qdd, sysm.coordinate_names, t)
                if self.switches is not None and k > 0:
                    moved = self._switch_between(prev, (q, qd, qdd), t, lu, event)
                    if moved is not None:       # a switch: solved again on the new set
                        q, qd, qdd, it2, phin, ratio, J = moved
                        iters_total += it2
                if self.switches is not None:
                    prev = (t, q.copy(), qd.copy(), qdd.copy())
                if self.removed_rows is not None:      # they must hold here too
                    self.removed_rows.check(t, q, qd, qdd)
                data = {"q": q, "qd": qd, "qdd": qdd,
                        "solver": np.array([it, phin, ratio])}
                if points:
                    data["points"] = sysm.point_kinematics(q, qd, qdd).ravel()
                if angular:
                    data["angular"] = sysm.angular_kinematics(q, qd, qdd).ravel()
                self._extra(t, q, qd, qdd, lu, J, data)
                record(t, data)
                recorded += 1
                prev_t = t
                bar.update(1)
        finally:
            if isinstance(record, BlockRecorder):
                record.flush()
            bar.close()
            self.stats["newton_iterations"] = iters_total
            self.stats["steps"] = recorded
            if self.removed_rows is not None:
                self.stats["redundant_check"] = self.removed_rows.worst
            if stepper is not None:
                self.stats["lu_factorizations"] += fast_lu
        self.final = (q, qd, qdd)

    # ----------------------------------------------------------------------
    def _run_joint(self, record, event, progress=False):
        """The kinematic analysis in joint coordinates (:mod:`.jc_kinematics`)."""
        from .jc_kinematics import JointKinematics
        sysm, s = self.system, self.settings
        times = self.times()
        t0 = float(times[0])
        state = sysm.initial_state(t0)
        rep = assemble(sysm, state.q, np.zeros(sysm.n), t0)
        q = rep.q
        event(t0, "assembly", rep.summary())
        jk = JointKinematics(sysm, q, t0)
        self.joint_kinematics = jk
        event(t0, "info", f"joint coordinates: {jk.chart.nv} joint velocities, "
              f"{len(jk.extra)} driver / loop equations, cut joints: "
              f"{', '.join(j.name for j in jk.tree.cut) or 'none'}")
        tol, maxit = s["tolerance"], int(s["max_iterations"])
        guard = None
        if jk.redundant:
            event(t0, "redundant", "redundant driver / loop equations removed (checked "
                  "at every time): " + ", ".join(jk.redundant))
            kept = np.setdiff1d(np.arange(sysm.m), jk.removed)
            guard = RemovedRows(sysm, kept, q, t0, tol)
        self.stats = {"steps": 0, "newton_iterations": 0, "lu_factorizations": 0,
                      "dof_mechanism": jk.chart.nv, "coordinates": "joint"}
        if jk.redundant:
            self.stats["redundant_equations"] = ", ".join(jk.redundant)
        points, angular = bool(sysm.point_names), bool(sysm.angular_labels)
        if joint_channel(sysm):             # the joints channel, in blocks of rows
            record = BlockRecorder(record, JointChannel(sysm))
        bar = _progress(len(times), progress)
        qd = qdd = np.zeros(sysm.n)
        try:
            for t in times:
                t = float(t)
                q, it, phin = jk.position(q, t, tol, maxit)
                qd, qdd, aux = jk.velocities(q, t)
                check_finite("acceleration", qdd, sysm.coordinate_names, t)
                if guard is not None:
                    guard.check(t, q, qd, qdd)
                self.stats["newton_iterations"] += it
                self.stats["lu_factorizations"] += it + 1
                data = {"q": q, "qd": qd, "qdd": qdd,
                        "solver": np.array([it, phin, float("nan")])}
                if points:
                    data["points"] = sysm.point_kinematics(q, qd, qdd).ravel()
                if angular:
                    data["angular"] = sysm.angular_kinematics(q, qd, qdd).ravel()
                self._extra_joint(t, q, qd, qdd, aux, data)
                record(t, data)
                self.stats["steps"] += 1
                bar.update(1)
        finally:
            if isinstance(record, BlockRecorder):
                record.flush()
            bar.close()
            if guard is not None:
                self.stats["redundant_check"] = guard.worst
        self.final = (q, qd, qdd)

    def _extra_joint(self, t, q, qd, qdd, aux, data):
        """Hook for subclasses (joint coordinates): channels from the converged state."""

    # -- switching constraint sets (mbcore.solve.switching) --------------------------
    def _state_at(self, q_guess, t, lu):
        """(q, qd, qdd, Newton iterations, |Phi|, pivot ratio, J) at t with the
        current rows, Newton from ``q_guess``."""
        s = self.settings
        q = np.array(q_guess, dtype=float)
        it, phin, _ = self._newton(q, t, lu, s["tolerance"], int(s["max_iterations"]))
        qd, qdd, ratio, J = self._rates(q, t, lu)
        return q, qd, qdd, it, phin, ratio, J

    def _rates(self, q, t, lu):
        """(qd, qdd, pivot ratio, J): velocities and accelerations with the
        Jacobian factored at the converged q (Nikravesh (1988), Eqs. 3.14, 3.16)."""
        sysm = self.system
        J = self._jac(q, t)
        ratio = self._factor(lu, J, q, t)
        qd = self._sel(sysm.nu(q, t)).copy()
        self._solve(lu, J, qd)
        qdd = self._sel(sysm.gamma(q, qd, t)).copy()
        self._solve(lu, J, qdd)
        return qd, qdd, ratio, J

    def _switch_between(self, prev, cur, t, lu, event):
        """The switches whose guards were crossed between the previous output
        ``prev`` = (t_a, q, qd, qdd) and the solution ``cur`` at t: each crossing
        located (Brent's method on the guard along the solutions of the current
        constraint set), the switch applied there, the positions re-assembled on the
        new set (Newton from the state at the switch), and the solution at t solved
        again on it."""
        from scipy.optimize import brentq
        sw, sysm = self.switches, self.system
        t_a, q_a, qd_a, qdd_a = prev
        q, qd, qdd = cur
        iters, out = 0, None

        def guess(x):
            h = x - t_a
            return q_a + h * qd_a + 0.5 * h * h * qdd_a

        for _ in range(100 * max(len(sw), 1)):
            late = [k for k in range(len(sw)) if sw.gap(k, q, t) < 0.0]
            if not late:
                break
            cache = {}

            def g(x, k):
                if x not in cache:
                    cache[x] = self._state_at(guess(x), x, lu)[0]
                return sw.gap(k, cache[x], x)
            roots = []
            for k in late:
                ga = sw.gap(k, q_a, t_a)
                x = t if ga <= 0.0 else brentq(g, t_a, t, args=(k,), xtol=1e-14 * (
                    1.0 + abs(t)), rtol=4 * np.finfo(float).eps)
                roots.append((x, k))
            x, k = min(roots)
            qx, qdx, qddx = self._state_at(guess(x), x, lu)[:3]
            d = sw.crossing(k, qx, x)
            if sw.fires(k, d):
                msg = sw.apply(k, qx, x)
                self.rows = sw.rows()
                if len(self.rows) != sysm.n:
                    raise ModelError(sw.spec.switches[k].path, f"after switch "
                                     f"'{sw.names[k]}' at t = {x:.9g}: {len(self.rows)} "
                                     f"engaged constraint equations for {sysm.n} "
                                     f"coordinates; a kinematic analysis needs as many "
                                     f"as coordinates")
                q0 = qx.copy()
                qx, qdx, qddx, it, _, _, _ = self._state_at(qx, x, lu)
                iters += it
                move = float(np.max(np.abs(qx - q0), initial=0.0))
                event(x, "switch", f"{msg}; positions re-assembled (moved by "
                                   f"{move:.3g})")
            t_a, q_a, qd_a, qdd_a = x, qx, qdx, qddx
            out = self._state_at(guess(t), t, lu)
            q, qd, qdd = out[:3]
            iters += out[3]
        else:
            raise AnalysisError("switching: the guards keep crossing within one output "
                                "interval (a switch that undoes itself?)", t)
        if out is None:
            return None
        return (*out[:3], out[3] + iters - out[3], *out[4:])

    def _factor(self, lu, J, q, t) -> float:
        self.stats["lu_factorizations"] = self.stats.get("lu_factorizations", 0) + 1
        if lu is None:      # large systems: sparse LU
            import scipy.sparse.linalg as spla
            try:
                self._splu = spla.splu(J.tocsc())
            except RuntimeError:
                self._singular(J.toarray(), t, 0.0)
            return float("nan")
        info = lu.factor(self.system.jacobian_data if self.rows is None
                         else np.ascontiguousarray(J).reshape(-1))
        if info != 0 or lu.pivot_ratio < self.settings["singular_tolerance"]:
            self._singular(J, t, lu.pivot_ratio)
        return lu.pivot_ratio

    def _solve(self, lu, J, b, transposed=False):
        if lu is None:
            b[:] = self._splu.solve(b, trans="T" if transposed else "N")
        else:
            lu.solve(b, transposed)

    def _extra(self, t, q, qd, qdd, lu, J, data):
        """Hook for subclasses: add channels computed from the converged state."""

    def _stepper(self):
        """The compiled kinematic step when it applies (compiled kernels only, dense
        Jacobian, no Python-only constraint types, no removed rows); else None."""
        sysm = self.system
        kernels = sysm.compiled_kernels(constraints=True)
        if (kernels is None or not sysm.dense or self.rows is not None or sysm.n == 0
                or os.environ.get("MBCORE_KINEMATIC_STEP", "compiled") == "python"):
            return None
        from mbcore._ext._planar import KinematicStepper
        return KinematicStepper(kernels.constraints, sysm.n, kernels.jacobian_data)

    # -- redundant constraints (Nikravesh (1988), Prob. 5.16) --------------
    def _sel(self, v):
        return v if self.rows is None else v[self.rows]

    def _jac(self, q, t):
        J = self.system.jacobian(q, t)
        if self.rows is None:
            return J
        return J[self.rows] if self.system.dense else J[self.rows].tocsc()

    def _select_rows(self, t0):
        """All rows, or the independent ones when the constraint equations are
        redundant (Nikravesh (1988), §3.1: rank-revealing QR of Phi_q at the assembled
        initial configuration).  After removing them the system must be square."""
        sysm = self.system
        n, m = sysm.n, sysm.m
        if self.switches is not None:
            rows = self.switches.rows()
            if len(rows) != n:
                raise ModelError("switching.released", f"kinematic analysis needs as many "
                                 f"engaged constraint equations as coordinates: n = {n} "
                                 f"coordinates, {len(rows)} engaged equations at the start "
                                 f"(released: {', '.join(self.switches.released())})")
            return rows
        if not sysm.all_holonomic:
            bad = [nm for nm, h in zip(sysm.constraint_names, sysm.holonomic) if not h]
            raise ModelError("settings.analysis", f"velocity-level (nonholonomic) constraints "
                             f"{', '.join(bad)} do not determine positions: use the dynamic "
                             f"analysis")
        q0 = sysm.initial_state(t0).q
        J = sysm.jacobian_dense(q0, t0)
        check_finite("the Jacobian at the initial estimates", J, sysm.constraint_names, t0)
        rank = numerical_rank(J) if m else 0
        if m < n:
            raise ModelError("drivers", f"kinematic analysis needs as many independent "
                             f"constraint equations as coordinates: n = {n} coordinates, "
                             f"m = {m} equations (rank {rank} at the initial estimates), so "
                             f"{n - rank} degree(s) of freedom are not driven")
        if rank == m == n:
            return None
        # rank deficient at the estimates, or more equations than coordinates:
        # assemble by least squares and decide at the assembled configuration
        rep = assemble(sysm, q0, np.zeros(n), t0, mass_weighted=False)
        J = sysm.jacobian_dense(rep.q, t0)
        rank, ind, dep, _ = rank_revealing(J)
        names = sysm.constraint_names
        if rank < n:
            rows = dependent_rows(J)
            raise SingularJacobianError(
                f"the constraint Jacobian has rank {rank} < {n} coordinates at the initial "
                f"configuration: a singular configuration, or the drivers do not control "
                f"every degree of freedom; equations involved: "
                f"{', '.join(names[r] for r in rows)}", t0, [names[r] for r in rows])
        if rank == m:
            return None
        self.redundant = [names[r] for r in dep]
        return np.asarray(ind, dtype=np.intp)

    def _check_redundant_consistent(self, q, t, event):
        """Removed rows must hold at the assembled configuration; otherwise the
        constraint set conflicts (AssemblyError naming the equations).  They are
        kept and checked at every later time (:mod:`mbcore.solve.redundancy`)."""
        sysm = self.system
        phi = sysm.phi(q, t)
        dep = np.setdiff1d(np.arange(sysm.m), self.rows)
        bad = [sysm.constraint_names[r] for r in dep
               if abs(phi[r]) > 1e-8 * (1 + float(np.max(np.abs(q))))]
        if bad:
            raise AssemblyError(f"conflicting constraints: equations {', '.join(bad)} are "
                                f"dependent on the others but cannot be satisfied together "
                                f"with them (|Phi| = "
                                f"{max(abs(phi[r]) for r in dep):.3g})", t, bad)
        event(t, "redundant", "redundant constraint equations removed (consistent at "
              "t = " + f"{t:.9g}; checked at every time): " + ", ".join(self.redundant))
        self.stats["redundant_equations"] = ", ".join(self.redundant)
        self.removed_rows = RemovedRows(sysm, self.rows, q, t, self.settings["tolerance"])

    def _names(self):
        names = self.system.constraint_names
        return names if self.rows is None else [names[r] for r in self.rows]

    def _singular(self, J, t, ratio):
        names = self._names()
        rows = dependent_rows(np.asarray(J.toarray() if hasattr(J, "toarray") else J))
        raise SingularJacobianError(
            f"the constraint Jacobian is singular (LU pivot ratio {ratio:.3g}): the "
            f"mechanism is at a singular configuration (dead point, change point or "
            f"redundant constraints); equations involved: "
            f"{', '.join(names[r] for r in rows)}", t, [names[r] for r in rows])

    def _newton(self, q, t, lu, tol, maxit, assembly=False):
        """Newton-Raphson in place on q (Nikravesh (1988), Alg. NR-I / KAP NUTON2).  At the first
        time (``assembly``) it starts from the initial estimates and may take twice
        the iterations; failures there are assembly errors, later ones lock-ups."""
        sysm = self.system
        scale = 1.0 + float(np.max(np.abs(q))) if q.size else 1.0
        maxit = 2 * maxit if assembly else maxit
        history = []
        for it in range(maxit + 1):
            phi = self._sel(sysm.phi(q, t))
            check_finite("Phi", phi, self._names(), t)
            phin = float(np.max(np.abs(phi))) if phi.size else 0.0
            history.append(phin)
            if phin <= tol * scale:
                return it, phin, float("nan")
            if it == maxit:
                break
            J = self._jac(q, t)
            try:
                self._factor(lu, J, q, t)
            except SingularJacobianError as exc:
                cls = AssemblyError if assembly else LockupError
                what = "initial assembly failed" if assembly else "lock-up"
                raise cls(f"{what}: {exc.reason}", t, exc.constraints) from None
            dq = -phi
            self._solve(lu, J, dq)
            if not np.all(np.isfinite(dq)) or np.max(np.abs(dq)) > 1e6 * scale:
                break
            q += dq
        names = self._names()
        if assembly:
            worst = np.argsort(-np.abs(phi))[:3]
            raise AssemblyError(
                f"initial assembly failed: Newton-Raphson from the initial estimates did "
                f"not converge in {maxit} iterations (|Phi| went {history[0]:.3g} -> "
                f"{history[-1]:.3g}); largest residuals: "
                f"{', '.join(f'{names[r]} ({phi[r]:.3g})' for r in worst)}. Improve the "
                f"bodies' initial position/angle estimates or check the joint data",
                t, [names[r] for r in worst])
        J = self._sel(sysm.jacobian_dense(q, t))
        rows = dependent_rows(J, rtol=1e-3)
        raise LockupError(
            f"lock-up: Newton-Raphson did not converge in {maxit} iterations "
            f"(|Phi| went {history[0]:.3g} -> {history[-1]:.3g}); no assembly exists near "
            f"the predicted configuration (dead point or limit position?); the last "
            f"assembled configuration is at the previous output time. Equations "
            f"involved: {', '.join(names[r] for r in rows)}", t, [names[r] for r in rows])

    def _assembly_report(self, q_est, q):
        """How far assembly moved each body from its estimates (derived here: the initial-condition correction)."""
        from mbcore.solve.assembly import body_moves
        moves = body_moves(self.system, q, q_est)
        move = np.array([mv[0] for mv in moves.values()])
        rot = np.array([mv[1] for mv in moves.values()])
        k = int(np.argmax(move)) if len(move) else 0
        self.stats["assembly_max_move"] = float(move.max()) if len(move) else 0.0
        self.stats["assembly_max_rotation"] = float(np.abs(rot).max()) if len(rot) else 0.0
        if not len(move):
            return "assembly: no bodies"
        return (f"assembly: bodies moved from their estimates by up to {move[k]:.4g} "
                f"({self.system.body_names[k]}) and rotated by up to "
                f"{self.stats['assembly_max_rotation']:.4g} rad")


class _StepperLU:
    """The compiled stepper's factors behind the LU interface used by _solve."""

    def __init__(self, stepper):
        self.stepper = stepper

    def solve(self, b, transposed=False):
        self.stepper.solve(b, transposed)


class KinetostaticAnalysis(KinematicAnalysis):
    """Inverse dynamics / kinetostatics of a kinematically driven system (Nikravesh (1988), §9.7
    Eqs. 9.62-9.64; DADS-2D kinematics report, §3.4-3.5): the kinematic analysis,
    then at every output time the multipliers from the transposed Jacobian factors,
    ``Phi_q^T lam = M qdd - Q`` (the book's sign, docs/conventions.md), the reactions of
    every joint and the driver efforts (the drivers' reactions)."""

    name = "kinetostatic"
    description = ("kinematic analysis plus the multipliers, joint reactions and driver "
                   "efforts needed to produce the motion (inverse dynamics)")

    def channels(self):
        sysm = self.system
        ch = super().channels()
        ch.insert(3, Channel("lam", list(sysm.constraint_names),
                             "Lagrange multipliers (reaction = +Phi_q^T lam)"))
        ch.insert(4, Channel("reactions", list(sysm.reaction_labels),
                             "generalised reaction of each element on each of its bodies: "
                             + ("fx, fy, fz and the moment nx, ny, nz about the body origin "
                                "(global axes)" if sysm.spatial else
                                "fx, fy (global) and the moment n about the body origin")))
        extra = element_channels(sysm, points=False)   # points: already in ch
        extra.append(Channel("energy", ["kinetic", "potential", "total"], "energies"))
        return ch[:5] + extra + ch[5:]

    def _extra(self, t, q, qd, qdd, lu, J, data):
        sysm = self.system
        rhs = sysm.inertia_minus_forces(q, qd, qdd, t)
        self._solve(lu, J, rhs, transposed=True)
        lam = rhs if self.rows is None else np.zeros(sysm.m)
        if self.rows is not None:           # removed (redundant) rows carry no load
            lam[self.rows] = rhs
        self._fill(t, q, qd, lam, data)

    def _extra_joint(self, t, q, qd, qdd, aux, data):
        lam = self.joint_kinematics.multipliers(q, qd, t, aux)
        self._fill(t, q, qd, lam, data)

    def _fill(self, t, q, qd, lam, data):
        sysm = self.system
        check_finite("multiplier", lam, sysm.constraint_names, t)
        data["lam"] = lam
        data["reactions"] = sysm.reactions(q, t, lam)
        if sysm.local_reaction_labels:
            data["reactions_local"] = sysm.reactions_local(q, t, lam)
        if sysm.force_labels:
            data["forces"] = sysm.force_outputs(q, qd, t)
        T, V = sysm.kinetic_energy(qd, q), sysm.potential_energy(q, t)
        data["energy"] = np.array([T, V, T + V])
