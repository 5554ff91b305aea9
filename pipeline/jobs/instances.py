"""The instances job: BERT text files + vocab → sharded TFRecords of pretraining instances.

``run_instances_job`` checks the configuration before any work, estimates what the job will write
(``transforms.output_size``: the shard count that follows the data when none is given, a warning
or a refusal when a local output's filesystem has too little free space), builds and runs the
Beam pipeline, then reconciles what the workers counted with what the shard files hold and writes
``manifest.json`` (atomically, last: an output directory with a manifest is complete).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.files.artifacts import (
    WriteJobRejects,
    parquet_rows,
    read_json,
    read_parquet,
    write_json,
)
from pipeline.files.input_files import InputFile, expand_inputs
from pipeline.files.shard_writer import SUFFIXES, WriteShardFn, WriteShards
from pipeline.files.spill_groups import CoalesceSpills
from pipeline.jobs.scaffold import (
    REJECTS,
    RESULT,
    ReconciliationError,
    delete_tree,
    write_manifest,
)
from pipeline.runtime.counters import NAMESPACE, REJECTS_TAG, STATS_TAG, MergeCounts
from pipeline.runtime.local_runner import start as start_pipeline
from pipeline.runtime.per_job import PerJobFn, job_namespace
from pipeline.runtime.progress import ProgressMonitor, ProgressReporter, progress_dir
from pipeline.steps.bert_text_source import TokenizeBertTextFn, tokenize_bert_text
from pipeline.steps.instance_creation import (
    AssignBuckets,
    BucketSlicesFn,
    CreateInstances,
    CreateInstancesFn,
    bucket_count,
)
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.bert_text import DEFAULT_MAX_DOCUMENT_SENTENCES, DEFAULT_MAX_SENTENCE_CHARS
from transforms.errors import UserError
from transforms.features import (
    DYNAMIC,
    INPUT_MODES,
    MANIFEST,
    MASKINGS,
    PACKING_STRATEGY,
    SENTENCE_PAIRS,
    STATIC,
    features_of,
    has_nsp,
)
from transforms.instance_batches import InstanceSettings, TokenTables
from transforms.instances import PairConfig
from transforms.masking import MaskingConfig, prediction_budget
from transforms.output_size import (
    COMPRESSED_TEXT_RATIO,
    DocumentSizes,
    OutputEstimate,
    ShardCount,
    default_shard_count,
    estimate_output,
    mebibytes,
    shards_phrase,
    text_document_sizes,
)
from transforms.seeding import DEFAULT_SEED

LOG = logging.getLogger("bertprep.instances")
_RESULT = RESULT
SPILL_DIR = ".spill"
MANIFEST_FORMAT = "bertprep.instances/1"


class JobConfigError(UserError, ValueError):
    """The job's configuration cannot produce correct output; the message says why."""


class NoInstancesError(UserError, RuntimeError):
    """The job ran but produced zero instances; the message says why."""


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
    seed: int = DEFAULT_SEED
    num_shards: int | None = None
    """Shards to write; None: follow the data (``transforms.output_size.default_shard_count``:
    ~128 MiB shards, a power of two, at least 16 unless the input is too small to fill them)."""
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
    shard_names: list[str] | None = None
    """File names (in ``output``) for the shards, one per shard, in place of
    ``<shard_prefix>-NNNNN-of-NNNNN.tfrecord``: google-research/bert's ``--output_file`` list."""
    spill_groups: str = "auto"
    """Merge the task spill files into ~``spill_group_mb`` group files before writing shards, so
    a shard writer makes one ranged read per group rather than per task (``pipeline.files.spill_groups``):
    "auto" (when the output is on an object store), "always" or "never". Same shard bytes."""
    spill_group_mb: float = 256.0
    masking: str = STATIC
    """``static``: 80/10/10 masks precomputed in the records (google-research/bert). ``dynamic``:
    unmasked records (with word-start flags); the trainer draws new masks every step in
    ``tf.data``. The CLI and ``bertprep run`` default ``dupe_factor`` to 1 for it."""
    input_mode: str = SENTENCE_PAIRS
    """``sentence-pairs`` (with NSP), ``full-sentences`` or ``doc-sentences`` (packed, no NSP)."""
    compat: str = "none"
    """``none``: bertprep's instances. ``reference``: google-research/bert's
    ``create_pretraining_data.py`` output value for value (``pipeline.jobs.reference_compat``:
    its random stream, its reading of the inputs, its defects)."""
    invocations: str = "one"
    """With ``compat: reference``, how the inputs are grouped into runs of the reference, each
    with its own ``random.Random(seed)`` and its own output files: ``one`` (every input, as one
    command line of the script), ``per-file`` (one run per input file, as MLPerf runs its 500
    parts) or ``per-input`` (one run per ``--input`` pattern)."""
    pack_instances: int = 0
    """Up to this many sentence-pair instances per row, laid end to end, each with its own masks
    and NSP label (``transforms.features.PACKED_FEATURES``; rows chosen by first-fit-decreasing
    within each batch of instances, ``transforms.instance_packing``); 0: one instance per row,
    padded to ``max_seq_length`` as google-research/bert writes them."""
    pretokenized: bool = False
    """``inputs`` are token index files (``tokens-*.index.parquet``, ``pipeline.files.token_files``)
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
            masking_kind=self.masking,
            input_mode=self.input_mode,
            pack_instances=self.pack_instances,
        )


@dataclass(frozen=True)
class Naming:
    """How the user wrote the settings, so that errors name what they typed: command-line flags
    (``--max-seq-length``, the default) or config keys under ``prefix`` (``phases[0].``)."""

    prefix: str | None = None

    def __call__(self, field: str) -> str:
        if self.prefix is None:
            return "--" + field.replace("_", "-")
        return self.prefix + field

    def enable(self, field: str) -> str:
        """How to switch a boolean setting on."""
        return f"pass {self(field)}" if self.prefix is None else f"set {self(field)}: true"


_SETTING_FIELDS = (
    "max_predictions_per_seq",
    "max_seq_length",
    "masked_lm_prob",
    "short_seq_prob",
    "dupe_factor",
    "pack_instances",
    "input_mode",
)


def check_settings(config: InstancesJobConfig, naming: Naming = Naming()) -> InstanceSettings:
    """Validates every setting that needs no file (no vocab, no inputs); raises JobConfigError
    naming the settings as ``naming`` spells them."""
    import re

    if not config.inputs:
        raise JobConfigError(f"no {naming('input')} given")
    if config.num_shards is not None and config.num_shards < 1:
        raise JobConfigError(f"{naming('num_shards')} must be at least 1, got {config.num_shards}")
    if config.bucket_size < 2:
        raise JobConfigError(
            f"{naming('bucket_size')} must be at least 2, got {config.bucket_size}"
        )
    for field_name, allowed in (
        ("masking", MASKINGS),
        ("input_mode", INPUT_MODES),
    ):
        if getattr(config, field_name) not in allowed:
            raise JobConfigError(
                f"{naming(field_name)} must be one of {', '.join(allowed)}, "
                f"got {getattr(config, field_name)!r}"
            )
    if config.compression not in SUFFIXES:
        raise JobConfigError(f"{naming('compression')} must be one of {sorted(SUFFIXES)}")
    if config.shard_names is not None:
        if config.num_shards is not None and len(config.shard_names) != config.num_shards:
            raise JobConfigError(
                f"{len(config.shard_names)} output file names for {config.num_shards} shards"
            )
        if len(set(config.shard_names)) != len(config.shard_names):
            raise JobConfigError(f"output file names repeat: {', '.join(config.shard_names)}")
        clash = [n for n in config.shard_names if n in (MANIFEST, REJECTS) or "/" in n]
        if clash:
            raise JobConfigError(f"not a usable shard file name: {', '.join(clash)}")
    try:
        settings = config.settings()
    except ValueError as e:
        pattern = r"\b(" + "|".join(_SETTING_FIELDS) + r")\b"
        raise JobConfigError(re.sub(pattern, lambda m: naming(m.group(1)), str(e))) from e
    full = prediction_budget(config.max_seq_length, config.masked_lm_prob)
    if config.max_predictions_per_seq < full and not config.allow_prediction_cap:
        raise JobConfigError(
            f"{naming('max_predictions_per_seq')} {config.max_predictions_per_seq} is too small "
            f"for {naming('masked_lm_prob')} {config.masked_lm_prob} at "
            f"{naming('max_seq_length')} {config.max_seq_length}: a full sequence needs {full} "
            "predictions, so long instances would be masked at a lower rate than asked. Raise it "
            f"to {full}, or {naming.enable('allow_prediction_cap')} to accept the cap (as "
            "MLPerf's 512/76 recipe does)."
        )
    return settings


def check_config(
    config: InstancesJobConfig, naming: Naming = Naming()
) -> tuple[Vocab, InstanceSettings]:
    """Validates every setting (``check_settings``) and loads the vocab; raises JobConfigError
    naming the problem."""
    from tokenizer.vocab import VocabError

    settings = check_settings(config, naming)
    try:
        vocab = Vocab.from_file(config.vocab)
    except (VocabError, OSError) as e:
        raise JobConfigError(f"{naming('vocab')} {config.vocab}: {e}") from e
    return vocab, settings


def token_tables(vocab: Vocab, config: InstancesJobConfig) -> TokenTables:
    return TokenTables(
        ids=vocab.special_ids(),
        replacement_ids=vocab.replacement_ids(include_special=config.reference_random_tokens),
        is_continuation=vocab.continuation_mask(),
    )


def spill_dir(config: InstancesJobConfig) -> str:
    """Where the job's intermediate files go (refs, task spills, shard temporaries)."""
    return FileSystems.join(config.output, SPILL_DIR)


def _remove_spills(output: str) -> None:
    """Deletes the spill directory (intermediate records) of this or an interrupted earlier run."""
    delete_tree(FileSystems.join(output, SPILL_DIR))


def _shard_files(config: InstancesJobConfig) -> list[str]:
    """This job's shard files now in its output directory (of any shard count)."""
    if config.shard_names is not None:
        paths = [FileSystems.join(config.output, n) for n in config.shard_names]
        return [p for p in paths if FileSystems.exists(p)]
    pattern = FileSystems.join(config.output, f"{config.shard_prefix}-*-of-*.tfrecord*")
    return [m.path for m in FileSystems.match([pattern])[0].metadata_list]


def _remove_failed_output(config: InstancesJobConfig) -> None:
    """After a failed run: deletes its shards, spills and result file (no empty or partial shards
    are left to be mistaken for output, and no manifest vouches for them); rejects.jsonl stays,
    it says what was skipped."""
    try:
        _remove_spills(config.output)
        stale = _shard_files(config)
        for name in (_RESULT, MANIFEST):  # a manifest here was written by the failed call
            path = FileSystems.join(config.output, name)
            if FileSystems.exists(path):
                stale.append(path)
        temps = FileSystems.match([FileSystems.join(config.output, ".tmp-*")])[0].metadata_list
        stale += [m.path for m in temps]
        if stale:
            FileSystems.delete(stale)
    except Exception:  # never hide the failure itself behind a cleanup problem
        LOG.warning("could not clean up %s after the failed run", config.output, exc_info=True)


def _remove_previous_output(config: InstancesJobConfig) -> None:
    """Deletes this job's own artifacts from an earlier run (shards of any count, manifest)."""
    _remove_spills(config.output)
    stale: list[str] = _shard_files(config)
    for name in (MANIFEST, REJECTS, _RESULT):
        path = FileSystems.join(config.output, name)
        if FileSystems.exists(path):
            stale.append(path)
    if stale:
        LOG.info("removing %d files of a previous run from %s", len(stale), config.output)
        FileSystems.delete(stale)


def uses_spill_groups(config: InstancesJobConfig) -> bool:
    """Whether spill files are merged into group files (see ``InstancesJobConfig.spill_groups``):
    on an object store every ranged read costs requests; on a local disk the merge would only
    copy the records once more."""
    if config.spill_groups not in ("auto", "always", "never"):
        raise JobConfigError(
            f"spill_groups must be auto, always or never, got {config.spill_groups!r}"
        )
    if config.spill_groups == "auto":
        return "://" in config.output
    return config.spill_groups == "always"


Job = tuple[InstancesJobConfig, list[InputFile], Vocab, InstanceSettings]
"""One instances job ready to run: its config (shard count fixed), inputs, vocab and settings."""


def slots_per_token(
    config: InstancesJobConfig, estimate: OutputEstimate, sizes: DocumentSizes
) -> float:
    """Token slots one dupe pass is expected to write per input token (rows × row length over
    tokens): how much work a pass over a bucket is, relative to other jobs' passes."""
    tokens = sizes.total_tokens * max(1, config.dupe_factor)
    return estimate.instances * config.max_seq_length / tokens if tokens else 1.0


def build_pipeline(
    p: beam.Pipeline,
    jobs: list[Job],
    labels: list[str],
    progress: ProgressReporter | None = None,
    pass_weights: list[float] | None = None,
) -> None:
    """Adds ``jobs`` to ``p`` (``labels``: the steps' name of each job, ``Job`` or ``Job0``...);
    each writes its shards, rejects.jsonl and a result file; each (bucket, dupe pass) done adds
    its documents to ``progress``. ``pass_weights[j]`` (``slots_per_token``) scales the weight of
    job ``j``'s passes against the others', so the largest are dealt first across jobs.

    The jobs share their stages: one reads every job's token index files, one creates every
    job's instances, one writes every job's shards (``pipeline.runtime.per_job``), so the
    runner's workers take all the work of a step from one pool instead of one job after the
    other. Text inputs are read and tokenized per job (each job's vocab and casing); what each
    job writes is what it would write alone.
    """
    names = dict(enumerate(labels))
    slices, stats, rejects = [], [], []
    token_jobs = {j: job for j, job in enumerate(jobs) if job[0].pretokenized}
    if token_jobs:
        buckets = {
            j: BucketSlicesFn(
                config.seed,
                bucket_count(sum(parquet_rows(f.path) for f in files), config.bucket_size),
            )
            for j, (config, files, *_) in token_jobs.items()
        }
        listed = [(j, f.path) for j, (_, files, *_) in token_jobs.items() for f in files]
        read = (
            p
            | "ListTokenFiles" >> beam.Create(listed, reshuffle=False)
            | "SpreadTokenFiles" >> beam.Reshuffle()
            | "BucketSlices"
            >> beam.ParDo(PerJobFn(buckets, names)).with_outputs(
                REJECTS_TAG, STATS_TAG, main="slices"
            )
        )
        slices.append(read.slices | "JobBuckets" >> beam.Map(_job_bucket))
        stats.append(read[STATS_TAG])
        rejects.append(read[REJECTS_TAG])
    for j, job in enumerate(jobs):
        if not job[0].pretokenized:
            text = p | labels[j] >> _TextSlices(j, *job[:3])
            slices.append(text["slices"])
            stats.append(text["stats"])
            rejects.append(text["rejects"])
    tables: dict[tuple[str, bool], TokenTables] = {}  # one object per vocab: pickled once
    for config, _, vocab, _ in jobs:
        key = (vocab.sha256, config.reference_random_tokens)
        if key not in tables:
            tables[key] = token_tables(vocab, config)
    creates = {
        j: CreateInstancesFn(
            settings,
            tables[vocab.sha256, config.reference_random_tokens],
            spill_dir(config),
            config.num_shards,
            progress,
        )
        for j, (config, _, vocab, settings) in enumerate(jobs)
    }
    created = (
        tuple(slices)
        | "AllSlices" >> beam.Flatten()
        | "Instances" >> CreateInstances(creates, names, dict(enumerate(pass_weights or [])))
    )
    spills = _spill_groups(created["spills"], jobs, labels)
    writes = {
        j: WriteShardFn(
            config.output,
            config.shard_prefix,
            config.num_shards,
            config.compression,
            shard_names=tuple(config.shard_names) if config.shard_names is not None else None,
            temp_dir=spill_dir(config),
        )
        for j, (config, *_) in enumerate(jobs)
    }
    shards = spills | "Shards" >> WriteShards(writes, names)
    merged_stats = (
        (*stats, created["stats"])
        | "AllStats" >> beam.Flatten()
        | "MergeStats" >> beam.CombinePerKey(MergeCounts())
    )
    rejects_of = {j: config.output for j, (config, *_) in enumerate(jobs)}
    tuple(rejects) | "AllRejects" >> beam.Flatten() | "Rejects" >> WriteJobRejects(rejects_of)
    results = {j: FileSystems.join(config.output, _RESULT) for j, (config, *_) in enumerate(jobs)}

    def write_result(job_outcome: tuple[int, dict]) -> None:
        job, outcome = job_outcome
        totals = list(outcome["stats"])
        write_json(
            results[job],
            {
                "shards": sorted(outcome["shards"], key=lambda s: s["index"]),
                "stats": totals[0] if totals else {},
            },
        )

    (
        {"shards": shards, "stats": merged_stats}
        | "ShardsAndStats" >> beam.CoGroupByKey()
        | "WriteResults" >> beam.Map(write_result)
    )


def _job_bucket(item: tuple[int, tuple[int, object]]) -> tuple[tuple[int, int], object]:
    """(job, (bucket, slice)) → ((job, bucket), slice): the key instance creation groups by."""
    job, (bucket, table) = item
    return (job, bucket), table


class _TextSlices(beam.PTransform):
    """One job's text inputs, read and tokenized with its vocab → ``slices`` ((job, bucket),
    one-document RefTable), ``stats`` ((job, counts)) and ``rejects`` ((job, Reject dict))."""

    def __init__(
        self, job: int, config: InstancesJobConfig, files: list[InputFile], vocab: Vocab
    ) -> None:
        super().__init__()
        self._job, self._config, self._files, self._vocab = job, config, files, vocab

    def expand(self, pbegin):
        config, job = self._config, self._job
        tokenized = (
            pbegin
            | "ListFiles" >> beam.Create(self._files, reshuffle=False)
            | "SpreadFiles" >> beam.Reshuffle()
            | "Tokenize"
            >> tokenize_bert_text(
                TokenizeBertTextFn(
                    self._vocab,
                    config.do_lower_case,
                    spill_dir(config),
                    config.max_sentence_chars,
                    config.max_document_sentences,
                )
            )
        )
        slices = tokenized.tables | "AssignBuckets" >> AssignBuckets(
            config.seed, config.bucket_size
        )
        return {
            "slices": slices | "JobBuckets" >> beam.Map(lambda kv: ((job, kv[0]), kv[1])),
            "stats": tokenized[STATS_TAG] | "JobStats" >> beam.Map(lambda counts: (job, counts)),
            "rejects": tokenized[REJECTS_TAG] | "JobRejects" >> beam.Map(lambda r: (job, r)),
        }


def _spill_groups(spills, jobs: list[Job], labels: list[str]):
    """(job, TaskSpill) → the same, with the spills of each job that merges them
    (``uses_spill_groups``) replaced by (job, GroupSpill)."""
    grouped = [j for j, (config, *_) in enumerate(jobs) if uses_spill_groups(config)]
    if not grouped:
        return spills
    parts = [spills | "UngroupedSpills" >> beam.Filter(lambda s: s[0] not in grouped)]
    for j in grouped:
        config = jobs[j][0]
        parts.append(
            spills
            | f"{labels[j]}Spills" >> beam.Filter(lambda s, job=j: s[0] == job)
            | f"{labels[j]}TaskSpills" >> beam.Map(lambda s: s[1])
            | f"{labels[j]}SpillGroups"
            >> CoalesceSpills(
                spill_dir(config),
                config.num_shards,
                max(1, int(config.spill_group_mb * (1 << 20))),
            )
            | f"{labels[j]}JobGroups" >> beam.Map(lambda g, job=j: (job, g))
        )
    return tuple(parts) | "AllSpills" >> beam.Flatten()


TEXT_SAMPLE_BYTES = 1 << 20
"""How much of the first text input is read to learn its document and sentence sizes."""
FREE_SPACE_REFUSAL = 4.0
"""A local output is refused before any work when the estimated bytes exceed its free space by
more than this factor: even an estimate this many times too high would not fit."""


def _text_sample(files: list[InputFile]) -> str:
    """Up to ``TEXT_SAMPLE_BYTES`` of the first non-empty input, decompressed, cut after its last
    whole document when the file is longer."""
    for f in files:
        if f.size_bytes == 0:
            continue
        with FileSystems.open(f.path) as handle:  # compression from the name, as the reader does
            data = handle.read(TEXT_SAMPLE_BYTES)
        if len(data) >= TEXT_SAMPLE_BYTES and b"\n\n" in data:
            data = data[: data.rindex(b"\n\n")]
        return data.decode("utf-8", errors="replace")
    return ""


def document_sizes(config: InstancesJobConfig, files: list[InputFile]) -> DocumentSizes:
    """The inputs' documents' token and sentence counts: exact from token index files, estimated
    for text from its size and a sample of its head (``transforms.output_size``)."""
    if config.pretokenized:
        tables = [read_parquet(f.path, ["tokens", "num_sentences"]) for f in files]
        if not tables:
            return DocumentSizes(np.zeros(0), np.zeros(0))
        return DocumentSizes(
            np.concatenate([t.column("tokens").to_numpy() for t in tables]),
            np.concatenate([t.column("num_sentences").to_numpy() for t in tables]),
        )
    text_bytes = 0.0
    for f in files:
        suffix = next((s for s in COMPRESSED_TEXT_RATIO if f.path.endswith(s)), None)
        text_bytes += f.size_bytes * (COMPRESSED_TEXT_RATIO[suffix] if suffix else 1.0)
    return text_document_sizes(text_bytes, _text_sample(files))


def estimate_job(config: InstancesJobConfig, sizes: DocumentSizes, vocab: Vocab) -> OutputEstimate:
    """What the job is expected to write (``transforms.output_size.estimate_output``) from its
    inputs' ``document_sizes``."""
    return estimate_output(
        sizes,
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        dupe_factor=config.dupe_factor,
        short_seq_prob=config.short_seq_prob,
        masking=config.masking,
        input_mode=config.input_mode,
        vocab_size=len(vocab),
        compression=config.compression,
        spill_groups=uses_spill_groups(config),
        tokenized_here=not config.pretokenized,
    )


def shard_count(config: InstancesJobConfig, estimate: OutputEstimate) -> ShardCount:
    """The job's shard count: one per output file name, the explicit ``num_shards``, or (None)
    the count that follows the data (``transforms.output_size.default_shard_count``)."""
    if config.shard_names is not None:
        n = len(config.shard_names)
        return ShardCount(n, f"{shards_phrase(n)} (one per output file name)")
    if config.num_shards is not None:
        return ShardCount(config.num_shards, f"{shards_phrase(config.num_shards)} (explicit)")
    return default_shard_count(estimate.shard_bytes, estimate.instances)


def _local_path(output: str) -> str | None:
    """The local path of ``output`` (``file://`` stripped); None on an object store."""
    if output.startswith("file://"):
        return output.removeprefix("file://")
    return None if "://" in output else output


def _existing_ancestor(path: str) -> str:
    """``path`` or the nearest directory above it that exists (where its files will live)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _reclaimable_bytes(config: InstancesJobConfig) -> int:
    """Bytes of this job's earlier output that the run deletes before it writes (shards, spills)."""
    local = replace(config, output=_local_path(config.output))
    total = 0
    for path in _shard_files(local):
        total += os.path.getsize(path)
    spill_dir = os.path.join(local.output, SPILL_DIR)
    for root, _, names in os.walk(spill_dir):
        total += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    return total


def check_free_space(
    configs: list[InstancesJobConfig],
    estimates: list[OutputEstimate],
    progress: Callable[[str], None],
) -> None:
    """Compares the bytes the jobs are expected to write with the free space of each local
    filesystem they write to (less what they delete first); object stores (``gs://``...) are
    skipped. Too little: a warning line naming the path, the estimate and the free bytes; more
    than ``FREE_SPACE_REFUSAL`` times too little: JobConfigError, before any output is touched."""
    by_device: dict[int, list[tuple[InstancesJobConfig, OutputEstimate]]] = {}
    for config, estimate in zip(configs, estimates, strict=True):
        local = _local_path(config.output)
        if local is None:
            continue
        device = os.stat(_existing_ancestor(local)).st_dev
        by_device.setdefault(device, []).append((config, estimate))
    for jobs in by_device.values():
        where = _existing_ancestor(_local_path(jobs[0][0].output))
        needed = sum(e.total_bytes for _, e in jobs)
        free = shutil.disk_usage(where).free + sum(_reclaimable_bytes(c) for c, _ in jobs)
        if needed <= free:
            continue
        outputs = ", ".join(c.output for c, _ in jobs)
        message = (
            f"{outputs}: the run is expected to write ~{needed:,} bytes "
            f"({mebibytes(needed)}: shards, and spills deleted at the end) but the filesystem "
            f"of {where} has {free:,} bytes free ({mebibytes(free)})"
        )
        if needed > FREE_SPACE_REFUSAL * free:
            raise JobConfigError(
                f"not enough disk space: {message}, less than 1/{FREE_SPACE_REFUSAL:g} of it. "
                "Free some space or write the output elsewhere."
            )
        progress(f"warning: {message}; it may run out of space (the estimate is within ~2×)")


def _counter_values(result, label: str) -> dict[str, int]:
    """This job's bertprep counters: those of its own steps (under ``label``) and its counts in
    the steps all jobs share (``pipeline.runtime.per_job.job_namespace``)."""
    out: dict[str, int] = {}
    try:
        counters = result.metrics().query()["counters"]
    except Exception:  # a runner without metrics support: reconcile from files only
        return out
    for c in counters:
        namespace, step = c.key.metric.namespace, c.key.step
        if namespace == job_namespace(label) or (namespace == NAMESPACE and f"{label}/" in step):
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


def record_description(config: InstancesJobConfig, vocab: Vocab) -> dict:
    """The manifest keys that say what a record holds: features and their lengths, the sizes,
    the vocab (path, sha256, size, special ids) and the tokenizer's settings."""
    slots = config.settings().prediction_slots_per_row if config.pack_instances else None
    return {
        "features": {
            f.name: {
                "dtype": f.dtype,
                "length": f.length(
                    config.max_seq_length,
                    config.max_predictions_per_seq,
                    max(1, config.pack_instances),
                    slots,
                ),
            }
            for f in features_of(config.masking, config.input_mode, config.pack_instances > 0)
        },
        "max_seq_length": config.max_seq_length,
        "max_predictions_per_seq": config.max_predictions_per_seq,
        "packing": {
            "max_instances_per_row": config.pack_instances,
            "max_predictions_per_row": slots,
            "strategy": PACKING_STRATEGY,
        }
        if config.pack_instances
        else None,
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
    }


def build_manifest(
    config: InstancesJobConfig,
    vocab: Vocab,
    files: list[InputFile],
    shards: list[dict],
    stats: dict[str, int],
    elapsed_s: float,
) -> dict:
    """The manifest: config, vocab and tokenizer, inputs, shards, totals, skips and why."""
    rows = sum(s["records"] for s in shards)
    instances = stats.get("instances", 0) if config.pack_instances else rows
    pairs = stats.get("pairs", 0)
    is_next = pairs - stats.get("random_next", 0)
    predictions = stats.get("masked_lm_predictions", 0)
    skipped = {
        k: v
        for k, v in stats.items()
        if k.startswith(("skipped_", "dropped_", "split_", "truncated_input", "empty_input"))
    }
    expected = stats.get("expected_masked_lm_predictions", 0)
    manifest = {
        "format": MANIFEST_FORMAT,
        "config": asdict(config),
        "masking": config.masking,
        "input_mode": config.input_mode,
        "next_sentence_prediction": has_nsp(config.input_mode),
        "dupe_factor": config.dupe_factor,
        **record_description(config, vocab),
        "inputs": [f.fingerprint() for f in files],
        "shards": [
            {
                "file": s["path"].rsplit("/", 1)[-1],
                "records": s["records"],
                "content_sha256": s["content_sha256"],
                "bytes": s["bytes"],
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
            "rows": rows,
            "instances_per_row": round(instances / rows, 4) if rows else None,
            "padding_fraction": round(
                stats.get("padding_tokens", 0) / (rows * config.max_seq_length), 6
            )
            if rows
            else None,
        },
        "skipped": skipped,
        "counts": stats,
        "elapsed_seconds": round(elapsed_s, 2),
    }
    if not has_nsp(config.input_mode):
        for key in ("is_next", "random_next", "is_next_ratio"):
            manifest["totals"][key] = None
        manifest["totals"]["document_separators"] = stats.get("document_separators", 0)
        manifest["totals"]["split_long_sentences"] = stats.get("split_long_sentences", 0)
    if config.masking == DYNAMIC:
        manifest["totals"]["mean_predictions_per_instance"] = None  # none on disk
        manifest["totals"]["expected_predictions_per_instance"] = (
            round(expected / instances, 4) if instances else None
        )
        manifest["dynamic_masking"] = dynamic_masking_spec(config, vocab)
    return manifest


def dynamic_masking_spec(config: InstancesJobConfig, vocab: Vocab) -> dict:
    """What the trainer needs to mask unmasked shards as the static path would: rates, the cap,
    whole-word masking, special ids and the random-replacement pool (as the id ranges it
    excludes: bracketed specials and ``[unusedN]``, unless ``reference_random_tokens``)."""
    pool = vocab.replacement_ids(include_special=config.reference_random_tokens)
    excluded = sorted(set(range(len(vocab))) - set(pool.tolist()))
    ranges: list[list[int]] = []
    for i in excluded:
        if ranges and ranges[-1][1] == i:
            ranges[-1][1] = i + 1
        else:
            ranges.append([i, i + 1])
    masking = config.settings().masking  # the static path's rules, branch probabilities included
    return {
        "masked_lm_prob": masking.masked_lm_prob,
        "max_predictions_per_seq": masking.max_predictions_per_seq,
        "whole_word_mask": masking.whole_word_mask,
        "mask_token_prob": masking.mask_token_prob,
        "keep_token_prob": masking.keep_token_prob,
        "random_token_prob": masking.random_token_prob,
        "vocab_size": len(vocab),
        "special_ids": {
            "pad": vocab.pad_id,
            "cls": vocab.cls_id,
            "sep": vocab.sep_id,
            "mask": vocab.mask_id,
        },
        "replacement_excluded_ranges": ranges,
    }


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
    estimates: list[OutputEstimate] = []
    counts: list[ShardCount] = []
    pass_weights: list[float] = []
    for config in configs:  # every check before any job's output is touched
        vocab, settings = check_config(config)
        files = expand_inputs(config.inputs)
        sizes = document_sizes(config, files)
        estimate = estimate_job(config, sizes, vocab)
        count = shard_count(config, estimate)
        config = replace(config, num_shards=count.num_shards)
        progress(
            f"{len(files)} input file(s), {sum(f.size_bytes for f in files):,} bytes "
            f"→ {config.output}"
        )
        progress(
            f"{config.output}: {count.reason}; expected ~{estimate.instances:,} instances, "
            f"~{mebibytes(estimate.shard_bytes)} of shards, "
            f"~{mebibytes(estimate.total_bytes)} written in all (spills included)"
        )
        prepared.append((config, files, vocab, settings))
        pass_weights.append(slots_per_token(config, estimate, sizes))
        estimates.append(estimate)
        counts.append(count)
    check_free_space([c for c, *_ in prepared], estimates, progress)
    for config, *_ in prepared:
        if not FileSystems.exists(config.output):
            FileSystems.mkdirs(config.output)
        _remove_previous_output(config)

    labels = ["Job"] if len(prepared) == 1 else [f"Job{i}" for i in range(len(prepared))]
    started = time.monotonic()
    watch = progress_dir(configs[0].output)
    try:
        p = beam.Pipeline(options=pipeline_options)
        build_pipeline(p, prepared, labels, ProgressReporter(watch), pass_weights)
        with ProgressMonitor(
            watch, "instances", _document_passes(prepared), "document passes", progress
        ) as monitor:
            result = start_pipeline(p)
            monitor.follow(result)
            result.wait_until_finish()
        elapsed = time.monotonic() - started
        manifests = []
        for i, (config, files, vocab, _) in enumerate(prepared):
            manifests.append(
                _finish(config, files, vocab, result, labels[i], elapsed, counts[i], estimates[i])
            )
    except BaseException:
        for config, *_ in prepared:
            _remove_failed_output(config)
        raise
    return manifests


def _document_passes(prepared) -> int | None:
    """Documents × dupe passes over every job, when known up front (token index inputs)."""
    if not all(config.pretokenized for config, *_ in prepared):
        return None
    return sum(
        sum(parquet_rows(f.path) for f in files) * config.dupe_factor
        for config, files, *_ in prepared
    )


def _finish(
    config,
    files,
    vocab,
    result,
    label: str,
    elapsed: float,
    count: ShardCount,
    estimate: OutputEstimate,
) -> dict:
    """Reconciles one job's counts with its files and writes its manifest (with why the shard
    count is what it is, and what was expected before the run)."""
    result_path = FileSystems.join(config.output, _RESULT)
    outcome = read_json(result_path)
    FileSystems.delete([result_path])
    _remove_spills(config.output)
    shards, stats = outcome["shards"], outcome["stats"]

    counters = _counter_values(result, label)
    written = sum(s["records"] for s in shards)
    made = "packed_rows" if config.pack_instances else "instances"
    if len(shards) != config.num_shards:
        raise ReconciliationError(f"expected {config.num_shards} shards, found {len(shards)}")
    if written != stats.get(made, 0):
        raise ReconciliationError(
            f"{made} created ({stats.get(made, 0)}) != records in shards ({written})"
        )
    if counters and counters.get(made, 0) != written:
        raise ReconciliationError(
            f"Beam counter {made}={counters.get(made, 0)} != records in shards ({written})"
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
    manifest["num_shards_reason"] = count.reason
    manifest["estimate"] = {
        "instances": estimate.instances,
        "shard_bytes": estimate.shard_bytes,
        "total_bytes": estimate.total_bytes,
    }
    return write_manifest(config.output, manifest.pop("format"), manifest, elapsed)
