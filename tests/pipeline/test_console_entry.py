"""The ``bertprep`` executable (``pipeline.cli.console_entry``) ends the process without the
interpreter's teardown, and loses nothing by it: exit status, atexit handlers, piped output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import atexit, sys
from pathlib import Path
marker = Path(sys.argv[1])
atexit.register(lambda: marker.write_text("atexit ran"))
sys.argv = ["bertprep", *sys.argv[2:]]
import pipeline.cli
if sys.argv[1:] == ["__raise__"]:  # a bug in a command: an exception no one expects
    def failing_main():
        raise RuntimeError("a bug")
    pipeline.cli.main = failing_main
pipeline.cli.console_entry()
raise SystemExit("console_entry returned")
"""


def entry(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    marker = tmp_path / "marker"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(marker), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, marker


def test_a_finished_job_exits_0_with_its_output_flushed_and_atexit_run(tmp_path, sample_vocab_path):
    out = tmp_path / "out"
    done, marker = entry(
        tmp_path,
        "instances",
        "--input",
        str(ROOT / "sample" / "corpus" / "*.txt"),
        "--vocab",
        str(sample_vocab_path),
        "--output",
        str(out),
        "--num-shards",
        "2",
        "--max-seq-length",
        "64",
        "--max-predictions-per-seq",
        "10",
        "--direct_running_mode=in_memory",
    )
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "atexit ran"
    assert (out / "manifest.json").exists()
    assert "console_entry returned" not in done.stderr
    # the summary is the last thing the command prints: it reached the pipe whole
    assert (done.stdout + done.stderr).strip().splitlines()[-1].startswith("  seconds")


def test_a_user_error_exits_2_with_its_one_line(tmp_path):
    done, marker = entry(tmp_path, "validate", str(tmp_path / "no-such-shards"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("bertprep validate: error:")
    assert marker.read_text() == "atexit ran"


def test_help_exits_0_and_prints_every_command(tmp_path):
    done, marker = entry(tmp_path, "--help")
    assert done.returncode == 0
    for command in ("run", "clean", "vocab", "instances", "inspect", "stats", "validate", "train"):
        assert command in done.stdout
    assert marker.read_text() == "atexit ran"


def test_a_usage_error_exits_2(tmp_path):
    done, _ = entry(tmp_path, "no-such-command")
    assert done.returncode == 2
    assert "invalid choice" in done.stderr


def test_an_unexpected_exception_prints_its_traceback_and_exits_1(tmp_path):
    done, marker = entry(tmp_path, "__raise__")
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1] == "RuntimeError: a bug"
    assert marker.read_text() == "atexit ran"
