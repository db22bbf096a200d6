"""Reading analysis results: :class:`Result` (an HDF5 result file) and
:class:`MemoryResult` (what :class:`mbplugins.reporters.memory.MemoryReporter`
returns) share one read API, :class:`ResultBase`.

The file layout written by :class:`mbplugins.reporters.hdf5.HDF5Reporter` is
documented in ``docs/results.md``; this module is its reference reader.

Lookup rules of ``res[key]`` (see :meth:`ResultBase.locate`):

1. ``"t"``                      -> the time vector ``res.t``
2. a channel name (``"q"``)     -> the whole series, shape (N, width)
3. ``"<channel>/<label>"`` or ``"<channel>:<label>"`` (``"qd/crank.phi"``)
                                -> that column of that channel, shape (N,)
4. a bare label (``"crank.phi"``) -> the column of the *primary* channel (``q`` if
   there is one, else the first channel) with that label; if the primary channel has
   no such label, the unique column of any channel with that label.  A label found
   in several channels (or twice in one channel) is ambiguous: ``KeyError`` naming
   where it was found.

Unknown keys raise :class:`ResultKeyError` (a ``KeyError``) listing close matches.
Arrays returned are cached and **read-only**; copy them (``np.array(res["q"])``)
to modify.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import difflib
import errno
import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from mbcore.errors import MbcoreError
from mbcore.results.reporting import Channel, Row, RunInfo

_log = logging.getLogger(__name__)

__all__ = [
    "SCHEMA", "LAYOUT_VERSION", "SCHEMA_VERSION", "Event", "ResultBase", "Result", "MemoryResult",
    "ResultGroup",
    "ResultFileError", "ResultKeyError", "open_result", "run_result", "writer_gone",
]

#: value of the root attribute ``schema`` of every mbcore result file
SCHEMA = "mbcore-result"
#: value of the root attribute ``layout_version`` written by this version
LAYOUT_VERSION = 1
#: value of the root attribute ``schema_version`` (the documented schema v1 of
#: docs/results.md: series, names, events, provenance, SWMR, checkpoints)
SCHEMA_VERSION = 1
#: channel names that are reserved (``res["t"]`` is the time vector)
RESERVED_CHANNEL_NAMES = frozenset({"t"})
#: separators of the explicit ``channel/label`` form (``"/"`` is canonical)
SEPARATORS = ("/", ":")


class ResultFileError(MbcoreError, ValueError):
    """A file cannot be read as an mbcore result (not HDF5, not a result, newer
    layout, locked by a writer).  The message names the path."""


class ResultKeyError(KeyError):
    """Unknown or ambiguous result key; ``str()`` is the plain message."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class Event(NamedTuple):
    """A notable event recorded during the run (warning, partition change...)."""

    t: float
    kind: str
    message: str


# ----------------------------------------------------------------------------- helpers
def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    return str(obj)


def to_json(obj: Any) -> str:
    """JSON text of ``obj`` as stored in result files (numpy arrays and scalars
    become lists/numbers, anything else unknown becomes ``str(obj)``; NaN and
    Infinity are written as Python's json module does)."""
    return json.dumps(obj, default=_json_default, ensure_ascii=False)


def json_normalize(obj: Any) -> Any:
    """``json.loads(to_json(obj))``: the value a reader gets back from a file."""
    return json.loads(to_json(obj))


def utc_now() -> str:
    """Current time, ISO 8601 in UTC with seconds (``2025-01-31T12:00:00+00:00``)."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


_STR_TYPE = frozenset((str,))


def validate_run_info(info: RunInfo) -> None:
    """Check what a reporter needs of ``info``: unique channel names that contain
    neither ``/`` nor ``:`` and are not ``t``; string labels."""
    if not isinstance(info, RunInfo):
        raise TypeError(f"start() expects a RunInfo, got {type(info).__name__}")
    seen: set[str] = set()
    for k, ch in enumerate(info.channels):
        where = f"RunInfo.channels[{k}]"
        if not isinstance(ch.name, str) or not ch.name:
            raise ValueError(f"{where}: channel name must be a non-empty string, got {ch.name!r}")
        if any(s in ch.name for s in SEPARATORS) or ch.name in (".", ".."):
            raise ValueError(f"{where}: channel name {ch.name!r} must not contain '/' or ':'")
        if ch.name in RESERVED_CHANNEL_NAMES:
            raise ValueError(f"{where}: channel name {ch.name!r} is reserved (time is recorded implicitly)")
        if ch.name in seen:
            raise ValueError(f"{where}: duplicate channel name {ch.name!r}")
        seen.add(ch.name)
        if set(map(type, ch.labels)) <= _STR_TYPE:
            continue                     # (the common case, without a Python loop)
        for j, lab in enumerate(ch.labels):
            if not isinstance(lab, str):
                raise ValueError(f"{where} ({ch.name!r}).labels[{j}]: label must be a string, got {lab!r}")


def store_row(data: Any, i: int, flat: np.ndarray, slots, layout: tuple, t: Any) -> tuple:
    """Copy one ``record(t, data)`` into row ``i`` of a reporter's block ``flat``
    whose channel columns are the views ``slots`` ``[(name, view, width), ...]``: a
    packed :class:`mbcore.results.reporting.Row` with the same ``layout`` in one assignment,
    any other mapping channel by channel (bad data raise :func:`record_error`).
    Returns the layout to compare with next time (the Row's own, so that the next
    check is by identity)."""
    if type(data) is Row and (data.layout is layout or data.layout == layout):
        flat[i] = data.flat
        return data.layout
    name = w = None
    try:
        for name, buf, w in slots:
            a = data[name]
            if len(a) != w:
                raise ValueError("wrong length")
            buf[i] = a
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise record_error(name, w, data, e, t) from None
    return layout


def record_error(name: str, width: int, data: Any, exc: BaseException, t: Any) -> Exception:
    """Build the error raised when ``record(t, data)`` gets a bad ``data[name]``."""
    if not isinstance(data, Mapping):
        return TypeError(f"record(t={t!r}): data must be a mapping channel name -> array, "
                         f"got {type(data).__name__}")
    if isinstance(exc, KeyError) or (isinstance(data, Mapping) and name not in data):
        have = sorted(map(str, data.keys())) if isinstance(data, Mapping) else "?"
        return KeyError(f"record(t={t!r}): data has no channel {name!r} (got {have})")
    try:
        shape = np.shape(data[name])
    except Exception:  # pragma: no cover - defensive
        shape = "?"
    return ValueError(f"record(t={t!r}): channel {name!r} expects a 1-D array of "
                      f"{width} values, got shape {shape} ({exc})")


#: names a result group may not take (the file's own top-level objects)
RESERVED_GROUPS = ("model", "settings", "versions", "stats", "t", "series", "labels",
                   "events", "checkpoint", "status")


class ResultGroup(dict):
    """A named group of non-series results (Reporter rule 6), e.g. ``modes``:
    dataset name -> array (float or complex) or list of str; attributes in
    :attr:`attrs`."""

    def __init__(self, name: str, data: Mapping[str, Any], attrs: Mapping[str, Any]):
        super().__init__(data)
        self.name = name
        self.attrs = dict(attrs)

    def __repr__(self) -> str:
        return f"<ResultGroup {self.name}: {', '.join(self)}>"


def copy_group(name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """Checked copies of a group's datasets: arrays as float64 or complex128
    (read-only), sequences of str as lists; the name must be usable in an HDF5
    file and not one of :data:`RESERVED_GROUPS`."""
    if not isinstance(name, str) or not name or "/" in name or name in RESERVED_GROUPS:
        raise ValueError(f"result group name {name!r}: must be a non-empty name without "
                         f"'/' and not one of {', '.join(RESERVED_GROUPS)}")
    out: dict[str, Any] = {}
    for key, v in data.items():
        if isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
            out[key] = [str(x) for x in v]
            continue
        a = np.array(v)
        if a.dtype.kind == "c":
            a = a.astype(np.complex128)
        elif a.dtype.kind in "fiub":
            a = a.astype(np.float64)
        else:
            raise ValueError(f"result group {name!r}: dataset {key!r} must be numbers or "
                             f"a list of strings, got {a.dtype}")
        out[key] = _readonly(a)
    return out


def _optional(module: str, extra: str):
    """Import an optional dependency or raise an ImportError naming the extra."""
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{module} is needed for this (an optional dependency): "
                          f"pip install 'mbcore[{extra}]'") from e


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _fmt_num(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.6g}"
    return str(x)


def _short_list(items: Sequence[str], n: int = 4) -> str:
    items = list(items)
    s = ", ".join(items[:n])
    if len(items) > n:
        s += f", ... (+{len(items) - n})"
    return s


# ------------------------------------------------------------------------- the writer
def process_start(pid: int) -> str:
    """The start time of process ``pid`` as the kernel reports it (Linux: field 22 of
    ``/proc/<pid>/stat``, clock ticks since boot), ``""`` where it cannot be read.
    With the pid it names a process: a pid reused by a later process has another."""
    st = _proc_stat(pid)
    return st[19] if st is not None and len(st) > 19 else ""


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or
    None (no such process, or no /proc)."""
    try:
        text = Path(f"/proc/{int(pid)}/stat").read_text()
    except (OSError, ValueError):
        return None
    return text.rpartition(")")[2].split()


def writer_gone(writer: str, writer_start: str = "") -> str:
    """Why the process that a result file names as its writer (root attributes
    ``writer`` = ``host:pid`` and ``writer_start``) no longer runs, or ``""`` when it
    runs, runs on another host, or that cannot be told.  A pid that exists but has
    exited (a zombie) or belongs to a process started later (another start time)
    counts as gone."""
    import platform
    host, _, pid_text = str(writer).rpartition(":")
    if not host or host != platform.node() or not pid_text.isdigit():
        return ""
    pid = int(pid_text)
    st = _proc_stat(pid)
    if st is not None:                       # Linux: /proc tells state and start time
        if st[0] in ("Z", "X"):
            return f"its writer (pid {pid} on {host}) has exited"
        if writer_start and len(st) > 19 and st[19] != str(writer_start):
            return (f"its writer (pid {pid} on {host}) has exited: that pid now belongs "
                    f"to another process")
        return ""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return f"its writer (pid {pid} on {host}) no longer exists"
    except (PermissionError, OSError):
        return ""                            # alive (another user's), or unknown
    return ""


# -------------------------------------------------------------------------- read API
class ResultBase:
    """The read API shared by :class:`Result` (HDF5 file) and :class:`MemoryResult`.

    Subclasses fill the private attributes in their constructor and implement
    :meth:`_read_series`.
    """

    path: Path | None = None

    # filled by subclasses
    _status: str
    _reason: str
    _t: np.ndarray
    _channels: list[Channel]

    def __init__(self) -> None:
        self._series_cache: dict[str, np.ndarray] = {}
        self._label_index: dict[str, list[tuple[str, int]]] | None = None
        self._chan_by_name = {c.name: c for c in self._channels}

    # --- to implement ------------------------------------------------------------
    def _read_series(self, name: str) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # --- run description -----------------------------------------------------------
    @property
    def status(self) -> str:
        """``"finished"``, ``"failed"``, ``"interrupted"`` (Ctrl-C / SIGTERM) or
        ``"running"`` (writer still running, or killed)."""
        return self._status

    @property
    def reason(self) -> str:
        """Why the run failed (empty string when it finished)."""
        return self._reason

    @property
    def analysis(self) -> str:
        return self._analysis

    @property
    def model_name(self) -> str:
        return self._model_name

    @property
    def model_format(self) -> str:
        return self._model_format

    @property
    def model_text(self) -> str:
        return self._model_text

    @property
    def settings(self) -> dict[str, Any]:
        return self._settings

    @property
    def versions(self) -> dict[str, str]:
        return self._versions

    @property
    def metadata(self) -> dict[str, Any]:
        return self._metadata

    @property
    def stats(self) -> dict[str, Any]:
        """Run statistics given to ``finish`` (empty while running / after a kill)."""
        return self._stats

    @property
    def events(self) -> list[Event]:
        return list(self._events)

    @property
    def groups(self) -> list[str]:
        """Names of the result groups (non-series results, e.g. ``modes``)."""
        return list(self._group_names())

    def group(self, name: str) -> ResultGroup:
        """A result group (Reporter rule 6; docs/results.md): its datasets by name,
        attributes in ``.attrs``."""
        if name not in self._group_names():
            raise ResultKeyError(f"no result group {name!r} (groups: "
                                 f"{', '.join(self._group_names()) or 'none'})")
        return self._read_group(name)

    def _group_names(self) -> list[str]:
        return list(getattr(self, "_groups", {}))

    def _read_group(self, name: str) -> ResultGroup:
        return self._groups[name]

    @property
    def created(self) -> str:
        """ISO 8601 UTC time the run started."""
        return self._created

    @property
    def finished(self) -> str:
        """ISO 8601 UTC time ``finish`` was called ("" if it never was)."""
        return self._finished

    # --- data ----------------------------------------------------------------------
    @property
    def t(self) -> np.ndarray:
        """Output times, shape (N,)."""
        return self._t

    def __len__(self) -> int:
        return int(self._t.shape[0])

    @property
    def n_rows(self) -> int:
        return len(self)

    @property
    def channels(self) -> list[str]:
        """Channel names in the order the analysis declared them."""
        return [c.name for c in self._channels]

    def channel(self, name: str) -> Channel:
        """The :class:`~mbcore.results.reporting.Channel` (labels, description, unit)."""
        try:
            c = self._chan_by_name[name]
        except (KeyError, TypeError):
            raise self._unknown(name, what="channel", candidates=self.channels) from None
        return Channel(c.name, list(c.labels), c.description, c.unit,
                       None if c.units is None else list(c.units))

    def labels(self, name: str) -> list[str]:
        """Column labels of channel ``name``."""
        return self.channel(name).labels

    def width(self, name: str) -> int:
        return self.channel(name).width

    def unit(self, key: str) -> str:
        """The unit of a channel (the one its columns share; ``""``: none shared or
        pure numbers) or of one column (any key of :meth:`locate`: ``"q/crank.phi"``
        -> ``"rad"``; ``"t"``: the model's time unit), in the model's unit system.
        A file written before units were recorded gives ``""``."""
        ch, col = self.locate(key)
        if ch == "t" and ch not in self._chan_by_name:
            return str((self.metadata.get("units") or {}).get("time", ""))
        c = self._chan_by_name[ch]
        return c.unit if col is None else c.column_units()[col]

    def units(self, name: str) -> list[str]:
        """The unit of each column of channel ``name`` (docs/results.md, "Units")."""
        return self.channel(name).column_units()

    def headers(self, channels: str | Sequence[str] | None = None) -> list[str]:
        """The CSV header of :meth:`to_csv`: ``t [s]``, then :meth:`columns` each
        with its unit in brackets where it has one (``q/crank.phi [rad]``)."""
        out = [_with_unit("t", self.unit("t"))]
        for ch in self.select_channels(channels):
            units = self._chan_by_name[ch].column_units()
            out += [_with_unit(name, units[k]) for k, name in enumerate(self.columns([ch]))]
        return out

    def series(self, name: str) -> np.ndarray:
        """Channel ``name`` as a read-only array of shape (N, width); a column key
        (``"q/crank.phi"``, ``"energy/kinetic"``, ``"reactions/J1.i.fx"``, a bare
        label, ``"t"``) gives that column, shape (N,), as ``res[key]`` does."""
        a = self._series_cache.get(name)
        if a is None:
            if name not in self._chan_by_name:
                if isinstance(name, str) and (name == "t" or any(s in name for s in SEPARATORS)
                                              or name in self._index()):
                    return self[name]
                raise self._unknown(name, what="channel", candidates=self.channels)
            a = self._read_series(name)
            a = _readonly(a)
            self._series_cache[name] = a
        return a

    # --- key lookup ----------------------------------------------------------------
    @property
    def primary_channel(self) -> str | None:
        """Channel searched first for bare labels: ``q`` if present, else the first."""
        if "q" in self._chan_by_name:
            return "q"
        return self._channels[0].name if self._channels else None

    def _index(self) -> dict[str, list[tuple[str, int]]]:
        if self._label_index is None:
            idx: dict[str, list[tuple[str, int]]] = {}
            for c in self._channels:
                for k, lab in enumerate(c.labels):
                    idx.setdefault(lab, []).append((c.name, k))
            self._label_index = idx
        return self._label_index

    def locate(self, key: str) -> tuple[str, int | None]:
        """Resolve ``key`` to ``(channel, column)``; column is None for a whole
        channel, and ``("t", None)`` means the time vector.  Raises
        :class:`ResultKeyError` for unknown or ambiguous keys."""
        if not isinstance(key, str):
            raise TypeError(f"result keys are strings (channel or label), got {type(key).__name__}")
        if key in self._chan_by_name:
            return key, None
        if key == "t":
            return "t", None
        explicit_miss = None
        for sep in SEPARATORS:
            if sep in key:
                ch, lab = key.split(sep, 1)
                if ch in self._chan_by_name:
                    cols = [k for k, l in enumerate(self._chan_by_name[ch].labels) if l == lab]
                    if len(cols) == 1:
                        return ch, cols[0]
                    if len(cols) > 1:
                        raise ResultKeyError(
                            f"{key!r} is ambiguous: label {lab!r} names columns {cols} of channel {ch!r}")
                    explicit_miss = (ch, sep)
                break  # channel names contain no separator: the first one decides
        idx = self._index()
        hits = idx.get(key, [])
        primary = self.primary_channel
        in_primary = [h for h in hits if h[0] == primary]
        if len(in_primary) == 1:
            return in_primary[0]
        if len(hits) == 1:
            return hits[0]
        if hits:
            chans = sorted({h[0] for h in hits}, key=self.channels.index)
            if len(chans) == 1:
                raise ResultKeyError(f"{key!r} is ambiguous: it labels columns "
                                     f"{[h[1] for h in hits]} of channel {chans[0]!r}")
            raise ResultKeyError(
                f"{key!r} is ambiguous: it labels a column of channels {chans}; "
                f"write e.g. {chans[0] + '/' + key!r}")
        if explicit_miss is not None:
            ch, sep = explicit_miss
            raise self._unknown(key, what=f"label in channel {ch!r}",
                                candidates=[ch + sep + l for l in self._chan_by_name[ch].labels])
        cands = list(self.channels) + ["t"] + list(idx)
        cands += [f"{c.name}/{l}" for c in self._channels for l in c.labels]
        raise self._unknown(key, what="channel or label", candidates=cands)

    def _unknown(self, key: Any, *, what: str, candidates: Sequence[str]) -> ResultKeyError:
        close = difflib.get_close_matches(str(key), list(dict.fromkeys(candidates)), n=5, cutoff=0.6)
        msg = f"{key!r}: no such {what}"
        if close:
            msg += "; did you mean " + ", ".join(repr(c) for c in close) + "?"
        else:
            msg += f"; channels are {self.channels}"
        return ResultKeyError(msg)

    def __getitem__(self, key: str) -> np.ndarray:
        ch, col = self.locate(key)
        if ch == "t" and col is None and ch not in self._chan_by_name:
            return self.t
        s = self.series(ch)
        return s if col is None else s[:, col]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self.locate(key)
        except KeyError:
            return False
        return True

    __iter__ = None  # not a mapping: iterate over res.channels instead

    # --- named columns, time slicing, export ----------------------------------------------
    def columns(self, channels: str | Sequence[str] | None = None) -> list[str]:
        """Full names ``"<channel>/<label>"`` of every column of ``channels`` (all
        channels by default; a comma-separated string is accepted), in channel
        then column order.  Each name is a valid ``res[name]`` / ``res.series(name)``
        key.  A column without a label (or whose label repeats within its channel)
        is named ``"<channel>/<index>"`` (``res[...]`` does not resolve that form;
        use ``res.series(channel)[:, index]``)."""
        out = []
        for ch in self.select_channels(channels):
            labels = self._chan_by_name[ch].labels
            w = self.width(ch)
            for k in range(w):
                lab = labels[k] if k < len(labels) else ""
                if not lab or labels.count(lab) > 1:
                    lab = str(k)
                out.append(f"{ch}/{lab}")
        return out

    def select_channels(self, channels: str | Sequence[str] | None) -> list[str]:
        """The channels named by ``channels`` (a list or a comma-separated string;
        None: all), checked against the file."""
        if channels is None:
            return self.channels
        if isinstance(channels, str):
            channels = [c.strip() for c in channels.split(",") if c.strip()]
        chans = []
        for c in channels:
            if c not in self._chan_by_name:
                raise self._unknown(c, what="channel", candidates=self.channels)
            if c not in chans:
                chans.append(c)
        return chans

    def _row_slice(self, t0: float | None, t1: float | None) -> slice:
        t = self._t
        i0 = 0 if t0 is None else int(np.searchsorted(t, t0, side="left"))
        i1 = len(t) if t1 is None else int(np.searchsorted(t, t1, side="right"))
        return slice(i0, max(i0, i1))

    def between(self, t0: float | None = None, t1: float | None = None, *,
                channels: str | Sequence[str] | None = None) -> "MemoryResult":
        """The rows with ``t0 <= t <= t1`` (either bound may be None: open) as a
        :class:`MemoryResult` with the same description (status, settings, events
        within the interval...); ``channels`` keeps only those channels.  Times are
        assumed non-decreasing, as the analyses write them."""
        if t0 is not None and t1 is not None and t1 < t0:
            raise ValueError(f"between(t0={t0}, t1={t1}): t1 is before t0")
        sl = self._row_slice(t0, t1)
        chans = self.select_channels(channels)
        info = RunInfo(analysis=self.analysis,
                       channels=[self.channel(c) for c in chans],
                       model_name=self.model_name, model_format=self.model_format,
                       model_text=self.model_text, settings=self.settings,
                       versions=self.versions, metadata=self.metadata)
        lo = -np.inf if t0 is None else t0
        hi = np.inf if t1 is None else t1
        return MemoryResult(info=info, t=np.array(self._t[sl]),
                            series={c: np.array(self.series(c)[sl]) for c in chans},
                            status=self.status, reason=self.reason, stats=self.stats,
                            events=[e for e in self._events if lo <= e.t <= hi],
                            created=self.created, finished=self.finished)

    def at(self, t: float, *, method: str = "linear",
           channels: str | Sequence[str] | None = None) -> dict[str, Any]:
        """Values at time ``t`` as a dict ``{"t": time, "<channel>/<label>": value}``
        (names of :meth:`columns`).  ``method="linear"`` interpolates linearly between
        the two neighbouring rows (``t`` must lie within ``[t[0], t[-1]]``, else
        ``ValueError``; the returned ``"t"`` is ``t``); ``method="nearest"`` takes the
        nearest row (the earlier one on a tie) and returns its own time.  Integer-valued
        channels (``integrator/order``...) are interpolated like the others."""
        if method not in ("linear", "nearest"):
            raise ValueError(f"method must be 'linear' or 'nearest', got {method!r}")
        tt = self._t
        n = len(tt)
        if n == 0:
            raise ValueError("at(): the result has no rows")
        t = float(t)
        chans = self.select_channels(channels)
        if method == "nearest":
            i = int(np.searchsorted(tt, t))
            if i >= n or (i > 0 and abs(t - tt[i - 1]) <= abs(tt[i] - t)):
                i = max(i - 1, 0)
            row = {"t": float(tt[i])}
            vals = [self.series(c)[i] for c in chans]
        else:
            if not (tt[0] <= t <= tt[-1]):
                raise ValueError(f"at({t:g}): outside the recorded times "
                                 f"[{tt[0]:g}, {tt[-1]:g}] (method='nearest' clamps)")
            i = int(np.searchsorted(tt, t, side="right")) - 1
            i = min(max(i, 0), n - 1)
            if i == n - 1 or tt[i] == t or tt[i + 1] == tt[i]:
                vals = [self.series(c)[i] for c in chans]
            else:
                w = (t - tt[i]) / (tt[i + 1] - tt[i])
                vals = [(1 - w) * self.series(c)[i] + w * self.series(c)[i + 1] for c in chans]
            row = {"t": t}
        names = self.columns(chans)
        flat = np.concatenate([np.asarray(v, dtype=np.float64) for v in vals]) if vals else []
        row.update({k: float(v) for k, v in zip(names, flat)})
        return row

    def _matrix(self, channels, t0, t1) -> tuple[np.ndarray, list[str], np.ndarray]:
        chans = self.select_channels(channels)
        sl = self._row_slice(t0, t1)
        t = np.array(self._t[sl])
        blocks = [self.series(c)[sl] for c in chans]
        data = np.hstack(blocks) if blocks else np.empty((len(t), 0))
        return t, self.columns(chans), data

    def to_pandas(self, channels: str | Sequence[str] | None = None, *,
                  t0: float | None = None, t1: float | None = None,
                  multiindex: bool = False):
        """A ``pandas.DataFrame`` indexed by ``t`` (index name ``"t"``) with one
        column per channel column, named ``"<channel>/<label>"`` (:meth:`columns`),
        or with ``multiindex=True`` a two-level column index ``(channel, label)``.
        Needs pandas: ``pip install mbcore[pandas]``."""
        pd = _optional("pandas", "pandas")
        t, names, data = self._matrix(channels, t0, t1)
        if multiindex:
            cols = pd.MultiIndex.from_tuples([tuple(n.split("/", 1)) for n in names],
                                             names=["channel", "label"])
        else:
            cols = pd.Index(names)
        return pd.DataFrame(data, index=pd.Index(t, name="t"), columns=cols, copy=True)

    def to_xarray(self, channels: str | Sequence[str] | None = None, *,
                  t0: float | None = None, t1: float | None = None):
        """An ``xarray.Dataset``: one variable per channel, dims ``("t", "<channel>_label")``,
        coordinate ``t`` (attribute ``unit``) and the channel's labels with each
        column's unit (coordinate ``<channel>_unit`` along the labels); attributes
        ``description``/``unit`` (the one all columns share, else "") per variable
        and ``analysis``, ``model_name``, ``status`` on the dataset.
        Needs xarray: ``pip install mbcore[xarray]``."""
        xr = _optional("xarray", "xarray")
        chans = self.select_channels(channels)
        sl = self._row_slice(t0, t1)
        t = np.array(self._t[sl])
        data_vars = {}
        for c in chans:
            ch = self._chan_by_name[c]
            dim = f"{c}_label"
            labels = self.columns([c])
            data_vars[c] = xr.DataArray(
                np.array(self.series(c)[sl]), dims=("t", dim),
                coords={"t": t, dim: [lab.split("/", 1)[1] for lab in labels],
                        f"{c}_unit": (dim, list(ch.column_units()))},
                attrs={"description": ch.description, "unit": self.unit(c)})
        tcoord = xr.DataArray(t, dims=("t",), attrs={"unit": self.unit("t")})
        return xr.Dataset(data_vars, coords={"t": tcoord},
                          attrs={"analysis": self.analysis, "model_name": self.model_name,
                                 "status": self.status})

    def to_csv(self, file, channels: str | Sequence[str] | None = None, *,
               t0: float | None = None, t1: float | None = None,
               progress: bool = False, chunk_rows: int = 10000) -> int:
        """Write rows (``t0 <= t <= t1``) as CSV to ``file`` (a path or a text
        stream): header ``t [s],<channel>/<label> [unit],...`` (:meth:`headers`:
        :meth:`columns` with their units), numbers with
        ``repr`` precision (round-trip exact).  Returns the number of rows written.
        ``progress`` shows a tqdm bar (on stderr) for large results."""
        import csv
        t, names, data = self._matrix(channels, t0, t1)
        own = not hasattr(file, "write")
        fh = open(file, "w", newline="", encoding="utf-8") if own else file
        try:
            w = csv.writer(fh, lineterminator="\n")
            w.writerow(self.headers(channels))
            n = len(t)
            bar = None
            if progress and n > chunk_rows:
                from .progress import progress_bar
                bar = progress_bar(total=n, unit="row", delay=0.5, leave=False)
            for i0 in range(0, n, chunk_rows):
                i1 = min(n, i0 + chunk_rows)
                block = np.column_stack([t[i0:i1], data[i0:i1]])
                w.writerows([[repr(float(x)) for x in row] for row in block])
                if bar is not None:
                    bar.update(i1 - i0)
            if bar is not None:
                bar.close()
        finally:
            if own:
                fh.close()
        _log.debug("wrote %d rows x %d columns as CSV", len(t), len(names) + 1)
        return len(t)

    # --- derived channels ------------------------------------------------------------
    def orientation(self, body: str, convention: str = "bryant_123",
                    unit: str = "rad") -> np.ndarray:
        """Orientation of a spatial body as angles, (n_rows, 3), derived from its Euler
        parameters in channel ``q`` (Nikravesh (1988), App. A-B): ``bryant_123``
        (phi1, phi2, phi3; Nikravesh (1988), App. A.2), ``euler_313`` (psi, theta, sigma; App. A.1),
        any of the twelve angle sequences by name (``"3-2-1"``, ``"zyx"``, ``"131"``:
        :mod:`mbcore.elements.angle_sequences`)
        or ``axis_angle`` (the rotation angle in [0, pi] and the unit axis: 4 columns).
        ``unit`` is ``rad`` or ``deg``.  Angles are unwrapped along the rows."""
        from ..elements import angle_sequences as AS
        from ..elements import rotations as R
        if unit not in ("rad", "deg"):
            raise ValueError(f"unit must be 'rad' or 'deg', got {unit!r}")
        cols = [f"{body}.p{k}" for k in range(4)]
        labels = self.labels("q") if "q" in self.channels else []
        missing = [c for c in cols if c not in labels]
        if missing:
            raise self._unknown(f"q/{missing[0]}", what="coordinate (a spatial body's "
                                "Euler parameter)", candidates=labels)
        p = np.stack([self[f"q/{c}"] for c in cols], axis=-1)
        if convention == "bryant_123":
            ang = np.unwrap(R.p_to_bryant123(p), axis=0)
        elif convention == "euler_313":
            ang = np.unwrap(R.p_to_euler313(p), axis=0)
        elif convention == "axis_angle":
            axis, phi = R.p_to_axis_angle(p)
            ang = np.column_stack([phi, axis])
            if unit == "deg":
                ang[:, 0] = np.degrees(ang[:, 0])
            return ang
        else:
            try:
                AS.parse_sequence(convention)
            except ValueError:
                raise ValueError(f"unknown convention {convention!r} (bryant_123, "
                                 f"euler_313, axis_angle, or an angle sequence such as "
                                 f"'3-2-1': {', '.join(AS.SEQUENCES)})") from None
            ang = np.unwrap(AS.p_to_angles(p, convention), axis=0)
        return np.degrees(ang) if unit == "deg" else ang

    # --- life cycle ----------------------------------------------------------------
    def close(self) -> None:
        """Release the file (no-op for in-memory results)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- summary -------------------------------------------------------------------
    def summary(self) -> str:
        """Multi-line human summary (used by ``mbcore info``)."""
        lines = []
        lines.append(f"file:      {self.path if self.path is not None else '(in memory)'}")
        model = self.model_name or "(unnamed)"
        if self.model_format:
            model += f" ({self.model_format})"
        lines.append(f"model:     {model}")
        lines.append(f"analysis:  {self.analysis or '?'}")
        st = self.status
        if self.reason:
            st += f": {self.reason}"
        lines.append(f"status:    {st}")
        when = self.created or "?"
        if self.finished:
            when += f" .. {self.finished}"
        lines.append(f"time:      {when}")
        n = len(self)
        if n:
            t0, t1 = float(self._t[0]), float(self._t[-1])
            lines.append(f"rows:      {n}  (t = {t0:.6g} .. {t1:.6g}, span {t1 - t0:.6g})")
        else:
            lines.append("rows:      0")
        if self._channels:
            lines.append(f"channels:  {len(self._channels)}")
            wname = max(len(c.name) for c in self._channels)
            for c in self._channels:
                extra = f" [{c.unit}]" if c.unit else ""
                desc = f"  {c.description}" if c.description else ""
                lines.append(f"  {c.name:<{wname}}  width {c.width:<4}{extra}{desc}".rstrip())
                if c.labels:
                    units = c.column_units() if len(set(c.column_units())) > 1 else []
                    shown = [_with_unit(lab, units[k] if units else "")
                             for k, lab in enumerate(c.labels)]
                    lines.append(f"  {'':<{wname}}  {_short_list(shown)}")
        else:
            lines.append("channels:  (none)")
        if self._events:
            kinds: dict[str, int] = {}
            for e in self._events:
                kinds[e.kind] = kinds.get(e.kind, 0) + 1
            lines.append(f"events:    {len(self._events)} ("
                         + ", ".join(f"{v} {k}" for k, v in kinds.items()) + ")")
        if self._group_names():
            lines.append("groups:    " + ", ".join(self._group_names()))
        if self.stats:
            lines.append("stats:     " + _short_list(
                [f"{k}={_fmt_num(v)}" for k, v in self.stats.items()], n=8))
        if self.versions:
            lines.append("versions:  " + ", ".join(f"{k} {v}" for k, v in self.versions.items()))
        return "\n".join(lines)

    def __repr__(self) -> str:
        where = str(self.path) if self.path is not None else "memory"
        return (f"<{type(self).__name__} {where}: {self.analysis or '?'} {self.status}, "
                f"{len(self)} rows, channels {self.channels}>")


# ------------------------------------------------------------------------ in memory
class MemoryResult(ResultBase):
    """A result held in memory (returned by ``MemoryReporter.result()``).

    ``series`` maps channel name to an (N, width) array; arrays are kept (not
    copied) and made read-only.
    """

    def __init__(self, *, info: RunInfo, t: np.ndarray, series: Mapping[str, np.ndarray],
                 status: str = "finished", reason: str = "",
                 stats: Mapping[str, Any] | None = None,
                 events: Sequence[tuple[float, str, str]] = (),
                 created: str = "", finished: str = "",
                 groups: Mapping[str, tuple[Mapping, Mapping]] | None = None):
        self._groups = {name: ResultGroup(name, d, a) for name, (d, a) in (groups or {}).items()}
        self._channels = [Channel(c.name, list(c.labels), c.description, c.unit,
                                  None if c.units is None else list(c.units))
                          for c in info.channels]
        self._t = _readonly(np.asarray(t, dtype=np.float64))
        n = self._t.shape[0]
        self._data = {}
        for c in self._channels:
            a = np.asarray(series[c.name], dtype=np.float64)
            if a.shape != (n, c.width):
                raise ValueError(f"series {c.name!r} has shape {a.shape}, expected {(n, c.width)}")
            self._data[c.name] = a
        self._status = status
        self._reason = reason
        self._analysis = info.analysis
        self._model_name = info.model_name
        self._model_format = info.model_format
        self._model_text = info.model_text
        self._settings = json_normalize(dict(info.settings))
        self._versions = {str(k): str(v) for k, v in info.versions.items()}
        self._metadata = json_normalize(dict(info.metadata))
        self._stats = json_normalize(dict(stats or {}))
        self._events = [Event(float(e[0]), str(e[1]), str(e[2])) for e in events]
        self._created = created
        self._finished = finished
        super().__init__()

    def _read_series(self, name: str) -> np.ndarray:
        return self._data[name]


# ----------------------------------------------------------------------------- HDF5
def _attr_str(attrs, name: str, default: str = "") -> str:
    v = attrs.get(name, default)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        v = v[()]
        return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return str(v)


def _attr_json(attrs, name: str, default: Any) -> Any:
    if name not in attrs:
        return default
    try:
        return json.loads(_attr_str(attrs, name))
    except ValueError:
        return default


def _with_unit(name: str, unit: str) -> str:
    return f"{name} [{unit}]" if unit else name


def _str_list(values) -> list[str]:
    return [v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values]


class Result(ResultBase):
    """An mbcore HDF5 result file, opened read-only.

    ``Result(path)`` reads the description, labels, time vector and events at
    once and each series lazily on first access (then cached).  The file stays open
    until :meth:`close` (or the end of a ``with`` block).

    ``keep_open=False`` releases the file once the header is read and opens it
    briefly for each later read (a series on its first access, a group,
    :meth:`refresh`): the result of :func:`mbcore.run` with an output file is such a
    result, so the file may be marked, resumed or rewritten while it is alive (a
    read then refuses a file that another run has replaced).  ``first_row`` and
    ``first_event`` show only the rows and events from those on (the part a resume
    appended).

    ``live=True`` opens a file that a running writer still holds (HDF5 file
    locking disabled) and shows the rows flushed so far.  This is best-effort: the
    file is consistent between the writer's flushes, and the reader sees a snapshot
    taken at open time (:meth:`refresh` to see newer rows).
    """

    def __init__(self, path: str | os.PathLike, *, live: bool = False,
                 keep_open: bool = True, first_row: int = 0, first_event: int = 0):
        import h5py  # local: mbcore.results.result must import without h5py for memory results

        self.path = Path(path)
        if not self.path.exists():
            raise FileNotFoundError(errno.ENOENT, "no such result file", str(self.path))
        if self.path.is_dir():
            raise ResultFileError(f"{self.path}: is a directory, not a result file")
        self.live = live
        self._keep_open = bool(keep_open)
        self._first_row = max(0, int(first_row))
        self._first_event = max(0, int(first_event))
        self._closed = False
        self._f = None
        self._open_and_load(h5py)
        super().__init__()
        if not self._keep_open:
            self._release()

    def _open_and_load(self, h5py) -> None:
        """Open the file (:meth:`_open`) and read its header (:meth:`_load`); a file
        that fails to load is closed again."""
        f = self._open(h5py)
        self._f = f
        try:
            self._load(f)
        except BaseException:
            f.close()
            self._f = None
            raise

    def _open(self, h5py):
        """Open read-only.  A file that says it is written in SWMR mode (root attribute
        ``swmr`` true, or a writer holding it in SWMR mode) is opened with
        ``swmr=True``; ``live`` disables HDF5 file locking otherwise."""
        kw = {"locking": False} if self.live else {}
        self.swmr = False
        try:
            f = h5py.File(self.path, "r", **kw)
        except OSError as e:
            msg = str(e).lower()
            try:  # a writer in SWMR mode holds the file: a SWMR reader may open it
                f = h5py.File(self.path, "r", swmr=True)
                self.swmr = True
                return f
            except OSError:
                pass
            if "lock" in msg or "already open" in msg:
                raise ResultFileError(
                    f"{self.path}: the file is open for writing by another process (a run in "
                    f"progress?); Result(path, live=True) reads the rows flushed so far") from e
            raise ResultFileError(f"{self.path}: not an HDF5 file ({e})") from e
        try:
            says_swmr = bool(f.attrs.get("swmr", False))
        except Exception:  # pragma: no cover - defensive
            says_swmr = False
        if says_swmr and _attr_str(f.attrs, "status", "running") == "running":
            try:
                g = h5py.File(self.path, "r", swmr=True)
            except OSError:
                return f  # not actually in SWMR mode now: keep the plain handle
            f.close()
            self.swmr = True
            return g
        return f

    def _load(self, f) -> None:
        a = f.attrs
        schema = _attr_str(a, "schema", "")
        if schema != SCHEMA or "t" not in f or "series" not in f:
            raise ResultFileError(f"{self.path}: not an mbcore result file "
                                  f"(root attribute schema={schema or None!r}, expected {SCHEMA!r})")
        version = int(a.get("layout_version", 0))
        if version > LAYOUT_VERSION:
            raise ResultFileError(
                f"{self.path}: result layout_version {version} was written by a newer mbcore "
                f"(this one reads up to {LAYOUT_VERSION})")
        self.layout_version = version
        self._status = _attr_str(a, "status", "running")
        self._reason = _attr_str(a, "reason", "")
        self._analysis = _attr_str(a, "analysis", "")
        self._created = _attr_str(a, "created", "")
        self._finished = _attr_str(a, "finished", "")
        self._writer = _attr_str(a, "writer", "")
        self._writer_start = _attr_str(a, "writer_start", "")
        self._metadata = _attr_json(a, "metadata", {})
        self._stats = _attr_json(a, "stats", {})
        self._group_list = [g for g in _attr_json(a, "groups", []) if g in f]
        names = _str_list(a.get("channels", []))
        series = f["series"]
        labels = f["labels"] if "labels" in f else None
        chans = []
        lengths = []
        for name in names:
            ds = series[name]
            lab = _str_list(labels[name][()]) if labels is not None and name in labels else []
            units = _str_list(ds.attrs["units"]) if "units" in ds.attrs else None
            chans.append(Channel(name, lab, _attr_str(ds.attrs, "description"),
                                 _attr_str(ds.attrs, "unit"),
                                 units if units and len(units) == len(lab) else None))
            lengths.append(ds.shape[0])
        self._channels = chans
        t = f["t"]
        # a reader trusts len(t); the writer writes t last, so series are never shorter
        n = min([t.shape[0], *lengths])
        k = min(self._first_row, n)
        self._t = _readonly(np.asarray(t[k:n], dtype=np.float64))
        # model
        if "model" in f:
            m = f["model"]
            v = m[()]
            self._model_text = v.decode("utf-8") if isinstance(v, bytes) else str(v)
            self._model_format = _attr_str(m.attrs, "format", "")
            self._model_name = _attr_str(m.attrs, "name", "")
        else:  # pragma: no cover - always written
            self._model_text, self._model_format, self._model_name = "", "", ""
        self._settings = _attr_json(f["settings"].attrs, "json", {}) if "settings" in f else {}
        self._versions = ({k: _attr_str(f["versions"].attrs, k) for k in f["versions"].attrs}
                          if "versions" in f else {})
        events: list[Event] = []
        if "events" in f:
            ev = f["events"]
            m = min(ev["t"].shape[0], ev["kind"].shape[0], ev["message"].shape[0])
            k = min(self._first_event, m)
            if m > k:
                et = ev["t"][k:m]
                ek = _str_list(ev["kind"][k:m])
                em = _str_list(ev["message"][k:m])
                events = [Event(float(x), kk, s) for x, kk, s in zip(et, ek, em)]
        self._events = events

    @property
    def writer(self) -> str:
        """``host:pid`` of the process that wrote the file (root attribute ``writer``)."""
        return self._writer

    def writer_gone(self) -> str:
        """For a file that says ``running``: why its writer no longer runs (killed),
        or ``""`` (it runs, runs on another host, or the file is not running)."""
        if self._status != "running":
            return ""
        return writer_gone(self._writer, self._writer_start)

    # --- reading the file ----------------------------------------------------------
    def _release(self) -> None:
        """Close the file handle (reads reopen it unless :meth:`close` was called)."""
        f, self._f = self._f, None
        if f is not None:
            f.close()

    @contextlib.contextmanager
    def _reading(self):
        """The open file: this result's handle, or (``keep_open=False``) the file
        opened for this read, checked to be the file the header was read from."""
        if self._closed:
            raise ValueError(f"{self.path}: result is closed")
        f = self._f
        if f is not None and f.id.valid:
            yield f
            return
        import h5py
        f = self._open(h5py)
        try:
            n = f["t"].shape[0] if "t" in f else -1
            if (_attr_str(f.attrs, "created", "") != self._created
                    or n < self._first_row + len(self._t)):
                raise ResultFileError(f"{self.path}: the file changed since this result "
                                      f"was read (another run wrote it); open it again")
            yield f
        finally:
            f.close()

    def _read_series(self, name: str) -> np.ndarray:
        with self._reading() as f:
            ds = f["series"][name]
            k, n = self._first_row, self._first_row + len(self)
            w = self._chan_by_name[name].width
            if w == 0:
                return np.empty((n - k, 0))
            return np.asarray(ds[k:n], dtype=np.float64)

    def _group_names(self) -> list[str]:
        return self._group_list

    def _read_group(self, name: str) -> ResultGroup:
        with self._reading() as f:
            g = f[name]
            data: dict[str, Any] = {}
            for key, ds in g.items():
                if ds.dtype.kind in "OSU":
                    data[key] = _str_list(ds[()])
                else:
                    data[key] = _readonly(np.asarray(ds[()]))
            attrs = {k: (v.decode() if isinstance(v, bytes) else
                         v.item() if isinstance(v, np.generic) else v)
                     for k, v in g.attrs.items()}
        return ResultGroup(name, data, attrs)

    def refresh(self, *, wait: float = 5.0) -> int:
        """A file being written: read the rows, events, status and stats flushed since
        it was opened (series are re-read on next access); returns the number of rows.

        An SWMR reader refreshes its datasets in place, among them ``/status``, which
        the writer sets last when the run ends (``finished``, ``failed``,
        ``interrupted``): the file is then reopened for the final attributes (reason,
        stats), waiting up to ``wait`` seconds for the writer to close it.  A file
        opened otherwise (``live=True`` on a writer without SWMR, ``keep_open=False``)
        is reopened.  A killed writer's file stays ``running``
        (:meth:`writer_gone` tells)."""
        import h5py
        if self._closed:
            raise ValueError(f"{self.path}: result is closed")
        f = self._f
        if f is not None and f.id.valid and f.swmr_mode:
            try:
                f["t"].refresh()
                for grp in ("series", "events"):
                    if grp in f:
                        for ds in f[grp].values():
                            ds.refresh()
                ended = _status_dataset(f, h5py)
                self._load(f)
            except OSError:
                # the strings of new events may lie past the end of the file this
                # handle knows ("address of object past end of allocation"): reopen
                self._reopen(h5py, wait, "")
            else:
                if ended not in ("", "running") and self._status == "running":
                    self._reopen(h5py, wait, ended)   # the writer ended: final attributes
        else:
            self._reopen(h5py, wait, "")
        self._series_cache.clear()
        self._label_index = None
        self._chan_by_name = {c.name: c for c in self._channels}
        return len(self._t)

    def _reopen(self, h5py, wait: float, ended: str) -> None:
        """Close the handle, open the file again (:meth:`_open_retrying`) and read its
        header.  If it cannot be opened and the writer has ``ended``, the status is
        taken from the ``/status`` dataset (reads then reopen the file)."""
        self._release()
        try:
            g = self._open_retrying(h5py, wait)
        except ResultFileError:
            if not ended:
                raise
            self._status = ended
            return
        self._f = g
        try:
            self._load(g)
        finally:
            if not self._keep_open:
                self._release()

    def _open_retrying(self, h5py, wait: float):
        """:meth:`_open`, retried for up to ``wait`` seconds while a writer holds the
        file (it is closing it)."""
        import time
        until = time.monotonic() + max(0.0, float(wait))
        while True:
            try:
                return self._open(h5py)
            except ResultFileError:
                if time.monotonic() >= until:
                    raise
                time.sleep(0.02)

    def load_all(self) -> "Result":
        """Read every series now (e.g. before closing the file); returns self."""
        with self._reading() as f:
            held, self._f = self._f, f      # one open for all series
            try:
                for name in self.channels:
                    self.series(name)
            finally:
                self._f = held
        return self

    def close(self) -> None:
        """Release the file; reading a series not read before then raises ValueError."""
        self._closed = True
        f = getattr(self, "_f", None)
        if f is not None:
            try:
                f.close()
            finally:
                self._f = None

    def __del__(self):  # pragma: no cover - gc timing
        try:
            self.close()
        except Exception:
            pass


def _status_dataset(f, h5py) -> str:
    """The ``/status`` dataset of an SWMR-open file, refreshed (``""`` for a file
    written before it existed)."""
    ds = f.get("status")
    if not isinstance(ds, h5py.Dataset) or ds.shape != (1,):
        return ""
    ds.refresh()
    v = ds[0]
    return v.decode("ascii", "replace") if isinstance(v, bytes) else str(v)


def run_result(path: str | os.PathLike, info: RunInfo, status: str, reason: str,
               stats: Mapping[str, Any] | None, *, first_row: int = 0,
               first_event: int = 0) -> ResultBase:
    """What :func:`mbcore.run` returns for a run with an output file: the file, read
    lazily (a :class:`Result` with ``keep_open=False``; no copy of the rows is kept in
    memory).  A file that still says ``running`` (its writer failed inside an HDF5
    write and could not mark it) is shown with the run's ``status``, ``reason`` and
    ``stats``; a file that cannot be read at all gives a :class:`MemoryResult` without
    rows that says why."""
    try:
        res = Result(path, keep_open=False, first_row=first_row, first_event=first_event)
    except (OSError, ResultFileError) as exc:
        why = f"the result file '{path}' cannot be read: {exc}"
        return MemoryResult(info=info, t=np.zeros(0),
                            series={c.name: np.zeros((0, c.width)) for c in info.channels},
                            status="failed", reason=f"{reason}; {why}" if reason else why,
                            stats=stats)
    if res.status == "running":
        res._status, res._reason = status, str(reason)
        res._stats = json_normalize(dict(stats or {}))
    return res


def open_result(path: str | os.PathLike, *, live: bool = False) -> Result:
    """Same as ``Result(path)``."""
    return Result(path, live=live)
