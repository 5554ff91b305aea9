"""A synthetic JSONL corpus of any size, recombined from the sentences of the shared corpora.

    .venv/bin/python -m benchmarks.synthetic_corpus --megabytes 100 [--seed 12345]

Not part of the product: benchmark input only, built at benchmark time under benchmarks/work/
(gitignored), never committed. The sentence pool comes from ``../shared/corpora``: the 14
Gutenberg books (``transforms.book_text.clean_book``) and every MediaWiki dump in ``wiki/``
(``transforms.mediawiki_xml.iter_pages`` + ``transforms.wikitext.wikitext_to_paragraphs``), split
with the project's Punkt splitter on the shared punkt_tab parameters, deduplicated, and cached in
``benchmarks/work/sentence-pool/``.

Documents are new: each has 3-8 paragraphs (``--paragraphs``) of 2-8 sentences drawn uniformly at random (with a
seeded numpy generator) from the whole pool, never contiguous runs, so no two documents are exact
or near duplicates (~3 KB each, like a Wikipedia article). One JSON object per line,
``{"title": ..., "text": ...}``, paragraphs separated by a blank line, spread over 8 files whose
sizes add up to the requested megabytes (1 MB = 10^6 bytes of UTF-8). The output for a size and
seed is deterministic: file ``i`` uses the generator seeded with ``(seed, i)``. A finished corpus
directory holds ``corpus.json`` (written last) and is reused.
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import hashlib
import json
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np

from benchmarks.books_corpus import CORPORA, ROOT

WORK = ROOT / "benchmarks" / "work"
POOL_DIR = WORK / "sentence-pool"
POOL_VERSION = 1
NUM_FILES = 8
DEFAULT_SEED = 12345
PARAGRAPHS = (3, 8)  # inclusive range per document
SENTENCES = (2, 8)  # inclusive range per paragraph
MIN_WORDS, MAX_CHARS = 3, 1_000
BATCH_DOCUMENTS = 4_096


# --- the sentence pool ------------------------------------------------------------------------


def _sources() -> list[Path]:
    books = sorted((CORPORA / "books").glob("*.txt"))
    wiki = sorted(p for p in (CORPORA / "wiki").iterdir() if ".xml" in p.name)
    if not books or not wiki:
        raise FileNotFoundError(f"books/ or wiki/ missing under {CORPORA}")
    return books + wiki


def _sources_fingerprint(sources: list[Path]) -> str:
    parts = [POOL_VERSION, MIN_WORDS, MAX_CHARS]
    parts += [(p.parent.name, p.name, p.stat().st_size) for p in sources]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]


def _open_dump(path: Path):
    if path.name.endswith(".bz2"):
        return bz2.open(path, "rb")
    if path.name.endswith(".gz"):
        return gzip.open(path, "rb")
    return path.open("rb")


def _paragraphs_of(path: Path) -> list[str]:
    from transforms.book_text import clean_book
    from transforms.mediawiki_xml import WikiPage, iter_pages
    from transforms.wikitext import wikitext_to_paragraphs

    stats: Counter[str] = Counter()
    if path.parent.name == "books":
        paragraphs, _rejects = clean_book(path.read_bytes(), path.name, stats)
        return paragraphs
    out: list[str] = []
    with _open_dump(path) as stream:
        for item in iter_pages(stream, path.name, stats):
            if isinstance(item, WikiPage):
                out.extend(wikitext_to_paragraphs(item.text))
    return out


def build_pool(progress=print) -> list[str]:
    """The deduplicated sentences of every shared book and dump, in source order."""
    from benchmarks.markup_debris import markup_debris
    from pipeline.files.punkt_files import load_splitter
    from transforms.text_normalization import normalize_text

    splitter = load_splitter("english", [CORPORA / "nltk_data"])
    seen: set[str] = set()
    pool: list[str] = []
    by_source: dict[str, int] = {}
    for path in _sources():
        before = len(pool)
        for paragraph in _paragraphs_of(path):
            for sentence in splitter.split(normalize_text(paragraph)):
                sentence = " ".join(sentence.split())
                if (
                    len(sentence.split()) < MIN_WORDS
                    or len(sentence) > MAX_CHARS
                    or markup_debris(sentence)
                    or sentence in seen
                ):
                    continue
                seen.add(sentence)
                pool.append(sentence)
        by_source[f"{path.parent.name}/{path.name}"] = len(pool) - before
    progress(
        f"sentence pool: {len(pool):,} sentences "
        f"({sum(v for k, v in by_source.items() if k.startswith('books/')):,} from books, "
        f"{sum(v for k, v in by_source.items() if k.startswith('wiki/')):,} from wiki)"
    )
    return pool


def load_pool(progress=print) -> list[str]:
    """The sentence pool, from the cache in benchmarks/work/sentence-pool/ or built (~20 s)."""
    sources = _sources()
    fp = _sources_fingerprint(sources)
    text_path, meta_path = POOL_DIR / "sentences.txt", POOL_DIR / "pool.json"
    if meta_path.exists() and json.loads(meta_path.read_text()).get("fingerprint") == fp:
        return text_path.read_text(encoding="utf-8").split("\n")[:-1]
    started = time.monotonic()
    pool = build_pool(progress)
    POOL_DIR.mkdir(parents=True, exist_ok=True)
    tmp = text_path.with_suffix(".tmp")
    tmp.write_text("".join(f"{s}\n" for s in pool), encoding="utf-8")
    os.replace(tmp, text_path)
    meta = {
        "fingerprint": fp,
        "sentences": len(pool),
        "chars": sum(map(len, pool)),
        "sources": [f"{p.parent.name}/{p.name}" for p in sources],
        "seconds": round(time.monotonic() - started, 1),
    }
    meta_path.write_text(json.dumps(meta, indent=2))
    return pool


# --- documents --------------------------------------------------------------------------------


def _write_file(
    path: Path,
    pool: np.ndarray,
    rng: np.random.Generator,
    target_bytes: int,
    file_index: int,
    paragraphs: tuple[int, int] = PARAGRAPHS,
) -> tuple[int, int]:
    """Writes documents of ``paragraphs`` (inclusive range) paragraphs each to ``path`` until it
    holds ``target_bytes``; returns (documents, bytes)."""
    documents = written = 0
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:
        while written < target_bytes:
            n_par = rng.integers(paragraphs[0], paragraphs[1] + 1, size=BATCH_DOCUMENTS)
            n_sent = rng.integers(SENTENCES[0], SENTENCES[1] + 1, size=int(n_par.sum()))
            picked = pool[rng.integers(0, len(pool), size=int(n_sent.sum()))].tolist()
            s_end = np.cumsum(n_sent).tolist()
            texts = [
                " ".join(picked[start:end])
                for start, end in zip([0, *s_end[:-1]], s_end, strict=True)
            ]
            p_end = np.cumsum(n_par).tolist()
            lines = []
            for start, end in zip([0, *p_end[:-1]], p_end, strict=True):
                line = json.dumps(
                    {
                        "title": f"Synthetic document {file_index}-{documents}",
                        "text": "\n\n".join(texts[start:end]),
                    },
                    ensure_ascii=False,
                ).encode("utf-8")
                lines.append(line)
                documents += 1
                written += len(line) + 1
                if written >= target_bytes:
                    break
            f.write(b"\n".join(lines) + b"\n")
    os.replace(tmp, path)
    return documents, written


def build_corpus(
    megabytes: float,
    seed: int = DEFAULT_SEED,
    progress=print,
    paragraphs: tuple[int, int] = PARAGRAPHS,
) -> dict:
    """The corpus of ``megabytes`` MB for ``seed``: built, or reused from benchmarks/work.
    ``paragraphs``: per document (default 3-8; ``(1, 3)`` makes short articles, most of a
    seq-512 row padding unpacked, as full English Wikipedia's stubs).

    Returns its ``corpus.json``: ``files`` (absolute paths), ``documents``, ``bytes``, ``seed``...
    """
    name = f"synthetic-{megabytes:g}mb" + ("" if seed == DEFAULT_SEED else f"-seed{seed}")
    if tuple(paragraphs) != PARAGRAPHS:
        name += f"-paragraphs{paragraphs[0]}-{paragraphs[1]}"
    directory = WORK / name
    marker = directory / "corpus.json"
    if marker.exists():
        meta = json.loads(marker.read_text())
        if all(Path(f).exists() for f in meta["files"]):
            return meta
    started = time.monotonic()
    pool = np.array(load_pool(progress), dtype=object)
    pool_seconds = time.monotonic() - started
    directory.mkdir(parents=True, exist_ok=True)
    target = int(megabytes * 1e6)
    per_file = [
        target // NUM_FILES + (1 if i < target % NUM_FILES else 0) for i in range(NUM_FILES)
    ]
    files, documents, total = [], 0, 0
    for i, want in enumerate(per_file):
        path = directory / f"part-{i:02d}-of-{NUM_FILES:02d}.jsonl"
        rng = np.random.default_rng([seed, i])
        docs, size = _write_file(path, pool, rng, want, i, tuple(paragraphs))
        files.append(str(path))
        documents += docs
        total += size
    meta = {
        "megabytes": megabytes,
        "seed": seed,
        "paragraphs": list(paragraphs),
        "files": files,
        "documents": documents,
        "bytes": total,
        "bytes_per_document": round(total / max(documents, 1)),
        "pool_sentences": len(pool),
        "pool_seconds": round(pool_seconds, 1),
        "generate_seconds": round(time.monotonic() - started - pool_seconds, 1),
    }
    marker.write_text(json.dumps(meta, indent=2))
    progress(
        f"corpus {name}: {documents:,} documents, {total / 1e6:.1f} MB in {NUM_FILES} files "
        f"(pool {pool_seconds:.1f} s, generation {meta['generate_seconds']} s)"
    )
    return meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--megabytes", type=float, nargs="+", default=[100.0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument(
        "--paragraphs", type=int, nargs=2, default=list(PARAGRAPHS), help="per document, LO HI"
    )
    args = ap.parse_args()
    for mb in args.megabytes:
        meta = build_corpus(mb, args.seed, paragraphs=tuple(args.paragraphs))
        print(json.dumps({k: v for k, v in meta.items() if k != "files"}))


if __name__ == "__main__":
    main()
