"""The classification of what ended a command (pure), its one line, the stage record, and the
launcher's holding back of the runner's noise (real threads and log records)."""

from __future__ import annotations

import errno
import io
import logging
import threading
import time

import pytest

from pipeline.runtime import local_runner
from pipeline.runtime.failures import (
    DISK_FULL,
    INTERRUPTED,
    WORKER_DIED,
    Failure,
    RunnerNoise,
    Stage,
    WorkerLostError,
    classify,
    current_stage,
    describe,
    describe_exit_status,
    exception_chain,
    reset_stage,
    running_stage,
)


def raised(make, cause: BaseException | None = None) -> BaseException:
    """``make()`` raised (from ``cause`` if given, else inside its handling), caught."""
    try:
        if cause is None:
            raise make()
        try:
            raise cause
        except BaseException:
            raise make()  # noqa: B904 (the implicit __context__ is the point)
    except BaseException as e:
        return e


def test_an_interrupt_also_when_beam_rewraps_it():
    assert classify(KeyboardInterrupt()) == Failure(INTERRUPTED)
    wrapped = raised(
        lambda: RuntimeError("KeyboardInterrupt [while running 'TrainPunkt']"),
        KeyboardInterrupt(),
    )
    assert classify(wrapped).kind == INTERRUPTED
    assert classify(wrapped).exit_code == 130


def test_a_full_disk_by_errno_names_the_file():
    e = raised(lambda: RuntimeError("x"), OSError(errno.ENOSPC, "No space left on device", "/d/f"))
    assert classify(e) == Failure(DISK_FULL, "/d/f", "No space left on device")
    assert classify(e).exit_code == 1
    quota = OSError(errno.EDQUOT, "Disk quota exceeded")
    assert classify(quota) == Failure(DISK_FULL, None, "Disk quota exceeded")


def test_a_full_disk_as_text_prefers_the_mention_naming_a_file():
    """Multi-process mode: only the worker's traceback, as the message of a RuntimeError."""
    text = (
        "Traceback ...\nOSError: [Errno 28] No space left on device\n\nThe above exception was "
        "the direct cause ...\nRuntimeError: OSError: [Errno 28] No space left on device: "
        "'/out/clean/.staging/chunk-0.parquet' [while running 'Stage']"
    )
    assert classify(RuntimeError(text)) == Failure(
        DISK_FULL, "/out/clean/.staging/chunk-0.parquet", "No space left on device"
    )
    assert classify(RuntimeError("IOError: [errno 28] no space left on device")).path is None


def test_a_dead_worker_with_the_status_its_thread_saw():
    gone = RuntimeError("Channel closed prematurely.")
    exited = RuntimeError("Worker subprocess exited with return code -9")
    assert classify(gone, [exited]) == Failure(WORKER_DIED, exit_status=-9)
    assert classify(gone) == Failure(WORKER_DIED)
    lost = WorkerLostError("Worker subprocess exited with return code 137; the runner kept ...")
    assert classify(lost) == Failure(WORKER_DIED, exit_status=137)
    # Ctrl-C reaches the workers too: one ended by SIGINT means the run was interrupted.
    by_sigint = RuntimeError("Worker subprocess exited with return code -2")
    assert classify(gone, [by_sigint]).kind == INTERRUPTED


def test_anything_else_keeps_its_traceback():
    assert classify(ValueError("bad record")) is None
    assert classify(RuntimeError("ValueError: x [while running 'Stage']")) is None
    assert classify(OSError(errno.EACCES, "Permission denied", "/x")) is None
    # A worker that exited does not explain an error that has nothing of Beam's runner in it.
    assert (
        classify(ValueError("x"), [RuntimeError("Worker subprocess exited with return code 1")])
        is None
    )


def test_the_chain_is_walked_once_even_with_a_cycle():
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__context__, b.__context__ = b, a
    assert exception_chain(a) == [a, b]
    assert classify(a) is None


def test_exit_statuses_in_words():
    assert describe_exit_status(-9) == "killed by signal 9, SIGKILL"
    assert describe_exit_status(137) == "exit status 137: killed by signal 9, SIGKILL"
    assert describe_exit_status(3) == "exit status 3"
    assert describe_exit_status(None) == "exit status unknown"


def test_the_lines():
    clean = Stage(("clean",), ("/o/clean",))
    phases = Stage(("phase:a", "phase:b"), ("/o/a", "/o/b"))
    resume = "rerun to resume, finished stages are kept"
    assert describe(Failure(INTERRUPTED), clean) == f"interrupted during stage clean; {resume}"
    assert describe(Failure(INTERRUPTED), None) == "interrupted; rerun the command to start over"
    assert describe(Failure(WORKER_DIED, exit_status=-9), phases) == (
        "error: a Beam worker process died during stages phase:a, phase:b "
        f"(killed by signal 9, SIGKILL); {resume}"
    )
    full = Failure(DISK_FULL, "/o/clean/x.parquet", "No space left on device")
    assert describe(full, clean) == (
        "error: no space left on device (writing /o/clean/x.parquet) during stage clean; "
        f"free space and {resume}"
    )
    unnamed = Failure(DISK_FULL, None, "No space left on device")
    assert "(writing under /o)" in describe(unnamed, phases)
    assert describe(unnamed, None, "/given").startswith(
        "error: no space left on device (writing under /given); free space and rerun the command"
    )


def test_the_stage_is_restored_after_it_ran_and_kept_when_it_failed():
    reset_stage()
    with running_stage(["clean"], ["/o/clean"]):
        assert current_stage() == Stage(("clean",), ("/o/clean",))
    assert current_stage() is None
    with pytest.raises(OSError), running_stage(["split"], ["/o/split"]):
        raise OSError("x")
    assert str(current_stage()) == "stage split"
    reset_stage()
    assert current_stage() is None


@pytest.fixture
def root_stream():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    logging.getLogger().addHandler(handler)
    yield stream
    logging.getLogger().removeHandler(handler)


def _thread_raises(message: str) -> None:
    def fail():
        raise RuntimeError(message)

    t = threading.Thread(target=fail)
    t.start()
    t.join()


@pytest.fixture
def previous_hook(monkeypatch) -> list[str]:
    """The thread exception hook in place before the block: records what reaches it."""
    reached: list[str] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: reached.append(str(args.exc_value)))
    return reached


def test_held_noise_is_dropped_when_explained(root_stream, previous_hook):
    with RunnerNoise(hold=True) as noise:
        logging.getLogger("apache_beam.runners.portability.x").error("Channel closed")
        logging.getLogger("bertprep.mine").error("ours")
        _thread_raises("Worker subprocess exited with return code -9")
        noise.drop()
    assert root_stream.getvalue() == "ours\n"
    assert previous_hook == []
    assert [str(e) for e in noise.thread_errors] == ["Worker subprocess exited with return code -9"]


def test_a_worker_exit_reported_just_after_the_line_is_still_dropped(previous_hook):
    """Ctrl-C reaches the launcher and its workers: the launcher says so in one line, and a
    moment later a worker thread reports its worker's exit status 130. That report is held and
    dropped with the rest, not printed under the line by the restored hook."""

    def late_report() -> None:
        time.sleep(0.3)
        raise RuntimeError("Worker subprocess exited with return code 130")

    worker = threading.Thread(target=late_report, name=local_runner.WORKER_THREAD)
    with RunnerNoise(hold=True) as noise:
        worker.start()
        noise.drop()
    assert not worker.is_alive()
    assert previous_hook == []
    assert [str(e) for e in noise.thread_errors] == [
        "Worker subprocess exited with return code 130"
    ]


def test_held_noise_is_written_when_not_explained(root_stream, previous_hook):
    with RunnerNoise(hold=True):
        logging.getLogger("apache_beam.runners.worker.sdk_worker").error("a bundle failed")
        _thread_raises("something else")
        assert root_stream.getvalue() == "" and previous_hook == []
    assert root_stream.getvalue() == "a bundle failed\n"
    assert previous_hook == ["something else"]


def test_not_holding_only_records_the_thread_errors(root_stream, previous_hook):
    with RunnerNoise(hold=False) as noise:
        logging.getLogger("apache_beam.runners.common").error("shown")
        _thread_raises("Worker subprocess exited with return code 1")
        assert root_stream.getvalue() == "shown\n"
        assert previous_hook == ["Worker subprocess exited with return code 1"]
    assert len(noise.thread_errors) == 1


def test_a_runner_left_waiting_for_a_dead_worker_is_stopped(monkeypatch, previous_hook):
    """The worker's thread reports its exit while the pipeline runs on: after the grace the main
    thread raises WorkerLostError; once that pipeline is over, nothing is raised."""
    monkeypatch.setattr(local_runner, "_running", 7)
    started = time.monotonic()
    with pytest.raises(WorkerLostError) as lost, RunnerNoise(hold=True, grace_s=0.2):
        _thread_raises("Worker subprocess exited with return code -9")
        while time.monotonic() - started < 30:
            time.sleep(0.01)
    assert time.monotonic() - started < 10
    assert classify(lost.value) == Failure(WORKER_DIED, exit_status=-9)

    with RunnerNoise(hold=True, grace_s=0.1):
        _thread_raises("Worker subprocess exited with return code -9")
        monkeypatch.setattr(local_runner, "_running", None)  # that pipeline ended meanwhile
        time.sleep(0.5)
