"""Tokenizing many documents per tokenizer call on a Beam worker (``tokenize_documents``), where
tokenized documents lie in spill and token files (``RefTable``; ``DocumentRef`` for one), and
loading them back (``load_layout``; ``load_documents``, one document object each, is its readable
reference in the tests).

Token ids stay in files on the workers; only these small references travel through Beam (to be
grouped into buckets), so no runner has to hold the tokenized corpus in memory.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from itertools import chain

import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.page_cache import is_local
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.instances import BucketLayout
from transforms.token_documents import (
    DocumentSizeError,
    TokenizedDocument,
    copy_ranges,
    unpack_documents,
)

ENCODE_BATCH_SENTENCES = 32768
"""Sentences per tokenizer call: the fast path does Python work per distinct chunk of a call,
and larger calls repeat fewer (measured: 16k → 64k sentences per call, 1.3× less time)."""


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


def worker_tokenizer(vocab: Vocab, do_lower_case: bool) -> BertWordPieceTokenizer:
    """The tokenizer a Beam worker uses: Beam already runs one worker per core, so the
    tokenizer's own thread pool is turned off (it only adds contention: measured 3.3 MB/s per
    core without it, 2.5 with it)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    return BertWordPieceTokenizer(vocab, do_lower_case)


@dataclass(frozen=True)
class DocumentRef:
    """Where a tokenized document lies: ``size`` bytes at ``offset`` of the spill file ``path``."""

    key: str
    path: str
    offset: int
    size: int
    num_sentences: int


@dataclass(frozen=True)
class RefTable:
    """Many DocumentRefs as parallel arrays (one bytes-cheap object instead of one per document):
    document ``i`` is ``sizes[i]`` bytes at ``offsets[i]`` of ``paths[path_index[i]]``."""

    paths: tuple[str, ...]
    keys: tuple[str, ...]
    path_index: np.ndarray
    offsets: np.ndarray
    sizes: np.ndarray
    num_sentences: np.ndarray

    @classmethod
    def of_refs(cls, refs: list[DocumentRef]) -> RefTable:
        paths = tuple(sorted({r.path for r in refs}))
        at = {p: i for i, p in enumerate(paths)}
        return cls(
            paths,
            tuple(r.key for r in refs),
            np.array([at[r.path] for r in refs], dtype=np.int32),
            np.array([r.offset for r in refs], dtype=np.int64),
            np.array([r.size for r in refs], dtype=np.int64),
            np.array([r.num_sentences for r in refs], dtype=np.int64),
        )

    @classmethod
    def concat_sorted(cls, tables: list[RefTable]) -> RefTable:
        """All documents of ``tables``, ordered by key (so the result is independent of the order
        in which a runner delivered the tables)."""
        paths = tuple(sorted({p for t in tables for p in t.paths}))
        at = {p: i for i, p in enumerate(paths)}
        keys = [k for t in tables for k in t.keys]
        path_index = np.concatenate(
            [np.array([at[t.paths[i]] for i in t.path_index.tolist()], np.int32) for t in tables]
        )
        offsets = np.concatenate([t.offsets for t in tables])
        sizes = np.concatenate([t.sizes for t in tables])
        sentences = np.concatenate([t.num_sentences for t in tables])
        order = sorted(range(len(keys)), key=keys.__getitem__)
        return cls(
            paths,
            tuple(keys[i] for i in order),
            path_index[order],
            offsets[order],
            sizes[order],
            sentences[order],
        )

    def __len__(self) -> int:
        return len(self.keys)

    def refs(self) -> list[DocumentRef]:
        return [
            DocumentRef(key, self.paths[p], int(o), int(s), int(n))
            for key, p, o, s, n in zip(
                self.keys,
                self.path_index.tolist(),
                self.offsets.tolist(),
                self.sizes.tolist(),
                self.num_sentences.tolist(),
                strict=True,
            )
        ]


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


def load_layout(refs: RefTable) -> BucketLayout:
    """The documents of ``refs``, in table order, laid end to end as a ``BucketLayout`` (the
    same as ``BucketLayout.from_arrays`` over ``load_documents``). A local token file is mapped
    and its documents copied out by one compiled loop; a remote one is opened once and read front
    to back. The bytes are then unpacked by one compiled kernel."""
    sizes = np.asarray(refs.sizes, dtype=np.int64)
    positions = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    buf = np.empty(int(sizes.sum()), dtype=np.uint8)
    for index, path in enumerate(refs.paths):
        rows = np.flatnonzero(refs.path_index == index)
        rows = rows[np.argsort(refs.offsets[rows], kind="stable")]
        offsets = np.asarray(refs.offsets[rows], dtype=np.int64)
        if len(rows) and is_local(path):
            _copy_mapped(path, refs.keys, rows, offsets, sizes[rows], buf, positions[rows])
            continue
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            for i, offset, size, at in zip(
                rows.tolist(),
                offsets.tolist(),
                sizes[rows].tolist(),
                positions[rows].tolist(),
                strict=True,
            ):
                f.seek(offset)
                data = f.read(size)
                if len(data) != size:
                    raise _short_document(refs.keys[i], path, len(data), size)
                buf[at : at + size] = np.frombuffer(data, dtype=np.uint8)
    try:
        tokens, starts, lengths, bounds = unpack_documents(
            buf, positions, sizes, refs.num_sentences
        )
    except DocumentSizeError as e:
        raise ValueError(
            f"document {refs.keys[e.index]}: {e.size} bytes do not match its offsets"
        ) from None
    return BucketLayout(tokens, starts, lengths, bounds)


def _copy_mapped(path, keys, rows, offsets, sizes, buf, positions) -> None:
    """A local token file's documents ``rows`` (at ``offsets``, ``sizes`` bytes each) copied to
    ``positions`` of ``buf`` from a read-only mapping of the file: one compiled loop instead of
    a seek, read and copy per document (~15 µs each, ~1 s of a 100 MB run's phases)."""
    local = path[len("file://") :] if path.startswith("file://") else path
    with open(local, "rb") as f:
        length = os.fstat(f.fileno()).st_size
        short = np.flatnonzero(offsets + sizes > length)
        if len(short):
            i = short[0]
            held = max(0, length - int(offsets[i]))
            raise _short_document(keys[rows[i]], path, held, int(sizes[i]))
        if length == 0:
            return  # only empty documents (none holds a byte), and nothing to map
        # Not closed here: the mapping is unmapped once its last view is gone. A sampling
        # profiler (a Dask worker samples its threads' frames every 10 ms) can hold a frame of
        # ``copy_ranges``, and with it a view, for a moment after the call; an explicit close then
        # raises BufferError.
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        copy_ranges(np.frombuffer(mapped, dtype=np.uint8), offsets, sizes, buf, positions)


def _short_document(key: str, path: str, held: int, size: int) -> ValueError:
    return ValueError(f"document {key}: {path} holds {held} of its {size} bytes")
