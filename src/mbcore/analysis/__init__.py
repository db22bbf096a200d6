"""Running analyses: the Analysis base class, the runner (model file to HDF5), the
stepping Simulation, checkpoints and resume, linearisation."""
from __future__ import annotations

from .base import (  # noqa: F401  (the former mbcore.analysis)
    COMMON_SETTINGS, Analysis, element_channels, resolve_settings)

__all__ = ["COMMON_SETTINGS", "Analysis", "element_channels", "resolve_settings"]
