"""The index of a study: ``OUTDIR/index.h5`` (an HDF5 table) and ``OUTDIR/index.csv``.

Both hold one row per case: ``case``, one column per swept parameter (named by its
key path), ``file`` (relative to OUTDIR), ``status`` (``ok``, ``failed`` or
``pending``), ``error``, one column per metric, ``wall_time`` (seconds) and ``key``
(the case's identity, :func:`mbcore.studies.case.case_key`).  ``index.h5`` stores
them as the compound dataset ``/cases`` and the study's description as root
attributes (``schema = "mbcore-study"``, ``fingerprint``, ``model``, ``settings``,
``analysis``, ``kernels``, ``mode``, ``parameters``, ``metrics``; JSON text where
structured).  Both files are replaced atomically (written aside, then renamed).
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["CaseRecord", "SCHEMA", "INDEX_H5", "INDEX_CSV", "write_index", "read_index"]

SCHEMA = "mbcore-study"
INDEX_VERSION = 1
INDEX_H5 = "index.h5"
INDEX_CSV = "index.csv"
#: root attributes of index.h5 stored as JSON text (decoded by :func:`read_index`)
JSON_ATTRS = ("model", "settings", "analysis", "kernels", "mode", "parameters", "metrics")


@dataclass
class CaseRecord:
    """One row of a study: a case, its parameter values, result file and outcome."""

    case: int
    params: dict[str, Any]
    file: str
    status: str = "pending"
    error: str = ""
    metrics: dict[str, float] = field(default_factory=dict)
    wall_time: float = math.nan
    key: str = ""
    #: run in this call (False: skipped as finished, or read from an index)
    ran: bool = False

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def row(self) -> dict[str, Any]:
        """The record as one flat row (the index's columns)."""
        return {"case": self.case, **self.params, "file": self.file, "status": self.status,
                "error": self.error, **self.metrics, "wall_time": self.wall_time,
                "key": self.key}


def _numeric(values: Sequence[Any]) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def _atomic(path: Path, write) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    os.replace(tmp, path)


def write_index(out_dir: Path, records: Sequence[CaseRecord], attrs: Mapping[str, Any],
                param_paths: Sequence[str], metric_names: Sequence[str]) -> None:
    """Write ``index.h5`` and ``index.csv`` of ``records`` (all cases, in order)."""
    _atomic(out_dir / INDEX_H5, lambda p: _write_h5(p, records, attrs, param_paths,
                                                    metric_names))
    _atomic(out_dir / INDEX_CSV, lambda p: _write_csv(p, records, param_paths,
                                                      metric_names))


def _write_h5(path: Path, records, attrs, param_paths, metric_names) -> None:
    import h5py
    text = h5py.string_dtype()
    cols: list[tuple[str, Any, list]] = [("case", np.int64, [r.case for r in records])]
    for p in param_paths:
        vals = [r.params.get(p) for r in records]
        if _numeric(vals):
            cols.append((p, np.float64, [float(v) for v in vals]))
        else:
            cols.append((p, text, [json.dumps(v) if not isinstance(v, str) else v
                                   for v in vals]))
    cols += [("file", text, [r.file for r in records]),
             ("status", text, [r.status for r in records]),
             ("error", text, [r.error for r in records])]
    cols += [(m, np.float64, [r.metrics.get(m, math.nan) for r in records])
             for m in metric_names]
    cols += [("wall_time", np.float64, [r.wall_time for r in records]),
             ("key", text, [r.key for r in records])]
    table = np.empty(len(records), dtype=[(n, d) for n, d, _ in cols])
    for n, _, v in cols:
        table[n] = v
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("cases", data=table)
        ds.attrs["parameters"] = json.dumps(list(param_paths))
        ds.attrs["metrics"] = json.dumps(list(metric_names))
        f.attrs["schema"] = SCHEMA
        f.attrs["version"] = INDEX_VERSION
        for k, v in attrs.items():
            f.attrs[k] = json.dumps(v) if k in JSON_ATTRS or \
                not isinstance(v, (str, int, float)) else v


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _write_csv(path: Path, records, param_paths, metric_names) -> None:
    header = ["case", *param_paths, "file", "status", "error", *metric_names,
              "wall_time", "key"]
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in records:
            row = r.row()
            w.writerow([_fmt(row[h]) if h in row else "" for h in header])


def _str(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def read_index(out_dir: str | os.PathLike) -> tuple[dict[str, Any], list[CaseRecord]]:
    """(attributes, records) of ``OUTDIR/index.h5`` (the :data:`JSON_ATTRS` decoded);
    FileNotFoundError if absent."""
    import h5py
    path = Path(out_dir) / INDEX_H5
    if not path.exists():
        raise FileNotFoundError(2, "no study index", str(path))
    with h5py.File(path, "r") as f:
        if _str(f.attrs.get("schema", "")) != SCHEMA:
            from ..errors import ModelError
            raise ModelError(str(path), "not an mbcore study index")
        attrs = {k: _str(v) if isinstance(v, (bytes, str)) else v.item()
                 if isinstance(v, np.generic) else v for k, v in f.attrs.items()}
        for k in JSON_ATTRS:
            if k in attrs:
                attrs[k] = json.loads(attrs[k])
        ds = f["cases"]
        params = json.loads(_str(ds.attrs["parameters"]))
        metrics = json.loads(_str(ds.attrs["metrics"]))
        table = ds[()]
    records = []
    for row in table:
        pv = {}
        for p in params:
            v = row[p]
            if isinstance(v, (bytes, str)):
                s = _str(v)
                try:
                    v = json.loads(s)
                except ValueError:
                    v = s
                v = s if not isinstance(v, (bool, int, float)) else v
            else:
                v = float(v)
            pv[p] = v
        records.append(CaseRecord(int(row["case"]), pv, _str(row["file"]),
                                  _str(row["status"]), _str(row["error"]),
                                  {m: float(row[m]) for m in metrics},
                                  float(row["wall_time"]), _str(row["key"])))
    return attrs, records
