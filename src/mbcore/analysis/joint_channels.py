"""The ``joints`` result channel: the relative coordinates of every joint whose type
provides them (:meth:`mbcore.elements.base.ConstraintType.relative`) and their rates,
e.g. a revolute's ``steer.angle`` and ``steer.angle_rate`` (docs/results.md).

The channel is computed from the recorded coordinates and velocities of output
rows, vectorised over the rows: one call of each type's ``relative`` per element
group and block of rows (the rows stacked as elements), as the ``angular`` and
``points`` channels are (:mod:`mbcore.system.output_rows`).  Angles a type gives as
principal values (its ``relative_angles``, atan2 values in (-pi, pi]) are unwrapped
continuously from the first row the run records on: between two successive rows
the channel takes the branch nearest the previous one, as an exact count of whole
turns, so that each row's value is ``principal + 2 pi k`` whatever the blocks the
rows came in (correct while an angle changes by less than pi between two output
rows).  A checkpoint of the dynamic analysis keeps the state (:meth:`state`): a
resumed run continues the count.  The dynamic analysis' compiled loop evaluates it for its output blocks; the
kinematic analyses, which produce one row at a time, hand their rows to the
reporters through :class:`BlockRecorder`, which evaluates it for blocks of rows; the
dynamic analysis' row-by-row path (the Python driver, projection, cp) does the same
(``_JointRows`` of :mod:`mbplugins.analyses.dynamic`), except with
``settings.output_rows: reference``, which calls it row by row.
"""
from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np

from ..results.reporting import Channel

__all__ = ["JointChannel", "joint_channel", "BlockRecorder"]

TWO_PI = 2.0 * math.pi


def _groups(system: Any) -> list:
    """The element groups of types with relative coordinates (no artificial
    coordinates), in the System's group order."""
    return [g for g in system.groups if not g.internal and not g.nx
            and getattr(g.ctype, "relative_labels", ())]


def joint_channel(system: Any) -> list[Channel]:
    """``[Channel("joints", ...)]`` when some joint of the model has relative
    coordinates, else ``[]``."""
    labels = JointChannel.labels_of(system)
    if not labels:
        return []
    return [Channel("joints", labels, "relative joint coordinates and their rates "
                                      "(angles in rad, unwrapped over the run)")]


class JointChannel:
    """The ``joints`` channel of one run (it keeps the unwrapping state)."""

    def __init__(self, system: Any):
        self.system = system
        groups = _groups(system)
        order = self._columns(system, groups)
        q0 = system.extended_rows(system.initial_state().q[None, :])[0]
        self.plan = []                       # (group, reference, columns, width per element)
        wrap = []
        for g in groups:
            k = len(g.ctype.relative_labels)
            cols = np.concatenate([order[name] for name in g.names]).astype(np.intp)
            ref = np.asarray(g.ctype.relative_reference(g.par, q0[g.gather_all]), dtype=float)
            self.plan.append((g, ref.reshape(g.ne, -1), cols, k))
            for e, name in enumerate(g.names):
                wrap += [order[name][c] for c in g.ctype.relative_angles]
        self.width = sum(len(v) for v in order.values())
        self.wrap = np.asarray(sorted(wrap), dtype=np.intp)
        # unwrapping state: principal values and whole turns of the last row, and
        # the state before the last call with that call's first time (a block
        # evaluated again from its start, after a failing row, starts from it)
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self._before: tuple[float, tuple | None] | None = None

    @staticmethod
    def labels_of(system: Any) -> list[str]:
        """``element.label`` for every relative coordinate, in element order."""
        order = {g.names[e]: [f"{g.names[e]}.{lab}" for lab in g.ctype.relative_labels]
                 for g in _groups(system) for e in range(g.ne)}
        return [lab for el in system.model.constraint_elements() if el.name in order
                for lab in order[el.name]]

    @staticmethod
    def _columns(system: Any, groups: list) -> dict[str, np.ndarray]:
        widths = {name: len(g.ctype.relative_labels) for g in groups for name in g.names}
        out, off = {}, 0
        for el in system.model.constraint_elements():
            if el.name in widths:
                out[el.name] = np.arange(off, off + widths[el.name])
                off += widths[el.name]
        return out

    def rows(self, Q: np.ndarray, QD: np.ndarray, T: np.ndarray | None = None) -> np.ndarray:
        """(R, width): the channel of the rows ``Q``, ``QD`` (R, n) at the times
        ``T`` (successive rows of the run, after those of the previous call)."""
        sysm = self.system
        R = Q.shape[0]
        out = np.empty((R, self.width))
        QX, QDX = sysm.extended_rows(Q), sysm.extended_rates(QD)
        for g, ref, cols, k in self.plan:
            ne = g.ne
            shp = (R * ne,) + g.gather_all.shape[1:]
            par = np.broadcast_to(g.par, (R,) + g.par.shape).reshape(R * ne, -1)
            val = np.asarray(g.ctype.relative(
                par, QX[:, g.gather_all].reshape(shp), QDX[:, g.gather_all].reshape(shp),
                np.broadcast_to(ref, (R,) + ref.shape).reshape(R * ne, -1)), dtype=float)
            if val.shape != (R * ne, k):
                raise ValueError(f"{type(g.ctype).__name__}.relative returned shape "
                                 f"{val.shape}, expected {(R * ne, k)}")
            out[:, cols] = val.reshape(R, ne * k)
        if self.wrap.size and R:
            self._unwrap(out, T)
        return out

    def state(self) -> dict | None:
        """The unwrapping state after the last row (for a checkpoint: a resumed
        run continues the whole turns), JSON-ready; None before any row."""
        if self._last is None:
            return None
        return {"raw": [float(x) for x in self._last[0]],
                "turns": [float(x) for x in self._last[1]]}

    def set_state(self, st: dict | None) -> None:
        """Continue from :meth:`state` of an earlier run of the same model."""
        if st is None or len(st["raw"]) != self.wrap.size:
            return
        self._last = (np.array(st["raw"], dtype=float), np.array(st["turns"], dtype=float))
        self._before = None

    def _unwrap(self, out: np.ndarray, T: np.ndarray | None) -> None:
        t0 = None if T is None else float(T[0])
        if t0 is not None and self._before is not None and self._before[0] == t0:
            self._last = self._before[1]     # the same rows again
        self._before = (t0, self._last)
        raw = out[:, self.wrap]
        if self._last is None:
            seq, k0 = raw, np.zeros(raw.shape[1])
            turns = np.zeros_like(raw)
            turns[1:] = np.cumsum(np.rint((seq[:-1] - seq[1:]) / TWO_PI), axis=0)
        else:
            prev, k0 = self._last
            seq = np.concatenate([prev[None, :], raw])
            turns = np.cumsum(np.rint((seq[:-1] - seq[1:]) / TWO_PI), axis=0)
        turns += k0
        out[:, self.wrap] = raw + TWO_PI * turns
        self._last = (raw[-1].copy(), turns[-1].copy())


class BlockRecorder:
    """``record(t, data)`` of an analysis that produces its rows one at a time (the
    kinematic analyses), with the ``joints`` channel evaluated for blocks of rows:
    each row's channels are copied, and every ``ROWS`` rows, ``SECONDS`` of wall
    time or at :meth:`flush` (the end of the run, also after an error) the
    block's ``joints`` columns are computed in one :meth:`JointChannel.rows` call
    and the rows handed to ``record`` in order.  The values are those of a
    row-by-row evaluation, bit for bit (the channel is row-wise)."""

    ROWS, SECONDS = 256, 0.25

    def __init__(self, record: Callable, channel: JointChannel):
        self.record, self.channel = record, channel
        self.rows: list[tuple[float, dict]] = []
        self.since = time.monotonic()

    def __call__(self, t: float, data: dict) -> None:
        self.rows.append((float(t), {k: np.array(v, dtype=float, copy=True)
                                     for k, v in data.items()}))
        if len(self.rows) >= self.ROWS or time.monotonic() - self.since >= self.SECONDS:
            self.flush()

    def flush(self) -> None:
        rows, self.rows = self.rows, []
        self.since = time.monotonic()
        if not rows:
            return
        T = np.array([t for t, _ in rows])
        J = self.channel.rows(np.stack([d["q"] for _, d in rows]),
                              np.stack([d["qd"] for _, d in rows]), T)
        for i, (t, d) in enumerate(rows):
            d["joints"] = J[i]
            self.record(t, d)
