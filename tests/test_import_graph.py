"""The import graph of src/ has no circles, and the core never imports the built-in
plugins.

Every import statement counts, at module level or inside a function (a lazy import
is still a dependency): ``import a.b``, ``from a import b`` (``b`` a module: an edge
to it, else to ``a``) and relative imports, resolved to the modules of src/mbcore
and src/mbplugins.  A package's ``__init__`` is a module of its own.  The strongly
connected components of that graph must all be single modules; the message lists
each circle with the lines that make it.
"""
from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = ("mbcore", "mbplugins")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((SRC / pkg).rglob("*.py")):
            parts = list(path.relative_to(SRC).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(parts)] = path
    return mods


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The longest known module that ``name`` is or lies in."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in mods:
            return cand
        parts.pop()
    return None


def import_graph() -> dict[str, dict[str, list[int]]]:
    """module -> {imported module: [line numbers]} within src/mbcore and src/mbplugins."""
    mods = _modules()
    graph: dict[str, dict[str, list[int]]] = {m: defaultdict(list) for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        base = mod.split(".") if _is_package(path) else mod.split(".")[:-1]
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    up = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                    origin = ".".join(up + ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in mods else origin
                           for a in node.names]
            for t in targets:
                dep = _resolve(t, mods)
                if dep is not None and dep != mod:
                    graph[mod][dep].append(node.lineno)
    return graph


def _components(graph: dict[str, dict[str, list[int]]]) -> list[list[str]]:
    """Tarjan's strongly connected components."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_graph_is_read():
    g = import_graph()
    assert "mbcore.model.model" in g["mbcore.analysis.runner"]
    assert "mbcore.errors" in g["mbcore.model.model"]
    assert "mbcore.system.system" in g["mbcore.model.model"]     # a lazy import counts


#: the layers of src/mbcore from the bottom up (docs/architecture.md): a module
#: imports from its own layer and the layers below, never above
LAYERS = ("_ext", "errors", "_version", "_moved", "plugins", "elements", "system",
          "solve", "model", "integrate", "results", "analysis", "studies", "cli")


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "mbcore" and len(parts) > 1 else None


def test_every_module_lies_in_a_layer():
    stray = [m for m in import_graph() if m.startswith("mbcore.")
             and _layer(m) not in LAYERS]
    assert not stray, f"modules outside the layers {LAYERS}: {stray}"


def test_imports_go_down_the_layers():
    g = import_graph()
    up = []
    for mod, deps in g.items():
        a = _layer(mod)
        if a is None:
            continue
        for dep, lines in deps.items():
            b = _layer(dep)
            if dep == "mbcore" or (b is not None and LAYERS.index(b) > LAYERS.index(a)):
                up.append(f"{mod} (line {lines[0]}) imports {dep}")
    assert not up, "imports that go up the layers:\n" + "\n".join(sorted(up))


def test_no_import_circles():
    g = import_graph()
    circles = [c for c in _components(g) if len(c) > 1]
    lines = []
    for c in circles:
        lines.append("circle: " + ", ".join(c))
        for a in c:
            for b, where in sorted(g[a].items()):
                if b in c:
                    lines.append(f"  {a} -> {b} (line {', '.join(map(str, where))})")
    assert not circles, "\n".join(lines)


def test_the_core_never_imports_the_builtin_plugins():
    g = import_graph()
    bad = [(a, b, w) for a, deps in g.items() if a.startswith("mbcore")
           for b, w in deps.items() if b.startswith("mbplugins")]
    assert not bad, bad
