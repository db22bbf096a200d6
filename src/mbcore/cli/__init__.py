"""The ``mbcore`` command."""
from __future__ import annotations

from .app import (  # noqa: F401  (the former mbcore.cli)
    main, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE)

__all__ = ["main", "EXIT_FAILED", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE"]
