"""google-research/bert's text format: one sentence per line, a blank line between documents.

Parsing streams (constant memory per document) and never loses text silently:

- a line that is not valid UTF-8 is skipped and reported (``skipped_invalid_utf8_line``);
- a line longer than ``max_sentence_chars`` is split at whitespace into pieces of at most that
  many characters and reported (``split_overlong_sentence``) — it is usually a paragraph or a
  whole file that lost its line breaks;
- a document longer than ``max_document_sentences`` is cut into consecutive documents of that many
  sentences and reported (``split_overlong_document``), so one file with no blank lines cannot
  exhaust a worker;
- a file boundary always ends a document (the reference script runs the last document of one file
  into the first of the next).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from transforms.overlong_text import cut_overlong
from transforms.rejects import Reject

DEFAULT_MAX_SENTENCE_CHARS = 10_000
DEFAULT_MAX_DOCUMENT_SENTENCES = 100_000
_BOM = "\ufeff"


@dataclass(frozen=True)
class TextDocument:
    """A document of sentences. ``key`` is stable across runs: ``<source>:<ordinal>``."""

    key: str
    sentences: list[str]


def split_long_sentence(line: str, max_chars: int) -> list[str]:
    """Splits ``line`` at whitespace into pieces of at most ``max_chars`` characters.

    A run of ``max_chars`` characters without whitespace is cut hard (``cut_overlong``).
    """
    return cut_overlong(line, max_chars)


def parse_bert_text(
    lines: Iterable[bytes],
    source: str,
    stats: Counter[str],
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
    max_document_sentences: int = DEFAULT_MAX_DOCUMENT_SENTENCES,
) -> Iterator[TextDocument | Reject]:
    """Yields the documents of one file (and a Reject for every skipped or altered line).

    ``lines`` are raw lines (bytes, with or without line endings). ``stats`` gains ``lines``,
    ``sentences``, ``documents`` and one count per reason.
    """
    ordinal = 0
    sentences: list[str] = []

    def flush() -> Iterator[TextDocument]:
        nonlocal ordinal, sentences
        if sentences:
            stats["documents"] += 1
            yield TextDocument(f"{source}:{ordinal}", sentences)
            ordinal += 1
            sentences = []

    for number, raw in enumerate(lines, start=1):
        stats["lines"] += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            stats["skipped_invalid_utf8_line"] += 1
            yield Reject.of("skipped_invalid_utf8_line", f"{source}:line {number}: {e.reason}", raw)
            continue
        if number == 1 and line.startswith(_BOM):
            line = line[1:]
        line = line.strip()
        if not line:
            yield from flush()
            continue
        if len(line) > max_sentence_chars:
            stats["split_overlong_sentence"] += 1
            yield Reject.of(
                "split_overlong_sentence",
                f"{source}:line {number}: {len(line)} characters",
                line,
            )
            pieces = split_long_sentence(line, max_sentence_chars)
        else:
            pieces = [line]
        for piece in pieces:
            if len(sentences) >= max_document_sentences:
                stats["split_overlong_document"] += 1
                yield Reject.of(
                    "split_overlong_document",
                    f"{source}:line {number}: document cut before this line, at {max_document_sentences} sentences",
                    piece,
                )
                yield from flush()
            sentences.append(piece)
            stats["sentences"] += 1
    yield from flush()
