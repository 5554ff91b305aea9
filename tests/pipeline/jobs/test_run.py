"""``bertprep run``: the whole job on the embedded sample, resuming after a kill, rerunning exactly
what a config change affects, and clear config errors.

The uninterrupted sample job is run once per runner mode for the whole module (``sample_runs``);
the tests that compare against it or start from it share those runs (one xdist group)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.jobs.run import format_summary, run_all
from pipeline.jobs.run_config import ConfigError, load_run_config
from pipeline.jobs.tokenize import INDEX_PATTERN
from pipeline.runtime.beam_options import make_pipeline_options
from tests.pipeline.killed_writes import beam_temp_dir, killed_write
from tests.pipeline.shard_reading import read_shards

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "configs" / "sample.yaml"
CLI_DEFAULTS = "cli-defaults"
"""``run``'s mode for the CLI's own runner defaults (multi-process, a worker per core)."""

pytestmark = pytest.mark.xdist_group("sample_runs")  # one set of shared runs per session


def run(tmp_path: Path, *overrides: str, mode: str = "in_memory", force=()) -> dict:
    config = load_run_config(SAMPLE, [f"output={tmp_path / 'out'}", *overrides])
    if mode == CLI_DEFAULTS:
        flags: list[str] = []
    else:
        flags = [
            f"--direct_running_mode={mode}",
            f"--direct_num_workers={2 if mode != 'in_memory' else 1}",
        ]
    return run_all(
        config, lambda: make_pipeline_options(flags), set(force), progress=lambda m: None
    )


class SampleRuns:
    """The sample job, uninterrupted and with the default config, run once per mode on first
    use: ``get(mode)`` is ``(summary, output directory)``. Tests must not write into it (copy
    it first)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[str, tuple[dict, Path]] = {}

    def get(self, mode: str) -> tuple[dict, Path]:
        if mode not in self.done:
            where = self.root / mode
            self.done[mode] = (run(where, mode=mode), where / "out")
        return self.done[mode]


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory) -> SampleRuns:
    return SampleRuns(tmp_path_factory.mktemp("sample-runs"))


def statuses(summary: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in summary["stages"]}


def shard_hashes(out: Path) -> dict[str, list[str]]:
    """content_sha256 of every shard of every phase and side, from the manifests."""
    return {
        str(m.relative_to(out)): [s["content_sha256"] for s in json.loads(m.read_text())["shards"]]
        for m in sorted(out.glob("seq*/*/manifest.json"))
    }


def test_each_phase_job_writes_alone_what_it_wrote_sharing_stages(sample_runs, tmp_path):
    """The run's phases are four jobs reading token files in shared stages (one bucket-slice,
    one instance-creation, one shard-writing stage for all): each job, run again on its own
    from its manifest's config, writes the same shards, counts and totals."""
    from pipeline.jobs.instances import InstancesJobConfig, run_instances_job

    _, out = sample_runs.get(CLI_DEFAULTS)
    manifests = sorted(out.glob("seq*/*/manifest.json"))
    assert len(manifests) == 4
    for path in manifests:
        shared = json.loads(path.read_text())
        alone_out = tmp_path / path.parent.relative_to(out)
        config = InstancesJobConfig(**{**shared["config"], "output": str(alone_out)})
        assert config.pretokenized
        alone = run_instances_job(config, make_pipeline_options([]), progress=lambda m: None)
        assert alone["shards"] == shared["shards"], path
        assert alone["counts"] == shared["counts"], path
        assert alone["totals"] == shared["totals"], path


def split_ids(out: Path, side: str) -> list[str]:
    files = sorted((out / "split" / side).glob("documents-*.parquet"))
    return sorted(i for f in files for i in pq.read_table(f).column("doc_id").to_pylist())


def test_whole_job_on_the_sample_multi_process(sample_runs):
    summary, out = sample_runs.get(CLI_DEFAULTS)
    assert set(statuses(summary).values()) == {"ran"}
    assert (out / "run_summary.json").exists()
    assert summary["split"]["eval"] > 0 and summary["split"]["train"] > 0
    for phase, (seq, preds) in {"seq128": (128, 20), "seq512": (512, 80)}.items():
        row = next(r for r in summary["phases"] if r["phase"] == phase)
        for side in ("train", "eval"):
            files = sorted((out / phase / side).glob("instances-*.tfrecord"))
            data = read_shards(files, seq, preds)
            assert len(data["input_ids"]) == row[side]["instances"] > 0
            assert 0 <= row[side]["single_sentence_chunks"] <= row[side]["pairs"]
    # No document is on both sides of the split, and the split keeps the clean stage's ids.
    train_ids, eval_ids = split_ids(out, "train"), split_ids(out, "eval")
    assert train_ids and eval_ids and not set(train_ids) & set(eval_ids)
    assert len(train_ids) == summary["split"]["train"] and len(eval_ids) == summary["split"]["eval"]
    # The same shards, byte for byte, from a single-process run into another directory.
    single, other = sample_runs.get("in_memory")
    assert other != out
    assert shard_hashes(other) == shard_hashes(out)
    assert single["split"] == summary["split"]
    assert split_ids(other, "eval") == eval_ids


def test_config_change_reruns_exactly_the_affected_stages(tmp_path, sample_runs):
    first, done = sample_runs.get("in_memory")
    assert set(statuses(first).values()) == {"ran"}
    # A finished run moved to another directory (its config's output moved with it) is still
    # up to date there.
    shutil.copytree(done, tmp_path / "out")
    again = run(tmp_path)
    assert set(statuses(again).values()) == {"skipped"}
    changed = run(tmp_path, "phases.0.dupe_factor=2")
    assert statuses(changed) == {
        "clean": "skipped",
        "split": "skipped",
        "vocab": "skipped",
        "tokenize": "skipped",
        "phase:seq128": "ran",
        "phase:seq512": "skipped",
    }
    resplit = run(tmp_path, "phases.0.dupe_factor=2", "eval.fraction=0.2")
    assert statuses(resplit) == {
        "clean": "skipped",
        "split": "ran",
        "vocab": "ran",
        "tokenize": "ran",
        "phase:seq128": "ran",
        "phase:seq512": "ran",
    }
    forced = run(tmp_path, "phases.0.dupe_factor=2", "eval.fraction=0.2", force=["vocab"])
    assert statuses(forced)["vocab"] == "ran" and statuses(forced)["clean"] == "skipped"
    # Later-stage keys that only `bertprep run --set` reaches now rerun just their phase, and
    # reach its job (the shards are gzip files, the manifest records the settings).
    later = ("phases.0.dupe_factor=2", "eval.fraction=0.2")
    tuned = run(
        tmp_path,
        *later,
        "phases.0.compression=gzip",
        "phases.0.bucket_size=50",
        "phases.0.reference_random_next=true",
    )
    assert {k for k, v in statuses(tuned).items() if v == "ran"} == {"phase:seq128"}
    out = tmp_path / "out"
    manifest = json.loads((out / "seq128" / "train" / "manifest.json").read_text())
    assert manifest["config"]["compression"] == "gzip"
    assert manifest["config"]["bucket_size"] == 50
    assert manifest["config"]["reference_random_next"] is True
    assert list((out / "seq128" / "train").glob("*.tfrecord.gz"))
    # The clean stage's fingerprint is its whole job config: a new text field reruns it.
    refield = run(tmp_path, *later, "inputs.text_field=body")
    assert statuses(refield)["clean"] == "ran"
    clean = json.loads((out / "clean" / "manifest.json").read_text())
    assert clean["config"]["text_field"] == "body"


@pytest.mark.parametrize("kill_in", ["clean", "phase"])
def test_killed_run_resumes_to_the_same_shards(tmp_path, kill_in, sample_runs):
    out = tmp_path / "out"
    cmd = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "run",
        "--set",
        f"output={out}",
        "--direct_running_mode=in_memory",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def reached() -> bool:
        if kill_in == "clean":  # a chunk is staged: the clean stage is half done
            return any((out / "clean" / ".staging").glob("chunk-*.parquet"))
        return (out / "vocab" / "stage.json").exists()  # the first phase is about to start

    deadline = time.monotonic() + 240
    while not reached():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "seq512" / "stage.json").exists()
    resumed = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    if kill_in == "clean":
        assert "clean: running" in resumed.stderr
    else:
        for stage in ("clean", "split", "vocab"):
            assert f"{stage}: up to date" in resumed.stderr
        assert "phase:seq512: running" in resumed.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert all(r["train"]["instances"] > 0 for r in summary["phases"])
    manifest = json.loads((out / "seq128" / "train" / "manifest.json").read_text())
    assert manifest["totals"]["instances"] == summary["phases"][0]["train"]["instances"]
    # A killed and resumed run writes what an uninterrupted one writes, and leaves no staging.
    assert shard_hashes(out) == shard_hashes(sample_runs.get("in_memory")[1])
    assert not list(out.rglob(".staging")) and not list(out.rglob("*.partial-*"))


def test_config_errors_name_the_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("inputs:\n  books: [x.txt]\nphases:\n  - name: a\n    max_seq_lenght: 64\n")
    with pytest.raises(
        ConfigError,
        match=r"phases\[0\]\.max_seq_lenght: unknown key "
        r"\(did you mean max_seq_length\?\)",
    ):
        load_run_config(bad)
    with pytest.raises(ConfigError, match="phases.0.dupe_factor|phases\\[0\\].dupe_factor"):
        load_run_config(SAMPLE, ["phases.0.dupe_factor=many"])
    with pytest.raises(ConfigError, match="eval.fraction"):
        load_run_config(SAMPLE, ["eval.fraction=1.5"])
    bad.write_text("- not a mapping\n")
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        load_run_config(bad)


def test_phases_read_the_token_files_in_place_keyed_by_document_id(tmp_path):
    summary = run(tmp_path, "phases=[{name: seq128, dupe_factor: 2, num_shards: 3}]")
    out = tmp_path / "out"
    manifest = json.loads((out / "seq128" / "train" / "manifest.json").read_text())
    assert manifest["config"]["pretokenized"] is True
    assert manifest["config"]["inputs"] == [str(out / "tokens" / "train" / INDEX_PATTERN)]
    tokens = json.loads((out / "tokens" / "train" / "manifest.json").read_text())
    indexed = [
        k
        for f in sorted((out / "tokens" / "train").glob("tokens-*.index.parquet"))
        for k in pq.read_table(f).column("key").to_pylist()
    ]
    # Token files are keyed by the clean stage's document ids, and count every document.
    assert sorted(indexed) == split_ids(out, "train")
    assert sum(tokens["files"].values()) == len(indexed) == manifest["totals"]["documents"]
    assert summary["phases"][0]["train"]["instances"] == manifest["totals"]["instances"]


def test_documents_that_tokenize_to_nothing_are_a_clear_error(tmp_path, monkeypatch):
    from pipeline.jobs.run import EmptyTokensError
    from tests.conftest import require_corpora

    monkeypatch.setenv("NLTK_DATA", str(require_corpora("nltk_data")))
    corpus = tmp_path / "marks.jsonl"
    # Combining accents alone: words to the cleaner, nothing once lower-cased and stripped.
    corpus.write_text(
        "".join(json.dumps({"text": " ".join(["\u0301"] * n)}) + "\n" for n in (30, 31, 32))
    )
    config = load_run_config(
        SAMPLE,
        [
            f"output={tmp_path / 'out'}",
            "inputs.wikipedia=[]",
            "inputs.books=[]",
            f"inputs.jsonl=[{corpus}]",
            "clean.dedup=none",
            "eval.fraction=0",
            f"vocab.path={ROOT / 'sample' / 'vocab.txt'}",
        ],
    )
    options = lambda: make_pipeline_options(["--direct_running_mode=in_memory"])  # noqa: E731
    with pytest.raises(EmptyTokensError, match="none of the 3 training documents"):
        run_all(config, options, progress=lambda m: None)
    rejects = (tmp_path / "out" / "tokens" / "train" / "rejects.jsonl").read_text().splitlines()
    assert len(rejects) == 3 and all("dropped_empty_document" in r for r in rejects)


def test_config_errors_before_any_work_keep_every_marker(tmp_path, capsys):
    from pipeline.cli import main

    phases = "phases=[{name: seq128, dupe_factor: 1, num_shards: 1, eval_num_shards: 1}]"
    run(tmp_path, phases)
    out = tmp_path / "out"
    markers = {p: p.read_bytes() for p in sorted(out.rglob("stage.json"))}
    assert out / "seq128" / "stage.json" in markers
    argv = ["run", "--config", str(SAMPLE), "--set", f"output={out}", "--set", phases]
    argv += ["--direct_running_mode=in_memory"]

    code = main([*argv, "--set", "phases.0.max_predictions_per_seq=5"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    # Named as the user wrote it: config keys, not the instances command's flags.
    assert "phases[0].max_predictions_per_seq 5 is too small" in err
    assert "set phases[0].allow_prediction_cap: true" in err and "--allow" not in err
    assert {p: p.read_bytes() for p in sorted(out.rglob("stage.json"))} == markers

    code = main([*argv, "--force", "bogus"])
    err = capsys.readouterr().err
    assert code == 2 and "--force bogus: no such stage" in err
    assert "clean, split, vocab, tokenize, phase:seq128, phase, all" in err
    code = main([*argv, "--force", "phase:seq12"])
    assert code == 2 and "did you mean phase:seq128?" in capsys.readouterr().err
    assert {p: p.read_bytes() for p in sorted(out.rglob("stage.json"))} == markers

    assert main(argv) == 0  # the correct run redoes nothing
    capsys.readouterr()
    summary = json.loads((out / "run_summary.json").read_text())
    assert set(statuses(summary).values()) == {"skipped"}


def test_the_summary_reads_as_words_not_python(tmp_path):
    """Drops in words, singular shard, sizes in kB, IsNext explained against the README's 50/50."""
    summary = {
        "output": str(tmp_path),
        "stages": [{"name": "clean", "status": "ran", "seconds": 1.0}],
        "documents": 101,
        "sentences": 1867,
        "split": {"train": 96, "eval": 5},
        "vocab": {"size": 3000},
        "counts": {
            "books": {
                "documents_out": 3,
                "dropped_nonprose_paragraphs": 57,
                "dropped_nonprose_no_letters": 57,
            },
            "wikipedia": {"documents_out": 98, "dropped_too_short": 8, "dropped_redirect": 1},
        },
        "phases": [
            {
                "phase": "seq128",
                "train": {
                    "instances": 1814,
                    "shards": 4,
                    "is_next_ratio": 0.438809,
                    "pairs": 1814,
                    "single_sentence_chunks": 169,
                    "bytes": 1_489_701,
                },
                "eval": {"instances": 17, "shards": 1, "is_next_ratio": 0.470588, "bytes": 14136},
            }
        ],
        "seconds": 40.7,
    }
    text = format_summary(summary)
    assert "{" not in text and "'" not in text
    assert "books: 3 documents out; 57 non-prose paragraphs cut (no letters 57)" in text
    assert "wikipedia: 98 documents out; 9 documents dropped (too short 8, redirect 1)" in text
    assert "seq128/eval: 17 instances in 1 shard, 14 kB, IsNext 47.1%" in text
    assert (
        "seq128/train: 1,814 instances in 4 shards, 1.5 MB, "
        "IsNext 43.9% (48.4% of 1,645 chunks of 2+ sentences)"
    ) in text
    assert "always takes a random" in text and "google-research/bert" in text
    assert " 0.0 MB" not in text and "1 shards" not in text


def test_run_help_names_every_stage_with_tokenize(capsys):
    from pipeline.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "tokenize (every document's sentences to token ids, once" in text
    assert "clean, split, vocab, tokenize, phase:NAME, phase (every phase), all" in text


def _file_names(out: Path) -> list[str]:
    return sorted(
        str(p.relative_to(out))
        for stage in ("clean", "split", "tokens", "seq128", "seq512")
        for p in (out / stage).rglob("*")
        if p.is_file()
    )


@pytest.mark.slow
def test_a_rerun_after_a_kill_leaves_no_partial_files_and_the_same_output(tmp_path, sample_runs):
    """A real ``bertprep run`` killed (SIGKILL) in the clean stage, and what killed attempts of
    each stage leave (a writer killed half way through a file, a Beam sink's temporary
    directory): the rerun commits every stage without any of it, and writes what an
    uninterrupted run writes."""
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "pipeline.cli", "run", "--set", f"output={out}"]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 240
    while not any((out / "clean" / ".staging").glob("chunk-*.parquet")):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    litter = [
        killed_write(out / "clean" / "documents-00000-0000.parquet", "parquet"),
        killed_write(out / "clean" / "punkt" / "english.json"),
        killed_write(out / "split" / "train" / "documents-00000-0000.parquet", "parquet"),
        killed_write(out / "tokens" / "train" / "tokens-00000-0000.bin"),
        killed_write(out / "vocab" / "vocab.txt"),
        beam_temp_dir(out / "seq128" / "train"),
    ]
    resumed = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not any(p.exists() for p in litter)
    assert not list(out.rglob("*.partial-*")) and not list(out.rglob("beam-temp-*"))
    # the same job with the same runner defaults, never interrupted (the file layout is the
    # runner mode's: compare like with like)
    uninterrupted = sample_runs.get(CLI_DEFAULTS)[1]
    assert shard_hashes(out) == shard_hashes(uninterrupted)
    assert _file_names(out) == _file_names(uninterrupted)
