"""Packed rows (``--pack-instances``) end to end: the job, its manifest, the records, the same
instances as the unpacked job, any runner mode, and ``bertprep validate/stats/inspect``."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from pipeline.cli import main
from pipeline.jobs.instances import JobConfigError, check_settings
from tests.pipeline.jobs.test_instance_kinds import read_records
from tests.pipeline.jobs.test_instances import run_job, shard_files
from transforms.example_encoding import decode_example, encode_examples
from transforms.features import kind_lengths
from transforms.instance_packing import unpack_row
from transforms.tfrecord import frame_record

SIZES = dict(max_seq_length=128, max_predictions_per_seq=20, dupe_factor=1, num_shards=2)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sample_corpus_files, sample_vocab_path):
    tmp = tmp_path_factory.mktemp("packed")
    inputs = [str(p) for p in sample_corpus_files]
    return {
        name: run_job(tmp, inputs, sample_vocab_path, name=name, **settings)
        for name, settings in {
            "plain": SIZES,
            "packed": dict(SIZES, pack_instances=3),
            "packed-mp": dict(SIZES, pack_instances=3, mode="multi_processing", workers=2),
            "dynamic": dict(SIZES, pack_instances=3, masking="dynamic"),
        }.items()
    }


def rows_of(out) -> list[dict]:
    return [decode_example(r) for p in shard_files(out) for r in read_records(str(p))]


def key(one: dict) -> tuple:
    return tuple(tuple(np.asarray(v).ravel().tolist()) for _, v in sorted(one.items()))


def test_manifest_states_the_packing(runs):
    manifest, out = runs["packed"]
    assert manifest["packing"] == {
        "max_instances_per_row": 3,
        "max_predictions_per_row": 22,
        "strategy": "first-fit-decreasing",
    }
    lengths = kind_lengths(128, 20, max_instances=3, max_predictions_per_row=22)
    assert {k: v["length"] for k, v in manifest["features"].items()} == lengths
    t = manifest["totals"]
    rows = rows_of(out)
    assert t["rows"] == len(rows) == sum(s["records"] for s in manifest["shards"])
    assert t["instances"] == sum(int(sum(r["next_sentence_weights"])) for r in rows)
    assert t["instances"] > t["rows"]
    real = sum(sum(r["input_mask"]) for r in rows)
    assert t["padding_fraction"] == round(1 - real / (len(rows) * 128), 6)
    assert runs["plain"][0]["packing"] is None


def test_packed_rows_hold_the_unpacked_jobs_instances(runs):
    plain = [key(r) for r in rows_of(runs["plain"][1])]
    packed = [key(one) for r in rows_of(runs["packed"][1]) for one in unpack_row(r, 20)]
    assert sorted(packed) == sorted(plain)
    assert runs["packed"][0]["totals"]["instances"] == runs["plain"][0]["totals"]["instances"]


def test_packed_output_identical_across_runner_modes(runs):
    one = {s["file"]: s["content_sha256"] for s in runs["packed"][0]["shards"]}
    other = {s["file"]: s["content_sha256"] for s in runs["packed-mp"][0]["shards"]}
    assert one == other


def test_packing_is_refused_where_it_cannot_apply(tmp_path, sample_vocab_path):
    from pipeline.jobs.instances import InstancesJobConfig

    base = dict(inputs=["x"], vocab=str(sample_vocab_path), output=str(tmp_path))
    with pytest.raises(JobConfigError, match="--input-mode"):
        check_settings(InstancesJobConfig(**base, pack_instances=2, input_mode="full-sentences"))
    with pytest.raises(JobConfigError, match="--pack-instances"):
        check_settings(InstancesJobConfig(**base, pack_instances=-1))


def cli(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.mark.parametrize("name", ["packed", "dynamic"])
def test_validate_stats_inspect_read_packed_rows(runs, capsys, name):
    manifest, out = runs[name]
    code, text = cli(capsys, "validate", str(out), "--workers", "1")
    assert code == 0, text
    code, text = cli(capsys, "stats", str(out), "--json", "--workers", "1")
    assert code == 0
    report = json.loads(text)
    packing = report["packing"]
    assert report["records"] == manifest["totals"]["instances"]
    assert packing["rows"] == manifest["totals"]["rows"]
    assert packing["efficiency"] == pytest.approx(1 - manifest["totals"]["padding_fraction"])
    assert sum(packing["instances_per_row"]["histogram"]) == packing["rows"]
    code, text = cli(capsys, "inspect", str(out), "-n", "3")
    assert code == 0 and ", instance 1 of " in text


def _copy_with_changed_row(out, tmp_path, change) -> str:
    """A copy of the shard directory whose first shard's first row of two instances (a second
    instance and an unused slot to break) is ``change``d."""
    target = tmp_path / "broken"
    shutil.copytree(out, target)
    first = shard_files(target)[0]
    records = read_records(str(first))
    decoded = [decode_example(r) for r in records]
    i = next(i for i, r in enumerate(decoded) if sum(r["next_sentence_weights"]) == 2)
    row = {k: np.asarray(v) for k, v in decoded[i].items()}
    change(row)
    ints = {k: v[None, :] for k, v in row.items() if v.dtype.kind in "iu"}
    floats = {k: v[None, :] for k, v in row.items() if v.dtype.kind == "f"}
    records[i] = encode_examples(ints, floats)[0]
    first.write_bytes(b"".join(frame_record(r) for r in records))
    manifest = json.loads((target / "manifest.json").read_text())
    for shard in manifest["shards"]:
        shard["bytes"] = (target / shard["file"]).stat().st_size
    (target / "manifest.json").write_text(json.dumps(manifest))
    return str(target)


def _second_cls_to_first(row):
    row["instance_ids"][row["cls_positions"][1]] = 1


def _positions_not_restarted(row):
    start = row["cls_positions"][1]
    row["position_ids"][start] = row["position_ids"][start - 1] + 1


def _mask_off_an_instance(row):
    row["input_mask"][row["cls_positions"][1]] = 0


def _unused_slot_label(row):
    row["next_sentence_labels"][-1] = 1


@pytest.mark.parametrize(
    "change, rule",
    [
        (_second_cls_to_first, "row_layout"),
        (_positions_not_restarted, "row_positions_restart"),
        (_mask_off_an_instance, "row_mask_matches"),
        (_unused_slot_label, "row_unused_slots_zero"),
    ],
)
def test_validate_names_broken_packed_rows(runs, tmp_path, capsys, change, rule):
    broken = _copy_with_changed_row(runs["packed"][1], tmp_path, change)
    code, text = cli(capsys, "validate", broken, "--workers", "1")
    assert code != 0 and rule in text, text
