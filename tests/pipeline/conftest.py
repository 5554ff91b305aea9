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
