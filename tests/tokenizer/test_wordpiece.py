"""BertWordPieceTokenizer: unit tests on a tiny vocab, and id-identity with the Python reference.

The reference is ``transformers.BertTokenizerLegacy`` used like google-research/bert's
FullTokenizer: ``basic_tokenizer.tokenize`` then ``wordpiece_tokenizer.tokenize`` per word. Its
``tokenize()`` is not used because it keeps special tokens such as "[MASK]" whole.
"""

from __future__ import annotations

import bz2
import os
import pickle
import random
import re
import sys
import time
import unicodedata
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from tokenizers import normalizers

from tokenizer.vocab import Vocab
from tokenizer.wordpiece import (
    BERT_NORMALIZATION_VERSION,
    FINAL_SIGMA_LOOKBEHIND,
    MAX_INPUT_CHARS_PER_WORD,
    BertWordPieceTokenizer,
    bert_normalizer,
    bert_pre_tokenizer,
    build_bert_tokenizer,
)

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "corpora"

TINY_TOKENS = [
    "[PAD]", "[unused0]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
    "hello", "world", "Hello", "World", "un", "##aff", "##able", "mask", "MASK",
    ",", "!", ".", "'", "[", "]", "$", "^", "`", "¿", "—", "\u2e55",
    "cafe", "café", "Café", "中", "文", "\U0002b820",
    "οδος", "σ", "ς", "##σ", "##ς", "a", "##a", "x", "y", "##x", "##y",
]  # fmt: skip


@pytest.fixture
def tiny_vocab_path(tmp_path: Path) -> Path:
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(TINY_TOKENS) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def tiny_vocab(tiny_vocab_path: Path) -> Vocab:
    return Vocab.from_bytes(tiny_vocab_path.read_bytes())


def _require(what: str, available: bool) -> None:
    """Missing test inputs fail in CI and skip elsewhere."""
    if available:
        return
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(f"{what} is required in CI")
    pytest.skip(f"{what} not available")


def _corpora() -> Path:
    _require(f"real corpora at {CORPORA}", (CORPORA / "vocab").is_dir())
    return CORPORA


def _legacy_module() -> ModuleType:
    try:
        from transformers.models.bert import tokenization_bert_legacy
    except ImportError:
        tokenization_bert_legacy = None
    _require("transformers (BertTokenizerLegacy)", tokenization_bert_legacy is not None)
    return tokenization_bert_legacy


def _reference(vocab_path: Path, do_lower_case: bool) -> Callable[[str], list[int]]:
    """text -> ids of BertTokenizerLegacy used as FullTokenizer (no special-token handling)."""
    legacy = _legacy_module()
    ref = legacy.BertTokenizerLegacy(
        str(vocab_path),
        do_lower_case=do_lower_case,
        tokenize_chinese_chars=True,
        strip_accents=None,
    )
    basic, wordpiece = ref.basic_tokenizer, ref.wordpiece_tokenizer
    assert not basic.never_split

    token_ids = ref.vocab  # every word piece is in it, [UNK] included

    def ids(text: str) -> list[int]:
        return [token_ids[p] for w in basic.tokenize(text) for p in wordpiece.tokenize(w)]

    return ids


def _reference_word_by_word(vocab_path: Path, do_lower_case: bool) -> Callable[[str], list[int]]:
    """``_reference`` computed once per distinct word: a line is cut where the reference sees
    whitespace (space, tab, newline, carriage return, category Zs), and the reference's ids of
    each piece are remembered. Exact: every step of the reference keeps such a character a space
    and works on the characters between spaces alone (control characters go, CJK characters are
    spaced, NFC composes nothing with a space); the test that uses it checks this on whole lines.
    The corpora's ~3 M words are a few hundred thousand distinct ones."""
    whole = _reference(vocab_path, do_lower_case)
    spaces = "".join(
        c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.category(c) == "Zs"
    )
    cut = re.compile(f"[\\t\\n\\r{spaces}]+").split
    known: dict[str, list[int]] = {}

    def ids(text: str) -> list[int]:
        out: list[int] = []
        for word in cut(text):
            word_ids = known.get(word)
            if word_ids is None:
                word_ids = known[word] = whole(word)
            out += word_ids
        return out

    return ids


def _pre_tokens(do_lower_case: bool) -> Callable[[str], list[str]]:
    normalizer, pre_tokenizer = bert_normalizer(do_lower_case), bert_pre_tokenizer()
    return lambda text: [
        w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text))
    ]


UNCASED_CASES = [
    ("Hello, World!", ["hello", ",", "world", "!"]),
    ("unaffable", ["un", "##aff", "##able"]),
    # accents: lowercase, NFD, drop Mn; precomposed and decomposed alike
    ("Café", ["cafe"]),
    ("CAFE\u0301", ["cafe"]),
    # CJK ideographs are isolated, including Extension E (U+2B820..) that Rust's own table misses
    ("中文x", ["中", "文", "x"]),
    ("x\U0002b820y", ["x", "\U0002b820", "y"]),
    # special tokens in text are ordinary text
    ("[MASK]", ["[", "mask", "]"]),
    ("[UNK]", ["[", "[UNK]", "]"]),
    # Final_Sigma: str.lower() context, which sees through case-ignorable punctuation
    ("ΟΔΟΣ", ["οδος"]),
    ("Σ", ["σ"]),
    ("AΣ", ["a", "##ς"]),
    ("AΣA", ["a", "##σ", "##a"]),
    ("A'Σ", ["a", "'", "ς"]),
    # ASCII non-alphanumerics and Unicode P* are punctuation
    ("$x^y`", ["$", "x", "^", "y", "`"]),
    ("¿x—y", ["¿", "x", "—", "y"]),
    ("x\u166dy", ["[UNK]"]),  # U+166D is So in current Unicode: not punctuation
    # control characters go (U+0000, U+FFFD, Cc, Cf, Co private use, Cn unassigned)
    ("hel\x00lo\ufffd", ["hello"]),
    ("\u200bhel\ue000lo\u0378", ["hello"]),
    ("hello\x85world", ["[UNK]"]),  # NEL is a control (dropped), not a separator
    # whitespace: \t \n \r and Zs become spaces; U+2028 separates words too
    ("hello\tworld\r\nx", ["hello", "world", "x"]),
    ("hello\u00a0world\u3000x\u2028y", ["hello", "world", "x", "y"]),
    # words that cannot be split, or are longer than 100 characters, are [UNK] as a whole
    ("helloq", ["[UNK]"]),
    ("a" * MAX_INPUT_CHARS_PER_WORD, ["a"] + ["##a"] * (MAX_INPUT_CHARS_PER_WORD - 1)),
    ("A" * (MAX_INPUT_CHARS_PER_WORD + 1), ["[UNK]"]),
    ("x " + "a" * 150 + " y", ["x", "[UNK]", "y"]),
    ("", []),
    (" \t\u200b ", []),
]

CASED_CASES = [
    ("Hello, World!", ["Hello", ",", "World", "!"]),
    ("hello", ["hello"]),
    ("Café", ["Café"]),
    ("Cafe\u0301", ["Café"]),  # NFC (BertTokenizerLegacy applies it; google-research/bert did not)
    ("cafe", ["cafe"]),
    ("[MASK]", ["[", "MASK", "]"]),
    ("ΟΔΟΣ", ["[UNK]"]),
    ("中文x", ["中", "文", "x"]),
    ("HELLO", ["[UNK]"]),
]


@pytest.mark.parametrize(("text", "expected"), UNCASED_CASES)
def test_uncased_tokens(tiny_vocab: Vocab, text: str, expected: list[str]) -> None:
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    assert tok.tokenize(text) == expected
    assert tok.encode(text) == [tiny_vocab.id_of(t) for t in expected]


@pytest.mark.parametrize(("text", "expected"), CASED_CASES)
def test_cased_tokens(tiny_vocab: Vocab, text: str, expected: list[str]) -> None:
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=False)
    assert tok.tokenize(text) == expected
    assert tok.encode(text) == [tiny_vocab.id_of(t) for t in expected]


def test_new_unicode_punctuation_follows_unicodedata(tiny_vocab: Vocab) -> None:
    """U+2E55 is Ps since Unicode 14 (Rust's own punctuation table predates it)."""
    if unicodedata.category("\u2e55") != "Ps":
        pytest.skip(f"Python's Unicode {unicodedata.unidata_version} predates U+2E55")
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    assert tok.tokenize("x\u2e55y") == ["x", "\u2e55", "y"]


def test_final_sigma_lookbehind_bound() -> None:
    """Documented residual: str.lower() looks through any number of case-ignorables, we 64."""
    pre_tokens = _pre_tokens(do_lower_case=True)
    near, far = (
        "A" + "'" * FINAL_SIGMA_LOOKBEHIND + "Σ",
        "A" + "'" * (FINAL_SIGMA_LOOKBEHIND + 1) + "Σ",
    )
    assert pre_tokens(near)[-1] == near.lower()[-1] == "ς"
    assert pre_tokens(far)[-1] == "σ" != far.lower()[-1]


def test_uppercase_greek_is_linear_time(tiny_vocab: Vocab) -> None:
    """An unbounded Oniguruma look-behind took 24 s for 80 kB of "ΣΑΣ " (quadratic)."""
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    started = time.perf_counter()
    assert len(tok.encode("ΣΑΣ " * 50_000)) == 50_000
    assert time.perf_counter() - started < 5


def test_encode_batch_matches_encode(tiny_vocab: Vocab) -> None:
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    texts = [text for text, _ in UNCASED_CASES]
    assert tok.encode_batch(texts) == [tok.encode(t) for t in texts]
    assert tok.encode_batch([]) == []
    assert tok.encode_batch([""]) == [[]]


def test_encode_documents_matches_per_document_encoding(tiny_vocab: Vocab) -> None:
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    texts = [text for text, _ in UNCASED_CASES]
    documents = [texts[:3], [], texts[3:4], texts[4:], [""], ["Hello, World!"] * 3]
    assert tok.encode_documents(documents) == [tok.encode_batch(d) for d in documents]
    assert tok.encode_documents([]) == []


# ASCII (controls included) and the fast path's typographic characters, with a few others that
# send a text down the full pipeline.
_FAST_POOL = (
    "aAbBxyzZ09 .,;:!?'\"()[]{}<>@#$%^&*-_=+/\\|`~\t\n\r\x00\x01\x0b\x0c\x1c\x1f\x7f"
    "‘’‚‛“”„‟«»‹›‐‑‒–—―…•·′″¡¿§¶†‡°£€¥¢©®×÷"
)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_fast_path_matches_the_full_pipeline(tiny_vocab_path: Path, do_lower_case: bool) -> None:
    """Texts the Python fast path takes get the full Rust pipeline's ids (and the reference's)."""
    vocab = Vocab.from_bytes(tiny_vocab_path.read_bytes())
    ours = BertWordPieceTokenizer(vocab, do_lower_case)
    full = build_bert_tokenizer(vocab, do_lower_case)
    rng = random.Random(20261201)
    texts = ["".join(rng.choices(_FAST_POOL, k=rng.randint(0, 20))) for _ in range(3000)]
    texts += [t + rng.choice("éΣ中\u0301\u00a0\u200b") for t in texts[:500]]  # full pipeline
    texts += ["Hello, World!", "HELLO “world”—x…", "\x00\t\n", ""]
    expected = [e.ids for e in full.encode_batch(texts, add_special_tokens=False)]
    assert ours.encode_batch(texts) == expected
    assert [ours.encode(t) for t in texts] == expected
    assert _flat_lists(ours, texts) == expected
    taken = sum(ours._fast_path().prepare(t) is not None for t in texts)
    assert 3000 <= taken < len(texts)  # both paths were exercised
    ref_ids = _reference(tiny_vocab_path, do_lower_case)
    assert expected == [ref_ids(t) for t in texts]


def test_word_cache_is_bounded_and_changes_no_ids(
    tiny_vocab: Vocab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path's word-ids cache starts again when full; ids are the same either way."""
    from tokenizer import wordpiece

    rng = random.Random(7)
    texts = [" ".join(f"w{rng.randint(0, 500)}x" for _ in range(8)) + "." for _ in range(400)]
    expected = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True).encode_batch(texts)
    monkeypatch.setattr(wordpiece, "MAX_CACHED_WORDS", 50)
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    got = [ids for text in texts for ids in tok.encode_batch([text])]
    assert got == expected
    assert 0 < len(tok._fast_path()._word_ids) <= 50


# Bad and unusual input, ASCII (fast path) and not (full pipeline), often in one batch.
_BAD_INPUTS = [
    "",
    " \t\n\r ",
    "a" * 1_000_000,
    "word " + "b" * 1_000_000 + ". after",
    "x" * MAX_INPUT_CHARS_PER_WORD,
    "y" * (MAX_INPUT_CHARS_PER_WORD + 1),
    "z" * MAX_INPUT_CHARS_PER_WORD + "." + "q" * (MAX_INPUT_CHARS_PER_WORD + 1),
    "the " * 100_000,
    "nul\x00inside \x00\x00 and \x01\x1b\x7f controls\x0b\x0c\x1c\x1f",
    "replacement \ufffd char\ufffd",
    "combining e\u0301 and a\u0308\u0301 marks \u0301 alone",
    "中文字 mixed with 日本語 and 한국어",
    "zero\u200bwidth no\u00a0break \u2028line sep",
    "“curly”—dashes… and ‘quotes’",
    "[MASK] [CLS] ##a",
    "İstanbul ſ K ß ﬁ ΣΑΣ",
]


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_bad_input_fast_and_full_paths_match_the_rust_pipeline(do_lower_case: bool) -> None:
    """The real vocabulary, one batch of bad and unusual texts: the fast path's cached word ids,
    ``encode`` and the plain full Rust tokenizer agree (and, but for the 1 MB texts, the
    reference); words over ``MAX_INPUT_CHARS_PER_WORD`` are [UNK] and never cached."""
    vocab_path = _corpora() / "vocab" / "bert-base-uncased-vocab.txt"
    vocab = Vocab.from_file(str(vocab_path))
    ours = BertWordPieceTokenizer(vocab, do_lower_case)
    full = build_bert_tokenizer(vocab, do_lower_case)
    expected = [e.ids for e in full.encode_batch(_BAD_INPUTS, add_special_tokens=False)]
    assert ours.encode_batch(_BAD_INPUTS) == expected
    assert ours.encode_batch(_BAD_INPUTS[::-1]) == expected[::-1]  # now from the cache
    assert _flat_lists(ours, _BAD_INPUTS) == expected
    assert _flat_lists(BertWordPieceTokenizer(vocab, do_lower_case), _BAD_INPUTS) == expected
    assert [ours.encode(t) for t in _BAD_INPUTS] == expected
    assert expected[2] == [vocab.unk_id]
    assert expected[3][1] == vocab.unk_id and len(expected[3]) == 4
    cache = ours._fast_path()._word_ids
    assert cache and max(map(len, cache)) <= MAX_INPUT_CHARS_PER_WORD
    ref_ids = _reference(vocab_path, do_lower_case)
    for text, ids in zip(_BAD_INPUTS, expected, strict=True):
        if len(text) < 100_000:
            assert ref_ids(text) == ids, repr(text)


def test_lone_surrogates_are_dropped_as_the_reference_does(tiny_vocab_path: Path) -> None:
    """Rust refuses a lone surrogate (a TypeError); the reference drops it (category Cs)."""
    vocab = Vocab.from_bytes(tiny_vocab_path.read_bytes())
    tok = BertWordPieceTokenizer(vocab, do_lower_case=True)
    texts = ["ab\ud800c", "\udfff", "café\udc80 x", "hello"]
    clean = ["abc", "", "café x", "hello"]
    expected = tok.encode_batch(clean)
    assert tok.encode_batch(texts) == expected
    assert [tok.encode(t) for t in texts] == expected
    ref_ids = _reference(tiny_vocab_path, True)
    assert [ref_ids(t) for t in texts] == expected


def test_tokenize_drops_lone_surrogates_as_the_batch_path_does(tiny_vocab_path: Path) -> None:
    """The debugging ``tokenize()`` gives the tokens of the ids ``encode_batch`` gives, lone
    surrogates included (it used to hand them to Rust and raise a TypeError)."""
    vocab = Vocab.from_bytes(tiny_vocab_path.read_bytes())
    for lower in (True, False):
        tok = BertWordPieceTokenizer(vocab, do_lower_case=lower)
        texts = ["a\ud800b", "\udfff", "hello\udc80 world", "unaffable\ud83d\ude00", "Hello"]
        batch = tok.encode_batch(texts)
        assert [[vocab.id_of(t) for t in tok.tokenize(text)] for text in texts] == batch
        assert tok.tokenize("a\ud800b") == tok.tokenize("ab") and tok.tokenize("\udfff") == []


def test_full_word_cache_is_replaced_not_cleared_in_place(
    tiny_vocab: Vocab, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch with more distinct words than the cache holds still gets the right ids, and the
    old cache is left intact (a call in another thread may be reading it)."""
    from tokenizer import wordpiece

    monkeypatch.setattr(wordpiece, "MAX_CACHED_WORDS", 10)
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    plain = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    first = ["a x y", "x. y!"]
    assert tok.encode_batch(first) == [plain.encode(t) for t in first]
    old = tok._fast_path()._word_ids
    held = dict(old)
    many = [" ".join(f"x{i}y" for i in range(40)), "a b c"]
    assert tok.encode_batch(many) == [plain.encode(t) for t in many]
    assert tok._fast_path()._word_ids is not old and old == held


def test_fast_path_takes_curly_quotes_and_dashes() -> None:
    """The characters of English prose pass the fast path's checks (a candidate that fails
    them is only slower: its texts take the full pipeline)."""
    from tokenizer.wordpiece import FAST_PATH_CANDIDATES, _fast_path_chars

    for do_lower_case in (True, False):
        chars = _fast_path_chars(do_lower_case)
        assert set("‘’“”–—…«»") <= set(chars) <= set(FAST_PATH_CANDIDATES)


def test_uncased_fast_path_folds_latin_accents_as_the_full_pipeline(tiny_vocab_path: Path) -> None:
    """Latin letters with diacritics take the uncased fast path, folded to the ASCII the full
    normalizer makes of them, in any context; letters without an ASCII fold, combining marks and
    the cased tokenizer keep the full pipeline."""
    from tokenizer.wordpiece import _accent_folds

    folds = _accent_folds(True)
    assert _accent_folds(False) == {}
    assert {"é": "e", "Ā": "a", "ļ": "l", "š": "s", "ü": "u", "Ç": "c"}.items() <= folds.items()
    assert not {"ß", "ẞ", "æ", "ø", "đ", "ł"} & set(folds)  # no ASCII fold: full pipeline
    vocab = Vocab.from_bytes(tiny_vocab_path.read_bytes())
    ours = BertWordPieceTokenizer(vocab, do_lower_case=True)
    full = build_bert_tokenizer(vocab, do_lower_case=True)
    fast = ours._fast_path()
    rng = random.Random(20261202)
    letters = sorted(folds)
    texts = [f"Hello{c}world {c}, {c}{c}. HELLO{c}" for c in letters]
    texts += [
        "".join(rng.choices(list(_FAST_POOL) + letters, k=rng.randint(0, 30))) for _ in range(2000)
    ]
    slow = [t + rng.choice("\u0301\u0308Σß中\u00a0") for t in texts[:300]]
    for text in texts:
        assert fast.prepare(text) == full.normalizer.normalize_str(text), text  # type: ignore[union-attr]
    assert all(fast.prepare(t) is None for t in slow)
    batch = texts + slow
    expected = [e.ids for e in full.encode_batch(batch, add_special_tokens=False)]
    assert ours.encode_batch(batch) == expected
    ref_ids = _reference(tiny_vocab_path, True)
    assert expected[: len(letters)] == [ref_ids(t) for t in texts[: len(letters)]]
    cased = BertWordPieceTokenizer(vocab, do_lower_case=False)._fast_path()
    assert cased.prepare("Rīga") is None


def _flat_lists(tok: BertWordPieceTokenizer, texts: list[str]) -> list[list[int]]:
    """``encode_batch_flat(texts)`` cut back into one list of ids per text."""
    ids, counts = tok.encode_batch_flat(texts)
    assert ids.dtype == np.int32 and counts.dtype == np.int64 and len(counts) == len(texts)
    ends = np.cumsum(counts).tolist()
    return [ids[end - n : end].tolist() for end, n in zip(ends, counts.tolist(), strict=True)]


def test_flat_ids_cut_texts_as_str_split_does(tiny_vocab: Vocab) -> None:
    """Arrow's cut of prepared texts at spaces is ``str.split``'s: runs of spaces, leading and
    trailing spaces, texts of spaces only, chunks repeated within and across texts."""
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    rng = random.Random(3)
    words = ["hello", "world,", "(x)", "—", "a.b", "hello"]
    texts = [
        "".join(rng.choice([*words, " ", "  "]) for _ in range(rng.randint(0, 12)))
        for _ in range(500)
    ]
    texts += ["", " ", "   ", " hello ", "hello  world,  "]
    assert _flat_lists(tok, texts) == tok.encode_batch(texts)
    fast = tok._fast_path()
    prepared = [fast.prepare(t) for t in texts]
    expected = fast.ids(prepared)  # str.split, one Python lookup per chunk
    ids, counts = fast.flat_ids(prepared)
    assert counts.tolist() == [len(e) for e in expected]
    assert ids.tolist() == [t for e in expected for t in e]


def test_encode_batch_flat_equals_encode_batch(tiny_vocab: Vocab) -> None:
    """The flat form holds the same ids in the same order, for batches that take the fast path,
    the full pipeline or both, with empty texts and texts that tokenize to nothing."""
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    mixed = ["Hello, World!", "", "\x00\u200b", "naïve café", "Σ中 hello", "hello " * 50, "!"]
    for texts in (mixed, [t for t in mixed if t.isascii()], ["Σ中", "中"], []):
        expected = tok.encode_batch(texts)
        ids, counts = tok.encode_batch_flat(texts)
        assert ids.dtype == np.int32 and counts.dtype == np.int64
        assert counts.tolist() == [len(e) for e in expected]
        assert ids.tolist() == [t for e in expected for t in e]


def test_no_special_tokens_added(tiny_vocab: Vocab) -> None:
    rust = build_bert_tokenizer(tiny_vocab, do_lower_case=True)
    assert rust.encode("hello").ids == [tiny_vocab.id_of("hello")]  # default add_special_tokens
    assert rust.get_added_tokens_decoder() == {}


def test_pickle_round_trip_drops_rust_tokenizer(tiny_vocab: Vocab) -> None:
    tok = BertWordPieceTokenizer(tiny_vocab, do_lower_case=True)
    before = tok.encode_batch(["Hello, World!", "unaffable"])  # builds the Rust tokenizer
    assert tok.__getstate__()["_tokenizer"] is None
    clone = pickle.loads(pickle.dumps(tok))
    assert clone._tokenizer is None
    assert clone.encode_batch(["Hello, World!", "unaffable"]) == before
    assert clone.settings() == tok.settings()
    assert pickle.loads(pickle.dumps(clone)).encode("hello") == [tiny_vocab.id_of("hello")]


def test_settings(tiny_vocab: Vocab) -> None:
    settings = BertWordPieceTokenizer(tiny_vocab, do_lower_case=False).settings()
    assert settings == {
        "do_lower_case": False,
        "normalization_version": BERT_NORMALIZATION_VERSION,
        "vocab_sha256": tiny_vocab.sha256,
        "vocab_size": len(TINY_TOKENS),
        "max_input_chars_per_word": 100,
    }
    assert unicodedata.unidata_version in BERT_NORMALIZATION_VERSION


def test_reference_keeps_special_tokens_unless_bypassed(tiny_vocab_path: Path) -> None:
    """Why the reference is basic+wordpiece: BertTokenizerLegacy.tokenize keeps "[MASK]" whole."""
    legacy = _legacy_module()
    ref = legacy.BertTokenizerLegacy(str(tiny_vocab_path), do_lower_case=True)
    assert ref.tokenize("a [MASK] b") == ["a", "[MASK]", "[UNK]"]
    ids = _reference(tiny_vocab_path, do_lower_case=True)("a [MASK] b")
    assert ref.convert_ids_to_tokens(ids) == ["a", "[", "mask", "]", "[UNK]"]


# Characters that exercise every step: case (incl. special and final sigma), case-ignorables,
# combining marks of several classes, CJK, punctuation old and new, whitespace, controls,
# private use, unassigned, compatibility ideographs, Hangul jamo.
_FUZZ_POOL = (
    "aAeEiIoOsSxyzZ09"
    "ΣσςΑΟΔΩ"
    "\u0301\u0308\u0327\u0345\u0316\u0334\u05b0\u0903"
    "'.:\u00b7\u02b0\u00ad\u2019"
    "İıßẞǅ\ufb01\u212a\u2126\u1f88"
    "中文\uf900\U0002b820\U0002f800\u3005"
    "$^`¿—,!()[]\u166d\u2e55"
    " \t\n\r\u00a0\u2028\u2029\u3000\x85\x0b\x1c"
    "\x00\x01\u200b\ufffd\ue000\ufeff\u0378"
    "\u1100\u1161\u11a8가١"
)


@pytest.mark.parametrize("do_lower_case", [True, False])
def test_fuzz_matches_reference(tiny_vocab_path: Path, do_lower_case: bool) -> None:
    ref_basic = _legacy_module().BasicTokenizer(do_lower_case=do_lower_case)
    ref_ids = _reference(tiny_vocab_path, do_lower_case)
    ours = BertWordPieceTokenizer(Vocab.from_bytes(tiny_vocab_path.read_bytes()), do_lower_case)
    pre_tokens = _pre_tokens(do_lower_case)
    rng = random.Random(20240611)
    texts = ["".join(rng.choices(_FUZZ_POOL, k=rng.randint(1, 14))) for _ in range(3000)]
    texts += ["".join(rng.choices("aAΣ'.\u0301 ", k=rng.randint(1, 8))) for _ in range(1000)]
    for text in texts:
        assert pre_tokens(text) == ref_basic.tokenize(text), repr(text)
    assert ours.encode_batch(texts) == [ref_ids(t) for t in texts]


# ---------------------------------------------------------------------------------------------
# Slow: every code point, and every line of the real corpora, against the reference.


def _code_point_probes() -> Iterator[tuple[str, str]]:
    """(template, text): every code point in context; assigned ones in several more."""
    contexts = ("x{c}y", "{c}", "Ab{c}", "A{c}Σ", "AΣ{c}", "e{c}\u0301", "{c}\u0301")
    for cp in range(sys.maxunicode + 1):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        c = chr(cp)
        assigned = unicodedata.category(c) != "Cn"
        for i, tmpl in enumerate(contexts):
            if i == 0 or assigned:
                yield tmpl, tmpl.format(c=c)


@pytest.mark.slow
@pytest.mark.parametrize("do_lower_case", [True, False])
def test_every_code_point_matches_reference(do_lower_case: bool) -> None:
    """Pre-token strings equal the reference's for each code point in several contexts.

    Probes are joined with spaces into chunks (a space ends every context) and only differing
    chunks are re-checked probe by probe. The one residual is in NFC (cased only): combining marks
    newer than the Rust normalization tables do not let a following mark compose with the base.
    """
    ref = _legacy_module().BasicTokenizer(do_lower_case=do_lower_case)
    ours = _pre_tokens(do_lower_case)
    probes = list(_code_point_probes())
    diffs = []
    for start in range(0, len(probes), 4000):
        chunk = probes[start : start + 4000]
        text = " ".join(t for _, t in chunk)
        if ours(text) != ref.tokenize(text):
            diffs += [t for _, t in chunk if ours(t) != ref.tokenize(t)]
    rust_nfc = normalizers.NFC()
    residual = [t for t in diffs if rust_nfc.normalize_str(t) != unicodedata.normalize("NFC", t)]
    print(
        f"\n{len(probes)} probes; {len(diffs)} differ, {len(residual)} of them NFC-table residuals"
    )
    assert diffs == residual
    # 51 marks on Python 3.11 (Unicode 14); newer Pythons add a few more.
    assert not diffs if do_lower_case else len(diffs) <= 100


def _book_lines(path: Path) -> Iterator[str]:
    # Project Gutenberg: "-8.txt" files are ISO-8859-1, the others UTF-8 (most with a BOM).
    encoding = "iso-8859-1" if path.name.endswith("-8.txt") else "utf-8-sig"
    with path.open(encoding=encoding, newline=None) as f:
        for line in f:
            yield line.rstrip("\n")


def _wiki_lines(path: Path) -> Iterator[str]:
    opener = bz2.open if path.suffix == ".bz2" else open
    with opener(path, "rt", encoding="utf-8", newline=None) as f:
        for line in f:
            yield line.rstrip("\n")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("vocab_name", "do_lower_case"),
    [("bert-base-uncased-vocab.txt", True), ("bert-base-cased-vocab.txt", False)],
)
def test_real_corpora_ids_identical_to_reference(vocab_name: str, do_lower_case: bool) -> None:
    """Every line of every book and wiki dump: ids identical to BertTokenizerLegacy's."""
    corpora = _corpora()
    vocab_path = corpora / "vocab" / vocab_name
    whole_line = _reference(vocab_path, do_lower_case)
    ref = _reference_word_by_word(vocab_path, do_lower_case)
    ours = BertWordPieceTokenizer(Vocab.from_file(str(vocab_path)), do_lower_case)
    sources = [(p, _book_lines) for p in sorted((corpora / "books").glob("*.txt"))]
    sources += [(p, _wiki_lines) for p in sorted((corpora / "wiki").iterdir()) if ".xml" in p.name]
    assert len(sources) >= 19, "expected 14 books and 5 wiki dumps"
    lines = [line for path, read in sources for line in read(path)]
    unique = sorted(set(lines))  # identical lines give identical ids: compare each once
    started = time.perf_counter()
    mismatched = n_tokens = 0
    batched = ours.encode_batch(unique)
    assert _flat_lists(ours, unique) == batched  # the tokenize stage's path
    for i, (line, ids) in enumerate(zip(unique, batched, strict=True)):
        expected = ref(line)
        if i % 50 == 0:  # the word-by-word reference is the reference
            assert expected == whole_line(line), line
        n_tokens += len(expected)
        if ids != expected:
            mismatched += 1
            if mismatched <= 5:
                print(f"\nMISMATCH {line!r}\n ours {ids}\n  ref {expected}")
    total, distinct = len(lines), len(unique)
    print(
        f"\n{vocab_name}: {total} lines ({distinct} distinct, {n_tokens} tokens) from "
        f"{len(sources)} files; identical: {100 * (distinct - mismatched) / distinct:.4f}% "
        f"({time.perf_counter() - started:.0f}s)"
    )
    assert total > 200_000
    assert mismatched == 0


def test_shipped_unicode_tables_are_what_this_interpreter_computes():
    """The file that saves each process ~2 s of walking every code point holds exactly what
    would be computed here (regenerate with ``python -m tokenizer.wordpiece``)."""
    import json

    from tokenizer import wordpiece

    shipped = json.loads(wordpiece.UNICODE_TABLES_FILE.read_text(encoding="utf-8"))
    computed = json.loads(json.dumps(wordpiece.computed_unicode_tables()))
    if shipped["key"] != computed["key"]:
        pytest.skip(f"tables shipped for {shipped['key']}, this is {computed['key']}")
    assert shipped == computed


def test_unicode_tables_for_another_interpreter_are_not_used(tmp_path, monkeypatch):
    import json

    from tokenizer import wordpiece

    stale = json.loads(wordpiece.UNICODE_TABLES_FILE.read_text(encoding="utf-8"))
    stale["key"]["unidata_version"] = "0.0.0"
    stale["tables"]["punct"] = []
    path = tmp_path / "unicode_tables.json"
    path.write_text(json.dumps(stale), encoding="utf-8")
    monkeypatch.setattr(wordpiece, "UNICODE_TABLES_FILE", path)
    for cached in (wordpiece._shipped_tables, wordpiece._tables, wordpiece._composition_seconds):
        cached.cache_clear()
    try:
        assert wordpiece._shipped_tables() is None
        assert wordpiece._tables().punct  # computed, not the stale (emptied) file
    finally:
        monkeypatch.undo()
        for cached in (
            wordpiece._shipped_tables,
            wordpiece._tables,
            wordpiece._composition_seconds,
        ):
            cached.cache_clear()
