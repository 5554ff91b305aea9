"""A multistream dump split by its index gives exactly the documents of reading it whole."""

from __future__ import annotations

import bz2
import glob
from pathlib import Path

import pyarrow.parquet as pq

from benchmarks.multistream_dump import write_multistream_dump
from pipeline.files.multistream import RangeStream, index_path, split_ranges, stream_offsets
from tests.conftest import require_corpora
from tests.pipeline.jobs.test_clean import clean

WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def make_multistream(target: Path, pages_per_stream: int = 10) -> Path:
    """Writes X-multistream.xml.bz2 + index from the shared enwiki chunk, as Wikimedia lays out
    theirs: a header stream (through </siteinfo>), then streams of pages, the last one closing
    the root."""
    xml = bz2.decompress(require_corpora("wiki", WIKI).read_bytes()).decode("utf-8")
    head_end = xml.index("</siteinfo>") + len("</siteinfo>\n")
    body = xml[head_end:]
    body = body[: body.rindex("</mediawiki>")]
    pages = [p + "</page>\n" for p in body.split("</page>")[:-1]]
    dump = target / "test-multistream.xml.bz2"
    index = target / "test-multistream-index.txt.bz2"
    write_multistream_dump(xml[:head_end], pages, dump, index, pages_per_stream)
    return dump


def test_ranges_cover_the_file_and_decompress_to_whole_pages(tmp_path):
    dump = make_multistream(tmp_path)
    index = index_path(str(dump))
    assert index is not None
    offsets = stream_offsets(index)
    assert len(offsets) == 21  # 206 pages in streams of 10
    ranges = split_ranges(str(dump), offsets, 200_000)
    assert ranges[0].start == 0 and ranges[-1].end is None and len(ranges) > 3
    assert [r.end for r in ranges[:-1]] == [r.start for r in ranges[1:]]
    pages = sum(RangeStream(r).read().count(b"<page>") for r in ranges)
    assert pages == 206


def test_split_run_equals_whole_run(tmp_path, monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(require_corpora("nltk_data")))
    (tmp_path / "in").mkdir()
    dump = make_multistream(tmp_path / "in")
    (tmp_path / "whole").mkdir()
    (tmp_path / "whole" / "test-multistream.xml.bz2").write_bytes(dump.read_bytes())
    split, out_split = clean(
        tmp_path, "split", wikipedia=[str(tmp_path / "in" / "*")], multistream_mb=200_000 / 2**20
    )
    whole, out_whole = clean(tmp_path, "whole-out", wikipedia=[str(tmp_path / "whole" / "*")])
    assert split["counts"]["wikipedia"]["multistream_parts"] > 3
    assert "multistream_parts" not in whole["counts"]["wikipedia"]

    def documents(out: Path) -> dict[str, list[str]]:
        table = pq.read_table(sorted(glob.glob(str(out / "documents-*.parquet"))))
        return {r["doc_id"]: r["sentences"] for r in table.to_pylist()}

    assert documents(out_split) == documents(out_whole)
    for key in ("pages_kept", "dropped_redirect", "dropped_namespace", "dropped_disambiguation"):
        assert split["counts"]["wikipedia"][key] == whole["counts"]["wikipedia"][key]
