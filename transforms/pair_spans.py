"""``transforms.instances.create_pair_spans`` over a whole bucket, in one compiled kernel.

The kernel walks the bucket's documents in order and makes exactly the draws the Python function
makes, from the same ``random.Random`` stream (replayed by ``transforms.reference_stream``), so it
yields the same spans and counts; the Python function stays the readable definition and the
tests' oracle. Python's draws, as ``create_pair_spans`` uses them:

- ``random()``: two 32-bit words (``reference_stream.random_float``); ``uniform_int`` is one
  ``random()``;
- ``getrandbits(k)``: ``ceil(k / 32)`` words, least significant first, the last one shifted right
  by ``32 - (k mod 32)`` when ``k`` is not a multiple of 32; only its bit count is used here.
"""

from __future__ import annotations

import random
from collections import Counter

import numba
import numpy as np

from transforms.instances import BucketLayout, PairConfig
from transforms.reference_stream import STATE_WORDS, next_word, random_float, stream_state

STAT_NAMES = (
    "short_target_documents",
    "single_sentence_chunks",
    "skipped_no_other_document",
    "truncated_pairs",
    "truncated_tokens",
    "pairs",
    "random_next",
)
"""The counters the kernel keeps, in the order of its counts array."""
_SHORT, _SINGLE, _SKIPPED, _TRUNCATED, _TRUNCATED_TOKENS, _PAIRS, _RANDOM = range(7)


@numba.njit(cache=True, inline="always")
def _uniform_int(state: np.ndarray, low: int, high: int) -> int:
    return min(high, low + int(random_float(state) * (high - low + 1)))


@numba.njit(cache=True)
def _heads(state: np.ndarray, k: int) -> int:
    """``getrandbits(k).bit_count()`` for k >= 1."""
    total = 0
    while k > 0:
        word = next_word(state)
        if k < 32:
            word >>= 32 - k
        while word:
            word &= word - 1
            total += 1
        k -= 32
    return total


@numba.njit(cache=True)
def _random_document(state, n_documents, document_index, allow_same) -> int:
    if allow_same:
        random_index = document_index
        for _ in range(10):
            random_index = _uniform_int(state, 0, n_documents - 1)
            if random_index != document_index:
                break
        return random_index
    if n_documents < 2:
        return -1
    random_index = _uniform_int(state, 0, n_documents - 2)
    return random_index + 1 if random_index >= document_index else random_index


@numba.njit(cache=True)
def _bucket_spans(
    state, doc_bounds, starts, lengths, max_num_tokens, short_seq_prob, random_next_prob, allow_same
):
    n_documents = len(doc_bounds) - 1
    spans = np.zeros((len(lengths), 5), dtype=np.int64)
    counts = np.zeros(7, dtype=np.int64)
    m = 0
    for d in range(n_documents):
        first_sentence = doc_bounds[d]
        n_sentences = doc_bounds[d + 1] - first_sentence
        target = max_num_tokens
        if random_float(state) < short_seq_prob:
            target = _uniform_int(state, 2, max_num_tokens)
            counts[_SHORT] += 1
        chunk_first = 0
        chunk_size = 0
        chunk_tokens = 0
        i = 0
        while i < n_sentences:
            if chunk_size == 0:
                chunk_first = i
            chunk_size += 1
            chunk_tokens += lengths[first_sentence + i]
            if i == n_sentences - 1 or chunk_tokens >= target:
                a_sentences = 1 if chunk_size < 2 else _uniform_int(state, 1, chunk_size - 1)
                a_start = starts[first_sentence + chunk_first]
                a_len = 0
                for s in range(chunk_first, chunk_first + a_sentences):
                    a_len += lengths[first_sentence + s]
                if chunk_size == 1:
                    counts[_SINGLE] += 1
                    is_random = True
                else:
                    is_random = random_float(state) < random_next_prob
                b_start = 0
                b_len = 0
                skip = False
                if is_random:
                    target_b = target - a_len
                    other = _random_document(state, n_documents, d, allow_same)
                    if other < 0:
                        skip = True
                    else:
                        other_first = doc_bounds[other]
                        other_n = doc_bounds[other + 1] - other_first
                        first = _uniform_int(state, 0, other_n - 1)
                        b_start = starts[other_first + first]
                        for j in range(first, other_n):
                            b_len += lengths[other_first + j]
                            if b_len >= target_b:
                                break
                    i -= chunk_size - a_sentences
                else:
                    b_start = starts[first_sentence + chunk_first + a_sentences]
                    b_len = chunk_tokens - a_len
                if skip:
                    counts[_SKIPPED] += 1
                else:
                    excess = a_len + b_len - max_num_tokens
                    cut_a = 0
                    cut_b = 0
                    if excess > 0:
                        if a_len > b_len:
                            cut_a = min(excess, a_len - b_len)
                            even = cut_a
                        else:
                            cut_b = min(excess, b_len - a_len)
                            even = cut_b
                        rest = excess - even
                        cut_a += rest // 2
                        cut_b += (rest + 1) // 2
                    front_a = _heads(state, cut_a) if cut_a else 0
                    front_b = _heads(state, cut_b) if cut_b else 0
                    if cut_a or cut_b:
                        a_start += front_a
                        b_start += front_b
                        a_len -= cut_a
                        b_len -= cut_b
                        counts[_TRUNCATED] += 1
                        counts[_TRUNCATED_TOKENS] += cut_a + cut_b
                    if a_len < 1 or b_len < 1:
                        return spans[:0], counts, False
                    spans[m, 0] = a_start
                    spans[m, 1] = a_len
                    spans[m, 2] = b_start
                    spans[m, 3] = b_len
                    spans[m, 4] = 1 if is_random else 0
                    m += 1
                    counts[_PAIRS] += 1
                    counts[_RANDOM] += 1 if is_random else 0
                chunk_size = 0
                chunk_tokens = 0
            i += 1
    return spans[:m], counts, True


def bucket_pair_spans(
    layout: BucketLayout, cfg: PairConfig, rng: random.Random, stats: Counter[str]
) -> np.ndarray:
    """Every document's ``create_pair_spans`` in document order, as an int64 (M, 5) array of
    ``PairSpan`` rows; ``rng`` is advanced past the draws, and ``stats`` gains the same counts."""
    state = stream_state(rng)
    spans, counts, ok = _bucket_spans(
        state,
        layout.document_bounds,
        layout.sentence_starts,
        layout.sentence_lengths,
        cfg.max_num_tokens,
        cfg.short_seq_prob,
        cfg.random_next_prob,
        cfg.allow_same_document_random_next,
    )
    if not ok:
        raise AssertionError("empty segment after truncation")
    rng.setstate((3, tuple(int(w) for w in state[: STATE_WORDS + 1]), None))
    for name, value in zip(STAT_NAMES, counts.tolist(), strict=True):
        if value or (name == "random_next" and counts[_PAIRS]):  # as create_pair_spans adds them
            stats[name] += value
    return spans
