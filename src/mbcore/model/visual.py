"""Visual shapes of bodies: the optional ``shape`` key of a body in a model file
(docs/viewer.md, docs/model-format.md), checked with key-path errors, and the default
shape of a body without one, from its inertia.

A ``shape`` is one mapping or a list of them, each with exactly one geometry key:

* ``box: [a, b, c]`` — edge lengths along the body's x, y, z (planar: ``[a, b]`` is
  a plate of thickness ``min(a, b) / 4``);
* ``cylinder: {radius: r, length: l, axis: z}`` — ``axis`` one of x, y, z or a vector
  in body coordinates (default z);
* ``sphere: r`` — the radius;
* ``mesh: FILE`` — a triangle mesh (``.stl``, binary or ASCII, or ``.obj``) with an
  optional ``scale`` (a number or three), the path relative to the model file.

and the optional placement keys ``offset`` (the shape's origin in body coordinates;
planar: 2 or 3 numbers) and ``orientation`` (any form a spatial body's orientation
takes, Nikravesh (1988), §6.1.4), and ``color`` (``"#rrggbb"``).

The default shape of a rigid spatial body is the homogeneous box with the body's
principal moments (Meriam & Kraige (2012), App. B: I_x = m (b² + c²) / 12, ...), so
that a² = 6 (I_y + I_z − I_x) / m, aligned with the principal axes; a planar body
gets the homogeneous disc of its polar moment, J = m r² / 2.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..elements import schema as S
from ..errors import ModelError

__all__ = ["Shape", "parse_shapes", "inertia_box", "disc_radius", "read_mesh",
           "SHAPE_KINDS", "SHAPE_KEYS"]

SHAPE_KINDS = ("box", "cylinder", "sphere", "mesh")
SHAPE_KEYS = SHAPE_KINDS + ("offset", "orientation", "color", "scale")
_AXES = {"x": (1.0, 0.0, 0.0), "y": (0.0, 1.0, 0.0), "z": (0.0, 0.0, 1.0)}
_COLOR = re.compile(r"^#[0-9a-fA-F]{6}$")
#: the smallest edge of a default box, as a fraction of its largest (a thin rod or lamina)
MIN_EDGE = 0.05


@dataclass
class Shape:
    """One visual shape in body coordinates: ``kind`` (box, cylinder, sphere, mesh),
    its ``size`` (box: 3 edges; cylinder: radius, length; sphere: radius; mesh: the
    scale per axis), ``axis`` of a cylinder, ``offset`` and rotation ``R`` (3x3, shape
    to body) of its placement, ``color`` (None: the viewer's) and the ``mesh`` file."""

    kind: str
    size: tuple[float, ...]
    offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    R: np.ndarray = field(default_factory=lambda: np.eye(3))
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    color: str | None = None
    mesh: str | None = None


def _axis(value: Any, path: str) -> tuple[float, float, float]:
    if isinstance(value, str):
        if value not in _AXES:
            raise ModelError(path, f"expected x, y, z or a vector, got {value!r}")
        return _AXES[value]
    v = np.array(S.vector(value, path, 3))
    n = float(np.linalg.norm(v))
    if n == 0.0:
        raise ModelError(path, "the axis vector is zero")
    return tuple(float(x) for x in v / n)


def _one(spec: Any, path: str, dimensions: int) -> Shape:
    from ..elements.orientation_spec import orientation_from_spec
    from ..elements.rotations import A
    S.mapping(spec, path)
    S.check_keys(spec, SHAPE_KEYS, path)
    kinds = [k for k in SHAPE_KINDS if k in spec]
    if len(kinds) != 1:
        raise ModelError(path, f"expected exactly one of {', '.join(SHAPE_KINDS)}, got "
                               f"{', '.join(kinds) if kinds else 'none'}")
    kind = kinds[0]
    kp = S.join(path, kind)
    value = spec[kind]
    axis = (0.0, 0.0, 1.0)
    mesh = None
    if "scale" in spec and kind != "mesh":
        raise ModelError(S.join(path, "scale"), "only a mesh has a scale")
    if kind == "box":
        seq = S.sequence(value, kp)
        if dimensions == 2 and len(seq) == 2:
            a, b = S.vector(seq, kp, 2)
            size = (a, b, min(a, b) / 4.0)
        else:
            size = S.vector(seq, kp, 3)
        for k, x in enumerate(size):
            if not x > 0.0:
                raise ModelError(f"{kp}[{k}]", f"expected a positive length, got {x:g}")
    elif kind == "sphere":
        size = (S.number(value, kp, positive=True),)
    elif kind == "cylinder":
        S.mapping(value, kp)
        S.check_keys(value, ("radius", "length", "axis"), kp, required=("radius", "length"))
        size = (S.number(value["radius"], S.join(kp, "radius"), positive=True),
                S.number(value["length"], S.join(kp, "length"), positive=True))
        axis = _axis(value.get("axis", "z"), S.join(kp, "axis"))
    else:
        mesh = S.string(value, kp)
        if Path(mesh).suffix.lower() not in (".stl", ".obj"):
            raise ModelError(kp, f"expected a .stl or .obj file, got {mesh!r}")
        sc = spec.get("scale", 1.0)
        sp = S.join(path, "scale")
        size = (S.vector(sc, sp, 3) if isinstance(sc, (list, tuple))
                else (S.number(sc, sp, positive=True),) * 3)
    offset = (0.0, 0.0, 0.0)
    if "offset" in spec:
        op = S.join(path, "offset")
        seq = S.sequence(spec["offset"], op)
        n = 2 if dimensions == 2 and len(seq) == 2 else 3
        offset = tuple(S.vector(seq, op, n)) + (0.0,) * (3 - n)
    R = np.eye(3)
    if "orientation" in spec:
        R = A(orientation_from_spec(spec["orientation"], S.join(path, "orientation")))
    color = None
    if "color" in spec:
        color = S.string(spec["color"], S.join(path, "color"))
        if not _COLOR.match(color):
            raise ModelError(S.join(path, "color"), f"expected '#rrggbb', got {color!r}")
    return Shape(kind, tuple(size), offset, R, axis, color, mesh)


def parse_shapes(value: Any, path: str, dimensions: int = 3) -> list[Shape]:
    """The shapes of a body's ``shape`` key (one mapping or a list of them); a
    :class:`~mbcore.errors.ModelError` names the key path of a bad entry."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise ModelError(path, "expected at least one shape, got an empty list")
        return [_one(v, S.join(path, i), dimensions) for i, v in enumerate(value)]
    return [_one(value, path, dimensions)]


def inertia_box(mass: float, J: Any) -> tuple[tuple[float, float, float], np.ndarray]:
    """(edges, R): the homogeneous box of mass ``mass`` whose principal moments are
    those of the 3x3 inertia tensor ``J`` (body axes), its edges along the columns
    of ``R`` (the principal axes; the body axes when ``J`` is diagonal).  From
    I_x = m (b² + c²) / 12 and its cyclic forms (Meriam & Kraige (2012), App. B):
    a² = 6 (I_y + I_z − I_x) / m; an edge below ``MIN_EDGE`` of the longest (a rod,
    a lamina) is raised to it."""
    J = np.asarray(J, dtype=float).reshape(3, 3)
    if np.count_nonzero(J - np.diag(np.diag(J))) == 0:
        I, R = np.diag(J).copy(), np.eye(3)
    else:
        I, R = np.linalg.eigh(J)
        if np.linalg.det(R) < 0:
            R[:, 2] = -R[:, 2]
    sq = 6.0 * (I.sum() - 2.0 * I) / mass
    edges = np.sqrt(np.maximum(sq, 0.0))
    edges = np.maximum(edges, MIN_EDGE * edges.max())
    return (float(edges[0]), float(edges[1]), float(edges[2])), R


def disc_radius(mass: float, J: float) -> float:
    """The radius of the homogeneous disc of mass ``mass`` and polar moment ``J``:
    J = m r² / 2 (Meriam & Kraige (2012), App. B)."""
    return math.sqrt(2.0 * J / mass)


def _read_stl(data: bytes, where: str) -> tuple[np.ndarray, np.ndarray]:
    if len(data) >= 84:
        n = int(np.frombuffer(data, "<u4", 1, 80)[0])
        if 84 + 50 * n == len(data):                 # binary STL
            rec = np.dtype([("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
            tri = np.frombuffer(data, rec, n, 84)["v"].reshape(-1, 3).astype(float)
            return tri, np.arange(3 * n).reshape(n, 3)
    text = data.decode("ascii", errors="replace")
    nums = [line.split()[1:4] for line in text.splitlines()
            if line.strip().startswith("vertex")]
    if not nums or len(nums) % 3:
        raise ModelError(where, "not an STL file (no facets)")
    v = np.array(nums, dtype=float)
    return v, np.arange(len(v)).reshape(-1, 3)


def _read_obj(text: str, where: str) -> tuple[np.ndarray, np.ndarray]:
    verts: list[list[float]] = []
    faces: list[list[int]] = []
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "v":
            verts.append([float(x) for x in parts[1:4]])
        elif parts[0] == "f":
            idx = [int(p.split("/")[0]) for p in parts[1:]]
            idx = [i - 1 if i > 0 else len(verts) + i for i in idx]
            faces.extend([idx[0], idx[k], idx[k + 1]] for k in range(1, len(idx) - 1))
    if not verts or not faces:
        raise ModelError(where, "not an OBJ file (no vertices or faces)")
    return np.array(verts, dtype=float), np.array(faces, dtype=np.int64)


def read_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(vertices (n, 3), triangles (m, 3) of vertex indices) of an STL (binary or
    ASCII) or OBJ file (polygons split into fans)."""
    path = Path(path)
    if path.suffix.lower() == ".stl":
        return _read_stl(path.read_bytes(), str(path))
    return _read_obj(path.read_text(errors="replace"), str(path))
