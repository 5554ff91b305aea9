"""The Punkt sentence splitter alone: MB/s of text per core, now against a git revision.

    .venv/bin/python -m benchmarks.splitter_benchmark [--baseline REV] [--repeat 3]

One process (one core), no Beam. The text: the normalized paragraphs of the shared enwiki chunk
(what ``bertprep clean --wikipedia`` splits) and of the shared Gutenberg books (what
``--books`` splits). With ``--baseline``, that revision's ``transforms/sentences.py`` is loaded
beside the current one and both split the same paragraphs, in rotation, ``--repeat`` times each
(the best time counts); their sentences must be identical.
"""

from __future__ import annotations

import argparse
import bz2
import importlib.util
import io
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.books_corpus import CORPORA, ROOT

WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def wiki_paragraphs() -> list[str]:
    from transforms.mediawiki_xml import WikiPage, iter_pages
    from transforms.text_normalization import normalize_text
    from transforms.wikitext import wikitext_to_paragraphs

    data = bz2.decompress((CORPORA / "wiki" / WIKI).read_bytes())
    return [
        normalize_text(p)
        for page in iter_pages(io.BytesIO(data), WIKI, Counter())
        if isinstance(page, WikiPage)
        for p in wikitext_to_paragraphs(page.text)
    ]


def book_paragraphs() -> list[str]:
    from transforms.book_text import clean_book

    out: list[str] = []
    for path in sorted((CORPORA / "books").glob("*.txt")):
        out += clean_book(path.read_bytes(), path.name, Counter())[0]
    return out


def _baseline_module(rev: str):
    """``transforms/sentences.py`` at ``rev``, loaded as a module of its own."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:transforms/sentences.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "baseline_sentences.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("baseline_sentences", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _best(split, paragraphs: list[str], repeat: int) -> tuple[float, list[list[str]]]:
    best, out = float("inf"), []
    for _ in range(repeat):
        start = time.perf_counter()
        out = [split(p) for p in paragraphs]
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", metavar="REV")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from pipeline.files.punkt_files import load_punkt_tables
    from transforms.sentences import SentenceSplitter

    tables = load_punkt_tables("english", [CORPORA / "nltk_data"])
    if tables is None:
        raise SystemExit("punkt_tab not found under shared/corpora/nltk_data")
    splitters = {"now": SentenceSplitter(tables).split}
    if args.baseline:
        baseline = _baseline_module(args.baseline)
        splitters[args.baseline] = baseline.SentenceSplitter(tables.to_parameters()).split
    print("| text | splitter | paragraphs | MB of text | sentences | best s | MB/s per core |")
    print("|---|---|---|---|---|---|---|")
    for name, paragraphs in (("enwiki chunk", wiki_paragraphs()), ("books", book_paragraphs())):
        mb = sum(len(p.encode()) for p in paragraphs) / 1e6
        results: dict[str, tuple[float, list[list[str]]]] = {}
        for split in splitters.values():
            split("Warm up. The tables load.")
        for _ in range(args.repeat):  # in rotation, so a busy spell hits both alike
            for label, split in splitters.items():
                seconds, out = _best(split, paragraphs, 1)
                results[label] = (min(seconds, results.get(label, (seconds, out))[0]), out)
        outputs = [out for _, out in results.values()]
        if any(out != outputs[0] for out in outputs):
            raise SystemExit(f"{name}: the splitters disagree")
        for label, (seconds, out) in results.items():
            sentences = sum(map(len, out))
            print(
                f"| {name} | {label} | {len(paragraphs):,} | {mb:.2f} | {sentences:,} |"
                f" {seconds:.2f} | {mb / seconds:.2f} |"
            )


if __name__ == "__main__":
    main()
