"""The compiled pack-and-mask kernel against ``pack_spans`` + ``mask_rows`` (token-level static
masking): the same records from the same generator, and the same counters, for ordinary and
degenerate settings."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from transforms.instance_batches import (
    InstanceSettings,
    TokenTables,
    frame_packed,
    frame_static_spans,
)
from transforms.instances import BucketLayout, PairConfig, pack_spans
from transforms.masking import MaskingConfig
from transforms.pair_spans import bucket_pair_spans
from transforms.special_ids import SpecialIds

VOCAB = 30522


def layout_and_spans(seq_len: int, seed: int):
    rs = np.random.default_rng(seed)
    docs = []
    for _ in range(30):
        lengths = rs.integers(1, 60, size=int(rs.integers(1, 25)))
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        ids = rs.integers(999, VOCAB, size=int(offsets[-1])).astype(np.int32)
        ids[rs.random(len(ids)) < 0.01] = 102  # a literal [SEP] inside the text is no candidate
        docs.append((ids, offsets))
    layout = BucketLayout.from_arrays(docs)
    spans = bucket_pair_spans(
        layout, PairConfig(max_seq_length=seq_len), random.Random(seed), Counter()
    )
    return layout, spans


TABLES = TokenTables(
    SpecialIds(vocab_size=VOCAB), np.arange(999, VOCAB, dtype=np.int32), np.zeros(VOCAB, bool)
)


@pytest.mark.parametrize(
    "seq_len, masking",
    [
        (128, MaskingConfig(max_predictions_per_seq=20)),
        (512, MaskingConfig(max_predictions_per_seq=80)),
        (64, MaskingConfig(masked_lm_prob=1.0, max_predictions_per_seq=64)),
        (64, MaskingConfig(masked_lm_prob=0.0, max_predictions_per_seq=5)),
        (128, MaskingConfig(mask_token_prob=1.0, keep_token_prob=0.0, random_token_prob=0.0)),
        (128, MaskingConfig(mask_token_prob=0.0, keep_token_prob=1.0, random_token_prob=0.0)),
        (128, MaskingConfig(mask_token_prob=0.0, keep_token_prob=0.0, random_token_prob=1.0)),
    ],
    ids=["bert128", "bert512", "mask-all", "mask-one", "all-mask", "all-kept", "all-random"],
)
def test_the_kernel_writes_what_pack_spans_and_mask_rows_write(seq_len, masking):
    layout, spans = layout_and_spans(seq_len, seq_len)
    settings = InstanceSettings(PairConfig(max_seq_length=seq_len), masking, dupe_factor=1)
    want_stats, got_stats = Counter(), Counter()
    packed = pack_spans(layout.tokens, spans, 101, 102, seq_len)
    want = frame_packed(packed, settings, TABLES, np.random.default_rng(7), want_stats)
    got = frame_static_spans(
        layout.tokens, spans, settings, TABLES, np.random.default_rng(7), got_stats
    )
    assert got.data.tobytes() == want.data.tobytes()
    assert got_stats == want_stats
    assert got_stats["instances"] == len(spans) > 50


def test_whole_word_masking_is_not_the_kernels():
    from transforms.static_rows import static_rows

    layout, spans = layout_and_spans(128, 1)
    with pytest.raises(ValueError, match="whole-word"):
        static_rows(
            layout.tokens, spans, MaskingConfig(whole_word_mask=True), 128, cls_id=101,
            sep_id=102, mask_id=103, replacement_ids=TABLES.replacement_ids,
            rng=np.random.default_rng(0), nsp=True,
        )  # fmt: skip
