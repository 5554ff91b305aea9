"""What ``inspect``, ``stats`` and ``validate`` share: their shard arguments and the shard set
they name (``shards.shard_set``: sizes from ``--max-seq-length/--max-predictions-per-seq``, else
the manifests beside the shards, else the first record; the vocabulary from ``--vocab``, else the
manifest's)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shards.shard_set import ShardSet

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


def resolve_shard_set(args: argparse.Namespace, manifest_path: str | None = None) -> ShardSet:
    """The command's shard set (``shards.shard_set.open_shard_set``), read through Beam's
    FileSystems (local paths, ``gs://``)."""
    from pipeline.files.shard_files import BeamFiles
    from shards.shard_set import open_shard_set

    return open_shard_set(
        args.paths,
        files=BeamFiles(),
        manifest_path=manifest_path,
        vocab_path=args.vocab,
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
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
