"""Model: the pure description of a planar multibody system.

A :class:`Model` holds bodies, named points, constraints (joints), drivers, forces,
named parameters and settings.  It is built from Python (``add_body``,
``add_joint``...) or loaded from a YAML/JSON model file (:meth:`Model.from_file`);
both routes go through the same validation, whose errors name the key path
(``joints[3].point_j: expected 2 numbers, got 3``).  ``Model.compile()`` returns a
:class:`mbcore.system.System`.  The file format is documented in docs/model-format.md.
"""
from __future__ import annotations

import copy
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..elements import schema as S
from ..errors import ModelError, UnknownTypeError

_log = logging.getLogger(__name__)
from ..elements.schema import NamedPoint, ValidationContext
from ..elements.units import UnitSystem, unit_system

TOP_KEYS = ("name", "description", "units", "parameters", "settings", "ground", "gravity",
            "dimensions", "bodies", "points", "joints", "drivers", "forces", "impacts",
            "switching")
BODY_KEYS = ("name", "mass", "inertia", "position", "angle", "velocity",
             "angular_velocity", "description", "kind", "shape", "center_of_mass",
             "inertia_about")
PARTICLE_KEYS = ("name", "mass", "position", "velocity", "description", "kind")
SPATIAL_BODY_KEYS = ("name", "mass", "inertia", "position", "orientation", "velocity",
                     "angular_velocity", "angular_velocity_body", "description", "kind",
                     "shape", "center_of_mass", "inertia_about")
POINT_KEYS = ("name", "body", "at")
CONSTRAINT_SECTIONS = ("joints", "drivers")
SECTIONS = CONSTRAINT_SECTIONS + ("forces",)
#: registry kind of the element types of each section
SECTION_KIND = {"joints": "constraint", "drivers": "constraint", "forces": "force"}


@dataclass
class Body:
    """A rigid body: mass, moment of inertia about the centroid, and initial
    estimates of its coordinates and velocities.

    Planar (Nikravesh (1988), §4.1): ``position`` (x, y), ``angle`` phi, ``inertia`` the polar
    moment, ``angular_velocity`` a number.  Spatial (``kind == "spatial"``,
    Nikravesh (1988), §7.3, §8.3): ``position`` r (3), ``orientation`` the Euler parameters p (4),
    ``inertia`` the 3x3 inertia tensor J' in body axes (tuple of rows),
    ``velocity`` ṙ (3) and ``angular_velocity`` ω in global components (3).

    ``center_of_mass`` (None: the body's reference frame is at its centroid): the
    centroid's coordinates in the body's reference frame (the CAD convention;
    Nikravesh (1988), Problem 9.4).  Then ``position``, ``angle``/``orientation`` and
    the velocities are the reference frame's, every body-local point is measured
    in it, and ``inertia`` is about the centroid, or about the frame origin with
    ``inertia_about == "origin"`` (parallel-axis theorem); the System works with
    the centroidal equivalent (:mod:`mbcore.system.frames`)."""

    name: str
    mass: float = 1.0
    inertia: Any = 1.0
    position: tuple[float, ...] = (0.0, 0.0)
    angle: float = 0.0
    velocity: tuple[float, ...] = (0.0, 0.0)
    angular_velocity: Any = 0.0
    description: str = ""
    kind: str = "planar"
    orientation: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)
    notes: tuple[str, ...] = ()
    shape: Any = None          # visual shape as given (mbcore.model.visual)
    center_of_mass: tuple[float, ...] | None = None    # centroid in the reference frame
    inertia_about: str = "center_of_mass"              # or "origin" (the frame's)

    @property
    def centroidal_inertia(self) -> Any:
        """``inertia`` about the centroid (reference-frame axes): as given, or moved
        from the frame origin by the parallel-axis theorem (Meriam & Kraige (2012),
        Appendix B): planar J_C = J_O - m s'ᵀs', spatial
        J_C = J_O - m (s'ᵀs' I - s' s'ᵀ) with s' = ``center_of_mass``."""
        if self.inertia_about != "origin" or self.center_of_mass is None:
            return self.inertia
        s = np.asarray(self.center_of_mass, dtype=float)
        if self.kind == "spatial":
            J = np.asarray(self.inertia, dtype=float) - self.mass * (
                float(s @ s) * np.eye(3) - np.outer(s, s))
            return tuple(tuple(float(x) for x in r) for r in J)
        return float(self.inertia) - self.mass * float(s @ s)

    def _frame_keys(self, d: dict[str, Any]) -> dict[str, Any]:
        if self.center_of_mass is not None:
            d["center_of_mass"] = list(self.center_of_mass)
        if self.inertia_about != "center_of_mass":
            d["inertia_about"] = self.inertia_about
        return d

    def to_dict(self) -> dict[str, Any]:
        if self.kind in ("particle", "particle3"):
            d = {"name": self.name, "kind": "particle", "mass": self.mass,
                 "position": list(self.position)}
            if any(self.velocity):
                d["velocity"] = list(self.velocity)
            if self.description:
                d["description"] = self.description
            return d
        if self.kind == "spatial":
            d = {"name": self.name, "mass": self.mass,
                 "inertia": [list(r) for r in self.inertia],
                 "position": list(self.position),
                 "orientation": {"euler_parameters": list(self.orientation)}}
            if any(self.velocity) or any(self.angular_velocity):
                d["velocity"] = list(self.velocity)
                d["angular_velocity"] = list(self.angular_velocity)
            if self.description:
                d["description"] = self.description
            if self.shape is not None:
                d["shape"] = self.shape
            return self._frame_keys(d)
        d = {"name": self.name, "mass": self.mass, "inertia": self.inertia,
             "position": list(self.position), "angle": self.angle}
        if any(self.velocity) or self.angular_velocity:
            d["velocity"] = list(self.velocity)
            d["angular_velocity"] = self.angular_velocity
        if self.description:
            d["description"] = self.description
        if self.shape is not None:
            d["shape"] = self.shape
        return self._frame_keys(d)


@dataclass
class Point:
    """A named body-fixed point (local coordinates ``at``), e.g. a point of interest."""

    name: str
    body: str
    at: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "body": self.body, "at": list(self.at)}


@dataclass
class Element:
    """One constraint/driver entry: its section, type name, name and parameters.

    ``raw`` is the entry as given (model-file data); ``values`` the validated,
    normalised parameters (filled by :meth:`Model.validate`).
    """

    section: str
    type: str
    name: str
    raw: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)
    index: int = 0

    @property
    def path(self) -> str:
        return f"{self.section}[{self.index}]"


class Model:
    """Pure description of a multibody system (no state, no buffers)."""

    def __init__(self, name: str = "model", *, ground: str = "ground",
                 parameters: Mapping[str, float] | None = None,
                 settings: Mapping[str, Any] | None = None,
                 units: Mapping[str, str] | None = None, description: str = ""):
        self.name = name
        self.description = description
        self.ground = ground
        self.parameters: dict[str, float] = dict(parameters or {})
        self.settings: dict[str, Any] = dict(settings or {})
        self.units: dict[str, str] = dict(units or {})
        self.bodies: list[Body] = []
        self.points: list[Point] = []
        self.elements: dict[str, list[Element]] = {s: [] for s in SECTIONS}
        self.gravity: tuple[float, ...] = (0.0, 0.0)
        #: 2 (planar bodies) or 3 (spatial bodies with Euler parameters)
        self.dimensions: int = 2
        self.impacts: list[dict[str, Any]] = []     # rigid contacts (mbcore.solve.impacts)
        self.contacts: list = []                    # validated impacts
        #: switching constraint sets (mbcore.solve.switching): the raw section and
        #: its validated form (None: the model has no switching)
        self.switching_data: dict[str, Any] | None = None
        self.switching = None
        self.source_text: str | None = None
        self.source_format: str = "json"
        self.source_path: str | None = None
        #: read table files outside the model file's directory (None: the
        #: ``mbcore.elements.limits`` default)
        self.allow_external_data: bool | None = None

    # ------------------------------------------------------------------ building
    def add_body(self, name: str, *, mass: float = 1.0, inertia: Any = None,
                 position=None, angle: float = 0.0, velocity=None,
                 angular_velocity: Any = None, description: str = "",
                 orientation: Any = None, angular_velocity_body: Any = None,
                 center_of_mass: Any = None, inertia_about: str | None = None) -> Body:
        """Add a rigid body.  Planar models: ``position`` (x, y), ``angle``,
        ``inertia`` (polar moment).  Spatial models (``set_dimensions(3)``):
        ``position`` (3), ``orientation`` (any model-file form, e.g.
        ``{"axis": [0, 0, 1], "angle": 30, "unit": "deg"}`` or 4 Euler parameters),
        ``inertia`` (3 principal moments or a 3x3 tensor in body axes),
        ``velocity`` (3), ``angular_velocity`` (global) or ``angular_velocity_body``.
        ``center_of_mass``: the centroid in the body's reference frame (2 or 3
        numbers; then the coordinates, velocities and body-local points are the
        reference frame's), ``inertia_about``: ``"center_of_mass"`` (default) or
        ``"origin"`` (docs/model-format.md, "Reference frame and centre of mass")."""
        path = f"bodies[{len(self.bodies)}]"
        spec: dict[str, Any] = {"name": name, "mass": mass, "description": description}
        if inertia is not None:                 # default: 1 (planar), [1, 1, 1] (spatial)
            spec["inertia"] = _to_data(inertia)
        for key, v in (("position", position), ("velocity", velocity),
                       ("angular_velocity", angular_velocity),
                       ("orientation", orientation),
                       ("angular_velocity_body", angular_velocity_body),
                       ("center_of_mass", center_of_mass), ("inertia_about", inertia_about)):
            if v is not None:
                spec[key] = _to_data(v)
        if self.dimensions == 2:
            spec["angle"] = angle
        elif angle:
            raise ModelError(f"{path}.angle", "a spatial body has no planar angle: give its "
                                              "orientation (e.g. {'axis': [0, 0, 1], "
                                              "'angle': 30, 'unit': 'deg'})")
        b = _make_body(spec, path, self.dimensions, self.unit_system)
        self._claim_body_name(b.name, path)
        self.bodies.append(b)
        self._touch()
        return b

    def add_particle(self, name: str, *, mass: float = 1.0, position=None, velocity=None,
                     description: str = "") -> Body:
        """Add a point mass (``kind: particle`` in a model file): mass, position and
        velocity only (2 or 3 components).  Joints and forces of the model's kind act
        on it as on a body whose rotation is fixed."""
        path = f"bodies[{len(self.bodies)}]"
        spec: dict[str, Any] = {"name": name, "kind": "particle", "mass": mass,
                                "description": description}
        for key, v in (("position", position), ("velocity", velocity)):
            if v is not None:
                spec[key] = _to_data(v)
        b = _make_body(spec, path, self.dimensions, self.unit_system)
        self._claim_body_name(b.name, path)
        self.bodies.append(b)
        self._touch()
        return b

    def add_point(self, name: str, body: str, at) -> Point:
        path = f"points[{len(self.points)}]"
        p = Point(S.string(name, f"{path}.name"), S.string(body, f"{path}.body"),
                  S.vector(S.quantities(_to_data(at), f"{path}.at", "length",
                                        self.unit_system), f"{path}.at", self.dimensions))
        self.points.append(p)
        self._touch()
        return p

    def add_joint(self, type: str, name: str | None = None, **params: Any) -> Element:
        """Add a constraint (joint, absolute constraint) of a registered type."""
        return self._add("joints", type, name, params)

    def add_driver(self, type: str, name: str | None = None, **params: Any) -> Element:
        """Add a driver (a rheonomic constraint such as ``absolute_driver``)."""
        return self._add("drivers", type, name, params)

    def add_force(self, type: str, name: str | None = None, **params: Any) -> Element:
        """Add a force element (``tsda``, ``rsda``, ``force``, ``torque``...)."""
        return self._add("forces", type, name, params)

    def add_impact(self, name: str, body: str, *, restitution: float, **params: Any) -> None:
        """Add a rigid contact with restitution (see :mod:`mbcore.solve.impacts`): a body
        point (``point``, ``radius``) against a line (``surface``,
        ``surface_point``, ``normal``, optional ``extent``)."""
        self.impacts.append({"name": name, "body": body, "restitution": restitution,
                             **{k: _to_data(v) for k, v in params.items()}})
        self._touch()

    def set_gravity(self, gx: float, gy: float, gz: float | None = None) -> None:
        """Uniform gravity acceleration (e.g. ``(0, -9.81)``; three components in a
        spatial model), acting on every body."""
        g = (gx, gy) if gz is None else (gx, gy, gz)
        g = S.quantities(g, "gravity", "length/time^2", self.unit_system)
        self.gravity = S.vector(g, "gravity", self.dimensions)
        self._touch()

    def set_dimensions(self, dimensions: int) -> None:
        """2: planar model (the default); 3: spatial model (Euler-parameter bodies,
        spatial element types).  Set before adding bodies."""
        if dimensions not in (2, 3):
            raise ModelError("dimensions", f"expected 2 or 3, got {dimensions!r}")
        if self.bodies and dimensions != self.dimensions:
            raise ModelError("dimensions", "set the dimensions before adding bodies")
        if any(self.gravity) and len(self.gravity) != int(dimensions):
            raise ModelError("dimensions", "set the dimensions before the gravity (its "
                                           "number of components changes)")
        self.dimensions = int(dimensions)
        if len(self.gravity) != self.dimensions:
            self.gravity = (0.0,) * self.dimensions
        self._touch()

    @property
    def unit_system(self) -> UnitSystem:
        """The units of the model's plain numbers (its ``units:`` block validated;
        :mod:`mbcore.elements.units`)."""
        return unit_system(self.units)

    @property
    def body_kind(self) -> str:
        """Body kind of this model's bodies and element types."""
        return "spatial" if self.dimensions == 3 else "planar"

    def _add(self, section: str, type: str, name: str | None, params: dict) -> Element:
        lst = self.elements[section]
        raw = {"name": name or f"{type}{len(lst) + 1}", "type": type}
        raw.update({k: _to_data(v) for k, v in params.items()})
        el = Element(section, type, raw["name"], raw, index=len(lst))
        lst.append(el)
        self._touch()
        return el

    def _claim_body_name(self, name: str, path: str) -> None:
        """Refuse a name in use (O(1): a set of the names, rebuilt when the body list
        changed length behind its back; :meth:`validate` checks duplicates anyway)."""
        cache = self.__dict__.get("_body_name_cache")
        if cache is None or cache[0] != len(self.bodies):
            cache = (len(self.bodies), {x.name for x in self.bodies})
        if name == self.ground or name in cache[1]:
            raise ModelError(f"{path}.name", f"body name '{name}' is already used")
        cache[1].add(name)
        self._body_name_cache = (cache[0] + 1, cache[1])

    def _touch(self) -> None:
        self.source_text = None     # a changed model is no longer its file

    # ----------------------------------------------------------------- queries
    def body(self, name: str) -> Body:
        for b in self.bodies:
            if b.name == name:
                return b
        raise KeyError(f"no body named '{name}'")

    def body_index(self, name: str) -> int:
        for k, b in enumerate(self.bodies):
            if b.name == name:
                return k
        return -1

    def constraint_elements(self) -> list[Element]:
        return [e for s in CONSTRAINT_SECTIONS for e in self.elements[s]]

    def force_elements(self) -> list[Element]:
        return list(self.elements["forces"])

    # ------------------------------------------------------------- validation
    def validate(self, registry=None) -> None:
        """Check everything; raise :class:`ModelError` naming the key path."""
        if registry is None:
            from ..plugins.manager import registry as _reg
            registry = _reg()
        names: dict[str, str] = {}
        for k, b in enumerate(self.bodies):
            if b.name == self.ground:
                raise ModelError(f"bodies[{k}].name", f"'{b.name}' is the ground's name")
            if b.name in names:
                raise ModelError(f"bodies[{k}].name", f"duplicate body name '{b.name}'")
            names[b.name] = f"bodies[{k}]"
        pts = {}
        ctx = ValidationContext([b.name for b in self.bodies], {}, self.parameters, self.ground,
                                data_dir=os.path.dirname(os.path.abspath(self.source_path))
                                if self.source_path else None,
                                allow_external_data=self.allow_external_data,
                                units=self.unit_system)
        for k, p in enumerate(self.points):
            ctx.check_body(p.body, f"points[{k}].body")
            if p.name in pts:
                raise ModelError(f"points[{k}].name", f"duplicate point name '{p.name}'")
            pts[p.name] = (p.body, p.at)
        ctx.points = pts
        enames: dict[str, str] = {}
        for el in self.constraint_elements() + self.force_elements():
            self._validate_element(el, registry, ctx)
            if el.name in enames:
                raise ModelError(f"{el.path}.name",
                                 f"duplicate element name '{el.name}' (also {enames[el.name]})")
            enames[el.name] = el.path
        if self.impacts:
            from ..solve.impacts import validate_contacts
            self.contacts = validate_contacts(self.impacts, ctx, self.dimensions)
        else:          # what validate_contacts returns, without importing mbcore.solve.impacts
            self.contacts = []
        self.switching = None
        if self.switching_data:
            from ..solve.switching import validate_switching
            self.switching = validate_switching(
                self.switching_data, [e.name for e in self.constraint_elements()]) or None

    def _validate_element(self, el: Element, registry, ctx: ValidationContext) -> None:
        path = el.path
        raw = S.mapping(el.raw, path)
        tname = raw.get("type")
        if tname is None:
            raise ModelError(f"{path}.type", "required key is missing")
        kind = SECTION_KIND[el.section]
        bk = self.body_kind
        if not isinstance(tname, str) or not registry.has(kind, tname, bk):
            raise UnknownTypeError(f"{path}.type", registry.unknown_message(kind, tname, bk))
        cls = registry.get(kind, tname, bk)
        S.string(raw.get("name"), f"{path}.name")
        S.check_keys(raw, ("name", "type", *cls.params), path)
        values: dict[str, Any] = {}
        for key, p in cls.params.items():
            kp = f"{path}.{key}"
            if key in raw and not (raw[key] is None and not p.is_required()):
                values[key] = p.validate(raw[key], kp, ctx)
            elif p.is_required():
                raise ModelError(kp, f"required key is missing ({cls.name}: {p.doc})"
                                 if p.doc else "required key is missing")
            else:
                default = p.default_value()
                if p.kind == "body" and default == "ground":
                    default = self.ground          # "the ground", whatever its name
                values[key] = p.validate(default, kp, ctx) if default is not None else None
        # named points must lie on the body they are used with
        for key, p in cls.params.items():
            v = values.get(key)
            if isinstance(v, NamedPoint):
                body = values.get(p.on) if p.on else None
                if body is not None and v.body != body:
                    raise ModelError(f"{path}.{key}", f"point '{v.name}' lies on body "
                                     f"'{v.body}', not on '{body}' ({p.on})")
                values[key] = v.at
        given = [values[b] for b in cls.bodies if values.get(b) is not None]
        if given and all(b == self.ground for b in given):
            raise ModelError(f"{path}.{cls.bodies[0]}", f"the element acts only on the "
                             f"ground '{self.ground}'")
        bodies = [b for b in given if b != self.ground]
        if len(set(bodies)) != len(bodies):
            raise ModelError(f"{path}.{cls.bodies[-1]}",
                             f"an element cannot connect body '{bodies[-1]}' to itself")
        cls().check(values, path)
        el.type = tname
        el.name = raw["name"]
        el.values = values

    # ---------------------------------------------------------------- compile
    def compile(self, *, kernels: str | None = None, plugins=None, jacobian: str = "auto",
                dense_limit: int | None = None):
        """Validate and compile into a :class:`mbcore.system.System`.

        ``kernels``: ``"compiled"`` or ``"numpy"`` (default: environment variable
        ``MBCORE_KERNELS``, else compiled).  ``plugins``: a PluginManager
        (default: the process-wide one).  ``jacobian``: ``"dense"`` (LAPACK),
        ``"sparse"`` (CSR; sparse Schur complement / SuperLU) or ``"auto"``: dense up
        to ``dense_limit`` coordinates (default ``mbcore.system.DENSE_LIMIT`` = 48,
        the dynamics crossover; the runner uses each analysis' own ``dense_limit``).
        """
        from ..plugins.manager import get_plugin_manager
        from ..system.system import System
        pm = plugins or get_plugin_manager()
        self.validate(pm.registry)
        return System(self, pm.registry, kernels=kernels, jacobian=jacobian,
                      dense_limit=dense_limit)

    # ----------------------------------------------------------- serialisation
    def to_dict(self, *, copy_elements: bool = True) -> dict[str, Any]:
        """The model as plain data.  ``copy_elements=False`` (serialising at once, e.g.
        :meth:`to_text`): the elements' raw dictionaries, impacts and settings are
        shared with the model instead of deep-copied."""
        share = (lambda x: x) if not copy_elements else copy.deepcopy
        d: dict[str, Any] = {"name": self.name}
        if self.description:
            d["description"] = self.description
        if self.units:
            d["units"] = dict(self.units)
        if self.ground != "ground":
            d["ground"] = self.ground
        if self.parameters:
            d["parameters"] = dict(self.parameters)
        if self.dimensions != 2:
            d["dimensions"] = self.dimensions
        if any(self.gravity):
            d["gravity"] = list(self.gravity)
        if self.settings:
            d["settings"] = share(self.settings)
        d["bodies"] = [b.to_dict() for b in self.bodies]
        if self.points:
            d["points"] = [p.to_dict() for p in self.points]
        for s in SECTIONS:
            if self.elements[s]:
                d[s] = [share(e.raw) for e in self.elements[s]]
        if self.impacts:
            d["impacts"] = share(self.impacts)
        if self.switching_data:
            d["switching"] = share(self.switching_data)
        return d

    def to_text(self) -> tuple[str, str]:
        """(text, format): the original file text if unchanged, else JSON."""
        if self.source_text is not None:
            return self.source_text, self.source_format
        # indented JSON goes through the pure-Python encoder: large models (thousands
        # of elements) are written compact, ~10x faster
        big = len(self.bodies) + sum(len(v) for v in self.elements.values()) > 500
        return json.dumps(self.to_dict(copy_elements=False),
                          indent=None if big else 2), "json"

    def save(self, path: str | os.PathLike) -> None:
        path = Path(path)
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml
            path.write_text(yaml.safe_dump(self.to_dict(), sort_keys=False))
        else:
            path.write_text(json.dumps(self.to_dict(), indent=2))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, registry=None, validate: bool = True,
                  source_path: str | None = None,
                  allow_external_data: bool | None = None) -> "Model":
        """A model from model-file data (``source_path``, ``allow_external_data``: as
        for :meth:`from_text`)."""
        from ..elements.limits import check_count
        S.mapping(data, "model")
        S.check_keys(data, TOP_KEYS, "")
        for key in ("bodies", "points", "impacts") + SECTIONS:
            if isinstance(data.get(key), (list, tuple)):
                check_count(len(data[key]), "max_bodies" if key == "bodies" else
                            "max_elements", key, key)
        m = cls(name=S.string(data.get("name", "model"), "name"),
                ground=S.string(data.get("ground", "ground"), "ground"),
                description=S.string(data.get("description", ""), "description",
                                     empty=True))
        if "parameters" in data:
            params = S.mapping(data["parameters"], "parameters")
            m.parameters = {k: S.number(v, f"parameters.{k}") for k, v in params.items()}
        if "settings" in data:
            m.settings = dict(S.mapping(data["settings"], "settings"))
        if "units" in data:
            m.units = {k: S.string(v, f"units.{k}", empty=True)
                       for k, v in S.mapping(data["units"], "units").items()}
        units = m.unit_system          # validated: errors name units.<key>
        if "dimensions" in data:
            dim = data["dimensions"]
            if dim not in (2, 3) or isinstance(dim, bool):
                raise ModelError("dimensions", f"expected 2 (planar) or 3 (spatial), got "
                                               f"{S.describe(dim)}")
            m.dimensions = int(dim)
            m.gravity = (0.0,) * m.dimensions
        for k, b in enumerate(S.sequence(data.get("bodies", []), "bodies")):
            m.bodies.append(_make_body(b, f"bodies[{k}]", m.dimensions, units))
        for k, p in enumerate(S.sequence(data.get("points", []) or [], "points")):
            path = f"points[{k}]"
            S.mapping(p, path)
            S.check_keys(p, POINT_KEYS, path, required=POINT_KEYS)
            m.points.append(Point(S.string(p["name"], f"{path}.name"),
                                  S.string(p["body"], f"{path}.body"),
                                  S.vector(S.quantities(p["at"], f"{path}.at", "length",
                                                        units), f"{path}.at", m.dimensions)))
        for s in SECTIONS:
            for k, e in enumerate(S.sequence(data.get(s, []) or [], s)):
                e = dict(S.mapping(e, f"{s}[{k}]"))
                e.setdefault("name", f"{e.get('type', s[:-1])}{k + 1}")
                m.elements[s].append(Element(s, str(e.get("type")), str(e["name"]), e, index=k))
        if "gravity" in data:
            m.gravity = S.vector(S.quantities(data["gravity"], "gravity", "length/time^2",
                                              units), "gravity", m.dimensions)
        if data.get("impacts"):
            m.impacts = [dict(S.mapping(x, f"impacts[{k}]"))
                         for k, x in enumerate(S.sequence(data["impacts"], "impacts"))]
        if data.get("switching"):
            m.switching_data = dict(S.mapping(data["switching"], "switching"))
        m.source_path = source_path
        m.allow_external_data = allow_external_data
        if validate:
            if registry is None:
                from ..plugins.manager import registry as _reg
                registry = _reg()
            m.validate(registry)
        return m

    @classmethod
    def from_text(cls, text: str, fmt: str = "yaml", *, registry=None,
                  path: str | None = None,
                  allow_external_data: bool | None = None) -> "Model":
        """Parse model-file text (``fmt`` ``yaml`` or ``json``).  ``path``: the file
        it came from (table files are resolved relative to its directory, else to
        the current one); ``allow_external_data``: read table files outside that
        directory (default ``mbcore.elements.limits.limits.allow_external_data``)."""
        data = parse_text(text, fmt, path or "<text>")
        m = cls.from_dict(data, registry=registry, source_path=path,
                          allow_external_data=allow_external_data)
        m.source_text, m.source_format = text, fmt
        return m

    @classmethod
    def from_file(cls, path: str | os.PathLike, *, registry=None,
                  allow_external_data: bool | None = None) -> "Model":
        """Load a YAML (.yaml/.yml) or JSON (.json) model file (at most
        ``mbcore.elements.limits`` ``max_file_bytes``; table files as for :meth:`from_text`)."""
        from ..elements.limits import limits
        p = Path(path)
        try:
            size = p.stat().st_size
            if size > limits.max_file_bytes:
                raise ModelError("", f"model file '{p}' has {size:,} bytes, more than the "
                                     f"limit of {limits.max_file_bytes:,} (mbcore.elements.limits."
                                     f"configure(max_file_bytes=...) to raise it)")
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise ModelError("", f"cannot read model file '{p}': {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise ModelError("", f"cannot read model file '{p}': not UTF-8 text (byte "
                                 f"{exc.start}: {exc.reason})") from None
        fmt = "json" if p.suffix.lower() == ".json" else "yaml"
        m = cls.from_text(text, fmt, registry=registry, path=str(p),
                          allow_external_data=allow_external_data)
        _log.debug("read %s (%s, %d characters): %r", p, fmt, len(text), m)
        return m

    def __repr__(self) -> str:
        nj = len(self.elements["joints"])
        nd = len(self.elements["drivers"])
        nf = len(self.elements["forces"])
        return (f"<Model {self.name!r}: {len(self.bodies)} bodies, {nj} joints, {nd} drivers, "
                f"{nf} forces>")


_LOADER = None
#: tags a model file may carry (given or implied): plain data only (model files are data)
DATA_TAGS = frozenset("tag:yaml.org,2002:" + t for t in
                      ("str", "int", "float", "bool", "null", "seq", "map", "merge"))
#: nodes of a YAML document once its aliases are expanded (an alias bomb stops here)
MAX_YAML_NODES = 10_000_000
#: nesting levels of a model file (YAML or JSON)
MAX_NESTING = 200


def _yaml_loader():
    """``yaml.SafeLoader`` that also reads ``1e9``, ``1e-3``, ``+2E5`` as numbers
    (YAML 1.2; the 1.1 resolver of PyYAML wants a dot: ``1.0e9``) — engineers write
    numbers that way — and leaves dates as strings (no implicit timestamps: a model
    file holds strings, numbers, booleans, lists and mappings only).  libyaml's
    parser (``yaml.CSafeLoader``: the same safe constructor and resolver, C scanner
    and parser, ~10x faster on large model files) where PyYAML was built with it."""
    global _LOADER
    if _LOADER is None:
        import re
        import yaml

        class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):   # type: ignore[misc]
            pass

        Loader.add_implicit_resolver(
            "tag:yaml.org,2002:float",
            re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
            list("-+0123456789"))
        Loader.yaml_implicit_resolvers = {
            ch: [(tag, rx) for tag, rx in rs if tag in DATA_TAGS]
            for ch, rs in Loader.yaml_implicit_resolvers.items()}
        _LOADER = Loader
    return _LOADER


def _check_yaml_nodes(root) -> None:
    """Refuse tags that construct anything but plain data (``!!python/...``,
    ``!!binary``, ``!!timestamp``, ``!!set``, custom tags), recursive aliases, alias
    bombs (more than :data:`MAX_YAML_NODES` nodes once expanded) and nesting deeper
    than :data:`MAX_NESTING` — before anything is constructed.  Iterative: a deep
    document cannot overflow the stack here."""
    import yaml
    size: dict[int, int] = {}           # id(node) -> expanded node count
    stack = [(root, 0, False)]
    open_: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        if done:                # (after its children: a bad tag inside is named first)
            open_.discard(key)
            if isinstance(node, yaml.MappingNode):
                _check_duplicate_keys(node)
            children = _yaml_children(node)
            size[key] = 1 + sum(size[id(c)] for c in children)
            if size[key] > MAX_YAML_NODES:
                raise _yaml_error(node, f"the aliases expand to more than "
                                        f"{MAX_YAML_NODES:,} values (an alias bomb?)")
            continue
        if key in size:
            continue
        if key in open_:
            raise _yaml_error(node, "a recursive alias (a value that contains itself)")
        if node.tag not in DATA_TAGS:
            raise _yaml_error(node, f"tag '{node.tag}' is not allowed: a model file holds "
                                    f"plain data (strings, numbers, booleans, lists, "
                                    f"mappings)")
        if depth > MAX_NESTING:
            raise _yaml_error(node, f"nested more than {MAX_NESTING} levels deep")
        open_.add(key)
        stack.append((node, depth, True))
        if isinstance(node, yaml.CollectionNode):
            stack.extend((c, depth + 1, False) for c in _yaml_children(node))


def _check_duplicate_keys(node) -> None:
    """A key given twice in one mapping is an error (YAML forbids it; PyYAML keeps the
    last silently: ``mass: 1`` then ``mass: 100`` would give 100).  Keys brought in by
    a merge (``<<: *base``) may be overridden, as YAML's merge key allows."""
    import yaml
    seen: dict[str, Any] = {}
    for key, _ in node.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
            continue
        if key.value in seen:
            first = seen[key.value]
            raise _yaml_error(key, f"duplicate key '{key.value}' (first given at line "
                                   f"{first.line + 1}): each key may appear once")
        seen[key.value] = key.start_mark


def _yaml_children(node) -> list:
    import yaml
    if isinstance(node, yaml.MappingNode):
        return [x for pair in node.value for x in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _yaml_error(node, problem: str):
    import yaml
    return yaml.MarkedYAMLError(problem=problem, problem_mark=node.start_mark)


def _json_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text (strings skipped), without parsing."""
    import re
    depth = best = 0
    for tok in re.finditer(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', text):
        c = tok.group()
        if c in "[{":
            depth += 1
            best = max(best, depth)
        elif c in "]}":
            depth -= 1
    return best


class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _json_object(pairs: list) -> dict:
    """A JSON object; a key given twice is an error (json keeps the last silently)."""
    out: dict = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def parse_text(text: str, fmt: str, where: str) -> Any:
    """Parse model-file text as data only (a safe YAML loader / json.loads); tags,
    recursive aliases, alias bombs and deep nesting are refused (docs/model-format.md)."""
    if fmt == "json":
        if _json_depth(text) > MAX_NESTING:
            raise ModelError("", f"{where}: invalid JSON: nested more than {MAX_NESTING} "
                                 f"levels deep")
        try:
            return json.loads(text, object_pairs_hook=_json_object)
        except _DuplicateKey as exc:
            raise ModelError("", f"{where}: invalid JSON: duplicate key '{exc.key}' in "
                                 f"one object: each key may appear once") from None
        except json.JSONDecodeError as exc:
            raise ModelError("", f"{where}: invalid JSON at line {exc.lineno}, "
                                 f"column {exc.colno}: {exc.msg}") from None
        except (ValueError, RecursionError) as exc:   # e.g. an integer of 5000 digits
            raise ModelError("", f"{where}: invalid JSON: {exc}") from None
    import yaml
    try:
        loader = _yaml_loader()(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            _check_yaml_nodes(node)
            return loader.construct_document(node)     # a SafeLoader: data only
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        loc = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ModelError("", f"{where}: invalid YAML{loc}: "
                             f"{getattr(exc, 'problem', None) or exc}") from None
    except (ValueError, RecursionError) as exc:       # e.g. an integer of 5000 digits
        raise ModelError("", f"{where}: invalid YAML: {exc}") from None


#: the dimension of each body key that takes a quantity with a unit ("10 mm")
BODY_DIMENSIONS = {"mass": "mass", "inertia": "mass*length^2", "position": "length",
                   "angle": "angle", "velocity": "length/time",
                   "angular_velocity": "angle/time", "angular_velocity_body": "angle/time",
                   "center_of_mass": "length"}


def _body_quantities(b: Mapping[str, Any], path: str, units: UnitSystem | None) -> Any:
    """A body entry with its strings with units converted to the model's units."""
    out = None
    for key, dim in BODY_DIMENSIONS.items():
        v = b.get(key)
        t = type(v)
        if t is list or t is tuple:
            kinds = set(map(type, v))
            if kinds & {list, tuple}:                         # a 3x3 inertia tensor
                new: Any = [S.quantities(r, f"{path}.{key}[{k}]", dim, units)
                            for k, r in enumerate(v)]
            elif str in kinds:
                new = S.quantities(v, f"{path}.{key}", dim, units)
            else:
                continue
        elif t is str:
            new = S.quantities(v, f"{path}.{key}", dim, units)
        else:
            continue
        if new is not v and new != v:
            out = dict(b) if out is None else out
            out[key] = new
    return b if out is None else out


def _make_body(b: Any, path: str, dimensions: int = 2,
               units: UnitSystem | None = None) -> Body:
    S.mapping(b, path)
    b = _body_quantities(b, path, units)
    kind = b.get("kind", "rigid")
    if kind not in ("rigid", "particle"):
        raise ModelError(f"{path}.kind", f"expected 'rigid' (the default) or 'particle' "
                                         f"(a point mass), got {S.describe(kind)}")
    if kind == "particle":
        return _make_particle(b, path, dimensions)
    if dimensions == 3:
        return _make_spatial_body(b, path)
    S.check_keys(b, BODY_KEYS, path, required=("name",))
    name = S.string(b["name"], f"{path}.name")
    mass = S.number(b.get("mass", 1.0), f"{path}.mass", positive=True)
    inertia = S.number(b.get("inertia", 1.0), f"{path}.inertia", positive=True)
    pos = S.vector(b.get("position", (0.0, 0.0)), f"{path}.position")
    angle = S.number(b.get("angle", 0.0), f"{path}.angle")
    vel = S.vector(b.get("velocity", (0.0, 0.0)), f"{path}.velocity")
    om = S.number(b.get("angular_velocity", 0.0), f"{path}.angular_velocity")
    body = Body(name, mass, inertia, pos, angle, vel, om, _description(b, path),
                shape=_shape(b, path, 2))
    return _frame(body, b, path, 2)


INERTIA_ABOUT = ("center_of_mass", "origin")


def _frame(body: Body, b: Mapping[str, Any], path: str, dimensions: int) -> Body:
    """The body's ``center_of_mass`` and ``inertia_about`` (Nikravesh (1988),
    Problem 9.4), checked: the inertia about the centroid must be positive (a
    positive definite tensor, or a thin rod's)."""
    if b.get("center_of_mass") is not None:
        body.center_of_mass = S.vector(b["center_of_mass"], f"{path}.center_of_mass",
                                       dimensions)
    about = b.get("inertia_about", "center_of_mass")
    if about not in INERTIA_ABOUT:
        raise ModelError(f"{path}.inertia_about", f"expected 'center_of_mass' (the "
                         f"default) or 'origin' (the reference frame's), got "
                         f"{S.describe(about)}")
    body.inertia_about = about
    if about == "origin" and body.center_of_mass is not None:
        Jc = body.centroidal_inertia
        if dimensions == 2 and not Jc > 0.0:
            raise ModelError(f"{path}.inertia", f"the moment of inertia about the origin, "
                             f"{body.inertia:g}, is not larger than m |center_of_mass|^2 = "
                             f"{body.inertia - Jc:g}: the moment about the centre of mass "
                             f"would be {Jc:g}, not positive")
        if dimensions == 3:
            try:
                inertia_tensor([list(r) for r in Jc], f"{path}.inertia")
            except ModelError as exc:
                raise ModelError(f"{path}.inertia", f"about the centre of mass (moved "
                                 f"from the origin by the parallel-axis theorem): "
                                 f"{exc.reason}") from None
    return body


def _shape(b: Mapping[str, Any], path: str, dimensions: int) -> Any:
    """The body's visual ``shape`` as given, checked by mbcore.model.visual."""
    if b.get("shape") is None:
        return None
    from .visual import parse_shapes
    parse_shapes(b["shape"], f"{path}.shape", dimensions)
    return b["shape"]


def _description(b: Mapping[str, Any], path: str) -> str:
    return S.string(b.get("description", ""), f"{path}.description", empty=True)


def _make_particle(b: Any, path: str, dimensions: int) -> Body:
    """A point mass (``kind: particle``): mass, position and velocity only."""
    for key in b:
        if key not in PARTICLE_KEYS and key in SPATIAL_BODY_KEYS + BODY_KEYS:
            raise ModelError(f"{path}.{key}", f"a particle (point mass) has no {key}: it "
                                              f"has mass, position and velocity only")
    S.check_keys(b, PARTICLE_KEYS, path, required=("name",))
    name = S.string(b["name"], f"{path}.name")
    mass = S.number(b.get("mass", 1.0), f"{path}.mass", positive=True)
    pos = S.vector(b.get("position", (0.0,) * dimensions), f"{path}.position", dimensions)
    vel = S.vector(b.get("velocity", (0.0,) * dimensions), f"{path}.velocity", dimensions)
    zero3 = (0.0, 0.0, 0.0)
    return Body(name, mass, 0.0, pos, 0.0, vel, zero3 if dimensions == 3 else 0.0,
                _description(b, path),
                kind="particle3" if dimensions == 3 else "particle")


def _make_spatial_body(b: Any, path: str) -> Body:
    """A spatial body from its model-file entry (Nikravesh (1988), §7.3; orientation
    forms of §6.1.4 and App. A-B)."""
    from ..elements import rotations as R
    from ..elements.orientation_spec import orientation_from_spec
    S.mapping(b, path)
    S.check_keys(b, SPATIAL_BODY_KEYS, path, required=("name",))
    name = S.string(b["name"], f"{path}.name")
    mass = S.number(b.get("mass", 1.0), f"{path}.mass", positive=True)
    J = inertia_tensor(b.get("inertia", (1.0, 1.0, 1.0)), f"{path}.inertia")
    pos = S.vector(b.get("position", (0.0, 0.0, 0.0)), f"{path}.position", 3)
    notes: list[str] = []
    if b.get("orientation") is None:
        p = np.array([1.0, 0.0, 0.0, 0.0])
    else:
        p = orientation_from_spec(b["orientation"], f"{path}.orientation", notes=notes)
    vel = S.vector(b.get("velocity", (0.0, 0.0, 0.0)), f"{path}.velocity", 3)
    if "angular_velocity" in b and "angular_velocity_body" in b:
        raise ModelError(f"{path}.angular_velocity_body", "give angular_velocity (global "
                         "components) or angular_velocity_body, not both")
    if "angular_velocity_body" in b:
        wb = np.array(S.vector(b["angular_velocity_body"], f"{path}.angular_velocity_body", 3))
        om = tuple(float(x) for x in R.A(p) @ wb)
    else:
        om = S.vector(b.get("angular_velocity", (0.0, 0.0, 0.0)),
                      f"{path}.angular_velocity", 3)
    body = Body(name, mass, J, pos, 0.0, vel, om, _description(b, path),
                kind="spatial", orientation=tuple(float(x) for x in p), notes=tuple(notes),
                shape=_shape(b, path, 3))
    return _frame(body, b, path, 3)


#: principal moments within this fraction of the largest are zero (a thin rod)
ROD_MOMENT = 1e-12


def _triangle_inequality(ev: np.ndarray, path: str) -> None:
    """The principal moments of any mass distribution satisfy I_a <= I_b + I_c (each
    is a sum of two second moments Σ m y², Σ m z², ... ≥ 0; equality for a lamina);
    larger moments are a data error (units, axes), refused by name."""
    ev = np.sort(ev)
    if ev[0] < 0.0:
        return                                   # (the definiteness check names it)
    if ev[2] > (ev[0] + ev[1]) * (1.0 + 1e-9):
        shown = ", ".join(f"{x:.6g}" for x in ev)
        raise ModelError(path, f"the principal moments of inertia ({shown}) violate the "
                               f"triangle inequality: the largest, {ev[2]:.6g}, exceeds the "
                               f"sum of the other two, {ev[0] + ev[1]:.6g}; no body has such "
                               f"moments (a flat plate is the limit, with equality): check "
                               f"their units and axes")


def inertia_tensor(value: Any, path: str) -> tuple[tuple[float, ...], ...]:
    """J' from 3 principal moments or a symmetric positive semi-definite 3x3 tensor
    (body axes, about the centroid; Nikravesh (1988), Eqs. 8.22-8.24): positive
    definite, or a thin rod (one principal moment zero, the other two equal: the
    triangle inequality of a body with zero inertia about an axis), whose rotation
    about its axis the joints must fix (checked by the analyses)."""
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(
            isinstance(r, (list, tuple)) for r in value):
        rows = [S.vector(r, f"{path}[{k}]", 3) for k, r in enumerate(value)]
        J = np.array(rows, dtype=float)
        if not np.allclose(J, J.T, rtol=1e-9, atol=1e-12 * max(1.0, np.abs(J).max())):
            raise ModelError(path, f"the inertia tensor must be symmetric, got "
                                   f"{[S.format_vector(r) for r in J]}")
        J = 0.5 * J + 0.5 * J.T               # (no overflow at 1e308)
    else:
        J = np.diag(S.vector(value, path, 3))
    scale = float(np.max(np.abs(J)))
    try:                                     # scaled: no overflow inside LAPACK (1e308)
        ev = np.linalg.eigvalsh(J / scale) * scale if scale > 0.0 else np.zeros(3)
    except np.linalg.LinAlgError:
        raise ModelError(path, f"the eigenvalues of the inertia tensor "
                               f"{[S.format_vector(r) for r in J]} "
                               f"cannot be computed") from None
    if ev.min() > 0.0:          # (a thin rod: its own rule, equal moments, below)
        _triangle_inequality(ev, path)
    if not ev.min() > 0.0:
        big = float(ev.max())
        zero = np.abs(ev) <= ROD_MOMENT * big
        shown = ", ".join(f"{x:.6g}" for x in ev)
        if not big > 0.0 or ev.min() < -ROD_MOMENT * big or zero.sum() > 1:
            hint = ("; a body without rotational inertia is a point mass ('particle3')"
                    if not big > 0.0 and ev.min() == 0.0 else
                    "; zero inertia about more than one axis" if ev.min() >= 0.0 else "")
            raise ModelError(path, f"the inertia tensor must be positive definite, or a "
                                   f"thin rod's with one zero principal moment (eigenvalues "
                                   f"{shown}){hint}")
        others = ev[~zero]
        if abs(others[0] - others[1]) > 1e-9 * big:
            raise ModelError(path, f"a body with zero inertia about one axis is a thin rod: "
                                   f"its other two principal moments must be equal "
                                   f"(eigenvalues {shown})")
        # exactly zero about the rod's axis (no rounding left for the solvers)
        w, V = np.linalg.eigh(J)
        w[np.abs(w) <= ROD_MOMENT * big] = 0.0
        J = (V * w) @ V.T
        J = 0.5 * (J + J.T)
    return tuple(tuple(float(x) for x in r) for r in J)


def _to_data(v: Any) -> Any:
    """Python-API values -> plain model-file data (for to_dict / the stored text)."""
    if hasattr(v, "to_spec"):
        return v.to_spec()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (tuple, list)):
        return [_to_data(x) for x in v]
    if isinstance(v, dict):
        return {k: _to_data(x) for k, x in v.items()}
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    return v
