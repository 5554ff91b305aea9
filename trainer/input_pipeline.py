"""``tf.data`` over pretraining shards, and the checks that the shards fit the model before step one.

Shards are found with ``tf.io.gfile`` (local paths, globs, directories, ``gs://``). Their sizes
come from ``manifest.json`` beside them (bertprep's shards) or from flags (google-research/bert's
shards have no manifest); either way the first record is read and must agree, and the sizes must
fit the model (position table, vocabulary). GZIP is detected per file from the magic bytes.
Every shard whose manifest recorded its size in bytes must still have it (a copy cut short is
refused before step one; older manifests have no sizes and are not checked).

A read error while training (``DataLossError`` and friends from the ``tf.data`` iterator) names
no file; ``read_failure`` finds the damaged shard by reading each one with the same reader and
parser, and says it in one line (``ShardReadError``).

The dataset shards *files* across input pipelines (hosts) with a ``tf.distribute.InputContext``,
reads files with a parallel interleave, shuffles records, batches with static shapes
(``drop_remainder`` for training, as TPUs need) and prefetches.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import BinaryIO

import tensorflow as tf

from shards.files import ShardPathError
from shards.reader import RecordSizes, spec_problems
from shards.resolve import (
    agree,
    expand_shard_paths,
    first_record,
    listed_records,
    manifests_beside,
    parent_of,
    settle_sizes,
    size_mismatches,
)
from trainer.dynamic_masking import DynamicMasking, mask_batch
from trainer.model_presets import ModelConfig
from transforms.errors import UserError
from transforms.features import DYNAMIC, MANIFEST, SENTENCE_PAIRS, STATIC, has_nsp

GZIP_MAGIC = b"\x1f\x8b"


class ShardConfigError(UserError, ValueError):
    """The shards cannot be used as configured (missing, unreadable, or sizes that disagree)."""


@dataclass(frozen=True)
class DataSpec:
    """What the trainer was told about the data (each None when not given): the keys of
    ``bertprep validate --trainer-config``."""

    max_seq_length: int | None = None
    max_predictions_per_seq: int | None = None
    vocab_size: int | None = None


@dataclass(frozen=True)
class ShardInfo:
    """Resolved shard files and everything needed to read them."""

    files: tuple[str, ...]
    compressions: tuple[str, ...]
    max_seq_length: int
    max_predictions_per_seq: int
    vocab_size: int | None
    manifest_paths: tuple[str, ...] = ()
    records: int | None = None
    max_id_seen: int = 0
    vocab_path: str | None = None
    vocab_sha256: str | None = None
    do_lower_case: bool | None = None
    notes: tuple[str, ...] = field(default=())
    masking: str = STATIC
    """``static`` (masks in the records) or ``dynamic`` (masked here, in ``tf.data``)."""
    input_mode: str = SENTENCE_PAIRS
    dynamic_masking: dict | None = None
    """The manifest's ``dynamic_masking`` section (rates, cap, special ids, replacement pool)."""
    max_instances_per_row: int = 0
    """Packed rows (``transforms.features.PACKED_FEATURES``) of up to this many instances, from
    the manifest's ``packing`` section; 0: one instance per row."""
    max_predictions_per_row: int | None = None
    """Packed static rows: their prediction slots (the manifest's ``packing`` section)."""

    @property
    def packed(self) -> bool:
        return self.max_instances_per_row > 0

    @property
    def sizes(self) -> RecordSizes:
        return RecordSizes(
            self.max_seq_length,
            self.max_predictions_per_seq,
            self.masking,
            self.input_mode,
            self.max_instances_per_row,
            self.max_predictions_per_row,
        )

    @property
    def nsp(self) -> bool:
        """Whether the records carry NSP labels (the model then has an NSP head and loss)."""
        return has_nsp(self.input_mode)

    def masker(self, seed: int) -> DynamicMasking:
        """The dynamic masking of these shards with the trainer's ``seed``."""
        if self.dynamic_masking is None:
            raise ShardConfigError("static shards carry their masks: nothing to mask")
        return DynamicMasking.from_manifest(self.dynamic_masking, seed)


class TfFileSystem:
    """``shards.files.FileAccess`` through ``tf.io.gfile`` (no Beam needed on a trainer)."""

    def is_dir(self, path: str) -> bool:
        return tf.io.gfile.isdir(path)

    def glob(self, pattern: str) -> list[str]:
        return sorted(tf.io.gfile.glob(pattern))

    def list_dir(self, path: str) -> list[str]:
        base = path.rstrip("/")
        return [f"{base}/{name.rstrip('/')}" for name in sorted(tf.io.gfile.listdir(base))]

    def exists(self, path: str) -> bool:
        return tf.io.gfile.exists(path)

    def open(self, path: str) -> BinaryIO:
        return tf.io.gfile.GFile(path, "rb")  # type: ignore[return-value]

    def size(self, path: str) -> int:
        return int(tf.io.gfile.stat(path).length)


def compression_of(path: str) -> str:
    """``"GZIP"`` when the file starts with the gzip magic bytes, else ``""`` (name is ignored)."""
    with tf.io.gfile.GFile(path, "rb") as f:
        return "GZIP" if f.read(2) == GZIP_MAGIC else ""


def resolve_shards(patterns: list[str] | tuple[str, ...]) -> ShardInfo:
    """Finds the shards and settles their sizes by the shard tools' rules (``shards.resolve``:
    manifests beside the shards, which must agree, else the first record), then checks the first
    record against them: it must be of the manifests' kind and have their sizes. What the
    trainer was told (``DataSpec``) is compared afterwards, by ``check_fits``."""
    fs = TfFileSystem()
    try:
        files = expand_shard_paths(list(patterns), fs)
        manifests = manifests_beside(files, fs)
        check_recorded_sizes(files, manifests, fs)
        probe = first_record(files, fs)
        settled = settle_sizes(files, manifests, fs, probe)
    except ShardPathError as e:
        raise ShardConfigError(str(e)) from e
    with ThreadPoolExecutor(max_workers=16) as pool:
        compressions = list(pool.map(compression_of, files))
    sizes = settled.sizes
    first, probe_path = probe.features, probe.shard
    if (sizes.masking == DYNAMIC) != probe.unmasked:
        raise ShardConfigError(
            f"{probe_path}: the manifest says masking={sizes.masking} but the first record is "
            f"{'unmasked' if probe.unmasked else 'masked'}"
        )
    masking_specs = {
        json.dumps(m["dynamic_masking"], sort_keys=True): m["dynamic_masking"]
        for m in manifests.values()
        if m.get("dynamic_masking")
    }
    if sizes.masking == DYNAMIC and len(masking_specs) != 1:
        raise ShardConfigError(
            "unmasked shards need one dynamic_masking section in their manifests "
            f"(found {len(masking_specs)} different)"
        )
    nsp = has_nsp(sizes.input_mode)
    if nsp != ("next_sentence_labels" in first):
        raise ShardConfigError(
            f"{probe_path}: input_mode={sizes.input_mode} "
            f"{'needs' if nsp else 'has no'} next_sentence_labels, but the first "
            f"record {'lacks them' if nsp else 'has them'}"
        )
    check_packing(files, manifests, sizes, probe, fs)
    from_record = f"the first record of {probe_path}"
    try:
        seq = {p: m.get("max_seq_length") for p, m in manifests.items()}
        pred = {p: m.get("max_predictions_per_seq") for p, m in manifests.items()}
        seq[from_record] = len(first["input_ids"])
        if not probe.unmasked and not sizes.packed:
            pred[from_record] = len(first["masked_lm_positions"])
        agree("max_seq_length", seq)
        agree("max_predictions_per_seq", pred)
    except ShardPathError as e:
        raise ShardConfigError(str(e)) from e
    problems = spec_problems(probe.data, sizes)
    if problems:
        raise ShardConfigError(f"{probe_path}: first record: {'; '.join(problems)}")
    if sizes.packed:
        layout = packed_row_problems(first, sizes.max_instances_per_row)
        if layout:
            raise ShardConfigError(
                f"{probe_path}: the first record is not a packed row of up to "
                f"{sizes.max_instances_per_row} instances: {'; '.join(layout)}"
            )
    vocab = next(((m.get("vocab") or {}) for m in manifests.values() if m.get("vocab")), {})
    lower = None
    for m in manifests.values():
        lower = (m.get("config") or {}).get("do_lower_case", lower)
    max_id = int(max(max(first["input_ids"]), max(first.get("masked_lm_ids", [0]))))
    return ShardInfo(
        files=tuple(files),
        compressions=tuple(compressions),
        max_seq_length=sizes.max_seq_length,
        max_predictions_per_seq=sizes.max_predictions_per_seq,
        vocab_size=settled.vocab_size,
        manifest_paths=tuple(manifests),
        records=listed_records(files, manifests),
        max_id_seen=max_id,
        vocab_path=vocab.get("path"),
        vocab_sha256=settled.vocab_sha256,
        do_lower_case=lower,
        notes=settled.notes,
        masking=sizes.masking,
        input_mode=sizes.input_mode,
        dynamic_masking=next(iter(masking_specs.values())) if sizes.masking == DYNAMIC else None,
        max_instances_per_row=sizes.max_instances_per_row,
        max_predictions_per_row=sizes.max_predictions_per_row if sizes.packed else None,
    )


def check_packing(files, manifests: dict, sizes: RecordSizes, probe, fs) -> None:
    """ShardConfigError unless every shard directory holds rows of the settled kind (packed or
    not: the first record of each directory must have ``instance_ids`` exactly when the shards
    are packed, so packed and unpacked shards never mix in one ``--data``), and every packed
    manifest describes its rows consistently (``packing`` section, features and their lengths
    for its K)."""
    by_dir: dict[str, list[str]] = {}
    for f in files:
        by_dir.setdefault(parent_of(f), []).append(f)
    for directory, shards in by_dir.items():
        record = probe if probe.shard in shards else None
        if record is None:
            try:
                record = first_record(shards, fs)
            except ShardPathError:
                continue  # every shard there empty (or unreadable: reported when read)
        packed = "instance_ids" in record.features
        if packed != sizes.packed:
            said = (
                f"packed rows of up to {sizes.max_instances_per_row} instances"
                if sizes.packed
                else "one instance per row (unpacked)"
            )
            raise ShardConfigError(
                f"packed and unpacked shards cannot be mixed: the manifests say {said}, but "
                f"{record.shard} holds {'packed' if packed else 'unpacked'} rows; train on "
                "one kind per --data"
            )
        if packed and f"{directory}/{MANIFEST}" not in manifests:
            raise ShardConfigError(
                f"{directory}: packed rows without a manifest.json beside them (it says how "
                "many instances each row holds)"
            )
    if not sizes.packed:
        return
    for path, manifest in manifests.items():
        problems = packed_manifest_problems(manifest)
        if problems:
            raise ShardConfigError(f"{path}: {'; '.join(problems)}")


def packed_manifest_problems(manifest: dict) -> list[str]:
    """What is inconsistent in a packed manifest: K not a positive integer, prediction slots
    out of range for K and ``max_predictions_per_seq``, or ``features`` that are not
    ``transforms.features.features_of(..., packed=True)`` at ``kind_lengths`` for its K."""
    packing = manifest.get("packing") or {}
    k = packing.get("max_instances_per_row")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return [f"packing.max_instances_per_row must be a positive integer, got {k!r}"]
    sizes = RecordSizes.from_manifest(manifest)
    problems = []
    slots = packing.get("max_predictions_per_row")
    if sizes.masking == STATIC:
        if slots is None:
            slots = k * sizes.max_predictions_per_seq
        if not isinstance(slots, int) or not 1 <= slots <= k * sizes.max_predictions_per_seq:
            problems.append(
                f"packing.max_predictions_per_row={slots!r} is not within [1, K × "
                f"max_predictions_per_seq = {k * sizes.max_predictions_per_seq}]"
            )
            return problems
    features = manifest.get("features")
    if features is not None:
        expected = sizes.lengths()
        stated = {
            name: (spec or {}).get("length") if isinstance(spec, dict) else spec
            for name, spec in features.items()
        }
        wrong = [
            f"{name} length {stated.get(name)} (expected {length})"
            for name, length in expected.items()
            if stated.get(name) != length
        ]
        extra = sorted(set(stated) - set(expected))
        if wrong or extra:
            problems.append(
                f"its features disagree with packed rows of up to {k} instances: "
                + ", ".join(wrong + [f"{name} not a feature of such rows" for name in extra])
            )
    return problems


def packed_row_problems(features: dict, max_instances: int) -> list[str]:
    """What breaks the packed layout in one decoded row (``transforms.features.PACKED_FEATURES``):
    instance ids outside [0, K], instance slots used out of order or not matching the
    instance ids, an instance that is not one run starting at its ``[CLS]`` position, or
    ``position_ids`` that do not count from 0 within each instance."""
    instance_ids = [int(v) for v in features["instance_ids"]]
    positions = [int(v) for v in features["position_ids"]]
    weights = [float(v) for v in features["next_sentence_weights"]]
    cls = [int(v) for v in features["cls_positions"]]
    if any(i < 0 or i > max_instances for i in instance_ids):
        return [f"instance_ids outside [0, {max_instances}]"]
    used = sum(1 for w in weights if w > 0)
    if any(w > 0 for w in weights[used:]):
        return ["an instance slot used after an unused one"]
    named = set(instance_ids) - {0}
    if named != set(range(1, used + 1)):
        return [f"instance_ids name {len(named)} instances, next_sentence_weights {used}"]
    problems = []
    for s in range(1, used + 1):
        where = [j for j, i in enumerate(instance_ids) if i == s]
        if where != list(range(where[0], where[0] + len(where))) or cls[s - 1] != where[0]:
            problems.append(f"instance {s} is not one run from its cls_positions")
        elif [positions[j] for j in where] != list(range(len(where))):
            problems.append(f"instance {s}'s position_ids do not count 0, 1, ... from its [CLS]")
    return problems


def check_recorded_sizes(files, manifests, fs) -> None:
    """ShardConfigError naming the first shard whose size differs from its manifest's record
    (and how many more do), pointing to ``bertprep validate``; nothing for older manifests."""
    try:
        wrong = size_mismatches(files, manifests, fs)
    except tf.errors.OpError as e:
        raise ShardConfigError(f"cannot read the shards' sizes: {tf_message(e)}") from e
    if wrong:
        more = f" (and {len(wrong) - 1} more shard(s) of other sizes)" if len(wrong) > 1 else ""
        raise ShardConfigError(
            f"{wrong[0]}{more}; check the shards with: bertprep validate {parent_of(wrong[0].shard)}"
        )


class ShardReadError(RuntimeError):
    """A shard could not be read while training or evaluating (after the checks before step
    one): its message is the one line that ends the command."""


_TF_NOISE = (
    re.compile(r"\{\{function_node [^}]*\}\}\s*"),
    re.compile(r"\s*\[\[\{\{node [^}]*\}\}\]\]"),
    re.compile(r"\s*\[Op:[^\]]*\].*$", re.DOTALL),
)


def tf_message(error: tf.errors.OpError) -> str:
    """The cause in a TensorFlow error's message, on one line (without the function and op
    names TensorFlow wraps it in)."""
    text = error.message or type(error).__name__
    for noise in _TF_NOISE:
        text = noise.sub("", text)
    return " ".join(text.split()) or type(error).__name__


def is_read_error(error: BaseException) -> bool:
    """Whether ``error`` (raised from a ``tf.data`` iterator) says the shards could not be read:
    damaged or truncated data, a file gone or not readable, storage unavailable, or a record
    the parser rejects."""
    if isinstance(
        error,
        (
            tf.errors.DataLossError,
            tf.errors.NotFoundError,
            tf.errors.PermissionDeniedError,
            tf.errors.UnavailableError,
        ),
    ):
        return True
    return isinstance(error, tf.errors.InvalidArgumentError) and bool(
        re.search(r"Example|[Pp]arse", error.message or "")
    )


def shard_problem(info: ShardInfo, index: int) -> str | None:
    """What stops ``info.files[index]`` from being read to its end with the training reader and
    parser (its TensorFlow error, on one line), or None when it reads cleanly."""
    path, compression, sizes = info.files[index], info.compressions[index], info.sizes
    try:
        dataset = (
            tf.data.TFRecordDataset(path, compression_type=compression, buffer_size=8 << 20)
            .batch(1024)
            .map(lambda s: parse_batch(s, sizes))
        )
        dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1).numpy()
    except tf.errors.OpError as e:
        return f"{type(e).__name__}: {tf_message(e)}"
    return None


def find_damaged_shard(info: ShardInfo, threads: int = 16) -> tuple[str, str] | None:
    """(shard, problem) of a shard of ``info`` that cannot be read (``shard_problem``), or None
    when every one reads cleanly. Costs a read of the shards (``threads`` at a time), stopping
    at the first damaged one: only after a read error."""
    pool = ThreadPoolExecutor(max_workers=max(1, min(threads, len(info.files))))
    try:
        futures = {pool.submit(shard_problem, info, i): i for i in range(len(info.files))}
        for future in as_completed(futures):
            problem = future.result()
            if problem is not None:
                return info.files[futures[future]], problem
        return None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def read_failure(info: ShardInfo, error: tf.errors.OpError, when: str, rerun: str) -> str:
    """The one line that says a read error ``when`` it happened (``at step 12``): the damaged
    shard and what is wrong with it, or (none damaged now) TensorFlow's words; then ``rerun``
    (what a rerun does)."""
    found = find_damaged_shard(info)
    if found is None:
        return (
            f"reading the shards failed {when} ({type(error).__name__}: {tf_message(error)}); "
            f"every shard reads cleanly now (a transient storage error?): {rerun}"
        )
    shard, problem = found
    return (
        f"shard {shard} cannot be read ({problem}) {when}: it is damaged; check the shards "
        f"with: bertprep validate {parent_of(shard)}, replace it, then {rerun}"
    )


class ConfigMismatchError(UserError, ValueError):
    """The model or trainer configuration does not fit the shards (found before step one)."""


def mismatch_findings(info: ShardInfo, spec: DataSpec, model: ModelConfig) -> list[str]:
    """Every way the shards and the trainer/model configuration disagree (empty when they fit)."""
    where = ", ".join(info.manifest_paths) or "the first record"
    findings = []
    if spec.max_seq_length is not None and spec.max_seq_length != info.max_seq_length:
        findings.append(
            f"trainer max_seq_length={spec.max_seq_length} but the shards have "
            f"{info.max_seq_length} ({where})"
        )
    if (
        spec.max_predictions_per_seq is not None
        and spec.max_predictions_per_seq != info.max_predictions_per_seq
    ):
        findings.append(
            f"trainer max_predictions_per_seq={spec.max_predictions_per_seq} but the shards have "
            f"{info.max_predictions_per_seq} ({where})"
        )
    if info.max_seq_length > model.max_position_embeddings:
        findings.append(
            f"the shards' max_seq_length={info.max_seq_length} exceeds the model's position table "
            f"(max_position_embeddings={model.max_position_embeddings}); use a table that covers "
            "every phase (BERT: 512)"
        )
    if info.vocab_size is not None and info.vocab_size > model.vocabulary_size:
        findings.append(
            f"the shards' vocabulary has {info.vocab_size} tokens but the model's vocab_size is "
            f"{model.vocabulary_size} ({where})"
        )
    if info.max_id_seen >= model.vocabulary_size:
        findings.append(
            f"token id {info.max_id_seen} in the first record is outside the model's "
            f"vocab_size={model.vocabulary_size}"
        )
    return findings


def check_fits(info: ShardInfo, spec: DataSpec, model: ModelConfig) -> None:
    """Raises ConfigMismatchError listing every disagreement (see ``mismatch_findings``)."""
    findings = mismatch_findings(info, spec, model)
    if findings:
        raise ConfigMismatchError(
            "the shards do not fit the configuration:\n  - " + "\n  - ".join(findings)
        )


def parse_batch(serialized: tf.Tensor, sizes: RecordSizes) -> dict[str, tf.Tensor]:
    """A batch of serialized records → fixed-shape tensors (int64 features become int32), with
    the features of the records' kind (``sizes.features``)."""
    lengths = sizes.lengths()
    spec = {
        f.name: tf.io.FixedLenFeature(
            [lengths[f.name]], tf.int64 if f.dtype == "int64" else tf.float32
        )
        for f in sizes.features
    }
    parsed = tf.io.parse_example(serialized, spec)
    return {k: tf.cast(v, tf.int32) if v.dtype == tf.int64 else v for k, v in parsed.items()}


def make_dataset(
    info: ShardInfo,
    batch_size: int,
    *,
    training: bool,
    input_context: tf.distribute.InputContext | None = None,
    shuffle_buffer: int = 10_000,
    seed: int | None = None,
    cycle_length: int = 16,
    deterministic: bool | None = None,
    drop_remainder: bool | None = None,
    masking_seed: int = 0,
    start_step: int = 0,
) -> tf.data.Dataset:
    """Batches of the feature contract's tensors (see the module docstring).

    ``batch_size`` is per input pipeline (a replica's share under a strategy). Training: files
    shuffled and repeated forever, records shuffled, remainder dropped. Evaluation: one ordered
    pass, the last partial batch kept unless ``drop_remainder``.

    Unmasked shards (``info.masking == "dynamic"``) are masked after parsing
    (``trainer.dynamic_masking``) with ``masking_seed``; the batch drawn for training step ``s``
    (counted from ``start_step``, the step this dataset starts at) is masked with ``s``, so the
    masks of an example depend on (seed, step, example) only. Under a strategy with several
    replicas per input pipeline each replica takes one batch per step.
    """
    files = tf.data.Dataset.from_tensor_slices((list(info.files), list(info.compressions)))
    n_files = len(info.files)
    if input_context is not None and input_context.num_input_pipelines > 1:
        pipelines = input_context.num_input_pipelines
        if n_files < pipelines:
            raise ShardConfigError(
                f"{n_files} shard file(s) cannot be split across {pipelines} input pipelines; "
                "write at least one shard per host"
            )
        files = files.shard(pipelines, input_context.input_pipeline_id)
        n_files = len(range(input_context.input_pipeline_id, len(info.files), pipelines))
    if training:
        files = files.shuffle(n_files, seed=seed, reshuffle_each_iteration=True).repeat()
    records = files.interleave(
        lambda path, compression: tf.data.TFRecordDataset(
            path, compression_type=compression, buffer_size=8 << 20
        ),
        cycle_length=max(1, min(cycle_length, n_files)),
        block_length=1,
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if training and shuffle_buffer > 1:
        records = records.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    drop = training if drop_remainder is None else drop_remainder
    batches = records.batch(batch_size, drop_remainder=drop)
    sizes = info.sizes
    batches = batches.map(
        lambda s: parse_batch(s, sizes),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=deterministic,
    )
    if info.masking == DYNAMIC:
        masker = info.masker(masking_seed)
        per_step = 1
        if input_context is not None:
            per_step = max(
                1, input_context.num_replicas_in_sync // max(1, input_context.num_input_pipelines)
            )
        batches = batches.enumerate(start=start_step * per_step).map(
            lambda i, b: mask_batch(b, i // per_step, masker),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=deterministic,
        )
    return batches.prefetch(tf.data.AUTOTUNE)


def in_memory(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """One batch of ``dataset`` repeated forever: synthetic input that costs nothing to produce
    (to tell whether the real input pipeline keeps up)."""
    return dataset.take(1).cache().repeat()
