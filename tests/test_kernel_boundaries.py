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
    g = dict(kernel="revolute", kind="planar", boff=np.array([[0, 3]]),
             row=np.array([0]), par=np.zeros(4), fidx=np.zeros((1, 0), np.intp),
             jpos=np.zeros(12, np.intp), xoff=np.zeros((1, 0), np.intp))
    assert outcome(lambda: _planar.PlanarEvaluator(6, [g]) and 1)[0] == "ok"
    for key, value in (("boff", np.array([[0, 1000]])), ("boff", np.array([[-3, 0]])),
                       ("row", np.array([-1])), ("jpos", np.full(12, -5, np.intp))):
        refused(lambda: _planar.PlanarEvaluator(6, [{**g, key: value}]), key)
    refused(lambda: _planar.PlanarEvaluator(-1, []), "n")


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


def test_force_evaluator_refuses_bad_packed_groups():
    from mbcore._ext import _forces
    ok = dict(kernel="tsda", boff=np.array([[0, 3]]), par=np.zeros(_forces.KERNELS[
        "tsda"][2]), fidx=np.zeros((1, _forces.KERNELS["tsda"][3]), np.intp))
    assert outcome(lambda: _forces.ForceEvaluator(6, [ok]) and 1)[0] == "ok"
    refused(lambda: _forces.ForceEvaluator(6, [{**ok, "boff": np.array([[0, 999]])}]),
            "boff")
    refused(lambda: _forces.ForceEvaluator(6, [{**ok, "boff": np.array([[-1, 0]])}]),
            "boff")
    refused(lambda: _forces.ForceEvaluator(-4, []), "n")


def test_fv_rows_checked_against_function_indices(springs, fourbar):
    from mbcore._ext import _forces
    k = _forces.KERNELS["tsda"]
    if k[3] == 0:
        pytest.skip("tsda reads no time function")
    g = dict(kernel="tsda", boff=np.array([[0, 3]]), par=np.zeros(k[2]),
             fidx=np.full((1, k[3]), 7, np.intp))
    fe = _forces.ForceEvaluator(6, [g])
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
    from mbcore._ext._dynamics import run_rk
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
    from mbcore.functions import FunctionTable, parse_function
    tab = FunctionTable([parse_function("sin(t)", "f"), parse_function(
        {"table": {"t": [0, 1, 2], "y": [0, 1, 0]}}, "g")])
    refused(lambda: tab.evaluate(0.5, np.zeros((1, 3))), "out")
    refused(lambda: tab.evaluate(0.5, np.zeros((2, 3), np.float32)), "out")
    refused(lambda: tab.evaluate(0.5, np.zeros((3, 2)).T), "out")
    for t in (np.nan, np.inf, -np.inf, 1e308):
        res = outcome(lambda: tab(t))
        assert res[0] == "error" or (res[0] == "ok" and res[1]), res
