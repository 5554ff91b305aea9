"""The compiled pair layout against ``pack_spans``, the numpy definition."""

from __future__ import annotations

import numpy as np
import pytest

from tests.transforms.test_static_rows import layout_and_spans
from transforms.instances import pack_spans
from transforms.pair_rows import pack_span_rows


def same(got, want) -> None:
    for name in ("input_ids", "segment_ids", "lengths", "next_sentence_labels"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name


@pytest.mark.parametrize("seq_len", [16, 128, 512])
def test_the_kernel_lays_out_what_pack_spans_lays_out(seq_len):
    layout, spans = layout_and_spans(seq_len, seq_len + 1)
    assert len(spans) > 20
    same(
        pack_span_rows(layout.tokens, spans, 101, 102, seq_len),
        pack_spans(layout.tokens, spans, 101, 102, seq_len),
    )


def test_degenerate_and_overlong_pairs():
    tokens = np.array([7, 8, 9, 10, 11], dtype=np.int32)
    spans = np.array([[0, 1, 1, 1, 1], [0, 2, 2, 3, 0]], dtype=np.int64)
    same(pack_span_rows(tokens, spans, 1, 2, 8), pack_spans(tokens, spans, 1, 2, 8))
    none = np.zeros((0, 5), dtype=np.int64)
    same(pack_span_rows(tokens, none, 1, 2, 8), pack_spans(tokens, none, 1, 2, 8))
    for pack in (pack_span_rows, pack_spans):
        with pytest.raises(ValueError, match="pair of 8 tokens exceeds max_seq_length 7"):
            pack(tokens, spans, 1, 2, 7)
