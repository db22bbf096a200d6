"""Coordinate partitioning in C (ext/plugins/_cp.pyx): the compiled right-hand side
against its NumPy reference (``CP.rhs`` + the work rate), planar and spatial (the
accelerations in the transformed columns of mbcore.system.mass), and the compiled
integration loop against the Python driver, re-partitioning included."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry

from conftest import EXAMPLES
from test_partitioning import free_slider_crank
from mbplugins.formulations.partitioning import column_scale

NAMES = ["fourbar_dap", "slider_crank_dynamic", "andrews_squeezer", "nfourbar_2",
         "spatial_heavy_top", "spatial_slider_crank_dynamic", "spatial_gyroscope"]


def _state(name):
    """A consistent state a little into the motion (from a DI run)."""
    m = Model.from_file(EXAMPLES / f"{name}.yaml")
    r = mbcore.run(m, settings={"t_end": 0.01, "output_step": 0.01, "formulation": "di",
                                "rtol": 1e-11, "atol": 1e-12})
    return m, r["q"][-1], r["qd"][-1], float(r.t[-1])


@pytest.mark.parametrize("name", NAMES)
def test_compiled_rhs_equals_numpy_reference(name):
    m, q, qd, t = _state(name)
    sc = m.compile(kernels="compiled")
    sn = m.compile(kernels="numpy")
    fc = registry().get("formulation", "cp")(sc, {})
    fn = registry().get("formulation", "cp")(sn, {})
    assert fc.compiled is not None and fn.compiled is None
    yc, _ = fc.initialize(q, qd, t)
    yn, _ = fn.initialize(q, qd, t)
    assert list(fc.v) == list(fn.v)
    rng = np.random.default_rng(3)
    for dt in (0.0, 1e-3):
        y = yn + dt * rng.normal(size=yn.size) * (1 + np.abs(yn))   # off the last state
        ref = fn.rhs(t + dt, y).copy()
        qq, qqd = fn.q_cur, fn.qd_cur
        w_ref = sn.nonconservative_power(qq, qqd, t + dt) + float(
            fn.solver.lam @ (sn.jacobian_dense(qq, t + dt) @ qqd))
        out = np.zeros(y.size + 1)
        assert fc.compiled.eval(t + dt, y, out) == 0
        scale = 1.0 + np.abs(ref).max()
        # the same operations in C and NumPy (spatial: observed <= 1.3e-15 of the
        # scale; bound 1e-12, ~800x)
        np.testing.assert_allclose(out[:-1], ref, rtol=0, atol=1e-12 * scale)
        assert out[-1] == pytest.approx(w_ref, abs=1e-12 * (1 + abs(w_ref) + scale))
        np.testing.assert_allclose(np.asarray(fc.compiled.q), qq, atol=1e-12)
        np.testing.assert_allclose(np.asarray(fc.compiled.qd), qqd, atol=1e-12 * scale)
        # the re-partition measure from the same LU and Phi_v (observed <= 1e-15
        # relative; bound 1e-12)
        a_ref = fn.current_amplification()
        assert fc.current_amplification() == pytest.approx(a_ref, rel=1e-12)
        # ... and its definition, max |Phi_u^-1 Phi_v| in the column scales, from a
        # fresh Jacobian and solve (observed <= 1e-14 relative; bound 1e-10)
        sc = column_scale(sn)[1]
        J = sn.jacobian_dense(qq, t + dt)
        C = np.linalg.solve(J[:, fn.u], J[:, fn.v]) * sc[fn.v][None, :] / sc[fn.u][:, None]
        assert a_ref == pytest.approx(np.abs(C).max(), rel=1e-10)


@pytest.mark.parametrize("name", ["fourbar_dap", "andrews_squeezer", "spatial_double_pendulum"])
def test_compiled_loop_equals_python_driver(name):
    m = Model.from_file(EXAMPLES / f"{name}.yaml")
    st = {"t_end": 0.02 if name.startswith(("andrews", "spatial")) else 0.5, "rtol": 1e-10,
          "atol": 1e-11, "formulation": "cp", "integrator": "dopri5"}
    st["output_step"] = st["t_end"] / 5
    a = mbcore.run(m, settings={**st, "kernels": "compiled"})
    b = mbcore.run(m, settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-9)
    np.testing.assert_allclose(a["lam"], b["lam"], atol=1e-7 * np.abs(b["lam"]).max())
    np.testing.assert_allclose(a["energy"], b["energy"], atol=1e-8 * np.abs(b["energy"]).max())


def test_repartitioning_in_the_compiled_loop():
    """The free slider-crank from the slider's x: the compiled evaluation reports the
    degraded Phi_u, the Python path raises the re-partition request, the run restarts
    on the compiled loop — the same partitions and motion as the NumPy path."""
    st = {"rtol": 1e-11, "atol": 1e-13, "hold": "crank.phi", "t_end": 1.0,
          "output_step": 0.01, "formulation": "cp", "independent": "slider.x"}
    a = mbcore.run(free_slider_crank(), settings={**st, "kernels": "compiled"})
    b = mbcore.run(free_slider_crank(), settings={**st, "kernels": "numpy"})
    ra = [e.message for e in a.events if e.kind == "repartition"]
    rb = [e.message for e in b.events if e.kind == "repartition"]
    assert len(ra) >= 1 and [r.split("(")[0] for r in ra] == [r.split("(")[0] for r in rb]
    assert a.stats["loop"] == "compiled"
    np.testing.assert_allclose(a["q"], b["q"], atol=1e-7)
    # every row meets CP's Newton test |Phi| <= newton_tolerance (1 + |q|) (default
    # 1e-12; observed 4.9e-12 under the native and Sandybridge BLAS kernels): 100x it
    assert np.max(a["violation/position"]) <= 100 * 1e-12 * (1 + np.abs(a["q"]).max())


def test_partition_indices_are_checked():
    m, q, qd, t = _state("fourbar_dap")
    f = registry().get("formulation", "cp")(m.compile(kernels="compiled"), {})
    f.initialize(q, qd, t)
    with pytest.raises(ValueError, match="independent index"):
        f.compiled.set_partition(np.ascontiguousarray(f.u, dtype=np.intp),
                                 np.full(len(f.v), f.u[0], dtype=np.intp), 1.0, q)
