"""Checkpoints in the result file and exact resume of dynamic runs.

A :class:`Checkpointer` (set up by :func:`mbcore.analysis.runner.run` for an analysis with
``checkpoints = True``: the dynamic one) receives every output state of the run
(``offer``) and appends one checkpoint to the HDF5 file's ``/checkpoint`` datasets
every ``seconds`` of wall time and/or ``every`` of simulated time, and at the end
of the run (also after Ctrl-C / SIGTERM, which mark the file ``interrupted``).  A
checkpoint holds the output time ``t``, the integrated state ``y`` (formulation
state + work of the non-conservative forces), the full ``q``, ``qd``, the number of
rows and events written up to it, and a JSON ``state`` (integrator counts, CP
partition, used constraint rows...) with ``step``: the integration loop's state at
the start of the step that produced the output at ``t`` (the step's start time and
state, the derivative there, the controller's step proposal, the fixed-step grid,
the multistep history with its Newton Jacobian, the Python driver's integrator
state: :func:`pack_state`, its arrays in ``/checkpoint/history``).

:func:`resume` (``mbcore run --resume FILE [--t-end T]``) continues the run of a
file from its last checkpoint: rows and events after it (a killed run) are dropped,
the formulation is re-initialised with the stored partition (and its own stored
state), the rows after the start of the checkpoint's step are cut as well, and the
loop redoes that step from the stored state, recording its rows again; every later
step is the uninterrupted run's, also when one step spans several outputs and when
a finished run is continued to a later ``t_end`` (its last step, shortened to the
old end, is redone in full): the resumed file is bit-identical to an uninterrupted
run.  A checkpoint without
``step`` (an older file, or an integrator on the Python driver that declares no
``state_fields``) restarts the method at the output: agreement to the tolerance.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import MbcoreError

__all__ = ["Checkpoint", "CheckpointError", "Checkpointer", "Snapshot", "read_checkpoint",
           "prepare_resume", "follow", "DEFAULT_SECONDS"]

#: default wall time between checkpoints (``$MBCORE_CHECKPOINT_SECONDS`` overrides)
DEFAULT_SECONDS = 10.0
#: the first interval of the default schedule (it doubles up to the interval)
FIRST_SECONDS = 1.0


class CheckpointError(MbcoreError, ValueError):
    """A result file cannot be resumed (no checkpoint, another model or mbcore
    version, an analysis without checkpoints, nothing left to do).  Names the file."""


def default_seconds() -> float:
    """``$MBCORE_CHECKPOINT_SECONDS`` or :data:`DEFAULT_SECONDS`."""
    v = os.environ.get("MBCORE_CHECKPOINT_SECONDS")
    return float(v) if v else DEFAULT_SECONDS


@dataclass
class Snapshot:
    """A run's state at a recorded row, as the run hands it to :meth:`Checkpointer.offer`
    (copies: the run goes on): ``t``, the integrated state ``y``, the consistent
    ``q``/``qd`` of the row (or None), ``step`` (the loop's state at the start of the
    step that produced the row, for an exact resume; or None) and ``state``, a
    callable giving the JSON-able rest (counts, step size, partition, …) only when a
    checkpoint is written."""

    t: float
    y: np.ndarray
    q: np.ndarray | None
    qd: np.ndarray | None
    state: Callable[[], dict]
    step: Any = None


class Checkpointer:
    """Writes checkpoints of a running dynamic analysis to an :class:`HDF5Reporter`.

    ``offer`` (after every recorded row) keeps the state of that row; a checkpoint
    is written when ``seconds`` of wall time or ``every`` of simulated time have
    passed since the last one (``None``: never by that criterion), and by
    :meth:`write` (end of run, interrupt).  With the default ``seconds`` (``None``:
    ``$MBCORE_CHECKPOINT_SECONDS`` or 10 s) the first interval grows from
    :data:`FIRST_SECONDS` by doubling (checkpoints after about 1, 2, 4, 8, 16 s of
    wall time, then every 10 s), so that a run killed in its first seconds resumes
    from near where it stopped rather than from its start."""

    def __init__(self, reporter: Any, seconds: float | None = None,
                 every: float | None = None):
        self.reporter = reporter
        self.seconds = default_seconds() if seconds is None else float(seconds)
        self._ramp = seconds is None
        self._start_wall = time.monotonic()
        self.every = every
        self._pending: tuple | None = None
        self._written: tuple | None = None
        self._last_wall = -np.inf          # the first row is always checkpointed
        self._last_t = -np.inf
        self.count = 0            # checkpoints written
        self.wall = 0.0           # wall time spent writing them (s)

    def offer(self, snapshot: Snapshot) -> None:
        """The state of the row just recorded (:class:`Snapshot`, made by the run)."""
        rep = self.reporter
        self._pending = (snapshot, rep.n_rows, rep.n_events)
        if self.due(snapshot.t):
            self.write()

    def due(self, t: float) -> bool:
        """Whether a row at ``t`` offered now would be written: a run that hands
        rows over in blocks ends its block at such a row, so that the checkpoint
        holds that row's state."""
        now = time.monotonic()
        gap = self.seconds
        if self._ramp:      # the wall time run so far, at least FIRST_SECONDS
            gap = min(gap, max(FIRST_SECONDS, self._last_wall - self._start_wall))
        return (now - self._last_wall >= gap
                or (self.every is not None
                    and t - self._last_t >= self.every * (1.0 - 1e-9)))

    def write(self) -> bool:
        """Write the last offered state (once); False if there is none new."""
        p = self._pending
        if p is None or p is self._written:
            return False
        w0 = time.monotonic()
        snap, n_rows, n_events = p
        t = snap.t
        state = snap.state()
        arrays = None
        if snap.step is not None and getattr(self.reporter, "stores_history", True):
            state["step"], arrays = pack_state(snap.step)   # (else: resume to tolerance)
        self.reporter.write_checkpoint(t, snap.y, snap.q, snap.qd, n_rows, n_events,
                                       json.dumps(state), history=arrays)
        self._written = p
        self._last_t = t
        self._last_wall = time.monotonic()
        self.count += 1
        self.wall += self._last_wall - w0
        return True


def pack_state(obj: Any) -> tuple[Any, np.ndarray]:
    """A nested state (dicts, lists, tuples, arrays, numbers, booleans, strings,
    None) -> (its JSON part, one flat float64 array of its arrays).  An array is
    ``{"@array": [offset, shape, dtype]}`` in the JSON part (integer and boolean
    arrays are exact as float64 up to 2**53; a complex array takes two floats per
    entry, real and imaginary parts), a tuple ``{"@tuple": [...]}``."""
    parts: list[np.ndarray] = []
    size = 0

    def enc(v: Any) -> Any:
        nonlocal size
        if isinstance(v, np.ndarray):
            a = np.asarray(v)
            if np.iscomplexobj(a):              # real and imaginary parts, interleaved
                flat_a = np.ascontiguousarray(a, dtype=np.complex128).ravel().view(np.float64)
            else:
                flat_a = a.astype(np.float64).ravel()
            parts.append(flat_a)
            out = {"@array": [size, list(a.shape), a.dtype.str]}
            size += flat_a.size
            return out
        if isinstance(v, dict):
            return {str(k): enc(x) for k, x in v.items()}
        if isinstance(v, tuple):
            return {"@tuple": [enc(x) for x in v]}
        if isinstance(v, list):
            return [enc(x) for x in v]
        if isinstance(v, np.generic):
            return v.item()
        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        raise TypeError(f"checkpoint state: cannot store a {type(v).__name__}")
    meta = enc(obj)
    return meta, (np.concatenate(parts) if parts else np.zeros(0))


def unpack_state(meta: Any, flat: np.ndarray | None, path: Any = "") -> Any:
    """Inverse of :func:`pack_state`; CheckpointError (naming ``path``) if the arrays
    are missing or short."""
    def dec(v: Any) -> Any:
        if isinstance(v, dict):
            if set(v) == {"@array"}:
                off, shape, dtype = v["@array"]
                cplx = np.dtype(dtype).kind == "c"
                n = int(np.prod(shape)) * (2 if cplx else 1)
                if flat is None or flat.size < off + n:
                    raise CheckpointError(f"{path}: the checkpoint's integrator step "
                                          f"state is incomplete (/checkpoint/history)")
                part = np.array(flat[off:off + n], dtype=np.float64)
                if cplx:
                    return part.view(np.complex128).astype(dtype).reshape(shape)
                return part.astype(dtype).reshape(shape)
            if set(v) == {"@tuple"}:
                return tuple(dec(x) for x in v["@tuple"])
            return {k: dec(x) for k, x in v.items()}
        if isinstance(v, list):
            return [dec(x) for x in v]
        return v
    return dec(meta)


def unpack_history(meta: dict, flat: np.ndarray | None, path: Any = "") -> dict:
    """The multistep history of an older checkpoint (``state["history"]``: scalars
    and ``arrays``, ``[name, shape]`` of each array in ``flat`` in order);
    CheckpointError (naming ``path``) if the arrays are missing or short."""
    h = {k: v for k, v in meta.items() if k != "arrays"}
    off = 0
    for key, shape in meta.get("arrays", []):
        n = int(np.prod(shape))
        if flat is None or flat.size < off + n:
            raise CheckpointError(f"{path}: the checkpoint's integrator history is "
                                  f"incomplete ('{key}')")
        h[key] = np.array(flat[off:off + n], dtype=float).reshape(shape)
        off += n
    return h


@dataclass
class Checkpoint:
    """The last complete checkpoint of a result file and what a resume needs."""

    path: Path
    index: int                   # row of /checkpoint/*
    t: float
    y: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    n_rows: int
    n_events: int
    state: dict
    status: str = ""
    analysis: str = ""
    model_text: str = ""
    model_format: str = "yaml"
    settings: dict = field(default_factory=dict)
    versions: dict = field(default_factory=dict)
    writer: str = ""             # host:pid of the process that wrote the file
    history: dict | None = None  # multistep history of an older checkpoint
    step: dict | None = None     # the loop's state at the step's start (pack_state)

    def as_dict(self) -> dict:
        """What the dynamic analysis restores (``DynamicAnalysis.resume_from``)."""
        return {"t": self.t, "y": self.y, "q": self.q, "qd": self.qd, "state": self.state,
                "history": self.history, "step": self.step}


def _open_read(path: Path):
    """h5py read handle: plain, else as an SWMR reader (a running or killed SWMR
    writer's file)."""
    import h5py
    try:
        return h5py.File(path, "r")
    except OSError:
        return h5py.File(path, "r", libver="latest", swmr=True)


def _width(v: np.ndarray) -> np.ndarray:
    """A stored vector without the NaN padding of a wider earlier row."""
    n = len(v)
    while n and np.isnan(v[n - 1]):
        n -= 1
    return np.array(v[:n], dtype=float)


def read_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """The last complete checkpoint of result file ``path``; :class:`CheckpointError`
    if it has none (or is no result file)."""
    p = Path(path)
    if not p.exists():
        raise CheckpointError(f"{p}: no such result file")
    try:
        f = _open_read(p)
    except OSError as e:
        raise CheckpointError(f"{p}: cannot open the result file ({e})") from e
    with f:
        a = f.attrs
        def s(v):
            return v.decode() if isinstance(v, bytes) else str(v)
        analysis = s(a.get("analysis", ""))
        if s(a.get("schema", "")) != "mbcore-result":
            raise CheckpointError(f"{p}: not an mbcore result file")
        g = f.get("checkpoint")
        k = 0 if g is None else int(g["t"].shape[0])
        if k == 0:
            what = (f"the {analysis} analysis writes no checkpoints" if analysis != "dynamic"
                    else "it has no checkpoint (killed before the first one, or written "
                         "by an mbcore without checkpoints)")
            raise CheckpointError(f"{p}: cannot resume: {what}")
        i = k - 1
        m = f["model"]
        text = m[()]
        settings = json.loads(f["settings"].attrs["json"])
        versions = {kk: s(vv) for kk, vv in f["versions"].attrs.items()}
        ck = Checkpoint(
            path=p, index=i, t=float(g["t"][i]), y=_width(g["y"][i]),
            q=_width(g["q"][i]), qd=_width(g["qd"][i]), n_rows=int(g["n_rows"][i]),
            n_events=int(g["n_events"][i]),
            state=json.loads(s(g["state"][i])), status=s(a.get("status", "")),
            analysis=analysis, model_text=text.decode() if isinstance(text, bytes) else str(text),
            model_format=s(m.attrs.get("format", "yaml")), settings=settings,
            versions=versions, writer=s(a.get("writer", "")))
        flat = np.array(g["history"][i], dtype=float) if "history" in g else None
        if ck.state.get("history") is not None:
            ck.history = unpack_history(ck.state["history"], flat, p)
        if ck.state.get("step") is not None:
            ck.step = unpack_state(ck.state["step"], flat, p)
    return ck


def _check_not_written(path: Path, ck: "Checkpoint") -> None:
    """CheckpointError if the file says ``running`` and its writer (root attribute
    ``writer`` = ``host:pid``) is a live process on this host: resuming it would
    make two writers (HDF5 drops its file lock in SWMR mode)."""
    import platform
    if ck.status != "running" or not ck.writer:
        return
    host, _, pid = ck.writer.rpartition(":")
    if host != platform.node() or not pid.isdigit() or int(pid) == os.getpid():
        return
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return                                   # killed: resume
    except PermissionError:
        pass                                     # alive (another user's process)
    raise CheckpointError(f"{path}: the file is being written by a running process "
                          f"(pid {pid}); stop it (Ctrl-C / SIGTERM) before resuming")


def _rewrite(path: Path, ck: Checkpoint, settings: dict) -> None:
    """Copy ``path`` into a fresh file cut at checkpoint ``ck`` (rows, events and
    checkpoints after it dropped; settings updated) and replace it: a killed SWMR
    file can only be opened by SWMR readers, so it is never reopened for writing.
    With the step state (``ck.step``) the cut is at that step's start: its rows and
    the events after its start (but the ``resume`` events) are dropped too, the
    resumed run records them again."""
    import h5py

    from ..results.result import to_json
    tmp = path.with_name(path.name + ".resume-tmp")
    with _open_read(path) as src, h5py.File(tmp, "w", libver="latest") as dst:
        for k in src.attrs:
            dst.attrs.create(k, src.attrs[k], dtype=src.attrs.get_id(k).dtype)
        for name in src:
            src.copy(src[name], dst, name=name)
        n, m, kk = ck.n_rows, ck.n_events, ck.index + 1
        ev = dst["events"]
        keep = np.arange(m)
        if ck.step is not None:               # cut at the start of the step redone
            t_cut = float(ck.step["t"])
            n = int(np.searchsorted(dst["t"][:n], t_cut, side="right"))
            kinds = [k.decode() if isinstance(k, bytes) else str(k)
                     for k in ev["kind"][:m]]
            keep = np.flatnonzero((ev["t"][:m] <= t_cut) | (np.array(kinds) == "resume"))
        dst["t"].resize((n,))
        for ds in dst["series"].values():
            ds.resize((n,) + ds.shape[1:])
        for ds in ev.values():
            kept = ds[:m][keep]
            ds.resize((keep.size,))
            if keep.size:
                ds[:] = kept
        for ds in dst["checkpoint"].values():
            ds.resize((kk,) + ds.shape[1:])
        dst.attrs["n_rows"] = np.int64(n)
        sg = dst["settings"]
        for key, v in settings.items():
            if key in sg.attrs and not isinstance(v, (dict, list)) and v is not None:
                sg.attrs[key] = v
        sg.attrs["json"] = to_json(settings)
    os.replace(tmp, path)


def prepare_resume(path: str | os.PathLike, t_end: float | None = None, *,
                   model: Any = None) -> tuple[Any, dict, Checkpoint]:
    """Make result file ``path`` ready to continue its dynamic run from its last
    checkpoint up to ``t_end`` (default: the file's ``t_end``): check the file, its
    version and ``model`` (if given, it must be the file's model), cut the file at
    the checkpoint (:func:`_rewrite`, with the new ``t_end`` in ``/settings``).
    Returns ``(model, settings, checkpoint)`` for :func:`mbcore.analysis.runner.resume`."""
    from .._version import __version__
    from ..model.model import Model
    p = Path(path)
    ck = read_checkpoint(p)
    _check_not_written(p, ck)
    if ck.analysis != "dynamic":
        raise CheckpointError(f"{p}: cannot resume a {ck.analysis} analysis (only dynamic "
                              f"runs write checkpoints)")
    written_by = ck.versions.get("mbcore", "?")
    if written_by != __version__:
        raise CheckpointError(f"{p}: written by mbcore {written_by}, this is {__version__}: "
                              f"an exact resume needs the same version")
    m = Model.from_text(ck.model_text, ck.model_format)
    if model is not None:
        text, _ = model.to_text()
        if text != ck.model_text:
            raise CheckpointError(f"{p}: the model '{getattr(model, 'name', '?')}' differs "
                                  f"from the model stored in the file "
                                  f"('{m.name}'); resume uses the stored one")
    settings = dict(ck.settings)
    t1 = float(settings.get("t_end", 0.0)) if t_end is None else float(t_end)
    if not t1 > ck.t:
        raise CheckpointError(f"{p}: the last checkpoint is at t = {ck.t!r} (status "
                              f"'{ck.status}'): nothing to do up to t_end = {t1!r}; give a "
                              f"later t_end")
    settings["t_end"] = t1
    _rewrite(p, ck, settings)
    return m, {k: v for k, v in settings.items() if v is not None}, ck


def __getattr__(name: str) -> Any:
    # deprecated location (the function runs a model: it lives with run())
    if name == "resume":
        import importlib
        import warnings
        warnings.warn("mbcore.analysis.checkpoint.resume moved: use mbcore.resume (or "
                      "mbcore.analysis.runner.resume)", DeprecationWarning, stacklevel=2)
        return importlib.import_module("mbcore.analysis.runner").resume
    raise AttributeError(f"module 'mbcore.analysis.checkpoint' has no attribute {name!r}")


def follow(path: str | os.PathLike, *, interval: float = 0.5, idle: float = 60.0,
           out: Any = print) -> int:
    """``mbcore info --follow``: print the row count and last time of a result file
    as it grows (an SWMR reader), until its status is no longer ``running``, its
    writer (root attributes ``writer`` = ``host:pid``, ``writer_start``) is a
    process of this host that no longer runs (killed:
    :func:`mbcore.results.result.writer_gone`), or, for a writer on another host, it has
    not grown for ``idle`` seconds.  Returns the number of rows."""
    from ..results.result import writer_gone
    p = Path(path)
    last, since = -1, time.monotonic()
    failures = 0
    checked = False
    while True:
        try:
            f = _open_read(p)
        except OSError as e:     # e.g. the writer is finishing: retry for a while
            failures += 1
            if failures * interval > 10.0:
                raise CheckpointError(f"{p}: cannot open the result file ({e})") from e
            time.sleep(interval)
            continue
        failures = 0
        with f:
            a = f.attrs
            status, writer, start = (_text(a.get(k, "")) for k in
                                     ("status", "writer", "writer_start"))
            n = int(f["t"].shape[0])
            t = float(f["t"][n - 1]) if n else float("nan")
        if n != last:
            out(f"{p}: {n} rows, t = {t:.6g}, status {status}")
            last, since = n, time.monotonic()
        if status != "running":
            return n
        gone = writer_gone(writer, start)
        if gone and not checked:     # read once more: it may have ended meanwhile
            checked = True
            continue
        if gone:
            out(f"{p}: {gone} (killed?) while the file says 'running': it holds {n} "
                f"rows up to t = {t:.6g}; stopping")
            return n
        if time.monotonic() - since > idle:
            out(f"{p}: no new rows for {idle:g} s (writer killed?); stopping")
            return n
        time.sleep(interval)


def _text(v: Any) -> str:
    """An HDF5 string attribute as str."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
