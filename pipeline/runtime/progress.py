"""Live progress of a running Beam job, through small files the workers write.

The DirectRunner runs a pipeline to the end inside ``run()``, and in ``multi_processing`` mode the
DoFns run in other processes, so Beam's metrics are not visible until the job is over. Instead:

- worker side, ``ProgressReporter``: a DoFn adds what it consumed (bytes, documents) and, at most
  every ``interval`` seconds and at the end of each bundle, atomically rewrites one 8-byte file
  of its own (``<dir>/<pid>-<random>.progress``: its running total, little-endian int64);
- launcher side, ``ProgressMonitor``: a thread sums those files about once a second and shows
  ``label: done of total unit (pct), rate, ETA`` (the rate between the first and the latest
  change seen) — one line rewritten in place (``\\r``) on a
  terminal, a plain line every ``log_every`` seconds otherwise (a log).

With remote storage (``gs://``...) the files go to the local temporary directory, which the
DirectRunner's workers share with the launcher; on a runner whose workers cannot see the
launcher's disk the monitor sees nothing. A retried bundle may count
twice: the figures are a guide, never a result (the manifests carry the exact counts).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import TextIO

PROGRESS_NAMESPACE = "bertprep.progress"
"""Beam counter namespace of the reporters' totals (read by the monitor through the runner)."""
SUFFIX = ".progress"
PROGRESS_DIR = ".progress"
_RECORD = struct.Struct("<q")


def progress_dir(output: str) -> str:
    """The progress directory of a stage writing to ``output``: beside the output on a local
    disk; for remote storage (``gs://``...) a directory under the machine's temporary directory
    named after the output, which the DirectRunner's workers share with the launcher (on a
    distributed runner the workers' files stay on their machines and the monitor sees none)."""
    if "://" in output and not output.startswith("file://"):
        digest = hashlib.sha256(output.encode("utf-8")).hexdigest()[:16]
        return os.path.join(tempfile.gettempdir(), f"bertprep-progress-{digest}")
    return os.path.join(output.removeprefix("file://"), PROGRESS_DIR)


class ProgressReporter:
    """Worker side: ``add(n)`` as work is consumed, ``flush()`` at the end of a bundle.

    Picklable (holds the directory only); each unpickled copy writes its own file. With
    ``directory=None`` every call is a no-op."""

    def __init__(self, directory: str | None, interval: float = 0.5) -> None:
        self._directory = directory
        self._interval = interval
        self._total = 0
        self._written_at = 0.0
        self._path: str | None = None

    def __getstate__(self) -> dict:
        return {"_directory": self._directory, "_interval": self._interval}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["_directory"], state["_interval"])

    def add(self, amount: int) -> None:
        _consumed().inc(amount)  # for runners whose workers are elsewhere (see follow())
        if self._directory is None:
            return
        self._total += amount
        if time.monotonic() - self._written_at >= self._interval:
            self.flush()

    def flush(self) -> None:
        """Writes the running total now (atomically: a reader sees the old or the new value)."""
        if self._directory is None or not self._total:
            return
        if self._path is None:
            os.makedirs(self._directory, exist_ok=True)
            self._path = os.path.join(
                self._directory, f"{os.getpid()}-{uuid.uuid4().hex[:12]}{SUFFIX}"
            )
        temporary = f"{self._path}.tmp"
        try:
            with open(temporary, "wb") as f:
                f.write(_RECORD.pack(self._total))
            os.replace(temporary, self._path)
        except OSError:  # the monitor removed the directory: the job is over
            pass
        self._written_at = time.monotonic()


@functools.cache
def _consumed():
    """The reporters' Beam counter, made once per process (``add`` is on the read path)."""
    from apache_beam.metrics import Metrics

    return Metrics.counter(PROGRESS_NAMESPACE, "consumed")


def read_progress(directory: str) -> int:
    """The sum of every reporter's latest total under ``directory`` (0 when there is none)."""
    total = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        if not name.endswith(SUFFIX):
            continue
        try:
            with open(os.path.join(directory, name), "rb") as f:
                data = f.read(_RECORD.size)
        except OSError:
            continue
        if len(data) == _RECORD.size:
            total += _RECORD.unpack(data)[0]
    return total


def _amount(value: float, unit: str) -> str:
    if unit == "bytes":
        for scale, name in ((1 << 30, "GB"), (1 << 20, "MB"), (1 << 10, "kB")):
            if value >= scale:
                return f"{value / scale:.1f} {name}"
        return f"{value:.0f} B"
    return f"{value:,.0f}"


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _rate(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{_amount(value, unit)}/s"
    return f"{value:,.1f} {unit}/s" if value < 10 else f"{value:,.0f} {unit}/s"


def format_progress(label: str, done: int, total: int | None, unit: str, rate: float | None) -> str:
    """``clean: 1.2 MB of 3.4 MB read (35%), 0.5 MB/s, ETA 0:00:04`` (bytes) or ``tokenize: 120
    of 500 documents (24%), 40 documents/s, ETA 0:00:10``. Without a total: no share and no ETA;
    without a rate (``None`` or 0): neither rate nor ETA; once the total is reached: ``finishing``
    instead of an ETA (the stage's later steps still run)."""
    noun = "" if unit == "bytes" else f" {unit}"
    verb = " read" if unit == "bytes" else ""
    text = f"{label}: {_amount(done, unit)}"
    if total:
        text += f" of {_amount(total, unit)}{noun}{verb} ({min(done / total, 1.0):.0%})"
    else:
        text += f"{noun}{verb}"
    if rate:
        text += f", {_rate(rate, unit)}"
    if total and done >= total:
        text += ", finishing"
    elif total and rate:
        text += f", ETA {_duration((total - done) / rate)}"
    return text


class ProgressMonitor:
    """Launcher side, a context manager around the pipeline's run: polls ``directory`` every
    ``poll`` seconds in a thread. On a terminal (``stream.isatty()``) it rewrites one line with
    ``\\r`` and erases it on exit; otherwise it calls ``log(line)`` every ``log_every`` seconds
    while the count moves. ``observed`` holds every distinct total seen (for tests and callers);
    the directory is removed on exit. With ``directory=None`` it does nothing."""

    def __init__(
        self,
        directory: str | None,
        label: str,
        total: int | None,
        unit: str,
        log: Callable[[str], None] | None = None,
        stream: TextIO | None = None,
        poll: float = 1.0,
        log_every: float = 30.0,
    ) -> None:
        self.directory = directory
        self.label = label
        self.total = total
        self.unit = unit
        self.observed: list[int] = []
        self._stream = stream if stream is not None else sys.stderr
        self._log = log or (lambda line: print(line, file=self._stream, flush=True))
        self._poll = poll
        self._log_every = log_every
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
        self._first: tuple[float, int] | None = None
        self._last: tuple[float, int] | None = None
        self._result = None
        self._metrics = (0.0, 0)  # (when last queried, value)
        self.metrics_every = 10.0
        """Seconds between queries of the runner's counters (each is a service call)."""

    def follow(self, result) -> None:
        """Also reads the reporters' Beam counters from ``result`` while the job runs: for
        runners whose ``run()`` returns before the end (Dataflow) and whose workers' progress
        files stay on their machines. With the DirectRunner the job is over by then: no-op."""
        from apache_beam.runners.runner import PipelineState

        try:
            if PipelineState.is_terminal(result.state):
                return
        except Exception:  # a result without a state
            return
        self._result = result

    def _from_metrics(self) -> int:
        when, value = self._metrics
        if self._result is None or time.monotonic() - when < self.metrics_every:
            return value
        from apache_beam.metrics.metric import MetricsFilter

        try:
            found = self._result.metrics().query(MetricsFilter().with_namespace(PROGRESS_NAMESPACE))
            value = sum(int(c.attempted or 0) for c in found["counters"])
        except Exception:  # a runner without live metrics: the files are all there is
            pass
        self._metrics = (time.monotonic(), value)
        return value

    def __enter__(self) -> ProgressMonitor:
        if self.directory is None:
            return self
        shutil.rmtree(self.directory, ignore_errors=True)
        os.makedirs(self.directory, exist_ok=True)
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._watch, name="bertprep-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._sample()
        if self._tty and self._width:
            self._stream.write("\r" + " " * self._width + "\r")
            self._stream.flush()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _sample(self) -> int:
        done = max(read_progress(self.directory), self._from_metrics())
        if done and (not self.observed or self.observed[-1] != done):
            self.observed.append(done)
            now = time.monotonic()
            if self._first is None:
                self._first = (now, done)
            self._last = (now, done)
        return done

    def rate(self) -> float | None:
        """Units per second between the first and the latest change seen (so neither the
        runner's start-up nor the stage's later steps count)."""
        if self._first is None or self._last is None or self._last[0] <= self._first[0]:
            return None
        return (self._last[1] - self._first[1]) / (self._last[0] - self._first[0])

    def _watch(self) -> None:
        logged_at, logged = self._started, 0
        while not self._stop.wait(self._poll):
            done = self._sample()
            if not done:
                continue
            now = time.monotonic()
            line = format_progress(self.label, done, self.total, self.unit, self.rate())
            if self._tty:
                line = line[: shutil.get_terminal_size().columns - 1]
                self._stream.write("\r" + line.ljust(self._width))
                self._stream.flush()
                self._width = max(self._width, len(line))
            elif now - logged_at >= self._log_every and done != logged:
                self._log(line)
                logged_at, logged = now, done
