"""The cleaning job: Wikipedia dumps, books, JSONL and Parquet → clean documents of sentences.

Output directory:
- ``documents-UUUUU-CCCC.parquet``: one row per document (doc_id, source, title, sentences), one
  file per chunk ``CCCC`` of input unit ``UUUUU`` (units: the input files in path order, or the
  stream ranges of a multistream dump); consumers key on ``doc_id``, never on file or row;
- ``text/part-UUUUU-CCCC.txt`` (``export_text``): the same in BERT text format;
- ``rejects.jsonl``: every rejected or damaged input (source, location, reason, excerpt);
- ``punkt/`` when the sentence splitter was trained on the corpus;
- ``manifest.json`` (written last): config, input fingerprints, counts per source and reason, the
  output files and their row counts (reconciled against the workers' counts).

Memory is bounded by a chunk, not by the corpus: documents are written once, by the worker that
read them, and only keys and duplicates are shuffled (``pipeline.steps.clean_stages``).
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.files.artifacts import (
    matching_paths,
    merge_reject_parts,
    parquet_metadata,
    read_parquet,
)
from pipeline.files.input_files import InputFile, expand_inputs
from pipeline.files.source_readers import SourceReader, WorkUnit
from pipeline.jobs.scaffold import (
    REJECTS,
    RESULT,
    ReconciliationError,
    SaveCounts,
    delete_tree,
    prepare_output,
    reconcile,
    take_counts,
    write_manifest,
)
from pipeline.runtime.counters import STATS_TAG
from pipeline.runtime.local_runner import start as start_pipeline
from pipeline.runtime.progress import ProgressMonitor, ProgressReporter, progress_dir
from pipeline.steps.clean_stages import (
    BANDS_TAG,
    EXACT_TAG,
    STAGING,
    BandCandidatesFn,
    ExactDuplicatesFn,
    FinishChunkFn,
    FinishSettings,
    StageDocumentsFn,
    VerifyNearDuplicatesFn,
    punkt_sample_candidates,
    train_punkt,
)
from transforms.duplicate_keys import chunk_of, row_of
from transforms.errors import UserError
from transforms.seeding import DEFAULT_SEED

LOG = logging.getLogger("bertprep.clean")
MANIFEST_FORMAT = "bertprep.clean/1"
SOURCES = ("wikipedia", "books", "jsonl", "parquet")


class CleanConfigError(UserError, ValueError):
    """The cleaning job's configuration is unusable; the message says why."""


class CleanReconciliationError(ReconciliationError):
    """What the workers counted disagrees with what the output files hold."""


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
    chunk_documents: int = 4096
    """At most this many documents per staged chunk (and per output file)."""
    chunk_mb: float = 16
    """A chunk is closed once its text reaches this many MB (2**20 characters)."""
    punkt_sample_documents: int = 2000
    max_sentence_chars: int = 2000
    multistream_mb: float = 64
    """A multistream dump with its index is split into ranges of about this many compressed MB."""
    seed: int = DEFAULT_SEED

    @property
    def chunk_bytes(self) -> int:
        return int(self.chunk_mb * 2**20)

    @property
    def multistream_bytes(self) -> int:
        return int(self.multistream_mb * 2**20)

    def inputs(self) -> dict[str, list[str]]:
        return {s: getattr(self, s) for s in SOURCES if getattr(self, s)}


REJECT_REASONS = (
    "unreadable_file",
    "truncated_file",
    "truncated_dump",
    "empty_file",
    "binary_file",
    "invalid_json_line",
    "missing_text_field",
    "boilerplate_not_found",
    "empty_book",
    "dropped_namespace",
    "dropped_redirect",
    "dropped_empty",
    "dropped_disambiguation",
    "dropped_too_short",
    "dropped_duplicate_exact",
    "dropped_duplicate_near",
)
"""Every reason a clean reject is written for; each has the counter of the same name, one count
per reject (``wikipedia.dropped_redirect``). A reason not listed is reconciled too when the
file holds it; the list is what lets a reason whose every line went missing be noticed."""


def reconcile_rejects(path: str, per_source: dict[str, dict[str, int]]) -> dict[str, int]:
    """Checks ``rejects.jsonl`` at ``path`` against the workers' counts (``per_source``: source
    → counter → count): for every source and reject reason, the lines that name both must equal
    that source's counter of the reason (``REJECT_REASONS`` and any other reason the file
    holds). Raises CleanReconciliationError naming the first that differs, or a line that is no
    reject record; returns the lines by ``source.reason``."""
    import json
    from collections import Counter

    from apache_beam.io.filesystem import CompressionTypes

    found: Counter[str] = Counter()
    with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
        for number, line in enumerate(f, 1):
            try:
                record = json.loads(line)
                found[f"{record['source']}.{record['reason']}"] += 1
            except (ValueError, KeyError, TypeError) as e:
                raise CleanReconciliationError(
                    f"{path}: line {number} is not a reject record ({e})"
                ) from e
    reasons = set(REJECT_REASONS) | {key.split(".", 1)[1] for key in found}
    sources = set(per_source) | {key.split(".", 1)[0] for key in found}
    for source in sorted(sources):
        for reason in sorted(reasons):
            reconcile(
                f"{source} rejects {reason} (rejects.jsonl)",
                per_source.get(source, {}).get(reason, 0),
                found[f"{source}.{reason}"],
                CleanReconciliationError,
            )
    return dict(sorted(found.items()))


def work_units(kind: str, files: list[InputFile], config: CleanJobConfig) -> list[WorkUnit]:
    """Files as units of work; a multistream dump with its index becomes one unit per range."""
    from pipeline.files.multistream import index_path, split_ranges, stream_offsets

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
    """Adds the cleaning job to ``p`` (see ``pipeline.steps.clean_stages`` for the flow)."""
    staging = FileSystems.join(config.output, STAGING)
    units = [(kind, u) for kind in SOURCES for u in work_units(kind, files.get(kind, []), config)]
    elements = [(i, kind, u) for i, (kind, u) in enumerate(units)]
    reader = SourceReader(config.text_field, config.title_field, config.keep_disambiguation)
    settings = FinishSettings(config.output, config.max_sentence_chars, config.export_text)
    # Nothing to drop and nothing to train: every unit's documents are finished where they are
    # read, and the job is one stage. Pretrained tables travel inside the DoFn that splits with
    # them (pickled once by the launcher); a Create side input would pickle them four times there
    # and once more in a worker (~30 ms each, most of it Beam's bz2).
    finish_at_once = config.dedup == "none" and pretrained is not None
    stage = StageDocumentsFn(
        reader,
        staging,
        config.min_words,
        config.dedup,
        config.seed if pretrained is None else None,
        config.chunk_documents,
        config.chunk_bytes,
        ProgressReporter(progress_dir(config.output)),
        finish=settings if finish_at_once else None,
        tables=pretrained if finish_at_once else None,
    )
    staged = (
        p
        | "ListUnits" >> beam.Create(elements, reshuffle=False)
        | "SpreadUnits" >> beam.Reshuffle()
        | "Stage" >> beam.ParDo(stage).with_outputs(EXACT_TAG, BANDS_TAG, STATS_TAG, main="chunks")
    )
    stats_parts = [staged[STATS_TAG]]
    if not finish_at_once:
        stats_parts += _finish_staged(p, config, staging, staged, pretrained, settings)
    (
        stats_parts
        | "AllStats" >> beam.Flatten()
        | "SaveCounts" >> SaveCounts(FileSystems.join(config.output, RESULT))
    )


def _finish_staged(
    p, config: CleanJobConfig, staging: str, staged, pretrained, settings: FinishSettings
) -> list:
    """Dedup over the staged chunks, the splitter's training when there are no ``pretrained``
    tables (None), and the finished documents; returns their stats outputs."""
    stats_parts = []
    drop_parts = []
    if config.dedup in ("exact", "near"):
        exact = (
            staged[EXACT_TAG]
            | "GroupExactKeys" >> beam.GroupByKey()
            | "ExactDuplicates"
            >> beam.ParDo(ExactDuplicatesFn(staging)).with_outputs(STATS_TAG, main="drops")
        )
        stats_parts.append(exact[STATS_TAG])
        drop_parts.append(exact.drops)
    if config.dedup == "near":
        near = (
            staged[BANDS_TAG]
            | "GroupBands" >> beam.GroupByKey()
            | "BandCandidates" >> beam.ParDo(BandCandidatesFn(staging))
            | "AllCandidates" >> beam.combiners.ToList()
            | "VerifyNear"
            >> beam.ParDo(
                VerifyNearDuplicatesFn(staging, config.near_threshold),
                exact=beam.pvalue.AsList(exact.drops),
            ).with_outputs(STATS_TAG, main="drops")
        )
        stats_parts.append(near[STATS_TAG])
        drop_parts.append(near.drops)
    drops = (
        tuple(drop_parts) | "AllDrops" >> beam.Flatten()
        if drop_parts
        else p | "NoDrops" >> beam.Create([])
    )
    joined = {
        "chunk": staged.chunks | "ChunkKey" >> beam.Map(lambda c: (c.key, c)),
        "drops": drops | "DropKey" >> beam.Map(lambda d: (chunk_of(d[0]), row_of(d[0]))),
    } | "JoinDrops" >> beam.CoGroupByKey()

    finish = FinishChunkFn(
        staging, settings.output, settings.max_sentence_chars, settings.export_text, pretrained
    )
    side = {}
    if pretrained is None:
        limit = config.punkt_sample_documents
        trained = (
            joined
            | "PunktCandidates" >> beam.FlatMap(punkt_sample_candidates, limit)
            | "PunktSample" >> beam.combiners.Top.Smallest(limit, key=lambda kv: kv[0])
            | "TrainPunkt" >> beam.Map(train_punkt, staging, config.output)
        )
        side["tables"] = beam.pvalue.AsSingleton(trained)
    finished = joined | "Sentences" >> beam.ParDo(finish, **side).with_outputs(
        STATS_TAG, main="none"
    )
    stats_parts.append(finished[STATS_TAG])
    return stats_parts


def _by_source(stats: dict[str, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for key, value in stats.items():
        source, _, name = key.partition(".")
        out.setdefault(source, {})[name] = value
    return out


STALE = ("documents-*.parquet", "text/part-*.txt", "punkt/*", REJECTS)
"""The job's own files from an earlier run (patterns under its output)."""


def run_clean_job(
    config: CleanJobConfig,
    pipeline_options: PipelineOptions,
    progress: Callable[[str], None] = LOG.info,
) -> dict:
    """Runs the cleaning job and returns the manifest (also written to ``output/manifest.json``).

    Raises CleanConfigError for bad settings and NoInputFilesError for patterns matching nothing;
    a run that keeps no document fails with CleanConfigError saying what was dropped and why.
    """
    from pipeline.files.punkt_files import load_punkt_tables

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
    prepare_output(config.output, STALE, trees=[STAGING])
    pretrained = load_punkt_tables()
    punkt = "pretrained punkt_tab (NLTK_DATA)" if pretrained else "trained on the corpus (punkt/)"
    progress(f"sentence splitter: {punkt}")

    started = time.monotonic()
    p = beam.Pipeline(options=pipeline_options)
    build_pipeline(p, config, files, pretrained)
    total = sum(f.size_bytes for fs in files.values() for f in fs)
    with ProgressMonitor(progress_dir(config.output), "clean", total, "bytes", progress) as watch:
        result = start_pipeline(p)
        watch.follow(result)
        result.wait_until_finish()
    elapsed = time.monotonic() - started

    stats = take_counts(FileSystems.join(config.output, RESULT))
    per_source = _by_source(stats)
    documents_out = sum(s.get("documents_out", 0) for s in per_source.values())
    if documents_out == 0:
        delete_tree(FileSystems.join(config.output, STAGING))
        reasons = {
            f"{src}.{k}": v
            for src, counts in per_source.items()
            for k, v in counts.items()
            if k.startswith(("dropped", "empty", "binary", "truncated", "unreadable", "invalid"))
        }
        raise CleanConfigError(f"no document survived cleaning; drops by reason: {reasons}")
    staging = FileSystems.join(config.output, STAGING)
    rejected = merge_reject_parts(
        FileSystems.join(staging, "rejects-*.jsonl"), FileSystems.join(config.output, REJECTS)
    )
    delete_tree(staging)
    documents_files = matching_paths(FileSystems.join(config.output, "documents-*.parquet"))
    # their footers are read (a file without statistics is decoded) while the rejects are checked
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        counted = pool.map(_documents_and_sentences, documents_files)
        reconcile_rejects(FileSystems.join(config.output, REJECTS), per_source)
        files_out = {
            path.rsplit("/", 1)[-1]: count
            for path, count in zip(documents_files, counted, strict=True)
        }
    outputs = {name: documents for name, (documents, _) in sorted(files_out.items())}
    sentences_out = sum(s.get("sentences_out", 0) for s in per_source.values())
    reconcile("documents", documents_out, sum(outputs.values()), CleanReconciliationError)
    reconcile(
        "sentences",
        sentences_out,
        sum(sentences for _, sentences in files_out.values()),
        CleanReconciliationError,
    )
    manifest = {
        "config": asdict(config),
        "inputs": {kind: [f.fingerprint() for f in fs] for kind, fs in files.items()},
        "sentence_splitter": punkt,
        "outputs": {"parquet": outputs, "text_export": config.export_text},
        "rejects": rejected,
        "counts": per_source,
        "totals": {
            "documents": documents_out,
            "sentences": sentences_out,
            "characters": sum(s.get("characters_out", 0) for s in per_source.values()),
        },
    }
    return write_manifest(config.output, MANIFEST_FORMAT, manifest, elapsed)


def _documents_and_sentences(path: str) -> tuple[int, int]:
    """Rows of a documents file and the sentences they hold, from its footer: the row count and
    the sentences leaf column's count of values that are not null, summed over the row groups
    (a null or empty list is a null there; a sentence is never null: the writer joins them as
    strings). Reading the column instead decoded every sentence's text in the launcher (~1 s of
    CPU per 400 MB of text, and ~170 MB of heap it kept for the rest of a ``run``). A file
    without those statistics is read."""
    metadata = parquet_metadata(path)
    leaves = [
        i
        for i in range(metadata.num_columns)
        if metadata.schema.column(i).path.split(".")[0] == "sentences"
    ]
    statistics = [
        metadata.row_group(g).column(leaves[0]).statistics if len(leaves) == 1 else None
        for g in range(metadata.num_row_groups)
    ]
    if all(s is not None and s.has_null_count for s in statistics):
        return metadata.num_rows, sum(s.num_values for s in statistics)
    column = read_parquet(path, ["sentences"]).column("sentences")
    sentences = sum(
        chunk.offsets[len(chunk)].as_py() - chunk.offsets[0].as_py() for chunk in column.chunks
    )
    return len(column), sentences
