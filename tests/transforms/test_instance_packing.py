"""Packed rows: first-fit-decreasing plans, the packed columns, and their inverse."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from tests.transforms.test_instance_batches import TABLES, records_of, run, settings
from transforms.example_encoding import decode_example
from transforms.features import DYNAMIC, FULL_SENTENCES, kind_lengths, packed_prediction_slots
from transforms.instance_packing import plan_rows, unpack_row
from transforms.masking import MaskingConfig


def test_plan_rows_first_fit_decreasing_exact():
    # longest first: 90 opens row 0, 60 opens row 1, 40 → row 1 (100), 30 → row 0 (120),
    # 10 → row 0 would be 130 > 128 → row 1 (110); then 5 → row 0 (125)
    plan = plan_rows(np.array([30, 90, 10, 60, 40, 5]), 128, 4)
    assert plan.rows == 2
    assert plan.row.tolist() == [0, 0, 1, 1, 1, 0]
    # within a row, instances keep their order: row 0 holds 30, 90, 5
    assert plan.slot.tolist() == [0, 1, 0, 1, 2, 2]
    assert plan.offset.tolist() == [0, 30, 0, 10, 70, 120]


def test_plan_rows_respects_max_instances_and_one_per_row():
    lengths = np.full(10, 10)
    assert plan_rows(lengths, 128, 3).rows == 4
    assert plan_rows(lengths, 128, 1).rows == 10
    assert plan_rows(np.zeros(0, dtype=np.int64), 128, 3).rows == 0
    with pytest.raises(ValueError, match="lengths"):
        plan_rows(np.array([129]), 128, 3)
    with pytest.raises(ValueError, match="max_instances"):
        plan_rows(np.array([3]), 128, 0)


def test_plan_rows_fits_every_row_on_a_large_sample():
    rng = np.random.default_rng(7)
    lengths = rng.integers(1, 129, 5000)
    plan = plan_rows(lengths, 128, 3)
    per_row = np.bincount(plan.row, weights=lengths, minlength=plan.rows)
    counts = np.bincount(plan.row, minlength=plan.rows)
    assert per_row.max() <= 128 and counts.max() <= 3 and counts.min() >= 1
    # first fit never leaves two rows that could be merged by its own rule
    assert plan.rows < len(lengths) and lengths.sum() / (plan.rows * 128) > 0.9


def _instances(records: list[bytes], p: int) -> list[dict]:
    return [one for r in records for one in unpack_row(decode_example(r), p)]


def _key(one: dict) -> tuple:
    return tuple(tuple(np.asarray(v).tolist()) for _, v in sorted(one.items()))


@pytest.mark.parametrize("whole_word", [False, True])
def test_packed_rows_hold_exactly_the_unpacked_instances(whole_word):
    masking = MaskingConfig(max_predictions_per_seq=10, whole_word_mask=whole_word)
    plain = records_of(run(s=settings(masking=masking)))
    stats = Counter()
    packed = records_of(run(s=settings(masking=masking, pack_instances=3), stats=stats))
    assert len(packed) == stats["packed_rows"] < len(plain) == stats["instances"]
    unpacked = [decode_example(r) for r in plain]
    expected = [
        {k: np.asarray(v) for k, v in one.items()} for one in unpacked
    ]  # same masks, NSP labels, tokens: the instances of the unpacked run, as a multiset
    got = _instances(packed, 10)
    assert sorted(map(_key, got)) == sorted(map(_key, expected))
    lengths = kind_lengths(64, 10, max_instances=3, max_predictions_per_row=12)
    for r in packed:
        row = decode_example(r)
        assert {k: len(v) for k, v in row.items()} == lengths
        used = np.asarray(row["masked_lm_weights"]) > 0
        positions = np.asarray(row["masked_lm_positions"])[used]
        assert (np.diff(positions) > 0).all()
        assert sum(row["input_mask"]) == sum(1 for i in row["instance_ids"] if i)


def test_packed_padding_counts_rows():
    stats = Counter()
    records = records_of(run(s=settings(pack_instances=3), stats=stats))
    assert stats["padding_tokens"] == len(records) * 64 - stats["instance_tokens"]


def test_packed_dynamic_rows_hold_the_unmasked_instances():
    plain = records_of(run(s=settings(masking_kind=DYNAMIC, dupe_factor=1)))
    packed = records_of(run(s=settings(masking_kind=DYNAMIC, dupe_factor=1, pack_instances=4)))
    assert len(packed) < len(plain)
    expected = [{k: np.asarray(v) for k, v in decode_example(r).items()} for r in plain]
    assert sorted(map(_key, _instances(packed, 10))) == sorted(map(_key, expected))


def test_packing_needs_sentence_pairs():
    with pytest.raises(ValueError, match="packing needs input_mode"):
        settings(pack_instances=2, input_mode=FULL_SENTENCES)
    with pytest.raises(ValueError, match="pack_instances"):
        settings(pack_instances=-1)


def test_unpack_row_rejects_broken_layout():
    rows = [decode_example(r) for r in records_of(run(s=settings(pack_instances=3)))]
    row = next(r for r in rows if sum(r["next_sentence_weights"]) >= 2)
    assert len(unpack_row(row, 10)) == int(sum(row["next_sentence_weights"]))
    assert row["input_ids"][row["cls_positions"][1]] == TABLES.cls_id
    ids = list(row["instance_ids"])
    ids[row["cls_positions"][1]] = 1  # the second instance's [CLS] claimed by the first
    with pytest.raises(ValueError, match="one run"):
        unpack_row(dict(row, instance_ids=ids), 10)
    weights = [0.0] + list(row["next_sentence_weights"][1:])
    with pytest.raises(ValueError, match="after an unused"):
        unpack_row(dict(row, next_sentence_weights=weights), 10)


def test_packed_prediction_slots_hold_any_k_instances():
    from transforms.masking import prediction_budget

    assert packed_prediction_slots(128, 20, 3, 0.15) == 22
    assert packed_prediction_slots(512, 80, 3, 0.15) == 79
    assert packed_prediction_slots(512, 20, 3, 0.15) == 60  # capped: K × P
    assert packed_prediction_slots(10, 7, 1, 0.7) == 7  # 0.7 × 10 = 6.999...: floor 7, + 1
    rng = np.random.default_rng(3)
    for _ in range(2000):
        seq_len, k = int(rng.integers(8, 600)), int(rng.integers(1, 5))
        prob = float(rng.uniform(0.01, 0.5))
        p = int(rng.integers(1, seq_len))
        cuts = (
            np.sort(rng.choice(np.arange(1, seq_len), size=k - 1, replace=False)) if k > 1 else []
        )
        lengths = np.diff(np.concatenate(([0], cuts, [seq_len])))
        need = int(prediction_budget(lengths, prob, p).sum())
        assert need <= packed_prediction_slots(seq_len, p, k, prob)
