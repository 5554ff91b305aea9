"""glibc's heap in bertprep's worker processes: large blocks kept for reuse, not unmapped.

By default glibc serves a block above its mmap threshold (128 KB at start, rising with the
blocks freed, at most 32 MB) with a mapping of its own and unmaps it when freed, and hands the
free top of its heap back to the kernel past 128 KB. The instance phases allocate and free arrays
of several MB for every task and shard (spill reads, pass files, ordered records), so each new
one is fresh zero pages that the kernel faults in, and on a virtual machine whose idle memory
goes back to the host (free page reporting) each fault reaches the host. With a fixed threshold
of 32 MB and the heap trimmed only past 256 MB, such blocks are reused warm instead. Measured on
the development VM (`benchmarks/RESULTS.md`, tenth stop): the phases at 400 MB took ~920k → ~650k
page faults and ~2 fewer core-seconds of system time.

glibc reads these settings once, when a process starts, from ``MALLOC_MMAP_THRESHOLD_`` and
``MALLOC_TRIM_THRESHOLD_``: the command line sets them first thing, for the zygote and the
workers it starts (the launcher itself keeps glibc's defaults). Both are set, or neither: a
trim threshold alone fixes the mmap threshold at 128 KB, and every block above it is mapped
anew (measured: 7.5 M page faults). A value the user set for either is kept, and then neither is
set here. What a process computes and writes is the same either way.
"""

from __future__ import annotations

import os

MMAP_THRESHOLD_ENV = "MALLOC_MMAP_THRESHOLD_"
TRIM_THRESHOLD_ENV = "MALLOC_TRIM_THRESHOLD_"
MMAP_THRESHOLD_BYTES = 32 << 20
"""Blocks from this size up get a mapping of their own (glibc's largest dynamic threshold)."""
TRIM_THRESHOLD_BYTES = 256 << 20
"""Free bytes at the top of the heap above which glibc hands them back to the kernel."""


def keep_large_blocks() -> None:
    """Sets both thresholds for the processes this one starts, unless the user set either."""
    if MMAP_THRESHOLD_ENV in os.environ or TRIM_THRESHOLD_ENV in os.environ:
        return
    os.environ[MMAP_THRESHOLD_ENV] = str(MMAP_THRESHOLD_BYTES)
    os.environ[TRIM_THRESHOLD_ENV] = str(TRIM_THRESHOLD_BYTES)
