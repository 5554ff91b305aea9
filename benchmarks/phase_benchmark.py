"""The instance phases alone, two checkouts side by side: token slots per core-second.

    .venv/bin/python -m benchmarks.phase_benchmark --before DIR [--run-dir DIR] [--repeat 3]

``--run-dir`` (default: the output of ``benchmarks.profile_run``, ``benchmarks/work/
profile-100mb``) is a finished ``bertprep run``; it is copied once per checkout without its phase
directories, and in each round both checkouts rerun only the phases there (every earlier stage is
current, so ``bertprep run`` skips it), alternately, with this project's virtual environment and
the checkout's own code first on ``PYTHONPATH``. ``--before`` is a checkout of the code to compare
with (``git worktree add DIR REV``). Per run: the phases' wall seconds (one pipeline, Beam start-up
included) from ``run_summary.json``, and token slots per core-second = Σ instances ×
max_seq_length over both phases ÷ (wall × ``--workers``). Every shard's ``content_sha256`` must
be equal between the two checkouts. Prints Markdown rows for benchmarks/RESULTS.md.

``--modes static dynamic packed packed512 wholeword`` instead compares masking and packing modes
(the run's config with ``masking: dynamic``, ``pack_instances: 3`` on every phase or on seq512
only, or static whole-word masking; the same instances in each), each on both checkouts: instances, token slots and MB of
shards per core-second, so that a mode's cost is seen beside static masking's.

``--profile N`` instead runs this checkout's phases once in one process (``in_memory``) under
cProfile and prints the N functions with the most time of their own: where a phase's time goes
without the runner's process boundaries.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import yaml

from benchmarks.dask_benchmark import shard_hashes
from benchmarks.process_tree import bertprep_command
from benchmarks.run_benchmark import WORK, environment

ROOT = Path(__file__).resolve().parents[1]


MODES: dict[str, dict[str, dict]] = {
    "static": {},
    "dynamic": {"*": {"masking": "dynamic"}},
    "packed": {"*": {"pack_instances": 3}},
    "packed512": {"seq512": {"pack_instances": 3}},
    "wholeword": {"*": {"whole_word_mask": True}},
}
"""``--modes``: settings laid over every phase (``*``) or one phase of the run's config; the
dupe factors stay the config's, so every mode makes the same instances."""


def prepare(run_dir: Path, target: Path, mode: str = "static") -> Path:
    """A copy of ``run_dir`` without its phase outputs, and its config pointed at the copy with
    ``MODES[mode]`` laid over its phases."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(run_dir, target, ignore=shutil.ignore_patterns("seq*"))
    config = yaml.safe_load((run_dir.parent / f"{run_dir.name}.yaml").read_text())
    config["output"] = str(target)
    for phase in config["phases"]:
        for which, settings in MODES[mode].items():
            if which in ("*", phase["name"]):
                phase.update(settings)
    (target.parent / f"{target.name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return target.parent / f"{target.name}.yaml"


def run_phases(checkout: Path, config: Path, out: Path, workers: int) -> dict:
    for phase in out.glob("seq*"):
        shutil.rmtree(phase)
    cmd = [*bertprep_command(), "run", "--config", str(config)]
    cmd += ["--direct_running_mode=multi_processing", f"--direct_num_workers={workers}"]
    env = {**environment(), "PYTHONPATH": str(checkout)}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=checkout)
    if done.returncode:
        raise SystemExit(f"{checkout}: bertprep run failed:\n{done.stderr[-4000:]}")
    summary = json.loads((out / "run_summary.json").read_text())
    ran = [s for s in summary["stages"] if s["status"] == "ran"]
    if {s["name"] for s in ran} != {f"phase:{p['phase']}" for p in summary["phases"]}:
        raise SystemExit(f"{checkout}: expected only the phases to run, ran {ran}")
    wall = ran[0]["seconds"]
    lengths = {p["name"]: p["max_seq_length"] for p in yaml.safe_load(config.read_text())["phases"]}
    sides = [(p, p[side]) for p in summary["phases"] for side in ("train", "eval") if side in p]
    slots = sum(s["instances"] * lengths[p["phase"]] for p, s in sides)
    core_s = wall * workers
    return {
        "wall_s": wall,
        "slots": slots,
        "slots_per_core_s": slots / core_s,
        "instances": sum(s["instances"] for _, s in sides),
        "row_slots": sum(s.get("rows", s["instances"]) * lengths[p["phase"]] for p, s in sides),
        "bytes": sum(s["bytes"] for _, s in sides),
    }


def profile_phases(config: Path, out: Path, top: int) -> None:
    """This checkout's phases in one process under cProfile; prints the ``top`` functions."""
    import cProfile
    import pstats

    from pipeline.cli import main as bertprep

    for phase in out.glob("seq*"):
        shutil.rmtree(phase)
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        bertprep(["run", "--config", str(config), "--direct_running_mode=in_memory"])
    finally:
        profiler.disable()
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(top)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, help="checkout of the code before (required)")
    ap.add_argument("--profile", type=int, metavar="N", help="profile this checkout instead")
    ap.add_argument("--after", type=Path, default=ROOT, help="checkout after (default: this one)")
    ap.add_argument("--run-dir", type=Path, default=WORK / "profile-100mb")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=sorted(MODES),
        help="compare these masking/packing modes instead (each on both checkouts)",
    )
    args = ap.parse_args()
    if args.profile:
        config = prepare(args.run_dir.resolve(), WORK / "phases-profile")
        profile_phases(config, WORK / "phases-profile", args.profile)
        return 0
    if args.before is None:
        ap.error("--before is required (a checkout of the code to compare with)")
    if args.modes:
        return compare_modes(args)
    outs = {}
    for name in ("before", "after"):
        out = WORK / f"phases-{name}"
        outs[name] = (prepare(args.run_dir.resolve(), out), out)
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for round_ in range(args.repeat):
        for name in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
            config, out = outs[name]
            result = run_phases(getattr(args, name).resolve(), config, out, args.workers)
            runs[name].append(result)
            print(f"round {round_ + 1} {name}: {json.dumps(result)}", file=sys.stderr, flush=True)
        same = shard_hashes(outs["before"][1]) == shard_hashes(outs["after"][1])
        if not same:
            print("shards differ between the checkouts", file=sys.stderr)
            return 1
    date = datetime.date.today().isoformat()
    median = {n: statistics.median(r["slots_per_core_s"] for r in runs[n]) for n in runs}
    walls = {n: statistics.median(r["wall_s"] for r in runs[n]) for n in runs}
    slots = runs["after"][0]["slots"]
    print("| date | checkout | phases wall (median) | token slots | M slots per core-second |")
    print("|---|---|---|---|---|")
    for name in ("before", "after"):
        each = ", ".join(f"{r['wall_s']:.1f}" for r in runs[name])
        print(
            f"| {date} | {name} (`{getattr(args, name)}`) | {walls[name]:.1f} s ({each}) | "
            f"{slots:,} | {median[name] / 1e6:.2f} |"
        )
    print(f"\nafter / before: {median['after'] / median['before']:.2f}×; shards equal: True")
    return 0


def compare_modes(args) -> int:
    """Each mode's phases on both checkouts, every (mode, checkout) once per round in rotation;
    prints per mode and checkout the median wall, instances and token slots per core-second
    (slots: instances × max_seq_length, the same work in every mode; rows' slots for packing)
    and MB of shards per core-second. Shards must be equal between the checkouts per mode."""
    jobs = []
    for mode in args.modes:
        for name in ("before", "after"):
            out = WORK / f"phases-{mode}-{name}"
            jobs.append((mode, name, prepare(args.run_dir.resolve(), out, mode), out))
    runs: dict[tuple[str, str], list[dict]] = {(m, n): [] for m, n, *_ in jobs}
    for round_ in range(args.repeat):
        for mode, name, config, out in jobs if round_ % 2 == 0 else jobs[::-1]:
            result = run_phases(getattr(args, name).resolve(), config, out, args.workers)
            runs[mode, name].append(result)
            print(f"round {round_ + 1} {mode} {name}: {json.dumps(result)}", file=sys.stderr)
    for mode in args.modes:
        before, after = (WORK / f"phases-{mode}-{n}" for n in ("before", "after"))
        if shard_hashes(before) != shard_hashes(after):
            print(f"{mode}: shards differ between the checkouts", file=sys.stderr)
            return 1
    date = datetime.date.today().isoformat()
    print(
        "| date | mode | checkout | phases wall s (median; each) | instances per core-s | "
        "M token slots per core-s | rows' M slots per core-s | MB of shards per core-s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (mode, name), results in runs.items():
        wall = statistics.median(r["wall_s"] for r in results)
        core_s = wall * args.workers
        r = results[0]
        each = ", ".join(f"{x['wall_s']:.1f}" for x in results)
        print(
            f"| {date} | {mode} | {name} (`{getattr(args, name)}`) | {wall:.1f} ({each}) | "
            f"{r['instances'] / core_s:,.0f} | {r['slots'] / core_s / 1e6:.2f} | "
            f"{r['row_slots'] / core_s / 1e6:.2f} | {r['bytes'] / core_s / 1e6:.1f} |"
        )
    print("\nshards equal between the checkouts in every mode: True")
    return 0


if __name__ == "__main__":
    sys.exit(main())
