"""BERT WordPiece tokenization on HF ``tokenizers`` (Rust), id-identical to the Python reference.

Reference: ``transformers.BertTokenizerLegacy`` (the pure-Python port of google-research/bert's
``FullTokenizer``) used without special-token handling, i.e. ``basic_tokenizer`` followed by
``wordpiece_tokenizer``, so ``"[MASK]"`` in text becomes ``[``, ``mask``, ``]``. Its definition:

1. clean text: drop U+0000, U+FFFD and every category ``C*`` character except ``\\t\\n\\r``;
   map ``\\t\\n\\r`` and category ``Zs`` to a space;
2. put spaces around CJK ideographs (the eight code point ranges of the reference);
3. NFC; split on whitespace;
4. uncased only: ``str.lower()`` (with the Final_Sigma rule), NFD, drop category ``Mn``;
5. isolate punctuation (ASCII 33-47, 58-64, 91-96, 123-126 and category ``P*``);
6. WordPiece: greedy longest match first, ``##`` continuation prefix, words longer than
   100 code points and words that cannot be split become ``[UNK]``.

It differs from google-research/bert's original code in three places: the original drops only
``Cc``/``Cf`` (not ``Cn``/``Co``), applies no NFC, and allows 200 characters per word. We follow
the HF port (the project's oracle). On the shared corpora (books + wiki, 169,466 distinct lines)
the two definitions differ on 2 lines (a private-use character, a word of 100-200 characters).

The stock Rust ``BertNormalizer``/``BertPreTokenizer`` disagree with the reference: their Unicode
tables are older than Python's (punctuation, ``Mn``, ``Cf``), they keep unassigned ``Cn``
characters, miss CJK Extension E (U+2B820-U+2B91F), do no NFC and ignore Final_Sigma. So the
pipeline here is composed of ``Replace``/``Split`` steps whose character classes are generated
from this interpreter's ``unicodedata`` (like the reference's), plus per-character fix-ups where
Rust's NFC/NFD/lowercase tables disagree with it; ``BERT_NORMALIZATION_VERSION`` names the
Unicode version. The only per-text Python work is turning the Rust encodings into id lists.

Fast path (``_PrenormalizedPath``): on text made only of ASCII and a few typographic characters
(curly quotes, dashes, ...; the bulk of English prose) the normalizer's steps reduce to removing
ASCII controls, ``\\t\\n\\r`` as spaces and, uncased, ``str.lower()``. Python does that at C
speed and a second Rust tokenizer without a normalizer (same pre-tokenizer and model) encodes
the result: the same ids at 1.6-1.9x the throughput (measured on wiki and book sentences).
Batches go further: a Python regex equal to that pre-tokenizer splits the texts into words and
each word's ids come from a cache that Rust fills once per distinct word (a word's ids depend on
the word alone), another ~2.5x. Other text takes the full pipeline.

Lone surrogates (U+D800-U+DFFF, category Cs, which step 1 drops) cannot be passed to Rust: a
text holding one is encoded with them removed first, as the reference does.

Known residual differences (none occurs in the shared corpora; see the slow tests):

- cased only: Rust's NFC does not know the combining class of 51 marks added in Unicode 11-14
  (e.g. U+07FD, U+08D0, U+1ABF, U+1DF6, U+16FF0), so a letter followed by such a mark and then
  another combining mark is not reordered/composed as ``unicodedata`` does;
- uncased only: a capital sigma after a cased letter and more than ``FINAL_SIGMA_LOOKBEHIND``
  (64) case-ignorable characters becomes ``σ`` where ``str.lower()`` gives ``ς``.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import sys
import unicodedata
import warnings
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers
from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
from tokenizers.models import WordPiece

from tokenizer.vocab import Vocab

BERT_NORMALIZATION_VERSION: str = f"bert-hf-legacy-1/unicode-{unicodedata.unidata_version}"
"""Identifies the normalization + pre-tokenization definition (and its Unicode tables)."""

MAX_INPUT_CHARS_PER_WORD = 100
CONTINUATION_PREFIX = "##"
UNK_TOKEN = "[UNK]"

# google-research/bert's _is_chinese_char ranges (inclusive).
CJK_RANGES: tuple[tuple[int, int], ...] = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B820, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)
_ASCII_PUNCT_RANGES = ((33, 47), (58, 64), (91, 96), (123, 126))
# Case-ignorable characters (marks, apostrophes, ...) looked through between a cased letter and
# a capital sigma; str.lower() has no limit, so longer runs are a (documented) residual.
FINAL_SIGMA_LOOKBEHIND = 64
_SIGMA = "\u03a3"
_FINAL_SIGMA = "\u03c2"
# Non-ASCII characters the fast path takes as they are (each is checked by ``_fast_path_chars``
# to need no normalization, alone or next to others; any that fails is left out).
FAST_PATH_CANDIDATES = (
    "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u201f\u00ab\u00bb\u2039\u203a"  # quotes
    "\u2010\u2011\u2012\u2013\u2014\u2015\u2026\u2022\u00b7\u2032\u2033"  # dashes, dots, primes
    "\u00a1\u00bf\u00a7\u00b6\u2020\u2021\u00b0\u00a3\u20ac\u00a5\u00a2\u00a9\u00ae\u00d7\u00f7"
)
FOLD_CANDIDATE_RANGES = ((0x00C0, 0x024F), (0x1E00, 0x1EFF))
"""Latin letters with diacritics (Latin-1 Supplement, Extended-A/B, Extended Additional) that the
uncased fast path may fold to ASCII itself (``_accent_folds`` keeps those that qualify)."""
MAX_TEXTS_PER_CALL = 4096
"""Texts per Rust ``encode_batch`` call: larger batches only hold more encodings at once."""


def _ranges(cps: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted code points -> inclusive ranges."""
    out: list[list[int]] = []
    for cp in sorted(set(cps)):
        if out and cp == out[-1][1] + 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return [(a, b) for a, b in out]


def _char_class(ranges: Sequence[tuple[int, int]]) -> str:
    """Oniguruma bracket expression for inclusive code point ranges."""
    parts = []
    for a, b in ranges:
        parts.append(f"\\x{{{a:X}}}" if a == b else f"\\x{{{a:X}}}-\\x{{{b:X}}}")
    return "[" + "".join(parts) + "]"


UNICODE_TABLES_FILE = Path(__file__).with_name("unicode_tables.json")
"""The tables below as computed for the pinned interpreter and ``tokenizers`` (regenerate with
``python -m tokenizer.wordpiece``): computing them walks every code point (~2 s per process)."""


def unicode_tables_key() -> dict[str, object]:
    """What the tables depend on: the file is used only when its key equals this one."""
    return {
        "format": 1,
        "unidata_version": unicodedata.unidata_version,
        "maxunicode": sys.maxunicode,
        "tokenizers": tokenizers.__version__,
    }


class _Tables:
    """Character classes and Rust-vs-Python normalization fix-ups derived from ``unicodedata``."""

    RANGES = ("drop", "to_space", "punct", "mn", "cjk", "split_space", "cased", "ignorable")
    FIXUPS = ("lower_fixups", "nfd_fixups", "nfc_fixups")

    @classmethod
    def from_dict(cls, data: dict[str, list]) -> _Tables:
        tables = cls.__new__(cls)
        for name in cls.RANGES + cls.FIXUPS:
            setattr(tables, name, [tuple(pair) for pair in data[name]])
        return tables

    def to_dict(self) -> dict[str, list]:
        return {
            name: [list(pair) for pair in getattr(self, name)] for name in self.RANGES + self.FIXUPS
        }

    def __init__(self) -> None:
        drop, space, punct, mn, kept = [], [], [], [], []
        for cp in range(sys.maxunicode + 1):
            ch = chr(cp)
            cat = unicodedata.category(ch)
            if ch in "\t\n\r" or cat == "Zs":
                space.append(cp)
            elif cp == 0 or cp == 0xFFFD or cat[0] == "C":
                drop.append(cp)
                continue
            else:
                kept.append(ch)
            if cat[0] == "P" or any(a <= cp <= b for a, b in _ASCII_PUNCT_RANGES):
                punct.append(cp)
            if cat == "Mn":
                mn.append(cp)
        self.drop = _ranges(drop)
        # " " itself is not rewritten: replacing it by itself costs a third of the throughput.
        self.to_space = _ranges(cp for cp in space if cp != 0x20)
        self.punct = _ranges(punct)
        self.mn = _ranges(mn)
        self.cjk = list(CJK_RANGES)
        # Characters Python's str.split() splits on (only these survive cleaning as separators).
        self.split_space = _ranges(cp for cp in range(sys.maxunicode + 1) if chr(cp).isspace())
        # Final_Sigma context, probed through str.lower() itself: "ignorable" characters are
        # skipped when looking for the neighbouring cased letter; "cased" ones end the search.
        cased, ignorable = [], []
        for ch in kept:
            if (ch + _SIGMA).lower().endswith(_FINAL_SIGMA):
                cased.append(ord(ch))
            elif ("A" + ch + _SIGMA).lower().endswith(_FINAL_SIGMA):
                ignorable.append(ord(ch))
        self.cased = _ranges(cased)
        self.ignorable = _ranges(ignorable)
        # Where Rust's Unicode tables disagree with this Python's, per character: replaced
        # explicitly before the Rust step. ("\n" separates characters without interacting.)
        sep = "\n"
        rust_lower = normalizers.Lowercase().normalize_str(sep.join(kept)).split(sep)
        self.lower_fixups = [
            (ch, ch.lower()) for ch, r in zip(kept, rust_lower, strict=True) if r != ch.lower()
        ]
        rust_nfd = normalizers.NFD().normalize_str(sep.join(kept)).split(sep)
        self.nfd_fixups = [
            (ch, unicodedata.normalize("NFD", ch))
            for ch, r in zip(kept, rust_nfd, strict=True)
            if r != unicodedata.normalize("NFD", ch)
        ]
        decomposed = [unicodedata.normalize("NFD", ch) for ch in kept]
        rust_nfc = normalizers.NFC().normalize_str(sep.join(decomposed)).split(sep)
        self.nfc_fixups = [
            (d, unicodedata.normalize("NFC", d))
            for d, r in zip(decomposed, rust_nfc, strict=True)
            if r != unicodedata.normalize("NFC", d)
        ]


@functools.lru_cache(maxsize=1)
def _shipped_tables() -> dict | None:
    try:
        data = json.loads(UNICODE_TABLES_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if data.get("key") == unicode_tables_key() else None


@functools.lru_cache(maxsize=1)
def _tables() -> _Tables:
    """The shipped tables when they were made for this interpreter and ``tokenizers``, else
    computed here."""
    shipped = _shipped_tables()
    return _Tables.from_dict(shipped["tables"]) if shipped else _Tables()


def computed_unicode_tables() -> dict:
    """What ``UNICODE_TABLES_FILE`` holds, computed from scratch in this process."""
    return {
        "key": unicode_tables_key(),
        "tables": _Tables().to_dict(),
        "composition_seconds": sorted(_computed_composition_seconds()),
    }


def bert_normalizer(do_lower_case: bool) -> normalizers.Normalizer:
    """Steps 1, 3 (NFC) and 4 of the module definition, as one Rust normalizer.

    CJK isolation and whitespace splitting live in ``bert_pre_tokenizer``; the pair is what
    ``build_bert_tokenizer`` and vocabulary training use.
    """
    t = _tables()
    steps: list[normalizers.Normalizer] = [
        normalizers.Replace(Regex(_char_class(t.drop)), ""),
        normalizers.Replace(Regex(_char_class(t.to_space)), " "),
        normalizers.NFC(),
    ]
    steps += [normalizers.Replace(a, b) for a, b in t.nfc_fixups]
    if do_lower_case:
        cased, ignorable = _char_class(t.cased), _char_class(t.ignorable)
        # Bounded look-behind: Oniguruma's unbounded one rescans from the start of the text on
        # every failing match (quadratic on uppercase Greek).
        lookbehind = f"{cased}{ignorable}{{0,{FINAL_SIGMA_LOOKBEHIND}}}"
        final_sigma = f"(?<={lookbehind}){_SIGMA}(?!{ignorable}*{cased})"
        steps.append(normalizers.Replace(Regex(final_sigma), _FINAL_SIGMA))
        steps += [normalizers.Replace(a, b) for a, b in t.lower_fixups]
        steps.append(normalizers.Lowercase())
        steps += [normalizers.Replace(a, b) for a, b in t.nfd_fixups]
        steps += [normalizers.NFD(), normalizers.Replace(Regex(_char_class(t.mn)), "")]
    return normalizers.Sequence(steps)


def bert_pre_tokenizer() -> pre_tokenizers.PreTokenizer:
    """Whitespace split plus isolation of CJK ideographs and punctuation (steps 2, 3 and 5).

    One regex pass: a word is a run of characters that are neither whitespace, CJK nor
    punctuation, or a single CJK/punctuation character. Isolating CJK after NFC/NFD rather than
    before them gives the same words (checked for every code point by the slow tests).
    """
    t = _tables()
    single = _char_class(t.cjk + t.punct)
    other = "[^" + _char_class(t.cjk + t.punct + t.split_space)[1:]
    return pre_tokenizers.Split(Regex(f"{other}+|{single}"), behavior="removed", invert=True)


def build_bert_tokenizer(vocab: Vocab, do_lower_case: bool) -> Tokenizer:
    """A Rust tokenizer giving the reference's WordPiece ids; encode adds no special tokens."""
    model = WordPiece(
        dict(vocab.token_to_id),
        unk_token=UNK_TOKEN,
        max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
        continuing_subword_prefix=CONTINUATION_PREFIX,
    )
    tok = Tokenizer(model)
    tok.normalizer = bert_normalizer(do_lower_case)
    tok.pre_tokenizer = bert_pre_tokenizer()
    tok.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    return tok


@functools.lru_cache(maxsize=1)
def _composition_seconds() -> frozenset[int]:
    """Code points that are the second of a canonical decomposition pair: those that can
    compose with the character before them."""
    shipped = _shipped_tables()
    if shipped:
        return frozenset(shipped["composition_seconds"])
    return _computed_composition_seconds()


def _computed_composition_seconds() -> frozenset[int]:
    seconds = set()
    for cp in range(sys.maxunicode + 1):
        parts = unicodedata.decomposition(chr(cp)).split()
        if len(parts) == 2 and not parts[0].startswith("<"):
            seconds.add(int(parts[1], 16))
    return frozenset(seconds)


@functools.lru_cache(maxsize=2)
def _fast_path_chars(do_lower_case: bool) -> str:
    """The characters of ``FAST_PATH_CANDIDATES`` that normalization leaves alone in any context.

    A character qualifies when, by this Python's Unicode tables, it is neither dropped nor made a
    space, is not a mark (combining class 0, not ``Mn``), has no canonical decomposition, is
    never the second character of one (so it composes with nothing), is its own lowercase, is no
    sigma and appears in no Rust fix-up; and the Rust normalizer leaves it unchanged between
    ASCII letters. Text of ASCII and these characters then normalizes character by character,
    exactly as ``_PrenormalizedPath.prepare`` does.
    """
    t = _tables()
    seconds = _composition_seconds()
    fixed = {c for a, b in t.nfc_fixups + t.nfd_fixups + t.lower_fixups for c in a + b}
    rust = bert_normalizer(do_lower_case)
    chars = []
    for c in dict.fromkeys(FAST_PATH_CANDIDATES):
        cp, decomposition = ord(c), unicodedata.decomposition(c)
        probe = f"Aa{c}Bb{c}{c}"
        if (
            cp > 0x7F
            and not any(lo <= cp <= hi for lo, hi in t.drop + t.to_space + t.mn)
            and unicodedata.combining(c) == 0
            and not (decomposition and not decomposition.startswith("<"))
            and cp not in seconds
            and c not in fixed
            and c not in (_SIGMA, _FINAL_SIGMA)
            and c.lower() == c
            and rust.normalize_str(probe) == (probe.lower() if do_lower_case else probe)
        ):
            chars.append(c)
    return "".join(chars)


@functools.lru_cache(maxsize=2)
def _accent_folds(do_lower_case: bool) -> dict[str, str]:
    """Latin letters with diacritics → the ASCII letters normalization makes of them (uncased
    only: cased BERT keeps accents, so there is nothing to fold).

    A letter of ``FOLD_CANDIDATE_RANGES`` qualifies when, by this Python's Unicode tables, its
    lowercase, decomposed, without ``Mn`` marks (step 4 of the definition) is one or more ASCII
    letters; it is neither dropped, a space nor a mark, is never the second character of a
    canonical decomposition (so it composes with nothing before it), is no sigma and appears in
    no Rust fix-up; and the Rust normalizer gives that same fold between ASCII letters. Text of
    ASCII, ``_fast_path_chars`` and these letters then normalizes character by character: each
    letter is replaced by its fold, the rest as in ``_PrenormalizedPath.prepare``.
    """
    if not do_lower_case:
        return {}
    t = _tables()
    seconds = _composition_seconds()
    fixed = {c for a, b in t.nfc_fixups + t.nfd_fixups + t.lower_fixups for c in a + b}
    rust = bert_normalizer(do_lower_case)
    folds: dict[str, str] = {}
    for lo, hi in FOLD_CANDIDATE_RANGES:
        for cp in range(lo, hi + 1):
            c = chr(cp)
            decomposed = unicodedata.normalize("NFD", c.lower())
            fold = "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn")
            probe = f"Aa{c}Bb{c}{c}"
            if (
                fold.isascii()
                and fold.isalpha()
                and not any(lo2 <= cp <= hi2 for lo2, hi2 in t.drop + t.to_space + t.mn)
                and unicodedata.combining(c) == 0
                and cp not in seconds
                and c not in fixed
                and rust.normalize_str(probe) == f"aa{fold}bb{fold}{fold}"
            ):
                folds[c] = fold
    return folds


def _fast_path_classes(chars: str) -> tuple[list[str], list[str]]:
    """Of printable ASCII and ``chars`` (the fast path's alphabet): the characters that are a
    word of their own (punctuation, CJK) and the spaces; every other character is a word part."""
    t = _tables()
    alphabet = [chr(cp) for cp in range(0x20, 0x7F)] + list(chars)
    single = [c for c in alphabet if any(lo <= ord(c) <= hi for lo, hi in t.cjk + t.punct)]
    spaces = [c for c in alphabet if c.isspace()]
    return single, spaces


def _fast_path_pre_tokenizer(chars: str) -> pre_tokenizers.PreTokenizer:
    """``bert_pre_tokenizer`` for text of printable ASCII and ``chars`` (what the fast path
    gives Rust): the same words, from a regex over the few classes such text can hold."""
    single, spaces = _fast_path_classes(chars)
    single_class = _char_class([(ord(c), ord(c)) for c in single])
    other = "[^" + _char_class([(ord(c), ord(c)) for c in single + spaces])[1:]
    return pre_tokenizers.Split(Regex(f"{other}+|{single_class}"), behavior="removed", invert=True)


def _fast_path_words(chars: str) -> re.Pattern[str]:
    """The words of ``_fast_path_pre_tokenizer`` as a Python regex (``findall`` gives them)."""
    single, spaces = _fast_path_classes(chars)
    single_class = "[" + "".join(re.escape(c) for c in single) + "]"
    other = "[^" + "".join(re.escape(c) for c in single + spaces) + "]"
    return re.compile(f"{other}+|{single_class}")


def _ids(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    out: list[list[int]] = []
    for start in range(0, len(texts), MAX_TEXTS_PER_CALL):
        chunk = texts[start : start + MAX_TEXTS_PER_CALL]
        out += [e.ids for e in tokenizer.encode_batch_fast(chunk, add_special_tokens=False)]
    return out


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _full_ids(tokenizer: Tokenizer, texts: list[str]) -> list[list[int]]:
    """``_ids`` of the full tokenizer; texts with lone surrogates (which Rust refuses as a
    TypeError) are encoded without them, as step 1 of the definition drops them."""
    try:
        return _ids(tokenizer, texts)
    except TypeError:
        if not any(_LONE_SURROGATE.search(t) for t in texts):
            raise
    return _ids(tokenizer, [_LONE_SURROGATE.sub("", t) for t in texts])


MAX_CACHED_WORDS = 1 << 18
"""Words whose ids the fast path keeps, and apart as many space-separated chunks (then each
starts again with a new cache): ~50 MB each per process, plus one batch's distinct words and
chunks. Words and chunks longer than ``MAX_INPUT_CHARS_PER_WORD`` are never kept, so a key is
at most that long."""


class _PrenormalizedPath:
    """Texts of ASCII and ``_fast_path_chars``, normalized in Python for a Rust tokenizer that has
    no normalizer (see the module docstring); ``prepare`` returns None for any other text.

    ``ids`` splits prepared texts into words with a Python regex equal to the Rust pre-tokenizer
    and looks each word's ids up in a cache filled by the Rust tokenizer (a word's ids depend on
    the word alone): the same ids as ``tokenizer``, without a Rust encoding per text.
    """

    def __init__(self, vocab: Vocab, do_lower_case: bool, full: Tokenizer) -> None:
        t = _tables()
        table: dict[int, str | None] = {}
        for lo, hi in t.drop:
            table.update((cp, None) for cp in range(lo, min(hi, 0x7F) + 1))
        for lo, hi in t.to_space:
            table.update((cp, " ") for cp in range(lo, min(hi, 0x7F) + 1))
        self._clean = table
        self._lower = do_lower_case
        chars = _fast_path_chars(do_lower_case)
        folds = _accent_folds(do_lower_case)
        self._fold = {ord(c): fold for c, fold in folds.items()}
        self._foldable = re.compile("[" + re.escape("".join(folds)) + "]") if folds else None
        allowed = chars + "".join(folds)
        self._other = re.compile("[^\\x00-\\x7f" + re.escape(allowed) + "]") if allowed else None
        model = WordPiece(
            dict(vocab.token_to_id),
            unk_token=UNK_TOKEN,
            max_input_chars_per_word=MAX_INPUT_CHARS_PER_WORD,
            continuing_subword_prefix=CONTINUATION_PREFIX,
        )
        self.tokenizer = Tokenizer(model)
        self.tokenizer.pre_tokenizer = _fast_path_pre_tokenizer(chars)
        self._words = _fast_path_words(chars)
        self._word_ids: dict[str, tuple[int, ...]] = {}
        self._chunk_ids: dict[str, tuple[int, ...]] = {}
        if not self._agrees_with(full, chars):
            warnings.warn(
                "BERT tokenizer fast path disabled: it disagrees with the full pipeline on this "
                "Python/tokenizers (every text now takes the full, slower pipeline)",
                RuntimeWarning,
                stacklevel=2,
            )
            self._disabled = True

    _disabled = False

    def prepare(self, text: str) -> str | None:
        """The normalized text for ``tokenizer``, or None when ``text`` needs the full one."""
        if self._disabled:
            return None
        if not text.isascii():
            if self._other is None or self._other.search(text):
                return None
            if self._foldable is not None and self._foldable.search(text):
                text = text.translate(self._fold)
        if not text.isprintable():  # controls (and non-ASCII spaces, which are not here)
            text = text.translate(self._clean)
        return text.lower() if self._lower else text

    def _agrees_with(self, full: Tokenizer, chars: str) -> bool:
        """Whether every character of the fast path, in context, normalizes and pre-tokenizes as
        in the full pipeline (what the construction above relies on)."""
        probe = "".join(f"a{chr(cp)}B{chr(cp)}{chr(cp)} " for cp in range(0x80))
        probe += "".join(f"A{c}b{c}{c} " for c in chars + "".join(map(chr, self._fold)))
        normalized = full.normalizer.normalize_str(probe)  # type: ignore[union-attr]
        prepared = self.prepare(probe)
        if prepared != normalized:
            return False
        words = self.tokenizer.pre_tokenizer.pre_tokenize_str(prepared)  # type: ignore[union-attr]
        if words != full.pre_tokenizer.pre_tokenize_str(normalized):  # type: ignore[union-attr]
            return False
        found = self._words.findall(prepared)
        by_chunk = [w for chunk in prepared.split() for w in self._words.findall(chunk)]
        return found == [w for w, _ in words] == by_chunk

    def ids(self, prepared: list[str]) -> list[list[int]]:
        """Token ids of each text ``prepare`` returned: those of ``tokenizer``."""
        chunks = list(map(str.split, prepared))
        lookup = self._chunk_lookup(chunks)
        chain = itertools.chain.from_iterable
        return [list(chain(map(lookup, one))) for one in chunks]

    def flat_ids(self, prepared: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``ids(prepared)`` as (every text's ids one after the other, int32; ids per text,
        int64), with Python work per distinct chunk only.

        Arrow cuts the texts at spaces and numbers the batch's distinct chunks
        (``dictionary_encode``); each distinct chunk is looked up once (``_chunk_lookup``) and
        the ids of every chunk occurrence are gathered from those by numpy. A batch of natural
        text has ~3-10× fewer distinct chunks than chunks (more in larger batches). Prepared
        text holds no whitespace but spaces (see ``prepare``), so Arrow's cut is ``str.split``'s.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        texts = pc.ascii_split_whitespace(pa.array(prepared, type=pa.large_string()))
        numbered = pc.dictionary_encode(texts.flatten())
        distinct = numbered.dictionary.to_pylist()
        per_distinct = list(map(self._chunk_lookup([distinct]), distinct))
        lengths = np.fromiter(map(len, per_distinct), np.int64, len(per_distinct))
        distinct_ids = np.fromiter(
            itertools.chain.from_iterable(per_distinct), np.int32, int(lengths.sum())
        )
        which = numbered.indices.to_numpy(zero_copy_only=False)
        chunk_lengths = lengths[which]
        chunk_ends = np.zeros(len(which) + 1, dtype=np.int64)
        np.cumsum(chunk_lengths, out=chunk_ends[1:])
        starts = np.cumsum(lengths) - lengths
        shift = np.repeat(starts[which] - chunk_ends[:-1], chunk_lengths)
        ids = distinct_ids[np.arange(int(chunk_ends[-1])) + shift]
        text_ends = chunk_ends[texts.offsets.to_numpy()]
        return ids, np.diff(text_ends)

    def _chunk_lookup(self, chunks: list[list[str]]) -> Callable[[str], tuple[int, ...]]:
        """Space-separated chunk → its ids, for every chunk of ``chunks``.

        Prepared text has no whitespace but spaces, and no word of the pre-tokenizer spans one,
        so ``str.split()`` cuts texts into chunks (``"word,"``, ``"(word)"``) whose words are
        the text's words, in order: a chunk's ids are its words' ids one after the other,
        whatever surrounds it. Chunks are cached like words (``_lookup``); splitting at spaces
        and one lookup per chunk cost half of the regex and one lookup per word."""
        cache, missing = self._cache_and_missing("_chunk_ids", chunks)
        if not missing:
            return cache.__getitem__
        words = list(map(self._words.findall, missing))
        word_ids = self._lookup(words)
        chain = itertools.chain.from_iterable
        found = (tuple(chain(map(word_ids, one))) for one in words)
        return _filled(cache, missing, found)

    def _lookup(self, words: list[list[str]]) -> Callable[[str], tuple[int, ...]]:
        """word → its ids, for every word of ``words``; Rust encodes the ones not yet cached.

        A full cache is replaced by a new one, never cleared in place, so a call running in
        another thread keeps the words it looks up. Ids are tuples: a dict of tuples of ints is
        invisible to the garbage collector, which otherwise rescans it on every collection."""
        cache, missing = self._cache_and_missing("_word_ids", words)
        if not missing:
            return cache.__getitem__
        return _filled(cache, missing, map(tuple, _ids(self.tokenizer, missing)))

    def _cache_and_missing(
        self, name: str, groups: list[list[str]]
    ) -> tuple[dict[str, tuple[int, ...]], list[str]]:
        """The cache in attribute ``name`` and the keys of ``groups`` it lacks, sorted. A cache
        that would outgrow ``MAX_CACHED_WORDS`` is first replaced by an empty one (never cleared
        in place: a call running in another thread keeps the one it holds)."""
        cache = getattr(self, name)
        new = set(itertools.chain.from_iterable(groups)).difference(cache)
        if len(cache) + len(new) > MAX_CACHED_WORDS:
            cache = {}
            setattr(self, name, cache)
            new = set(itertools.chain.from_iterable(groups))
        return cache, sorted(new)


def _filled(
    cache: dict[str, tuple[int, ...]], keys: list[str], ids: Iterable[tuple[int, ...]]
) -> Callable[[str], tuple[int, ...]]:
    """Adds ``keys`` → ``ids`` to ``cache`` and returns the lookup over it. Keys over
    ``MAX_INPUT_CHARS_PER_WORD`` characters (all ``[UNK]``) are never cached: they go to a
    dict of this call only, looked up first."""
    uncached: dict[str, tuple[int, ...]] = {}
    for key, one in zip(keys, ids, strict=True):
        (uncached if len(key) > MAX_INPUT_CHARS_PER_WORD else cache)[key] = one
    if uncached:
        return functools.partial(_either, uncached, cache)
    return cache.__getitem__


def _either(
    first: dict[str, tuple[int, ...]], second: dict[str, tuple[int, ...]], word: str
) -> tuple[int, ...]:
    """``first[word]`` when present, else ``second[word]``."""
    found = first.get(word)
    return second[word] if found is None else found


class BertWordPieceTokenizer:
    """Picklable BERT WordPiece encoder; the Rust tokenizers are built lazily in each process."""

    def __init__(self, vocab: Vocab, do_lower_case: bool) -> None:
        self.vocab = vocab
        self.do_lower_case = bool(do_lower_case)
        self._tokenizer: Tokenizer | None = None
        self._fast: _PrenormalizedPath | None = None

    @property
    def tokenizer(self) -> Tokenizer:
        """The full Rust tokenizer (normalizer included): gives the ids of every text."""
        if self._tokenizer is None:
            self._tokenizer = build_bert_tokenizer(self.vocab, self.do_lower_case)
        return self._tokenizer

    def _fast_path(self) -> _PrenormalizedPath:
        if self._fast is None:
            self._fast = _PrenormalizedPath(self.vocab, self.do_lower_case, self.tokenizer)
        return self._fast

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_tokenizer"] = None
        state["_fast"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._tokenizer = None
        self._fast = None

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text (no [CLS]/[SEP]), the same as ``encode`` of each.

        Texts the fast path takes (ASCII and common typographic characters, see the module
        docstring) are normalized in Python and encoded without the Rust normalizer; the others
        go through the full tokenizer. Rust encodes up to ``MAX_TEXTS_PER_CALL`` texts per call
        (in parallel unless ``TOKENIZERS_PARALLELISM=false``).
        """
        if not texts:
            return []
        fast = self._fast_path()
        prepared = [fast.prepare(text) for text in texts]
        slow = [i for i, p in enumerate(prepared) if p is None]
        if not slow:
            return fast.ids(prepared)  # type: ignore[arg-type]
        out: list[list[int] | None] = [None] * len(texts)
        if len(slow) < len(texts):
            indexes = [i for i, p in enumerate(prepared) if p is not None]
            ids = fast.ids([prepared[i] for i in indexes])  # type: ignore[misc]
            for i, one in zip(indexes, ids, strict=True):
                out[i] = one
        for i, one in zip(slow, _full_ids(self.tokenizer, [texts[i] for i in slow]), strict=True):
            out[i] = one
        return out  # type: ignore[return-value]

    def encode_batch_flat(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``encode_batch(texts)`` as (every text's ids one after the other, int32; ids per text,
        int64): the same ids, without a Python list per text on the fast path."""
        if not texts:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64)
        fast = self._fast_path()
        prepared = [fast.prepare(text) for text in texts]
        slow = [i for i, p in enumerate(prepared) if p is None]
        if not slow:
            return fast.flat_ids(prepared)  # type: ignore[arg-type]
        quick = [i for i, p in enumerate(prepared) if p is not None]
        slow_lists = _full_ids(self.tokenizer, [texts[i] for i in slow])
        slow_ids = np.fromiter(itertools.chain.from_iterable(slow_lists), dtype=np.int32)
        slow_counts = np.fromiter(map(len, slow_lists), np.int64, len(slow_lists))
        quick_ids, quick_counts = fast.flat_ids([prepared[i] for i in quick])  # type: ignore[misc]
        counts = np.zeros(len(texts), dtype=np.int64)
        counts[slow] = slow_counts
        counts[quick] = quick_counts
        starts = np.cumsum(counts) - counts
        ids = np.empty(int(counts.sum()), dtype=np.int32)
        for where, part, part_counts in (
            (slow, slow_ids, slow_counts),
            (quick, quick_ids, quick_counts),
        ):
            part_starts = np.cumsum(part_counts) - part_counts
            shift = np.repeat(starts[where] - part_starts, part_counts)
            ids[np.arange(len(part)) + shift] = part
        return ids, counts

    def encode_documents(self, documents: Sequence[Sequence[str]]) -> list[list[list[int]]]:
        """``[self.encode_batch(d) for d in documents]``, as one batch: the sentences of many
        documents encoded together, then regrouped per document. (A convenience: with
        ``TOKENIZERS_PARALLELISM=false`` it is no faster than one call per document, whose
        per-call cost is negligible.)"""
        flat = [text for document in documents for text in document]
        ids = iter(self.encode_batch(flat))
        return [[next(ids) for _ in range(len(document))] for document in documents]

    def encode(self, text: str) -> list[int]:
        """Token ids of one text (no [CLS]/[SEP])."""
        prepared = self._fast_path().prepare(text)
        if prepared is None:
            return _full_ids(self.tokenizer, [text])[0]
        return self._fast_path().tokenizer.encode(prepared, add_special_tokens=False).ids

    def tokenize(self, text: str) -> list[str]:
        """Token strings of one text, for debugging and tests: the tokens of ``encode(text)``
        (lone surrogates dropped first, as there and in ``encode_batch``)."""
        return self.tokenizer.encode(_LONE_SURROGATE.sub("", text), add_special_tokens=False).tokens

    def settings(self) -> dict[str, Any]:
        """What a manifest needs to pin this tokenization."""
        return {
            "do_lower_case": self.do_lower_case,
            "normalization_version": BERT_NORMALIZATION_VERSION,
            "vocab_sha256": self.vocab.sha256,
            "vocab_size": len(self.vocab),
            "max_input_chars_per_word": MAX_INPUT_CHARS_PER_WORD,
        }


if __name__ == "__main__":
    UNICODE_TABLES_FILE.write_text(
        json.dumps(computed_unicode_tables(), ensure_ascii=True, separators=(",", ":")) + "\n",
        encoding="utf-8",
    )
    print(f"wrote {UNICODE_TABLES_FILE}")
