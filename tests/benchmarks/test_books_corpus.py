"""The books corpus builder (tests and benchmarks): NLTK's own English Punkt, and no trace of it
left in the process."""

from __future__ import annotations

import nltk

from benchmarks.books_corpus import book_sentences
from tests.conftest import require_corpora


def test_book_sentences_are_nltks_and_leave_nltks_search_path_as_it_was(monkeypatch):
    book = require_corpora("books", "pg42.txt")
    before = list(nltk.data.path)
    paragraphs = book_sentences(book)
    assert nltk.data.path == before  # later code in the process finds punkt_tab as it would
    assert sum(map(len, paragraphs)) > 500
    monkeypatch.setattr(nltk.data, "path", [str(require_corpora("nltk_data")), *before])
    for sentences in paragraphs[:200]:
        assert nltk.sent_tokenize(" ".join(sentences)) == sentences
