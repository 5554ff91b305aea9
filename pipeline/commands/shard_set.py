"""What ``inspect``, ``stats`` and ``validate`` share: their shard arguments and the shard set
they name (``shards.shard_set``: sizes from ``--max-seq-length/--max-predictions-per-seq``, else
the manifests beside the shards, else the first record; the vocabulary from ``--vocab``, else the
manifest's)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from shards.shard_set import ShardSet


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


def add_workers_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workers", type=int, default=0, help="worker processes (0: one per CPU)")


def resolve_shard_set(args: argparse.Namespace, manifest_path: str | None = None) -> ShardSet:
    """The command's shard set (``shards.shard_set.open_shard_set``), read through Beam's
    FileSystems (local paths, ``gs://``)."""
    from pipeline.shard_files import BeamFiles
    from shards.shard_set import open_shard_set

    return open_shard_set(
        args.paths,
        files=BeamFiles(),
        manifest_path=manifest_path,
        vocab_path=args.vocab,
        max_seq_length=args.max_seq_length,
        max_predictions_per_seq=args.max_predictions_per_seq,
    )


def shard_set_or_exit_code(
    command: str, args: argparse.Namespace, extra: list[str], manifest_path: str | None = None
) -> ShardSet | int:
    """The command's ShardSet, or 2 after printing why it cannot be had (stray arguments, no
    matching shards, an unreadable manifest or vocab)."""
    from shards.files import ShardPathError

    if extra:
        print(f"bertprep {command}: error: unknown arguments {' '.join(extra)}", file=sys.stderr)
        return 2
    try:
        return resolve_shard_set(args, manifest_path=manifest_path)
    except (ShardPathError, OSError, ValueError) as e:
        print(f"bertprep {command}: error: {e}", file=sys.stderr)
        return 2
