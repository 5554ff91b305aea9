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


@pytest.mark.parametrize(
    ("ids", "named"),
    [
        ({"mask_id": 50}, "mask_id=50"),
        ({"mask_id": 80}, "mask_id=80"),
        ({"unk_id": 50}, "unk_id=50"),
        ({"unk_id": 77}, "unk_id=77"),
        ({"cls_id": 50, "sep_id": 3}, "cls_id=50"),
    ],
)
def test_every_special_id_lies_below_the_vocab_size(ids, named):
    base = {"cls_id": 2, "sep_id": 3, "mask_id": 4, "unk_id": 1, "pad_id": 0}
    with pytest.raises(ValueError, match=f"must be < vocab_size, got {named} with vocab_size=50"):
        SpecialIds(**(base | ids), vocab_size=50)
    # The same ids with the size unknown, or large enough, are fine.
    SpecialIds(**(base | ids))
    assert SpecialIds(**(base | ids), vocab_size=100).vocab_size == 100
    with pytest.raises(ValueError, match="must be < vocab_size, got mask_id=4"):
        SpecialIds.from_manifest({"cls": 0, "sep": 1, "mask": 4, "pad": 2, "unk": 3}, 4)


@pytest.mark.parametrize("name", ["mask_id", "unk_id", "cls_id"])
def test_special_ids_are_not_negative(name):
    with pytest.raises(ValueError, match=f"special ids must be >= 0, got {name}=-1"):
        SpecialIds(**{name: -1})


def test_a_vocab_without_unk_has_no_unk_to_check():
    assert SpecialIds(2, 3, 4, None, 0, 5).unk_id is None
