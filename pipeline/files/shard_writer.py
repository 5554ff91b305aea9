"""Global shuffle into ``num_shards`` TFRecord files whose record counts differ by at most one.

Every record has a global position: tasks ((bucket, dupe) pairs) in sorted order, records in
creation order within a task. Position ``g`` goes to shard ``g % num_shards`` (see
``transforms.shard_layout``), so shard sizes differ by at most one; within a shard, records are
ordered by a keyed random 63-bit key. Consecutive instances of one document therefore land in
different shards, and each shard mixes all buckets. A shard writer reads its block from every
task's spill file (compact rows, which it frames as it writes them: ``transforms.compact_columns``;
TFRecord frames, copied as they are, from spills without a schema), writes under a temporary
name in a hidden directory that no shard reader looks into, renames, then checks what the file
holds: an uncompressed shard must be exactly the bytes of the frames it located and counted in
memory (its size on disk), a gzip shard is read back, decompressed, counted and hashed. Its
result records the file's size in bytes.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import math
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files import direct_io
from pipeline.files.artifacts import commit, temporary_name
from pipeline.files.page_cache import FinishedFiles
from pipeline.files.spills import GroupSpill, TaskSpill, spill_schema, task_offsets
from pipeline.runtime.counters import NAMESPACE, in_global_window
from pipeline.runtime.per_job import PerJobFn
from transforms.compact_columns import MalformedRow, compact_bounds, frame_compact_rows
from transforms.framed_examples import frame_bounds, gather_frames
from transforms.shard_layout import (
    key_ranges,
    residue_count,
    residue_for_shard,
)
from transforms.tfrecord import count_and_hash_records

COMPRESSIONS = {"none": CompressionTypes.UNCOMPRESSED, "gzip": CompressionTypes.GZIP}
SUFFIXES = {"none": ".tfrecord", "gzip": ".tfrecord.gz"}
DEFAULT_BUFFER_BYTES = 16 << 20
"""Records a shard writer holds at a time; a larger shard is written in several key-range
passes over its blocks (same bytes, bounded memory)."""
TEMP_DIR = ".spill"
"""Where shards are written before the rename (by default; the instances job passes its spill
directory, which it deletes when done): no shard reader looks into a hidden subdirectory."""
_WRITE_BYTES = 4 << 20  # bytes per write of a pass's gathered records
FRAMED_PER_COMPACT_BYTE = 3
"""About how many bytes of TFRecord frames a byte of compact spill rows makes (2.9-3.5 for
static records of a 30k vocab, ~2.4 for a vocab over 65,536 ids): what decides whether a shard
is large before its frames exist."""


def shard_name(prefix: str, index: int, num_shards: int, compression: str) -> str:
    """``<prefix>-00003-of-00256.tfrecord[.gz]``."""
    return f"{prefix}-{index:05d}-of-{num_shards:05d}{SUFFIXES[compression]}"


@dataclass(frozen=True)
class ShardResult:
    """What a written shard holds: its records and content hash (uncompressed stream), and its
    size on disk."""

    index: int
    path: str
    records: int
    content_sha256: str
    """sha256 of the uncompressed TFRecord stream (framing included)."""
    bytes: int
    """Size of the file as written, in bytes (the compressed size for gzip): what a copy of the
    shard must have (the trainer and ``bertprep validate`` compare it before reading)."""

    def to_json(self) -> dict:
        return asdict(self)


def _ranges(reads) -> list[tuple[str, int, int]]:
    return [read[:3] for read in reads]


def _read_batches(reads: list, limit: int) -> list[list]:
    """``reads`` cut into consecutive batches of at most ``limit`` bytes each (a read larger
    than ``limit`` is a batch of its own), so a batch can be read while the one before is used."""
    batches: list[list] = []
    size = limit
    for read in reads:
        length = read[2] - read[1]
        if size + length > limit:
            batches.append([])
            size = 0
        batches[-1].append(read)
        size += length
    return batches


@dataclass(frozen=True)
class _ShardPlan:
    """What one shard reads: (path, start, end, blocks) per spill file, its passes, and the
    batches its reads are made in: all at once for one pass, else ``_read_batches``."""

    index: int
    reads: list
    passes: int
    batches: list[list]
    large: bool
    """Expected to hold more bytes than the buffer: written around the page cache."""


class WriteShardFn(beam.DoFn):
    """shard index → ShardResult: gathers the shard's block from every task's spill file, orders
    the records by (shuffle key, task, index), writes the shard atomically and verifies it."""

    counter_namespace: str = NAMESPACE
    """Where ``spill_block_reads`` is counted (one job's namespace in a shared stage)."""

    def __init__(
        self,
        output_dir: str,
        prefix: str,
        num_shards: int,
        compression: str,
        buffer_bytes: int | None = None,
        shard_names: tuple[str, ...] | None = None,
        temp_dir: str | None = None,
    ) -> None:
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {sorted(COMPRESSIONS)}")
        if shard_names is not None and len(shard_names) != num_shards:
            raise ValueError(f"{len(shard_names)} shard names for {num_shards} shards")
        self._output_dir = output_dir
        self._shard_names = shard_names
        self._temp_dir = temp_dir or FileSystems.join(output_dir, TEMP_DIR)
        self._buffer_bytes = buffer_bytes or DEFAULT_BUFFER_BYTES
        self._prefix = prefix
        self.num_shards = num_shards
        self._compression = compression
        self._offsets: dict | None = None
        self._records_out = 0
        self._spills: object = None  # held, so the cache below is never matched by a new list
        self._schema = None
        self._finished = FinishedFiles()
        self.last_shard_block_reads = 0
        """Ranged reads of spill files for the last shard written: one per block, any passes."""

    def start_bundle(self) -> None:
        self._queued: list[int] = []

    def process(self, index: int, spills: list[TaskSpill] | list[GroupSpill]):
        """Queues shard ``index``: the bundle's shards are written by ``finish_bundle``, so that
        each one's spill ranges are read while the one before is ordered and written."""
        self._use(spills)
        self._queued.append(index)
        return ()

    def finish_bundle(self):
        queued, self._queued = self._queued, []
        try:
            for result in self.write_shards(queued):
                yield in_global_window(result)
        finally:
            self._finished.flush()

    def _use(self, spills: list[TaskSpill] | list[GroupSpill]) -> None:
        if self._spills is not spills:
            counts = {}
            for spill in spills:
                if isinstance(spill, GroupSpill):
                    counts.update(zip(spill.tasks, spill.counts, strict=True))
                else:
                    counts[spill.task] = spill.count
            self._offsets = task_offsets(counts)
            self._schema = spill_schema(spills)
            self._spills = spills

    def write_shards(self, indices: list[int]) -> Iterator[dict]:
        """Writes shards ``indices`` (of the spills last given to ``process``) in that order and
        yields their ``ShardResult`` dicts. A shard's first read batch (all of its spill ranges
        when it fits ``buffer_bytes``) is read by a thread while the shard before it is ordered
        and written."""
        plans = [self._plan(index) for index in indices]
        ahead = None
        try:
            for k, plan in enumerate(plans):
                data = ahead.result() if ahead is not None else None
                ahead = None
                if k + 1 < len(plans) and plans[k + 1].batches:
                    ahead = direct_io.read_ranges_ahead(_ranges(plans[k + 1].batches[0]))
                yield self._write_shard(plan, data)
        finally:
            if ahead is not None:  # a shard failed: let the read ahead end, its result unused
                concurrent.futures.wait([ahead])

    def _plan(self, index: int) -> _ShardPlan:
        reads = [self._read_for_shard(index, spill) for spill in self._spills]
        reads = [r for r in reads if r[3]]
        shard_bytes = sum(r[2] - r[1] for r in reads)
        passes = max(1, math.ceil(shard_bytes / self._buffer_bytes))
        if passes == 1:
            batches = [reads] if reads else []
        else:
            batches = _read_batches(reads, max(1, self._buffer_bytes // 2))
        framed = shard_bytes * (1 if self._schema is None else FRAMED_PER_COMPACT_BYTE)
        return _ShardPlan(index, reads, passes, batches, framed > self._buffer_bytes)

    def _write_shard(self, plan: _ShardPlan, data: np.ndarray | None) -> dict:
        """Writes one shard (``data``: its first read batch, already read, or None) and
        verifies it."""
        index, reads = plan.index, plan.reads
        expected = sum(b[2] for r in reads for b in r[3])
        self.last_shard_block_reads = 0
        if self._shard_names:
            name = self._shard_names[index]
        else:
            name = shard_name(self._prefix, index, self.num_shards, self._compression)
        final = FileSystems.join(self._output_dir, name)
        # Not beside the shards: the trainer and the shard tools read a directory's
        # "*.tfrecord*" files (or all of them), and a killed attempt's temporary file stays.
        temp = temporary_name(FileSystems.join(self._temp_dir, name))
        ctype = COMPRESSIONS[self._compression]
        digest = hashlib.sha256()
        self._records_out = 0
        length = 0
        if self._compression == "none" and plan.large:
            # Larger than the buffer: written faster than the device takes it back through the
            # cache, the pages would come fresh (pipeline.files.page_cache); write around it.
            opened = direct_io.create(temp)
        else:
            opened = FileSystems.create(temp, compression_type=ctype)
        with opened as f:
            try:
                for piece in self._shard_pieces(plan, data):
                    digest.update(piece)
                    f.write(piece)
                    length += len(piece)
            except ValueError as e:
                raise ValueError(f"shard {final}: {e}") from e
        written = digest.hexdigest()
        commit(temp, final)
        size = FileSystems.match([final])[0].metadata_list[0].size_in_bytes
        if self._compression == "none":
            # The frames written were located and counted in memory (each block's frames end
            # where its spill says); the file must hold exactly those bytes.
            found, content, leftover = self._records_out, written, size != length
        else:
            with FileSystems.open(final, compression_type=ctype) as f:
                found, content, leftover = count_and_hash_records(f)
        if found != expected or content != written or leftover:
            raise RuntimeError(
                f"shard {final}: expected {expected} records ({length:,} bytes) but found "
                f"{found} ({size:,} bytes on disk), or the content differs; the output is not "
                "trustworthy"
            )
        self._finished.add(final)  # not read again by the job (see pipeline.files.page_cache)
        return ShardResult(index, final, found, written, size).to_json()

    def _read_for_shard(self, index: int, spill: TaskSpill | GroupSpill):
        """(path, start, end, blocks) of what shard ``index`` needs from one spill file: one
        contiguous range; blocks are (task id, residue, count, start, end) within the range."""
        if isinstance(spill, GroupSpill):
            start, end = spill.shard_range(index)
            tasks, counts, lengths = spill.tasks, spill.counts, spill.lengths[index].tolist()
        else:
            r = residue_for_shard(index, self._offsets[spill.task], self.num_shards)
            start, end = int(spill.bounds[r]), int(spill.bounds[r + 1])
            tasks, counts, lengths = (spill.task,), (spill.count,), [end - start]
        blocks, position = [], 0
        for task, n, length in zip(tasks, counts, lengths, strict=True):
            r = residue_for_shard(index, self._offsets[task], self.num_shards)
            count = residue_count(n, self.num_shards, r)
            if count:
                task_id = _task_id(task)
                blocks.append((task_id, r, count, position, position + length))
            position += length
        return spill.path, start, end, blocks

    def _shard_pieces(self, plan: _ShardPlan, data=None) -> Iterator[memoryview]:
        """The shard's framed records in shard order, in pieces of at most ``_WRITE_BYTES``.

        Records are ordered by (shuffle key, task, index). Keys are uniform, so one pass per key
        range holds about ``buffer_bytes`` of records, whatever the shard's size. Each range is
        read from its spill file once: with several passes, its records are first sorted into
        one worker-local file per key range, which the passes then read back. Those ranges are
        read in batches of at most half the buffer, the next batch by a thread while the current
        one is sorted (one range at a time left the worker waiting on the device). Frames are
        located, grouped and gathered by compiled kernels (no Python object per record).
        ``data``: the bytes of the plan's first batch when already read, else None.
        """
        reads, passes, batches = plan.reads, plan.passes, plan.batches
        if passes == 1:
            if data is None:
                data = direct_io.read_ranges_into(_ranges(reads))
            located = self._locate_frames(data, reads)
            if located is not None:
                yield from self._ordered(data, *located)
            return
        bounds = np.asarray([low for low, _ in key_ranges(passes)], dtype=np.int64)
        with tempfile.TemporaryDirectory(prefix="bertprep-shard-") as local:
            files = [open(os.path.join(local, f"pass-{i:04d}"), "w+b") for i in range(passes)]  # noqa: SIM115
            pending = None
            try:
                for k, batch in enumerate(batches):
                    if k > 0:
                        data = pending.result()
                        pending = None
                    elif data is None:
                        data = direct_io.read_ranges_into(_ranges(batch))
                    if k + 1 < len(batches):
                        pending = direct_io.read_ranges_ahead(_ranges(batches[k + 1]))
                    located = self._locate_frames(data, batch)
                    if located is None:
                        continue
                    keys, tasks, indices, starts, ends = located
                    which = np.searchsorted(bounds, keys, side="right") - 1
                    grouped = np.argsort(which, kind="stable")
                    cuts = np.searchsorted(which[grouped], np.arange(passes + 1))
                    for i in np.flatnonzero(np.diff(cuts)).tolist():
                        m = grouped[cuts[i] : cuts[i + 1]]
                        _append_part(
                            files[i], keys[m], tasks[m], indices[m], data, starts[m], ends[m]
                        )
                    del data
                for f in files:
                    size = f.seek(0, os.SEEK_END)
                    f.seek(0)
                    data = np.empty(size, dtype=np.uint8)
                    if f.readinto(memoryview(data)) != size:
                        raise RuntimeError(f"local pass file {f.name} is shorter than written")
                    f.close()
                    os.unlink(f.name)  # its pages take the shard's bytes next, still warm
                    located = _parse_parts(data)
                    if located is not None:
                        yield from self._ordered(data, *located)
            finally:
                if pending is not None:  # a pass failed: let the read in flight end, unused
                    concurrent.futures.wait([pending])
                for f in files:
                    f.close()

    def _locate_frames(self, data: np.ndarray, reads):
        """(keys, task ids, indices within their task, frame starts, frame ends) of every record
        of the ranges ``reads``, laid end to end in ``data``; None when they hold none. Each
        block's frames must end where its spill says."""
        keys, tasks, indices, starts, ends = [], [], [], [], []
        base = 0
        for path, start, end, blocks in reads:
            beam.metrics.Metrics.counter(self.counter_namespace, "spill_block_reads").inc()
            self.last_shard_block_reads += 1
            length = end - start
            for task_id, r, count, low, high in blocks:
                bounds = self._bounds(data, base + low + 8 * count, count)
                if high > length or bounds[-1] != base + high:
                    raise ValueError(
                        f"spill {path}: a block of {count} records does not end where recorded"
                    )
                keys.append(data[base + low : base + low + 8 * count].view("<i8"))
                tasks.append(np.full(count, task_id, dtype=np.int64))
                indices.append(r + self.num_shards * np.arange(count, dtype=np.int64))
                starts.append(bounds[:-1])
                ends.append(bounds[1:])
            base += length
        if not keys:
            return None
        return tuple(np.concatenate(x) for x in (keys, tasks, indices, starts, ends))

    def _bounds(self, data: np.ndarray, pos: int, count: int) -> np.ndarray:
        """Where ``count`` records laid end to end from ``pos`` start, and where the last ends
        (-1 when past ``data``): compact rows, or TFRecord frames for spills without a schema."""
        if self._schema is None:
            return frame_bounds(data, pos, count)
        return compact_bounds(data, pos, count)

    def _ordered(self, data, keys, tasks, indices, starts, ends) -> Iterator[memoryview]:
        """The frames of the records ``data[starts[i]:ends[i]]`` ordered by (key, task, index),
        in pieces: the records themselves, or the frames of their compact rows."""
        order = np.lexsort((indices, tasks, keys))
        self._records_out += len(order)
        starts, ends = starts[order], ends[order]
        if self._schema is None:
            out = gather_frames(data, starts, ends)
            view = memoryview(out)
            for piece in range(0, len(out), _WRITE_BYTES):
                yield view[piece : piece + _WRITE_BYTES]
            return
        try:
            for framed in frame_compact_rows(data, starts, ends, self._schema):
                view = memoryview(framed)
                for piece in range(0, len(framed), _WRITE_BYTES):
                    yield view[piece : piece + _WRITE_BYTES]
        except MalformedRow as e:
            bucket, dupe = _task_of(int(tasks[order][e.row]))
            raise ValueError(
                f"a compact row of task (bucket {bucket}, dupe {dupe}) is malformed: its spill "
                "file is damaged"
            ) from e


_DUPE_BITS = 20
"""A task (bucket, dupe) is the int ``bucket * 2**20 + dupe`` in a pass's arrays: it sorts as
the tasks do (a dupe factor stays far below 2**20)."""


def _task_id(task: tuple[int, int]) -> int:
    return (task[0] << _DUPE_BITS) + task[1]


def _task_of(task_id: int) -> tuple[int, int]:
    return task_id >> _DUPE_BITS, task_id & ((1 << _DUPE_BITS) - 1)


def _append_part(f, keys, tasks, indices, data, starts, ends) -> None:
    """Appends one part to a local pass file: its record count, then int64 keys, task ids,
    indices and frame lengths (little-endian), then the frames ``data[starts[i]:ends[i]]``."""
    f.write(np.int64(len(keys)).astype("<i8").tobytes())
    for array in (keys, tasks, indices, ends - starts):
        f.write(np.asarray(array, dtype="<i8").tobytes())
    f.write(gather_frames(data, starts, ends))


def _parse_parts(data: np.ndarray):
    """(keys, tasks, indices, frame starts, frame ends) of every part ``_append_part`` wrote
    into ``data`` (a local pass file's bytes); None when it holds none."""
    columns: list[list[np.ndarray]] = [[], [], [], [], []]
    position = 0
    while position < len(data):
        n = int(data[position : position + 8].view("<i8")[0])
        header = data[position + 8 : position + 8 + 32 * n].view("<i8").reshape(4, n)
        position += 8 + 32 * n
        lengths = header[3]
        ends = position + np.cumsum(lengths)
        values = (header[0], header[1], header[2], ends - lengths, ends)
        for column, value in zip(columns, values, strict=True):
            column.append(value)
        position = int(ends[-1]) if n else position
    if position != len(data):
        raise RuntimeError("a local pass file does not end where its last part does")
    if not columns[0]:
        return None
    return tuple(np.concatenate(c) for c in columns)


class WriteShards(beam.PTransform):
    """PCollection[(job, TaskSpill or GroupSpill)] → PCollection[(job, ShardResult dict)]: every
    shard of every job (empty ones included), each written by its job's ``WriteShardFn``
    (``writes[job]``) from that job's spills. All jobs share one stage (``PerJobFn``)."""

    def __init__(self, writes: Mapping[int, WriteShardFn], labels: Mapping[int, str]) -> None:
        super().__init__()
        self._shards = [(job, i) for job, fn in writes.items() for i in range(fn.num_shards)]
        self._fn = PerJobFn(writes, labels, keyed_side_input=True)

    def expand(self, spills):
        return (
            spills.pipeline
            | "ShardIds" >> beam.Create(self._shards, reshuffle=False)
            | "SpreadShards" >> beam.Reshuffle()
            | "WriteShard" >> beam.ParDo(self._fn, beam.pvalue.AsList(spills))
        )
