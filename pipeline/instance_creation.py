"""Buckets of documents → sentence-pair instances, one (bucket, dupe pass) per unit of work.

Documents go to ``ceil(n / bucket_size)`` buckets by a stable hash of (seed, document key); a
random B comes from another document of the same bucket, so a worker holds one bucket, never the
corpus. Each dupe pass of a bucket is an independent unit, so work spreads across workers even
when there are few buckets.
"""

from __future__ import annotations

import math

import apache_beam as beam

from pipeline.counting import CountingDoFn
from pipeline.stats import STATS_TAG
from transforms.instance_batches import InstanceSettings, TokenTables, record_batches
from transforms.seeding import stable_hash64
from transforms.token_documents import TokenizedDocument

TaskKey = tuple[int, int]
"""(bucket, dupe pass)."""


def bucket_count(num_documents: int, bucket_size: int) -> int:
    """Number of buckets for ``num_documents`` documents of about ``bucket_size`` each (≥ 1)."""
    return max(1, math.ceil(num_documents / bucket_size))


def bucket_of(seed: int, key: str, num_buckets: int) -> int:
    """The bucket of the document with ``key``: a stable hash, independent of the worker."""
    return stable_hash64(seed, "bucket", key) % num_buckets


class ExpandDupePassesFn(CountingDoFn):
    """(bucket, documents) → ((bucket, dupe), documents sorted by key) for every dupe pass."""

    def __init__(self, dupe_factor: int) -> None:
        self._dupe_factor = dupe_factor

    def process(self, element: tuple[int, list[TokenizedDocument]]):
        bucket, documents = element
        ordered = sorted(documents, key=lambda d: d.key)
        self.stats["buckets"] += 1
        if len(ordered) == 1:
            self.stats["single_document_buckets"] += 1
        for dupe in range(self._dupe_factor):
            yield (bucket, dupe), ordered


class CreateInstancesFn(CountingDoFn):
    """((bucket, dupe), documents) → ((bucket, dupe), first index, records, shuffle keys)."""

    def __init__(self, settings: InstanceSettings, tables: TokenTables) -> None:
        self._settings = settings
        self._tables = tables

    def process(self, element: tuple[TaskKey, list[TokenizedDocument]]):
        (bucket, dupe), documents = element
        sentences = [d.sentences() for d in documents]
        first = 0
        for batch in record_batches(
            sentences, bucket, dupe, self._settings, self._tables, self.stats
        ):
            yield (bucket, dupe), first, batch.records, batch.order_keys
            first += len(batch.records)


class CreateInstances(beam.PTransform):
    """PCollection[TokenizedDocument] → outputs ``batches`` and ``stats``."""

    def __init__(self, settings: InstanceSettings, tables: TokenTables, bucket_size: int) -> None:
        super().__init__()
        self._settings = settings
        self._tables = tables
        self._bucket_size = bucket_size

    def expand(self, documents):
        seed = self._settings.seed
        size = self._bucket_size
        num_documents = documents | "CountDocuments" >> beam.combiners.Count.Globally()
        buckets = (
            documents
            | "AssignBucket"
            >> beam.Map(
                lambda d, n: (bucket_of(seed, d.key, bucket_count(n, size)), d),
                n=beam.pvalue.AsSingleton(num_documents),
            )
            | "GroupBuckets" >> beam.GroupByKey()
        )
        tasks = buckets | "ExpandDupePasses" >> beam.ParDo(
            ExpandDupePassesFn(self._settings.dupe_factor)
        ).with_outputs(STATS_TAG, main="tasks")
        created = (
            tasks.tasks
            | "SpreadTasks" >> beam.Reshuffle()
            | "CreateInstances"
            >> beam.ParDo(CreateInstancesFn(self._settings, self._tables)).with_outputs(
                STATS_TAG, main="batches"
            )
        )
        return {
            "batches": created.batches,
            "stats": (tasks[STATS_TAG], created[STATS_TAG]) | "FlattenStats" >> beam.Flatten(),
        }
