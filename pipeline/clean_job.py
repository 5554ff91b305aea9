"""The cleaning job: Wikipedia dumps, books, JSONL and Parquet → clean documents of sentences.

Output directory:
- ``documents-00000-of-0000N.parquet``: one row per document (doc_id, source, title, sentences);
- ``text/part-00000-of-0000N.txt`` (``export_text``): the same in BERT text format;
- ``rejects.jsonl``: every rejected or damaged input (source, location, reason, excerpt);
- ``punkt/`` when the sentence splitter was trained on the corpus;
- ``manifest.json`` (written last): config, input fingerprints, counts per source and reason.
"""

from __future__ import annotations

import json
import logging
import lzma
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.artifacts import WriteRejects, read_json, write_json, write_json_atomically
from pipeline.counting import CountingDoFn
from pipeline.input_files import InputFile, expand_inputs
from pipeline.stats import REJECTS_TAG, STATS_TAG, MergeCounts
from transforms.rejects import Reject
from transforms.seeding import stable_hash64

LOG = logging.getLogger("bertprep.clean")
MANIFEST = "manifest.json"
MANIFEST_FORMAT = "bertprep.clean/1"
SOURCES = ("wikipedia", "books", "jsonl", "parquet")
_RESULT = ".pipeline-result.json"


class CleanConfigError(ValueError):
    """The cleaning job's configuration is unusable; the message says why."""


@dataclass(frozen=True)
class CleanJobConfig:
    """Every setting of the cleaning job (the manifest records all of them)."""

    output: str
    wikipedia: list[str] = field(default_factory=list)
    books: list[str] = field(default_factory=list)
    jsonl: list[str] = field(default_factory=list)
    parquet: list[str] = field(default_factory=list)
    text_field: str = "text"
    title_field: str = "title"
    dedup: str = "exact"
    near_threshold: float = 0.8
    min_words: int = 20
    keep_disambiguation: bool = False
    export_text: bool = True
    num_shards: int = 4
    punkt_sample_documents: int = 2000
    max_sentence_chars: int = 2000
    multistream_bytes: int = 64 << 20
    seed: int = 12345

    def inputs(self) -> dict[str, list[str]]:
        return {s: getattr(self, s) for s in SOURCES if getattr(self, s)}


@dataclass(frozen=True)
class RawDocument:
    """A document before sentence splitting: normalized paragraphs and its content hash."""

    doc_id: str
    source: str
    title: str
    paragraphs: list[str]
    content_hash: str

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)


@dataclass(frozen=True)
class WorkUnit:
    """An input file, or one stream range of a multistream dump, as read by one worker."""

    path: str
    name: str
    stream_range: object = None

    @property
    def dump(self) -> str:
        """The dump file's name (the same for every range of it, so document ids are too)."""
        return self.name


def _open(path: str):
    """A binary stream of the decompressed file (.bz2, .gz by Beam; .xz by lzma)."""
    if path.endswith(".xz"):
        raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
        return lzma.open(raw)
    return FileSystems.open(path, compression_type=CompressionTypes.AUTO)


def _paragraphs_of_text(text: str) -> list[str]:
    return [p for p in (" ".join(b.split()) for b in text.split("\n\n")) if p]


class ReadSourcesFn(CountingDoFn):
    """(source kind, WorkUnit) → RawDocument (main), Reject (``rejects``), counts (``stats``).

    Counts are prefixed with the source kind (``wikipedia.dropped_redirect``, ...).
    """

    def __init__(self, config: CleanJobConfig) -> None:
        self._config = config

    def process(self, element: tuple[str, WorkUnit]):
        kind, unit = element
        local: Counter[str] = Counter()
        reader: Callable[[WorkUnit, Counter[str]], Iterator] = getattr(self, f"_read_{kind}")
        try:
            for item in reader(unit, local):
                if isinstance(item, Reject):
                    yield self.reject(item.with_source(kind))
                else:
                    yield from self._finish(item, local)
        except (OSError, EOFError, ValueError) as e:  # damage the readers did not absorb
            local["unreadable_file"] += 1
            yield self.reject(Reject.of("unreadable_file", unit.name, str(e), kind))
        local["input_files" if not unit.stream_range else "multistream_parts"] += 1
        for key, value in local.items():
            self.stats[f"{kind}.{key}"] += value

    def _finish(self, doc: tuple[str, str, str, list[str]], local: Counter[str]):
        from transforms.text_normalization import content_hash, normalize_text

        doc_id, source, title, paragraphs = doc
        paragraphs = [p for p in (normalize_text(x).strip() for x in paragraphs) if p]
        words = sum(len(p.split()) for p in paragraphs)
        if words < self._config.min_words:
            local["dropped_too_short"] += 1
            yield self.reject(
                Reject.of("dropped_too_short", doc_id, " / ".join(paragraphs), source)
            )
            return
        local["documents"] += 1
        yield RawDocument(doc_id, source, title, paragraphs, content_hash("\n\n".join(paragraphs)))

    def _read_wikipedia(self, f: WorkUnit, local: Counter[str]):
        from pipeline.multistream import RangeStream
        from transforms.mediawiki_xml import WikiPage, iter_pages
        from transforms.wikitext import wikitext_to_paragraphs

        opened = RangeStream(f.stream_range) if f.stream_range else _open(f.path)
        with opened as stream:
            for item in iter_pages(
                stream,
                f.name,
                local,
                keep_disambiguation=self._config.keep_disambiguation,
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

    def _read_books(self, f: WorkUnit, local: Counter[str]):
        from transforms.book_text import clean_book

        with _open(f.path) as stream:
            data = stream.read()
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

    def _read_jsonl(self, f: WorkUnit, local: Counter[str]):
        field_name, title_field = self._config.text_field, self._config.title_field
        with _open(f.path) as stream:
            for number, raw in enumerate(stream, start=1):
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
                title = str(obj.get(title_field, "")) if isinstance(obj, dict) else ""
                yield (f"jsonl/{f.name}/{number}", "jsonl", title, _paragraphs_of_text(text))

    def _read_parquet(self, f: WorkUnit, local: Counter[str]):
        import pyarrow.parquet as pq

        field_name, title_field = self._config.text_field, self._config.title_field
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


class KeepFirstOfHashFn(CountingDoFn):
    """(content hash, documents) → the document with the smallest id; the rest are duplicates."""

    def process(self, element):
        _, docs = element
        ordered = sorted(docs, key=lambda d: d.doc_id)
        yield ordered[0]
        for dup in ordered[1:]:
            self.stats[f"{dup.source}.dropped_duplicate_exact"] += 1
            yield self.reject(
                Reject.of(
                    "dropped_duplicate_exact",
                    dup.doc_id,
                    f"same content as {ordered[0].doc_id}",
                    dup.source,
                )
            )


class DropNearDuplicatesFn(CountingDoFn):
    """Drops documents named in the ``drop`` side input (duplicate → kept document)."""

    def process(self, doc: RawDocument, drop: dict):
        kept = drop.get(doc.doc_id)
        if kept is None:
            yield doc
            return
        self.stats[f"{doc.source}.dropped_duplicate_near"] += 1
        yield self.reject(
            Reject.of("dropped_duplicate_near", doc.doc_id, f"near duplicate of {kept}", doc.source)
        )


class SplitSentencesFn(CountingDoFn):
    """RawDocument → the Parquet row dict (doc_id, source, title, sentences)."""

    def __init__(self, max_sentence_chars: int) -> None:
        self._max_chars = max_sentence_chars
        self._splitter = None

    def process(self, doc: RawDocument, tables):
        from transforms.sentences import SentenceSplitter

        if self._splitter is None or self._splitter.tables != tables:
            self._splitter = SentenceSplitter(tables, self._max_chars)
        sentences: list[str] = []
        for paragraph in doc.paragraphs:
            found, overlong = self._splitter.split_counted(paragraph)
            sentences.extend(found)
            if overlong:
                self.stats[f"{doc.source}.split_overlong_sentence"] += overlong
        self.stats[f"{doc.source}.documents_out"] += 1
        self.stats[f"{doc.source}.sentences_out"] += len(sentences)
        self.stats[f"{doc.source}.characters_out"] += sum(len(s) for s in sentences)
        yield {
            "doc_id": doc.doc_id,
            "source": doc.source,
            "title": doc.title,
            "sentences": sentences,
        }


def _parquet_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("doc_id", pa.string()),
            ("source", pa.string()),
            ("title", pa.string()),
            ("sentences", pa.list_(pa.string())),
        ]
    )


def _train_punkt(samples: list[tuple[int, str]], output: str):
    from transforms.sentences import PunktTables, save_punkt_parameters, train_punkt_parameters

    texts = [text for _, text in sorted(samples)]
    params = train_punkt_parameters(texts)
    tables = PunktTables.from_parameters(params)
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as local:  # then copied, so gs:// outputs work too
        for path in sorted(save_punkt_parameters(tables, local).iterdir()):
            with FileSystems.create(FileSystems.join(output, "punkt", path.name)) as f:
                f.write(Path(path).read_bytes())
    return tables


def work_units(kind: str, files: list[InputFile], config: CleanJobConfig) -> list[WorkUnit]:
    """Files as units of work; a multistream dump with its index becomes one unit per range."""
    from pipeline.multistream import index_path, split_ranges, stream_offsets

    units: list[WorkUnit] = []
    for f in files:
        if kind == "wikipedia" and f.name.endswith("-multistream-index.txt.bz2"):
            continue
        index = index_path(f.path) if kind == "wikipedia" else None
        if index:
            ranges = split_ranges(f.path, stream_offsets(index), config.multistream_bytes)
            units += [WorkUnit(f.path, f.name, r) for r in ranges]
        else:
            units.append(WorkUnit(f.path, f.name))
    return units


def build_pipeline(
    p: beam.Pipeline, config: CleanJobConfig, files: dict[str, list[InputFile]], pretrained
) -> None:
    """Adds the cleaning job to ``p`` (see module docstring for what it writes)."""
    elements = [
        (kind, u) for kind in SOURCES for u in work_units(kind, files.get(kind, []), config)
    ]
    read = (
        p
        | "ListFiles" >> beam.Create(elements)
        | "SpreadFiles" >> beam.Reshuffle()
        | "Read"
        >> beam.ParDo(ReadSourcesFn(config)).with_outputs(REJECTS_TAG, STATS_TAG, main="documents")
    )
    stats_parts = [read[STATS_TAG]]
    reject_parts = [read[REJECTS_TAG]]
    docs = read.documents
    if config.dedup in ("exact", "near"):
        exact = (
            docs
            | "ByContent" >> beam.Map(lambda d: (d.content_hash, d))
            | "GroupContent" >> beam.GroupByKey()
            | "KeepFirst"
            >> beam.ParDo(KeepFirstOfHashFn()).with_outputs(
                REJECTS_TAG, STATS_TAG, main="documents"
            )
        )
        stats_parts.append(exact[STATS_TAG])
        reject_parts.append(exact[REJECTS_TAG])
        docs = exact.documents
    if config.dedup == "near":
        from transforms import near_duplicates as nd

        threshold = config.near_threshold
        drop = (
            docs
            | "Signatures" >> beam.Map(lambda d: (d.doc_id, nd.minhash_signature(d.text)))
            | "Bands" >> beam.FlatMap(lambda s: [(k, s) for k in nd.band_keys(s[1])])
            | "GroupBands" >> beam.GroupByKey()
            | "Pairs" >> beam.FlatMap(lambda kv: nd.duplicate_pairs(list(kv[1]), threshold))
            | "UniquePairs" >> beam.Distinct()
            | "AllPairs" >> beam.combiners.ToList()
            | "Groups" >> beam.Map(nd.documents_to_drop)
        )
        near = docs | "DropNear" >> beam.ParDo(
            DropNearDuplicatesFn(), drop=beam.pvalue.AsSingleton(drop)
        ).with_outputs(REJECTS_TAG, STATS_TAG, main="documents")
        stats_parts.append(near[STATS_TAG])
        reject_parts.append(near[REJECTS_TAG])
        docs = near.documents

    if pretrained is not None:
        tables = p | "PunktTables" >> beam.Create([pretrained])
    else:
        seed, limit = config.seed, config.punkt_sample_documents
        tables = (
            docs
            | "PunktSample" >> beam.Map(lambda d: (stable_hash64(seed, "punkt", d.doc_id), d.text))
            | "SmallestKeys" >> beam.combiners.Top.Smallest(limit, key=lambda kv: kv[0])
            | "TrainPunkt" >> beam.Map(_train_punkt, config.output)
        )
    rows = docs | "Sentences" >> beam.ParDo(
        SplitSentencesFn(config.max_sentence_chars), tables=beam.pvalue.AsSingleton(tables)
    ).with_outputs(STATS_TAG, main="rows")
    stats_parts.append(rows[STATS_TAG])
    shards = max(1, config.num_shards)
    (
        rows.rows
        | "WriteParquet"
        >> beam.io.WriteToParquet(
            FileSystems.join(config.output, "documents"),
            _parquet_schema(),
            file_name_suffix=".parquet",
            num_shards=shards,
        )
    )
    if config.export_text:
        (
            rows.rows
            | "AsBertText" >> beam.Map(lambda r: "\n".join(r["sentences"]) + "\n")
            | "WriteText"
            >> beam.io.WriteToText(
                FileSystems.join(config.output, "text", "part"),
                file_name_suffix=".txt",
                num_shards=shards,
            )
        )
    tuple(reject_parts) | "AllRejects" >> beam.Flatten() | "Rejects" >> WriteRejects(config.output)
    result_path = FileSystems.join(config.output, _RESULT)
    (
        stats_parts
        | "AllStats" >> beam.Flatten()
        | "MergeStats" >> beam.CombineGlobally(MergeCounts())
        | "WriteResult" >> beam.Map(lambda totals: write_json(result_path, totals))
    )


def _by_source(stats: dict[str, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for key, value in stats.items():
        source, _, name = key.partition(".")
        out.setdefault(source, {})[name] = value
    return out


def _remove_previous_output(output: str) -> None:
    stale = []
    for pattern in ("documents-*.parquet", "text/part-*.txt", "punkt/*", MANIFEST, "rejects.jsonl"):
        stale += [
            m.path for m in FileSystems.match([FileSystems.join(output, pattern)])[0].metadata_list
        ]
    if stale:
        FileSystems.delete(stale)


def run_clean_job(
    config: CleanJobConfig,
    pipeline_options: PipelineOptions,
    progress: Callable[[str], None] = LOG.info,
) -> dict:
    """Runs the cleaning job and returns the manifest (also written to ``output/manifest.json``).

    Raises CleanConfigError for bad settings and NoInputFilesError for patterns matching nothing;
    a run that keeps no document fails with CleanConfigError saying what was dropped and why.
    """
    from transforms.sentences import PunktTables, load_punkt_parameters

    if not config.inputs():
        raise CleanConfigError("no input: give --wikipedia, --books, --jsonl or --parquet")
    if config.dedup not in ("exact", "near", "none"):
        raise CleanConfigError(f"--dedup must be exact, near or none, not {config.dedup}")
    if not 0 < config.near_threshold <= 1:
        raise CleanConfigError("--near-threshold must lie in (0, 1]")
    files = {kind: expand_inputs(patterns) for kind, patterns in config.inputs().items()}
    progress(
        ", ".join(
            f"{kind}: {len(fs)} file(s), {sum(f.size_bytes for f in fs):,} bytes"
            for kind, fs in files.items()
        )
    )
    if not FileSystems.exists(config.output):
        FileSystems.mkdirs(config.output)
    _remove_previous_output(config.output)
    params = load_punkt_parameters()
    pretrained = PunktTables.from_parameters(params) if params is not None else None
    punkt = "pretrained punkt_tab (NLTK_DATA)" if pretrained else "trained on the corpus (punkt/)"
    progress(f"sentence splitter: {punkt}")

    started = time.monotonic()
    p = beam.Pipeline(options=pipeline_options)
    build_pipeline(p, config, files, pretrained)
    p.run().wait_until_finish()
    elapsed = time.monotonic() - started

    result_path = FileSystems.join(config.output, _RESULT)
    stats = read_json(result_path)
    FileSystems.delete([result_path])
    per_source = _by_source(stats)
    documents_out = sum(s.get("documents_out", 0) for s in per_source.values())
    if documents_out == 0:
        reasons = {
            f"{src}.{k}": v
            for src, counts in per_source.items()
            for k, v in counts.items()
            if k.startswith(("dropped", "empty", "binary", "truncated", "unreadable", "invalid"))
        }
        raise CleanConfigError(f"no document survived cleaning; drops by reason: {reasons}")
    outputs = sorted(
        m.path.rsplit("/", 1)[-1]
        for m in FileSystems.match([FileSystems.join(config.output, "documents-*.parquet")])[
            0
        ].metadata_list
    )
    manifest = {
        "format": MANIFEST_FORMAT,
        "config": asdict(config),
        "inputs": {kind: [f.fingerprint() for f in fs] for kind, fs in files.items()},
        "sentence_splitter": punkt,
        "outputs": {"parquet": outputs, "text_export": config.export_text},
        "counts": per_source,
        "totals": {
            "documents": documents_out,
            "sentences": sum(s.get("sentences_out", 0) for s in per_source.values()),
            "characters": sum(s.get("characters_out", 0) for s in per_source.values()),
        },
        "elapsed_seconds": round(elapsed, 2),
    }
    write_json_atomically(FileSystems.join(config.output, MANIFEST), manifest)
    return manifest
