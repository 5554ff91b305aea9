from __future__ import annotations

import pytest

from transforms.special_ids import GOOGLE_IDS, SpecialIds


def test_google_layout_is_the_default():
    assert GOOGLE_IDS.ids() == {
        "cls_id": 101,
        "sep_id": 102,
        "mask_id": 103,
        "unk_id": 100,
        "pad_id": 0,
    }
    assert GOOGLE_IDS.vocab_size is None


def test_from_a_manifest_section():
    ids = SpecialIds.from_manifest({"cls": 2, "sep": 3, "mask": 4, "pad": 0}, 50)
    assert ids == SpecialIds(2, 3, 4, None, 0, 50)
    with pytest.raises(ValueError, match="must be < vocab_size"):
        SpecialIds.from_manifest({"cls": 2, "sep": 3, "mask": 4, "pad": 0, "unk": 1}, 3)
