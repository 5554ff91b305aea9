"""The reference's reading rules: line breaks, ``\\r``, stripping, blank lines, documents that run
across files, lines without tokens; and its vocab reading."""

from __future__ import annotations

import io

import numpy as np
import pytest

from tests.reference_script import compat_documents, compat_rows, reference_rows, vocab_path
from transforms.reference_text import (
    ReferenceInputError,
    reference_line_blocks,
    reference_vocab_word_ids,
)

TRAPS_1 = (
    "\n\n  First doc line one.\r\nline\rtwo joined.\n\x0c\nSecond doc.\n\u200b\u200b\n   \t\n"
    "Third\u2028 doc, a line separator inside.\nno trailing blank line"
)
TRAPS_2 = "continues the doc across files.\n\nFourth doc.\n\u3000\nFifth doc line.\nAnother one.\n"


@pytest.fixture
def trap_files(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(TRAPS_1.encode("utf-8"))
    b.write_bytes(TRAPS_2.encode("utf-8"))
    return [a, b]


def test_documents_follow_the_references_reading(trap_files):
    """``\\r`` dropped inside lines too (TensorFlow's reader never returns one), a form feed or
    an ideographic space alone is a blank line, a line of zero-width spaces has no tokens but
    breaks nothing, and the last document of a file runs on into the next file."""
    _, docs = compat_documents(trap_files)
    sentences = [
        int(docs.sentence_starts[d + 1] - docs.sentence_starts[d]) for d in range(docs.documents)
    ]
    assert sentences == [2, 1, 3, 1, 2]


def test_trap_files_give_the_references_records(trap_files):
    expected, _ = reference_rows(trap_files, max_seq_length=32, dupe_factor=3)
    rows, _ = compat_rows(trap_files, max_seq_length=32, dupe_factor=3)
    assert rows == expected


@pytest.mark.parametrize("block_bytes", [1, 7, 64, 1 << 20])
def test_blocks_cut_at_line_ends_whatever_their_size(block_bytes):
    data = (TRAPS_1 + "\n" + TRAPS_2 + "é\n\n" * 5).encode("utf-8")
    lines = [
        line
        for block in reference_line_blocks(io.BytesIO(data), "x", block_bytes)
        for line in block
    ]
    expected = [line.strip() for line in data.decode().replace("\r", "").split("\n")][:-1]
    assert lines == expected


def test_invalid_utf8_names_file_and_line():
    data = b"fine\nalso fine\nbad \xff here\n"
    with pytest.raises(ReferenceInputError, match=r"in\.txt: line 3: invalid UTF-8"):
        list(reference_line_blocks(io.BytesIO(data), "in.txt", 8))


def test_vocab_word_ids_are_every_line_and_refuse_repeats():
    from tokenizer.vocab import Vocab

    data = vocab_path().read_bytes()
    vocab = Vocab.from_bytes(data)
    assert reference_vocab_word_ids(data, vocab.tokens).tolist() == list(range(len(vocab)))
    crlf = data.replace(b"\n", b"\r\n") + b"\r\n"  # a trailing blank line is an entry there
    assert len(reference_vocab_word_ids(crlf, vocab.tokens)) == len(vocab) + 1
    repeated = data + b"the\n"
    with pytest.raises(ReferenceInputError, match="'the' is on lines"):
        reference_vocab_word_ids(repeated, Vocab.from_bytes(repeated).tokens)


def test_unterminated_last_lines_and_a_lone_carriage_return_at_the_end(tmp_path):
    """The last line of a file without a final newline loses its ``\\r`` bytes too, and a lone
    ``\\r`` after the last newline is the end of the file, not a blank line (so the document
    runs on into the next file)."""
    files = [tmp_path / n for n in ("c.txt", "d.txt", "e.txt")]
    files[0].write_bytes(b"Doc one line.\nab\rcd unterminated")
    files[1].write_bytes(b"continues here.\n\r")
    files[2].write_bytes(b"continues too.\n\nA new doc.\n")
    _, docs = compat_documents(files)
    assert np.diff(docs.sentence_starts).tolist() == [4, 1]
    expected, _ = reference_rows(files, max_seq_length=16, dupe_factor=4)
    rows, _ = compat_rows(files, max_seq_length=16, dupe_factor=4)
    assert rows == expected


def test_a_file_truncated_inside_a_character_names_its_last_line():
    """A file cut in the middle of a UTF-8 sequence (a truncated copy or download)."""
    data = "fine line.\nthe last is cut: é".encode()[:-1]
    with pytest.raises(ReferenceInputError, match=r"cut\.txt: line 2: invalid UTF-8"):
        list(reference_line_blocks(io.BytesIO(data), "cut.txt", 4))
