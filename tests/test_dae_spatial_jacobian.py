"""Newton matrices of the DAE forms ``ggl`` and ``stiff`` for spatial bodies: the
velocity rows ``da/dq = M^-1 (K + d(P^T lam)/dq - Dq)``, ``da/dv = M^-1 (C - Dv)``,
``da/dlam = M^-1 P^T`` of the accelerations of the regular Euler-parameter form
(Nikravesh (1988), Eqs. 11.1-11.7, 11.22-11.32; mbplugins.formulations.velocity_jacobian)
against central differences of the whole right-hand side, block by block; the
compiled kernels (``CompiledGGL.velocity_columns``, ``constraint_differences``)
against their NumPy references; runs with the analytic matrices against runs with the
former differences (``jacobian_fd``)."""
from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry
from mbcore.system import compiled_available
from mbcore.system.mass import SpatialMass

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from accuracy_problems import governor_model  # noqa: E402
from dae_checks import central_jacobian  # noqa: E402

EXAMPLES = Path(__file__).parents[1] / "examples"
BACKENDS = ("numpy", pytest.param("compiled", marks=pytest.mark.skipif(
    not compiled_available(), reason="compiled kernels not built")))
MODELS = {
    "heavy_top": lambda: Model.from_file(EXAMPLES / "spatial_heavy_top.yaml"),
    "slider_crank": lambda: Model.from_file(EXAMPLES / "spatial_slider_crank_dynamic.yaml"),
    "governor": governor_model,          # IFToMM A05: springs and dampers
}


def _state(form, s, rng, t0=0.0):
    """A consistent start moved by 1e-2 (relative), |p| = 1 per body, random
    multipliers (and mu for ggl): every block is exercised."""
    st = s.initial_state(t0)
    y, _ = form.initialize(st.q, st.qd, t0)
    y = y + 1e-2 * rng.standard_normal(y.size) * np.maximum(1.0, np.abs(y))
    for idx in s.p_index:
        y[idx] /= np.linalg.norm(y[idx])
    return y




def _blocks(form, fname):
    n, m = form.n, form.m
    cuts = [0, n, 2 * n, 2 * n + m] + ([2 * n + 2 * m] if fname == "ggl" else [])
    return list(itertools.pairwise(cuts))


def test_inertial_jacobians_are_the_derivatives_of_the_mass_solve():
    """``SpatialMass.inertial_jacobians`` and ``solve_columns``: ``M^-1 (-Dq)`` and
    ``M^-1 (-Dv)`` are the derivatives of ``a = (M + alpha p p^T)^-1 (F - b* - alpha p
    pd.pd)`` at fixed F, everywhere (|p| != 1 too), on the governor (thin rods: a up
    to 3e5).  Central differences: in q with h = 1e-5 (truncation and rounding,
    observed <= 2.4e-10 of the block's scale; bound 1e-7); in qd with h = 1 (a is
    quadratic in qd: exact up to rounding, observed <= 7.5e-12; bound 1e-9)."""
    rng = np.random.default_rng(5)
    s = governor_model().compile(kernels="numpy")
    sm = SpatialMass(s)
    n = s.n
    for _ in range(3):
        q = s.initial_state(0.0).q + 0.1 * rng.standard_normal(n)
        v, F = rng.standard_normal(n), 10.0 * rng.standard_normal(n)

        def acc(qq, vv, F=F):
            return sm.solve(qq, vv, F, np.zeros(n)).copy()

        a = acc(q, v)
        Dq, Dv = sm.inertial_jacobians(q, v, a)
        X = np.zeros((n, 2 * n))
        r, c = sm.p_idx[:, :, None], sm.p_idx[:, None, :]
        X[r, c] = -Dq
        X[r, n + c] = -Dv
        got = sm.solve_columns(q, X)
        want = np.zeros((n, 2 * n))
        for j in range(n):
            e = np.zeros(n)
            e[j] = 1e-5
            want[:, j] = (acc(q + e, v) - acc(q - e, v)) / 2e-5
            e[j] = 1.0
            want[:, n + j] = (acc(q, v + e) - acc(q, v - e)) / 2.0
        for blk, tol in ((slice(0, n), 1e-7), (slice(n, 2 * n), 1e-9)):
            scale = np.abs(want[:, blk]).max()
            np.testing.assert_allclose(got[:, blk], want[:, blk], rtol=0, atol=tol * scale)
        # the column solve is the mass solve of each column minus that of zero (the
        # same per-body blocks, other summation order: observed <= 2.9e-16 of the
        # columns' scale; bound 1e-12, a 3400x margin)
        Y = rng.standard_normal((n, 3))
        z = sm.solve(q, v, np.zeros(n), np.zeros(n)).copy()
        cols = np.column_stack([sm.solve(q, v, y, np.zeros(n)) - z for y in Y.T])
        np.testing.assert_allclose(sm.solve_columns(q, Y), cols, rtol=0,
                                   atol=1e-12 * np.abs(cols).max())


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("fname", ["ggl", "stiff"])
@pytest.mark.parametrize("model", list(MODELS))
def test_newton_matrix_blocks_match_central_differences(model, fname, kernels):
    """Every block of df/dy against central differences (h = 1e-5) of the whole
    right-hand side, scaled by that block's size, at two random states.  The
    analytic velocity rows are exact; the constraint terms (d(P^T lam)/dq, d(Phi_q^T
    mu)/dq, d(Phi_q v - nu)/dq) are forward differences of step 1e-7 (the stiff
    form's true rows with the rounding of their Richardson radial coefficients over
    that step): observed <= 1.8e-6 of the block's scale (heavy top, stiff; the former
    differences of f alike); bound 3e-4."""
    s = MODELS[model]().compile(kernels=kernels)
    form = registry().get("formulation", fname)(s, {})
    assert form.spatial and (form.compiled is not None) == (kernels == "compiled")
    rng = np.random.default_rng(7)
    for t in (0.05, 0.3):
        y = _state(form, s, rng)
        J = form.jacobian(t, y)
        f_after = form.rhs(t, y).copy()
        Jc = central_jacobian(form, t, y)
        for a, b in _blocks(form, fname):
            for c, d in _blocks(form, fname):
                blk, ref = J[a:b, c:d], Jc[a:b, c:d]
                if not ref.size:
                    continue
                scale = max(1.0, np.abs(ref).max())
                np.testing.assert_allclose(blk, ref, rtol=0, atol=3e-4 * scale,
                                           err_msg=f"{model} {fname} {kernels}: block "
                                                   f"rows {a}:{b}, columns {c}:{d}")
        # the velocity rows are not trivially zero (inertial and force terms present)
        n = form.n
        assert np.abs(J[n:2 * n, :n]).max() > 0 and np.abs(J[n:2 * n, n:2 * n]).max() > 0
        np.testing.assert_array_equal(f_after, form.rhs(t, y))


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("fname", ["ggl", "stiff"])
def test_newton_matrix_on_the_independent_rows(fname, kernels):
    """The Cardan shaft (redundant ball rows): the forms keep the independent rows
    (``use_independent_rows``) and the Newton matrix of those rows matches central
    differences of f, block by block (the bound of the test above: observed
    <= 6.2e-7 of the block's scale)."""
    from mbcore.solve.assembly import assemble
    from mbcore.solve.linalg import rank_revealing
    s = Model.from_file(EXAMPLES / "spatial_cardan_shaft.yaml").compile(kernels=kernels)
    form = registry().get("formulation", fname)(s, {})
    st = s.initial_state(0.0)
    q0 = assemble(s, st.q, st.qd, 0.0).q
    _, ind, dep, _ = rank_revealing(s.jacobian_dense(q0, 0.0))
    assert len(dep) > 0
    form.use_independent_rows(ind)
    assert (form.compiled is not None) == (kernels == "compiled") and form.m < s.m
    y = _state(form, s, np.random.default_rng(2))
    J = form.jacobian(0.1, y)
    Jc = central_jacobian(form, 0.1, y)
    for a, b in _blocks(form, fname):
        for c, d in _blocks(form, fname):
            ref = Jc[a:b, c:d]
            if ref.size:
                np.testing.assert_allclose(J[a:b, c:d], ref, rtol=0,
                                           atol=3e-4 * max(1.0, np.abs(ref).max()),
                                           err_msg=f"block rows {a}:{b}, columns {c}:{d}")


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("fname", ["ggl", "stiff"])
def test_analytic_and_former_difference_jacobians_agree(fname, kernels):
    """``jacobian`` against the former forward differences of f (``jacobian_fd``, kept
    for tests and the benchmark) on the governor: the same matrix within the
    differences' error (observed <= 2.3e-7 of the scale; bound 1e-4)."""
    from mbplugins.formulations import ggl as gglmod, stiff as stiffmod
    fd = gglmod.jacobian_fd if fname == "ggl" else stiffmod.jacobian_fd
    s = governor_model().compile(kernels=kernels)
    form = registry().get("formulation", fname)(s, {})
    y = _state(form, s, np.random.default_rng(3))
    J, Jo = form.jacobian(0.1, y), fd(form, 0.1, y)
    np.testing.assert_allclose(J, Jo, rtol=0, atol=1e-4 * np.abs(Jo).max())


@pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")
@pytest.mark.parametrize("fname", ["ggl", "stiff"])
@pytest.mark.parametrize("model", ["heavy_top", "governor"])
def test_compiled_kernels_equal_their_numpy_references(model, fname):
    """``CompiledGGL.velocity_columns`` = ``velocity_blocks`` (NumPy) to rounding
    (observed 4e-16 of the scale; bound 1e-12), ``constraint_differences`` =
    ``constraint_fd`` (the same steps; the sums' rounding over the step 1e-7: observed
    1.8e-9 of the scale; bound 1e-6), the true rows too (``radial``)."""
    from mbplugins.formulations.dae_common import compiled_constraint_fd, constraint_fd, true_rows
    from mbplugins.formulations.velocity_jacobian import velocity_blocks
    s = MODELS[model]().compile(kernels="compiled")
    form = registry().get("formulation", fname)(s, {})
    c = form.compiled
    rng = np.random.default_rng(9)
    n, m = form.n, form.m
    for t in (0.0, 0.2):
        y = _state(form, s, rng)
        q, v = y[:n], y[n:2 * n]
        lam = rng.standard_normal(m)
        mu = rng.standard_normal(m)
        a = rng.standard_normal(n)
        Fq, Fv, PT = (rng.standard_normal((n, n)), rng.standard_normal((n, n)),
                      rng.standard_normal((n, m)))
        sm = form.solver.spatial
        want = velocity_blocks(sm, q, v, a, Fq, Fv, PT)
        got = velocity_blocks(sm, q, v, a, Fq, Fv, PT, compiled=c)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-12 * np.abs(w).max())
        (Hl, Hm), W = compiled_constraint_fd(form, q, t, (lam, mu), v=v)
        (Hl0, Hm0), W0 = constraint_fd(s, q, t, (lam, mu), v=v)
        for g, w in ((Hl, Hl0), (Hm, Hm0), (W, W0)):
            np.testing.assert_allclose(g, w, rtol=0, atol=1e-6 * max(1.0, np.abs(w).max()))
        assert np.abs(Hl0).max() > 0 and np.abs(W0).max() > 0

        def rows(qq, tt):
            return true_rows(s, qq, tt)

        (Hr,), _ = compiled_constraint_fd(form, q, t, (lam,), radial=True, rows=rows)
        (Hr0,), _ = constraint_fd(s, q, t, (lam,), rows=rows)
        np.testing.assert_allclose(Hr, Hr0, rtol=0, atol=1e-6 * max(1.0, np.abs(Hr0).max()))
        assert np.abs(Hr - Hl0).max() > 1e-3 * np.abs(Hl0).max()   # the radial terms count
    with pytest.raises(ValueError, match="shape"):
        c.velocity_columns(q, v, a, np.zeros((n, n)))
    with pytest.raises(ValueError, match="shape"):
        c.constraint_differences(0.0, q, v, np.zeros((3, m)), np.zeros((3, n, n)),
                                 np.zeros((m, n)))


def test_compiled_constraint_differences_fall_back_to_numpy():
    """A failing constraint evaluation in C: the NumPy differences (which name the
    failing element) instead of an error or NaN."""
    from mbplugins.formulations.dae_common import compiled_constraint_fd, constraint_fd

    class Failing:
        def constraint_differences(self, *args):
            raise FloatingPointError("a constraint evaluation failed")

    s = MODELS["heavy_top"]().compile(kernels="numpy")
    form = registry().get("formulation", "ggl")(s, {})
    form.compiled = Failing()
    y = _state(form, s, np.random.default_rng(1))
    n, m = form.n, form.m
    lam = y[2 * n:2 * n + m]
    (H,), W = compiled_constraint_fd(form, y[:n], 0.1, (lam,), v=y[n:2 * n])
    (H0,), W0 = constraint_fd(s, y[:n], 0.1, (lam,), v=y[n:2 * n])
    np.testing.assert_array_equal(H, H0)
    np.testing.assert_array_equal(W, W0)


@pytest.mark.parametrize("fname", ["ggl", "stiff"])
@pytest.mark.parametrize("model", ["heavy_top", "governor"])
def test_runs_unchanged_within_tolerance(model, fname, monkeypatch):
    """bdf runs with the analytic Newton matrices and with the former differences
    (``jacobian_fd``): the same motion within the integration tolerance (the Jacobian
    only steers Newton; observed <= 6.4e-8 of the scale at rtol 1e-6; bound 1e-5)."""
    from mbplugins.formulations import ggl as gglmod, stiff as stiffmod
    m = MODELS[model]()
    settings = {"analysis": "dynamic", "formulation": fname, "integrator": "bdf",
                "rtol": 1e-6, "atol": 1e-8, "t_end": 0.2, "output_step": 0.02}
    calls = {"n": 0}
    cls = gglmod.GGL if fname == "ggl" else stiffmod.Stiff
    analytic = cls.jacobian

    def counted(self, t, y):
        calls["n"] += 1
        return analytic(self, t, y)

    monkeypatch.setattr(cls, "jacobian", counted)
    new = mbcore.run(m, settings=settings)
    assert calls["n"] > 0
    monkeypatch.setattr(cls, "jacobian", gglmod.jacobian_fd if fname == "ggl"
                        else stiffmod.jacobian_fd)
    old = mbcore.run(m, settings=settings)
    assert new.status == old.status == "finished"
    q_new, q_old = np.asarray(new["q"]), np.asarray(old["q"])
    np.testing.assert_allclose(q_new, q_old, rtol=0, atol=1e-5 * np.abs(q_old).max())
    qd_old = np.asarray(old["qd"])
    np.testing.assert_allclose(np.asarray(new["qd"]), qd_old, rtol=0,
                               atol=1e-5 * max(1.0, np.abs(qd_old).max()))
