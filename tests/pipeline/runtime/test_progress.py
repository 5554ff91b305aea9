"""Live progress: workers' progress files read by the launcher's monitor while a real
multi-process pipeline runs; the line's format; terminal and log output."""

from __future__ import annotations

import io
import tempfile
import time

import apache_beam as beam

from pipeline.jobs.clean import CleanJobConfig, run_clean_job
from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.progress import (
    ProgressMonitor,
    ProgressReporter,
    format_progress,
    progress_dir,
    read_progress,
)
from tests.conftest import SAMPLE


class SlowCountFn(beam.DoFn):
    """Reports one unit per element, slowly enough for the monitor to see the job half done."""

    def __init__(self, reporter: ProgressReporter) -> None:
        self._reporter = reporter

    def process(self, element: int):
        time.sleep(0.15)
        self._reporter.add(1)
        yield element

    def finish_bundle(self):
        self._reporter.flush()


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_monitor_sees_progress_of_a_multi_process_pipeline_before_its_end(tmp_path):
    directory = str(tmp_path / ".progress")
    total = 40
    options = make_pipeline_options(
        ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]
    )
    lines: list[str] = []
    monitor = ProgressMonitor(
        directory, "test", total, "items", log=lines.append, poll=0.1, log_every=0.3
    )
    p = beam.Pipeline(options=options)
    _ = (
        p
        | beam.Create(range(total))
        | beam.Reshuffle()
        | beam.ParDo(SlowCountFn(ProgressReporter(directory, interval=0.1)))
    )
    with monitor:
        p.run().wait_until_finish()
    assert monitor.observed[-1] == total
    assert any(0 < v < total for v in monitor.observed), monitor.observed
    assert lines and all(line.startswith("test: ") and " of 40 items (" in line for line in lines)
    assert not (tmp_path / ".progress").exists()  # cleaned up


def test_progress_line_has_share_rate_and_eta():
    line = format_progress("tokenize", 250, 1000, "documents", 25.0)
    assert line == "tokenize: 250 of 1,000 documents (25%), 25 documents/s, ETA 0:00:30"
    line = format_progress("clean", 3 << 20, 12 << 20, "bytes", 1.5 * (1 << 20))
    assert line == "clean: 3.0 MB of 12.0 MB read (25%), 1.5 MB/s, ETA 0:00:06"
    assert format_progress("instances", 7200, None, "document passes", 3600.0) == (
        "instances: 7,200 document passes, 3,600 document passes/s"
    )
    assert format_progress("x", 3, 10, "documents", None) == "x: 3 of 10 documents (30%)"
    assert format_progress("x", 3, 10, "documents", 0.5) == (
        "x: 3 of 10 documents (30%), 0.5 documents/s, ETA 0:00:14"
    )
    assert "ETA 1:01:40" in format_progress("x", 1, 3701, "documents", 1.0)
    assert format_progress("x", 10, 10, "documents", 2.0) == (
        "x: 10 of 10 documents (100%), 2.0 documents/s, finishing"
    )


def test_the_rate_counts_from_the_first_progress_seen_not_from_the_start(tmp_path):
    directory = str(tmp_path / "p")
    with ProgressMonitor(directory, "x", 100, "documents", log=lambda _: None, poll=0.05) as m:
        time.sleep(0.5)  # the runner starting: no progress yet
        _feed(directory, [10] * 4, 0.1)
        time.sleep(0.2)
    rate = m.rate()
    assert rate is not None and 50 < rate < 150  # ~10 per 0.1 s, start-up not counted


def _feed(directory: str, values: list[int], pause: float) -> None:
    reporter = ProgressReporter(directory, interval=0)
    for v in values:
        reporter.add(v)
        time.sleep(pause)


def test_not_a_terminal_gives_periodic_newline_terminated_lines_without_carriage_returns(
    tmp_path,
):
    stream = io.StringIO()
    directory = str(tmp_path / "p")
    with ProgressMonitor(
        directory, "clean", 100, "documents", stream=stream, poll=0.05, log_every=0.2
    ):
        _feed(directory, [10] * 10, 0.1)
    text = stream.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and "\x1b" not in text
    assert text.endswith("\n") and 2 <= len(lines) <= 8, lines
    assert all(line.startswith("clean: ") and "of 100 documents" in line for line in lines)


def test_a_terminal_gets_one_line_rewritten_in_place_and_erased_at_the_end(tmp_path):
    stream = Tty()
    directory = str(tmp_path / "p")
    with ProgressMonitor(directory, "clean", 100, "documents", stream=stream, poll=0.05):
        _feed(directory, [20] * 5, 0.1)
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r") >= 3
    assert "clean: 100 of 100 documents (100%)" in text or "of 100 documents" in text
    assert text.endswith("\r") and text.rstrip("\r").split("\r")[-1].strip() == ""


def test_remote_outputs_report_through_a_local_directory(tmp_path):
    remote = progress_dir("gs://bucket/out")
    assert remote == progress_dir("gs://bucket/out") != progress_dir("gs://bucket/other")
    assert remote.startswith(tempfile.gettempdir()) and "://" not in remote
    assert progress_dir(str(tmp_path)) == str(tmp_path / ".progress")
    reporter = ProgressReporter(None)
    reporter.add(5)
    reporter.flush()
    with ProgressMonitor(None, "x", 1, "documents") as monitor:
        pass
    assert monitor.observed == [] and read_progress(str(tmp_path / "missing")) == 0


def test_the_clean_stage_reports_every_input_byte_read(tmp_path, monitors):
    files = sorted((SAMPLE / "books").glob("*.txt")) + sorted((SAMPLE / "wiki").glob("*.xml"))
    config = CleanJobConfig(
        output=str(tmp_path / "clean"),
        wikipedia=[str(SAMPLE / "wiki" / "*.xml")],
        books=[str(SAMPLE / "books" / "*.txt")],
        export_text=False,
    )
    seen = monitors
    run_clean_job(config, make_pipeline_options(["--direct_running_mode=in_memory"]), print)
    (monitor,) = seen
    assert monitor.total == sum(f.stat().st_size for f in files)
    assert monitor.observed[-1] == monitor.total
    assert not (tmp_path / "clean" / ".progress").exists()


def test_reading_any_input_reports_its_stored_bytes(tmp_path):
    import bz2
    import gzip
    import lzma

    from pipeline.files.source_readers import open_decompressed

    text = b"".join(b'{"text": "line %d of the corpus"}\n' % i for i in range(5000))
    for name, data in (
        ("plain.jsonl", text),
        ("a.jsonl.gz", gzip.compress(text)),
        ("a.jsonl.bz2", bz2.compress(text)),
        ("a.jsonl.xz", lzma.compress(text)),
    ):
        path = tmp_path / name
        path.write_bytes(data)
        seen: list[int] = []
        with open_decompressed(str(path), seen.append) as f:
            assert f.read() == text, name
        assert sum(seen) == len(data), name


def test_every_long_stage_of_run_reports_up_to_its_total(tmp_path, monitors):
    from pipeline.jobs.run import run_all
    from pipeline.jobs.run_config import load_run_config
    from tests.pipeline.jobs.test_run import SAMPLE as SAMPLE_CONFIG

    seen = monitors
    config = load_run_config(SAMPLE_CONFIG, [f"output={tmp_path / 'out'}"])
    summary = run_all(
        config,
        lambda: make_pipeline_options(["--direct_running_mode=in_memory"]),
        progress=lambda m: None,
    )
    # Both phases run as one pipeline, so one monitor for them.
    assert [m.label for m in seen] == ["clean", "split", "vocab", "tokenize", "instances"]
    for monitor in seen:
        assert monitor.total and monitor.observed[-1] == monitor.total, monitor.label
    split, vocab, tokenize, phases = seen[1:]
    # Split and vocab both read every clean document (vocab skips the held-out ones unsampled).
    assert split.total == vocab.total == summary["documents"]
    train, held_out = summary["split"]["train"], summary["split"]["eval"]
    assert tokenize.total == train + held_out == summary["documents"]
    # Documents × dupe passes (3 and 2 in the sample config; one pass over the eval side).
    assert phases.total == (train * 3 + held_out) + (train * 2 + held_out)
    assert not list((tmp_path / "out").rglob(".progress"))


def test_following_a_finished_direct_runner_result_is_a_no_op(tmp_path):
    """The DirectRunner runs to the end inside run(): nothing is left to poll (Dataflow's run()
    returns early; its counters are then read through the result, every ``metrics_every`` s)."""
    p = beam.Pipeline(options=make_pipeline_options(["--direct_running_mode=in_memory"]))
    _ = p | beam.Create([1, 2]) | beam.Map(lambda x: x)
    with ProgressMonitor(str(tmp_path / "p"), "x", 2, "documents", stream=io.StringIO()) as m:
        result = p.run()
        m.follow(result)
        result.wait_until_finish()
    assert m._result is None and m._from_metrics() == 0
