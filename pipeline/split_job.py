"""The held-out split: clean documents → BERT text files for training and for evaluation.

A document goes to the evaluation side when ``stable_hash64(seed, "eval", doc_id) / 2**64`` falls
below the fraction: a deterministic, document-level split. Run after near-duplicate removal, so
no document nor a near-duplicate of one lands on both sides.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.artifacts import read_json, write_json
from pipeline.stats import MergeCounts
from transforms.seeding import stable_hash64

SIDES = ("train", "eval")


def is_eval(seed: int, doc_id: str, fraction: float) -> bool:
    """Whether the document is held out for evaluation."""
    return stable_hash64(seed, "eval", doc_id) < fraction * 2**64


def run_split_job(
    clean_dir: str, output: str, seed: int, fraction: float, num_shards: int, options
) -> dict[str, int]:
    """Writes ``output/{train,eval}/part-*.txt``; returns documents per side."""
    pattern = FileSystems.join(clean_dir, "documents-*.parquet")
    counts_path = FileSystems.join(output, ".counts.json")
    with beam.Pipeline(options=options) as p:
        rows = p | "Read" >> beam.io.ReadFromParquet(pattern, columns=["doc_id", "sentences"])
        sides = rows | "Split" >> beam.Partition(
            lambda r, _: int(is_eval(seed, r["doc_id"], fraction)), 2
        )
        for side, docs in zip(SIDES, sides, strict=True):
            (
                docs
                | f"{side}Text" >> beam.Map(lambda r: "\n".join(r["sentences"]) + "\n")
                | f"{side}Write"
                >> beam.io.WriteToText(
                    FileSystems.join(output, side, "part"),
                    file_name_suffix=".txt",
                    num_shards=max(1, num_shards),
                )
            )
        (
            rows
            | "Count" >> beam.Map(lambda r: {SIDES[int(is_eval(seed, r["doc_id"], fraction))]: 1})
            | "Sum" >> beam.CombineGlobally(MergeCounts())
            | "Save" >> beam.Map(lambda c: write_json(counts_path, c))
        )
    counts = read_json(counts_path)
    FileSystems.delete([counts_path])
    return {side: counts.get(side, 0) for side in SIDES}
