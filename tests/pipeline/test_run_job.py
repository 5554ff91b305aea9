"""``bertprep run``: the whole job on the embedded sample, resuming after a kill, rerunning exactly
what a config change affects, and clear config errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.beam_options import make_pipeline_options
from pipeline.run_config import ConfigError, load_run_config
from pipeline.run_job import run_all
from tests.pipeline.shard_reading import read_shards

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "configs" / "sample.yaml"


def run(tmp_path: Path, *overrides: str, mode: str = "in_memory", force=()) -> dict:
    config = load_run_config(SAMPLE, [f"output={tmp_path / 'out'}", *overrides])
    return run_all(
        config,
        lambda: make_pipeline_options(
            [
                f"--direct_running_mode={mode}",
                f"--direct_num_workers={2 if mode != 'in_memory' else 1}",
            ]
        ),
        set(force),
        progress=lambda m: None,
    )


def statuses(summary: dict) -> dict[str, str]:
    return {s["name"]: s["status"] for s in summary["stages"]}


def test_whole_job_on_the_sample_multi_process(tmp_path):
    summary = run(tmp_path, mode="multi_processing")
    out = tmp_path / "out"
    assert set(statuses(summary).values()) == {"ran"}
    assert (out / "run_summary.json").exists()
    assert summary["split"]["eval"] > 0 and summary["split"]["train"] > 0
    for phase, (seq, preds) in {"seq128": (128, 20), "seq512": (512, 80)}.items():
        row = next(r for r in summary["phases"] if r["phase"] == phase)
        for side in ("train", "eval"):
            files = sorted((out / phase / side).glob("instances-*.tfrecord"))
            data = read_shards(files, seq, preds)
            assert len(data["input_ids"]) == row[side]["instances"] > 0
    # No document is on both sides of the split.
    train = (out / "split" / "train").glob("part-*.txt")
    evals = (out / "split" / "eval").glob("part-*.txt")
    train_docs = {d.strip() for f in train for d in f.read_text().split("\n\n") if d.strip()}
    eval_docs = {d.strip() for f in evals for d in f.read_text().split("\n\n") if d.strip()}
    assert train_docs and eval_docs and not train_docs & eval_docs


def test_config_change_reruns_exactly_the_affected_stages(tmp_path):
    first = run(tmp_path)
    assert set(statuses(first).values()) == {"ran"}
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


def test_killed_run_resumes_without_redoing_finished_stages(tmp_path):
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
    deadline = time.monotonic() + 240
    while not (out / "vocab" / "stage.json").exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-way: the first phase has started or is about to
    proc.wait()
    assert not (out / "seq512" / "stage.json").exists()
    resumed = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    for stage in ("clean", "split", "vocab"):
        assert f"{stage}: up to date" in resumed.stderr
    assert "tokenize: up to date" in resumed.stderr or "tokenize: running" in resumed.stderr
    assert "phase:seq512: running" in resumed.stderr
    summary = json.loads((out / "run_summary.json").read_text())
    assert all(r["train"]["instances"] > 0 for r in summary["phases"])
    manifest = json.loads((out / "seq128" / "train" / "manifest.json").read_text())
    assert manifest["totals"]["instances"] == summary["phases"][0]["train"]["instances"]


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


def test_pretokenized_input_gives_the_same_shards_as_text(tmp_path):
    from pipeline.instances_job import InstancesJobConfig, run_instances_job

    summary = run(tmp_path, "phases=[{name: seq128, dupe_factor: 2, num_shards: 3}]")
    out = tmp_path / "out"
    reference = json.loads((out / "seq128" / "train" / "manifest.json").read_text())
    assert reference["config"]["pretokenized"] is True
    settings = {
        k: reference["config"][k]
        for k in (
            "max_seq_length",
            "max_predictions_per_seq",
            "dupe_factor",
            "seed",
            "num_shards",
            "do_lower_case",
            "vocab",
        )
    }
    again = run_instances_job(
        InstancesJobConfig(
            inputs=[str(out / "split" / "train" / "part-*.txt")],
            output=str(tmp_path / "from-text"),
            **settings,
        ),
        make_pipeline_options(["--direct_running_mode=in_memory"]),
        lambda m: None,
    )
    assert again["shards"] == reference["shards"]
    assert summary["phases"][0]["train"]["instances"] == again["totals"]["instances"]
