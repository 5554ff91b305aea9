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
_CHUNK = 8192


def _permutations(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the hash family h(x) = (a*x + b) mod (2**61 - 1), a < 2**31, x < 2**32,
    so that a*x + b < 2**64 never overflows."""
    rng = np.random.default_rng(seed)
    a = rng.integers(1, 1 << 31, size=NUM_PERMUTATIONS, dtype=np.uint64)
    b = rng.integers(0, 1 << 61, size=NUM_PERMUTATIONS, dtype=np.uint64)
    return a[:, None], b[:, None]


_A, _B = _permutations()


def shingle_hashes(text: str, words: int = SHINGLE_WORDS) -> np.ndarray:
    """32-bit hashes of the document's lower-cased word ``words``-shingles (unique, uint64)."""
    tokens = _WORD.findall(text.lower())
    if len(tokens) < words:
        grams = [" ".join(tokens)] if tokens else []
    else:
        grams = [" ".join(tokens[i : i + words]) for i in range(len(tokens) - words + 1)]
    values = {
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=4).digest(), "little") for g in grams
    }
    return np.fromiter(values, dtype=np.uint64, count=len(values))


def minhash_signature(text: str) -> np.ndarray:
    """uint64[NUM_PERMUTATIONS] MinHash signature; all-max for a document without words."""
    shingles = shingle_hashes(text)
    out = np.full(NUM_PERMUTATIONS, np.iinfo(np.uint64).max, dtype=np.uint64)
    for start in range(0, len(shingles), _CHUNK):
        x = shingles[None, start : start + _CHUNK]
        values = (_A * x + _B) % _PRIME
        np.minimum(out, values.min(axis=1), out=out)
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
