"""From documents to encoded records (transforms.instance_batches)."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from tokenizer.vocab import Vocab
from transforms.example_encoding import decode_example
from transforms.features import FEATURE_NAMES, feature_lengths
from transforms.instance_batches import (
    InstanceSettings,
    RecordBatch,
    TokenTables,
    encode_pairs,
    record_batches,
)
from transforms.instances import PairConfig, SentencePair, create_pairs_from_document, pack_pairs
from transforms.masking import MaskingConfig
from transforms.seeding import numpy_rng, python_rng

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
VOCAB = Vocab.from_bytes(
    "\n".join(SPECIAL + [f"w{i}" for i in range(200)] + [f"##p{i}" for i in range(100)]).encode()
)
TABLES = TokenTables(
    ids=VOCAB.special_ids(),
    replacement_ids=VOCAB.replacement_ids(),
    is_continuation=VOCAB.continuation_mask(),
)
FIRST_WORD = len(SPECIAL)


def make_documents(seed: int, n_docs: int = 30) -> list[list[list[int]]]:
    rng = random.Random(seed)
    return [
        [
            [rng.randint(FIRST_WORD, len(VOCAB) - 1) for _ in range(rng.randint(1, 25))]
            for _ in range(rng.randint(1, 20))
        ]
        for _ in range(n_docs)
    ]


DOCUMENTS = make_documents(0)


def settings(**overrides) -> InstanceSettings:
    base = dict(
        pairs=PairConfig(max_seq_length=64),
        masking=MaskingConfig(max_predictions_per_seq=10),
        dupe_factor=2,
        seed=42,
        batch_size=2048,
    )
    base.update(overrides)
    return InstanceSettings(**base)


def run(documents=DOCUMENTS, bucket=3, dupe=0, s=None, stats=None):
    s = s or settings()
    stats = Counter() if stats is None else stats
    return list(record_batches(documents, bucket, dupe, s, TABLES, stats))


def records_of(batches: list[RecordBatch]) -> list[bytes]:
    return [r for b in batches for r in b.records]


def decoded(records: list[bytes]) -> dict[str, np.ndarray]:
    rows = [decode_example(r) for r in records]
    return {name: np.array([row[name] for row in rows]) for name in FEATURE_NAMES}


def unmasked_input_ids(d: dict[str, np.ndarray]) -> np.ndarray:
    """input_ids with the original tokens put back at the masked positions."""
    ids = d["input_ids"].copy()
    rows, slots = np.nonzero(d["masked_lm_weights"])
    ids[rows, d["masked_lm_positions"][rows, slots]] = d["masked_lm_ids"][rows, slots]
    return ids


# --------------------------------------------------------------------------------------------


def test_instance_settings_validation():
    with pytest.raises(ValueError, match="dupe_factor"):
        settings(dupe_factor=0)
    with pytest.raises(ValueError, match="max_predictions_per_seq"):
        settings(
            pairs=PairConfig(max_seq_length=8), masking=MaskingConfig(max_predictions_per_seq=9)
        )
    settings(pairs=PairConfig(max_seq_length=8), masking=MaskingConfig(max_predictions_per_seq=8))


def test_record_batches_deterministic_and_keyed():
    first = run()
    second = run()
    assert records_of(first) == records_of(second)
    assert [b.order_keys for b in first] == [b.order_keys for b in second]
    assert records_of(first) != records_of(run(s=settings(seed=43)))
    assert records_of(first) != records_of(run(dupe=1))
    assert records_of(first) != records_of(run(bucket=4))
    # dupe_factor does not enter a single pass's records
    assert records_of(first) == records_of(run(s=settings(dupe_factor=7)))


def test_record_batches_order_keys_and_bucket():
    batches = run(bucket=5)
    assert all(b.bucket == 5 for b in batches)
    keys = [k for b in batches for k in b.order_keys]
    assert len(keys) == len(records_of(batches))
    assert all(isinstance(k, int) and 0 <= k < 2**63 for k in keys)
    assert len(set(keys)) == len(keys)


def test_record_batches_batch_sizes():
    s = settings(batch_size=7)
    batches = run(s=s)
    sizes = [len(b.records) for b in batches]
    assert all(size == 7 for size in sizes[:-1])
    assert 1 <= sizes[-1] <= 7
    assert sum(sizes) == len(records_of(run()))
    assert len(run(s=settings(batch_size=2048))) == 1


def test_batch_size_does_not_change_pairs_or_order_keys():
    small = run(s=settings(batch_size=7))
    large = run(s=settings(batch_size=2048))
    d_small, d_large = decoded(records_of(small)), decoded(records_of(large))
    for name in ("input_mask", "segment_ids", "next_sentence_labels"):
        assert np.array_equal(d_small[name], d_large[name])
    assert np.array_equal(unmasked_input_ids(d_small), unmasked_input_ids(d_large))
    assert [k for b in small for k in b.order_keys] == [k for b in large for k in b.order_keys]


def test_records_follow_pairs_from_keyed_rng():
    # The pairs of pass d over bucket b come from python_rng(seed, "pairs", b, d), in document
    # order: re-create them and compare with the decoded (unmasked) records.
    s = settings()
    pair_rng = python_rng(s.seed, "pairs", 3, 1)
    pairs: list[SentencePair] = []
    for i in range(len(DOCUMENTS)):
        pairs.extend(create_pairs_from_document(DOCUMENTS, i, s.pairs, pair_rng, Counter()))
    packed = pack_pairs(pairs, TABLES.cls_id, TABLES.sep_id, s.pairs.max_seq_length)
    d = decoded(records_of(run(dupe=1, s=s)))
    assert np.array_equal(unmasked_input_ids(d), packed.input_ids)
    assert np.array_equal(d["segment_ids"], packed.segment_ids)
    assert np.array_equal(d["next_sentence_labels"][:, 0], packed.next_sentence_labels)
    assert np.array_equal(d["input_mask"].sum(axis=1), packed.lengths)


def test_single_batch_equals_keyed_pairs_masks_and_order():
    # The whole keyed-randomness contract: pairs from (seed, "pairs", b, d), masks from
    # (seed, "masks", b, d), shuffle keys from (seed, "order", b, d).
    s = settings()
    bucket, dupe = 6, 2
    pair_rng = python_rng(s.seed, "pairs", bucket, dupe)
    pairs: list[SentencePair] = []
    for i in range(len(DOCUMENTS)):
        pairs.extend(create_pairs_from_document(DOCUMENTS, i, s.pairs, pair_rng, Counter()))
    assert len(pairs) < s.batch_size
    expected = encode_pairs(pairs, s, TABLES, numpy_rng(s.seed, "masks", bucket, dupe), Counter())
    keys = numpy_rng(s.seed, "order", bucket, dupe).integers(
        0, 2**63 - 1, size=len(pairs), dtype=np.int64
    )
    (batch,) = run(bucket=bucket, dupe=dupe, s=s)
    assert batch.records == expected
    assert batch.order_keys == keys.tolist()


def test_records_follow_feature_contract():
    s = settings()
    records = records_of(run(s=s))
    lengths = feature_lengths(s.pairs.max_seq_length, s.masking.max_predictions_per_seq)
    for record in records[:50]:
        row = decode_example(record)
        assert sorted(row) == sorted(FEATURE_NAMES)
        assert {k: len(v) for k, v in row.items()} == lengths
    d = decoded(records)
    ids, mask = d["input_ids"], d["input_mask"]
    n = mask.sum(axis=1)
    assert (ids[:, 0] == VOCAB.cls_id).all()
    assert (ids[np.arange(len(ids)), n - 1] == VOCAB.sep_id).all()
    assert ((ids == 0) == (mask == 0)).all()  # padding exactly outside the mask
    assert (mask[:, :-1] >= mask[:, 1:]).all()  # mask is a prefix
    assert (d["segment_ids"] <= mask).all()
    assert ((ids == VOCAB.sep_id).sum(axis=1) == 2).all()
    assert set(np.unique(d["next_sentence_labels"]).tolist()) == {0, 1}
    w = d["masked_lm_weights"]
    assert set(np.unique(w).tolist()) <= {0.0, 1.0}
    pos = d["masked_lm_positions"]
    assert (np.take_along_axis(mask, pos, axis=1)[w == 1.0] == 1).all()
    assert (pos[w == 0.0] == 0).all() and (d["masked_lm_ids"][w == 0.0] == 0).all()


def test_stats_consistent_with_records():
    stats: Counter[str] = Counter()
    s = settings(batch_size=13)
    records = records_of(run(s=s, stats=stats))
    d = decoded(records)
    assert stats["instances"] == len(records) == stats["pairs"]
    assert stats["random_next"] == int(d["next_sentence_labels"].sum())
    assert stats["instance_tokens"] == int(d["input_mask"].sum())
    assert stats["padding_tokens"] == int((1 - d["input_mask"]).sum())
    weights = d["masked_lm_weights"]
    assert stats["masked_lm_predictions"] == int(weights.sum())
    assert (
        stats["masked_lm_masked"] + stats["masked_lm_kept"] + stats["masked_lm_random"]
        == stats["masked_lm_predictions"]
    )
    # [MASK] occurs in neither the documents nor the replacement ids
    at_positions = np.take_along_axis(d["input_ids"], d["masked_lm_positions"], axis=1)
    assert stats["masked_lm_masked"] == int(
        ((at_positions == VOCAB.mask_id) & (weights == 1)).sum()
    )
    assert int((d["input_ids"] == VOCAB.mask_id).sum()) == stats["masked_lm_masked"]
    kept = (at_positions == d["masked_lm_ids"]) & (weights == 1)
    # a random replacement can coincide with the original token, so "kept-looking" >= kept
    assert kept.sum() >= stats["masked_lm_kept"]
    assert stats["masked_lm_kept"] > 0 and stats["masked_lm_random"] > 0


def test_record_batches_empty_bucket_and_single_document():
    assert run(documents=[]) == []
    stats: Counter[str] = Counter()
    # one document of one-sentence chunks: every chunk needs a random B, none is possible
    batches = run(documents=[[[FIRST_WORD] * 70, [FIRST_WORD + 1] * 70]], stats=stats)
    assert batches == []
    assert stats["skipped_no_other_document"] == 2
    assert stats["instances"] == 0


def test_encode_pairs_direct():
    pairs = [
        SentencePair([10, 11, 12], [20, 21], False),
        SentencePair([30], [40, 41, 42, 43], True),
    ]
    s = settings(
        pairs=PairConfig(max_seq_length=12),
        masking=MaskingConfig(
            max_predictions_per_seq=4,
            masked_lm_prob=1.0,
            mask_token_prob=0.0,
            keep_token_prob=1.0,
            random_token_prob=0.0,
        ),
    )
    stats: Counter[str] = Counter()
    records = encode_pairs(pairs, s, TABLES, np.random.default_rng(0), stats)
    cls, sep = VOCAB.cls_id, VOCAB.sep_id
    rows = [decode_example(r) for r in records]
    assert rows[0]["input_ids"] == [cls, 10, 11, 12, sep, 20, 21, sep, 0, 0, 0, 0]
    assert rows[1]["input_ids"] == [cls, 30, sep, 40, 41, 42, 43, sep, 0, 0, 0, 0]
    assert rows[0]["input_mask"] == [1] * 8 + [0] * 4
    assert rows[0]["segment_ids"] == [0] * 5 + [1] * 3 + [0] * 4
    assert rows[1]["segment_ids"] == [0] * 3 + [1] * 5 + [0] * 4
    assert [r["next_sentence_labels"] for r in rows] == [[0], [1]]
    # 5 candidates, cap 4: four kept predictions; labels are the tokens at the positions
    for row in rows:
        assert row["masked_lm_weights"] == [1.0] * 4
        assert row["masked_lm_ids"] == [row["input_ids"][p] for p in row["masked_lm_positions"]]
    assert stats["instances"] == 2
    assert stats["instance_tokens"] == 16
    assert stats["padding_tokens"] == 8
    assert stats["masked_lm_predictions"] == stats["masked_lm_kept"] == 8
    # identical inputs and generator seed give identical bytes
    again = encode_pairs(pairs, s, TABLES, np.random.default_rng(0), Counter())
    assert again == records
