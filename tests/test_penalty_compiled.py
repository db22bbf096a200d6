"""The compiled penalty formulation (``mbplugins._ext._penalty.CompiledPenalty``, issue 14):
right-hand side and post-step projections against their NumPy reference (the Python
path of ``mbplugins.formulations.penalty``, selected by ``formulation.compiled =
None``), on the planar four-bar, a loaded chain with drivers and force elements, and
the N-four-bar of IFToMM A02 (dense and sparse Jacobians) including the flat singular
configuration; the compiled loop with its C projection step against the Python
driver.

Accuracy: both paths compute the same iterates of the augmented Lagrangian iteration
(Schur form, ``(B + I/a) lam_{k+1} = gs + lam_k / a - J M^-1 Q``).  Where the
iteration converges they agree to 1e-12.  In the band of the flat configuration the
iteration stops unconverged at ``iterations`` and ``B + I/a`` has a condition number
~ a lambda_max(B) ~ 1e7: there the rounding of forming B alone is ~eps cond relative
in the weak directions, and both paths are that far from an extended-precision
evaluation of the same iterates (checked below); the bound there is eps cond(B + I/a).
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from models import a02  # noqa: E402

from test_compiled_rhs import loaded_chain  # noqa: E402
from loop_checks import assert_compiled_run_matches_python  # noqa: E402

EPS = np.finfo(float).eps


def penalty(sysm, **settings):
    return registry().get("formulation", "penalty")(sysm, settings)


def a02_state(N, theta, omega=-1.0):
    """The consistent A02 state with every crank at ``theta`` turning at ``omega``."""
    n = 3 * (2 * N + 1)
    q, qd = np.zeros(n), np.zeros(n)
    c, s = math.cos(theta), math.sin(theta)
    for k in range(N + 1):
        q[3 * k:3 * k + 3] = [k + 0.5 * c, 0.5 * s, theta]
        qd[3 * k:3 * k + 3] = [-0.5 * omega * s, 0.5 * omega * c, omega]
    for k in range(N):
        o = 3 * (N + 1 + k)
        q[o:o + 3] = [k + 0.5 + c, s, 0.0]
        qd[o:o + 3] = [-omega * s, omega * c, 0.0]
    return q, qd


def python_rhs(form, t, y):
    """[qd; qdd; W'] and lam by the NumPy reference on the same System."""
    c, form.compiled = form.compiled, None
    try:
        yd = form.rhs(t, y[:2 * form.n]).copy()
        w = form.work_rate(t)
        lam = form.lam.copy()
    finally:
        form.compiled = c
    return np.concatenate([yd, [w]]), lam


def python_project(form, t, y):
    c, form.compiled = form.compiled, None
    try:
        return form.project(t, y)
    finally:
        form.compiled = c


def schur_condition(form, q, t):
    """cond(B + I/a), B = J M^-1 J^T: the amplification of rounding in the band."""
    J = form.system.jacobian_dense(q, t)
    B = (J / form.mass) @ J.T + np.eye(form.system.m) / form.alpha
    return float(np.linalg.cond(B))


def check_rhs(form, t, y, regular=True):
    """Compiled == NumPy reference to 1e-12 (``regular``), else to eps cond(B + I/a)
    (x 10 for the iterations): near the flat configuration B is nearly singular (cond
    ~ a lambda_max(B)).  Returns whether the iteration converged."""
    c, n = form.compiled, form.n
    out = np.zeros(2 * n + 1)
    unconv = c.unconverged_evaluations
    assert c.eval(t, y, out) == 0
    converged = c.unconverged_evaluations == unconv
    want, lam = python_rhs(form, t, y)
    # the same solve in C and NumPy, rounded in another order: ~eps cond (observed
    # <= 1.6e-14 of the scale where regular, 0.3 eps cond near the flat configuration)
    tol = 1e-11 if regular else max(1e-11, 100 * EPS * schur_condition(form, y[:n], t))
    scale = np.max(np.abs(want))
    np.testing.assert_allclose(out, want, rtol=0, atol=tol * scale)
    np.testing.assert_allclose(c.lam_view, lam, rtol=0,
                               atol=max(tol, 1e-11) * (1.0 + np.max(np.abs(lam))))
    return converged


def check_project(form, t, y, tol):
    c, n = form.compiled, form.n
    out = np.zeros(2 * n)
    code = c.project(t, y[:2 * n].copy(), out, True)
    want = python_project(form, t, y[:2 * n].copy())
    assert code in (0, 1)
    if want is None:
        assert code == 0
        return False
    assert code == 1
    np.testing.assert_allclose(out, want, rtol=0, atol=tol * (1.0 + np.max(np.abs(want))))
    return True


# ---------------------------------------------------------------- right-hand side
def _spatial_chain(n):
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import spatial_chain
    return spatial_chain(n)


@pytest.mark.parametrize("case", ["fourbar_dap", "slider_crank_dynamic", "loaded",
                                  "spatial_heavy_top", "spatial_gyroscope",
                                  "spatial_slider_crank_dynamic", "spatial_chain"])
def test_rhs_and_projection_equal_the_numpy_reference(examples, case):
    """Planar and spatial (Euler parameters in the transformed columns of
    mbcore.system.mass; the chain of 30 rods on ball joints sparse): the compiled
    kernel equals the NumPy reference (observed <= 1.2e-14 of the scale)."""
    m = (loaded_chain() if case == "loaded" else _spatial_chain(30)
         if case == "spatial_chain" else Model.from_file(examples / f"{case}.yaml"))
    sysm = m.compile(kernels="compiled")
    form = penalty(sysm)
    assert form.compiled is not None and form.kernel is form.compiled
    assert penalty(m.compile(kernels="numpy")).compiled is None
    rng = np.random.default_rng(7)
    st = sysm.initial_state(0.0)
    projected = 0
    for k in range(8):
        t = float(rng.uniform(0.0, 2.0))
        q = st.q + 0.02 * rng.standard_normal(sysm.n)
        qd = rng.standard_normal(sysm.n)
        y = np.concatenate([q, qd, [0.0]])
        assert check_rhs(form, t, y)
        projected += check_project(form, t, y, 1e-12)
        if case == "loaded":
            assert abs(form.compiled.power) > 1e-3          # forces and drivers' work
    assert projected >= 6


@pytest.mark.parametrize("N,jacobian", [(2, "auto"), (10, "auto"), (10, "dense"),
                                        (24, "auto")])
def test_nfourbar_rhs_and_projection_near_the_flat_configuration(N, jacobian):
    """A02 (dense for N = 2, sparse for N >= 10 unless forced dense; m > 40 rows
    forced dense uses LAPACK): consistent and perturbed states from regular to the
    flat singular configuration; projection decisions (within tolerance, in the
    singular band, projected) are the same."""
    sysm = a02(N).compile(jacobian=jacobian)
    assert sysm.dense == (N == 2 or jacobian == "dense")
    form = penalty(sysm)
    c = form.compiled
    assert c is not None and c.sparse == (not sysm.dense)
    rng = np.random.default_rng(N)
    converged = unconverged = 0
    for theta in (0.5 * math.pi, 0.3, 2.5, 1e-2, 1e-3, 1e-4, 1e-6, 0.0, math.pi - 1e-5):
        q0, qd0 = a02_state(N, theta)
        for pert in (0.0, 1e-8, 1e-5):
            q = q0 + pert * rng.standard_normal(sysm.n)
            qd = qd0 + pert * rng.standard_normal(sysm.n)
            y = np.concatenate([q, qd, [0.0]])
            regular = abs(math.sin(theta)) > 0.2
            if check_rhs(form, 0.0, y, regular):
                converged += 1
            else:
                unconverged += 1
            check_project(form, 0.0, y, 1e-12 if regular else
                          max(1e-12, 10 * EPS * schur_condition(form, q, 0.0)))
    assert converged >= 12 and unconverged >= 6
    # the band test skipped projections near the flat configuration, and so did the
    # reference (the counters of both paths are kept apart)
    assert c.skipped_projections > 0 and c.skipped_projections == form._skipped_projections
    assert c.projections == form._projections > 0


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="no extended precision")
@pytest.mark.parametrize("N", [2, 6])
def test_in_the_flat_band_both_paths_are_equally_accurate(N):
    """Unconverged near-singular evaluations: compiled and NumPy reference against the
    same iterates in extended precision (80-bit): the compiled error is at most a
    few times the reference's own (both ~eps cond(B + I/a))."""
    L = np.longdouble
    sysm = a02(N).compile()
    form = penalty(sysm)
    c, n = form.compiled, sysm.n
    rng = np.random.default_rng(3)
    for theta, pert in ((1e-4, 1e-4), (0.0, 1e-4), (3e-5, 1e-7), (1e-3, 0.0)):
        q0, qd0 = a02_state(N, theta)
        q = q0 + pert * rng.standard_normal(n)
        qd = qd0 + pert * rng.standard_normal(n)
        y = np.concatenate([q, qd, [0.0]])
        out = np.zeros(2 * n + 1)
        it0 = c.multiplier_iterations
        assert c.eval(0.0, y, out) == 0
        its = c.multiplier_iterations - it0
        ref, _ = python_rhs(form, 0.0, y)
        # the same iterates in long double from the same double inputs
        Q = np.array(sysm.forces(q, qd, 0.0)).astype(L)
        gam = np.array(sysm.gamma(q, qd, 0.0)).astype(L)
        nu = np.array(sysm.nu(q, 0.0)).astype(L)
        phi = np.array(sysm.phi(q, 0.0)).astype(L)
        J = sysm.jacobian_dense(q, 0.0).astype(L)
        minv = L(1) / form.mass.astype(L)
        ia = L(1) / L(form.alpha)
        gs = gam - L(2) * L(form.xi) * L(form.omega) * (J @ qd.astype(L) - nu) \
            - L(form.omega) ** 2 * phi
        B = (J * minv) @ J.T + ia * np.eye(sysm.m, dtype=L)
        cq = J @ (minv * Q)
        lam = np.zeros(sysm.m, dtype=L)
        for _ in range(its):
            lam = _solve_ld(B, gs + lam * ia - cq)
        exact = minv * (Q + J.T @ lam)
        scale = float(np.max(np.abs(exact)))
        e_c = float(np.max(np.abs(out[n:2 * n] - exact))) / scale
        e_p = float(np.max(np.abs(ref[n:2 * n] - exact))) / scale
        assert e_c <= 4.0 * e_p + 1e-12, (theta, pert, e_c, e_p)


def _solve_ld(A, b):
    """Gaussian elimination (partial pivoting) in long double."""
    A, b = A.copy(), b.copy()
    m = len(b)
    for k in range(m):
        p = k + int(np.argmax(np.abs(A[k:, k])))
        if p != k:
            A[[k, p]] = A[[p, k]]
            b[[k, p]] = b[[p, k]]
        f = A[k + 1:, k] / A[k, k]
        A[k + 1:, k:] -= np.outer(f, A[k, k:])
        b[k + 1:] -= f * b[k]
    x = np.zeros(m, dtype=A.dtype)
    for i in range(m - 1, -1, -1):
        x[i] = (b[i] - A[i, i + 1:] @ x[i + 1:]) / A[i, i]
    return x


@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
def test_singular_band_decision_equals_the_svd_test(jacobian):
    """The band test without SVD (inertia of B - tau I; Lanczos only between the
    bounds of lambda_max) decides as the reference's singular values, also with the
    band set just below / above the state's own ratio (the Lanczos branch)."""
    N = 4
    sysm = a02(N).compile(jacobian=jacobian)
    for theta in (1e-2, 1e-3, 2e-4):
        q, _ = a02_state(N, theta)
        J = sysm.jacobian_dense(q, 0.0) / np.sqrt(sysm.mass_diag)
        sv = np.linalg.svd(J, compute_uv=False)
        ratio = (sv[-1] / sv[0]) ** 2
        for band in (0.0, 1e-8, ratio * 0.99, ratio * 1.01, ratio * 1e-3, ratio * 1e3):
            form = penalty(sysm, singular_band=band)
            want = form._near_singular(sysm.jacobian(q, 0.0))
            assert form.compiled.near_singular(0.0, q) == want, (theta, band)
            if band in (ratio * 0.99, ratio * 1.01):
                assert form.compiled.lanczos_runs == 1       # the bounds disagreed
            assert want == (band > ratio)


def test_numpy_reference_is_selectable_and_counts_apart(examples):
    sysm = Model.from_file(examples / "fourbar_dap.yaml").compile()
    form = penalty(sysm)
    y = np.concatenate([sysm.initial_state(0.0).q, np.ones(sysm.n)])
    form.rhs(0.0, y)
    assert form.kernel.evaluations == 1 and form._evaluations == 0
    form.compiled = None
    form.rhs(0.0, y)
    assert form.kernel.evaluations == 1 and form._evaluations == 1
    assert form.evaluations == 2
    form.compiled = form.kernel
    q, qd, qdd, lam = form.outputs(0.0, y)
    assert form.kernel.nfev == 1 and form.kernel.evaluations == 2   # an output, no cost


def test_constructor_checks_sizes(examples):
    from mbplugins._ext._penalty import CompiledPenalty
    s = Model.from_file(examples / "fourbar_dap.yaml").compile()
    ok = dict(evaluator=s._evaluator, force_evaluator=s._force_evaluator, functions=None,
              n=s.n, m=s.m, jdata=s._jdata, qgrav=s._q_gravity, mass=s.mass_diag,
              holonomic=np.ones(s.m), alpha=1e7, xi=1.0, omega=20.0, iterations=10,
              tolerance=1e-12, projection=True, singular_band=1e-8,
              projection_tolerance=1e-9)
    CompiledPenalty(**ok)
    for key, bad in (("qgrav", np.zeros(s.n + 1)), ("mass", np.zeros(s.n)),
                     ("holonomic", np.ones(s.m + 1)), ("jdata", np.zeros(3)),
                     ("alpha", 0.0), ("iterations", 0)):
        with pytest.raises(ValueError):
            CompiledPenalty(**{**ok, key: bad})
    c = CompiledPenalty(**ok)
    with pytest.raises(ValueError):
        c.eval(0.0, np.zeros(2 * s.n - 1), np.zeros(2 * s.n + 1))
    with pytest.raises(ValueError):
        c.project(0.0, np.zeros(2 * s.n), np.zeros(2 * s.n - 1))


# -------------------------------------------------------------------- compiled loop
@pytest.mark.parametrize("integrator", ["dopri5", "rk4", "dop853"])
def test_compiled_loop_projects_as_the_python_driver(examples, integrator, monkeypatch):
    """The compiled loop runs the penalty formulation with its projections in C: same
    steps, evaluations, projections and outputs as the Python driver; no evaluation or
    projection goes through Python (the Python path is made to fail)."""
    from mbplugins.formulations.penalty import Penalty
    m = Model.from_file(examples / "fourbar_dap.yaml")
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.0625,
          "integrator": integrator, "formulation": "penalty", "rtol": 1e-4,
          "atol": 1e-6, "step": 0.004,
          "formulation_options": {"projection_tolerance": 1e-12}}
    b = mbcore.run(m, settings={**st, "loop": "python"})

    def fail(*a, **k):
        raise AssertionError("the Python path of the penalty formulation was used")
    monkeypatch.setattr(Penalty, "accelerations", fail)
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    assert_compiled_run_matches_python(a, b)
    # the projection test 1e-12 (1 + |q|) (observed 3.9e-12), 100x it
    assert np.max(a["violation/position"]) < 100 * 1e-12 * (1 + np.abs(a["q"]).max())


def test_compiled_loop_through_the_flat_configuration():
    """A02, N = 3, through two flat passages: the compiled loop (projections in C)
    against the Python driver on the same kernels (rounding is amplified near the
    bifurcation: up to ~1e-10 relative instead of ~1e-15), and against the exact
    one-degree-of-freedom motion (``benchmarks/models.py::a02_reference``)."""
    N = 3
    m = a02(N, t_end=1.5)
    st = {"output_step": 0.05}
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    # observed <= 9.4e-11 relative under the Sandybridge BLAS kernel, 10x less under
    # others: 1e-7 keeps 1000x; the exact motion below bounds both runs anyway
    for ch in ("q", "qd"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0,
                                   atol=1e-7 * (1.0 + np.max(np.abs(b[ch]))), err_msg=ch)
    from models import a02_reference
    ref = a02_reference(N, 1.5)
    x, yb = ref(a.t)
    phi = a["q/crank0.phi"]
    bx = a["q/crank0.x"] + 0.5 * np.cos(phi)
    by = a["q/crank0.y"] + 0.5 * np.sin(phi)
    assert np.max(np.hypot(bx - x, by - yb)) < 1e-5
    th = ref.theta(a.t)
    assert np.sum(np.diff(np.sign(np.sin(th))) != 0) >= 2          # two flat passages


def test_sparse_penalty_work_channel_balances():
    """Sparse Jacobian (N = 16): the energy balance T + V - W is constant on both
    paths (the NumPy path's work rate is the formulation's own, lam . Phi_q qd)."""
    m = a02(16, t_end=0.2)
    for kernels in ("compiled", "numpy"):
        res = mbcore.run(m, kernels=kernels, settings={"output_step": 0.05, "rtol": 1e-7,
                                                       "atol": 1e-9})
        assert not res.system.dense
        bal = res["energy"][:, 4]
        assert np.ptp(bal) < 1e-7 * np.max(np.abs(res["energy"][:, 2])), kernels
