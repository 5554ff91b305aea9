"""The shard writer on real spill files: the same bytes whatever the number of key-range passes,
and each spill block read once, so object-store requests do not grow with the passes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np
import pytest

from pipeline.files.shard_writer import WriteShardFn, _read_batches
from pipeline.files.spill_groups import MergeSpillGroupFn, group_tasks
from pipeline.files.spills import TaskSpill, task_offsets
from transforms.compact_columns import compact_columns
from transforms.framed_examples import frame_columns, residue_spill
from transforms.shard_layout import KEY_LIMIT, spill_layout
from transforms.tfrecord import count_and_hash_records, frame_record

NUM_SHARDS = 3


def spills(tmp_path) -> list[TaskSpill]:
    rng = np.random.default_rng(5)
    out = []
    for bucket in range(2):
        for dupe in range(3):
            n = int(rng.integers(20, 60))
            framed = [frame_record(rng.bytes(int(rng.integers(50, 400)))) for _ in range(n)]
            keys = rng.integers(0, KEY_LIMIT, size=n, dtype=np.int64)
            data, bounds = spill_layout(framed, keys, NUM_SHARDS)
            path = tmp_path / f"task-{bucket}-{dupe}.spill"
            path.write_bytes(data)
            out.append(TaskSpill(bucket, dupe, n, str(path), bounds))
    return out


def column_spills(tmp_path, encoder, name: str) -> list[TaskSpill]:
    """The same records in every call, spilled as ``encoder`` makes them: TFRecord frames
    (``frame_columns``) or compact rows with their schema (``compact_columns``)."""
    rng = np.random.default_rng(11)
    folder = tmp_path / name
    folder.mkdir()
    out = []
    for bucket in range(2):
        for dupe in range(3):
            n = int(rng.integers(20, 60))
            ints = rng.integers(0, 30000, size=(n, 24)).astype(np.int32)
            ints[:, 8:16] = np.arange(8) < rng.integers(0, 9, size=(n, 1))  # a mask
            ints[:, 16:20] = rng.integers(0, 1 << 28, size=(n, 4))  # 4-byte literals
            floats = np.ones((n, 3), dtype=np.float32).view(np.uint8)
            batch = encoder(ints, np.array([0, 8, 16, 24]), floats, np.array([0, 12]), list("abcw"))
            keys = rng.integers(0, KEY_LIMIT, size=n, dtype=np.int64)
            data, bounds = residue_spill([batch], keys, NUM_SHARDS)
            path = folder / f"task-{bucket}-{dupe}.spill"
            path.write_bytes(data.tobytes())
            schema = getattr(batch, "schema", None)
            out.append(TaskSpill(bucket, dupe, n, str(path), bounds, schema))
    return out


def write_bundle(fn: WriteShardFn, indices, tasks: list) -> tuple[list[dict], list[int]]:
    """One bundle of shards ``indices``, run as a runner does: ``process`` only queues, the
    shards are written by ``finish_bundle``. (results, spill block reads of each shard)."""
    fn.start_bundle()
    for index in indices:
        assert list(fn.process(index, tasks)) == []
    results, reads = [], []
    for out in fn.finish_bundle():
        results.append(out.value)
        reads.append(fn.last_shard_block_reads)
    return results, reads


def write_all(tmp_path, name: str, tasks: list, buffer_bytes: int):
    out = tmp_path / name
    out.mkdir()
    fn = WriteShardFn(str(out), "instances", NUM_SHARDS, "none", buffer_bytes=buffer_bytes)
    return write_bundle(fn, range(NUM_SHARDS), tasks)


def test_read_batches_cut_consecutive_reads_at_the_limit():
    reads = [("a", 0, 4), ("b", 10, 13), ("c", 0, 9), ("d", 5, 6), ("e", 0, 2)]
    assert _read_batches(reads, 8) == [[reads[0], reads[1]], [reads[2]], [reads[3], reads[4]]]
    assert _read_batches(reads, 100) == [reads]
    assert _read_batches(reads, 1) == [[r] for r in reads]
    assert _read_batches([], 8) == []


@pytest.mark.parametrize("buffer_bytes", [2_000, 12_000])
def test_passes_write_the_same_bytes_and_read_each_block_once(tmp_path, monkeypatch, buffer_bytes):
    """Many passes, their spill ranges read one per batch (2,000) or several per batch, the
    next batch read ahead (12,000): the shards of a single pass, byte for byte."""
    tasks = spills(tmp_path)
    one, one_reads = write_all(tmp_path, "one-pass", tasks, buffer_bytes=1 << 30)
    probe = WriteShardFn(str(tmp_path), "instances", NUM_SHARDS, "none", buffer_bytes=buffer_bytes)
    probe._use(tasks)
    plans = [probe._plan(i) for i in range(NUM_SHARDS)]
    batches = [_read_batches(plan.reads, buffer_bytes // 2) for plan in plans]
    assert all(plan.passes > 1 for plan in plans)
    assert all(len(b) > 1 for b in batches)  # reads ahead of use in every shard
    assert any(len(batch) > 1 for b in batches for batch in b) == (buffer_bytes > 2_000)
    assert [plan.batches for plan in plans] == batches
    import pipeline.files.shard_writer as shard_writer

    real_ahead = shard_writer.direct_io.read_ranges_ahead
    ahead: list[list] = []

    def recording_ahead(ranges):
        ahead.append(ranges)
        return real_ahead(ranges)

    monkeypatch.setattr(shard_writer.direct_io, "read_ranges_ahead", recording_ahead)
    many, many_reads = write_all(tmp_path, "many-passes", tasks, buffer_bytes=buffer_bytes)
    # Every batch but the bundle's first is read ahead: the next shard's first batch while a
    # shard is written, a shard's next batch while its current one is sorted.
    every = [tuple(r[:3] for r in batch) for b in batches for batch in b]
    assert sorted(tuple(ranges) for ranges in ahead) == sorted(every[1:])
    assert [r["content_sha256"] for r in many] == [r["content_sha256"] for r in one]
    assert [r["records"] for r in many] == [r["records"] for r in one]
    assert sum(r["records"] for r in one) == sum(t.count for t in tasks)
    assert one_reads == many_reads == [len(tasks)] * NUM_SHARDS
    for result in many:
        with open(result["path"], "rb") as f:
            found, _, leftover = count_and_hash_records(f)
        assert found == result["records"] and not leftover
    assert not list((tmp_path / "many-passes").glob(".tmp-*"))


def test_a_bundle_mixing_one_pass_and_many_pass_shards_writes_the_same_bytes(tmp_path):
    """Shards that fit the buffer are read ahead whole, one shard early; larger ones their first
    batch, the rest batch by batch: in any mix and any order, every shard holds what it holds
    written alone."""
    tasks = spills(tmp_path)
    alone, _ = write_all(tmp_path, "alone", tasks, buffer_bytes=1 << 30)
    out = tmp_path / "mixed"
    out.mkdir()
    probe = WriteShardFn(str(out), "instances", NUM_SHARDS, "none")
    probe._use(tasks)
    spill_bytes = sorted(sum(r[2] - r[1] for r in probe._plan(i).reads) for i in range(NUM_SHARDS))
    fn = WriteShardFn(str(out), "instances", NUM_SHARDS, "none", buffer_bytes=spill_bytes[1])
    order = [2, 0, 1]
    mixed, reads = write_bundle(fn, order, tasks)
    assert {fn._plan(i).passes for i in order} == {1, 2}
    by_index = {r["index"]: r for r in alone}
    assert [r["index"] for r in mixed] == order
    assert [r["content_sha256"] for r in mixed] == [by_index[i]["content_sha256"] for i in order]
    assert reads == [len(tasks)] * NUM_SHARDS


def merge_groups(tmp_path, tasks: list[TaskSpill], target_bytes: int):
    offsets = task_offsets({t.task: t.count for t in tasks})
    fn = MergeSpillGroupFn(str(tmp_path), NUM_SHARDS)
    groups = []
    for index, members in enumerate(group_tasks(tasks, target_bytes)):
        groups += list(fn.process((index, [(t, offsets[t.task]) for t in members])))
    return groups


def test_group_files_give_the_same_shards_with_one_read_per_group(tmp_path):
    tasks = spills(tmp_path)
    alone, _ = write_all(tmp_path, "tasks", tasks, buffer_bytes=1 << 30)
    groups = merge_groups(tmp_path, tasks, target_bytes=sum(int(t.bounds[-1]) for t in tasks) // 3)
    assert 2 <= len(groups) < len(tasks)
    assert sum(len(g.tasks) for g in groups) == len(tasks)
    for buffer_bytes in (1 << 30, 2_000):
        grouped, reads = write_all(tmp_path, f"groups-{buffer_bytes}", groups, buffer_bytes)
        assert [r["content_sha256"] for r in grouped] == [r["content_sha256"] for r in alone]
        assert reads == [len(groups)] * NUM_SHARDS
    again = merge_groups(tmp_path, tasks, target_bytes=1)  # a retry: same files, one per task
    assert len(again) == len(tasks)
    assert not list(tmp_path.glob("*.partial-*"))


@pytest.mark.parametrize("buffer_bytes", [1 << 30, 2_000])
def test_compact_spills_give_the_shards_of_framed_spills(tmp_path, buffer_bytes):
    """The shard writer frames compact rows as it writes them: the shards the same records
    give when spilled as frames, in one pass or many, from task or group files."""
    framed = column_spills(tmp_path, frame_columns, "framed")
    compact = column_spills(tmp_path, compact_columns, "compact")
    assert sum(t.bounds[-1] for t in compact) < 0.6 * sum(t.bounds[-1] for t in framed)
    want, _ = write_all(tmp_path, f"from-framed-{buffer_bytes}", framed, buffer_bytes)
    got, _ = write_all(tmp_path, f"from-compact-{buffer_bytes}", compact, buffer_bytes)
    assert [r["content_sha256"] for r in got] == [r["content_sha256"] for r in want]
    assert [r["records"] for r in got] == [r["records"] for r in want]
    groups = merge_groups(tmp_path / "compact", compact, target_bytes=2_000)
    assert {g.schema for g in groups} == {compact[0].schema}
    grouped, _ = write_all(tmp_path, f"from-groups-{buffer_bytes}", groups, buffer_bytes)
    assert [r["content_sha256"] for r in grouped] == [r["content_sha256"] for r in want]


def test_a_damaged_compact_row_fails_naming_the_shard(tmp_path):
    tasks = column_spills(tmp_path, compact_columns, "compact")
    spill = tasks[0]
    path = Path(spill.path)
    data = bytearray(path.read_bytes())
    count = len(range(0, spill.count, NUM_SHARDS))
    first = int(spill.bounds[0]) + 8 * count  # the first row's length, then its first head
    data[first + 4] = 0xFF  # a first feature longer than its columns
    path.write_bytes(bytes(data))
    with pytest.raises(
        ValueError,
        match=r"shard .*instances-00000-of-00003.tfrecord: a compact row of task \(bucket 0, "
        r"dupe 0\) is malformed: its spill file is damaged",
    ):
        write_all(tmp_path, "out", tasks, 1 << 30)
    assert not list((tmp_path / "out").glob("*.tfrecord"))


def test_spills_of_one_job_must_share_one_layout(tmp_path):
    framed = column_spills(tmp_path, frame_columns, "framed")
    compact = column_spills(tmp_path, compact_columns, "compact")
    with pytest.raises(ValueError, match="records of different layouts"):
        write_all(tmp_path, "mixed", framed[:3] + compact[3:], 1 << 30)


def test_results_record_each_file_size_as_written(tmp_path):
    """``bytes`` is the file's size on disk: the compressed size for gzip."""
    import os

    tasks = spills(tmp_path)
    for compression in ("none", "gzip"):
        out = tmp_path / compression
        out.mkdir()
        fn = WriteShardFn(str(out), "instances", NUM_SHARDS, compression)
        results, _ = write_bundle(fn, range(NUM_SHARDS), tasks)
        assert [r["bytes"] for r in results] == [os.path.getsize(r["path"]) for r in results]
        if compression == "gzip":
            assert all(r["path"].endswith(".gz") for r in results)


@pytest.mark.parametrize("buffer_bytes", [None, 2_000, 12_000])
def test_a_damaged_or_truncated_spill_fails_naming_the_file(tmp_path, buffer_bytes):
    """In one pass or many (ranges read one by one, or in batches read ahead)."""
    tasks = spills(tmp_path)
    fn = WriteShardFn(
        str(tmp_path / "out"), "instances", NUM_SHARDS, "none", buffer_bytes=buffer_bytes
    )
    spill = tasks[0]
    path = Path(spill.path)
    data = bytearray(path.read_bytes())
    count = len(range(0, spill.count, NUM_SHARDS))  # records of residue block 0
    first = int(spill.bounds[0]) + 8 * count  # the first record's length field
    data[first] ^= 0x01  # a length one byte off: the block's frames no longer end where recorded
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"spill .*task-0-0.spill: a block of \d+ records"):
        write_bundle(fn, range(NUM_SHARDS), tasks)
    path.write_bytes(bytes(data[:10]))  # cut inside the first block
    with pytest.raises(RuntimeError, match=r"task-0-0.spill is shorter than recorded"):
        write_bundle(fn, range(NUM_SHARDS), tasks)
    assert not list((tmp_path / "out").glob("*.tfrecord"))


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_shard_that_lost_bytes_on_the_way_to_disk_fails(tmp_path, monkeypatch, compression):
    """The file must hold what was written: an uncompressed shard by its size on disk (its
    frames were counted in memory), a gzip shard by reading it back."""
    import pipeline.files.shard_writer as shard_writer

    tasks = spills(tmp_path)
    real_commit = shard_writer.commit

    def lossy_commit(temp, final):
        real_commit(temp, final)
        with open(final, "r+b") as f:
            f.truncate(f.seek(0, 2) // 2)

    monkeypatch.setattr(shard_writer, "commit", lossy_commit)
    out = tmp_path / "out"
    out.mkdir()
    fn = WriteShardFn(str(out), "instances", NUM_SHARDS, compression)
    with pytest.raises((RuntimeError, OSError, EOFError), match="trustworthy|Compressed|EOF|end"):
        write_bundle(fn, [0], tasks)


def test_gzip_shards_hold_the_same_records_as_uncompressed_ones(tmp_path):
    tasks = spills(tmp_path)
    plain, _ = write_all(tmp_path, "plain", tasks, buffer_bytes=1 << 30)
    out = tmp_path / "gz"
    out.mkdir()
    fn = WriteShardFn(str(out), "instances", NUM_SHARDS, "gzip")
    gz, _ = write_bundle(fn, range(NUM_SHARDS), tasks)
    assert [r["content_sha256"] for r in gz] == [r["content_sha256"] for r in plain]
    assert [r["records"] for r in gz] == [r["records"] for r in plain]
    for result in plain:
        assert result["bytes"] == os.path.getsize(result["path"])


def test_shards_larger_than_the_buffer_are_written_around_the_page_cache(tmp_path, monkeypatch):
    """An uncompressed shard of several passes goes through ``direct_io.create`` (``O_DIRECT``
    where the file system takes it); one that fits the buffer, or a gzip one, through the cache.
    The bytes are the same either way."""
    import pipeline.files.shard_writer as shard_writer

    tasks = spills(tmp_path)
    real_create = shard_writer.direct_io.create
    direct: list[str] = []

    def recording_create(path):
        direct.append(os.path.basename(path))
        return real_create(path)

    monkeypatch.setattr(shard_writer.direct_io, "create", recording_create)
    one, _ = write_all(tmp_path, "one-pass", tasks, buffer_bytes=1 << 30)
    assert direct == []
    many, _ = write_all(tmp_path, "many-passes", tasks, buffer_bytes=2_000)
    assert sorted(name.split(".tfrecord")[0] for name in direct) == [
        f"instances-{i:05d}-of-{NUM_SHARDS:05d}" for i in range(NUM_SHARDS)
    ]
    assert [r["content_sha256"] for r in many] == [r["content_sha256"] for r in one]
    assert [r["bytes"] for r in many] == [os.path.getsize(r["path"]) for r in many]
    for result in one + many:  # an uncompressed shard's digest is taken as it is written
        digest = hashlib.sha256(Path(result["path"]).read_bytes()).hexdigest()
        assert result["content_sha256"] == digest
    out = tmp_path / "gz"
    out.mkdir()
    direct.clear()
    fn = WriteShardFn(str(out), "instances", NUM_SHARDS, "gzip", buffer_bytes=2_000)
    write_bundle(fn, range(NUM_SHARDS), tasks)
    assert direct == []


def test_a_compact_shard_is_large_by_the_frames_it_will_hold(tmp_path):
    """Compact rows frame to ~3x their bytes: a shard whose spill fits the buffer in one pass
    may still be written around the page cache."""
    compact = column_spills(tmp_path, compact_columns, "compact")
    probe = WriteShardFn(str(tmp_path), "instances", NUM_SHARDS, "none")
    probe._use(compact)
    spilled = sum(r[2] - r[1] for r in probe._plan(0).reads)
    for buffer_bytes, large in ((2 * spilled, True), (4 * spilled, False)):
        fn = WriteShardFn(str(tmp_path), "instances", NUM_SHARDS, "none", buffer_bytes=buffer_bytes)
        fn._use(compact)
        plan = fn._plan(0)
        assert (plan.passes, plan.large) == (1, large)
