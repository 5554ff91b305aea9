"""From a bucket of tokenized documents to encoded pretraining records, one dupe pass at a time.

Randomness is keyed, never global: pass ``d`` over bucket ``b`` draws pairs from
``(seed, "pairs", b, d)``, masks from ``(seed, "masks", b, d)`` and the records' shuffle keys from
``(seed, "order", b, d)``. The output therefore depends only on the bucket's documents (in key
order), the settings and the seed — not on which worker runs it or when.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from transforms.example_encoding import encode_examples
from transforms.features import (
    DOC_SENTENCES,
    DYNAMIC,
    SENTENCE_PAIRS,
    STATIC,
    check_kind,
    has_nsp,
)
from transforms.instances import (
    BucketLayout,
    Document,
    PackConfig,
    PackedPairs,
    PairConfig,
    PairSpan,
    SentencePair,
    Window,
    create_packed_rows,
    create_pair_spans,
    pack_pairs,
    pack_rows,
    pack_spans,
)
from transforms.masking import (
    KEPT,
    MASKED,
    RANDOM,
    MaskingConfig,
    mask_rows,
    prediction_budget,
    word_starts,
)
from transforms.seeding import DEFAULT_SEED, numpy_rng, python_rng
from transforms.special_ids import SpecialIds


@dataclass(frozen=True)
class InstanceSettings:
    """Everything that decides the records of a bucket, besides its documents."""

    pairs: PairConfig
    masking: MaskingConfig
    dupe_factor: int = 10
    seed: int = DEFAULT_SEED
    batch_size: int = 2048
    masking_kind: str = STATIC
    """``static`` (masks in the record) or ``dynamic`` (unmasked records, masked by the trainer)."""
    input_mode: str = SENTENCE_PAIRS
    """``sentence-pairs``, ``full-sentences`` or ``doc-sentences`` (``transforms.features``)."""

    def __post_init__(self) -> None:
        check_kind(self.masking_kind, self.input_mode)
        if self.dupe_factor < 1:
            raise ValueError(f"dupe_factor must be at least 1, got {self.dupe_factor}")
        if self.masking.max_predictions_per_seq > self.pairs.max_seq_length:
            raise ValueError("max_predictions_per_seq cannot exceed max_seq_length")


@dataclass(frozen=True)
class TokenTables:
    """The vocabulary facts masking needs: special ids, random-replacement ids, ``##`` table."""

    ids: SpecialIds
    replacement_ids: np.ndarray
    is_continuation: np.ndarray

    @property
    def cls_id(self) -> int:
        return self.ids.cls_id

    @property
    def sep_id(self) -> int:
        return self.ids.sep_id

    @property
    def mask_id(self) -> int:
        return self.ids.mask_id


@dataclass(frozen=True)
class RecordBatch:
    """Encoded ``tf.train.Example`` records of one bucket, with a 63-bit shuffle key each."""

    bucket: int
    records: list[bytes]
    order_keys: list[int]


def encode_pairs(
    pairs: Sequence[SentencePair],
    settings: InstanceSettings,
    tables: TokenTables,
    rng: np.random.Generator,
    stats: Counter[str],
) -> list[bytes]:
    """Packs, masks and serializes ``pairs`` (token lists) into records (see ``encode_packed``)."""
    packed = pack_pairs(pairs, tables.cls_id, tables.sep_id, settings.pairs.max_seq_length)
    return encode_packed(packed, settings, tables, rng, stats)


def encode_packed(
    packed: PackedPairs,
    settings: InstanceSettings,
    tables: TokenTables,
    rng: np.random.Generator,
    stats: Counter[str],
) -> list[bytes]:
    """Masks and serializes packed rows into records following the feature contract."""
    seq_len = settings.pairs.max_seq_length
    masked = mask_rows(
        packed.input_ids,
        packed.lengths,
        settings.masking,
        cls_id=tables.cls_id,
        sep_id=tables.sep_id,
        mask_id=tables.mask_id,
        replacement_ids=tables.replacement_ids,
        is_continuation=tables.is_continuation,
        rng=rng,
    )
    input_mask = (np.arange(seq_len)[None, :] < packed.lengths[:, None]).astype(np.int8)
    if settings.masking_kind == DYNAMIC:
        return _encode_unmasked(packed, input_mask, settings, tables, stats)
    stats["instances"] += len(packed)
    stats["instance_tokens"] += int(packed.lengths.sum())
    stats["masked_lm_predictions"] += int(masked.counts.sum())
    stats["masked_lm_masked"] += int((masked.decisions == MASKED).sum())
    stats["masked_lm_kept"] += int((masked.decisions == KEPT).sum())
    stats["masked_lm_random"] += int((masked.decisions == RANDOM).sum())
    stats["padding_tokens"] += int(len(packed) * seq_len - packed.lengths.sum())
    ints = {
        "input_ids": masked.input_ids,
        "input_mask": input_mask,
        "segment_ids": packed.segment_ids,
        "masked_lm_positions": masked.positions,
        "masked_lm_ids": masked.label_ids,
    }
    if has_nsp(settings.input_mode):
        ints["next_sentence_labels"] = packed.next_sentence_labels[:, None]
    return encode_examples(ints, {"masked_lm_weights": masked.weights})


def _encode_unmasked(
    packed: PackedPairs,
    input_mask: np.ndarray,
    settings: InstanceSettings,
    tables: TokenTables,
    stats: Counter[str],
) -> list[bytes]:
    """Serializes packed rows unmasked (``transforms.features.UNMASKED_FEATURES``), with the
    word-start flags whole-word masking needs. ``stats`` gains ``expected_masked_lm_predictions``:
    the token-level budget ``min(P, max(1, round(n * masked_lm_prob)))`` summed over the rows."""
    seq_len = settings.pairs.max_seq_length
    ids = packed.input_ids
    candidate = (input_mask > 0) & (ids != tables.cls_id) & (ids != tables.sep_id)
    starts = word_starts(ids, candidate, tables.is_continuation).astype(np.int8)
    cfg = settings.masking
    budget = prediction_budget(packed.lengths, cfg.masked_lm_prob, cfg.max_predictions_per_seq)
    stats["instances"] += len(packed)
    stats["instance_tokens"] += int(packed.lengths.sum())
    stats["expected_masked_lm_predictions"] += int(budget.sum())
    stats["padding_tokens"] += int(len(packed) * seq_len - packed.lengths.sum())
    ints = {
        "input_ids": ids,
        "input_mask": input_mask,
        "segment_ids": packed.segment_ids,
        "word_starts": starts,
    }
    if has_nsp(settings.input_mode):
        ints["next_sentence_labels"] = packed.next_sentence_labels[:, None]
    return encode_examples(ints, {})


def record_batches(
    documents: BucketLayout | Sequence[Document],
    bucket: int,
    dupe: int,
    settings: InstanceSettings,
    tables: TokenTables,
    stats: Counter[str],
) -> Iterator[RecordBatch]:
    """Yields dupe pass ``dupe``'s records for one bucket, in batches of ``settings.batch_size``.

    ``documents`` (a ``BucketLayout``, or token-list documents) must be in a deterministic order
    (the pipeline sorts them by key); each holds at least one non-empty sentence. Passes are
    independent, so they can run anywhere, in any order.
    """
    layout = (
        documents if isinstance(documents, BucketLayout) else BucketLayout.from_documents(documents)
    )
    pair_rng = python_rng(settings.seed, "pairs", bucket, dupe)
    mask_rng = numpy_rng(settings.seed, "masks", bucket, dupe)
    order_rng = numpy_rng(settings.seed, "order", bucket, dupe)

    def encode(spans: list[PairSpan]) -> RecordBatch:
        packed = pack_spans(
            layout.tokens,
            np.asarray(spans, dtype=np.int64),
            tables.cls_id,
            tables.sep_id,
            settings.pairs.max_seq_length,
        )
        records = encode_packed(packed, settings, tables, mask_rng, stats)
        keys = order_rng.integers(0, 2**63 - 1, size=len(records), dtype=np.int64).tolist()
        return RecordBatch(bucket, records, keys)

    def encode_rows(rows: list[list[Window]]) -> RecordBatch:
        packed = pack_rows(
            layout.tokens, rows, tables.cls_id, tables.sep_id, settings.pairs.max_seq_length
        )
        records = encode_packed(packed, settings, tables, mask_rng, stats)
        keys = order_rng.integers(0, 2**63 - 1, size=len(records), dtype=np.int64).tolist()
        return RecordBatch(bucket, records, keys)

    size = settings.batch_size
    if settings.input_mode != SENTENCE_PAIRS:
        pack = PackConfig(
            settings.pairs.max_seq_length, cross_documents=settings.input_mode != DOC_SENTENCES
        )
        rows: list[list[Window]] = []
        for row in create_packed_rows(layout, pack, stats):
            rows.append(row)
            if len(rows) >= size:
                yield encode_rows(rows)
                rows = []
        if rows:
            yield encode_rows(rows)
        return

    pending: list[PairSpan] = []
    for index in range(len(layout)):
        pending.extend(create_pair_spans(layout, index, settings.pairs, pair_rng, stats))
        if len(pending) >= size:
            yield encode(pending[:size])
            pending = pending[size:]
    while pending:
        yield encode(pending[:size])
        pending = pending[size:]
