"""Tokenizing documents of sentences into compact id documents, on Beam workers."""

from __future__ import annotations

import apache_beam as beam

from pipeline.counting import CountingDoFn
from pipeline.stats import REJECTS_TAG, STATS_TAG
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.bert_text import TextDocument
from transforms.rejects import Reject
from transforms.token_documents import TokenizedDocument


class TokenizeFn(CountingDoFn):
    """TextDocument → TokenizedDocument. Sentences that tokenize to nothing are dropped
    (``dropped_empty_sentence``); a document left with none is rejected (``dropped_empty_document``)."""

    def __init__(self, vocab: Vocab, do_lower_case: bool) -> None:
        self._vocab = vocab
        self._do_lower_case = do_lower_case
        self._tokenizer: BertWordPieceTokenizer | None = None

    def setup(self) -> None:
        self._tokenizer = BertWordPieceTokenizer(self._vocab, self._do_lower_case)

    def process(self, document: TextDocument):
        assert self._tokenizer is not None
        encoded = self._tokenizer.encode_batch(document.sentences)
        kept = [ids for ids in encoded if ids]
        dropped = len(encoded) - len(kept)
        if dropped:
            self.stats["dropped_empty_sentence"] += dropped
        if not kept:
            self.stats["dropped_empty_document"] += 1
            yield self.reject(
                Reject.of("dropped_empty_document", document.key, " / ".join(document.sentences))
            )
            return
        self.stats["tokenized_documents"] += 1
        self.stats["tokenized_sentences"] += len(kept)
        self.stats["tokens"] += sum(len(s) for s in kept)
        if len(kept) == 1:
            self.stats["one_sentence_documents"] += 1
        yield TokenizedDocument.from_sentences(document.key, kept)


class TokenizeDocuments(beam.PTransform):
    """PCollection[TextDocument] → tagged outputs ``documents``, ``rejects``, ``stats``."""

    def __init__(self, vocab: Vocab, do_lower_case: bool) -> None:
        super().__init__()
        self._fn = TokenizeFn(vocab, do_lower_case)

    def expand(self, documents):
        return documents | beam.ParDo(self._fn).with_outputs(
            REJECTS_TAG, STATS_TAG, main="documents"
        )
