"""Units of a model: its unit system (the ``units:`` block) and quantities with units.

A model's plain numbers are in the units its ``units:`` block names (length, angle,
time, mass and optionally force; SI where a key is missing); they are never
converted.  A quantity given as a string with a unit (``"30 deg"``, ``"10 mm"``,
``"2 kN/m"``) where a parameter declares its dimension is converted on load to
the model's unit system.  Every conversion goes through one cached
:class:`pint.UnitRegistry` (pint's own unit definitions; no tables here).

Dimensions are written as products and quotients of the base names ``length``,
``angle``, ``time``, ``mass``, ``force`` (``force/length``, ``mass*length^2``,
``angle/time``) or ``1`` (a pure number); a power may be a decimal fraction
(``force/length^1.5``, the stiffness of a Hertzian contact law, Johnson (1985), Ch. 4;
:func:`power_law_quantity`).  pint treats the radian as
dimensionless; here the angle is a dimension of its own, counted by the power of
the radian in a quantity's root units (``rpm`` is ``radian/second``), so
``"30 deg"`` is refused for a length and ``"10 mm"`` for an angle.
"""
from __future__ import annotations

import difflib
import math
import re
from functools import lru_cache
from typing import Any, Mapping

from ..errors import ModelError

#: the keys of a ``units:`` block
BASE = ("length", "angle", "time", "mass", "force")
#: the unit of a key a model does not give
DEFAULTS = {"length": "m", "angle": "rad", "time": "s", "mass": "kg"}
#: the SI symbols of the base names (force: the newton, kg·m/s²)
SI = {**DEFAULTS, "force": "N"}
#: the physical dimension (pint's) of each base name; the angle is counted apart
_PINT_DIMENSION = {"length": {"[length]": 1}, "angle": {}, "time": {"[time]": 1},
                   "mass": {"[mass]": 1},
                   "force": {"[mass]": 1, "[length]": 1, "[time]": -2}}
#: names for the messages of common dimensions
NAMED = ("1", "length", "angle", "time", "mass", "force", "force*length", "force/length",
         "force*length/angle", "length/time", "angle/time", "length/time^2",
         "angle/time^2", "mass*length^2", "force*time/length", "force*length*time/angle",
         "mass/length^3", "length^2", "1/time")

#: force units shown by name where the derived force (mass·length/time²) is one
FORCE_NAMES = ("N", "mN", "kN", "lbf", "pdl")

_TOKEN = re.compile(r"\s*([*/])?\s*([A-Za-z_][A-Za-z_0-9]*|1)\s*(?:\^\s*(-?\d+(?:\.\d+)?))?\s*")
#: a power written in a unit: a small whole number or decimal fraction (m^2, m^1.5)
_POWER = re.compile(r"\d{1,2}(?:\.\d{1,2})?")


def _power(p: Any) -> int | float:
    """A power as an int when it is whole (1.0 -> 1), else a float (1.5)."""
    p = float(p)
    return int(p) if p.is_integer() else p


@lru_cache(maxsize=1)
def registry() -> Any:
    """The one :class:`pint.UnitRegistry` of the process (built on first use).

    pint's parsed unit definitions are kept in its on-disk cache (``cache_folder=
    ":auto:"``, the user's cache directory), which makes building the registry about
    six times faster in every later process (0.05 s instead of 0.3 s); where that
    directory cannot be used the registry is built without it."""
    import pint
    try:
        ureg = pint.UnitRegistry(cache_folder=":auto:")
    except Exception:                     # an unwritable or broken cache: no cache
        ureg = pint.UnitRegistry()
    formatter = getattr(ureg, "formatter", None)
    if formatter is not None and hasattr(formatter, "default_sort_func"):
        formatter.default_sort_func = None    # units in the order given: N*m, not m*N
    if "rev" not in ureg:                     # pint names a turn "turn", "revolution"
        ureg.define("@alias turn = rev")
    return ureg


def parse_dimension(expr: str) -> dict[str, int | float]:
    """``"force/length"`` -> ``{"force": 1, "length": -1}`` (``"1"``: ``{}``;
    ``"force/length^1.5"`` -> ``{"force": 1, "length": -1.5}``)."""
    out: dict[str, int | float] = {}
    pos = 0
    first = True
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m or m.end() == pos or (m.group(1) is None) != first:
            raise ValueError(f"bad dimension expression {expr!r}")
        op, name, power = m.groups()
        if name != "1" and name not in BASE:
            raise ValueError(f"unknown dimension {name!r} in {expr!r} (one of "
                             f"{', '.join(BASE)})")
        if name != "1":
            out[name] = _power(out.get(name, 0) + (-1 if op == "/" else 1) * _power(power or 1))
        pos, first = m.end(), False
    if first:
        raise ValueError("empty dimension expression")
    return {k: v for k, v in out.items() if v}


def _signature(exps: Mapping[str, int]) -> tuple[tuple[tuple[str, int], ...], int]:
    """(pint's physical dimension, the power of the angle) of base exponents."""
    phys: dict[str, int] = {}
    for name, p in exps.items():
        for d, q in _PINT_DIMENSION[name].items():
            phys[d] = phys.get(d, 0) + p * q
    return tuple(sorted((d, p) for d, p in phys.items() if p)), exps.get("angle", 0)


def _quantity_signature(q) -> tuple[tuple[tuple[str, int], ...], int]:
    """(physical dimension, power of the radian) of a pint quantity or unit."""
    ureg = registry()
    root = ureg.get_root_units(q.units if hasattr(q, "units") else q)[1]
    angle = dict(ureg.Quantity(1.0, root).unit_items()).get("radian", 0)
    dims = tuple(sorted((d, _power(p)) for d, p in q.dimensionality.items() if p))
    return dims, _power(angle)


@lru_cache(maxsize=None)
def _names_by_signature() -> dict:
    return {_signature(parse_dimension(n)): n for n in reversed(NAMED)}


def describe_signature(sig) -> str:
    """A dimension for a message: a common name (``force/length``) or the powers of
    mass, length, time and angle."""
    name = _names_by_signature().get(sig)
    if name is not None:
        return "a pure number" if name == "1" else name
    dims, angle = sig
    parts = [f"{d.strip('[]')}{'' if p == 1 else '^' + format(p, 'g')}" for d, p in dims]
    if angle:
        parts.append(f"angle{'' if angle == 1 else '^' + format(angle, 'g')}")
    return "*".join(parts)


def _suggest(name: str) -> str:
    ureg = registry()
    close = difflib.get_close_matches(name, list(ureg), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


#: the longest quantity or unit text read (a model file's strings are bounded)
MAX_CHARS = 100
_LEX = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)|(?P<name>[A-Za-z_]\w*)"
                  r"|(?P<pow>\*\*|\^)|(?P<op>[-+*/()]))")


def _check_text(text: str, path: str) -> None:
    """Refuse what pint would read but a unit never needs, before pint reads it:
    long text, characters other than numbers, names, ``* / ( ) ^ ** + -``, and
    powers other than a small integer of a name or a parenthesis (``m^2``, not
    ``10^99^99``: pint evaluates the numbers it reads)."""
    if len(text) > MAX_CHARS:
        raise ModelError(path, f"a number with a unit has at most {MAX_CHARS} "
                               f"characters, got {len(text)}")
    pos, prev = 0, ""
    toks: list[tuple[str, str]] = []
    while pos < len(text.rstrip()):
        m = _LEX.match(text, pos)
        if m is None:
            raise ModelError(path, f"cannot read {text!r} as a number with a unit (at "
                                   f"{text[pos:].strip()[:10]!r})")
        toks.append((m.lastgroup or "", m.group(m.lastgroup or 0)))
        pos = m.end()
    for k, (kind, tok) in enumerate(toks):
        if kind != "pow":
            continue
        nxt = toks[k + 1:k + 3]
        if nxt and nxt[0][1] == "-":
            nxt = nxt[1:]
        ok_base = k > 0 and (toks[k - 1][0] == "name" or toks[k - 1][1] == ")")
        ok_exp = bool(nxt) and nxt[0][0] == "num" and _POWER.fullmatch(nxt[0][1]) is not None
        if not (ok_base and ok_exp):
            raise ModelError(path, f"cannot read {text!r} as a number with a unit (a "
                                   f"power is a unit's small whole exponent: m^2, s**-1, "
                                   f"or a decimal fraction: m^1.5)")


def _parse(text: str, path: str):
    """A pint quantity from ``text``; unknown units and bad syntax as ModelError."""
    import pint
    _check_text(text, path)
    try:
        return registry().Quantity(text)
    except pint.UndefinedUnitError as exc:
        bad = exc.unit_names[0] if isinstance(exc.unit_names, (list, tuple)) \
            else str(exc.unit_names)
        raise ModelError(path, f"unknown unit '{bad}' in {text!r}{_suggest(bad)}") from None
    except Exception as exc:        # pint's parser: tokenize/syntax errors of many kinds
        raise ModelError(path, f"cannot read {text!r} as a number with a unit "
                               f"({type(exc).__name__})") from None


class UnitSystem:
    """The units a model's plain numbers are in (its ``units:`` block).

    ``spec`` maps ``length``, ``angle``, ``time``, ``mass``, ``force`` to pint unit
    names; a missing key is SI (m, rad, s, kg; force: mass·length/time², i.e. N
    for SI).  Each unit must have its key's dimension; where both ``mass`` and
    ``force`` are given they must agree (force = mass·length/time²)."""

    def __init__(self, spec: Mapping[str, Any] | None = None, path: str = "units"):
        spec = dict(spec or {})
        for k in spec:
            if k not in BASE:
                close = difflib.get_close_matches(k, BASE, n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else \
                    f" (allowed: {', '.join(BASE)})"
                raise ModelError(f"{path}.{k}", f"unknown key of the units{hint}")
        self.spec = {k: str(v) for k, v in spec.items() if v not in (None, "")}
        #: SI under its symbols: output units without pint (its import costs ~0.5 s
        #: of CPU); pint builds the units on the first conversion
        self.si = all(SI.get(k) == v.strip() for k, v in self.spec.items())
        self._units: dict[str, Any] | None = None
        self._path = path
        self._texts: dict[str, str] = {}
        if not self.si:
            self._build()

    @property
    def units(self) -> dict[str, Any]:
        """The pint quantity of each base name (``force`` given or derived)."""
        if self._units is None:
            self._build()
        return self._units            # type: ignore[return-value]

    def _build(self) -> None:
        """The block checked with pint: each unit of its key's dimension, force and
        mass consistent; the derived force named where it is one of
        :data:`FORCE_NAMES`."""
        path = self._path
        units: dict[str, Any] = {}
        ureg = registry()
        for name in ("length", "angle", "time", "mass", "force"):
            text = self.spec.get(name, DEFAULTS.get(name))
            if text is None:
                continue
            q = _parse(text, f"{path}.{name}")
            want = _signature({name: 1})
            if _quantity_signature(q) != want:
                raise ModelError(f"{path}.{name}", f"{text!r} is "
                                 f"{_article(describe_signature(_quantity_signature(q)))}; "
                                 f"expected "
                                 f"{describe_signature(want)}")
            units[name] = q
        derived = units["mass"] * units["length"] / units["time"] ** 2
        if "force" in units:
            ratio = float((units["force"] / derived).to(ureg.dimensionless).magnitude)
            if not math.isclose(ratio, 1.0, rel_tol=1e-6):
                raise ModelError(f"{path}.force",
                                 f"force {self.spec['force']!r} and mass "
                                 f"{self.spec.get('mass', 'kg')!r} do not agree with length "
                                 f"{self.spec.get('length', 'm')!r} and time "
                                 f"{self.spec.get('time', 's')!r}: 1 mass unit x 1 length "
                                 f"unit / (1 time unit)^2 is {ratio:.6g} force units, "
                                 f"not 1 (give one of mass and force, or a consistent pair)")
        else:                       # a named unit where the derived one is one
            units["force"] = derived
            for name in FORCE_NAMES:
                named = ureg.Quantity(1.0, name)
                if math.isclose(float((derived / named).to(ureg.dimensionless).magnitude),
                                1.0, rel_tol=1e-12):
                    units["force"] = named
                    break
        self._units = units

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnitSystem) and self.spec == other.spec

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.spec.items())))

    def __repr__(self) -> str:
        return f"UnitSystem({self.spec!r})"

    def quantity(self, dimension: str) -> Any:
        """The model's unit of ``dimension`` (a pint quantity of magnitude 1 or a
        product of such)."""
        out = registry().Quantity(1.0)
        for name, p in parse_dimension(dimension).items():
            out = out * self.units[name] ** p
        return out

    def unit(self, dimension: str) -> str:
        """The model's unit of ``dimension`` as text for output (``"N/m"``,
        ``"mm"``, ``"rad/s"``; ``""`` for a pure number): pint's compact format of
        the product of the ``units:`` block's units (``^`` for powers)."""
        text = self._texts.get(dimension)
        if text is None:
            text = self._texts[dimension] = self._si_text(dimension) if self.si else \
                self._pint_text(dimension)
        return text

    def _pint_text(self, dimension: str) -> str:
        q = self.quantity(dimension)
        if q.unitless:
            return ""
        text = format(q.units, "~C").replace("**", "^")
        mag = float(q.magnitude)
        return text if mag == 1.0 else f"{mag:g} {text}"

    @staticmethod
    def _si_text(dimension: str) -> str:
        """What :meth:`_pint_text` gives for SI, without pint: the symbols in the
        order of the expression, numerator then denominator."""
        exps = parse_dimension(dimension)
        num = [SI[k] + (f"^{p:g}" if p != 1 else "") for k, p in exps.items() if p > 0]
        den = [SI[k] + (f"^{-p:g}" if p != -1 else "") for k, p in exps.items() if p < 0]
        if not num and not den:
            return ""
        text = "*".join(num) if num else "1"
        if den:
            text += "/" + "/".join(den)
        return text

    def convert(self, text: str, dimension: str, path: str) -> float:
        """A quantity with a unit (``"30 deg"``) in the model's unit of ``dimension``;
        a dimension mismatch or an unknown unit is a ModelError naming ``path``."""
        q = _parse(text, path)
        if not hasattr(q, "units"):         # plain number text ("3")
            q = registry().Quantity(float(q))
        want = _signature(parse_dimension(dimension))
        got = _quantity_signature(q)
        if got != want:
            raise ModelError(path, f"{text!r} is {_article(describe_signature(got))}; "
                                   f"expected {describe_signature(want)}")
        target = self.quantity(dimension)
        try:
            v = float((q / target).to(registry().dimensionless).magnitude)
        except Exception as exc:              # offset units (degC) and the like
            raise ModelError(path, f"cannot convert {text!r} to the model's units "
                                   f"({type(exc).__name__})") from None
        if not math.isfinite(v):
            raise ModelError(path, f"expected a finite number, got {text!r}")
        return v


def power_law_quantity(text: str, numerator: str, path: str,
                       units: UnitSystem | None = None) -> tuple[float, int | float]:
    """``(value, e)``: the quantity ``text`` of dimension ``numerator/length^e`` in the
    model's units (default SI), ``e`` read from the text's own power of length
    (``"2e5 N/m^1.5"``: e = 1.5), for a coefficient of a power law whose exponent is
    another parameter (the stiffness k of a contact force k delta^e, Johnson (1985),
    Ch. 4: force/length^e); the caller compares ``e`` with that exponent.  A text of
    another dimension is a ModelError naming ``path``."""
    q = _parse(text, path)
    if not hasattr(q, "units"):
        q = registry().Quantity(float(q))
    dims, angle = _quantity_signature(q)
    top = _signature(parse_dimension(numerator))
    length = dict(dims).get("[length]", 0) - dict(top[0]).get("[length]", 0)
    e = _power(-length)
    dimension = f"{numerator}/length^{e:g}" if e else numerator
    if (dims, angle) != _signature(parse_dimension(dimension)):
        raise ModelError(path, f"{text!r} is {_article(describe_signature((dims, angle)))}; "
                               f"expected {numerator}/length^e")
    return (units or unit_system(None)).convert(text, dimension, path), e


def _group(text: str) -> str:
    return f"({text})" if any(c in text for c in " */") else text


def _article(name: str) -> str:
    if name == "a pure number" or "*" in name or "/" in name or "^" in name:
        return name if name.startswith("a ") else f"of dimension {name}"
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


@lru_cache(maxsize=64)
def _cached(items: tuple[tuple[str, str], ...]) -> UnitSystem:
    return UnitSystem(dict(items))


def unit_system(spec: Mapping[str, Any] | None) -> UnitSystem:
    """The :class:`UnitSystem` of a ``units:`` block (cached per block); errors name
    ``units.<key>``."""
    return _cached(tuple(sorted((str(k), str(v)) for k, v in dict(spec or {}).items())))


def looks_like_quantity(value: Any) -> bool:
    """A string that starts like a number (``"10 mm"``, ``"-2.5e3 N"``)."""
    return isinstance(value, str) and bool(re.match(r"\s*[-+]?(\d|\.\d)", value))


# ------------------------------------------------------------------ output columns
#: the dimension of a column of a built-in channel by the last part of its label
#: (``crank.phi`` -> ``phi``); the coordinates' rates by their channel
_COORDINATE = {"x": "length", "y": "length", "z": "length", "phi": "angle",
               "p0": "1", "p1": "1", "p2": "1", "p3": "1"}
_RATE = {"q": "", "qd": "/time", "qdd": "/time^2"}
_POINT = {"": "length", "d": "length/time", "dd": "length/time^2"}
_FORCE, _TORQUE = "force", "force*length"
#: reaction and force-element outputs by label (``fx_i``: the part before ``_``)
_ELEMENT = {"fx": _FORCE, "fy": _FORCE, "fz": _FORCE, "fn": _FORCE, "n": _TORQUE,
            "nx": _TORQUE, "ny": _TORQUE, "nz": _TORQUE, "force": _FORCE,
            "normal": _FORCE, "tension": _FORCE, "torque": _TORQUE,
            "spring_force": _FORCE, "damper_force": _FORCE, "actuator_force": _FORCE,
            "normal_force": _FORCE, "friction_force": _FORCE, "spring_torque": _TORQUE,
            "damper_torque": _TORQUE, "actuator_torque": _TORQUE,
            "length": "length", "length_rate": "length/time", "delta": "length",
            "delta_rate": "length/time", "slip_velocity": "length/time",
            "angle": "angle", "angle_rate": "angle/time", "penetration": "length",
            "max_penetration": "length", "speed": "length/time", "slip_speed": "length/time",
            "tangential": _FORCE, "longitudinal": _FORCE, "lateral": _FORCE,
            "dx": "length", "dy": "length", "dz": "length", "rx": "angle", "ry": "angle",
            "rz": "angle", "tx": _TORQUE, "ty": _TORQUE, "tz": _TORQUE}
#: columns of the joints channel (labels joint.angle, joint.disp_f, joint.p0, joint.wx,
#: each with a *_rate twin) by the label's first word
_JOINT = {"angle": "angle", "disp": "length", "p0": "1", "p1": "1", "p2": "1", "p3": "1",
          "wx": "angle/time", "wy": "angle/time", "wz": "angle/time"}
#: whole channels of one dimension
_CHANNEL = {"energy": "force*length", "solver": "1", "violation": "1", "lam": "1"}


def column_dimension(channel: str, label: str) -> str | None:
    """The dimension of column ``label`` of built-in channel ``channel`` (None: not
    known, e.g. a plugin's channel or a driver's effort, whose unit depends on the
    driven coordinate)."""
    tail = label.rsplit(".", 1)[-1]
    if channel in _CHANNEL:
        return _CHANNEL[channel]
    if channel in _RATE:
        dim = _COORDINATE.get(tail)
        if dim is None:
            return None
        return ("1" if dim == "1" else dim) + _RATE[channel] if _RATE[channel] else dim
    if channel == "points":
        base, dots = tail.rstrip("d"), tail[len(tail.rstrip("d")):]
        return _POINT.get(dots) if base in ("x", "y", "z") else None
    if channel == "angular":
        return {"w": "angle/time", "wd": "angle/time^2"}.get(
            tail[0] + tail[2:]) if len(tail) >= 2 and tail[1] in "xyz" else None
    if channel == "integrator":
        return "time" if tail == "step_size" else "1"
    if channel == "joints":             # relative joint coordinates and their rates
        base = tail[:-len("_rate")] if tail.endswith("_rate") else tail
        dim = _JOINT.get(base.split("_")[0])
        if dim is None or base == tail:
            return dim
        return "1/time" if dim == "1" else f"{dim}/time"
    if channel in ("reactions", "reactions_local", "forces"):
        if tail in _ELEMENT:
            return _ELEMENT[tail]
        return _ELEMENT.get(tail.split("_")[0]) if tail.split("_")[0] in (
            "fx", "fy", "fz", "nx", "ny", "nz", "n") else None
    return None


def column_units(channel: str, labels: list[str], units: UnitSystem) -> list[str]:
    """The unit of each column of a built-in channel in the model's unit system
    (``""``: a pure number or not known)."""
    out = []
    for lab in labels:
        dim = column_dimension(channel, lab)
        out.append(units.unit(dim) if dim else "")
    return out
