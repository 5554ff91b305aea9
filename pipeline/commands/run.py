"""``bertprep run``: the whole job (clean → split → vocab → tokenize → instance phases),
resumable."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline.commands import SUMMARIES
from pipeline.commands.common import add_command, progress_printer

HELP = SUMMARIES["run"]
SAMPLE_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sample.yaml"
EPILOG = """\
Without --config: the project's embedded sample corpus, end to end, into ./bertprep-out.
Stages, each in its own directory under the output: clean (raw inputs to clean sentence-split
documents, clean/); split (a deterministic held-out set of documents, eval.fraction,
split/{train,eval}/); vocab (a WordPiece vocabulary trained on the train side, or vocab.path,
vocab/); tokenize (every document's sentences to token ids, once, tokens/{train,eval}/, read in
place by every phase and dupe pass); phase:<name> (one per instance phase: train and eval shards,
<name>/{train,eval}/). Other --flags are Beam pipeline options (e.g. --runner DataflowRunner ...;
see the README).
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "run", HELP, epilog=EPILOG)
    p.add_argument(
        "--config", help="YAML config (default: the embedded sample, configs/sample.yaml)"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. phases.0.dupe_factor=5 (repeatable)",
    )
    p.add_argument(
        "--force",
        action="append",
        default=[],
        metavar="STAGE",
        help="rerun STAGE even if current: clean, split, vocab, tokenize, phase:NAME, phase (every "
        "phase), all; repeatable",
    )
    p.set_defaults(run=run, beam_options=True)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    from pipeline.jobs.run import format_summary, run_all
    from pipeline.jobs.run_config import load_run_config
    from pipeline.runtime.beam_options import cluster_path, make_pipeline_options, runs_on_a_cluster

    progress = progress_printer("run")
    config = load_run_config(args.config or SAMPLE_CONFIG, args.set)
    options = make_pipeline_options(beam_args)  # (also refuses bad runner modes before any work)
    if runs_on_a_cluster(options):
        from pipeline.runtime.dask_runner import check_cluster_sees

        config.output = cluster_path(config.output)
        check_cluster_sees(options, config.output)
    summary = run_all(config, lambda: make_pipeline_options(beam_args), set(args.force), progress)
    print(format_summary(summary), file=sys.stderr)
    return 0
