"""Benchmark of ``bertprep instances --compat reference`` against google-research/bert's own script.

    .venv/bin/python -m benchmarks.reference_compat_benchmark [--megabytes 30] [--files 8]

Two cases, each run side by side in this session on the same books corpus (benchmarks/work,
built from the shared Gutenberg books; Google's uncased vocab; seq 128/20, dupe_factor 5,
seed 12345):

- **one invocation** over the whole ~``--megabytes`` corpus (every file in one
  ``--input_file`` list, as one command line of the reference);
- **``--files`` invocations over ``--files`` files** (the corpus regrouped into that many files):
  bertprep ``--invocations per-file`` on ``--workers`` Beam workers against the reference run the
  way MLPerf runs it, one process per file, ``--workers`` at a time (``xargs -P``).

For each: wall time and the peak resident memory of the whole process tree (launcher + Beam
workers; all the reference processes alive at once), and a check that the records decode to the
same values file by file (not timed). Prints Markdown rows for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import shutil
import sys
from pathlib import Path

from benchmarks.books_corpus import CORPORA
from benchmarks.instances_benchmark import WORK, corpus, reference_package
from benchmarks.process_tree import bertprep_command, measure

VOCAB = CORPORA / "vocab" / "bert-base-uncased-vocab.txt"


def grouped_files(source: Path, count: int) -> list[Path]:
    """The corpus's files concatenated into ``count`` files of about equal size (documents
    kept whole: every source file ends with a blank line)."""
    target = WORK / f"{source.name}-in-{count}"
    files = sorted(source.glob("*.txt"))
    out = [target / f"part-{i:05d}-of-{count:05d}.txt" for i in range(count)]
    if all(p.exists() for p in out):
        return out
    target.mkdir(parents=True, exist_ok=True)
    sizes = [0] * count
    handles = [p.open("wb") for p in out]
    for f in files:
        i = sizes.index(min(sizes))
        data = f.read_bytes()
        if not data.endswith(b"\n\n"):
            data += b"\n" if data.endswith(b"\n") else b"\n\n"
        handles[i].write(data)
        sizes[i] += len(data)
    for h in handles:
        h.close()
    return out


def reference_flags(args: argparse.Namespace) -> list[str]:
    return [
        f"--vocab_file={VOCAB}",
        "--do_lower_case=True",
        f"--max_seq_length={args.max_seq_length}",
        f"--max_predictions_per_seq={args.max_predictions_per_seq}",
        "--masked_lm_prob=0.15",
        "--random_seed=12345",
        f"--dupe_factor={args.dupe_factor}",
        "--short_seq_prob=0.1",
    ]


def environment() -> dict:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=str(reference_package()))


def run(cmd: list[str], label: str) -> dict:
    m = measure(cmd, env=environment())
    if m.returncode != 0:
        raise SystemExit(f"{label} failed:\n{m.output[-4000:]}")
    return {"wall_s": m.wall_seconds, "peak_mb": m.peak_rss_bytes / 2**20}


def parsed_batches(path: Path, args: argparse.Namespace):
    """The file's records parsed by TensorFlow (every feature's values), 4,096 at a time."""
    import tensorflow as tf

    from transforms.features import FEATURES

    spec = {
        f.name: tf.io.FixedLenFeature(
            [f.length(args.max_seq_length, args.max_predictions_per_seq)],
            tf.int64 if f.dtype == "int64" else tf.float32,
        )
        for f in FEATURES
    }
    data = tf.data.TFRecordDataset(str(path)).batch(4096)
    for batch in data.map(lambda r: tf.io.parse_example(r, spec)):
        yield {k: v.numpy() for k, v in batch.items()}


def same_records(ours: list[Path], theirs: list[Path], args: argparse.Namespace) -> int:
    """Records compared; raises SystemExit at the first file whose decoded values differ."""
    import numpy as np

    total = 0
    for a, b in zip(ours, theirs, strict=True):
        for x, y in zip(parsed_batches(a, args), parsed_batches(b, args), strict=True):
            if x.keys() != y.keys() or any(not np.array_equal(x[k], y[k]) for k in x):
                raise SystemExit(f"decoded records differ: {a} vs {b}")
            total += len(x["input_ids"])
    return total


def one_invocation(args: argparse.Namespace) -> list[dict]:
    src = corpus(args.megabytes)
    files = sorted(src.glob("*.txt"))
    size = sum(f.stat().st_size for f in files)
    out = WORK / "compat-one"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    names = [f"out-{i}.tfrecord" for i in range(args.outputs)]
    inputs = ",".join(str(f) for f in files)
    common = [f"--input_file={inputs}", *reference_flags(args)]
    ours_paths = [out / "bertprep" / n for n in names]
    theirs_paths = [out / "reference" / n for n in names]
    (out / "reference").mkdir()
    rows = []
    ours_cmd = [
        *bertprep_command(),
        "instances",
        "--compat",
        "reference",
        f"--output_file={','.join(str(p) for p in ours_paths)}",
        *common,
        f"--direct_num_workers={args.workers}",
    ]
    theirs_cmd = [
        sys.executable,
        "-m",
        "bert.create_pretraining_data",
        f"--output_file={','.join(str(p) for p in theirs_paths)}",
        *common,
    ]
    for label, cmd in (("bertprep --compat reference", ours_cmd), ("reference", theirs_cmd)):
        rows.append({"case": "one invocation", "tool": label, **run(cmd, label)})
    records = same_records(ours_paths, theirs_paths, args)
    for r in rows:
        r.update(corpus_mb=round(size / 1e6, 1), records=records)
    return rows


def many_invocations(args: argparse.Namespace) -> list[dict]:
    parts = grouped_files(corpus(args.megabytes), args.files)
    size = sum(p.stat().st_size for p in parts)
    out = WORK / "compat-many"
    shutil.rmtree(out, ignore_errors=True)
    (out / "reference").mkdir(parents=True)
    ours_cmd = [
        *bertprep_command(),
        "instances",
        "--compat",
        "reference",
        "--invocations",
        "per-file",
        "--input",
        str(parts[0].parent / "*.txt"),
        "--vocab",
        str(VOCAB),
        "--output",
        str(out / "bertprep"),
        *reference_flags(args)[1:],
        f"--direct_num_workers={args.workers}",
    ]
    flags = " ".join(shlex.quote(f) for f in reference_flags(args))
    one = (
        f"{shlex.quote(sys.executable)} -m bert.create_pretraining_data --input_file={{}} "
        f"--output_file={shlex.quote(str(out / 'reference'))}/$(basename {{}} .txt).tfrecord {flags}"
    )
    script = (
        f"ls {shlex.quote(str(parts[0].parent))}/*.txt | "
        f"xargs -P {args.workers} -I{{}} sh -c {shlex.quote(one)}"
    )
    rows = [
        {
            "case": f"{args.files} invocations",
            "tool": "bertprep --compat reference",
            **run(ours_cmd, "bertprep"),
        },
        {
            "case": f"{args.files} invocations",
            "tool": f"reference, {args.workers} at a time",
            **run(["sh", "-c", script], "reference"),
        },
    ]
    names = [p.name.removesuffix(".txt") + ".tfrecord" for p in parts]
    records = same_records(
        [out / "bertprep" / n for n in names], [out / "reference" / n for n in names], args
    )
    for r in rows:
        r.update(corpus_mb=round(size / 1e6, 1), records=records)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, default=30.0)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--outputs", type=int, default=2, help="output files of the one invocation")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dupe-factor", type=int, default=5)
    ap.add_argument("--max-seq-length", type=int, default=128)
    ap.add_argument("--max-predictions-per-seq", type=int, default=20)
    ap.add_argument("--cases", nargs="+", default=["one", "many"], choices=["one", "many"])
    args = ap.parse_args()
    today = datetime.date.today().isoformat()
    print("| date | case | corpus MB | records (equal) | tool | wall s | peak RSS MB | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        rows = one_invocation(args) if case == "one" else many_invocations(args)
        ours, theirs = rows
        for r in rows:
            ratio = (
                f"{theirs['wall_s'] / ours['wall_s']:.1f}× faster, "
                f"{ours['peak_mb'] / theirs['peak_mb']:.2f}× the memory"
                if r is ours
                else ""
            )
            print(
                f"| {today} | {r['case']} | {r['corpus_mb']} | {r['records']:,} | {r['tool']} | "
                f"{r['wall_s']:.1f} | {r['peak_mb']:,.0f} | {ratio} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
