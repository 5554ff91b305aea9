"""Test helper: the embedded sample's whole job run twice against an emulated GCS bucket.

1. From a local directory to a local output, described as Dataflow jobs on the way
   (``tests.dataflow_description``: each pipeline runs locally, multi-process, then its job
   description is written offline, staging to the bucket);
2. with every input and output on ``gs://`` (the default multi-process mode).

The emulator (``benchmarks.gcs_emulator``) runs in a child process and stops when the session's
fixture ends, failed or not. bertprep runs as a subprocess with the emulator's environment, which
has to be set before Beam is imported.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.gcs_emulator import GcsEmulator
from tests.dataflow_description import DESCRIBE_DIR

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "corpus"
DATAFLOW_OPTIONS = [
    "--runner=tests.dataflow_description.DescribeThenRunLocally",
    "--project=test-project",
    "--region=us-central1",
    f"--temp_location=gs://{BUCKET}/tmp",
    "--no_auth",
    "--sdk_location=container",
    "--setup_file=./setup.py",
    "--max_num_workers=7",
    "--machine_type=n2-highmem-4",
    "--direct_running_mode=multi_processing",
    "--direct_num_workers=2",
]


@dataclass
class CloudRuns:
    emulator: GcsEmulator
    local_out: Path
    remote_copy: Path
    """The gs:// run's output, downloaded."""
    remote_stderr: str
    jobs: list[tuple[dict, bytes]]
    """Per pipeline of the local run: its Dataflow job description and its pipeline proto."""


def bertprep(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline.cli", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )


def inputs(root: str) -> list[str]:
    return ["--set", f"inputs.wikipedia=[{root}/wiki/*.xml]"] + [
        "--set",
        f"inputs.books=[{root}/books/*.txt]",
    ]


def cloud_runs(work: Path):
    """Yields CloudRuns (a generator for a pytest fixture: the emulator stops after it)."""
    # The local corpus sits in a directory of another name than the bucket's, so ids that
    # depended on where a corpus is stored would differ.
    local_in = work / "elsewhere" / "deeper"
    for kind, pattern in (("wiki", "*.xml"), ("books", "*.txt")):
        (local_in / kind).mkdir(parents=True)
        for f in sorted((ROOT / "sample" / kind).glob(pattern)):
            (local_in / kind / f.name).write_bytes(f.read_bytes())
    with GcsEmulator(work / "emulator") as emulator:
        emulator.create_bucket(BUCKET)
        local_out = work / "local-out"
        env = {**emulator.env(), DESCRIBE_DIR: str(work / "jobs")}
        local = bertprep(
            "run",
            "--set",
            f"output={local_out}",
            *inputs(str(local_in)),
            *DATAFLOW_OPTIONS,
            env=env,
        )
        assert local.returncode == 0, local.stderr[-3000:]
        jobs = []
        for path in sorted((work / "jobs").glob("*.json")):
            job = json.loads(path.read_text())
            url = job["environment"]["sdkPipelineOptions"]["options"]["pipelineUrl"]
            jobs.append((job, emulator.read(url)))
        for f in sorted(local_in.rglob("*")):
            if f.is_file():
                emulator.upload(f, f"gs://{BUCKET}/in/{f.relative_to(local_in)}")
        remote = bertprep(
            "run",
            "--set",
            f"output=gs://{BUCKET}/out",
            *inputs(f"gs://{BUCKET}/in"),
            env=emulator.env(),
        )
        assert remote.returncode == 0, remote.stderr[-3000:]
        copy = work / "gcs-out"
        emulator.download_prefix(f"gs://{BUCKET}/out", copy)
        yield CloudRuns(emulator, local_out, copy, remote.stderr, jobs)
