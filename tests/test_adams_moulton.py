"""Adams–Moulton of fixed order 1–4 (``am``, mbplugins.integrators.adams_moulton):
coefficients (Nikravesh (1988), §12.3.2, Table 12.2), re-derived exactly from the
interpolation polynomial; the stability of AM3/AM4 at a step where AB3/AB4 diverge
(Hairer & Wanner (1996), §V.1); start-up and evaluation counts.  The measured orders
are in tests/test_integrators_classical.py (the case table)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from mbcore.integrate import IntegratorOptionError, integrate
from mbcore.plugins import registry
from mbplugins.integrators.adams_moulton import (AM_COEFFICIENTS, AdamsMoulton,
                                                 adams_moulton_weights)
from mbplugins.integrators.classical import AB_COEFFICIENTS


def osc(t, y):
    return np.array([y[1], -y[0]])


def test_coefficients_are_the_integrated_interpolation_polynomial():
    """The table equals the exact rational weights (∫ of the Lagrange basis of the
    nodes 1, 0, −1, −2), which integrate polynomials of degree k − 1 exactly: in
    exact arithmetic, and the float table to 1e-13 (observed 2.2e-16 at most: 450x)."""
    assert adams_moulton_weights(3) == [Fraction(5, 12), Fraction(8, 12), Fraction(-1, 12)]
    assert adams_moulton_weights(4) == [Fraction(9, 24), Fraction(19, 24), Fraction(-5, 24),
                                        Fraction(1, 24)]
    for k, beta in AM_COEFFICIENTS.items():
        exact = adams_moulton_weights(k)
        # the float table against the exact weights: a few roundings of numbers below 1
        # (observed 0: the table is the exact weights rounded once; bound 1e-13)
        np.testing.assert_allclose(beta, [float(w) for w in exact], rtol=0, atol=1e-13)
        for i in range(k):
            assert sum(w * Fraction(1 - j) ** i for j, w in enumerate(exact)) == \
                Fraction(1, i + 1), (k, i)
            # at most 4 products of numbers below 4 summed (observed 2.2e-16; bound
            # 1e-13, 450x)
            assert sum(b * (1.0 - j) ** i for j, b in enumerate(beta)) == \
                pytest.approx(1 / (i + 1), abs=1e-13), (k, i)
        # and not of degree k (the order is exactly k): error constant ≠ 0
        assert sum(w * Fraction(1 - j) ** k for j, w in enumerate(exact)) != \
            Fraction(1, k + 1)


def _spectral_radius(rho: np.ndarray, sigma: np.ndarray, z: float) -> float:
    """Largest root modulus of ρ(ζ) − z σ(ζ) (coefficients, highest power first)."""
    return float(np.abs(np.roots(rho - z * sigma)).max())


def _am(k):      # ρ = ζ^m − ζ^(m−1), σ = Σ β_j ζ^(m−j), m = max(k − 1, 1)
    m = max(k - 1, 1)
    rho = np.zeros(m + 1)
    rho[:2] = 1.0, -1.0
    sigma = np.zeros(m + 1)
    sigma[:k] = AM_COEFFICIENTS[k]
    return rho, sigma


def _ab(k):      # ρ = ζ^k − ζ^(k−1), σ = Σ β_j ζ^(k−1−j)
    rho = np.zeros(k + 1)
    rho[:2] = 1.0, -1.0
    sigma = np.zeros(k + 1)
    sigma[1:] = AB_COEFFICIENTS[k]
    return rho, sigma


Z = -2.0     # hλ: inside AM3's (−6, 0) and AM4's (−3, 0), outside AB3's and AB4's


@pytest.mark.parametrize("k", [3, 4])
def test_am_stays_bounded_where_ab_of_the_same_order_diverges(k):
    """Prothero–Robinson y' = λ(y − cos t) − sin t, λ = −1000 (y = cos t), h = 0.002:
    hλ = −2, where the root condition holds for AM_k (spectral radius 0.41 for AM3,
    0.74 for AM4, computed here) and fails for AB_k (3.63, 4.76).  AB_k's error grows
    by ≈ that factor per step (50 steps: observed 1.1e20 for AB3, 1.0e25 for AB4);
    AM_k's stays bounded at the size h²/12 = 3.3e-7 of the stiff local error of the
    RK4 starter steps (observed 3.3e-7 for AM3, 4.4e-7 for AM4 over [0, 1]; bound
    1e-4, > 200x)."""
    assert _spectral_radius(*_am(k), Z) < 0.8
    assert _spectral_radius(*_ab(k), Z) > 3.5
    lam = -1000.0

    def f(t, y):
        return np.array([lam * (y[0] - np.cos(t)) - np.sin(t)])

    h = Z / lam
    res = integrate("am", f, (0.0, 1.0), [1.0], step=h, order=k, jac=np.array([[lam]]))
    err = np.abs(res.y[:, 0] - np.cos(res.t)).max()
    assert err < 1e-4, err                 # observed 3.3e-7 (AM3), 4.4e-7 (AM4)
    ab = integrate("ab", f, (0.0, 0.1), [1.0], step=h, order=k, raise_on_failure=False)
    # diverged: observed errors 1.1e20 (AB3), 1.0e25 (AB4) after 50 steps
    assert np.abs(ab.y[:, 0] - np.cos(ab.t)).max() > 1e10, ab.y[-5:, 0]


def test_real_stability_intervals_of_am3_and_am4():
    """The left ends of the real stability intervals (Hairer & Wanner (1996), §V.1):
    AM3 −6, AM4 −3 (spectral radius ≤ 1 just inside, > 1 just outside)."""
    for k, left in ((3, -6.0), (4, -3.0)):
        assert _spectral_radius(*_am(k), left * 0.99) < 1.0
        assert _spectral_radius(*_am(k), left * 1.01) > 1.0


def test_evaluations_newton_and_starter():
    """AM4 on the linear oscillator (exact finite-difference Jacobian), h = 0.01: two RK4
    starter steps (3 stages + f at the end each), then per step two Newton
    iterations (the second confirms the exact linear solve) and f at the end; one
    Jacobian (2 evaluations + f), one LU."""
    res = integrate("am", osc, (0, 1), [1.0, 0.0], step=0.01)
    st = res.stats
    assert st.nsteps == 100 and st.orders == {4: 100}
    assert st.njev == 1 and st.nlu == 1 and st.nfev_jac == 3
    assert st.nnewton_iter == 2 * 98 and st.nlu_solves == st.nnewton_iter
    assert st.nfev == 1 + 2 * 4 + 98 * (2 + 1) + st.nfev_jac
    integ = AdamsMoulton(osc, 0.0, [1.0, 0.0], 1.0, step=0.01, order=3)
    integ.step()
    assert integ.stats.nnewton_iter == 0                 # an RK4 starter step
    integ.step()
    assert integ.stats.nnewton_iter > 0                  # AM3 from the second step
    integ.restart()
    assert integ._hist == (integ._f,)


def test_am1_and_am2_are_backward_euler_and_the_trapezoidal_rule():
    """Order 1 and 2 solve the same equations as implicit_euler and trapezoid (no
    starter), with the same predictor and Newton iteration: the same arithmetic
    (observed difference 0.0; bound 1e-9, the Newton tolerance's order)."""
    for k, other in ((1, "implicit_euler"), (2, "trapezoid")):
        mine = integrate("am", osc, (0, 2), [1.0, 0.0], step=0.05, order=k)
        ref = integrate(other, osc, (0, 2), [1.0, 0.0], step=0.05)
        assert np.abs(mine.y - ref.y).max() < 1e-9, k


@pytest.mark.parametrize("bad", [0, 5, 2.5, True])
def test_order_out_of_range_is_an_error_naming_it(bad):
    with pytest.raises(IntegratorOptionError, match=r"integrator 'am': option 'order': "
                                                    r"must be an integer in \[1, 4\]"):
        integrate("am", osc, (0, 1), [1.0, 0.0], step=0.1, order=bad)


def test_registered_with_its_compiled_loop():
    cls = registry().get("integrator", "am")
    assert cls is AdamsMoulton and cls.implicit and not cls.adaptive
    assert cls.compiled_loop_kind() == "fixedgrid"
