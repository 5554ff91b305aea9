"""Duplicate detection over compact key tables, so that only keys (never documents) are shuffled.

A document is addressed by its *location*: an int64 packing (input unit, chunk, row) of the staged
chunk file that holds it. The cleaning job shuffles, per partition, tables of

- exact keys: (content hash, doc id, location) — documents with equal hashes are duplicates and
  the one with the smallest doc id is kept;
- band keys: (LSH band hash, location) for one band index — documents sharing a band hash are
  near-duplicate candidates, verified afterwards on their MinHash signatures.

Tables travel as a few bytes objects per (chunk, partition), not one element per document, so a
runner that holds shuffled data in memory holds ~30 bytes per document.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

ROW_BITS = 16
CHUNK_BITS = 16
MAX_ROWS_PER_CHUNK = (1 << ROW_BITS) - 1
MAX_CHUNKS_PER_UNIT = (1 << CHUNK_BITS) - 1


def location(unit: int, chunk: int, row: int) -> int:
    """The int64 address of row ``row`` of chunk ``chunk`` of input unit ``unit``."""
    if not (0 <= row <= MAX_ROWS_PER_CHUNK and 0 <= chunk <= MAX_CHUNKS_PER_UNIT and unit >= 0):
        raise ValueError(f"location out of range: unit {unit}, chunk {chunk}, row {row}")
    return (unit << (ROW_BITS + CHUNK_BITS)) | (chunk << ROW_BITS) | row


def chunk_locations(unit: int, chunk: int, rows: int) -> np.ndarray:
    """int64 locations of rows ``0..rows-1`` of a chunk."""
    if rows > MAX_ROWS_PER_CHUNK + 1:
        raise ValueError(f"a chunk holds at most {MAX_ROWS_PER_CHUNK + 1} rows, not {rows}")
    return location(unit, chunk, 0) + np.arange(rows, dtype=np.int64)


def chunk_of(loc: int) -> tuple[int, int]:
    """(unit, chunk) of a location."""
    return loc >> (ROW_BITS + CHUNK_BITS), (loc >> ROW_BITS) & MAX_CHUNKS_PER_UNIT


def row_of(loc: int) -> int:
    return loc & MAX_ROWS_PER_CHUNK


@dataclass(frozen=True)
class ExactKeys:
    """Exact-dedup keys of some documents: 16-byte content hashes, doc ids, locations."""

    hashes: list[bytes]
    doc_ids: list[str]
    locations: list[int]

    def to_bytes(self) -> bytes:
        return pickle.dumps((self.hashes, self.doc_ids, self.locations), protocol=5)

    @classmethod
    def from_bytes(cls, data: bytes) -> ExactKeys:
        return cls(*pickle.loads(data))


def hash_bytes(content_hash: str) -> bytes:
    """16 bytes identifying a content hash string (hex digests are shortened, not rehashed)."""
    try:
        return bytes.fromhex(content_hash)[:16]
    except ValueError:
        return hashlib.blake2b(content_hash.encode("utf-8"), digest_size=16).digest()


def partition_of_hash(h: bytes, partitions: int) -> int:
    return h[0] % partitions


def exact_duplicates(tables: Iterable[ExactKeys]) -> list[tuple[int, str, str]]:
    """(location, doc id, kept doc id) of every document whose content hash another document with
    a smaller doc id shares; ordered by (hash, doc id), so the result is independent of the
    order of ``tables``."""
    groups: dict[bytes, list[tuple[str, int]]] = {}
    for table in tables:
        for h, doc_id, loc in zip(table.hashes, table.doc_ids, table.locations, strict=True):
            groups.setdefault(h, []).append((doc_id, loc))
    out = []
    for h in sorted(groups):
        members = groups[h]
        if len(members) < 2:
            continue
        members.sort()
        kept = members[0][0]
        out.extend((loc, doc_id, kept) for doc_id, loc in members[1:])
    return out


def band_hashes(signature: np.ndarray, rows_per_band: int) -> np.ndarray:
    """uint64 hash of each LSH band of a MinHash signature (band ``i`` = rows ``i*r..(i+1)*r``)."""
    bands = np.ascontiguousarray(signature, dtype=np.uint64).reshape(-1, rows_per_band)
    return np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(row.tobytes(), digest_size=8).digest(), "little")
            for row in bands
        ),
        dtype=np.uint64,
        count=len(bands),
    )


def unique_band_hashes(location: int, bands: int) -> np.ndarray:
    """uint64 band hashes that no other document shares (a 64-bit hash of the location and the
    band): for documents that must land in no LSH bucket with another (those without words,
    whose all-max signatures would otherwise all share every bucket: O(n**2) candidate pairs)."""
    return np.fromiter(
        (
            int.from_bytes(
                hashlib.blake2b(f"unique:{location}:{band}".encode(), digest_size=8).digest(),
                "little",
            )
            for band in range(bands)
        ),
        dtype=np.uint64,
        count=bands,
    )


def pack_band(hashes: np.ndarray, locations: np.ndarray) -> bytes:
    """One band's (hash, location) table as bytes."""
    return pickle.dumps(
        (np.asarray(hashes, dtype=np.uint64), np.asarray(locations, dtype=np.int64)), protocol=5
    )


def candidate_pairs(tables: Iterable[bytes]) -> np.ndarray:
    """int64[k, 2] unique (smaller, larger) location pairs sharing a band hash in ``tables`` (the
    packed tables of one band index), sorted."""
    parts = [pickle.loads(t) for t in tables]
    if not parts:
        return np.zeros((0, 2), dtype=np.int64)
    hashes = np.concatenate([h for h, _ in parts])
    locations = np.concatenate([loc for _, loc in parts])
    order = np.lexsort((locations, hashes))
    hashes, locations = hashes[order], locations[order]
    starts = np.flatnonzero(np.r_[True, hashes[1:] != hashes[:-1]])
    ends = np.r_[starts[1:], len(hashes)]
    pairs = []
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        if e - s < 2:
            continue
        group = locations[s:e]
        i, j = np.triu_indices(len(group), k=1)
        pairs.append(np.stack([group[i], group[j]], axis=1))
    if not pairs:
        return np.zeros((0, 2), dtype=np.int64)
    return np.unique(np.concatenate(pairs), axis=0)
