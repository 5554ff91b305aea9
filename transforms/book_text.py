"""Project Gutenberg books to prose paragraphs: decoding, boilerplate stripping, non-prose removal.

``clean_book`` runs the three steps on one file's bytes:

1. ``decode_book``: bytes to text with ``\\n`` line endings, trusting the bytes, never the file's
   own "Character set encoding:" line (files that declare the wrong charset exist);
2. ``strip_gutenberg``: cuts the PG header (START marker, or a 1990s "SMALL PRINT" block) and the
   END marker with the licence after it;
3. ``book_paragraphs``: re-joins hard-wrapped lines into paragraphs and drops what is not prose
   (title pages, tables of contents, headings, notes, credits); the rules are listed there.

Everything here is a pure function of its input; nothing is dropped without being counted.
"""

from __future__ import annotations

import codecs
import contextlib
import re
from collections import Counter
from dataclasses import dataclass

import charset_normalizer

from transforms.rejects import Reject
from transforms.text_normalization import normalize_text

# ---------------------------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------------------------

# Longest first: the UTF-32-LE BOM starts with the UTF-16-LE one.
_BOMS: tuple[tuple[bytes, str, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le", "utf_32_le"),
    (codecs.BOM_UTF32_BE, "utf-32-be", "utf_32_be"),
    (codecs.BOM_UTF8, "utf-8", "utf_8_sig"),
    (codecs.BOM_UTF16_LE, "utf-16-le", "utf_16_le"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "utf_16_be"),
)
# charset-normalizer scores several single-byte code pages identically on English text and then
# picks by name (cp1250 before cp1252, which turns "à" into "ŕ"). Among the candidates whose
# chaos is within WESTERN_TIE_CHAOS of the best one, these win, in this order.
WESTERN_PREFERENCE = ("cp1252", "iso8859-1", "iso8859-15")
WESTERN_TIE_CHAOS = 0.01
LATIN_1_FALLBACK = "latin_1_fallback"


def _label(codec: str) -> str:
    """Python's canonical codec name with ``_`` for ``-``: ``latin_1`` -> ``iso8859_1``."""
    return codecs.lookup(codec).name.replace("-", "_")


def _guess_encoding(data: bytes) -> str | None:
    # preemptive_behaviour=False: charset-normalizer would otherwise believe an "encoding: X"
    # declaration found in the bytes, which is exactly what PG headers get wrong.
    matches = charset_normalizer.from_bytes(data, preemptive_behaviour=False)
    best = matches.best()
    if best is None:
        return None
    tied = {
        codecs.lookup(m.encoding).name for m in matches if m.chaos <= best.chaos + WESTERN_TIE_CHAOS
    }
    for name in WESTERN_PREFERENCE:
        if name in tied:
            return name
    return best.encoding


def decode_book(data: bytes) -> tuple[str, str]:
    """``(text, encoding_label)`` for one file's bytes; ``text`` has ``\\n`` line endings only and
    no BOM.

    Order: a BOM (UTF-32 LE/BE, UTF-8, UTF-16 LE/BE) if the rest decodes strictly; strict UTF-8
    (ASCII included); charset-normalizer's best guess, ignoring any charset declared in the text
    and preferring cp1252/latin-1 on a tie (``WESTERN_PREFERENCE``); latin-1, which decodes
    anything, as the last resort (label ``latin_1_fallback``). Labels are Python codec names with
    ``_``: ``utf_8``, ``utf_8_sig``, ``utf_16_le``, ``cp1252``, ``iso8859_1``...
    """
    text: str | None = None
    label = ""
    for bom, codec, bom_label in _BOMS:
        if data.startswith(bom):
            with contextlib.suppress(UnicodeDecodeError):
                text, label = data[len(bom) :].decode(codec), bom_label
            break
    if text is None:
        try:
            text, label = data.decode("utf-8"), "utf_8"
        except UnicodeDecodeError:
            guess = _guess_encoding(data)
            if guess is not None:
                try:
                    text, label = data.decode(guess), _label(guess)
                except (UnicodeDecodeError, LookupError):
                    text = None
            if text is None:
                text, label = data.decode("latin-1"), LATIN_1_FALLBACK
    text = text.removeprefix("\ufeff")
    return text.replace("\r\n", "\n").replace("\r", "\n"), label


# ---------------------------------------------------------------------------------------------
# Boilerplate
# ---------------------------------------------------------------------------------------------

_PG = r"PROJECT[ \t]+GUTENBERG"
_START = re.compile(
    rf"^[ \t]*\*+[ \t]*START[ \t]+OF[ \t]+(?:THIS|THE)[ \t]+{_PG}[ \t]+E-?(?:BOOK|TEXT)\b",
    re.IGNORECASE | re.MULTILINE,
)
_END = re.compile(
    rf"^[ \t]*(?:\*+[ \t]*END[ \t]+OF[ \t]+(?:THIS|THE)[ \t]+{_PG}[ \t]+E-?(?:BOOK|TEXT)\b"
    rf"|END[ \t]+OF[ \t]+(?:THE[ \t]+)?{_PG}\b)",
    re.IGNORECASE | re.MULTILINE,
)
_SMALL_PRINT_END = re.compile(
    r"^[^\n]*\*[ \t]*END[ \t]*\*?[ \t]*THE[ \t]+SMALL[ \t]+PRINT\b[^\n]*$",
    re.IGNORECASE | re.MULTILINE,
)
# A START marker whose title wraps may close its "***" this many lines further down.
_MARKER_CONTINUATION_LINES = 3
# A "SMALL PRINT" block only counts as the header when it ends before the first END line, or,
# with no END line, in the first half of the text: later PG files carry the same words in the
# licence at the end.
SMALL_PRINT_MAX_POSITION = 0.5


def _line_end(text: str, position: int) -> int:
    """Index just past the line holding ``position`` (past its ``\\n``)."""
    newline = text.find("\n", position)
    return len(text) if newline < 0 else newline + 1


def _start_marker_end(text: str, match: re.Match[str]) -> int:
    end = _line_end(text, match.start())
    if "***" in text[match.end() : end]:
        return end
    line_start = end
    for _ in range(_MARKER_CONTINUATION_LINES):  # a wrapped title: "...EBOOK THE\nLONG TITLE ***"
        next_end = _line_end(text, line_start)
        line = text[line_start:next_end]
        if not line.strip():
            break
        if "***" in line:
            return next_end
        line_start = next_end
    return end


def strip_gutenberg(text: str) -> tuple[str, str]:
    """``(body, how)``: ``text`` without the Project Gutenberg header and footer.

    The header goes up to and including the START marker line (``*** START OF THIS PROJECT
    GUTENBERG EBOOK X ***`` and ``***START OF THE PROJECT GUTENBERG EBOOK X***``, any case, with
    or without spaces, EBOOK or ETEXT, a title wrapped over up to 3 lines); without one, up to and
    including the last 1990s ``*END*THE SMALL PRINT! ...`` line before the first END line (in the
    first half of the text when there is none). The footer goes from the first END line after
    the header on: ``*** END OF THIS/THE PROJECT GUTENBERG EBOOK X ***``, ``End of the Project
    Gutenberg EBook of X``, ``End of Project Gutenberg's X``, at the start of a line.

    ``how``: ``"markers"`` (START marker found), ``"small_print"`` (header ended by a SMALL
    PRINT line) or ``"none"`` (no header found: the text is kept, the caller counts it). The
    footer is cut whenever an END line is found.
    """
    start, how = 0, "none"
    start_match = _START.search(text)
    if start_match:
        start, how = _start_marker_end(text, start_match), "markers"
    else:
        first_end = _END.search(text)
        limit = first_end.start() if first_end else int(len(text) * SMALL_PRINT_MAX_POSITION)
        small_prints = list(_SMALL_PRINT_END.finditer(text, 0, limit))
        if small_prints:
            start, how = _line_end(text, small_prints[-1].end()), "small_print"
    end_match = _END.search(text, start)
    end = end_match.start() if end_match else len(text)
    return text[start:end], how


# ---------------------------------------------------------------------------------------------
# Paragraphs
# ---------------------------------------------------------------------------------------------

MIN_PROSE_WORDS = 2
"""A paragraph needs at least this many words ("He bowed."), unless it opens with a quotation
mark: a one-word reply is dialogue."""
UNPUNCTUATED_PROSE_WORDS = 20
"""A paragraph that does not end with punctuation is still prose when it has at least this many
words and a sentence end inside (it leads into a quotation, or a page break cut it)."""
TITLE_MAX_WORDS = 12
"""A paragraph of at most this many words that opens with a capital and whose words of 4+ letters
(at least two of them) are all Capitalized is a title ("In Three Volumes.", "Author of Lady
Audley's Secret.")."""
TOC_MIN_LINES = 3
TOC_LINE_SHARE = 0.75
"""A block of at least TOC_MIN_LINES lines of which at least this share look like contents
entries is a table of contents."""
TOC_SHORT_LINE = 60
"""A contents entry is a line of at most this many characters that starts with a capital or a
digit, does not end with punctuation and has no lowercase word of 4+ letters (verse does), or a
"CHAPTER IV"/"XII."-style line, or a line ending in a page number."""
SECTION_BREAK_BLANK_LINES = 3
"""PG separates sections (chapters, notes) with 3+ blank lines, paragraphs with 1-2."""
BACK_MATTER_MAX_SHARE = 0.05
"""After a "THE END"/"FINIS" line in the last 5% of the body comes back matter (publishers'
advertisements, catalogues, errata): it is dropped."""

_OPENING_QUOTES = "\"'“‘«„‚"
_CLOSERS = "\"'”’»)]*"
_ENDS_PROSE = re.compile(rf"(?:[.!?…:;,\-—–][{re.escape(_CLOSERS)}]*|[”\"»])$")
_SENTENCE_INSIDE = re.compile(r"[.!?][\"'”’)]*\s+[\"'“‘(]*[A-Z]")
_ENDS_SENTENCE = re.compile(rf"[.!?…][{re.escape(_CLOSERS)}]*$")
_TAG = re.compile(
    r"\[\s*(?:Illustrations?|Picture|Sidenote|Frontispiece|Footnote|Errata|Note"
    r"|(?:Original\s+)?(?:Transcriber|Editor)['’]?s?\s+Notes?)\b[^\]]{0,3000}\]"
    r"|\{[^{}]{0,500}\.(?:jpe?g|png|gif)\}"  # {Caption: p30.jpg}
    r"|\[See\s+GLOSSARY\s+\d+\]",
    re.IGNORECASE,
)
_FOOTNOTE_MARKER = re.compile(r"\s*(?:\[\d{1,3}\]|\{\d{1,3}\}|\{pg\s*\d*\})")
_EMPHASIS = re.compile(r"(?<!\w)_(?!_)|(?<!_)_(?!\w)")
_NUMBER_WORD = (
    r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|first|second|third"
    r"|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|the\s+(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|last))"
)
_CHAPTER = re.compile(
    r"^(?:chapter|book|part|volume|vol\.|letter|stave|section|canto)\s+"
    rf"(?:[IVXLCDM]+\b|\d+\b|{_NUMBER_WORD}\b)",
    re.IGNORECASE,
)
_ROMAN_ALONE = re.compile(r"^(?:[IVXLCDM]+|\d+)[.:)]?$")
_TOC_ENTRY = re.compile(
    r"(?:chapter|book|part|letter|stave|section)\s+(?:[IVXLCDM]+|\d+)\b"
    r"|(?:[IVXLCDM]+|\d+)[.:)](?:\s|$)",
    re.IGNORECASE,
)
_PAGE_NUMBER_END = re.compile(r"\S(?:\s{2,}|\s*\.{3,}\s*)\d{1,4}$")
_CONTENTS = re.compile(r"^(?:table\s+of\s+)?contents\.?$", re.IGNORECASE)
_NOTE_HEADING = re.compile(
    r"^(?:original\s+)?(?:(?:e-?text\s+)?transcriber|editor)['’]?s?\s+notes?\b"
    r"|^typographical\s+errors\s+corrected\b|^errata\b",
    re.IGNORECASE,
)
_THE_END = re.compile(r"^(?:the\s+end|finis)\.?$", re.IGNORECASE)
_FOOTNOTES_HEADING = re.compile(r"^(?:foot|end)?notes?[.:]?$", re.IGNORECASE)
_FOOTNOTE_ENTRY = re.compile(r"^(?:\{\d+\}|\[\d+\]|\(\d+\)|\d+[.)]|\*+)\s|^\[footnote", re.I)
_CREDITS = re.compile(
    r"^(?:(?:this\s+)?e-?(?:text|book)\s+(?:was\s+|is\s+)?)?"
    r"(?:produced|prepared|transcribed|digiti[sz]ed|scanned|proofread|created)\b.{0,300}?\bby\b",
    re.IGNORECASE | re.DOTALL,
)
_BOILERPLATE_WORDS = ("gutenberg", "http://", "https://", "www.")
_ETEXT = re.compile(r"\be-?text", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.\w")
_LETTER = re.compile(r"[^\W\d_]")
_NO_WORD_TOKEN = re.compile(r"(?<!\S)(?:[^\w\s]|_)+(?!\S)")


@dataclass
class _Block:
    lines: list[str]  # raw lines, tabs expanded, trailing whitespace removed
    gap: int  # blank lines before the block

    @property
    def indent(self) -> int:
        return min(len(line) - len(line.lstrip()) for line in self.lines)


def _blocks(body: str) -> list[_Block]:
    blocks: list[_Block] = []
    lines: list[str] = []
    gap = 0
    for raw in body.split("\n"):
        line = raw.expandtabs(8).rstrip()
        if line:
            lines.append(line)
            continue
        if lines:
            blocks.append(_Block(lines, gap))
            lines, gap = [], 0
        gap += 1
    if lines:
        blocks.append(_Block(lines, gap))
    return blocks


def _back_matter_start(blocks: list[_Block]) -> int:
    """Index of the first block after the last "THE END" line, when that line is in the last
    ``BACK_MATTER_MAX_SHARE`` of the text; ``len(blocks)`` otherwise."""
    sizes = [sum(map(len, block.lines)) for block in blocks]
    start = len(blocks)
    for index, block in enumerate(blocks):
        if len(block.lines) == 1 and _THE_END.match(block.lines[0].strip()):
            start = index + 1
    after = sum(sizes[start:])
    return start if after <= BACK_MATTER_MAX_SHARE * sum(sizes) else len(blocks)


def _has_letters(text: str) -> bool:
    return _LETTER.search(text) is not None


def _has_lowercase_word(words: list[str]) -> bool:
    """A word of 4+ characters starting lowercase: running text, not a title or a heading."""
    return any(len(word) >= 4 and word[0].islower() for word in words)


def _is_heading_line(line: str) -> bool:
    """An all-caps line, a short "Chapter 12"/"CHAPTER I."/"Book the First"-style line without
    lowercase words, or a roman numeral or number alone."""
    line = line.strip().strip("_")
    if _has_letters(line) and not any(char.islower() for char in line):
        return True
    if _ROMAN_ALONE.match(line):
        return True
    return (
        len(line) <= TOC_SHORT_LINE
        and _CHAPTER.match(line) is not None
        and not _has_lowercase_word(line.split()[1:])
    )


def _is_note_heading_only(lines: list[str]) -> bool:
    """A transcriber's-note block that is only a heading ("TRANSCRIBER'S NOTES:", "Typographical
    errors corrected by the transcriber:"): the entries follow in the next blocks."""
    if len(lines) != 1:
        return False
    line = lines[0].strip()
    match = _NOTE_HEADING.match(line)
    return line.endswith(":") or (match is not None and match.end() >= len(line.rstrip(" .:")))


def _is_toc_line(line: str) -> bool:
    line = line.strip()
    if _TOC_ENTRY.match(line) or (line[-1].isdigit() and _PAGE_NUMBER_END.search(line[-40:])):
        return True
    return (
        len(line) <= TOC_SHORT_LINE
        and (line[0].isupper() or line[0].isdigit())
        and not _ends_with(_ENDS_PROSE, line)
        and not _has_lowercase_word(line.split())
    )


def _is_toc_block(lines: list[str]) -> bool:
    if len(lines) < TOC_MIN_LINES:
        return False
    return sum(map(_is_toc_line, lines)) >= TOC_LINE_SHARE * len(lines)


def _is_boilerplate(text: str) -> bool:
    lower = text.lower()
    return (
        any(word in lower for word in _BOILERPLATE_WORDS)
        or ("text" in lower and _ETEXT.search(text) is not None)
        or ("@" in text and _EMAIL.search(text) is not None)
        or _CREDITS.match(text) is not None
    )


def _ends_with(pattern: re.Pattern[str], text: str) -> bool:
    return pattern.search(text[-16:]) is not None


def _join_lines(lines: list[str]) -> str:
    """Hard-wrapped lines to one line: a space between lines, none after a line ending in a dash
    ("--" or "—"), which joins words."""
    joined = ""
    for line in lines:
        line = line.strip()
        if joined and not joined.endswith(("--", "—")):
            joined += " "
        joined += line
    return joined


def _word_count(text: str) -> int:
    """Whitespace-separated tokens holding a letter or a digit (``[^\\W_]``, i.e. isalnum):
    all tokens but those made only of other characters (a backtracking-free count)."""
    return len(text.split()) - len(_NO_WORD_TOKEN.findall(text))


def _is_title(text: str) -> bool:
    words = text.split()
    if len(words) > TITLE_MAX_WORDS or text[0] in _OPENING_QUOTES:
        return False
    long_words = [w.strip(_OPENING_QUOTES + _CLOSERS + ".,;:!?-") for w in words]
    long_words = [w for w in long_words if len(w) >= 4 and w[0].isalpha()]
    return text[0].isupper() and len(long_words) >= 2 and all(w[0].isupper() for w in long_words)


def _prose_problem(text: str) -> str | None:
    """Why ``text`` is not a prose paragraph, or None when it is."""
    if not any(char.islower() for char in text):
        return "no_lowercase"
    words = _word_count(text)
    if not _ends_with(_ENDS_PROSE, text) and not (
        words >= UNPUNCTUATED_PROSE_WORDS and _SENTENCE_INSIDE.search(text)
    ):
        return "no_final_punctuation"
    if words < MIN_PROSE_WORDS and not (words and text[0] in _OPENING_QUOTES):
        return "too_short"
    if _is_title(text):
        return "title"
    return None


def book_paragraphs(
    body: str,
    stats: Counter[str] | None = None,
    drop_footnote_markers: bool = True,
    dropped: list[tuple[str, str]] | None = None,
) -> list[str]:
    """The prose paragraphs of a book body (after ``strip_gutenberg``), each normalized to one line.

    Blocks are runs of non-blank lines. Rules, in order (``stats`` gains
    ``dropped_nonprose_paragraphs`` and one ``dropped_nonprose_<rule>`` per dropped block):

    - editorial tags are removed wherever they are, even across lines and blocks, keeping the
      prose around them: ``[Illustration: ...]``, ``[Picture: ...]``, ``[Sidenote: ...]``,
      ``[Footnote N: ...]``, ``[Note: ...]``, ``[Transcriber's Note: ...]``...;
    - ``back_matter``: what follows the last "THE END"/"FINIS" line when that is in the last
      ``BACK_MATTER_MAX_SHARE`` of the body;
    - ``transcriber_note``: a block opening with "Transcriber's Note", "Editor's Note",
      "Typographical errors corrected", "Errata"; when it is indented, the indented blocks right
      after it go too; when it is only a heading (one line, ending with ":" or nothing but the
      heading words), the blocks up to the next section break (``SECTION_BREAK_BLANK_LINES``
      blank lines) go too;
    - ``footnotes``: a "FOOTNOTES"/"NOTES" heading and the entries after it that open with a
      marker ("{1}", "[2]", "3.", "*");
    - lines of punctuation only ("* * * * *", "-----") go; leading heading lines go (all-caps
      lines, "CHAPTER I."/"Chapter 12"/"Book the First", a roman numeral or number alone);
      ``no_letters``: what is left has no letters (page numbers such as "2)");
    - ``contents``: a "CONTENTS" heading, or a block of >= ``TOC_MIN_LINES`` lines of which
      >= ``TOC_LINE_SHARE`` look like contents entries (see ``TOC_SHORT_LINE``);
    - ``boilerplate``: mentions of Gutenberg or e-text, URLs, e-mail addresses, producer credits
      ("Produced by ...", "Transcribed from ... by ...");
    - the lines are joined (``_join_lines``); footnote markers "[1]", "{1}", "{pg 12}" are removed
      when ``drop_footnote_markers``; ``_emphasis_`` underscores are removed (not snake_case or
      "____" blanks); the text is normalized (``normalize_text``);
    - a block that opens with a lowercase letter after one that does not end a sentence is the
      same paragraph cut by a page break: it is appended to it (``stats``: ``joined_page_breaks``);
    - prose test: a paragraph is kept when it has a lowercase letter; ends with punctuation
      (``.!?…:;,`` or a dash, then optional closing quotes/brackets, or a closing quote alone) or
      has >= ``UNPUNCTUATED_PROSE_WORDS`` words and a sentence end inside; has >=
      ``MIN_PROSE_WORDS`` words (or opens with a quotation mark: short dialogue is prose); and is
      not a title (see ``TITLE_MAX_WORDS``). Otherwise it is dropped as ``no_lowercase``,
      ``no_final_punctuation``, ``too_short`` or ``title``.

    Verse is kept (its lines joined) when its lines mostly end with punctuation. ``dropped``, when
    given, gains ``(rule, text)`` for every dropped block, to see what the rules remove.
    """
    stats = stats if stats is not None else Counter()

    def drop(reason: str, text: str) -> None:
        stats["dropped_nonprose_paragraphs"] += 1
        if dropped is not None:
            dropped.append((reason, text))
        stats[f"dropped_nonprose_{reason}"] += 1

    candidates: list[str | None] = []  # None: a dropped block that stops page-break joining
    section: str | None = None  # "note_indented", "note_heading" or "footnotes"
    blocks = _blocks(_TAG.sub("", body))
    back_matter = _back_matter_start(blocks)
    for index, block in enumerate(blocks):
        if index >= back_matter:
            drop("back_matter", "\n".join(block.lines))
            continue
        first = block.lines[0].strip()
        if (
            section == "note_indented"
            and block.indent >= 2
            and block.gap < SECTION_BREAK_BLANK_LINES
        ):
            drop("transcriber_note", "\n".join(block.lines))
            continue
        if section == "note_heading" and block.gap < SECTION_BREAK_BLANK_LINES:
            drop("transcriber_note", "\n".join(block.lines))
            continue
        if section == "footnotes" and _FOOTNOTE_ENTRY.match(first):
            drop("footnotes", "\n".join(block.lines))
            continue
        section = None
        if _NOTE_HEADING.match(first):
            if block.indent >= 2:
                section = "note_indented"
            elif _is_note_heading_only(block.lines):
                section = "note_heading"
            drop("transcriber_note", "\n".join(block.lines))
            candidates.append(None)
            continue
        if len(block.lines) == 1 and _FOOTNOTES_HEADING.match(first):
            section = "footnotes"
            drop("footnotes", "\n".join(block.lines))
            candidates.append(None)
            continue
        if len(block.lines) == 1 and _CONTENTS.match(first):
            drop("contents", "\n".join(block.lines))
            candidates.append(None)
            continue

        lines = [line for line in block.lines if any(char.isalnum() for char in line)]
        while lines and _is_heading_line(lines[0]):
            lines.pop(0)
        if not any(_has_letters(line) for line in lines):
            # headings, page numbers, rules: transparent for page-break joining
            drop("no_letters", "\n".join(block.lines))
            continue
        if _is_toc_block(lines):
            drop("contents", "\n".join(block.lines))
            candidates.append(None)
            continue
        text = _join_lines(lines)
        if _is_boilerplate(text):
            drop("boilerplate", "\n".join(block.lines))
            candidates.append(None)
            continue
        if drop_footnote_markers and ("[" in text or "{" in text):
            text = _FOOTNOTE_MARKER.sub("", text)
        if "_" in text:
            text = _EMPHASIS.sub("", text)
        text = normalize_text(text)
        if not text:
            drop("no_letters", "\n".join(block.lines))
            continue
        previous = candidates[-1] if candidates else None
        if previous is not None and text[0].islower() and not _ends_with(_ENDS_SENTENCE, previous):
            candidates[-1] = f"{previous} {text}"
            stats["joined_page_breaks"] += 1
            continue
        candidates.append(text)

    paragraphs: list[str] = []
    for text in candidates:
        if text is None:
            continue
        problem = _prose_problem(text)
        if problem:
            drop(problem, text)
        else:
            paragraphs.append(text)
    return paragraphs


# ---------------------------------------------------------------------------------------------
# The whole book
# ---------------------------------------------------------------------------------------------


def clean_book(data: bytes, source: str, stats: Counter[str]) -> tuple[list[str], list[Reject]]:
    """The prose paragraphs of one PG book file, and its Rejects.

    ``stats`` gains ``books``, ``encoding_<label>`` (see ``decode_book``), one of
    ``boilerplate_stripped_markers``/``boilerplate_stripped_small_print``/``boilerplate_not_found``,
    ``book_paragraphs``, and the ``book_paragraphs`` drop counts (``dropped_nonprose_paragraphs``).
    Rejects: ``boilerplate_not_found`` (the text was kept whole, header included) and
    ``empty_book`` (no prose paragraph left; the book yields nothing).
    """
    stats["books"] += 1
    rejects: list[Reject] = []
    text, label = decode_book(data)
    stats[f"encoding_{label}"] += 1
    body, how = strip_gutenberg(text)
    if how == "none":
        stats["boilerplate_not_found"] += 1
        rejects.append(Reject.of("boilerplate_not_found", source, text.lstrip()))
    else:
        stats[f"boilerplate_stripped_{how}"] += 1
    paragraphs = book_paragraphs(body, stats)
    stats["book_paragraphs"] += len(paragraphs)
    if not paragraphs:
        stats["empty_book"] += 1
        rejects.append(
            Reject.of("empty_book", f"{source}: {len(text)} characters", body.strip() or text)
        )
    return paragraphs, rejects
