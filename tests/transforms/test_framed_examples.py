"""The compiled record encoder against the reference path: ``frame_record`` over
``encode_examples``, byte for byte, and its spill layout against ``spill_layout``."""

from __future__ import annotations

import numpy as np
import pytest

from transforms.example_encoding import decode_example, encode_examples
from transforms.framed_examples import (
    FramedRecords,
    frame_examples,
    residue_spill,
)
from transforms.shard_layout import spill_layout
from transforms.tfrecord import frame_record, iter_records


def features(rs: np.random.Generator, n: int, width: int, top: int):
    ints = {
        "input_ids": rs.integers(0, top, size=(n, width)),
        "input_mask": rs.integers(0, 2, size=(n, width)).astype(np.int8),
        "a_name_longer_than_127_bytes_" * 5: rs.integers(0, top, size=(n, 1)),
    }
    floats = {"masked_lm_weights": rs.random((n, 7)).astype(np.float32)}
    return ints, floats


@pytest.mark.parametrize("top", [2, 128, 300, 1 << 14, 1 << 21, 1 << 28])
@pytest.mark.parametrize("width", [1, 128, 512])
def test_the_same_bytes_as_frame_record_over_encode_examples(top, width):
    rs = np.random.default_rng(top + width)
    for n in (0, 1, 37):
        ints, floats = features(rs, n, width, top)
        for float_features in (floats, {}):
            want = [frame_record(r) for r in encode_examples(ints, float_features)]
            got = frame_examples(ints, float_features)
            assert got.data.tobytes() == b"".join(want)
            assert len(got) == n
            assert got.payloads() == encode_examples(ints, float_features)


def test_records_read_back_with_checksums_verified():
    rs = np.random.default_rng(0)
    ints, floats = features(rs, 5, 16, 30522)
    framed = frame_examples(ints, floats)
    import io

    decoded = [decode_example(r) for r in iter_records(io.BytesIO(framed.data.tobytes()))]
    assert [d["input_ids"] for d in decoded] == ints["input_ids"].tolist()
    np.testing.assert_array_equal(
        np.array([d["masked_lm_weights"] for d in decoded], dtype=np.float32),
        floats["masked_lm_weights"],
    )


def test_values_out_of_range_and_ragged_rows_are_refused():
    with pytest.raises(ValueError, match=r"input_ids: values must lie in \[0, 2\*\*28\)"):
        frame_examples({"input_ids": np.array([[1 << 28]])}, {})
    with pytest.raises(ValueError, match="input_ids"):
        frame_examples({"input_ids": np.array([[-1]])}, {})
    with pytest.raises(ValueError, match="different row counts"):
        frame_examples({"a": np.zeros((2, 3)), "b": np.zeros((3, 3))}, {})


@pytest.mark.parametrize("value", [1 << 28, -1, -(1 << 31)])
def test_frame_columns_refuses_values_its_varints_cannot_hold(value):
    """The kernel writes at most four varint bytes per value, so it checks the range itself."""
    from transforms.framed_examples import frame_columns

    ints = np.array([[5, 300, value]], dtype=np.int32 if value > -(1 << 31) else np.int64)
    no_floats = np.zeros((1, 0), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"\[0, 2\*\*28\)"):
        frame_columns(ints, np.array([0, 3]), no_floats, np.array([0]), ["input_ids"])


@pytest.mark.parametrize("num_shards", [1, 3, 64])
def test_the_residue_spill_is_spill_layout(num_shards):
    rs = np.random.default_rng(num_shards)
    parts = [frame_examples(*features(rs, n, 8, 1000)) for n in (0, 5, 40)]
    framed = [frame_record(p) for part in parts for p in part.payloads()]
    keys = rs.integers(0, 2**63 - 1, size=len(framed))
    want_data, want_bounds = spill_layout(framed, keys, num_shards)
    data, bounds = residue_spill(parts, keys, num_shards)
    assert data.tobytes() == want_data
    np.testing.assert_array_equal(bounds, want_bounds)
    one = FramedRecords(
        np.frombuffer(b"".join(framed), dtype=np.uint8),
        np.cumsum([0] + [len(f) for f in framed]),
    )
    data, bounds = residue_spill([one], keys, num_shards)
    assert data.tobytes() == want_data


def test_a_residue_spill_needs_a_key_per_record():
    batch = frame_examples(*features(np.random.default_rng(0), 3, 8, 1000))
    with pytest.raises(ValueError, match="2 shuffle keys for 3 records"):
        residue_spill([batch], np.arange(2), 4)
    with pytest.raises(ValueError, match="num_shards must be at least 1"):
        residue_spill([batch], np.arange(3), 0)


def test_an_empty_batch_makes_an_empty_spill():
    empty = FramedRecords(np.zeros(0, dtype=np.uint8), np.zeros(1, dtype=np.int64))
    assert len(empty) == 0 and empty.payloads() == []
    for batches in ([], [empty]):
        data, bounds = residue_spill(batches, np.zeros(0, dtype=np.int64), 4)
        assert data.size == 0 and bounds.tolist() == [0, 0, 0, 0, 0]


def test_frame_columns_takes_column_views_that_are_not_contiguous():
    """Columns cut from wider arrays (strided rows) give the bytes of ``encode_examples``."""
    from transforms.framed_examples import frame_columns

    rs = np.random.default_rng(7)
    wide_ints = rs.integers(0, 30522, size=(9, 12)).astype(np.int32)
    wide_floats = rs.random((9, 5)).astype(np.float32)
    ints, floats = wide_ints[:, 2:10], wide_floats[:, 1:3]
    assert not ints.flags.c_contiguous and not floats.flags.c_contiguous
    float_bytes = np.ascontiguousarray(floats).view(np.uint8)[:, :]
    strided_bytes = wide_floats.view(np.uint8)[:, 4:12]  # the same bytes, not contiguous
    assert np.array_equal(strided_bytes, float_bytes) and not strided_bytes.flags.c_contiguous
    got = frame_columns(
        ints, np.array([0, 5, 8]), strided_bytes, np.array([0, 8]), ["ids", "flags", "weights"]
    )
    want = encode_examples({"ids": ints[:, :5], "flags": ints[:, 5:]}, {"weights": floats})
    assert got.data.tobytes() == b"".join(frame_record(r) for r in want)


def test_features_of_no_values_and_batches_of_no_rows():
    rs = np.random.default_rng(3)
    for n in (0, 4):
        ints = {"empty": np.zeros((n, 0), dtype=np.int64), "ids": rs.integers(0, 300, (n, 3))}
        floats = {"none": np.zeros((n, 0), dtype=np.float32)}
        want = [frame_record(r) for r in encode_examples(ints, floats)]
        got = frame_examples(ints, floats)
        assert got.data.tobytes() == b"".join(want) and len(got) == n


def test_frame_columns_refuses_int64_values_beyond_32_bits():
    from transforms.framed_examples import frame_columns

    no_floats = np.zeros((1, 0), dtype=np.uint8)
    for value in (1 << 31, 1 << 40, -(1 << 40)):
        ints = np.array([[1, value]], dtype=np.int64)
        with pytest.raises(ValueError, match=r"\[0, 2\*\*28\)"):
            frame_columns(ints, np.array([0, 2]), no_floats, np.array([0]), ["ids"])
