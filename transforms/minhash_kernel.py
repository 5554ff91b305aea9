"""The compiled loops of ``transforms.near_duplicates``: the words of a text with their hashes
(``words_of_bytes``), their shingles' MinHash minima (``lower_to_shingle_minima``), and the
minima of given shingle hashes (``lower_to_minima``).

Words: one pass marks word bytes, one counts words, one hashes them; numpy needed a 1 MB piece
loop, a prefix sum of ``b[i] * BASE**i`` and several temporaries per byte.

Minima: per owner (a document) and permutation ``(a, b)``: the minimum of ``(a*x + b) mod 2**64`` over
the owner's shingle hashes ``x``. numpy needs a 128-row temporary per chunk of values and a
``reduceat`` over it; this loop keeps one running minimum per permutation (1.8× faster measured,
2 M values). Imported on first use only, so a clean without near dedup never loads numba.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, boundscheck=False, inline="always")
def _lower_row(
    row: np.ndarray, values: np.ndarray, start: int, end: int, a: np.ndarray, b: np.ndarray
) -> None:
    """Lowers ``row[p]`` to ``min((a[p] * x + b[p]) mod 2**64)`` over ``values[start:end]``."""
    for p in range(a.shape[0]):
        ap = a[p]
        bp = b[p]
        low = row[p]
        for k in range(start, end):
            y = ap * values[k] + bp
            if y < low:
                low = y
        row[p] = low


@numba.njit(cache=True, boundscheck=False)
def lower_to_minima(values: np.ndarray, a: np.ndarray, b: np.ndarray, row: np.ndarray) -> None:
    """Lowers ``row[p]`` to ``min((a[p] * x + b[p]) mod 2**64)`` over the ``values`` x (all
    uint64): one signature from given shingle hashes."""
    _lower_row(row, values, 0, values.shape[0], a, b)


_C2, _E2, _A0 = np.uint8(0xC2), np.uint8(0xE2), np.uint8(0xA0)
_MIX1, _MIX2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)


@numba.njit(cache=True, inline="always")
def _mix64(x: np.uint64) -> np.uint64:
    """splitmix64's finalizer (``near_duplicates.mix64`` on one value)."""
    x ^= x >> _S30
    x *= _MIX1
    x ^= x >> _S27
    x *= _MIX2
    return x ^ (x >> _S31)


@numba.njit(cache=True, boundscheck=False)
def words_of_bytes(
    data: np.ndarray, word_byte: np.ndarray, base: np.uint64, length_weight: np.uint64
) -> tuple[np.ndarray, np.ndarray]:
    """(start byte, hash) of each word of lower-cased UTF-8 ``data`` (uint8), in order: a word is
    a maximal run of bytes that ``word_byte`` (bool[256]) admits, minus the bytes of C2 A0..BF
    (U+00A0-U+00BF) and E2 80..81 xx (U+2000-U+207F); its hash is splitmix64's finalizer of
    ``sum(b[i] * base**i) + n * length_weight`` over its ``n`` bytes, mod 2**64
    (``transforms.near_duplicates``' definition). Two passes: count the words, then hash them."""
    n = data.shape[0]
    mask = np.empty(n, dtype=np.bool_)
    for i in range(n):
        mask[i] = word_byte[data[i]]
    for i in range(n - 1):
        if data[i] == _C2 and data[i + 1] >= _A0:
            mask[i] = False
            mask[i + 1] = False
    for i in range(n - 2):
        if data[i] == _E2 and (data[i + 1] | np.uint8(1)) == np.uint8(0x81):
            mask[i] = False
            mask[i + 1] = False
            mask[i + 2] = False
    words = 0
    inside = False
    for i in range(n):
        if mask[i] and not inside:
            words += 1
        inside = mask[i]
    starts = np.empty(words, dtype=np.int64)
    hashes = np.empty(words, dtype=np.uint64)
    word = 0
    i = 0
    while i < n:
        if not mask[i]:
            i += 1
            continue
        start = i
        h = np.uint64(0)
        power = np.uint64(1)
        while i < n and mask[i]:
            h += np.uint64(data[i]) * power
            power *= base
            i += 1
        h += np.uint64(i - start) * length_weight
        h = _mix64(h)
        starts[word] = start
        hashes[word] = h
        word += 1
    return starts, hashes


@numba.njit(cache=True, boundscheck=False)
def lower_to_shingle_minima(
    hashes: np.ndarray,
    first_word: np.ndarray,
    words: np.ndarray,
    weights: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    out: np.ndarray,
) -> None:
    """Lowers ``out[t, p]`` to the minimum of ``(a[p] * x + b[p]) mod 2**64`` over the shingle
    hashes ``x`` of text ``t``, whose word hashes are ``hashes[first_word[t]:][:words[t]]``: a
    shingle of ``weights.shape[0]`` words (one shingle of all of them in a shorter text) hashes
    to splitmix64's finalizer of ``sum(weights[k] * word[k])``; a text without words is left
    as it is. ``lower_to_minima`` of ``near_duplicates``' shingle hashes, without them."""
    span = weights.shape[0]
    shingle = np.empty(0, dtype=np.uint64)
    for t in range(words.shape[0]):
        n = words[t]
        if n == 0:
            continue
        count = max(n - span + 1, 1)
        if shingle.shape[0] < count:
            shingle = np.empty(max(count, 2 * shingle.shape[0]), dtype=np.uint64)
        first = first_word[t]
        for s in range(count):
            acc = np.uint64(0)
            for k in range(min(span, n)):
                acc += hashes[first + s + k] * weights[k]
            shingle[s] = _mix64(acc)
        _lower_row(out[t], shingle, 0, count, a, b)
