"""Reading a record as a person: segments, masked slots and their kinds, the NSP label."""

from __future__ import annotations

from transforms.record_view import describe_record, render_record
from transforms.special_ids import SpecialIds

TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog"]
IDS = SpecialIds(cls_id=2, sep_id=3, mask_id=4)


def record(label: int = 1) -> dict:
    # [CLS] the cat [SEP] sat on mat [SEP] [PAD]; slot 0: cat→[MASK], 1: sat kept, 2: mat→dog
    return {
        "input_ids": [2, 5, 4, 3, 7, 8, 10, 3, 0],
        "input_mask": [1] * 8 + [0],
        "segment_ids": [0, 0, 0, 0, 1, 1, 1, 1, 0],
        "masked_lm_positions": [2, 4, 6, 0],
        "masked_lm_ids": [6, 7, 9, 0],
        "masked_lm_weights": [1.0, 1.0, 1.0, 0.0],
        "next_sentence_labels": [label],
    }


def test_describe_names_segments_and_mask_kinds():
    d = describe_record(record(), TOKENS, IDS)
    assert d["length"] == 8
    assert d["segments"] == {"A": ["the", "[MASK]"], "B": ["sat", "on", "dog"]}
    assert d["masked"] == [
        {"position": 2, "segment": "A", "original": "cat", "shown": "[MASK]", "kind": "mask"},
        {"position": 4, "segment": "B", "original": "sat", "shown": "sat", "kind": "kept"},
        {"position": 6, "segment": "B", "original": "mat", "shown": "dog", "kind": "random"},
    ]
    assert d["next_sentence"].startswith("RandomNext")
    assert describe_record(record(0), TOKENS, IDS)["next_sentence"].startswith("IsNext")


def test_without_vocab_ids_are_shown():
    d = describe_record(record(), None, IDS)
    assert d["segments"]["A"] == ["#5", "#4"]


def test_render_marks_masked_tokens():
    text = render_record(describe_record(record(), TOKENS, IDS), "#0")
    assert "A: the [[MASK]←cat]" in text
    assert "B: [sat←sat] on [dog←mat]" in text
    assert "masks: 1 [MASK], 1 random, 1 kept unchanged" in text
