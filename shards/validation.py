"""``bertprep validate``'s rules beyond the per-record checks: the manifests' files, counts and
checksums, what unmasked or packed shards' manifests must state, agreement with a trainer
configuration, and the verdict over a scanned shard set."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from shards.files import FileAccess, read_text
from shards.resolve import parent_of, size_mismatches
from shards.scan import ScanRequest, ShardScan, scan_shards
from shards.shard_set import ShardSet
from transforms.features import DYNAMIC, INPUT_MODES, MASKINGS, SENTENCE_PAIRS, STATIC

TRAINER_SIZE_KEYS = ("max_seq_length", "max_predictions_per_seq", "vocab_size")


def load_trainer_config(path: str, files: FileAccess | None = None) -> dict:
    """A trainer configuration (JSON, or YAML by its suffix) as one flat mapping: the keys of its
    ``data``, ``model`` and ``input`` sections join the top level. ValueError if not a mapping."""
    text = read_text(path, files)
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


def trainer_config_findings(config: Mapping, sizes, vocab_size: int | None) -> list[str]:
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
    if not any(k in config for k in TRAINER_SIZE_KEYS):
        findings.append(
            "trainer config names none of max_seq_length, max_predictions_per_seq, vocab_size"
        )
    return findings


def kind_findings(manifest: Mapping) -> list[str]:
    """What a manifest of unmasked or packed shards must state for the trainer to use them."""
    findings = []
    masking = manifest.get("masking", STATIC)
    mode = manifest.get("input_mode", SENTENCE_PAIRS)
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


def manifest_findings(manifest: Mapping, scans: Sequence[ShardScan], whole_set: bool) -> list[str]:
    """Shard files, record counts and content checksums against one manifest. ``whole_set``: the
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


def manifests_findings(
    manifests: Mapping[str, Mapping], scans: Sequence[ShardScan], whole_set: bool, named: bool
) -> list[str]:
    """``manifest_findings`` for every manifest: a manifest the caller ``named`` against every
    scanned shard, else each shard directory's manifest against the shards in that directory."""
    if named:
        return [f for m in manifests.values() for f in manifest_findings(m, scans, whole_set)]
    findings = []
    for path, manifest in manifests.items():
        here = [s for s in scans if parent_of(s.shard) == parent_of(path)]
        findings += manifest_findings(manifest, here, whole_set)
    return findings


@dataclass
class Validation:
    """The verdict over a shard set: every finding (empty: valid), and what was read."""

    findings: list[str] = field(default_factory=list)
    shards: int = 0
    records: int = 0
    broken_records: int = 0

    @property
    def valid(self) -> bool:
        return not self.findings


def validate_shard_set(
    shard_set: ShardSet,
    *,
    whole_set: bool,
    strict: bool = False,
    named_manifest: bool = False,
    trainer_config: Mapping | None = None,
    max_findings: int = 20,
    workers: int | None = None,
) -> Validation:
    """Scans every record of ``shard_set`` (``shards.scan``) and gathers the findings: shards
    whose size differs from the one their manifest recorded (checked first), read problems, broken records (at most ``max_findings`` named per shard), the manifests' files,
    counts and checksums (``manifests_findings``), with ``strict`` also a missing manifest and
    shard sizes that differ by more than one, the trainer configuration, the manifest's kind."""
    continuation = None
    if shard_set.tokens is not None:
        continuation = np.array([t.startswith("##") for t in shard_set.tokens], dtype=bool)
    request = ScanRequest(
        sizes=shard_set.sizes,
        check_ids=shard_set.ids,
        max_violations=max_findings,
        is_continuation=continuation,
        files=shard_set.files,
    )
    # Sizes first: one metadata call per shard names a shard cut short before any is read.
    findings: list[str] = [
        str(m)
        for m in size_mismatches(
            shard_set.paths, shard_set.manifests, shard_set.files, named=named_manifest
        )
    ]
    scans = scan_shards(shard_set.paths, request, workers)
    findings += [str(s.problem) for s in scans if s.problem]
    for scan in scans:
        findings += [f"{v.shard}: record {v.record}: {v.rule}: {v.detail}" for v in scan.violations]
        hidden = scan.violation_count - len(scan.violations)
        if hidden > 0:
            findings.append(f"{scan.shard}: ... and {hidden} more broken records")
    if shard_set.manifests:
        findings += manifests_findings(shard_set.manifests, scans, whole_set, named_manifest)
    elif strict:
        findings.append("no manifest.json found (--strict); pass --against")
    if strict:
        counts = [s.records for s in scans]
        if max(counts) - min(counts) > 1:
            findings.append(f"shard sizes differ by more than one: {min(counts)}..{max(counts)}")
    if trainer_config is not None:
        findings += trainer_config_findings(trainer_config, shard_set.sizes, shard_set.vocab_size)
    kinds = [f for m in shard_set.manifests.values() for f in kind_findings(m)]
    findings += list(dict.fromkeys(kinds))  # the same finding once, however many manifests
    return Validation(
        findings,
        len(scans),
        sum(s.records for s in scans),
        sum(s.violation_count for s in scans),
    )
