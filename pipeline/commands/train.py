"""``bertprep train``: BERT pretraining (masked LM + next sentence) on the shards with Keras.

TensorFlow, Keras and keras-hub are imported only when the command runs (``pip install .[train]``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from pipeline.commands import SUMMARIES
from pipeline.commands.common import add_command
from transforms.seeding import DEFAULT_SEED

HELP = SUMMARIES["train"]
EPILOG = """\
Sizes come from the shards' manifest.json (google-research/bert's shards have none: pass
--max-seq-length, --max-predictions-per-seq and --vocab-size); they are checked against the model
before step one. A run resumes from the latest checkpoint in --out automatically (step count, optimizer
and learning-rate schedule continue). Phase 2: a new --out with --init-checkpoint PHASE1_OUT; the
model's --max-position-embeddings must cover both phases (BERT: 512 for both).
Outputs in --out: checkpoints/, logs/ (TensorBoard), trainer_config.json, encoder.keras and
encoder/ (a keras-hub preset) for fine-tuning, eval_results.json.
A shard whose size differs from the one its manifest recorded (a copy cut short) is refused
before step one; a shard that turns out damaged later ends the run in one line naming it.
Exit status: 0 done, 1 training failed (diverged, or a damaged shard), 2 bad configuration or
shards (nothing trained)."""


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _switch(group, flag: str, default: bool | None, help_text: str) -> None:
    """A ``--flag/--no-flag`` pair (``default`` None: decided at run time)."""
    group.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)


def register(subparsers: argparse._SubParsersAction) -> None:
    from trainer.model_presets import preset_names

    p = add_command(subparsers, "train", HELP, epilog=EPILOG)
    io = p.add_argument_group("data and output")
    io.add_argument(
        "--data",
        action="append",
        required=True,
        help="training shards: directory, file or glob (local or gs://); repeatable",
    )
    io.add_argument("--out", required=True, help="run directory (local or gs://)")
    io.add_argument(
        "--eval-data", action="append", help="held-out shards evaluated after training; repeatable"
    )
    io.add_argument(
        "--eval-only",
        action="store_true",
        help="only evaluate the latest checkpoint of --out (or --init-checkpoint) on --eval-data, "
        "or on --data without it",
    )
    io.add_argument(
        "--eval-every", type=int, default=0, help="also evaluate every N steps (0: off)"
    )
    io.add_argument("--eval-batches", type=int, help="evaluate at most N batches; none: all")
    io.add_argument(
        "--vocab",
        help="vocab.txt exported with the encoder; none: the manifest's, if unchanged",
    )

    model = p.add_argument_group("model")
    model.add_argument("--model", default="base", help=f"encoder size: {', '.join(preset_names())}")
    model.add_argument(
        "--max-position-embeddings",
        type=_positive,
        default=512,
        help="position table size; must cover every phase's max_seq_length",
    )
    model.add_argument("--dropout", type=float, default=0.1, help="dropout rate")
    model.add_argument(
        "--init-checkpoint",
        help="start from this run's (or checkpoint's) model weights, e.g. phase 1's --out",
    )

    shards = p.add_argument_group(
        "shard sizes (for shards without manifest.json; checked against it when given)"
    )
    shards.add_argument("--max-seq-length", type=_positive, help="tokens per record")
    shards.add_argument("--max-predictions-per-seq", type=_positive, help="prediction slots")
    shards.add_argument(
        "--vocab-size", type=_positive, help="model vocabulary size; none: the manifest's"
    )

    opt = p.add_argument_group("optimization")
    opt.add_argument("--batch-size", type=_positive, default=256, help="global batch size")
    opt.add_argument("--steps", type=_positive, default=1_000_000, help="total training steps")
    opt.add_argument("--learning-rate", type=float, default=1e-4, help="peak learning rate")
    opt.add_argument("--warmup-steps", type=int, default=10_000, help="linear warmup steps")
    opt.add_argument("--optimizer", choices=["adamw", "lamb"], default="adamw", help="optimizer")
    opt.add_argument(
        "--recipe",
        choices=["default", "reference"],
        default="default",
        help="reference: google-research/bert's exactly (linear decay from step 0 under the "
        "warmup, AdamWeightDecay without bias correction, tanh GELU in the MLM head); default: "
        "decay from the warmup's end, Keras AdamW (bias-corrected), exact GELU",
    )
    opt.add_argument("--weight-decay", type=float, default=0.01, help="decoupled weight decay")
    opt.add_argument(
        "--clip-norm", type=float, default=1.0, help="global gradient-norm clip (0: off)"
    )
    opt.add_argument("--seed", type=int, default=DEFAULT_SEED, help="data order seed")
    opt.add_argument("--shuffle-buffer", type=int, default=10_000, help="record shuffle buffer")

    dev = p.add_argument_group("devices")
    where = dev.add_mutually_exclusive_group()
    where.add_argument("--tpu", help="TPU name or address ('local' on a TPU VM)")
    where.add_argument("--gpus", type=int, help="GPUs to use; none: all visible; 0: the CPU")
    dev.add_argument(
        "--mixed-precision",
        choices=["auto", "bf16", "fp16", "none"],
        default="auto",
        help="auto: bf16 on TPU and Ampere+ GPUs, fp16 with loss scaling on older GPUs, none on CPU",
    )
    _switch(dev, "--jit-compile", None, "XLA-compile the model step; none: on for a single GPU")
    dev.add_argument(
        "--steps-per-loop",
        type=_positive,
        default=None,
        help="train steps per host call (never past the next log/checkpoint/eval step); "
        "none: 100 with --tpu, else 1",
    )

    ck = p.add_argument_group("checkpoints and logs")
    ck.add_argument("--checkpoint-every", type=_positive, default=1000, help="save every N steps")
    ck.add_argument(
        "--stop-after",
        type=_positive,
        help="train at most N steps in this invocation, checkpoint and exit (time-limited jobs)",
    )
    ck.add_argument("--keep-checkpoints", type=_positive, default=5, help="checkpoints kept")
    ck.add_argument(
        "--log-every", type=_positive, default=100, help="TensorBoard/progress interval"
    )
    _switch(ck, "--progress", True, "progress line on stderr")
    ck.add_argument(
        "--synthetic",
        action="store_true",
        help="benchmark: repeat one real batch from memory (model speed without input cost)",
    )
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace):
    from trainer.input_pipeline import DataSpec
    from trainer.run_config import TrainConfig

    return TrainConfig(
        data=args.data,
        out=args.out,
        model=args.model,
        model_overrides={
            "max_position_embeddings": args.max_position_embeddings,
            "dropout": args.dropout,
        },
        batch_size=args.batch_size,
        steps=args.steps,
        learning_rate=args.learning_rate,
        warmup_steps=args.warmup_steps,
        weight_decay=args.weight_decay,
        optimizer=args.optimizer,
        recipe=args.recipe,
        clip_norm=args.clip_norm,
        spec=DataSpec(args.max_seq_length, args.max_predictions_per_seq, args.vocab_size),
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        log_every=args.log_every,
        steps_per_loop=args.steps_per_loop,
        stop_after=args.stop_after,
        init_checkpoint=args.init_checkpoint,
        eval_data=args.eval_data,
        eval_every=args.eval_every,
        eval_batches=args.eval_batches,
        tpu=args.tpu,
        gpus=args.gpus,
        precision=args.mixed_precision,
        jit_compile=args.jit_compile,
        seed=args.seed,
        shuffle_buffer=args.shuffle_buffer,
        progress=args.progress,
        vocab=args.vocab,
        synthetic=args.synthetic,
    )


def run(args: argparse.Namespace, extra: list[str]) -> int:
    def log(message: str) -> None:
        print(f"[bertprep train] {message}", file=sys.stderr, flush=True)

    from transforms.errors import UserError

    if extra:
        raise UserError(f"unknown arguments {' '.join(extra)}")
    try:
        from pipeline.runtime.quiet import import_tensorflow

        import_tensorflow()  # first, so that its start-up lines stay quiet
        from trainer.evaluation import evaluate_run
        from trainer.input_pipeline import ShardReadError
        from trainer.training import train
    except ImportError as e:
        raise UserError(f"{e}; install the training extras: pip install '.[train]'") from e
    from trainer.run_config import setting_problems

    problems = setting_problems(
        lambda key: getattr(args, key), lambda key: "--" + key.replace("_", "-")
    )
    if problems:
        raise UserError("; ".join(problems))
    try:
        config = config_from_args(args)
    except ValueError as e:
        raise UserError(str(e)) from e
    try:
        if args.eval_only:
            print(json.dumps(evaluate_run(config, log=log), indent=2))
            return 0
        with contextlib.redirect_stdout(sys.stderr):  # progress and Keras output; stdout gets JSON
            result = train(config, log=log)
    except (FloatingPointError, ShardReadError) as e:
        # The run diverged, or a shard turned out damaged after step one: not a usage error
        # (exit 1), said in one line (the message names the checkpoint or the shard).
        print(f"bertprep train: error: {e}", file=sys.stderr)
        return 1
    last = result.history[-1] if result.history else {}
    summary = {
        "step": result.step,
        "started_at": result.start_step,
        "resumed_from": result.restored_from,
        "initialized_from": result.initialized_from,
        "last": last,
        "sequences_per_second": result.sequences_per_second,
        "eval": result.eval,
        "encoder": result.encoder,
    }
    print(json.dumps(summary, indent=2))
    return 0
