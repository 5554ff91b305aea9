"""Builds a BERT-format benchmark/test corpus from the Project Gutenberg books in shared/corpora.

Not part of the product (the cleaning stage is): a deliberately simple converter so that the
instance stage can be measured and tested on real text. Each book is decoded (BOM, UTF-8, else
ISO-8859-1), cut to the text between its START/END markers, re-joined into paragraphs, split into
sentences with NLTK Punkt (``shared/corpora/nltk_data``), and grouped into documents of about
``sentences_per_document`` sentences (Wikipedia articles hold ~30). To reach a target size the books
are repeated with a different grouping each time, so repeated text forms different documents.
"""

from __future__ import annotations

import argparse
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
_START = re.compile(r"^\*\*\*\s*START OF (THIS|THE) PROJECT GUTENBERG.*$", re.M)
_END = re.compile(r"^\*\*\*\s*END OF (THIS|THE) PROJECT GUTENBERG.*$", re.M)


def read_book(path: Path) -> str:
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    text = text.replace("\r\n", "\n")
    start, end = _START.search(text), _END.search(text)
    return text[start.end() if start else 0 : end.start() if end else len(text)]


@functools.cache
def punkt_sentence_splitter():
    """NLTK's English Punkt (what ``nltk.sent_tokenize`` uses) from ``shared/corpora/nltk_data``.
    ``nltk.data.path`` is put back as it was: a process that builds a corpus (a test session)
    must not change where later code in it finds punkt_tab."""
    import nltk
    from nltk.tokenize import PunktTokenizer

    saved = list(nltk.data.path)
    nltk.data.path.insert(0, str(CORPORA / "nltk_data"))
    try:
        return PunktTokenizer("english")
    finally:
        nltk.data.path[:] = saved


def book_sentences(path: Path) -> list[list[str]]:
    """Paragraphs of the book, each a list of sentences."""
    splitter = punkt_sentence_splitter()
    paragraphs = []
    for block in re.split(r"\n\s*\n", read_book(path)):
        text = " ".join(block.split())
        if len(text) < 40:  # headings, chapter numbers, stray lines
            continue
        sentences = [s for s in splitter.tokenize(text) if s.strip()]
        if sentences:
            paragraphs.append(sentences)
    return paragraphs


def build_corpus(
    output_dir: Path, target_bytes: int, sentences_per_document: int = 30
) -> list[Path]:
    """Writes ``book-*.txt`` files in BERT format totalling at least ``target_bytes``."""
    output_dir.mkdir(parents=True, exist_ok=True)
    books = sorted((CORPORA / "books").glob("*.txt"))
    if not books:
        raise FileNotFoundError(f"no books under {CORPORA / 'books'}")
    parsed = [(b.stem, book_sentences(b)) for b in books]
    written: list[Path] = []
    total = 0
    rep = 0
    while total < target_bytes:
        group = sentences_per_document + 7 * (rep % 5) - 10 * (rep % 2)
        for stem, paragraphs in parsed:
            path = output_dir / f"book-{stem}-{rep:02d}.txt"
            docs: list[list[str]] = []
            current: list[str] = []
            for para in paragraphs[rep % 3 :]:
                current.extend(para)
                if len(current) >= group:
                    docs.append(current)
                    current = []
            if current:
                docs.append(current)
            text = "\n\n".join("\n".join(d) for d in docs) + "\n"
            path.write_text(text, encoding="utf-8")
            written.append(path)
            total += len(text.encode("utf-8"))
            if total >= target_bytes:
                break
        rep += 1
    return written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", type=Path, required=True)
    ap.add_argument("--megabytes", type=float, default=30.0)
    args = ap.parse_args()
    files = build_corpus(args.output, int(args.megabytes * 1e6))
    size = sum(f.stat().st_size for f in files)
    print(f"{len(files)} files, {size / 1e6:.1f} MB in {args.output}")


if __name__ == "__main__":
    main()
