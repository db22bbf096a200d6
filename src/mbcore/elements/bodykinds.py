"""Body kinds: what a body contributes to the coordinates of a System.

A body kind declares its position coordinates q_b, its velocity coordinates v_b
(here q̇_b: the Euler-parameter form, Nikravesh (1988), §7.3 / §11.4 Formulation I, DI-2), its
coordinate names, the coordinates of the ground seen by an element of that kind,
and the width of the body block an element kernel receives (see
docs/plugins.md, "Body kinds"):

* ``planar`` — q = (x, y, phi), v = q̇, M = diag(m, m, J) (Nikravesh (1988), §4.1, §9.1).
* ``spatial`` — q = (r, p) = (x, y, z, e0, e1, e2, e3), v = q̇ (7 numbers), the
  normalisation constraint ``p^T p - 1 = 0`` of each body among the constraints
  (Nikravesh (1988), Eqs. 6.23, 7.33), M = diag(m I3, J* = 4 L^T J' L)
  (Formulation I, Nikravesh (1988), Eqs. 11.10-11.16, 11.26).
* ``particle`` (planar models) and ``particle3`` (spatial models) — point masses,
  q = (x, y) or (x, y, z), M = m I: no rotational coordinate, so no tiny inertia
  (IFToMM A01, a point mass on a massless rod).  Elements of the model's kind see a
  particle as a body whose rotation is fixed at zero: the System pads its block
  (``pad``: phi = 0, or p = (1, 0, 0, 0)) in the extended coordinate buffer and
  drops the Jacobian columns of the padding, so every planar (spatial) element type
  works on particles unchanged.

The angular-velocity form of spatial bodies (v = (ṙ, ω'), q̇ = N(q) v with
ṗ = ½ L^T ω') is what the element kernels compute natively (``jacobian_v``,
``gamma_v``); the System maps it to the Euler-parameter columns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from .base import ConstraintType


@dataclass(frozen=True)
class BodyKind:
    """Coordinates of one kind of body."""

    name: str
    nq: int                          #: position coordinates per body
    nv: int                          #: velocity coordinates per body
    coordinates: tuple[str, ...]     #: names of q_b (``body.<name>``)
    ground: tuple[float, ...]        #: q_b of the ground as an element of this kind sees it
    #: the kind of element types that act on it ("planar" or "spatial")
    element_kind: str = ""
    #: constant values appended to q_b to form the block elements receive
    pad: tuple[float, ...] = ()

    @property
    def elements(self) -> str:
        return self.element_kind or self.name


PLANAR = BodyKind("planar", 3, 3, ("x", "y", "phi"), (0.0, 0.0, 0.0))
SPATIAL = BodyKind("spatial", 7, 7, ("x", "y", "z", "p0", "p1", "p2", "p3"),
                   (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0))
PARTICLE = BodyKind("particle", 2, 2, ("x", "y"), (0.0, 0.0), "planar", (0.0,))
PARTICLE3 = BodyKind("particle3", 3, 3, ("x", "y", "z"), (0.0, 0.0, 0.0), "spatial",
                     (1.0, 0.0, 0.0, 0.0))
KINDS: dict[str, BodyKind] = {"planar": PLANAR, "spatial": SPATIAL, "particle": PARTICLE,
                              "particle3": PARTICLE3}


class EulerNormalization(ConstraintType):
    """``p^T p - 1 = 0`` of one spatial body (Nikravesh (1988), Eqs. 6.23, 7.33):
    Jacobian ``[0, 0, 0, 2 p^T]``, ``nu = 0``, ``gamma = -2 pd^T pd``.
    Added by the System, one row per spatial body, after the model's equations."""

    name = "euler_normalization"
    body_kind: ClassVar[str] = "spatial"
    equations = 1
    bodies = ("body",)
    n_par = 0
    kernel = "euler_normalization"
    #: the body kind's compiled kernel (the core's own, ext/_euler_normalization.pxi)
    c_kernel = "mbcore._ext._planar:EULER_NORMALIZATION"
    labels = ("norm",)
    category = "constraint"

    def pack(self, spec, ctx):
        return [], []

    def phi(self, par, qb, t, f):
        p = qb[:, 0, 3:7]
        return (np.einsum("ek,ek->e", p, p) - 1.0)[:, None]

    def jacobian(self, par, qb, t, f):
        out = np.zeros((qb.shape[0], 1, 1, 7))
        out[:, 0, 0, 3:7] = 2.0 * qb[:, 0, 3:7]
        return out

    def gamma(self, par, qb, qdb, t, f):
        pd = qdb[:, 0, 3:7]
        return (-2.0 * np.einsum("ek,ek->e", pd, pd))[:, None]
