"""Element parameters of a running :class:`mbcore.Simulation`
(docs/embedding.md "Parameters").

``<element>.<key>`` names a parameter of a force element (``spring.stiffness``) or
of a constraint element (``rod.length``).  A new value is validated with the
element type's schema (:class:`mbcore.elements.schema.Param`) and its ``check``, the element
is packed again with the type's ``pack(spec, ctx)`` (as
:meth:`mbcore.system.compiled_model.SystemModel._pack_forces` does) and the floats that differ from
the old value's packing are written in place into the group's ``par`` row: the
compiled evaluators (``_forces.ForceEvaluator``, ``_planar.PlanarEvaluator``) and
the NumPy paths read that same array, so no System is rebuilt and nothing is
added per evaluation.  Floats the packing does not change keep their value (state
a kernel keeps in ``par``, e.g. a rotation driver's tracked angle).

Refused, with the reason: keys naming bodies (the System's couplings are fixed at
compile time), time functions and any value whose packing changes the element's
time functions (the function table is fixed: make the function an input,
``{input: NAME}``), and constraint parameters under a formulation that copies
the joint geometry when it is built (``joint_coordinates``).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..elements.base import PackContext
from ..errors import ModelError
from ..elements.schema import NamedPoint, ValidationContext

__all__ = ["ParameterSlot", "find_parameter", "repack"]

#: formulations that copy the constraint parameters when they are built
_COPY_CONSTRAINT_PARAMETERS = ("joint_coordinates",)


@dataclass
class ParameterSlot:
    """Where parameter ``name`` lives: the model element, its group and row."""

    name: str
    key: str
    element: Any              # mbcore.model.Element (the Simulation's own model copy)
    etype: Any                # the System's instance of the element type
    par: np.ndarray           # the group's (ne, n_par) array
    row: int
    constraint: bool


def _settable(etype) -> list[str]:
    return [k for k, p in etype.params.items()
            if p.kind not in ("body", "function") and k not in etype.bodies]


def find_parameter(system, model, name: str) -> ParameterSlot:
    """The :class:`ParameterSlot` of ``name``; ValueError naming it otherwise."""
    elname, _, key = name.rpartition(".")
    groups = [(fg, False) for fg in system.force_groups]
    from ..elements.bodykinds import EulerNormalization      # its rows are named by body
    groups += [(g, True) for g in system.groups
               if not isinstance(g.ctype, EulerNormalization)]
    for g, constraint in groups:
        if elname in g.names:
            etype = g.ftype if not constraint else g.ctype
            break
    else:
        known = [f"{n}.{k}" for g, c in groups for n in g.names
                 for k in _settable(g.ctype if c else g.ftype)]
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ValueError(f"unknown parameter '{name}'{hint}: expected "
                         f"'<force or constraint element>.<key>'")
    if key not in etype.params:
        close = difflib.get_close_matches(key, _settable(etype), n=1)
        hint = f" (did you mean '{elname}.{close[0]}'?)" if close else ""
        raise ValueError(f"unknown parameter '{name}'{hint}: a {etype.name} element has "
                         f"{', '.join(_settable(etype)) or 'no settable parameter'}")
    p = etype.params[key]
    if p.kind == "body" or key in etype.bodies:
        raise ValueError(f"parameter '{name}' names a body: which bodies an element "
                         f"connects is fixed when the model is compiled")
    if p.kind == "function":
        raise ValueError(f"parameter '{name}' is a time function, fixed when the model "
                         f"is compiled: make it an input ({{input: NAME}}) and set that")
    els = model.constraint_elements() if constraint else model.force_elements()
    el = next(x for x in els if x.name == elname)
    return ParameterSlot(name, key, el, etype, g.par, g.names.index(elname), constraint)


def _context(model) -> ValidationContext:
    ctx = ValidationContext([b.name for b in model.bodies], {}, model.parameters,
                            model.ground, units=model.unit_system)
    ctx.points = {p.name: (p.body, p.at) for p in model.points}
    return ctx


def repack(slot: ParameterSlot, value: Any, model) -> tuple[Any, np.ndarray, np.ndarray]:
    """Validate ``value`` and pack the element with it: (validated value, the
    positions in the ``par`` row that change, their new values).  ModelError (at
    the element's key path) or ValueError naming the parameter."""
    el, et, key = slot.element, slot.etype, slot.key
    path = f"{el.path}.{key}"
    p = et.params[key]
    v = p.validate(value, path, _context(model))
    if isinstance(v, NamedPoint):
        body = el.values.get(p.on) if p.on else None
        if body is not None and v.body != body:
            raise ModelError(path, f"point '{v.name}' lies on body '{v.body}', not on "
                                   f"'{body}' ({p.on})")
        v = v.at
    spec = dict(el.values)
    spec[key] = v
    et.check(spec, el.path)
    ctx = PackContext(model, el.path)
    _check_frames(slot, spec, model, ctx)
    old_par, old_fun = et.pack(el.values, ctx)
    new_par, new_fun = et.pack(spec, ctx)
    old_par = np.asarray(old_par, dtype=float).ravel()
    new_par = np.asarray(new_par, dtype=float).ravel()
    if new_par.size != slot.par.shape[1]:
        raise ValueError(f"parameter '{slot.name}': {et.name}.pack() returned "
                         f"{new_par.size} parameters, declared {slot.par.shape[1]}")
    if len(new_fun) != len(old_fun) or any(a != b for a, b in zip(old_fun, new_fun)):
        raise ValueError(f"parameter '{slot.name}' = {value!r} changes the element's "
                         f"time functions, which are fixed when the model is compiled")
    changed = np.flatnonzero(~((new_par == old_par) | (np.isnan(new_par)
                                                       & np.isnan(old_par))))
    return v, changed, new_par[changed]


def _check_frames(slot: ParameterSlot, spec: dict, model, ctx: PackContext) -> None:
    """Refuse a change of the body-local geometry of an element on a body whose
    reference frame is not at its centroid (mbcore.system.frames: the System holds
    it moved to the centroidal frame)."""
    shifts = {b.name: np.asarray(b.center_of_mass, dtype=float) for b in model.bodies
              if getattr(b, "center_of_mass", None) is not None}
    if not shifts:
        return
    old = slot.etype.frame_shift(dict(slot.element.values), shifts.get, ctx)
    new = slot.etype.frame_shift(spec, shifts.get, ctx)
    if slot.key in new or old != new:
        raise ValueError(f"parameter '{slot.name}' is geometry on a body with a "
                         f"center_of_mass, fixed when the model is compiled")


def check_formulation(slot: ParameterSlot, form) -> None:
    """Refuse a constraint parameter the formulation has copied (module docstring)."""
    if slot.constraint and getattr(form, "name", "") in _COPY_CONSTRAINT_PARAMETERS:
        raise ValueError(f"parameter '{slot.name}': the {form.name} formulation copies "
                         f"the joint geometry when it is built; constraint parameters "
                         f"can change with the other formulations")
