"""Project Gutenberg book cleaning (transforms.book_text): decoding, boilerplate, paragraphs.

Unit tests use small hand-written inputs; the real-data tests run over the 14 books in
../shared/corpora/books.
"""

from __future__ import annotations

import codecs
import functools
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import require_corpora
from transforms import book_text
from transforms.book_text import (
    LATIN_1_FALLBACK,
    book_paragraphs,
    clean_book,
    decode_book,
    strip_gutenberg,
)
from transforms.rejects import Reject

WESTERN_LABELS = {"cp1252", "iso8859_1", "iso8859_15"}
ACCENTED = (
    "It was the best of times; the café was full, and the naïve fiancée from Zürich ordered a "
    "crème brûlée. «Non!» said the garçon, à propos of nothing. The price was £12.\n"
)


# ---------------------------------------------------------------------------------------------
# decode_book
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bom", "codec", "label"),
    [
        (codecs.BOM_UTF8, "utf-8", "utf_8_sig"),
        (codecs.BOM_UTF16_LE, "utf-16-le", "utf_16_le"),
        (codecs.BOM_UTF16_BE, "utf-16-be", "utf_16_be"),
        (codecs.BOM_UTF32_LE, "utf-32-le", "utf_32_le"),
        (codecs.BOM_UTF32_BE, "utf-32-be", "utf_32_be"),
    ],
)
def test_decode_bom_first(bom: bytes, codec: str, label: str):
    text, got = decode_book(bom + "Ünïcödé line\r\nnext — “quoted”\r\n".encode(codec))
    assert got == label
    assert text == "Ünïcödé line\nnext — “quoted”\n"
    assert not text.startswith("\ufeff")


def test_decode_strict_utf8_and_ascii():
    assert decode_book("naïve — ok\n".encode()) == ("naïve — ok\n", "utf_8")
    assert decode_book(b"plain ascii\n") == ("plain ascii\n", "utf_8")
    assert decode_book(b"") == ("", "utf_8")


def test_decode_normalizes_crlf_and_cr():
    text, _ = decode_book(b"one\r\ntwo\rthree\n\r\nfour")
    assert text == "one\ntwo\nthree\n\nfour"
    assert "\r" not in text


def test_decode_latin1_book_is_western():
    data = (ACCENTED * 15).encode("latin-1")
    text, label = decode_book(data)
    assert label in WESTERN_LABELS
    assert text == ACCENTED * 15


def test_decode_cp1252_smart_quotes():
    original = "“Smart quotes” — and the café’s crème brûlée were naïve; he said «non». " * 12
    text, label = decode_book(original.encode("cp1252"))
    assert label == "cp1252"
    assert text == original


def test_decode_ignores_a_wrong_declared_charset():
    # A latin-1 file whose header claims UTF-8: the bytes decide.
    header = "Title: A Test\r\nCharacter set encoding: UTF-8\r\n\r\n"
    data = (header + ACCENTED * 15).encode("latin-1")
    text, label = decode_book(data)
    assert label in WESTERN_LABELS
    assert "crème brûlée" in text and "à propos" in text
    # ...and a UTF-8 file that claims ISO-8859-1 stays UTF-8.
    data = ("Character set encoding: ISO-8859-1\n\n" + ACCENTED).encode("utf-8")
    assert decode_book(data) == ("Character set encoding: ISO-8859-1\n\n" + ACCENTED, "utf_8")


def test_decode_bom_with_invalid_rest_falls_through_to_detection():
    data = codecs.BOM_UTF8 + (ACCENTED * 15).encode("latin-1")
    text, label = decode_book(data)
    assert label in WESTERN_LABELS
    assert text.endswith(ACCENTED)


def test_decode_latin1_last_resort(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(book_text, "_guess_encoding", lambda data: None)
    text, label = decode_book(b"caf\xe9\r\n\x81\x9d")
    assert label == LATIN_1_FALLBACK
    assert text == "café\n\x81\x9d"


def test_decode_random_bytes_never_fails():
    data = bytes(range(256)) * 20
    text, label = decode_book(data)
    assert label
    assert "\r" not in text


# ---------------------------------------------------------------------------------------------
# strip_gutenberg
# ---------------------------------------------------------------------------------------------

HEADER = "The Project Gutenberg EBook of A Test, by Someone\n\nTitle: A Test\n\n"
BODY = "\nA TEST\n\nThe story begins here.\n\nIt ends here.\n\n"
LICENCE = "\n*** START: FULL LICENSE ***\n\nTHE FULL LICENSE\nSMALL PRINT words here.\n" * 3


@pytest.mark.parametrize(
    "start",
    [
        "*** START OF THIS PROJECT GUTENBERG EBOOK A TEST ***",
        "***START OF THE PROJECT GUTENBERG EBOOK A TEST***",
        "*** start of the project gutenberg ebook a test ***",
        "*** START OF THIS PROJECT GUTENBERG ETEXT A TEST ***",
        "  ***  START OF THE PROJECT GUTENBERG EBOOK A TEST  ***",
    ],
)
@pytest.mark.parametrize(
    "end",
    [
        "*** END OF THIS PROJECT GUTENBERG EBOOK A TEST ***",
        "***END OF THE PROJECT GUTENBERG EBOOK A TEST***",
        "End of the Project Gutenberg EBook of A Test, by Someone",
        "End of Project Gutenberg's A Test, by Someone",
        "End of Project Gutenberg’s A Test, by Someone",
        "End of Project Gutenberg Etext of A Test",
    ],
)
def test_strip_markers(start: str, end: str):
    body, how = strip_gutenberg(HEADER + start + "\n" + BODY + end + "\n" + LICENCE)
    assert how == "markers"
    assert body == BODY


def test_strip_cuts_at_the_first_end_line():
    text = (
        "*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nbody\n"
        "End of the Project Gutenberg EBook of X\n\n*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n"
    )
    assert strip_gutenberg(text) == ("body\n", "markers")


def test_strip_start_marker_with_wrapped_title():
    text = (
        "header\n*** START OF THIS PROJECT GUTENBERG EBOOK A VERY LONG TITLE THAT\n"
        "WRAPS ONTO A SECOND LINE ***\n\nBody text.\n"
        "*** END OF THIS PROJECT GUTENBERG EBOOK A VERY LONG TITLE ***\n"
    )
    assert strip_gutenberg(text) == ("\nBody text.\n", "markers")


def test_strip_start_marker_without_closing_stars_keeps_next_paragraph():
    text = "*** START OF THE PROJECT GUTENBERG EBOOK X\n\nBody.\n"
    assert strip_gutenberg(text) == ("\nBody.\n", "markers")


# A 1990s-style header written for this test: a "small print" block closed by an *END* line.
SMALL_PRINT_BOOK = """\
The Project Gutenberg Etext of Rainy Afternoons, by A. Nobody
Please read the legal small print and the other notes below.

Rainy Afternoons

by A. Nobody

**Welcome To Our Imaginary Plain Text Header**
**Etexts Readable By Both Humans and By Computers**

*****These lines are a header written for a unit test*****

Title:  Rainy Afternoons

**The Legal Small Print**

(Three paragraphs of licence in the old style would stand here: who may copy the etext, what
the disclaimer of warranty covers, and how to send a donation to the project.)

*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*

RAINY AFTERNOONS

CHAPTER I.

The rain had been falling since breakfast, and nobody in the house
knew what to do with the long grey hours that stretched before them.

"We might read aloud," said Mary, without much hope.

End of Project Gutenberg Etext of Rainy Afternoons, by A. Nobody
"""


def test_strip_small_print_header():
    body, how = strip_gutenberg(SMALL_PRINT_BOOK)
    assert how == "small_print"
    assert body.lstrip().startswith("RAINY AFTERNOONS")
    assert "SMALL PRINT" not in body and "Small Print" not in body and "Etext" not in body
    assert body.rstrip().endswith("said Mary, without much hope.")


def test_strip_small_print_end_line_variant():
    text = SMALL_PRINT_BOOK.replace(
        "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*",
        "*END THE SMALL PRINT! FOR PUBLIC DOMAIN EBOOKS*Ver.02/11/02*END*",
    )
    body, how = strip_gutenberg(text)
    assert how == "small_print"
    assert body.lstrip().startswith("RAINY AFTERNOONS")


def test_start_marker_wins_over_small_print():
    text = SMALL_PRINT_BOOK.replace(
        "RAINY AFTERNOONS\n\nCHAPTER I.",
        "*** START OF THE PROJECT GUTENBERG EBOOK RAINY AFTERNOONS ***\nCHAPTER I.",
    )
    body, how = strip_gutenberg(text)
    assert how == "markers"
    assert body.startswith("CHAPTER I.")


def test_small_print_in_the_second_half_is_not_a_header():
    text = "Body line.\n" * 50 + "*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*END*\nmore\n"
    assert strip_gutenberg(text) == (text, "none")


def test_no_markers_keeps_the_text():
    text = "A book without any header.\n\nJust prose.\n"
    assert strip_gutenberg(text) == (text, "none")


def test_end_line_without_start_is_still_cut():
    text = "Prose.\n\nEnd of the Project Gutenberg EBook of X\nlicence\n"
    assert strip_gutenberg(text) == ("Prose.\n\n", "none")


def test_end_words_inside_a_line_are_not_a_marker():
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
        "He spoke of the end of Project Gutenberg as if it were near.\n"
    )
    assert strip_gutenberg(text) == (text.split("\n", 1)[1], "markers")


# ---------------------------------------------------------------------------------------------
# book_paragraphs
# ---------------------------------------------------------------------------------------------


def paragraphs(body: str, **kwargs) -> tuple[list[str], Counter[str], list[tuple[str, str]]]:
    stats: Counter[str] = Counter()
    dropped: list[tuple[str, str]] = []
    out = book_paragraphs(body, stats, dropped=dropped, **kwargs)
    assert stats["dropped_nonprose_paragraphs"] == len(dropped)
    return out, stats, dropped


def test_hard_wrapped_lines_are_rejoined_and_blank_lines_separate():
    body = (
        "The first paragraph was wrapped\nover three short lines, as printed\nbooks often are.\n"
        "\n\n"
        "   The second one is indented\n   and has two lines.\n"
    )
    out, _, dropped = paragraphs(body)
    assert out == [
        "The first paragraph was wrapped over three short lines, as printed books often are.",
        "The second one is indented and has two lines.",
    ]
    assert dropped == []


def test_dash_at_line_end_joins_without_space():
    out, _, _ = paragraphs("He hesitated--\nthen he spoke at last, and\nher face—\nbrightened.\n")
    assert out == ["He hesitated--then he spoke at last, and her face—brightened."]


@pytest.mark.parametrize(
    "heading",
    [
        "CHAPTER I.",
        "Chapter 12",
        "CHAPTER XIV",
        "Chapter the Third",
        "XII.",
        "IV",
        "BOOK II.",
        "PREFACE",
        "VOLUME I",
    ],
)
def test_chapter_headings_are_dropped(heading: str):
    out, stats, _ = paragraphs(f"{heading}\n\nShe walked into the room and sat down.\n")
    assert out == ["She walked into the room and sat down."]
    assert stats["dropped_nonprose_paragraphs"] == 1


def test_heading_lines_at_the_top_of_a_block_are_removed():
    out, _, _ = paragraphs(
        "CHAPTER III.\nTHE LAURISTON GARDEN MYSTERY\nIt was a cold night and the fog lay thick.\n"
    )
    assert out == ["It was a cold night and the fog lay thick."]


@pytest.mark.parametrize(
    "line",
    [
        "Part of the reason was the weather.",
        "Part the way home he walked alone.",
        "Chapter 12 was the best, he said.",
        "Book two of the series was lost.",
    ],
)
def test_a_sentence_is_not_a_chapter_heading(line: str):
    out, _, _ = paragraphs(f"{line}\nAnd so the story went on.\n")
    assert out == [f"{line} And so the story went on."]


def test_table_of_contents_blocks_are_dropped():
    body = (
        "CONTENTS\n\n"
        "Chapter I. The Science of Deduction\nChapter II. The Statement of the Case\n"
        "Chapter III. In Quest of a Solution\nChapter IV. The Bald-Headed Man\n\n"
        "Jonathan's Journal          1\nLetters--Lucy and Mina     51\nMina's Journal      ... 59\n\n"
        "The Science of Deduction\nThe Statement of the Case\nIn Quest of a Solution\n\n"
        "   I. How a Rich Banker Married.\n  II. Aurora.\n III. The Diamond Bracelet.\n\n"
        "The Science of Deduction\n\n"
        "Sherlock Holmes took his bottle from the corner of the mantel-piece.\n"
    )
    out, stats, dropped = paragraphs(body)
    assert out == ["Sherlock Holmes took his bottle from the corner of the mantel-piece."]
    assert [reason for reason, _ in dropped] == [
        "contents",  # the CONTENTS heading
        "no_letters",  # "Chapter N." lines are heading lines: nothing left
        "contents",  # page numbers
        "contents",  # Title Case lines without punctuation
        "contents",  # numbered entries
        "no_final_punctuation",  # the chapter title before the text
    ]
    assert stats["dropped_nonprose_contents"] == 4


def test_verse_is_not_a_table_of_contents():
    verse = (
        "  The wind was loud upon the hill,\n  And every tree was bending low;\n"
        "  I dared the storm, I dared it still,\n  And where it blew I chose to go.\n"
    )
    out, _, _ = paragraphs(verse)
    assert out == [
        "The wind was loud upon the hill, And every tree was bending low; I dared the storm, "
        "I dared it still, And where it blew I chose to go."
    ]


def test_illustration_tags_are_removed_and_prose_kept():
    body = (
        "She looked up. [Illustration: A lady looking up at\na tall window] Then she smiled.\n\n"
        "[Illustration]\n\n"
        "                [Picture: The Old Mill]\n\n"
        "[Sidenote: margin note] The river ran fast that spring.\n\n"
        "{The coach at the door: p42.jpg}\n\n"
        "The end of the chapter came quickly.\n"
    )
    out, _, _ = paragraphs(body)
    assert out == [
        "She looked up. Then she smiled.",
        "The river ran fast that spring.",
        "The end of the chapter came quickly.",
    ]


def test_footnote_markers_are_removed_optionally():
    body = "He took his degree in 1878 [1] and went to Netley. {2} It was far [3].\n"
    out, _, _ = paragraphs(body)
    assert out == ["He took his degree in 1878 and went to Netley. It was far."]
    out, _, _ = paragraphs(body, drop_footnote_markers=False)
    assert out == ["He took his degree in 1878 [1] and went to Netley. {2} It was far [3]."]


def test_footnote_blocks_and_footnotes_section_are_dropped():
    body = (
        "The minister came to the parish. {1}\n\n"
        "[Footnote 1: A small village in the west,\nnear the sea.]\n\n"
        "He stayed for fifty years.\n\n\n\n"
        "FOOTNOTES.\n\n"
        "{1}  Dreghorn, a village two miles from the town.\n\n"
        "{9}  The town itself.\n"
    )
    out, stats, _ = paragraphs(body)
    assert out == ["The minister came to the parish.", "He stayed for fifty years."]
    assert stats["dropped_nonprose_footnotes"] == 3


def test_all_caps_title_lines_are_dropped():
    body = (
        "THE STRANGE CASE\nOF THE MISSING HOUR\n\nBY\nA. WRITER\n\n"
        "LONDON: PRINTED FOR THE AUTHOR. 1850.\n\n"
        "The hour was missing, and nobody could say where it had gone.\n"
    )
    out, _, _ = paragraphs(body)
    assert out == ["The hour was missing, and nobody could say where it had gone."]


@pytest.mark.parametrize(
    "rule", ["* * * * *", "       *       *       *       *       *", "-----", "~~~~"]
)
def test_punctuation_only_lines_are_dropped(rule: str):
    out, stats, _ = paragraphs(f"First part ends.\n\n{rule}\n\nSecond part begins.\n")
    assert out == ["First part ends.", "Second part begins."]
    assert stats["dropped_nonprose_no_letters"] == 1


def test_indented_transcribers_note_and_following_indented_blocks_are_dropped():
    body = (
        "     Transcriber's Note: This text follows the first edition, with its\n"
        "     spelling and punctuation.\n\n"
        "     Italics are shown with underscores.\n\n"
        "A HEADING\n\n"
        "The story itself starts here, as stories do.\n"
    )
    out, stats, _ = paragraphs(body)
    assert out == ["The story itself starts here, as stories do."]
    assert stats["dropped_nonprose_transcriber_note"] == 2


def test_transcribers_note_heading_drops_its_entries_up_to_a_section_break():
    body = (
        "The novel ends here, happily for all.\n\n\n\n"
        "Typographical errors corrected by the transcriber:\n\n"
        "teh house=> the house {pg 12}\n\n"
        "It have been=> It had been {pg 40}\n\n\n\n"
        "An afterword follows the notes, in plain prose.\n"
    )
    out, stats, _ = paragraphs(body)
    assert out == [
        "The novel ends here, happily for all.",
        "An afterword follows the notes, in plain prose.",
    ]
    assert stats["dropped_nonprose_transcriber_note"] == 3


def test_short_transcribers_note_with_content_drops_only_itself():
    body = "Transcriber's note: obvious typos were fixed.\n\nThe first chapter opens at dawn.\n"
    out, _, _ = paragraphs(body)
    assert out == ["The first chapter opens at dawn."]


def test_bracketed_note_spanning_blocks_is_dropped():
    body = (
        "     [Note: The footnotes of this edition have been moved\n     into the text.\n\n"
        "     Italics have been replaced by capitals.]\n\n"
        "The family was an old one, and proud of it.\n"
    )
    out, _, _ = paragraphs(body)
    assert out == ["The family was an old one, and proud of it."]


@pytest.mark.parametrize(
    "credits",
    [
        "Produced by Some Volunteers and the Online Distributed\nProofreading Team.",
        "Transcribed from the 1897 edition by A. Volunteer, email someone@example.org",
        "E-text prepared by Two Volunteers\n(http://www.example.org) from page images.",
        "This etext was produced by a volunteer.",
        "Images of the original pages are available at https://example.org/book.",
        "This book is one of three volumes on Project Gutenberg.",
        "Contact the editor at editor@example.com for corrections.",
    ],
)
def test_boilerplate_and_credits_are_dropped(credits: str):
    out, stats, _ = paragraphs(f"{credits}\n\nThe book proper begins with this sentence.\n")
    assert out == ["The book proper begins with this sentence."]
    assert stats["dropped_nonprose_boilerplate"] == 1


def test_pretext_is_not_etext():
    out, _, _ = paragraphs("He came on some pretext or other, and stayed to dinner.\n")
    assert out == ["He came on some pretext or other, and stayed to dinner."]


def test_emphasis_underscores_are_removed():
    out, _, _ = paragraphs(
        "She _may_ fall in love, _i.e._, with _one_ of them; file_name and Mr. ____ stay.\n"
    )
    assert out == ["She may fall in love, i.e., with one of them; file_name and Mr. ____ stay."]


def test_page_break_inside_a_paragraph_is_joined():
    body = (
        "They counted the walks the chief jewel of each week, and even resisted the calls\n\n"
        "3)\n\n"
        "of business, that they might enjoy them uninterrupted.\n\n"
        "A new paragraph starts here.\n"
    )
    out, stats, _ = paragraphs(body)
    assert out == [
        "They counted the walks the chief jewel of each week, and even resisted the calls of "
        "business, that they might enjoy them uninterrupted.",
        "A new paragraph starts here.",
    ]
    assert stats["joined_page_breaks"] == 1


def test_a_lowercase_start_after_a_finished_sentence_is_a_new_paragraph():
    out, _, _ = paragraphs("The first one ends here.\n\nand the second starts oddly.\n")
    assert out == ["The first one ends here.", "and the second starts oddly."]


@pytest.mark.parametrize(
    "prose",
    [
        "He bowed.",
        "“Bingley.”",
        '"Yes."',
        "Can it be Neptune?",
        "Mr. Bennet made no answer.",
        "--is the Newmarket of Ireland.",
        '"If you could but be persuaded to think no more of it, aunt"',
        "He had done. Turning from me, he once more looked at the river, and at the hills "
        "beyond it, and said nothing for a long time while the wind rose and the light went",
    ],
)
def test_prose_test_keeps(prose: str):
    out, _, _ = paragraphs(prose + "\n")
    assert out == [prose]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Jonathan Harker's Journal", "no_final_punctuation"),
        ("by Jane Austen", "no_final_punctuation"),
        ("Fifth Edition.", "title"),
        ("In Three Volumes.", "title"),
        ('Author of "The Secret of the House."', "title"),
        ("Finis.", "too_short"),
        ("1850 & 1851.\nLONDON: THE PRESS.", "no_lowercase"),
        (
            "The Illustrations in this Volume are the copyright of the Publishers",
            "no_final_punctuation",
        ),
    ],
)
def test_prose_test_drops(text: str, reason: str):
    out, _, dropped = paragraphs(text + "\n")
    assert out == []
    assert [r for r, _ in dropped] == [reason]


def test_all_caps_lines_are_headings_even_with_punctuation():
    out, _, dropped = paragraphs("ORIGINAL EDITION, 1850.\n")
    assert out == []
    assert [r for r, _ in dropped] == ["no_letters"]  # nothing left once the heading line goes


def test_back_matter_after_the_end_is_dropped():
    story = "A sentence of the story, long enough to count for something here.\n\n" * 40
    ads = "Ask your bookseller for the complete list of our popular novels.\n\n" * 2
    out, stats, _ = paragraphs(story + "THE END\n\n" + ads)
    assert len(out) == 40
    assert stats["dropped_nonprose_back_matter"] == 2


def test_the_end_far_from_the_end_is_not_back_matter():
    part = "A sentence of the story, long enough to count for something here.\n\n" * 10
    out, _, _ = paragraphs(part + "THE END\n\n" + part)
    assert len(out) == 20


def test_output_is_normalized_one_line_paragraphs():
    out, _, _ = paragraphs("Cafe\u0301  and\ttea\u00a0here,\n   said she.\x00\n")
    assert out == ["Café and tea here, said she."]


# ---------------------------------------------------------------------------------------------
# clean_book
# ---------------------------------------------------------------------------------------------


def make_book(
    body: str, start: str = "*** START OF THIS PROJECT GUTENBERG EBOOK A TEST ***"
) -> bytes:
    text = (
        HEADER
        + start
        + "\n\n"
        + body
        + "\n\n*** END OF THIS PROJECT GUTENBERG EBOOK A TEST ***\n"
        + LICENCE
    )
    return codecs.BOM_UTF8 + text.replace("\n", "\r\n").encode("utf-8")


def test_clean_book_counts():
    body = "CHAPTER I.\n\nThe story begins on a\nwet morning.\n\n* * *\n\nIt ends at night.\n"
    stats: Counter[str] = Counter()
    out, rejects = clean_book(make_book(body), "test.txt", stats)
    assert out == ["The story begins on a wet morning.", "It ends at night."]
    assert rejects == []
    assert stats["books"] == 1
    assert stats["encoding_utf_8_sig"] == 1
    assert stats["boilerplate_stripped_markers"] == 1
    assert stats["book_paragraphs"] == 2
    assert stats["dropped_nonprose_paragraphs"] == 2


def test_clean_book_small_print():
    stats: Counter[str] = Counter()
    out, rejects = clean_book(SMALL_PRINT_BOOK.encode("ascii"), "old.txt", stats)
    assert out == [
        "The rain had been falling since breakfast, and nobody in the house knew what to do "
        "with the long grey hours that stretched before them.",
        '"We might read aloud," said Mary, without much hope.',
    ]
    assert rejects == []
    assert stats["boilerplate_stripped_small_print"] == 1
    assert stats["encoding_utf_8"] == 1


def test_clean_book_without_markers_is_kept_and_reported():
    stats: Counter[str] = Counter()
    data = b"A book without a header.\r\n\r\nIt has two paragraphs of prose.\r\n"
    out, rejects = clean_book(data, "bare.txt", stats)
    assert out == ["A book without a header.", "It has two paragraphs of prose."]
    assert stats["boilerplate_not_found"] == 1
    assert [r.reason for r in rejects] == ["boilerplate_not_found"]
    assert rejects[0].location == "bare.txt"
    assert rejects[0].excerpt.startswith("A book without a header.")


def test_clean_book_empty_book():
    stats: Counter[str] = Counter()
    out, rejects = clean_book(make_book("CONTENTS\n\nCHAPTER I.\n\n* * *\n"), "empty.txt", stats)
    assert out == []
    assert [r.reason for r in rejects] == ["empty_book"]
    assert isinstance(rejects[0], Reject)
    assert stats["empty_book"] == 1
    out, rejects = clean_book(b"", "nothing.txt", stats)
    assert out == []
    assert [r.reason for r in rejects] == ["boilerplate_not_found", "empty_book"]


def test_clean_book_latin1_with_wrong_declaration():
    text = (
        "Character set encoding: UTF-8\r\n\r\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\r\n\r\n"
        + (ACCENTED * 10).replace("\n", "\r\n\r\n")
        + "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\r\n"
    )
    stats: Counter[str] = Counter()
    out, _ = clean_book(text.encode("latin-1"), "x.txt", stats)
    assert out == [ACCENTED.strip()] * 10
    assert sum(v for k, v in stats.items() if k.startswith("encoding_")) == 1
    assert any(stats[f"encoding_{label}"] for label in WESTERN_LABELS)


# ---------------------------------------------------------------------------------------------
# Real data: the 14 Project Gutenberg books
# ---------------------------------------------------------------------------------------------

BOOKS = [
    "105.txt",
    "1310-0.txt",
    "1342-0.txt",
    "1424-0.txt",
    "158-0.txt",
    "244-0.txt",
    "48020.txt",
    "9198-8.txt",
    "972.txt",
    "pg1260.txt",
    "pg174.txt",
    "pg2097.txt",
    "pg345.txt",
    "pg42.txt",
]
BOILERPLATE_STRINGS = ["Project Gutenberg", "START OF", "END OF THE PROJECT", "SMALL PRINT"]


def books_dir() -> Path:
    return require_corpora("books")


@functools.cache
def _cleaned(path: Path) -> tuple[str, str, str, list[str], Counter[str]]:
    data = path.read_bytes()
    text, label = decode_book(data)
    _, how = strip_gutenberg(text)
    stats: Counter[str] = Counter()
    paras, rejects = clean_book(data, path.name, stats)
    assert rejects == []
    return text, label, how, paras, stats


def cleaned(name: str) -> tuple[str, str, str, list[str], Counter[str]]:
    return _cleaned(books_dir() / name)


def test_all_books_present():
    assert sorted(p.name for p in books_dir().glob("*.txt")) == sorted(BOOKS)


@pytest.mark.parametrize("name", BOOKS)
def test_real_book(name: str):
    text, label, how, paras, stats = cleaned(name)
    # decoding: only 9198-8.txt is not UTF-8
    if name == "9198-8.txt":
        assert label in WESTERN_LABELS
        assert "à propos" in text  # cp1250 would give "ŕ propos"
    else:
        assert label in {"utf_8", "utf_8_sig"}
    assert "\r" not in text and "\ufeff" not in text
    # boilerplate: found by its markers and gone
    assert how == "markers"
    assert stats["boilerplate_stripped_markers"] == 1
    for paragraph in paras:
        for needle in BOILERPLATE_STRINGS:
            assert needle not in paragraph, (needle, paragraph[:200])
        assert "www.gutenberg" not in paragraph.lower()
        assert "gutenberg" not in paragraph.lower()
        assert "\n" not in paragraph and "\r" not in paragraph
    # a novel's worth of prose: almost every word of the body is kept (98.4-99.9% on these)
    body, _ = strip_gutenberg(text)
    assert len(paras) >= 300
    assert stats["dropped_nonprose_paragraphs"] < len(paras) / 2
    assert sum(len(p.split()) for p in paras) >= 0.97 * len(body.split())


def test_real_book_first_and_last_paragraphs():
    _, _, _, paras, _ = cleaned("1342-0.txt")
    assert paras[0] == (
        "It is a truth universally acknowledged, that a single man in possession of a good "
        "fortune, must be in want of a wife."
    )
    assert paras[-1].endswith("the means of uniting them.")
    _, _, _, paras, _ = cleaned("pg345.txt")
    assert not any("Grosset" in p or "=>" in p for p in paras)  # back matter and errata
    assert not any(re.search(r"Page|Journal \d+$", p) for p in paras[:5])  # contents
    _, _, _, paras, _ = cleaned("244-0.txt")
    assert not any("Transcriber" in p or "Footnote" in p for p in paras)
    _, _, _, paras, _ = cleaned("pg42.txt")
    joined = " ".join(paras)
    assert "resisted the calls of business" in joined  # page marker "3)" removed, joined
    assert not re.search(r"(?:^| )\d+\)(?: |$)", joined)


def test_real_book_with_a_wrong_declared_charset():
    path = books_dir() / "9198-8.txt"
    data = path.read_bytes()
    assert b"Character set encoding: ISO-8859-1" in data
    lying = data.replace(b"Character set encoding: ISO-8859-1", b"Character set encoding: UTF-8")
    text, label = decode_book(lying)
    assert label in WESTERN_LABELS
    original, _ = decode_book(data)
    assert text == original.replace("ISO-8859-1", "UTF-8", 1)


def test_real_book_without_markers_is_kept():
    text, _, _, _, _ = cleaned("pg42.txt")
    lines = [line for line in text.split("\n") if "PROJECT GUTENBERG EBOOK" not in line]
    lines = [line for line in lines if not line.startswith("End of Project Gutenberg")]
    bare = "\n".join(lines)
    body, how = strip_gutenberg(bare)
    assert (body, how) == (bare, "none")
    stats: Counter[str] = Counter()
    paras, rejects = clean_book(bare.encode("utf-8"), "pg42-bare.txt", stats)
    assert stats["boilerplate_not_found"] == 1
    assert [r.reason for r in rejects] == ["boilerplate_not_found"]
    assert len(paras) >= 300  # the book is kept, its licence text with it
