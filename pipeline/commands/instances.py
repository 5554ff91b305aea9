"""``bertprep instances``: BERT text files + vocab.txt → sharded TFRecord pretraining instances."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

from pipeline.commands import SUMMARIES
from pipeline.commands.common import (
    add_command,
    add_job_flags,
    job_config_from_args,
    parse_bool,
    progress_printer,
)
from pipeline.jobs.config import flag_defaults
from pipeline.jobs.instances import (
    InstancesJobConfig,
    JobConfigError,
    run_instances_job,
)
from pipeline.jobs.reference_compat import COMPATS, INVOCATIONS, REFERENCE, run_reference_job
from pipeline.runtime.beam_options import cluster_path, make_pipeline_options, runs_on_a_cluster
from transforms.features import DEFAULT_PACK_INSTANCES, DYNAMIC, INPUT_MODES, MASKINGS

DEFAULTS = flag_defaults(InstancesJobConfig)
"""The flags' defaults: the job config's."""

HELP = SUMMARIES["instances"]
EPILOG = """\
Any other --flags are Apache Beam pipeline options, e.g. --runner DataflowRunner --project P
--region R --temp_location gs://B/tmp --setup_file ./setup.py, or for the local DirectRunner
--direct_running_mode in_memory|multi_processing (default multi_processing) and
--direct_num_workers N (default: one per CPU). multi_threading is refused (it loses records).

google-research/bert's create_pretraining_data.py command line works unchanged: --input_file,
--output_file, --vocab_file, --do_lower_case=True|False, --do_whole_word_mask=True|False,
--max_seq_length, --max_predictions_per_seq, --masked_lm_prob, --random_seed, --dupe_factor,
--short_seq_prob. --input_file and --output_file take comma lists (input globs allowed); the
output files are the shards (all in one directory, which also gets manifest.json and
rejects.jsonl), instances spread round-robin over them as the reference does.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "instances", HELP, epilog=EPILOG)
    io = p.add_argument_group("input and output")
    io.add_argument(
        "--input",
        action="append",
        default=[],
        help="required (or --input_file): text file(s), one sentence per line, blank line between "
        "documents; path, glob, directory (every file under it) or gs:// URL; .gz/.bz2 read "
        "transparently; repeatable",
    )
    io.add_argument(
        "--vocab", "--vocab_file", required=True, help="WordPiece vocab.txt (one token per line)"
    )
    io.add_argument(
        "--output", help="required (or --output_file): output directory (local or gs://)"
    )
    io.add_argument(
        "--num-shards",
        type=int,
        help="number of TFRecord shards, exactly (default: follow the data: ~128 MiB shards, a "
        "power of two, at least 16 unless the input is too small to give each shard records)",
    )
    add_job_flags(
        io,
        InstancesJobConfig,
        {
            "compression": ("shard compression", {"choices": ["none", "gzip"]}),
            "shard_prefix": "shard file name prefix",
        },
    )

    add_job_flags(
        p.add_argument_group("tokenization"),
        InstancesJobConfig,
        {
            "do_lower_case": "lowercase and strip accents (uncased vocab); --no-do-lower-case for cased"
        },
    )

    inst = p.add_argument_group("instances")
    add_job_flags(
        inst,
        InstancesJobConfig,
        {
            "max_seq_length": ("tokens per instance", {"aliases": ["--max_seq_length"]}),
            "max_predictions_per_seq": (
                "masked LM slots per instance",
                {"aliases": ["--max_predictions_per_seq"]},
            ),
            "masked_lm_prob": ("share of tokens to predict", {"aliases": ["--masked_lm_prob"]}),
        },
    )
    inst.add_argument(
        "--dupe-factor",
        "--dupe_factor",
        type=int,
        default=argparse.SUPPRESS,
        help=f"passes over the data (default: {DEFAULTS['dupe_factor']}); with --masking dynamic "
        "(default: 1)",
    )
    add_job_flags(
        inst,
        InstancesJobConfig,
        {
            "masking": (
                "static: 80/10/10 masks in the records; dynamic: unmasked records, masked by the "
                "trainer in tf.data (a new mask every step)",
                {"choices": MASKINGS},
            ),
            "input_mode": (
                "sentence pairs with NSP, or contiguous sentences packed to the length without "
                "NSP (full-sentences crosses documents with a [SEP], doc-sentences stays in one)",
                {"choices": INPUT_MODES},
            ),
            "short_seq_prob": (
                "probability of a shorter target length (random in [2, max])",
                {"aliases": ["--short_seq_prob"]},
            ),
            "pack_instances": (
                "up to K sentence-pair instances per row, end to end, each with its own masks "
                f"and NSP label (rows by first-fit-decreasing; the trainer attends within each "
                f"instance); the flag alone: K={DEFAULT_PACK_INSTANCES} (measured: 96-99%% of a "
                "512-token row's slots filled); 0: one padded instance per row",
                {"nargs": "?", "const": DEFAULT_PACK_INSTANCES, "metavar": "K"},
            ),
            "seed": ("seed of every random choice", {"aliases": ["--random_seed"]}),
            "whole_word_mask": "mask whole words",
            "allow_prediction_cap": "accept a --max-predictions-per-seq below "
            "round(max_seq_length * masked_lm_prob)",
        },
    )

    add_job_flags(
        p.add_argument_group("scale and limits"),
        InstancesJobConfig,
        {
            "bucket_size": "documents per bucket; random next sentences come from the same bucket",
            "max_sentence_chars": "longer lines are split at whitespace (and reported)",
            "max_document_sentences": "longer documents are cut into several (and reported)",
        },
    )
    add_job_flags(
        p.add_argument_group("google-research/bert compatibility (restore reference defects)"),
        InstancesJobConfig,
        {
            "reference_random_next": "allow a 'random' next sentence from the same document",
            "reference_random_tokens": "let the 10%% random replacement be any vocab id, "
            "[unusedN] and specials included",
            "reference_whole_word_decisions": "with --whole-word-mask, choose [MASK]/random/keep "
            "per piece instead of per word",
        },
    )
    add_job_flags(
        p.add_argument_group(
            "exact reference output (google-research/bert's create_pretraining_data.py, value "
            "for value)"
        ),
        InstancesJobConfig,
        {
            "compat": (
                "reference: write the reference script's own instances (its random stream, "
                "reading rules and defects; only its options are accepted)",
                {"choices": COMPATS},
            ),
            "invocations": (
                "with --compat reference: one run of the script over every input, one per input "
                "file (as MLPerf runs its parts), or one per --input pattern; runs go in "
                "parallel on the runner's workers",
                {"choices": INVOCATIONS},
            ),
        },
    )
    compat = p.add_argument_group(
        "google-research/bert's create_pretraining_data.py flags (and the underscore spellings "
        "above)"
    )
    compat.add_argument(
        "--input_file",
        action="append",
        default=[],
        metavar="A.txt,B*.txt",
        help="comma list of input files or globs (like --input)",
    )
    compat.add_argument(
        "--output_file",
        metavar="OUT.tfrecord[,...]",
        help="comma list of output files in one directory: the shards, in place of --output and "
        "--num-shards (one shard per name)",
    )
    _absl_bool(
        compat, "--do_lower_case", "do_lower_case", "as --do-lower-case / --no-do-lower-case"
    )
    compat.add_argument(
        "--nodo_lower_case",
        dest="do_lower_case",
        action="store_false",
        default=argparse.SUPPRESS,
        help="as --no-do-lower-case (absl's spelling of --do_lower_case=False)",
    )
    _absl_bool(compat, "--do_whole_word_mask", "whole_word_mask", "as --whole-word-mask")
    p.set_defaults(run=run, beam_options=True)


def _absl_bool(group: argparse._ArgumentGroup, flag: str, dest: str, help_text: str) -> None:
    """An absl-style boolean flag (``--x``, ``--x=True``, ``--x=false``) setting ``dest``."""
    group.add_argument(
        flag,
        dest=dest,
        type=parse_bool,
        nargs="?",
        const=True,
        default=argparse.SUPPRESS,
        metavar="True|False",
        help=help_text,
    )


def reference_outputs(output_files: str) -> tuple[str, list[str]]:
    """``--output_file a.tfrecord,b.tfrecord`` → (their directory, their file names).

    The reference writes instances round-robin into the files given; here they are the shards
    (record ``g`` goes to shard ``g % n``, as the reference's writer index does), so they must
    share one directory, which also receives manifest.json and rejects.jsonl.
    """
    paths = [p.strip() for p in output_files.split(",") if p.strip()]
    if not paths:
        raise JobConfigError("--output_file: no file names given")
    parts = [p.rsplit("/", 1) if "/" in p else [".", p] for p in paths]
    directories = {d or "/" for d, _ in parts}
    if len(directories) > 1:
        raise JobConfigError(
            "--output_file: the output files must be in one directory (they are its shards), "
            f"got {', '.join(sorted(directories))}"
        )
    return directories.pop(), [name for _, name in parts]


def config_from_args(args: argparse.Namespace) -> InstancesJobConfig:
    """The job's configuration from native and google-research/bert flags; JobConfigError when
    they are missing or conflict."""
    inputs = list(args.input)
    for item in args.input_file:
        inputs += [p.strip() for p in item.split(",") if p.strip()]
    if not inputs:
        raise JobConfigError("give the input text with --input (or --input_file)")
    shard_names = None
    output = args.output
    num_shards = args.num_shards
    if args.output_file is not None:
        if args.output is not None:
            raise JobConfigError("give either --output (a directory) or --output_file, not both")
        output, shard_names = reference_outputs(args.output_file)
        if num_shards is not None and num_shards != len(shard_names):
            raise JobConfigError(
                f"--num-shards {num_shards} but --output_file names {len(shard_names)} file(s)"
            )
        num_shards = len(shard_names)
    if output is None:
        raise JobConfigError("give the output directory with --output (or --output_file)")
    return job_config_from_args(
        InstancesJobConfig,
        args,
        inputs=inputs,
        output=output,
        shard_names=shard_names,
        dupe_factor=getattr(
            args, "dupe_factor", 1 if args.masking == DYNAMIC else DEFAULTS["dupe_factor"]
        ),
        num_shards=num_shards,
    )


def format_summary(manifest: dict) -> str:
    t = manifest["totals"]
    rows = [
        ("input files", t["input_files"]),
        ("documents", t["documents"]),
        ("sentences", t["sentences"]),
        ("tokens", t["tokens"]),
        ("instances", t["instances"]),
        *(
            [("rows (packed)", f"{t['rows']:,}, {t['instances_per_row']} instances per row")]
            if manifest.get("packing")
            else []
        ),
        ("padding", t.get("padding_fraction")),
        ("masking", manifest.get("masking", "static")),
        ("input mode", manifest.get("input_mode", "sentence-pairs")),
        ("IsNext ratio", t["is_next_ratio"]),
        ("truncated pairs", t["truncated_pairs"]),
        ("predictions/instance", t["mean_predictions_per_instance"])
        if manifest.get("masking", "static") == "static"
        else ("expected predictions/instance", t.get("expected_predictions_per_instance")),
        ("shards", manifest.get("num_shards_reason", len(manifest["shards"]))),
        ("seconds", manifest["elapsed_seconds"]),
    ] + [(f"skipped: {k}", v) for k, v in sorted(manifest["skipped"].items())]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    progress = progress_printer("instances")

    config = config_from_args(args)
    options = make_pipeline_options(beam_args)
    if runs_on_a_cluster(options):
        config = dataclasses.replace(
            config,
            inputs=[cluster_path(p) for p in config.inputs],
            vocab=cluster_path(config.vocab),
            output=cluster_path(config.output),
        )
        from pipeline.runtime.dask_runner import check_cluster_sees

        check_cluster_sees(options, config.output)
    started = time.monotonic()
    if config.compat == REFERENCE:
        manifest = run_reference_job(config, options, progress)
        summary = format_reference_summary(manifest)
    else:
        manifest = run_instances_job(config, options, progress)
        summary = format_summary(manifest)
    progress(f"done in {time.monotonic() - started:.1f} s; manifest: {config.output}/manifest.json")
    print(summary, file=sys.stderr)
    return 0


def format_reference_summary(manifest: dict) -> str:
    t = manifest["totals"]
    rows = [
        ("compat", "google-research/bert create_pretraining_data.py"),
        ("invocations", t["invocations"]),
        ("input files", t["input_files"]),
        ("documents", t["documents"]),
        ("sentences", t["sentences"]),
        ("tokens", t["tokens"]),
        ("instances", t["instances"]),
        ("IsNext ratio", t["is_next_ratio"]),
        ("predictions/instance", t["mean_predictions_per_instance"]),
        ("output files", len(manifest["shards"])),
        ("seconds", manifest["elapsed_seconds"]),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in rows)
