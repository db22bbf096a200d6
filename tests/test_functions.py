"""Driver time functions: spec parsing, the safe expression language, exact jets
(value, d/dt, d²/dt²), table splines and extrapolation, domain errors, and the
agreement of the compiled evaluator with the pure-Python reference."""
from __future__ import annotations

import ast
import builtins
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.interpolate import CubicSpline

from mbcore.elements import expressions as ex
from mbcore.errors import AnalysisError, MbcoreError, ModelError
from mbcore.elements.functions import (
    Constant, Expression, FunctionDomainError, FunctionTable, Harmonic, Polynomial,
    Table, TimeFunction, parse_function,
)

pytestmark = pytest.mark.core     # mbcore only (passes with the stub plugin set)

PATH = "drivers[0].function"
PARAMS = {"omega": 2.0, "a": 0.5, "b": -1.25}


def compiled():
    """The extension module, or skip the test when it is not built."""
    return pytest.importorskip("mbcore._ext._functions")


# --- helpers -----------------------------------------------------------------------

def fd_jet(f, t, h=1e-3):
    """4th-order central differences: d from values, dd from values (second
    difference) and from the analytic first derivative (independent checks)."""
    v = [f.jet(t + k * h) for k in (-2, -1, 0, 1, 2)]
    val = [x[0] for x in v]
    der = [x[1] for x in v]
    d = (val[0] - 8 * val[1] + 8 * val[3] - val[4]) / (12 * h)
    dd_from_val = (-val[0] + 16 * val[1] - 30 * val[2] + 16 * val[3] - val[4]) / (12 * h * h)
    dd_from_der = (der[0] - 8 * der[1] + 8 * der[3] - der[4]) / (12 * h)
    return d, dd_from_val, dd_from_der


def assert_derivatives(f, ts, rtol=2e-7):
    for t in ts:
        v, d, dd = f.jet(t)
        fd, fdd1, fdd2 = fd_jet(f, t)
        scale = 1.0 + abs(v) + abs(d) + abs(dd)
        assert abs(d - fd) <= rtol * scale, (f, t, d, fd)
        assert abs(dd - fdd2) <= rtol * scale, (f, t, dd, fdd2)
        assert abs(dd - fdd1) <= 50 * rtol * scale, (f, t, dd, fdd1)


def close(a, b, tol=1e-12):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.maximum(np.abs(a), np.abs(b))))


def both_tables(functions):
    ext = compiled()  # noqa: F841 - skip when not built
    return FunctionTable(functions, "compiled"), FunctionTable(functions, "numpy")


# every opcode at least once; arguments kept inside the domains on t in [0.05, 3]
EXPRESSIONS = [
    "1.0472 + omega*t",
    "0.1*sin(2*pi*t) + t**2",
    "cos(3*t - a) * exp(-t) / (1 + t**2)",
    "tan(0.3*t) - asin(0.2*t) + acos(0.25*t - 0.1) + atan(t*t)",
    "sinh(t/2) + cosh(0.3*t) * tanh(t - 1)",
    "log(1 + t) + log10(2 + t*t) + sqrt(t + 0.5)",
    "atan2(sin(t), 2 + cos(t)) + atan2(t - 1, -0.5)",
    "(1 + t)**t + 2**(0.5*t) + t**1.5 + t**-2 + (t - 1)**3 + t**0 + t**1",
    "abs(t - 1.3) + min(t, 2 - t) + max(sin(5*t), cos(5*t))",
    "-(-t) + +t - e*t/b",
    "((((t + 1) * (t - 1)) / (t + 2)) ** 2) - 3e-2*t**7",
]


def spline_specs():
    t = [0.0, 0.4, 1.1, 1.5, 2.3, 3.0]
    y = [0.0, 0.7, 0.2, -0.4, 0.1, 0.0]
    for bc in ("not-a-knot", "natural", "clamped", "periodic"):
        for extrap in ("error", "linear", "hold", "spline"):
            yield {"table": {"t": t, "y": y, "bc": bc, "extrapolate": extrap}}
    yield {"table": {"t": t, "y": y, "bc": "periodic", "extrapolate": "periodic"}}
    yield {"table": {"t": [0, 3], "y": [1, 3]}}                        # 2 points: a line
    yield {"table": {"t": [0, 1, 3], "y": [1, 3, 0], "extrapolate": "spline"}}


ALL_SPECS = [
    2.5, {"constant": -1.0}, {"polynomial": [1.5]}, {"polynomial": [1, -2, 0.5, 0.25, -0.1]},
    {"kap": [1.0, 2.0, 3.0]}, {"kap": [0.3, 1.1]},
    {"harmonic": {"amplitude": 0.2, "frequency": 3.0}},
    {"harmonic": {"amplitude": 2, "frequency": 1.5, "phase": 0.3, "offset": -1}},
    *EXPRESSIONS,
    {"expression": "c*t + omega", "parameters": {"c": 3.0}},
    *spline_specs(),
]


# --- parsing ------------------------------------------------------------------------

def test_parse_kinds_and_values():
    assert parse_function(2.5, PATH) == Constant(2.5)
    assert parse_function({"constant": 2}, PATH).jet(7.0) == (2.0, 0.0, 0.0)
    p = parse_function({"polynomial": [1, 2, 3]}, PATH)
    assert isinstance(p, Polynomial) and p.jet(2.0) == (1 + 4 + 12, 2 + 12, 6)
    k = parse_function({"kap": [1.0, 2.0, 3.0]}, PATH)       # c0 + w t + alpha t²/2
    assert k == Polynomial([1.0, 2.0, 1.5])
    assert k.jet(2.0) == (1 + 4 + 6, 2 + 6, 3)
    h = parse_function({"harmonic": {"amplitude": 2, "frequency": 3, "phase": 0.5,
                                     "offset": 1}}, PATH)
    t = 0.7
    assert close(h.jet(t), (1 + 2 * math.sin(3 * t + 0.5), 6 * math.cos(3 * t + 0.5),
                            -18 * math.sin(3 * t + 0.5)), 1e-15)
    e = parse_function("1.0472 + omega*t", PATH, PARAMS)
    assert isinstance(e, Expression) and e.jet(0.5) == (1.0472 + 1.0, 2.0, 0.0)
    assert e(0.5) == 2.0472 and np.allclose(e(np.array([0.0, 1.0])), [1.0472, 3.0472])
    assert isinstance(parse_function({"table": {"t": [0, 1, 2], "y": [0, 1, 4]}}, PATH),
                      Table)
    assert parse_function(h, PATH) is h                      # functions pass through
    assert parse_function(np.float64(1.5), PATH) == Constant(1.5)


def test_local_parameters_override_global_ones():
    f = parse_function({"expression": "a*t", "parameters": {"a": 3.0}}, PATH, PARAMS)
    assert f.jet(2.0) == (6.0, 3.0, 0.0)
    assert parse_function("a*t", PATH, PARAMS).jet(2.0) == (1.0, 0.5, 0.0)


@pytest.mark.parametrize("spec", ALL_SPECS, ids=range(len(ALL_SPECS)))
def test_round_trip(spec):
    f = parse_function(spec, PATH, PARAMS)
    s = f.to_spec()
    json.dumps(s)                                      # plain data, file-ready
    g = parse_function(s, PATH, PARAMS)
    assert g == f and hash(g) == hash(f)
    assert parse_function(s, "other", {}) == f         # self-contained (no globals needed)
    for t in (0.3, 1.7):
        assert g.jet(t) == f.jet(t)


def test_equality_distinguishes_functions():
    assert Polynomial([1, 2]) != Polynomial([1, 2, 0])
    assert Constant(1.0) != Polynomial([1.0])
    assert parse_function("a*t", PATH, {"a": 1}) != parse_function("a*t", PATH, {"a": 2})
    t, y = [0, 1, 2], [0, 1, 0]
    assert Table(t, y) != Table(t, y, bc="natural")
    assert Table(t, y) != Table(t, y, extrapolate="hold")
    assert Constant(1.0, path="x") == Constant(1.0, path="y")    # path is not identity


BAD_SPECS = [
    (None, PATH, "expected a number"),
    (True, PATH, "expected a number"),
    ([1, 2], PATH, "expected a number"),
    ({}, PATH, "exactly one of"),
    ({"polynomial": [1], "constant": 1}, PATH, "exactly one of"),
    ({"sine": 1}, PATH + ".sine", "unknown key 'sine'"),
    ({"constant": 1, "parameters": {}}, PATH + ".parameters", "unknown key"),
    ({"constant": "x"}, PATH + ".constant", "expected a number"),
    ({"constant": float("nan")}, PATH + ".constant", "finite"),
    ({"polynomial": []}, PATH + ".polynomial", "at least 1"),
    ({"polynomial": [1, "2"]}, PATH + ".polynomial[1]", "expected a number"),
    ({"polynomial": [1, False]}, PATH + ".polynomial[1]", "expected a number"),
    ({"kap": [1, 2, 3, 4]}, PATH + ".kap", "c0, omega, alpha"),
    ({"harmonic": {"amplitude": 1}}, PATH + ".harmonic", "missing key 'frequency'"),
    ({"harmonic": {"amplitude": 1, "frequency": 2, "freq": 3}},
     PATH + ".harmonic.freq", "unknown key"),
    ({"harmonic": [1, 2]}, PATH + ".harmonic", "expected a mapping"),
    ({"harmonic": {"amplitude": 1, "frequency": float("inf")}},
     PATH + ".harmonic.frequency", "finite"),
    ({"table": {"t": [0, 1, 2], "y": [0, 1]}}, PATH + ".table.y", "same length"),
    ({"table": {"t": [0, 1, 1], "y": [0, 1, 2]}}, PATH + ".table.t", "strictly increasing"),
    ({"table": {"t": [0, 2, 1], "y": [0, 1, 2]}}, PATH + ".table.t", "strictly increasing"),
    ({"table": {"t": [0], "y": [0]}}, PATH + ".table.t", "at least 2"),
    ({"table": {"t": [0, 1, float("nan")], "y": [0, 1, 2]}}, PATH + ".table.t[2]", "finite"),
    ({"table": {"t": [0, 1, 2], "y": [0, 1, 2], "bc": "cubic"}}, PATH + ".table.bc",
     "not-a-knot, natural, clamped, periodic"),
    ({"table": {"t": [0, 1, 2], "y": [0, 1, 2], "extrapolate": "nearest"}},
     PATH + ".table.extrapolate", "error, linear, hold, spline"),
    ({"table": {"t": [0, 1, 2], "y": [0, 1, 2], "bc": "periodic"}}, PATH + ".table.y",
     "y[0] == y[-1]"),
    ({"table": {"t": [0, 1, 2], "y": [0, 1, 0], "extrapolate": "periodic"}},
     PATH + ".table.extrapolate", "needs bc: periodic"),
    ({"table": {"t": [0, 1, 2]}}, PATH + ".table", "missing key 'y'"),
    ({"table": {"t": "0 1 2", "y": [0, 1, 2]}}, PATH + ".table.t", "list of numbers"),
    ({"expression": 3}, PATH + ".expression", "expression string"),
    ({"expression": "a*t", "parameters": {"a": "one"}}, PATH + ".parameters.a",
     "expected a number"),
    ({"expression": "t", "parameters": {"t": 1}}, PATH + ".parameters.t", "reserved"),
    ({"expression": "t", "parameters": [1]}, PATH + ".parameters", "mapping"),
    ("", PATH, "empty expression"),
]


@pytest.mark.parametrize("spec,path,fragment", BAD_SPECS, ids=range(len(BAD_SPECS)))
def test_bad_specs(spec, path, fragment):
    with pytest.raises(ModelError) as info:
        parse_function(spec, PATH, PARAMS)
    assert info.value.path == path
    assert fragment in str(info.value)
    assert str(info.value).startswith(path + ": ")


# --- the expression language: security --------------------------------------------

REJECTED = [
    ("__import__('os')", "function '__import__' is not allowed"),
    ("__import__('os').system('ls')", "calling '__import__('os').system' is not allowed"),
    ("os.system('ls')", "calling 'os.system' is not allowed"),
    ("system(1)", "function 'system' is not allowed (allowed: sin, cos"),
    ("t.real", "attribute access"),
    ("(1).__class__", "attribute access"),
    ("().__class__.__bases__[0].__subclasses__()", "not allowed"),
    ("[t][0]", "a subscript"),
    ("[t]", "a list"),
    ("(t, 1)", "a tuple"),
    ("{'a': 1}", "a dict"),
    ("lambda: 1", "a lambda"),
    ("[x for x in (1, 2)]", "a comprehension"),
    ("sum(x for x in (1, 2))", "function 'sum' is not allowed"),
    ("sin(x=t)", "keyword arguments are not allowed"),
    ("sin(*[t])", "starred"),
    ("'abc'", "a string literal"),
    ("b'abc'", "a bytes literal"),
    ("f'{t}'", "an f-string"),
    ("1j*t", "a complex number"),
    ("True + t", "a boolean"),
    ("t > 1", "a comparison"),
    ("t and 1", "a boolean operator"),
    ("not t", "operator 'not'"),
    ("~t", "operator '~'"),
    ("t if t else 1", "a conditional expression"),
    ("(y := t)", "assignment expression"),
    ("t ^ 2", "operator '^' is not allowed (use ** for powers)"),
    ("t % 2", "operator '%'"),
    ("t // 2", "operator '//'"),
    ("t @ t", "operator '@'"),
    ("x + 1", "unknown name 'x' (known: t, pi, e, a, b, omega)"),
    ("eval", "unknown name 'eval'"),
    ("sin", "'sin' is a function; call it as sin(...)"),
    ("omega(t)", "function 'omega' is not allowed"),
    ("atan2(t)", "function 'atan2' takes 2 arguments (got 1)"),
    ("sin(t, t)", "function 'sin' takes 1 argument (got 2)"),
    ("min(t)", "function 'min' takes 2 arguments"),
    ("t +", "syntax error"),
    ("t = 1", "syntax error"),
    ("import os", "syntax error"),
    ("t; 1", "syntax error"),
    ("1e400 * t", "not finite"),
    ("10**400 + t", "constant subexpression '10**400' is undefined"),
    ("sqrt(-1) + t", "constant subexpression 'sqrt(-1)' is undefined"),
    ("log(0) * t", "constant subexpression 'log(0)' is undefined"),
    ("t / (1 - 1)", "division by zero"),
    ("(-8)**(1/3) * t", "negative base"),
    ("t" + " + t" * 700, "too long"),
    ("sin(" * 101 + "t" + ")" * 101, "nested too deeply"),
    ("-" * 150 + "t", "nested too deeply"),
    ("(" * 300 + "t" + ")" * 300, "syntax error"),
]


@pytest.mark.parametrize("text,fragment", REJECTED, ids=range(len(REJECTED)))
def test_expression_rejected(text, fragment):
    with pytest.raises(ModelError) as info:
        parse_function(text, PATH, PARAMS)
    assert info.value.path == PATH
    assert fragment in str(info.value), str(info.value)


def test_limits_allow_long_chains_and_deep_enough_nesting():
    # a long sum counts as one nesting level; 100 nested calls are fine
    f = parse_function(" + ".join(f"{k}*t**{k % 5}" for k in range(150)), PATH)
    assert f.jet(1.0)[0] == sum(range(150))
    g = parse_function("sin(" * 99 + "t" + ")" * 99, PATH)
    assert math.isfinite(g.jet(0.5)[0])
    assert len(parse_function("t" + " " * 1990, PATH).text) == 1


def test_no_eval_or_exec(monkeypatch):
    """Parsing and evaluating never calls eval/exec (the module sources do not even
    reference them)."""
    def forbidden(*args, **kwargs):
        raise AssertionError("eval/exec called")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    for text in EXPRESSIONS:
        parse_function(text, PATH, PARAMS).jet(0.9)
    src = Path(ex.__file__).resolve().parent
    for name in ("expressions.py", "functions.py"):
        tree = ast.parse((src / name).read_text())
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        assert not names & {"eval", "exec", "compile", "__import__"}, name


def test_parameters_are_folded_and_validated():
    f = parse_function("omega*t + a", PATH, PARAMS)
    assert f.program.code == (ex.OP_CONST, 0, ex.OP_T, ex.OP_MUL, ex.OP_CONST, 1, ex.OP_ADD)
    assert f.parameters == {"omega": 2.0, "a": 0.5}          # only the used ones
    assert f.to_spec() == {"expression": "omega*t + a",
                           "parameters": {"a": 0.5, "omega": 2.0}}
    assert parse_function("2*pi*t", PATH).program.consts == (2 * math.pi,)   # folded
    assert parse_function("t**2", PATH).program.code == (ex.OP_T, ex.OP_POWI, 2)
    with pytest.raises(ModelError, match="parameter 'k' must be a finite number"):
        parse_function("k*t", PATH, {"k": "3"})


# --- jets: exact derivatives -------------------------------------------------------

def away_from(ts, kinks, gap=0.01):
    return [t for t in ts if min(abs(t - k) for k in kinks) > gap]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_expression_derivatives_match_finite_differences(text):
    f = parse_function(text, PATH, PARAMS)
    ts = np.random.default_rng(1).uniform(0.3, 3.0, 15)
    if "abs" in text:         # kinks of abs / min / max: compare on smooth stretches
        kinks = [1.3, 1.0, *(math.pi / 20 + k * math.pi / 5 for k in range(5))]
        ts = away_from(ts, kinks)
        assert len(ts) >= 8
    assert_derivatives(f, ts)


def test_expression_jets_analytic():
    f = parse_function("0.1*sin(2*pi*t) + t**2", PATH)
    w = 2 * math.pi
    for t in np.random.default_rng(2).uniform(-2, 2, 20):
        exact = (0.1 * math.sin(w * t) + t * t, 0.1 * w * math.cos(w * t) + 2 * t,
                 -0.1 * w * w * math.sin(w * t) + 2)
        assert close(f.jet(t), exact, 1e-13)
    g = parse_function("t**t", PATH)                      # d/dt = t^t (1 + ln t)
    for t in (0.5, 1.0, 2.0):
        v = t ** t
        assert close(g.jet(t), (v, v * (1 + math.log(t)),
                                v * ((1 + math.log(t)) ** 2 + 1 / t)), 1e-13)
    h = parse_function("1/t", PATH)
    assert close(h.jet(2.0), (0.5, -0.25, 0.25), 1e-15)
    k = parse_function("atan2(sin(t), cos(t))", PATH)     # = t on (-pi, pi)
    assert close(k.jet(1.2), (1.2, 1.0, 0.0), 1e-14)


def test_polynomial_harmonic_table_derivatives():
    rng = np.random.default_rng(3)
    ts = rng.uniform(-1.0, 4.0, 10)
    assert_derivatives(Polynomial(rng.normal(size=7)), ts)
    assert_derivatives(Harmonic(0.7, 2.3, 0.4, -0.2), ts)
    knots = np.linspace(-2, 5, 12)
    tab = Table(knots, np.cos(knots))               # the third derivative jumps at knots
    ts = away_from(rng.uniform(-1.5, 4.5, 30), knots)
    assert len(ts) >= 15
    assert_derivatives(tab, ts, rtol=1e-6)


def test_kinks_use_the_branch_active_for_increasing_t():
    assert parse_function("abs(t - 1)", PATH).jet(1.0) == (0.0, 1.0, 0.0)
    assert parse_function("abs(1 - t)", PATH).jet(1.0) == (0.0, 1.0, 0.0)
    assert parse_function("abs(t - 1)", PATH).jet(0.5) == (0.5, -1.0, 0.0)
    assert parse_function("min(t, 2 - t)", PATH).jet(1.0) == (1.0, -1.0, 0.0)
    assert parse_function("max(t, 2 - t)", PATH).jet(1.0) == (1.0, 1.0, 0.0)
    assert parse_function("min(t*t, t)", PATH).jet(0.5) == (0.25, 1.0, 2.0)
    assert parse_function("max(t*t, t)", PATH).jet(0.0) == (0.0, 1.0, 0.0)


# --- tables ------------------------------------------------------------------------

@pytest.mark.parametrize("bc", ["not-a-knot", "natural", "clamped", "periodic"])
def test_table_matches_scipy_cubic_spline(bc):
    rng = np.random.default_rng(4)
    t = np.cumsum(rng.uniform(0.1, 1.0, 9))
    y = rng.normal(size=9)
    if bc == "periodic":
        y[-1] = y[0]
    ref = CubicSpline(t, y, bc_type=bc)
    f = Table(t, y, bc=bc)
    # two spline solves (ours, scipy's LAPACK) round differently: ~eps cond |y''| with
    # |y''| <= 53 (observed 1.1e-14 on a zero slope)
    for x in np.concatenate([rng.uniform(t[0], t[-1], 40), t]):
        assert close(f.jet(x), [ref(x, 0), ref(x, 1), ref(x, 2)], 1e-11)
    # interpolates: a cubic piece evaluated at its end knot rounds to a few eps of its
    # terms (observed 2.4e-15); the same 1e-12 as the jets
    assert f(t).tolist() == pytest.approx(y.tolist(), abs=1e-12)


def test_table_extrapolation_modes():
    t, y = [0.0, 1.0, 2.5, 3.0], [1.0, 2.0, 0.5, 1.0]
    ref = CubicSpline(t, y)
    lo, hi = ref(0.0, 0), ref(3.0, 0)
    slo, shi = ref(0.0, 1), ref(3.0, 1)
    hold = Table(t, y, extrapolate="hold")
    assert close(hold.jet(-1.0), (lo, 0, 0), 1e-14) and close(hold.jet(9.0), (hi, 0, 0), 1e-14)
    lin = Table(t, y, extrapolate="linear")
    assert close(lin.jet(-2.0), (lo - 2 * slo, slo, 0), 1e-13)
    assert close(lin.jet(4.5), (hi + 1.5 * shi, shi, 0), 1e-13)
    spl = Table(t, y, extrapolate="spline")
    for x in (-1.3, 3.7):
        assert close(spl.jet(x), [ref(x, 0), ref(x, 1), ref(x, 2)], 1e-12)
    yp = [1.0, 2.0, 0.5, 1.0]
    per = Table(t, yp, bc="periodic", extrapolate="periodic")
    refp = CubicSpline(t, yp, bc_type="periodic", extrapolate="periodic")
    for x in (-7.4, -0.2, 3.2, 10.1):
        assert close(per.jet(x), [refp(x, 0), refp(x, 1), refp(x, 2)], 1e-11)
    err = Table(t, y)
    assert close(err.jet(3.0 + 1e-12), [ref(3.0, 0), ref(3.0, 1), ref(3.0, 2)], 1e-9)
    for x in (-0.01, 3.01):
        with pytest.raises(FunctionDomainError, match=r"outside the table range \[0, 3\]"):
            err.jet(x)


def test_table_breaks_and_coefficients_come_from_cubic_spline():
    t, y = [0, 1, 2, 4], [0, 1, 0, 3]
    ref = CubicSpline(t, y, bc_type="natural")
    f = Table(t, y, bc="natural")
    assert np.array_equal(f.breaks, ref.x) and np.array_equal(f.coefficients, ref.c)
    assert f.coefficients.shape == (4, 3) and not f.coefficients.flags.writeable


# --- domain errors -----------------------------------------------------------------

DOMAIN_ERRORS = [
    ("log(t - 1)", 0.5, "log(x) needs x > 0 (got x = -0.5)"),
    ("log10(t - 1)", 1.0, "log10(x) needs x > 0 (got x = 0)"),
    ("sqrt(t - 1)", 0.5, "sqrt(x) needs x > 0"),
    ("sqrt(t)", 0.0, "derivative is infinite at 0"),
    ("1/(t - 1)", 1.0, "division by zero"),
    ("(t - 1)**-2", 1.0, "0 raised to a negative power"),
    ("(t - 1)**1.5", 0.5, "x**p with a non-integer exponent needs x > 0"),
    ("(t - 1)**t", 0.5, "x**y with a variable exponent needs x > 0"),
    ("asin(t)", 1.0, "asin(x) needs -1 < x < 1"),
    ("acos(2*t)", 3.0, "acos(x) needs -1 < x < 1"),
    ("atan2(t - 1, 0*t)", 1.0, "atan2(0, 0) is undefined"),
    ("exp(1000*t)", 1.0, "not finite (overflow)"),
    ("sin(exp(1000*t))", 1.0, "not finite (overflow)"),
    ("cosh(t)**2", 400.0, "not finite"),
]


@pytest.mark.parametrize("text,t,fragment", DOMAIN_ERRORS, ids=range(len(DOMAIN_ERRORS)))
def test_domain_errors_name_expression_and_time(text, t, fragment):
    f = parse_function(text, PATH)
    with pytest.raises(FunctionDomainError) as info:
        f.jet(t)
    e = info.value
    assert isinstance(e, ValueError) and isinstance(e, MbcoreError)
    assert isinstance(e, AnalysisError) and e.t == t and e.path == PATH
    assert fragment in str(e)
    assert f"in expression {text!r}" in str(e) and str(e).startswith(f"t = {t:.9g}: {PATH}: ")


def test_non_finite_time_is_rejected():
    with pytest.raises(FunctionDomainError, match="t = nan is not finite"):
        Constant(1.0).jet(float("nan"))
    with pytest.raises(FunctionDomainError, match="not finite"):
        FunctionTable([Constant(1.0)], "numpy").evaluate(float("inf"), np.zeros((1, 3)))


def test_zero_base_with_large_real_exponent_is_fine():
    assert parse_function("t**2.5", PATH).jet(0.0) == (0.0, 0.0, 0.0)
    assert parse_function("t**3", PATH).jet(0.0) == (0.0, 0.0, 0.0)
    assert parse_function("t**2", PATH).jet(-3.0) == (9.0, -6.0, 2.0)
    assert parse_function("t**-1", PATH).jet(-2.0) == (-0.5, -0.25, -0.25)


# --- FunctionTable -----------------------------------------------------------------

def all_functions():
    return [parse_function(s, f"drivers[{k}].function", PARAMS)
            for k, s in enumerate(ALL_SPECS)]


def test_numpy_table_fills_rows():
    fs = all_functions()
    tab = FunctionTable(fs, "numpy")
    out = np.full((len(fs), 3), np.nan)
    tab.evaluate(1.25, out)
    for k, f in enumerate(fs):
        assert tuple(out[k]) == f.jet(1.25)
    assert np.array_equal(tab(1.25), out) and len(tab) == len(fs)
    with pytest.raises(ValueError, match="shape"):
        tab.evaluate(1.0, np.zeros((len(fs) + 1, 3)))
    with pytest.raises(ValueError, match="backend"):
        FunctionTable(fs, "fortran")
    with pytest.raises(TypeError):
        FunctionTable([1.0], "numpy")


def test_backends_agree_on_every_kind():
    fs = all_functions()
    tc, tn = both_tables(fs)
    rng = np.random.default_rng(5)
    a, b = np.empty((len(fs), 3)), np.empty((len(fs), 3))
    # in range for every table and expression; sorted then shuffled (piece cache)
    ts = np.concatenate([np.sort(rng.uniform(0.05, 3.0, 300)), rng.uniform(0.05, 3.0, 300)])
    for t in ts:
        tc.evaluate(t, a)
        tn.evaluate(t, b)
        assert close(a, b, 1e-12), (t, np.abs(a - b).max())


def test_backends_agree_on_extrapolation_and_breakpoints():
    fs = [parse_function(s, PATH) for s in spline_specs()
          if s["table"].get("extrapolate", "error") != "error"]
    tc, tn = both_tables(fs)
    rng = np.random.default_rng(6)
    a, b = np.empty((len(fs), 3)), np.empty((len(fs), 3))
    knots = [0.0, 0.4, 1.1, 1.5, 2.3, 3.0, 1.0]
    for t in np.concatenate([rng.uniform(-10, 13, 400), knots, np.nextafter(knots, 9)]):
        tc.evaluate(t, a)
        tn.evaluate(t, b)
        assert close(a, b, 1e-12), t


def test_backends_raise_the_same_errors():
    for text, t, fragment in DOMAIN_ERRORS:
        fs = [Constant(1.0), parse_function(text, "drivers[1].function")]
        messages = []
        for tab in both_tables(fs):
            with pytest.raises(FunctionDomainError) as info:
                tab.evaluate(t, np.zeros((2, 3)))
            messages.append(str(info.value))
            assert info.value.t == t and info.value.path == "drivers[1].function"
        assert messages[0] == messages[1] and fragment in messages[0]
    tab_fs = [Table([0, 1, 2], [0, 1, 0], path="drivers[2].function")]
    for tab in both_tables(tab_fs):
        for t in (-0.5, 2.5):
            with pytest.raises(FunctionDomainError,
                               match=r"drivers\[2\].function: time outside the table "
                                     r"range \[0, 2\] \(extrapolate: error\)"):
                tab.evaluate(t, np.zeros((1, 3)))
        with pytest.raises(FunctionDomainError, match="is not finite"):
            tab.evaluate(float("nan"), np.zeros((1, 3)))


def test_compiled_out_checks_and_empty_table():
    tc, _ = both_tables([Constant(1.0), Polynomial([0, 1])])
    for bad in (np.zeros((3, 3)), np.zeros((2, 3), np.float32), np.zeros((3, 2)).T,
                np.zeros(6)):
        with pytest.raises((ValueError, TypeError)):
            tc.evaluate(0.0, bad)
    ro = np.zeros((2, 3))
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        tc.evaluate(0.0, ro)
    empty_c, empty_n = both_tables([])
    empty_c.evaluate(1.0, np.zeros((0, 3)))
    empty_n.evaluate(1.0, np.zeros((0, 3)))


def test_compiled_codes_match_python():
    ext = compiled()
    from mbcore.elements import functions as fn
    assert ext.OPCODES == ex.OPCODES
    assert ext.ERROR_CODES == ex.ERROR_CODES
    assert ext.KIND_CODES == fn.KIND_CODES
    assert ext.EXTRAPOLATION_CODES == {n: i for i, n in enumerate(fn.EXTRAPOLATIONS)}
    assert ext.ABI_VERSION == fn.ABI_VERSION


def test_compiled_rejects_corrupt_packing():
    ext = compiled()
    i = np.zeros(1, np.intp)
    with pytest.raises(ValueError, match="out of bounds"):
        ext.Evaluator(np.array([4]), i, np.array([5]), i, i, np.zeros(2),
                      np.zeros(0, np.int32), 1, None)
    with pytest.raises(ValueError):
        ex.check_program([ex.OP_ADD], 0, 1)                  # stack underflow
    with pytest.raises(ValueError):
        ex.check_program([ex.OP_CONST, 3], 1, 1)             # constant out of range
    with pytest.raises(ValueError):
        ex.check_program([ex.OP_T, ex.OP_T], 0, 2)           # two results
    with pytest.raises(ValueError):
        ex.check_program([ex.OP_T, 99], 0, 1)                # unknown opcode


def test_missing_extension_gives_clear_import_error(monkeypatch):
    import mbcore._ext as extpkg
    monkeypatch.setitem(sys.modules, "mbcore._ext._functions", None)
    monkeypatch.delattr(extpkg, "_functions", raising=False)
    with pytest.raises(ImportError, match=r"mbcore\._ext\._functions.*backend='numpy'"):
        FunctionTable([Constant(1.0)], "compiled")
    FunctionTable([Constant(1.0)], "numpy")                 # the reference still works


def test_tables_pickle():
    import pickle
    fs = all_functions()
    for backend in ("numpy", "compiled"):
        try:
            tab = FunctionTable(fs, backend)
        except ImportError:
            continue
        copy = pickle.loads(pickle.dumps(tab))
        assert copy.backend == backend and copy.functions == fs
        assert np.array_equal(copy(1.1), tab(1.1))


def test_time_function_base_is_abstract():
    with pytest.raises(NotImplementedError):
        TimeFunction().jet(0.0)
