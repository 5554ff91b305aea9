"""Packed rows (``pack_instances``) against unpacked, side by side: rows, packing efficiency and
the phases' time, for several K.

    .venv/bin/python -m benchmarks.packing_benchmark [--run-dir DIR] [--k 0 2 3 4] [--repeat 1]
        [--only seq512]

``--run-dir`` (default: the ``benchmarks.profile_run`` output, ``benchmarks/work/profile-100mb``)
is a finished ``bertprep run``; it is copied once per K without its phase directories (see
``benchmarks.phase_benchmark.prepare``), every phase of the copy's config gets ``pack_instances:
K`` (``--only``: the other phases dropped), and in each round every K reruns only the phases (one
pipeline, multi_processing × ``--workers``), in alternating order. Per phase and K, from the train manifests: instances,
rows, real tokens / token slots (the packing efficiency), rows of the unpacked run ÷ rows; and
the phases' wall time against K = 0 (the packing's cost). Prints Markdown rows for
benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path

import yaml

from benchmarks.phase_benchmark import prepare, run_phases
from benchmarks.run_benchmark import WORK

ROOT = Path(__file__).resolve().parents[1]


def packed_config(config: Path, k: int, only: list[str] | None = None) -> None:
    """Sets ``pack_instances: k`` on every phase of the config at ``config``; with ``only``,
    the other phases are dropped first (the phase's own cost, not diluted by the others)."""
    data = yaml.safe_load(config.read_text())
    if only:
        data["phases"] = [p for p in data["phases"] if p["name"] in only]
        if not data["phases"]:
            raise SystemExit(f"{config}: none of the phases {only}")
    for phase in data["phases"]:
        phase["pack_instances"] = k
    config.write_text(yaml.safe_dump(data, sort_keys=False))


def phase_figures(out: Path) -> dict[str, dict]:
    """Per phase: instances, rows and efficiency of its train shards (from the manifest)."""
    found = {}
    for manifest_path in sorted(out.glob("seq*/train/manifest.json")):
        m = json.loads(manifest_path.read_text())
        t = m["totals"]
        rows = t.get("rows", t["instances"])
        found[manifest_path.parent.parent.name] = {
            "instances": t["instances"],
            "rows": rows,
            "max_seq_length": m["max_seq_length"],
            "efficiency": 1 - t["padding_fraction"],
        }
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run-dir", type=Path, default=WORK / "profile-100mb")
    ap.add_argument("--k", type=int, nargs="+", default=[0, 2, 3, 4])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", nargs="+", help="run only these phases (default: all)")
    args = ap.parse_args()
    if 0 not in args.k:
        args.k = [0, *args.k]
    run_dir = args.run_dir.resolve()
    outs = {}
    for k in args.k:
        only = f"-{'-'.join(args.only)}" if args.only else ""
        out = WORK / f"packing-{run_dir.name}{only}-k{k}"
        config = prepare(run_dir, out)
        packed_config(config, k, args.only)
        outs[k] = (config, out)
    walls: dict[int, list[float]] = {k: [] for k in args.k}
    for round_ in range(args.repeat):
        order = args.k if round_ % 2 == 0 else list(reversed(args.k))
        for k in order:
            config, out = outs[k]
            result = run_phases(ROOT, config, out, args.workers)
            walls[k].append(result["wall_s"])
            print(f"round {round_ + 1} K={k}: {result['wall_s']:.1f} s", file=sys.stderr)
    figures = {k: phase_figures(outs[k][1]) for k in args.k}
    date = datetime.date.today().isoformat()
    base_wall = statistics.median(walls[0])
    print(f"{date}, run {run_dir}, phases rerun multi_processing × {args.workers}\n")
    print(
        "| K | phase | instances | rows | real tokens / slots | rows ÷ (vs unpacked) "
        "| phases wall (median) | vs K=0 |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for k in args.k:
        wall = statistics.median(walls[k])
        for phase, f in figures[k].items():
            plain = figures[0][phase]
            print(
                f"| {k or 'off'} | {phase} | {f['instances']:,} | {f['rows']:,} | "
                f"{100 * f['efficiency']:.1f}% | {plain['rows'] / f['rows']:.3f} | "
                f"{wall:.1f} s | {wall / base_wall:.3f} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
