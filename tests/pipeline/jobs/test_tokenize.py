"""The split and tokenize jobs run as one pipeline (``run_split_and_tokenize_jobs``, what ``bertprep
run`` does with a given vocabulary) write exactly what the two jobs write one after the other."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.jobs.clean import run_clean_job
from pipeline.jobs.run import clean_job_config
from pipeline.jobs.run_config import load_run_config
from pipeline.jobs.split import run_split_job
from pipeline.jobs.tokenize import run_split_and_tokenize_jobs, run_tokenize_job
from pipeline.runtime.beam_options import make_pipeline_options

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "configs" / "sample.yaml"
VOCAB = ROOT / "sample" / "vocab.txt"


def options(mode: str = "multi_processing"):
    return make_pipeline_options([f"--direct_running_mode={mode}", "--direct_num_workers=2"])


@pytest.fixture(scope="module")
def clean_dir(tmp_path_factory) -> Path:
    """The embedded sample, cleaned as ``bertprep run`` cleans it."""
    out = tmp_path_factory.mktemp("run") / "out"
    config = load_run_config(SAMPLE, [f"output={out}"])
    run_clean_job(clean_job_config(config), options("in_memory"), progress=lambda m: None)
    return out / "clean"


def files_of(directory: Path) -> dict[str, bytes]:
    """Every data file under ``directory`` (not manifests, markers or progress files)."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.suffix in (".parquet", ".bin", ".jsonl") and ".progress" not in str(p)
    }


def without_elapsed(manifest: dict) -> dict:
    return {k: v for k, v in manifest.items() if k not in ("elapsed_seconds", "written_at")}


def separately(clean: Path, out: Path, fraction: float) -> tuple[dict, dict]:
    documents = run_split_job(str(clean), str(out / "split"), 7, fraction, options())
    sides = {
        side: (str(out / "split" / side / "documents-*.parquet"), str(out / "tokens" / side))
        for side in ("train", "eval")
        if documents[side]
    }
    return documents, run_tokenize_job(sides, str(VOCAB), True, options())


@pytest.mark.parametrize("fraction", [0.2, 0.0, 1.0])
def test_one_pipeline_writes_what_the_two_jobs_write(clean_dir: Path, tmp_path: Path, fraction):
    apart, together = tmp_path / "apart", tmp_path / "together"
    documents, manifests = separately(clean_dir, apart, fraction)
    fused_documents, fused_manifests = run_split_and_tokenize_jobs(
        str(clean_dir),
        str(together / "split"),
        7,
        fraction,
        str(together / "tokens"),
        str(VOCAB),
        True,
        options(),
        total_documents=sum(documents.values()),
    )
    assert fused_documents == documents
    assert (
        sorted(fused_manifests)
        == sorted(manifests)
        == [s for s in ("eval", "train") if documents[s]]
    )
    for side, manifest in manifests.items():
        assert without_elapsed(fused_manifests[side]) == without_elapsed(manifest)
        assert manifest["counts"]["tokenized_documents"] == documents[side]
    assert files_of(together) == files_of(apart)
    split_manifest = json.loads((together / "split" / "manifest.json").read_text())
    assert split_manifest["documents"] == documents
    # no counts file or other scratch left behind in either side
    for side in ("train", "eval"):
        assert not (together / "tokens" / side / ".pipeline-result.json").exists()


def test_run_with_a_given_vocab_splits_and_tokenizes_in_one_pipeline(tmp_path: Path):
    from pipeline.jobs.run import run_all

    phases = "phases=[{name: seq64, max_seq_length: 64, dupe_factor: 1, num_shards: 2, eval_num_shards: 1}]"
    overrides = [f"output={tmp_path / 'out'}", f"vocab.path={VOCAB}", phases]

    def run(force=()):
        config = load_run_config(SAMPLE, overrides)
        summary = run_all(config, lambda: options("in_memory"), set(force), progress=lambda m: None)
        return {s["name"]: s for s in summary["stages"]}

    first = run()
    assert first["split"]["status"] == first["tokenize"]["status"] == "ran"
    assert first["split"]["shared_with"] == ["tokenize"]  # one piece of work
    tokens = files_of(tmp_path / "out" / "tokens")
    again = run(force=["tokenize"])
    assert again["split"]["status"] == "skipped" and again["tokenize"]["status"] == "ran"
    assert files_of(tmp_path / "out" / "tokens") == tokens
    split_only = run(force=["split"])
    assert split_only["split"]["status"] == "ran" and split_only["tokenize"]["status"] == "skipped"
