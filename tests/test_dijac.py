"""The semi-analytic DI/CS Jacobian of the compiled right-hand side (issue 14,
deliverable 3): ``CompiledRHS.c_jac`` (through ``CompiledODE.jacobian``) against its
NumPy reference ``mbcore.solve.dijac.di_jacobian`` and against forward differences of the
right-hand side; where it applies; runs of bdf / implicit_euler / trapezoid with it
against runs with forward-difference Jacobians (spec/algorithms.md §2.9, §4.1-4.2)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.solve.assembly import assemble
from mbcore.solve.dijac import di_jacobian
from mbcore.plugins import registry
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from models import stiff_chain, stiff_pendulum  # noqa: E402


def _model(examples, name):
    if name == "stiff_chain":
        return stiff_chain(10)
    if name == "damped_chain":
        return stiff_chain(4, k=1e4, damping=30.0)
    if name == "stiff_pendulum":
        return stiff_pendulum()
    if name == "forced":
        from test_multistep_compiled import forced
        return forced()
    return Model.from_file(examples / {"fourbar": "fourbar_dap.yaml",
                                       "slider_crank": "slider_crank_dynamic.yaml",
                                       "platform": "platform.yaml"}[name])


def _form(m, formulation="di", alpha=5.0, beta=5.0):
    sysm = m.compile(kernels="compiled")
    opts = {"alpha": alpha, "beta": beta} if formulation == "cs" else {}
    form = registry().get("formulation", formulation)(sysm, opts)
    return sysm, form, (alpha, beta) if formulation == "cs" else (0.0, 0.0)


def _state(sysm, seed=1):
    """An assembled state, then perturbed off both constraint levels (the Jacobian
    is evaluated at Newton iterates, which are not consistent)."""
    st = sysm.initial_state(0.0)
    q, qd = st.q, st.qd
    if sysm.m:
        rep = assemble(sysm, q, qd, 0.0)
        q, qd = rep.q, rep.qd
    rng = np.random.default_rng(seed)
    q = q + 1e-3 * rng.standard_normal(q.size)
    qd = qd + 0.3 * rng.standard_normal(qd.size)
    return np.concatenate([q, qd, [0.0]])


def _fd(crhs, t, y):
    """Central differences of the whole right-hand side (4n + 2 evaluations), step
    1e-6 (1 + |y_j|).  Against the semi-analytic Jacobian they agree to the error of
    its own difference columns (<= 2.8e-7 of a block's scale: drag, damping; forward
    differences left up to 3.2e-6 on the stiff pendulum), so the checks use 5e-5."""
    N = y.size
    fp, fm = np.zeros(N), np.zeros(N)
    J = np.zeros((N, N))
    for j in range(N):
        d = 1e-6 * (1.0 + abs(y[j]))
        yp, ym = y.copy(), y.copy()
        yp[j] += d
        ym[j] -= d
        assert crhs.eval(t, yp, fp) == 0 and crhs.eval(t, ym, fm) == 0
        J[:, j] = (fp - fm) / (yp[j] - ym[j])
    return J


def _analytic(crhs, t, y):
    N = y.size
    J = np.full((N, N), np.nan)
    assert crhs.analytic_jac
    assert crhs.jacobian(t, y, J) == 0
    return J


def _block_error(A, B):
    """The largest difference of each block row (qd', qdd, W'), relative to that
    block's largest entry of B; the worst of the three."""
    n = (A.shape[0] - 1) // 2
    worst = 0.0
    for rows in (slice(0, n), slice(n, 2 * n), slice(2 * n, 2 * n + 1)):
        s = max(np.max(np.abs(B[rows])), 1e-12)
        worst = max(worst, float(np.max(np.abs(A[rows] - B[rows]))) / s)
    return worst


#: compiled c_jac vs. its NumPy reference: the same formula, but the constraint-Hessian
#: and power columns are forward differences with step h = 1e-7 (1 + |x|), whose
#: rounding (~eps/h = 2e-9 of the differenced quantity, itself up to ~10x the block's
#: scale) the two evaluations do not share.  Observed <= 2.3e-8 (drag) under the
#: native and Sandybridge BLAS kernels; 5e-6 is 200x that.
REF_TOL = 5e-6

CASES = [("fourbar", "di"), ("slider_crank", "di"), ("platform", "cs"),
         ("stiff_chain", "di"), ("forced", "di"), ("forced", "cs"),
         ("stiff_pendulum", "cs"), ("damped_chain", "di")]


@pytest.mark.parametrize("name,formulation", CASES)
def test_jacobian_against_reference_and_differences(examples, name, formulation):
    """Compiled == NumPy reference (same formula: the difference columns to REF_TOL of
    the block's scale, everything else to rounding) and both == central differences
    of the whole right-hand side within 5e-5; the structure [[0, I, 0], ., .] and
    the zero W column exactly."""
    sysm, form, (alpha, beta) = _form(_model(examples, name), formulation)
    crhs = form.compiled
    for t, seed in ((0.13, 1), (0.71, 2)):
        y = _state(sysm, seed)
        n = sysm.n
        Ja = _analytic(crhs, t, y)
        Jr = di_jacobian(sysm, t, y, alpha, beta)
        Jf = _fd(crhs, t, y)
        np.testing.assert_array_equal(Ja[:n], np.hstack([np.zeros((n, n)), np.eye(n),
                                                         np.zeros((n, 1))]))
        assert not np.any(Ja[:, 2 * n])
        assert _block_error(Ja, Jr) <= REF_TOL
        assert _block_error(Ja, Jf) <= 5e-5
        assert _block_error(Jr, Jf) <= 5e-5
        # the buffers are left at y: the multipliers and accelerations of f(t, y)
        f = np.zeros(y.size)
        lam, qdd = form.compiled.lam_view.copy(), form.compiled.qdd_view.copy()
        assert crhs.eval(t, y, f) == 0
        np.testing.assert_array_equal(lam, crhs.lam_view)
        np.testing.assert_array_equal(qdd, crhs.qdd_view)


def test_unconstrained_chain_is_exact():
    """Without constraints and with no power (undamped springs) nothing is
    differenced: dqdd/dq = M^-1 K, dqdd/dqd = M^-1 C, a zero W row — equal to the
    reference to rounding."""
    sysm, form, _ = _form(stiff_chain(10))
    y = _state(sysm)
    Ja = _analytic(form.compiled, 0.2, y)
    n = sysm.n
    K, C = sysm.force_jacobians(y[:n], y[n:2 * n], 0.2)
    minv = 1.0 / sysm.mass_diag
    np.testing.assert_allclose(Ja[n:2 * n, :n], minv[:, None] * K, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(Ja[n:2 * n, n:2 * n], minv[:, None] * C, rtol=1e-12,
                               atol=1e-300)
    assert not np.any(Ja[2 * n])
    np.testing.assert_allclose(Ja, di_jacobian(sysm, 0.2, y), rtol=1e-12, atol=1e-300)


def test_the_constraint_terms_matter(examples):
    """The check can fail: without the constraint-Hessian terms (the KKT solve of K
    and C alone) the four-bar's Jacobian is far from the differences."""
    sysm, form, _ = _form(_model(examples, "fourbar"))
    y = _state(sysm)
    t, n, m = 0.3, sysm.n, sysm.m
    Jf = _fd(form.compiled, t, y)
    P = sysm.jacobian_dense(y[:n], t)
    K, C = sysm.force_jacobians(y[:n], y[n:2 * n], t)
    A = np.block([[np.diag(sysm.mass_diag), -P.T], [P, np.zeros((m, m))]])
    X = np.linalg.solve(A, np.vstack([np.hstack([K, C]), np.zeros((m, 2 * n))]))
    rows = slice(n, 2 * n)
    err = np.max(np.abs(X[:n] - Jf[rows, :2 * n])) / np.max(np.abs(Jf[rows]))
    assert err > 1e-2
    Ja = _analytic(form.compiled, t, y)
    assert np.max(np.abs(Ja[rows] - Jf[rows])) / np.max(np.abs(Jf[rows])) < 5e-5


def test_where_the_analytic_jacobian_applies(examples):
    """Dense planar systems of compiled forces: analytic.  Sparse (CSR) systems,
    spatial bodies and Python force types keep forward differences (or have no
    compiled right-hand side); disable_jacobian switches back."""
    from models import chain
    _, form, _ = _form(_model(examples, "fourbar"))
    assert form.compiled.analytic_jac
    form.compiled.disable_jacobian()
    assert not form.compiled.analytic_jac
    sp = chain(40).compile(kernels="compiled", jacobian="sparse")
    f_sp = registry().get("formulation", "di")(sp, {})
    assert f_sp.compiled is not None and f_sp.compiled.sparse
    assert not f_sp.compiled.analytic_jac
    sx = Model.from_file(examples / "spatial_double_pendulum.yaml").compile(kernels="compiled")
    f_sx = registry().get("formulation", "di")(sx, {})
    assert f_sx.compiled is None or not f_sx.compiled.analytic_jac
    # forward differences then: the default c_jac equals num_jac of the evaluation
    y = _state(sp)
    N = y.size
    J = np.zeros((N, N))
    assert f_sp.compiled.jacobian(0.1, y, J) == 0
    from mbcore.integrate.common import num_jac
    buf = np.zeros(N)

    def fun(t, yy):
        assert f_sp.compiled.eval(t, yy, buf) == 0
        return buf
    np.testing.assert_array_equal(J, num_jac(fun, 0.1, y, fun(0.1, y).copy()))


def test_python_force_types_keep_differences():
    from test_force_jacobians import planar_model
    s = planar_model("user_force").compile(kernels="compiled")
    form = registry().get("formulation", "di")(s, {})
    assert form.compiled is None or not form.compiled.analytic_jac


@pytest.mark.parametrize("ftype", ["tsda", "rsda", "force", "torque", "drag", "damping",
                                   "contact"])
def test_every_planar_force_type(ftype):
    """Each compiled force type (K, C and its power in the W row), with two revolute
    joints added (constraints), against differences of the right-hand side."""
    from test_force_jacobians import planar_model
    m = planar_model(ftype)
    m.add_joint("revolute", "J01", body_i="B0", body_j="B1", point_i=(0.35, 0.15),
                point_j=(-0.35, -0.15))
    m.add_joint("revolute", "J12", body_i="B1", body_j="B2", point_i=(0.35, 0.15),
                point_j=(-0.35, -0.15))
    sysm, form, _ = _form(m)
    # every type listed is compiled: losing its analytic Jacobian is a failure
    assert form.compiled is not None and form.compiled.analytic_jac, ftype
    y = _state(sysm, 3)
    Ja = _analytic(form.compiled, 0.4, y)
    assert _block_error(Ja, _fd(form.compiled, 0.4, y)) <= 5e-5
    assert _block_error(Ja, di_jacobian(sysm, 0.4, y)) <= REF_TOL


RUNS = [("fourbar", "di", "bdf", {"rtol": 1e-6, "atol": 1e-8}),
        ("platform", "cs", "bdf", {"rtol": 1e-6, "atol": 1e-8}),
        ("stiff_chain", "di", "bdf", {"rtol": 1e-3, "atol": 1e-5}),
        ("fourbar", "di", "implicit_euler", {"step": 2e-3}),
        ("fourbar", "di", "trapezoid", {"step": 2e-3}),
        ("stiff_chain", "di", "implicit_euler", {"step": 1e-4}),
        ("stiff_chain", "di", "trapezoid", {"step": 1e-4})]


@pytest.mark.parametrize("name,formulation,integrator,opts", RUNS)
def test_runs_with_the_analytic_jacobian_agree_with_fd_runs(examples, monkeypatch, name,
                                                             formulation, integrator, opts):
    """The same integration within its tolerance (bdf: the error test; θ-methods: the
    Newton tolerance on the same step grid); no Jacobian evaluations counted in
    nfev; the Python driver on the compiled right-hand side takes the same steps."""
    import mbcore.solve.formulation as F
    m = _model(examples, name)
    t_end = 0.2 if name == "stiff_chain" else 1.0
    st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 10,
          "integrator": integrator, "formulation": formulation, **opts,
          "record": "q, qd, energy, integrator"}
    if formulation == "cs":
        st.update(alpha=5.0, beta=5.0)
    a = mbcore.run(m, settings=st)
    p = mbcore.run(m, settings={**st, "loop": "python"})
    with monkeypatch.context() as mp:
        mp.setattr(F, "_enable_jacobian", lambda system, crhs: False)
        b = mbcore.run(m, settings=st)
    assert a.stats["loop"] == b.stats["loop"] == "compiled"
    assert a.stats["integrator_nfev_jac"] == 0 < b.stats["integrator_nfev_jac"]
    from test_multistep_compiled import STRICT, _close_counts
    for k in ("integrator_nfev", "integrator_nsteps", "integrator_njev"):
        assert (a.stats[k] == p.stats[k]) if STRICT else _close_counts(a.stats[k],
                                                                      p.stats[k]), k
    np.testing.assert_allclose(a["q"], p["q"], rtol=0,
                               atol=(1e-12 if STRICT else 1e-8) * (1 + np.max(np.abs(p["q"]))))
    scale = np.max(np.abs(b["q"])) + 1.0
    tol = 50 * opts.get("rtol", 1e-6)
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=tol * scale)
    np.testing.assert_allclose(a["energy"], b["energy"], rtol=0,
                               atol=tol * (np.max(np.abs(b["energy"])) + 1.0))


@pytest.mark.parametrize("formulation", ["di", "cs"])
def test_many_constraints_lapack_factor(formulation):
    """m = 50 > 40: the Schur factor of the evaluation is LAPACK's (dpotrf), the 2n
    right-hand sides are solved by one dpotrs call."""
    from models import chain
    sysm = chain(25).compile(kernels="compiled", jacobian="dense")
    ab = (3.0, 4.0) if formulation == "cs" else (0.0, 0.0)
    opts = {"alpha": ab[0], "beta": ab[1]} if formulation == "cs" else {}
    form = registry().get("formulation", formulation)(sysm, opts)
    assert sysm.dense and sysm.m > 40 and form.compiled.analytic_jac
    y = _state(sysm)
    Ja = _analytic(form.compiled, 0.3, y)
    assert _block_error(Ja, _fd(form.compiled, 0.3, y)) <= 5e-5
    assert _block_error(Ja, di_jacobian(sysm, 0.3, y, *ab)) <= REF_TOL
