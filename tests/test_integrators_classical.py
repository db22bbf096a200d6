"""The classical fixed-step methods of mbplugins.integrators.classical: rk3, the rk2
family, ab (orders 1–4), abm4, taylor2 and verlet.

Each method's convergence order is measured by step halving on problems with a known
solution (Nikravesh (1988), §12.2; TAM 674 (2003), lectures of 3 and 10 March):
the harmonic oscillator y' = [y2, −y1] and the nonlinear, time-dependent scalar
equation y' = −2 t y² (y = 1/(1 + t²)).  Slopes log2(e(h)/e(h/2)) of five step sizes
must lie within 0.2 of the nominal order, from errors far above rounding.  Verlet
also keeps the energy error of a pendulum bounded over a long run.  Observed values
are noted at each tolerance.
"""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import ModelError
from mbcore.integrate import IntegratorOptionError, integrate, richardson
from mbcore.plugins import registry
from mbplugins.integrators.classical import (AB_COEFFICIENTS, ABM4, AM4_COEFFICIENTS, RK3,
                                             AdamsBashforth, RK2Family, Taylor2, Verlet,
                                             rk2_tableau)


def osc(t, y):
    return np.array([y[1], -y[0]])


def osc_exact(t):
    return np.array([np.cos(t), -np.sin(t)])


def riccati(t, y):
    return np.array([-2.0 * t * y[0] ** 2])


def riccati_exact(t):
    return np.array([1.0 / (1.0 + t * t)])


PROBLEMS = {"osc": (osc, osc_exact, [1.0, 0.0]),
            "riccati": (riccati, riccati_exact, [1.0])}
T_END = 2.0
#: largest step of each order's five halvings: where the slopes are asymptotic on the
#: nonlinear problem (from 0.1: rk2 with a = 3/4 2.19, ab3 2.48, ab4 3.71) and the
#: smallest error stays far above rounding (≥ 2e-11)
FIRST_STEP = {1: 0.05, 2: 0.05, 3: 0.025, 4: 0.05}
STEPS = 0.1 / 2.0 ** np.arange(5)


#: a case's own largest step: AM4's error constant (19/720) is 13x smaller than AB4's,
#: so from 0.05 its smallest error (4.6e-12 on osc) falls below the rounding floor
#: checked below; from 0.08 the slopes are 3.85–4.00
FIRST_STEP_OF = {("am", 4): 0.08}


def steps_for(p: int, name: str = "") -> np.ndarray:
    return FIRST_STEP_OF.get((name, p), FIRST_STEP[p]) / 2.0 ** np.arange(5)


def errors(method, problem, steps=STEPS, **opts):
    """The global error: the largest over all step ends (the end value alone can sit
    near a sign change of the error and give erratic slopes)."""
    f, exact, y0 = PROBLEMS[problem]
    out = []
    for h in steps:
        res = integrate(method, f, (0.0, T_END), y0, step=h, **opts)
        out.append(max(np.abs(y - exact(t)).max() for t, y in zip(res.t, res.y)))
    return np.array(out)


def slopes(err):
    return np.log2(err[:-1] / err[1:])


#: (method, options, nominal order)
CASES = [("rk3", {}, 3),
         ("rk2", {"a": 0.5}, 2), ("rk2", {"a": 0.75}, 2), ("rk2", {"a": 1.0}, 2),
         ("ab", {"order": 1}, 1), ("ab", {"order": 2}, 2), ("ab", {"order": 3}, 3),
         ("ab", {"order": 4}, 4),
         ("abm4", {}, 4), ("taylor2", {}, 2), ("verlet", {}, 2),
         ("verlet", {"form": "dkd"}, 2),
         ("genalpha", {}, 2), ("genalpha", {"rho_inf": 0.0}, 2), ("hht", {}, 2),
         ("am", {"order": 1}, 1), ("am", {"order": 2}, 2), ("am", {"order": 3}, 3),
         ("am", {"order": 4}, 4)]


def _id(case):
    name, opts, _ = case
    return name + "".join(f"-{k}={v if isinstance(v, str) else format(v, '.3g')}"
                          for k, v in opts.items())


@pytest.mark.parametrize("case, problem", [(c, p) for c in CASES for p in PROBLEMS
                                           if c[0] != "verlet" or p == "osc"],
                         ids=lambda x: _id(x) if isinstance(x, tuple) else x)
def test_measured_order_by_step_halving(case, problem):
    """Slopes within 0.2 of the nominal order.  Observed (osc / riccati, the four
    slopes' range): rk3 3.00–3.01 / 3.00–3.02; rk2 2.00–2.01 (every a) / 2.00–2.09
    (a = 3/4 the widest); ab1 1.00–1.03 / 1.00–1.03; ab2 1.99–2.00 / 1.99–2.00; ab3
    2.99–3.00 / 2.90–2.99; ab4 3.97–4.00 / 3.91–3.99; abm4 3.99–4.00 / 3.97–3.99;
    taylor2 2.00–2.01 / 2.00–2.02; verlet 2.000 (both forms); am1 0.97–1.00 / 0.97–1.00; am2
    2.00 / 2.00; am3 2.99–3.00 / 2.93–2.99; am4 3.94–3.99 / 3.85–4.00.  Worst margin:
    am4 on riccati, 0.15 from nominal (tolerance 0.2)."""
    name, opts, p = case            # (verlet needs y = [q; qd]: pendulum tests below)
    err = errors(name, problem, steps=steps_for(p, name), **opts)
    # errors far above rounding (smallest observed: ab4 on osc 6e-11)
    assert err.min() > 1e-11, err
    s = slopes(err)
    assert np.all(np.abs(s - p) < 0.2), (name, opts, problem, s)


#: fixed-step methods whose order tests/test_integrators_accuracy.py measures
#: (test_order_by_step_halving_on_the_pendulum); rkmk4: tests/test_liegroup.py
ORDER_TESTED_ELSEWHERE = {"euler", "heun", "midpoint", "rk4", "implicit_euler", "trapezoid",
                          "rkmk4"}


def test_every_fixed_step_method_has_a_measured_order_test():
    """Each fixed-step integrator in the registry has an order case here or in
    tests/test_integrators_accuracy.py (benchmarks/integrator_orders.py measures the
    same set for docs/integrators.md, "Measured orders")."""
    reg = registry()
    fixed = {n for n in reg.names("integrator") if not reg.get("integrator", n).adaptive}
    missing = fixed - {c[0] for c in CASES} - ORDER_TESTED_ELSEWHERE
    assert not missing, missing


def test_rk2_family_members_are_midpoint_heun_and_ralston():
    """Nikravesh (1988), Eqs. 12.15-12.16: a = 1/2 (Heun) and a = 1 (midpoint) take
    exactly the steps of the built-in heun and midpoint; a = 3/4 is Ralston's tableau
    (b = 1/4, 3/4, node 2/3); the parameter changes the result on a nonlinear problem
    (on a linear one every member has the same stability polynomial)."""
    for a, other in ((0.5, "heun"), (1.0, "midpoint")):
        mine = integrate("rk2", riccati, (0, 2), [1.0], step=0.05, a=a)
        ref = integrate(other, riccati, (0, 2), [1.0], step=0.05)
        np.testing.assert_array_equal(mine.y, ref.y)
    A, B, C = rk2_tableau(0.75)
    np.testing.assert_array_equal(B, [0.25, 0.75])     # 1 - 0.75 and 0.75: exact in binary
    assert A[1, 0] == C[1] == 2 / 3
    ends = {a: errors("rk2", "riccati", steps=[0.05], a=a)[0] for a in (0.5, 0.75, 1.0)}
    # observed 1.1e-4 (a = 1/2), 1.7e-4 (3/4), 2.3e-4 (1): distinct
    assert len({f"{e:.3e}" for e in ends.values()}) == 3, ends


@pytest.mark.parametrize("bad", [0, 0.0, True, "half", float("nan"), float("inf")])
def test_rk2_parameter_outside_the_family_is_an_error_naming_it(bad):
    with pytest.raises(IntegratorOptionError, match=r"integrator 'rk2': option 'a': must "):
        integrate("rk2", osc, (0, 1), [1.0, 0.0], step=0.1, a=bad)


def test_ab_order_out_of_range_is_an_error_naming_it():
    for bad in (0, 5, 2.0):
        with pytest.raises(IntegratorOptionError, match=r"option 'order': must be an "
                                                        r"integer in \[1, 4\]"):
            integrate("ab", osc, (0, 1), [1.0, 0.0], step=0.1, order=bad)


def test_coefficients_are_exact_for_polynomials():
    """AB_k integrates polynomials of degree k − 1 exactly (Σβ_j (−j)^i = 1/(i+1));
    AM4 those of degree 3 (nodes 1, 0, −1, −2).  The coefficients are rounded
    rationals summed in floating point: observed 2.2e-16 at most; bound 1e-13 (450x)."""
    for k, beta in AB_COEFFICIENTS.items():
        for i in range(k):
            assert sum(b * (-j) ** i for j, b in enumerate(beta)) == \
                pytest.approx(1 / (i + 1), abs=1e-13), (k, i)
    for i in range(4):
        nodes = np.array([1.0, 0.0, -1.0, -2.0])
        assert AM4_COEFFICIENTS @ nodes ** i == pytest.approx(1 / (i + 1), abs=1e-13)


@pytest.mark.parametrize("name, opts, nfev", [
    ("rk3", {}, 3 * 100 + 1),
    ("rk2", {"a": 0.5}, 2 * 100 + 1),
    ("ab", {"order": 1}, 1 + 100),
    ("ab", {"order": 4}, 1 + 3 * 4 + 97),          # 3 RK4 starter steps
    ("abm4", {}, 1 + 2 * 4 + 98 * 2),              # 2 RK4 starter steps, then PECE
    ("taylor2", {}, 1 + 2 * 100),
    ("verlet", {}, 1 + 100),
    ("verlet", {"form": "dkd"}, 1 + 100)])
def test_evaluations_per_step(name, opts, nfev):
    res = integrate(name, osc, (0, 1), [1.0, 0.0], step=0.01, **opts)
    assert res.stats.nsteps == 100 and res.stats.nfev == nfev
    assert res.stats.orders == {opts.get("order", registry().get("integrator", name).order):
                                100}


@pytest.mark.parametrize("name, opts", [("ab", {"order": 3}), ("abm4", {})])
def test_multistep_shortened_last_step_and_restart(name, opts):
    """A grid that does not divide the interval ends with a shortened RK4 step; the
    result keeps the method's accuracy.  restart() starts again with RK4."""
    res = integrate(name, osc, (0, 1.005), [1.0, 0.0], step=0.01, **opts)
    aligned = integrate(name, osc, (0, 1.0), [1.0, 0.0], step=0.01, **opts)
    assert res.t_final == 1.005 and res.stats.nsteps == aligned.stats.nsteps + 1
    # the shortened RK4 step adds nothing of note to the method's own error
    # (observed ratio 1.00 for ab3, 3.1e-7; abm4 1.00)
    e = np.abs(res.y_final - osc_exact(1.005)).max()
    e_aligned = np.abs(aligned.y_final - osc_exact(1.0)).max()
    assert e < 1.2 * e_aligned, (e, e_aligned)
    integ = registry().get("integrator", name)(osc, 0.0, [1.0, 0.0], 1.0, step=0.01,
                                               **opts)
    for _ in range(10):
        integ.step()
    nfev = integ.stats.nfev
    integ.restart()
    assert integ._hist == (integ._f,)
    integ.step()
    assert integ.stats.nfev - nfev == 1 + 4          # f at the restart + an RK4 step


def test_taylor2_second_derivative_by_the_directional_difference():
    """y'' = ∂f/∂t + (∂f/∂y) f of y' = −2 t y² is −2y² + 8 t² y³; the difference
    quotient with δ ≈ √eps relative to the arguments is accurate to ≈ √eps (observed
    relative error 4e-9 at t = 0.7)."""
    t, y = 0.7, np.array([1.0 / (1.0 + 0.49)])
    f = riccati(t, y)
    d = Taylor2.difference_step(t, y, f)
    assert 1e-9 < d < 1e-7
    ypp = (riccati(t + d, y + d * f) - f) / d
    exact = -2 * y ** 2 + 8 * t ** 2 * y ** 3
    assert abs(ypp[0] - exact[0]) < 1e-7 * abs(exact[0])


def pendulum(t, y, g=9.81):
    return np.array([y[1], -g * np.sin(y[0])])


def pendulum_energy(y, g=9.81):
    return 0.5 * y[:, 1] ** 2 - g * np.cos(y[:, 0])


@pytest.mark.parametrize("form", ["kdk", "dkd"])
def test_verlet_keeps_the_pendulum_energy_bounded(form):
    """Simple pendulum (unit length, φ0 = 1 rad, period ≈ 2.1 s) over ≈ 480 periods
    with h = 0.05 (≈ 42 steps per period): the energy error of Störmer–Verlet
    (Hairer, Lubich & Wanner (2006), §IX.8), in either form,
    oscillates but does not drift: the largest error over the last tenth of the run
    equals that over the first tenth (observed ratio 1.000 for both; bound 1.1).  RK4
    at the same step, for contrast, drifts (ratio 10, its error growing linearly)."""
    res = integrate("verlet", pendulum, (0.0, 1000.0), [1.0, 0.0], step=0.05, form=form)
    e = np.abs(pendulum_energy(res.y) - pendulum_energy(res.y[:1]))
    k = e.size // 10
    first, last = e[:k].max(), e[-k:].max()
    # observed first 0.0255 (kdk), 0.0235 (dkd)
    assert first < 0.03 and last < 1.1 * first, (first, last)
    rk4 = integrate("rk4", pendulum, (0.0, 1000.0), [1.0, 0.0], step=0.05)
    e = np.abs(pendulum_energy(rk4.y) - pendulum_energy(rk4.y[:1]))
    assert e[-k:].max() > 5 * e[:k].max()                           # observed 10.0


@pytest.mark.parametrize("form", ["kdk", "dkd"])
def test_verlet_is_second_order_on_the_pendulum_and_with_velocity_forces(form):
    """Against dop853 at 1e-13: the pendulum (position force) and a damped pendulum
    (velocity-dependent force: the velocity-guess variant) give slopes 2 (observed
    kdk 2.00–2.01 and 2.01–2.04; dkd 2.00–2.02 and 2.01–2.09)."""
    def damped(t, y):
        return np.array([y[1], -9.81 * np.sin(y[0]) - 0.5 * y[1]])

    for f in (pendulum, damped):
        ref = integrate("dop853", f, (0, 3.0), [1.0, 0.0], rtol=1e-13, atol=1e-13)
        err = np.array([np.abs(integrate("verlet", f, (0, 3.0), [1.0, 0.0], step=h,
                                         form=form).y_final - ref.y_final).max()
                        for h in STEPS])
        assert err.min() > 1e-9
        s = slopes(err)
        assert np.all(np.abs(s - 2) < 0.2), s


@pytest.mark.parametrize("bad", ["KDK", "leapfrog", 1, None.__class__])
def test_verlet_form_outside_the_two_is_an_error_naming_it(bad):
    with pytest.raises(IntegratorOptionError, match=r"integrator 'verlet': option 'form': "
                                                    r"must be 'kdk' .* or 'dkd'"):
        integrate("verlet", osc, (0, 1), [1.0, 0.0], step=0.1, form=bad)


def test_verlet_forms_are_the_same_method_shifted_by_half_a_step():
    """For a = a(q) the two forms are Störmer–Verlet on staggered grids
    (Hairer, Lubich & Wanner (2006), §I.1.4): dkd's velocity update uses a(q_n+½) as
    kdk's uses a(q_n); they differ from each other by O(h²) (observed 2.5e-5 = h²/4
    at h = 0.01 on [0, 2] for the oscillator; bound 2.5e-3, 100x) but not by zero."""
    a = integrate("verlet", osc, (0, 2), [1.0, 0.0], step=0.01)
    b = integrate("verlet", osc, (0, 2), [1.0, 0.0], step=0.01, form="dkd")
    d = np.abs(a.y - b.y).max()
    assert 0 < d < 2.5e-3, d


def test_verlet_state_layout():
    """y = [q; qd; w]: positions = m; w (a work integral, here ∫ qd² dt) integrated by
    the trapezoidal rule; errors for a layout that is not [q; qd]."""
    def osc_work(t, y):
        return np.array([y[1], -y[0], y[1] ** 2])

    e = []
    for h in (0.002, 0.001):
        res = integrate("verlet", osc_work, (0, np.pi), [1.0, 0.0, 0.0], step=h)
        assert np.abs(res.y_final[:2] - osc_exact(np.pi)).max() < 2e-6
        e.append(abs(res.y_final[2] - np.pi / 2))          # ∫_0^π sin² = π/2
    # second order in w too (its rate at the velocity guess): observed 4.5e-6, 1.1e-6
    assert e[1] < 2e-6 and abs(np.log2(e[0] / e[1]) - 2) < 0.2, e
    with pytest.raises(IntegratorOptionError, match=r"option 'positions': .* got 2"):
        integrate("verlet", osc_work, (0, 1), [1.0, 0.0, 0.0], step=0.1, positions=2)
    with pytest.raises(IntegratorOptionError, match=r"option 'fun': verlet needs y = "
                                                    r"\[q; qd; \.\.\.\] with q' = qd"):
        integrate("verlet", lambda t, y: np.array([-y[1], y[0]]), (0, 1), [1.0, 1.0],
                  step=0.1)


@pytest.mark.parametrize("name, kind", [("rk2", "fixed"), ("ab", "fixedgrid"),
                                        ("abm4", "fixedgrid"), ("taylor2", "fixedgrid"),
                                        ("verlet", "fixedgrid"), ("rk3", "fixed")])
def test_methods_declare_their_compiled_loop(name, kind):
    assert registry().get("integrator", name).compiled_loop_kind() == kind


def test_dense_output_at_step_midpoints():
    """Cubic Hermite dense output: at step midpoints the error is of the size of the
    step-end error (observed ratios 0.6–1.3; rk3 with h = 0.02; verlet dkd, the
    constant-acceleration path of its step, 0.56; am 0.98)."""
    t_out = np.linspace(0, 2, 201)[1::2]            # mid-steps of h = 0.02
    for name, opts in (("rk3", {}), ("ab", {}), ("abm4", {}), ("taylor2", {}),
                       ("verlet", {}), ("verlet", {"form": "dkd"}), ("am", {})):
        ends = integrate(name, osc, (0, 2), [1.0, 0.0], step=0.02, **opts)
        mids = integrate(name, osc, (0, 2), [1.0, 0.0], step=0.02, t_out=t_out, **opts)
        e_end = np.abs(ends.y - osc_exact(ends.t).T).max()
        e_mid = np.abs(mids.y - osc_exact(mids.t).T).max()
        assert e_mid < 3 * e_end + 1e-12, (name, e_mid, e_end)


# ----------------------------------------------------------------------------------
# end to end: the dynamic analysis of a model file
# ----------------------------------------------------------------------------------
SETTINGS = {"t_end": 1.0, "output_step": 0.05}


@pytest.fixture(scope="module")
def platform_reference():
    from conftest import EXAMPLES
    return mbcore.run(Model.from_file(EXAMPLES / "platform.yaml"), settings={
        **SETTINGS, "integrator": "dop853", "rtol": 1e-12, "atol": 1e-14})


@pytest.mark.parametrize("name, extra, tol", [
    ("rk3", {"step": 5e-4}, 2e-8),                 # observed 4.9e-9
    ("verlet", {"step": 5e-4}, 2e-5),              # observed 8.0e-6
    ("rk2", {"step": 5e-4, "integrator_options": {"a": 1.0}}, 1e-5),    # 3.1e-6
    ("ab", {"step": 5e-4, "integrator_options": {"order": 3}}, 5e-7),   # 1.2e-7
    ("abm4", {"step": 5e-4}, 1e-9),                                       # 1.5e-10
    ("taylor2", {"step": 5e-4}, 1e-5),                                    # 3.6e-6
    ("am", {"step": 5e-4}, 1e-8),                                         # 5.4e-11
    ("am", {"step": 5e-4, "integrator_options": {"order": 3}}, 2e-6),     # 1.4e-8
    ("verlet", {"step": 5e-4, "integrator_options": {"form": "dkd"}}, 1e-3)])  # 9.2e-6
def test_platform_against_dop853(examples, platform_reference, name, extra, tol):
    """The horizontal platform (Nikravesh (1988), §10.3.2; spring-damper, cs
    formulation, y = [q; qd; W]) over 1 s."""
    res = mbcore.run(Model.from_file(examples / "platform.yaml"),
                     settings={**SETTINGS, "integrator": name, **extra})
    err = np.abs(res["q"] - platform_reference["q"]).max()
    assert err < tol, err
    if name == "rk3":            # a tableau on FixedStepRK: the compiled loop, same steps
        py = mbcore.run(Model.from_file(examples / "platform.yaml"),
                        settings={**SETTINGS, "integrator": name, **extra, "loop": "python"})
        assert res.stats["loop"] == "compiled" and py.stats["loop"] == "python"
        np.testing.assert_allclose(res["q"], py["q"], rtol=0, atol=1e-12)


def test_platform_verlet_order(examples, platform_reference):
    """Step halving in the dynamic analysis (velocity-dependent forces: damper,
    Baumgarte terms): error ratio 4 (observed 4.01)."""
    e = [np.abs(mbcore.run(Model.from_file(examples / "platform.yaml"),
                           settings={**SETTINGS, "integrator": "verlet", "step": h})["q"]
                - platform_reference["q"]).max() for h in (1e-3, 5e-4)]
    assert abs(np.log2(e[0] / e[1]) - 2) < 0.2, e


@pytest.mark.parametrize("options, path, msg", [
    ({"a": 0}, "a", r"integrator 'rk2': must be a finite non-zero number"),
    ({"order": 2}, "order", r"not an option of integrator 'rk2'"),
    ({"step": 0.1}, "step", r"give it as settings\.step")])
def test_integrator_options_setting_errors_name_the_key(examples, options, path, msg):
    with pytest.raises(ModelError, match=rf"settings\.integrator_options\.{path}: {msg}"):
        mbcore.run(Model.from_file(examples / "platform.yaml"),
                   settings={**SETTINGS, "integrator": "rk2", "integrator_options": options})


def test_classes_are_registered():
    for cls in (RK3, RK2Family, AdamsBashforth, ABM4, Taylor2, Verlet):
        assert registry().get("integrator", cls.name) is cls


# ----------------------------------------------------------------------------------
# global error estimate by step halving
# ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, opts, problem, rel", [
    ("rk3", {}, "riccati", 0.05),            # observed 0.013
    ("rk3", {}, "osc", 0.05),                # 0.020
    ("ab", {"order": 2}, "riccati", 0.05),   # 0.020 (the integrator's own 'order')
    ("ab", {"order": 3}, "osc", 0.1),        # 0.039
    ("abm4", {}, "riccati", 0.15),           # 0.058
    ("verlet", {}, "osc", 0.05),             # 0.000
    ("euler", {}, "osc", 0.1)])              # 0.026
def test_richardson_estimate_matches_the_true_error(name, opts, problem, rel):
    """``richardson`` (h = 0.02 and 0.01 over [0, 2]): the estimated global error
    ``(y_h/2 − y_h)/(2^p − 1)`` agrees with the true error ``y − y_h/2`` to ``rel``
    of its largest value, and the extrapolated value is at least 10× more accurate."""
    f, exact, y0 = PROBLEMS[problem]
    est = richardson(name, f, (0, 2), y0, 0.02, t_out=np.linspace(0, 2, 11), **opts)
    assert est.order == opts.get("order", registry().get("integrator", name).order)
    true = np.array([exact(t) for t in est.t]) - est.fine.y
    assert np.abs(est.error - true).max() < rel * np.abs(true).max()
    better = np.array([exact(t) for t in est.t]) - est.extrapolated
    assert np.abs(better).max() < 0.1 * np.abs(true).max()


def test_richardson_needs_a_fixed_step_method():
    with pytest.raises(IntegratorOptionError, match="fixed-step"):
        richardson("dopri5", osc, (0, 1), [1.0, 0.0], 0.1, rtol=1e-6)
    with pytest.raises(IntegratorOptionError, match="option 'p'"):
        richardson("rk4", osc, (0, 1), [1.0, 0.0], 0.1, p=0)
