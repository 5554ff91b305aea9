"""The CLI keeps Beam's and TensorFlow's start-up chatter off stderr (launcher and multi-process
workers alike) unless --verbose."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CHATTER = (
    "apitools not found",
    "Logging handler created",
    "semi_persistent_directory",
    "Discarding unparseable args",
    "absl::InitializeLog",
    "cuda drivers",
    "cuInit",
    "oneDNN",
)


def bertprep(blocker: Path, *args: str) -> subprocess.CompletedProcess:
    """Runs the CLI as a fresh ``.venv`` would: without Beam's GCP extras (``apitools``), whose
    absence makes every Beam process log a warning at import."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_CPP_MIN_LOG_LEVEL", "BERTPREP_QUIET", "PYTHONPATH")
    }
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(blocker)])
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def chatter_in(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(c in line for c in CHATTER)]


def test_multi_process_jobs_and_shard_tools_print_no_beam_or_tensorflow_chatter(
    tmp_path, sample_vocab_path
):
    blocker = tmp_path / "no_gcp_extras"
    (blocker / "apitools").mkdir(parents=True)
    (blocker / "apitools" / "__init__.py").write_text("raise ImportError('not installed')\n")
    out = tmp_path / "out"
    job = [
        "instances",
        "--input",
        str(ROOT / "sample" / "corpus" / "*.txt"),
        "--vocab",
        str(sample_vocab_path),
        "--output",
        str(out),
        "--num-shards",
        "2",
        "--dupe-factor",
        "1",
        "--direct_running_mode=multi_processing",
        "--direct_num_workers=2",
    ]
    quiet = bertprep(blocker, *job)
    assert quiet.returncode == 0, quiet.stderr
    assert chatter_in(quiet.stderr) == [], quiet.stderr
    assert "[bertprep instances]" in quiet.stderr

    stats = bertprep(blocker, "stats", str(out))
    assert stats.returncode == 0, stats.stderr
    assert stats.stderr == ""

    verbose = bertprep(blocker, "--verbose", *job)
    assert verbose.returncode == 0, verbose.stderr
    assert chatter_in(verbose.stderr), "--verbose should show Beam's worker logs"
