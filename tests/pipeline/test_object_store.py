"""The whole job with every input and output on ``gs://`` (an emulated bucket on loopback), in the
default multi-process mode, against the same job on local disk: the same shards, byte for byte
(fixture ``cloud``, ``tests.pipeline.cloud_runs``).

TensorFlow's own GCS filesystem (the trainer's input pipeline) cannot be pointed at an emulator:
its endpoints are fixed to https://www.googleapis.com, so the trainer is tested on local shards
only.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.pipeline.cloud_runs import BUCKET, bertprep

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cloud")]  # one emulator run


def manifests(out: Path) -> dict[str, dict]:
    return {
        str(m.relative_to(out)): json.loads(m.read_text())
        for m in sorted(out.glob("seq*/*/manifest.json"))
    }


def test_run_on_gcs_writes_the_same_shards_as_on_local_disk(cloud):
    local_out, copy = cloud.local_out, cloud.remote_copy
    local, remote = manifests(local_out), manifests(copy)
    assert sorted(local) == sorted(remote)
    assert {"seq128/train/manifest.json", "seq512/eval/manifest.json"} <= set(local)
    for name in local:
        assert [s["content_sha256"] for s in remote[name]["shards"]] == [
            s["content_sha256"] for s in local[name]["shards"]
        ], name
        assert remote[name]["totals"] == local[name]["totals"], name
        assert remote[name]["counts"] == local[name]["counts"], name
    for shard in sorted(local_out.glob("seq*/*/*.tfrecord")):
        assert (copy / shard.relative_to(local_out)).read_bytes() == shard.read_bytes(), shard


def test_document_ids_do_not_depend_on_where_the_corpus_is_stored(cloud):
    local_out, copy = cloud.local_out, cloud.remote_copy
    for side in ("train", "eval"):
        ids = [
            sorted(
                i
                for f in sorted((out / "split" / side).glob("documents-*.parquet"))
                for i in pq.read_table(f).column("doc_id").to_pylist()
            )
            for out in (local_out, copy)
        ]
        assert ids[0] == ids[1] and ids[0], side
    train_ids = {
        i
        for f in (local_out / "split" / "train").glob("documents-*.parquet")
        for i in pq.read_table(f).column("doc_id").to_pylist()
    }
    assert "books/sample-book-1.txt" in train_ids | {
        i
        for f in (local_out / "split" / "eval").glob("documents-*.parquet")
        for i in pq.read_table(f).column("doc_id").to_pylist()
    }
    assert any(re.fullmatch(r"wikipedia/samplewiki-pages-articles\.xml/\d+", i) for i in train_ids)


def test_every_stage_ran_on_the_bucket(cloud):
    copy, stderr = cloud.remote_copy, cloud.remote_stderr
    summary = json.loads((copy / "run_summary.json").read_text())
    assert [s["status"] for s in summary["stages"]] == ["ran"] * len(summary["stages"])
    assert "Traceback" not in stderr


def local_answer(capsys, *args: str) -> str:
    """The answer of a shard tool run in this process (the local side needs no emulator)."""
    from pipeline.cli import main

    capsys.readouterr()
    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", ["stats", "validate"])
def test_shard_tools_read_gcs_shards(cloud, command, capsys):
    emulator, local_out = cloud.emulator, cloud.local_out
    where = f"gs://{BUCKET}/out"
    done = bertprep(command, f"{where}/seq128/train", "--json", env=emulator.env())
    assert done.returncode == 0, done.stderr[-2000:]
    remote = json.loads(done.stdout.replace(where, "OUT"))
    local = local_answer(capsys, command, f"{local_out}/seq128/train", "--json")
    assert remote == json.loads(local.replace(str(local_out), "OUT"))
    if command == "validate":
        assert remote["valid"] and remote["records"] > 0


def test_inspect_decodes_gcs_shards(cloud, capsys):
    emulator, local_out = cloud.emulator, cloud.local_out
    shard = "seq128/train/instances-00000-of-00004.tfrecord"
    where = f"gs://{BUCKET}/out"
    done = bertprep("inspect", f"{where}/{shard}", "-n", "3", "--json", env=emulator.env())
    assert done.returncode == 0, done.stderr[-2000:]
    local = local_answer(capsys, "inspect", f"{local_out}/{shard}", "-n", "3", "--json")
    assert done.stdout.replace(where, "OUT") == local.replace(str(local_out), "OUT")
    assert local.count('"segments"') == 3
