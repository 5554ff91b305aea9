"""Reading google-research/bert text files (plain, .gz, .bz2; local or gs://) into documents."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.input_files import InputFile
from pipeline.runtime.counters import REJECTS_TAG, STATS_TAG, CountingDoFn
from transforms.bert_text import parse_bert_text
from transforms.rejects import Reject


def _lines(path: str):
    with FileSystems.open(path, compression_type=CompressionTypes.AUTO) as f:
        while True:
            line = f.readline()
            if not line:
                return
            yield line


class ReadBertTextFn(CountingDoFn):
    """InputFile → TextDocument (main), Reject (``rejects``), per-bundle counts (``stats``).

    A file that cannot be read to its end (truncated or corrupt compression) keeps every document
    before the damage and is reported as ``truncated_input_file``.
    """

    def __init__(self, max_sentence_chars: int, max_document_sentences: int) -> None:
        self._max_sentence_chars = max_sentence_chars
        self._max_document_sentences = max_document_sentences

    def process(self, input_file: InputFile):
        before = self.stats["lines"]
        try:
            yield from (
                self.reject(item) if isinstance(item, Reject) else item
                for item in parse_bert_text(
                    _lines(input_file.path),
                    input_file.name,
                    self.stats,
                    self._max_sentence_chars,
                    self._max_document_sentences,
                )
            )
        except (OSError, EOFError, ValueError) as e:  # zlib/bz2 damage surfaces as these
            self.stats["truncated_input_file"] += 1
            yield self.reject(
                Reject.of(
                    "truncated_input_file",
                    f"{input_file.name}: after line {self.stats['lines'] - before}",
                    f"{type(e).__name__}: {e}",
                )
            )
        self.stats["input_files"] += 1
        if self.stats["lines"] == before:
            self.stats["empty_input_file"] += 1
            yield self.reject(Reject.of("empty_input_file", input_file.name, ""))


class ReadBertTextDocuments(beam.PTransform):
    """PCollection[InputFile] → tagged outputs ``documents``, ``rejects``, ``stats``."""

    def __init__(self, max_sentence_chars: int, max_document_sentences: int) -> None:
        super().__init__()
        self._fn = ReadBertTextFn(max_sentence_chars, max_document_sentences)

    def expand(self, files):
        return files | beam.ParDo(self._fn).with_outputs(REJECTS_TAG, STATS_TAG, main="documents")
