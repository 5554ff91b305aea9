"""google-research/bert's reading of its input files and vocab, rule for rule.

``create_pretraining_data.py`` reads each input file with ``tf.gfile.GFile(path, "r")``:
``readline`` splits at ``\\n`` only and drops every ``\\r`` byte (TensorFlow's buffered reader
never returns one, even inside a line), the text is UTF-8 (invalid bytes stop the script), and
each line is ``str.strip()``-ed. A line empty after stripping starts a new document; every other
line is tokenized and, if it gives any tokens, appended to the current document. Documents run on
across files (only a blank line ends one), and empty documents are dropped at the end.

Its vocab is read the same way: one entry per ``\\n`` line, ``\\r`` dropped, stripped, blank lines
included; a repeated entry keeps its first id and every later entry is numbered one lower than
its line (so such a vocab is refused here).
``ReferenceDocumentBuilder`` applies the reading rules to blocks of lines with any batch encoder
that gives the reference's ids (``tokenizer.wordpiece.BertWordPieceTokenizer.encode_batch_flat``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

import numpy as np

from transforms.errors import UserError
from transforms.reference_layout import ReferenceDocuments

BLOCK_BYTES = 256 << 10
"""Bytes of input read per block (cut at a line end): what the reader holds besides the ids (the
tokenizer's per-text objects for a block cost ~20× its bytes; no faster with larger blocks)."""

Encoder = Callable[[Sequence[str]], tuple[np.ndarray, np.ndarray]]
"""texts → (all their ids one after the other, int32; ids per text)."""


class ReferenceInputError(UserError, ValueError):
    """Input the reference cannot read (it would stop with a traceback); the message says where."""


def reference_line_blocks(
    stream: BinaryIO, source: str, block_bytes: int | None = None
) -> Iterator[list[str]]:
    """The stripped lines of a file as the reference reads them, in blocks of whole lines (a
    line longer than a block is gathered in pieces, joined once)."""
    block_bytes = block_bytes or BLOCK_BYTES
    pieces: list[bytes] = []
    line_number = 1
    while True:
        block = stream.read(block_bytes)
        if not block:
            last = b"".join(pieces).replace(b"\r", b"")
            if last:  # an unterminated last line; a lone \r there is the end of the file
                yield [_decode(last, source, line_number).strip()]
            return
        cut = block.rfind(b"\n")
        if cut < 0:
            pieces.append(block)
            continue
        data = b"".join([*pieces, block[:cut]])
        pieces = [block[cut + 1 :]]
        text = _decode(data, source, line_number)
        lines = text.replace("\r", "").split("\n")
        line_number += len(lines)
        yield [line.strip() for line in lines]


def _decode(data: bytes, source: str, first_line: int) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = first_line + data.count(b"\n", 0, e.start)
        raise ReferenceInputError(
            f"{source}: line {line}: invalid UTF-8 ({e.reason}); google-research/bert's script "
            "stops on it, so --compat reference cannot say what it would write: fix or drop "
            "the file (bertprep clean repairs encodings)"
        ) from e


class ReferenceDocumentBuilder:
    """Documents from blocks of stripped lines, in the reference's reading order."""

    def __init__(self, encode: Encoder) -> None:
        self._encode = encode
        self._ids: list[np.ndarray] = []
        self._counts: list[np.ndarray] = []
        self._documents: list[np.ndarray] = []
        self._document = 0
        self.lines = 0

    def add_lines(self, lines: Sequence[str]) -> None:
        """Appends one block of stripped lines (blank: a document break)."""
        self.lines += len(lines)
        blank = np.fromiter((not line for line in lines), dtype=bool, count=len(lines))
        document = self._document + np.cumsum(blank)
        self._document = int(document[-1]) if len(lines) else self._document
        texts = [line for line in lines if line]
        if not texts:
            return
        ids, counts = self._encode(texts)
        self._ids.append(np.asarray(ids, dtype=np.int32))
        self._counts.append(np.asarray(counts, dtype=np.int64))
        self._documents.append(document[~blank])

    def add_document(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        """Appends one already tokenized document (sentence ``i``: ``ids[offsets[i]:offsets[i +
        1]]``), as if its sentences were lines between two blank lines."""
        self._document += 1
        counts = np.diff(np.asarray(offsets, dtype=np.int64))
        self.lines += len(counts)
        self._ids.append(np.asarray(ids, dtype=np.int32))
        self._counts.append(counts)
        self._documents.append(np.full(len(counts), self._document, dtype=np.int64))
        self._document += 1

    def add_stream(self, stream: BinaryIO, source: str) -> None:
        for block in reference_line_blocks(stream, source):
            self.add_lines(block)

    def finish(self) -> ReferenceDocuments:
        """The documents read so far (sentences without tokens and empty documents dropped)."""
        ids = np.concatenate(self._ids) if self._ids else np.zeros(0, np.int32)
        counts = np.concatenate(self._counts) if self._counts else np.zeros(0, np.int64)
        documents = np.concatenate(self._documents) if self._documents else np.zeros(0, np.int64)
        kept = counts > 0
        counts, documents = counts[kept], documents[kept]
        token_starts = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        new_document = np.ones(len(documents), dtype=bool)
        new_document[1:] = documents[1:] != documents[:-1]
        sentence_starts = np.concatenate((np.flatnonzero(new_document), [len(documents)])).astype(
            np.int64
        )
        return ReferenceDocuments(ids, token_starts, sentence_starts)


def reference_vocab_entries(data: bytes) -> list[str]:
    """The vocab file's entries as the reference's ``load_vocab`` reads them, line by line."""
    text = data.decode("utf-8").replace("\r", "")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.strip() for line in lines]


def reference_vocab_word_ids(data: bytes, tokens: Iterable[str]) -> np.ndarray:
    """int64 ids of the reference's ``list(tokenizer.vocab.keys())`` (its random replacements),
    checked against the ids ``tokens`` (the project's vocab, in id order) gives; raises
    ReferenceInputError when the two disagree (a repeated entry shifts the reference's ids)."""
    entries = reference_vocab_entries(data)
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry in seen:
            raise ReferenceInputError(
                f"vocab: entry {entry!r} is on lines {seen[entry] + 1} and {i + 1}; the "
                "reference keeps its first id and numbers every later entry one lower than its "
                "line, so its ids cannot be reproduced exactly: remove the repeat"
            )
        seen[entry] = i
    ours = list(tokens)
    if entries[: len(ours)] != ours:
        raise ReferenceInputError(
            "vocab: the reference reads other entries from this file than bertprep does (line "
            "breaks other than \\n?); --compat reference needs one entry per \\n-terminated line"
        )
    return np.arange(len(entries), dtype=np.int64)
