"""MinHash/LSH near-duplicate detection: similar texts collide, different ones do not, and the
kept document of a group is its smallest id."""

from __future__ import annotations

import random

import numpy as np

from transforms.near_duplicates import (
    NUM_PERMUTATIONS,
    band_keys,
    documents_to_drop,
    duplicate_pairs,
    minhash_signature,
    similarity,
)

WORDS = [f"w{i}" for i in range(5000)]


def text(seed: int, n: int = 600) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def edited(t: str, fraction: float, seed: int = 0) -> str:
    rng = random.Random(seed)
    words = t.split()
    for i in rng.sample(range(len(words)), int(len(words) * fraction)):
        words[i] = "changed"
    return " ".join(words)


def test_signature_is_deterministic_and_sized():
    a = minhash_signature(text(1))
    assert a.shape == (NUM_PERMUTATIONS,) and a.dtype == np.uint64
    assert np.array_equal(a, minhash_signature(text(1)))
    assert similarity(a, minhash_signature(text(1).upper())) == 1.0  # case-insensitive


def test_light_edit_is_a_candidate_and_a_duplicate():
    a, b = minhash_signature(text(1)), minhash_signature(edited(text(1), 0.01))
    assert similarity(a, b) >= 0.8
    assert set(band_keys(a)) & set(band_keys(b))
    assert duplicate_pairs([("b", b), ("a", a)]) == [("a", "b")]


def test_unrelated_texts_are_not():
    a, b = minhash_signature(text(1)), minhash_signature(text(2))
    assert similarity(a, b) < 0.1
    assert not set(band_keys(a)) & set(band_keys(b))
    assert duplicate_pairs([("a", a), ("b", b)]) == []


def test_heavy_edit_is_below_threshold():
    a, b = minhash_signature(text(3)), minhash_signature(edited(text(3), 0.3))
    assert similarity(a, b) < 0.8


def test_groups_keep_their_smallest_id():
    drop = documents_to_drop([("c", "d"), ("b", "c"), ("x", "y")])
    assert drop == {"c": "b", "d": "b", "y": "x"}
    assert documents_to_drop([]) == {}


def test_empty_document_signature():
    sig = minhash_signature("")
    assert (sig == np.iinfo(np.uint64).max).all()
