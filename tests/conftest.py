"""Shared fixtures: the real corpora in ../shared/corpora and the project's own sample corpus."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pipeline.runtime.collector import set_collector_thresholds

# The command line sets the collector's thresholds and passes them on to the processes it starts
# (``pipeline.runtime.collector``); done once for the session, so that an in-process
# ``cli.main`` call does not change the environment (and so the worker zygote's) partway through.
set_collector_thresholds()

ROOT = Path(__file__).resolve().parents[1]
CORPORA = ROOT.parent / "shared" / "corpora"
SAMPLE = ROOT / "sample"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    """Keeps each ``xdist_group`` on one worker under ``--dist loadgroup``.

    pytest-xdist 3.8 tags a grouped test by renaming ``item._nodeid``, which pytest 9 no longer
    reads (its node ids live in ``item._id``), so groups were spread over workers and their
    session fixtures (the emulated-bucket runs, the Dask cluster) were set up once per worker.
    This applies the same ``<nodeid>@<group>`` tag where pytest 9 reads it; on the controller and
    without xdist it does nothing. A test without a group is in its module's: spread over
    workers, a module's tests set up its module-scoped fixtures once per worker (the books run,
    the packed runs: ~25 s each)."""
    if not getattr(config.option, "loadgroup", False):
        return
    from _pytest.nodeid import coerce_node_id

    for item in items:
        names = {
            str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
            for mark in item.iter_markers("xdist_group")
        }
        if not names:  # a module's tests share one worker, and so its module-scoped fixtures
            names = {item.nodeid.split("::", 1)[0]}
        if "@" not in item.nodeid and hasattr(item, "_id"):
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(sorted(names))}")


def require_corpora(*relative: str) -> Path:
    """The path under shared/corpora; fails under CI when missing, skips elsewhere."""
    path = CORPORA.joinpath(*relative)
    if not path.exists():
        message = f"real-data corpus missing: {path}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handling for the test (restored after). A suite started in the
    background (``cmd &`` in a script, ``nohup``) inherits SIGINT ignored, and so would every
    command a test starts: tests of what Ctrl-C does need the default."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


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
