"""``bertprep validate``: every invariant of the feature contract on every record, the manifest's
counts and checksums, and (optionally) agreement with a trainer's configuration."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.commands import SUMMARIES
from pipeline.commands.common import add_command
from pipeline.commands.shard_set import add_shard_arguments, add_workers_argument, command_shard_set
from transforms.errors import UserError

HELP = SUMMARIES["validate"]
EPILOG = (
    "Exit status: 0 valid, 1 something broken (each finding names shard, record, rule), 2 usage."
)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_command(subparsers, "validate", HELP, epilog=EPILOG)
    add_shard_arguments(p, paths_help="an output directory, shard files or globs (local or gs://)")
    p.add_argument("--against", help="manifest.json to compare with (default: the one beside)")
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail without a manifest, and when shard sizes differ by more than one",
    )
    p.add_argument(
        "--trainer-config",
        help="JSON/YAML with max_seq_length, max_predictions_per_seq, vocab_size to check against",
    )
    p.add_argument("--max-findings", type=int, default=20, help="findings printed per shard")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    add_workers_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from shards.validation import load_trainer_config, validate_shard_set

    shard_set = command_shard_set(args, extra, manifest_path=args.against)
    try:
        trainer = (
            load_trainer_config(args.trainer_config, shard_set.files)
            if args.trainer_config
            else None
        )
    except (OSError, ValueError) as e:
        raise UserError(str(e)) from e
    result = validate_shard_set(
        shard_set,
        whole_set=bool(args.against)
        or args.strict
        or any(shard_set.files.is_dir(p) for p in args.paths),
        strict=args.strict,
        named_manifest=bool(args.against),
        trainer_config=trainer,
        max_findings=args.max_findings,
        workers=args.workers or None,
    )
    findings = result.findings
    if args.json:
        print(
            json.dumps(
                {
                    "valid": result.valid,
                    "shards": result.shards,
                    "records": result.records,
                    "broken_records_findings": result.broken_records,
                    "findings": findings,
                    "notes": shard_set.notes,
                    "manifest": shard_set.manifest_path,
                },
                indent=2,
            )
        )
    else:
        for note in shard_set.notes:
            print(f"note: {note}", file=sys.stderr)
        for f in findings:
            print(f)
        verdict = "valid" if result.valid else "INVALID"
        print(
            f"{verdict}: {result.shards} shard(s), {result.records:,} records checked, "
            f"{len(findings)} finding(s)"
            + (
                f", manifest {shard_set.manifest_path}"
                if shard_set.manifest_path
                else ", no manifest"
            )
        )
    return 0 if result.valid else 1
