"""MediaWiki XML dump streaming (transforms.mediawiki_xml): hand-written dumps, then real ones."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import pytest

from tests.conftest import require_corpora
from transforms import mediawiki_xml
from transforms.mediawiki_xml import (
    DISAMBIGUATION_TEMPLATES,
    WikiPage,
    is_disambiguation,
    iter_pages,
    template_names,
)
from transforms.rejects import Reject

# --- building dumps -----------------------------------------------------------------------------

SITEINFO = """  <siteinfo>
    <sitename>Testwiki</sitename>
    <namespaces>
      <namespace key="-2" case="first-letter">Media</namespace>
      <namespace key="0" case="first-letter" />
      <namespace key="1" case="first-letter">Talk</namespace>
      <namespace key="4" case="first-letter">Testwiki</namespace>
      <namespace key="6" case="first-letter">File</namespace>
      <namespace key="14" case="first-letter">Category</namespace>
    </namespaces>
  </siteinfo>
"""


def revision(text: str | None, rev_id: int = 100) -> str:
    body = "<text />" if text is None else f'<text xml:space="preserve">{escape(text)}</text>'
    return (
        f"    <revision>\n      <id>{rev_id}</id>\n      <timestamp>2020-01-01T00:00:00Z"
        f"</timestamp>\n      <contributor><username>U</username><id>7</id></contributor>\n"
        f"      {body}\n    </revision>\n"
    )


def page(
    title: str,
    text: str | None = "Some prose.",
    *,
    page_id: int = 1,
    ns: int | None = 0,
    redirect: str | None = None,
    revisions: list[str | None] | None = None,
) -> str:
    parts = [f"  <page>\n    <title>{escape(title)}</title>\n"]
    if ns is not None:
        parts.append(f"    <ns>{ns}</ns>\n")
    parts.append(f"    <id>{page_id}</id>\n")
    if redirect is not None:
        parts.append(
            f"    <redirect title={quoteattr(redirect)} />\n" if redirect else "<redirect/>"
        )
    for i, rev_text in enumerate(revisions if revisions is not None else [text]):
        parts.append(revision(rev_text, 100 + i))
    parts.append("  </page>\n")
    return "".join(parts)


def dump(
    *pages: str,
    version: str = "0.10",
    siteinfo: str | None = SITEINFO,
    declaration: str = '<?xml version="1.0" encoding="utf-8"?>\n',
) -> str:
    uri = f"http://www.mediawiki.org/xml/export-{version}/"
    head = f'{declaration}<mediawiki xmlns="{uri}" version="{version}" xml:lang="en">\n'
    return head + (siteinfo or "") + "".join(pages) + "</mediawiki>\n"


def parse(
    data: str | bytes, source: str = "dump.xml", **kwargs
) -> tuple[list[WikiPage], list[Reject], Counter[str]]:
    raw = data.encode() if isinstance(data, str) else data
    stats: Counter[str] = Counter()
    out = list(iter_pages(io.BytesIO(raw), source, stats, **kwargs))
    pages = [o for o in out if isinstance(o, WikiPage)]
    rejects = [o for o in out if isinstance(o, Reject)]
    assert len(pages) + len(rejects) == len(out)
    assert all(isinstance(o, Reject) for o in out[len(pages) :]), "a Reject comes last"
    return pages, rejects, stats


def titles(pages: list[WikiPage]) -> list[str]:
    return [p.title for p in pages]


# --- pages kept -----------------------------------------------------------------------------


def test_article_fields_and_unescaped_text():
    text = "'''Caf\u00e9''' & <ref>x</ref> \"quoted\" [[Link|anchor]]."
    pages, rejects, stats = parse(dump(page("Caf\u00e9 & Bar", text, page_id=42)))
    assert pages == [WikiPage("42", "Caf\u00e9 & Bar", 0, text)]
    assert rejects == []
    assert stats == Counter(pages_kept=1)


def test_page_id_is_the_pages_not_the_revisions_or_contributors():
    pages, _, _ = parse(dump(page("A", page_id=9)))
    assert pages[0].page_id == "9"


def test_pages_come_in_file_order():
    pages, _, stats = parse(dump(*(page(f"P{i}", page_id=i) for i in range(5))))
    assert titles(pages) == ["P0", "P1", "P2", "P3", "P4"]
    assert stats == Counter(pages_kept=5)


def test_last_revision_wins():
    pages, _, _ = parse(dump(page("A", revisions=["old text", "middle", "latest text"])))
    assert pages[0].text == "latest text"


def test_last_revision_empty_means_empty_page():
    pages, _, stats = parse(dump(page("A", revisions=["old text", None])))
    assert pages == []
    assert stats == Counter(dropped_empty=1)


@pytest.mark.parametrize("version", ["0.3", "0.4", "0.5", "0.6", "0.8", "0.9", "0.10", "0.11"])
def test_any_schema_version_namespace_uri(version):
    pages, rejects, stats = parse(dump(page("A"), page("Talk:A", ns=1), version=version))
    assert titles(pages) == ["A"] and rejects == []
    assert stats == Counter(pages_kept=1, dropped_namespace=1)


def test_no_xml_namespace_at_all():
    data = "<mediawiki><page><title>A</title><ns>0</ns><id>1</id><revision><text>x</text></revision></page></mediawiki>"
    pages, rejects, _ = parse(data)
    assert pages == [WikiPage("1", "A", 0, "x")] and rejects == []


# --- namespaces -----------------------------------------------------------------------------


def test_namespace_from_ns_element():
    pages, _, stats = parse(
        dump(
            page("Article"),
            page("Talk:Article", ns=1),
            page("Testwiki:About", ns=4),
            page("Module:X", ns=828),
            page("Odd: but ns 0", ns=0),
        )
    )
    assert titles(pages) == ["Article", "Odd: but ns 0"]
    assert stats == Counter(pages_kept=2, dropped_namespace=3)


def test_ns_element_beats_the_title_prefix():
    # A title that looks like a namespace but <ns> says 0 (a real case: "Talk: The Show").
    pages, _, _ = parse(dump(page("Talk:Show", ns=0), page("Plain", ns=10)))
    assert titles(pages) == ["Talk:Show"]


LOCALIZED_SITEINFO = """  <siteinfo>
    <namespaces>
      <namespace key="0" />
      <namespace key="1">Diskusija</namespace>
      <namespace key="6">Datoteka</namespace>
      <namespace key="14">Kategorija</namespace>
      <namespace key="10">Predložak</namespace>
    </namespaces>
  </siteinfo>
"""


def test_old_schema_without_ns_uses_siteinfo_names():
    pages, _, stats = parse(
        dump(
            page("Zagreb", ns=None),
            page("Diskusija:Zagreb", ns=None),
            page("kategorija:Gradovi", ns=None),  # case-insensitive
            page("Predložak:Infokvir", ns=None),
            page("Predlo\u017eak_nepoznat:X", ns=None),  # not a namespace name
            page("Category:Canonical English works everywhere", ns=None),
            page("Star Trek: Voyager", ns=None),
            version="0.3",
            siteinfo=LOCALIZED_SITEINFO,
        )
    )
    assert titles(pages) == ["Zagreb", "Predložak_nepoznat:X", "Star Trek: Voyager"]
    assert stats == Counter(pages_kept=3, dropped_namespace=4)


def test_no_siteinfo_and_no_ns_knows_only_canonical_english_prefixes():
    pages, _, stats = parse(
        dump(
            page("Mission: Impossible", ns=None),
            page("Talk:Mission", ns=None),
            page("File:X.jpg", ns=None),
            page("Image:Y.png", ns=None),
            page("Wikipedia:About", ns=None),
            page("User talk:Someone", ns=None),
            page("Template:Infobox", ns=None),
            page("Diskusija:Zagreb", ns=None),  # unknown without siteinfo: namespace 0
            version="0.3",
            siteinfo=None,
        )
    )
    assert titles(pages) == ["Mission: Impossible", "Diskusija:Zagreb"]
    assert stats == Counter(pages_kept=2, dropped_namespace=6)


# --- redirects ------------------------------------------------------------------------------


def test_redirect_element_with_title_attribute():
    pages, _, stats = parse(
        dump(page("Old", "#REDIRECT [[New]]", redirect="New"), page("New", "Prose."))
    )
    assert titles(pages) == ["New"]
    assert stats == Counter(pages_kept=1, dropped_redirect=1)


def test_empty_redirect_element_schema_04_and_localized_text():
    # The element is the reliable signal: the text's magic word may be localized.
    pages, _, stats = parse(
        dump(page("Alt", "#WEITERLEITUNG [[Neu]]", redirect=""), version="0.4", siteinfo=None)
    )
    assert pages == []
    assert stats == Counter(dropped_redirect=1)


@pytest.mark.parametrize(
    "text",
    [
        "#REDIRECT [[New]]",
        "#redirect[[New]]",
        "  \n#Redirect: [[New]]",
        "#REDIRECT [[New]]\n{{R from move}}",
    ],
)
def test_redirect_by_text_without_element(text):
    pages, _, stats = parse(dump(page("Old", text), version="0.3"))
    assert pages == []
    assert stats == Counter(dropped_redirect=1)


def test_redirect_word_with_non_ascii_letters_is_compared_in_lower_case():
    # a Greek magic word: its capital sigma lowers to σ (not the final ς) because a letter
    # follows, which only lowering past the word's own characters can tell
    data = dump(page("Άλλο", "#ΑΝΑΚΑΤΕΥΘΥΝΣΗ [[Νέο]]"), version="0.3")
    pages, _, stats = parse(data, redirect_words=("#ανακατευθυνση",))
    assert pages == [] and stats == Counter(dropped_redirect=1)
    pages, _, stats = parse(data, redirect_words=("#ανακατευθυνς",))  # final form: no match
    assert titles(pages) == ["Άλλο"] and stats == Counter(pages_kept=1)


def test_whitespace_only_text_is_empty():
    pages, _, stats = parse(dump(page("Blank", " \n\t\u00a0 "), version="0.3"))
    assert pages == [] and stats == Counter(dropped_empty=1)


def test_localized_redirect_word_only_when_given():
    data = dump(page("Alt", "#WEITERLEITUNG [[Neu]]"), version="0.3")
    pages, _, _ = parse(data)
    assert titles(pages) == ["Alt"]
    pages, _, stats = parse(data, redirect_words=("#REDIRECT", "#WEITERLEITUNG"))
    assert pages == [] and stats == Counter(dropped_redirect=1)


def test_redirect_word_elsewhere_is_not_a_redirect():
    pages, _, _ = parse(dump(page("A", "The #REDIRECT magic word starts redirects.")))
    assert titles(pages) == ["A"]


# --- disambiguation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "markup",
    [
        "{{disambiguation}}",
        "{{Disambiguation}}",
        "{{DISAMBIG}}",
        "{{dab}}",
        "{{Hndis|Smith, John}}",
        "{{geodis}}",
        "{{Template:Disambiguation}}",
        "{{Disambiguation_page}}",
        "{{ disambiguation\n| geo | surname }}",
        "{{Disambiguation|date=May 2020}}",
        "{{Mathematical disambiguation}}",
        "__DISAMBIG__",
    ],
)
def test_disambiguation_pages_dropped(markup):
    text = f"'''Mercury''' may refer to:\n* [[Mercury (planet)]]\n* [[Mercury (element)]]\n\n{markup}\n"
    data = dump(page("Mercury", text))
    pages, _, stats = parse(data)
    assert pages == [] and stats == Counter(dropped_disambiguation=1)
    pages, _, stats = parse(data, keep_disambiguation=True)
    assert titles(pages) == ["Mercury"] and stats == Counter(pages_kept=1)


@pytest.mark.parametrize(
    "markup",
    [
        "{{disambiguation needed|date=May 2020}}",  # an inline cleanup tag inside an article
        "{{Set index article}}",
        "{{surname}}",
        "<!-- {{disambiguation}} -->",
        "See [[Mercury (disambiguation)]].",
        "{{Other uses|Mercury (disambiguation)}}",
    ],
)
def test_not_disambiguation(markup):
    pages, _, stats = parse(dump(page("Mercury", f"Mercury is a planet. {markup}")))
    assert titles(pages) == ["Mercury"] and stats == Counter(pages_kept=1)


def test_localized_disambiguation_templates_are_configurable():
    data = dump(page("Rēzne", "Rēzne var byut:\n{{Zeimeibu škiršona}}"), page("B", "Prose."))
    pages, _, _ = parse(data)
    assert titles(pages) == ["Rēzne", "B"]
    pages, _, stats = parse(
        data, disambiguation_templates=DISAMBIGUATION_TEMPLATES | {"Zeimeibu_Škiršona"}
    )
    assert titles(pages) == ["B"]
    assert stats == Counter(pages_kept=1, dropped_disambiguation=1)


def test_template_names_and_is_disambiguation():
    text = "{{Infobox X|a={{nowrap|b}}}} {{Template:Geodis}} {{ cite_web |url=u}} <!--{{dab}}-->"
    assert template_names(text) == {"infobox x", "nowrap", "geodis", "cite web"}
    assert is_disambiguation(text)
    assert not is_disambiguation("{{Infobox X}}")
    assert is_disambiguation("{{Foo}}", templates={"FOO"})


# --- empty pages and priorities ---------------------------------------------------------------


def test_empty_pages():
    pages, _, stats = parse(
        dump(
            page("No text", None),
            page("Blank", "  \n\t \n"),
            page("No revision", revisions=[]),
            page("Deleted", revisions=[]).replace(
                "  </page>",
                '    <revision><id>1</id><text deleted="deleted" /></revision>\n  </page>',
            ),
            page("Kept"),
        )
    )
    assert titles(pages) == ["Kept"]
    assert stats == Counter(pages_kept=1, dropped_empty=4)


def test_each_page_counted_once_by_first_reason():
    # namespace, then redirect, then empty, then disambiguation
    pages, _, stats = parse(
        dump(
            page("Talk:R", "#REDIRECT [[X]]", ns=1, redirect="X"),
            page("R", "#REDIRECT [[X]] {{disambiguation}}", redirect="X"),
            page("D", "{{disambiguation}}"),
        )
    )
    assert pages == []
    assert stats == Counter(dropped_namespace=1, dropped_redirect=1, dropped_disambiguation=1)


# --- encodings and chunking -------------------------------------------------------------------

UNICODE_TEXT = "Rīga — 漢字 Ελληνικά 😀 \u00e9t\u00e9."


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_declared_unicode_encodings(encoding):
    name = {"utf-16": "UTF-16", "utf-16-le": "UTF-16LE", "utf-16-be": "UTF-16BE"}.get(
        encoding, "UTF-8"
    )
    data = dump(
        page("Ελληνικά", UNICODE_TEXT, page_id=5),
        page("Talk:Rīga", UNICODE_TEXT, ns=1),
        declaration=f'<?xml version="1.0" encoding="{name}"?>\n',
    )
    raw = data.encode(encoding)
    if encoding == "utf-16":
        assert raw[:2] in (b"\xff\xfe", b"\xfe\xff")
    pages, rejects, stats = parse(raw)
    assert pages == [WikiPage("5", "Ελληνικά", 0, UNICODE_TEXT)]
    assert rejects == [] and stats == Counter(pages_kept=1, dropped_namespace=1)


def test_declared_latin1_encoding():
    data = dump(
        page("Café", "Crème brûlée, Ærø."),
        declaration='<?xml version="1.0" encoding="ISO-8859-1"?>\n',
    )
    pages, rejects, _ = parse(data.encode("latin-1"))
    assert pages == [WikiPage("1", "Café", 0, "Crème brûlée, Ærø.")] and rejects == []


def test_tiny_chunks_split_multibyte_characters(monkeypatch):
    pages = [page(f"Ελληνικά {i}", UNICODE_TEXT * 3, page_id=i) for i in range(4)]
    utf8 = dump(*pages)
    utf16 = dump(*pages, declaration='<?xml version="1.0" encoding="UTF-16"?>\n')
    expected, _, _ = parse(utf8)
    assert len(expected) == 4
    monkeypatch.setattr(mediawiki_xml, "CHUNK_BYTES", 7)
    assert parse(utf8)[:2] == (expected, [])
    assert parse(utf16.encode("utf-16"))[:2] == (expected, [])


class _GeneratedDump(io.RawIOBase):
    """A readable stream of ``n`` pages made on the fly, never held whole in memory."""

    def __init__(self, n: int, text_chars: int) -> None:
        self._parts = self._generate(n, text_chars)
        self._buffer = b""

    @staticmethod
    def _generate(n: int, text_chars: int) -> Iterator[bytes]:
        yield dump(version="0.10").replace("</mediawiki>\n", "").encode()
        body = ("word " * (text_chars // 5)).strip()
        for i in range(n):
            ns = 0 if i % 3 else 1
            yield page(f"Page {i}", f"{body} {i}", page_id=i, ns=ns).encode()
        yield b"</mediawiki>\n"

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while len(self._buffer) < len(buffer):
            part = next(self._parts, None)
            if part is None:
                break
            self._buffer += part
        n = min(len(buffer), len(self._buffer))
        buffer[:n] = self._buffer[:n]
        self._buffer = self._buffer[n:]
        return n


def test_constant_memory_on_a_large_stream():
    n, text_chars = 6000, 2000  # ~13 MB of XML
    stats: Counter[str] = Counter()
    tracemalloc.start()
    try:
        kept = 0
        for item in iter_pages(_GeneratedDump(n, text_chars), "generated", stats):
            assert isinstance(item, WikiPage)
            kept += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert kept == stats["pages_kept"] == n - len(range(0, n, 3))
    assert stats["dropped_namespace"] == len(range(0, n, 3))
    assert peak < 2_000_000, f"peak {peak:,} bytes: pages are being retained"


# --- damaged dumps ----------------------------------------------------------------------------

FIVE_PAGES = dump(*(page(f"P{i}", f"Text of page {i}. " * 20, page_id=i) for i in range(5)))


def test_truncated_mid_page_keeps_complete_pages_then_rejects():
    cut = FIVE_PAGES.index("<title>P3</title>") + 40  # inside page P3
    pages, rejects, stats = parse(FIVE_PAGES[:cut], source="cut.xml")
    assert titles(pages) == ["P0", "P1", "P2"]
    assert len(rejects) == 1
    reject = rejects[0]
    assert reject.reason == "truncated_dump"
    assert reject.location.startswith("cut.xml:byte ")
    assert "'P2'" in reject.excerpt and "ParseError" in reject.excerpt
    assert stats == Counter(pages_kept=3, truncated_dump=1)


@pytest.mark.parametrize(
    "cut_after", ["</page>", "<revision>", "<text", "Text of page 1", "</mediawiki"]
)
def test_truncated_anywhere_never_raises(cut_after):
    cut = FIVE_PAGES.index(cut_after, FIVE_PAGES.index("<title>P1</title>")) + len(cut_after)
    pages, rejects, stats = parse(FIVE_PAGES[:cut])
    complete = FIVE_PAGES[:cut].count("</page>")
    assert titles(pages) == [f"P{i}" for i in range(complete)]
    assert [r.reason for r in rejects] == ["truncated_dump"]
    assert stats["truncated_dump"] == 1


@pytest.mark.parametrize("data", [b"", b"   ", b"not xml at all", b"\x00\xff\xfe garbage"])
def test_empty_or_garbage_stream(data):
    pages, rejects, stats = parse(data)
    assert pages == [] and [r.reason for r in rejects] == ["truncated_dump"]
    assert stats == Counter(truncated_dump=1)


def test_corruption_in_the_middle():
    start = FIVE_PAGES.index("<title>P2</title>")
    corrupt = FIVE_PAGES[:start] + "<title>P2</tilte>" + FIVE_PAGES[start + 17 :]
    pages, rejects, _ = parse(corrupt)
    assert titles(pages) == ["P0", "P1"]
    assert [r.reason for r in rejects] == ["truncated_dump"]
    assert "mismatched tag" in rejects[0].excerpt
    assert "line" in rejects[0].location


def test_junk_after_the_document():
    pages, rejects, _ = parse(FIVE_PAGES + "<mediawiki>")
    assert len(pages) == 5 and [r.reason for r in rejects] == ["truncated_dump"]


def _damaged_stream(kind: str) -> io.BufferedIOBase:
    data = FIVE_PAGES.encode() * 1
    if kind == "gzip-truncated":
        return gzip.GzipFile(fileobj=io.BytesIO(gzip.compress(data)[:-300]))
    if kind == "gzip-corrupt":
        packed = bytearray(gzip.compress(data))
        packed[len(packed) // 2 : len(packed) // 2 + 40] = b"\xff" * 40
        return gzip.GzipFile(fileobj=io.BytesIO(bytes(packed)))
    if kind == "bz2-truncated":
        return bz2.BZ2File(io.BytesIO(bz2.compress(data)[:-100]))
    if kind == "bz2-corrupt":
        packed = bytearray(bz2.compress(data))
        packed[len(packed) // 2 : len(packed) // 2 + 40] = b"\x00" * 40
        return bz2.BZ2File(io.BytesIO(bytes(packed)))
    if kind == "xz-truncated":
        return lzma.LZMAFile(io.BytesIO(lzma.compress(data)[:-100]))
    assert kind == "xz-corrupt"
    packed = bytearray(lzma.compress(data))
    packed[len(packed) // 2 : len(packed) // 2 + 40] = b"\x00" * 40
    return lzma.LZMAFile(io.BytesIO(bytes(packed)))


@pytest.mark.parametrize(
    "kind",
    [
        "gzip-truncated",
        "gzip-corrupt",
        "bz2-truncated",
        "bz2-corrupt",
        "xz-truncated",
        "xz-corrupt",
    ],
)
def test_decompression_errors_become_a_reject(kind):
    stats: Counter[str] = Counter()
    out = list(iter_pages(_damaged_stream(kind), f"dump.{kind}", stats))
    assert isinstance(out[-1], Reject) and out[-1].reason == "truncated_dump"
    pages = out[:-1]
    assert all(isinstance(p, WikiPage) for p in pages)
    assert titles(pages) == [f"P{i}" for i in range(len(pages))]  # a clean prefix
    assert len(pages) < 5
    assert stats["truncated_dump"] == 1 and stats["pages_kept"] == len(pages)


@pytest.mark.parametrize("codec", [gzip, bz2, lzma])
def test_compressed_intact_streams_work(codec):
    with codec.open(io.BytesIO(codec.compress(FIVE_PAGES.encode())), "rb") as stream:
        out = list(iter_pages(stream, "d", Counter()))
    assert titles(out) == ["P0", "P1", "P2", "P3", "P4"]  # type: ignore[arg-type]


# --- real dumps -------------------------------------------------------------------------------

ENWIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
LTGWIKI = "smallwiki-latest-pages-articles.xml"
TABLES = "enwiki-table-markup.xml.bz2"
SCHEMA_09 = "enwiki-pages-articles-sample.xml.bz2"
PEAR = "article-pear-0.10.xml"


def _open(path: Path):
    return bz2.open(path, "rb") if path.suffix == ".bz2" else path.open("rb")


def _read_real(name: str, **kwargs) -> tuple[list[WikiPage], list[Reject], Counter[str]]:
    path = require_corpora("wiki", name)
    stats: Counter[str] = Counter()
    with _open(path) as stream:
        out = list(iter_pages(stream, name, stats, **kwargs))
    pages = [o for o in out if isinstance(o, WikiPage)]
    return pages, [o for o in out if isinstance(o, Reject)], stats


def _raw(name: str) -> bytes:
    with _open(require_corpora("wiki", name)) as stream:
        return stream.read()


def test_real_enwiki_shortened():
    # 206 pages: 100 redirects (one of them the ns-4 page, counted as dropped_namespace),
    # 8 disambiguation pages, 98 articles.
    pages, rejects, stats = _read_real(ENWIKI)
    assert rejects == []
    assert stats == Counter(
        pages_kept=98, dropped_redirect=99, dropped_namespace=1, dropped_disambiguation=8
    )
    raw = _raw(ENWIKI)
    assert raw.count(b"<page>") == sum(stats.values()) == 206
    assert raw.count(b"<redirect ") == 100
    assert titles(pages)[:3] == ["Anarchism", "Autism", "Albedo"]
    assert all(p.namespace == 0 and p.text.strip() and p.page_id.isdigit() for p in pages)
    assert len({p.page_id for p in pages}) == 98
    _, _, kept_all = _read_real(ENWIKI, keep_disambiguation=True)
    assert kept_all == Counter(pages_kept=106, dropped_redirect=99, dropped_namespace=1)
    disambiguation = set(titles(_read_real(ENWIKI, keep_disambiguation=True)[0])) - set(
        titles(pages)
    )
    assert disambiguation == {
        "Alien",
        "Ada",
        "Aa River",
        "Austin (disambiguation)",
        "Aberdeen (disambiguation)",
        "Argument (disambiguation)",
        "Animal (disambiguation)",
        "Asia Minor (disambiguation)",
    }


def test_real_ltgwiki_localized_namespaces():
    # 2,004 pages, 1,050 in ns 0 of which 147 redirects (195 redirects in all namespaces).
    pages, rejects, stats = _read_real(LTGWIKI)
    assert rejects == []
    assert stats == Counter(pages_kept=903, dropped_redirect=147, dropped_namespace=954)
    raw = _raw(LTGWIKI)
    assert raw.count(b"<page>") == sum(stats.values()) == 2004
    assert raw.count(b"<ns>0</ns>") == 903 + 147
    assert raw.count(b"<redirect ") == 195
    assert all(p.namespace == 0 for p in pages)
    # ltgwiki's own disambiguation template (enwiki's names redirect to it there)
    _, _, stats = _read_real(
        LTGWIKI, disambiguation_templates=DISAMBIGUATION_TEMPLATES | {"Zeimeibu škiršona"}
    )
    assert stats == Counter(
        pages_kept=896, dropped_redirect=147, dropped_namespace=954, dropped_disambiguation=7
    )


def test_real_no_siteinfo_table_dump():
    pages, rejects, stats = _read_real(TABLES)
    assert b"<siteinfo>" not in _raw(TABLES)
    assert rejects == [] and stats == Counter(pages_kept=5)
    assert titles(pages) == [
        "Constructive vote of no confidence",
        "List of Prison Break characters",
        "Academy Award for Best Production Design",
        "Economy of Estonia",
        "Brahui language",
    ]


def test_real_schema_09_sample():
    pages, rejects, stats = _read_real(SCHEMA_09)
    assert b"export-0.9/" in _raw(SCHEMA_09)[:300]
    assert rejects == [] and stats == Counter(pages_kept=2, dropped_redirect=1)
    assert titles(pages) == ["Computer accessibility", "Accessibility"]


def test_real_single_article():
    pages, rejects, stats = _read_real(PEAR)
    assert rejects == [] and stats == Counter(pages_kept=1)
    assert titles(pages) == ["Pear"] and "{{Taxobox" in pages[0].text


def test_real_truncated_copy_keeps_every_complete_page(tmp_path):
    raw = _raw(ENWIKI)
    page_starts = [i for i in range(len(raw)) if raw.startswith(b"  <page>", i)][:200]
    start = page_starts[150]
    cut = start + (page_starts[151] - start) // 2  # the middle of page 151
    truncated = tmp_path / "truncated.xml"
    truncated.write_bytes(raw[:cut])
    # The oracle: the same prefix, closed right after the last complete page.
    whole = tmp_path / "prefix.xml"
    whole.write_bytes(raw[:start] + b"</mediawiki>\n")

    def read(path: Path) -> tuple[list, Counter[str]]:
        stats: Counter[str] = Counter()
        with path.open("rb") as stream:
            return list(iter_pages(stream, path.name, stats)), stats

    expected, expected_stats = read(whole)
    out, stats = read(truncated)
    assert out[:-1] == expected and all(isinstance(p, WikiPage) for p in expected)
    assert sum(expected_stats.values()) == 150
    assert isinstance(out[-1], Reject) and out[-1].reason == "truncated_dump"
    assert out[-1].location.startswith("truncated.xml:byte ")
    assert stats == expected_stats + Counter(truncated_dump=1)


def test_real_truncated_bz2_file(tmp_path):
    path = tmp_path / "cut.xml.bz2"
    packed = require_corpora("wiki", ENWIKI).read_bytes()
    path.write_bytes(packed[: len(packed) // 2])
    full, _, _ = _read_real(ENWIKI)
    stats: Counter[str] = Counter()
    with bz2.open(path, "rb") as stream:
        out = list(iter_pages(stream, path.name, stats))
    assert isinstance(out[-1], Reject) and out[-1].reason == "truncated_dump"
    pages = out[:-1]
    assert 0 < len(pages) < len(full) and pages == full[: len(pages)]
    assert stats["truncated_dump"] == 1


def test_template_names_equal_the_plain_rule():
    """``template_names`` skips the comment pass when there is no comment and remembers each
    name's normalization: the same names as removing comments and normalizing every match."""
    import random

    from transforms.mediawiki_xml import _COMMENT, _TEMPLATE_NAME, _normalize_name, template_names

    def plain(text: str) -> set[str]:
        names = set()
        for match in _TEMPLATE_NAME.finditer(_COMMENT.sub("", text)):
            name = _normalize_name(match.group(1))
            names.add(name[len("template:") :].strip() if name.startswith("template:") else name)
        return names

    pieces = ["{{", "}}", "{", "}", "|", "<!--", "-->", " ", "_", "\n", "Dab", "template:", "x"]
    rng = random.Random(3)
    for _ in range(20000):
        text = "".join(rng.choices(pieces, k=rng.randint(0, 12)))
        assert template_names(text) == plain(text), repr(text)
