"""Coordinate partitioning in C on the independent rows of a redundant set
(Nikravesh (1988), App. C): ``CompiledCP(rows=...)`` against its NumPy reference,
``CP.split`` / ``CP.rhs`` on the :class:`mbplugins.formulations.rows.RowSubset` with the
acceleration solver on the same rows — planar (a four-bar whose crank pin is
modelled twice) and spatial (the IFToMM A04 Bricard mechanism, a free Cardan shaft)
— and runs on the compiled loop."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry

from conftest import EXAMPLES

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from accuracy_problems import PROBLEMS, normalized_error  # noqa: E402


def _fourbar_twin_pin():
    """The DAP four-bar with its crank pin modelled twice (two redundant rows)."""
    from test_dynamics import dap_fourbar
    m = dap_fourbar(EXAMPLES)
    m.add_joint("revolute", "O2_twin", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-1, 0))
    return m


def _free_cardan():
    """The Cardan shaft without its motor: one degree of freedom, the universal
    joint's ball rows repeating what the bearings fix (three redundant rows)."""
    d = Model.from_file(EXAMPLES / "spatial_cardan_shaft.yaml").to_dict()
    d.pop("drivers")
    d["settings"] = {}
    return Model.from_dict(d)


MODELS = {"fourbar_twin_pin": _fourbar_twin_pin, "cardan_free": _free_cardan,
          "bricard": PROBLEMS["bricard"].build}


def _pair(name):
    """cp on the compiled and on the NumPy kernels of one model, both on the
    independent rows (rank-revealing at the assembled start) and initialised there."""
    from mbcore.solve.assembly import assemble
    from mbcore.solve.linalg import rank_revealing
    m = MODELS[name]()
    sc = m.compile(kernels="compiled")
    sn = m.compile(kernels="numpy")
    st0 = sc.initial_state(0.0)
    rep = assemble(sc, st0.q, st0.qd, 0.0)
    q0, qd0 = rep.q, rep.qd
    _, ind, dep, _ = rank_revealing(sc.jacobian_dense(q0, 0.0))
    assert len(dep) > 0                          # the model has redundant rows
    fc = registry().get("formulation", "cp")(sc, {})
    fn = registry().get("formulation", "cp")(sn, {})
    for f in (fc, fn):
        f.use_independent_rows(ind)
    assert fn.compiled is None
    assert fc.compiled is not None and fc.compiled.m == len(ind) < sc.m
    assert fc.compiled.m_full == sc.m and fc.compiled.subset
    yc, _ = fc.initialize(q0, qd0, 0.0)
    yn, _ = fn.initialize(q0, qd0, 0.0)
    assert list(fc.v) == list(fn.v) and list(fc.u) == list(fn.u)
    np.testing.assert_array_equal(yc, yn)
    assert fc.compiled_ready()
    return sc, sn, fc, fn, yn, ind


def _solve_bound(sn, fn, rows, q, t) -> float:
    """The relative bound of the comparisons: 1e-12, or where the acceleration solve
    on the kept rows is worse conditioned, the normwise bound of a backward-stable
    solve, ``m eps cond(B)`` with ``B = J M^-1 J^T`` of the kept rows (Higham (2002),
    §7.1; spatial bodies: in the transformed columns of mbcore.system.mass).  The two
    paths round differently (C and NumPy kernels), and the solve amplifies that:
    Bricard's thin rods give cond(B) ~ 1e5."""
    s = fn.solver
    J = (np.asarray(s._jhat_view) if s.spatial is not None
         else sn.jacobian_dense(q, t))[rows]
    B = (J * s.minv) @ J.T
    return max(1e-12, len(rows) * np.finfo(float).eps * np.linalg.cond(B))


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_cp_on_kept_rows_equals_numpy_reference(name):
    sc, sn, fc, fn, y0, rows = _pair(name)
    rng = np.random.default_rng(7)
    k = fn.k
    for j, t in enumerate((0.0, 0.05, 0.1, 0.2)):
        # states off the start: independent coordinates moved a little, velocities
        # of order one (the evaluations of both paths start from the same warm start)
        y = y0.copy()
        if j:
            y[:k] += 1e-2 * rng.standard_normal(k)
            y[k:] = rng.standard_normal(k)
        fc._q, fn._q = fn._q.copy(), fn._q.copy()
        fc.compiled.set_partition(np.ascontiguousarray(fc.u, dtype=np.intp),
                                  np.ascontiguousarray(fc.v, dtype=np.intp),
                                  float(fc.best_ratio), np.ascontiguousarray(fn._q))
        fn._prev = None
        ref = fn.rhs(t, y).copy()
        qq, qqd = fn.q_cur.copy(), fn.qd_cur.copy()
        lam_ref = np.array(fn.solver.lam)
        assert np.all(lam_ref[np.setdiff1d(np.arange(sn.m), rows)] == 0.0)
        w_ref = sn.nonconservative_power(qq, qqd, t) + float(
            lam_ref @ (sn.jacobian_dense(qq, t) @ qqd))
        out = np.zeros(y.size + 1)
        assert fc.compiled.eval(t, np.ascontiguousarray(y), out) == 0
        scale = 1.0 + np.abs(ref).max()
        # the same operations in C and NumPy on the same rows: coordinates and
        # velocities (Newton, Phi_u ud = nu - Phi_v vd: well conditioned, the pivot
        # ratio of Phi_u ~ 0.5) within 1e-12 (observed <= 8e-16); accelerations and
        # multipliers within the solve's bound (observed: 3.5e-15 (four-bar), 2e-17
        # (Cardan) of the scale with the bound 1e-12; Bricard 1.2e-13 (rhs), 2.8e-13
        # (lam) with m eps cond(B) = 7e-10)
        rel = _solve_bound(sn, fn, rows, qq, t)
        np.testing.assert_allclose(out[:-1], ref, rtol=0, atol=rel * scale)
        assert out[-1] == pytest.approx(w_ref, abs=rel * (1 + abs(w_ref) + scale))
        np.testing.assert_allclose(np.asarray(fc.compiled.q), qq, rtol=0,
                                   atol=1e-12 * (1 + np.abs(qq).max()))
        np.testing.assert_allclose(np.asarray(fc.compiled.qd), qqd, rtol=0,
                                   atol=1e-12 * scale)
        lam_c = np.asarray(fc.compiled.lam_view)
        assert lam_c.shape == (len(rows),)
        lscale = 1.0 + np.abs(lam_ref).max()
        np.testing.assert_allclose(lam_c, lam_ref[rows], rtol=0, atol=rel * lscale)
        # the pivot quality of Phi_u on the kept rows and the re-partition measure
        # from the same LU and Phi_v (observed <= 1e-15 relative; bound 1e-12)
        assert float(fc.compiled.ratio) == pytest.approx(float(fn.ratio), rel=1e-12)
        assert fc.current_amplification() == pytest.approx(fn.current_amplification(),
                                                           rel=1e-12)


@pytest.mark.parametrize("name", ["fourbar_twin_pin", "bricard"])
def test_outputs_on_kept_rows_carry_the_full_multipliers(name):
    """At an output the compiled path gives the multipliers of every row (zero on
    the removed ones), as the NumPy path does."""
    sc, sn, fc, fn, y0, rows = _pair(name)
    qc, qdc, qddc, lamc = fc.outputs(0.0, y0)
    qn, qdn, qddn, lamn = fn.outputs(0.0, y0)
    assert lamc.shape == lamn.shape == (sc.m,)
    assert np.all(lamc[np.setdiff1d(np.arange(sc.m), rows)] == 0.0)
    lscale = 1.0 + np.abs(lamn).max()
    # as above (the four-bar: observed <= 1e-15 of the scale, bound 1e-12; Bricard:
    # observed ~1e-13, bound m eps cond(B)); the coordinates: the same Newton on the
    # same rows (observed identical; bound 1e-12)
    rel = _solve_bound(sn, fn, rows, qn, 0.0)
    np.testing.assert_allclose(lamc, lamn, rtol=0, atol=rel * lscale)
    np.testing.assert_allclose(qddc, qddn, rtol=0, atol=rel * (1 + np.abs(qddn).max()))
    np.testing.assert_allclose(qc, qn, rtol=0, atol=1e-12 * (1 + np.abs(qn).max()))


def test_compiled_cp_refuses_bad_rows():
    sc, sn, fc, fn, y0, rows = _pair("fourbar_twin_pin")
    from mbplugins._ext._cp import CompiledCP
    k = sc.compiled_kernels()
    args = (*k.args, fc.solver.minv, np.ascontiguousarray(fc._col_scale, dtype=float),
            fc.tol, fc.factor)
    for bad in ([0, 0, 1], [sc.m], [-1]):
        with pytest.raises(ValueError, match="rows must be distinct constraint rows"):
            CompiledCP(*args, rows=np.array(bad, dtype=np.intp))
    with pytest.raises(ValueError, match="0 < m < n"):        # no row kept
        CompiledCP(*args, rows=np.zeros(0, dtype=np.intp))


def test_planar_run_on_kept_rows_equals_the_python_driver():
    """The twin-pin four-bar: the redundant rows are named once, cp stays on the
    compiled loop with the motion of the NumPy kernels' Python driver."""
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.05, "formulation": "cp",
          "integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12}
    m = _fourbar_twin_pin()
    a = mbcore.run(m, settings={**st, "kernels": "compiled"})
    b = mbcore.run(m, settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    assert a.stats["redundant_equations"] == b.stats["redundant_equations"]
    # observed 4e-14 (the same steps up to round-off); bound 1e-9 on |q| ~ 3
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-9)
    lscale = np.abs(b["lam"]).max()
    np.testing.assert_allclose(a["lam"], b["lam"], rtol=0, atol=1e-7 * lscale)
    assert a.stats["redundant_check"] <= 1e-2


@pytest.mark.parametrize("integrator", ["dopri5", "bdf"])
def test_bricard_on_the_compiled_loop_within_the_tolerance(integrator):
    """IFToMM A04 (one redundant row): cp runs on the compiled loop and meets the
    accuracy contract of benchmarks/accuracy3d.py (error <= 10 in units of the
    tolerance against di + dop853 at rtol 1e-12; observed 7e-4 at rtol 1e-6)."""
    p = PROBLEMS["bricard"]
    rtol, atol = 1e-6, 1e-8
    res = mbcore.run(p.build(), analysis="dynamic",
                     settings={"t_end": p.t_end, "output_step": p.output_step,
                               "formulation": "cp", "integrator": integrator,
                               "rtol": rtol, "atol": atol})
    assert res.stats["loop"] == "compiled"
    assert [e.kind for e in res.events].count("redundant") >= 1
    err, _ = normalized_error(p.measure(res), p.reference(res.t), rtol, atol)
    assert err <= 10.0


def test_compiled_cp_follows_rows_chosen_again():
    """Where the analysis chooses the independent rows again (another row of the
    redundant set dropped), cp's compiled right-hand side is rebuilt on the new rows
    (not ready until the new partition), and the dynamic analysis' runner takes it
    (``compiled_follows_rows``); after the new partition it equals the NumPy path on
    those rows (bound as above)."""
    sc, sn, fc, fn, y0, rows = _pair("bricard")
    J = sc.jacobian_dense(fn._q, 0.0)
    rank = len(rows)
    dropped = np.setdiff1d(np.arange(sc.m), rows)
    # another row whose removal keeps the rank: the new independent set
    other = next(r for r in rows
                 if np.linalg.matrix_rank(np.delete(J, np.r_[dropped[1:], r], axis=0))
                 == rank)
    new = np.setdiff1d(np.arange(sc.m), np.r_[dropped[1:], other])
    assert len(new) == rank and not np.array_equal(new, rows)
    old = fc.compiled
    q, qd = fn._q.copy(), np.zeros(sc.n)
    for f in (fc, fn):
        f.use_independent_rows(new)
    assert fc.compiled is not old and not fc.compiled_ready()
    np.testing.assert_array_equal(fc.compiled.kept_rows, new)
    assert type(fc).compiled_follows_rows
    yc, _ = fc.initialize(q, qd, 0.0)
    yn, _ = fn.initialize(q, qd, 0.0)
    assert fc.compiled_ready() and list(fc.v) == list(fn.v)
    y = yn.copy()
    y[fn.k:] = 0.5
    ref = fn.rhs(0.1, y).copy()
    out = np.zeros(y.size + 1)
    assert fc.compiled.eval(0.1, np.ascontiguousarray(y), out) == 0
    rel = _solve_bound(sn, fn, new, fn.q_cur, 0.1)
    np.testing.assert_allclose(out[:-1], ref, rtol=0, atol=rel * (1 + np.abs(ref).max()))
    lam_ref = np.array(fn.solver.lam)
    assert np.all(lam_ref[np.setdiff1d(np.arange(sc.m), new)] == 0.0)
    np.testing.assert_allclose(np.asarray(fc.compiled.lam_view), lam_ref[new], rtol=0,
                               atol=rel * (1 + np.abs(lam_ref).max()))


@pytest.mark.parametrize("integ", ["dopri5", "bdf"])
def test_cp_on_kept_rows_resumes_bit_identically(tmp_path, integ):
    """A checkpoint of the compiled loop with cp on the independent rows (the rows,
    the partition and CompiledCP's warm start stored) resumes as the uninterrupted
    run, bit for bit."""
    from test_resume_exact import _check_exact_resume, _settings
    s = _settings(integ, analysis="dynamic", formulation="cp")
    ck = _check_exact_resume(tmp_path, _fourbar_twin_pin, s)
    assert ck.step["loop"] in ("rk", "bdf") and ck.state["rows"] is not None
