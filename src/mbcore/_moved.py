"""The module paths of mbcore before its layer packages (version 0.2): each old path
still imports, as the module that now holds its code, with a DeprecationWarning
naming the new path.  (``mbcore.plugins``, ``mbcore.elements``, ``mbcore.system``,
``mbcore.model``, ``mbcore.analysis`` and ``mbcore.cli`` are packages that re-export
what the modules of those names exported.)"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

#: old module path -> the module that holds its code now
MOVED: dict[str, str] = {
    "mbcore.contract": "mbcore.plugins.contract",
    "mbcore.hookspecs": "mbcore.plugins.hookspecs",
    "mbcore.plugin_errors": "mbcore.plugins.errors",
    "mbcore.compiled_plugins": "mbcore.plugins.compiled",
    "mbcore.schema": "mbcore.elements.schema",
    "mbcore.functions": "mbcore.elements.functions",
    "mbcore.expressions": "mbcore.elements.expressions",
    "mbcore.rotations": "mbcore.elements.rotations",
    "mbcore.bodykinds": "mbcore.elements.bodykinds",
    "mbcore.inputs": "mbcore.elements.inputs",
    "mbcore.limits": "mbcore.elements.limits",
    "mbcore.kernels": "mbcore.system.kernels",
    "mbcore.state": "mbcore.system.state",
    "mbcore.mass": "mbcore.system.mass",
    "mbcore.dynamics": "mbcore.solve.dynamics",
    "mbcore.assembly": "mbcore.solve.assembly",
    "mbcore.formulation": "mbcore.solve.formulation",
    "mbcore.impacts": "mbcore.solve.impacts",
    "mbcore.linear": "mbcore.analysis.linear",
    "mbcore.linalg": "mbcore.solve.linalg",
    "mbcore.sparse_schur": "mbcore.solve.sparse_schur",
    "mbcore.dijac": "mbcore.solve.dijac",
    "mbcore.redundancy": "mbcore.solve.redundancy",
    "mbcore.loop_result": "mbcore.integrate.loop_result",
    "mbcore.fastloop": "mbcore.integrate.fastloop",
    "mbcore.multistep_loop": "mbcore.integrate.multistep_loop",
    "mbcore.simulation_loop": "mbcore.integrate.simulation_loop",
    "mbcore.reporting": "mbcore.results.reporting",
    "mbcore.result": "mbcore.results.result",
    "mbcore.run_summary": "mbcore.results.run_summary",
    "mbcore.plotting": "mbcore.results.plotting",
    "mbcore.runner": "mbcore.analysis.runner",
    "mbcore.checkpoint": "mbcore.analysis.checkpoint",
    "mbcore.simulation": "mbcore.analysis.simulation",
    "mbcore.simulation_params": "mbcore.analysis.simulation_params",
    "mbcore.interrupts": "mbcore.analysis.interrupts",
    "mbcore.cli_export": "mbcore.cli.export",
    "mbcore.cli_modes": "mbcore.cli.modes",
    "mbcore.cli_plot": "mbcore.cli.plot",
    "mbcore.cli_sweep": "mbcore.cli.sweep",
}


class _Alias(importlib.abc.Loader):
    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        warnings.warn(f"{module.__name__} moved to {self.new}; the old path will be "
                      f"removed in a later version", DeprecationWarning, stacklevel=2)
        # the import system hands out what sys.modules holds after this call: the
        # module itself, so both names are one object (patching either patches both)
        sys.modules[module.__name__] = importlib.import_module(self.new)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        new = MOVED.get(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname,
                                                                           _Alias(new))


def install() -> None:
    """Put the finder of the old paths on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
