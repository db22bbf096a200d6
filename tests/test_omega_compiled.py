"""The angular-velocity form (``di_omega``, Nikravesh (1988), Eq. 11.49) in C
(``CompiledOmega``): equal to its NumPy reference at random states, stepped by the
compiled loop as by the Python driver, and the same motion as the NumPy path."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry

CASES = ["spatial_heavy_top", "spatial_double_pendulum", "spatial_gyroscope",
         "spatial_slider_crank_dynamic", "spatial_boom_actuators"]


def omega(sysm):
    return registry().get("formulation", "di_omega")(sysm)


@pytest.mark.parametrize("case", CASES)
def test_rhs_equals_the_numpy_reference(examples, case):
    """[qdot; vdot; W'] and every multiplier (the normalisation rows' too) equal to
    the NumPy path: the same equations with J'^-1 in body axes instead of the
    principal axes (observed <= 3e-14 of the scale; bound 5e-12, 170x)."""
    m = Model.from_file(examples / f"{case}.yaml")
    form = omega(m.compile(kernels="compiled"))
    assert form.compiled is not None and form.compiled_ready()
    assert omega(m.compile(kernels="numpy")).compiled is None
    s = form.system
    rng = np.random.default_rng(3)
    st = s.initial_state(0.0)
    for _ in range(6):
        t = float(rng.uniform(0.0, 2.0))
        q = st.q + 0.02 * rng.standard_normal(s.n)     # off the constraints, |p| != 1
        qd = rng.standard_normal(s.n)
        y = form.pack(q, qd)
        out = np.zeros(form.size + 1)
        assert form.compiled.eval(t, y, out) == 0
        lam_c = form.compiled.lam_view.copy()
        c, form.compiled = form.compiled, None
        try:
            want = np.array(form.rhs(t, y))
            lam = form.solver.lam.copy()
            q_n, qd_n = form.q_cur.copy(), form.qd_cur.copy()
            J = s.jacobian_dense(q_n, t)
            work = float(s.nonconservative_power(q_n, qd_n, t) + lam @ (J @ qd_n))
        finally:
            form.compiled = c
        scale = np.max(np.abs(want))
        np.testing.assert_allclose(out[:-1], want, rtol=0, atol=5e-12 * scale)
        np.testing.assert_allclose(lam_c, lam, rtol=0, atol=5e-12 * (1 + np.abs(lam).max()))
        assert out[-1] == pytest.approx(work, abs=5e-12 * (1 + abs(work) + scale))


@pytest.mark.parametrize("integrator", ["dopri5", "rk4"])
def test_compiled_loop_steps_as_the_python_driver(examples, integrator):
    """The compiled loop and the Python driver on the same compiled right-hand side.
    Fixed steps: the same evaluations, outputs equal to round-off (bound 1e-10).
    Adaptive: the two loops round the stage sums differently, and on the gyroscope,
    which rejects a step now and then, a step may go the other way after ~0.15 s;
    both within the integration error of each other (observed 2e-10 of the scale
    at rtol 1e-8; bound 1e-7)."""
    m = Model.from_file(examples / "spatial_gyroscope.yaml")
    st = {"t_end": 0.5, "output_step": 0.05, "formulation": "di_omega",
          "integrator": integrator, "rtol": 1e-8, "atol": 1e-10, "step": 1e-3}
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    fixed = integrator == "rk4"
    if fixed:
        assert a.stats["integrator_nfev"] == b.stats["integrator_nfev"]
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0, err_msg=ch,
                                   atol=(1e-10 if fixed else 1e-7)
                                   * (1.0 + np.max(np.abs(b[ch]))))


def test_same_motion_as_the_numpy_path(examples):
    """The heavy top, 0.4 s at rtol 1e-10: the compiled and the NumPy paths (other
    rounding, so other steps) within the integration error of each other (observed
    ~1e-11; bound 1e-7), and the work channel of a conservative model at zero."""
    m = Model.from_file(examples / "spatial_heavy_top.yaml")
    st = {"t_end": 0.4, "output_step": 0.1, "formulation": "di_omega", "rtol": 1e-10,
          "atol": 1e-12, "record": "q, qd, energy"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    for ch in ("q", "qd"):
        np.testing.assert_allclose(a[ch], b[ch], rtol=0, atol=1e-7, err_msg=ch)
    E = a["energy/total"]
    assert np.max(np.abs(E - E[0])) < 1e-7 * abs(E[0]) + 1e-9
