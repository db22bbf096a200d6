"""Built-in formulations of the equations of motion (Nikravesh (1988), §13.3–13.4).

The names below (and :data:`FORMULATIONS`) import their modules on first access
(PEP 562), so that importing one formulation does not import the others (and
their SciPy dependencies): start-up.
"""
from __future__ import annotations

import importlib

_WHERE = {"DI": "baumgarte", "CS": "baumgarte", "CP": "partitioning", "GGL": "ggl",
          "AngularVelocityDI": "omega", "JointCoordinates": "joint_coordinates",
          "Penalty": "penalty", "Projection": "projection", "Stiff": "stiff"}
_ORDER = ["DI", "CS", "CP", "Projection", "GGL", "Penalty", "Stiff", "AngularVelocityDI",
          "JointCoordinates"]

__all__ = ["FORMULATIONS", *_ORDER]


def __getattr__(name):
    if name == "FORMULATIONS":
        value = [__getattr__(n) for n in _ORDER]
    elif name in _WHERE:
        value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
