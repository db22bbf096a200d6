"""The compiled System (a Model laid out for evaluation: packed elements, kernels,
buffers) and its mass matrix."""
from __future__ import annotations

from .system import (  # noqa: F401  (the former mbcore.system)
    System, Group, default_backend, compiled_available, check_finite, ModelError)

__all__ = ["System", "Group", "default_backend", "compiled_available", "check_finite",
           "ModelError"]
