"""bertprep's Beam option defaults (``pipeline.runtime.beam_options.make_pipeline_options``)."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import DirectOptions, TypeOptions

from pipeline.runtime.beam_options import UnsafeRunnerModeError, make_pipeline_options


def test_construction_type_check_is_off_unless_asked(monkeypatch):
    monkeypatch.delenv("BERTPREP_PIPELINE_TYPE_CHECK", raising=False)
    assert make_pipeline_options([]).view_as(TypeOptions).pipeline_type_check is False
    monkeypatch.setenv("BERTPREP_PIPELINE_TYPE_CHECK", "1")
    assert make_pipeline_options([]).view_as(TypeOptions).pipeline_type_check is True


def test_direct_runner_defaults_to_multi_processing_and_refuses_multi_threading():
    direct = make_pipeline_options([]).view_as(DirectOptions)
    assert direct.direct_running_mode == "multi_processing" and direct.direct_num_workers >= 1
    given = make_pipeline_options(["--direct_running_mode=in_memory"]).view_as(DirectOptions)
    assert given.direct_running_mode == "in_memory"
    with pytest.raises(UnsafeRunnerModeError, match="multi_threading is refused"):
        make_pipeline_options(["--direct_running_mode=multi_threading"])


def test_only_the_local_runner_pickles_vocabs_as_their_path():
    """Local workers read the vocab file themselves (``tokenizer.vocab.pickle_by_path``);
    workers of any other runner may be on machines without the file."""
    from tokenizer import vocab

    try:
        make_pipeline_options([])
        assert vocab._pickle_by_path is True
        make_pipeline_options(["--runner=DataflowRunner"])
        assert vocab._pickle_by_path is False
        make_pipeline_options(["--direct_running_mode=in_memory"])
        assert vocab._pickle_by_path is True
        make_pipeline_options(["--runner=DaskRunner"])
        assert vocab._pickle_by_path is False
    finally:
        vocab.pickle_by_path(False)


def test_direct_runner_runs_on_the_fn_api_runner_without_trying_prism(monkeypatch, tmp_path):
    """The DirectRunner never hands a job to Prism (a download, or another runner online): a
    real pipeline runs, in memory and multi-process, with Prism made to fail if touched."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import StandardOptions
    from apache_beam.runners.portability import prism_runner

    from pipeline.runtime.local_runner import RUNNER

    tried = []

    def no_prism(self, pipeline, options):
        tried.append(pipeline)  # Beam's DirectRunner would fall back after this
        raise RuntimeError("no Prism here")

    monkeypatch.setattr(prism_runner.PrismRunner, "run_pipeline", no_prism)
    for args in ([], ["--runner=DirectRunner"]):
        assert make_pipeline_options(args).view_as(StandardOptions).runner == RUNNER
    dataflow = ["--runner=DataflowRunner"]
    assert make_pipeline_options(dataflow).view_as(StandardOptions).runner == "DataflowRunner"
    for mode in ("in_memory", "multi_processing"):
        out = tmp_path / mode
        options = make_pipeline_options([f"--direct_running_mode={mode}"])
        with beam.Pipeline(options=options) as p:
            (
                p
                | beam.Create(range(100))
                | beam.Map(lambda x: (x % 3, x))
                | beam.CombinePerKey(sum)
                | beam.Map(str)
                | beam.io.WriteToText(str(out / "part"))
            )
        lines = sorted(line for f in out.iterdir() for line in f.read_text().splitlines())
        assert lines == sorted(str((k, sum(range(k, 100, 3)))) for k in range(3))
    assert tried == []


def test_the_local_runner_starts_without_beams_pickling_round_trip(monkeypatch, tmp_path):
    """``local_runner.start`` runs the pipeline (real output) without Beam's construction-time
    round trip of every transform, which Beam skips for its own DirectRunner by class name."""
    import apache_beam as beam

    from pipeline.runtime.local_runner import start

    verified = []
    original = beam.Pipeline._verify_runner_api_compatible

    def counted(self):
        verified.append(self)
        return original(self)

    monkeypatch.setattr(beam.Pipeline, "_verify_runner_api_compatible", counted)
    out = tmp_path / "out"
    p = beam.Pipeline(options=make_pipeline_options(["--direct_running_mode=in_memory"]))
    p | beam.Create(range(10)) | beam.Map(str) | beam.io.WriteToText(str(out / "part"))
    start(p).wait_until_finish()
    assert sorted(int(line) for f in out.iterdir() for line in f.read_text().splitlines()) == list(
        range(10)
    )
    assert verified == []
    p = beam.Pipeline(options=make_pipeline_options(["--direct_running_mode=in_memory"]))
    p | beam.Create(range(3)) | beam.Map(str)
    p.run().wait_until_finish()
    assert verified == [p]  # what Beam does without it, so the count above means something
