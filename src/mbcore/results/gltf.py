"""Binary glTF 2.0 (``.glb``) export of a result's 3D scene (docs/viewer.md), for
Blender, three.js editors and other tools: the scene of
:func:`mbcore.results.viewer.build_scene` as nodes with triangle meshes (flat
normals) and one animation whose channels move each body node (translation and
rotation samplers, linear interpolation, keyframe times in seconds).  The sketches
of a planar model (slots, guides, pitch lines, cam outlines) are ``LINES``
primitives (mode 1) in their body's node, as the HTML scene draws them; a spring is
the unit coil of :func:`mbcore.results.viewer.spring_coil` (``LINES``) in a node
whose translation, rotation and scale channels stretch it between its attachment
points (:func:`mbcore.results.viewer.spring_poses`).

The container, chunks, accessors and animation samplers follow the Khronos glTF 2.0
specification (Khronos (2021), §3.6 binary data storage: buffers, buffer views
and accessors; §3.11 animations; Ch. 4 the GLB file format).  glTF is y-up: a root node turns mbcore's z-up scene by −90° about x.
Written with NumPy alone (no glTF library)."""
from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from ..model import visual as V
from .viewer import Scene, shape_matrix, spring_coil, spring_poses

__all__ = ["triangles", "to_glb", "read_glb"]

_FLOAT, _ARRAY_BUFFER = 5126, 34962
#: the primitive mode of line segments (pairs of vertices)
LINES = 1


def _box(a: float, b: float, c: float) -> np.ndarray:
    h = 0.5 * np.array([a, b, c])
    v = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float) * h
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    return np.array([[v[q[0]], v[q[k]], v[q[k + 1]]] for q in quads for k in (1, 2)])


def _grid(rings: np.ndarray) -> np.ndarray:
    """Triangles between consecutive rings of points ((n_rings, n_seg + 1, 3))."""
    tri = []
    for i in range(len(rings) - 1):
        a, b = rings[i], rings[i + 1]
        for j in range(rings.shape[1] - 1):
            tri.append([a[j], b[j], b[j + 1]])
            tri.append([a[j], b[j + 1], a[j + 1]])
    return np.array(tri)


def _sphere(r: float, n_lat: int = 12, n_lon: int = 24) -> np.ndarray:
    th = np.linspace(0.0, math.pi, n_lat + 1)[:, None]
    ph = np.linspace(0.0, 2.0 * math.pi, n_lon + 1)[None, :]
    rings = r * np.stack([np.sin(th) * np.cos(ph), np.cos(th) * np.ones_like(ph),
                          -np.sin(th) * np.sin(ph)], axis=-1)
    return _grid(rings)


def _cylinder(r: float, h: float, n: int = 32) -> np.ndarray:
    """Along y (as three.js), centred."""
    ph = np.linspace(0.0, 2.0 * math.pi, n + 1)
    ring = np.stack([r * np.sin(ph), np.zeros_like(ph), r * np.cos(ph)], axis=-1)
    top, bot = ring + [0.0, h / 2, 0.0], ring - [0.0, h / 2, 0.0]
    side = _grid(np.stack([top, bot]))
    c_top, c_bot = np.array([0.0, h / 2, 0.0]), np.array([0.0, -h / 2, 0.0])
    caps = [[c_top, top[j], top[j + 1]] for j in range(n)] + \
           [[c_bot, bot[j + 1], bot[j]] for j in range(n)]
    return np.concatenate([side, np.array(caps)])


def triangles(shape: V.Shape, mesh_data: dict) -> np.ndarray:
    """The triangles ((m, 3, 3), shape coordinates) of ``shape``."""
    if shape.kind == "box":
        return _box(*shape.size)
    if shape.kind == "sphere":
        return _sphere(shape.size[0])
    if shape.kind == "cylinder":
        return _cylinder(*shape.size)
    verts, faces = mesh_data[shape.mesh]
    return (verts * np.asarray(shape.size))[faces]


class _Buffer:
    """The binary chunk: accessors appended 4-byte aligned."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.size = 0
        self.views: list[dict] = []
        self.accessors: list[dict] = []

    def add(self, a: np.ndarray, kind: str, target: int | None = None,
            bounds: bool = False) -> int:
        data = np.ascontiguousarray(a, dtype="<f4").tobytes()
        view = {"buffer": 0, "byteOffset": self.size, "byteLength": len(data)}
        if target is not None:
            view["target"] = target
        self.views.append(view)
        pad = (-len(data)) % 4
        self.parts.append(data + b"\0" * pad)
        self.size += len(data) + pad
        acc = {"bufferView": len(self.views) - 1, "componentType": _FLOAT,
               "count": int(a.shape[0]), "type": kind}
        if bounds:
            flat = np.asarray(a, dtype="<f4").reshape(a.shape[0], -1)
            acc["min"] = [float(x) for x in flat.min(axis=0)]
            acc["max"] = [float(x) for x in flat.max(axis=0)]
        self.accessors.append(acc)
        return len(self.accessors) - 1


def _rgb(color: str) -> list[float]:
    return [int(color[k:k + 2], 16) / 255.0 for k in (1, 3, 5)] + [1.0]


def to_glb(scene: Scene, path: str | os.PathLike) -> dict[str, Any]:
    """Write ``scene`` as a binary glTF file; returns its JSON part."""
    buf = _Buffer()
    nodes: list[dict] = [{"name": "mbcore (z up)", "children": [],
                          "rotation": [-math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5)]}]
    meshes: list[dict] = []
    materials: list[dict] = []
    mat_index: dict[str, int] = {}

    def material(color: str) -> None:
        if color not in mat_index:
            mat_index[color] = len(materials)
            materials.append({"pbrMetallicRoughness": {"baseColorFactor": _rgb(color),
                                                       "metallicFactor": 0.0,
                                                       "roughnessFactor": 0.6}})

    def mesh_node(tri: np.ndarray, color: str, matrix: np.ndarray, name: str) -> int:
        material(color)
        n = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        area = np.linalg.norm(n, axis=1, keepdims=True)
        keep = area[:, 0] > 0.0                   # degenerate ones (a sphere's poles)
        tri, n = tri[keep], n[keep] / area[keep]
        pos = tri.reshape(-1, 3)
        normals = np.repeat(n, 3, axis=0)
        prim = {"attributes": {"POSITION": buf.add(pos, "VEC3", _ARRAY_BUFFER, bounds=True),
                               "NORMAL": buf.add(normals, "VEC3", _ARRAY_BUFFER)},
                "material": mat_index[color]}
        meshes.append({"name": name, "primitives": [prim]})
        nodes.append({"name": name, "mesh": len(meshes) - 1,
                      "matrix": [float(x) for x in np.asarray(matrix).flatten(order="F")]})
        return len(nodes) - 1

    def line_node(pts: np.ndarray, color: str, name: str) -> int:
        """A node with the polyline ``pts`` (m, 3) as LINES (its m - 1 segments)."""
        material(color)
        seg = np.repeat(np.asarray(pts, dtype=float), 2, axis=0)[1:-1]
        prim = {"attributes": {"POSITION": buf.add(seg, "VEC3", _ARRAY_BUFFER, bounds=True)},
                "material": mat_index[color], "mode": LINES}
        meshes.append({"name": name, "primitives": [prim]})
        nodes.append({"name": name, "mesh": len(meshes) - 1})
        return len(nodes) - 1

    body_node: dict[str, int] = {}
    for b in scene.bodies:
        nodes.append({"name": b.name, "children": [],
                      "translation": [float(x) for x in b.position[0]],
                      "rotation": [float(x) for x in b.quaternion[0]]})
        k = len(nodes) - 1
        body_node[b.path] = k
        nodes[0]["children"].append(k)
        for i, s in enumerate(b.shapes):
            nodes[k]["children"].append(
                mesh_node(triangles(s, scene.mesh_data), s.color, shape_matrix(s),
                          f"{b.name}/shape{i}"))
    for i, (parent, p, r, color, _opacity) in enumerate(scene.markers):
        M = np.eye(4)
        M[:3, 3] = p
        k = mesh_node(_sphere(r, 8, 16), color, M, f"marker{i}")
        nodes[body_node.get(parent, 0)]["children"].append(k)     # ground: the root
    for parent, name, pts, color in scene.lines:
        nodes[body_node.get(parent, 0)]["children"].append(
            line_node(pts, color, f"sketch:{name}"))
    spring_node: list[tuple[int, tuple]] = []
    for sp in scene.springs:
        poses = spring_poses(sp.start, sp.end)
        k = line_node(spring_coil(sp.radius), sp.color, f"spring:{sp.name}")
        nodes[k].update(translation=[float(x) for x in poses[0][0]],
                        rotation=[float(x) for x in poses[1][0]],
                        scale=[float(x) for x in poses[2][0]])
        nodes[0]["children"].append(k)
        spring_node.append((k, poses))
    gltf: dict[str, Any] = {"asset": {"version": "2.0", "generator": "mbcore view"},
                            "scene": 0, "scenes": [{"name": scene.title, "nodes": [0]}],
                            "nodes": nodes, "meshes": meshes, "materials": materials}
    if len(scene.t) > 1:
        times = buf.add((scene.t - scene.t[0])[:, None], "SCALAR", bounds=True)
        samplers, channels = [], []
        for b in scene.bodies:
            for prop, values, kind in (("translation", b.position, "VEC3"),
                                       ("rotation", b.quaternion, "VEC4")):
                samplers.append({"input": times, "output": buf.add(values, kind),
                                 "interpolation": "LINEAR"})
                channels.append({"sampler": len(samplers) - 1,
                                 "target": {"node": body_node[b.path], "path": prop}})
        for k, poses in spring_node:
            for prop, values, kind in zip(("translation", "rotation", "scale"), poses,
                                          ("VEC3", "VEC4", "VEC3")):
                samplers.append({"input": times, "output": buf.add(values, kind),
                                 "interpolation": "LINEAR"})
                channels.append({"sampler": len(samplers) - 1,
                                 "target": {"node": k, "path": prop}})
        gltf["animations"] = [{"name": "result", "samplers": samplers, "channels": channels}]
    gltf.update(buffers=[{"byteLength": buf.size}], bufferViews=buf.views,
                accessors=buf.accessors)
    js = json.dumps(gltf, separators=(",", ":")).encode()
    js += b" " * ((-len(js)) % 4)
    binary = b"".join(buf.parts)
    total = 12 + 8 + len(js) + 8 + len(binary)
    with open(path, "wb") as f:
        f.write(struct.pack("<4sII", b"glTF", 2, total))
        f.write(struct.pack("<I4s", len(js), b"JSON") + js)
        f.write(struct.pack("<I4s", len(binary), b"BIN\0") + binary)
    return gltf


def read_glb(path: str | os.PathLike) -> tuple[dict[str, Any], list[np.ndarray]]:
    """(JSON, the float accessors as arrays): a reader of the files :func:`to_glb`
    writes (float accessors, one buffer)."""
    data = Path(path).read_bytes()
    magic, version, total = struct.unpack_from("<4sII", data, 0)
    if magic != b"glTF" or version != 2 or total != len(data):
        raise ValueError(f"{path}: not a glTF 2.0 binary file")
    n_js, kind = struct.unpack_from("<I4s", data, 12)
    gltf = json.loads(data[20:20 + n_js])
    n_bin, kind_bin = struct.unpack_from("<I4s", data, 20 + n_js)
    if kind != b"JSON" or kind_bin != b"BIN\0":
        raise ValueError(f"{path}: bad chunks")
    binary = data[28 + n_js:28 + n_js + n_bin]
    width = {"SCALAR": 1, "VEC3": 3, "VEC4": 4}
    arrays = []
    for acc in gltf["accessors"]:
        view = gltf["bufferViews"][acc["bufferView"]]
        a = np.frombuffer(binary, "<f4", acc["count"] * width[acc["type"]],
                          view["byteOffset"])
        arrays.append(a.reshape(acc["count"], -1))
    return gltf, arrays
