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

import functools
import random
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

Sentence = Sequence[int]
Document = Sequence[Sentence]


def _check_room(max_seq_length: int, smallest: str) -> None:
    """ValueError unless ``max_seq_length`` holds the ``smallest`` row (one token a word)."""
    need = len(smallest.split())
    if max_seq_length < need:
        raise ValueError(
            f"max_seq_length must be at least {need} ({smallest}), got {max_seq_length}"
        )


@dataclass(frozen=True)
class PairConfig:
    """Parameters of pair creation. ``random_next_prob`` is 0.5 in BERT; tests use 0 and 1."""

    max_seq_length: int = 128
    short_seq_prob: float = 0.1
    random_next_prob: float = 0.5
    allow_same_document_random_next: bool = False

    def __post_init__(self) -> None:
        _check_room(self.max_seq_length, "[CLS] a [SEP] b [SEP]")
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


def truncation_window(
    len_a: int, len_b: int, max_num_tokens: int, rng: random.Random
) -> tuple[int, int, int, int]:
    """(front_a, cut_a, front_b, cut_b): tokens removed from each segment, and how many of them
    come off its front, when the pair is truncated as the reference does it.

    Each removed token comes off the longer segment (``truncation_counts``), from the front or
    the back with probability 1/2: the front count is the number of heads in that many fair coin
    flips (one random bit each) — the reference's distribution, in O(1) Python steps.
    """
    cut_a, cut_b = truncation_counts(len_a, len_b, max_num_tokens)
    front_a = rng.getrandbits(cut_a).bit_count() if cut_a else 0
    front_b = rng.getrandbits(cut_b).bit_count() if cut_b else 0
    return front_a, cut_a, front_b, cut_b


def truncate_pair(
    tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random
) -> tuple[list[int], list[int], int]:
    """Truncated copies of A and B (see ``truncation_window``) and the number of tokens removed."""
    front_a, cut_a, front_b, cut_b = truncation_window(
        len(tokens_a), len(tokens_b), max_num_tokens, rng
    )
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


@dataclass(frozen=True)
class BucketLayout:
    """A bucket's documents laid end to end in one flat token array.

    Sentence ``s`` (numbered across the bucket) is ``tokens[sentence_starts[s] :
    sentence_starts[s] + sentence_lengths[s]]``; document ``d`` holds sentences
    ``document_bounds[d]`` to ``document_bounds[d + 1]`` (int64 arrays). ``starts[d][i]`` and
    ``lengths[d][i]`` are the same figures as lists per document. Pair creation works on these
    integers only; tokens are gathered once, vectorized, at packing.
    """

    tokens: np.ndarray
    sentence_starts: np.ndarray
    sentence_lengths: np.ndarray
    document_bounds: np.ndarray

    @classmethod
    def from_arrays(cls, documents: Sequence[tuple[np.ndarray, np.ndarray]]) -> BucketLayout:
        """From (ids, sentence offsets) pairs, as ``TokenizedDocument`` holds them."""
        if not documents:
            empty = np.zeros(0, dtype=np.int64)
            return cls(np.zeros(0, dtype=np.int32), empty, empty, np.zeros(1, dtype=np.int64))
        bounds = [np.asarray(offsets, dtype=np.int64) for _, offsets in documents]
        sizes = np.array([b[-1] for b in bounds], dtype=np.int64)
        bases = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        starts = np.concatenate([b[:-1] + base for b, base in zip(bounds, bases, strict=True)])
        lengths = np.concatenate([np.diff(b) for b in bounds])
        counts = np.array([len(b) - 1 for b in bounds], dtype=np.int64)
        document_bounds = np.concatenate(([0], np.cumsum(counts)))
        tokens = np.concatenate([np.asarray(ids, dtype=np.int32) for ids, _ in documents])
        return cls(tokens, starts, lengths, document_bounds)

    @classmethod
    def from_documents(cls, documents: Sequence[Document]) -> BucketLayout:
        """From documents as lists of sentences of token ids."""
        arrays = []
        for doc in documents:
            offsets = np.concatenate(([0], np.cumsum([len(s) for s in doc], dtype=np.int64)))
            ids = np.fromiter((t for s in doc for t in s), dtype=np.int32, count=int(offsets[-1]))
            arrays.append((ids, offsets))
        return cls.from_arrays(arrays)

    @functools.cached_property
    def starts(self) -> list[list[int]]:
        """Per document, its sentences' first token in ``tokens``."""
        return self._per_document(self.sentence_starts)

    @functools.cached_property
    def lengths(self) -> list[list[int]]:
        """Per document, its sentences' token counts."""
        return self._per_document(self.sentence_lengths)

    def _per_document(self, values: np.ndarray) -> list[list[int]]:
        flat = values.tolist()
        bounds = self.document_bounds.tolist()
        return [flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]

    def __len__(self) -> int:
        return len(self.document_bounds) - 1


PairSpan = tuple[int, int, int, int, bool]
"""(a_start, a_len, b_start, b_len, is_random_next): A and B as windows of the flat tokens."""


def create_pair_spans(
    layout: BucketLayout,
    document_index: int,
    cfg: PairConfig,
    rng: random.Random,
    stats: Counter[str],
) -> Iterator[PairSpan]:
    """Yields the sentence pairs of document ``document_index`` for one dupe pass, as spans.

    The other documents of ``layout`` (a bucket) are where random B spans come from. Every
    document must hold at least one sentence with at least one token. A is a run of whole
    sentences from the chunk's start; B the rest of the chunk, or a run of sentences of another
    document starting at a random sentence; both are then truncated (``truncate_pair``), so each
    stays one contiguous window. ``stats`` gains ``pairs``, ``random_next``,
    ``single_sentence_chunks`` (chunks whose B must be random), ``truncated_pairs``,
    ``truncated_tokens``, ``short_target_documents`` and ``skipped_no_other_document``.
    """
    lengths = layout.lengths[document_index]
    starts = layout.starts[document_index]
    n_sentences = len(lengths)
    n_documents = len(layout)
    max_num_tokens = cfg.max_num_tokens
    target_seq_length = max_num_tokens
    if rng.random() < cfg.short_seq_prob:
        target_seq_length = uniform_int(rng, 2, max_num_tokens)
        stats["short_target_documents"] += 1

    chunk_first = 0  # first sentence of the current chunk
    chunk_size = 0  # sentences in the current chunk
    chunk_tokens = 0
    i = 0
    while i < n_sentences:
        if chunk_size == 0:
            chunk_first = i
        chunk_size += 1
        chunk_tokens += lengths[i]
        if i == n_sentences - 1 or chunk_tokens >= target_seq_length:
            a_sentences = 1 if chunk_size < 2 else uniform_int(rng, 1, chunk_size - 1)
            a_start = starts[chunk_first]
            a_len = sum(lengths[chunk_first : chunk_first + a_sentences])
            if chunk_size == 1:
                stats["single_sentence_chunks"] += 1
                is_random_next = True
            else:
                is_random_next = rng.random() < cfg.random_next_prob
            b_start = b_len = 0
            skip = False
            if is_random_next:
                target_b_length = target_seq_length - a_len
                other = _random_document_index(n_documents, document_index, cfg, rng)
                if other is None:
                    skip = True
                else:
                    other_lengths = layout.lengths[other]
                    first = uniform_int(rng, 0, len(other_lengths) - 1)
                    b_start = layout.starts[other][first]
                    for j in range(first, len(other_lengths)):
                        b_len += other_lengths[j]
                        if b_len >= target_b_length:
                            break
                # The chunk's sentences after A go back to the document.
                i -= chunk_size - a_sentences
            else:
                b_start = starts[chunk_first + a_sentences]
                b_len = chunk_tokens - a_len

            if skip:
                stats["skipped_no_other_document"] += 1
            else:
                front_a, cut_a, front_b, cut_b = truncation_window(
                    a_len, b_len, max_num_tokens, rng
                )
                if cut_a or cut_b:
                    a_start += front_a
                    b_start += front_b
                    a_len -= cut_a
                    b_len -= cut_b
                    stats["truncated_pairs"] += 1
                    stats["truncated_tokens"] += cut_a + cut_b
                if a_len < 1 or b_len < 1:
                    raise AssertionError("empty segment after truncation")
                stats["pairs"] += 1
                stats["random_next"] += int(is_random_next)
                yield a_start, a_len, b_start, b_len, is_random_next
            chunk_size = 0
            chunk_tokens = 0
        i += 1


def create_pairs_from_document(
    documents: Sequence[Document],
    document_index: int,
    cfg: PairConfig,
    rng: random.Random,
    stats: Counter[str],
) -> Iterator[SentencePair]:
    """``create_pair_spans`` on documents given as token lists, yielding the pairs' tokens.

    Convenient for inspection and tests; lays the documents out anew on every call.
    """
    layout = BucketLayout.from_documents(documents)
    flat = layout.tokens.tolist()
    for a_start, a_len, b_start, b_len, is_random in create_pair_spans(
        layout, document_index, cfg, rng, stats
    ):
        yield SentencePair(
            flat[a_start : a_start + a_len], flat[b_start : b_start + b_len], is_random
        )


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


def checked_spans(spans: np.ndarray, max_seq_length: int) -> tuple[np.ndarray, np.ndarray]:
    """``spans`` as a contiguous int64 (N, 5) ``PairSpan`` array and each pair's row length
    (``[CLS] A [SEP] B [SEP]``: A + B + 3 tokens); ValueError when one exceeds
    ``max_seq_length``."""
    spans = np.ascontiguousarray(spans, dtype=np.int64).reshape(-1, 5)
    lengths = spans[:, 1] + spans[:, 3] + 3
    if len(spans) and lengths.max() > max_seq_length:
        raise ValueError(
            f"pair of {int(lengths.max())} tokens exceeds max_seq_length {max_seq_length}"
        )
    return spans, lengths


def pack_spans(
    tokens: np.ndarray,
    spans: np.ndarray,
    cls_id: int,
    sep_id: int,
    max_seq_length: int,
) -> PackedPairs:
    """Lays span pairs out as fixed-length rows (see ``PackedPairs``), fully vectorized.

    ``spans`` is an int64 (N, 5) array of ``PairSpan`` rows over the flat ``tokens``.
    """
    spans, lengths = checked_spans(spans, max_seq_length)
    a0, la, b0, lb = (spans[:, k : k + 1] for k in range(4))
    col = np.arange(max_seq_length)[None, :]
    in_a = (col >= 1) & (col <= la)
    in_b = (col >= la + 2) & (col < la + 2 + lb)
    index = np.where(in_a, a0 + col - 1, np.where(in_b, b0 + col - la - 2, 0))
    input_ids = np.where(in_a | in_b, tokens[index] if len(tokens) else 0, 0).astype(np.int32)
    rows = np.arange(len(spans))
    input_ids[:, 0] = cls_id
    input_ids[rows, la[:, 0] + 1] = sep_id
    input_ids[rows, lengths - 1] = sep_id
    segment_ids = ((col >= la + 2) & (col < lengths[:, None])).astype(np.int8)
    labels = spans[:, 4].astype(np.int8)
    return PackedPairs(input_ids, segment_ids, lengths.astype(np.int32), labels)


def pack_pairs(
    pairs: Sequence[SentencePair], cls_id: int, sep_id: int, max_seq_length: int
) -> PackedPairs:
    """Lays pairs given as token lists out as fixed-length rows (see ``pack_spans``)."""
    flat: list[int] = []
    spans = []
    for p in pairs:
        a0 = len(flat)
        flat.extend(p.tokens_a)
        b0 = len(flat)
        flat.extend(p.tokens_b)
        spans.append((a0, len(p.tokens_a), b0, len(p.tokens_b), int(p.is_random_next)))
    return pack_spans(
        np.asarray(flat, dtype=np.int32), np.asarray(spans), cls_id, sep_id, max_seq_length
    )


# --- Packed inputs without NSP (RoBERTa's FULL-SENTENCES and DOC-SENTENCES) --------------------

Window = tuple[int, int, int]
"""(start, length, document index): a run of contiguous tokens of one document in the flat array."""


@dataclass(frozen=True)
class PackConfig:
    """Packing of contiguous sentences into ``[CLS] ... [SEP]`` rows of at most ``max_seq_length``.

    ``cross_documents``: a row goes on into the next document, a ``[SEP]`` between the two
    (full-sentences); otherwise a row ends with its document (doc-sentences).
    """

    max_seq_length: int = 128
    cross_documents: bool = True

    def __post_init__(self) -> None:
        _check_room(self.max_seq_length, "[CLS] a [SEP]")

    @property
    def max_num_tokens(self) -> int:
        """Tokens available to the text (and document separators): minus [CLS] and the last [SEP]."""
        return self.max_seq_length - 2


def create_packed_rows(
    layout: BucketLayout, cfg: PackConfig, stats: Counter[str]
) -> Iterator[list[Window]]:
    """Yields the rows of the bucket's documents, in order, each as its windows of tokens.

    Sentences are taken whole, in order, while they fit; the next one starts a new row. A sentence
    longer than a whole row is split over rows (no token is lost). With ``cross_documents`` a row
    continues into the next document, the separator costing one token; otherwise every document
    starts a new row. Deterministic (no random choice). ``stats`` gains ``packed_rows``,
    ``document_separators`` and ``split_long_sentences``.
    """
    budget = cfg.max_num_tokens
    row: list[Window] = []
    used = 0

    def flush() -> list[Window]:
        nonlocal row, used
        out, row, used = row, [], 0
        stats["packed_rows"] += 1
        stats["document_separators"] += sum(
            1 for a, b in zip(out, out[1:], strict=False) if a[2] != b[2]
        )
        return out

    for d in range(len(layout)):
        if row and not cfg.cross_documents:
            yield flush()
        for start, length in zip(layout.starts[d], layout.lengths[d], strict=True):
            separator = 1 if row and row[-1][2] != d else 0
            if row and used + separator + length > budget:
                yield flush()
                separator = 0
            if length > budget:
                stats["split_long_sentences"] += 1
            while length > 0:
                take = min(length, budget - used - separator)
                if row and row[-1][2] == d and row[-1][0] + row[-1][1] == start:
                    s, n, _ = row[-1]
                    row[-1] = (s, n + take, d)
                else:
                    row.append((start, take, d))
                used += separator + take
                separator = 0
                start += take
                length -= take
                if length > 0:
                    yield flush()
    if row:
        yield flush()


def pack_rows(
    tokens: np.ndarray,
    rows: Sequence[Sequence[Window]],
    cls_id: int,
    sep_id: int,
    max_seq_length: int,
) -> PackedPairs:
    """Lays packed rows out as ``[CLS] text [SEP] text ... [SEP]``, one ``[SEP]`` between
    documents, zero-padded; segment ids and NSP labels are all 0 (one segment, no NSP)."""
    n = len(rows)
    input_ids = np.zeros((n, max_seq_length), dtype=np.int32)
    lengths = np.zeros(n, dtype=np.int32)
    for r, windows in enumerate(rows):
        parts = [np.asarray([cls_id], dtype=np.int32)]
        for k, (start, length, doc) in enumerate(windows):
            if k and windows[k - 1][2] != doc:
                parts.append(np.asarray([sep_id], dtype=np.int32))
            parts.append(tokens[start : start + length].astype(np.int32, copy=False))
        parts.append(np.asarray([sep_id], dtype=np.int32))
        row = np.concatenate(parts)
        if len(row) > max_seq_length:
            raise ValueError(f"row of {len(row)} tokens exceeds max_seq_length {max_seq_length}")
        input_ids[r, : len(row)] = row
        lengths[r] = len(row)
    return PackedPairs(
        input_ids,
        np.zeros((n, max_seq_length), dtype=np.int8),
        lengths,
        np.zeros(n, dtype=np.int8),
    )
