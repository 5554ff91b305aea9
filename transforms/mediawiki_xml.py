"""MediaWiki XML export dumps (``pages-articles``, schema 0.3–0.11) → article pages.

Streams the dump in constant memory: an ``XMLPullParser`` is fed fixed-size chunks of bytes, each
``<revision>`` is cleared once its text is taken and each ``<page>`` once it is judged, so memory is
bounded by one revision's text whatever the dump's size. Elements are matched by local name (the
namespace URI changes with every schema version). Bytes go to the parser undecoded, so the
document's declared encoding (UTF-8, UTF-16, ...) is honoured; the caller opens ``.bz2``/``.gz``/
``.xz`` files with the matching decompressor.

A page is kept when it is an article; every page dropped is counted in ``stats`` under its reason,
checked in this order (a dropped page is never yielded; these are routine, not bad input):

- ``dropped_namespace``: not namespace 0. ``<ns>`` decides when present (schema ≥ 0.6); otherwise
  the title prefix before ``:`` is looked up among the ``<siteinfo><namespaces>`` names and the
  canonical English ones (``Talk``, ``User``, ``File``, ``Image``, ``Template``, ``Category``,
  ``Wikipedia``, ...; :data:`CANONICAL_NAMESPACES`), which every wiki accepts; without
  ``<siteinfo>``, only the canonical English names are known and any other title is namespace 0;
- ``dropped_redirect``: a ``<redirect>`` element (schema ≥ 0.4, every localized wiki), or text
  that starts with one of ``redirect_words`` (default ``#REDIRECT``, case-insensitive; localized
  magic words such as ``#WEITERLEITUNG`` are recognised only when passed in);
- ``dropped_empty``: no text, or only whitespace (stub dumps, deleted revisions);
- ``dropped_disambiguation`` (unless ``keep_disambiguation``): the text uses one of
  ``disambiguation_templates`` (:data:`DISAMBIGUATION_TEMPLATES`: enwiki's disambiguation template
  and its redirects/variants; set-index and surname/given-name lists are articles and kept; pass
  a localized wiki's template names, e.g. ltgwiki's ``Zeimeibu škiršona``) or the
  ``__DISAMBIG__`` magic word. Names compare case-insensitively, ``_`` as a space.

Kept pages count ``pages_kept``. A stream that breaks off or is corrupt (XML ``ParseError``,
decompression error, end of data inside the document) keeps every page whose ``</page>`` was
read, then yields one ``Reject("truncated_dump", ...)``, counts ``truncated_dump`` and stops; it
never raises for bad data.
"""

from __future__ import annotations

import functools
import lzma
import re
import zlib
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import BinaryIO
from xml.etree.ElementTree import Element, ParseError, XMLPullParser

from transforms.rejects import Reject

CHUNK_BYTES = 1 << 16

#: Namespace names every MediaWiki accepts whatever its language (canonical names and aliases).
CANONICAL_NAMESPACES: dict[str, int] = {
    "media": -2,
    "special": -1,
    "talk": 1,
    "user": 2,
    "user talk": 3,
    "project": 4,
    "wikipedia": 4,
    "project talk": 5,
    "wikipedia talk": 5,
    "file": 6,
    "image": 6,
    "file talk": 7,
    "image talk": 7,
    "mediawiki": 8,
    "mediawiki talk": 9,
    "template": 10,
    "template talk": 11,
    "help": 12,
    "help talk": 13,
    "category": 14,
    "category talk": 15,
    "portal": 100,
    "portal talk": 101,
    "book": 108,
    "book talk": 109,
    "draft": 118,
    "draft talk": 119,
    "timedtext": 710,
    "timedtext talk": 711,
    "module": 828,
    "module talk": 829,
}

#: enwiki's disambiguation-page templates (names lower-cased, ``_`` as space). Not here on purpose:
#: ``set index article``/``sia``, ``surname``, ``given name``, ``shipindex`` (set-index articles
#: are articles) and ``disambiguation needed`` (an inline cleanup tag inside articles).
DISAMBIGUATION_TEMPLATES: frozenset[str] = frozenset(
    {
        "disambiguation",
        "disambig",
        "disamb",
        "dab",
        "dis",
        "disambiguation page",
        "disambiguation cleanup",
        "disambig-cleanup",
        "dab cleanup",
        "hndis",
        "hndab",
        "human name disambiguation",
        "human name disambiguation cleanup",
        "geodis",
        "geo-dis",
        "place name disambiguation",
        "numberdis",
        "number disambiguation",
        "letter disambiguation",
        "letter-number combination disambiguation",
        "letter-numbercombdisambig",
        "airport disambiguation",
        "call sign disambiguation",
        "caselaw disambiguation",
        "chinese title disambiguation",
        "genus disambiguation",
        "hospital disambiguation",
        "mathematical disambiguation",
        "mathdab",
        "road disambiguation",
        "school disambiguation",
        "species latin name disambiguation",
    }
)

REDIRECT_WORDS: tuple[str, ...] = ("#redirect",)

_DISAMBIG_MAGIC = "__DISAMBIG__"
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_TEMPLATE_NAME = re.compile(r"\{\{\s*([^{}|\n]+?)\s*(?:\||\}\})")
_SPACES = re.compile(r"[\s_]+")
_INTEGER = re.compile(r"\s*-?\d+\s*")
_DECOMPRESSION_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


@dataclass(frozen=True)
class WikiPage:
    """One article: its page id, title, namespace (always 0 when yielded) and latest wikitext."""

    page_id: str
    title: str
    namespace: int
    text: str


def _normalize_name(name: str) -> str:
    return _SPACES.sub(" ", name).strip().lower()


def template_names(text: str) -> set[str]:
    """The normalized names (lower case, ``_`` as space, no ``Template:``) of ``text``'s templates."""
    if "<!--" in text:
        text = _COMMENT.sub("", text)
    return {_template_name(match.group(1)) for match in _TEMPLATE_NAME.finditer(text)}


@functools.lru_cache(maxsize=8192)
def _template_name(raw: str) -> str:
    """A template name as written, normalized (remembered: a page names a few templates often)."""
    name = _normalize_name(raw)
    return name[len("template:") :].strip() if name.startswith("template:") else name


def is_disambiguation(text: str, templates: Collection[str] = DISAMBIGUATION_TEMPLATES) -> bool:
    """Whether ``text`` uses one of ``templates`` (any case) or the ``__DISAMBIG__`` magic word."""
    return _is_disambiguation(text, {_normalize_name(t) for t in templates})


def _is_disambiguation(text: str, normalized_templates: set[str]) -> bool:
    return _DISAMBIG_MAGIC in text or not normalized_templates.isdisjoint(template_names(text))


def _starts_lowered(text: str, prefixes: tuple[str, ...], longest: int) -> bool:
    """``text.lstrip().lower().startswith(prefixes)`` (``prefixes`` lower case, none longer than
    ``longest``) without lowering a whole page: when the first ``longest`` characters are ASCII,
    only they are lowered (ASCII lowers character by character); otherwise the whole text is,
    as ``str.lower``'s context rules (a final sigma) may look past them."""
    stripped = text.lstrip()
    head = stripped[:longest]
    if head.isascii():
        return head.lower().startswith(prefixes)
    return stripped.lower().startswith(prefixes)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _namespace_of(title: str, names: dict[str, int]) -> int:
    prefix, colon, _ = title.partition(":")
    if not colon:
        return 0
    return names.get(_normalize_name(prefix), 0)


class _Page:
    """The fields of the page being read."""

    def __init__(self) -> None:
        self.page_id = ""
        self.title = ""
        self.ns: int | None = None
        self.redirect = False
        self.text: str | None = None  # latest revision's text so far
        self.revision_text: str | None = None


def iter_pages(
    stream: BinaryIO,
    source: str,
    stats: Counter[str],
    *,
    keep_disambiguation: bool = False,
    disambiguation_templates: Collection[str] = DISAMBIGUATION_TEMPLATES,
    redirect_words: Collection[str] = REDIRECT_WORDS,
    report_drops: bool = False,
) -> Iterator[WikiPage | Reject]:
    """Yields the articles of one dump in file order, then a Reject if the dump is damaged.

    ``stream`` yields the XML bytes (already decompressed). When a page has several
    ``<revision>``s the last one's text is used. The Reject's location is
    ``<source>:byte <n>`` (decompressed bytes read when the damage showed, plus the parser's
    line and column for XML errors); its excerpt names the error and the last complete page.
    """
    names = dict(CANONICAL_NAMESPACES)
    site_names: dict[str, int] = {}
    redirect_prefixes = tuple(w.lower() for w in redirect_words)
    longest_prefix = max(map(len, redirect_prefixes), default=0)
    disambiguation = {_normalize_name(t) for t in disambiguation_templates}
    parser = XMLPullParser(events=("start", "end"))
    stack: list[Element] = []
    page: _Page | None = None
    consumed = 0
    last_title: str | None = None

    def judge(p: _Page) -> WikiPage | Reject | None:
        ns = p.ns if p.ns is not None else _namespace_of(p.title, names)
        text = p.text or ""
        if ns != 0:
            reason = "dropped_namespace"
        elif p.redirect or _starts_lowered(text, redirect_prefixes, longest_prefix):
            reason = "dropped_redirect"
        elif not text or text.isspace():
            reason = "dropped_empty"
        elif not keep_disambiguation and _is_disambiguation(text, disambiguation):
            reason = "dropped_disambiguation"
        else:
            stats["pages_kept"] += 1
            return WikiPage(p.page_id, p.title, ns, text)
        stats[reason] += 1
        if report_drops:
            return Reject.of(reason, f"{source}:page {p.page_id}", p.title)
        return None

    def handle(event: str, elem: Element) -> WikiPage | Reject | None:
        nonlocal page, last_title
        if event == "start":
            stack.append(elem)
            if _local(elem.tag) == "page":
                page = _Page()
            return None
        stack.pop()
        name = _local(elem.tag)
        parent = _local(stack[-1].tag) if stack else ""
        result = None
        if name == "namespace" and parent == "namespaces" and elem.text:
            key = elem.get("key", "")
            if key.lstrip("-").isdigit():
                site_names[_normalize_name(elem.text)] = int(key)
        elif name == "siteinfo":
            names.update(site_names)
            elem.clear()
        elif page is None:
            pass
        elif parent == "page":
            if name == "title":
                page.title = elem.text or ""
            elif name == "ns" and _INTEGER.fullmatch(elem.text or ""):
                page.ns = int(elem.text or "")
            elif name == "id":
                page.page_id = (elem.text or "").strip()
            elif name == "redirect":
                page.redirect = True
            elif name in ("revision", "upload"):
                if name == "revision":
                    page.text = page.revision_text
                    page.revision_text = None
                elem.clear()
        elif name == "text" and parent == "revision":
            page.revision_text = elem.text or ""
        if name == "page" and page is not None:
            result = judge(page)
            last_title = page.title
            page = None
            elem.clear()
            if stack:
                stack[-1].remove(elem)
        return result

    def damaged(error: Exception) -> Reject:
        stats["truncated_dump"] += 1
        where = f"{source}:byte {consumed}"
        position = getattr(error, "position", None)
        if position:
            where += f" (line {position[0]}, column {position[1]})"
        after = "no complete page" if last_title is None else f"last complete page {last_title!r}"
        return Reject.of("truncated_dump", where, f"{type(error).__name__}: {error}; {after}")

    while True:
        try:
            chunk = stream.read(CHUNK_BYTES)
        except _DECOMPRESSION_ERRORS as e:
            yield damaged(e)
            return
        try:
            if chunk:
                consumed += len(chunk)
                parser.feed(chunk)
            else:
                parser.close()
            for event, elem in parser.read_events():
                kept = handle(event, elem)
                if kept is not None:
                    yield kept
        except ParseError as e:
            # Events before the error were handled: every complete page is already out.
            yield damaged(e)
            return
        if not chunk:
            return
