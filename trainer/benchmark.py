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

``--packing K`` measures packed rows against unpacked ones instead (``packing_main``): the same
``--records`` random instances, of varied lengths (``--full-fraction`` of them fill the row, the
others uniform from 8 tokens up: ~75% of the slots real, as BERT's shards at 512 have 68–73%),
written one per row and packed K per row by the shard writer's own first-fit-decreasing
(``transforms.instance_packing``) with a packed manifest, then trained side by side, same model,
same batch of rows (so the same tokens per batch), real input, alternately ``--rounds`` times.
Its figure is *real* tokens (``input_mask``) per second; the report gives each side's median, the
slots' fill, and ``packed_over_unpacked``. On a GPU (BERT-base, seq 512, bf16, XLA)::

    python -m trainer.benchmark --packing 3 --seq-lengths 512 --batch-size 512:16 \
        --precisions bf16 --xla on --steps 60 --report packing.json

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
from transforms.features import MANIFEST, kind_lengths, packed_prediction_slots
from transforms.instance_packing import packed_columns, plan_rows
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


def random_instances(
    seq_length: int, records: int, vocab_size: int, full_fraction: float = 0.5, seed: int = 0
) -> dict[str, np.ndarray]:
    """``records`` random ``[CLS] A [SEP] B [SEP]`` instances padded to ``seq_length``:
    ``full_fraction`` of them ``seq_length`` tokens long, the others uniform in [8, seq_length];
    ``min(P, max(1, round(0.15 n)))`` masked positions each (P = ``predictions_for``), used
    slots first, ascending. Unpacked feature arrays (the feature contract)."""
    low = min(1000, vocab_size // 2)
    rng = np.random.default_rng(seed)
    preds = predictions_for(seq_length)
    shortest = min(8, seq_length)
    lengths = np.where(
        rng.random(records) < full_fraction,
        seq_length,
        rng.integers(shortest, seq_length + 1, records),
    )
    col = np.arange(seq_length)
    inside = col[None, :] < lengths[:, None]
    ids = np.where(inside, rng.integers(low, vocab_size, (records, seq_length)), 0)
    middle = lengths // 2
    rows = np.arange(records)
    ids[:, 0], ids[rows, middle], ids[rows, lengths - 1] = 2, 3, 3
    segments = (inside & (col[None, :] > middle[:, None])).astype(np.int64)
    ordinary = inside & (ids != 2) & (ids != 3)
    keys = np.where(ordinary, rng.random((records, seq_length)), 2.0)
    counts = np.minimum(preds, np.maximum(1, np.round(lengths * 0.15).astype(np.int64)))
    # The first counts[i] of the sorted-by-key choices, then ascending.
    picked = np.argsort(keys, axis=1)[:, :preds]
    used = np.arange(preds)[None, :] < counts[:, None]
    chosen = np.sort(np.where(used, picked, seq_length), axis=1)
    positions = np.where(used, chosen, 0)
    return {
        "input_ids": ids,
        "input_mask": inside.astype(np.int64),
        "segment_ids": segments,
        "masked_lm_positions": positions,
        "masked_lm_ids": np.where(used, rng.integers(low, vocab_size, (records, preds)), 0),
        "masked_lm_weights": used.astype(np.float32),
        "next_sentence_labels": rng.integers(0, 2, (records, 1)),
    }


def _write_shards(directory: Path, records: list[bytes], shards: int) -> list[dict]:
    directory.mkdir(parents=True, exist_ok=True)
    listed = []
    for i in range(shards):
        name = f"part-{i:05d}-of-{shards:05d}.tfrecord"
        part = records[i::shards]
        (directory / name).write_bytes(frame_records(part))
        listed.append({"file": name, "records": len(part)})
    return listed


def write_packing_pair(
    directory: Path,
    seq_length: int,
    records: int,
    vocab_size: int,
    max_instances: int,
    full_fraction: float = 0.5,
    shards: int = 2,
    seed: int = 0,
) -> tuple[Path, Path, dict]:
    """The same random instances (``random_instances``) as unpacked shards (``unpacked/``) and
    as rows of up to ``max_instances`` packed by the shard writer's first-fit-decreasing with a
    packed manifest (``packed/``); (unpacked dir, packed dir, {rows, instances, fill of each})."""
    inst = random_instances(seq_length, records, vocab_size, full_fraction, seed)
    floats = ("masked_lm_weights", "next_sentence_weights")
    encoded = encode_examples(
        {k: v for k, v in inst.items() if k not in floats},
        {k: v for k, v in inst.items() if k in floats},
    )
    unpacked = directory / "unpacked"
    _write_shards(unpacked, encoded, shards)
    packed = directory / "packed"
    rows = write_packed_instances(packed, inst, max_instances, vocab_size, shards)
    tokens = int(inst["input_mask"].sum())
    return (
        unpacked,
        packed,
        {
            "instances": records,
            "unpacked_rows": records,
            "packed_rows": rows,
            "unpacked_fill": round(tokens / (records * seq_length), 4),
            "packed_fill": round(tokens / (rows * seq_length), 4),
        },
    )


def write_packed_instances(
    directory: Path,
    inst: dict[str, np.ndarray],
    max_instances: int,
    vocab_size: int,
    shards: int = 2,
    shuffle_seed: int | None = None,
) -> int:
    """Unpacked static instances (feature arrays of the contract, in the order given) packed
    up to ``max_instances`` per row by the shard writer's first-fit-decreasing
    (``transforms.instance_packing``), written as ``shards`` TFRecord files with a packed
    manifest (``packing``, ``features``, ``totals``); the number of rows. Rows are written in
    the order first-fit-decreasing opened them (longest first), or with ``shuffle_seed`` in a
    random order (as the shard writer's shuffle keys put them)."""
    seq_length = inst["input_ids"].shape[1]
    preds = inst["masked_lm_positions"].shape[1]
    floats = ("masked_lm_weights", "next_sentence_weights")
    lengths = inst["input_mask"].sum(axis=1)
    plan = plan_rows(lengths, seq_length, max_instances)
    slots = packed_prediction_slots(seq_length, preds, max_instances, 0.15)
    columns = packed_columns(
        input_ids=inst["input_ids"],
        segment_ids=inst["segment_ids"],
        lengths=lengths,
        next_sentence_labels=inst["next_sentence_labels"].reshape(-1),
        plan=plan,
        masked=(inst["masked_lm_positions"], inst["masked_lm_ids"], inst["masked_lm_weights"]),
        prediction_slots=slots,
    ).features()
    packed_records = encode_examples(
        {k: v for k, v in columns.items() if k not in floats},
        {k: v for k, v in columns.items() if k in floats},
    )
    if shuffle_seed is not None:
        order = np.random.default_rng(shuffle_seed).permutation(len(packed_records))
        packed_records = [packed_records[i] for i in order]
    listed = _write_shards(directory, packed_records, shards)
    lengths_of = kind_lengths(
        seq_length, preds, max_instances=max_instances, max_predictions_per_row=slots
    )
    manifest = {
        "max_seq_length": seq_length,
        "max_predictions_per_seq": preds,
        "masking": "static",
        "input_mode": "sentence-pairs",
        "packing": {
            "max_instances_per_row": max_instances,
            "max_predictions_per_row": slots,
            "strategy": "first-fit-decreasing",
        },
        "features": {
            name: {"dtype": "float32" if name in floats else "int64", "length": length}
            for name, length in lengths_of.items()
        },
        "vocab": {"size": vocab_size},
        "shards": listed,
        "totals": {
            "rows": plan.rows,
            "instances": len(lengths),
            "padding_fraction": round(1 - int(lengths.sum()) / (plan.rows * seq_length), 6),
        },
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return plan.rows


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
        "tokens_per_second": round(result.tokens_per_second or 0.0, 1),
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
    p.add_argument(
        "--packing",
        type=int,
        default=0,
        metavar="K",
        help="compare rows packed K per row with unpacked ones (real tokens/s) instead",
    )
    p.add_argument("--full-fraction", type=float, default=0.5, help="--packing: full instances")
    p.add_argument("--rounds", type=int, default=1, help="--packing: alternating rounds")
    return p.parse_args(argv)


def _combinations(args: argparse.Namespace, seq_length: int) -> list[tuple[str, bool]]:
    full = [(p, x == "on") for p in args.precisions for x in args.xla]
    if seq_length <= 128 or args.long_plan == "all":
        return full
    plan = {(p, x == "on") for p, x in (item.split(":") for item in args.long_plan.split(","))}
    return [c for c in full if c in plan] or full[:1]


def _seq_length_of(data: str) -> int:
    return resolve_shards([data]).max_seq_length


def _device_report(args: argparse.Namespace) -> dict:
    """The report's head: model, steps, devices and versions, and no lengths yet."""
    return {
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


def packing_main(args: argparse.Namespace) -> int:
    """``--packing K``: real tokens per second, packed against unpacked (module docstring)."""
    report = _device_report(args) | {"packing": args.packing, "rounds": args.rounds}
    vocab = args.vocab_size = args.vocab_size or RANDOM_VOCAB
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seq_length in (int(v) for v in args.seq_lengths.split(",")):
            batch = args.batch_size.get(seq_length, args.batch_size.get(0, 64))
            unpacked, packed, counts = write_packing_pair(
                Path(tmp) / f"seq{seq_length}",
                seq_length,
                args.records,
                vocab,
                args.packing,
                args.full_fraction,
            )
            entry = {"seq_length": seq_length, "batch_size": batch, **counts, "runs": []}
            for precision, xla in _combinations(args, seq_length):
                rates: dict[str, list[float]] = {"unpacked": [], "packed": []}
                for r in range(args.rounds):
                    for side, data in (("unpacked", unpacked), ("packed", packed)):
                        out = f"{tmp}/run-{seq_length}-{precision}-{xla}-{side}-{r}"
                        try:
                            row = measure(args, str(data), precision, xla, False, out, batch)
                        except Exception as e:
                            failed += 1
                            row = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
                        row = {"rows": side, "round": r, **row}
                        print(f"[benchmark] seq {seq_length}: {json.dumps(row)}", file=sys.stderr)
                        entry["runs"].append({"precision": precision, "xla": xla, **row})
                        if "error" not in row:
                            rates[side].append(row["tokens_per_second"])
                medians = {k: float(np.median(v)) if v else None for k, v in rates.items()}
                entry.setdefault("tokens_per_second", {})[f"{precision}{' xla' if xla else ''}"] = {
                    **medians,
                    "packed_over_unpacked": round(medians["packed"] / medians["unpacked"], 3)
                    if medians["packed"] and medians["unpacked"]
                    else None,
                }
            report["lengths"].append(entry)
            _write(report, args.report)
    print(json.dumps(report, indent=2))
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.packing:
        return packing_main(args)
    report = _device_report(args)
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
