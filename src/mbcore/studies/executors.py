"""Where the cases of a study run: in this process, on local processes, on Dask.

Each executor is a generator of the records of :func:`mbcore.studies.case.run_case`
in completion order; an exception of the executor itself (a worker process that
died, a lost Dask worker) becomes a failed record of that case.  Closing the
generator early (an error, Ctrl-C) cancels the cases not started.
"""
from __future__ import annotations

import multiprocessing
import os
from typing import Any, Iterator, Mapping, Sequence

from .case import run_case, warm_up

__all__ = ["run_serial", "run_processes", "run_dask", "default_workers"]


def default_workers() -> int:
    """Local worker processes by default: the CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):     # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _lost(task: Mapping[str, Any], exc: BaseException) -> dict[str, Any]:
    """The record of a case whose worker failed (not the case's own error)."""
    return {"case": int(task["case"]), "status": "failed", "key": task["key"],
            "error": f"worker failed: {type(exc).__name__}: {exc}", "metrics": {},
            "column_error": "", "wall_time": float("nan")}


def run_serial(tasks: Sequence[Mapping[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every case in this process, one after the other (``workers=0``)."""
    for task in tasks:
        yield run_case(task)


def _context():
    """The start method of the worker processes: ``fork`` (fast: the workers inherit
    the imported modules) when this process runs no other thread, else a method safe
    with threads (a Dask client, a progress bar's monitor): the fork server where
    there is one, else spawn."""
    import threading
    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


def run_processes(tasks: Sequence[Mapping[str, Any]], workers: int) -> Iterator[dict[str, Any]]:
    """The cases on a :class:`~concurrent.futures.ProcessPoolExecutor` of ``workers``
    local processes, started (and the cases submitted) here, before the caller starts
    any thread of its own."""
    from concurrent.futures import ProcessPoolExecutor
    pool = ProcessPoolExecutor(max_workers=max(1, min(workers, len(tasks))),
                               mp_context=_context(), initializer=warm_up)
    try:
        futures = {pool.submit(run_case, task): task for task in tasks}
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    return _collect(pool, futures)


def _collect(pool, futures) -> Iterator[dict[str, Any]]:
    from concurrent.futures import as_completed
    try:
        for fut in as_completed(futures):
            try:
                yield fut.result()
            except Exception as exc:        # BrokenProcessPool: a worker died
                yield _lost(futures[fut], exc)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


#: seconds to wait for a Dask scheduler before the sweep stops with an error
#: (``$MBCORE_DASK_CONNECT_TIMEOUT`` overrides; Dask's own default is 30 s)
CONNECT_TIMEOUT = 5.0


def _connect(client_cls, scheduler: str | None):
    """A client of the scheduler at ``scheduler``, or a :class:`ModelError` naming the
    address when none answers within :data:`CONNECT_TIMEOUT` seconds."""
    import os
    from ..errors import ModelError
    timeout = float(os.environ.get("MBCORE_DASK_CONNECT_TIMEOUT") or CONNECT_TIMEOUT)
    try:
        return client_cls(scheduler, timeout=timeout)
    except (OSError, TimeoutError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelError("scheduler", f"no Dask scheduler answered at {scheduler!r} within "
                                      f"{timeout:g} s ({reason}); start one "
                                      f"('dask scheduler') or check the address") from None


def run_dask(tasks: Sequence[Mapping[str, Any]], client=None,
             scheduler: str | None = None) -> Iterator[dict[str, Any]]:
    """The cases on a ``dask.distributed`` cluster: ``client`` (a
    :class:`distributed.Client`, left open) or a new client of the scheduler at
    ``scheduler`` (closed at the end).  The workers write the case files themselves:
    the study's directory must be on a filesystem they share with this process."""
    try:
        from distributed import Client, as_completed
    except ImportError:                     # pragma: no cover - dask not installed
        from ..errors import ModelError
        raise ModelError("scheduler", "dask.distributed is not installed "
                                      "(pip install 'mbcore[sweep]')") from None
    own = client is None
    if own:
        client = _connect(Client, scheduler)
    futures = {}
    try:
        import uuid
        token = uuid.uuid4().hex[:8]
        futures = {client.submit(run_case, task, pure=False,
                                 key=f"mbcore-case-{int(task['case'])}-{token}"): task
                   for task in tasks}
        for fut in as_completed(list(futures)):
            try:
                yield fut.result()
            except Exception as exc:        # a lost worker, a killed task
                yield _lost(futures[fut], exc)
    finally:
        pending = [f for f in futures if not f.done()]
        if pending:
            client.cancel(pending)
        if own:
            client.close()
