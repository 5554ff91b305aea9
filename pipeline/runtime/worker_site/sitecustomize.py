"""Start-up hook of the processes bertprep starts, imported by Python's ``site`` because this
directory is on their PYTHONPATH (``pipeline.runtime.quiet.quiet_subprocesses``).

With ``BERTPREP_QUIET`` set, it gives the root logger one stderr handler that passes errors only
(critical ones only in a Beam SDK worker: the harness sends every record to the runner, which
logs it in the launcher, so a DoFn's error is not written twice, and a harness that fails to
start still says so), before anything else runs. Beam's SDK worker logs start-up chatter (``apitools not found``,
``Logging handler created``, ``No semi_persistent_directory found``, ``Discarding unparseable
args``) through the root logger, which otherwise gets a WARNING-and-up stderr handler on the
first ``logging.warning`` call and then INFO from the harness; every record still goes to the
runner through Beam's own log handler.

In a Beam SDK worker process (``CONTROL_API_SERVICE_DESCRIPTOR`` set by the runner that started
it), once the harness has finished its work normally (bundles done, DoFns torn down, its log
handler closed), the process ends after the other ``atexit`` handlers with ``os._exit(0)``,
skipping the interpreter's module teardown: the runner stops its workers one after the other and
waits for each to exit, which otherwise costs ~0.5-1.5 s per worker per pipeline. A harness that
fails exits as before. ``BERTPREP_FULL_EXIT=1`` turns this off.

In such a worker the clients Beam imports at its own import and a worker never calls are skipped
(``pipeline.runtime.lean_imports``: BigQuery, Pub/Sub, MongoDB and the Dataflow API client are not
imported, Cloud Storage on first use of a ``gs://`` path): ~0.35 s of every worker's start.
``BERTPREP_WORKER_DATAFLOW_CLIENT=1`` keeps the Dataflow API client.

With ``BERTPREP_QUIET`` set, such a worker ends on SIGINT (Ctrl-C reaches the whole process
group) at once with exit status 130 and no traceback, and the harness's own print of a failed
bundle's traceback to stderr is dropped (the runner gets it and the launcher raises it, or says
in one line what happened: ``pipeline.runtime.failures``).

The garbage collector's thresholds are set from ``BERTPREP_GC_THRESHOLDS``
(``pipeline.runtime.collector``) when bertprep is importable.

A worker forked by ``pipeline.runtime.worker_zygote`` gets the same hooks from
``worker_started()``, called once its environment is the worker's.

Then runs any other ``sitecustomize`` on the path.
"""

import atexit
import contextlib
import logging
import os
import sys

_handler: logging.Handler | None = None


def _quiet_logging() -> None:
    global _handler
    if not os.environ.get("BERTPREP_QUIET"):
        return
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
        logging.getLogger().addHandler(_handler)
    _handler.setLevel(
        logging.CRITICAL if os.environ.get("CONTROL_API_SERVICE_DESCRIPTOR") else logging.ERROR
    )


_quiet_logging()


_harness_done = False


def _exit_now_if_harness_done() -> None:
    if not _harness_done:
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(0)


def _exit_fast_after_harness() -> None:
    if not os.environ.get("CONTROL_API_SERVICE_DESCRIPTOR") or os.environ.get("BERTPREP_FULL_EXIT"):
        return
    from apache_beam.runners.worker import sdk_worker

    run = sdk_worker.SdkHarness.run

    def run_then_exit_fast(self) -> None:
        global _harness_done
        run(self)
        _harness_done = True

    sdk_worker.SdkHarness.run = run_then_exit_fast
    # Registered before anything the worker imports or runs: atexit runs handlers last-in
    # first-out, so every other handler (temporary files, thread pools) has run before this one.
    atexit.register(_exit_now_if_harness_done)


def _skip_unused_clients() -> None:
    if not os.environ.get("CONTROL_API_SERVICE_DESCRIPTOR"):
        return
    with contextlib.suppress(Exception):
        from pipeline.runtime.lean_imports import skip_unused_clients_in_worker

        skip_unused_clients_in_worker()


def _quiet_worker() -> None:
    """In a quiet Beam SDK worker: Ctrl-C (it reaches every process of the terminal's group)
    ends the worker at once with exit status 130 and no traceback, the launcher says what was
    interrupted; and the harness does not print a failed bundle's traceback to stderr itself,
    since it sends it to the runner (which raises it in the launcher) and logs it."""
    if not (os.environ.get("BERTPREP_QUIET") and os.environ.get("CONTROL_API_SERVICE_DESCRIPTOR")):
        return
    import builtins
    import signal

    from apache_beam.runners.worker import sdk_worker

    signal.signal(signal.SIGINT, lambda number, frame: os._exit(128 + number))

    def print_but_not_to_stderr(*args, **kwargs) -> None:
        if kwargs.get("file") is not sys.stderr:
            builtins.print(*args, **kwargs)

    sdk_worker.print = print_but_not_to_stderr


def _chain() -> None:
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def worker_started() -> None:
    """The hooks above, for a worker forked by ``pipeline.runtime.worker_zygote`` from a process
    that imported this module before it had a worker's environment. Not the fast exit: the
    zygote's child ends itself after every ``atexit`` handler, its own and those of the modules
    the zygote imported (registered before this hook could be, so it would skip them)."""
    _quiet_logging()
    _skip_unused_clients()
    _quiet_worker()


def _collector_thresholds() -> None:
    """The launcher's garbage-collector thresholds (``pipeline.runtime.collector``), in a
    process it started as a new one, before its imports. Never fails the process: a value the
    collector module refuses is the command line's to report (it exits 2 naming it)."""
    with contextlib.suppress(Exception):
        from pipeline.runtime.collector import apply_from_environment

        apply_from_environment()


_collector_thresholds()
_skip_unused_clients()
_exit_fast_after_harness()
_quiet_worker()
_chain()
