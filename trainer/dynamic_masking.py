"""Masked-LM masks drawn in ``tf.data`` for unmasked shards (``bertprep instances --masking
dynamic``): a new mask every step, the same rules as the precomputed path (``transforms.masking``).

Per row of ``n`` real tokens: ``min(max_predictions_per_seq, max(1, round(n * masked_lm_prob)))``
positions, never ``[CLS]``, ``[SEP]`` or padding; each becomes ``[MASK]`` with probability 0.8,
stays with 0.1, becomes a random token from the replacement pool (the vocabulary minus bracketed
specials and ``[unusedN]``, as recorded in the manifest) with 0.1. Positions ascend; unused slots
are 0 with weight 0.0. With whole-word masking the ``word_starts`` flags of the record group
``##`` pieces into words; words are taken in random order while the budget holds, the 80/10/10
choice is made once per word.

**Determinism.** Every draw is a counter-based hash (splitmix64) of (seed, step, a fingerprint of
the row's ``input_ids``, position, stream): the mask of an example depends only on the seed, the
training step and the example itself, not on the row it lands in, the replica, the host count or
what ran before. Resuming at step N therefore draws the masks an uninterrupted run draws at step
N, and each epoch (a later step) draws a new mask.

**Packed rows** (``mask_packed_batch``, what ``mask_batch`` does for rows with
``instance_ids``): each instance is taken out into a row of its own, masked by the rule above
(its own budget from its own length, its own key from its own token ids) and put back; the
row's prediction slots (``packed_slots``: ``floor(L · masked_lm_prob) + K``, enough for any K
instances) hold every instance's predictions at their row positions, ascending. An instance
draws the same masks packed as unpacked at the same step.

**Differences from ``transforms.masking``** (the static path). (1) Whole words are taken in key
order up to the first word that would overflow the budget; the static path passes over such a word
and tries smaller ones, so with whole-word masking a row can get a few predictions fewer here.
(2) The draws come from a different generator, so the masks are not the static path's masks.

**Why not keras-hub's ``MaskedLMMaskGenerator``.** It is built on ``tf_text.mask_language_model``
with ``tf.random`` stateful ops: its draws depend on the op's hidden state (call order, the
number of ``tf.data`` threads), not on (seed, step, example), so a resumed run cannot reproduce
them. Its selection rate is ``mask_selection_rate`` per token with ``mask_selection_length`` as a
cap, and it has no ``max(1, round(n * p))`` budget. Its random replacement draws from
``[0, vocabulary_size)`` (specials and ``[unused]`` included) and ``unselectable_token_ids`` only
keeps tokens from being *selected*; word grouping needs a ragged words dimension built from a
tokenizer, which unmasked shards (token ids only) do not carry. It meets the 80/10/10 split and
the special-token exclusion, not the rest, hence this module.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tensorflow as tf

from transforms.features import packed_prediction_slots

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
STREAM_SELECT, STREAM_BRANCH, STREAM_TOKEN = 0, 1, 2
_STREAMS = 4


@dataclass(frozen=True)
class DynamicMasking:
    """Everything the trainer needs to mask unmasked shards (the manifest's ``dynamic_masking``
    section, plus the trainer's seed)."""

    vocab_size: int
    cls_id: int
    sep_id: int
    mask_id: int
    replacement_ids: tuple[int, ...]
    max_predictions_per_seq: int
    masked_lm_prob: float = 0.15
    whole_word_mask: bool = False
    mask_token_prob: float = 0.8
    keep_token_prob: float = 0.1
    random_token_prob: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.replacement_ids:
            raise ValueError("the random-replacement pool is empty")
        total = self.mask_token_prob + self.keep_token_prob + self.random_token_prob
        if abs(total - 1.0) > 1e-6:
            raise ValueError("mask/keep/random token probabilities must sum to 1")

    @classmethod
    def from_manifest(cls, spec: dict, seed: int = 0) -> DynamicMasking:
        """From a manifest's ``dynamic_masking`` section (``pipeline.jobs.instances``)."""
        excluded = np.zeros(int(spec["vocab_size"]), dtype=bool)
        for start, end in spec.get("replacement_excluded_ranges", []):
            excluded[int(start) : int(end)] = True
        special = spec["special_ids"]
        return cls(
            vocab_size=int(spec["vocab_size"]),
            cls_id=int(special["cls"]),
            sep_id=int(special["sep"]),
            mask_id=int(special["mask"]),
            replacement_ids=tuple(np.flatnonzero(~excluded).tolist()),
            max_predictions_per_seq=int(spec["max_predictions_per_seq"]),
            masked_lm_prob=float(spec["masked_lm_prob"]),
            whole_word_mask=bool(spec.get("whole_word_mask", False)),
            mask_token_prob=float(spec.get("mask_token_prob", 0.8)),
            keep_token_prob=float(spec.get("keep_token_prob", 0.1)),
            random_token_prob=float(spec.get("random_token_prob", 0.1)),
            seed=seed,
        )


def _u64(value: int) -> tf.Tensor:
    return tf.constant(value & 0xFFFFFFFFFFFFFFFF, tf.uint64)


def _mix(z: tf.Tensor) -> tf.Tensor:
    """splitmix64's finalizer: a bijective avalanche of 64-bit words."""
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(30))) * _u64(_M1)
    z = tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(27))) * _u64(_M2)
    return tf.bitwise.bitwise_xor(z, tf.bitwise.right_shift(z, _u64(31)))


def row_keys(input_ids: tf.Tensor, seed: int, step: tf.Tensor) -> tf.Tensor:
    """uint64 (B,): one key per row from (seed, step, the row's token ids)."""
    fingerprint = tf.bitcast(tf.fingerprint(tf.cast(input_ids, tf.int64)), tf.uint64)
    xor = tf.bitwise.bitwise_xor
    base = _mix(xor(_u64(seed), _mix(tf.cast(step, tf.uint64) + _u64(_GOLDEN))))
    return _mix(xor(base, fingerprint))


def uniforms(keys: tf.Tensor, length: int, stream: int) -> tf.Tensor:
    """float32 (B, length) in [0, 1): the ``stream``'s draw at each position of each row."""
    counter = tf.cast(tf.range(length, dtype=tf.int64), tf.uint64) * _u64(_STREAMS) + _u64(
        stream + 1
    )
    z = _mix(keys[:, None] + counter[None, :] * _u64(_GOLDEN))
    return tf.cast(tf.bitwise.right_shift(z, _u64(40)), tf.float32) * (1.0 / (1 << 24))


def mask_batch(batch: dict[str, tf.Tensor], step: tf.Tensor, spec: DynamicMasking) -> dict:
    """A parsed batch of unmasked records → the same batch with ``input_ids`` masked and
    ``masked_lm_positions``/``masked_lm_ids`` (int32) and ``masked_lm_weights`` (float32) added
    (see the module docstring). ``step`` is the training step the batch is for. Packed rows
    (with ``instance_ids``): ``mask_packed_batch``."""
    if "instance_ids" in batch:
        return mask_packed_batch(batch, step, spec)
    masked_ids, positions, labels, weights = _mask_rows(
        tf.cast(batch["input_ids"], tf.int32),
        tf.reduce_sum(tf.cast(batch["input_mask"], tf.int32), axis=1),
        batch.get("word_starts"),
        step,
        spec,
    )
    out = dict(batch)
    out["input_ids"] = masked_ids
    out["masked_lm_positions"] = positions
    out["masked_lm_ids"] = labels
    out["masked_lm_weights"] = weights
    return out


def packed_slots(spec: DynamicMasking, seq_len: int, max_instances: int) -> int:
    """Prediction slots of a packed row masked by ``spec``: enough for any ``max_instances``
    instances in ``seq_len`` tokens (``transforms.features.packed_prediction_slots``)."""
    return packed_prediction_slots(
        seq_len, spec.max_predictions_per_seq, max_instances, spec.masked_lm_prob
    )


def mask_packed_batch(batch: dict[str, tf.Tensor], step: tf.Tensor, spec: DynamicMasking) -> dict:
    """``mask_batch`` for packed rows (``transforms.features.PACKED_UNMASKED_FEATURES``): each
    instance is masked on its own tokens exactly as it is unpacked — its tokens are taken out
    into a row of their own (zero-padded to the row length), masked by the unpacked rule (its
    own budget ``min(P, max(1, round(n_i * masked_lm_prob)))``, its own key from its own token
    ids, draws indexed by position within the instance) and put back. An instance's masks
    therefore depend on (seed, step, the instance) only, not on its row-mates, and equal the
    masks it draws unpacked at the same step. The row's ``packed_slots`` prediction slots hold
    the instances' predictions at their row positions, ascending, unused slots 0 with weight 0."""
    ids = tf.cast(batch["input_ids"], tf.int32)
    seq_len = ids.shape[1]
    instance_ids = tf.cast(batch["instance_ids"], tf.int32)
    cls = tf.cast(batch["cls_positions"], tf.int32)
    k = cls.shape[1]
    b = tf.shape(ids)[0]
    p = spec.max_predictions_per_seq
    m = packed_slots(spec, seq_len, k)
    slot_ids = tf.range(1, k + 1)
    lengths = tf.reduce_sum(
        tf.cast(tf.equal(instance_ids[:, None, :], slot_ids[None, :, None]), tf.int32), axis=2
    )  # (B, K)
    col = tf.range(seq_len)
    inside = col[None, None, :] < lengths[:, :, None]  # (B, K, L)
    src = tf.minimum(cls[:, :, None] + col[None, None, :], seq_len - 1)

    def take(feature):
        values = tf.gather(tf.cast(feature, tf.int32), src, batch_dims=1)  # (B, K, L)
        return tf.reshape(tf.where(inside, values, 0), [-1, seq_len])

    starts = take(batch["word_starts"]) if "word_starts" in batch else None
    masked, positions, labels, weights = _mask_rows(
        take(ids), tf.reshape(lengths, [-1]), starts, step, spec
    )
    # Back into the rows: token j of instance s is token position_ids[j] of its own row.
    owner = tf.maximum(instance_ids - 1, 0)
    flat_row = tf.range(b)[:, None] * k + owner
    within = tf.cast(batch["position_ids"], tf.int32)
    back = tf.gather_nd(masked, tf.stack([flat_row, tf.minimum(within, seq_len - 1)], axis=-1))
    masked_ids = tf.where(instance_ids > 0, back, ids)
    # Prediction slots: each instance's (ascending) at its row offset, instances in row order,
    # then the used ones moved to the front.
    positions = tf.reshape(positions, [-1, k, p]) + cls[:, :, None]
    positions = tf.reshape(positions, [-1, k * p])
    labels = tf.reshape(labels, [-1, k * p])
    used = tf.reshape(weights, [-1, k * p]) > 0
    order_key = tf.where(used, positions, seq_len + tf.range(k * p)[None, :])
    pick = tf.math.top_k(-order_key, k=m, sorted=True).indices
    kept = tf.gather(used, pick, batch_dims=1)
    out = dict(batch)
    out["input_ids"] = masked_ids
    out["masked_lm_positions"] = tf.where(kept, tf.gather(positions, pick, batch_dims=1), 0)
    out["masked_lm_ids"] = tf.where(kept, tf.gather(labels, pick, batch_dims=1), 0)
    out["masked_lm_weights"] = tf.cast(kept, tf.float32)
    return out


def _mask_rows(ids, lengths, word_starts, step, spec: DynamicMasking):
    """The unpacked rule on rows of ``ids`` (B, L) whose first ``lengths`` (B,) tokens are
    real: (masked ids, positions, label ids (B, P) int32, weights (B, P) float32)."""
    seq_len = ids.shape[1]
    p = spec.max_predictions_per_seq
    in_row = tf.range(seq_len)[None, :] < lengths[:, None]
    candidate = in_row & tf.not_equal(ids, spec.cls_id) & tf.not_equal(ids, spec.sep_id)
    if spec.whole_word_mask:
        starts = candidate & tf.not_equal(tf.cast(word_starts, tf.int32), 0)
        # A candidate right after a non-candidate always starts a word (flags or not).
        previous = tf.pad(candidate[:, :-1], [[0, 0], [1, 0]])
        starts = starts | (candidate & ~previous)
    else:
        starts = candidate
    budget = tf.minimum(
        p,
        tf.maximum(
            1, tf.cast(tf.round(tf.cast(lengths, tf.float64) * spec.masked_lm_prob), tf.int32)
        ),
    )

    keys = row_keys(ids, spec.seed, step)
    select = uniforms(keys, seq_len, STREAM_SELECT)
    branch = uniforms(keys, seq_len, STREAM_BRANCH)
    token_u = uniforms(keys, seq_len, STREAM_TOKEN)

    # Words: index of each position's word (-1 before the first), each word's start and size.
    word_index = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
    batch_size = tf.shape(ids)[0]
    row_base = tf.range(batch_size)[:, None] * seq_len
    segment = tf.where(candidate, row_base + tf.maximum(word_index, 0), batch_size * seq_len)
    n_segments = batch_size * seq_len + 1
    sizes_by_word = tf.math.unsorted_segment_sum(tf.cast(candidate, tf.int32), segment, n_segments)
    positions_grid = tf.broadcast_to(tf.range(seq_len)[None, :], tf.shape(ids))
    start_of_word = tf.math.unsorted_segment_min(positions_grid, segment, n_segments)

    # Words in random key order; take them while the running total stays within the budget.
    word_keys = tf.where(starts, select, 2.0)
    order = tf.argsort(word_keys, axis=1, stable=True)
    sorted_is_start = tf.gather(starts, order, batch_dims=1)
    own_segment = row_base + tf.maximum(word_index, 0)
    sorted_sizes = tf.where(
        sorted_is_start, tf.gather(tf.gather(sizes_by_word, own_segment), order, batch_dims=1), 0
    )
    running = tf.cumsum(sorted_sizes, axis=1)
    taken_sorted = sorted_is_start & (running <= budget[:, None])
    inverse = tf.argsort(order, axis=1, stable=True)
    taken_start = tf.gather(taken_sorted, inverse, batch_dims=1)
    taken_word = tf.math.unsorted_segment_max(
        tf.cast(taken_start & starts, tf.int32), segment, n_segments
    )
    taken = candidate & tf.equal(tf.gather(taken_word, segment), 1)

    # 80/10/10, drawn once per word (at its first piece).
    word_first = tf.gather(start_of_word, segment)
    word_branch = tf.gather(branch, tf.clip_by_value(word_first, 0, seq_len - 1), batch_dims=1)
    is_mask = word_branch < spec.mask_token_prob
    is_random = word_branch >= spec.mask_token_prob + spec.keep_token_prob
    pool = tf.constant(spec.replacement_ids, tf.int32)
    pick = tf.minimum(
        tf.cast(token_u * len(spec.replacement_ids), tf.int32), len(spec.replacement_ids) - 1
    )
    random_tokens = tf.gather(pool, pick)
    replaced = tf.where(is_mask, spec.mask_id, tf.where(is_random, random_tokens, ids))
    masked_ids = tf.where(taken, replaced, ids)

    # Positions ascending in the first slots, zero-padded.
    counts = tf.reduce_sum(tf.cast(taken, tf.int32), axis=1)
    order_key = tf.where(taken, tf.range(seq_len)[None, :], seq_len + tf.range(seq_len)[None, :])
    chosen = -tf.math.top_k(-order_key, k=p, sorted=True).values
    used = tf.range(p)[None, :] < counts[:, None]
    positions = tf.where(used, chosen, 0)
    labels = tf.where(used, tf.gather(ids, positions, batch_dims=1), 0)
    return masked_ids, positions, labels, tf.cast(used, tf.float32)
