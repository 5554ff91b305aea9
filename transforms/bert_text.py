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

import itertools
import operator
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
    chunks: Iterable[bytes],
    source: str,
    stats: Counter[str],
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
    max_document_sentences: int = DEFAULT_MAX_DOCUMENT_SENTENCES,
) -> Iterator[TextDocument | Reject]:
    """Yields the documents of one file (and a Reject for every skipped or altered line).

    ``chunks`` are raw bytes of whole lines: each ends at a line end, its last line with or
    without its ``\\n`` (one line per chunk, or a file read in blocks cut after a ``\\n``).
    ``stats`` gains ``lines``, ``sentences``, ``documents`` and one count per reason.

    A chunk that is valid UTF-8 and holds no overlong line is parsed by whole-list operations
    (strip every line, cut at the blank ones); any other goes line by line. Both give the same.
    """
    ordinal = 0
    sentences: list[str] = []
    seen = 0  # lines before the current chunk

    def flush() -> Iterator[TextDocument]:
        nonlocal ordinal, sentences
        if sentences:
            stats["documents"] += 1
            yield TextDocument(f"{source}:{ordinal}", sentences)
            ordinal += 1
            sentences = []

    def add(piece: str, number: int) -> Iterator[TextDocument | Reject]:
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

    def extend(run: list[str], first: int) -> Iterator[TextDocument | Reject]:
        """Adds ``run`` (non-blank stripped lines, the first numbered ``first``)."""
        if len(sentences) + len(run) <= max_document_sentences:
            sentences.extend(run)
            stats["sentences"] += len(run)
            return
        for i, piece in enumerate(run):
            yield from add(piece, first + i)

    for chunk in chunks:
        lines, valid = _decoded_lines(chunk)
        first = seen + 1
        seen += len(lines)
        stats["lines"] += len(lines)
        if first == 1 and lines and isinstance(lines[0], str) and lines[0].startswith(_BOM):
            lines[0] = lines[0][1:]
        if valid:
            stripped = list(map(str.strip, lines))
            if max(map(len, stripped), default=0) <= max_sentence_chars:
                start = 0
                for blank in itertools.compress(range(len(stripped)), map(operator.not_, stripped)):
                    yield from extend(stripped[start:blank], first + start)
                    yield from flush()
                    start = blank + 1
                yield from extend(stripped[start:], first + start)
                continue
        for number, line in enumerate(lines, start=first):
            if isinstance(line, _InvalidLine):
                stats["skipped_invalid_utf8_line"] += 1
                yield Reject.of(
                    "skipped_invalid_utf8_line",
                    f"{source}:line {number}: {line.reason}",
                    bytes(line),
                )
                continue
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
                yield from add(piece, number)
    yield from flush()


class _InvalidLine(bytes):
    """A raw line that is not UTF-8 (with its ``\\n``, if it had one), and why."""

    reason: str


def _decoded_lines(chunk: bytes) -> tuple[list[str | _InvalidLine], bool]:
    """The lines of ``chunk`` (see ``parse_bert_text``) without their ``\\n``, and whether all
    are UTF-8; a line that is not stays raw, as an ``_InvalidLine``. ``\\n`` is never inside
    a multi-byte character, so a chunk that decodes as a whole splits into the same lines."""
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        return lines, True
    raws = chunk.split(b"\n")
    ends = [True] * (len(raws) - 1) + [False]
    if chunk.endswith(b"\n"):
        raws.pop()
        ends.pop()
    out: list[str | _InvalidLine] = []
    for raw, ended in zip(raws, ends, strict=True):
        try:
            out.append(raw.decode("utf-8"))
        except UnicodeDecodeError as e:
            invalid = _InvalidLine(raw + b"\n" if ended else raw)
            invalid.reason = e.reason
            out.append(invalid)
    return out, False
