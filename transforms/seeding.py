"""Stable seeds: every random choice derives from a hash of (run seed, stage, key), never global RNG."""

from __future__ import annotations

import hashlib
import random

import numpy as np

DEFAULT_SEED = 12345
"""The run seed when none is given: every job, `bertprep run` and the trainer default to it."""


def stable_hash64(*parts: object) -> int:
    """A 64-bit unsigned hash of ``parts`` that is the same in every process, run and platform.

    Parts are rendered with ``repr`` (ints, strings, tuples of them) and joined unambiguously.
    """
    h = hashlib.blake2b(digest_size=8)
    for p in parts:
        r = repr(p).encode("utf-8")
        h.update(len(r).to_bytes(4, "little"))
        h.update(r)
    return int.from_bytes(h.digest(), "little")


def python_rng(*parts: object) -> random.Random:
    """A ``random.Random`` seeded from ``stable_hash64(*parts)``."""
    return random.Random(stable_hash64(*parts))


def numpy_rng(*parts: object) -> np.random.Generator:
    """A numpy PCG64 generator seeded from ``stable_hash64(*parts)``."""
    return np.random.default_rng(stable_hash64(*parts))
