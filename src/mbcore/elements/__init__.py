"""What a model is built from: the element type base classes, parameter schemas, time
functions and expressions, rotations, body kinds, inputs and limits."""
from __future__ import annotations

from .base import (  # noqa: F401  (the former mbcore.elements)
    PackContext, ConstraintType, ForceType, SpatialConstraintType, rot, perp,
    velocity_blocks)

__all__ = ["PackContext", "ConstraintType", "ForceType", "SpatialConstraintType", "rot",
           "perp", "velocity_blocks"]
