"""The stiff (ADAMS-type, index-3) DAE form on the compiled BDF loop (Nikravesh (1988),
§12.4, §13.3.4): ``mbplugins._ext._dae.CompiledStiff`` against
its NumPy reference ``Stiff.rhs`` (+ the dynamic analysis' work rate) to 1e-12, and
``_steploop.run_bdf`` with the formulation's bdf options (``mass``, ``h_power``, the
``ReducedNewton`` hook called back from C) and the analysis' Jacobian call-back
taking the same steps as the Python driver on the same compiled right-hand side."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

import mbcore
from mbcore import Model
from mbcore.plugins import registry
from mbcore.system import compiled_available

from dae_checks import assert_jacobian_and_run_match_numpy  # noqa: E402

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from models import stiff_chain  # noqa: E402

STRICT = os.environ.get("MBCORE_STRICT_BITWISE") == "1"
FILES = {"fourbar": "fourbar_dap.yaml", "slider_crank": "slider_crank_dynamic.yaml"}


def _model(examples, name):
    if name == "loaded":
        from test_compiled_rhs import loaded_chain
        return loaded_chain()
    if name == "stiff_chain":
        return stiff_chain(5, damping=10.0)        # damped: P_nc != 0
    return Model.from_file(examples / FILES.get(name, f"{name}.yaml"))


def _stiff(sysm):
    return registry().get("formulation", "stiff")(sysm, {})


def _reference(form, sysm, t, y):
    """f of the stiff form by the NumPy path (``Stiff.rhs``) and the work rate the
    dynamic analysis adds: P_nc + lam . (Phi_q s)."""
    n, size = sysm.n, form.size
    f = form.rhs(t, y[:size]).copy()
    q, v, lam = y[:n], y[n:2 * n], y[2 * n:size]
    w = sysm.nonconservative_power(q, v, t)
    if form.m:
        w += float(lam @ (sysm.jacobian_dense(q, t) @ v))
    return np.concatenate([f, [w]])


@pytest.mark.parametrize("jacobian", ["dense", "sparse"])
@pytest.mark.parametrize("case", ["loaded", "fourbar", "slider_crank", "platform",
                                  "stiff_chain"])
def test_compiled_stiff_equals_numpy_rhs(examples, case, jacobian):
    m = _model(examples, case)
    sysm = m.compile(kernels="compiled", jacobian=jacobian)
    assert sysm.dense == (jacobian == "dense")
    ref = m.compile(kernels="numpy")
    form, fref = _stiff(sysm), _stiff(ref)
    assert type(form.compiled).__name__ == "CompiledStiff" and fref.compiled is None
    assert fref.compiled_reason == "kernels: numpy" and form.compiled_reason is None
    n, mm, size = sysm.n, form.m, form.size
    assert size == 2 * n + mm
    assert form.compiled.size == size + 1 and form.compiled.m == mm and form.compiled.dae
    assert form.compiled.sparse == (jacobian == "sparse")
    rng = np.random.default_rng(7)
    q0 = sysm.initial_state(0.0).q
    out = np.zeros(size + 1)
    for _ in range(6):
        t = rng.uniform(0.0, 2.0)
        y = np.concatenate([q0 + 0.05 * rng.standard_normal(n), rng.standard_normal(n),
                            10.0 * rng.standard_normal(mm), [0.0]])
        out[:] = np.nan
        assert form.compiled.eval(t, y, out) == 0
        for f_, s_ in ((form, sysm), (fref, ref)):      # same System, NumPy backend
            want = _reference(f_, s_, t, y)
            np.testing.assert_allclose(out, want, rtol=0,
                                       atol=1e-12 * (1.0 + np.max(np.abs(want))))
        # the blocks are exercised (reactions, Phi and the work rate non-zero)
        assert out[size] != 0.0
        assert mm == 0 or np.all(np.abs(out[2 * n:size]) > 0.0)
    with pytest.raises(ValueError, match="entries"):
        form.compiled.eval(0.0, np.zeros(size - 1), out)


def test_work_row_of_the_stiff_state(examples):
    """``work_row`` (inherited from CompiledGGL) on the stiff state [q, s, lam]: the
    forward differences of ``eval`` bit for bit, the derivative of the NumPy work rate
    to the accuracy of differences, ``dW'/dlam = Phi_q s``."""
    from test_compiled_rhs import loaded_chain
    sysm = loaded_chain().compile(kernels="compiled")
    form = _stiff(sysm)
    crhs, size, n = form.compiled, form.size, sysm.n
    rng = np.random.default_rng(5)
    y = np.concatenate([sysm.initial_state(0.0).q + 0.05 * rng.standard_normal(n),
                        rng.standard_normal(n), rng.standard_normal(form.m), [0.0]])
    t = 0.4
    row = np.zeros(size + 1)
    assert crhs.work_row(t, y, row) == 0 and row[size] == 0.0
    buf = np.zeros(size + 1)
    crhs.eval(t, y, buf)
    w0, want, yp = buf[size], np.zeros(size), y.copy()
    for j in range(size):
        d = 1e-7 * (1.0 + abs(y[j]))
        yp[j] = y[j] + d
        crhs.eval(t, yp, buf)
        want[j] = (buf[size] - w0) / d
        yp[j] = y[j]
    np.testing.assert_array_equal(row[:size], want)
    Pv = sysm.jacobian_dense(y[:n], t) @ y[n:2 * n]
    # forward differences of W' (step >= 1e-7) round to 2 eps |W'| / 1e-7 (observed
    # 0.16 of it); 100x it
    bound = 2 * np.finfo(float).eps * abs(w0) / 1e-7
    np.testing.assert_allclose(row[2 * n:size], Pv, rtol=0, atol=100 * bound)
    with pytest.raises(ValueError, match="entries"):
        crhs.work_row(t, y[:size - 1], row)


@pytest.mark.parametrize("case", ["spatial_double_pendulum", "spatial_heavy_top",
                                  "spatial_slider_crank_dynamic"])
def test_compiled_stiff_of_spatial_bodies_equals_numpy(examples, case):
    """Spatial bodies: the velocity rows M^-1 (Q + P^T lam) with the true gradient P of
    Phi (radial coefficients by Richardson differences of the compiled Phi) in C, equal
    to the NumPy path ``Stiff.rhs`` (observed 8e-16 of the scale; bound 1e-12); the true
    rows and M^-1 P^T of the Newton hook equal ``_phi_rows`` / ``_lam_columns`` (the
    same differences: observed 8e-16 of the scale; bound 1e-12); the Newton Jacobian
    and a run against the NumPy path (``dae_checks``)."""
    from mbplugins.formulations.stiff import _lam_columns, _phi_rows
    m = Model.from_file(examples / f"{case}.yaml")
    sysm = m.compile(kernels="compiled")
    form = _stiff(sysm)
    assert form.compiled is not None and form.compiled_reason is None
    n, mm, size = sysm.n, form.m, form.size
    rng = np.random.default_rng(7)
    q0 = sysm.initial_state(0.0).q
    for _ in range(4):
        y = np.concatenate([q0 + 0.01 * rng.standard_normal(n), rng.standard_normal(n),
                            rng.standard_normal(mm), [0.0]])
        out = np.zeros(size + 1)
        assert form.compiled.eval(0.1, y, out) == 0
        want = _reference(form, sysm, 0.1, y)
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-12 * (1 + np.abs(want).max()))
        q, v = y[:n], y[n:2 * n]
        P = form.compiled.true_rows(0.1, q)
        Pn = _phi_rows(sysm, q, 0.1)
        np.testing.assert_allclose(P, Pn, rtol=0, atol=1e-12 * (1 + np.abs(Pn).max()))
        C = form.compiled.lam_columns(q, v, P)
        Cn = _lam_columns(sysm, q, v, 0.1, Pn)
        np.testing.assert_allclose(C, Cn, rtol=0, atol=1e-12 * (1 + np.abs(Cn).max()))
    assert_jacobian_and_run_match_numpy(form, m, 0.1, y[:size])


def test_compiled_stiff_not_for_sparse_spatial_models():
    from models import spatial_chain
    form = _stiff(spatial_chain(30).compile(kernels="compiled"))
    assert form.compiled is None and "sparse" in form.compiled_reason


class _Hook:
    """bdf's ``newton_system`` hook wrapped: counts its calls in ``calls`` and raises
    ``fail = (name, exception class)`` from that method at attempts after t = 0.3."""

    def __init__(self, hook, calls, fail=None):
        self.hook, self.calls, self.fail, self.t = hook, calls, fail, 0.0

    def _call(self, name, *args):
        self.calls[name] = self.calls.get(name, 0) + 1
        if self.fail is not None and self.fail[0] == name and self.t > 0.3:
            raise self.fail[1](f"{name} failed", self.t)
        return getattr(self.hook, name)(*args)

    def update(self, t, y):
        self.t = t
        return self._call("update", t, y)

    def matrix(self, J, mass, c):
        return self._call("matrix", J, mass, c)

    def rhs(self, r, c):
        return self._call("rhs", r, c)

    def solution(self, x, r, c):
        return self._call("solution", x, r, c)


def _wrap_hooks(monkeypatch, calls, fail=None):
    from mbplugins.formulations.stiff import Stiff
    orig = Stiff._newton_system
    monkeypatch.setattr(Stiff, "_newton_system",
                        lambda self: _Hook(orig(self), calls, fail))


def _counts(r):
    return {k: r.stats[k] for k in r.stats if k.startswith("integrator_n")}


def _assert_same_run(a, b):
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    ca, cb = _counts(a), _counts(b)
    assert {"integrator_nfev", "integrator_njev", "integrator_nlu"} <= set(cb)
    if STRICT:
        assert ca == cb
    else:     # any BLAS: the same integration to rounding (tests/test_multistep_compiled)
        for k in ("integrator_nfev", "integrator_nsteps", "integrator_njev",
                  "integrator_nlu", "integrator_nlu_solves"):
            assert abs(ca[k] - cb[k]) <= max(2, 0.02 * cb[k]), k
    assert len(a) == len(b)
    # the dense output (C loop vs BackwardDifferenceDenseOutput) rounds differently
    tol = 1e-12 if STRICT else 1e-8
    for ch in ("q", "qd", "qdd", "lam", "energy"):
        x, y = a[ch], b[ch]
        if y.size:                                  # (no multipliers: the chain)
            np.testing.assert_allclose(x, y, rtol=0, atol=tol * (1.0 + np.max(np.abs(y))),
                                       err_msg=ch)
    if STRICT:
        np.testing.assert_array_equal(a["integrator"], b["integrator"])


@pytest.mark.parametrize("model", ["fourbar", "slider_crank", "fourbar_sparse",
                                   "stiff_chain"])
@pytest.mark.parametrize("rtol", [1e-6, 1e-9])
def test_stiff_compiled_loop_equals_python_driver(examples, model, rtol, monkeypatch):
    """Same steps, evaluations, Jacobians, LU factorisations and Newton-hook calls;
    Phi = 0 at the outputs to the Newton tolerance; the motion of DI to the
    integration tolerance; the energy balance (work channel) to the tolerance."""
    jacobian = "sparse" if model.endswith("_sparse") else "auto"
    m = _model(examples, model.replace("_sparse", ""))
    t_end = 0.2 if model == "stiff_chain" else 1.0
    st = {"analysis": "dynamic", "t_end": t_end, "output_step": t_end / 20,
          "integrator": "bdf", "formulation": "stiff", "rtol": rtol, "atol": 1e-2 * rtol,
          "record": "q, qd, qdd, lam, energy, violation, integrator"}
    ca, cb = {}, {}
    with monkeypatch.context() as mp:
        _wrap_hooks(mp, ca)
        a = mbcore.run(m, settings=st, jacobian=jacobian)
    with monkeypatch.context() as mp:
        _wrap_hooks(mp, cb)
        b = mbcore.run(m, settings={**st, "loop": "python"}, jacobian=jacobian)
    _assert_same_run(a, b)
    # the hook ran in both loops, as often (update before every attempt, one rhs and
    # solution per Newton iteration, a matrix per LU)
    assert ca["update"] == a.stats["integrator_nsteps"] + a.stats["integrator_nrejected"]
    assert ca["solution"] == ca["rhs"]
    assert ca["rhs"] == a.stats["integrator_nlu_solves"]
    assert ca["matrix"] == a.stats["integrator_nlu"]
    if STRICT:
        assert ca == cb
    else:
        for k in ca:
            assert abs(ca[k] - cb[k]) <= max(2, 0.02 * cb[k]), k
    # the Jacobian came from the formulation (call-back), not from differences of f
    assert a.stats["integrator_njev"] > 0 and a.stats["integrator_nfev_jac"] == 0
    v = a["violation"]
    assert np.max(v[:, 0]) <= 1e-10                # positions: Phi = 0 (Newton, projection)
    e = a["energy"]                                 # T + V - W
    assert np.max(np.abs(e[:, 4] - e[0, 4])) < 1e3 * rtol * (1.0 + np.max(np.abs(e[:, 2])))
    di = mbcore.run(m, settings={**st, "formulation": "di", "integrator": "bdf",
                                 "rtol": 1e-12, "atol": 1e-14})
    scale = 1.0 + np.max(np.abs(di["q"]))
    err = np.max(np.abs(a["q"] - di["q"])) / scale
    assert err < 300 * rtol, err
    assert err > 1e-4 * rtol                        # a real comparison (not the same run)


def test_long_run_same_steps(examples):
    """10 s of the four-bar (3000 steps, order changes, Newton failures): the two loops
    stay together — bdf's |h|^p error weights are NumPy's ``h_abs ** h_power`` in both
    (its vectorised pow and libm's differ in the last bit for ~5 % of arguments, which
    made the step sequences part after ~5 s)."""
    m = Model.from_file(examples / "fourbar_dap.yaml")
    st = {"analysis": "dynamic", "t_end": 10.0, "output_step": 1.0, "integrator": "bdf",
          "formulation": "stiff", "rtol": 1e-6, "atol": 1e-8, "record": "q, integrator"}
    a = mbcore.run(m, settings=st)
    b = mbcore.run(m, settings={**st, "loop": "python"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    ca, cb = _counts(a), _counts(b)
    for k in ca:
        assert abs(ca[k] - cb[k]) <= max(2, 0.005 * cb[k]), k
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-8)


def test_dispatch(examples):
    """stiff + bdf: the compiled loop when CompiledStiff applies, with the
    formulation's bdf options (mass, h_power, the ReducedNewton hook) passed through;
    ``loop: python`` and the NumPy kernels keep the Python driver; another integrator
    is a named error (a DAE needs a mass matrix)."""
    from mbcore.errors import ModelError
    from mbcore.integrate.fastloop import compiled_loop_for
    import mbcore.integrate.multistep_loop as ml
    from mbplugins.formulations.stiff import ReducedNewton
    from mbplugins.integrators.bdf import BDF
    m = Model.from_file(examples / "fourbar_dap.yaml")
    base = {"analysis": "dynamic", "t_end": 0.1, "output_step": 0.05, "integrator": "bdf",
            "formulation": "stiff"}
    for extra, loop in (({}, "compiled"), ({"loop": "python"}, "python"),
                        ({"kernels": "numpy"}, "python")):
        r = mbcore.run(m, settings={**base, **extra})
        assert r.stats["loop"] == loop, extra
    with pytest.raises(ModelError, match="mass matrix"):
        mbcore.run(m, settings={**base, "integrator": "dopri5"})
    form = _stiff(m.compile(kernels="compiled"))
    assert compiled_loop_for(BDF, form, jac=form.jacobian) == "bdf"
    for name in ("abm", "dopri5", "trapezoid"):
        assert compiled_loop_for(registry().get("integrator", name), form) is None, name
    seen = {}
    orig = ml.run_multistep

    def spy(kind, icls, form_, t0, t1, y0, t_out, options, *args, **kw):
        seen.update(options)
        return orig(kind, icls, form_, t0, t1, y0, t_out, options, *args, **kw)
    ml.run_multistep = spy
    try:
        mbcore.run(m, settings=base)
    finally:
        ml.run_multistep = orig
    n, mm = form.n, form.m
    from mbplugins._ext._stiffnewton import ReducedNewtonC
    assert isinstance(seen["newton_system"], ReducedNewtonC)     # its compiled twin
    numpy_form = _stiff(m.compile(kernels="numpy"))
    assert isinstance(numpy_form.integrator_options(1)["newton_system"], ReducedNewton)
    np.testing.assert_array_equal(seen["mass"][:2 * n + mm], form.state_mass)
    np.testing.assert_array_equal(seen["h_power"][:2 * n + mm], form.state_h_power)


def test_failures_hand_over_or_raise_the_named_error(examples, monkeypatch):
    """A torque that cannot be evaluated after t = 0.3, a Jacobian call-back and a
    Newton hook that fail after t = 0.3: the compiled loop hands the step to the
    Python driver (code 2), which raises the same named error as the Python loop."""
    from mbcore.errors import AnalysisError
    from mbplugins.formulations.stiff import Stiff
    from test_ggl_compiled import torque_failure_hands_over
    codes, st = torque_failure_hands_over(examples, monkeypatch, "stiff")

    class Failed(AnalysisError):
        pass
    orig = Stiff.jacobian

    def failing(self, t, y):
        if t > 0.3:
            raise Failed("jacobian failed", t)
        return orig(self, t, y)
    for name in ("jacobian", "update", "matrix", "solution"):
        m = Model.from_file(examples / "fourbar_dap.yaml")
        codes.clear()
        with monkeypatch.context() as mp:
            if name == "jacobian":
                mp.setattr(Stiff, "jacobian", failing)
            else:
                _wrap_hooks(mp, {}, (name, Failed))
            with pytest.raises(Failed, match=name) as exc:
                mbcore.run(m, settings=st)
            # handed over from the last accepted step before the failing attempt
            assert codes[-1][0] == 2 and codes[-1][1] < exc.value.t, name
            with pytest.raises(Failed, match=name) as ref:
                mbcore.run(m, settings={**st, "loop": "python"})
        # (the Python driver restarts at order 1 from the hand-over: its next attempt
        # lies elsewhere; the same named error shortly after 0.3)
        assert 0.3 < ref.value.t < 0.36 and 0.3 < exc.value.t < 0.36, name


@pytest.mark.parametrize("case", ["fourbar", "slider_crank", "stiff_chain"])
def test_compiled_newton_hook_equals_reduced_newton(examples, case, monkeypatch):
    """``_stiffnewton.ReducedNewtonC`` against its NumPy reference ``ReducedNewton``:
    every call of a run (update, matrix, rhs, solution with the work component)
    replayed on the compiled hook gives the same arrays (bit for bit under
    ``MBCORE_STRICT_BITWISE=1``, else to 1e-14), and a whole run with either hook
    takes the same steps."""
    from mbplugins._ext._stiffnewton import ReducedNewtonC
    from mbplugins.formulations.stiff import ReducedNewton, Stiff
    m = _model(examples, case)
    st = {"analysis": "dynamic", "t_end": 0.2 if case == "stiff_chain" else 1.0,
          "output_step": 0.05, "formulation": "stiff", "integrator": "bdf",
          "rtol": 1e-7, "atol": 1e-9, "record": "q, qd, lam, integrator"}
    log = []

    class Logged(ReducedNewton):
        def _log(self, name, args, res):
            log.append((name, [np.array(x) if isinstance(x, np.ndarray) else x
                               for x in args], np.array(res)))
            return res

        def update(self, *a):
            return self._log("update", a, ReducedNewton.update(self, *a))

        def matrix(self, *a):
            return self._log("matrix", a, ReducedNewton.matrix(self, *a))

        def rhs(self, *a):
            return self._log("rhs", a, ReducedNewton.rhs(self, *a))

        def solution(self, *a):
            return self._log("solution", a, ReducedNewton.solution(self, *a))
    monkeypatch.setattr(Stiff, "_newton_system",
                        lambda self: Logged(self.n, self.m, self.system.jacobian_dense))
    ref = mbcore.run(m, settings=st)
    monkeypatch.undo()
    assert {name for name, *_ in log} == {"update", "matrix", "rhs", "solution"}
    sysm = m.compile(kernels="compiled")
    hook = ReducedNewtonC(sysm.n, sysm.m, sysm.jacobian_dense)
    for name, args, want in log:
        got = np.array(getattr(hook, name)(*args))
        if STRICT:
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300, err_msg=name)
    r = mbcore.run(m, settings=st)                  # the compiled hook (default)
    assert _counts(r) == _counts(ref)
    for ch in ("q", "qd", "lam", "integrator"):
        if ref[ch].size:
            np.testing.assert_allclose(r[ch], ref[ch], rtol=0, atol=1e-12, err_msg=ch)
    with pytest.raises(ValueError, match="wrong size"):
        hook.solution(np.zeros(3), np.zeros(2 * sysm.n + sysm.m + 1), 0.1)
    with pytest.raises(ValueError, match="wrong size"):
        hook.rhs(np.zeros(2), 0.1)
    with pytest.raises(ValueError, match="do not match"):
        hook.matrix(np.zeros((3, 3)), np.ones(3), 0.1)


def _redundant(examples, name):
    """The DAP four-bar with its crank pin modelled twice (planar), or the Cardan
    shaft (spatial: overconstrained ball rows)."""
    if name == "cardan":
        return Model.from_file(examples / "spatial_cardan_shaft.yaml")
    from test_dynamics import dap_fourbar
    m = dap_fourbar(examples)
    m.add_joint("revolute", "O2_twin", body_i="ground", body_j="crank", point_i=(0, 0),
                point_j=(-1, 0))
    return m


@pytest.mark.parametrize("formulation", ["ggl", "stiff"])
@pytest.mark.parametrize("name", ["fourbar_twin_pin", "cardan"])
def test_compiled_dae_forms_on_the_independent_rows(examples, formulation, name):
    """Redundant constraints: the DAE forms keep the independent rows (one multiplier
    each) and their compiled right-hand side follows them — equal to the NumPy path on
    the same rows (observed 2.2e-16 of the scale; bound 1e-12) — and a run stays on the
    compiled loop with the Python path's motion (observed ~1e-10; bound 1e-6)."""
    from mbcore.solve.linalg import rank_revealing
    m = _redundant(examples, name)
    sysm = m.compile(kernels="compiled")
    form = registry().get("formulation", formulation)(sysm, {})
    from mbcore.solve.assembly import assemble
    st0 = sysm.initial_state(0.0)
    q0 = assemble(sysm, st0.q, st0.qd, 0.0).q
    _, ind, dep, _ = rank_revealing(sysm.jacobian_dense(q0, 0.0))
    assert len(dep) > 0
    form.use_independent_rows(ind)
    assert form.compiled is not None and form.compiled.m == len(ind) < sysm.m
    n, mm, size = sysm.n, form.m, form.size
    rng = np.random.default_rng(11)
    for _ in range(3):
        y = np.concatenate([q0 + 0.01 * rng.standard_normal(n), rng.standard_normal(n),
                            rng.standard_normal(size - 2 * n), [0.0]])
        out = np.zeros(size + 1)
        assert form.compiled.eval(0.2, y, out) == 0
        f = form.rhs(0.2, y[:size]).copy()
        q, v, lam = y[:n], y[n:2 * n], y[2 * n:2 * n + mm]
        w = sysm.nonconservative_power(q, v, 0.2) + float(
            lam @ (form.system.jacobian_dense(q, 0.2) @ v))
        want = np.concatenate([f, [w]])
        np.testing.assert_allclose(out, want, rtol=0, atol=1e-12 * (1 + np.abs(want).max()))
    st = {"t_end": 0.1, "output_step": 0.05, "formulation": formulation,
          "integrator": "bdf", "rtol": 1e-8, "atol": 1e-10}
    a = mbcore.run(m, analysis="dynamic", settings=st)
    b = mbcore.run(m, analysis="dynamic", settings={**st, "kernels": "numpy"})
    assert a.stats["loop"] == "compiled" and b.stats["loop"] == "python"
    assert a.stats.get("redundant_equations") and \
        a.stats["redundant_equations"] == b.stats["redundant_equations"]
    np.testing.assert_allclose(a["q"], b["q"], rtol=0, atol=1e-6)
