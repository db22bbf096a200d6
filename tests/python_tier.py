"""A third-party plugin set with a Python-only force type, shared by the tests of the
fallbacks to the Python path: ``py_tsda`` is the built-in planar spring-damper
without its compiled kernel."""
from __future__ import annotations


def python_tsda_plugins():
    """A PluginManager with the built-ins and ``py_tsda`` (the TSDA, Python only)."""
    from mbcore import hookimpl
    from mbcore.plugins import PluginManager
    from mbplugins.planar.forces import TSDA

    class PyTSDA(TSDA):
        name = "py_tsda"
        kernel = None

    class Plugin:
        @hookimpl
        def mbcore_force_types(self):
            return [PyTSDA]

    pm = PluginManager()
    pm.register(Plugin(), name="third")
    return pm
