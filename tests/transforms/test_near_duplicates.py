"""MinHash/LSH near-duplicate detection: similar texts collide, different ones do not, and the
kept document of a group is its smallest id."""

from __future__ import annotations

import random

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


def test_documents_without_words_are_near_duplicates_of_nothing():
    """Two different texts of no words share their (all-max) signature: not a similarity of 1."""
    empty, symbols, prose = minhash_signature(""), minhash_signature("!!! ??? ***"), text(1)
    assert np.array_equal(empty, symbols)
    assert similarity(empty, symbols) == similarity(symbols, symbols) == 0.0
    assert similarity(symbols, minhash_signature(prose)) == 0.0
    candidates = [("a", empty), ("b", symbols), ("c", minhash_signature(prose))]
    assert duplicate_pairs(candidates) == []


# ---------------------------------------------------------------------------------------------
# The vectorized signature against the definition applied literally.


_M64 = (1 << 64) - 1


def _literal_mix(x: int) -> int:
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & _M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _is_word_char(c: str) -> bool:
    if c.isascii():
        return c.isalnum() or c == "_"
    return not ("\u00a0" <= c <= "\u00bf" or "\u2000" <= c <= "\u207f")


def _literal_words(text: str) -> list[str]:
    words, current = [], []
    for c in text.lower():
        if _is_word_char(c):
            current.append(c)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return words


def _literal_word_hash(word: str) -> int:
    data = word.encode("utf-8", "surrogatepass")
    p = sum(b * pow(nd.BASE, i, 1 << 64) for i, b in enumerate(data)) & _M64
    return _literal_mix((p + len(data) * nd.LENGTH_WEIGHT) & _M64)


def _literal_shingles(text: str, words: int = nd.SHINGLE_WORDS) -> list[int]:
    """The module docstring's definition, in Python integers."""
    h = [_literal_word_hash(w) for w in _literal_words(text)]
    weights = [int(w) for w in nd.SHINGLE_WEIGHTS]
    grams = [h[i : i + words] for i in range(max(len(h) - words + 1, 1))] if h else []
    return [
        _literal_mix(sum(w * x for w, x in zip(weights, g, strict=False)) & _M64) for g in grams
    ]


def _literal_signature(text: str) -> np.ndarray:
    shingles = set(_literal_shingles(text))
    a, b = (int(v) for v in nd._A[:, 0]), (int(v) for v in nd._B[:, 0])
    return np.array(
        [
            min(((ai * x + bi) & _M64 for x in shingles), default=_M64)
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
        assert shingle_hashes(t).tolist() == _literal_shingles(t), t
        assert np.array_equal(minhash_signature(t), _literal_signature(t)), t
    assert shingle_hashes(text(9, 3000)).dtype == np.uint64


def test_word_edges_at_multi_byte_characters_and_the_text_ends():
    """Words end at U+00A0-U+00BF and U+2000-U+207F (two- and three-byte UTF-8) wherever they
    fall, including the first and last bytes; long words and runs of non-words."""
    texts = [
        text(3, 400),
        "a" * 300 + " b c " + "d" * 50,
        ("é—word “quoted” ¿qué? " * 40).strip(),
        "x" * 1000,
        " " * 100 + "tail",
        "—lead tail—",
        "«x»",
        "¿",
        "a\u2000b\u207fc\u2080d\u00a0e\u00bff\u00c0g",
    ]
    for t in texts:
        assert shingle_hashes(t).tolist() == _literal_shingles(t), t[:40]


def test_words_are_split_at_punctuation_and_symbols_not_at_letters():
    assert len(nd.word_hashes("one,two—three “four” five…six ¿seven? «eight» nine_ten")) == 9
    assert len(nd.word_hashes("naïve café straße 中文 ǅx")) == 5
    assert len(nd.word_hashes("   ")) == 0 and len(nd.word_hashes("")) == 0
    same = nd.word_hashes("Word word WORD")
    assert same[0] == same[1] == same[2]
    assert len(set(nd.word_hashes("ab ba aab aba baa a b").tolist())) == 7


def test_bad_input_hashes_are_the_definition():
    """No words, fewer words than a shingle, a 1 MB word (longer than a piece), non-ASCII, marks,
    NUL and lone surrogates (not word characters): the definition's hashes, no error."""
    huge = "x" * 1_100_000
    texts = [
        "",
        "   \n\t ",
        "!!! ??? ... --- ***",
        "one",
        "one two",
        "four words only here",
        huge,
        f"before {huge} after and more words",
        "nul\x00inside \ufffd replacement \ud800 surrogate \udfff end",
        "中文字 日本語 한국어 e\u0301 a\u0308 ΣΑΣ straße İ",
    ]
    for t in texts:
        assert shingle_hashes(t).tolist() == _literal_shingles(t), t[:40]
        assert np.array_equal(minhash_signature(t), _literal_signature(t)), t[:40]
    assert len(shingle_hashes(huge)) == 1 and len(shingle_hashes("one two")) == 1


def test_permutations_wrap_modulo_two_to_the_64(monkeypatch: pytest.MonkeyPatch):
    """a*x + b past 2**64 wraps (unsigned arithmetic), as the definition says."""
    rows = [(1, 0), (1, _M64), (3, 1 << 63), ((1 << 64) - 1, 5)]
    rows += [(1, 0)] * (NUM_PERMUTATIONS - len(rows))
    monkeypatch.setattr(nd, "_A", np.array([[r[0]] for r in rows], dtype=np.uint64))
    monkeypatch.setattr(nd, "_B", np.array([[r[1]] for r in rows], dtype=np.uint64))
    x = [7, 1 << 62, _M64]
    got = signature_of_hashes(np.array(x, dtype=np.uint64))
    assert got.tolist() == [min((a * v + b) & _M64 for v in x) for a, b in rows]


@pytest.mark.parametrize("jaccard", [0.2, 0.5, 0.8, 0.9])
def test_agreement_estimates_the_jaccard_similarity(jaccard: float):
    """Over 300 pairs of shingle sets of a known Jaccard similarity, the signature agreement is
    unbiased (mean within 0.01; one estimate's standard deviation is ~0.04) and spread as a
    binomial of 128 rows."""
    rng = np.random.default_rng(11)
    union, estimates = 600, []
    common = round(jaccard * union)
    for _ in range(300):
        pool = rng.integers(0, np.iinfo(np.uint64).max, size=union, dtype=np.uint64)
        only = (union - common) // 2
        a = pool[: common + only]
        b = np.concatenate((pool[:common], pool[common + only :]))
        true = common / len(np.union1d(a, b))
        estimates.append(similarity(signature_of_hashes(a), signature_of_hashes(b)) - true)
    errors = np.array(estimates)
    assert abs(errors.mean()) < 0.01
    expected_sd = (jaccard * (1 - jaccard) / NUM_PERMUTATIONS) ** 0.5
    assert 0.75 * expected_sd < errors.std() < 1.25 * expected_sd


def test_agreement_tracks_the_exact_jaccard_of_edited_texts():
    """On real-looking texts: the estimate from signatures against the exact shingle Jaccard."""
    errors = []
    for seed in range(60):
        a, b = text(seed, 800), edited(text(seed, 800), 0.02 + 0.002 * seed, seed)
        sa, sb = set(_literal_shingles(a)), set(_literal_shingles(b))
        exact = len(sa & sb) / len(sa | sb)
        errors.append(similarity(minhash_signature(a), minhash_signature(b)) - exact)
    assert abs(float(np.mean(errors))) < 0.02
    assert max(abs(e) for e in errors) < 0.2


def test_signatures_of_a_batch_equal_one_at_a_time():
    """``minhash_signatures`` keeps texts apart: words, shingles and minima never cross from one
    text to the next, whatever the texts (empty, no words, fewer words than a shingle, line
    breaks, long ones)."""
    rng = random.Random(11)
    pool = ["w", "Word", "ÉLAN", "straße", "中文", "x1", "_", "a\u0301", "--", "\n", "“q”", "Σ"]
    texts = ["", "one", "one two", "!!! ???", "one two three four", "a b c d e", "\n\n"]
    texts += [" ".join(rng.choices(pool, k=rng.randint(0, 60))) for _ in range(200)]
    texts += [text(5, 3000), "", text(6, 40)]
    expected = np.stack([minhash_signature(t) for t in texts])
    assert np.array_equal(nd.minhash_signatures(texts), expected)
    assert nd.minhash_signatures([]).shape == (0, nd.NUM_PERMUTATIONS)
