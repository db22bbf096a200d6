"""Small helpers shared by the planar constraint modules (not a public API)."""
from __future__ import annotations

import math

import numpy as np

from mbcore.errors import ModelError

#: a direction given in a model must be longer than this (before normalising)
MIN_DIRECTION = 1e-12


def dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise dot product of (..., 2) arrays."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1]


def cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Planar cross product ``a x b = a_x b_y - a_y b_x = (R a)^T b`` (Nikravesh (1988), §4.1)."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def unit_vector(v, path: str) -> tuple[float, float]:
    """``v / |v|``; a (near) zero vector is a ModelError naming ``path``."""
    x, y = float(v[0]), float(v[1])
    n = math.hypot(x, y)
    if not n > MIN_DIRECTION:
        raise ModelError(path, f"expected a non-zero direction vector, got [{x:g}, {y:g}]")
    return x / n, y / n


def rot1(phi: float, s) -> np.ndarray:
    """A(phi) s for one angle and one 2-vector."""
    c, sn = math.cos(phi), math.sin(phi)
    return np.array([c * s[0] - sn * s[1], sn * s[0] + c * s[1]])


def moment_about(g: np.ndarray, r_body: np.ndarray, point: np.ndarray) -> np.ndarray:
    """Moment about ``point`` of a generalised force ``g = [fx, fy, n]`` whose
    moment ``n`` is about the body origin ``r_body``: ``n - (point - r_body) x f``."""
    return g[..., 2] - cross(point - r_body, g[..., :2])


def axis_geometry(par, qb):
    """A line on body i: unit direction ``u = A_i u'`` (par[:, 0:2]), its normal
    ``n = R u``, and the offsets ``S_i`` (par[:, 2:4]) and ``S_j`` (par[:, 4:6]) of the
    two points (translational C4 and revolute-translational C7 share this)."""
    from mbcore.elements.base import perp, rot
    u = rot(qb[:, 0, 2], par[:, 0:2])
    Si = rot(qb[:, 0, 2], par[:, 2:4])
    Sj = rot(qb[:, 1, 2], par[:, 4:6])
    return u, perp(u), Si, Sj
