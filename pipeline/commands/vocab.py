"""``bertprep vocab``: train a WordPiece vocabulary (Google's layout) on cleaned documents."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.commands.common import add_command, progress_printer
from pipeline.job_config import flag_defaults
from pipeline.vocab_job import VocabJobConfig

DEFAULTS = flag_defaults(VocabJobConfig)
"""The flags' defaults: the job config's."""

HELP = "train a BERT WordPiece vocab.txt on the cleaned corpus, with a report"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(
        subparsers, "vocab", HELP, description=HELP + ". Other --flags are Beam pipeline options."
    )
    p.add_argument(
        "--input",
        required=True,
        help="the clean stage's output directory (documents-*.parquet) or a glob",
    )
    p.add_argument("--output", required=True, help="output directory")
    p.add_argument(
        "--vocab-size",
        type=int,
        default=DEFAULTS["vocab_size"],
        help="tokens in vocab.txt, exactly",
    )
    casing = p.add_mutually_exclusive_group()
    casing.add_argument(
        "--lowercase",
        dest="do_lower_case",
        action="store_true",
        default=DEFAULTS["do_lower_case"],
        help="uncased: lowercase and strip accents, as the instance stage does (the default)",
    )
    casing.add_argument(
        "--cased",
        dest="do_lower_case",
        action="store_false",
        help="cased: keep case and accents (pass --no-do-lower-case to `bertprep instances` too)",
    )
    p.add_argument(
        "--sample-sentences",
        type=int,
        default=DEFAULTS["sample_sentences"],
        help="training sample size (sentences)",
    )
    p.add_argument(
        "--heldout-sentences",
        type=int,
        default=DEFAULTS["heldout_sentences"],
        help="held-out sample size for the report",
    )
    p.add_argument(
        "--heldout-per-mille",
        type=int,
        default=DEFAULTS["heldout_per_mille"],
        help="documents (per 1000) set aside for the held-out report sample",
    )
    p.add_argument(
        "--min-frequency",
        type=int,
        default=DEFAULTS["min_frequency"],
        help="minimum merge frequency",
    )
    p.add_argument(
        "--reserved-unused", type=int, default=DEFAULTS["reserved_unused"], help="[unusedN] slots"
    )
    p.add_argument(
        "--limit-alphabet",
        type=int,
        default=DEFAULTS["limit_alphabet"],
        help="characters in the alphabet",
    )
    p.add_argument("--seed", type=int, default=DEFAULTS["seed"], help="seed of the samples")
    p.add_argument("--compare-vocab", help="another vocab.txt to report on the same held-out text")
    p.set_defaults(run=run, beam_options=True)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.beam_options import make_pipeline_options
    from pipeline.vocab_job import VocabJobConfig, run_vocab_job

    progress = progress_printer("vocab")

    config = VocabJobConfig(
        input=args.input,
        output=args.output,
        vocab_size=args.vocab_size,
        do_lower_case=args.do_lower_case,
        sample_sentences=args.sample_sentences,
        heldout_sentences=args.heldout_sentences,
        heldout_per_mille=args.heldout_per_mille,
        min_frequency=args.min_frequency,
        reserved_unused=args.reserved_unused,
        limit_alphabet=args.limit_alphabet,
        seed=args.seed,
        compare_vocab=args.compare_vocab,
    )
    manifest = run_vocab_job(config, make_pipeline_options(beam_args), progress)
    report = manifest["report"]
    summary = {"vocab": report["heldout"], "seconds": manifest["seconds"]}
    if "compare" in report:
        summary["compare"] = {k: report["compare"][k] for k in ("heldout", "overlap")}
    for key in ("missing_characters",):
        for part in (
            summary.get("vocab") or {},
            (summary.get("compare") or {}).get("heldout") or {},
        ):
            part.pop(key, None)
    print(json.dumps(summary, indent=2), file=sys.stderr)
    return 0
