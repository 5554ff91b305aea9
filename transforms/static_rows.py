"""Static-masked rows of a batch of pair spans, laid out as the records' int columns, in one
compiled kernel.

The same rows as ``transforms.instances.pack_spans`` followed by ``transforms.masking.mask_rows``
(token-level masking, not whole-word): the kernel takes that function's random draws, made by
numpy from the same generator in the same order (``draw_masks``), and makes the same choices:
per row the ``min(budget, candidates)`` candidate positions with the smallest keys (ties by
position), reported ascending, each [MASK] / kept / random by its branch draw. Its output is the
feature matrix ``transforms.framed_examples`` encodes, so no intermediate array is copied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from transforms.instances import checked_spans
from transforms.masking import MaskingConfig, prediction_budget


@dataclass(frozen=True)
class MaskDraws:
    """``mask_rows``' draws for ``n`` rows of ``L`` slots and ``P`` predictions, in the order it
    makes them: position keys (n, L), branch draws (n, P), replacement indexes (n, P)."""

    keys: np.ndarray
    branches: np.ndarray
    replacements: np.ndarray


def draw_masks(rng: np.random.Generator, n: int, seq_len: int, p: int, vocab: int) -> MaskDraws:
    """The draws ``mask_rows`` makes from ``rng`` for a batch (token-level masking)."""
    keys = rng.random((n, seq_len))
    branches = rng.random((n, p))
    replacements = rng.integers(0, vocab, size=(n, p))
    return MaskDraws(keys, branches, replacements)


@numba.njit(cache=True)
def _kth_smallest(values: np.ndarray, m: int, k: int) -> float:
    """The ``k``-th smallest (0-based) of ``values[:m]`` (Hoare's selection; reorders them)."""
    lo, hi = 0, m - 1
    while lo < hi:
        pivot = values[(lo + hi) >> 1]
        i, j = lo, hi
        while i <= j:
            while values[i] < pivot:
                i += 1
            while values[j] > pivot:
                j -= 1
            if i <= j:
                values[i], values[j] = values[j], values[i]
                i += 1
                j -= 1
        if k <= j:
            hi = j
        elif k >= i:
            lo = i
        else:
            return values[k]
    return values[k]


@numba.njit(cache=True)
def _rows(
    tokens, spans, keys, branches, replacements, replacement_ids, budget, cls_id, sep_id, mask_id,
    seq_len, p, mask_prob, keep_prob, nsp, out, weights, decided,
):  # fmt: skip
    n = spans.shape[0]
    mask0 = seq_len
    segment0 = 2 * seq_len
    positions0 = 3 * seq_len
    labels0 = 3 * seq_len + p
    # The ``count`` candidates with the smallest keys (ties: the earlier position) are found
    # without sorting: keys lie in [0, 1), so ``int(key * buckets)`` orders them coarsely; the
    # histogram of a row's candidate buckets names the bucket holding the count-th smallest key,
    # and an exact selection among that bucket's few keys gives the threshold.
    buckets = 2 * seq_len
    histogram = np.zeros(buckets + 1, dtype=np.int64)
    bucket = np.empty(seq_len, dtype=np.int64)
    edge_keys = np.empty(seq_len, dtype=np.float64)
    never = buckets + 1
    for r in range(n):
        a0, la, b0, lb = spans[r, 0], spans[r, 1], spans[r, 2], spans[r, 3]
        length = la + lb + 3
        row = out[r]
        row_keys = keys[r]
        row[0] = cls_id
        row[1 : 1 + la] = tokens[a0 : a0 + la]
        row[la + 1] = sep_id
        row[la + 2 : la + 2 + lb] = tokens[b0 : b0 + lb]
        row[length - 1] = sep_id
        row[mask0 : mask0 + length] = 1
        row[segment0 + la + 2 : segment0 + length] = 1
        if nsp:
            row[3 * seq_len + 2 * p] = spans[r, 4]
        histogram[:] = 0
        m = 0
        for c in range(length):
            token = row[c]
            if token != cls_id and token != sep_id:
                b = int(row_keys[c] * buckets)
                bucket[c] = b
                histogram[b] += 1
                m += 1
            else:
                bucket[c] = never
        count = min(budget[r], m)
        if count == 0:
            continue
        below = 0
        edge = 0
        while below + histogram[edge] < count:
            below += histogram[edge]
            edge += 1
        held = 0
        for c in range(length):
            if bucket[c] == edge:
                edge_keys[held] = row_keys[c]
                held += 1
        threshold = _kth_smallest(edge_keys, held, count - below - 1)
        ties = count - below  # keys equal to the threshold still to take, earliest first
        for i in range(held):
            if edge_keys[i] < threshold:
                ties -= 1
        k = 0
        for c in range(length):
            b = bucket[c]
            if b > edge:
                continue
            if b == edge:
                key = row_keys[c]
                if key > threshold:
                    continue
                if key == threshold:
                    if ties == 0:
                        continue
                    ties -= 1
            row[positions0 + k] = c
            row[labels0 + k] = row[c]
            weights[r, k] = 1.0
            u = branches[r, k]
            if u < mask_prob:
                row[c] = mask_id
                decided[0] += 1
            elif u < mask_prob + keep_prob:
                decided[1] += 1
            else:
                row[c] = replacement_ids[replacements[r, k]]
                decided[2] += 1
            k += 1


@dataclass(frozen=True)
class StaticRows:
    """The int columns of a batch of static-masked records, feature after feature (``ints``:
    int32 (n, 3L + 2P [+ 1]); input_ids, input_mask, segment_ids, masked_lm_positions,
    masked_lm_ids [, next_sentence_labels]), their ``masked_lm_weights`` float32 (n, P), and
    the rows' real tokens, predictions and [MASK] / kept / random counts."""

    ints: np.ndarray
    weights: np.ndarray
    lengths: np.ndarray
    predictions: int
    masked: int
    kept: int
    random: int

    def int_widths(self, seq_len: int, p: int) -> list[int]:
        """Columns of each int feature of ``ints``, in order."""
        widths = [seq_len, seq_len, seq_len, p, p]
        return widths + [1] if self.ints.shape[1] > sum(widths) else widths


def static_rows(
    tokens: np.ndarray,
    spans: np.ndarray,
    cfg: MaskingConfig,
    seq_len: int,
    *,
    cls_id: int,
    sep_id: int,
    mask_id: int,
    replacement_ids: np.ndarray,
    rng: np.random.Generator,
    nsp: bool,
) -> StaticRows:
    """Packs ``spans`` (int64 (n, 5) ``PairSpan`` rows over ``tokens``) as ``[CLS] A [SEP] B
    [SEP]`` and masks them as ``mask_rows`` does with ``whole_word_mask`` off."""
    if cfg.whole_word_mask:
        raise ValueError("static_rows masks token by token; whole-word masking uses mask_rows")
    spans, lengths = checked_spans(spans, seq_len)
    n, p = len(spans), cfg.max_predictions_per_seq
    draws = draw_masks(rng, n, seq_len, p, len(replacement_ids))
    budget = prediction_budget(lengths, cfg.masked_lm_prob, p)
    ints = np.zeros((n, 3 * seq_len + 2 * p + (1 if nsp else 0)), dtype=np.int32)
    weights = np.zeros((n, p), dtype=np.float32)
    decided = np.zeros(3, dtype=np.int64)
    _rows(
        np.asarray(tokens, dtype=np.int32), spans, draws.keys, draws.branches, draws.replacements,
        np.asarray(replacement_ids, dtype=np.int32), np.asarray(budget, dtype=np.int64),
        cls_id, sep_id, mask_id, seq_len, p, cfg.mask_token_prob, cfg.keep_token_prob, nsp,
        ints, weights, decided,
    )  # fmt: skip
    masked, kept, random = decided.tolist()
    return StaticRows(ints, weights, lengths, masked + kept + random, masked, kept, random)
