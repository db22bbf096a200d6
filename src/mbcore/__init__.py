"""mbcore — computer-aided analysis of multibody systems.

Model (description) -> System (compiled) -> analyses -> reporters -> Result.
"""
from __future__ import annotations

from ._version import __version__  # noqa: E402
from ._moved import install as _install_moved  # noqa: E402

_install_moved()          # the module paths before the layer packages still import

from .errors import (AnalysisError, AssemblyError, ConflictingConstraintsError,  # noqa: E402
                     ConvergenceError, LockupError, MbcoreError, ModelError, PluginError,
                     SingularJacobianError)
from .plugins.hookspecs import hookimpl  # noqa: E402
from .model.model import Body, Model, Point  # noqa: E402
from .system.state import State  # noqa: E402


def get_include() -> str:
    """Directory of ``mbcore_plugin.h``, the C contract of the compiled plugin tier
    (pass it as ``include_dirs`` when building a compiled plugin; docs/plugin-guide.md)."""
    import os
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "include")


def __getattr__(name):  # lazy: keep `import mbcore` light
    if name == "System":
        from .system.system import System
        return System
    if name == "Result":
        from .results.result import Result
        return Result
    if name in ("run", "resume"):
        from .analysis import runner
        return getattr(runner, name)
    if name == "load":
        return Model.from_file
    if name in ("sweep", "Study"):
        from . import studies
        return getattr(studies, name)
    if name in ("Simulation", "SimulationState", "SimulationError"):
        from .analysis import simulation
        return getattr(simulation, name)
    if name == "accelerations":
        from .solve.dynamics import accelerations
        return accelerations
    if name == "view":
        from .results.viewer import view
        return view
    if name in ("linearize", "LinearModel", "Modes"):
        from .analysis import linear
        return getattr(linear, name)
    raise AttributeError(f"module 'mbcore' has no attribute {name!r}")


__all__ = ["Model", "Body", "Point", "State", "System", "Result", "run", "resume", "load", "hookimpl", "get_include",
           "linearize", "LinearModel", "Modes", "accelerations", "sweep", "Study", "Simulation",
           "SimulationState", "SimulationError",
           "AssemblyError",
           "MbcoreError", "ModelError", "PluginError", "AnalysisError", "ConvergenceError",
           "LockupError", "SingularJacobianError", "ConflictingConstraintsError",
           "__version__"]
