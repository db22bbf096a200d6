"""``mbcore types [TYPE]``: the installed types (joints, forces, integrators,
formulations, analyses, reporters), and for one type its parameters with their
kind, default and meaning — what a model file may write under that type."""
from __future__ import annotations

import argparse
import difflib
import json
import textwrap
from typing import Any

from ..errors import ModelError

TYPES_EXAMPLES = """\
examples:
  mbcore types                      every installed type, by kind
  mbcore types tsda                 the parameters of the planar spring-damper
  mbcore types spatial:revolute     a spatial joint
  mbcore types dopri5               an integrator's options (settings.integrator_options)
  mbcore types dynamic --json       machine-readable

exit status: 0 ok; 2 unknown type"""

_MISSING_MARK = "required"


def add_parser(sub, parents=()) -> None:
    """Add the ``types`` subcommand to ``sub``."""
    p = sub.add_parser("types", parents=list(parents),
                       help="list the installed types, or one type's parameters",
                       description="Without TYPE: every installed type by kind, with its "
                                   "one-line description.  With TYPE: its parameters "
                                   "(model-file keys), their kind, default and meaning.",
                       epilog=TYPES_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("type", nargs="?", help="a type name, e.g. tsda, spatial:spherical, "
                                           "rk4, di, dynamic")
    p.add_argument("--kind", help="only this kind (constraint, force, integrator, "
                                  "formulation, analysis, reporter)")
    p.add_argument("--json", action="store_true", help="print JSON")


def _parameters(kind: str, cls: Any) -> list[dict]:
    """The parameters of one type: element ``params``, an integrator's ``options``,
    a formulation's or analysis' ``settings_schema``."""
    table = (getattr(cls, "options", None) if kind == "integrator"
             else getattr(cls, "params", None) or getattr(cls, "settings_schema", None))
    rows = []
    for name, p in (table or {}).items():
        if kind == "integrator":        # mbcore.integrate.base.Option
            required = bool(getattr(p, "required", False))
            default = None if required else p.default
            rows.append({"name": name, "kind": "", "required": required,
                         "default": default, "doc": p.doc})
        else:                           # mbcore.elements.schema.Param
            required = p.is_required()
            default = None if required else p.default_value()
            choices = list(getattr(p, "choices", ()) or ())
            doc = p.doc + (f" (one of: {', '.join(choices)})" if choices else "")
            unit = getattr(p, "unit", "")
            rows.append({"name": name, "kind": p.kind, "required": required,
                         "default": default, "doc": doc + (f" [{unit}]" if unit else ""),
                         "unit": unit})
    return rows


def _value(v: Any) -> Any:
    """A default as JSON-ready data."""
    if isinstance(v, tuple):
        return [_value(x) for x in v]
    if isinstance(v, (str, int, float, bool, list, dict)) or v is None:
        return v
    return repr(v)


def _show(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, (tuple, list)):
        return "[" + ", ".join(_show(x) for x in v) + "]"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def cmd_types(args) -> int:
    """List the types, or describe one."""
    from ..plugins.manager import get_plugin_manager
    reg = get_plugin_manager().registry
    rows = [(kind, name, str(prov), cls) for kind, name, prov, cls in reg.rows()
            if args.kind is None or kind == args.kind]
    if args.kind is not None and not rows:
        kinds = sorted({k for k, *_ in reg.rows()})
        raise ModelError("--kind", f"no kind '{args.kind}' (kinds: {', '.join(kinds)})")
    if not args.type:
        if args.json:
            print(json.dumps([{"kind": k, "type": n, "plugin": p,
                               "description": (getattr(c, "description", "") or "").strip()}
                              for k, n, p, c in rows], indent=2))
            return 0
        last = None
        for kind, name, _, cls in rows:
            if kind != last:
                print(f"{'' if last is None else chr(10)}{kind}:")
                last = kind
            desc = (getattr(cls, "description", "") or "").strip()
            print(f"  {name:28s} {desc}")
        print("\nmbcore types TYPE lists a type's parameters.")
        return 0
    found = [r for r in rows if r[1] == args.type]
    if not found:
        names = sorted({r[1] for r in rows})
        close = difflib.get_close_matches(args.type, names, n=3)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise ModelError("type", f"no installed type '{args.type}'{hint} (mbcore types "
                                 f"lists them)")
    out = []
    for kind, name, prov, cls in found:
        out.append({"kind": kind, "type": name, "plugin": prov,
                    "description": (getattr(cls, "description", "") or "").strip(),
                    "parameters": [{**p, "default": _value(p["default"])}
                                   for p in _parameters(kind, cls)]})
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    for i, t in enumerate(out):
        if i:
            print()
        print(f"{t['kind']} {t['type']} ({t['plugin']})")
        if t["description"]:
            print(textwrap.fill(t["description"], 88, initial_indent="  ",
                                subsequent_indent="  "))
        params = t["parameters"]
        if not params:
            print("  no parameters")
            continue
        w = max(9, max(len(p["name"]) for p in params))
        wk = max(4, max(len(p["kind"]) for p in params))
        wd = min(24, max(7, max(len(_MISSING_MARK if p["required"] else _show(p["default"]))
                                for p in params)))
        print(f"  {'parameter':{w}}  {'kind':{wk}}  {'default':{wd}}  meaning")
        for p in params:
            d = _MISSING_MARK if p["required"] else _show(p["default"])
            print(f"  {p['name']:{w}}  {p['kind']:{wk}}  {d:{wd}}  {p['doc']}")
    return 0
