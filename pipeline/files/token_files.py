"""Token files: the tokenize stage's output, read in place by every instance phase.

A token file pair is ``tokens-<name>.bin`` (each document's ``TokenizedDocument.to_bytes()``,
back to back) and ``tokens-<name>.index.parquet`` (one row per document: key, offset, size,
num_sentences, tokens). The index is committed after the data, so an index always describes a
complete data file; both are written under deterministic names by the worker that tokenized the
documents, so a retried bundle rewrites the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pipeline.files.artifacts import (
    read_parquet,
    write_bytes_atomically,
    write_parquet_atomically,
)
from transforms.token_documents import TokenizedDocument

INDEX_SUFFIX = ".index.parquet"
DATA_SUFFIX = ".bin"


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
