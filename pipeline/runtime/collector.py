"""The cyclic garbage collector's thresholds in bertprep's processes: collections far apart.

Python collects its youngest generation every 700 net allocations of container objects (lists,
dicts, tuples, functions, classes), the middle one every 10 youngest collections and the oldest
every 10 middle ones (when enough long-lived objects are pending); a collection of the oldest
walks every tracked object. Importing Beam, numpy, pyarrow and numba builds hundreds of
thousands of such objects, so a launcher, the worker zygote and each worker spend part of their
start walking the same live modules, and a stage that makes many small containers (Parquet rows
as dicts, sentence lists) walks them again. bertprep frees almost nothing through cycles: what
it drops, reference counting frees at once. With the thresholds below, measured on the
development VM (`benchmarks/RESULTS.md`, seventh stop; alternating runs): ``bertprep instances``
on 30 MB 5.24 → 5.04 s and 7.35 → 7.09 CPU-s (five pairs), the whole ``bertprep run`` at 100 MB
16.2 → 15.3 s and 25.4 → 24.1 CPU-s (three pairs); peak memory unchanged.

``BERTPREP_GC_THRESHOLDS`` (``"700,10,10"``, Python's own, for example) sets other thresholds;
set but empty, each process keeps the interpreter's own. The value is passed to every process
bertprep starts (the zygote and its forked workers, workers started as new processes through
``worker_site/sitecustomize``), which apply it at their start.
"""

from __future__ import annotations

import gc
import os

GC_THRESHOLDS_ENV = "BERTPREP_GC_THRESHOLDS"
DEFAULT_THRESHOLDS = (100_000, 50, 100)
"""Youngest generation every 100,000 net container allocations (Python: 700), the middle one
every 50 of those (10), the oldest every 100 of the middle one's (10)."""
_LARGEST = 2**31 - 1  # gc.set_threshold takes C ints


def parse_thresholds(value: str) -> tuple[int, ...]:
    """``"a,b,c"`` (one to three integers in [0, 2**31), as ``gc.set_threshold`` takes them) →
    the integers; ValueError naming the variable otherwise."""
    try:
        numbers = tuple(int(part) for part in value.split(","))
    except ValueError:
        numbers = ()
    if not 1 <= len(numbers) <= 3 or min(numbers) < 0 or max(numbers) > _LARGEST:
        raise ValueError(
            f"{GC_THRESHOLDS_ENV}={value!r}: expected one to three integers from 0 to "
            f"{_LARGEST} separated by commas, such as 700,10,10"
        )
    return numbers


def set_collector_thresholds() -> tuple[int, ...]:
    """Sets this process's collector thresholds from ``BERTPREP_GC_THRESHOLDS``, first setting
    that variable to ``DEFAULT_THRESHOLDS`` when it is unset (so the processes this one starts
    inherit the same); returns the thresholds in force. ValueError for a malformed value."""
    os.environ.setdefault(GC_THRESHOLDS_ENV, ",".join(map(str, DEFAULT_THRESHOLDS)))
    return apply_from_environment()


def apply_from_environment() -> tuple[int, ...]:
    """Sets this process's thresholds from ``BERTPREP_GC_THRESHOLDS`` when it is set and not
    empty (a process bertprep started); returns the thresholds in force. ValueError for a
    malformed value, before any threshold is changed."""
    value = os.environ.get(GC_THRESHOLDS_ENV)
    if value:
        gc.set_threshold(*parse_thresholds(value))
    return gc.get_threshold()
