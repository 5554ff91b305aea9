"""One pass over shards, in parallel: record counts, checksums, rule checks and statistics.

Each shard is streamed by one worker process (``--workers``, default one per CPU); workers return
small summaries that the caller merges. Reading and TensorFlow's parser are the bound, not Python.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from shards.files import FileAccess
from shards.reader import BatchParser, Frames, ReadProblem, RecordSizes, open_shard, spec_problems
from transforms.instance_packing import unpack_batch
from transforms.kind_checks import check_kind_batch
from transforms.record_checks import Violation
from transforms.record_stats import ShardSetStats
from transforms.special_ids import SpecialIds

BATCH = 2048


@dataclass
class ScanRequest:
    """What to do with each shard. ``limit_records`` reads only that many records per shard."""

    sizes: RecordSizes
    check_ids: SpecialIds | None = None
    stats_ids: SpecialIds | None = None
    limit_records: int | None = None
    max_violations: int = 50
    is_continuation: np.ndarray | None = None
    """The vocabulary's ``##`` table: unmasked records' ``word_starts`` are checked against it."""
    files: FileAccess | None = None
    """What reaches the shards (default: local files only); sent to the worker processes."""


def check_batch(batch: dict, ids: SpecialIds, shard: str, first: int, request: ScanRequest):
    """The rule checks of the request's record kind (``transforms.kind_checks``)."""
    return check_kind_batch(
        batch,
        ids,
        shard,
        first,
        request.sizes.masking,
        request.sizes.input_mode,
        is_continuation=request.is_continuation,
        max_predictions_per_seq=request.sizes.max_predictions_per_seq,
    )


def for_statistics(batch: dict, sizes: RecordSizes) -> dict:
    """A batch of any kind in the static pairs' layout the statistics read: no prediction slots
    for unmasked records (their masks are drawn at training), NSP label 0 where there is none
    (the report then leaves the NSP figures out)."""
    n = len(batch["input_ids"])
    out = dict(batch)
    p = sizes.max_predictions_per_seq
    for name, dtype in (
        ("masked_lm_positions", np.int64),
        ("masked_lm_ids", np.int64),
        ("masked_lm_weights", np.float32),
    ):
        out.setdefault(name, np.zeros((n, p), dtype))
    out.setdefault("next_sentence_labels", np.zeros((n, 1), np.int64))
    return out


def add_statistics(stats: ShardSetStats, batch: dict, sizes: RecordSizes, shard: str) -> None:
    """Adds a parsed batch to ``stats``; packed rows as their instances, unpacked
    (``transforms.instance_packing.unpack_batch``; rows that break the layout are left out of
    the figures, ``validate`` names them), with the number of instances per row."""
    if not sizes.packed:
        stats.update(for_statistics(batch, sizes), shard)
        return
    unpacked = unpack_batch(batch, sizes.max_predictions_per_seq)
    per_row = np.bincount(unpacked.row, minlength=len(batch["input_ids"]))
    stats.update(for_statistics(unpacked.features, sizes), shard, instances_per_row=per_row)


@dataclass
class ShardScan:
    """What one shard held. ``content_sha256`` is set only when the shard was read to its end."""

    shard: str
    records: int = 0
    content_sha256: str | None = None
    problem: ReadProblem | None = None
    violations: list[Violation] = field(default_factory=list)
    violation_count: int = 0
    stats: ShardSetStats | None = None


def scan_shard(shard: str, request: ScanRequest) -> ShardScan:
    """Streams one shard (see ``ShardScan``)."""
    parser = BatchParser(request.sizes)
    result = ShardScan(shard)
    if request.stats_ids is not None:
        result.stats = ShardSetStats(
            request.sizes.max_seq_length,
            request.sizes.max_predictions_per_seq,
            request.stats_ids,
            max_instances_per_row=request.sizes.max_instances_per_row,
        )
    pending: list[bytes] = []
    first = 0

    def flush() -> None:
        nonlocal first
        batch = parser.parse(pending)
        if batch is None:  # some record breaks the spec: find and name each one
            good, good_index = [], []
            for i, data in enumerate(pending):
                problems = spec_problems(data, request.sizes)
                if problems:
                    _add(
                        result,
                        request,
                        Violation(shard, first + i, "feature_spec", "; ".join(problems)),
                    )
                else:
                    good.append(data)
                    good_index.append(first + i)
            batch = parser.parse(good) if good else None
            # Checks below report indexes relative to `first`; re-check good records one by one.
            if batch is not None and request.check_ids is not None:
                for row, index in enumerate(good_index):
                    single = {k: v[row : row + 1] for k, v in batch.items()}
                    for v in check_batch(single, request.check_ids, shard, index, request):
                        _add(result, request, v)
            if batch is not None and result.stats is not None:
                add_statistics(result.stats, batch, request.sizes, shard)
        else:
            if request.check_ids is not None:
                for v in check_batch(batch, request.check_ids, shard, first, request):
                    _add(result, request, v)
            if result.stats is not None:
                add_statistics(result.stats, batch, request.sizes, shard)
        first += len(pending)
        pending.clear()

    with open_shard(shard, request.files) as stream:
        frames = Frames(stream, shard)
        for index, _, data in frames:
            pending.append(data)
            if len(pending) >= BATCH:
                flush()
            if request.limit_records is not None and index + 1 >= request.limit_records:
                break
        else:
            if frames.problem is None:
                result.content_sha256 = frames.digest.hexdigest()
        if pending:
            flush()
        result.records = first
        result.problem = frames.problem
    result.violations.sort(key=lambda v: v.record)
    return result


def _add(result: ShardScan, request: ScanRequest, violation: Violation) -> None:
    result.violation_count += 1
    if len(result.violations) < request.max_violations:
        result.violations.append(violation)


def _scan_quietly(args: tuple[str, ScanRequest]) -> ShardScan:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    return scan_shard(*args)


def scan_shards(
    shards: Sequence[str], request: ScanRequest, workers: int | None = None
) -> list[ShardScan]:
    """Scans every shard, in parallel worker processes when there are several shards."""
    workers = min(workers or os.cpu_count() or 1, len(shards))
    if workers <= 1:
        return [scan_shard(s, request) for s in shards]
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        return list(pool.map(_scan_quietly, [(s, request) for s in shards]))
