"""The kernel warm-up: it runs every phase kernel and leaves numba's cache files beside them."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_warm_up_compiles_every_kernel_into_the_cache(tmp_path):
    copy = tmp_path / "transforms"
    shutil.copytree(ROOT / "transforms", copy, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-m", "transforms.kernel_cache"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    cached = {p.name.split(".")[0] for p in (copy / "__pycache__").glob("*.nbi")}
    assert {
        "framed_examples",
        "static_rows",
        "pair_spans",
        "token_documents",
        "compact_columns",
    } <= cached


def test_an_unknown_kernel_group_is_refused():
    from transforms.kernel_cache import warm

    with pytest.raises(ValueError, match="unknown kernel group"):
        warm(("phases", "tokenizer"))
