"""The twelve rotation-angle sequences: six proper Euler (1-2-1, 1-3-1, 2-1-2, 2-3-2,
3-1-3, 3-2-3) and six Tait–Bryan (1-2-3, 1-3-2, 2-1-3, 2-3-1, 3-1-2, 3-2-1) sets,
each in the convention of Nikravesh (1988), App. A: successive rotations about the
axes of the body as it turns,

    A = R_i(θ1) R_j(θ2) R_k(θ3)        (s = A s'),

so ``"313"`` is the book's Euler angles [ψ, θ, σ] (App. A.1, Eq. A.1) and ``"123"``
its Bryant angles [φ1, φ2, φ3] (App. A.2, Eq. A.5).  A sequence is written ``"313"``,
``"3-1-3"`` or ``"zxz"`` (any case).  Every function is vectorised over leading axes.

Angles from A: θ2 from row i of A (``A[i, k] = ±sin θ2`` for Tait–Bryan sets with
the sign of the permutation (i, j, k), ``A[i, i] = cos θ2`` for proper Euler sets:
θ2 ∈ [−π/2, π/2] resp. [0, π]), θ3 from the same row, θ1 from
``A R_k(θ3)ᵀ R_j(θ2)ᵀ = R_i(θ1)``, which stays accurate near the singular
configurations (cos θ2 = 0 resp. sin θ2 = 0), where θ3 = 0 is chosen.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

from .rotations import A as A_of_p
from .rotations import normalize, quat_product

__all__ = ["SEQUENCES", "parse_sequence", "angles_to_A", "A_to_angles", "angles_to_p",
           "p_to_angles", "angle_rates_to_omega", "angle_rates_to_omega_body"]

#: the twelve sequences, proper Euler first
SEQUENCES = ("121", "131", "212", "232", "313", "323",
             "123", "132", "213", "231", "312", "321")
_LETTERS = {"x": "1", "y": "2", "z": "3", "1": "1", "2": "2", "3": "3"}
#: below this |cos θ2| (Tait–Bryan) or |sin θ2| (proper Euler) θ3 is set to 0
SINGULAR_TOL = 1e-12


def parse_sequence(seq: str) -> tuple[int, int, int]:
    """The axes (0-based) of ``"321"``, ``"3-2-1"``, ``"zyx"`` (any case); ValueError
    naming the twelve sequences otherwise."""
    if isinstance(seq, str):
        s = "".join(_LETTERS.get(c, "?") for c in seq.lower().replace("-", "")
                    .replace("_", "").replace(" ", ""))
        if s in SEQUENCES:
            return int(s[0]) - 1, int(s[1]) - 1, int(s[2]) - 1
    raise ValueError(f"unknown angle sequence {seq!r}: one of "
                     f"{', '.join('-'.join(x) for x in SEQUENCES)} (or e.g. 'zyx')")


def _f(x: ArrayLike) -> np.ndarray:
    return np.asarray(x, dtype=float)


def _R(axis: int, angle: np.ndarray) -> np.ndarray:
    """Elementary rotation about body axis ``axis`` (Nikravesh (1988), Eq. A.1's factors);
    (...,) -> (..., 3, 3)."""
    c, s = np.cos(angle), np.sin(angle)
    a, b = (axis + 1) % 3, (axis + 2) % 3
    out = np.zeros(np.shape(angle) + (3, 3))
    out[..., axis, axis] = 1.0
    out[..., a, a] = c
    out[..., b, b] = c
    out[..., b, a] = s
    out[..., a, b] = -s
    return out


def _angles3(angles: ArrayLike) -> np.ndarray:
    a = _f(angles)
    if a.shape[-1:] != (3,):
        raise ValueError(f"expected angles of shape (..., 3), got {a.shape}")
    return a


def angles_to_A(angles: ArrayLike, sequence: str) -> np.ndarray:
    """A = R_i(θ1) R_j(θ2) R_k(θ3); (..., 3) -> (..., 3, 3)."""
    i, j, k = parse_sequence(sequence)
    a = _angles3(angles)
    return _R(i, a[..., 0]) @ _R(j, a[..., 1]) @ _R(k, a[..., 2])


def A_to_angles(A_: ArrayLike, sequence: str) -> np.ndarray:
    """[θ1, θ2, θ3] of A (module docstring): θ1, θ3 ∈ (−π, π], θ2 ∈ [−π/2, π/2]
    (Tait–Bryan) or [0, π] (proper Euler); (..., 3, 3) -> (..., 3)."""
    i, j, k = parse_sequence(sequence)
    a = _f(A_)
    row = a[..., i, :]
    if i != k:                          # Tait–Bryan: A[i, k] = eps sin θ2
        eps = 1.0 if (j - i) % 3 == 1 else -1.0
        th2 = np.arctan2(eps * row[..., k], np.hypot(row[..., i], row[..., j]))
    else:                               # proper Euler: A[i, i] = cos θ2
        other = 3 - i - j
        th2 = np.arctan2(np.hypot(row[..., j], row[..., other]), row[..., i])
    # row i = e_iᵀ R_j(θ2) R_k(θ3) = wᵀ R_k(θ3): the turn about k from w to the row
    w = _R(j, th2)[..., i, :]
    p, r = (k + 1) % 3, (k + 2) % 3
    wp, wr, vp, vr = w[..., p], w[..., r], row[..., p], row[..., r]
    perp = np.hypot(wp, wr)
    th3 = np.where(perp > SINGULAR_TOL, np.arctan2(wr * vp - wp * vr, wp * vp + wr * vr), 0.0)
    C = a @ np.swapaxes(_R(k, th3), -1, -2) @ np.swapaxes(_R(j, th2), -1, -2)   # = R_i(θ1)
    p, r = (i + 1) % 3, (i + 2) % 3
    th1 = np.arctan2(C[..., r, p], C[..., p, p])
    return np.stack([th1, th2, th3], -1)


def _axis_p(axis: int, angle: np.ndarray) -> np.ndarray:
    """Euler parameters of the rotation R_axis(angle) (Nikravesh (1988), Eq. 6.8)."""
    out = np.zeros(np.shape(angle) + (4,))
    out[..., 0] = np.cos(0.5 * angle)
    out[..., 1 + axis] = np.sin(0.5 * angle)
    return out


def angles_to_p(angles: ArrayLike, sequence: str) -> np.ndarray:
    """Euler parameters of A = R_i(θ1) R_j(θ2) R_k(θ3): the product of the three axis
    rotations' parameters (A(p ⊗ q) = A(p) A(q)), e0 ≥ 0; (..., 3) -> (..., 4)."""
    i, j, k = parse_sequence(sequence)
    a = _angles3(angles)
    p = quat_product(quat_product(_axis_p(i, a[..., 0]), _axis_p(j, a[..., 1])),
                     _axis_p(k, a[..., 2]))
    return np.where(p[..., :1] < 0.0, -p, p)


def p_to_angles(p: ArrayLike, sequence: str) -> np.ndarray:
    """[θ1, θ2, θ3] from Euler parameters (via A(p), Nikravesh (1988), Eq. 6.19)."""
    return A_to_angles(A_of_p(normalize(p)), sequence)


def angle_rates_to_omega(angles: ArrayLike, sequence: str) -> np.ndarray:
    """M with ω = M [θ̇1, θ̇2, θ̇3] (global components): the columns are the axes of the
    three rotations, e_i, R_i(θ1) e_j, R_i(θ1) R_j(θ2) e_k (Nikravesh (1988), App. A,
    Eqs. A.3, A.7 in their global form); (..., 3) -> (..., 3, 3)."""
    i, j, k = parse_sequence(sequence)
    a = _angles3(angles)
    R1 = _R(i, a[..., 0])
    R12 = R1 @ _R(j, a[..., 1])
    c1 = np.zeros(a.shape[:-1] + (3,))
    c1[..., i] = 1.0
    return np.stack([c1, R1[..., :, j], R12[..., :, k]], -1)


def angle_rates_to_omega_body(angles: ArrayLike, sequence: str) -> np.ndarray:
    """M with ω' = M [θ̇1, θ̇2, θ̇3] (body components, ω' = Aᵀ ω; Nikravesh (1988),
    Eqs. A.3 and A.7 for 3-1-3 and 1-2-3); (..., 3) -> (..., 3, 3)."""
    return np.swapaxes(angles_to_A(angles, sequence), -1, -2) @ \
        angle_rates_to_omega(angles, sequence)
