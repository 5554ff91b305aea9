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
def _rows(
    tokens, spans, keys, branches, replacements, replacement_ids, budget, cls_id, sep_id, mask_id,
    seq_len, p, mask_prob, keep_prob, nsp, out, weights, decided,
):  # fmt: skip
    n = spans.shape[0]
    mask0 = seq_len
    segment0 = 2 * seq_len
    positions0 = 3 * seq_len
    labels0 = 3 * seq_len + p
    best_keys = np.empty(p, dtype=np.float64)
    chosen = np.empty(p, dtype=np.int64)
    for r in range(n):
        a0, la, b0, lb = spans[r, 0], spans[r, 1], spans[r, 2], spans[r, 3]
        length = la + lb + 3
        out[r, 0] = cls_id
        for c in range(la):
            out[r, 1 + c] = tokens[a0 + c]
        out[r, la + 1] = sep_id
        for c in range(lb):
            out[r, la + 2 + c] = tokens[b0 + c]
        out[r, length - 1] = sep_id
        for c in range(length):
            out[r, mask0 + c] = 1
        for c in range(la + 2, length):
            out[r, segment0 + c] = 1
        # The ``count`` candidates with the smallest keys (ties: the earlier position), kept
        # sorted by key in a small insertion buffer, then put in position order.
        m = 0
        for c in range(length):
            token = out[r, c]
            if token != cls_id and token != sep_id:
                m += 1
        count = min(budget[r], m)
        held = 0
        for c in range(length if count else 0):
            token = out[r, c]
            if token == cls_id or token == sep_id:  # noqa: SIM109 (compiled: no tuple)
                continue
            key = keys[r, c]
            if held == count and key >= best_keys[held - 1]:
                continue
            slot = held if held < count else count - 1
            while slot > 0 and best_keys[slot - 1] > key:
                best_keys[slot] = best_keys[slot - 1]
                chosen[slot] = chosen[slot - 1]
                slot -= 1
            best_keys[slot] = key
            chosen[slot] = c
            if held < count:
                held += 1
        for k in range(1, count):
            col = chosen[k]
            j = k
            while j > 0 and chosen[j - 1] > col:
                chosen[j] = chosen[j - 1]
                j -= 1
            chosen[j] = col
        for k in range(count):
            col = chosen[k]
            label = out[r, col]
            out[r, positions0 + k] = col
            out[r, labels0 + k] = label
            weights[r, k] = 1.0
            u = branches[r, k]
            if u < mask_prob:
                out[r, col] = mask_id
                decided[0] += 1
            elif u < mask_prob + keep_prob:
                decided[1] += 1
            else:
                out[r, col] = replacement_ids[replacements[r, k]]
                decided[2] += 1
        if nsp:
            out[r, 3 * seq_len + 2 * p] = spans[r, 4]


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
    spans = np.ascontiguousarray(spans, dtype=np.int64).reshape(-1, 5)
    n, p = len(spans), cfg.max_predictions_per_seq
    lengths = spans[:, 1] + spans[:, 3] + 3
    if n and lengths.max() > seq_len:
        raise ValueError(f"pair of {int(lengths.max())} tokens exceeds max_seq_length {seq_len}")
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
