"""Tokenizing documents of sentences into id documents, spilled to files on Beam workers.

The token ids go to one spill file per bundle; only a small ``DocumentRef`` per document travels
through Beam (to be grouped into buckets), so no runner has to hold the tokenized corpus in memory.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.counting import CountingDoFn
from pipeline.stats import REJECTS_TAG, STATS_TAG
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.bert_text import TextDocument
from transforms.rejects import Reject
from transforms.token_documents import TokenizedDocument


@dataclass(frozen=True)
class DocumentRef:
    """Where a tokenized document lies: ``size`` bytes at ``offset`` of the spill file ``path``."""

    key: str
    path: str
    offset: int
    size: int
    num_sentences: int

    def load(self) -> TokenizedDocument:
        return load_documents([self])[0]


def load_documents(refs: list[DocumentRef]) -> list[TokenizedDocument]:
    """The documents behind ``refs``, in the order given; each spill file is opened once and read
    front to back (one request per file on remote storage, not one per document)."""
    by_path: dict[str, list[int]] = {}
    for i, ref in enumerate(refs):
        by_path.setdefault(ref.path, []).append(i)
    out: list[TokenizedDocument | None] = [None] * len(refs)
    for path, indexes in by_path.items():
        indexes.sort(key=lambda i: refs[i].offset)
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for i in indexes:
                ref = refs[i]
                f.seek(ref.offset)
                data = f.read(ref.size)
                out[i] = TokenizedDocument.from_bytes(ref.key, data, ref.num_sentences)
    return out  # type: ignore[return-value]


class SpillTokensFn(CountingDoFn):
    """Base of the DoFns that turn documents into DocumentRefs: writes token ids to one spill file
    per bundle and counts what it keeps."""

    def __init__(self, spill_dir: str) -> None:
        self._spill_dir = spill_dir

    def start_bundle(self) -> None:
        super().start_bundle()
        self._file = None
        self._path = ""
        self._written = 0

    def finish_bundle(self):
        if self._file is not None:
            self._file.close()
            self._file = None
        yield from super().finish_bundle()

    def _spill(self, document: TokenizedDocument) -> DocumentRef:
        if self._file is None:
            self._path = FileSystems.join(self._spill_dir, f"tokens-{uuid.uuid4().hex}.bin")
            self._file = FileSystems.create(self._path)
            self._written = 0
        data = document.to_bytes()
        self._file.write(data)
        ref = DocumentRef(
            document.key, self._path, self._written, len(data), document.num_sentences
        )
        self._written += len(data)
        return ref

    def emit(self, key: str, sentences: list[list[int]], excerpt: str):
        """Counts and spills one document's non-empty sentences (or rejects an empty one)."""
        kept = [ids for ids in sentences if len(ids)]
        dropped = len(sentences) - len(kept)
        if dropped:
            self.stats["dropped_empty_sentence"] += dropped
        if not kept:
            self.stats["dropped_empty_document"] += 1
            yield self.reject(Reject.of("dropped_empty_document", key, excerpt))
            return
        self.stats["tokenized_documents"] += 1
        self.stats["tokenized_sentences"] += len(kept)
        self.stats["tokens"] += sum(len(s) for s in kept)
        if len(kept) == 1:
            self.stats["one_sentence_documents"] += 1
        yield self._spill(TokenizedDocument.from_sentences(key, kept))


class TokenizeFn(SpillTokensFn):
    """TextDocument → DocumentRef. Sentences that tokenize to nothing are dropped
    (``dropped_empty_sentence``); a document left with none is rejected (``dropped_empty_document``)."""

    def __init__(self, vocab: Vocab, do_lower_case: bool, spill_dir: str) -> None:
        super().__init__(spill_dir)
        self._vocab = vocab
        self._do_lower_case = do_lower_case
        self._tokenizer: BertWordPieceTokenizer | None = None

    def setup(self) -> None:
        # Beam already runs one worker per core: the tokenizer's own thread pool only adds
        # contention (measured: 3.3 MB/s per core without it, 2.5 with it).
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self._tokenizer = BertWordPieceTokenizer(self._vocab, self._do_lower_case)

    def process(self, document: TextDocument):
        assert self._tokenizer is not None
        encoded = self._tokenizer.encode_batch(document.sentences)
        yield from self.emit(document.key, encoded, " / ".join(document.sentences))


class ReadTokenizedFn(SpillTokensFn):
    """A row of a token Parquet file ({key, sentences: list<list<int32>>}) → DocumentRef."""

    def process(self, row: dict):
        self.stats["documents"] += 1
        sentences = [list(s) for s in row["sentences"] or []]
        yield from self.emit(row["key"], sentences, row["key"])


class TokenRowsFn(beam.DoFn):
    """TextDocument → a token Parquet row (the ``tokenize`` stage of ``bertprep run``)."""

    def __init__(self, vocab: Vocab, do_lower_case: bool) -> None:
        self._vocab = vocab
        self._do_lower_case = do_lower_case

    def setup(self) -> None:
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        self._tokenizer = BertWordPieceTokenizer(self._vocab, self._do_lower_case)

    def process(self, document: TextDocument):
        yield {"key": document.key, "sentences": self._tokenizer.encode_batch(document.sentences)}


def token_parquet_schema():
    import pyarrow as pa

    return pa.schema([("key", pa.string()), ("sentences", pa.list_(pa.list_(pa.int32())))])


class TokenizeDocuments(beam.PTransform):
    """PCollection[TextDocument] → tagged outputs ``documents`` (DocumentRef), ``rejects``,
    ``stats``."""

    def __init__(self, vocab: Vocab, do_lower_case: bool, spill_dir: str) -> None:
        super().__init__()
        self._fn = TokenizeFn(vocab, do_lower_case, spill_dir)

    def expand(self, documents):
        return documents | beam.ParDo(self._fn).with_outputs(
            REJECTS_TAG, STATS_TAG, main="documents"
        )
