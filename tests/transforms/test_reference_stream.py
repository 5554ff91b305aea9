"""The replayed stream is Python's ``random.Random``, call for call and word for word."""

from __future__ import annotations

import random

import numpy as np
import pytest

from transforms.reference_stream import (
    python_random,
    rand_below,
    rand_int,
    random_float,
    shuffle_in_place,
    shuffled_range,
    stream_state,
)


def same_state(state: np.ndarray, rng: random.Random) -> bool:
    return bool((state == stream_state(rng)).all())


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**40 + 7])
def test_random_float_is_random_random(seed):
    state, rng = stream_state(seed), random.Random(seed)
    assert [random_float(state) for _ in range(3000)] == [rng.random() for _ in range(3000)]
    assert same_state(state, rng)  # 6,000 words: the state twisted several times


@pytest.mark.parametrize(
    ("a", "b"),
    [(0, 0), (0, 1), (1, 1), (2, 125), (0, 6), (0, 7), (0, 8), (0, 30521), (0, 2**31 - 1)],
)
def test_rand_int_is_randint_including_one_value_ranges_and_powers_of_two(a, b):
    """``randint(0, 0)`` still takes a word per call; bounds at powers of two reject half."""
    state, rng = stream_state(7), random.Random(7)
    assert [rand_int(state, a, b) for _ in range(2000)] == [rng.randint(a, b) for _ in range(2000)]
    assert same_state(state, rng)


def test_rand_below_takes_one_word_per_try():
    state, rng = stream_state(3), random.Random(3)
    for n in range(1, 600):
        assert rand_below(state, n) == rng._randbelow(n)
    assert same_state(state, rng)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 125, 509, 4096])
def test_shuffle_is_random_shuffle(n):
    state, rng = stream_state(12345), random.Random(12345)
    expected = list(range(n))
    rng.shuffle(expected)
    assert shuffled_range(state, n).tolist() == expected
    assert same_state(state, rng)
    items = np.arange(100, 100 + n)
    shuffle_in_place(state, items)
    again = list(range(100, 100 + n))
    rng.shuffle(again)
    assert items.tolist() == again


def test_interleaved_calls_stay_in_step():
    """The reference mixes every kind of draw; one stream serves them all in order."""
    state, rng = stream_state(99), random.Random(99)
    for step in range(500):
        if step % 3 == 0:
            assert random_float(state) == rng.random()
        elif step % 3 == 1:
            assert rand_int(state, 1, step + 1) == rng.randint(1, step + 1)
        else:
            x = list(range(step % 40))
            rng.shuffle(x)
            assert shuffled_range(state, step % 40).tolist() == x
    assert same_state(state, rng)


def test_state_round_trips_through_python_random():
    state = stream_state(5)
    for _ in range(700):
        random_float(state)
    rng = python_random(state)
    assert [rng.random() for _ in range(10)] == [random_float(state) for _ in range(10)]
    assert stream_state(random.Random(5)).shape == (625,)
