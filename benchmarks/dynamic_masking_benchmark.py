"""Static masks on disk vs unmasked shards masked in ``tf.data``: disk and training step time.

``python -m benchmarks.dynamic_masking_benchmark`` runs ``bertprep run`` once on the 14 Project
Gutenberg books of ``../shared/corpora/books`` with Google's uncased vocabulary and two seq-512
phases over the same tokenization: ``static`` (80/10/10 masks precomputed, dupe factor 10, the
BERT recipe) and ``dynamic`` (unmasked records, dupe factor 1). It reports the bytes of each
phase's training shards, then the input pipeline alone (batches/s through the trainer's
``make_dataset``: read, parse, and for the dynamic set the masking) and the training step time of
a small BERT (the ``tiny`` preset) on each set, CPU only. One JSON report is printed (``--report``
also writes it).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"


def run_config(work: Path, books: str, vocab: str, seq: int, predictions: int, shards: int) -> Path:
    """The ``bertprep run`` YAML of the two phases."""
    import yaml

    phase = dict(
        max_seq_length=seq,
        max_predictions_per_seq=predictions,
        masked_lm_prob=0.15,
        short_seq_prob=0.1,
        num_shards=shards,
        eval_num_shards=1,
    )
    config = {
        "output": str(work / "out"),
        "seed": 12345,
        "inputs": {"books": [books]},
        "clean": {"dedup": "exact"},
        "vocab": {"path": vocab, "lowercase": True},
        "eval": {"fraction": 0.01},
        "phases": [
            {"name": "static", **phase, "dupe_factor": 10, "masking": "static"},
            {"name": "dynamic", **phase, "dupe_factor": 1, "masking": "dynamic"},
        ],
    }
    path = work / "run.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def shard_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.tfrecord*"))


def input_rate(train_dir: Path, batch: int, batches: int) -> float:
    """Batches per second through the trainer's input pipeline (after 5 warm-up batches)."""
    from trainer.input_pipeline import make_dataset, resolve_shards

    info = resolve_shards([str(train_dir)])
    ds = make_dataset(info, batch, training=True, seed=1, masking_seed=1)
    it = iter(ds)
    for _ in range(5):
        next(it)
    t0 = time.perf_counter()
    for _ in range(batches):
        next(it)
    return batches / (time.perf_counter() - t0)


def step_time(train_dir: Path, out: Path, batch: int, steps: int) -> dict:
    """Steady-state training step time of the ``tiny`` preset on the shards."""
    from trainer.run_config import TrainConfig
    from trainer.training import train

    config = TrainConfig(
        data=[str(train_dir)],
        out=str(out),
        model="tiny",
        batch_size=batch,
        steps=steps,
        learning_rate=1e-4,
        warmup_steps=1,
        log_every=steps,
        checkpoint_every=steps,
        steps_per_loop=10,
        progress=False,
        save_encoder=False,
        seed=3,
    )
    result = train(config, log=lambda m: None)
    rate = result.sequences_per_second
    return {"sequences_per_second": rate, "step_ms": 1000 * batch / rate}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--books", default=str(CORPORA / "books" / "*.txt"))
    p.add_argument("--vocab", default=str(CORPORA / "vocab" / "bert-base-uncased-vocab.txt"))
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--predictions", type=int, default=80)
    p.add_argument("--shards", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--input-batches", type=int, default=200)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--work", help="working directory (default: a temporary one)")
    p.add_argument("--report", help="also write the JSON report here")
    args = p.parse_args(argv)
    os.environ.setdefault("NLTK_DATA", str(CORPORA / "nltk_data"))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    work = Path(args.work or tempfile.mkdtemp(prefix="dynmask-"))
    work.mkdir(parents=True, exist_ok=True)

    from pipeline.jobs.run import run_all
    from pipeline.jobs.run_config import load_run_config
    from pipeline.runtime.beam_options import make_pipeline_options

    config = load_run_config(
        run_config(work, args.books, args.vocab, args.seq, args.predictions, args.shards)
    )
    beam = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    t0 = time.perf_counter()
    run_all(config, lambda: make_pipeline_options(beam), set(), lambda m: None)
    prep_s = time.perf_counter() - t0
    report: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "corpus": args.books,
        "vocab": args.vocab,
        "max_seq_length": args.seq,
        "max_predictions_per_seq": args.predictions,
        "prep_seconds": round(prep_s, 1),
        "sets": {},
    }
    for name in ("static", "dynamic"):
        train_dir = work / "out" / name / "train"
        manifest = json.loads((train_dir / "manifest.json").read_text())
        report["sets"][name] = {
            "dupe_factor": manifest["dupe_factor"],
            "records": manifest["totals"]["instances"],
            "mb": round(shard_bytes(train_dir) / 1e6, 2),
            "phase_seconds": manifest["elapsed_seconds"],
        }
    for name in ("static", "dynamic"):
        train_dir = work / "out" / name / "train"
        entry = report["sets"][name]
        entry["input_batches_per_second"] = round(
            input_rate(train_dir, args.batch, args.input_batches), 1
        )
        timing = step_time(train_dir, work / f"train-{name}", args.batch, args.steps)
        entry["train_sequences_per_second"] = round(timing["sequences_per_second"], 2)
        entry["train_step_ms"] = round(timing["step_ms"], 1)
    s, d = report["sets"]["static"], report["sets"]["dynamic"]
    report["disk_ratio_static_over_dynamic"] = round(s["mb"] / d["mb"], 2)
    report["step_time_ratio_dynamic_over_static"] = round(
        d["train_step_ms"] / s["train_step_ms"], 3
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        Path(args.report).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
