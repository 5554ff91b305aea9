"""glibc's heap settings for bertprep's worker processes (``pipeline.runtime.worker_heap``): the
command line sets both thresholds for the processes it starts, a user's own setting is kept, and
glibc in a process started with them reuses large blocks instead of faulting in fresh pages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.runtime.worker_heap import (
    MMAP_THRESHOLD_BYTES,
    MMAP_THRESHOLD_ENV,
    TRIM_THRESHOLD_BYTES,
    TRIM_THRESHOLD_ENV,
    keep_large_blocks,
)

ROOT = Path(__file__).resolve().parents[3]
NAMES = (MMAP_THRESHOLD_ENV, TRIM_THRESHOLD_ENV)

CLI_PROBE = """
from pipeline import cli
try:
    cli.main(["clean", "--help"])
except SystemExit:
    pass
import subprocess, sys
code = "import os; print(os.environ.get('{}'), os.environ.get('{}'))"
print(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout)
""".format(*NAMES)

FAULT_PROBE = """
import resource
import numpy as np
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for size in range(1, 25):  # 1 .. 24 MB, each new one larger than every block freed before
    block = np.ones(size << 20, dtype=np.uint8)
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NAMES}
    env.update(values)
    env["PYTHONPATH"] = str(ROOT)
    return env


def child_output(code: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_both_thresholds_are_set_together(monkeypatch):
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    keep_large_blocks()
    assert os.environ[MMAP_THRESHOLD_ENV] == str(MMAP_THRESHOLD_BYTES) == str(32 << 20)
    assert os.environ[TRIM_THRESHOLD_ENV] == str(TRIM_THRESHOLD_BYTES)


@pytest.mark.parametrize("name", NAMES)
def test_a_threshold_the_user_set_keeps_both_as_the_user_left_them(monkeypatch, name):
    for other in NAMES:
        monkeypatch.delenv(other, raising=False)
    monkeypatch.setenv(name, "65536")
    keep_large_blocks()
    assert {n: os.environ.get(n) for n in NAMES} == {
        n: ("65536" if n == name else None) for n in NAMES
    }


def test_the_command_line_passes_them_to_the_processes_it_starts():
    expected = f"{MMAP_THRESHOLD_BYTES} {TRIM_THRESHOLD_BYTES}"
    assert child_output(CLI_PROBE, environment()).split("\n")[-1] == expected
    kept = environment(**{TRIM_THRESHOLD_ENV: "1048576"})
    assert child_output(CLI_PROBE, kept).split("\n")[-1] == "None 1048576"


def test_a_process_started_with_them_reuses_large_blocks():
    """Blocks of 1 to 24 MB, each freed before the next (300 MB in all): with the thresholds set
    they come from the heap, whose pages are faulted in once, as many as the largest block's.
    (By default each is a mapping of its own, faulted in afresh: 10k-15k faults here, fewer
    where the kernel backs them with huge pages, so that count is not asserted.)"""
    values = {
        MMAP_THRESHOLD_ENV: str(MMAP_THRESHOLD_BYTES),
        TRIM_THRESHOLD_ENV: str(TRIM_THRESHOLD_BYTES),
    }
    kept = int(child_output(FAULT_PROBE, environment(**values)))
    largest_block_pages = (24 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert kept < 1.1 * largest_block_pages, kept
