"""Sphinx extension: the model-file reference, generated from the plugin registry.

When the build starts, every type the installed plugins provide (constraint and
force types with their ``params``, analyses and formulations with their
``settings_schema``, integrators with their ``options``, reporters) is written to
``docs/_generated/reference/*.md``: the reference is the registry, so it cannot
drift from the code.  Run as a script to write the pages without Sphinx::

    python docs/_ext/mbcore_reference.py OUTDIR
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

OUTDIR = Path(__file__).resolve().parents[1] / "_generated" / "reference"

#: registry kind -> (page, title, introduction)
PAGES = {
    "constraint": ("constraints", "Joints and drivers",
                   "Every constraint type (joints and drivers) of `joints:` and `drivers:`, "
                   "with the keys of its entry besides `name` and `type`. Planar types "
                   "apply to `dimensions: 2` models, spatial ones to `dimensions: 3`. "
                   "Formulas and reactions: [constraints.md](../../constraints.md)."),
    "force": ("forces", "Force elements",
              "Every force type of `forces:`, with the keys of its entry besides "
              "`name` and `type`."),
    "analysis": ("analyses", "Analyses",
                 "The values of `settings.analysis` and the settings each one "
                 "understands (besides `analysis`, `output` and `kernels`). "
                 "Concepts: [analyses.md](../../analyses.md)."),
    "formulation": ("formulations", "Formulations of the dynamic analysis",
                    "The values of `settings.formulation` (dynamic analysis) and "
                    "the keys of `settings.formulation_options`."),
    "integrator": ("integrators", "Integrators",
                   "The values of `settings.integrator` (dynamic analysis) and the "
                   "keys of `settings.integrator_options`. Concepts: "
                   "[integrators.md](../../integrators.md)."),
    "reporter": ("reporters", "Reporters",
                 "Where results go (the Python API picks them; see "
                 "[results.md](../../results.md))."),
}

_MISSING_REPR = "—"


def _cell(text: Any) -> str:
    """One Markdown table cell: a single line, pipes escaped."""
    s = " ".join(str(text).split())
    return s.replace("|", "\\|") if s else " "


def _code(value: Any) -> str:
    s = repr(value) if not isinstance(value, str) else f'"{value}"'
    if isinstance(value, bool):
        s = "true" if value else "false"
    elif value is None:
        s = "null"
    elif isinstance(value, (tuple, list)):
        s = "[" + ", ".join(_code(v).strip("`") for v in value) + "]"
    s = s.replace("`", "'")
    return f"`{s}`"


def _param_kind(p: Any) -> str:
    kind = f"`{p.kind}`"
    if getattr(p, "choices", ()):
        kind += ": " + ", ".join(f"`{c}`" for c in p.choices)
    if getattr(p, "positive", False):
        kind += " (> 0)"
    if getattr(p, "on", ""):
        kind += f" (on `{p.on}`)"
    return kind


def _param_default(p: Any) -> str:
    if p.is_required():
        return "required"
    d = p.default_value()
    if d is None:
        return "computed" if p.kind in ("vec2", "vec3", "number") else "none"
    return _code(d)


def param_table(params: Mapping[str, Any]) -> list[str]:
    """The Markdown table of a ``key -> Param`` schema."""
    if not params:
        return ["No parameters.", ""]
    out = ["| key | kind | default | description |", "|---|---|---|---|"]
    for key, p in params.items():
        out.append(f"| `{key}` | {_cell(_param_kind(p))} | {_cell(_param_default(p))} "
                   f"| {_cell(p.doc)} |")
    return out + [""]


def option_table(options: Mapping[str, Any]) -> list[str]:
    """The Markdown table of an integrator's ``name -> Option``."""
    if not options:
        return ["No options.", ""]
    out = ["| option | default | description |", "|---|---|---|"]
    for key, o in options.items():
        default = "required" if o.required else _code(o.default)
        out.append(f"| `{key}` | {_cell(default)} | {_cell(o.doc)} |")
    return out + [""]


def _where(cls: type) -> str:
    return f"`{cls.__module__}.{cls.__qualname__}`"


def _split(key: str) -> tuple[str, str]:
    body_kind, sep, name = key.partition(":")
    return (body_kind, name) if sep else ("planar", key)


def _entries(rows: Iterable[tuple], kind: str) -> list[tuple[str, str, Any, type]]:
    """(body kind, name, provider, class) of one registry kind: planar first."""
    out = [(*_split(name), prov, cls) for k, name, prov, cls in rows if k == kind]
    order = {"planar": 0, "spatial": 1}
    return sorted(out, key=lambda e: (order.get(e[0], 2), e[0], e[1]))


def _header(cls: type, prov: Any) -> list[str]:
    desc = " ".join((getattr(cls, "description", "") or "").split())
    lines = [desc, ""] if desc else []
    return lines + [f"Plugin `{prov}`, class {_where(cls)}.", ""]


def page(kind: str, rows: list[tuple]) -> str:
    slug, title, intro = PAGES[kind]
    lines = [f"(ref-{slug})=", f"# {title}", "", intro, ""]
    entries = _entries(rows, kind)
    body_kinds = sorted({e[0] for e in entries}, key=lambda b: (b != "planar", b))
    by_body = kind in ("constraint", "force")
    for bk in body_kinds:
        if by_body:
            lines += [f"## {bk.capitalize()} {title.lower()}", ""]
        for body_kind, name, prov, cls in entries:
            if body_kind != bk:
                continue
            label = f"ref-{kind}-{body_kind}-{name}" if by_body else f"ref-{kind}-{name}"
            suffix = f" ({body_kind})" if by_body else ""
            hl = "###" if by_body else "##"
            lines += [f"({label})=", f"{hl} `{name}`{suffix}", ""]
            lines += _header(cls, prov)
            if kind in ("constraint", "force"):
                lines += param_table(getattr(cls, "params", {}) or {})
            elif kind in ("analysis", "formulation"):
                lines += param_table(getattr(cls, "settings_schema", {}) or {})
            elif kind == "integrator":
                facts = [f"order {getattr(cls, 'order', '?')}",
                         "adaptive" if getattr(cls, "adaptive", False) else "fixed step",
                         "implicit" if getattr(cls, "implicit", False) else "explicit"]
                if getattr(cls, "variable_order", False):
                    facts.append("variable order")
                lines += [", ".join(facts).capitalize() + ".", ""]
                lines += option_table(getattr(cls, "options", {}) or {})
    return "\n".join(lines).rstrip() + "\n"


def _layout_section() -> list[str]:
    """The keys the model loader accepts at each level (``mbcore.model``)."""
    from mbcore import model as M
    levels = [("top level", "TOP_KEYS"), ("`bodies[i]` (planar rigid body)", "BODY_KEYS"),
              ("`bodies[i]` with `kind: particle`", "PARTICLE_KEYS"),
              ("`bodies[i]` (spatial rigid body, `dimensions: 3`)", "SPATIAL_BODY_KEYS"),
              ("`points[i]`", "POINT_KEYS")]
    out = ["## File structure", "",
           "The keys accepted at each level of a model file (any other key is an error "
           "that names its path); `joints[i]`, `drivers[i]` and `forces[i]` take `name`, "
           "`type` and the keys of their type below.", "",
           "| level | keys |", "|---|---|"]
    for level, const in levels:
        keys = getattr(M, const, None)
        if keys:
            out.append(f"| {level} | {', '.join(f'`{k}`' for k in keys)} |")
    return out + [""]


def index_page(rows: list[tuple]) -> str:
    n = {k: sum(1 for r in rows if r[0] == k) for k in PAGES}
    lines = ["# Model-file reference", "",
             "Generated from the plugin registry (`mbcore.plugins.registry()`) when the "
             "documentation is built: every type and every parameter below is what the "
             "installed code validates (`mbcore plugins` lists the same types). The "
             "layout of a model file (bodies, points, units, settings) is described in "
             "[model-format.md](../../model-format.md).", ""]
    lines += _layout_section()
    lines += ["## Types", "", "| page | types |", "|---|---|"]
    for kind, (slug, title, _) in PAGES.items():
        lines.append(f"| [{title}]({slug}.md) | {n[kind]} |")
    lines += ["", "```{toctree}", ":hidden:", ""]
    lines += [slug for slug, _, _ in PAGES.values()]
    lines += ["```", ""]
    return "\n".join(lines)


def generate(outdir: Path = OUTDIR) -> list[Path]:
    """Write the reference pages; return their paths (unchanged files are not rewritten,
    so that Sphinx does not rebuild them)."""
    from mbcore.plugins import PluginManager
    rows = PluginManager().registry.rows()
    outdir.mkdir(parents=True, exist_ok=True)
    texts = {"index.md": index_page(rows)}
    for kind, (slug, _, _) in PAGES.items():
        texts[f"{slug}.md"] = page(kind, rows)
    written = []
    for fname, text in texts.items():
        path = outdir / fname
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def _on_builder_inited(app) -> None:
    generate(Path(app.srcdir) / "_generated" / "reference")


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for p in generate(Path(sys.argv[1]) if len(sys.argv) > 1 else OUTDIR):
        print(p)
