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

from apache_beam.portability import python_urns
from apache_beam.runners.direct.direct_runner import SwitchingDirectRunner
from apache_beam.runners.portability.fn_api_runner import fn_runner

RUNNER = f"{__name__}.FnApiDirectRunner"
"""The ``--runner`` value ``pipeline.runtime.beam_options`` gives a job that asked for the DirectRunner."""


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
        return ExecWorkersFnApiRunner(provision_info=info).run_pipeline(pipeline, options)
