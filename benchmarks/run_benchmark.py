"""End-to-end benchmark of ``bertprep run`` against the hand-built pipeline users run today.

    .venv/bin/python -m benchmarks.run_benchmark --megabytes 100 400 [--reference 100] [--keep]

For each size, a synthetic JSONL corpus (``benchmarks.synthetic_corpus``: new ~3 KB documents
recombined from the sentences of ``../shared/corpora``'s books and Wikipedia dumps, 8 files,
cached in benchmarks/work/synthetic-<MB>mb) is run through ``bertprep run`` as a new process with a
config written to benchmarks/work/run-<MB>mb.yaml: near-duplicate dedup, Google's uncased vocab
(given, not trained), 1% held-out documents, phases seq128 (128/20, dupe_factor 3, 64 + 4 shards)
and seq512 (512/80, dupe_factor 1, 64 + 4 shards), DirectRunner ``multi_processing`` with 2
workers, twice: once sampling the memory of the whole process tree (launcher + Beam workers,
RSS and PSS every 0.1 s), once timed without sampling (which slows the run it watches:
``process_tree.measure``). Reported: the unsampled wall time, the sampled run's peak RSS and PSS,
the timed run's per-stage seconds of ``run_summary.json``, documents, instances.

``--reference MB ...`` also measures, on the same corpus and in the same session, what users
build by hand: (a) ``benchmarks.reference_split`` (NLTK punkt_tab ``sent_tokenize`` per
paragraph, 2 ``multiprocessing`` workers, one per half of the files, writing google-research/bert's
text format), then (b) google-research/bert's ``create_pretraining_data.py`` (from the
``bert-tensorflow`` 1.0.4 wheel, see ``benchmarks.instances_benchmark.reference_package``) for
both phases with the same settings, each phase as 2 concurrent processes (one per half of the
split files, 32 output files each). The reference total is the sum of the three parts (their RSS
sampled: each is one process or two, where that costs next to nothing); the ratio is reference
total / bertprep's unsampled wall. The reference has no held-out split (bertprep's eval shards
are extra work on its side).

Prints Markdown rows for benchmarks/RESULTS.md and appends them with every figure to
benchmarks/work/run_benchmark-<date>.json. Outputs are deleted after measuring unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.books_corpus import CORPORA, ROOT
from benchmarks.instances_benchmark import reference_package
from benchmarks.process_tree import Measurement, bertprep_command, measure, tree_rss_bytes
from benchmarks.synthetic_corpus import DEFAULT_SEED, build_corpus

WORK = ROOT / "benchmarks" / "work"
VOCAB = CORPORA / "vocab" / "bert-base-uncased-vocab.txt"
SEED = 12345
PHASES = [
    {
        "name": "seq128",
        "max_seq_length": 128,
        "max_predictions_per_seq": 20,
        "masked_lm_prob": 0.15,
        "dupe_factor": 3,
        "short_seq_prob": 0.1,
        "num_shards": 64,
        "eval_num_shards": 4,
    },
    {
        "name": "seq512",
        "max_seq_length": 512,
        "max_predictions_per_seq": 80,
        "masked_lm_prob": 0.15,
        "dupe_factor": 1,
        "short_seq_prob": 0.1,
        "num_shards": 64,
        "eval_num_shards": 4,
    },
]


def environment() -> dict:
    return dict(os.environ, NLTK_DATA=str(CORPORA / "nltk_data"), TF_CPP_MIN_LOG_LEVEL="2")


def halves(items: list, parts: int) -> list[list]:
    """``items`` cut into ``parts`` contiguous groups (the first ones get the remainder)."""
    parts = max(1, min(parts, len(items)))
    return [items[len(items) * i // parts : len(items) * (i + 1) // parts] for i in range(parts)]


def measure_concurrent(
    cmds: list[list[str]], env: dict, interval_s: float = 0.1
) -> tuple[Measurement, list[str], list[float]]:
    """Runs ``cmds`` at the same time; the Measurement's wall time ends with the last one, its peak
    RSS is the largest sum over all their process trees, its return code the first nonzero one.
    Also returns each command's output and its own wall time."""
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile(mode="w+")) for _ in cmds]
        start = time.monotonic()
        procs = [
            subprocess.Popen(c, stdout=log, stderr=subprocess.STDOUT, env=env, text=True)
            for c, log in zip(cmds, logs, strict=True)
        ]
        ended: list[float | None] = [None] * len(procs)
        peak = 0
        try:
            while any(e is None for e in ended):
                running = [p for p, e in zip(procs, ended, strict=True) if e is None]
                peak = max(peak, sum(tree_rss_bytes(p.pid) for p in running))
                time.sleep(interval_s)
                for i, p in enumerate(procs):
                    if ended[i] is None and p.poll() is not None:
                        ended[i] = time.monotonic() - start
        finally:
            for p in procs:  # interrupted: stop the ones this function started
                if p.poll() is None:
                    p.terminate()
                    p.wait()
        wall = time.monotonic() - start
        outputs = []
        for log in logs:
            log.seek(0)
            outputs.append(log.read())
    rc = next((p.returncode for p in procs if p.returncode), 0)
    return Measurement(rc, wall, peak, "\n".join(outputs)), outputs, [e or 0.0 for e in ended]


# --- bertprep run -----------------------------------------------------------------------------


def write_config(corpus: dict, output: Path, path: Path) -> None:
    config = {
        "output": str(output),
        "seed": SEED,
        "inputs": {"jsonl": corpus["files"]},
        "clean": {"dedup": "near"},
        "vocab": {"path": str(VOCAB), "lowercase": True},
        "eval": {"fraction": 0.01},
        "phases": PHASES,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))


def run_bertprep(mb: float, corpus: dict, args: argparse.Namespace) -> dict:
    out = WORK / f"run-{mb:g}mb"
    config = WORK / f"run-{mb:g}mb.yaml"
    shutil.rmtree(out, ignore_errors=True)
    write_config(corpus, out, config)
    cmd = [
        *bertprep_command(),
        "run",
        "--config",
        str(config),
        "--direct_running_mode=multi_processing",
        f"--direct_num_workers={args.workers}",
    ]
    print(f"[{mb:g} MB] bertprep run (memory sampled) ...", file=sys.stderr, flush=True)
    sampled = measure(cmd, env=environment(), memory="all")
    if sampled.returncode == 0:
        shutil.rmtree(out, ignore_errors=True)
        print(f"[{mb:g} MB] bertprep run (timed) ...", file=sys.stderr, flush=True)
        m = measure(cmd, env=environment(), memory="none")
    else:
        m = sampled
    result = {
        "pipeline": "bertprep",
        "command": " ".join(cmd),
        "corpus_mb": round(corpus["bytes"] / 1e6, 1),
        "corpus_documents": corpus["documents"],
        "wall_s": round(m.wall_seconds, 1),
        "sampled_wall_s": round(sampled.wall_seconds, 1),
        "peak_rss_mb": round(sampled.peak_rss_bytes / 2**20),
        "peak_pss_mb": round(sampled.peak_pss_bytes / 2**20),
        "returncode": m.returncode,
    }
    summary_path = out / "run_summary.json"
    if m.returncode != 0 or not summary_path.exists():
        result["error"] = m.output[-6000:]
        print(f"bertprep run failed (rc {m.returncode}):\n{m.output[-4000:]}", file=sys.stderr)
        return result
    summary = json.loads(summary_path.read_text())
    result["documents"] = summary.get("documents")
    result["sentences"] = summary.get("sentences")
    result["split"] = summary.get("split")
    result["summary_seconds"] = summary.get("seconds")
    result["stages"] = {s["name"]: round(s["seconds"], 1) for s in summary.get("stages", [])}
    result["instances"] = {
        row["phase"]: {side: row[side]["instances"] for side in ("train", "eval") if side in row}
        for row in summary.get("phases", [])
    }
    result["shard_bytes"] = {
        row["phase"]: {side: row[side]["bytes"] for side in ("train", "eval") if side in row}
        for row in summary.get("phases", [])
    }
    if not args.keep:
        shutil.rmtree(out, ignore_errors=True)
    return result


# --- the hand-built reference -----------------------------------------------------------------


def run_reference(mb: float, corpus: dict, args: argparse.Namespace) -> dict:
    base = WORK / f"reference-{mb:g}mb"
    shutil.rmtree(base, ignore_errors=True)
    text = base / "text"
    env = environment()
    result: dict = {
        "pipeline": "reference",
        "corpus_mb": round(corpus["bytes"] / 1e6, 1),
        "corpus_documents": corpus["documents"],
        "parts": {},
    }
    print(f"[{mb:g} MB] reference: punkt sentence split ...", file=sys.stderr, flush=True)
    split_cmd = [
        sys.executable,
        "-m",
        "benchmarks.reference_split",
        "--output",
        str(text),
        "--processes",
        str(args.workers),
        *corpus["files"],
    ]
    m = measure(split_cmd, env=env)
    if m.returncode != 0:
        result["error"] = m.output[-6000:]
        print(f"reference split failed:\n{m.output[-4000:]}", file=sys.stderr)
        return result
    counts = json.loads(m.output.strip().splitlines()[-1])
    result["documents"] = counts["documents"]
    result["sentences"] = counts["sentences"]
    result["parts"]["split"] = {
        "wall_s": round(m.wall_seconds, 1),
        "peak_rss_mb": round(m.peak_rss_bytes / 2**20),
        "text_mb": round(counts["bytes"] / 1e6, 1),
    }
    groups = halves(sorted(str(p) for p in text.glob("*.txt")), args.workers)
    env = dict(env, PYTHONPATH=str(reference_package()))
    result["instances"] = {}
    for phase in PHASES:
        name = phase["name"]
        out = base / name
        out.mkdir(parents=True)
        per_process = max(1, phase["num_shards"] // len(groups))
        cmds = []
        for p, group in enumerate(groups):
            outputs = [out / f"part-{p}-{k:05d}.tfrecord" for k in range(per_process)]
            cmds.append(
                [
                    sys.executable,
                    "-m",
                    "bert.create_pretraining_data",
                    f"--input_file={','.join(group)}",
                    f"--output_file={','.join(str(o) for o in outputs)}",
                    f"--vocab_file={VOCAB}",
                    "--do_lower_case=True",
                    f"--max_seq_length={phase['max_seq_length']}",
                    f"--max_predictions_per_seq={phase['max_predictions_per_seq']}",
                    f"--masked_lm_prob={phase['masked_lm_prob']}",
                    f"--random_seed={SEED + p}",
                    f"--dupe_factor={phase['dupe_factor']}",
                    f"--short_seq_prob={phase['short_seq_prob']}",
                ]
            )
        print(
            f"[{mb:g} MB] reference: create_pretraining_data.py {name} ({len(cmds)} processes) ...",
            file=sys.stderr,
            flush=True,
        )
        m, outputs, walls = measure_concurrent(cmds, env)
        if m.returncode != 0:
            result["error"] = m.output[-6000:]
            print(f"reference {name} failed:\n{m.output[-4000:]}", file=sys.stderr)
            return result
        written = []
        for output in outputs:
            found = re.findall(r"Wrote (\d+) total instances", output)
            written.append(int(found[-1]) if found else 0)
        result["instances"][name] = {"train": sum(written)}
        result["parts"][name] = {
            "wall_s": round(m.wall_seconds, 1),
            "process_wall_s": [round(w, 1) for w in walls],
            "peak_rss_mb": round(m.peak_rss_bytes / 2**20),
            "instances_per_process": written,
            "shard_bytes": sum(f.stat().st_size for f in out.glob("*.tfrecord")),
        }
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    result["wall_s"] = round(sum(p["wall_s"] for p in result["parts"].values()), 1)
    result["peak_rss_mb"] = max(p["peak_rss_mb"] for p in result["parts"].values())
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)
    return result


# --- report -----------------------------------------------------------------------------------

HEADER = (
    "| date | corpus MB | documents | pipeline | wall s | peak RSS MB | per-stage s | instances "
    "(train + eval) | ratio |\n|---|---|---|---|---|---|---|---|---|"
)


def _stage_label(name: str) -> str:
    return name.split(":", 1)[1] if name.startswith("phase:") else name


def row(date: str, r: dict, workers: int) -> str:
    if "error" in r:
        stages = "failed (see JSON)"
    elif r["pipeline"] == "bertprep":
        stages = " · ".join(f"{_stage_label(k)} {v}" for k, v in r["stages"].items())
    else:
        stages = " · ".join(f"{k} {v['wall_s']}" for k, v in r["parts"].items())
    instances = " · ".join(
        f"{name} {sides.get('train', 0):,}" + (f" + {sides['eval']:,}" if "eval" in sides else "")
        for name, sides in r.get("instances", {}).items()
    )
    label = (
        f"bertprep run, multi_processing×{workers}"
        if r["pipeline"] == "bertprep"
        else f"punkt split + create_pretraining_data.py, {workers} processes"
    )
    documents = r.get("documents")
    peak = r.get("peak_rss_mb")
    pss = f" (PSS {r['peak_pss_mb']:,})" if r.get("peak_pss_mb") else ""
    ratio = f"{r['ratio']:.1f}×" if r.get("ratio") else ""
    return (
        f"| {date} | {r['corpus_mb']} | {f'{documents:,}' if documents is not None else ''} | "
        f"{label} | {r.get('wall_s', '')} | {f'{peak:,}{pss}' if peak is not None else ''} | "
        f"{stages} | "
        f"{instances} | {ratio} |"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, nargs="+", default=[100.0])
    ap.add_argument(
        "--reference",
        type=float,
        nargs="*",
        default=[],
        help="sizes (MB) on which to also run the hand-built reference (bertprep runs on them too)",
    )
    ap.add_argument("--workers", type=int, default=2, help="Beam workers / reference processes")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED, help="corpus seed")
    ap.add_argument("--keep", action="store_true", help="keep the shards and the reference text")
    args = ap.parse_args()
    os.chdir(ROOT)  # `-m benchmarks.reference_split` and relative paths
    WORK.mkdir(parents=True, exist_ok=True)
    if args.reference:
        reference_package()  # download before anything is timed
    today = datetime.date.today().isoformat()
    started = datetime.datetime.now().isoformat(timespec="seconds")
    sizes = list(dict.fromkeys([*args.megabytes, *args.reference]))
    results: list[dict] = []
    rows: list[str] = []
    print(HEADER, flush=True)
    for mb in sizes:
        corpus = build_corpus(mb, args.seed, lambda s: print(s, file=sys.stderr, flush=True))
        mine = run_bertprep(mb, corpus, args)
        done = [mine]
        if mb in args.reference:
            ref = run_reference(mb, corpus, args)
            if "error" not in ref and "error" not in mine:
                ref["ratio"] = round(ref["wall_s"] / mine["wall_s"], 2)
            done.append(ref)
        for r in done:
            results.append({"megabytes": mb, **r})
            rows.append(row(today, r, args.workers))
            print(rows[-1], flush=True)
    log = WORK / f"run_benchmark-{today}.json"
    runs = json.loads(log.read_text()) if log.exists() else []
    runs.append(
        {
            "started": started,
            "argv": sys.argv[1:],
            "workers": args.workers,
            "phases": PHASES,
            "header": HEADER,
            "rows": rows,
            "results": results,
        }
    )
    log.write_text(json.dumps(runs, indent=2))
    print(f"\nwritten to {log}", file=sys.stderr)
    return 1 if any("error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
