"""The runner bertprep uses for Beam's DirectRunner: Beam's portable FnApiRunner, always.

Beam 2.77's ``DirectRunner`` first hands every pipeline it considers supported to the Prism
runner, a Go binary it downloads from GitHub on first use: offline, that attempt fails after
translating the whole pipeline (0.3-1.9 s per pipeline measured here, five pipelines per
``bertprep run``); online, the job silently runs on Prism instead, whose modes and worker
processes are not the ones bertprep is tested with. ``FnApiDirectRunner`` goes straight to the
runner the DirectRunner falls back to here, with the same options (``--direct_running_mode``,
``--direct_num_workers``), so where a job runs does not depend on the network.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import threading

from apache_beam.portability import python_urns
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.portability.fn_api_runner import fn_runner, worker_handlers

from pipeline.runtime.worker_zygote import Zygote

RUNNER = f"{__name__}.FnApiDirectRunner"
"""The ``--runner`` value ``pipeline.runtime.beam_options`` gives a job that asked for the DirectRunner."""


FORKED_SDK = "bertprep:forked_sdk:v1"
"""The environment URN of SDK workers forked by ``pipeline.runtime.worker_zygote``."""


def start_zygote() -> None:
    """Starts the worker zygote now, so that its imports overlap the launcher's own start."""
    Zygote.get()


_pipeline_modules: list[str] = []


def remember_pipeline_modules(pipeline) -> None:
    """The modules of ``pipeline``'s DoFns and transforms (not Beam's), for the zygote to import
    once before it forks the pipeline's workers."""
    from apache_beam.pipeline import PipelineVisitor

    found: dict[str, None] = {}

    class Modules(PipelineVisitor):
        def visit_transform(self, applied) -> None:
            for thing in (applied.transform, getattr(applied.transform, "fn", None)):
                module = type(thing).__module__ if thing is not None else ""
                if module and not module.startswith(("apache_beam", "builtins", "__main__")):
                    found[module] = None

        enter_composite_transform = visit_transform

    pipeline.visit(Modules())
    _pipeline_modules[:] = list(found)


WORKER_THREAD = "run_worker"
"""The name of the launcher's thread that runs one SDK worker and reports its exit (Beam's)."""


@worker_handlers.WorkerHandler.register_environment(FORKED_SDK, bytes)
class ForkedSdkWorkerHandler(worker_handlers.SubprocessSdkWorkerHandler):
    """Beam's subprocess worker handler, its worker forked by the zygote when one is usable."""

    def start_worker(self) -> None:
        from apache_beam.runners.portability import local_job_service

        self.worker = local_job_service.SubprocessSdkWorker(
            self._worker_command_line, self.control_address, self.provision_info, self.worker_id
        )
        self.worker_thread = threading.Thread(
            name=WORKER_THREAD, target=_run_worker, args=(self.worker, list(_pipeline_modules))
        )
        self.worker_thread.start()


def _run_worker(worker, modules: list[str]) -> None:
    """What ``SubprocessSdkWorker.run`` does (a logging service for the worker, the worker's
    environment, an error naming a non-zero exit status), with the worker forked by the zygote
    when it is usable and started by ``/bin/sh`` otherwise."""
    import grpc
    from apache_beam.portability.api import beam_fn_api_pb2_grpc, endpoints_pb2
    from apache_beam.runners.portability.local_job_service import BeamFnLoggingServicer
    from apache_beam.utils import thread_pool_executor
    from google.protobuf import json_format, text_format

    logging_server = grpc.server(
        thread_pool_executor.shared_unbounded_instance(),
        options=[("grpc.http2.max_pings_without_data", 0), ("grpc.http2.max_ping_strikes", 0)],
    )
    port = logging_server.add_insecure_port("[::]:0")
    logging_server.start()
    beam_fn_api_pb2_grpc.add_BeamFnLoggingServicer_to_server(
        BeamFnLoggingServicer(), logging_server
    )

    def descriptor(url: str) -> str:
        return text_format.MessageToString(endpoints_pb2.ApiServiceDescriptor(url=url))

    env = dict(
        os.environ,
        CONTROL_API_SERVICE_DESCRIPTOR=descriptor(worker._control_address),
        LOGGING_API_SERVICE_DESCRIPTOR=descriptor(f"localhost:{port}"),
        PIPELINE_OPTIONS=json_format.MessageToJson(
            worker._provision_info.provision_info.pipeline_options
        ),
    )
    if worker._worker_id:
        env["WORKER_ID"] = worker._worker_id
    try:
        zygote = Zygote.get()
        if zygote is not None and zygote.usable_for(env, worker._worker_command_line):
            status = zygote.fork_worker(env, modules)
        else:
            with worker_handlers.SUBPROCESS_LOCK:
                process = subprocess.Popen(worker._worker_command_line, shell=True, env=env)
            try:
                status = process.wait()
            finally:
                if process.poll() is None:
                    process.kill()
        if status:
            raise RuntimeError(f"Worker subprocess exited with return code {status}")
    finally:
        logging_server.stop(0)


def fork_workers(pipeline_proto) -> None:
    """Makes the pipeline's multi-process SDK workers forked ones (``ForkedSdkWorkerHandler``)."""
    for environment in pipeline_proto.components.environments.values():
        if environment.urn == python_urns.SUBPROCESS_SDK:
            environment.urn = FORKED_SDK


def exec_workers(pipeline_proto) -> None:
    """Makes each multi-process SDK worker's shell command ``exec`` the worker: Beam starts it
    through ``/bin/sh -c``, and a worker killed by a signal (the kernel's out-of-memory killer,
    ``kill -9``) then left the shell to print ``Killed`` on the user's terminal and report the
    signal as exit status 128 + N. With ``exec`` the worker is the shell's process: no such
    line, and the runner sees the signal itself (return code -N)."""
    for environment in pipeline_proto.components.environments.values():
        if environment.urn == python_urns.SUBPROCESS_SDK and not environment.payload.startswith(
            b"exec "
        ):
            environment.payload = b"exec " + environment.payload


_runs = itertools.count(1)
_running: int | None = None


def running_pipeline() -> int | None:
    """The number of the pipeline this process is running now (each run gets the next), or
    None between pipelines: ``pipeline.runtime.failures`` tells by it whether the pipeline a
    dead worker belonged to is still running."""
    return _running


class ExecWorkersFnApiRunner(fn_runner.FnApiRunner):
    """Beam's FnApiRunner, its multi-process workers started through ``exec_workers``."""

    def run_via_runner_api(self, pipeline_proto, options):
        global _running
        exec_workers(pipeline_proto)
        fork_workers(pipeline_proto)
        _running = next(_runs)
        try:
            return super().run_via_runner_api(pipeline_proto, options)
        finally:
            _running = None


class FnApiDirectRunner(SwitchingDirectRunner):
    """Beam's DirectRunner without its Prism attempt: every pipeline runs on the FnApiRunner."""

    def run_pipeline(self, pipeline, options):
        from apache_beam.portability.api import beam_provision_api_pb2
        from apache_beam.runners.portability.portable_runner import JobServiceHandle

        encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
        info = fn_runner.ExtendedProvisionInfo(
            beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)
        )
        remember_pipeline_modules(pipeline)
        return ExecWorkersFnApiRunner(provision_info=info).run_pipeline(pipeline, options)


def start(pipeline):
    """``pipeline.run()``, skipping Beam's construction-time pickling round trip of every
    transform where the runner is ``FnApiDirectRunner``.

    ``Pipeline.run`` skips that check for Beam's own DirectRunner by its class name, since the
    pipeline goes through the Fn API (and so through pickling) anyway; this subclass's name does
    not match, so without this every pipeline paid it again (~0.2 s of the launcher per
    pipeline, measured on the phases). Other runners keep Beam's default.
    """
    local = isinstance(pipeline.runner, FnApiDirectRunner)
    return pipeline.run(test_runner_api=False if local else "AUTO")
