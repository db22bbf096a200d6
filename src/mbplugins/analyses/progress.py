"""The progress bar of the time-stepping analyses: tqdm's (shown after 1 s) when
enabled, installed and stderr is a terminal (:mod:`mbcore.results.progress`), else a bar
that does nothing."""
from __future__ import annotations

from typing import Any

from mbcore.results.progress import NoBar, progress_bar

__all__ = ["NoBar", "progress"]


def progress(total: int, enabled: bool) -> Any:
    """A bar of ``total`` steps (``update(n)``, ``close()``)."""
    return progress_bar(enabled=enabled, total=total, delay=1.0, unit="step", leave=False)
