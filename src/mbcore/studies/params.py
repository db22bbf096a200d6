"""Swept parameters of a study: key paths into a model and value specifications.

A *key path* names one value of the model's dictionary form (:meth:`Model.to_dict`),
walking mappings by key and lists of named entries (bodies, points, joints, drivers,
forces, impacts) by the entry's name: ``forces.spring.stiffness``,
``bodies.crank.mass``, ``bodies.crank.position[0]``, ``settings.t_end``,
``parameters.L``.  ``[k]`` indexes a list (``joints[2].point_i[1]``).  A path is
checked against the base model before anything runs; a wrong path raises a
:class:`ModelError` naming it and listing close matches (docs/sweeps.md).

A *value specification* is ``a:b:n`` (n values from a to b, linear), ``a:b:n:log``
(n values from a to b, geometric), ``v1,v2,...`` (a list) or one value; Python
callers may give a sequence instead.  :func:`expand` builds the cases: the cartesian
product (``grid``, the last parameter varying fastest) or the element-wise pairing
(``zip``).
"""
from __future__ import annotations

import contextlib
import copy
import difflib
import itertools
import re
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..errors import ModelError

__all__ = ["Parameter", "parse_spec", "parse_value", "split_path", "resolve", "set_value",
           "expand", "parameters_from"]

#: lists of named entries in a model dictionary (walked by name)
NAMED_SECTIONS = ("bodies", "points", "joints", "drivers", "forces", "impacts")
_INDEX = re.compile(r"\[(-?\d+)\]")


@dataclass(frozen=True)
class Parameter:
    """One swept parameter: its key path and its values (numbers or strings)."""

    path: str
    values: tuple

    def __len__(self) -> int:
        return len(self.values)


# ------------------------------------------------------------------------- specs
def parse_value(text: str) -> Any:
    """A list item of a spec: an int, a float, ``true``/``false`` or a string."""
    s = text.strip()
    for conv in (int, float):
        with contextlib.suppress(ValueError):     # not this kind of number
            return conv(s)
    low = s.lower()
    if low in ("true", "false"):
        return low == "true"
    if not s:
        raise ValueError("empty value")
    return s


def _number(text: str, what: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ModelError(where, f"{what} '{text}' is not a number") from None


def parse_spec(spec: Any, where: str = "spec") -> tuple:
    """The values of a spec: ``a:b:n`` (linspace), ``a:b:n:log`` (geomspace),
    ``v1,v2,...``, one value, or a sequence/array of values."""
    if isinstance(spec, np.ndarray):
        spec = spec.tolist()
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise ModelError(where, "no values")
        return tuple(_plain(v, where) for v in spec)
    if isinstance(spec, (int, float, bool)) or not isinstance(spec, str):
        return (_plain(spec, where),)
    text = spec.strip()
    if not text:
        raise ModelError(where, "empty value specification (expected a:b:n, a:b:n:log "
                                "or v1,v2,...)")
    if "," in text:
        try:
            return tuple(parse_value(v) for v in text.split(","))
        except ValueError:
            raise ModelError(where, f"'{spec}': empty list item") from None
    parts = text.split(":")
    if len(parts) == 1:
        return (parse_value(text),)
    if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3].strip() not in
                                    ("log", "lin")):
        raise ModelError(where, f"'{spec}': expected a:b:n, a:b:n:log or v1,v2,...")
    a = _number(parts[0], "start", where)
    b = _number(parts[1], "stop", where)
    try:
        n = int(parts[2])
    except ValueError:
        raise ModelError(where, f"'{spec}': the count '{parts[2]}' is not an integer") from None
    if n < 1:
        raise ModelError(where, f"'{spec}': the count must be >= 1, got {n}")
    if len(parts) == 4 and parts[3].strip() == "log":
        if a == 0 or b == 0 or (a > 0) != (b > 0):
            raise ModelError(where, f"'{spec}': a log range needs two non-zero bounds of "
                                    f"the same sign")
        return tuple(float(v) for v in np.geomspace(a, b, n))
    return tuple(float(v) for v in np.linspace(a, b, n))


def _plain(v: Any, where: str) -> Any:
    """A value as plain data (NumPy scalars -> Python numbers)."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, (bool, int, float, str)):
        return v
    raise ModelError(where, f"values must be numbers, booleans or strings, got {v!r}")


# ------------------------------------------------------------------------- paths
def split_path(path: str) -> list[str | int]:
    """``'joints[2].point_i[1]'`` -> ``['joints', 2, 'point_i', 1]`` (names with dots
    stay split here; :func:`resolve` joins them back when an entry is so named)."""
    out: list[str | int] = []
    for part in path.split("."):
        m = _INDEX.search(part)
        head = part[:m.start()] if m else part
        if head:
            out.append(head)
        elif not m:
            raise ModelError(path, "empty element in the key path")
        rest = part[m.start():] if m else ""
        while rest:
            m = _INDEX.match(rest)
            if m is None:
                raise ModelError(path, f"cannot read '{rest}' (expected [index])")
            out.append(int(m.group(1)))
            rest = rest[m.end():]
    return out


def _close(word: str, choices: Iterable[str]) -> str:
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(word, choices, n=3, cutoff=0.5)
    if close:
        return " (did you mean " + " or ".join(f"'{c}'" for c in close) + "?)"
    shown = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
    return f" (choices: {shown})" if choices else ""


def resolve(data: Mapping[str, Any], path: str, registry=None) -> tuple[Any, Any, str]:
    """Walk ``path`` in the model dictionary ``data``: (container, key, canonical
    path), where ``container[key]`` is the value (a key absent from a mapping is
    accepted when the entry allows it: an element's optional parameter, a body's
    optional key, a known setting).  Raises :class:`ModelError` naming the path."""
    parts = split_path(path)
    from ..model.model import TOP_KEYS
    if not parts or not isinstance(parts[0], str) or parts[0] not in TOP_KEYS:
        head = str(parts[0]) if parts else ""
        raise ModelError(path, f"unknown top-level key '{head}'{_close(head, TOP_KEYS)}")
    node: Any = data
    container: Any = None
    key: Any = None
    canon: list[str] = []
    section: str | None = None
    i = 0
    while i < len(parts):
        part = parts[i]
        last = i == len(parts) - 1
        where = _join(canon) or "the model"
        if isinstance(node, list):
            if isinstance(part, int):
                if not -len(node) <= part < len(node):
                    raise ModelError(path, f"index {part} out of range: {where} has "
                                           f"{len(node)} entries")
                container, key, node = node, part, node[part]
                canon.append(f"[{part}]")
                i += 1
                continue
            names = [e.get("name") for e in node if isinstance(e, Mapping)]
            for j in range(len(parts), i, -1):      # longest name first (names with dots)
                chunk = parts[i:j]
                if all(isinstance(c, str) for c in chunk) and ".".join(chunk) in names:
                    name = ".".join(chunk)
                    k = names.index(name)
                    container, key, node = node, k, node[k]
                    canon.append(name)
                    i = j
                    break
            else:
                raise ModelError(path, f"{where} has no entry named '{part}'"
                                       f"{_close(str(part), [n for n in names if n])}")
            continue
        if isinstance(node, Mapping):
            if isinstance(part, int):
                raise ModelError(path, f"{where} is a mapping, not a list: no [{part}]")
            if part in node:
                container, key, node = node, part, node[part]
            elif last:
                allowed = _allowed_keys(data, canon, section, node, registry)
                if part not in allowed:
                    raise ModelError(path, f"{where} has no key '{part}'"
                                           f"{_close(part, sorted(set(allowed) | set(node)))}")
                container, key, node = node, part, None
            else:
                raise ModelError(path, f"{where} has no key '{part}'{_close(part, node)}")
            if not canon:
                section = part
            canon.append(part)
            i += 1
            continue
        raise ModelError(path, f"{where} is a value ({node!r}): nothing below it")
    if isinstance(node, (Mapping, list)):
        kind = "a mapping" if isinstance(node, Mapping) else "a list"
        inner = list(node) if isinstance(node, Mapping) else \
            [e.get("name") if isinstance(e, Mapping) else f"[{k}]" for k, e in enumerate(node)]
        raise ModelError(path, f"{_join(canon)} is {kind}, not a value: name one of its "
                               f"entries ({', '.join(str(x) for x in inner[:12])})")
    return container, key, _join(canon)


def _join(parts: Sequence[str]) -> str:
    out = ""
    for p in parts:
        out += p if p.startswith("[") or not out else "." + p
    return out


def _allowed_keys(data, canon, section, node, registry) -> list[str]:
    """Keys an absent last path element may name (the entry's optional keys)."""
    from ..model import model as M
    if registry is None:
        from ..plugins.manager import registry as _reg
        registry = _reg()
    if section == "settings" and len(canon) == 1:
        keys = {"analysis", "kernels", "reporters"}
        for _kind, _name, _prov, cls in registry.rows():
            keys |= set(getattr(cls, "settings_schema", {}) or {})
        return sorted(keys)
    if section == "bodies" and len(canon) == 2:
        if node.get("kind") == "particle":
            return list(M.PARTICLE_KEYS)
        return list(M.SPATIAL_BODY_KEYS if data.get("dimensions") == 3 else M.BODY_KEYS)
    if section in M.SECTIONS and len(canon) == 2 and isinstance(node.get("type"), str):
        kind = M.SECTION_KIND[section]
        body_kind = "spatial" if data.get("dimensions") == 3 else "planar"
        if registry.has(kind, node["type"], body_kind):
            return ["name", "type", *registry.get(kind, node["type"], body_kind).params]
    return []


def set_value(data: dict, path: str, value: Any, registry=None) -> None:
    """Set the value at ``path`` of the model dictionary ``data`` (in place)."""
    container, key, _ = resolve(data, path, registry)
    container[key] = value


# ------------------------------------------------------------------------- cases
def parameters_from(params: Mapping[str, Any] | Sequence[Any], base: Mapping[str, Any],
                    registry=None) -> list[Parameter]:
    """:class:`Parameter` list from ``{path: spec}`` (or a sequence of ``"PATH=SPEC"``
    strings / ``(path, spec)`` pairs), every path checked against ``base``."""
    items: list[tuple[str, Any]] = []
    if isinstance(params, Mapping):
        items = list(params.items())
    else:
        for p in params:
            if isinstance(p, str):
                path, eq, spec = p.partition("=")
                if not eq:
                    raise ModelError(p, "expected PATH=SPEC (e.g. forces.spring.stiffness="
                                        "1e3:1e5:5)")
                items.append((path.strip(), spec))
            else:
                path, spec = p
                items.append((str(path), spec))
    if not items:
        raise ModelError("params", "no parameter to sweep")
    out: list[Parameter] = []
    seen: dict[str, str] = {}
    for path, spec in items:
        _, _, canon = resolve(base, path, registry)
        if canon in seen:
            raise ModelError(path, f"swept twice (also as '{seen[canon]}')")
        seen[canon] = path
        out.append(Parameter(canon, parse_spec(spec, canon)))
    return out


def expand(parameters: Sequence[Parameter], mode: str = "grid") -> list[tuple]:
    """The value tuples of the cases: ``grid`` (cartesian product, last parameter
    fastest) or ``zip`` (element-wise; every parameter has the same count)."""
    if mode == "grid":
        return list(itertools.product(*(p.values for p in parameters)))
    if mode == "zip":
        counts = {p.path: len(p) for p in parameters}
        if len(set(counts.values())) > 1:
            raise ModelError("zip", "the parameters have different numbers of values: " +
                             ", ".join(f"{k} {v}" for k, v in counts.items()))
        return list(zip(*(p.values for p in parameters)))
    raise ModelError("mode", f"expected 'grid' or 'zip', got {mode!r}")


def case_model(base: Mapping[str, Any], parameters: Sequence[Parameter], values: tuple,
               registry=None) -> dict:
    """A deep copy of ``base`` with the case's values set."""
    d = copy.deepcopy(dict(base))
    for p, v in zip(parameters, values):
        set_value(d, p.path, v, registry)
    return d
