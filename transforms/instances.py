"""Sentence-pair creation, as google-research/bert's ``create_instances_from_document`` does it.

A document is a list of sentences, each a list of token ids. For each document this module chooses
a target length, accumulates sentences into chunks, splits each chunk into A and B (B being the
actual continuation, or a random span of another document with the unused sentences put back),
and truncates the pair to fit. Masking is separate (``transforms.masking``).

One deliberate difference from the reference, on by default: a random B never comes from the
same document (``allow_same_document_random_next=True`` restores the reference, which after ten
failed draws, and always with a single document, takes B from the same document yet labels it
random). With a single document and the fix on, a chunk that needs a random B is skipped and
counted (``skipped_no_other_document``).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

Sentence = Sequence[int]
Document = Sequence[Sentence]


@dataclass(frozen=True)
class PairConfig:
    """Parameters of pair creation. ``random_next_prob`` is 0.5 in BERT; tests use 0 and 1."""

    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    random_next_prob: float = 0.5
    allow_same_document_random_next: bool = False

    def __post_init__(self) -> None:
        if self.max_seq_length < 5:
            raise ValueError(
                f"max_seq_length must be at least 5 ([CLS] a [SEP] b [SEP]), got {self.max_seq_length}"
            )
        for name in ("short_seq_prob", "random_next_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {value}")

    @property
    def max_num_tokens(self) -> int:
        """Tokens available to A and B together: max_seq_length minus [CLS] and two [SEP]."""
        return self.max_seq_length - 3


@dataclass(frozen=True)
class SentencePair:
    """Segments A and B (token ids, already truncated) and whether B is a random span."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool


def truncation_counts(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """Tokens the reference removes from A and from B to fit ``max_num_tokens``.

    The reference removes one token at a time from the longer segment (from B on a tie), so
    it first evens the lengths, then alternates B, A, B, ...; this is that result in O(1).
    """
    excess = len_a + len_b - max_num_tokens
    if excess <= 0:
        return 0, 0
    if len_a > len_b:
        even = min(excess, len_a - len_b)
        cut_a, cut_b = even, 0
    else:
        even = min(excess, len_b - len_a)
        cut_a, cut_b = 0, even
    rest = excess - even
    return cut_a + rest // 2, cut_b + (rest + 1) // 2


def truncate_pair(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random
) -> tuple[list[int], list[int], int]:
    """Truncates the pair as the reference does: each removed token comes off the longer segment,
    from the front or the back with probability 1/2 each.

    The removals per segment follow ``truncation_counts``; how many of a segment's ``r`` removals
    come off the front is the number of heads in ``r`` fair coin flips (one random bit each), the
    same distribution as the reference's token-by-token loop, in O(1) Python steps. Returns the
    truncated copies and the number of tokens removed.
    """
    cut_a, cut_b = truncation_counts(len(tokens_a), len(tokens_b), max_num_tokens)
    if not cut_a and not cut_b:
        return tokens_a, tokens_b, 0
    front_a = rng.getrandbits(cut_a).bit_count() if cut_a else 0
    front_b = rng.getrandbits(cut_b).bit_count() if cut_b else 0
    a = tokens_a[front_a : len(tokens_a) - (cut_a - front_a)]
    b = tokens_b[front_b : len(tokens_b) - (cut_b - front_b)]
    return a, b, cut_a + cut_b


def uniform_int(rng: random.Random, low: int, high: int) -> int:
    """A uniform integer in [low, high] from one ``rng.random()`` draw: several times cheaper than
    ``randint``, with a relative bias below ``(high - low + 1) / 2**53`` (nil for these ranges)."""
    return min(high, low + int(rng.random() * (high - low + 1)))


def _random_document_index(
    n_documents: int, document_index: int, cfg: PairConfig, rng: random.Random
) -> int | None:
    """Index of the document a random B comes from, or None when no other document exists."""
    if cfg.allow_same_document_random_next:
        # The reference: up to ten draws, keeping the last one even if it is this document.
        random_index = document_index
        for _ in range(10):
            random_index = uniform_int(rng, 0, n_documents - 1)
            if random_index != document_index:
                break
        return random_index
    if n_documents < 2:
        return None
    random_index = uniform_int(rng, 0, n_documents - 2)
    return random_index + 1 if random_index >= document_index else random_index


def create_pairs_from_document(
    documents: Sequence[Document],
    document_index: int,
    cfg: PairConfig,
    rng: random.Random,
    stats: Counter[str],
) -> Iterator[SentencePair]:
    """Yields the sentence pairs of ``documents[document_index]`` for one dupe pass.

    ``documents`` are the other documents random B spans may come from (a bucket). Every
    document must hold at least one sentence with at least one token. ``stats`` is updated with
    ``pairs``, ``random_next``, ``single_sentence_chunks`` (chunks whose B must be random),
    ``truncated_pairs``, ``truncated_tokens``, ``short_target_documents`` and
    ``skipped_no_other_document``.
    """
    document = documents[document_index]
    max_num_tokens = cfg.max_num_tokens
    target_seq_length = max_num_tokens
    if rng.random() < cfg.short_seq_prob:
        target_seq_length = uniform_int(rng, 2, max_num_tokens)
        stats["short_target_documents"] += 1

    current_chunk: list[Sentence] = []
    current_length = 0
    i = 0
    while i < len(document):
        segment = document[i]
        current_chunk.append(segment)
        current_length += len(segment)
        if i == len(document) - 1 or current_length >= target_seq_length:
            if current_chunk:
                a_end = 1
                if len(current_chunk) >= 2:
                    a_end = uniform_int(rng, 1, len(current_chunk) - 1)
                tokens_a: list[int] = []
                for j in range(a_end):
                    tokens_a.extend(current_chunk[j])

                tokens_b: list[int] = []
                if len(current_chunk) == 1:
                    stats["single_sentence_chunks"] += 1
                    is_random_next = True
                else:
                    is_random_next = rng.random() < cfg.random_next_prob
                skip = False
                if is_random_next:
                    target_b_length = target_seq_length - len(tokens_a)
                    random_index = _random_document_index(len(documents), document_index, cfg, rng)
                    if random_index is None:
                        skip = True
                    else:
                        random_document = documents[random_index]
                        random_start = uniform_int(rng, 0, len(random_document) - 1)
                        for j in range(random_start, len(random_document)):
                            tokens_b.extend(random_document[j])
                            if len(tokens_b) >= target_b_length:
                                break
                    # The unused sentences of this chunk go back to the document.
                    i -= len(current_chunk) - a_end
                else:
                    for j in range(a_end, len(current_chunk)):
                        tokens_b.extend(current_chunk[j])

                if skip:
                    stats["skipped_no_other_document"] += 1
                else:
                    tokens_a, tokens_b, removed = truncate_pair(
                        tokens_a, tokens_b, max_num_tokens, rng
                    )
                    if removed:
                        stats["truncated_pairs"] += 1
                        stats["truncated_tokens"] += removed
                    if not tokens_a or not tokens_b:
                        raise AssertionError("empty segment after truncation")
                    stats["pairs"] += 1
                    stats["random_next"] += int(is_random_next)
                    yield SentencePair(tokens_a, tokens_b, is_random_next)
            current_chunk = []
            current_length = 0
        i += 1


@dataclass(frozen=True)
class PackedPairs:
    """Pairs laid out as ``[CLS] A [SEP] B [SEP]`` rows, zero-padded to ``max_seq_length``.

    ``input_ids`` int32 (N, L); ``segment_ids`` int8 (N, L); ``lengths`` int32 (N,) real tokens;
    ``next_sentence_labels`` int8 (N,) with 0 = IsNext, 1 = random next.
    """

    input_ids: np.ndarray
    segment_ids: np.ndarray
    lengths: np.ndarray
    next_sentence_labels: np.ndarray

    def __len__(self) -> int:
        return int(self.lengths.shape[0])


def pack_pairs(
    pairs: Sequence[SentencePair], cls_id: int, sep_id: int, max_seq_length: int
) -> PackedPairs:
    """Lays pairs out as fixed-length rows (see ``PackedPairs``), in one vectorized scatter."""
    n = len(pairs)
    len_a = np.fromiter((len(p.tokens_a) for p in pairs), dtype=np.int64, count=n)
    len_b = np.fromiter((len(p.tokens_b) for p in pairs), dtype=np.int64, count=n)
    lengths = len_a + len_b + 3
    if n and lengths.max() > max_seq_length:
        raise ValueError(
            f"pair of {int(lengths.max())} tokens exceeds max_seq_length {max_seq_length}"
        )
    flat: list[int] = []
    for p in pairs:
        flat.append(cls_id)
        flat.extend(p.tokens_a)
        flat.append(sep_id)
        flat.extend(p.tokens_b)
        flat.append(sep_id)
    rows = np.repeat(np.arange(n), lengths)
    starts = np.cumsum(lengths) - lengths
    cols = np.arange(len(flat)) - np.repeat(starts, lengths)
    input_ids = np.zeros((n, max_seq_length), dtype=np.int32)
    input_ids[rows, cols] = np.asarray(flat, dtype=np.int32)
    col = np.arange(max_seq_length)[None, :]
    segment_ids = ((col >= (len_a + 2)[:, None]) & (col < lengths[:, None])).astype(np.int8)
    labels = np.fromiter((p.is_random_next for p in pairs), dtype=np.int8, count=n)
    return PackedPairs(input_ids, segment_ids, lengths.astype(np.int32), labels)
