"""The projection formulation's post-step projection in C
(``CompiledRHS.enable_projection`` / ``c_post_step``) against its NumPy reference
(``Projection.project``), and the compiled loop that runs it against the Python driver.

Accuracy: both paths take the same Gauss-Newton iterates and the same velocity step
(TAM 674 (2003), lecture of 7 April); the reference solves ``(J W^-1 J^T) x = b`` by
least squares (SVD), the compiled one by Cholesky, so they differ at round-off of
cond(J W^-1 J^T) eps: observed <= 4e-14 relative to max|y| on the models below, bound
1e-11 (> 250x).  Runs: the same steps and evaluations; outputs differ by the round-off
carried along the run, observed <= 6e-14 relative to (1 + max|channel|), bound 1e-10.
"""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.errors import AnalysisError
from mbcore.plugins import registry
from mbcore.system import compiled_available
from loop_checks import assert_compiled_run_matches_python  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

CASES = ["fourbar_dap", "slider_crank_dynamic", "spatial_heavy_top",
         "spatial_slider_crank_dynamic"]


def projection(sysm, **settings):
    return registry().get("formulation", "projection")(sysm, settings)


def perturbed(sysm, rng, k, dq=1e-3, dv=1e-2):
    st = sysm.initial_state(0.0)
    for _ in range(k):
        q = st.q + dq * rng.standard_normal(sysm.n)
        qd = st.qd + dv * rng.standard_normal(sysm.n)
        yield float(rng.uniform(0.0, 1.0)), np.concatenate([q, qd])


@pytest.mark.parametrize("case", CASES)
def test_compiled_projection_equals_reference(examples, case):
    sysm = Model.from_file(examples / f"{case}.yaml").compile(kernels="compiled")
    form = projection(sysm)
    c = form.compiled
    assert c is not None and c.projects and c.handles_post_step
    rng = np.random.default_rng(7)
    for t, y in perturbed(sysm, rng, 8):
        ref = form.project(t, y.copy(), count=False)
        assert ref is not None
        yc = y.copy()
        assert c.post_step_at(t, yc, True) == 1
        np.testing.assert_allclose(yc, ref, rtol=0, atol=1e-11 * max(1.0, np.abs(ref).max()))
        # a projected state is left alone by both paths
        tol = form.settings["projection_tolerance"] * (1 + np.abs(yc[:sysm.n]).max())
        assert np.abs(sysm.phi(yc[:sysm.n], t)).max() <= tol
        again = yc.copy()
        assert c.post_step_at(t, again, True) == 0
        np.testing.assert_array_equal(again, yc)
    assert form.projections == c.projections == 8


def test_velocity_only_projection(examples):
    """Consistent positions, inconsistent velocities: only qd moves, as in the reference."""
    sysm = Model.from_file(examples / "spatial_heavy_top.yaml").compile(kernels="compiled")
    form = projection(sysm)
    st = sysm.initial_state(0.0)
    n = sysm.n
    y = np.concatenate([st.q, st.qd + 0.1 * np.random.default_rng(3).standard_normal(n)])
    ref = form.project(0.2, y.copy(), count=False)
    yc = y.copy()
    assert form.compiled.post_step_at(0.2, yc, False) == 1
    np.testing.assert_array_equal(yc[:n], y[:n])
    np.testing.assert_allclose(yc, ref, rtol=0, atol=1e-11 * max(1.0, np.abs(ref).max()))
    assert form.projections == 0          # count=False


def test_identity_weights(examples):
    sysm = Model.from_file(examples / "fourbar_dap.yaml").compile(kernels="compiled")
    form = projection(sysm, mass_weighted=False)
    for t, y in perturbed(sysm, np.random.default_rng(5), 4):
        ref = form.project(t, y.copy(), count=False)
        yc = y.copy()
        assert form.compiled.post_step_at(t, yc, False) == 1
        np.testing.assert_allclose(yc, ref, rtol=0, atol=1e-11 * max(1.0, np.abs(ref).max()))


def test_no_convergence_is_reported_and_the_run_names_it(examples):
    """A tolerance no iterate can meet: the C projection returns a failure and leaves
    y unchanged; the run hands the step to the Python driver, whose projection raises
    the named error."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    sysm = m.compile(kernels="compiled")
    form = projection(sysm, projection_tolerance=1e-300)
    t, y = next(perturbed(sysm, np.random.default_rng(1), 1))
    yc = y.copy()
    assert form.compiled.post_step_at(t, yc, True) < 0
    np.testing.assert_array_equal(yc, y)
    assert form.projections == 0
    with pytest.raises(AnalysisError, match="did not converge"):
        form.project(t, y.copy())
    with pytest.raises(AnalysisError, match="did not converge"):
        mbcore.run(m, settings={"analysis": "dynamic", "t_end": 0.1, "output_step": 0.05,
                                "formulation": "projection",
                                "formulation_options": {"projection_tolerance": 1e-300}})


def test_other_compiled_rhs_do_not_project(examples):
    """DI keeps its compiled right-hand side without a post-step (unchanged runs)."""
    sysm = Model.from_file(examples / "fourbar_dap.yaml").compile(kernels="compiled")
    di = registry().get("formulation", "di")(sysm, {})
    assert not di.compiled.projects and not di.compiled.handles_post_step
    assert not di.compiled.post_step


def test_kept_rows_keep_the_python_projection(examples):
    """On a subset of the rows the compiled projection is not enabled (the reference
    projects with all rows in least squares); counts made before are kept."""
    sysm = Model.from_file(examples / "fourbar_dap.yaml").compile(kernels="compiled")
    form = projection(sysm)
    t, y = next(perturbed(sysm, np.random.default_rng(2), 1))
    assert form.compiled.post_step_at(t, y, True) == 1
    form.compiled_on_rows(np.arange(sysm.m - 1))
    assert form.compiled is None or not form.compiled.handles_post_step
    assert form.projections == 1


@pytest.mark.parametrize("case, rtol", [("fourbar_dap", 1e-5), ("slider_crank_dynamic", 1e-5),
                                        ("spatial_heavy_top", 1e-8),
                                        ("spatial_slider_crank_dynamic", 1e-8)])
def test_compiled_loop_projects_as_the_python_driver(examples, case, rtol, monkeypatch):
    """The compiled loop runs the projection formulation with its projections in C:
    same steps, evaluations and projections as the Python driver, outputs equal to
    round-off, violations at the projection tolerance; no step-end projection goes
    through Python (the Python projection is only used at outputs, uncounted)."""
    from mbplugins.formulations.projection import Projection
    m = Model.from_file(examples / f"{case}.yaml")
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.05, "integrator": "dopri5",
          "formulation": "projection", "rtol": rtol, "atol": rtol / 100}
    b = mbcore.run(m, settings={**st, "loop": "python"})
    ref = Projection.project

    def at_outputs_only(self, t, y, count=True):
        assert not count, "a step-end projection went through Python"
        return ref(self, t, y, count)
    monkeypatch.setattr(Projection, "project", at_outputs_only)
    a = mbcore.run(m, settings={**st, "loop": "auto"})
    assert_compiled_run_matches_python(a, b)
    # the projection tolerance 1e-12 (1 + |q|): observed below it on positions and
    # within a few times it on velocities (scaled by 1 + |qd|), bound 100x
    tol = 1e-12 * (1 + np.abs(a["q"]).max())
    assert np.max(np.abs(a["violation/position"])) < 100 * tol
    assert np.max(np.abs(a["violation/velocity"])) < 100 * tol * (1 + np.abs(a["qd"]).max())
