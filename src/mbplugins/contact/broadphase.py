"""Broad phase of many spheres (NumPy reference): the sphere pairs whose centres
are closer than the sum of their radii, by a hashed uniform grid (spatial hashing,
Ericson (2005), ch. 7) in O(N) for spheres of bounded density, and by brute force
(O(N^2), for tests).

The grid is the one of the C kernel (ext/plugins/_sphere_group.pyx), vectorised:
cell c = floor(x / h) per axis (clamped to +-2^40), with h >= the largest sphere
diameter, so two overlapping spheres lie in cells that differ by at most one in
each axis.  The cells are hashed into ``nh`` (a power of two >= 2N) buckets with
the hash of Teschner et al. (2003); sphere i visits the buckets of the 27 cells
around its own and keeps the j > i whose cell is exactly that cell (hash
collisions add nothing) and whose centres are closer than (R_i + R_j) (1 + 1e-12);
the narrow test ``R_i + R_j - |x_i - x_j| > 0`` (that of ``spatial:contact``)
decides.
"""
from __future__ import annotations

import numpy as np

__all__ = ["grid_pairs", "brute_pairs", "CELL_LIMIT"]

#: cell coordinates are clamped to +-2^40 (far-away spheres share the border cells)
CELL_LIMIT = 2.0 ** 40
_PRIMES = np.array([73856093, 19349663, 83492791], dtype=np.uint64)
_OFFSETS = np.array([(a, b, c) for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)],
                    dtype=np.int64)


def _cells(x: np.ndarray, h: float) -> np.ndarray:
    u = np.floor(x / h)
    u = np.where(u >= -CELL_LIMIT, u, -CELL_LIMIT)          # also NaN
    return np.minimum(u, CELL_LIMIT).astype(np.int64)


def _hash(c: np.ndarray, mask: int) -> np.ndarray:
    k = c.astype(np.uint64) * _PRIMES                       # wraps modulo 2^64, as in C
    return ((k[..., 0] ^ k[..., 1] ^ k[..., 2]) & np.uint64(mask)).astype(np.intp)


def _narrow(x: np.ndarray, R: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    d = x[i] - x[j]
    return R[i] + R[j] - np.sqrt(np.einsum("pk,pk->p", d, d)) > 0.0


def _sorted(i: np.ndarray, j: np.ndarray) -> np.ndarray:
    out = np.stack([i, j], -1).astype(np.intp).reshape(-1, 2)
    return out[np.lexsort((out[:, 1], out[:, 0]))]


def grid_pairs(x: np.ndarray, R: np.ndarray, h: float) -> np.ndarray:
    """(npairs, 2) sphere pairs i < j with ``R_i + R_j - |x_i - x_j| > 0``, rows
    sorted; ``x`` (N, 3) centres, ``R`` (N,) radii, ``h`` >= 2 max(R) the cell size."""
    x = np.asarray(x, dtype=float).reshape(-1, 3)
    R = np.asarray(R, dtype=float)
    n = x.shape[0]
    if n < 2:
        return np.zeros((0, 2), dtype=np.intp)
    nh = 16
    while nh < 2 * n:
        nh *= 2
    c = _cells(x, h)
    b = _hash(c, nh - 1)
    order = np.argsort(b, kind="stable")
    start = np.zeros(nh + 1, dtype=np.intp)
    np.cumsum(np.bincount(b, minlength=nh), out=start[1:])
    # the 27 cells around each sphere's at once: (n * 27) lookups
    cn = (c[:, None, :] + _OFFSETS[None, :, :]).reshape(-1, 3)
    bn = _hash(cn, nh - 1)
    cnt = start[bn + 1] - start[bn]
    tot = int(cnt.sum())
    if tot == 0:
        return np.zeros((0, 2), dtype=np.intp)
    i = np.repeat(np.repeat(np.arange(n), 27), cnt)
    own = np.repeat(np.arange(n * 27), cnt)              # which (sphere, cell) lookup
    first = np.cumsum(cnt) - cnt
    j = order[np.repeat(start[bn], cnt) + np.arange(tot) - np.repeat(first, cnt)]
    keep = j > i
    i, j, own = i[keep], j[keep], own[keep]
    keep = np.all(c[j] == cn[own], axis=1)               # the cell itself, not a collision
    i, j = i[keep], j[keep]
    dv = x[j] - x[i]
    rr = R[i] + R[j]
    keep = np.einsum("pk,pk->p", dv, dv) < rr * rr * (1.0 + 1e-12)
    i, j = i[keep], j[keep]
    keep = _narrow(x, R, i, j)
    return _sorted(i[keep], j[keep])


def brute_pairs(x: np.ndarray, R: np.ndarray) -> np.ndarray:
    """The same pairs by checking all N (N - 1) / 2 of them (tests)."""
    x = np.asarray(x, dtype=float).reshape(-1, 3)
    R = np.asarray(R, dtype=float)
    i, j = np.triu_indices(x.shape[0], 1)
    keep = _narrow(x, R, i, j)
    return _sorted(i[keep], j[keep])
