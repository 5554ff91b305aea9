"""The tokenize stage's DoFn: a documents Parquet file of one side → its token file pair
(``pipeline.files.token_files``), with empty sentences dropped and empty documents rejected."""

from __future__ import annotations

from collections import Counter

from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import RejectsPart
from pipeline.files.token_files import write_token_file
from pipeline.runtime.counters import CountingDoFn
from pipeline.runtime.progress import ProgressReporter
from pipeline.steps.tokenize_documents import tokenize_documents, worker_tokenizer
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.rejects import Reject
from transforms.token_documents import TokenizedDocument, kept_document

DOCUMENTS_PER_BATCH = 1024
"""Documents read from a clean Parquet file at a time (~27k sentences of Wikipedia-like text)."""


class TokenizeFileFn(CountingDoFn):
    """(side, documents Parquet file (doc_id, sentences)) → its token file pair, written in that
    side's output directory (``outputs[side]``); emits counts prefixed with the side.

    Sentences that tokenize to nothing are dropped (``dropped_empty_sentence``); a document left
    with none is rejected (``dropped_empty_document``, to a rejects part file)."""

    def __init__(
        self,
        vocab: Vocab,
        do_lower_case: bool,
        outputs: dict[str, str],
        progress: ProgressReporter | None = None,
    ) -> None:
        self._vocab = vocab
        self._do_lower_case = do_lower_case
        self._outputs = outputs
        self._tokenizer: BertWordPieceTokenizer | None = None
        self.progress = progress

    def setup(self) -> None:
        self._tokenizer = worker_tokenizer(self._vocab, self._do_lower_case)

    def process(self, element: tuple[str, str]):
        import pyarrow.parquet as pq

        assert self._tokenizer is not None
        side, path = element
        output = self._outputs[side]
        name = path.rsplit("/", 1)[-1].removesuffix(".parquet").removeprefix("documents-")
        rejects = RejectsPart(FileSystems.join(output, f".rejects-{name}.jsonl"))
        local: Counter[str] = Counter()
        kept: list[TokenizedDocument] = []
        with FileSystems.open(path) as f:
            for batch in pq.ParquetFile(f).iter_batches(
                batch_size=DOCUMENTS_PER_BATCH, columns=["doc_id", "sentences"]
            ):
                docs = list(
                    zip(
                        batch.column("doc_id").to_pylist(),
                        [s or [] for s in batch.column("sentences").to_pylist()],
                        strict=True,
                    )
                )
                for (key, sentences), (_, ids, counts) in zip(
                    docs, tokenize_documents(self._tokenizer, docs), strict=True
                ):
                    local["documents"] += 1
                    document = kept_document(key, sentences, ids, counts, local)
                    if isinstance(document, Reject):
                        rejects.write(document.to_json())
                    else:
                        kept.append(document)
                if self.progress is not None:
                    self.progress.add(len(docs))
        rejects.close()
        if kept:
            write_token_file(FileSystems.join(output, f"tokens-{name}"), kept)
        for key, value in local.items():
            self.stats[f"{side}.{key}"] += value
        return []
