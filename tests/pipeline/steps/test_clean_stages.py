"""The cleaning job's side-effect files under a runner's retries, and its output's independence
from where the corpus lies and how the runner ran it."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline.files.artifacts import RejectsPart, merge_reject_parts
from pipeline.files.source_readers import SourceReader, WorkUnit
from pipeline.steps.clean_stages import (
    BANDS_TAG,
    EXACT_TAG,
    FinishChunkFn,
    FinishSettings,
    StagedChunk,
    StageDocumentsFn,
    chunk_path,
)

SENTENCE = "Record {i} of the lighthouse log tells of fog, ships and the keeper's lamp."


def write_jsonl(path: Path, documents: int, offset: int = 0) -> None:
    lines = []
    for d in range(documents):
        text = " ".join(SENTENCE.format(i=offset + d * 100 + i) for i in range(8))
        lines.append(json.dumps({"title": f"doc {d}", "text": text}))
    lines.append("{broken json")
    path.write_text("\n".join(lines) + "\n")


def run_fn(fn, element):
    """One bundle of ``fn`` on ``element``: (main outputs, tagged outputs by tag)."""
    from apache_beam.pvalue import TaggedOutput

    fn.setup()
    fn.start_bundle()
    main, tagged = [], {}
    for out in list(fn.process(*element) or []) + list(fn.finish_bundle() or []):
        if isinstance(out, TaggedOutput):
            value = getattr(out.value, "value", out.value)  # finish_bundle's WindowedValue
            tagged.setdefault(out.tag, []).append(value)
        else:
            main.append(out)
    return main, tagged


def stage_fn(staging: Path, chunk_documents: int = 3) -> StageDocumentsFn:
    reader = SourceReader("text", "title", False)
    return StageDocumentsFn(reader, str(staging), 5, "near", 12345, chunk_documents, 1 << 20)


def test_a_retried_read_rewrites_the_same_files_under_the_same_names(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", 7)
    unit = WorkUnit(str(tmp_path / "a.jsonl"), "a.jsonl")
    staging = tmp_path / "staging"
    first = run_fn(stage_fn(staging), ((4, "jsonl", unit),))
    files = {p.name: p.read_bytes() for p in sorted(staging.iterdir())}
    again = run_fn(stage_fn(staging), ((4, "jsonl", unit),))
    assert {p.name: p.read_bytes() for p in sorted(staging.iterdir())} == files
    assert first[0] == again[0] and first[1][EXACT_TAG] == again[1][EXACT_TAG]
    assert first[1][BANDS_TAG] == again[1][BANDS_TAG]
    assert first[1][BANDS_TAG][:2] == [(0, (4, 0, 3)), (1, (4, 0, 3))]  # names, not hashes
    # 7 documents in chunks of 3 → chunks 0, 1, 2 of unit 4; the broken line is a reject.
    assert [(c.unit, c.chunk, c.documents) for c in first[0]] == [(4, 0, 3), (4, 1, 3), (4, 2, 1)]
    assert sorted(files) == [
        "bands-00004-0000.u64",
        "bands-00004-0001.u64",
        "bands-00004-0002.u64",
        "chunk-00004-0000.parquet",
        "chunk-00004-0001.parquet",
        "chunk-00004-0002.parquet",
        "rejects-0-00004.jsonl",
    ]
    (stats,) = first[1]["stats"]
    assert stats["jsonl.documents"] == 7 and stats["jsonl.invalid_json_line"] == 1


def test_a_failed_attempt_leaves_nothing_a_reader_trusts(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", 5)
    unit = WorkUnit(str(tmp_path / "a.jsonl"), "a.jsonl")
    staging = tmp_path / "staging"

    class DyingReader(SourceReader):
        def read(self, kind, unit, counts, on_read=None):
            for i, item in enumerate(super().read(kind, unit, counts, on_read)):
                if i == 4:
                    raise RuntimeError("worker lost")  # not absorbed: the bundle fails
                yield item

    fn = StageDocumentsFn(
        DyingReader("text", "title", False), str(staging), 5, "none", None, 3, 1 << 20
    )
    with pytest.raises(RuntimeError, match="worker lost"):
        run_fn(fn, ((0, "jsonl", unit),))
    # Chunk 0 was committed (deterministic: the retry rewrites it); nothing else was, and the
    # half-written rejects part is never merged.
    names = sorted(p.name for p in staging.iterdir())
    assert [n for n in names if ".partial-" not in n] == ["chunk-00000-0000.parquet"]
    retry = run_fn(stage_fn(staging), ((0, "jsonl", unit),))
    assert sum(c.documents for c in retry[0]) == 5
    merged = merge_reject_parts(str(staging / "rejects-*.jsonl"), str(tmp_path / "rejects.jsonl"))
    assert merged == 1  # the broken line, once
    assert not list(staging.glob("rejects-*.jsonl"))


def trained_tables():
    """Punkt tables trained on a repeated sample sentence."""
    from transforms.sentences import PunktTables, train_punkt_parameters

    return PunktTables.from_parameters(train_punkt_parameters([SENTENCE.format(i=1)] * 50))


def test_finishing_a_chunk_twice_writes_identical_output(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "a.jsonl", 3)
    unit = WorkUnit(str(tmp_path / "a.jsonl"), "a.jsonl")
    staging, out = tmp_path / "staging", tmp_path / "out"
    chunks, _ = run_fn(stage_fn(staging), ((0, "jsonl", unit),))
    tables = trained_tables()
    element = (((0, 0), {"chunk": chunks[:1], "drops": [1]}), tables)
    written = []
    for _ in range(2):
        run_fn(FinishChunkFn(str(staging), str(out), 2000, True), element)
        written.append({p.name: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    assert written[0] == written[1]
    assert sorted(written[0]) == ["documents-00000-0000.parquet", "part-00000-0000.txt"]
    ids = pq.read_table(out / "documents-00000-0000.parquet").column("doc_id").to_pylist()
    assert ids == ["jsonl/a.jsonl/1", "jsonl/a.jsonl/3"]  # row 1 was dropped
    bad = (((0, 0), {"chunk": [StagedChunk(0, 0, 5)], "drops": []}), tables)
    with pytest.raises(RuntimeError, match="5 documents recorded"):
        run_fn(FinishChunkFn(str(staging), str(out), 2000, True), bad)
    assert chunk_path(str(staging), 0, 0).endswith("chunk-00000-0000.parquet")


def test_finishing_while_staging_writes_what_staging_then_finishing_writes(tmp_path):
    """With no dedup and a pretrained splitter the stage writes the final files itself: the same
    files, bytes and counts as staged chunks finished by FinishChunkFn, chunk for chunk."""
    write_jsonl(tmp_path / "a.jsonl", 7)
    unit = WorkUnit(str(tmp_path / "a.jsonl"), "a.jsonl")
    tables = trained_tables()
    reader = SourceReader("text", "title", False)
    staged_out, staging = tmp_path / "staged", tmp_path / "staging"
    staged = StageDocumentsFn(reader, str(staging), 5, "none", None, 3, 1 << 20)
    chunks, staged_tags = run_fn(staged, ((2, "jsonl", unit),))
    finished_stats: Counter[str] = Counter(staged_tags["stats"][0])
    for number, chunk in enumerate(chunks):  # tables as a side input, or given to the DoFn
        grouped = (chunk.key, {"chunk": [chunk], "drops": []})
        if number % 2:
            finish, element = (
                FinishChunkFn(str(staging), str(staged_out), 40, True, tables),
                (grouped,),
            )
        else:
            finish = FinishChunkFn(str(staging), str(staged_out), 40, True)
            element = (grouped, tables)
        _, tags = run_fn(finish, element)
        finished_stats.update(tags["stats"][0])

    direct_out, direct_staging = tmp_path / "direct", tmp_path / "direct-staging"
    settings = FinishSettings(str(direct_out), 40, True)
    direct = StageDocumentsFn(
        reader, str(direct_staging), 5, "none", None, 3, 1 << 20, None, settings, tables
    )
    main, tags = run_fn(direct, ((2, "jsonl", unit),))
    assert main == [] and set(tags) == {"stats"}

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
        }

    assert files(direct_out) == files(staged_out)
    assert sorted(files(direct_out)) == [
        *(f"documents-00002-000{c}.parquet" for c in range(3)),
        *(f"text/part-00002-000{c}.txt" for c in range(3)),
    ]
    assert Counter(tags["stats"][0]) == finished_stats
    assert finished_stats["jsonl.documents_out"] == 7
    assert finished_stats["jsonl.split_overlong_sentence"] > 0  # 40 characters at most
    # the rejects part is the stage's own, as before; no staged chunk or band file
    assert sorted(p.name for p in direct_staging.iterdir()) == ["rejects-0-00002.jsonl"]
    assert (direct_staging / "rejects-0-00002.jsonl").read_bytes() == (
        staging / "rejects-0-00002.jsonl"
    ).read_bytes()


@pytest.mark.parametrize(("dedup", "seed"), [("exact", None), ("near", None), ("none", 7)])
def test_finishing_while_staging_needs_no_dedup_and_a_pretrained_splitter(tmp_path, dedup, seed):
    reader = SourceReader("text", "title", False)
    settings = FinishSettings(str(tmp_path / "out"), 40, False)
    with pytest.raises(ValueError, match="dedup none and a pretrained"):
        StageDocumentsFn(reader, str(tmp_path), 5, dedup, seed, 3, 1 << 20, None, settings)


def test_rejects_part_commits_only_on_close(tmp_path):
    part = RejectsPart(str(tmp_path / "rejects-x.jsonl"))
    part.write({"reason": "r", "location": "l"})
    assert not (tmp_path / "rejects-x.jsonl").exists()
    part.close()
    assert (tmp_path / "rejects-x.jsonl").read_text().count("\n") == 1


def test_output_does_not_depend_on_where_the_corpus_lies(tmp_path, monkeypatch):
    from tests.conftest import require_corpora

    monkeypatch.setenv("NLTK_DATA", str(require_corpora("nltk_data")))
    here, there = tmp_path / "here" / "corpus", tmp_path / "elsewhere" / "deeper" / "corpus"
    here.mkdir(parents=True)
    for i in range(3):
        write_jsonl(here / f"part-{i}.jsonl", 4, offset=i * 1000)
    write_jsonl(here / "copy.jsonl", 2)  # exact duplicates of part-0's first two documents
    shutil.copytree(here, there)
    results = []
    for name, corpus, mode in (("a", here, "in_memory"), ("b", there, "multi_processing")):
        from pipeline.jobs.clean import CleanJobConfig, run_clean_job
        from pipeline.runtime.beam_options import make_pipeline_options

        out = tmp_path / f"out-{name}"
        config = CleanJobConfig(
            output=str(out), jsonl=[str(corpus / "*.jsonl")], dedup="near", chunk_documents=3
        )
        options = make_pipeline_options([f"--direct_running_mode={mode}", "--direct_num_workers=2"])
        manifest = run_clean_job(config, options, progress=lambda m: None)
        files = {p.name: pq.read_table(p).to_pylist() for p in sorted(out.glob("documents-*"))}
        results.append((files, manifest["counts"], (out / "rejects.jsonl").read_text()))
    assert results[0] == results[1]
    files, counts, _ = results[0]
    assert counts["jsonl"]["dropped_duplicate_exact"] == 2
    assert counts["jsonl"]["documents_out"] == 12 == sum(len(r) for r in files.values())
    ids = sorted(r["doc_id"] for rs in files.values() for r in rs)
    assert all("corpus" not in i and "here" not in i for i in ids)
    # Of equal content the smallest id is kept: copy.jsonl sorts before part-0.jsonl.
    assert Counter(i.split("/")[1] for i in ids) == {
        "copy.jsonl": 2,
        "part-0.jsonl": 2,
        "part-1.jsonl": 4,
        "part-2.jsonl": 4,
    }


@pytest.mark.parametrize(
    "dedup, seed, has_tables", [("none", None, False), ("near", None, True), ("none", 7, True)]
)
def test_finishing_while_staging_needs_no_dedup_and_pretrained_tables(
    tmp_path, dedup, seed, has_tables
):
    tables = trained_tables()
    settings = FinishSettings(str(tmp_path / "out"), 40, True)
    reader = SourceReader("text", "title", False)
    with pytest.raises(ValueError, match="pretrained sentence splitter"):
        StageDocumentsFn(
            reader, str(tmp_path), 5, dedup, seed, 3, 1 << 20, None, settings,
            tables if has_tables else None,
        )  # fmt: skip


def test_finishing_a_chunk_without_tables_is_a_clear_error(tmp_path):
    finish = FinishChunkFn(str(tmp_path / "staging"), str(tmp_path / "out"), 40, True)
    with pytest.raises(ValueError, match="needs Punkt tables"):
        list(finish.process(((0, 0), {"chunk": [], "drops": []})))
