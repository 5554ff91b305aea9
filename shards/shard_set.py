"""What ``bertprep inspect``, ``stats`` and ``validate`` read: the shards, their manifests, sizes
and vocabulary, resolved by ``shards.resolve``'s rules.

Sizes given by the caller (both of them) are read with as given (``validate`` then reports every
record that does not have them); otherwise they are settled by ``shards.resolve.settle_sizes``.
The vocabulary comes from the caller, else the manifest's vocab path when it is readable and its
sha256 matches; without one, token ids are shown as ``#id`` and the special ids come from the
manifest, else Google's layout (``transforms.special_ids.GOOGLE_IDS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from shards.files import FileAccess, LocalFiles
from shards.reader import RecordSizes
from shards.resolve import expand_shard_paths, manifests_beside, read_manifest, settle_sizes
from transforms.special_ids import GOOGLE_IDS, SpecialIds


@dataclass
class ShardSet:
    """Resolved shard files and how to read them. ``notes`` say what was assumed."""

    paths: list[str]
    manifests: dict[str, dict]
    """Path → manifest: the one named by the caller, else each shard directory's."""
    sizes: RecordSizes
    tokens: tuple[str, ...] | None
    ids: SpecialIds
    """Special ids, with the vocabulary size when it is known."""
    notes: list[str]
    files: FileAccess

    @property
    def manifest_path(self) -> str | None:
        """The first manifest (the one the caller named, if any)."""
        return next(iter(self.manifests), None)

    @property
    def manifest(self) -> dict | None:
        return self.manifests[self.manifest_path] if self.manifests else None

    @property
    def vocab_size(self) -> int | None:
        return self.ids.vocab_size


def open_shard_set(
    patterns: Sequence[str],
    *,
    files: FileAccess | None = None,
    manifest_path: str | None = None,
    vocab_path: str | None = None,
    max_seq_length: int | None = None,
    max_predictions_per_seq: int | None = None,
) -> ShardSet:
    """The shard set ``patterns`` name (see the module docstring). Raises ShardPathError
    (nothing usable, manifests that disagree), OSError or ValueError (an unreadable manifest
    or vocabulary)."""
    from tokenizer.vocab import Vocab, VocabError

    files = files or LocalFiles()
    paths = expand_shard_paths(patterns, files)
    if manifest_path:
        manifests = {manifest_path: read_manifest(manifest_path, files)}
    else:
        manifests = manifests_beside(paths, files)
    notes: list[str] = []
    if max_seq_length and max_predictions_per_seq:
        try:
            kind = settle_sizes(paths, manifests, files).sizes if manifests else None
        except ValueError:
            kind = None  # the manifests disagree: the given sizes decide, static pairs assumed
        sizes = RecordSizes(
            max_seq_length,
            max_predictions_per_seq,
            *((kind.masking, kind.input_mode) if kind else ()),
        )
    else:
        settled = settle_sizes(paths, manifests, files)
        sizes = settled.sizes
        notes += settled.notes
    manifest = next(iter(manifests.values()), None)
    listed = (manifest or {}).get("vocab") or {}
    vocab = None
    if not vocab_path and listed.get("path"):
        try:
            candidate = Vocab.from_file(listed["path"])
            if candidate.sha256 == listed.get("sha256"):
                vocab = candidate
            else:
                notes.append(f"manifest vocab {listed['path']} has changed since; not used")
        except (OSError, VocabError):
            notes.append(f"manifest vocab {listed['path']} is not readable here; pass --vocab")
    elif vocab_path:
        vocab = Vocab.from_file(vocab_path)
    if vocab is not None:
        return ShardSet(paths, manifests, sizes, vocab.tokens, vocab.special_ids(), notes, files)
    if listed.get("special_ids"):
        notes.append("no vocabulary: ids shown as #id; special ids from the manifest")
        ids = SpecialIds.from_manifest(listed["special_ids"], listed.get("size"))
    else:
        notes.append("no vocabulary: ids shown as #id; Google's layout assumed ([CLS]=101, ...)")
        ids = replace(GOOGLE_IDS, vocab_size=listed.get("size"))
    return ShardSet(paths, manifests, sizes, None, ids, notes, files)
