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

from transforms.features import (
    DOC_SENTENCES,
    DYNAMIC,
    SENTENCE_PAIRS,
    STATIC,
    UNMASKED_FEATURES,
    check_kind,
    check_packable,
    has_nsp,
    packed_prediction_slots,
)
from transforms.framed_examples import ColumnEncoder, FramedRecords, frame_columns, frame_examples
from transforms.instance_packing import RowPlan, packed_columns, plan_rows
from transforms.instances import (
    BucketLayout,
    Document,
    PackConfig,
    PackedPairs,
    PairConfig,
    SentencePair,
    Window,
    create_packed_rows,
    pack_pairs,
    pack_rows,
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
from transforms.pair_rows import pack_span_rows
from transforms.pair_spans import bucket_pair_spans
from transforms.seeding import DEFAULT_SEED, numpy_rng, python_rng
from transforms.special_ids import SpecialIds
from transforms.static_rows import static_rows
from transforms.unmasked_rows import unmasked_rows


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
    pack_instances: int = 0
    """Up to this many instances per row (``transforms.instance_packing``, the packed layout of
    ``transforms.features.PACKED_FEATURES``); 0: one instance per row, padded."""

    @property
    def prediction_slots_per_row(self) -> int:
        """Prediction slots of a packed row (``transforms.features.packed_prediction_slots``)."""
        return packed_prediction_slots(
            self.pairs.max_seq_length,
            self.masking.max_predictions_per_seq,
            self.pack_instances,
            self.masking.masked_lm_prob,
        )

    def __post_init__(self) -> None:
        check_kind(self.masking_kind, self.input_mode)
        if self.pack_instances < 0:
            raise ValueError(f"pack_instances must be 0 or more, got {self.pack_instances}")
        if self.pack_instances:
            check_packable(self.input_mode)
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
    """Encoded ``tf.train.Example`` records of one bucket, TFRecord-framed end to end, with a
    63-bit shuffle key each."""

    bucket: int
    framed: FramedRecords
    order_keys: list[int]

    @property
    def records(self) -> list[bytes]:
        """Each record's serialized ``tf.train.Example``."""
        return self.framed.payloads()


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
    return frame_packed(packed, settings, tables, rng, stats).payloads()


def frame_packed(
    packed: PackedPairs,
    settings: InstanceSettings,
    tables: TokenTables,
    rng: np.random.Generator,
    stats: Counter[str],
    encoder: ColumnEncoder = frame_columns,
) -> FramedRecords:
    """``encode_packed``'s records, TFRecord-framed into one buffer (``frame_examples``), or
    what ``encoder`` makes of their columns."""
    seq_len = settings.pairs.max_seq_length
    input_mask = (np.arange(seq_len)[None, :] < packed.lengths[:, None]).astype(np.int8)
    if settings.masking_kind == DYNAMIC:  # no masks drawn: the mask stream is not read
        return _encode_unmasked(packed, input_mask, settings, tables, stats, encoder)
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
    plan = _plan(stats, packed.lengths, settings)
    _count_static(
        stats,
        packed.lengths,
        _slots(plan, packed.lengths, seq_len),
        predictions=int(masked.counts.sum()),
        masked=int((masked.decisions == MASKED).sum()),
        kept=int((masked.decisions == KEPT).sum()),
        random=int((masked.decisions == RANDOM).sum()),
    )
    if plan is not None:
        columns = packed_columns(
            input_ids=masked.input_ids,
            segment_ids=packed.segment_ids,
            lengths=packed.lengths,
            next_sentence_labels=packed.next_sentence_labels,
            plan=plan,
            masked=(masked.positions, masked.label_ids, masked.weights),
            prediction_slots=settings.prediction_slots_per_row,
        )
        return columns.framed(encoder)
    ints = {
        "input_ids": masked.input_ids,
        "input_mask": input_mask,
        "segment_ids": packed.segment_ids,
        "masked_lm_positions": masked.positions,
        "masked_lm_ids": masked.label_ids,
    }
    if has_nsp(settings.input_mode):
        ints["next_sentence_labels"] = packed.next_sentence_labels[:, None]
    return frame_examples(ints, {"masked_lm_weights": masked.weights}, encoder)


def _plan(stats: Counter[str], lengths: np.ndarray, settings: InstanceSettings) -> RowPlan | None:
    """With packing on, the rows of a batch of instances of ``lengths`` (``plan_rows``; their
    number counted in ``packed_rows``); None without packing (one row per instance)."""
    if not settings.pack_instances:
        return None
    plan = plan_rows(lengths, settings.pairs.max_seq_length, settings.pack_instances)
    stats["packed_rows"] += plan.rows
    return plan


def _slots(plan: RowPlan | None, lengths: np.ndarray, seq_len: int) -> int:
    """Token slots of the batch's rows."""
    return (len(lengths) if plan is None else plan.rows) * seq_len


def _count_static(
    stats: Counter[str],
    lengths: np.ndarray,
    token_slots: int,
    *,
    predictions: int,
    masked: int,
    kept: int,
    random: int,
) -> None:
    """The counters of a batch of static-masked instances filling ``token_slots`` slots."""
    stats["instances"] += len(lengths)
    stats["instance_tokens"] += int(lengths.sum())
    stats["masked_lm_predictions"] += predictions
    stats["masked_lm_masked"] += masked
    stats["masked_lm_kept"] += kept
    stats["masked_lm_random"] += random
    stats["padding_tokens"] += int(token_slots - lengths.sum())


def _count_unmasked(
    stats: Counter[str], lengths: np.ndarray, token_slots: int, cfg: MaskingConfig
) -> None:
    """The counters of a batch of unmasked instances filling ``token_slots`` slots;
    ``expected_masked_lm_predictions`` is the token-level budget summed over the instances."""
    budget = prediction_budget(lengths, cfg.masked_lm_prob, cfg.max_predictions_per_seq)
    stats["instances"] += len(lengths)
    stats["instance_tokens"] += int(lengths.sum())
    stats["expected_masked_lm_predictions"] += int(budget.sum())
    stats["padding_tokens"] += int(token_slots - lengths.sum())


def frame_static_spans(
    tokens: np.ndarray,
    spans: np.ndarray,
    settings: InstanceSettings,
    tables: TokenTables,
    rng: np.random.Generator,
    stats: Counter[str],
    encoder: ColumnEncoder = frame_columns,
) -> FramedRecords:
    """``frame_packed(pack_spans(tokens, spans, ...))`` for static, token-level masking, with the
    packing and masking in one compiled kernel (``transforms.static_rows``): the same records."""
    seq_len = settings.pairs.max_seq_length
    p = settings.masking.max_predictions_per_seq
    rows = static_rows(
        tokens,
        spans,
        settings.masking,
        seq_len,
        cls_id=tables.cls_id,
        sep_id=tables.sep_id,
        mask_id=tables.mask_id,
        replacement_ids=tables.replacement_ids,
        rng=rng,
        nsp=has_nsp(settings.input_mode),
    )
    plan = _plan(stats, rows.lengths, settings)
    _count_static(
        stats,
        rows.lengths,
        _slots(plan, rows.lengths, seq_len),
        predictions=rows.predictions,
        masked=rows.masked,
        kept=rows.kept,
        random=rows.random,
    )
    if plan is not None:
        ints = rows.ints
        columns = packed_columns(
            input_ids=ints[:, :seq_len],
            segment_ids=ints[:, 2 * seq_len : 3 * seq_len],
            lengths=rows.lengths,
            next_sentence_labels=ints[:, -1],
            plan=plan,
            masked=(
                ints[:, 3 * seq_len : 3 * seq_len + p],
                ints[:, 3 * seq_len + p : 3 * seq_len + 2 * p],
                rows.weights,
            ),
            prediction_slots=settings.prediction_slots_per_row,
        )
        return columns.framed(encoder)
    widths = rows.int_widths(seq_len, p)
    names = list(STATIC_INT_FEATURES[: len(widths)])
    bounds = np.concatenate(([0], np.cumsum(widths)))
    floats = rows.weights.view(np.uint8)
    return encoder(rows.ints, bounds, floats, np.array([0, 4 * p]), [*names, "masked_lm_weights"])


def frame_unmasked_spans(
    tokens: np.ndarray,
    spans: np.ndarray,
    settings: InstanceSettings,
    tables: TokenTables,
    stats: Counter[str],
    encoder: ColumnEncoder = frame_columns,
) -> FramedRecords:
    """``frame_packed(pack_spans(tokens, spans, ...))`` for ``masking=dynamic`` without
    packing, with the rows and their word starts laid out by one compiled kernel
    (``transforms.unmasked_rows``): the same records and counters."""
    seq_len = settings.pairs.max_seq_length
    rows = unmasked_rows(
        tokens,
        spans,
        seq_len,
        cls_id=tables.cls_id,
        sep_id=tables.sep_id,
        is_continuation=tables.is_continuation,
        nsp=has_nsp(settings.input_mode),
    )
    _count_unmasked(stats, rows.lengths, len(rows.lengths) * seq_len, settings.masking)
    widths = rows.int_widths(seq_len)
    names = list(UNMASKED_INT_FEATURES[: len(widths)])
    bounds = np.concatenate(([0], np.cumsum(widths)))
    no_floats = np.zeros((len(rows.lengths), 0), dtype=np.uint8)
    return encoder(rows.ints, bounds, no_floats, np.array([0]), names)


UNMASKED_INT_FEATURES = tuple(spec.name for spec in UNMASKED_FEATURES)
"""The int features of an unmasked (``masking=dynamic``) record, in the order they are
written (``transforms.features.UNMASKED_FEATURES``)."""


STATIC_INT_FEATURES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "masked_lm_positions",
    "masked_lm_ids",
    "next_sentence_labels",
)
"""The int features of a static-masked record, in the order they are written."""


def _encode_unmasked(
    packed: PackedPairs,
    input_mask: np.ndarray,
    settings: InstanceSettings,
    tables: TokenTables,
    stats: Counter[str],
    encoder: ColumnEncoder = frame_columns,
) -> FramedRecords:
    """Serializes packed rows unmasked (``transforms.features.UNMASKED_FEATURES``), with the
    word-start flags whole-word masking needs. ``stats`` gains ``expected_masked_lm_predictions``:
    the token-level budget ``min(P, max(1, round(n * masked_lm_prob)))`` summed over the rows."""
    seq_len = settings.pairs.max_seq_length
    ids = packed.input_ids
    candidate = (input_mask > 0) & (ids != tables.cls_id) & (ids != tables.sep_id)
    starts = word_starts(ids, candidate, tables.is_continuation).astype(np.int8)
    plan = _plan(stats, packed.lengths, settings)
    _count_unmasked(stats, packed.lengths, _slots(plan, packed.lengths, seq_len), settings.masking)
    if plan is not None:
        columns = packed_columns(
            input_ids=ids,
            segment_ids=packed.segment_ids,
            lengths=packed.lengths,
            next_sentence_labels=packed.next_sentence_labels,
            plan=plan,
            word_starts=starts,
        )
        return columns.framed(encoder)
    ints = {
        "input_ids": ids,
        "input_mask": input_mask,
        "segment_ids": packed.segment_ids,
        "word_starts": starts,
    }
    if has_nsp(settings.input_mode):
        ints["next_sentence_labels"] = packed.next_sentence_labels[:, None]
    return frame_examples(ints, {}, encoder)


def record_batches(
    documents: BucketLayout | Sequence[Document],
    bucket: int,
    dupe: int,
    settings: InstanceSettings,
    tables: TokenTables,
    stats: Counter[str],
    encoder: ColumnEncoder = frame_columns,
) -> Iterator[RecordBatch]:
    """Yields dupe pass ``dupe``'s records for one bucket, in batches of ``settings.batch_size``,
    TFRecord-framed (or as ``encoder`` makes them from their columns).

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

    token_level_static = settings.masking_kind == STATIC and not settings.masking.whole_word_mask
    unpacked_dynamic = settings.masking_kind == DYNAMIC and not settings.pack_instances

    def keyed(framed: FramedRecords) -> RecordBatch:
        keys = order_rng.integers(0, 2**63 - 1, size=len(framed), dtype=np.int64).tolist()
        return RecordBatch(bucket, framed, keys)

    def encode(spans: np.ndarray) -> RecordBatch:
        if token_level_static:
            return keyed(
                frame_static_spans(layout.tokens, spans, settings, tables, mask_rng, stats, encoder)
            )
        if unpacked_dynamic:
            return keyed(
                frame_unmasked_spans(layout.tokens, spans, settings, tables, stats, encoder)
            )
        seq_len = settings.pairs.max_seq_length
        packed = pack_span_rows(layout.tokens, spans, tables.cls_id, tables.sep_id, seq_len)
        return keyed(frame_packed(packed, settings, tables, mask_rng, stats, encoder))

    def encode_rows(rows: list[list[Window]]) -> RecordBatch:
        seq_len = settings.pairs.max_seq_length
        packed = pack_rows(layout.tokens, rows, tables.cls_id, tables.sep_id, seq_len)
        return keyed(frame_packed(packed, settings, tables, mask_rng, stats, encoder))

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

    spans = bucket_pair_spans(layout, settings.pairs, pair_rng, stats)
    for start in range(0, len(spans), size):
        yield encode(spans[start : start + size])
