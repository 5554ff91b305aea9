"""Training throughput (sequences/s) over precision, XLA, input and sequence length.

``python -m trainer.benchmark`` (on a GPU: BERT-base, batch 64 at seq 128 and 16 at seq 512)
trains the model for ``--steps`` steps once per combination of

- ``--precisions`` (default ``bf16,fp16``; fp16 with dynamic loss scaling),
- ``--xla`` (default ``on,off``: ``--jit-compile`` of the forward/backward step),
- ``--inputs`` (default ``real,synthetic``): the real input pipeline over shards (TFRecord read,
  parse, shuffle, batch) or one batch of the same shapes repeated from memory (no input cost),

at sequence length 128, and at 512 for the ``--long-plan`` combinations (default bf16 with XLA,
both inputs): 10 runs of ``--steps`` 60, so that the whole matrix fits a short GPU session
(``--steps-per-loop`` as the trainer resolves it unless given). Without ``--data`` the shards are
written first: ``--records`` random records per length in the feature contract (token ids below
``--vocab-size``, 15% prediction slots as BERT: 20 at 128, 76 at 512), read back through the
trainer's own pipeline. With ``--data`` (repeatable) those shards are used instead, each at its own
length.

Rates exclude the first host call (tracing, compilation). ``real_over_synthetic`` near 1 means the
input pipeline keeps up. Prints one JSON report (``--report`` also writes it, after each length);
a combination that fails (out of memory, say) is reported with its ``error`` and the exit status
is 1. Nothing else is kept.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from trainer.input_pipeline import DataSpec, resolve_shards
from trainer.run_config import TrainConfig
from trainer.training import train
from transforms.example_encoding import encode_examples
from transforms.masking import prediction_budget
from transforms.tfrecord import frame_records

RANDOM_VOCAB = 30522
"""Vocabulary of the random shards when ``--vocab-size`` is not given (BERT's uncased)."""

PREDICTIONS = {128: 20, 512: 76}
"""BERT's max_predictions_per_seq at its two lengths (else ``round(0.15 * length)``)."""


def predictions_for(seq_length: int) -> int:
    """Prediction slots for a sequence length (``PREDICTIONS``, else 15% of it, at least 1)."""
    return PREDICTIONS.get(seq_length, prediction_budget(seq_length, 0.15))


def write_random_shards(
    directory: Path, seq_length: int, records: int, vocab_size: int, shards: int = 2, seed: int = 0
) -> Path:
    """``records`` random records of ``seq_length`` tokens (contract-valid: [CLS]/[SEP], two
    segments, ascending masked positions, weights 1) in ``shards`` uncompressed TFRecord files."""
    low = min(1000, vocab_size // 2)  # above the special tokens
    rng = np.random.default_rng(seed)
    preds = predictions_for(seq_length)
    ids = rng.integers(low, vocab_size, (records, seq_length))
    half = seq_length // 2
    ids[:, 0], ids[:, half - 1], ids[:, -1] = 2, 3, 3  # [CLS]-like, [SEP]-like ids
    segments = np.zeros((records, seq_length), np.int64)
    segments[:, half:] = 1
    positions = np.sort(
        np.stack([rng.choice(np.arange(1, seq_length), preds, replace=False) for _ in ids]), 1
    )
    ints = {
        "input_ids": ids,
        "input_mask": np.ones((records, seq_length), np.int64),
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": rng.integers(low, vocab_size, (records, preds)),
        "next_sentence_labels": rng.integers(0, 2, (records, 1)),
    }
    floats = {"masked_lm_weights": np.ones((records, preds), np.float32)}
    encoded = encode_examples(ints, floats)
    directory.mkdir(parents=True, exist_ok=True)
    for i in range(shards):
        part = encoded[i::shards]
        (directory / f"part-{i:05d}-of-{shards:05d}.tfrecord").write_bytes(frame_records(part))
    return directory


def measure(
    args: argparse.Namespace,
    data: str,
    precision: str,
    xla: bool,
    synthetic: bool,
    out: str,
    batch_size: int,
) -> dict:
    """One timed training run; its row of the report."""
    config = TrainConfig(
        data=[data],
        out=out,
        model=args.model,
        model_overrides={"max_position_embeddings": args.max_position_embeddings},
        batch_size=batch_size,
        steps=args.steps,
        warmup_steps=min(10, args.steps),
        spec=DataSpec(vocab_size=args.vocab_size),
        checkpoint_every=10**9,
        log_every=args.steps,
        steps_per_loop=args.steps_per_loop,
        tpu=args.tpu,
        gpus=args.gpus,
        precision=precision,
        jit_compile=xla,
        progress=False,
        save_encoder=False,
        synthetic=synthetic,
        shuffle_buffer=args.shuffle_buffer,
    )
    result = train(config, log=lambda m: None)
    keras.backend.clear_session()  # the next run starts from a clean graph and memory
    gc.collect()
    rate = result.sequences_per_second or 0.0
    return {
        "input": "synthetic" if synthetic else "real",
        "precision": precision,
        "xla": xla,
        "batch_size": batch_size,
        "sequences_per_second": round(rate, 1),
        "ms_per_step": round(1000 * batch_size / rate, 2) if rate else None,
        "skipped_updates": result.skipped_updates,
        "final_loss": round(result.history[-1]["loss"], 4),
    }


def _choices(text: str, allowed: tuple[str, ...]) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    for v in values:
        if v not in allowed:
            raise argparse.ArgumentTypeError(f"{v!r} is not one of {', '.join(allowed)}")
    return values


def _batch_sizes(text: str) -> dict[int, int]:
    """``64`` (every length) or ``128:64,512:16``."""
    if ":" not in text:
        return {0: int(text)}
    pairs = (item.split(":") for item in text.split(","))
    return {int(k): int(v) for k, v in pairs}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", action="append", help="shards (repeatable); none: random shards")
    p.add_argument("--seq-lengths", default="128,512", help="lengths of the random shards")
    p.add_argument("--records", type=int, default=4096, help="random records per length")
    p.add_argument("--model", default="base")
    p.add_argument(
        "--batch-size", type=_batch_sizes, default="128:64,512:16", help="N or LEN:N,LEN:N"
    )
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--steps-per-loop", type=int, default=None)
    p.add_argument("--max-position-embeddings", type=int, default=512)
    p.add_argument(
        "--vocab-size",
        type=int,
        help=f"model vocabulary; none: the shards' ({RANDOM_VOCAB} random)",
    )
    p.add_argument(
        "--precisions",
        type=lambda t: _choices(t, ("bf16", "fp16", "none", "auto")),
        default="bf16,fp16",
    )
    p.add_argument("--xla", type=lambda t: _choices(t, ("on", "off")), default="on,off")
    p.add_argument(
        "--inputs", type=lambda t: _choices(t, ("real", "synthetic")), default="real,synthetic"
    )
    p.add_argument(
        "--long-plan",
        default="bf16:on",
        help="PRECISION:XLA combinations (comma-separated) run at lengths above 128, those of "
        "them in the matrix (none: the matrix's first); 'all': the same matrix as at 128",
    )
    p.add_argument("--tpu")
    p.add_argument("--gpus", type=int)
    p.add_argument("--shuffle-buffer", type=int, default=10_000)
    p.add_argument("--report", help="also write the JSON report here")
    return p.parse_args(argv)


def _combinations(args: argparse.Namespace, seq_length: int) -> list[tuple[str, bool]]:
    full = [(p, x == "on") for p in args.precisions for x in args.xla]
    if seq_length <= 128 or args.long_plan == "all":
        return full
    plan = {(p, x == "on") for p, x in (item.split(":") for item in args.long_plan.split(","))}
    return [c for c in full if c in plan] or full[:1]


def _seq_length_of(data: str) -> int:
    return resolve_shards([data]).max_seq_length


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report: dict = {
        "model": args.model,
        "steps": args.steps,
        "devices": [
            tf.config.experimental.get_device_details(d).get("device_name", d.name)
            for d in tf.config.list_physical_devices("GPU")
        ]
        or ["cpu"],
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
        "lengths": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        if args.data:
            datasets = [(data, _seq_length_of(data)) for data in args.data]
        else:
            lengths = [int(v) for v in args.seq_lengths.split(",")]
            vocab = args.vocab_size = args.vocab_size or RANDOM_VOCAB
            datasets = [
                (str(write_random_shards(Path(tmp, f"seq{n}"), n, args.records, vocab)), n)
                for n in lengths
            ]
        run = 0
        for data, seq_length in datasets:
            batch = args.batch_size.get(seq_length, args.batch_size.get(0, 64))
            rows = []
            for precision, xla in _combinations(args, seq_length):
                for synthetic in (i == "synthetic" for i in args.inputs):
                    run += 1
                    try:
                        row = measure(
                            args, data, precision, xla, synthetic, f"{tmp}/run{run}", batch
                        )
                    except Exception as e:  # one failed combination (e.g. out of memory)
                        row = {
                            "input": "synthetic" if synthetic else "real",
                            "precision": precision,
                            "xla": xla,
                            "batch_size": batch,
                            "error": f"{type(e).__name__}: {str(e)[:500]}",
                        }
                    rows.append(row)
                    print(f"[benchmark] seq {seq_length}: {json.dumps(row)}", file=sys.stderr)
            report["lengths"].append(
                {
                    "seq_length": seq_length,
                    "data": data if args.data else "random shards",
                    "runs": rows,
                    "real_over_synthetic": _ratios(rows),
                }
            )
            _write(report, args.report)  # what is done so far, in case a later length fails
    print(json.dumps(report, indent=2))
    failed = sum("error" in row for length in report["lengths"] for row in length["runs"])
    return 1 if failed else 0


def _write(report: dict, path: str | None) -> None:
    if path:
        Path(path).write_text(json.dumps(report, indent=2) + "\n")


def _ratios(rows: list[dict]) -> dict[str, float | None]:
    """Real over synthetic rate per precision/XLA pair measured both ways."""
    rates = {
        (r["precision"], r["xla"], r["input"]): r["sequences_per_second"]
        for r in rows
        if "error" not in r
    }
    ratios = {}
    for (precision, xla, kind), rate in rates.items():
        synthetic = rates.get((precision, xla, "synthetic"))
        if kind == "real" and synthetic:
            ratios[f"{precision}{' xla' if xla else ''}"] = round(rate / synthetic, 3)
    return ratios


if __name__ == "__main__":
    sys.exit(main())
