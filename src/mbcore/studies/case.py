"""One case of a study: the function every executor runs (local processes, Dask).

:func:`run_case` is a top-level function of plain data in and plain data out, so it
pickles to a process pool or a Dask worker unchanged; the local and the distributed
sweeps run the very same code, hence give the same numbers.
"""
from __future__ import annotations

import hashlib
import json
import math
import time
from pathlib import Path
from typing import Any, Mapping

__all__ = ["run_case", "warm_up", "case_key", "canonical_json", "mark_file", "file_key",
           "compute_metrics"]

#: root attributes added to a case's result file after its run
KEY_ATTR = "sweep_key"
CASE_ATTR = "sweep_case"


def canonical_json(obj: Any) -> str:
    """Deterministic JSON (sorted keys, exact floats) of plain data."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str,
                      allow_nan=True)


def case_key(model: Mapping[str, Any], settings: Mapping[str, Any] | None,
             analysis: str | None, kernels: str | None) -> str:
    """Identity of a case: SHA-256 of its model dictionary and run options (what a
    finished case file must match to be skipped on resume)."""
    text = canonical_json({"model": model, "settings": dict(settings or {}),
                           "analysis": analysis, "kernels": kernels})
    return hashlib.sha256(text.encode()).hexdigest()


def mark_file(path: Path, key: str, case: int) -> None:
    """Write the case's key and number into its (closed) result file."""
    import h5py
    with h5py.File(path, "r+") as f:
        f.attrs[KEY_ATTR] = key
        f.attrs[CASE_ATTR] = int(case)


def file_key(path: Path) -> tuple[str, str]:
    """(status, key) of a case file; ("", "") if missing or unreadable."""
    import h5py
    try:
        with h5py.File(path, "r") as f:
            status = f.attrs.get("status", "")
            key = f.attrs.get(KEY_ATTR, "")
    except (OSError, ValueError):
        return "", ""
    dec = (lambda v: v.decode() if isinstance(v, bytes) else str(v))
    return dec(status), dec(key)


def compute_metrics(metrics, result) -> tuple[dict[str, float], list[str], str]:
    """(values, errors, column error): every metric on ``result``; a metric that
    cannot be evaluated is NaN with its message in ``errors``; an unknown column
    (the same for every case: a mistake in the metric) in ``column error``."""
    from .metrics import ColumnError, MetricError
    values: dict[str, float] = {}
    errors: list[str] = []
    column_error = ""
    for m in metrics:
        try:
            values[m.name] = m(result)
        except ColumnError as exc:
            values[m.name] = math.nan
            column_error = column_error or str(exc)
            errors.append(str(exc))
        except MetricError as exc:
            values[m.name] = math.nan
            errors.append(str(exc))
    return values, errors, column_error


def warm_up() -> None:
    """Import what a case needs and load the plugins (a worker's initializer, so that
    the first case's wall time is not the worker's start-up)."""
    from ..plugins.manager import get_plugin_manager
    from ..analysis import runner  # noqa: F401
    import h5py  # noqa: F401
    get_plugin_manager().registry.rows()


def run_case(task: Mapping[str, Any]) -> dict[str, Any]:
    """Run one case and return its record (plain data).

    ``task``: ``case`` (number), ``model`` (model dictionary), ``settings``
    (overrides), ``analysis``, ``kernels``, ``output`` (result file path), ``key``
    (:func:`case_key`), ``metrics`` (``[(name, expression), ...]``) and
    ``compression``.  Never raises for a failing case: the record's ``status`` is
    ``"failed"`` and ``error`` says why (type and message); the metrics of a failed
    case are NaN.
    """
    from ..model.model import Model
    from ..analysis.runner import run
    from .metrics import parse_metrics
    t0 = time.perf_counter()          # the process's first imports are not the case's
    out = Path(task["output"])
    rec: dict[str, Any] = {"case": int(task["case"]), "status": "failed", "error": "",
                           "metrics": {}, "column_error": "", "key": task["key"]}
    metrics = parse_metrics([f"{n}={t}" for n, t in task.get("metrics", ())])
    if out.exists():                        # an earlier attempt of this case
        out.unlink()
    try:
        model = Model.from_dict(task["model"])
        res = run(model, analysis=task.get("analysis"), settings=task.get("settings"),
                  output=out, kernels=task.get("kernels"), raise_errors=False,
                  compression=task.get("compression"))
    except Exception as exc:                # invalid values, compile errors...
        rec["error"] = f"{type(exc).__name__}: {exc}"
    else:
        if res.status == "finished":
            rec["status"] = "ok"
            values, errors, rec["column_error"] = compute_metrics(metrics, res)
            rec["metrics"] = values
            rec["error"] = "; ".join(errors)
        else:
            rec["error"] = res.reason or res.status
    if out.exists():
        mark_file(out, task["key"], task["case"])
    for m in metrics:
        rec["metrics"].setdefault(m.name, math.nan)
    rec["wall_time"] = time.perf_counter() - t0
    return rec
