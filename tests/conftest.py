"""Shared fixtures: example paths, plugin registry, both evaluation backends.

``MBCORE_TEST_STUB_PLUGINS=1``: the core's own tests (``-m core``) run without the
built-in plugins: ``mbplugins`` is made unimportable, its entry point is skipped
(``MBCORE_DISABLE_PLUGINS``) and the stub plugin set tests/stub_plugins.py is loaded
instead (``MBCORE_PLUGINS``); subprocesses inherit the setting
(tests/test_core_independence.py).
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# A suite started in the background by a shell without job control (``cmd &`` in a
# script) inherits SIGINT ignored, and then neither this process nor the runs it
# starts see Ctrl-C (mbcore keeps an ignored SIGINT ignored, as nohup asks).  The
# tests of Ctrl-C need Python's own handler: put it back here (the processes that
# the tests start then get the default disposition, hence Python's handler too).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

STUB_PLUGINS = os.environ.get("MBCORE_TEST_STUB_PLUGINS") == "1"
if STUB_PLUGINS:
    import sys

    from import_blocker import block
    block("mbplugins")
    _here = str(Path(__file__).resolve().parent)
    if _here not in sys.path:
        sys.path.insert(0, _here)
    os.environ["MBCORE_DISABLE_PLUGINS"] = "mbplugins"
    os.environ["MBCORE_PLUGINS"] = "stub_plugins:PLUGIN"
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (
        _here, os.environ.get("PYTHONPATH", ""))))

from mbcore.system import compiled_available

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"

BACKENDS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(
    not compiled_available(), reason="compiled kernels not built"))]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def examples():
    return EXAMPLES


@pytest.fixture
def stub_pm():
    """A plugin manager with the stub plugin set (tests/stub_plugins.py) — and, in the
    default run, the built-in plugins too."""
    import stub_plugins

    from mbcore.plugins import PluginManager
    pm = PluginManager()
    if not pm.pluggy.is_registered(stub_plugins.PLUGIN):
        pm.register(stub_plugins.StubSet(skip={"memory"}), name="stub_plugins")
    return pm
