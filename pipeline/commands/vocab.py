"""``bertprep vocab``: train a WordPiece vocabulary (Google's layout) on cleaned documents."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.commands import SUMMARIES
from pipeline.commands.common import (
    add_command,
    add_job_flags,
    run_job_command,
)
from pipeline.jobs.config import flag_defaults
from pipeline.jobs.vocab import VocabJobConfig

HELP = SUMMARIES["vocab"]


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
    add_job_flags(p, VocabJobConfig, {"vocab_size": "tokens in vocab.txt, exactly"})
    casing = p.add_mutually_exclusive_group()
    casing.add_argument(
        "--lowercase",
        dest="do_lower_case",
        action="store_true",
        default=flag_defaults(VocabJobConfig)["do_lower_case"],
        help="uncased: lowercase and strip accents, as the instance stage does (the default)",
    )
    casing.add_argument(
        "--cased",
        dest="do_lower_case",
        action="store_false",
        help="cased: keep case and accents (pass --no-do-lower-case to `bertprep instances` too)",
    )
    add_job_flags(
        p,
        VocabJobConfig,
        {
            "sample_sentences": "training sample size (sentences)",
            "heldout_sentences": "held-out sample size for the report",
            "heldout_per_mille": "documents (per 1000) set aside for the held-out report sample",
            "min_frequency": "minimum merge frequency",
            "reserved_unused": "[unusedN] slots",
            "limit_alphabet": "characters in the alphabet",
            "seed": "seed of the samples",
            "compare_vocab": "another vocab.txt to report on the same held-out text",
        },
    )
    p.set_defaults(run=run, beam_options=True)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.jobs.vocab import run_vocab_job

    manifest = run_job_command("vocab", VocabJobConfig, run_vocab_job, args, beam_args)
    report = manifest["report"]
    summary = {"vocab": report["heldout"], "seconds": manifest["step_seconds"]}
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
