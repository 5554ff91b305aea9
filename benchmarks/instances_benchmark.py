"""Benchmark of ``bertprep instances`` on a BERT-format corpus built from the shared books.

    .venv/bin/python -m benchmarks.instances_benchmark --megabytes 30 120

For each size: builds the corpus (benchmarks/work/books-<MB>mb, reused when present), runs the job
with Google's uncased vocab at seq 128, dupe_factor 5, as a new process, and reports wall time,
instances/s and the peak resident memory of the whole process tree (launcher + Beam workers).
Prints one Markdown table row per size for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import sys
from pathlib import Path

from benchmarks.books_corpus import CORPORA, ROOT, build_corpus
from benchmarks.process_tree import measure

WORK = ROOT / "benchmarks" / "work"


def corpus(megabytes: float) -> Path:
    path = WORK / f"books-{megabytes:g}mb"
    if not path.exists():
        build_corpus(path, int(megabytes * 1e6))
    return path


def run_one(megabytes: float, args: argparse.Namespace) -> dict:
    src = corpus(megabytes)
    size = sum(f.stat().st_size for f in src.glob("*.txt"))
    out = WORK / f"out-{megabytes:g}mb"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        sys.executable,
        "-m",
        "pipeline.cli",
        "instances",
        "--input",
        str(src / "*.txt"),
        "--vocab",
        str(CORPORA / "vocab" / "bert-base-uncased-vocab.txt"),
        "--output",
        str(out),
        "--max-seq-length",
        "128",
        "--max-predictions-per-seq",
        "20",
        "--dupe-factor",
        str(args.dupe_factor),
        "--num-shards",
        str(args.num_shards),
        "--seed",
        "12345",
        f"--direct_running_mode={args.mode}",
        f"--direct_num_workers={args.workers}",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    m = measure(cmd, env=env)
    if m.returncode != 0:
        raise SystemExit(f"benchmark run failed:\n{m.output[-4000:]}")
    manifest = json.loads((out / "manifest.json").read_text())
    instances = manifest["totals"]["instances"]
    return {
        "corpus_mb": round(size / 1e6, 1),
        "documents": manifest["totals"]["documents"],
        "tokens": manifest["totals"]["tokens"],
        "instances": instances,
        "wall_s": round(m.wall_seconds, 1),
        "instances_per_s": round(instances / m.wall_seconds),
        "peak_rss_mb": round(m.peak_rss_bytes / 2**20),
        "mode": f"{args.mode}×{args.workers}",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, nargs="+", default=[30.0])
    ap.add_argument("--dupe-factor", type=int, default=5)
    ap.add_argument("--num-shards", type=int, default=64)
    ap.add_argument("--mode", default="multi_processing")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    today = datetime.date.today().isoformat()
    print(
        "| date | corpus MB | documents | tokens | instances | wall s | instances/s | peak RSS MB | mode |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mb in args.megabytes:
        r = run_one(mb, args)
        print(
            f"| {today} | {r['corpus_mb']} | {r['documents']:,} | {r['tokens']:,} | "
            f"{r['instances']:,} | {r['wall_s']} | {r['instances_per_s']:,} | "
            f"{r['peak_rss_mb']:,} | {r['mode']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
