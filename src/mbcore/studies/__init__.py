"""Parameter studies: :func:`sweep` runs a model over a grid (or a zip) of values of
key paths, each case into its own HDF5 file, on local processes or on Dask, with an
index of parameters, files, statuses and user-chosen metrics (docs/sweeps.md).

Modules: :mod:`.params` (key paths and value specs), :mod:`.metrics` (the metric
grammar), :mod:`.case` (the case function every executor runs), :mod:`.executors`
(in-process, local processes, Dask), :mod:`.index` (index.h5/index.csv) and
:mod:`.study` (:func:`sweep`, :class:`Study`)."""
from __future__ import annotations

from .index import CaseRecord
from .metrics import ColumnError, Metric, MetricError, parse_metric, parse_metrics
from .params import Parameter, expand, parse_spec, resolve
from .study import Study, StudyMismatchError, sweep

__all__ = ["sweep", "Study", "CaseRecord", "StudyMismatchError", "Parameter", "Metric",
           "MetricError", "ColumnError", "parse_metric", "parse_metrics", "parse_spec",
           "resolve", "expand"]
