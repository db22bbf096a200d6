"""Rotation toolkit for spatial bodies with Euler parameters (spec/spatial.md §1;
004 Ch. 6, App. A-B).

Euler parameters ``p = [e0, e1, e2, e3]`` (scalar first).  Every function is
vectorised over leading axes: ``p`` of shape ``(..., 4)`` gives ``(..., 3, 3)``
matrices etc.
"""
from __future__ import annotations

import numpy as np


def skew(a: np.ndarray) -> np.ndarray:
    """ã with ã b = a × b (004 Eq 2.43); a (..., 3) -> (..., 3, 3)."""
    a = np.asarray(a, dtype=float)
    out = np.zeros(a.shape + (3,))
    out[..., 0, 1] = -a[..., 2]
    out[..., 0, 2] = a[..., 1]
    out[..., 1, 0] = a[..., 2]
    out[..., 1, 2] = -a[..., 0]
    out[..., 2, 0] = -a[..., 1]
    out[..., 2, 1] = a[..., 0]
    return out


def G(p: np.ndarray) -> np.ndarray:
    """G(p) = [-e, ẽ + e0 I] (004 Eq 6.38); ω = 2 G ṗ.  (..., 4) -> (..., 3, 4)."""
    p = np.asarray(p, dtype=float)
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return np.stack([np.stack([-e1, e0, -e3, e2], -1),
                     np.stack([-e2, e3, e0, -e1], -1),
                     np.stack([-e3, -e2, e1, e0], -1)], -2)


def L(p: np.ndarray) -> np.ndarray:
    """L(p) = [-e, -ẽ + e0 I] (004 Eq 6.39); ω' = 2 L ṗ.  (..., 4) -> (..., 3, 4)."""
    p = np.asarray(p, dtype=float)
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return np.stack([np.stack([-e1, e0, e3, -e2], -1),
                     np.stack([-e2, -e3, e0, e1], -1),
                     np.stack([-e3, e2, -e1, e0], -1)], -2)


def A(p: np.ndarray) -> np.ndarray:
    """Transformation matrix A(p) from the explicit form 004 Eq 6.18/6.19
    (s = A s'); (..., 4) -> (..., 3, 3)."""
    p = np.asarray(p, dtype=float)
    e0, e1, e2, e3 = p[..., 0], p[..., 1], p[..., 2], p[..., 3]
    return 2.0 * np.stack([
        np.stack([e0 * e0 + e1 * e1 - 0.5, e1 * e2 - e0 * e3, e1 * e3 + e0 * e2], -1),
        np.stack([e1 * e2 + e0 * e3, e0 * e0 + e2 * e2 - 0.5, e2 * e3 - e0 * e1], -1),
        np.stack([e1 * e3 - e0 * e2, e2 * e3 + e0 * e1, e0 * e0 + e3 * e3 - 0.5], -1)], -2)
