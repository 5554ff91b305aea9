"""Whole-word masking's choice, compiled: per row, the words (a candidate piece and the ``##``
pieces right after it), taken in the order of their first piece's key while they fit the
prediction budget (a word that would overflow it is passed over), reported ascending with their
80/10/10 branch, read at the word's first piece (or at each piece).

``transforms.masking._choose_whole_words`` makes the random draws with numpy, in the order it
always made them, and calls this for everything else; ``tests/transforms/test_masking.py`` holds
the numpy definition it replaced and checks both choose the same, ties included.
"""

from __future__ import annotations

import numba
import numpy as np

from transforms.masking import KEPT, MASKED, RANDOM
from transforms.special_ids import refuse_ids_outside_vocabulary


@numba.njit(cache=True)
def _sort_by_key(keys, words, count):
    """Sorts ``words[:count]`` (word indexes, ascending) by ``keys[word]``, ties keeping their
    order: insertion sort, for the few words below a row's threshold."""
    for i in range(1, count):
        w = words[i]
        key = keys[w]
        j = i - 1
        while j >= 0 and keys[words[j]] > key:
            words[j + 1] = words[j]
            j -= 1
        words[j + 1] = w


@numba.njit(cache=True)
def _choose(ids, candidate, is_continuation, keys, draws, budget, mask_below, keep_below,
            per_piece, positions, decisions, counts):  # fmt: skip
    n, seq_len = ids.shape
    vocab = is_continuation.shape[0]
    unknown = 0
    word_start = np.empty(seq_len, dtype=np.int64)
    word_size = np.empty(seq_len, dtype=np.int64)
    word_key = np.empty(seq_len, dtype=np.float64)
    early = np.empty(seq_len, dtype=np.int64)
    is_start = np.zeros(seq_len, dtype=np.bool_)
    taken = np.zeros(seq_len, dtype=np.bool_)
    for r in range(n):
        # words: a candidate starts one unless it is a ## piece right after another candidate
        words = 0
        previous = False
        for c in range(seq_len):
            here = candidate[r, c]
            is_start[c] = False
            taken[c] = False
            if here and (ids[r, c] < 0 or ids[r, c] >= vocab):
                unknown += 1
                here = False
            if here:
                if previous and is_continuation[ids[r, c]]:
                    word_size[words - 1] += 1
                else:
                    word_start[words] = c
                    word_size[words] = 1
                    word_key[words] = keys[r, c]
                    is_start[c] = True
                    words += 1
            previous = here
        # Words in (key, position) order until the budget is filled. Every word whose key is
        # below the threshold comes before every other, so only those are sorted first (keys
        # are uniform: about budget + 8 of them); the rest are sorted only when still needed.
        limit = budget[r]
        total = 0
        threshold = (1.25 * limit + 8.0) / max(words, 1)
        for part in range(2):
            count = 0
            for w in range(words):
                if (word_key[w] < threshold) == (part == 0):
                    early[count] = w
                    count += 1
            if part == 0:
                _sort_by_key(word_key, early, count)
            else:
                order = np.argsort(word_key[early[:count]], kind="mergesort")
                early[:count] = early[:count][order]
            for i in range(count):
                if total >= limit:
                    break
                w = early[i]
                size = word_size[w]
                if total + size > limit:
                    continue
                for c in range(word_start[w], word_start[w] + size):
                    taken[c] = True
                total += size
            if total >= limit:
                break
        counts[r] = total
        k = 0
        first = 0
        for c in range(seq_len):
            if is_start[c]:
                first = c
            if taken[c]:
                u = draws[r, c] if per_piece else draws[r, first]
                positions[r, k] = c
                decisions[r, k] = MASKED if u < mask_below else (KEPT if u < keep_below else RANDOM)
                k += 1
    return unknown


def choose_whole_words(
    ids: np.ndarray,
    candidate: np.ndarray,
    is_continuation: np.ndarray,
    keys: np.ndarray,
    draws: np.ndarray,
    budget: np.ndarray,
    mask_token_prob: float,
    keep_token_prob: float,
    per_piece: bool,
    positions: np.ndarray,
    decisions: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Fills ``positions``/``decisions``/``counts`` (int32 (n, P) zeros, int8 (n, P) -1, int32
    (n,) zeros) for rows ``ids`` (n, L) whose ``candidate`` positions may be masked: ``keys``
    order the words (read at a word's first piece), ``draws`` choose the branch ([MASK] below
    ``mask_token_prob``, kept below that plus ``keep_token_prob``, else random); both (n, L)
    uniform draws. At most ``budget[r]`` positions per row. ValueError when a candidate id lies
    outside ``is_continuation`` (as numpy's indexing raised before)."""
    unknown = _choose(
        np.ascontiguousarray(ids, dtype=np.int32),
        np.ascontiguousarray(candidate, dtype=np.bool_),
        np.asarray(is_continuation, dtype=np.bool_),
        np.ascontiguousarray(keys, dtype=np.float64),
        np.ascontiguousarray(draws, dtype=np.float64),
        np.asarray(budget, dtype=np.int64),
        float(mask_token_prob),
        float(mask_token_prob + keep_token_prob),
        bool(per_piece),
        positions,
        decisions,
        counts,
    )
    refuse_ids_outside_vocabulary(unknown, len(is_continuation))
