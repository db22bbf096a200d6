"""Accuracy of the built-in integrators (spec/algorithms.md §2.11-2.12, §10.1).

* convergence orders by step halving (Richardson, §2.12) on the pendulum and on
  Kepler's problem (e = 0.5), for every fixed-order method;
* stability boundaries (§2.11, §10.1 item 5);
* tolerance proportionality of the adaptive methods on problems with a known
  solution, and the growth of the step count with the tolerance (§10.1 item 6);
* dense-output accuracy against the method order;
* variable-step exactness of the Adams coefficients (§10.1 item 7);
* stiff problems (Robertson, Van der Pol μ = 1000, a stiff spring-mass chain):
  agreement with scipy's Radau/BDF and ≥ 20× fewer evaluations than the
  explicit methods for the same achieved accuracy (work–precision comparison).

The numbers measured when these tests were written are quoted in comments and in
docs/integrators.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm
from scipy.optimize import brentq

from mbcore.integrate import Event, integrate
from mbplugins.integrators import (BDF, BS23, DOP853, DOPRI5, RK4, AdamsPECE, Euler, Heun,
                                   ImplicitEuler, Midpoint, Trapezoid)

TOLS = [1e-4, 1e-6, 1e-8, 1e-10]


# ---------------------------------------------------------------------------------
# problems
# ---------------------------------------------------------------------------------
def pendulum(t, y):
    return np.array([y[1], -np.sin(y[0])])


def kepler(t, y):
    x, yy, vx, vy = y
    r3 = (x * x + yy * yy) ** 1.5
    return np.array([vx, vy, -x / r3, -yy / r3])


def kepler_exact(t, e=0.5):
    """a = 1, μ = 1 (period 2π), pericentre at t = 0: Kepler's equation."""
    E = brentq(lambda E: E - e * np.sin(E) - t, t - 1 - e, t + 1 + e, xtol=1e-15)
    Ed = 1 / (1 - e * np.cos(E))
    b = np.sqrt(1 - e * e)
    return np.array([np.cos(E) - e, b * np.sin(E), -np.sin(E) * Ed, b * np.cos(E) * Ed])


def osc(t, y):
    return np.array([y[1], -y[0]])


A_LIN = np.array([[-1.0, 1.0, 0.0], [0.0, -2.0, 1.0], [0.5, 0.0, -3.0]])
Y0_LIN = np.array([1.0, 2.0, -1.0])


def ex122(t, y):
    """004 Ex. 12.2: two masses (4), three springs (100), two dampers (40), d = 3."""
    x1, x2, v1, v2 = y
    a1 = -100 * (x1 - 1) + 100 * ((x2 - x1) - 1) - 40 * v1
    a2 = -100 * ((x2 - x1) - 1) + 100 * ((3 - x2) - 1) - 40 * v2
    return np.array([v1, v2, a1 / 4, a2 / 4])


#: spec §9.1 reference values of Ex. 12.2 (exact solution) at t = 2
EX122_T2 = np.array([0.9999766239, 1.9999734362])

def ex122_exact(t):
    """Ex. 12.2 is affine, y' = A y + b: exact through the augmented exponential."""
    b = ex122(0.0, np.zeros(4))
    M = np.zeros((5, 5))
    M[:4, :4] = np.array([ex122(0.0, e) - b for e in np.eye(4)]).T
    M[:4, 4] = b
    return (expm(t * M) @ np.r_[1.0, 1.9, 0.0, 0.0, 1.0])[:4]


KNOWN = {
    # name: (fun, t_span, y0, exact(t)); as benchmarks/integrators_accuracy.py
    "linexp": (lambda t, y: A_LIN @ y, (0.0, 5.0), Y0_LIN, lambda t: expm(t * A_LIN) @ Y0_LIN),
    "ex121": (lambda t, y: -y * y, (0.0, 5.0), np.array([1.0]),
              lambda t: np.array([1 / (1 + t)])),
    "ex122": (ex122, (0.0, 2.0), np.array([1.0, 1.9, 0.0, 0.0]), ex122_exact),
    "osc": (osc, (0.0, 20 * np.pi), np.array([1.0, 0.0]),           # 10 periods
            lambda t: np.array([np.cos(t), -np.sin(t)])),
    "kepler": (kepler, (0.0, 6 * np.pi), kepler_exact(0.0), kepler_exact),   # 3 orbits
}


def global_error(cls, name, tol, **kw):
    """Largest absolute error over 20 equally spaced outputs (dense output) with
    rtol = atol = tol, and the statistics."""
    fun, span, y0, exact = KNOWN[name]
    t_out = np.linspace(span[0], span[1], 21)[1:]
    res = integrate(cls, fun, span, y0, t_out=t_out, rtol=tol, atol=tol, **kw)
    return np.abs(res.y - np.array([exact(t) for t in t_out])).max(), res.stats


def richardson_slopes(cls, fun, y0, T, ks, **kw):
    """Step-halving sequence h = T/2^k (spec §2.12): D_k = |y_k - y_{k-1}|, slopes
    log2(D_k / D_{k+1}) -> p in the truncation regime."""
    ys = [integrate(cls, fun, (0, T), y0, t_out=[T], step=T / 2 ** k, **kw).y[-1]
          for k in ks]
    D = np.array([np.abs(ys[i + 1] - ys[i]).max() for i in range(len(ys) - 1)])
    return np.log2(D[:-1] / D[1:]), ys


# ---------------------------------------------------------------------------------
# convergence orders (acceptance: nominal order within ± 0.2)
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, ks", [(Euler, range(7, 12)), (ImplicitEuler, range(7, 12)),
                                     (Heun, range(5, 10)), (Midpoint, range(5, 10)),
                                     (Trapezoid, range(5, 10)), (RK4, range(3, 8))],
                         ids=lambda x: getattr(x, "name", ""))
def test_order_by_step_halving_on_the_pendulum(cls, ks):
    # measured: euler 1.009 1.005 1.002; implicit_euler 0.990 0.995 0.998;
    # heun 2.015 2.008 2.004; midpoint 2.006 2.003 2.002; trapezoid 1.999 2.000 2.000;
    # rk4 4.057 4.035 4.019
    slopes, _ = richardson_slopes(cls, pendulum, [1.0, 0.0], 2.0, ks)
    assert np.all(np.abs(slopes - cls.order) < 0.2), slopes


@pytest.mark.parametrize("cls, ks", [(Euler, range(12, 15)), (Heun, range(8, 11)),
                                     (Trapezoid, range(8, 11)), (RK4, range(8, 11))],
                         ids=lambda x: getattr(x, "name", ""))
def test_order_against_the_exact_kepler_orbit(cls, ks):
    """Kepler e = 0.5 over one period: true global errors for h -> h/2."""
    T = 2 * np.pi
    y0 = kepler_exact(0.0)
    errs = np.array([np.abs(integrate(cls, kepler, (0, T), y0, t_out=[T],
                                      step=T / 2 ** k).y[-1] - y0).max() for k in ks])
    slopes = np.log2(errs[:-1] / errs[1:])
    assert np.all(np.abs(slopes - cls.order) < 0.2), (errs, slopes)


@pytest.mark.parametrize("cls, ks", [(BS23, range(4, 8)), (DOPRI5, range(3, 7))],
                         ids=["bs23", "dopri5"])
def test_embedded_pairs_have_their_order_at_a_constant_step(cls, ks):
    """The adaptive RK methods with the controller switched off (huge tolerance,
    max_step = first_step = h): the propagated solution has order 3 / 5."""
    def run(h, T=2.0):
        return integrate(cls, pendulum, (0, T), [1.0, 0.0], t_out=[T], rtol=1e3, atol=1e3,
                         first_step=h, max_step=h)

    ys = [run(2.0 / 2 ** k).y[-1] for k in ks]
    D = np.array([np.abs(ys[i + 1] - ys[i]).max() for i in range(len(ys) - 1)])
    slopes = np.log2(D[:-1] / D[1:])
    assert np.all(np.abs(slopes - cls.order) < 0.2), slopes


def test_dop853_has_order_8_at_a_constant_step():
    """DOP853 with the controller switched off (h = T/2^k): true errors on the
    oscillator over t ∈ [0, 10] fall by 2^8 per halving (measured slopes 8.05,
    8.15, 8.09, 8.05); the Richardson differences (§2.12) on the pendulum too."""
    T = 10.0
    errs = []
    for k in range(2, 7):
        h = T / 2 ** k
        res = integrate(DOP853, osc, (0, T), [1.0, 0.0], t_out=[T], rtol=1e3, atol=1e3,
                        first_step=h, max_step=h)
        assert res.stats.nsteps == 2 ** k
        errs.append(np.abs(res.y[-1] - [np.cos(T), -np.sin(T)]).max())
    slopes = np.log2(np.array(errs[:-1]) / errs[1:])
    assert np.all(np.abs(slopes - 8) < 0.2), (errs, slopes)
    ys = [integrate(DOP853, pendulum, (0, T), [1.0, 0.0], t_out=[T], rtol=1e3, atol=1e3,
                    first_step=T / 2 ** k, max_step=T / 2 ** k).y[-1] for k in range(3, 8)]
    D = np.array([np.abs(ys[i + 1] - ys[i]).max() for i in range(len(ys) - 1)])
    slopes = np.log2(D[:-1] / D[1:])
    assert np.all(np.abs(slopes - 8) < 0.75), slopes          # measured 8.41 8.73 8.00


def test_dop853_dense_output_is_seventh_order_and_exact_at_the_ends():
    """One step from exact data on y' = -y²: the interpolant's error is O(h^8)
    (7th-order continuous extension; measured slopes 7.5-8.1) and it reproduces
    y_old, y exactly.  On a tolerance run the interpolant (order 7) is less accurate
    than the order-8 steps at their ends, but within the tolerance (Kepler, tol 1e-9:
    1.0e-10 at midpoints, 1.4e-11 at the ends)."""
    s = np.linspace(0, 1, 21)
    errs = []
    for h in 0.2 / 2 ** np.arange(3):
        integ = DOP853(lambda t, y: -y * y, 0.0, [1.0], 1.0, first_step=h, max_step=h,
                       rtol=1e3, atol=1e3)
        integ.step()
        sol = integ.dense_output()
        assert sol(integ.t)[0] == pytest.approx(integ.y[0], abs=1e-15)
        assert sol(0.0)[0] == 1.0
        errs.append(np.abs(sol(s * h)[:, 0] - 1 / (1 + s * h)).max())
    slopes = np.log2(np.array(errs[:-1]) / errs[1:])
    assert np.all(slopes > 7.3), (errs, slopes)
    nodes = integrate(DOP853, kepler, (0, 2 * np.pi), kepler_exact(0.0), rtol=1e-9,
                      atol=1e-9)
    mids = 0.5 * (nodes.t[:-1] + nodes.t[1:])
    res = integrate(DOP853, kepler, (0, 2 * np.pi), kepler_exact(0.0), rtol=1e-9,
                    atol=1e-9, t_out=mids)
    e_nodes = np.abs(nodes.y - np.array([kepler_exact(t) for t in nodes.t])).max()
    e_mids = np.abs(res.y - np.array([kepler_exact(t) for t in mids])).max()
    # within the run's tolerance is the claim under test (observed 2.8e-10): truncation
    # error, the same under every BLAS kernel to 3 digits, not rounding
    assert e_mids < 10 * e_nodes and max(e_mids, e_nodes) < 1e-9, (e_mids, e_nodes)


def test_richardson_estimate_matches_the_true_error():
    """Spec §10.1 item 4 and the spec's Ex. 12.1 numbers: RK4 on y' = -y², y(5)."""
    f = KNOWN["ex121"][0]
    hs = [0.1, 0.05, 0.025]
    ys = [integrate(RK4, f, (0, 5), [1.0], step=h, t_out=[5.0]).y[-1, 0] for h in hs]
    errs = np.abs(np.array(ys) - 1 / 6)
    np.testing.assert_allclose(errs, [3.77e-8, 2.39e-9, 1.50e-10], rtol=0.02)
    for i in (1, 2):
        est = abs(ys[i] - ys[i - 1]) / (2 ** 4 - 1)
        assert est == pytest.approx(errs[i], rel=0.1)


def test_ex_12_2_reference_values():
    """Spec §9.1: RK4 on Ex. 12.2 at t = 0.5 with h = 0.02, 0.01, 0.005 (errors
    1.6e-6, 9.6e-8, 5.8e-9, the largest over the state, i.e. a velocity), the
    exact positions at t = 0.5 and t = 2."""
    y0 = [1.0, 1.9, 0.0, 0.0]
    ref = solve_ivp(ex122, (0, 0.5), y0, method="DOP853", rtol=1e-13, atol=1e-14).y[:, -1]
    np.testing.assert_allclose(ref[:2], [0.9807313149, 1.9905389356], atol=1e-10)
    errs = [np.abs(integrate(RK4, ex122, (0, 0.5), y0, step=h).y[-1] - ref).max()
            for h in (0.02, 0.01, 0.005)]
    np.testing.assert_allclose(errs, [1.6e-6, 9.6e-8, 5.8e-9], rtol=0.03)
    res = integrate(DOPRI5, ex122, (0, 2), y0, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res.y[-1, :2], EX122_T2, atol=2e-10)


# ---------------------------------------------------------------------------------
# stability boundaries (§2.11; §10.1 item 5)
# ---------------------------------------------------------------------------------
def growth(cls, z, n=2000, **kw):
    """|y_n| for y' = λy with hλ = z (complex λ as a real 2×2 system)."""
    a, b = z.real, z.imag
    L = np.array([[a, -b], [b, a]])
    res = integrate(cls, lambda t, y: L @ y, (0, n), [1.0, 0.0], step=1.0, t_out=[n],
                    jac=L, **kw)
    return np.linalg.norm(res.y[-1])


@pytest.mark.parametrize("cls, inside, outside", [
    (RK4, -2.78, -2.79), (RK4, 2.82j, 2.84j), (Heun, -1.99, -2.01), (Euler, -1.99, -2.01),
    (Heun, -1 + 1.73j, -1 + 1.74j)], ids=lambda x: getattr(x, "name", str(x)))
def test_explicit_stability_boundaries(cls, inside, outside):
    assert growth(cls, complex(inside)) < 10
    assert growth(cls, complex(outside)) > 1e2


def test_implicit_methods_are_a_stable():
    assert growth(ImplicitEuler, 10j) < 1e-100                    # L-stable: damps
    assert growth(ImplicitEuler, complex(-1e6)) < 1e-100
    assert growth(Trapezoid, 10j, n=1000) == pytest.approx(1.0, rel=1e-6)   # |R| = 1
    # A-stable but not L-stable: R(-1e6) = -(1 - 4e-6), stiff components barely damped
    assert growth(Trapezoid, complex(-1e6), n=1001) == pytest.approx(1.0, rel=1e-2)


# ---------------------------------------------------------------------------------
# tolerance proportionality (acceptance: global error ≤ 10 × tol, 1e-4 … 1e-10)
# ---------------------------------------------------------------------------------
# The controllers work with calibrated internal tolerances (docs/integrators.md,
# "Tolerance calibration"; benchmarks/integrators_accuracy.py prints the sweep).
# measured max err/tol over tol = 1e-4 … 1e-10 (linexp, ex121, ex122, osc 10 periods,
# Kepler e = 0.5 3 orbits):
#   bs23   0.013 0.006 0.037 0.92 6.7 | dopri5 0.002 0.004 0.007 0.13 5.5
#   dop853 0.017 0.002 0.022 0.05 5.7 | abm    0.005 0.001 0.017 0.14 7.4
#   bdf    see test_bdf_global_error below (Kepler is not met)
def check_within_ten_times_tol(cls, name, tols):
    errs = np.array([global_error(cls, name, tol)[0] for tol in tols])
    assert np.all(errs <= 10 * np.array(tols)), (name, errs / tols)
    # proportional: each factor 100 in tol gains at least a factor 10 in the error
    assert np.all(np.diff(np.log10(errs)) < -1.0), (name, errs)
    return errs / tols


@pytest.mark.parametrize("cls", [DOPRI5, DOP853, AdamsPECE], ids=lambda c: c.name)
@pytest.mark.parametrize("name", list(KNOWN))
def test_global_error_within_ten_times_tol(cls, name):
    check_within_ten_times_tol(cls, name, TOLS)


@pytest.mark.parametrize("name", list(KNOWN))
def test_bs23_global_error_within_ten_times_tol(name):
    # 1e-10 costs 2e5-6e5 evaluations on osc/kepler: in the slow test below
    check_within_ten_times_tol(BS23, name, TOLS[:3] if name in ("osc", "kepler") else TOLS)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["osc", "kepler"])
def test_bs23_global_error_within_ten_times_tol_at_1e_10(name):
    err, _ = global_error(BS23, name, 1e-10)
    # 10 x tol is the claim under test (measured 1.8e-11 osc, 1.4e-10 kepler): truncation
    # error, the same under every BLAS kernel to 3 digits, not rounding
    assert err <= 1e-9, err


def test_uncalibrated_controllers_reproduce_the_classic_local_control():
    """calibrate=False is the raw local control of scipy/Hairer: on the 10-period
    oscillator the global error is far above tol (measured bs23 180, dopri5 26,
    bdf 110-1600 × tol) — the reason for the calibration."""
    for cls, lo in ((BS23, 100), (DOPRI5, 15), (BDF, 50)):
        err, _ = global_error(cls, "osc", 1e-6, calibrate=False)
        assert err > lo * 1e-6, (cls.name, err / 1e-6)
    # raw DOP853 behaves like scipy's DOP853 (same tableau, error norm and controller)
    fun, span, y0, _ = KNOWN["kepler"]
    ours = integrate(DOP853, fun, span, y0, rtol=1e-8, atol=1e-8, calibrate=False)
    sp = solve_ivp(fun, span, y0, method="DOP853", rtol=1e-8, atol=1e-8)
    assert abs(ours.stats.nfev - sp.nfev) < 0.05 * sp.nfev, (ours.stats.nfev, sp.nfev)
    # both carry the raw global error of ≈ 1e-6 after 3 orbits (100 × tol)
    np.testing.assert_allclose(ours.y[-1], sp.y[:, -1], atol=2e-6)


@pytest.mark.parametrize("name", list(KNOWN))
def test_bdf_global_error_within_ten_times_tol(name):
    """The calibrated BDF (internal rtol 0.005 · rtol^1.2) meets 10 × tol on all five
    problems, Kepler over 3 orbits included (measured max over 1e-4 … 1e-10:
    linexp 0.003, ex121 0.003, ex122 0.009, osc 0.41, kepler 4.8; with the former
    0.1 · rtol^1.2, Kepler was at 38-88 × tol)."""
    check_within_ten_times_tol(BDF, name, TOLS)


def test_bdf_calibration_is_problem_independent_and_order_five_dominated():
    """The single calibration rests on these measurements: on every non-stiff
    problem with a known solution BDF spends ≥ 85 % of its steps at order 5 (so the
    order-5 exponent 1.2 is the right one; an order-dependent exponent would change
    nothing here), and with one constant the error/tol ratios of the five problems
    stay within 10 (Kepler, the worst, ≈ 10 × the oscillator)."""
    for name in KNOWN:
        _, st = global_error(BDF, name, 1e-8)
        assert st.orders.get(5, 0) >= 0.85 * st.nsteps, (name, st.orders)
    # the error of the raw controller grows like (steps) × tol ∝ tol^(5/6): the
    # calibrated one is proportional to tol
    r = [global_error(BDF, "osc", tol)[0] / tol for tol in (1e-5, 1e-9)]
    raw = [global_error(BDF, "osc", tol, calibrate=False)[0] / tol for tol in (1e-5, 1e-9)]
    assert r[1] / r[0] < 2 and raw[1] / raw[0] > 3, (r, raw)


@pytest.mark.parametrize("cls, q", [(BS23, 2), (DOPRI5, 4)], ids=["bs23", "dopri5"])
def test_step_count_grows_like_tol_to_the_minus_one_over_q_plus_one(cls, q):
    tols = np.array([1e-5, 1e-7, 1e-9, 1e-11])
    n = [integrate(cls, osc, (0, 20), [1.0, 0.0], rtol=t, atol=t).stats.nsteps for t in tols]
    slope = np.polyfit(np.log(tols), np.log(n), 1)[0]
    assert slope == pytest.approx(-1 / (q + 1), abs=0.03)        # measured -0.3335, -0.1997


def test_variable_order_methods_use_high_orders_when_the_tolerance_is_tight():
    _, st = global_error(AdamsPECE, "osc", 1e-11)
    assert max(st.orders) >= 9 and st.norder_changes > 0
    _, st = global_error(BDF, "osc", 1e-9)
    assert max(st.orders) == 5
    # the cap at a moderate tol (at 1e-9 order 2 needs 106532 steps: the calibration is
    # made for order 5, docs/integrators.md)
    st = integrate(BDF, osc, (0, 6), [1.0, 0.0], rtol=1e-6, atol=1e-6, max_order=2).stats
    assert max(st.orders) == 2
    st = integrate(AdamsPECE, osc, (0, 6), [1.0, 0.0], rtol=1e-9, atol=1e-9,
                   max_order=4).stats
    assert max(st.orders) == 4


# ---------------------------------------------------------------------------------
# dense output accuracy vs the method order
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, expected", [(Euler, 2), (Heun, 3), (RK4, 4), (BS23, 4),
                                           (DOPRI5, 5), (Trapezoid, 3)],
                         ids=lambda x: getattr(x, "name", str(x)))
def test_one_step_dense_output_error_order(cls, expected):
    """One step of size h from exact data on y' = -y² (y = 1/(1+t)): the largest
    error of the interpolant inside the step is O(h^expected) — the local error
    order p+1 of the step, or that of the interpolant (cubic Hermite: 4; BS23's
    cubic: 4; DOPRI5's quartic: 5)."""
    s = np.linspace(0, 1, 21)
    errs = []
    hs = 0.05 / 2 ** np.arange(4)
    for h in hs:
        kw = dict(step=h) if not cls.adaptive else dict(first_step=h, max_step=h,
                                                         rtol=1e3, atol=1e3)
        integ = cls(lambda t, y: -y * y, 0.0, [1.0], 1.0, **kw)
        integ.step()
        sol = integ.dense_output()
        errs.append(np.abs(sol(s * h)[:, 0] - 1 / (1 + s * h)).max())
    slopes = np.log2(np.array(errs[:-1]) / errs[1:])
    assert np.all(np.abs(slopes - expected) < 0.3), slopes


@pytest.mark.parametrize("cls", [BS23, DOPRI5, AdamsPECE, BDF, RK4, Heun, Trapezoid],
                         ids=lambda c: c.name)
def test_dense_output_error_matches_the_step_error(cls):
    """Spec §10.1 item 6: at midpoints of the steps the error is of the same size
    as at the step ends (measured ratios 0.95-1.10)."""
    kw = dict(rtol=1e-8, atol=1e-8) if cls.adaptive else dict(step=0.05)
    nodes = integrate(cls, osc, (0, 2), [1.0, 0.0], **kw)
    mids = 0.5 * (nodes.t[:-1] + nodes.t[1:])
    res = integrate(cls, osc, (0, 2), [1.0, 0.0], t_out=mids, **kw)
    exact = lambda t: np.stack([np.cos(t), -np.sin(t)], axis=-1)     # noqa: E731
    e_nodes = np.abs(nodes.y - exact(nodes.t)).max()
    e_mids = np.abs(res.y - exact(mids)).max()
    assert e_mids < 1.5 * e_nodes


# ---------------------------------------------------------------------------------
# variable-step exactness of the Adams coefficients (§10.1 item 7)
# ---------------------------------------------------------------------------------
def test_adams_is_exact_for_polynomials_on_a_variable_grid():
    """y' = p(t) with deg p = 5: once the order reaches 5 the AM corrector of order
    ≥ 6 is exact whatever the step sizes (Shampine–Gordon's variable
    coefficients), so the error left by the start-up phase stays constant while
    the step doubles every step."""
    rng = np.random.default_rng(12345)
    c = rng.normal(size=6)
    P = np.polyint(c)
    integ = AdamsPECE(lambda t, y: np.array([np.polyval(c, t)]), 0.0, [0.0], 50.0,
                      rtol=1e-6, atol=1e-6, first_step=float(rng.uniform(1e-4, 1e-3)),
                      max_order=8)
    errs, hs = [], []
    while integ.status == "running":
        integ.step()
        if integ.order >= 5:
            errs.append(integ.y[0] - np.polyval(P, integ.t))
            hs.append(integ.step_size)
    assert len(errs) >= 4 and max(hs) / min(hs) >= 4          # the step really varies
    scale = np.abs(np.polyval(P, 50.0))
    assert np.ptp(errs) < 1e-13 * scale


# ---------------------------------------------------------------------------------
# stiff problems
# ---------------------------------------------------------------------------------
def rober(t, y):
    y1, y2, y3 = y
    return np.array([-0.04 * y1 + 1e4 * y2 * y3,
                     0.04 * y1 - 1e4 * y2 * y3 - 3e7 * y2 * y2,
                     3e7 * y2 * y2])


def rober_jac(t, y):
    y1, y2, y3 = y
    return np.array([[-0.04, 1e4 * y3, 1e4 * y2],
                     [0.04, -1e4 * y3 - 6e7 * y2, -1e4 * y2],
                     [0.0, 6e7 * y2, 0.0]])


MU = 1000.0


def vdp(t, y):
    return np.array([y[1], MU * (1 - y[0] ** 2) * y[1] - y[0]])


def vdp_jac(t, y):
    return np.array([[0.0, 1.0], [-2 * MU * y[0] * y[1] - 1, MU * (1 - y[0] ** 2)]])


sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from integrators_accuracy import chain_matrix  # noqa: E402  (one definition)

A_CHAIN = chain_matrix()
Y0_CHAIN = np.r_[np.linspace(0.01, 0.1, 10), np.zeros(10)]


def scaled_error(y, ref, rtol, atol):
    return np.max(np.abs(y - ref) / (np.asarray(atol) + rtol * np.abs(ref)))


@pytest.mark.parametrize("use_jac", [True, False], ids=["jac", "finite-differences"])
def test_robertson_agrees_with_radau(use_jac):
    t_out = np.r_[0.0, np.logspace(-5, 5, 11)]
    rtol, atol = 1e-6, np.array([1e-8, 1e-12, 1e-8])
    ref = solve_ivp(rober, (0, 1e5), [1.0, 0, 0], method="Radau", jac=rober_jac,
                    rtol=1e-10, atol=atol * 1e-4, t_eval=t_out).y.T
    # like-for-like with scipy's BDF: the raw local control (calibrate=False)
    res = integrate(BDF, rober, (0, 1e5), [1.0, 0, 0], t_out=t_out, rtol=rtol, atol=atol,
                    jac=rober_jac if use_jac else None, calibrate=False)
    # measured: 5.2 (max over the outputs; scipy's BDF 4.5), 968 evaluations with jac
    # (scipy's BDF 1034)
    assert scaled_error(res.y, ref, rtol, atol) < 10
    np.testing.assert_allclose(res.y.sum(axis=1), 1.0, atol=1e-8)     # mass conservation
    assert res.stats.nfev < 1300 and res.stats.nsteps < 500
    # the calibrated default: far more accurate (measured 0.006), 2.7× the cost (2599)
    cal = integrate(BDF, rober, (0, 1e5), [1.0, 0, 0], t_out=t_out, rtol=rtol, atol=atol,
                    jac=rober_jac if use_jac else None)
    assert scaled_error(cal.y, ref, rtol, atol) < 0.5 * scaled_error(res.y, ref, rtol, atol)
    assert cal.stats.nfev < 3 * res.stats.nfev
    # tighter: the global error grows with the number of steps, for scipy's BDF too
    # (measured 16.7 vs 14.8 at rtol = 1e-9)
    rtol, atol = 1e-9, atol * 1e-3
    res = integrate(BDF, rober, (0, 1e5), [1.0, 0, 0], t_out=t_out, rtol=rtol, atol=atol,
                    jac=rober_jac if use_jac else None, calibrate=False)
    sp = solve_ivp(rober, (0, 1e5), [1.0, 0, 0], method="BDF", jac=rober_jac, rtol=rtol,
                   atol=atol, t_eval=t_out)
    e, e_sp = scaled_error(res.y, ref, rtol, atol), scaled_error(sp.y.T, ref, rtol, atol)
    assert e < 25 and e < 1.5 * e_sp, (e, e_sp)


def test_van_der_pol_mu_1000_agrees_with_radau_and_scipy_bdf():
    """Over two relaxation periods: the jump times (events y1 = 0) agree with
    Radau to a few tens of rtol (measured 2e-5 relative at rtol = 1e-6), and the
    errors on the output grid are no larger than those of scipy's BDF at the same
    tolerance (both are large right at the jumps, where a phase error δt gives an
    O(1) difference, and 10-30 × tol on the slow branches)."""
    t_out = np.linspace(0, 3000, 61)
    rtol, atol = 1e-6, 1e-8
    g = lambda t, y: y[0]                                            # noqa: E731
    ref = solve_ivp(vdp, (0, 3000), [2.0, 0.0], method="Radau", jac=vdp_jac, rtol=1e-10,
                    atol=1e-12, t_eval=t_out, events=g)
    sp = solve_ivp(vdp, (0, 3000), [2.0, 0.0], method="BDF", jac=vdp_jac, rtol=rtol,
                   atol=atol, t_eval=t_out, events=g)
    res = integrate(BDF, vdp, (0, 3000), [2.0, 0.0], jac=vdp_jac, rtol=rtol, atol=atol,
                    t_out=t_out, events=[Event(g, name="zero")], calibrate=False)
    t_ref = ref.t_events[0]
    assert len(res.t_events[0]) == len(t_ref) == 3
    rel = np.abs(res.t_events[0] - t_ref) / t_ref
    rel_sp = np.abs(sp.t_events[0] - t_ref) / t_ref
    assert np.all(rel < 30 * rtol), rel                      # measured ≈ 2e-5
    assert rel.max() < 2 * rel_sp.max()
    err = np.abs(res.y - ref.y.T) / (atol + rtol * np.abs(ref.y.T))
    err_sp = np.abs(sp.y.T - ref.y.T) / (atol + rtol * np.abs(ref.y.T))
    assert np.median(err) < 2 * np.median(err_sp)
    slow = t_out < 700                                       # first slow branch
    assert err[slow].max() < 1.5 * err_sp[slow].max()        # measured 16.5 vs 25
    assert res.stats.nfev < 1.2 * sp.nfev                    # measured 5095 vs 5107


def test_stiff_chain_agrees_with_the_matrix_exponential():
    rtol, atol = 1e-6, 1e-9
    t_out = np.linspace(0, 5, 6)
    exact = np.array([expm(A_CHAIN * t) @ Y0_CHAIN for t in t_out])
    res = integrate(BDF, lambda t, y: A_CHAIN @ y, (0, 5), Y0_CHAIN, jac=A_CHAIN,
                    rtol=rtol, atol=atol, t_out=t_out, calibrate=False)
    sp = solve_ivp(lambda t, y: A_CHAIN @ y, (0, 5), Y0_CHAIN, jac=A_CHAIN, method="BDF",
                   rtol=rtol, atol=atol, t_eval=t_out)
    # the soft modes oscillate undamped: errors accumulate (measured 12.6; scipy 15.0)
    e, e_sp = scaled_error(res.y, exact, rtol, atol), scaled_error(sp.y.T, exact, rtol, atol)
    assert e < 20 and e < 1.5 * e_sp, (e, e_sp)
    assert res.stats.njev == 0                      # constant Jacobian never re-evaluated
    assert res.stats.nlu < res.stats.nsteps / 4     # LU reused across steps
    cal = integrate(BDF, lambda t, y: A_CHAIN @ y, (0, 5), Y0_CHAIN, jac=A_CHAIN,
                    rtol=rtol, atol=atol, t_out=t_out)      # calibrated default
    # measured 0.0097 × tol (1639 evaluations; raw 12.6 with 612)
    assert scaled_error(cal.y, exact, rtol, atol) < 0.1, scaled_error(cal.y, exact, rtol, atol)


STIFF_CASES = {
    # name: fun, jac, span for the comparison, y0, tolerances
    "robertson": (rober, rober_jac, (0.0, 10.0), [1.0, 0.0, 0.0],
                  dict(rtol=1e-6, atol=[1e-8, 1e-12, 1e-8])),
    "vdp1000": (vdp, vdp_jac, (0.0, 5.0), [2.0, 0.0], dict(rtol=1e-6, atol=1e-8)),
    "chain": (lambda t, y: A_CHAIN @ y, A_CHAIN, (0.0, 2.0), Y0_CHAIN,
              dict(rtol=1e-6, atol=1e-9)),
}


#: work–precision sweeps: requested rtol (atol keeps the case's atol/rtol) and the
#: accuracy targets at which the costs are compared
WP_RTOLS = {"bdf": [1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8],
            "explicit": [1e-3, 1e-4, 1e-5, 1e-6, 1e-7]}
WP_TARGETS = [1e-5, 1e-6, 1e-7]


def stiff_reference(name):
    """Reference at 10 equally spaced outputs: a tight Radau solution (the chain is
    linear: its matrix exponential)."""
    fun, jac, span, y0, tol = STIFF_CASES[name]
    ratio = np.asarray(tol["atol"]) / tol["rtol"]
    t_out = np.linspace(span[0], span[1], 11)[1:]
    if name == "chain":
        return t_out, np.array([expm(A_CHAIN * t) @ Y0_CHAIN for t in t_out]), ratio
    ref = solve_ivp(fun, span, y0, method="Radau", jac=jac, rtol=1e-12, atol=ratio * 1e-12,
                    t_eval=t_out).y.T
    return t_out, ref, ratio


def work_precision(cls, name, rtols, ref_data, **kw):
    """(achieved error, nfev) for each requested rtol.  The error is the largest
    relative error over the outputs, with the case's atol/rtol as the floor:
    ``max |y - ref| / (atol/rtol + |ref|)`` — one accuracy measure for every
    method and tolerance."""
    fun, jac, span, y0, tol = STIFF_CASES[name]
    t_out, ref, ratio = ref_data
    pts = []
    for rtol in rtols:
        res = integrate(cls, fun, span, y0, t_out=t_out, rtol=rtol, atol=ratio * rtol, **kw)
        pts.append((float(np.max(np.abs(res.y - ref) / (ratio + np.abs(ref)))),
                    res.stats.nfev))
    return pts


def cost_at(pts, target):
    """Evaluations needed for an achieved error ``target``: log-log interpolation of
    nfev against the error along the sweep; a method more accurate than the target
    at its loosest tolerance costs its cheapest run (an explicit method on a stiff
    problem: the stability limit, independent of the tolerance); inf if no run
    reaches the target."""
    errs = np.array([e for e, _ in pts])
    nfev = np.array([n for _, n in pts], dtype=float)
    if errs.min() > target:
        return np.inf
    if errs.max() <= target:
        return nfev.min()
    order = np.argsort(errs)
    le, ln = np.log(errs[order]), np.log(nfev[order])
    cost = float(np.exp(np.interp(np.log(target), le, ln)))
    # never cheaper than a run that reached the target
    return min(cost, nfev[errs <= target].min())


@pytest.mark.parametrize("name", list(STIFF_CASES))
def test_bdf_needs_twenty_times_fewer_evaluations_than_bs23_for_the_same_accuracy(name):
    """Work–precision (issue #5: "≥ 20× fewer evaluations ... for the same
    accuracy"): BDF's evaluations (finite-difference Jacobians included, no ``jac``)
    against bs23's — the cheapest explicit method on these problems — at equal
    achieved error 1e-6 (relative to a tight Radau solution).  Measured: robertson
    ≈ 360 vs 28400 (79×), vdp1000 ≈ 150 vs 18000 (123×), chain ≈ 800 vs 24400 (30×).
    All explicit methods and targets: the slow test below."""
    ref = stiff_reference(name)
    bdf = work_precision(BDF, name, WP_RTOLS["bdf"][:5], ref)
    bs23 = work_precision(BS23, name, [1e-3, 1e-5], ref)
    c_bdf, c_bs23 = cost_at(bdf, 1e-6), cost_at(bs23, 1e-6)
    assert c_bs23 >= 20 * c_bdf, (bdf, bs23)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(STIFF_CASES))
def test_work_precision_bdf_against_every_explicit_method(name):
    """Every explicit adaptive method (dopri5, dop853, bs23, abm), accuracy targets
    1e-5, 1e-6, 1e-7: BDF needs ≥ 20× fewer evaluations (finite-difference
    Jacobians counted).  The explicit costs are set by stability (flat in the
    tolerance: robertson 28000-67000, vdp1000 18000-32000, chain 24000-43000);
    BDF's grow with the accuracy (measured at 1e-7: robertson ≈ 515, vdp1000 ≈ 154,
    chain ≈ 1160: smallest ratios 58 (bs23), 118 (bs23), 22 (bs23; abm 23)).  At
    1e-8 the chain falls to 13× against bs23/abm (docs/integrators.md).  Both sides
    use their calibrated defaults; the raw controllers give the same picture (one
    point below)."""
    ref = stiff_reference(name)
    bdf = work_precision(BDF, name, WP_RTOLS["bdf"], ref)
    ratios = {}
    for cls in (DOPRI5, DOP853, BS23, AdamsPECE):
        pts = work_precision(cls, name, WP_RTOLS["explicit"], ref)
        for target in WP_TARGETS:
            ratios[cls.name, target] = cost_at(pts, target) / cost_at(bdf, target)
    assert min(ratios.values()) >= 20, ratios
    # raw controllers (calibrate=False) at the case's tolerance: same conclusion
    fun, jac, span, y0, tol = STIFF_CASES[name]
    t_out, r, ratio = ref
    raw = {}
    for cls in (BDF, BS23):
        res = integrate(cls, fun, span, y0, t_out=t_out, calibrate=False, **tol)
        assert np.max(np.abs(res.y - r) / (ratio + np.abs(r))) < 10 * tol["rtol"], cls.name
        raw[cls.name] = res.stats.nfev
    assert raw["bs23"] >= 20 * raw["bdf"], raw


def test_cost_at_interpolates_the_work_precision_curve():
    pts = [(1e-4, 100), (1e-6, 400), (1e-8, 1600)]
    assert cost_at(pts, 1e-5) == pytest.approx(200)
    assert cost_at(pts, 1e-3) == 100            # every run more accurate: the cheapest
    assert cost_at(pts, 1e-9) == np.inf         # unreachable
    assert cost_at(pts, 1e-6) == pytest.approx(400)
