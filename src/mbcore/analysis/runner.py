"""``run``: compile a model, run its analysis, stream the results (CLI and Python)."""
from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import interrupts
from ..errors import MbcoreError, ModelError
from ..elements.units import BASE, column_units
from ..results.reporting import Reporter, RunInfo, fan_out, reporters_from_settings
from ..results.run_summary import RunSummary

if TYPE_CHECKING:
    from ..model.model import Model


_VERSIONS: dict[str, str] = {}


def versions() -> dict[str, str]:
    """Versions of mbcore, Python, its dependencies and the platform (stored with
    every result).  Computed once per process; a dependency not imported yet (h5py
    for a run without an HDF5 file, SciPy for a small dense kinematic run) is read
    from its installed metadata instead of being imported (start-up time)."""
    if not _VERSIONS:
        while _PLATFORM:                       # started by _platform_soon()
            _PLATFORM.pop().join()
        import numpy

        from .._version import __version__
        deps = _versions_of(("scipy", "h5py", "pluggy"))
        _VERSIONS.update({"mbcore": __version__, "python": platform.python_version(),
                          "numpy": numpy.__version__, **deps,
                          "platform": _linux_platform() or platform.platform()})
    return dict(_VERSIONS)


def _linux_platform() -> str | None:
    """``platform.platform()``'s string on Linux with glibc (``Linux-<release>-
    <machine>-with-glibc<version>``) from ``os.uname`` and ``os.confstr``, without the
    ``uname -p`` subprocess platform runs for a processor name it then drops (it is
    'unknown' or the machine on Linux); None elsewhere."""
    try:
        u = os.uname()
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):     # not Linux/glibc
        return None
    name, _, version = libc.partition(" ")
    if u.sysname != "Linux" or name != "glibc" or not version:
        return None
    parts = [u.sysname, u.release, u.machine, "with", name + version]
    out = "-".join(x.strip() for x in parts if x)
    for ch in " /\\:;\"()":
        out = out.replace(ch, "_" if ch == " " else "-")
    while "--" in out:
        out = out.replace("--", "-")
    return out


_PLATFORM: list = []


def _platform_soon() -> None:
    """Start ``platform.platform()`` in a helper thread (on Linux it runs ``uname -p``
    in a subprocess: ~10 ms) so that it overlaps the model compile of the first run;
    :func:`versions` joins the thread and reads the value platform caches.  Not
    needed where :func:`_linux_platform` applies."""
    if _VERSIONS or _PLATFORM or _linux_platform() is not None:
        return
    try:
        import threading
        th = threading.Thread(target=platform.platform, name="mbcore-platform", daemon=True)
        th.start()
    except Exception:  # pragma: no cover - no threads: versions() computes it inline
        return
    _PLATFORM.append(th)


def _versions_of(modules: tuple[str, ...]) -> dict[str, str]:
    """``module.__version__`` of each module; for a module not imported yet (or
    whose ``__version__`` is computed by importlib.metadata, as pluggy's), the
    version of its installed distribution, found on sys.path as importlib.metadata
    finds it (one pass over sys.path for all of them)."""
    import sys
    out: dict[str, str] = {}
    for module in modules:
        mod = sys.modules.get(module)
        if mod is not None and "__version__" in vars(mod):
            out[module] = str(mod.__version__)
    missing = [m for m in modules if m not in out]
    if missing:
        from ..plugins.manager import distribution_versions
        found = distribution_versions(missing)
        for module in missing:
            version = found.get(module)
            if not version:
                import importlib
                version = str(importlib.import_module(module).__version__)
            out[module] = version
    return {m: out[m] for m in modules}


def as_model(model: Any, registry: Any = None) -> Model:
    """``model`` as a :class:`mbcore.Model`: a Model itself, a mapping of model data
    (:meth:`Model.from_dict`) or a model file path (:meth:`Model.from_file`); any
    other type is a TypeError saying what is wanted."""
    from ..model.model import Model
    if isinstance(model, Model) or hasattr(model, "compile") and hasattr(model, "settings"):
        return model
    if isinstance(model, Mapping):
        return Model.from_dict(model, registry=registry)
    if isinstance(model, (str, os.PathLike)):
        return Model.from_file(model, registry=registry)
    raise TypeError(f"mbcore.run: model must be a mbcore.Model, a mapping of model data "
                    f"(as Model.from_dict takes) or a model file path, got "
                    f"{type(model).__name__}")


def run(model: Model | Mapping[str, Any] | str | os.PathLike | None, *,
        analysis: str | None = None, settings: Mapping[str, Any] | None = None,
        output: str | os.PathLike | None = None, reporters: Sequence[Reporter] = (),
        progress: bool = False, kernels: str | None = None, plugins=None,
        jacobian: str = "auto", raise_errors: bool = True, resume=None,
        checkpoint_seconds: float | None = None, checkpoint_every: float | None = None,
        compression: str | None = None):
    """Run the model's analysis; return its result: with ``output``, the file, read
    lazily (:func:`mbcore.results.result.run_result`: no copy of the rows in memory, so a
    run of any length streams in bounded memory); without, the in-memory result.

    ``model``: a :class:`mbcore.Model`, a mapping of model data (as
    :meth:`mbcore.Model.from_dict` takes) or a model file path; anything else is a
    TypeError.

    ``analysis`` overrides ``settings.analysis`` (default ``kinematic``);
    ``settings`` are merged over the model's (when the analysis differs from the
    model file's, only the model settings the new analysis knows are kept); ``output`` is an HDF5 path
    (streamed while running); ``kernels`` and ``jacobian`` as for
    :meth:`mbcore.Model.compile`.  On failure the results so far are kept (HDF5 file
    marked ``failed`` with the reason) and the error is raised, unless
    ``raise_errors=False``, in which case the (failed) result is returned.

    With ``output``, an analysis that supports it (dynamic) writes checkpoints to
    the file every ``checkpoint_seconds`` of wall time (default
    ``$MBCORE_CHECKPOINT_SECONDS`` or 10 s) and/or ``checkpoint_every`` of simulated
    time, and at the end; Ctrl-C / SIGTERM write one and mark the file
    ``interrupted``.  ``compression``: ``None``, ``"gzip"`` or ``"lzf"`` for the
    series.  ``resume``: a result file path: continue its run from the last
    checkpoint up to ``settings["t_end"]`` (default the file's), appending to the
    file (:func:`mbcore.analysis.checkpoint.resume`; ``model`` must be the file's model or
    None); or a :class:`mbcore.analysis.checkpoint.Checkpoint` (internal).

    Reporters: the HDF5 one with ``output``, else the in-memory one; the reporter
    plugins named in ``settings.reporters`` (a list of type names or mappings
    ``{type: NAME, option: value...}``, :func:`mbcore.results.reporting.reporters_from_settings`;
    a resumed run starts them afresh) and ``reporters`` (objects: e.g. a
    ``MemoryReporter`` for an in-memory copy next to the file).  Every run also
    keeps a :class:`mbcore.results.run_summary.RunSummary` (last time, first non-finite
    value).
    """
    from ..plugins.manager import get_plugin_manager
    pm = plugins or get_plugin_manager()
    reg = pm.registry
    if model is not None or resume is None:
        model = as_model(model, reg)
    if resume is not None and not hasattr(resume, "as_dict"):
        extra = set(settings or {}) - {"t_end"}
        if extra or analysis not in (None, "dynamic") or output is not None:
            raise ModelError("resume", "a resume continues the file's own settings: give "
                             "only settings['t_end'] (not " + ", ".join(
                                 sorted(extra) or ["analysis/output"]) + ")")
        return _resume_file(resume, (settings or {}).get("t_end"), model=model,
                            progress=progress, checkpoint_seconds=checkpoint_seconds,
                            checkpoint_every=checkpoint_every, raise_errors=raise_errors)
    _platform_soon()
    from .base import resolve_settings
    # the settings validation of ``mbcore validate`` (one code path)
    acls, aname, merged = resolve_settings(model.settings, reg, analysis=analysis,
                                           overrides=settings)
    named = reporters_from_settings(reg, merged.get("reporters"))    # before any work
    system = model.compile(kernels=kernels or merged.get("kernels"), plugins=pm,
                           jacobian=jacobian,
                           dense_limit=None if "MBCORE_DENSE_LIMIT" in os.environ
                           else getattr(acls, "dense_limit", None))
    job = acls(system, {k: v for k, v in merged.items()})

    summary = RunSummary()
    memory = None
    reps: list[Reporter] = [summary]
    checkpointer = None
    if output is None:
        memory = reg.get("reporter", "memory")()
        reps.append(memory)
    else:
        out = Path(output)
        if not out.parent.is_dir():
            raise ModelError("output", f"directory '{out.parent}' does not exist"
                             if not out.parent.exists() else
                             f"'{out.parent}' is not a directory")
        hdf = reg.get("reporter", "hdf5")(out, compression=compression,
                                           append=resume is not None)
        reps.append(hdf)
        if getattr(job, "checkpoints", False):
            from .checkpoint import Checkpointer
            checkpointer = Checkpointer(hdf, checkpoint_seconds, checkpoint_every)
            job.checkpointer = checkpointer
    if resume is not None:
        if checkpointer is None:
            raise ModelError("resume", f"analysis '{aname}' cannot resume (no checkpoints)"
                             if output is not None else "resume needs the output file")
        job.resume_from = resume.as_dict()
    reps.extend(named)
    reps.extend(reporters)

    info = run_info(model, aname, job, system)
    started: list[Reporter] = []
    try:
        for r in reps:
            r.start(info)
            started.append(r)
    except BaseException as exc:
        failing = reps[len(started)]
        for r in started:            # keep what exists consistent: marked failed
            r.finish("failed", f"reporter start failed: {type(exc).__name__}: {exc}", {})
        if output is not None and isinstance(exc, OSError) and failing is hdf:
            # the result file cannot be created (permissions, a directory, no space):
            # bad input, nothing was computed
            why = exc.strerror or str(exc)
            raise ModelError("output", f"cannot create the result file '{output}': "
                                       f"{why}") from exc
        raise

    # the part this run adds to its file: a resume appends after the rows and events
    # the file keeps (cut at the start of the step it redoes, mbcore.analysis.checkpoint)
    first = (0, 0) if output is None else (hdf.n_rows, hdf.n_events)
    # a row reaches every reporter or none (signals held: mbcore.analysis.interrupts)
    record, event, _ = fan_out(reps, guard=interrupts.CRITICAL)

    t0 = time.perf_counter()
    old = interrupts.install()
    error: BaseException | None = None
    try:
        job.run(record, event, progress=progress)
    except (MbcoreError, KeyboardInterrupt) as exc:
        error = exc
    except BaseException as exc:   # unexpected: still keep the results and say why
        error = exc
    finally:
        interrupts.restore(old)
    if error is None:                # never a silent NaN: name it, keep the rows
        error = summary.error()
    stats = dict(job.stats)
    stats["wall_time"] = time.perf_counter() - t0
    interrupted = isinstance(error, KeyboardInterrupt)
    if checkpointer is not None and (error is None or interrupted):
        try:                         # the final state: resume continues from here
            checkpointer.write()
        except Exception as exc:     # keep the rows; say why there is no checkpoint
            stats["checkpoint_error"] = f"{type(exc).__name__}: {exc}"
    if error is None:
        status, reason = "finished", ""
        error = _finish_all(reps, status, reason, stats, False)
        if error is not None:           # the run succeeded, its file could not be closed
            status, reason = "failed", f"{type(error).__name__}: {error}"
            if raise_errors:
                raise error
    else:
        status = "interrupted" if interrupted else "failed"
        reason = _interrupted_reason(error, summary) if interrupted else \
            f"{type(error).__name__}: {error}"
        _finish_all(reps, status, reason, stats, interrupted)
        if raise_errors or not isinstance(error, Exception):
            raise error
    if memory is not None:
        result = memory.result()
    else:                            # the file, read lazily: no copy of the rows
        from ..results.result import run_result
        result = run_result(output, info, status, reason, stats, first_row=first[0],
                            first_event=first[1])
    result.system = system
    return result


def resume(path: str | os.PathLike, t_end: float | None = None, *, model: Any = None,
           progress: bool = False, checkpoint_seconds: float | None = None,
           checkpoint_every: float | None = None, raise_errors: bool = True):
    """Continue the dynamic run of result file ``path`` from its last checkpoint up to
    ``t_end`` (default: the file's ``t_end``); the rows are appended to the file.
    ``model`` (a :class:`mbcore.Model`), if given, must be the file's model.
    Returns the result of the resumed part, read from the file (from the start of
    the step redone: rows up to the checkpoint may be recorded again,
    :mod:`mbcore.analysis.checkpoint`)."""
    from .checkpoint import prepare_resume
    m, settings, ck = prepare_resume(path, t_end, model=model)
    return run(m, analysis="dynamic", settings=settings, output=path, resume=ck,
               progress=progress, checkpoint_seconds=checkpoint_seconds,
               checkpoint_every=checkpoint_every, raise_errors=raise_errors)


_resume_file = resume       # run()'s parameter ``resume`` shadows the function there


def run_info(model, aname: str, job, system) -> RunInfo:
    """The :class:`RunInfo` reporters start with: channels (each column's unit
    in the model's unit system, :func:`mbcore.elements.units.column_units`),
    model text, settings, versions, the System's names and the model's units
    (also :class:`mbcore.Simulation`'s records)."""
    text, fmt = model.to_text()
    channels, us = job.channels(), model.unit_system
    for c in channels:                  # each column's unit in the model's units
        if c.units is None and not c.unit:
            c.set_units(column_units(c.name, c.labels, us))
    return RunInfo(analysis=aname, channels=channels, model_text=text,
                   model_format=fmt, model_name=model.name,
                   settings={"analysis": aname, **job.settings,
                             "kernels": system.backend},
                   versions=versions(),
                   metadata={"bodies": system.body_names,
                             "coordinates": system.coordinate_names,
                             "constraints": system.constraint_names,
                             "points": system.point_names,
                             "source": model.source_path or "",
                             "units": {k: us.unit(k) for k in BASE}},
                   expected_rows=int(job.expected_rows()))


def _interrupted_reason(error: BaseException, summary: Any) -> str:
    """``interrupted after t = <last row> (SIGTERM)`` (``SIGINT / Ctrl-C`` for a
    plain KeyboardInterrupt)."""
    t = getattr(summary, "last_t", None)
    at = "" if t is None else f" after t = {t:.9g}"
    return f"interrupted{at} ({str(error) or 'SIGINT / Ctrl-C'})"


def _finish_all(reps: Sequence[Reporter], status: str, reason: str, stats: dict,
                interrupted: bool) -> BaseException | None:
    """``finish`` every reporter ("interrupted" only to those that know it, Reporter
    rule 3), even when one of them fails (e.g. the disk is full): the first error
    is returned (the run's own error, if any, stays the one raised)."""
    first = None
    for r in reps:
        st = status if status != "interrupted" or getattr(r, "interrupted_status", False) \
            else "failed"
        try:
            r.finish(st, reason, stats)
        except Exception as exc:
            first = first or exc
    return first
