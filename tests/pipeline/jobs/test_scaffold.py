"""The job scaffold: every job clears its earlier output, reconciles and writes its manifest the
same way."""

from __future__ import annotations

import json

import pytest

from pipeline.jobs.scaffold import (
    ReconciliationError,
    prepare_output,
    reconcile,
    write_manifest,
)
from tests.pipeline.killed_writes import beam_temp_dir, killed_write


def test_prepare_output_clears_only_the_jobs_own_files(tmp_path):
    out = tmp_path / "out"
    (out / ".staging").mkdir(parents=True)
    (out / ".staging" / "part").write_text("x")
    for name in ("manifest.json", ".pipeline-result.json", "documents-0.parquet", "keep.txt"):
        (out / name).write_text("x")
    assert prepare_output(str(out), ["documents-*.parquet"], trees=[".staging"]) == 3
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    prepare_output(str(tmp_path / "new"), [])
    assert (tmp_path / "new").is_dir()


def test_reconcile_names_both_counts():
    reconcile("documents", 5, 5)
    with pytest.raises(ReconciliationError, match="documents: the workers counted 5, the output"):
        reconcile("documents", 5, 4)

    class Mine(ReconciliationError):
        pass

    with pytest.raises(Mine):
        reconcile("rows", 1, 2, Mine)


def test_every_manifest_has_its_format_and_elapsed_seconds(tmp_path):
    written = write_manifest(str(tmp_path), "bertprep.test/1", {"totals": {"n": 1}}, 1.23456)
    assert written == {"format": "bertprep.test/1", "totals": {"n": 1}, "elapsed_seconds": 1.23}
    assert json.loads((tmp_path / "manifest.json").read_text()) == written
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name]


def _litter(out):
    """What killed attempts leave: unfinished writes of killed processes beside the output and
    one directory down, Beam sink temporary directories (one empty); returns the paths."""
    return [
        killed_write(out / "documents-00000-0000.parquet", "parquet"),
        killed_write(out / "train" / "documents-00000-0000.parquet", "parquet"),
        killed_write(out / "text" / "part-00000-0000.txt"),
        beam_temp_dir(out),
        beam_temp_dir(out / "eval", files=0),
    ]


def _kept(out):
    """Files that are not litter, or lie deeper than the jobs write."""
    kept = [out / "keep.txt", out / "train" / "keep.parquet", out / "a" / "b" / "x.partial-deep"]
    for path in kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    return kept


def test_a_rerun_clears_what_killed_attempts_left(tmp_path):
    out = tmp_path / "out"
    litter, kept = _litter(out), _kept(out)
    prepare_output(str(out), ["documents-*.parquet"])
    assert not any(p.exists() for p in litter)
    assert all(p.exists() for p in kept)


def test_the_commit_clears_what_killed_attempts_left(tmp_path):
    out = tmp_path / "out"
    litter, kept = _litter(out), _kept(out)
    write_manifest(str(out), "bertprep.test/1", {}, 0.0)
    assert not any(p.exists() for p in litter)
    assert all(p.exists() for p in kept)
    assert (out / "manifest.json").exists()
