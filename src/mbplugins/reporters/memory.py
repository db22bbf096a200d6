"""In-memory reporter: keeps every row in NumPy arrays (grown by doubling).

After ``finish``, :meth:`MemoryReporter.result` returns a
:class:`mbcore.results.result.MemoryResult`, which has the same read API as an HDF5
:class:`mbcore.results.result.Result`.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from mbcore.results.reporting import Reporter, RunInfo, layout_of
from mbcore.results.result import MemoryResult, copy_group, store_row, utc_now, validate_run_info

__all__ = ["MemoryReporter"]

_STATUSES = ("finished", "failed", "interrupted")   # interrupted: Ctrl-C / SIGTERM


class MemoryReporter(Reporter):
    """Keep results in memory.  ``initial_rows`` is the first capacity (at most
    ~8 MiB of rows for wide models); it doubles whenever it is reached (amortised
    O(1) per row) and is trimmed at ``finish``."""

    name = "memory"
    interrupted_status = True       # finish("interrupted") after Ctrl-C / SIGTERM
    description = "keeps results in memory (returned by mbcore.run)"

    def __init__(self, *, initial_rows: int = 1024):
        if isinstance(initial_rows, bool) or not isinstance(initial_rows, (int, np.integer)) \
                or initial_rows < 1:
            raise ValueError(f"MemoryReporter: initial_rows must be an integer >= 1, "
                             f"got {initial_rows!r}")
        self._cap = int(initial_rows)
        self._state = "new"
        self._n = 0
        self._events: list[tuple[float, str, str]] = []
        self._groups: dict[str, tuple[dict, dict]] = {}
        self._result: MemoryResult | None = None
        self.status = ""
        self.reason = ""
        self.stats: dict[str, Any] = {}

    def start(self, info: RunInfo) -> None:
        if self._state != "new":
            raise RuntimeError("MemoryReporter: start() called twice")
        self._state = "broken"      # until start() succeeds; finish() is then a no-op
        validate_run_info(info)
        self._info = info
        self._created = utc_now()
        self._finished = ""
        # the rows the analysis plans (up to ~1 GiB at once, so a long run does not
        # copy its rows at every doubling), else at most ~8 MiB, then double
        width = max(1, sum(c.width for c in info.channels))
        planned = int(getattr(info, "expected_rows", 0) or 0)
        self._cap = max(1, min(planned, (1 << 30) // (8 * width)) if planned > 0
                        else min(self._cap, (8 << 20) // (8 * width)))
        self._t = np.empty(self._cap)
        self._layout = layout_of(info.channels)
        self._slots = [[c.name, None, c.width] for c in info.channels]
        self._alloc(self._cap, 0)
        self.status = "running"
        self._state = "running"

    def _alloc(self, cap: int, n: int) -> None:
        """One (cap, total width) array for all channels (a packed Row is copied with
        one assignment); each channel is a column view of it."""
        flat = np.empty((cap, sum(w for _, w in self._layout)))
        if n:
            flat[:n] = self._flat[:n]
        self._flat = flat
        off = 0
        for slot in self._slots:
            slot[1] = flat[:, off:off + slot[2]]
            off += slot[2]

    def _grow(self) -> None:
        cap = 2 * self._cap
        n = self._n
        t = np.empty(cap)
        t[:n] = self._t[:n]
        self._t = t
        self._alloc(cap, n)
        self._cap = cap

    def record(self, t: float, data: Mapping[str, np.ndarray]) -> None:
        if self._state != "running":
            raise self._state_error("record")
        i = self._n
        if i == self._cap:
            self._grow()
        self._layout = store_row(data, i, self._flat, self._slots, self._layout, t)
        self._t[i] = t
        self._n = i + 1

    def record_rows(self, t: np.ndarray, rows: np.ndarray, layout: tuple) -> None:
        """A block of rows packed as ``layout`` (Reporter rule 5): one copy."""
        if self._state != "running":
            raise self._state_error("record")
        if not (layout is self._layout or layout == self._layout):
            return super().record_rows(t, rows, layout)      # channel by channel
        k = len(t)
        i = self._n
        while i + k > self._cap:
            self._grow()
        self._flat[i:i + k] = rows
        self._t[i:i + k] = t
        self._n = i + k

    def event(self, t: float, kind: str, message: str) -> None:
        if self._state != "running":
            raise self._state_error("event")
        self._events.append((float(t), str(kind), str(message)))

    def group(self, name: str, data: Mapping[str, Any], attrs: Mapping[str, Any]) -> None:
        """Keep a group of non-series arrays (Reporter rule 6), copied."""
        if self._state != "running":
            raise self._state_error("group")
        self._groups[name] = (copy_group(name, data), dict(attrs))

    def finish(self, status: str, reason: str = "",
               stats: Mapping[str, Any] | None = None) -> None:
        if status not in _STATUSES:
            raise ValueError(f"MemoryReporter.finish: status must be one of {_STATUSES}, "
                             f"got {status!r}")
        if self._state == "broken":
            return
        if self._state != "running":
            raise self._state_error("finish")
        n = self._n
        self._t = self._t[:n].copy()           # trim: release the spare capacity
        for slot in self._slots:
            slot[1] = slot[1][:n].copy()
        self._flat = None
        self._cap = max(n, 1)
        self.status = status
        self.reason = str(reason)
        self.stats = dict(stats or {})
        self._finished = utc_now()
        self._state = "finished"
        self._result = self._make_result(copy=False)

    def _make_result(self, copy: bool) -> MemoryResult:
        n = self._n
        pick = (lambda a: a[:n].copy()) if copy else (lambda a: a[:n])
        return MemoryResult(
            info=self._info, t=pick(self._t),
            series={name: pick(buf) for name, buf, _ in self._slots},
            status=self.status, reason=self.reason, stats=self.stats,
            events=list(self._events), created=self._created, finished=self._finished,
            groups=self._groups)

    def result(self) -> MemoryResult:
        """The recorded result.  Before ``finish`` this is a snapshot (copies) with
        status ``"running"``; after it, the final result (always the same object)."""
        if self._state == "finished":
            return self._result
        if self._state == "running":
            return self._make_result(copy=True)
        raise RuntimeError(f"MemoryReporter: result() needs a started run (state {self._state})")

    @property
    def n_rows(self) -> int:
        return self._n

    @property
    def last_t(self) -> float | None:
        """Time of the last row recorded (None before the first)."""
        return float(self._t[self._n - 1]) if self._n else None

    def _state_error(self, what: str) -> RuntimeError:
        if self._state == "new":
            return RuntimeError(f"MemoryReporter: {what}() before start()")
        if self._state == "broken":
            return RuntimeError(f"MemoryReporter: {what}() after start() failed")
        return RuntimeError(f"MemoryReporter: {what}() after finish()")

    def __repr__(self) -> str:
        return f"<MemoryReporter {self._state}, {self._n} rows>"
