"""The tokenize stage of ``bertprep run``: documents → token ids, once, for every phase and pass.

Each documents file (``doc_id, sentences``) is tokenized by one worker into a token file pair
(``pipeline.files.token_files``) that the instance phases read in place (``pretokenized=True``), keyed
by ``doc_id``. Writes ``manifest.json`` last, with per-file document counts reconciled against
the workers' counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import matching_paths, merge_reject_parts, parquet_rows
from pipeline.files.token_files import INDEX_SUFFIX
from pipeline.jobs import scaffold
from pipeline.runtime.counters import STATS_TAG
from pipeline.runtime.local_runner import start as start_pipeline
from pipeline.runtime.progress import ProgressMonitor, ProgressReporter, progress_dir
from pipeline.steps.tokenize_files import TokenizeFileFn
from tokenizer.vocab import Vocab

MANIFEST_FORMAT = "bertprep.tokens/1"
INDEX_PATTERN = f"tokens-*{INDEX_SUFFIX}"


class TokenizeReconciliationError(scaffold.ReconciliationError):
    """The workers' counts disagree with the token files."""


def prepare_tokenize(outputs: dict[str, str]) -> str:
    """Clears each side's earlier output; returns the progress directory."""
    for output in outputs.values():
        scaffold.prepare_output(output, ("tokens-*", ".rejects-*", scaffold.REJECTS))
    return progress_dir(next(iter(outputs.values())))


def add_tokenize(
    work, vocab: Vocab, do_lower_case: bool, outputs: dict[str, str], watch: str, prefix: str = ""
) -> None:
    """Adds the tokenization of ``work`` (a PCollection of (side, documents file)) to its
    pipeline; the counts go to the first side's output."""
    counts_path = FileSystems.join(next(iter(outputs.values())), scaffold.RESULT)
    tokenized = work | f"{prefix}Tokenize" >> beam.ParDo(
        TokenizeFileFn(vocab, do_lower_case, outputs, ProgressReporter(watch))
    ).with_outputs(STATS_TAG, main="none")
    tokenized[STATS_TAG] | f"{prefix}SaveCounts" >> scaffold.SaveCounts(counts_path)


def finish_tokenize(
    sides: dict[str, tuple[str, str]], vocab: Vocab, do_lower_case: bool, elapsed: float
) -> dict[str, dict]:
    """Merges rejects, reconciles the workers' counts with the token files and writes each side's
    manifest (its inputs: what ``pattern`` matches now); returns the manifests by side."""
    first_output = next(iter(sides.values()))[1]
    all_counts = scaffold.take_counts(FileSystems.join(first_output, scaffold.RESULT))
    manifests = {}
    for name, (pattern, output) in sorted(sides.items()):
        prefix = f"{name}."
        counts = {k[len(prefix) :]: v for k, v in all_counts.items() if k.startswith(prefix)}
        rejected = merge_reject_parts(
            FileSystems.join(output, ".rejects-*.jsonl"), FileSystems.join(output, scaffold.REJECTS)
        )
        indexes = {
            path.rsplit("/", 1)[-1]: parquet_rows(path)
            for path in matching_paths(FileSystems.join(output, INDEX_PATTERN))
        }
        scaffold.reconcile(
            f"{name}: tokenized documents",
            counts.get("tokenized_documents", 0),
            sum(indexes.values()),
            TokenizeReconciliationError,
        )
        manifest = {
            "inputs": [path.rsplit("/", 1)[-1] for path in matching_paths(pattern)],
            "vocab_sha256": vocab.sha256,
            "do_lower_case": do_lower_case,
            "files": indexes,
            "counts": counts,
            "rejects": rejected,
        }
        manifests[name] = scaffold.write_manifest(output, MANIFEST_FORMAT, manifest, elapsed)
    return manifests


def run_tokenize_job(
    sides: dict[str, tuple[str, str]],
    vocab_path: str,
    do_lower_case: bool,
    options,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict]:
    """Tokenizes, for each side, the documents files at ``pattern`` into ``output`` (``sides``
    maps a name to (pattern, output)), all in one pipeline; returns each side's manifest.
    ``progress`` receives the periodic progress lines when stderr is not a terminal."""
    vocab = Vocab.from_file(vocab_path)
    outputs = {name: output for name, (_, output) in sides.items()}
    watch = prepare_tokenize(outputs)
    work = [
        (name, path)
        for name, (pattern, _) in sorted(sides.items())
        for path in matching_paths(pattern)
    ]
    p = beam.Pipeline(options=options)
    listed = (
        p | "ListFiles" >> beam.Create(work, reshuffle=False) | "SpreadFiles" >> beam.Reshuffle()
    )
    add_tokenize(listed, vocab, do_lower_case, outputs, watch)
    total = sum(parquet_rows(path) for _, path in work)
    started = time.monotonic()
    with ProgressMonitor(watch, "tokenize", total, "documents", progress) as monitor:
        result = start_pipeline(p)
        monitor.follow(result)
        result.wait_until_finish()
    return finish_tokenize(sides, vocab, do_lower_case, time.monotonic() - started)


def run_split_and_tokenize_jobs(
    clean_dir: str,
    split_output: str,
    seed: int,
    fraction: float,
    tokens_dir: str,
    vocab_path: str,
    do_lower_case: bool,
    options,
    total_documents: int,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, int], dict[str, dict]]:
    """The split and the tokenize jobs as one pipeline (one runner start-up): each half a split
    worker writes goes straight on to tokenization. Each job keeps its own files, counts and
    manifest, as when run alone; returns (documents per side, tokenize manifests by side, for
    the sides that have documents)."""
    from pipeline.jobs.split import SIDES, add_split, finish_split, prepare_split

    vocab = Vocab.from_file(vocab_path)
    files = prepare_split(clean_dir, split_output)
    outputs = {side: FileSystems.join(tokens_dir, side) for side in SIDES}
    watch = prepare_tokenize(outputs)
    p = beam.Pipeline(options=options)
    written = add_split(p, files, split_output, seed, fraction, prefix="Split")
    # Both halves of a clean file under one key, so that the runner, which deals keys out to
    # its workers in turn, gives each worker its share of the (large) training halves; a
    # Reshuffle's key per element would alternate train and eval halves between two workers.
    spread = (
        written
        | "KeyHalvesByFile" >> beam.Map(lambda half: (half[1].rsplit("/", 1)[-1], half))
        | "GroupHalves" >> beam.GroupByKey()
        | "Halves" >> beam.FlatMap(lambda group: sorted(group[1]))
    )
    add_tokenize(spread, vocab, do_lower_case, outputs, watch)
    started = time.monotonic()
    with ProgressMonitor(watch, "tokenize", total_documents, "documents", progress) as monitor:
        result = start_pipeline(p)
        monitor.follow(result)
        result.wait_until_finish()
    elapsed = time.monotonic() - started
    documents = finish_split(split_output, seed, fraction, elapsed)
    sides = {
        side: (FileSystems.join(split_output, side, "documents-*.parquet"), outputs[side])
        for side in SIDES
        if documents.get(side, 0)
    }
    if not sides:
        return documents, {}
    if "train" not in sides:  # the counts file lives in the first side's output
        _move_counts(outputs["train"], outputs["eval"])
    return documents, finish_tokenize(sides, vocab, do_lower_case, elapsed)


def _move_counts(source_dir: str, target_dir: str) -> None:
    source = FileSystems.join(source_dir, scaffold.RESULT)
    target = FileSystems.join(target_dir, scaffold.RESULT)
    if FileSystems.exists(source):
        FileSystems.rename([source], [target])
