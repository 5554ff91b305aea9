"""Record statistics over shards (transforms.record_stats)."""

from __future__ import annotations

import json
import pickle
from collections import Counter

import numpy as np
import pytest

from tokenizer.vocab import Vocab
from transforms.example_encoding import decode_example
from transforms.features import FEATURE_NAMES
from transforms.instance_batches import InstanceSettings, TokenTables, record_batches
from transforms.instances import PairConfig
from transforms.masking import MaskingConfig
from transforms.record_stats import ShardSetStats
from transforms.special_ids import SpecialIds

# A tiny vocabulary: ids 0-4 special, 5-9 words.
TOKENS = ["[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "a", "b", "c", "d", "e"]
IDS = SpecialIds(cls_id=1, sep_id=2, mask_id=3, unk_id=4, pad_id=0)
L, P = 8, 3


def batch(rows: list[dict]) -> dict[str, np.ndarray]:
    """Records from ``input`` (the ids as written) and ``slots`` [(position, label), ...]."""
    n = len(rows)
    out = {
        "input_ids": np.zeros((n, L), np.int64),
        "input_mask": np.zeros((n, L), np.int64),
        "segment_ids": np.zeros((n, L), np.int64),
        "masked_lm_positions": np.zeros((n, P), np.int64),
        "masked_lm_ids": np.zeros((n, P), np.int64),
        "masked_lm_weights": np.zeros((n, P), np.float32),
        "next_sentence_labels": np.zeros((n, 1), np.int64),
    }
    for i, row in enumerate(rows):
        ids = row["input"]
        out["input_ids"][i, : len(ids)] = ids
        out["input_mask"][i, : len(ids)] = 1
        first_sep = ids.index(2)
        out["segment_ids"][i, first_sep + 1 : len(ids)] = 1
        for j, (position, label) in enumerate(row.get("slots", [])):
            out["masked_lm_positions"][i, j] = position
            out["masked_lm_ids"][i, j] = label
            out["masked_lm_weights"][i, j] = 1.0
        out["next_sentence_labels"][i, 0] = row["label"]
    return out


# Originals: R0 [CLS] a b [SEP] c d [SEP]; R1 [CLS] a [UNK] [SEP] b b c [SEP] (full length);
# R2 [CLS] a [SEP] (one [SEP]: malformed, short); R3 [CLS] e e [SEP] a [SEP].
R0 = {"input": [1, 3, 6, 2, 7, 9, 2], "slots": [(1, 5), (4, 7), (5, 8)], "label": 0}
R1 = {"input": [1, 5, 3, 2, 6, 6, 7, 2], "slots": [(2, 4)], "label": 1}
R2 = {"input": [1, 5, 2], "label": 0}
R3 = {"input": [1, 9, 9, 2, 6, 2], "slots": [(4, 5)], "label": 0}


def hand_built() -> ShardSetStats:
    stats = ShardSetStats(L, P, IDS, top_k=4)
    stats.update(batch([R0, R1, R2]), "s0")
    stats.update(batch([R3]), "s1")
    stats.update(batch([]), "s2")
    return stats


def test_every_figure_of_hand_built_batches():
    report = hand_built().to_json(TOKENS)
    assert report["max_seq_length"] == L
    assert report["max_predictions_per_seq"] == P
    assert report["special_ids"] == {
        "cls_id": 1,
        "sep_id": 2,
        "mask_id": 3,
        "unk_id": 4,
        "pad_id": 0,
    }
    assert report["records"] == 4
    assert report["records_per_shard"] == {"s0": 3, "s1": 1, "s2": 0}
    assert report["is_next_records"] == 3
    assert report["is_next_ratio"] == 0.75
    assert report["length"] == {
        "histogram": [0, 0, 0, 1, 0, 0, 1, 1, 1],
        "min": 3,
        "mean": 6.0,
        "max": 8,
    }
    assert report["full_length_records"] == 1
    assert report["full_length_share"] == 0.25
    assert report["short_records"] == 1  # length 3 < 8 // 2
    assert report["short_share"] == 0.25
    assert report["real_tokens"] == 24
    assert report["padding_tokens"] == 8
    assert report["padding_fraction"] == 0.25
    assert report["predictions_per_instance"] == {
        "histogram": [1, 2, 0, 1],
        "mean": 1.25,
        "total": 5,
    }
    assert report["masked_lm_split"] == {
        "counts": {"mask": 2, "random": 2, "kept": 1},
        "fractions": {"mask": 0.4, "random": 0.4, "kept": 0.2},
    }
    # The [UNK] of R1 is masked: it counts once its label is put back.
    assert report["unk_tokens"] == 1
    assert report["unk_rate"] == 1 / 24
    # a 4, b 3, c 2, e 2 (ties by id), then [UNK] 1 and d 1 fall beyond top_k = 4; [MASK] never.
    assert report["top_tokens"] == [
        {"id": 5, "token": "a", "count": 4},
        {"id": 6, "token": "b", "count": 3},
        {"id": 7, "token": "c", "count": 2},
        {"id": 9, "token": "e", "count": 2},
    ]
    assert report["segment_a_length"] == {
        "histogram": [0, 1, 3, 0, 0, 0, 0, 0, 0],
        "min": 1,
        "mean": 1.75,
        "max": 2,
    }
    assert report["segment_b_length"] == {
        "histogram": [1, 1, 1, 1, 0, 0, 0, 0, 0],
        "min": 0,
        "mean": 1.5,
        "max": 3,
    }
    assert report["malformed_records"] == 1
    assert json.loads(json.dumps(report)) == report  # plain JSON types only


def test_token_counts_and_top_tokens_without_a_vocabulary():
    stats = hand_built()
    stats.top_k = 10
    assert stats.token_counts.tolist() == [0, 4, 7, 0, 1, 4, 3, 2, 1, 2]
    assert stats.to_json()["top_tokens"] == [
        {"id": 5, "token": None, "count": 4},
        {"id": 6, "token": None, "count": 3},
        {"id": 7, "token": None, "count": 2},
        {"id": 9, "token": None, "count": 2},
        {"id": 4, "token": None, "count": 1},
        {"id": 8, "token": None, "count": 1},
    ]


def test_a_random_replacement_by_sep_does_not_move_the_segments():
    # The reference's random replacement may write [SEP]: segments come from the original ids.
    row = {"input": [1, 5, 2, 2, 7, 2], "slots": [(3, 6)], "label": 0}
    stats = ShardSetStats(L, P, IDS)
    stats.update(batch([row]), "s")
    report = stats.to_json()
    assert report["segment_a_length"]["mean"] == 1.0
    assert report["segment_b_length"]["mean"] == 2.0
    assert report["malformed_records"] == 0
    assert report["masked_lm_split"]["counts"] == {"mask": 0, "random": 1, "kept": 0}


def test_padding_content_and_one_dimensional_labels():
    # Only input_mask decides what is real; a (N,) label array is accepted too.
    records = batch([R0, R3])
    records["input_ids"][records["input_mask"] == 0] = 7
    records["next_sentence_labels"] = records["next_sentence_labels"].ravel()
    stats = ShardSetStats(L, P, IDS)
    stats.update(records, "s")
    expected = ShardSetStats(L, P, IDS)
    expected.update(batch([R0, R3]), "s")
    assert stats == expected


def test_unk_id_none_and_unk_id_never_seen():
    stats = ShardSetStats(L, P, SpecialIds(cls_id=1, sep_id=2, mask_id=3, unk_id=None))
    stats.update(batch([R0]), "s")
    report = stats.to_json()
    assert report["unk_tokens"] is None
    assert report["unk_rate"] is None
    assert report["special_ids"]["unk_id"] is None

    stats = ShardSetStats(L, P, SpecialIds(cls_id=1, sep_id=2, mask_id=3, unk_id=30000))
    stats.update(batch([R0]), "s")
    assert stats.to_json()["unk_tokens"] == 0
    assert stats.to_json()["unk_rate"] == 0.0


def test_empty_input():
    report = ShardSetStats(L, P, IDS).to_json(TOKENS)
    assert report["records"] == 0
    assert report["records_per_shard"] == {}
    for key in (
        "is_next_ratio",
        "full_length_share",
        "short_share",
        "padding_fraction",
        "unk_rate",
    ):
        assert report[key] is None, key
    assert report["length"] == {"histogram": [0] * (L + 1), "min": None, "mean": None, "max": None}
    assert report["predictions_per_instance"] == {
        "histogram": [0] * (P + 1),
        "mean": None,
        "total": 0,
    }
    assert report["masked_lm_split"]["fractions"] == {"mask": None, "random": None, "kept": None}
    assert report["unk_tokens"] == 0
    assert report["top_tokens"] == []
    assert report["segment_a_length"]["mean"] is None
    assert report["malformed_records"] == 0
    json.dumps(report)

    stats = ShardSetStats(L, P, IDS)
    stats.update(batch([]), "empty-shard")
    assert stats.to_json()["records_per_shard"] == {"empty-shard": 0}
    assert stats.to_json()["records"] == 0


def random_batch(rng: np.random.Generator, n: int, vocab: int) -> dict[str, np.ndarray]:
    rows = []
    for _ in range(n):
        length = int(rng.integers(3, L + 1))
        ids = rng.integers(5, vocab, length).tolist()
        ids[0] = 1
        ids[int(rng.integers(1, length - 1))] = 2
        ids[-1] = 2
        candidates = [i for i in range(1, length - 1) if ids[i] != 2]
        k = int(rng.integers(0, min(P, len(candidates)) + 1))
        positions = sorted(rng.choice(candidates, k, replace=False).tolist()) if k else []
        slots = []
        for position in positions:
            slots.append((position, ids[position]))
            ids[position] = int(rng.choice([3, ids[position], int(rng.integers(5, vocab))]))
        rows.append({"input": ids, "slots": slots, "label": int(rng.integers(0, 2))})
    return batch(rows)


def test_merge_equals_a_single_pass():
    rng = np.random.default_rng(7)
    # The second half uses a larger vocabulary, so the token count arrays differ in size.
    batches = [(random_batch(rng, 20, 10 if i < 3 else 500), f"shard-{i % 4}") for i in range(6)]
    single = ShardSetStats(L, P, IDS)
    for records, shard in batches:
        single.update(records, shard)

    left, right = ShardSetStats(L, P, IDS), ShardSetStats(L, P, IDS)
    for i, (records, shard) in enumerate(batches):
        (left if i % 2 else right).update(records, shard)
    right_before = pickle.dumps(right)
    left.merge(right)
    assert left == single
    assert left.to_json(TOKENS) == single.to_json(TOKENS)
    assert pickle.dumps(right) == right_before  # the merged-in accumulator is unchanged

    # And in the other direction (small token array into large, large into small).
    small, large = ShardSetStats(L, P, IDS), ShardSetStats(L, P, IDS)
    for i, (records, shard) in enumerate(batches):
        (small if i < 3 else large).update(records, shard)
    assert small.token_counts.size < large.token_counts.size
    small_copy = pickle.loads(pickle.dumps(small))
    small.merge(large)
    large.merge(small_copy)
    assert small == single
    assert large == single


def test_pickle_round_trip_keeps_accumulating():
    stats = hand_built()
    restored = pickle.loads(pickle.dumps(stats))
    assert restored == stats
    assert restored.to_json(TOKENS) == stats.to_json(TOKENS)
    restored.update(batch([R3]), "s1")
    stats.update(batch([R3]), "s1")
    assert restored == stats
    assert restored.to_json()["records_per_shard"]["s1"] == 2


def test_merge_refuses_different_sizes_or_ids():
    stats = ShardSetStats(L, P, IDS)
    with pytest.raises(ValueError, match="cannot merge"):
        stats.merge(ShardSetStats(L + 1, P, IDS))
    with pytest.raises(ValueError, match="cannot merge"):
        stats.merge(ShardSetStats(L, P, SpecialIds()))


def test_bad_batches_are_refused():
    stats = ShardSetStats(L, P, IDS)
    good = batch([R0, R1])
    with pytest.raises(ValueError, match="lacks feature"):
        stats.update({k: v for k, v in good.items() if k != "segment_ids"}, "s")
    with pytest.raises(ValueError, match=r"input_mask must have shape \(N, 8\)"):
        stats.update({**good, "input_mask": good["input_mask"][:, :5]}, "s")
    with pytest.raises(ValueError, match="same number of records"):
        stats.update({**good, "masked_lm_ids": good["masked_lm_ids"][:1]}, "s")
    positions = good["masked_lm_positions"].copy()
    positions[0, 0] = L
    with pytest.raises(ValueError, match="masked_lm_positions"):
        stats.update({**good, "masked_lm_positions": positions}, "s")
    ids = good["input_ids"].copy()
    ids[1, 4] = -5
    with pytest.raises(ValueError, match="non-negative"):
        stats.update({**good, "input_ids": ids}, "s")
    assert stats == ShardSetStats(L, P, IDS)  # nothing was counted


# -- against records written by the project's own encoder --------------------------------------

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]"]
VOCAB = Vocab.from_bytes("\n".join(SPECIAL + [f"w{i}" for i in range(300)]).encode())


def encoded_records(max_seq_length: int = 64, max_predictions: int = 10) -> dict[str, np.ndarray]:
    import random

    rng = random.Random(3)
    documents = [
        [
            [rng.randint(len(SPECIAL), len(VOCAB) - 1) for _ in range(rng.randint(1, 25))]
            for _ in range(rng.randint(1, 20))
        ]
        for _ in range(60)
    ]
    settings = InstanceSettings(
        pairs=PairConfig(max_seq_length=max_seq_length),
        masking=MaskingConfig(max_predictions_per_seq=max_predictions),
        seed=11,
    )
    tables = TokenTables(
        ids=VOCAB.special_ids(),
        replacement_ids=VOCAB.replacement_ids(),
        is_continuation=VOCAB.continuation_mask(),
    )
    records = [
        decode_example(record)
        for dupe in range(4)
        for b in record_batches(documents, 0, dupe, settings, tables, Counter())
        for record in b.records
    ]
    return {name: np.array([r[name] for r in records]) for name in FEATURE_NAMES}


def test_records_of_the_encoder():
    arrays = encoded_records()
    ids = SpecialIds(
        cls_id=VOCAB.cls_id,
        sep_id=VOCAB.sep_id,
        mask_id=VOCAB.mask_id,
        unk_id=VOCAB.unk_id,
        pad_id=0,
    )
    stats = ShardSetStats(64, 10, ids)
    stats.update(arrays, "all")
    report = stats.to_json(VOCAB.tokens)
    n = len(arrays["input_ids"])
    assert report["records"] == n > 500
    assert report["malformed_records"] == 0
    assert report["unk_tokens"] == 0

    # Segment lengths agree with segment_ids: A + [CLS] + [SEP] are segment 0, B + [SEP] segment 1.
    real = arrays["input_mask"] != 0
    seg_b = ((arrays["segment_ids"] == 1) & real).sum(axis=1) - 1
    seg_a = ((arrays["segment_ids"] == 0) & real).sum(axis=1) - 2
    assert report["segment_a_length"]["histogram"] == np.bincount(seg_a, minlength=65).tolist()
    assert report["segment_b_length"]["histogram"] == np.bincount(seg_b, minlength=65).tolist()

    fractions = report["masked_lm_split"]["fractions"]
    assert fractions["mask"] == pytest.approx(0.8, abs=0.03)
    assert fractions["random"] == pytest.approx(0.1, abs=0.03)
    assert fractions["kept"] == pytest.approx(0.1, abs=0.03)
    assert report["is_next_records"] == int((arrays["next_sentence_labels"] == 0).sum())
    assert all(entry["token"].startswith("w") for entry in report["top_tokens"])
    assert report["predictions_per_instance"]["total"] == int(
        (arrays["masked_lm_weights"] > 0).sum()
    )
