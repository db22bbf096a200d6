"""``mbcore.sweep``: run a model over a grid (or a zip) of parameter values.

Every case is the base model with the case's values set at the swept key paths
(:mod:`mbcore.studies.params`), run by :func:`mbcore.run` into its own result file
``OUTDIR/case_NNNN.h5``; the study's index (:mod:`mbcore.studies.index`) maps cases
to values, files, status, errors, metrics (:mod:`mbcore.studies.metrics`) and wall
times.  Failed cases are recorded, not fatal.  Rerunning the same study in the same
directory skips the finished cases; a study whose model, settings or parameters
changed is refused there (``resume=False`` starts it afresh).  docs/sweeps.md.
"""
from __future__ import annotations

import hashlib
import math
import os
import time
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..errors import ModelError
from .case import canonical_json, case_key, compute_metrics, file_key
from .index import INDEX_CSV, INDEX_H5, CaseRecord, read_index, write_index
from .metrics import ColumnError, Metric, parse_metrics
from .params import Parameter, case_model, expand, parameters_from

__all__ = ["sweep", "Study", "StudyMismatchError"]

#: seconds between two rewrites of the index while cases complete
INDEX_INTERVAL = 2.0


class StudyMismatchError(ModelError):
    """The output directory holds another study (model, settings or parameters)."""


class Study:
    """The cases of a sweep (a list of :class:`CaseRecord`, in case order).

    ``study[i]`` is case i; ``study.rows()`` the index rows as dicts;
    ``study.to_pandas()`` a DataFrame (needs pandas); ``study.result(i)`` opens case
    i's result file.  ``ran``/``skipped``: how many cases this call ran and skipped.
    """

    def __init__(self, out_dir: Path, parameters: Sequence[Parameter],
                 metrics: Sequence[str], cases: list[CaseRecord], mode: str = "grid",
                 attrs: Mapping[str, Any] | None = None):
        self.out_dir = Path(out_dir)
        self.parameters = [p.path if isinstance(p, Parameter) else str(p)
                           for p in parameters]
        self.metrics = list(metrics)
        self.cases = cases
        self.mode = mode
        self.attrs = dict(attrs or {})
        self.wall_time = 0.0

    @classmethod
    def load(cls, out_dir: str | os.PathLike) -> "Study":
        """The study recorded in ``out_dir`` (its ``index.h5``)."""
        attrs, records = read_index(out_dir)
        params = [p["path"] for p in attrs.get("parameters", [])]
        metrics = [m["name"] for m in attrs.get("metrics", [])]
        return cls(Path(out_dir), params, metrics, records, attrs.get("mode", "grid"), attrs)

    # -- access ----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.cases)

    def __iter__(self) -> Iterator[CaseRecord]:
        return iter(self.cases)

    def __getitem__(self, i: int) -> CaseRecord:
        return self.cases[i]

    @property
    def index_path(self) -> Path:
        return self.out_dir / INDEX_H5

    @property
    def csv_path(self) -> Path:
        return self.out_dir / INDEX_CSV

    @property
    def ok(self) -> list[CaseRecord]:
        return [c for c in self.cases if c.status == "ok"]

    @property
    def failed(self) -> list[CaseRecord]:
        return [c for c in self.cases if c.status == "failed"]

    @property
    def ran(self) -> int:
        return sum(c.ran for c in self.cases)

    @property
    def skipped(self) -> int:
        return sum(not c.ran and c.status != "pending" for c in self.cases)

    def rows(self) -> list[dict[str, Any]]:
        """The index rows (case, parameters, file, status, error, metrics, wall_time,
        key) as dicts."""
        return [c.row() for c in self.cases]

    def to_pandas(self):
        """The index as a :class:`pandas.DataFrame` indexed by case number."""
        from ..results.result import _optional
        pd = _optional("pandas", "pandas")
        return pd.DataFrame(self.rows()).set_index("case")

    def result(self, case: int):
        """The :class:`mbcore.Result` of case ``case`` (close it, or use ``with``)."""
        from ..results.result import Result
        return Result(self.out_dir / self.cases[case].file)

    def summary(self) -> str:
        """A few lines: counts, the failed cases and the metric ranges."""
        n_ok, n_fail = len(self.ok), len(self.failed)
        lines = [f"{len(self)} cases ({self.mode} of {', '.join(self.parameters)}): "
                 f"{n_ok} ok, {n_fail} failed"
                 + (f", {len(self) - n_ok - n_fail} pending" if n_ok + n_fail < len(self)
                    else "")
                 + f"; ran {self.ran}, skipped {self.skipped} (finished before)"]
        for m in self.metrics:
            vals = [c.metrics.get(m, math.nan) for c in self.ok]
            vals = [v for v in vals if not math.isnan(v)]
            if vals:
                lines.append(f"  {m}: {min(vals):.6g} .. {max(vals):.6g}")
        for c in self.failed[:10]:
            values = ", ".join(f"{k}={v!r}" for k, v in c.params.items())
            lines.append(f"  case {c.case} ({values}) failed: {c.error}")
        if len(self.failed) > 10:
            lines.append(f"  ... and {len(self.failed) - 10} more failed cases (index)")
        lines.append(f"index: {self.csv_path} and {self.index_path}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<Study {str(self.out_dir)!r}: {len(self)} cases, {len(self.ok)} ok, "
                f"{len(self.failed)} failed>")


# ----------------------------------------------------------------------------- sweep
def _load_model(model):
    from ..model.model import Model
    if isinstance(model, Model):
        return model
    if isinstance(model, Mapping):
        return Model.from_dict(model)
    return Model.from_file(model)


def _out_dir(model, given) -> Path:
    if given is not None:
        return Path(given).resolve()
    src = getattr(model, "source_path", None)
    if src:
        p = Path(src)
        return (p.parent / f"{p.stem}_sweep").resolve()
    raise ModelError("out_dir", "give the directory of the study (out_dir=...): the "
                                "model was not read from a file")


def _fingerprint(desc: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(desc).encode()).hexdigest()


def _check_existing(out_dir: Path, desc: dict, fingerprint: str, resume: bool):
    """Old records of the study in ``out_dir`` (resume), or None.  A different study
    there is refused (resume) or its files removed (no resume)."""
    try:
        attrs, records = read_index(out_dir)
    except FileNotFoundError:
        return None
    if resume and attrs.get("fingerprint") == fingerprint:
        return records
    if resume:
        differs = [k for k in ("model", "settings", "analysis", "kernels", "mode",
                               "parameters")
                   if canonical_json(attrs.get(k)) != canonical_json(desc[k])]
        raise StudyMismatchError(str(out_dir), "holds another study (its " +
                                 (", ".join(differs) or "description") + " differ); use "
                                 "another directory, or resume=False (--no-resume) to "
                                 "replace it")
    for r in records:                      # start afresh: no stale case files
        (out_dir / r.file).unlink(missing_ok=True)
    return None


def sweep(model, params: Mapping[str, Any] | Sequence[Any], *, mode: str = "grid",
          metrics: Mapping[str, str] | Sequence[str] | None = None,
          out_dir: str | os.PathLike | None = None, workers: int | None = None,
          client=None, scheduler: str | None = None,
          settings: Mapping[str, Any] | None = None, analysis: str | None = None,
          kernels: str | None = None, compression: str | None = None,
          resume: bool = True, retry_failed: bool = True,
          progress: bool = False) -> Study:
    """Run ``model`` for every combination of the swept parameter values.

    ``model``: a :class:`mbcore.Model`, a model dictionary or a model file path.
    ``params``: ``{key path: values}`` (or ``["PATH=SPEC", ...]``); a key path names a
    value of the model (``forces.spring.stiffness``, ``bodies.crank.mass``,
    ``settings.t_end``, ``parameters.L``); values are a spec string (``a:b:n``,
    ``a:b:n:log``, ``v1,v2,...``) or a sequence.  ``mode``: ``"grid"`` (cartesian
    product, the last parameter varying fastest) or ``"zip"``.  ``metrics``:
    ``{name: expression}`` or ``["NAME=EXPR", ...]`` (docs/sweeps.md).

    Cases run on ``workers`` local processes (default: the CPUs available; ``0``:
    in this process), or on Dask with ``client`` (a ``distributed.Client``) or
    ``scheduler`` (its address).  ``settings``, ``analysis``, ``kernels`` and
    ``compression`` are passed to :func:`mbcore.run` for every case.  Results go to
    ``out_dir`` (default: ``<model file stem>_sweep`` beside the model file):
    ``case_NNNN.h5``, ``index.h5``, ``index.csv``.

    ``resume``: skip the cases already finished in ``out_dir`` by this same study
    (its result file says finished and carries the case's key); a directory holding a
    different study raises :class:`StudyMismatchError`; ``resume=False`` removes the
    old study's case files and runs everything.  ``retry_failed=False`` also keeps
    the failed cases of an earlier call.  Metrics of skipped cases are recomputed from
    their files when the metric set changed.  A metric naming a column the result
    does not have stops the sweep (:class:`~mbcore.studies.metrics.ColumnError`).
    """
    from ..plugins.manager import registry as _registry
    from .._version import __version__
    reg = _registry()
    m = _load_model(model)
    base = m.to_dict()
    base.setdefault("settings", {})
    parameters = parameters_from(params, base, reg)
    combos = expand(parameters, mode)
    parsed: list[Metric] = parse_metrics(metrics)
    if workers is not None and workers < 0:
        raise ModelError("workers", f"expected a count >= 0, got {workers}")
    if client is not None and scheduler is not None:
        raise ModelError("scheduler", "give a Dask client or a scheduler address, not both")
    out = _out_dir(m, out_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = dict(settings or {})
    desc = {"model": base, "settings": settings, "analysis": analysis, "kernels": kernels,
            "mode": mode, "parameters": [{"path": p.path, "values": list(p.values)}
                                         for p in parameters]}
    fingerprint = _fingerprint(desc)
    old = _check_existing(out, desc, fingerprint, resume)
    attrs = {**desc, "fingerprint": fingerprint, "mbcore_version": __version__,
             "metrics": [{"name": x.name, "expression": x.text} for x in parsed],
             "model_name": m.name}
    width = max(4, len(str(len(combos) - 1)))
    paths = [p.path for p in parameters]
    names = [x.name for x in parsed]
    records, tasks = [], []
    old_rows = {r.case: r for r in (old or [])}
    for i, values in enumerate(combos):
        cdict = case_model(base, parameters, values, reg)
        key = case_key(cdict, settings, analysis, kernels)
        rec = CaseRecord(i, dict(zip(paths, values)), f"case_{i:0{width}d}.h5", key=key)
        records.append(rec)
        if resume and _reuse(out, rec, old_rows.get(i), parsed, retry_failed):
            continue
        tasks.append({"case": i, "model": cdict, "settings": settings,
                      "analysis": analysis, "kernels": kernels,
                      "output": str(out / rec.file), "key": key,
                      "metrics": [(x.name, x.text) for x in parsed],
                      "compression": compression})
    study = Study(out, parameters, names, records, mode, attrs)
    write_index(out, records, attrs, paths, names)
    t0 = time.perf_counter()
    try:
        _execute(study, tasks, workers, client, scheduler, progress, attrs, paths, names)
    finally:
        study.wall_time = time.perf_counter() - t0
        write_index(out, records, attrs, paths, names)
    return study


def _reuse(out: Path, rec: CaseRecord, old: CaseRecord | None, metrics: list[Metric],
           retry_failed: bool) -> bool:
    """Fill ``rec`` from a finished earlier run of the same case; True if reused."""
    status, key = file_key(out / rec.file)
    if status == "finished" and key == rec.key:
        same = old is not None and old.key == rec.key and old.status == "ok" and \
            list(old.metrics) == [x.name for x in metrics]
        if same:
            rec.metrics, rec.error, rec.wall_time = dict(old.metrics), old.error, old.wall_time
        else:                               # new metric set: from the file
            from ..results.result import Result
            with Result(out / rec.file) as res:
                rec.metrics, errors, column_error = compute_metrics(metrics, res)
            if column_error:
                raise ColumnError("metrics", column_error)
            rec.error = "; ".join(errors)
            rec.wall_time = old.wall_time if old is not None and old.key == rec.key \
                else math.nan
        rec.status = "ok"
        return True
    if not retry_failed and old is not None and old.key == rec.key and \
            old.status == "failed":
        rec.status, rec.error, rec.wall_time = "failed", old.error, old.wall_time
        rec.metrics = {x.name: math.nan for x in metrics}
        return True
    return False


def _execute(study: Study, tasks, workers, client, scheduler, progress, attrs, paths,
             names) -> None:
    from .executors import default_workers, run_dask, run_processes, run_serial
    if not tasks:
        return
    if client is not None or scheduler is not None:
        results = run_dask(tasks, client=client, scheduler=scheduler)
    else:
        n = default_workers() if workers is None else workers
        results = run_serial(tasks) if n == 0 else run_processes(tasks, n)
    from ..results.progress import progress_bar
    bar = progress_bar(enabled=progress, total=len(study),
                       initial=len(study) - len(tasks), unit="case", desc="sweep",
                       leave=True)
    last_write = time.monotonic()
    n_failed = len(study.failed)
    try:
        for r in results:
            rec = study.cases[r["case"]]
            rec.status, rec.error = r["status"], r["error"]
            rec.metrics = {k: r["metrics"].get(k, math.nan) for k in names}
            rec.wall_time, rec.ran = r["wall_time"], True
            if r.get("column_error"):
                raise ColumnError("metrics", r["column_error"])
            n_failed += rec.status == "failed"
            bar.update(1)
            if n_failed:
                bar.set_postfix(failed=n_failed, refresh=False)
            if time.monotonic() - last_write > INDEX_INTERVAL:
                write_index(study.out_dir, study.cases, attrs, paths, names)
                last_write = time.monotonic()
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()
        bar.close()
