"""``RunSummary``: what a run needs to know of its rows, in bounded memory.

:func:`mbcore.run` reports every row to a :class:`RunSummary` next to the other
reporters: it keeps the number of rows, the time of the last one and the first
value that is not finite (NaN or inf; never a silent NaN in a result), checked a
block of rows at a time.  Its memory does not grow with the rows, so a run
streaming to an HDF5 file keeps no copy of them.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from .reporting import Reporter, RunInfo, layout_of
from .result import store_row

__all__ = ["RunSummary", "NAN_ALLOWED"]

#: columns where NaN is the documented "not computed" mark (docs/analyses.md)
NAN_ALLOWED = {"solver": ("pivot_ratio",)}
#: bytes of the block of single rows checked at once
BLOCK_BYTES = 256 * 1024


class RunSummary(Reporter):
    """Row count, last time and the first non-finite value of a run (bounded memory:
    one block of at most :data:`BLOCK_BYTES` rows)."""

    name = "summary"
    interrupted_status = True

    def __init__(self) -> None:
        #: rows checked at once (set by ``start``)
        self.block_rows = 1
        self.n_rows = 0
        self.last_t: float | None = None
        #: (time, channel, label, value) of the first non-finite value, or None
        self.first_non_finite: tuple[float, str, str, float] | None = None

    def start(self, info: RunInfo) -> None:
        self._layout = layout_of(info.channels)
        width = sum(w for _, w in self._layout)
        self._channels = list(info.channels)        # flat column -> (channel, label):
        allowed = np.zeros(width, dtype=bool)       # _name, only for a non-finite value
        off = 0
        for c in info.channels:
            ok = NAN_ALLOWED.get(c.name, ())
            if ok:                                  # (no loop over the wide channels)
                labels = list(c.labels)
                for k in range(c.width):
                    allowed[off + k] = (labels[k] if k < len(labels) else str(k)) in ok
            off += c.width
        self._allowed = allowed if allowed.any() else None
        self.block_rows = max(1, min(4096, BLOCK_BYTES // (8 * max(width, 1))))
        self._flat = np.empty((self.block_rows, width))
        self._t = np.empty(self.block_rows)
        self._slots = []
        off = 0
        for c in info.channels:
            self._slots.append((c.name, self._flat[:, off:off + c.width], c.width))
            off += c.width
        self._k = 0                  # rows in the block

    def record(self, t: float, data: Mapping[str, np.ndarray]) -> None:
        k = self._k
        self._layout = store_row(data, k, self._flat, self._slots, self._layout, t)
        self._t[k] = t
        self._k = k + 1
        self.n_rows += 1
        self.last_t = float(t)
        if self._k == self.block_rows:
            self._check_block()

    def record_rows(self, t: np.ndarray, rows: np.ndarray, layout: tuple) -> None:
        """A block of rows (Reporter rule 5): checked where it is, not copied."""
        if not (layout is self._layout or layout == self._layout):
            return super().record_rows(t, rows, layout)      # row by row
        if len(t) == 0:
            return
        self._check_block()                  # the single rows before these, in order
        self._check(t, rows)
        self.n_rows += len(t)
        self.last_t = float(t[-1])

    def finish(self, status: str, reason: str = "",
               stats: Mapping[str, Any] | None = None) -> None:
        self._check_block()

    def _check_block(self) -> None:
        k, self._k = self._k, 0
        if k:
            self._check(self._t[:k], self._flat[:k])

    def _check(self, t: np.ndarray, rows: np.ndarray) -> None:
        """Keep the first non-finite value of ``rows`` (earliest row, then first
        column) unless an earlier one is known."""
        if self.first_non_finite is not None:
            return
        ok = np.isfinite(rows)
        if self._allowed is not None:
            ok |= self._allowed
        if ok.all():
            return
        i, j = (int(x[0]) for x in np.nonzero(~ok))
        channel, label = self._name(j)
        self.first_non_finite = (float(t[i]), channel, label, float(rows[i, j]))

    def _name(self, j: int) -> tuple[str, str]:
        """(channel, label) of flat column j (a label's index when it has none)."""
        for c in self._channels:
            if j < c.width:
                labels = list(c.labels)
                return c.name, (labels[j] if j < len(labels) else str(j))
            j -= c.width
        raise IndexError(j)

    def error(self) -> Exception | None:
        """An AnalysisError naming the first non-finite value (channel, label, time),
        or None when every recorded value is finite."""
        self._check_block()
        if self.first_non_finite is None:
            return None
        from ..errors import AnalysisError
        t, channel, label, value = self.first_non_finite
        return AnalysisError(f"the result '{channel}' is not finite at '{label}' "
                             f"({value}): the model's values are out of range", t)
