"""Body-fixed curves with a parameter ``theta`` for the curve pairs (cams, slots).

 "curve representation" (Nikravesh (1988), §4.2.4, Eqs. 4.21-4.25): a curve
fixed in a body is ``c'(theta)`` in body coordinates; the constraint types need it
with its derivatives up to third order (the third only for the roller and
flat-faced ``gamma``).  Polar form about a body point Q (Eq. 4.25; Q = origin is
Eq. 4.21), with ``e = [cos theta, sin theta]``, ``e_perp = [-sin theta, cos theta]``::

    c'        = s'_Q + s e
    c'_th     = s' e + s e_perp                      (4.22, the tangent g')
    c'_thth   = (s'' - s) e + 2 s' e_perp            (4.23)
    c'_ththth = (s''' - 3 s') e + (3 s'' - s) e_perp  [derived, Nikravesh (1988), §4.2.4–4.2.6]

Model-file spec (key ``curve`` of the types in :mod:`.cams`; exactly one shape key)::

    curve: {radius: R, center: [x, y]}                         circle, s = R
    curve: {polar_series: {polynomial: [p0, p1, ...],
                           cosine: [a1, a2, ...], sine: [b1, b2, ...]},
            center: [x, y]}
        s(theta) = sum_k p_k theta^k + sum_k (a_k cos k theta + b_k sin k theta)
    curve: {polar: {theta: [...], s: [...], degrees: false, periodic: auto,
                    bc: not-a-knot}, center: [x, y]}
        s(theta) = the cubic spline (scipy.interpolate.CubicSpline) through the table;
        periodic (bc "periodic") when the table closes (span 2 pi, s[-1] == s[0]);
        else bc: not-a-knot | natural | clamped (zero end slopes) |
        [[order, value], [order, value]] (s' or s'' given at the first / last point)
    curve: {xy: {theta: [...], x: [...], y: [...], periodic: false, bc: ...},
            center: [x, y]}
        parametric: c' = center + [x(theta), y(theta)], two cubic splines

``center`` (default ``[0, 0]``) is ``s'_Q``.  Outside a non-periodic table the end
pieces are extended (the curve goes on smoothly; nothing stops the contact there).

Packed layout (one block of :data:`CURVE_SIZE` floats per element, evaluated
identically by the NumPy reference :func:`evaluate` and the compiled kernels in
``mbcore._ext._planar``)::

    [0] kind   (0 polar series, 1 polar spline, 2 xy splines)
    [1] n1     series: number of polynomial coefficients; splines: pieces N
    [2] n2     series: number of harmonics; splines: period (0: not periodic)
    [3] Q_x, [4] Q_y
    [5 ...]    series: p_0..p_{n1-1}, a_1..a_{n2}, b_1..b_{n2}
               polar spline: breaks x_0..x_N, then per piece [c3, c2, c1, c0]
               xy splines: breaks, x pieces [c3, c2, c1, c0] x N, y pieces x N
    (spline pieces in the local variable theta - x_i, highest power first)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mbcore.errors import ModelError
from mbcore.elements.schema import Param, check_keys, join, mapping, number, sequence, vector

#: floats in one packed curve block (header + data)
CURVE_SIZE = 2048
CURVE_HEADER = 5
CURVE_DATA = CURVE_SIZE - CURVE_HEADER
K_SERIES, K_POLAR_SPLINE, K_XY_SPLINE = 0, 1, 2
#: most pieces of a polar table (points - 1): a full turn at 1 degree needs 360
MAX_POLAR_PIECES = (CURVE_DATA - 1) // 5
#: most pieces of an xy table
MAX_XY_PIECES = (CURVE_DATA - 1) // 9
SHAPES = ("radius", "polar_series", "polar", "xy")
SPLINE_BC = ("not-a-knot", "natural", "clamped")
TWO_PI = 2.0 * math.pi


# =====================================================================================
# the curve value object
# =====================================================================================
@dataclass(frozen=True, eq=False)
class Curve:
    """A validated curve spec (see the module docstring) and its packed block.
    Curves are equal when their packed blocks are."""

    shape: str                                  # one of SHAPES
    center: tuple[float, float]
    spec: dict = field(compare=False, repr=False)
    block: np.ndarray = field(compare=False, repr=False)

    def to_spec(self) -> dict:
        """The model-file data of this curve (plain lists and numbers)."""
        return _plain(self.spec)

    def __eq__(self, other) -> bool:
        return isinstance(other, Curve) and np.array_equal(self.block, other.block)

    def __hash__(self) -> int:
        return hash(self.block.tobytes())

    @property
    def periodic(self) -> bool:
        """The curve repeats with theta -> theta + 2 pi (a closed outline)."""
        b = self.block
        if b[0] == K_SERIES:
            return b[1] <= 1
        return b[2] > 0

    def domain(self) -> tuple[float, float]:
        """A theta range covering the curve once (where the initial estimate is
        searched): the table range, else [-pi, pi]."""
        b = self.block
        if b[0] == K_SERIES:
            return -math.pi, math.pi
        n = int(b[1])
        return float(b[CURVE_HEADER]), float(b[CURVE_HEADER + n])

    def __call__(self, theta):
        """``(c', c'_th, c'_thth, c'_ththth)`` in body coordinates, each (..., 2)."""
        th = np.atleast_1d(np.asarray(theta, dtype=float))
        blocks = np.broadcast_to(self.block, (th.size, CURVE_SIZE))
        out = evaluate(blocks, th.ravel())
        return tuple(o.reshape(th.shape + (2,)) for o in out)

    def s(self, theta):
        """The polar radius and its derivatives ``(s, s', s'', s''')`` (polar shapes)."""
        b = self.block
        if b[0] == K_XY_SPLINE:
            raise ValueError("an xy curve has no polar radius s(theta)")
        th = np.atleast_1d(np.asarray(theta, dtype=float)).ravel()
        blk = np.broadcast_to(b, (th.size, CURVE_SIZE))
        return _series_jet(blk, th) if b[0] == K_SERIES else _spline_jet(blk, th, 0)


# =====================================================================================
# parsing and validation (ModelError names the key path)
# =====================================================================================
def _plain(v: Any) -> Any:
    """Model-file data from Python-API values (numpy arrays and scalars, tuples)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, (np.floating, np.integer, np.bool_)):
        return v.item()
    return v


def _numbers(value: Any, path: str, min_len: int = 1) -> list[float]:
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    seq = sequence(value, path)
    if len(seq) < min_len:
        raise ModelError(path, f"expected at least {min_len} numbers, got {len(seq)}")
    return [number(v, f"{path}[{k}]") for k, v in enumerate(seq)]


def _flag(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ModelError(path, f"expected true or false, got {value!r}")
    return value


def _increasing(th: list[float], path: str) -> None:
    for k in range(1, len(th)):
        if not th[k] > th[k - 1]:
            raise ModelError(f"{path}[{k}]", f"theta must be strictly increasing "
                                             f"({th[k]!r} <= {th[k - 1]!r})")


def _spline_options(d, path: str, th: np.ndarray, values: dict[str, list[float]],
                    closes: bool, max_pieces: int):
    """Common table options -> (periodic, bc_type) for CubicSpline."""
    n = len(th) - 1
    if n > max_pieces:
        raise ModelError(join(path, "theta"), f"at most {max_pieces + 1} points are "
                                              f"supported, got {n + 1}")
    periodic = d.get("periodic")
    if periodic is None:
        periodic = closes
    else:
        periodic = _flag(periodic, join(path, "periodic"))
    if periodic:
        span = th[-1] - th[0]
        if abs(span - TWO_PI) > 1e-9 * TWO_PI:
            raise ModelError(join(path, "theta"), f"a periodic table must span exactly one "
                                                  f"turn (2 pi, 360 degrees), got {span:.9g} rad")
        for key, v in values.items():
            if v[-1] != v[0]:
                raise ModelError(f"{join(path, key)}[{n}]",
                                 f"a periodic table must end with its first value "
                                 f"({v[0]!r}), got {v[-1]!r}")
        if n < 3:
            raise ModelError(join(path, "theta"), "a periodic table needs at least 4 points")
        if "bc" in d:
            raise ModelError(join(path, "bc"), "a periodic table has no end conditions")
        return True, "periodic"
    bc = d.get("bc", "not-a-knot")
    if isinstance(bc, (list, tuple)):
        bp = join(path, "bc")
        if len(values) != 1:
            raise ModelError(bp, "end derivatives are only supported for polar tables "
                                 "(use a name: " + ", ".join(SPLINE_BC) + ")")
        if len(bc) != 2:
            raise ModelError(bp, f"expected [[order, value], [order, value]] for the first "
                                 f"and the last point, got a list of {len(bc)}")
        ends = []
        for k, item in enumerate(bc):
            order, val = vector(item, f"{bp}[{k}]", 2)
            if order not in (1.0, 2.0):
                raise ModelError(f"{bp}[{k}][0]", f"the derivative order must be 1 (s') or "
                                                  f"2 (s''), got {order:g}")
            ends.append((int(order), val))
        return False, tuple(ends)
    if bc not in SPLINE_BC:
        raise ModelError(join(path, "bc"), f"expected one of {', '.join(SPLINE_BC)} or "
                                           f"[[order, value], [order, value]], got {bc!r}")
    return False, bc


def _spline(th, y, bc_type):
    from scipy.interpolate import CubicSpline
    sp = CubicSpline(np.asarray(th, float), np.asarray(y, float), bc_type=bc_type)
    return np.asarray(sp.x, float), np.asarray(sp.c, float)      # (N+1,), (4, N)


def parse_curve(value: Any, path: str) -> Curve:
    """Validate a ``curve`` spec and build its packed block."""
    d = mapping(value, path)
    check_keys(d, (*SHAPES, "center"), path)
    given = [k for k in SHAPES if k in d]
    if len(given) != 1:
        raise ModelError(path, f"expected exactly one of {', '.join(SHAPES)} "
                               f"(got {', '.join(given) if given else 'none'})")
    shape = given[0]
    center = vector(d.get("center", (0.0, 0.0)), join(path, "center"), 2)
    p = join(path, shape)
    block = np.zeros(CURVE_SIZE)
    block[3:5] = center
    data = block[CURVE_HEADER:]
    if shape == "radius":
        R = number(d["radius"], p, positive=True)
        block[0:3] = (K_SERIES, 1, 0)
        data[0] = R
    elif shape == "polar_series":
        sd = mapping(d[shape], p)
        check_keys(sd, ("polynomial", "cosine", "sine"), p)
        poly = _numbers(sd["polynomial"], join(p, "polynomial")) if "polynomial" in sd else []
        cos_ = _numbers(sd["cosine"], join(p, "cosine")) if "cosine" in sd else []
        sin_ = _numbers(sd["sine"], join(p, "sine")) if "sine" in sd else []
        if not (poly or cos_ or sin_):
            raise ModelError(p, "expected at least one of polynomial, cosine, sine")
        nh = max(len(cos_), len(sin_))
        if len(poly) + 2 * nh > CURVE_DATA:
            raise ModelError(p, f"too many coefficients (at most {CURVE_DATA} numbers, "
                                f"harmonics counted twice)")
        cos_ += [0.0] * (nh - len(cos_))
        sin_ += [0.0] * (nh - len(sin_))
        block[0:3] = (K_SERIES, len(poly), nh)
        data[:len(poly) + 2 * nh] = poly + cos_ + sin_
    elif shape == "polar":
        td = mapping(d[shape], p)
        check_keys(td, ("theta", "s", "degrees", "periodic", "bc"), p,
                   required=("theta", "s"))
        th = _numbers(td["theta"], join(p, "theta"), 2)
        s = _numbers(td["s"], join(p, "s"), 2)
        if len(s) != len(th):
            raise ModelError(join(p, "s"), f"expected {len(th)} numbers (as many as theta), "
                                           f"got {len(s)}")
        for k, v in enumerate(s):
            if not v > 0:
                raise ModelError(f"{join(p, 's')}[{k}]", f"the polar radius must be "
                                                          f"positive, got {v!r}")
        deg = _flag(td.get("degrees", False), join(p, "degrees"))
        if deg:
            th = [math.radians(x) for x in th]
        _increasing(th, join(p, "theta"))
        tha = np.array(th)
        closes = abs(tha[-1] - tha[0] - TWO_PI) <= 1e-9 * TWO_PI and s[-1] == s[0]
        periodic, bc = _spline_options(td, p, tha, {"s": s}, closes, MAX_POLAR_PIECES)
        x, c = _spline(tha, s, bc)
        n = len(x) - 1
        block[0:3] = (K_POLAR_SPLINE, n, TWO_PI if periodic else 0.0)
        data[:n + 1] = x
        data[n + 1:n + 1 + 4 * n] = c.T.ravel()
    else:   # xy
        td = mapping(d[shape], p)
        check_keys(td, ("theta", "x", "y", "periodic", "bc"), p, required=("theta", "x", "y"))
        th = _numbers(td["theta"], join(p, "theta"), 2)
        xs = _numbers(td["x"], join(p, "x"), 2)
        ys = _numbers(td["y"], join(p, "y"), 2)
        for key, v in (("x", xs), ("y", ys)):
            if len(v) != len(th):
                raise ModelError(join(p, key), f"expected {len(th)} numbers (as many as "
                                               f"theta), got {len(v)}")
        _increasing(th, join(p, "theta"))
        tha = np.array(th)
        closes = (abs(tha[-1] - tha[0] - TWO_PI) <= 1e-9 * TWO_PI and xs[-1] == xs[0]
                  and ys[-1] == ys[0])
        periodic, bc = _spline_options(td, p, tha, {"x": xs, "y": ys}, closes, MAX_XY_PIECES)
        x, cx = _spline(tha, xs, bc)
        _, cy = _spline(tha, ys, bc)
        n = len(x) - 1
        block[0:3] = (K_XY_SPLINE, n, TWO_PI if periodic else 0.0)
        data[:n + 1] = x
        data[n + 1:n + 1 + 4 * n] = cx.T.ravel()
        data[n + 1 + 4 * n:n + 1 + 8 * n] = cy.T.ravel()
    block.flags.writeable = False
    return Curve(shape, center, _plain(dict(d)), block)


class CurveParam(Param):
    """Parameter kind ``curve``: a mapping validated by :func:`parse_curve`."""

    def __init__(self, doc: str = ""):
        super().__init__("curve", doc)

    def validate(self, value, path, ctx):
        if isinstance(value, Curve):
            return value
        return parse_curve(value, path)


# =====================================================================================
# evaluation (vectorised reference; mirrors _curve_eval in ext/_planar.pyx)
# =====================================================================================
def _series_jet(b: np.ndarray, th: np.ndarray):
    """(s, s', s'', s''') of polar series blocks b (ne, CURVE_SIZE) at th (ne,)."""
    ne = b.shape[0]
    npoly = b[:, 1].astype(np.intp)
    nh = b[:, 2].astype(np.intp)
    rows = np.arange(ne)
    s0 = np.zeros(ne)
    s1 = np.zeros(ne)
    s2 = np.zeros(ne)
    s3 = np.zeros(ne)
    # Horner with derivatives (s2, s3 accumulate s''/2, s'''/6)
    for k in range(int(npoly.max(initial=0)) - 1, -1, -1):
        p = np.where(k < npoly, b[:, CURVE_HEADER + k], 0.0)
        s3 = s3 * th + s2
        s2 = s2 * th + s1
        s1 = s1 * th + s0
        s0 = s0 * th + p
    s2 = 2.0 * s2
    s3 = 6.0 * s3
    for k in range(1, int(nh.max(initial=0)) + 1):
        on = k <= nh
        ia = np.where(on, CURVE_HEADER + npoly + k - 1, 0)
        ib = np.where(on, CURVE_HEADER + npoly + nh + k - 1, 0)
        a = np.where(on, b[rows, ia], 0.0)
        bb = np.where(on, b[rows, ib], 0.0)
        ck = np.cos(k * th)
        sk = np.sin(k * th)
        kf = float(k)
        s0 = s0 + (a * ck + bb * sk)
        s1 = s1 + kf * (bb * ck - a * sk)
        s2 = s2 - kf * kf * (a * ck + bb * sk)
        s3 = s3 + kf * kf * kf * (a * sk - bb * ck)
    return s0, s1, s2, s3


def _spline_jet(b: np.ndarray, th: np.ndarray, which: int):
    """(y, y', y'', y''') of spline ``which`` (0: polar s or x, 1: y) of blocks b."""
    n = b[:, 1].astype(np.intp)
    per = b[:, 2]
    x0 = b[:, CURVE_HEADER]
    rows = np.arange(b.shape[0])
    safe = np.where(per > 0, per, 1.0)
    d = th - x0
    u = np.where(per > 0, x0 + (d - safe * np.floor(d / safe)), th)
    K = int(n.max(initial=1)) + 1
    cols = np.arange(K)
    X = np.where(cols[None, :] <= n[:, None], b[:, CURVE_HEADER:CURVE_HEADER + K], np.inf)
    i = np.clip(np.sum(X <= u[:, None], axis=1) - 1, 0, n - 1)
    dx = u - b[rows, CURVE_HEADER + i]
    base = CURVE_HEADER + n + 1 + 4 * n * which + 4 * i
    a3, a2, a1, a0 = (b[rows, base + k] for k in range(4))
    y0 = ((a3 * dx + a2) * dx + a1) * dx + a0
    y1 = (3.0 * a3 * dx + 2.0 * a2) * dx + a1
    y2 = 6.0 * a3 * dx + 2.0 * a2
    y3 = 6.0 * a3
    return y0, y1, y2, y3


def _polar(b: np.ndarray, t: np.ndarray, s):
    """c', c'_th, c'_thth, c'_ththth of polar blocks b from their jets s."""
    s0, s1, s2, s3 = s
    co, si = np.cos(t), np.sin(t)
    e = np.stack([co, si], -1)
    ep = np.stack([-si, co], -1)
    return (b[:, 3:5] + s0[:, None] * e,
            s1[:, None] * e + s0[:, None] * ep,
            (s2 - s0)[:, None] * e + (2.0 * s1)[:, None] * ep,
            (s3 - 3.0 * s1)[:, None] * e + (3.0 * s2 - s0)[:, None] * ep)


def _xy(b: np.ndarray, t: np.ndarray):
    xj = _spline_jet(b, t, 0)
    yj = _spline_jet(b, t, 1)
    out = [np.stack([xj[k], yj[k]], -1) for k in range(4)]
    out[0] = out[0] + b[:, 3:5]
    return tuple(out)


def _one_kind(b: np.ndarray, t: np.ndarray, kind: float):
    if kind == K_XY_SPLINE:
        return _xy(b, t)
    return _polar(b, t, _series_jet(b, t) if kind == K_SERIES else _spline_jet(b, t, 0))


def evaluate(block: np.ndarray, th: np.ndarray):
    """Body-frame ``c', c'_th, c'_thth, c'_ththth`` (each (ne, 2)) of packed curve
    blocks (ne, CURVE_SIZE) at theta (ne,)."""
    block = np.asarray(block, dtype=float)
    th = np.asarray(th, dtype=float)
    kind = block[:, 0]
    if kind.size and np.all(kind == kind[0]):        # one kind (the usual case)
        return _one_kind(block, th, kind[0])
    out = [np.zeros((block.shape[0], 2)) for _ in range(4)]
    for k in np.unique(kind):
        sel = np.nonzero(kind == k)[0]
        for o, v in zip(out, _one_kind(block[sel], th[sel], k)):
            o[sel] = v
    return tuple(out)


# =====================================================================================
# initial estimates of theta
# =====================================================================================
def _candidates(curve: Curve, angle: float | None = None) -> np.ndarray:
    lo, hi = curve.domain()
    grid = np.linspace(lo, hi, 721)
    extra = []
    if angle is not None:       # the polar angle, shifted by whole turns nearest the domain
        extra = [angle + TWO_PI * round((0.5 * (lo + hi) - angle) / TWO_PI)]
    return np.concatenate([extra, grid])


def _refine(curve: Curve, th: float, fun, lo: float, hi: float) -> float:
    """A few safeguarded Newton steps on fun(theta) -> (f, f')."""
    for _ in range(30):
        f, df = fun(th)
        if not (math.isfinite(f) and math.isfinite(df)) or df == 0.0:
            break
        step = -f / df
        step = max(-0.2, min(0.2, step))
        th_new = th + step
        if not curve.periodic:
            span = hi - lo
            th_new = max(lo - 0.5 * span, min(hi + 0.5 * span, th_new))
        if abs(th_new - th) < 1e-14 * max(1.0, abs(th)):
            th = th_new
            break
        th = th_new
    return float(th)


def nearest_theta(curve: Curve, p: np.ndarray) -> float:
    """theta of the curve point nearest to ``p`` (body coordinates of the curve's
    body): the best of a dense sample of :meth:`Curve.domain` (and of the polar
    angle of p about the centre, shifted by whole turns), refined by Newton on
    ``c'_th . (c' - p) = 0``."""
    p = np.asarray(p, dtype=float)
    rel = p - np.asarray(curve.center)
    angle = math.atan2(rel[1], rel[0]) if curve.shape != "xy" else None
    cand = _candidates(curve, angle)
    c, *_ = curve(cand)
    k = int(np.argmin(np.sum((c - p) ** 2, axis=-1)))
    lo, hi = curve.domain()

    def fun(th):
        c0, c1, c2, _ = (v[0] for v in curve([th]))
        return float(c1 @ (c0 - p)), float(c2 @ (c0 - p) + c1 @ c1)
    return _refine(curve, float(cand[k]), fun, lo, hi)


def support_theta(curve: Curve, u: np.ndarray) -> float:
    """theta of the curve point farthest in direction ``u`` (body coordinates),
    where the tangent is normal to u: the contact of a flat face with normal u."""
    u = np.asarray(u, dtype=float)
    cand = _candidates(curve, math.atan2(u[1], u[0]) if curve.shape != "xy" else None)
    c, *_ = curve(cand)
    k = int(np.argmax(c @ u))
    lo, hi = curve.domain()

    def fun(th):
        _, c1, c2, _ = (v[0] for v in curve([th]))
        return float(c1 @ u), float(c2 @ u)
    return _refine(curve, float(cand[k]), fun, lo, hi)


# =====================================================================================
# drawing (the element types' ``sketch``)
# =====================================================================================
#: points of a curve or circle drawn by the animations (mbcore.results.plotting)
SKETCH_POINTS = 181


def curve_points(curve: Curve, n: int = SKETCH_POINTS) -> np.ndarray:
    """``n`` points ``c'(theta)`` (n, 2) of the curve over :meth:`Curve.domain`, in
    its body's coordinates (a periodic curve: one closed turn)."""
    lo, hi = curve.domain()
    c, *_ = curve(np.linspace(lo, hi, int(n)))
    return c


def circle_points(center, radius: float, n: int = 97) -> np.ndarray:
    """``n`` points (n, 2) of the closed circle about ``center`` (first = last)."""
    a = np.linspace(0.0, TWO_PI, int(n))
    return np.asarray(center, dtype=float) + float(radius) * np.stack(
        [np.cos(a), np.sin(a)], axis=-1)
