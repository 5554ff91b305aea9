"""Failures that explain themselves, for real: a ``bertprep run`` subprocess whose Beam worker is
killed with SIGKILL, one interrupted with SIGINT, one writing to a full disk (a 128 kB tmpfs). Each
ends with one line naming the stage (and the path or the worker's signal), no traceback unless
--verbose."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESUME = "rerun to resume, finished stages are kept"


def bertprep_run(out: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pipeline.cli", "run", "--set", f"output={out}", *args]


def env() -> dict[str, str]:
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


class Launched:
    """A ``bertprep run`` subprocess (its own process group) whose stderr lines are collected."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, reached, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not reached():
            assert self.proc.poll() is None, "\n".join(self.lines[-40:])
            assert time.monotonic() < deadline, "\n".join(self.lines[-40:])
            time.sleep(0.02)

    def finish(self, timeout: float = 120) -> tuple[int, list[str]]:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise
        self._reader.join(timeout)
        return code, self.lines


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def workers(pid: int) -> list[int]:
    """The Beam SDK worker processes the launcher ``pid`` started: its own children, or the
    children of its worker zygote (``pipeline.runtime.worker_zygote``)."""
    found = []
    for child in children(pid):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"sdk_worker_main" in cmdline:
            found.append(child)
        elif b"pipeline.runtime.worker_zygote" in cmdline:
            found.extend(children(child))
    return found


def assert_one_line(lines: list[str], pattern: str) -> re.Match:
    """Every line but the last is a progress line; the last matches ``pattern``."""
    assert not any("Traceback" in line for line in lines), "\n".join(lines)
    assert all(line.startswith("[bertprep run] ") for line in lines[:-1]), "\n".join(lines)
    match = re.fullmatch(pattern, lines[-1])
    assert match, "\n".join(lines[-5:])
    return match


@pytest.mark.parametrize("verbose", [False, True])
def test_a_killed_worker_is_one_line_naming_the_stage_and_signal(tmp_path, verbose):
    out = tmp_path / "out"
    flags = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    run = Launched(bertprep_run(out, *flags, *(["--verbose"] if verbose else [])))
    run.wait_for(lambda: (out / "clean" / ".staging").exists() and len(workers(run.proc.pid)) == 2)
    os.kill(workers(run.proc.pid)[0], signal.SIGKILL)
    code, lines = run.finish()
    assert code == 1
    line = (
        r"bertprep run: error: a Beam worker process died during stage (\S+) "
        rf"\(killed by signal 9, SIGKILL\); {RESUME}"
    )
    if verbose:
        assert any("Traceback" in line for line in lines)
        match = re.fullmatch(line, lines[-1])
        assert match, "\n".join(lines[-5:])
    else:
        match = assert_one_line(lines, line)
    stage = match.group(1)
    assert stage in ("clean", "split", "vocab", "tokenize")
    assert not (out / stage / "stage.json").exists()


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
@pytest.mark.usefixtures("python_sigint")
def test_an_interrupt_is_one_line_naming_the_stage_and_exit_130(tmp_path, mode):
    """SIGINT to the launcher (in_memory) or to its whole process group, as Ctrl-C sends it
    (multi_processing: the workers get it too)."""
    out = tmp_path / "out"
    run = Launched(bertprep_run(out, f"--direct_running_mode={mode}", "--direct_num_workers=2"))
    run.wait_for(lambda: any((out / "clean" / ".staging").glob("chunk-*.parquet")))
    if mode == "in_memory":
        os.kill(run.proc.pid, signal.SIGINT)
    else:
        os.killpg(run.proc.pid, signal.SIGINT)
    code, lines = run.finish()
    assert code == 130
    assert_one_line(lines, rf"bertprep run: interrupted during stage clean; {RESUME}")
    assert not (out / "clean" / "stage.json").exists()


def _tmpfs_run(disk: Path, size: str, *args: str) -> subprocess.CompletedProcess:
    """``bertprep run`` with ``disk`` a tmpfs of ``size``, mounted in a private mount namespace
    (``unshare``; as root or through a user namespace), gone when the command ends."""
    mount = f"mount -t tmpfs -o size={size} tmpfs {disk}"
    cmd = ["unshare", "--mount", "--map-root-user", "sh", "-c", f'{mount} && exec "$@"', "sh"]
    return subprocess.run(
        [*cmd, *args], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def can_mount_tmpfs(tmp_path_factory) -> None:
    if not shutil.which("unshare"):
        pytest.skip("no unshare(1) to mount a small tmpfs")
    disk = tmp_path_factory.mktemp("probe")
    probe = _tmpfs_run(disk, "64k", "dd", "if=/dev/zero", f"of={disk}/x", "bs=1k", "count=128")
    if "No space left on device" not in probe.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {probe.stderr.strip()[-300:]}")


@pytest.mark.parametrize("mode", ["in_memory", "multi_processing"])
def test_a_full_disk_is_one_line_naming_the_file(tmp_path, mode, can_mount_tmpfs):
    """A real ENOSPC: the output on a 128 kB tmpfs. In multi-process mode the error reaches the
    launcher only as text (Beam's RuntimeError carrying the worker's traceback)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    out = disk / "out"
    flags = [f"--direct_running_mode={mode}", "--direct_num_workers=2"]
    done = _tmpfs_run(disk, "128k", *bertprep_run(out, *flags))
    assert done.returncode == 1
    match = assert_one_line(
        done.stderr.splitlines(),
        rf"bertprep run: error: no space left on device \(writing ({re.escape(str(out))}/\S+)\) "
        rf"during stage clean; free space and {RESUME}",
    )
    assert match.group(1).startswith(f"{out}/clean/")
