"""The bushing force types: analytic Jacobians against finite differences, energy
and power consistency, and the compiled kernel against the Python reference (1e-12)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore.errors import ModelError
from mbcore_bushing import _kernel
from mbcore_bushing.bushing import Bushing, CompiledBushing
from mbcore_bushing.testing import (compiled_force, compiled_force_jacobian,
                                    fd_force_jacobian)


def group(ne=5, seed=1):
    """Random parameters and states of ``ne`` bushings (every gain non-zero)."""
    rng = np.random.default_rng(seed)
    par = np.concatenate([rng.uniform(-0.5, 0.5, (ne, 4)), rng.uniform(1.0, 50.0, (ne, 3)),
                          rng.uniform(0.1, 3.0, (ne, 3)), rng.uniform(-0.3, 0.3, (ne, 1))], 1)
    qb = rng.uniform(-1.0, 1.0, (ne, 2, 3))
    qdb = rng.uniform(-2.0, 2.0, (ne, 2, 3))
    return par, qb, qdb


NOF = np.zeros((5, 0, 3))


def test_force_jacobian_matches_central_differences():
    par, qb, qdb = group()
    K, C = Bushing().force_jacobian(par, qb, qdb, 0.0, NOF)
    Kfd, Cfd = fd_force_jacobian(Bushing(), par, qb, qdb)
    assert np.abs(K).max() > 1.0 and np.abs(C).max() > 0.1
    np.testing.assert_allclose(K, Kfd, rtol=0, atol=1e-6 * np.abs(K).max())
    np.testing.assert_allclose(C, Cfd, rtol=0, atol=1e-6 * np.abs(C).max())


def test_conservative_part_is_minus_the_energy_gradient():
    """With the dampers off, g = -dV/dq (central differences of ``energy``)."""
    par, qb, qdb = group()
    par[:, 7:10] = 0.0
    g = Bushing().force(par, qb, qdb, 0.0, NOF)
    h = 1e-6
    grad = np.empty_like(qb)
    for b in range(2):
        for c in range(3):
            qp, qm = qb.copy(), qb.copy()
            qp[:, b, c] += h
            qm[:, b, c] -= h
            grad[:, b, c] = (Bushing().energy(par, qp, 0.0, NOF)
                             - Bushing().energy(par, qm, 0.0, NOF)) / (2 * h)
    np.testing.assert_allclose(g, -grad, atol=1e-6 * np.abs(g).max())


def test_power_splits_into_minus_energy_rate_and_damper_power():
    """sum_b g_b . qd_b = -dV/dt + power_nc, and power_nc <= 0 (dampers only)."""
    par, qb, qdb = group()
    b = Bushing()
    total = np.einsum("ebc,ebc->e", b.force(par, qb, qdb, 0.0, NOF), qdb)
    h = 1e-6
    dVdt = (b.energy(par, qb + h * qdb, 0.0, NOF) - b.energy(par, qb - h * qdb, 0.0, NOF)) / (2 * h)
    pnc = b.power_nc(par, qb, qdb, 0.0, NOF)
    assert np.all(pnc < 0)
    np.testing.assert_allclose(total, -dVdt + pnc, atol=1e-6 * np.abs(total).max())


def test_outputs_are_the_deflections_and_the_load_on_body_i():
    par, qb, qdb = group()
    b = Bushing()
    out = b.outputs(par, qb, qdb, 0.0, NOF)
    g = b.force(par, qb, qdb, 0.0, NOF)
    assert out.shape == (5, len(b.labels))
    np.testing.assert_allclose(out[:, 3:5], g[:, 0, :2], atol=1e-14)
    np.testing.assert_allclose(out[:, 3:5], -g[:, 1, :2], atol=1e-14)
    np.testing.assert_allclose(out[:, 2], qb[:, 1, 2] - qb[:, 0, 2] - par[:, 10], atol=1e-15)
    np.testing.assert_allclose(0.5 * (par[:, 4] * out[:, 0] ** 2 + par[:, 5] * out[:, 1] ** 2
                                      + par[:, 6] * out[:, 2] ** 2),
                               b.energy(par, qb, 0.0, NOF), rtol=1e-13)


def test_negative_gains_are_refused_with_their_key_path():
    spec = {k: 1.0 for k in ("kx", "ky", "k_phi", "cx", "cy", "c_phi")}
    Bushing().check(spec, "forces[0]")
    spec["c_phi"] = -1.0
    with pytest.raises(ModelError, match=r"forces\[0\]\.c_phi: must be >= 0"):
        Bushing().check(spec, "forces[0]")


# -- the compiled kernel ----------------------------------------------------------------
def header_abi() -> int:
    text = (Path(mbcore.get_include()) / "mbcore_plugin.h").read_text()
    return int(re.search(r"#define MBCORE_ABI_VERSION (\d+)", text).group(1))


def test_capsule_declares_what_the_python_type_declares():
    mod, _, attr = CompiledBushing.c_kernel.partition(":")
    assert mod == "mbcore_bushing._kernel"
    info = _kernel.kernel_info(getattr(_kernel, attr))
    assert info == {"abi_version": header_abi(), "name": "bushing_c", "body_kind": 0,
                    "n_bodies": len(CompiledBushing.bodies), "n_par": CompiledBushing.n_par,
                    "n_fun": CompiledBushing.n_fun, "has_jacobian": True, "reason": None}
    with pytest.raises(ValueError):
        _kernel.kernel_info(object())


def test_compiled_force_and_power_equal_the_python_reference():
    par, qb, qdb = group(ne=7, seed=3)
    g_py = Bushing().force(par, qb, qdb, 0.0, np.zeros((7, 0, 3)))
    p_py = Bushing().power_nc(par, qb, qdb, 0.0, np.zeros((7, 0, 3))).sum()
    g_c, p_c, Q = compiled_force(_kernel.BUSHING, par, qb, qdb)
    assert np.abs(g_py).max() > 1.0
    np.testing.assert_allclose(g_c, g_py, rtol=0, atol=1e-12)
    assert p_c == pytest.approx(p_py, rel=0, abs=1e-12)


def test_compiled_kernel_reads_the_ground_block_and_accumulates():
    """Elements on the ground read its zero block; Q is added to, not overwritten;
    P is added to."""
    par, qb, qdb = group(ne=4, seed=5)
    ground = np.zeros((4, 2), bool)
    ground[:, 0] = True                        # every body_i is the ground
    qb[:, 0], qdb[:, 0] = 0.0, 0.0             # what the Python path sees for the ground
    g_py = Bushing().force(par, qb, qdb, 0.0, np.zeros((4, 0, 3)))
    g_c, p_c, Q = compiled_force(_kernel.BUSHING, par, qb, qdb, ground=ground)
    np.testing.assert_allclose(g_c[:, 1], g_py[:, 1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(Q[-3:], g_py[:, 0].sum(0), rtol=0, atol=1e-12)
    # accumulate: a second call doubles Q and P
    from mbcore_bushing.testing import extended_buffers, kernel_arrays
    boff, q, qd = extended_buffers(qb, qdb, ground)
    p, fv, fidx = kernel_arrays(par, None, 0)
    Q2, P2 = Q.copy(), np.array([p_c])
    assert _kernel.call_force(_kernel.BUSHING, p, boff, q, qd, 0.0, fv, fidx, Q2, P2) == -1
    np.testing.assert_allclose(Q2, 2 * Q, rtol=1e-15, atol=0)
    assert P2[0] == pytest.approx(2 * p_c, rel=1e-15)


def test_compiled_jacobian_equals_the_python_reference():
    par, qb, qdb = group(ne=6, seed=7)
    K, C = Bushing().force_jacobian(par, qb, qdb, 0.0, np.zeros((6, 0, 3)))
    Kc, Cc = compiled_force_jacobian(_kernel.BUSHING, par, qb, qdb)
    np.testing.assert_allclose(Kc, K, rtol=0, atol=1e-12)
    np.testing.assert_allclose(Cc, C, rtol=0, atol=1e-12)


def test_harness_refuses_arrays_that_do_not_fit_the_kernel():
    par, qb, qdb = group(ne=2)
    from mbcore_bushing.testing import extended_buffers, kernel_arrays
    boff, q, qd = extended_buffers(qb, qdb, None)
    p, fv, fidx = kernel_arrays(par, None, 0)
    Q = np.zeros_like(q)
    with pytest.raises(ValueError, match="needs par"):
        _kernel.call_force(_kernel.BUSHING, p[:, :10].copy(), boff, q, qd, 0.0, fv, fidx, Q)
    bad = boff.copy()
    bad[1, 1] = len(q) - 2
    with pytest.raises(ValueError, match="outside q"):
        _kernel.call_force(_kernel.BUSHING, p, bad, q, qd, 0.0, fv, fidx, Q)
    assert not Q.any()
