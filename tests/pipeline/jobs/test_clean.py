"""The cleaning job end to end on a real Beam runner: every real dump and book, crafted bad input,
dedup, JSONL/Parquet sources, and Punkt trained on the corpus when no model is installed."""

from __future__ import annotations

import bz2
import glob
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from benchmarks.markup_debris import markup_debris
from pipeline.jobs.clean import CleanConfigError, CleanJobConfig, run_clean_job
from pipeline.runtime.beam_options import make_pipeline_options
from tests.conftest import require_corpora


def clean(tmp_path: Path, name: str = "out", **settings) -> tuple[dict, Path]:
    out = tmp_path / name
    config = CleanJobConfig(output=str(out), **settings)
    options = make_pipeline_options(["--direct_running_mode=in_memory"])
    return run_clean_job(config, options, progress=lambda m: None), out


def rows(out: Path) -> list[dict]:
    return pq.read_table(sorted(glob.glob(str(out / "documents-*.parquet")))).to_pylist()


def rejects(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "rejects.jsonl").read_text().splitlines()]


@pytest.fixture
def punkt_model(monkeypatch):
    monkeypatch.setenv("NLTK_DATA", str(require_corpora("nltk_data")))


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    wiki, books, nltk_data = (require_corpora(x) for x in ("wiki", "books", "nltk_data"))
    mp = pytest.MonkeyPatch()
    mp.setenv("NLTK_DATA", str(nltk_data))
    try:
        manifest, out = clean(
            tmp_path_factory.mktemp("real"),
            wikipedia=[str(wiki / "*")],
            books=[str(books / "*.txt")],
        )
    finally:
        mp.undo()
    return manifest, out


@pytest.mark.slow
def test_real_corpora_counts_by_source_and_reason(real_run):
    manifest, out = real_run
    wiki, books = manifest["counts"]["wikipedia"], manifest["counts"]["books"]
    assert wiki["input_files"] == 5 and books["input_files"] == 14
    # Per file (tests/transforms/test_mediawiki_xml.py): enwiki 98 kept / 99 redirects / 1 other
    # namespace / 8 disambiguation; ltgwiki 903 / 147 / 954 / 0; no-siteinfo 5; schema 0.9 2 / 1;
    # pear 1. Here the sums, and each drop is in rejects.jsonl.
    assert wiki["pages_kept"] == 1009
    assert wiki["dropped_redirect"] == 247
    assert wiki["dropped_namespace"] == 955
    assert wiki["dropped_disambiguation"] == 8
    dead = [r for r in rejects(out) if r["source"] == "wikipedia"]
    assert sum(r["reason"] == "dropped_redirect" for r in dead) == 247
    assert books["books"] == 14 and books["documents_out"] == 14
    assert books["boilerplate_stripped_markers"] == 14
    assert manifest["sentence_splitter"].startswith("pretrained punkt_tab")
    assert manifest["totals"]["documents"] == len(rows(out))


@pytest.mark.slow
def test_real_corpora_output_is_clean(real_run):
    _, out = real_run
    documents = rows(out)
    books = [d for d in documents if d["source"] == "books"]
    text = "\n".join(s for d in books for s in d["sentences"])
    for phrase in ("Project Gutenberg", "START OF", "END OF THE PROJECT", "SMALL PRINT", "\r"):
        assert phrase not in text
    sentences = [s for d in documents if d["source"] == "wikipedia" for s in d["sentences"]]
    debris = sum(1 for s in sentences if markup_debris(s))
    assert len(sentences) > 10_000
    assert debris / len(sentences) < 0.01
    assert len({d["doc_id"] for d in documents}) == len(documents)
    pear = [d for d in documents if d["title"] == "Pear"]
    assert pear and pear[0]["doc_id"] == "wikipedia/article-pear-0.10.xml/24278"


@pytest.mark.slow
def test_text_export_is_bert_format(real_run):
    manifest, out = real_run
    parts = sorted((out / "text").glob("part-*.txt"))
    documents = [d for p in parts for d in p.read_text().split("\n\n") if d.strip()]
    assert len(documents) == manifest["totals"]["documents"]
    assert sum(len(d.strip().split("\n")) for d in documents) == manifest["totals"]["sentences"]


@pytest.mark.parametrize("dedup", ["exact", "none"])  # staged, and finished as read
def test_bad_inputs_are_counted_and_recorded(tmp_path, punkt_model, dedup):
    books = tmp_path / "books"
    books.mkdir()
    prose = " ".join(f"Sentence number {i} tells a small part of a long story." for i in range(30))
    (books / "good.txt").write_text(prose + "\n")
    (books / "empty.txt").write_bytes(b"")
    (books / "binary.txt").write_bytes(bytes(range(256)) * 40)
    wiki = tmp_path / "wiki"
    wiki.mkdir()
    page = (
        "<page><title>{t}</title><ns>0</ns><id>{i}</id><revision><id>1</id>"
        "<text>{x}</text></revision></page>"
    )
    body = "".join(
        page.format(t=f"Page {i}", i=i, x=f"'''Page {i}''' is a page. " + prose)
        for i in range(1, 4)
    )
    dump = f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{body}</mediawiki>'
    (wiki / "truncated.xml.bz2").write_bytes(bz2.compress(dump.encode())[:-60])
    (wiki / "malformed.xml").write_text(dump.replace("</title>", "</titel>", 1))
    no_text = page.format(t="Empty", i=9, x="").replace("<text></text>", "<text/>")
    (wiki / "notext.xml").write_text(
        f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{no_text}</mediawiki>'
    )
    manifest, out = clean(
        tmp_path, wikipedia=[str(wiki / "*")], books=[str(books / "*")], dedup=dedup
    )
    found = {(r["source"], r["reason"]) for r in rejects(out)}
    assert ("books", "empty_file") in found
    assert ("books", "binary_file") in found
    assert ("wikipedia", "truncated_dump") in found
    counts = manifest["counts"]
    assert counts["wikipedia"]["truncated_dump"] == 2  # the cut bz2 and the malformed XML
    assert counts["wikipedia"]["dropped_empty"] == 1  # the page with no text
    assert ("wikipedia", "dropped_empty") in found
    assert counts["books"]["documents_out"] == 1


def test_exact_and_near_duplicates(tmp_path, punkt_model):
    books = tmp_path / "books"
    books.mkdir()
    story = [
        f"The keeper wrote entry {i} about the lamp, the fog and the ships." for i in range(60)
    ]
    (books / "a.txt").write_text(" ".join(story) + "\n")
    (books / "b.txt").write_text(" ".join(story) + "\n")  # exact copy
    edited = list(story)
    edited[5] = "A different sentence replaced one entry of the keeper's log."
    (books / "c.txt").write_text(" ".join(edited) + "\n")  # another edition
    manifest, out = clean(tmp_path, "exact", books=[str(books / "*.txt")], dedup="exact")
    assert manifest["counts"]["books"]["dropped_duplicate_exact"] == 1
    assert sorted(d["doc_id"] for d in rows(out)) == ["books/a.txt", "books/c.txt"]
    manifest, out = clean(tmp_path, "near", books=[str(books / "*.txt")], dedup="near")
    assert manifest["counts"]["books"]["dropped_duplicate_near"] == 1
    assert [d["doc_id"] for d in rows(out)] == ["books/a.txt"]


def test_no_dedup_with_a_pretrained_splitter_is_one_stage_writing_the_same_files(
    tmp_path, punkt_model
):
    """Nothing to drop and nothing to train: the job finishes documents where it reads them (no
    staged chunks, no second stage), and writes what the staged path writes; on a corpus with no
    duplicates that is exact dedup's output, byte for byte."""
    import apache_beam as beam

    from pipeline.files.input_files import expand_inputs
    from pipeline.files.punkt_files import load_punkt_tables
    from pipeline.jobs.clean import build_pipeline

    books = tmp_path / "books"
    books.mkdir()
    for b in range(3):
        story = [
            f"Book {b} tells in entry {i} of Mr. Keeper, the lamp and the fog." for i in range(40)
        ]
        (books / f"{b}.txt").write_text(" ".join(story) + "\n\nA second paragraph ends it.\n")
    (books / "empty.txt").write_text("")
    inputs = {"books": [str(books / "*.txt")], "export_text": True}
    none, none_out = clean(tmp_path, "none", dedup="none", **inputs)
    exact, exact_out = clean(tmp_path, "exact", dedup="exact", **inputs)

    def files(root: Path) -> dict[str, bytes]:
        return {
            str(p.relative_to(root)): p.read_bytes()
            for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "manifest.json"
        }

    assert files(none_out) == files(exact_out)
    assert len([n for n in files(none_out) if n.startswith("documents-")]) == 3
    assert none["counts"] == exact["counts"] and none["totals"] == exact["totals"]
    assert none["counts"]["books"]["empty_file"] == 1

    class Stages(beam.pipeline.PipelineVisitor):
        def __init__(self) -> None:
            self.names: set[str] = set()

        def visit_transform(self, node) -> None:
            self.names.add(node.full_label.split("/")[0])

    def stages(dedup: str, pretrained) -> set[str]:
        p = beam.Pipeline()
        config = CleanJobConfig(output=str(tmp_path / "x"), books=inputs["books"], dedup=dedup)
        build_pipeline(p, config, {"books": expand_inputs(inputs["books"])}, pretrained)
        visitor = Stages()
        p.visit(visitor)
        return visitor.names

    tables = load_punkt_tables()
    assert "Sentences" not in stages("none", tables)
    assert "Sentences" in stages("exact", tables)
    assert "Sentences" in stages("none", None)  # the splitter trained on the corpus first


def test_jsonl_and_parquet_sources(tmp_path, punkt_model):
    text = " ".join(f"Line {i} of a record holds a plain sentence of prose." for i in range(12))
    (tmp_path / "a.jsonl").write_text(
        json.dumps({"text": text, "title": "First"})
        + "\n{not json\n"
        + json.dumps({"body": "no text field"})
        + "\n"
    )
    pq.write_table(
        pa.table({"text": [text + " More.", None], "title": ["P", "Q"]}), tmp_path / "b.parquet"
    )
    manifest, out = clean(
        tmp_path, jsonl=[str(tmp_path / "a.jsonl")], parquet=[str(tmp_path / "b.parquet")]
    )
    ids = sorted(d["doc_id"] for d in rows(out))
    assert ids == ["jsonl/a.jsonl/1", "parquet/b.parquet/0"]
    reasons = sorted(r["reason"] for r in rejects(out))
    assert reasons == ["invalid_json_line", "missing_text_field", "missing_text_field"]


@pytest.mark.parametrize("dedup", ["near", "none"])  # staged, and finished as read
def test_jsonl_with_lone_surrogates_huge_words_and_no_words(tmp_path, punkt_model, dedup):
    """A JSON ``\\ud800`` escape (a lone surrogate, which no UTF-8 holds) is removed as a
    control character is, not a crash of the job; a 1 MB word passes near-dedup, and two
    different texts of no words are not near duplicates of each other."""
    text = " ".join(f"Line {i} of a record holds a plain sentence of prose." for i in range(12))
    lines = [
        '{"text": "Lone \\ud800 surrogate \\udfff here. ' + text + '", "title": "T\\udc80"}',
        json.dumps({"text": "x" * 1_000_000 + " " + text.replace("record", "book") + " Huge."}),
        json.dumps({"text": "!!! ??? ... " * 40}),
        json.dumps({"text": "*** --- +++ " * 40}),  # no words either: not a near duplicate
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    manifest, out = clean(tmp_path, jsonl=[str(tmp_path / "a.jsonl")], dedup=dedup, min_words=5)
    kept = {d["doc_id"]: d for d in rows(out)}
    assert sorted(kept) == [f"jsonl/a.jsonl/{n}" for n in (1, 2, 3, 4)]
    assert manifest["counts"]["jsonl"].get("dropped_duplicate_near", 0) == 0
    first = json.dumps(kept["jsonl/a.jsonl/1"])
    assert "Lone surrogate here." in first and "\\ud" not in first


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_jsonl_is_read_line_by_line(tmp_path, punkt_model, suffix):
    import bz2
    import gzip
    import lzma

    compress = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix]
    text = " ".join(f"Line {i} of a record holds a plain sentence of prose." for i in range(12))
    lines = [json.dumps({"text": f"{text} Record {n}."}) for n in range(3)]
    path = tmp_path / f"a.jsonl{suffix}"
    path.write_bytes(compress(("\n".join(lines) + "\n").encode()))
    manifest, out = clean(tmp_path, jsonl=[str(path)])
    assert sorted(d["doc_id"] for d in rows(out)) == [
        f"jsonl/a.jsonl{suffix}/{n}" for n in (1, 2, 3)
    ]


def test_punkt_is_trained_on_the_corpus_without_a_model(tmp_path, monkeypatch):
    import nltk

    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "no-nltk-data"))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path / "nowhere")])
    books = require_corpora("books")
    (tmp_path / "in").mkdir()
    for name in ("1342-0.txt", "pg42.txt"):
        shutil.copy(books / name, tmp_path / "in" / name)
    manifest, out = clean(tmp_path, books=[str(tmp_path / "in" / "*.txt")])
    assert manifest["sentence_splitter"].startswith("trained on the corpus")
    assert sorted(p.name for p in (out / "punkt").iterdir()) == [
        "abbrev_types.txt",
        "collocations.tab",
        "ortho_context.tab",
        "sent_starters.txt",
    ]
    sentences = [s for d in rows(out) for s in d["sentences"]]
    assert len(sentences) > 3000
    # Punkt learned the abbreviation; its orthographic heuristic still ends a few sentences at
    # "Mr." before a capitalized name (0.4% here), as the unsupervised model does.
    assert "mr" in (out / "punkt" / "abbrev_types.txt").read_text().split()
    assert sum(s.endswith(" Mr.") for s in sentences) / len(sentences) < 0.01


def test_no_input_and_nothing_left_are_clear_errors(tmp_path, punkt_model):
    with pytest.raises(CleanConfigError, match="no input"):
        clean(tmp_path)
    (tmp_path / "tiny.txt").write_text("Too short.\n")
    with pytest.raises(CleanConfigError, match="no document survived"):
        clean(tmp_path, books=[str(tmp_path / "tiny.txt")])


def test_counts_are_reconciled_with_the_files_and_a_failed_rerun_leaves_no_old_manifest(
    tmp_path, punkt_model
):
    """The manifest's documents and sentences are what the workers counted and what the files
    hold (the job checks both, ``pipeline.jobs.scaffold.reconcile``); a rerun first clears the
    earlier run's files, so one that fails leaves no manifest vouching for them."""
    book = tmp_path / "book.txt"
    book.write_text(
        "\n\n".join(
            " ".join(f"Paragraph {p} sentence {i} is plain prose for the test." for i in range(6))
            for p in range(5)
        )
        + "\n"
    )
    manifest, out = clean(tmp_path, books=[str(book)], export_text=False)
    table = pq.read_table(sorted(glob.glob(str(out / "documents-*.parquet"))))
    sentences = sum(len(s) for s in table.column("sentences").to_pylist())
    assert manifest["totals"]["documents"] == table.num_rows == 1
    assert manifest["totals"]["sentences"] == sentences == 30
    assert sum(manifest["outputs"]["parquet"].values()) == table.num_rows
    assert isinstance(manifest["elapsed_seconds"], float)
    assert json.loads((out / "manifest.json").read_text())["totals"] == manifest["totals"]
    with pytest.raises(CleanConfigError, match="no document survived"):
        clean(tmp_path, books=[str(book)], min_words=10_000)
    assert not (out / "manifest.json").exists()
    assert not glob.glob(str(out / "documents-*.parquet"))


@pytest.mark.parametrize("statistics", [True, False])
def test_sentences_are_counted_from_the_footer_or_the_column(tmp_path, monkeypatch, statistics):
    """A documents file's rows and sentences, from its footer's statistics (empty lists are
    nulls there, not sentences) without reading the column, or, without statistics, from the
    column itself: the same."""
    from pipeline.jobs import clean as clean_job
    from pipeline.jobs.clean import _documents_and_sentences

    if statistics:  # the footer must be enough

        def unread(*args, **kwargs):
            raise AssertionError("the column was read")

        monkeypatch.setattr(clean_job, "read_parquet", unread)

    sentences = [["One.", "Two."], [], ["Three."], ["Four.", "Five.", "Six."]] * 500
    table = pa.table(
        {
            "doc_id": [f"d{i}" for i in range(len(sentences))],
            "sentences": pa.array(sentences, pa.list_(pa.string())),
        }
    )
    path = tmp_path / "documents-00000-0000.parquet"
    pq.write_table(table, path, row_group_size=300, write_statistics=statistics)
    assert pq.ParquetFile(path).metadata.num_row_groups > 1
    assert _documents_and_sentences(str(path)) == (2000, 3000)


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    """The embedded sample (Wikipedia pages and books) cleaned with near dedup."""
    from tests.conftest import SAMPLE

    return clean(
        tmp_path_factory.mktemp("sample"),
        wikipedia=[str(SAMPLE / "wiki" / "*.xml")],
        books=[str(SAMPLE / "books" / "*.txt")],
        dedup="near",
        export_text=False,
    )


def test_a_real_run_reconciles_its_rejects_by_source_and_reason(sample_run):
    from pipeline.jobs.clean import reconcile_rejects

    manifest, out = sample_run
    records = rejects(out)
    assert manifest["rejects"] == len(records) > 0
    by_reason = reconcile_rejects(str(out / "rejects.jsonl"), manifest["counts"])
    assert sum(by_reason.values()) == len(records)
    for key, lines in by_reason.items():
        source, reason = key.split(".", 1)
        assert manifest["counts"][source][reason] == lines, key


def test_rejects_that_disagree_with_the_counts_fail_loudly(sample_run, tmp_path):
    from pipeline.jobs.clean import CleanReconciliationError, reconcile_rejects

    manifest, out = sample_run
    lines = (out / "rejects.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    counts = manifest["counts"]
    path = tmp_path / "rejects.jsonl"
    # A line missing: the reason of that line is named, with both figures.
    lost = json.loads(lines[0])
    counted = counts[lost["source"]][lost["reason"]]
    path.write_text("".join(lines[1:]), encoding="utf-8")
    message = (
        f"{lost['source']} rejects {lost['reason']} \\(rejects.jsonl\\): the workers counted "
        f"{counted:,}, the output files hold {counted - 1:,}"
    )
    with pytest.raises(CleanReconciliationError, match=message):
        reconcile_rejects(str(path), counts)
    # Every line of a reason missing (its lines are the reason's whole part file).
    only = [x for x in lines if json.loads(x)["reason"] != lost["reason"]]
    path.write_text("".join(only), encoding="utf-8")
    with pytest.raises(CleanReconciliationError, match=lost["reason"]):
        reconcile_rejects(str(path), counts)
    # A line no worker counted: one of a reason nobody counts, and one too many.
    for extra in (
        json.dumps({"excerpt": "", "location": "x", "reason": "new_reason", "source": "books"}),
        lines[0].rstrip("\n"),
    ):
        path.write_text("".join(lines) + extra + "\n", encoding="utf-8")
        with pytest.raises(CleanReconciliationError, match="the workers counted"):
            reconcile_rejects(str(path), counts)
    path.write_text("".join(lines) + "not json\n", encoding="utf-8")
    with pytest.raises(CleanReconciliationError, match=f"line {len(lines) + 1} is not a reject"):
        reconcile_rejects(str(path), counts)
    path.write_text("".join(lines), encoding="utf-8")
    assert sum(reconcile_rejects(str(path), counts).values()) == len(lines)
