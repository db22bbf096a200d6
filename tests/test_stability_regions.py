"""The stability regions drawn by docs/_ext/mbcore_stability.py: the stability
function measured by one integrator step on y' = λy, and the boundary loci of the
multistep methods (Hairer & Wanner (1996), §IV.2, §V.1)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stab():
    name = "mbcore_stability"
    spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "_ext" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


Z = [complex(x, y) for x in (-2.7, -1.0, -0.1, 0.5) for y in (-2.5, 0.0, 1.3, 2.8)]


def test_rk4_one_step_factor_is_its_stability_polynomial(stab):
    """One rk4 step of size 1 on the real form of y' = zy gives
    R(z) = 1 + z + z²/2 + z³/6 + z⁴/24 (Hairer & Wanner (1996), §IV.2): observed
    difference 1.0e-15 relative to max(1, |R|) over 16 points with |z| ≤ 3.9; bound
    1e-13 (the rounding of a dozen operations, 100x)."""
    worst = 0.0
    for z in Z:
        exact = 1 + z + z ** 2 / 2 + z ** 3 / 6 + z ** 4 / 24
        got = stab.one_step_factor("rk4", z)
        worst = max(worst, abs(got - exact) / max(1.0, abs(exact)))
    assert worst < 1e-13, worst
    # and a wrong polynomial is told apart (the z⁴ term: 0.2 at |z| = 3.9)
    z = Z[0]
    assert abs(stab.one_step_factor("rk4", z) - (1 + z + z ** 2 / 2 + z ** 3 / 6)) > 0.05


def test_fitted_stability_functions(stab):
    """The fit of the figures recovers the known functions: Taylor coefficients
    1/j! of rk4 and dopri5 (z⁶: 1/600, Hairer, Nørsett & Wanner (1993), §IV.2 for
    dopri5's R), implicit_euler 1/(1 − z), trapezoid (1 + z/2)/(1 − z/2).  Observed
    coefficient errors ≤ 6.7e-16; bound 1e-11 (> 10000x)."""
    from math import factorial
    p, q = stab.fit_stability_function("rk4", 4, 0).coefficients
    np.testing.assert_allclose(p, [1 / factorial(j) for j in range(5)], rtol=0, atol=1e-11)
    opts, nd, dd = stab.ONE_STEP["dopri5"]
    p, q = stab.fit_stability_function("dopri5", nd, dd, **opts).coefficients
    np.testing.assert_allclose(p, [1 / factorial(j) for j in range(6)] + [1 / 600, 0.0],
                               rtol=0, atol=1e-11)
    p, q = stab.fit_stability_function("implicit_euler", 1, 1).coefficients
    np.testing.assert_allclose(np.concatenate((p, q)), [1, 0, 1, -1], rtol=0, atol=1e-11)
    p, q = stab.fit_stability_function("trapezoid", 1, 1).coefficients
    np.testing.assert_allclose(np.concatenate((p, q)), [1, 0.5, 1, -0.5], rtol=0, atol=1e-11)
    with pytest.raises(ValueError, match="rk4: the stability function is not"):
        stab.fit_stability_function("rk4", 3, 0)


def _real_axis_crossings(z: np.ndarray) -> np.ndarray:
    """Re z where the closed curve z(θ) crosses the real axis (sign changes of Im z,
    linear interpolation; θ = 0 and θ = π sit exactly on it)."""
    out = list(z.real[np.abs(z.imag) < 1e-12])
    s = np.sign(z.imag)
    i = np.flatnonzero(s[:-1] * s[1:] < 0)
    for k in i:
        w = z.imag[k] / (z.imag[k] - z.imag[k + 1])
        out.append(z.real[k] + w * (z.real[k + 1] - z.real[k]))
    return np.unique(np.round(out, 9))


def test_bdf2_boundary_locus_crosses_the_real_axis_at_0_and_4(stab):
    """BDF2: z(θ) = (1 − e^{−iθ}) + (1 − e^{−iθ})²/2 is real at θ = 0 (z = 0) and
    θ = π (z = 2 + 2 = 4) only: the unstable region is the bounded set inside,
    between 0 and 4 on the real axis (Hairer & Wanner (1996), §V.1).  BDF1: 0 and 2.
    Observed to 1e-15; bound 1e-9."""
    np.testing.assert_allclose(_real_axis_crossings(stab.bdf_locus(2)), [0.0, 4.0],
                               atol=1e-9)
    np.testing.assert_allclose(_real_axis_crossings(stab.bdf_locus(1)), [0.0, 2.0],
                               atol=1e-9)


def test_bdf_a_alpha_angles_and_adams_intervals(stab):
    """A(α) angles of BDF3–6 from the loci, α = min over the locus of |arg(−z)|:
    86.03°, 73.35°, 51.84°, 17.84° (Hairer & Wanner (1996), §V.2, Table 2.3; observed
    to 0.003° with 2001 points; bound 0.1°, 30x: the table's rounding is 0.005°).
    Left ends of the real intervals: AB3 −6/11, AB4 −3/10, AM3 −6, AM4 −3 (θ = π;
    observed to 1.8e-15, bound 1e-12)."""
    for k, alpha in ((3, 86.03), (4, 73.35), (5, 51.84), (6, 17.84)):
        z = stab.bdf_locus(k)
        z = z[np.abs(z) > 1e-9]
        got = np.degrees(np.abs(np.angle(-z)).min())
        assert abs(got - alpha) < 0.1, (k, got)
    for locus, k, left in ((stab.adams_bashforth_locus, 3, -6 / 11),
                           (stab.adams_bashforth_locus, 4, -0.3),
                           (stab.adams_moulton_locus, 3, -6.0),
                           (stab.adams_moulton_locus, 4, -3.0)):
        z = locus(k)
        assert abs(z[1000] - left) < 1e-12, (k, z[1000])      # θ = π at index 1000


def test_the_figures_are_written(stab, tmp_path):
    pytest.importorskip("matplotlib")
    paths = stab.generate(tmp_path, log=lambda *a: None)
    assert [p.name for p in paths] == list(stab.FIGURES)
    assert all(p.stat().st_size > 5000 for p in paths)
