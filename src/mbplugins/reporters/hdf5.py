"""HDF5 reporter: streams an analysis to an HDF5 file while it runs.

Layout: see ``docs/results.md`` (reader: :class:`mbcore.results.result.Result`).

Rows are copied into a preallocated NumPy block per channel and written to the
file one block at a time (one resize + one write per dataset), followed by a file
flush.  A partial block is also written when ``flush_seconds`` of wall time have
passed since the last flush (checked on every ``record``/``event`` call).  The
HDF5 library is touched only inside these write-and-flush steps, so a process
killed at any other moment (even SIGKILL) leaves a consistent file holding every
flushed row, with root attribute ``status == "running"``.

The file is written in HDF5 SWMR mode (``libver="latest"``; every dataset exists
before ``swmr_mode`` is switched on, so later writes only extend datasets and
overwrite existing attributes): another process reads it while it grows with
``h5py.File(path, "r", libver="latest", swmr=True)`` and ``Dataset.refresh()``
(:class:`mbcore.results.result.Result` does this).  Checkpoints for an exact resume
(:mod:`mbcore.analysis.checkpoint`) are rows of the pre-created ``/checkpoint`` datasets.
The dataset ``/status`` repeats the root attribute ``status`` and is written last by
``finish``: SWMR readers refresh datasets, not attributes, so a reader learns
from it that the run ended.

Memory is bounded: one block of rows, a small chunk cache per dataset
(:data:`CHUNK_CACHE_BYTES`) and the HDF5 library's own bounded metadata cache,
whatever the number of rows.
"""
from __future__ import annotations

import errno
import os
import platform
import time
from pathlib import Path
from typing import Any, Mapping

import h5py
import numpy as np
from h5py import h5a, h5s

from mbcore.errors import ResultWriteError
from mbcore.results.reporting import Reporter, RunInfo, layout_of
from mbcore.results.result import (LAYOUT_VERSION, SCHEMA, SCHEMA_VERSION, copy_group,
                           process_start, store_row, to_json, utc_now, validate_run_info)

__all__ = ["HDF5Reporter"]

#: target size of one chunk of a series dataset (bytes)
CHUNK_BYTES = 64 * 1024
#: target size of the in-memory block of rows written at once (default block_rows)
BLOCK_BYTES = 8 << 20
#: chunk cache of each dataset of the file being written (HDF5's default, 8 MiB per
#: dataset with HDF5 2, held ~80 MB for a model of ten channels): rows are appended
#: in whole blocks, so a few chunks (the partly filled last one) are enough
CHUNK_CACHE_BYTES = 4 * CHUNK_BYTES
#: fixed-length type of the ``/status`` dataset ("interrupted" is the longest status)
STATUS_DTYPE = "S16"
_COMPRESSIONS = (None, "gzip", "lzf")
_STATUSES = ("finished", "failed", "interrupted")
#: datasets of the /checkpoint group: name -> (dtype, 2-D)
CHECKPOINT_DATASETS = {"n_rows": ("i8", False), "n_events": ("i8", False),
                       "y": ("f8", True), "q": ("f8", True), "qd": ("f8", True),
                       "history": ("f8", True), "state": ("str", False), "t": ("f8", False)}

_clock = time.monotonic  # module level so tests can replace it

#: bytes kept free for what ``finish`` writes (status, reason, stats, the closing
#: metadata flush) when a block is written: a block that would leave less than this
#: on the disk (or below the file-size limit) is not written (docs/reliability.md)
HEADROOM = 256 * 1024
#: files whose HDF5 handle could not be closed after a write failure (the HDF5
#: library may crash at exit on such a handle: see
#: https://github.com/h5py/h5py/issues/914 and /1120); the CLI
#: ends the process without that library clean-up when this is not empty
UNCLOSED: list[str] = []
#: the HDF5 objects of those files, kept alive so that nothing releases them
#: before the process ends (HDF5Reporter._close_broken)
_BROKEN: list[tuple] = []


def hdf5_reason(exc: BaseException) -> str:
    """A short reason for an HDF5 write error: ``[Errno 27] File too large`` from
    the library's long message when it names the system error (worded as Python's
    own OSError words it: the library's wording differs between its write paths),
    else its first line."""
    import os
    import re
    m = re.search(r"errno = (\d+), error message = '([^']*)'", str(exc))
    if m:
        return f"[Errno {m.group(1)}] {os.strerror(int(m.group(1))) or m.group(2)}"
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def space_shortage(path: Path, nbytes: int) -> str:
    """Why ``nbytes`` more (plus :data:`HEADROOM`) cannot be written to ``path``
    (its directory's free space, the process's ``RLIMIT_FSIZE``), or ``""``."""
    need = int(nbytes) + HEADROOM
    try:
        st = os.statvfs(path.parent)
        free = st.f_bavail * st.f_frsize
    except (OSError, AttributeError):
        free = None
    if free is not None and free < need:
        return f"the disk is full ({free} bytes free, {need} needed)"
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, AttributeError, ValueError):
        return ""
    if soft == resource.RLIM_INFINITY:
        return ""
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    if size + need > soft:
        return (f"the file-size limit is reached (RLIMIT_FSIZE {soft} bytes, the file "
                f"has {size}, {need} more needed)")
    return ""


def _append(dsid: h5py.h5d.DatasetID, n0: int, rows: np.ndarray) -> None:
    """Extend dataset ``dsid`` to ``n0 + len(rows)`` rows and write ``rows`` (a
    C-contiguous float64 array) at row ``n0``: one extent change and one write,
    through the low-level API (the high-level slicing costs ~4x more per call)."""
    k = rows.shape[0]
    dsid.set_extent((n0 + k,) + rows.shape[1:])
    if rows.size:
        fs = dsid.get_space()
        fs.select_hyperslab((n0,) + (0,) * (rows.ndim - 1), rows.shape)
        dsid.write(h5s.create_simple(rows.shape), fs, rows)


def _plugin_providers() -> str:
    """JSON list of the installed plugin providers (plugin, distribution, version)."""
    try:
        from mbcore.plugins.manager import get_plugin_manager
        return to_json(sorted({str(r[2]) for r in get_plugin_manager().registry.rows()}))
    except Exception as e:  # pragma: no cover - provenance must not stop a run
        return to_json([f"unknown ({type(e).__name__})"])


def json_list(text: Any) -> list:
    """A JSON list attribute (``[]`` when absent or not a list)."""
    import json
    try:
        v = json.loads(text.decode() if isinstance(text, bytes) else str(text))
    except ValueError:
        return []
    return v if isinstance(v, list) else []


def _set_writer(attrs) -> None:
    """Root attributes ``writer`` (``host:pid``) and ``writer_start`` (the process's
    start time as the kernel reports it: with the pid it names the process even
    after the pid was reused; ``""`` where unknown)."""
    attrs["writer"] = f"{platform.node()}:{os.getpid()}"
    attrs["writer_start"] = process_start(os.getpid())


def _chunk_rows(width: int) -> int:
    return max(1, CHUNK_BYTES // (8 * max(width, 1)))


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (bool, int, float, str, np.bool_, np.integer, np.floating))


def _write_attr_dict(group: h5py.Group, d: Mapping[str, Any]) -> None:
    """One attribute per key (scalars as is, anything else as JSON text) plus the
    whole dict as JSON in attribute ``json`` (authoritative)."""
    for k, v in d.items():
        key = str(k)
        if key == "json":
            continue
        try:
            if _is_scalar(v):
                group.attrs[key] = v
            else:
                group.attrs[key] = to_json(v)
        except (TypeError, ValueError, OverflowError):
            group.attrs[key] = to_json(v)
    group.attrs["json"] = to_json(dict(d))


class HDF5Reporter(Reporter):
    """Write results to the HDF5 file ``path`` (overwritten) while the analysis runs.

    Parameters
    ----------
    path:
        The result file.  Its directory must exist.
    block_rows:
        Rows buffered in memory per channel before they are written (and flushed).
    flush_seconds:
        Also write and flush a partial block when this much wall time passed since
        the last flush (checked on each ``record``/``event`` call; 0 = every row).
    compression:
        ``None`` (default), ``"gzip"`` or ``"lzf"`` for the series datasets.
    append:
        Continue the existing file ``path`` (a resume, :mod:`mbcore.analysis.checkpoint`):
        its channels must match; rows are appended after its ``/t``.
    swmr:
        Write in SWMR mode (default) so other processes can read the file live.
    """

    name = "hdf5"
    interrupted_status = True       # finish("interrupted") after Ctrl-C / SIGTERM
    description = "streams results to a chunked, crash-safe HDF5 file (docs/results.md)"

    def __init__(self, path: str | os.PathLike, *, block_rows: int | None = None,
                 flush_seconds: float = 2.0, compression: str | None = None,
                 append: bool = False, swmr: bool = True):
        if block_rows is not None and (
                isinstance(block_rows, bool) or not isinstance(block_rows, (int, np.integer))
                or block_rows < 1):
            raise ValueError(f"HDF5Reporter: block_rows must be an integer >= 1, got {block_rows!r}")
        if not (isinstance(flush_seconds, (int, float)) and flush_seconds >= 0):
            raise ValueError(f"HDF5Reporter: flush_seconds must be >= 0, got {flush_seconds!r}")
        if compression not in _COMPRESSIONS:
            raise ValueError(f"HDF5Reporter: compression must be one of {_COMPRESSIONS}, "
                             f"got {compression!r}")
        self.path = Path(path)
        #: None: chosen at start() for ~8 MiB blocks (256 ... 65536 rows)
        self.block_rows = None if block_rows is None else int(block_rows)
        self.flush_seconds = float(flush_seconds)
        self.compression = compression
        self.append = bool(append)
        self.swmr = bool(swmr)
        self.n_checkpoints = 0      # checkpoints written by this reporter
        self.blocks_written = 0     # number of (partial) blocks written so far
        self._state = "new"         # new -> running -> finished (| broken: start failed)
        self._f: h5py.File | None = None
        self._n_rows = 0            # rows in the file
        self._n_buf = 0             # rows in the buffer
        self._events: list[tuple[float, str, str]] = []
        self._n_events = 0
        self._ck: dict[str, h5py.Dataset] = {}   # /checkpoint datasets (start)
        self._groups: dict[str, tuple[dict, dict]] = {}   # written by finish()
        self._t_last: float | None = None   # time of the last row recorded
        self._write_failed = ""     # why writing stopped (disk full, I/O error)
        self._hdf5_failed = False   # ... and the HDF5 library failed a write

    # ------------------------------------------------------------------ life cycle
    def start(self, info: RunInfo) -> None:
        if self._state != "new":
            raise RuntimeError(f"HDF5Reporter({self.path}): start() called twice")
        self._state = "broken"      # until start() succeeds; finish() is then a no-op
        validate_run_info(info)
        parent = self.path.parent
        if not parent.is_dir():
            raise FileNotFoundError(
                errno.ENOENT,
                f"cannot create result file: directory '{parent}' does not exist",
                str(self.path))
        if self.path.is_dir():
            raise IsADirectoryError(errno.EISDIR, "the path is a directory", str(self.path))
        # a new file is built under a temporary name and renamed into place once its
        # layout is flushed: a process killed while creating it leaves no
        # half-written file at `path`
        tmp = self.path if self.append else \
            self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            f = h5py.File(tmp, "r+" if self.append else "w", libver="latest",
                          rdcc_nbytes=CHUNK_CACHE_BYTES)
        except OSError as e:
            import re
            m = re.search(r"errno = (\d+), error message = '([^']*)'", str(e))
            code, why = (int(m.group(1)), m.group(2)) if m else (e.errno, str(e))
            raise OSError(code or errno.EIO, why, str(self.path)) from e
        try:
            short = space_shortage(tmp, 0)
            if short:
                raise OSError(errno.ENOSPC, short, str(self.path))
            if self.append:
                self._open_layout(f, info)
            else:
                self._create_layout(f, info)
            # handles of the checkpoint datasets, held for the whole run: a handle
            # released while the file cannot be written (disk full) makes the library
            # flush it from a destructor, where the error cannot be raised
            ck = f.get("checkpoint")
            self._ck = {} if ck is None else {name: ck[name] for name in ck}
            f.flush()
            if self.swmr:        # every dataset exists now: readers may follow
                f.swmr_mode = True
            if tmp != self.path:
                os.replace(tmp, self.path)
        except BaseException:
            try:
                f.close()
            except Exception:       # a write failure: the file is removed anyway
                UNCLOSED.append(str(tmp))
            if tmp != self.path:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
            raise
        self._f = f
        self._last_flush = _clock()
        self._state = "running"

    def _create_layout(self, f: h5py.File, info: RunInfo) -> None:
        sdt = h5py.string_dtype()
        a = f.attrs
        a["schema"] = SCHEMA
        a["layout_version"] = np.int64(LAYOUT_VERSION)
        a["schema_version"] = np.int64(SCHEMA_VERSION)
        _set_writer(a)
        a["status"] = "running"
        a["reason"] = ""
        a["analysis"] = str(info.analysis)
        a["model_name"] = str(info.model_name)
        a["created"] = utc_now()
        a["finished"] = ""
        a["n_rows"] = np.int64(0)
        a.create("channels", np.array([c.name for c in info.channels], dtype=object), dtype=sdt)
        a["metadata"] = to_json(dict(info.metadata))
        a["stats"] = "{}"

        m = f.create_dataset("model", data=str(info.model_text), dtype=sdt)
        m.attrs["format"] = str(info.model_format)
        m.attrs["name"] = str(info.model_name)

        _write_attr_dict(f.create_group("settings"), dict(info.settings))

        versions = {str(k): str(v) for k, v in info.versions.items()}
        for k, v in (("python", platform.python_version()), ("numpy", np.__version__),
                     ("h5py", h5py.version.version), ("hdf5", h5py.version.hdf5_version),
                     ("host", platform.node()), ("plugins", _plugin_providers())):
            versions.setdefault(k, v)
        g = f.create_group("versions")
        for k, v in versions.items():
            g.attrs[k] = v

        f.create_group("stats").attrs["json"] = "{}"
        f.create_dataset("status", data=np.array([b"running"], dtype=STATUS_DTYPE))

        # rows beyond the written ones are never exposed (readers trust len(t)), so
        # skip writing fill values into new chunks
        comp: dict[str, Any] = {"fill_time": "never"}
        if self.compression is not None:
            comp = {"compression": self.compression, "shuffle": True}
        self._t_ds = f.create_dataset("t", shape=(0,), maxshape=(None,), dtype="f8",
                                      chunks=(_chunk_rows(1),), **comp)
        self._t_ds.attrs["description"] = "output time"
        self._t_ds.attrs["unit"] = str((info.metadata.get("units") or {}).get("time", ""))
        if self.block_rows is None:        # ~8 MiB per block: few, large writes
            width = max(1, sum(c.width for c in info.channels))
            self.block_rows = int(min(65536, max(256, BLOCK_BYTES // (8 * width))))
        self._tbuf = np.empty(self.block_rows)
        self._n_rows_attr = np.zeros((), dtype=np.int64)

        series = f.create_group("series")
        labels = f.create_group("labels")
        self._slots = []      # (name, buffer, width) used by record()
        self._datasets = []   # (dataset, buffer, width) used by _write_buffer()
        # one block for all channels: a packed Row is copied with one assignment;
        # each channel's buffer is a column view of it
        self._layout = layout_of(info.channels)
        self._flat = np.empty((self.block_rows, sum(c.width for c in info.channels)))
        off = 0
        for c in info.channels:
            w = c.width
            ds = series.create_dataset(
                c.name, shape=(0, w), maxshape=(None, w if w else None), dtype="f8",
                chunks=(_chunk_rows(w), max(w, 1)), **comp)
            ds.attrs["description"] = str(c.description)
            ds.attrs["unit"] = str(c.unit)
            if len(set(c.column_units())) > 1:          # columns of different units
                ds.attrs.create("units", c.column_units(), dtype=sdt)
            labels.create_dataset(c.name, data=np.array(list(c.labels), dtype=object), dtype=sdt)
            buf = self._flat[:, off:off + w]
            off += w
            self._slots.append((c.name, buf, w))
            self._datasets.append((ds, buf, w))

        ev = f.create_group("events")
        self._ev_t = ev.create_dataset("t", shape=(0,), maxshape=(None,), dtype="f8", chunks=(256,))
        self._ev_kind = ev.create_dataset("kind", shape=(0,), maxshape=(None,), dtype=sdt,
                                          chunks=(256,))
        self._ev_msg = ev.create_dataset("message", shape=(0,), maxshape=(None,), dtype=sdt,
                                         chunks=(256,))
        ck = f.create_group("checkpoint")
        for name, (dt, two_d) in CHECKPOINT_DATASETS.items():
            ck.create_dataset(name, shape=(0, 0) if two_d else (0,),
                              maxshape=(None, None) if two_d else (None,),
                              dtype=sdt if dt == "str" else dt,
                              chunks=(4, 256) if two_d else (64,))

    def _open_layout(self, f: h5py.File, info: RunInfo) -> None:
        """Append mode: the datasets of an existing file of the same channels."""
        names = [str(x) for x in f.attrs.get("channels", [])]
        if names != [c.name for c in info.channels]:
            raise ValueError(f"{self.path}: channels {names} differ from the run's "
                             f"{[c.name for c in info.channels]}")
        self._t_ds = f["t"]
        self._n_rows = int(self._t_ds.shape[0])
        self._n_rows_attr = np.zeros((), dtype=np.int64)
        if self.block_rows is None:
            width = max(1, sum(c.width for c in info.channels))
            self.block_rows = int(min(65536, max(256, BLOCK_BYTES // (8 * width))))
        self._tbuf = np.empty(self.block_rows)
        self._slots, self._datasets = [], []
        self._layout = layout_of(info.channels)
        self._flat = np.empty((self.block_rows, sum(c.width for c in info.channels)))
        off = 0
        for c in info.channels:
            ds = f["series"][c.name]
            if ds.shape[1] != c.width or ds.shape[0] < self._n_rows:
                raise ValueError(f"{self.path}: series/{c.name} has shape {ds.shape}, "
                                 f"expected ({self._n_rows}, {c.width})")
            buf = self._flat[:, off:off + c.width]
            off += c.width
            self._slots.append((c.name, buf, c.width))
            self._datasets.append((ds, buf, c.width))
        ev = f["events"]
        self._ev_t, self._ev_kind, self._ev_msg = ev["t"], ev["kind"], ev["message"]
        self._n_events = int(self._ev_t.shape[0])
        a = f.attrs
        a["status"] = "running"
        a["reason"] = ""
        a["finished"] = ""
        _set_writer(a)
        a["n_rows"] = np.int64(self._n_rows)
        if "status" in f:
            f["status"][0] = b"running"
        else:                     # a file of an mbcore before the /status dataset
            f.create_dataset("status", data=np.array([b"running"], dtype=STATUS_DTYPE))

    # ------------------------------------------------------------------- recording
    def record(self, t: float, data: Mapping[str, np.ndarray]) -> None:
        if self._state != "running":
            raise self._state_error("record")
        i = self._n_buf
        self._t_last = t
        self._layout = store_row(data, i, self._flat, self._slots, self._layout, t)
        self._tbuf[i] = t
        i += 1
        self._n_buf = i
        if i == self.block_rows or _clock() - self._last_flush >= self.flush_seconds:
            self._write_buffer()

    def record_rows(self, t: np.ndarray, rows: np.ndarray, layout: tuple) -> None:
        """A block of rows packed as ``layout`` (Reporter rule 5): copied into the
        write buffer a block at a time, written as ``record`` would."""
        if self._state != "running":
            raise self._state_error("record")
        if not (layout is self._layout or layout == self._layout):
            return super().record_rows(t, rows, layout)      # channel by channel
        k, j = len(t), 0
        if k:
            self._t_last = t[-1]
        while j < k:
            i = self._n_buf
            m = min(k - j, self.block_rows - i)
            self._flat[i:i + m] = rows[j:j + m]
            self._tbuf[i:i + m] = t[j:j + m]
            self._n_buf = i + m
            j += m
            if self._n_buf == self.block_rows:
                self._write_buffer()
        if self._n_buf and _clock() - self._last_flush >= self.flush_seconds:
            self._write_buffer()

    def event(self, t: float, kind: str, message: str) -> None:
        if self._state != "running":
            raise self._state_error("event")
        self._events.append((float(t), str(kind), str(message)))
        if len(self._events) >= self.block_rows or \
                _clock() - self._last_flush >= self.flush_seconds:
            self._write_buffer()

    def group(self, name: str, data: Mapping[str, Any], attrs: Mapping[str, Any]) -> None:
        """Keep a group of non-series arrays (Reporter rule 6); ``finish`` writes it
        as ``/<name>`` (new objects cannot be created in SWMR mode)."""
        if self._state != "running":
            raise self._state_error("group")
        self._groups[name] = (copy_group(name, data), dict(attrs))

    def _write_groups(self, f: h5py.File) -> None:
        """The kept groups: one dataset per array (str lists as strings), scalar
        attributes as they are; root attribute ``groups`` lists them (JSON)."""
        sdt = h5py.string_dtype()
        for name, (data, attrs) in self._groups.items():
            if name in f:
                del f[name]
            g = f.create_group(name)
            for key, v in data.items():
                if isinstance(v, list):
                    g.create_dataset(key, data=np.array(v, dtype=object), dtype=sdt)
                else:
                    g.create_dataset(key, data=v)
            for key, v in attrs.items():
                g.attrs[key] = v if _is_scalar(v) else to_json(v)
        old = json_list(f.attrs.get("groups", "[]"))
        f.attrs["groups"] = to_json(sorted(set(old) | set(self._groups)))

    def flush(self) -> None:
        """Write the buffered rows and events now and flush the file."""
        if self._state != "running":
            raise self._state_error("flush")
        self._write_buffer()

    @property
    def n_events(self) -> int:
        """Events recorded so far (written or buffered)."""
        return self._n_events + len(self._events)

    @property
    def stores_history(self) -> bool:
        """The file has ``/checkpoint/history`` (not one written before it existed)."""
        return self._f is not None and "history" in self._ck

    def write_checkpoint(self, t: float, y: np.ndarray, q: np.ndarray, qd: np.ndarray,
                         n_rows: int, n_events: int, state: str,
                         history: np.ndarray | None = None) -> None:
        """Flush the rows, then append one checkpoint (``/checkpoint/*``, ``t`` last:
        ``len(/checkpoint/t)`` counts the complete ones) and flush again.
        ``history``: the flat multistep history (``/checkpoint/history``, NaN-padded;
        its layout is in ``state``)."""
        if self._state != "running":
            raise self._state_error("write_checkpoint")
        self._write_buffer()
        g = self._ck
        arrays = [("y", y), ("q", q), ("qd", qd)]
        if "history" in g:               # (files of an mbcore before it: none)
            arrays.append(("history", np.zeros(0) if history is None else history))
        elif history is not None and len(history):
            raise ValueError(f"{self.path}: the file has no /checkpoint/history dataset")
        arrays = [(name, np.ascontiguousarray(v, dtype=np.float64).reshape(1, -1))
                  for name, v in arrays]
        short = space_shortage(self.path, sum(8 * g[n].shape[1] + v.nbytes
                                              for n, v in arrays) + len(state) + 64)
        if short:
            self._write_failed = short
            raise self._write_error(short)
        try:
            self._append_checkpoint(g, t, arrays, n_rows, n_events, state)
        except (OSError, RuntimeError) as e:
            self._write_failed = hdf5_reason(e)
            self._hdf5_failed = True
            raise self._write_error(self._write_failed) from e
        self.n_checkpoints += 1

    def _append_checkpoint(self, g: dict[str, h5py.Dataset], t: float, arrays: list,
                           n_rows: int, n_events: int, state: str) -> None:
        k = int(g["t"].shape[0])
        for name, v in arrays:
            ds = g[name]
            w = max(ds.shape[1], v.shape[1])
            ds.resize((k + 1, w))
            row = np.full((1, w), np.nan)
            row[0, :v.shape[1]] = v
            ds[k:k + 1] = row
        for name, v in (("n_rows", n_rows), ("n_events", n_events)):
            g[name].resize((k + 1,))
            g[name][k] = int(v)
        g["state"].resize((k + 1,))
        g["state"][k] = state
        g["t"].resize((k + 1,))
        g["t"][k] = float(t)
        self._f.flush()

    def _write_buffer(self) -> None:
        """Append the buffered rows (series first, ``t`` last) and events, update
        ``n_rows`` and flush.  On error the buffer is kept, so a retry (or
        ``finish``) writes the same rows to the same place.  A block that the disk
        or the file-size limit cannot take (:func:`space_shortage`) is not written
        (the HDF5 library is not touched); that, and any write error, raises
        :class:`~mbcore.errors.ResultWriteError` naming the time and the file."""
        if self._write_failed:
            raise self._write_error(self._write_failed)
        short = space_shortage(self.path, self._block_bytes())
        if short:
            self._write_failed = short
            raise self._write_error(short)
        try:
            self._write_block()
        except (OSError, RuntimeError) as e:
            self._write_failed = hdf5_reason(e)
            self._hdf5_failed = True
            raise self._write_error(self._write_failed) from e

    def _block_bytes(self) -> int:
        """An upper bound of the bytes the next ``_write_block`` adds to the file:
        the new chunks of every series dataset and ``t`` (chunks are allocated whole)
        and the events."""
        n0, k = self._n_rows, self._n_buf
        total = sum(32 + len(e[1]) + len(e[2]) for e in self._events)
        if k:
            for w in [1] + [w for _, _, w in self._datasets]:
                rows = _chunk_rows(w)
                new = -(-(n0 + k) // rows) - (-(-n0 // rows))
                total += new * rows * max(w, 1) * 8
        return total

    def _write_error(self, why: str) -> ResultWriteError:
        t = self._t_last
        return ResultWriteError(
            f"cannot write the result file '{self.path}': {why}; it holds the "
            f"{self._n_rows} rows flushed before", None if t is None else float(t),
            str(self.path))

    def _write_block(self) -> None:
        f = self._f
        k = self._n_buf
        if k:
            n0 = self._n_rows
            for ds, buf, w in self._datasets:
                _append(ds.id, n0, np.ascontiguousarray(buf[:k]))
            # the series reach the disk before /t grows: HDF5 goes on flushing after
            # a failed write (disk full), so one flush could extend /t over series
            # rows that were never written; readers trust len(/t)
            f.flush()
            _append(self._t_ds.id, n0, self._tbuf[:k])
            n1 = n0 + k
            self._n_rows_attr[()] = n1
            aid = h5a.open(f.id, b"n_rows")
            try:
                aid.write(self._n_rows_attr)
            finally:
                aid.close()
            self._n_rows = n1
            self._n_buf = 0
            self.blocks_written += 1
        if self._events:
            ev = self._events
            m0 = self._n_events
            m1 = m0 + len(ev)
            self._ev_kind.resize((m1,))
            self._ev_kind[m0:m1] = np.array([e[1] for e in ev], dtype=object)
            self._ev_msg.resize((m1,))
            self._ev_msg[m0:m1] = np.array([e[2] for e in ev], dtype=object)
            self._ev_t.resize((m1,))
            self._ev_t[m0:m1] = np.array([e[0] for e in ev], dtype=np.float64)
            self._n_events = m1
            self._events = []
        f.flush()
        self._last_flush = _clock()

    # ---------------------------------------------------------------------- finish
    def finish(self, status: str, reason: str = "",
               stats: Mapping[str, Any] | None = None) -> None:
        if status not in _STATUSES:
            raise ValueError(f"HDF5Reporter.finish: status must be one of {_STATUSES}, "
                             f"got {status!r}")
        if self._state == "broken":      # start() failed: nothing to finish
            return
        if self._state != "running":
            raise self._state_error("finish")
        f = self._f
        errors: list[BaseException] = []

        def failed(msg: str, exc: BaseException) -> None:
            nonlocal status, reason
            errors.append(exc)
            status = "failed"
            reason = f"{reason}; {msg}" if reason else msg

        if self._write_failed:      # the run already stopped on it: reason says so
            status = "failed"
            reason = reason or f"writing the result file failed: {self._write_failed}"
        else:
            try:
                self._write_buffer()
            except ResultWriteError as e:  # keep what is on disk, report the failure
                failed(f"writing the last rows to the result file failed: {e.reason}", e)
        if self._hdf5_failed:
            # the HDF5 library failed a write: its handle cannot be flushed, so the
            # file keeps status 'running' and the rows flushed before (as if killed)
            self._state = "finished"
            self._f = None
            self._close_broken(f)
            raise errors[0] if errors else self._write_error(self._write_failed)
        try:
            try:
                if self.swmr:
                    # the /stats attributes are new: written outside SWMR mode (a clean
                    # close ends it; reopened without SWMR when possible)
                    f.flush()
                    f.close()
                    try:
                        f = h5py.File(self.path, "r+", libver="latest")
                    except OSError:   # a reader holds it: write in SWMR mode after all
                        f = h5py.File(self.path, "r+", libver="latest", locking=False)
                if self._groups:
                    need = sum(getattr(v, "nbytes", 64) for d, _ in self._groups.values()
                               for v in d.values())
                    short = space_shortage(self.path, need)
                    try:
                        if short:
                            raise OSError(errno.ENOSPC, short)
                        self._write_groups(f)
                    except Exception as e:  # keep the rows; say why the group is missing
                        failed(f"writing the result groups failed: {e}", e)
                a = f.attrs
                a["status"] = status
                a["reason"] = str(reason)
                a["finished"] = utc_now()
                st = dict(stats or {})
                a["stats"] = to_json(st)
                _write_attr_dict(f["stats"], st)
                f.flush()
                if "status" in f:       # last: an SWMR reader that sees it reopens
                    f["status"][0] = status.encode()
                    f.flush()
            except (OSError, RuntimeError) as e:
                self._hdf5_failed = True
                errors.insert(0, self._write_error(hdf5_reason(e)))
        finally:
            self._state = "finished"
            self._f = None
            if self._hdf5_failed:
                self._close_broken(f)
            else:
                f.close()
        if errors:
            raise errors[0]

    def _close_broken(self, f: h5py.File) -> None:
        """Let go of a handle after a failed HDF5 write without closing it.

        The library cannot flush such a handle: closing it, or releasing any object
        of the file (h5py closes every open object on ``close``; a dataset handle
        released by the garbage collector), makes it write again, fail again, and
        h5py prints that from a destructor ("Exception ignored ... Can't decrement
        id ref count") or, on some versions, crashes.  The handle and its datasets
        are therefore kept in :data:`_BROKEN` until the process ends and the path is
        listed in :data:`UNCLOSED` (the CLI then ends without the library's
        clean-up); the file on disk holds the rows flushed before the failure, as
        if the writer had been killed."""
        _BROKEN.append((f, self._datasets, self._slots, self._t_ds, self._ev_t,
                        self._ev_kind, self._ev_msg, self._ck))
        self._datasets, self._slots, self._ck = [], [], {}
        self._t_ds = self._ev_t = self._ev_kind = self._ev_msg = None
        UNCLOSED.append(str(self.path))

    def _state_error(self, what: str) -> RuntimeError:
        if self._state == "new":
            return RuntimeError(f"HDF5Reporter({self.path}): {what}() before start()")
        if self._state == "broken":
            return RuntimeError(f"HDF5Reporter({self.path}): {what}() after start() failed")
        return RuntimeError(f"HDF5Reporter({self.path}): {what}() after finish()")

    @property
    def n_rows(self) -> int:
        """Rows recorded so far (written or buffered)."""
        return self._n_rows + self._n_buf

    # ------------------------------------------------------------- context manager
    def __enter__(self) -> "HDF5Reporter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._state == "running":
            if exc_type is None:
                self.finish("finished")
            else:
                self.finish("failed", f"{exc_type.__name__}: {exc}")

    def __repr__(self) -> str:
        return f"<HDF5Reporter {self.path} {self._state}, {self.n_rows} rows>"
