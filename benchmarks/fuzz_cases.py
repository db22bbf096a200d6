"""Fuzz cases for model files: mutated shipped examples and generated models.

A case is a dict ``{"name", "fmt", "data"}`` where ``data`` is the file's bytes.  Every
random decision goes through a *chooser* (``integer(lo, hi)``, ``choice(seq)``), so the
same generators serve the seeded campaign (:class:`RandomChooser`, ``benchmarks/fuzz.py``)
and hypothesis in the test suite (:class:`DrawChooser` over ``st.data()``, which
shrinks a failing case).

Mutations of the parsed data: delete / duplicate / rename keys, change types (any
value, settings included, to a value of every other JSON type: null, bool, int, float,
string, list, mapping), special numbers (NaN, +-inf, negative, huge, zero,
tiny, integers of thousands of digits), wrong vector lengths, unknown type names,
unknown body names, self-references (an element joining a body to itself), empty
lists, very long strings, settings pointing at other analyses, integrators and
formulations.  Text-level mutations: YAML aliases (shared, recursive, an alias bomb),
tags (python objects, binary, timestamps, sets, custom), duplicate keys, truncation,
tabs, deep nesting, several documents, invalid UTF-8, JSON with NaN literals.

The type-swap campaign (:func:`type_swap_case`) is exhaustive instead of random:
every key path of every shipped example (settings, bodies, element fields, vector
components) with a value of every other JSON type.
"""
from __future__ import annotations

import functools
import json
import math
import random
from pathlib import Path
from typing import Any, Sequence

import yaml

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("*.yaml"))
#: the shipped example models, YAML and JSON (the type-swap campaign)
EXAMPLE_FILES = sorted([*EXAMPLES, *(ROOT / "examples").glob("*.json")])
_NO_VALUE = object()

ANALYSES = ("kinematic", "kinetostatic", "static", "dynamic")
SPECIAL_NUMBERS: tuple[Any, ...] = (
    float("nan"), float("inf"), float("-inf"), -1.0, 0.0, -0.0, 1e308, -1e308, 1e-308,
    5e-324, 1e30, 2 ** 63, -(2 ** 63), 10 ** 30, 3, 0.5, 1e9)
NAMES = ("ground", "crank", "rod", "slider", "nosuchbody", "", "a" * 300, "x.y", "ä",
         "revolute", "dynamic", "t")
TYPES = ("revolute", "translational", "absolute_driver", "relative_driver", "tsda",
         "rsda", "force", "torque", "spherical", "universal", "cylindrical",
         "no_such_type", "Revolute", "", "user_force", "rack_pinion", "gear",
         "distance", "absolute", "rigid", "point_follower", "cam_follower", "weld")
SETTING_VALUES = {
    "analysis": ANALYSES + ("modes", "linearize", "nope", "Dynamic"),
    "integrator": ("dopri5", "rk4", "euler", "bdf", "abm", "dop853", "implicit_euler",
                   "trapezoid", "radau", "nope", "heun", "bs23"),
    "formulation": ("di", "cs", "cp", "ggl", "penalty", "projection", "joint_coordinates",
                    "stiff", "nope", "omega"),
    "method": ("newton", "modified_newton", "partitioned", "energy", "joint_coordinates",
               "given", "nope"),
    "coordinates": ("cartesian", "joint", "nope"),
    "predictor": ("taylor", "previous", "nope"),
    "kernels": ("compiled", "numpy", "nope"),
}


class RandomChooser:
    """Choices from a seeded :class:`random.Random` (the campaign)."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.integer(0, len(seq) - 1)]


class DrawChooser:
    """Choices drawn from hypothesis' ``st.data()`` (the test suite: shrinkable)."""

    def __init__(self, data):
        from hypothesis import strategies as st
        self.data, self.st = data, st

    def integer(self, lo: int, hi: int) -> int:
        return self.data.draw(self.st.integers(lo, hi))

    def choice(self, seq: Sequence[Any]) -> Any:
        return seq[self.integer(0, len(seq) - 1)]


# --------------------------------------------------------------------------- helpers
def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every (container path) in the tree, the root included."""
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, prefix + (i,)))
    return out


def _get(node: Any, path: tuple) -> Any:
    for k in path:
        node = node[k]
    return node


def _random_value(ch) -> Any:
    kind = ch.integer(0, 9)
    if kind == 0:
        return ch.choice(NAMES)
    if kind == 1:
        return ch.choice(SPECIAL_NUMBERS)
    if kind == 2:
        return [ch.choice(SPECIAL_NUMBERS) for _ in range(ch.integer(0, 5))]
    if kind == 3:
        return {ch.choice(("a", "name", "type", "t", "y", "polynomial", "table")):
                ch.choice(SPECIAL_NUMBERS)}
    if kind == 4:
        return None
    if kind == 5:
        return ch.choice((True, False))
    if kind == 6:
        return "x" * ch.choice((1000, 100_000))
    if kind == 7:
        return []
    if kind == 8:
        return {}
    return ch.choice(("sin(t)", "t**2", "1/0", "__import__('os')", "pi*t", "log(-1)",
                      "exp(1000*t)", "sqrt(t-1)", "t" + "+t" * 3000))


def json_type(value: Any) -> str:
    """The JSON type of a parsed value: one of :data:`JSON_TYPES` (bool before int:
    ``True`` is an ``int`` in Python, not in a model file)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "mapping"


#: the JSON types a value of a model file can have (int and float apart: a count
#: takes 3 but not 0.5), with the plain value of each the type swap puts in
JSON_TYPES: dict[str, Any] = {"null": None, "bool": True, "int": 1, "float": 0.5,
                              "string": "x", "list": [1], "mapping": {"a": 1}}


def value_of_type(tname: str, value: Any, ch=None) -> Any:
    """A value of JSON type ``tname`` made from ``value`` where that means something
    (``[value]``, ``{"value": value}``, ``str(value)``) and ``ch`` is given, else
    the plain one of :data:`JSON_TYPES`."""
    if ch is None or ch.integer(0, 1) == 0:
        return json.loads(json.dumps(JSON_TYPES[tname]))
    if tname == "bool":
        return ch.choice((True, False))
    if tname == "int":
        return len(value) if isinstance(value, (str, list, dict)) else \
            ch.choice((0, -1, 3, 2 ** 40))
    if tname == "float":
        return ch.choice((0.0, -1.5, 1e-3))
    if tname == "string":
        return str(value)[:200] if value is not None and not isinstance(value, str) \
            else ch.choice(("", "ground", "yes", "1.5"))
    if tname == "list":
        return ch.choice(([value], [], [[value]]))
    if tname == "mapping":
        return ch.choice(({"value": value}, {}, {str(value)[:50]: 1}))
    return None


def _change_type(value: Any, ch) -> Any:
    """``value`` replaced by a value of another JSON type (every type reachable)."""
    others = [t for t in JSON_TYPES if t != json_type(value)]
    return value_of_type(ch.choice(others), value, ch)


def _body_names(data: Any) -> list[str]:
    bodies = data.get("bodies") if isinstance(data, dict) else None
    if not isinstance(bodies, list):
        return ["ground"]
    return [b["name"] for b in bodies if isinstance(b, dict) and isinstance(b.get("name"), str)
            ] + ["ground"]


# ------------------------------------------------------------------ data mutations
def mutate_data(data: Any, ch) -> tuple[Any, str]:
    """One mutation of the parsed model data (in place where possible); returns the
    new root and a description."""
    paths = _paths(data)
    path = ch.choice(paths)
    op = ch.integer(0, 13)
    if path == ():                      # the root: replace or empty it
        if op < 3:
            return ch.choice(([], "model", None, 3, {})), f"root -> {op}"
        path = ch.choice(paths) if len(paths) > 1 else path
        if path == ():
            return data, "noop"
    parent, key = _get(data, path[:-1]), path[-1]
    value = parent[key]
    where = ".".join(map(str, path))
    if op == 0:                                            # delete
        del parent[key]
        return data, f"delete {where}"
    if op == 1:                                            # duplicate
        if isinstance(parent, list):
            parent.insert(key, json.loads(json.dumps(value, default=str))
                          if not _has_nan(value) else value)
        else:
            parent[f"{key}{ch.choice(('', '_', '2'))}x"] = value
        return data, f"duplicate {where}"
    if op == 2 and isinstance(parent, dict):               # rename
        new = ch.choice((key[:-1] or "k", key.upper(), key + "s", "_" + key,
                         ch.choice(("name", "type", "mass", "body_i", "t_end", "table"))))
        parent[new] = parent.pop(key)
        return data, f"rename {where} -> {new}"
    if op == 3:
        parent[key] = _change_type(value, ch)
        return data, f"retype {where}"
    if op in (4, 5):                                       # special numbers
        if isinstance(value, list) and value and ch.integer(0, 1):
            i = ch.integer(0, len(value) - 1)
            value[i] = ch.choice(SPECIAL_NUMBERS)
            return data, f"number {where}[{i}]"
        parent[key] = ch.choice(SPECIAL_NUMBERS) if not isinstance(value, (int, float)) \
            or ch.integer(0, 1) else value * ch.choice((-1, 0, 1e12, 1e-12, 1e300))
        return data, f"number {where}"
    if op == 6 and isinstance(value, list):                # vector lengths
        if value and ch.integer(0, 1):
            value.pop()
        else:
            value.extend([0.0] * ch.integer(1, 3))
        return data, f"length {where}"
    if op == 7 and key == "type":
        parent[key] = ch.choice(TYPES)
        return data, f"type {where}"
    if op == 8 and isinstance(value, str):                 # other body / unknown names
        names = _body_names(data)
        parent[key] = ch.choice(names + ["nosuchbody", "Ground", ""])
        return data, f"name {where}"
    if op == 9 and isinstance(parent, dict) and "body_i" in parent and "body_j" in parent:
        parent["body_j"] = parent["body_i"]               # a body joined to itself
        return data, f"self {where}"
    if op == 10:
        parent[key] = ch.choice(([], {}, "", [[]]))
        return data, f"empty {where}"
    if op == 11:
        parent[key] = "n" * ch.choice((10_000, 300_000)) if ch.integer(0, 1) else \
            _random_value(ch)
        return data, f"long {where}"
    if op == 12:                                           # settings
        settings = data.setdefault("settings", {}) if isinstance(data, dict) else None
        if isinstance(settings, dict):
            sk = ch.choice(list(SETTING_VALUES) + ["t_end", "output_step", "step",
                                                    "max_step", "rtol", "stop_when",
                                                    "hold", "independent", "record"])
            if ch.integer(0, 2) == 0:                     # a value of any JSON type
                settings[sk] = value_of_type(ch.choice(list(JSON_TYPES)), settings.get(sk), ch)
            else:
                settings[sk] = ch.choice(SETTING_VALUES[sk]) if sk in SETTING_VALUES else \
                    _random_value(ch)
            return data, f"settings.{sk}"
    parent[key] = _random_value(ch)
    return data, f"value {where}"


def mild_mutation(data: Any, ch) -> tuple[Any, str]:
    """A mutation that keeps the file well-typed (a number scaled or negated, a
    setting set to another valid choice): such cases reach compile and the analyses."""
    if ch.integer(0, 2) == 0 and isinstance(data, dict):
        settings = data.setdefault("settings", {})
        if isinstance(settings, dict):
            key = ch.choice(list(SETTING_VALUES))
            settings[key] = ch.choice(SETTING_VALUES[key][:-1] if key != "analysis"
                                      else ANALYSES)
            return data, f"settings.{key} = {settings[key]}"
    paths = [p for p in _paths(data) if p and isinstance(_get(data, p), (int, float))
             and not isinstance(_get(data, p), bool)]
    if not paths:
        return data, "noop"
    path = ch.choice(paths)
    parent = _get(data, path[:-1])
    factor = ch.choice((-1.0, 0.0, 2.0, 0.5, 1e3, 1e-3, 1e6, 1e-9, 1.0001))
    parent[path[-1]] = parent[path[-1]] * factor + ch.choice((0.0, 0.0, 1.0, -0.5))
    return data, f"scale {'.'.join(map(str, path))} by {factor:g}"


def _has_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value) or (
        isinstance(value, (list, dict)) and any(
            _has_nan(v) for v in (value.values() if isinstance(value, dict) else value)))


# ------------------------------------------------------------------ text mutations
def mutate_text(text: str, ch) -> tuple[str, str]:
    """A YAML oddity applied to the text of a (valid) model file."""
    lines = text.splitlines()
    op = ch.integer(0, 11)
    if op == 0:       # tags that construct objects: must be refused
        tag = ch.choice(("!!python/object/apply:os.system ['true']",
                         "!!python/name:os.system", "!!binary aGVsbG8=",
                         "!!timestamp 2001-12-14", "!!set {a, b}", "!custom 3",
                         "!!float '1.5'", "!!str 3", "!!omap [a: 1]"))
        return text + f"\ndescription: {tag}\n", f"tag {tag}"
    if op == 1:       # alias bomb
        lol = ["a: &a [x, x, x, x, x, x, x, x, x]"]
        for k in range(1, 9):
            lol.append(f"{chr(97 + k)}: &{chr(97 + k)} [{', '.join(['*' + chr(96 + k)] * 9)}]")
        return "\n".join(lol) + f"\ndescription: *{chr(105)}\n" + text, "alias bomb"
    if op == 2:
        return text + "\ndescription: &r [1, *r]\n", "recursive alias"
    if op == 3 and lines:
        cut = ch.integer(0, len(text))
        return text[:cut], f"truncate at {cut}"
    if op == 4:
        return "\t" + text.replace("  ", "\t", ch.integer(1, 5)), "tabs"
    if op == 5:
        depth = ch.choice((50, 1000, 100_000))
        return text + "\ndescription: " + "[" * depth + "]" * depth + "\n", f"nest {depth}"
    if op == 6:
        return text + "\n---\nname: second\n", "two documents"
    if op == 7 and lines:
        i = ch.integer(0, len(lines) - 1)
        lines.insert(i, lines[i])                      # duplicate key at the same level
        return "\n".join(lines), f"duplicate line {i}"
    if op == 8:
        return text + "\nsettings: {t_end: " + "9" * ch.choice((400, 5000)) + "}\n", \
            "huge integer"
    if op == 9:
        return text.replace("name:", ch.choice(("name :", "? name\n:", "<<: {}\nname:")),
                            1), "key syntax"
    if op == 10:
        return text + "\nbodies: &b []\njoints: *b\n", "alias reuse"
    return "%YAML 1.1\n---\n" + text, "directive"


def example_case(ch, examples: Sequence[Path] = EXAMPLES) -> dict:
    """A shipped example with 1-3 data mutations and maybe a text oddity."""
    src = ch.choice(list(examples))
    data = yaml.safe_load(src.read_text())
    notes = []
    mild = ch.integer(0, 4) < 2
    for _ in range(1 if ch.integer(0, 1) else ch.integer(2, 3)):
        data, note = (mild_mutation if mild else mutate_data)(data, ch)
        notes.append(note)
    fmt = "json" if ch.integer(0, 7) == 0 else "yaml"
    if fmt == "json":
        text = json.dumps(data, default=str)          # NaN / Infinity literals allowed
    else:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=200)
        if ch.integer(0, 4) == 0:
            text, note = mutate_text(text, ch)
            notes.append(note)
    raw = text.encode("utf-8")
    if ch.integer(0, 60) == 0:
        raw, notes = raw[:10] + b"\xff\xfe" + raw[10:], notes + ["invalid utf-8"]
    return {"name": f"{src.stem}: {'; '.join(notes)}", "fmt": fmt, "data": raw}


# ------------------------------------------------------------------ generated models
def generated_case(ch) -> dict:
    """A model built from the grammar of the format (planar or spatial bodies, joints
    and forces of random types between random bodies, drivers with random functions,
    random settings), then maybe mutated once."""
    spatial = ch.integer(0, 3) == 0
    nb = ch.integer(0, 4)
    dim = 3 if spatial else 2
    bodies = []
    for k in range(nb):
        b: dict[str, Any] = {"name": f"b{k}", "mass": ch.choice((1.0, 2.5, 0.1, 1e6)),
                             "position": [float(ch.integer(-2, 2)) for _ in range(dim)]}
        if spatial:
            b["inertia"] = ch.choice(([1, 1, 1], [0.1, 0.2, 0.25], [[1, 0, 0], [0, 2, 0],
                                                                    [0, 0, 3]]))
        else:
            b["inertia"] = ch.choice((1.0, 0.01, 5.0))
            b["angle"] = ch.choice((0.0, 0.5, 3.0))
        if ch.integer(0, 3) == 0:
            b["kind"] = "particle"
            b.pop("inertia"), b.pop("angle", None)
        bodies.append(b)
    names = [b["name"] for b in bodies] + ["ground"]
    vec = (lambda: [float(ch.integer(-1, 1)) for _ in range(dim)])
    joints, forces, drivers = [], [], []
    planar_j = ("revolute", "translational", "distance", "rigid", "revolute_translational")
    spatial_j = ("spherical", "revolute", "universal", "cylindrical", "translational")
    for k in range(ch.integer(0, 4)):
        j = {"name": f"j{k}", "type": ch.choice(spatial_j if spatial else planar_j),
             "body_i": ch.choice(names), "body_j": ch.choice(names),
             "point_i": vec(), "point_j": vec()}
        if j["type"] in ("translational", "cylindrical", "revolute") and \
                (spatial or j["type"] == "translational"):
            j["axis"] = ch.choice(([1.0, 0.0] + [0.0] * (dim - 2), vec()))
        if j["type"] == "distance":
            j["length"] = ch.choice((1.0, 0.0, 2.0))
        joints.append(j)
    fn = (lambda: ch.choice(("t", "sin(2*pi*t)", 0.5, {"polynomial": [0.0, 1.0]},
                             {"harmonic": {"amplitude": 1, "frequency": 2}},
                             {"table": {"t": [0, 0.5, 1], "y": [0, 1, 0]}},
                             {"table": {"t": [0, 1], "y": [0, 1], "extrapolate": "hold"}},
                             "log(t)", "1/(t-0.01)")))
    for k in range(ch.integer(0, 2)):
        drivers.append({"name": f"d{k}", "type": "absolute_driver", "body": ch.choice(names),
                        "coordinate": ch.choice(("x", "y", "phi") if not spatial else
                                                ("x", "y", "z")),
                        "function": fn()})
    for k in range(ch.integer(0, 3)):
        ftype = ch.choice(("tsda", "force", "torque", "rsda") if not spatial else
                          ("tsda", "force", "torque"))
        f: dict[str, Any] = {"name": f"f{k}", "type": ftype}
        if ftype == "tsda":
            f.update(body_i=ch.choice(names), body_j=ch.choice(names), point_i=vec(),
                     point_j=vec(), stiffness=ch.choice((10.0, 0.0, 1e9)),
                     damping=ch.choice((0.0, 1.0)), length=ch.choice((0.0, 1.0)))
        elif ftype == "rsda":
            f.update(body_i=ch.choice(names), body_j=ch.choice(names),
                     stiffness=ch.choice((1.0, 100.0)))
        elif ftype == "force":
            f.update(body=ch.choice(names), value=vec())
        else:
            f.update(body=ch.choice(names), value=ch.choice((1.0, [0.0, 0.0, 1.0])))
        forces.append(f)
    analysis = ch.choice(ANALYSES)
    settings: dict[str, Any] = {"analysis": analysis}
    if analysis in ("kinematic", "kinetostatic", "dynamic"):
        settings.update(t_end=ch.choice((0.05, 0.02)), output_step=ch.choice((0.01, 0.025)))
    if analysis == "dynamic":
        settings.update(integrator=ch.choice(SETTING_VALUES["integrator"][:9]),
                        formulation=ch.choice(SETTING_VALUES["formulation"][:7]))
    model: dict[str, Any] = {"name": "generated", "settings": settings, "bodies": bodies}
    if spatial:
        model["dimensions"] = 3
    if ch.integer(0, 1):
        model["gravity"] = [0.0, -9.81] + ([0.0] if spatial else [])
    for key, lst in (("joints", joints), ("drivers", drivers), ("forces", forces)):
        if lst:
            model[key] = lst
    notes = []
    if ch.integer(0, 2) == 0:
        model, note = mutate_data(model, ch)
        notes.append(note)
    text = yaml.safe_dump(model, sort_keys=False)
    return {"name": "generated" + (": " + "; ".join(notes) if notes else ""), "fmt": "yaml",
            "data": text.encode()}


def make_case(ch) -> dict:
    """One case: a mutated example (2 in 3) or a generated model."""
    return example_case(ch) if ch.integer(0, 2) else generated_case(ch)


# ------------------------------------------------------------------ type swaps
def key_path(path: tuple) -> str:
    """``("joints", 0, "point_i", 1)`` -> ``joints[0].point_i[1]`` (as errors say)."""
    out = ""
    for k in path:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


@functools.lru_cache(maxsize=None)
def _swap_table(examples: tuple[Path, ...]) -> tuple[tuple[Path, tuple, str], ...]:
    """Every (example, key path, JSON type) with a type other than the value's own:
    the exhaustive type-swap campaign, in a fixed order."""
    rows = []
    for src in examples:
        data = yaml.safe_load(src.read_text())
        for path in _paths(data):
            if path:
                own = json_type(_get(data, path))
                rows.extend((src, path, t) for t in JSON_TYPES if t != own)
    return tuple(rows)


def type_swap_count(examples: Sequence[Path] = EXAMPLE_FILES) -> int:
    """Cases of the exhaustive type-swap campaign (every key of every example with
    every other JSON type)."""
    return len(_swap_table(tuple(examples)))


def swap_type(src: Path, path: tuple, tname: str, value: Any = _NO_VALUE) -> dict:
    """The case: example ``src`` with the value at ``path`` replaced by the plain
    value of JSON type ``tname`` (or by ``value``)."""
    data = yaml.safe_load(src.read_text())
    parent = _get(data, path[:-1])
    parent[path[-1]] = json.loads(json.dumps(JSON_TYPES[tname])) if value is _NO_VALUE \
        else value
    fmt = "json" if src.suffix == ".json" else "yaml"
    text = json.dumps(data) if fmt == "json" else \
        yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=200)
    return {"name": f"{src.stem}: {key_path(path)} -> {tname}", "fmt": fmt,
            "data": text.encode("utf-8"), "path": key_path(path), "type": tname}


def type_swap_case(index: int, examples: Sequence[Path] = EXAMPLE_FILES) -> dict:
    """Case ``index`` of the exhaustive type-swap campaign (:func:`type_swap_count`)."""
    src, path, tname = _swap_table(tuple(examples))[index]
    case = swap_type(src, path, tname)
    case["index"] = index
    return case


def random_type_swap(ch, examples: Sequence[Path] = EXAMPLE_FILES) -> dict:
    """A random row of the type-swap campaign, with a plain or a derived value."""
    src = ch.choice(list(examples))
    data = yaml.safe_load(src.read_text())
    path = ch.choice([p for p in _paths(data) if p])
    value = _get(data, path)
    tname = ch.choice([t for t in JSON_TYPES if t != json_type(value)])
    return swap_type(src, path, tname, value_of_type(tname, value, ch))


def campaign_case(seed: int, index: int) -> dict:
    """Case ``index`` of the campaign of ``seed`` (independent of the other cases)."""
    case = make_case(RandomChooser(seed * 1_000_003 + index))
    case["index"] = index
    return case
