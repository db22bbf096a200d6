"""Output rows of the compiled loop computed for a block of rows at once
(``settings.output_rows: block``, :mod:`mbcore.system.output_rows`) against the
row-by-row reference (``output_rows: reference``, ``_Run.output``).

Bounds: copied channels (q, qd, qdd, lam, integrator) bit for bit; the per-type
channels (forces, reactions_local: the same element functions on the same numbers,
called on arrays of other lengths, so vectorised transcendental functions may take
other code paths: observed bit for bit) and the computed sums (energy, reactions,
points, angular) within 1e-12 of the channel's largest value (observed <= 5e-16);
the velocity violation
``max |Phi_q qd - nu|`` within 1e-12 of ``max|Phi_q| max|qd|`` (a sum of n products in
another order; observed <= 2e-16 of that scale).
"""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import mbcore
from mbcore import Model, hookimpl
from mbcore.errors import AnalysisError, ElementEvaluationError
from mbcore.plugins import PluginManager
from mbcore.results.result import Result
from mbplugins.planar.constraints import Revolute
from mbplugins.planar.forces import TSDA

EXACT = ("q", "qd", "qdd", "lam", "integrator")


def _assert_rows_equal(new, old):
    assert new.channels == old.channels
    assert np.array_equal(new.t, old.t) and len(new) == len(old) > 0
    assert new.events == old.events
    sysm = new.system
    for c in old.channels:
        got, ref = np.asarray(new[c]), np.asarray(old[c])
        assert got.shape == ref.shape, c
        if c in EXACT:
            assert np.array_equal(got, ref), c
            continue
        scale = np.max(np.abs(ref), initial=0.0)
        if c == "violation" and sysm.m and not {"q", "qd"} <= set(new.channels):
            scale = max(scale, 1.0)             # (lengths and speeds of order 1 here)
        elif c == "violation" and sysm.m:
            q, qd = np.asarray(new["q"]), np.asarray(new["qd"])
            J = max(np.max(np.abs(sysm.jacobian_dense(q[i], float(new.t[i]))))
                    for i in (0, len(q) // 2, len(q) - 1))
            scale = max(scale, J * np.max(np.abs(qd)))
        assert np.max(np.abs(got - ref), initial=0.0) <= 1e-12 * scale, c


def _run(model, mode, plugins=None, **extra):
    st = {"t_end": 0.3, "output_step": 0.005, "output_rows": mode}
    st.update(extra)
    return mbcore.run(model, analysis="dynamic", settings=st, plugins=plugins)


@pytest.fixture
def block_used(monkeypatch):
    """Records whether each run took the block path."""
    import mbplugins.analyses.dynamic as dyn
    seen = []
    orig = dyn._Run._row_block

    def spy(self):
        b = orig(self)
        seen.append(b is not None)
        return b
    monkeypatch.setattr(dyn._Run, "_row_block", spy)
    return seen


@pytest.mark.parametrize("name", [
    "platform.yaml",                    # springs (tsda), cs
    "slider_crank.yaml",                # a time-dependent driver
    "andrews_squeezer.yaml",            # springs, di
    "link_gear_multiplier.yaml",        # gears
    "quick_return_1.yaml",
    "fourbar_spring_modes.yaml",
    "spatial_heavy_top.yaml",           # spatial: G conversion of the reactions
    "spatial_slider_crank_dynamic.yaml",    # spatial forces, points, universal joint
    "spatial_boom_actuators.yaml",
    "spatial_gyroscope.yaml",
    "spatial_rssr.yaml",
])
def test_every_channel_equals_the_row_by_row_reference(examples, name, block_used):
    new = _run(examples / name, "block")
    old = _run(examples / name, "reference")
    assert block_used == [True, False]
    assert new.stats["loop"] == "compiled"
    _assert_rows_equal(new, old)


def test_a_chosen_subset_of_channels(examples, block_used):
    for rec in ("reactions, violation", "forces", "points, angular, lam",
                "energy, reactions_local"):
        new = _run(examples / "spatial_slider_crank_dynamic.yaml", "block", record=rec)
        old = _run(examples / "spatial_slider_crank_dynamic.yaml", "reference", record=rec)
        _assert_rows_equal(new, old)
    assert all(block_used[::2]) and not any(block_used[1::2])


# -- types that do not declare rows_stacked: called at the output, one row at a time ---
class RowTSDA(TSDA):
    """The built-in spring (its compiled kernel) without ``rows_stacked``; counts
    the rows its output methods were called with."""
    name = "row_tsda"
    rows_stacked = False
    calls: list = []

    def outputs(self, par, qb, qdb, t, f):
        RowTSDA.calls.append(par.shape[0])
        return super().outputs(par, qb, qdb, t, f)


class RowRevolute(Revolute):
    name = "row_revolute"
    rows_stacked = False


class FailingTSDA(TSDA):
    """Its outputs cannot be evaluated after t = 0.1 (a run failing midway)."""
    name = "failing_tsda"
    rows_stacked = False

    def outputs(self, par, qb, qdb, t, f):
        if t > 0.1:
            raise ElementEvaluationError(0, "no outputs after t = 0.1")
        return super().outputs(par, qb, qdb, t, f)


class FailingStackedTSDA(TSDA):
    """Declares ``rows_stacked``; its outputs cannot be evaluated once the platform
    (body j) rises above y = 0.49 (a failure inside a block's stacked call)."""
    name = "failing_stacked_tsda"
    rows_stacked = True

    def outputs(self, par, qb, qdb, t, f):
        high = np.nonzero(qb[:, 1, 1] > 0.49)[0]
        if high.size:
            raise ElementEvaluationError(int(high[0]), "no outputs above y = 0.49")
        return super().outputs(par, qb, qdb, t, f)


class _Types:
    @hookimpl
    def mbcore_force_types(self):
        return [RowTSDA, FailingTSDA, FailingStackedTSDA]

    @hookimpl
    def mbcore_constraint_types(self):
        return [RowRevolute]


@pytest.fixture
def pm():
    p = PluginManager()
    p.register(_Types(), name="row_types")
    return p


def _platform(examples, spring="tsda", joint="revolute"):
    d = yaml.safe_load((examples / "platform.yaml").read_text())
    d["forces"][0]["type"] = spring
    for j in d["joints"][:2]:
        j["type"] = joint
    return d


def test_types_without_rows_stacked_are_called_per_row_and_agree(examples, pm, block_used):
    d = _platform(examples, "row_tsda", "row_revolute")
    RowTSDA.calls.clear()
    new = _run(Model.from_dict(d, registry=pm.registry), "block", plugins=pm)
    assert block_used == [True] and set(RowTSDA.calls) == {1}      # one element, one row
    assert len(RowTSDA.calls) == len(new)
    old = _run(Model.from_dict(d, registry=pm.registry), "reference", plugins=pm)
    _assert_rows_equal(new, old)
    # and the same numbers as the built-in types, evaluated with the rows stacked
    ref = _run(examples / "platform.yaml", "block")
    _assert_rows_equal(new, ref)


@pytest.mark.parametrize("spring, message", [
    ("failing_tsda", "no outputs after t = 0.1"),               # called at the output
    ("failing_stacked_tsda", "'spring'.*no outputs above y = 0.49")])   # in the block
def test_a_run_failing_midway_writes_every_row_before_the_failure(examples, pm, tmp_path,
                                                                 block_used, spring,
                                                                 message):
    d = _platform(examples, spring)
    files = {}
    for mode in ("block", "reference"):
        files[mode] = tmp_path / f"{mode}.h5"
        with pytest.raises(AnalysisError, match=message):
            mbcore.run(Model.from_dict(d, registry=pm.registry), analysis="dynamic",
                       settings={"t_end": 0.3, "output_step": 0.005, "output_rows": mode},
                       plugins=pm, output=files[mode])
    assert block_used == [True, False]
    # the rows written before the failure: copied channels bit for bit, computed sums
    # within 1e-12 of max(1, the channel's largest value) (observed <= 1.4e-16)
    with Result(files["block"]) as a, Result(files["reference"]) as b:
        assert np.array_equal(a.t, b.t) and 0.02 < a.t[-1] <= 0.1 + 1e-12
        assert a.status == b.status == "failed"
        for c in b.channels:
            assert np.asarray(a[c]).shape == np.asarray(b[c]).shape, c
            assert np.allclose(a[c], b[c], rtol=0, atol=1e-12 * max(
                1.0, np.max(np.abs(b[c]), initial=0.0))), c


def test_python_only_type_falls_back_to_the_reference(examples, stub_pm, block_used):
    """A Python-only spring: no compiled right-hand side, so no block path; the run
    records what the reference records."""
    d = _platform(examples)
    d["forces"][0] = {"name": "spring", "type": "stub_spring", "body_i": "ground",
                      "body_j": "platform", "point_i": [0.25, 0], "point_j": [-0.25, 0],
                      "stiffness": 700.0, "free_length": 0.6}
    new = _run(Model.from_dict(d, registry=stub_pm.registry), "block", plugins=stub_pm)
    old = _run(Model.from_dict(d, registry=stub_pm.registry), "reference", plugins=stub_pm)
    assert block_used == [False, False]
    _assert_rows_equal(new, old)


def test_the_row_methods_agree_with_the_row_by_row_methods(examples):
    """The System's block methods against its row methods at recorded states: the
    same sums in another order, within 1e-12 of each quantity's largest value
    (observed <= 2.7e-16)."""
    res = _run(examples / "spatial_slider_crank_dynamic.yaml", "reference")
    s = res.system
    Q, QD, QDD = (np.asarray(res[c]) for c in ("q", "qd", "qdd"))
    LAM, T = np.asarray(res["lam"]), np.asarray(res.t)
    FV = np.stack([s.functions_at(float(t)).copy() for t in T]) if s.function_count else None
    JD = np.stack([(s.jacobian(Q[i], float(T[i])), s.jacobian_values.copy())[1]
                   for i in range(len(T))])
    ref = {
        "T": [s.kinetic_energy(QD[i], Q[i]) for i in range(len(T))],
        "V": [s.potential_energy(Q[i], float(T[i])) for i in range(len(T))],
        "R": [s.reactions(Q[i], float(T[i]), LAM[i]).copy() for i in range(len(T))],
        "P": [s.point_kinematics(Q[i], QD[i], QDD[i]).ravel().copy() for i in range(len(T))],
        "A": [s.angular_kinematics(Q[i], QD[i], QDD[i]).ravel().copy()
              for i in range(len(T))],
        "F": [s.force_outputs(Q[i], QD[i], float(T[i])).copy() for i in range(len(T))],
        "L": [s.reactions_local(Q[i], float(T[i]), LAM[i]).copy() for i in range(len(T))]}
    got = {"T": s.kinetic_energy_rows(Q, QD), "V": s.potential_energy_rows(Q, T, FV),
           "R": s.reactions_rows(Q, LAM, JD), "P": s.point_kinematics_rows(Q, QD, QDD),
           "A": s.angular_kinematics_rows(Q, QD, QDD),
           "F": s.force_outputs_rows(Q, QD, T, FV),
           "L": s.reactions_local_rows(Q, T, FV, LAM)}
    for k, v in ref.items():
        v = np.asarray(v)
        assert got[k].shape == v.shape, k
        assert np.max(np.abs(got[k] - v)) <= 1e-12 * np.max(np.abs(v)), k
    # a row's value does not depend on the other rows of its block (resume: bit for bit)
    for name, args in (("kinetic_energy_rows", (Q, QD)), ("reactions_rows", (Q, LAM, JD)),
                       ("point_kinematics_rows", (Q, QD, QDD))):
        whole = getattr(s, name)(*args)
        part = getattr(s, name)(*(a[3:7] for a in args))
        assert np.array_equal(whole[3:7], part), name


@pytest.mark.parametrize("name", ["platform.yaml", "slider_crank.yaml",
                                  "spatial_slider_crank_dynamic.yaml"])
def test_compiled_row_evaluation_equals_its_python_reference(examples, name, block_used):
    """``CompiledRHS.output_row`` (one call per row: qdd, lam, Phi_q, Phi, nu, the time
    functions) against the Python calls it replaces (``output_rows: block_python``):
    the same kernels on the same numbers, bit for bit."""
    new = _run(examples / name, "block")
    old = _run(examples / name, "block_python")
    assert block_used == [True, True]
    assert new.channels == old.channels and np.array_equal(new.t, old.t)
    for c in old.channels:
        assert np.array_equal(np.asarray(new[c]), np.asarray(old[c])), c


def test_output_row_checks_its_arguments(examples):
    """Wrong sizes are a ValueError naming the argument, never a write outside a buffer."""
    from mbplugins.formulations.baumgarte import DI
    sysm = Model.from_file(examples / "platform.yaml").compile()
    rhs = DI(sysm, {}).compiled
    assert rhs is not None
    n, m = sysm.n, sysm.m
    y = np.zeros(2 * n + 1)
    with pytest.raises(ValueError, match="qdd_rows"):
        rhs.output_row(0.0, y, 0, np.zeros((1, n - 1)), np.zeros((1, m)))
    with pytest.raises(ValueError, match="row 3 is outside"):
        rhs.output_row(0.0, y, 3, np.zeros((2, n)), np.zeros((2, m)))
    with pytest.raises(ValueError, match="jac_rows"):
        rhs.output_row(0.0, y, 0, np.zeros((1, n)), np.zeros((1, m)), np.zeros((1, 3)))
    with pytest.raises(ValueError, match="phi_rows"):
        rhs.output_row(0.0, y, 0, np.zeros((1, n)), np.zeros((1, m)), None,
                       np.zeros((1, m - 1)))


@pytest.mark.parametrize("name", ["platform.yaml", "spatial_slider_crank_dynamic.yaml"])
def test_resume_inside_a_block_is_bit_identical(examples, name, tmp_path, block_used):
    """A checkpoint ends its block at its row (its state is that row's); a run killed
    after it and resumed records every channel as the uninterrupted run did, bit for bit
    (a row's value does not depend on the other rows of its block)."""
    import h5py
    from mbcore import resume
    st = {"t_end": 0.3, "output_step": 0.005, "rtol": 1e-8, "atol": 1e-10}
    ref = tmp_path / "ref.h5"
    mbcore.run(examples / name, analysis="dynamic", settings=st, output=ref)
    part = tmp_path / "part.h5"
    mbcore.run(examples / name, analysis="dynamic", settings=st, output=part,
               checkpoint_every=0.1, checkpoint_seconds=1e9)
    assert all(block_used)
    with h5py.File(part, "r+") as f:             # killed right after the one at 0.1
        g = f["checkpoint"]
        k = int(np.searchsorted(g["t"][:], 0.1 + 1e-12))
        assert k >= 1
        for ds in g.values():
            ds.resize((k,) + ds.shape[1:])
        f.attrs["status"] = "running"
    resume(part)
    with Result(ref) as a, Result(part) as b:
        assert a.channels == b.channels and np.array_equal(a.t, b.t)
        for c in a.channels:
            assert np.array_equal(np.asarray(a[c]), np.asarray(b[c])), c


def test_point_and_angular_row_kernels_equal_the_row_kernels_and_numpy():
    """The compiled block kernels of the points and angular channels
    (``_kinematics.point_kinematics_spatial_rows``, ``angular_kinematics_rows``) equal
    the per-row compiled kernels bit for bit (the same arithmetic, row after row; also
    a point of the ground and rows with adjacent entries inside wider rows), and
    their NumPy reference (``output_rows: the System's methods on the numpy backend``)
    within 1e-12 of the largest value (observed <= 3e-16)."""
    from spatial_points import three_bodies_with_points
    rng = np.random.default_rng(5)
    sc, sn = three_bodies_with_points(rng, 0.5)
    R, n = 7, sc.n
    Y = rng.normal(size=(R, 3 * n + 1))             # (rows of a wider block)
    for k in range(3):
        o = sc.body_offsets[k] + 3
        Y[:, o:o + 4] /= np.linalg.norm(Y[:, o:o + 4], axis=1, keepdims=True)
    Q, QD, QDD = Y[:, :n], Y[:, n:2 * n], Y[:, 2 * n:3 * n]
    P, A = sc.point_kinematics_rows(Q, QD, QDD), sc.angular_kinematics_rows(Q, QD, QDD)
    Pn, An = sn.point_kinematics_rows(Q, QD, QDD), sn.angular_kinematics_rows(Q, QD, QDD)
    for i in range(R):
        assert np.array_equal(P[i], sc.point_kinematics(Q[i], QD[i], QDD[i]).ravel())
        assert np.array_equal(A[i], sc.angular_kinematics(Q[i], QD[i], QDD[i]).ravel())
    assert np.array_equal(P[:, -9:], np.tile([0.3, -0.2, 0.5, 0, 0, 0, 0, 0, 0], (R, 1)))
    # the NumPy reference sums in another order: observed <= 3e-16, 3000x margin
    assert np.max(np.abs(P - Pn)) <= 1e-12 * np.max(np.abs(Pn))
    assert np.max(np.abs(A - An)) <= 1e-12 * np.max(np.abs(An))
    from mbcore._ext import _kinematics as K
    with pytest.raises(ValueError, match="same rows"):
        K.point_kinematics_spatial_rows(Q, QD[:3], QDD, sc._pt_off, sc._pt_loc,
                                        np.empty((R, 36)))
    with pytest.raises(ValueError, match="columns"):
        K.angular_kinematics_rows(Q, QD, QDD, sc._ang_p, np.empty((R, 17)))
    with pytest.raises(ValueError, match="adjacent"):
        K.angular_kinematics_rows(Q[:, ::2], QD[:, ::2], QDD[:, ::2], sc._ang_p,
                                  np.empty((R, 18)))


def test_bound_output_rows_equal_output_row(examples):
    """``CompiledRHS.output_row_at`` into the arrays bound once by
    ``bind_output_rows`` writes the row's (t, y, statistics) and what ``output_row``
    writes, bit for bit; rows bound by another owner are refused (-1, nothing
    written) until bound again; wrong sizes are a ValueError naming the argument."""
    from mbplugins.formulations.baumgarte import CS
    sysm = Model.from_file(examples / "spatial_slider_crank_dynamic.yaml").compile()
    rhs = CS(sysm, {}).compiled
    assert rhs is not None
    n, m, nj, nf = sysm.n, sysm.m, sysm.jacobian_values.size, sysm.function_count
    R = 4
    rng = np.random.default_rng(2)
    s0 = sysm.initial_state()
    Yin = np.zeros((R, 2 * n + 1))
    Yin[:, :n] = s0.q
    Yin[:, n:2 * n] = s0.qd + 0.01 * rng.normal(size=(R, n))

    def arrays():
        return (np.zeros((R, 2 * n + 1)), np.zeros(R), np.zeros((R, 5)), np.zeros((R, n)),
                np.zeros((R, m)), np.zeros((R, nj)), np.zeros((R, m)), np.zeros((R, m)),
                np.zeros((R, 3 * nf)))
    stats = np.arange(5.0)
    a, b = arrays(), arrays()
    owner, other = object(), object()
    rhs.bind_output_rows(owner, a[0], a[1], a[2], stats, *a[3:])
    for i in range(R):
        assert rhs.output_row_at(owner, 0.1 * i, Yin[i], i) == 0
        assert rhs.output_row(0.1 * i, Yin[i], i, *b[3:]) == 0
    assert np.array_equal(a[0], Yin) and np.array_equal(a[1], 0.1 * np.arange(R))
    assert np.array_equal(a[2], np.tile(stats, (R, 1)))
    for x, y in zip(a[3:], b[3:]):
        assert np.array_equal(x, y)
    c = arrays()
    rhs.bind_output_rows(other, c[0], c[1], c[2], stats)      # copies only
    before = [x.copy() for x in a]
    assert rhs.output_row_at(owner, 0.0, Yin[0], 0) == -1
    assert all(np.array_equal(x, y) for x, y in zip(a, before))
    assert rhs.output_row_at(other, 0.5, Yin[1], 2) == 0
    assert np.array_equal(c[0][2], Yin[1]) and c[1][2] == 0.5 and not c[3].any()
    with pytest.raises(ValueError, match="outside the bound rows"):
        rhs.output_row_at(other, 0.0, Yin[0], R)
    with pytest.raises(ValueError, match="entries"):
        rhs.output_row_at(other, 0.0, Yin[0, :-1], 0)
    with pytest.raises(ValueError, match="qdd_rows"):
        rhs.bind_output_rows(owner, a[0], a[1], a[2], stats, np.zeros((R, n - 1)), a[4])
    with pytest.raises(ValueError, match="jac_rows"):
        rhs.bind_output_rows(owner, a[0], a[1], a[2], stats, a[3], a[4], np.zeros((R, 3)))


@pytest.mark.parametrize("name", ["spatial_slider_crank_dynamic.yaml", "platform.yaml"])
def test_jacobian_row_kernels_equal_their_numpy_reference(examples, name):
    """The compiled block kernels over the rows' Jacobian values
    (``_output_rows.violation_rows_dense``, ``generalised_rows``) equal the NumPy
    methods of the numpy backend bit for bit (the same products summed in the same
    order), also with a NaN in a row (it stays in that row only); bad indices are a
    ValueError naming the argument."""
    res = _run(examples / name, "reference", record="q, qd, lam")
    model = Model.from_file(examples / name)
    sc, sn = model.compile(kernels="compiled"), model.compile(kernels="numpy")
    assert sc.dense
    Q, QD, LAM = (np.asarray(res[c]) for c in ("q", "qd", "lam"))
    T = np.asarray(res.t)
    JD = np.stack([(sc.jacobian(Q[i], float(T[i])), sc.jacobian_values.copy())[1]
                   for i in range(len(T))])
    PHI = np.stack([sc.phi(Q[i], float(T[i])).copy() for i in range(len(T))])
    NU = np.stack([sc.nu(Q[i], float(T[i])).copy() for i in range(len(T))])
    JD[3, :] = np.nan
    for s in (sc, sn):
        assert s.backend == ("compiled" if s is sc else "numpy")
    vc, vn = sc.violation_rows(QD, JD, PHI, NU), sn.violation_rows(QD, JD, PHI, NU)
    assert np.array_equal(vc, vn, equal_nan=True)
    assert np.isnan(vc[3, 1]) and not np.isnan(np.delete(vc, 3, axis=0)).any()
    for gc, gn in zip(sc.generalised_rows(LAM, JD), sn.generalised_rows(LAM, JD)):
        assert np.array_equal(gc, gn, equal_nan=True)
    assert np.array_equal(sc.reactions_rows(Q, LAM, JD), sn.reactions_rows(Q, LAM, JD),
                          equal_nan=True)
    from mbcore._ext import _output_rows as K
    pos, col = sc._dense_rows_layout()
    with pytest.raises(ValueError, match="pos"):
        K.violation_rows_dense(QD, JD, PHI, NU, pos + JD.shape[1], col, np.empty((len(T), 2)))
    with pytest.raises(ValueError, match="same rows"):
        K.violation_rows_dense(QD[:2], JD, PHI, NU, pos, col, np.empty((len(T), 2)))
    g = sc._element_groups[0]
    jb = np.ascontiguousarray(g.jac_blocks, dtype=np.intp)
    lr = np.ascontiguousarray(g.lam_rows, dtype=np.intp)
    with pytest.raises(ValueError, match="lr"):
        K.generalised_rows(JD, LAM, jb, lr + LAM.shape[1],
                           np.empty((len(T), jb.shape[0]) + jb.shape[2:]))


def test_a_build_without_the_block_kernels_takes_the_numpy_methods(examples, monkeypatch,
                                                                   block_used):
    """A build that lacks a compiled block kernel (an older extension build) computes
    those channels with the NumPy methods, names the kernel in ``MISSING_KERNELS``,
    and records what the row-by-row reference records (the usual bounds)."""
    import mbcore.system.output_rows as O
    monkeypatch.setattr(O, "_KERNELS", {})
    monkeypatch.setattr(O, "MISSING_KERNELS", {})
    import importlib
    real = importlib.import_module

    def no_kernels(name, *args, **kwargs):
        if name in ("mbcore._ext._output_rows", "mbcore._ext._kinematics"):
            raise ImportError(f"no module named {name!r} (test)")
        return real(name, *args, **kwargs)
    monkeypatch.setattr(importlib, "import_module", no_kernels)
    new = _run(examples / "spatial_slider_crank_dynamic.yaml", "block")
    old = _run(examples / "spatial_slider_crank_dynamic.yaml", "reference")
    assert block_used == [True, False]
    assert set(O.MISSING_KERNELS) == {"_output_rows.generalised_rows",
                                      "_output_rows.violation_rows_dense",
                                      "_kinematics.point_kinematics_spatial_rows",
                                      "_kinematics.angular_kinematics_rows"}
    _assert_rows_equal(new, old)
