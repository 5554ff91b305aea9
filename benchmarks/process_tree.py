"""Wall time and peak resident memory of a command and all its descendants (Linux /proc)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(x) for x in f.read().split())
    except OSError:
        pass
    return out


def _kib_field(path: str, name: str) -> int:
    """The ``name`` line of a /proc file that gives sizes in kB, in bytes (0 when gone)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _rss_bytes(pid: int) -> int:
    return _kib_field(f"/proc/{pid}/status", "VmRSS:")


def _tree(root: int) -> list[int]:
    found, stack, seen = [], [root], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        found.append(pid)
        stack.extend(_children(pid))
    return found


def tree_pss_bytes(root: int) -> int:
    """Sum of the proportional set size over ``root`` and every descendant: pages shared by
    several processes of the tree (the worker zygote's imports in its forked workers) counted
    once in all, where the RSS sum counts them in every process."""
    return sum(_kib_field(f"/proc/{pid}/smaps_rollup", "Pss:") for pid in _tree(root))


def tree_rss_bytes(root: int) -> int:
    """Sum of VmRSS over ``root`` and every descendant process."""
    return sum(_rss_bytes(pid) for pid in _tree(root))


@dataclass
class Measurement:
    returncode: int
    wall_seconds: float
    peak_rss_bytes: int
    output: str
    peak_pss_bytes: int = 0


def measure(
    cmd: list[str],
    env: dict | None = None,
    interval_s: float = 0.1,
    cwd: Path | None = None,
    memory: str = "all",
) -> Measurement:
    """Runs ``cmd`` until its main process exits, sampling the process tree's total RSS and PSS
    (``memory="all"``), its RSS alone (``"rss"``) or nothing (``"none"``) every ``interval_s``
    seconds. Output goes to a temporary file, not a pipe, so helper processes that outlive the
    main one (Beam's worker pool shutting down) do not extend the measured time.

    Sampling is not free: PSS comes from each process's ``smaps_rollup``, which walks all of its
    mappings (and takes their lock) every time. On a multi-process run of ``bertprep instances``
    (30 MB, 2 cores) the sampled wall time was 1.16× the unsampled one, RSS alone 1.05×: time a
    command unsampled and take its memory from a run of its own (``benchmarks/RESULTS.md``,
    2026-12-06, eighth stop)."""
    import tempfile

    if memory not in ("all", "rss", "none"):
        raise ValueError(f"memory must be all, rss or none, not {memory!r}")
    with tempfile.TemporaryFile(mode="w+") as log:
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env=env, text=True, cwd=cwd
        )
        peak = peak_pss = 0
        if memory == "none":
            proc.wait()
        while proc.poll() is None:
            peak = max(peak, tree_rss_bytes(proc.pid))
            if memory == "all":
                peak_pss = max(peak_pss, tree_pss_bytes(proc.pid))
            time.sleep(interval_s)
        wall = time.monotonic() - start
        log.seek(0)
        return Measurement(proc.returncode, wall, peak, log.read(), peak_pss)


def bertprep_command() -> list[str]:
    """The command that runs bertprep in this environment: its console script beside the
    interpreter when installed, else ``python -m pipeline.cli``."""
    exe = Path(sys.executable).parent / "bertprep"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pipeline.cli"]
