"""google-research/bert text format parsing (transforms.bert_text)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from transforms.bert_text import (
    DEFAULT_MAX_DOCUMENT_SENTENCES,
    DEFAULT_MAX_SENTENCE_CHARS,
    TextDocument,
    parse_bert_text,
    split_long_sentence,
)
from transforms.rejects import EXCERPT_CHARS, Reject


def parse(text: bytes | list[bytes], source: str = "src", **kwargs):
    lines = text.splitlines(keepends=True) if isinstance(text, bytes) else text
    stats: Counter[str] = Counter()
    out = list(parse_bert_text(lines, source, stats, **kwargs))
    docs = [o for o in out if isinstance(o, TextDocument)]
    rejects = [o for o in out if isinstance(o, Reject)]
    assert len(docs) + len(rejects) == len(out)
    return docs, rejects, stats


def sentences_of(docs):
    return [d.sentences for d in docs]


def test_defaults():
    assert DEFAULT_MAX_SENTENCE_CHARS == 10_000
    assert DEFAULT_MAX_DOCUMENT_SENTENCES == 100_000


def test_blank_lines_separate_documents():
    docs, rejects, stats = parse(b"a b.\nc d.\n\ne f.\n\ng.\nh.\ni.\n")
    assert sentences_of(docs) == [["a b.", "c d."], ["e f."], ["g.", "h.", "i."]]
    assert [d.key for d in docs] == ["src:0", "src:1", "src:2"]
    assert rejects == []
    assert stats == Counter(lines=8, sentences=6, documents=3)


def test_multiple_blank_and_whitespace_only_lines():
    docs, _, stats = parse(b"a\n\n\n\nb\n \t \n\n\nc\n")
    assert sentences_of(docs) == [["a"], ["b"], ["c"]]
    assert stats["documents"] == 3


def test_leading_and_trailing_blank_lines_and_missing_final_newline():
    docs, _, _ = parse(b"\n\n  \nfirst\nsecond\n\n\n")
    assert sentences_of(docs) == [["first", "second"]]
    assert [d.key for d in docs] == ["src:0"]
    docs, _, _ = parse(b"x\ny")  # no trailing newline
    assert sentences_of(docs) == [["x", "y"]]


def test_lines_are_stripped():
    docs, _, _ = parse(b"  padded line \t\nnext\n")
    assert sentences_of(docs) == [["padded line", "next"]]


def test_crlf_line_endings():
    docs, _, stats = parse(b"one.\r\ntwo.\r\n\r\nthree.\r\n")
    assert sentences_of(docs) == [["one.", "two."], ["three."]]
    assert stats["lines"] == 4


def test_bom_at_file_start_is_removed_only_there():
    docs, _, _ = parse("\ufefffirst\nsecond\n".encode())
    assert sentences_of(docs) == [["first", "second"]]
    docs, _, _ = parse("\ufeff\nfirst\n".encode())  # BOM alone on the first line: blank
    assert sentences_of(docs) == [["first"]]
    docs, _, _ = parse("a\n\ufeffb\n".encode())  # not at the start: kept as text
    assert sentences_of(docs) == [["a", "\ufeffb"]]


def test_unicode_text_is_kept():
    text = "Grüße, 世界! ÿ\n😀 ok\n"
    docs, _, _ = parse(text.encode())
    assert sentences_of(docs) == [["Grüße, 世界! ÿ", "😀 ok"]]


def test_invalid_utf8_line_is_skipped_reported_and_counted():
    lines = [b"good one\n", b"bad \xff\xfe line\n", b"good two\n", b"\n", b"\xc3\n", b"x\n"]
    docs, rejects, stats = parse(lines, source="f.txt")
    # the bad line neither ends the document nor appears in it
    assert sentences_of(docs) == [["good one", "good two"], ["x"]]
    assert [r.reason for r in rejects] == ["skipped_invalid_utf8_line"] * 2
    assert rejects[0].location.startswith("f.txt:line 2")
    assert rejects[1].location.startswith("f.txt:line 5")
    assert "bad" in rejects[0].excerpt
    assert stats["skipped_invalid_utf8_line"] == 2
    assert stats["lines"] == 6
    assert stats["sentences"] == 3


def test_empty_input():
    for lines in ([], [b""], [b"\n"], [b"\n", b"  \n", b"\r\n"]):
        docs, rejects, stats = parse(lines)
        assert docs == [] and rejects == []
        assert stats["documents"] == 0 and stats["sentences"] == 0


def test_keys_are_stable_and_ordinal():
    text = b"a\n\nb\n\n\nc\nd\n\ne\n"
    first, _, _ = parse(text, source="gs://bucket/shard-3.txt")
    second, _, _ = parse(text, source="gs://bucket/shard-3.txt")
    assert first == second
    assert [d.key for d in first] == [f"gs://bucket/shard-3.txt:{i}" for i in range(4)]
    other, _, _ = parse(text, source="other")
    assert [d.key for d in other] == ["other:0", "other:1", "other:2", "other:3"]


def test_overlong_line_is_split_without_losing_text():
    rng = random.Random(0)
    words = []
    length = 0
    while length < 100_000:
        w = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 12)))
        words.append(w)
        length += len(w) + 1
    line = " ".join(words)
    assert len(line) >= 100_000
    docs, rejects, stats = parse([b"before\n", line.encode() + b"\n", b"after\n"], source="s")
    assert len(docs) == 1
    sentences = docs[0].sentences
    pieces = sentences[1:-1]
    assert sentences[0] == "before" and sentences[-1] == "after"
    assert all(0 < len(p) <= DEFAULT_MAX_SENTENCE_CHARS for p in pieces)
    assert len(pieces) >= 10
    assert " ".join(pieces) == " ".join(line.split())
    assert all(p.split() == p.split(" ") for p in pieces)  # cut at spaces: whole words only
    assert [r.reason for r in rejects] == ["split_overlong_sentence"]
    assert rejects[0].location == f"s:line 2: {len(line)} characters"
    assert len(rejects[0].excerpt) == EXCERPT_CHARS
    assert stats["split_overlong_sentence"] == 1
    assert stats["sentences"] == len(sentences)


def test_overlong_line_with_irregular_spacing_keeps_all_words():
    line = "   ".join(["word"] * 50) + "  " + "x" * 30 + " end"
    docs, _, _ = parse([line.encode()], max_sentence_chars=25)
    pieces = docs[0].sentences
    assert all(len(p) <= 25 for p in pieces)
    assert "".join("".join(pieces).split()) == "".join(line.split())
    words = " ".join(pieces).split()
    assert words[:50] == ["word"] * 50 and words[-1] == "end"  # words cut only in the long run
    assert "x" * 25 in pieces and "x" * 5 in " ".join(pieces)  # the 30-char run is cut hard


def test_line_of_exactly_max_chars_is_not_split():
    docs, rejects, _ = parse([b"a" * 20, b"b" * 21], max_sentence_chars=20)
    assert docs[0].sentences == ["a" * 20, "b" * 20, "b"]
    assert [r.reason for r in rejects] == ["split_overlong_sentence"]


@pytest.mark.parametrize("max_chars", [1, 2, 3, 7, 10, 50])
def test_split_long_sentence_properties(max_chars):
    rng = random.Random(max_chars)
    for _ in range(200):
        words = [
            "".join(rng.choice("xyz") for _ in range(rng.randint(1, 15)))
            for _ in range(rng.randint(1, 30))
        ]
        line = " ".join(words)
        pieces = split_long_sentence(line, max_chars)
        assert all(0 < len(p) <= max_chars for p in pieces)
        assert all(p == p.strip() for p in pieces)
        assert "".join(pieces).replace(" ", "") == line.replace(" ", "")
        if len(line) <= max_chars:
            assert pieces == [line]
        # a word no longer than max_chars is never cut
        for w in words:
            if len(w) <= max_chars:
                assert any(w in p.split(" ") for p in pieces)


def test_split_long_sentence_examples():
    assert split_long_sentence("aaa bbb ccc", 7) == ["aaa bbb", "ccc"]
    assert split_long_sentence("aaa bbb ccc", 3) == ["aaa", "bbb", "ccc"]
    assert split_long_sentence("abcdefgh", 3) == ["abc", "def", "gh"]
    assert split_long_sentence("short", 10) == ["short"]
    assert split_long_sentence("", 10) == []


def test_split_long_sentence_splits_at_tabs_too():
    line = "\t".join(["abcde"] * 10)
    pieces = split_long_sentence(line, 21)
    assert all(len(p) <= 21 for p in pieces)
    assert [w for p in pieces for w in p.split()] == ["abcde"] * 10


def test_document_without_blank_lines_is_split_at_max_sentences():
    lines = [f"s{i}\n".encode() for i in range(23)]
    docs, rejects, stats = parse(lines, source="f", max_document_sentences=5)
    assert sentences_of(docs) == [
        [f"s{i}" for i in range(k, min(k + 5, 23))] for k in (0, 5, 10, 15, 20)
    ]
    assert [d.key for d in docs] == [f"f:{i}" for i in range(5)]
    assert [r.reason for r in rejects] == ["split_overlong_document"] * 4
    assert rejects[0].location == "f:line 6: document cut before this line, at 5 sentences"
    assert stats["split_overlong_document"] == 4
    assert stats["documents"] == 5
    assert stats["sentences"] == 23


def test_document_split_continues_numbering_after_blank_line():
    lines = [b"a\n", b"b\n", b"c\n", b"\n", b"d\n"]
    docs, _, _ = parse(lines, max_document_sentences=2)
    assert sentences_of(docs) == [["a", "b"], ["c"], ["d"]]
    assert [d.key for d in docs] == ["src:0", "src:1", "src:2"]


def test_overlong_sentence_pieces_count_towards_document_limit():
    docs, rejects, _ = parse([b"aa bb cc dd ee"], max_sentence_chars=2, max_document_sentences=2)
    assert sentences_of(docs) == [["aa", "bb"], ["cc", "dd"], ["ee"]]
    assert [r.reason for r in rejects] == ["split_overlong_sentence"] + [
        "split_overlong_document"
    ] * 2


def test_document_of_exactly_max_sentences_is_not_reported():
    docs, rejects, stats = parse([b"a\n", b"b\n", b"\n", b"c\n"], max_document_sentences=2)
    assert sentences_of(docs) == [["a", "b"], ["c"]]
    assert rejects == []
    assert stats["split_overlong_document"] == 0


def test_reject_excerpt_of_invalid_bytes_is_escaped():
    _, rejects, _ = parse([b"\xff" * 1000])
    assert rejects[0].excerpt.startswith("\\xff")
    assert len(rejects[0].excerpt) == EXCERPT_CHARS
    assert rejects[0].to_json()["reason"] == "skipped_invalid_utf8_line"


def _random_file(rng: random.Random, n_lines: int) -> bytes:
    """Lines of every kind the parser tells apart, joined by \\n or \\r\\n."""
    kinds = [
        lambda: b"",
        lambda: b"  \t ",
        lambda: " ".join(
            rng.choice(["w\u00e9rd", "word", "x", "\u201cq\u201d"])
            for _ in range(rng.randint(1, 12))
        ).encode(),
        lambda: b"bad \xff\xfe bytes",
        lambda: b"long " * rng.randint(20, 40),
        lambda: "\ufeffbom".encode(),
    ]
    weights = [3, 1, 12, 1, 1, 1]
    lines = [rng.choices(kinds, weights)[0]() for _ in range(n_lines)]
    if rng.random() < 0.5:
        lines[0] = "\ufeff".encode() + lines[0]
    ends = [rng.choice([b"\n", b"\r\n"]) for _ in lines]
    data = b"".join(line + end for line, end in zip(lines, ends, strict=True))
    return data if rng.random() < 0.5 else data.rstrip(b"\r\n")


def _parse_line_by_line(lines: list[bytes], max_sentence_chars: int, max_document_sentences: int):
    """The format's rules applied one line at a time, plainly (the oracle of the test below)."""
    docs, rejects, stats, sentences = [], [], Counter(), []

    def flush():
        nonlocal sentences
        if sentences:
            stats["documents"] += 1
            docs.append(TextDocument(f"src:{len(docs)}", sentences))
            sentences = []

    for number, raw in enumerate(lines, start=1):
        stats["lines"] += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            stats["skipped_invalid_utf8_line"] += 1
            rejects.append(
                Reject.of("skipped_invalid_utf8_line", f"src:line {number}: {e.reason}", raw)
            )
            continue
        line = (line[1:] if number == 1 and line.startswith("\ufeff") else line).strip()
        if not line:
            flush()
            continue
        pieces = [line]
        if len(line) > max_sentence_chars:
            stats["split_overlong_sentence"] += 1
            rejects.append(
                Reject.of(
                    "split_overlong_sentence", f"src:line {number}: {len(line)} characters", line
                )
            )
            pieces = split_long_sentence(line, max_sentence_chars)
        for piece in pieces:
            if len(sentences) >= max_document_sentences:
                stats["split_overlong_document"] += 1
                rejects.append(
                    Reject.of(
                        "split_overlong_document",
                        f"src:line {number}: document cut before this line, at {max_document_sentences} sentences",
                        piece,
                    )
                )
                flush()
            sentences.append(piece)
            stats["sentences"] += 1
    flush()
    return docs, rejects, stats


@pytest.mark.parametrize("seed", range(30))
def test_chunks_of_whole_lines_parse_as_the_lines_one_by_one(seed):
    """A file read in blocks cut after a line end gives the same documents, rejects and counts
    as its lines given one at a time, wherever the cuts fall (the whole-chunk path and the
    line-by-line one agree)."""
    rng = random.Random(seed)
    data = _random_file(rng, rng.randint(1, 300))
    limits = {"max_sentence_chars": 100, "max_document_sentences": rng.choice([3, 7, 1000])}
    one_by_one = parse(
        [line for line in data.split(b"\n") if line] if False else _lines(data), **limits
    )
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    cuts = sorted(rng.sample(ends, min(len(ends), rng.randint(0, 8))))
    chunks = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]
    assert b"".join(chunks) == data
    assert parse(chunks, **limits) == one_by_one
    assert parse([data], **limits) == one_by_one


def _lines(data: bytes) -> list[bytes]:
    """``data`` cut after each \\n (as ``readline`` does)."""
    lines = [line + b"\n" for line in data.split(b"\n")]
    lines[-1] = lines[-1][:-1]
    return [line for line in lines if line]
