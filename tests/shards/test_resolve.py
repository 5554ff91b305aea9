"""The one shard resolver (``shards.resolve``): which files count, which manifests, which sizes;
the same answer through every file access (local files, Beam's FileSystems, ``tf.io.gfile``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shards.files import LocalFiles, ShardPathError
from shards.reader import RecordSizes
from shards.resolve import (
    expand_shard_paths,
    first_record,
    listed_records,
    manifests_beside,
    settle_sizes,
    size_mismatches,
)
from transforms.example_encoding import encode_examples
from transforms.features import FULL_SENTENCES, SENTENCE_PAIRS
from transforms.tfrecord import frame_records


def records(n: int, seq: int = 16, preds: int = 4, nsp: bool = True) -> list[bytes]:
    """``n`` valid static records: [CLS] 2000 2001 [SEP] 2002 [MASK] [SEP], position 5 masked."""
    ids = np.zeros((n, seq), np.int64)
    ids[:, :7] = [101, 2000, 2001, 102, 2002, 103, 102]
    segments = np.zeros((n, seq), np.int64)
    segments[:, 4:7] = 1
    positions, labels = np.zeros((n, preds), np.int64), np.zeros((n, preds), np.int64)
    weights = np.zeros((n, preds), np.float32)
    positions[:, 0], labels[:, 0], weights[:, 0] = 5, 2003, 1.0
    ints = {
        "input_ids": ids,
        "input_mask": (ids > 0).astype(np.int64),
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": labels,
    }
    if nsp:
        ints["next_sentence_labels"] = np.zeros((n, 1), np.int64)
    return encode_examples(ints, {"masked_lm_weights": weights})


def write_shard(path: Path, n: int, **sizes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(frame_records(records(n, **sizes)))
    return path


def write_manifest(directory: Path, seq: int, preds: int, shards: dict[str, int], **more) -> None:
    manifest = {
        "max_seq_length": seq,
        "max_predictions_per_seq": preds,
        "shards": [{"file": f, "records": n, "content_sha256": "x"} for f, n in shards.items()],
        **more,
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_non_shard_files_never_count(tmp_path):
    write_shard(tmp_path / "instances-00000-of-00001.tfrecord", 2)
    for name in ("manifest.json", "stage.json", "rejects.jsonl", ".partial", "_tmp", "notes.md"):
        (tmp_path / name).write_text("{}")
    want = [f"{tmp_path}/instances-00000-of-00001.tfrecord"]
    assert expand_shard_paths([str(tmp_path)]) == want
    assert expand_shard_paths([str(tmp_path / "*")]) == want


def test_every_file_access_resolves_the_same_files(tmp_path):
    """The shard tools read through Beam's FileSystems, the trainer through tf.io.gfile: the
    same patterns name the same shards."""
    from pipeline.files.shard_files import BeamFiles

    out = tmp_path / "run"
    for side in ("train", "eval"):
        write_shard(out / "seq16" / side / "instances-00000-of-00002.tfrecord", 2)
        write_shard(out / "seq16" / side / "instances-00001-of-00002.tfrecord", 1)
        write_manifest(out / "seq16" / side, 16, 4, {})
    (out / "seq16" / "stage.json").write_text("{}")
    (out / "run_summary.json").write_text("{}")
    patterns = [
        [str(out)],
        [str(out / "seq16")],
        [str(out / "seq16" / "eval")],
        [str(out / "seq16" / "*" / "*.tfrecord")],
        [str(out / "seq16" / "train" / "instances-00000-of-00002.tfrecord")],
    ]
    for given in patterns:
        local = expand_shard_paths(given, LocalFiles())
        assert local == expand_shard_paths(given, BeamFiles()), given
        assert local and all(is_file(p) for p in local)


def is_file(path: str) -> bool:
    return Path(path).is_file() and path.endswith(".tfrecord")


def test_the_trainer_reads_through_the_same_resolver(tmp_path):
    from trainer.input_pipeline import TfFileSystem

    write_shard(tmp_path / "a" / "x.tfrecord", 1)
    write_shard(tmp_path / "b" / "y.tfrecord", 1)
    (tmp_path / "a" / "rejects.jsonl").write_text("")
    given = [str(tmp_path / "a"), str(tmp_path / "*" / "*.tfrecord")]
    assert expand_shard_paths(given, TfFileSystem()) == expand_shard_paths(given, LocalFiles())


def test_shards_of_other_sizes_than_recorded_are_named_by_every_file_access(tmp_path):
    """A shard cut short differs from the manifest's ``bytes``; one gzipped since it was written
    (same content) and manifests without sizes are not size-checked."""
    import gzip

    from pipeline.files.shard_files import BeamFiles
    from trainer.input_pipeline import TfFileSystem

    paths = [write_shard(tmp_path / f"s{i}.tfrecord", 3) for i in range(3)]
    full = paths[0].stat().st_size
    entries = [{"file": p.name, "records": 3, "content_sha256": "x", "bytes": full} for p in paths]
    manifest = {"max_seq_length": 16, "max_predictions_per_seq": 4, "shards": entries}
    manifest["config"] = {"compression": "none"}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    paths[1].write_bytes(paths[1].read_bytes()[: full // 2])
    paths[2].write_bytes(gzip.compress(paths[2].read_bytes()))
    files = [str(p) for p in paths]
    for access in (LocalFiles(), BeamFiles(), TfFileSystem()):
        found = size_mismatches(files, manifests_beside(files, access), access)
        assert [(m.shard, m.expected, m.actual) for m in found] == [(files[1], full, full // 2)]
        assert str(found[0]) == (
            f"{files[1]}: {full // 2:,} bytes, the manifest says {full:,} (cut short: an "
            "interrupted copy, or changed since it was written)"
        )
    for entry in entries:
        del entry["bytes"]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    assert size_mismatches(files, manifests_beside(files)) == []


def test_local_files_refuse_remote_paths_clearly():
    with pytest.raises(ShardPathError, match="remote path needs a file access"):
        expand_shard_paths(["gs://bucket/shards"])


def test_sizes_come_from_the_manifests_which_must_agree(tmp_path):
    a = write_shard(tmp_path / "a" / "s.tfrecord", 1)
    b = write_shard(tmp_path / "b" / "s.tfrecord", 1)
    write_manifest(tmp_path / "a", 16, 4, {"s.tfrecord": 1})
    write_manifest(tmp_path / "b", 16, 4, {"s.tfrecord": 1})
    files = [str(a), str(b)]
    manifests = manifests_beside(files)
    assert sorted(manifests) == [f"{tmp_path}/a/manifest.json", f"{tmp_path}/b/manifest.json"]
    settled = settle_sizes(files, manifests)
    assert settled.from_manifests and settled.sizes == RecordSizes(16, 4)
    write_manifest(tmp_path / "b", 32, 4, {"s.tfrecord": 1})
    with pytest.raises(ShardPathError, match="max_seq_length disagrees: .* says 16, .* says 32"):
        settle_sizes(files, manifests_beside(files))
    write_manifest(tmp_path / "b", 16, 4, {"s.tfrecord": 1}, input_mode=FULL_SENTENCES)
    with pytest.raises(ShardPathError, match="different kinds"):
        settle_sizes(files, manifests_beside(files))
    write_manifest(tmp_path / "b", 16, 4, {"s.tfrecord": 1}, vocab={"sha256": "1", "size": 9})
    write_manifest(tmp_path / "a", 16, 4, {"s.tfrecord": 1}, vocab={"sha256": "2", "size": 9})
    with pytest.raises(ShardPathError, match="different vocabularies"):
        settle_sizes(files, manifests_beside(files))


def test_without_a_manifest_sizes_come_from_the_first_shard_that_has_a_record(tmp_path):
    empty = write_shard(tmp_path / "a.tfrecord", 0)
    full = write_shard(tmp_path / "b.tfrecord", 2, seq=24, preds=3, nsp=False)
    files = [str(empty), str(full)]
    assert first_record(files).shard == str(full)
    settled = settle_sizes(files, {})
    assert not settled.from_manifests
    assert settled.sizes == RecordSizes(24, 3, input_mode=FULL_SENTENCES)
    assert "sizes inferred from the first record: max_seq_length=24" in settled.notes[0]
    with pytest.raises(ShardPathError, match="every shard is empty"):
        settle_sizes([str(empty)], {})
    junk = tmp_path / "junk.tfrecord"
    junk.write_bytes(b"not a tfrecord file at all")
    with pytest.raises(ShardPathError, match="not a readable TFRecord file"):
        settle_sizes([str(junk), str(full)], {})


def test_records_are_counted_in_each_shards_own_manifest(tmp_path):
    """train/ and eval/ hold shards of the same names: each counts from its own manifest."""
    files = []
    for side, n in (("train", 5), ("eval", 2)):
        files.append(str(write_shard(tmp_path / side / "instances-0.tfrecord", n)))
        write_manifest(tmp_path / side, 16, 4, {"instances-0.tfrecord": n})
    assert listed_records(files, manifests_beside(files)) == 7
    assert listed_records(files, {}) is None
    assert settle_sizes(files, manifests_beside(files)).sizes.input_mode == SENTENCE_PAIRS
