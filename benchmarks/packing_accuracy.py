"""Held-out accuracy of a tiny BERT trained on packed rows against the same instances unpacked.

    .venv/bin/python -m benchmarks.packing_accuracy \\
        --unpacked RUN_K0/seq512/train --packed RUN_K3/seq512/train --eval RUN_K0/seq512/eval \\
        --seeds 1 2 3 --report benchmarks/work/packing-accuracy.json

Both shard sets must hold the same instances (the same ``bertprep run`` config with and without
``pack_instances``; ``benchmarks.packing_benchmark`` makes such pairs). For each seed the same
model (``--model``, fresh random initialization each run) is trained twice from scratch: on the
unpacked rows with ``--batch-size`` rows per step, and on the packed rows with the batch that
holds the same number of instances per step (``--batch-size`` ÷ the manifest's instances per
row, rounded) for the number of steps that gives the same real tokens (from the two manifests'
mean real tokens per row). Both are evaluated on the same unpacked held-out shards (``--eval``).

``--write-regrouped DIR`` writes the control instead and exits: the unpacked instances in a
random order (``--seeds``' first), packed by the same first-fit-decreasing (K = the packed
manifest's) over the whole set, rows in a random order, so that the instances sharing a row are
unrelated (the shard writer packs each batch of one bucket's instances, neighbours in the
corpus). ``--sides packed`` then trains only the packed side (say, on the control).

The report gives, per side, each seed's held-out MLM and NSP accuracy and the real tokens trained,
their mean and standard deviation over seeds (the noise: initialization, dropout and data order),
and the packed-minus-unpacked difference of the means. Equal within noise means the difference is
inside about two standard deviations of the seed-to-seed spread.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import time
from pathlib import Path

import keras
import numpy as np

from trainer.benchmark import write_packed_instances
from trainer.run_config import TrainConfig
from trainer.training import train
from transforms.features import MANIFEST


def mean_tokens_per_row(shards: Path) -> tuple[float, float]:
    """(real tokens per row, instances per row) from a train directory's manifest: the row's
    slots less its padding (``totals.padding_fraction``), and instances over rows."""
    manifest = json.loads((shards / MANIFEST).read_text())
    totals = manifest["totals"]
    rows = totals.get("rows", totals["instances"])
    real = (1.0 - totals["padding_fraction"]) * manifest["max_seq_length"]
    return real, totals["instances"] / rows


def read_instances(shards: Path) -> dict[str, np.ndarray]:
    """Every unpacked static record of a train directory, as the contract's feature arrays."""
    import tensorflow as tf

    manifest = json.loads((shards / MANIFEST).read_text())
    spec = {
        name: tf.io.FixedLenFeature(
            [f["length"]], tf.float32 if f["dtype"] == "float32" else tf.int64
        )
        for name, f in manifest["features"].items()
    }
    files = sorted(str(shards / s["file"]) for s in manifest["shards"])
    dataset = tf.data.TFRecordDataset(files).batch(4096).map(lambda x: tf.io.parse_example(x, spec))
    parts: dict[str, list[np.ndarray]] = {name: [] for name in spec}
    for batch in dataset.as_numpy_iterator():
        for name, value in batch.items():
            parts[name].append(value)
    return {name: np.concatenate(values) for name, values in parts.items()}


def write_regrouped(args: argparse.Namespace, target: Path) -> int:
    """The control (module docstring): the unpacked instances in a random order, packed."""
    inst = read_instances(args.unpacked)
    order = np.random.default_rng(args.seeds[0]).permutation(len(inst["input_ids"]))
    inst = {name: value[order] for name, value in inst.items()}
    packed = json.loads((args.packed / MANIFEST).read_text())
    k = packed["packing"]["max_instances_per_row"]
    rows = write_packed_instances(
        target, inst, k, packed["vocab"]["size"], shards=8, shuffle_seed=args.seeds[0]
    )
    print(f"[packing_accuracy] {len(order)} instances in {rows} rows: {target}", file=sys.stderr)
    return 0


def train_and_evaluate(
    args: argparse.Namespace, data: Path, batch: int, steps: int, seed: int, out: str
) -> dict:
    """One run from scratch; its held-out metrics and what it trained on."""
    config = TrainConfig(
        data=[str(data)],
        out=out,
        model=args.model,
        batch_size=batch,
        steps=steps,
        learning_rate=args.learning_rate,
        warmup_steps=max(1, steps // 10),
        eval_data=[str(args.eval)],
        checkpoint_every=10**9,
        log_every=steps,
        precision="none",
        jit_compile=False,
        seed=seed,
        progress=False,
        save_encoder=False,
    )
    t0 = time.perf_counter()
    result = train(config, log=lambda m: None)
    seconds = time.perf_counter() - t0
    keras.backend.clear_session()
    gc.collect()
    return {
        "seed": seed,
        "batch_size": batch,
        "steps": result.step,
        "real_tokens": int(sum(e["tokens"] for e in result.history)),
        "train_loss_last_interval": round(result.history[-1]["loss"], 4),
        "eval_mlm_accuracy": round(float(result.eval["mlm_accuracy"]), 5),
        "eval_nsp_accuracy": round(float(result.eval["nsp_accuracy"]), 5),
        "eval_loss": round(float(result.eval["loss"]), 5),
        "seconds": round(seconds, 1),
    }


def summarize(runs: list[dict]) -> dict:
    """Mean and standard deviation (ddof 1) over seeds of each held-out figure."""
    out = {}
    for key in ("eval_mlm_accuracy", "eval_nsp_accuracy", "eval_loss"):
        values = np.array([r[key] for r in runs])
        out[key] = {
            "mean": round(float(values.mean()), 5),
            "std": round(float(values.std(ddof=1)), 5) if len(values) > 1 else None,
        }
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--unpacked", type=Path, required=True, help="unpacked train shards")
    p.add_argument("--packed", type=Path, required=True, help="the same instances, packed")
    p.add_argument("--eval", type=Path, required=True, help="unpacked held-out shards")
    p.add_argument("--model", default="tiny", help="encoder preset (default: tiny)")
    p.add_argument("--batch-size", type=int, default=16, help="unpacked rows per step")
    p.add_argument("--steps", type=int, default=300, help="unpacked steps")
    p.add_argument("--learning-rate", type=float, default=1e-3, help="peak (default: 1e-3)")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--sides", nargs="+", default=["unpacked", "packed"], help="sides to train")
    p.add_argument("--write-regrouped", type=Path, help="write the control here and exit")
    p.add_argument("--report", type=Path, help="also write the JSON report here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.write_regrouped:
        return write_regrouped(args, args.write_regrouped)
    tokens_u, _ = mean_tokens_per_row(args.unpacked)
    tokens_p, per_row = mean_tokens_per_row(args.packed)
    batch_p = max(1, round(args.batch_size / per_row))
    steps_p = max(1, round(args.steps * args.batch_size * tokens_u / (batch_p * tokens_p)))
    report: dict = {
        "model": args.model,
        "learning_rate": args.learning_rate,
        "unpacked": {"batch_size": args.batch_size, "steps": args.steps, "runs": []},
        "packed": {
            "batch_size": batch_p,
            "steps": steps_p,
            "instances_per_row": per_row,
            "runs": [],
        },
    }
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            for side, data, batch, steps in (
                ("unpacked", args.unpacked, args.batch_size, args.steps),
                ("packed", args.packed, batch_p, steps_p),
            ):
                if side not in args.sides:
                    continue
                row = train_and_evaluate(args, data, batch, steps, seed, f"{tmp}/{side}-{seed}")
                print(f"[packing_accuracy] {side}: {json.dumps(row)}", file=sys.stderr)
                report[side]["runs"].append(row)
    for side in args.sides:
        report[side]["summary"] = summarize(report[side]["runs"])
    if len(args.sides) == 2:
        means = {side: report[side]["summary"] for side in args.sides}
        report["packed_minus_unpacked"] = {
            key: round(means["packed"][key]["mean"] - means["unpacked"][key]["mean"], 5)
            for key in ("eval_mlm_accuracy", "eval_nsp_accuracy", "eval_loss")
        }
    text = json.dumps(report, indent=2)
    print(text)
    if args.report:
        args.report.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
