"""The benchmarks' process-tree measurement: what each memory mode samples."""

from __future__ import annotations

import sys

import pytest

from benchmarks.process_tree import measure

HOLD_64MB = [sys.executable, "-c", "import time; x = bytearray(64 << 20); time.sleep(0.6)"]


def test_all_samples_rss_and_pss():
    m = measure(HOLD_64MB, memory="all")
    assert m.returncode == 0 and m.peak_rss_bytes > 64 << 20 and m.peak_pss_bytes > 64 << 20


def test_rss_samples_rss_alone():
    m = measure(HOLD_64MB, memory="rss")
    assert m.peak_rss_bytes > 64 << 20 and m.peak_pss_bytes == 0


def test_none_only_times():
    m = measure(HOLD_64MB, memory="none")
    assert m.returncode == 0 and m.wall_seconds >= 0.6
    assert m.peak_rss_bytes == m.peak_pss_bytes == 0


def test_an_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="memory must be"):
        measure(HOLD_64MB, memory="pss")
