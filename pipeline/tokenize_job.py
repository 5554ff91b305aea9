"""The tokenize stage of ``bertprep run``: BERT text → token ids, once, for every phase and pass.

Writes ``tokens-*.parquet`` rows ``{key, sentences: list<list<int32>>}``; the instance stage reads
them with ``pretokenized=True`` instead of tokenizing each phase again.
"""

from __future__ import annotations

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from pipeline.bert_text_source import ReadBertTextDocuments
from pipeline.input_files import expand_inputs
from pipeline.tokenize_documents import TokenRowsFn, token_parquet_schema
from tokenizer.vocab import Vocab
from transforms.bert_text import DEFAULT_MAX_DOCUMENT_SENTENCES, DEFAULT_MAX_SENTENCE_CHARS


def run_tokenize_job(
    pattern: str, vocab_path: str, do_lower_case: bool, output: str, num_shards: int, options
) -> dict[str, int]:
    """Tokenizes the documents of the BERT text files at ``pattern`` into ``output``."""
    files = expand_inputs([pattern])
    vocab = Vocab.from_file(vocab_path)
    with beam.Pipeline(options=options) as p:
        read = (
            p
            | "ListFiles" >> beam.Create(files)
            | "SpreadFiles" >> beam.Reshuffle()
            | "Read"
            >> ReadBertTextDocuments(DEFAULT_MAX_SENTENCE_CHARS, DEFAULT_MAX_DOCUMENT_SENTENCES)
        )
        (
            read.documents
            | "Tokenize" >> beam.ParDo(TokenRowsFn(vocab, do_lower_case))
            | "Write"
            >> beam.io.WriteToParquet(
                FileSystems.join(output, "tokens"),
                token_parquet_schema(),
                file_name_suffix=".parquet",
                num_shards=max(1, num_shards),
            )
        )
    return {"files": len(files), "vocab_sha256": vocab.sha256}
