"""``bertprep inspect / stats / validate`` end to end: on the instance stage's shards, on shards in
google-research/bert's exact format, and on damaged files."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest

from pipeline.cli import main
from tests.pipeline.jobs.test_instances import run_job, shard_files


@pytest.fixture(scope="module")
def produced(tmp_path_factory, sample_corpus_files, sample_vocab_path):
    tmp = tmp_path_factory.mktemp("shards")
    manifest, out = run_job(
        tmp, [str(p) for p in sample_corpus_files], sample_vocab_path, num_shards=3
    )
    return manifest, out


@pytest.fixture
def copy_of(produced, tmp_path):
    def make() -> Path:
        target = tmp_path / "copy"
        shutil.copytree(produced[1], target)
        return target

    return make


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_validate_accepts_our_shards(produced, capsys):
    manifest, out = produced
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 0, stdout
    assert f"valid: 3 shard(s), {manifest['totals']['instances']:,} records checked" in stdout


def test_validate_in_parallel_and_json(produced, capsys):
    _, out = produced
    code, stdout, _ = cli(capsys, "validate", str(out / "*.tfrecord"), "--workers", "2", "--json")
    report = json.loads(stdout)
    assert code == 0 and report["valid"] and report["shards"] == 3


def test_inspect_shows_segments_masks_and_label(produced, capsys):
    _, out = produced
    code, stdout, _ = cli(capsys, "inspect", str(out), "-n", "2")
    assert code == 0
    assert stdout.count("next sentence: ") == 2
    assert "  A: " in stdout and "  B: " in stdout and "←" in stdout
    code, stdout, _ = cli(capsys, "inspect", str(out), "--index", "4", "--json")
    record = json.loads(stdout)
    assert record["index"] == 4 and record["next_sentence"].startswith(("IsNext", "RandomNext"))
    assert {m["kind"] for m in record["masked"]} <= {"mask", "kept", "random"}
    # Tokens are named with the manifest's vocabulary, not shown as "#123".
    assert not any(re.fullmatch(r"#\d+", t) for t in record["segments"]["A"])


def test_stats_report_and_plots(produced, capsys, tmp_path):
    manifest, out = produced
    html, png = tmp_path / "r.html", tmp_path / "r.png"
    code, stdout, _ = cli(
        capsys, "stats", str(out), "--json", "--plot", str(html), "--workers", "1"
    )
    report = json.loads(stdout)
    assert code == 0
    assert report["records"] == manifest["totals"]["instances"]
    assert abs(report["is_next_ratio"] - manifest["totals"]["is_next_ratio"]) < 1e-6
    assert "<svg" in html.read_text()
    code, stdout, _ = cli(capsys, "stats", str(out), "--plot", str(png), "--sample", "30")
    assert code == 0 and png.stat().st_size > 1000 and "IsNext ratio" in stdout


def test_gzip_is_detected_from_content(copy_of, capsys):
    out = copy_of()
    shard = shard_files(out)[0]
    shard.write_bytes(gzip.compress(shard.read_bytes()))  # same name, now GZIP
    code, stdout, _ = cli(capsys, "validate", str(shard), "--workers", "1")
    assert code == 0, stdout


def test_truncated_shard_is_named_with_offset(copy_of, capsys):
    out = copy_of()
    shard = shard_files(out)[1]
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) - 100])
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 1
    assert f"{shard.name}: record" in stdout and "at byte" in stdout and "truncated" in stdout


def test_a_shard_cut_short_is_named_by_its_recorded_size(copy_of, capsys):
    out = copy_of()
    shard = shard_files(out)[1]
    full = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: full // 2])  # an interrupted copy, manifest unchanged
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 1
    findings = stdout.splitlines()
    assert findings[0] == (
        f"{shard}: {full // 2:,} bytes, the manifest says {full:,} (cut short: an interrupted "
        "copy, or changed since it was written)"
    )
    assert sum(str(shard) in f for f in findings) == 2  # the size, then where the records end
    assert "truncated" in findings[1]


def test_manifests_without_sizes_are_validated_as_before(copy_of, capsys):
    out = copy_of()
    manifest = json.loads((out / "manifest.json").read_text())
    for entry in manifest["shards"]:
        del entry["bytes"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 0, stdout


def test_flipped_byte_is_a_checksum_finding(copy_of, capsys):
    out = copy_of()
    shard = shard_files(out)[0]
    data = bytearray(shard.read_bytes())
    data[500] ^= 0xFF
    shard.write_bytes(bytes(data))
    code, stdout, _ = cli(capsys, "validate", str(shard), "--workers", "1")
    assert code == 1 and "checksum mismatch" in stdout and "Traceback" not in stdout


def test_not_a_tfrecord_file(tmp_path, capsys):
    (tmp_path / "notes.tfrecord").write_text("this is not a TFRecord file at all, just text\n")
    code, stdout, stderr = cli(
        capsys,
        "validate",
        str(tmp_path / "notes.tfrecord"),
        "--max-seq-length",
        "128",
        "--max-predictions-per-seq",
        "20",
    )
    assert code == 1 and "not a TFRecord file" in stdout


def test_manifest_disagreements(copy_of, capsys):
    out = copy_of()
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["shards"][0]["records"] += 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    shard_files(out)[2].unlink()
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 1
    assert "the manifest says" in stdout and "were not found" in stdout


def test_trainer_config_mismatch(produced, capsys, tmp_path):
    _, out = produced
    config = tmp_path / "trainer.yaml"
    config.write_text("data:\n  max_seq_length: 512\n  max_predictions_per_seq: 20\n")
    code, stdout, _ = cli(capsys, "validate", str(out), "--trainer-config", str(config))
    assert code == 1 and "max_seq_length=512 but the shards have 128" in stdout
    config.write_text('{"max_seq_length": 128, "max_predictions_per_seq": 20, "vocab_size": 4000}')
    code, stdout, _ = cli(capsys, "validate", str(out), "--trainer-config", str(config))
    assert code == 0, stdout


def reference_format_shard(path: Path, records: list[dict]) -> None:
    """A shard written the way google-research/bert's create_pretraining_data.py writes one."""
    import collections

    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for r in records:
            features = collections.OrderedDict()
            for name in (
                "input_ids",
                "input_mask",
                "segment_ids",
                "masked_lm_positions",
                "masked_lm_ids",
            ):
                features[name] = tf.train.Feature(int64_list=tf.train.Int64List(value=r[name]))
            features["masked_lm_weights"] = tf.train.Feature(
                float_list=tf.train.FloatList(value=r["masked_lm_weights"])
            )
            features["next_sentence_labels"] = tf.train.Feature(
                int64_list=tf.train.Int64List(value=[r["next_sentence_labels"]])
            )
            example = tf.train.Example(features=tf.train.Features(feature=features))
            writer.write(example.SerializeToString())


def reference_record(seq: int = 16, preds: int = 4) -> dict:
    # [CLS] 2000 2001 [SEP] 2002 [MASK] 2004 [SEP] + padding; position 5 masked (was 2003)
    ids = [101, 2000, 2001, 102, 2002, 103, 2004, 102]
    n = len(ids)
    return {
        "input_ids": ids + [0] * (seq - n),
        "input_mask": [1] * n + [0] * (seq - n),
        "segment_ids": [0, 0, 0, 0, 1, 1, 1, 1] + [0] * (seq - n),
        "masked_lm_positions": [5] + [0] * (preds - 1),
        "masked_lm_ids": [2003] + [0] * (preds - 1),
        "masked_lm_weights": [1.0] + [0.0] * (preds - 1),
        "next_sentence_labels": 0,
    }


def test_reference_format_shard_without_manifest(tmp_path, capsys):
    records = [reference_record() for _ in range(5)]
    broken = reference_record()
    broken["segment_ids"][2] = 1  # segment ids must be 0 through the first [SEP]
    records.append(broken)
    short = reference_record()
    short["masked_lm_positions"] = [5, 0]  # wrong length: 2 of 4 values
    short["masked_lm_ids"] = [2003, 0]
    short["masked_lm_weights"] = [1.0, 0.0]
    records.append(short)
    reference_format_shard(tmp_path / "ref.tfrecord", records)
    code, stdout, stderr = cli(capsys, "validate", str(tmp_path / "ref.tfrecord"))
    assert code == 1
    assert "sizes inferred from the first record: max_seq_length=16" in stderr
    lines = [x for x in stdout.splitlines() if x.startswith(str(tmp_path))]
    assert len(lines) == 2
    assert ": record 5: segment" in lines[0]
    assert (
        ": record 6: feature_spec: feature masked_lm_positions has 2 values, expected 4" in lines[1]
    )
    code, stdout, _ = cli(capsys, "inspect", str(tmp_path / "ref.tfrecord"), "-n", "1", "--json")
    record = json.loads(stdout)
    assert record["masked"] == [
        {"position": 5, "segment": "B", "original": "#2003", "shown": "#103", "kind": "mask"}
    ]


def test_special_ids_come_from_the_manifest_without_the_vocab(copy_of, capsys):
    out = copy_of()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["vocab"]["special_ids"] == {
        "pad": 0,
        "unk": 100,
        "cls": 101,
        "sep": 102,
        "mask": 103,
    }
    manifest["vocab"]["path"] = str(out / "moved-away-vocab.txt")
    (out / "manifest.json").write_text(json.dumps(manifest))
    code, stdout, stderr = cli(capsys, "stats", str(out), "--json", "--workers", "1")
    report = json.loads(stdout)
    assert code == 0 and "special ids from the manifest" in stderr
    assert abs(report["masked_lm_split"]["fractions"]["mask"] - 0.8) < 0.05
    assert report["malformed_records"] == 0
    code, stdout, _ = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 0, stdout


@pytest.fixture
def run_layout(produced, tmp_path) -> Path:
    """A ``bertprep run`` output: OUT/run_summary.json, OUT/seq128/{stage.json, train/, eval/}."""
    _, shards = produced
    out = tmp_path / "bertprep-out"
    phase = out / "seq128"
    shutil.copytree(shards, phase / "train")
    shutil.copytree(shards, phase / "eval")
    (phase / "stage.json").write_text('{"stage": "phase:seq128"}')
    (out / "run_summary.json").write_text("{}")
    (out / "clean").mkdir()
    (out / "clean" / "stage.json").write_text("{}")
    return out


def test_phase_and_run_directories_mean_their_train_shards(produced, run_layout, capsys):
    manifest, _ = produced
    phase = run_layout / "seq128"
    for target in (phase, run_layout):
        code, stdout, stderr = cli(capsys, "validate", str(target), "--workers", "1")
        assert code == 0, stdout + stderr
        assert "stage.json" not in stdout and "checksum mismatch" not in stdout
        assert f"valid: 3 shard(s), {manifest['totals']['instances']:,} records" in stdout
        assert str(phase / "train" / "manifest.json") in stdout
        code, stdout, _ = cli(capsys, "stats", str(target), "--json", "--workers", "1")
        assert code == 0 and json.loads(stdout)["records"] == manifest["totals"]["instances"]
        code, stdout, _ = cli(capsys, "inspect", str(target), "-n", "1", "--json")
        assert code == 0 and json.loads(stdout)["shard"].startswith(str(phase / "train"))
    code, stdout, _ = cli(capsys, "inspect", str(phase / "eval"), "-n", "1", "--json")
    assert code == 0 and json.loads(stdout)["shard"].startswith(str(phase / "eval"))


def test_run_directory_with_several_phases_asks_for_one(run_layout, capsys):
    shutil.copytree(run_layout / "seq128", run_layout / "seq512")
    code, _, stderr = cli(capsys, "stats", str(run_layout))
    assert code == 2
    assert "several phases (seq128, seq512): name one" in stderr and "Traceback" not in stderr


def test_directory_without_tfrecord_names_skips_non_shard_files(produced, tmp_path, capsys):
    _, shards = produced
    target = tmp_path / "google"
    target.mkdir()
    for i, shard in enumerate(shard_files(shards)):
        shutil.copy(shard, target / f"examples_{i}")  # the reference's files may have any name
    for name in ("stage.json", "manifest.json", "rejects.jsonl", ".partial", "notes.md"):
        (target / name).write_text("{}\n")
    code, stdout, stderr = cli(capsys, "stats", str(target), "--json", "--workers", "1")
    assert code == 0, stderr
    assert len(json.loads(stdout)["records_per_shard"]) == 3
