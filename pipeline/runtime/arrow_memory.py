"""Arrow's allocator in bertprep's processes: the system allocator, not mimalloc.

Arrow allocates through mimalloc by default, which maps its memory as fresh transparent huge
pages; the kernel zeroes each 2 MB page at first touch, and mimalloc hands idle memory back, so
the next Parquet batch pays again. Measured on the development VM (`benchmarks/RESULTS.md`,
sixth stop): the zeroing took 31% of all samples in the first second of the tokenize stage, and
``bertprep run`` at 100 MB spent ~1 core-second less in the kernel and ~0.5 s less wall time with
the system allocator (three alternating pairs). What Arrow reads and writes is the same.

Arrow picks its allocator once, when pyarrow is imported (Beam imports it), from
``ARROW_DEFAULT_MEMORY_POOL``; the command line therefore sets it first thing, and the worker
processes it starts inherit it. A value the user set is kept.
"""

from __future__ import annotations

import os

ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
DEFAULT_POOL = "system"


def prefer_system_allocator() -> None:
    """Sets ``ARROW_DEFAULT_MEMORY_POOL=system`` for this process and its children unless it is
    set already. Arrow reads it once, when pyarrow is imported: in a process that imported it
    before, only its children are affected."""
    os.environ.setdefault(ARROW_POOL_ENV, DEFAULT_POOL)
