"""The tokenize stage of ``bertprep run``: documents → token ids, once, for every phase and pass.

Each documents file (``doc_id, sentences``) is tokenized by one worker into a token file pair
(``pipeline.token_files``) that the instance phases read in place (``pretokenized=True``), keyed
by ``doc_id``. Writes ``manifest.json`` last, with per-file document counts reconciled against
the workers' counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline import job_scaffold as scaffold
from pipeline.artifacts import matching_paths, merge_reject_parts, parquet_rows
from pipeline.progress import ProgressMonitor, ProgressReporter, progress_dir
from pipeline.stats import STATS_TAG
from pipeline.token_files import INDEX_SUFFIX, TokenizeFileFn
from tokenizer.vocab import Vocab

MANIFEST_FORMAT = "bertprep.tokens/1"
INDEX_PATTERN = f"tokens-*{INDEX_SUFFIX}"


class TokenizeReconciliationError(scaffold.ReconciliationError):
    """The workers' counts disagree with the token files."""


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
    work = []
    for name, (pattern, output) in sorted(sides.items()):
        scaffold.prepare_output(output, ("tokens-*", ".rejects-*", scaffold.REJECTS))
        work += [(name, path) for path in matching_paths(pattern)]
    outputs = {name: output for name, (_, output) in sides.items()}
    first_output = next(iter(outputs.values()))
    counts_path = FileSystems.join(first_output, scaffold.RESULT)
    watch = progress_dir(first_output)
    p = beam.Pipeline(options=options)
    tokenized = (
        p
        | "ListFiles" >> beam.Create(work, reshuffle=False)
        | "SpreadFiles" >> beam.Reshuffle()
        | "Tokenize"
        >> beam.ParDo(
            TokenizeFileFn(vocab, do_lower_case, outputs, ProgressReporter(watch))
        ).with_outputs(STATS_TAG, main="none")
    )
    tokenized[STATS_TAG] | "SaveCounts" >> scaffold.SaveCounts(counts_path)
    total = sum(parquet_rows(path) for _, path in work)
    started = time.monotonic()
    with ProgressMonitor(watch, "tokenize", total, "documents", progress) as monitor:
        result = p.run()
        monitor.follow(result)
        result.wait_until_finish()
    all_counts = scaffold.take_counts(counts_path)
    elapsed = time.monotonic() - started
    manifests = {}
    for name, (_, output) in sorted(sides.items()):
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
            "inputs": [path.rsplit("/", 1)[-1] for side, path in work if side == name],
            "vocab_sha256": vocab.sha256,
            "do_lower_case": do_lower_case,
            "files": indexes,
            "counts": counts,
            "rejects": rejected,
        }
        manifests[name] = scaffold.write_manifest(output, MANIFEST_FORMAT, manifest, elapsed)
    return manifests
