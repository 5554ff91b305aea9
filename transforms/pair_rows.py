"""``transforms.instances.pack_spans`` in one compiled kernel: span pairs laid out as
``[CLS] A [SEP] B [SEP]`` rows, zero-padded, with their segment ids, lengths and NSP labels.

The numpy function stays the readable definition; this one writes the same arrays without the
(n, L) index and mask temporaries (``tests/transforms/test_pair_rows.py`` compares them).
"""

from __future__ import annotations

import numba
import numpy as np

from transforms.instances import PackedPairs, checked_spans


@numba.njit(cache=True)
def _rows(tokens, spans, cls_id, sep_id, input_ids, segment_ids):
    for r in range(spans.shape[0]):
        a0, la, b0, lb = spans[r, 0], spans[r, 1], spans[r, 2], spans[r, 3]
        length = la + lb + 3
        input_ids[r, 0] = cls_id
        for i in range(la):
            input_ids[r, 1 + i] = tokens[a0 + i]
        input_ids[r, la + 1] = sep_id
        for i in range(lb):
            input_ids[r, la + 2 + i] = tokens[b0 + i]
        input_ids[r, length - 1] = sep_id
        for c in range(la + 2, length):
            segment_ids[r, c] = 1


def pack_span_rows(
    tokens: np.ndarray, spans: np.ndarray, cls_id: int, sep_id: int, max_seq_length: int
) -> PackedPairs:
    """``pack_spans(tokens, spans, cls_id, sep_id, max_seq_length)``, compiled; the same
    ValueError when a pair exceeds ``max_seq_length``."""
    spans, lengths = checked_spans(spans, max_seq_length)
    n = len(spans)
    input_ids = np.zeros((n, max_seq_length), dtype=np.int32)
    segment_ids = np.zeros((n, max_seq_length), dtype=np.int8)
    _rows(np.asarray(tokens, dtype=np.int32), spans, cls_id, sep_id, input_ids, segment_ids)
    labels = spans[:, 4].astype(np.int8)
    return PackedPairs(input_ids, segment_ids, lengths.astype(np.int32), labels)
