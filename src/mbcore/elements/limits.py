"""Size limits of model input and the external-data policy (docs/model-format.md).

A model file is data from anywhere: before mbcore builds what it describes, the sizes
it asks for are checked against these limits, so that a table of 10^8 points, a
chain of 10^7 bodies or an output grid of 10^12 rows is a :class:`ModelError` naming
the key, not a machine out of memory.  The defaults are far above any model the
project ships; change them for one process with :func:`configure` (or temporarily
with :func:`override`), or with environment variables ``MBCORE_MAX_<NAME>``
(e.g. ``MBCORE_MAX_BODIES=5000000``), read when this module is imported.

``allow_external_data``: a table file (``{table: {file: ...}}``) outside the model
file's directory is refused unless this is true (``configure(allow_external_data=
True)``, ``Model.from_file(..., allow_external_data=True)`` or the CLI flag
``--allow-external-data``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import Any, Iterator

from ..errors import ModelError


@dataclasses.dataclass
class Limits:
    """The limits in force (one process-wide instance: :data:`limits`)."""

    #: bytes of a model file (read before parsing)
    max_file_bytes: int = 512 * 2 ** 20
    #: bodies of a model
    max_bodies: int = 1_000_000
    #: entries of one section (joints, drivers, forces, points, impacts)
    max_elements: int = 4_000_000
    #: points of one table function (inline or from a file)
    max_table_points: int = 1_000_000
    #: output rows of one analysis ((t_end - t_start) / output_step + 1)
    max_output_rows: int = 10_000_000
    #: read table files outside the model file's directory
    allow_external_data: bool = False


limits = Limits()


def _from_environment() -> None:
    for f in dataclasses.fields(Limits):
        value = os.environ.get(f"MBCORE_{f.name.upper()}")
        if value is None:
            continue
        try:
            setattr(limits, f.name, value.lower() in ("1", "true", "yes")
                    if f.type in (bool, "bool") else int(float(value)))
        except ValueError:
            raise ModelError(f"MBCORE_{f.name.upper()}", f"expected a number, got "
                                                         f"{value!r}") from None


def configure(**values: Any) -> None:
    """Set limits for this process, e.g. ``configure(max_bodies=5_000_000)``."""
    names = {f.name for f in dataclasses.fields(Limits)}
    for key, value in values.items():
        if key not in names:
            raise TypeError(f"unknown limit {key!r} (known: {', '.join(sorted(names))})")
        setattr(limits, key, value)


@contextlib.contextmanager
def override(**values: Any) -> Iterator[Limits]:
    """``with override(max_table_points=10): ...``: limits for a block."""
    old = dataclasses.asdict(limits)
    configure(**values)
    try:
        yield limits
    finally:
        configure(**old)


def check_count(count: int, limit_name: str, path: str, what: str) -> None:
    """Raise a ModelError at ``path`` if ``count`` exceeds limit ``limit_name``."""
    limit = getattr(limits, limit_name)
    if count > limit:
        raise ModelError(path, f"{count:,} {what} exceed the limit of {limit:,} "
                               f"(mbcore.elements.limits.configure({limit_name}=...) or "
                               f"MBCORE_{limit_name.upper()} to raise it)")


_from_environment()
