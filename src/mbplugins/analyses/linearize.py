"""Linearisation of a System about a static equilibrium in independent coordinates
(docs/analyses.md "Linearisation and modes").

Chart.  Near the equilibrium q* the configurations that satisfy ``Phi(q) = 0`` are
``q = q* + P xi + R mu(xi)``: ``P`` (n, k) spans the independent directions,
``R`` (n, m) the dependent ones, ``P^T P = I``, ``P^T R = 0``, and ``mu`` is solved
from ``Phi = 0`` by Newton-Raphson, so ``xi = P^T (q - q*)``.  ``partition``
(default): ``P``, ``R`` are columns of the identity, the independent coordinates
``v`` chosen by QR with column pivoting of the column-scaled Jacobian as the ``cp``
formulation does (:func:`..formulations.partitioning.pivoted_partition`; Nikravesh
(1988), §13.3.2, §14.1.1); ``null_space``: ``P`` an orthonormal basis of the null space
of Phi_q(q*), ``R`` of its row space.  Velocities: ``qd = P xid + R nu_`` with
``Phi_q qd = nu``.  At q*, ``T = dq/dxi = P - R (Phi_q R)^-1 Phi_q P``.

Linear equations.  With the reaction ``+Phi_q^T lam`` (docs/conventions.md), the
virtual work ``delta q = T delta xi`` gives ``T^T (M qdd - Q) = 0``; about the
equilibrium (qd = 0, ``Q + Phi_q^T lam* = 0``), to first order,

    M_r xi'' + C_r xi' + K_r xi = T^T b w,
    M_r = T^T M T,   C_r = -T^T (dQ/dqd) T,   K_r = -T^T (dQ/dq + d(Phi_q^T lam*)/dq) T

(the derivative of T multiplies the vanishing equilibrium residual; the
velocity-quadratic terms, gamma and the spatial ``b``, vanish to first order).
``dQ/dq`` and ``dQ/dqd`` are :meth:`mbcore.System.force_jacobians` (analytic or
compiled); ``M T`` is ``inertia_minus_forces(q*, 0, T_j) + Q`` column by column (exact:
linear in qdd; spatial Formulation I mass included); the constraint Hessian term
``d(Phi_q^T lam*)/dq T`` is a central difference of ``Phi_q^T lam*`` along each
column of T with Richardson extrapolation (error O(h^4), h = 1e-3 of the
coordinate scale: ~1e-12 relative).  ``linearization: numeric`` instead
differentiates the nonlinear reduced equations ``x' = f(x)``, ``f = [xid; P^T qdd]``
with qdd from the DI equations of motion (:class:`mbcore.solve.dynamics.AccelerationSolver`)
at the state rebuilt by the chart, by the same extrapolated central differences.

Inputs w are generalised forces b (n per input): unit forces and torques on a body
(``<body>.fx``...) or the scale of a force element's time functions
(``<element>.scale``: ``b = dQ/ds``).  Outputs are linear functions of the state and
the input: coordinates, their velocities (``d``) and accelerations (``dd``), named
points and force-element outputs.
"""
from __future__ import annotations

import difflib
from typing import Callable, Sequence

import numpy as np
import scipy.linalg as sla

from mbcore.errors import AnalysisError, ModelError, SingularJacobianError
from mbcore.elements.inputs import parse_input
from mbcore.solve.linalg import dependent_rows, rank_revealing
from mbcore.analysis.linear import LinearModel

from ..formulations.partitioning import column_scale, pivoted_partition

__all__ = ["Chart", "linearize", "input_forces", "FD_STEP"]

#: step of the extrapolated central differences, as a fraction of the coordinate scale
FD_STEP = 1e-3


def richardson(fun: Callable[[float], np.ndarray], h: float) -> np.ndarray:
    """``(4 D(h/2) - D(h)) / 3`` with ``D(h) = (fun(h) - fun(-h)) / 2h``: the
    derivative of ``fun`` at 0 with error O(h^4)."""
    d1 = (np.array(fun(h)) - np.array(fun(-h))) / (2 * h)
    d2 = (np.array(fun(h / 2)) - np.array(fun(-h / 2))) / h
    return (4 * d2 - d1) / 3


class Chart:
    """Independent coordinates xi about q* (module docstring).

    ``kind``: ``"partition"`` or ``"null_space"``; ``independent``: names of the
    independent coordinates (partition only; default: pivoted QR)."""

    def __init__(self, system, q: np.ndarray, t: float, kind: str = "partition",
                 independent: Sequence[str] = ()):
        s = self.system = system
        self.q0 = np.array(q, dtype=float)
        self.t = t
        n, m = s.n, s.m
        J = s.jacobian_dense(self.q0, t) if m else np.zeros((0, n))
        if m:
            rank = rank_revealing(J, 1e-10)[0]
            if rank < m:
                rows = dependent_rows(J, 1e-10)
                names = [s.constraint_names[r] for r in rows]
                raise SingularJacobianError(
                    f"singular configuration at the equilibrium: the constraint Jacobian "
                    f"has rank {rank} < {m} (redundant constraints or a bifurcation); "
                    f"equations involved: {', '.join(names)}", t, names)
        self.k = n - m
        if self.k == 0:
            raise ModelError("bodies", "the model has no degree of freedom (the "
                                       "constraints fix every coordinate): nothing to "
                                       "linearise")
        length, cscale = column_scale(s)
        names = list(s.coordinate_names)
        #: coordinate scale of the difference steps: length for translations, 1 else
        self.scale = np.array([length if c.rsplit(".", 1)[-1] in ("x", "y", "z") else 1.0
                               for c in names])
        self.kind = kind
        if kind == "partition":
            v = self._independent(J, cscale, independent)
            u = np.setdiff1d(np.arange(n), v)
            I = np.eye(n)
            self.P, self.R = I[:, v], I[:, u]
            self.names = [names[j] for j in v]
        elif kind == "null_space":
            self.P = sla.null_space(J) if m else np.eye(n)
            self.R = sla.orth(J.T) if m else np.zeros((n, 0))
            self.names = [f"xi{j + 1}" for j in range(self.k)]
        else:
            raise ModelError("settings.coordinates", f"expected 'partition' or "
                                                     f"'null_space', got {kind!r}")
        self.T = self.P - self.R @ np.linalg.solve(J @ self.R, J @ self.P) if m else self.P
        self.states = self.names + [f"{c}d" for c in self.names]

    def _independent(self, J, cscale, independent) -> np.ndarray:
        s = self.system
        if not independent:
            if not s.m:
                return np.arange(s.n)
            return pivoted_partition(J, cscale)[1]
        v = []
        for i, name in enumerate(independent):
            if name not in s.coordinate_names:
                close = difflib.get_close_matches(name, s.coordinate_names, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise ModelError(f"settings.independent[{i}]", f"unknown coordinate "
                                                              f"'{name}'{hint}")
            v.append(s.coordinate_names.index(name))
        if len(set(v)) != self.k:
            raise ModelError("settings.independent", f"expected {self.k} distinct "
                                                     f"coordinates (the degrees of "
                                                     f"freedom), got {len(set(v))}")
        v = np.sort(np.array(v))
        u = np.setdiff1d(np.arange(s.n), v)
        sv = np.linalg.svd(J[:, u] / cscale[u], compute_uv=False)
        if not sv[-1] > 1e-10 * sv[0]:
            raise ModelError("settings.independent", f"{', '.join(independent)} cannot be "
                                                     f"the independent coordinates at the "
                                                     f"equilibrium (Phi_u is singular)")
        return v

    def steps(self) -> np.ndarray:
        """Difference step along each column of T: ``FD_STEP`` of the coordinate
        scale on the coordinate that moves most."""
        return FD_STEP / np.max(np.abs(self.T) / self.scale[:, None], axis=0)

    def q_of(self, xi: np.ndarray) -> np.ndarray:
        """The configuration of independent coordinates xi (Newton on mu)."""
        s, t = self.system, self.t
        q = self.q0 + self.P @ xi
        if not s.m:
            return q
        tol = 1e-15 * (1.0 + float(np.max(np.abs(q))))
        best = np.inf
        for _ in range(50):
            phi = s.phi(q, t)
            err = float(np.max(np.abs(phi)))
            if err <= tol or (err >= best and err < 1e3 * tol):
                return q
            best = min(best, err)
            J = s.jacobian_dense(q, t)
            q = q - self.R @ np.linalg.solve(J @ self.R, phi)
        raise AnalysisError(f"the dependent coordinates cannot be solved at xi = {xi} "
                            f"(|Phi| = {err:.3g})", t)

    def qd_of(self, q: np.ndarray, xid: np.ndarray) -> np.ndarray:
        """Velocities of independent velocities xid at q (``Phi_q qd = nu``)."""
        s, t = self.system, self.t
        qd = self.P @ xid
        if not s.m:
            return qd
        J = s.jacobian_dense(q, t)
        return qd + self.R @ np.linalg.solve(J @ self.R, s.nu(q, t) - J @ qd)


def directional(fun: Callable[[np.ndarray], np.ndarray], x0: np.ndarray, dirs: np.ndarray,
                steps: np.ndarray) -> np.ndarray:
    """``d fun / d e`` at e = 0 of ``fun(x0 + e dirs[:, j])`` for every column j
    (extrapolated central differences): (len(fun), n_dirs)."""
    cols = [richardson(lambda e, d=dirs[:, j]: np.array(fun(x0 + e * d), dtype=float),
                       float(steps[j])) for j in range(dirs.shape[1])]
    return np.column_stack(cols) if cols else np.zeros((0, 0))


def _dense(a) -> np.ndarray:
    return a.toarray() if hasattr(a, "toarray") else np.asarray(a, dtype=float)


# ----------------------------------------------------------------------- inputs
def input_forces(system, names: Sequence[str], q: np.ndarray, t: float) -> np.ndarray:
    """Generalised force b (n, len(names)) of unit inputs: ``<body>.fx|fy|torque``
    (planar; particles fx, fy), ``<body>.fx|fy|fz|nx|ny|nz`` (spatial: force and
    moment about the global axes at the body frame, ``b_p = 2 G(p)^T n``), and
    ``<element>.scale`` (the factor on a force element's time functions,
    ``b = dQ/ds`` at s = 1).  Names: :func:`mbcore.elements.inputs.parse_input`."""
    s = system
    b = np.zeros((s.n, len(names)))
    for c, name in enumerate(names):
        path = f"settings.inputs[{c}]"
        spec = parse_input(s, name, path)
        if spec.kind == "force":
            b[spec.index, c] = 1.0
        elif spec.kind == "moment":
            from mbcore.elements.rotations import G
            o = spec.index
            b[o + 3:o + 7, c] = 2.0 * G(q[o + 3:o + 7]).T[:, spec.axis]
        else:
            fg, e = spec.group, spec.element
            b[:, c] = _scale_derivative(s, fg.fidx[e].ravel(), q, t)
            if not np.any(b[:, c]):
                raise ModelError(path, f"force element '{fg.names[e]}' ({fg.ftype.name}): "
                                       f"its time functions are zero at t = {t:g}, so "
                                       f"scaling them does nothing; use a body force input "
                                       f"instead")
    return b


def _scale_derivative(s, rows: np.ndarray, q: np.ndarray, t: float) -> np.ndarray:
    """dQ/ds of the forces with the function values (jets) of ``rows`` multiplied
    by s, at s = 1 (the cached function table at t is scaled and restored)."""
    fv = s.functions_at(t)
    saved = fv[rows].copy()
    z = np.zeros(s.n)

    def Q(e):
        fv[rows] = saved * (1.0 + e)
        try:
            return s.forces(q, z, t).copy()
        finally:
            fv[rows] = saved
    return richardson(Q, 0.5)


# ---------------------------------------------------------------------- outputs
def _output_sources(system, chart: Chart, names: Sequence[str]) -> list[tuple[str, int]]:
    """(source, index) of each output name: ``q``/``qd``/``qdd`` (a coordinate, its
    velocity, its acceleration), ``x`` (a state), ``point`` (a column of
    point_kinematics), ``force`` (a force-element output)."""
    s = system
    coords = {c: i for i, c in enumerate(s.coordinate_names)}
    states = {c: i for i, c in enumerate(chart.states)}
    points = {c: i for i, c in enumerate(s.point_labels)}
    forces = {c: i for i, c in enumerate(s.force_labels)}
    out = []
    for r, name in enumerate(names):
        if name in coords:
            out.append(("q", coords[name]))
        elif name.endswith("dd") and name[:-2] in coords:
            out.append(("qdd", coords[name[:-2]]))
        elif name.endswith("d") and name[:-1] in coords:
            out.append(("qd", coords[name[:-1]]))
        elif name in states:
            out.append(("x", states[name]))
        elif name in points:
            out.append(("point", points[name]))
        elif name in forces:
            out.append(("force", forces[name]))
        else:
            known = (list(coords) + [f"{c}d" for c in coords] + list(states) + list(points)
                     + list(forces))
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ModelError(f"settings.outputs[{r}]", f"unknown output '{name}'{hint}: "
                             f"expected a coordinate (e.g. '{s.coordinate_names[0]}'), its "
                             f"velocity ('{s.coordinate_names[0]}d') or acceleration "
                             f"('...dd'), a state, a named point's x/y/xd/... or a force "
                             f"element output (e.g. 'spring.force')")
    return out


def output_matrices(system, chart: Chart, names: Sequence[str], q: np.ndarray, t: float,
                    A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C, D of the outputs ``names`` (``y = C x + D w``, first order about q*)."""
    s, T, k = system, chart.T, chart.k
    src = _output_sources(s, chart, names)
    C = np.zeros((len(names), 2 * k))
    D = np.zeros((len(names), B.shape[1]))
    z = np.zeros(s.n)
    h = chart.steps()
    G: dict[str, tuple] = {}
    kinds = {kind for kind, _ in src}
    if "point" in kinds:
        def pk(qq, vv, aa):
            return s.point_kinematics(qq, vv, aa).ravel().copy()
        G["point"] = (directional(lambda x: pk(x, z, z), q, T, h),
                      directional(lambda x: pk(q, x, z), z, T, h),
                      directional(lambda x: pk(q, z, x), z, T, h))
    if "force" in kinds:
        G["force"] = (directional(lambda x: s.force_outputs(x, z, t).copy(), q, T, h),
                      directional(lambda x: s.force_outputs(q, x, t).copy(), z, T, h), None)
    for r, (kind, i) in enumerate(src):
        if kind == "q":
            C[r, :k] = T[i]
        elif kind == "qd":
            C[r, k:] = T[i]
        elif kind == "qdd":
            C[r] = T[i] @ A[k:]
            D[r] = T[i] @ B[k:]
        elif kind == "x":
            C[r, i] = 1.0
        else:
            Gq, Gqd, Gqdd = G[kind]
            C[r, :k] = Gq[i]
            C[r, k:] = Gqd[i]
            if Gqdd is not None:
                C[r] += Gqdd[i] @ A[k:]
                D[r] = Gqdd[i] @ B[k:]
    return C, D


# ------------------------------------------------------------------- the model
def reduced_matrices(system, chart: Chart, q: np.ndarray, lam: np.ndarray, t: float):
    """M_r, K_r, C_r of the module docstring (analytic force Jacobians)."""
    s, T = system, chart.T
    z = np.zeros(s.n)
    Q0 = s.forces(q, z, t).copy()
    MT = np.column_stack([s.inertia_minus_forces(q, z, T[:, j], t) + Q0
                          for j in range(chart.k)])
    Mr = T.T @ MT
    Kq, Cq = (_dense(a) for a in s.force_jacobians(q, z, t))
    KT = Kq @ T
    if s.m:
        KT += directional(lambda x: _dense(s.jacobian(x, t)).T @ lam, q, T, chart.steps())
    return 0.5 * (Mr + Mr.T), -(T.T @ KT), -(T.T @ Cq @ T)


class ReducedDynamics:
    """``x' = f(x)`` of the independent coordinates: ``f = [xid; P^T qdd]`` with qdd
    from the DI equations of motion at the configuration the chart rebuilds."""

    def __init__(self, system, chart: Chart):
        from mbcore.solve.dynamics import AccelerationSolver
        self.system, self.chart = system, chart
        self.solver = AccelerationSolver(system)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        c = self.chart
        k = c.k
        q = c.q_of(x[:k])
        qd = c.qd_of(q, x[k:])
        qdd = self.solver.solve(q, qd, c.t)[0]
        return np.concatenate([x[k:], c.P.T @ qdd])


def numeric_state_matrix(system, chart: Chart) -> np.ndarray:
    """A by extrapolated central differences of :class:`ReducedDynamics`."""
    f = ReducedDynamics(system, chart)
    k = chart.k
    h = FD_STEP / np.max(np.abs(chart.P) / chart.scale[:, None], axis=0)
    steps = np.concatenate([h, h])
    return directional(f, np.zeros(2 * k), np.eye(2 * k), steps)


def linearize(system, q: np.ndarray, lam: np.ndarray, t: float, chart: Chart,
              inputs: Sequence[str] = (), outputs: Sequence[str] = (),
              method: str = "analytic", info: dict | None = None) -> LinearModel:
    """The :class:`mbcore.analysis.linear.LinearModel` about the equilibrium (q, lam) at t."""
    s, T, k = system, chart.T, chart.k
    Mr, Kr, Cr = reduced_matrices(s, chart, q, lam, t)
    try:
        Minv = np.linalg.inv(Mr)
    except np.linalg.LinAlgError:
        raise AnalysisError("the reduced mass matrix T^T M T is singular (massless "
                            "degrees of freedom)", t) from None
    if method == "analytic":
        A = np.block([[np.zeros((k, k)), np.eye(k)], [-Minv @ Kr, -Minv @ Cr]])
    elif method == "numeric":
        A = numeric_state_matrix(s, chart)
        Kr, Cr = -Mr @ A[k:, :k], -Mr @ A[k:, k:]
    else:
        raise ModelError("settings.linearization", f"expected 'analytic' or 'numeric', "
                                                   f"got {method!r}")
    b = input_forces(s, inputs, q, t)
    B = np.vstack([np.zeros((k, len(inputs))), Minv @ (T.T @ b)])
    names = list(outputs) or list(chart.names)
    C, D = output_matrices(s, chart, names, q, t, A, B)
    return LinearModel(A=A, B=B, C=C, D=D, states=list(chart.states), inputs=list(inputs),
                       outputs=names, independent=list(chart.names),
                       coordinates=list(s.coordinate_names), q=np.array(q),
                       lam=np.array(lam), T=T, M=Mr, K=Kr, Cd=Cr, t=float(t),
                       info=dict(info or {}))
