"""Global shuffle into ``num_shards`` TFRecord files whose record counts differ by at most one.

Every record has a global position: tasks ((bucket, dupe) pairs) in sorted order, records in
creation order within a task. Position ``g`` goes to shard ``g % num_shards``, so shard sizes differ
by at most one; within a shard, records are ordered by a keyed random 63-bit key. Consecutive
instances of one document therefore land in different shards, and each shard mixes all buckets.
Shard files are written under a temporary name and renamed, then read back and counted.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from dataclasses import asdict, dataclass

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.tfrecord import frame_record, iter_records

COMPRESSIONS = {"none": CompressionTypes.UNCOMPRESSED, "gzip": CompressionTypes.GZIP}
SUFFIXES = {"none": ".tfrecord", "gzip": ".tfrecord.gz"}


def shard_name(prefix: str, index: int, num_shards: int, compression: str) -> str:
    """``<prefix>-00003-of-00256.tfrecord[.gz]``."""
    return f"{prefix}-{index:05d}-of-{num_shards:05d}{SUFFIXES[compression]}"


def task_offsets(task_counts: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
    """Global position of each task's first record: prefix sums over tasks in sorted order."""
    offsets: dict[tuple[int, int], int] = {}
    total = 0
    for task in sorted(task_counts):
        offsets[task] = total
        total += task_counts[task]
    return offsets


@dataclass(frozen=True)
class ShardPiece:
    """Framed records bound for one shard, from one batch: one blob plus per-record arrays
    (cheap to pickle, unlike a list of tuples). Record ``i`` is ``blob[ends[i-1]:ends[i]]``."""

    keys: np.ndarray  # int64 shuffle keys
    tasks: np.ndarray  # int64 (bucket << 20 | dupe), tie-break
    indexes: np.ndarray  # int64 index within the task, tie-break
    ends: np.ndarray  # int64 end offset of each framed record in blob
    blob: bytes


class AssignShardsFn(beam.DoFn):
    """(task, first, records, keys) → (shard, ShardPiece) for each shard the batch touches."""

    def __init__(self, num_shards: int) -> None:
        self._num_shards = num_shards
        self._offsets: dict | None = None
        self._counts_id: int | None = None

    def process(self, batch, task_counts: dict):
        if self._counts_id != id(task_counts):
            self._offsets = task_offsets(dict(task_counts))
            self._counts_id = id(task_counts)
        (bucket, dupe), first, records, keys = batch
        start = self._offsets[(bucket, dupe)] + first
        n = len(records)
        shards = (start + np.arange(n)) % self._num_shards
        framed = [frame_record(r) for r in records]
        keys_arr = np.asarray(keys, dtype=np.int64)
        task_id = (bucket << 20) | dupe
        for shard in np.unique(shards).tolist():
            members = np.nonzero(shards == shard)[0]
            parts = [framed[i] for i in members.tolist()]
            yield (
                shard,
                ShardPiece(
                    keys=keys_arr[members],
                    tasks=np.full(len(members), task_id, dtype=np.int64),
                    indexes=(first + members).astype(np.int64),
                    ends=np.cumsum([len(x) for x in parts], dtype=np.int64),
                    blob=b"".join(parts),
                ),
            )


@dataclass(frozen=True)
class ShardResult:
    """What a written shard holds, as read back from the file."""

    index: int
    path: str
    records: int
    content_sha256: str
    """sha256 of the uncompressed TFRecord stream (framing included)."""

    def to_json(self) -> dict:
        return asdict(self)


def order_pieces(pieces: list[ShardPiece]) -> list[memoryview]:
    """The framed records of all pieces, ordered by (key, task, index)."""
    if not pieces:
        return []
    keys = np.concatenate([p.keys for p in pieces])
    tasks = np.concatenate([p.tasks for p in pieces])
    indexes = np.concatenate([p.indexes for p in pieces])
    views = []
    for p in pieces:
        blob = memoryview(p.blob)
        starts = np.concatenate(([0], p.ends[:-1])).tolist()
        views.extend(blob[a:b] for a, b in zip(starts, p.ends.tolist(), strict=True))
    order = np.lexsort((indexes, tasks, keys))
    return [views[i] for i in order.tolist()]


class WriteShardFn(beam.DoFn):
    """(shard, [ShardPiece]) → ShardResult; writes the shard atomically and verifies it."""

    def __init__(self, output_dir: str, prefix: str, num_shards: int, compression: str) -> None:
        self._output_dir = output_dir
        self._prefix = prefix
        self._num_shards = num_shards
        self._compression = compression

    def process(self, element):
        index, pieces = element
        records = order_pieces([p for p in pieces if p is not None])
        name = shard_name(self._prefix, index, self._num_shards, self._compression)
        final = FileSystems.join(self._output_dir, name)
        temp = FileSystems.join(self._output_dir, f".tmp-{uuid.uuid4().hex}-{name}")
        stream = b"".join(records)
        digest = hashlib.sha256(stream).hexdigest()
        ctype = COMPRESSIONS[self._compression]
        with FileSystems.create(temp, compression_type=ctype) as f:
            f.write(stream)
        del stream
        if FileSystems.exists(final):
            FileSystems.delete([final])
        FileSystems.rename([temp], [final])
        with FileSystems.open(final, compression_type=ctype) as f:
            content = f.read()
        found = sum(1 for _ in iter_records(io.BytesIO(content)))
        if found != len(records) or hashlib.sha256(content).hexdigest() != digest:
            raise RuntimeError(
                f"shard {final}: wrote {len(records)} records but read back {found} "
                "(or the content differs); the output is not trustworthy"
            )
        yield ShardResult(index, final, found, digest).to_json()


class WriteShards(beam.PTransform):
    """PCollection of record batches → PCollection of ShardResult dicts (one per shard, empty
    shards included)."""

    def __init__(self, output_dir: str, prefix: str, num_shards: int, compression: str) -> None:
        super().__init__()
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {sorted(COMPRESSIONS)}")
        self._output_dir = output_dir
        self._prefix = prefix
        self._num_shards = num_shards
        self._compression = compression

    def expand(self, batches):
        counts = (
            batches
            | "TaskSizes" >> beam.Map(lambda b: (b[0], len(b[2])))
            | "SumTaskSizes" >> beam.CombinePerKey(sum)
        )
        assigned = batches | "AssignShards" >> beam.ParDo(
            AssignShardsFn(self._num_shards), task_counts=beam.pvalue.AsDict(counts)
        )
        every_shard = batches.pipeline | "ShardIds" >> beam.Create(
            [(i, None) for i in range(self._num_shards)]
        )
        return (
            (assigned, every_shard)
            | "AllShards" >> beam.Flatten()
            | "GroupShards" >> beam.GroupByKey()
            | "WriteShard"
            >> beam.ParDo(
                WriteShardFn(self._output_dir, self._prefix, self._num_shards, self._compression)
            )
        )
