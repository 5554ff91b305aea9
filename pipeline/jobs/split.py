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
from transforms.seeding import stable_hash64

SIDES = ("train", "eval")


MANIFEST_FORMAT = "bertprep.split/1"


class SplitReconciliationError(scaffold.ReconciliationError):
    """The workers' counts disagree with the split files."""


def is_eval(seed: int, doc_id: str, fraction: float) -> bool:
    """Whether the document is held out for evaluation."""
    return stable_hash64(seed, "eval", doc_id) < fraction * 2**64


def split_schema():
    import pyarrow as pa

    return pa.schema([("doc_id", pa.string()), ("sentences", pa.list_(pa.string()))])


class SplitFileFn(CountingDoFn):
    """A clean documents file → its train and eval halves, written beside each other; emits
    (side, path) of each half written (an empty half is not)."""

    def __init__(self, output: str, seed: int, fraction: float) -> None:
        self._output = output
        self._seed = seed
        self._fraction = fraction

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


def prepare_split(clean_dir: str, output: str) -> list[str]:
    """Clears the job's earlier output; returns the clean documents files to split."""
    scaffold.prepare_output(output, [f"{side}/documents-*.parquet" for side in SIDES])
    return matching_paths(FileSystems.join(clean_dir, "documents-*.parquet"))


def add_split(p, files: list[str], output: str, seed: int, fraction: float, prefix: str = ""):
    """Adds the split to pipeline ``p``; returns the PCollection of (side, path) written."""
    split = (
        p
        | f"{prefix}ListFiles" >> beam.Create(files, reshuffle=False)
        | f"{prefix}SpreadFiles" >> beam.Reshuffle()
        | f"{prefix}Split"
        >> beam.ParDo(SplitFileFn(output, seed, fraction)).with_outputs(STATS_TAG, main="written")
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
    clean_dir: str, output: str, seed: int, fraction: float, options
) -> dict[str, int]:
    """Writes ``output/{train,eval}/documents-*.parquet`` and ``output/manifest.json`` (rows per
    file, reconciled against the workers' counts); returns documents per side."""
    import time

    files = prepare_split(clean_dir, output)
    started = time.monotonic()
    with beam.Pipeline(options=options) as p:
        add_split(p, files, output, seed, fraction)
    return finish_split(output, seed, fraction, time.monotonic() - started)
