"""Plots and animations of analysis results (matplotlib, the ``plot`` extra).

* :func:`plot` — time histories of result series (``q/crank.phi``, ``energy``...)
  to a figure or a PNG/PDF/SVG file;
* :func:`snapshot` — the mechanism drawn at one time;
* :func:`animate` — the mechanism moving, to a GIF (Pillow) or MP4 (ffmpeg) file,
  with time and energy overlays.

The mechanism is drawn from the model the result carries (``result.model_text``,
stored in every HDF5 result file and kept by memory results): the model is rebuilt
from that text (data only, through :meth:`mbcore.model.Model.from_text`) and
:func:`geometry` collects, for each body, its joints' attachment points and its
named points in body coordinates, and the elements' own pictures (their optional
``sketch`` method: cam curves, pitch circles, guides and slots, see
:class:`mbcore.elements.base.Sketch`).  A planar body is the outline through its
points (a polygon, a bar, or a dot for a body with a single point), or the largest
closed sketch of its own that holds them (a cam, a gear, a slotted wheel); ground
attachments are hatched anchors; a spatial model is a 3-D stick figure.

matplotlib is imported only when a function here is called; files are written with
the Agg canvas (no display needed, the pyplot backend is not touched).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import numpy as np

from ..elements.base import Sketch
from ..errors import MbcoreError

__all__ = ["PlotError", "Geometry", "BodyShape", "Sketch", "geometry", "plot", "snapshot", "animate",
           "PLOT_FORMATS", "ANIMATION_FORMATS", "playback", "Playback", "MAX_FPS"]

#: file extensions :func:`plot` and :func:`snapshot` write
PLOT_FORMATS = (".png", ".pdf", ".svg")
#: file extensions :func:`animate` writes
ANIMATION_FORMATS = (".gif", ".mp4")


class PlotError(MbcoreError, ValueError):
    """Bad plotting input: unsupported file extension, empty time window, a result
    without a model, a missing optional dependency (matplotlib, ffmpeg)."""


# --------------------------------------------------------------------- matplotlib
def _mpl():
    try:
        import matplotlib
    except ImportError:
        raise PlotError("plotting needs matplotlib, which is not installed: "
                        "pip install 'mbcore[plot]'") from None
    return matplotlib


def _new_figure(figsize, dpi, *, to_file: bool, projection_3d: bool = False):
    """A figure on the Agg canvas when writing files (pyplot untouched), else a
    pyplot figure (shown by notebooks / ``plt.show()``)."""
    _mpl()
    if to_file:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        fig = Figure(figsize=figsize, dpi=dpi)
        FigureCanvasAgg(fig)
    else:
        import matplotlib.pyplot as plt
        fig = plt.figure(figsize=figsize, dpi=dpi)
    return fig


def _check_ext(output, allowed: Sequence[str], what: str) -> Path:
    p = Path(output)
    ext = p.suffix.lower()
    if ext not in allowed:
        hint = " (use .gif, which needs only Pillow)" if what == "animation" else ""
        raise PlotError(f"{p}: unsupported {what} file type {ext or '(none)'!r}; "
                        f"expected one of {', '.join(allowed)}{hint}")
    return p


# ---------------------------------------------------------------------- results
def _as_result(result):
    from .result import Result, ResultBase
    if isinstance(result, ResultBase):
        return result, False
    if isinstance(result, (str, os.PathLike)):
        return Result(result), True
    raise TypeError(f"expected a Result or the path of a result file, got "
                    f"{type(result).__name__}")


def _window(t: np.ndarray, t0, t1) -> np.ndarray:
    """Row mask of ``t0 <= t <= t1``; :class:`PlotError` if it selects nothing."""
    mask = np.ones(t.shape, dtype=bool)
    if t0 is not None:
        mask &= t >= float(t0) - 1e-12 * max(1.0, abs(float(t0)))
    if t1 is not None:
        mask &= t <= float(t1) + 1e-12 * max(1.0, abs(float(t1)))
    if not mask.any():
        span = f"{t[0]:.6g} .. {t[-1]:.6g}" if len(t) else "no rows"
        raise PlotError(f"no output time in the window t0={t0}, t1={t1} (result: {span})")
    return mask


# ----------------------------------------------------------------------- geometry
@dataclass
class BodyShape:
    """What is drawn of one body: its kind (``planar``, ``spatial``, ``particle``,
    ``particle3``) and its points in body coordinates, ``[(label, (x, y[, z]))]``
    (joint attachments labelled by the joint name, named points by their name)."""

    name: str
    kind: str
    points: list[tuple[str, tuple[float, ...]]] = field(default_factory=list)

    def local(self) -> np.ndarray:
        d = 3 if self.kind in ("spatial", "particle3") else 2
        if not self.points:
            return np.zeros((0, d))
        return np.array([p for _, p in self.points], dtype=float).reshape(-1, d)


@dataclass
class Geometry:
    """The drawable description of a model (see :func:`geometry`)."""

    dimensions: int
    ground: str
    bodies: dict[str, BodyShape]
    #: ground attachment points in global coordinates ``[(label, xyz)]``
    anchors: list[tuple[str, tuple[float, ...]]]
    #: force elements between two points (springs...): ``(name, body_i, s_i, body_j, s_j)``
    links: list[tuple[str, str, tuple, str, tuple]]
    length_unit: str = ""
    time_unit: str = "s"
    #: joints between a point of body i and a point of body j, drawn as thin lines
    #: (they show links such as distance or spherical-spherical constraints, and the
    #: travel of a slider along its guide): ``(name, body_i, s_i, body_j, s_j)``
    joint_links: list[tuple[str, str, tuple, str, tuple]] = field(default_factory=list)
    #: the elements' pictures (:meth:`mbcore.elements.base.ConstraintType.sketch`):
    #: ``(element name, Sketch)``, points in the coordinates of the sketch's body
    sketches: list[tuple[str, Sketch]] = field(default_factory=list)

    def positions(self, labels: Sequence[str], q: np.ndarray) -> dict[str, np.ndarray]:
        """Global coordinates of every body's points for the coordinates ``q``
        (shape (N, n) with column labels ``labels``): ``{body: (N, npts, d)}``.
        A body without points gets its reference point (origin of its frame)."""
        col = {lab: k for k, lab in enumerate(labels)}
        q = np.atleast_2d(np.asarray(q, dtype=float))
        out = {}
        for name, b in self.bodies.items():
            s = b.local()
            if not len(s):
                s = np.zeros((1, 3 if b.kind in ("spatial", "particle3") else 2))
            out[name] = _transform(b, s, q, col)
        return out

    def link_positions(self, labels, q, *, joints: bool = False
                       ) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """Global end points ``(name, (N, d), (N, d))`` of :attr:`links` (or of
        :attr:`joint_links` with ``joints=True``)."""
        col = {lab: k for k, lab in enumerate(labels)}
        q = np.atleast_2d(np.asarray(q, dtype=float))
        res = []
        for name, bi, si, bj, sj in (self.joint_links if joints else self.links):
            res.append((name, self._point(bi, si, q, col), self._point(bj, sj, q, col)))
        return res

    def _point(self, body, s, q, col):
        if body == self.ground or body not in self.bodies:
            return np.broadcast_to(np.asarray(s, dtype=float), (q.shape[0], len(s)))
        return _transform(self.bodies[body], np.asarray([s], dtype=float), q, col)[:, 0]

    def body_points(self, body: str, s: np.ndarray, labels: Sequence[str],
                    q: np.ndarray) -> np.ndarray:
        """Global positions (N, n, d) of the points ``s`` (n, d) fixed in ``body``
        (the ground's: unchanged) for the coordinates ``q`` (N, len(labels))."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        s = np.asarray(s, dtype=float)
        if body == self.ground or body not in self.bodies:
            return np.broadcast_to(s, (q.shape[0],) + s.shape)
        return _transform(self.bodies[body], s, q, {lab: k for k, lab in enumerate(labels)})

    def _local(self, body: str, g: np.ndarray, q: np.ndarray, col: dict) -> np.ndarray:
        """Body coordinates (N, 2) of the global planar points ``g`` (N, 2)."""
        b = self.bodies.get(body)
        if body == self.ground or b is None:
            return g
        r = _transform(BodyShape(body, b.kind), np.zeros((1, 2)), q, col)[:, 0]
        d = g - r
        if b.kind != "planar":
            return d
        phi = q[:, col[f"{body}.phi"]]
        c, sn = np.cos(phi), np.sin(phi)
        return np.stack([c * d[:, 0] + sn * d[:, 1], -sn * d[:, 0] + c * d[:, 1]], -1)

    def span(self, labels: Sequence[str], q: np.ndarray) -> float:
        """The largest extent of the bodies' points and anchors over the rows of q."""
        pts = [p.reshape(-1, p.shape[-1]) for p in self.positions(labels, q).values()]
        if self.anchors:
            pts.append(np.asarray([a for _, a in self.anchors], dtype=float))
        pts = np.concatenate([p for p in pts if p.size] or [np.zeros((1, 2))])
        pts = pts[np.all(np.isfinite(pts), axis=1)]
        return max(float(np.max(np.ptp(pts, axis=0))) if len(pts) else 0.0, 1e-300)

    def fitted_sketches(self, labels: Sequence[str], q: np.ndarray
                        ) -> list[tuple[str, Sketch]]:
        """:attr:`sketches` with the extent of every straight line that follows a
        point (a guide, a slot, a rack's pitch line) fitted to the rows of ``q``: the
        travel of that point along the line while it is on it (within
        :data:`FOLLOW_TOL` of the model's span of its ``offset`` from the line, in
        runs of two or more rows: a single
        row is a point crossing the line of a released joint; a result of one or
        two rows counts every row), padded by :data:`SKETCH_PAD` of the span at both
        ends.  A point that does not move along its line gets a segment of
        :data:`SKETCH_MIN` of the span about it.  A line whose point is never on it
        takes the travel seen on the other lines of its body through the same point
        (the unused slots of a wheel), else a segment of :data:`SKETCH_MIN` of the
        span about that point.  The sketch's points become the segment's two ends
        (body coordinates).

        A wheel: on a body with two or more straight slots, all through its frame
        origin, each slot is drawn on both sides of the origin (a model states one
        line for the two opposite slots of a wheel, e.g. a Geneva wheel's; the
        mirrored slot is a further sketch of the same element)."""
        q = np.atleast_2d(np.asarray(q, dtype=float))
        col = {lab: k for k, lab in enumerate(labels)}
        span = self.span(labels, q) if any(sk.follow for _, sk in self.sketches) else 1.0
        lines: dict[int, tuple] = {}            # sketch index: (p0, u, travel or None)
        for k, (name, sk) in enumerate(self.sketches):
            if sk.follow is None or len(sk.points) < 2:
                continue
            p0 = np.asarray(sk.points[0], dtype=float)
            u = np.asarray(sk.points[-1], dtype=float) - p0
            u = u / np.hypot(*u)
            rel = self._local(sk.body, self._point(*sk.follow, q, col), q, col) - p0
            on = np.abs(rel @ np.array([-u[1], u[0]]) - sk.offset) <= FOLLOW_TOL * span
            if len(on) > 2:
                on &= np.r_[False, on[:-1]] | np.r_[on[1:], False]
            t = rel[on] @ u
            lines[k] = (p0, u, (float(t.min()), float(t.max())) if len(t) else None)
        out = []
        for k, (name, sk) in enumerate(self.sketches):
            if k not in lines:
                out.append((name, sk))
                continue
            p0, u, travel = lines[k]
            if travel is None:
                seen = [tr for j, (p, _, tr) in lines.items() if tr is not None
                        and self.sketches[j][1].body == sk.body
                        and np.max(np.abs(p - p0)) <= FOLLOW_TOL * span]
                travel = (min(a for a, _ in seen), max(b for _, b in seen)) if seen \
                    else (0.0, 0.0)
            lo, hi = travel
            if hi - lo < 1e-9 * span:
                lo, hi = lo - 0.5 * SKETCH_MIN * span, hi + 0.5 * SKETCH_MIN * span
            lo, hi = lo - SKETCH_PAD * span, hi + SKETCH_PAD * span
            out.append((name, sk._replace(points=p0 + np.outer([lo, hi], u))))
        wheel: dict[str, list[int]] = {}
        for k, (_, sk) in enumerate(out):
            if sk.kind == "slot" and sk.follow is not None and sk.body in self.bodies:
                a, b = sk.points[0], sk.points[-1]
                d = (b - a) / np.hypot(*(b - a))
                through = abs(a[0] * d[1] - a[1] * d[0]) <= FOLLOW_TOL * span
                wheel.setdefault(sk.body, []).append(k if through else -1)
        for body, ks in wheel.items():
            if len(ks) >= 2 and min(ks) >= 0:
                out += [(out[k][0], out[k][1]._replace(points=-out[k][1].points)) for k in ks]
        return out

    def outlines(self, sketches: Sequence[tuple[str, Sketch]]) -> dict[str, np.ndarray]:
        """Bodies drawn as a shape of their own sketches rather than as the outline
        through their points, ``{body: (n, 2) closed outline in body coordinates}``:
        the largest closed curve or circle sketched on the body (a cam, a pitch
        circle, a wheel) that holds all the body's points.  A body carrying straight
        slots (``sketches`` as fitted by :meth:`fitted_sketches`) has a wheel among
        its candidates: the disc about its frame origin through the slots' outer
        ends (a Geneva wheel), less the discs of its locking arcs (sketches of style
        ``lock``: the concave arcs between the slots)."""
        cand: dict[str, list[np.ndarray]] = {}
        reach: dict[str, float] = {}
        locks: dict[str, list[np.ndarray]] = {}
        for _, sk in sketches:
            b = self.bodies.get(sk.body)
            if b is None or b.kind != "planar":
                continue
            p = np.asarray(sk.points, dtype=float)
            if sk.style == "lock" and len(p) >= 3:
                locks.setdefault(sk.body, []).append(p)
            if sk.kind == "slot" and sk.follow is not None:
                reach[sk.body] = max(reach.get(sk.body, 0.0),
                                     float(np.max(np.hypot(p[:, 0], p[:, 1]))))
            elif sk.kind in ("curve", "circle") and len(p) > 3 and \
                    np.allclose(p[0], p[-1], rtol=0.0, atol=1e-9 * np.ptp(p, axis=0).max()):
                cand.setdefault(sk.body, []).append(p)
        for body, r in reach.items():
            a = np.linspace(0.0, 2.0 * math.pi, 721 if body in locks else 97)
            u = np.stack([np.cos(a), np.sin(a)], -1)
            cand.setdefault(body, []).append(_less_arcs(r, u, locks.get(body, []))[:, None] * u)
        out = {}
        for body, polys in cand.items():
            pts = self.bodies[body].local()
            best = max(((abs(_area(p)), k) for k, p in enumerate(polys)
                        if _holds(p, pts)), default=None)
            if best is not None:
                out[body] = polys[best[1]]
        return out


#: a point is on a sketched line when within this fraction of the model's span of it
FOLLOW_TOL = 1e-5
#: a fitted guide or slot reaches this fraction of the model's span beyond its travel
SKETCH_PAD = 0.03
#: the length (fraction of the span) of a guide or slot whose point does not travel
SKETCH_MIN = 0.2


def _less_arcs(radius: float, u: np.ndarray, arcs: list[np.ndarray]) -> np.ndarray:
    """The radii along the unit directions ``u`` (n, 2) of the disc of ``radius``
    about the origin less the discs of the circles through the ``arcs`` (each
    circle the circumcircle of an arc's first, middle and last points): a ray that
    crosses such a circle and leaves it beyond the rim ends where it enters it.  A
    ray that leaves the circle inside the rim keeps the rim: the wheel's teeth
    beside its slots (a star-shaped outline cannot hold the sliver of the circle
    such a ray crosses first)."""
    r = np.full(len(u), float(radius))
    for arc in arcs:
        a, b, c = arc[0], arc[len(arc) // 2], arc[-1]
        M = 2.0 * np.array([b - a, c - a])
        centre = np.linalg.solve(M, [b @ b - a @ a, c @ c - a @ a])
        rho2 = float((a - centre) @ (a - centre))
        proj = u @ centre
        disc = proj ** 2 - (centre @ centre - rho2)
        hit = (disc >= 0.0) & (proj > 0.0)
        root = np.sqrt(np.where(hit, disc, 0.0))
        cut = hit & (proj + root >= radius) & (proj - root < r)
        r = np.where(cut, np.maximum(proj - root, 0.0), r)
    return r


def _area(p: np.ndarray) -> float:
    """Signed area of the closed polygon p (n, 2) (shoelace formula)."""
    x, y = p[:, 0], p[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1)))


def _holds(poly: np.ndarray, pts: np.ndarray) -> bool:
    """All points ``pts`` (m, 2) inside the closed polygon ``poly`` (n, 2) or on its
    boundary (within 1e-9 of its size): even-odd ray casting, vectorised."""
    if not len(pts):
        return True
    a, b = poly[:-1][None], poly[1:][None]
    p = pts[:, None]
    d = b - a
    tt = np.clip(np.sum((p - a) * d, -1) / np.maximum(np.sum(d * d, -1), 1e-300), 0.0, 1.0)
    near = np.min(np.hypot(*(a + tt[..., None] * d - p).transpose(2, 0, 1)), axis=1)
    cross = ((a[..., 1] > p[..., 1]) != (b[..., 1] > p[..., 1]))
    with np.errstate(divide="ignore", invalid="ignore"):
        xs = a[..., 0] + (p[..., 1] - a[..., 1]) * d[..., 0] / d[..., 1]
    inside = np.sum(cross & (p[..., 0] < xs), axis=1) % 2 == 1
    return bool(np.all(inside | (near <= 1e-9 * np.ptp(poly, axis=0).max())))


def _transform(b: BodyShape, s: np.ndarray, q: np.ndarray, col: dict) -> np.ndarray:
    """Global positions (N, npts, d) of body-fixed points ``s`` (npts, d)."""
    def c(name):
        key = f"{b.name}.{name}"
        if key not in col:
            raise PlotError(f"the result has no coordinate {key!r} in channel q: the model "
                            f"text does not match the recorded coordinates")
        return q[:, col[key]]
    if b.kind == "planar":
        x, y, phi = c("x"), c("y"), c("phi")
        cs, sn = np.cos(phi)[:, None], np.sin(phi)[:, None]
        gx = x[:, None] + cs * s[None, :, 0] - sn * s[None, :, 1]
        gy = y[:, None] + sn * s[None, :, 0] + cs * s[None, :, 1]
        return np.stack([gx, gy], axis=-1)
    if b.kind == "spatial":
        from ..elements.rotations import A
        r = np.stack([c("x"), c("y"), c("z")], axis=-1)
        p = np.stack([c("p0"), c("p1"), c("p2"), c("p3")], axis=-1)
        p = p / np.linalg.norm(p, axis=-1, keepdims=True)
        return r[:, None, :] + np.einsum("nij,kj->nki", A(p), s)
    d = 3 if b.kind == "particle3" else 2
    r = np.stack([c(k) for k in ("x", "y", "z")[:d]], axis=-1)
    return np.broadcast_to(r[:, None, :], (q.shape[0], max(1, s.shape[0]), d)).copy()


def _initial_global(m, body: str, s) -> np.ndarray:
    """Global position of body point ``s`` in the model's initial configuration."""
    s = np.asarray(s, dtype=float)
    if body == m.ground:
        return s
    b = m.body(body)
    r = np.asarray(b.position, dtype=float)
    if b.kind == "planar":
        c, sn = math.cos(b.angle), math.sin(b.angle)
        return r + np.array([c * s[0] - sn * s[1], sn * s[0] + c * s[1]])
    if b.kind == "spatial":
        from ..elements.rotations import A
        p = np.asarray(b.orientation, dtype=float)
        return r + A(p / np.linalg.norm(p)) @ s
    return r


def _initial_local(m, body: str, g) -> tuple[float, ...]:
    """Body coordinates of the global point ``g`` in the initial configuration."""
    g = np.asarray(g, dtype=float)
    if body == m.ground:
        return tuple(float(x) for x in g)
    b = m.body(body)
    d = g - np.asarray(b.position, dtype=float)
    if b.kind == "planar":
        c, sn = math.cos(b.angle), math.sin(b.angle)
        return (float(c * d[0] + sn * d[1]), float(-sn * d[0] + c * d[1]))
    if b.kind == "spatial":
        from ..elements.rotations import A
        p = np.asarray(b.orientation, dtype=float)
        return tuple(float(x) for x in A(p / np.linalg.norm(p)).T @ d)
    return tuple(0.0 for _ in d)


def _add_unique(pts: list, label: str, s, tol: float = 1e-9) -> None:
    s = tuple(float(x) for x in s)
    for _, t in pts:
        if max(abs(a - b) for a, b in zip(s, t)) <= tol:
            return
    pts.append((label, s))


def geometry(source) -> Geometry:
    """The drawable geometry of a model: ``source`` is a :class:`~mbcore.model.Model`,
    a result (its stored model text is parsed as data, never evaluated) or the path
    of a result file.

    For each body: the attachment points of its joints (every point parameter of the
    ``joints`` section on that body, ``point_j`` defaulted from the initial
    configuration as the joint does) and its named points, in body coordinates.
    Joint points on the ground become anchors; force elements between two points
    (springs, dampers, actuators) become links."""
    from ..model.model import Model
    if isinstance(source, Model):
        m = source
    else:
        res, opened = _as_result(source)
        try:
            text, fmt = res.model_text, (res.model_format or "yaml")
        finally:
            if opened:
                res.close()
        if not text or not text.strip():
            raise PlotError("the result carries no model text to draw the mechanism from")
        try:
            m = Model.from_text(text, "json" if fmt == "json" else "yaml")
        except MbcoreError as exc:
            raise PlotError(f"cannot rebuild the model stored in the result to draw it: "
                            f"{exc}") from exc
    from ..plugins.manager import registry as _registry
    from ..system.frames import centroidal_model
    reg = _registry()
    m = centroidal_model(m, reg)      # body coordinates of q's frames (center_of_mass)
    bk = m.body_kind
    bodies = {b.name: BodyShape(b.name, b.kind) for b in m.bodies}
    anchors: list = []
    links: list = []
    jlinks: list = []
    sketches: list = []
    for el in m.elements["joints"]:
        try:
            cls = reg.get("constraint", el.type, bk)
        except Exception:  # pragma: no cover - validated model
            continue
        if getattr(cls, "body_kind", "planar") == "planar" and m.dimensions == 2:
            sketches += _sketches(cls, el, m)
        pts = [(k, p) for k, p in cls.params.items()
               if p.kind in ("vec2", "vec3") and p.on]
        where: dict[str, tuple] = {}
        for key, p in pts:
            body = el.values.get(p.on)
            if body is None:
                continue
            s = el.values.get(key)
            if s is None:
                # the joint computes it from the initial configuration: the body
                # coordinates of the matching point on the other body
                other = key[:-2] + "_i" if key.endswith("_j") else None
                op = cls.params.get(other) if other else None
                so = el.values.get(other) if other else None
                bo = el.values.get(op.on) if op is not None and op.on else None
                if so is None or bo is None:
                    continue
                s = _initial_local(m, body, _initial_global(m, bo, so))
            where[key] = (body, tuple(float(x) for x in s))
            if body == m.ground:
                _add_unique(anchors, el.name, s)
            elif body in bodies:
                _add_unique(bodies[body].points, el.name, s)
        if "point_i" in where and "point_j" in where \
                and where["point_i"][0] != where["point_j"][0]:
            jlinks.append((el.name, *where["point_i"], *where["point_j"]))
    for pnt in m.points:
        if pnt.body in bodies:
            _add_unique(bodies[pnt.body].points, pnt.name, pnt.at)
    for el in m.elements["forces"]:
        v = el.values
        if v.get("body_i") is not None and v.get("body_j") is not None \
                and v.get("point_i") is not None and v.get("point_j") is not None:
            links.append((el.name, v["body_i"], tuple(v["point_i"]),
                          v["body_j"], tuple(v["point_j"])))
    return Geometry(m.dimensions, m.ground, bodies, anchors, links,
                    length_unit=m.units.get("length", ""), time_unit=m.units.get("time", "s"),
                    joint_links=jlinks, sketches=sketches)


def _sketches(cls: type, el, m) -> list[tuple[str, Sketch]]:
    """The element's sketches (``cls().sketch``), checked: each on a body of the
    model, its points an (n, 2) array of finite floats; a failing or malformed
    sketch is a :class:`PlotError` naming the element."""
    from ..elements.base import PackContext
    try:
        out = cls().sketch(el.values, PackContext(m, el.path)) or []
    except MbcoreError:
        raise
    except Exception as exc:
        raise PlotError(f"{el.path} ({el.name}, {el.type}): its sketch failed: "
                        f"{type(exc).__name__}: {exc}") from exc
    res = []
    for sk in out:
        pts = np.asarray(sk.points, dtype=float)
        ok = isinstance(sk, Sketch) and sk.kind in SKETCH_KINDS and pts.ndim == 2 \
            and pts.shape[1] == 2 and len(pts) >= 2 and bool(np.all(np.isfinite(pts))) \
            and (sk.body == m.ground or any(b.name == sk.body for b in m.bodies))
        if not ok:
            raise PlotError(f"{el.path} ({el.name}, {el.type}): sketch() must return "
                            f"Sketch(body, kind, points (n >= 2, 2) finite, ...) with kind in "
                            f"{SKETCH_KINDS} and a body of the model, got {sk!r}")
        res.append((el.name, sk._replace(points=pts)))
    return res


#: the kinds of :class:`Sketch` drawn
SKETCH_KINDS = ("curve", "circle", "segment", "slot")


# ------------------------------------------------------------------------- plot
#: legend entries per column of a legend beside a panel (more: further columns)
LEGEND_ROWS = 12
#: line styles of the 1st, 2nd, ... ten lines of a panel (matplotlib's ten colours)
LINE_STYLES = ("-", "--", ":", "-.")


def plot(result, series: str | Sequence[str], output=None, *, t0: float | None = None,
         t1: float | None = None, title: str | None = None, figsize=None,
         dpi: int = 100, columns: str | Sequence[str] | None = None):
    """Plot result series against time; returns the matplotlib ``Figure``.

    ``series`` are names as the result resolves them (:meth:`ResultBase.locate`):
    ``"q/crank.phi"``, a bare label ``"crank.phi"``, ``"reactions/A.fx"``, or a whole
    channel (``"energy"``: all its columns).  Unknown names raise
    :class:`~mbcore.results.result.ResultKeyError` listing close matches.  Series of one
    channel share an axes; each channel gets its own, stacked with a shared time
    axis.  ``columns``: shell patterns (``"A.*"``, ``"*.phi"``) that keep only the
    matching columns of the named channels.  A panel with one series names it on
    its y axis; a panel with several has a legend beside it (in several columns
    when long; the figure widens to hold it).  Axis labels carry the series' unit
    where the result records one.  ``t0``/``t1`` restrict the time window.  With
    ``output`` (``.png``, ``.pdf``, ``.svg``) the figure is written there."""
    if isinstance(series, str):
        series = [series]
    series = list(series)
    if not series:
        raise PlotError("no series to plot (name a channel or a column, e.g. q/crank.phi)")
    if output is not None:
        output = _check_ext(output, PLOT_FORMATS, "plot")
    _mpl()
    res, opened = _as_result(result)
    try:
        located = [(name, *res.locate(name)) for name in series]   # errors before drawing
        t = np.asarray(res.t)
        mask = _window(t, t0, t1)
        groups: dict[str, list] = {}
        for name, ch, col in located:
            if ch == "t":
                raise PlotError("'t' is the time axis; name a series to plot against it")
            groups.setdefault(ch, []).append(col)
        panels = _panels(res, groups, columns)
        wide = max(len(idx) for _, idx in panels)
        ncol = 0 if wide == 1 else -(-wide // LEGEND_ROWS)
        if figsize is None:
            label_w = max((len(res.channel(ch).labels[k]) for ch, idx in panels
                           for k in idx if len(idx) > 1), default=0)
            figsize = (7.0 + ncol * (0.35 + 0.075 * label_w),
                       max(3.0, 1.6 + 2.0 * len(panels)))
        fig = _new_figure(figsize, dpi, to_file=output is not None)
        fig.set_layout_engine("constrained")
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        tu = _time_unit(res)
        for ax, (ch, idx) in zip(axes, panels):
            info = res.channel(ch)
            data = res.series(ch)
            for n, k in enumerate(idx):     # past 10 lines the colours repeat: dashes
                lab = info.labels[k] if k < len(info.labels) else str(k)
                ax.plot(t[mask], data[mask, k], label=lab, gid=f"series:{ch}/{lab}",
                        linestyle=LINE_STYLES[(n // 10) % len(LINE_STYLES)])
            ax.set_ylabel(_axis_label(res, ch, idx))
            ax.grid(True, alpha=0.3)
            if len(idx) > 1:
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small",
                          ncol=-(-len(idx) // LEGEND_ROWS), borderaxespad=0.0,
                          frameon=False)
        axes[-1].set_xlabel(f"t [{tu}]" if tu else "t")
        fig.suptitle(title if title is not None else (res.model_name or ""))
        if output is not None:
            fig.savefig(output)
        return fig
    finally:
        if opened:
            res.close()


def _panels(res, groups: dict, columns) -> list[tuple[str, list[int]]]:
    """(channel, column indices) per panel; ``columns`` (shell patterns) filters."""
    import fnmatch
    pats = [columns] if isinstance(columns, str) else list(columns or [])
    pats = [p.strip() for c in pats for p in c.split(",") if p.strip()]
    panels = []
    for ch, cols in groups.items():
        info = res.channel(ch)
        idx = list(range(info.width)) if any(c is None for c in cols) else \
            list(dict.fromkeys(cols))
        if pats:
            idx = [k for k in idx if any(fnmatch.fnmatchcase(info.labels[k], p)
                                         for p in pats)]
        if idx:
            panels.append((ch, idx))
    if not panels:
        names = sorted({lab for ch in groups for lab in res.channel(ch).labels})
        raise PlotError(f"no column of {', '.join(groups)} matches --columns "
                        f"{', '.join(pats)} (columns: {', '.join(names[:20])}"
                        f"{', ...' if len(names) > 20 else ''})")
    return panels


def _axis_label(res, ch: str, idx: list[int]) -> str:
    """``channel/label [unit]`` for one series, ``channel [unit]`` for several (the
    unit shown when the columns share one)."""
    info = res.channel(ch)
    units = getattr(info, "units", None) or [info.unit] * info.width
    shared = {units[k] for k in idx if k < len(units)}
    unit = shared.pop() if len(shared) == 1 else ""
    name = f"{ch}/{info.labels[idx[0]]}" if len(idx) == 1 else ch
    return name + (f" [{unit}]" if unit else "")


def _time_unit(res) -> str:
    try:
        from ..model.model import parse_text
        data = parse_text(res.model_text, "json" if res.model_format == "json" else "yaml",
                          "<result model>")
        return str((data.get("units") or {}).get("time", "s"))
    except Exception:
        return "s"


# ----------------------------------------------------------------------- scenes
class _Scene:
    """Artists of one mechanism drawing, updated frame by frame."""

    BODY_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
                   "#e377c2", "#17becf", "#bcbd22", "#7f7f7f")

    #: how each sketch style is drawn (Line2D properties; "color" None: the body's)
    SKETCH_STYLES = {
        "cam": dict(ls="-", lw=1.8, zorder=2.1),
        "pitch": dict(ls="-.", lw=1.1, zorder=2.1),
        "roller": dict(ls="-", lw=1.5, zorder=2.1),
        "face": dict(ls="-", lw=2.0, zorder=2.1),
        "guide": dict(ls="-", lw=1.2, color="0.35", zorder=0.5),
        "slot": dict(ls="-", lw=5.0, color="0.97", zorder=2.5, solid_capstyle="round"),
    }
    KIND_STYLE = {"curve": "cam", "circle": "pitch", "segment": "guide", "slot": "slot"}

    def __init__(self, fig, geo: Geometry, labels, q, t, energy, overlays, fit_q=None):
        self.geo = geo
        self.labels = list(labels)
        self.t = t
        self.energy = energy        # (labels, array) or None
        self.overlays = tuple(overlays or ())
        unknown = [o for o in self.overlays if o not in ("time", "energy")]
        if unknown:
            raise PlotError(f"unknown overlay(s) {unknown}; available: 'time', 'energy'")
        self._q = np.atleast_2d(np.asarray(q, dtype=float))
        self.pos = geo.positions(self.labels, q)          # {body: (N, npts, d)}
        # body frame origins (a body with a single point off its origin is drawn as
        # the bar from its origin to that point)
        origin = Geometry(geo.dimensions, geo.ground,
                          {n: BodyShape(n, b.kind) for n, b in geo.bodies.items()}, [], [])
        self.origin = {n: p[:, 0] for n, p in origin.positions(self.labels, q).items()}
        self.links = geo.link_positions(self.labels, q)
        # joints whose two points stay together (revolute, spherical...) need no line
        ext = np.concatenate([p.reshape(-1, p.shape[-1]) for p in self.pos.values()] or
                             [np.zeros((1, 2))])
        tol = 1e-6 * max(1.0, float(np.ptp(ext, axis=0).max()) if ext.size else 1.0)
        self.jlinks = [(n, a, b) for n, a, b in geo.link_positions(self.labels, q, joints=True)
                       if float(np.max(np.abs(a - b), initial=0.0)) > tol]
        self.spatial = geo.dimensions == 3 or any(
            b.kind in ("spatial", "particle3") for b in geo.bodies.values())
        # the elements' sketches (planar): lines and slots fitted to the travel seen
        # in fit_q (all rows of the result), in global coordinates (N, n, 2) per frame
        self.sketches: list[tuple[str, Sketch, np.ndarray]] = []
        self.shapes: dict[str, np.ndarray] = {}
        if not self.spatial and geo.sketches:
            fitted = geo.fitted_sketches(self.labels, self._q if fit_q is None else fit_q)
            count: dict[str, int] = {}
            for name, sk in fitted:
                k = count[name] = count.get(name, -1) + 1
                self.sketches.append((f"sketch:{name}.{k}", sk,
                                      geo.body_points(sk.body, sk.points, self.labels, q)))
            self.shapes = {b: geo.body_points(b, p, self.labels, q)
                           for b, p in geo.outlines(fitted).items()}
            grooved = {name for name, sk in fitted if sk.kind == "slot"}
            self.jlinks = [x for x in self.jlinks if x[0] not in grooved]   # the slot shows it
        self.fig = fig
        if self.spatial:
            self.ax = fig.add_subplot(111, projection="3d")
        else:
            self.ax = fig.add_subplot(111)
        self.artists: dict[str, Any] = {}
        self._setup()

    # --- limits ----------------------------------------------------------------
    def _all_points(self) -> np.ndarray:
        d = 3 if self.spatial else 2
        chunks = [p.reshape(-1, p.shape[-1])[:, :d] for p in self.pos.values()]
        chunks += [np.asarray([a for _, a in self.geo.anchors], dtype=float).reshape(-1, d)]
        for _, a, b in self.links + self.jlinks:
            chunks += [a.reshape(-1, d), b.reshape(-1, d)]
        chunks += [p.reshape(-1, d) for _, _, p in self.sketches]
        chunks += [p.reshape(-1, d) for p in self.shapes.values()]
        pts = np.concatenate([c for c in chunks if c.size] or [np.zeros((1, d))])
        return pts[np.all(np.isfinite(pts), axis=1)]

    def _setup(self) -> None:
        pts = self._all_points()
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        span = float(np.max(hi - lo))
        if not span > 1e-9 * max(1.0, float(np.max(np.abs(pts)))):
            span = max(1.0, 2.0 * float(np.max(np.abs(pts))))   # a single point: a unit box
        self.scale = span
        pad = 0.08 * span
        ax = self.ax
        unit = f" [{self.geo.length_unit}]" if self.geo.length_unit else ""
        if self.spatial:
            mid = 0.5 * (lo + hi)
            half = 0.5 * span + pad
            ax.set_xlim(mid[0] - half, mid[0] + half)
            ax.set_ylim(mid[1] - half, mid[1] + half)
            ax.set_zlim(mid[2] - half, mid[2] + half)
            try:
                ax.set_box_aspect((1, 1, 1))
            except Exception:  # pragma: no cover - old matplotlib
                pass
            ax.set_xlabel("x" + unit)
            ax.set_ylabel("y" + unit)
            ax.set_zlabel("z" + unit)
        else:
            ax.set_xlim(lo[0] - pad, hi[0] + pad)
            ax.set_ylim(lo[1] - 2 * pad, hi[1] + pad)
            ax.set_aspect("equal", adjustable="box")
            ax.set_xlabel("x" + unit)
            ax.set_ylabel("y" + unit)
            ax.grid(True, alpha=0.25)
            ax.set_axisbelow(True)      # the grid under the bodies' fills (as blitted)
        self._draw_anchors()
        for k, name in enumerate(self.geo.bodies):
            color = self.BODY_COLORS[k % len(self.BODY_COLORS)]
            if self.spatial:
                line, = ax.plot([], [], [], "-", lw=2.5, color=color, gid=f"body:{name}")
                joints, = ax.plot([], [], [], "o", ms=5, mfc="white", mec="k",
                                  gid=f"joints:{name}")
            else:
                line, = ax.plot([], [], "-", lw=2.5, color=color, solid_capstyle="round",
                                gid=f"body:{name}", zorder=2)
                fill = None
                if self.pos[name].shape[1] >= 3 or name in self.shapes:
                    from matplotlib.patches import Polygon
                    fill = Polygon(np.zeros((3, 2)), closed=True, fc=color, alpha=0.25,
                                   ec="none", gid=f"fill:{name}", zorder=1)
                    ax.add_patch(fill)
                joints, = ax.plot([], [], "o", ms=5, mfc="white", mec="k",
                                  gid=f"joints:{name}", zorder=3)
                self.artists[f"fill:{name}"] = fill
            self.artists[f"body:{name}"] = line
            self.artists[f"joints:{name}"] = joints
        # spatial bodies with fewer than two points: their body axes (x, y, z), so
        # that rotation shows
        self.triads: dict[str, np.ndarray] = {}
        if self.spatial:
            h = 0.15 * self.scale
            for name, b in self.geo.bodies.items():
                if b.kind == "spatial" and len(b.points) < 2:
                    ends = _transform(b, h * np.eye(3), self._q,
                                      {lab: k for k, lab in enumerate(self.labels)})
                    self.triads[name] = ends
                    for c, colr in zip("xyz", ("#d62728", "#2ca02c", "#1f77b4")):
                        ln, = ax.plot([], [], [], "-", lw=1.5, color=colr,
                                      gid=f"axis:{name}.{c}")
                        self.artists[f"axis:{name}.{c}"] = ln
        self._draw_sketches()
        for name, _, _ in self.links:
            if self.spatial:
                ln, = ax.plot([], [], [], "--", lw=1, color="0.3", gid=f"link:{name}")
            else:
                ln, = ax.plot([], [], "--", lw=1, color="0.3", gid=f"link:{name}", zorder=1)
            self.artists[f"link:{name}"] = ln
        for name, _, _ in self.jlinks:
            if self.spatial:
                ln, = ax.plot([], [], [], "-", lw=1.2, color="0.45", gid=f"jlink:{name}")
            else:
                ln, = ax.plot([], [], "-", lw=1.2, color="0.45", gid=f"jlink:{name}",
                              zorder=1)
            self.artists[f"jlink:{name}"] = ln
        txt = []
        if "time" in self.overlays:
            txt.append("time")
        if "energy" in self.overlays and self.energy is not None:
            txt.append("energy")
        self.text = None
        if txt:                 # above the axes: it never hides the mechanism
            self.text = ax.text2D(0.0, 1.0, "", transform=ax.transAxes, va="bottom",
                                  family="monospace", fontsize=9) if self.spatial else \
                ax.text(0.0, 1.01, "", transform=ax.transAxes, va="bottom",
                        family="monospace", fontsize=9)
            self.text.set_gid("overlay")
            self.artists["overlay"] = self.text
        self.speed = ""         # e.g. "real time", "0.5x real time" (animate sets it)
        # body names at their points' centroids (or frame origins); planar: the name
        # rendered once as a small image (moving text would be laid out and rasterised
        # again in every frame, the most expensive part of a frame)
        self.names: dict[str, Any] = {}
        for name in self.geo.bodies:
            if self.spatial:
                lab = ax.text(0.0, 0.0, 0.0, name, fontsize=8, color="0.15", ha="center",
                              va="center", gid=f"label:{name}")
            else:
                from matplotlib.offsetbox import AnnotationBbox, OffsetImage
                img = OffsetImage(_text_image(name, 8, self.fig.dpi), zoom=72.0 / self.fig.dpi)
                lab = AnnotationBbox(img, (0.0, 0.0), frameon=False, pad=0.0, zorder=4)
                lab.set_gid(f"label:{name}")
                ax.add_artist(lab)
            self.names[name] = lab
            self.artists[f"label:{name}"] = lab

    def _draw_sketches(self) -> None:
        """One line per sketch (:attr:`SKETCH_STYLES` by its style hint, else by its
        kind), in its body's colour unless the style names one; slots are grooves
        edged in the body's colour."""
        from matplotlib import patheffects
        colors = {n: self.BODY_COLORS[k % len(self.BODY_COLORS)]
                  for k, n in enumerate(self.geo.bodies)}
        for gid, sk, _ in self.sketches:
            style = sk.style if sk.style in self.SKETCH_STYLES else self.KIND_STYLE[sk.kind]
            kw = dict(self.SKETCH_STYLES[style])
            body_color = colors.get(sk.body, "0.35")
            kw.setdefault("color", body_color)
            ln, = self.ax.plot([], [], gid=gid, **kw)
            if style == "slot":
                ln.set_path_effects([patheffects.Stroke(linewidth=kw["lw"] + 2.5,
                                                        foreground=body_color),
                                     patheffects.Normal()])
            self.artists[gid] = ln

    def _draw_anchors(self) -> None:
        ax = self.ax
        if not self.geo.anchors:
            return
        a = np.asarray([p for _, p in self.geo.anchors], dtype=float)
        if self.spatial:
            ax.plot(a[:, 0], a[:, 1], a[:, 2], "^", ms=9, color="0.35", gid="ground")
            return
        from matplotlib.patches import Polygon
        h = 0.04 * self.scale
        for label, (x, y) in self.geo.anchors:
            tri = Polygon([(x, y), (x - 0.7 * h, y - h), (x + 0.7 * h, y - h)], closed=True,
                          fc="0.85", ec="0.3", lw=1, zorder=0)
            ax.add_patch(tri)
            base = Polygon([(x - 1.1 * h, y - h), (x + 1.1 * h, y - h),
                            (x + 1.1 * h, y - 1.5 * h), (x - 1.1 * h, y - 1.5 * h)],
                           closed=True, fc="none", ec="0.3", lw=0.8, hatch="////", zorder=0)
            ax.add_patch(base)
        ax.plot(a[:, 0], a[:, 1], "o", ms=5, mfc="white", mec="k", gid="ground", zorder=3)

    # --- frames ----------------------------------------------------------------
    @staticmethod
    def _outline(p: np.ndarray, closed: bool) -> np.ndarray:
        """Points of one body ordered around their centroid (a polygon outline)."""
        if p.shape[0] <= 2:
            return p
        c = p.mean(axis=0)
        if p.shape[1] == 2:
            order = np.argsort(np.arctan2(p[:, 1] - c[1], p[:, 0] - c[0]))
            p = p[order]
        return np.vstack([p, p[:1]]) if closed else p

    def update(self, i: int) -> list:
        for name in self.geo.bodies:
            p = self.pos[name][i]
            line = self.artists[f"body:{name}"]
            joints = self.artists[f"joints:{name}"]
            n = self.geo.bodies[name].points
            bar = (len(n) == 1 and float(np.max(np.abs(p[0] - self.origin[name][i])))
                   > 1e-6 * self.scale)
            if self.spatial:
                o = self._outline(p, closed=p.shape[0] > 2)
                if bar:
                    o = np.vstack([self.origin[name][i], p[0]])
                elif p.shape[0] == 1:
                    o = np.vstack([p, p])
                line.set_data_3d(o[:, 0], o[:, 1], o[:, 2])
                joints.set_data_3d(p[:, 0], p[:, 1], p[:, 2])
            elif name in self.shapes:       # a cam, a wheel, a gear: its own outline
                o = self.shapes[name][i]
                line.set_data(o[:, 0], o[:, 1])
                self.artists[f"fill:{name}"].set_xy(o)
                joints.set_data(p[:, 0] if n else [], p[:, 1] if n else [])
            else:
                o = self._outline(p, closed=True)
                if bar:                 # a single point off the origin: a bar
                    o = np.vstack([self.origin[name][i], p[0]])
                elif p.shape[0] == 1:   # a single point (or none): a block around it
                    h = 0.025 * self.scale
                    x, y = p[0]
                    o = np.array([[x - h, y - h], [x + h, y - h], [x + h, y + h],
                                  [x - h, y + h], [x - h, y - h]])
                line.set_data(o[:, 0], o[:, 1])
                fill = self.artists.get(f"fill:{name}")
                if fill is not None:
                    fill.set_xy(o)
                if n:
                    joints.set_data(p[:, 0], p[:, 1])
                else:
                    joints.set_data([], [])
        for gid, _, p in self.sketches:
            self.artists[gid].set_data(p[i, :, 0], p[i, :, 1])
        for name, ends in self.triads.items():
            o = self.origin[name][i]
            for k, c in enumerate("xyz"):
                e = ends[i, k]
                self.artists[f"axis:{name}.{c}"].set_data_3d(
                    [o[0], e[0]], [o[1], e[1]], [o[2], e[2]])
        for pref, name, a, b in [("link", *x) for x in self.links] + \
                [("jlink", *x) for x in self.jlinks]:
            ln = self.artists[f"{pref}:{name}"]
            if self.spatial:
                ln.set_data_3d([a[i, 0], b[i, 0]], [a[i, 1], b[i, 1]], [a[i, 2], b[i, 2]])
            else:
                ln.set_data([a[i, 0], b[i, 0]], [a[i, 1], b[i, 1]])
        for name, lab in self.names.items():
            p = self.pos[name][i]
            c = p.mean(axis=0) if p.shape[0] else self.origin[name][i]
            if self.spatial:
                lab.set_position((c[0], c[1]))
                lab.set_3d_properties(c[2], None)
            else:
                lab.xy = lab.xybox = (c[0], c[1])
        if self.text is not None:
            lines = []
            if "time" in self.overlays:
                lines.append(f"t = {self.t[i]:.4g} {self.geo.time_unit}"
                             + (f"   ({self.speed})" if self.speed else ""))
            if "energy" in self.overlays and self.energy is not None:
                labs, e = self.energy
                short = {"kinetic": "T", "potential": "V", "total": "E"}
                parts = [f"{short.get(l, l)} = {e[i, k] + 0.0:.5g}" for k, l in enumerate(labs)
                         if l in short]
                lines.append("  ".join(parts))
            self.text.set_text("\n".join(lines))
        return list(a for a in self.artists.values() if a is not None)


def _text_image(text: str, fontsize: float, dpi: float) -> np.ndarray:
    """RGBA image of ``text`` on a light translucent box, rendered once (Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    f = Figure(figsize=(0.2 + 0.1 * len(text), 0.4), dpi=dpi)
    f.patch.set_alpha(0.0)
    canvas = FigureCanvasAgg(f)
    tx = f.text(0.5, 0.5, text, fontsize=fontsize, color="0.15", ha="center", va="center",
                bbox=dict(fc="white", ec="none", alpha=0.6, pad=0.5))
    canvas.draw()
    box = tx.get_bbox_patch().get_window_extent(canvas.get_renderer())
    a = np.asarray(canvas.buffer_rgba())
    h = a.shape[0]
    y0, y1 = max(0, int(h - box.y1)), min(h, int(math.ceil(h - box.y0)))
    x0, x1 = max(0, int(box.x0)), min(a.shape[1], int(math.ceil(box.x1)))
    return np.array(a[y0:y1, x0:x1])


def _scene_data(res, t0=None, t1=None, every: int = 1):
    if "q" not in res.channels:
        raise PlotError(f"the result has no coordinates (channel q) to draw the mechanism "
                        f"(channels: {res.channels})")
    t = np.asarray(res.t)
    if not len(t):
        raise PlotError("the result has no rows")
    rows = np.flatnonzero(_window(t, t0, t1))[::max(1, int(every))]
    q = np.asarray(res.series("q"))[rows]
    energy = None
    if "energy" in res.channels:
        energy = (res.labels("energy"), np.asarray(res.series("energy"))[rows])
    return t[rows], q, energy


def snapshot(result, t: float | None = None, output=None, *, overlays=("time", "energy"),
             figsize=(6.0, 5.0), dpi: int = 100, title: str | None = None):
    """The mechanism drawn at the output time nearest ``t`` (default: the first row);
    returns the ``Figure`` (with ``output``, also written as PNG/PDF/SVG).

    Artists carry ids (``Artist.get_gid()``): ``body:<name>`` (the outline),
    ``joints:<name>`` (the body's points, in the order of :func:`geometry`),
    ``ground``, ``link:<name>`` (forces), ``jlink:<name>`` (joints whose points
    move apart), ``sketch:<element>.<k>`` (the element's k-th sketch),
    ``axis:<body>.x|y|z`` and ``overlay``."""
    if output is not None:
        output = _check_ext(output, PLOT_FORMATS, "image")
    _mpl()
    res, opened = _as_result(result)
    try:
        geo = geometry(res)
        tt, q, energy = _scene_data(res)
        i = 0 if t is None else int(np.argmin(np.abs(tt - float(t))))
        fig = _new_figure(figsize, dpi, to_file=output is not None)
        scene = _Scene(fig, geo, res.labels("q"), q[i:i + 1], tt[i:i + 1],
                       None if energy is None else (energy[0], energy[1][i:i + 1]), overlays,
                       fit_q=q)
        scene.update(0)
        fig.suptitle(title if title is not None else (res.model_name or ""))
        if output is not None:
            fig.savefig(output)
        return fig
    finally:
        if opened:
            res.close()


#: the highest frame rate of an animation at real-time speed (GIF viewers draw frames
#: shorter than 20 ms slower than asked); a faster run skips rows to stay at it
MAX_FPS = 50.0


class Playback(NamedTuple):
    """How an animation plays (:func:`playback`)."""

    every: int          #: one frame per ``every``-th output row
    fps: float          #: frames per second
    speed: float        #: simulated seconds per second of playback (1: real time)
    frames: int         #: frames in the time window


def playback(t: np.ndarray, fps: float | None = None, every: int | None = None,
             t0: float | None = None, t1: float | None = None) -> Playback:
    """How the output times ``t`` (in ``t0 .. t1``) play: by default in real time —
    one frame per ``every``-th row with ``fps = 1 / (every dt)`` and ``every`` the
    smallest keeping ``fps <= MAX_FPS``; a given ``fps`` or ``every`` is kept."""
    t = np.asarray(t, dtype=float)
    t = t[_window(t, t0, t1)] if t.size else t
    dt = float(np.median(np.diff(t))) if t.size > 1 else 0.0
    if every is None:
        every = 1 if fps is not None or not dt > 0 else max(1, math.ceil(1.0 / (dt * MAX_FPS)
                                                                       - 1e-9))
    every = int(every)
    if fps is None:         # (9 digits: 1 / (0.01000000000000001 * 2) is 50 fps)
        fps = float(f"{min(MAX_FPS, 1.0 / (dt * every)):.9g}") if dt > 0 else 10.0
    speed = fps * dt * every if dt > 0 else 0.0
    return Playback(every, float(fps), speed, len(t[::every]))


def _speed_text(speed: float) -> str:
    if not speed > 0:
        return ""
    if abs(speed - 1.0) < 1e-6:
        return "real time"
    return f"{speed:.3g}x real time"


def animate(result, output, *, fps: float | None = None, every: int | None = None,
            t0: float | None = None, t1: float | None = None,
            overlays: Iterable[str] = ("time", "energy"),
            figsize=(6.0, 5.0), dpi: int = 80, title: str | None = None,
            progress: bool = False) -> Path:
    """Write an animation of the mechanism, one frame per ``every``-th output row in
    ``t0 .. t1``, to ``output``: ``.gif`` (Pillow, always available with
    matplotlib) or ``.mp4`` (needs ffmpeg on the PATH).  By default it plays in real
    time (:func:`playback`: ``fps`` and ``every`` from the output step, at most
    :data:`MAX_FPS` frames per second); the rate is written beside the time.
    ``overlays`` are ``"time"`` and ``"energy"`` (the ``energy`` channel, when the
    analysis records one); ``progress``: a bar of the frames on a terminal's stderr.
    Frames are drawn by blitting the moving artists onto the static background (axes,
    grid, ground), so a frame costs a few milliseconds.  Returns the path written."""
    output = _check_ext(output, ANIMATION_FORMATS, "animation")
    if fps is not None and not fps > 0:
        raise PlotError(f"fps must be positive, got {fps}")
    if every is not None and int(every) < 1:
        raise PlotError(f"every must be a positive integer, got {every}")
    _mpl()
    mp4 = output.suffix.lower() == ".mp4"
    if mp4:
        from matplotlib import animation as manim
        if not manim.writers.is_available("ffmpeg"):
            raise PlotError(f"{output}: writing MP4 needs ffmpeg, which was not found on the "
                            f"PATH; install ffmpeg or write a .gif instead")
    res, opened = _as_result(result)
    try:
        geo = geometry(res)
        every, fps, speed, _ = playback(res.t, fps, every, t0, t1)
        tt, q, energy = _scene_data(res, t0, t1, every)
        fig = _new_figure(figsize, dpi, to_file=True)
        scene = _Scene(fig, geo, res.labels("q"), q, tt, energy, tuple(overlays),
                       fit_q=np.asarray(res.series("q")))
        scene.speed = _speed_text(speed)
        fig.suptitle(title if title is not None else (res.model_name or ""))
        frames = range(len(tt))
        if progress:
            from .progress import progress_bar
            frames = progress_bar(frames, desc=output.name, unit="frame", leave=False)
        images = _blit_frames(fig, scene, frames)
        if mp4:
            _write_mp4(output, images, fps)
        else:
            _write_gif(output, images, fps)
        return output
    finally:
        if opened:
            res.close()


def _blit_frames(fig, scene: "_Scene", frames) -> Iterator[np.ndarray]:
    """RGB frames (H, W, 3): the static parts drawn once, each frame the moving
    artists drawn on a copy of that background."""
    canvas = fig.canvas
    moving = set(scene.update(0))
    # the static artists stacked above a moving one (ground pivots over the bodies)
    # are drawn again with them, in matplotlib's order (zorder, then insertion)
    z = min(a.get_zorder() for a in moving) if moving else 0.0
    children = scene.ax.get_children()
    redraw = [a for a in children if a in moving or (
        a.get_zorder() >= z and a.get_visible() and a.axes is scene.ax
        and not isinstance(a, _axis_types()))]
    redraw.sort(key=lambda a: a.get_zorder())          # (stable: insertion order kept)
    redraw += [a for a in moving if a not in set(redraw)]
    for a in redraw:
        a.set_animated(True)
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    for i in frames:
        canvas.restore_region(background)
        scene.update(i)
        for a in redraw:
            fig.draw_artist(a)
        yield np.array(np.asarray(canvas.buffer_rgba())[..., :3])


def _axis_types() -> tuple:
    """Artists that belong to the axes frame (never redrawn per frame)."""
    from matplotlib.axis import Axis
    from matplotlib.spines import Spine
    from matplotlib.patches import Rectangle
    return (Axis, Spine, Rectangle)


def _write_gif(output: Path, images: Iterator[np.ndarray], fps: float) -> None:
    """An animated GIF (Pillow) with one palette for all frames (the first frame's
    adaptive palette: the mechanism's colours do not change), looping."""
    from PIL import Image
    frames, palette = [], None
    for rgb in images:
        im = Image.fromarray(rgb)
        if palette is None:
            palette = im.quantize(colors=255, method=Image.Quantize.MEDIANCUT)
        frames.append(im.quantize(palette=palette, dither=Image.Dither.NONE))
    if not frames:
        raise PlotError("no frames to write")
    frames[0].save(output, save_all=True, append_images=frames[1:], loop=0,
                   duration=max(20, int(round(1000.0 / fps))), optimize=False)


def _write_mp4(output: Path, images: Iterator[np.ndarray], fps: float) -> None:
    """An H.264 MP4 through ffmpeg (raw RGB frames on its standard input)."""
    import subprocess
    from matplotlib import rcParams
    proc = None
    try:
        for rgb in images:
            if proc is None:
                h, w = rgb.shape[:2]
                cmd = [rcParams["animation.ffmpeg_path"], "-y", "-loglevel", "error",
                       "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}",
                       "-r", f"{fps:.6g}", "-i", "-", "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2",
                       "-pix_fmt", "yuv420p", "-vcodec", "libx264", str(output)]
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
            proc.stdin.write(np.ascontiguousarray(rgb).tobytes())
    finally:
        if proc is not None:
            _, err = proc.communicate()
            if proc.returncode:
                raise PlotError(f"{output}: ffmpeg failed: {err.decode(errors='replace')[-500:]}")
