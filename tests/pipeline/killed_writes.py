"""Leaving real litter: a writer process killed (SIGKILL) in the middle of an atomic write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_WRITER = textwrap.dedent(
    """
    import os, signal, sys
    import pyarrow as pa
    from pipeline.files.artifacts import ParquetPart, TextPart

    kind, path = sys.argv[1], sys.argv[2]
    if kind == "parquet":
        part = ParquetPart(path, pa.schema([("doc_id", pa.string())]))
        part.write([{"doc_id": "half"}])
        part._file.flush()
    else:
        part = TextPart(path)
        part.write("half a line")
        part._file.flush()
    os.kill(os.getpid(), signal.SIGKILL)  # killed during the write: never committed
    """
)


def killed_write(path: Path, kind: str = "text") -> Path:
    """Starts a process that writes ``path`` atomically (``ParquetPart`` for ``kind="parquet"``,
    else ``TextPart``) and is killed with SIGKILL half way; returns the ``*.partial-*`` file it
    left beside ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    before = set(path.parent.iterdir())
    done = subprocess.run(
        [sys.executable, "-c", _WRITER, kind, str(path)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    (left,) = set(path.parent.iterdir()) - before
    assert ".partial-" in left.name and left.stat().st_size > 0
    return left


def beam_temp_dir(directory: Path, files: int = 1) -> Path:
    """A Beam file sink's temporary directory as a killed job leaves it (with ``files`` files)."""
    temp = directory / "beam-temp-rejects-0123456789abcdef"
    temp.mkdir(parents=True)
    for i in range(files):
        (temp / f"part-{i}").write_text("{}\n")
    return temp
