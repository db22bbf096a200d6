"""Consistent initial conditions ("assembly"; Nikravesh (1988), §10.3.2, Probs. 9.8(c)-(d),
10.13).

Positions: Gauss-Newton with minimum-norm steps on ``Phi(q, t) = 0`` (optionally
weighted by the mass matrix, and holding chosen coordinates at their estimates),
i.e. the nearest consistent configuration in the chosen metric (the coordinate
projection of TAM 674 (2003), lecture of 7 April).
Velocities: the minimum-norm correction onto ``Phi_q qd = nu`` (held velocities
keep their values).  Rank deficiency (redundant or conflicting constraints) is
handled by the least-squares solution and reported with the equations named.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import AssemblyError
from .linalg import rank_and_dependent_rows
from ..system.system import check_finite


@dataclass
class AssemblyReport:
    """What assembly did: iterations, residuals, how far each body moved."""

    q: np.ndarray
    qd: np.ndarray
    iterations: int
    phi_norm: float
    velocity_residual: float
    rank: int
    dof: int
    redundant: list[str] = field(default_factory=list)
    moves: dict[str, tuple[float, float]] = field(default_factory=dict)  # body: (dist, rot)

    def summary(self) -> str:
        if self.moves:
            body = max(self.moves, key=lambda b: self.moves[b][0])
            rot = max(abs(v[1]) for v in self.moves.values())
            moved = (f"bodies moved by up to {self.moves[body][0]:.4g} ({body}), rotated by "
                     f"up to {rot:.4g} rad")
        else:
            moved = "no bodies"
        red = f"; redundant equations: {', '.join(self.redundant)}" if self.redundant else ""
        return (f"assembly in {self.iterations} iterations: |Phi| = {self.phi_norm:.3g}, "
                f"|Phi_q qd - nu| = {self.velocity_residual:.3g}; {moved}; "
                f"{self.dof} degree(s) of freedom{red}")


def assemble(system, q: np.ndarray, qd: np.ndarray, t: float = 0.0, *,
             hold: tuple[str, ...] | list[str] = (), mass_weighted: bool = True,
             tol: float = 1e-12, max_iterations: int = 50,
             rows: np.ndarray | None = None) -> AssemblyReport:
    """Nearest consistent (q, qd) to the estimates (see module docstring).

    ``hold``: coordinate names (``crank.phi``) kept at their estimates (position and
    velocity) — the book's "driving" conditions for assembly (Nikravesh (1988), §10.3.2).
    ``rows``: only these constraint rows (the engaged ones of a switching
    constraint set, :mod:`mbcore.solve.switching`); default all.
    Raises :class:`AssemblyError` naming the largest residual equations when no
    consistent configuration is found near the estimates.
    """
    n = system.n
    q = np.array(q, dtype=float)
    qd = np.array(qd, dtype=float)
    q_est = q.copy()
    held = np.array([system.coordinate_index(c) for c in hold], dtype=int)
    md = system.mass_weights
    if mass_weighted:
        # massless (artificial) coordinates get the weight of the lightest body
        light = float(md[md > 0].min()) if np.any(md > 0) else 1.0
        w = 1.0 / np.sqrt(np.where(md > 0, md, light))
    else:
        w = np.ones(n)
    free = np.ones(n, bool)
    free[held] = False
    scale = 1.0 + float(np.max(np.abs(q))) if n else 1.0
    use = np.ones(system.m, bool)
    if rows is not None:
        use[:] = False
        use[np.asarray(rows, dtype=np.intp)] = True
    names = [nm for nm, u in zip(system.constraint_names, use) if u]
    hol = np.asarray(system.holonomic, bool) & use   # velocity rows: no part in positions
    hnames = [nm for nm, h in zip(system.constraint_names, hol) if h]
    if not system.dense and system.all_holonomic and system.m and rows is None:
        rep = _assemble_sparse(system, q, qd, t, held, w, tol * scale, max_iterations)
        if rep is not None:
            rep.moves = _moves(system, rep.q, q_est)
            return rep
    it = 0
    phi = system.phi(q, t)[hol].copy()
    for it in range(1, max_iterations + 1):
        check_finite("Phi", phi, hnames, t)     # e.g. a point at 1e308: names the joint
        phin = float(np.max(np.abs(phi))) if phi.size else 0.0
        if phin <= tol * scale:
            it -= 1
            break
        J = system.jacobian_dense(q, t)[hol]
        check_finite("the Jacobian", J, hnames, t)
        dz = _least_squares(J[:, free], w[free], -phi, hnames, t)
        q[free] += w[free] * dz
        phi = system.phi(q, t)[hol].copy()
    phin = float(np.max(np.abs(phi))) if phi.size else 0.0
    if phin > tol * scale * 10:
        worst = np.argsort(-np.abs(phi))[:3]
        raise AssemblyError(
            f"initial assembly failed: no consistent configuration near the estimates "
            f"(|Phi| = {phin:.3g} after {max_iterations} Gauss-Newton iterations); largest "
            f"residuals: {', '.join(f'{hnames[r]} ({phi[r]:.3g})' for r in worst)}. The "
            f"constraints may conflict, or the estimates are too far off", t,
            [hnames[r] for r in worst])
    J = system.jacobian_dense(q, t)[use]
    rank, dep = rank_and_dependent_rows(J)
    nu = system.nu(q, t)[use]
    r = nu - J @ qd
    dv = _least_squares(J[:, free], w[free], r, names, t)
    qd[free] += w[free] * dv
    vres = float(np.max(np.abs(J @ qd - nu))) if J.shape[0] else 0.0
    return AssemblyReport(q, qd, it, phin, vres, int(rank), n - int(rank),
                          [names[r] for r in dep] if rank < J.shape[0] else [],
                          _moves(system, q, q_est))


#: entries beyond this overflow inside the SVD of a least-squares solve (LAPACK then
#: prints "DLASCL ... illegal value" and fails)
HUGE = 1e150


def _least_squares(J: np.ndarray, w: np.ndarray, b: np.ndarray, names,
                   t: float) -> np.ndarray:
    """The minimum-norm solution of (J diag(w)) x = b, or an AssemblyError naming the
    equations (rows) whose values are too large to solve with (a point at 1e308)
    or when the SVD fails."""
    with np.errstate(over="ignore"):        # the size of a row may overflow: refused
        size = np.maximum(np.max(np.abs(J), axis=1, initial=0.0)
                          * float(np.max(w, initial=1.0)), np.abs(b))
    if size.size and not float(size.max()) <= HUGE:
        rows = [int(r) for r in np.argsort(-size)[:3] if size[r] > HUGE]
        raise AssemblyError(f"initial assembly: the constraint equations "
                            f"{', '.join(names[r] for r in rows)} have values of "
                            f"{float(size.max()):.3g}, too large to solve (a point or "
                            f"length of that size?)", t, [names[r] for r in rows])
    try:
        return np.linalg.lstsq(J * w, b, rcond=None)[0]
    except np.linalg.LinAlgError as exc:
        raise AssemblyError(f"initial assembly: the least-squares step failed ({exc}); "
                            f"the constraint Jacobian is degenerate", t, []) from None


def body_moves(system, q, q_est) -> dict:
    """Per body: (distance its origin moved, rotation in rad) between two states
    (planar: the change of phi; spatial: the angle of the relative rotation)."""
    moves = {}
    kinds = system.body_kinds
    sp = [k for k in range(len(system.body_names)) if not kinds[k].pad
          and kinds[k].name == "spatial"]
    if sp:                                           # spatial bodies in one batch
        o = np.asarray(system.body_offsets, dtype=np.intp)[sp][:, None]
        d = q[o + np.arange(3)] - q_est[o + np.arange(3)]
        p, p0 = q[o + np.arange(3, 7)], q_est[o + np.arange(3, 7)]
        c = np.abs(np.sum(p * p0, axis=1)) / np.maximum(
            np.linalg.norm(p, axis=1) * np.linalg.norm(p0, axis=1), 1e-300)
        dist = np.linalg.norm(d, axis=1)
        ang = 2.0 * np.arccos(np.minimum(1.0, c))
        spm = dict(zip(sp, zip(dist.tolist(), ang.tolist())))
    for k, b in enumerate(system.body_names):
        o = int(system.body_offsets[k])
        if kinds[k].pad:                             # a particle: no rotation
            nq = kinds[k].nq
            moves[b] = (float(np.linalg.norm(q[o:o + nq] - q_est[o:o + nq])), 0.0)
        elif kinds[k].name == "spatial":
            moves[b] = spm[k]
        else:
            d = q[o:o + 3] - q_est[o:o + 3]
            moves[b] = (float(np.hypot(d[0], d[1])), float(d[2]))
    return moves


_moves = body_moves


def _assemble_sparse(system, q, qd, t, held, w, tol, max_iterations):
    """Large systems (CSR Jacobian, holonomic): the same minimum-norm Gauss-Newton
    steps in the metric ``W^-2`` (held coordinates: infinite weight), computed by the
    sparse Schur solver: ``dq = W^2 J^T (J W^2 J^T)^-1 (-Phi)`` is its solution for
    ``Q = 0, gamma = -Phi`` with ``M^-1 = W^2`` (O(N) per iteration for chains and
    trees).  Returns None when the Jacobian is rank deficient (redundant or
    conflicting constraints): the caller's dense rank-revealing path names them."""
    from .sparse_schur import for_system
    n, m = system.n, system.m
    solver = for_system(system)
    minv = w * w
    minv[held] = 0.0
    zero = np.zeros(n)
    dq = np.zeros(n)
    lam = np.zeros(m)
    q = q.copy()
    qd = qd.copy()
    phi = system.phi(q, t).copy()
    it = 0
    for it in range(1, max_iterations + 1):
        if float(np.max(np.abs(phi))) <= tol:
            it -= 1
            break
        system.evaluate_jacobian_data(q, t)
        if solver.solve(system.jacobian_data, minv, zero, -phi, dq, lam) or \
                not np.all(np.isfinite(dq)):
            return None
        q += dq
        phi = system.phi(q, t).copy()
    phin = float(np.max(np.abs(phi)))
    if phin > 10 * tol:
        return None                      # the dense path reports the failure
    J = system.jacobian(q, t)
    r = system.nu(q, t) - J.dot(qd)
    if solver.solve(system.jacobian_data, minv, zero, r, dq, lam):
        return None
    qd += dq
    vres = float(np.max(np.abs(J.dot(qd) - system.nu(q, t))))
    return AssemblyReport(q, qd, it, phin, vres, m, n - m, [], {})
