"""Output rows in blocks on the DAE and row-by-row output paths against the row-by-row
reference (``settings.output_rows: reference``, ``_Run.output``).

* The DAE formulations (``stiff``: y = [q, s, lam], Nikravesh (1988), §13.3.4;
  ``ggl``) on the compiled loops (genalpha, bdf): an output copies y; the block
  evaluates the formulation's ``outputs`` row by row at its hand-over and every channel
  for the block at once (``_RowBlock(dae=True)``, :mod:`mbcore.system.output_rows`).
* The row-by-row path (here the Python driver, ``loop: python``) with the ``joints``
  channel computed for blocks of rows (``_JointRows``).

Bounds: q, qd, qdd, lam, joints, forces, angular and integrator bit for bit (the same
formulas on the same numbers; observed bit for bit); the computed sums (energy,
reactions, reactions_local) within 1e-12 of the channel's largest value (observed
<= 2.4e-16, margin >= 4000x); the velocity violation ``max |Phi_q qd - nu|`` within
1e-12 of ``max|Phi_q| max|qd|`` (a sum of n products in another order; observed
<= 1.2e-16 of that scale, margin >= 8000x).  The ``joints`` path changes no formula:
its files are equal bit for bit.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model, hookimpl
from mbcore.errors import AnalysisError, ElementEvaluationError
from mbcore.plugins import PluginManager
from mbcore.results.result import Result
from test_output_rows_compiled import FailingTSDA
from test_output_rows_compiled import _assert_rows_equal as _rows_within_bounds

EXACT = ("q", "qd", "qdd", "lam", "joints", "forces", "angular", "integrator")


def _governor():
    sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
    from accuracy_problems import governor_model
    return governor_model()


def _assert_rows_equal(new, old):
    """tests/test_output_rows_compiled.py's comparison (copied channels bit for bit,
    computed sums within 1e-12 of their scale), and the channels of EXACT bit for bit."""
    _rows_within_bounds(new, old)
    for c in EXACT:
        if c in old.channels:
            assert np.array_equal(np.asarray(new[c]), np.asarray(old[c])), c


def _path_of(run, block) -> tuple[bool, bool]:
    """(the DAE block is used, the joints blocks are used) in ``run``."""
    return block is not None and block.dae, run.jrows is not None


@pytest.fixture
def paths(monkeypatch):
    """Per run: :func:`_path_of` as the run chose its rows' path."""
    from mbplugins.analyses.dynamic import _Run
    seen, choose = [], _Run._row_block
    monkeypatch.setattr(_Run, "_row_block",
                        lambda run: seen.append(_path_of(run, b := choose(run))) or b)
    return seen


GOVERNOR = {"t_end": 0.1, "output_step": 0.002, "formulation": "stiff"}


@pytest.mark.parametrize("extra", [
    {"integrator": "genalpha", "step": 1e-3, "integrator_options": {"rho_inf": 0.8}},
    {"integrator": "bdf"},
    {"integrator": "bdf", "formulation": "ggl"},
], ids=["stiff-genalpha", "stiff-bdf", "ggl-bdf"])
def test_governor_dae_rows_in_blocks_equal_the_reference(paths, extra):
    st = {**GOVERNOR, **extra}
    new = mbcore.run(_governor(), analysis="dynamic", settings={**st, "output_rows": "block"})
    old = mbcore.run(_governor(), analysis="dynamic",
                     settings={**st, "output_rows": "reference"})
    assert paths == [(True, True), (False, False)]
    assert new.stats["loop"] == old.stats["loop"] == "compiled"
    assert "joints" in new.channels and len(new) == 51
    _assert_rows_equal(new, old)


def test_stiff_outputs_share_the_radial_coefficients_bit_for_bit():
    """Stiff.outputs evaluates the true gradient's coefficients once for qdd and the
    multipliers: the values of the two separate evaluations, bit for bit."""
    from mbcore.plugins import registry
    from mbplugins.formulations.stiff import _lam_projected
    from mbplugins.formulations.dae_common import radial_coefficients
    form = registry().get("formulation", "stiff")(_governor().compile())
    form.outputs_backend = "python"       # the NumPy reference of the outputs
    res = mbcore.run(_governor(), analysis="dynamic",
                     settings={**GOVERNOR, "t_end": 0.02, "integrator": "genalpha",
                               "step": 1e-3, "record": "q, qd"})
    s, n = form.system, form.n
    for i in (1, 5, 10):
        q, qd, t = np.asarray(res["q"][i]), np.asarray(res["qd"][i]), float(res.t[i])
        y0, _ = form.initialize(q, qd, t)
        y0[2 * n:] = np.linspace(-1.0, 2.0, y0.size - 2 * n)      # some multipliers
        q1, v1, qdd1, lam1 = (np.array(x) for x in form.outputs(t, y0))
        yy = np.array(y0)
        yy[:n] = form.consistent_positions(yy[:n], t)
        assert np.array_equal(q1, yy[:n]) and np.array_equal(v1, yy[n:2 * n])
        f = form.rhs(t, yy)                   # the coefficients evaluated in rhs ...
        assert np.array_equal(qdd1, f[n:2 * n])
        lam = _lam_projected(s, yy[:n], t, yy[2 * n:])     # ... and here again
        assert np.array_equal(lam1, lam)
        assert np.any(radial_coefficients(s, yy[:n], t, s.jacobian_dense(yy[:n], t)))


def test_spatial_slider_crank_python_driver_joints_in_blocks_bit_for_bit(examples, paths):
    st = {"t_end": 1.0, "loop": "python"}
    name = examples / "spatial_slider_crank_dynamic.yaml"
    new = mbcore.run(name, analysis="dynamic", settings={**st, "output_rows": "block"})
    old = mbcore.run(name, analysis="dynamic", settings={**st, "output_rows": "reference"})
    assert paths == [(False, True), (False, False)]
    assert new.stats["loop"] == old.stats["loop"] == "python"
    assert "joints" in new.channels and len(new) == 101
    assert new.events == old.events and np.array_equal(new.t, old.t)
    for c in old.channels:
        assert np.array_equal(np.asarray(new[c]), np.asarray(old[c])), c


def _cut_at(path, t_cut):
    """The file as a run killed right after its checkpoint at ``t_cut`` leaves it."""
    import h5py
    with h5py.File(path, "r+") as f:
        g = f["checkpoint"]
        k = int(np.searchsorted(g["t"][:], t_cut + 1e-12))
        assert k >= 1 and abs(g["t"][k - 1] - t_cut) < 1e-12
        for ds in g.values():
            ds.resize((k,) + ds.shape[1:])
        f.attrs["status"] = "running"


@pytest.mark.parametrize("case", ["stiff-genalpha", "stiff-bdf", "slider-crank-python"])
def test_resume_inside_a_block_gives_the_uninterrupted_file(examples, tmp_path, paths, case):
    """A checkpoint due at a row ends the block there (the row's state is the
    checkpoint's); a run killed after the checkpoint at 0.1 s, in the middle of what
    would otherwise be one block, and resumed writes the uninterrupted run's file bit
    for bit."""
    from mbcore import resume
    if case == "slider-crank-python":
        model = lambda: examples / "spatial_slider_crank_dynamic.yaml"      # noqa: E731
        st = {"t_end": 0.3, "output_step": 0.005, "loop": "python"}
        used = (False, True)
    else:
        model = _governor
        st = {**GOVERNOR, "t_end": 0.2}
        st.update({"integrator": "genalpha", "step": 1e-3} if case == "stiff-genalpha"
                  else {"integrator": "bdf"})
        used = (True, True)
    ref, part = tmp_path / "ref.h5", tmp_path / "part.h5"
    mbcore.run(model(), analysis="dynamic", settings=st, output=ref)
    mbcore.run(model(), analysis="dynamic", settings=st, output=part,
               checkpoint_every=0.05, checkpoint_seconds=1e9)
    _cut_at(part, 0.1)
    resume(part)
    assert paths == [used] * 3
    with Result(ref) as a, Result(part) as b:
        assert a.status == b.status == "finished"
        assert a.channels == b.channels and np.array_equal(a.t, b.t) and len(a) > 50
        for c in a.channels:
            assert np.array_equal(np.asarray(a[c]), np.asarray(b[c])), c


class _Types:
    """tests/test_output_rows_compiled.py's spring whose outputs fail after t = 0.1
    (called one row at a time: no ``rows_stacked``)."""
    @hookimpl
    def mbcore_force_types(self):
        return [FailingTSDA]


@pytest.mark.parametrize("extra, used", [
    ({"formulation": "stiff", "integrator": "bdf"}, (True, True)),     # the DAE block
    ({"loop": "python"}, (False, True)),                                # joints blocks
], ids=["stiff-bdf", "python-driver"])
def test_a_failing_run_keeps_its_rows_up_to_the_failure(examples, tmp_path, paths, extra,
                                                         used):
    pm = PluginManager()
    pm.register(_Types(), name="late_failing")
    d = yaml.safe_load((examples / "platform.yaml").read_text())
    d["forces"][0]["type"] = "failing_tsda"
    files = {}
    for mode in ("block", "reference"):
        files[mode] = tmp_path / f"{mode}.h5"
        with pytest.raises(AnalysisError, match="no outputs after t = 0.1"):
            mbcore.run(Model.from_dict(d, registry=pm.registry), analysis="dynamic",
                       settings={"t_end": 0.3, "output_step": 0.005, "output_rows": mode,
                                 **extra}, plugins=pm, output=files[mode])
    assert paths == [used, (False, False)]
    with Result(files["block"]) as a, Result(files["reference"]) as b:
        assert a.status == b.status == "failed"
        assert np.array_equal(a.t, b.t) and abs(a.t[-1] - 0.1) < 1e-12
        assert "joints" in a.channels
        for c in b.channels:
            got, ref = np.asarray(a[c]), np.asarray(b[c])
            assert got.shape == ref.shape, c
            if c in EXACT or "loop" in extra:
                assert np.array_equal(got, ref), c
            else:           # (observed <= 4.3e-17 of max(1, the largest value))
                assert np.allclose(got, ref, rtol=0, atol=1e-12 * max(
                    1.0, np.max(np.abs(ref), initial=0.0))), c


@pytest.mark.parametrize("extra", [
    {"integrator": "genalpha", "step": 1e-3, "integrator_options": {"rho_inf": 0.8}},
    {"integrator": "bdf"},
    {"integrator": "bdf", "formulation": "ggl"},
], ids=["stiff-genalpha", "stiff-bdf", "ggl-bdf"])
@pytest.mark.parametrize("record", [["q"], ["q", "qd", "energy", "forces", "joints",
                                            "integrator"], ["q", "qdd"]],
                         ids=["q", "kinematic", "with-qdd"])
def test_rows_without_qdd_or_lam_skip_the_solve(monkeypatch, extra, record):
    """Rows whose channels read neither qdd, lam nor Phi_q take q and qd from the
    formulation's ``output_positions`` (no solve for the accelerations and
    multipliers): the reference's rows bit for bit (energy within the module's bound),
    and ``outputs`` is not called for them; a recorded ``qdd`` keeps ``outputs``."""
    from mbplugins.analyses.dynamic import _RowBlock
    from mbplugins.formulations.ggl import GGL
    from mbplugins.formulations.stiff import Stiff
    seen, init = [], _RowBlock.__init__

    def spy_init(self, run, dae=False):
        init(self, run, dae)
        seen.append(self.positions_only)
    monkeypatch.setattr(_RowBlock, "__init__", spy_init)
    calls = {"outputs": 0}
    for cls in (Stiff, GGL):
        def counted(self, t, y, _f=cls.outputs):
            calls["outputs"] += 1
            return _f(self, t, y)
        monkeypatch.setattr(cls, "outputs", counted)
    st = {**GOVERNOR, **extra, "record": record}
    new = mbcore.run(_governor(), analysis="dynamic", settings={**st, "output_rows": "block"})
    in_block = calls["outputs"]
    old = mbcore.run(_governor(), analysis="dynamic",
                     settings={**st, "output_rows": "reference"})
    assert new.stats["loop"] == old.stats["loop"] == "compiled"
    skip = "qdd" not in record
    assert seen == [skip]
    assert (in_block == 0) if skip else (in_block >= len(new) == 51)
    assert calls["outputs"] - in_block >= len(old) == 51     # the reference's rows
    assert new.channels == old.channels
    _assert_rows_equal(new, old)
