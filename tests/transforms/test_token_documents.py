"""Compact tokenized documents (transforms.token_documents)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from transforms.token_documents import TokenizedDocument, copy_ranges


def test_from_sentences_layout():
    doc = TokenizedDocument.from_sentences("f:3", [[5, 6, 7], [8], [9, 10]])
    assert doc.key == "f:3"
    assert doc.ids.dtype == np.int32 and doc.ids.tolist() == [5, 6, 7, 8, 9, 10]
    assert doc.offsets.dtype == np.int64 and doc.offsets.tolist() == [0, 3, 4, 6]
    assert doc.num_sentences == 3
    assert doc.num_tokens == 6
    assert doc.sentences() == [[5, 6, 7], [8], [9, 10]]
    assert all(type(t) is int for s in doc.sentences() for t in s)


def test_round_trip_random_documents():
    rng = np.random.default_rng(0)
    for _ in range(50):
        sentences = [
            rng.integers(0, 2**31 - 1, size=int(rng.integers(0, 20))).tolist()
            for _ in range(int(rng.integers(1, 30)))
        ]
        doc = TokenizedDocument.from_sentences("k", sentences)
        assert doc.sentences() == sentences
        assert doc.num_sentences == len(sentences)
        assert doc.num_tokens == sum(len(s) for s in sentences)
        for i, s in enumerate(sentences):
            assert doc.ids[doc.offsets[i] : doc.offsets[i + 1]].tolist() == s


def test_empty_document_and_empty_sentences():
    empty = TokenizedDocument.from_sentences("e", [])
    assert empty.num_sentences == 0 and empty.num_tokens == 0
    assert empty.sentences() == []
    assert empty.offsets.tolist() == [0]
    doc = TokenizedDocument.from_sentences("e", [[], [1], []])
    assert doc.sentences() == [[], [1], []]
    assert doc.offsets.tolist() == [0, 0, 1, 1]


def test_accepts_tuples_and_numpy_sentences():
    doc = TokenizedDocument.from_sentences("t", [(1, 2), np.array([3, 4, 5], dtype=np.int64)])
    assert doc.sentences() == [[1, 2], [3, 4, 5]]


def test_pickle_round_trip():
    doc = TokenizedDocument.from_sentences("p", [[1, 2, 3], [4, 5]])
    copy = pickle.loads(pickle.dumps(doc))
    assert copy.key == doc.key
    assert np.array_equal(copy.ids, doc.ids) and np.array_equal(copy.offsets, doc.offsets)
    assert copy.sentences() == doc.sentences()


def test_copy_ranges_equals_slice_by_slice_copies():
    rng = np.random.default_rng(11)
    src = rng.integers(0, 256, 5_000, dtype=np.uint8)
    sizes = rng.integers(0, 60, 200)
    starts = rng.integers(0, len(src) - 60, 200)
    order = rng.permutation(200)  # ranges land in dest in another order than they are given
    positions = np.empty(200, dtype=np.int64)
    positions[order] = np.concatenate(([0], np.cumsum(sizes[order])[:-1]))
    dest = np.zeros(int(sizes.sum()), dtype=np.uint8)
    expected = dest.copy()
    for s, n, p in zip(starts, sizes, positions, strict=True):
        expected[p : p + n] = src[s : s + n]
    copy_ranges(np.frombuffer(src.tobytes(), dtype=np.uint8), starts, sizes, dest, positions)
    np.testing.assert_array_equal(dest, expected)


@pytest.mark.parametrize(
    ("start", "size", "position"), [(95, 10, 0), (-1, 2, 0), (0, 10, 95), (0, -1, 0)]
)
def test_copy_ranges_refuses_a_range_outside_and_copies_nothing(start, size, position):
    src, dest = np.arange(100, dtype=np.uint8), np.zeros(100, dtype=np.uint8)
    with pytest.raises(ValueError, match="outside"):
        copy_ranges(src, [0, start], [5, size], dest, [0, position])
    assert not dest.any()
