"""tokenizer.vocab_training: Google layout, exact size, determinism, usable result."""

from __future__ import annotations

import random

import pytest

from tokenizer.vocab import Vocab
from tokenizer.vocab_training import (
    effective_reserved_unused,
    reserved_layout,
    train_wordpiece_vocab,
)
from tokenizer.wordpiece import BertWordPieceTokenizer

_SYLLABLES = [
    "ka",
    "to",
    "ri",
    "na",
    "mo",
    "se",
    "lu",
    "pe",
    "ga",
    "di",
    "vo",
    "he",
    "ju",
    "ba",
    "ce",
    "xi",
    "qu",
    "zo",
    "fa",
    "ny",
]


def _sentences(n: int = 1500, seed: int = 7) -> list[str]:
    """A synthetic corpus: Zipf-ish words built from syllables, some capitals and punctuation."""
    rng = random.Random(seed)
    words = ["".join(rng.choices(_SYLLABLES, k=rng.randint(1, 4))) for _ in range(400)]
    weights = [1 / (i + 1) for i in range(len(words))]
    out = []
    for _ in range(n):
        sentence = rng.choices(words, weights=weights, k=rng.randint(4, 14))
        sentence[0] = sentence[0].capitalize()
        out.append(" ".join(sentence) + rng.choice([".", "!", "?", ", Café."]))
    return out


def test_reserved_layout_is_googles() -> None:
    layout = reserved_layout(994)
    assert len(layout) == 999
    assert layout[0] == "[PAD]"
    assert layout[1:100] == [f"[unused{i}]" for i in range(99)]
    assert layout[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert layout[104:] == [f"[unused{i}]" for i in range(99, 994)]
    assert reserved_layout(3) == ["[PAD]", "[unused0]", "[unused1]", "[unused2]"] + [
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]


@pytest.mark.parametrize(
    ("vocab_size", "expected"), [(30522, 994), (28996, 994), (1000, 99), (200, 19), (5, 0)]
)
def test_reserved_unused_shrinks_for_small_vocabs(vocab_size: int, expected: int) -> None:
    assert effective_reserved_unused(vocab_size, 994) == expected
    assert effective_reserved_unused(vocab_size, 0) == 0


def test_layout_size_and_usable_result() -> None:
    sentences = _sentences()
    tokens = train_wordpiece_vocab(sentences, vocab_size=300, do_lower_case=True)
    assert len(tokens) == 300
    assert len(set(tokens)) == 300
    n_unused = effective_reserved_unused(300, 994)
    assert tokens[: n_unused + 5] == reserved_layout(n_unused)
    learned = tokens[n_unused + 5 :]
    assert not [t for t in learned if t.startswith("[") and len(t) > 1]
    assert "cafe" in learned or "ca" in learned  # lowercased and accents stripped
    assert not [t for t in learned if t != t.lower() or "é" in t]
    assert any(t.startswith("##") for t in learned)

    vocab = Vocab.from_bytes(("\n".join(tokens) + "\n").encode("utf-8"))
    tok = BertWordPieceTokenizer(vocab, do_lower_case=True)
    ids = tok.encode_batch(sentences[:200])
    assert all(ids) and vocab.unk_id not in {i for row in ids for i in row}


def test_deterministic() -> None:
    # The Rust trainer alone gives a different list on every run (hash-map order).
    sentences = _sentences()
    first = train_wordpiece_vocab(sentences, vocab_size=400, do_lower_case=False)
    assert train_wordpiece_vocab(iter(sentences), vocab_size=400, do_lower_case=False) == first
    assert train_wordpiece_vocab(list(reversed(sentences)), 400, do_lower_case=False) == first


def test_cased_keeps_case() -> None:
    tokens = train_wordpiece_vocab(_sentences(), vocab_size=300, do_lower_case=False)
    learned = tokens[effective_reserved_unused(300, 994) + 5 :]
    assert "C" in learned and "é" in learned


def test_too_little_text_raises() -> None:
    with pytest.raises(ValueError, match=r"learned only \d+ of the \d+ tokens"):
        train_wordpiece_vocab(_sentences(20), vocab_size=5000, do_lower_case=True)


def test_alphabet_that_does_not_fit_raises() -> None:
    with pytest.raises(ValueError, match="alphabet"):
        train_wordpiece_vocab(_sentences(), vocab_size=40, do_lower_case=True)
