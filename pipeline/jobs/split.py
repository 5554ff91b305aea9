"""The held-out split: clean documents → training and evaluation documents (Parquet, ids kept).

A document goes to the evaluation side when ``stable_hash64(seed, "eval", doc_id) / 2**64`` falls
below the fraction: a deterministic, document-level split. Run after near-duplicate removal, so
no document nor a near-duplicate of one lands on both sides.

Each clean file is read by one worker, which writes its two halves itself
(``<side>/documents-<name>.parquet``, rows ``doc_id, sentences``; committed by rename, an empty
half is not written): no document crosses a shuffle, and the output does not depend on which
worker ran what.
"""

from __future__ import annotations

from collections.abc import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import (
    matching_paths,
    parquet_rows,
    read_parquet,
    write_parquet_atomically,
)
from pipeline.jobs import scaffold
from pipeline.runtime.counters import STATS_TAG, CountingDoFn
from pipeline.runtime.local_runner import start as start_pipeline
from pipeline.runtime.progress import ProgressMonitor, ProgressReporter, progress_dir
from transforms.seeding import stable_hasher

SIDES = ("train", "eval")


MANIFEST_FORMAT = "bertprep.split/1"


class SplitReconciliationError(scaffold.ReconciliationError):
    """The workers' counts disagree with the split files."""


def is_eval(seed: int, doc_id: str, fraction: float) -> bool:
    """Whether the document is held out for evaluation: ``stable_hash64(seed, "eval", doc_id)``
    below ``fraction`` of 2**64 (its prefix hashed once, ``stable_hasher``)."""
    return stable_hasher(seed, "eval")(doc_id) < fraction * 2**64


def split_schema():
    import pyarrow as pa

    return pa.schema([("doc_id", pa.string()), ("sentences", pa.list_(pa.string()))])


class SplitFileFn(CountingDoFn):
    """A clean documents file → its train and eval halves, written beside each other; emits
    (side, path) of each half written (an empty half is not). Adds the file's documents to
    ``progress`` once both halves are written."""

    def __init__(
        self, output: str, seed: int, fraction: float, progress: ProgressReporter | None = None
    ) -> None:
        self._output = output
        self._seed = seed
        self._fraction = fraction
        self.progress = progress

    def process(self, path: str):
        import pyarrow as pa
        import pyarrow.compute as pc

        table = read_parquet(path, ["doc_id", "sentences"])
        ids = table.column("doc_id").to_pylist()
        mask = pa.array([is_eval(self._seed, d, self._fraction) for d in ids], type=pa.bool_())
        name = path.rsplit("/", 1)[-1]
        halves = (("train", table.filter(pc.invert(mask))), ("eval", table.filter(mask)))
        for side, part in halves:
            self.stats[side] += part.num_rows
            if part.num_rows:
                target = FileSystems.join(self._output, side, name)
                write_parquet_atomically(target, part.cast(split_schema()))
                yield (side, target)
        if self.progress is not None:
            self.progress.add(table.num_rows)


def prepare_split(clean_dir: str, output: str) -> list[str]:
    """Clears the job's earlier output; returns the clean documents files to split."""
    scaffold.prepare_output(output, [f"{side}/documents-*.parquet" for side in SIDES])
    return matching_paths(FileSystems.join(clean_dir, "documents-*.parquet"))


def add_split(
    p,
    files: list[str],
    output: str,
    seed: int,
    fraction: float,
    prefix: str = "",
    watch: str | None = None,
):
    """Adds the split to pipeline ``p``; returns the PCollection of (side, path) written. With
    ``watch`` (a progress directory) the workers report the documents they split there."""
    split = (
        p
        | f"{prefix}ListFiles" >> beam.Create(files, reshuffle=False)
        | f"{prefix}SpreadFiles" >> beam.Reshuffle()
        | f"{prefix}Split"
        >> beam.ParDo(
            SplitFileFn(output, seed, fraction, ProgressReporter(watch) if watch else None)
        ).with_outputs(STATS_TAG, main="written")
    )
    counts_path = FileSystems.join(output, scaffold.RESULT)
    split[STATS_TAG] | f"{prefix}SaveCounts" >> scaffold.SaveCounts(counts_path)
    return split.written


def finish_split(output: str, seed: int, fraction: float, elapsed: float) -> dict[str, int]:
    """Reconciles the workers' counts with the files and writes the manifest; returns documents
    per side."""
    counts = scaffold.take_counts(FileSystems.join(output, scaffold.RESULT))
    written = {
        side: {
            path.rsplit("/", 1)[-1]: parquet_rows(path)
            for path in matching_paths(FileSystems.join(output, side, "documents-*.parquet"))
        }
        for side in SIDES
    }
    for side in SIDES:
        scaffold.reconcile(
            f"{side} documents",
            counts.get(side, 0),
            sum(written[side].values()),
            SplitReconciliationError,
        )
    documents = {side: counts.get(side, 0) for side in SIDES}
    scaffold.write_manifest(
        output,
        MANIFEST_FORMAT,
        {"seed": seed, "fraction": fraction, "documents": documents, "files": written},
        elapsed,
    )
    return documents


def run_split_job(
    clean_dir: str,
    output: str,
    seed: int,
    fraction: float,
    options,
    progress: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Writes ``output/{train,eval}/documents-*.parquet`` and ``output/manifest.json`` (rows per
    file, reconciled against the workers' counts); returns documents per side. While it runs, a
    ``split: N of M documents`` progress line (on a terminal; otherwise ``progress`` receives it
    periodically, stderr when ``None``)."""
    import time

    files = prepare_split(clean_dir, output)
    watch = progress_dir(output)
    total = sum(parquet_rows(path) for path in files)
    started = time.monotonic()
    p = beam.Pipeline(options=options)
    add_split(p, files, output, seed, fraction, watch=watch)
    with ProgressMonitor(watch, "split", total, "documents", progress) as monitor:
        result = start_pipeline(p)
        monitor.follow(result)
        result.wait_until_finish()
    return finish_split(output, seed, fraction, time.monotonic() - started)
