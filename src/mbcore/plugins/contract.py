"""Version of the plugin contract (the hook specs and the element/algorithm contracts).

:data:`CONTRACT_VERSION` is ``(major, minor)``.  What it covers: the hooks of
:mod:`mbcore.plugins.hookspecs` and the base classes a plugin's types subclass —
:class:`mbcore.elements.ConstraintType`, :class:`~mbcore.elements.ForceType`,
:class:`mbcore.integrate.Integrator` (with the compiled twin of
:mod:`mbcore.integrate.rk`), :class:`mbcore.solve.formulation.Formulation`,
:class:`mbcore.analysis.Analysis` and :class:`mbcore.results.reporting.Reporter`: their
methods, argument shapes and class attributes.  (The C ABI of the compiled plugin
tier, ``MBCORE_ABI_VERSION`` in ``mbcore_plugin.h``, is versioned on its own.)

* The **minor** number grows when the contract gains something a plugin may use
  (a new optional method, class attribute or hook) and old plugins keep working.
* The **major** number grows when something a plugin relies on changes or goes.

A plugin declares the contract it was built against by a module/object attribute
``mbcore_contract = "1.0"`` (or a tuple ``(1, 0)``); a single type may override the
class attribute ``contract`` its base class carries (default: the core's version).
No declaration means "built against the current contract".  The registry accepts a
declaration with the core's major number and a minor number not above the core's
(:func:`compatible`) and refuses any other with a :class:`~mbcore.errors.PluginError`
naming the plugin (distribution and version), the type and both versions
(:func:`refusal`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import PluginError

__all__ = ["CONTRACT_VERSION", "parse", "compatible", "refusal", "format_version",
           "declared_contract"]

#: (major, minor) of the plugin contract this core implements
CONTRACT_VERSION: tuple[int, int] = (1, 0)


def parse(value: Any, where: str = "") -> tuple[int, int]:
    """``(major, minor)`` of a declaration: ``"1.0"``, ``"1"``, ``(1, 0)``, ``1``.
    Anything else is a :class:`PluginError` naming ``where``."""
    try:
        if isinstance(value, str):
            parts = tuple(int(p) for p in value.strip().split("."))
        elif isinstance(value, int) and not isinstance(value, bool):
            parts = (value,)
        else:
            parts = tuple(int(p) for p in value)
            if any(isinstance(p, bool) for p in value):
                raise TypeError
    except (TypeError, ValueError):
        parts = ()
    if len(parts) == 1:
        parts = (parts[0], 0)
    if len(parts) != 2 or min(parts) < 0:
        raise PluginError(f"{where}: contract version {value!r} is not 'major.minor'"
                          if where else f"contract version {value!r} is not 'major.minor'")
    return parts   # type: ignore[return-value]


def format_version(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]}"


def compatible(declared: tuple[int, int], core: tuple[int, int] | None = None) -> bool:
    """Same major, and the plugin needs no minor feature the core lacks (``core``:
    default :data:`CONTRACT_VERSION`)."""
    core = CONTRACT_VERSION if core is None else core
    return declared[0] == core[0] and declared[1] <= core[1]


def refusal(provider: Any, what: str, declared: tuple[int, int],
            core: tuple[int, int] | None = None) -> str:
    """The message of a refused plugin or type: ``what`` is e.g. ``"constraint type
    'bushing'"`` or ``"the plugin"``."""
    core = CONTRACT_VERSION if core is None else core
    why = ("a newer mbcore" if declared[0] > core[0] or
           (declared[0] == core[0] and declared[1] > core[1]) else "an older mbcore")
    return (f"plugin {provider}: {what} was built for the mbcore plugin contract "
            f"{format_version(declared)}, this mbcore implements "
            f"{format_version(core)} (accepted: {core[0]}.0 to {format_version(core)}); "
            f"it needs {why}: install a matching version of the plugin or of mbcore")


def declared_contract(obj: Any, where: str) -> tuple[int, int] | None:
    """The ``mbcore_contract`` a plugin module/object declares, or None."""
    value = getattr(obj, "mbcore_contract", None)
    return None if value is None else parse(value, where)


def holonomic_rows(ctype: Any) -> tuple[bool, ...]:
    """Per equation of constraint type ``ctype`` (class or instance): True for a
    position-level (holonomic) row.  ``holonomic`` is one boolean for every row, or a
    tuple of ``equations`` booleans; anything else is a
    :class:`~mbcore.errors.PluginError` naming the type."""
    h = getattr(ctype, "holonomic", True)
    m = int(ctype.equations)
    if isinstance(h, (bool, np.bool_)):
        return (bool(h),) * m
    rows = tuple(h) if isinstance(h, (tuple, list)) else None
    if rows is None or len(rows) != m or not all(isinstance(x, (bool, np.bool_))
                                                 for x in rows):
        raise PluginError(f"constraint type '{getattr(ctype, 'name', ctype)}': holonomic "
                          f"must be a boolean or a tuple of {m} booleans (one per "
                          f"equation), not {h!r}")
    return tuple(bool(x) for x in rows)


def all_rows_holonomic(ctype: Any) -> bool:
    """Every equation of ``ctype`` is position-level (:func:`holonomic_rows`): the
    ``holonomic`` flag of its compiled kernel."""
    return all(holonomic_rows(ctype))
