"""Multi-process SDK workers forked by the launcher's zygote (``pipeline.runtime.worker_zygote``,
``pipeline.runtime.worker_zygote.Zygote``): the same pipeline results and counters as workers
started from scratch, a fallback to new processes where forking would not give the same worker,
and a zygote that does not outlive its launcher. A forked worker killed by a signal is
``tests/pipeline/test_failures.py``'s (the one-line message naming the signal)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.metrics.metric import MetricsFilter

from pipeline.runtime import worker_zygote
from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.quiet import WORKER_SITE

ROOT = Path(__file__).resolve().parents[3]
MULTI = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


class RecordParent(beam.DoFn):
    """x → (x², the worker's pid, the worker's parent pid); counts what it saw."""

    def process(self, x):
        beam.metrics.Metrics.counter("zygote_test", "seen").inc()
        yield x * x, os.getpid(), os.getppid()


def run_squares(tmp_path: Path, n: int = 60) -> tuple[list, int]:
    out = tmp_path / "squares"
    out.mkdir(exist_ok=True)
    options = make_pipeline_options(MULTI)
    pipeline = beam.Pipeline(options=options)
    rows = (
        pipeline
        | beam.Create(range(n))
        | beam.Reshuffle()
        | beam.ParDo(RecordParent())
        | beam.Map(repr)
    )
    _ = rows | beam.io.WriteToText(str(out / "part"))
    result = pipeline.run()
    result.wait_until_finish()
    seen = result.metrics().query(MetricsFilter().with_name("seen"))["counters"]
    found = [eval(line) for p in out.glob("part*") for line in p.read_text().splitlines()]
    return found, sum(c.committed for c in seen)


def fresh_zygote() -> None:
    """Ends this process's zygote, if any: one started by an earlier test (of a command run in
    this process) may have been started under another PYTHONPATH."""
    if worker_zygote.Zygote._instance is not None:
        worker_zygote.Zygote._instance.close()
        worker_zygote.Zygote._instance = None


def test_workers_are_forked_by_the_zygote_and_give_the_same_results(tmp_path, monkeypatch):
    monkeypatch.delenv(worker_zygote.FORKED_WORKERS_ENV, raising=False)
    fresh_zygote()
    found, seen = run_squares(tmp_path)
    zygote = worker_zygote.Zygote.get()
    assert sorted(r[0] for r in found) == [x * x for x in range(60)]
    assert seen == 60
    parents = {r[2] for r in found}
    assert parents == {zygote.process.pid}, (parents, zygote.process.pid)
    assert os.getpid() not in {r[1] for r in found}


def test_turned_off_or_another_environment_starts_new_processes(tmp_path, monkeypatch):
    monkeypatch.setenv(worker_zygote.FORKED_WORKERS_ENV, "0")
    (tmp_path / "off").mkdir()
    found, seen = run_squares(tmp_path / "off")
    assert seen == 60 and sorted(r[0] for r in found) == [x * x for x in range(60)]
    assert {r[2] for r in found} == {os.getpid()}  # the launcher's children (via exec)

    monkeypatch.delenv(worker_zygote.FORKED_WORKERS_ENV)
    fresh_zygote()
    zygote = worker_zygote.Zygote.get()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.environ.get("PYTHONPATH", ""), "/x"]))
    (tmp_path / "other").mkdir()
    found, seen = run_squares(tmp_path / "other")
    assert seen == 60 and sorted(r[0] for r in found) == [x * x for x in range(60)]
    assert zygote.process.pid not in {r[2] for r in found}
    assert {r[2] for r in found} == {os.getpid()}


LAUNCHER = textwrap.dedent(
    """
    import os, sys, time
    from pipeline.runtime import worker_zygote
    zygote = worker_zygote.Zygote.get()
    assert "apache_beam" not in sys.modules  # the CLI starts it before it imports Beam
    assert zygote.usable_for(dict(os.environ), worker_zygote.default_worker_command())
    print(zygote.process.pid, flush=True)
    os._exit(0)  # no atexit handler runs: the zygote sees its stdin close
    """
)


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def test_the_zygote_ends_with_its_launcher_which_needs_no_beam_to_start_it(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([WORKER_SITE, str(ROOT)]))
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHER], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 20
    while Path(f"/proc/{pid}").exists() and state(pid) not in ("Z", "X"):
        assert time.monotonic() < deadline, "the zygote outlived its launcher"
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or state(pid) in ("Z", "X")


def test_the_cli_starts_the_zygote_early_only_for_local_multi_process_pipelines(monkeypatch):
    from pipeline import cli

    started = []
    monkeypatch.setattr(
        worker_zygote.Zygote,
        "get",
        classmethod(lambda cls, kernels=None, modules=(): started.append((kernels, modules))),
    )
    sentences = ("transforms.sentences",)
    for argv, expected in [
        (["run"], [(None, sentences)]),
        (["clean", "--wikipedia", "x.bz2", "--output", "o"], [((), sentences)]),
        (
            ["clean", "--jsonl", "x", "--output", "o", "--dedup", "near"],
            [(("near_dedup",), sentences)],
        ),
        (["vocab", "--input", "x", "--output", "o"], [((), ())]),
        (["instances", "--input", "x", "--direct_running_mode=multi_processing"], [(None, ())]),
        (["run", "--direct_running_mode=in_memory"], []),
        (["run", "--runner", "DaskRunner"], []),
        (["run", "--direct_num_workers=1"], []),
        (["run", "--help"], []),
        (["instances", "--compat", "reference"], []),
        (["validate", "x"], []),
        ([], []),
    ]:
        started.clear()
        cli._start_worker_zygote_early(argv)
        assert started == expected, argv


WARM_ONLY = """
import sys
from pipeline.runtime import worker_zygote
worker_zygote._warm()
watched = ("transforms.framed_examples", "transforms.near_duplicates", "transforms.sentences")
loaded = [m for m in watched if m in sys.modules]
open(sys.argv[1], "w").write(" ".join(loaded))
"""


@pytest.mark.parametrize(
    ("groups", "modules", "loaded"),
    [
        (None, None, "transforms.framed_examples transforms.near_duplicates"),
        ("", None, ""),
        ("near_dedup", None, "transforms.near_duplicates"),
        ("phases", None, "transforms.framed_examples"),
        ("", "transforms.sentences", "transforms.sentences"),
        ("", "transforms.sentences,no_such_module_here", "transforms.sentences"),
    ],
)
def test_the_zygote_loads_the_kernel_groups_and_modules_it_is_given(
    tmp_path, groups, modules, loaded
):
    """A command that calls no kernel (``clean`` without near dedup, ``vocab``) spares its
    zygote loading them before the first fork; unset, every group is loaded. Modules its workers
    import while they run are imported too (one that fails is left to the workers)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(worker_zygote.KERNELS_ENV, None)
    env.pop(worker_zygote.MODULES_ENV, None)
    if groups is not None:
        env[worker_zygote.KERNELS_ENV] = groups
    if modules is not None:
        env[worker_zygote.MODULES_ENV] = modules
    out = tmp_path / "loaded"
    # standard input stays open: the zygote ends when its launcher's pipe closes
    with subprocess.Popen(
        [sys.executable, "-c", WARM_ONLY, str(out)], env=env, stdin=subprocess.PIPE
    ) as proc:
        assert proc.wait(timeout=120) == 0
    assert out.read_text() == loaded


class MarkExit(beam.DoFn):
    """Leaves a file per worker from ``teardown`` and from an ``atexit`` handler (and one left
    open, flushed only if the handlers and streams are run before the process ends)."""

    def __init__(self, out: str) -> None:
        self._out = out

    def setup(self):
        import atexit

        pid, out = os.getpid(), self._out
        atexit.register(lambda: Path(f"{out}/atexit-{pid}").write_text("ran"))
        self._log = open(f"{out}/buffered-{pid}", "w")  # noqa: SIM115 (closed by the exit)
        atexit.register(self._log.flush)

    def process(self, x):
        self._log.write(f"{x}\n")
        yield x

    def teardown(self):
        Path(f"{self._out}/teardown-{os.getpid()}").write_text("ran")


def test_a_forked_worker_runs_teardown_and_atexit_handlers_before_it_ends(tmp_path, monkeypatch):
    monkeypatch.delenv(worker_zygote.FORKED_WORKERS_ENV, raising=False)
    fresh_zygote()
    pipeline = beam.Pipeline(options=make_pipeline_options(MULTI))
    _ = pipeline | beam.Create(range(40)) | beam.Reshuffle() | beam.ParDo(MarkExit(str(tmp_path)))
    pipeline.run().wait_until_finish()
    workers = {p.name.split("-", 1)[1] for p in tmp_path.glob("buffered-*")}
    assert workers and str(os.getpid()) not in workers
    assert {p.name.split("-", 1)[1] for p in tmp_path.glob("teardown-*")} == workers
    assert {p.name.split("-", 1)[1] for p in tmp_path.glob("atexit-*")} == workers
    lines = [x for p in tmp_path.glob("buffered-*") for x in p.read_text().split()]
    assert sorted(map(int, lines)) == list(range(40))


def test_empty_truncated_malformed_or_oversized_requests_are_refused_and_the_zygote_carries_on(
    monkeypatch,
):
    import socket

    monkeypatch.delenv(worker_zygote.FORKED_WORKERS_ENV, raising=False)
    fresh_zygote()
    zygote = worker_zygote.Zygote.get()
    assert zygote.usable_for(dict(os.environ), worker_zygote.default_worker_command())
    for payload in [
        b"",
        b'{"env": {"A": "1"}, "cwd"',  # truncated, then closed
        b"\xff\xfe not json\n",
        b'["a list"]\n',
        b'{"env": "not a dict", "cwd": "/"}\n',
        b"{" + b" " * (65 << 20),  # past the limit, never a line
    ]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.connect(zygote.path)
            try:
                conn.sendall(payload)
                conn.shutdown(socket.SHUT_WR)
            except OSError:
                pass  # the zygote closed the connection first (the oversized one)
            try:
                answer = conn.makefile("rb").read()
            except ConnectionResetError:  # closed with our bytes unread: nothing sent either
                answer = b""
            assert answer == b""  # no pid: nothing forked
        assert zygote.process.poll() is None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(zygote.path)  # still listening
