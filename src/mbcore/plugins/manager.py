"""Plugin manager: discovers plugins and keeps the table of element/algorithm types.

Plugins come from the entry-point group ``mbcore`` (the built-in ``mbplugins``
included — mbcore never imports it directly) and from :func:`register` at run
time.  :class:`Registry` maps ``(kind, name)`` to the class that implements it
and remembers which plugin provided it.

Start-up is kept cheap: the entry points are read with a direct scan
of the ``*.dist-info`` / ``*.egg-info`` directories on ``sys.path``
(:func:`entry_points`; ``importlib.metadata`` only where that scan cannot see,
e.g. zipped paths), and a hook may return :class:`LazyType` references instead
of classes, imported on first use (the built-in plugins do so for every type).
"""
from __future__ import annotations

import contextlib
import difflib
import weakref
from dataclasses import dataclass
from typing import Any, Iterable

import pluggy

from . import contract, hookspecs
from ..errors import PluginError

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


class LazyType:
    """A type named by a plugin without importing it: ``LazyType("revolute",
    "pkg.module:Revolute")``.

    The registry keys it by ``name`` and ``body_kind`` at once and imports
    ``target`` (``module:qualname``) the first time the type is looked up with
    :meth:`Registry.get` (or listed with :meth:`Registry.rows`); the class found
    must carry the same ``name`` and ``body_kind``.
    """

    __slots__ = ("name", "target", "body_kind")

    def __init__(self, name: str, target: str, body_kind: str = "planar"):
        self.name = name
        self.target = target
        self.body_kind = body_kind

    def load(self) -> type:
        import importlib
        modname, _, qualname = self.target.partition(":")
        obj: Any = importlib.import_module(modname)
        for attr in qualname.split("."):
            obj = getattr(obj, attr)
        if getattr(obj, "name", None) != self.name or \
                getattr(obj, "body_kind", "planar") != self.body_kind:
            raise PluginError(
                f"lazy type {self.target} is registered as {self.name!r} "
                f"({self.body_kind}) but the class says {getattr(obj, 'name', None)!r} "
                f"({getattr(obj, 'body_kind', 'planar')})")
        return obj

    def __repr__(self) -> str:
        return f"LazyType({self.name!r}, {self.target!r}, {self.body_kind!r})"


class Registry:
    """Immutable snapshot of every type every registered plugin provides.

    Contract versions (:mod:`mbcore.plugins.contract`): a plugin whose ``mbcore_contract``
    the core cannot honour, and a type whose ``contract`` it cannot honour, are
    *refused*: their names stay known, and looking one up raises the refusal (a
    :class:`PluginError` naming the plugin, the type and both versions), so an
    outdated installed plugin breaks only the models that use it.  Classes are
    checked when the registry is built, :class:`LazyType` references when they are
    resolved (start-up stays cheap).  :meth:`refused` lists the refusals.
    """

    def __init__(self, pm: pluggy.PluginManager):
        dists = {id(p): d for p, d in pm.list_plugin_distinfo()}
        self._types: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
        self._providers: dict[str, dict[str, Provider]] = {k: {} for k in KINDS}
        self._declared: dict[str, dict[str, tuple[int, int]]] = {k: {} for k in KINDS}
        #: plugin name -> refusal message of plugins refused as a whole
        self.refused_plugins: dict[str, str] = {}
        for kind, hookname in KINDS.items():
            hook = getattr(pm.hook, hookname)
            for impl in hook.get_hookimpls():
                provider = _provider(pm, impl.plugin, dists.get(id(impl.plugin)))
                declared = contract.declared_contract(impl.plugin, f"plugin {provider}")
                if declared is not None and not contract.compatible(declared):
                    self.refused_plugins[provider.plugin] = contract.refusal(
                        provider, "the plugin", declared)
                try:
                    classes = impl.function()
                except Exception as exc:  # a broken plugin names itself
                    raise PluginError(
                        f"plugin {provider} failed in {hookname}(): {exc!r}") from exc
                for cls in classes or ():
                    self._add(kind, cls, provider, declared)

    def _add(self, kind: str, cls: Any, provider: Provider,
             declared: tuple[int, int] | None = None) -> None:
        name = getattr(cls, "name", None)
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin {provider}: {kind} class {cls!r} has no string 'name'")
        name = _key(name, getattr(cls, "body_kind", "planar"))
        entry = cls
        if provider.plugin in self.refused_plugins:
            entry = _Refused(cls, self.refused_plugins[provider.plugin])
        elif type(cls) is not LazyType:
            own = _type_contract(cls, kind, provider)
            if own is not None:
                declared = own
                if not contract.compatible(own):
                    entry = _Refused(cls, contract.refusal(
                        provider, f"{kind} type '{cls.name}'", own))
        table = self._types[kind]
        if name in table:
            other = self._providers[kind][name]
            if type(entry) is _Refused:         # a refused type claims no name
                return
            if type(table[name]) is not _Refused:
                raise PluginError(
                    f"{kind} type '{name}' is provided twice: by plugin {other} "
                    f"({_where(table[name])}) and by plugin {provider} ({_where(cls)})")
        table[name] = entry
        self._providers[kind][name] = provider
        if type(entry) is not LazyType and type(entry) is not _Refused:
            _note_provider(entry, provider)
        self._declared[kind][name] = declared or contract.CONTRACT_VERSION

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

    def has(self, kind: str, name: Any, body_kind: str = "planar") -> bool:
        """Whether type ``name`` is installed (False for a name that is no string:
        model data of the wrong type)."""
        return isinstance(name, str) and _key(name, body_kind) in self._types[kind]

    def get(self, kind: str, name: str, body_kind: str = "planar") -> type:
        """Class for ``name``; KeyError with close matches if unknown."""
        key = _key(name, body_kind)
        try:
            cls = self._types[kind][key]
        except KeyError:
            raise KeyError(self.unknown_message(kind, name, body_kind)) from None
        if type(cls) is not type:
            if type(cls) is LazyType:
                cls = self._resolve(kind, key)
            elif type(cls) is _Refused:
                raise PluginError(cls.message)
        return cls

    def _resolve(self, kind: str, key: str) -> type:
        lazy = self._types[kind][key]
        provider = self._providers[kind][key]
        try:
            cls = lazy.load()
        except PluginError as exc:
            raise PluginError(f"plugin {provider}: {exc}") from None
        except Exception as exc:  # a broken plugin names itself
            raise PluginError(f"plugin {provider} failed to import "
                              f"{kind} type {lazy.target}: {exc!r}") from exc
        own = _type_contract(cls, kind, provider)
        if own is not None:
            self._declared[kind][key] = own
            if not contract.compatible(own):
                refused = _Refused(cls, contract.refusal(provider, f"{kind} type '{cls.name}'",
                                                         own))
                self._types[kind][key] = refused
                raise PluginError(refused.message)
        self._types[kind][key] = cls
        _note_provider(cls, provider)
        return cls

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

    def contract(self, kind: str, name: str) -> tuple[int, int]:
        """The contract version a type was built for: its own ``contract`` if it
        differs from the core's, else its plugin's ``mbcore_contract``, else the
        core's (:mod:`mbcore.plugins.contract`)."""
        return self._declared[kind][name]

    def rows(self) -> list[tuple[str, str, Provider, type]]:
        """(kind, name, provider, class) for every accepted type, sorted (the refused
        ones: :meth:`refused`)."""
        out = []
        for kind in KINDS:
            for name in sorted(self._types[kind]):
                cls = self._types[kind][name]
                if type(cls) is LazyType:
                    try:
                        cls = self._resolve(kind, name)
                    except PluginError:
                        if type(self._types[kind][name]) is _Refused:
                            continue
                        raise
                if type(cls) is not _Refused:
                    out.append((kind, name, self._providers[kind][name], cls))
        return out

    def refused(self) -> list[tuple[str, str, Provider, str]]:
        """(kind, name, provider, message) of every type refused so far (lazy
        types are known to be refused once resolved, e.g. by :meth:`rows`)."""
        return [(kind, name, self._providers[kind][name], entry.message)
                for kind in KINDS for name, entry in sorted(self._types[kind].items())
                if type(entry) is _Refused]


#: class -> the plugin that provided it (the last registry that saw it), for naming the
#: plugin in errors raised inside its elements (:mod:`mbcore.plugins.errors`)
_PROVIDED: "weakref.WeakKeyDictionary[type, Provider]" = weakref.WeakKeyDictionary()


def _note_provider(cls: Any, provider: Provider) -> None:
    with contextlib.suppress(TypeError):   # not weak-referenceable: not a class
        _PROVIDED[cls] = provider


def provider_of(cls: type) -> Provider | None:
    """The plugin that provides ``cls`` (or, for a subclass not registered itself,
    its nearest registered base), as recorded by the registries built so far."""
    for klass in getattr(cls, "__mro__", (cls,)):
        prov = _PROVIDED.get(klass)
        if prov is not None:
            return prov
    return None


class _Refused:
    """Registry entry of a type refused for its contract version."""

    __slots__ = ("cls", "message")

    def __init__(self, cls: Any, message: str):
        self.cls = cls
        self.message = message


def _type_contract(cls: Any, kind: str, provider: Provider) -> tuple[int, int] | None:
    """A class's own ``contract``, if it differs from the core's (else None)."""
    value = getattr(cls, "contract", None)
    if value is None or value is contract.CONTRACT_VERSION:
        return None
    own = contract.parse(value, f"plugin {provider}: {kind} type "
                                f"'{getattr(cls, 'name', cls)}'")
    return None if own == contract.CONTRACT_VERSION else own


def _where(cls: Any) -> str:
    if type(cls) is _Refused:
        cls = cls.cls
    if type(cls) is LazyType:
        return cls.target.replace(":", ".")
    return f"{cls.__module__}.{cls.__qualname__}"


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
            load_entrypoints_into(self._pm, "mbcore")
            load_environment_plugins(self._pm)

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
            refusals = [msg for _, _, prov, msg in self._registry.refused()
                        if prov.plugin == pname]
            if refusals:                  # refused at once: the caller learns why
                raise PluginError(self._registry.refused_plugins.get(pname, refusals[0]))
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
        # pluggy lists a blocked name with the plugin None (the importlib.metadata
        # path of load_entrypoints_into blocks disabled entry points)
        return sorted(n for n, p in self._pm.list_name_plugin() if p is not None)


# -- entry points -------------------------------------------------------------------
# ``pluggy.PluginManager.load_setuptools_entrypoints`` imports importlib.metadata
# (~25 ms with its email/zipfile dependencies) and parses the metadata of every
# installed distribution; the first model run paid for both.  The scan below reads
# the same directories the way importlib.metadata's path finder does (same order,
# same entry-point syntax) but opens only ``entry_points.txt`` and, for a
# distribution that provides a plugin, its METADATA headers.  Paths it cannot
# read (zip files, eggs, distribution finders on sys.meta_path other than the
# standard path finder) fall back to importlib.metadata.

class _Metadata(dict):
    """Case-insensitive header lookup (like email.message.Message.__getitem__)."""

    def __getitem__(self, key: str) -> str:
        return dict.get(self, key.lower())   # type: ignore[return-value]

    def get(self, key: str, default: Any = None) -> Any:     # type: ignore[override]
        return dict.get(self, key.lower(), default)


class _Distribution:
    """The little of ``importlib.metadata.Distribution`` mbcore and pluggy use."""

    def __init__(self, path: str):
        self._path = path
        self._metadata: _Metadata | None = None

    def read_text(self, filename: str) -> str | None:
        import os
        try:
            with open(os.path.join(self._path, filename), encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError):
            return None

    @property
    def metadata(self) -> _Metadata:
        if self._metadata is None:
            text = self.read_text("METADATA") or self.read_text("PKG-INFO") or ""
            md = _Metadata()
            key = None
            for line in text.splitlines():
                if not line.strip():
                    break                      # end of the headers
                if line[:1] in (" ", "\t") and key is not None:
                    continue                   # folded continuation (not Name/Version)
                key, sep, value = line.partition(":")
                if sep:
                    key = key.strip().lower()
                    md.setdefault(key, value.strip())
            self._metadata = md
        return self._metadata

    @property
    def name(self) -> str:
        return self.metadata["name"]

    @property
    def version(self) -> str:
        return self.metadata["version"]


def _entry_point_text_pairs(text: str):
    """(group, name, value) of an ``entry_points.txt`` (importlib.metadata's syntax)."""
    group = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
            continue
        if group is None:
            continue
        name, _, value = line.partition("=")
        yield group, name.strip(), value.strip()


def _normalize(name: str) -> str:
    import re
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _path_metadata_finder(finder: Any) -> bool:
    """The ``importlib_metadata`` backport's finder (installed on ``sys.meta_path``
    when the backport is imported, e.g. by Dask): it searches ``sys.path`` as the
    standard PathFinder does (whose search the backport switches off), so the scan
    below still finds what importlib.metadata finds."""
    cls = type(finder)
    return cls.__name__ == "MetadataPathFinder" and \
        cls.__module__.split(".")[0] == "importlib_metadata"


def entry_points(group: str) -> list[tuple[str, str, Any]] | None:
    """``(name, value, distribution)`` of every entry point of ``group``, in the order
    of ``importlib.metadata.distributions()``; None where only importlib.metadata
    can tell (see above)."""
    import os
    import sys
    from importlib.machinery import PathFinder
    for finder in sys.meta_path:
        if finder is not PathFinder and hasattr(finder, "find_distributions") and \
                not _path_metadata_finder(finder):
            return None
    out: list[tuple[str, str, Any]] = []
    for root in sys.path:
        if not isinstance(root, str):
            return None
        try:
            children = os.listdir(root or ".")
        except OSError:
            if os.path.isfile(root):           # a zip archive on sys.path
                return None
            continue
        if os.path.basename(root).lower().endswith(".egg"):
            return None
        infos: dict[str, list[str]] = {}
        for child in children:
            low = child.lower()
            if low.endswith((".dist-info", ".egg-info")):
                key = _normalize(low.rpartition(".")[0].partition("-")[0])
                infos.setdefault(key, []).append(os.path.join(root, child))
        for paths in infos.values():
            for path in paths:
                if not os.path.isdir(path):
                    continue
                dist = _Distribution(path)
                text = dist.read_text("entry_points.txt")
                if not text or f"[{group}]" not in text:
                    continue
                for g, name, value in _entry_point_text_pairs(text):
                    if g == group:
                        out.append((name, value, dist))
    return out


def distribution_version(name: str) -> str | None:
    """Version of the installed distribution ``name`` (the first on sys.path, as
    ``importlib.metadata.version``), or None if the scan above cannot find it."""
    return distribution_versions([name])[name]


def distribution_versions(names: Iterable[str]) -> dict[str, str | None]:
    """:func:`distribution_version` of several distributions in one pass over
    sys.path (each directory listed once)."""
    import os
    import sys
    want = {_normalize(n): n for n in names}
    out: dict[str, str | None] = dict.fromkeys(want.values())
    for root in sys.path:
        if not want:
            break
        if not isinstance(root, str):
            break
        try:
            children = os.listdir(root or ".")
        except OSError:
            continue
        for child in children:
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            key = _normalize(low.rpartition(".")[0].partition("-")[0])
            if key in want:
                path = os.path.join(root, child)
                if os.path.isdir(path):
                    out[want.pop(key)] = _Distribution(path).metadata["version"] or None
    return out


def _load_entry_point(value: str) -> Any:
    import functools
    import importlib
    import re
    match = re.match(r"(?P<module>[\w.]+)\s*(:\s*(?P<attr>[\w.]+)\s*)?((?P<extras>\[.*\])\s*)?$",
                     value)
    if match is None:
        raise ValueError(f"invalid entry point {value!r}")
    module = importlib.import_module(match.group("module"))
    attrs = filter(None, (match.group("attr") or "").split("."))
    return functools.reduce(getattr, attrs, module)


def disabled_plugins() -> frozenset[str]:
    """Names in the environment variable ``MBCORE_DISABLE_PLUGINS`` (comma or space
    separated): an entry point is not loaded when its name, the top-level package of
    its module or its distribution's name is listed (``MBCORE_DISABLE_PLUGINS=
    mbplugins`` runs the core without its built-in plugins)."""
    import os
    import re
    raw = os.environ.get("MBCORE_DISABLE_PLUGINS", "")
    return frozenset(_normalize(n) for n in re.split(r"[,\s]+", raw) if n)


def _is_disabled(off: frozenset[str], name: str, value: str, dist: Any) -> bool:
    if not off:
        return False
    dname = ""
    if dist is not None:
        try:
            dname = dist.metadata["name"] or ""
        except Exception:               # pragma: no cover - unreadable metadata
            dname = ""
    top = value.split(":")[0].strip().split(".")[0]
    return bool({_normalize(name), _normalize(top), _normalize(dname)} & off)


def load_entrypoints_into(pm: pluggy.PluginManager, group: str) -> int:
    """``pm.load_setuptools_entrypoints(group)`` without importlib.metadata where the
    scan of :func:`entry_points` suffices; returns the number of plugins loaded.
    Entry points named by ``MBCORE_DISABLE_PLUGINS`` (:func:`disabled_plugins`) are
    skipped."""
    off = disabled_plugins()
    eps = entry_points(group)
    if eps is None or not hasattr(pm, "_plugin_distinfo"):
        if off:
            import importlib.metadata as im
            for ep in im.entry_points(group=group):
                if _is_disabled(off, ep.name, ep.value, ep.dist):
                    pm.set_blocked(ep.name)
        return pm.load_setuptools_entrypoints(group)
    count = 0
    for name, value, dist in eps:
        if pm.has_plugin(name) or pm.is_blocked(name) or _is_disabled(off, name, value, dist):
            continue
        plugin = _load_entry_point(value)
        pm.register(plugin, name=name)
        pm._plugin_distinfo.append((plugin, dist))   # as load_setuptools_entrypoints
        count += 1
    return count


def load_environment_plugins(pm: pluggy.PluginManager) -> int:
    """Register the plugins named in the environment variable ``MBCORE_PLUGINS``
    (comma or space separated ``module`` or ``module:attribute``, imported from
    ``sys.path``): plugins used without installing a distribution, e.g. a test's
    stub set.  Each is registered under its own text; returns how many."""
    import os
    import re
    count = 0
    for value in re.split(r"[,\s]+", os.environ.get("MBCORE_PLUGINS", "")):
        if not value or pm.has_plugin(value):
            continue
        try:
            plugin = _load_entry_point(value)
        except Exception as exc:
            raise PluginError(f"MBCORE_PLUGINS: plugin {value!r} cannot be loaded: "
                              f"{exc!r}") from exc
        pm.register(plugin, name=value)
        count += 1
    return count


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
