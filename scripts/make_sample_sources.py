"""Regenerates the embedded sample's raw sources from the project's own text (sample/corpus):
a small MediaWiki XML dump (sample/wiki/) and book-style files (sample/books/).

    .venv/bin/python scripts/make_sample_sources.py

The dump wraps documents in wikitext (links, bold, a template, references, a heading, a list, a
category) and adds what the cleaner must drop: a redirect, a disambiguation page and a talk page.
The books are hard-wrapped at 70 columns with a title, chapter headings and start/end markers.
"""

from __future__ import annotations

import html
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def documents() -> list[list[str]]:
    docs = []
    for path in sorted((ROOT / "sample" / "corpus").glob("*.txt")):
        for block in path.read_text(encoding="utf-8").split("\n\n"):
            lines = [x for x in block.split("\n") if x.strip()]
            if lines:
                docs.append(lines)
    return docs


def wikitext(sentences: list[str], i: int) -> str:
    first = sentences[0]
    words = first.split()
    if len(words) > 3:
        words[0] = f"'''{words[0]}'''"
        words[2] = f"[[{words[2].strip('.,;:')}|{words[2]}]]"
    lead = " ".join(words)
    body = " ".join(sentences[1:6])
    rest = " ".join(sentences[6:])
    parts = [
        "{{Infobox place|name=Sample|population=1200}}",
        f"{lead} {body}<ref>Notes of the sample, page {i}.</ref>",
    ]
    if rest:
        parts += ["== More ==", rest, "* a list item that is not prose", ""]
    parts.append(f"[[Category:Sample pages {i % 5}]]")
    return "\n\n".join(parts)


def page(title: str, page_id: int, ns: int, text: str, redirect: str | None = None) -> str:
    red = f'    <redirect title="{html.escape(redirect)}" />\n' if redirect else ""
    return (
        f"  <page>\n    <title>{html.escape(title)}</title>\n    <ns>{ns}</ns>\n"
        f"    <id>{page_id}</id>\n{red}    <revision>\n      <id>{page_id + 1000}</id>\n"
        f'      <text xml:space="preserve">{html.escape(text)}</text>\n'
        f"    </revision>\n  </page>\n"
    )


def main() -> None:
    docs = documents()
    wiki_docs, book_docs = docs[: len(docs) * 2 // 3], docs[len(docs) * 2 // 3 :]
    pages = [
        page(" ".join(d[0].split()[:4]).strip(".,;:") + f" ({i})", 10 + i, 0, wikitext(d, i))
        for i, d in enumerate(wiki_docs)
    ]
    pages.append(page("Sample redirect", 5000, 0, "#REDIRECT [[Elsewhere]]", "Elsewhere"))
    pages.append(
        page(
            "Sample (disambiguation)",
            5001,
            0,
            "'''Sample''' may refer to:\n* one\n* two\n{{disambiguation}}",
        )
    )
    pages.append(page("Talk:Sample", 5002, 1, "A talk page is not an article."))
    header = (
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
        'xml:lang="en">\n  <siteinfo>\n    <sitename>Sample</sitename>\n'
        '    <namespaces>\n      <namespace key="0" case="first-letter" />\n'
        '      <namespace key="1" case="first-letter">Talk</namespace>\n'
        '      <namespace key="14" case="first-letter">Category</namespace>\n'
        "    </namespaces>\n  </siteinfo>\n"
    )
    wiki = ROOT / "sample" / "wiki"
    wiki.mkdir(parents=True, exist_ok=True)
    (wiki / "samplewiki-pages-articles.xml").write_text(
        header + "".join(pages) + "</mediawiki>\n", encoding="utf-8"
    )
    books = ROOT / "sample" / "books"
    books.mkdir(parents=True, exist_ok=True)
    per_book = (len(book_docs) + 2) // 3
    for b in range(3):
        chapters = book_docs[b * per_book : (b + 1) * per_book]
        title = f"SAMPLE BOOK {b + 1}"
        lines = [f"*** START OF THE PROJECT GUTENBERG EBOOK {title} ***", "", title, "", ""]
        for c, chapter in enumerate(chapters, start=1):
            lines += [f"CHAPTER {c}.", ""]
            for k in range(0, len(chapter), 4):
                lines += textwrap.wrap(" ".join(chapter[k : k + 4]), 70) + [""]
        lines += [f"*** END OF THE PROJECT GUTENBERG EBOOK {title} ***", ""]
        (books / f"sample-book-{b + 1}.txt").write_text("\n".join(lines), encoding="utf-8")
    print(f"{len(pages)} wiki pages, 3 books")


if __name__ == "__main__":
    main()
