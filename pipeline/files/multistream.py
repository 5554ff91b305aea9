"""Splitting a multistream Wikipedia dump across workers by its index's stream offsets.

``X-multistream.xml.bz2`` is a concatenation of independent bz2 streams (the first holds the
``<mediawiki>`` header and ``<siteinfo>``, then about 100 pages per stream); the companion
``X-multistream-index.txt.bz2`` lists ``offset:page_id:title`` per page. A byte range that starts and
ends on stream boundaries decompresses on its own into a run of whole ``<page>`` elements, so a
dump becomes many independent units of work. Each range is read as a stream (one bz2 stream at a
time), wrapped in a synthetic ``<mediawiki>`` root when it lacks the real one.
"""

from __future__ import annotations

import bz2
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

_SUFFIX = re.compile(r"-multistream\.xml\.bz2$")
_READ = 1 << 20


@dataclass(frozen=True)
class StreamRange:
    """Compressed bytes ``[start, end)`` of a multistream dump (``end`` None: to the file's end)."""

    path: str
    start: int
    end: int | None
    part: int


def index_path(dump_path: str) -> str | None:
    """The index beside a ``*-multistream.xml.bz2`` dump, if the name fits and it exists."""
    if not _SUFFIX.search(dump_path):
        return None
    candidate = _SUFFIX.sub("-multistream-index.txt.bz2", dump_path)
    return candidate if FileSystems.exists(candidate) else None


def stream_offsets(index: str) -> list[int]:
    """Distinct stream start offsets listed in the index (sorted)."""
    offsets: set[int] = set()
    with FileSystems.open(index, compression_type=CompressionTypes.BZIP2) as f:
        while True:
            line = f.readline()
            if not line:
                break
            head = line.split(b":", 1)[0]
            if head.isdigit():
                offsets.add(int(head))
    return sorted(offsets)


def split_ranges(path: str, offsets: list[int], target_bytes: int) -> list[StreamRange]:
    """Consecutive runs of streams of about ``target_bytes`` compressed bytes each; the first
    range starts at 0 (the header stream) and the last runs to the end of the file."""
    bounds = [0]
    for offset in offsets:
        if offset - bounds[-1] >= target_bytes:
            bounds.append(offset)
    ranges = [
        StreamRange(path, start, end, i)
        for i, (start, end) in enumerate(zip(bounds, bounds[1:] + [None], strict=True))
    ]
    return ranges


def _decompressed_chunks(path: str, start: int, end: int | None) -> Iterator[bytes]:
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as raw:
        raw.seek(start)
        remaining = None if end is None else end - start
        decompressor = bz2.BZ2Decompressor()
        while remaining is None or remaining > 0:
            data = raw.read(_READ if remaining is None else min(_READ, remaining))
            if not data:
                break
            if remaining is not None:
                remaining -= len(data)
            while data:
                yield decompressor.decompress(data)
                if decompressor.eof:
                    data = decompressor.unused_data
                    decompressor = bz2.BZ2Decompressor()
                else:
                    data = b""


class RangeStream(io.RawIOBase):
    """A readable stream of one range's XML, with a synthetic root where the real one is absent."""

    def __init__(self, r: StreamRange) -> None:
        self._parts = self._generate(r)
        self._buffer = b""

    @staticmethod
    def _generate(r: StreamRange) -> Iterator[bytes]:
        if r.start != 0:
            yield b"<mediawiki>"
        yield from _decompressed_chunks(r.path, r.start, r.end)
        if r.end is not None:
            yield b"</mediawiki>"

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._parts, None)
            if chunk is None:
                break
            self._buffer += chunk
        if size < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out
