"""Benchmark of ``bertprep instances`` on a BERT-format corpus built from the shared books.

    .venv/bin/python -m benchmarks.instances_benchmark --megabytes 30 120 [--reference 30]

For each size: builds the corpus (benchmarks/work/books-<MB>mb, reused when present), runs the job
with Google's uncased vocab at seq 128, dupe_factor 5, as a new process, ``--repeat`` times
unsampled, and reports the median wall time, instances/s and the peak resident memory of the
whole process tree (launcher + Beam workers) from one more run that samples it (sampling slows
the run it watches: ``process_tree.measure``). ``--reference MB ...`` also runs google-research/bert's
``create_pretraining_data.py`` (from the ``bert-tensorflow`` wheel on PyPI, downloaded into
benchmarks/work, never committed) on the same corpus and settings, in the same session, so the
ratio is measured side by side: at a size given to both, the reference runs between the first and
the second half of bertprep's timed runs. Prints Markdown table rows for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import shutil
import sys
from pathlib import Path

from benchmarks.books_corpus import CORPORA, ROOT, build_corpus
from benchmarks.process_tree import bertprep_command, measure

WORK = ROOT / "benchmarks" / "work"


def corpus(megabytes: float) -> Path:
    path = WORK / f"books-{megabytes:g}mb"
    if not path.exists():
        build_corpus(path, int(megabytes * 1e6))
    return path


def reference_package() -> Path:
    """google-research/bert's scripts from the bert-tensorflow wheel (PyPI), unpacked in WORK
    (once: concurrent callers, such as parallel test workers, wait for the first)."""
    import fcntl
    import subprocess
    import tempfile
    import zipfile

    target = WORK / "reference"
    if (target / "bert" / "create_pretraining_data.py").exists():
        return target
    WORK.mkdir(parents=True, exist_ok=True)
    with (WORK / "reference.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "bert" / "create_pretraining_data.py").exists():
            return target
        with tempfile.TemporaryDirectory(dir=WORK) as temp:
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "-q",
                    "-d",
                    temp,
                    "bert-tensorflow==1.0.4",
                ],
                check=True,
                capture_output=True,
            )
            wheel = next(Path(temp).glob("bert_tensorflow-1.0.4-*.whl"))
            unpacked = Path(temp) / "unpacked"
            with zipfile.ZipFile(wheel) as z:
                z.extractall(unpacked)
            shutil.rmtree(target, ignore_errors=True)
            unpacked.rename(target)
    return target


def run_reference(megabytes: float, args: argparse.Namespace) -> dict:
    src = corpus(megabytes)
    files = sorted(src.glob("*.txt"))
    size = sum(f.stat().st_size for f in files)
    out = WORK / f"reference-{megabytes:g}mb.tfrecord"
    cmd = [
        sys.executable,
        "-m",
        "bert.create_pretraining_data",
        f"--input_file={','.join(str(f) for f in files)}",
        f"--output_file={out}",
        f"--vocab_file={CORPORA / 'vocab' / 'bert-base-uncased-vocab.txt'}",
        "--do_lower_case=True",
        "--max_seq_length=128",
        "--max_predictions_per_seq=20",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        f"--dupe_factor={args.dupe_factor}",
        "--short_seq_prob=0.1",
    ]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(reference_package()))
    m = measure(cmd, env=env, memory="rss")  # one process: RSS sampling costs it next to nothing
    if m.returncode != 0:
        raise SystemExit(f"reference run failed:\n{m.output[-4000:]}")
    import re

    found = re.findall(r"Wrote (\d+) total instances", m.output)
    instances = int(found[-1]) if found else 0
    out.unlink(missing_ok=True)
    return {
        "corpus_mb": round(size / 1e6, 1),
        "documents": "",
        "tokens": "",
        "instances": instances,
        "wall_s": round(m.wall_seconds, 1),
        "instances_per_s": round(instances / m.wall_seconds),
        "peak_rss_mb": round(m.peak_rss_bytes / 2**20),
        "mode": "google-research/bert (1 process)",
    }


def run_one(megabytes: float, args: argparse.Namespace, between=None) -> dict:
    """bertprep's row for ``megabytes``: the median of ``--repeat`` unsampled runs, and the peak
    memory of one more, sampled. ``between`` (a callable), when given, runs after the first half
    (rounded up) of the timed runs: the reference, so that both sides are timed across the same minutes (this
    machine's speed drifts by up to ~30% within minutes, and a reference run takes several)."""
    src = corpus(megabytes)
    size = sum(f.stat().st_size for f in src.glob("*.txt"))
    out = WORK / f"out-{megabytes:g}mb"
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        *bertprep_command(),
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
    runs = []
    for i, memory in enumerate(["none"] * args.repeat + ["all"]):  # memory from a run of its own
        if between is not None and i == (args.repeat + 1) // 2:
            between()
        shutil.rmtree(out, ignore_errors=True)
        m = measure(cmd, env=env, memory=memory)
        if m.returncode != 0:
            raise SystemExit(f"benchmark run failed:\n{m.output[-4000:]}")
        runs.append(m)
    walls = sorted(r.wall_seconds for r in runs[:-1])
    m = runs[0]
    m.wall_seconds = walls[len(walls) // 2]
    m.peak_rss_bytes = runs[-1].peak_rss_bytes
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


def _append_reference(rows: list[dict], megabytes: float, args: argparse.Namespace) -> None:
    rows.append(run_reference(megabytes, args))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, nargs="+", default=[30.0])
    ap.add_argument("--dupe-factor", type=int, default=5)
    ap.add_argument("--num-shards", type=int, default=64)
    ap.add_argument("--mode", default="multi_processing")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--repeat", type=int, default=3, help="runs per size; the median is reported")
    ap.add_argument(
        "--reference", type=float, nargs="*", default=[], help="sizes (MB) to run the reference on"
    )
    args = ap.parse_args()
    today = datetime.date.today().isoformat()
    print(
        "| date | corpus MB | documents | tokens | instances | wall s | instances/s | peak RSS MB | mode |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mb in args.megabytes:
        reference: list[dict] = []
        side_by_side = mb in args.reference  # the reference runs amid bertprep's timed runs
        between = functools.partial(_append_reference, reference, mb, args)
        _print_row(today, run_one(mb, args, between=between if side_by_side else None))
        for r in reference:
            _print_row(today, r)
    for mb in args.reference:
        if mb not in args.megabytes:
            _print_row(today, run_reference(mb, args))


def _print_row(today: str, r: dict) -> None:
    print(
        f"| {today} | {r['corpus_mb']} | {r['documents']:{',' if r['documents'] != '' else ''}} | {r['tokens']:{',' if r['tokens'] != '' else ''}} | "
        f"{r['instances']:,} | {r['wall_s']} | {r['instances_per_s']:,} | "
        f"{r['peak_rss_mb']:,} | {r['mode']} |",
        flush=True,
    )


if __name__ == "__main__":
    main()
