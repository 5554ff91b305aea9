"""The spill files of the instance stage, as descriptions that travel through Beam: a task's
spill (one (bucket, dupe pass), its records laid out per shard by ``transforms.shard_layout``), a
group of consecutive tasks' spills merged shard-major, and the global position of each task's
first record. Only these small descriptions cross stage boundaries; the records stay in files.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from transforms.compact_columns import ColumnSchema


@dataclass(frozen=True)
class TaskSpill:
    """The spill file of one task (bucket, dupe pass): ``count`` records, and the byte offset of
    each residue block (``num_shards + 1`` values). Its records are compact rows decoded by
    ``schema`` (``transforms.compact_columns``), or TFRecord frames when ``schema`` is None."""

    bucket: int
    dupe: int
    count: int
    path: str
    bounds: np.ndarray
    schema: ColumnSchema | None = None

    @property
    def task(self) -> tuple[int, int]:
        return (self.bucket, self.dupe)


@dataclass(frozen=True)
class GroupSpill:
    """The records of consecutive tasks, shard-major: for each shard, every task's block for it,
    in task order. ``lengths[i, t]`` is the byte length of task ``t``'s block for shard ``i``."""

    index: int
    path: str
    tasks: tuple[tuple[int, int], ...]
    counts: tuple[int, ...]
    lengths: np.ndarray
    schema: ColumnSchema | None = None
    """How its tasks' records decode (``TaskSpill.schema``)."""

    @property
    def count(self) -> int:
        """Records in the group file."""
        return sum(self.counts)

    @functools.cached_property
    def _shard_starts(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.lengths.sum(axis=1))])

    def shard_range(self, shard: int) -> tuple[int, int]:
        """Byte range of shard ``shard``'s blocks in the group file."""
        return int(self._shard_starts[shard]), int(self._shard_starts[shard + 1])


def task_offsets(task_counts: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Global position of each task's first record: prefix sums over tasks in sorted order."""
    offsets: dict[tuple[int, int], int] = {}
    total = 0
    for task in sorted(task_counts):
        offsets[task] = total
        total += task_counts[task]
    return offsets


def spill_schema(spills) -> ColumnSchema | None:
    """The one schema of ``spills``' records (None: TFRecord frames, or no spill holds a
    record); ValueError when their spills disagree."""
    schemas = {s.schema for s in spills if s.count and s.schema is not None}
    framed = any(s.count and s.schema is None for s in spills)
    if len(schemas) + framed > 1:
        raise ValueError("the spill files of one job hold records of different layouts")
    return schemas.pop() if schemas else None
