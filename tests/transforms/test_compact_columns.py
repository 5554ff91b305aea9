"""Compact spill rows: decoded and framed, exactly the frames ``frame_columns`` writes from the
same columns, for every record layout the instance stage makes; malformed rows refused."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from transforms.compact_columns import (
    COMPACT_LENGTH_BYTES,
    ColumnSchema,
    CompactRecords,
    MalformedRow,
    compact_bounds,
    compact_columns,
    compact_feature_bytes,
    frame_compact_rows,
)
from transforms.features import DYNAMIC, STATIC
from transforms.framed_examples import frame_columns, frame_examples
from transforms.instance_batches import (
    InstanceSettings,
    TokenTables,
    frame_packed,
    frame_static_spans,
    frame_unmasked_spans,
)
from transforms.instances import BucketLayout, PairConfig
from transforms.masking import MaskingConfig
from transforms.pair_rows import pack_span_rows
from transforms.pair_spans import bucket_pair_spans
from transforms.special_ids import SpecialIds
from transforms.token_documents import TokenizedDocument


def reframed(rows: CompactRecords, batch_rows: int = 4096) -> bytes:
    batches = frame_compact_rows(
        rows.data, rows.offsets[:-1], rows.offsets[1:], rows.schema, batch_rows
    )
    return b"".join(b.tobytes() for b in batches)


def columns(rs: np.random.Generator, n: int):
    """Columns with trailing zeros, runs, long runs, values up to 2**28 - 1 and arbitrary float
    words (NaN payloads included)."""
    ids = rs.integers(0, 1 << 28, size=(n, 40)) >> rs.integers(0, 28, size=(n, 1))
    ids[np.arange(40)[None, :] >= rs.integers(0, 41, size=(n, 1))] = 0
    mask = (np.arange(40)[None, :] < rs.integers(0, 41, size=(n, 1))).astype(np.int64)
    runs = np.repeat(rs.integers(0, 300, size=(n, 4)), 10, axis=1)
    ints = np.concatenate([ids, mask, runs, rs.integers(0, 2, size=(n, 1))], axis=1)
    words = rs.integers(0, 1 << 32, size=(n, 6), dtype=np.uint64).astype(np.uint32)
    words[:, 3:] = np.float32(1.0).view(np.uint32)
    words[rs.random(n) < 0.3] = 0
    return (
        ints.astype(np.int32),
        np.array([0, 40, 80, 120, 121]),
        words.view(np.uint8),
        np.array([0, 12, 24]),
        ["ids", "mask", "runs", "label", "w1", "w2"],
    )


@pytest.mark.parametrize("n", [0, 1, 300])
def test_random_columns_frame_to_the_same_bytes(n):
    args = columns(np.random.default_rng(n), n)
    rows = compact_columns(*args)
    framed = frame_columns(*args)
    assert reframed(rows) == framed.data.tobytes()
    # In batches of 7 rows, each decoded into the buffer the batch before used.
    assert reframed(rows, batch_rows=7) == framed.data.tobytes()
    assert len(rows) == n


def test_rows_are_smaller_and_their_lengths_locate_them():
    args = columns(np.random.default_rng(1), 50)
    rows = compact_columns(*args)
    bounds = compact_bounds(rows.data, 0, 50)
    np.testing.assert_array_equal(bounds, rows.offsets)
    sizes = np.diff(rows.offsets)
    lengths = rows.data[rows.offsets[:-1, None] + np.arange(4)].astype(np.int64)
    np.testing.assert_array_equal(sizes - 4, lengths @ (1 << (8 * np.arange(4))))
    assert len(rows.data) < len(frame_columns(*args).data) / 2
    assert compact_bounds(rows.data[:-1], 0, 50)[-1] == -1  # the last row runs past the end
    assert compact_bounds(rows.data[:2], 0, 1)[-1] == -1  # a cut length


def test_feature_sizes_follow_the_encoder_exactly():
    """``compact_feature_bytes`` (the disk estimate's rule) is each row's encoded size."""
    ints, int_bounds, floats, float_bounds, names = columns(np.random.default_rng(2), 200)
    rows = compact_columns(ints, int_bounds, floats, float_bounds, names)
    words = floats.view("<u4")
    for r in range(200):
        want = COMPACT_LENGTH_BYTES
        want += sum(
            compact_feature_bytes(ints[r, a:b])
            for a, b in zip(int_bounds, int_bounds[1:], strict=False)
        )
        want += sum(
            compact_feature_bytes(words[r, a // 4 : b // 4])
            for a, b in zip(float_bounds, float_bounds[1:], strict=False)
        )
        assert want == rows.offsets[r + 1] - rows.offsets[r]


def test_malformed_rows_are_refused():
    args = columns(np.random.default_rng(3), 5)
    rows = compact_columns(*args)
    schema = rows.schema
    starts, ends = rows.offsets[:-1], rows.offsets[1:]
    with pytest.raises(ValueError, match="compact row 2 of 5 is malformed"):
        list(frame_compact_rows(rows.data, starts, ends - (np.arange(5) == 2), schema))  # cut short
    with pytest.raises(ValueError, match="compact row 0 of 5 is malformed"):
        list(frame_compact_rows(rows.data, starts, ends + 1, schema))  # trailing bytes
    narrow = ColumnSchema(schema.names, (0, 20, 60, 100, 101), schema.float_bounds)
    with pytest.raises(ValueError, match="malformed"):
        list(frame_compact_rows(rows.data, starts, ends, narrow))  # more values than columns
    damaged = rows.data.copy()
    damaged[starts[0] + 4 :] = 0xFF  # varints that never end
    with pytest.raises(ValueError, match="compact row 0 of 5 is malformed"):
        list(frame_compact_rows(damaged, starts, ends, schema))


def one_row(payload: bytes) -> np.ndarray:
    return np.frombuffer(len(payload).to_bytes(4, "little") + payload, dtype=np.uint8)


@pytest.mark.parametrize(
    "payload",
    [
        bytes([0x24, 0x01, 0x05]) + b"\xff" * 9 + b"\x01",  # a run of 2**63 values
        bytes([0x24, 0x02, 0x05, 0x00, 0x05, 0x04]),  # a run of none
        bytes([0x24, 0x01, 0x05, 0x03]),  # runs that stop short of the feature
        bytes([0x24, 0x02, 0x05, 0x03, 0x06, 0x02]),  # runs past it
        bytes([0x24, 0x01, 0x80, 0x80, 0x80, 0x80, 0x01, 0x04]),  # a run of 2**28
        bytes([0x0B, 0x00, 0x00, 0x00, 0x10]),  # a 4-byte literal of 2**28
        bytes([0x0B, 0xFF, 0xFF, 0xFF, 0xFF]),  # and of 2**32 - 1 (negative as int32)
        bytes([0x0D, 0x01]),  # an unknown form
        bytes([0x2B, 0x01]),  # five values in four columns
        bytes([0x0B, 0x01, 0x00, 0x00]),  # a literal cut short
        bytes([0x80]),  # a head cut short
        b"",  # no head at all
    ],
)
def test_hand_made_malformed_rows_are_refused_without_writing_past_the_row(payload):
    schema = ColumnSchema(("a",), (0, 4), (0,))
    data = one_row(payload)
    with pytest.raises(MalformedRow, match="compact row 0 of 1 is malformed"):
        list(frame_compact_rows(data, [0], [len(data)], schema))
    good = one_row(bytes([0x0B, 0x01, 0x00, 0x00, 0x00]))  # [1, 0, 0, 0]
    (framed,) = frame_compact_rows(good, [0], [len(good)], schema)
    want = frame_columns(
        np.array([[1, 0, 0, 0]], np.int32), [0, 4], np.zeros((1, 0), np.uint8), [0], ["a"]
    )
    assert framed.tobytes() == want.data.tobytes()


def test_features_without_columns_and_rows_without_floats():
    """A feature of width 0 (e.g. no prediction slots) and a batch with no float features."""
    ints = np.array([[7, 8, 0], [0, 0, 0]], dtype=np.int32)
    args = (
        ints,
        np.array([0, 2, 2, 3]),
        np.zeros((2, 0), np.uint8),
        np.array([0]),
        ["a", "b", "c"],
    )
    rows = compact_columns(*args)
    assert reframed(rows) == frame_columns(*args).data.tobytes()
    assert np.diff(rows.offsets).tolist() == [4 + 3 + 1 + 1, 4 + 1 + 1 + 1]


def test_int64_columns_out_of_int32_range_are_refused_not_wrapped():
    ints = np.array([[1, 1 << 32]], dtype=np.int64)  # would wrap to [1, 0] as int32
    with pytest.raises(ValueError, match=r"must lie in \[0, 2\*\*28\)"):
        compact_columns(ints, np.array([0, 2]), np.zeros((1, 0), np.uint8), np.array([0]), ["a"])


def test_values_out_of_range_are_refused_naming_their_feature():
    ints, int_bounds, floats, float_bounds, names = columns(np.random.default_rng(4), 3)
    for bad in (-1, 1 << 28):
        wrong = ints.copy()
        wrong[1, 85] = bad
        with pytest.raises(ValueError, match=r"runs: values must lie in \[0, 2\*\*28\)"):
            compact_columns(wrong, int_bounds, floats, float_bounds, names)
        with pytest.raises(ValueError, match=r"values must lie in \[0, 2\*\*28\)"):
            frame_columns(wrong, int_bounds, floats, float_bounds, names)


def test_a_schema_checks_its_names_and_float_words():
    with pytest.raises(ValueError, match="one name per"):
        ColumnSchema(("a",), (0, 2, 4), (0,))
    with pytest.raises(ValueError, match="whole 32-bit words"):
        ColumnSchema(("a", "w"), (0, 2), (0, 6))
    assert ColumnSchema(("a", "w"), (0, 2), (0, 8)).float_words == 2


def bucket():
    rs = np.random.default_rng(7)
    docs = [
        TokenizedDocument.from_sentences(
            f"d{i}", [rs.integers(5, 3000, size=int(rs.integers(3, 30))).tolist() for _ in range(8)]
        )
        for i in range(12)
    ]
    layout = BucketLayout.from_documents(
        [[np.asarray(s, dtype=np.int32) for s in d.sentences()] for d in docs]
    )
    tables = TokenTables(
        SpecialIds(vocab_size=3000), np.arange(5, 3000, dtype=np.int32), np.zeros(3000, bool)
    )
    return layout, tables


@pytest.mark.parametrize("pack", [0, 3])
@pytest.mark.parametrize("masking", [STATIC, DYNAMIC])
@pytest.mark.parametrize("seq", [64, 512])
def test_every_instance_layout_frames_to_the_records_of_the_frame_path(pack, masking, seq):
    """Static and unmasked rows, one instance per row or packed, seq 64 and 512 (positions
    above 255), through each kernel and through the generic path: the same frames."""
    layout, tables = bucket()
    settings = InstanceSettings(
        PairConfig(max_seq_length=seq),
        MaskingConfig(max_predictions_per_seq=20),
        masking_kind=masking,
        pack_instances=pack,
    )
    spans = bucket_pair_spans(layout, settings.pairs, random.Random(0), Counter())
    if masking == STATIC:
        make = lambda encoder: frame_static_spans(  # noqa: E731
            layout.tokens, spans, settings, tables, np.random.default_rng(1), Counter(), encoder
        )
    else:
        make = lambda encoder: frame_unmasked_spans(  # noqa: E731
            layout.tokens, spans, settings, tables, Counter(), encoder
        )
    packed = pack_span_rows(layout.tokens, spans, tables.cls_id, tables.sep_id, seq)
    generic = lambda encoder: frame_packed(  # noqa: E731
        packed, settings, tables, np.random.default_rng(1), Counter(), encoder
    )
    for path in (make, generic):
        if pack and masking == DYNAMIC and path is make:
            continue  # the unmasked kernel lays out one instance per row only
        framed = path(frame_columns)
        rows = path(compact_columns)
        assert isinstance(rows, CompactRecords) and len(rows) == len(framed) > 0
        assert reframed(rows) == framed.data.tobytes()
        assert len(rows.data) < 0.5 * len(framed.data)


def test_frame_examples_takes_an_encoder():
    ints = {"input_ids": np.array([[3, 0, 0], [5, 6, 0]]), "label": np.array([1, 0])}
    floats = {"w": np.array([[1.0, 0.5], [0.0, 0.0]], dtype=np.float32)}
    rows = frame_examples(ints, floats, compact_columns)
    assert rows.schema == ColumnSchema(("input_ids", "label", "w"), (0, 3, 4), (0, 8))
    assert reframed(rows) == frame_examples(ints, floats).data.tobytes()
    with pytest.raises(TypeError, match="not Examples"):
        rows.payloads()
