"""Progress bars: tqdm's, written to stderr only when stderr is a terminal (a log
file or a pipe gets no bar lines), or nothing when progress is off or tqdm is
missing.  Every bar of mbcore (runs, sweeps, CSV export, animation) comes from
:func:`progress_bar`.  ``MBCORE_PROGRESS=1`` shows bars on any stderr, ``0`` none."""
from __future__ import annotations

import os
import sys
from typing import Any, Iterable


class NoBar:
    """A progress bar that shows nothing (also iterates what it wraps)."""

    def __init__(self, iterable: Iterable | None = None):
        self._iterable = iterable

    def __iter__(self):
        return iter(self._iterable if self._iterable is not None else ())

    def update(self, n: int = 1) -> None:
        """Nothing to show."""

    def close(self) -> None:
        """Nothing to close."""

    def set_postfix(self, *args: Any, **kw: Any) -> None:
        """Nothing to show."""


def bars_wanted(enabled: bool = True) -> bool:
    """Whether a bar is shown: ``enabled`` and stderr a terminal (or
    ``MBCORE_PROGRESS`` = 1 / 0 forcing it on / off)."""
    if not enabled:
        return False
    forced = os.environ.get("MBCORE_PROGRESS", "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):    # no stderr, or a closed one
        return False


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True,
                 **kw: Any) -> Any:
    """``tqdm(iterable, **kw)`` when :func:`bars_wanted`, else a :class:`NoBar`."""
    if not bars_wanted(enabled):
        return NoBar(iterable)
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is an optional extra
        return NoBar(iterable)
    return tqdm(iterable, **kw)
