"""The feature contract of a pretraining record, defined once for the writer, inspector and trainer.

Compatible with google-research/bert ``run_pretraining.py``: every feature is a fixed-length list.
Padding id 0; unused prediction slots are 0 with weight 0.0; masked positions ascending.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Dtype = Literal["int64", "float32"]


@dataclass(frozen=True)
class FeatureSpec:
    """One feature: its name, dtype, and length as a function of the two record sizes."""

    name: str
    dtype: Dtype
    length_of: Literal["max_seq_length", "max_predictions_per_seq", "one"]

    def length(self, max_seq_length: int, max_predictions_per_seq: int) -> int:
        if self.length_of == "max_seq_length":
            return max_seq_length
        if self.length_of == "max_predictions_per_seq":
            return max_predictions_per_seq
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

IS_NEXT = 0
"""``next_sentence_labels`` value when B is the actual continuation of A."""
RANDOM_NEXT = 1
"""``next_sentence_labels`` value when B is a random span from another document."""


def feature_lengths(max_seq_length: int, max_predictions_per_seq: int) -> dict[str, int]:
    """Name → fixed length for the given record sizes."""
    return {f.name: f.length(max_seq_length, max_predictions_per_seq) for f in FEATURES}
