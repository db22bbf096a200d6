"""Checks shared by the tests of the compiled DAE forms (ggl, stiff) on spatial
bodies: the Newton Jacobian on the compiled path against the NumPy path's, and a run
on the compiled loop against one on the Python driver."""
from __future__ import annotations

import numpy as np

import mbcore


def central_jacobian(form, t, y, h: float = 1e-5) -> np.ndarray:
    """df/dy by central differences of the formulation's NumPy ``rhs`` (steps
    ``h (1 + |y_j|)``)."""
    N = y.size
    J = np.zeros((N, N))
    for j in range(N):
        d = h * (1.0 + abs(y[j]))
        yp, ym = y.copy(), y.copy()
        yp[j] += d
        ym[j] -= d
        J[:, j] = (form.rhs(t, yp).copy() - form.rhs(t, ym).copy()) / (2.0 * d)
    return J


def assert_jacobian_and_run_match_numpy(form, model, t, y) -> None:
    """``form.jacobian`` with and without its compiled right-hand side at (t, y):
    both forward differences with steps 1e-7 (1 + |y|) (the constraint rows and the
    multiplier columns exact or differences of a function linear in them), so they
    agree to ~1e-8 of the scale (observed <= 7.5e-9; bound 1e-5); and a 0.05 s run of
    ``model`` on the compiled bdf loop equals the Python driver's on the NumPy path
    within the integration error (observed <= 3.2e-11 m at rtol 1e-8; bound 1e-6 m)."""
    Jc = form.jacobian(t, y)
    c, form.compiled = form.compiled, None
    try:
        Jn = form.jacobian(t, y)
    finally:
        form.compiled = c
    np.testing.assert_allclose(Jc, Jn, rtol=0, atol=1e-5 * (1 + np.abs(Jn).max()))
    st = {"t_end": 0.05, "output_step": 0.025, "formulation": form.name,
          "integrator": "bdf", "rtol": 1e-8, "atol": 1e-10}
    a = mbcore.run(model, settings=st)
    b = mbcore.run(model, settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-6)
