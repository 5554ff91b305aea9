"""BERT text files → token spills and RefTables: batches, damage, empty files and documents."""

from __future__ import annotations

import bz2
import gzip
from pathlib import Path

import pytest
from apache_beam.pvalue import TaggedOutput
from apache_beam.utils.windowed_value import WindowedValue

import pipeline.steps.bert_text_source as source
from pipeline.files.input_files import expand_inputs
from pipeline.steps.bert_text_source import TokenizeBertTextFn
from pipeline.steps.tokenize_documents import load_documents, worker_tokenizer
from tokenizer.vocab import Vocab


def _run(vocab: Vocab, paths: list[Path], spill: Path) -> tuple[list, list[dict], dict]:
    """One bundle over ``paths``: (RefTables, rejects, counts)."""
    fn = TokenizeBertTextFn(vocab, True, str(spill), 2000, 10000)
    fn.setup()
    fn.start_bundle()
    outputs = []
    for f in expand_inputs([str(p) for p in paths]):
        outputs += list(fn.process(f))
    outputs += list(fn.finish_bundle())
    tables = [_value(o) for o in outputs if not isinstance(o, TaggedOutput)]
    rejects = [
        _value(o.value) for o in outputs if isinstance(o, TaggedOutput) and o.tag == "rejects"
    ]
    (counts,) = [
        _value(o.value) for o in outputs if isinstance(o, TaggedOutput) and o.tag == "stats"
    ]
    assert isinstance(counts, dict)
    return tables, rejects, counts


def _before_and_after(vocab, files, tmp_path, monkeypatch, name: str, value: int):
    """``_run`` over ``files`` as shipped, then with the module's ``name`` set to ``value``."""
    before = _run(vocab, files, tmp_path / "before")
    monkeypatch.setattr(source, name, value)
    return before, _run(vocab, files, tmp_path / "after")


def _value(output):
    """An output's value (``finish_bundle`` emits WindowedValues)."""
    return output.value if isinstance(output, WindowedValue) else output


def _decoded(tables: list) -> dict[str, list[list[int]]]:
    refs = [ref for table in tables for ref in table.refs()]
    return {d.key: d.sentences() for d in load_documents(refs)}


@pytest.fixture
def vocab(sample_vocab_path) -> Vocab:
    return Vocab.from_file(str(sample_vocab_path))


def test_documents_cut_into_batches_decode_as_each_documents_own_encoding(
    vocab, sample_corpus_files, tmp_path, monkeypatch
):
    files = sample_corpus_files[:2]
    (whole, _, whole_counts), (small, _, small_counts) = _before_and_after(
        vocab, files, tmp_path, monkeypatch, "BATCH_SENTENCES", 7
    )
    assert len(whole) == 1 and len(small) > 10  # the two files in one batch
    assert len({p for t in small for p in t.paths}) == 1  # one spill file per bundle
    decoded = _decoded(small)
    assert decoded == _decoded(whole)
    assert small_counts == whole_counts
    tokenizer = worker_tokenizer(vocab, True)
    text = files[0].read_text(encoding="utf-8").split("\n\n")[0].splitlines()
    first = decoded[f"{files[0].name}:0"]
    assert first == [ids for ids in tokenizer.encode_batch([s.strip() for s in text]) if ids]
    assert whole_counts["documents"] == whole_counts["tokenized_documents"] == len(decoded)
    assert whole_counts["tokens"] == sum(len(s) for d in decoded.values() for s in d)


@pytest.mark.parametrize("suffix, compress", [(".gz", gzip.compress), (".bz2", bz2.compress)])
def test_a_cut_compressed_file_keeps_its_documents_before_the_cut(
    vocab, tmp_path, suffix, compress
):
    """Beam's own decompressor ends a cut stream as if it were whole: a silent loss. (~2 MB of
    text: bz2 decompresses in blocks of 900 kB.)"""
    n = 40_000
    text = "".join(f"Sentence {i} of document {i}.\nAnd its second line.\n\n" for i in range(n))
    packed = compress(text.encode())
    path = tmp_path / f"cut.txt{suffix}"
    path.write_bytes(packed[: len(packed) * 2 // 3])
    tables, rejects, counts = _run(vocab, [path], tmp_path / "spill")
    assert counts["truncated_input_file"] == 1
    assert [r["reason"] for r in rejects] == ["truncated_input_file"]
    kept = _decoded(tables)
    assert 0 < len(kept) < n and counts["tokenized_documents"] == len(kept)
    assert sorted(kept, key=lambda k: int(k.rsplit(":", 1)[1]))[0] == f"cut.txt{suffix}:0"
    whole, _, _ = _run(vocab, [_written(tmp_path / f"whole.txt{suffix}", packed)], tmp_path / "w")
    assert len(_decoded(whole)) == n


def _written(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_empty_files_and_documents_are_counted_and_rejected(vocab, tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "some.txt").write_bytes(
        b"A real sentence.\n\n\x01\x02\n\x03\n\nAnother one here.\n"
    )
    tables, rejects, counts = _run(
        vocab, [tmp_path / "empty.txt", tmp_path / "some.txt"], tmp_path / "spill"
    )
    assert sorted(r["reason"] for r in rejects) == ["dropped_empty_document", "empty_input_file"]
    assert counts["empty_input_file"] == 1 and counts["input_files"] == 2
    assert counts["dropped_empty_document"] == 1 and counts["dropped_empty_sentence"] == 2
    assert sorted(_decoded(tables)) == ["some.txt:0", "some.txt:2"]
    assert counts["documents"] == 3 and counts["tokenized_documents"] == 2


@pytest.mark.parametrize("batch_sentences", [7, source.BATCH_SENTENCES])
def test_an_error_of_the_tokenizer_is_not_taken_for_damage(
    vocab, sample_corpus_files, tmp_path, monkeypatch, batch_sentences
):
    """Raised while the file is read (small batches) or at the bundle's end (one batch)."""
    monkeypatch.setattr(source, "BATCH_SENTENCES", batch_sentences)
    fn = TokenizeBertTextFn(vocab, True, str(tmp_path), 2000, 10000)
    fn.setup()

    def broken(*_):
        raise ValueError("tokenizer failed")

    fn._tokenizer.encode_batch_flat = broken  # type: ignore[union-attr, method-assign]
    fn.start_bundle()
    (f,) = expand_inputs([str(sample_corpus_files[0])])
    with pytest.raises(ValueError, match="tokenizer failed"):
        list(fn.process(f))
        list(fn.finish_bundle())
    assert "truncated_input_file" not in fn.stats


def test_blocks_smaller_than_a_line_read_the_same_documents(
    vocab, sample_corpus_files, tmp_path, monkeypatch
):
    files = sample_corpus_files[:1]
    (whole, _, whole_counts), (blocks, _, block_counts) = _before_and_after(
        vocab, files, tmp_path, monkeypatch, "READ_BYTES", 7
    )
    assert _decoded(blocks) == _decoded(whole) and block_counts == whole_counts
    assert list(source._chunks(str(files[0])))[:3] != [files[0].read_bytes()]
    assert b"".join(source._chunks(str(files[0]))) == files[0].read_bytes()
