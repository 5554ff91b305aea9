"""Near-duplicate documents (e.g. two editions of one book) by MinHash and LSH banding.

A document's signature is the minimum, over its word 5-shingles, of ``NUM_PERMUTATIONS`` keyed
hash functions. Two documents whose signatures agree on every row of at least one band of
``ROWS_PER_BAND`` rows become candidates; a candidate pair is a duplicate when the signature
agreement (an estimate of the shingle Jaccard similarity) is at least ``threshold`` (default 0.8).
With 128 permutations in 16 bands of 8 rows, pairs at Jaccard 0.8 become candidates with
probability 1 - (1 - 0.8**8)**16 ≈ 0.96, pairs at 0.5 with ≈ 0.06.

The hashes, all in unsigned 64-bit arithmetic (mod 2**64):

- a word: a maximal run of word characters of the lower-cased text, where a word character is
  an ASCII letter, digit or ``_``, or any non-ASCII character outside Latin-1's symbols
  (U+00A0-U+00BF) and General Punctuation (U+2000-U+207F: dashes, curly quotes, ellipsis);
  its hash is ``mix(p + n*LENGTH_WEIGHT)`` for the ``n`` bytes ``b[i]`` of its UTF-8 (lone
  surrogates encoded as if they were characters), ``p = sum(b[i] * BASE**i)``;
- a shingle of words w0..w4: ``mix(K0*h(w0) + ... + K4*h(w4))``, ``mix`` the splitmix64
  finalizer; a document of fewer words has one shingle of them all (the same sum, shorter);
- permutation i of a shingle hash x: ``A[i]*x + B[i]`` (A[i] odd, so a bijection of x).

Words and their hashes come from one compiled pass over the text's bytes
(``transforms.minhash_kernel``, loaded only when near dedup runs), shingles from vectorized
passes over the word hashes: no Python work per word.

Of each group of duplicates (connected by duplicate pairs) the document with the smallest id is
kept, so the outcome does not depend on processing order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

import numpy as np

NUM_PERMUTATIONS = 128
ROWS_PER_BAND = 8
NUM_BANDS = NUM_PERMUTATIONS // ROWS_PER_BAND
SHINGLE_WORDS = 5
DEFAULT_THRESHOLD = 0.8
BASE = 0x100000001B3
"""Odd multiplier of the word hash's polynomial (the 64-bit FNV prime)."""
LENGTH_WEIGHT = 0x9E3779B97F4A7C15
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


def _word_byte_table() -> np.ndarray:
    table = np.zeros(256, dtype=bool)
    for c in b"0123456789abcdefghijklmnopqrstuvwxyz_":
        table[c] = True
    table[0x80:] = True
    return table


_WORD_BYTE = _word_byte_table()


def _words_of_bytes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start byte, uint64 hash) of each word of lower-cased UTF-8 ``data``, in order, in one
    compiled pass (``transforms.minhash_kernel.words_of_bytes``; memory: a byte per byte of text
    and 16 bytes per word)."""
    from transforms.minhash_kernel import words_of_bytes

    return words_of_bytes(
        np.ascontiguousarray(data, dtype=np.uint8),
        _WORD_BYTE,
        np.uint64(BASE),
        np.uint64(LENGTH_WEIGHT),
    )


def _utf8(text: str) -> bytes:
    return text.lower().encode("utf-8", "surrogatepass")


def word_hashes(text: str) -> np.ndarray:
    """uint64 hash of each word of ``text``, in text order (see the module docstring)."""
    return _words_of_bytes(np.frombuffer(_utf8(text), dtype=np.uint8))[1]


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
    h = word_hashes(text)
    if not len(h):
        return h
    count = max(len(h) - words + 1, 1)
    acc = h[:count] * SHINGLE_WEIGHTS[0]
    for k in range(1, min(words, len(h))):
        acc += h[k : k + count] * SHINGLE_WEIGHTS[k]
    return mix64(acc)


def minhash_signature(text: str) -> np.ndarray:
    """uint64[NUM_PERMUTATIONS] MinHash signature; all-max for a document without words."""
    return signature_of_hashes(shingle_hashes(text, SHINGLE_WORDS))


def minhash_signatures(texts: Sequence[str]) -> np.ndarray:
    """uint64[len(texts), NUM_PERMUTATIONS]: ``minhash_signature`` of each text, computed for all
    of them together (compiled passes over the batch: words, then shingles and their minima).

    The texts' lower-cased UTF-8 is joined by ``\\n`` (no word character, so no word spans two
    texts); each word is assigned to its text by its start byte, shingles are formed within a
    text only, and each text's minimum per permutation is taken over its own shingles."""
    out = np.full((len(texts), NUM_PERMUTATIONS), np.iinfo(np.uint64).max, dtype=np.uint64)
    if not texts:
        return out
    parts = [_utf8(t) for t in texts]
    text_starts = np.zeros(len(parts), dtype=np.int64)
    np.cumsum([len(b) + 1 for b in parts[:-1]], out=text_starts[1:])
    word_starts, hashes = _words_of_bytes(np.frombuffer(b"\n".join(parts), dtype=np.uint8))
    if not len(hashes):
        return out
    from transforms.minhash_kernel import lower_to_shingle_minima

    text_of_word = np.searchsorted(text_starts, word_starts, side="right") - 1
    words = np.bincount(text_of_word, minlength=len(texts))
    lower_to_shingle_minima(
        hashes,
        np.cumsum(words) - words,
        words,
        SHINGLE_WEIGHTS,
        np.ascontiguousarray(_A.ravel()),
        np.ascontiguousarray(_B.ravel()),
        out,
    )
    return out


def signature_of_hashes(shingles: np.ndarray) -> np.ndarray:
    """The MinHash signature of uint64 shingle hashes (repeats allowed): per permutation, the
    minimum of ``(a*x + b) mod 2**64``; all-max when there are none."""
    out = np.full(NUM_PERMUTATIONS, np.iinfo(np.uint64).max, dtype=np.uint64)
    if not len(shingles):
        return out
    from transforms.minhash_kernel import lower_to_minima

    lower_to_minima(
        np.ascontiguousarray(shingles, dtype=np.uint64),
        np.ascontiguousarray(_A.ravel()),
        np.ascontiguousarray(_B.ravel()),
        out,
    )
    return out


def band_keys(signature: np.ndarray) -> list[str]:
    """One key per LSH band: documents sharing a key are candidate duplicates."""
    bands = signature.reshape(-1, ROWS_PER_BAND)
    return [
        f"{i}:{hashlib.blake2b(row.tobytes(), digest_size=8).hexdigest()}"
        for i, row in enumerate(bands)
    ]


_NO_SHINGLES = np.uint64(np.iinfo(np.uint64).max)


def has_shingles(signature: np.ndarray) -> bool:
    """Whether the signature is of a document with words (not all-max)."""
    return not (signature == _NO_SHINGLES).all()


def similarity(a: np.ndarray, b: np.ndarray) -> float:
    """Estimated Jaccard similarity of two documents from their signatures; 0.0 when either has
    no shingles (a document without words: all-max): it is a near duplicate of nothing, not of
    every other document without words."""
    if not (has_shingles(a) and has_shingles(b)):
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
