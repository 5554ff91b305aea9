"""Arrow's allocator in bertprep's processes: the command line picks the system allocator before
pyarrow is imported, workers inherit it, and a user's own choice is kept."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.runtime.arrow_memory import ARROW_POOL_ENV

ROOT = Path(__file__).resolve().parents[3]
PROBE = """
from pipeline import cli
try:
    cli.main(["clean", "--help"])
except SystemExit:
    pass
import os, subprocess, sys
import pyarrow as pa
child = subprocess.run(
    [sys.executable, "-c", "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"],
    capture_output=True, text=True, check=True,
).stdout.strip()
print(pa.default_memory_pool().backend_name, child)
"""


def pools(env_value: str | None) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k != ARROW_POOL_ENV}
    if env_value is not None:
        env[ARROW_POOL_ENV] = env_value
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()[-2:]


def test_the_command_line_and_its_children_use_the_system_allocator():
    assert pools(None) == ["system", "system"]


def test_a_pool_the_user_chose_is_kept():
    import pyarrow as pa

    if "jemalloc" not in pa.supported_memory_backends():
        pytest.skip("this pyarrow has no jemalloc")
    assert pools("jemalloc") == ["jemalloc", "jemalloc"]
