"""Failures that explain themselves: what ended a command, said in one line.

- ``running_stage(names, directories)``: ``bertprep run`` records the stage(s) it is running, so
  that the line can name them (``current_stage()``);
- ``classify(error, thread_errors)``: pure. Walks the exception with its ``__cause__`` and
  ``__context__`` (Beam re-raises a DoFn's error as a ``RuntimeError`` whose message carries
  the original's text, in multi-process mode with nothing else) and says whether the command was
  interrupted (Ctrl-C, SIGINT), found a disk full (ENOSPC, EDQUOT: where it surfaces, as an
  errno or as text) or lost a Beam worker process (its exit status, from the exception the
  runner's thread raised when the worker ended). Anything else is None: it keeps its traceback;
- ``describe(failure, stage)``: the line (``pipeline.cli.main`` prefixes ``bertprep COMMAND:``);
- ``RunnerNoise``: in the launcher, while a command runs, records the exceptions of threads
  (Beam's runner threads raise the worker's exit status there) and, when holding, keeps the
  local runner's error log records and those tracebacks off stderr: dropped when the failure is
  explained in one line, written out as before otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

INTERRUPTED = "interrupted"
DISK_FULL = "disk_full"
WORKER_DIED = "worker_died"

EXIT_INTERRUPTED = 130
"""Exit status of an interrupted command (128 + SIGINT, as a shell reports Ctrl-C)."""
EXIT_FAILED = 1

_FULL_ERRNOS = tuple(e for e in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if e is not None)
_FULL_TEXT = re.compile(
    r"(?:\[errno (?P<errno>\d+)\] )?(?P<reason>"
    + "|".join(re.escape(os.strerror(e)) for e in _FULL_ERRNOS)
    + r")(?:: '(?P<path>[^']+)')?",
    re.IGNORECASE,
)
_WORKER_EXIT = re.compile(r"Worker subprocess exited with return code (-?\d+)")
_WORKER_GONE = ("Channel closed prematurely", "Worker subprocess exited with return code")


@dataclass(frozen=True)
class Stage:
    """The stage(s) a command is running and their output directories."""

    names: tuple[str, ...]
    directories: tuple[str, ...]

    def __str__(self) -> str:
        return ("stage " if len(self.names) == 1 else "stages ") + ", ".join(self.names)


_current: Stage | None = None


@contextlib.contextmanager
def running_stage(names: Sequence[str], directories: Sequence[str]) -> Iterator[None]:
    """Inside the block, ``current_stage()`` is these stages. A normal exit restores the
    previous value; an exception leaves it set, so that the line printed once the exception has
    unwound can name the stage it came from (``reset_stage()`` clears it)."""
    global _current
    previous = _current
    _current = Stage(tuple(names), tuple(directories))
    yield
    _current = previous


def current_stage() -> Stage | None:
    """The stage running now, or the one an exception left; None outside stages."""
    return _current


def reset_stage() -> None:
    """Forgets the stage (a command starts with none)."""
    global _current
    _current = None


@dataclass(frozen=True)
class Failure:
    """What ended a command: ``kind`` (INTERRUPTED, DISK_FULL, WORKER_DIED), ``path`` (the file
    a full disk refused, when known), ``exit_status`` (a dead worker's, when known: negative for
    a signal, as ``subprocess`` reports it)."""

    kind: str
    path: str | None = None
    reason: str | None = None
    exit_status: int | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_INTERRUPTED if self.kind == INTERRUPTED else EXIT_FAILED


def exception_chain(error: BaseException | None) -> list[BaseException]:
    """``error``, then its causes and contexts, breadth first, each once."""
    found: list[BaseException] = []
    queue = [error]
    while queue:
        e = queue.pop(0)
        if e is None or any(e is f for f in found):
            continue
        found.append(e)
        queue += [e.__cause__, e.__context__]
    return found


def _text(e: BaseException) -> str:
    try:
        return str(e)
    except Exception:  # a broken __str__ must not hide the failure
        return ""


def _disk_full(chain: Iterable[BaseException]) -> Failure | None:
    """The first full-disk error of ``chain`` (errno, else text), with the path it names."""
    chain = list(chain)
    for e in chain:
        if isinstance(e, OSError) and e.errno in _FULL_ERRNOS:
            path = e.filename if isinstance(e.filename, str) else None
            return Failure(DISK_FULL, path, os.strerror(e.errno))
    for e in chain:  # a traceback as text: the original error, then the one naming the file
        matches = list(_FULL_TEXT.finditer(_text(e)))
        if matches:
            named = [m for m in matches if m.group("path")] or matches
            return Failure(DISK_FULL, named[0].group("path"), named[0].group("reason"))
    return None


def _worker_exit(errors: Iterable[BaseException]) -> int | None:
    for e in errors:
        match = _WORKER_EXIT.search(_text(e))
        if match:
            return int(match.group(1))
    return None


def _is_interrupt_status(status: int | None) -> bool:
    return status in (-signal.SIGINT, 128 + signal.SIGINT)


def classify(error: BaseException, thread_errors: Sequence[BaseException] = ()) -> Failure | None:
    """What ``error`` (raised by a command; ``thread_errors``: what other threads of the
    launcher raised meanwhile) says happened, or None when it is none of the failures known here.

    In this order: an interrupt (a ``KeyboardInterrupt`` anywhere in the chain, also as Beam's
    ``KeyboardInterrupt [while running ...]`` text, or a worker ended by SIGINT: Ctrl-C reaches
    the workers too); a full disk; a worker that died (Beam's ``Channel closed prematurely`` or
    ``Worker subprocess exited with return code N``)."""
    chain = exception_chain(error)
    threads = [e for t in thread_errors for e in exception_chain(t)]
    status = _worker_exit(chain) or _worker_exit(threads)
    if any(
        isinstance(e, KeyboardInterrupt) or _text(e).startswith("KeyboardInterrupt") for e in chain
    ):
        return Failure(INTERRUPTED)
    full = _disk_full(chain) or _disk_full(threads)
    if full:
        return full
    if any(gone in _text(e) for e in chain for gone in _WORKER_GONE):
        if _is_interrupt_status(status):
            return Failure(INTERRUPTED, exit_status=status)
        return Failure(WORKER_DIED, exit_status=status)
    return None


def describe_exit_status(status: int | None) -> str:
    """``killed by signal 9, SIGKILL``, ``exit status 3`` or ``exit status unknown`` (a
    status above 128 is a shell's report of a signal)."""
    if status is None:
        return "exit status unknown"
    number = -status if status < 0 else status - 128 if status > 128 else None
    if number is not None:
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "unknown signal"
        killed = f"killed by signal {number}, {name}"
        return killed if status < 0 else f"exit status {status}: {killed}"
    return f"exit status {status}"


def _common_directory(paths: Sequence[str]) -> str:
    """The longest common ``/``-separated prefix of ``paths`` (local or ``gs://``...)."""
    parts = [p.rstrip("/").split("/") for p in paths]
    common = []
    for column in zip(*parts, strict=False):
        if len(set(column)) != 1:
            break
        common.append(column[0])
    return "/".join(common) or "/"


def describe(failure: Failure, stage: Stage | None, output: str | None = None) -> str:
    """The one line that ends the command (without the ``bertprep COMMAND:`` prefix).

    With a ``stage`` (``bertprep run``), the line names it and says that a rerun resumes there;
    a full disk without a path in the error names the stage's directory, else ``output``."""
    during = f" during {stage}" if stage else ""
    rerun = (
        "rerun to resume, finished stages are kept" if stage else "rerun the command to start over"
    )
    if failure.kind == INTERRUPTED:
        return f"interrupted{during}; {rerun}"
    if failure.kind == WORKER_DIED:
        status = describe_exit_status(failure.exit_status)
        return f"error: a Beam worker process died{during} ({status}); {rerun}"
    path = failure.path
    where = f"writing {path}"
    if path is None:
        directory = _common_directory(stage.directories) if stage else output
        where = f"writing under {directory}" if directory else "writing the output"
    reason = (failure.reason or "disk full").lower()
    return f"error: {reason} ({where}){during}; free space and {rerun}"


class WorkerLostError(RuntimeError):
    """A Beam worker process died and the runner kept waiting for it (raised in the main
    thread by ``RunnerNoise``)."""


class RunnerNoise(logging.Filter):
    """A context manager around a command in the launcher (see the module doc).

    ``thread_errors``: every exception a thread raised inside the block. With ``hold`` the
    local runner's log records (loggers under ``HELD_LOGGERS``) and the thread tracebacks are
    kept back (at most ``limit`` records): ``drop()`` discards them, and on leaving the block
    anything not dropped is written as it would have been.

    A worker that dies between two bundles can leave Beam's runner waiting for it forever (its
    data stream never reports the closed connection). So when a worker's thread reports an
    abnormal exit and the pipeline it belonged to (``local_runner.running_pipeline``) is still
    running ``grace_s`` seconds later, the main thread gets SIGUSR1 and raises
    ``WorkerLostError`` with the worker's exit status (only when the block runs in the main
    thread)."""

    HELD_LOGGERS = (
        "apache_beam.runners.common",
        "apache_beam.runners.direct",
        "apache_beam.runners.portability",
        "apache_beam.runners.worker",
    )

    def __init__(self, hold: bool, limit: int = 1000, grace_s: float = 10.0) -> None:
        super().__init__()
        self.hold = hold
        self.limit = limit
        self.grace_s = grace_s
        self._active = False
        self._lost: int | None = None
        self._timers: list[threading.Timer] = []
        self._usr1 = None
        self.thread_errors: list[BaseException] = []
        self._records: list[logging.LogRecord] = []
        self._seen: set[int] = set()
        self._threads: list = []
        self._hook = threading.excepthook
        self._handlers: list[logging.Handler] = []
        self._dropped = False

    def __enter__(self) -> RunnerNoise:
        self._hook = threading.excepthook
        threading.excepthook = self._on_thread_error
        self._active = True
        if threading.current_thread() is threading.main_thread():
            self._usr1 = signal.signal(signal.SIGUSR1, self._raise_lost)
        if self.hold:
            self._handlers = list(logging.getLogger().handlers)
            for handler in self._handlers:
                handler.addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        self._stop()
        if not self._dropped:
            for record in self._records:
                for handler in logging.getLogger().handlers:
                    if record.levelno >= handler.level:
                        handler.handle(record)
            for args in self._threads:
                self._hook(args)
        self._records, self._threads = [], []

    def drop(self) -> None:
        """Discards what was held (the failure has been said in one line)."""
        self._dropped = True

    WORKER_WAIT_S = 2.0
    """After a failure was said in one line (``drop``), how long to wait at most for the
    threads that report a worker's exit, so that their reports are held, not printed after it."""

    def _stop(self) -> None:
        self._active = False
        if self._dropped:
            self._await_worker_threads()
        for timer in self._timers:
            timer.cancel()
        if self._usr1 is not None:
            signal.signal(signal.SIGUSR1, self._usr1)
            self._usr1 = None
        if threading.excepthook == self._on_thread_error:
            threading.excepthook = self._hook
        for handler in self._handlers:
            handler.removeFilter(self)
        self._handlers = []

    def _await_worker_threads(self) -> None:
        """Waits (``WORKER_WAIT_S`` in all, at most) for the runner's worker threads: after
        Ctrl-C the workers got the same SIGINT and their threads report an exit status 130 a
        moment after the launcher has said so; with the hook restored that report would be
        printed as a traceback under the one-line message."""
        from pipeline.runtime.local_runner import WORKER_THREAD

        deadline = time.monotonic() + self.WORKER_WAIT_S
        for thread in threading.enumerate():
            if thread.name == WORKER_THREAD and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def _on_thread_error(self, args) -> None:
        if args.exc_value is not None:
            self.thread_errors.append(args.exc_value)
            status = _worker_exit([args.exc_value])
            if status and not _is_interrupt_status(status) and self._usr1 is not None:
                from pipeline.runtime.local_runner import running_pipeline

                timer = threading.Timer(self.grace_s, self._unstick, (status, running_pipeline()))
                timer.daemon = True
                self._timers.append(timer)
                timer.start()
        if self.hold:
            self._threads.append(args)
        else:
            self._hook(args)

    def _unstick(self, status: int, pipeline: int | None) -> None:
        from pipeline.runtime.local_runner import running_pipeline

        if self._active and pipeline is not None and running_pipeline() == pipeline:
            self._lost = status
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    def _raise_lost(self, number, frame) -> None:
        if self._lost is not None:
            raise WorkerLostError(
                f"Worker subprocess exited with return code {self._lost}; the runner kept "
                f"waiting for it for {self.grace_s:g} s"
            )

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.HELD_LOGGERS):
            return True
        if id(record) not in self._seen and len(self._records) < self.limit:
            self._seen.add(id(record))
            self._records.append(record)
        return False
