"""Stable seeds: every random choice derives from a hash of (run seed, stage, key), never global RNG."""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Callable

import numpy as np

DEFAULT_SEED = 12345
"""The run seed when none is given: every job, `bertprep run` and the trainer default to it."""


def _feed(h, parts: tuple) -> None:
    for p in parts:
        r = repr(p).encode("utf-8")
        h.update(len(r).to_bytes(4, "little"))
        h.update(r)


def stable_hash64(*parts: object) -> int:
    """A 64-bit unsigned hash of ``parts`` that is the same in every process, run and platform.

    Parts are rendered with ``repr`` (ints, strings, tuples of them) and joined unambiguously.
    """
    h = hashlib.blake2b(digest_size=8)
    _feed(h, parts)
    return int.from_bytes(h.digest(), "little")


@functools.lru_cache(maxsize=64)
def stable_hasher(*prefix: object) -> Callable[..., int]:
    """``f`` with ``f(*rest) == stable_hash64(*prefix, *rest)``, the prefix hashed once: for one
    hash per record under a fixed seed and purpose (``stable_hasher(seed, "bucket")(key)``);
    about 1.7× faster per call than ``stable_hash64`` with three parts. One hasher per prefix
    is kept (the parts must be hashable), so a per-record function can ask for it each call."""
    base = hashlib.blake2b(digest_size=8)
    _feed(base, prefix)

    def hash_with_prefix(*rest: object) -> int:
        h = base.copy()
        _feed(h, rest)
        return int.from_bytes(h.digest(), "little")

    return hash_with_prefix


def python_rng(*parts: object) -> random.Random:
    """A ``random.Random`` seeded from ``stable_hash64(*parts)``."""
    return random.Random(stable_hash64(*parts))


def numpy_rng(*parts: object) -> np.random.Generator:
    """A numpy PCG64 generator seeded from ``stable_hash64(*parts)``."""
    return np.random.default_rng(stable_hash64(*parts))
