"""Wikipedia dumps (.bz2) decompressed by indexed_bzip2 (``pipeline.files.bzip2_stream``): the
same bytes as Beam's decompressor, and damaged files ending as they did with it."""

from __future__ import annotations

import bz2
import random
from collections import Counter

import pytest

from pipeline.files import bzip2_stream
from pipeline.files.bzip2_stream import Bzip2Stream, ends_with_stream_end
from pipeline.files.source_readers import SourceReader, WorkUnit, open_decompressed, open_dump
from tests.conftest import require_corpora

pytestmark = pytest.mark.skipif(not bzip2_stream.available(), reason="indexed_bzip2 missing")


def text(lines: int = 40000) -> bytes:
    """~1.7 MB of XML-ish text: several 100 kB blocks at compression level 1."""
    rng = random.Random(3)
    words = ["<page>", "alpha", "beta", "gamma", "</page>", "delta", "epsilon", "\n"]
    return "".join(f"{i} {' '.join(rng.choices(words, k=6))}\n" for i in range(lines)).encode()


def drained(stream) -> tuple[bytes, str | None]:
    """Everything ``stream`` gives in 64 kB reads, and the error it ends with (None: its end)."""
    out = bytearray()
    try:
        with stream as f:
            while block := f.read(1 << 16):
                out += block
    except Exception as e:
        return bytes(out), f"{type(e).__name__}: {e}"
    return bytes(out), None


def test_a_complete_file_ends_with_a_stream_end_and_a_cut_one_does_not(tmp_path):
    data = text(4000)
    for level in (1, 9):
        whole = bz2.compress(data, compresslevel=level)
        for blob in (whole, whole + bz2.compress(b"more"), bz2.compress(b"")):
            (tmp_path / "x.bz2").write_bytes(blob)
            with open(tmp_path / "x.bz2", "rb") as f:
                assert ends_with_stream_end(f) and f.tell() == 0
        cuts = [len(whole) - k for k in range(1, 12)] + random.Random(1).sample(
            range(len(whole)), 200
        )
        for cut in cuts:
            (tmp_path / "x.bz2").write_bytes(whole[:cut])
            with open(tmp_path / "x.bz2", "rb") as f:
                assert not ends_with_stream_end(f), cut
    for blob in (b"", b"BZh9", b"not bzip2 at all, plainly", bz2.compress(data) + b"tail"):
        (tmp_path / "x.bz2").write_bytes(blob)
        with open(tmp_path / "x.bz2", "rb") as f:
            assert not ends_with_stream_end(f)


def test_dumps_read_as_beams_decompressor_reads_them(tmp_path):
    """The same bytes for whole and multistream files; a cut file, trailing bytes or bytes that
    are not bzip2 are read by Beam's decompressor itself (the same quiet end or error); a corrupt
    block inside a complete file, or damage between two streams, ends with Beam's error after
    every good block before it."""
    data = text()
    whole = bz2.compress(data, compresslevel=1)
    corrupt_late = whole[: len(whole) - 3000] + bytes(100) + whole[len(whole) - 2900 :]
    second = bz2.compress(b"a second stream of the dump\n" * 50)
    bad_header = bytearray(whole + second)
    bad_header[len(whole) + 1] ^= 1  # "BZh" of the second stream damaged
    cases = {
        "whole": (whole, "fast"),
        "streams": (whole + bz2.compress(data[:5000]), "fast"),
        "cut": (whole[: len(whole) // 2], "slow"),
        "trailing": (whole + b"garbage", "slow"),
        "plain": (data[:3000], "slow"),
        "empty": (b"", "slow"),
        "corrupt_late": (corrupt_late, "fast"),
        # between two streams: indexed_bzip2 would end quietly after the first
        "stray_byte": (whole + b"\n" + second, "fast"),
        "stray_zeros": (whole + bytes(4) + second, "fast"),
        "bad_header": (bytes(bad_header), "fast"),
    }
    for name, (blob, path_taken) in cases.items():
        path = tmp_path / f"{name}.xml.bz2"
        path.write_bytes(blob)
        seen: list[int] = []
        fast = open_dump(str(path), seen.append)
        assert isinstance(fast, Bzip2Stream) is (path_taken == "fast"), name
        assert fast.read(0) == b""  # asks for nothing: not an end of the data
        got, error = drained(fast)
        expected, expected_error = drained(open_decompressed(str(path)))
        assert error == expected_error, name
        if name == "corrupt_late":
            assert error is not None and data.startswith(got)  # the good blocks, then the error
            assert len(got) >= 100_000 and fast.fell_back
        elif name in ("stray_byte", "stray_zeros", "bad_header"):
            # the whole first stream (Beam: as much of it as its first read held), then the error
            assert got == data and error is not None and fast.fell_back, name
        else:
            assert got == expected, name
            assert sum(seen) == len(blob), name  # every stored byte reported, once
            assert not getattr(fast, "fell_back", False), name


def test_without_indexed_bzip2_dumps_are_read_by_beam(tmp_path, monkeypatch):
    path = tmp_path / "x.xml.bz2"
    path.write_bytes(bz2.compress(text(2000)))
    monkeypatch.setattr(bzip2_stream, "indexed_bzip2", None)
    stream = open_dump(str(path))
    assert not isinstance(stream, Bzip2Stream)
    assert drained(stream) == (text(2000), None)


def test_a_real_dump_gives_the_same_pages_either_way(monkeypatch):
    path = require_corpora(
        "wiki", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    )
    unit = WorkUnit(str(path), path.name)

    def pages() -> tuple[list, Counter[str]]:
        counts: Counter[str] = Counter()
        return list(SourceReader("text", "title", False).read("wikipedia", unit, counts)), counts

    fast = pages()
    monkeypatch.setattr(bzip2_stream, "indexed_bzip2", None)
    assert fast == pages() and fast[1]["pages_kept"] > 90
