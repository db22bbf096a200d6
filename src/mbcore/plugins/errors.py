"""Errors raised inside a plugin's element, reported with who and where.

The System calls a Python element type's vectorised methods once per group
(:mod:`mbcore.elements`).  When such a call raises, the System hands the exception
to :func:`group_failed`, which raises instead

* for :class:`~mbcore.errors.ElementEvaluationError` (the documented way for a type
  to say "element k cannot be evaluated here"): an
  :class:`~mbcore.errors.AnalysisError` naming the element, its key path, its type,
  the plugin and the time — analyses treat it like any failed evaluation;
* for any other :class:`~mbcore.errors.MbcoreError`: the exception itself (the type
  raised it on purpose, e.g. a :class:`~mbcore.errors.ConvergenceError`);
* for everything else (a bug, or a library error inside the plugin): a
  :class:`PluginElementError` naming the plugin (with its distribution and
  version), the type, the method, the elements of the group (name and key path)
  and the time, chained to the original exception (``raise ... from exc``).

Only the failure path lives here: the System's happy path is a bare call inside a
``try`` (no cost until something raises).
"""
from __future__ import annotations

from typing import Any, NoReturn, Sequence

from ..errors import AnalysisError, ElementEvaluationError, MbcoreError, PluginError

__all__ = ["PluginElementError", "group_failed", "element_failed", "plugin_label"]

#: elements named in a message about a whole group
_NAMED = 3


class PluginElementError(PluginError):
    """An exception raised inside a plugin type's method while the System evaluated
    a group of elements.  Attributes: ``plugin`` (the provider, a string), ``kind``
    (``"constraint"``/``"force"``), ``type_name``, ``method``, ``elements`` and
    ``paths`` (the group's element names and key paths; one element when the group
    has one), ``t`` (the time).  ``__cause__`` is the original exception."""

    def __init__(self, message: str, *, plugin: str, kind: str, type_name: str,
                 method: str, elements: Sequence[str], paths: Sequence[str],
                 t: float | None):
        self.plugin = plugin
        self.kind = kind
        self.type_name = type_name
        self.method = method
        self.elements = list(elements)
        self.paths = list(paths)
        self.t = t
        super().__init__(message if t is None else f"t = {t:.9g}: {message}")


def plugin_label(etype: Any) -> str:
    """``"plugin <name> (<distribution> <version>)"`` of a type instance or class, or
    its module when no registry has seen it."""
    from .manager import provider_of
    cls = etype if isinstance(etype, type) else type(etype)
    prov = provider_of(cls)
    return f"plugin {prov}" if prov is not None else f"module {cls.__module__}"


def _elements(names: Sequence[str], paths: Sequence[str]) -> str:
    shown = ", ".join(f"'{n}' ({p})" for n, p in zip(names[:_NAMED], paths[:_NAMED]))
    if len(names) == 1:
        return f"element {shown}"
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return f"the group of {len(names)} elements {shown}{more}"


def group_failed(group: Any, method: str, args: tuple, exc: BaseException) -> NoReturn:
    """Re-raise ``exc``, raised by ``method`` of a constraint group (``group.ctype``)
    or force group (``group.ftype``) called with ``args``, as described in the module
    docstring.  Every evaluation method of the element contracts ends with ``(t,
    f)``, so the time is ``args[-2]``."""
    t = args[-2] if len(args) >= 2 else None
    t = float(t) if isinstance(t, (int, float)) else None
    if isinstance(exc, ElementEvaluationError):
        raise element_failed(group, exc.index, exc.reason, t) from exc
    if isinstance(exc, MbcoreError):
        raise exc
    kind, etype = _kind_and_type(group)
    who = plugin_label(etype)
    raise PluginElementError(
        f"{who}: {kind} type '{etype.name}'.{method}() raised {type(exc).__name__}: "
        f"{exc} (evaluating {_elements(group.names, group.paths)})",
        plugin=who.partition(" ")[2], kind=kind, type_name=etype.name, method=method,
        elements=group.names, paths=group.paths, t=t) from exc


def element_failed(group: Any, index: int, reason: str, t: float | None) -> AnalysisError:
    """The :class:`AnalysisError` of element ``index`` of a group that cannot be
    evaluated (an :class:`ElementEvaluationError` of a constraint type)."""
    kind, etype = _kind_and_type(group)
    if not 0 <= index < len(group.names):
        return AnalysisError(f"{kind} type '{etype.name}' ({plugin_label(etype)}): "
                             f"element index {index} out of range: {reason}", t)
    return AnalysisError(f"{kind} element '{group.names[index]}' ({group.paths[index]}, "
                         f"{etype.name}; {plugin_label(etype)}): {reason}", t)


def _kind_and_type(group: Any) -> tuple[str, Any]:
    etype = getattr(group, "ctype", None)
    return ("constraint", etype) if etype is not None else ("force", group.ftype)
