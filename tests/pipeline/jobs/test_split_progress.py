"""The split stage shows a progress line (documents split of the documents in the clean files),
as clean, tokenize and instances do; run inside the fused split+tokenize pipeline, the split's
workers report nothing of their own (that pipeline's one line is tokenize's)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.jobs.split import run_split_job
from pipeline.jobs.tokenize import run_split_and_tokenize_jobs
from pipeline.runtime.beam_options import make_pipeline_options

VOCAB = Path(__file__).resolve().parents[3] / "sample" / "vocab.txt"


def clean_files(directory: Path, per_file: list[int]) -> int:
    """Writes one clean ``documents-*.parquet`` per entry of ``per_file`` (that many documents
    each); returns the number of documents."""
    directory.mkdir(parents=True)
    for i, n in enumerate(per_file):
        rows = [
            {
                "doc_id": f"f{i}/{j}",
                "sentences": [f"the sentence {j} of file {i}.", "and one more."],
            }
            for j in range(n)
        ]
        table = pa.Table.from_pylist(
            rows, pa.schema([("doc_id", pa.string()), ("sentences", pa.list_(pa.string()))])
        )
        pq.write_table(table, directory / f"documents-{i:05d}-of-{len(per_file):05d}.parquet")
    return sum(per_file)


def test_the_split_stage_reports_every_document_it_splits(tmp_path, monitors):
    total = clean_files(tmp_path / "clean", [40, 25, 60])
    options = make_pipeline_options(
        ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    )
    lines: list[str] = []
    documents = run_split_job(
        str(tmp_path / "clean"), str(tmp_path / "split"), 7, 0.2, options, lines.append
    )
    assert sum(documents.values()) == total
    (monitor,) = monitors
    assert (monitor.label, monitor.unit, monitor.total) == ("split", "documents", total)
    assert monitor.observed and monitor.observed[-1] == total
    assert all(line.startswith("split: ") for line in lines)
    assert not (tmp_path / "split" / ".progress").exists()  # cleaned up


def test_the_fused_split_and_tokenize_pipeline_leaves_no_split_progress_files(tmp_path, monitors):
    total = clean_files(tmp_path / "clean", [30, 30])
    options = make_pipeline_options(["--direct_running_mode=in_memory"])
    documents, _ = run_split_and_tokenize_jobs(
        str(tmp_path / "clean"),
        str(tmp_path / "split"),
        7,
        0.2,
        str(tmp_path / "tokens"),
        str(VOCAB),
        True,
        options,
        total,
    )
    assert sum(documents.values()) == total
    assert [m.label for m in monitors] == ["tokenize"]
    assert monitors[0].observed[-1] == total
    assert not list(tmp_path.rglob(".progress"))
