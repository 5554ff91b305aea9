"""Where ``bertprep run``'s time goes: py-spy over every process of a whole run, and the shard
checksums of that run (the record later speed work must keep).

    .venv/bin/python -m benchmarks.profile_run [--megabytes 100] [--py-spy PATH] [--rate 50]

Runs the ``benchmarks.run_benchmark`` job (the same synthetic JSONL corpus, config and 2
multi-process workers) under ``py-spy record --subprocesses`` (running threads only; py-spy from PyPI, in a
throwaway place: ``pip install --target DIR py-spy``; it is no dependency of the product), then
attributes every sample of every process to the innermost frame of bertprep's own code on its
stack (``pipeline/``, ``transforms/``, ``tokenizer/``: a function and what it calls) and, inside
that, to the library where the time is spent. Prints Markdown tables for benchmarks/RESULTS.md
and writes ``benchmarks/baselines/run-<MB>mb-shards.json``: every shard's records and
``content_sha256`` by phase and side, with the command. ``--check`` compares a new run with that
record instead (speed work must not change what is written).
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.process_tree import bertprep_command
from benchmarks.run_benchmark import WORK, environment, write_config
from benchmarks.synthetic_corpus import build_corpus
from transforms.seeding import DEFAULT_SEED

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "benchmarks" / "baselines"
OWN = ("pipeline/", "transforms/", "tokenizer/")
_FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^:()]*)(?::\d+)?\)$")


def frames(stack: str) -> list[tuple[str, str]]:
    """``function (file:line)`` frames of one collapsed py-spy stack, outermost first."""
    out = []
    for part in stack.split(";"):
        found = _FRAME.match(part.strip())
        if found:
            out.append((found["function"], found["file"]))
        else:
            out.append((part.strip(), ""))
    return out


def own_module(path: str) -> str | None:
    """``pipeline/jobs/run`` for a frame of bertprep's code (py-spy names files relative to
    their ``sys.path`` entry), else None."""
    if path.startswith(OWN):
        return path.removesuffix(".py")
    return None


def library(path: str) -> str:
    """The package a frame's file belongs to (``numpy``, ``apache_beam``; ``stdlib`` for a
    top-level module such as ``threading.py``; ``<native>`` for a frame without a file)."""
    if not path:
        return "<native>"
    if "/" not in path:
        return "stdlib"
    return path.split("/", 1)[0]


def attribute(raw: Path) -> tuple[collections.Counter, collections.Counter, int]:
    """(samples by own function, samples by own function and library below it, all samples)."""
    by_function: collections.Counter = collections.Counter()
    by_library: collections.Counter = collections.Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        parsed = frames(stack)
        own = [(i, f, own_module(p)) for i, (f, p) in enumerate(parsed) if own_module(p)]
        if not own:
            key = "(no bertprep frame: Beam runner, gRPC, start-up)"
            below = library(parsed[-1][1]) if parsed else "<native>"
        else:
            i, function, module = own[-1]
            key = f"{module}.{function}"
            below = library(parsed[-1][1]) if i < len(parsed) - 1 else "own code"
        by_function[key] += n
        by_library[key, below] += n
    return by_function, by_library, total


def print_table(raw: Path, top: int) -> None:
    by_function, by_library, total = attribute(raw)
    print(f"\n{total:,} samples of running threads, all processes")
    print("\n| bertprep function (innermost on the stack) | share of samples | where below it |")
    print("|---|---|---|")
    for key, n in by_function.most_common(top):
        libs = sorted(
            ((lib, m) for (k, lib), m in by_library.items() if k == key), key=lambda x: -x[1]
        )
        below = ", ".join(f"{lib} {100 * m / n:.0f}%" for lib, m in libs[:3])
        print(f"| `{key}` | {100 * n / total:.1f}% | {below} |")


def shard_record(out: Path) -> dict:
    record = {}
    for manifest in sorted(out.glob("*/*/manifest.json")):
        data = json.loads(manifest.read_text())
        if "shards" not in data:  # the tokenize stage's manifests
            continue
        record[str(manifest.parent.relative_to(out))] = [
            {"file": s["file"], "records": s["records"], "content_sha256": s["content_sha256"]}
            for s in data["shards"]
        ]
    return record


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, default=100.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--py-spy", default=shutil.which("py-spy") or "/tmp/pyspy/bin/py-spy")
    ap.add_argument("--rate", type=int, default=50, help="samples per second per process")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--analyse", metavar="RAW", help="only attribute an earlier py-spy raw file")
    ap.add_argument(
        "--check",
        action="store_true",
        help="compare the run's shards with the recorded baseline instead of recording them",
    )
    args = ap.parse_args()
    if args.analyse:
        print_table(Path(args.analyse), args.top)
        return 0
    os.chdir(ROOT)
    corpus = build_corpus(args.megabytes, DEFAULT_SEED, lambda s: print(s, file=sys.stderr))
    out = WORK / f"profile-{args.megabytes:g}mb"
    config = WORK / f"profile-{args.megabytes:g}mb.yaml"
    shutil.rmtree(out, ignore_errors=True)
    write_config(corpus, out, config)
    raw = WORK / f"profile-{args.megabytes:g}mb.txt"
    run = [
        *bertprep_command(),
        "run",
        "--config",
        str(config),
        "--direct_running_mode=multi_processing",
        f"--direct_num_workers={args.workers}",
    ]
    env = {**environment(), "PYTHONPATH": str(ROOT)}
    cmd = [args.py_spy, "record", "--subprocesses", "--format", "raw"]
    cmd += ["--rate", str(args.rate), "--output", str(raw), "--", *run]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not (out / "run_summary.json").exists():
        print(done.stderr[-4000:], file=sys.stderr)
        return 1
    summary = json.loads((out / "run_summary.json").read_text())
    today = datetime.date.today().isoformat()
    print(f"{today}, {corpus['bytes'] / 1e6:.1f} MB, `{' '.join(run)}` under py-spy {args.rate}/s")
    print("stages (s): " + ", ".join(f"{s['name']} {s['seconds']:.1f}" for s in summary["stages"]))
    print_table(raw, args.top)
    target = BASELINES / f"run-{args.megabytes:g}mb-shards.json"
    if args.check:
        recorded = json.loads(target.read_text())["shards"]
        now = shard_record(out)
        changed = sorted(
            f"{side}/{a['file']}"
            for side in sorted(set(recorded) | set(now))
            for a, b in zip(recorded.get(side, []), now.get(side, []), strict=False)
            if a != b
        )
        if changed or {k: len(v) for k, v in recorded.items()} != {
            k: len(v) for k, v in now.items()
        }:
            print(f"shards differ from {target}: {', '.join(changed[:10]) or 'shard counts'}")
            return 1
        print(f"every shard's records and content_sha256 equal {target}")
        return 0
    BASELINES.mkdir(parents=True, exist_ok=True)
    record = {
        "date": today,
        "command": " ".join(run),
        "corpus": {"megabytes": round(corpus["bytes"] / 1e6, 1), "seed": DEFAULT_SEED},
        "shards": shard_record(out),
    }
    target.write_text(json.dumps(record, indent=1) + "\n")
    print(f"\nshard checksums: {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
