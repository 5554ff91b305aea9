"""Where each record goes: its shard, and where it sits in a task's spill file.

A task (one dupe pass over one bucket) makes ``n`` records, numbered ``j = 0..n-1`` in creation
order. With the task's global offset ``o`` (records of all earlier tasks, in sorted task order),
record ``j`` belongs to shard ``(o + j) % S``: shard sizes then differ by at most one.

Offsets are known only once every task has counted its records, so a task writes its records
grouped by residue ``j % S`` — a layout that depends on ``j`` and ``S`` alone. Whatever the task's
offset turns out to be, the records of one shard form one contiguous residue block, which the
shard writer reads with a single ranged read.

Spill format, per residue block in order: ``c`` little-endian int64 shuffle keys, then the ``c``
TFRecord-framed records.
"""

from __future__ import annotations

import numpy as np


def residue_count(n: int, num_shards: int, residue: int) -> int:
    """How many of ``j = 0..n-1`` satisfy ``j % num_shards == residue``."""
    return n // num_shards + (1 if residue < n % num_shards else 0)


def residue_for_shard(shard: int, task_offset: int, num_shards: int) -> int:
    """The residue block of a task (at ``task_offset``) whose records belong to ``shard``."""
    return (shard - task_offset) % num_shards


def spill_layout(
    framed_records: list[bytes], keys: np.ndarray, num_shards: int
) -> tuple[bytes, np.ndarray]:
    """The spill bytes of a task and the byte offset of each residue block (``num_shards + 1``).

    ``framed_records[j]`` is record ``j`` already framed; ``keys[j]`` its int64 shuffle key.
    """
    n = len(framed_records)
    keys = np.asarray(keys, dtype="<i8")
    parts: list[bytes] = []
    bounds = np.zeros(num_shards + 1, dtype=np.int64)
    position = 0
    for r in range(num_shards):
        members = range(r, n, num_shards)
        block_keys = keys[r::num_shards].tobytes()
        block = b"".join([block_keys] + [framed_records[j] for j in members])
        parts.append(block)
        position += len(block)
        bounds[r + 1] = position
    return b"".join(parts), bounds


KEY_LIMIT = 2**63
"""Shuffle keys lie in [0, KEY_LIMIT)."""


def key_ranges(num_ranges: int) -> list[tuple[int, int]]:
    """``num_ranges`` consecutive [low, high) ranges covering every shuffle key."""
    bounds = [KEY_LIMIT * i // num_ranges for i in range(num_ranges + 1)]
    return list(zip(bounds[:-1], bounds[1:], strict=True))
