"""The stiff (index-3) form's output rows by its compiled right-hand side
(``Stiff.outputs_backend = "compiled"``) against the NumPy reference (``"python"``:
``Stiff.rhs`` and ``dae_common.radial_coefficients``).

qdd = M^-1 (Q + Phi_q^T lam) (spatial: with the true gradient's reactions, Nikravesh
(1988), §13.3.4) is a sum of force terms that cancel on stiff models (the governor's
8e5 N/m springs: |qdd| ~ 1e1 from terms ~ 1e7); the two paths sum in another order,
so they agree to the rounding of that sum.  Bound: ``|dqdd| <= 1e-13 S`` with
``S = max_i (|M^-1| (|Q| + |Phi_q|^T |lam|))_i`` (the size of the terms summed;
observed <= 2.8e-16 S on the governor and the spatial slider-crank, margin >= 350x;
planar <= 5e-17 S).  Positions and velocities are bit for bit; the multipliers (the
projected ones: ``lam + a . lam / 2`` on the normalisation rows) within 1e-12 of
max |lam| (observed <= 1.3e-16 of it, margin >= 7000x; the same under
OPENBLAS_CORETYPE=Sandybridge: <= 1.8e-16 S for qdd).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry
import mbplugins.formulations.stiff as stiff_module
from mbplugins.formulations.stiff import _phi_rows


def _governor():
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from accuracy_problems import governor_model
    return governor_model()


def _model(name, examples):
    return _governor() if name == "governor" else Model.from_file(examples / name)


CASES = {
    "governor": {"t_end": 0.1, "output_step": 0.01, "integrator": "genalpha", "step": 1e-3},
    "spatial_slider_crank_dynamic.yaml": {"t_end": 0.3, "output_step": 0.01,
                                          "integrator": "bdf"},
    "slider_crank_dynamic.yaml": {"t_end": 0.3, "output_step": 0.01, "integrator": "bdf"},
}


def _terms_scale(form, q, v, lam, t):
    """S = max_i (|M^-1| (|Q| + |Phi_q|^T |lam|))_i at (q, v, lam, t)."""
    s, n = form.system, form.n
    Q = s.forces(q, v, t)
    P = _phi_rows(s, q, t) if form.spatial else s.jacobian_dense(q, t)
    x = np.abs(Q) + np.abs(P).T @ np.abs(lam)
    if form.spatial:
        Minv = np.column_stack([form.solver.mass_solve(q, v, e) for e in np.eye(n)])
    else:
        Minv = np.diag(form.solver.minv)
    return float(np.max(np.abs(Minv) @ x))


@pytest.mark.parametrize("name", list(CASES))
def test_compiled_outputs_agree_with_the_numpy_reference(examples, monkeypatch, name):
    model = _model(name, examples)
    res = mbcore.run(model, analysis="dynamic",
                     settings={**CASES[name], "formulation": "stiff", "record": "q, qd, lam"})
    form = registry().get("formulation", "stiff")(model.compile())
    assert form.compiled is not None
    n = form.n
    rng = np.random.default_rng(7)
    for i in (1, len(res) // 2, len(res) - 1):
        q, qd, t = np.asarray(res["q"][i]), np.asarray(res["qd"][i]), float(res.t[i])
        y, _ = form.initialize(q, qd, t)
        lam_scale = max(1.0, float(np.max(np.abs(np.asarray(res["lam"][i])))))
        y[2 * n:] = lam_scale * rng.uniform(-1.0, 1.0, y.size - 2 * n)
        form.outputs_backend = "python"
        ref = [np.array(x) for x in form.outputs(t, y)]
        form.outputs_backend = "compiled"
        with monkeypatch.context() as mp:       # the compiled path: no NumPy f, no
            mp.setattr(stiff_module, "_radial",  # NumPy radial coefficients
                       lambda *a, **k: pytest.fail("NumPy radial coefficients"))
            mp.setattr(type(form), "rhs", lambda *a, **k: pytest.fail("NumPy rhs"))
            got = [np.array(x) for x in form.outputs(t, y)]
        assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])
        S = _terms_scale(form, ref[0], ref[1], y[2 * n:], t)
        # observed <= 2.8e-16 S (governor, spatial slider-crank): margin >= 350x
        assert np.max(np.abs(got[2] - ref[2])) <= 1e-13 * S, (name, i)
        # observed <= 1.3e-16 max|lam| (0 on other BLAS kernels): margin >= 7000x
        assert np.max(np.abs(got[3] - ref[3])) <= 1e-12 * np.max(np.abs(ref[3])), (name, i)


def test_compiled_outputs_do_not_count_as_evaluations():
    """An output row is not an integration cost: the run's evaluation count is that of
    the same run with outputs at its ends only."""
    st = {**CASES["governor"], "formulation": "stiff"}
    rows = mbcore.run(_governor(), analysis="dynamic", settings=st)
    ends = mbcore.run(_governor(), analysis="dynamic",
                      settings={**st, "output_step": st["t_end"]})
    assert len(rows) == 11 and len(ends) == 2
    assert rows.stats["integrator_nfev"] == ends.stats["integrator_nfev"] > 0
