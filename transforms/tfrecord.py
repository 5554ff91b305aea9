"""TFRecord framing: ``uint64 length | masked crc32c(length) | data | masked crc32c(data)``.

Pure byte-level code (no TensorFlow): the shard writer frames records with it, the readers in
tests and inspection tools verify them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO

import google_crc32c

from transforms.errors import UserError

_MASK_DELTA = 0xA282EAD8
_U64 = struct.Struct("<Q")
_U32 = struct.Struct("<I")


class CorruptRecordError(UserError, ValueError):
    """A TFRecord stream is truncated or fails its checksum."""


def masked_crc32c(data: bytes) -> int:
    """The CRC32C of ``data`` rotated and offset as TFRecord stores it."""
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def frame_record(data: bytes) -> bytes:
    """One TFRecord frame around ``data``."""
    header = _U64.pack(len(data))
    return header + _U32.pack(masked_crc32c(header)) + data + _U32.pack(masked_crc32c(data))


def frame_records(records: Iterable[bytes]) -> bytes:
    """Concatenated frames of ``records``, ready to write."""
    return b"".join(frame_record(r) for r in records)


def iter_records(stream: BinaryIO, verify: bool = True) -> Iterator[bytes]:
    """Yields each record's payload; raises CorruptRecordError on truncation or a bad checksum."""
    index = 0
    while True:
        header = stream.read(12)
        if not header:
            return
        if len(header) < 12:
            raise CorruptRecordError(
                f"record {index}: truncated header ({len(header)} of 12 bytes)"
            )
        (length,) = _U64.unpack_from(header)
        (length_crc,) = _U32.unpack_from(header, 8)
        if verify and masked_crc32c(header[:8]) != length_crc:
            raise CorruptRecordError(f"record {index}: length checksum mismatch")
        data = stream.read(length)
        footer = stream.read(4)
        if len(data) < length or len(footer) < 4:
            raise CorruptRecordError(f"record {index}: truncated payload")
        if verify and masked_crc32c(data) != _U32.unpack(footer)[0]:
            raise CorruptRecordError(f"record {index}: payload checksum mismatch")
        yield data
        index += 1


def count_and_hash_records(stream: BinaryIO, block_bytes: int = 8 << 20) -> tuple[int, str, int]:
    """(complete records, sha256 hex of all bytes, bytes left over after the last complete
    record) of a TFRecord stream, read in blocks: memory is one block, not the file."""
    import hashlib

    import numpy as np

    from transforms.framed_examples import count_frames

    digest = hashlib.sha256()
    count = 0
    tail = b""
    while block := stream.read(block_bytes):
        digest.update(block)
        data = tail + block if tail else block
        found, pos = count_frames(np.frombuffer(data, dtype=np.uint8))
        count += found
        tail = data[pos:]
    return count, digest.hexdigest(), len(tail)
