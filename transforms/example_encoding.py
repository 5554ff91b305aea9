"""``tf.train.Example`` bytes from the protobuf wire format, without importing TensorFlow.

Encoding is vectorized over a batch of records (numpy varints), so a Beam worker spends a few
microseconds per record and never loads TensorFlow. ``decode_example`` parses the same subset of
the format back (int64/float lists) for inspection and tests; TensorFlow's parser is the referee.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import numpy as np

_WIRE_LEN = 2  # length-delimited
_TAG_FIELD1 = bytes([(1 << 3) | _WIRE_LEN])  # Example.features, Features.feature, *List.value, key
_TAG_FIELD2 = bytes([(2 << 3) | _WIRE_LEN])  # map entry value; Feature.float_list
_TAG_FIELD3 = bytes([(3 << 3) | _WIRE_LEN])  # Feature.int64_list
_MAX_VARINT_BYTES = 4  # values below 2**28 (token ids, positions, labels)


@lru_cache(maxsize=4096)
def varint(n: int) -> bytes:
    """Protobuf base-128 varint of a non-negative int."""
    if n < 0:
        raise ValueError(f"varint of negative value {n}")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_delimited(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


def packed_varint_rows(matrix: np.ndarray) -> list[bytes]:
    """Packed-varint encoding of each row of a 2-D array of ints in [0, 2**28)."""
    m = np.asarray(matrix, dtype=np.int64)
    if m.ndim != 2:
        raise ValueError(f"expected a 2-D array, got shape {m.shape}")
    if m.size and (m.min() < 0 or m.max() >= 1 << (7 * _MAX_VARINT_BYTES)):
        raise ValueError("values must lie in [0, 2**28) for packed varint encoding")
    if m.size == 0:
        return [b""] * m.shape[0]
    top = int(m.max())
    if top < 128:  # one byte per value: the row bytes are the encoding
        return [r.tobytes() for r in m.astype(np.uint8)]
    width = 2 if top < 1 << 14 else 3 if top < 1 << 21 else 4
    v = m.astype(np.uint32)
    nbytes = np.ones(m.shape, dtype=np.int64)
    groups = np.empty(m.shape + (width,), dtype=np.uint8)
    for k in range(width):
        more = v >= np.uint32(1 << (7 * (k + 1)))
        groups[..., k] = ((v >> np.uint32(7 * k)) & np.uint32(0x7F)) | (more.astype(np.uint8) << 7)
        if k + 1 < width:
            nbytes += more
    present = np.arange(width) < nbytes[..., None]
    flat = groups[present].tobytes()
    ends = np.cumsum(nbytes.sum(-1))
    starts = np.concatenate(([0], ends[:-1]))
    return [flat[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]


def float_rows(matrix: np.ndarray) -> list[bytes]:
    """Packed little-endian float32 encoding of each row."""
    m = np.ascontiguousarray(np.asarray(matrix, dtype="<f4"))
    return [r.tobytes() for r in m]


def encode_examples(
    int64_features: Mapping[str, np.ndarray], float_features: Mapping[str, np.ndarray]
) -> list[bytes]:
    """Serialized ``tf.train.Example`` per row of the given (N, length) arrays.

    Features are written in the order given (int64 first, then float); all arrays need N rows.
    """
    names: list[str] = []
    payloads: list[list[bytes]] = []
    kinds: list[bytes] = []
    for name, arr in int64_features.items():
        names.append(name)
        payloads.append(packed_varint_rows(arr))
        kinds.append(_TAG_FIELD3)
    for name, arr in float_features.items():
        names.append(name)
        payloads.append(float_rows(arr))
        kinds.append(_TAG_FIELD2)
    n = {len(p) for p in payloads}
    if len(n) > 1:
        raise ValueError(f"features have different row counts: {sorted(n)}")
    prefixes = [_EntryPrefixes(name, kind) for name, kind in zip(names, kinds, strict=True)]
    out: list[bytes] = []
    join = b"".join
    for row in zip(*payloads, strict=True):
        parts = []
        for prefix, payload in zip(prefixes, row, strict=True):
            parts.append(prefix[len(payload)])
            parts.append(payload)
        features = join(parts)
        out.append(_TAG_FIELD1 + varint(len(features)) + features)
    return out


class _EntryPrefixes(dict):
    """payload length → the bytes of a ``Features.feature`` map entry that precede the payload.

    Everything before the packed values depends only on the feature name, its kind and the payload
    length, so it is computed once per length.
    """

    def __init__(self, name: str, kind: bytes) -> None:
        super().__init__()
        self._key = _len_delimited(_TAG_FIELD1, name.encode())
        self._kind = kind

    def __missing__(self, n: int) -> bytes:
        value_list_len = 1 + len(varint(n)) + n
        feature_len = 1 + len(varint(value_list_len)) + value_list_len
        entry_head = self._key + _TAG_FIELD2 + varint(feature_len) + self._kind
        entry_head += varint(value_list_len) + _TAG_FIELD1 + varint(n)
        entry_len = len(entry_head) + n
        prefix = _TAG_FIELD1 + varint(entry_len) + entry_head
        self[n] = prefix
        return prefix


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> list[tuple[int, int, bytes | int]]:
    """(field number, wire type, value) of a message; length-delimited values as bytes."""
    out = []
    pos = 0
    while pos < len(buf):
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 2:
            n, pos = _read_varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated length-delimited field")
            out.append((field, wire, buf[pos : pos + n]))
            pos += n
        elif wire == 0:
            v, pos = _read_varint(buf, pos)
            out.append((field, wire, v))
        elif wire in (1, 5):
            width = 8 if wire == 1 else 4
            if pos + width > len(buf):
                raise ValueError("truncated fixed-width field")
            out.append((field, wire, buf[pos : pos + width]))
            pos += width
        else:
            raise ValueError(f"unsupported wire type {wire}")
    return out


def decode_example(data: bytes) -> dict[str, list[int] | list[float] | list[bytes]]:
    """Parses serialized ``tf.train.Example`` bytes into name → list of values.

    Handles packed and unpacked int64/float lists and bytes lists; raises ValueError when
    the bytes are not a well-formed Example.
    """
    result: dict[str, list] = {}
    for f, _, features in _fields(data):
        if f != 1 or not isinstance(features, bytes):
            continue
        for f2, _, entry in _fields(features):
            if f2 != 1 or not isinstance(entry, bytes):
                continue
            key, feature = b"", b""
            for f3, _, v in _fields(entry):
                if f3 == 1:
                    key = v
                elif f3 == 2:
                    feature = v
            values: list = []
            for kind, _, value_list in _fields(feature):
                for f4, wire, v in _fields(value_list):
                    if f4 != 1:
                        continue
                    if kind == 3:  # int64
                        if wire == 2:
                            p = 0
                            while p < len(v):
                                x, p = _read_varint(v, p)
                                values.append(x - (1 << 64) if x >= 1 << 63 else x)
                        else:
                            values.append(v - (1 << 64) if v >= 1 << 63 else v)
                    elif kind == 2:  # float
                        raw = v if wire == 2 else v
                        values.extend(np.frombuffer(raw, dtype="<f4").tolist())
                    elif kind == 1:  # bytes
                        values.append(v)
            result[key.decode("utf-8")] = values
    return result


def encode_int64_rows(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """Stacks equal-length int rows into an int64 matrix (helper for callers and tests)."""
    return np.asarray(rows, dtype=np.int64)
