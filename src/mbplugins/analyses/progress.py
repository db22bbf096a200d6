"""The progress bar of the time-stepping analyses: tqdm's (shown after 1 s) when
enabled and installed, else a bar that does nothing."""
from __future__ import annotations

from typing import Any


class NoBar:
    """A progress bar that shows nothing (the null object of :func:`progress`)."""

    def update(self, n: int) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""


def progress(total: int, enabled: bool) -> Any:
    """A bar of ``total`` steps (``update(n)``, ``close()``)."""
    if not enabled:
        return NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is an optional extra
        return NoBar()
    return tqdm(total=total, delay=1.0, unit="step", leave=False)
