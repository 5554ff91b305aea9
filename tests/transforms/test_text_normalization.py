"""Text normalization and the exact-dedup content hash (transforms.text_normalization)."""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata

import pytest

from transforms.text_normalization import (
    collapse_whitespace,
    content_hash,
    content_hash_of_normalized,
    normalize_text,
)

_SPACES = [chr(c) for c in range(0x3000 + 1) if chr(c).isspace()]


def _whitespace_texts(seed: int, count: int) -> list[str]:
    """Words, every whitespace character (runs too), line breaks and blank lines, mixed."""
    rng = random.Random(seed)
    pieces = ["a", "Bc", "straße", "ΣΑΣ", "中文", "x.", " ", " ", "  ", "\n", "\n\n", "\n\n\n"]
    pieces += _SPACES
    return ["".join(rng.choices(pieces, k=rng.randint(0, 12))) for _ in range(count)]


def test_collapse_whitespace_is_split_and_join():
    texts = _whitespace_texts(1, 5000) + ["", " ", "a", "a b", " a", "a ", "a  b", "a\u00a0b"]
    for text in texts:
        assert collapse_whitespace(text) == " ".join(text.split()), repr(text)
    collapsed = "already one space between words."
    assert collapse_whitespace(collapsed) is collapsed  # nothing split, nothing copied


def test_content_hash_of_normalized_is_sha256_of_the_folded_words():
    for text in _whitespace_texts(2, 5000):
        folded = " ".join(text.casefold().split())
        expected = hashlib.sha256(folded.encode("utf-8")).hexdigest()
        assert content_hash_of_normalized(text) == expected, repr(text)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("one\r\ntwo\rthree\nfour", "one\ntwo\nthree\nfour"),
        ("a\vb\fc\x85d\u2028e\u2029f", "a\nb\nc\nd\ne\nf"),
        ("tab\tseparated\t\twords", "tab separated words"),
        ("many    spaces \u00a0\u2003 and\u3000more", "many spaces and more"),
        ("  leading and trailing  \n  second line  ", "leading and trailing\nsecond line"),
        ("nul\x00 bell\x07 esc\x1b del\x7f c1\x9b end", "nul bell esc del c1 end"),
        (
            "\ufeffbom, soft\u00adhyphen, zero\u200bwidth, word\u2060joiner",
            "bom, softhyphen, zerowidth, wordjoiner",
        ),
        ("lone\ud800 sur\udfffrogates \udc80", "lone surrogates"),
        ("para one\n\n\n\n\npara two", "para one\n\npara two"),
        ("\n\n\n  \nbody\n \n\n", "body"),
        ("", ""),
    ],
)
def test_normalize_text_rules(raw: str, expected: str):
    assert normalize_text(raw) == expected


def test_nfc_composes_combining_marks():
    decomposed = "Cafe\u0301 de\u0301ja\u0300 vu, A\u030angstro\u0308m"
    out = normalize_text(decomposed)
    assert out == "Café déjà vu, Ångström"
    assert unicodedata.is_normalized("NFC", out)


def test_control_character_between_base_and_mark_still_composes():
    assert normalize_text("e\x00\u0301") == "é"


def test_zero_width_joiners_are_kept():
    text = "क्\u200dष and \u200cx"
    assert normalize_text(text) == text


def test_normalize_text_is_idempotent():
    samples = [
        "  A\tb\r\n\r\n\r\nc\u00a0\u00a0d e\u0301 \x01\n\n",
        "\u2028\u2029x\x85y\ufeff",
        "line one  \n   line two\t\n\n\n\nline three",
    ]
    for sample in samples:
        once = normalize_text(sample)
        assert normalize_text(once) == once


def test_output_invariants():
    out = normalize_text("a\r\n\t\tb\x00\x0b\x0c  c\n\n\n\nd \u00a0 e")
    assert "\r" not in out and "\t" not in out and "  " not in out and "\n\n\n" not in out
    assert all(ch == "\n" or unicodedata.category(ch) != "Cc" for ch in out)


def test_content_hash_is_sha256_of_folded_text():
    expected = hashlib.sha256(b"hello world").hexdigest()
    assert content_hash("Hello World") == expected
    assert len(expected) == 64


def test_content_hash_ignores_case_spacing_wrapping_line_endings_and_composition():
    base = content_hash("The quick brown fox jumps over the lazy café.")
    variants = [
        "THE QUICK BROWN FOX JUMPS OVER THE LAZY CAFÉ.",
        "The quick brown fox\r\njumps over the\tlazy  cafe\u0301.",
        "  The quick\n\nbrown fox jumps over the lazy café.\n",
        "\ufeffThe quick brown fox jumps over the lazy café.",
    ]
    for variant in variants:
        assert content_hash(variant) == base, variant


def test_content_hash_casefolds_beyond_lower():
    assert content_hash("STRASSE") == content_hash("straße")


def test_content_hash_differs_on_content():
    assert content_hash("one two") != content_hash("one two.")
    assert content_hash("one two") != content_hash("onetwo")


# ---------------------------------------------------------------------------------------------
# The fast paths (skipped steps, str.split for whitespace) against the rules applied literally.

_LITERAL_LINE_BREAKS = re.compile(r"\r\n|[\r\v\f\x85\u2028\u2029]")
_LITERAL_REMOVED = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ufeff\u00ad\u200b\u2060\ud800-\udfff]")


def _literal_normalize(text: str) -> str:
    text = _LITERAL_LINE_BREAKS.sub("\n", text)
    text = _LITERAL_REMOVED.sub("", text.replace("\t", " "))
    text = unicodedata.normalize("NFC", text)
    lines = [re.sub(r"[^\S\n]+", " ", line).strip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def _literal_content_hash(text: str) -> str:
    folded = re.sub(r"\s+", " ", _literal_normalize(text).casefold()).strip()
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()


_POOL = (
    "ab Z.\t\n\r\v\f\x85\u2028\u2029\x00\x07\x1c\x1f\x7f\x9b\ufeff\u00ad\u200b\u2060\u200c\u200d"
    "\u00a0\u2003\u3000\u1680e\u0301\u0327\u0308AÅΣσßẞ\ufb01İ中\u212b\u2126\ud800\udfff"
)


def test_fast_paths_equal_the_literal_rules():
    rng = random.Random(20261201)
    texts = ["".join(rng.choices(_POOL, k=rng.randint(0, 24))) for _ in range(20_000)]
    texts += ["plain ascii text", "two  spaces", "tail \n\n\n\n", "é\u0301", "\u2028x\r\n\r\ny"]
    for text in texts:
        assert normalize_text(text) == _literal_normalize(text), repr(text)
        assert content_hash(text) == _literal_content_hash(text), repr(text)
        # the clean job hashes paragraphs it has normalized, joined by blank lines
        paragraphs = [normalize_text(part) for part in text.split("\n\n")]
        joined = "\n\n".join(p for p in paragraphs if p)
        assert content_hash_of_normalized(joined) == _literal_content_hash(joined), repr(text)
