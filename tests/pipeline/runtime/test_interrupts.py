"""The interrupt latch: a SIGINT that Python swallows (raised inside a finalizer) still stops the
job at its next commit point, and is not printed as an ignored exception."""

from __future__ import annotations

import gc
import os
import signal
import sys
import time

import pytest

from pipeline.runtime.interrupts import InterruptLatch, raise_if_interrupted

pytestmark = pytest.mark.usefixtures("python_sigint")


class _InterruptsInItsFinalizer:
    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the handler runs here, inside __del__
            sum(range(100))


def _swallow_an_interrupt() -> None:
    obj = _InterruptsInItsFinalizer()
    del obj  # KeyboardInterrupt raised in __del__: "Exception ignored", the code goes on
    gc.collect()


@pytest.fixture
def unraisable(monkeypatch) -> list[BaseException]:
    """What reaches ``sys.unraisablehook`` (Python prints it as "Exception ignored in ...")."""
    seen: list[BaseException] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_value))
    return seen


def test_an_interrupt_swallowed_by_a_finalizer_is_raised_at_the_commit_point(unraisable):
    hook = sys.unraisablehook
    with InterruptLatch():
        _swallow_an_interrupt()  # nothing raised here: Python dropped it
        with pytest.raises(KeyboardInterrupt):
            raise_if_interrupted()
    assert unraisable == []  # not printed
    raise_if_interrupted()  # cleared on exit
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sys.unraisablehook is hook


def test_without_the_latch_python_drops_it(unraisable):
    """The behaviour the latch exists for (if Python ever raises it, the latch is moot)."""
    _swallow_an_interrupt()
    assert [type(e) for e in unraisable] == [KeyboardInterrupt]
    raise_if_interrupted()


def test_an_interrupt_raises_at_once_inside_the_latch():
    with InterruptLatch(), pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(5)


def test_other_unraisable_exceptions_are_still_printed(unraisable):
    class Fails:
        def __del__(self) -> None:
            raise ValueError("a finalizer's own error")

    with InterruptLatch():
        obj = Fails()
        del obj
        gc.collect()
    assert [str(e) for e in unraisable] == ["a finalizer's own error"]
