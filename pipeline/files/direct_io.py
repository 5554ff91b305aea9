"""Large local files written and read around the page cache (``O_DIRECT``), the device's wait
overlapped with the caller's work.

The instance phases write every record twice: once to a spill file, once to its shard. Through
the page cache each write takes fresh cache pages; on a virtual machine whose idle memory goes
back to the host (free page reporting), a fresh page costs a fault into the host. Measured on the
development VM (`benchmarks/RESULTS.md`, sixth stop): 900 MB written to a new file through the
page cache cost 2.8 s of system time; written with ``O_DIRECT``, 0.6 s of wall time and 0.1 s of
system time. The job reads a spill once and a shard not at all, so the cache buys nothing there.

Bytes go through reused, page-aligned staging buffers (the device needs aligned addresses,
lengths and offsets); the last piece of a file is padded to the alignment and the file then cut
to its length. A writer hands each full buffer to its own thread and fills the other meanwhile;
ranged reads run on a few threads at once. Where a file system refuses ``O_DIRECT`` (at the
open, or the device at the first write or read of a file), or a path is not local, files are
written and read the ordinary way: the bytes are the same either way.
"""

from __future__ import annotations

import concurrent.futures
import errno
import fcntl
import mmap
import os
import threading
from collections.abc import Callable

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

ALIGN = 4096
"""Alignment of addresses, lengths and offsets for ``O_DIRECT`` (the largest logical block size
of common devices)."""
STAGING_BYTES = 8 << 20
"""Bytes per device write or read; a writer holds two staging buffers, a reading thread one."""
READ_THREADS = 4
"""Ranged reads in flight at once (the device serves several faster than one after another)."""

_O_DIRECT = getattr(os, "O_DIRECT", 0)
_pool: list[mmap.mmap] = []
_pool_lock = threading.Lock()
_executors: dict[str, concurrent.futures.ThreadPoolExecutor] = {}
_background_lock = threading.Lock()
_background: list[concurrent.futures.Future] = []
"""This process's last background write (``BackgroundWrites``), if any."""


def _after_fork_in_child() -> None:
    """A forked child starts with its own locks, an empty pool, no threads and no background
    write (the parent's buffers, threads and writes are the parent's)."""
    global _pool_lock, _background_lock
    _pool_lock = threading.Lock()
    _background_lock = threading.Lock()
    _pool.clear()
    _executors.clear()
    _background.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _take() -> mmap.mmap:
    """A page-aligned buffer of ``STAGING_BYTES`` from the process's pool (its pages stay mapped
    and warm from one file to the next); give it back with ``_give``."""
    with _pool_lock:
        if _pool:
            return _pool.pop()
    return mmap.mmap(-1, STAGING_BYTES, flags=mmap.MAP_PRIVATE)


def _give(buffer: mmap.mmap) -> None:
    with _pool_lock:
        _pool.append(buffer)


def _executor(name: str, threads: int) -> concurrent.futures.ThreadPoolExecutor:
    """This process's pool ``name`` (a forked child starts without any)."""
    with _pool_lock:
        if name not in _executors:
            _executors[name] = concurrent.futures.ThreadPoolExecutor(
                threads, thread_name_prefix=f"bertprep-{name}"
            )
        return _executors[name]


def _local(path: str) -> str | None:
    """The local file name of ``path`` (no scheme, or ``file://``), else None."""
    scheme = FileSystems.get_scheme(path)
    if scheme is None:
        return path
    if scheme == "file":
        return path[len("file://") :]
    return None


def _open_direct(local: str, flags: int) -> int:
    """A descriptor of ``local`` opened with ``O_DIRECT``, or -1 where the file system refuses it."""
    if not _O_DIRECT:
        return -1
    try:
        return os.open(local, flags | os.O_CLOEXEC | _O_DIRECT, 0o644)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
        return -1


class DirectWriter:
    """A new local binary file written with ``O_DIRECT``. ``write`` copies any contiguous buffer
    into a staging buffer; a full one is written by the writer's thread while the next fills.
    ``close`` writes the padded last piece, waits, and cuts the file to the bytes written. An
    error of the thread is raised by the ``write`` that next fills a buffer, or else by
    ``close``. One writer per file, used from one thread."""

    def __init__(self, fd: int) -> None:
        first = _take()
        try:
            second = _take()
        except BaseException:
            _give(first)
            raise
        self._fd = fd
        self._buffers = [first, second]
        self._views = [memoryview(b) for b in self._buffers]
        self._current = 0
        self._filled = 0
        self._length = 0
        self._direct = True
        self._pending: concurrent.futures.Future | None = None
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="bertprep-write")

    def write(self, data) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            n = min(len(view), STAGING_BYTES - self._filled)
            self._views[self._current][self._filled : self._filled + n] = view[:n]
            self._filled += n
            view = view[n:]
            if self._filled == STAGING_BYTES:
                self._hand_over(STAGING_BYTES)
        return total

    def _hand_over(self, size: int) -> None:
        """Queues ``size`` bytes (a multiple of ``ALIGN``) of the current buffer for the thread,
        after the previous piece is written, and goes on filling the other buffer."""
        if self._pending is not None:
            self._pending.result()
        self._pending = self._thread.submit(self._write_out, self._views[self._current], size)
        self._length += self._filled
        self._filled = 0
        self._current = 1 - self._current

    def _write_out(self, view: memoryview, size: int) -> None:
        written = 0
        while written < size:
            try:
                written += os.write(self._fd, view[written:size])
            except OSError as e:
                if not self._direct or e.errno != errno.EINVAL:
                    raise
                # The device refuses the alignment: the rest of this file goes through the cache.
                flags = fcntl.fcntl(self._fd, fcntl.F_GETFL)
                fcntl.fcntl(self._fd, fcntl.F_SETFL, flags & ~_O_DIRECT)
                self._direct = False

    def close(self) -> None:
        if self._fd < 0:
            return
        try:
            tail = self._filled
            if tail:
                padded = -(-tail // ALIGN) * ALIGN
                self._views[self._current][tail:padded] = bytes(padded - tail)
                self._hand_over(padded)  # counts the ``tail`` bytes filled, not the padding
            if self._pending is not None:
                self._pending.result()
            os.ftruncate(self._fd, self._length)
        finally:
            self._thread.shutdown(wait=True)
            os.close(self._fd)
            self._fd = -1
            for view, buffer in zip(self._views, self._buffers, strict=True):
                view.release()
                _give(buffer)

    def __enter__(self) -> DirectWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def create(path: str):
    """A new binary file for writing: a ``DirectWriter`` for a local file on a file system that
    takes ``O_DIRECT``, else Beam's ordinary writer (same bytes)."""
    local = _local(path)
    if local is not None:
        os.makedirs(os.path.dirname(local) or ".", exist_ok=True)  # as Beam's local create does
        fd = _open_direct(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        if fd >= 0:
            try:
                return DirectWriter(fd)
            except BaseException:
                os.close(fd)
                raise
    return FileSystems.create(path, compression_type=CompressionTypes.UNCOMPRESSED)


class BackgroundWrites:
    """Whole-file writes run on one thread of this process while the caller goes on with its
    next piece of work. One background write runs at a time in a process, whoever submitted it
    (the jobs sharing a stage each have their own ``BackgroundWrites``): ``submit`` first waits
    for the process's previous one, so at most one buffer waits beyond the callers' own.
    ``wait`` returns when this object's writes are done and raises the first error."""

    def __init__(self) -> None:
        self._futures: list[concurrent.futures.Future] = []

    def submit(self, write: Callable[[], None]) -> None:
        with _background_lock:
            concurrent.futures.wait(_background)  # an error is its submitter's to raise
            future = _executor("background", 1).submit(write)
            _background[:] = [future]
        self._futures.append(future)

    def wait(self) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            future.result()


def read_ranges_ahead(ranges: list[tuple[str, int, int]]) -> concurrent.futures.Future:
    """``read_ranges_into(ranges)`` started on a thread of this process; its future's ``result``
    is the array (or raises what the read raised)."""
    return _executor("ahead", 1).submit(read_ranges_into, ranges)


def read_ranges_into(ranges: list[tuple[str, int, int]]) -> np.ndarray:
    """The bytes of every (path, start, end) range, in order, in one new uint8 array. Local files
    are read with ``O_DIRECT`` in aligned pieces through staging buffers, ``READ_THREADS`` ranges
    at a time; others through Beam. Raises when a file is shorter than a range says."""
    out = np.empty(sum(end - start for _, start, end in ranges), dtype=np.uint8)
    view = memoryview(out)
    jobs, position = [], 0
    for path, start, end in ranges:
        jobs.append((path, start, end, view[position : position + end - start]))
        position += end - start
    if len(jobs) == 1:
        _read_range(*jobs[0])
    else:
        for _ in _executor("read", READ_THREADS).map(lambda job: _read_range(*job), jobs):
            pass
    return out


def _read_range(path: str, start: int, end: int, into: memoryview) -> None:
    local = _local(path)
    fd = _open_direct(local, os.O_RDONLY) if local is not None else -1
    if fd >= 0:
        try:
            if _read_direct(fd, path, start, end, into):
                return
        finally:
            os.close(fd)
    # No O_DIRECT here (refused at open, or by the device at the first read): the ordinary way.
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        f.seek(start)
        position = 0
        while position < end - start:
            got = f.readinto(into[position:])
            if not got:
                raise RuntimeError(f"{path} is shorter than recorded ({start}..{end})")
            position += got


def _read_direct(fd: int, path: str, start: int, end: int, into: memoryview) -> bool:
    """Reads ``start .. end`` of ``fd`` into ``into`` in aligned pieces; False when the device
    refuses the alignment (EINVAL) at the first piece, so nothing was read."""
    stage = _take()
    staged = memoryview(stage)
    try:
        offset = start - start % ALIGN
        first = True
        while offset < end:
            want = min(STAGING_BYTES, -(-(end - offset) // ALIGN) * ALIGN)
            try:
                got = os.preadv(fd, [staged[:want]], offset)
            except OSError as e:
                if first and e.errno == errno.EINVAL:
                    return False
                raise
            first = False
            high = min(end, offset + want)
            if offset + got < high:
                raise RuntimeError(f"{path} is shorter than recorded ({start}..{end})")
            low = max(start, offset)
            into[low - start : high - start] = staged[low - offset : high - offset]
            offset += want
        return True
    finally:
        staged.release()
        _give(stage)
