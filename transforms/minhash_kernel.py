"""The MinHash minima of ``transforms.near_duplicates`` as one compiled loop.

Per owner (a document) and permutation ``(a, b)``: the minimum of ``(a*x + b) mod 2**64`` over
the owner's shingle hashes ``x``. numpy needs a 128-row temporary per chunk of values and a
``reduceat`` over it; this loop keeps one running minimum per permutation (1.8× faster measured,
2 M values). Imported on first use only, so a clean without near dedup never loads numba.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, boundscheck=False)
def lower_to_minima(
    values: np.ndarray, owners: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray
) -> None:
    """Lowers ``out[owner, p]`` to ``min((a[p] * x + b[p]) mod 2**64)`` over the ``values`` x of
    each owner; ``owners`` ascending, one per value; all uint64 but owners (int64)."""
    n = values.shape[0]
    start = 0
    while start < n:
        owner = owners[start]
        end = start
        while end < n and owners[end] == owner:
            end += 1
        row = out[owner]
        for p in range(a.shape[0]):
            ap = a[p]
            bp = b[p]
            low = row[p]
            for k in range(start, end):
                y = ap * values[k] + bp
                if y < low:
                    low = y
            row[p] = low
        start = end
