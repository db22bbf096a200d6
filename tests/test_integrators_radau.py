"""The implicit Runge–Kutta integrators ``radau`` (Radau IIA, order 5;
Hairer & Wanner (1996), §IV.8) and ``sdirk`` (Hairer & Wanner (1996), §IV.6, Table 6.5):
coefficients, measured order, stiff problems, DAEs with a mass matrix (index 1 and
3), the multibody ``stiff``/``ggl`` formulations and option errors.

Every tolerance is a bound with >= 100x margin over the value observed when the
test was written (the observed value is given at each assertion).
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import mbcore
from conftest import EXAMPLES
from mbcore.integrate import IntegratorOptionError, integrate
from mbplugins.integrators.radau import (RADAU_A, RADAU_B, RADAU_C, RADAU_GAMMA, RADAU_MU,
                                         RADAU_T, RADAU_TI, Radau5)
from mbplugins.integrators.sdirk import (SDIRK_A, SDIRK_B, SDIRK_B_HAT, SDIRK_C, SDIRK_GAMMA,
                                         SDIRK4)

G = 9.81


# ---------------------------------------------------------------------------------
# problems
# ---------------------------------------------------------------------------------
def pendulum_ode(t, y):
    return np.array([y[1], -np.sin(y[0])])


def rober(t, y):
    return np.array([-0.04 * y[0] + 1e4 * y[1] * y[2],
                     0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
                     3e7 * y[1] ** 2])


def rober_jac(t, y):
    return np.array([[-0.04, 1e4 * y[2], 1e4 * y[1]],
                     [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
                     [0.0, 6e7 * y[1], 0.0]])


def rober_dae(t, y):
    """Robertson as an index-1 DAE: the third equation replaced by the conservation
    law 0 = y1 + y2 + y3 − 1 (Hairer & Wanner (1996), §VI.1)."""
    f = rober(t, y)
    f[2] = y[0] + y[1] + y[2] - 1.0
    return f


def rober_dae_jac(t, y):
    J = rober_jac(t, y)
    J[2] = 1.0
    return J


def cartesian_pendulum(t, y):
    """Index-3 planar pendulum (unit mass and length): y = [x, y, u, v, lam],
    x' = u, y' = v, u' = −lam x, v' = −lam y − g, 0 = x² + y² − 1."""
    x, z, u, v, lam = y
    return np.array([u, v, -lam * x, -lam * z - G, x * x + z * z - 1.0])


def cartesian_pendulum_exact(theta0, t):
    """The same pendulum from the angle θ (θ'' = −g sin θ, dop853 at 1e-13):
    x = sin θ, y = −cos θ, lam = u² + v² − g y."""
    ref = solve_ivp(lambda t, z: [z[1], -G * np.sin(z[0])], (0, t[-1]), [theta0, 0.0],
                    method="DOP853", rtol=1e-13, atol=1e-13, t_eval=t)
    th, om = ref.y
    return np.stack([np.sin(th), -np.cos(th), om * np.cos(th), om * np.sin(th),
                     om ** 2 + G * np.cos(th)], axis=1)


@pytest.fixture(scope="module")
def rober_reference():
    """scipy's Radau at rtol 1e-12 (a different code: the reference)."""
    t_out = np.array([1.0, 1e2, 1e4, 1e5])
    ref = solve_ivp(rober, (0, 1e5), [1.0, 0.0, 0.0], method="Radau", jac=rober_jac,
                    rtol=1e-12, atol=1e-16, t_eval=t_out)
    return t_out, ref.y.T


def measured_order(cls, tols, **kw):
    """Slope of log(global error) against log(number of steps) over a tolerance
    sweep (the nonlinear pendulum θ'' = −sin θ on [0, 10]; reference dop853 at
    1e-14): the controller keeps the pattern of the steps, so the global error
    of an order-p method falls like N^−p."""
    ref = solve_ivp(pendulum_ode, (0, 10), [1.0, 0.0], method="DOP853", rtol=1e-14,
                    atol=1e-14).y[:, -1]
    n, e = [], []
    for tol in tols:
        # a step budget: a broken method fails here instead of running away
        r = integrate(cls, pendulum_ode, (0, 10), [1.0, 0.0], rtol=tol, atol=tol,
                      max_steps=20000, **kw)
        n.append(r.stats.nsteps)
        e.append(np.abs(r.y[-1] - ref).max())
    return -np.polyfit(np.log(n), np.log(e), 1)[0], n, e


# ---------------------------------------------------------------------------------
# radau: coefficients
# ---------------------------------------------------------------------------------
def test_radau_tableau_is_the_order_5_collocation_method():
    """Table 5.6 of Hairer & Wanner (1996): C(3) (collocation: Σ_j a_ij c_j^(k−1) =
    c_i^k/k), B(5) (Σ b_i c_i^(k−1) = 1/k), stiffly accurate (b = last row of A),
    and T⁻¹A⁻¹T = diag(γ, [[α, β], [−β, α]]) with μ = α − iβ."""
    c = RADAU_C
    for k in (1, 2, 3):           # observed <= 2.8e-17
        assert np.abs(RADAU_A @ c ** (k - 1) - c ** k / k).max() < 1e-14
    for k in range(1, 6):         # observed <= 5.6e-17
        assert abs(RADAU_B @ c ** (k - 1) - 1.0 / k) < 1e-14
    assert abs(RADAU_B @ c ** 5 - 1.0 / 6) > 1e-4         # not order 6 (observed 1.7e-3)
    np.testing.assert_array_equal(RADAU_B, RADAU_A[2])
    L = RADAU_TI @ np.linalg.inv(RADAU_A) @ RADAU_T
    a, b = RADAU_MU.real, -RADAU_MU.imag
    block = np.array([[RADAU_GAMMA, 0, 0], [0, a, b], [0, -b, a]])
    assert np.abs(L - block).max() < 1e-12               # observed 3.1e-15
    # the published eigenvalues of A^-1 (Hairer & Wanner (1996), §IV.8)
    assert RADAU_GAMMA == pytest.approx(3 + 3 ** (2 / 3) - 3 ** (1 / 3), rel=1e-14)
    assert a == pytest.approx(3 + 0.5 * (3 ** (1 / 3) - 3 ** (2 / 3)), rel=1e-14)
    assert b == pytest.approx(0.5 * (3 ** (5 / 6) + 3 ** (7 / 6)), rel=1e-14)


def test_radau_global_error_falls_with_order_5():
    """Global error against steps over rtol = atol = 1e-3 ... 1e-10: slope 5.06
    measured (5 ± 0.3 asserted); errors from 1.8e-4 to 3.2e-13."""
    p, n, e = measured_order(Radau5, 10.0 ** -np.arange(3, 10.5, 0.5))
    assert abs(p - 5) < 0.3, (p, n, e)


# ---------------------------------------------------------------------------------
# radau: stiff ODEs
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("use_jac", [False, True], ids=["fd-jac", "jac"])
def test_radau_robertson_to_1e5_against_a_tight_reference(rober_reference, use_jac):
    t_out, ref = rober_reference
    r = integrate(Radau5, rober, (0, 1e5), [1.0, 0.0, 0.0], rtol=1e-6, atol=1e-10,
                  t_out=t_out, jac=rober_jac if use_jac else None, max_steps=5000)
    rel = np.abs(r.y - ref) / np.abs(ref)
    assert rel.max() < 1.5e-5                   # observed 1.44e-7 (both Jacobians)
    # a stiff code's step count: 186 steps; the Jacobian is kept across steps
    # (RADAU5's policy): 43 evaluations, far fewer than steps
    assert r.stats.nsteps < 400 and r.stats.njev < r.stats.nsteps / 2, r.stats
    if not use_jac:
        assert r.stats.nfev_jac == 3 * r.stats.njev


def test_radau_takes_far_fewer_steps_than_an_explicit_method_on_robertson():
    """On [0, 10] dopri5 is held at its stability limit (7194 steps measured),
    radau is not (61)."""
    kw = dict(rtol=1e-6, atol=1e-10)
    ex = integrate("dopri5", rober, (0, 10), [1.0, 0.0, 0.0], **kw)
    im = integrate(Radau5, rober, (0, 10), [1.0, 0.0, 0.0], max_steps=1000, **kw)
    assert 50 * im.stats.nsteps < ex.stats.nsteps, (im.stats.nsteps, ex.stats.nsteps)


# ---------------------------------------------------------------------------------
# radau: DAEs
# ---------------------------------------------------------------------------------
def test_radau_index1_dae_robertson_with_a_conservation_law(rober_reference):
    t_out, ref = rober_reference
    r = integrate(Radau5, rober_dae, (0, 1e5), [1.0, 0.0, 0.0], rtol=1e-6, atol=1e-10,
                  mass=[1.0, 1.0, 0.0], jac=rober_dae_jac, t_out=t_out, max_steps=5000)
    rel = np.abs(r.y - ref) / np.abs(ref)
    assert rel.max() < 1.1e-4                   # observed 1.05e-6 (y3)
    # the linear constraint holds at the stages and at t_old, so everywhere on the
    # cubic collocation polynomial (dense output; observed 2.2e-16)
    dense = integrate(Radau5, rober_dae, (0, 1e5), [1.0, 0.0, 0.0], rtol=1e-6,
                      atol=1e-10, mass=[1.0, 1.0, 0.0], jac=rober_dae_jac,
                      t_out=np.geomspace(1e-3, 1e5, 50), max_steps=5000)
    assert np.abs(dense.y.sum(axis=1) - 1.0).max() < 1e-13


def test_radau_index3_pendulum_with_h_power():
    """Positions of the index-3 pendulum (mass diag(1, 1, 1, 1, 0), h_power (0, 0, 2,
    2, 2) as the multibody 'stiff' form) against the closed-form angle solution."""
    theta0 = 0.5
    y0 = [np.sin(theta0), -np.cos(theta0), 0.0, 0.0, G * np.cos(theta0)]
    t_out = np.linspace(0, 3, 7)
    exact = cartesian_pendulum_exact(theta0, t_out)
    r = integrate(Radau5, cartesian_pendulum, (0, 3), y0, rtol=1e-8, atol=1e-8,
                  mass=[1, 1, 1, 1, 0], h_power=[0, 0, 2, 2, 2], t_out=t_out,
                  max_steps=20000)
    err = np.abs(r.y - exact).max(axis=0)
    assert err[:2].max() < 2e-6                 # positions: observed 1.07e-8
    assert err[2:4].max() < 3e-4                # velocities: observed 2.7e-6
    assert err[4] < 0.2                         # multiplier (order s−1 = 2): 1.8e-3
    # the constraint at the step ends is a Newton equation, solved to the Newton
    # tolerance (1e-4 of the error scale 1e-8): observed 2.6e-11
    steps = integrate(Radau5, cartesian_pendulum, (0, 3), y0, rtol=1e-8, atol=1e-8,
                      mass=[1, 1, 1, 1, 0], h_power=[0, 0, 2, 2, 2], max_steps=20000)
    assert np.abs(steps.y[:, 0] ** 2 + steps.y[:, 1] ** 2 - 1).max() < 3e-9


@pytest.fixture(scope="module")
def slider_crank_reference():
    f = EXAMPLES / "slider_crank_dynamic.yaml"
    return f, mbcore.run(mbcore.Model.from_file(f), settings={
        "formulation": "di", "integrator": "dop853", "rtol": 1e-10, "atol": 1e-12,
        "t_end": 2.0})


@pytest.mark.parametrize("form, bound_q", [("stiff", 1e-5), ("ggl", 2e-7)])
def test_multibody_dae_formulations_run_with_radau(slider_crank_reference, form, bound_q):
    """The index-3 'stiff' (y = [q, s, lam], mass diag(1, M, 0), h_power (0, 2, 2)) and
    the index-2 'ggl' forms of the free slider-crank, integrated by radau, against
    di + dop853 at rtol 1e-10.  Observed at rtol 1e-8: positions stiff 6.5e-8,
    ggl 1.1e-9; the position constraints 1.6e-14 (stiff: rows of the Newton
    system) and 9.0e-11 (ggl)."""
    f, ref = slider_crank_reference
    st = mbcore.run(mbcore.Model.from_file(f), settings={
        "formulation": form, "integrator": "radau", "rtol": 1e-8, "atol": 1e-10,
        "t_end": 2.0})
    assert st.stats["integrator"] == "radau" and st.stats["formulation"] == form
    np.testing.assert_allclose(st["q"], ref["q"], rtol=0, atol=bound_q)
    assert np.max(st["violation/position"]) < (1e-11 if form == "stiff" else 1e-8)
    # velocities (observed 2.0e-6 stiff, 1.4e-8 ggl; scale 1 + max|qd| = 8.6)
    scale = 1 + np.abs(ref["qd"]).max()
    np.testing.assert_allclose(st["qd"], ref["qd"], rtol=0,
                               atol=(5e-5 if form == "stiff" else 5e-7) * scale)


# ---------------------------------------------------------------------------------
# options
# ---------------------------------------------------------------------------------
def osc(t, y):
    return np.array([y[1], -y[0]])


@pytest.mark.parametrize("cls", [Radau5, SDIRK4], ids=lambda c: c.name)
def test_bad_options_name_the_option(cls):
    with pytest.raises(IntegratorOptionError, match=rf"'{cls.name}': option 'rtol': must be "
                                                    r"finite and >= 0"):
        integrate(cls, osc, (0, 1), [1.0, 0.0], rtol=-1e-6)
    with pytest.raises(IntegratorOptionError, match="option 'mass': expected 2 finite"):
        integrate(cls, osc, (0, 1), [1.0, 0.0], mass=[1.0, 1.0, 0.0])
    with pytest.raises(IntegratorOptionError, match="option 'mass'"):
        integrate(cls, osc, (0, 1), [1.0, 0.0], mass=[1.0, -1.0])
    with pytest.raises(IntegratorOptionError, match="option 'newton_maxiter'"):
        integrate(cls, osc, (0, 1), [1.0, 0.0], newton_maxiter=1)
    if cls is Radau5:
        with pytest.raises(IntegratorOptionError, match="option 'h_power': expected 2 "
                                                        "integers"):
            integrate(cls, osc, (0, 1), [1.0, 0.0], h_power=[0, 0.5])
        with pytest.raises(IntegratorOptionError, match="option 'newton_system': expected "
                                                        "a NewtonSystem"):
            integrate(cls, osc, (0, 1), [1.0, 0.0], newton_system=object())
    else:   # sdirk: index-1 DAEs only, no h_power (so the 'stiff' form refuses it)
        with pytest.raises(IntegratorOptionError, match="option 'h_power': unknown option"):
            integrate(cls, osc, (0, 1), [1.0, 0.0], h_power=[0, 0])


@pytest.mark.parametrize("cls", [Radau5, SDIRK4], ids=lambda c: c.name)
def test_exact_resume_from_a_state_continues_bit_identically(cls):
    """state_fields (Integrator rule 11): a fresh integrator given the state after 20
    steps of Robertson takes exactly the remaining steps of the uninterrupted run."""
    a = cls(rober, 0.0, [1.0, 0.0, 0.0], 1e3, rtol=1e-6, atol=1e-10)
    for _ in range(20):
        a.step()
    state = a.get_state()
    ts = []
    while a.status == "running" and len(ts) < 5000:
        a.step()
        ts.append((a.t, a.y.copy()))
    b = cls(rober, 0.0, [1.0, 0.0, 0.0], 1e3, rtol=1e-6, atol=1e-10)
    b.set_state(state)
    for t, y in ts:
        b.step()
        assert b.t == t and np.array_equal(b.y, y)
    assert b.status == "finished"


# ---------------------------------------------------------------------------------
# sdirk
# ---------------------------------------------------------------------------------
def test_sdirk_tableau_has_order_4_and_an_order_3_embedded_formula():
    """Hairer & Wanner (1996), Table 6.5: the eight order conditions up to order 4 for
    b, those up to order 3 for b̂ (and b̂ is not of order 4), c = row sums, a constant
    diagonal γ = 1/4, stiffly accurate (b = last row: L-stable)."""
    A, c = SDIRK_A, SDIRK_C

    def conditions(b):
        return np.array([b.sum() - 1, b @ c - 1 / 2, b @ c ** 2 - 1 / 3, b @ A @ c - 1 / 6,
                         b @ c ** 3 - 1 / 4, b @ (c * (A @ c)) - 1 / 8,
                         b @ A @ c ** 2 - 1 / 12, b @ A @ A @ c - 1 / 24])

    assert np.abs(conditions(SDIRK_B)).max() < 1e-13          # observed 8.9e-16
    assert np.abs(conditions(SDIRK_B_HAT)[:4]).max() < 1e-13  # observed 8.9e-16
    assert np.abs(conditions(SDIRK_B_HAT)[4:]).max() > 1e-3   # observed 2.1e-2
    assert np.abs(A.sum(axis=1) - c).max() < 1e-13            # observed 8.9e-16
    assert np.all(np.diag(A) == SDIRK_GAMMA) and np.all(np.triu(A, 1) == 0)
    np.testing.assert_array_equal(SDIRK_B, A[4])
    # stability function at infinity: 1 - b^T A^-1 1 = 0 (L-stability; observed 0.0)
    assert abs(1 - SDIRK_B @ np.linalg.solve(A, np.ones(5))) < 1e-12


def test_sdirk_global_error_falls_with_order_4():
    """Slope 4.16 measured over rtol = atol = 1e-3 ... 1e-10 (4.0 from 1e-5 on);
    errors from 2.0e-3 to 6.8e-11."""
    p, n, e = measured_order(SDIRK4, 10.0 ** -np.arange(3, 10.5, 0.5))
    assert abs(p - 4) < 0.3, (p, n, e)


@pytest.fixture(scope="module")
def rober_end():
    return solve_ivp(rober, (0, 1e5), [1.0, 0.0, 0.0], method="Radau", jac=rober_jac,
                     rtol=1e-12, atol=1e-16, t_eval=[1e5]).y[:, -1]


def test_sdirk_robertson_and_its_index1_dae_form(rober_end):
    """At t = 1e5 (a step end), rtol 1e-6, atol 1e-10, against scipy's Radau at 1e-12:
    ODE 6.1e-7 relative in 122 steps, DAE (mass diag(1, 1, 0)) 1.3e-5 in 181 steps;
    the conservation law of the DAE at every step end (observed 2.2e-16)."""
    r = integrate(SDIRK4, rober, (0, 1e5), [1.0, 0.0, 0.0], rtol=1e-6, atol=1e-10,
                  max_steps=5000)
    assert (np.abs(r.y[-1] - rober_end) / rober_end).max() < 6e-5
    assert r.stats.nsteps < 400
    d = integrate(SDIRK4, rober_dae, (0, 1e5), [1.0, 0.0, 0.0], rtol=1e-6, atol=1e-10,
                  mass=[1.0, 1.0, 0.0], jac=rober_dae_jac, max_steps=5000)
    assert (np.abs(d.y[-1] - rober_end) / rober_end).max() < 1.5e-3
    assert np.abs(d.y.sum(axis=1) - 1.0).max() < 1e-13


def test_sdirk_takes_far_fewer_steps_than_an_explicit_method_on_robertson():
    """On [0, 10]: sdirk 50 steps, dopri5 7194 (its stability limit)."""
    kw = dict(rtol=1e-6, atol=1e-10)
    ex = integrate("dopri5", rober, (0, 10), [1.0, 0.0, 0.0], **kw)
    im = integrate(SDIRK4, rober, (0, 10), [1.0, 0.0, 0.0], max_steps=1000, **kw)
    assert 50 * im.stats.nsteps < ex.stats.nsteps, (im.stats.nsteps, ex.stats.nsteps)


def test_the_stiff_formulation_refuses_sdirk():
    """sdirk has no h_power/newton_system (index-3 'stiff' form): a named refusal."""
    with pytest.raises(mbcore.MbcoreError, match="settings.integrator"):
        mbcore.run(mbcore.Model.from_file(EXAMPLES / "slider_crank_dynamic.yaml"),
                   settings={"formulation": "stiff", "integrator": "sdirk", "t_end": 0.1})


def test_ggl_formulation_runs_with_sdirk(slider_crank_reference):
    """The index-2 'ggl' form needs only ``mass``, which sdirk has: free slider-crank
    at rtol 1e-6 against di + dop853 at 1e-10, positions observed 1.0e-5 (803
    steps; stage order 1: below radau's accuracy at equal tolerance)."""
    f, ref = slider_crank_reference
    st = mbcore.run(mbcore.Model.from_file(f), settings={
        "formulation": "ggl", "integrator": "sdirk", "rtol": 1e-6, "atol": 1e-8,
        "t_end": 2.0})
    assert st.stats["integrator"] == "sdirk"
    np.testing.assert_allclose(st["q"], ref["q"], rtol=0, atol=1e-3)
