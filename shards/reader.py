"""Streaming pretraining shards: GZIP detection, framing with offsets, batch parsing.

Works on any shards with google-research/bert's feature spec, on any filesystem the caller's
``shards.files.FileAccess`` reaches (which shards: ``shards.resolve``). A shard is read as
a stream, one frame at a time; it is never loaded whole. Damage (a truncated frame, a bad checksum,
a file that is not TFRecord) is reported with the record index and byte offset, never raised.
"""

from __future__ import annotations

import gzip
import hashlib
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

import numpy as np

from shards.files import FileAccess, LocalFiles
from transforms.example_encoding import decode_example
from transforms.features import SENTENCE_PAIRS, STATIC, features_of, kind_lengths
from transforms.tfrecord import masked_crc32c

_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")
_MAX_RECORD_BYTES = 1 << 30


@dataclass(frozen=True)
class RecordSizes:
    """The two lengths that fix every feature's size, and the kind of record (which features
    it has: ``transforms.features.features_of``)."""

    max_seq_length: int
    max_predictions_per_seq: int
    masking: str = STATIC
    input_mode: str = SENTENCE_PAIRS
    max_instances_per_row: int = 0
    """Packed rows of up to this many instances (``transforms.features.PACKED_FEATURES``);
    0: one instance per row."""
    max_predictions_per_row: int | None = None
    """Packed rows: their prediction slots (``transforms.features.packed_prediction_slots``)."""

    @property
    def packed(self) -> bool:
        return self.max_instances_per_row > 0

    @property
    def features(self):
        """The features a record of this kind has."""
        return features_of(self.masking, self.input_mode, self.packed)

    def lengths(self) -> dict[str, int]:
        """Name → fixed length of every feature of this kind."""
        return kind_lengths(
            self.max_seq_length,
            self.max_predictions_per_seq,
            self.masking,
            self.input_mode,
            self.max_instances_per_row,
            self.max_predictions_per_row,
        )

    @classmethod
    def from_manifest(cls, manifest: dict) -> RecordSizes:
        """The sizes and kind a bertprep manifest states (older manifests: static pairs)."""
        packing = manifest.get("packing") or {}
        return cls(
            int(manifest["max_seq_length"]),
            int(manifest["max_predictions_per_seq"]),
            manifest.get("masking", STATIC),
            manifest.get("input_mode", SENTENCE_PAIRS),
            int(packing.get("max_instances_per_row", 0)),
            packing.get("max_predictions_per_row"),
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


def open_shard(path: str, files: FileAccess | None = None) -> BinaryIO:
    """The shard's uncompressed byte stream; GZIP is detected from the magic bytes, not the name.
    ``files`` reaches the path (default: local files only)."""
    raw = (files or LocalFiles()).open(path)
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
        from pipeline.runtime.quiet import import_tensorflow

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
