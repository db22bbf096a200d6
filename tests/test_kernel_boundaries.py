"""Kernel boundaries (issue 18): every compiled entry point callable from Python checks
sizes and indices before it enters code without the GIL.

Each risky call runs in a forked child process, so that a segfault fails its test
instead of killing pytest.  Wrong sizes, dtypes, non-contiguous arrays, None,
out-of-range indices and degenerate parameters must give a clear error (ValueError /
TypeError naming the argument, or an mbcore error); NaN, +-inf and huge values of
otherwise valid arguments give an error or finite results — never a crash or a
silent write outside a buffer.
"""
from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import numpy as np
import pytest

from mbcore.model import Model
from mbcore.system import compiled_available

pytestmark = [pytest.mark.skipif(not compiled_available(), reason="needs the extensions"),
              pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                                 reason="needs fork")]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _child(fn, conn):
    try:
        out = fn()
        finite = True
        for a in (out if isinstance(out, tuple) else (out,)):
            if isinstance(a, (np.ndarray, float)):
                finite = finite and bool(np.all(np.isfinite(a)))
        conn.send(("ok", finite, ""))
    except BaseException as exc:          # noqa: BLE001 - reported to the parent
        conn.send(("error", type(exc).__name__, str(exc)[:300]))
    conn.close()
    os._exit(0)


def outcome(fn, timeout: float = 60.0):
    """('ok', finite, ''), ('error', type, message), ('crash', exitcode) or ('hang',)."""
    ctx = mp.get_context("fork")
    r, w = ctx.Pipe(duplex=False)
    p = ctx.Process(target=_child, args=(fn, w))
    p.start()
    w.close()
    if not r.poll(timeout):
        p.kill()
        p.join()
        return ("hang",)
    try:
        res = r.recv()
    except EOFError:
        p.join()
        return ("crash", p.exitcode)
    p.join()
    return res


def refused(fn, *words: str) -> None:
    """fn raises ValueError / TypeError / an mbcore error whose message contains words."""
    res = outcome(fn)
    assert res[0] == "error", f"not refused: {res}"
    assert res[1] in ("ValueError", "TypeError", "ModelError", "AnalysisError",
                      "OverflowError", "IndexError"), res
    for w in words:
        assert w in res[2], res


def error_or_finite(fn) -> None:
    res = outcome(fn)
    assert res[0] in ("ok", "error"), res
    if res[0] == "ok":
        assert res[1], f"non-finite result without an error: {res}"


# ------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def fourbar():
    s = Model.from_file(EXAMPLES / "fourbar_kap.yaml").compile(kernels="compiled")
    return s


@pytest.fixture(scope="module")
def springs():
    return Model.from_file(EXAMPLES / "slider_crank_springs_002.yaml").compile(
        kernels="compiled")


def _fv(s, rows=None):
    k = len(s.functions) if rows is None else rows
    return np.zeros((k, 3))


# ------------------------------------------------------------------ PlanarEvaluator
def test_planar_evaluator_checks_its_buffers(fourbar):
    ev, n, m = fourbar._evaluator, fourbar.n, fourbar.m
    q, fv = np.zeros(n), _fv(fourbar)
    refused(lambda: ev.phi(q, 0.0, fv, np.zeros(m - 1)), "out")
    refused(lambda: ev.phi(q, 0.0, fv, np.zeros(0)), "out")
    refused(lambda: ev.phi(q, 0.0, np.zeros((0, 3)), np.zeros(m)), "fv")
    refused(lambda: ev.phi(q, 0.0, np.zeros((1, 2)), np.zeros(m)), "fv")
    refused(lambda: ev.phi(q[:-1], 0.0, fv, np.zeros(m)), "q")
    refused(lambda: ev.phi(None, 0.0, fv, np.zeros(m)))
    refused(lambda: ev.phi(q, 0.0, fv, None))
    refused(lambda: ev.nu(q, 0.0, fv, np.zeros(2)), "out")
    refused(lambda: ev.gamma(q, q, 0.0, fv, np.zeros(2)), "out")
    refused(lambda: ev.jacobian(q, 0.0, fv, np.zeros(3)), "data")
    refused(lambda: ev.phi(q.astype(np.float32), 0.0, fv, np.zeros(m)))
    refused(lambda: ev.phi(np.zeros(2 * n)[::2], 0.0, fv, np.zeros(m)))
    refused(lambda: ev.repeat_stages(q, q, 0.0, fv, np.zeros(1), np.zeros(1), 1))


def test_planar_evaluator_nan_inf_huge_give_finite_or_error(fourbar):
    ev, n, m = fourbar._evaluator, fourbar.n, fourbar.m
    for bad in (np.nan, np.inf, -np.inf, 1e308):
        q = np.full(n, bad)
        out = np.zeros(m)
        res = outcome(lambda: (ev.phi(q, bad, _fv(fourbar), out), out)[1])
        assert res[0] in ("ok", "error"), res       # never a crash


def test_planar_evaluator_refuses_bad_packed_groups(fourbar):
    from mbcore._ext import _planar
    from mbplugins._ext._planar_constraints import REVOLUTE
    g = dict(kernel="revolute", capsule=REVOLUTE, kind="planar", boff=np.array([[0, 3]]),
             row=np.array([0]), par=np.zeros(4), fidx=np.zeros((1, 0), np.intp),
             jpos=np.zeros(12, np.intp), xoff=np.zeros((1, 0), np.intp))
    assert outcome(lambda: _planar.PlanarEvaluator(6, [g]) and 1)[0] == "ok"
    for key, value in (("boff", np.array([[0, 1000]])), ("boff", np.array([[-3, 0]])),
                       ("row", np.array([-1])), ("jpos", np.full(12, -5, np.intp))):
        refused(lambda: _planar.PlanarEvaluator(6, [{**g, key: value}]), key)
    refused(lambda: _planar.PlanarEvaluator(-1, []), "n")
    # a group without a kernel capsule: the evaluator knows no constraint type
    refused(lambda: _planar.PlanarEvaluator(6, [{k: v for k, v in g.items()
                                                 if k != "capsule"}]), "capsule")


# ------------------------------------------------------------------ forces
def test_force_evaluator_checks(springs):
    fe, n = springs._force_evaluator, springs.n
    q = np.zeros(n)
    refused(lambda: fe.forces(q, q, 0.0, _fv(springs), np.zeros(n - 1)), "Q")
    refused(lambda: fe.forces(q, q[:-1], 0.0, _fv(springs), np.zeros(n)), "qd")
    refused(lambda: fe.forces(q, q, 0.0, _fv(springs), None))
    refused(lambda: fe.repeat_forces(q, q, 0.0, _fv(springs), np.zeros(n), -1), "count")
    for bad in (np.nan, np.inf, 1e308, 0.0):
        x = np.full(n, bad)
        res = outcome(lambda: fe.forces(x, x, 0.0, _fv(springs), np.zeros(n)))
        assert res[0] in ("ok", "error"), res


def _tsda_group(fidx):
    """A packed group of one planar TSDA (7 parameters, 1 function) between the bodies
    at offsets 0 and 3, with its kernel capsule (the built-in, through the plugin tier)."""
    from mbplugins._ext._planar_forces import TSDA
    return dict(kernel="tsda", capsule=TSDA, boff=np.array([[0, 3]]), par=np.zeros(7),
                fidx=fidx)


def test_force_evaluator_refuses_bad_packed_groups():
    from mbcore._ext import _forces
    ok = _tsda_group(np.zeros((1, 1), np.intp))
    assert outcome(lambda: _forces.ForceEvaluator(6, [ok]) and 1)[0] == "ok"
    refused(lambda: _forces.ForceEvaluator(6, [{**ok, "boff": np.array([[0, 999]])}]),
            "boff")
    refused(lambda: _forces.ForceEvaluator(6, [{**ok, "boff": np.array([[-1, 0]])}]),
            "boff")
    refused(lambda: _forces.ForceEvaluator(-4, []), "n")


def test_fv_rows_checked_against_function_indices(springs, fourbar):
    from mbcore._ext import _forces
    fe = _forces.ForceEvaluator(6, [_tsda_group(np.full((1, 1), 7, np.intp))])
    refused(lambda: fe.forces(np.zeros(6), np.zeros(6), 0.0, np.zeros((2, 3)),
                              np.zeros(6)), "fv")


# ------------------------------------------------------------------ dense linear algebra
def test_dense_lu_and_schur_check_sizes():
    from mbcore._ext._linalg import DenseLU, SchurSolver
    lu = DenseLU(4)
    refused(lambda: lu.factor(np.zeros(3)), "a")
    refused(lambda: lu.solve(np.zeros(2)), "b")
    refused(lambda: DenseLU(-2), "n")
    a = np.eye(4).ravel()
    assert outcome(lambda: (lu.factor(a), lu.solve(np.ones(4)))[0])[0] == "ok"
    for bad in (np.nan, np.inf, 1e308, 0.0):
        error_or_finite(lambda: float(DenseLU(3).factor(np.full(9, bad))))
    sc = SchurSolver(3, 2)
    refused(lambda: sc.solve(np.zeros(2), np.ones(3), np.zeros(3), np.zeros(2),
                             np.zeros(3), np.zeros(2)), "jac")
    refused(lambda: SchurSolver(-1, 2), "n")


# ------------------------------------------------------------------ kinematics
def test_point_kinematics_checks():
    from mbcore._ext import _kinematics as K
    q = np.zeros(6)
    off = np.array([0, 3], np.intp)
    loc = np.zeros((2, 2))
    assert outcome(lambda: K.point_kinematics(q, q, q, off, loc, np.zeros((2, 6))))[0] == "ok"
    refused(lambda: K.point_kinematics(q, q, q, off, loc, np.zeros((1, 6))), "out")
    refused(lambda: K.point_kinematics(q, q[:3], q, off, loc, np.zeros((2, 6))), "qd")
    refused(lambda: K.point_kinematics(q, q, q, np.array([0, -9], np.intp), loc,
                                       np.zeros((2, 6))), "off")
    refused(lambda: K.point_kinematics(q, q, q, np.array([0, 5], np.intp), loc,
                                       np.zeros((2, 6))), "off")
    refused(lambda: K.point_kinematics(q, q, q, off, np.zeros((1, 2)), np.zeros((2, 6))),
            "loc")
    q7 = np.zeros(7)
    o7 = np.array([0], np.intp)
    refused(lambda: K.point_kinematics_spatial(q7, np.zeros(6), q7, o7, np.zeros((1, 3)),
                                               np.zeros((1, 9))), "qd")
    refused(lambda: K.point_kinematics_spatial(q7, q7, q7, o7, np.zeros((1, 3)),
                                               np.zeros((1, 8))), "out")
    refused(lambda: K.angular_kinematics(q7, q7, q7, np.array([[3, 4, 5, 99]], np.intp),
                                         np.zeros((1, 6))), "pidx")


# ------------------------------------------------------------------ kinematic stepper
def test_kinematic_stepper_checks(fourbar):
    from mbcore._ext._planar import KinematicStepper
    s = fourbar
    st = KinematicStepper(s._evaluator, s.n, s._jdata)
    q = s.initial_state(0.0).q.copy()
    fv = np.zeros((len(s.functions), 3))
    refused(lambda: st.step(q[:-1], q.copy(), q.copy(), 0.0, fv, 1e-10, 20, 1e-13), "q")
    refused(lambda: st.step(q.copy(), q.copy(), q.copy(), 0.0, np.zeros((0, 3)), 1e-10,
                            20, 1e-13), "fv")
    refused(lambda: KinematicStepper(s._evaluator, s.n + 5, s._jdata), "n")
    refused(lambda: KinematicStepper(s._evaluator, s.n, np.zeros(3)), "jdata")
    for bad in (np.nan, np.inf, 1e308):
        x = np.full(s.n, bad)
        res = outcome(lambda: st.step(x.copy(), x.copy(), x.copy(), 0.0, fv, 1e-10, 20,
                                      1e-13))
        assert res[0] in ("ok", "error"), res


# ------------------------------------------------------------------ compiled right-hand side
@pytest.fixture(scope="module")
def crhs_system():
    m = Model.from_file(EXAMPLES / "slider_crank_dynamic.yaml")
    return m.compile(kernels="compiled")


def _crhs(system):
    from mbcore.plugins import registry
    return registry().get("formulation", "di")(system, {}).compiled


def test_compiled_rhs_eval_checks_sizes(crhs_system):
    f = _crhs(crhs_system)
    if f is None:
        pytest.skip("no compiled right-hand side")
    N = 2 * f.n + 1
    refused(lambda: f.eval(0.0, np.zeros(N - 3), np.zeros(N)), "y")
    refused(lambda: f.eval(0.0, np.zeros(N), np.zeros(N - 2)), "ydot")
    refused(lambda: f.eval(0.0, None, np.zeros(N)))
    refused(lambda: f.jacobian(0.0, np.zeros(N), np.zeros((N, N - 1))), "out")
    for bad in (np.nan, np.inf, 1e308):
        y = np.full(N, bad)
        res = outcome(lambda: f.eval(bad, y, np.zeros(N)))
        assert res[0] in ("ok", "error"), res


def test_run_rk_checks_its_tableau_and_steps(crhs_system):
    from mbcore._ext._steploop import run_rk
    f = _crhs(crhs_system)
    if f is None:
        pytest.skip("no compiled right-hand side")
    N = 2 * f.n + 1
    y0 = np.zeros(N)
    A, B, C, E, P = np.zeros((4, 4)), np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]), \
        np.array([0, .5, .5, 1.]), np.zeros(5), np.zeros((5, 1))
    A[1, 0] = A[2, 1] = .5
    A[3, 2] = 1.0

    def call(**kw):
        a = dict(f=f, A=A, B=B, C=C, E=E, P=P, adaptive=False, t0=0.0, t1=0.01, y0=y0,
                 f0=np.zeros(N), t_out=np.array([0.01]), i_out=0, h_abs=1e-3, rtol=0.0,
                 atol=0.0, max_step=np.inf, safety=0.9, min_factor=0.2, max_factor=10.0,
                 exponent=0.0, order=4, on_output=lambda t, y: None, stats=np.zeros(5))
        a.update(kw)
        return run_rk(*a.values())[0]
    assert outcome(call)[0] in ("ok", "error")
    refused(lambda: call(A=np.zeros((2, 2))), "A")
    refused(lambda: call(C=np.zeros(2)), "C")
    refused(lambda: call(f0=np.zeros(2)), "f0")
    refused(lambda: call(stats=np.zeros(2)), "stats")
    refused(lambda: call(i_out=5), "i_out")
    refused(lambda: call(i_out=-1), "i_out")
    for h in (0.0, -1e-3, np.nan, np.inf):
        refused(lambda: call(h_abs=h), "h_abs")
    refused(lambda: call(t1=np.nan), "t1")     # t1 = inf is open-ended (Simulation)
    refused(lambda: call(t0=np.inf), "t0")
    refused(lambda: call(adaptive=True, rtol=np.nan, h_abs=1e-3, E=np.zeros(5),
                         P=np.zeros((5, 1))), "rtol")


# ------------------------------------------------------------------ sparse
def test_etree_counts_checks_the_pattern():
    from mbcore._ext._sparse import etree_counts
    Bp = np.array([0, 1, 3], np.intp)
    Bi = np.array([0, 0, 1], np.intp)
    assert outcome(lambda: etree_counts(2, Bp, Bi)[2])[0] == "ok"
    refused(lambda: etree_counts(3, Bp, Bi), "Bp")
    refused(lambda: etree_counts(2, Bp, np.array([0, 7, 1], np.intp)), "Bi")
    refused(lambda: etree_counts(2, np.array([0, 5, 9], np.intp), Bi), "Bp")
    refused(lambda: etree_counts(-1, Bp, Bi), "m")


# ------------------------------------------------------------------ time functions
def test_function_evaluator_checks():
    from mbcore.elements.functions import FunctionTable, parse_function
    tab = FunctionTable([parse_function("sin(t)", "f"), parse_function(
        {"table": {"t": [0, 1, 2], "y": [0, 1, 0]}}, "g")])
    refused(lambda: tab.evaluate(0.5, np.zeros((1, 3))), "out")
    refused(lambda: tab.evaluate(0.5, np.zeros((2, 3), np.float32)), "out")
    refused(lambda: tab.evaluate(0.5, np.zeros((3, 2)).T), "out")
    for t in (np.nan, np.inf, -np.inf, 1e308):
        res = outcome(lambda: tab(t))
        assert res[0] == "error" or (res[0] == "ok" and res[1]), res


# ------------------------------------------------------------------ multistep loops
@pytest.fixture(scope="module")
def ms_state(crhs_system):
    """A compiled right-hand side, a consistent start y0 = [q; qd; W] and f(0, y0)."""
    f = _crhs(crhs_system)
    if f is None:
        pytest.skip("no compiled right-hand side")
    st = crhs_system.initial_state(0.0)
    y0 = np.concatenate([st.q, st.qd, [0.0]])
    f0 = np.zeros(y0.size)
    assert f.eval(0.0, y0, f0) == 0
    return f, y0, f0


def _loop_call(run, base):
    """call(**changes) -> a function running ``run`` with ``base`` updated (fresh
    stats and counters each time)."""
    from mbcore._ext._steploop import new_counters

    def call(**kw):
        a = dict(base, t_out=np.array([0.005, 0.01]), i_out=0,
                 on_output=lambda t, y: None, stats=np.zeros(5), counters=new_counters())
        a.update(kw)
        return lambda: run(**a)
    return call


def _common_cases(N):
    """Bad arguments every multistep loop shares (_check_common), with the word the
    error must contain."""
    one = np.ones(1)
    return [(dict(y0=np.zeros(N - 1)), "y0"), (dict(y0=np.full(N, np.nan)), "y0"), (dict(t0=np.nan), "t0"),
            (dict(t1=np.nan), "t1"), (dict(t0=-np.inf), "t0"), (dict(t1=-1.0), "forwards"),
            (dict(i_out=-1), "i_out"), (dict(i_out=3), "i_out"),
            (dict(stats=np.zeros(4)), "stats"), (dict(counters=np.zeros(5)), "counters"),
            (dict(stop_idx=np.array([0, 1], np.intp), stop_val=one, stop_sign=one), "stop"),
            (dict(stop_idx=np.array([N], np.intp), stop_val=one, stop_sign=one), "stop_idx"),
            (dict(stop_idx=np.array([-1], np.intp), stop_val=one, stop_sign=one), "stop_idx"),
            (dict(ystep=np.zeros(N)), "ystep"), (dict(max_steps=-1), "max_steps"),
            (dict(f=None), ""), (dict(y0=None), ""), (dict(t_out=None), ""),
            (dict(stats=None), ""), (dict(counters=None), "")]


#: valid arguments asking for ~1e14 steps or no end: with max_steps = 0 (no budget) the
#: loop takes them (the caller asked for that); the budget ends them
_budgeted = (dict(max_step=1e-300, max_steps=1000), dict(t1=np.inf, max_steps=50))


def _refuses_all(call, cases):
    for kw, word in cases:
        res = outcome(call(**kw), timeout=30.0)
        assert res[0] == "error", f"{kw}: not refused: {res}"
        assert res[1] in ("ValueError", "TypeError"), (kw, res)
        assert word in res[2], (kw, word, res)


def _abm_call(f, y0, f0):
    from mbcore._ext._steploop import run_abm
    from mbplugins.integrators.adams import AdamsPECE
    N, kmax = y0.size, 12
    phi = np.zeros((kmax + 2, N))
    phi[0] = f0
    return _loop_call(run_abm, dict(
        f=f, t0=0.0, t1=0.01, y0=y0, phi0=phi, hs0=np.full(kmax + 2, 1e-4), h=1e-4,
        h_last=0.0, k=1, neq=0, phase1=True, kmax=kmax, rtol=1e-6, atol=1e-8,
        max_step=np.inf, gamma=np.ascontiguousarray(AdamsPECE.GAMMA, dtype=float),
        gstar_abs=np.ascontiguousarray(AdamsPECE.GAMMA_STAR_ABS, dtype=float)))


def test_run_abm_checks_its_arguments(ms_state):
    f, y0, f0 = ms_state
    call, N = _abm_call(f, y0, f0), y0.size
    code, t, y, i_out, h = call()()
    assert (code, t, i_out) == (0, 0.01, 2) and np.all(np.isfinite(y))
    cases = _common_cases(N) + [
        (dict(phi0=np.zeros((13, N))), "phi0"), (dict(phi0=np.zeros((14, N - 1))), "phi0"),
        (dict(phi0=np.full((14, N), np.inf)), "phi0"), (dict(hs0=np.ones(3)), "hs0"),
        (dict(hs0=np.full(14, np.nan)), "hs0"), (dict(gamma=np.ones(5)), "gamma"),
        (dict(gstar_abs=np.ones(5)), "gstar_abs"), (dict(k=0), "k = 0"),
        (dict(k=13), "k = 13"), (dict(kmax=0), "kmax"),
        # an order beyond the coefficient arrays (15 values: kmax <= 12)
        (dict(kmax=13, phi0=np.zeros((15, N)), hs0=np.ones(15)), "gamma"),
        (dict(rtol=np.nan), "rtol ="), (dict(atol=-1.0), "atol ="),
        (dict(rtol=0.0, atol=0.0), "rtol ="), (dict(atol=np.inf), "atol =")]
    cases += [(dict(h=v), "h = ") for v in (0.0, -1e-4, np.nan, np.inf)]
    cases += [(dict(max_step=v), "max_step") for v in (0.0, -1.0, np.nan)]
    _refuses_all(call, cases)
    # huge, tiny and open-ended values that are valid: an error code or finite values,
    # never a hang (the step budget ends a run of tiny steps or to t1 = inf)
    for kw in (dict(h=1e308), dict(h=1e-300), dict(rtol=1e300), dict(y0=np.full(N, 1e308)),
               dict(t0=1e300, t1=np.inf, t_out=np.array([1e301]))) + _budgeted:
        error_or_finite(call(**kw))


def _bdf_call(f, y0, f0):
    from mbcore._ext._steploop import run_bdf
    from mbplugins.integrators import bdf
    N = y0.size
    D = np.zeros((8, N))
    D[0], D[1] = y0, 1e-4 * f0
    return _loop_call(run_bdf, dict(
        f=f, t0=0.0, t1=0.01, y0=y0, D0=D, k=1, h_abs=1e-4, n_equal=0, max_order=5,
        maxiter=4, newton_tol=0.03, jac_max_age=50, refactor_ratio=0.3, rtol=1e-6,
        atol=1e-8, max_step=np.inf, bdf_gamma=np.ascontiguousarray(bdf.BDF_GAMMA),
        err_const=np.ascontiguousarray(bdf.BDF_ERROR_CONST), min_factor=bdf.MIN_FACTOR,
        max_factor=bdf.MAX_FACTOR, keep_below=bdf.KEEP_BELOW))


def test_run_bdf_checks_its_arguments(ms_state):
    f, y0, f0 = ms_state
    call, N = _bdf_call(f, y0, f0), y0.size
    code, t, y, i_out, h = call()()
    assert (code, t, i_out) == (0, 0.01, 2) and np.all(np.isfinite(y))
    cases = _common_cases(N) + [
        (dict(D0=np.zeros((7, N))), "D0"), (dict(D0=np.full((8, N), np.nan)), "D0"),
        (dict(k=0), "k = 0"), (dict(k=6), "k = 6"), (dict(max_order=7), "max_order"),
        (dict(max_order=6), "D0"),          # order 6 needs 9 difference rows
        (dict(max_order=0), "max_order"), (dict(max_order=3, k=4), "k = 4"),
        (dict(bdf_gamma=np.ones(3)), "bdf_gamma"), (dict(err_const=np.ones(6)), "err_const"),
        (dict(maxiter=0), "maxiter"), (dict(jac_max_age=0), "jac_max_age"),
        (dict(mass=np.ones(N - 1)), "mass"), (dict(mass=np.full(N, np.nan)), "mass"),
        (dict(h_power=np.ones(2)), "h_power"), (dict(J0=np.zeros(N)), "J0"),
        (dict(rtol=np.nan), "rtol ="), (dict(newton_tol=0.0), "newton_tol"),
        (dict(newton_tol=np.nan), "newton_tol"), (dict(min_factor=0.0), "min_factor"),
        (dict(min_factor=2.0), "min_factor"), (dict(max_factor=0.5), "max_factor"),
        (dict(max_factor=np.inf), "max_factor"), (dict(keep_below=np.nan), "keep_below"),
        (dict(refactor_ratio=-1.0), "refactor_ratio"),
        (dict(refactor_ratio=np.nan), "refactor_ratio")]
    cases += [(dict(h_abs=v), "h_abs") for v in (0.0, -1e-4, np.nan, np.inf)]
    cases += [(dict(max_step=v), "max_step") for v in (0.0, -1.0, np.nan)]
    _refuses_all(call, cases)
    for kw in (dict(h_abs=1e308), dict(h_abs=1e-300),
               dict(J0=np.full(N * N, np.nan), c_lu0=1e-4)) + _budgeted:
        error_or_finite(call(**kw))


def _theta_call(f, y0, f0):
    from mbcore._ext._steploop import run_theta
    return _loop_call(run_theta, dict(
        f=f, t0=0.0, t1=0.01, y0=y0, f0=f0, t_start=0.0, i_step=0, h_step=1e-3, theta=1.0,
        order=1, evaluated=False, maxiter=10, newton_rtol=1e-10, newton_atol=1e-12))


def test_run_theta_checks_its_arguments(ms_state):
    f, y0, f0 = ms_state
    call, N = _theta_call(f, y0, f0), y0.size
    for trapezoid in (dict(), dict(theta=0.5, order=2, evaluated=True)):
        code, t, y, i_out, h = call(**trapezoid)()
        assert (code, t, i_out) == (0, 0.01, 2) and np.all(np.isfinite(y))
    # a resumed grid (t0 on the grid of an earlier start) is accepted
    assert call(t0=0.004, t_start=0.0, i_step=4)()[:2] == (0, 0.01)
    cases = _common_cases(N) + [
        (dict(f0=np.zeros(N - 1)), "f0"), (dict(f0=np.full(N, np.inf)), "f0"),
        (dict(maxiter=0), "maxiter"), (dict(theta=np.nan), "theta"),
        (dict(theta=-0.5), "theta"), (dict(theta=1.5), "theta"),
        (dict(newton_rtol=np.nan), "newton_rtol"), (dict(newton_atol=-1.0), "newton_atol"),
        (dict(t_start=np.nan), "t_start"),
        # a grid far behind or ahead of t0: one step of -1e9 or +1e3 before
        (dict(i_step=-10 ** 12), "i_step"), (dict(i_step=10 ** 6), "i_step"),
        (dict(J0=np.zeros(N)), "J0")]
    cases += [(dict(h_step=v), "h_step") for v in (0.0, -1e-3, np.nan, np.inf)]
    _refuses_all(call, cases)
    for kw in (dict(h_step=1e308), dict(h_step=1e-300, max_steps=1000),
               dict(t1=np.inf, max_steps=50), dict(J0=np.full(N * N, np.nan), c_lu0=1e-3)):
        error_or_finite(call(**kw))


# ------------------------------------------------------------------ sparse Schur kernel
def _schur_chain():
    """3 constraint rows over 5 coordinates, coupled in a chain (rows 0-1, 1-2)."""
    from mbcore.solve.sparse_schur import SchurTopology
    topo = SchurTopology(np.array([0, 2, 4, 6]), np.array([0, 1, 1, 2, 2, 3]), 5)
    args = {k: getattr(topo, k) for k in ("rp", "jpos", "jcol", "rowid", "perm", "Bp",
                                          "Bi", "bdiag", "tp", "ta", "tb", "parent", "Lp")}
    return dict(n=5, m_full=3, **args)


def _schur_solve(S, n, m, jdata, Q=None, gam=None):
    qdd, lam = np.zeros(n), np.zeros(m)
    Q = np.linspace(-1.0, 1.0, n) if Q is None else Q
    gam = np.linspace(0.5, 1.5, m) if gam is None else gam
    r = S.solve(jdata, np.ones(n), Q, gam, qdd, lam)
    return r, qdd, lam


def test_sparse_schur_checks_its_topology():
    from mbcore._ext._sparse import SparseSchur
    a = _schur_chain()
    S = SparseSchur(**a)
    jv = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    r, qdd, lam = _schur_solve(S, 5, 3, jv)
    J = np.zeros((3, 5))
    J[[0, 0, 1, 1, 2, 2], [0, 1, 1, 2, 2, 3]] = jv
    A = np.block([[np.eye(5), -J.T], [J, np.zeros((3, 3))]])
    x = np.linalg.solve(A, np.concatenate([np.linspace(-1, 1, 5), np.linspace(.5, 1.5, 3)]))
    assert r == 0 and np.allclose(qdd, x[:5], atol=1e-12) and np.allclose(lam, x[5:],
                                                                           atol=1e-12)

    def bad(key, value):
        return lambda: SparseSchur(**{**a, key: np.asarray(value, dtype=a[key].dtype)})
    for key, value in (("jcol", [0, 1, 1, 2, 2, 5]), ("jcol", [0, 1, 1, 2, 2, -1]),
                       ("jpos", [0, 1, 2, 3, 4, -7]), ("rowid", [0, 1, 7]),
                       ("perm", [0, 0, 1]), ("perm", [0, 1, 5]), ("rp", [0, 2, 4, 60]),
                       ("rp", [0, 4, 2, 6]), ("Bp", [0, 1, 9, 9]), ("Bi", [0, 0, 1, 9, 2]),
                       ("bdiag", [0, 2, 99]), ("tp", a["tp"] + 50), ("ta", a["ta"] + 99),
                       ("tb", a["tb"] - 99), ("parent", [-1, -1, -1]), ("parent", [5, 2, -1]),
                       ("Lp", [0, 0, 0, 0]), ("rp", [0, 2, 4]), ("bdiag", [0, 1])):
        refused(bad(key, value), key)
    # a row below the diagonal in the upper triangle (column 0 holds row 1)
    refused(bad("Bi", np.where(np.arange(len(a["Bi"])) == 0, 1, a["Bi"])), "Bi")
    refused(lambda: SparseSchur(**{**a, "n": -1}), "n")
    refused(lambda: SparseSchur(**{**a, "m_full": 2}), "rowid")
    refused(lambda: SparseSchur(**{**a, "pivot_tol": np.nan}), "pivot_tol")
    for key in ("rp", "jcol", "Bi", "parent", "Lp"):
        refused(lambda: SparseSchur(**{**a, key: None}))


def test_sparse_schur_solve_checks_and_degenerate_systems():
    from mbcore._ext._sparse import SparseSchur
    from mbcore.solve.sparse_schur import SchurTopology
    S = SparseSchur(**_schur_chain())
    jv = np.ones(6)
    refused(lambda: _schur_solve(S, 5, 3, jv[:3]), "jdata")
    refused(lambda: _schur_solve(S, 4, 3, jv), "qdd")
    refused(lambda: _schur_solve(S, 5, 2, jv), "lam")
    refused(lambda: S.solve(None, np.ones(5), np.ones(5), np.ones(3), np.zeros(5),
                            np.zeros(3)))
    for bad in (np.nan, np.inf, -np.inf, 1e308, 0.0):
        error_or_finite(lambda: _schur_solve(S, 5, 3, np.full(6, bad))[1])
        error_or_finite(lambda: _schur_solve(S, 5, 3, jv, Q=np.full(5, bad))[0])
    # no constraint rows (qdd = M^-1 Q), and no coordinates at all
    for n in (3, 0):
        t = SchurTopology(np.array([0]), np.array([], np.intp), n)
        E = SparseSchur(n, 0, t.rp, t.jpos, t.jcol, t.rowid, t.perm, t.Bp, t.Bi, t.bdiag,
                        t.tp, t.ta, t.tb, t.parent, t.Lp)
        r, qdd, lam = _schur_solve(E, n, 0, np.zeros(0), Q=np.arange(n, dtype=float),
                                   gam=np.zeros(0))
        assert r == 0 and np.array_equal(qdd, np.arange(n, dtype=float))


# ------------------------------------------------------------------ coordinate partitioning
def _cp_args(s, **kw):
    from mbcore.plugins import registry
    f = registry().get("formulation", "cp")(s, {})
    a = dict(evaluator=s._evaluator, force_evaluator=s._force_evaluator,
             functions=s.ftable._impl if len(s.functions) else None, n=s.n, m=s.m,
             jdata=s._jdata, qgrav=s._q_gravity, minv=np.ascontiguousarray(f.solver.minv),
             col_scale=np.ascontiguousarray(f._col_scale, dtype=float), tol=f.tol,
             factor=f.factor)
    a.update(kw)
    return a, f


def test_compiled_cp_checks_its_construction():
    from mbplugins._ext._cp import CompiledCP
    s = Model.from_file(EXAMPLES / "fourbar_spring_modes.yaml").compile(kernels="compiled")
    a, f = _cp_args(s)
    assert f.compiled is not None and s._force_evaluator.need_fv > 0
    assert outcome(lambda: CompiledCP(**a) and 1)[0] == "ok"
    n, m = s.n, s.m
    kap = Model.from_file(EXAMPLES / "fourbar_kap.yaml").compile(kernels="compiled")
    for kw, word in (
            # the force elements read 2 time functions: NULL function values before
            (dict(functions=None), "time functions"),
            # the evaluator's Jacobian entries beyond m * n (its ground slots)
            (dict(jdata=np.zeros(m * n)), "jdata"), (dict(jdata=np.zeros(3)), "jdata"),
            # an evaluator writing 9 rows into m = 8
            (dict(evaluator=kap._evaluator), "m = 8"),
            (dict(evaluator=None), ""), (dict(jdata=None), ""),
            (dict(m=0), "m"), (dict(m=n), "m"), (dict(qgrav=np.zeros(n - 1)), "qgrav"),
            (dict(minv=np.zeros(2)), "minv"), (dict(minv=np.full(n, np.nan)), "minv"),
            (dict(col_scale=np.zeros(n)), "col_scale"),
            (dict(col_scale=np.full(n, np.inf)), "col_scale"),
            (dict(tol=np.nan), "tol"), (dict(tol=0.0), "tol"), (dict(factor=-1.0), "factor"),
            (dict(force_evaluator=_forces_of(6)), "force_evaluator")):
        refused(lambda: CompiledCP(**{**a, **kw}), word)


def _forces_of(n, row=7):
    """A ForceEvaluator of n coordinates whose spring reads time-function row ``row``."""
    from mbcore._ext import _forces
    return _forces.ForceEvaluator(n, [_tsda_group(np.full((1, 1), row, np.intp))])


def test_compiled_cp_partition_and_evaluation():
    s = Model.from_file(EXAMPLES / "fourbar_spring_modes.yaml").compile(kernels="compiled")
    a, f = _cp_args(s)
    cp = f.compiled
    q = s.initial_state(0.0).q.copy()
    u, v, _, _ = f.choose(q, 0.0)
    u = np.ascontiguousarray(u, dtype=np.intp)
    v = np.ascontiguousarray(v, dtype=np.intp)
    assert outcome(lambda: cp.set_partition(u, v, 0.5, q) or 1)[0] == "ok"
    refused(lambda: cp.set_partition(u, v, np.nan, q), "best_ratio")
    refused(lambda: cp.set_partition(u[:-1], v, 0.5, q), "u")
    refused(lambda: cp.set_partition(u, v, 0.5, q[:-1]), "q")
    refused(lambda: cp.set_partition(None, v, 0.5, q))
    k = cp.n
    for bad in (np.nan, np.inf, 1e308):
        y = np.full(2 * k + 1, bad)
        res = outcome(lambda: (cp.set_partition(u, v, 0.5, q), cp.eval(0.0, y, np.zeros(
            2 * k + 1)))[1])
        assert res[0] in ("ok", "error"), res
    refused(lambda: cp.eval(0.0, np.zeros(2 * k - 1), np.zeros(2 * k + 1)), "y")


# ------------------------------------------------------------------ joint coordinates
def _jc_pendulum2():
    """A planar double pendulum in joint coordinates: two revolute joints."""
    return dict(kind=np.zeros(2, np.intc), parent=np.array([-1, 0], np.intp),
                child=np.array([0, 1], np.intp), sp=np.array([[0.0, 0.0], [0.5, 0.0]]),
                sc=np.array([[-0.5, 0.0], [-0.5, 0.0]]), u=np.zeros((2, 2)),
                angle=np.zeros(2), mass=np.array([1.0, 1.0, 0.1, 1.0, 1.0, 0.1]),
                qgrav=np.array([0.0, -9.81, 0.0, 0.0, -9.81, 0.0]))


def test_compiled_jc_checks_forces_and_parameters():
    from mbplugins._ext._jc import CompiledJC
    from mbcore.elements.functions import FunctionTable, parse_function
    a = _jc_pendulum2()
    jc = CompiledJC(**a)
    out = np.zeros(5)
    assert jc.eval(0.0, np.array([0.3, -0.2, 0.0, 0.1, 0.0]), out) == 0
    assert np.all(np.isfinite(out)) and out[2] < 0.0        # gravity pulls it back
    one = FunctionTable([parse_function("sin(t)", "f")])._impl
    # a force element reading time-function row 7: NULL (no functions) or one row
    refused(lambda: CompiledJC(**a, force_evaluator=_forces_of(6)), "time functions")
    refused(lambda: CompiledJC(**a, force_evaluator=_forces_of(6), functions=one),
            "time functions")
    refused(lambda: CompiledJC(**a, force_evaluator=_forces_of(9)), "force")
    assert outcome(lambda: CompiledJC(**a, force_evaluator=_forces_of(6, 0),
                                      functions=one) and 1)[0] == "ok"
    for key, value, word in (("mass", np.zeros(6), "mass"), ("mass", np.full(6, np.nan),
                                                             "mass"),
                             ("sp", np.full((2, 2), np.inf), "finite"),
                             ("angle", np.full(2, np.nan), "finite"),
                             ("qgrav", np.ones(5), "sizes"),
                             ("parent", np.array([-1, 5], np.intp), "range"),
                             ("child", np.array([0, 0], np.intp), "two joints"),
                             ("kind", np.array([0, 7], np.intc), "kind")):
        refused(lambda: CompiledJC(**{**a, key: value}), word)
    for bad in (np.nan, np.inf, 1e308):
        res = outcome(lambda: jc.eval(bad, np.full(5, bad), np.zeros(5)))
        assert res[0] in ("ok", "error"), res
    refused(lambda: jc.eval(0.0, np.zeros(3), np.zeros(5)), "y")


def _spherical_tree():
    """One spherical joint: nq = 4 (a quaternion), nv = 3: an odd state of 7 + W."""
    from mbplugins._ext._jcspatial import SpatialTreeKernel
    geo = np.zeros((1, 22))
    geo[:, 15] = 1.0
    return SpatialTreeKernel(np.array([4], np.intc), np.array([-1], np.intp),
                             np.array([0], np.intp), geo, np.array([0], np.intp),
                             np.array([0], np.intp), np.ones(1), np.eye(3)[None].copy())


def test_compiled_jc_spatial_checks_and_its_state_size():
    from mbcore._ext._steploop import run_rk
    from mbplugins._ext._jcspatial import CompiledJCSpatial
    K = _spherical_tree()
    qg = np.zeros(7)
    f = CompiledJCSpatial(K, qg, None, None)
    assert f.size == 8 and 2 * f.n + 1 == 7
    refused(lambda: CompiledJCSpatial(None, qg, None, None))
    refused(lambda: CompiledJCSpatial(K, np.full(7, np.nan), None, None), "qgrav")
    refused(lambda: CompiledJCSpatial(K, qg, _forces_of(7), None), "time functions")
    refused(lambda: CompiledJCSpatial(K, np.zeros(6), None, None), "gravity")
    y = np.array([1.0, 0.0, 0.0, 0.0, 0.1, 0.2, 0.3, 0.0])
    A = np.zeros((1, 1))

    def rk(y0, **kw):
        f0 = np.zeros(y0.size)
        return lambda: run_rk(f, A, np.ones(1), np.zeros(1), np.zeros(2), np.zeros((2, 1)),
                              False, 0.0, 0.01, y0, f0, np.array([0.01]), 0, 1e-3, 0.0, 0.0,
                              np.inf, 0.9, 0.2, 10.0, 0.0, 1, lambda t, yy: None,
                              np.zeros(5))[2]
    res = outcome(rk(y))
    assert res[:2] == ("ok", True), res
    # 2 n + 1 = 7 entries passed the size check before: the evaluation wrote 8
    refused(rk(y[:7]), "y0")
    for bad in (np.nan, np.inf, 1e308, 0.0):      # 0: a zero quaternion
        res = outcome(lambda: f.eval(0.0, np.full(8, bad), np.zeros(8)))
        assert res[0] in ("ok", "error"), res
