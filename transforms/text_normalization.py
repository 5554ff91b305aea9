"""Text normalization for cleaned prose, and a content hash for exact deduplication.

``normalize_text`` is idempotent (``normalize_text(normalize_text(t)) == normalize_text(t)``) and
applies, in order:

1. line endings: ``\\r\\n``, ``\\r`` and the other Unicode line breaks (``\\v``, ``\\f``, NEL
   U+0085, LINE/PARAGRAPH SEPARATOR U+2028/U+2029) become ``\\n``;
2. a tab becomes a space; every other control character (category Cc: U+0000-U+001F and
   U+007F-U+009F, e.g. NUL, ESC, the C1 range) and the invisible format characters BOM U+FEFF,
   soft hyphen U+00AD, zero-width space U+200B and word joiner U+2060 are removed, as are lone
   surrogates (U+D800-U+DFFF, category Cs: what a JSON ``\\ud800`` escape decodes to; no UTF-8
   can hold one) — zero-width (non-)joiners are kept, some scripts need them;
3. Unicode NFC (composed form: ``e`` + combining acute becomes ``é``);
4. within a line, every whitespace run (including no-break and other Unicode spaces) becomes one
   space, and each line is stripped at both ends;
5. runs of blank lines become a single blank line (a paragraph break), and blank lines at the
   start and end are removed.

The result never contains ``\\r``, ``\\t``, control characters other than ``\\n``, lone
surrogates, two consecutive spaces, or three consecutive newlines: it always encodes to UTF-8.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

_LINE_BREAKS = re.compile(r"\r\n|[\r\v\f\x85\u2028\u2029]")
_LINE_BREAK_CHARS = ("\r", "\v", "\f", "\x85", "\u2028", "\u2029")
_REMOVED = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\ufeff\u00ad\u200b\u2060\ud800-\udfff]")
_BLANK_LINE_RUNS = re.compile(r"\n{3,}")
_LONE_SURROGATES = re.compile("[\ud800-\udfff]")


def collapse_whitespace(text: str) -> str:
    """``" ".join(text.split())``: every whitespace run one space, both ends stripped.

    Already-collapsed text (most normalized text) is returned as it is, found without splitting:
    a printable string holds no whitespace but the ASCII space (every other character that
    ``str.isspace`` admits is category Cc, Zs, Zl or Zp, which ``str.isprintable`` rejects), so
    with no double space and none at either end there is nothing to collapse."""
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def without_lone_surrogates(text: str) -> str:
    """``text`` without lone surrogates (U+D800-U+DFFF, what a JSON ``\\ud800`` escape gives):
    a string that encodes to UTF-8. For short fields (titles) that ``normalize_text`` skips."""
    return text if text.isprintable() else _LONE_SURROGATES.sub("", text)


def _clean_characters(text: str) -> str:
    """Steps 1-3: line breaks as ``\\n``, a tab as a space, removed characters gone, NFC.

    Each step is skipped when it has nothing to do, found by C-speed string tests: the line
    break characters by ``in``; removed characters cannot occur in a printable string (every
    one of them is category Cc, Cf or Cs, which ``str.isprintable`` rejects); ASCII is NFC.
    """
    for char in _LINE_BREAK_CHARS:
        if char in text:
            text = _LINE_BREAKS.sub("\n", text)
            break
    if "\t" in text:
        text = text.replace("\t", " ")
    if not text.isprintable():
        text = _REMOVED.sub("", text)
    if not text.isascii():
        text = unicodedata.normalize("NFC", text)
    return text


def normalize_text(text: str) -> str:
    """The normalized form of ``text`` (see the module docstring for the rules)."""
    text = _clean_characters(text)
    # str.split() splits on exactly the characters ``\s`` matches (str.isspace), so
    # " ".join(line.split()) is the line with whitespace runs collapsed, stripped at both ends.
    if "\n" not in text:
        return collapse_whitespace(text)
    text = "\n".join([collapse_whitespace(line) for line in text.split("\n")])
    if "\n\n\n" in text:
        text = _BLANK_LINE_RUNS.sub("\n\n", text)
    return text.strip("\n")


def content_hash(text: str) -> str:
    """sha256 (hex) of ``text`` normalized, casefolded, with all whitespace (line breaks too)
    collapsed to single spaces: texts that differ only in case, spacing, wrapping, line endings
    or Unicode composition hash the same."""
    # Steps 4-5 of normalize_text only change whitespace, which is collapsed here anyway, and
    # casefolding maps each character on its own: skipping them gives the same words.
    return content_hash_of_normalized(_clean_characters(text))


def content_hash_of_normalized(text: str) -> str:
    """``content_hash(text)`` for text that ``normalize_text`` already gave (or such paragraphs
    joined by blank lines), without repeating its character steps: steps 1-3 leave their own
    output unchanged, so only casefolding and whitespace remain. Line breaks become spaces
    first: when that leaves the text collapsed, it is ``" ".join(folded.split())`` already."""
    folded = collapse_whitespace(text.casefold().replace("\n\n", " ").replace("\n", " "))
    return hashlib.sha256(folded.encode("utf-8")).hexdigest()
