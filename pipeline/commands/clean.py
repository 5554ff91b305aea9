"""``bertprep clean``: raw corpora (Wikipedia dumps, books, JSONL, Parquet) → clean documents."""

from __future__ import annotations

import argparse
import sys

from pipeline.commands import SUMMARIES
from pipeline.commands.common import (
    add_command,
    add_job_flags,
    run_job_command,
)
from pipeline.jobs.clean import CleanJobConfig

HELP = SUMMARIES["clean"]
EPILOG = """\
Other --flags are Apache Beam pipeline options (see `bertprep instances --help`).
Sentence splitting uses NLTK's punkt_tab parameters when NLTK finds them (NLTK_DATA); otherwise
Punkt is trained on a deterministic sample of the corpus and saved in OUTPUT/punkt.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "clean", HELP, epilog=EPILOG)
    add_job_flags(
        p.add_argument_group("inputs (each repeatable; local, glob or gs://)"),
        CleanJobConfig,
        {
            "wikipedia": "MediaWiki XML dumps (.xml, .bz2, .gz, .xz)",
            "books": "one book per text file",
            "jsonl": "JSON lines, one doc per line",
            "parquet": "Parquet, one doc per row",
            "text_field": "text field of JSONL/Parquet records",
            "title_field": "title field of JSONL/Parquet records",
        },
    )
    out = p.add_argument_group("output")
    out.add_argument("--output", required=True, help="output directory")
    add_job_flags(
        out,
        CleanJobConfig,
        {
            "chunk_mb": "text per output file (and per unit of work after reading), in MB",
            "export_text": "also write the BERT text format under OUTPUT/text",
            "multistream_mb": "a *-multistream.xml.bz2 dump with its index is split into ranges "
            "of about this many compressed MB, read by different workers",
        },
    )
    add_job_flags(
        p.add_argument_group("filters"),
        CleanJobConfig,
        {
            "dedup": (
                "exact: normalized content hash; near: also MinHash/LSH",
                {"choices": ["exact", "near", "none"]},
            ),
            "near_threshold": "estimated Jaccard similarity of word 5-shingles for --dedup near",
            "min_words": "shorter documents are dropped",
            "keep_disambiguation": "keep Wikipedia disambiguation pages",
            "max_sentence_chars": "longer sentences are cut at whitespace (and counted)",
            "seed": "seed of the Punkt training sample",
        },
    )
    p.set_defaults(run=run, beam_options=True)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.jobs.clean import run_clean_job

    manifest = run_job_command("clean", CleanJobConfig, run_clean_job, args, beam_args)
    for source, counts in sorted(manifest["counts"].items()):
        shown = ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items()))
        print(f"  {source}: {shown}", file=sys.stderr)
    t = manifest["totals"]
    print(
        f"  total: {t['documents']:,} documents, {t['sentences']:,} sentences; "
        f"splitter: {manifest['sentence_splitter']}; {manifest['elapsed_seconds']} s",
        file=sys.stderr,
    )
    return 0
