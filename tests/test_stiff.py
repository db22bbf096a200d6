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
