"""3D scene of a result: an interactive, self-contained HTML page (docs/viewer.md).

The page inlines the three.js viewer of meshcat (the PyPI package ``meshcat``,
extra ``mbcore[view]``; its ``meshcat/viewer/dist/main.min.js``
is read as a file, meshcat's Python package is not imported) and feeds it viewer
commands as JSON (``set_object`` with three.js object JSON, ``set_transform``,
``set_property``, ``set_animation``): one object per body (the model's ``shape``, or
the default from its inertia, :mod:`mbcore.model.visual`), the joint points as
small spheres, contact spheres, optional frame triads, and one animation clip per
body with position and quaternion tracks keyed at the result's output rows (at most
``max_frames``, by striding), played in real time; meshcat's animation panel gives
play, pause and the time slider.

Poses: spatial bodies r and the Euler parameters p (Nikravesh (1988), §6.1.4; the
three.js quaternion is (p1, p2, p3, p0)); planar bodies x, y, phi in the plane z = 0
(quaternion (0, 0, sin(phi/2), cos(phi/2))).

Planar bodies without a ``shape`` are drawn from the elements' sketches
(:func:`mbcore.results.plotting.geometry`, as the 2D animation draws them): a body
whose drawing is a closed sketch of its own (a cam's outline, a gear's pitch disc, a
slotted Geneva wheel; :meth:`~mbcore.results.plotting.Geometry.outlines`) is a thin
plate extruded from that outline (a triangulated mesh), and every sketch (slots,
guides, pitch lines and circles, cam curves) is a line fixed in its body's frame.

Translational spring-damper-actuators (element type ``tsda``, planar and spatial) are
drawn as a coil between their two attachment points: a helix of unit length along y
(:func:`spring_coil`) in a node whose keyframed position (point i), quaternion (y
turned onto the direction from point i to point j) and scale (the length along y,
:func:`spring_poses`) stretch it between the points at every keyframe.
"""
from __future__ import annotations

import html
import importlib.util
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import MbcoreError
from ..model import visual as V

__all__ = ["viewer_bundle", "Scene", "build_scene", "scene_commands", "to_html", "view",
           "plate_mesh", "SpringTrack", "spring_coil", "spring_poses",
           "ViewerError", "MAX_FRAMES"]

#: the largest number of animation keyframes per body (the output rows are strided)
MAX_FRAMES = 2000
#: body colours, in the order of the model's bodies
PALETTE = ("#f28e2b", "#59a14f", "#edc948", "#b07aa1", "#e15759", "#76b7b2",
           "#ff9da7", "#9c755f", "#bab0ac", "#4e79a7")
JOINT_COLOR = "#333333"
CONTACT_COLOR = "#ff7f0e"
SPRING_COLOR = "#1f77b4"
#: a spring coil's radius, as a fraction of the scene size, and its number of turns
SPRING_RADIUS = 0.012
SPRING_TURNS = 10


class ViewerError(MbcoreError, ValueError):
    """The scene cannot be made: no meshcat bundle, a result without poses, a mesh
    file that cannot be read."""


def viewer_bundle() -> Path:
    """The path of meshcat's prebuilt viewer script ``meshcat/viewer/dist/main.min.js``
    (found without importing meshcat: its server dependencies are not needed)."""
    spec = importlib.util.find_spec("meshcat")
    if spec is None or not spec.submodule_search_locations:
        raise ViewerError("the 3D viewer needs the meshcat package: pip install "
                          "'mbcore[view]' (or pip install meshcat)")
    for base in spec.submodule_search_locations:
        path = Path(base) / "viewer" / "dist" / "main.min.js"
        if path.is_file():
            return path
    raise ViewerError("the meshcat package has no viewer/dist/main.min.js")


# ------------------------------------------------------------ three.js JSON encoders
def _color(hex_color: str) -> int:
    return int(hex_color[1:], 16)


def _col_major(M: np.ndarray) -> list[float]:
    return [float(x) for x in np.asarray(M, dtype=float).flatten(order="F")]


def _placement(offset: Sequence[float], R: np.ndarray) -> np.ndarray:
    M = np.eye(4)
    M[:3, :3] = R
    M[:3, 3] = offset
    return M


def _y_to(axis: Sequence[float]) -> np.ndarray:
    """The rotation taking the y axis (three.js cylinders) to the unit vector ``axis``
    (Rodrigues' formula)."""
    a = np.asarray(axis, dtype=float)
    y = np.array([0.0, 1.0, 0.0])
    c = float(y @ a)
    if c < -1.0 + 1e-12:
        return np.diag([1.0, -1.0, -1.0])
    v = np.cross(y, a)
    K = np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])
    return np.eye(3) + K + K @ K / (1.0 + c)


def shape_matrix(s: V.Shape) -> np.ndarray:
    """The 4x4 placement of a shape in its body's frame (offset, orientation; a
    cylinder also turned from the y axis of three.js and glTF to its axis)."""
    return _placement(s.offset, s.R @ _y_to(s.axis) if s.kind == "cylinder" else s.R)


def _geometry(uid: str, shape: V.Shape, mesh_data: tuple | None) -> dict[str, Any]:
    if shape.kind == "box":
        a, b, c = shape.size
        return {"uuid": uid, "type": "BoxGeometry", "width": a, "height": b, "depth": c}
    if shape.kind == "sphere":
        return {"uuid": uid, "type": "SphereGeometry", "radius": shape.size[0],
                "widthSegments": 24, "heightSegments": 16}
    if shape.kind == "cylinder":
        r, h = shape.size
        return {"uuid": uid, "type": "CylinderGeometry", "radiusTop": r, "radiusBottom": r,
                "height": h, "radialSegments": 32}
    verts, faces = mesh_data
    return {"uuid": uid, "type": "BufferGeometry", "data": {
        "attributes": {"position": {"itemSize": 3, "type": "Float32Array", "normalized": False,
                                    "array": [float(x) for x in verts.ravel()]}},
        "index": {"itemSize": 1, "type": "Uint32Array",
                  "array": [int(i) for i in faces.ravel()]}}}


def _mesh_object(uid: str, geometry: dict, color: str, matrix: np.ndarray, *,
                 opacity: float = 1.0) -> dict[str, Any]:
    material = {"uuid": uid + "/material", "type": "MeshPhongMaterial",
                "color": _color(color), "side": 2, "transparent": opacity < 1.0,
                "opacity": opacity, "shininess": 30}
    return {"metadata": {"version": 4.5, "type": "Object"},
            "geometries": [geometry], "materials": [material],
            "object": {"uuid": uid, "type": "Mesh", "geometry": geometry["uuid"],
                       "material": material["uuid"], "matrix": _col_major(matrix)}}


def _line_object(uid: str, kind: str, pos: np.ndarray, material: dict,
                 col: np.ndarray | None = None) -> dict[str, Any]:
    """A three.js ``Line`` or ``LineSegments`` through the points ``pos`` (n, 3)
    (optional vertex colours ``col`` (n, 3))."""
    attrs = {"position": {"itemSize": 3, "type": "Float32Array", "normalized": False,
                          "array": [float(x) for x in np.asarray(pos).ravel()]}}
    if col is not None:
        attrs["color"] = {"itemSize": 3, "type": "Float32Array", "normalized": False,
                          "array": [float(x) for x in col.ravel()]}
    geometry = {"uuid": uid + "/geometry", "type": "BufferGeometry",
                "data": {"attributes": attrs}}
    material = dict(material, uuid=uid + "/material", type="LineBasicMaterial")
    return {"metadata": {"version": 4.5, "type": "Object"},
            "geometries": [geometry], "materials": [material],
            "object": {"uuid": uid, "type": kind, "geometry": geometry["uuid"],
                       "material": material["uuid"], "matrix": _col_major(np.eye(4))}}


def _triad(uid: str, scale: float) -> dict[str, Any]:
    pos = np.array([[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0], [0, 0, 1]],
                   dtype=float) * scale
    col = np.array([[1, 0, 0], [1, 0.6, 0], [0, 0.8, 0], [0.6, 1, 0], [0, 0, 1], [0, 0.6, 1]],
                   dtype=float)
    return _line_object(uid, "LineSegments", pos, {"vertexColors": True, "linewidth": 2}, col)


# ------------------------------------------------------------------- the scene
@dataclass
class BodyTrack:
    """One drawn body: its scene path, shapes, and its poses at the keyframes
    (``position`` (n, 3), ``quaternion`` (n, 4) as three.js orders it: x, y, z, w)."""

    name: str
    path: str
    shapes: list[V.Shape]
    position: np.ndarray
    quaternion: np.ndarray


@dataclass
class Scene:
    """A result's scene: the keyframe times (``t`` of the kept output rows), the
    bodies with their poses, joint and contact markers ((parent path, point, radius,
    colour, opacity)), the scene size and centre (for the camera), and the planar flag."""

    t: np.ndarray
    rows: np.ndarray
    bodies: list[BodyTrack]
    markers: list[tuple[str, tuple[float, float, float], float, str, float]]
    center: np.ndarray
    size: float
    planar: bool
    title: str = ""
    mesh_data: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    #: planar elements' sketches drawn as lines: (parent path, name, points (n, 3) in
    #: the parent's frame, colour)
    lines: list[tuple[str, str, np.ndarray, str]] = field(default_factory=list)
    #: the springs (tsda elements) between their attachment points
    springs: list["SpringTrack"] = field(default_factory=list)


@dataclass
class SpringTrack:
    """A spring drawn between its attachment points: ``start`` (point i) and ``end``
    (point j), global, (n, 3) at the keyframes; the coil's ``radius`` and colour."""

    name: str
    path: str
    start: np.ndarray
    end: np.ndarray
    radius: float
    color: str = SPRING_COLOR


def spring_coil(radius: float, turns: int = SPRING_TURNS, per_turn: int = 16) -> np.ndarray:
    """The points (m, 3) of a coil of unit length along y: from the origin a lead to
    y = 0.1, ``turns`` turns of a helix of ``radius`` about the y axis up to y = 0.9
    (x = r sin a, z = r cos a), and a lead to (0, 1, 0)."""
    a = np.linspace(0.0, 2.0 * math.pi * turns, turns * per_turn + 1)
    helix = np.column_stack([radius * np.sin(a), np.linspace(0.1, 0.9, len(a)),
                             radius * np.cos(a)])
    return np.vstack([[0.0, 0.0, 0.0], helix, [0.0, 1.0, 0.0]])


def spring_poses(start: np.ndarray, end: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(position (n, 3), quaternion (n, 4) as x, y, z, w, scale (n, 3)) of the node
    that stretches the unit coil of :func:`spring_coil` from ``start`` to ``end``
    (n, 3): the position is the start, the quaternion turns y onto the unit vector
    u = (end - start) / L (half-way quaternion (y x u, 1 + y . u), normalised; a half
    turn about x for u = -y, y itself for L = 0) and the scale is (1, L, 1)."""
    d = np.asarray(end, dtype=float) - np.asarray(start, dtype=float)
    L = np.linalg.norm(d, axis=1)
    u = np.where(L[:, None] > 0.0, d / np.where(L > 0.0, L, 1.0)[:, None], [0.0, 1.0, 0.0])
    q = np.column_stack([u[:, 2], np.zeros(len(u)), -u[:, 0], 1.0 + u[:, 1]])
    flip = q[:, 3] < 1e-12
    q[flip] = [1.0, 0.0, 0.0, 0.0]
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    scale = np.column_stack([np.ones(len(L)), L, np.ones(len(L))])
    return np.array(start, dtype=float), q, scale


def _rotate(quat: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The vectors v (3,) turned by the unit quaternions ``quat`` (n, 4: x, y, z, w):
    v + 2 w (u x v) + 2 u x (u x v)."""
    u, w = quat[:, :3], quat[:, 3:]
    t = 2.0 * np.cross(u, np.broadcast_to(v, u.shape))
    return v + w * t + np.cross(u, t)


def _load_model(result):
    from ..model.model import Model
    from ..system.frames import centroidal_model      # drawn where q puts the bodies
    return centroidal_model(Model.from_text(result.model_text, result.model_format or "yaml"))


def _mesh_dirs(result, mesh_dir) -> list[Path]:
    dirs = []
    if mesh_dir is not None:
        dirs.append(Path(mesh_dir))
    src = (result.metadata or {}).get("source")
    if src:
        dirs.append(Path(src).parent)
    path = getattr(result, "path", None)
    if path is not None:
        dirs.append(Path(path).parent)
    dirs.append(Path.cwd())
    return dirs


def _read_meshes(shapes: list[V.Shape], dirs: list[Path], where: str,
                 cache: dict) -> None:
    for s in shapes:
        if s.kind != "mesh" or s.mesh in cache:
            continue
        for d in ([Path()] if Path(s.mesh).is_absolute() else dirs):
            f = d / s.mesh
            if f.is_file():
                try:
                    cache[s.mesh] = V.read_mesh(f)
                except (OSError, ValueError) as exc:
                    raise ViewerError(f"{where}: mesh {f}: {exc}") from None
                break
        else:
            raise ViewerError(f"{where}: mesh file {s.mesh!r} not found (looked in "
                              f"{', '.join(str(d) for d in dirs)})")


def _rows(t: np.ndarray, start: float | None, end: float | None, max_frames: int,
          fps: float | None) -> np.ndarray:
    """The kept output rows: those in [start, end], thinned to at most ``fps`` per
    second of simulated time and at most ``max_frames`` by striding (the last row
    always kept)."""
    keep = np.ones(len(t), dtype=bool)
    if start is not None:
        keep &= t >= start
    if end is not None:
        keep &= t <= end
    idx = np.flatnonzero(keep)
    if idx.size == 0:
        raise ViewerError(f"no output rows between t = {start} and t = {end}")
    stride = 1
    if fps is not None and idx.size > 1:
        span = float(t[idx[-1]] - t[idx[0]])
        stride = max(1, int(math.floor((idx.size - 1) / max(span * fps, 1.0))))
    stride = max(stride, math.ceil(idx.size / max_frames))
    out = idx[::stride]
    if out[-1] != idx[-1]:
        out = np.append(out[:-1] if out.size >= max_frames else out, idx[-1])
    return out


def _columns(result, names: list[str]) -> np.ndarray:
    labels = result.labels("q")
    where = {k: i for i, k in enumerate(labels)}
    missing = [n for n in names if n not in where]
    if missing:
        raise ViewerError(f"the result has no coordinates {', '.join(missing)} (channel q)")
    return np.array([where[n] for n in names])


def _attachments(model, dim: int) -> tuple[dict[str, list], list]:
    """Joint points per body ({body: [(point, kind)]}) from the constraint elements'
    ``body_i``/``point_i`` and ``body_j``/``point_j`` parameters, and the contact
    spheres [(body, point, radius)] of ``contact`` force elements."""
    points: dict[str, list] = {}
    for el in model.constraint_elements():
        vals = el.values or el.raw
        for end in ("i", "j"):
            body, pt = vals.get(f"body_{end}"), vals.get(f"point_{end}")
            if isinstance(body, str) and isinstance(pt, (list, tuple)) and len(pt) in (2, 3):
                p = tuple(float(x) for x in pt) + (0.0,) * (3 - len(pt))
                points.setdefault(body, []).append(p)
    contacts = []
    for el in model.force_elements():
        vals = el.values or el.raw
        if el.type != "contact" or not isinstance(vals.get("body"), str):
            continue
        r = vals.get("radius")
        if not isinstance(r, (int, float)) or r <= 0:
            continue
        ends = []
        for key in ("point", "point_b"):
            pt = vals.get(key, (0.0,) * dim if key == "point" else None)
            if isinstance(pt, (list, tuple)) and len(pt) in (2, 3):
                ends.append(tuple(float(x) for x in pt) + (0.0,) * (3 - len(pt)))
        contacts.append((vals["body"], ends, float(r)))
    for el in model.force_elements():        # a group of spheres at their bodies' origins
        vals = el.values or el.raw
        if el.type != "sphere_group" or not isinstance(vals.get("spheres"), (list, tuple)):
            continue
        radii = vals.get("radii") or [vals.get("radius")] * len(vals["spheres"])
        for body, r in zip(vals["spheres"], radii):
            if isinstance(r, (int, float)) and r > 0:
                contacts.append((body, [(0.0, 0.0, 0.0)], float(r)))
    return points, contacts


def _springs(model, bodies: list[BodyTrack], n: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """The tsda elements' attachment points, global, at the keyframes: ``[(name,
    start (n, 3), end (n, 3))]`` (a body's point: position + its rotation of the
    body-coordinates point; the ground's: the point itself)."""
    track = {b.name: b for b in bodies}
    out = []
    for el in model.force_elements():
        vals = el.values or el.raw
        if el.type != "tsda":
            continue
        ends = []
        for end in ("i", "j"):
            body, pt = vals.get(f"body_{end}"), vals.get(f"point_{end}")
            if not isinstance(pt, (list, tuple)) or len(pt) not in (2, 3):
                break
            s = np.array([float(x) for x in pt] + [0.0] * (3 - len(pt)))
            b = track.get(body)
            ends.append(np.tile(s, (n, 1)) if b is None else
                        b.position + _rotate(b.quaternion / np.linalg.norm(
                            b.quaternion, axis=1, keepdims=True), s))
        if len(ends) == 2:
            out.append((el.name, ends[0], ends[1]))
    return out


def _contact_shapes(contacts: list) -> list[V.Shape]:
    """A body drawn by its contact geometry: a sphere per contact point, and the
    cylinder between the two ends of a capsule."""
    shapes = [V.Shape("sphere", (r,), offset=p)
              for p, r in dict.fromkeys((p, r) for ends, r in contacts for p in ends)]
    for ends, r in contacts:
        if len(ends) == 2 and ends[0] != ends[1]:
            a, b = np.asarray(ends[0]), np.asarray(ends[1])
            d = float(np.linalg.norm(b - a))
            shapes.append(V.Shape("cylinder", (r, d), offset=tuple((a + b) / 2.0),
                                  axis=tuple((b - a) / d)))
    return shapes


def _default_shapes(body, dim: int, joint_pts: list) -> list[V.Shape]:
    if body.kind in ("particle", "particle3"):
        return []                                # drawn as a marker sphere
    if dim == 3:
        edges, R = V.inertia_box(body.mass, body.inertia)
        shapes = [V.Shape("box", edges, R=R)]
        for p in dict.fromkeys(joint_pts):       # a stem to each joint point outside it
            p = np.asarray(p, dtype=float)
            d = float(np.linalg.norm(p))
            if np.any(np.abs(R.T @ p) > 0.5005 * np.asarray(edges)):
                shapes.append(V.Shape("cylinder", (0.04 * d, d), offset=tuple(p / 2.0),
                                      axis=tuple(p / d)))
        return shapes
    pts = np.unique(np.round(np.array(joint_pts, dtype=float), 12), axis=0) \
        if joint_pts else np.zeros((0, 3))
    if len(pts) >= 2:                            # a link between its farthest joint points
        d = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1)
        a, b = np.unravel_index(np.argmax(d), d.shape)
        pa, pb = pts[a], pts[b]
        length = float(d[a, b])
        u = (pb - pa) / length
        R = np.array([[u[0], -u[1], 0.0], [u[1], u[0], 0.0], [0.0, 0.0, 1.0]])
        w = 0.12 * length
        return [V.Shape("box", (length + w, w, w / 2.0),
                        offset=tuple(float(x) for x in (pa + pb) / 2.0), R=R)]
    r = V.disc_radius(body.mass, float(body.inertia))
    return [V.Shape("cylinder", (r, r / 4.0), axis=(0.0, 0.0, 1.0))]


#: the colours of sketch lines by style hint (else by kind), see plotting's SKETCH_STYLES
LINE_COLORS = {"slot": "#f4f4f4", "guide": "#595959"}
SKETCH_LINE_COLOR = "#222222"
#: a plate's thickness: this fraction of its outline's reach from the body's origin
PLATE_THICKNESS = 0.1
#: sketch lines lie this fraction of the scene size above their body's shapes
LINE_LIFT = 0.003


def plate_mesh(outline: np.ndarray, thickness: float) -> tuple[np.ndarray, np.ndarray]:
    """The triangles of the plate extruded from the closed planar ``outline`` (n, 2)
    (its last point may repeat the first) between z = -thickness/2 and +thickness/2:
    ``(vertices (m, 3), faces (k, 3))``, outward facing (a last point within 1e-9 of
    the outline's size of the first closes it and is dropped).  Top and bottom are fans
    from the frame origin when the outline is star-shaped about it (its angle about
    the origin turns monotonically once round), else from the outline's centroid;
    the top face's vertices are the outline's points in order (z = +thickness/2)
    then the fan's centre, and faces share no vertex (flat shading)."""
    p = np.asarray(outline, dtype=float)
    if len(p) > 1 and np.allclose(p[0], p[-1], rtol=0.0, atol=1e-9 * np.ptp(p, axis=0).max()):
        p = p[:-1]
    n = len(p)
    x, y = p[:, 0], p[:, 1]
    area = 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))
    ccw = area >= 0.0
    c = np.zeros(2)
    turn = np.diff(np.unwrap(np.arctan2(np.r_[y, y[:1]], np.r_[x, x[:1]])))
    if not (np.all(np.hypot(x, y) > 0.0) and (np.all(turn > 0) if ccw else np.all(turn < 0))):
        cross = x * np.roll(y, -1) - np.roll(x, -1) * y
        c = np.array([np.dot(x + np.roll(x, -1), cross), np.dot(y + np.roll(y, -1), cross)]) \
            / (6.0 * area) if area != 0.0 else p.mean(axis=0)
    h = 0.5 * thickness
    top = np.column_stack([np.vstack([p, c]), np.full(n + 1, h)])
    bot = top * np.array([1.0, 1.0, -1.0])
    i = np.arange(n)
    j = (i + 1) % n
    fan = np.column_stack([np.full(n, n), i, j]) if ccw else np.column_stack([np.full(n, n), j, i])
    a, b = p, p[j]
    if not ccw:
        a, b = b, a
    side = np.stack([np.column_stack([a, -np.full(n, h)]), np.column_stack([b, -np.full(n, h)]),
                     np.column_stack([b, np.full(n, h)]), np.column_stack([a, np.full(n, h)])],
                    axis=1).reshape(-1, 3)
    q = 4 * i[:, None] + 2 * (n + 1)
    quads = np.concatenate([q + [0, 1, 2], q + [0, 2, 3]])
    verts = np.vstack([top, bot, side])
    faces = np.vstack([fan, fan[:, [0, 2, 1]] + (n + 1), quads])
    return verts, faces


def _sketch_drawing(model, result) -> tuple[dict[str, np.ndarray], list]:
    """A planar model's sketched body outlines ``{body: (n, 2)}`` and its sketches
    ``[(element name, Sketch)]`` (guides and slots fitted to all the result's rows), as
    :func:`mbcore.results.plotting.geometry` gives them to the 2D animation."""
    from .plotting import geometry
    geo = geometry(model)
    if not geo.sketches:
        return {}, []
    fitted = geo.fitted_sketches(result.labels("q"), np.asarray(result.series("q")))
    return geo.outlines(fitted), fitted


def _z_reach(shapes: list[V.Shape], mesh_data: dict) -> float:
    """The largest z of the shapes in their body's frame."""
    top = 0.0
    for s in shapes:
        R = shape_matrix(s)[:3, :3]
        if s.kind == "box":
            e = 0.5 * float(np.abs(R[2]) @ np.asarray(s.size))
        elif s.kind == "sphere":
            e = s.size[0]
        elif s.kind == "cylinder":
            e = float(np.abs(R[2]) @ np.array([s.size[0], 0.5 * s.size[1], s.size[0]]))
        else:
            v = mesh_data[s.mesh][0] * np.asarray(s.size)
            e = float(np.max(v @ R[2])) if len(v) else 0.0
        top = max(top, e + float(s.offset[2]))
    return top


def _shape_extent(shapes: list[V.Shape], mesh_data: dict) -> float:
    ext = 0.0
    for s in shapes:
        if s.kind == "box":
            e = 0.5 * float(np.linalg.norm(s.size))
        elif s.kind == "sphere":
            e = s.size[0]
        elif s.kind == "cylinder":
            e = math.hypot(s.size[0], s.size[1] / 2.0)
        else:
            v = mesh_data[s.mesh][0] * np.asarray(s.size)
            e = float(np.max(np.linalg.norm(v, axis=1))) if len(v) else 0.0
        ext = max(ext, e + float(np.linalg.norm(s.offset)))
    return ext


def build_scene(result, *, start: float | None = None, end: float | None = None,
                max_frames: int = MAX_FRAMES, fps: float | None = None,
                mesh_dir: str | os.PathLike | None = None) -> Scene:
    """The scene of ``result`` (a :class:`~mbcore.results.result.Result` or any result
    with channel ``q`` and the model): bodies, their poses at the kept output rows
    (``start``/``end`` in time; ``fps`` thins to that many keyframes per second of
    simulated time; at most ``max_frames``), joint and contact markers."""
    if max_frames < 2:
        raise ViewerError(f"max_frames must be at least 2, got {max_frames}")
    if "q" not in result.channels:
        raise ViewerError("the result has no positions (channel q): nothing to draw")
    model = _load_model(result)
    dim = model.dimensions
    t_all = np.asarray(result.t, dtype=float)
    rows = _rows(t_all, start, end, max_frames, fps)
    q = np.asarray(result.series("q"))[rows]
    t = t_all[rows]
    joint_pts, contacts = _attachments(model, dim)
    outlines, sketches = _sketch_drawing(model, result) if dim == 2 else ({}, [])
    dirs = _mesh_dirs(result, mesh_dir)
    mesh_data: dict = {}
    bodies: list[BodyTrack] = []
    markers: list = []
    n = len(rows)
    for k, body in enumerate(model.bodies):
        spatial = body.kind == "spatial"
        particle = body.kind in ("particle", "particle3")
        if spatial:
            cols = _columns(result, [f"{body.name}.{c}" for c in
                                     ("x", "y", "z", "p0", "p1", "p2", "p3")])
            v = q[:, cols]
            pos, quat = v[:, :3], v[:, [4, 5, 6, 3]]
        elif particle:
            names = ("x", "y", "z") if dim == 3 else ("x", "y")
            v = q[:, _columns(result, [f"{body.name}.{c}" for c in names])]
            pos = np.zeros((n, 3))
            pos[:, :v.shape[1]] = v
            quat = np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))
        else:
            v = q[:, _columns(result, [f"{body.name}.{c}" for c in ("x", "y", "phi")])]
            pos = np.zeros((n, 3))
            pos[:, :2] = v[:, :2]
            quat = np.zeros((n, 4))
            quat[:, 2] = np.sin(0.5 * v[:, 2])
            quat[:, 3] = np.cos(0.5 * v[:, 2])
        where = f"bodies[{k}].shape"
        given = getattr(body, "shape", None)
        own = [(ends, r) for name, ends, r in contacts if name == body.name]
        if given is not None:
            shapes = V.parse_shapes(given, where, dim)
        elif own:                   # no shape, but contact spheres: drawn as those
            shapes = _contact_shapes(own)
        elif body.name in outlines:  # a cam, a gear, a wheel: a plate of its outline
            o = outlines[body.name]
            key = f"sketch:{body.name}"
            mesh_data[key] = plate_mesh(o, PLATE_THICKNESS * float(np.max(np.hypot(*o.T))))
            shapes = [V.Shape("mesh", (1.0, 1.0, 1.0), mesh=key)]
        else:
            shapes = _default_shapes(body, dim, joint_pts.get(body.name, []))
        _read_meshes(shapes, dirs, where, mesh_data)
        color = PALETTE[k % len(PALETTE)]
        for s in shapes:
            if s.color is None:
                s.color = color
        bodies.append(BodyTrack(body.name, f"/mbcore/bodies/{body.name}", shapes, pos, quat))
    # the scene's extent: the body origins over time and the shapes' reach
    allpos = np.concatenate([b.position for b in bodies]) if bodies else np.zeros((1, 3))
    reach = max([_shape_extent(b.shapes, mesh_data) for b in bodies] + [0.0])
    for body, pts in joint_pts.items():
        if body == model.ground:
            allpos = np.concatenate([allpos, np.array(pts)])
    spring_ends = _springs(model, bodies, n)
    for _, a, b in spring_ends:
        allpos = np.concatenate([allpos, a, b])
    track = {b.name: b for b in bodies}
    for _, sk in sketches:
        p = np.asarray(sk.points, dtype=float)
        if sk.body in track:
            reach = max(reach, float(np.max(np.hypot(p[:, 0], p[:, 1]))))
        else:
            allpos = np.concatenate([allpos, np.column_stack([p, np.zeros(len(p))])])
    lo, hi = allpos.min(axis=0) - reach, allpos.max(axis=0) + reach
    size = float(max(np.max(hi - lo), 1e-9))
    center = 0.5 * (lo + hi)
    rj = 0.025 * size
    lines = []
    z_top = max([_z_reach(b.shapes, mesh_data) for b in bodies] + [0.0]) + LINE_LIFT * size
    for k, (name, sk) in enumerate(sketches):   # above all bodies, the ground's beneath
        b = track.get(sk.body)
        z = z_top if b is not None else -z_top
        color = LINE_COLORS.get(sk.style or {"segment": "guide"}.get(sk.kind, sk.kind),
                                SKETCH_LINE_COLOR)
        lines.append((b.path if b is not None else "/mbcore/ground", f"{name}.{k}",
                      np.column_stack([sk.points, np.full(len(sk.points), z)]), color))
    track = {b.name: b.path for b in bodies}
    for body, pts in joint_pts.items():
        parent = track.get(body, "/mbcore/ground" if body == model.ground else None)
        if parent is None:
            continue
        for p in dict.fromkeys(pts):
            markers.append((parent, p, rj, JOINT_COLOR, 1.0))
    for b, body in zip(bodies, model.bodies):
        if body.kind in ("particle", "particle3"):
            markers.append((b.path, (0.0, 0.0, 0.0), 2.0 * rj, PALETTE[
                model.bodies.index(body) % len(PALETTE)], 1.0))
    for body, ends, r in contacts:            # beside a shape: translucent markers
        if body in track and getattr(model.body(body), "shape", None) is not None:
            markers.extend((track[body], p, r, CONTACT_COLOR, 0.6) for p in ends)
    springs = [SpringTrack(name, f"/mbcore/springs/{name}", a, b, SPRING_RADIUS * size)
               for name, a, b in spring_ends]
    title = f"{result.model_name} ({result.analysis})" if result.analysis else result.model_name
    return Scene(t, rows, bodies, markers, center, size, dim == 2, title, mesh_data, lines,
                 springs)


def scene_commands(scene: Scene, *, triads: bool = False, play: bool = True,
                   repetitions: int = 1) -> list[dict[str, Any]]:
    """The meshcat viewer commands (JSON-ready dictionaries) that draw ``scene``: the
    objects, their poses at the first keyframe, the camera and grid fitted to the
    scene, and the animation (keyframe times in seconds, ``fps`` 1: real time)."""
    cmds: list[dict[str, Any]] = []
    for b in scene.bodies:
        for i, s in enumerate(b.shapes):
            uid = f"{b.path}/shape{i}"
            mesh = None
            if s.kind == "mesh":
                verts, faces = scene.mesh_data[s.mesh]
                mesh = (verts * np.asarray(s.size), faces)
            geom = _geometry(uid + "/geometry", s, mesh)
            cmds.append({"type": "set_object", "path": uid,
                         "object": _mesh_object(uid, geom, s.color, shape_matrix(s))})
        if triads:
            uid = f"{b.path}/triad"
            cmds.append({"type": "set_object", "path": uid,
                         "object": _triad(uid, 0.15 * scene.size)})
    for parent, name, pts, color in scene.lines:
        uid = f"{parent}/sketch:{name}"
        cmds.append({"type": "set_object", "path": uid, "object": _line_object(
            uid, "Line", pts, {"color": _color(color), "linewidth": 2})})
    for k, (parent, p, r, color, opacity) in enumerate(scene.markers):
        uid = f"{parent}/marker{k}"
        geom = {"uuid": uid + "/geometry", "type": "SphereGeometry", "radius": r,
                "widthSegments": 16, "heightSegments": 12}
        cmds.append({"type": "set_object", "path": uid,
                     "object": _mesh_object(uid, geom, color, _placement(p, np.eye(3)),
                                            opacity=opacity)})
    poses = {}
    for sp in scene.springs:
        uid = f"{sp.path}/coil"
        cmds.append({"type": "set_object", "path": uid, "object": _line_object(
            uid, "Line", spring_coil(sp.radius), {"color": _color(sp.color), "linewidth": 2})})
        poses[sp.path] = spring_poses(sp.start, sp.end)
    for b in scene.bodies:
        M = np.eye(4)
        M[:3, :3] = _quat_matrix(b.quaternion[0])
        M[:3, 3] = b.position[0]
        cmds.append({"type": "set_transform", "path": b.path, "matrix": _col_major(M)})
    for path, (pos, quat, scale) in poses.items():
        M = np.eye(4)
        M[:3, :3] = _quat_matrix(quat[0]) * scale[0]
        M[:3, 3] = pos[0]
        cmds.append({"type": "set_transform", "path": path, "matrix": _col_major(M)})
    cmds.extend(_camera_and_grid(scene))
    if len(scene.t) > 1:
        t0 = float(scene.t[0])
        times = [float(x) - t0 for x in scene.t]
        anims = []
        for b in scene.bodies:
            anims.append({"path": b.path, "clip": {"fps": 1.0, "name": "default", "tracks": [
                {"name": ".position", "type": "vector3",
                 "keys": [{"time": tk, "value": [float(x) for x in v]}
                          for tk, v in zip(times, b.position)]},
                {"name": ".quaternion", "type": "quaternion",
                 "keys": [{"time": tk, "value": [float(x) for x in v]}
                          for tk, v in zip(times, b.quaternion)]}]}})
        for path, values in poses.items():
            anims.append({"path": path, "clip": {"fps": 1.0, "name": "default", "tracks": [
                {"name": name, "type": kind,
                 "keys": [{"time": tk, "value": [float(x) for x in v]}
                          for tk, v in zip(times, track)]}
                for name, kind, track in zip((".position", ".quaternion", ".scale"),
                                             ("vector3", "quaternion", "vector3"), values)]}})
        cmds.append({"type": "set_animation", "animations": anims,
                     "options": {"play": bool(play), "repetitions": int(repetitions)},
                     "path": ""})
    return cmds


def _quat_matrix(q: np.ndarray) -> np.ndarray:
    from ..elements.rotations import A
    x, y, z, w = q
    return A(np.array([w, x, y, z]) / float(np.linalg.norm(q)))


def _camera_and_grid(scene: Scene) -> list[dict[str, Any]]:
    """Camera looking at the scene's centre from a distance fitted to its size (an
    oblique view; planar: from +z, tilted), near/far planes scaled to it, and
    meshcat's grid (20 x 20 units) scaled to about four scene sizes."""
    L = scene.size
    c = scene.center
    w = np.array([0.25, -0.6, 1.0]) if scene.planar else np.array([1.0, -1.4, 0.8])
    w = 1.1 * L * w / np.linalg.norm(w)
    M = np.eye(4)
    M[:3, 3] = c
    s = 4.0 * L / 20.0
    G = np.diag([s, s, s, 1.0])
    if scene.planar:
        G[2, 3] = -0.3 * L / 4.0
    cam = "/Cameras/default/rotated/<object>"
    return [
        {"type": "set_transform", "path": "/Cameras/default", "matrix": _col_major(M)},
        # the camera's frame is y-up: world (x, y, z) is (x, z, -y) there
        {"type": "set_property", "path": cam, "property": "position",
         "value": [float(w[0]), float(w[2]), float(-w[1])]},
        {"type": "set_property", "path": cam, "property": "near", "value": 1e-3 * L},
        {"type": "set_property", "path": cam, "property": "far", "value": 1e3 * L},
        {"type": "set_transform", "path": "/Grid", "matrix": _col_major(G)},
    ]


_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ margin: 0; }}
#meshcat-pane {{ width: 100vw; height: 100vh; overflow: hidden; }}
#mbcore-caption {{ position: absolute; left: 8px; bottom: 8px; color: #fff;
  font: 13px sans-serif; text-shadow: 0 0 3px black; pointer-events: none; }}
</style>
</head>
<body>
<div id="meshcat-pane"></div>
<div id="mbcore-caption">{caption}</div>
<script>
{bundle}
</script>
<script type="application/json" id="mbcore-scene">{data}</script>
<script>
var viewer = new MeshCat.Viewer(document.getElementById("meshcat-pane"));
var commands = JSON.parse(document.getElementById("mbcore-scene").textContent);
for (var i = 0; i < commands.length; i++) {{ viewer.handle_command(commands[i]); }}
viewer.animator.mixer.timeScale = {speed};
</script>
</body>
</html>
"""


def scene_html(commands: list[dict[str, Any]], *, title: str = "mbcore",
               caption: str = "", speed: float = 1.0) -> str:
    """A self-contained HTML page: the meshcat viewer bundle inlined, then the
    ``commands`` (JSON) handed to ``viewer.handle_command``; ``speed`` the playback
    speed (1: real time)."""
    bundle = viewer_bundle().read_text(encoding="utf-8")
    data = json.dumps(commands, separators=(",", ":"), allow_nan=False)
    data = data.replace("</", "<\\/")
    return _PAGE.format(title=html.escape(title), caption=html.escape(caption),
                        bundle=bundle, data=data, speed=float(speed))


def to_html(result, path: str | os.PathLike, *, start: float | None = None,
            end: float | None = None, fps: float | None = None,
            max_frames: int = MAX_FRAMES, triads: bool = False, play: bool = True,
            speed: float = 1.0, mesh_dir: str | os.PathLike | None = None) -> Scene:
    """Write the interactive 3D page of ``result`` (a result object or an HDF5 file
    name) to ``path``; returns the :class:`Scene` drawn.  See :func:`build_scene` for
    ``start``, ``end``, ``fps``, ``max_frames``; ``triads`` draws each body's frame,
    ``play`` starts the animation on load, ``speed`` scales playback (1: real time)."""
    if isinstance(result, (str, os.PathLike)):
        from .result import Result
        with Result(result) as res:
            return to_html(res, path, start=start, end=end, fps=fps, max_frames=max_frames,
                           triads=triads, play=play, speed=speed, mesh_dir=mesh_dir)
    if not speed > 0:
        raise ViewerError(f"speed must be positive, got {speed}")
    scene = build_scene(result, start=start, end=end, max_frames=max_frames, fps=fps,
                        mesh_dir=mesh_dir)
    cmds = scene_commands(scene, triads=triads, play=play)
    t0, t1 = float(scene.t[0]), float(scene.t[-1])
    caption = (f"{scene.title}: t = {t0:g} to {t1:g}, {len(scene.t)} frames "
               f"(open controls, Animations: play, time)")
    Path(path).write_text(scene_html(cmds, title=scene.title, caption=caption, speed=speed),
                          encoding="utf-8")
    return scene


#: ``mbcore.view(result, "scene.html")``
view = to_html
