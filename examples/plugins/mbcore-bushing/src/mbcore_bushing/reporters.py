"""``peaks``: a reporter that keeps each column's largest absolute value and writes
them to a JSON file when the run ends.

Select it in a model file (mbcore's ``settings.reporters``)::

    settings:
      reporters:
        - {type: peaks, file: peaks.json, channels: [q, forces]}

The JSON file::

    {"model": ..., "analysis": ..., "status": "finished", "reason": "",
     "rows": 201, "t": [t_first, t_last],
     "channels": {"q": {"crank.x": {"max_abs": 1.2, "t": 0.35}, ...}, ...}}

``t`` of a column is the first output time at which its peak occurred (null for a
column that never held a finite value).  Non-finite values are ignored for the peaks
and counted in ``nonfinite``.  The file is also written when the run fails or is
interrupted (status ``failed`` / ``interrupted``), with the rows recorded so far.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from mbcore.errors import ModelError
from mbcore.results.reporting import Reporter, RunInfo
from mbcore.elements.schema import Param


class PeaksReporter(Reporter):
    """Per-column peak |value| of chosen channels, written as JSON at ``finish``."""

    name = "peaks"
    description = "writes the largest |value| of every column of chosen channels to JSON"
    interrupted_status = True
    #: options in ``settings.reporters`` (validated by mbcore with key paths)
    params = {
        "file": Param("string", "JSON file to write (relative to the working directory)"),
        "channels": Param("strings", "channels to watch (default: every channel)",
                          required=False),
    }

    def __init__(self, file: str | os.PathLike, channels: Sequence[str] | None = None):
        self.path = Path(file)
        self.wanted = None if channels is None else list(channels)
        self._info: RunInfo | None = None
        self._n = 0

    def start(self, info: RunInfo) -> None:
        names = [c.name for c in info.channels]
        chosen = names if self.wanted is None else self.wanted
        for name in chosen:
            if name not in names:
                raise ModelError("peaks.channels", f"unknown channel {name!r} (this "
                                 f"{info.analysis} run records {', '.join(names)})")
        if not self.path.parent.exists():
            raise ModelError("peaks.file", f"directory '{self.path.parent}' does not exist")
        self._info = info
        self._chosen = [info.channel(n) for n in chosen]
        self._peak = {c.name: np.zeros(c.width) for c in self._chosen}
        self._when = {c.name: np.full(c.width, np.nan) for c in self._chosen}
        self._nonfinite = {c.name: np.zeros(c.width, dtype=np.int64) for c in self._chosen}
        self._n = 0
        self._t = [np.nan, np.nan]

    def _update(self, name: str, t: np.ndarray, block: np.ndarray) -> None:
        """Fold a (k, width) block of one channel at times t (k,) into its peaks."""
        a = np.abs(block)
        bad = ~np.isfinite(a)
        if bad.any():
            self._nonfinite[name] += bad.sum(0)
            a = np.where(bad, -1.0, a)
        i = np.argmax(a, axis=0)                        # first row of each column's max
        top = a[i, np.arange(a.shape[1])]
        new = (top > self._peak[name]) | (np.isnan(self._when[name]) & (top >= 0.0))
        self._peak[name][new] = top[new]
        self._when[name][new] = t[i[new]]

    def _times(self, t: np.ndarray) -> None:
        if self._n == 0:
            self._t[0] = float(t[0])
        self._t[1] = float(t[-1])
        self._n += len(t)

    def record(self, t: float, data: Mapping[str, np.ndarray]) -> None:
        tt = np.array([t], dtype=float)
        for c in self._chosen:
            self._update(c.name, tt, np.asarray(data[c.name], dtype=float)[None, :])
        self._times(tt)

    def record_rows(self, t: np.ndarray, rows: np.ndarray, layout: tuple) -> None:
        """A block of rows (Reporter rule 5): one vectorised update per channel."""
        if len(t) == 0:
            return
        offsets, off = {}, 0
        for name, width in layout:
            offsets[name] = (off, width)
            off += width
        t = np.asarray(t, dtype=float)
        for c in self._chosen:
            o, w = offsets[c.name]
            self._update(c.name, t, rows[:, o:o + w])
        self._times(t)

    def finish(self, status: str, reason: str = "",
               stats: Mapping[str, Any] | None = None) -> None:
        if self._info is None:              # start() never succeeded: nothing to write
            return
        info = self._info
        channels = {}
        for c in self._chosen:
            cols = {}
            for k, label in enumerate(c.labels):
                when = self._when[c.name][k]
                entry: dict[str, Any] = {
                    "max_abs": None if np.isnan(when) else float(self._peak[c.name][k]),
                    "t": None if np.isnan(when) else float(when)}
                if self._nonfinite[c.name][k]:
                    entry["nonfinite"] = int(self._nonfinite[c.name][k])
                cols[label] = entry
            channels[c.name] = cols
        doc = {"model": info.model_name, "analysis": info.analysis, "status": status,
               "reason": reason, "rows": self._n,
               "t": None if self._n == 0 else self._t, "channels": channels}
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
        os.replace(tmp, self.path)          # readers never see half a file
        self._info = None
