"""The garbage collector's thresholds in bertprep's processes (``pipeline.runtime.collector``):
the command line sets them before its imports, every Beam worker it starts gets the same
(forked by the zygote or started as a new process), a user's value is kept and a malformed one
is refused in one line."""

from __future__ import annotations

import gc
import os
from pathlib import Path

import apache_beam as beam
import pytest

from pipeline import cli
from pipeline.runtime import worker_zygote
from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.collector import (
    DEFAULT_THRESHOLDS,
    GC_THRESHOLDS_ENV,
    parse_thresholds,
    set_collector_thresholds,
)
from pipeline.runtime.quiet import WORKER_SITE
from tests.pipeline.runtime.test_worker_zygote import MULTI, fresh_zygote


@pytest.fixture(autouse=True)
def restore_thresholds():
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


@pytest.mark.parametrize(
    ("value", "expected"), [("700,10,10", (700, 10, 10)), ("5000", (5000,)), ("0", (0,))]
)
def test_thresholds_parse_as_gc_set_threshold_takes_them(value, expected):
    assert parse_thresholds(value) == expected


@pytest.mark.parametrize("value", ["", "a,b", "1,2,3,4", "-1", "1,,2", "1.5", "3000000000"])
def test_malformed_thresholds_are_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=GC_THRESHOLDS_ENV):
        parse_thresholds(value)


def test_the_default_is_set_and_passed_on_and_a_users_value_is_kept(monkeypatch):
    monkeypatch.delenv(GC_THRESHOLDS_ENV, raising=False)
    assert set_collector_thresholds() == DEFAULT_THRESHOLDS == gc.get_threshold()
    assert os.environ[GC_THRESHOLDS_ENV] == "100000,50,100"
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "700,10,10")
    assert set_collector_thresholds() == (700, 10, 10) == gc.get_threshold()


def test_the_command_line_refuses_a_malformed_value_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "many")
    assert cli.main(["stats", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertprep stats: error: BERTPREP_GC_THRESHOLDS='many'")
    assert "Traceback" not in err


class ReportThresholds(beam.DoFn):
    def process(self, x):
        yield x, gc.get_threshold(), os.getpid(), os.getppid()


def thresholds_in_workers(out: Path) -> list[tuple]:
    """(element, the worker's thresholds, its pid, its parent's pid) from a multi-process
    pipeline's workers."""
    pipeline = beam.Pipeline(options=make_pipeline_options(MULTI))
    _ = (
        pipeline
        | beam.Create(range(20))
        | beam.Reshuffle()
        | beam.ParDo(ReportThresholds())
        | beam.Map(repr)
        | beam.io.WriteToText(str(out / "thresholds"))
    )
    pipeline.run().wait_until_finish()
    return [eval(line) for p in out.glob("thresholds*") for line in p.read_text().splitlines()]


@pytest.fixture
def new_zygote(monkeypatch):
    """A zygote started for the test (with its environment), ended after it."""
    monkeypatch.delenv(worker_zygote.FORKED_WORKERS_ENV, raising=False)
    fresh_zygote()
    yield
    fresh_zygote()


def without_worker_site(monkeypatch, add: bool = False) -> None:
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p != WORKER_SITE]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([WORKER_SITE, *paths] if add else paths))


@pytest.mark.parametrize("forked", [True, False])
def test_every_worker_gets_the_launchers_thresholds(tmp_path, monkeypatch, new_zygote, forked):
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "12345,6,7")
    if not forked:
        monkeypatch.setenv(worker_zygote.FORKED_WORKERS_ENV, "0")
    # A new worker process gets them from the worker site (on its path whenever the CLI runs);
    # the zygote sets them itself, so a forked worker has them even without the site.
    without_worker_site(monkeypatch, add=not forked)
    rows = thresholds_in_workers(tmp_path)
    assert sorted(r[0] for r in rows) == list(range(20))
    assert {r[1] for r in rows} == {(12345, 6, 7)}
    assert os.getpid() not in {r[2] for r in rows}


def test_the_zygote_carries_on_with_a_malformed_value(tmp_path, monkeypatch, new_zygote):
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "many")
    without_worker_site(monkeypatch)
    rows = thresholds_in_workers(tmp_path)
    assert sorted(r[0] for r in rows) == list(range(20))
    assert {r[1] for r in rows} == {(700, 10, 10)}
    assert {r[3] for r in rows} == {worker_zygote.Zygote.get().process.pid}


def test_set_but_empty_keeps_the_interpreters_thresholds(monkeypatch, capsys):
    gc.set_threshold(700, 10, 10)
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "")
    cli.main(["stats", "nowhere"])
    assert gc.get_threshold() == (700, 10, 10)


def test_a_malformed_value_with_no_command_is_said_without_one(monkeypatch, capsys):
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "3000000000")
    assert cli.main([]) == 2
    assert capsys.readouterr().err.startswith("bertprep: error: BERTPREP_GC_THRESHOLDS=")


@pytest.mark.parametrize("value", ["many", "3000000000"])
def test_a_malformed_value_fails_no_worker_start_up_hook(value):
    """A new process with the worker site on its path still runs every other hook (here the
    quiet logging handler) and keeps the interpreter's thresholds."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=WORKER_SITE, BERTPREP_QUIET="1")
    env[GC_THRESHOLDS_ENV] = value
    probe = "import gc, logging; print(gc.get_threshold(), len(logging.getLogger().handlers))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.strip() == "(700, 10, 10) 1"
