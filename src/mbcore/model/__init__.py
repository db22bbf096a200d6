"""The model description: a Model read from a file or built in Python, validated, and
compiled into a System."""
from __future__ import annotations

from .model import (  # noqa: F401  (the former mbcore.model)
    TOP_KEYS, BODY_KEYS, PARTICLE_KEYS, SPATIAL_BODY_KEYS, POINT_KEYS,
    CONSTRAINT_SECTIONS, SECTIONS, SECTION_KIND, Body, Point, Element, Model,
    DATA_TAGS, MAX_YAML_NODES, MAX_NESTING, parse_text, inertia_tensor)

__all__ = ["TOP_KEYS", "BODY_KEYS", "PARTICLE_KEYS", "SPATIAL_BODY_KEYS", "POINT_KEYS",
           "CONSTRAINT_SECTIONS", "SECTIONS", "SECTION_KIND", "Body", "Point",
           "Element", "Model", "DATA_TAGS", "MAX_YAML_NODES", "MAX_NESTING",
           "parse_text", "inertia_tensor"]
