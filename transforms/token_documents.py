"""A tokenized document in a compact form: one flat int32 id array plus sentence offsets.

Cheap to pickle between Beam stages (two numpy arrays instead of thousands of Python ints).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np


@dataclass(frozen=True)
class TokenizedDocument:
    """``key`` identifies the document; sentence ``i`` is ``ids[offsets[i]:offsets[i + 1]]``."""

    key: str
    ids: np.ndarray
    offsets: np.ndarray

    @classmethod
    def from_sentences(cls, key: str, sentences: Sequence[Sequence[int]]) -> TokenizedDocument:
        lengths = np.fromiter((len(s) for s in sentences), dtype=np.int64, count=len(sentences))
        offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        ids = np.array(list(chain.from_iterable(sentences)), dtype=np.int32)
        return cls(key, ids, offsets)

    @property
    def num_sentences(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def sentences(self) -> list[list[int]]:
        """Sentences as lists of ints (the form pair creation works on)."""
        flat = self.ids.tolist()
        bounds = self.offsets.tolist()
        return [flat[bounds[i] : bounds[i + 1]] for i in range(len(bounds) - 1)]

    def to_bytes(self) -> bytes:
        """Serialized form: int64 sentence offsets (num_sentences + 1), then int32 ids."""
        return self.offsets.astype("<i8").tobytes() + self.ids.astype("<i4").tobytes()

    @classmethod
    def from_bytes(cls, key: str, data: bytes, num_sentences: int) -> TokenizedDocument:
        """Inverse of ``to_bytes``; raises ValueError when ``data`` has the wrong size."""
        head = 8 * (num_sentences + 1)
        offsets = np.frombuffer(data, dtype="<i8", count=num_sentences + 1)
        if len(data) != head + 4 * int(offsets[-1]):
            raise ValueError(f"document {key}: {len(data)} bytes do not match its offsets")
        ids = np.frombuffer(data, dtype="<i4", offset=head)
        return cls(key, ids, offsets)
