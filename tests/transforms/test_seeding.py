"""Stable seeds (transforms.seeding)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from transforms.seeding import numpy_rng, python_rng, stable_hash64, stable_hasher

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ((12345, "pairs", 0, 0), 2332320968952250357),
        ((7, "masks", 3, 1), 5042381194590655538),
        ((), 13020603013274838756),
        (("a",), 9816344630786247503),
        ((("x", 1),), 10413505669469291444),
    ],
)
def test_stable_hash64_pinned_values(parts, expected):
    # Pinned: changing the hash changes every output of every run (and breaks resumption).
    assert stable_hash64(*parts) == expected


@pytest.mark.parametrize("split", [0, 1, 2, 4])
def test_a_hasher_with_its_prefix_hashed_once_gives_the_same_hashes(split):
    for parts in [(12345, "pairs", 0, 0), (7, "bucket", "doc-é\n'\"", ("x", 1)), ()]:
        if split <= len(parts):
            hasher = stable_hasher(*parts[:split])
            assert hasher(*parts[split:]) == stable_hash64(*parts)
            assert hasher(*parts[split:]) == stable_hash64(*parts)  # the prefix state is reused
    bucket = stable_hasher(99, "bucket")
    keys = [f"wiki/{i}" for i in range(500)]
    assert [bucket(k) for k in keys] == [stable_hash64(99, "bucket", k) for k in keys]


def test_stable_hash64_is_64_bit_unsigned():
    values = [stable_hash64(i, "x") for i in range(2000)]
    assert all(isinstance(v, int) and 0 <= v < 2**64 for v in values)
    assert len(set(values)) == len(values)
    assert max(values) >= 2**63  # uses the top bit


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ((12345, "pairs", 0, 0), (12345, "masks", 0, 0)),
        ((12345, "pairs", 0, 0), (12345, "pairs", 0, 1)),
        ((12345, "pairs", 0, 0), (12345, "pairs", 1, 0)),
        ((12345, "pairs", 0, 0), (12346, "pairs", 0, 0)),
        ((1,), ("1",)),  # repr distinguishes int from str
        (("ab",), ("a", "b")),  # length-prefixed: no concatenation ambiguity
        (("a", "b"), ("b", "a")),
        (((1, 2),), (1, 2)),
        ((), ("",)),
        ((1, 2), (12,)),
    ],
)
def test_stable_hash64_different_parts_differ(left, right):
    assert stable_hash64(*left) != stable_hash64(*right)


def test_python_rng_is_seeded_from_the_hash():
    a, b = python_rng(12345, "pairs", 0, 0), python_rng(12345, "pairs", 0, 0)
    assert [a.random() for _ in range(5)] == [b.random() for _ in range(5)]
    assert python_rng(12345, "pairs", 0, 0).random() == 0.9223999568307969
    assert python_rng(1, "pairs").random() != python_rng(2, "pairs").random()


def test_numpy_rng_is_seeded_from_the_hash():
    a, b = numpy_rng(12345, "masks", 0, 0), numpy_rng(12345, "masks", 0, 0)
    assert np.array_equal(a.random(10), b.random(10))
    assert numpy_rng(12345, "masks", 0, 0).integers(0, 2**31, size=3).tolist() == [
        278424704,
        1093088966,
        1708472341,
    ]
    assert isinstance(numpy_rng(1).bit_generator, np.random.PCG64)
    assert not np.array_equal(numpy_rng(1, "m").random(4), numpy_rng(1, "n").random(4))


def test_stable_hash64_same_in_another_process_with_other_hash_seed():
    code = (
        "from transforms.seeding import stable_hash64; print(stable_hash64(12345, 'pairs', 0, 0))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "987", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert int(out.stdout) == 2332320968952250357
