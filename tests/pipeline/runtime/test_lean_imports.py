"""Beam's import without the clients a local job never calls (``pipeline.runtime.lean_imports``).

Each check runs in a new interpreter: the test process imported Beam long ago, and there the
skipping rightly does nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pipeline.runtime.lean_imports import runner_named, skip_unused_clients

ROOT = Path(__file__).resolve().parents[3]

PROBE = textwrap.dedent(
    """
    import json, sys
    from pipeline.runtime.lean_imports import skip_unused_clients

    installed = skip_unused_clients(dataflow_client=sys.argv[1] == "keep-dataflow")
    import apache_beam
    from apache_beam.io.filesystems import FileSystems

    watched = ["google.cloud.dataflow", "pymongo", "bson", "apache_beam.io.gcp.bigquery",
               "google.cloud.storage", "apache_beam.io.gcp.gcsio", "apache_beam.io.aws.s3io",
               "apitools", "oauth2client", "pyparsing"]
    report = {"installed": installed, "before": {m: m in sys.modules for m in watched}}
    report["httplib2_lazy"] = type(sys.modules["httplib2"]).__name__ == "_LazyModule"
    local = FileSystems.get_filesystem("/tmp/x")
    report["local"] = type(local).__name__
    report["before_gs"] = {m: m in sys.modules for m in watched}
    gcs = FileSystems.get_filesystem("gs://bucket/x")
    real = sys.modules["apache_beam.io.gcp.gcsfilesystem"].GCSFileSystem
    report["gs_real"] = type(gcs) is real and real.__module__ == "apache_beam.io.gcp.gcsfilesystem"
    report["gs_again"] = type(FileSystems.get_filesystem("gs://bucket/y")) is real
    report["gs_join"] = gcs.join("gs://bucket", "a", "b")
    s3 = FileSystems.get_filesystem("s3://bucket/x")
    report["s3_real"] = type(s3) is sys.modules["apache_beam.io.aws.s3filesystem"].S3FileSystem
    report["local_after"] = type(FileSystems.get_filesystem("/tmp/x")).__name__
    report["after"] = {m: m in sys.modules for m in watched}
    from apache_beam.internal.http_client import get_new_http
    from apache_beam.utils import retry

    report["http"] = type(get_new_http()).__module__  # the lazy module runs on first use
    report["retry_knows"] = [retry.HttpError is not None, retry.GoogleAPICallError is not None]
    print(json.dumps(report))
    """
)


def _without_switch() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "BERTPREP_ALL_CLIENTS"}


def run_script(script: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``script`` run by a new interpreter with this checkout on its path; it must succeed."""
    result = subprocess.run(
        [sys.executable, str(script), *args],
        env={**_without_switch(), "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def probe(tmp_path: Path, mode: str = "", **env: str) -> dict:
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    result = run_script(script, mode, **env)
    assert "bson" not in result.stderr  # mongodbio's import warning stays quiet
    return json.loads(result.stdout.splitlines()[-1])


def test_beam_imports_without_the_unused_clients_and_buckets_still_work(tmp_path):
    report = probe(tmp_path)
    assert report["installed"] is True
    assert not any(report["before"].values()), report["before"]
    assert report["local"] == "LocalFileSystem"
    assert not any(report["before_gs"].values())  # a local path loads no cloud client
    # gs:// and s3:// paths get Beam's real file systems, loaded on first use, once
    assert report["gs_real"] and report["gs_again"] and report["s3_real"]
    assert report["gs_join"] == "gs://bucket/a/b"
    assert report["local_after"] == "LocalFileSystem"  # the stand-ins answer for no path now
    assert report["after"]["google.cloud.storage"] and report["after"]["apache_beam.io.gcp.gcsio"]
    skipped = ("google.cloud.dataflow", "pymongo", "bson", "apache_beam.io.gcp.bigquery")
    for module in (*skipped, "apitools", "oauth2client"):
        assert not report["after"][module], module
    # httplib2 is imported by Beam's stager but runs only when first used
    assert report["httplib2_lazy"] and report["http"] == "httplib2"
    assert report["retry_knows"] == [False, False]  # without apitools, see the module doc


RACE = textwrap.dedent(
    """
    import sys, threading
    from pipeline.runtime.lean_imports import skip_unused_clients

    assert skip_unused_clients()
    from apache_beam.io.filesystems import FileSystems

    start = threading.Barrier(16)
    found, errors = [], []

    def first_use(i):
        start.wait()
        try:
            path = ("gs://bucket/x", "/tmp/x", "s3://bucket/x")[i % 3]
            fs = type(FileSystems.get_filesystem(path))
            found.append((path[:2], fs.__module__, hasattr(fs, "_stands_in_for")))
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=first_use, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(sorted(set(found)), errors)
    """
)


def test_threads_that_use_a_bucket_first_at_once_all_get_the_real_file_system(tmp_path):
    script = tmp_path / "race.py"
    script.write_text(RACE)
    for _ in range(3):
        result = run_script(script)
        assert result.stdout.strip() == (
            "[('/t', 'apache_beam.io.localfilesystem', False), "
            "('gs', 'apache_beam.io.gcp.gcsfilesystem', False), "
            "('s3', 'apache_beam.io.aws.s3filesystem', False)] []"
        )


WITHOUT_GCP_EXTRA = textwrap.dedent(
    """
    import sys

    class NoStorage:  # as on an install without apache-beam[gcp]
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name == "google.cloud.storage" or name.startswith("google.cloud.storage."):
                raise ModuleNotFoundError(name, name=name)

    sys.meta_path.insert(0, NoStorage)
    from pipeline.runtime.lean_imports import skip_unused_clients

    assert skip_unused_clients()
    from apache_beam.io.filesystems import FileSystems

    try:
        FileSystems.get_filesystem("gs://bucket/x")
    except ValueError as e:
        print(type(e).__name__, "apache-beam[gcp]" in str(e))
    """
)


def test_without_the_gcp_extra_a_bucket_path_gets_beams_install_hint(tmp_path):
    script = tmp_path / "no_gcp.py"
    script.write_text(WITHOUT_GCP_EXTRA)
    assert run_script(script).stdout.split() == ["ValueError", "True"]


def test_the_dataflow_client_can_be_kept(tmp_path):
    import importlib.util

    report = probe(tmp_path, "keep-dataflow")
    installed = importlib.util.find_spec("google.cloud.dataflow") is not None
    assert report["after"]["google.cloud.dataflow"] is installed
    assert report["after"]["apitools"] and report["retry_knows"] == [True, True]
    assert not report["after"]["pymongo"]


def test_it_can_be_turned_off(tmp_path):
    report = probe(tmp_path, BERTPREP_ALL_CLIENTS="1")
    assert report["installed"] is False
    assert report["before"]["google.cloud.storage"]  # Beam's own import, as without bertprep
    assert report["before"]["apitools"] and not report["httplib2_lazy"]
    assert report["gs_real"] and report["local_after"] == "LocalFileSystem"


def test_it_does_nothing_once_beam_is_imported():
    import apache_beam  # noqa: F401

    meta_path = list(sys.meta_path)
    assert skip_unused_clients() is False
    assert sys.meta_path == meta_path


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "--config", "c.yaml"], False),
        (["instances", "--runner", "DataflowRunner"], True),
        (["instances", "--runner=DirectRunner"], True),
        (["instances", "--runner_v2"], False),
    ],
)
def test_runner_named(argv, named):
    assert runner_named(argv) is named
