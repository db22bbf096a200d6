"""The compiled loops' status codes are one enum: mbcore.integrate.loop_result.LoopStatus in
Python and ``LOOP_STATUS`` of every extension module that runs a loop."""
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


@pytest.mark.parametrize("module", ["_dynamics", "_multistep"])
def test_the_extension_uses_the_same_codes(module):
    ext = importlib.import_module(f"mbcore._ext.{module}")
    assert ext.LOOP_STATUS == {k: int(v) for k, v in _NAMES.items()}
    assert sorted(_NAMES.values()) == list(LoopStatus)


def test_an_unknown_code_is_refused():
    with pytest.raises(ValueError):
        LoopStatus(6)
