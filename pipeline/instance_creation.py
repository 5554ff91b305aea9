"""Buckets of documents → sentence-pair instances, spilled to files one dupe pass at a time.

Documents go to ``ceil(n / bucket_size)`` buckets by a stable hash of (seed, document key); a
random B comes from another document of the same bucket, so a worker holds one bucket, never the
corpus. Each dupe pass over a bucket is a task whose records go straight to a spill file laid out
by ``transforms.shard_layout``; only small ``TaskSpill`` descriptions travel through Beam, so no
runner has to hold the records in memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline.counting import CountingDoFn
from pipeline.stats import STATS_TAG
from pipeline.tokenize_documents import DocumentRef, load_documents
from transforms.instance_batches import InstanceSettings, TokenTables, record_batches
from transforms.instances import BucketLayout
from transforms.seeding import stable_hash64
from transforms.shard_layout import spill_layout
from transforms.tfrecord import frame_record


def bucket_count(num_documents: int, bucket_size: int) -> int:
    """Number of buckets for ``num_documents`` documents of about ``bucket_size`` each (≥ 1)."""
    return max(1, math.ceil(num_documents / bucket_size))


def bucket_of(seed: int, key: str, num_buckets: int) -> int:
    """The bucket of the document with ``key``: a stable hash, independent of the worker."""
    return stable_hash64(seed, "bucket", key) % num_buckets


@dataclass(frozen=True)
class TaskSpill:
    """The spill file of one task (bucket, dupe pass): ``count`` records, and the byte offset of
    each residue block (``num_shards + 1`` values)."""

    bucket: int
    dupe: int
    count: int
    path: str
    bounds: np.ndarray

    @property
    def task(self) -> tuple[int, int]:
        return (self.bucket, self.dupe)


def write_atomically(path: str, data: bytes) -> None:
    """Writes ``data`` to ``path`` through a temporary name, so a reader never sees half a file."""
    temp = path + ".partial"
    with FileSystems.create(temp) as f:
        f.write(data)
    if FileSystems.exists(path):
        FileSystems.delete([path])
    FileSystems.rename([temp], [path])


class ExpandDupePassesFn(CountingDoFn):
    """(bucket, refs) → ((bucket, dupe), refs sorted by key) for every dupe pass: passes are
    independent tasks, and only document references are copied, so they spread over workers."""

    def __init__(self, dupe_factor: int) -> None:
        self._dupe_factor = dupe_factor

    def process(self, element: tuple[int, list[DocumentRef]]):
        bucket, refs = element
        ordered = sorted(refs, key=lambda d: d.key)
        self.stats["buckets"] += 1
        if len(ordered) == 1:
            self.stats["single_document_buckets"] += 1
        for dupe in range(self._dupe_factor):
            yield (bucket, dupe), ordered


class CreateInstancesFn(CountingDoFn):
    """((bucket, dupe), refs) → TaskSpill: the pass's records, written to ``spill_dir``."""

    def __init__(
        self, settings: InstanceSettings, tables: TokenTables, spill_dir: str, num_shards: int
    ) -> None:
        self._settings = settings
        self._tables = tables
        self._spill_dir = spill_dir
        self._num_shards = num_shards

    def process(self, element: tuple[tuple[int, int], list[DocumentRef]]):
        (bucket, dupe), refs = element
        docs = load_documents(refs)
        layout = BucketLayout.from_arrays([(d.ids, d.offsets) for d in docs])
        del docs
        framed: list[bytes] = []
        keys: list[int] = []
        for batch in record_batches(layout, bucket, dupe, self._settings, self._tables, self.stats):
            framed.extend(frame_record(r) for r in batch.records)
            keys.extend(batch.order_keys)
        data, bounds = spill_layout(framed, np.asarray(keys, dtype=np.int64), self._num_shards)
        del framed
        path = FileSystems.join(self._spill_dir, f"task-{bucket:06d}-{dupe:04d}.spill")
        write_atomically(path, data)
        yield TaskSpill(bucket, dupe, len(keys), path, bounds)


class CreateInstances(beam.PTransform):
    """PCollection[DocumentRef] → outputs ``spills`` (TaskSpill) and ``stats``."""

    def __init__(
        self,
        settings: InstanceSettings,
        tables: TokenTables,
        bucket_size: int,
        spill_dir: str,
        num_shards: int,
    ) -> None:
        super().__init__()
        self._expand = ExpandDupePassesFn(settings.dupe_factor)
        self._fn = CreateInstancesFn(settings, tables, spill_dir, num_shards)
        self._seed = settings.seed
        self._bucket_size = bucket_size

    def expand(self, documents):
        seed = self._seed
        size = self._bucket_size
        num_documents = documents | "CountDocuments" >> beam.combiners.Count.Globally()
        created = (
            documents
            | "AssignBucket"
            >> beam.Map(
                lambda d, n: (bucket_of(seed, d.key, bucket_count(n, size)), d),
                n=beam.pvalue.AsSingleton(num_documents),
            )
            | "GroupBuckets" >> beam.GroupByKey()
        )
        tasks = created | "ExpandDupePasses" >> beam.ParDo(self._expand).with_outputs(
            STATS_TAG, main="tasks"
        )
        spilled = (
            tasks.tasks
            | "SpreadTasks" >> beam.Reshuffle()
            | "CreateInstances" >> beam.ParDo(self._fn).with_outputs(STATS_TAG, main="spills")
        )
        stats = (tasks[STATS_TAG], spilled[STATS_TAG]) | "FlattenStats" >> beam.Flatten()
        return {"spills": spilled.spills, "stats": stats}
