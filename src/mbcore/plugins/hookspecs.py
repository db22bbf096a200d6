"""Hook specifications of mbcore (pluggy project name ``"mbcore"``).

A plugin is any module or object with functions decorated by
``mbcore.hookimpl``; it is found through the entry-point group ``mbcore``
(``[project.entry-points.mbcore]`` in its pyproject.toml) or registered at run
time with :func:`mbcore.plugins.register`.  The built-in plugins (package
``mbplugins``) use exactly these hooks.

Every *type* hook returns a list of classes.  Each class carries a ``name``
attribute: the string used in model files (``type: revolute``).  An entry may
instead be a :class:`mbcore.plugins.LazyType` (name, ``"module:Class"``, body
kind): the class is then imported the first time the type is used, which keeps
start-up cheap (the built-in plugins return only such references).  All
implementations are called and their results merged; a name provided by two
plugins is an error that names both (:class:`mbcore.errors.PluginError`).
No hook is ``firstresult``.

Versioning: :data:`CONTRACT_VERSION` ``(major, minor)`` versions these hooks and
the element/algorithm contracts (the base classes' methods and attributes).  A
plugin declares the version it was built against by ``mbcore_contract = "1.0"`` on
its module/object; a type may override the ``contract`` class attribute its base
class carries.  No declaration means "built against the current contract".  Same
major and a minor not above the core's: accepted; otherwise the registry refuses
the plugin or type with a :class:`~mbcore.errors.PluginError` naming it and both
versions (rules: :mod:`mbcore.plugins.contract`; docs/plugins.md "Contract versions").
"""
from __future__ import annotations

import pluggy

from .contract import CONTRACT_VERSION

__all__ = ["CONTRACT_VERSION", "hookspec", "hookimpl"]

hookspec = pluggy.HookspecMarker("mbcore")
hookimpl = pluggy.HookimplMarker("mbcore")


@hookspec
def mbcore_constraint_types() -> list[type]:
    """Return constraint types: joints, absolute constraints and drivers.

    Called once when the plugin registry is built.  Each class must subclass
    :class:`mbcore.elements.ConstraintType`: it declares ``name``, the number of
    equations per element, the bodies it connects, a parameter schema, and
    vectorised ``phi``/``jacobian``/``nu``/``gamma`` methods (the reference,
    "slow path").  Built-in types also name a compiled ``kernel``.
    """


@hookspec
def mbcore_force_types() -> list[type]:
    """Return force element types (subclasses of :class:`mbcore.elements.ForceType`).

    A force element adds its generalised force into Q and, optionally, its
    potential energy and the power it injects.  Called once per registry build.
    """


@hookspec
def mbcore_integrators() -> list[type]:
    """Return integrator classes (subclasses of ``mbcore.integrate.Integrator``),
    each with a ``name`` (``rk4``, ``dopri5``, ``bdf``...).  Called once.  An
    explicit Runge–Kutta method subclasses ``mbcore.integrate.FixedStepRK`` or
    ``EmbeddedRK`` with its tableau: its class attributes are its compiled twin
    (:mod:`mbcore.integrate.rk`), so it runs on the compiled loop too."""


@hookspec
def mbcore_formulations() -> list[type]:
    """Return formulation classes (DI, CS, CP, projection, ...), each with a
    ``name``: they turn a System into the ODE/DAE an integrator advances."""


@hookspec
def mbcore_analyses() -> list[type]:
    """Return analysis classes (subclasses of :class:`mbcore.analysis.Analysis`),
    each with a ``name`` (``kinematic``, ``dynamic``, ``static``...) used by
    ``settings.analysis`` in model files and by ``mbcore run --analysis``."""


@hookspec
def mbcore_reporters() -> list[type]:
    """Return reporter classes (subclasses of :class:`mbcore.results.reporting.Reporter`),
    each with a ``name`` (``hdf5``, ``memory``...)."""
