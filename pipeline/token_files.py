"""Token files: the tokenize stage's output, read in place by every instance phase.

A token file pair is ``tokens-<name>.bin`` (each document's ``TokenizedDocument.to_bytes()``,
back to back) and ``tokens-<name>.index.parquet`` (one row per document: key, offset, size,
num_sentences, tokens). The index is committed after the data, so an index always describes a
complete data file; both are written under deterministic names by the worker that tokenized the
documents, so a retried bundle rewrites the same bytes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import chain

import numpy as np
from apache_beam.io.filesystems import FileSystems

from pipeline.artifacts import (
    RejectsPart,
    read_parquet,
    write_bytes_atomically,
    write_parquet_atomically,
)
from pipeline.counting import CountingDoFn
from pipeline.progress import ProgressReporter
from pipeline.tokenize_documents import worker_tokenizer
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.rejects import Reject
from transforms.token_documents import TokenizedDocument

INDEX_SUFFIX = ".index.parquet"
DATA_SUFFIX = ".bin"
ENCODE_BATCH_SENTENCES = 4096


def index_schema():
    import pyarrow as pa

    return pa.schema(
        [
            ("key", pa.string()),
            ("offset", pa.int64()),
            ("size", pa.int64()),
            ("num_sentences", pa.int32()),
            ("tokens", pa.int64()),
        ]
    )


def data_path_of(index_path: str) -> str:
    return index_path[: -len(INDEX_SUFFIX)] + DATA_SUFFIX


@dataclass(frozen=True)
class TokenIndex:
    """The index of one token file: parallel arrays, one entry per document, in file order."""

    data_path: str
    keys: list[str]
    offsets: np.ndarray
    sizes: np.ndarray
    num_sentences: np.ndarray
    tokens: np.ndarray

    @classmethod
    def read(cls, index_path: str) -> TokenIndex:
        t = read_parquet(index_path)
        return cls(
            data_path_of(index_path),
            t.column("key").to_pylist(),
            t.column("offset").to_numpy(),
            t.column("size").to_numpy(),
            t.column("num_sentences").to_numpy(),
            t.column("tokens").to_numpy(),
        )


def write_token_file(base: str, documents: list[TokenizedDocument]) -> None:
    """Writes ``<base>.bin`` then ``<base>.index.parquet`` (each committed by rename)."""
    import pyarrow as pa

    blobs = [d.to_bytes() for d in documents]
    sizes = np.fromiter((len(b) for b in blobs), dtype=np.int64, count=len(blobs))
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    write_bytes_atomically(base + DATA_SUFFIX, b"".join(blobs))
    del blobs
    index = pa.Table.from_pydict(
        {
            "key": [d.key for d in documents],
            "offset": offsets,
            "size": sizes,
            "num_sentences": np.array([d.num_sentences for d in documents], dtype=np.int32),
            "tokens": np.array([d.num_tokens for d in documents], dtype=np.int64),
        },
        schema=index_schema(),
    )
    write_parquet_atomically(base + INDEX_SUFFIX, index)


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
                batch_size=512, columns=["doc_id", "sentences"]
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
