"""The compiled unmasked-rows kernel (``masking=dynamic``) against ``pack_spans`` +
``word_starts``: the same records and counters, for ordinary and degenerate batches."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tensorflow as tf

from tests.transforms.test_static_rows import TABLES, VOCAB, layout_and_spans
from transforms.features import DYNAMIC
from transforms.instance_batches import (
    InstanceSettings,
    TokenTables,
    frame_packed,
    frame_unmasked_spans,
    record_batches,
)
from transforms.instances import BucketLayout, PairConfig, pack_spans
from transforms.masking import MaskingConfig, word_starts
from transforms.special_ids import SpecialIds
from transforms.unmasked_rows import unmasked_rows

# every third id a "##" piece, so words of several pieces (and ## pieces after [SEP]) occur
CONTINUATION = np.arange(VOCAB) % 3 == 0
WORDPIECE_TABLES = TokenTables(SpecialIds(vocab_size=VOCAB), TABLES.replacement_ids, CONTINUATION)


def dynamic(seq_len: int, **kwargs) -> InstanceSettings:
    return InstanceSettings(
        PairConfig(max_seq_length=seq_len),
        MaskingConfig(max_predictions_per_seq=min(20, seq_len)),
        dupe_factor=1,
        masking_kind=DYNAMIC,
        **kwargs,
    )


@pytest.mark.parametrize("seq_len", [128, 512, 16])
@pytest.mark.parametrize("tables", [TABLES, WORDPIECE_TABLES], ids=["words", "wordpieces"])
def test_the_kernel_writes_what_pack_spans_and_word_starts_write(seq_len, tables):
    layout, spans = layout_and_spans(seq_len, seq_len)
    settings = dynamic(seq_len)
    want_stats, got_stats = Counter(), Counter()
    packed = pack_spans(layout.tokens, spans, 101, 102, seq_len)
    want = frame_packed(packed, settings, tables, np.random.default_rng(7), want_stats)
    got = frame_unmasked_spans(layout.tokens, spans, settings, tables, got_stats)
    assert got.data.tobytes() == want.data.tobytes()
    assert np.array_equal(got.offsets, want.offsets)
    assert got_stats == want_stats
    assert got_stats["instances"] == len(spans) > 20
    assert "masked_lm_predictions" not in got_stats  # no masks drawn


def test_columns_are_pack_spans_and_word_starts():
    layout, spans = layout_and_spans(128, 3)
    rows = unmasked_rows(
        layout.tokens, spans, 128, cls_id=101, sep_id=102, is_continuation=CONTINUATION, nsp=True
    )
    packed = pack_spans(layout.tokens, spans, 101, 102, 128)
    ids = rows.ints[:, :128]
    mask = rows.ints[:, 128:256]
    candidate = (mask > 0) & (ids != 101) & (ids != 102)
    assert np.array_equal(ids, packed.input_ids)
    assert np.array_equal(mask.sum(axis=1), packed.lengths)
    assert np.array_equal(rows.ints[:, 256:384], packed.segment_ids)
    assert np.array_equal(rows.ints[:, 384:512], word_starts(ids, candidate, CONTINUATION))
    assert np.array_equal(rows.ints[:, 512], packed.next_sentence_labels)
    assert rows.int_widths(128) == [128, 128, 128, 128, 1]
    # a ## piece right after [SEP] starts a word (nothing maskable before it); one after a
    # maskable piece does not
    current, previous = ids[:, 2:], ids[:, 1:-1]
    piece = CONTINUATION[current] & candidate[:, 2:]
    starts = rows.ints[:, 386:512]
    assert (piece & (previous == 102)).any()
    assert (starts[piece & (previous == 102)] == 1).all()
    assert (starts[piece & candidate[:, 1:-1]] == 0).all()


def test_degenerate_batches():
    no_spans = np.zeros((0, 5), dtype=np.int64)
    rows = unmasked_rows(
        np.zeros(0, np.int32), no_spans, 8, cls_id=1, sep_id=2, is_continuation=CONTINUATION,
        nsp=False,
    )  # fmt: skip
    assert rows.ints.shape == (0, 32) and rows.int_widths(8) == [8, 8, 8, 8]
    # the shortest pair: one token each side; exactly max_seq_length tokens
    tokens = np.array([7, 8, 9, 10, 11], dtype=np.int32)
    full = np.array([[0, 1, 1, 1, 1], [0, 2, 2, 3, 0]], dtype=np.int64)
    rows = unmasked_rows(
        tokens, full, 8, cls_id=1, sep_id=2, is_continuation=np.zeros(20, bool), nsp=True
    )
    assert rows.ints[0, :8].tolist() == [1, 7, 2, 8, 2, 0, 0, 0]
    assert rows.ints[1, :8].tolist() == [1, 7, 8, 2, 9, 10, 11, 2]
    assert rows.ints[1, 16:24].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert rows.ints[1, 24:32].tolist() == [0, 1, 1, 0, 1, 1, 1, 0]
    assert rows.ints[:, 32].tolist() == [1, 0]
    with pytest.raises(ValueError, match="exceeds max_seq_length 7"):
        unmasked_rows(
            tokens, full, 7, cls_id=1, sep_id=2, is_continuation=np.zeros(20, bool), nsp=True
        )


def test_dynamic_batches_read_back_through_tf_data(tmp_path):
    """The records of a whole dynamic dupe pass parse with the unmasked feature contract."""
    rs = np.random.default_rng(5)
    docs = []
    for _ in range(12):
        lengths = rs.integers(3, 30, size=8)
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        docs.append((rs.integers(999, VOCAB, size=int(offsets[-1])).astype(np.int32), offsets))
    layout = BucketLayout.from_arrays(docs)
    settings = dynamic(64)
    stats: Counter[str] = Counter()
    batches = list(record_batches(layout, 0, 0, settings, WORDPIECE_TABLES, stats))
    path = str(tmp_path / "dynamic.tfrecord")
    with open(path, "wb") as f:
        for batch in batches:
            f.write(batch.framed.data.tobytes())
    spec = {
        "input_ids": tf.io.FixedLenFeature([64], tf.int64),
        "input_mask": tf.io.FixedLenFeature([64], tf.int64),
        "segment_ids": tf.io.FixedLenFeature([64], tf.int64),
        "word_starts": tf.io.FixedLenFeature([64], tf.int64),
        "next_sentence_labels": tf.io.FixedLenFeature([1], tf.int64),
    }
    parsed = list(tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_example(r, spec)))
    assert len(parsed) == stats["instances"] > 0
    for example in parsed:
        ids = example["input_ids"].numpy()
        length = int(example["input_mask"].numpy().sum())
        assert ids[0] == 101 and ids[length - 1] == 102 and not ids[length:].any()
        assert example["word_starts"].numpy()[0] == 0


def test_a_token_id_outside_the_vocabulary_is_refused():
    tokens = np.array([7, 8, 25, 10], dtype=np.int32)  # 25: beyond a 20-id vocabulary
    spans = np.array([[0, 2, 2, 2, 0]], dtype=np.int64)
    with pytest.raises(ValueError, match="1 token ids lie outside the vocabulary's 20 ids"):
        unmasked_rows(
            tokens, spans, 8, cls_id=1, sep_id=2, is_continuation=np.zeros(20, bool), nsp=True
        )
