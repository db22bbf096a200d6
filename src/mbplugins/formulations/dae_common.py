"""Pieces shared by the index-2 and index-3 DAE formulations (``ggl``, ``stiff``):
the compiled right-hand side of planar models and the constraint terms of their
Newton matrices by differences."""
from __future__ import annotations

import numpy as np

__all__ = ["constraint_fd", "dense", "why_not_compiled", "compiled_dae_rhs", "consistent_start",
           "radial_coefficients", "true_rows", "compiled_constraint_fd"]


def constraint_fd(system, q, t, lams=(), v=None, eps: float = 1e-7, rows=None):
    """Forward differences in q of the constraint-only terms of the Newton matrices
    (no force evaluation; one Phi_q, and with ``v`` one nu, per column):
    ``[d(Phi_q^T l)/dq for l in lams]`` (n x n each) and, with ``v``,
    ``d(Phi_q v - nu)/dq`` (m x n; else None).  ``rows(q, t)``: other constraint
    rows than Phi_q (the true gradient of the stiff form, :func:`true_rows`).  The
    constraint kernels have no Hessians: these stay differences."""
    n, m = system.n, system.m
    outs = [np.zeros((n, n)) for _ in lams]
    W = np.zeros((m, n)) if v is not None else None
    if m == 0 or (not lams and v is None):
        return outs, W
    jac = system.jacobian if rows is None else rows
    P0 = np.array(dense(system.jacobian_dense(q, t) if rows is None else rows(q, t)))
    b0 = [P0.T @ l for l in lams]
    w0 = P0 @ v - system.nu(q, t) if v is not None else None
    qp = np.array(q, dtype=float)
    for j in range(n):
        d = eps * (1.0 + abs(q[j]))
        qp[j] = q[j] + d
        P = jac(qp, t)
        for o, l, b in zip(outs, lams, b0):
            o[:, j] = (P.T @ l - b) / d
        if v is not None:
            W[:, j] = (P @ v - system.nu(qp, t) - w0) / d
        qp[j] = q[j]
    return outs, W


def compiled_constraint_fd(form, q, t, lams=(), v=None, radial: bool = False,
                           rows=None):
    """:func:`constraint_fd` of ``form``'s System in one C call, on its compiled
    right-hand side (``CompiledGGL.constraint_differences``, dense Jacobians; the
    same steps, equal up to the rounding of the sums): with ``radial`` the true
    gradient of the stiff form (``rows`` its NumPy reference, :func:`true_rows`).
    The NumPy differences where a constraint evaluation fails there (they name the
    failing element)."""
    c, n, m = form.compiled, form.n, form.m
    L = np.zeros((len(lams), m))
    for k, lam in enumerate(lams):
        L[k] = lam
    H = np.zeros((len(lams), n, n))
    W = np.zeros((m, n)) if v is not None else None
    try:
        c.constraint_differences(t, np.ascontiguousarray(q, dtype=float),
                                 None if v is None else np.ascontiguousarray(v, dtype=float),
                                 L, H, W, radial)
    except FloatingPointError:
        return constraint_fd(form.system, q, t, lams, v=v, rows=rows)
    return list(H), W


def radial_coefficients(system, q, t, Jq):
    """Per spatial body b the coefficients ``a_b`` (m) with which the true gradient
    of Phi differs from the projected Jacobian of the elements: ``dPhi/dp_b =
    (Phi_q)_{p_b} + a_b p_b^T`` (the projected variant ``Phi_p = 2 Phi_pi' L``,
    Nikravesh (1988), §7.3.1, has no component along p; the normalisation rows are exact, a = 0),
    from the derivative along p: central differences with h and h/2 combined by
    Richardson extrapolation (4 evaluations of Phi per body; exact for the
    quartic-in-p rows of body vectors and points, rounding ~1e-13)."""
    h = 1e-3
    a = np.zeros((len(system.p_index), system.m))
    qp = np.array(q, dtype=float)
    for b, idx in enumerate(system.p_index):
        p = np.array(q[idx], dtype=float)
        d = []
        for hh in (h, 0.5 * h):
            qp[idx] = p * (1.0 + hh)
            up = system.phi(qp, t).copy()
            qp[idx] = p * (1.0 - hh)
            d.append((up - system.phi(qp, t)) / (2.0 * hh))
        qp[idx] = p
        D = (4.0 * d[1] - d[0]) / 3.0
        a[b] = (D - Jq[:, idx] @ p) / (p @ p)
    return a


def true_rows(system, q, t, Jq=None, radial=None):
    """The exact derivative of Phi(q) on ``|p_b| = 1``: Phi_q with ``a_b p_b^T`` added
    on the p columns of every spatial body (:func:`radial_coefficients`; ``radial``:
    those coefficients at (q, t) when the caller has them); planar: Phi_q.  The stiff
    form's Newton rows and reactions, and the Phi rows of the GGL form's Newton
    matrix."""
    if Jq is None:
        Jq = system.jacobian_dense(q, t)
    if system.mass_diag is not None:
        return Jq
    J = np.array(Jq, dtype=float)
    if radial is None:
        radial = radial_coefficients(system, q, t, J)
    for b, a in enumerate(radial):
        idx = system.p_index[b]
        J[:, idx] += np.outer(a, q[idx])
    return J


def consistent_start(system, q, qd, t):
    """(q, qd) moved onto ``Phi = 0`` and ``Phi_q qd = nu`` to round-off by minimum-norm
    corrections (Gauss-Newton; a few iterations of refinement).  The DAE forms put
    the constraints into the Newton system of every step and the calibrated error
    test of ``bdf`` weights a component that starts at zero by ``atol`` alone: a
    start that is consistent only to the assembly tolerance (a velocity residual of
    2e-14 on a coordinate at rest) is then a jump the first step cannot resolve at
    any step size.  The corrections are of the order of that tolerance."""
    q = np.array(q, dtype=float)
    qd = np.array(qd, dtype=float)
    if system.m == 0:
        return q, qd
    eps = np.finfo(float).eps
    hol = system.holonomic
    for _ in range(4):
        phi = system.phi(q, t)[hol]
        if not phi.size or np.max(np.abs(phi)) <= 4 * eps * (1.0 + np.max(np.abs(q))):
            break
        J = system.jacobian_dense(q, t)[hol]
        q -= np.linalg.lstsq(J, phi, rcond=1e-12)[0]
    J = system.jacobian_dense(q, t)
    for _ in range(2):
        r = J @ qd - system.nu(q, t)
        if not r.size or np.max(np.abs(r)) <= 4 * eps * (1.0 + np.max(np.abs(qd))):
            break
        qd -= np.linalg.lstsq(J, r, rcond=1e-12)[0]
    return q, qd


def dense(A):
    """A dense copy of a Jacobian that may be sparse."""
    return A.toarray() if hasattr(A, "toarray") else np.asarray(A)


def why_not_compiled(system, spatial: bool) -> str | None:
    """The reason the GGL or stiff right-hand side keeps the NumPy path, or
    None.  Spatial bodies: compiled, with the mass solve of Formulation I in the
    right-hand side (ext/_spatial_mass.pxi; stiff: with the true gradient of Phi)."""
    if system.backend != "compiled":
        return "kernels: numpy"
    if spatial and not system.dense:
        return "spatial bodies with a sparse Jacobian"
    return system.why_python()


def compiled_dae_rhs(system, spatial: bool, kind: str = "CompiledGGL", rows=None):
    """``mbplugins._ext._dae.CompiledGGL`` (or ``kind``: ``CompiledStiff`` of the stiff
    form, the same arguments) of a System of compiled elements (planar: dense or CSR
    Jacobian; spatial: dense), keeping the constraint ``rows`` (default all; ``system``
    may be a :class:`.rows.RowSubset`: its base System's kernels), else None (Nikravesh
    (1988), §13.3.4)."""
    system = getattr(system, "base_system", system)
    if why_not_compiled(system, spatial) is not None or system.n == 0:
        return None                      # (no bodies: nothing to compile)
    try:
        from mbplugins._ext import _dae
        cls = getattr(_dae, kind)
    except (ImportError, AttributeError):    # pragma: no cover - an old build
        return None
    kernels = system.compiled_kernels()
    kw = {}
    if spatial and not system.padded:
        from mbcore.system.mass import SpatialMass
        kw["spatial"] = SpatialMass(system)
    if rows is not None:
        kw["rows"] = np.asarray(rows, dtype=np.intp)
    return cls(*kernels.args, **kernels.csr(), **kw)


def rhs_columns(form, t, y, J, ncols, f=None):
    """The first ``ncols`` columns of J by forward differences of ``f`` (default
    ``form.rhs``; steps ``1e-7 (1 + |y_j|)``)."""
    f = form.rhs if f is None else f
    f0 = f(t, y).copy()
    yp = y.copy()
    for j in range(ncols):
        d = 1e-7 * (1.0 + abs(y[j]))
        yp[j] = y[j] + d
        J[:, j] = (f(t, yp) - f0) / d
        yp[j] = y[j]


def compiled_f(form):
    """``f(t, y)`` by the formulation's compiled right-hand side (``form.compiled``),
    its NumPy ``rhs`` where an evaluation fails (which then names the failing
    element): the function of :func:`rhs_columns` for the Newton Jacobians of the
    DAE forms (one C call per column)."""
    c, size = form.compiled, form.size
    buf = np.zeros(size + 1)

    def f(t, y):
        if c.eval(t, np.ascontiguousarray(y, dtype=float), buf) == 0:
            return buf[:size]
        return form.rhs(t, y)
    return f

