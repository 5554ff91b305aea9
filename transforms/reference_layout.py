"""What ``--compat reference`` holds per invocation: its documents, settings and instances.

Plain arrays (no compiled code here, so the launcher can plan a job without loading numba): the
kernels in ``transforms.reference_instances`` fill and read them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ReferenceDocuments:
    """An invocation's documents as the reference holds them, in reading order (before its
    shuffle): document ``d`` is sentences ``sentence_starts[d]:sentence_starts[d + 1]``, sentence
    ``s`` is ``ids[token_starts[s]:token_starts[s + 1]]`` (never empty; no empty documents)."""

    ids: np.ndarray  # int32[tokens]
    token_starts: np.ndarray  # int64[sentences + 1]
    sentence_starts: np.ndarray  # int64[documents + 1]

    @property
    def documents(self) -> int:
        return len(self.sentence_starts) - 1

    @property
    def sentences(self) -> int:
        return len(self.token_starts) - 1


@dataclass(frozen=True)
class ReferenceSettings:
    """The reference's flags that shape instances, plus the vocab tables they need."""

    max_seq_length: int
    max_predictions_per_seq: int
    masked_lm_prob: float
    short_seq_prob: float
    dupe_factor: int
    whole_word_mask: bool
    cls_id: int
    sep_id: int
    mask_id: int
    vocab_word_ids: np.ndarray
    """int64: the id of each entry of the script's ``list(tokenizer.vocab.keys())`` (its random
    replacement is ``vocab_words[randint(0, len - 1)]``)."""
    is_continuation: np.ndarray
    """bool per id: the token starts with ``##`` (whole-word grouping)."""

    def predictions_by_length(self) -> np.ndarray:
        """``min(max_predictions, max(1, int(round(length * masked_lm_prob))))`` per instance
        length, computed by Python's own ``round`` (half to even on the float product)."""
        return np.array(
            [
                min(
                    self.max_predictions_per_seq,
                    max(1, int(round(length * self.masked_lm_prob))),
                )
                for length in range(self.max_seq_length + 1)
            ],
            dtype=np.int64,
        )


@dataclass
class ReferenceInstances:
    """Instances in creation order (all dupe passes); ``order[g]`` is the instance the reference
    writes as record ``g`` (after its final shuffle; record ``g`` goes to output file
    ``g % files``)."""

    a_start: np.ndarray  # int64: tokens A are ids[a_start:a_end]
    a_end: np.ndarray
    b_start: np.ndarray  # tokens B are ids[b_start:b_end]
    b_end: np.ndarray
    random_next: np.ndarray  # int8: next_sentence_labels (1: B is a random next)
    predictions: np.ndarray  # int32: masked positions used
    positions: np.ndarray  # int16[n, max_predictions]: masked positions, ascending
    replacements: np.ndarray  # int32[n, max_predictions]: the id written at each position
    order: np.ndarray  # int64[n]

    def __len__(self) -> int:
        return len(self.a_start)
