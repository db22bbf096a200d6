"""The compiled plugin tier: a force or constraint type's C kernel, loaded and checked.

A third-party force type (:class:`mbcore.elements.ForceType`) or constraint type
(:class:`mbcore.elements.ConstraintType`) names its compiled kernel in ``c_kernel =
"package.module:attribute"``: a PyCapsule named ``"mbcore.force_kernel"`` around a
``mbcore_force_kernel`` struct, or ``"mbcore.constraint_kernel"`` around a
``mbcore_constraint_kernel``, of the C contract ``mbcore_plugin.h``
(``mbcore.get_include()``; docs/plugins.md "Compiled tier").  On the compiled
backend the System (``mbcore.system.backend``) calls
:func:`load_force_kernel` / :func:`load_constraint_kernel` for such a group; the
kernel then runs inside the compiled force evaluator (``mbcore._ext._forces``) or
constraint evaluator (``mbcore._ext._planar``), hence in the compiled right-hand
sides, the compiled kinematic step and the compiled loops, without Python.

The checks (one code path for both, :func:`_checked`), each a
:class:`~mbcore.errors.PluginError` naming the type, the kernel's location and
the distribution that provides the type: the attribute resolves to a capsule with
the right name; its ``abi_version`` is one this mbcore loads (from
:func:`abi_min_version` to :func:`abi_version`; else: rebuild the plugin against the
installed mbcore); its body kind and sizes (``n_bodies``, ``n_par``, ``n_fun``;
constraints also ``equations``, ``holonomic`` and the artificial coordinates
``extra``, which need the direct layout of ABI version 2) equal the Python
declaration; the required functions are set (``force``; ``phi``, ``jacobian``,
``gamma``).
"""
from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from typing import Any

from ..errors import PluginError

#: the PyCapsule name of a force kernel (MBCORE_FORCE_CAPSULE)
FORCE_CAPSULE = "mbcore.force_kernel"
#: the PyCapsule name of a constraint kernel (MBCORE_CONSTRAINT_CAPSULE)
CONSTRAINT_CAPSULE = "mbcore.constraint_kernel"
#: MBCORE_BODY_PLANAR / MBCORE_BODY_SPATIAL -> the ForceType.body_kind
BODY_KINDS = {0: "planar", 1: "spatial"}


@dataclass(frozen=True)
class ForceKernel:
    """A validated compiled kernel of one force type."""

    capsule: Any              # the PyCapsule (kept alive by the evaluators)
    source: str               # "package.module:attribute", or a description
    name: str                 # the kernel's own name (messages)
    has_jacobian: bool        # analytic K, C blocks (else forward differences)
    reason: str               # why an element fails (error messages)


@dataclass(frozen=True)
class ConstraintKernel:
    """A validated compiled kernel of one constraint type."""

    capsule: Any              # the PyCapsule (kept alive by the evaluator)
    source: str               # "package.module:attribute", or a description
    name: str                 # the kernel's own name (messages)
    has_nu: bool              # False: scleronomic (nu = 0)
    reason: str               # why an element fails (error messages)


def abi_version() -> int:
    """The C ABI version this mbcore implements (``MBCORE_ABI_VERSION``)."""
    from .._ext import _forces
    return int(_forces.ABI_VERSION)


def abi_min_version() -> int:
    """The oldest C ABI version this mbcore still loads (``MBCORE_ABI_MIN_VERSION``)."""
    from .._ext import _forces
    return int(_forces.ABI_MIN_VERSION)


def _owner(ftype: Any) -> str:
    """' (distribution version)' of the package defining the type, or ''.  Only
    for messages: the look-up scans the installed distributions."""
    cls = ftype if isinstance(ftype, type) else type(ftype)
    top = cls.__module__.split(".")[0]
    with contextlib.suppress(Exception):     # a broken environment: name less
        from importlib import metadata
        dists = metadata.packages_distributions().get(top) or []
        if dists:
            return f" (distribution {dists[0]} {metadata.version(dists[0])})"
    return f" (module {top})"


def _resolve(spec: Any, where: str) -> tuple[Any, str]:
    """The capsule object and a description of where it comes from."""
    if not isinstance(spec, str):
        return spec, "<capsule object>"
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise PluginError(f"{where}: c_kernel = {spec!r} is not 'package.module:attribute'")
    try:
        module = importlib.import_module(mod)
    except ImportError as exc:
        raise PluginError(f"{where}: its compiled kernel {spec!r} cannot be imported "
                          f"({exc}); is the plugin built and installed?") from exc
    try:
        return getattr(module, attr), spec
    except AttributeError:
        raise PluginError(f"{where}: module {mod!r} has no attribute {attr!r} "
                          f"(c_kernel = {spec!r})") from None


def _checked(etype: Any, family: str, capsule_name: str, info_of, declared: dict,
             required: tuple[str, ...], struct: str) -> tuple[Any, str, dict]:
    """The capsule of ``etype.c_kernel`` checked against the type's declaration
    (both tiers): capsule name, ABI version, the ``declared`` fields (kernel key ->
    (label, the type's value); ``body_kind`` compared by name) and the ``required``
    function pointers.  Returns (capsule, source, info)."""
    name = getattr(etype, "name", "") or getattr(etype, "__name__", "?")
    where = f"{family} type '{name}'"
    capsule, source = _resolve(getattr(etype, "c_kernel", None), where)
    info = info_of(capsule)

    def refuse(what: str, named: bool = True) -> PluginError:
        label = f" ('{info['name']}')" if named else ""
        return PluginError(f"{where}{_owner(etype)}: compiled kernel {source}{label} {what}")

    if info is None or info["capsule_name"] != capsule_name:
        got = ("not a PyCapsule" if info is None else
               f"a PyCapsule named {info['capsule_name']!r}")
        raise refuse(f"is {got}, expected a PyCapsule named {capsule_name!r}", False)
    mine, oldest = abi_version(), abi_min_version()
    if not oldest <= info["abi_version"] <= mine:
        from .._version import __version__
        raise refuse(
            f"was built for mbcore C ABI version {info['abi_version']}; the installed "
            f"mbcore {__version__} implements ABI versions {oldest} to {mine}. Rebuild the "
            f"plugin against the installed mbcore (its build takes the header from "
            f"mbcore.get_include()), e.g. pip install --no-build-isolation "
            f"--force-reinstall of the plugin's source", False)
    got = dict(info, body_kind=BODY_KINDS.get(info["body_kind"],
                                              f"unknown body kind {info['body_kind']}"))
    diff = ", ".join(f"{label} {got[key]!r} (type: {value!r})"
                     for key, (label, value) in declared.items() if got[key] != value)
    if diff:
        raise refuse(f"does not match the type's declaration: {diff}")
    for fn in required:
        if not info[fn]:
            raise refuse(f"has no {fn} function ({struct}.{fn} is NULL)")
    return capsule, source, info


#: loaded kernels by (type, c_kernel, declaration): a model compiles each type's
#: kernel once per process (the checks cost ~10 µs per group); the key keeps the
#: capsule and the class alive, so an identity is never reused
_LOADED: dict[tuple, Any] = {}


def _cached(family: str, etype: Any, declared: tuple, load) -> Any:
    cls = etype if isinstance(etype, type) else type(etype)
    ck = getattr(etype, "c_kernel", None)
    try:
        key = (family, cls, ck, declared)
        hash(key)
    except TypeError:                   # an unhashable c_kernel: no cache
        return load()
    hit = _LOADED.get(key)
    if hit is None:
        if len(_LOADED) > 512:
            _LOADED.clear()
        hit = _LOADED[key] = load()
    return hit


def fixed_bodies(ftype: Any) -> int:
    """The bodies every element of force type ``ftype`` has: its body keys, less
    the body list of a :attr:`~mbcore.elements.ForceType.body_list` type."""
    return len(ftype.bodies) - (1 if getattr(ftype, "body_list", None) else 0)


def load_force_kernel(ftype: Any) -> ForceKernel:
    """Load and check the ``c_kernel`` of force type ``ftype`` (class or instance)
    against its Python declaration; raises :class:`PluginError` (see the module
    docstring)."""
    declared = (getattr(ftype, "body_kind", "planar"), fixed_bodies(ftype), ftype.n_par,
                ftype.n_fun)
    return _cached("force", ftype, declared, lambda: _load_force_kernel(ftype))


def _load_force_kernel(ftype: Any) -> ForceKernel:
    from .._ext import _forces
    declared = {"body_kind": ("body kind", getattr(ftype, "body_kind", "planar")),
                "n_bodies": ("n_bodies", fixed_bodies(ftype)),
                "n_par": ("n_par", ftype.n_par), "n_fun": ("n_fun", ftype.n_fun)}
    capsule, source, info = _checked(ftype, "force", FORCE_CAPSULE, _forces.kernel_info,
                                     declared, ("force",), "mbcore_force_kernel")
    return ForceKernel(capsule=capsule, source=source, name=info["name"] or source,
                       has_jacobian=bool(info["jacobian"]),
                       reason=info["reason"] or "the compiled kernel could not evaluate "
                                                "the element")


def load_constraint_kernel(ctype: Any) -> ConstraintKernel:
    """Load and check the ``c_kernel`` of constraint type ``ctype`` (class or
    instance) against its Python declaration (body kind, ``equations``,
    ``bodies``, ``n_par``, ``n_fun``, ``holonomic``; ``phi``, ``jacobian`` and
    ``gamma`` set; artificial coordinates ``extra`` as many as the kernel's
    ``n_extra``, which only the direct layout of ABI version 2 has); raises
    :class:`PluginError`."""
    from .contract import all_rows_holonomic
    declared = (getattr(ctype, "body_kind", "planar"), ctype.equations, len(ctype.bodies),
                ctype.n_par, ctype.n_fun, all_rows_holonomic(ctype),
                tuple(getattr(ctype, "extra", ())))
    return _cached("constraint", ctype, declared, lambda: _load_constraint_kernel(ctype))


def _load_constraint_kernel(ctype: Any) -> ConstraintKernel:
    from .._ext import _planar
    from .contract import all_rows_holonomic
    declared = {"body_kind": ("body kind", getattr(ctype, "body_kind", "planar")),
                "n_equations": ("equations", ctype.equations),
                "n_bodies": ("n_bodies", len(ctype.bodies)),
                "n_par": ("n_par", ctype.n_par), "n_fun": ("n_fun", ctype.n_fun),
                "holonomic": ("holonomic", all_rows_holonomic(ctype))}
    capsule, source, info = _checked(ctype, "constraint", CONSTRAINT_CAPSULE,
                                     _planar.constraint_kernel_info, declared,
                                     ("phi", "jacobian", "gamma"),
                                     "mbcore_constraint_kernel")
    extra = tuple(getattr(ctype, "extra", ()))
    if len(extra) != info["n_extra"]:
        name = getattr(ctype, "name", "") or getattr(ctype, "__name__", "?")
        raise PluginError(
            f"constraint type '{name}'{_owner(ctype)}: compiled kernel {source} has "
            f"{info['n_extra']} artificial coordinates per element, the type declares "
            f"extra = {extra!r}" + ("" if info["direct"] else
                                    " (the block layout of ABI version 1 has none: a "
                                    "kernel with artificial coordinates uses the direct "
                                    "layout of version 2; or set c_kernel = None to use "
                                    "the type's Python methods)"))
    return ConstraintKernel(capsule=capsule, source=source, name=info["name"] or source,
                            has_nu=bool(info["nu"]),
                            reason=info["reason"] or "the compiled kernel could not "
                                                     "evaluate the element")


__all__ = ["ForceKernel", "ConstraintKernel", "load_force_kernel", "load_constraint_kernel",
           "abi_version", "abi_min_version", "FORCE_CAPSULE", "CONSTRAINT_CAPSULE"]
