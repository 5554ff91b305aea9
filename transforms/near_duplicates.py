"""Near-duplicate documents (e.g. two editions of one book) by MinHash and LSH banding.

A document's signature is the minimum, over its word 5-shingles, of ``NUM_PERMUTATIONS`` keyed
hash functions. Two documents whose signatures agree on every row of at least one band of
``ROWS_PER_BAND`` rows become candidates; a candidate pair is a duplicate when the signature
agreement (an estimate of the shingle Jaccard similarity) is at least ``threshold`` (default 0.8).
With 128 permutations in 16 bands of 8 rows, pairs at Jaccard 0.8 become candidates with
probability 1 - (1 - 0.8**8)**16 ≈ 0.96, pairs at 0.5 with ≈ 0.06.

Of each group of duplicates (connected by duplicate pairs) the document with the smallest id is
kept, so the outcome does not depend on processing order.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

import numpy as np

NUM_PERMUTATIONS = 128
ROWS_PER_BAND = 8
SHINGLE_WORDS = 5
DEFAULT_THRESHOLD = 0.8
_PRIME = np.uint64((1 << 61) - 1)
_WORD = re.compile(r"\w+")
_SHIFT = np.uint64(61)
_CHUNK = 2048  # columns per step: 128 x 2048 x 8 bytes stay in cache


def _permutations(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the hash family h(x) = (a*x + b) mod (2**61 - 1), a < 2**31, x < 2**32,
    so that a*x + b < 2**64 never overflows."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 1 << 31, size=NUM_PERMUTATIONS, dtype=np.uint64)
    b = rng.integers(0, 1 << 61, size=NUM_PERMUTATIONS, dtype=np.uint64)
    return a[:, None], b[:, None]


_A, _B = _permutations()


def shingle_hashes(text: str, words: int = SHINGLE_WORDS) -> np.ndarray:
    """32-bit hashes of the document's lower-cased word ``words``-shingles (unique, sorted,
    uint64): the 4-byte blake2b digest (little-endian) of the shingle's words joined by single
    spaces, in UTF-8; a document of fewer words has one shingle of them all."""
    hashes = np.sort(_shingle_digests(text, words))
    if len(hashes) > 1:
        hashes = hashes[np.concatenate(([True], hashes[1:] != hashes[:-1]))]
    return hashes.astype(np.uint64)


def _shingle_digests(text: str, words: int) -> np.ndarray:
    """uint32 hash of each shingle, in text order, repeats included (see ``shingle_hashes``)."""
    tokens = _WORD.findall(text.lower())
    if not tokens:
        return np.empty(0, dtype=np.uint32)
    joined = " ".join(tokens).encode()
    if len(tokens) <= words:
        grams = [joined]
    else:
        # A word holds no space (and UTF-8 never has byte 0x20 inside a character), so the
        # spaces of ``joined`` are exactly the word boundaries: shingle i runs from the start
        # of word i to the end of word i + words - 1. Slicing one bytes object is much cheaper
        # than joining and encoding every shingle.
        spaces = np.flatnonzero(np.frombuffer(joined, dtype=np.uint8) == 0x20)
        count = len(tokens) - words + 1
        starts = [0, *(spaces[: count - 1] + 1).tolist()]
        ends = [*spaces[words - 1 :].tolist(), len(joined)]
        grams = [joined[i:j] for i, j in zip(starts, ends, strict=True)]
    return np.frombuffer(_blake2b_32(grams), dtype="<u4")


def _blake2b_32(items: list[bytes]) -> bytes:
    """The 4-byte blake2b digests of ``items``, concatenated (copying a set-up hasher costs less
    than constructing one per item)."""
    copy = hashlib.blake2b(digest_size=4).copy
    digests = []
    append = digests.append
    for item in items:
        h = copy()
        h.update(item)
        append(h.digest())
    return b"".join(digests)


def minhash_signature(text: str) -> np.ndarray:
    """uint64[NUM_PERMUTATIONS] MinHash signature; all-max for a document without words."""
    # repeated shingles do not change a minimum: no need to make them unique
    return signature_of_hashes(_shingle_digests(text, SHINGLE_WORDS))


def signature_of_hashes(shingles: np.ndarray) -> np.ndarray:
    """The MinHash signature of 32-bit shingle hashes (any unsigned dtype, repeats allowed): per
    permutation, the minimum of
    ``(a*x + b) mod (2**61 - 1)``; all-max when there are none.

    The Mersenne modulus is reduced with a mask and a shift instead of a division
    (``y mod p == (y & p) + (y >> 61)``, then one conditional subtraction of p), in column
    chunks that stay in cache: the values of ``%``, at a fraction of its cost.
    """
    out = np.full(NUM_PERMUTATIONS, np.iinfo(np.uint64).max, dtype=np.uint64)
    if not len(shingles):
        return out
    width = min(len(shingles), _CHUNK)
    y = np.empty((NUM_PERMUTATIONS, width), dtype=np.uint64)
    r = np.empty_like(y)
    wrapped = np.empty(y.shape, dtype=bool)
    for start in range(0, len(shingles), _CHUNK):
        x = shingles[None, start : start + _CHUNK]
        n = x.shape[1]
        yy, rr, ww = y[:, :n], r[:, :n], wrapped[:, :n]
        np.multiply(_A, x, out=yy)
        yy += _B  # < 2**63 + 2**61: never overflows
        np.bitwise_and(yy, _PRIME, out=rr)
        yy >>= _SHIFT
        rr += yy  # <= 2**61 + 7
        np.greater_equal(rr, _PRIME, out=ww)
        np.subtract(rr, _PRIME, out=rr, where=ww)
        np.minimum(out, rr.min(axis=1), out=out)
    return out


def band_keys(signature: np.ndarray) -> list[str]:
    """One key per LSH band: documents sharing a key are candidate duplicates."""
    bands = signature.reshape(-1, ROWS_PER_BAND)
    return [
        f"{i}:{hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest()}"
        for i, row in enumerate(bands)
    ]


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of two documents from their signatures."""
    return float(np.mean(a == b))


def duplicate_pairs(
    candidates: Sequence[tuple[str, np.ndarray]], threshold: float = DEFAULT_THRESHOLD
) -> list[tuple[str, str]]:
    """Pairs (smaller id, larger id) among ``candidates`` (one LSH bucket) at or above threshold."""
    ordered = sorted(candidates, key=lambda c: c[0])
    pairs = []
    for i in range(len(ordered)):
        for j in range(i + 1, len(ordered)):
            if similarity(ordered[i][1], ordered[j][1]) >= threshold:
                pairs.append((ordered[i][0], ordered[j][0]))
    return pairs


def documents_to_drop(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each duplicate document → the id kept in its group (the group's smallest id)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        if ra != rb:
            keep, drop = sorted((ra, rb))
            parent[drop] = keep
    return {x: find(x) for x in list(parent) if find(x) != x}
