"""Damaged shards end ``bertprep train`` in one line naming the file: a shard cut short (its size
differs from the manifest's record) before step one, a shard whose bytes are damaged in place
(same size, a record fails its checksum) at the first read of it; manifests from before sizes
were recorded are not size-checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def copy(shards, tmp_path) -> Path:
    target = tmp_path / "shards"
    shutil.copytree(shards, target)
    return target


def shard_paths(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.tfrecord"))


def drop_sizes(directory: Path) -> None:
    """The manifest as written before shard sizes were recorded."""
    manifest = json.loads((directory / "manifest.json").read_text())
    for entry in manifest["shards"]:
        del entry["bytes"]
    (directory / "manifest.json").write_text(json.dumps(manifest))


def flip_middle_byte(shard: Path) -> None:
    """Damages one record's payload in place: the size stays, its checksum fails."""
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))


def train_args(data: Path, out: Path) -> list[str]:
    return [
        "train",
        "--data",
        str(data),
        "--out",
        str(out),
        "--model",
        "tiny",
        "--max-position-embeddings",
        "64",
        "--batch-size",
        "8",
        "--steps",
        "3",
        "--warmup-steps",
        "1",
        "--checkpoint-every",
        "1",
        "--no-progress",
    ]


def bertprep(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_manifest_records_each_shard_size_in_bytes(shards):
    manifest = json.loads((shards / "manifest.json").read_text())
    sizes = {s["file"]: s["bytes"] for s in manifest["shards"]}
    assert sizes == {p.name: p.stat().st_size for p in shard_paths(shards)}


def test_a_shard_cut_short_is_refused_before_step_one(copy, tmp_path, capsys):
    from pipeline.cli import main

    shard = shard_paths(copy)[1]
    full = shard.stat().st_size
    shard.write_bytes(shard.read_bytes()[: full // 2])  # an interrupted copy
    out = tmp_path / "run"
    assert main(train_args(copy, out)) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert lines == [
        f"bertprep train: error: {shard}: {full // 2:,} bytes, the manifest says {full:,} "
        "(cut short: an interrupted copy, or changed since it was written); check the shards "
        f"with: bertprep validate {copy}"
    ], err
    assert not (out / "checkpoints").exists()


def test_manifests_without_sizes_are_not_size_checked(copy):
    from trainer.input_pipeline import resolve_shards

    shard = shard_paths(copy)[1]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    drop_sizes(copy)
    info = resolve_shards([str(copy)])  # no error: nothing to compare with
    assert len(info.files) == 2


@pytest.mark.parametrize("sizes", ["recorded", "none"])
def test_a_damaged_record_mid_training_is_one_line_naming_the_shard(copy, tmp_path, sizes):
    shard = shard_paths(copy)[1]
    flip_middle_byte(shard)
    if sizes == "none":
        drop_sizes(copy)
    done = bertprep(*train_args(copy, tmp_path / "run"))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    errors = [x for x in done.stderr.splitlines() if x.startswith("bertprep train: error:")]
    assert len(errors) == 1, done.stderr[-3000:]
    line = errors[0]
    head = (
        f"bertprep train: error: shard {shard} cannot be read (DataLossError: corrupted record at "
    )
    assert line.startswith(head), line
    assert ") at step 1: it is damaged; check the shards with: bertprep validate " in line
    assert line.endswith(f"{copy}, replace it, then rerun: no checkpoint yet, training starts over")
    assert done.stderr.strip().splitlines()[-1] == line
