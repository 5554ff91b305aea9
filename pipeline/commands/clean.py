"""``bertprep clean``: raw corpora (Wikipedia dumps, books, JSONL, Parquet) → clean documents."""

from __future__ import annotations

import argparse
import sys

from pipeline.clean_job import CleanJobConfig
from pipeline.commands.common import add_command, progress_printer
from pipeline.job_config import flag_defaults

DEFAULTS = flag_defaults(CleanJobConfig)
"""The flags' defaults: the job config's."""

HELP = "clean raw corpora into sentence-split documents (Parquet + BERT text export)"
EPILOG = """\
Other --flags are Apache Beam pipeline options (see `bertprep instances --help`).
Sentence splitting uses NLTK's punkt_tab parameters when NLTK finds them (NLTK_DATA); otherwise
Punkt is trained on a deterministic sample of the corpus and saved in OUTPUT/punkt.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "clean", HELP, epilog=EPILOG)
    src = p.add_argument_group("inputs (each repeatable; local, glob or gs://)")
    src.add_argument(
        "--wikipedia",
        action="append",
        default=[],
        help="MediaWiki XML dumps (.xml, .bz2, .gz, .xz)",
    )
    src.add_argument("--books", action="append", default=[], help="one book per text file")
    src.add_argument("--jsonl", action="append", default=[], help="JSON lines, one doc per line")
    src.add_argument("--parquet", action="append", default=[], help="Parquet, one doc per row")
    src.add_argument(
        "--text-field", default=DEFAULTS["text_field"], help="text field of JSONL/Parquet records"
    )
    src.add_argument(
        "--title-field",
        default=DEFAULTS["title_field"],
        help="title field of JSONL/Parquet records",
    )
    out = p.add_argument_group("output")
    out.add_argument("--output", required=True, help="output directory")
    out.add_argument(
        "--chunk-mb",
        type=float,
        default=DEFAULTS["chunk_mb"],
        help="text per output file (and per unit of work after reading), in MB",
    )
    out.add_argument(
        "--export-text",
        action=argparse.BooleanOptionalAction,
        default=DEFAULTS["export_text"],
        help="also write the BERT text format under OUTPUT/text",
    )
    flt = p.add_argument_group("filters")
    flt.add_argument(
        "--dedup",
        choices=["exact", "near", "none"],
        default=DEFAULTS["dedup"],
        help="exact: normalized content hash; near: also MinHash/LSH",
    )
    flt.add_argument(
        "--near-threshold",
        type=float,
        default=DEFAULTS["near_threshold"],
        help="estimated Jaccard similarity of word 5-shingles for --dedup near",
    )
    flt.add_argument(
        "--min-words", type=int, default=DEFAULTS["min_words"], help="shorter documents are dropped"
    )
    flt.add_argument(
        "--keep-disambiguation", action="store_true", help="keep Wikipedia disambiguation pages"
    )
    flt.add_argument(
        "--max-sentence-chars",
        type=int,
        default=DEFAULTS["max_sentence_chars"],
        help="longer sentences are cut at whitespace (and counted)",
    )
    flt.add_argument(
        "--seed", type=int, default=DEFAULTS["seed"], help="seed of the Punkt training sample"
    )
    out.add_argument(
        "--multistream-mb",
        type=float,
        default=DEFAULTS["multistream_mb"],
        help="a *-multistream.xml.bz2 dump with its index is split into ranges of about this "
        "many compressed MB, read by different workers",
    )
    p.set_defaults(run=run, beam_options=True)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.beam_options import make_pipeline_options
    from pipeline.clean_job import CleanJobConfig, run_clean_job

    progress = progress_printer("clean")

    config = CleanJobConfig(
        output=args.output,
        wikipedia=args.wikipedia,
        books=args.books,
        jsonl=args.jsonl,
        parquet=args.parquet,
        text_field=args.text_field,
        title_field=args.title_field,
        dedup=args.dedup,
        near_threshold=args.near_threshold,
        min_words=args.min_words,
        keep_disambiguation=args.keep_disambiguation,
        export_text=args.export_text,
        chunk_mb=args.chunk_mb,
        max_sentence_chars=args.max_sentence_chars,
        multistream_mb=args.multistream_mb,
        seed=args.seed,
    )
    manifest = run_clean_job(config, make_pipeline_options(beam_args), progress)
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
