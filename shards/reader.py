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

from transforms.example_encoding import decode_example
from transforms.features import FEATURES, feature_lengths
from transforms.tfrecord import masked_crc32c

MANIFEST = "manifest.json"
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_NOT_SHARDS = (MANIFEST, "rejects.jsonl")
_MAX_RECORD_BYTES = 1 << 30


class ShardPathError(ValueError):
    """A shard path or pattern matched nothing usable."""


@dataclass(frozen=True)
class RecordSizes:
    """The two lengths that fix every feature's size."""

    max_seq_length: int
    max_predictions_per_seq: int


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
    return fs.exists(path.rstrip("/") + "/") and not fs.match([path])[0].metadata_list


def expand_shard_paths(patterns: Sequence[str]) -> list[str]:
    """Shard files named by ``patterns`` (files, globs or directories), sorted, deduplicated.

    A directory stands for its ``*.tfrecord*`` files, or every file but manifests and rejects when
    it has none. Raises ShardPathError naming a pattern that matched nothing.
    """
    fs = filesystems()
    found: set[str] = set()
    for pattern in patterns:
        if is_dir(pattern):
            base = pattern.rstrip("/")
            matched = [m.path for m in fs.match([f"{base}/*.tfrecord*"])[0].metadata_list]
            if not matched:
                matched = [
                    m.path
                    for m in fs.match([f"{base}/*"])[0].metadata_list
                    if not m.path.rsplit("/", 1)[-1].startswith((".", *_NOT_SHARDS))
                ]
        else:
            matched = [m.path for m in fs.match([pattern])[0].metadata_list]
        matched = [p for p in matched if not p.rsplit("/", 1)[-1].startswith(_NOT_SHARDS)]
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
            if "input_ids" not in features or "masked_lm_positions" not in features:
                raise ShardPathError(f"{shard}: the first record is not a BERT pretraining record")
            return RecordSizes(len(features["input_ids"]), len(features["masked_lm_positions"]))
        if frames.problem:
            raise ShardPathError(str(frames.problem))
    raise ShardPathError(f"{shard} holds no records to infer sizes from")


def spec_problems(data: bytes, sizes: RecordSizes) -> list[str]:
    """What is wrong with one record's feature names, types and lengths (empty when fine)."""
    try:
        features = decode_example(data)
    except ValueError as e:
        return [f"not a tf.train.Example: {e}"]
    lengths = feature_lengths(sizes.max_seq_length, sizes.max_predictions_per_seq)
    problems = []
    for f in FEATURES:
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
        lengths = feature_lengths(sizes.max_seq_length, sizes.max_predictions_per_seq)
        self._spec = {
            f.name: tf.io.FixedLenFeature(
                [lengths[f.name]], tf.int64 if f.dtype == "int64" else tf.float32
            )
            for f in FEATURES
        }

    def parse(self, records: list[bytes]) -> dict[str, np.ndarray] | None:
        """The parsed batch, or None when some record does not follow the spec."""
        tf = self._tf
        try:
            parsed = tf.io.parse_example(tf.constant(records, dtype=tf.string), self._spec)
        except (tf.errors.InvalidArgumentError, ValueError):
            return None
        return {k: v.numpy() for k, v in parsed.items()}
