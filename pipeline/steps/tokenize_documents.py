"""Tokenizing documents of sentences into id documents, spilled to files on Beam workers.

The token ids go to one spill file per bundle; only a small ``DocumentRef`` per document travels
through Beam (to be grouped into buckets), so no runner has to hold the tokenized corpus in memory.
"""

from __future__ import annotations

import mmap
import os
import uuid
from dataclasses import dataclass

import apache_beam as beam
import numpy as np
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipeline.files.page_cache import is_local
from pipeline.runtime.counters import REJECTS_TAG, STATS_TAG, CountingDoFn
from tokenizer.vocab import Vocab
from tokenizer.wordpiece import BertWordPieceTokenizer
from transforms.bert_text import TextDocument
from transforms.instances import BucketLayout
from transforms.rejects import Reject
from transforms.token_documents import (
    DocumentSizeError,
    TokenizedDocument,
    copy_ranges,
    unpack_documents,
)


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

    def load(self) -> TokenizedDocument:
        return load_documents([self])[0]


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
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            src = np.frombuffer(mapped, dtype=np.uint8)
            try:
                copy_ranges(src, offsets, sizes, buf, positions)
            finally:
                del src  # the mapping closes only once no array views it


def _short_document(key: str, path: str, held: int, size: int) -> ValueError:
    return ValueError(f"document {key}: {path} holds {held} of its {size} bytes")


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
        self._tokenizer = worker_tokenizer(self._vocab, self._do_lower_case)

    def process(self, document: TextDocument):
        assert self._tokenizer is not None
        encoded = self._tokenizer.encode_batch(document.sentences)
        yield from self.emit(document.key, encoded, " / ".join(document.sentences))


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
