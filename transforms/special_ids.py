"""A vocabulary's special token ids: the one record of them that checks, statistics, record views
and instance creation share. Google's BERT vocabularies (uncased and cased) are the default."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SpecialIds:
    """Special token ids (Google's layout by default: ``[PAD]`` 0, ``[UNK]`` 100, ``[CLS]`` 101,
    ``[SEP]`` 102, ``[MASK]`` 103) and, when known, the vocabulary size: ids then lie in
    ``[0, vocab_size)``. ``unk_id`` None: the vocabulary has no ``[UNK]``."""

    cls_id: int = 101
    sep_id: int = 102
    mask_id: int = 103
    unk_id: int | None = 100
    pad_id: int = 0
    vocab_size: int | None = None

    def __post_init__(self) -> None:
        """Raises ValueError when [CLS], [SEP] and pad share an id, or when any id given (unk
        None excepted) is negative or, with a known ``vocab_size``, not below it; the message
        names the id at fault."""
        if len({self.cls_id, self.sep_id, self.pad_id}) != 3:
            raise ValueError(f"[CLS], [SEP] and pad ids must differ: {self}")
        given = {name: value for name, value in self.ids().items() if value is not None}
        for name, value in given.items():
            if value < 0:
                raise ValueError(f"special ids must be >= 0, got {name}={value}: {self}")
        if self.vocab_size is None:
            return
        for name, value in given.items():
            if value >= self.vocab_size:
                raise ValueError(
                    f"special ids must be < vocab_size, got {name}={value} with vocab_size="
                    f"{self.vocab_size} (ids lie in [0, {self.vocab_size})): {self}"
                )

    def ids(self) -> dict[str, int | None]:
        """The five ids by field name (``cls_id`` ... ``pad_id``), without the vocabulary size."""
        return {
            "cls_id": self.cls_id,
            "sep_id": self.sep_id,
            "mask_id": self.mask_id,
            "unk_id": self.unk_id,
            "pad_id": self.pad_id,
        }

    @classmethod
    def from_manifest(cls, special: Mapping[str, int], vocab_size: int | None = None) -> SpecialIds:
        """The ids of a manifest's ``special_ids`` section (keys ``cls sep mask unk pad``)."""
        return cls(
            special["cls"],
            special["sep"],
            special["mask"],
            special.get("unk"),
            special["pad"],
            vocab_size,
        )


GOOGLE_IDS = SpecialIds()
"""The ids of google-research/bert's vocabularies (assumed when a shard set has no vocabulary)."""


def refuse_ids_outside_vocabulary(outside: int, vocab_size: int) -> None:
    """Raises ValueError when ``outside`` (a count a compiled kernel made, which cannot check
    its indexing as numpy does) token ids lay outside a vocabulary of ``vocab_size`` ids."""
    if outside:
        raise ValueError(
            f"{outside} token ids lie outside the vocabulary's {vocab_size} ids: "
            "the token files and the vocabulary do not match"
        )
