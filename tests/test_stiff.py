"""ADAMS-type stiff DAE method (spec/algorithms.md §4.6, §10.3.5): the reduced,
rescaled Newton system, its conditioning, and BDF convergence against DI."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbplugins.formulations.stiff import (bdf_stiff_solve, full_newton_matrix,
                                          reduced_newton_matrix, reduced_newton_step,
                                          residuals)
from test_partitioning import free_slider_crank


@pytest.fixture(scope="module")
def ref():
    m = free_slider_crank()
    res = mbcore.run(m, settings={"formulation": "di", "integrator": "dopri5", "rtol": 1e-12,
                                  "atol": 1e-14, "t_end": 0.5, "output_step": 0.05,
                                  "hold": "crank.phi"})
    return m.compile(), res


def test_rescaled_newton_matrix_stays_conditioned_while_the_full_one_grows_like_h3(ref):
    s, res = ref
    q, v, lam = res["q"][3], res["qd"][3], res["lam"][3]
    full, red = [], []
    for h in (1e-2, 5e-3, 2.5e-3, 1.25e-3):
        hb = h * 2 / 3                                  # BDF2
        full.append(np.linalg.cond(full_newton_matrix(s, q, v, lam, 0.15, hb)))
        red.append(np.linalg.cond(reduced_newton_matrix(s, q, v, lam, 0.15, hb)[0]))
    ratios = np.array(full[1:]) / np.array(full[:-1])
    assert np.all((ratios > 7.0) & (ratios < 9.0)), ratios        # x8 per halving: h^-3
    assert max(red) < 100 and max(red) / min(red) < 1.01, red      # O(1), bounded


def test_reduced_step_equals_the_full_newton_step(ref):
    s, res = ref
    n, m = s.n, s.m
    rng = np.random.default_rng(3)
    q = res["q"][4] + 1e-4 * rng.normal(size=n)
    v = res["qd"][4] + 1e-3 * rng.normal(size=n)
    lam = res["lam"][4] + 1e-2 * rng.normal(size=m)
    hb = 1e-3 * 2 / 3
    sdot, qdot = rng.normal(size=n), v + 1e-3 * rng.normal(size=n)
    r1, r2, r3 = residuals(s, q, v, lam, 0.2, sdot, qdot)
    ds, dq, dl = reduced_newton_step(s, q, v, lam, 0.2, hb, r1, r2, r3)
    # the full (2n + m) system 13.31 in the unknowns (ds, dq, dlam), residual order
    # (r1, r2, r3): the same iterate, computed without elimination or scaling
    A = full_newton_matrix(s, q, v, lam, 0.2, hb)
    x = np.linalg.solve(A, -np.concatenate([r1, r2, r3]))
    np.testing.assert_allclose(np.concatenate([ds, dq]), x[:2 * n], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(dl, x[2 * n:], rtol=1e-5, atol=1e-6 * np.abs(dl).max())


def test_bdf2_converges_with_order_two_to_di_and_holds_the_positions(ref):
    s, res = ref
    q0, qd0 = res["q"][0], res["qd"][0]
    eq, el = [], []
    for h in (2e-3, 1e-3):
        T, Q, S, L, most = bdf_stiff_solve(s, q0, qd0, 0.0, 0.5, h, order=2)
        eq.append(np.abs(Q[-1] - res["q"][-1]).max())
        el.append(np.abs(L[-1] - res["lam"][-1]).max())
        assert max(np.abs(s.phi(q, 0.0)).max() for q in Q) <= 1e-12
        assert most <= 4
    assert 3.5 < eq[0] / eq[1] < 4.5 and 3.5 < el[0] / el[1] < 4.5, (eq, el)
    assert eq[1] < 3e-4


# -- the ``stiff`` formulation run by bdf through its newton_system hook -----------
from mbcore.integrate import integrate                                     # noqa: E402
from mbcore.plugins import registry                                        # noqa: E402
from mbplugins.formulations.stiff import ReducedNewton                     # noqa: E402
from mbplugins.integrators.bdf import BDF                                  # noqa: E402


def _formulation(s):
    return registry().get("formulation", "stiff")(s)


def test_hook_solves_bdfs_full_newton_system_through_the_reduced_one(ref):
    """The hook's answer is the solution of bdf's (diag(mass) - cJ) d = r, with an
    extra trailing component, for fresh and stale Phi_q; the matrix bdf factors is
    the reduced one (bounded condition) while diag(mass) - cJ grows like h^-3."""
    s, res = ref
    form = _formulation(s)
    n, m = s.n, s.m
    y = np.concatenate([res["q"][3], res["qd"][3], res["lam"][3]])
    L = y.size
    rng = np.random.default_rng(7)
    J = np.zeros((L + 1, L + 1))
    J[:L, :L] = form.jacobian(0.15, y)
    J[L, :L] = rng.normal(size=L)                 # a work-like row: depends on the state
    opts = form.integrator_options(1)
    mass = opts["mass"]
    assert opts["h_power"].tolist() == [0] * n + [2] * n + [2] * m + [2]
    conds_full, conds_red = [], []
    for h in (1e-2, 5e-3, 2.5e-3, 1.25e-3):
        c = h * 2 / 3
        hook = ReducedNewton(n, m, s.jacobian_dense)
        assert hook.update(0.15, y)
        A = hook.matrix(J, mass, c)
        assert A.shape == (n + m, n + m)
        full = np.diag(mass) - c * J
        r = rng.normal(size=L + 1)
        d = hook.solution(np.linalg.solve(A, hook.rhs(r, c)), r, c)
        # the residual of a backward-stable solve: eps |full| |d| (observed <= 0.0033
        # of it; a wrong d leaves O(|r|) = O(1))
        bound = np.finfo(float).eps * np.linalg.norm(full, np.inf) * np.abs(d).max()
        np.testing.assert_allclose(full @ d, r, rtol=0, atol=bound)
        conds_full.append(np.linalg.cond(full[:L, :L]))
        conds_red.append(np.linalg.cond(A))
    ratios = np.array(conds_full[1:]) / np.array(conds_full[:-1])
    assert np.all((ratios > 7.0) & (ratios < 9.0)), ratios
    assert max(conds_red) < 100 and max(conds_red) / min(conds_red) < 1.01, conds_red
    # without phi_q the blocks come from J: the same solution
    hook = ReducedNewton(n, m)
    assert not hook.update(0.15, y)
    A = hook.matrix(J, mass, 1e-3)
    r = rng.normal(size=L + 1)
    d = hook.solution(np.linalg.solve(A, hook.rhs(r, 1e-3)), r, 1e-3)
    full = np.diag(mass) - 1e-3 * J
    bound = np.finfo(float).eps * np.linalg.norm(full, np.inf) * np.abs(d).max()
    np.testing.assert_allclose(full @ d, r, rtol=0, atol=bound)    # as above


def test_stiff_same_accelerations_and_multipliers_as_di_at_a_state(ref):
    s, res = ref
    di = registry().get("formulation", "di")(s)
    form = _formulation(s)
    for k in (0, 4, 9):
        q, qd, t = res["q"][k], res["qd"][k], float(res["t"][k])
        a = [np.array(x) for x in di.outputs(t, di.pack(q, qd))]
        y, _ = form.initialize(q, qd, t)
        b = [np.array(x) for x in form.outputs(t, y)]
        for i in (2, 3):
            np.testing.assert_allclose(b[i], a[i], atol=1e-10 * (1 + np.abs(a[i]).max()))
        f = form.rhs(t, y)                          # the DAE itself: s' = qdd, Phi = 0
        np.testing.assert_allclose(f[s.n:2 * s.n] / s.mass_diag, a[2],
                                   atol=1e-10 * (1 + np.abs(a[2]).max()))
        assert np.abs(f[2 * s.n:]).max() < 1e-12


def test_steps_keep_phi_zero_without_projection(ref):
    """Every accepted bdf step of the index-3 system satisfies Phi = 0 to round-off
    (the step ends themselves: no output projection involved); the velocity
    constraint holds only to the integration error."""
    s, res = ref
    form = _formulation(s)
    y0, _ = form.initialize(res["q"][0], res["qd"][0], 0.0)
    opts = {k: v for k, v in form.integrator_options(0).items() if k in BDF.options}
    out = integrate(BDF, lambda t, y: form.rhs(t, y).copy(), (0.0, 0.5), y0,
                    jac=form.jacobian, rtol=1e-8, atol=1e-10, **opts)
    n = s.n
    phi = max(np.abs(s.phi(y[:n], t)).max() for t, y in zip(out.t, out.y, strict=True))
    vel = max(np.abs(s.jacobian_dense(y[:n], t) @ y[n:2 * n]).max()
              for t, y in zip(out.t, out.y, strict=True))
    # Phi = 0 is a row of BDF's Newton system: after its last step (below ~rtol |q|)
    # the residual is second order plus rounding eps |q| (observed 3.3e-15)
    assert len(out.t) > 50 and phi < 1e-12, phi
    assert 1e-12 < vel < 1e-3, vel          # measured 3.3e-5: not enforced, O(h^k)
    np.testing.assert_allclose(out.y[-1][:n], res["q"][10], rtol=0, atol=1e-4)   # obs. 7.3e-7
    # the hook was used: LU of the (n + m) reduced matrix, refreshed every step
    assert out.stats.nlu >= out.stats.nsteps


# rtol 1e-9, the smallest the dynamic analysis accepts for a DAE form (calibrated bdf:
# docs/integrators.md "Tolerance calibration")
@pytest.mark.parametrize("which, rtol", [("fourbar", 1e-9), ("slider_crank", 1e-9)])
def test_stiff_trajectory_agrees_with_di_at_tight_tolerance(which, rtol, examples):
    f = examples / ("fourbar_dap.yaml" if which == "fourbar" else "slider_crank_dynamic.yaml")
    common = {"t_end": 2.0}
    ref = mbcore.run(mbcore.Model.from_file(f), settings={
        "formulation": "di", "integrator": "dopri5", "rtol": 1e-12, "atol": 1e-14, **common})
    st = mbcore.run(mbcore.Model.from_file(f), settings={
        "formulation": "stiff", "integrator": "bdf", "rtol": rtol, "atol": rtol / 100,
        **common})
    assert st.stats["formulation"] == "stiff" and st.stats["integrator"] == "bdf"
    # measured: four-bar 9.2e-10, slider-crank 3.5e-10 (the 10x contract: 10 rtol
    # (1 + |q|) ~ 7e-8); 1e-7 keeps >= 100x
    np.testing.assert_allclose(st["q"], ref["q"], rtol=0, atol=1e-7)
    # (velocities: observed 1.2e-9 of the scale)
    np.testing.assert_allclose(st["qd"], ref["qd"], rtol=0,
                               atol=5e-6 * (1 + np.abs(ref["qd"]).max()))
    lam_scale = 1 + np.abs(ref["lam"]).max()
    # multipliers follow the accelerations' errors (observed 1.5e-6 of the scale)
    np.testing.assert_allclose(st["lam"], ref["lam"], rtol=0, atol=1e-3 * lam_scale)
    # Phi = 0 rows of BDF's Newton system: second order after its last step plus
    # rounding (observed 1.1e-14)
    assert np.max(st["violation/position"]) < 1e-11
    # the velocity constraints are not rows of the stiff form: they drift with the
    # integration error (observed 2.1e-9)
    assert np.max(st["violation/velocity"]) < 1e-5


def test_stiff_model_runs_with_far_fewer_steps_than_di_dopri5():
    """A pendulum carrying a bob on a very stiff, damped spring (k = 1e6)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import stiff_pendulum as stiff
    common = {"analysis": "dynamic", "t_end": 1.5, "output_step": 0.01, "rtol": 1e-6,
              "atol": 1e-8}
    ex = mbcore.run(stiff(), settings={"integrator": "dopri5", "formulation": "di", **common})
    im = mbcore.run(stiff(), settings={"integrator": "bdf", "formulation": "stiff", **common})
    # measured: 736 steps against 10382 (both calibrated for the global error)
    assert ex.stats["integrator_nsteps"] > 5 * im.stats["integrator_nsteps"]
    # the runs' global errors at rtol 1e-6 with the k = 1e6 spring (observed 3.0e-8)
    np.testing.assert_allclose(im["q"], ex["q"], rtol=0, atol=5e-3)
    assert np.max(im["violation/position"]) < 1e-12


def test_bdf_rejects_bad_dae_hook_options():
    from mbcore.integrate.base import IntegratorOptionError
    f = lambda t, y: -y                                                   # noqa: E731
    with pytest.raises(IntegratorOptionError, match="newton_system.*lacks"):
        integrate(BDF, f, (0, 1), [1.0, 2.0], newton_system=object())
    with pytest.raises(IntegratorOptionError, match="h_power.*integers in 0..3"):
        integrate(BDF, f, (0, 1), [1.0, 2.0], h_power=[0, 5])
    # h_power all zero on an ODE: the same steps as without it (no component left out)
    a = integrate(BDF, f, (0, 1), [1.0, 2.0], rtol=1e-6)
    b = integrate(BDF, f, (0, 1), [1.0, 2.0], rtol=1e-6, h_power=[0, 0])
    assert a.stats.nsteps == b.stats.nsteps
    np.testing.assert_array_equal(a.y[-1], b.y[-1])


def test_stiff_springs_do_not_stall_newton_at_round_off():
    """IFToMM A05 (flyball governor: springs of 8e5 N/m, dampers of 4e4 N s/m) with the
    stiff form: the Newton corrections reach round-off (3e-8 error units, rate 1.03)
    at the first step; counted as converged (DASSL's test), not as a failure that
    halves the step — without that test the step size fell to 1e-114 s and the
    right-hand side overflowed at t = 4e-114."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from accuracy_problems import governor_model
    r = mbcore.run(governor_model(), analysis="dynamic", settings={
        "t_end": 0.02, "output_step": 0.01, "formulation": "stiff", "integrator": "bdf",
        "rtol": 1e-6, "atol": 1e-8})
    assert r.status == "finished" and r.t[-1] == pytest.approx(0.02)
    assert r.stats["integrator_nsteps"] < 2000          # observed ~100
    assert np.max(r["violation/position"]) < 1e-10
