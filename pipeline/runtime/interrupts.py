"""Ctrl-C that cannot be lost.

Python turns SIGINT into a ``KeyboardInterrupt`` raised wherever the main thread happens to be.
When that is a finalizer (a ``__del__`` run by the garbage collector, a weakref callback), the
interpreter prints "Exception ignored in ..." and carries on: the interrupt is gone and the job
runs to the end (seen: a ``regex`` object's ``__del__`` during the clean stage, exit 0). The latch
records every SIGINT as well as raising it, and a job checks it at its commit points
(``raise_if_interrupted``), so an interrupt swallowed on the way still stops the job before it
commits anything.
"""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType

_interrupted = threading.Event()


def _record_and_raise(signum: int, frame: FrameType | None) -> None:
    _interrupted.set()
    raise KeyboardInterrupt


class InterruptLatch:
    """Context manager for the launcher's main thread: while inside, SIGINT is recorded and
    raised as ``KeyboardInterrupt``, and a swallowed one is not printed ("Exception ignored ...",
    with its traceback: the job's one-line message says it); on exit the previous handlers are
    back and the record cleared. A no-op outside the main thread, or when SIGINT is not handled
    the default way (ignored, or someone else's handler)."""

    def __enter__(self) -> InterruptLatch:
        self._previous = None
        _interrupted.clear()
        main = threading.current_thread() is threading.main_thread()
        if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, _record_and_raise)
            self._unraisable = sys.unraisablehook
            sys.unraisablehook = self._drop_recorded_interrupt
        return self

    def _drop_recorded_interrupt(self, unraisable) -> None:
        if not (_interrupted.is_set() and isinstance(unraisable.exc_value, KeyboardInterrupt)):
            self._unraisable(unraisable)

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            sys.unraisablehook = self._unraisable
        _interrupted.clear()


def raise_if_interrupted() -> None:
    """Raises ``KeyboardInterrupt`` if SIGINT arrived inside the latch, even if the exception it
    raised then was swallowed. Called before a stage commits its output."""
    if _interrupted.is_set():
        raise KeyboardInterrupt("interrupted (SIGINT arrived where it could not be raised)")
