"""The output estimate and the data-following shard count, against the real pair and row makers
and the real record encoder (no Beam)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from transforms.features import DOC_SENTENCES, DYNAMIC, FULL_SENTENCES, SENTENCE_PAIRS, STATIC
from transforms.instances import (
    BucketLayout,
    PackConfig,
    PairConfig,
    create_packed_rows,
    create_pair_spans,
)
from transforms.output_size import (
    MIN_SHARDS,
    TARGET_SHARD_BYTES,
    DocumentSizes,
    default_shard_count,
    estimate_output,
    expected_instances,
    record_bytes,
    spill_record_bytes,
    text_document_sizes,
)
from transforms.seeding import python_rng


def random_layout(seed: int, documents: int, mean_sentences: float, mean_length: float):
    """Documents of random sentence counts and lengths (geometric-ish, as prose is)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for _ in range(documents):
        n = max(1, int(rng.poisson(mean_sentences)))
        lengths = np.maximum(1, rng.poisson(mean_length, size=n))
        offsets = np.concatenate(([0], np.cumsum(lengths)))
        arrays.append((np.ones(int(offsets[-1]), dtype=np.int32), offsets))
    layout = BucketLayout.from_arrays(arrays)
    sizes = DocumentSizes(
        np.array([int(o[-1]) for _, o in arrays]), np.array([len(o) - 1 for _, o in arrays])
    )
    return layout, sizes


@pytest.mark.parametrize("seq", [128, 512])
@pytest.mark.parametrize("documents,sentences,length", [(300, 20, 25), (300, 6, 18), (200, 80, 30)])
def test_expected_pairs_match_the_pair_maker(seq, documents, sentences, length):
    layout, sizes = random_layout(seq + documents + sentences, documents, sentences, length)
    stats: Counter[str] = Counter()
    cfg = PairConfig(max_seq_length=seq)
    made = 0
    for dupe in range(2):
        rng = python_rng(1, "pairs", 0, dupe)
        for d in range(len(layout)):
            made += sum(1 for _ in create_pair_spans(layout, d, cfg, rng, stats))
    expected = expected_instances(sizes, seq, dupe_factor=2)
    assert 0.75 <= expected / made <= 1.33, (expected, made)


@pytest.mark.parametrize("mode", [FULL_SENTENCES, DOC_SENTENCES])
@pytest.mark.parametrize("seq", [128, 512])
def test_expected_rows_match_the_row_packer(mode, seq):
    layout, sizes = random_layout(seq, 300, 12, 22)
    rows = sum(
        1
        for _ in create_packed_rows(
            layout, PackConfig(seq, cross_documents=mode == FULL_SENTENCES), Counter()
        )
    )
    expected = expected_instances(sizes, seq, dupe_factor=1, input_mode=mode)
    assert 0.75 <= expected / rows <= 1.33, (expected, rows)


def test_record_bytes_follow_the_feature_layout():
    static = record_bytes(128, 20, STATIC, SENTENCE_PAIRS, 30522)
    # A static seq128 record of the sample (3,000-id vocab) measures 821-832 bytes on disk.
    assert 780 <= static <= 900
    # 384 more slots of 4 one- or two-byte features, 60 more prediction slots.
    assert 2400 <= record_bytes(512, 80, STATIC, SENTENCE_PAIRS, 30522) <= 3000
    # Dynamic records carry word starts instead of the three prediction features.
    dynamic = record_bytes(128, 20, DYNAMIC, SENTENCE_PAIRS, 30522)
    assert dynamic < static
    assert record_bytes(128, 20, STATIC, FULL_SENTENCES, 30522) < static  # no NSP label
    # A vocab of under 128 ids encodes every id in one byte.
    assert record_bytes(128, 20, STATIC, SENTENCE_PAIRS, 100) == static - 128 - 20


def test_spilled_records_are_counted_as_compact_rows():
    """A full seq-128 row spills ~2 bytes per id plus its key: well under half its frame (the
    sample's records measure ~231 + 8 bytes against ~825 framed)."""
    static = spill_record_bytes(128, 20, STATIC, SENTENCE_PAIRS, 30522)
    assert 300 <= static <= 400 and static < 0.5 * record_bytes(
        128, 20, STATIC, SENTENCE_PAIRS, 30522
    )
    assert 1200 <= spill_record_bytes(512, 80, STATIC, SENTENCE_PAIRS, 30522) <= 1600
    # Ids of a vocab under 256 take one byte each, over 65,536 three, instead of two.
    assert spill_record_bytes(128, 20, STATIC, SENTENCE_PAIRS, 100) == static - 128 - 20
    assert spill_record_bytes(128, 20, STATIC, SENTENCE_PAIRS, 119547) == static + 128 + 20
    # Word starts vary within the row: a byte each, no runs.
    dynamic = spill_record_bytes(128, 20, DYNAMIC, SENTENCE_PAIRS, 30522)
    assert 2 * 128 + 128 < dynamic < 0.6 * record_bytes(128, 20, DYNAMIC, SENTENCE_PAIRS, 30522)


def test_estimate_adds_spills_and_token_spill():
    sizes = DocumentSizes(np.array([1000, 500]), np.array([40, 20]))
    kw = dict(
        max_seq_length=128,
        max_predictions_per_seq=20,
        dupe_factor=3,
        short_seq_prob=0.1,
        masking=STATIC,
        input_mode=SENTENCE_PAIRS,
        vocab_size=30522,
    )
    plain = estimate_output(sizes, **kw)
    assert plain.shard_bytes == pytest.approx(plain.instances * plain.record_bytes, rel=0.01)
    spilled = spill_record_bytes(128, 20, STATIC, SENTENCE_PAIRS, 30522)
    assert plain.spill_bytes == pytest.approx(plain.instances * spilled, rel=0.01)
    assert plain.total_bytes == plain.shard_bytes + plain.spill_bytes
    grouped = estimate_output(sizes, **kw, spill_groups=True, tokenized_here=True)
    assert grouped.spill_bytes == pytest.approx(2 * plain.spill_bytes, abs=2)
    assert grouped.token_spill_bytes == 4 * 1500 + 8 * (60 + 2)
    gzip = estimate_output(sizes, **kw, compression="gzip")
    assert gzip.shard_bytes < plain.shard_bytes and gzip.spill_bytes == plain.spill_bytes


def test_text_sizes_from_a_sample_of_the_head():
    doc = "\n".join(["a sentence of some twenty bytes."] * 4)
    sample = "\n\n".join([doc] * 10) + "\n"
    sizes = text_document_sizes(100_000, sample)
    per_doc = len(doc.encode()) + 2
    assert sizes.total_documents == pytest.approx(100_000 / per_doc, rel=0.02)
    assert sizes.total_tokens == pytest.approx(100_000 / 4.0)
    assert sizes.total_sentences == pytest.approx(4 * sizes.total_documents)
    assert text_document_sizes(0, sample).total_tokens == 0
    assert text_document_sizes(1000, "").total_documents == 0


def test_default_shard_count_follows_the_data():
    mib = 1 << 20
    small = default_shard_count(5.5 * mib, 6_800)  # the sample corpus at seq128, dupe 10
    assert small.num_shards == MIN_SHARDS
    assert "~5.5 MiB expected ÷ 128 MiB target = 1" in small.reason
    assert small.reason.startswith("16 shards:") and "floor 16" in small.reason
    assert default_shard_count(TARGET_SHARD_BYTES * 16, 10**6).num_shards == 16
    assert default_shard_count(TARGET_SHARD_BYTES * 16 + 1, 10**6).num_shards == 32
    big = default_shard_count(100e9, 10**8)  # 100 GB: 746 by size → 1,024
    assert big.num_shards == 1024 and "= 746" in big.reason
    # Too few instances for the floor: at least two expected per shard, a power of two.
    tiny = default_shard_count(9_000, 11)
    assert tiny.num_shards == 4 and "~11 instances expected" in tiny.reason
    assert default_shard_count(800, 1).num_shards == 1
    assert default_shard_count(0, 0).num_shards == 1
    assert default_shard_count(800, 1).reason.startswith("1 shard:")
