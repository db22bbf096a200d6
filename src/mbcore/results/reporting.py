"""Reporter contract: where analyses send their results while they run.

An analysis declares *channels* (named 1-D series per output time, e.g. ``q`` with one
column per coordinate) in a :class:`RunInfo`, then calls ``record`` once per output
time and ``finish`` once at the end (also after a failure).  Reporters are plugins
(hook ``mbcore_reporters``); the built-in ones are ``hdf5`` and ``memory``.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from ..plugins.contract import CONTRACT_VERSION


@dataclass
class Channel:
    """One recorded series: ``labels[k]`` names column k (e.g. ``crank.phi``).

    ``unit``: the unit all columns share (``""``: none shared, or pure numbers);
    ``units``: the unit of each column (None: ``unit`` for every column)."""

    name: str
    labels: list[str]
    description: str = ""
    unit: str = ""
    units: list[str] | None = None

    @property
    def width(self) -> int:
        return len(self.labels)

    def column_units(self) -> list[str]:
        """The unit of each column (``""``: a pure number or not known)."""
        if self.units is not None and len(self.units) == self.width:
            return list(self.units)
        return [self.unit] * self.width

    def set_units(self, units: Sequence[str]) -> None:
        """Per-column units; ``unit`` becomes the one they share (else ``""``)."""
        self.units = [str(u) for u in units]
        shared = set(self.units)
        self.unit = shared.pop() if len(shared) == 1 else ""


@dataclass
class RunInfo:
    """Everything a reporter needs to know before the first row arrives."""

    analysis: str                       # e.g. "kinematic"
    channels: list[Channel]             # t is implicit and always recorded
    model_text: str = ""                # the model file text (or JSON of a Python model)
    model_format: str = "json"          # "yaml" | "json"
    model_name: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)   # software versions
    metadata: dict[str, Any] = field(default_factory=dict)   # free-form (bodies, units, ...)
    #: the rows the analysis plans to record (0: not known): a hint to allocate
    #: storage once, never a limit (events and resumed runs may record others)
    expected_rows: int = 0

    def channel(self, name: str) -> Channel:
        for c in self.channels:
            if c.name == name:
                return c
        raise KeyError(name)


class Row(dict):
    """One output row of every channel packed in a single flat float64 array.

    ``row[name]`` is a view of ``row.flat`` (channels in the order given, normally
    ``RunInfo.channels``): an analysis fills the views in place
    (``row["q"][:] = q``) and records the same Row every time; a reporter whose
    channels have the same ``layout`` copies ``row.flat`` in one operation instead
    of channel by channel (``record`` still receives a Mapping, so reporters that
    do not know Rows work unchanged)."""

    def __init__(self, channels, layout: tuple | None = None):
        super().__init__()
        self.layout = layout_of(channels) if layout is None else layout
        self.flat = np.zeros(sum(w for _, w in self.layout))
        off = 0
        for name, w in self.layout:
            self[name] = self.flat[off:off + w]
            off += w


def layout_of(channels) -> tuple:
    """``((name, width), ...)`` of a channel list (what :class:`Row` packs)."""
    return tuple((c.name, c.width) for c in channels)


class Reporter:
    """Base class of reporters.

    Rules for implementers:

    1. ``start(info)`` is called once before any row; allocate storage there
       (``info.expected_rows``: the rows the analysis plans, 0 when unknown; a hint,
       never a limit — the memory reporter allocates them at once).
    2. ``record(t, data)`` is called once per output time with ``data[name]`` a 1-D
       float array of ``info.channel(name).width`` values for every channel.  The
       arrays are work buffers of the analysis: copy them, never keep references.
       ``data`` may be a :class:`Row` (all channels in one flat array ``data.flat``
       with ``data.layout``): a reporter may then copy the flat array at once.
    3. ``finish(status, reason, stats)`` is called exactly once, with status
       ``"finished"`` or ``"failed"``; everything recorded before must then be
       readable (a failed run keeps its rows).  A reporter whose class sets
       ``interrupted_status = True`` gets ``"interrupted"`` instead of ``"failed"``
       after Ctrl-C / SIGTERM (the built-in ones).
    4. ``event(t, kind, message)`` records a notable event (warning, partition change).
    5. ``record_rows(t, rows, layout)`` hands over several output rows at once (the
       dynamic analysis on its compiled loop batches them): ``t`` of shape (k,),
       ``rows`` (k, total width), each line packed as a :class:`Row` of ``layout``.
       The default calls ``record`` once per row (with a :class:`Row`), so a
       reporter need not implement it; the built-in ones copy the block at once.
    6. ``group(name, data, attrs)`` keeps a named set of arrays that are not series
       (the state-space matrices and mode shapes of the ``modes`` analysis):
       ``data`` maps dataset names to arrays (float or complex) or lists of
       strings, ``attrs`` to scalars.  Called at most once per name, before
       ``finish``; the built-in reporters keep it (HDF5: group ``/<name>``,
       written by ``finish``; read back with ``Result.group(name)``).  The default
       ignores it.
    """

    name = "reporter"
    #: plugin contract version this class was built for (mbcore.plugins.contract)
    contract: ClassVar[tuple[int, int]] = CONTRACT_VERSION

    def start(self, info: RunInfo) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def record(self, t: float, data: Mapping[str, np.ndarray]) -> None:  # pragma: no cover
        raise NotImplementedError

    def record_rows(self, t: np.ndarray, rows: np.ndarray, layout: tuple) -> None:
        """Record ``len(t)`` rows at once (rule 5); the default: one ``record`` each."""
        record_rows_one_by_one(self, t, rows, layout)

    def event(self, t: float, kind: str, message: str) -> None:
        """Record an event; the default ignores it."""

    def group(self, name: str, data: Mapping[str, Any], attrs: Mapping[str, Any]) -> None:
        """Keep a named group of non-series arrays (rule 6); the default ignores it."""

    def finish(self, status: str, reason: str = "",
               stats: Mapping[str, Any] | None = None) -> None:  # pragma: no cover
        raise NotImplementedError


def record_rows_one_by_one(reporter, t: np.ndarray, rows: np.ndarray, layout: tuple) -> None:
    """``reporter.record(t[i], row)`` for every line of ``rows`` (one :class:`Row` of
    ``layout`` filled in turn): rule 5 for a reporter without ``record_rows``."""
    row = Row((), layout)
    flat = row.flat
    for i in range(len(t)):
        flat[:] = rows[i]
        reporter.record(float(t[i]), row)


def group_fan_out(reporters: Sequence[Reporter]):
    """``group(name, data, attrs)`` forwarding rule 6 to every reporter (one without
    the method ignores it); analyses find it as ``record.group``."""

    def group(name, data, attrs=None):
        for r in reporters:
            f = getattr(r, "group", None)
            if f is not None:
                f(name, data, dict(attrs or {}))
    return group


def reporters_from_settings(registry, entries: Any, path: str = "settings.reporters",
                            create: bool = True) -> list[Reporter]:
    """The reporters a model names in ``settings.reporters``, created in order.

    ``entries`` is None or a list whose items are a reporter type name (``peaks``)
    or a mapping ``{type: NAME, <option>: <value>, ...}``.  The options are the
    keyword arguments of the reporter class; a class that declares ``params``
    (``Mapping[str, Param]``, as element types do) has them validated, defaults
    applied and unknown keys refused with their key path
    (``settings.reporters[0].file``).  An unknown type name is a ModelError that
    lists the installed reporters.  ``create=False``: validate only (no reporter
    object is made, none is returned; ``mbcore validate``).
    """
    from ..elements import schema as S
    from ..errors import ModelError
    if entries is None:
        return []
    out: list[Reporter] = []
    for k, entry in enumerate(S.sequence(entries, path)):
        where = S.join(path, k)
        if isinstance(entry, str):
            name, options = entry, {}
        else:
            options = dict(S.mapping(entry, where))
            if "type" not in options:
                raise ModelError(S.join(where, "type"), "required key is missing "
                                 "(the reporter's type name)")
            name = S.string(options.pop("type"), S.join(where, "type"))
        if not registry.has("reporter", name):
            raise ModelError(where if isinstance(entry, str) else S.join(where, "type"),
                             registry.unknown_message("reporter", name))
        cls = registry.get("reporter", name)
        schema = getattr(cls, "params", None)
        if schema is not None:
            S.check_keys(options, schema, where,
                         [key for key, p in schema.items() if p.is_required()])
            options = {key: p.validate(options[key], S.join(where, key), None)
                       if key in options else p.default_value()
                       for key, p in schema.items()}
        if not create:
            continue
        try:
            out.append(cls(**options))
        except (TypeError, ValueError) as exc:
            raise ModelError(where, f"reporter {name!r}: {exc}") from exc
    return out


def fan_out(reporters: Sequence[Reporter], guard: Any = None):
    """Return (record, event, finish) callables that forward to every reporter
    (``record.rows(t, rows, layout)`` forwards a block of rows: rule 5).  ``guard``:
    a context manager around each row or block (a run's: ``mbcore.analysis.interrupts.CRITICAL``,
    so that a row reaches every reporter or none)."""
    guard = contextlib.nullcontext() if guard is None else guard

    def record(t, data):
        with guard:
            for r in reporters:
                r.record(t, data)

    def rows(t, block, layout):
        with guard:
            for r in reporters:
                f = getattr(r, "record_rows", None)
                if f is None:
                    record_rows_one_by_one(r, t, block, layout)
                else:
                    f(t, block, layout)
    record.rows = rows
    record.group = group_fan_out(reporters)

    def event(t, kind, message):
        for r in reporters:
            r.event(t, kind, message)

    def finish(status, reason="", stats=None):
        for r in reporters:
            r.finish(status, reason, stats)

    return record, event, finish
