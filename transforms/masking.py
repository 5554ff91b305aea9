"""Masked-LM predictions, precomputed as google-research/bert does, vectorized over a batch.

Per row of ``n`` real tokens: ``min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))``
positions (never ``[CLS]``, ``[SEP]`` or padding) are chosen uniformly; each becomes ``[MASK]``
with probability 0.8, stays unchanged with 0.1, and becomes a random token with 0.1. Positions
are reported ascending; unused prediction slots are 0 with weight 0.0.

Whole-word masking keeps ``##`` pieces with their word: words are shuffled and taken greedily
while they fit the budget (a word that would overflow it is passed over, as in the reference).
The 80/10/10 choice is made once per word by default (the reference makes it per piece:
``per_piece_decisions=True``), and a word never spans the [SEP] between A and B.

Differences from the reference, both with a switch back: random replacement tokens come from
``replacement_ids`` (by default the vocabulary minus bracketed special and ``[unusedN]`` tokens;
the caller decides), and the whole-word choice is per word.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def prediction_budget(n_tokens, masked_lm_prob: float, max_predictions_per_seq: int | None = None):
    """Masked-LM predictions for a row of ``n_tokens`` real tokens (``[CLS]`` and ``[SEP]``
    included), as the reference: ``min(P, max(1, round(n * masked_lm_prob)))``, rounding half to
    even like Python's ``round``; ``P`` None: no cap. An int for an int, an int64 array for an
    array of lengths. The one place this formula is written (the trainer's dynamic masking
    repeats it in TensorFlow)."""
    want = np.maximum(1, np.round(np.asarray(n_tokens, dtype=np.float64) * masked_lm_prob))
    if max_predictions_per_seq is not None:
        want = np.minimum(max_predictions_per_seq, want)
    want = want.astype(np.int64)
    return int(want) if want.ndim == 0 else want


@dataclass(frozen=True)
class MaskingConfig:
    """Masking parameters; the three branch probabilities must sum to 1."""

    masked_lm_prob: float = 0.15
    max_predictions_per_seq: int = 20
    whole_word_mask: bool = False
    per_piece_decisions: bool = False
    mask_token_prob: float = 0.8
    keep_token_prob: float = 0.1
    random_token_prob: float = 0.1

    def __post_init__(self) -> None:
        if not 0.0 <= self.masked_lm_prob <= 1.0:
            raise ValueError(f"masked_lm_prob must lie in [0, 1], got {self.masked_lm_prob}")
        if self.max_predictions_per_seq < 1:
            raise ValueError(
                f"max_predictions_per_seq must be at least 1, got {self.max_predictions_per_seq}"
            )
        total = self.mask_token_prob + self.keep_token_prob + self.random_token_prob
        if (
            abs(total - 1.0) > 1e-9
            or min(self.mask_token_prob, self.keep_token_prob, self.random_token_prob) < 0
        ):
            raise ValueError("mask/keep/random token probabilities must be >= 0 and sum to 1")

    def num_to_predict(self, n_tokens: int) -> int:
        """Predictions for a row of ``n_tokens`` tokens ([CLS] and [SEP] included), as the reference."""
        return prediction_budget(n_tokens, self.masked_lm_prob, self.max_predictions_per_seq)


@dataclass(frozen=True)
class MaskedRows:
    """Masked rows and their labels.

    ``input_ids`` int32 (N, L) with the masks applied; ``positions`` and ``label_ids`` int32
    (N, P) zero-padded, positions ascending; ``weights`` float32 (N, P): 1.0 on used slots;
    ``counts`` int32 (N,) predictions per row; ``decisions`` int8 (N, P): 0 = [MASK],
    1 = kept, 2 = random token, -1 = unused slot.
    """

    input_ids: np.ndarray
    positions: np.ndarray
    label_ids: np.ndarray
    weights: np.ndarray
    counts: np.ndarray
    decisions: np.ndarray


MASKED, KEPT, RANDOM = 0, 1, 2


def _decide(u: np.ndarray, cfg: MaskingConfig) -> np.ndarray:
    """Branch per uniform draw: [MASK] below p_mask, kept up to p_mask + p_keep, else random."""
    out = np.full(u.shape, RANDOM, dtype=np.int8)
    out[u < cfg.mask_token_prob + cfg.keep_token_prob] = KEPT
    out[u < cfg.mask_token_prob] = MASKED
    return out


def mask_rows(
    input_ids: np.ndarray,
    lengths: np.ndarray,
    cfg: MaskingConfig,
    *,
    cls_id: int,
    sep_id: int,
    mask_id: int,
    replacement_ids: np.ndarray,
    is_continuation: np.ndarray | None,
    rng: np.random.Generator,
) -> MaskedRows:
    """Chooses and applies masked-LM predictions for every row (see module docstring).

    ``is_continuation`` (bool per vocab id) is required for whole-word masking.
    """
    ids = np.asarray(input_ids, dtype=np.int32)
    n, seq_len = ids.shape
    p = cfg.max_predictions_per_seq
    in_row = np.arange(seq_len)[None, :] < np.asarray(lengths)[:, None]
    candidate = in_row & (ids != cls_id) & (ids != sep_id)
    budget = prediction_budget(lengths, cfg.masked_lm_prob, p).astype(np.int32)

    positions = np.zeros((n, p), dtype=np.int32)
    decisions = np.full((n, p), -1, dtype=np.int8)
    counts = np.zeros(n, dtype=np.int32)
    if cfg.whole_word_mask:
        if is_continuation is None:
            raise ValueError("whole-word masking needs the vocabulary's continuation table")
        _choose_whole_words(
            ids, candidate, budget, cfg, is_continuation, rng, positions, decisions, counts
        )
    else:
        keys = rng.random((n, seq_len))
        keys[~candidate] = 2.0
        order = smallest_per_row(keys, min(p, seq_len))
        counts = np.minimum(budget, candidate.sum(axis=1)).astype(np.int32)
        slot = np.arange(order.shape[1])[None, :]
        used = slot < counts[:, None]
        chosen = np.where(used, order, seq_len)  # unused slots sort last
        chosen.sort(axis=1)
        positions[:, : order.shape[1]] = np.where(used, chosen, 0)
        u = rng.random((n, p))
        used_p = np.arange(p)[None, :] < counts[:, None]
        decisions = np.where(used_p, _decide(u, cfg), -1).astype(np.int8)

    used_p = np.arange(p)[None, :] < counts[:, None]
    rows = np.arange(n)[:, None]
    label_ids = np.where(used_p, ids[rows, positions], 0).astype(np.int32)
    random_tokens = replacement_ids[rng.integers(0, len(replacement_ids), size=(n, p))]
    out = ids.copy()
    replaced = np.where(
        decisions == MASKED, mask_id, np.where(decisions == RANDOM, random_tokens, label_ids)
    ).astype(np.int32)
    r_idx, c_idx = np.nonzero(used_p)
    out[r_idx, positions[r_idx, c_idx]] = replaced[r_idx, c_idx]
    weights = used_p.astype(np.float32)
    return MaskedRows(out, positions, label_ids, weights, counts, decisions)


def smallest_per_row(keys: np.ndarray, k: int) -> np.ndarray:
    """Column indexes of each row's ``k`` smallest keys, in ascending key order (= the first ``k``
    columns of a full argsort, found by partial selection)."""
    if k >= keys.shape[1]:
        return np.argsort(keys, axis=1, kind="stable")
    part = np.argpartition(keys, k - 1, axis=1)[:, :k]
    within = np.argsort(np.take_along_axis(keys, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, within, axis=1)


def word_starts(ids: np.ndarray, candidate: np.ndarray, is_continuation: np.ndarray) -> np.ndarray:
    """bool (N, L): True at the first piece of each candidate word: a candidate ``##`` piece
    right after a candidate joins the word before it, so a word never crosses [SEP]."""
    previous = np.zeros_like(candidate)
    previous[:, 1:] = candidate[:, :-1]
    return candidate & ~(previous & is_continuation[ids])


def _choose_whole_words(
    ids: np.ndarray,
    candidate: np.ndarray,
    budget: np.ndarray,
    cfg: MaskingConfig,
    is_continuation: np.ndarray,
    rng: np.random.Generator,
    positions: np.ndarray,
    decisions: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Fills ``positions``/``decisions``/``counts`` in place with whole-word choices.

    Words get random keys (one draw per position, read at the word's first piece) and are taken
    in key order while they fit the budget, a word that would overflow it being passed over.
    The branch draw is read at the word's first piece (one choice per word) or at each piece
    (``per_piece_decisions``). Random draws are made for the whole batch at once.
    """
    n, seq_len = ids.shape
    keys = rng.random((n, seq_len))
    draws = rng.random((n, seq_len))
    from transforms.whole_word_choice import choose_whole_words  # compiled: loaded on first use

    choose_whole_words(
        ids, candidate, is_continuation, keys, draws, budget, cfg.mask_token_prob,
        cfg.keep_token_prob, cfg.per_piece_decisions, positions, decisions, counts,
    )  # fmt: skip
