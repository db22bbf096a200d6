"""Stiff differential-equation (DAE) method, ADAMS-type (Nikravesh (1988),
§13.3.4): the ``stiff`` formulation.

The constraints are kept as degenerate (algebraic) equations and the whole
index-3 system is integrated by a stiff BDF method with a Newton corrector
(Nikravesh (1988), Eqs. 13.33-13.35), in mbcore's sign (reaction = +Phi_q^T lam)::

    q' = s,    M s' = Q(q, s, t) + Phi_q^T lam,    0 = Phi(q, t)

State ``y = [q, s, lam]`` with the constant mass ``diag(1, M, 0)``, consistent
starting values (``lam0`` from the augmented system at t0, ``s0 = qd0``), run
by the variable-step, variable-order ``bdf`` integrator through its
``newton_system`` hook: every Newton iteration solves the reduced, rescaled
(n + m) system derived here (:class:`ReducedNewton`; eliminate
``ds = (dq - r_q)/c``, unknown ``c^2 dlam``), whose condition number stays O(1)
as ``h -> 0`` while that of the full (2n + m) matrix of Nikravesh (1988), Eq. 13.31 grows like
``h^-3`` (:func:`full_newton_matrix` / :func:`reduced_newton_matrix` expose
both; tests compare their iterates and condition numbers); Phi_q is refreshed
at every step's predictor.  The error test weights the velocities and the
multipliers by h^2 (bdf's ``h_power`` option, after RADAU5's h / h^2 weights of
index-2 / index-3 variables, Hairer-Wanner VII.8; docs/analyses.md gives the
measurements behind h^2 for the velocities).  Positions satisfy ``Phi = 0`` to
the Newton tolerance at every step; the velocity constraint holds only to the
integration error, as the book describes.

:func:`bdf_stiff_solve` is the fixed-step BDF-k driver of §4.6 built on
:func:`reduced_newton_step` (a reference for the order of convergence).

The blocks of df/dy (:meth:`Stiff.jacobian`) are analytic in the velocity rows:
planar ``K + d(Phi_q^T lam)/dq`` and ``C``; spatial bodies (the accelerations of the
regular Euler-parameter form inside f) ``M^-1 (K + d(P^T lam)/dq - Dq)``,
``M^-1 (C - Dv)`` and ``M^-1 P^T`` with P the true gradient of Phi
(:func:`_spatial_blocks`, :mod:`.velocity_jacobian`); ``d(P^T lam)/dq`` by
differences of the constraint rows alone.  :func:`jacobian_fd` keeps the former
differences of f (tests, benchmark).

Models of compiled elements (spatial: dense Jacobian) evaluate ``f`` and the work
rate in one C call (``mbplugins._ext._dae.CompiledStiff``; NumPy reference
:meth:`Stiff.rhs`) and, planar, take the compiled twin of :class:`ReducedNewton`
(``_stiffnewton.ReducedNewtonC``, the same arithmetic bit for bit); bdf then runs on the compiled loop (``_steploop.run_bdf``,
which calls the hook back; Nikravesh (1988), §12.4, §13.3.4).  Generalized-α's
``jacobian_update`` is then ``CompiledStiff.newton_blocks`` (one C call per step, bit
for bit :meth:`Stiff.update_newton_blocks`, which ``Stiff.newton_blocks = "python"``
selects; Arnold & Brüls (2007)).
"""
from __future__ import annotations

import numpy as np

from mbcore.solve.nonholonomic import refuse_velocity_rows
from mbcore.errors import AnalysisError, ModelError
from mbcore.solve.formulation import Formulation
from mbplugins.integrators.bdf import NewtonSystem

from .dae_common import (compiled_constraint_fd, compiled_dae_rhs, compiled_f, consistent_start,
                         constraint_fd, dense, radial_coefficients, rhs_columns, true_rows,
                         why_not_compiled)
from .velocity_jacobian import velocity_blocks
from .rows import RowSubset, full_multipliers

#: BDF_k in the form  y_{n+1} = sum_j a_j y_{n+1-j} + h b y'_{n+1}  (Nikravesh (1988), Table 12.3)
BDF_COEFFS = {1: ((1.0,), 1.0),
              2: ((4 / 3, -1 / 3), 2 / 3),
              3: ((18 / 11, -9 / 11, 2 / 11), 6 / 11),
              4: ((48 / 25, -36 / 25, 16 / 25, -3 / 25), 12 / 25)}


# -- the Newton systems of Nikravesh (1988), §13.3.4 ---------------------------------------------
def _parts(system, q, s, lam, t, eps=1e-7):
    """M, g_q + (Phi_q^T lam)_q, g_s, Phi_q at (q, s, lam).

    Planar bodies: ``K = dQ/dq``, ``C = dQ/ds`` from
    :meth:`mbcore.System.force_jacobians` (analytic per built-in force type,
    Nikravesh (1988), §9.2), plus forward differences of ``Phi_q^T lam``
    alone (:func:`constraint_fd`).  Spatial bodies (M^-1 applied inside f, see
    :func:`_accel`): unit M and the derivatives of the accelerations
    (:func:`_spatial_blocks`); Phi_q is the projected Jacobian either way (the
    callers take :func:`_phi_rows`)."""
    n = system.n
    if system.mass_diag is not None:
        K, C = system.force_jacobians(q, s, t)
        (H,), _ = constraint_fd(system, q, t, (lam,), eps=eps)
        return (np.diag(system.mass_diag), dense(K) + H, dense(C),
                system.jacobian_dense(q, t).copy())
    Kq, Ks, _ = _spatial_blocks(system, q, s, lam, t, eps=eps)
    return np.eye(n), Kq, Ks, system.jacobian_dense(q, t).copy()


def _spatial_blocks(system, q, s, lam, t, P=None, rows=None, accel=None, eps=1e-7,
                    form=None):
    """Spatial bodies: ``(da/dq, da/ds, da/dlam)`` of the velocity rows ``a =
    _accel(q, s, lam)`` (:func:`.velocity_jacobian.velocity_blocks`), with ``K, C``
    from :meth:`mbcore.System.force_jacobians` and ``d(P^T lam)/dq`` of the true
    gradient P by forward differences of ``rows(q, t)`` alone (default
    :func:`_phi_rows`: one Phi_q and the radial coefficients per column).  P at q may
    be given, and ``accel()``, the accelerations at the state (called last: the
    right-hand side of the caller, which leaves its buffers there); ``form``: the
    formulation whose compiled right-hand side differences the rows in C
    (:func:`.dae_common.compiled_constraint_fd`)."""
    rows = rows if rows is not None else (lambda qq, tt: _phi_rows(system, qq, tt))
    P = rows(q, t) if P is None else P
    if form is not None:                 # in one C call
        (H,), _ = compiled_constraint_fd(form, q, t, (lam,), radial=True, rows=rows)
    else:
        (H,), _ = constraint_fd(system, q, t, (lam,), eps=eps, rows=rows)
    K, C = system.force_jacobians(q, s, t)
    a = _accel(system, q, s, t, lam) if accel is None else accel()
    return velocity_blocks(_mass_solver(system).spatial, q, s, a, dense(K) + H, dense(C),
                           np.asarray(P).T, None if form is None else form.compiled)


def _force_differences(force, q, s, eps):
    """Forward differences ``(d force/dq, d force/ds)``, column by column, with steps
    ``eps (1 + |x_j|)``."""
    n = len(q)
    f0 = force(q, s).copy()
    Kq = np.zeros((n, n))
    Ks = np.zeros((n, n))
    for j in range(n):
        d = eps * (1.0 + abs(q[j]))
        qp = q.copy()
        qp[j] += d
        Kq[:, j] = (force(qp, s) - f0) / d
        d = eps * (1.0 + abs(s[j]))
        sp_ = s.copy()
        sp_[j] += d
        Ks[:, j] = (force(q, sp_) - f0) / d
    return Kq, Ks


def _parts_fd(system, q, s, lam, t, eps=1e-7):
    """The blocks of :func:`_parts` by forward differences of the whole
    ``Q + Phi_q^T lam`` (planar) or of the accelerations :func:`_accel` (spatial):
    the former method, kept for tests and the benchmark."""
    if system.mass_diag is None:
        def force(qq, ss):
            return _accel(system, qq, ss, t, lam)
        Kq, Ks = _force_differences(force, q, s, eps)
        return np.eye(system.n), Kq, Ks, system.jacobian_dense(q, t).copy()
    M = np.diag(system.mass_diag)

    def force(qq, ss):
        return system.forces(qq, ss, t) + system.jacobian_dense(qq, t).T @ lam

    Kq, Ks = _force_differences(force, q, s, eps)
    return M, Kq, Ks, system.jacobian_dense(q, t).copy()


#: (system, its mass solver) of the last System seen: a one-entry cache, so that
#: the System itself stays unchanged and at most one model is kept alive by it
_LAST_MASS_SOLVER: tuple = (None, None)


def _mass_solver(system):
    """The AccelerationSolver whose ``mass_solve`` this module uses for ``system``."""
    global _LAST_MASS_SOLVER
    system = getattr(system, "base_system", system)    # (M does not depend on rows)
    owner, solver = _LAST_MASS_SOLVER
    if owner is not system:
        from mbcore.solve.dynamics import AccelerationSolver
        solver = AccelerationSolver(system)
        _LAST_MASS_SOLVER = (system, solver)
    return solver


def _accel(system, q, s, t, lam):
    """Spatial bodies: ``(M + alpha p p^T)^-1 (Q - b* - alpha p pd^T pd + Phi_q^T lam)``
    (Formulation I made regular, mbcore.system.mass); the velocity rows of the DAE are then
    ``s' = _accel`` with a unit mass."""
    solver = _mass_solver(system)
    F = system.forces(q, s, t) + _phi_rows(system, q, t).T @ lam
    return solver.mass_solve(q, s, F)


#: the true gradient of Phi (moved to :mod:`.dae_common`, shared with the GGL form's
#: Newton rows); the names this module has always used
_radial = radial_coefficients
_phi_rows = true_rows


def _norm_rows(system):
    return np.arange(system.m - len(system.p_index), system.m)


def _lam_projected(system, q, t, lam, sign=1.0, radial=None):
    """Multipliers of the true-gradient DAE -> those of the projected Jacobian (the
    other formulations'): ``lam_n,b += a_b . lam / 2`` (``sign=-1``: the inverse;
    ``radial``: the coefficients ``a`` at (q, t) when the caller has them)."""
    lam = np.array(lam, dtype=float)
    if system.mass_diag is None:
        a = radial if radial is not None else _radial(system, q, t,
                                                      system.jacobian_dense(q, t))
        lam[_norm_rows(system)] += sign * 0.5 * (a @ lam)
    return lam


def _lam_columns(system, q, s, t, Jq):
    """d(velocity rows of f)/d lam: Phi_q^T, or (M + alpha p p^T)^-1 Phi_q^T for
    spatial bodies (the velocity rows are then accelerations, see _accel)."""
    if system.mass_diag is not None:
        return Jq.T
    solver = _mass_solver(system)
    z0 = solver.mass_solve(q, s, np.zeros(system.n))
    return np.column_stack([solver.mass_solve(q, s, c) - z0 for c in Jq]) if len(Jq) \
        else np.zeros((system.n, 0))


def residuals(system, q, s, lam, t, sdot, qdot):
    """r1 = M s' - Q - Phi_q^T lam, r2 = q' - s, r3 = Phi (13.33-13.35)."""
    if system.mass_diag is None:
        r1 = sdot - _accel(system, q, s, t, lam)
    else:
        J = system.jacobian_dense(q, t)
        r1 = system.mass_diag * sdot - system.forces(q, s, t) - J.T @ lam
    return r1, qdot - s, system.phi(q, t).copy()


def full_newton_matrix(system, q, s, lam, t, hb):
    """The (2n + m) iteration matrix of 13.31 in the unknowns (ds, dq, dlam)."""
    n, m = system.n, system.m
    M, Kq, Ks, Jq = _parts(system, q, s, lam, t)
    Jq = _phi_rows(system, q, t, Jq)
    PT = _lam_columns(system, q, s, t, Jq)
    A = np.zeros((2 * n + m, 2 * n + m))
    A[:n, :n] = M / hb - Ks
    A[:n, n:2 * n] = -Kq
    A[:n, 2 * n:] = -PT
    A[n:2 * n, :n] = -np.eye(n)
    A[n:2 * n, n:2 * n] = np.eye(n) / hb
    A[2 * n:, n:2 * n] = Jq
    return A


def _reduced(M, Kq, Ks, PqT, Pq, hb):
    """``[[M - hb Ks - hb^2 Kq, -PqT], [Pq, 0]]``: the reduced matrix derived here from Nikravesh (1988), §13.3.4
    from the blocks of df/dy (Kq = d(Q + Phi_q^T lam)/dq, Ks = dQ/ds, PqT =
    d(Q + Phi_q^T lam)/dlam = Phi_q^T, Pq = Phi_q)."""
    n, m = Kq.shape[0], Pq.shape[0]
    A = np.zeros((n + m, n + m))
    A[:n, :n] = M - hb * Ks - hb * hb * Kq
    A[:n, n:] = -PqT
    A[n:, :n] = Pq
    return A


def reduced_newton_matrix(system, q, s, lam, t, hb):
    """The reduced, rescaled (n + m) matrix (derived here from Nikravesh (1988), §13.3.4) in (dq, (hb)^2 dlam)."""
    M, Kq, Ks, Jq = _parts(system, q, s, lam, t)
    P = _phi_rows(system, q, t, Jq)
    return _reduced(M, Kq, Ks, _lam_columns(system, q, s, t, P), P, hb), M, Ks


def reduced_newton_step(system, q, s, lam, t, hb, r1, r2, r3):
    """One Newton correction (ds, dq, dlam) through the reduced system: the same
    iterate as the full 13.31 system (Nikravesh (1988), Eq. 13.31; checked numerically), with O(1) condition."""
    n = system.n
    A, M, Ks = reduced_newton_matrix(system, q, s, lam, t, hb)
    rhs = np.concatenate([-hb ** 2 * r1 - hb * (M - hb * Ks) @ r2, -r3])
    x = np.linalg.solve(A, rhs)
    dq = x[:n]
    dlam = x[n:] / hb ** 2
    ds = dq / hb + r2
    return ds, dq, dlam


def bdf_stiff_solve(system, q0, qd0, t0, t1, h, order=2, tol=1e-10, max_iter=10):
    """Fixed-step BDF-``order`` integration of 13.33-13.35 with the reduced Newton
    system (Nikravesh (1988), §13.3.4): returns (t, q, s, lam) arrays and the largest Newton
    iteration count.  Starting values from the augmented system at t0; the first
    steps use the lower orders (BDF1, BDF2, ...)."""
    from mbcore.solve.dynamics import AccelerationSolver
    if order not in BDF_COEFFS:
        raise AnalysisError(f"BDF order {order} not available (1-4)", t0)
    _, lam0 = AccelerationSolver(system).solve(q0, qd0, t0)
    lam0 = _lam_projected(system, q0, t0, lam0, sign=-1.0)
    nsteps = int(round((t1 - t0) / h))
    T = t0 + h * np.arange(nsteps + 1)
    Qs, Ss, Ls = [q0.copy()], [qd0.copy()], [lam0.copy()]
    most = 0
    for i in range(1, nsteps + 1):
        k = min(order, i)
        a, b = BDF_COEFFS[k]
        hb = h * b
        qh = sum(a[j] * Qs[-1 - j] for j in range(k))   # y = qh + hb y'
        sh = sum(a[j] * Ss[-1 - j] for j in range(k))
        q = 2 * Qs[-1] - Qs[-2] if i > 1 else Qs[-1] + h * Ss[-1]
        s = 2 * Ss[-1] - Ss[-2] if i > 1 else Ss[-1].copy()
        lam = Ls[-1].copy()
        t = T[i]
        for it in range(max_iter):
            r1, r2, r3 = residuals(system, q, s, lam, t, (s - sh) / hb, (q - qh) / hb)
            ds, dq, dl = reduced_newton_step(system, q, s, lam, t, hb, r1, r2, r3)
            q, s, lam = q + dq, s + ds, lam + dl
            if max(np.max(np.abs(dq)), hb * np.max(np.abs(ds))) < tol * (1 + np.max(np.abs(q))):
                break
        else:
            raise AnalysisError(f"stiff DAE method: Newton did not converge in {max_iter} "
                                f"iterations (h = {h:g})", t)
        most = max(most, it + 1)
        Qs.append(q)
        Ss.append(s)
        Ls.append(lam)
    return T, np.array(Qs), np.array(Ss), np.array(Ls), most


# -- the formulation plugin ------------------------------------------------------
class ReducedNewton(NewtonSystem):
    """bdf's Newton equations ``(diag(mass) - cJ) d = r`` for the state
    ``[q (n), s (n), lam (m), extra...]`` solved through the reduced, rescaled
    (n + m) system (exact elimination, the same iterate).

    From the q rows (``f_q = s``: ``dq - c ds = r_q``) ``ds = (dq - r_q)/c``;
    the s rows times c and the lam rows (``-c Phi_q dq = r_lam``) divided by -c
    give, in the unknowns ``(dq, c^2 dlam)``::

        [M - c Ks - c^2 Kq   -Phi_q^T] [dq       ]   [c r_s + (M - c Ks) r_q]
        [Phi_q                0      ] [c^2 dlam ] = [-r_lam / c            ]

    ``extra`` trailing components (the dynamic analysis appends the work of the
    non-conservative forces) must not enter the first rows of f; they follow by
    forward substitution from their rows of J.  The blocks are read from J, except
    Phi_q when ``phi_q(q, t)`` is given: it is then evaluated exactly at every step's
    predictor (:meth:`update`) and the matrix re-factored — Phi_q enters the
    reduced matrix unscaled (condition ~40), so a Jacobian a few steps old stalls
    the iteration (four-bar, rtol 1e-10: 362 Newton failures in 1625 steps), while
    the finite-difference blocks Ks, Kq are damped by c and c^2 and can stay old.
    """

    def __init__(self, n: int, m: int, phi_q=None, lam_columns=None):
        self.n, self.m = n, m
        self._J = None
        self._phi_q = phi_q
        #: spatial bodies: d f_s / d lam = M^-1 Phi_q^T, refreshed with Phi_q
        self._lam_columns = lam_columns
        self._P = None
        self._PT = None

    def update(self, t, y):
        if self._phi_q is None:
            return False
        self._P = np.array(self._phi_q(y[:self.n], t), dtype=float)
        if self._lam_columns is not None:
            self._PT = self._lam_columns(y, t, self._P)
        return True

    def matrix(self, J, mass, c):
        n, L = self.n, 2 * self.n + self.m
        self._J = J
        self._Ms = np.diag(mass[n:2 * n]) - c * J[n:2 * n, n:2 * n]      # M - c Ks
        self._me = mass[L:]
        P = self._P if self._P is not None else J[2 * n:L, :n]
        PT = (self._PT if self._PT is not None else P.T) if self._P is not None \
            else J[n:2 * n, 2 * n:L]
        return _reduced(np.diag(mass[n:2 * n]), J[n:2 * n, :n], J[n:2 * n, n:2 * n], PT, P, c)

    def rhs(self, r, c):
        n, L = self.n, 2 * self.n + self.m
        return np.concatenate([c * r[n:2 * n] + self._Ms @ r[:n], -r[2 * n:L] / c])

    def solution(self, x, r, c):
        n, L = self.n, 2 * self.n + self.m
        d = np.empty(r.size)
        d[:n] = x[:n]
        d[n:2 * n] = (x[:n] - r[:n]) / c
        d[2 * n:L] = x[n:] / (c * c)
        if r.size > L:                   # extra components: lower block triangular
            J = self._J
            A = np.diag(self._me) - c * J[L:, L:]
            d[L:] = np.linalg.solve(A, r[L:] + c * (J[L:, :L] @ d[:L]))
        return d


class Stiff(Formulation):
    """ADAMS-type stiff DAE method (Nikravesh (1988), §13.3.4): the index-3 equations of motion
    with ``y = [q, s, lam]`` run by ``bdf`` with the reduced, rescaled Newton
    system (:class:`ReducedNewton`) and h-weighted error control."""

    name = "stiff"
    description = ("ADAMS-type stiff DAE method: index-3 equations (q, s, lam) solved by "
                   "bdf with the reduced, rescaled Newton system; Phi = 0 at every step")
    full_state = False
    needs_mass = True                    # the integrator must accept a mass matrix
    #: error weights |h|^p of q, s, lam and of the analysis' extra components (the
    #: work integral): q is controlled as in an ODE; s and lam, whose local errors
    #: are amplified by 1/h and 1/h^2 in an index-3 system, are weighted by h^2
    #: (RADAU5 would weight s by h only: measured 1.8x the steps for no gain in
    #: accuracy; docs/analyses.md); the work integral contains lam: h^2
    H_POWER = (0, 2, 2, 2)
    #: the tolerances given to the integrator are the requested ones times this: the
    #: h^2 weights leave the velocities' global error up to 10x the tolerance with
    #: calibrated bdf (slider-crank, rtol 1e-6 to 1e-9: 6.6-10.2x; with 0.25: within
    #: 4x), so the index-3 form asks for a quarter (docs/analyses.md)
    tolerance_factor = 0.25

    def __init__(self, system, settings=None):
        super().__init__(system, settings)
        refuse_velocity_rows(system, "settings.formulation", "the stiff (index-3) "
                             "formulation", "use di, cs, projection, penalty or "
                             "joint_coordinates")
        #: spatial bodies: unit mass on s, M^-1 inside f (_accel)
        self.spatial = system.mass_diag is None
        if self.solver.spatial is not None:
            self.solver.spatial.refuse_massless("formulation 'stiff' (M^-1 inside its "
                                                "right-hand side)")
        #: the constraint rows in the DAE (None: all; :meth:`use_independent_rows`)
        self.rows = None
        self._size_rows(system.m)
        # planar, compiled elements: f and the work rate in one C call
        # (mbplugins._ext._dae.CompiledStiff, NumPy reference: rhs); bdf then runs on the
        # compiled loop (Nikravesh (1988), §12.4, §13.3.4)
        self.compiled = compiled_dae_rhs(system, self.spatial, "CompiledStiff")
        #: why the compiled right-hand side does not apply (None when it does)
        self.compiled_reason = None if self.compiled is not None else \
            why_not_compiled(system, self.spatial)

    def _size_rows(self, m: int) -> None:
        n = self.system.n
        self.m = m
        self._f = np.zeros(2 * n + m)
        self.state_mass = np.concatenate([np.ones(n), np.ones(n) if self.spatial
                                          else self.system.mass_diag, np.zeros(m)])
        pq, ps, pl, _ = self.H_POWER
        self.state_h_power = np.concatenate([np.full(n, pq), np.full(n, ps), np.full(m, pl)])

    #: use_independent_rows builds the compiled right-hand side on the kept rows
    compiled_follows_rows = True

    def compiled_ready(self) -> bool:
        return self.compiled is not None

    def use_independent_rows(self, rows, q=None, t=None) -> None:
        """Keep only these constraint rows (the independent ones of a redundant set,
        found once by the analysis, which checks the others at every output): one
        multiplier per independent equation, so the reduced Newton matrix stays
        regular (Nikravesh (1988), App. C).  The NumPy right-hand side, on the System
        seen through those rows (:class:`RowSubset`), and the compiled one on the same
        rows."""
        self.rows = np.asarray(rows, dtype=np.intp)
        self.solver.set_rows(self.rows)
        self.system = RowSubset(self.system, self.rows)
        self._size_rows(len(self.rows))
        # the compiled right-hand side on those rows (its NumPy reference: rhs on the
        # RowSubset)
        self.compiled = compiled_dae_rhs(self.system, self.spatial, "CompiledStiff", rows=self.rows)
        self.compiled_reason = None if self.compiled is not None else \
            why_not_compiled(self.system.base_system, self.spatial)

    @property
    def size(self) -> int:
        return 2 * self.n + self.m

    def integrator_options(self, extra: int = 0) -> dict:
        """Integrator options of this DAE for the state plus ``extra`` trailing
        differential components (mass 1) appended by the analysis: the mass diagonal,
        bdf's error weights and reduced Newton system, and the layout ``[q, s, lam]``
        for the generalized-α methods (``positions``, ``multipliers``); the analysis
        passes the ones the integrator takes."""
        return {"mass": np.concatenate([self.state_mass, np.ones(extra)]),
                "h_power": np.concatenate([self.state_h_power,
                                           np.full(extra, float(self.H_POWER[3]))]),
                "newton_system": self._newton_system(),
                # the layout for the generalized-α methods' second-order form, and
                # the blocks of their Jacobian refreshed at every step
                "positions": self.n, "multipliers": self.m,
                "jacobian_update": self.newton_blocks_hook()}

    #: the generalized-α Jacobian refresh: ``"compiled"`` (``CompiledStiff.newton_blocks``
    #: where the compiled right-hand side and force-Jacobian kernels apply) or
    #: ``"python"`` (:meth:`update_newton_blocks`, its reference: the same numbers bit
    #: for bit); an instance may override it before the run
    newton_blocks = "compiled"

    def newton_blocks_hook(self):
        """The ``jacobian_update`` call-back: ``CompiledStiff.newton_blocks`` (one C call,
        no Python per step) when :attr:`newton_blocks` is ``"compiled"`` and the
        compiled right-hand side, the compiled force-Jacobian kernels of every force
        group and an unpadded coordinate buffer apply; else
        :meth:`update_newton_blocks`."""
        c, s = self.compiled, self.system
        base = getattr(s, "base_system", s)
        if (self.newton_blocks != "compiled" or c is None or base.padded
                or not hasattr(c, "enable_newton_blocks")):
            return self.update_newton_blocks
        if not c.newton_blocks_ready:
            kernels = base.force_jacobian_kernels()
            if kernels is None:
                return self.update_newton_blocks
            c.enable_newton_blocks(kernels[0], kernels[1])
        return c.newton_blocks

    def update_newton_blocks(self, t, y, J) -> None:
        """The blocks of ``J`` (df/dy at an earlier state, at least ``size`` square)
        that change fastest, in place at ``y``: the velocity block ``df_s/ds``, the
        reaction columns ``df_s/dlam`` and the constraint rows (planar ``C``,
        ``Phi_q^T``, ``Phi_q``; spatial ``M^-1 (C - Dv)``, ``M^-1 P^T``, P the true
        gradient: :func:`.velocity_jacobian.velocity_blocks` with the force Jacobians
        of :meth:`mbcore.System.force_jacobians`; no evaluation of f: the inertial
        term ``Dv`` does not depend on the accelerations).  ``df_s/dq`` (the stiffness and
        ``d(P^T lam)/dq``, by differences of the constraint rows: most of the cost of
        :meth:`jacobian`) stays: in the generalized-α iteration matrix it is damped
        by β' h^2, those blocks by γ' h and 1 (Arnold & Brüls (2007), §3).  On the
        governor of IFToMM A05 a one-step-old Jacobian needed 5-10 Newton iterations,
        with these blocks refreshed 3-4 and almost no new Jacobian (docs/integrators.md)."""
        n, m, s = self.n, self.m, self.system
        q = np.ascontiguousarray(y[:n], dtype=float)
        v = np.ascontiguousarray(y[n:2 * n], dtype=float)
        _, C = s.force_jacobians(q, v, t)
        if not self.spatial:
            P = s.jacobian_dense(q, t)
            J[n:2 * n, n:2 * n] = dense(C)
            J[n:2 * n, 2 * n:2 * n + m] = P.T
            J[2 * n:2 * n + m, :n] = P
            return
        c, L = self.compiled, 2 * n + m
        if c is not None:                # in C: the rows and the mass solve of
            P = c.true_rows(t, q)        # [0, C - Dv, P^T] (Dv does not depend on the
            X, zero = self._update_buffers()     # accelerations, only the unused Dq)
            X[:, :n] = 0.0
            X[:, n:2 * n] = dense(C)
            X[:, 2 * n:] = P.T
            c.velocity_columns(q, v, zero, X)
            Ks, PT = X[:, n:2 * n], X[:, 2 * n:]
        else:
            P = _phi_rows(s, q, t)
            a = self.rhs(t, np.asarray(y[:L], dtype=float))[n:2 * n].copy()
            _, Ks, PT = velocity_blocks(_mass_solver(s).spatial, q, v, a, np.zeros((n, n)),
                                        dense(C), np.asarray(P).T)
        J[n:2 * n, n:2 * n] = Ks
        J[n:2 * n, 2 * n:L] = PT
        J[2 * n:L, :n] = P

    def _update_buffers(self):
        """The work arrays of :meth:`update_newton_blocks` (allocated once per size):
        the columns of the mass solve and zero accelerations."""
        n, L = self.n, self.size
        b = getattr(self, "_upd", None)
        if b is None or b[0].shape != (n, L):
            b = self._upd = (np.empty((n, L)), np.zeros(n))
        return b

    def _newton_system(self):
        """The reduced Newton hook: ``_stiffnewton.ReducedNewtonC`` (the same
        arithmetic in compiled code, bit for bit) where the compiled right-hand side
        applies, else :class:`ReducedNewton` (spatial: d f_s / d lam = M^-1 Phi_q^T
        refreshed with Phi_q)."""
        if self.compiled is not None and self.spatial:
            # the true Phi rows and M^-1 times them from the compiled right-hand side
            c, n = self.compiled, self.n
            return ReducedNewton(self.n, self.m, lambda q, t: c.true_rows(t, q),
                                 lambda y, t, P: c.lam_columns(y[:n], y[n:2 * n], P))
        if self.compiled is not None:
            try:
                from mbplugins._ext._stiffnewton import ReducedNewtonC
            except ImportError:          # pragma: no cover - an old build
                pass
            else:
                return ReducedNewtonC(self.n, self.m, self.system.jacobian_dense)
        return ReducedNewton(
            self.n, self.m,
            (lambda q, t: _phi_rows(self.system, q, t)) if self.spatial
            else self.system.jacobian_dense,
            (lambda y, t, P: _lam_columns(self.system, y[:self.n],
                                          y[self.n:2 * self.n], t, P))
            if self.spatial else None)

    def initialize(self, q, qd, t):
        """Consistent starting values: (q, qd) on the constraints to round-off
        (:func:`.dae_common.consistent_start`), lam0 from the augmented system, s0 = qd0."""
        q, qd = consistent_start(self.system, q, qd, t)
        _, lam = self.solver.solve(q, qd, t)
        if self.rows is not None:
            lam = lam[self.rows]
        if self.spatial:                 # the multipliers of the true-gradient DAE
            lam = _lam_projected(self.system, q, t, lam, sign=-1.0)
        return np.concatenate([q, qd, lam]), None

    def split(self, y):
        n = self.n
        return y[:n], y[n:2 * n]

    def rhs(self, t, y, radial=None):
        """f(t, y) of ``diag(1, M, 0) y' = f``: ``[s, Q + Phi_q^T lam, Phi]``
        (``radial``: the coefficients of the true gradient at (q, t),
        :func:`.dae_common.radial_coefficients`, when the caller has them)."""
        self.nfev += 1
        s, n = self.system, self.n
        q, v, lam = y[:n], y[n:2 * n], y[2 * n:]
        J = s.jacobian_dense(q, t) if not s.dense else s.jacobian(q, t)
        f = self._f
        f[:n] = v
        if self.spatial:                 # true gradient (see _phi_rows)
            self.solver.mass_solve(q, v, s.forces(q, v, t)
                                   + _phi_rows(s, q, t, J, radial=radial).T @ lam, f[n:2 * n])
        else:
            f[n:2 * n] = s.forces(q, v, t) + J.T @ lam
        f[2 * n:] = s.phi(q, t)
        self.q_cur, self.qd_cur = q, v
        self.solver.lam[:] = full_multipliers(lam, self.system)   # for the power of the constraint forces
        return f

    def jacobian(self, t, y):
        """df/dy: exact q rows and lam columns, ``K + d(Phi_q^T lam)/dq`` and
        ``C`` (:func:`_parts`: analytic force Jacobians, differences of the
        constraint term only), exact Phi_q rows.  Spatial bodies: the derivatives of
        the accelerations (:func:`_spatial_blocks`, on the compiled right-hand side's
        true rows where it applies), the true Phi rows and ``M^-1 P^T``."""
        n = self.n
        N = self.size
        J = np.zeros((N, N))
        J[:n, n:2 * n] = np.eye(n)
        if self.spatial:
            q, v, lam = y[:n], y[n:2 * n], y[2 * n:N]
            c = self.compiled
            rows = (lambda qq, tt: c.true_rows(tt, np.ascontiguousarray(qq, dtype=float))) \
                if c is not None else (lambda qq, tt: _phi_rows(self.system, qq, tt))
            P = rows(q, t)
            f = compiled_f(self) if c is not None else self.rhs
            yc = np.ascontiguousarray(y[:N], dtype=float)
            # the accelerations at y, last: leaves the buffers at y
            Kq, Ks, PT = _spatial_blocks(self.system, q, v, lam, t, P=P, rows=rows,
                                         accel=lambda: f(t, yc)[n:2 * n].copy(),
                                         form=self if c is not None else None)
            J[n:2 * n, :n] = Kq
            J[n:2 * n, n:2 * n] = Ks
            J[n:2 * n, 2 * n:] = PT
            J[2 * n:, :n] = P
            return J
        M, Kq, Ks, Jq = _parts(self.system, y[:n], y[n:2 * n], y[2 * n:], t)
        J[n:2 * n, :n] = Kq
        J[n:2 * n, n:2 * n] = Ks
        J[n:2 * n, 2 * n:] = Jq.T
        J[2 * n:, :n] = Jq
        self.rhs(t, y)                   # leave the buffers at y
        return J

    def consistent_positions(self, q, t, tol=1e-14, max_iter=5):
        """``q`` moved onto Phi(q, t) = 0 by minimum-norm Gauss-Newton corrections
        (the dense output between two steps, each with Phi = 0, is off the manifold
        by the interpolation error, O(tolerance); this removes it)."""
        s = self.system
        q = np.array(q, dtype=float)
        for _ in range(max_iter):
            phi = s.phi(q, t)
            if not phi.size or np.max(np.abs(phi)) <= tol * (1.0 + np.max(np.abs(q))):
                break
            J = s.jacobian_dense(q, t)
            q -= J.T @ np.linalg.solve(J @ J.T, phi)
        return q

    #: the output rows' qdd and radial coefficients: ``"compiled"`` (one
    #: ``CompiledStiff.eval``, where it applies) or ``"python"`` (:meth:`rhs` and
    #: :func:`.dae_common.radial_coefficients`, the reference; the two agree to the
    #: rounding of the force sums, see tests/test_stiff_outputs_compiled.py); an
    #: instance may override it before the run
    outputs_backend = "compiled"

    def _outputs_compiled(self, t, yy):
        """(qdd, radial coefficients or None) at the consistent state ``yy`` from the
        compiled right-hand side (:attr:`outputs_backend`), or None: the NumPy path
        (no compiled right-hand side, massless coordinates, a failing evaluation,
        which the NumPy path then names)."""
        c = self.compiled
        if (self.outputs_backend != "compiled" or c is None or self.solver.augmented
                or (self.spatial and not hasattr(c, "radial_last"))):
            return None
        buf = getattr(self, "_obuf", None)
        if buf is None:
            buf = self._obuf = np.zeros(self.size + 1)
        ok = c.eval(t, np.ascontiguousarray(yy, dtype=float), buf) == 0
        c.nfev -= 1                      # an output, not an integration cost
        if not ok:
            return None
        n = self.n
        if self.spatial:
            return buf[n:2 * n].copy(), c.radial_last()
        return self.solver.minv * buf[n:2 * n], None

    def output_positions(self, t, y):
        """(q, s) of :meth:`outputs` alone: the positions on Phi = 0
        (:meth:`consistent_positions`) and the velocities, without the solve for
        qdd and the projected multipliers (bit for bit those of :meth:`outputs`)."""
        n = self.n
        return (self.consistent_positions(y[:n], t),
                np.array(y[n:2 * n], dtype=float))

    def outputs(self, t, y):
        """Positions on Phi = 0 (:meth:`consistent_positions`), the velocities s and
        the method's own multipliers lam (interpolated between steps, not recomputed);
        qdd = M^-1 (Q + Phi_q^T lam).  Spatial bodies: the coefficients of the true
        gradient (:func:`.dae_common.radial_coefficients`) evaluated once for the
        accelerations and the multipliers of the projected Jacobian (the same values
        as two evaluations at the same (q, t), bit for bit).  qdd and those
        coefficients by the compiled right-hand side where it applies
        (:attr:`outputs_backend`)."""
        n = self.n
        yy = np.array(y[:self.size], dtype=float)
        yy[:n] = self.consistent_positions(yy[:n], t)
        q, v, lam = yy[:n], yy[n:2 * n], yy[2 * n:]
        got = self._outputs_compiled(t, yy)
        if got is not None:
            qdd, radial = got
        else:
            radial = (_radial(self.system, q, t, self.system.jacobian_dense(q, t))
                      if self.spatial else None)
            if self.solver.augmented:    # massless coordinates: M^-1 does not exist
                qdd = np.array(self.solver.solve(q, v, t)[0])
            else:
                f = self.rhs(t, yy, radial=radial)
                self.nfev -= 1           # an output, not an integration cost
                qdd = (f[n:2 * n].copy() if self.spatial
                       else self.solver.minv * f[n:2 * n])
        if self.spatial:
            lam = _lam_projected(self.system, q, t, lam, radial=radial)
        lam = full_multipliers(lam, self.system)
        self.solver.lam[:] = lam
        return q, v, qdd, lam


def jacobian_fd(self, t, y):
    """The former ``Stiff.jacobian``: the q and s columns by forward differences
    (planar: of ``Q + Phi_q^T lam``, :func:`_parts_fd`; spatial: of the whole
    right-hand side, one C call per column on the compiled one), exact q rows, lam
    columns and (true) Phi rows; kept for tests and the benchmark of the analytic
    Newton matrices."""
    n, N = self.n, self.size
    J = np.zeros((N, N))
    if not self.spatial:
        _, Kq, Ks, Jq = _parts_fd(self.system, y[:n], y[n:2 * n], y[2 * n:N], t)
        J[:n, n:2 * n] = np.eye(n)
        J[n:2 * n, :n] = Kq
        J[n:2 * n, n:2 * n] = Ks
        J[n:2 * n, 2 * n:] = Jq.T
        J[2 * n:, :n] = Jq
        self.rhs(t, y)
        return J
    y = np.ascontiguousarray(y[:N], dtype=float)
    c = self.compiled
    f = compiled_f(self) if c is not None else self.rhs
    rhs_columns(self, t, y, J, 2 * n, f)
    if c is not None:
        P = c.true_rows(t, y[:n])
        J[n:2 * n, 2 * n:] = c.lam_columns(y[:n], y[n:2 * n], P)
    else:
        P = _phi_rows(self.system, y[:n], t)
        J[n:2 * n, 2 * n:] = _lam_columns(self.system, y[:n], y[n:2 * n], t, P)
    J[:n, :n] = 0.0
    J[:n, n:2 * n] = np.eye(n)
    J[2 * n:, :n] = P
    J[2 * n:, n:2 * n] = 0.0
    f(t, y)                              # leave the buffers at y
    return J
