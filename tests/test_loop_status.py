"""The compiled loops' status codes are one enum: mbcore.integrate.loop_result.LoopStatus in
Python and ``LOOP_STATUS`` of the one extension module that runs the step loop."""
from __future__ import annotations

import importlib

import pytest

from mbcore.integrate.loop_result import LoopStatus
from mbcore.system import compiled_available

pytestmark = pytest.mark.skipif(not compiled_available(), reason="compiled kernels not built")

_NAMES = {"done": LoopStatus.DONE, "stopped": LoopStatus.STOPPED,
          "evaluation_failed": LoopStatus.EVALUATION_FAILED,
          "step_too_small": LoopStatus.STEP_TOO_SMALL,
          "stop_condition": LoopStatus.STOP_CONDITION, "budget": LoopStatus.BUDGET}


def test_the_extension_uses_the_same_codes():
    ext = importlib.import_module("mbcore._ext._steploop")
    assert ext.LOOP_STATUS == {k: int(v) for k, v in _NAMES.items()}
    assert sorted(_NAMES.values()) == list(LoopStatus)


def test_an_unknown_code_is_refused():
    with pytest.raises(ValueError):
        LoopStatus(6)


def test_only_one_extension_module_runs_a_loop():
    """The loops of the explicit, multistep and implicit methods are steppers in one
    skeleton: no other extension module defines a run_* loop or the status codes."""
    import pkgutil

    import mbcore._ext as core_ext
    import mbplugins._ext as plugin_ext
    owners = []
    for pkg in (core_ext, plugin_ext):
        for info in pkgutil.iter_modules(pkg.__path__):
            mod = importlib.import_module(f"{pkg.__name__}.{info.name}")
            if hasattr(mod, "LOOP_STATUS") or any(
                    name.startswith("run_") and callable(getattr(mod, name))
                    for name in dir(mod)):
                owners.append(mod.__name__)
    assert owners == ["mbcore._ext._steploop"]
