"""Linearisation about a steady motion, for holonomic and nonholonomic systems
(docs/analyses.md "Linearisation about a steady motion").

A steady motion is a reference motion ``X0(t)`` along which, seen from the moving
reference, nothing changes: bodies translate with constant velocities and turn
with constant angular velocities about fixed global axes, and the forces and
constraints do not depend on the coordinates that advance (a bicycle running
straight: the frames translate, the wheels spin; Meijaard et al. (2007), §3).  The
perturbation of a state ``X`` from the reference is taken in global increments,
which are then the same at every instant of the reference:

* positions ``delta``: per body ``delta r = r - r0(t)`` (and a planar angle's
  difference) and, per spatial body, the global rotation vector ``delta theta``
  with ``A = exp(delta theta~) A0(t)`` (Euler parameters ``p = q(delta theta) (x) p0``);
* velocities ``v``: ``rdot`` and, per spatial body, the global angular velocity
  ``omega = 2 G(p) pdot`` (Nikravesh (1988), Eq. 6.38), whose rate is
  ``omegadot = 2 G(p) pddot``.

To first order ``delta r' = v_r - v_r0`` and ``delta theta' = (omega - omega0) +
omega0 x delta theta``.  The position rows (the holonomic constraints, without the
Euler-parameter norms, which the increments satisfy by construction) leave ``kp``
independent position increments ``xi`` (a partition of ``delta``: pivoted QR of
``Phi_q E`` as for the equilibrium, or named); every row's velocity equation
``B(q) qdot = nu`` (the holonomic rows' ``Phi_q qdot = nu`` and the nonholonomic
rows) leaves ``ku`` independent speeds ``u`` among the velocity coordinates
(Neimark & Fufaev (1972), Ch. III: a nonholonomic system has fewer independent
speeds than coordinates).  The state ``x = [xi; u]`` rebuilds the state: ``delta`` from ``xi`` by
Newton on the dependent increments, ``v = v0 + P_u u + R_u w`` with ``w`` from the
velocity equations; the accelerations come from the DI equations of motion
(:class:`mbcore.solve.dynamics.AccelerationSolver`).  The state matrix is the
derivative of ``x' = [P^T delta'; P_u^T vdot]`` at x = 0 by extrapolated central
differences (O(h^4)), as ``linearization: numeric`` of the equilibrium analysis.

Cyclic (ignorable) coordinates — the position along the road, the heading, the
wheels' rotation angles — advance along the reference; declared ``cyclic``, they are
made independent and removed from the state after checking that no other rate
depends on them (their columns of A vanish outside their own rows).  The
reference must be steady in the global axes: its accelerations ``vdot`` vanish
(checked).  With zero velocities this is the equilibrium linearisation in other
coordinates: the eigenvalues agree (tests/test_linearize_motion.py).
"""
from __future__ import annotations

import difflib
import math
from typing import Sequence

import numpy as np

from mbcore.errors import AnalysisError, ModelError
from mbcore.analysis.linear import LinearModel
from mbcore.elements.rotations import G as Gmat

from ..formulations.partitioning import column_scale, pivoted_partition
from .linearize import FD_STEP, directional, input_forces

__all__ = ["MotionChart", "linearize_motion", "CYCLIC_TOLERANCE"]

#: a declared cyclic coordinate's eigenvalue must be below this fraction of the largest
CYCLIC_TOLERANCE = 1e-4


def _quat_exp(th: np.ndarray) -> np.ndarray:
    """Euler parameters of the rotation vector ``th`` (3,)."""
    a = float(np.linalg.norm(th))
    if a == 0.0:
        return np.array([1.0, 0.0, 0.0, 0.0])
    return np.concatenate([[np.cos(a / 2)], np.sin(a / 2) * th / a])


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.concatenate([[a[0] * b[0] - a[1:] @ b[1:]],
                           a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:])])


class MotionChart:
    """Perturbation coordinates about the reference state (q0, qd0) at t (module
    docstring): position increments ``xi`` and independent speeds ``u``.

    ``independent`` / ``speeds``: names of the independent position increments and
    speeds (default: pivoted QR); ``cyclic``: position increments to remove."""

    def __init__(self, system, q0: np.ndarray, qd0: np.ndarray, t: float,
                 independent: Sequence[str] = (), speeds: Sequence[str] = (),
                 cyclic: Sequence[str] = ()):
        s = self.system = system
        self.t = float(t)
        self.q0 = np.array(q0, dtype=float)
        n = s.n
        names = list(s.coordinate_names)
        spatial = any(getattr(kd, "name", "") == "spatial" for kd in s.body_kinds)
        pidx = (np.asarray(s.p_index, dtype=int).reshape(-1, 4) if spatial
                else np.zeros((0, 4), int))
        in_p = np.zeros(n, bool)
        in_p[pidx.ravel()] = True
        # velocity coordinates: plain coordinates, and per rigid spatial body three
        # global rotation increments / angular velocity components in place of p
        vnames, wnames, plain, rot = [], [], [], []
        first = {int(b[0]): b for b in pidx}
        for i in range(n):
            if i in first:
                body = names[i].rsplit(".", 1)[0]
                rot.append((len(vnames), first[i]))
                for ax in "xyz":
                    vnames.append(f"{body}.r{ax}")
                    wnames.append(f"{body}.w{ax}")
            elif not in_p[i]:
                plain.append((len(vnames), i))
                vnames.append(names[i])
                wnames.append(f"{names[i]}d")
        self.nv = len(vnames)
        self.position_names, self.speed_names = vnames, wnames
        self._plain = np.array(plain, dtype=int).reshape(-1, 2)
        self._rot = rot
        self.v0 = self.velocity_of(self.q0, np.asarray(qd0, dtype=float))
        # rows: the positions' (holonomic, not the norms) and every row's velocities
        norm = np.array([c.endswith(".norm") for c in s.constraint_names], bool) \
            if s.m else np.zeros(0, bool)
        hol = np.asarray(s.holonomic, bool) if s.m else np.zeros(0, bool)
        self.hrows = np.flatnonzero(hol & ~norm)
        self.vrows = np.flatnonzero(~norm)
        length, _ = column_scale(s)
        self.vscale = np.array([length if (c.rsplit(".", 1)[-1] in ("x", "y", "z")) else 1.0
                                for c in vnames])
        cscale = np.where(self.vscale == 1.0, length, 1.0)   # d/d(angle) ~ length
        E0 = self.E(self.q0)
        Jh = self._jac(self.q0)[self.hrows] @ E0
        Jv = self._jac(self.q0)[self.vrows] @ E0
        self._check_rank(Jh, self.hrows, "position")
        self._check_rank(Jv, self.vrows, "velocity")
        self.kp = self.nv - len(self.hrows)
        self.ku = self.nv - len(self.vrows)
        if self.kp == 0:
            raise ModelError("bodies", "the model has no degree of freedom: nothing to "
                                       "linearise")
        cyc = self._lookup(cyclic, vnames, "settings.cyclic", "position increment")
        v = self._choose(Jh, cscale, independent, vnames, "settings.independent", self.kp,
                         forced=cyc)
        self.P, self.R = np.eye(self.nv)[:, v], np.eye(self.nv)[:, np.setdiff1d(
            np.arange(self.nv), v)]
        wv = self._choose(Jv, cscale, speeds, wnames, "settings.independent_speeds",
                          self.ku)
        self.Pu = np.eye(self.nv)[:, wv]
        self.Ru = np.eye(self.nv)[:, np.setdiff1d(np.arange(self.nv), wv)]
        self.cyclic = [list(v).index(c) for c in cyc]
        self.xi_names = [vnames[j] for j in v]
        self.u_names = [wnames[j] for j in wv]
        self.Jh0, self.E0 = Jh, E0
        self.Tdelta = (self.P - self.R @ np.linalg.solve(Jh @ self.R, Jh @ self.P)
                       if len(self.hrows) else self.P)

    # -- maps between q-space and the velocity coordinates ----------------------------
    def E(self, q: np.ndarray) -> np.ndarray:
        """``qdot = E(q) v`` (n, nv): identity on plain coordinates, ``pdot = 1/2
        G(p)^T omega`` on Euler parameters."""
        out = np.zeros((self.system.n, self.nv))
        out[self._plain[:, 1], self._plain[:, 0]] = 1.0
        for j, pi in self._rot:
            out[pi, j:j + 3] = 0.5 * Gmat(q[pi]).T
        return out

    def velocity_of(self, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        """``v`` of ``qdot`` (and the same map takes pddot to the rates of v)."""
        v = np.empty(self.nv)
        v[self._plain[:, 0]] = qd[self._plain[:, 1]]
        for j, pi in self._rot:
            v[j:j + 3] = 2.0 * Gmat(q[pi]) @ qd[pi]
        return v

    def retract(self, delta: np.ndarray) -> np.ndarray:
        """The configuration ``q0 (+) delta`` (global increments)."""
        q = self.q0.copy()
        q[self._plain[:, 1]] += delta[self._plain[:, 0]]
        for j, pi in self._rot:
            q[pi] = _quat_mul(_quat_exp(delta[j:j + 3]), self.q0[pi])
        return q

    def _jac(self, q: np.ndarray) -> np.ndarray:
        s = self.system
        return s.jacobian_dense(q, self.t) if s.m else np.zeros((0, s.n))

    # -- choosing and checking ----------------------------------------------------------
    def _check_rank(self, J: np.ndarray, rows: np.ndarray, what: str) -> None:
        if not len(rows):
            return
        sv = np.linalg.svd(J, compute_uv=False)
        if sv[-1] <= 1e-10 * sv[0]:
            from mbcore.solve.linalg import dependent_rows
            dep = [self.system.constraint_names[rows[r]] for r in dependent_rows(J, 1e-10)]
            raise AnalysisError(f"the {what} equations are singular at the reference "
                                f"state (redundant constraints or a bifurcation); "
                                f"equations involved: {', '.join(dep)}", self.t)

    @staticmethod
    def _lookup(given: Sequence[str], known: list[str], key: str, what: str) -> list[int]:
        out = []
        for i, name in enumerate(given or ()):
            if name not in known:
                close = difflib.get_close_matches(name, known, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ModelError(f"{key}[{i}]", f"unknown {what} '{name}'{hint}; known: "
                                                f"{', '.join(known[:12])}"
                                                + (" ..." if len(known) > 12 else ""))
            out.append(known.index(name))
        if len(set(out)) != len(out):
            raise ModelError(key, "a name is given twice")
        return out

    def _choose(self, J, cscale, given, known, key, k, forced=()) -> np.ndarray:
        """k independent columns of J: the named ones, or ``forced`` plus the rest by
        pivoted QR of the column-scaled J."""
        forced = list(forced)
        if given:
            v = self._lookup(given, known, key, "coordinate")
            v = sorted(set(v) | set(forced))
            if len(v) != k:
                raise ModelError(key, f"expected {k} independent names (the degrees of "
                                      f"freedom at this level), got {len(v)}: "
                                      f"{', '.join(known[j] for j in v)}")
        elif J.shape[0] == 0:
            v = list(range(len(known)))
        else:
            others = np.setdiff1d(np.arange(len(known)), forced)
            if len(others) < J.shape[0]:
                raise ModelError(key, "too many cyclic coordinates for the constraints")
            _, vo, _ = pivoted_partition(J[:, others], cscale[others])
            v = sorted(set(forced) | set(others[vo].tolist()))
        v = np.array(v, dtype=int)
        u = np.setdiff1d(np.arange(len(known)), v)
        if J.shape[0]:
            sv = np.linalg.svd(J[:, u] / cscale[u], compute_uv=False)
            if not (sv.size and sv[-1] > 1e-10 * sv[0]):
                raise ModelError(key, f"{', '.join(known[j] for j in v)} cannot be "
                                      f"independent at the reference state (the "
                                      f"remaining columns of the constraint Jacobian "
                                      f"are singular)")
        return v

    # -- the state -----------------------------------------------------------------------
    def state_of(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(q, qdot, delta)`` of the perturbation state ``x = [xi; u]``."""
        s, t = self.system, self.t
        xi, u = x[:self.kp], x[self.kp:]
        delta = self.P @ xi
        q = self.retract(delta)
        if len(self.hrows):
            tol = 1e-15 * (1.0 + float(np.max(np.abs(q))))
            err = np.inf
            for _ in range(60):
                phi = s.phi(q, t)[self.hrows]
                err = float(np.max(np.abs(phi)))
                if err <= tol:
                    break
                Jr = self._jac(q)[self.hrows] @ self.E(q) @ self.R
                delta = delta - self.R @ np.linalg.solve(Jr, phi)
                q = self.retract(delta)
            if err > 1e3 * tol:
                raise AnalysisError(f"the dependent coordinates cannot be solved near the "
                                    f"reference (|Phi| = {err:.3g})", t)
        Eq = self.E(q)
        v = self.v0 + self.Pu @ u
        if len(self.vrows):
            Bv = self._jac(q)[self.vrows] @ Eq
            nu = s.nu(q, t)[self.vrows]
            v = v + self.Ru @ np.linalg.solve(Bv @ self.Ru, nu - Bv @ v)
        return q, Eq @ v, delta

    def rates(self, delta: np.ndarray, v: np.ndarray) -> np.ndarray:
        """``delta'`` to first order: ``v - v0``, plus ``omega0 x delta theta`` on
        the rotation increments."""
        d = v - self.v0
        for j, _ in self._rot:
            d[j:j + 3] += np.cross(self.v0[j:j + 3], delta[j:j + 3])
        return d


def linearize_motion(system, q0: np.ndarray, qd0: np.ndarray, t: float, chart: MotionChart,
                     inputs: Sequence[str] = (), outputs: Sequence[str] = (),
                     info: dict | None = None
                     ) -> tuple[LinearModel, np.ndarray, np.ndarray]:
    """The :class:`LinearModel` about the steady motion through (q0, qd0) at t, and
    the accelerations and multipliers of the reference state."""
    from mbcore.solve.dynamics import AccelerationSolver
    s, c = system, chart
    solver = AccelerationSolver(s)
    b = input_forces(s, inputs, c.q0, t) if inputs else np.zeros((s.n, 0))
    kp, ku = c.kp, c.ku

    def accel(q, qd, w=None):
        extra = None if w is None or not len(w) else b @ w
        qdd, lam = solver.solve(q, qd, t, force_extra=extra)
        return qdd.copy(), lam.copy()

    q_ref, qd_ref, _ = c.state_of(np.zeros(kp + ku))
    qdd0, lam0 = accel(q_ref, qd_ref)
    vdot0 = c.velocity_of(q_ref, qdd0)
    # acceleration scale: gravity, and v0^2 / L of the reference's speeds
    g = float(np.linalg.norm(np.asarray(getattr(s, "gravity", np.zeros(1)), dtype=float)))
    length, _ = column_scale(s)
    ascale = max(g, float(np.max(np.abs(c.v0), initial=0.0)) ** 2 / length, 1.0)
    worst = int(np.argmax(np.abs(vdot0))) if vdot0.size else 0
    if vdot0.size and abs(vdot0[worst]) > 1e-8 * ascale:
        raise AnalysisError(f"the reference state is not a steady motion in the global "
                            f"axes: the rate of {c.speed_names[worst]} is "
                            f"{vdot0[worst]:.6g} (should vanish); start from a steady "
                            f"motion (constant velocities, wheels spinning about fixed "
                            f"axes) or linearise about an equilibrium", t)

    def f(x, w=None):
        q, qd, delta = c.state_of(x)
        v = c.velocity_of(q, qd)
        qdd, _ = accel(q, qd, w)
        return np.concatenate([c.P.T @ c.rates(delta, v), c.Pu.T @ c.velocity_of(q, qdd)])

    hx = FD_STEP / np.max(np.abs(c.Tdelta) / c.vscale[:, None], axis=0) if kp else np.zeros(0)
    vs = float(np.max(np.abs(c.v0))) if c.v0.size else 0.0
    hu = FD_STEP * max(vs, 1.0) / np.ones(ku) if ku else np.zeros(0)
    steps = np.concatenate([hx, hu])
    A = directional(f, np.zeros(kp + ku), np.eye(kp + ku), steps)
    nin = b.shape[1]
    B = directional(lambda w: f(np.zeros(kp + ku), w), np.zeros(nin), np.eye(nin),
                    np.ones(nin)) if nin else np.zeros((kp + ku, 0))
    ncyc = _check_cyclic(A, c)
    xi_names = list(c.xi_names)
    states = xi_names + list(c.u_names)
    T = c.E0 @ c.Tdelta
    keep = np.arange(kp + ku)
    names = list(outputs) or xi_names
    C, D = _outputs(s, c, names, states, keep, f, steps, A, B, accel)
    lm = LinearModel(A=A, B=B, C=C, D=D, states=states, inputs=list(inputs),
                     outputs=names, independent=xi_names,
                     coordinates=list(s.coordinate_names), q=np.array(q_ref),
                     lam=np.array(lam0), T=T, M=np.zeros((0, 0)), K=np.zeros((0, 0)),
                     Cd=np.zeros((0, 0)), t=float(t), positions=kp, rigid=ncyc,
                     info={**(info or {}), "speeds": ",".join(c.u_names),
                           "cyclic": ",".join(c.xi_names[j] for j in c.cyclic)})
    return lm, qdd0, lam0


def _check_cyclic(A: np.ndarray, c: MotionChart) -> int:
    """The declared cyclic coordinates move along the zero-eigenvalue invariant
    subspace of A (an ordered real Schur basis): each has a component in its
    position rows, and they are no more than its position rank.  (A cyclic
    coordinate's change, with the changes of the other independent increments that
    the symmetry drags along — a yaw of the rear frame turns the fork too — is
    again a steady motion.)  Returns their number."""
    import scipy.linalg as sla
    if not c.cyclic:
        return 0
    scale = float(np.max(np.abs(np.linalg.eigvals(A))))
    tol = CYCLIC_TOLERANCE * scale
    _, Z, sdim = sla.schur(A, output="real", sort=lambda re, im: math.hypot(re, im) <= tol)
    Zp = Z[:c.kp, :sdim]
    sv = np.linalg.svd(Zp, compute_uv=False) if sdim else np.zeros(0)
    rank = int(np.sum(sv > 1e-6 * max(float(sv.max(initial=0.0)), 1e-300))) if sdim else 0
    names = [c.xi_names[j] for j in c.cyclic]
    for j, name in zip(c.cyclic, names):
        e = np.zeros(c.kp)
        e[j] = 1.0
        res = float(np.linalg.norm(e - Zp @ np.linalg.lstsq(Zp, e, rcond=None)[0])) \
            if sdim else 1.0
        if res > 1.0 - 1e-6:
            raise ModelError("settings.cyclic", f"'{name}' is not cyclic: it has no part "
                                                f"in the zero-eigenvalue motions of A "
                                                f"(changing it does not lead to another "
                                                f"steady motion)")
    if len(names) > rank:
        raise ModelError("settings.cyclic", f"{', '.join(names)} are not all cyclic: the "
                                            f"zero-eigenvalue motions of A move {rank} "
                                            f"independent position direction(s), "
                                            f"{len(names)} declared")
    return len(c.cyclic)


def _outputs(s, c: MotionChart, names, states, keep, f, steps, A, B, accel):
    """C, D of the outputs: states by name; coordinates, velocities (``d``),
    accelerations (``dd``), named points and force outputs by differences of their
    nonlinear values along the state and input directions."""
    nx, nin = len(states), B.shape[1]
    C = np.zeros((len(names), nx))
    D = np.zeros((len(names), nin))
    coords = {n_: i for i, n_ in enumerate(s.coordinate_names)}
    points = {n_: i for i, n_ in enumerate(s.point_labels)}
    forces = {n_: i for i, n_ in enumerate(s.force_labels)}
    full = c.kp + c.ku
    for r, name in enumerate(names):
        if name in states:
            C[r, states.index(name)] = 1.0
            continue
        if name in coords:
            i, part = coords[name], "q"
        elif name.endswith("dd") and name[:-2] in coords:
            i, part = coords[name[:-2]], "qdd"
        elif name.endswith("d") and name[:-1] in coords:
            i, part = coords[name[:-1]], "qd"
        elif name in points:
            i, part = points[name], "point"
        elif name in forces:
            i, part = forces[name], "force"
        else:
            known = states + list(coords) + list(points) + list(forces)
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ModelError(f"settings.outputs[{r}]", f"unknown output '{name}'{hint}")

        def h(x, w=None, i=i, part=part):
            q, qd, _ = c.state_of(x)
            if part == "q":
                return np.array([q[i]])
            if part == "qd":
                return np.array([qd[i]])
            qdd, _ = accel(q, qd, w)
            if part == "qdd":
                return np.array([qdd[i]])
            if part == "point":
                return np.array([s.point_kinematics(q, qd, qdd).ravel()[i]])
            return np.array([s.force_outputs(q, qd, c.t)[i]])
        row = directional(h, np.zeros(full), np.eye(full), steps)[0]
        C[r] = row[keep]
        if nin:
            D[r] = directional(lambda w: h(np.zeros(full), w), np.zeros(nin), np.eye(nin),
                               np.ones(nin))[0]
    return C, D
