"""Built-in plugins of mbcore: planar and spatial constraint types, analyses, reporters.

Registered through the entry-point group ``mbcore`` exactly like a third-party
plugin (see pyproject.toml), using the hooks of :mod:`mbcore.hookspecs`.
"""
from __future__ import annotations

from mbcore import __version__
from mbcore.hookspecs import hookimpl


@hookimpl
def mbcore_constraint_types():
    from .planar.constraints import CONSTRAINT_TYPES
    from .spatial.composites import COMPOSITE_TYPES
    from .spatial.constraints import CONSTRAINT_TYPES as SPATIAL_CONSTRAINT_TYPES
    return list(CONSTRAINT_TYPES) + list(SPATIAL_CONSTRAINT_TYPES) + list(COMPOSITE_TYPES)


@hookimpl
def mbcore_force_types():
    from .planar.forces import FORCE_TYPES
    from .spatial.forces import FORCE_TYPES as SPATIAL_FORCE_TYPES
    return list(FORCE_TYPES) + list(SPATIAL_FORCE_TYPES)


@hookimpl
def mbcore_formulations():
    from .formulations import FORMULATIONS
    return list(FORMULATIONS)


@hookimpl
def mbcore_analyses():
    from .analyses.kinematic import KinematicAnalysis, KinetostaticAnalysis
    from .analyses.dynamic import DynamicAnalysis
    from .analyses.static import StaticAnalysis
    return [KinematicAnalysis, KinetostaticAnalysis, StaticAnalysis, DynamicAnalysis]


@hookimpl
def mbcore_integrators():
    from .integrators import INTEGRATORS
    return list(INTEGRATORS)


@hookimpl
def mbcore_reporters():
    from .reporters.hdf5 import HDF5Reporter
    from .reporters.memory import MemoryReporter
    return [HDF5Reporter, MemoryReporter]
