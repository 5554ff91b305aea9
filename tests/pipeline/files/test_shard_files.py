"""``BeamFiles`` on an object store (a GCS emulator on loopback, ``benchmarks.gcs_emulator``): a
run directory's phases, phase directories and globs resolve to the same phases and files on a
bucket as on local disk, although a bucket has no directories (only prefixes), and the shard tools
answer the same on both."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.gcs_emulator import GcsEmulator
from tests.shards.test_resolve import write_shard

ROOT = Path(__file__).resolve().parents[3]
BUCKET = "shards"
PATTERNS = [
    "run",  # several phases: an error naming them
    "run/seq16",  # a phase: its train shards
    "run/seq32/eval",
    "run/*/train/*.tfrecord",
    "run/seq16/train/part-00001-of-00002.tfrecord",
    "one",  # a run with one phase: its train shards
    "one/seq16/",
    "run/nothing-here",
]
RESOLVE = """
import json, sys
from pipeline.files.shard_files import BeamFiles
from shards.files import LocalFiles, ShardPathError
from shards.resolve import expand_shard_paths
root, patterns = sys.argv[1], json.loads(sys.argv[2])
access = BeamFiles() if root.startswith("gs://") else LocalFiles()
answers = {}
for p in patterns:
    try:
        answers[p] = expand_shard_paths([f"{root}/{p}"], access)
    except ShardPathError as e:
        answers[p] = "error: " + str(e)
print(json.dumps(answers).replace(root, "ROOT"))
"""


def write_phase(out: Path, seq: int, records: int) -> None:
    """``OUT/seq{seq}/{train,eval}/``: two shards and their manifest each, and the markers."""
    phase = out / f"seq{seq}"
    for side in ("train", "eval"):
        names = [f"part-{i:05d}-of-00002.tfrecord" for i in range(2)]
        paths = [write_shard(phase / side / n, records, seq=seq) for n in names]
        manifest = {
            "max_seq_length": seq,
            "max_predictions_per_seq": 4,
            "config": {"compression": "none"},
            "shards": [
                {
                    "file": p.name,
                    "records": records,
                    "content_sha256": hashlib.sha256(p.read_bytes()).hexdigest(),
                    "bytes": p.stat().st_size,
                }
                for p in paths
            ],
        }
        (phase / side / "manifest.json").write_text(json.dumps(manifest))
    (phase / "stage.json").write_text("{}")


@pytest.fixture(scope="module")
def trees(tmp_path_factory):
    """(local root, gs:// root, emulator): the same trees on local disk and in a bucket."""
    local = tmp_path_factory.mktemp("trees")
    write_phase(local / "run", 16, 3)
    write_phase(local / "run", 32, 2)
    (local / "run" / "run_summary.json").write_text("{}")
    (local / "run" / "clean").mkdir()
    (local / "run" / "clean" / "stage.json").write_text("{}")
    write_phase(local / "one", 16, 3)
    (local / "one" / "run_summary.json").write_text("{}")
    with GcsEmulator(tmp_path_factory.mktemp("emulator")) as emulator:
        emulator.create_bucket(BUCKET)
        remote = f"gs://{BUCKET}/trees"
        for f in sorted(local.rglob("*")):
            if f.is_file():
                emulator.upload(f, f"{remote}/{f.relative_to(local)}")
        yield local, remote, emulator


def run(args: list[str], env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_bucket_resolves_like_local_disk(trees):
    local, remote, emulator = trees
    answers = []
    for root in (str(local), remote):
        done = run(["-c", RESOLVE, root, json.dumps(PATTERNS)], env=emulator.env())
        assert done.returncode == 0, done.stderr[-3000:]
        answers.append(json.loads(done.stdout))
    on_disk, in_bucket = answers
    assert in_bucket == on_disk
    assert on_disk["run"] == (
        "error: ROOT/run is a run directory with several phases (seq16, seq32): name one, "
        "e.g. ROOT/run/seq16 (its train shards) or ROOT/run/seq16/eval"
    )
    train = [f"ROOT/run/seq16/train/part-{i:05d}-of-00002.tfrecord" for i in range(2)]
    assert on_disk["run/seq16"] == train
    assert on_disk["one"] == [t.replace("/run/", "/one/") for t in train]
    assert on_disk["run/*/train/*.tfrecord"] == [*train, *(t.replace("16", "32") for t in train)]
    assert on_disk["run/nothing-here"] == "error: no shard files match ROOT/run/nothing-here"


@pytest.mark.parametrize("target", ["run", "one", "run/seq32"])
def test_validate_answers_the_same_on_a_bucket(trees, target):
    local, remote, emulator = trees
    answers = []
    for root in (str(local), remote):
        done = run(
            ["-m", "pipeline.cli", "validate", f"{root}/{target}", "--json", "--workers", "1"],
            env=emulator.env(),
        )
        answers.append((done.returncode, done.stdout.replace(root, "ROOT"), done.stderr))
    (code, out, err), (remote_code, remote_out, remote_err) = answers
    assert (remote_code, remote_out) == (code, out), remote_err[-3000:]
    if target == "run":
        assert code == 2 and "several phases (seq16, seq32)" in err
        assert remote_err.replace(remote, "ROOT") == err.replace(str(local), "ROOT")
    else:
        report = json.loads(out)
        assert code == 0 and report["valid"] and report["shards"] == 2, out + err
