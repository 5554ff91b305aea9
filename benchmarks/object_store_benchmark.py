"""Object-store requests of ``bertprep run`` with every input and output on ``gs://``.

    .venv/bin/python -m benchmarks.object_store_benchmark [--megabytes 4] [--num-shards 4 16]

A synthetic JSONL corpus (``benchmarks.synthetic_corpus``) is uploaded to an emulated bucket
(``benchmarks.gcs_emulator``, loopback) and ``bertprep run`` runs on it once per ``--num-shards``
value (one phase, seq128, 128/20, dupe factor 2, Google's uncased vocab given, near dedup, 1%
held out, DirectRunner multi-process with 2 workers). Every request the emulator answers is
attributed to the stage running at the time (from the run's ``<stage>: running...`` lines).
Printed per run and stage: requests by operation, bytes in and out, and requests per GB of shards;
and for the instance stage the ranged reads of spill files against shards × spill files.
Figures go to benchmarks/work/object_store-<date>.json; Markdown rows for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import yaml

from benchmarks.gcs_emulator import GcsEmulator, Request, summarize
from benchmarks.process_tree import bertprep_command
from benchmarks.synthetic_corpus import WORK, build_corpus

ROOT = Path(__file__).resolve().parents[1]
VOCAB = ROOT.parent / "shared" / "corpora" / "vocab" / "bert-base-uncased-vocab.txt"
BUCKET = "bench"
STAGE_LINE = re.compile(r"\[bertprep run\] (\S+): running")
SPILL_FILE = re.compile(r"(task-\d+-\d+|group-\d+)\.spill")


def run_config(files: list[str], num_shards: int) -> dict:
    return {
        "output": f"gs://{BUCKET}/out-{num_shards}",
        "seed": 12345,
        "inputs": {"jsonl": files},
        "clean": {"dedup": "near"},
        "vocab": {"path": str(VOCAB), "lowercase": True},
        "eval": {"fraction": 0.01},
        "phases": [
            {
                "name": "seq128",
                "max_seq_length": 128,
                "max_predictions_per_seq": 20,
                "dupe_factor": 2,
                "num_shards": num_shards,
                "eval_num_shards": 1,
            }
        ],
    }


def run_on_bucket(emulator: GcsEmulator, config: Path) -> tuple[float, list[tuple[str, float]]]:
    """Runs bertprep; returns the wall time and (stage, start time) of every stage."""
    emulator.mark()
    started = time.time()
    stages: list[tuple[str, float]] = [("launch", started)]
    process = subprocess.Popen(
        [*bertprep_command(), "run", "--config", str(config)],
        env=emulator.env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = []
    for line in process.stdout:
        output.append(line)
        found = STAGE_LINE.search(line)
        if found:
            stages.append((found.group(1), time.time()))
    if process.wait() != 0:
        raise RuntimeError("bertprep run failed:\n" + "".join(output[-40:]))
    return time.time() - started, stages


def by_stage(requests: list[Request], stages: list[tuple[str, float]]) -> dict[str, list[Request]]:
    out: dict[str, list[Request]] = defaultdict(list)
    for r in requests:
        name = stages[0][0]
        for stage, at in stages:
            if r.at >= at:
                name = stage
        out[name].append(r)
    return out


def spill_reads(requests: list[Request]) -> int:
    """Ranged reads (downloads) of the instance stage's spill files (task and group files)."""
    return sum(1 for r in requests if r.operation == "download" and SPILL_FILE.search(r.path))


def measure(emulator: GcsEmulator, files: list[str], num_shards: int, work: Path) -> dict:
    config = work / f"run-{num_shards}.yaml"
    config.write_text(yaml.safe_dump(run_config(files, num_shards), sort_keys=False))
    wall, stages = run_on_bucket(emulator, config)
    requests = emulator.requests()
    shard_bytes = 0
    shards = 0
    spill_files = set()
    for url in emulator.list(f"gs://{BUCKET}/out-{num_shards}/seq128/"):
        if url.endswith(".tfrecord"):
            shards += 1
            shard_bytes += len(emulator.read(url))
    for r in requests:
        found = SPILL_FILE.search(r.path)
        if found and r.operation == "upload":
            spill_files.add(found.group(0))
    stage_rows = {}
    for stage, rows in by_stage(requests, stages).items():
        stage_rows[stage] = summarize(rows)
    return {
        "num_shards": num_shards,
        "wall_s": round(wall, 1),
        "shards": shards,
        "shard_mb": round(shard_bytes / 1e6, 2),
        "total": summarize(requests),
        "requests_per_gb_of_shards": round(len(requests) / (shard_bytes / 1e9)),
        "stages": stage_rows,
        "spill_files": len(spill_files),
        "spill_reads": spill_reads(requests),
    }


def markdown(rows: list[dict]) -> str:
    lines = [
        "| shards | shard MB | requests | per GB of shards | clean | split | vocab | tokenize "
        "| phase | spill files | spill reads |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        st = row["stages"]

        def n(name: str, stages: dict = st) -> str:
            return f"{stages.get(name, {}).get('requests', 0):,}"

        lines.append(
            f"| {row['shards']} | {row['shard_mb']} | {row['total']['requests']:,} "
            f"| {row['requests_per_gb_of_shards']:,} | {n('clean')} | {n('split')} | {n('vocab')} "
            f"| {n('tokenize')} | {n('phase:seq128')} | {row['spill_files']} | {row['spill_reads']:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=float, default=4.0, help="corpus size (default: 4)")
    parser.add_argument(
        "--num-shards", type=int, nargs="+", default=[4, 16], help="train shards (default: 4 16)"
    )
    args = parser.parse_args()
    corpus = build_corpus(args.megabytes)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, GcsEmulator(Path(tmp) / "emulator") as emulator:
        emulator.create_bucket(BUCKET)
        remote = []
        for f in corpus["files"]:
            url = f"gs://{BUCKET}/in/{Path(f).name}"
            emulator.upload(Path(f), url)
            remote.append(url)
        for num_shards in args.num_shards:
            row = measure(emulator, remote, num_shards, Path(tmp))
            print(json.dumps(row, indent=1), flush=True)
            rows.append(row)
    print(markdown(rows))
    WORK.mkdir(parents=True, exist_ok=True)
    out = WORK / f"object_store-{datetime.date.today()}.json"
    out.write_text(json.dumps({"megabytes": args.megabytes, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
