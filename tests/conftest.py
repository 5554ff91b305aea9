"""Shared fixtures: the real corpora in ../shared/corpora and the project's own sample corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
SAMPLE = ROOT / "sample"


def require_corpora(*relative: str) -> Path:
    """The path under shared/corpora; fails under CI when missing, skips elsewhere."""
    path = CORPORA.joinpath(*relative)
    if not path.exists():
        message = f"real-data corpus missing: {path}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def corpora() -> Path:
    return require_corpora()


@pytest.fixture(scope="session")
def uncased_vocab_path() -> Path:
    return require_corpora("vocab", "bert-base-uncased-vocab.txt")


@pytest.fixture(scope="session")
def cased_vocab_path() -> Path:
    return require_corpora("vocab", "bert-base-cased-vocab.txt")


@pytest.fixture(scope="session")
def sample_corpus_files() -> list[Path]:
    files = sorted((SAMPLE / "corpus").glob("*.txt"))
    assert files, "the embedded sample corpus is missing"
    return files


@pytest.fixture(scope="session")
def sample_vocab_path() -> Path:
    path = SAMPLE / "vocab.txt"
    assert path.exists(), "sample/vocab.txt is missing (scripts/make_sample_vocab.py makes it)"
    return path


@pytest.fixture(scope="session")
def dask_cluster():
    """A real ``dask.distributed`` cluster: a scheduler and 2 single-threaded worker processes on
    127.0.0.1, talking over TCP (tests using it carry ``xdist_group("dask")``: one per session)."""
    from distributed import LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=":0",
    )
    try:
        yield cluster
    finally:
        from pipeline.runtime.dask_runner import close_clients

        close_clients()
        cluster.close()
