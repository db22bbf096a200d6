"""Nonlinear spring-damper laws (004 §9.2.4-9.2.5; spec/planar.md §3 F5)."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model


def model(kind, spring, damper=None):
    m = Model("nl")
    m.set_gravity(0, -9.81)
    m.add_body("mass", mass=2.0, inertia=0.1, position=(0.0, -1.2))
    m.add_joint("translational", "guide", body_i="ground", body_j="mass", axis=(0, 1))
    kw = {"damper": damper} if damper is not None else {}
    m.add_force(kind, "s", body_i="ground", body_j="mass", free_length=1.0, **spring, **kw)
    return m


def test_polynomial_linear_law_equals_tsda(backend):
    """A linear law k delta + c Ldot as polynomials gives the tsda's forces,
    energy and motion."""
    a = model("tsda_nonlinear", {"spring": {"polynomial": [0.0, 150.0]}},
              {"polynomial": [0.0, 4.0]})
    b = model("tsda", {"stiffness": 150.0, "damping": 4.0})
    sa, sb = a.compile(kernels=backend), b.compile(kernels=backend)
    rng = np.random.default_rng(0)
    for _ in range(5):
        q, qd = rng.normal(size=3), rng.normal(size=3)
        np.testing.assert_allclose(sa.forces(q, qd, 0.0), sb.forces(q, qd, 0.0), rtol=1e-12)
        assert sa.potential_energy(q) == pytest.approx(sb.potential_energy(q), rel=1e-12)
    st = {"analysis": "dynamic", "t_end": 0.5, "rtol": 1e-10, "atol": 1e-12}
    ra, rb = mbcore.run(a, settings=st), mbcore.run(b, settings=st)
    np.testing.assert_allclose(ra["q"], rb["q"], atol=1e-9)


def test_table_law_static_equilibrium_and_energy(backend):
    """A stiffening spring given as a table f = 100 d + 2000 d^3: the static
    deflection solves f(d) = m g; dT + dV = P_nc along a damped run."""
    d = np.linspace(-0.5, 0.5, 41)
    f = 100 * d + 2000 * d ** 3
    m = model("tsda_nonlinear", {"spring": {"table": {"x": d.tolist(), "f": f.tolist()}}},
              {"table": {"x": [-10, 0, 10], "f": [-30, 0, 30]}})
    res = mbcore.run(m, settings={"analysis": "static"}, kernels=backend)
    delta = res["forces/s.length"][0] - 1.0
    from scipy.optimize import brentq
    exact = brentq(lambda x: 100 * x + 2000 * x ** 3 - 2 * 9.81, 0, 0.5)
    assert delta == pytest.approx(exact, abs=2e-4)        # spline interpolation error
    dyn = mbcore.run(m, settings={"analysis": "dynamic", "t_end": 0.4, "rtol": 1e-10,
                                  "atol": 1e-12}, kernels=backend)
    bal = dyn["energy/balance"]
    assert np.max(np.abs(bal - bal[0])) < 1e-7 * np.max(np.abs(dyn["energy/total"]))
    assert dyn["energy/work_nc"][-1] < 0


def test_law_validation():
    with pytest.raises(mbcore.ModelError, match=r"forces\[0\]\.spring\.table\.x: must be "
                                                r"strictly increasing"):
        model("tsda_nonlinear", {"spring": {"table": {"x": [0, 0], "f": [1, 2]}}}).compile()
    with pytest.raises(mbcore.ModelError, match=r"forces\[0\]\.spring: expected"):
        model("tsda_nonlinear", {"spring": {"spline": [1]}}).compile()
