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


# --- Packed shards ---------------------------------------------------------------------------


def _copy(src, dst, edit=None):
    """A copy of a shard directory; ``edit`` changes its manifest (a dict) in place."""
    import json

    shutil.copytree(src, dst)
    if edit is not None:
        manifest = json.loads((dst / "manifest.json").read_text())
        edit(manifest)
        (dst / "manifest.json").write_text(json.dumps(manifest))
    return dst


def _rewrite_first_record(directory, change):
    """Rewrites the first record of the first shard with ``change(features)`` (decoded
    features → the features to write; the shard's recorded size is dropped from the manifest)."""
    import json

    from transforms.example_encoding import decode_example, encode_examples
    from transforms.tfrecord import frame_records, iter_records

    shard = sorted(directory.glob("instances-*.tfrecord"))[0]
    with open(shard, "rb") as f:
        records = list(iter_records(f))
    features = change(decode_example(records[0]))
    ints = {k: np.asarray([v]) for k, v in features.items() if not isinstance(v[0], float)}
    floats = {
        k: np.asarray([v], np.float32) for k, v in features.items() if isinstance(v[0], float)
    }
    records[0] = encode_examples(ints, floats)[0]
    shard.write_bytes(frame_records(records))
    manifest = json.loads((directory / "manifest.json").read_text())
    for s in manifest["shards"]:
        s.pop("bytes", None)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return shard


def test_packed_shards_resolve_with_their_instances_per_row(packed_shards, packed_dynamic_shards):
    from tests.trainer.conftest import PACK, PACKED_PREDICTIONS, PACKED_SEQ, PACKED_SMALL

    info = resolve_shards([str(packed_shards)])
    assert info.packed and info.max_instances_per_row == PACK
    slots = info.max_predictions_per_row
    assert slots == int(PACKED_SEQ * 0.15) + PACK  # the writer's packed_prediction_slots
    assert (info.max_seq_length, info.max_predictions_per_seq) == (PACKED_SEQ, PACKED_PREDICTIONS)
    spec = make_dataset(info, 8, training=True, seed=1).element_spec
    for name, width in {
        "input_ids": PACKED_SEQ,
        "position_ids": PACKED_SEQ,
        "instance_ids": PACKED_SEQ,
        "masked_lm_positions": slots,
        "masked_lm_weights": slots,
        "next_sentence_labels": PACK,
        "next_sentence_weights": PACK,
        "cls_positions": PACK,
    }.items():
        assert spec[name].shape == (8, width), name
    batch = next(iter(make_dataset(info, 64, training=False)))
    assert float(batch["next_sentence_weights"].numpy().sum()) > 80  # rows hold several
    dynamic = resolve_shards([str(packed_dynamic_shards)])
    assert dynamic.packed and dynamic.masking == "dynamic"
    spec = make_dataset(dynamic, 8, training=True, seed=1).element_spec
    assert spec["masked_lm_positions"].shape == (8, slots) and spec["cls_positions"].shape == (8, 3)
    model = get_preset("tiny").with_(**PACKED_SMALL, vocabulary_size=4000)
    assert mismatch_findings(info, DataSpec(PACKED_SEQ, PACKED_PREDICTIONS, 4000), model) == []
    # A packed row adds no size of its own to fit: positions restart in every instance, so the
    # position table must cover max_seq_length, as for unpacked rows.
    (finding,) = mismatch_findings(info, DataSpec(), MODEL)
    assert "max_seq_length=128 exceeds the model's position table" in finding


def test_packed_and_unpacked_shards_do_not_mix(packed_shards, shards, tmp_path):
    with pytest.raises(ShardConfigError, match="different kinds"):
        resolve_shards([str(packed_shards), str(shards)])
    bare = _copy(shards, tmp_path / "bare")
    (bare / "manifest.json").unlink()
    for data in ([str(packed_shards), str(bare)], [str(bare), str(packed_shards)]):
        with pytest.raises(ShardConfigError, match="packed and unpacked shards cannot be mixed"):
            resolve_shards(data)
    alone = _copy(packed_shards, tmp_path / "alone")
    (alone / "manifest.json").unlink()
    with pytest.raises(ShardConfigError, match="packed rows .* need the manifest.json"):
        resolve_shards([str(alone)])


def test_packed_manifest_must_agree_with_its_rows(packed_shards, tmp_path):
    def k_of(k):
        return lambda m: m["packing"].update(max_instances_per_row=k)

    wrong_k = _copy(packed_shards, tmp_path / "k2", k_of(2))
    with pytest.raises(ShardConfigError, match="features disagree with packed rows of up to 2"):
        resolve_shards([str(wrong_k)])

    def k2_everywhere(m):
        k_of(2)(m)
        for name in ("next_sentence_labels", "next_sentence_weights", "cls_positions"):
            m["features"][name]["length"] = 2

    records_disagree = _copy(packed_shards, tmp_path / "k2-features", k2_everywhere)
    with pytest.raises(ShardConfigError, match="cls_positions has 3 values, expected 2"):
        resolve_shards([str(records_disagree)])
    zero = _copy(packed_shards, tmp_path / "k0", k_of("3"))
    with pytest.raises(ShardConfigError, match="max_instances_per_row must be a positive integer"):
        resolve_shards([str(zero)])
    too_many = _copy(
        packed_shards,
        tmp_path / "slots",
        lambda m: m["packing"].update(max_predictions_per_row=61),
    )
    with pytest.raises(ShardConfigError, match="max_predictions_per_row=61 is not within"):
        resolve_shards([str(too_many)])


def test_a_first_row_that_breaks_the_packed_layout_is_refused(packed_shards, tmp_path):
    def shifted_positions(features):
        features["position_ids"] = [p + 1 if i else 0 for p, i in
                                    zip(features["position_ids"], features["instance_ids"], strict=True)]  # fmt: skip
        return features

    broken = _copy(packed_shards, tmp_path / "positions")
    _rewrite_first_record(broken, shifted_positions)
    with pytest.raises(ShardConfigError, match="position_ids do not count 0, 1"):
        resolve_shards([str(broken)])

    def unused_slot_named(features):
        features["next_sentence_weights"] = [1.0, 1.0, 1.0]
        return features

    slots = _copy(packed_shards, tmp_path / "slots")
    _rewrite_first_record(slots, unused_slot_named)
    with pytest.raises(ShardConfigError, match="not a packed row of up to 3 instances"):
        resolve_shards([str(slots)])


def test_a_later_record_of_another_shape_names_its_shard(packed_shards, tmp_path):
    """Only the first record is read before step one; a later one that does not parse with the
    manifest's lengths stops the run naming its shard (``find_damaged_shard``)."""
    import json

    from trainer.input_pipeline import find_damaged_shard
    from transforms.example_encoding import decode_example, encode_examples
    from transforms.tfrecord import frame_records, iter_records

    copy = _copy(packed_shards, tmp_path / "late")
    shard = sorted(copy.glob("instances-*.tfrecord"))[1]
    with open(shard, "rb") as f:
        records = list(iter_records(f))
    features = decode_example(records[5])
    ints = {
        k: np.asarray([v[:2] if k == "cls_positions" else v])
        for k, v in features.items()
        if not isinstance(v[0], float)
    }
    floats = {k: np.asarray([v], np.float32) for k, v in features.items() if k not in ints}
    records[5] = encode_examples(ints, floats)[0]
    shard.write_bytes(frame_records(records))
    manifest = json.loads((copy / "manifest.json").read_text())
    for s in manifest["shards"]:
        s.pop("bytes", None)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    info = resolve_shards([str(copy)])  # the first record is fine
    found = find_damaged_shard(info)
    assert found is not None and found[0] == str(shard) and "cls_positions" in found[1]
