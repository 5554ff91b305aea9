"""``shards.validation``: the verdict over a shard set, each shard against its own directory's
manifest."""

from __future__ import annotations

import hashlib
import json

from shards.shard_set import open_shard_set
from shards.validation import validate_shard_set
from tests.shards.test_resolve import write_shard


def sha256_of(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "0" * 64


def write_listing_manifest(directory, names: list[str], records: int) -> None:
    manifest = {
        "max_seq_length": 16,
        "max_predictions_per_seq": 4,
        "shards": [
            {
                "file": n,
                "records": records,
                "content_sha256": sha256_of(directory / n),
            }
            for n in names
        ],
    }
    (directory / "manifest.json").write_text(json.dumps(manifest))


def test_each_directory_is_checked_against_its_own_manifest(tmp_path):
    for side in ("train", "eval"):
        write_shard(tmp_path / side / f"{side}-0.tfrecord", 3)
        write_listing_manifest(tmp_path / side, [f"{side}-0.tfrecord"], 3)
    shard_set = open_shard_set([str(tmp_path / "train"), str(tmp_path / "eval")])
    assert len(shard_set.manifests) == 2
    result = validate_shard_set(shard_set, whole_set=True, workers=1)
    assert result.findings == [] and result.records == 6 and result.shards == 2

    write_listing_manifest(tmp_path / "eval", ["eval-0.tfrecord", "eval-1.tfrecord"], 4)
    shard_set = open_shard_set([str(tmp_path / "train"), str(tmp_path / "eval")])
    findings = validate_shard_set(shard_set, whole_set=True, workers=1).findings
    assert findings == [
        f"{tmp_path}/eval/eval-0.tfrecord: 3 records, the manifest says 4",
        "1 shard(s) in the manifest were not found: eval-1.tfrecord",
    ]


def test_a_named_manifest_covers_every_shard(tmp_path):
    write_shard(tmp_path / "a" / "a-0.tfrecord", 2)
    write_shard(tmp_path / "b" / "b-0.tfrecord", 2)
    write_listing_manifest(tmp_path / "a", ["a-0.tfrecord"], 2)
    shard_set = open_shard_set(
        [str(tmp_path / "a"), str(tmp_path / "b")],
        manifest_path=str(tmp_path / "a" / "manifest.json"),
    )
    result = validate_shard_set(shard_set, whole_set=True, named_manifest=True, workers=1)
    assert result.findings == [f"{tmp_path}/b/b-0.tfrecord: not listed in the manifest"]
