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


def chosen_by_definition(keys, candidate, count) -> list[int]:
    """The ``count`` candidate columns with the smallest (key, column), in column order."""
    columns = np.flatnonzero(candidate)
    order = np.lexsort((columns, keys[columns]))
    return sorted(columns[order[:count]].tolist())


@pytest.mark.parametrize(
    "keys_of",
    [
        lambda rs, shape: np.floor(rs.random(shape) * 4) / 4,  # many ties, across buckets
        lambda rs, shape: np.full(shape, 0.5),  # every key tied
        lambda rs, shape: np.full(shape, np.nextafter(1.0, 0.0)),  # the largest key there is
        lambda rs, shape: np.where(rs.random(shape) < 0.5, 0.0, rs.random(shape)),  # zeros
        lambda rs, shape: rs.random(shape),
    ],
    ids=["quarters", "all-equal", "just-below-1", "half-zero", "uniform"],
)
@pytest.mark.parametrize("seq_len, p", [(128, 20), (384, 60), (16, 16)])
def test_the_kernel_chooses_the_smallest_keys_ties_by_position(keys_of, seq_len, p):
    """The threshold selection against its definition (lexicographic (key, column)), including
    ties that uniform float64 draws practically never make, and literal [CLS]/[SEP] ids inside
    the text (never candidates)."""
    from transforms.static_rows import _rows

    rs = np.random.default_rng(seq_len + p)
    n, cls_id, sep_id, mask_id = 300, 101, 102, 103
    tokens = rs.integers(999, VOCAB, size=5000).astype(np.int32)
    tokens[rs.random(len(tokens)) < 0.03] = cls_id
    tokens[rs.random(len(tokens)) < 0.03] = sep_id
    la = rs.integers(0, seq_len - 2, size=n)
    lb = rs.integers(0, seq_len - 2 - la)
    spans = np.stack(
        [rs.integers(0, 2000, size=n), la, rs.integers(0, 2000, size=n), lb, la % 2], axis=1
    ).astype(np.int64)
    keys = keys_of(rs, (n, seq_len))
    budget = rs.integers(0, p + 1, size=n).astype(np.int64)
    out = np.zeros((n, 3 * seq_len + 2 * p + 1), dtype=np.int32)
    weights = np.zeros((n, p), dtype=np.float32)
    decided = np.zeros(3, dtype=np.int64)
    _rows(
        tokens, spans, keys, rs.random((n, p)), rs.integers(0, 100, size=(n, p)),
        np.arange(999, 1099, dtype=np.int32), budget, cls_id, sep_id, mask_id, seq_len, p,
        0.8, 0.1, True, out, weights, decided,
    )  # fmt: skip
    for r in range(n):
        a0, la_r, b0, lb_r = spans[r, :4]
        length = la_r + lb_r + 3
        ids = np.concatenate(
            [[cls_id], tokens[a0 : a0 + la_r], [sep_id], tokens[b0 : b0 + lb_r], [sep_id]]
        )
        candidate = (ids != cls_id) & (ids != sep_id)
        count = min(int(budget[r]), int(candidate.sum()))
        want = chosen_by_definition(keys[r, :length], candidate, count)
        assert out[r, 3 * seq_len : 3 * seq_len + count].tolist() == want
        assert out[r, 3 * seq_len + p : 3 * seq_len + p + count].tolist() == ids[want].tolist()
        assert weights[r].tolist() == [1.0] * count + [0.0] * (p - count)
        assert out[r, 3 * seq_len + 2 * p] == la_r % 2
    assert decided.sum() == (weights == 1.0).sum()
