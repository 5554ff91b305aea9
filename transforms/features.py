"""The feature contract of a pretraining record, defined once for the writer, inspector and trainer.

Compatible with google-research/bert ``run_pretraining.py``: every feature is a fixed-length list.
Padding id 0; unused prediction slots are 0 with weight 0.0; masked positions ascending.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Dtype = Literal["int64", "float32"]


@dataclass(frozen=True)
class FeatureSpec:
    """One feature: its name, dtype, and length as a function of the two record sizes."""

    name: str
    dtype: Dtype
    length_of: Literal[
        "max_seq_length", "max_predictions_per_seq", "one", "max_instances", "packed_predictions"
    ]

    def length(
        self,
        max_seq_length: int,
        max_predictions_per_seq: int,
        max_instances: int = 1,
        max_predictions_per_row: int | None = None,
    ) -> int:
        """The fixed length; ``max_instances`` (K) and ``max_predictions_per_row`` size the
        features of packed rows (``max_instances``: K; ``packed_predictions``: the row's
        prediction slots, ``packed_prediction_slots``; K × max_predictions_per_seq when None)."""
        if self.length_of == "max_seq_length":
            return max_seq_length
        if self.length_of == "max_predictions_per_seq":
            return max_predictions_per_seq
        if self.length_of == "max_instances":
            return max_instances
        if self.length_of == "packed_predictions":
            if max_predictions_per_row is None:
                return max_instances * max_predictions_per_seq
            return max_predictions_per_row
        return 1


FEATURES: tuple[FeatureSpec, ...] = (
    FeatureSpec("input_ids", "int64", "max_seq_length"),
    FeatureSpec("input_mask", "int64", "max_seq_length"),
    FeatureSpec("segment_ids", "int64", "max_seq_length"),
    FeatureSpec("masked_lm_positions", "int64", "max_predictions_per_seq"),
    FeatureSpec("masked_lm_ids", "int64", "max_predictions_per_seq"),
    FeatureSpec("masked_lm_weights", "float32", "max_predictions_per_seq"),
    FeatureSpec("next_sentence_labels", "int64", "one"),
)

FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in FEATURES)

MANIFEST = "manifest.json"
"""The file name of the JSON manifest in every artifact directory (shards, documents, tokens)."""

IS_NEXT = 0
"""``next_sentence_labels`` value when B is the actual continuation of A."""
RANDOM_NEXT = 1
"""``next_sentence_labels`` value when B is a random span from another document."""


def feature_lengths(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, int]:
    """Name → fixed length for the given record sizes."""
    return {f.name: f.length(max_seq_length, max_predictions_per_seq) for f in FEATURES}


# --- Instance kinds: how records are masked and what their inputs are ---------------------------

STATIC, DYNAMIC = "static", "dynamic"
MASKINGS: tuple[str, ...] = (STATIC, DYNAMIC)
"""``static``: 80/10/10 masks precomputed in the record (the table above). ``dynamic``: unmasked
records (``UNMASKED_FEATURES``); the trainer draws the masks in ``tf.data``."""

SENTENCE_PAIRS, FULL_SENTENCES, DOC_SENTENCES = "sentence-pairs", "full-sentences", "doc-sentences"
INPUT_MODES: tuple[str, ...] = (SENTENCE_PAIRS, FULL_SENTENCES, DOC_SENTENCES)
"""``sentence-pairs``: BERT's ``[CLS] A [SEP] B [SEP]`` with an NSP label. ``full-sentences``:
contiguous sentences packed up to the length, crossing documents with a ``[SEP]`` between them,
no NSP. ``doc-sentences``: the same within one document (RoBERTa, Table 2)."""

WORD_STARTS = FeatureSpec("word_starts", "int64", "max_seq_length")
"""1 at the first piece of each maskable word (not [CLS], [SEP] or padding; a ``##`` piece
continues the word before it), else 0: what whole-word masking needs at training time."""

UNMASKED_FEATURES: tuple[FeatureSpec, ...] = (
    FeatureSpec("input_ids", "int64", "max_seq_length"),
    FeatureSpec("input_mask", "int64", "max_seq_length"),
    FeatureSpec("segment_ids", "int64", "max_seq_length"),
    WORD_STARTS,
    FeatureSpec("next_sentence_labels", "int64", "one"),
)
"""The record of ``masking=dynamic``: no masks, no prediction slots."""

MASKED_LM_FEATURES = ("masked_lm_positions", "masked_lm_ids", "masked_lm_weights")


def has_nsp(input_mode: str) -> bool:
    """Whether records of ``input_mode`` carry ``next_sentence_labels`` (sentence pairs only)."""
    return input_mode == SENTENCE_PAIRS


def check_kind(masking: str, input_mode: str) -> None:
    """Raises ValueError when either is not a known value."""
    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {', '.join(MASKINGS)}, got {masking!r}")
    if input_mode not in INPUT_MODES:
        raise ValueError(f"input_mode must be one of {', '.join(INPUT_MODES)}, got {input_mode!r}")


def features_of(
    masking: str = STATIC, input_mode: str = SENTENCE_PAIRS, packed: bool = False
) -> tuple[FeatureSpec, ...]:
    """The features of a record of this kind: ``FEATURES`` or ``UNMASKED_FEATURES``, without
    ``next_sentence_labels`` when the mode has no NSP. (static, sentence-pairs) is ``FEATURES``.
    ``packed``: ``PACKED_FEATURES`` or ``PACKED_UNMASKED_FEATURES`` (sentence pairs only)."""
    check_kind(masking, input_mode)
    if packed:
        check_packable(input_mode)
        return PACKED_FEATURES if masking == STATIC else PACKED_UNMASKED_FEATURES
    base = FEATURES if masking == STATIC else UNMASKED_FEATURES
    if has_nsp(input_mode):
        return base
    return tuple(f for f in base if f.name != "next_sentence_labels")


def kind_lengths(
    max_seq_length: int,
    max_predictions_per_seq: int,
    masking: str = STATIC,
    input_mode: str = SENTENCE_PAIRS,
    max_instances: int = 0,
    max_predictions_per_row: int | None = None,
) -> dict[str, int]:
    """Name → fixed length of every feature of a record of this kind; ``max_instances`` > 0:
    packed rows of up to that many instances and ``max_predictions_per_row`` prediction slots
    (``packed_prediction_slots``)."""
    return {
        f.name: f.length(
            max_seq_length, max_predictions_per_seq, max(1, max_instances), max_predictions_per_row
        )
        for f in features_of(masking, input_mode, packed=max_instances > 0)
    }


def packed_prediction_slots(
    max_seq_length: int, max_predictions_per_seq: int, max_instances: int, masked_lm_prob: float
) -> int:
    """Prediction slots of a packed row: enough for any K instances in ``max_seq_length``
    tokens. An instance of ``n`` tokens has at most ``min(P, max(1, round(n * prob)))``
    predictions ≤ ``n * prob + 1``, so K instances of at most L tokens together have at most
    ``floor(L * prob) + K`` (and at most ``K * P``)."""
    bound = math.floor(max_seq_length * masked_lm_prob + 1e-9) + max_instances
    return min(max_instances * max_predictions_per_seq, bound)


# --- Packed rows: several sentence-pair instances laid end to end in one row --------------------

DEFAULT_PACK_INSTANCES = 4
"""K when packing is asked for without one: at 512 tokens, 4 instances per row fill 98.9% of
the slots on the benchmark corpus (3: 98.1%) and 96.3% on short articles (44% filled unpacked,
as full Wikipedia; 3: 92.2%), halving the rows there (÷2.17; benchmarks/RESULTS.md)."""

PACKING_STRATEGY = "first-fit-decreasing"
"""How instances are grouped into rows (``transforms.instance_packing``), written into the manifest."""

PACKED_FEATURES: tuple[FeatureSpec, ...] = (
    FeatureSpec("input_ids", "int64", "max_seq_length"),
    FeatureSpec("input_mask", "int64", "max_seq_length"),
    FeatureSpec("segment_ids", "int64", "max_seq_length"),
    FeatureSpec("position_ids", "int64", "max_seq_length"),
    FeatureSpec("instance_ids", "int64", "max_seq_length"),
    FeatureSpec("masked_lm_positions", "int64", "packed_predictions"),
    FeatureSpec("masked_lm_ids", "int64", "packed_predictions"),
    FeatureSpec("masked_lm_weights", "float32", "packed_predictions"),
    FeatureSpec("next_sentence_labels", "int64", "max_instances"),
    FeatureSpec("next_sentence_weights", "float32", "max_instances"),
    FeatureSpec("cls_positions", "int64", "max_instances"),
)
"""A packed static row of up to K instances (``[CLS] A [SEP] B [SEP]`` each), end to end from
position 0, then padding (id 0):

- per token: ``input_ids``, ``input_mask`` (1 on every instance's tokens), ``segment_ids`` (as in
  the instance), ``position_ids`` (position within its own instance: 0 at its ``[CLS]``; 0 in
  padding) and ``instance_ids`` (1 for the row's first instance, 2 for the second, ...; 0 in
  padding). A token attends to exactly the tokens of the same nonzero ``instance_ids``.
- per row, sized for K instances (``packed_prediction_slots``: at most K ×
  ``max_predictions_per_seq``, in practice ``floor(L × masked_lm_prob) + K``): ``masked_lm_positions``
  (row positions, ascending; instance by instance, each instance's own masks), ``masked_lm_ids``
  and ``masked_lm_weights`` (1.0 used, 0.0 unused; unused slots 0 at the end).
- per instance (K slots, in row order): ``next_sentence_labels``, ``next_sentence_weights``
  (1.0 for an instance, 0.0 for an unused slot) and ``cls_positions`` (its ``[CLS]``'s row
  position; 0 when unused).

An instance's tokens, segments, masks and NSP label are those it has unpacked, shifted by its
offset in the row."""

PACKED_UNMASKED_FEATURES: tuple[FeatureSpec, ...] = (
    *PACKED_FEATURES[:5],
    FeatureSpec("word_starts", "int64", "max_seq_length"),
    *PACKED_FEATURES[8:],
)
"""A packed ``masking=dynamic`` row: ``PACKED_FEATURES`` without prediction slots, with the
word-start flags; the trainer draws each instance's masks on its own tokens."""

PACKED_ONLY = ("position_ids", "instance_ids", "next_sentence_weights", "cls_positions")
"""The features only packed rows have: what tells a packed shard from an unpacked one."""


def check_packable(input_mode: str) -> None:
    """Raises ValueError unless rows of ``input_mode`` can be packed (sentence pairs only: the
    other modes already fill their rows with text)."""
    if input_mode != SENTENCE_PAIRS:
        raise ValueError(
            f"packing needs input_mode {SENTENCE_PAIRS!r} (got {input_mode!r}): "
            "full-sentences and doc-sentences rows are already filled to max_seq_length"
        )
