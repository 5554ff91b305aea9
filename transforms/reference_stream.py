"""Python's ``random.Random`` stream, replayed in compiled code: the draws of google-research/bert.

``create_pretraining_data.py`` makes every random choice with one ``random.Random(seed)``. To
write its instances value for value, ``--compat reference`` must consume that generator's raw
32-bit Mersenne Twister outputs exactly as CPython 3's ``random`` module does, call for call, but
without a Python call per draw. The rules (CPython 3.2+, ``Modules/_randommodule.c`` and
``Lib/random.py``; unchanged through 3.13):

- the generator is MT19937; ``random.Random(seed).getstate()[1]`` holds its 624 state words and
  the index of the next word (``STATE_WORDS`` + 1 values), which ``stream_state`` copies;
- ``random()`` takes two words ``a``, ``b``: ``((a >> 5) * 2**26 + (b >> 6)) / 2**53``;
- ``getrandbits(k)`` for 0 < k <= 32 is one word shifted right by ``32 - k``;
- ``_randbelow(n)`` draws ``getrandbits(n.bit_length())`` until the value is below ``n`` (so
  ``n = 1`` still takes one word per try); ``randint(a, b)`` is ``a + _randbelow(b - a + 1)``;
- ``shuffle(x)`` swaps ``x[i]`` with ``x[_randbelow(i + 1)]`` for ``i`` from ``len(x) - 1``
  down to 1 (``len(x) - 1`` draws, none for fewer than two items).

(Python 2's ``shuffle`` and ``randint`` used ``random()`` and give other values: the mode
reproduces the reference run by Python 3.) The state is a ``uint64[625]`` array mutated in
place: words 0-623 the MT state, word 624 the index of the next output. Every function here is a
numba ``njit`` kernel, callable from other kernels and from Python alike.
"""

from __future__ import annotations

import random

import numba
import numpy as np

STATE_WORDS = 624
_M = 397
_MATRIX_A = 0x9908B0DF
_UPPER = 0x80000000
_LOWER = 0x7FFFFFFF
_WORD = 0xFFFFFFFF
MAX_BOUND = 1 << 32
"""``_randbelow`` bounds must be below this (one 32-bit word per try, as CPython draws them)."""


def stream_state(seed: int | random.Random) -> np.ndarray:
    """The state array of ``random.Random(seed)`` (or of that generator as it is now)."""
    rng = seed if isinstance(seed, random.Random) else random.Random(seed)
    version, internal, _gauss = rng.getstate()
    if version != 3 or len(internal) != STATE_WORDS + 1:
        raise ValueError(f"unexpected random.Random state layout (version {version})")
    return np.array(internal, dtype=np.uint64)


def python_random(state: np.ndarray) -> random.Random:
    """A ``random.Random`` positioned where ``state`` is (for tests and hand-offs)."""
    rng = random.Random()
    rng.setstate((3, tuple(int(w) for w in state), None))
    return rng


@numba.njit(cache=True)
def _twist(state: np.ndarray) -> None:
    for k in range(STATE_WORDS):
        y = (state[k] & _UPPER) | (state[(k + 1) % STATE_WORDS] & _LOWER)
        value = state[(k + _M) % STATE_WORDS] ^ (y >> 1)
        if y & 1:
            value ^= _MATRIX_A
        state[k] = value
    state[STATE_WORDS] = 0


@numba.njit(cache=True)
def next_word(state: np.ndarray) -> np.uint64:
    """The generator's next tempered 32-bit output."""
    if state[STATE_WORDS] >= STATE_WORDS:
        _twist(state)
    i = state[STATE_WORDS]
    y = state[i]
    state[STATE_WORDS] = i + 1
    y ^= y >> 11
    y ^= (y << 7) & 0x9D2C5680
    y ^= (y << 15) & 0xEFC60000
    y ^= y >> 18
    return y & _WORD


@numba.njit(cache=True)
def random_float(state: np.ndarray) -> float:
    """``random.random()``: a float in [0, 1) from two words."""
    a = next_word(state) >> 5
    b = next_word(state) >> 6
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True)
def rand_below(state: np.ndarray, n: int) -> int:
    """``random._randbelow(n)`` for 1 <= n < 2**32: uniform in [0, n), by rejection."""
    k = 0
    while (n >> k) != 0:
        k += 1
    shift = 32 - k
    r = np.int64(next_word(state) >> shift)
    while r >= n:
        r = np.int64(next_word(state) >> shift)
    return r


@numba.njit(cache=True)
def rand_int(state: np.ndarray, a: int, b: int) -> int:
    """``random.randint(a, b)``: uniform in [a, b] (b >= a)."""
    return a + rand_below(state, b - a + 1)


@numba.njit(cache=True)
def shuffle_in_place(state: np.ndarray, x: np.ndarray) -> None:
    """``random.shuffle(x)`` on a 1-D array."""
    for i in range(len(x) - 1, 0, -1):
        j = rand_below(state, i + 1)
        t = x[i]
        x[i] = x[j]
        x[j] = t


@numba.njit(cache=True)
def shuffled_range(state: np.ndarray, n: int) -> np.ndarray:
    """``x = list(range(n)); random.shuffle(x)`` as an int64 array: where each position's item
    came from (the permutation ``shuffle`` applies to any list of ``n`` items)."""
    x = np.arange(n)
    shuffle_in_place(state, x)
    return x
