"""tf.data over the shards: static shapes, drop_remainder, file-level sharding, GZIP, sizes."""

from __future__ import annotations

import gzip
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.trainer.conftest import PREDICTIONS, SEQ, SMALL
from trainer.input_pipeline import (
    ConfigMismatchError,
    DataSpec,
    ShardConfigError,
    check_fits,
    make_dataset,
    mismatch_findings,
    resolve_shards,
)
from trainer.model_presets import get_preset

MODEL = get_preset("tiny").with_(**SMALL, vocabulary_size=4000)


def _all_records(info, **kwargs) -> np.ndarray:
    batches = make_dataset(info, 64, training=False, **kwargs)
    return np.concatenate([b["input_ids"].numpy() for b in batches])


def test_sizes_and_counts_come_from_the_manifest(shards):
    info = resolve_shards([str(shards)])
    assert [f.rsplit("/", 1)[-1] for f in info.files] == [
        "instances-00000-of-00002.tfrecord",
        "instances-00001-of-00002.tfrecord",
    ]
    assert (info.max_seq_length, info.max_predictions_per_seq) == (SEQ, PREDICTIONS)
    assert info.vocab_size == 4000 and info.compressions == ("", "")
    assert info.manifest_paths == (f"{shards}/manifest.json",)
    assert info.records == len(_all_records(info)) > 100
    # A glob names the same files; manifests and rejects are never taken for shards.
    assert resolve_shards([f"{shards}/*"]).files == info.files


def test_training_batches_have_static_shapes_and_drop_the_remainder(shards):
    info = resolve_shards([str(shards)])
    dataset = make_dataset(info, 16, training=True, seed=1)
    spec = dataset.element_spec
    assert spec["input_ids"].shape == (16, SEQ) and spec["input_ids"].dtype == tf.int32
    assert spec["masked_lm_positions"].shape == (16, PREDICTIONS)
    assert spec["masked_lm_weights"].shape == (16, PREDICTIONS)
    assert spec["masked_lm_weights"].dtype == tf.float32
    assert spec["next_sentence_labels"].shape == (16, 1)
    # Training repeats forever: more batches than records / batch.
    assert sum(1 for _ in dataset.take(info.records // 16 + 5)) == info.records // 16 + 5
    # Evaluation keeps the last partial batch (unknown batch dim); drop_remainder makes it static.
    eval_sizes = [len(b["input_ids"]) for b in make_dataset(info, 100, training=False)]
    assert sum(eval_sizes) == info.records and eval_sizes[-1] == info.records % 100
    dropped = make_dataset(info, 100, training=False, drop_remainder=True)
    assert dropped.element_spec["input_ids"].shape == (100, SEQ)
    assert sum(len(b["input_ids"]) for b in dropped) == info.records // 100 * 100


def test_file_level_sharding_splits_files_across_input_pipelines(shards):
    info = resolve_shards([str(shards)])
    per_file = [_all_records(resolve_shards([f])) for f in info.files]  # each file on its own
    parts = [
        _all_records(info, input_context=tf.distribute.InputContext(2, i, 2)) for i in range(2)
    ]
    for part, expected in zip(parts, per_file, strict=True):
        assert np.array_equal(part, expected)
    with pytest.raises(ShardConfigError, match="cannot be split across 3 input pipelines"):
        make_dataset(info, 4, training=True, input_context=tf.distribute.InputContext(3, 0, 3))


def test_gzip_detected_from_content_not_name(tmp_path, shards):
    plain = resolve_shards([str(shards)])
    for src in plain.files:
        name = src.rsplit("/", 1)[-1]
        with open(src, "rb") as f, gzip.open(tmp_path / name, "wb") as g:  # no .gz suffix
            g.write(f.read())
    shutil.copy(shards / "manifest.json", tmp_path / "manifest.json")
    zipped = resolve_shards([str(tmp_path)])
    assert zipped.compressions == ("GZIP", "GZIP")
    assert np.array_equal(_all_records(zipped), _all_records(plain))


def test_shards_without_manifest_need_the_vocab_size(tmp_path, shards):
    for f in shards.glob("instances-*"):
        shutil.copy(f, tmp_path / f.name)
    info = resolve_shards([str(tmp_path / "instances-*")])
    assert info.manifest_paths == () and info.vocab_size is None
    assert (info.max_seq_length, info.max_predictions_per_seq) == (SEQ, PREDICTIONS)
    assert any("no manifest.json" in n for n in info.notes)
    assert mismatch_findings(info, DataSpec(SEQ, PREDICTIONS, 4000), MODEL) == []
    findings = mismatch_findings(info, DataSpec(128, 20), MODEL)
    assert findings[0].startswith("trainer max_seq_length=128 but the shards have 64")
    assert "max_predictions_per_seq=20 but the shards have 10" in findings[1]
    # Ids in the records beyond a too-small model vocabulary are caught from the first record.
    assert any(
        "outside the model's vocab_size=50" in f
        for f in mismatch_findings(info, DataSpec(), MODEL.with_(vocabulary_size=50))
    )


def test_every_mismatch_is_listed(shards):
    info = resolve_shards([str(shards)])
    check_fits(info, DataSpec(SEQ, PREDICTIONS, 4000), MODEL)
    with pytest.raises(ConfigMismatchError) as e:
        check_fits(
            info,
            DataSpec(128, 20),
            MODEL.with_(vocabulary_size=3000, max_position_embeddings=32),
        )
    text = str(e.value)
    for part in (
        "max_seq_length=128",
        "max_predictions_per_seq=20",
        "position table (max_position_embeddings=32)",
        "vocabulary has 4000 tokens but the model's vocab_size is 3000",
    ):
        assert part in text


def test_unusable_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ShardConfigError, match="no shard files match"):
        resolve_shards([str(tmp_path / "nothing-*.tfrecord")])
    (tmp_path / "junk.tfrecord").write_bytes(b"this is not a tfrecord file at all")
    with pytest.raises(ShardConfigError, match="not a readable TFRecord"):
        resolve_shards([str(tmp_path / "junk.tfrecord")])


def test_phase_directory_resolves_as_the_shard_tools_do(tmp_path, shards):
    from shards.resolve import expand_shard_paths

    phase = tmp_path / "bertprep-out" / "seq64"
    shutil.copytree(shards, phase / "train")
    shutil.copytree(shards, phase / "eval")
    (phase / "stage.json").write_text('{"stage": "phase:seq64"}')
    (tmp_path / "bertprep-out" / "run_summary.json").write_text("{}")
    for target in (phase, tmp_path / "bertprep-out"):
        info = resolve_shards([str(target)])
        assert [f.rsplit("/", 1)[-1] for f in info.files] == [
            "instances-00000-of-00002.tfrecord",
            "instances-00001-of-00002.tfrecord",
        ]
        assert all("/seq64/train/" in f for f in info.files)
        assert list(info.files) == expand_shard_paths([str(target)])
        assert info.max_seq_length == SEQ and info.records
