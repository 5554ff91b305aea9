"""The compiled bucket kernel against ``create_pair_spans``, the readable definition: the same
spans, the same counts and the same generator state afterwards, draw for draw."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from transforms.instances import BucketLayout, PairConfig, create_pair_spans
from transforms.pair_spans import bucket_pair_spans


def python_spans(layout: BucketLayout, cfg: PairConfig, rng: random.Random, stats: Counter):
    out = []
    for index in range(len(layout)):
        out.extend(create_pair_spans(layout, index, cfg, rng, stats))
    return np.asarray(out, dtype=np.int64).reshape(-1, 5)


def random_layout(rs: np.random.Generator, documents: int, max_sentence: int) -> BucketLayout:
    docs = []
    for _ in range(documents):
        lengths = rs.integers(1, max_sentence, size=int(rs.integers(1, 30)))
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        docs.append((rs.integers(5, 1000, size=int(offsets[-1])).astype(np.int32), offsets))
    return BucketLayout.from_arrays(docs)


@pytest.mark.parametrize(
    "cfg",
    [
        PairConfig(max_seq_length=128),
        PairConfig(max_seq_length=512, short_seq_prob=0.3),
        PairConfig(max_seq_length=16, short_seq_prob=1.0, random_next_prob=1.0),
        PairConfig(max_seq_length=64, short_seq_prob=0.0, random_next_prob=0.0),
        PairConfig(max_seq_length=128, allow_same_document_random_next=True),
    ],
    ids=["bert128", "seq512", "all-random-short", "never-random", "same-document"],
)
@pytest.mark.parametrize("documents", [1, 2, 40])
def test_the_kernel_draws_what_create_pair_spans_draws(cfg, documents):
    rs = np.random.default_rng(documents * 1000 + cfg.max_seq_length)
    for trial in range(5):
        # Sentences up to 300 tokens: truncations of more than 32 tokens (several words per
        # getrandbits) happen at every length.
        layout = random_layout(rs, documents, 300 if trial % 2 else 40)
        want_stats, got_stats = Counter(), Counter()
        want_rng, got_rng = random.Random(trial), random.Random(trial)
        want = python_spans(layout, cfg, want_rng, want_stats)
        got = bucket_pair_spans(layout, cfg, got_rng, got_stats)
        np.testing.assert_array_equal(got, want)
        assert got_stats == want_stats
        assert sorted(got_stats) == sorted(want_stats)
        assert got_rng.getstate() == want_rng.getstate()
        assert want_stats["pairs"] > 0 or documents == 1


def test_a_lone_document_has_no_random_b_and_is_counted_as_skipped():
    layout = BucketLayout.from_arrays([(np.arange(10, dtype=np.int32), np.array([0, 10]))])
    stats = Counter()
    spans = bucket_pair_spans(layout, PairConfig(max_seq_length=32), random.Random(0), stats)
    assert spans.shape == (0, 5)
    assert stats == Counter(single_sentence_chunks=1, skipped_no_other_document=1)
