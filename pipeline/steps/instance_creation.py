"""Buckets of documents → sentence-pair instances, spilled to files one dupe pass at a time.

Documents go to ``ceil(n / bucket_size)`` buckets by a stable hash of (seed, document key); a
random B comes from another document of the same bucket, so a worker holds one bucket, never the
corpus. Each dupe pass over a bucket is a task whose records go straight to a spill file laid out
by ``transforms.shard_layout``; only small ``TaskSpill`` descriptions travel through Beam, so no
runner has to hold the records in memory.
"""

from __future__ import annotations

import functools
import math
import pickle
from collections.abc import Mapping

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import write_bytes_atomically
from pipeline.files.direct_io import BackgroundWrites
from pipeline.files.spills import TaskSpill
from pipeline.runtime.counters import STATS_TAG, CountingDoFn
from pipeline.runtime.per_job import PerJobFn
from pipeline.runtime.progress import ProgressReporter
from pipeline.steps.tokenize_documents import RefTable, load_layout
from transforms.compact_columns import CompactRecords, compact_columns
from transforms.framed_examples import residue_spill
from transforms.instance_batches import InstanceSettings, TokenTables, record_batches
from transforms.seeding import stable_hasher


def bucket_count(num_documents: int, bucket_size: int) -> int:
    """Number of buckets for ``num_documents`` documents of about ``bucket_size`` each (≥ 1)."""
    return max(1, math.ceil(num_documents / bucket_size))


def bucket_of(seed: int, key: str, num_buckets: int) -> int:
    """The bucket of the document with ``key``: a stable hash, independent of the worker."""
    return stable_hasher(seed, "bucket")(key) % num_buckets


def bucket_slices(table: RefTable, seed: int, num_buckets: int) -> list[tuple[int, RefTable]]:
    """``table`` cut by bucket (``bucket_of`` each key): (bucket, its documents of ``table``, in
    table order) for every bucket it touches, by increasing bucket."""
    buckets = np.array([bucket_of(seed, k, num_buckets) for k in table.keys], dtype=np.int64)
    out = []
    for bucket in np.unique(buckets).tolist():
        rows = np.flatnonzero(buckets == bucket)
        out.append(
            (
                bucket,
                RefTable(
                    table.paths,
                    tuple(table.keys[i] for i in rows.tolist()),
                    table.path_index[rows],
                    table.offsets[rows],
                    table.sizes[rows],
                    table.num_sentences[rows],
                ),
            )
        )
    return out


class ExpandDupePassesFn(CountingDoFn):
    """(bucket, RefTables) → ((bucket, dupe), path of the bucket's refs file, weight) for every
    dupe pass: the bucket's references, sorted by key, are written once (``bucket-NNNNNN.refs``)
    and passes are independent tasks that carry only the path, so they spread over workers. The
    weight (bytes of the bucket's token data × ``weight_per_byte``, the job's expected slots
    per token) says how much work a pass is (``LargestFirst``)."""

    def __init__(self, dupe_factor: int, spill_dir: str, weight_per_byte: float = 1.0) -> None:
        self._dupe_factor = dupe_factor
        self._spill_dir = spill_dir
        self._weight_per_byte = weight_per_byte

    def process(self, element: tuple[int, list[RefTable]]):
        bucket, tables = element
        ordered = RefTable.concat_sorted(list(tables))
        self.stats["buckets"] += 1
        if len(ordered) == 1:
            self.stats["single_document_buckets"] += 1
        path = FileSystems.join(self._spill_dir, f"bucket-{bucket:06d}.refs")
        write_bytes_atomically(path, pickle.dumps(ordered, protocol=5))
        weight = int(ordered.sizes.sum() * self._weight_per_byte)
        for dupe in range(self._dupe_factor):
            yield (bucket, dupe), path, weight


class BucketSlicesFn(CountingDoFn):
    """A token index file → (bucket, RefTable of that file's documents in the bucket) per bucket
    it touches, and the tokenize counts of its documents. The bucket count is fixed up front
    (from the index files' row counts), so documents are assigned where they are read."""

    def __init__(self, seed: int, num_buckets: int) -> None:
        self._seed = seed
        self._num_buckets = num_buckets

    def process(self, index_path: str):
        from pipeline.files.token_files import TokenIndex

        index = TokenIndex.read(index_path)
        n = len(index.keys)
        self.stats["documents"] += n
        self.stats["tokenized_documents"] += n
        self.stats["tokenized_sentences"] += int(index.num_sentences.sum())
        self.stats["tokens"] += int(index.tokens.sum())
        self.stats["one_sentence_documents"] += int((index.num_sentences == 1).sum())
        table = RefTable(
            (index.data_path,),
            tuple(index.keys),
            np.zeros(n, dtype=np.int32),
            index.offsets,
            index.sizes,
            index.num_sentences.astype(np.int64),
        )
        yield from bucket_slices(table, self._seed, self._num_buckets)


class CreateInstancesFn(CountingDoFn):
    """((bucket, dupe), refs path, weight) → TaskSpill: the pass's records as compact rows
    (``transforms.compact_columns``: the shard writer frames them), written to ``spill_dir``."""

    def __init__(
        self,
        settings: InstanceSettings,
        tables: TokenTables,
        spill_dir: str,
        num_shards: int,
        progress: ProgressReporter | None = None,
    ) -> None:
        self.settings = settings
        self._tables = tables
        self.spill_dir = spill_dir
        self._num_shards = num_shards
        self.progress = progress

    def start_bundle(self) -> None:
        super().start_bundle()
        self._writes = BackgroundWrites()

    def finish_bundle(self):
        self._writes.wait()
        return super().finish_bundle()

    def process(self, element: tuple[tuple[int, int], str, int]):
        (bucket, dupe), refs_path, _ = element
        with FileSystems.open(refs_path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            refs: RefTable = pickle.loads(f.read())
        layout = load_layout(refs)
        rows: list[CompactRecords] = []
        keys: list[int] = []
        for batch in record_batches(
            layout, bucket, dupe, self.settings, self._tables, self.stats, compact_columns
        ):
            rows.append(batch.framed)
            keys.extend(batch.order_keys)
        schemas = {batch.schema for batch in rows}
        if len(schemas) > 1:
            raise RuntimeError(f"task ({bucket}, {dupe}): its batches have different layouts")
        schema = schemas.pop() if schemas else None
        data, bounds = residue_spill(rows, np.asarray(keys, dtype=np.int64), self._num_shards)
        del rows
        path = FileSystems.join(self.spill_dir, f"task-{bucket:06d}-{dupe:04d}.spill")
        # Written by a thread while the next task is created; done before the bundle ends.
        self._writes.submit(functools.partial(write_bytes_atomically, path, data, direct=True))
        del data
        if self.progress is not None:
            self.progress.add(len(refs))
        yield TaskSpill(bucket, dupe, len(keys), path, bounds, schema)


class AssignBuckets(beam.PTransform):
    """PCollection[RefTable] → (bucket, RefTable of a table's documents in that bucket), the
    bucket count following from the number of documents (counted first)."""

    def __init__(self, seed: int, bucket_size: int) -> None:
        super().__init__()
        self._seed = seed
        self._bucket_size = bucket_size

    def expand(self, tables):
        seed, size = self._seed, self._bucket_size
        num_documents = (
            tables
            | "DocumentsPerTable" >> beam.Map(len)
            | "CountDocuments" >> beam.CombineGlobally(sum)
        )
        return tables | "AssignBucket" >> beam.FlatMap(
            lambda table, n: bucket_slices(table, seed, bucket_count(n, size)),
            n=beam.pvalue.AsSingleton(num_documents),
        )


def largest_first(tasks: list[tuple[int, tuple[tuple[int, int], str, int]]]) -> list:
    """``(job, task)`` pairs by decreasing weight (ties by job and task, so the order is fixed)."""
    return sorted(tasks, key=lambda t: (-t[1][2], t[0], t[1][0]))


class LargestFirst(beam.PTransform):
    """PCollection[(job, task)] → the same tasks, spread over workers, largest first.

    Beam's local runner gives each worker one bundle per stage, dealing the elements round
    robin in the order they reach it; dealt by decreasing weight, the workers' shares differ
    by about one task instead of by the luck of the draw (the idle tail of the stage). Other
    runners rebalance on their own; for them this is a reshuffle with one small step before.
    """

    def expand(self, tasks):
        return (
            tasks
            | "AllTasks" >> beam.combiners.ToList()
            | "ByWeight" >> beam.FlatMap(largest_first)
            | "Spread" >> beam.Reshuffle()
        )


class CreateInstances(beam.PTransform):
    """PCollection[((job, bucket), RefTable)] → outputs ``spills`` ((job, TaskSpill)) and
    ``stats`` ((job, counts)): the dupe passes of each job's buckets, each run by that job's
    ``CreateInstancesFn`` (``creates[job]``). All jobs share each stage (``PerJobFn``), so the
    workers take their tasks from one pool, largest first (a pass weighs its bucket's token bytes ×
    ``pass_weights[job]``, the job's expected token slots per input token,
    ``pipeline.jobs.instances.slots_per_token``; every job reads token files of one layout, so
    bytes stand for tokens alike)."""

    def __init__(
        self,
        creates: Mapping[int, CreateInstancesFn],
        labels: Mapping[int, str],
        pass_weights: Mapping[int, float] | None = None,
    ) -> None:
        super().__init__()
        weights = pass_weights or {}
        expands = {
            job: ExpandDupePassesFn(fn.settings.dupe_factor, fn.spill_dir, weights.get(job, 1.0))
            for job, fn in creates.items()
        }
        self._expand = PerJobFn(expands, labels)
        self._create = PerJobFn(creates, labels)

    def expand(self, slices):
        grouped = (
            slices
            | "GroupBuckets" >> beam.GroupByKey()
            | "JobOfBucket" >> beam.Map(lambda kv: (kv[0][0], (kv[0][1], kv[1])))
        )
        tasks = grouped | "ExpandDupePasses" >> beam.ParDo(self._expand).with_outputs(
            STATS_TAG, main="tasks"
        )
        spilled = (
            tasks.tasks
            | "SpreadTasks" >> LargestFirst()
            | "CreateInstances" >> beam.ParDo(self._create).with_outputs(STATS_TAG, main="spills")
        )
        stats = (tasks[STATS_TAG], spilled[STATS_TAG]) | "FlattenStats" >> beam.Flatten()
        return {"spills": spilled.spills, "stats": stats}
