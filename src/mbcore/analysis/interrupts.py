"""Ctrl-C and SIGTERM during a run (docs/reliability.md "Fault injection").

A run turns SIGTERM into a :class:`Terminated` exception (a ``KeyboardInterrupt``)
and SIGINT into ``KeyboardInterrupt``, so the result file is closed as
``interrupted`` with a final checkpoint.  Recording a row and offering its state to
the checkpointer is one :data:`CRITICAL` section: a signal arriving inside it is
held until the section ends, so the file never holds a row without its checkpoint
state, nor a half-written row.  Only the main thread's sections defer (signal
handlers run there)."""
from __future__ import annotations

import contextlib
import signal
import threading

__all__ = ["Terminated", "CRITICAL", "install", "restore"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt."""


class _Critical:
    """``with CRITICAL:`` holds SIGINT / SIGTERM until the block ends."""

    __slots__ = ("depth", "pending", "main")

    def __init__(self) -> None:
        self.depth = 0
        self.pending: BaseException | None = None
        self.main = threading.main_thread().ident

    def __enter__(self) -> None:
        if threading.get_ident() == self.main:
            self.depth += 1

    def __exit__(self, exc_type, exc, tb) -> None:
        if threading.get_ident() != self.main:
            return
        self.depth -= 1
        if self.depth == 0 and self.pending is not None:
            pending, self.pending = self.pending, None
            if exc_type is None:
                raise pending


CRITICAL = _Critical()


def _handler(signum, frame):
    exc = Terminated("SIGTERM") if signum == signal.SIGTERM else KeyboardInterrupt()
    if CRITICAL.depth > 0:
        if CRITICAL.pending is None:
            CRITICAL.pending = exc
        return
    raise exc


def install() -> tuple | None:
    """Install the run's handlers (main thread only; SIGINT only where Python's
    default handler is in place).  Returns what :func:`restore` needs."""
    try:
        old_term = signal.signal(signal.SIGTERM, _handler)
    except (ValueError, AttributeError):   # not the main thread / no signals
        return None
    old_int = None
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        old_int = signal.signal(signal.SIGINT, _handler)
    CRITICAL.depth, CRITICAL.pending = 0, None
    return old_term, old_int


def restore(old: tuple | None) -> None:
    """Put back the handlers :func:`install` replaced."""
    if old is None:
        return
    old_term, old_int = old
    with contextlib.suppress(ValueError):        # not the main thread (any more)
        signal.signal(signal.SIGTERM, old_term)
        if old_int is not None:
            signal.signal(signal.SIGINT, old_int)
