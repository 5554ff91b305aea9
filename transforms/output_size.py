"""How many instances and bytes an instances job will write, before it runs, and the shard count
that follows from them.

The figures are estimates from document sizes (token and sentence counts, exact for token index
inputs, sampled for text) and the record layout (``transforms.features``); they are meant to be
within a factor of two of what a run writes (checked on the sample corpus at seq128 and seq512,
``tests/transforms/test_output_size.py`` and ``tests/pipeline/jobs/test_output_size_job.py``).

What a run writes before it deletes anything, all in its output directory:

- the token spill (text inputs only): every document's int32 ids and int64 sentence offsets;
- the task spills: every record as a compact row (``transforms.compact_columns``, about a third
  of its frame) plus its 8-byte shuffle key;
- with spill groups (object stores, or ``spill_groups: always``) the same bytes once more;
- the shards: every record framed (gzip: ``GZIP_RATIO`` of that).

The spills go only after the last shard is written, so the peak is the sum of all of them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from transforms.compact_columns import COMPACT_LENGTH_BYTES, compact_feature_bytes
from transforms.example_encoding import encode_examples
from transforms.features import DOC_SENTENCES, SENTENCE_PAIRS, features_of

FRAMING_BYTES = 16
"""TFRecord framing per record: 8-byte length, two 4-byte CRCs."""
SPILL_KEY_BYTES = 8
"""The int64 shuffle key stored beside each record in a task spill (``transforms.shard_layout``)."""
TYPICAL_ID = (1 << 14) - 1
"""A token id that stands for a typical one: most ids of a 30k vocab's frequent pieces are below
2**14, so they take two varint bytes (ids of a vocab under 128 ids take one)."""
GZIP_RATIO = 0.25
"""Size of a gzip shard relative to the uncompressed stream (measured 0.28 on the sample corpus,
0.21 on Gutenberg books with BERT's uncased vocab, both at seq128)."""

RANDOM_NEXT_CONSUMPTION = 0.75
"""Share of a chunk a sentence pair consumes on average: the whole chunk when B is its rest
(half the pairs), only A (about half the chunk) when B is random: the rest goes back."""
DOCUMENT_END_INSTANCES = 0.75
"""Instances a document's last, partial chunk adds beyond its share of tokens: an end chunk whose
B is random gives its rest back, which makes another pair (about 1.5–1.75 per end, not 1). A
document that fits in one chunk is counted by its sentences instead (``_one_chunk_pairs``)."""
SHORT_DOCUMENT_SENTENCES = 512
"""Sentences up to which the pairs of a document that fits in one chunk are tabulated (the
expectation has converged long before)."""
SHORT_TARGET_POINTS = 16
"""Points of the uniform [2, max] short target length over which the instance count is averaged."""

BYTES_PER_TOKEN = 4.0
"""Bytes of UTF-8 English text per WordPiece token (measured 4.1–4.5 on the sample corpus and a
Gutenberg book, the sample's and BERT's uncased vocab): text inputs are counted with it."""
COMPRESSED_TEXT_RATIO = {".gz": 3.0, ".bz2": 4.0}
"""Text bytes per compressed byte assumed for compressed inputs (typical for English prose)."""

TARGET_SHARD_BYTES = 128 << 20
"""The shard size a data-following shard count aims at: 128 MiB. Large enough that a shard's
fixed costs (open, metadata, one object-store request per read) vanish, small enough that a
reader interleaves many shards and a retried shard writer redoes little."""
MIN_SHARDS = 16
"""The fewest shards a data-following count gives (unless the input is too small to fill them):
16 spreads evenly over a TPU slice of 1, 2, 4, 8 or 16 hosts, and counts above it are powers of
two too, so every host of a power-of-two slice reads the same number of shards."""
MIN_RECORDS_PER_SHARD = 2
"""A small input gets at most (expected instances ÷ this) shards, so that an estimate up to that
factor too high still leaves no shard empty."""


@dataclass(frozen=True)
class DocumentSizes:
    """Token and sentence counts per document; ``copies``: how many documents each entry stands
    for (1 for exact counts, many for a sampled text input)."""

    tokens: np.ndarray
    sentences: np.ndarray
    copies: float = 1.0

    @property
    def total_tokens(self) -> float:
        return float(np.asarray(self.tokens, dtype=np.float64).sum() * self.copies)

    @property
    def total_sentences(self) -> float:
        return float(np.asarray(self.sentences, dtype=np.float64).sum() * self.copies)

    @property
    def total_documents(self) -> float:
        return len(self.tokens) * self.copies


def text_document_sizes(text_bytes: float, sample: str) -> DocumentSizes:
    """Documents of BERT-format text (a sentence per line, a blank line between documents) of
    ``text_bytes`` bytes in all, shaped like ``sample`` (the head of an input): as many equal
    documents as the sample's bytes per document give, ``BYTES_PER_TOKEN`` bytes per token."""
    blocks = [b for b in sample.replace("\r\n", "\n").split("\n\n") if b.strip()]
    if not blocks or text_bytes <= 0:
        return DocumentSizes(np.zeros(0), np.zeros(0))
    sample_bytes = sum(len(b.encode("utf-8")) for b in blocks)
    lines = sum(1 for b in blocks for line in b.split("\n") if line.strip())
    documents = max(1.0, text_bytes * len(blocks) / sample_bytes)
    tokens = text_bytes / BYTES_PER_TOKEN / documents
    sentences = max(1.0, lines / len(blocks))
    return DocumentSizes(np.array([tokens]), np.array([sentences]), copies=documents)


@functools.lru_cache(maxsize=1)
def _one_chunk_pairs() -> np.ndarray:
    """``[k]``: expected pairs from a document of ``k`` sentences that fits in one chunk: the
    chunk makes a pair; when its B is random (half the time, always for one sentence) the
    sentences after A (a uniform 1..k-1 of them) go back and make a chunk of their own."""
    table = np.zeros(SHORT_DOCUMENT_SENTENCES + 1)
    table[1] = 1.0
    for k in range(2, SHORT_DOCUMENT_SENTENCES + 1):
        table[k] = 1.0 + 0.5 * table[1:k].mean()
    return table


def _per_document_pairs(
    tokens: np.ndarray, sentences: np.ndarray, mean_sentence: np.ndarray, target: float
) -> np.ndarray:
    """Expected pairs of one pass over each document when its target length is ``target``."""
    chunk = np.maximum(target + mean_sentence / 2, mean_sentence)  # overshoot: half a sentence
    long = tokens / (RANDOM_NEXT_CONSUMPTION * chunk) + DOCUMENT_END_INSTANCES
    short = _one_chunk_pairs()[np.clip(np.rint(sentences), 1, SHORT_DOCUMENT_SENTENCES).astype(int)]
    return np.where(tokens <= chunk, short, np.maximum(long, short))


def expected_instances(
    documents: DocumentSizes,
    max_seq_length: int,
    dupe_factor: int,
    short_seq_prob: float = 0.1,
    input_mode: str = SENTENCE_PAIRS,
) -> float:
    """Instances ``dupe_factor`` passes over ``documents`` are expected to give.

    Sentence pairs: per document, tokens ÷ (``RANDOM_NEXT_CONSUMPTION`` × chunk) plus
    ``DOCUMENT_END_INSTANCES``, at most one per sentence, the chunk being the target length (with
    ``short_seq_prob`` a uniform one in [2, max]) plus half a sentence. Packed rows: tokens (and
    document separators) ÷ the row's room less half a sentence, a partial row per document when
    rows stay in their document.
    """
    tokens = np.asarray(documents.tokens, dtype=np.float64)
    sentences = np.maximum(np.asarray(documents.sentences, dtype=np.float64), 1.0)
    if tokens.size == 0:
        return 0.0
    mean_sentence = tokens / sentences
    if input_mode == SENTENCE_PAIRS:
        room = max_seq_length - 3
        full = _per_document_pairs(tokens, sentences, mean_sentence, room)
        points = 2 + (np.arange(SHORT_TARGET_POINTS) + 0.5) / SHORT_TARGET_POINTS * (room - 2)
        short = np.mean(
            [_per_document_pairs(tokens, sentences, mean_sentence, t) for t in points], axis=0
        )
        per_document = np.minimum(sentences, (1 - short_seq_prob) * full + short_seq_prob * short)
    else:
        room = max_seq_length - 2
        usable = np.maximum(room - mean_sentence / 2, room / 2)
        if input_mode == DOC_SENTENCES:
            per_document = tokens / usable + 0.5
        else:
            per_document = (tokens + 1) / usable
    return float(per_document.sum() * documents.copies * dupe_factor)


def record_bytes(
    max_seq_length: int,
    max_predictions_per_seq: int,
    masking: str,
    input_mode: str,
    vocab_size: int,
) -> int:
    """Framed bytes of a typical record of this kind: every feature of ``features_of`` encoded as
    the writer encodes it, ids ``min(vocab_size - 1, TYPICAL_ID)``, positions mid-sequence, masks,
    segments and labels one byte, weights four."""
    token_id = max(0, min(vocab_size - 1, TYPICAL_ID))
    values = {
        "input_ids": token_id,
        "masked_lm_ids": token_id,
        "masked_lm_positions": max_seq_length // 2,
        "masked_lm_weights": 1.0,
    }
    ints, floats = {}, {}
    for f in features_of(masking, input_mode):
        shape = (1, f.length(max_seq_length, max_predictions_per_seq))
        value = values.get(f.name, 1)
        if f.dtype == "float32":
            floats[f.name] = np.full(shape, value, dtype=np.float32)
        else:
            ints[f.name] = np.full(shape, value, dtype=np.int64)
    return len(encode_examples(ints, floats)[0]) + FRAMING_BYTES


def spill_record_bytes(
    max_seq_length: int,
    max_predictions_per_seq: int,
    masking: str,
    input_mode: str,
    vocab_size: int,
) -> int:
    """Bytes of a typical record of this kind in a task spill: its compact row
    (``transforms.compact_columns``) and its shuffle key. The row is a full one: distinct ids up
    to the vocab's last (which sets the bytes per id), positions and word starts varying,
    segment B the second half, masks, labels and weights one."""
    top = max(1, vocab_size)
    total = COMPACT_LENGTH_BYTES + SPILL_KEY_BYTES
    for f in features_of(masking, input_mode):
        n = f.length(max_seq_length, max_predictions_per_seq)
        if f.name in ("input_ids", "masked_lm_ids"):
            values = top - 1 - np.arange(n) % top
        elif f.name == "masked_lm_positions":
            values = np.arange(1, n + 1) * (max_seq_length // max(1, n))
        elif f.name == "segment_ids":
            values = (np.arange(n) >= n // 2).astype(np.int64)
        elif f.name == "word_starts":
            values = (np.arange(n) % 3 != 1).astype(np.int64)
        elif f.dtype == "float32":
            values = np.ones(n, dtype=np.float32)
        else:
            values = np.ones(n, dtype=np.int64)
        total += compact_feature_bytes(values)
    return total


@dataclass(frozen=True)
class OutputEstimate:
    """What a run is expected to write, in records and bytes."""

    instances: int
    record_bytes: int
    """Framed bytes of one record."""
    shard_bytes: int
    spill_bytes: int
    """Task spills and, when merged into groups, their copies."""
    token_spill_bytes: int

    @property
    def total_bytes(self) -> int:
        """Everything written before the spills are deleted: the peak on disk."""
        return self.shard_bytes + self.spill_bytes + self.token_spill_bytes


def estimate_output(
    documents: DocumentSizes,
    *,
    max_seq_length: int,
    max_predictions_per_seq: int,
    dupe_factor: int,
    short_seq_prob: float,
    masking: str,
    input_mode: str,
    vocab_size: int,
    compression: str = "none",
    spill_groups: bool = False,
    tokenized_here: bool = False,
) -> OutputEstimate:
    """The expected output of one instances job (see the module docstring for what it counts);
    ``tokenized_here``: the job tokenizes its text inputs (and spills the ids)."""
    instances = expected_instances(
        documents, max_seq_length, dupe_factor, short_seq_prob, input_mode
    )
    framed = record_bytes(max_seq_length, max_predictions_per_seq, masking, input_mode, vocab_size)
    stream = instances * framed
    shards = stream * (GZIP_RATIO if compression == "gzip" else 1.0)
    spilled = spill_record_bytes(
        max_seq_length, max_predictions_per_seq, masking, input_mode, vocab_size
    )
    spills = instances * spilled * (2 if spill_groups else 1)
    token_spill = 0.0
    if tokenized_here:
        token_spill = 4 * documents.total_tokens + 8 * (
            documents.total_sentences + documents.total_documents
        )
    return OutputEstimate(
        instances=round(instances),
        record_bytes=framed,
        shard_bytes=round(shards),
        spill_bytes=round(spills),
        token_spill_bytes=round(token_spill),
    )


@dataclass(frozen=True)
class ShardCount:
    """A job's shard count and why it is that."""

    num_shards: int
    reason: str


def mebibytes(n: float) -> str:
    """``5.4 MiB``, ``0.017 MiB``, ``1,536 MiB``."""
    mib = n / (1 << 20)
    if mib >= 100:
        return f"{mib:,.0f} MiB"
    return f"{mib:.2g} MiB" if mib < 1 else f"{mib:.1f} MiB"


def shards_phrase(n: int) -> str:
    """``1 shard``, ``16 shards``."""
    return f"{n:,} shard" + ("" if n == 1 else "s")


def default_shard_count(expected_shard_bytes: float, expected_instances: float) -> ShardCount:
    """The shard count that follows the data: shards of at most ``TARGET_SHARD_BYTES`` expected,
    the count rounded up to a power of two and at least ``MIN_SHARDS``; fewer (a power of two)
    when fewer than ``MIN_RECORDS_PER_SHARD`` instances per shard are expected, so a small input
    leaves no shard empty."""
    by_size = max(1, math.ceil(expected_shard_bytes / TARGET_SHARD_BYTES))
    count = max(MIN_SHARDS, 1 << (by_size - 1).bit_length())
    target_mb = TARGET_SHARD_BYTES / (1 << 20)
    reason = (
        f"~{mebibytes(expected_shard_bytes)} expected ÷ {target_mb:g} MiB target = {by_size}, "
        f"rounded up to a power of two, floor {MIN_SHARDS}"
    )
    room = int(expected_instances // MIN_RECORDS_PER_SHARD)
    if room < count:
        count = 1 << max(0, room.bit_length() - 1) if room >= 1 else 1
        reason = (
            f"~{expected_instances:,.0f} instances expected, at least {MIN_RECORDS_PER_SHARD} "
            f"per shard, a power of two (below the floor of {MIN_SHARDS}: a small input)"
        )
    return ShardCount(count, f"{shards_phrase(count)}: {reason}")
