"""What ``inspect``, ``stats`` and ``validate`` share: which shards, their sizes and vocabulary.

Sizes come from ``--max-seq-length/--max-predictions-per-seq``, else the manifest beside the shards,
else the first record (shards from google-research/bert have no manifest). The vocabulary comes
from ``--vocab``, else the manifest's vocab path when it is readable and its sha256 matches.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from transforms.errors import UserError


def add_shard_arguments(p: argparse.ArgumentParser, *, paths_help: str) -> None:
    p.add_argument("paths", nargs="+", help=paths_help)
    group = p.add_argument_group("shard format (read from the manifest or the records if omitted)")
    group.add_argument(
        "--vocab", help="vocab.txt to name tokens and check ids (default: manifest's)"
    )
    group.add_argument("--max-seq-length", type=int, help="record length (default: inferred)")
    group.add_argument(
        "--max-predictions-per-seq", type=int, help="prediction slots (default: inferred)"
    )


SHARD_PATHS_HELP = "shard files, globs or directories (local or gs://)"


def add_shard_command(
    subparsers: argparse._SubParsersAction, name: str, help_text: str, description: str
) -> argparse.ArgumentParser:
    """A subcommand that reads a shard set: its parser with the shard arguments."""
    from pipeline.commands.common import add_command

    p = add_command(subparsers, name, help_text, description=f"{help_text}. {description}")
    add_shard_arguments(p, paths_help=SHARD_PATHS_HELP)
    return p


def add_workers_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=0, help="worker processes (0: one per CPU)")


@dataclass
class ShardSet:
    """Resolved shard files and how to read them. ``notes`` say what was assumed."""

    paths: list[str]
    manifest_path: str | None
    manifest: dict | None
    sizes: object
    tokens: tuple[str, ...] | None
    vocab_size: int | None
    cls_id: int
    sep_id: int
    mask_id: int
    unk_id: int | None
    pad_id: int
    notes: list[str]


def resolve_shard_set(args: argparse.Namespace, manifest_path: str | None = None) -> ShardSet:
    """Finds the shards, manifest, sizes and vocabulary for a command (see module docstring)."""
    from shards.reader import RecordSizes, expand_shard_paths, find_manifest, infer_sizes, read_json
    from tokenizer.vocab import Vocab, VocabError

    paths = expand_shard_paths(args.paths)
    notes: list[str] = []
    manifest_path = manifest_path or find_manifest(args.paths, paths)
    manifest = read_json(manifest_path) if manifest_path else None
    if args.max_seq_length and args.max_predictions_per_seq:
        kind = (
            RecordSizes.from_manifest(manifest)
            if manifest and "max_seq_length" in manifest
            else None
        )
        sizes = RecordSizes(
            args.max_seq_length,
            args.max_predictions_per_seq,
            *((kind.masking, kind.input_mode) if kind else ()),
        )
    elif manifest and "max_seq_length" in manifest:
        sizes = RecordSizes.from_manifest(manifest)
    else:
        sizes = infer_sizes(paths[0])
        notes.append(
            f"sizes inferred from the first record: max_seq_length={sizes.max_seq_length}, "
            f"max_predictions_per_seq={sizes.max_predictions_per_seq}"
        )
    vocab = None
    vocab_path = args.vocab
    if not vocab_path and manifest and manifest.get("vocab", {}).get("path"):
        vocab_path = manifest["vocab"]["path"]
        try:
            candidate = Vocab.from_file(vocab_path)
            if candidate.sha256 == manifest["vocab"].get("sha256"):
                vocab = candidate
            else:
                notes.append(f"manifest vocab {vocab_path} has changed since; not used")
        except (OSError, VocabError):
            notes.append(f"manifest vocab {vocab_path} is not readable here; pass --vocab")
    elif vocab_path:
        vocab = Vocab.from_file(vocab_path)
    if vocab is None:
        vocab_size = manifest["vocab"]["size"] if manifest and "vocab" in manifest else None
        special = (manifest or {}).get("vocab", {}).get("special_ids")
        if special:
            notes.append("no vocabulary: ids shown as #id; special ids from the manifest")
            return ShardSet(
                paths,
                manifest_path,
                manifest,
                sizes,
                None,
                vocab_size,
                special["cls"],
                special["sep"],
                special["mask"],
                special["unk"],
                special["pad"],
                notes,
            )
        notes.append("no vocabulary: ids shown as #id; Google's layout assumed ([CLS]=101, ...)")
        return ShardSet(
            paths, manifest_path, manifest, sizes, None, vocab_size, 101, 102, 103, 100, 0, notes
        )
    return ShardSet(
        paths,
        manifest_path,
        manifest,
        sizes,
        vocab.tokens,
        len(vocab),
        vocab.cls_id,
        vocab.sep_id,
        vocab.mask_id,
        vocab.unk_id,
        vocab.pad_id,
        notes,
    )


def command_shard_set(
    args: argparse.Namespace, extra: list[str], manifest_path: str | None = None
) -> ShardSet:
    """The command's ShardSet; a UserError says why it cannot be had (stray arguments, no
    matching shards, an unreadable manifest or vocab)."""
    if extra:
        raise UserError(f"unknown arguments {' '.join(extra)}")
    try:
        return resolve_shard_set(args, manifest_path=manifest_path)
    except UserError:
        raise
    except (OSError, ValueError) as e:
        raise UserError(str(e)) from e
