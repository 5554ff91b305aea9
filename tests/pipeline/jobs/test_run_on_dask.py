"""The whole job on a real ``dask.distributed`` cluster (a scheduler and 2 worker processes on
127.0.0.1): the DirectRunner's shards, counts and rejects; a worker killed mid-stage; paths a
worker cannot see."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import apache_beam as beam
import pytest

from pipeline.cli import main
from pipeline.jobs.run import run_all
from pipeline.jobs.run_config import load_run_config
from pipeline.runtime.beam_options import make_pipeline_options
from pipeline.runtime.dask_runner import SharedPathError, check_workers_see, dask_client
from tests.conftest import require_corpora
from tests.pipeline.jobs.test_run import SAMPLE, shard_hashes

pytestmark = pytest.mark.xdist_group("dask")


def on_dask(cluster) -> list[str]:
    return ["--runner=DaskRunner", f"--dask_client_address={cluster.scheduler_address}"]


def run_cli(out: Path, beam_args: list[str], *overrides: str) -> None:
    argv = ["run", "--config", str(SAMPLE), "--set", f"output={out}"]
    for item in overrides:
        argv += ["--set", item]
    assert main([*argv, *beam_args]) == 0


def comparable(out: Path) -> dict:
    """The run summary without timings and the output's own paths."""
    text = (out / "run_summary.json").read_text().replace(str(out), "OUT")
    summary = json.loads(text)
    summary.pop("seconds", None)
    for stage in summary["stages"]:
        stage.pop("seconds", None)
    return summary


def rejects(out: Path) -> dict[str, list[str]]:
    return {
        str(f.relative_to(out)): sorted(f.read_text().splitlines())
        for f in sorted(out.rglob("rejects*.jsonl"))
    }


def assert_same_job(dask_out: Path, direct_out: Path) -> None:
    hashes = shard_hashes(dask_out)
    assert hashes and hashes == shard_hashes(direct_out)
    assert comparable(dask_out) == comparable(direct_out)
    assert rejects(dask_out) == rejects(direct_out)
    for manifest in sorted(direct_out.glob("seq*/*/manifest.json")):
        ours = json.loads((dask_out / manifest.relative_to(direct_out)).read_text())
        theirs = json.loads(manifest.read_text())
        assert ours["counts"] == theirs["counts"] and ours["totals"] == theirs["totals"]


@pytest.fixture(scope="module")
def direct_sample(tmp_path_factory) -> Path:
    """The embedded sample's job on the DirectRunner (in memory), run once for this module."""
    out = tmp_path_factory.mktemp("direct-sample") / "direct"
    run_cli(out, ["--direct_running_mode=in_memory"])
    return out


def test_the_sample_job_on_dask_writes_the_direct_runners_shards(
    tmp_path, dask_cluster, direct_sample, monitors
):
    run_cli(tmp_path / "dask", on_dask(dask_cluster))
    assert_same_job(tmp_path / "dask", direct_sample)
    # Progress lines: the workers' progress files reach the launcher's monitors, to the end.
    assert {m.label for m in monitors} >= {"clean", "tokenize"}
    for monitor in monitors:
        assert monitor.observed, monitor.label
        assert monitor.total is None or monitor.observed[-1] == monitor.total, monitor.label
    assert not list((tmp_path / "dask").rglob(".progress"))
    assert not list((tmp_path / "dask").rglob(".bertprep-shared-*"))
    # Resume markers hold on Dask too: a second run skips every stage.
    run_cli(tmp_path / "dask", on_dask(dask_cluster))
    summary = json.loads((tmp_path / "dask" / "run_summary.json").read_text())
    assert {s["status"] for s in summary["stages"]} == {"skipped"}


def test_the_instances_command_on_dask(
    tmp_path, dask_cluster, sample_corpus_files, sample_vocab_path
):
    args = ["instances", "--vocab", str(sample_vocab_path), "--dupe-factor", "2"]
    for f in sample_corpus_files:
        args += ["--input", str(f)]
    hashes = {}
    for name, beam_args in (
        ("direct", ["--direct_running_mode=in_memory"]),
        ("dask", on_dask(dask_cluster)),
    ):
        assert main([*args, "--output", str(tmp_path / name), *beam_args]) == 0
        manifest = json.loads((tmp_path / name / "manifest.json").read_text())
        hashes[name] = ([s["content_sha256"] for s in manifest["shards"]], manifest["totals"])
    assert hashes["dask"] == hashes["direct"] and hashes["dask"][1]["instances"] > 0


@pytest.mark.slow
def test_a_real_data_job_on_dask_writes_the_multi_process_runners_shards(tmp_path, dask_cluster):
    """~3.5 MB of real text: a Wikipedia dump (~3 MB of articles) and a book."""
    wiki = require_corpora(
        "wiki", "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"
    )
    books = [require_corpora("books", "105.txt")]
    corpus = (f"inputs.wikipedia=[{wiki}]", f"inputs.books=[{','.join(map(str, books))}]")
    run_cli(tmp_path / "direct", ["--direct_running_mode=multi_processing"], *corpus)
    run_cli(tmp_path / "dask", on_dask(dask_cluster), *corpus)
    assert_same_job(tmp_path / "dask", tmp_path / "direct")
    summary = json.loads((tmp_path / "dask" / "run_summary.json").read_text())
    assert summary["phases"][0]["train"]["instances"] > 10_000


@pytest.fixture
def killable_cluster():
    """A cluster of its own (2 worker processes under nannies, which restart a killed one)."""
    from distributed import LocalCluster

    from pipeline.runtime.dask_runner import close_clients

    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=":0"
    )
    try:
        yield cluster
    finally:
        close_clients()
        cluster.close()


@pytest.mark.parametrize("kill_in", ["clean", "phase"])
def test_a_worker_killed_mid_stage_leaves_the_same_shards(
    tmp_path, killable_cluster, kill_in, direct_sample
):
    out = tmp_path / "dask"
    client = dask_client(killable_cluster.scheduler_address)
    pids = list(client.run(os.getpid).values())
    config = load_run_config(SAMPLE, [f"output={out}"])
    failure: list[BaseException] = []

    def job() -> None:
        try:
            run_all(config, lambda: make_pipeline_options(on_dask(killable_cluster)))
        except BaseException as e:  # reported by the test thread
            failure.append(e)

    def reached() -> bool:
        if kill_in == "clean":  # a chunk is staged: the clean stage is half done
            return any((out / "clean" / ".staging").glob("chunk-*.parquet"))
        return any((out / "seq128" / "train" / ".spill").rglob("*.*"))  # instances spilled

    thread = threading.Thread(target=job)
    thread.start()
    deadline = time.monotonic() + 120
    while not reached() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    killed = thread.is_alive()
    if killed:
        os.kill(pids[0], signal.SIGKILL)
    thread.join(300)
    assert not thread.is_alive()
    assert killed, "the job ended before the kill point"
    assert pids[0] not in client.run(os.getpid).values()  # its nanny started a new one
    if failure:  # a clear error, nothing half-written: the same command resumes
        assert not isinstance(failure[0], (FileNotFoundError, KeyError)), failure[0]
        run_all(config, lambda: make_pipeline_options(on_dask(killable_cluster)))
    assert shard_hashes(out) == shard_hashes(direct_sample)
    assert not list(out.rglob(".staging")) and not list(out.rglob("*.partial-*"))


def test_a_directory_a_worker_cannot_see_is_named_before_any_work(
    tmp_path, dask_cluster, monkeypatch
):
    # The launcher moves away from the workers' working directory: a relative path is one the
    # workers do not see (as a directory on the launcher's own disk is, on a cluster).
    monkeypatch.chdir(tmp_path)
    client = dask_client(dask_cluster.scheduler_address)
    with pytest.raises(SharedPathError, match=r"2 of 2 Dask workers .* do not see here/out"):
        check_workers_see(client, "here/out")
    assert list((tmp_path / "here" / "out").iterdir()) == []  # the marker is removed
    check_workers_see(client, str(tmp_path / "here" / "out"))  # an absolute path: seen


class ReadsLocalFile(beam.DoFn):
    def process(self, path):
        with open(path) as f:
            yield f.read()


def test_a_file_only_the_launcher_sees_fails_saying_so(tmp_path, dask_cluster, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("launcher-only.txt").write_text("text")
    p = beam.Pipeline(options=make_pipeline_options(on_dask(dask_cluster)))
    p | beam.Create(["launcher-only.txt"]) | beam.ParDo(ReadsLocalFile())
    result = p.run()
    with pytest.raises(SharedPathError) as raised:
        result.wait_until_finish()
    message = str(raised.value)
    assert "no such file on the worker at" in message and "launcher-only.txt" in message
    assert "the launcher sees launcher-only.txt, the worker does not" in message
    assert "mounts at the same path, or in a bucket" in message
    # A file missing everywhere stays the worker's FileNotFoundError.
    p = beam.Pipeline(options=make_pipeline_options(on_dask(dask_cluster)))
    p | beam.Create(["nowhere.txt"]) | beam.ParDo(ReadsLocalFile())
    with pytest.raises(FileNotFoundError, match="nowhere.txt") as raised:
        p.run().wait_until_finish()
    assert not isinstance(raised.value, SharedPathError)
