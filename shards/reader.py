"""Streaming pretraining shards: file discovery, GZIP detection, framing with offsets, batch parsing.

Works on any shards with google-research/bert's feature spec: local paths, globs, directories and
``gs://`` (through Beam's FileSystems, which needs ``apache-beam[gcp]`` for GCS). A shard is read as
a stream, one frame at a time; it is never loaded whole. Damage (a truncated frame, a bad checksum,
a file that is not TFRecord) is reported with the record index and byte offset, never raised.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from transforms.errors import UserError
from transforms.example_encoding import decode_example
from transforms.features import SENTENCE_PAIRS, STATIC, features_of, kind_lengths
from transforms.tfrecord import masked_crc32c

MANIFEST = "manifest.json"
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MAX_RECORD_BYTES = 1 << 30


class ShardPathError(UserError, ValueError):
    """A shard path or pattern matched nothing usable."""


@dataclass(frozen=True)
class RecordSizes:
    """The two lengths that fix every feature's size, and the kind of record (which features
    it has: ``transforms.features.features_of``)."""

    max_seq_length: int
    max_predictions_per_seq: int
    masking: str = STATIC
    input_mode: str = SENTENCE_PAIRS

    @property
    def features(self):
        """The features a record of this kind has."""
        return features_of(self.masking, self.input_mode)

    def lengths(self) -> dict[str, int]:
        """Name → fixed length of every feature of this kind."""
        return kind_lengths(
            self.max_seq_length, self.max_predictions_per_seq, self.masking, self.input_mode
        )

    @classmethod
    def from_manifest(cls, manifest: dict) -> RecordSizes:
        """The sizes and kind a bertprep manifest states (older manifests: static pairs)."""
        return cls(
            int(manifest["max_seq_length"]),
            int(manifest["max_predictions_per_seq"]),
            manifest.get("masking", STATIC),
            manifest.get("input_mode", SENTENCE_PAIRS),
        )


@dataclass(frozen=True)
class ReadProblem:
    """A shard that could not be read to its end: where, and why."""

    shard: str
    record: int
    offset: int
    message: str

    def __str__(self) -> str:
        return f"{self.shard}: record {self.record} at byte {self.offset}: {self.message}"


def filesystems():
    from apache_beam.io.filesystems import FileSystems

    return FileSystems


def is_dir(path: str) -> bool:
    """Whether ``path`` names a directory (local or on a remote filesystem)."""
    fs = filesystems()
    if "://" not in path:
        import os

        return os.path.isdir(path)
    if fs.match([path])[0].metadata_list:
        return False  # an object of that name
    # Object stores have no directories: a prefix with objects under it stands for one.
    return bool(fs.match([path.rstrip("/") + "/*"], limits=[1])[0].metadata_list)


NOT_SHARD_NAMES = (MANIFEST, "stage.json", "run_summary.json", "trainer_config.json")
NOT_SHARD_PREFIXES = (".", "_", "rejects")
NOT_SHARD_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".md", ".html", ".png", ".parquet")
PHASE_SIDE = "train"
"""A ``bertprep run`` phase directory (``OUT/seq128``) stands for its training shards."""


def is_shard_name(path: str) -> bool:
    """Whether a file could be a shard: not a manifest, marker, summary, rejects list, report,
    hidden or temporary file (bertprep writes all of those beside its shards)."""
    name = path.rstrip("/").rsplit("/", 1)[-1]
    return not (
        name in NOT_SHARD_NAMES
        or name.startswith(NOT_SHARD_PREFIXES)
        or name.endswith(NOT_SHARD_SUFFIXES)
    )


class ShardFileSystem:
    """The three calls the resolver needs, through Beam's FileSystems (``TfFileSystem`` in the
    trainer does the same through ``tf.io.gfile``)."""

    def is_dir(self, path: str) -> bool:
        return is_dir(path)

    def glob(self, pattern: str) -> list[str]:
        return [m.path for m in filesystems().match([pattern])[0].metadata_list]

    def list_dir(self, path: str) -> list[str]:
        """Full paths of the entries directly in ``path`` (files and directories)."""
        base = path.rstrip("/")
        if "://" not in base:
            import os

            return [f"{base}/{name}" for name in sorted(os.listdir(base))]
        return self.glob(f"{base}/*")


def _shards_in(directory: str, fs) -> list[str]:
    base = directory.rstrip("/")
    return sorted(
        p for p in fs.glob(f"{base}/*.tfrecord*") if is_shard_name(p) and not fs.is_dir(p)
    )


def _phase_dirs(directory: str, fs) -> list[str]:
    """Sub-directories of a ``bertprep run`` output that are phases (hold ``train/`` shards)."""
    found = []
    for entry in fs.list_dir(directory):
        side = entry.rstrip("/") + "/" + PHASE_SIDE
        if fs.is_dir(entry) and fs.is_dir(side) and _shards_in(side, fs):
            found.append(entry.rstrip("/"))
    return sorted(found)


def shards_of_directory(directory: str, fs=None) -> list[str]:
    """The shard files a directory stands for, in this order of lookup:

    1. its own ``*.tfrecord*`` files (an instances output, or ``PHASE/train``, ``PHASE/eval``);
    2. a phase directory of ``bertprep run`` (``OUT/seq128``): the shards of its ``train/``;
    3. a run directory (``OUT``) with one phase: that phase's ``train/`` shards; with several,
       ShardPathError naming them (their sequence lengths differ: choose one);
    4. otherwise every file in it that can be a shard (``is_shard_name``: google-research/bert's
       output files may have any name).

    Non-shard files (manifest.json, stage.json, rejects.jsonl, hidden files...) never count.
    """
    fs = fs or ShardFileSystem()
    base = directory.rstrip("/")
    own = _shards_in(base, fs)
    if own:
        return own
    side = f"{base}/{PHASE_SIDE}"
    if fs.is_dir(side) and _shards_in(side, fs):
        return _shards_in(side, fs)
    phases = _phase_dirs(base, fs)
    if len(phases) == 1:
        return _shards_in(f"{phases[0]}/{PHASE_SIDE}", fs)
    if len(phases) > 1:
        names = ", ".join(p.rsplit("/", 1)[-1] for p in phases)
        raise ShardPathError(
            f"{directory} is a run directory with several phases ({names}): name one, "
            f"e.g. {phases[0]} (its train shards) or {phases[0]}/eval"
        )
    return sorted(p for p in fs.list_dir(base) if is_shard_name(p) and not fs.is_dir(p))


def expand_shard_paths(patterns: Sequence[str], fs=None) -> list[str]:
    """Shard files named by ``patterns`` (files, globs or directories), sorted, deduplicated.

    A directory stands for the shards ``shards_of_directory`` finds; a glob keeps only files that
    can be shards (``is_shard_name``). ``fs`` (default: Beam's FileSystems) answers ``is_dir``,
    ``glob`` and ``list_dir``. Raises ShardPathError naming a pattern that matched nothing.
    """
    fs = fs or ShardFileSystem()
    found: set[str] = set()
    for pattern in patterns:
        if fs.is_dir(pattern):
            matched = shards_of_directory(pattern, fs)
        else:
            matched = [p for p in fs.glob(pattern) if is_shard_name(p) and not fs.is_dir(p)]
        if not matched:
            raise ShardPathError(f"no shard files match {pattern}")
        found.update(matched)
    return sorted(found)


def find_manifest(patterns: Sequence[str], shards: Sequence[str]) -> str | None:
    """The manifest.json beside the shards (or in a directory given), if there is one."""
    fs = filesystems()
    candidates = [p.rstrip("/") + "/" + MANIFEST for p in patterns if is_dir(p)]
    candidates += sorted({s.rsplit("/", 1)[0] + "/" + MANIFEST for s in shards})
    for c in candidates:
        if fs.exists(c):
            return c
    return None


def read_json(path: str) -> dict:
    with filesystems().open(path) as f:
        return json.loads(f.read().decode("utf-8"))


def open_shard(path: str) -> BinaryIO:
    """The shard's uncompressed byte stream; GZIP is detected from the magic bytes, not the name."""
    from apache_beam.io.filesystem import CompressionTypes

    raw = filesystems().open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    head = raw.read(2)
    raw.seek(0)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


@dataclass
class Frames:
    """Iterates ``(index, offset, payload)`` over a stream; on damage stops and sets ``problem``.

    ``digest`` is the sha256 of the framed bytes read so far (the manifest's ``content_sha256``
    once the stream is read to its end).
    """

    stream: BinaryIO
    shard: str
    verify: bool = True

    def __post_init__(self) -> None:
        self.problem: ReadProblem | None = None
        self.digest = hashlib.sha256()
        self.records = 0

    def __iter__(self) -> Iterator[tuple[int, int, bytes]]:
        offset = 0
        read = self.stream.read
        update = self.digest.update
        index = 0
        try:
            while True:
                header = read(12)
                if not header:
                    return
                if len(header) < 12:
                    self._fail(index, offset, f"truncated frame header ({len(header)} of 12 bytes)")
                    return
                (length,) = _U64.unpack_from(header)
                if self.verify and masked_crc32c(header[:8]) != _U32.unpack_from(header, 8)[0]:
                    self._fail(
                        index,
                        offset,
                        "length checksum mismatch: not a TFRecord file, or damaged here",
                    )
                    return
                if length > _MAX_RECORD_BYTES:
                    self._fail(index, offset, f"implausible record length {length}")
                    return
                data = read(length)
                footer = read(4)
                if len(data) < length or len(footer) < 4:
                    self._fail(index, offset, f"truncated record ({len(data)} of {length} bytes)")
                    return
                if self.verify and masked_crc32c(data) != _U32.unpack(footer)[0]:
                    self._fail(index, offset, "payload checksum mismatch (damaged record)")
                    return
                update(header)
                update(data)
                update(footer)
                yield index, offset, data
                index += 1
                self.records = index
                offset += 16 + length
        except (OSError, EOFError) as e:  # gzip damage
            self._fail(index, offset, f"{type(e).__name__}: {e}")

    def _fail(self, index: int, offset: int, message: str) -> None:
        self.problem = ReadProblem(self.shard, index, offset, message)


def infer_sizes(shard: str) -> RecordSizes:
    """Record sizes from the first record of ``shard`` (for shards without a manifest)."""
    with open_shard(shard) as stream:
        frames = Frames(stream, shard)
        for _, _, data in frames:
            features = decode_example(data)
            if "input_ids" in features and "word_starts" in features:
                raise ShardPathError(
                    f"{shard}: unmasked records (masking=dynamic) are read with their "
                    "manifest.json, which is missing"
                )
            if "input_ids" not in features or "masked_lm_positions" not in features:
                raise ShardPathError(f"{shard}: the first record is not a BERT pretraining record")
            return RecordSizes(
                len(features["input_ids"]),
                len(features["masked_lm_positions"]),
                STATIC,
                SENTENCE_PAIRS if "next_sentence_labels" in features else "full-sentences",
            )
        if frames.problem:
            raise ShardPathError(str(frames.problem))
    raise ShardPathError(f"{shard} holds no records to infer sizes from")


def spec_problems(data: bytes, sizes: RecordSizes) -> list[str]:
    """What is wrong with one record's feature names, types and lengths (empty when fine)."""
    try:
        features = decode_example(data)
    except ValueError as e:
        return [f"not a tf.train.Example: {e}"]
    lengths = sizes.lengths()
    problems = []
    for f in sizes.features:
        values = features.get(f.name)
        if values is None:
            problems.append(f"feature {f.name} missing")
            continue
        if len(values) != lengths[f.name]:
            problems.append(
                f"feature {f.name} has {len(values)} values, expected {lengths[f.name]}"
            )
        is_float = any(isinstance(v, float) for v in values)
        if values and (f.dtype == "float32") != is_float:
            problems.append(f"feature {f.name} is not {f.dtype}")
    return problems


class BatchParser:
    """Parses serialized records into feature → (N, length) arrays with TensorFlow."""

    def __init__(self, sizes: RecordSizes) -> None:
        from pipeline.quiet import import_tensorflow

        tf = import_tensorflow()
        self._tf = tf
        self.sizes = sizes
        lengths = sizes.lengths()
        self._spec = {
            f.name: tf.io.FixedLenFeature(
                [lengths[f.name]], tf.int64 if f.dtype == "int64" else tf.float32
            )
            for f in sizes.features
        }

    def parse(self, records: list[bytes]) -> dict[str, np.ndarray] | None:
        """The parsed batch, or None when some record does not follow the spec."""
        tf = self._tf
        try:
            parsed = tf.io.parse_example(tf.constant(records, dtype=tf.string), self._spec)
        except (tf.errors.InvalidArgumentError, ValueError):
            return None
        return {k: v.numpy() for k, v in parsed.items()}
