"""``--compat reference``: google-research/bert's ``create_pretraining_data.py`` output, value for
value, from one Beam pipeline that runs its invocations in parallel.

One invocation of the reference (its ``--input_file`` list, flags and ``--random_seed``) is
sequential by nature: one ``random.Random(seed)`` draws everything, in order. The job groups the
inputs into invocations (``InstancesJobConfig.invocations``: ``one``, ``per-file``,
``per-input``), checks every setting before any work, runs each invocation on a worker
(``pipeline.steps.reference_invocation``), checks the files against what the workers report and
writes ``manifest.json`` last. Options the reference does not have are refused: their output
could not be the reference's.

Reading order within an invocation is the reference's: the ``--input`` patterns in the order
given, a local glob's matches in the filesystem's order (``reference_matches``, as
``tf.gfile.Glob``), a file named twice read twice. ``.gz``/``.bz2`` inputs are decompressed first (the reference would read the
compressed bytes and stop).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, fields, replace

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import PipelineOptions

from pipeline.files.artifacts import delete_exactly, read_json, write_json, write_json_atomically
from pipeline.files.input_files import expand_inputs
from pipeline.jobs.instances import (
    MANIFEST_FORMAT,
    InstancesJobConfig,
    JobConfigError,
    Naming,
    NoInstancesError,
    record_description,
)
from pipeline.jobs.scaffold import RESULT, ReconciliationError, delete_tree
from pipeline.runtime.failures import exception_chain
from pipeline.runtime.interrupts import raise_if_interrupted
from pipeline.runtime.local_runner import start as start_pipeline
from pipeline.steps.reference_invocation import (
    RESUME_DIR,
    ReferenceInvocation,
    RunReferenceInvocationFn,
    marker_path,
)
from tokenizer.vocab import Vocab, VocabError
from transforms.features import MANIFEST, SENTENCE_PAIRS, STATIC
from transforms.reference_layout import ReferenceSettings
from transforms.reference_text import ReferenceInputError, reference_vocab_word_ids

LOG = logging.getLogger("bertprep.instances")

NONE = "none"
REFERENCE = "reference"
COMPATS = (NONE, REFERENCE)
ONE, PER_FILE, PER_INPUT = "one", "per-file", "per-input"
INVOCATIONS = (ONE, PER_FILE, PER_INPUT)
SUFFIX = ".tfrecord"
MAX_SEQ_LENGTH = 32767
"""Masked positions are kept as int16."""

_REFERENCE_FLAGS = {
    "max_seq_length",
    "max_predictions_per_seq",
    "masked_lm_prob",
    "dupe_factor",
    "short_seq_prob",
    "seed",
    "do_lower_case",
    "whole_word_mask",
}
"""Settings the reference has (``--max_seq_length`` ... ``--do_whole_word_mask``)."""
_LAYOUT = {"inputs", "vocab", "output", "num_shards", "shard_names", "shard_prefix", "pretokenized"}
_IMPLIED = {
    "reference_random_next",
    "reference_random_tokens",
    "reference_whole_word_decisions",
    "allow_prediction_cap",
    "spill_groups",
    "spill_group_mb",
}
"""The reference's defects and its lack of a prediction-cap check: implied by the mode."""
_MODE = {"compat", "invocations"}
FLAG_NAMES = Naming()
"""Settings named as command-line flags (``--max-seq-length``)."""


def check_reference_config(config: InstancesJobConfig, naming: Naming = FLAG_NAMES) -> None:
    """Raises JobConfigError for a setting the reference does not have (its output could not be
    the reference's) or values it cannot run with."""
    defaults = {f.name: f.default for f in fields(InstancesJobConfig)}
    for name in sorted(set(defaults) - _REFERENCE_FLAGS - _LAYOUT - _IMPLIED - _MODE):
        if getattr(config, name) != defaults[name]:
            raise JobConfigError(
                f"{naming(name)} {getattr(config, name)!r}: google-research/bert's script has no "
                f"such option, so --compat reference cannot honour it; drop it (default: "
                f"{defaults[name]!r})"
            )
    if config.invocations not in INVOCATIONS:
        raise JobConfigError(
            f"{naming('invocations')} must be one of {', '.join(INVOCATIONS)}, "
            f"got {config.invocations!r}"
        )
    if not 5 <= config.max_seq_length <= MAX_SEQ_LENGTH:
        raise JobConfigError(
            f"{naming('max_seq_length')} {config.max_seq_length}: the reference needs at least 5 "
            f"(room for [CLS] A [SEP] B [SEP]); at most {MAX_SEQ_LENGTH} here"
        )
    for name in ("max_predictions_per_seq", "dupe_factor"):
        if getattr(config, name) < 1:
            raise JobConfigError(f"{naming(name)} must be at least 1")
    if config.num_shards is not None and config.num_shards < 1:
        raise JobConfigError(f"{naming('num_shards')} must be at least 1")
    if config.shard_names is not None and config.invocations != ONE:
        raise JobConfigError(
            f"--output_file names one invocation's files; {naming('invocations')} "
            f"{config.invocations} writes files per invocation: give --output DIR"
        )
    if not config.inputs:
        raise JobConfigError(f"no {naming('input')} given")


def _stem(path: str) -> str:
    name = path.rstrip("/").rsplit("/", 1)[-1]
    for suffix in (".gz", ".bz2"):
        name = name.removesuffix(suffix)
    base, dot, _ext = name.rpartition(".")
    return base if dot and base else name


def _file_names(stem: str, count: int) -> tuple[str, ...]:
    if count == 1:
        return (stem + SUFFIX,)
    return tuple(f"{stem}-{i:05d}-of-{count:05d}{SUFFIX}" for i in range(count))


def reference_matches(pattern: str) -> list[str]:
    """The files an ``--input_file`` item names, in the order the reference reads them:
    ``tf.gfile.Glob`` lists a local directory in the order the filesystem returns its entries
    (not sorted; Python's ``glob`` walks it the same way) and a bucket in name order. A
    directory (bertprep's own extension) stands for every file under it, sorted."""
    import glob as globbing

    if "://" in pattern or os.path.isdir(pattern) or not globbing.has_magic(pattern):
        return [f.path for f in expand_inputs([pattern])]
    found = [p for p in globbing.glob(pattern) if os.path.isfile(p)]
    if not found:
        return [f.path for f in expand_inputs([pattern])]  # raises, naming the pattern
    return found


def plan_invocations(config: InstancesJobConfig) -> list[ReferenceInvocation]:
    """The invocations of the job, their inputs in reading order, their output file names."""
    per_pattern = [reference_matches(pattern) for pattern in config.inputs]
    count = config.num_shards or 1
    if config.invocations == ONE:
        names = (
            tuple(config.shard_names)
            if config.shard_names is not None
            else _file_names(config.shard_prefix, count)
        )
        inputs = tuple(path for paths in per_pattern for path in paths)
        plan = [ReferenceInvocation(config.shard_prefix, inputs, names)]
    elif config.invocations == PER_FILE:
        paths = sorted({path for group in per_pattern for path in group})
        plan = [ReferenceInvocation(_stem(p), (p,), _file_names(_stem(p), count)) for p in paths]
    else:
        width = len(str(len(per_pattern) - 1))
        plan = [
            ReferenceInvocation(
                f"{config.shard_prefix}-{i:0{width}d}",
                tuple(group),
                _file_names(f"{config.shard_prefix}-{i:0{width}d}", count),
            )
            for i, group in enumerate(per_pattern)
        ]
    seen: dict[str, str] = {}
    for invocation in plan:
        for name in invocation.outputs:
            if name in seen:
                raise JobConfigError(
                    f"invocations {seen[name]!r} and {invocation.name!r} would both write {name}: "
                    "input files with the same name in different directories need "
                    "--invocations per-input (or separate jobs)"
                )
            if name == MANIFEST or "/" in name:
                raise JobConfigError(f"not a usable output file name: {name}")
            seen[name] = invocation.name
    return plan


def reference_settings(config: InstancesJobConfig, vocab: Vocab, vocab_bytes: bytes):
    """The reference's settings and vocab tables; ReferenceInputError for a vocab whose ids the
    reference reads differently."""
    word_ids = reference_vocab_word_ids(vocab_bytes, vocab.tokens)
    is_continuation = np.zeros(max(len(word_ids), len(vocab)), dtype=bool)
    is_continuation[: len(vocab)] = vocab.continuation_mask()
    return ReferenceSettings(
        max_seq_length=config.max_seq_length,
        max_predictions_per_seq=config.max_predictions_per_seq,
        masked_lm_prob=config.masked_lm_prob,
        short_seq_prob=config.short_seq_prob,
        dupe_factor=config.dupe_factor,
        whole_word_mask=config.whole_word_mask,
        cls_id=vocab.cls_id,
        sep_id=vocab.sep_id,
        mask_id=vocab.mask_id,
        vocab_word_ids=word_ids,
        is_continuation=is_continuation,
    )


def _load_vocab(config: InstancesJobConfig, naming: Naming) -> tuple[Vocab, bytes]:
    from smart_open import open as smart_open

    try:
        with smart_open(config.vocab, "rb") as f:
            data = f.read()
        return Vocab.from_bytes(data), data
    except (VocabError, OSError) as e:
        raise JobConfigError(f"{naming('vocab')} {config.vocab}: {e}") from e


def run_reference_job(
    config: InstancesJobConfig,
    pipeline_options: PipelineOptions,
    progress: Callable[[str], None] = LOG.info,
    naming: Naming = FLAG_NAMES,
) -> dict:
    """Runs every invocation and returns the manifest (also ``output/manifest.json``)."""
    check_reference_config(config, naming)
    vocab, vocab_bytes = _load_vocab(config, naming)
    settings = reference_settings(config, vocab, vocab_bytes)
    plan = plan_invocations(config)
    files = sorted({path for invocation in plan for path in invocation.inputs})
    progress(
        f"--compat reference: {len(plan)} invocation(s) of google-research/bert's script over "
        f"{len(files)} input file(s) → {config.output}"
    )
    plan = fingerprinted(plan, config, vocab)
    check_output_directory(config.output)
    done = finished_invocations(config.output, plan)
    todo = [inv for inv in plan if inv.name not in done]
    delete_own_files(config.output, [n for inv in todo for n in inv.outputs] + [MANIFEST, RESULT])
    if done:
        progress(f"resuming: {len(done)} of {len(plan)} invocation(s) already written, kept")
    try:
        return _run(config, pipeline_options, progress, vocab, settings, plan, todo, done)
    except BaseException:
        # a failed job keeps the invocations it finished (their markers say so) and leaves no
        # other file a reader could take for output; the manifest is written last
        kept = finished_invocations(config.output, plan)
        delete_own_files(
            config.output, [n for inv in plan if inv.name not in kept for n in inv.outputs]
        )
        raise


def _input_stamp(path: str) -> list:
    if "://" not in path:
        stat = os.stat(path)
        return [path, stat.st_size, stat.st_mtime_ns]
    found = FileSystems.match([path])[0].metadata_list
    return [path, found[0].size_in_bytes, found[0].last_updated_in_seconds] if found else [path]


def fingerprinted(plan, config: InstancesJobConfig, vocab: Vocab) -> list[ReferenceInvocation]:
    """The plan with each invocation's fingerprint: every setting but where the output goes,
    the vocab's sha256 and each input's path, size and modification time."""
    import hashlib
    import json

    settings = {k: v for k, v in asdict(config).items() if k not in ("output", "inputs")}
    common = {"settings": settings, "vocab": vocab.sha256, "version": MANIFEST_FORMAT}
    out = []
    for inv in plan:
        key = {**common, "inputs": [_input_stamp(p) for p in inv.inputs], "outputs": inv.outputs}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
        out.append(replace(inv, fingerprint=digest))
    return out


def finished_invocations(output: str, plan) -> dict[str, dict]:
    """Name → result of every planned invocation whose marker has its fingerprint and whose
    output files are all there with the sizes it recorded."""
    marker_dir = FileSystems.join(output, RESUME_DIR)
    if not FileSystems.exists(marker_dir):
        return {}
    sizes = listing(output)
    markers = listing(marker_dir)
    done = {}
    for inv in plan:
        if f"{inv.name}.json" not in markers:
            continue
        try:
            marker = read_json(marker_path(output, inv.name))
        except ValueError:
            continue
        result = marker.get("result", {})
        if marker.get("fingerprint") == inv.fingerprint and all(
            sizes.get(o["file"]) == o["bytes"] for o in result.get("outputs", [])
        ):
            done[inv.name] = result
    return done


def listing(output: str) -> dict[str, int]:
    """Name → size of every file directly in ``output``. Exact names are compared here, never
    matched as patterns: Beam's matcher reads ``[``, ``*`` and ``?`` in a file name as a glob."""
    prefix = output.rstrip("/") + "/"
    found = FileSystems.match([FileSystems.join(output, "*")])[0].metadata_list
    return {
        m.path[len(prefix) :]: m.size_in_bytes
        for m in found
        if m.path.startswith(prefix) and "/" not in m.path[len(prefix) :]
    }


def check_output_directory(output: str) -> None:
    """Creates ``output``; a ``manifest.json`` there that no bertprep instances job wrote is
    refused, not replaced (``--output_file`` may point into a directory that holds other things:
    the job deletes only its own files)."""
    if not FileSystems.exists(output):
        FileSystems.mkdirs(output)
    manifest = FileSystems.join(output, MANIFEST)
    if FileSystems.exists(manifest):
        try:
            found = read_json(manifest).get("format")
        except ValueError:
            found = None
        if found != MANIFEST_FORMAT:
            raise JobConfigError(
                f"{manifest} is not a bertprep instances manifest; --compat reference writes its "
                "manifest.json beside its output files: choose another output directory"
            )


def delete_own_files(output: str, names: list[str]) -> None:
    """Deletes ``names`` in ``output`` and their temporary (``.partial-*``) names, exactly."""
    wanted = set(names)
    stale = [
        FileSystems.join(output, name)
        for name in listing(output)
        if name in wanted or name.split(".partial-", 1)[0] in wanted
    ]
    delete_exactly(stale)


def _run(config, pipeline_options, progress, vocab, settings, plan, todo, done) -> dict:
    from apache_beam.options.pipeline_options import DirectOptions

    started = time.monotonic()
    results = list(done.values())
    if todo:
        direct = pipeline_options.view_as(DirectOptions)
        if (direct.direct_num_workers or 0) > len(todo):
            direct.direct_num_workers = len(todo)  # a worker with no invocation costs memory only
        results += _run_invocations(config, pipeline_options, vocab, settings, todo)
    elapsed = time.monotonic() - started
    manifest = build_reference_manifest(config, vocab, plan, results)
    for invocation in manifest["invocations"]:
        progress(
            f"{invocation['name']}: {invocation['documents']:,} documents → "
            f"{invocation['instances']:,} instances in {invocation['seconds']} s"
        )
    manifest = {"format": MANIFEST_FORMAT, **manifest, "elapsed_seconds": round(elapsed, 2)}
    raise_if_interrupted()
    write_json_atomically(FileSystems.join(config.output, MANIFEST), manifest)  # last
    remove_markers(config.output)
    return manifest


def remove_markers(output: str) -> None:
    """Deletes the resume markers (the manifest now says the job is complete)."""
    marker_dir = FileSystems.join(output, RESUME_DIR)
    if "://" not in marker_dir:
        shutil.rmtree(marker_dir, ignore_errors=True)
    else:
        delete_tree(marker_dir)


def _run_invocations(config, pipeline_options, vocab, settings, todo) -> list[dict]:
    result_path = FileSystems.join(config.output, RESULT)
    p = beam.Pipeline(options=pipeline_options)
    _ = (
        p
        | "Invocations" >> beam.Create(todo)
        | "Spread" >> beam.Reshuffle()
        | "Run"
        >> beam.ParDo(
            RunReferenceInvocationFn(
                vocab,
                config.do_lower_case,
                settings,
                config.seed,
                config.output,
                config.pretokenized,
            )
        )
        | "Collect" >> beam.combiners.ToList()
        | "Save" >> beam.Map(lambda results: write_json(result_path, results))
    )
    try:
        result = start_pipeline(p)
        result.wait_until_finish()
    except Exception as e:
        reason = worker_input_error(e)
        if reason is None:
            raise
        raise ReferenceInputError(reason) from e
    results = read_json(result_path)
    FileSystems.delete([result_path])
    return results


_INPUT_ERROR = re.compile(r"ReferenceInputError: (.+?)(?: \[while running [^\]]*\])?$", re.M)


def worker_input_error(error: BaseException) -> str | None:
    """The message of a ``ReferenceInputError`` a worker raised, from the exception Beam
    re-raised in the launcher (which carries it as text), or None."""
    for e in exception_chain(error):
        found = _INPUT_ERROR.search(str(e))
        if found:
            return found.group(1).strip()
    return None


def _check_outputs(config: InstancesJobConfig, plan, results: list[dict]) -> None:
    """Every invocation reported once, every file it reported is there with its size."""
    by_name = {r["name"]: r for r in results}
    if len(results) != len(plan) or set(by_name) != {inv.name for inv in plan}:
        raise ReconciliationError(
            f"{len(plan)} invocations planned, the workers reported "
            f"{sorted(by_name)} ({len(results)} results)"
        )
    sizes = listing(config.output)
    for r in results:
        for out in r["outputs"]:
            if sizes.get(out["file"]) != out["bytes"]:
                raise ReconciliationError(
                    f"{FileSystems.join(config.output, out['file'])}: the worker wrote "
                    f"{out['bytes']:,} bytes, the file holds {sizes.get(out['file'], 'nothing')}"
                )
        if sum(o["records"] for o in r["outputs"]) != r["instances"]:
            raise ReconciliationError(f"{r['name']}: records in its files != its instances")


def build_reference_manifest(
    config: InstancesJobConfig, vocab: Vocab, plan, results: list[dict]
) -> dict:
    """The manifest of a ``--compat reference`` job: the instances manifest's keys (config,
    features, vocab, shards, totals) plus every invocation (inputs, files, counts)."""
    _check_outputs(config, plan, results)
    order = {inv.name: i for i, inv in enumerate(plan)}
    results = sorted(results, key=lambda r: order[r["name"]])
    empty = [r["name"] for r in results if r["instances"] == 0]
    if empty:
        raise NoInstancesError(
            f"{len(empty)} invocation(s) produced zero instances ({', '.join(empty[:5])}): "
            "their inputs hold no tokens (empty files?); the reference would write empty "
            "files without a word"
        )
    instances = sum(r["instances"] for r in results)
    random_next = sum(r["random_next"] for r in results)
    predictions = sum(r["masked_lm_predictions"] for r in results)
    return {
        "compat": REFERENCE,
        "config": asdict(config),
        "masking": STATIC,
        "input_mode": SENTENCE_PAIRS,
        "next_sentence_prediction": True,
        "dupe_factor": config.dupe_factor,
        **record_description(config, vocab),  # compat: static sentence pairs (checked)
        "invocations": results,
        "shards": [out for r in results for out in r["outputs"]],
        "totals": {
            "invocations": len(results),
            "input_files": len({p for r in results for p in r["inputs"]}),
            "documents": sum(r["documents"] for r in results),
            "sentences": sum(r["sentences"] for r in results),
            "tokens": sum(r["tokens"] for r in results),
            "instances": instances,
            "is_next": instances - random_next,
            "random_next": random_next,
            "is_next_ratio": round((instances - random_next) / instances, 6),
            "masked_lm_predictions": predictions,
            "mean_predictions_per_instance": round(predictions / instances, 4),
        },
        "skipped": {},
        "counts": {
            "pairs": instances,
            "random_next": random_next,
            "masked_lm_predictions": predictions,
        },
    }


__all__ = [
    "COMPATS",
    "INVOCATIONS",
    "REFERENCE",
    "ReferenceInputError",
    "check_reference_config",
    "plan_invocations",
    "run_reference_job",
]
