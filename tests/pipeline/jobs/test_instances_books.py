"""Statistics of a real run: ≥ 50k instances from the Project Gutenberg books in shared/corpora,
with Google's uncased vocabulary, read back through tf.data."""

from __future__ import annotations

import re

import numpy as np
import pytest

from benchmarks.books_corpus import build_corpus
from tests.conftest import require_corpora
from tests.pipeline.jobs.test_instances import run_job, shard_files
from tests.pipeline.shard_reading import read_shards
from tokenizer.vocab import Vocab

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def books_run(tmp_path_factory):
    require_corpora("books")
    vocab_path = require_corpora("vocab", "bert-base-uncased-vocab.txt")
    tmp = tmp_path_factory.mktemp("books")
    build_corpus(tmp / "corpus", 7_000_000)
    manifest, out = run_job(
        tmp,
        [str(tmp / "corpus" / "*.txt")],
        vocab_path,
        mode="multi_processing",
        workers=2,
        num_shards=16,
        dupe_factor=3,
        seed=12345,
        bucket_size=500,
    )
    data = read_shards(shard_files(out), 128, 20)
    return manifest, data, Vocab.from_file(str(vocab_path))


def test_at_least_50k_instances_all_read_back(books_run):
    manifest, data, _ = books_run
    assert len(data["input_ids"]) == manifest["totals"]["instances"] >= 50_000
    sizes = [s["records"] for s in manifest["shards"]]
    assert max(sizes) - min(sizes) <= 1


def test_is_next_rate(books_run):
    manifest, data, _ = books_run
    counts = manifest["counts"]
    labels = data["next_sentence_labels"][:, 0]
    assert int((labels == 1).sum()) == counts["random_next"]
    # One-sentence chunks always take a random B (as in the reference); the others flip a coin.
    coin = counts["pairs"] - counts["single_sentence_chunks"]
    random_by_coin = counts["random_next"] - counts["single_sentence_chunks"]
    assert coin > 40_000
    assert abs(random_by_coin / coin - 0.5) < 0.01


def test_masking_80_10_10_and_prediction_counts(books_run):
    _, data, vocab = books_run
    lengths = data["input_mask"].sum(1)
    counts = data["masked_lm_weights"].sum(1).astype(int)
    expected = np.minimum(20, np.maximum(1, np.round(lengths * 0.15))).astype(int)
    assert np.array_equal(counts, expected)
    used = data["masked_lm_weights"] > 0
    rows = np.nonzero(used)[0]
    positions = data["masked_lm_positions"][used]
    labels = data["masked_lm_ids"][used]
    shown = data["input_ids"][rows, positions]
    n = len(labels)
    assert n > 800_000
    masked = np.mean(shown == vocab.mask_id)
    kept = np.mean(shown == labels)
    replaced = 1 - masked - kept
    assert abs(masked - 0.8) < 0.01 and abs(kept - 0.1) < 0.01 and abs(replaced - 0.1) < 0.01
    random_tokens = shown[(shown != vocab.mask_id) & (shown != labels)]
    bracketed = [
        t for t in set(random_tokens.tolist()) if re.fullmatch(r"\[[^\[\]]+\]", vocab.tokens[t])
    ]
    assert bracketed == []  # never [PAD], [CLS], [unused7], ...
    assert not np.isin(labels, [vocab.cls_id, vocab.sep_id, vocab.pad_id]).any()


def test_short_sequence_share(books_run):
    manifest, data, _ = books_run
    counts = manifest["counts"]
    passes = manifest["totals"]["documents"] * 3
    assert abs(counts["short_target_documents"] / passes - 0.1) < 0.01
    # Short targets show up as instances well below the maximum length.
    assert np.mean(data["input_mask"].sum(1) < 64) > 0.02


def test_segments_and_padding(books_run):
    _, data, vocab = books_run
    lengths = data["input_mask"].sum(1)
    assert lengths.max() == 128 and lengths.min() >= 5
    assert (data["input_ids"][:, 0] == vocab.cls_id).all()
    assert ((data["input_ids"] == vocab.sep_id).sum(1) == 2).all()
    col = np.arange(128)[None, :]
    assert (data["input_ids"][col >= lengths[:, None]] == 0).all()
    assert (data["segment_ids"][col >= lengths[:, None]] == 0).all()
