"""Multi-process SDK workers forked by the launcher's zygote (``pipeline.runtime.worker_zygote``,
``pipeline.runtime.local_runner.Zygote``): the same pipeline results and counters as workers
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
from apache_beam.metrics.metric import MetricsFilter

from pipeline.runtime import local_runner
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


def test_workers_are_forked_by_the_zygote_and_give_the_same_results(tmp_path, monkeypatch):
    monkeypatch.delenv(local_runner.FORKED_WORKERS_ENV, raising=False)
    found, seen = run_squares(tmp_path)
    zygote = local_runner.Zygote.get()
    assert sorted(r[0] for r in found) == [x * x for x in range(60)]
    assert seen == 60
    parents = {r[2] for r in found}
    assert parents == {zygote.process.pid}, (parents, zygote.process.pid)
    assert os.getpid() not in {r[1] for r in found}


def test_turned_off_or_another_environment_starts_new_processes(tmp_path, monkeypatch):
    monkeypatch.setenv(local_runner.FORKED_WORKERS_ENV, "0")
    (tmp_path / "off").mkdir()
    found, seen = run_squares(tmp_path / "off")
    assert seen == 60 and sorted(r[0] for r in found) == [x * x for x in range(60)]
    assert {r[2] for r in found} == {os.getpid()}  # the launcher's children (via exec)

    monkeypatch.delenv(local_runner.FORKED_WORKERS_ENV)
    zygote = local_runner.Zygote.get()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([os.environ.get("PYTHONPATH", ""), "/x"]))
    (tmp_path / "other").mkdir()
    found, seen = run_squares(tmp_path / "other")
    assert seen == 60 and sorted(r[0] for r in found) == [x * x for x in range(60)]
    assert zygote.process.pid not in {r[2] for r in found}
    assert {r[2] for r in found} == {os.getpid()}


LAUNCHER = textwrap.dedent(
    """
    import os, sys, time
    from pipeline.runtime import local_runner
    zygote = local_runner.Zygote.get()
    assert zygote.usable_for(dict(os.environ), local_runner.default_worker_command())
    print(zygote.process.pid, flush=True)
    os._exit(0)  # no atexit handler runs: the zygote sees its stdin close
    """
)


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "X"


def test_the_zygote_ends_with_its_launcher(tmp_path):
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
