"""``bertprep instances``: BERT text files + vocab.txt → sharded TFRecord pretraining instances."""

from __future__ import annotations

import argparse
import sys
import time

from pipeline.beam_options import UnsafeRunnerModeError, make_pipeline_options
from pipeline.commands.common import add_command, progress_printer
from pipeline.input_files import NoInputFilesError
from pipeline.instances_job import (
    InstancesJobConfig,
    JobConfigError,
    NoInstancesError,
    run_instances_job,
)
from transforms.bert_text import DEFAULT_MAX_DOCUMENT_SENTENCES, DEFAULT_MAX_SENTENCE_CHARS

HELP = "create BERT pretraining instances (sentence pairs + masks) as sharded TFRecords"
EPILOG = """\
Any other --flags are Apache Beam pipeline options, e.g. --runner DataflowRunner --project P
--region R --temp_location gs://B/tmp --setup_file ./setup.py, or for the local DirectRunner
--direct_running_mode in_memory|multi_processing (default multi_processing) and
--direct_num_workers N (default: one per CPU). multi_threading is refused (it loses records).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "instances", HELP, epilog=EPILOG)
    io = p.add_argument_group("input and output")
    io.add_argument(
        "--input",
        action="append",
        required=True,
        help="text file(s): one sentence per line, blank line between documents; path, glob or "
        "gs:// URL; .gz/.bz2 read transparently; repeatable",
    )
    io.add_argument("--vocab", required=True, help="WordPiece vocab.txt (one token per line)")
    io.add_argument("--output", required=True, help="output directory (local or gs://)")
    io.add_argument("--num-shards", type=int, default=256, help="number of TFRecord shards")
    io.add_argument(
        "--compression", choices=["none", "gzip"], default="none", help="shard compression"
    )
    io.add_argument("--shard-prefix", default="instances", help="shard file name prefix")

    tok = p.add_argument_group("tokenization")
    tok.add_argument(
        "--do-lower-case",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="lowercase and strip accents (uncased vocab); --no-do-lower-case for cased",
    )

    inst = p.add_argument_group("instances")
    inst.add_argument("--max-seq-length", type=int, default=128, help="tokens per instance")
    inst.add_argument(
        "--max-predictions-per-seq", type=int, default=20, help="masked LM slots per instance"
    )
    inst.add_argument(
        "--masked-lm-prob", type=float, default=0.15, help="share of tokens to predict"
    )
    inst.add_argument("--dupe-factor", type=int, default=10, help="passes over the data")
    inst.add_argument(
        "--short-seq-prob",
        type=float,
        default=0.1,
        help="probability of a shorter target length (random in [2, max])",
    )
    inst.add_argument("--seed", type=int, default=12345, help="seed of every random choice")
    inst.add_argument("--whole-word-mask", action="store_true", help="mask whole words")
    inst.add_argument(
        "--allow-prediction-cap",
        action="store_true",
        help="accept a --max-predictions-per-seq below round(max_seq_length * masked_lm_prob)",
    )

    scale = p.add_argument_group("scale and limits")
    scale.add_argument(
        "--bucket-size",
        type=int,
        default=2000,
        help="documents per bucket; random next sentences come from the same bucket",
    )
    scale.add_argument(
        "--max-sentence-chars",
        type=int,
        default=DEFAULT_MAX_SENTENCE_CHARS,
        help="longer lines are split at whitespace (and reported)",
    )
    scale.add_argument(
        "--max-document-sentences",
        type=int,
        default=DEFAULT_MAX_DOCUMENT_SENTENCES,
        help="longer documents are cut into several (and reported)",
    )

    ref = p.add_argument_group("google-research/bert compatibility (restore reference defects)")
    ref.add_argument(
        "--reference-random-next",
        action="store_true",
        help="allow a 'random' next sentence from the same document",
    )
    ref.add_argument(
        "--reference-random-tokens",
        action="store_true",
        help="let the 10%% random replacement be any vocab id, [unusedN] and specials included",
    )
    ref.add_argument(
        "--reference-whole-word-decisions",
        action="store_true",
        help="with --whole-word-mask, choose [MASK]/random/keep per piece instead of per word",
    )
    p.set_defaults(run=run)


def config_from_args(args: argparse.Namespace) -> InstancesJobConfig:
    return InstancesJobConfig(
        inputs=list(args.input),
        vocab=args.vocab,
        output=args.output,
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
        masked_lm_prob=args.masked_lm_prob,
        dupe_factor=args.dupe_factor,
        short_seq_prob=args.short_seq_prob,
        seed=args.seed,
        num_shards=args.num_shards,
        do_lower_case=args.do_lower_case,
        whole_word_mask=args.whole_word_mask,
        compression=args.compression,
        bucket_size=args.bucket_size,
        shard_prefix=args.shard_prefix,
        max_sentence_chars=args.max_sentence_chars,
        max_document_sentences=args.max_document_sentences,
        allow_prediction_cap=args.allow_prediction_cap,
        reference_random_next=args.reference_random_next,
        reference_random_tokens=args.reference_random_tokens,
        reference_whole_word_decisions=args.reference_whole_word_decisions,
    )


def format_summary(manifest: dict) -> str:
    t = manifest["totals"]
    rows = [
        ("input files", t["input_files"]),
        ("documents", t["documents"]),
        ("sentences", t["sentences"]),
        ("tokens", t["tokens"]),
        ("instances", t["instances"]),
        ("IsNext ratio", t["is_next_ratio"]),
        ("truncated pairs", t["truncated_pairs"]),
        ("predictions/instance", t["mean_predictions_per_instance"]),
        ("shards", len(manifest["shards"])),
        ("seconds", manifest["elapsed_seconds"]),
    ] + [(f"skipped: {k}", v) for k, v in sorted(manifest["skipped"].items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    progress = progress_printer("instances")

    try:
        options = make_pipeline_options(beam_args)
        config = config_from_args(args)
        started = time.monotonic()
        progress(f"writing {config.num_shards} shard(s) to {config.output}")
        manifest = run_instances_job(config, options, progress)
    except (UnsafeRunnerModeError, JobConfigError, NoInputFilesError, NoInstancesError) as e:
        print(f"bertprep instances: error: {e}", file=sys.stderr)
        return 2
    progress(f"done in {time.monotonic() - started:.1f} s; manifest: {config.output}/manifest.json")
    print(format_summary(manifest), file=sys.stderr)
    return 0
