"""Near-duplicate documents (e.g. two editions of one book) by MinHash and LSH banding.

A document's signature is the minimum, over its word 5-shingles, of ``NUM_PERMUTATIONS`` keyed
hash functions. Two documents whose signatures agree on every row of at least one band of
``ROWS_PER_BAND`` rows become candidates; a candidate pair is a duplicate when the signature
agreement (an estimate of the shingle Jaccard similarity) is at least ``threshold`` (default 0.8).
With 128 permutations in 16 bands of 8 rows, pairs at Jaccard 0.8 become candidates with
probability 1 - (1 - 0.8**8)**16 ≈ 0.96, pairs at 0.5 with ≈ 0.06.

The hashes, all in unsigned 64-bit arithmetic (mod 2**64):

- a word (``\\w+`` of the lower-cased text): the 8-byte blake2b digest of its UTF-8, little-endian;
- a shingle of words w0..w4: ``mix(K0*h(w0) + ... + K4*h(w4))``, ``mix`` the splitmix64
  finalizer; a document of fewer words has one shingle of them all (the same sum, shorter);
- permutation i of a shingle hash x: ``A[i]*x + B[i]`` (A[i] odd, so a bijection of x).

Word hashes are cached (a word's hash depends on the word alone), so the per-word work is a dict
look-up and the rest is a few vectorized passes.

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
MAX_CACHED_WORDS = 1 << 17
"""Word hashes kept per process (then a new cache starts): ~20 MB, plus one document's words."""
MAX_CACHED_WORD_CHARS = 64
"""Longer words (rare: a URL, a run of letters) are hashed where they occur, never cached, so a
cached key is at most this long."""
_WORD = re.compile(r"\w+")
_CHUNK = 2048  # columns per step: 128 x 2048 x 8 bytes stay in cache
# Odd 64-bit constants weighting a shingle's word positions (from the golden ratio and the
# xxHash/murmur3 primes), so a shingle and its permutations hash apart.
SHINGLE_WEIGHTS = np.array(
    [
        0x9E3779B97F4A7C15,
        0xC2B2AE3D27D4EB4F,
        0x165667B19E3779F9,
        0xD6E8FEB86659FD93,
        0xFF51AFD7ED558CCD,
    ],
    dtype=np.uint64,
)


def _permutations(seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Coefficients of the hash family h(x) = (a*x + b) mod 2**64, a odd."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 1 << 63, size=NUM_PERMUTATIONS, dtype=np.uint64) * np.uint64(2) + 1
    b = rng.integers(0, np.iinfo(np.uint64).max, size=NUM_PERMUTATIONS, dtype=np.uint64)
    return a[:, None], b[:, None]


_A, _B = _permutations()
_WORD_HASHES: dict[str, int] = {}


def word_hash(word: str) -> int:
    """The 8-byte blake2b digest of ``word``'s UTF-8, as a little-endian integer."""
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")


def _word_hashes(tokens: list[str]) -> np.ndarray:
    """uint64 ``word_hash`` of each token, through the process's cache. A full cache is
    replaced by a new one, never cleared in place, so a call in another thread still finds
    what it read."""
    global _WORD_HASHES
    cache = _WORD_HASHES
    try:
        return np.array([cache[t] for t in tokens], dtype=np.uint64)
    except KeyError:
        pass
    if len(cache) + len(tokens) > MAX_CACHED_WORDS:
        cache = _WORD_HASHES = {}
    values = []
    for t in tokens:
        value = cache.get(t)
        if value is None:
            value = word_hash(t)
            if len(t) <= MAX_CACHED_WORD_CHARS:
                cache[t] = value
        values.append(value)
    return np.array(values, dtype=np.uint64)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, in place on a uint64 array (returned)."""
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    return x


def shingle_hashes(text: str, words: int = SHINGLE_WORDS) -> np.ndarray:
    """uint64 hash of each word ``words``-shingle of the document, in text order, repeats
    included (see the module docstring); empty for a document without words."""
    tokens = _WORD.findall(text.lower())
    if not tokens:
        return np.empty(0, dtype=np.uint64)
    h = _word_hashes(tokens)
    count = max(len(h) - words + 1, 1)
    acc = h[:count] * SHINGLE_WEIGHTS[0]
    for k in range(1, min(words, len(h))):
        acc += h[k : k + count] * SHINGLE_WEIGHTS[k]
    return mix64(acc)


def minhash_signature(text: str) -> np.ndarray:
    """uint64[NUM_PERMUTATIONS] MinHash signature; all-max for a document without words."""
    return signature_of_hashes(shingle_hashes(text, SHINGLE_WORDS))


def signature_of_hashes(shingles: np.ndarray) -> np.ndarray:
    """The MinHash signature of uint64 shingle hashes (repeats allowed): per permutation, the
    minimum of ``(a*x + b) mod 2**64``; all-max when there are none. Computed in column chunks
    that stay in cache."""
    out = np.full(NUM_PERMUTATIONS, np.iinfo(np.uint64).max, dtype=np.uint64)
    if not len(shingles):
        return out
    shingles = np.asarray(shingles, dtype=np.uint64)
    y = np.empty((NUM_PERMUTATIONS, min(len(shingles), _CHUNK)), dtype=np.uint64)
    for start in range(0, len(shingles), _CHUNK):
        x = shingles[None, start : start + _CHUNK]
        yy = y[:, : x.shape[1]]
        np.multiply(_A, x, out=yy)
        yy += _B
        np.minimum(out, yy.min(axis=1), out=out)
    return out


def band_keys(signature: np.ndarray) -> list[str]:
    """One key per LSH band: documents sharing a key are candidate duplicates."""
    bands = signature.reshape(-1, ROWS_PER_BAND)
    return [
        f"{i}:{hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest()}"
        for i, row in enumerate(bands)
    ]


_NO_SHINGLES = np.uint64(np.iinfo(np.uint64).max)


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of two documents from their signatures; 0.0 when either has
    no shingles (a document without words: all-max): it is a near duplicate of nothing, not of
    every other document without words."""
    if (a == _NO_SHINGLES).all() or (b == _NO_SHINGLES).all():
        return 0.0
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
