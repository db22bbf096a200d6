"""Built-in plugins of mbcore: planar and spatial constraint types, analyses, reporters.

Registered through the entry-point group ``mbcore`` exactly like a third-party
plugin (see pyproject.toml), using the hooks of :mod:`mbcore.plugins.hookspecs`.

The hooks return :class:`mbcore.plugins.LazyType` references, not the classes:
a model run imports only the modules of the types it uses (start-up).
:data:`CATALOGUE` lists every built-in type as ``(name, "module:class"[, body
kind])``; the eager lists of the modules (``CONSTRAINT_TYPES``, ``FORCE_TYPES``,
``FORMULATIONS``, ``INTEGRATORS``...) remain, and tests/test_plugins.py checks that
the catalogue names exactly their classes.
"""
from __future__ import annotations

from mbcore import __version__  # noqa: F401  (the plugin's version, shown by `mbcore plugins`)
from mbcore.plugins.hookspecs import hookimpl
from mbcore.plugins.manager import LazyType

#: the mbcore plugin contract these plugins are built against (mbcore.plugins.contract)
mbcore_contract = "1.0"

#: hook -> [(type name, "module:qualname"[, body kind])], in registration order
CATALOGUE: dict[str, list[tuple[str, ...]]] = {
    "mbcore_constraint_types": [
        ("fixed", "mbplugins.planar.constraints:Fixed"),
        ("absolute", "mbplugins.planar.constraints:Absolute"),
        ("absolute_driver", "mbplugins.planar.constraints:AbsoluteDriver"),
        ("relative_driver", "mbplugins.planar.constraints:RelativeDriver"),
        ("revolute", "mbplugins.planar.constraints:Revolute"),
        ("translational", "mbplugins.planar.constraints:Translational"),
        ("distance", "mbplugins.planar.links:Distance"),
        ("distance_driver", "mbplugins.planar.links:DistanceDriver"),
        ("revolute_translational", "mbplugins.planar.links:RevoluteTranslational"),
        ("translational_002", "mbplugins.planar.links:Translational002"),
        ("gear", "mbplugins.planar.gears:Gear"),
        ("rack_pinion", "mbplugins.planar.gears:RackPinion"),
        ("point_driver", "mbplugins.planar.drivers:PointDriver"),
        ("cam_point", "mbplugins.planar.cams:CamPoint"),
        ("cam_roller", "mbplugins.planar.cams:CamRoller"),
        ("cam_flat", "mbplugins.planar.cams:CamFlat"),
        ("slot", "mbplugins.planar.cams:Slot"),
        ("body_speed_driver", "mbplugins.planar.nonholonomic:BodySpeedDriver"),
        ("spherical", "mbplugins.spatial.constraints:Spherical", "spatial"),
        ("universal", "mbplugins.spatial.constraints:Universal", "spatial"),
        ("revolute", "mbplugins.spatial.constraints:Revolute", "spatial"),
        ("cylindrical", "mbplugins.spatial.constraints:Cylindrical", "spatial"),
        ("translational", "mbplugins.spatial.constraints:Translational", "spatial"),
        ("planar", "mbplugins.spatial.constraints:Planar", "spatial"),
        ("distance", "mbplugins.spatial.constraints:Distance", "spatial"),
        ("spherical_spherical", "mbplugins.spatial.constraints:SphericalSpherical", "spatial"),
        ("spherical_revolute", "mbplugins.spatial.constraints:SphericalRevolute", "spatial"),
        ("revolute_revolute", "mbplugins.spatial.constraints:RevoluteRevolute", "spatial"),
        ("point_coordinate", "mbplugins.spatial.constraints:PointCoordinate", "spatial"),
        ("distance_driver", "mbplugins.spatial.constraints:DistanceDriver", "spatial"),
        ("angle_driver", "mbplugins.spatial.constraints:AngleDriver", "spatial"),
        ("rotation_driver", "mbplugins.spatial.constraints:RotationDriver", "spatial"),
        ("fixed", "mbplugins.spatial.constraints:Fixed", "spatial"),
        ("perpendicular", "mbplugins.spatial.constraints:Perpendicular", "spatial"),
        ("parallel", "mbplugins.spatial.constraints:Parallel", "spatial"),
        ("screw", "mbplugins.spatial.composites:Screw", "spatial"),
        ("revolute_cylindrical", "mbplugins.spatial.composites:RevoluteCylindrical", "spatial"),
        ("point_on_line", "mbplugins.spatial.composites:PointOnLine", "spatial"),
        ("point_on_plane", "mbplugins.spatial.composites:PointOnPlane", "spatial"),
        ("relative_rotation_ep", "mbplugins.spatial.composites:RelativeRotationEP", "spatial"),
        ("orientation_lock", "mbplugins.spatial.composites:OrientationLock", "spatial"),
        ("rolling_disc", "mbplugins.rolling.planar:PlanarRollingDisc"),
        ("rolling_disc", "mbplugins.rolling.spatial:RollingDisc", "spatial"),
    ],
    "mbcore_force_types": [
        ("tsda", "mbplugins.planar.forces:TSDA"),
        ("rsda", "mbplugins.planar.forces:RSDA"),
        ("force", "mbplugins.planar.forces:PointForce"),
        ("torque", "mbplugins.planar.forces:Torque"),
        ("drag", "mbplugins.planar.forces:Drag"),
        ("contact", "mbplugins.planar.contact:Contact"),
        ("damping", "mbplugins.planar.forces:FictitiousDamping"),
        ("user_force", "mbplugins.planar.userforce:UserForce"),
        ("tsda_nonlinear", "mbplugins.planar.nonlinear:NonlinearTSDA"),
        ("tsda", "mbplugins.spatial.forces:SpatialTSDA", "spatial"),
        ("rsda", "mbplugins.spatial.forces:SpatialRSDA", "spatial"),
        ("bushing", "mbplugins.spatial.forces:Bushing", "spatial"),
        ("force", "mbplugins.spatial.forces:SpatialPointForce", "spatial"),
        ("torque", "mbplugins.spatial.forces:SpatialTorque", "spatial"),
        ("drag", "mbplugins.spatial.forces:SpatialDrag", "spatial"),
        ("user_force", "mbplugins.spatial.forces:SpatialUserForce", "spatial"),
        ("contact", "mbplugins.contact.spatial:SpatialContact", "spatial"),
        ("sphere_group", "mbplugins.contact.spheres:SphereGroup", "spatial"),
    ],
    "mbcore_integrators": [
        ("euler", "mbplugins.integrators.explicit:Euler"),
        ("heun", "mbplugins.integrators.explicit:Heun"),
        ("midpoint", "mbplugins.integrators.explicit:Midpoint"),
        ("rk4", "mbplugins.integrators.explicit:RK4"),
        ("bs23", "mbplugins.integrators.erk:BS23"),
        ("dopri5", "mbplugins.integrators.erk:DOPRI5"),
        ("dop853", "mbplugins.integrators.erk:DOP853"),
        ("abm", "mbplugins.integrators.adams:AdamsPECE"),
        ("bdf", "mbplugins.integrators.bdf:BDF"),
        ("implicit_euler", "mbplugins.integrators.implicit:ImplicitEuler"),
        ("trapezoid", "mbplugins.integrators.implicit:Trapezoid"),
        ("radau", "mbplugins.integrators.radau:Radau5"),
        ("sdirk", "mbplugins.integrators.sdirk:SDIRK4"),
        ("rk3", "mbplugins.integrators.classical:RK3"),
        ("rk2", "mbplugins.integrators.classical:RK2Family"),
        ("ab", "mbplugins.integrators.classical:AdamsBashforth"),
        ("abm4", "mbplugins.integrators.classical:ABM4"),
        ("taylor2", "mbplugins.integrators.classical:Taylor2"),
        ("verlet", "mbplugins.integrators.classical:Verlet"),
        ("am", "mbplugins.integrators.adams_moulton:AdamsMoulton"),
        ("genalpha", "mbplugins.integrators.genalpha:GeneralizedAlpha"),
        ("hht", "mbplugins.integrators.genalpha:HHT"),
        ("genalpha_var", "mbplugins.integrators.genalpha:VariableGeneralizedAlpha"),
        ("rkmk4", "mbplugins.integrators.liegroup:RKMK4"),
    ],
    "mbcore_formulations": [
        ("di", "mbplugins.formulations.baumgarte:DI"),
        ("cs", "mbplugins.formulations.baumgarte:CS"),
        ("cp", "mbplugins.formulations.partitioning:CP"),
        ("projection", "mbplugins.formulations.projection:Projection"),
        ("ggl", "mbplugins.formulations.ggl:GGL"),
        ("penalty", "mbplugins.formulations.penalty:Penalty"),
        ("stiff", "mbplugins.formulations.stiff:Stiff"),
        ("di_omega", "mbplugins.formulations.omega:AngularVelocityDI"),
        ("joint_coordinates", "mbplugins.formulations.joint_coordinates:JointCoordinates"),
    ],
    "mbcore_analyses": [
        ("kinematic", "mbplugins.analyses.kinematic:KinematicAnalysis"),
        ("kinetostatic", "mbplugins.analyses.kinematic:KinetostaticAnalysis"),
        ("static", "mbplugins.analyses.static:StaticAnalysis"),
        ("dynamic", "mbplugins.analyses.dynamic:DynamicAnalysis"),
        ("modes", "mbplugins.analyses.modes:ModesAnalysis"),
    ],
    "mbcore_reporters": [
        ("hdf5", "mbplugins.reporters.hdf5:HDF5Reporter"),
        ("memory", "mbplugins.reporters.memory:MemoryReporter"),
    ],
}


def _lazy(hook: str) -> list[LazyType]:
    return [LazyType(*entry) for entry in CATALOGUE[hook]]


@hookimpl
def mbcore_constraint_types():
    return _lazy("mbcore_constraint_types")


@hookimpl
def mbcore_force_types():
    return _lazy("mbcore_force_types")


@hookimpl
def mbcore_formulations():
    return _lazy("mbcore_formulations")


@hookimpl
def mbcore_analyses():
    return _lazy("mbcore_analyses")


@hookimpl
def mbcore_integrators():
    return _lazy("mbcore_integrators")


@hookimpl
def mbcore_reporters():
    return _lazy("mbcore_reporters")
