"""Handing back the page cache of local files the job is done with.

A shard, once written and verified, is not read again by the job. Left in the page cache, its
pages stay charged to memory, and every new write takes a fresh page instead of reusing one.
On virtual machines whose idle guest memory goes back to the host (free page reporting), a fresh
page costs a fault into the host: measured on the development VM, writing 1 GB of new files costs
~3.2 s of system time from fresh pages and ~0.3 s from pages freed a moment before
(`benchmarks/RESULTS.md`, 2026-12-05 third stop). Dropping finished pages lets the next write
reuse them while they are warm.

``posix_fadvise(DONTNEED)`` is advice: dirty pages are not dropped, only queued for writeback
(without waiting), and dropped by a later call once written. Nothing here changes what a file
holds or waits for the disk; on a remote path, or where the call is missing, it does nothing.
Whole files only: the kernel caches a file in folios of up to 2 MB and drops only those wholly
inside an advised range, so the few hundred KB that a shard reads from each spill would free
nothing.
"""

from __future__ import annotations

import contextlib
import os

from apache_beam.io.filesystems import FileSystems

_DONTNEED = getattr(os, "POSIX_FADV_DONTNEED", None)


def is_local(path: str) -> bool:
    """Whether ``path`` is a local file (no scheme, or ``file://``), whose cache the kernel keeps."""
    return FileSystems.get_scheme(path) in (None, "file")


def release_pages(path: str, start: int = 0, length: int = 0) -> None:
    """Advises the kernel that bytes ``start .. start + length`` of ``path`` (``length`` 0: to the
    end) will not be read again: clean cached pages are dropped, dirty ones queued for writeback.
    Best effort: a missing file, a remote path or a platform without the call is ignored."""
    if _DONTNEED is None or not is_local(path):
        return
    local = path[len("file://") :] if path.startswith("file://") else path
    with contextlib.suppress(OSError):
        fd = os.open(local, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, start, length, _DONTNEED)
        finally:
            os.close(fd)


class FinishedFiles:
    """Files a worker has written and will not read again, handed back to the kernel in two
    steps: ``add`` queues the new file's pages for writeback and drops those of the files added
    before (written back by then, so droppable); ``flush`` drops every file still held. The pages
    freed are the next write's, still warm."""

    def __init__(self) -> None:
        self._pending: list[str] = []

    def add(self, path: str) -> None:
        for earlier in self._pending:
            release_pages(earlier)
        self._pending = [path]
        release_pages(path)

    def flush(self) -> None:
        for earlier in self._pending:
            release_pages(earlier)
        self._pending = []
