"""google-research/bert text files (plain, .gz, .bz2; local or gs://) → their documents' token
ids, spilled to files on the workers batch by batch; only a ``RefTable`` per batch travels on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline.files.input_files import InputFile
from pipeline.files.source_readers import open_decompressed
from pipeline.runtime.counters import REJECTS_TAG, STATS_TAG, CountingDoFn, in_global_window
from pipeline.steps.tokenize_documents import (
    ENCODE_BATCH_SENTENCES,
    RefTable,
    tokenize_documents,
    worker_tokenizer,
)
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.bert_text import TextDocument, parse_bert_text
from transforms.rejects import Reject
from transforms.token_documents import TokenizedDocument, kept_document

BATCH_SENTENCES = ENCODE_BATCH_SENTENCES
"""A batch of documents (of one file or several of a bundle) is tokenized and spilled once it
holds this many sentences (a document is never split), and at the end of the bundle: the
tokenizer's fast path works per distinct chunk of a call, so large calls cost less per sentence
(30 MB of books, one core: 1.23 s in calls of ~4k sentences, one file each, 0.98 s in calls of
32k), and a worker holds one batch, never a whole file."""


READ_BYTES = 1 << 16
"""Decompressed bytes read at a time: a cut compressed file loses at most this much (with the
line it cuts) before ``truncated_input_file``."""


def _chunks(path: str) -> Iterator[bytes]:
    """The file's bytes, decompressed (.gz, .bz2), in chunks of whole lines (each cut after a
    ``\\n``; the last as the file ends). A compressed stream cut before its end raises
    EOFError (``open_decompressed``)."""
    with open_decompressed(path, whole=True) as f:
        carry: list[bytes] = []
        while block := f.read(READ_BYTES):
            cut = block.rfind(b"\n") + 1
            if not cut:
                carry.append(block)  # inside a line longer than a block
                continue
            yield b"".join([*carry, block[:cut]])
            carry = [block[cut:]] if cut < len(block) else []
        if carry:
            yield b"".join(carry)


class TokenizeBertTextFn(CountingDoFn):
    """InputFile → RefTable (main) per batch of its documents, Reject (``rejects``), per-bundle
    counts (``stats``).

    Documents are batched across the bundle's files (``BATCH_SENTENCES``); each batch's token
    ids are appended to this bundle's spill file (``tokens-<uuid>.bin`` in
    ``spill_dir``, a ``TokenizedDocument.to_bytes`` per document); the RefTable says where.
    Sentences that tokenize to nothing are dropped (``dropped_empty_sentence``); a document left
    with none is rejected (``dropped_empty_document``). A file that cannot be read to its end
    (truncated or corrupt compression) keeps every document before the damage and is reported
    as ``truncated_input_file`` (not also as ``empty_input_file`` when no line came before).
    """

    def __init__(
        self,
        vocab: Vocab,
        do_lower_case: bool,
        spill_dir: str,
        max_sentence_chars: int,
        max_document_sentences: int,
    ) -> None:
        self._vocab = vocab
        self._do_lower_case = do_lower_case
        self._spill_dir = spill_dir
        self._max_sentence_chars = max_sentence_chars
        self._max_document_sentences = max_document_sentences
        self._tokenizer: BertWordPieceTokenizer | None = None

    def setup(self) -> None:
        self._tokenizer = worker_tokenizer(self._vocab, self._do_lower_case)

    def start_bundle(self) -> None:
        super().start_bundle()
        self._file = None
        self._path = ""
        self._written = 0
        self._batch: list[TextDocument] = []
        self._batch_sentences = 0

    def finish_bundle(self):
        for output in self._tokenized():
            if isinstance(output, beam.pvalue.TaggedOutput):
                yield beam.pvalue.TaggedOutput(output.tag, in_global_window(output.value))
            else:
                yield in_global_window(output)
        if self._file is not None:
            self._file.close()
            self._file = None
        yield from super().finish_bundle()

    def process(self, input_file: InputFile):
        before = self.stats["lines"]
        cut = False
        for item in self._parsed(input_file, before):
            if isinstance(item, Reject):
                cut = cut or item.reason == "truncated_input_file"
                yield self.reject(item)
                continue
            self._batch.append(item)
            self._batch_sentences += len(item.sentences)
            if self._batch_sentences >= BATCH_SENTENCES:
                yield from self._tokenized()
        self.stats["input_files"] += 1
        if self.stats["lines"] == before and not cut:
            self.stats["empty_input_file"] += 1
            yield self.reject(Reject.of("empty_input_file", input_file.name, ""))

    def _parsed(self, input_file: InputFile, before: int) -> Iterator[TextDocument | Reject]:
        """The file's documents and line rejects; damage ends them with ``truncated_input_file``
        after the file's last whole line (``before``: the lines counted before the file). Only
        errors of reading and parsing are caught, not those of the caller's work."""
        items = parse_bert_text(
            _chunks(input_file.path),
            input_file.name,
            self.stats,
            self._max_sentence_chars,
            self._max_document_sentences,
        )
        while True:
            try:
                item = next(items)
            except StopIteration:
                return
            except (OSError, EOFError, ValueError) as e:  # zlib/bz2 damage surfaces as these
                self.stats["truncated_input_file"] += 1
                yield Reject.of(
                    "truncated_input_file",
                    f"{input_file.name}: after line {self.stats['lines'] - before}",
                    f"{type(e).__name__}: {e}",
                )
                return
            yield item

    def _tokenized(self):
        """Tokenizes the batch in one go and spills its kept documents: their RefTable, and a
        Reject per empty document; the batch is then empty."""
        batch = self._batch
        if not batch:
            return
        self._batch, self._batch_sentences = [], 0
        assert self._tokenizer is not None
        docs = [(d.key, d.sentences) for d in batch]
        kept: list[TokenizedDocument] = []
        for (key, sentences), (_, ids, counts) in zip(
            docs, tokenize_documents(self._tokenizer, docs), strict=True
        ):
            document = kept_document(key, sentences, ids, counts, self.stats)
            if isinstance(document, Reject):
                yield self.reject(document)
            else:
                kept.append(document)
        if kept:
            yield self._spill(kept)

    def _spill(self, documents: list[TokenizedDocument]) -> RefTable:
        """Appends ``documents`` to this bundle's spill file (created on first use)."""
        if self._file is None:
            self._path = FileSystems.join(self._spill_dir, f"tokens-{uuid.uuid4().hex}.bin")
            self._file = FileSystems.create(self._path)
            self._written = 0
        data = [d.to_bytes() for d in documents]
        sizes = np.fromiter(map(len, data), np.int64, len(data))
        offsets = self._written + np.cumsum(sizes) - sizes
        self._file.write(b"".join(data))
        self._written += int(sizes.sum())
        return RefTable(
            (self._path,),
            tuple(d.key for d in documents),
            np.zeros(len(documents), dtype=np.int32),
            offsets,
            sizes,
            np.array([d.num_sentences for d in documents], dtype=np.int64),
        )


def tokenize_bert_text(fn: TokenizeBertTextFn):
    """``fn`` as a step: PCollection[InputFile] → tagged outputs ``tables`` (RefTable),
    ``rejects``, ``stats``."""
    return beam.ParDo(fn).with_outputs(REJECTS_TAG, STATS_TAG, main="tables")
