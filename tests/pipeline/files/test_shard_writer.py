"""The shard writer on real spill files: the same bytes whatever the number of key-range passes,
and each spill block read once, so object-store requests do not grow with the passes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.files.shard_writer import WriteShardFn
from pipeline.files.spill_groups import MergeSpillGroupFn, group_tasks
from pipeline.files.spills import TaskSpill, task_offsets
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


def write_all(tmp_path, name: str, tasks: list, buffer_bytes: int):
    out = tmp_path / name
    out.mkdir()
    fn = WriteShardFn(str(out), "instances", NUM_SHARDS, "none", buffer_bytes=buffer_bytes)
    results, reads = [], []
    for index in range(NUM_SHARDS):
        results += list(fn.process(index, tasks))
        reads.append(fn.last_shard_block_reads)
    return results, reads


def test_passes_write_the_same_bytes_and_read_each_block_once(tmp_path):
    tasks = spills(tmp_path)
    one, one_reads = write_all(tmp_path, "one-pass", tasks, buffer_bytes=1 << 30)
    many, many_reads = write_all(tmp_path, "many-passes", tasks, buffer_bytes=2_000)
    assert [r["content_sha256"] for r in many] == [r["content_sha256"] for r in one]
    assert [r["records"] for r in many] == [r["records"] for r in one]
    assert sum(r["records"] for r in one) == sum(t.count for t in tasks)
    assert one_reads == many_reads == [len(tasks)] * NUM_SHARDS
    for result in many:
        with open(result["path"], "rb") as f:
            found, _, leftover = count_and_hash_records(f)
        assert found == result["records"] and not leftover
    assert not list((tmp_path / "many-passes").glob(".tmp-*"))


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


def test_results_record_each_file_size_as_written(tmp_path):
    """``bytes`` is the file's size on disk: the compressed size for gzip."""
    import os

    tasks = spills(tmp_path)
    for compression in ("none", "gzip"):
        out = tmp_path / compression
        out.mkdir()
        fn = WriteShardFn(str(out), "instances", NUM_SHARDS, compression)
        results = [r for index in range(NUM_SHARDS) for r in fn.process(index, tasks)]
        assert [r["bytes"] for r in results] == [os.path.getsize(r["path"]) for r in results]
        if compression == "gzip":
            assert all(r["path"].endswith(".gz") for r in results)


def test_a_damaged_or_truncated_spill_fails_naming_the_file(tmp_path):
    import pytest

    tasks = spills(tmp_path)
    fn = WriteShardFn(str(tmp_path / "out"), "instances", NUM_SHARDS, "none")
    spill = tasks[0]
    path = Path(spill.path)
    data = bytearray(path.read_bytes())
    count = len(range(0, spill.count, NUM_SHARDS))  # records of residue block 0
    first = int(spill.bounds[0]) + 8 * count  # the first record's length field
    data[first] ^= 0x01  # a length one byte off: the block's frames no longer end where recorded
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"spill .*task-0-0.spill: a block of \d+ records"):
        for index in range(NUM_SHARDS):
            list(fn.process(index, tasks))
    path.write_bytes(bytes(data[:10]))  # cut inside the first block
    with pytest.raises(RuntimeError, match=r"task-0-0.spill is shorter than recorded"):
        for index in range(NUM_SHARDS):
            list(fn.process(index, tasks))
    assert not list((tmp_path / "out").glob("*.tfrecord"))
