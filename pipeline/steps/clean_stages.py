"""The DoFns of the cleaning job. Documents move through staged chunk files; Beam carries chunk
descriptions, packed key tables and the (few) duplicates.

1. ``StageDocumentsFn``: one input unit → normalized documents written to staged chunk files
   (``.staging/chunk-UUUUU-CCCC.parquet``, at most ``chunk_documents`` documents or
   ``chunk_bytes`` of text each) by the worker that read them; emits a ``StagedChunk`` per chunk
   and, per chunk, packed exact keys (per hash partition); LSH band hashes go to a band file
   beside the chunk, and Beam carries only (band, chunk) names.
2. ``ExactDuplicatesFn`` (per hash partition) and ``VerifyNearDuplicatesFn`` (once, over the
   candidate pairs of every band) → the locations of the documents to drop.
3. ``FinishChunkFn``: a chunk and its drops → the surviving documents split into sentences,
   written to ``documents-UUUUU-CCCC.parquet`` (and ``text/part-UUUUU-CCCC.txt``).

With no dedup and a pretrained sentence splitter nothing is dropped and nothing is trained, so
``StageDocumentsFn`` given ``finish`` (``FinishSettings``) writes those final files itself, chunk
for chunk the same: no staged chunk, no second stage.

Every side-effect file has a deterministic name and content and is committed by rename, so a
retried bundle rewrites the same file and a half-written one is never read. Rejects go to part
files (``.staging/rejects-*.jsonl``) merged in name order at the end.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import (
    ParquetPart,
    RejectsPart,
    TextPart,
    iter_parquet_rows,
    read_parquet,
    write_bytes_atomically,
)
from pipeline.files.source_readers import OnRead, SourceReader, WorkUnit
from pipeline.runtime.counters import CountingDoFn
from pipeline.runtime.progress import ProgressReporter
from transforms import duplicate_keys as dk
from transforms.punkt_tables import PunktTables
from transforms.rejects import Reject
from transforms.seeding import stable_hasher

STAGING = ".staging"
EXACT_TAG = "exact"
BANDS_TAG = "bands"
EXACT_PARTITIONS = 16
_END = object()


def chunk_path(staging: str, unit: int, chunk: int) -> str:
    return FileSystems.join(staging, f"chunk-{unit:05d}-{chunk:04d}.parquet")


def bands_path(staging: str, unit: int, chunk: int) -> str:
    """The chunk's LSH band hashes: uint64, band-major (band b of all rows, then band b + 1)."""
    return FileSystems.join(staging, f"bands-{unit:05d}-{chunk:04d}.u64")


def output_name(unit: int, chunk: int) -> str:
    return f"{unit:05d}-{chunk:04d}"


def source_of(doc_id: str) -> str:
    return doc_id.split("/", 1)[0]


@dataclass(frozen=True)
class StagedChunk:
    """A staged chunk file: ``documents`` rows; ``punkt_keys`` (uint64 bytes, one per row) when
    the sentence splitter is to be trained on a sample of the corpus."""

    unit: int
    chunk: int
    documents: int
    punkt_keys: bytes = b""

    @property
    def key(self) -> tuple[int, int]:
        return (self.unit, self.chunk)


def _staged_schema(with_signatures: bool):
    import pyarrow as pa

    fields = [
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("title", pa.string()),
        ("paragraphs", pa.list_(pa.string())),
    ]
    if with_signatures:
        fields.append(("signature", pa.binary()))
    return pa.schema(fields)


class StageDocumentsFn(CountingDoFn):
    """(unit index, source kind, WorkUnit) → StagedChunk (main), packed exact keys (``exact``:
    (partition, bytes)), band file names (``bands``: (band, (unit, chunk, documents))), counts
    (``stats``).

    Counts are prefixed with the source kind (``wikipedia.dropped_redirect``, ...).
    """

    def __init__(
        self,
        reader: SourceReader,
        staging: str,
        min_words: int,
        dedup: str,
        sample_punkt_seed: int | None,
        chunk_documents: int,
        chunk_bytes: int,
        progress: ProgressReporter | None = None,
        finish: FinishSettings | None = None,
        tables: PunktTables | None = None,
    ) -> None:
        if finish is not None and (
            dedup != "none" or sample_punkt_seed is not None or tables is None
        ):
            raise ValueError("finish needs dedup none and a pretrained sentence splitter's tables")
        self._reader = reader
        self._finish = finish
        self._tables = tables
        self._splitter = None
        self.progress = progress
        self._staging = staging
        self._min_words = min_words
        self._dedup = dedup
        self._punkt_seed = sample_punkt_seed
        self._chunk_documents = min(chunk_documents, dk.MAX_ROWS_PER_CHUNK + 1)
        self._chunk_bytes = chunk_bytes

    def process(self, element: tuple[int, str, WorkUnit]):
        unit_index, kind, unit = element
        local: Counter[str] = Counter()
        rejects = RejectsPart(FileSystems.join(self._staging, f"rejects-0-{unit_index:05d}.jsonl"))
        if self._finish is not None:
            self._splitter = _splitter(
                self._splitter, self._tables, self._finish.max_sentence_chars
            )
        chunk: _ChunkWriter | _FinishedChunk | None = None
        number = 0
        on_read = self.progress.add if self.progress is not None else None
        for item in self._read(kind, unit, local, rejects, on_read):
            if isinstance(item, Reject):
                rejects.write(item.with_source(kind).to_json())
                continue
            row = self._normalize(item, local, rejects)
            if row is None:
                continue
            if chunk is None and self._finish is not None:
                chunk = _FinishedChunk(
                    DocumentsWriter(
                        self._finish, output_name(unit_index, number), self._splitter, self.stats
                    )
                )
            elif chunk is None:
                chunk = _ChunkWriter(
                    self._staging, self._dedup, self._punkt_seed, unit_index, number
                )
            chunk.add(row)
            if chunk.documents >= self._chunk_documents or chunk.size >= self._chunk_bytes:
                yield from chunk.close()
                chunk, number = None, number + 1
        if chunk is not None:
            yield from chunk.close()
        rejects.close()
        local["input_files" if not unit.stream_range else "multistream_parts"] += 1
        for key, value in local.items():
            self.stats[f"{kind}.{key}"] += value

    def _read(
        self,
        kind: str,
        unit: WorkUnit,
        local: Counter[str],
        rejects: RejectsPart,
        on_read: OnRead | None = None,
    ):
        """The reader's items; damage the readers did not absorb ends the unit as a reject.

        Only reading is guarded: a failing write of this attempt's own files (a full disk, a
        dying worker) must fail the attempt, so that the runner retries it, not pass for a
        damaged input and commit a unit cut short."""
        items = self._reader.read(kind, unit, local, on_read)
        while True:
            try:
                item = next(items, _END)
            except (OSError, EOFError, ValueError) as e:
                local["unreadable_file"] += 1
                rejects.write(Reject.of("unreadable_file", unit.name, str(e), kind).to_json())
                return
            if item is _END:
                return
            yield item

    def _normalize(self, doc, local: Counter[str], rejects: RejectsPart) -> dict | None:
        from transforms.text_normalization import normalize_text

        doc_id, source, title, paragraphs = doc
        paragraphs = [p for p in (normalize_text(x).strip() for x in paragraphs) if p]
        # a normalized line is collapsed: its words are its spaces + 1
        words = sum(p.count(" ") + 1 if "\n" not in p else len(p.split()) for p in paragraphs)
        if words < self._min_words:
            local["dropped_too_short"] += 1
            rejects.write(
                Reject.of("dropped_too_short", doc_id, " / ".join(paragraphs), source).to_json()
            )
            return None
        local["documents"] += 1
        return {"doc_id": doc_id, "source": source, "title": title, "paragraphs": paragraphs}


class _ChunkWriter:
    """One staged chunk being written: rows go to the Parquet part in batches (memory: one
    batch), their keys accumulate (a few dozen bytes per document) until ``close()``."""

    BATCH = 256

    def __init__(
        self, staging: str, dedup: str, punkt_seed: int | None, unit: int, chunk: int
    ) -> None:
        self.unit, self.chunk = unit, chunk
        self.near = dedup == "near"
        self.exact = dedup in ("exact", "near")
        self.punkt_seed = punkt_seed
        self.staging = staging
        self.part = ParquetPart(chunk_path(staging, unit, chunk), _staged_schema(self.near))
        self.documents = 0
        self.size = 0
        self.batch: list[dict] = []
        self.exact_keys: dict[int, dk.ExactKeys] = {}
        self.bands: list[np.ndarray] = []
        self.punkt_keys: list[int] = []

    def add(self, row: dict) -> None:
        self.batch.append(row)
        self.documents += 1
        self.size += sum(len(p) for p in row["paragraphs"])
        if len(self.batch) >= self.BATCH:
            self._write_batch()

    def _write_batch(self) -> None:
        from transforms import near_duplicates as nd
        from transforms.text_normalization import content_hash_of_normalized

        first = self.documents - len(self.batch)
        texts = ["\n\n".join(row["paragraphs"]) for row in self.batch]
        signatures = nd.minhash_signatures(texts) if self.near else None
        for i, (row, text) in enumerate(zip(self.batch, texts, strict=True)):
            location = dk.location(self.unit, self.chunk, first + i)
            if self.exact:
                h = dk.hash_bytes(content_hash_of_normalized(text))
                keys = self.exact_keys.setdefault(
                    dk.partition_of_hash(h, EXACT_PARTITIONS), dk.ExactKeys([], [], [])
                )
                keys.hashes.append(h)
                keys.doc_ids.append(row["doc_id"])
                keys.locations.append(location)
            if self.near:
                signature = signatures[i]  # type: ignore[index]
                row["signature"] = signature.tobytes()
                if nd.has_shingles(signature):
                    self.bands.append(dk.band_hashes(signature, nd.ROWS_PER_BAND))
                else:  # no words: a near duplicate of nothing, so in no shared bucket
                    self.bands.append(dk.unique_band_hashes(location, nd.NUM_BANDS))
        if self.punkt_seed is not None:  # stable_hash64(punkt_seed, "punkt", doc_id), in order
            punkt_key = stable_hasher(self.punkt_seed, "punkt")
            self.punkt_keys.extend(punkt_key(row["doc_id"]) for row in self.batch)
        self.part.write(self.batch)
        self.batch = []

    def close(self):
        from apache_beam import pvalue

        self._write_batch()
        self.part.close()
        punkt = np.array(self.punkt_keys, dtype=np.uint64).tobytes() if self.punkt_keys else b""
        yield StagedChunk(self.unit, self.chunk, self.documents, punkt)
        for partition in sorted(self.exact_keys):
            yield pvalue.TaggedOutput(EXACT_TAG, (partition, self.exact_keys[partition].to_bytes()))
        if self.near:
            # Band-major, so that the worker grouping band b reads one contiguous range.
            bands = np.ascontiguousarray(np.stack(self.bands).T, dtype="<u8")
            write_bytes_atomically(bands_path(self.staging, self.unit, self.chunk), bands)
            for band in range(bands.shape[0]):
                yield pvalue.TaggedOutput(
                    BANDS_TAG, (band, (self.unit, self.chunk, self.documents))
                )


class ExactDuplicatesFn(CountingDoFn):
    """(hash partition, packed ExactKeys tables) → (location, doc id, kept id) of every exact
    duplicate (the smallest doc id of equal content is kept); their rejects go to a part file."""

    def __init__(self, staging: str) -> None:
        self._staging = staging

    def process(self, element: tuple[int, list[bytes]]):
        partition, tables = element
        found = dk.exact_duplicates(dk.ExactKeys.from_bytes(t) for t in tables)
        rejects = RejectsPart(FileSystems.join(self._staging, f"rejects-1-{partition:03d}.jsonl"))
        for loc, doc_id, kept in found:
            source = source_of(doc_id)
            self.stats[f"{source}.dropped_duplicate_exact"] += 1
            reason = "dropped_duplicate_exact"
            rejects.write(Reject.of(reason, doc_id, f"same content as {kept}", source).to_json())
            yield (loc, doc_id, kept)
        rejects.close()


def read_band(staging: str, band: int, unit: int, chunk: int, documents: int) -> np.ndarray:
    """uint64 hashes of LSH band ``band`` of every document of a staged chunk (one ranged read)."""
    start = band * documents * 8
    with FileSystems.open(
        bands_path(staging, unit, chunk), compression_type=CompressionTypes.UNCOMPRESSED
    ) as f:
        f.seek(start)
        data = f.read(documents * 8)
    if len(data) != documents * 8:
        raise RuntimeError(f"band file of chunk {unit}/{chunk} is shorter than recorded")
    return np.frombuffer(data, dtype="<u8")


class BandCandidatesFn(CountingDoFn):
    """(band index, [(unit, chunk, documents)]) → int64 candidate location pairs of that band (as
    bytes): documents of any chunk sharing the band's hash. Reads the band's range of every
    chunk's band file; Beam carries only the chunk names."""

    def __init__(self, staging: str) -> None:
        self._staging = staging

    def process(self, element: tuple[int, list[tuple[int, int, int]]]):
        band, chunks = element
        tables = []
        for unit, chunk, documents in sorted(chunks):
            hashes = read_band(self._staging, band, unit, chunk, documents)
            tables.append(dk.pack_band(hashes, dk.chunk_locations(unit, chunk, documents)))
        yield dk.candidate_pairs(tables).tobytes()


def load_staged_columns(staging: str, locations: list[int], columns: list[str]) -> dict[int, dict]:
    """location → {column: value} for the given locations, reading each chunk file once."""
    by_chunk: dict[tuple[int, int], list[int]] = {}
    for loc in locations:
        by_chunk.setdefault(dk.chunk_of(loc), []).append(loc)
    out: dict[int, dict] = {}
    for (unit, chunk), locs in sorted(by_chunk.items()):
        table = read_parquet(chunk_path(staging, unit, chunk), columns)
        rows = table.take([dk.row_of(loc) for loc in locs]).to_pylist()
        out.update(zip(locs, rows, strict=True))
    return out


class VerifyNearDuplicatesFn(CountingDoFn):
    """Candidate pairs of every band → (location, doc id, kept id) of every near duplicate.

    Pairs involving an exact duplicate are left out (it is already dropped, as when near dedup
    runs on the exact survivors); a pair is a duplicate when the signatures agree on at least
    ``threshold`` of their rows; of each connected group the smallest doc id is kept.
    """

    def __init__(self, staging: str, threshold: float) -> None:
        self._staging = staging
        self._threshold = threshold

    def process(self, band_pairs: list[bytes], exact: list[tuple[int, str, str]]):
        from transforms import near_duplicates as nd

        arrays = [np.frombuffer(b, dtype=np.int64).reshape(-1, 2) for b in band_pairs]
        pairs = np.unique(np.concatenate(arrays), axis=0) if arrays else np.zeros((0, 2))
        dropped = {loc for loc, _, _ in exact}
        pairs = [(int(a), int(b)) for a, b in pairs if a not in dropped and b not in dropped]
        involved = sorted({loc for pair in pairs for loc in pair})
        docs = load_staged_columns(self._staging, involved, ["doc_id", "signature"])
        signatures = {
            loc: np.frombuffer(d["signature"], dtype=np.uint64) for loc, d in docs.items()
        }
        location_of = {d["doc_id"]: loc for loc, d in docs.items()}
        duplicates = []
        for a, b in pairs:
            if nd.similarity(signatures[a], signatures[b]) >= self._threshold:
                duplicates.append(tuple(sorted((docs[a]["doc_id"], docs[b]["doc_id"]))))
        drop = nd.documents_to_drop(sorted(set(duplicates)))
        rejects = RejectsPart(FileSystems.join(self._staging, "rejects-2-near.jsonl"))
        for doc_id in sorted(drop):
            source = source_of(doc_id)
            self.stats[f"{source}.dropped_duplicate_near"] += 1
            reason = "dropped_duplicate_near"
            rejects.write(
                Reject.of(reason, doc_id, f"near duplicate of {drop[doc_id]}", source).to_json()
            )
            yield (location_of[doc_id], doc_id, drop[doc_id])
        rejects.close()


def punkt_sample_candidates(element, limit: int):
    """((unit, chunk), {chunk: [StagedChunk], drops: [row]}) → (punkt key, location) of the chunk's
    ``limit`` surviving documents with the smallest keys (the global sample is among them)."""
    _, grouped = element
    (chunk,) = grouped["chunk"]
    keys = np.frombuffer(chunk.punkt_keys, dtype=np.uint64)
    dropped = set(grouped["drops"])
    survivors = [(int(k), row) for row, k in enumerate(keys.tolist()) if row not in dropped]
    survivors.sort()
    for key, row in survivors[:limit]:
        yield (key, dk.location(chunk.unit, chunk.chunk, row))


def train_punkt(samples: list[tuple[int, int]], staging: str, output: str):
    """Trains Punkt on the sampled documents' text (in key order) and saves it under
    ``output/punkt/``; returns the PunktTables."""
    import tempfile
    from pathlib import Path

    from pipeline.files.punkt_files import save_punkt_parameters
    from transforms.sentences import PunktTables, train_punkt_parameters

    docs = load_staged_columns(staging, [loc for _, loc in samples], ["paragraphs"])
    texts = sorted((key, "\n\n".join(docs[loc]["paragraphs"])) for key, loc in samples)
    params = train_punkt_parameters([text for _, text in texts])
    tables = PunktTables.from_parameters(params)
    with tempfile.TemporaryDirectory() as local:  # then copied, so gs:// outputs work too
        for path in sorted(save_punkt_parameters(tables, local).iterdir()):
            target = FileSystems.join(output, "punkt", path.name)
            write_bytes_atomically(target, Path(path).read_bytes())
    return tables


@dataclass(frozen=True)
class FinishSettings:
    """Where and how finished documents are written: ``output`` (the job's directory), the
    longest sentence in characters (longer ones are cut), whether to write the BERT text export."""

    output: str
    max_sentence_chars: int
    export_text: bool


def _splitter(current, tables, max_chars: int):
    """``current`` if it splits with ``tables``, else a new SentenceSplitter."""
    from transforms.sentences import SentenceSplitter

    if current is None or current.tables != tables:
        return SentenceSplitter(tables, max_chars)
    return current


class DocumentsWriter:
    """One chunk's finished documents: each added document split into sentences and written
    to ``documents-NAME.parquet`` (and ``text/part-NAME.txt``), counting ``documents_out``,
    ``sentences_out``, ``characters_out`` and ``split_overlong_sentence`` (per source) into
    ``stats``. ``close()`` commits what was added; a chunk left with no row is abandoned."""

    BATCH = 256

    def __init__(self, settings: FinishSettings, name: str, splitter, stats: Counter) -> None:
        self._splitter = splitter
        self._stats = stats
        self._out = ParquetPart(
            FileSystems.join(settings.output, f"documents-{name}.parquet"), documents_schema()
        )
        self._text = (
            TextPart(FileSystems.join(settings.output, "text", f"part-{name}.txt"))
            if settings.export_text
            else None
        )
        self._batch: list[dict] = []

    def add(self, doc: dict) -> None:
        """``doc``: doc_id, source, title and normalized paragraphs."""
        row = self._split(doc)
        self._batch.append(row)
        if self._text is not None:
            self._text.write("\n".join(row["sentences"]) + "\n\n")
        if len(self._batch) >= self.BATCH:
            self._out.write(self._batch)
            self._batch = []

    def close(self) -> None:
        self._out.write(self._batch)
        self._batch = []
        if self._out.rows:
            self._out.close()
            if self._text is not None:
                self._text.close()
        else:
            self.abandon()

    def abandon(self) -> None:
        self._out.abandon()
        if self._text is not None:
            self._text.abandon()

    def _split(self, doc: dict) -> dict:
        sentences: list[str] = []
        source = doc["source"]
        for paragraph in doc["paragraphs"]:
            found, overlong = self._splitter.split_counted(paragraph, normalized=True)
            sentences.extend(found)
            if overlong:
                self._stats[f"{source}.split_overlong_sentence"] += overlong
        self._stats[f"{source}.documents_out"] += 1
        self._stats[f"{source}.sentences_out"] += len(sentences)
        self._stats[f"{source}.characters_out"] += sum(len(s) for s in sentences)
        return {
            "doc_id": doc["doc_id"],
            "source": source,
            "title": doc["title"],
            "sentences": sentences,
        }


class _FinishedChunk:
    """A chunk of ``StageDocumentsFn`` given ``finish``: its rows go straight to their final
    documents file, with the same chunk bounds as a staged chunk."""

    def __init__(self, writer: DocumentsWriter) -> None:
        self.writer = writer
        self.documents = 0
        self.size = 0

    def add(self, row: dict) -> None:
        self.writer.add(row)
        self.documents += 1
        self.size += sum(len(p) for p in row["paragraphs"])

    def close(self):
        self.writer.close()
        return iter(())


class FinishChunkFn(CountingDoFn):
    """((unit, chunk), {chunk, drops}) → the chunk's surviving documents split into sentences,
    written to ``documents-UUUUU-CCCC.parquet`` (and the BERT text export); emits counts."""

    def __init__(
        self,
        staging: str,
        output: str,
        max_sentence_chars: int,
        export_text: bool,
        tables: PunktTables | None = None,
    ):
        self._staging = staging
        self._settings = FinishSettings(output, max_sentence_chars, export_text)
        self._tables = tables
        self._splitter = None

    def process(self, element, tables=None):
        """``tables``: the PunktTables side input, when none were given to the constructor."""
        tables = self._tables if self._tables is not None else tables
        if tables is None:
            raise ValueError("FinishChunkFn needs Punkt tables: given to it, or as a side input")
        self._splitter = _splitter(self._splitter, tables, self._settings.max_sentence_chars)
        (unit, chunk), grouped = element
        (staged,) = grouped["chunk"]
        dropped = set(grouped["drops"])
        out = DocumentsWriter(self._settings, output_name(unit, chunk), self._splitter, self.stats)
        rows = iter_parquet_rows(
            chunk_path(self._staging, unit, chunk), ["doc_id", "source", "title", "paragraphs"]
        )
        seen = 0
        for row, doc in enumerate(rows):
            seen += 1
            if row not in dropped:
                out.add(doc)
        if seen != staged.documents:
            out.abandon()
            raise RuntimeError(
                f"staged chunk {unit}/{chunk}: {staged.documents} documents recorded, {seen} found"
            )
        out.close()
        return []


def documents_schema():
    """Schema of the cleaning job's output rows."""
    import pyarrow as pa

    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("source", pa.string()),
            ("title", pa.string()),
            ("sentences", pa.list_(pa.string())),
        ]
    )
