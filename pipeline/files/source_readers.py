"""Reading one input unit of the cleaning job (a Wikipedia dump or one stream range of it, a book,
a JSONL or Parquet file) into raw documents ``(doc_id, source, title, paragraphs)`` and Rejects.

Document ids are ``<source>/<file name relative to the inputs' common directory>/<key>``, so they
do not depend on where the corpus is stored; every later stage keys on them.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from apache_beam.io.filesystem import CompressedFile, CompressionTypes
from apache_beam.io.filesystems import FileSystems

from transforms.rejects import Reject
from transforms.text_normalization import collapse_whitespace, without_lone_surrogates

RawDocument = tuple[str, str, str, list[str]]
"""(doc_id, source, title, paragraphs) as read, before normalization."""


@dataclass(frozen=True)
class WorkUnit:
    """An input file, or one stream range of a multistream dump, as read by one worker."""

    path: str
    name: str
    stream_range: object = None


OnRead = Callable[[int], None]
"""Called with the number of (compressed, as stored) input bytes each read consumed."""


class _CountingStream(io.RawIOBase):
    """A raw stream that reports every read's size to ``on_read``."""

    def __init__(self, raw, on_read: OnRead) -> None:
        self._raw = raw
        self._on_read = on_read
        self._position = 0

    @property
    def mode(self) -> str:  # Beam's CompressedFile asks
        return "rb"

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seekable(self) -> bool:
        return self._raw.seekable()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self._position = self._raw.seek(offset, whence)
        return self._position

    def readinto(self, buffer) -> int:
        data = self._raw.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._position += n
        self._on_read(n)
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


def _size(path: str) -> int:
    return FileSystems.match([path])[0].metadata_list[0].size_in_bytes


def _counted(stored, on_read: OnRead | None):
    """``stored`` with every byte read from it reported to ``on_read`` (as is, without one)."""
    if on_read is None:
        return stored
    return io.BufferedReader(_CountingStream(stored, on_read), 1 << 20)


def open_decompressed(path: str, on_read: OnRead | None = None, whole: bool = False):
    """A binary stream of the decompressed file (.bz2, .gz by Beam; .xz by lzma); ``on_read``
    hears of the stored bytes as they are read.

    ``whole``: .gz and .bz2 are read by Python's ``gzip``/``bz2`` instead, which (like ``lzma``)
    raise EOFError when the compressed data ends before its end-of-stream marker: a cut file is
    then told apart from a complete one (Beam's decompressor just stops)."""
    raw = _counted(FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED), on_read)
    if path.endswith(".xz"):
        return lzma.open(raw)
    compression = CompressionTypes.detect_compression_type(path)
    if compression == CompressionTypes.UNCOMPRESSED:
        return raw
    if whole and compression == CompressionTypes.GZIP:
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if whole and compression == CompressionTypes.BZIP2:
        return bz2.BZ2File(raw, mode="rb")
    return CompressedFile(raw, compression_type=compression)


def open_dump(path: str, on_read: OnRead | None = None):
    """``open_decompressed(path, on_read)`` for a Wikipedia dump: a .bz2 file is decompressed by
    indexed_bzip2 where it is installed and the file ends as a bzip2 file does
    (``pipeline.files.bzip2_stream``: the same bytes, ~1.35× faster)."""
    from pipeline.files import bzip2_stream

    if not path.endswith(".bz2") or not bzip2_stream.available():
        return open_decompressed(path, on_read)
    stored = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    try:
        size = stored.seek(0, io.SEEK_END)
        complete = bzip2_stream.ends_with_stream_end(stored)
    except BaseException:
        stored.close()
        raise
    if not complete:  # cut, or not bzip2: read as before
        stored.close()
        return open_decompressed(path, on_read)
    return bzip2_stream.Bzip2Stream(
        _counted(stored, on_read), size, lambda: open_decompressed(path)
    )


def _truncated(f: WorkUnit, local: Counter[str], error: EOFError, after: str) -> Reject:
    local["truncated_file"] += 1
    return Reject.of("truncated_file", f.name, f"{error}; {after}")


def _paragraphs_of_text(text: str) -> list[str]:
    return [p for p in map(collapse_whitespace, text.split("\n\n")) if p]


class SourceReader:
    """Reads units of one job configuration; ``read(kind, unit, counts, on_read)`` yields
    RawDocuments and Rejects (without their source set), adds outcome counts to ``counts`` and
    reports the stored bytes it consumed to ``on_read`` (a stream range and a Parquet file when
    done, other files as they are read)."""

    def __init__(self, text_field: str, title_field: str, keep_disambiguation: bool) -> None:
        self._text_field = text_field
        self._title_field = title_field
        self._keep_disambiguation = keep_disambiguation

    def read(
        self, kind: str, unit: WorkUnit, counts: Counter[str], on_read: OnRead | None = None
    ) -> Iterator[RawDocument | Reject]:
        return getattr(self, f"_read_{kind}")(unit, counts, on_read)

    def _read_wikipedia(self, f: WorkUnit, local: Counter[str], on_read: OnRead | None):
        from pipeline.files.multistream import RangeStream
        from transforms.mediawiki_xml import WikiPage, iter_pages
        from transforms.wikitext import wikitext_to_paragraphs

        opened = RangeStream(f.stream_range) if f.stream_range else open_dump(f.path, on_read)
        with opened as stream:
            for item in iter_pages(
                stream,
                f.name,
                local,
                keep_disambiguation=self._keep_disambiguation,
                report_drops=True,
            ):
                if isinstance(item, WikiPage):
                    paragraphs = wikitext_to_paragraphs(item.text)
                    yield (
                        f"wikipedia/{f.name}/{item.page_id}",
                        "wikipedia",
                        item.title,
                        paragraphs,
                    )
                else:
                    yield item
        if f.stream_range and on_read is not None:
            r = f.stream_range
            on_read((r.end if r.end is not None else _size(r.path)) - r.start)

    def _read_books(self, f: WorkUnit, local: Counter[str], on_read: OnRead | None):
        from transforms.book_text import clean_book

        try:
            with open_decompressed(f.path, on_read, whole=True) as stream:
                data = stream.read()
        except EOFError as e:
            yield _truncated(f, local, e, "the book is skipped")
            return
        if not data:
            local["empty_file"] += 1
            yield Reject.of("empty_file", f.name, "")
            return
        if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
            local["binary_file"] += 1
            yield Reject.of("binary_file", f.name, data[:80])
            return
        paragraphs, rejects = clean_book(data, f.name, local)
        yield from rejects
        if paragraphs:
            title = f.name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
            yield (f"books/{f.name}", "books", title, paragraphs)

    def _read_jsonl(self, f: WorkUnit, local: Counter[str], on_read: OnRead | None):
        field_name, title_field = self._text_field, self._title_field
        number = 0
        try:
            with open_decompressed(f.path, on_read, whole=True) as stream:
                # Beam's decompressing file objects are not iterable: read line by line.
                for number, raw in enumerate(iter(stream.readline, b""), start=1):
                    if not raw.strip():
                        continue
                    try:
                        obj = json.loads(raw)
                    except (json.JSONDecodeError, UnicodeDecodeError) as e:
                        local["invalid_json_line"] += 1
                        yield Reject.of("invalid_json_line", f"{f.name}:line {number}: {e}", raw)
                        continue
                    text = obj.get(field_name) if isinstance(obj, dict) else None
                    if not isinstance(text, str):
                        local["missing_text_field"] += 1
                        yield Reject.of("missing_text_field", f"{f.name}:line {number}", raw)
                        continue
                    title = without_lone_surrogates(str(obj.get(title_field, "")))
                    yield (
                        f"jsonl/{f.name}/{number}",
                        "jsonl",
                        title,
                        _paragraphs_of_text(text),
                    )
        except EOFError as e:
            # The lines read before the cut are kept; the cut line itself is never returned.
            yield _truncated(f, local, e, f"kept the {number:,} complete line(s) before the cut")

    def _read_parquet(self, f: WorkUnit, local: Counter[str], on_read: OnRead | None):
        import pyarrow.parquet as pq

        field_name, title_field = self._text_field, self._title_field
        with FileSystems.open(f.path, compression_type=CompressionTypes.UNCOMPRESSED) as stream:
            parquet = pq.ParquetFile(stream)
            names = parquet.schema_arrow.names
            if field_name not in names:
                local["missing_text_field"] += 1
                yield Reject.of("missing_text_field", f.name, f"columns: {', '.join(names)}")
                return
            columns = [field_name] + ([title_field] if title_field in names else [])
            row = 0
            for batch in parquet.iter_batches(columns=columns, batch_size=1024):
                data = batch.to_pydict()
                titles = data.get(title_field, [""] * batch.num_rows)
                for text, title in zip(data[field_name], titles, strict=True):
                    if not isinstance(text, str):
                        local["missing_text_field"] += 1
                        yield Reject.of("missing_text_field", f"{f.name}:row {row}", repr(text))
                    else:
                        yield (
                            f"parquet/{f.name}/{row}",
                            "parquet",
                            str(title or ""),
                            _paragraphs_of_text(text),
                        )
                    row += 1
        if on_read is not None:
            on_read(_size(f.path))


# MIDDLE#
