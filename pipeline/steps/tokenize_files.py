"""The tokenize stage's DoFn: a documents Parquet file of one side → its token file pair
(``pipeline.files.token_files``), with empty sentences dropped and empty documents rejected."""

from __future__ import annotations

from collections import Counter
from itertools import chain

import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline.files.artifacts import RejectsPart
from pipeline.files.token_files import write_token_file
from pipeline.runtime.counters import CountingDoFn
from pipeline.runtime.progress import ProgressReporter
from pipeline.steps.tokenize_documents import worker_tokenizer
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.rejects import Reject
from transforms.token_documents import TokenizedDocument

ENCODE_BATCH_SENTENCES = 32768
"""Sentences per tokenizer call: the fast path does Python work per distinct chunk of a call,
and larger calls repeat fewer (measured: 16k → 64k sentences per call, 1.3× less time)."""
DOCUMENTS_PER_BATCH = 1024
"""Documents read from a clean Parquet file at a time (~27k sentences of Wikipedia-like text)."""


def tokenize_documents(
    tokenizer: BertWordPieceTokenizer, docs: list[tuple[str, list[str]]]
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(key, sentences) → (key, ids, ids per sentence): the document's token ids one sentence
    after the other (int32) and how many each sentence has (int64, 0 for a sentence that
    tokenizes to nothing). Many documents' sentences are encoded per call (the per-call cost of
    ``tokenizers`` otherwise dominates short documents)."""
    flat = list(chain.from_iterable(s for _, s in docs))
    parts = [
        tokenizer.encode_batch_flat(flat[start : start + ENCODE_BATCH_SENTENCES])
        for start in range(0, len(flat), ENCODE_BATCH_SENTENCES)
    ]
    ids = np.concatenate([i for i, _ in parts]) if parts else np.zeros(0, dtype=np.int32)
    counts = np.concatenate([c for _, c in parts]) if parts else np.zeros(0, dtype=np.int64)
    id_ends = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=id_ends[1:])
    out = []
    sentence = 0
    for key, sentences in docs:
        end = sentence + len(sentences)
        span = slice(int(id_ends[sentence]), int(id_ends[end]))
        out.append((key, ids[span], counts[sentence:end]))
        sentence = end
    return out


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
                    document = self._keep(key, sentences, ids, counts, rejects, local)
                    if document is not None:
                        kept.append(document)
                if self.progress is not None:
                    self.progress.add(len(docs))
        rejects.close()
        if kept:
            write_token_file(FileSystems.join(output, f"tokens-{name}"), kept)
        for key, value in local.items():
            self.stats[f"{side}.{key}"] += value
        return []

    @staticmethod
    def _keep(
        key: str,
        sentences: list[str],
        ids: np.ndarray,
        counts: np.ndarray,
        rejects: RejectsPart,
        tally: Counter[str],
    ) -> TokenizedDocument | None:
        tally["documents"] += 1
        kept = counts[counts > 0]
        if len(kept) != len(counts):
            tally["dropped_empty_sentence"] += len(counts) - len(kept)
        if not len(kept):
            tally["dropped_empty_document"] += 1
            rejects.write(Reject.of("dropped_empty_document", key, " / ".join(sentences)).to_json())
            return None
        tally["tokenized_documents"] += 1
        tally["tokenized_sentences"] += len(kept)
        tally["tokens"] += len(ids)
        if len(kept) == 1:
            tally["one_sentence_documents"] += 1
        offsets = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum(kept, out=offsets[1:])
        return TokenizedDocument(key, ids, offsets)
