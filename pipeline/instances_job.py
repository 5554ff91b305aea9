"""The instances job: BERT text files + vocab → sharded TFRecords of pretraining instances.

``run_instances_job`` checks the configuration before any work, builds and runs the Beam pipeline,
then reconciles what the workers counted with what the shard files hold and writes
``manifest.json`` (atomically, last: an output directory with a manifest is complete).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.artifacts import (
    WriteRejects,
    parquet_rows,
    read_json,
    write_json,
    write_json_atomically,
)
from pipeline.bert_text_source import ReadBertTextDocuments
from pipeline.input_files import InputFile, expand_inputs
from pipeline.instance_creation import (
    AssignBuckets,
    BucketSlicesFn,
    CreateInstances,
    bucket_count,
)
from pipeline.progress import ProgressMonitor, ProgressReporter, progress_dir
from pipeline.shard_writer import SUFFIXES, WriteShards
from pipeline.stats import NAMESPACE, REJECTS_TAG, STATS_TAG, MergeCounts
from pipeline.tokenize_documents import TokenizeDocuments
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.bert_text import DEFAULT_MAX_DOCUMENT_SENTENCES, DEFAULT_MAX_SENTENCE_CHARS
from transforms.features import FEATURES
from transforms.instance_batches import InstanceSettings, TokenTables
from transforms.instances import PairConfig
from transforms.masking import MaskingConfig

LOG = logging.getLogger("bertprep.instances")
MANIFEST = "manifest.json"
REJECTS = "rejects.jsonl"
_RESULT = ".pipeline-result.json"
SPILL_DIR = ".spill"
MANIFEST_FORMAT = "bertprep.instances/1"


class JobConfigError(ValueError):
    """The job's configuration cannot produce correct output; the message says why."""


class NoInstancesError(RuntimeError):
    """The job ran but produced zero instances; the message says why."""


class ReconciliationError(RuntimeError):
    """What the workers counted disagrees with what the output files hold."""


@dataclass(frozen=True)
class InstancesJobConfig:
    """Every setting of the instances job (the manifest records all of them)."""

    inputs: list[str]
    vocab: str
    output: str
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    dupe_factor: int = 10
    short_seq_prob: float = 0.1
    seed: int = 12345
    num_shards: int = 256
    do_lower_case: bool = True
    whole_word_mask: bool = False
    compression: str = "none"
    bucket_size: int = 2000
    shard_prefix: str = "instances"
    max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS
    max_document_sentences: int = DEFAULT_MAX_DOCUMENT_SENTENCES
    allow_prediction_cap: bool = False
    reference_random_next: bool = False
    reference_random_tokens: bool = False
    reference_whole_word_decisions: bool = False
    pretokenized: bool = False
    """``inputs`` are token index files (``tokens-*.index.parquet``, ``pipeline.token_files``)
    written with the same vocab and casing by ``bertprep run``'s tokenize stage: documents are
    read in place, keyed by their ids, and nothing is tokenized again."""

    def settings(self) -> InstanceSettings:
        return InstanceSettings(
            pairs=PairConfig(
                max_seq_length=self.max_seq_length,
                short_seq_prob=self.short_seq_prob,
                allow_same_document_random_next=self.reference_random_next,
            ),
            masking=MaskingConfig(
                masked_lm_prob=self.masked_lm_prob,
                max_predictions_per_seq=self.max_predictions_per_seq,
                whole_word_mask=self.whole_word_mask,
                per_piece_decisions=self.reference_whole_word_decisions,
            ),
            dupe_factor=self.dupe_factor,
            seed=self.seed,
        )


def check_config(config: InstancesJobConfig) -> tuple[Vocab, InstanceSettings]:
    """Loads the vocab and validates every setting; raises JobConfigError naming the problem."""
    from tokenizer.vocab import VocabError

    if not config.inputs:
        raise JobConfigError("no --input given")
    if config.num_shards < 1:
        raise JobConfigError(f"--num-shards must be at least 1, got {config.num_shards}")
    if config.bucket_size < 2:
        raise JobConfigError(f"--bucket-size must be at least 2, got {config.bucket_size}")
    if config.compression not in SUFFIXES:
        raise JobConfigError(f"--compression must be one of {sorted(SUFFIXES)}")
    try:
        settings = config.settings()
    except ValueError as e:
        raise JobConfigError(str(e)) from e
    full = max(1, int(round(config.max_seq_length * config.masked_lm_prob)))
    if config.max_predictions_per_seq < full and not config.allow_prediction_cap:
        raise JobConfigError(
            f"--max-predictions-per-seq {config.max_predictions_per_seq} is too small for "
            f"--masked-lm-prob {config.masked_lm_prob} at --max-seq-length {config.max_seq_length}: "
            f"a full sequence needs {full} predictions, so long instances would be masked at a "
            f"lower rate than asked. Raise it to {full}, or pass --allow-prediction-cap to accept "
            "the cap (as MLPerf's 512/76 recipe does)."
        )
    try:
        vocab = Vocab.from_file(config.vocab)
    except (VocabError, OSError) as e:
        raise JobConfigError(f"--vocab {config.vocab}: {e}") from e
    return vocab, settings


def token_tables(vocab: Vocab, config: InstancesJobConfig) -> TokenTables:
    return TokenTables(
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        mask_id=vocab.mask_id,
        replacement_ids=vocab.replacement_ids(include_special=config.reference_random_tokens),
        is_continuation=vocab.continuation_mask(),
    )


def _remove_spills(output: str) -> None:
    """Deletes the spill files (intermediate records) of this or an interrupted earlier run."""
    spill_dir = FileSystems.join(output, SPILL_DIR)
    found = [m.path for m in FileSystems.match([FileSystems.join(spill_dir, "*")])[0].metadata_list]
    if found:
        FileSystems.delete(found)
    if FileSystems.exists(spill_dir):
        FileSystems.delete([spill_dir])


def _remove_previous_output(config: InstancesJobConfig) -> None:
    """Deletes this job's own artifacts from an earlier run (shards of any count, manifest)."""
    _remove_spills(config.output)
    stale: list[str] = []
    pattern = FileSystems.join(config.output, f"{config.shard_prefix}-*-of-*.tfrecord*")
    for m in FileSystems.match([pattern])[0].metadata_list:
        stale.append(m.path)
    for name in (MANIFEST, REJECTS, _RESULT):
        path = FileSystems.join(config.output, name)
        if FileSystems.exists(path):
            stale.append(path)
    if stale:
        LOG.info("removing %d files of a previous run from %s", len(stale), config.output)
        FileSystems.delete(stale)


def build_pipeline(
    p: beam.Pipeline,
    config: InstancesJobConfig,
    files: list[InputFile],
    vocab: Vocab,
    settings: InstanceSettings,
    progress: ProgressReporter | None = None,
) -> None:
    """Adds the whole job to ``p``; it writes the shards, rejects.jsonl and a result file; each
    (bucket, dupe pass) done adds its documents to ``progress``."""
    spill_dir = FileSystems.join(config.output, SPILL_DIR)
    if config.pretokenized:
        num_buckets = bucket_count(sum(parquet_rows(f.path) for f in files), config.bucket_size)
        tokenized = (
            p
            | "ListTokenFiles" >> beam.Create([f.path for f in files])
            | "SpreadTokenFiles" >> beam.Reshuffle()
            | "BucketSlices"
            >> beam.ParDo(BucketSlicesFn(config.seed, num_buckets)).with_outputs(
                REJECTS_TAG, STATS_TAG, main="slices"
            )
        )
        slices = tokenized.slices
        read_parts = []
    else:
        read = (
            p
            | "ListFiles" >> beam.Create(files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFiles"
            >> ReadBertTextDocuments(config.max_sentence_chars, config.max_document_sentences)
        )
        tokenized = read.documents | "Tokenize" >> TokenizeDocuments(
            vocab, config.do_lower_case, spill_dir
        )
        slices = tokenized.documents | "AssignBuckets" >> AssignBuckets(
            config.seed, config.bucket_size
        )
        read_parts = [read]
    created = slices | "Instances" >> CreateInstances(
        settings, token_tables(vocab, config), spill_dir, config.num_shards, progress
    )
    shards = created["spills"] | "Shards" >> WriteShards(
        config.output, config.shard_prefix, config.num_shards, config.compression
    )
    stats = (
        (*(r[STATS_TAG] for r in read_parts), tokenized[STATS_TAG], created["stats"])
        | "AllStats" >> beam.Flatten()
        | "MergeStats" >> beam.CombineGlobally(MergeCounts())
    )
    (
        (*(r[REJECTS_TAG] for r in read_parts), tokenized[REJECTS_TAG])
        | "AllRejects" >> beam.Flatten()
        | "Rejects" >> WriteRejects(config.output)
    )
    result_path = FileSystems.join(config.output, _RESULT)
    (
        shards
        | "CollectShards" >> beam.combiners.ToList()
        | "WriteResult"
        >> beam.Map(
            lambda shard_list, totals: write_json(
                result_path,
                {"shards": sorted(shard_list, key=lambda s: s["index"]), "stats": totals},
            ),
            totals=beam.pvalue.AsSingleton(stats),
        )
    )


def _counter_values(result, label: str) -> dict[str, int]:
    """This job's bertprep counters (those of steps under ``label``)."""
    out: dict[str, int] = {}
    try:
        counters = result.metrics().query()["counters"]
    except Exception:  # a runner without metrics support: reconcile from files only
        return out
    for c in counters:
        if c.key.metric.namespace == NAMESPACE and f"{label}/" in c.key.step:
            value = c.committed if c.committed is not None else c.attempted
            out[c.key.metric.name] = out.get(c.key.metric.name, 0) + int(value or 0)
    return out


def explain_no_instances(stats: dict[str, int], num_files: int) -> str:
    """Why a run produced nothing, from its counts."""
    if stats.get("documents", 0) == 0:
        return (
            f"no documents were read: {num_files} input file(s), "
            f"{stats.get('empty_input_file', 0)} empty, {stats.get('lines', 0)} lines, "
            f"{stats.get('skipped_invalid_utf8_line', 0)} lines skipped as invalid UTF-8, "
            f"{stats.get('truncated_input_file', 0)} truncated"
        )
    if stats.get("tokenized_documents", 0) == 0:
        return (
            f"{stats['documents']} document(s) were read but none has a sentence that tokenizes "
            f"to at least one token ({stats.get('dropped_empty_document', 0)} dropped as empty)"
        )
    if stats.get("skipped_no_other_document", 0):
        return (
            f"only {stats.get('tokenized_documents')} document(s): every pair needed a random next "
            "sentence from another document and there was none "
            f"({stats['skipped_no_other_document']} pairs skipped). Add documents, or pass "
            "--reference-random-next to take it from the same document as the reference does."
        )
    return "no sentence pairs could be formed from the input"


def build_manifest(
    config: InstancesJobConfig,
    vocab: Vocab,
    files: list[InputFile],
    shards: list[dict],
    stats: dict[str, int],
    elapsed_s: float,
) -> dict:
    """The manifest: config, vocab and tokenizer, inputs, shards, totals, skips and why."""
    instances = sum(s["records"] for s in shards)
    pairs = stats.get("pairs", 0)
    is_next = pairs - stats.get("random_next", 0)
    predictions = stats.get("masked_lm_predictions", 0)
    skipped = {
        k: v
        for k, v in stats.items()
        if k.startswith(("skipped_", "dropped_", "split_", "truncated_input", "empty_input"))
    }
    return {
        "format": MANIFEST_FORMAT,
        "config": asdict(config),
        "features": {
            f.name: {
                "dtype": f.dtype,
                "length": f.length(config.max_seq_length, config.max_predictions_per_seq),
            }
            for f in FEATURES
        },
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "vocab": {
            "path": config.vocab if "://" in config.vocab else os.path.abspath(config.vocab),
            "sha256": vocab.sha256,
            "size": len(vocab),
            "special_ids": {
                "pad": vocab.pad_id,
                "unk": vocab.unk_id,
                "cls": vocab.cls_id,
                "sep": vocab.sep_id,
                "mask": vocab.mask_id,
            },
        },
        "tokenizer": BertWordPieceTokenizer(vocab, config.do_lower_case).settings(),
        "inputs": [f.fingerprint() for f in files],
        "shards": [
            {
                "file": s["path"].rsplit("/", 1)[-1],
                "records": s["records"],
                "content_sha256": s["content_sha256"],
            }
            for s in shards
        ],
        "totals": {
            "input_files": len(files),
            "documents": stats.get("tokenized_documents", 0),
            "sentences": stats.get("tokenized_sentences", 0),
            "tokens": stats.get("tokens", 0),
            "buckets": stats.get("buckets", 0),
            "instances": instances,
            "is_next": is_next,
            "random_next": stats.get("random_next", 0),
            "is_next_ratio": round(is_next / pairs, 6) if pairs else None,
            "truncated_pairs": stats.get("truncated_pairs", 0),
            "truncated_tokens": stats.get("truncated_tokens", 0),
            "short_target_documents": stats.get("short_target_documents", 0),
            "one_sentence_documents": stats.get("one_sentence_documents", 0),
            "masked_lm_predictions": predictions,
            "mean_predictions_per_instance": round(predictions / instances, 4)
            if instances
            else None,
            "padding_fraction": round(
                stats.get("padding_tokens", 0) / (instances * config.max_seq_length), 6
            )
            if instances
            else None,
        },
        "skipped": skipped,
        "counts": stats,
        "elapsed_seconds": round(elapsed_s, 2),
    }


class _InstancesBranch(beam.PTransform):
    """One instances job as a branch of a pipeline that may hold several (e.g. the train and
    eval sides of a phase): one runner start-up for all of them."""

    def __init__(self, config, files, vocab, settings, progress=None) -> None:
        super().__init__()
        self._args = (config, files, vocab, settings, progress)

    def expand(self, pbegin):
        build_pipeline(pbegin, *self._args)
        return beam.pvalue.PDone(pbegin.pipeline)


def run_instances_job(
    config: InstancesJobConfig,
    pipeline_options: PipelineOptions,
    progress: Callable[[str], None] = LOG.info,
) -> dict:
    """Runs the job end to end and returns the manifest (also written to ``output/manifest.json``).

    Raises JobConfigError before any work for bad settings, NoInstancesError when nothing could be
    produced, ReconciliationError when worker counts and output files disagree.
    """
    return run_instances_jobs([config], pipeline_options, progress)[0]


def run_instances_jobs(
    configs: list[InstancesJobConfig],
    pipeline_options: PipelineOptions,
    progress: Callable[[str], None] = LOG.info,
) -> list[dict]:
    """Runs several instances jobs (distinct outputs) in one Beam pipeline; each is checked,
    reconciled and gets its manifest exactly as if it ran alone. Returns the manifests."""
    prepared = []
    for config in configs:
        vocab, settings = check_config(config)
        files = expand_inputs(config.inputs)
        progress(
            f"{len(files)} input file(s), {sum(f.size_bytes for f in files):,} bytes "
            f"→ {config.output}"
        )
        if not FileSystems.exists(config.output):
            FileSystems.mkdirs(config.output)
        _remove_previous_output(config)
        prepared.append((config, files, vocab, settings))

    started = time.monotonic()
    watch = progress_dir(configs[0].output)
    p = beam.Pipeline(options=pipeline_options)
    for i, args in enumerate(prepared):
        label = "Job" if len(prepared) == 1 else f"Job{i}"
        p | label >> _InstancesBranch(*args, ProgressReporter(watch))
    with ProgressMonitor(
        watch, "instances", _document_passes(prepared), "document passes", progress
    ):
        result = p.run()
        result.wait_until_finish()
    elapsed = time.monotonic() - started
    manifests = []
    for i, (config, files, vocab, _) in enumerate(prepared):
        label = "Job" if len(prepared) == 1 else f"Job{i}"
        manifests.append(_finish(config, files, vocab, result, label, elapsed))
    return manifests


def _document_passes(prepared) -> int | None:
    """Documents × dupe passes over every job, when known up front (token index inputs)."""
    if not all(config.pretokenized for config, *_ in prepared):
        return None
    return sum(
        sum(parquet_rows(f.path) for f in files) * config.dupe_factor
        for config, files, *_ in prepared
    )


def _finish(config, files, vocab, result, label: str, elapsed: float) -> dict:
    """Reconciles one job's counts with its files and writes its manifest."""
    result_path = FileSystems.join(config.output, _RESULT)
    outcome = read_json(result_path)
    FileSystems.delete([result_path])
    _remove_spills(config.output)
    shards, stats = outcome["shards"], outcome["stats"]

    counters = _counter_values(result, label)
    written = sum(s["records"] for s in shards)
    if len(shards) != config.num_shards:
        raise ReconciliationError(f"expected {config.num_shards} shards, found {len(shards)}")
    if written != stats.get("instances", 0):
        raise ReconciliationError(
            f"instances created ({stats.get('instances', 0)}) != records in shards ({written})"
        )
    if counters and counters.get("instances", 0) != written:
        raise ReconciliationError(
            f"Beam counter instances={counters.get('instances', 0)} != records in shards ({written})"
        )
    sizes = [s["records"] for s in shards]
    if max(sizes) - min(sizes) > 1:
        raise ReconciliationError(
            f"shard sizes differ by more than one: {min(sizes)}..{max(sizes)}"
        )
    if written == 0:
        raise NoInstancesError(
            "the job produced zero instances: " + explain_no_instances(stats, len(files))
        )
    manifest = build_manifest(config, vocab, files, shards, stats, elapsed)
    write_json_atomically(FileSystems.join(config.output, MANIFEST), manifest)
    return manifest
