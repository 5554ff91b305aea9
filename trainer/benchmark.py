"""Training throughput, and whether the input pipeline keeps up.

``python -m trainer.benchmark --data 'out/seq128/train' --model base --batch-size 64 --steps 100``
trains the same model twice for ``--steps`` steps: on the real shards, then on one real batch
repeated from memory (no input cost). It prints sequences/s and ms/step for both (the first call,
which traces and compiles, is excluded) and the ratio; a ratio near 1 means the input pipeline
keeps up. Nothing is kept: runs go to a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile

from trainer.input_pipeline import DataSpec
from trainer.run_config import TrainConfig
from trainer.training import train


def measure(args: argparse.Namespace, synthetic: bool, out: str) -> dict:
    config = TrainConfig(
        data=args.data,
        out=out,
        model=args.model,
        model_overrides={"max_position_embeddings": args.max_position_embeddings},
        batch_size=args.batch_size,
        steps=args.steps,
        warmup_steps=min(10, args.steps),
        spec=DataSpec(vocab_size=args.vocab_size),
        checkpoint_every=10**9,
        log_every=args.steps,
        steps_per_loop=args.steps_per_loop,
        tpu=args.tpu,
        gpus=args.gpus,
        precision=args.mixed_precision,
        jit_compile=args.jit_compile,
        progress=False,
        save_encoder=False,
        synthetic=synthetic,
        shuffle_buffer=args.shuffle_buffer,
    )
    result = train(config, log=lambda m: None)
    rate = result.sequences_per_second or 0.0
    return {
        "input": "synthetic (in memory)" if synthetic else "real shards",
        "sequences_per_second": round(rate, 1),
        "ms_per_step": round(1000 * args.batch_size / rate, 2) if rate else None,
        "final_loss": round(result.history[-1]["loss"], 4),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", action="append", required=True)
    p.add_argument("--model", default="base")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--steps-per-loop", type=int, default=1)
    p.add_argument("--max-position-embeddings", type=int, default=512)
    p.add_argument("--vocab-size", type=int)
    p.add_argument("--mixed-precision", default="auto")
    p.add_argument("--jit-compile", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--tpu")
    p.add_argument("--gpus", type=int)
    p.add_argument("--shuffle-buffer", type=int, default=10_000)
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for synthetic in (False, True):
            rows.append(measure(args, synthetic, f"{tmp}/{'synthetic' if synthetic else 'real'}"))
    real, synthetic = rows[0]["sequences_per_second"], rows[1]["sequences_per_second"]
    report = {
        "model": args.model,
        "batch_size": args.batch_size,
        "steps": args.steps,
        "precision": args.mixed_precision,
        "runs": rows,
        "real_over_synthetic": round(real / synthetic, 3) if synthetic else None,
    }
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
