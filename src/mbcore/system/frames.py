"""Body reference frames away from the centre of mass: the centroidal equivalent
of a model.

A body with ``center_of_mass`` s_C (its centroid in the body's reference frame, the
CAD convention) has its ``position``, ``angle``/``orientation``, velocities and every
body-local point given in that reference frame.  The equations of motion with such
a frame carry the coupling terms of Nikravesh (1988), Problem 9.4 (a mass matrix
with ``m B s'`` blocks, a quadratic-velocity term ``m A s' phi_dot^2``).  mbcore
keeps its centroidal kernels (diagonal planar mass, Nikravesh (1988), Eqs.
9.2-9.3; Formulation I in space, Eqs. 11.10-11.16) and moves the data instead: the
System is compiled from the *centroidal equivalent* of the model
(:func:`centroidal_model`), in which

* the initial state is the centroid's: ``r_C = r_O + A s_C``,
  ``r_C_dot = r_O_dot + omega~ A s_C`` (planar: ``phi_dot B s_C``), the
  orientation unchanged (the centroidal frame's axes are the reference frame's);
* every body-local point of the elements on the body becomes ``s' - s_C``
  (each element type's ``frame_shift`` hook, :mod:`mbcore.elements.base`), as do
  the model's named points and the offsets of the body's ``shape``;
* the inertia is about the centroid (moved from the origin with
  ``inertia_about: origin``, the parallel-axis theorem, Meriam & Kraige (2012),
  Appendix B);
* a point ``<body>.frame`` at ``-s_C`` is added: the reference frame's origin,
  whose position, velocity and acceleration the ``points`` channel reports.

The generalized coordinates (q, qd, qdd) are therefore the centroids'.  The
model as written (its ``to_dict``, its saved text) keeps ``center_of_mass`` and
the user's points.  A model without ``center_of_mass`` is returned unchanged
(the same object).
"""
from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np

from ..elements.base import PackContext
from ..errors import ModelError

__all__ = ["centroidal_model", "has_frames", "FRAME_POINT"]

#: the name of the automatic point at a body's reference-frame origin
FRAME_POINT = "{}.frame"


def has_frames(model: Any) -> bool:
    """True when some body's reference frame is not at its centroid."""
    return any(getattr(b, "center_of_mass", None) is not None for b in model.bodies)


def _rotation(b) -> np.ndarray:
    """The body's initial rotation matrix (2x2 planar, 3x3 spatial)."""
    if b.kind == "spatial":
        from ..elements.rotations import A
        return A(np.asarray(b.orientation, dtype=float))
    c, s = math.cos(b.angle), math.sin(b.angle)
    return np.array([[c, -s], [s, c]])


def _centroidal_body(b):
    """The body with its centroid's initial state and inertia (module docstring)."""
    sc = np.asarray(b.center_of_mass, dtype=float)
    As = _rotation(b) @ sc
    r = np.asarray(b.position, dtype=float) + As
    if b.kind == "spatial":
        v = np.asarray(b.velocity, dtype=float) + np.cross(
            np.asarray(b.angular_velocity, dtype=float), As)
    else:        # omega~ A s in the plane: phi_dot B s = phi_dot (-A_s_y, A_s_x)
        v = np.asarray(b.velocity, dtype=float) + b.angular_velocity * np.array(
            [-As[1], As[0]])
    return dataclasses.replace(
        b, position=tuple(float(x) for x in r), velocity=tuple(float(x) for x in v),
        inertia=b.centroidal_inertia, center_of_mass=None, inertia_about="center_of_mass",
        shape=_shifted_shapes(b.shape, sc))


def _shifted_shapes(shape: Any, sc: np.ndarray) -> Any:
    """The body's ``shape`` data with every offset moved by -s_C."""
    if shape is None:
        return None
    one = not isinstance(shape, (list, tuple))
    out = []
    for spec in ([shape] if one else shape):
        spec = dict(spec)
        off = [float(x) for x in spec.get("offset", [0.0] * len(sc))]
        n = len(off)
        if n < len(sc):                  # a planar offset of 2 numbers
            off = off + [0.0] * (len(sc) - n)
        moved = [off[k] - (float(sc[k]) if k < len(sc) else 0.0) for k in range(len(off))]
        spec["offset"] = moved
        out.append(spec)
    return out[0] if one else out


def centroidal_model(model: Any, registry: Any = None) -> Any:
    """The centroidal equivalent of a validated ``model`` (module docstring): a new
    Model, validated, whose bodies have their frames at their centroids; ``model``
    itself when no body has ``center_of_mass``.  Its ``source_text`` is the
    original's (what a result stores is what the user wrote); ``source_model`` is
    ``model``."""
    if not has_frames(model):
        return model
    if registry is None:
        from ..plugins.manager import registry as _registry
        registry = _registry()
    shifts = {b.name: np.asarray(b.center_of_mass, dtype=float)
              for b in model.bodies if b.center_of_mass is not None}

    def shift(name: str):
        return shifts.get(name)

    for k, imp in enumerate(model.impacts):
        if isinstance(imp, dict) and imp.get("body") in shifts:
            raise ModelError(f"impacts[{k}].body", f"body '{imp['body']}' has a "
                             f"center_of_mass: impacts need the body's reference frame at "
                             f"its centre of mass (give the contact point relative to it)")
    new = copy.copy(model)
    new.bodies = [_centroidal_body(b) if b.name in shifts else b for b in model.bodies]
    names = {p.name for p in model.points}
    new.points = []
    for p in model.points:
        s = shifts.get(p.body)
        new.points.append(p if s is None else dataclasses.replace(
            p, at=tuple(float(x) for x in np.asarray(p.at, dtype=float) - s)))
    for b in model.bodies:
        if b.name in shifts:
            name = FRAME_POINT.format(b.name)
            if name in names:
                raise ModelError("points", f"point name '{name}' is reserved: it is the "
                                 f"reference frame of body '{b.name}' (center_of_mass)")
            new.add_point(name, b.name, [float(-x) for x in shifts[b.name]])
    new.elements = {}
    bk = model.body_kind
    kinds = {"joints": "constraint", "drivers": "constraint", "forces": "force"}
    for section, els in model.elements.items():
        out = []
        for el in els:
            cls = registry.get(kinds[section], el.type, bk)
            raw = dict(el.raw)
            raw.update(cls().frame_shift(dict(el.values), shift, PackContext(model, el.path)))
            out.append(dataclasses.replace(el, raw=raw, values={}))
        new.elements[section] = out
    new.__dict__.pop("_body_name_cache", None)
    new.validate(registry)
    new.source_text = model.source_text        # (add_point cleared it)
    new.source_model = model
    return new
