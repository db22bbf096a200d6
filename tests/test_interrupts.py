"""Signals during a run are held across the recording of a row (mbcore.analysis.interrupts):
the file never holds a row without its checkpoint state (issue 18)."""
import os
import signal
import threading

import pytest

from mbcore.analysis import interrupts
from mbcore.analysis.interrupts import CRITICAL, Terminated


@pytest.fixture
def handlers():
    old = interrupts.install()
    assert old is not None
    yield
    interrupts.restore(old)


@pytest.mark.parametrize("sig, exc", [(signal.SIGTERM, Terminated),
                                      (signal.SIGINT, KeyboardInterrupt)])
def test_a_signal_inside_a_critical_section_is_raised_at_its_end(handlers, sig, exc):
    done = []
    with pytest.raises(exc):
        with CRITICAL:
            os.kill(os.getpid(), sig)
            for _ in range(1000):          # the handler has run by now: held
                pass
            done.append("row")
            with CRITICAL:                 # nested: still held at the inner end
                done.append("offer")
            done.append("end")
    assert done == ["row", "offer", "end"]
    assert CRITICAL.depth == 0 and CRITICAL.pending is None


def test_outside_a_section_the_signal_raises_at_once(handlers):
    with pytest.raises(Terminated, match="SIGTERM"):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10 ** 6):
            pass
        raise AssertionError("not interrupted")


def test_other_threads_do_not_hold_the_main_threads_signals(handlers):
    inside, release = threading.Event(), threading.Event()

    def worker():
        with CRITICAL:
            inside.set()
            release.wait(10)

    th = threading.Thread(target=worker)
    th.start()
    inside.wait(10)
    try:
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(10 ** 6):
                pass
    finally:
        release.set()
        th.join()


def test_handlers_are_restored():
    term, sigint = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    old = interrupts.install()
    assert signal.getsignal(signal.SIGTERM) is not term
    interrupts.restore(old)
    assert signal.getsignal(signal.SIGTERM) is term
    assert signal.getsignal(signal.SIGINT) is sigint
