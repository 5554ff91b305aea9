"""``bertprep validate``: every invariant of the feature contract on every record, the manifest's
counts and checksums, and (optionally) agreement with a trainer's configuration."""

from __future__ import annotations

import argparse
import json
import sys

from pipeline.commands.common import add_command
from pipeline.commands.shard_set import add_shard_arguments, add_workers_argument, command_shard_set
from transforms.errors import UserError

HELP = "check every record against the feature contract, the manifest and a trainer config"
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


def _load_config(path: str) -> dict:
    from shards.reader import filesystems

    with filesystems().open(path) as f:
        text = f.read().decode("utf-8")
    if path.endswith((".yaml", ".yml")):
        import yaml

        data = yaml.safe_load(text)
    else:
        data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping")
    flat = dict(data)
    for section in ("data", "model", "input"):
        if isinstance(data.get(section), dict):
            flat.update(data[section])
    return flat


def trainer_config_findings(config: dict, sizes, vocab_size: int | None) -> list[str]:
    """Disagreements between the shards and a trainer configuration (empty when they agree)."""
    findings = []
    for key, actual in (
        ("max_seq_length", sizes.max_seq_length),
        ("max_predictions_per_seq", sizes.max_predictions_per_seq),
    ):
        if key in config and int(config[key]) != actual:
            findings.append(f"trainer config {key}={config[key]} but the shards have {actual}")
    if "vocab_size" in config:
        if vocab_size is None:
            findings.append(
                "trainer config sets vocab_size but the shards' vocabulary is unknown "
                "(pass --vocab)"
            )
        elif int(config["vocab_size"]) != vocab_size:
            findings.append(
                f"trainer config vocab_size={config['vocab_size']} but the shards' vocabulary has "
                f"{vocab_size} tokens"
            )
    if not any(k in config for k in ("max_seq_length", "max_predictions_per_seq", "vocab_size")):
        findings.append(
            "trainer config names none of max_seq_length, max_predictions_per_seq, vocab_size"
        )
    return findings


def kind_findings(manifest: dict) -> list[str]:
    """What a manifest of unmasked or packed shards must state for the trainer to use them."""
    from transforms.features import DYNAMIC, INPUT_MODES, MASKINGS

    findings = []
    masking = manifest.get("masking", "static")
    mode = manifest.get("input_mode", "sentence-pairs")
    if masking not in MASKINGS:
        findings.append(f"manifest: unknown masking {masking!r}")
    if mode not in INPUT_MODES:
        findings.append(f"manifest: unknown input_mode {mode!r}")
    if masking == DYNAMIC:
        spec = manifest.get("dynamic_masking")
        needed = ("masked_lm_prob", "max_predictions_per_seq", "vocab_size", "special_ids")
        if not isinstance(spec, dict) or any(k not in spec for k in needed):
            findings.append(
                "manifest: masking=dynamic but no complete dynamic_masking section "
                f"({', '.join(needed)}): the trainer cannot mask these shards"
            )
        elif spec["max_predictions_per_seq"] != manifest.get("max_predictions_per_seq"):
            findings.append("manifest: dynamic_masking.max_predictions_per_seq disagrees")
    return findings


def manifest_findings(manifest: dict, scans: list, whole_set: bool) -> list[str]:
    """Shard files, record counts and content checksums against the manifest. ``whole_set``: the
    scans cover the whole output (a directory or an explicit manifest), so missing shards count."""
    findings = []
    listed = {s["file"]: s for s in manifest.get("shards", [])}
    seen = set()
    for scan in scans:
        name = scan.shard.rsplit("/", 1)[-1]
        entry = listed.get(name)
        if entry is None:
            findings.append(f"{scan.shard}: not listed in the manifest")
            continue
        seen.add(name)
        if scan.problem is None and scan.records != entry["records"]:
            findings.append(
                f"{scan.shard}: {scan.records} records, the manifest says {entry['records']}"
            )
        if scan.content_sha256 and scan.content_sha256 != entry["content_sha256"]:
            findings.append(f"{scan.shard}: content checksum differs from the manifest")
    missing = sorted(set(listed) - seen)
    if missing and whole_set:
        findings.append(
            f"{len(missing)} shard(s) in the manifest were not found: "
            + ", ".join(missing[:5])
            + (" ..." if len(missing) > 5 else "")
        )
    return findings


def run(args: argparse.Namespace, extra: list[str]) -> int:
    from shards.reader import is_dir
    from shards.scan import ScanRequest, scan_shards
    from transforms.record_checks import SpecialIds

    shard_set = command_shard_set(args, extra, manifest_path=args.against)
    try:
        trainer = _load_config(args.trainer_config) if args.trainer_config else None
    except (OSError, ValueError) as e:
        raise UserError(str(e)) from e
    continuation = None
    if shard_set.tokens is not None:
        import numpy as np

        continuation = np.array([t.startswith("##") for t in shard_set.tokens], dtype=bool)
    request = ScanRequest(
        sizes=shard_set.sizes,
        check_ids=SpecialIds(
            shard_set.cls_id, shard_set.sep_id, shard_set.pad_id, shard_set.vocab_size
        ),
        max_violations=args.max_findings,
        is_continuation=continuation,
    )
    scans = scan_shards(shard_set.paths, request, args.workers or None)

    findings: list[str] = [str(s.problem) for s in scans if s.problem]
    for scan in scans:
        findings += [f"{v.shard}: record {v.record}: {v.rule}: {v.detail}" for v in scan.violations]
        hidden = scan.violation_count - len(scan.violations)
        if hidden > 0:
            findings.append(f"{scan.shard}: ... and {hidden} more broken records")
    if shard_set.manifest is not None:
        whole_set = bool(args.against) or args.strict or any(is_dir(p) for p in args.paths)
        findings += manifest_findings(shard_set.manifest, scans, whole_set)
    elif args.strict:
        findings.append("no manifest.json found (--strict); pass --against")
    if args.strict:
        counts = [s.records for s in scans]
        if max(counts) - min(counts) > 1:
            findings.append(f"shard sizes differ by more than one: {min(counts)}..{max(counts)}")
    if trainer is not None:
        findings += trainer_config_findings(trainer, shard_set.sizes, shard_set.vocab_size)
    if shard_set.manifest is not None:
        findings += kind_findings(shard_set.manifest)

    records = sum(s.records for s in scans)
    broken = sum(s.violation_count for s in scans)
    if args.json:
        print(
            json.dumps(
                {
                    "valid": not findings,
                    "shards": len(scans),
                    "records": records,
                    "broken_records_findings": broken,
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
        verdict = "INVALID" if findings else "valid"
        print(
            f"{verdict}: {len(scans)} shard(s), {records:,} records checked, "
            f"{len(findings)} finding(s)"
            + (
                f", manifest {shard_set.manifest_path}"
                if shard_set.manifest_path
                else ", no manifest"
            )
        )
    return 1 if findings else 0
