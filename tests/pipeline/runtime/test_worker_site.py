"""The multi-process workers' start-up hook (``pipeline/runtime/worker_site/sitecustomize.py``): a
finished worker skips the interpreter's teardown, but only after everything a DoFn relies on at
the end has run: ``teardown``, ``atexit`` handlers, its files flushed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pipeline.runtime.quiet import WORKER_SITE

ROOT = Path(__file__).resolve().parents[3]

PIPELINE = textwrap.dedent(
    """
    import atexit, os, sys
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    out = sys.argv[1]
    fail = sys.argv[2] == "fail"

    class Mark(beam.DoFn):
        def setup(self):
            pid = os.getpid()
            atexit.register(lambda: open(f"{out}/atexit-{pid}", "w").write("ran"))
            # Left open on purpose: only the interpreter's normal exit would flush it.
            self.log = open(f"{out}/buffered-{pid}", "w")

        def process(self, x):
            if fail:
                raise ValueError("this bundle fails")
            self.log.write(f"{x}\\n")
            yield x

        def teardown(self):
            from apache_beam.runners.worker import sdk_worker

            self.log.flush()
            open(f"{out}/teardown-{os.getpid()}", "w").write(sdk_worker.SdkHarness.run.__name__)
            dataflow = "google.cloud.dataflow" in sys.modules
            open(f"{out}/dataflow-{os.getpid()}", "w").write(str(dataflow))

    opts = PipelineOptions(direct_running_mode="multi_processing", direct_num_workers=2)
    with beam.Pipeline(options=opts) as p:
        _ = p | beam.Create(range(40)) | beam.Reshuffle() | beam.ParDo(Mark())
    """
)


def run(tmp_path: Path, mode: str, **env: str) -> subprocess.CompletedProcess:
    script = tmp_path / "pipeline.py"
    script.write_text(PIPELINE)
    out = tmp_path / mode
    out.mkdir()
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([WORKER_SITE, str(ROOT)]), **env)
    return subprocess.run(
        [sys.executable, str(script), str(out), mode],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def marks(directory: Path, kind: str) -> set[str]:
    return {p.name.split("-", 1)[1] for p in directory.glob(f"{kind}-*")}


def test_a_finished_worker_runs_teardown_and_atexit_handlers_before_its_fast_exit(tmp_path):
    result = run(tmp_path, "ok")
    assert result.returncode == 0, result.stderr[-3000:]
    out = tmp_path / "ok"
    workers = marks(out, "buffered")
    assert workers  # the DoFn ran in worker processes
    assert marks(out, "teardown") == workers
    hooks = {p.read_text() for p in out.glob("teardown-*")}
    assert hooks == {"run_then_exit_fast"}  # the hook is what these workers ran
    assert marks(out, "atexit") == workers
    written = sorted(
        int(line) for p in out.glob("buffered-*") for line in p.read_text().splitlines()
    )
    assert written == list(range(40))  # nothing lost by skipping the teardown
    # the Dataflow API client is not loaded in the workers (the launcher is not affected)
    assert {p.read_text() for p in out.glob("dataflow-*")} == {"False"}


def test_a_failing_worker_still_fails_the_pipeline(tmp_path):
    result = run(tmp_path, "fail")
    assert result.returncode != 0
    assert "this bundle fails" in result.stderr


def test_the_fast_exit_can_be_turned_off(tmp_path):
    result = run(tmp_path, "ok", BERTPREP_FULL_EXIT="1")
    assert result.returncode == 0, result.stderr[-3000:]
    assert {p.read_text() for p in (tmp_path / "ok").glob("teardown-*")} == {"run"}


def test_the_dataflow_client_can_be_kept_in_workers(tmp_path):
    """With BERTPREP_WORKER_DATAFLOW_CLIENT=1 a worker keeps the Dataflow client (Beam loads it
    when it is installed; the other unused clients stay skipped: lean_imports)."""
    import importlib.util

    result = run(tmp_path, "ok", BERTPREP_WORKER_DATAFLOW_CLIENT="1")
    assert result.returncode == 0, result.stderr[-3000:]
    installed = importlib.util.find_spec("google.cloud.dataflow") is not None
    assert {p.read_text() for p in (tmp_path / "ok").glob("dataflow-*")} == {str(installed)}
