"""Validation of model data with error messages that name the key path.

Each element type declares its parameters as a mapping ``key -> Param``; the core
checks a model's element entries against it (``joints[3].point_j: expected 2
numbers, got 3``).  Values are data only: nothing is evaluated or executed.
"""
from __future__ import annotations

import difflib
import math

import numpy as np
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..errors import ModelError
from .units import UnitSystem, looks_like_quantity, unit_system

_MISSING = object()


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def is_number_text(value: str) -> bool:
    """Text that is a number alone (``"30"``): quoted by mistake, not a quantity."""
    try:
        float(value)
    except ValueError:
        return False
    return True


def number(value: Any, path: str, *, finite: bool = True, min: float | None = None,
           max: float | None = None, positive: bool = False) -> float:
    if not _is_number(value):
        if looks_like_quantity(value) and not is_number_text(value):
            raise ModelError(path, f"expected a plain number, got {describe(value)}: this "
                                   f"key declares no dimension, so a number with a unit "
                                   f"cannot be converted (docs/model-format.md, Units)")
        raise ModelError(path, f"expected a number, got {describe(value)}")
    try:
        v = float(value)
    except OverflowError:             # an integer of hundreds of digits
        raise ModelError(path, f"number {_cut(str(value), 40)} is too large") from None
    if finite and not math.isfinite(v):
        raise ModelError(path, f"expected a finite number, got {v}")
    if positive and not v > 0:
        raise ModelError(path, f"expected a positive number, got {v:g}")
    if min is not None and v < min:
        raise ModelError(path, f"expected a number >= {min:g}, got {v:g}")
    if max is not None and v > max:
        raise ModelError(path, f"expected a number <= {max:g}, got {v:g}")
    return v


def count(value: Any, path: str, *, positive: bool = False) -> int:
    """A whole number >= 0 (>= 1 if ``positive``); an integral float (1.0e5) is
    accepted."""
    v = number(value, path)
    if v != math.floor(v) or v < (1 if positive else 0) or v > 2 ** 62:
        raise ModelError(path, f"expected a whole number >= {1 if positive else 0}, got "
                               f"{describe(value)}")
    return int(v)


def vector(value: Any, path: str, n: int = 2) -> tuple[float, ...]:
    if not isinstance(value, (list, tuple)) or isinstance(value, str):
        try:  # numpy arrays from the Python API
            import numpy as np
            if isinstance(value, np.ndarray) and value.ndim == 1:
                value = value.tolist()
            else:
                raise TypeError
        except TypeError:
            raise ModelError(path, f"expected {n} numbers, got {describe(value)}") from None
    if len(value) != n:
        raise ModelError(path, f"expected {n} numbers, got {len(value)}")
    try:                              # plain finite floats and ints: no per-entry path
        out = tuple(float(v) for v in value if type(v) is float or type(v) is int)
    except OverflowError:
        out = ()
    if len(out) == n and all(map(math.isfinite, out)):
        return out
    return tuple(number(v, f"{path}[{k}]") for k, v in enumerate(value))


def string(value: Any, path: str, *, empty: bool = False) -> str:
    """A string (non-empty unless ``empty``); no other type is converted."""
    if not isinstance(value, str) or not (value or empty):
        hint = ""
        if isinstance(value, bool) or value is None:
            hint = ("; YAML reads unquoted yes/no/on/off/true/false as booleans and "
                    "null/~ as nothing: put the text in quotes")
        raise ModelError(path, f"expected a {'' if empty else 'non-empty '}string, got "
                               f"{describe(value)}{hint}")
    return value


def format_vector(v: Any) -> str:
    """``[0, 0.5, 1e-09]``: numbers for a message (no NumPy reprs)."""
    return "[" + ", ".join(f"{float(x):g}" for x in np.ravel(np.asarray(v, dtype=float))) + "]"


def names(value: Any, path: str) -> tuple[str, ...]:
    """Names given as one comma-separated string (``q, qd``) or as a list of strings
    (``[q, qd]``), each stripped; at least one."""
    if isinstance(value, str):
        items = [x.strip() for x in value.split(",")]
        if not any(items):
            raise ModelError(path, "expected at least one name, got an empty string")
        if not all(items):
            raise ModelError(path, f"an empty name between commas in {value!r}")
        return tuple(items)
    if isinstance(value, (list, tuple)):
        if not value:
            raise ModelError(path, "expected at least one name, got an empty list")
        return tuple(string(x, join(path, i)).strip() for i, x in enumerate(value))
    raise ModelError(path, f"expected names as a comma-separated string or a list of "
                           f"strings, got {describe(value)}")


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ModelError(path, f"expected a mapping (key: value), got {describe(value)}")
    for k in value:
        if not isinstance(k, str):
            raise ModelError(path, f"keys must be strings, got {describe(k)}")
    return value


def sequence(value: Any, path: str) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise ModelError(path, f"expected a list, got {describe(value)}")
    return value


def check_keys(data: Mapping[str, Any], allowed: Iterable[str], path: str,
               required: Iterable[str] = (), of: str = "") -> None:
    """Unknown keys and missing required keys are errors naming the key path
    (``of``: whose keys they are, e.g. "the dynamic analysis")."""
    allowed = list(allowed)
    for k in data:
        if k not in allowed:
            close = difflib.get_close_matches(k, allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else \
                f" (allowed: {', '.join(allowed)})" if allowed else " (no keys are allowed here)"
            raise ModelError(join(path, k), f"unknown key{' of ' + of if of else ''}{hint}")
    for k in required:
        if k not in data:
            raise ModelError(join(path, k), "required key is missing")


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def describe(value: Any) -> str:
    """A short description of a bad value for an error message ("a string ('x')",
    "nothing (null)", ...)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, str):
        return f"a string ({_cut(repr(value))})"
    if isinstance(value, (list, tuple)):
        return f"a list of {len(value)}"
    if isinstance(value, Mapping):
        return "a mapping"
    return f"{type(value).__name__} ({_cut(repr(value))})"


def _cut(text: str, n: int = 80) -> str:
    """A value's text cut to ``n`` characters for an error message."""
    return text if len(text) <= n else text[:n - 3] + "..."


# ---------------------------------------------------------------------------------
# Parameter declarations used by element types
# ---------------------------------------------------------------------------------
@dataclass
class Param:
    """One parameter of an element type.

    ``kind`` is one of ``body``, ``vec2``, ``vec3`` (a spatial point: 3 numbers or
    a named point), ``axis3`` (a direction: 3 numbers of non-zero length, returned
    as a unit vector), ``number``, ``count`` (a whole number >= 0), ``choice``,
    ``function``,
    ``string``, ``strings`` (a list of names), ``names`` (names given as a
    comma-separated string or as a list, returned as a tuple), ``bodies`` (a non-empty list of
    distinct body names, the ground excluded: the body list of a
    :attr:`mbcore.elements.ForceType.body_list` type), ``numbers`` (a list of
    numbers), ``bool`` (true/false; also yes/no),
    ``mapping`` (key: value, keys
    validated by whoever uses it).  ``default`` of ``None`` with ``required=False`` means the type
    computes a default itself (e.g. from the initial configuration).

    ``unit`` (kinds ``number``, ``numbers``, ``vec2``, ``vec3``): the parameter's
    dimension, a product/quotient of ``length``, ``angle``, ``time``, ``mass``,
    ``force`` (``"force/length"``; ``"1"``: a pure number).  A value (or vector
    entry) given as a string with a unit (``"2 kN/m"``) is converted to the model's
    unit system (:mod:`mbcore.elements.units`); without ``unit`` such a string is
    refused.
    """

    kind: str
    doc: str = ""
    default: Any = _MISSING
    required: bool | None = None
    choices: Sequence[str] = field(default_factory=tuple)
    positive: bool = False
    on: str = ""          # for ``vec2`` points: the body parameter the point lies on
    unit: str = ""        # dimension ("length", "force/length"): strings with units

    def is_required(self) -> bool:
        if self.required is not None:
            return self.required
        return self.default is _MISSING

    def validate(self, value: Any, path: str, ctx: "ValidationContext") -> Any:
        if value is None and not self.is_required():
            return None
        if self.unit:
            value = quantities(value, path, self.unit, getattr(ctx, "units", None))
        k = self.kind
        if k == "number":
            return number(value, path, positive=self.positive)
        if k == "count":
            return count(value, path, positive=self.positive)
        if k == "vec2":
            if isinstance(value, str) and ctx is not None:
                return ctx.point(value, path)   # a named point: (body, local coords)
            return vector(value, path, 2)
        if k == "vec3":
            if isinstance(value, str) and ctx is not None:
                return ctx.point(value, path)   # a named point: (body, local coords)
            return vector(value, path, 3)
        if k == "axis3":
            v = given = np.asarray(vector(value, path, 3), dtype=float)
            if np.abs(v).max() > 0.0:         # no overflow in the norm of [1e308, 1e308, 0]
                v = v / np.abs(v).max()
            nrm = float(np.linalg.norm(v))
            if not nrm > 1e-12 * max(1.0, float(np.max(np.abs(v)))) or nrm == 0.0:
                raise ModelError(path, f"a direction must have non-zero length, got "
                                       f"{format_vector(given)}")
            return tuple(float(x) for x in v / nrm)
        if k == "body":
            name = string(value, path)
            if ctx is not None:
                ctx.check_body(name, path)
            return name
        if k == "bodies":
            items = sequence(value, path)
            if not items:
                raise ModelError(path, "expected a list of at least one body, got an "
                                       "empty list")
            seen: dict[str, int] = {}
            for i, x in enumerate(items):
                name = string(x, join(path, i))
                if ctx is not None:
                    if name == ctx.ground:
                        raise ModelError(join(path, i), f"the ground '{name}' cannot be "
                                                        f"in a body list")
                    ctx.check_body(name, join(path, i))
                if name in seen:
                    raise ModelError(join(path, i), f"body '{name}' is listed twice "
                                                    f"(also at [{seen[name]}])")
                seen[name] = i
            return tuple(seen)
        if k == "numbers":
            return tuple(number(x, join(path, i), positive=self.positive)
                         for i, x in enumerate(sequence(value, path)))
        if k == "choice":
            if value not in self.choices:
                raise ModelError(path, f"expected one of {', '.join(map(repr, self.choices))}, "
                                       f"got {describe(value)}")
            return value
        if k == "function":
            return ctx.function(value, path) if ctx is not None else value
        if k == "string":
            return string(value, path)
        if k == "names":                # 'a, b' or [a, b]: a tuple of names
            return names(value, path)
        if k == "strings":              # a list of names (one name: a list of one)
            if isinstance(value, str):
                return (value,)
            return tuple(string(x, join(path, i)) for i, x in enumerate(sequence(value, path)))
        if k == "mapping":
            return dict(mapping(value, path))
        if k == "bool":
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("yes", "no", "true", "false"):
                return value.lower() in ("yes", "true")
            raise ModelError(path, f"expected true or false, got {describe(value)}")
        raise ModelError(path, f"internal: unknown parameter kind {k!r}")

    def default_value(self) -> Any:
        return None if self.default is _MISSING else self.default


def quantities(value: Any, path: str, dimension: str,
               units: UnitSystem | None = None) -> Any:
    """``value`` with its strings with units (``"10 mm"``: a string that starts
    with a number; a vector's entries one by one) converted to ``units`` (default
    SI) as numbers of ``dimension``; other values unchanged (other strings: a named
    point, or refused by the parameter's kind)."""
    t = type(value)
    if t is str:
        if not looks_like_quantity(value):
            return value
        return (units or unit_system(None)).convert(value, dimension, path)
    if (t is list or t is tuple) and str in map(type, value) and \
            any(map(looks_like_quantity, value)):
        u = units or unit_system(None)
        return [u.convert(v, dimension, join(path, k)) if looks_like_quantity(v) else v
                for k, v in enumerate(value)]
    return value


class ValidationContext:
    """What parameter validation may look up: body names, named points, functions."""

    def __init__(self, bodies: Iterable[str], points: Mapping[str, tuple[str, tuple]],
                 parameters: Mapping[str, float], ground: str = "ground",
                 data_dir: str | None = None, allow_external_data: bool | None = None,
                 units: UnitSystem | None = None):
        self.bodies = set(bodies)
        #: the model's unit system (strings with units convert to it; None: SI)
        self.units = units
        self.points = dict(points)
        self.parameters = dict(parameters)
        self.ground = ground
        #: where table files are resolved (the model file's directory) and whether
        #: files outside it may be read (:func:`mbcore.elements.functions.read_table_file`)
        self.data_dir = data_dir
        self.allow_external_data = allow_external_data

    def check_body(self, name: str, path: str) -> None:
        if name != self.ground and name not in self.bodies:
            known = sorted(self.bodies) + [self.ground]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ModelError(path, f"unknown body '{name}'{hint}")

    def point(self, name: str, path: str):
        if name not in self.points:
            raise ModelError(path, f"unknown point '{name}' (expected 2 numbers or the name "
                                   f"of a point in 'points')")
        return NamedPoint(name, *self.points[name])

    def function(self, spec: Any, path: str):
        from .functions import parse_function
        return parse_function(spec, path, self.parameters, data_dir=self.data_dir,
                              allow_external_data=self.allow_external_data)


@dataclass(frozen=True)
class NamedPoint:
    """A point given by name in an element; resolved against the element's body."""

    name: str
    body: str
    at: tuple[float, float]
