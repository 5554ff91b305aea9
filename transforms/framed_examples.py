"""TFRecord-framed ``tf.train.Example`` records for a batch, written by one compiled kernel.

The same bytes as ``transforms.tfrecord.frame_record`` over ``transforms.example_encoding.
encode_examples`` (canonical varints, features in the order given, int64 lists then float lists,
CRC32C-masked frames), but the whole batch goes into one ``uint8`` buffer in two passes over the
values (sizes, then bytes), with no Python object per record. The instance stage spends most of
its time here when records are built one by one in Python; this is the floor it can reach.

The size pass ORs each feature's values first: a feature whose values are all below 128 (masks,
segment ids, labels) is then one byte per value, copied by a vectorized loop, and the varint
writer is picked per feature and row by that OR (one, two or four bytes stored per value). Each
loop runs over a contiguous view from index 0, so LLVM proves its indexes non-negative, folds
numba's negative-index fix-up away and vectorizes the reductions (the writers index through an
unsigned position, which has none); names and float bytes are copied by ``memmove``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numba
import numpy as np

from transforms.copy_kernel import copy_elements
from transforms.crc32c_kernel import crc32c

_VARINT_LIMIT = 1 << 28
"""Int feature values must lie in [0, 2**28) (token ids, positions, labels, flags)."""
_TAG_FIELD1, _TAG_FIELD2, _TAG_INT64_LIST = 0x0A, 0x12, 0x1A
_CRC_MASK_DELTA = 0xA282EAD8


@numba.njit(cache=True, inline="always")
def _varint_len(value: int) -> int:
    if value < 128:
        return 1
    if value < 16384:
        return 2
    n = 3
    value >>= 21
    while value:
        value >>= 7
        n += 1
    return n


@numba.njit(cache=True, inline="always")
def put_varint(buf: np.ndarray, pos: int, value: int) -> int:
    """Writes the varint of ``value`` (non-negative) at ``buf[pos]``; the position after it."""
    if value < 128:
        buf[pos] = value
        return pos + 1
    if value < 16384:
        buf[pos] = (value & 0x7F) | 0x80
        buf[pos + 1] = value >> 7
        return pos + 2
    while value >= 128:
        buf[pos] = (value & 0x7F) | 0x80
        value >>= 7
        pos += 1
    buf[pos] = value
    return pos + 1


@numba.njit(cache=True, inline="always")
def _value_len(value: int) -> np.int32:
    """Bytes of the varint of a feature value in [0, 2**28), without branches (in int32, so that
    a loop summing them over int32 values vectorizes in 32-bit lanes: measured ~1.6x faster)."""
    return (
        np.int32(1) + np.int32(value >= 128) + np.int32(value >= 16384) + np.int32(value >= 2097152)
    )


@numba.njit(cache=True, inline="always")
def _payload_size(values: np.ndarray) -> tuple[int, int]:
    """(bytes of the packed varints of ``values``, the OR of the values). The OR is in [0, 128)
    exactly when every value is, and is negative or at least 2**28 when a value is outside
    [0, 2**28). Both loops run from index 0 over a contiguous view, which LLVM vectorizes; the
    OR stays in the values' own type."""
    value_or = values.dtype.type(0)
    for c in range(len(values)):
        value_or |= values[c]
    if 0 <= value_or < 128:
        return len(values), value_or
    size = np.int32(0)
    for c in range(len(values)):
        size += _value_len(values[c])
    return np.int64(size), value_or


@numba.njit(cache=True, inline="always")
def _put_varints_1(buf: np.ndarray, pos: int, values: np.ndarray) -> int:
    """Writes the varints of values in [0, 128): one byte each, the value; returns the position
    after."""
    target = buf[pos : pos + len(values)]
    for c in range(len(values)):
        target[c] = values[c]
    return pos + len(values)


@numba.njit(cache=True, inline="always")
def _put_varints_2(buf: np.ndarray, pos: int, values: np.ndarray) -> int:
    """Writes the varints of values in [0, 2**14) without branches: always two bytes (the second
    overwritten by what follows when the value is below 128); returns the position after."""
    at = np.uint64(pos)  # unsigned: no negative-index fix-up per store
    for c in range(len(values)):
        value = values[c]
        c1 = value >= 128
        buf[at] = (value & 0x7F) | (c1 << 7)
        buf[at + np.uint64(1)] = value >> 7
        at += np.uint64(1 + c1)
    return np.int64(at)


@numba.njit(cache=True, inline="always")
def _put_varints_4(buf: np.ndarray, pos: int, values: np.ndarray) -> int:
    """Writes the varints of values in [0, 2**28) without branches: always four bytes (the ones
    past a value's length are overwritten by what follows); returns the position after."""
    at = np.uint64(pos)
    for c in range(len(values)):
        value = values[c]
        c1 = value >= 128
        c2 = value >= 16384
        c3 = value >= 2097152
        buf[at] = (value & 0x7F) | (c1 << 7)
        buf[at + np.uint64(1)] = ((value >> 7) & 0x7F) | (c2 << 7)
        buf[at + np.uint64(2)] = ((value >> 14) & 0x7F) | (c3 << 7)
        buf[at + np.uint64(3)] = value >> 21
        at += np.uint64(1 + c1 + c2 + c3)
    return np.int64(at)


@numba.njit(cache=True, inline="always")
def _put_masked_crc(buf: np.ndarray, pos: int, start: int, end: int) -> int:
    crc = crc32c(buf, start, end)
    masked = (((crc >> 15) | (crc << 17)) + _CRC_MASK_DELTA) & 0xFFFFFFFF
    for k in range(4):
        buf[pos + k] = (masked >> (8 * k)) & 0xFF
    return pos + 4


@numba.njit(cache=True, inline="always")
def _entry_len(key_len: int, payload: int) -> int:
    """Bytes of one ``Features.feature`` map entry (tag and length included)."""
    value_list = 1 + _varint_len(payload) + payload
    feature = 1 + _varint_len(value_list) + value_list
    entry = key_len + 1 + _varint_len(feature) + feature
    return 1 + _varint_len(entry) + entry


@numba.njit(cache=True)
def _encode(ints, int_bounds, floats, float_bounds, keys, key_bounds):
    n = ints.shape[0]
    n_int = len(int_bounds) - 1
    n_float = len(float_bounds) - 1
    payloads = np.zeros((n, n_int), dtype=np.int64)
    value_ors = np.zeros((n, n_int), dtype=np.int64)  # the OR of a feature's values in a row
    feature_lens = np.zeros(n, dtype=np.int64)
    data_lens = np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    for r in range(n):
        features = 0
        row = ints[r]
        outside = 0
        for f in range(n_int):
            size, value_or = _payload_size(row[int_bounds[f] : int_bounds[f + 1]])
            outside |= value_or >> 28  # non-zero for values < 0 or >= 2**28
            payloads[r, f] = size
            value_ors[r, f] = value_or
            features += _entry_len(key_bounds[f + 1] - key_bounds[f], size)
        if outside:
            raise ValueError("int feature values must lie in [0, 2**28)")
        for g in range(n_float):
            size = float_bounds[g + 1] - float_bounds[g]
            k = n_int + g
            features += _entry_len(key_bounds[k + 1] - key_bounds[k], size)
        feature_lens[r] = features
        data_lens[r] = 1 + _varint_len(features) + features
        offsets[r + 1] = offsets[r] + 16 + data_lens[r]
    # A writer's stores past a value land in bytes written after it (at the latest its record's
    # CRC); the 4 spare bytes are a margin, never part of the output.
    out = np.empty(offsets[n] + 4, dtype=np.uint8)
    for r in range(n):
        row = ints[r]
        pos = offsets[r]
        length = data_lens[r]
        for k in range(8):
            out[pos + k] = (length >> (8 * k)) & 0xFF
        pos = _put_masked_crc(out, pos + 8, pos, pos + 8)
        data_start = pos
        out[pos] = _TAG_FIELD1
        pos = put_varint(out, pos + 1, feature_lens[r])
        for f in range(n_int + n_float):
            key_len = key_bounds[f + 1] - key_bounds[f]
            if f < n_int:
                payload = payloads[r, f]
                kind = _TAG_INT64_LIST
            else:
                payload = float_bounds[f - n_int + 1] - float_bounds[f - n_int]
                kind = _TAG_FIELD2
            value_list = 1 + _varint_len(payload) + payload
            feature = 1 + _varint_len(value_list) + value_list
            entry = key_len + 1 + _varint_len(feature) + feature
            out[pos] = _TAG_FIELD1
            pos = put_varint(out, pos + 1, entry)
            copy_elements(out, pos, keys, key_bounds[f], key_len)
            pos += key_len
            out[pos] = _TAG_FIELD2
            pos = put_varint(out, pos + 1, feature)
            out[pos] = kind
            pos = put_varint(out, pos + 1, value_list)
            out[pos] = _TAG_FIELD1
            pos = put_varint(out, pos + 1, payload)
            if f < n_int:
                values = row[int_bounds[f] : int_bounds[f + 1]]
                value_or = value_ors[r, f]  # in [0, 2**28): the size pass raised otherwise
                if value_or < 128:
                    pos = _put_varints_1(out, pos, values)
                elif value_or < 16384:
                    pos = _put_varints_2(out, pos, values)
                else:
                    pos = _put_varints_4(out, pos, values)
            else:
                copy_elements(out, pos, floats[r], float_bounds[f - n_int], payload)
                pos += payload
        pos = _put_masked_crc(out, pos, data_start, pos)
    return out[: offsets[n]], offsets


@dataclass(frozen=True)
class FramedRecords:
    """A batch of TFRecord frames laid end to end: record ``i`` is
    ``data[offsets[i]:offsets[i + 1]]`` (12-byte header, payload, 4-byte footer)."""

    data: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def payloads(self) -> list[bytes]:
        """Each record's serialized ``tf.train.Example`` (the frames stripped)."""
        raw = self.data.tobytes()
        bounds = self.offsets.tolist()
        return [
            raw[start + 12 : end - 4] for start, end in zip(bounds[:-1], bounds[1:], strict=True)
        ]


ColumnEncoder = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str]], FramedRecords]
"""What makes a batch's records from its columns (``frame_columns``' arguments): TFRecord frames
(``frame_columns``), or compact rows for a spill file (``transforms.compact_columns``)."""


def _key_bytes(name: str) -> bytes:
    raw = name.encode()
    out = bytearray([_TAG_FIELD1])
    n = len(raw)
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out) + raw


def _rows_of(a: np.ndarray) -> np.ndarray:
    """``a`` as (rows, values per row): 1-D arrays hold one value per row."""
    return a.reshape(a.shape[0], -1 if a.size else int(np.prod(a.shape[1:], dtype=np.int64)))


def _stack(arrays: list[np.ndarray], n: int, dtype) -> tuple[np.ndarray, np.ndarray]:
    widths = [a.shape[1] for a in arrays]
    bounds = np.concatenate(([0], np.cumsum(widths))).astype(np.int64)
    out = np.empty((n, int(bounds[-1])), dtype=dtype)
    for a, start, end in zip(arrays, bounds[:-1], bounds[1:], strict=True):
        out[:, start:end] = a
    return out, bounds


def frame_examples(
    int64_features: Mapping[str, np.ndarray],
    float_features: Mapping[str, np.ndarray],
    encoder: ColumnEncoder | None = None,
) -> FramedRecords:
    """TFRecord frames of one ``tf.train.Example`` per row of the given (N, width) arrays.

    Byte for byte ``frame_record(r) for r in encode_examples(int64_features, float_features)``;
    int values must lie in [0, 2**28). Raises ValueError on a value out of range or row counts
    that differ. ``encoder`` (``frame_columns`` by default) makes the records from the stacked
    columns.
    """
    ints = [_rows_of(np.asarray(a)) for a in int64_features.values()]
    floats = [
        np.ascontiguousarray(_rows_of(np.asarray(a, dtype="<f4"))) for a in float_features.values()
    ]
    rows = {a.shape[0] for a in ints + floats}
    if len(rows) > 1:
        raise ValueError(f"features have different row counts: {sorted(rows)}")
    n = rows.pop() if rows else 0
    for name, a in zip(int64_features, ints, strict=True):
        if a.size and (a.min() < 0 or a.max() >= _VARINT_LIMIT):
            raise ValueError(f"{name}: values must lie in [0, 2**28) for packed varint encoding")
    int_matrix, int_bounds = _stack(ints, n, np.int32)
    float_bytes = [f.view(np.uint8).reshape(n, 4 * f.shape[1]) for f in floats]
    float_matrix, float_bounds = _stack(float_bytes, n, np.uint8)
    return (encoder or frame_columns)(
        int_matrix, int_bounds, float_matrix, float_bounds, [*int64_features, *float_features]
    )


def frame_columns(
    ints: np.ndarray,
    int_bounds: np.ndarray,
    floats: np.ndarray,
    float_bounds: np.ndarray,
    names: list[str],
) -> FramedRecords:
    """``frame_examples`` of features already side by side: int feature ``f`` is columns
    ``int_bounds[f]:int_bounds[f + 1]`` of ``ints`` (int32 (n, C), values in [0, 2**28), else
    ValueError), float feature ``g`` is bytes ``float_bounds[g]:float_bounds[g + 1]`` of
    ``floats`` (uint8 (n, B), little-endian float32); ``names`` int features first."""
    keys = [_key_bytes(name) for name in names]
    key_bounds = np.concatenate(([0], np.cumsum([len(k) for k in keys]))).astype(np.int64)
    key_array = np.frombuffer(b"".join(keys), dtype=np.uint8)
    data, offsets = _encode(
        np.ascontiguousarray(ints),
        np.asarray(int_bounds, dtype=np.int64),
        np.ascontiguousarray(floats),  # rows copied by memmove
        np.asarray(float_bounds, dtype=np.int64),
        key_array,
        key_bounds,
    )
    return FramedRecords(data, offsets)


@numba.njit(cache=True)
def _residue_places(sizes, keys, num_shards):
    """The spill buffer of records with frame sizes ``sizes`` and shuffle ``keys``, with every
    key in place, where each record's frame goes in it, and each residue block's byte offset."""
    n = len(sizes)
    total = 0
    for j in range(n):
        total += 8 + sizes[j]
    out = np.empty(total, dtype=np.uint8)
    places = np.empty(n, dtype=np.int64)
    bounds = np.zeros(num_shards + 1, dtype=np.int64)
    pos = 0
    for r in range(num_shards):
        for j in range(r, n, num_shards):
            key = keys[j]
            for k in range(8):
                out[pos + k] = (key >> (8 * k)) & 0xFF
            pos += 8
        for j in range(r, n, num_shards):
            places[j] = pos
            pos += sizes[j]
        bounds[r + 1] = pos
    return out, places, bounds


@numba.njit(cache=True)
def _place_frames(out, data, offsets, places):
    """Copies frame ``j`` of ``data`` (bounds ``offsets``) to ``out[places[j]:]``."""
    for j in range(len(places)):
        start = offsets[j]
        size = offsets[j + 1] - start
        copy_elements(out, places[j], data, start, size)


def residue_spill(batches: list[FramedRecords], keys: np.ndarray, num_shards: int):
    """``transforms.shard_layout.spill_layout`` of the records of ``batches`` taken in order
    (record ``j`` has shuffle key ``keys[j]``): (spill bytes as a uint8 array, byte offset of
    each of the ``num_shards`` residue blocks and the end). Each frame is copied once, from its
    batch to its place in the spill."""
    if num_shards < 1:
        raise ValueError(f"num_shards must be at least 1, got {num_shards}")
    sizes = [np.diff(b.offsets) for b in batches]
    all_sizes = np.concatenate(sizes) if sizes else np.zeros(0, dtype=np.int64)
    keys = np.asarray(keys, dtype=np.int64)
    if len(keys) != len(all_sizes):
        raise ValueError(f"{len(keys)} shuffle keys for {len(all_sizes)} records")
    out, places, bounds = _residue_places(all_sizes, keys, num_shards)
    first = 0
    for batch, batch_sizes in zip(batches, sizes, strict=True):
        _place_frames(out, batch.data, batch.offsets, places[first : first + len(batch_sizes)])
        first += len(batch_sizes)
    return out, bounds


@numba.njit(cache=True, inline="always")
def prefixed_bounds(
    data: np.ndarray, pos: int, count: int, length_bytes: int, header: int, extra: int
) -> np.ndarray:
    """Where each of ``count`` records laid end to end from ``pos`` in ``data`` (uint8) starts,
    and where the last one ends (``count + 1`` offsets); -1 as the last offset when a record runs
    past the end of ``data``. A record starts with its little-endian length in ``length_bytes``,
    within a ``header`` of that many bytes, and takes ``extra`` bytes besides that length."""
    out = np.empty(count + 1, dtype=np.int64)
    for i in range(count):
        out[i] = pos
        if pos + header > len(data):
            out[count] = -1
            return out
        length = np.int64(0)
        for k in range(length_bytes):
            length |= np.int64(data[pos + k]) << (8 * k)
        pos += extra + length
        if pos > len(data):
            out[count] = -1
            return out
    out[count] = pos
    return out


@numba.njit(cache=True)
def frame_bounds(data: np.ndarray, pos: int, count: int) -> np.ndarray:
    """``prefixed_bounds`` of TFRecord frames (8-byte length, 12-byte header, 16 bytes of framing):
    lengths are read, checksums are not checked."""
    return prefixed_bounds(data, pos, count, 8, 12, 16)


@numba.njit(cache=True)
def count_frames(data: np.ndarray) -> tuple[int, int]:
    """(complete frames from the start of ``data``, where the first incomplete one starts)."""
    pos = 0
    count = 0
    while len(data) - pos >= 12:
        length = np.int64(0)
        for k in range(8):
            length |= np.int64(data[pos + k]) << (8 * k)
        end = pos + 16 + length
        if end > len(data):
            break
        pos = end
        count += 1
    return count, pos


@numba.njit(cache=True)
def gather_frames(data: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """``data[starts[i]:ends[i]]`` for every ``i``, end to end, as one uint8 array."""
    total = 0
    for i in range(len(starts)):
        total += ends[i] - starts[i]
    out = np.empty(total, dtype=np.uint8)
    pos = 0
    for i in range(len(starts)):
        size = ends[i] - starts[i]
        copy_elements(out, pos, data, starts[i], size)
        pos += size
    return out
