"""TFRecord framing (transforms.tfrecord)."""

from __future__ import annotations

import gzip
import io
import struct

import pytest

from transforms.tfrecord import (
    CorruptRecordError,
    frame_record,
    frame_records,
    iter_records,
    masked_crc32c,
)

RECORDS = [b"", b"a", b"hello world", bytes(range(256)) * 300, b"\x00" * 17]


def test_masked_crc32c_known_values():
    # crc32c("") = 0 and crc32c("123456789") = 0xE3069283 (the standard check value)
    assert masked_crc32c(b"") == 0xA282EAD8
    crc = 0xE3069283
    assert masked_crc32c(b"123456789") == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
    assert masked_crc32c(b"123456789") == 0xC78AB0E5
    assert 0 <= masked_crc32c(b"x" * 1000) < 2**32


def test_frame_record_layout():
    data = b"payload"
    frame = frame_record(data)
    assert len(frame) == 8 + 4 + len(data) + 4
    assert struct.unpack("<Q", frame[:8]) == (len(data),)
    assert struct.unpack("<I", frame[8:12]) == (masked_crc32c(frame[:8]),)
    assert frame[12:-4] == data
    assert struct.unpack("<I", frame[-4:]) == (masked_crc32c(data),)
    assert frame_records(RECORDS) == b"".join(frame_record(r) for r in RECORDS)
    assert frame_records([]) == b""


def test_iter_records_round_trip():
    stream = io.BytesIO(frame_records(RECORDS))
    assert list(iter_records(stream)) == RECORDS
    assert list(iter_records(io.BytesIO(b""))) == []
    assert list(iter_records(io.BytesIO(frame_records(RECORDS)), verify=False)) == RECORDS


@pytest.mark.parametrize("cut", [1, 5, 11, 12, 13, 20, -5, -1])
def test_iter_records_detects_truncation(cut):
    data = frame_records([b"first record", b"second record"])
    one = len(frame_record(b"first record"))
    truncated = data[: one + cut] if cut > 0 else data[:cut]
    reader = iter_records(io.BytesIO(truncated))
    assert next(reader) == b"first record"
    with pytest.raises(CorruptRecordError, match="truncated"):
        next(reader)


def test_iter_records_truncation_detected_even_without_verify():
    data = frame_record(b"abcdef")[:-2]
    with pytest.raises(CorruptRecordError, match="truncated payload"):
        list(iter_records(io.BytesIO(data), verify=False))


@pytest.mark.parametrize(
    ("offset", "message"),
    [
        (12, "payload checksum"),  # first payload byte
        (-6, "payload checksum"),  # last payload byte
        (-1, "payload checksum"),  # the payload crc itself
        (9, "length checksum"),  # the length crc
    ],
)
def test_iter_records_detects_corruption(offset, message):
    data = bytearray(frame_record(b"some payload bytes"))
    data[offset] ^= 0x01
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_records(io.BytesIO(bytes(data))))
    # verify=False returns the bytes as they are
    assert len(list(iter_records(io.BytesIO(bytes(data)), verify=False))) == 1


def test_iter_records_corrupted_length_is_detected():
    data = bytearray(frame_records([b"abc", b"defgh"]))
    data[0] = 200  # length 200 instead of 3
    with pytest.raises(CorruptRecordError, match="length checksum"):
        list(iter_records(io.BytesIO(bytes(data))))
    with pytest.raises(CorruptRecordError):
        list(iter_records(io.BytesIO(bytes(data)), verify=False))  # runs off the end


def test_corrupt_record_error_is_value_error():
    assert issubclass(CorruptRecordError, ValueError)


def test_tensorflow_reads_and_writes_the_same_frames(tmp_path):
    tf = pytest.importorskip("tensorflow")
    # TF's own writer produces exactly our bytes
    path = tmp_path / "tf.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        for r in RECORDS:
            writer.write(r)
    assert path.read_bytes() == frame_records(RECORDS)
    # tf.data reads our frames, plain and GZIP-compressed
    plain = tmp_path / "ours.tfrecord"
    plain.write_bytes(frame_records(RECORDS))
    gz = tmp_path / "ours.tfrecord.gz"
    gz.write_bytes(gzip.compress(frame_records(RECORDS)))
    assert [r.numpy() for r in tf.data.TFRecordDataset(str(plain))] == RECORDS
    read_gz = tf.data.TFRecordDataset(str(gz), compression_type="GZIP")
    assert [r.numpy() for r in read_gz] == RECORDS
    # and our reader reads TF's file
    with open(path, "rb") as f:
        assert list(iter_records(f)) == RECORDS


def test_tensorflow_rejects_a_corrupted_frame(tmp_path):
    tf = pytest.importorskip("tensorflow")
    data = bytearray(frame_record(b"x" * 40))
    data[20] ^= 0xFF
    path = tmp_path / "bad.tfrecord"
    path.write_bytes(bytes(data))
    with pytest.raises(tf.errors.DataLossError):
        list(tf.data.TFRecordDataset(str(path)))


def test_count_and_hash_records_across_block_boundaries():
    import hashlib

    from transforms.tfrecord import count_and_hash_records, frame_record

    stream = b"".join(frame_record(bytes([i]) * (i * 37 % 300)) for i in range(200))
    for block in (1, 7, 64, 1 << 20):
        count, digest, leftover = count_and_hash_records(io.BytesIO(stream), block)
        assert (count, digest, leftover) == (200, hashlib.sha256(stream).hexdigest(), 0)
    count, _, leftover = count_and_hash_records(io.BytesIO(stream[:-3]), 50)
    assert count == 199 and leftover > 0
    assert count_and_hash_records(io.BytesIO(b""))[0] == 0
