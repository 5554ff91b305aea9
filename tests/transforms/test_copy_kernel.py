"""The compiled element copy: what slice assignment gives, for every dtype the kernels copy,
checked ranges, overlapping ranges as ``memmove`` copies them, mismatched arrays refused."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from transforms.copy_kernel import copy_elements


@numba.njit(cache=False)
def copy_all(dst, src, dst_starts, src_starts, counts):
    for k in range(len(counts)):
        copy_elements(dst, dst_starts[k], src, src_starts[k], counts[k])


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64, np.float32])
def test_copies_equal_slice_assignment(dtype):
    rng = np.random.default_rng(4)
    src = rng.integers(0, 100, 5000).astype(dtype)
    dst = np.zeros(6000, dtype=dtype)
    expected = dst.copy()
    counts = rng.integers(0, 300, 40)
    src_starts = rng.integers(0, len(src) - 300, 40)
    dst_starts = rng.integers(0, len(dst) - 300, 40)
    for i, j, n in zip(dst_starts, src_starts, counts, strict=True):
        expected[i : i + n] = src[j : j + n]
    copy_all(dst, src, dst_starts, src_starts, counts)
    assert np.array_equal(dst, expected)


@pytest.mark.parametrize(
    ("dst_start", "src_start", "count"),
    [(-1, 0, 4), (0, -1, 4), (0, 0, -1), (7, 0, 4), (0, 7, 4), (0, 0, 11), (1, 1, 2**63 - 1)],
)
def test_a_range_outside_its_array_is_refused(dst_start, src_start, count):
    dst, src = np.zeros(10, np.uint8), np.arange(10, dtype=np.uint8)
    with pytest.raises(IndexError, match="outside its array"):
        copy_all(dst, src, np.array([dst_start]), np.array([src_start]), np.array([count]))
    assert not dst.any()


def test_overlapping_ranges_are_copied_as_by_memmove():
    a = np.arange(20, dtype=np.int32)
    expected = a.copy()
    expected[5:15] = a[2:12].copy()
    copy_all(a, a, np.array([5]), np.array([2]), np.array([10]))
    assert np.array_equal(a, expected)


def test_arrays_of_different_dtypes_are_refused():
    with pytest.raises(numba.TypingError):
        copy_all(np.zeros(4, np.int32), np.zeros(4, np.int64), *(np.array([0]),) * 2, np.array([1]))
