"""The compiled index-1 right-hand side (di, cs, projection) on the independent rows
of a redundant set (Nikravesh (1988), App. C): ``CompiledRHS(rows=...)`` against its
NumPy reference, the acceleration solver on the same rows (``set_rows``) — planar
(a four-bar whose crank pin is modelled twice), spatial (the IFToMM A04 Bricard
mechanism, a free Cardan shaft) — and runs on the compiled loop."""
from __future__ import annotations

import numpy as np
import pytest

import mbcore
from mbcore.plugins import registry

from test_cp_rows import MODELS, PROBLEMS, _fourbar_twin_pin

FORMS = ("di", "cs", "projection")
#: the loop a run of each formulation takes with every row or the kept rows alike:
#: projection's step-end projection is a Python call-back, so its runs keep the
#: Python driver (evaluating the compiled right-hand side)
LOOP = {"di": "compiled", "cs": "compiled", "projection": "python"}


def _solve_bound(sn, fn, rows, q, t) -> float:
    """The relative bound of the comparisons: 1e-12, or where the acceleration solve
    on the kept rows is worse conditioned, the normwise bound of a backward-stable
    solve, ``m eps cond(B)`` with ``B = J M^-1 J^T`` of the kept rows (Higham (2002),
    §7.1; spatial bodies: in the transformed columns of mbcore.system.mass, of the
    solver's last evaluation).  The C and NumPy paths round differently, and the
    solve amplifies that: Bricard's thin rods give cond(B) ~ 1e5."""
    s = fn.solver
    if s.spatial is not None:
        J = s._jhat_view
        J = J.toarray() if hasattr(J, "toarray") else np.asarray(J)
    else:
        J = sn.jacobian_dense(q, t)
    J = J[rows]
    B = (J * s.minv) @ J.T
    return max(1e-12, len(rows) * np.finfo(float).eps * np.linalg.cond(B))


def _pair(name, form, jacobian="dense"):
    """One formulation on the compiled and on the NumPy kernels of one model, both
    on the independent rows (rank-revealing at the assembled start); ``jacobian``:
    the System's dense or sparse Jacobian (sparse: the compiled sparse Schur kernel
    of the kept rows)."""
    from mbcore.solve.assembly import assemble
    from mbcore.solve.linalg import rank_revealing
    m = MODELS[name]()
    sc = m.compile(kernels="compiled", jacobian=jacobian)
    sn = m.compile(kernels="numpy", jacobian=jacobian)
    assert sc.dense == (jacobian == "dense")
    st0 = sc.initial_state(0.0)
    rep = assemble(sc, st0.q, st0.qd, 0.0)
    q0, qd0 = rep.q, rep.qd
    _, ind, dep, _ = rank_revealing(sc.jacobian_dense(q0, 0.0))
    assert len(dep) > 0                          # the model has redundant rows
    cls = registry().get("formulation", form)
    fc, fn = cls(sc, {}), cls(sn, {})
    assert fc.compiled is not None and fc.compiled_ready()
    for f in (fc, fn):
        f.use_independent_rows(ind)
    assert fn.compiled is None and not fn.compiled_ready()
    c = fc.compiled
    assert c is not None and fc.compiled_ready() and type(fc).compiled_follows_rows
    assert c.subset and c.m == sc.m and c.m_kept == len(ind)
    assert c.sparse == (jacobian == "sparse")
    np.testing.assert_array_equal(c.kept_rows, ind)
    return sc, sn, fc, fn, np.concatenate([q0, qd0]), ind


@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_rhs_on_kept_rows_equals_numpy_reference(name, form, jacobian):
    sc, sn, fc, fn, y0, rows = _pair(name, form, jacobian)
    n = sc.n
    removed = np.setdiff1d(np.arange(sc.m), rows)
    rng = np.random.default_rng(11)
    for j, t in enumerate((0.0, 0.05, 0.1, 0.2)):
        # states off the start (coordinates moved a little off the constraints,
        # velocities of order one: the Baumgarte terms of cs are not zero)
        y = y0.copy()
        if j:
            y[:n] += 1e-3 * rng.standard_normal(n)
            y[n:] = rng.standard_normal(n)
        ref = fn.rhs(t, y).copy()
        lam_ref = np.array(fn.solver.lam)
        assert np.all(lam_ref[removed] == 0.0)
        q, qd = y[:n], y[n:]
        w_ref = sn.nonconservative_power(q, qd, t) + float(
            lam_ref @ (sn.jacobian_dense(q, t) @ qd))
        out = np.zeros(2 * n + 1)
        assert fc.compiled.eval(t, np.ascontiguousarray(y), out) == 0
        lam_c = np.array(fc.compiled.lam_view)
        assert lam_c.shape == (sc.m,) and np.all(lam_c[removed] == 0.0)
        # the same operations in C and NumPy on the same rows; the bound: 1e-12, or
        # m eps cond(B) of the kept rows' Schur complement where it is worse
        # conditioned (Bricard, cond(B) ~ 1e5: m eps cond(B) >= 7.2e-10).  Observed
        # (relative to the scale, rhs / lam): four-bar <= 1.7e-15 / 1.4e-15 (bound
        # 1e-12), Cardan <= 2.0e-15 / 2.1e-15 (bound >= 2.8e-11), Bricard <= 1.2e-12
        # / 1.2e-12 (bound >= 7.2e-10): >= 600x margin each; the sparse Jacobians
        # (the sparse Schur kernel): <= 1.3e-15, <= 8.7e-16, <= 1.3e-12
        rel = _solve_bound(sn, fn, rows, q, t)
        scale = 1.0 + np.abs(ref).max()
        np.testing.assert_allclose(out[:-1], ref, rtol=0, atol=rel * scale)
        lscale = 1.0 + np.abs(lam_ref).max()
        np.testing.assert_allclose(lam_c, lam_ref, rtol=0, atol=rel * lscale)
        assert out[-1] == pytest.approx(w_ref, abs=rel * (1 + abs(w_ref) + scale
                                                          * (1 + np.abs(qd).max())))
        # the Python-level rhs of the formulation takes the compiled path
        np.testing.assert_array_equal(fc.rhs(t, y), out[:-1])


def test_compiled_rhs_every_row_unchanged():
    """rows=None and no rows removed: the object of before (no subset, the
    multipliers of every row solved)."""
    sc = _fourbar_twin_pin().compile(kernels="compiled")
    f = registry().get("formulation", "di")(sc, {})
    assert not f.compiled.subset and f.compiled.m_kept == sc.m
    np.testing.assert_array_equal(f.compiled.kept_rows, np.arange(sc.m))


def test_compiled_rhs_refuses_bad_rows():
    sc = _fourbar_twin_pin().compile(kernels="compiled")
    f = registry().get("formulation", "di")(sc, {})
    from mbcore._ext._dynamics import CompiledRHS
    k = sc.compiled_kernels()
    for bad in ([0, 0, 1], [sc.m], [-1]):
        with pytest.raises(ValueError, match="rows must be distinct constraint rows"):
            CompiledRHS(*k.args, f.solver.minv, rows=np.array(bad, dtype=np.intp))


def test_no_semi_analytic_jacobian_on_kept_rows():
    """The semi-analytic Newton Jacobian (mbcore.solve.dijac) is for every row: on a
    subset the compiled loops keep forward differences of the evaluation."""
    fc = _pair("fourbar_twin_pin", "di")[2]
    assert not fc.compiled.analytic_jac


@pytest.mark.parametrize("form", FORMS)
def test_planar_run_on_kept_rows_equals_the_python_driver(form):
    """The twin-pin four-bar: di, cs (on the compiled loop) and projection (the
    compiled right-hand side) with the motion of the NumPy kernels' Python driver
    (the redundant rows named once)."""
    st = {"analysis": "dynamic", "t_end": 1.0, "output_step": 0.05, "formulation": form,
          "integrator": "dopri5", "rtol": 1e-10, "atol": 1e-12}
    m = _fourbar_twin_pin()
    a = mbcore.run(m, settings={**st, "kernels": "compiled"})
    b = mbcore.run(m, settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == LOOP[form] and b.stats["loop"] == "python"
    assert a.stats["redundant_equations"] == b.stats["redundant_equations"]
    # the same steps up to round-off: observed <= 1.8e-14 on |q| ~ 3 (bound 1e-9),
    # the multipliers <= 4.3e-14 of their scale (bound 1e-7)
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-9)
    lscale = np.abs(b["lam"]).max()
    np.testing.assert_allclose(a["lam"], b["lam"], rtol=0, atol=1e-7 * lscale)
    dropped = [m_ for m_ in range(a["lam"].shape[1]) if np.all(b["lam"][:, m_] == 0)]
    assert dropped and np.all(a["lam"][:, dropped] == 0.0)


@pytest.mark.parametrize("form", FORMS)
def test_bricard_on_the_compiled_loop_equals_the_python_driver(form):
    """IFToMM A04 (one redundant row): di, cs and projection on the compiled loop
    agree with the Python driver on the same rows and meet the accuracy contract of
    benchmarks/accuracy3d.py (error <= 10 in units of the tolerance)."""
    from accuracy_problems import normalized_error
    p = PROBLEMS["bricard"]
    rtol, atol = 1e-6, 1e-8
    st = {"t_end": p.t_end, "output_step": p.output_step, "formulation": form,
          "integrator": "dopri5", "rtol": rtol, "atol": atol}
    a = mbcore.run(p.build(), analysis="dynamic", settings=st)
    b = mbcore.run(p.build(), analysis="dynamic", settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == LOOP[form] and b.stats["loop"] == "python"
    assert [e.kind for e in a.events].count("redundant") >= 1
    ea, _ = normalized_error(p.measure(a), p.reference(a.t), rtol, atol)
    eb, _ = normalized_error(p.measure(b), p.reference(b.t), rtol, atol)
    assert ea <= 10.0 and eb <= 10.0
    # both within the contract (10 tolerances of the reference each): the two runs
    # differ by at most 20 (atol + rtol |q|), |q| <= 10 (observed: the same steps,
    # <= 3.7e-13 apart)
    assert a["q"].shape == b["q"].shape
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=20 * (atol + 10 * rtol))


@pytest.mark.parametrize("form", ["di", "cs"])
def test_kept_rows_resume_bit_identically(tmp_path, form):
    """A checkpoint of the compiled loop on the independent rows (the rows stored,
    CompiledRHS rebuilt on them at the resume) continues as the uninterrupted run,
    bit for bit."""
    from test_resume_exact import _check_exact_resume, _settings
    s = _settings("dopri5", analysis="dynamic", formulation=form)
    ck = _check_exact_resume(tmp_path, _fourbar_twin_pin, s)
    assert ck.step["loop"] == "rk" and ck.state["rows"] is not None
