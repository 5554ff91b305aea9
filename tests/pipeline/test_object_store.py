"""The whole job with every input and output on ``gs://`` (an emulated bucket on loopback), in the
default multi-process mode, against the same job on local disk: the same shards, byte for byte.

The emulator (``benchmarks.gcs_emulator``) runs in a child process and stops when the module's
tests end, failed or not. bertprep runs as a subprocess with the emulator's environment, which has
to be set before Beam is imported. TensorFlow's own GCS filesystem (the trainer's input pipeline)
cannot be pointed at an emulator: its endpoints are fixed to https://www.googleapis.com, so the
trainer is tested on local shards only.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from benchmarks.gcs_emulator import GcsEmulator

pytest.importorskip("gcp_storage_emulator")
pytest.importorskip("google.cloud.storage")

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "corpus"


def bertprep(*args: str, env: dict | None = None, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
    )


def inputs(root: str) -> list[str]:
    return [
        "--set",
        f"inputs.wikipedia=[{root}/wiki/*.xml]",
        "--set",
        f"inputs.books=[{root}/books/*.txt]",
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(emulator, local output dir, copy of the gs:// output on disk, the gs:// run's stderr)."""
    work = tmp_path_factory.mktemp("object_store")
    # The local corpus sits in a directory of another name than the bucket's, so ids that
    # depended on where a corpus is stored would differ.
    local_in = work / "elsewhere" / "deeper"
    for kind, pattern in (("wiki", "*.xml"), ("books", "*.txt")):
        (local_in / kind).mkdir(parents=True)
        for f in sorted((ROOT / "sample" / kind).glob(pattern)):
            (local_in / kind / f.name).write_bytes(f.read_bytes())
    local_out = work / "local-out"
    local = bertprep(
        "run", "--set", f"output={local_out}", *inputs(str(local_in)), cwd=ROOT, env=None
    )
    assert local.returncode == 0, local.stderr[-3000:]
    with GcsEmulator(work / "emulator") as emulator:
        emulator.create_bucket(BUCKET)
        for f in sorted(local_in.rglob("*")):
            if f.is_file():
                emulator.upload(f, f"gs://{BUCKET}/in/{f.relative_to(local_in)}")
        remote = bertprep(
            "run",
            "--set",
            f"output=gs://{BUCKET}/out",
            *inputs(f"gs://{BUCKET}/in"),
            cwd=ROOT,
            env=emulator.env(),
        )
        assert remote.returncode == 0, remote.stderr[-3000:]
        copy = work / "gcs-out"
        emulator.download_prefix(f"gs://{BUCKET}/out", copy)
        yield emulator, local_out, copy, remote.stderr


def manifests(out: Path) -> dict[str, dict]:
    return {
        str(m.relative_to(out)): json.loads(m.read_text())
        for m in sorted(out.glob("seq*/*/manifest.json"))
    }


def test_run_on_gcs_writes_the_same_shards_as_on_local_disk(runs):
    _, local_out, copy, _ = runs
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


def test_document_ids_do_not_depend_on_where_the_corpus_is_stored(runs):
    _, local_out, copy, _ = runs
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


def test_every_stage_ran_on_the_bucket(runs):
    _, _, copy, stderr = runs
    summary = json.loads((copy / "run_summary.json").read_text())
    assert [s["status"] for s in summary["stages"]] == ["ran"] * len(summary["stages"])
    assert "Traceback" not in stderr


@pytest.mark.parametrize("command", ["stats", "validate"])
def test_shard_tools_read_gcs_shards(runs, command):
    emulator, local_out, _, _ = runs
    answers = []
    for where, env in ((str(local_out), None), (f"gs://{BUCKET}/out", emulator.env())):
        done = bertprep(command, f"{where}/seq128/train", "--json", env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        answers.append(json.loads(done.stdout.replace(where, "OUT")))
    assert answers[0] == answers[1]
    if command == "validate":
        assert answers[1]["valid"] and answers[1]["records"] > 0


def test_inspect_decodes_gcs_shards(runs):
    emulator, local_out, _, _ = runs
    shard = "seq128/train/instances-00000-of-00004.tfrecord"
    outputs = []
    for where, env in ((str(local_out), None), (f"gs://{BUCKET}/out", emulator.env())):
        done = bertprep("inspect", f"{where}/{shard}", "-n", "3", "--json", env=env, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-2000:]
        outputs.append(done.stdout.replace(where, "OUT"))
    assert outputs[0] == outputs[1] and outputs[0].count('"segments"') == 3
