"""Token files: written once by the tokenize stage, read in place by the phases."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.files.token_files import TokenIndex, write_token_file
from pipeline.steps.tokenize_documents import (
    DocumentRef,
    RefTable,
    load_documents,
    load_layout,
    tokenize_documents,
)
from pipeline.steps.tokenize_files import TokenizeFileFn
from tests.pipeline.steps.test_clean_stages import run_fn
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.instances import BucketLayout
from transforms.token_documents import TokenizedDocument, copy_ranges


def test_write_and_read_back_every_document(tmp_path):
    docs = [
        TokenizedDocument.from_sentences("wikipedia/a/1", [[5, 6, 7], [8]]),
        TokenizedDocument.from_sentences("books/b.txt", [[9] * 300]),
        TokenizedDocument.from_sentences("jsonl/c/2", [[1], [2], [3]]),
    ]
    write_token_file(str(tmp_path / "tokens-x"), docs)
    index = TokenIndex.read(str(tmp_path / "tokens-x.index.parquet"))
    assert index.keys == [d.key for d in docs]
    assert index.tokens.tolist() == [4, 300, 3] and index.num_sentences.tolist() == [2, 1, 3]
    refs = [
        DocumentRef(k, index.data_path, int(o), int(s), int(n))
        for k, o, s, n in zip(
            index.keys, index.offsets, index.sizes, index.num_sentences, strict=True
        )
    ]
    table = RefTable.concat_sorted([RefTable.of_refs(refs[:1]), RefTable.of_refs(refs[1:])])
    assert list(table.keys) == sorted(d.key for d in docs)
    loaded = {d.key: d.sentences() for d in load_documents(table.refs())}
    assert loaded == {d.key: d.sentences() for d in docs}
    # The instance stage's loader: the same documents, laid out in table order.
    layout = load_layout(table)
    expected = BucketLayout.from_arrays([(d.ids, d.offsets) for d in load_documents(table.refs())])
    for name in ("tokens", "sentence_starts", "sentence_lengths", "document_bounds"):
        np.testing.assert_array_equal(getattr(layout, name), getattr(expected, name))
    assert layout.lengths == expected.lengths


def test_mapped_and_streamed_reads_lay_out_the_same_documents(tmp_path, monkeypatch):
    """Local token files are mapped; remote ones are read front to back. Both give the same
    layout over several files and documents in scattered order, empty documents included."""
    import pipeline.steps.tokenize_documents as loader

    rng = np.random.default_rng(2)
    refs = []
    for f in range(3):
        docs = [
            TokenizedDocument.from_sentences(
                f"f{f}/d{i}",
                [list(rng.integers(1, 999, int(n))) for n in rng.integers(0, 9, i % 4)],
            )
            for i in range(30)
        ]
        write_token_file(str(tmp_path / f"tokens-{f}"), docs)
        index = TokenIndex.read(str(tmp_path / f"tokens-{f}.index.parquet"))
        refs += [
            DocumentRef(k, index.data_path, int(o), int(s), int(n))
            for k, o, s, n in zip(
                index.keys, index.offsets, index.sizes, index.num_sentences, strict=True
            )
        ]
    table = RefTable.of_refs([refs[i] for i in rng.permutation(len(refs))])
    mapped = load_layout(table)
    monkeypatch.setattr(loader, "is_local", lambda path: False)
    streamed = load_layout(table)
    for name in ("tokens", "sentence_starts", "sentence_lengths", "document_bounds"):
        np.testing.assert_array_equal(getattr(mapped, name), getattr(streamed, name))
    expected = BucketLayout.from_arrays([(d.ids, d.offsets) for d in load_documents(table.refs())])
    np.testing.assert_array_equal(mapped.tokens, expected.tokens)


def test_a_view_of_the_mapping_held_after_the_copy_does_not_fail_the_read(tmp_path, monkeypatch):
    """A sampling profiler (Dask's worker samples its threads' frames every 10 ms) can hold the
    frame of ``copy_ranges``, and with it a view of the mapped token file, for a moment after the
    call. The read must not fail then (closing the mapping would raise BufferError); the mapping
    is released when the last view goes."""
    import gc
    import weakref

    import pipeline.steps.tokenize_documents as loader

    held: list[np.ndarray] = []

    def copy_and_keep_the_source(src, *args):
        copy_ranges(src, *args)
        held.append(src)

    monkeypatch.setattr(loader, "copy_ranges", copy_and_keep_the_source)
    docs = [TokenizedDocument.from_sentences(f"d{i}", [[i + 1] * (i + 3), [7]]) for i in range(5)]
    write_token_file(str(tmp_path / "tokens-x"), docs)
    index = TokenIndex.read(str(tmp_path / "tokens-x.index.parquet"))
    refs = [
        DocumentRef(k, index.data_path, int(o), int(s), int(n))
        for k, o, s, n in zip(
            index.keys, index.offsets, index.sizes, index.num_sentences, strict=True
        )
    ]
    layout = load_layout(RefTable.of_refs(refs))
    expected = BucketLayout.from_arrays([(d.ids, d.offsets) for d in docs])
    np.testing.assert_array_equal(layout.tokens, expected.tokens)
    assert len(held) == 1
    mapping = weakref.ref(held[0].base.obj)  # the mmap behind the view
    held.clear()
    gc.collect()
    assert mapping() is None  # unmapped with its last view


@pytest.mark.parametrize("mapped", [True, False])
def test_a_document_shorter_than_its_reference_is_named(tmp_path, monkeypatch, mapped):
    import pipeline.steps.tokenize_documents as loader

    monkeypatch.setattr(loader, "is_local", lambda path: mapped)
    docs = [TokenizedDocument.from_sentences("books/b.txt", [[9] * 30, [1, 2]])]
    write_token_file(str(tmp_path / "tokens-x"), docs)
    index = TokenIndex.read(str(tmp_path / "tokens-x.index.parquet"))
    wrong = DocumentRef("books/b.txt", index.data_path, 0, int(index.sizes[0]), 1)
    with pytest.raises(ValueError, match="document books/b.txt: .* bytes do not match"):
        load_layout(RefTable.of_refs([wrong]))
    cut = DocumentRef("books/b.txt", index.data_path, 8, int(index.sizes[0]), 2)
    with pytest.raises(ValueError, match="document books/b.txt: .* holds 144 of its 152 bytes"):
        load_layout(RefTable.of_refs([cut]))
    past = DocumentRef("books/b.txt", index.data_path, 10_000, 8, 0)
    with pytest.raises(ValueError, match="document books/b.txt: .* holds 0 of its 8 bytes"):
        load_layout(RefTable.of_refs([past]))


def test_many_documents_in_one_call_equal_one_call_per_document(sample_vocab_path):
    tokenizer = BertWordPieceTokenizer(Vocab.from_file(sample_vocab_path), True)
    docs = [
        (f"d{i}", [f"Sentence {j} of document {i}, naïve café." for j in range(i)])
        for i in range(40)
    ]
    batched = tokenize_documents(tokenizer, docs)
    assert [k for k, _, _ in batched] == [k for k, _ in docs]
    for (_, sentences), (_, ids, counts) in zip(docs, batched, strict=True):
        expected = tokenizer.encode_batch(sentences)
        assert counts.tolist() == [len(e) for e in expected]
        assert ids.tolist() == [t for e in expected for t in e]
        assert ids.dtype == np.int32


def test_tokenize_file_counts_rejects_and_rewrites_identically(tmp_path, sample_vocab_path):
    source = tmp_path / "documents-00001-0000.parquet"
    pq.write_table(
        pa.table(
            {
                "doc_id": ["a/1", "a/2", "a/3"],
                "sentences": [["Hello there.", "   "], ["\u200b"], ["One sentence only."]],
            }
        ),
        source,
    )
    out = tmp_path / "tokens"
    fn = TokenizeFileFn(Vocab.from_file(sample_vocab_path), True, {"train": str(out)})
    written = []
    for _ in range(2):  # a retried bundle
        _, tagged = run_fn(fn, (("train", str(source)),))
        written.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert written[0] == written[1]
    assert sorted(written[0]) == [
        ".rejects-00001-0000.jsonl",
        "tokens-00001-0000.bin",
        "tokens-00001-0000.index.parquet",
    ]
    (stats,) = tagged["stats"]
    assert stats["train.documents"] == 3 and stats["train.tokenized_documents"] == 2
    assert stats["train.dropped_empty_document"] == 1
    assert stats["train.dropped_empty_sentence"] == 2
    (reject,) = [json.loads(x) for x in written[0][".rejects-00001-0000.jsonl"].splitlines()]
    assert reject["reason"] == "dropped_empty_document" and reject["location"] == "a/2"
    index = TokenIndex.read(str(out / "tokens-00001-0000.index.parquet"))
    assert index.keys == ["a/1", "a/3"] and np.all(index.num_sentences == 1)
