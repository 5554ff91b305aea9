"""Packing contiguous sentences (full-sentences, doc-sentences) and unmasked record encoding."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from transforms.example_encoding import decode_example
from transforms.instance_batches import InstanceSettings, TokenTables, record_batches
from transforms.instances import BucketLayout, PackConfig, PairConfig, create_packed_rows, pack_rows
from transforms.masking import MaskingConfig
from transforms.special_ids import SpecialIds

CLS, SEP, MASK = 2, 3, 4


def docs() -> list[list[list[int]]]:
    # Tokens name their document (hundreds) and sentence (tens).
    return [
        [[100, 101, 102], [110, 111], [120, 121, 122, 123]],
        [[200], [210, 211, 212]],
        [[300, 301, 302, 303, 304, 305, 306, 307, 308, 309, 310]],  # longer than a row
    ]


def rows_of(cfg: PackConfig) -> tuple[list[list[int]], Counter]:
    layout = BucketLayout.from_documents(docs())
    stats: Counter = Counter()
    rows = list(create_packed_rows(layout, cfg, stats))
    packed = pack_rows(layout.tokens, rows, CLS, SEP, cfg.max_seq_length)
    out = [packed.input_ids[i, : packed.lengths[i]].tolist() for i in range(len(packed))]
    return out, stats


def test_full_sentences_cross_documents_with_a_separator():
    out, stats = rows_of(PackConfig(max_seq_length=10, cross_documents=True))
    assert out == [
        [CLS, 100, 101, 102, 110, 111, SEP],  # + 4 tokens would overflow 8
        [CLS, 120, 121, 122, 123, SEP, 200, SEP],  # into document 2, one [SEP] between
        [CLS, 210, 211, 212, SEP],
        [CLS, 300, 301, 302, 303, 304, 305, 306, 307, SEP],  # a long sentence is split
        [CLS, 308, 309, 310, SEP],
    ]
    assert stats["document_separators"] == 1 and stats["split_long_sentences"] == 1


def test_doc_sentences_never_cross_documents():
    out, stats = rows_of(PackConfig(max_seq_length=10, cross_documents=False))
    assert out == [
        [CLS, 100, 101, 102, 110, 111, SEP],
        [CLS, 120, 121, 122, 123, SEP],
        [CLS, 200, 210, 211, 212, SEP],
        [CLS, 300, 301, 302, 303, 304, 305, 306, 307, SEP],
        [CLS, 308, 309, 310, SEP],
    ]
    assert stats["document_separators"] == 0


@pytest.mark.parametrize("cross", [True, False])
def test_packing_keeps_every_token_in_order(cross):
    rng = np.random.default_rng(1)
    documents = [
        [list(rng.integers(10, 99, rng.integers(1, 30))) for _ in range(rng.integers(1, 8))]
        for _ in range(40)
    ]
    layout = BucketLayout.from_documents(documents)
    cfg = PackConfig(max_seq_length=32, cross_documents=cross)
    rows = list(create_packed_rows(layout, cfg, Counter()))
    packed = pack_rows(layout.tokens, rows, CLS, SEP, 32)
    assert packed.lengths.max() <= 32
    text = packed.input_ids[(packed.input_ids != CLS) & (packed.input_ids != SEP)]
    text = text[text != 0]
    np.testing.assert_array_equal(text, layout.tokens)


def test_unmasked_records_carry_word_starts_and_no_masks():
    vocab = 50
    is_cont = np.zeros(vocab, bool)
    is_cont[40:] = True  # ids 40.. are ## pieces
    tables = TokenTables(SpecialIds(CLS, SEP, MASK), np.arange(10, vocab, dtype=np.int32), is_cont)
    settings = InstanceSettings(
        PairConfig(max_seq_length=12),
        MaskingConfig(max_predictions_per_seq=3),
        dupe_factor=1,
        masking_kind="dynamic",
        input_mode="full-sentences",
    )
    documents = [[[11, 41, 12], [13, 42, 43]], [[14, 15]]]
    stats: Counter = Counter()
    (batch,) = record_batches(documents, 0, 0, settings, tables, stats)
    decoded = [decode_example(r) for r in batch.records]
    assert set(decoded[0]) == {"input_ids", "input_mask", "segment_ids", "word_starts"}
    assert decoded[0]["input_ids"] == [CLS, 11, 41, 12, 13, 42, 43, SEP, 14, 15, SEP, 0]
    assert decoded[0]["word_starts"] == [0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0]
    assert stats["expected_masked_lm_predictions"] == 2  # round(11 * 0.15)
