"""Pair creation, truncation and packing (transforms.instances).

Documents are built with disjoint token-id ranges (document ``d`` uses ids ``d * DOC_STRIDE + k``
with ``k`` counting up through the document), so a token tells which document, and where in it,
it came from.
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from transforms.instances import (
    PairConfig,
    SentencePair,
    create_pairs_from_document,
    pack_pairs,
    truncate_pair,
    truncation_counts,
)

DOC_STRIDE = 100_000


def make_documents(
    sentence_lengths: list[list[int]],
) -> list[list[list[int]]]:
    """Documents whose tokens are ``d * DOC_STRIDE + position`` (position 1-based, consecutive)."""
    documents = []
    for d, lengths in enumerate(sentence_lengths):
        next_token = d * DOC_STRIDE + 1
        doc = []
        for n in lengths:
            doc.append(list(range(next_token, next_token + n)))
            next_token += n
        documents.append(doc)
    return documents


def random_documents(
    rng: random.Random, n_docs: int, sentences: tuple[int, int], tokens: tuple[int, int]
) -> list[list[list[int]]]:
    return make_documents(
        [[rng.randint(*tokens) for _ in range(rng.randint(*sentences))] for _ in range(n_docs)]
    )


def doc_of(token: int) -> int:
    return token // DOC_STRIDE


def flatten(sentences) -> list[int]:
    return [t for s in sentences for t in s]


def run_pairs(
    documents, index: int, cfg: PairConfig, seed: int = 0, stats: Counter | None = None
) -> list[SentencePair]:
    stats = Counter() if stats is None else stats
    return list(create_pairs_from_document(documents, index, cfg, random.Random(seed), stats))


def greedy_chunks(document, target: int) -> list[list[int]]:
    """Sentence indices of each chunk when no random B puts sentences back."""
    chunks, current, length = [], [], 0
    for i, sentence in enumerate(document):
        current.append(i)
        length += len(sentence)
        if i == len(document) - 1 or length >= target:
            chunks.append(current)
            current, length = [], 0
    return chunks


def is_contiguous_window(window: list[int], sequence: list[int]) -> bool:
    """True when ``window`` (non-empty) occurs in ``sequence`` as a contiguous slice."""
    if not window:
        return False
    try:
        start = sequence.index(window[0])
    except ValueError:
        return False
    return sequence[start : start + len(window)] == window


# --------------------------------------------------------------------------------------------
# PairConfig


def test_pair_config_defaults_and_max_num_tokens():
    cfg = PairConfig()
    assert cfg.max_seq_length == 128
    assert cfg.short_seq_prob == 0.1
    assert cfg.random_next_prob == 0.5
    assert cfg.allow_same_document_random_next is False
    assert cfg.max_num_tokens == 125
    assert PairConfig(max_seq_length=5).max_num_tokens == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_seq_length": 4},
        {"max_seq_length": 0},
        {"short_seq_prob": -0.01},
        {"short_seq_prob": 1.01},
        {"random_next_prob": -0.5},
        {"random_next_prob": 1.5},
    ],
)
def test_pair_config_rejects_invalid(kwargs):
    with pytest.raises(ValueError):
        PairConfig(**kwargs)


# --------------------------------------------------------------------------------------------
# Degenerate probabilities


def test_short_seq_prob_zero_chunks_accumulate_to_max_num_tokens_exactly():
    # Sentences of 5 tokens and max_num_tokens 20: every chunk is exactly 4 sentences, no truncation.
    documents = make_documents([[5] * 12, [5] * 8, [5] * 4])
    cfg = PairConfig(max_seq_length=23, short_seq_prob=0.0, random_next_prob=0.0)
    for index, document in enumerate(documents):
        for seed in range(5):
            stats: Counter[str] = Counter()
            pairs = run_pairs(documents, index, cfg, seed, stats)
            chunks = greedy_chunks(document, cfg.max_num_tokens)
            assert len(pairs) == len(chunks) == len(document) // 4
            for pair, chunk in zip(pairs, chunks, strict=True):
                assert not pair.is_random_next
                assert pair.tokens_a + pair.tokens_b == flatten(document[k] for k in chunk)
                assert len(pair.tokens_a) % 5 == 0  # A ends at a sentence boundary
                assert len(pair.tokens_a) + len(pair.tokens_b) == cfg.max_num_tokens
            assert stats["short_target_documents"] == 0
            assert stats["truncated_pairs"] == 0
            assert stats["random_next"] == 0
            assert stats["pairs"] == len(pairs)


@pytest.mark.parametrize("seed", range(10))
def test_short_seq_prob_zero_random_next_zero_follows_greedy_chunks(seed):
    rng = random.Random(seed)
    documents = random_documents(rng, 6, (1, 25), (1, 30))
    cfg = PairConfig(max_seq_length=40, short_seq_prob=0.0, random_next_prob=0.0)
    m = cfg.max_num_tokens
    for index, document in enumerate(documents):
        stats: Counter[str] = Counter()
        pairs = run_pairs(documents, index, cfg, seed, stats)
        chunks = greedy_chunks(document, m)
        assert len(pairs) == len(chunks)
        single = 0
        for pair, chunk in zip(pairs, chunks, strict=True):
            chunk_tokens = flatten(document[k] for k in chunk)
            if chunk != chunks[-1]:
                # a chunk stops as soon as it reaches the target, never earlier
                assert len(chunk_tokens) >= m
                assert len(chunk_tokens) - len(document[chunk[-1]]) < m
            if len(chunk) == 1:
                single += 1
                assert pair.is_random_next
                assert {doc_of(t) for t in pair.tokens_b} == {doc_of(pair.tokens_b[0])} != {index}
                assert is_contiguous_window(pair.tokens_a, chunk_tokens)
                continue
            assert not pair.is_random_next
            assert {doc_of(t) for t in pair.tokens_a + pair.tokens_b} == {index}
            if len(chunk_tokens) <= m:
                assert pair.tokens_a + pair.tokens_b == chunk_tokens
            else:
                assert len(pair.tokens_a) + len(pair.tokens_b) == m
            # A and B are contiguous windows of the two sides of one sentence boundary, with
            # exactly the reference's truncation counts.
            ok = False
            for k in range(1, len(chunk)):
                side_a = flatten(document[j] for j in chunk[:k])
                side_b = flatten(document[j] for j in chunk[k:])
                cut_a, cut_b = truncation_counts(len(side_a), len(side_b), m)
                if (
                    is_contiguous_window(pair.tokens_a, side_a)
                    and is_contiguous_window(pair.tokens_b, side_b)
                    and len(pair.tokens_a) == len(side_a) - cut_a
                    and len(pair.tokens_b) == len(side_b) - cut_b
                ):
                    ok = True
            assert ok, (pair, chunk)
        assert stats["single_sentence_chunks"] == single
        assert stats["random_next"] == single
        assert stats["pairs"] == len(pairs)


def test_short_seq_prob_one_targets_cover_two_to_max():
    # One-token sentences: a chunk holds exactly `target` tokens (except a document's last one),
    # so the target of each document can be read off its pairs.
    n_docs = 400
    documents = make_documents([[1] * 37 for _ in range(n_docs)])
    cfg = PairConfig(max_seq_length=13, short_seq_prob=1.0, random_next_prob=0.0)
    stats: Counter[str] = Counter()
    rng = random.Random(7)
    targets = Counter()
    for index, document in enumerate(documents):
        pairs = list(create_pairs_from_document(documents, index, cfg, rng, stats))
        sizes = [len(p.tokens_a) + len(p.tokens_b) for p in pairs]
        target = sizes[0] if len(pairs) > 1 else None
        if target is None:
            continue
        targets[target] += 1
        assert 2 <= target <= cfg.max_num_tokens
        assert all(s == target for s in sizes[:-1])
        assert sizes[-1] <= target
        normal = [p for p in pairs if not p.is_random_next]
        assert (
            flatten(p.tokens_a + p.tokens_b for p in normal)
            == flatten(document)[: sum(len(p.tokens_a) + len(p.tokens_b) for p in normal)]
        )
        # the last chunk is random only when it is a single leftover sentence
        remainder = len(document) % target
        assert [p.is_random_next for p in pairs] == [False] * (len(pairs) - 1) + [remainder == 1]
    assert stats["short_target_documents"] == n_docs
    assert stats["truncated_pairs"] == 0
    assert set(targets) == set(range(2, cfg.max_num_tokens + 1))


def test_short_seq_prob_one_target_never_below_two_with_long_document():
    documents = make_documents([[1] * 5, [1] * 5])
    cfg = PairConfig(max_seq_length=5, short_seq_prob=1.0, random_next_prob=0.0)
    for seed in range(50):
        pairs = run_pairs(documents, 0, cfg, seed)
        # max_num_tokens = 2, so the target is always 2: chunks of two one-token sentences
        assert [(p.tokens_a, p.tokens_b) for p in pairs[:2]] == [([1], [2]), ([3], [4])]
        assert pairs[2].is_random_next and pairs[2].tokens_a == [5]


@pytest.mark.parametrize("seed", range(8))
def test_random_next_prob_zero_b_is_actual_continuation(seed):
    rng = random.Random(seed)
    documents = random_documents(rng, 5, (2, 30), (1, 12))
    cfg = PairConfig(max_seq_length=256, short_seq_prob=0.3, random_next_prob=0.0)
    for index, document in enumerate(documents):
        stats: Counter[str] = Counter()
        pairs = run_pairs(documents, index, cfg, seed, stats)
        assert stats["truncated_pairs"] == 0
        flat = flatten(document)
        # With no random B nothing is put back: chunks tile the document in order.
        consumed = []
        boundaries = set(np.cumsum([len(s) for s in document]).tolist())
        for pair in pairs:
            if pair.is_random_next:  # only a one-sentence chunk
                assert len(pair.tokens_a) in {len(s) for s in document}
                assert doc_of(pair.tokens_b[0]) != index
                consumed.extend(pair.tokens_a)
                continue
            consumed.extend(pair.tokens_a + pair.tokens_b)
            assert (pair.tokens_a[-1] % DOC_STRIDE) in boundaries  # A ends a sentence
            assert (pair.tokens_b[-1] % DOC_STRIDE) in boundaries  # B ends a sentence
        assert consumed == flat
        assert stats["random_next"] == stats["single_sentence_chunks"]


@pytest.mark.parametrize("seed", range(10))
def test_random_next_prob_one_b_always_from_another_document(seed):
    rng = random.Random(seed)
    # Documents small enough that nothing is ever truncated (A + B <= two documents).
    documents = random_documents(rng, 6, (1, 12), (1, 5))
    cfg = PairConfig(max_seq_length=128, short_seq_prob=0.5, random_next_prob=1.0)
    seen_sources = set()
    for index, document in enumerate(documents):
        stats: Counter[str] = Counter()
        pairs = run_pairs(documents, index, cfg, seed * 31 + index, stats)
        assert stats["truncated_pairs"] == 0
        assert pairs and all(p.is_random_next for p in pairs)
        for pair in pairs:
            assert {doc_of(t) for t in pair.tokens_a} == {index}
            sources = {doc_of(t) for t in pair.tokens_b}
            assert len(sources) == 1 and index not in sources
            source = sources.pop()
            seen_sources.add((index, source))
            # B is a run of whole consecutive sentences of its document, starting at a sentence
            other = documents[source]
            starts = [s[0] for s in other]
            start = starts.index(pair.tokens_b[0])
            assert pair.tokens_b == flatten(other[start:])[: len(pair.tokens_b)]
        # Unused sentences go back: the A segments of the pass tile the whole document in order.
        assert flatten(p.tokens_a for p in pairs) == flatten(document)
        assert stats["random_next"] == stats["pairs"] == len(pairs)
        assert stats["skipped_no_other_document"] == 0


def test_random_next_prob_one_with_two_documents_never_same_document():
    documents = make_documents([[2, 3, 1, 4, 2, 2, 5], [1, 1, 3, 2, 4]])
    cfg = PairConfig(max_seq_length=9, short_seq_prob=0.2, random_next_prob=1.0)
    total = 0
    for seed in range(300):
        for index in (0, 1):
            for pair in run_pairs(documents, index, cfg, seed):
                total += 1
                assert pair.is_random_next
                assert {doc_of(t) for t in pair.tokens_b} == {1 - index}
                assert {doc_of(t) for t in pair.tokens_a} == {index}
    assert total > 1000


def test_random_next_with_truncation_a_segments_advance_without_overlap():
    # With truncation A may lose tokens at either end, but consecutive A segments still advance
    # through the document in order and never reuse a token (unused sentences are put back
    # exactly once, not duplicated into an earlier A).
    rng = random.Random(3)
    documents = random_documents(rng, 4, (5, 40), (1, 25))
    cfg = PairConfig(max_seq_length=20, short_seq_prob=0.1, random_next_prob=1.0)
    for index in range(len(documents)):
        stats: Counter[str] = Counter()
        pairs = run_pairs(documents, index, cfg, index, stats)
        assert stats["truncated_pairs"] > 0
        previous_end = 0
        for pair in pairs:
            positions = [t % DOC_STRIDE for t in pair.tokens_a]
            assert positions == list(range(positions[0], positions[0] + len(positions)))
            assert positions[0] > previous_end
            previous_end = positions[-1]
            assert doc_of(pair.tokens_b[0]) != index


def test_one_sentence_chunks_are_always_random_next():
    # Every sentence reaches the target on its own: each chunk is one sentence, hence random,
    # even with random_next_prob=0.
    documents = make_documents([[30, 25, 40, 18], [3, 3, 3], [50]])
    cfg = PairConfig(max_seq_length=20, short_seq_prob=0.0, random_next_prob=0.0)
    stats: Counter[str] = Counter()
    pairs = run_pairs(documents, 0, cfg, 1, stats)
    assert len(pairs) == 4
    assert stats["single_sentence_chunks"] == 4
    assert stats["random_next"] == 4
    for pair, sentence in zip(pairs, documents[0], strict=True):
        assert pair.is_random_next
        assert is_contiguous_window(pair.tokens_a, sentence)
        assert doc_of(pair.tokens_b[0]) in (1, 2)
        assert len(pair.tokens_a) + len(pair.tokens_b) <= cfg.max_num_tokens
    # the single-sentence document: one chunk, random B
    stats = Counter()
    pairs = run_pairs(documents, 2, cfg, 2, stats)
    assert len(pairs) == 1 and pairs[0].is_random_next
    assert stats["single_sentence_chunks"] == 1


def test_last_single_sentence_of_document_is_random_next():
    documents = make_documents([[4, 4, 4, 4, 4], [2, 2, 2]])
    cfg = PairConfig(max_seq_length=11, short_seq_prob=0.0, random_next_prob=0.0)  # target 8
    pairs = run_pairs(documents, 0, cfg, 0)
    assert [p.is_random_next for p in pairs] == [False, False, True]
    assert pairs[2].tokens_a == documents[0][4]
    assert doc_of(pairs[2].tokens_b[0]) == 1


# --------------------------------------------------------------------------------------------
# A single document: skip (default) versus the reference's same-document B


def test_single_document_default_mode_skips_and_counts():
    documents = make_documents([[40, 40, 40]])  # every chunk one sentence (max_num_tokens 29)
    cfg = PairConfig(max_seq_length=32, short_seq_prob=0.0, random_next_prob=1.0)
    stats: Counter[str] = Counter()
    assert run_pairs(documents, 0, cfg, 0, stats) == []
    assert stats["skipped_no_other_document"] == 3
    assert stats["single_sentence_chunks"] == 3
    assert stats["pairs"] == 0 and stats["random_next"] == 0


@pytest.mark.parametrize("seed", range(5))
def test_single_document_default_mode_skips_every_random_chunk(seed):
    rng = random.Random(seed)
    documents = random_documents(rng, 1, (5, 30), (1, 10))
    cfg = PairConfig(max_seq_length=24, short_seq_prob=0.2, random_next_prob=1.0)
    stats: Counter[str] = Counter()
    assert run_pairs(documents, 0, cfg, seed, stats) == []
    # each skipped chunk still advances by its A sentences: at least one skip, at most one per
    # sentence
    assert 1 <= stats["skipped_no_other_document"] <= len(documents[0])


def test_single_document_default_mode_keeps_actual_next_pairs():
    documents = make_documents([[3] * 10 + [20]])
    cfg = PairConfig(max_seq_length=12, short_seq_prob=0.0, random_next_prob=0.0)  # target 9
    stats: Counter[str] = Counter()
    pairs = run_pairs(documents, 0, cfg, 0, stats)
    # chunks: 3 x (3 sentences), then [3, 20] (2 sentences, truncated) -> all actual next
    assert len(pairs) == 4 and not any(p.is_random_next for p in pairs)
    assert stats["skipped_no_other_document"] == 0
    documents = make_documents([[3] * 9 + [20]])  # last chunk is the lone 20-token sentence
    stats = Counter()
    pairs = run_pairs(documents, 0, cfg, 0, stats)
    assert len(pairs) == 3
    assert stats["skipped_no_other_document"] == 1


def test_single_document_reference_mode_takes_b_from_same_document():
    documents = make_documents([[4, 6, 3, 5, 2, 7, 4, 4, 3, 5]])
    cfg = PairConfig(
        max_seq_length=16,
        short_seq_prob=0.0,
        random_next_prob=1.0,
        allow_same_document_random_next=True,
    )
    for seed in range(20):
        stats: Counter[str] = Counter()
        pairs = run_pairs(documents, 0, cfg, seed, stats)
        assert pairs
        assert stats["skipped_no_other_document"] == 0
        for pair in pairs:
            assert pair.is_random_next  # labelled random ...
            assert {doc_of(t) for t in pair.tokens_b} == {0}  # ... yet from the same document


def test_reference_mode_with_two_documents_is_mostly_other_document():
    documents = make_documents([[3, 3, 3, 3], [2, 2, 2]])
    cfg = PairConfig(max_seq_length=10, random_next_prob=1.0, allow_same_document_random_next=True)
    same = other = 0
    for seed in range(300):
        for pair in run_pairs(documents, 0, cfg, seed):
            if doc_of(pair.tokens_b[0]) == 0:
                same += 1
            else:
                other += 1
    # same document only when all ten draws hit it: probability 2**-10
    assert other > 500
    assert same <= 5


def test_stats_counters_are_consistent():
    rng = random.Random(11)
    documents = random_documents(rng, 20, (1, 30), (1, 40))
    cfg = PairConfig(max_seq_length=64, short_seq_prob=0.3, random_next_prob=0.5)
    stats: Counter[str] = Counter()
    pair_rng = random.Random(5)
    pairs = []
    for index in range(len(documents)):
        pairs.extend(create_pairs_from_document(documents, index, cfg, pair_rng, stats))
    assert stats["pairs"] == len(pairs)
    assert stats["random_next"] == sum(p.is_random_next for p in pairs)
    assert stats["single_sentence_chunks"] <= stats["random_next"]
    assert stats["truncated_pairs"] >= 1
    assert stats["truncated_tokens"] >= stats["truncated_pairs"]
    assert 0 < stats["short_target_documents"] < len(documents)
    for p in pairs:
        assert p.tokens_a and p.tokens_b
        assert len(p.tokens_a) + len(p.tokens_b) <= cfg.max_num_tokens


def test_pair_creation_is_deterministic_given_rng_seed():
    rng = random.Random(2)
    documents = random_documents(rng, 5, (1, 20), (1, 20))
    cfg = PairConfig(max_seq_length=32)
    first = [run_pairs(documents, i, cfg, 9) for i in range(5)]
    second = [run_pairs(documents, i, cfg, 9) for i in range(5)]
    assert first == second
    assert first != [run_pairs(documents, i, cfg, 10) for i in range(5)]


# --------------------------------------------------------------------------------------------
# Truncation


def brute_force_counts(len_a: int, len_b: int, max_num_tokens: int) -> tuple[int, int]:
    """Brute force: remove one token at a time from the longer segment (B on a tie), counting."""
    a, b, cut_a, cut_b = len_a, len_b, 0, 0
    while a + b > max_num_tokens:
        if a > b:
            a, cut_a = a - 1, cut_a + 1
        else:
            b, cut_b = b - 1, cut_b + 1
    return cut_a, cut_b


def test_truncation_counts_match_reference_loop_on_grid():
    for max_num_tokens in range(0, 34):
        for len_a in range(0, 31):
            for len_b in range(0, 31):
                assert truncation_counts(len_a, len_b, max_num_tokens) == brute_force_counts(
                    len_a, len_b, max_num_tokens
                ), (len_a, len_b, max_num_tokens)


@pytest.mark.parametrize(
    ("len_a", "len_b", "m", "expected"),
    [
        (10, 10, 20, (0, 0)),
        (10, 11, 20, (0, 1)),  # tie-break and longer: B
        (11, 10, 20, (1, 0)),
        (10, 10, 19, (0, 1)),  # tie: B first
        (10, 10, 18, (1, 1)),
        (100, 3, 10, (93, 0)),
        (3, 100, 10, (0, 93)),
        (6, 6, 5, (3, 4)),
        (500, 400, 125, (437, 338)),
    ],
)
def test_truncation_counts_known_values(len_a, len_b, m, expected):
    assert truncation_counts(len_a, len_b, m) == expected == brute_force_counts(len_a, len_b, m)
    cut_a, cut_b = truncation_counts(len_a, len_b, m)
    assert len_a + len_b - cut_a - cut_b == min(m, len_a + len_b)


def test_truncate_pair_keeps_contiguous_windows_of_exact_total():
    rng = random.Random(0)
    for _ in range(2000):
        len_a, len_b = rng.randint(1, 60), rng.randint(1, 60)
        m = rng.randint(2, 80)
        a = list(range(len_a))
        b = list(range(1000, 1000 + len_b))
        ta, tb, removed = truncate_pair(a, b, m, rng)
        cut_a, cut_b = truncation_counts(len_a, len_b, m)
        assert removed == cut_a + cut_b
        assert len(ta) == len_a - cut_a and len(tb) == len_b - cut_b
        assert len(ta) + len(tb) == min(m, len_a + len_b)
        assert ta and tb
        assert is_contiguous_window(ta, a) and is_contiguous_window(tb, b)
        assert a == list(range(len_a)) and b == list(range(1000, 1000 + len_b))  # not mutated


def test_truncate_pair_without_excess_returns_inputs_and_consumes_no_randomness():
    rng = random.Random(4)
    state = rng.getstate()
    a, b = [1, 2, 3], [4, 5]
    ta, tb, removed = truncate_pair(a, b, 5, rng)
    assert (ta, tb, removed) == ([1, 2, 3], [4, 5], 0)
    assert rng.getstate() == state


def test_truncate_pair_front_removal_fraction_is_one_half():
    rng = random.Random(123)
    front = total = 0
    single_front = 0
    trials = 4000
    for _ in range(trials):
        a = list(range(60))
        b = list(range(100, 130))
        ta, tb, removed = truncate_pair(a, b, 40, rng)  # 40 tokens off A, 10 off B
        cut_a, cut_b = truncation_counts(60, 30, 40)
        front += ta[0] - a[0] + (tb[0] - b[0])
        total += removed
        assert removed == cut_a + cut_b == 50
        one_a, _, _ = truncate_pair(list(range(5)), [9], 5, rng)  # exactly one removal, from A
        single_front += one_a[0] == 1
    assert total == 50 * trials
    assert abs(front / total - 0.5) < 0.01
    assert abs(single_front / trials - 0.5) < 0.04


def test_truncate_pair_front_counts_follow_binomial_spread():
    rng = random.Random(9)
    fronts = []
    for _ in range(3000):
        ta, _, _ = truncate_pair(list(range(40)), [0], 21, rng)  # 20 removals from A
        fronts.append(ta[0])
    fronts = np.array(fronts)
    assert abs(fronts.mean() - 10) < 0.3
    assert abs(fronts.var() - 5) < 0.8  # binomial(20, 1/2): variance 5
    assert fronts.min() >= 0 and fronts.max() <= 20


# --------------------------------------------------------------------------------------------
# Packing


def test_pack_pairs_layout():
    pairs = [
        SentencePair([11, 12, 13], [21, 22], False),
        SentencePair([31], [41, 42, 43, 44, 45, 46], True),
        SentencePair([51, 52, 53, 54, 55], [61], False),
    ]
    packed = pack_pairs(pairs, cls_id=101, sep_id=102, max_seq_length=12)
    assert len(packed) == 3
    assert packed.input_ids.dtype == np.int32 and packed.input_ids.shape == (3, 12)
    assert packed.segment_ids.dtype == np.int8 and packed.segment_ids.shape == (3, 12)
    assert packed.lengths.dtype == np.int32
    assert packed.next_sentence_labels.dtype == np.int8
    assert packed.input_ids.tolist() == [
        [101, 11, 12, 13, 102, 21, 22, 102, 0, 0, 0, 0],
        [101, 31, 102, 41, 42, 43, 44, 45, 46, 102, 0, 0],
        [101, 51, 52, 53, 54, 55, 102, 61, 102, 0, 0, 0],
    ]
    assert packed.segment_ids.tolist() == [
        [0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0],
        [0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0],
        [0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0],
    ]
    assert packed.lengths.tolist() == [8, 10, 9]
    assert packed.next_sentence_labels.tolist() == [0, 1, 0]


def test_pack_pairs_full_row_and_random_pairs():
    rng = random.Random(1)
    pairs = []
    for _ in range(200):
        la = rng.randint(1, 30)
        lb = rng.randint(1, 61 - la)
        pairs.append(
            SentencePair(
                [rng.randint(5, 999) for _ in range(la)],
                [rng.randint(5, 999) for _ in range(lb)],
                rng.random() < 0.5,
            )
        )
    packed = pack_pairs(pairs, 1, 2, 64)
    for r, pair in enumerate(pairs):
        la, lb = len(pair.tokens_a), len(pair.tokens_b)
        n = la + lb + 3
        row = packed.input_ids[r].tolist()
        assert row[:n] == [1, *pair.tokens_a, 2, *pair.tokens_b, 2]
        assert row[n:] == [0] * (64 - n)
        assert packed.segment_ids[r].tolist() == [0] * (la + 2) + [1] * (lb + 1) + [0] * (64 - n)
        assert packed.lengths[r] == n
        assert packed.next_sentence_labels[r] == int(pair.is_random_next)
    # a pair filling the row exactly
    full = pack_pairs([SentencePair([7] * 30, [8] * 31, False)], 1, 2, 64)
    assert full.lengths.tolist() == [64]
    assert full.input_ids[0, -1] == 2


def test_pack_pairs_rejects_too_long_and_handles_empty():
    with pytest.raises(ValueError, match="exceeds max_seq_length"):
        pack_pairs([SentencePair([1] * 5, [2] * 5, False)], 101, 102, 12)
    empty = pack_pairs([], 101, 102, 16)
    assert len(empty) == 0
    assert empty.input_ids.shape == (0, 16) and empty.segment_ids.shape == (0, 16)
