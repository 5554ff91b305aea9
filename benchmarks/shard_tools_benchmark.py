"""Throughput of ``bertprep validate`` and ``bertprep stats`` on a shard set.

    .venv/bin/python -m benchmarks.shard_tools_benchmark [--shards benchmarks/work/out-30mb]

Default shards: the output of the instance benchmark at 30 MB (run that first). Reports records/s
and MB/s (uncompressed shard bytes) of each command as a new process, with every core.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
from pathlib import Path

from benchmarks.process_tree import bertprep_command, measure

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=Path, default=ROOT / "benchmarks" / "work" / "out-30mb")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args()
    manifest = json.loads((args.shards / "manifest.json").read_text())
    records = manifest["totals"]["instances"]
    size = sum(p.stat().st_size for p in args.shards.glob("*.tfrecord*"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    today = datetime.date.today().isoformat()
    print("| date | command | shards | records | MB | wall s | records/s | MB/s | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for command in ("validate", "stats"):
        cmd = [
            *bertprep_command(),
            command,
            str(args.shards),
            "--workers",
            str(args.workers),
        ]
        if command == "stats":
            cmd.append("--json")
        m = measure(cmd, env=env)
        if command == "validate" and m.returncode != 0:
            raise SystemExit(f"validate failed:\n{m.output[-3000:]}")
        print(
            f"| {today} | {command} | {len(manifest['shards'])} | {records:,} | {size / 1e6:.0f} | "
            f"{m.wall_seconds:.1f} | {records / m.wall_seconds:,.0f} | "
            f"{size / 1e6 / m.wall_seconds:.1f} | {m.peak_rss_bytes / 2**20:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
