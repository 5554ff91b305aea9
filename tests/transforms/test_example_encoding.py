"""tf.train.Example bytes without TensorFlow (transforms.example_encoding); TF is the referee."""

from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from transforms.example_encoding import (
    decode_example,
    encode_examples,
    encode_int64_rows,
    float_rows,
    packed_varint_rows,
    varint,
)
from transforms.features import FEATURES, feature_lengths
from transforms.tfrecord import frame_record

EDGE_VALUES = [0, 1, 127, 128, 255, 256, 16383, 16384, 2**21 - 1, 2**21, 2**28 - 1]


def naive_varint(n: int) -> bytes:
    out = b""
    while True:
        low, n = n % 128, n // 128
        if n:
            out += bytes([low + 128])
        else:
            return out + bytes([low])


def naive_packed(row) -> bytes:
    return b"".join(naive_varint(int(v)) for v in row)


# --------------------------------------------------------------------------------------------
# varints


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**21 - 1, b"\xff\xff\x7f"),
        (2**21, b"\x80\x80\x80\x01"),
        (2**28 - 1, b"\xff\xff\xff\x7f"),
        (2**28, b"\x80\x80\x80\x80\x01"),
        (2**63 - 1, b"\xff" * 8 + b"\x7f"),
    ],
)
def test_varint_known_values(value, expected):
    assert varint(value) == expected == naive_varint(value)


def test_varint_rejects_negative():
    with pytest.raises(ValueError):
        varint(-1)


@pytest.mark.parametrize(
    ("low", "high"),
    [(0, 128), (0, 2**14), (2**7, 2**14), (0, 2**21), (2**14, 2**21), (0, 2**28), (2**21, 2**28)],
)
def test_packed_varint_rows_match_naive_per_width(low, high):
    rng = np.random.default_rng(high + low)
    m = rng.integers(low, high, size=(40, 33))
    m[0, 0] = high - 1  # make sure the widest value of the class is present
    rows = packed_varint_rows(m)
    assert len(rows) == 40
    assert rows == [naive_packed(r) for r in m]


def test_packed_varint_rows_mixed_widths_and_edges():
    rng = np.random.default_rng(1)
    # every row mixes values of every byte width
    m = rng.choice(np.array(EDGE_VALUES), size=(100, len(EDGE_VALUES) * 2))
    m[:, : len(EDGE_VALUES)] = EDGE_VALUES
    assert packed_varint_rows(m) == [naive_packed(r) for r in m]
    for value in EDGE_VALUES:
        assert packed_varint_rows(np.array([[value]])) == [naive_varint(value)]
        assert packed_varint_rows(np.array([[value, 0, value]])) == [
            naive_varint(value) + b"\x00" + naive_varint(value)
        ]


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.uint32, np.int64])
def test_packed_varint_rows_input_dtypes(dtype):
    top = min(np.iinfo(dtype).max, 2**28 - 1)
    m = np.array([[0, 1, 2, top], [top, 0, 5, 127]], dtype=dtype)
    assert packed_varint_rows(m) == [naive_packed(r) for r in m.astype(np.int64)]


def test_packed_varint_rows_shapes():
    assert packed_varint_rows(np.zeros((0, 5), dtype=np.int64)) == []
    assert packed_varint_rows(np.zeros((3, 0), dtype=np.int64)) == [b"", b"", b""]
    assert packed_varint_rows(encode_int64_rows([[1, 2], [300, 4]])) == [
        b"\x01\x02",
        b"\xac\x02\x04",
    ]
    with pytest.raises(ValueError, match="2-D"):
        packed_varint_rows(np.array([1, 2, 3]))
    with pytest.raises(ValueError, match="2-D"):
        packed_varint_rows(np.zeros((2, 2, 2), dtype=np.int64))


@pytest.mark.parametrize("bad", [-1, 2**28, 2**31, 2**40])
def test_packed_varint_rows_out_of_range_raises(bad):
    with pytest.raises(ValueError, match="2\\*\\*28"):
        packed_varint_rows(np.array([[0, 1], [bad, 3]], dtype=np.int64))


def test_float_rows_little_endian_float32():
    m = np.array([[0.0, 1.0, -2.5], [0.1, 1e30, 3.0]])
    rows = float_rows(m)
    assert rows[0] == struct.pack("<3f", 0.0, 1.0, -2.5)
    assert rows[1] == struct.pack("<3f", 0.1, 1e30, 3.0)


# --------------------------------------------------------------------------------------------
# encode / decode


def random_features(rng, n, seq_len=32, max_pred=5, big_ids=False):
    high = 2**28 if big_ids else 30522
    return (
        {
            "input_ids": rng.integers(0, high, size=(n, seq_len)),
            "input_mask": rng.integers(0, 2, size=(n, seq_len)).astype(np.int8),
            "segment_ids": rng.integers(0, 2, size=(n, seq_len)).astype(np.int8),
            "masked_lm_positions": rng.integers(0, seq_len, size=(n, max_pred)),
            "masked_lm_ids": rng.integers(0, high, size=(n, max_pred)),
            "next_sentence_labels": rng.integers(0, 2, size=(n, 1)),
        },
        {"masked_lm_weights": rng.integers(0, 2, size=(n, max_pred)).astype(np.float32)},
    )


@pytest.mark.parametrize("big_ids", [False, True])
def test_encode_decode_round_trip(big_ids):
    rng = np.random.default_rng(2)
    ints, floats = random_features(rng, 50, big_ids=big_ids)
    records = encode_examples(ints, floats)
    assert len(records) == 50
    for r, record in enumerate(records):
        row = decode_example(record)
        assert list(row) == list(ints) + list(floats)  # written in the order given
        for name, arr in ints.items():
            assert row[name] == arr[r].tolist()
        assert row["masked_lm_weights"] == floats["masked_lm_weights"][r].tolist()


def test_encode_examples_fractional_floats_round_trip_as_float32():
    floats = {"w": np.array([[0.1, -3.25, 1e-8]], dtype=np.float64)}
    row = decode_example(encode_examples({}, floats)[0])
    assert row["w"] == np.array([0.1, -3.25, 1e-8], dtype=np.float32).tolist()


def test_encode_examples_long_rows_need_multibyte_lengths():
    # A 300-token row has a payload over 127 bytes: lengths take two-byte varints.
    ints = {"a": np.arange(300).reshape(1, 300), "b": np.full((1, 1), 7)}
    floats = {"c": np.ones((1, 200), dtype=np.float32)}
    row = decode_example(encode_examples(ints, floats)[0])
    assert row == {"a": list(range(300)), "b": [7], "c": [1.0] * 200}


def test_encode_examples_row_count_mismatch_raises():
    with pytest.raises(ValueError, match="row counts"):
        encode_examples({"a": np.zeros((2, 3)), "b": np.zeros((3, 3))}, {})
    with pytest.raises(ValueError, match="row counts"):
        encode_examples({"a": np.zeros((2, 3))}, {"w": np.zeros((1, 3))})


def test_encode_examples_empty_batch():
    assert encode_examples({"a": np.zeros((0, 3), dtype=np.int64)}, {}) == []


def test_encode_examples_exact_bytes_of_a_small_example():
    # Example{features{feature{key:"a" value{int64_list{value:[1, 300]}}}}}
    value_list = b"\x0a\x03\x01\xac\x02"  # packed: field 1, len 3, 1, 300
    feature = b"\x1a" + bytes([len(value_list)]) + value_list  # int64_list = field 3
    entry = b"\x0a\x01a" + b"\x12" + bytes([len(feature)]) + feature
    features = b"\x0a" + bytes([len(entry)]) + entry
    expected = b"\x0a" + bytes([len(features)]) + features
    assert encode_examples({"a": np.array([[1, 300]])}, {}) == [expected]


def _len(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + naive_varint(len(payload)) + payload


def _example(entries: list[tuple[str, int, bytes]]) -> bytes:
    """Example bytes from (name, Feature field number, value-list payload) entries."""
    features = b"".join(
        _len(0x0A, _len(0x0A, name.encode()) + _len(0x12, _len(kind << 3 | 2, values)))
        for name, kind, values in entries
    )
    return _len(0x0A, features)


def test_decode_example_unpacked_negative_and_bytes_lists():
    unpacked_ints = b"\x08\x05" + b"\x08" + naive_varint(2**64 - 3)  # 5, -3 (two's complement)
    unpacked_floats = b"\x0d" + struct.pack("<f", 1.5) + b"\x0d" + struct.pack("<f", -2.0)
    packed_floats = _len(0x0A, struct.pack("<2f", 0.5, 4.0))
    byte_values = _len(0x0A, b"hello") + _len(0x0A, b"")
    data = _example(
        [
            ("ints", 3, unpacked_ints),
            ("floats", 2, unpacked_floats),
            ("packed_floats", 2, packed_floats),
            ("bytes", 1, byte_values),
            ("empty", 3, b""),
        ]
    )
    assert decode_example(data) == {
        "ints": [5, -3],
        "floats": [1.5, -2.0],
        "packed_floats": [0.5, 4.0],
        "bytes": [b"hello", b""],
        "empty": [],
    }
    assert decode_example(b"") == {}


def test_decode_example_rejects_malformed():
    record = encode_examples({"a": np.arange(20).reshape(1, 20)}, {})[0]
    for cut in (1, 2, 5, len(record) - 1):
        with pytest.raises(ValueError):
            decode_example(record[:cut])
    with pytest.raises(ValueError, match="wire type"):
        decode_example(b"\x0b")  # wire type 3 (start group)
    with pytest.raises(ValueError, match="varint"):
        decode_example(b"\x0a\x80")


@pytest.mark.parametrize("data", [b"\x0d", b"\x0d\x01\x02", b"\x09\x01", b"\x15"])
def test_decode_example_rejects_truncated_fixed_width_fields(data):
    with pytest.raises(ValueError):
        decode_example(data)


# --------------------------------------------------------------------------------------------
# TensorFlow is the referee

MAX_SEQ, MAX_PRED = 32, 5


def run_pretraining_spec(tf, max_seq_length: int, max_predictions_per_seq: int) -> dict:
    """google-research/bert run_pretraining.py input_fn_builder's name_to_features."""
    return {
        "input_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "input_mask": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([max_seq_length], tf.int64),
        "masked_lm_positions": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_ids": tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64),
        "masked_lm_weights": tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }


def test_feature_contract_matches_run_pretraining():
    lengths = feature_lengths(MAX_SEQ, MAX_PRED)
    assert lengths == {
        "input_ids": MAX_SEQ,
        "input_mask": MAX_SEQ,
        "segment_ids": MAX_SEQ,
        "masked_lm_positions": MAX_PRED,
        "masked_lm_ids": MAX_PRED,
        "masked_lm_weights": MAX_PRED,
        "next_sentence_labels": 1,
    }
    assert {f.name: f.dtype for f in FEATURES} == {
        name: "float32" if name == "masked_lm_weights" else "int64" for name in lengths
    }


def test_tensorflow_parses_encoded_examples():
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(3)
    ints, floats = random_features(rng, 64, MAX_SEQ, MAX_PRED, big_ids=True)
    records = encode_examples(ints, floats)
    spec = run_pretraining_spec(tf, MAX_SEQ, MAX_PRED)
    assert {k: v.shape[0] for k, v in spec.items()} == feature_lengths(MAX_SEQ, MAX_PRED)
    parsed = tf.io.parse_example(tf.constant(records), spec)
    for name, arr in {**ints, **floats}.items():
        assert np.array_equal(parsed[name].numpy(), arr), name
    one = tf.io.parse_single_example(records[5], spec)
    assert np.array_equal(one["input_ids"].numpy(), ints["input_ids"][5])
    # the protobuf parser agrees as well
    example = tf.train.Example.FromString(records[0])
    assert (
        list(example.features.feature["input_ids"].int64_list.value)
        == ints["input_ids"][0].tolist()
    )
    assert (
        list(example.features.feature["masked_lm_weights"].float_list.value)
        == floats["masked_lm_weights"][0].tolist()
    )
    # and TF's own serialization decodes to the same values with decode_example
    assert decode_example(example.SerializeToString()) == decode_example(records[0])


@pytest.mark.parametrize("compression", ["", "GZIP"])
def test_tf_data_round_trip(tmp_path, compression):
    tf = pytest.importorskip("tensorflow")
    rng = np.random.default_rng(4)
    ints, floats = random_features(rng, 300, MAX_SEQ, MAX_PRED)
    framed = b"".join(frame_record(r) for r in encode_examples(ints, floats))
    path = tmp_path / "records.tfrecord"
    path.write_bytes(gzip.compress(framed) if compression else framed)
    spec = run_pretraining_spec(tf, MAX_SEQ, MAX_PRED)
    ds = tf.data.TFRecordDataset(str(path), compression_type=compression)
    ds = ds.map(lambda r: tf.io.parse_single_example(r, spec)).batch(1000)
    batches = list(ds)
    assert len(batches) == 1
    for name, arr in {**ints, **floats}.items():
        assert np.array_equal(batches[0][name].numpy(), arr), name
