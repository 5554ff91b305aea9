"""Coalescing task spill files into group files laid out shard by shard, so that a shard writer
makes one ranged read per group instead of one per task.

A task's spill file holds one residue block per shard (``transforms.shard_layout``); a shard
writer reads one block from every task: shards × tasks ranged reads, which on an object store are
shards × tasks × a few requests. Once every task has counted its records, their global offsets
are known, and consecutive tasks (in sorted task order, about ``target_bytes`` of records each)
are merged into one group file in which shard ``i``'s blocks of all the group's tasks lie side by
side. Shard writers then read shards × groups ranges. Records, their order and so the shard bytes
are exactly those written without groups.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import commit, temporary_name
from pipeline.files.spills import GroupSpill, TaskSpill, spill_schema, task_offsets

DEFAULT_GROUP_BYTES = 256 << 20
"""Records per group file: large enough that groups are few, small enough to spread over
workers. A group is merged through worker-local disk, one task in memory at a time."""


def group_tasks(spills: list[TaskSpill], target_bytes: int) -> list[list[TaskSpill]]:
    """Consecutive tasks in sorted order, cut when a group reaches ``target_bytes`` of spill."""
    groups: list[list[TaskSpill]] = []
    current: list[TaskSpill] = []
    size = 0
    for spill in sorted(spills, key=lambda s: s.task):
        current.append(spill)
        size += int(spill.bounds[-1])
        if size >= target_bytes:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    return groups


def _read_all(path: str) -> bytes:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        return f.read()


class MergeSpillGroupFn(beam.DoFn):
    """(group index, [(TaskSpill, global offset)]) → GroupSpill: reads each task's spill file
    once, sorts its blocks into one worker-local file per shard, then writes the group file
    (temporary name, then commit; a retry writes the same bytes)."""

    def __init__(self, spill_dir: str, num_shards: int) -> None:
        self._spill_dir = spill_dir
        self._num_shards = num_shards

    def process(self, element: tuple[int, list[tuple[TaskSpill, int]]]):
        index, members = element
        num_shards = self._num_shards
        lengths = np.zeros((num_shards, len(members)), dtype=np.int64)
        local = tempfile.mkdtemp(prefix="bertprep-group-")
        try:
            parts = [os.path.join(local, f"shard-{i:05d}") for i in range(num_shards)]
            for column, (spill, offset) in enumerate(members):
                data = _read_all(spill.path)
                if len(data) != int(spill.bounds[-1]):
                    raise RuntimeError(f"spill file {spill.path} is shorter than recorded")
                for r in range(num_shards):
                    start, end = int(spill.bounds[r]), int(spill.bounds[r + 1])
                    if end == start:
                        continue
                    shard = (offset + r) % num_shards
                    with open(parts[shard], "ab") as f:
                        f.write(data[start:end])
                    lengths[shard, column] = end - start
                del data
            path = FileSystems.join(self._spill_dir, f"group-{index:06d}.spill")
            temp = temporary_name(path)
            with FileSystems.create(temp, compression_type=CompressionTypes.UNCOMPRESSED) as out:
                for part in parts:
                    if os.path.exists(part):
                        with open(part, "rb") as f:
                            shutil.copyfileobj(f, out, 8 << 20)
            commit(temp, path)
        finally:
            shutil.rmtree(local, ignore_errors=True)
        yield GroupSpill(
            index,
            path,
            tuple(spill.task for spill, _ in members),
            tuple(spill.count for spill, _ in members),
            lengths,
            spill_schema(spill for spill, _ in members),
        )


class CoalesceSpills(beam.PTransform):
    """PCollection[TaskSpill] → PCollection[GroupSpill] (see the module docstring)."""

    def __init__(self, spill_dir: str, num_shards: int, target_bytes: int | None = None) -> None:
        super().__init__()
        self._fn = MergeSpillGroupFn(spill_dir, num_shards)
        self._target_bytes = target_bytes or DEFAULT_GROUP_BYTES

    def expand(self, spills):
        target = self._target_bytes

        def groups(all_spills: list[TaskSpill]):
            offsets = task_offsets({s.task: s.count for s in all_spills})
            for index, group in enumerate(group_tasks(all_spills, target)):
                yield index, [(s, offsets[s.task]) for s in group]

        return (
            spills
            | "AllTaskSpills" >> beam.combiners.ToList()
            | "GroupTasks" >> beam.FlatMap(groups)
            | "SpreadGroups" >> beam.Reshuffle()
            | "MergeGroups" >> beam.ParDo(self._fn)
        )
