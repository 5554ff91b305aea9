"""Key tables for duplicate detection: locations, exact groups, LSH band candidates."""

from __future__ import annotations

import random

import numpy as np
import pytest

from transforms import duplicate_keys as dk
from transforms import near_duplicates as nd


def test_location_round_trip_and_limits():
    for unit, chunk, row in [(0, 0, 0), (7, 3, 65535), (123456, 65535, 1)]:
        loc = dk.location(unit, chunk, row)
        assert dk.chunk_of(loc) == (unit, chunk) and dk.row_of(loc) == row
    with pytest.raises(ValueError):
        dk.location(0, 0, 1 << 16)
    with pytest.raises(ValueError):
        dk.location(0, 1 << 16, 0)


def test_exact_duplicates_keep_the_smallest_id_whatever_the_table_order():
    h1, h2, h3 = (bytes([i]) * 16 for i in (1, 2, 3))
    tables = [
        dk.ExactKeys([h1, h2], ["b/2", "a/9"], [10, 11]),
        dk.ExactKeys([h1, h3, h1], ["a/1", "c/3", "z/0"], [20, 21, 22]),
        dk.ExactKeys([h2], ["a/8"], [30]),
    ]
    expected = [(10, "b/2", "a/1"), (22, "z/0", "a/1"), (11, "a/9", "a/8")]
    assert dk.exact_duplicates(tables) == expected
    for _ in range(5):
        shuffled = random.sample(tables, len(tables))
        packed = [dk.ExactKeys.from_bytes(t.to_bytes()) for t in shuffled]
        assert dk.exact_duplicates(packed) == expected


def test_hash_bytes_and_partitions():
    assert dk.hash_bytes("00ff" * 16) == bytes.fromhex("00ff" * 8)
    assert len(dk.hash_bytes("not hex")) == 16
    assert 0 <= dk.partition_of_hash(b"\xff" * 16, 16) < 16


def test_band_hashes_agree_with_the_band_keys_of_near_duplicates():
    signature = nd.minhash_signature("the keeper wrote about the lamp and the fog " * 5)
    hashes = dk.band_hashes(signature, nd.ROWS_PER_BAND)
    keys = nd.band_keys(signature)
    assert len(hashes) == len(keys) == nd.NUM_PERMUTATIONS // nd.ROWS_PER_BAND
    for i, (h, key) in enumerate(zip(hashes.tolist(), keys, strict=True)):
        assert key == f"{i}:{int(h).to_bytes(8, 'little').hex()}"


def test_candidate_pairs_are_the_locations_sharing_a_band_hash():
    a = dk.pack_band(np.array([5, 7, 5], np.uint64), np.array([100, 101, 102], np.int64))
    b = dk.pack_band(np.array([7, 9, 5], np.uint64), np.array([200, 201, 202], np.int64))
    pairs = dk.candidate_pairs([b, a]).tolist()
    assert pairs == [[100, 102], [100, 202], [101, 200], [102, 202]]
    assert dk.candidate_pairs([]).shape == (0, 2)
    lone = dk.pack_band(np.array([1, 2], np.uint64), np.array([1, 2], np.int64))
    assert dk.candidate_pairs([lone]).shape == (0, 2)


def test_documents_without_words_share_no_band_bucket():
    """All-max signatures (no words) would all share every band: their unique band hashes make
    no candidate pair, while documents with equal signatures still pair in every band."""
    empty = nd.minhash_signature("!!! ... ???")
    assert not nd.has_shingles(empty) and nd.has_shingles(nd.minhash_signature("one two"))
    locations = dk.chunk_locations(3, 1, 500)
    for band in range(nd.NUM_BANDS):
        hashes = np.array(
            [dk.unique_band_hashes(int(loc), nd.NUM_BANDS)[band] for loc in locations]
        )
        assert len(dk.candidate_pairs([dk.pack_band(hashes, locations)])) == 0
    table = np.stack([dk.unique_band_hashes(int(loc), nd.NUM_BANDS) for loc in locations])
    assert len(np.unique(table)) == table.size
    same = dk.band_hashes(nd.minhash_signature("one two three four five six"), nd.ROWS_PER_BAND)
    pair = dk.candidate_pairs([dk.pack_band(np.array([same[0], same[0]]), locations[:2])])
    assert pair.tolist() == [[int(locations[0]), int(locations[1])]]
