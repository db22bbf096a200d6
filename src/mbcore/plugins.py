"""Plugin manager: discovers plugins and keeps the table of element/algorithm types.

Plugins come from the entry-point group ``mbcore`` (the built-in ``mbplugins``
included — mbcore never imports it directly) and from :func:`register` at run
time.  :class:`Registry` maps ``(kind, name)`` to the class that implements it
and remembers which plugin provided it.
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import pluggy

from . import hookspecs
from .errors import PluginError

#: kind -> hook name
KINDS: dict[str, str] = {
    "constraint": "mbcore_constraint_types",
    "force": "mbcore_force_types",
    "integrator": "mbcore_integrators",
    "formulation": "mbcore_formulations",
    "analysis": "mbcore_analyses",
    "reporter": "mbcore_reporters",
}


@dataclass(frozen=True)
class Provider:
    """Who provides a type: plugin name, distribution and version."""

    plugin: str
    distribution: str = ""
    version: str = ""

    def __str__(self) -> str:
        if self.distribution:
            return f"{self.plugin} ({self.distribution} {self.version})".strip()
        return f"{self.plugin}" + (f" ({self.version})" if self.version else "")


class Registry:
    """Immutable snapshot of every type every registered plugin provides."""

    def __init__(self, pm: pluggy.PluginManager):
        dists = {id(p): d for p, d in pm.list_plugin_distinfo()}
        self._types: dict[str, dict[str, type]] = {k: {} for k in KINDS}
        self._providers: dict[str, dict[str, Provider]] = {k: {} for k in KINDS}
        for kind, hookname in KINDS.items():
            hook = getattr(pm.hook, hookname)
            for impl in hook.get_hookimpls():
                provider = _provider(pm, impl.plugin, dists.get(id(impl.plugin)))
                try:
                    classes = impl.function()
                except Exception as exc:  # a broken plugin names itself
                    raise PluginError(
                        f"plugin {provider} failed in {hookname}(): {exc!r}") from exc
                for cls in classes or ():
                    self._add(kind, cls, provider)

    def _add(self, kind: str, cls: type, provider: Provider) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {provider}: {kind} class {cls!r} has no string 'name'")
        name = _key(name, getattr(cls, "body_kind", "planar"))
        table = self._types[kind]
        if name in table:
            other = self._providers[kind][name]
            raise PluginError(
                f"{kind} type '{name}' is provided twice: by plugin {other} "
                f"({table[name].__module__}.{table[name].__qualname__}) and by plugin "
                f"{provider} ({cls.__module__}.{cls.__qualname__})")
        table[name] = cls
        self._providers[kind][name] = provider

    # -- queries ------------------------------------------------------------------
    # Constraint and force types are keyed by (name, body kind): a spatial
    # ``revolute`` and the planar ``revolute`` coexist.  Keys of planar types are
    # their names; others are "<kind>:<name>" (e.g. "spatial:revolute").
    def names(self, kind: str, body_kind: str | None = None) -> list[str]:
        """Type names of a registry kind; with ``body_kind``, the model-file names of
        the types for that body kind only."""
        if body_kind is None:
            return sorted(self._types[kind])
        return sorted(_split(k)[1] for k in self._types[kind] if _split(k)[0] == body_kind)

    def has(self, kind: str, name: str, body_kind: str = "planar") -> bool:
        return _key(name, body_kind) in self._types[kind]

    def get(self, kind: str, name: str, body_kind: str = "planar") -> type:
        """Class for ``name``; KeyError with close matches if unknown."""
        try:
            return self._types[kind][_key(name, body_kind)]
        except KeyError:
            raise KeyError(self.unknown_message(kind, name, body_kind)) from None

    def unknown_message(self, kind: str, name: Any, body_kind: str = "planar") -> str:
        known = self.names(kind, body_kind) if kind in ("constraint", "force") \
            else self.names(kind)
        if body_kind != "planar" and kind in ("constraint", "force"):
            kind = f"{body_kind} {kind}"
        close = difflib.get_close_matches(str(name), known, n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        return (f"unknown {kind} type {name!r}{hint} (installed: "
                f"{', '.join(known) if known else 'none'})")

    def provider(self, kind: str, name: str) -> Provider:
        return self._providers[kind][name]

    def rows(self) -> list[tuple[str, str, Provider, type]]:
        """(kind, name, provider, class) for every type, sorted."""
        out = []
        for kind in KINDS:
            for name in sorted(self._types[kind]):
                out.append((kind, name, self._providers[kind][name], self._types[kind][name]))
        return out


def _key(name: str, body_kind: str) -> str:
    return name if body_kind == "planar" else f"{body_kind}:{name}"


def _split(key: str) -> tuple[str, str]:
    kind, sep, name = key.partition(":")
    return (kind, name) if sep else ("planar", key)


def _provider(pm: pluggy.PluginManager, plugin: Any, dist: Any) -> Provider:
    name = pm.get_name(plugin) or getattr(plugin, "__name__", repr(plugin))
    if dist is not None:
        dname = getattr(dist, "project_name", None) or getattr(dist, "name", "")
        return Provider(name, str(dname), str(getattr(dist, "version", "")))
    return Provider(name, "", str(getattr(plugin, "__version__", "")))


class PluginManager:
    """The mbcore plugin manager (a thin layer over ``pluggy.PluginManager``)."""

    def __init__(self, load_entrypoints: bool = True):
        self._pm = pluggy.PluginManager("mbcore")
        self._pm.add_hookspecs(hookspecs)
        self._registry: Registry | None = None
        if load_entrypoints:
            self._pm.load_setuptools_entrypoints("mbcore")

    @property
    def pluggy(self) -> pluggy.PluginManager:
        return self._pm

    def register(self, plugin: Any, name: str | None = None) -> str:
        """Register a plugin object or module at run time; returns its name.

        The registry is rebuilt (and validated) at once, so a duplicate type name
        fails here, naming both plugins; the registration is then undone.
        """
        pname = self._pm.register(plugin, name=name)
        if pname is None:
            raise PluginError(f"plugin {name or plugin!r} is already registered or blocked")
        try:
            self._registry = Registry(self._pm)
        except Exception:
            self._pm.unregister(plugin)
            self._registry = None
            raise
        return pname

    def unregister(self, plugin: Any = None, name: str | None = None) -> None:
        self._pm.unregister(plugin=plugin, name=name)
        self._registry = None

    @property
    def registry(self) -> Registry:
        if self._registry is None:
            self._registry = Registry(self._pm)
        return self._registry

    def plugin_names(self) -> list[str]:
        return sorted(n for n, _ in self._pm.list_name_plugin())


_default: PluginManager | None = None


def get_plugin_manager() -> PluginManager:
    """The process-wide plugin manager (entry points loaded on first use)."""
    global _default
    if _default is None:
        _default = PluginManager()
    return _default


def registry() -> Registry:
    return get_plugin_manager().registry


def register(plugin: Any, name: str | None = None) -> str:
    """Register a plugin with the process-wide plugin manager."""
    return get_plugin_manager().register(plugin, name)
