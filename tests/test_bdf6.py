"""BDF of order 6 in ``bdf`` (``max_order: 6``; Hairer & Wanner (1996), §V.2:
BDF6 is zero-stable, A(α)-stable with α ≈ 17.8° only; BDF7 is not zero-stable).
bdf has no fixed-order mode, so the order is checked through the formula's exactness
on polynomials and the order histogram of an adaptive run."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.integrate import integrate
from mbplugins.integrators.bdf import (BDF_ERROR_CONST, BDF_GAMMA, DEFAULT_MAX_ORDER,
                                       MAX_ORDER, rescale_matrix)


def osc(t, y):
    return np.array([y[1], -y[0]])


def _rho(k: int) -> np.ndarray:
    """ρ(ζ) = Σ_{j=1..k} (1/j) ζ^(k−j) (ζ − 1)^j of BDF_k, highest power first."""
    rho = np.zeros(k + 1)
    for j in range(1, k + 1):
        term = np.polymul(np.eye(1, k - j + 1, 0).ravel(), np.poly(np.ones(j)))
        rho[-term.size:] += term / j
    return rho


def test_tables_extend_to_order_6():
    """γ_6 = 49/20 (leading coefficient 20/49, Nikravesh (1988), Table 12.3 continued),
    error constants 1/(k+1) up to k = 7 (order selection from 6 estimates order 7),
    default max_order still 5; sums of 1/j: observed 2.2e-16, bound 1e-13."""
    assert MAX_ORDER == 6 and DEFAULT_MAX_ORDER == 5
    # a cumulative sum of six reciprocals (observed 2.2e-16 relative; bound 1e-13)
    assert BDF_GAMMA.size == 7 and BDF_GAMMA[6] == pytest.approx(49 / 20, rel=1e-13)
    # the same expression 1/(k+1): equal bit for bit
    assert np.array_equal(BDF_ERROR_CONST, 1.0 / np.arange(1, 9))


def test_bdf6_is_exact_for_polynomials_of_degree_6_and_zero_stable():
    """Σ_{j=1..6} (1/j) ∇^j p(t_n+1) = h p'(t_n+1) for deg p ≤ 6 (order 6; observed
    residual 3.2e-16 relative to the largest difference; bound 1e-8), and not for
    degree 7 (observed 0.09).  Zero stability: the roots of ρ other than 1 lie inside
    the unit disc for k ≤ 6 (largest observed 0.86 for k = 6), not for k = 7 (1.02)."""
    rng = np.random.default_rng(3)
    h = 0.5
    for deg, exact in ((6, True), (7, False)):
        c = rng.normal(size=deg + 1)
        vals = np.polyval(c, 1.0 - h * np.arange(8))       # p(t_n+1), p(t_n), ...
        diffs, cur = [], vals
        for _ in range(6):
            cur = cur[:-1] - cur[1:]
            diffs.append(cur[0])
        lhs = sum(d / j for j, d in enumerate(diffs, start=1))
        rhs = h * np.polyval(np.polyder(c), 1.0)
        scale = np.abs(diffs).max()
        assert (abs(lhs - rhs) < 1e-8 * scale) == exact, (deg, lhs, rhs)
    for k in range(1, 8):
        roots = np.roots(_rho(k))
        others = np.abs(roots[np.abs(roots - 1.0) > 1e-6])
        largest = others.max() if others.size else 0.0       # (BDF1: ρ = ζ − 1)
        assert (largest < 1.0) == (k <= 6), (k, largest)


def test_difference_rescaling_is_exact_at_order_6():
    """As for orders 1–5 (tests/test_integrators.py): polynomials of degree 6
    (observed 1.8e-14; bound 1e-10)."""
    c = np.random.default_rng(5).normal(size=7)

    def diffs(h):
        vals = np.polyval(c, 1.0 - h * np.arange(7))
        D, cur = [vals[0]], vals
        for _ in range(6):
            cur = cur[:-1] - cur[1:]
            D.append(cur[0])
        return np.array(D)

    for factor in (0.3, 0.5, 2.0):
        np.testing.assert_allclose(rescale_matrix(6, factor) @ diffs(0.1),
                                   diffs(0.1 * factor), rtol=0, atol=1e-10)


def test_order_6_on_request_takes_fewer_steps_on_a_smooth_problem():
    """The oscillator over [0, 20] at rtol = atol = 1e-10: max_order 6 reaches order 6
    (observed 1954 of 2008 steps) and takes fewer steps than max_order 5 (observed
    2008 vs 3914, ratio 0.51), at no loss of accuracy (end error observed 2.5e-12 vs
    1.1e-11).  The default never goes above 5."""
    runs = {mo: integrate("bdf", osc, (0, 20), [1.0, 0.0], rtol=1e-10, atol=1e-10,
                          max_order=mo) for mo in (5, 6)}
    default = integrate("bdf", osc, (0, 20), [1.0, 0.0], rtol=1e-10, atol=1e-10)
    s5, s6 = runs[5].stats, runs[6].stats
    assert max(s5.orders) == 5 and max(default.stats.orders) == 5
    assert s6.orders.get(6, 0) > s6.nsteps / 2, s6.orders         # observed 97 %
    assert s6.nsteps < 0.8 * s5.nsteps, (s6.nsteps, s5.nsteps)   # observed 0.51
    exact = np.array([np.cos(20.0), -np.sin(20.0)])
    e5, e6 = (np.abs(runs[m].y_final - exact).max() for m in (5, 6))
    assert e6 < 10 * e5, (e5, e6)                                  # observed 0.23x
    # dense output of order-6 steps: of the size of the step-end error (observed
    # 2.7e-12; bound 1e-8)
    t_out = np.linspace(0.05, 19.95, 50)
    mids = integrate("bdf", osc, (0, 20), [1.0, 0.0], rtol=1e-10, atol=1e-10,
                     max_order=6, t_out=t_out)
    err = np.abs(mids.y - np.stack([np.cos(t_out), -np.sin(t_out)], axis=1)).max()
    assert err < 1e-8, err


def test_max_order_6_runs_on_the_compiled_loop():
    """The compiled loop (``run_bdf``) implements orders 1–6: an integrator with any
    max_order is handed to it (its difference array has max_order + 3 rows)."""
    from mbcore.integrate.multistep_loop import _ode_form
    from mbplugins.integrators.bdf import BDF
    for mo in (3, 5, 6):
        integ = BDF(osc, 0.0, [1.0, 0.0], 1.0, max_order=mo)
        assert _ode_form("bdf", integ, integ.loop_start())
        assert integ._D.shape == (mo + 3, 2)
    assert BDF.COMPILED_MAX_ORDER == MAX_ORDER == 6


@pytest.mark.parametrize("name, formulation", [
    ("platform.yaml", None), ("spatial_double_pendulum.yaml", None),
    ("slider_crank_dynamic.yaml", "ggl")])
def test_max_order_6_compiled_loop_takes_the_python_drivers_steps(examples, name,
                                                                  formulation):
    """A planar, a spatial and a DAE (GGL, index 2 with the mass matrix and the DAE
    Jacobian call-back) model with max_order 6 at a tight tolerance: the compiled loop
    reaches order 6 and takes the Python driver's steps, orders, Jacobians, LUs and
    evaluations exactly (the integrator channel and every count equal).  The outputs
    inside a step are the backward-difference polynomial, which the Python driver
    evaluates by one BLAS product for all outputs of a step and the loop term by term
    per output: equal to the last bits (observed 0.0 planar, 1.7e-19 spatial, 1.3e-45
    GGL, relative to 1 + max|y|; bound 1e-14, > 5e4 times the largest)."""
    settings = {"t_end": 1.0, "output_step": 0.05, "integrator": "bdf", "rtol": 1e-10,
                "atol": 1e-10, "integrator_options": {"max_order": 6}}
    if formulation:
        settings.update(formulation=formulation, rtol=1e-9, atol=1e-9)
    fast = mbcore.run(Model.from_file(examples / name), settings=settings)
    slow = mbcore.run(Model.from_file(examples / name), settings={**settings,
                                                                  "loop": "python"})
    assert fast.stats["loop"] == "compiled" and slow.stats["loop"] == "python"
    for k in ("nsteps", "nrejected", "nfev", "njev", "nlu", "nnewton_iter"):
        assert fast.stats[f"integrator_{k}"] == slow.stats[f"integrator_{k}"], k
    assert np.array_equal(np.asarray(fast["integrator"]), np.asarray(slow["integrator"]))
    assert np.asarray(fast["integrator"])[:, 1].max() == 6       # (step, order, ...)
    for ch in ("q", "qd"):
        a, b = np.asarray(fast[ch]), np.asarray(slow[ch])
        # observed <= 1.7e-19 relative (the driver evaluates a step's outputs in one BLAS
        # product, the loop one at a time); bound 1e-14, > 10^4x margin
        assert np.abs(a - b).max() <= 1e-14 * (1.0 + np.abs(b).max()), ch


def test_max_order_6_checkpointed_run_resumes_bit_identically(tmp_path, examples):
    """A checkpoint of an order-6 run on the compiled loop holds its 9 rows of
    differences (the run reaches order 6: 102 of 121 outputs); a resume inside a step
    writes the uninterrupted run's file."""
    from test_resume_exact import _check_exact_resume, _model, _settings
    ck = _check_exact_resume(tmp_path, lambda: _model(examples),
                             _settings("bdf", rtol=1e-7, atol=1e-9,
                                       integrator_options={"max_order": 6}))
    assert ck.step["loop"] == "bdf"
    assert np.asarray(ck.step["history"]["D"]).shape[0] == 9


def test_a_lower_max_order_runs_on_the_compiled_loop(examples):
    """The difference array has max_order + 3 rows, as the compiled loop requires (a
    fixed 8 rows made a model run with max_order 3 fail with "run_bdf: D0 has shape
    (8, 19), needs (6, 19)"); both drivers agree (observed 0.0: the same steps;
    bound 1e-9)."""
    settings = {"t_end": 0.5, "output_step": 0.05, "integrator": "bdf",
                "integrator_options": {"max_order": 3}}
    fast = mbcore.run(Model.from_file(examples / "platform.yaml"), settings=settings)
    slow = mbcore.run(Model.from_file(examples / "platform.yaml"),
                      settings={**settings, "loop": "python"})
    assert fast.stats["loop"] == "compiled" and slow.stats["loop"] == "python"
    assert np.abs(fast["q"] - slow["q"]).max() < 1e-9
