"""The compiled plugin tier: a force type's C kernel, loaded and checked.

A third-party force type (:class:`mbcore.elements.ForceType`) names its compiled
kernel in ``c_kernel = "package.module:attribute"``: a PyCapsule named
``"mbcore.force_kernel"`` around a ``mbcore_force_kernel`` struct of the C
contract ``mbcore_plugin.h`` (``mbcore.get_include()``; docs/plugins.md "Compiled
tier").  On the compiled backend the System (``System._buffers_and_kernels``)
calls :func:`load_force_kernel` for such a group; the kernel then runs inside the
compiled force evaluator (``mbcore._ext._forces``), hence in the compiled
right-hand side and the compiled loops, without Python.

The checks, each a :class:`~mbcore.errors.PluginError` naming the type, the
kernel's location and the distribution that provides the type: the attribute
resolves to a capsule with the right name; its ``abi_version`` equals this
mbcore's (else: rebuild the plugin against the installed mbcore); its body kind,
``n_bodies``, ``n_par`` and ``n_fun`` equal the Python declaration; ``force`` is
set.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

from .errors import PluginError

#: the PyCapsule name of a force kernel (MBCORE_FORCE_CAPSULE)
FORCE_CAPSULE = "mbcore.force_kernel"
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


def abi_version() -> int:
    """The C ABI version this mbcore implements (``MBCORE_ABI_VERSION``)."""
    from ._ext import _forces
    return int(_forces.ABI_VERSION)


def _owner(ftype: Any) -> str:
    """' (distribution version)' of the package defining the type, or ''.  Only
    for messages: the look-up scans the installed distributions."""
    cls = ftype if isinstance(ftype, type) else type(ftype)
    top = cls.__module__.split(".")[0]
    try:
        from importlib import metadata
        dists = metadata.packages_distributions().get(top) or []
        if dists:
            return f" (distribution {dists[0]} {metadata.version(dists[0])})"
    except Exception:        # pragma: no cover - a broken environment: name less
        pass
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


def load_force_kernel(ftype: Any) -> ForceKernel:
    """Load and check the ``c_kernel`` of force type ``ftype`` (class or instance)
    against its Python declaration; raises :class:`PluginError` (see the module
    docstring)."""
    from ._ext import _forces
    name = getattr(ftype, "name", "") or getattr(ftype, "__name__", "?")
    where = f"force type '{name}'"
    capsule, source = _resolve(getattr(ftype, "c_kernel", None), where)
    info = _forces.kernel_info(capsule)

    def refuse(what: str, named: bool = True) -> PluginError:
        label = f" ('{info['name']}')" if named else ""
        return PluginError(f"{where}{_owner(ftype)}: compiled kernel {source}{label} {what}")

    if info is None or info["capsule_name"] != FORCE_CAPSULE:
        got = ("not a PyCapsule" if info is None else
               f"a PyCapsule named {info['capsule_name']!r}")
        raise refuse(f"is {got}, expected a PyCapsule named {FORCE_CAPSULE!r}", False)
    mine = int(_forces.ABI_VERSION)
    if info["abi_version"] != mine:
        import mbcore
        raise refuse(
            f"was built for mbcore C ABI version {info['abi_version']}; the installed "
            f"mbcore {mbcore.__version__} implements ABI version {mine}. Rebuild the "
            f"plugin against the installed mbcore (its build takes the header from "
            f"mbcore.get_include()), e.g. pip install --no-build-isolation "
            f"--force-reinstall of the plugin's source", False)
    declared = (getattr(ftype, "body_kind", "planar"), len(ftype.bodies), ftype.n_par,
                ftype.n_fun)
    kernel = (BODY_KINDS.get(info["body_kind"], f"unknown body kind {info['body_kind']}"),
              info["n_bodies"], info["n_par"], info["n_fun"])
    if kernel != declared:
        fields = ("body kind", "n_bodies", "n_par", "n_fun")
        diff = ", ".join(f"{f} {k!r} (type: {d!r})" for f, k, d in zip(fields, kernel, declared)
                         if k != d)
        raise refuse(f"does not match the type's declaration: {diff}")
    if not info["force"]:
        raise refuse("has no force function (mbcore_force_kernel.force is NULL)")
    return ForceKernel(capsule=capsule, source=source, name=info["name"] or source,
                       has_jacobian=bool(info["jacobian"]),
                       reason=info["reason"] or "the compiled kernel could not evaluate "
                                                "the element")


__all__ = ["ForceKernel", "load_force_kernel", "abi_version", "FORCE_CAPSULE"]
