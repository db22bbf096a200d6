"""The System's public accessors for formulations, analyses and the Simulation:
one test of "compiled or Python" (``why_python`` / ``compiled_kernels``) and the live
buffers that compiled twins share (``jacobian_data``, ``constant_forces``)."""
from __future__ import annotations

import numpy as np
import pytest

from mbcore import Model
from mbcore.kernels import CompiledKernels
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")


def _state(sysm, seed=3):
    rng = np.random.default_rng(seed)
    st = sysm.initial_state(0.0)
    return st.q + 1e-2 * rng.standard_normal(sysm.n), rng.standard_normal(sysm.n)


@pytest.mark.parametrize("case", ["fourbar_dap", "slider_crank_dynamic"])
def test_compiled_kernels_share_the_systems_buffers(examples, case):
    m = Model.from_file(examples / f"{case}.yaml")
    sysm = m.compile(kernels="compiled")
    assert sysm.why_python() is None
    k = sysm.compiled_kernels()
    assert isinstance(k, CompiledKernels)
    assert k.args[3:5] == (sysm.n, sysm.m) and len(k.args) == 7
    q, _ = _state(sysm)
    J = sysm.jacobian_dense(q, 0.1)
    # the evaluator wrote into the buffer the kernels hold: the same object, no copy
    assert k.jacobian_data is sysm.jacobian_data
    np.testing.assert_array_equal(np.asarray(sysm.last_jacobian.toarray()
                                             if hasattr(sysm.last_jacobian, "toarray")
                                             else sysm.last_jacobian), J)
    assert k.dense == sysm.dense and (k.csr() == {}) == sysm.dense


def test_the_numpy_backend_says_why(examples):
    sysm = Model.from_file(examples / "fourbar_dap.yaml").compile(kernels="numpy")
    assert sysm.why_python() == "kernels: numpy"
    assert sysm.compiled_kernels() is None and sysm.compiled_kernels(False) is None


@pytest.mark.parametrize("kernels", ["compiled", "numpy"])
def test_constant_forces_are_the_forces_added(examples, kernels):
    sysm = Model.from_file(examples / "slider_crank_dynamic.yaml").compile(kernels=kernels)
    q, qd = _state(sysm)
    Q0 = sysm.forces(q, qd, 0.2).copy()
    extra = np.arange(1.0, sysm.n + 1.0)
    before = sysm.constant_forces.copy()
    sysm.constant_forces[:] += extra            # as a Simulation's force inputs do
    try:
        Q1 = sysm.forces(q, qd, 0.2).copy()
        np.testing.assert_array_equal(sysm.last_forces, Q1)
    finally:
        sysm.constant_forces[:] = before
    # one addition per entry: exact up to one rounding of |Q0| + |extra|
    np.testing.assert_allclose(Q1 - Q0, extra, rtol=0,
                               atol=4 * np.finfo(float).eps * (np.abs(Q0) + extra).max())
