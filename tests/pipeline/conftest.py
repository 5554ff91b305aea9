"""Fixtures of the pipeline tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def cloud(tmp_path_factory):
    """The sample's job on local disk (described as Dataflow jobs) and on an emulated bucket."""
    pytest.importorskip("gcp_storage_emulator")
    pytest.importorskip("google.cloud.storage")
    pytest.importorskip("apache_beam.runners.dataflow.dataflow_runner")
    from tests.pipeline.cloud_runs import cloud_runs

    yield from cloud_runs(tmp_path_factory.mktemp("cloud"))


@pytest.fixture
def monitors(monkeypatch) -> list:
    """Every progress monitor (``pipeline.runtime.progress.ProgressMonitor``) that ran in this
    process during the test, each appended once it is over."""
    from pipeline.runtime.progress import ProgressMonitor

    seen: list[ProgressMonitor] = []
    original_exit = ProgressMonitor.__exit__

    def remember(self, *exc):
        original_exit(self, *exc)
        seen.append(self)

    monkeypatch.setattr(ProgressMonitor, "__exit__", remember)
    return seen
