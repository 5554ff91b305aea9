"""The one cutting rule for overlong lines and sentences (``transforms.overlong_text``)."""

from __future__ import annotations

import random

import pytest

from transforms.overlong_text import cut_overlong


def test_examples_with_and_without_semicolons():
    text = "one two three; four five"
    assert cut_overlong(text, 20, prefer_semicolon=True) == ["one two three;", "four five"]
    assert cut_overlong(text, 20) == ["one two three; four", "five"]
    # a semicolon in the first half of the window is not preferred; no whitespace: a hard cut
    assert cut_overlong("xyz;abcdefghij klm", 12, prefer_semicolon=True) == [
        "xyz;abcdefgh",
        "ij klm",
    ]
    assert cut_overlong("x" * 25, 10) == ["x" * 10, "x" * 10, "x" * 5]
    assert cut_overlong("a\t\tb c", 3) == ["a", "b c"]
    assert cut_overlong("   ", 2) == []


@pytest.mark.parametrize("prefer_semicolon", [False, True])
def test_pieces_fit_and_keep_every_word(prefer_semicolon):
    rng = random.Random(7)
    alphabet = ["a", "bb", "ccc", "d;", "eeeeeeeeeeeeeeeeeeee", " ", "  ", "\t", ";"]
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60))).strip()
        limit = rng.randrange(1, 30)
        pieces = cut_overlong(text, limit, prefer_semicolon=prefer_semicolon)
        assert all(0 < len(p) <= limit and p == p.strip() for p in pieces)
        assert "".join("".join(pieces).split()) == "".join(text.split())
        if len(text) <= limit:
            assert pieces == ([text] if text else [])
