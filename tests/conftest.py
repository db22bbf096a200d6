"""Shared fixtures: example paths, plugin registry, both evaluation backends."""
from __future__ import annotations

from pathlib import Path

import pytest

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
