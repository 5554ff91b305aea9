"""The shard writer on real spill files: the same bytes whatever the number of key-range passes,
and each spill block read once, so object-store requests do not grow with the passes."""

from __future__ import annotations

import numpy as np

from pipeline.instance_creation import TaskSpill
from pipeline.shard_writer import WriteShardFn
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


def write_all(tmp_path, name: str, tasks: list[TaskSpill], buffer_bytes: int):
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
