"""The progress bar of the time-stepping analyses: tqdm's (shown after 1 s) when
enabled and installed, else a bar that does nothing."""
from __future__ import annotations

from typing import Any


class NoBar:
    """A progress bar that shows nothing."""

    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress(total: int, enabled: bool) -> Any:
    """A bar of ``total`` steps (``update(n)``, ``close()``)."""
    if enabled:
        try:
            from tqdm import tqdm
            return tqdm(total=total, delay=1.0, unit="step", leave=False)
        except ImportError:  # pragma: no cover
            pass
    return NoBar()
