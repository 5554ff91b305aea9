"""Whole-word masking's greedy choice, compiled: per row, words taken in key order while they fit
the prediction budget (a word that would overflow it is passed over), reported ascending with
their 80/10/10 branch (per word or per piece).

``transforms.masking._choose_whole_words`` makes the draws and the word sizes with numpy and
calls this for the per-row loop, which was Python; the choices are the same
(``tests/transforms/test_masking.py`` holds the loop it replaced as the reference).
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def take_words(order, n_words, sizes, starts, budget, branches, per_piece, positions, decisions,
               counts):  # fmt: skip
    """Fills ``positions``/``decisions``/``counts`` (zeroed / -1 / 0) row by row.

    ``order`` (n, L): each row's word starts by ascending key first (``n_words[r]`` of them);
    ``sizes`` (n, L): pieces of the word starting at a column; ``starts`` (n, L) bool: first
    pieces; ``budget`` (n,); ``branches`` (n, L) int8: the branch drawn at each column.
    """
    n, seq_len = starts.shape
    taken = np.zeros(seq_len, dtype=np.bool_)
    for r in range(n):
        limit = budget[r]
        total = 0
        taken[:] = False
        for i in range(n_words[r]):
            if total >= limit:
                break
            start = order[r, i]
            size = sizes[r, start]
            if total + size > limit:
                continue
            for c in range(start, start + size):
                taken[c] = True
            total += size
        counts[r] = total
        k = 0
        first = 0
        for c in range(seq_len):
            if starts[r, c]:
                first = c
            if taken[c]:
                positions[r, k] = c
                decisions[r, k] = branches[r, c] if per_piece else branches[r, first]
                k += 1


def take_words_into(
    order: np.ndarray,
    n_words: np.ndarray,
    sizes: np.ndarray,
    starts: np.ndarray,
    budget: np.ndarray,
    branches: np.ndarray,
    per_piece: bool,
    positions: np.ndarray,
    decisions: np.ndarray,
    counts: np.ndarray,
) -> None:
    """``take_words`` with its arguments in the kernel's types."""
    take_words(
        np.ascontiguousarray(order, dtype=np.int64),
        np.asarray(n_words, dtype=np.int64),
        np.ascontiguousarray(sizes, dtype=np.int64),
        np.ascontiguousarray(starts, dtype=np.bool_),
        np.asarray(budget, dtype=np.int64),
        np.ascontiguousarray(branches, dtype=np.int8),
        bool(per_piece),
        positions,
        decisions,
        counts,
    )
