"""Driver time functions c(t) and their jets (c, dc/dt, d²c/dt²).

A kinematic driver prescribes ``q = c(t)``; the analysis needs the value (phi), the
first derivative (nu) and the second derivative (gamma).  Every :class:`TimeFunction`
therefore evaluates to a *jet* ``(value, d/dt, d²/dt²)``.

Model-file specs (see ``docs/functions.md``) are parsed by :func:`parse_function`:

===========  ===============================================================
constant     ``2.5`` or ``{constant: 2.5}``
polynomial   ``{polynomial: [c0, c1, c2, ...]}``; ``{kap: [c0, omega, alpha]}``
harmonic     ``{harmonic: {amplitude, frequency, phase: 0, offset: 0}}``
table        ``{table: {t: [...], y: [...], bc: not-a-knot, extrapolate: error}}``
expression   ``"1.0472 + omega*t"`` or ``{expression: "...", parameters: {...}}``
===========  ===============================================================

:class:`FunctionTable` evaluates many functions at once into a preallocated
``(n, 3)`` array, either with the compiled evaluator (``mbcore._ext._functions``) or
with the pure-Python reference implementation (``backend="numpy"``).
"""
from __future__ import annotations

import bisect
import math
from numbers import Real
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from .errors import AnalysisError, ModelError
from .expressions import (
    ERR_NONFINITE, ERR_RANGE, ERR_TIME, DomainFault, Program,
    check_program, compile_expression, fault_message,
)

__all__ = [
    "TimeFunction", "Constant", "Input", "Polynomial", "Harmonic", "Table", "Expression",
    "FunctionDomainError", "FunctionTable", "parse_function", "FUNCTION_KINDS",
    "BOUNDARY_CONDITIONS", "EXTRAPOLATIONS",
]

ABI_VERSION = 1          # layout of the packed arrays; must match the extension

# kind codes of the packed layout (keep in sync with ext/_functions.pyx)
K_CONSTANT = 0
K_POLYNOMIAL = 1
K_HARMONIC = 2
K_TABLE = 3
K_EXPRESSION = 4
KIND_CODES = {"constant": K_CONSTANT, "polynomial": K_POLYNOMIAL,
              "harmonic": K_HARMONIC, "table": K_TABLE, "expression": K_EXPRESSION}

BOUNDARY_CONDITIONS = ("not-a-knot", "natural", "clamped", "periodic")
EXTRAPOLATIONS = ("error", "linear", "hold", "spline", "periodic")
X_ERROR, X_LINEAR, X_HOLD, X_SPLINE, X_PERIODIC = range(5)
RANGE_TOLERANCE = 1e-10  # relative to the table span: rounding slack at the ends

FUNCTION_KINDS = ("constant", "input", "polynomial", "kap", "harmonic", "table",
                  "expression")

Jet = tuple[float, float, float]


class FunctionDomainError(AnalysisError, ValueError):
    """A time function cannot be evaluated at time ``t`` (outside a table's range,
    log of a non-positive number, division by zero, overflow, ...).

    ``path`` names the function (its model key path), ``reason`` says what is wrong.
    """

    def __init__(self, path: str, reason: str, t: float):
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}" if path else reason, t)


# --- input validation helpers --------------------------------------------------------

def _number(value: Any, path: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real):
        raise ModelError(path, f"expected a number (got {_short(value)})")
    try:
        x = float(value)
    except OverflowError:
        raise ModelError(path, f"number {_short(value)} is too large") from None
    if not math.isfinite(x):
        raise ModelError(path, f"expected a finite number (got {_short(value)})")
    return x


def _numbers(value: Any, path: str, min_len: int = 1) -> tuple[float, ...]:
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise ModelError(path, f"expected a list of numbers (got a {value.ndim}-d array)")
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ModelError(path, f"expected a list of numbers (got {_short(value)})")
    if len(value) < min_len:
        raise ModelError(path, f"expected at least {min_len} number"
                               f"{'s' if min_len > 1 else ''} (got {len(value)})")
    return tuple(_number(v, f"{path}[{i}]") for i, v in enumerate(value))


def _mapping(value: Any, path: str, required: Sequence[str],
             optional: Sequence[str]) -> Mapping:
    if not isinstance(value, Mapping):
        raise ModelError(path, f"expected a mapping with keys {', '.join(required)}"
                               f" (got {_short(value)})")
    allowed = (*required, *optional)
    for key in value:
        if key not in allowed:
            raise ModelError(f"{path}.{key}", f"unknown key '{key}' "
                                              f"(allowed: {', '.join(allowed)})")
    for key in required:
        if key not in value:
            raise ModelError(path, f"missing key '{key}'")
    return value


def _choice(value: Any, path: str, choices: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in choices:
        raise ModelError(path, f"expected one of {', '.join(choices)} (got {_short(value)})")
    return value


# --- time functions ------------------------------------------------------------------

class TimeFunction:
    """Base class: a scalar function of time with two continuous derivatives.

    Subclasses are immutable value objects (equal when their specs are equal;
    ``path`` — where the function was defined, used in error messages — is not part
    of equality).
    """

    kind: ClassVar[str] = ""
    path: str = ""

    def jet(self, t: float) -> Jet:
        """``(c(t), c'(t), c''(t))``; raises :class:`FunctionDomainError`."""
        t = float(t)
        try:
            if not math.isfinite(t):
                raise DomainFault(ERR_TIME, 0, t)
            v = self._jet(t)
            if not (math.isfinite(v[0]) and math.isfinite(v[1]) and math.isfinite(v[2])):
                raise DomainFault(ERR_NONFINITE, 0, v[0])
        except DomainFault as fault:
            raise self._error(fault.code, fault.op, fault.value, t) from None
        return v

    def __call__(self, t: float | np.ndarray) -> float | np.ndarray:
        """The value c(t) (element-wise for an array of times)."""
        if np.ndim(t) == 0:
            return self.jet(t)[0]
        ts = np.asarray(t, dtype=float)
        return np.array([self.jet(x)[0] for x in ts.ravel()]).reshape(ts.shape)

    def to_spec(self) -> Any:
        """The model-file spec of this function (``parse_function`` inverts it)."""
        raise NotImplementedError

    # -- internals
    def _jet(self, t: float) -> Jet:
        raise NotImplementedError

    def _key(self) -> tuple:
        raise NotImplementedError

    def _pack(self) -> tuple[int, np.ndarray, np.ndarray, int]:
        """(kind code, float data, int32 data, VM stack depth) for the compiled path."""
        raise NotImplementedError

    def _describe(self) -> str:
        return ""

    def _error(self, code: int, op: int, value: float, t: float) -> FunctionDomainError:
        """The error for an evaluation failure; used by both backends."""
        if code == ERR_RANGE:
            reason = self._range_reason(t)
        else:
            reason = fault_message(code, op, value if code != ERR_TIME else t)
        reason += self._describe()
        return FunctionDomainError(self.path, reason, None if code == ERR_TIME else t)

    def _range_reason(self, t: float) -> str:  # pragma: no cover - tables only
        return "outside the domain"

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._key()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_spec()!r})"


class Constant(TimeFunction):
    """c(t) = value."""

    kind = "constant"

    def __init__(self, value: float, path: str = ""):
        self.value = _number(value, path)
        self.path = path

    def _jet(self, t: float) -> Jet:
        return self.value, 0.0, 0.0

    def to_spec(self) -> float:
        return self.value

    def _key(self) -> tuple:
        return (self.value,)

    def _pack(self):
        return K_CONSTANT, np.array([self.value]), np.zeros(0, np.int32), 0


class Input(Constant):
    """c(t) = a value set from outside between integration steps: a named input of
    :class:`mbcore.Simulation` (docs/embedding.md).  Model files: ``{input: NAME}`` or
    ``{input: {name: NAME, value: V}}`` (V the initial value, default 0).  A run
    (``mbcore.run``) sees the constant V.  Inputs of one name are one input."""

    kind = "input"

    def __init__(self, name: str, value: float = 0.0, path: str = ""):
        if not isinstance(name, str) or not name.strip():
            raise ModelError(path, f"an input function needs a name (got {name!r})")
        super().__init__(value, path)
        self.name = name.strip()

    def to_spec(self) -> dict:
        return {"input": {"name": self.name, "value": self.value}}

    def _key(self) -> tuple:
        return (self.name, self.value)


class Polynomial(TimeFunction):
    """c(t) = c0 + c1 t + c2 t² + ... (``coefficients`` in increasing degree)."""

    kind = "polynomial"

    def __init__(self, coefficients: Sequence[float], path: str = ""):
        self.coefficients = _numbers(coefficients, f"{path}.polynomial" if path
                                     else "polynomial")
        self.path = path

    @classmethod
    def kap(cls, c0: float, omega: float = 0.0, alpha: float = 0.0,
            path: str = "") -> "Polynomial":
        """KAP's driver c0 + omega t + alpha t²/2."""
        return cls([c0, omega, 0.5 * alpha], path)

    def _jet(self, t: float) -> Jet:
        c = self.coefficients
        v, d, dd = c[-1], 0.0, 0.0
        for i in range(len(c) - 2, -1, -1):
            dd = dd * t + 2.0 * d
            d = d * t + v
            v = v * t + c[i]
        return v, d, dd

    def to_spec(self) -> dict:
        return {"polynomial": list(self.coefficients)}

    def _key(self) -> tuple:
        return self.coefficients

    def _pack(self):
        return K_POLYNOMIAL, np.array(self.coefficients), np.zeros(0, np.int32), 0


class Harmonic(TimeFunction):
    """c(t) = offset + amplitude * sin(frequency * t + phase)  (frequency in rad/s)."""

    kind = "harmonic"

    def __init__(self, amplitude: float, frequency: float, phase: float = 0.0,
                 offset: float = 0.0, path: str = ""):
        p = f"{path}.harmonic" if path else "harmonic"
        self.amplitude = _number(amplitude, f"{p}.amplitude")
        self.frequency = _number(frequency, f"{p}.frequency")
        self.phase = _number(phase, f"{p}.phase")
        self.offset = _number(offset, f"{p}.offset")
        self.path = path

    def _jet(self, t: float) -> Jet:
        a, w = self.amplitude, self.frequency
        arg = w * t + self.phase
        s, c = math.sin(arg), math.cos(arg)
        return self.offset + a * s, a * w * c, -(a * w * w) * s

    def to_spec(self) -> dict:
        return {"harmonic": {"amplitude": self.amplitude, "frequency": self.frequency,
                             "phase": self.phase, "offset": self.offset}}

    def _key(self) -> tuple:
        return self.amplitude, self.frequency, self.phase, self.offset

    def _pack(self):
        return (K_HARMONIC, np.array([self.amplitude, self.frequency, self.phase,
                                      self.offset]), np.zeros(0, np.int32), 0)


class Table(TimeFunction):
    """Cubic spline (C2) through tabulated points ``(t[i], y[i])``.

    ``bc``: ``not-a-knot`` (default), ``natural``, ``clamped`` (zero end slopes) or
    ``periodic`` (needs ``y[0] == y[-1]``).  ``extrapolate`` outside ``[t0, tN]``:
    ``error`` (default; :class:`FunctionDomainError`), ``hold`` (end value, zero
    derivatives), ``linear`` (end value and slope), ``spline`` (extend the end
    pieces), ``periodic`` (repeat the table; needs ``bc: periodic``).  Times within
    ``1e-10 * (tN - t0)`` outside the range count as inside (rounding slack).

    The spline is built by :class:`scipy.interpolate.CubicSpline`; ``breaks`` (n+1)
    and ``coefficients`` (shape (4, n), highest power first, local variable
    ``t - breaks[i]``) are what both backends evaluate.
    """

    kind = "table"

    def __init__(self, t: Sequence[float], y: Sequence[float], bc: str = "not-a-knot",
                 extrapolate: str = "error", path: str = ""):
        from scipy.interpolate import CubicSpline

        from .limits import check_count
        p = f"{path}.table" if path else "table"
        self.path = path
        if isinstance(t, (Sequence, np.ndarray)) and not isinstance(t, str):
            check_count(len(t), "max_table_points", f"{p}.t", "table points")
        self.t = _numbers(t, f"{p}.t", min_len=2)
        self.y = _numbers(y, f"{p}.y", min_len=2)
        if len(self.t) != len(self.y):
            raise ModelError(f"{p}.y", f"t and y must have the same length "
                                       f"({len(self.t)} != {len(self.y)})")
        for i in range(1, len(self.t)):
            if not self.t[i] > self.t[i - 1]:
                raise ModelError(f"{p}.t", f"times must be strictly increasing "
                                           f"(t[{i}] = {self.t[i]!r} <= "
                                           f"t[{i - 1}] = {self.t[i - 1]!r})")
        self.bc = _choice(bc, f"{p}.bc", BOUNDARY_CONDITIONS)
        self.extrapolate = _choice(extrapolate, f"{p}.extrapolate", EXTRAPOLATIONS)
        if self.bc == "periodic" and self.y[0] != self.y[-1]:
            raise ModelError(f"{p}.y", f"bc: periodic needs y[0] == y[-1] "
                                       f"(got {self.y[0]!r} and {self.y[-1]!r})")
        if self.extrapolate == "periodic" and self.bc != "periodic":
            raise ModelError(f"{p}.extrapolate", "extrapolate: periodic needs "
                                                 "bc: periodic")
        try:
            spline = CubicSpline(np.array(self.t), np.array(self.y), bc_type=self.bc,
                                 extrapolate=True)
        except ValueError as exc:   # pragma: no cover - inputs are pre-validated
            raise ModelError(p, f"cannot build the spline: {exc}") from None
        self.breaks = np.ascontiguousarray(spline.x, dtype=float)
        self.coefficients = np.ascontiguousarray(spline.c, dtype=float)
        self.breaks.flags.writeable = False
        self.coefficients.flags.writeable = False
        self._x = self.breaks.tolist()
        self._c = self.coefficients.T.tolist()        # per piece: [c3, c2, c1, c0]
        self._mode = EXTRAPOLATIONS.index(self.extrapolate)
        self._tol = RANGE_TOLERANCE * (self._x[-1] - self._x[0])

    def _piece(self, i: int, dt: float) -> Jet:
        a3, a2, a1, a0 = self._c[i]
        return (((a3 * dt + a2) * dt + a1) * dt + a0,
                (3.0 * a3 * dt + 2.0 * a2) * dt + a1,
                6.0 * a3 * dt + 2.0 * a2)

    def _jet(self, t: float) -> Jet:
        # mirrors spline_jet() in ext/_functions.pyx operation by operation
        x = self._x
        n = len(x) - 1
        x0, xn = x[0], x[-1]
        mode = self._mode
        if mode == X_PERIODIC:
            span = xn - x0
            w = math.fmod(t - x0, span)
            if w < 0.0:
                w += span
            t = x0 + w
            if t > xn:
                t = xn
        if t < x0 or t > xn:
            low = t < x0
            i = 0 if low else n - 1
            if mode == X_ERROR:
                if (low and t < x0 - self._tol) or (not low and t > xn + self._tol):
                    raise DomainFault(ERR_RANGE, 0, t)
                mode = X_SPLINE
            if mode == X_SPLINE:
                return self._piece(i, t - x[i])
            te = x0 if low else xn
            v, d, _ = self._piece(i, te - x[i])
            if mode == X_HOLD:
                return v, 0.0, 0.0
            return v + d * (t - te), d, 0.0                       # X_LINEAR
        i = bisect.bisect_right(x, t) - 1
        if i > n - 1:
            i = n - 1
        return self._piece(i, t - x[i])

    def _range_reason(self, t: float) -> str:
        return (f"time outside the table range [{self._x[0]:.9g}, "
                f"{self._x[-1]:.9g}] (extrapolate: error)")

    def to_spec(self) -> dict:
        return {"table": {"t": list(self.t), "y": list(self.y), "bc": self.bc,
                          "extrapolate": self.extrapolate}}

    def _key(self) -> tuple:
        return self.t, self.y, self.bc, self.extrapolate

    def _pack(self):
        n = len(self._x) - 1
        floats = np.concatenate([[self._tol], self.breaks,
                                 self.coefficients.T.ravel()])
        return K_TABLE, floats, np.array([n, self._mode], np.int32), 0


class Expression(TimeFunction):
    """c(t) given by a safe arithmetic expression of ``t`` (see
    :mod:`mbcore.expressions`); ``parameters`` maps names to values."""

    kind = "expression"

    def __init__(self, text: str, parameters: Mapping[str, float] | None = None,
                 path: str = ""):
        self.path = path
        self.program: Program = compile_expression(text, path, parameters)
        self.text = text.strip()
        self.parameters: dict[str, float] = dict(self.program.names)  # the used ones

    def _jet(self, t: float) -> Jet:
        return self.program.run(t)

    def _describe(self) -> str:
        return f" in expression {self.text!r}"

    def to_spec(self) -> str | dict:
        if not self.parameters:
            return self.text
        return {"expression": self.text, "parameters": dict(self.parameters)}

    def _key(self) -> tuple:
        return self.text, self.program.names

    def _pack(self):
        p = self.program
        return (K_EXPRESSION, np.array(p.consts, dtype=float),
                np.array(p.code, dtype=np.int32), p.depth)


# --- the spec parser -----------------------------------------------------------------

def read_table_file(name: Any, path: str, data_dir: str | None = None,
                    allow_external_data: bool | None = None
                    ) -> tuple[list[float], list[float]]:
    """(t, y) from a table file: text with two numbers per line (t and y, separated
    by blanks or a comma; blank lines and ``#`` comments skipped).

    ``name`` is resolved relative to ``data_dir`` (the model file's directory; the
    current directory for a model without a file).  A file outside that directory
    (an absolute path, ``..``, a symbolic link leading out) is refused unless
    ``allow_external_data`` (default ``mbcore.limits.limits.allow_external_data``).
    The file may hold at most ``limits.max_table_points`` points (checked on its
    size before it is read)."""
    import os
    from .limits import check_count, limits
    if not isinstance(name, str) or not name:
        raise ModelError(path, f"expected a file name (got {_short(name)})")
    allow = limits.allow_external_data if allow_external_data is None else allow_external_data
    base = os.path.realpath(data_dir or os.getcwd())
    full = os.path.realpath(os.path.join(base, os.path.expanduser(name)))
    if not allow and os.path.commonpath([base, full]) != base:
        raise ModelError(path, f"table file '{name}' is outside the model's directory "
                               f"'{base}': refused (allow it with Model.from_file(..., "
                               f"allow_external_data=True), mbcore.limits.configure("
                               f"allow_external_data=True) or the CLI flag "
                               f"--allow-external-data)")
    try:
        size = os.stat(full).st_size
        if not os.path.isfile(full):
            raise ModelError(path, f"table file '{name}' is not a regular file")
        # a point takes at least 4 bytes ("0 0\n"): refuse before reading
        check_count(size // 4, "max_table_points", path, "points (file size / 4 bytes)")
        with open(full, encoding="utf-8") as fh:
            lines = fh.readlines()
    except OSError as exc:
        raise ModelError(path, f"cannot read table file '{name}': {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ModelError(path, f"table file '{name}' is not UTF-8 text") from None
    t, y = [], []
    for no, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].replace(",", " ").split()
        if not line:
            continue
        if len(line) != 2:
            raise ModelError(path, f"{name}, line {no}: expected 2 numbers (t y), got "
                                   f"{len(line)} fields")
        try:
            t.append(float(line[0]))
            y.append(float(line[1]))
        except ValueError:
            raise ModelError(path, f"{name}, line {no}: not a number") from None
    return t, y


def _short(value: Any, n: int = 80) -> str:
    """repr of a value for an error message, cut to ``n`` characters (a value from a
    model file may be huge)."""
    r = reprlib_repr(value)
    return r if len(r) <= n else r[:n - 3] + "..."


def reprlib_repr(value: Any) -> str:
    import reprlib
    rep = reprlib.Repr()
    rep.maxstring, rep.maxother, rep.maxlist, rep.maxdict, rep.maxlevel = 60, 60, 6, 4, 3
    return rep.repr(value)


def parse_function(spec: Any, path: str,
                   parameters: Mapping[str, float] | None = None, *,
                   data_dir: str | None = None,
                   allow_external_data: bool | None = None) -> TimeFunction:
    """Build a :class:`TimeFunction` from a model-file ``spec``.

    ``path`` is the key path of the spec (e.g. ``drivers[0].function``), used in every
    error; ``parameters`` is the model's top-level ``parameters`` mapping, available
    by name in expressions (local ``parameters`` of an expression spec take
    precedence).  A :class:`TimeFunction` passes through unchanged.
    """
    if isinstance(spec, TimeFunction):
        return spec
    if isinstance(spec, str):
        return Expression(spec, parameters, path)
    if isinstance(spec, (Real, np.number)) and not isinstance(spec, (bool, np.bool_)):
        return Constant(spec, path)
    if not isinstance(spec, Mapping):
        raise ModelError(path, f"expected a number, an expression string or a mapping "
                               f"with one of: {', '.join(FUNCTION_KINDS)} (got {_short(spec)})")
    kinds = [k for k in spec if k in FUNCTION_KINDS]
    for key in spec:
        if key not in FUNCTION_KINDS and not (key == "parameters"
                                              and kinds == ["expression"]):
            raise ModelError(f"{path}.{key}", f"unknown key '{key}' (a function spec "
                                              f"has one of: {', '.join(FUNCTION_KINDS)})")
    if len(kinds) != 1:
        raise ModelError(path, f"a function spec needs exactly one of: "
                               f"{', '.join(FUNCTION_KINDS)} (got "
                               f"{', '.join(kinds) or 'none'})")
    kind = kinds[0]
    body = spec[kind]
    sub = f"{path}.{kind}"
    if kind == "constant":
        return Constant(_number(body, sub), path)
    if kind == "input":
        if isinstance(body, str):
            return Input(body, 0.0, path)
        m = _mapping(body, sub, ("name",), ("value",))
        return Input(m["name"], _number(m.get("value", 0.0), f"{sub}.value"), path)
    if kind == "polynomial":
        return Polynomial(_numbers(body, sub), path)
    if kind == "kap":
        c = _numbers(body, sub)
        if len(c) > 3:
            raise ModelError(sub, f"expected [c0, omega, alpha] (got {len(c)} numbers)")
        return Polynomial.kap(*c, path=path)
    if kind == "harmonic":
        m = _mapping(body, sub, ("amplitude", "frequency"), ("phase", "offset"))
        return Harmonic(m["amplitude"], m["frequency"], m.get("phase", 0.0),
                        m.get("offset", 0.0), path)
    if kind == "table":
        if isinstance(body, Mapping) and "file" in body:    # (t, y) from a data file
            m = _mapping(body, sub, ("file",), ("bc", "extrapolate"))
            t, y = read_table_file(m["file"], f"{sub}.file", data_dir, allow_external_data)
        else:
            m = _mapping(body, sub, ("t", "y"), ("bc", "extrapolate"))
            t, y = m["t"], m["y"]
        return Table(t, y, m.get("bc", "not-a-knot"), m.get("extrapolate", "error"), path)
    # expression
    if not isinstance(body, str):
        raise ModelError(sub, f"expected an expression string (got {_short(body)})")
    local = spec.get("parameters") or {}
    if not isinstance(local, Mapping):
        raise ModelError(f"{path}.parameters", f"expected a mapping of names to "
                                               f"numbers (got {_short(local)})")
    values = dict(parameters or {})
    for name, value in local.items():
        ppath = f"{path}.parameters.{name}"
        if not isinstance(name, str) or not name.isidentifier():
            raise ModelError(ppath, f"parameter name {_short(name)} is not an identifier")
        if name in ("t", "pi", "e"):
            raise ModelError(ppath, f"'{name}' is reserved and cannot be a parameter")
        values[name] = _number(value, ppath)
    return Expression(body, values, path)


# --- the evaluation table ------------------------------------------------------------

def _load_extension():
    try:
        from ._ext import _functions
    except ImportError as exc:
        raise ImportError(
            "FunctionTable(backend='compiled') needs the extension module "
            f"mbcore._ext._functions, which could not be imported ({exc}); build the "
            "package (e.g. 'pip install -e .') or use backend='numpy'") from exc
    if getattr(_functions, "ABI_VERSION", None) != ABI_VERSION:
        raise ImportError(
            f"mbcore._ext._functions has layout version "
            f"{getattr(_functions, 'ABI_VERSION', None)}, expected {ABI_VERSION}: "
            "the extension is stale, rebuild the package")
    return _functions


class FunctionTable:
    """Evaluates a fixed list of time functions into a preallocated array.

    ``backend="compiled"`` packs every function into flat arrays at construction
    and evaluates them all in one call of the Cython evaluator;
    ``backend="numpy"`` is the pure-Python reference (``TimeFunction.jet``).
    A table keeps per-instance work buffers (VM stack, spline-piece cache): do not
    call ``evaluate`` of one table from several threads at once.
    """

    BACKENDS = ("compiled", "numpy")

    def __init__(self, functions: Sequence[TimeFunction], backend: str = "compiled"):
        self.functions: list[TimeFunction] = list(functions)
        for k, f in enumerate(self.functions):
            if not isinstance(f, TimeFunction):
                raise TypeError(f"functions[{k}] is not a TimeFunction: {f!r}")
        if backend not in self.BACKENDS:
            raise ValueError(f"backend must be one of {self.BACKENDS} (got {backend!r})")
        self.backend = backend
        self._impl = None
        #: positions of the ``input`` functions by name (:meth:`set_input`)
        self.input_index: dict[str, list[int]] = {}
        for k, f in enumerate(self.functions):
            if isinstance(f, Input):
                self.input_index.setdefault(f.name, []).append(k)
        self._fdata = None
        if backend == "compiled":
            ext = _load_extension()
            packed = self._packed()
            self._foff = packed[1]
            self._impl = ext.Evaluator(*packed, self._on_error)
            if self.input_index:             # the evaluator's own data (writable)
                self._fdata = self._impl.data()

    def __len__(self) -> int:
        return len(self.functions)

    @property
    def kernel(self):
        """The compiled evaluator (``mbcore._ext._functions.Evaluator``) that compiled
        kernels call for the function values, or None (numpy backend, no functions)."""
        return self._impl if self.functions else None

    def set_input(self, name: str, value: float) -> None:
        """Set the value of the ``input`` functions named ``name`` (both backends;
        the next evaluation sees it).  KeyError for an unknown name."""
        ks = self.input_index[name]
        v = float(value)
        for k in ks:
            self.functions[k].value = v
            if self._fdata is not None:
                self._fdata[self._foff[k]] = v

    def __reduce__(self):
        # the compiled evaluator holds raw pointers: pickle the recipe, rebuild it
        return FunctionTable, (self.functions, self.backend)

    def _packed(self):
        """Flat arrays: kinds, float/int offsets and counts, data, VM stack depth."""
        nf = len(self.functions)
        kinds = np.zeros(nf, np.int32)
        foff, fcnt = np.zeros(nf, np.intp), np.zeros(nf, np.intp)
        ioff, icnt = np.zeros(nf, np.intp), np.zeros(nf, np.intp)
        fparts, iparts, depth, nfl, nin = [], [], 1, 0, 0
        for k, f in enumerate(self.functions):
            kind, fl, it, d = f._pack()
            fl = np.ascontiguousarray(fl, dtype=np.float64)
            it = np.ascontiguousarray(it, dtype=np.int32)
            if kind == K_EXPRESSION:
                check_program(it.tolist(), len(fl), d)   # the VM trusts its programs
            kinds[k], foff[k], fcnt[k], ioff[k], icnt[k] = kind, nfl, fl.size, nin, it.size
            fparts.append(fl)
            iparts.append(it)
            nfl += fl.size
            nin += it.size
            depth = max(depth, d)
        fdata = np.concatenate(fparts) if fparts else np.zeros(0)
        idata = np.concatenate(iparts) if iparts else np.zeros(0, np.int32)
        return (kinds, foff, fcnt, ioff, icnt, np.ascontiguousarray(fdata, np.float64),
                np.ascontiguousarray(idata, np.int32), depth)

    def _on_error(self, k: int, code: int, op: int, value: float, t: float) -> None:
        """Called by the compiled evaluator on failure: raise the same error as the
        reference backend would."""
        if k < 0 or code == ERR_TIME:
            raise FunctionDomainError("", fault_message(ERR_TIME, 0, t), None)
        raise self.functions[k]._error(code, op, value, t)

    def evaluate(self, t: float, out: np.ndarray) -> None:
        """Fill ``out[k] = (c_k(t), c_k'(t), c_k''(t))`` for every function k.

        ``out``: float64, C-contiguous, shape ``(len(self), 3)``.  Raises
        :class:`FunctionDomainError` if a function cannot be evaluated at ``t``.
        """
        if self._impl is not None:
            self._impl.evaluate(t, out)
            return
        if out.shape != (len(self.functions), 3):
            raise ValueError(f"out must have shape ({len(self.functions)}, 3) "
                             f"(got {out.shape})")
        if not math.isfinite(t):
            self._on_error(-1, ERR_TIME, 0, t, t)
        for k, f in enumerate(self.functions):
            out[k] = f.jet(t)

    def __call__(self, t: float) -> np.ndarray:
        """Convenience: a new ``(n, 3)`` array of jets at ``t`` (allocates)."""
        out = np.empty((len(self.functions), 3))
        self.evaluate(t, out)
        return out
