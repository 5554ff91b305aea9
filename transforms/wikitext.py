"""Wikitext → plain prose paragraphs, as the BERT paper used Wikipedia: text passages only.

:func:`wikitext_to_paragraphs` parses with mwparserfromhell and renders every node itself:

- kept as text: paragraphs (lines joined by a space, split at blank lines and at anything dropped
  below), wikilinks as their anchor text (the target when there is none, the pipe trick
  ``[[Paris (band)|]]`` → ``Paris``), external links ``[url text]`` as ``text``, the content of
  formatting and layout tags (``<b>``, ``<i>``, ``<span>``, ``<sup>``, ``<div>``, ...), ``<nowiki>``
  content verbatim, ``<br>`` as a space, HTML entities decoded (``&lt;b&gt;`` shows as ``<b>``,
  as on the wiki);
- removed: ``File:``/``Image:``/``Media:``/``Category:`` links (matched case-insensitively on the
  prefix before ``:``, plus ``extra_drop_namespaces`` for a localized wiki, e.g. ltgwiki's
  ``Fails``, ``Kategoreja``; without them a localized file link is still recognised by its file
  extension or image options such as ``thumb``/``250px``, and a line holding nothing but
  ``[[Prefix:...]]`` links — a localized category block — is dropped); interlanguage links (an
  all-lowercase prefix of 2–3 letters with optional ``-variant`` parts: ``fr:``, ``zh-yue:``,
  ``be-x-old:``, and ``simple:``; ``[[Ys: The Vanished Omens]]`` is an article); bare URLs and ``[url]`` without text; ``<ref>``, tables (``{| |}`` and ``<table>``),
  ``<gallery>``, ``<math>``, ``<chem>``/``<ce>``, ``<score>``, ``<timeline>``,
  ``<syntaxhighlight>``/``<source>``/``<pre>``, ``<poem>``, HTML lists and the other tags in
  :data:`DROPPED_TAGS`; comments; ``{{{arguments}}}``; magic words like ``__TOC__``; every
  template except the inline ones (``transforms.wiki_templates``);
- lines dropped whole: headings, list items and definition lines (``*``, ``#``, ``;``, ``:``),
  lines that start with a space (preformatted), leftover table rows (``{|``, ``|``, ``!``);
- inline templates render the text they show in running prose, so no holes remain:
  ``{{convert|5|km|mi}}`` → ``5 km``, ``{{lang|fr|texte}}`` → ``texte``, ``{{nowrap|x}}`` → ``x``,
  ``{{birth date|1950|5|17}}`` → ``May 17, 1950`` (``df=y``: ``17 May 1950``),
  ``{{frac|1|2}}`` → ``1/2``, ``{{IPA|...}}`` → its text, ``{{as of|2010}}`` → ``As of 2010``, ...
  (``transforms.wiki_templates.INLINE_TEMPLATES`` lists them all; ``lang-xx``, ``IPA-xx`` and ``script/xx`` go by
  prefix). Values computed at render time (``{{age}}``, ``{{inflation}}``) are not reproduced.

Then bold/italic quotes and stray HTML tags are stripped, whitespace normalized, spaces before
``,.;:!?)`` removed, and brackets left empty or holding only punctuation (``()``, ``( , )``,
``(; born``) cleaned. Paragraphs with no letter are dropped, and so (``drop_unparsed``) are
paragraphs still holding ``[[``, ``]]``, ``{{`` or ``}}``: markup mwparserfromhell could not match
(an unbalanced caption, a broken table), which would otherwise leak as text (about 0.1% of
paragraphs on the real enwiki/ltgwiki samples). A ``<nowiki>[[x]]</nowiki>`` paragraph goes too.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Collection, Iterator

import mwparserfromhell
from mwparserfromhell.nodes import (
    Argument,
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from transforms.text_normalization import collapse_whitespace
from transforms.wiki_templates import INLINE_PREFIXES, INLINE_TEMPLATES, inline_renderer

#: Link prefixes (before ``:``, any case) whose links are dropped: media, files and categories.
DROP_LINK_NAMESPACES: frozenset[str] = frozenset({"file", "image", "media", "category"})

#: Tags removed with their content. Block-level ones also end the paragraph.
DROPPED_TAGS: frozenset[str] = frozenset(
    {
        "ref",
        "references",
        "math",
        "chem",
        "ce",
        "score",
        "hiero",
        "timeline",
        "gallery",
        "imagemap",
        "syntaxhighlight",
        "source",
        "pre",
        "poem",
        "graph",
        "mapframe",
        "maplink",
        "inputbox",
        "categorytree",
        "templatedata",
        "templatestyles",
        "includeonly",
        "table",
        "ul",
        "ol",
        "dl",
        "li",
        "dt",
        "dd",
        "caption",
        "tr",
        "td",
        "th",
        "style",
        "script",
    }
)
_INLINE_DROPPED_TAGS = frozenset({"ref", "math", "chem", "ce", "score", "hiero", "templatestyles"})
_BLOCK_TAGS = frozenset({"div", "center", "blockquote", "p", "hr"})

#: Interwiki prefixes to sister projects: ``[[wikt:word]]`` without anchor text shows ``word``.
INTERWIKI_PREFIXES: frozenset[str] = frozenset(
    {
        "w",
        "wikipedia",
        "wikt",
        "wiktionary",
        "s",
        "wikisource",
        "q",
        "wikiquote",
        "b",
        "wikibooks",
        "n",
        "wikinews",
        "v",
        "wikiversity",
        "voy",
        "wikivoyage",
        "species",
        "wikispecies",
        "c",
        "commons",
        "d",
        "wikidata",
        "m",
        "meta",
        "mw",
    }
)

_DROP = "\x00"  # marks a line to drop whole
_PARAGRAPH_BREAK = "\n\n"
_NS_LINK_OPEN, _NS_LINK_CLOSE = "\x01", "\x02"  # around [[Prefix:Title]] without anchor text
_NS_LINKS_ONLY = re.compile(r"\s*(?:\x01[^\x02]*\x02\s*)+")
_NS_LINK_MARKS = re.compile(r"[\x01\x02]")
_MEDIA_FILE = re.compile(
    r"\.(?:jpe?g|png|gif|svg|tiff?|webp|xcf|bmp|pdf|djvu|ogg|oga|ogv|webm|mp3|mp4|wav|flac|midi?)\s*$",
    re.IGNORECASE,
)
_IMAGE_OPTION = re.compile(
    r"\s*(?:thumb|thumbnail|frame|framed|frameless|border|upright|left|right|center|centre|none"
    r"|\d*(?:x\d+)?\s*px|(?:upright|alt|link|page|class|lang)\s*=.*)\s*",
    re.IGNORECASE,
)
_INTERLANGUAGE = re.compile(r"[a-z]{2,3}(?:-[a-z0-9]+)*|simple")
# A line starting with a space, within one text node (a cut mark is a node boundary).
_PREFORMATTED = re.compile(r"(?<=\n)[ \t]+(?=[^\s\x03\x04])")
_DROPPED_LINE_STARTS = ("*", "#", ":", ";", "{|", "|", "!")
"""Lines dropped whole by their start: list items and definitions, leftover table rows."""
_REF = re.compile(r"<ref\b[^>]*/>|<ref\b[^>]*>.*?(?:</ref\s*>|$)", re.IGNORECASE | re.DOTALL)
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.DOTALL)
_HTML_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>]*)?/?>")
_QUOTES = re.compile(r"'{2,}")
_MAGIC_WORD = re.compile(r"__[A-Z]+__")
_WHITESPACE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)\]])")
_SPACE_AFTER_OPEN = re.compile(r"([(\[])\s+")
_PUNCT_AFTER_OPEN = re.compile(r"([(\[])[,;:\s]+")
_PUNCT_BEFORE_CLOSE = re.compile(r"[,;:\s]+([)\]])")
_EMPTY_BRACKETS = re.compile(r"\s*(?:\(\s*[-–—,;:\s]*\)|\[\s*[-–—,;:\s]*\])")
_REPEATED_COMMA = re.compile(r"([,;])(?:\s*\1)+")
_COMMA_BEFORE_STOP = re.compile(r"[,;:]+(?=[.!?](?:\s|$))")
_LETTER = re.compile(r"[^\W\d_]")
# What the bracket tidying loop can act on: an opening bracket before space, punctuation or a
# close, or space/punctuation before a closing one. Without it the loop changes nothing.
_BRACKET_TIDY = re.compile(r"[(\[][-–—,;:\s)\]]|[,;:\s][)\]]")


@functools.lru_cache(maxsize=8192)
def _normalized_template_name(raw: str) -> str:
    """A template's name as :data:`INLINE_TEMPLATES` keys it: no comments or cut marks, lower
    case, ``_`` as a space, whitespace runs as one space, no ``Template:`` prefix. Remembered: a
    page names the same few templates many times (~10 uses per distinct name)."""
    name = _COMMENT.sub("", raw).replace("_", " ")
    if "\x03" in name or "\x04" in name:
        name = _MARKS.sub("", name)
    name = _WHITESPACE.sub(" ", name).strip().lower()
    return name[len("template:") :].strip() if name.startswith("template:") else name


def _template_name(template: Template) -> str:
    return _normalized_template_name(str(template.name))


def _param_value(value: str) -> str:
    """A rendered parameter value as the renderers see it: one line, cut marks gone."""
    if "\x03" in value or "\x04" in value:
        value = value.replace("\x03", "").replace("\x04", " ")
    return _WHITESPACE.sub(" ", value.replace(_DROP, "")).strip()


# --- rendering --------------------------------------------------------------------------------


def _is_media_link(target: str, caption: str | None) -> bool:
    """A file link under a namespace name we do not know: by its extension or image options."""
    if _MEDIA_FILE.search(target):
        return True
    return caption is not None and any(
        _IMAGE_OPTION.fullmatch(part) for part in caption.split("|")[:-1]
    )


def _is_dropped_link(title: str, caption: str | None, drop_namespaces: frozenset[str]) -> bool:
    """Whether ``[[title|caption]]`` renders to nothing: a file, media, category or
    interlanguage link (``caption`` None: no ``|``)."""
    target = title.strip()
    if target.startswith(":"):
        return False
    prefix, colon, rest = target.partition(":")
    if not colon:
        return False
    prefix = prefix.strip()
    return (
        _WHITESPACE.sub(" ", prefix.replace("_", " ")).lower() in drop_namespaces
        or bool(_INTERLANGUAGE.fullmatch(prefix))
        or _is_media_link(rest, caption)
    )


def _link_text(title: str, caption: str | None, *, pipe_trick: bool = False) -> str:
    """What a link that is not dropped (:func:`_is_dropped_link`) shows: ``caption`` (rendered;
    None: no ``|``), or with ``pipe_trick`` (``[[Paris (band)|]]``) the title's short form."""
    target = title.strip()
    leading_colon = target.startswith(":")
    target = target.lstrip(":").strip()
    prefix, colon, rest = target.partition(":")
    interwiki = bool(colon) and prefix.strip().lower() in INTERWIKI_PREFIXES
    if pipe_trick:  # [[Paris (band)|]] → Paris
        title = rest if colon else target
        shown = re.sub(r"\s*\([^()]*\)\s*$", "", title.split(",")[0]).strip()
    elif caption is not None:
        shown = caption.strip()
    else:
        page, _, section = (rest if interwiki else target).partition("#")
        shown = (page or section).replace("_", " ").strip()
    if colon and not leading_colon and not interwiki:
        # Maybe a namespace this wiki localizes (a category with its sort key): a line of
        # nothing but such links is dropped.
        return _NS_LINK_OPEN + shown + _NS_LINK_CLOSE
    return shown


class _Renderer:
    def __init__(self, drop_namespaces: frozenset[str]) -> None:
        self.drop_namespaces = drop_namespaces

    def code(self, wikicode: Wikicode) -> str:
        return "".join(self.node(n) for n in wikicode.nodes)

    def node(self, node: Node) -> str:
        if isinstance(node, Text):
            return _PREFORMATTED.sub(_DROP, node.value)  # cut marks: removed after rendering
        if isinstance(node, Wikilink):
            return self._wikilink(node)
        if isinstance(node, Template):
            return self._template(node)
        if isinstance(node, Tag):
            return self._tag(node)
        if isinstance(node, HTMLEntity):
            return str(node)  # decoded after stray tags are stripped: "&lt;b&gt;" shows "<b>"
        if isinstance(node, ExternalLink):
            return self.code(node.title) if node.brackets and node.title is not None else ""
        if isinstance(node, Heading):
            return f"\n{_DROP}\n"
        if isinstance(node, Comment | Argument):
            return ""
        return str(node)

    def _wikilink(self, link: Wikilink) -> str:
        title = str(link.title)
        raw = None if link.text is None else str(link.text)
        if _is_dropped_link(title, raw, self.drop_namespaces):
            return ""
        if not raw:
            return _link_text(title, None, pipe_trick=raw == "")
        return _link_text(title, self.code(link.text))

    def _template(self, template: Template) -> str:
        name = _template_name(template)
        if name.startswith("formatnum:"):  # {{formatnum:1234}}: the value is part of the name
            return self.code(template.name).strip().partition(":")[2].strip()
        render = inline_renderer(name)
        if render is None:
            return ""
        positional: dict[int, str] = {}
        named: dict[str, str] = {}
        for param in template.params:
            key = str(param.name).strip()
            value = _param_value(self.code(param.value))
            if key.isdigit():
                positional[int(key)] = value
            else:
                named[key.lower()] = value
        pos = [positional.get(i, "") for i in range(1, max(positional, default=0) + 1)]
        return render(pos, named)

    def _tag(self, tag: Tag) -> str:
        if tag.wiki_markup in ("*", "#", ";", ":"):
            return _DROP  # a list item or definition line
        name = str(tag.tag).strip().lower()
        if name in DROPPED_TAGS:
            return "" if name in _INLINE_DROPPED_TAGS else _PARAGRAPH_BREAK
        if name == "br":
            return " "  # a line break inside the paragraph (or list item, table cell)
        if name == "nowiki":
            return str(tag.contents) if tag.contents is not None else ""
        inner = self.code(tag.contents) if tag.contents is not None else ""
        if name in _BLOCK_TAGS or tag.wiki_markup == "----":
            return _PARAGRAPH_BREAK + inner + _PARAGRAPH_BREAK
        return inner


# --- pre-pass: cut what never becomes prose before the parser sees the page --------------------

_REMOVED = "\x03"  # where a node rendering to "" was cut (a node boundary for preformatted lines)
_BREAK = "\x04"  # where a block rendering to a paragraph break was cut
_MARKS = re.compile(r"[\x03\x04]")


def _prefix_tree(words: Collection[str]) -> str:
    """A regex alternation of ``words`` (literals) that shares their prefixes:
    ``ref|references|math`` → ``(?:math|ref(?:erences)?)``. It matches what the flat
    alternation, longest first, matches, and backtracks in the same order (a greedy ``?`` tries
    the longer word first); but the regex engine compares each prefix once. A flat alternation
    under IGNORECASE cannot skip a branch by its first letter: it tried all ~35 tag names at
    every ``<``."""
    heads: dict[str, list[str]] = {}
    for word in sorted(set(words)):
        heads.setdefault(word[:1], []).append(word[1:])
    optional = "" in heads
    branches = [re.escape(h) + _prefix_tree(tails) for h, tails in heads.items() if h]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 and not optional else f"(?:{'|'.join(branches)})"
    return body + ("?" if optional else "")


_TAG_NAMES = _prefix_tree(DROPPED_TAGS - {"table"})
# An HTML table with no table inside: cut innermost first, as tables nest.
_INNERMOST_TABLE = re.compile(
    r"<table(?:\s[^<>]*)?(?<!/)>(?:(?!<table[\s>]).)*?</table\s*>", re.IGNORECASE | re.DOTALL
)
_TABLE_OPEN = re.compile(r"<table", re.IGNORECASE)
"""``"<table" in text.lower()`` without lowering a whole page (~9 ms per MB of wikitext)."""
_BLOCK_TAG_EDGE = re.compile(r"</?(?:div|center|blockquote|p|hr)\b[^<>]*>", re.IGNORECASE)
# ``<name/>`` or ``<name attributes/>``: the attributes taken whole (possessive), then a
# look back for the "/" (backtracking through the attributes of every ``<ref name=...>`` to try
# "/>" at each character was most of this pattern's time).
_SELF_CLOSED_TAG = re.compile(rf"<({_TAG_NAMES})(?:/|\s[^<>]*+(?<=/))>", re.IGNORECASE)
# The content up to the first ``</name>`` (any case, spaces before ">"), taken in runs of
# non-"<" characters each ending at a "<" (``.*?`` stepped one character at a time, ~4× slower).
_PAIRED_TAG = re.compile(
    rf"<({_TAG_NAMES})(?:\s[^<>]*+)?(?<!/)>(?:[^<]*+<)+?/\1\s*>", re.IGNORECASE
)
_CLOSED_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
"""What :func:`_cut_closed_comments` cuts (the rule its test compares with)."""
_BRACES = re.compile(r"\{\{|\}\}")
"""What :func:`_brace_marks` finds (the rule its test compares with)."""
_BRACKETS = re.compile(r"\[\[|\]\]")
_TABLE_EDGE = re.compile(r"^[ \t]*(\{\||\|\})", re.MULTILINE)
"""A table's start or end at the start of a line (spaces or tabs before it); used for the
text's first line, and the rule :func:`_table_edges` is tested against."""
_TABLE_EDGE_AFTER_NEWLINE = re.compile(r"\n[ \t]*(\{\||\|\})")
"""The same after a newline: a literal first character, which the regex engine skips to (it
tried ``^`` at every position, ~2× slower); :func:`_table_edges` adds the text's first line."""
_BAD_NAME = re.compile(r"[\[\]{}<>\n]")


def _cut(text: str, spans: list[tuple[int, int, str]]) -> str:
    """``text`` with the outermost of ``spans`` (start, end, replacement) replaced."""
    if not spans:
        return text
    spans.sort()
    pieces: list[str] = []
    position = 0
    for start, end, replacement in spans:
        if start < position:
            continue  # inside a span already cut
        pieces.append(text[position:start])
        pieces.append(replacement)
        position = end
    pieces.append(text[position:])
    return "".join(pieces)


def _brace_marks(text: str) -> Iterator[tuple[int, bool]]:
    """(position, opens) of each ``{{`` or ``}}`` in ``text``, left to right without overlap:
    what ``_BRACES.finditer`` finds, by ``str.find`` (the regex tried both pairs at every
    position of a page, ~3× slower). A ``{{`` and a ``}}`` never overlap, so the two are
    searched apart."""
    find = text.find

    def next_mark(char: str, position: int) -> int:
        found = find(char, position)  # a single character: the fastest scan
        if found >= 0 and not text.startswith(char, found + 1):  # a lone brace: find the pair
            found = find(char * 2, found + 1)
        return found

    opened, closed = next_mark("{", 0), next_mark("}", 0)
    while opened >= 0 or closed >= 0:
        if closed < 0 or 0 <= opened < closed:
            yield opened, True
            opened = next_mark("{", opened + 2)
        else:
            yield closed, False
            closed = next_mark("}", closed + 2)


def _balanced_braces(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of every balanced ``{{``...``}}`` pair, innermost first."""
    stack: list[int] = []
    for position, opens in _brace_marks(text):
        if opens:
            stack.append(position)
        elif stack:
            yield stack.pop(), position + 2


@functools.lru_cache(maxsize=8192)
def is_inline_template(name: str) -> bool:
    """Whether the template ``name`` (as written) renders text in running prose (remembered,
    as its normalized name is)."""
    name = _normalized_template_name(name)
    return (
        name in INLINE_TEMPLATES
        or name.startswith("formatnum:")
        or any(name.startswith(p) for p, _ in INLINE_PREFIXES)
    )


def _cut_templates(text: str) -> str:
    spans = []
    for start, end in _balanced_braces(text):
        bar = text.find("|", start + 2, end - 2)  # the name: up to the first "|" inside
        name = text[start + 2 : bar if bar >= 0 else end - 2]
        if "{{" in name or _BAD_NAME.search(name.strip()):
            continue  # a computed or invalid name: the parser decides
        if not is_inline_template(name):
            spans.append((start, end, _REMOVED))
    return _cut(text, spans)


_PREFIXED_LINK = re.compile(r"\[\[[^\[\]|\n:]*:")


def _link_end(text: str, start: int) -> int | None:
    """The end of the link opening at ``start`` (nested links inside), None when unclosed."""
    depth = 0
    for match in _BRACKETS.finditer(text, start):
        depth += 1 if match.group() == "[[" else -1
        if depth == 0:
            return match.end()
    return None


def _cut_links(text: str, drop_namespaces: frozenset[str]) -> str:
    spans = []
    position = 0
    for candidate in _PREFIXED_LINK.finditer(text):
        start = candidate.start()
        if start < position:
            continue  # inside a link already cut
        end = _link_end(text, start)
        if end is None:
            continue
        inner = text[start + 2 : end - 2]
        if inner.count("[") > inner.count("]") and text.startswith("]", end):
            end += 1  # "[[File:x|[http://u caption]]]": the first "]" closes the URL link
            inner = text[start + 2 : end - 2]
        target, pipe, caption = inner.partition("|")
        if _BAD_NAME.search(target) or not _is_dropped_link(
            target, caption if pipe else None, drop_namespaces
        ):
            continue
        spans.append((start, end, _REMOVED))
        position = end
    return _cut(text, spans)


def _table_edges(text: str) -> Iterator[re.Match[str]]:
    """The matches of ``_TABLE_EDGE.finditer(text)`` (group 1: ``{|`` or ``|}``)."""
    first = _TABLE_EDGE.match(text)
    if first is not None:
        yield first
    yield from _TABLE_EDGE_AFTER_NEWLINE.finditer(text)


def _cut_tables(text: str) -> str:
    spans = []
    depth, start = 0, 0
    for match in _table_edges(text):
        if match.group(1) == "{|":
            if depth == 0:
                start = match.start(1)
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                spans.append((start, match.end(1), _BREAK))
    return _cut(text, spans)


def strip_non_prose(text: str, drop_namespaces: frozenset[str] = DROP_LINK_NAMESPACES) -> str:
    """``text`` with what never renders as prose cut before parsing: closed comments, the
    :data:`DROPPED_TAGS` with their content, balanced templates other than the inline ones,
    file/category/interlanguage links (nested links inside) and ``{| |}`` tables. Each cut leaves
    the mark of what the renderer would have made of it (nothing, or a paragraph break), so
    rendering the rest gives the page's paragraphs; the edges of block tags (``<div>``,
    ``<blockquote>``, ...) become paragraph breaks, so a block may span blank lines. Unbalanced
    markup is left for the parser; so are templates when the page has ``{{{arguments}}}``."""
    text = _cut_closed_comments(text)
    if "<" in text:
        text = _SELF_CLOSED_TAG.sub(_tag_mark, text)
        while _TABLE_OPEN.search(text):  # first: a table's rows and cells go with it
            text, cut = _INNERMOST_TABLE.subn(_BREAK, text)
            if not cut:
                break
        text = _PAIRED_TAG.sub(_tag_mark, text)
        text = _BLOCK_TAG_EDGE.sub(_BREAK, text)
    if "{{" in text and "{{{" not in text:
        text = _cut_templates(text)
    if "[[" in text:
        text = _cut_links(text, drop_namespaces)
    if "{|" in text:
        text = _cut_tables(text)
    return text


def _cut_closed_comments(text: str) -> str:
    """``_CLOSED_COMMENT.sub(_REMOVED, text)`` by ``str.find``: each ``<!--`` up to the first
    ``-->`` after it becomes a cut mark; one left open stays (and no later one can close)."""
    start = text.find("<!--")
    if start < 0:
        return text
    pieces: list[str] = []
    position = 0
    while start >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            break
        pieces += (text[position:start], _REMOVED)
        position = end + 3
        start = text.find("<!--", position)
    if not pieces:
        return text
    pieces.append(text[position:])
    return "".join(pieces)


def _tag_mark(match: re.Match[str]) -> str:
    return _REMOVED if match.group(1).lower() in _INLINE_DROPPED_TAGS else _BREAK


# --- rendering a page: the fast path for plain segments, the parser for the rest --------------

_SEGMENT_BREAK = re.compile(r"\n\s*\n")
# After a newline: spaces, then the start of a text node (not a link, template, bold/italic,
# entity or cut mark): the line is preformatted, as _PREFORMATTED decides inside one text node.
_FAST_PREFORMATTED = re.compile(
    r"(?<=\n)[ \t]+(?=[^\s\x03\x04'&\[{<]|'(?!')|&(?!#?\w+;)|\{(?!\{)|<(?![A-Za-z/!])"
    r"|\[(?!\[|https?://|ftp://|//))",
    re.IGNORECASE,
)
_LINE_LED_BY_SPACE = re.compile(r"\n[ \t]")
"""``"\\n " in text or "\\n\\t" in text`` in one scan that skips from newline to newline."""
_SIMPLE_TEMPLATE = re.compile(r"\{\{([^{}\[\]<>\n]*)\}\}")
_SIMPLE_LINK = re.compile(r"\[\[([^\[\]{}<>|\n]+)(?:(\|)([^\[\]{}<>\n]*))?\]\]")
# What only the parser renders exactly; a single "[" or "]" is text (it is in the parser too).
_NEEDS_PARSER = re.compile(r"[{}<]|\[\[|\]\]|\[(?i:https?:|ftp:)|\[//|^-{4}|://", re.MULTILINE)
_BRACKETED_URL_START = re.compile(r"\[(?i:https?:|ftp:)|\[//")
_HORIZONTAL_RULE = re.compile(r"^-{4}", re.MULTILINE)


def _needs_parser(text: str) -> bool:
    """``_NEEDS_PARSER.search(text)``, by substring tests first (most segments have none)."""
    return (
        "{" in text
        or "}" in text
        or "<" in text
        or ("[" in text and ("[[" in text or _BRACKETED_URL_START.search(text) is not None))
        or ("]" in text and "]]" in text)
        or (":" in text and "://" in text)
        or ("----" in text and _HORIZONTAL_RULE.search(text) is not None)
    )


_FREE_LINK_SCHEMES = (
    "bitcoin",
    "geo",
    "magnet",
    "mailto",
    "news",
    "sips?",
    "sms",
    "tel",
    "urn",
    "xmpp",
)
"""URI schemes that MediaWiki links without brackets (regex alternatives)."""
_FREE_LINK_SCHEME = re.compile(rf"\b(?:{'|'.join(_FREE_LINK_SCHEMES)}):", re.I)
_SCHEME_BEFORE_COLON = re.compile(rf"\b(?:{'|'.join(_FREE_LINK_SCHEMES)})\Z", re.I)
"""A scheme ending where a search's ``endpos`` is (at a colon)."""
_LONGEST_SCHEME = max(len(s.rstrip("?")) for s in _FREE_LINK_SCHEMES)


def _has_free_link(text: str) -> bool:
    """``_FREE_LINK_SCHEME.search(text)``, tried only just before each ``:`` (a search from a
    position sees the characters before it for ``\\b``, as a whole-text search does). A page's
    text has few colons; the whole-text search tried every position."""
    colon = text.find(":")
    while colon >= 0:
        if _SCHEME_BEFORE_COLON.search(text, max(0, colon - _LONGEST_SCHEME), colon):
            return True
        colon = text.find(":", colon + 1)
    return False


_TEMPLATE_OUTPUT_UNSAFE = re.compile(r"[|={}\[\]]")
# Formatting tags render as their content (and a stray one is stripped as text): only the edges go.
_INLINE_TAG_EDGE = re.compile(
    r"</?(?:sub|sup|small|big|span|code|s|u|i|b|em|strong|var|font|abbr|tt|del|ins|kbd|samp"
    r"|cite|q|mark|bdi|bdo)(?:\s[^<>]*)?>",
    re.IGNORECASE,
)
_LINE_BREAK_TAG = re.compile(r"<br\s*/?>|<br\s[^<>]*>", re.IGNORECASE)
_BRACKETED_URL = re.compile(
    r"\[(?:(?:https?|ftp)://|//)[^\s\[\]<>\"]+(?:\s+([^\[\]<>\n]*))?\]", re.IGNORECASE
)


class _NeedsParser(Exception):
    """A segment the fast path cannot render exactly as the parser would."""


_QUOTE_RUN = re.compile(r"'{2,}")


def _plain_quotes(text: str) -> bool:
    """Whether every line's bold/italic quote runs pair up plainly (runs of 2, 3 and 5 only, each
    style opened and closed), so that removing the runs is what the parser's styles show; an
    apostrophe beside a style (``''Eagle'''s``) needs the parser."""
    for line in text.split("\n"):
        if "''" not in line:
            continue
        runs = _QUOTE_RUN.findall(line)
        italic, bold, both = runs.count("''"), runs.count("'''"), runs.count("'''''")
        if italic + bold + both != len(runs) or (italic + both) % 2 or (bold + both) % 2:
            return False
    return True


def _simple_template(match: re.Match[str]) -> str:
    name, *params = match.group(1).split("|")
    normalized = _normalized_template_name(name)
    if normalized.startswith("formatnum:"):
        return name.strip().partition(":")[2].strip()
    render = inline_renderer(normalized)
    if render is None:
        return ""
    positional: dict[int, str] = {}
    named: dict[str, str] = {}
    number = 0
    for param in params:
        key, equals, value = param.partition("=")
        if not equals:
            number += 1
            key, value = str(number), param
        key = key.strip()
        value = _param_value(value)
        if key.isdigit():
            positional[int(key)] = value
        else:
            named[key.lower()] = value
    pos = [positional.get(i, "") for i in range(1, max(positional, default=0) + 1)]
    shown = render(pos, named)
    if _TEMPLATE_OUTPUT_UNSAFE.search(shown):
        raise _NeedsParser  # it could change how an enclosing template splits its parameters
    return shown


def _url_title(match: re.Match[str]) -> str:
    return match.group(1) or ""


def _simple_links(text: str, drop_namespaces: frozenset[str]) -> str:
    """``text`` with each ``_SIMPLE_LINK`` replaced by what the parser path shows for it, from
    the pattern's ``split`` (text, title, pipe, caption, text, ...): no match object or call per
    article link. Raises _NeedsParser where that could differ: a shown ``|`` or ``=`` would
    split or name a parameter inside a template."""
    parts = _SIMPLE_LINK.split(text)
    if len(parts) == 1:
        return text
    for i in range(1, len(parts), 4):
        title, pipe, caption = parts[i], parts[i + 1], parts[i + 2]
        if ":" in title or (pipe and not caption):
            parts[i] = _other_link(title, pipe, caption, drop_namespaces)
        else:  # an article link: what _link_text shows
            if caption:
                shown = caption.strip()
            else:
                page, _, section = title.strip().partition("#")
                shown = (page or section).replace("_", " ").strip()
            if "|" in shown or "=" in shown:
                raise _NeedsParser
            parts[i] = shown
        parts[i + 1] = parts[i + 2] = ""
    return "".join(parts)


def _other_link(
    title: str, pipe: str | None, caption: str | None, drop_namespaces: frozenset[str]
) -> str:
    """What ``[[title|caption]]`` with a ``:`` in its title, or ``[[title|]]``, shows (the
    groups of ``_SIMPLE_LINK``; ``pipe`` None: no ``|``); raises _NeedsParser for a shown
    ``|`` or ``=`` as :func:`_simple_links` does, but not for the pipe trick's short title."""
    if _is_dropped_link(title, caption if pipe else None, drop_namespaces):
        return ""
    if pipe and not caption:
        return _link_text(title, None, pipe_trick=True)
    shown = _link_text(title, caption if pipe else None)
    if "|" in shown or "=" in shown:
        raise _NeedsParser
    return shown


def _fast_render(segment: str, drop_namespaces: frozenset[str]) -> str:
    """``segment`` (starting with ``\\n``) rendered as the parser path would, for segments of
    prose, links, bracketed URLs, formatting tags and single-line inline templates; raises
    _NeedsParser for anything else."""
    text = segment
    if _LINE_LED_BY_SPACE.search(text):  # maybe preformatted
        text = _FAST_PREFORMATTED.sub(_DROP, text)
    if "<" in text:
        text = _INLINE_TAG_EDGE.sub("", _LINE_BREAK_TAG.sub(" ", text))
    if "[" in text:
        text = _BRACKETED_URL.sub(_url_title, text)
        if "[[" in text:
            text = _simple_links(text, drop_namespaces)
    if "{{" in text:
        for _ in range(3):  # nested inline templates, innermost first
            text = _SIMPLE_TEMPLATE.sub(_simple_template, text)
            if "{{" not in text:
                break
        if "[[" in text:  # links whose caption held a template
            text = _simple_links(text, drop_namespaces)
    if _needs_parser(text) or _has_free_link(text) or ("''" in text and not _plain_quotes(text)):
        raise _NeedsParser  # quotes checked last: a link or {{'}} may sit beside a style
    return text


def _segments(text: str) -> Iterator[str]:
    """``text`` cut at blank lines outside templates and links, each piece led by ``\\n``:
    pieces between blank lines are joined (by ``\\n\\n``) until as many ``}}`` as ``{{`` and
    ``]]`` as ``[[`` have been seen. The counts add up piece by piece (no pair spans a blank
    line); a piece's brace pairs are counted only when it holds a ``{`` or ``}``, its bracket
    pairs only when it holds a ``[`` or ``]``."""
    pending: list[str] = []
    braces = brackets = 0  # opened less closed, in the pieces pending
    for piece in _SEGMENT_BREAK.split(text):
        pending.append(piece)
        if "{" in piece or "}" in piece:
            braces += piece.count("{{") - piece.count("}}")
        if "[" in piece or "]" in piece:
            brackets += piece.count("[[") - piece.count("]]")
        if braces <= 0 and brackets <= 0:
            yield "\n" + "\n\n".join(pending)
            pending.clear()
            braces = brackets = 0
    if pending:
        yield "\n" + "\n\n".join(pending)


def render_wikitext(
    text: str, drop_namespaces: frozenset[str] = DROP_LINK_NAMESPACES, *, parse_all: bool = False
) -> str:
    """A page's wikitext rendered to lines (dropped lines marked), before paragraphs are formed.

    The pre-pass (:func:`strip_non_prose`) cuts what never becomes prose; the rest is cut into
    segments at blank lines (never inside a template or link). A segment of plain prose, links
    and simple inline templates is rendered by regular expressions; any other goes to
    mwparserfromhell and the renderer (``parse_all``: every segment does, the reference the fast
    path is tested against)."""
    renderer = _Renderer(drop_namespaces)
    out: list[str] = []
    for segment in _segments(strip_non_prose(text, drop_namespaces)):
        if not parse_all:
            try:
                out.append(_fast_render(segment, drop_namespaces))
                continue
            except _NeedsParser:
                pass
        out.append(renderer.code(mwparserfromhell.parse(segment)))
    rendered = "\n\n".join(out)
    if "\x03" in rendered or "\x04" in rendered:
        rendered = rendered.replace("\x03", "").replace("\x04", _PARAGRAPH_BREAK)
    return rendered


# --- paragraphs -------------------------------------------------------------------------------


def _clean(paragraph: str) -> str:
    """Marks, leftover tags, entities, quotes and magic words removed, spacing and empty
    brackets tidied. Each step runs only when its trigger character is present."""
    text = _NS_LINK_MARKS.sub("", paragraph) if "\x01" in paragraph else paragraph
    if "<" in text:
        text = _REF.sub("", text)
        text = _COMMENT.sub("", text)
        text = _HTML_TAG.sub("", text)
    if "&" in text:
        text = html.unescape(text)
    if "''" in text:
        text = _QUOTES.sub("", text)
    if "__" in text:
        text = _MAGIC_WORD.sub("", text)
    # From here on the only whitespace is single spaces: the steps below delete text or put
    # back a bracket, never a space. Each regex runs only when the pair it needs is present.
    text = spaced = collapse_whitespace(text)
    if ("(" in text or "[" in text) and _bracket_tidy_applies(text):
        previous = None
        while previous != text:
            previous = text
            text = _EMPTY_BRACKETS.sub("", text)
            text = _PUNCT_AFTER_OPEN.sub(r"\1", text)
            text = _PUNCT_BEFORE_CLOSE.sub(r"\1", text)
        text = _SPACE_AFTER_OPEN.sub(r"\1", text)
    if _SPACED_PUNCT.search(text):
        text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    # no space before "," or ";" is left, so a repeat is two adjacent marks
    if ",," in text or ";;" in text:
        text = _REPEATED_COMMA.sub(r"\1", text)
    if _mark_before_stop(text):
        text = _COMMA_BEFORE_STOP.sub("", text)
    # a cut left a space to tidy (none when no step since the spacing replaced the text)
    if text is not spaced:
        text = collapse_whitespace(text)
    return text


_SPACED_PUNCT = re.compile(r" [,.;:!?)\]]")
"""What ``_SPACE_BEFORE_PUNCT`` needs when the only whitespace is single spaces."""
_MARK_BEFORE_STOP = re.compile(r"[,;:][.!?]")
"""What ``_COMMA_BEFORE_STOP`` needs: a run of ``,;:`` ends right before ``.!?`` (the rule
:func:`_mark_before_stop` decides, and is tested against)."""
_COMMA_THEN_STOP = re.compile(r",[.!?]")
_SEMICOLON_THEN_STOP = re.compile(r";[.!?]")
_COLON_THEN_STOP = re.compile(r":[.!?]")


def _mark_before_stop(text: str) -> bool:
    """``_MARK_BEFORE_STOP.search(text)``, by three patterns that start with a literal (which the
    regex engine skips to; it tried the character class at every position, ~8× slower), the
    rare ``;`` and ``:`` ones only when the text holds that mark."""
    return (
        _COMMA_THEN_STOP.search(text) is not None
        or (";" in text and _SEMICOLON_THEN_STOP.search(text) is not None)
        or (":" in text and _COLON_THEN_STOP.search(text) is not None)
    )


def _has_unparsed(paragraph: str) -> bool:
    """Whether ``paragraph`` holds ``{{``, ``}}``, ``[[`` or ``]]``: single characters first
    (a fast scan; most paragraphs have no brace or bracket)."""
    return ("{" in paragraph or "}" in paragraph or "[" in paragraph or "]" in paragraph) and (
        "{{" in paragraph or "}}" in paragraph or "[[" in paragraph or "]]" in paragraph
    )


_AFTER_OPEN = frozenset("-–—,;: )]")
_BEFORE_CLOSE = frozenset(",;: ")


def _bracket_tidy_applies(text: str) -> bool:
    """``_BRACKET_TIDY.search(text)`` for a text whose only whitespace is single spaces, by
    looking at the characters beside each bracket (a paragraph holds few)."""
    for bracket in "([":
        i = text.find(bracket)
        while i >= 0:
            if text[i + 1 : i + 2] in _AFTER_OPEN and i + 1 < len(text):
                return True
            i = text.find(bracket, i + 1)
    for bracket in ")]":
        i = text.find(bracket)
        while i >= 0:
            if i > 0 and text[i - 1] in _BEFORE_CLOSE:
                return True
            i = text.find(bracket, i + 1)
    return False


def _is_dropped_line(line: str, stripped: str) -> bool:
    """Whether ``line`` (``stripped``: the same, stripped) is dropped whole: a list, definition
    or table line, a heading (``=+.*=+`` once stripped), a line marked dropped, or one holding
    only namespace links. By first and last characters; a regex only for the rare links."""
    return (
        line.startswith(_DROPPED_LINE_STARTS)
        or _DROP in line
        or (len(stripped) > 1 and stripped[0] == "=" and stripped[-1] == "=")
        or (_NS_LINK_OPEN in line and _NS_LINKS_ONLY.fullmatch(line) is not None)
    )


def wikitext_to_paragraphs(
    text: str,
    *,
    extra_drop_namespaces: Collection[str] = (),
    drop_unparsed: bool = True,
    parse_all: bool = False,
) -> list[str]:
    """The prose paragraphs of one page's wikitext, in order, each on one line.

    ``extra_drop_namespaces``: localized names of the file/media/category namespaces (any case).
    ``drop_unparsed``: drop a paragraph that still holds ``[[``, ``]]``, ``{{`` or ``}}`` once
    rendered: markup the parser could not match (a broken table, an unbalanced image caption).
    ``parse_all``: every segment through the parser (:func:`render_wikitext`), the reference
    the fast path is tested against; same paragraphs, slower.
    """
    drop = DROP_LINK_NAMESPACES | {
        n.strip().lower().replace("_", " ") for n in extra_drop_namespaces
    }
    rendered = render_wikitext(text, frozenset(drop), parse_all=parse_all)
    paragraphs: list[str] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            paragraph = _clean(" ".join(current))
            unparsed = drop_unparsed and _has_unparsed(paragraph)
            if _LETTER.search(paragraph) and not unparsed:
                paragraphs.append(paragraph)
            current.clear()

    for line in rendered.split("\n"):
        stripped = line.strip()
        if not stripped or _is_dropped_line(line, stripped):
            flush()
        else:
            current.append(stripped)
    flush()
    return paragraphs
