"""A tokenized document in a compact form: one flat int32 id array plus sentence offsets.

Cheap to pickle between Beam stages (two numpy arrays instead of thousands of Python ints).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numba
import numpy as np

from transforms.copy_kernel import copy_elements
from transforms.rejects import Reject


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


def kept_document(
    key: str, sentences: Sequence[str], ids: np.ndarray, counts: np.ndarray, tally: Counter[str]
) -> TokenizedDocument | Reject:
    """A document's token ids (``ids``: its sentences' ids one after the other; ``counts``: ids
    per sentence) as what the instance phases read: sentences that tokenize to nothing are
    dropped (``dropped_empty_sentence``), and a document left with none is a Reject
    (``dropped_empty_document``, its sentences joined by `` / ``). ``tally`` gains the counts
    of the kept document (``tokenized_documents``, ``tokenized_sentences``, ``tokens``,
    ``one_sentence_documents``)."""
    kept = counts[counts > 0]
    if len(kept) != len(counts):
        tally["dropped_empty_sentence"] += len(counts) - len(kept)
    if not len(kept):
        tally["dropped_empty_document"] += 1
        return Reject.of("dropped_empty_document", key, " / ".join(sentences))
    tally["tokenized_documents"] += 1
    tally["tokenized_sentences"] += len(kept)
    tally["tokens"] += len(ids)
    if len(kept) == 1:
        tally["one_sentence_documents"] += 1
    offsets = np.zeros(len(kept) + 1, dtype=np.int64)
    np.cumsum(kept, out=offsets[1:])
    return TokenizedDocument(key, ids, offsets)


@numba.njit(cache=True)
def _unpack(buf, words, positions, sizes, num_sentences):
    n_docs = len(positions)
    total_sentences = 0
    total_tokens = 0
    for d in range(n_docs):
        total_sentences += num_sentences[d]
        total_tokens += (sizes[d] - 8 * (num_sentences[d] + 1)) // 4
    tokens = np.empty(total_tokens, dtype=np.int32)
    starts = np.empty(total_sentences, dtype=np.int64)
    lengths = np.empty(total_sentences, dtype=np.int64)
    bounds = np.zeros(n_docs + 1, dtype=np.int64)
    s = 0
    t = 0
    for d in range(n_docs):
        p = positions[d]
        n = num_sentences[d]
        head = 8 * (n + 1)
        last = np.int64(0)
        for i in range(n + 1):
            value = np.int64(0)
            for k in range(8):
                value |= np.int64(buf[p + 8 * i + k]) << (8 * k)
            if i:
                starts[s] = t + last
                lengths[s] = value - last
                s += 1
            last = value
        if sizes[d] != head + 4 * last:
            return tokens, starts, lengths, bounds, d
        q = (p + head) // 4  # every document starts at a multiple of 4 bytes
        copy_elements(tokens, t, words, q, last)
        t += last
        bounds[d + 1] = s
    return tokens, starts, lengths, bounds, -1


@numba.njit(cache=True)
def _copy_ranges(src, starts, sizes, dest, positions):
    for i in range(len(starts)):
        copy_elements(dest, positions[i], src, starts[i], sizes[i])


def copy_ranges(
    src: np.ndarray, starts: np.ndarray, sizes: np.ndarray, dest: np.ndarray, positions: np.ndarray
) -> None:
    """``dest[positions[i] : positions[i] + sizes[i]] = src[starts[i] : starts[i] + sizes[i]]``
    for every i, in one compiled loop (uint8 arrays; int64 starts, sizes, positions). Raises
    ValueError, before copying anything, when a range lies outside ``src`` or ``dest``."""
    starts, sizes, positions = (np.asarray(a, dtype=np.int64) for a in (starts, sizes, positions))
    if len(starts) and (
        np.any(sizes < 0)
        or np.any(starts < 0)
        or np.any(positions < 0)
        or np.any(starts + sizes > len(src))
        or np.any(positions + sizes > len(dest))
    ):
        raise ValueError("a range lies outside its source or destination")
    _copy_ranges(src, starts, sizes, dest, positions)


def unpack_documents(
    buf: np.ndarray, positions: np.ndarray, sizes: np.ndarray, num_sentences: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Serialized documents (``to_bytes``) at ``positions`` in ``buf`` (uint8) laid end to end:
    (int32 tokens, int64 sentence starts in ``tokens``, sentence lengths, per-document sentence
    bounds), as ``transforms.instances.BucketLayout`` holds them. Raises DocumentSizeError
    when a document's size does not match its offsets."""
    ends = np.asarray(positions, dtype=np.int64) + np.asarray(sizes, dtype=np.int64)
    if len(buf) % 4 or np.any(np.asarray(positions) % 4) or np.any(ends > len(buf)):
        raise ValueError("serialized documents must start at multiples of 4 bytes, inside buf")
    tokens, starts, lengths, bounds, bad = _unpack(
        buf,
        buf.view("<i4"),
        np.asarray(positions, dtype=np.int64),
        np.asarray(sizes, dtype=np.int64),
        np.asarray(num_sentences, dtype=np.int64),
    )
    if bad >= 0:
        raise DocumentSizeError(bad, int(sizes[bad]))
    return tokens, starts, lengths, bounds


class DocumentSizeError(ValueError):
    """Document ``index`` of a batch: its ``size`` in bytes does not match its offsets."""

    def __init__(self, index: int, size: int) -> None:
        super().__init__(f"document {index}: {size} bytes do not match its offsets")
        self.index = index
        self.size = size
