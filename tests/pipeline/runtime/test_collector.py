"""The garbage collector's thresholds in bertprep's processes (``pipeline.runtime.collector``):
the command line sets them before its imports, every Beam worker it starts gets the same
(forked by the zygote or started as a new process), a user's value is kept and a malformed one
is refused in one line."""

from __future__ import annotations

import gc
import os

import apache_beam as beam
import pytest

from pipeline import cli
from pipeline.runtime import worker_zygote
from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.collector import (
    DEFAULT_THRESHOLDS,
    GC_THRESHOLDS_ENV,
    parse_thresholds,
    relax_collector,
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


@pytest.mark.parametrize("value", ["", "a,b", "1,2,3,4", "-1", "1,,2", "1.5"])
def test_malformed_thresholds_are_refused_naming_the_variable(value):
    with pytest.raises(ValueError, match=GC_THRESHOLDS_ENV):
        parse_thresholds(value)


def test_the_default_is_set_and_passed_on_and_a_users_value_is_kept(monkeypatch):
    monkeypatch.delenv(GC_THRESHOLDS_ENV, raising=False)
    assert relax_collector() == DEFAULT_THRESHOLDS == gc.get_threshold()
    assert os.environ[GC_THRESHOLDS_ENV] == "100000,50,100"
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "700,10,10")
    assert relax_collector() == (700, 10, 10) == gc.get_threshold()


def test_the_command_line_refuses_a_malformed_value_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "many")
    assert cli.main(["stats", "nowhere"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bertprep stats: error: BERTPREP_GC_THRESHOLDS='many'")
    assert "Traceback" not in err


class ReportThresholds(beam.DoFn):
    def process(self, x):
        yield x, gc.get_threshold(), os.getpid()


@pytest.mark.parametrize("forked", [True, False])
def test_every_worker_gets_the_launchers_thresholds(tmp_path, monkeypatch, forked):
    monkeypatch.setenv(GC_THRESHOLDS_ENV, "12345,6,7")
    if forked:
        monkeypatch.delenv(worker_zygote.FORKED_WORKERS_ENV, raising=False)
    else:
        monkeypatch.setenv(worker_zygote.FORKED_WORKERS_ENV, "0")
    # A new worker process gets them from the worker site (on its path whenever the CLI runs);
    # the zygote sets them itself, so a forked worker has them even without the site.
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p != WORKER_SITE]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths if forked else [WORKER_SITE, *paths]))
    fresh_zygote()
    out = tmp_path / "thresholds"
    pipeline = beam.Pipeline(options=make_pipeline_options(MULTI))
    _ = (
        pipeline
        | beam.Create(range(20))
        | beam.Reshuffle()
        | beam.ParDo(ReportThresholds())
        | beam.Map(repr)
        | beam.io.WriteToText(str(out))
    )
    pipeline.run().wait_until_finish()
    lines = [line for p in tmp_path.glob("thresholds*") for line in p.read_text().splitlines()]
    rows = [eval(line) for line in lines]
    assert len(rows) == 20
    assert {r[1] for r in rows} == {(12345, 6, 7)}
    assert os.getpid() not in {r[2] for r in rows}
    fresh_zygote()
