"""The plugin module named by the entry point (``bushing = "mbcore_bushing.plugin"``).

Each hook returns :class:`mbcore.plugins.LazyType` references: mbcore knows the
types by name at once and imports a module only when a model uses one of its types.
"""
from __future__ import annotations

from mbcore.plugins.hookspecs import hookimpl
from mbcore.plugins import LazyType


@hookimpl
def mbcore_force_types():
    return [LazyType("bushing", "mbcore_bushing.bushing:Bushing"),
            LazyType("bushing_c", "mbcore_bushing.bushing:CompiledBushing")]


@hookimpl
def mbcore_constraint_types():
    return [LazyType("point_on_circle", "mbcore_bushing.constraints:PointOnCircle"),
            LazyType("point_on_circle_c", "mbcore_bushing.constraints:CompiledPointOnCircle")]


@hookimpl
def mbcore_reporters():
    return [LazyType("peaks", "mbcore_bushing.reporters:PeaksReporter")]
