"""Reading input files: a compressed file cut before its end-of-stream marker is a counted,
recorded ``truncated_file`` reject, never a silent short read (Beam's decompressor just stops)."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
from collections import Counter

import pytest

from pipeline.files.source_readers import SourceReader, WorkUnit
from transforms.rejects import Reject

# bz2 at level 1 has 100 kB blocks: a cut keeps the blocks before it (LINES make ~3 of them).
COMPRESSORS = {
    ".gz": gzip.compress,
    ".bz2": lambda data: bz2.compress(data, compresslevel=1),
    ".xz": lzma.compress,
}
LINES = 3000


def jsonl() -> bytes:
    rows = [
        {"text": f"Document {i} has a sentence or two of its own. It ends here."}
        for i in range(LINES)
    ]
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def read(path, kind: str) -> tuple[list, list[Reject], Counter[str]]:
    counts: Counter[str] = Counter()
    out = list(
        SourceReader("text", "title", False).read(kind, WorkUnit(str(path), path.name), counts)
    )
    return (
        [o for o in out if not isinstance(o, Reject)],
        [o for o in out if isinstance(o, Reject)],
        counts,
    )


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_complete_compressed_jsonl_file_reads_whole(tmp_path, suffix):
    path = tmp_path / f"docs.jsonl{suffix}"
    path.write_bytes(COMPRESSORS[suffix](jsonl()))
    documents, rejects, counts = read(path, "jsonl")
    assert len(documents) == LINES and not rejects and "truncated_file" not in counts


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_cut_compressed_jsonl_file_keeps_its_complete_lines_and_says_so(tmp_path, suffix):
    data = COMPRESSORS[suffix](jsonl())
    path = tmp_path / f"docs.jsonl{suffix}"
    path.write_bytes(data[: len(data) * 2 // 3])
    documents, rejects, counts = read(path, "jsonl")
    assert counts["truncated_file"] == 1
    [reject] = [r for r in rejects if r.reason == "truncated_file"]
    assert "docs.jsonl" in reject.location
    assert 0 < len(documents) < LINES
    assert "invalid_json_line" not in counts  # the cut line is not passed on as a bad line
    kept = [d[0] for d in documents]
    assert kept == [f"jsonl/{path.name}/{i}" for i in range(1, len(documents) + 1)]
    assert f"kept the {len(documents):,} complete line(s)" in reject.excerpt


@pytest.mark.parametrize("suffix", [".gz", ".bz2"])
def test_a_cut_compressed_book_is_skipped_and_counted(tmp_path, suffix):
    prose = " ".join(f"Sentence number {i} tells a small part of a long story." for i in range(400))
    data = COMPRESSORS[suffix]((prose + "\n").encode())
    path = tmp_path / f"book.txt{suffix}"
    path.write_bytes(data[:-20])
    documents, rejects, counts = read(path, "books")
    assert documents == [] and counts["truncated_file"] == 1
    assert [r.reason for r in rejects] == ["truncated_file"]
