"""Generalized-α methods (genalpha, hht, genalpha_var): parameters, spectral radius at
infinity, second order in the second-order and index-3 forms, constraints held at
every step, the multibody stiff DAE against a reference, variable step, errors.

Sources: Chung & Hulbert (1993); Hilber, Hughes & Taylor (1977); Arnold & Brüls
(2007); Jansen, Whiting & Hulbert (2000)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import ModelError
from mbcore.integrate import integrate
from mbcore.integrate.errors import IntegratorOptionError
from mbplugins.integrators.genalpha import alpha_parameters
from loop_checks import spy_loop  # noqa: E402

G = 9.81


def test_parameters_of_the_family():
    """Chung & Hulbert (1993), Eqs. 25-27: rho = 1 the trapezoidal rule, rho = 0
    asymptotic annihilation; HHT at rho = 1/2 is alpha = -1/3; the first-order form
    at rho = 1 is the trapezoidal rule too."""
    assert alpha_parameters(1.0) == (0.5, 0.5, 0.5, 0.25)
    assert alpha_parameters(0.0) == (-1.0, 0.0, 1.5, 1.0)
    a_m, a_f, g, b = alpha_parameters(0.5, "hht")
    # one or two roundings of numbers below 1 (observed 1.1e-16; bound 1e-13, 900x)
    assert (a_m, g, b) == pytest.approx((0.0, 5 / 6, 4 / 9), abs=1e-13)
    assert a_f == pytest.approx(1 / 3, abs=1e-13)
    assert alpha_parameters(1.0, order=1) == (0.5, 0.5, 0.5, 0.0)
    # second-order accuracy needs gamma = 1/2 + alpha_f - alpha_m in every member
    for rho in (0.0, 0.3, 0.8, 1.0):
        for kind in ("genalpha", "hht"):
            for order in (1, 2):
                a_m, a_f, g, _ = alpha_parameters(rho, kind, order)
                # (observed 1.1e-16; bound 1e-13, 900x)
                assert g == pytest.approx(0.5 + (a_f - a_m) * (1 if order == 2 else -1),
                                          abs=1e-13)


def _decay(name, rho, second, omega=1e4, h=1.0, steps=400):
    """Amplitude ratio per step of an undamped oscillator with omega h = 1e4 (the
    high-frequency limit), measured by the integrator itself over the last 100 steps
    (the double root -rho at infinity of the second-order form makes the amplitude
    decay like n rho^n: the ratio is rho (1 + 1/n), within 0.3 % here)."""
    def osc(t, y):
        return np.array([y[1], -omega ** 2 * y[0]])
    kw = {"positions": 1} if second else {}
    res = integrate(name, osc, (0.0, steps * h), [1.0, 0.0], step=h, rho_inf=rho,
                    t_out=np.arange(steps + 1) * h, **kw)
    amp = np.hypot(res.y[:, 0], res.y[:, 1] / omega)
    with np.errstate(invalid="ignore", divide="ignore"):   # rho = 0: 0 / 0
        return (amp[-1] / amp[-101]) ** 0.01, amp


@pytest.mark.parametrize("second", [True, False], ids=["second-order", "first-order"])
@pytest.mark.parametrize("name, rho", [("genalpha", 0.8), ("genalpha", 0.5),
                                       ("genalpha", 0.2), ("hht", 0.7), ("hht", 0.5)])
def test_spectral_radius_at_infinity_is_rho_inf(name, rho, second):
    """The numerical damping of the highest frequencies is the requested rho_inf per
    step (Chung & Hulbert (1993), Fig. 1): the amplitude ratio at omega h = 1e4
    equals rho (observed within 2.5e-3; bound 1e-2)."""
    ratio, _ = _decay(name, rho, second)
    assert ratio == pytest.approx(rho, abs=1e-2)


def test_rho_zero_annihilates_the_high_frequencies():
    """rho_inf = 0: the stiff oscillation is gone after a few steps (observed
    amplitude 5e-85 after 400 steps; bound 1e-4), while rho_inf = 1 (the trapezoidal
    rule) keeps the amplitude of a resolved one (omega h = 0.1, 200 steps: observed 1
    to 6.6e-12, the Newton tolerance 1e-10 per step; bound 1e-8)."""
    for second in (True, False):
        _, amp = _decay("genalpha", 0.0, second)
        assert amp[-1] < 1e-4
        _, amp = _decay("genalpha", 1.0, second, omega=10.0, h=0.01, steps=200)
        assert np.abs(amp - 1.0).max() < 1e-8


def _pendulum(t, y):
    return np.array([y[1], -G * np.sin(y[0])])


@pytest.fixture(scope="module")
def pendulum_reference():
    return integrate("dop853", _pendulum, (0.0, 2.0), [1.0, 0.0], rtol=1e-13,
                     atol=1e-13, t_out=[2.0]).y[-1]


@pytest.mark.parametrize("name, rho", [("genalpha", 0.8), ("genalpha", 0.0), ("hht", 0.6)])
def test_second_order_form_converges_with_order_two(name, rho, pendulum_reference):
    """Pendulum q'' = -g sin q (positions = 1), h halved three times: slopes within 0.2
    of 2 (observed 1.98-2.00)."""
    err = []
    for h in (0.02, 0.01, 0.005, 0.0025):
        res = integrate(name, _pendulum, (0.0, 2.0), [1.0, 0.0], step=h, positions=1,
                        rho_inf=rho, t_out=[2.0])
        err.append(np.abs(res.y[-1] - pendulum_reference).max())
    slopes = np.log2(np.array(err[:-1]) / err[1:])
    assert np.all(np.abs(slopes - 2.0) < 0.2), slopes


# -- the index-3 pendulum in Cartesian coordinates -----------------------------------------
L, MASS = 1.3, 2.0


def _dae(t, y):
    """y = [x, y, u, v, lam, w]: M u' = x lam, M v' = -M g + y lam (reaction
    +Phi_q^T lam), Phi = (x^2 + y^2 - L^2)/2, w' = the kinetic energy (a quadrature)."""
    x, yy, u, v, lam = y[:5]
    return np.array([u, v, x * lam, -MASS * G + yy * lam, 0.5 * (x * x + yy * yy - L * L),
                     0.5 * MASS * (u * u + v * v)])


def _dae_jac(t, y):
    x, yy, u, v, lam = y[:5]
    J = np.zeros((6, 6))
    J[0, 2] = J[1, 3] = 1.0
    J[2, 0] = J[3, 1] = lam
    J[2, 4], J[3, 4] = x, yy
    J[4, 0], J[4, 1] = x, yy
    J[5, 2], J[5, 3] = MASS * u, MASS * v
    return J


def _dae_exact(theta0, T):
    """(x, y, u, v, lam) at T from the angle ODE (dop853 at 1e-13)."""
    res = integrate("dop853", lambda t, z: np.array([z[1], -G / L * np.sin(z[0])]),
                    (0.0, T), [theta0, 0.0], rtol=1e-13, atol=1e-13, t_out=[T])
    th, om = res.y[-1]
    x, y = L * np.sin(th), -L * np.cos(th)
    u, v = L * om * np.cos(th), L * om * np.sin(th)
    lam = (-MASS * (u * u + v * v) + MASS * G * y) / (L * L)
    return np.array([x, y, u, v, lam])


def _dae_run(name, h, T, theta0=1.0, **kw):
    x0, y0 = L * np.sin(theta0), -L * np.cos(theta0)
    lam0 = MASS * G * y0 / (L * L)
    return integrate(name, _dae, (0.0, T), [x0, y0, 0.0, 0.0, lam0, 0.0], step=h,
                     jac=_dae_jac, positions=2, multipliers=1,
                     mass=[1, 1, MASS, MASS, 0, 1], t_out=np.linspace(0, T, 11), **kw)


@pytest.mark.parametrize("name", ["genalpha", "hht"])
def test_index3_pendulum_positions_velocities_and_multiplier_of_order_two(name):
    """Arnold & Brüls (2007), Theorem 2: q, v and lam converge with order 2 (after the
    start-up transient, which the consistent start keeps small).  Observed slopes
    1.97-2.03 for q, v and lam; bound 0.2."""
    T = 1.5
    exact = _dae_exact(1.0, T)
    errs = []
    for h in (0.01, 0.005, 0.0025, 0.00125):
        y = _dae_run(name, h, T).y[-1]
        errs.append([np.abs(y[:2] - exact[:2]).max(), np.abs(y[2:4] - exact[2:4]).max(),
                     abs(y[4] - exact[4])])
    slopes = np.log2(np.array(errs[:-1]) / np.array(errs[1:]))
    assert np.all(np.abs(slopes - 2.0) < 0.2), slopes


def test_index3_constraint_holds_at_every_step_and_work_is_integrated():
    """Phi = 0 at every step end to the Newton tolerance (observed 4e-16 with
    newton_atol 1e-13; bound 1e-12); the quadrature w = int T dt is the trapezoidal
    rule over the method's own step ends (observed 2e-15 relative; bound 1e-12)."""
    seen = []
    T = 1.0
    th = 1.0
    res = integrate("genalpha", _dae, (0.0, T), [L * np.sin(th), -L * np.cos(th), 0, 0,
                                               -MASS * G * np.cos(th) / L, 0],
                    step=0.005, jac=_dae_jac, positions=2, multipliers=1,
                    mass=[1, 1, MASS, MASS, 0, 1], t_out=[T],
                    on_step=lambda integ: seen.append(integ.y.copy()))
    phi = max(abs(0.5 * (y[0] ** 2 + y[1] ** 2 - L * L)) for y in seen)
    assert len(seen) == 200 and phi < 1e-12
    kinetic = np.array([0.0] + [0.5 * MASS * (y[2] ** 2 + y[3] ** 2) for y in seen])
    w = 0.005 * (kinetic.sum() - 0.5 * kinetic[-1])
    assert res.y[-1, 5] == pytest.approx(w, rel=1e-12)


def test_iteration_matrix_scaling_keeps_newton_counts_flat_as_h_falls():
    """The scaled iteration matrix (constraint rows divided by beta' h^2): Newton needs
    the same few iterations per step at every step size (observed 2.0-2.3 per step from
    h = 1e-2 to 1e-4; bound 4)."""
    for h in (1e-2, 1e-3, 1e-4):
        st = _dae_run("genalpha", h, 0.05 if h < 1e-3 else 0.5).stats
        assert st.nnewton_iter / st.nsteps < 4, (h, st)


# -- the multibody DAE ---------------------------------------------------------------------
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


@pytest.fixture(scope="module")
def slider_crank():
    m = mbcore.Model.from_file(EXAMPLES / "slider_crank_dynamic.yaml")
    ref = mbcore.run(m, settings={"formulation": "di", "integrator": "dop853", "rtol": 1e-12,
                                  "atol": 1e-12, "t_end": 0.5})
    return m, ref["q"][-1], ref["lam"][-1]


@pytest.mark.parametrize("form, name", [("stiff", "genalpha"), ("stiff", "hht"),
                                        ("di", "genalpha")])
def test_slider_crank_converges_to_the_reference_with_order_two(slider_crank, form, name):
    """The slider-crank (Nikravesh (1988), §13.6) with formulation stiff (the index-3
    equations, Arnold & Brüls (2007)) or di (the ODE, Chung & Hulbert (1993)): q and
    lam errors against dop853 at 1e-12 fall 4x per halving (observed slopes 1.96-2.1;
    bound 0.3), and at h = 5e-4 q is within 1e-4 (observed 4e-6)."""
    m, q_ref, lam_ref = slider_crank
    errs = []
    for h in (1e-3, 5e-4):
        r = mbcore.run(m, settings={"formulation": form, "integrator": name, "step": h,
                                    "t_end": 0.5})
        errs.append((np.abs(r["q"][-1] - q_ref).max(),
                     np.abs(r["lam"][-1] - lam_ref).max() / np.abs(lam_ref).max()))
    slopes = np.log2(np.array(errs[0]) / np.array(errs[1]))
    assert np.all(np.abs(slopes - 2.0) < 0.3), (errs, slopes)
    assert errs[1][0] < 1e-4


def test_variable_step_follows_the_tolerance(pendulum_reference):
    """genalpha_var (calibrated): the global error at t = 2 stays within 20x rtol and
    falls with it (observed 1.5-6x rtol for rtol 1e-3 to 1e-7, second-order and
    first-order forms; 1e-7 takes 15 s on the Python driver, so 1e-3 to 1e-5 here)."""
    for kw in ({"positions": 1}, {}):
        prev = np.inf
        for rtol in (1e-3, 1e-4, 1e-5):
            res = integrate("genalpha_var", _pendulum, (0.0, 2.0), [1.0, 0.0], rtol=rtol,
                            atol=rtol, t_out=[2.0], **kw)
            err = np.abs(res.y[-1] - pendulum_reference).max()
            assert err < 20 * rtol and err < prev, (kw, rtol, err)
            prev = err


def test_variable_step_runs_a_model_with_di(slider_crank):
    """genalpha_var with formulation di: q within 20x rtol of the reference (observed
    1.9e-6 at rtol 1e-6)."""
    m, q_ref, _ = slider_crank
    r = mbcore.run(m, settings={"formulation": "di", "integrator": "genalpha_var",
                                "rtol": 1e-6, "atol": 1e-6, "t_end": 0.5})
    assert np.abs(r["q"][-1] - q_ref).max() < 2e-5


# -- errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, kw, option", [
    ("hht", {"rho_inf": 0.4}, "rho_inf"),
    ("genalpha", {"rho_inf": 1.5}, "rho_inf"),
    ("genalpha", {"positions": 2}, "positions"),
    ("genalpha", {"multipliers": 1}, "multipliers"),
    ("genalpha", {"mass": [1.0, 2.0]}, "mass"),
    ("genalpha", {"positions": 1, "mass": [1.0, 0.0]}, "mass"),
])
def test_bad_options_are_named(name, kw, option):
    with pytest.raises(IntegratorOptionError) as e:
        integrate(name, _pendulum, (0.0, 1.0), [1.0, 0.0], step=0.1, **kw)
    assert e.value.option == option


def test_second_order_form_needs_q_prime_equal_v():
    with pytest.raises(IntegratorOptionError, match="q' = v"):
        integrate("genalpha", lambda t, y: np.array([2 * y[1], -y[0]]), (0.0, 1.0),
                  [1.0, 1.0], step=0.1, positions=1)


@pytest.mark.parametrize("form, name, msg", [
    ("ggl", "genalpha", "formulation stiff only"),
    ("ggl", "genalpha_var", "formulation stiff only"),
])
def test_model_settings_errors_name_the_key(slider_crank, form, name, msg):
    m, _, _ = slider_crank
    with pytest.raises(ModelError, match=msg) as e:
        mbcore.run(m, settings={"formulation": form, "integrator": name, "t_end": 0.01,
                                "step": 1e-3} if name != "genalpha_var" else
                   {"formulation": form, "integrator": name, "t_end": 0.01})
    assert "settings.integrator" in str(e.value)


@pytest.mark.parametrize("name", ["genalpha", "hht"])
def test_compiled_loop_takes_the_python_drivers_steps_bit_for_bit(slider_crank, name):
    """di with genalpha/hht runs on the compiled loop (ext/_step_genalpha.pxi); it takes
    the Python driver's steps with the same arithmetic: q, qd and the evaluation counts
    are identical (bitwise: the same formulas, one process)."""
    m, _, _ = slider_crank
    runs = [mbcore.run(m, settings={"formulation": "di", "integrator": name, "step": 1e-3,
                                    "t_end": 0.3, "output_step": 0.0125, "loop": loop})
            for loop in ("auto", "python")]
    assert [r.stats["loop"] for r in runs] == ["compiled", "python"]
    for ch in ("q", "qd", "qdd"):
        assert np.array_equal(np.asarray(runs[0][ch]), np.asarray(runs[1][ch])), ch
    assert runs[0].stats["integrator_nfev"] == runs[1].stats["integrator_nfev"]


# -- genalpha_var on the compiled loop ----------------------------------------------------
def _var_runs(model, **settings):
    """The same genalpha_var run on the compiled loop (``loop: auto``) and on the
    Python driver."""
    base = {"integrator": "genalpha_var", **settings}
    return [mbcore.run(model, settings={**base, "loop": loop}) for loop in ("auto", "python")]


def _assert_bitwise(runs):
    """q, qd, qdd (outputs between step ends: the dense output), the integrator channel
    (step size, order, steps, rejections, evaluations before every output) and every
    integrator counter identical: the same formulas in one process."""
    a, b = runs
    assert [r.stats["loop"] for r in runs] == ["compiled", "python"]
    assert np.array_equal(np.asarray(a.t), np.asarray(b.t))
    for ch in ("q", "qd", "qdd", "integrator"):
        assert np.array_equal(np.asarray(a[ch]), np.asarray(b[ch])), ch
    counters = {k: v for k, v in b.stats.items() if k.startswith("integrator_n")}
    assert {k: a.stats[k] for k in counters} == counters


@pytest.mark.parametrize("form, rtol", [("di", 1e-6), ("di", 1e-3), ("cs", 1e-5)])
def test_variable_step_compiled_loop_takes_the_python_drivers_steps(slider_crank, form,
                                                                   rtol):
    """genalpha_var with di/cs runs on the compiled loop (ext/_step_genalpha.pxi,
    ``run_genalpha_var``): the same accepted and rejected steps, step sizes, Newton
    iterations, Jacobians, LU factorisations and evaluations as the Python driver,
    bit for bit; the outputs (every 2.5 ms, between the step ends) come from the
    dense output; a first step of 0.1 s is rejected by the error test."""
    m, _, _ = slider_crank
    runs = _var_runs(m, formulation=form, rtol=rtol, atol=rtol, t_end=0.5,
                     output_step=0.0025, integrator_options={"first_step": 0.1})
    _assert_bitwise(runs)
    st = runs[0].stats
    assert st["integrator_nerror_test_failures"] > 0 and st["integrator_nlu"] > 0
    if rtol == 1e-3:        # steps of ~10 ms: several outputs inside one step
        steps = np.asarray(runs[0]["integrator"])[:, 2]
        assert np.any(steps[1:] == steps[:-1])


@pytest.mark.parametrize("name, form", [("fourbar_dap.yaml", "di"),
                                        ("spatial_slider_crank_dynamic.yaml", "cs"),
                                        ("spatial_double_pendulum.yaml", "di")])
def test_variable_step_compiled_loop_planar_and_spatial_models(name, form):
    """The four-bar and two spatial models (Euler parameters; the spatial slider-crank
    with forward-difference Jacobians) at rtol 1e-3, where the controller rejects
    steps (1-3 observed): bitwise the Python driver's run.  (Until t = 0.4: the
    spatial slider-crank's drift gate projects at t = 0.45, and the runs restarted
    from the C and the Python projection differ by 1e-11.)"""
    m = mbcore.Model.from_file(EXAMPLES / name)
    runs = _var_runs(m, analysis="dynamic", formulation=form, rtol=1e-3, atol=1e-3,
                     t_end=0.4, output_step=0.01)
    _assert_bitwise(runs)
    assert runs[0].stats["integrator_nerror_test_failures"] > 0


def test_variable_step_compiled_loop_newton_failures_and_max_step(slider_crank):
    """Two Newton iterations allowed: the iteration fails (78 times observed), the
    step is quartered and the Jacobian refreshed, on both loops alike; max_step
    bounds every step."""
    m, _, _ = slider_crank
    runs = _var_runs(m, formulation="di", rtol=1e-4, atol=1e-4, t_end=0.5,
                     output_step=0.01, max_step=0.004,
                     integrator_options={"newton_maxiter": 2, "jac_max_age": 50})
    _assert_bitwise(runs)
    assert runs[0].stats["integrator_nnewton_failures"] > 0
    # the step taken is (t + h) - t: observed 0.004 + 3.6e-18; bound 1e-12 relative
    assert np.asarray(runs[0]["integrator"])[1:, 0].max() <= 0.004 * (1 + 1e-12)


def test_variable_step_compiled_loop_step_budget(slider_crank):
    """``max_steps`` between outputs: both loops raise the budget error at the same
    time."""
    from mbcore.integrate.errors import StepBudgetError
    m, _, _ = slider_crank
    errs = []
    for loop in ("auto", "python"):
        with pytest.raises(StepBudgetError) as e:
            mbcore.run(m, settings={"formulation": "di", "integrator": "genalpha_var",
                                    "rtol": 1e-7, "atol": 1e-7, "t_end": 0.5,
                                    "output_step": 0.25, "max_steps": 20, "loop": loop})
        errs.append(e.value)
    assert errs[0].t == errs[1].t


def test_variable_step_subclass_that_changes_the_step_keeps_the_python_driver():
    from mbplugins.integrators.genalpha import VariableGeneralizedAlpha

    class Other(VariableGeneralizedAlpha):
        def _error(self, h, y_new, acc):
            return 0.5 * super()._error(h, y_new, acc)

    assert VariableGeneralizedAlpha.compiled_loop_kind() == "genalpha"
    assert Other.compiled_loop_kind() is None


def test_variable_step_compiled_loop_restarts_after_a_drift_projection(slider_crank):
    """di's drift gate projects once in 2 s at rtol 1e-6 on both loops, and each
    restarts genalpha_var there (``replace_end``: ``hprev`` forgotten, a new first
    step).  The projection itself is computed in C on the compiled loop and in NumPy
    on the Python driver (the formulation's two paths), whose last bits differ:
    identical until the projection (bitwise, drift: warn, 2 s, 6620 steps), close
    after it (observed 2.2e-14 on q; bound 1e-11, 450x)."""
    m, _, _ = slider_crank
    base = {"formulation": "di", "rtol": 1e-6, "atol": 1e-6, "t_end": 2.0,
            "output_step": 0.01}
    a, b = _var_runs(m, **base)
    assert a.stats["drift_projections"] == b.stats["drift_projections"] == 1
    assert a.stats["integrator_nsteps"] == b.stats["integrator_nsteps"]
    q, q_py = np.asarray(a["q"]), np.asarray(b["q"])
    differ = np.flatnonzero(np.any(q != q_py, axis=1))
    assert differ.size == 0 or a.t[differ[0]] > 1.0     # (projected at t = 1.58)
    assert np.abs(q - q_py).max() < 1e-11
    _assert_bitwise(_var_runs(m, **base, formulation_options={"drift": "warn"}))


def test_compiled_fixed_step_retry_evaluates_the_jacobian_at_the_predictor(slider_crank):
    """genalpha with two Newton iterations: a stale Jacobian fails (15 times observed)
    and the step is retried with a fresh one evaluated at the predictor, as
    ``GeneralizedAlpha._attempt`` does; both loops bitwise alike."""
    m, _, _ = slider_crank
    runs = [mbcore.run(m, settings={"formulation": "di", "integrator": "genalpha",
                                    "step": 2e-3, "t_end": 0.5, "output_step": 0.01,
                                    "integrator_options": {"newton_maxiter": 2},
                                    "loop": loop}) for loop in ("auto", "python")]
    _assert_bitwise(runs)
    assert runs[0].stats["integrator_nnewton_failures"] > 0


def test_variable_step_compiled_loop_stop_condition_and_failing_evaluation(monkeypatch):
    """stop_when is checked in C at every step end; the step where it is met is redone
    by the Python driver, which locates the crossing (it restarts the method there:
    stop times within 1e-9 of the Python loop's, observed 1.4e-12, 700x).  A torque sqrt(0.3 - t) that cannot be evaluated
    after t = 0.3: ``run_genalpha_var`` returns code 2 at the last accepted step
    before 0.3 and the Python driver raises the named error from there."""
    from mbcore.elements.functions import FunctionDomainError
    codes = spy_loop(monkeypatch, "run_genalpha_var")
    m = mbcore.Model.from_file(EXAMPLES / "fourbar_dap.yaml")
    name = m.bodies[0].name
    st = {"analysis": "dynamic", "formulation": "di", "t_end": 3.0, "output_step": 0.05,
          "rtol": 1e-6, "atol": 1e-8, "integrator": "genalpha_var",
          "stop_when": f"{name}.phi < 0.5"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and codes and codes[-1][0] == 4
    ta = [e for e in a.events if e[1] == "stop"][0][0]
    tb = [e for e in b.events if e[1] == "stop"][0][0]
    assert 0.0 < ta < 3.0 and abs(ta - tb) < 1e-9
    m = mbcore.Model.from_file(EXAMPLES / "fourbar_dap.yaml")
    m.add_force("torque", "motor", body="crank", torque="sqrt(0.3 - t)")
    st = {"formulation": "di", "t_end": 1.0, "output_step": 0.05, "rtol": 1e-6,
          "atol": 1e-8, "integrator": "genalpha_var"}
    with pytest.raises(FunctionDomainError, match="sqrt") as exc:
        mbcore.run(m, settings=st)
    code, t_handover = codes[-1]
    assert code == 2 and 0.25 < t_handover < 0.3 < exc.value.t < 0.31


# ------------------------------------------------- IFToMM A05: stiff springs, 3D bodies
def _governor():
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from accuracy_problems import governor_model
    return governor_model()


def test_difference_floor_perturbs_zero_coordinates_like_their_block():
    from mbcore.integrate.common import difference_floor
    y = np.array([0.0, 0.5, -2.0, 0.0, 3.0, 0.0, 7.0])
    fl = difference_floor(y, ((0, 3), (3, 5), (5, 7)))
    np.testing.assert_array_equal(fl, [2e-3, 2e-3, 2e-3, 3e-3, 3e-3, 7e-3, 7e-3])
    np.testing.assert_array_equal(difference_floor(np.zeros(3), ((0, 3),)), 1e-8)


@pytest.mark.parametrize("loop", ["auto", "python"])
def test_governor_di_newton_with_a_slider_at_its_origin(loop):
    """The governor's slider has x = 0: forward differences of sqrt(eps) 1e-8 there
    were round-off and Newton stalled (failure at t = 0.01 with h = 2e-3); with the
    block floors Newton converges at every step, on both loops."""
    r = mbcore.run(_governor(), analysis="dynamic", settings={
        "t_end": 0.1, "output_step": 0.01, "formulation": "di", "integrator": "genalpha",
        "step": 2e-3, "loop": loop})
    assert r.status == "finished" and r.t[-1] == pytest.approx(0.1)
    assert r.stats["integrator_nnewton_failures"] == 0


def test_governor_stiff_newton_accepts_its_round_off():
    """The index-3 form of the governor: the residual of the equations of motion
    stalls at 1e-11 to 2e-10 of the accelerations (stiff forces cancelling); with
    the default newton_rtol 1e-10 that stall is accepted (within 100x), not a
    failure (t = 0.138 at h = 1e-3 before)."""
    r = mbcore.run(_governor(), analysis="dynamic", settings={
        "t_end": 0.2, "output_step": 0.01, "formulation": "stiff", "integrator": "genalpha",
        "step": 1e-3})
    assert r.status == "finished" and r.t[-1] == pytest.approx(0.2)
    assert np.max(r["violation/position"]) < 1e-10


def test_dae_jacobian_without_the_work_row_changes_nothing(monkeypatch):
    """generalized-α never reads the work row of the DAE Jacobian (the work integral
    is a quadrature): leaving it out gives the same run bit for bit."""
    from mbplugins.integrators.genalpha import GeneralizedAlpha
    s = {"t_end": 0.03, "output_step": 0.01, "formulation": "stiff",
         "integrator": "genalpha", "step": 1e-3}
    a = mbcore.run(_governor(), analysis="dynamic", settings=s)
    monkeypatch.setattr(GeneralizedAlpha, "DAE_JACOBIAN_WORK_ROW", True)
    b = mbcore.run(_governor(), analysis="dynamic", settings=s)
    for ch in ("q", "qd", "lam", "energy"):
        assert np.array_equal(a[ch], b[ch]), ch
    assert a.stats["integrator_njev"] == b.stats["integrator_njev"]


@pytest.mark.parametrize("loop", ["auto", "python"])
def test_a_fixed_step_keeps_its_lu_where_t_over_h_is_large(loop):
    """The fixed grid's steps t_n+1 - t_n differ in their last bits once t/h is large
    (here up to 2e4: ~4e-12 of h); the LU of the first step is kept (a step within
    1e-6 of the factored one), so one factorisation serves the whole run on either
    loop (before: 7746 of 20000 steps refactored on the stiff chain)."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from models import stiff_chain
    st = {"formulation": "di", "integrator": "genalpha", "t_end": 5.0, "output_step": 5.0,
          "step": 2.5e-4, "loop": loop, "integrator_options": {"rho_inf": 0.8}}
    r = mbcore.run(stiff_chain(10), analysis="dynamic", settings=st)
    assert r.stats["loop"] == ("compiled" if loop == "auto" else "python")
    assert r.stats["integrator_nsteps"] == 20000
    assert r.stats["integrator_njev"] == 1 and r.stats["integrator_nlu"] == 1
