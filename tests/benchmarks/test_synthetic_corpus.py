"""The benchmark corpus generator: a file larger than one batch of documents is written whole
(the 400 MB corpus of ``benchmarks.run_benchmark`` needs several batches per file)."""

from __future__ import annotations

import json

import numpy as np

from benchmarks.synthetic_corpus import BATCH_DOCUMENTS, _write_file


def test_a_file_of_several_batches_has_every_document(tmp_path):
    pool = np.array([f"Sentence number {i} is here." for i in range(50)], dtype=object)
    path = tmp_path / "part.jsonl"
    documents, written = _write_file(path, pool, np.random.default_rng(1), 3_000_000, 0, (1, 3))
    lines = path.read_bytes().splitlines()
    assert documents == len(lines) > BATCH_DOCUMENTS  # more than one batch
    assert written == path.stat().st_size >= 3_000_000
    for line in lines[:: max(1, len(lines) // 50)]:
        record = json.loads(line)
        paragraphs = record["text"].split("\n\n")
        assert 1 <= len(paragraphs) <= 3
        assert all(p.startswith("Sentence number ") for p in paragraphs)
