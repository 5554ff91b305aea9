"""MinHash/LSH near-duplicate detection: similar texts collide, different ones do not, and the
kept document of a group is its smallest id."""

from __future__ import annotations

import hashlib
import random
import re

import numpy as np
import pytest

from transforms import near_duplicates as nd
from transforms.near_duplicates import (
    NUM_PERMUTATIONS,
    band_keys,
    documents_to_drop,
    duplicate_pairs,
    minhash_signature,
    shingle_hashes,
    signature_of_hashes,
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


# ---------------------------------------------------------------------------------------------
# The vectorized signature against the definition applied literally.


def _literal_shingles(text: str, words: int = nd.SHINGLE_WORDS) -> set[int]:
    tokens = re.findall(r"\w+", text.lower())
    if len(tokens) < words:
        grams = [" ".join(tokens)] if tokens else []
    else:
        grams = [" ".join(tokens[i : i + words]) for i in range(len(tokens) - words + 1)]
    return {
        int.from_bytes(hashlib.blake2b(g.encode(), digest_size=4).digest(), "little") for g in grams
    }


def _literal_signature(text: str) -> np.ndarray:
    p = (1 << 61) - 1
    shingles = _literal_shingles(text)
    a, b = (int(v) for v in nd._A[:, 0]), (int(v) for v in nd._B[:, 0])
    return np.array(
        [
            min(((ai * x + bi) % p for x in shingles), default=(1 << 64) - 1)
            for ai, bi in zip(a, b, strict=True)
        ],
        dtype=np.uint64,
    )


def test_signature_equals_the_definition():
    rng = random.Random(7)
    pool = ["w", "Word", "ÉLAN", "straße", "中文", "x1", "_", "ǅ", "a\u0301", "--", "İ", "σς"]
    texts = ["", "one", "one two three four", "one two three four five", "a b c d e f"]
    texts += [" ".join(rng.choices(pool, k=rng.randint(0, 40))) for _ in range(300)]
    texts += [text(9, 3000), edited(text(9, 3000), 0.2)]  # several chunks of shingles
    for t in texts:
        assert set(shingle_hashes(t).tolist()) == _literal_shingles(t), t
        assert np.array_equal(minhash_signature(t), _literal_signature(t)), t
    hashes = shingle_hashes(text(9, 3000))
    assert hashes.dtype == np.uint64 and np.all(hashes[1:] > hashes[:-1])  # unique, sorted


def test_signature_reduction_at_the_modulus_edges(monkeypatch: pytest.MonkeyPatch):
    """a*x + b at and around multiples of p = 2**61 - 1 and powers of two: the shift-and-mask
    reduction gives ``%``'s values (0 at p, not p)."""
    p = (1 << 61) - 1
    x = 3
    targets = [0, 1, p - 1, p, p + 1, 2 * p - 1, 2 * p, 1 << 61, (1 << 61) + 7, 7 * p + 5, 8 * p]
    targets += [(1 << 63) + (1 << 61) - 1, (1 << 63) + 3 * p]
    targets = [t for t in targets if t >= x]
    rows = [(1, t - x) for t in targets] + [(1 << 30, 5)]
    rows += [(1, 0)] * (NUM_PERMUTATIONS - len(rows))
    a = np.array([[r[0]] for r in rows], dtype=np.uint64)
    b = np.array([[r[1]] for r in rows], dtype=np.uint64)
    monkeypatch.setattr(nd, "_A", a)
    monkeypatch.setattr(nd, "_B", b)
    got = signature_of_hashes(np.array([x], dtype=np.uint64))
    assert got.tolist() == [
        (int(ai) * x + int(bi)) % p for ai, bi in zip(a[:, 0], b[:, 0], strict=True)
    ]
    assert got[targets.index(p)] == 0
