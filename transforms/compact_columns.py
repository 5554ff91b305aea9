"""Records as compact rows of their feature columns, for the spill files between the instance
and shard stages: about a third of the bytes of their ``tf.train.Example`` frames.

A record's features are the columns ``frame_columns`` takes (int features, then float features
as little-endian 32-bit words). A compact row is a 4-byte little-endian payload length, then per
feature its values up to the last non-zero one (``t`` of them), after a head ``varint(8t + form)``:

- **literal** (forms 0-3): the ``t`` values as little-endian unsigned integers of 1, 2, 3 or 4
  bytes, the fewest that hold the largest (token ids: 2 bytes for a 30k vocab, 3 up to 16 M);
- **runs** (form 4): ``varint(k)``, then ``k`` (value, run length) varint pairs (masks, segment
  ids, weights: one to three runs), when ``6k`` is less than the literal's bytes.

Decoding gives back the same columns exactly (a value an int feature cannot hold, a run past its
feature or bytes past the row are refused), so ``frame_columns`` over them writes the frames the
instance stage would have written: the shard stage frames records as it writes them, and the
spill carries ~240 bytes per seq-128 record (its key included) instead of ~830.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numba
import numpy as np

from transforms.example_encoding import varint
from transforms.framed_examples import FramedRecords, frame_columns, prefixed_bounds, put_varint

_VARINT_LIMIT = 1 << 28
"""Int feature values must lie in [0, 2**28), as ``frame_columns`` requires."""
COMPACT_LENGTH_BYTES = 4
"""The little-endian payload length that starts each compact row."""
FRAME_BATCH_BYTES = 4 << 20
"""Bytes of decoded columns framed at a time (the frames take about as many)."""
_RUNS = 4
"""The form of a feature written as runs; forms 0-3 are literals of 1-4 bytes per value."""
_WORD_LIMIT = 1 << 32
"""Float feature words are 32-bit."""


@dataclass(frozen=True)
class ColumnSchema:
    """The features of a job's records, as ``frame_columns`` takes them: names (int features
    first), int feature bounds in columns, float feature bounds in bytes (multiples of 4)."""

    names: tuple[str, ...]
    int_bounds: tuple[int, ...]
    float_bounds: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.names) != len(self.int_bounds) + len(self.float_bounds) - 2:
            raise ValueError("a column schema needs one name per int and float feature")
        if any(b % 4 for b in self.float_bounds):
            raise ValueError("float features must be whole 32-bit words")

    @property
    def int_columns(self) -> int:
        return self.int_bounds[-1]

    @property
    def float_words(self) -> int:
        return self.float_bounds[-1] // 4


@dataclass(frozen=True)
class CompactRecords(FramedRecords):
    """A batch of compact rows laid end to end (row ``i`` is ``data[offsets[i]:offsets[i + 1]]``,
    its 4-byte length included) and the schema they decode by."""

    schema: ColumnSchema

    def payloads(self) -> list[bytes]:
        raise TypeError("compact rows are not Examples: frame them with frame_compact_rows")


def literal_width(value_or: int) -> int:
    """Bytes per value of a literal feature whose values' OR is ``value_or`` (non-negative)."""
    if value_or < 256:
        return 1
    if value_or < 65536:
        return 2
    return 3 if value_or < 16777216 else 4


_literal_width = numba.njit(cache=True, inline="always")(literal_width)
"""``literal_width`` for the kernels (the estimate calls the plain one: no compiled code in the
launcher)."""


def _varint_bytes(value: int) -> int:
    return len(varint(int(value)))


def compact_feature_bytes(values: np.ndarray) -> int:
    """Bytes of one feature's values (one row's, ints or float words) in a compact row, by the
    rules the encoder follows: what the disk estimate (``transforms.output_size``) counts."""
    values = np.asarray(values).ravel()
    if values.dtype.kind == "f":
        values = values.astype("<f4").view("<u4")
    values = values.astype(np.int64)
    nonzero = np.flatnonzero(values)
    t = int(nonzero[-1]) + 1 if len(nonzero) else 0
    values = values[:t]
    changes = int(np.count_nonzero(values[1:] != values[:-1])) if t else 0
    value_or = int(np.bitwise_or.reduce(values)) if t else 0
    width = literal_width(value_or)
    if 6 * (changes + 1) < t * width:
        starts = np.concatenate(([0], np.flatnonzero(values[1:] != values[:-1]) + 1, [t]))
        runs = sum(
            _varint_bytes(values[a]) + _varint_bytes(b - a)
            for a, b in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True)
        )
        return _varint_bytes(8 * t + _RUNS) + _varint_bytes(changes + 1) + runs
    return _varint_bytes(8 * t + width - 1) + width * t


@numba.njit(cache=True, inline="always")
def _get(buf: np.ndarray, pos: int, end: int) -> tuple[np.uint64, int]:
    """(the varint at ``pos``, the position after it); position -1 when it runs past ``end``
    or past 64 bits."""
    value = np.uint64(0)
    shift = np.uint64(0)
    while pos < end and shift < 64:
        byte = np.uint64(buf[pos])
        pos += 1
        value |= (byte & np.uint64(0x7F)) << shift
        if byte < 128:
            return value, pos
        shift += np.uint64(7)
    return value, -1


@numba.njit(cache=True, inline="always")
def _put_feature(buf: np.ndarray, pos: int, values, checked: bool) -> int:
    """Writes one feature's values at ``pos``; the position after them, or -1 when ``checked``
    and a value lies outside [0, 2**28)."""
    t = len(values)
    while t > 0 and values[t - 1] == 0:
        t -= 1
    values = values[:t]
    changes = 0
    value_or = values.dtype.type(0)
    for c in range(t):
        value_or |= values[c]
    for c in range(1, t):
        changes += values[c] != values[c - 1]
    if checked and (value_or < 0 or value_or >= _VARINT_LIMIT):
        return -1  # the OR of int32 values is negative exactly when one of them is
    width = _literal_width(value_or)
    if 6 * (changes + 1) < t * width:
        pos = put_varint(buf, pos, np.int64(8 * t + _RUNS))
        pos = put_varint(buf, pos, np.int64(changes + 1))
        start = 0
        for c in range(1, t + 1):
            if c == t or values[c] != values[start]:
                pos = put_varint(buf, pos, np.int64(values[start]))
                pos = put_varint(buf, pos, np.int64(c - start))
                start = c
        return pos
    pos = put_varint(buf, pos, np.int64(8 * t + width - 1))
    target = buf[pos : pos + width * t]
    if width == 1:
        for c in range(t):
            target[c] = values[c]
    elif width == 2:
        for c in range(t):
            target[2 * c] = values[c] & 0xFF
            target[2 * c + 1] = (values[c] >> 8) & 0xFF
    else:
        for c in range(t):
            for k in range(width):
                target[width * c + k] = (values[c] >> (8 * k)) & 0xFF
    return pos + width * t


@numba.njit(cache=True)
def _pack(ints, int_bounds, words, word_bounds):
    """(rows end to end, n + 1 offsets, index of the first row with an int value outside
    [0, 2**28) or -1)."""
    n = ints.shape[0]
    # Bytes a row can take at most: a literal value 4 bytes (a word's run value 5 and its
    # length up to 3 as varints, only when 6 runs take fewer bytes than the literal), and two
    # varints of at most 10 bytes per feature.
    features = len(int_bounds) + len(word_bounds)
    width = 4 + 5 * ints.shape[1] + 6 * words.shape[1] + 20 * features
    out = np.empty(n * width, dtype=np.uint8)
    offsets = np.empty(n + 1, dtype=np.int64)
    pos = 0
    for r in range(n):
        offsets[r] = pos
        row = ints[r]
        start = pos
        pos += 4
        for f in range(len(int_bounds) - 1):
            pos = _put_feature(out, pos, row[int_bounds[f] : int_bounds[f + 1]], True)
            if pos < 0:
                return out[:0], offsets, r
        for f in range(len(word_bounds) - 1):
            pos = _put_feature(out, pos, words[r, word_bounds[f] : word_bounds[f + 1]], False)
        length = pos - start - 4
        for k in range(4):
            out[start + k] = (length >> (8 * k)) & 0xFF
    offsets[n] = pos
    return out[:pos].copy(), offsets, -1


@numba.njit(cache=True, inline="always")
def _get_feature(buf, pos, end, target, limit) -> int:
    """Decodes one feature from ``buf[pos:end]`` into ``target`` (its columns past the values
    set to zero); the position after it, or -1 when malformed: cut short, more values than
    columns, runs that do not add up to them, or a value of ``limit`` or more."""
    head, pos = _get(buf, pos, end)
    if pos < 0:
        return -1
    t = np.int64(head >> np.uint64(3))
    form = np.int64(head & np.uint64(7))
    if t > len(target) or form > _RUNS:
        return -1
    target[t:] = 0
    if form == _RUNS:
        runs, pos = _get(buf, pos, end)
        if pos < 0:
            return -1
        c = 0
        for _ in range(runs):
            value, pos = _get(buf, pos, end)
            if pos < 0 or value >= limit:
                return -1
            count, pos = _get(buf, pos, end)
            if pos < 0 or count == 0 or count > np.uint64(t - c):
                return -1  # every run holds a value at least, and they end at ``t``
            target[c : c + np.int64(count)] = value
            c += np.int64(count)
        return pos if c == t else -1
    width = form + 1
    if pos + width * t > end:
        return -1
    source = buf[pos : pos + width * t]
    out = target[:t]
    if width == 1:
        for c in range(t):
            out[c] = source[c]
    elif width == 2:
        for c in range(t):
            out[c] = np.uint32(source[2 * c]) | (np.uint32(source[2 * c + 1]) << 8)
    else:
        for c in range(t):
            value = np.uint64(0)
            for k in range(width):
                value |= np.uint64(source[width * c + k]) << np.uint64(8 * k)
            if value >= limit:
                return -1
            out[c] = value
    return pos + width * t


@numba.njit(cache=True)
def _unpack_into(data, starts, ends, int_bounds, word_bounds, ints, words) -> int:
    """Decodes the rows ``data[starts[i]:ends[i]]`` into rows ``i`` of ``ints`` (int32) and
    ``words`` (uint32); the index of the first malformed row, or -1."""
    int_limit = np.uint64(_VARINT_LIMIT)
    word_limit = np.uint64(_WORD_LIMIT)
    for r in range(len(starts)):
        pos = starts[r] + COMPACT_LENGTH_BYTES
        end = ends[r]
        for f in range(len(int_bounds) - 1):
            pos = _get_feature(
                data, pos, end, ints[r, int_bounds[f] : int_bounds[f + 1]], int_limit
            )
            if pos < 0:
                return r
        for f in range(len(word_bounds) - 1):
            pos = _get_feature(
                data, pos, end, words[r, word_bounds[f] : word_bounds[f + 1]], word_limit
            )
            if pos < 0:
                return r
        if pos != end:
            return r
    return -1


def compact_columns(
    ints: np.ndarray,
    int_bounds: np.ndarray,
    floats: np.ndarray,
    float_bounds: np.ndarray,
    names: list[str],
) -> CompactRecords:
    """The compact rows of the records ``frame_columns`` would frame from the same arguments
    (ValueError for an int value outside [0, 2**28), as there)."""
    schema = ColumnSchema(
        tuple(names), tuple(int(b) for b in int_bounds), tuple(int(b) for b in float_bounds)
    )
    if ints.dtype != np.int32 and ints.size and (ints.min() < 0 or ints.max() >= _VARINT_LIMIT):
        raise ValueError("int feature values must lie in [0, 2**28)")
    ints = np.ascontiguousarray(ints, dtype=np.int32)
    floats = np.ascontiguousarray(floats, dtype=np.uint8)
    n = len(ints)
    words = floats.view("<u4") if floats.shape[1] else np.zeros((n, 0), dtype=np.uint32)
    data, offsets, bad = _pack(
        ints,
        np.asarray(int_bounds, dtype=np.int64),
        words,
        np.asarray(float_bounds, dtype=np.int64) // 4,
    )
    if bad >= 0:
        column = np.flatnonzero((ints[bad] < 0) | (ints[bad] >= _VARINT_LIMIT))[0]
        f = int(np.searchsorted(np.asarray(int_bounds), column, side="right")) - 1
        raise ValueError(f"{names[f]}: values must lie in [0, 2**28) for packed varint encoding")
    return CompactRecords(data, offsets, schema)


class MalformedRow(ValueError):
    """A compact row that does not decode to exactly its length; ``row`` is its index among
    the rows given."""

    def __init__(self, row: int, rows: int) -> None:
        super().__init__(f"compact row {row} of {rows} is malformed")
        self.row = row


def frame_compact_rows(
    data: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    schema: ColumnSchema,
    batch_rows: int | None = None,
) -> Iterator[np.ndarray]:
    """The TFRecord frames of the compact rows ``data[starts[i]:ends[i]]``, in that order, in
    batches of ``batch_rows`` rows (default: ``FRAME_BATCH_BYTES`` of decoded columns) as uint8
    arrays: the bytes ``frame_columns`` writes from the columns the rows were made of.
    ``MalformedRow`` for a row that does not decode to exactly its length. The columns are
    decoded into one buffer, reused from batch to batch."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    int_bounds = np.asarray(schema.int_bounds, dtype=np.int64)
    word_bounds = np.asarray(schema.float_bounds, dtype=np.int64) // 4
    row_bytes = 4 * (schema.int_columns + schema.float_words)
    batch_rows = batch_rows or max(1, FRAME_BATCH_BYTES // max(1, row_bytes))
    rows = min(batch_rows, len(starts))
    ints = np.empty((rows, schema.int_columns), dtype=np.int32)
    words = np.empty((rows, schema.float_words), dtype=np.uint32)
    names = list(schema.names)
    for first in range(0, len(starts), batch_rows):
        last = min(first + batch_rows, len(starts))
        n = last - first
        bad = _unpack_into(
            data, starts[first:last], ends[first:last], int_bounds, word_bounds, ints, words
        )
        if bad >= 0:
            raise MalformedRow(first + bad, len(starts))
        yield frame_columns(
            ints[:n], int_bounds, words[:n].view(np.uint8), 4 * word_bounds, names
        ).data


@numba.njit(cache=True)
def compact_bounds(data: np.ndarray, pos: int, count: int) -> np.ndarray:
    """``prefixed_bounds`` of compact rows (``frame_bounds`` for them): where each of ``count``
    rows from ``pos`` starts and the last one ends, -1 last when a row runs past ``data``."""
    return prefixed_bounds(data, pos, count, COMPACT_LENGTH_BYTES, COMPACT_LENGTH_BYTES, 4)
