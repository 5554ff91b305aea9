"""Unmasked rows of a batch of pair spans (``masking=dynamic``), laid out as the records' int
columns, in one compiled kernel.

The same values as ``transforms.instances.pack_spans`` followed by
``transforms.masking.word_starts`` over the maskable positions (not [CLS], [SEP] or padding):
``input_ids``, ``input_mask``, ``segment_ids``, ``word_starts`` and, with NSP, the
``next_sentence_labels`` column, side by side in the order ``transforms.features.
UNMASKED_FEATURES`` writes them, so ``transforms.framed_examples.frame_columns`` encodes them
without an intermediate array. No random draw is made: the trainer masks these rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from transforms.instances import checked_spans
from transforms.special_ids import refuse_ids_outside_vocabulary


@numba.njit(cache=True)
def _rows(tokens, spans, is_continuation, cls_id, sep_id, seq_len, nsp, ints):
    """Fills ``ints`` (zeroed, int32 (n, 4L [+ 1])) row by row; returns how many maskable
    pieces lie outside ``is_continuation`` (0 unless the ids and the vocabulary differ)."""
    mask0, segment0, starts0 = seq_len, 2 * seq_len, 3 * seq_len
    vocab = is_continuation.shape[0]
    unknown = 0
    for r in range(spans.shape[0]):
        a0, la, b0, lb = spans[r, 0], spans[r, 1], spans[r, 2], spans[r, 3]
        length = la + lb + 3
        row = ints[r]
        row[0] = cls_id
        for i in range(la):
            row[1 + i] = tokens[a0 + i]
        row[la + 1] = sep_id
        for i in range(lb):
            row[la + 2 + i] = tokens[b0 + i]
        row[length - 1] = sep_id
        for c in range(length):
            row[mask0 + c] = 1
        for c in range(la + 2, length):
            row[segment0 + c] = 1
        # a maskable piece starts a word unless it is a ## piece right after another maskable
        # piece: position 1 always starts one, the first piece after a [SEP] too
        previous = False
        for c in range(1, length):
            token = row[c]
            maskable = token != cls_id and token != sep_id
            if maskable and (token < 0 or token >= vocab):
                unknown += 1
            elif maskable and not (previous and is_continuation[token]):
                row[starts0 + c] = 1
            previous = maskable
        if nsp:
            row[4 * seq_len] = spans[r, 4]
    return unknown


@dataclass(frozen=True)
class UnmaskedRows:
    """The int columns of a batch of unmasked records (``ints``: int32 (n, 4L [+ 1]);
    input_ids, input_mask, segment_ids, word_starts [, next_sentence_labels]) and the rows' real
    token counts (``lengths``, int64 (n,))."""

    ints: np.ndarray
    lengths: np.ndarray

    def int_widths(self, seq_len: int) -> list[int]:
        """Columns of each int feature of ``ints``, in order."""
        widths = [seq_len] * 4
        return widths + [1] if self.ints.shape[1] > sum(widths) else widths


def unmasked_rows(
    tokens: np.ndarray,
    spans: np.ndarray,
    seq_len: int,
    *,
    cls_id: int,
    sep_id: int,
    is_continuation: np.ndarray,
    nsp: bool,
) -> UnmaskedRows:
    """Packs ``spans`` (int64 (n, 5) ``PairSpan`` rows over ``tokens``) as ``[CLS] A [SEP] B
    [SEP]`` with the word-start flags; raises ValueError when a pair exceeds ``seq_len`` or a
    token id lies outside ``is_continuation`` (a vocabulary that is not the tokens')."""
    spans, lengths = checked_spans(spans, seq_len)
    n = len(spans)
    ints = np.zeros((n, 4 * seq_len + (1 if nsp else 0)), dtype=np.int32)
    unknown = _rows(
        np.asarray(tokens, dtype=np.int32),
        spans,
        np.asarray(is_continuation, dtype=np.bool_),
        cls_id,
        sep_id,
        seq_len,
        nsp,
        ints,
    )
    refuse_ids_outside_vocabulary(unknown, len(is_continuation))
    return UnmaskedRows(ints, lengths)
