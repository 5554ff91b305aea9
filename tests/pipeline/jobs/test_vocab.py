"""The vocabulary job: Google's layout and size, determinism, both transformers BERT tokenizers
and the instance stage agree on its ids, the report, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.jobs.vocab import VocabJobConfig, VocabJobError, run_vocab_job
from pipeline.runtime.beam_options import make_pipeline_options
from tests.conftest import require_corpora
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer


def sample_parquet(directory: Path, corpus_files: list[Path]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rows = []
    for f in corpus_files:
        for i, doc in enumerate(f.read_text(encoding="utf-8").split("\n\n")):
            rows.append({"doc_id": f"{f.name}/{i}", "sentences": doc.strip().split("\n")})
    pq.write_table(pa.Table.from_pylist(rows), directory / "documents-00000-of-00001.parquet")
    return directory


def train(tmp_path: Path, source: Path, name: str = "vocab", **settings) -> tuple[dict, Path]:
    out = tmp_path / name
    config = VocabJobConfig(input=str(source), output=str(out), **settings)
    manifest = run_vocab_job(
        config, make_pipeline_options(["--direct_running_mode=in_memory"]), lambda m: None
    )
    return manifest, out


@pytest.fixture(scope="module")
def trained(tmp_path_factory, sample_corpus_files):
    tmp = tmp_path_factory.mktemp("vocab")
    source = sample_parquet(tmp / "clean", sample_corpus_files)
    manifest, out = train(tmp, source, vocab_size=2000, heldout_per_mille=150)
    return manifest, out, source, tmp


def test_google_layout_and_exact_size(trained):
    _, out, _, _ = trained
    tokens = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert len(tokens) == 2000
    assert tokens[0] == "[PAD]" and tokens[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert tokens[1] == "[unused0]" and tokens[99] == "[unused98]"
    assert len(set(tokens)) == 2000
    assert (out / "tokenizer.json").exists() and (out / "manifest.json").exists()


def test_same_input_and_seed_give_identical_bytes(trained):
    _, out, source, tmp = trained
    _, again = train(tmp, source, "again", vocab_size=2000, heldout_per_mille=150)
    assert (again / "vocab.txt").read_bytes() == (out / "vocab.txt").read_bytes()


def test_both_transformers_tokenizers_and_the_instance_stage_agree(trained, sample_corpus_files):
    from transformers import BertTokenizer
    from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy

    _, out, _, _ = trained
    vocab_path = str(out / "vocab.txt")
    ours = BertWordPieceTokenizer(Vocab.from_file(vocab_path), do_lower_case=True)
    fast = BertTokenizer(vocab_path, do_lower_case=True)
    legacy = BertTokenizerLegacy(vocab_path, do_lower_case=True, strip_accents=None)
    lines = sample_corpus_files[0].read_text(encoding="utf-8").splitlines()[:300]
    for line in filter(None, lines):
        expected = ours.encode(line)
        assert fast(line, add_special_tokens=False)["input_ids"] == expected
        assert legacy.convert_tokens_to_ids(legacy.tokenize(line)) == expected


def test_report_figures(trained):
    manifest, out, _, _ = trained
    report = manifest["report"]["heldout"]
    assert report["sentences"] > 50
    assert report["unk_rate"] < 0.01 and 1.0 <= report["fertility"] < 2.0
    assert report["alphabet_coverage"] > 0.999
    assert manifest["samples"]["heldout_sentences"] == report["sentences"]


def test_compare_vocab_and_overlap(trained, tmp_path):
    _, out, source, _ = trained
    manifest, _ = train(
        tmp_path,
        source,
        vocab_size=1500,
        heldout_per_mille=150,
        compare_vocab=str(out / "vocab.txt"),
    )
    compare = manifest["report"]["compare"]
    assert compare["overlap"]["shared"] > 1000
    assert compare["heldout"]["fertility"] <= manifest["report"]["heldout"]["fertility"]


def test_empty_corpus_and_impossible_sizes_are_clear_errors(tmp_path, trained):
    empty = tmp_path / "empty"
    empty.mkdir()
    pq.write_table(
        pa.table(
            {"doc_id": pa.array([], pa.string()), "sentences": pa.array([], pa.list_(pa.string()))}
        ),
        empty / "documents-00000-of-00001.parquet",
    )
    with pytest.raises(VocabJobError, match="no sentences"):
        train(tmp_path, empty, vocab_size=1000)
    _, _, source, _ = trained
    with pytest.raises(VocabJobError, match="too small"):
        train(tmp_path, source, "small", vocab_size=20)
    with pytest.raises(VocabJobError, match="learned only"):
        train(tmp_path, source, "big", vocab_size=60000)
    with pytest.raises(VocabJobError, match="alphabet"):
        train(tmp_path, source, "alpha", vocab_size=60, limit_alphabet=1000)


@pytest.mark.slow
def test_books_vocab_is_at_least_as_compact_as_googles(tmp_path, corpora):
    from benchmarks.books_corpus import build_corpus

    files = build_corpus(tmp_path / "books", 3_000_000)
    source = sample_parquet(tmp_path / "clean", files)
    manifest, _ = train(
        tmp_path,
        source,
        vocab_size=8000,
        heldout_per_mille=100,
        compare_vocab=str(require_corpora("vocab", "bert-base-uncased-vocab.txt")),
    )
    ours, google = manifest["report"]["heldout"], manifest["report"]["compare"]["heldout"]
    assert ours["fertility"] <= google["fertility"] * 1.05
    assert ours["unk_rate"] <= google["unk_rate"] + 0.001


def test_an_empty_vocab_check_sample_is_not_called_held_out(tmp_path, sample_corpus_files):
    """The vocab report's sample is its own, not the train/eval split: say so."""
    source = sample_parquet(tmp_path / "clean", sample_corpus_files[:1])
    messages: list[str] = []
    config = VocabJobConfig(
        input=str(source), output=str(tmp_path / "v"), vocab_size=500, heldout_per_mille=0
    )
    run_vocab_job(
        config, make_pipeline_options(["--direct_running_mode=in_memory"]), messages.append
    )
    text = "\n".join(messages)
    assert "held-out" not in text and "held out" not in text
    assert "the vocab report has no [UNK] rate or fertility: its own 0% sample" in text
    assert "not the eval split" in text


def test_the_vocab_stage_reports_every_document_it_reads(tmp_path, sample_corpus_files, monitors):
    """Like clean, tokenize and instances, the sampling pass shows ``vocab: N of M documents``."""

    seen = monitors
    source = sample_parquet(tmp_path / "clean", sample_corpus_files)
    documents = pq.read_metadata(source / "documents-00000-of-00001.parquet").num_rows
    manifest, out = train(tmp_path, source, vocab_size=500, exclude_eval_fraction=0.3)
    (monitor,) = seen
    assert (monitor.label, monitor.unit, monitor.total) == ("vocab", "documents", documents)
    # Documents the split holds out are read (and counted) too, only not sampled.
    assert monitor.observed and monitor.observed[-1] == documents
    assert manifest["samples"]["train_sentences"] > 0
    assert not (out / ".progress").exists()  # cleaned up
